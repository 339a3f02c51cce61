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

use std::io::BufReader;

use common::apis::{anthropic_body, data_lines, decode_row, race_decode};
use common::{Payload, header, stream_chunks};
use serde::Deserialize;

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
    data_lines(&mut BufReader::with_capacity(64 * 1024, body), |data| {
        let e: Event = serde_json::from_slice(data).expect("baseline: event parses");
        events += 1;
        if let Some(d) = &e.delta {
            bytes += d.text.as_ref().map_or(0, String::len);
            bytes += d.partial_json.as_ref().map_or(0, String::len);
        }
        e.kind != "message_stop"
    });
    (events, bytes)
}

fn main() {
    header("decode, Anthropic Messages (in memory)");
    let n = stream_chunks();
    println!("| stream | MB | baseline chunks/s | pikuri chunks/s | ratio | target |");
    println!("|---|---:|---:|---:|---:|---|");
    for payload in [Payload::Text, Payload::ToolArgs] {
        let body = anthropic_body(payload, n, "claude-bench");
        let expected = baseline(&body);
        let rates = race_decode(
            pikuri::Api::AnthropicMessages,
            payload,
            &body,
            n,
            (baseline, &expected),
            expected.1,
        );
        let label = format!("anthropic {}", payload.name());
        decode_row(&label, n, body.len(), rates, 0.8);
    }
}
