#!/usr/bin/env bash
# One streaming agent's peak RSS (issue 42) as users run it: builds the two
# standalone programs of benches/one-agent (bare ureq 3 + serde, and pikuri's
# core with the hub and one listener), stripped release, then runs the `rss`
# rows of benches/turn.rs, which serve the same 20,000-delta answer to each
# child from a replay server in another process and print, beside the rows
# measured in the bench binary itself, the rows of the two programs
# ("standalone"). Medians of PIKURI_BENCH_RUNS children each (5 by default).
#
# Why standalone programs: the bench binary holds every bench's code and
# every feature of the crate, so the code pages a run faults in (64 KiB
# around each) are spread over a larger text than a program that links
# pikuri holds; the anonymous part (`VmHWM - RssFile`) is alike in both.
#
# Usage: scripts/bench-one-agent.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
programs="$PWD/target/one-agent"
for p in bare pikuri; do
  CARGO_TARGET_DIR="$programs" cargo build -q --release \
    --manifest-path "benches/one-agent/$p/Cargo.toml"
  ls -l "$programs/release/one-agent-$p" | awk '{print "# " $9 ": " $5 " bytes"}'
done
bench=$(cargo bench -q --all-features --bench turn --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "turn" and m.get("executable"):
        print(m["executable"])')
PIKURI_RSS_PROGRAMS="$programs/release" PIKURI_BENCH_RUNS="${PIKURI_BENCH_RUNS:-5}" \
  PIKURI_BENCH_FILTER="${PIKURI_BENCH_FILTER:-rss}" "$bench" --bench
