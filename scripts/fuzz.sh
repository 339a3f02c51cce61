#!/bin/sh
# Run fuzz targets for a fixed number of executions each (default: all six,
# 10 million each), without cargo-fuzz: the libFuzzer binaries are built with
# cargo-fuzz's flags (see fuzz/README.md) by the nightly toolchain, or by
# stable with RUSTC_BOOTSTRAP=1 when no nightly is installed. Each target
# starts from, and grows, fuzz/corpus/<target>; a crash lands in
# fuzz/artifacts/<target>/ and stops the script with libFuzzer's exit code.
# The log of each run is fuzz/logs/<target>.log (ignored by git), whose last
# lines are libFuzzer's final statistics.
#
#   scripts/fuzz.sh                      # all six, 10M executions each
#   RUNS=1000000 scripts/fuzz.sh sse     # one target, fewer executions
#   nice -n 19 scripts/fuzz.sh html      # in the background while working
set -eu
cd "$(dirname "$0")/../fuzz"
runs=${RUNS:-10000000}
dir=${FUZZ_TARGET_DIR:-/tmp/pikuri-fuzz-target}
targets=${*:-history schema sse accumulate html responses}
if rustup toolchain list 2>/dev/null | grep -q nightly; then
    tool=+nightly
else
    tool=+stable
    export RUSTC_BOOTSTRAP=1
fi
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cllvm-args=-sanitizer-coverage-stack-depth \
--cfg fuzzing -Cdebug-assertions -Cforce-frame-pointers" \
    cargo "$tool" build --release --target x86_64-unknown-linux-gnu \
    --target-dir "$dir" --bins
bin=$dir/x86_64-unknown-linux-gnu/release
mkdir -p logs
for t in $targets; do
    mkdir -p "corpus/$t" "artifacts/$t"
    case $t in
    history) extra=-dict=dicts/history.dict ;;
    schema) extra=-dict=dicts/schema.dict ;;
    responses) extra=-dict=dicts/responses.dict ;;
    # Pages up to 16 KiB: the extractor's cost per byte is what is fuzzed.
    html) extra=-max_len=16384 ;;
    *) extra= ;;
    esac
    echo "== $t: $runs executions" >&2
    # shellcheck disable=SC2086 # $extra is one flag or nothing
    "$bin/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" $extra \
        -runs="$runs" -print_final_stats=1 >"logs/$t.log" 2>&1
    grep -E 'number_of_executed_units|average_exec_per_sec|peak_rss' "logs/$t.log" >&2
done
