//! Arbitrary lines as Anthropic Messages stream events through its decoder,
//! and the whole input as a non-streamed response; what decodes is encoded
//! again as a request. The first byte chooses `split_think`. Fails on a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pikuri::__fuzz_anthropic(data);
});
