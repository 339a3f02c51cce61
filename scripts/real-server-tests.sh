#!/usr/bin/env bash
# Run the `real_server` tests against a real llama.cpp server: installs and
# caches llama-server under ~/.cache/pikuri on first use (about 13 minutes on
# 2 cores), starts it on a free loopback port, runs the tests, stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIKURI_LLAMA_START_TIMEOUT="${PIKURI_LLAMA_START_TIMEOUT:-300}"
started=$(date +%s)
scripts/llama-server.sh install >&2
echo "llama-server installed (or found in the cache) after $(( $(date +%s) - started )) s" >&2
# A second server with a 1024-token context (its own run dir) for the
# compaction tests: conversations longer than the window.
small_dir="$(scripts/llama-server.sh dir)/run-small"
stop_all() {
  scripts/llama-server.sh stop >/dev/null 2>&1 || true
  PIKURI_LLAMA_RUN_DIR="$small_dir" scripts/llama-server.sh stop >/dev/null 2>&1 || true
}
trap stop_all EXIT
# A start that stalls on a loaded machine gets one more try.
if ! url=$(scripts/llama-server.sh start); then
  echo "llama-server did not start; retrying once" >&2
  scripts/llama-server.sh stop >/dev/null 2>&1 || true
  url=$(scripts/llama-server.sh start)
fi
echo "llama-server ready at $url after $(( $(date +%s) - started )) s" >&2
if ! small_url=$(PIKURI_LLAMA_RUN_DIR="$small_dir" scripts/llama-server.sh start -c 1024); then
  echo "small llama-server did not start; retrying once" >&2
  PIKURI_LLAMA_RUN_DIR="$small_dir" scripts/llama-server.sh stop >/dev/null 2>&1 || true
  small_url=$(PIKURI_LLAMA_RUN_DIR="$small_dir" scripts/llama-server.sh start -c 1024)
fi
echo "small llama-server (-c 1024) ready at $small_url" >&2
# PIKURI_REQUIRE_REAL_SERVER=1: a missing URL fails the tests instead of skipping them.
PIKURI_LLAMA_URL="$url" PIKURI_LLAMA_SMALL_URL="$small_url" PIKURI_REQUIRE_REAL_SERVER=1 cargo test --test real_server -- --test-threads=1
echo "real-server stage took $(( $(date +%s) - started )) s" >&2
