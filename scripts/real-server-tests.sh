#!/usr/bin/env bash
# Run the `real_server` tests against a real llama.cpp server: installs and
# caches llama-server under ~/.cache/pikuri on first use (about 12 minutes on
# 2 cores), starts it on a free loopback port, runs the tests, stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
url=$(scripts/llama-server.sh start)
trap 'scripts/llama-server.sh stop >/dev/null 2>&1 || true' EXIT
echo "llama-server ready at $url after $(( $(date +%s) - started )) s" >&2
PIKURI_LLAMA_URL="$url" cargo test --features real-server --test real_server -- --test-threads=1
echo "real-server stage took $(( $(date +%s) - started )) s" >&2
