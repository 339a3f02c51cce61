#!/usr/bin/env bash
# What the small CLI of issue 36 (benches/small-cli/pikuri: one agent, one
# question, `default-features = false`) links, and a check that it links
# nothing it never uses: builds it once in release, unstripped, prints its
# symbol bytes grouped by crate and pikuri module (`nm --size-sort -C -S`),
# and fails when a symbol of a mechanism the program never reaches is in it.
# Each of those is reached only through what a program configures (see
# BENCHMARKS.md, issue 36, sessions 12 and 13), so a change that calls one
# by name from the loop again shows up here, not only as bytes in the bench.
#
# Usage: scripts/small-cli-symbols.sh            (this checkout)
#        scripts/small-cli-symbols.sh <checkout> (another checkout of pikuri)
#        TOP=60 scripts/small-cli-symbols.sh     (longer table)
# CARGO_TARGET_DIR is kept between runs (default target/small-cli-symbols),
# so a second run rebuilds only pikuri.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
here=$(pwd)
target=${CARGO_TARGET_DIR:-$here/target/small-cli-symbols}
manifest=benches/small-cli/pikuri/Cargo.toml
if [ $# -gt 0 ]; then
  other=$(mktemp -d)
  trap 'rm -rf "$other"' EXIT
  cp -r benches/small-cli/pikuri/src benches/small-cli/pikuri/Cargo.lock "$other/"
  sed -e "s|^pikuri = { path = \"../../..\"|pikuri = { path = \"$(cd "$1" && pwd)\"|" \
    benches/small-cli/pikuri/Cargo.toml >"$other/Cargo.toml"
  manifest=$other/Cargo.toml
  target=$target-other
fi
CARGO_TARGET_DIR=$target cargo build -q --release --config profile.release.strip=false \
  --manifest-path "$manifest"
nm --size-sort -C -S "$target/release/small-cli-pikuri" | TOP=${TOP:-30} python3 -c '
import collections, os, re, sys

# Mechanisms the small CLI never reaches, and what reaches each.
ABSENT = {
    "crossbeam_channel::": "the listener hub (feature `hub`): no listener is added",
    "pikuri::tool::schema::validate::": "the schema validator: no tool with a schema is built",
    "pikuri::agent::recover::": "text tool-call recovery: not switched on",
    "pikuri::agent::compact::Compactor::compact": "compaction: none configured, Agent::compact not called",
    "pikuri::agent::child::": "child agents: no compaction, no step limit or budget (the synthesizer), no sub-agents",
    "pikuri::agent::synthesizer::": "the synthesizer prompt: no step limit or budget",
    "pikuri::agent::approval::consult": "the approver helper thread: no approver is set",
    "pikuri::agent::approval::review_guarded": "the call of the approver: no approver is set",
    "pikuri::approval::ApprovalRequest": "the approval request: no approver is set",
    # lean-agent (session 14)
    "pikuri::tool::exec::prepare": "argument validation: no tool is registered",
    "pikuri::tool::exec::revalidate": "the validation of an approver edit: no tool is registered",
    "pikuri::tool::exec::invoke": "the tool call: no tool is registered",
    "pikuri::tool::context::ToolContext": "the context a tool runs with: no tool is registered",
    "pikuri::agent::approval::review_tool": "the review of a call of a registered tool: no tool is registered",
    "pikuri::agent::approval::run_ready": "the run of an approved call: no tool is registered",
    "pikuri::agent::batch::run_parallel": "the threads of a parallel batch: no tool is registered",
    "pikuri::agent::trifecta::": "the lethal-trifecta check: no tool is registered",
    "pikuri::tool::name::check_name": "the check of tool names: no tool is registered",
    "pikuri::agent::builder::tool_names": "the name set of the tool pools: no tool is registered",
    "pikuri::agent::shared::State>::encode_tools": "the encoding of the tool pools for a request: no tool is registered",
    "pikuri::media_type::MediaType::parse": "the media-type parser: the client asks only for the essence (the web tools and MCP parse)",
    "pikuri::journal::": "journal records: built only for a journal (feature `journal`, off)",
    "pikuri::agent::Agent>::apply_transport": "the model switch at a turn start: run_loop_with is not called",
    "pikuri::agent::compact::Compactor::at_boundary": "compaction at a boundary of the turn: none configured, Agent::compact not called",
    # the lead (session 14)
    "<str>::to_lowercase": "Unicode lowercasing (its case tables): errors fold ASCII case (error.rs, lower_first)",
    "core::unicode::unicode_data::conversions::to_lower": "the Unicode lowercase table: errors fold ASCII case (error.rs, lower_first)",
    "<serde_json::value::Value as core::fmt::Display>::fmt": "the Display of a Value and its pretty printer: the decoders write a Value with serde_json::to_string",
    # lean (session 16)
    "hashbrown::raw::RawTableInner::fallible_with_capacity": "a std hash table of its own: rules::check_calls keeps the ids seen in a serde_json::Map",
}

def group(name):
    if name.startswith("core::ptr::drop_in_place"):
        return "drop glue"
    m = re.match(r"<*&?(?:mut |dyn )?([A-Za-z_][\w]*)((?:::[A-Za-z_]\w*)*)", name)
    if not m:
        return "other"
    if m.group(1) == "pikuri":
        return "::".join(["pikuri"] + m.group(2).split("::")[1:3])
    return m.group(1)

sizes, found, total = collections.Counter(), collections.defaultdict(list), 0
for line in sys.stdin:
    f = line.split(None, 3)
    if len(f) < 4:
        continue
    size, name = int(f[1], 16), f[3].strip()
    total += size
    sizes[group(name)] += size
    for prefix in ABSENT:
        if prefix in name:
            found[prefix].append(name)
print("| symbols of | bytes |")
print("|---|---:|")
for k, v in sizes.most_common(int(os.environ["TOP"])):
    print("| %s | %d |" % (k, v))
print("| all | %d |" % total)
bad = 0
for prefix, why in ABSENT.items():
    if found[prefix]:
        bad += 1
        print("linked, though %s: %d symbols of %s, e.g. %s"
              % (why, len(found[prefix]), prefix, found[prefix][0][:120]), file=sys.stderr)
sys.exit(1 if bad else 0)
'
