//! Arbitrary bytes through the SSE parser: whole, in pieces and through
//! `read_sse`. The first two bytes choose the line limit and the piece size.
//! Fails on a panic, or when the three disagree on events or errors.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pikuri::__fuzz_sse(data);
});
