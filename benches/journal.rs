//! Benchmark: the cost of the run journal (issue 30).
//!
//! Short turns against the in-process `FakeServer` on loopback, each a
//! whole `Agent::run_loop`, with the journal off, on with
//! `SyncMode::Durable` (an `fdatasync` per record) and on with
//! `SyncMode::Relaxed` (no sync), in two shapes:
//!
//! - a non-streamed text turn: records `user`, `response`, `turn_end`;
//! - a tool round: the model calls a no-op tool, then answers (two
//!   requests): `user`, `response`, `tool_start`, `tool_result`,
//!   `response`, `turn_end`.
//!
//! The journals are written under `CARGO_TARGET_TMPDIR` (the target
//! directory's disk, not a tmpfs). The subjects take turns within each
//! run; the conversation is cleared every 20 turns, outside the timed
//! span. Figures: µs per turn, median over the runs, and the extra per
//! turn over "off". `PIKURI_BENCH_QUICK=1` runs a tiny size.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::path::PathBuf;
use std::time::Instant;

use pikuri::Agent;
use pikuri::journal::{FileStore, SyncMode};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use serde_json::json;

use common::{header, median, quick, runs};

const BLOCK: usize = 20;

#[derive(Clone, Copy, Debug)]
enum Journal {
    Off,
    Durable,
    Relaxed,
}

fn agent(server: &FakeServer, journal: Journal, dir: &PathBuf, run: &str) -> Agent {
    let noop = FnTool::new("noop", "Does nothing.", Parameters::empty(), |_, _| {
        Ok("ok".into())
    });
    let b = Agent::builder(server.transport()).add_tool(noop);
    let b = match journal {
        Journal::Off => b,
        Journal::Durable => b.journal(FileStore::new(dir).unwrap(), run),
        Journal::Relaxed => b.journal(
            FileStore::new(dir).unwrap().with_sync(SyncMode::Relaxed),
            run,
        ),
    };
    b.build().expect("agent")
}

/// µs per turn over `turns` turns.
fn measure(agent: &mut Agent, turns: usize, question: &str) -> f64 {
    let mut spent = 0.0;
    let mut done = 0;
    while done < turns {
        agent.clear_conversation();
        let t = Instant::now();
        for _ in 0..BLOCK.min(turns - done) {
            agent.run_loop(question).expect("turn");
            done += 1;
        }
        spent += t.elapsed().as_secs_f64();
    }
    spent * 1e6 / turns as f64
}

fn main() {
    header("journal: the cost per turn of the run journal");
    let server = FakeServer::start();
    server.respond_with(|req| {
        let last = req.messages().last().cloned().unwrap_or_default();
        match (last["role"].as_str(), last["content"].as_str()) {
            (Some("user"), Some("call the tool")) => Reply::tool_call("noop", json!({})),
            _ => Reply::text("Done."),
        }
    });
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-journal");
    let _ = std::fs::remove_dir_all(&dir);
    let turns = if quick() { 40 } else { 400 };
    let subjects = [Journal::Off, Journal::Durable, Journal::Relaxed];
    for (shape, question) in [
        ("non-streamed text turn", "hello"),
        ("tool round (2 requests)", "call the tool"),
    ] {
        let mut per: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
        for r in 0..runs() {
            for (i, s) in subjects.iter().enumerate() {
                let run = format!("{}-{i}-{r}", shape.len());
                let mut a = agent(&server, *s, &dir, &run);
                per[i].push(measure(&mut a, turns, question));
            }
        }
        println!(
            "\n{shape}: {turns} turns x {} runs, µs per turn (median)",
            runs()
        );
        let off = median(&mut per[0].clone());
        for (i, s) in subjects.iter().enumerate() {
            let m = median(&mut per[i]);
            println!(
                "  {:<9} {:>9.1} µs   {:>+8.1} µs over off   x{:.2}",
                format!("{s:?}"),
                m,
                m - off,
                m / off
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
