//! A streamed body decoded: SSE events (`super::super::sse`) fed to the
//! [`Accumulator`] until `[DONE]`. Its own file so that `mod.rs` keeps only
//! what the decoders share and imports none of them.

use std::io::BufRead;

use super::accumulator::Accumulator;
use super::{Completion, Fragment};
use crate::protocol::error::DecodeError;
use crate::protocol::sse::{Flow, read_sse};

/// The limits and settings of one streamed body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamOptions<'a> {
    /// Largest SSE line or event.
    pub(crate) max_line: usize,
    /// Largest total event data.
    pub(crate) max_body: u64,
    /// Move `<think>` tags out of the content.
    pub(crate) split_think: bool,
    /// The API key, redacted from chunks quoted in log lines.
    pub(crate) secret: Option<&'a str>,
}

/// Decode a streamed body: SSE events into the accumulator, fragments to
/// `on_fragment`, until `[DONE]` or EOF; `on_progress` hears of each chunk
/// that carried part of the answer (see [`Accumulator::progress`]), and
/// `before_read` runs when what was read is decoded, before the next read,
/// which may wait for the network. The
/// whole streaming path after the socket (the benches drive it through
/// `crate::__bench`).
pub(crate) fn read_stream<R: BufRead>(
    reader: R,
    options: &StreamOptions<'_>,
    on_progress: &mut dyn FnMut(),
    on_fragment: &mut dyn FnMut(Fragment<'_>),
    before_read: &mut dyn FnMut(),
) -> Result<Completion, DecodeError> {
    let StreamOptions {
        max_line, max_body, ..
    } = *options;
    let mut acc = Accumulator::new(options.split_think).redacting(options.secret);
    // Small, valid events can still grow the message without end:
    // the event data of one stream is capped like a plain body.
    let mut total = 0u64;
    read_sse(
        reader,
        max_line,
        &mut |data| {
            total = total.saturating_add(data.len() as u64);
            if total > max_body {
                return Err(DecodeError::Protocol(format!(
                    "streamed response exceeds {max_body} bytes"
                )));
            }
            let before = acc.progress();
            acc.push_data(data, on_fragment)?;
            if acc.progress() != before {
                on_progress();
            }
            // Stop at `[DONE]`: anything after it is ignored. The client reads
            // the rest of a framed body itself, within its bounds, to keep the
            // connection (`drain_after_done` in `client.rs`).
            Ok(if acc.is_done() {
                Flow::Stop
            } else {
                Flow::Continue
            })
        },
        before_read,
    )
    .and_then(|()| acc.finish())
}
