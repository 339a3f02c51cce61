#!/bin/sh
# Mutation testing: which changes to the code do the tests fail to notice?
#
# cargo-mutants is a TOOL, installed once on the developer's machine
# (`cargo install cargo-mutants --locked`), like cargo-fuzz: it is not, and
# must never become, a dependency of pikuri (runtime or dev). It copies the
# tree, applies one mutation at a time (a function body replaced by a
# default, `>` by `>=`...), and runs the tests given below against each.
#
# Scope: the controls first (their unit tests plus the integration tests of
# the `controls` module, selected by the filter `control`), then the listener
# hub (its unit tests plus the `listeners` integration tests), then the agent
# loop (`src/agent/turn.rs` and three small files of the loop, against the
# integration modules that drive a turn). One job, a per-mutant timeout: it
# shares small machines. Results land in target/mutants/<scope>/mutants.out
# (outcomes.json, missed.txt, caught.txt...). Figures of the latest run:
# MUTANTS.md. `--gitignore true`: do not copy fuzz/corpus and other ignored
# files into the scratch tree (a running fuzzer changes them under the copy).
set -eu
cd "$(dirname "$0")/.."
mkdir -p target/mutants
scope=${1:-control}
case "$scope" in
control)
    cargo mutants --gitignore true -f 'src/control/*.rs' -j 1 --timeout 120 \
        --output target/mutants/control \
        -- --lib --test integration -- control
    ;;
hub)
    cargo mutants --gitignore true -f src/listener/hub.rs -j 1 --timeout 120 \
        --output target/mutants/hub \
        -- --lib --test integration -- listener
    ;;
hub-delivery)
    # The delivery paths of the hub (batches, joining, hold and hand-over,
    # backpressure, the flush countdown, stop), with only the hub's unit
    # tests: a few seconds a mutant besides the build.
    cargo mutants --gitignore true -f src/listener/hub.rs -j 1 --timeout 60 \
        -F 'Slot::send|Slot::stop|Ticket|ListenerList::emit|ListenerList::emit_delta|ListenerList::hold|ListenerList::hand_over|ListenerList::flush|ListenerList::send|ListenerList::close|ListenerList::for_sub_agent| in run$| replace run with' \
        --output target/mutants/hub-delivery \
        -- --lib -- listener::hub
    ;;
agent)
    # The agent loop: run_loop, retry_turn, rounds, tool batches, the
    # synthesizer hand-off, events (turn.rs), with the small files it calls
    # into: the synthesizer's prompt, the tool-result limit, child agents
    # (82 mutants, about 40 minutes on 2 shared cores). No `--lib`: the
    # crate's unit tests under `agent::` are pure helpers (compaction cuts,
    # overflow forms, leaked-call parsing) that never reach turn.rs, and would
    # only add a third compile of the crate per mutant. The integration modules below are the ones that
    # run turns against the FakeServer (about 120 tests, 5 s); left out: the
    # chat example (spawns processes), stress and properties (seconds of
    # threads and random scripts), and the modules that test tools, probes or
    # cassettes rather than the loop. `--timeout 300`: a machine shared with
    # benchmarks may pause the run for minutes; re-run any timeout alone
    # (`-F` on its function) before believing it.
    cargo mutants --gitignore true -f src/agent/turn.rs \
        -f src/agent/synthesizer.rs -f src/agent/tool_limit.rs \
        -f src/agent/child.rs -j 1 --timeout 300 \
        --output target/mutants/agent \
        -- --test integration -- agent_loop:: api:: approval:: compaction:: \
        controls:: errors:: extensions:: hardening:: hostile:: hosts:: \
        listeners:: local_models:: regression:: structured::
    ;;
watch)
    # The stream's idle bound and request deadline around each body read
    # (`Watch`, `Deadline`, `Watched` in the client), against the hostile
    # tests that stall, trickle and outlast them (about 40 s a mutant).
    cargo mutants --gitignore true -f src/protocol/client.rs -j 1 --timeout 300 \
        -F 'Watch|Deadline' \
        --output target/mutants/watch \
        -- --test integration -- hostile::
    ;;
*)
    echo "usage: scripts/mutants.sh [control|hub|hub-delivery|agent|watch]" >&2
    exit 2
    ;;
esac
