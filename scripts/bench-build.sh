#!/usr/bin/env bash
# Benchmark 6, the build half (see BENCHMARKS.md): stripped release size of
# examples/minimal with and without default features, and release build
# times of the library: after `cargo clean -p pikuri` (the crate alone) and
# from scratch in a fresh target directory (with all dependencies, default
# features).
#
# Usage: scripts/bench-build.sh        (RUNS=5 by default; RUNS=1 for a smoke run)
# Honours CARGO_TARGET_DIR. Builds use cargo's default job count (the cores).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
target=${CARGO_TARGET_DIR:-target}
export CARGO_TERM_COLOR=never

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "# build: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); runs=$runs"
echo "| figure | median | runs |"
echo "|---|---:|---|"

for features in "--no-default-features" ""; do
  cargo build -q --release --example minimal $features
  bytes=$(stat -c %s "$target/release/examples/minimal")
  label=${features:-"default features (all, rustls included)"}
  echo "| examples/minimal, stripped, $label | $bytes bytes ($(awk "BEGIN{printf \"%.2f\", $bytes/1048576}") MiB) | 1 (deterministic) |"
done

for features in "" "--no-default-features"; do
  label=${features:-"default features"}
  cargo build -q --release --lib $features
  times=()
  for _ in $(seq "$runs"); do
    cargo clean -q -p pikuri --release
    t0=$(now); cargo build -q --release --lib $features; t1=$(now)
    times+=("$(awk "BEGIN{print $t1-$t0}")")
  done
  echo "| cargo build --release --lib $label, after cargo clean -p pikuri | $(printf '%s\n' "${times[@]}" | median) s | ${times[*]} |"
done

# From scratch with the default features only: the slow case (rustls and
# ring), and five of these already take a quarter of an hour on 2 cores.
for features in ""; do
  label=${features:-"default features"}
  times=()
  for _ in $(seq "$runs"); do
    fresh=$(mktemp -d)
    t0=$(now); CARGO_TARGET_DIR=$fresh cargo build -q --release --lib $features; t1=$(now)
    rm -rf "$fresh"
    times+=("$(awk "BEGIN{print $t1-$t0}")")
  done
  echo "| cargo build --release --lib $label, fresh target dir | $(printf '%s\n' "${times[@]}" | median) s | ${times[*]} |"
done
