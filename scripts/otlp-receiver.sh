#!/usr/bin/env bash
# Install and cache a real OTLP/HTTP receiver, and test the exporter against it.
#
# The receiver comes from a package registry only:
#   * rotel (PyPI, pinned below): a Rust OpenTelemetry collector whose wheel
#     ships the `rotel-agent` binary. Its OTLP/HTTP receiver decodes OTLP JSON
#     into the protobuf types (a malformed body gets 400), and its debug log
#     prints every span it decoded (ids, parent, name, kind, status,
#     attributes, events), which the test reads back.
#
# Usage:
#   scripts/otlp-receiver.sh install   install into the cache (idempotent)
#   scripts/otlp-receiver.sh bin       print the path of rotel-agent (PIKURI_OTLP_RECEIVER)
#   scripts/otlp-receiver.sh test      install, then run the `otel` test target with
#                                      PIKURI_OTLP_RECEIVER set and PIKURI_REQUIRE_OTLP=1
#
# Environment:
#   PIKURI_CACHE   cache root (default: $HOME/.cache/pikuri)
#   PYTHON         python used for the venv (default: python3)
#
# All diagnostics go to stderr; stdout carries only the requested value.

set -euo pipefail
# venv_stamped, venv_install (and cache_lock, pip_venv under them)
source "$(dirname "$0")/lib/cache.sh"

readonly ROTEL_VERSION="0.0.1a15"

CACHE_ROOT="${PIKURI_CACHE:-${HOME}/.cache/pikuri}"
PREFIX="${CACHE_ROOT}/otlp-rotel-${ROTEL_VERSION}"
STAMP="${PREFIX}/.installed"
STAMP_CONTENT="rotel=${ROTEL_VERSION}"
PYTHON="${PYTHON:-python3}"

log() { printf '[otlp-receiver.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '/^# Usage:/,/^# All diagnostics/p' "$0" | sed 's/^# \{0,1\}//' >&2
}

agent_bin() {
    # The binary sits in the package directory of the venv's site-packages.
    find "${PREFIX}/venv" -path '*/site-packages/rotel/rotel-agent' -type f 2>/dev/null | head -n 1
}

is_installed() {
    venv_stamped && [ -n "$(agent_bin)" ] && [ -x "$(agent_bin)" ]
}

cmd_install() {
    venv_install "rotel==${ROTEL_VERSION}"
    "$(agent_bin)" --version >&2
}

cmd_test() {
    cmd_install
    cd "$(dirname "$0")/.."
    # PIKURI_REQUIRE_OTLP=1: a missing receiver fails the test instead of skipping it.
    PIKURI_OTLP_RECEIVER="$(agent_bin)" PIKURI_REQUIRE_OTLP=1 cargo test --test otel receiver
}

case "${1:-}" in
    install) cmd_install ;;
    bin) is_installed || die "not installed (run: $0 install)"; agent_bin ;;
    test) cmd_test ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
esac
