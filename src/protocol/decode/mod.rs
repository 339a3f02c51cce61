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
//!   Two calls under one id, or a call without a name, refuse the answer
//!   (the shared [identity rule](super::rules#identity)).
//! - The last non-empty `finish_reason` is mapped to a
//!   [`FinishReason`](crate::FinishReason) (`rules::chat_finish`). `model`
//!   is the first non-empty one (bounded). `usage` is taken from any chunk that has it (the
//!   last wins); see [`Usage`] for how OpenAI's figures are split.
//! - Provider fields are kept verbatim to be sent back (see
//!   [`ProviderData`]): OpenRouter's `reasoning_details` (a list; in a
//!   stream each delta's list is appended, in order) and a message-level
//!   `extra_content` become one object in the message's
//!   `provider_data.items`; Gemini's `extra_content` on a tool call (with
//!   `google.thought_signature`, in a stream in any delta of the call, the
//!   first wins) becomes `{"extra_content": ...}` in
//!   [`ToolCall::provider_data`]. The message's `provider_data` is set
//!   whenever either is present, with empty `endpoint` and `model`: the
//!   seam (`wire::stamp_origin`) fills in the request's API base and model,
//!   which the decoder does not know. The fast shapes only note that such
//!   a member is there (`shapes::Seen`, skipped like an unknown member);
//!   only then is the text read again for them (`shapes::OpaqueBody`), so
//!   streams without them decode as fast as before.
//! - `data: [DONE]` ends the stream; data after it is ignored.
//! - A chunk with an `error` member is read by the shared
//!   [in-stream error rule](super::rules#in-stream-errors)
//!   (`server error in stream: ...`, an HTTP status when its type or code
//!   names one). A chunk that is not JSON is a
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
//! (`error::decode_error`), where the configured timeouts are known.

mod accumulator;
mod response;
pub(super) mod shapes;
mod think;

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::error::DecodeError;
use super::rules::Progress;
use crate::{Api, Message, ProviderData, ToolCall, Usage};

pub(crate) use accumulator::Accumulator;
pub(crate) use response::parse_response;
#[cfg_attr(
    not(all(feature = "anthropic", feature = "responses")),
    allow(
        unused_imports,
        reason = "for the other APIs' decoders, which are features"
    )
)]
pub(crate) use think::ThinkSplitter;

/// A fragment reported while streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment<'a> {
    /// Assistant text.
    Content(&'a str),
    /// Reasoning text.
    Reasoning(&'a str),
    /// The usage figures a chunk reported (the latest replace the
    /// earlier): what a stream cut short still cost.
    Usage(crate::Usage),
}

/// One stream's decoder, whatever its API: the chat-completions
/// [`Accumulator`], and the Anthropic, Responses and Gemini `Decoder`s.
/// `stream.rs` drives every one through this trait, and the rules that
/// must mean the same on every wire format are written here once, in the
/// provided methods and in [`StreamState`]: an event that carried part of
/// the answer is [progress](super::rules#progress) (the client's idle
/// bound resets on it), the end event (`[DONE]`, `message_stop`,
/// `response.completed`, a finish reason) is progress once and ends the
/// stream, and data after it cannot change the answer.
pub(crate) trait StreamDecoder {
    /// The state every decoder keeps the same way.
    fn state(&self) -> &StreamState;

    /// Read one event's data (never called after the end event),
    /// reporting text, reasoning and usage to `on_fragment` as they arrive.
    fn event(
        &mut self,
        data: &str,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<(), DecodeError>;

    /// The complete message, or [`DecodeError::Truncated`] when the stream
    /// ended before the answer did.
    fn finish(self) -> Result<Completion, DecodeError>
    where
        Self: Sized;

    /// Feed one event's data in order; data after the end event is ignored
    /// (servers that keep talking, a trailing usage chunk or garbage,
    /// cannot change a complete answer).
    fn push_data(
        &mut self,
        data: &str,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<(), DecodeError> {
        if self.is_done() {
            return Ok(());
        }
        self.event(data, on_fragment)
    }

    /// How many events so far carried part of the answer (the
    /// [rule](super::rules#progress)): keep-alives, pings, empty deltas,
    /// lifecycle events and repeated usage do not count.
    fn progress(&self) -> u64 {
        self.state().progress.count()
    }

    /// Whether the end event arrived.
    fn is_done(&self) -> bool {
        self.state().done
    }
}

/// What every [`StreamDecoder`] keeps the same way: what counted as
/// progress, whether the end event came, and the secret (the API key)
/// redacted from the data its log lines quote.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    /// What counted as [progress](super::rules#progress).
    pub(crate) progress: Progress,
    done: bool,
    secret: Option<Box<str>>,
}

impl StreamState {
    /// The state of a new stream whose log lines redact `secret`.
    pub(crate) fn new(secret: Option<&str>) -> StreamState {
        StreamState {
            secret: secret.map(Box::from),
            ..StreamState::default()
        }
    }

    /// Whether the end event arrived.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// The end event arrived: the stream is done, which counts as progress
    /// once.
    pub(crate) fn end(&mut self) {
        if !self.done {
            self.done = true;
            self.progress.made();
        }
    }

    /// The secret redacted from quoted data.
    pub(crate) fn secret(&self) -> Option<&str> {
        self.secret.as_deref()
    }
}

/// A complete assistant message and its metadata.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Completion {
    /// The assistant message, with `reasoning`, `usage` and `model` set when
    /// known.
    pub(crate) message: Message,
    /// Why the answer ended, mapped from the API's own reason by its
    /// decoder (`rules::chat_finish` and its siblings).
    pub(crate) finish: crate::FinishReason,
    /// Token usage, when the server reported it.
    pub(crate) usage: Option<Usage>,
    /// The model the server named.
    pub(crate) model: Option<String>,
    /// The id the server gave this answer (chat completions' `id`,
    /// Anthropic's message `id`, the Responses `response.id`), bounded by
    /// [`rules::response_id`](super::rules::response_id).
    pub(crate) id: Option<String>,
}

impl Completion {
    /// The completion of `message`, once its calls pass the
    /// [identity rule](super::rules#identity): the one door every decoder,
    /// streamed or not, builds its answer through.
    pub(crate) fn new(
        mut message: Message,
        finish: crate::FinishReason,
        usage: Option<Usage>,
        model: Option<String>,
    ) -> Result<Completion, super::error::DecodeError> {
        super::rules::check_calls(&mut message.tool_calls)?;
        Ok(Completion {
            message,
            finish,
            usage,
            model,
            id: None,
        })
    }

    /// The completion with the id the server gave the answer.
    pub(crate) fn with_id(mut self, id: Option<String>) -> Completion {
        self.id = id;
        self
    }

    /// The completion with `secret` (the API key, when it is
    /// [long enough](super::rules::MIN_ANSWER_SECRET) to be one) replaced
    /// by `<redacted>` in its text, reasoning, call arguments, model name
    /// and answer id: a server or proxy that echoes the request puts no key
    /// into the history or an event. Provider data (signatures) is kept as
    /// it came.
    pub(crate) fn redacted(mut self, secret: Option<&str>) -> Completion {
        let Some(secret) = super::rules::answer_secret(secret) else {
            return self;
        };
        let clean = |text: &mut String| crate::util::redact_in(text, Some(secret));
        let m = &mut self.message;
        clean(&mut m.content);
        // The server's labels too: a proxy may echo into any of them.
        for text in [
            &mut m.reasoning,
            &mut m.model,
            &mut self.model,
            &mut self.id,
        ]
        .into_iter()
        .flatten()
        {
            clean(text);
        }
        for call in &mut m.tool_calls {
            clean(&mut call.arguments);
        }
        self
    }

    /// Why the answer ended, in the one vocabulary above the protocol.
    pub(crate) fn finish(&self) -> crate::FinishReason {
        self.finish
    }
}

/// The provider fields of a message gathered from a response or a stream
/// (see the [rules](self#rules)).
#[derive(Debug, Default)]
pub(super) struct Opaque {
    /// `reasoning_details` items, in the order they came.
    details: Vec<Value>,
    /// The message's own `extra_content`.
    extra: Option<Value>,
}

impl Opaque {
    /// Take the provider fields of one delta (or a whole message). Out of
    /// line and cold: most streams never carry any, and the delta loop
    /// stays as small as it was without them.
    #[cold]
    #[inline(never)]
    pub(super) fn add(&mut self, reasoning_details: Option<&Value>, extra_content: Option<&Value>) {
        match reasoning_details {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => self.details.extend(items.iter().cloned()),
            // A single object where a list belongs: kept as one item
            // rather than lost.
            Some(item) => self.details.push(item.clone()),
        }
        if self.extra.is_none()
            && let Some(extra) = extra_content.filter(|v| !v.is_null())
        {
            self.extra = Some(extra.clone());
        }
    }

    /// The message's [`ProviderData`]: `None` when neither the message nor
    /// any call carried provider fields.
    fn into_provider_data(self, calls: &[ToolCall]) -> Option<ProviderData> {
        let mut fields = Map::new();
        if !self.details.is_empty() {
            fields.insert("reasoning_details".into(), Value::Array(self.details));
        }
        if let Some(extra) = self.extra {
            fields.insert("extra_content".into(), extra);
        }
        // Calls' fields travel in the calls, but the rule that decides
        // whether they go back (api, endpoint, model) lives here: a
        // message with signed calls needs it even with nothing else.
        if fields.is_empty() && calls.iter().all(|c| c.provider_data.is_none()) {
            return None;
        }
        let items = if fields.is_empty() {
            Vec::new()
        } else {
            vec![Value::Object(fields)]
        };
        Some(ProviderData::new(Api::ChatCompletions, "", "", items))
    }
}

/// The provider fields of choice 0 of a chunk or response `text`, read
/// again for them (called only when the first reading saw one: most texts
/// have none). A text whose second reading fails has none.
#[cold]
#[inline(never)]
fn opaque_of(text: &str) -> Option<shapes::OpaqueDelta> {
    let mut body: Value = serde_json::from_str(text).ok()?;
    let choice = body
        .get_mut("choices")?
        .as_array_mut()?
        .iter_mut()
        // A missing (or null) index means 0, as in the first reading.
        .find(|c| match c.get("index") {
            None | Some(Value::Null) => true,
            Some(index) => index.as_u64() == Some(0),
        })?;
    // `delta` in a chunk, `message` in a response.
    let delta = match choice.get_mut("delta") {
        Some(delta) => delta.take(),
        None => choice.get_mut("message")?.take(),
    };
    delta.is_object().then_some(shapes::OpaqueDelta(delta))
}

/// A tool call's provider fields as kept in [`ToolCall::provider_data`].
#[cold]
#[inline(never)]
pub(super) fn call_data(extra_content: Option<&Value>) -> Option<Value> {
    let extra = extra_content.filter(|v| !v.is_null())?;
    let mut fields = Map::new();
    fields.insert("extra_content".into(), extra.clone());
    Some(Value::Object(fields))
}

#[allow(
    clippy::too_many_arguments,
    reason = "the parts of one message, private"
)]
pub(super) fn completion(
    content: String,
    reasoning: String,
    calls: Vec<ToolCall>,
    opaque: Opaque,
    finish_reason: Option<&str>,
    usage: Option<Usage>,
    model: Option<String>,
    id: Option<String>,
) -> Result<Completion, DecodeError> {
    let provider_data = opaque.into_provider_data(&calls);
    let finish = super::rules::chat_finish(finish_reason, !calls.is_empty());
    let mut message = Message::assistant_tool_calls(content, calls);
    message.provider_data = provider_data;
    message.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    message.usage = usage;
    message.model.clone_from(&model);
    Completion::new(message, finish, usage, model).map(|c| c.with_id(id))
}

/// At most 200 characters of `text`, for error messages.
pub(crate) fn excerpt(text: &str) -> Cow<'_, str> {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => Cow::Owned(format!("{}...", &text[..end])),
        None => Cow::Borrowed(text),
    }
}
