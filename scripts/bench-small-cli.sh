#!/usr/bin/env bash
# The small-CLI build-cost target of issue 27 (see BENCHMARKS.md): the same
# program (one agent, one question to a local server) on pikuri's core
# (`default-features = false`, benches/small-cli/pikuri) and on bare ureq 3 +
# serde (derive) + serde_json (benches/small-cli/bare), each built from clean
# (a fresh CARGO_TARGET_DIR) in release, alternating, RUNS times (5 by
# default). Prints the medians of build time and stripped binary size and the
# ratios pikuri / bare (targets: time within 1.8x, size within 1.5x). The CPU
# time (user + system, of cargo and every rustc it runs) is printed too: it
# moves less than wall time when other work shares the cores.
#
# Usage: scripts/bench-small-cli.sh     (RUNS=1 for a smoke run)
#        PIKURI_BEFORE=/path/to/other/checkout scripts/bench-small-cli.sh
#   also builds the pikuri program against that checkout ("before"), in the
#   same alternation, to compare two versions of the crate.
#        PROFILE=small scripts/bench-small-cli.sh
#   builds both programs with the size knobs a small-CLI author adds to the
#   release profile (`lto = true`, `codegen-units = 1`; see
#   benches/small-cli/README.md for why not `panic = "abort"` or
#   `opt-level = "z"`). The default is the plain release profile + strip,
#   the one the issue's targets were set on.
# Builds use cargo's default job count (the cores). On a shared machine the
# times are noisy: the alternation puts both programs under the same load.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-5}
export CARGO_TERM_COLOR=never
unset CARGO_TARGET_DIR

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

programs="bare pikuri"
manifest() { echo "benches/small-cli/$1/Cargo.toml"; }
if [ -n "${PIKURI_BEFORE:-}" ]; then
  before=$(mktemp -d)
  trap 'rm -rf "$before"' EXIT
  cp -r benches/small-cli/pikuri/src "$before/"
  sed -e "s|^pikuri = { path = \"../../..\"|pikuri = { path = \"$PIKURI_BEFORE\"|" \
    -e 's|^name = "small-cli-pikuri"|name = "small-cli-before"|' \
    benches/small-cli/pikuri/Cargo.toml >"$before/Cargo.toml"
  cp benches/small-cli/pikuri/Cargo.lock "$before/"
  programs="bare before pikuri"
  manifest() { if [ "$1" = before ]; then echo "$before/Cargo.toml"; else echo "benches/small-cli/$1/Cargo.toml"; fi; }
fi

knobs=()
case "${PROFILE:-release}" in
  release) ;;
  small) knobs=(--config profile.release.lto=true --config profile.release.codegen-units=1) ;;
  *) echo "PROFILE is release or small" >&2; exit 2 ;;
esac

# Resolve and download once, outside the timed builds.
for p in $programs; do
  cargo fetch -q --manifest-path "$(manifest "$p")"
done

declare -A times cpus sizes
TIMEFORMAT='%U %S'
for _ in $(seq "$runs"); do
  for p in $programs; do
    fresh=$(mktemp -d)
    t0=$(now)
    cpu=$( { time CARGO_TARGET_DIR=$fresh cargo build -q --offline --release \
      "${knobs[@]}" --manifest-path "$(manifest "$p")" 2>"$fresh.err"; } 2>&1 ) || {
      cat "$fresh.err" >&2
      exit 1
    }
    rm -f "$fresh.err"
    t1=$(now)
    times[$p]+="$(awk "BEGIN{print $t1-$t0}") "
    cpus[$p]+="$(echo "$cpu" | awk '{print $1+$2}') "
    sizes[$p]+="$(stat -c %s "$fresh/release/small-cli-$p") "
    # Each build as it ends, on stderr: a long run shows its progress.
    echo "$p: wall $(awk "BEGIN{print $t1-$t0}") s, CPU $(echo "$cpu" | awk '{print $1+$2}') s, $(stat -c %s "$fresh/release/small-cli-$p") bytes" >&2
    rm -rf "$fresh"
  done
done

echo "# small CLI from clean, release (profile: ${PROFILE:-release}): $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); runs=$runs, alternating"
echo "| program | build, wall (median) | build, CPU (median) | stripped binary (median) | wall runs (s) |"
echo "|---|---:|---:|---:|---|"
for p in $programs; do
  t=$(printf '%s\n' ${times[$p]} | median)
  c=$(printf '%s\n' ${cpus[$p]} | median)
  s=$(printf '%s\n' ${sizes[$p]} | median)
  declare "t_$p=$t" "c_$p=$c" "s_$p=$s"
  echo "| $p | $(printf '%.1f' "$t") s | $(printf '%.1f' "$c") s | $s bytes ($(awk "BEGIN{printf \"%.2f\", $s/1048576}") MiB) | ${times[$p]}|"
done
ratio() { awk "BEGIN{printf \"%.2fx\", $1/$2}"; }
if [ -n "${PIKURI_BEFORE:-}" ]; then
  echo "| ratio before / bare | $(ratio "$t_before" "$t_bare") | $(ratio "$c_before" "$c_bare") | $(ratio "$s_before" "$s_bare") | |"
fi
echo "| ratio pikuri / bare | $(ratio "$t_pikuri" "$t_bare") (target 1.8x) | $(ratio "$c_pikuri" "$c_bare") | $(ratio "$s_pikuri" "$s_bare") (target 1.5x) | |"
