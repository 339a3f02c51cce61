//! Benchmark 1c (issue 37): Gemini `streamGenerateContent?alt=sse` decode
//! in memory.
//!
//! pikuri's SSE parser and Gemini decoder (the path the client runs after
//! the socket, through `pikuri::__bench::decode_stream_of`) over a
//! pre-built stream of 200,000 chunks, against a baseline that splits
//! lines and parses each `data:` payload into typed serde structs, nothing
//! else. Each chunk is a whole `GenerateContentResponse` with one
//! 3-character text part, its `usageMetadata` and `modelVersion`, as
//! Gemini sends them (`\r\n` line ends); the last has the `finishReason`.
//! Gemini sends a function call whole, not in pieces, so there is no
//! tool-argument stream to race. Target (issue 37): within 1.25x of the
//! baseline's time, i.e. >= 0.8x its chunks/s.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::BufReader;

use common::apis::{data_lines, decode_row, race_decode};
use common::{PROSE, Payload, header, pieces, stream_chunks};
use serde::Deserialize;
use serde_json::json;

/// The baseline's typed chunk: what a hand-written client deserializes.
#[derive(Deserialize)]
struct Chunk {
    candidates: Vec<Candidate>,
}

#[derive(Deserialize)]
struct Candidate {
    content: Content,
    #[serde(rename = "finishReason", default)]
    finish: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    parts: Vec<Part>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(default)]
    text: Option<String>,
}

/// A stream of `n` chunks of 3 characters of prose each.
fn gemini_body(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 200 + 1024);
    let count = n;
    for (i, p) in pieces(PROSE, 3, n).into_iter().enumerate() {
        let mut chunk = json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": p}]}, "index": 0}],
            "usageMetadata": {"promptTokenCount": 100, "totalTokenCount": 100},
            "modelVersion": "gemini-bench",
        });
        if i + 1 == count {
            chunk["candidates"][0]["finishReason"] = json!("STOP");
            chunk["usageMetadata"] = json!({"promptTokenCount": 100, "candidatesTokenCount": n, "totalTokenCount": n + 100});
        }
        out.extend_from_slice(format!("data: {chunk}\r\n\r\n").as_bytes());
    }
    out
}

/// Chunks parsed and text bytes, up to the finish reason.
fn baseline(body: &[u8]) -> (usize, usize) {
    let (mut chunks, mut bytes) = (0, 0);
    data_lines(&mut BufReader::with_capacity(64 * 1024, body), |data| {
        let data = data.strip_suffix(b"\r").unwrap_or(data);
        let c: Chunk = serde_json::from_slice(data).expect("baseline: chunk parses");
        chunks += 1;
        let mut done = false;
        for cand in &c.candidates {
            for p in &cand.content.parts {
                bytes += p.text.as_ref().map_or(0, String::len);
            }
            done |= cand.finish.is_some();
        }
        !done
    });
    (chunks, bytes)
}

fn main() {
    header("decode, Gemini streamGenerateContent (in memory)");
    let n = stream_chunks();
    println!("| stream | MB | baseline chunks/s | pikuri chunks/s | ratio | target |");
    println!("|---|---:|---:|---:|---:|---|");
    let body = gemini_body(n);
    let expected = baseline(&body);
    let rates = race_decode(
        pikuri::Api::Gemini,
        Payload::Text,
        &body,
        n,
        (baseline, &expected),
        expected.1,
    );
    decode_row("gemini text", n, body.len(), rates, 0.8);
}
