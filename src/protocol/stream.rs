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
use super::sink::{Joined, Sink};
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
    /// The API key, redacted from chunks quoted in log lines, from the
    /// text passed to the sink and from the answer.
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
    // The deltas of one read reach the sink joined (see `Joined`), the
    // key redacted.
    let mut joined = Joined::new(sink).redacting(super::rules::answer_secret(options.secret));
    // The SSE reader takes its two hooks as two closures, both the sink's;
    // they never run at once (`before_read` runs between reads).
    let sink = RefCell::new(&mut joined);
    let read = read_sse(
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
    );
    // What was decoded reaches the sink whatever ended the stream (the
    // text of a cancelled stream is the agent's `Cancelled` event).
    joined.finish();
    read.and_then(|()| decoder.finish())
        .map(|c| c.redacted(options.secret))
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use super::*;
    use crate::protocol::decode::Fragment;

    /// What reached the sink: `c:` text, `|` a read's end.
    #[derive(Default)]
    struct Heard(Vec<String>);

    impl Sink for Heard {
        fn fragment(&mut self, fragment: Fragment<'_>) {
            if let Fragment::Content(s) = fragment {
                self.0.push(format!("c:{s}"));
            }
        }
        fn before_read(&mut self) {
            self.0.push("|".into());
        }
    }

    fn chunk(text: &str) -> String {
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
    }

    fn read(body: &str, buffer: usize) -> (Vec<String>, Result<Completion, DecodeError>) {
        let options = StreamOptions {
            api: Api::ChatCompletions,
            max_line: 1 << 20,
            max_body: 1 << 30,
            split_think: false,
            secret: None,
        };
        let mut heard = Heard::default();
        let reader = BufReader::with_capacity(buffer, body.as_bytes());
        let result = read_stream(reader, &options, &mut heard);
        (heard.0, result)
    }

    #[test]
    fn the_deltas_of_one_read_reach_the_sink_joined_before_the_next_read() {
        let one = chunk("a");
        let body = [
            chunk("a"),
            chunk("b"),
            chunk("c"),
            "data: [DONE]\n\n".into(),
        ]
        .concat();
        // All in one read, which ends at `[DONE]`.
        let (heard, result) = read(&body, body.len());
        assert_eq!(heard, ["c:abc"]);
        assert_eq!(result.unwrap().message.content, "abc");
        // Two chunks a read: each read's text before the read's end.
        let (heard, _) = read(&body, 2 * one.len());
        assert_eq!(heard, ["c:ab", "|", "c:c"]);
    }

    #[test]
    fn the_text_before_a_cut_reaches_the_sink() {
        let body = [chunk("a"), chunk("b")].concat();
        let (heard, result) = read(&body, body.len());
        assert!(matches!(result, Err(DecodeError::Truncated)), "{result:?}");
        assert_eq!(heard, ["c:ab", "|"]);
    }
}
