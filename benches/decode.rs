//! Benchmark 1: stream decode in memory.
//!
//! The library's SSE parser and delta accumulator (the exact path the client
//! runs after the socket, through `pikuri::__bench::decode_stream`) over a
//! pre-built stream of 200,000 deltas, against a baseline that splits lines
//! and parses each `data:` payload into typed serde structs, nothing else.
//! Two streams: 3-character text deltas (~31 MB), and tool-argument deltas
//! whose JSON text is dense with escapes. Target: >= 0.9x the baseline's
//! chunks/s.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use common::apis::{decode_row, race_decode};
use common::{Payload, baseline_decode, header, sse_body, stream_chunks};

fn main() {
    header("decode (in memory)");
    let n = stream_chunks();
    println!("| stream | MB | baseline chunks/s | pikuri chunks/s | ratio | target |");
    println!("|---|---:|---:|---:|---:|---|");
    for payload in [Payload::Text, Payload::ToolArgs] {
        let body = sse_body(payload, n);
        let expected = baseline_decode(&body);
        let rates = race_decode(
            pikuri::Api::ChatCompletions,
            payload,
            &body,
            n,
            (baseline_decode, &expected),
            expected.delta_bytes,
        );
        decode_row(payload.name(), n, body.len(), rates, 0.9);
    }
}
