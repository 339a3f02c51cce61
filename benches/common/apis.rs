//! What the per-API stream benches share (`decode`, `decode_responses`,
//! `decode_anthropic`, `e2e_apis`): the Anthropic Messages stream, the
//! baseline's line loop, and the race of a baseline against pikuri's
//! decoder with its result row.

// `benches/compare/async-openai` compiles `common` too, and has no
// `_bench` feature to gate on.
#![allow(
    unexpected_cfgs,
    reason = "the compare crate declares no _bench feature"
)]

#[cfg(feature = "_bench")]
use std::fmt::Debug;
use std::io::BufRead;
#[cfg(feature = "_bench")]
use std::io::BufReader;

use serde_json::json;

use super::{Payload, pieces};
#[cfg(feature = "_bench")]
use super::{median, runs, secs, timed};

/// The tool-call input the Anthropic stream's `input_json_delta`s carry:
/// a JSON object whose string holds source code (quotes, backslashes and
/// newlines, so the wire text is dense with escapes).
const ANTHROPIC_CODE: &str = "{\"code\": \"fn main() {\\n    let path = \\\"C:\\\\\\\\tmp\\\\\\\\out.txt\\\";\\n    \
    println!(\\\"{}\\\\t{}\\\", path, 42);\\n}\\n\"}";

/// One named SSE event (`event:` then `data:` line), as Anthropic and the
/// Responses API send them.
pub(crate) fn sse_event(out: &mut Vec<u8>, kind: &str, data: &serde_json::Value) {
    out.extend_from_slice(format!("event: {kind}\ndata: {data}\n\n").as_bytes());
}

/// An Anthropic Messages stream of `n` deltas of `payload` from `model`:
/// 3-character `text_delta`s, or `input_json_delta`s of one tool call.
pub(crate) fn anthropic_body(payload: Payload, n: usize, model: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 120 + 1024);
    sse_event(
        &mut out,
        "message_start",
        &json!({"type":"message_start","message":{"id":"msg_1","type":"message",
            "role":"assistant","model":model,"content":[],"stop_reason":null,
            "usage":{"input_tokens":100,"output_tokens":1}}}),
    );
    let (start, text) = match payload {
        Payload::Text => (json!({"type":"text","text":""}), super::PROSE),
        Payload::ToolArgs => (
            json!({"type":"tool_use","id":"toolu_1","name":"write","input":{}}),
            ANTHROPIC_CODE,
        ),
    };
    sse_event(
        &mut out,
        "content_block_start",
        &json!({"type":"content_block_start","index":0,"content_block":start}),
    );
    for p in pieces(text, 3, n) {
        let delta = match payload {
            Payload::Text => json!({"type":"text_delta","text":p}),
            Payload::ToolArgs => json!({"type":"input_json_delta","partial_json":p}),
        };
        sse_event(
            &mut out,
            "content_block_delta",
            &json!({"type":"content_block_delta","index":0,"delta":delta}),
        );
    }
    sse_event(
        &mut out,
        "content_block_stop",
        &json!({"type":"content_block_stop","index":0}),
    );
    sse_event(
        &mut out,
        "message_delta",
        &json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},
            "usage":{"output_tokens":n}}),
    );
    sse_event(&mut out, "message_stop", &json!({"type":"message_stop"}));
    out
}

/// The baseline's loop: lines through `reader` (`read_until` finds line
/// ends with memchr), each `data: ` payload to `on_data`, until it returns
/// `false` or the stream ends.
pub(crate) fn data_lines<R: BufRead>(reader: &mut R, mut on_data: impl FnMut(&[u8]) -> bool) {
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).expect("read") == 0 {
            break;
        }
        let l = line.strip_suffix(b"\n").unwrap_or(&line);
        let Some(data) = l.strip_prefix(b"data: ") else {
            continue;
        };
        if !on_data(data) {
            break;
        }
    }
}

/// Races `baseline` against pikuri's decoder of `api` over the in-memory
/// `body`, `runs() * 2 + 1` times each (each run is short), alternating the
/// order so drift on a shared machine hits both. Checks that the baseline
/// saw `expected` each time, and that pikuri assembled `delta_bytes` (and
/// reported every text fragment). Returns the medians of `units` per
/// second: (baseline, pikuri). Only with `_bench` (the decode benches
/// require it; `e2e_apis`, which shares this file, does not).
#[cfg(feature = "_bench")]
pub(crate) fn race_decode<T: PartialEq + Debug>(
    api: pikuri::Api,
    payload: Payload,
    body: &[u8],
    units: usize,
    (baseline, expected): (impl Fn(&[u8]) -> T, &T),
    delta_bytes: usize,
) -> (f64, f64) {
    let (mut base, mut lib) = (Vec::new(), Vec::new());
    for run in 0..=runs() * 2 {
        let mut one = |which: bool| {
            if which {
                let (t, d) = timed(|| baseline(body));
                assert_eq!(&t, expected);
                base.push(units as f64 / secs(d));
            } else {
                let mut bytes = 0usize;
                let (m, d) = timed(|| {
                    let reader = BufReader::with_capacity(64 * 1024, body);
                    pikuri::__bench::decode_stream_of(api, reader, &mut |s| bytes += s.len())
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
                lib.push(units as f64 / secs(d));
            }
        };
        one(run % 2 == 0);
        one(run % 2 == 1);
    }
    (median(&mut base), median(&mut lib))
}

/// The result row of a [`race_decode`]: `label x n`, the body's MB, both
/// rates, their ratio and whether it meets `target`.
pub(crate) fn decode_row(label: &str, n: usize, body_len: usize, (b, l): (f64, f64), target: f64) {
    println!(
        "| {label} x{n} | {:.1} | {b:.0} | {l:.0} | {:.2}x | >= {target}x {} |",
        body_len as f64 / 1e6,
        l / b,
        if l / b >= target { "met" } else { "MISSED" }
    );
}
