//! Arbitrary lines as OpenAI Responses stream events through its decoder,
//! and the whole input as a non-streamed Responses body. The first byte
//! chooses `split_think`. Fails on a panic, or when a finished message's
//! text differs from the fragments reported for it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pikuri::__fuzz_responses(data);
});
