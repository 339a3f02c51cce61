//! Chat-completion chunks and responses → one assistant [`Message`].
//!
//! [`Accumulator`] takes the `data` of each SSE event (from [`super::sse`])
//! of a streamed chat completion, reports text as it arrives, and assembles
//! the final message; [`parse_response`] does the same for a non-streamed
//! response body. The JSON shapes (`shapes`) are private serde structs that
//! borrow strings from the input where they have no escapes and ignore
//! unknown fields. This module is where provider quirks are absorbed.
//!
//! | file | job |
//! |---|---|
//! | `accumulator.rs` | streamed chunks → message, tool calls by index |
//! | `think.rs` | `<think>` tags split out of content, across chunks |
//! | `response.rs` | a non-streamed response body → message |
//! | `shapes.rs` | the borrowed serde shapes of chunks and responses |
//!
//! # Rules
//!
//! - Only the choice with index 0 (or without an index) is read.
//! - Content comes from `delta.content`; reasoning from
//!   `delta.reasoning_content` (llama.cpp, DeepSeek, vLLM) and from
//!   `delta.reasoning` (OpenRouter). When both carry the same text it is
//!   taken once. Every non-empty piece is reported as a [`Fragment`] as it
//!   arrives and appended to the message.
//! - Tool calls are assembled by `index`. `id` and `function.name` may come
//!   in any delta for that index, and may be repeated (a repeat is ignored,
//!   a different name is taken as a continuation and appended). `arguments`
//!   fragments are appended in order. A delta without `index` continues the
//!   last call (or call 0), unless it carries an `id` different from that
//!   call's, in which case it starts a new call after the highest index.
//!   Calls without an id get `call_<index>`. The message lists calls by
//!   index. `arguments` sent as a JSON object (some servers) is serialized.
//! - `finish_reason` is kept verbatim, the last non-empty one. `model` is the
//!   first non-empty one. `usage` is taken from any chunk that has it (the
//!   last wins); see [`Usage`] for how OpenAI's figures are split.
//! - `data: [DONE]` ends the stream; data after it is ignored.
//! - A chunk with an `error` member is a [`DecodeError::Protocol`]
//!   (`server error in stream: ...`). A chunk that is not JSON is a
//!   [`DecodeError::Protocol`] quoting at most 200 characters of it. A chunk that
//!   is JSON of another shape (no `choices`, a keep-alive object, a member
//!   of an unexpected type) is skipped with a `warn` log line.
//! - [`Accumulator::finish`] fails with [`DecodeError::Truncated`] when neither
//!   `[DONE]` nor a `finish_reason` arrived; a `finish_reason` without
//!   `[DONE]` is a complete stream.
//!
//! # Think tags
//!
//! With `split_think`, `<think>...</think>` in the content (models whose
//! server does not separate reasoning) is moved to the reasoning, also while
//! streaming: a tag may be split across chunks at any byte, and only the
//! shortest tail that could still become a tag is held back, so no partial
//! tag text reaches a [`Fragment::Content`]. Whitespace right after
//! `</think>` is dropped from the content. Held-back text that never became
//! a tag is released when the `finish_reason` or `[DONE]` arrives.
//!
//! # Errors
//!
//! Decoding fails with a [`DecodeError`], private to this module tree. The
//! client turns it into the public [`crate::Error`] in one place
//! (`client::decode_error`), where the configured timeouts are known.

mod accumulator;
mod response;
mod shapes;
mod think;

use std::borrow::Cow;
use std::fmt;
use std::io::{self, BufRead};

use super::sse::{Flow, read_sse};
use crate::{Message, ToolCall, Usage};

pub(crate) use accumulator::Accumulator;
pub(crate) use response::parse_response;

/// Why decoding a response failed. Mapped to [`crate::Error`] once, by the
/// client; `Display` is the bare message (the mapping adds the prefix).
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// Not the chat-completions protocol: invalid SSE framing, a chunk or
    /// body that is not the expected JSON, a server `error` object, a size
    /// limit passed. Becomes [`Error::Protocol`](crate::Error::Protocol).
    Protocol(String),
    /// The stream ended before `[DONE]` and before a `finish_reason`, or
    /// the body was cut mid-frame. Becomes
    /// [`Error::Truncated`](crate::Error::Truncated).
    Truncated,
    /// A read of the body timed out. Becomes
    /// [`Error::Timeout`](crate::Error::Timeout) with the configured read
    /// timeout.
    TimedOut,
    /// Any other failed read. Becomes
    /// [`Error::Transport`](crate::Error::Transport) (or a timeout, when the
    /// HTTP library wrapped one).
    Io(io::Error),
}

impl DecodeError {
    /// Classify a failed read of a body.
    pub(crate) fn from_io(e: io::Error) -> DecodeError {
        match e.kind() {
            // std documents either kind for an expired socket read timeout,
            // depending on the platform.
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => DecodeError::TimedOut,
            _ => DecodeError::Io(e),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Protocol(m) => f.write_str(m),
            DecodeError::Truncated => f.write_str("stream truncated before [DONE]"),
            DecodeError::TimedOut => f.write_str("read timed out"),
            DecodeError::Io(e) => write!(f, "read failed: {e}"),
        }
    }
}

/// A fragment reported while streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment<'a> {
    /// Assistant text.
    Content(&'a str),
    /// Reasoning text.
    Reasoning(&'a str),
}

/// A complete assistant message and its metadata.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Completion {
    /// The assistant message, with `reasoning`, `usage` and `model` set when
    /// known.
    pub(crate) message: Message,
    /// The server's `finish_reason`, verbatim (`stop`, `tool_calls`,
    /// `length`, ...).
    pub(crate) finish_reason: Option<String>,
    /// Token usage, when the server reported it.
    pub(crate) usage: Option<Usage>,
    /// The model the server named.
    pub(crate) model: Option<String>,
}

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

pub(super) fn completion(
    content: String,
    reasoning: String,
    calls: Vec<ToolCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
) -> Completion {
    let mut message = Message::assistant_tool_calls(content, calls);
    message.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    message.usage = usage;
    message.model.clone_from(&model);
    Completion {
        message,
        finish_reason,
        usage,
        model,
    }
}

/// At most 200 characters of `text`, for error messages.
pub(super) fn excerpt(text: &str) -> Cow<'_, str> {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => Cow::Owned(format!("{}...", &text[..end])),
        None => Cow::Borrowed(text),
    }
}

/// The text of an `error` member: a string, or an object's `message`.
pub(super) fn error_message(error: &serde_json::Value) -> String {
    let text = match error {
        serde_json::Value::String(s) => Cow::Borrowed(s.as_str()),
        serde_json::Value::Object(map) => match map.get("message") {
            Some(serde_json::Value::String(s)) => Cow::Borrowed(s.as_str()),
            _ => Cow::Owned(error.to_string()),
        },
        other => Cow::Owned(other.to_string()),
    };
    excerpt(&text).into_owned()
}
