#!/usr/bin/env bash
# Chat with a real local model in one command: llama.cpp's llama-server and
# SmolLM2-135M-Instruct, built and cached under ~/.cache/pikuri by
# scripts/llama-server.sh (the first run builds llama.cpp: about 13 minutes
# on 2 cores; later runs start in seconds).
#
# Usage:
#   scripts/chat-local.sh [chat args...]     e.g. -p "What is 2+2?"
#
# The arguments go to the chat example (`--help` lists them). The server gets
# its own run directory, so it never disturbs another llama-server started by
# scripts/llama-server.sh, and it is stopped when this script exits (also on
# Ctrl+C or an error). Diagnostics go to stderr; with -p, stdout carries only
# the answer. Exit status: the chat example's.
#
# Environment: PIKURI_CACHE and PIKURI_LLAMA_START_TIMEOUT as for
# scripts/llama-server.sh; CHAT_LOCAL_PROFILE=debug builds the example
# without --release.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/llama-server.sh install >&2

run_dir=$(mktemp -d "${TMPDIR:-/tmp}/pikuri-chat-local.XXXXXX")
export PIKURI_LLAMA_RUN_DIR="$run_dir"
export PIKURI_LLAMA_START_TIMEOUT="${PIKURI_LLAMA_START_TIMEOUT:-300}"
cleanup() {
  scripts/llama-server.sh stop >/dev/null 2>&1 || true
  rm -rf "$run_dir"
}
trap cleanup EXIT
# The shell waits for the chat, which handles Ctrl+C itself; the EXIT trap
# then stops the server.
trap ':' INT

# A start that stalls on a loaded machine gets one more try.
if ! url=$(scripts/llama-server.sh start); then
  echo "llama-server did not start; retrying once" >&2
  scripts/llama-server.sh stop >/dev/null 2>&1 || true
  url=$(scripts/llama-server.sh start)
fi
echo "llama-server (SmolLM2-135M) at $url" >&2

profile=(--release)
[ "${CHAT_LOCAL_PROFILE:-release}" = "debug" ] && profile=()
# Not exec: the EXIT trap must run after the chat ends.
status=0
OPENAI_BASE_URL="$url/v1" OPENAI_MODEL=smollm2 \
  cargo run --quiet "${profile[@]}" --example chat -- "$@" || status=$?
exit "$status"
