//! Benchmark 1b (issue 29): an OpenAI Responses stream decoded in memory.
//!
//! The library's SSE parser and Responses decoder (the path the client
//! runs after the socket, through `pikuri::__bench::decode_stream_of`) over
//! a pre-built stream of 200,000 deltas, as OpenAI sends it (named events,
//! `sequence_number`, `logprobs`; the finished item and the final response
//! repeat the whole text), against a baseline that splits lines and parses
//! each `data:` payload into typed serde structs, nothing else. Two streams:
//! 3-character text deltas, and function-call argument deltas whose JSON
//! text is dense with escapes. Target (issue 29): >= 0.8x the baseline's
//! events/s (the decoder within 1.25x of its time).

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::{BufRead, BufReader};

use common::{header, median, runs, secs, stream_chunks, timed};
use serde::Deserialize;
use serde_json::json;

const PROSE: &str = "The quick brown fox jumps over the lazy dog, and then it \
    considers the nature of streaming tokens: each one small, each one late. \
    Café naïve résumé — über straße.\nA second paragraph starts here; it has \
    \"quotes\" and a tab\tor two.\n";

const CODE: &str = "fn main() {\n    let path = \"C:\\\\tmp\\\\out.txt\";\n    \
    println!(\"{}\\t{}\", path, 42);\n    // naïve: \"quoted\" \\ backslash\n}\n";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Payload {
    Text,
    ToolArgs,
}

/// `count` pieces of 3 chars cycling through `text`.
fn pieces(text: &str, count: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    (0..count)
        .map(|k| (0..3).map(|j| chars[(k * 3 + j) % chars.len()]).collect())
        .collect()
}

/// The SSE body and the delta bytes it carries.
fn body(payload: Payload, n: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(n * 190 + 1024);
    let mut seq = 0u64;
    let mut event = |mut v: serde_json::Value| {
        v["sequence_number"] = json!(seq);
        seq += 1;
        let kind = v["type"].as_str().unwrap().to_string();
        out.extend_from_slice(format!("event: {kind}\ndata: {v}\n\n").as_bytes());
    };
    let response = |status: &str, output: serde_json::Value| {
        json!({"id": "resp_67ccd2bed1ec8190b14f964abc054267", "object": "response",
               "created_at": 1_741_569_952, "status": status, "model": "gpt-5-2025-08-07",
               "output": output, "store": false, "usage": null})
    };
    event(json!({"type": "response.created", "response": response("in_progress", json!([]))}));
    event(json!({"type": "response.in_progress", "response": response("in_progress", json!([]))}));
    let ps = pieces(
        if payload == Payload::Text {
            PROSE
        } else {
            CODE
        },
        n,
    );
    let all: String = ps.concat();
    let item = match payload {
        Payload::Text => {
            let id = "msg_67ccd2bf17f0819081ff3bb2cf6508e6";
            event(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
            );
            event(
                json!({"type": "response.content_part.added", "item_id": id, "output_index": 0,
                "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}),
            );
            for p in &ps {
                event(
                    json!({"type": "response.output_text.delta", "item_id": id, "output_index": 0,
                    "content_index": 0, "delta": p, "logprobs": []}),
                );
            }
            json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
                   "content": [{"type": "output_text", "text": all, "annotations": []}]})
        }
        Payload::ToolArgs => {
            let id = "fc_67ca09c6bedc8190a7abfec07b1a1332";
            event(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"id": id, "type": "function_call", "status": "in_progress",
                         "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k", "name": "write_file", "arguments": ""}}),
            );
            for p in &ps {
                event(
                    json!({"type": "response.function_call_arguments.delta", "item_id": id,
                    "output_index": 0, "delta": p}),
                );
            }
            json!({"id": id, "type": "function_call", "status": "completed",
                   "call_id": "call_unLAR8MvFNptuiZK6K6HCy5k", "name": "write_file", "arguments": all})
        }
    };
    event(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    let mut done = response("completed", json!([item]));
    done["usage"] = json!({"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 36 + n});
    event(json!({"type": "response.completed", "response": done}));
    (out, all.len())
}

/// The baseline's typed event: every member a plain owned serde type.
#[derive(Deserialize)]
#[allow(dead_code, reason = "parsed as a client would, not all read")]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    sequence_number: Option<u64>,
    item_id: Option<String>,
    output_index: Option<u64>,
    delta: Option<String>,
    item: Option<serde_json::Value>,
    response: Option<serde_json::Value>,
}

/// Lines through a 64 KiB `BufReader`, each `data:` payload into
/// [`Event`], until `response.completed`: events and delta bytes.
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
        bytes += e.delta.as_ref().map_or(0, String::len);
        if e.kind == "response.completed" {
            break;
        }
    }
    (events, bytes)
}

fn main() {
    header("decode, OpenAI Responses (in memory)");
    let n = stream_chunks();
    println!("| stream | MB | baseline events/s | pikuri events/s | ratio | target |");
    println!("|---|---:|---:|---:|---:|---|");
    for payload in [Payload::Text, Payload::ToolArgs] {
        let (body, delta_bytes) = body(payload, n);
        let (events, seen) = baseline(&body);
        assert_eq!(seen, delta_bytes);
        let (mut base, mut lib) = (Vec::new(), Vec::new());
        for run in 0..=runs() * 2 {
            let mut one = |which: bool| {
                if which {
                    let (t, d) = timed(|| baseline(&body));
                    assert_eq!(t, (events, delta_bytes));
                    base.push(events as f64 / secs(d));
                } else {
                    let mut bytes = 0usize;
                    let (m, d) = timed(|| {
                        let reader = BufReader::with_capacity(64 * 1024, &body[..]);
                        pikuri::__bench::decode_stream_of(
                            pikuri::Api::OpenAiResponses,
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
                    assert_eq!(got, delta_bytes, "pikuri assembled what the baseline saw");
                    if payload == Payload::Text {
                        assert_eq!(bytes, delta_bytes, "every text fragment reported");
                    }
                    lib.push(events as f64 / secs(d));
                }
            };
            one(run % 2 == 0);
            one(run % 2 == 1);
        }
        let (b, l) = (median(&mut base), median(&mut lib));
        println!(
            "| {} x{} | {:.1} | {:.0} | {:.0} | {:.2}x | >= 0.8x {} |",
            if payload == Payload::Text {
                "text"
            } else {
                "tool-args"
            },
            n,
            body.len() as f64 / 1e6,
            b,
            l,
            l / b,
            if l / b >= 0.8 { "met" } else { "MISSED" }
        );
    }
}
