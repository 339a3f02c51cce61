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

use std::io::BufReader;

use common::{
    Payload, baseline_decode, header, median, runs, secs, sse_body, stream_chunks, timed,
};

fn main() {
    header("decode (in memory)");
    let n = stream_chunks();
    println!("| stream | MB | baseline chunks/s | pikuri chunks/s | ratio | target |");
    println!("|---|---:|---:|---:|---:|---|");
    for payload in [Payload::Text, Payload::ToolArgs] {
        let body = sse_body(payload, n);
        let expected = baseline_decode(&body);
        let (mut base, mut lib) = (Vec::new(), Vec::new());
        // Each run is short (~0.2 s), so take twice as many and then one.
        for run in 0..=runs() * 2 {
            // Alternate the order so drift on a shared machine hits both.
            let mut one = |which: bool| {
                if which {
                    let (t, d) = timed(|| baseline_decode(&body));
                    assert_eq!(t, expected);
                    base.push(n as f64 / secs(d));
                } else {
                    let mut bytes = 0usize;
                    let (m, d) = timed(|| {
                        let reader = BufReader::with_capacity(64 * 1024, &body[..]);
                        pikuri::__bench::decode_stream(reader, &mut |s| bytes += s.len())
                            .expect("stream decodes")
                    });
                    let got = m.content.len()
                        + m.tool_calls
                            .iter()
                            .map(|c| c.arguments.len())
                            .sum::<usize>();
                    assert_eq!(
                        got, expected.delta_bytes,
                        "pikuri assembled what the baseline saw"
                    );
                    if payload == Payload::Text {
                        assert_eq!(bytes, expected.delta_bytes, "every text fragment reported");
                    }
                    lib.push(n as f64 / secs(d));
                }
            };
            one(run % 2 == 0);
            one(run % 2 == 1);
        }
        let (b, l) = (median(&mut base), median(&mut lib));
        println!(
            "| {} x{} | {:.1} | {:.0} | {:.0} | {:.2}x | >= 0.9x {} |",
            payload.name(),
            n,
            body.len() as f64 / 1e6,
            b,
            l,
            l / b,
            if l / b >= 0.9 { "met" } else { "MISSED" }
        );
    }
}
