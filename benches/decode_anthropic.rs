//! Benchmark 1b (issue 29): Anthropic Messages stream decode in memory.
//!
//! pikuri's SSE parser and Anthropic decoder (the path the client runs
//! after the socket, through `pikuri::__bench::decode_stream_of`) over a
//! pre-built stream of 200,000 deltas, against a baseline that splits lines
//! and parses each `data:` payload into typed serde structs, nothing else.
//! Two streams, each with `event:` lines as Anthropic sends them: 3-character
//! `text_delta`s, and `input_json_delta`s of a tool call whose JSON text is
//! dense with escapes. Target (issue 29): within 1.25x of the baseline's
//! time, i.e. >= 0.8x its chunks/s.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::{BufRead, BufReader};

use common::{header, median, runs, secs, stream_chunks, timed};
use serde::Deserialize;

const PROSE: &str = "The quick brown fox jumps over the lazy dog, and then it \
    considers the nature of streaming tokens: each one small, each one late. \
    Café naïve résumé — über straße.\nA second paragraph starts here; it has \
    \"quotes\" and a tab\tor two.\n";

const CODE: &str = "{\"code\": \"fn main() {\\n    let path = \\\"C:\\\\\\\\tmp\\\\\\\\out.txt\\\";\\n    \
    println!(\\\"{}\\\\t{}\\\", path, 42);\\n}\\n\"}";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Payload {
    Text,
    ToolArgs,
}

impl Payload {
    fn name(self) -> &'static str {
        match self {
            Payload::Text => "text",
            Payload::ToolArgs => "tool-args",
        }
    }
}

/// `count` pieces of 3 chars cycling through `text`.
fn pieces(text: &str, count: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    (0..count)
        .map(|i| (0..3).map(|j| chars[(i * 3 + j) % chars.len()]).collect())
        .collect()
}

fn event(out: &mut Vec<u8>, kind: &str, data: &serde_json::Value) {
    out.extend_from_slice(format!("event: {kind}\ndata: {data}\n\n").as_bytes());
}

/// An Anthropic stream of `n` deltas of `payload`.
fn body(payload: Payload, n: usize) -> Vec<u8> {
    use serde_json::json;
    let mut out = Vec::new();
    event(
        &mut out,
        "message_start",
        &json!({"type":"message_start","message":{"id":"msg_1","type":"message",
            "role":"assistant","model":"claude-bench","content":[],"stop_reason":null,
            "usage":{"input_tokens":100,"output_tokens":1}}}),
    );
    let (start, text) = match payload {
        Payload::Text => (json!({"type":"text","text":""}), PROSE),
        Payload::ToolArgs => (
            json!({"type":"tool_use","id":"toolu_1","name":"write","input":{}}),
            CODE,
        ),
    };
    event(
        &mut out,
        "content_block_start",
        &json!({"type":"content_block_start","index":0,"content_block":start}),
    );
    for p in pieces(text, n) {
        let delta = match payload {
            Payload::Text => json!({"type":"text_delta","text":p}),
            Payload::ToolArgs => json!({"type":"input_json_delta","partial_json":p}),
        };
        event(
            &mut out,
            "content_block_delta",
            &json!({"type":"content_block_delta","index":0,"delta":delta}),
        );
    }
    event(
        &mut out,
        "content_block_stop",
        &json!({"type":"content_block_stop","index":0}),
    );
    event(
        &mut out,
        "message_delta",
        &json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},
            "usage":{"output_tokens":n}}),
    );
    event(&mut out, "message_stop", &json!({"type":"message_stop"}));
    out
}

/// The baseline's typed event: what a hand-written client deserializes.
#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    delta: Option<Delta>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
}

/// Events parsed and delta bytes, up to `message_stop`.
fn baseline(body: &[u8]) -> (usize, usize) {
    let (mut events, mut bytes) = (0, 0);
    let mut r = BufReader::with_capacity(64 * 1024, body);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).expect("in memory") == 0 {
            break;
        }
        let l = line.strip_suffix(b"\n").unwrap_or(&line);
        let Some(data) = l.strip_prefix(b"data: ") else {
            continue;
        };
        let e: Event = serde_json::from_slice(data).expect("baseline: event parses");
        events += 1;
        if let Some(d) = &e.delta {
            bytes += d.text.as_ref().map_or(0, String::len);
            bytes += d.partial_json.as_ref().map_or(0, String::len);
        }
        if e.kind == "message_stop" {
            break;
        }
    }
    (events, bytes)
}

fn main() {
    header("decode, Anthropic Messages (in memory)");
    let n = stream_chunks();
    println!("| stream | MB | baseline chunks/s | pikuri chunks/s | ratio | target |");
    println!("|---|---:|---:|---:|---:|---|");
    for payload in [Payload::Text, Payload::ToolArgs] {
        let body = body(payload, n);
        let expected = baseline(&body);
        let (mut base, mut lib) = (Vec::new(), Vec::new());
        for run in 0..=runs() * 2 {
            // Alternate the order so drift on a shared machine hits both.
            let mut one = |which: bool| {
                if which {
                    let (t, d) = timed(|| baseline(&body));
                    assert_eq!(t, expected);
                    base.push(n as f64 / secs(d));
                } else {
                    let mut bytes = 0usize;
                    let (m, d) = timed(|| {
                        let reader = BufReader::with_capacity(64 * 1024, &body[..]);
                        pikuri::__bench::decode_stream_of(
                            pikuri::Api::AnthropicMessages,
                            reader,
                            &mut |s| bytes += s.len(),
                        )
                        .expect("stream decodes")
                    });
                    let got = m.content.len()
                        + m.tool_calls
                            .iter()
                            .map(|c| c.arguments.len())
                            .sum::<usize>();
                    assert_eq!(got, expected.1, "pikuri assembled what the baseline saw");
                    if payload == Payload::Text {
                        assert_eq!(bytes, expected.1, "every text fragment reported");
                    }
                    lib.push(n as f64 / secs(d));
                }
            };
            one(run % 2 == 0);
            one(run % 2 == 1);
        }
        let (b, l) = (median(&mut base), median(&mut lib));
        println!(
            "| anthropic {} x{} | {:.1} | {:.0} | {:.0} | {:.2}x | >= 0.8x {} |",
            payload.name(),
            n,
            body.len() as f64 / 1e6,
            b,
            l,
            l / b,
            if l / b >= 0.8 { "met" } else { "MISSED" }
        );
    }
}
