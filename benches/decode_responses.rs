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

use std::io::BufReader;

use common::apis::{data_lines, decode_row, race_decode};
use common::{CODE, PROSE, Payload, header, pieces, stream_chunks};
use serde::Deserialize;
use serde_json::json;

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
        3,
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
    data_lines(&mut BufReader::with_capacity(64 * 1024, body), |data| {
        let e: Event = serde_json::from_slice(data).expect("baseline: event parses");
        events += 1;
        bytes += e.delta.as_ref().map_or(0, String::len);
        e.kind != "response.completed"
    });
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
        let rates = race_decode(
            pikuri::Api::OpenAiResponses,
            payload,
            &body,
            events,
            (baseline, &(events, delta_bytes)),
            delta_bytes,
        );
        decode_row(payload.name(), n, body.len(), rates, 0.8);
    }
}
