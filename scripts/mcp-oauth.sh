#!/usr/bin/env bash
# Install and cache the official MCP Python SDK, whose authorization-server
# pieces (`mcp.server.auth`) back tests/fixtures/mcp_oauth_server.py: a real
# MCP server behind OAuth 2.1 with its authorization server, for the OAuth
# tests of the `mcp` test target.
#
# Everything comes from PyPI only:
#   * mcp  (pinned below), into a venv
#
# Usage:
#   scripts/mcp-oauth.sh install   install into the cache (idempotent)
#   scripts/mcp-oauth.sh dir       print the cache dir (what PIKURI_MCP_OAUTH is set to)
#   scripts/mcp-oauth.sh test      install, then run the OAuth tests of the `mcp` target
#                                  with PIKURI_MCP_OAUTH set and PIKURI_REQUIRE_MCP=1
#
# Environment:
#   PIKURI_CACHE   cache root (default: $HOME/.cache/pikuri)
#   PYTHON         python used for the venv (default: python3; needs 3.10+)
#
# Cache layout (<dir> = $PIKURI_CACHE/mcp-sdk-<mcp version>, the venv
# scripts/mcp-servers.sh installs the same SDK into for its 2026 server):
#   venv/bin/python   with `mcp` importable
#   .installed        (stamp)
#
# All diagnostics go to stderr; stdout carries only the requested value.

set -euo pipefail
# venv_stamped, venv_install (and cache_lock, pip_venv under them)
source "$(dirname "$0")/lib/cache.sh"

readonly MCP_VERSION="2.3.0"

CACHE_ROOT="${PIKURI_CACHE:-${HOME}/.cache/pikuri}"
PREFIX="${CACHE_ROOT}/mcp-sdk-${MCP_VERSION}"
STAMP="${PREFIX}/.installed"
STAMP_CONTENT="mcp=${MCP_VERSION}"
PYTHON="${PYTHON:-python3}"

log() { printf '[mcp-oauth.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '/^# Usage:/,/^# All diagnostics/p' "$0" | sed 's/^# \{0,1\}//' >&2
}

is_installed() {
    venv_stamped && "${PREFIX}/venv/bin/python" -c 'import mcp.server.auth' >/dev/null 2>&1
}

cmd_install() {
    venv_install "mcp==${MCP_VERSION}"
}

cmd_test() {
    cmd_install
    cd "$(dirname "$0")/.."
    # PIKURI_REQUIRE_MCP=1: a missing install fails the tests instead of skipping them.
    PIKURI_MCP_OAUTH="$PREFIX" PIKURI_REQUIRE_MCP=1 cargo test --test mcp oauth -- --test-threads=2
}

case "${1:-}" in
    install) cmd_install ;;
    dir) printf '%s\n' "$PREFIX" ;;
    test) cmd_test ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
esac
