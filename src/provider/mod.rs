//! The cassette recorder's pass-through HTTP. Everything else that spoke to
//! the server moved to `crate::protocol`; this file stays until
//! `forward.rs` moves next to `testing::Recorder`.

mod forward;

pub(crate) use forward::Forwarder;
