//! Benchmark 2: stream end to end over loopback.
//!
//! A replay server thread writes a pre-built 200,000-delta SSE response
//! (chunked, one HTTP chunk per event; or close-delimited). The library path
//! is the whole agent: `Agent::run_loop` (streaming) → ureq → SSE parser →
//! accumulator → `AssistantDelta` events delivered to a listener on its own
//! thread, until `run_loop` returns (after the listener handled every
//! event). The baseline is a plain `TcpStream` client that posts a request
//! and parses every `data:` line into typed serde structs, nothing else.
//! Listeners: a no-op closure, an `InMemoryEventList`, `JsonLines` to
//! `std::io::sink()`; and, for reference, no listener at all (the decode
//! path alone). Target: >= 0.8x the baseline's chunks/s.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use pikuri::listeners::JsonLines;
use pikuri::{Agent, ChatTransport, Event, HttpConfig, listeners::InMemoryEventList};

use common::{
    Framing, Payload, Replay, Script, baseline_fetch, header, median, process_cpu, runs, secs,
    sse_body, sse_response, stream_chunks, thread_cpu, timed,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Subject {
    Baseline,
    NoListener,
    Noop,
    Memory,
    JsonLines,
}

impl Subject {
    fn name(self) -> &'static str {
        match self {
            Subject::Baseline => "baseline (TcpStream + serde)",
            Subject::NoListener => "pikuri, no listener",
            Subject::Noop => "pikuri, no-op listener",
            Subject::Memory => "pikuri, InMemoryEventList",
            Subject::JsonLines => "pikuri, JsonLines(sink)",
        }
    }
}

const REQUEST: &[u8] = br#"{"model":"qwen3-8b","messages":[{"role":"user","content":"Tell me a long story."}],"stream":true,"stream_options":{"include_usage":true}}"#;

/// One timed run; returns chunks/s, the process CPU time it took (all
/// threads: client, listener, server) and the calling thread's CPU time.
fn run(subject: Subject, server: &Replay, n: usize, expected_bytes: usize) -> (f64, f64, f64) {
    if subject == Subject::Baseline {
        let (cpu, own) = (process_cpu(), thread_cpu());
        let (t, d) = timed(|| baseline_fetch(server.addr(), REQUEST));
        let (cpu, own) = (
            secs(process_cpu().saturating_sub(cpu)),
            secs(thread_cpu().saturating_sub(own)),
        );
        assert_eq!(t.delta_bytes, expected_bytes);
        return (n as f64 / secs(d), cpu, own);
    }
    let transport = ChatTransport::new("qwen3-8b")
        .with_api_base(server.base_url())
        .with_context_window(Some(32_768));
    let mut cfg = Agent::builder(transport);
    cfg = cfg
        .streaming(true)
        .http(HttpConfig::default().with_max_retries(0));
    let memory = InMemoryEventList::new();
    match subject {
        Subject::NoListener => {}
        Subject::Noop => {
            cfg = cfg.add_listener(|_: &Event| {});
        }
        Subject::Memory => {
            cfg = cfg.add_listener(memory.clone());
        }
        Subject::JsonLines => {
            cfg = cfg.add_listener(JsonLines::new(std::io::sink()));
        }
        Subject::Baseline => unreachable!(),
    }
    let mut agent = cfg.build().expect("agent builds");
    let (cpu, own) = (process_cpu(), thread_cpu());
    let (outcome, d) = timed(|| agent.run_loop("Tell me a long story."));
    let (cpu, own) = (
        secs(process_cpu().saturating_sub(cpu)),
        secs(thread_cpu().saturating_sub(own)),
    );
    let outcome = outcome.expect("run completes");
    assert_eq!(outcome.answer.map_or(0, |a| a.len()), expected_bytes);
    if subject == Subject::Memory {
        // Every chunk's text reached the listener (some joined: a listener
        // that is behind gets fewer, longer deltas).
        let streamed: usize = memory
            .events()
            .iter()
            .map(|e| match e {
                Event::AssistantDelta { content, .. } => content.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(streamed, expected_bytes, "every chunk's text");
    }
    agent.close();
    (n as f64 / secs(d), cpu, own)
}

fn main() {
    header("end to end (loopback)");
    let n = stream_chunks();
    let body = sse_body(Payload::Text, n);
    let expected = common::baseline_decode(&body).delta_bytes;
    println!(
        "| framing | client | chunks/s | ratio to baseline | target | CPU ms/run (all threads) | CPU ratio | client-thread CPU ms | its ratio |"
    );
    println!("|---|---|---:|---:|---|---:|---:|---:|---:|");
    let subjects = [
        Subject::Baseline,
        Subject::NoListener,
        Subject::Noop,
        Subject::Memory,
        Subject::JsonLines,
    ];
    for framing in [Framing::Chunked, Framing::Close] {
        let server = Replay::start(
            Script::Fixed(sse_response(&body, framing)),
            framing == Framing::Close,
        );
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
        let mut cpus: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
        let mut owns: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
        let chosen: Vec<bool> = subjects
            .iter()
            .map(|s| common::selected(&format!("{}/{}", framing.name(), s.name())))
            .collect();
        if !chosen[1..].iter().any(|c| *c) {
            continue;
        }
        for r in 0..runs() {
            // Rotate the order each run so drift hits every subject alike.
            for k in 0..subjects.len() {
                let i = (k + r) % subjects.len();
                let skip_baseline = std::env::var_os("PIKURI_BENCH_SKIP_BASELINE").is_some();
                if chosen[i] || (i == 0 && !skip_baseline) {
                    let (rate, cpu, own) = run(subjects[i], &server, n, expected);
                    rates[i].push(rate);
                    cpus[i].push(cpu);
                    owns[i].push(own);
                }
            }
        }
        let meds: Vec<f64> = rates.iter_mut().map(|v| median(v)).collect();
        let cpu: Vec<f64> = cpus.iter_mut().map(|v| median(v)).collect();
        let own: Vec<f64> = owns.iter_mut().map(|v| median(v)).collect();
        for (i, s) in subjects.iter().enumerate() {
            if rates[i].is_empty() {
                continue;
            }
            let ratio = meds[i] / meds[0];
            let target = if matches!(s, Subject::Baseline | Subject::NoListener) {
                String::new()
            } else if ratio >= 0.8 {
                ">= 0.8x met".to_string()
            } else {
                ">= 0.8x MISSED".to_string()
            };
            println!(
                "| {} | {} | {:.0} | {:.2}x | {} | {:.0} | {:.2}x | {:.0} | {:.2}x |",
                framing.name(),
                s.name(),
                meds[i],
                ratio,
                target,
                cpu[i] * 1e3,
                cpu[0] / cpu[i],
                own[i] * 1e3,
                own[0] / own[i],
            );
        }
    }
}
