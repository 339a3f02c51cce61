//! Benchmark (issue 36 item 3): the cost per event stays constant however
//! many items a stream names.
//!
//! Two streams that used to be quadratic, decoded in memory through the
//! library's streaming path (`pikuri::__bench::decode_stream_of`): OpenAI
//! Responses text deltas that each name a new item id (each used to search
//! every item before it), and Anthropic `content_block_start`s, each a new
//! block (each used to search every block before it). Each is timed at N,
//! 2N and 4N events; linear work shows as a constant time per event, so
//! the last column (time per event against the N row) stays near 1.0x
//! where quadratic work doubles it per row. `PIKURI_BENCH_QUICK=1` runs a
//! smoke size.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use common::{header, median, quick, runs, secs, timed};
use serde_json::json;

/// Responses: `n` one-byte text deltas, each under an item id of its own.
fn responses_body(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 110 + 256);
    let mut event = |v: serde_json::Value| {
        let kind = v["type"].as_str().unwrap_or_default().to_string();
        out.extend_from_slice(format!("event: {kind}\ndata: {v}\n\n").as_bytes());
    };
    event(json!({"type": "response.created", "response": {"model": "m"}}));
    for i in 0..n {
        event(json!({"type": "response.output_text.delta",
            "item_id": format!("msg_{i}"), "output_index": i, "delta": "x"}));
    }
    event(json!({"type": "response.completed", "response": {"status": "completed"}}));
    out
}

/// Anthropic: `n` text blocks, each started, given one byte, and stopped.
fn anthropic_body(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 260 + 256);
    let mut event = |v: serde_json::Value| {
        let kind = v["type"].as_str().unwrap_or_default().to_string();
        out.extend_from_slice(format!("event: {kind}\ndata: {v}\n\n").as_bytes());
    };
    event(json!({"type": "message_start", "message": {"model": "m"}}));
    for i in 0..n {
        event(json!({"type": "content_block_start", "index": i,
            "content_block": {"type": "text", "text": ""}}));
        event(json!({"type": "content_block_delta", "index": i,
            "delta": {"type": "text_delta", "text": "x"}}));
        event(json!({"type": "content_block_stop", "index": i}));
    }
    event(json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}));
    event(json!({"type": "message_stop"}));
    out
}

/// Median seconds to decode `body`, checking the text came out whole.
fn decode(api: pikuri::Api, body: &[u8], n: usize) -> f64 {
    let mut times: Vec<f64> = (0..runs())
        .map(|_| {
            let (message, took) = timed(|| {
                pikuri::__bench::decode_stream_of(api, body, &mut |_| {}).expect("decodes")
            });
            assert_eq!(message.content.len(), n, "the whole text");
            secs(took)
        })
        .collect();
    median(&mut times)
}

fn main() {
    header("decode scaling: events under distinct item ids (in memory)");
    let (responses_n, anthropic_n) = if quick() {
        (2_000, 1_000)
    } else {
        (60_000, 20_000)
    };
    println!("| stream | events | median ms | ns/event | per event vs N |");
    println!("|---|---:|---:|---:|---:|");
    for (label, api, base, body) in [
        (
            "responses, a new item id per delta",
            pikuri::Api::OpenAiResponses,
            responses_n,
            responses_body as fn(usize) -> Vec<u8>,
        ),
        (
            "anthropic, a new block per start",
            pikuri::Api::AnthropicMessages,
            anthropic_n,
            anthropic_body,
        ),
    ] {
        let mut first = None;
        for n in [base, 2 * base, 4 * base] {
            let s = decode(api, &body(n), n);
            let per = s / n as f64;
            let ratio = per / *first.get_or_insert(per);
            println!(
                "| {label} | {n} | {:.1} | {:.0} | {ratio:.2}x |",
                s * 1e3,
                per * 1e9
            );
        }
    }
}
