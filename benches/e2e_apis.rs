//! Benchmark 2b (issue 29): one streamed turn end to end, per API.
//!
//! For each API pikuri speaks (chat completions, OpenAI Responses,
//! Anthropic Messages), a replay server in a child process (this binary
//! re-executed, see `common::Server`) answers every request with the same
//! pre-built stream of 200,000 text deltas in that API's wire format
//! (chunked, one HTTP chunk per event). The subjects take one turn each:
//!
//! - bare: a ureq 3 agent posts a typed serde request and parses every
//!   `data:` line into typed serde structs (that API's event shape), summing
//!   the delta bytes, until the stream's last event;
//! - pikuri: a whole `Agent::run_loop` (streaming) on a transport set to
//!   that API, with no listener, and with one no-op listener (every delta
//!   delivered on the listener's thread before `run_loop` returns).
//!
//! Figures, medians over `PIKURI_BENCH_RUNS` runs (subjects rotated each
//! run): wall time of the turn, and on-CPU time of this (the client)
//! process's threads over the turn (`/proc/self/task/*/schedstat`, ns; the
//! server's CPU is the child's and is not counted). Target (issue 29): each decoder within
//! 1.25x of the bare client's time.
//!
//! `PIKURI_BENCH_KEY=<key>` gives both clients an API key (pikuri's
//! transport `with_api_key`, the bare client an `Authorization` header), so
//! the run counts what a key costs: pikuri redacts an echoed key from the
//! answer, holding back a tail of each read that may begin it.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::BufReader;

use serde::{Deserialize, Serialize};
use serde_json::json;

use pikuri::{Agent, Api, ChatTransport, Event, HttpConfig};

use common::apis::{anthropic_body, data_lines, sse_event};
use common::turns::ureq_agent;
use common::{
    Framing, PROSE, Payload, Script, Server, header, median, runs, secs, sse_body, sse_response,
    stream_chunks, timed,
};

/// The APIs measured (`pikuri::Api` is non-exhaustive: this bench matches
/// on its own copy).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wire {
    Chat,
    Responses,
    Anthropic,
}

impl Wire {
    fn api(self) -> Api {
        match self {
            Wire::Chat => Api::ChatCompletions,
            Wire::Responses => Api::OpenAiResponses,
            Wire::Anthropic => Api::AnthropicMessages,
        }
    }
}

const MODEL: &str = "bench-model";
const QUESTION: &str = "Tell me a long story.";

/// `count` pieces of 3 chars cycling through [`PROSE`].
fn pieces(count: usize) -> Vec<String> {
    common::pieces(PROSE, 3, count)
}

/// An OpenAI Responses stream of `n` text deltas (the shape of
/// `benches/decode_responses.rs`).
fn responses_body(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 190 + 1024);
    let mut seq = 0u64;
    let mut ev = |out: &mut Vec<u8>, mut v: serde_json::Value| {
        v["sequence_number"] = json!(seq);
        seq += 1;
        let kind = v["type"].as_str().expect("type").to_string();
        sse_event(out, &kind, &v);
    };
    let response = |status: &str, output: serde_json::Value| {
        json!({"id": "resp_67ccd2bed1ec8190b14f964abc054267", "object": "response",
               "created_at": 1_741_569_952, "status": status, "model": MODEL,
               "output": output, "store": false, "usage": null})
    };
    ev(
        &mut out,
        json!({"type": "response.created", "response": response("in_progress", json!([]))}),
    );
    let id = "msg_67ccd2bf17f0819081ff3bb2cf6508e6";
    ev(
        &mut out,
        json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
    );
    ev(
        &mut out,
        json!({"type": "response.content_part.added", "item_id": id, "output_index": 0,
        "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
    );
    let ps = pieces(n);
    for p in &ps {
        ev(
            &mut out,
            json!({"type": "response.output_text.delta", "item_id": id, "output_index": 0,
            "content_index": 0, "delta": p, "logprobs": []}),
        );
    }
    let item = json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": ps.concat(), "annotations": []}]});
    ev(
        &mut out,
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    );
    let mut done = response("completed", json!([item]));
    done["usage"] = json!({"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 36 + n});
    ev(
        &mut out,
        json!({"type": "response.completed", "response": done}),
    );
    out
}

// ---------------------------------------------------------------- bare client

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'a str,
    content: &'a str,
}

/// The bare client's request: the members each API needs, typed.
#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<&'a [WireMessage<'a>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<&'a [WireMessage<'a>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    stream: bool,
}

/// Responses: the members a client reads of each event.
#[derive(Deserialize)]
#[allow(dead_code, reason = "parsed as a client would, not all read")]
struct ResponsesEvent {
    #[serde(rename = "type")]
    kind: String,
    sequence_number: Option<u64>,
    item_id: Option<String>,
    output_index: Option<u64>,
    delta: Option<String>,
    item: Option<serde_json::Value>,
    response: Option<serde_json::Value>,
}

/// Anthropic: the members a client reads of each event.
#[derive(Deserialize)]
#[allow(dead_code, reason = "parsed as a client would, not all read")]
struct AnthropicEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<AnthropicDelta>,
    #[serde(default)]
    message: Option<serde_json::Value>,
    #[serde(default)]
    usage: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[allow(dead_code, reason = "parsed as a client would, not all read")]
struct AnthropicDelta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

/// One `data:` payload of `api`'s stream: its delta bytes, and whether it
/// is the stream's last event.
fn bare_data(api: Wire, data: &[u8]) -> (usize, bool) {
    match api {
        Wire::Chat => {
            if data == b"[DONE]" {
                return (0, true);
            }
            let chunk: common::Chunk = serde_json::from_slice(data).expect("chunk parses");
            let bytes = chunk
                .choices
                .iter()
                .map(|c| c.delta.content.as_ref().map_or(0, String::len))
                .sum();
            (bytes, false)
        }
        Wire::Responses => {
            let e: ResponsesEvent = serde_json::from_slice(data).expect("event parses");
            let bytes = if e.kind == "response.output_text.delta" {
                e.delta.as_ref().map_or(0, String::len)
            } else {
                0
            };
            (bytes, e.kind == "response.completed")
        }
        Wire::Anthropic => {
            let e: AnthropicEvent = serde_json::from_slice(data).expect("event parses");
            let bytes = e
                .delta
                .as_ref()
                .and_then(|d| d.text.as_ref())
                .map_or(0, String::len);
            (bytes, e.kind == "message_stop")
        }
    }
}

/// One bare turn: post, parse every event, return the delta bytes.
fn bare_turn(agent: &ureq::Agent, base: &str, api: Wire) -> usize {
    let question = [WireMessage {
        role: "user",
        content: QUESTION,
    }];
    let (path, req) = match api {
        Wire::Chat => (
            "chat/completions",
            WireRequest {
                model: MODEL,
                messages: Some(&question),
                input: None,
                max_tokens: None,
                stream: true,
            },
        ),
        Wire::Responses => (
            "responses",
            WireRequest {
                model: MODEL,
                messages: None,
                input: Some(&question),
                max_tokens: None,
                stream: true,
            },
        ),
        Wire::Anthropic => (
            "messages",
            WireRequest {
                model: MODEL,
                messages: Some(&question),
                input: None,
                max_tokens: Some(4096),
                stream: true,
            },
        ),
    };
    let body = serde_json::to_vec(&req).expect("request serializes");
    let mut post = agent
        .post(format!("{base}/{path}"))
        .header("Content-Type", "application/json");
    if let Some(key) = bench_key() {
        post = post.header("Authorization", format!("Bearer {key}"));
    }
    let resp = post.send(&body[..]).expect("bare request");
    let mut reader = BufReader::with_capacity(64 * 1024, resp.into_body().into_reader());
    let mut bytes = 0;
    data_lines(&mut reader, |data| {
        let (b, last) = bare_data(api, data);
        bytes += b;
        !last
    });
    // Drain to the end so the connection is reused.
    let _ = std::io::copy(&mut reader, &mut std::io::sink());
    bytes
}

/// The API key both clients send, from `PIKURI_BENCH_KEY` (see the module
/// docs); none by default.
fn bench_key() -> Option<String> {
    std::env::var("PIKURI_BENCH_KEY")
        .ok()
        .filter(|k| !k.is_empty())
}

// ---------------------------------------------------------------- subjects

#[derive(Clone, Copy, PartialEq, Eq)]
enum Subject {
    Bare,
    Pikuri(usize),
}

impl Subject {
    fn name(self) -> String {
        match self {
            Subject::Bare => "bare ureq + typed serde".to_string(),
            Subject::Pikuri(0) => "pikuri, no listener".to_string(),
            Subject::Pikuri(n) => format!("pikuri, {n} no-op listener(s)"),
        }
    }
}

fn api_name(api: Wire) -> &'static str {
    match api {
        Wire::Chat => "chat completions",
        Wire::Responses => "OpenAI Responses",
        Wire::Anthropic => "Anthropic Messages",
    }
}

/// On-CPU seconds of this process's live threads (the sum of
/// `/proc/self/task/*/schedstat`, ns): a thread that starts during the
/// turn counts from zero, and none exits before the second reading.
fn client_cpu() -> f64 {
    common::client_threads().1 as f64 / 1e9
}

/// One timed turn of `subject`: wall and client-process CPU seconds.
fn run(subject: Subject, api: Wire, server: &Server, expected: usize) -> (f64, f64) {
    match subject {
        Subject::Bare => {
            let agent = ureq_agent();
            let base = server.base_url();
            let cpu = client_cpu();
            let (bytes, d) = timed(|| bare_turn(&agent, &base, api));
            let cpu = client_cpu() - cpu;
            assert_eq!(bytes, expected, "bare: every delta");
            (secs(d), cpu)
        }
        Subject::Pikuri(listeners) => {
            let mut transport = ChatTransport::new(MODEL)
                .with_api_base(server.base_url())
                .with_api(api.api())
                .with_context_window(Some(32_768));
            if let Some(key) = bench_key() {
                transport = transport.with_api_key(key);
            }
            let mut cfg = Agent::builder(transport)
                .streaming(true)
                .http(HttpConfig::default().with_max_retries(0));
            for _ in 0..listeners {
                cfg = cfg.add_listener(|_: &Event| {});
            }
            let mut agent = cfg.build().expect("agent builds");
            let cpu = client_cpu();
            let (outcome, d) = timed(|| agent.run_loop(QUESTION));
            // Read before `close`: the listener thread still runs, and its
            // time is in the sum.
            let cpu = client_cpu() - cpu;
            let outcome = outcome.expect("turn completes");
            assert_eq!(
                outcome.answer.map_or(0, |a| a.len()),
                expected,
                "pikuri: every delta"
            );
            agent.close();
            (secs(d), cpu)
        }
    }
}

fn main() {
    common::serve_if_child();
    header("one streamed turn end to end, per API (loopback)");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("# load average at start: {}", load.trim());
    println!("# {}", common::server_placement());
    let n = stream_chunks();
    println!("# {n} text deltas per stream, {} runs per figure", runs());
    println!(
        "| API | client | MB | wall ms | time ratio to bare | target (<= 1.25x) | CPU ms | CPU ratio to bare |"
    );
    println!("|---|---|---:|---:|---:|---|---:|---:|");
    let subjects = [Subject::Bare, Subject::Pikuri(0), Subject::Pikuri(1)];
    for api in [Wire::Chat, Wire::Responses, Wire::Anthropic] {
        if !common::selected(api_name(api)) {
            continue;
        }
        let body = match api {
            Wire::Chat => sse_body(Payload::Text, n),
            Wire::Responses => responses_body(n),
            Wire::Anthropic => anthropic_body(Payload::Text, n, MODEL),
        };
        let expected = match api {
            Wire::Chat => common::baseline_decode(&body).delta_bytes,
            _ => pieces(n).concat().len(),
        };
        let mb = body.len() as f64 / 1e6;
        let server = Server::start(Script::Fixed(sse_response(&body, Framing::Chunked)), false);
        // One untimed turn each: connections, page cache, allocator.
        for s in subjects {
            run(s, api, &server, expected);
        }
        let mut walls: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
        let mut cpus: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
        for r in 0..runs() {
            // Rotate the order each run so drift hits every subject alike.
            for k in 0..subjects.len() {
                let i = (k + r) % subjects.len();
                let (w, c) = run(subjects[i], api, &server, expected);
                walls[i].push(w);
                cpus[i].push(c);
            }
        }
        let wall: Vec<f64> = walls.iter_mut().map(|v| median(v)).collect();
        let cpu: Vec<f64> = cpus.iter_mut().map(|v| median(v)).collect();
        for (i, s) in subjects.iter().enumerate() {
            let ratio = wall[i] / wall[0];
            let target = match s {
                Subject::Bare => String::new(),
                Subject::Pikuri(_) if ratio <= 1.25 => "met".to_string(),
                Subject::Pikuri(_) => "MISSED".to_string(),
            };
            println!(
                "| {} | {} | {mb:.1} | {:.1} | {ratio:.2}x | {target} | {:.1} | {:.2}x |",
                api_name(api),
                s.name(),
                wall[i] * 1e3,
                cpu[i] * 1e3,
                cpu[i] / cpu[0],
            );
        }
    }
}
