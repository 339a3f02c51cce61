#!/usr/bin/env bash
# The small-CLI build-cost target of issue 27 (see BENCHMARKS.md): the same
# program (one agent, one question to a local server) on pikuri's core
# (`default-features = false`, benches/small-cli/pikuri) and on bare ureq 3 +
# serde (derive) + serde_json (benches/small-cli/bare), each built from clean
# (a fresh CARGO_TARGET_DIR) in release, alternating, RUNS times (5 by
# default). Prints the medians of build time and stripped binary size and the
# ratios pikuri / bare (targets: time within 1.8x, size within 1.5x).
#
# Usage: scripts/bench-small-cli.sh     (RUNS=1 for a smoke run)
# Builds use cargo's default job count (the cores). On a shared machine the
# times are noisy: the alternation puts both programs under the same load.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
export CARGO_TERM_COLOR=never
unset CARGO_TARGET_DIR

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# Resolve and download once, outside the timed builds.
for p in bare pikuri; do
  cargo fetch -q --manifest-path "benches/small-cli/$p/Cargo.toml"
done

declare -A times sizes
for _ in $(seq "$runs"); do
  for p in bare pikuri; do
    fresh=$(mktemp -d)
    t0=$(now)
    CARGO_TARGET_DIR=$fresh cargo build -q --offline --release \
      --manifest-path "benches/small-cli/$p/Cargo.toml"
    t1=$(now)
    times[$p]+="$(awk "BEGIN{print $t1-$t0}") "
    sizes[$p]+="$(stat -c %s "$fresh/release/small-cli-$p") "
    rm -rf "$fresh"
  done
done

echo "# small CLI from clean, release: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); runs=$runs, alternating"
echo "| program | build (median) | stripped binary (median) | build runs (s) |"
echo "|---|---:|---:|---|"
for p in bare pikuri; do
  t=$(printf '%s\n' ${times[$p]} | median)
  s=$(printf '%s\n' ${sizes[$p]} | median)
  declare "t_$p=$t" "s_$p=$s"
  echo "| $p | $(printf '%.1f' "$t") s | $s bytes ($(awk "BEGIN{printf \"%.2f\", $s/1048576}") MiB) | ${times[$p]}|"
done
echo "| ratio pikuri / bare | $(awk "BEGIN{printf \"%.2fx\", $t_pikuri/$t_bare}") (target 1.8x) | $(awk "BEGIN{printf \"%.2fx\", $s_pikuri/$s_bare}") (target 1.5x) | |"
