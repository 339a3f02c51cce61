//! Arbitrary bytes (read as lossy UTF-8) through `html_to_markdown`, with
//! and without a base URL. Fails on a panic, or when the output is more
//! than a small multiple of the input (the renderer's output is bounded by
//! its input: capped prefixes, no repeated expansion).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let html = String::from_utf8_lossy(data);
    let base = (data.first().is_some_and(|b| b & 1 == 1)).then_some("https://example.org/a/b?q");
    let out = pikuri::builtin::html_to_markdown(&html, base);
    // Link targets are resolved against the base, which can add its length
    // per link; everything else (list markers with a huge `start`) at most 16 bytes per input byte.
    assert!(out.len() <= 64 + html.len() * 16, "{} bytes from {}", out.len(), html.len());
});
