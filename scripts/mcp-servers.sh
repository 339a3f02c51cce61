#!/usr/bin/env bash
# Install, cache and test against real Model Context Protocol servers.
#
# Everything comes from package registries only:
#   * @modelcontextprotocol/server-everything  (npm, pinned below): stdio, and
#     Streamable HTTP with the `streamableHttp` argument (port from $PORT)
#   * mcp-server-time                          (PyPI, pinned below): stdio
#   * mcp, the official Python SDK             (PyPI, pinned below): serves
#     tests/fixtures/mcp_sdk_server.py, protocol 2026-07-28, stdio and HTTP
#   * mcp 1.12 (PyPI, pinned below, with the pydantic of its day): the
#     2025 generation, tests/fixtures/mcp_sdk1_server.py over HTTP
#
# Usage:
#   scripts/mcp-servers.sh install   install both into the cache (idempotent)
#   scripts/mcp-servers.sh dir       print the cache dir (what PIKURI_MCP_CACHE is set to)
#   scripts/mcp-servers.sh sdk-dir   print the SDK's venv dir (what PIKURI_MCP_SDK is set to)
#   scripts/mcp-servers.sh sdk1-dir  print the 1.12 SDK's venv dir (PIKURI_MCP_SDK1)
#   scripts/mcp-servers.sh test      install (and scripts/mcp-oauth.sh install), then run
#                                    the `mcp` test target with PIKURI_MCP_CACHE,
#                                    PIKURI_MCP_SDK and PIKURI_MCP_OAUTH set and
#                                    PIKURI_REQUIRE_MCP=1
#
# Environment:
#   PIKURI_CACHE   cache root (default: $HOME/.cache/pikuri)
#   PYTHON         python used for the venv (default: python3)
#   NPM            npm binary (default: npm)
#
# Cache layout (<dir> = $PIKURI_CACHE/mcp-<everything version>-<time version>):
#   everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js
#   time-venv/bin/mcp-server-time
#   .installed (stamp)
# and apart, so that a change of either does not reinstall the other
# (<sdk> = $PIKURI_CACHE/mcp-sdk-<mcp version>):
#   venv/bin/python (with mcp installed), .installed (stamp)
# and the same for 1.12 under $PIKURI_CACHE/mcp-sdk-<1.12 version>.
#
# All diagnostics go to stderr; stdout carries only the requested value.

set -euo pipefail
# cache_lock, pip_venv
source "$(dirname "$0")/lib/cache.sh"

readonly EVERYTHING_VERSION="2026.8.31"
readonly TIME_VERSION="2026.10.19"
readonly SDK_VERSION="2.3.0"
# The 2025 generation's SDK (issue 38, item 16: its server refuses a request
# that beats `notifications/initialized`). mcp 1.12 does not import with the
# pydantic of today (a private name it used is gone): pin the one of its day.
readonly SDK1_VERSION="1.12.4"
readonly SDK1_PYDANTIC="2.11.7"

CACHE_ROOT="${PIKURI_CACHE:-${HOME}/.cache/pikuri}"
PREFIX="${CACHE_ROOT}/mcp-${EVERYTHING_VERSION}-${TIME_VERSION}"
STAMP="${PREFIX}/.installed"
STAMP_CONTENT="server-everything=${EVERYTHING_VERSION} mcp-server-time=${TIME_VERSION}"
SDK_PREFIX="${CACHE_ROOT}/mcp-sdk-${SDK_VERSION}"
SDK_STAMP="${SDK_PREFIX}/.installed"
SDK1_PREFIX="${CACHE_ROOT}/mcp-sdk-${SDK1_VERSION}"
SDK1_STAMP="${SDK1_PREFIX}/.installed"
PYTHON="${PYTHON:-python3}"
NPM="${NPM:-npm}"

log() { printf '[mcp-servers.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '/^# Usage:/,/^# All diagnostics/p' "$0" | sed 's/^# \{0,1\}//' >&2
}

is_installed() {
    [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_CONTENT" ] \
        && [ -f "${PREFIX}/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ] \
        && [ -x "${PREFIX}/time-venv/bin/mcp-server-time" ]
}

cmd_install() {
    if is_installed; then
        log "found in the cache: ${PREFIX}"
        return 0
    fi
    command -v "$NPM" >/dev/null 2>&1 || die "npm not found (install Node.js 18+)"
    command -v "$PYTHON" >/dev/null 2>&1 || die "${PYTHON} not found"
    cache_lock "${PREFIX}/.lock"
    if is_installed; then return 0; fi
    rm -f "$STAMP"
    log "npm install @modelcontextprotocol/server-everything@${EVERYTHING_VERSION}"
    mkdir -p "${PREFIX}/everything"
    "$NPM" install --prefix "${PREFIX}/everything" --no-audit --no-fund --loglevel=error \
        "@modelcontextprotocol/server-everything@${EVERYTHING_VERSION}" >&2
    log "venv + pip install mcp-server-time==${TIME_VERSION}"
    pip_venv "${PREFIX}/time-venv" "mcp-server-time==${TIME_VERSION}"
    printf '%s' "$STAMP_CONTENT" >"$STAMP"
    is_installed || die "install finished but the servers are not where expected"
    log "installed into ${PREFIX}"
}

sdk_installed() {
    [ -f "$SDK_STAMP" ] && [ "$(cat "$SDK_STAMP")" = "mcp=${SDK_VERSION}" ] \
        && "${SDK_PREFIX}/venv/bin/python" -c 'import mcp.server.mcpserver' 2>/dev/null
}

cmd_install_sdk() {
    if sdk_installed; then
        log "found in the cache: ${SDK_PREFIX}"
        return 0
    fi
    command -v "$PYTHON" >/dev/null 2>&1 || die "${PYTHON} not found"
    mkdir -p "$SDK_PREFIX"
    rm -f "$SDK_STAMP"
    log "venv + pip install mcp==${SDK_VERSION}"
    pip_venv "${SDK_PREFIX}/venv" "mcp==${SDK_VERSION}"
    printf '%s' "mcp=${SDK_VERSION}" >"$SDK_STAMP"
    sdk_installed || die "install finished but the SDK does not import"
    log "installed into ${SDK_PREFIX}"
}

sdk1_installed() {
    [ -f "$SDK1_STAMP" ] && [ "$(cat "$SDK1_STAMP")" = "mcp=${SDK1_VERSION} pydantic=${SDK1_PYDANTIC}" ] \
        && "${SDK1_PREFIX}/venv/bin/python" -c 'import mcp.server.fastmcp' 2>/dev/null
}

cmd_install_sdk1() {
    if sdk1_installed; then
        log "found in the cache: ${SDK1_PREFIX}"
        return 0
    fi
    command -v "$PYTHON" >/dev/null 2>&1 || die "${PYTHON} not found"
    mkdir -p "$SDK1_PREFIX"
    rm -f "$SDK1_STAMP"
    log "venv + pip install mcp==${SDK1_VERSION} pydantic==${SDK1_PYDANTIC}"
    pip_venv "${SDK1_PREFIX}/venv" "mcp==${SDK1_VERSION}" "pydantic==${SDK1_PYDANTIC}"
    printf '%s' "mcp=${SDK1_VERSION} pydantic=${SDK1_PYDANTIC}" >"$SDK1_STAMP"
    sdk1_installed || die "install finished but the 1.12 SDK does not import"
    log "installed into ${SDK1_PREFIX}"
}

cmd_test() {
    cmd_install
    cmd_install_sdk
    cmd_install_sdk1
    cd "$(dirname "$0")/.."
    # PIKURI_REQUIRE_MCP=1: a missing install fails the tests instead of skipping them.
    # The chat example is run as a process by tests/mcp/chat.rs.
    cargo build --example chat >&2
    # The OAuth tests need the Python SDK (scripts/mcp-oauth.sh, PyPI).
    local oauth
    oauth="$(scripts/mcp-oauth.sh install >&2 && scripts/mcp-oauth.sh dir)"
    PIKURI_MCP_CACHE="$PREFIX" PIKURI_MCP_SDK="${SDK_PREFIX}/venv" PIKURI_MCP_OAUTH="$oauth" \
        PIKURI_MCP_SDK1="${SDK1_PREFIX}/venv" \
        PIKURI_REQUIRE_MCP=1 cargo test --test mcp -- --test-threads=2
}

case "${1:-}" in
    install) cmd_install; cmd_install_sdk; cmd_install_sdk1 ;;
    dir) printf '%s\n' "$PREFIX" ;;
    sdk-dir) printf '%s\n' "${SDK_PREFIX}/venv" ;;
    sdk1-dir) printf '%s\n' "${SDK1_PREFIX}/venv" ;;
    test) cmd_test ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
esac
