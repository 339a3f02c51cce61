#!/usr/bin/env bash
# Listener delivery against an out-of-process replay server (issue 27; see
# BENCHMARKS.md, "Session 7: out of process"): the `turn` bench (2,000
# sequential non-streamed turns on one kept-alive connection, each through
# `Agent::run_loop`; 50-, 20,000- and 200,000-delta streams; bare ureq 3 +
# typed serde, bare + hand-off, pikuri with 0, 1 and 4 no-op listeners;
# wall time and client-process CPU; peak RSS of one streaming agent, text
# and a 200,000-delta tool call) and the `many` bench (1 / 10 / 100 /
# 1,000 streaming agents against as many bare clients: CPU and peak RSS).
# Both start the replay server as a child process of their own, so every
# figure is the client process's.
#
# Usage: scripts/bench-delivery.sh [turn|many|all]
#   RUNS=5         runs per figure; each printed figure is their median
#   INVOCATIONS=1  how many times to run each bench (to see the spread)
#   QUICK=1        smoke sizes (PIKURI_BENCH_QUICK=1), seconds
#   FILTER=...     PIKURI_BENCH_FILTER, e.g. FILTER=non-streamed
#   IN_PROCESS=1   the replay server as a thread of the bench (the old way)
# Output goes to stdout and to target/bench-delivery-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
export PIKURI_BENCH_RUNS=${RUNS:-5}
[ -n "${QUICK:-}" ] && export PIKURI_BENCH_QUICK=1
[ -n "${FILTER:-}" ] && export PIKURI_BENCH_FILTER=$FILTER
[ -n "${IN_PROCESS:-}" ] && export PIKURI_BENCH_IN_PROCESS=1
export CARGO_TERM_COLOR=never
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target"
out="$target/bench-delivery-$(date -u +%Y%m%dT%H%M%SZ).txt"

case $what in
  turn) benches=(turn) ;;
  many) benches=(many) ;;
  all) benches=(turn many) ;;
  *) echo "usage: $0 [turn|many|all]" >&2; exit 2 ;;
esac

cargo build -q --release --benches --features _bench
echo "# $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out"
for b in "${benches[@]}"; do
  for i in $(seq "${INVOCATIONS:-1}"); do
    echo "## $b, invocation $i" | tee -a "$out"
    cargo bench -q --features _bench --bench "$b" 2>&1 | tee -a "$out"
  done
done
echo "# written to $out"
