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
#   INVOCATIONS=1  how many times to run each bench (to see the spread); with
#                  more than one, a last table gives every cell's median
#                  over the invocations
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
if [ "${INVOCATIONS:-1}" -gt 1 ]; then
  awk -f /dev/stdin "$out" <<'AWK' | tee "$out.medians"
# Median over invocations of every numeric cell of the benches' table rows,
# keyed by bench and the first two cells; text cells (the build costs, the
# RSS pairs "bare / pikuri") are the first invocation's, their ratios medians.
function median(s,   n, a, i, j, t) {
  n = split(s, a, " ")
  for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
/^## / { bench = $2; sub(/,$/, "", bench); next }
/^\| *(shape|agents) *\|/ { if (!(bench in head)) head[bench] = $0; next }
/^\|[-:|]+\|$/ { next }
/^\| / {
  n = split($0, c, "|")
  key = bench "|" c[2] "|" c[3]
  if (!(key in cols)) { order[++rows] = key; cols[key] = n; bof[key] = bench }
  cnt[key]++
  for (i = 4; i < n; i++) {
    v = c[i]; gsub(/ /, "", v); suf = ""
    if (v ~ /^[0-9.]+x$/) { suf = "x"; sub(/x$/, "", v) }
    if (v ~ /^[0-9.]+$/) { vals[key, i] = vals[key, i] " " v; sfx[key, i] = suf }
    else if (!((key, i) in text)) text[key, i] = c[i]
  }
}
END {
  last = ""
  for (r = 1; r <= rows; r++) {
    key = order[r]; b = bof[key]
    if (b != last) { print ""; print "## " b ": medians over invocations"; print head[b]; last = b }
    split(key, k, "|"); line = "|" k[2] "|" k[3] "|"
    for (i = 4; i < cols[key]; i++) {
      if ((key, i) in vals) {
        m = median(vals[key, i]); f = sfx[key, i] == "x" ? "%.2f" : (m >= 100 ? "%.0f" : (m >= 10 ? "%.1f" : "%.2f")); line = line " " sprintf(f, m) sfx[key, i] " |"
      } else line = line text[key, i] "|"
    }
    print line " (" cnt[key] " invocations)"
  }
}
AWK
fi
echo "# written to $out"
