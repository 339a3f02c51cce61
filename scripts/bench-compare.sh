#!/usr/bin/env bash
# async-openai 0.43 (tokio) beside pikuri and the bare ureq 3 client:
# 2,000 sequential non-streamed turns on one kept-alive connection against
# an out-of-process replay server (see BENCHMARKS.md, "Session 7: out of
# process").
#
# benches/compare/async-openai is a separate Cargo package with its own
# `[workspace]`: a dev tool, NEVER a dependency of pikuri. It is built here
# from crates.io (its Cargo.lock pins the versions) into
# $CARGO_TARGET_DIR/compare; the crate's own build never sees it.
#
# It measures its own bare client and pikuri (its core, with one barrier
# and with one hand-off listener) in the same runs (rotating order), so
# every ratio it prints is a same-run ratio; the `turn` bench's
# non-streamed rows (bare, the hand-off floors, pikuri with 0, 1 and 4
# listeners) run right after, and the last line also divides
# async-openai's time by that run's bare client.
#
# Usage: scripts/bench-compare.sh
#   RUNS=5   runs per figure (median); QUICK=1 smoke sizes;
#   RUNTIME=current   tokio's current-thread runtime instead of multi-thread
set -euo pipefail
cd "$(dirname "$0")/.."
export PIKURI_BENCH_RUNS=${RUNS:-5}
[ -n "${QUICK:-}" ] && export PIKURI_BENCH_QUICK=1
[ -n "${RUNTIME:-}" ] && export PIKURI_COMPARE_RUNTIME=$RUNTIME
export CARGO_TERM_COLOR=never
target=$(realpath -m "${CARGO_TARGET_DIR:-target}")

(cd benches/compare/async-openai &&
  CARGO_TARGET_DIR="$target/compare" cargo build -q --release --locked)
cargo build -q --release --benches --features _bench

compare=$("$target/compare/release/pikuri-compare-async-openai")
echo "$compare"
turn=$(PIKURI_BENCH_FILTER=non-streamed cargo bench -q --features _bench --bench turn 2>&1)
echo "$turn"

# Column 4 of a table row is us/turn, column 7 CPU us/turn.
field() { awk -F'|' -v who="$2" -v col="$3" '$2 ~ /non-streamed/ && $3 ~ who {gsub(/ /, "", $col); print $col; exit}' <<<"$1"; }
aoai_us=$(field "$compare" "async-openai" 4)
aoai_cpu=$(field "$compare" "async-openai" 6)
bare_us=$(field "$turn" "bare ureq" 4)
bare_cpu=$(field "$turn" "bare ureq" 7)
awk -v a="$aoai_us" -v b="$bare_us" -v ac="$aoai_cpu" -v bc="$bare_cpu" 'BEGIN {
  printf "# async-openai / bare client of the turn run: wall %.2fx (%s / %s us), CPU %.2fx (%s / %s us)\n", a / b, a, b, ac / bc, ac, bc }'
