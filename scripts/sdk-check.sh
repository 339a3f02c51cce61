#!/usr/bin/env bash
# Check that the official Python SDKs parse every shape pikuri's FakeServer
# serves (chat completions, Anthropic Messages, OpenAI Responses, Gemini).
#
# Everything comes from PyPI only, pinned below:
#   * openai     (the OpenAI Python SDK: chat completions and Responses)
#   * anthropic  (the Anthropic Python SDK: Messages)
#   * google-genai (Google's Gen AI Python SDK: Gemini generateContent,
#                  streamGenerateContent and cachedContents)
#
# Usage:
#   scripts/sdk-check.sh install   create the venv in the cache and pip install all three (idempotent)
#   scripts/sdk-check.sh python    print the venv's python (what PIKURI_SDK_PYTHON is set to)
#   scripts/sdk-check.sh test      install, then run the `sdk` tests of the integration
#                                  target with PIKURI_SDK_PYTHON set and PIKURI_REQUIRE_SDK=1
#
# Environment:
#   PIKURI_CACHE   cache root (default: $HOME/.cache/pikuri)
#   PYTHON         python used for the venv (default: python3)
#
# Cache layout (<dir> = $PIKURI_CACHE/sdk-openai-<version>-anthropic-<version>-genai-<version>;
# a pin change names a new directory, so an old venv is never reused):
#   venv/bin/python
#   .installed (stamp)
#
# The test (tests/integration/sdk.rs) starts a FakeServer and runs
# scripts/sdk_check.py against it with that python.
#
# All diagnostics go to stderr; stdout carries only the requested value.

set -euo pipefail
# venv_stamped, venv_install (and cache_lock, pip_venv under them)
source "$(dirname "$0")/lib/cache.sh"

readonly OPENAI_VERSION="3.51.0"
readonly ANTHROPIC_VERSION="2.10.0"
readonly GENAI_VERSION="3.6.1"

CACHE_ROOT="${PIKURI_CACHE:-${HOME}/.cache/pikuri}"
PREFIX="${CACHE_ROOT}/sdk-openai-${OPENAI_VERSION}-anthropic-${ANTHROPIC_VERSION}-genai-${GENAI_VERSION}"
STAMP="${PREFIX}/.installed"
STAMP_CONTENT="openai=${OPENAI_VERSION} anthropic=${ANTHROPIC_VERSION} google-genai=${GENAI_VERSION}"
PYTHON="${PYTHON:-python3}"

log() { printf '[sdk-check.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '/^# Usage:/,/^# All diagnostics/p' "$0" | sed 's/^# \{0,1\}//' >&2
}

is_installed() { venv_stamped; }

cmd_install() {
    venv_install "openai==${OPENAI_VERSION}" "anthropic==${ANTHROPIC_VERSION}" \
        "google-genai==${GENAI_VERSION}"
}

cmd_test() {
    cmd_install
    cd "$(dirname "$0")/.."
    # PIKURI_REQUIRE_SDK=1: a missing venv fails the tests instead of skipping them.
    PIKURI_SDK_PYTHON="${PREFIX}/venv/bin/python" PIKURI_REQUIRE_SDK=1 \
        cargo test --test integration sdk:: -- --test-threads=2
}

case "${1:-}" in
    install) cmd_install ;;
    python) printf '%s\n' "${PREFIX}/venv/bin/python" ;;
    test) cmd_test ;;
    -h|--help|help) usage ;;
    *) usage; exit 2 ;;
esac
