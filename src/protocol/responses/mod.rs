//! OpenAI's Responses API (`POST {base}/responses`): the request encoder and the response and stream decoders, into
//! the same [`Completion`] and [`Fragment`]s as chat completions.
//!
//! Not implemented yet: every entry point fails with a protocol error.

use super::decode::{Completion, Fragment};
use super::error::DecodeError;
use super::request::Request;

const UNSUPPORTED: &str = "this wire format is not implemented yet";

/// Serialize `req` into `buf` (cleared first).
pub(crate) fn write_body(req: &Request<'_>, buf: &mut Vec<u8>) {
    let _ = req;
    buf.clear();
    buf.extend_from_slice(b"{}");
}

/// Decode a non-streamed response body.
pub(crate) fn parse_response(body: &[u8], split_think: bool) -> Result<Completion, DecodeError> {
    let _ = (body, split_think);
    Err(DecodeError::Protocol(UNSUPPORTED.to_string()))
}

/// The stream decoder: one event's data at a time.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    progress: u64,
}

// A stub until the decoder lands: its methods keep the shared contract.
#[allow(clippy::unused_self, reason = "stub until the decoder is written")]
impl Decoder {
    /// A decoder; `split_think` moves `<think>` tags out of the text,
    /// `secret` is redacted from what log lines quote.
    pub(crate) fn new(split_think: bool, secret: Option<&str>) -> Decoder {
        let _ = (split_think, secret);
        Decoder::default()
    }

    /// Feed one event's data, reporting fragments.
    pub(crate) fn push_data(
        &mut self,
        data: &str,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<(), DecodeError> {
        let _ = (data, on_fragment);
        Err(DecodeError::Protocol(UNSUPPORTED.to_string()))
    }

    /// How many events carried part of the answer.
    pub(crate) fn progress(&self) -> u64 {
        self.progress
    }

    /// Whether the end event arrived.
    pub(crate) fn is_done(&self) -> bool {
        false
    }

    /// The complete message, or `Truncated`.
    pub(crate) fn finish(self) -> Result<Completion, DecodeError> {
        Err(DecodeError::Truncated)
    }
}
