//! Arbitrary lines as chat-completion chunks through the accumulator, and the
//! whole input as a non-streamed response. The first byte chooses
//! `split_think`. Fails on a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pikuri::__fuzz_accumulate(data);
});
