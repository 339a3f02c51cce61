//! A streamed body decoded: SSE events (`super::sse`) fed to the decoder of
//! the transport's [`Api`] until its end event. Its own file so that each
//! decoder stays ignorant of the others and of the SSE reader.

use std::cell::RefCell;
use std::io::BufRead;

#[cfg(feature = "anthropic")]
use super::anthropic;
use super::decode::{Accumulator, Completion, StreamDecoder};
use super::error::DecodeError;
#[cfg(feature = "gemini")]
use super::gemini;
#[cfg(feature = "responses")]
use super::responses;
use super::sink::Sink;
use super::sse::{Flow, read_sse};
use crate::Api;

/// The limits and settings of one streamed body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamOptions<'a> {
    /// The wire format of the events.
    pub(crate) api: Api,
    /// Largest SSE line or event.
    pub(crate) max_line: usize,
    /// Largest total event data.
    pub(crate) max_body: u64,
    /// Move `<think>` tags out of the content.
    pub(crate) split_think: bool,
    /// The API key, redacted from chunks quoted in log lines.
    pub(crate) secret: Option<&'a str>,
}

/// Decode a streamed body: SSE events into the decoder, fragments to the
/// sink, until the end event or EOF; the sink hears of each event that
/// carried part of the answer (`progress`), and `before_read` runs when
/// what was read is decoded, before the next read, which may wait for the
/// network. The whole streaming path after the socket (the benches drive it
/// through `crate::__bench`).
pub(crate) fn read_stream<R: BufRead>(
    reader: R,
    options: &StreamOptions<'_>,
    sink: &mut dyn Sink,
) -> Result<Completion, DecodeError> {
    let StreamOptions {
        split_think,
        secret,
        ..
    } = *options;
    // One loop per decoder, monomorphized: the hot path calls its
    // decoder directly.
    match options.api {
        Api::ChatCompletions => decode(
            reader,
            options,
            sink,
            Accumulator::new(split_think).redacting(secret),
        ),
        #[cfg(feature = "anthropic")]
        Api::AnthropicMessages => decode(
            reader,
            options,
            sink,
            anthropic::Decoder::new(split_think, secret),
        ),
        #[cfg(feature = "responses")]
        Api::OpenAiResponses => decode(
            reader,
            options,
            sink,
            responses::Decoder::new(split_think, secret),
        ),
        #[cfg(feature = "gemini")]
        Api::Gemini => decode(
            reader,
            options,
            sink,
            gemini::Decoder::new(split_think, secret),
        ),
        #[cfg(not(all(feature = "anthropic", feature = "responses", feature = "gemini")))]
        #[allow(unreachable_patterns, reason = "some of the APIs are built")]
        api => super::wire::not_built(api),
    }
}

/// [`read_stream`] with the API's decoder.
fn decode<R: BufRead>(
    reader: R,
    options: &StreamOptions<'_>,
    sink: &mut dyn Sink,
    mut decoder: impl StreamDecoder,
) -> Result<Completion, DecodeError> {
    let StreamOptions {
        max_line, max_body, ..
    } = *options;
    // Small, valid events can still grow the message without end:
    // the event data of one stream is capped like a plain body.
    let mut total = 0u64;
    // The SSE reader takes its two hooks as two closures, both the sink's;
    // they never run at once (`before_read` runs between reads).
    let sink = RefCell::new(sink);
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
            let before = decoder.progress();
            let mut sink = sink.borrow_mut();
            decoder.push_data(data, &mut |f| sink.fragment(f))?;
            if decoder.progress() != before {
                sink.progress();
            }
            // Stop at the end event: anything after it is ignored. The
            // client reads the rest of a framed body itself, within its
            // bounds, to keep the connection (`drain_after_done` in
            // `client.rs`).
            Ok(if decoder.is_done() {
                Flow::Stop
            } else {
                Flow::Continue
            })
        },
        &mut || sink.borrow_mut().before_read(),
    )
    .and_then(|()| decoder.finish())
}
