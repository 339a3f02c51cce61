//! Chat-completion chunks and responses → one assistant [`Message`].
//!
//! [`Accumulator`] takes the `data` of each SSE event (from [`crate::sse`])
//! of a streamed chat completion, reports text as it arrives, and assembles
//! the final message; [`parse_response`] does the same for a non-streamed
//! response body. The JSON shapes are private serde structs that borrow
//! strings from the input where they have no escapes and ignore unknown
//! fields. This module is where provider quirks are absorbed.
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
//! - A chunk with an `error` member is an [`Error::Protocol`]
//!   (`server error in stream: ...`). A chunk that is not JSON is an
//!   [`Error::Protocol`] quoting at most 200 characters of it. A chunk that
//!   is JSON of another shape (no `choices`, a keep-alive object, a member
//!   of an unexpected type) is skipped with a `warn` log line.
//! - [`Accumulator::finish`] fails with [`Error::Truncated`] when neither
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

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, Visitor};

use crate::{Error, Message, Result, ToolCall, Usage};

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

/// Turns streamed chunks into one assistant message. See the
/// [module docs](self) for the rules.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    /// `Some` when `<think>` tags are split out of the content.
    think: Option<ThinkSplitter>,
    content: String,
    reasoning: String,
    /// In order of first appearance; sorted by index in `finish`.
    calls: Vec<PartialCall>,
    /// Index of the last tool-call delta, for deltas without one.
    last_index: Option<u64>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    done: bool,
}

/// A tool call being assembled.
#[derive(Debug)]
struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

impl Accumulator {
    /// An empty accumulator; `split_think` moves `<think>` blocks in the
    /// content to the reasoning.
    pub(crate) fn new(split_think: bool) -> Accumulator {
        Accumulator {
            think: split_think.then(ThinkSplitter::default),
            ..Accumulator::default()
        }
    }

    /// Feed one event's data (a JSON chunk or `[DONE]`), reporting each new
    /// piece of content or reasoning to `on_fragment`.
    pub(crate) fn push_data(
        &mut self,
        data: &str,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<()> {
        if self.done {
            return Ok(());
        }
        if data.trim_ascii() == "[DONE]" {
            self.done = true;
            self.release_held(on_fragment);
            return Ok(());
        }
        let chunk: Body<'_, StreamChoice<'_>> = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(e) if e.is_data() => {
                log::warn!(
                    "skipping stream chunk of unexpected shape ({e}): {}",
                    excerpt(data)
                );
                return Ok(());
            }
            Err(e) => {
                return Err(Error::Protocol(format!(
                    "malformed stream chunk ({e}): {}",
                    excerpt(data)
                )));
            }
        };
        if let Some(error) = &chunk.error {
            return Err(Error::Protocol(format!(
                "server error in stream: {}",
                error_message(error)
            )));
        }
        if self.model.is_none()
            && let Some(Str(model)) = &chunk.model
            && !model.is_empty()
        {
            self.model = Some(model.to_string());
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.to_usage());
        }
        // By reference: the choice structs are large, moving them costs.
        for choice in chunk.choices.iter().flatten() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = &choice.delta {
                self.apply_delta(delta, on_fragment);
            }
            if let Some(Str(reason)) = &choice.finish_reason
                && !reason.is_empty()
            {
                self.finish_reason = Some(reason.to_string());
                self.release_held(on_fragment);
            }
        }
        Ok(())
    }

    /// Whether `[DONE]` arrived.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// The complete message; `Err(Truncated)` when neither `[DONE]` nor a
    /// finish reason arrived.
    pub(crate) fn finish(mut self) -> Result<Completion> {
        if !self.done && self.finish_reason.is_none() {
            return Err(Error::Truncated);
        }
        self.release_held(&mut |_| {});
        self.calls.sort_by_key(|c| c.index);
        let calls = self
            .calls
            .into_iter()
            .filter(|c| !(c.id.is_empty() && c.name.is_empty() && c.arguments.is_empty()))
            .map(|c| {
                let id = if c.id.is_empty() {
                    format!("call_{}", c.index)
                } else {
                    c.id
                };
                ToolCall::new(id, c.name, c.arguments)
            })
            .collect();
        Ok(completion(
            self.content,
            self.reasoning,
            calls,
            self.finish_reason,
            self.usage,
            self.model,
        ))
    }

    fn apply_delta(&mut self, delta: &Delta<'_>, on_fragment: &mut dyn FnMut(Fragment<'_>)) {
        let Accumulator {
            think,
            content,
            reasoning,
            ..
        } = self;
        let mut emit = |f: Fragment<'_>| {
            match f {
                Fragment::Content(s) => content.push_str(s),
                Fragment::Reasoning(s) => reasoning.push_str(s),
            }
            on_fragment(f);
        };
        let reasoning_content = delta.reasoning_content.as_ref().map(|s| &*s.0);
        if let Some(r) = reasoning_content.filter(|r| !r.is_empty()) {
            emit(Fragment::Reasoning(r));
        }
        if let Some(MaybeStr(Some(r))) = &delta.reasoning
            && !r.is_empty()
            && reasoning_content != Some(&**r)
        {
            emit(Fragment::Reasoning(r));
        }
        if let Some(Str(text)) = &delta.content
            && !text.is_empty()
        {
            match think {
                Some(splitter) => splitter.push(text, &mut emit),
                None => emit(Fragment::Content(text)),
            }
        }
        for call in delta.tool_calls.iter().flatten() {
            self.apply_call(call);
        }
    }

    fn apply_call(&mut self, call: &CallDelta<'_>) {
        let id = call.id.as_ref().map(|s| &*s.0).filter(|id| !id.is_empty());
        let index = match (call.index, self.last_index) {
            (Some(index), _) => index,
            (None, None) => 0,
            (None, Some(last)) => {
                let last_id = self.calls.iter().find(|c| c.index == last).map(|c| &*c.id);
                match (id, last_id) {
                    (Some(id), Some(last_id)) if !last_id.is_empty() && last_id != id => {
                        self.calls.iter().map(|c| c.index).max().unwrap_or(0) + 1
                    }
                    _ => last,
                }
            }
        };
        self.last_index = Some(index);
        let at = if let Some(at) = self.calls.iter().position(|c| c.index == index) {
            at
        } else {
            self.calls.push(PartialCall {
                index,
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
            self.calls.len() - 1
        };
        let slot = &mut self.calls[at];
        if let Some(id) = id
            && slot.id.is_empty()
        {
            id.clone_into(&mut slot.id);
        }
        let Some(function) = &call.function else {
            return;
        };
        if let Some(Str(name)) = &function.name
            && !name.is_empty()
            && slot.name != *name
        {
            slot.name.push_str(name);
        }
        if let Some(Args(arguments)) = &function.arguments {
            slot.arguments.push_str(arguments);
        }
    }

    /// Release text held back by the think splitter (end of content).
    fn release_held(&mut self, on_fragment: &mut dyn FnMut(Fragment<'_>)) {
        let Accumulator {
            think: Some(think),
            content,
            reasoning,
            ..
        } = self
        else {
            return;
        };
        think.flush(&mut |f| {
            match f {
                Fragment::Content(s) => content.push_str(s),
                Fragment::Reasoning(s) => reasoning.push_str(s),
            }
            on_fragment(f);
        });
    }
}

/// Parse a non-streamed chat-completions response body.
pub(crate) fn parse_response(body: &[u8], split_think: bool) -> Result<Completion> {
    let body_text = || String::from_utf8_lossy(&body[..body.len().min(1024)]);
    let response: Body<'_, ResponseChoice<'_>> = serde_json::from_slice(body).map_err(|e| {
        Error::Protocol(format!(
            "malformed response ({e}): {}",
            excerpt(&body_text())
        ))
    })?;
    if let Some(error) = &response.error {
        return Err(Error::Protocol(format!(
            "server error in response: {}",
            error_message(error)
        )));
    }
    let Some(choice) = response
        .choices
        .into_iter()
        .flatten()
        .find(|c| c.index.unwrap_or(0) == 0)
    else {
        return Err(Error::Protocol(format!(
            "response has no choices: {}",
            excerpt(&body_text())
        )));
    };
    let Some(message) = choice.message else {
        return Err(Error::Protocol(format!(
            "response choice has no message: {}",
            excerpt(&body_text())
        )));
    };
    let mut content = String::new();
    let mut reasoning = String::new();
    let reasoning_content = message.reasoning_content.map(|s| s.0);
    if let Some(r) = &reasoning_content {
        reasoning.push_str(r);
    }
    if let Some(r) = message.reasoning.and_then(|r| r.0)
        && reasoning_content.as_deref() != Some(&*r)
    {
        reasoning.push_str(&r);
    }
    if let Some(Str(text)) = message.content {
        if split_think {
            let mut emit = |f: Fragment<'_>| match f {
                Fragment::Content(s) => content.push_str(s),
                Fragment::Reasoning(s) => reasoning.push_str(s),
            };
            let mut splitter = ThinkSplitter::default();
            splitter.push(&text, &mut emit);
            splitter.flush(&mut emit);
        } else {
            content = text.into_owned();
        }
    }
    let calls = message
        .tool_calls
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, call)| {
            let id = match call.id {
                Some(Str(id)) if !id.is_empty() => id.into_owned(),
                _ => format!("call_{i}"),
            };
            let (name, arguments) = match call.function {
                Some(f) => (
                    f.name.map(|s| s.0.into_owned()).unwrap_or_default(),
                    f.arguments.map(|a| a.0.into_owned()).unwrap_or_default(),
                ),
                None => (String::new(), String::new()),
            };
            ToolCall::new(id, name, arguments)
        })
        .collect();
    Ok(completion(
        content,
        reasoning,
        calls,
        choice.finish_reason.map(|s| s.0.into_owned()),
        response.usage.as_deref().map(WireUsage::to_usage),
        response
            .model
            .map(|s| s.0.into_owned())
            .filter(|m| !m.is_empty()),
    ))
}

fn completion(
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
fn excerpt(text: &str) -> Cow<'_, str> {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => Cow::Owned(format!("{}...", &text[..end])),
        None => Cow::Borrowed(text),
    }
}

/// The text of an `error` member: a string, or an object's `message`.
fn error_message(error: &serde_json::Value) -> String {
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

/// Splits `<think>...</think>` out of streamed content (see the
/// [module docs](self#think-tags)).
#[derive(Debug, Default)]
struct ThinkSplitter {
    /// Between `<think>` and `</think>`.
    inside: bool,
    /// A tail that may be the start of the next tag.
    held: String,
    /// Drop leading whitespace from the content (just after `</think>`).
    trim: bool,
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

impl ThinkSplitter {
    fn push(&mut self, text: &str, emit: &mut dyn FnMut(Fragment<'_>)) {
        if self.held.is_empty() {
            self.scan(text, emit);
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.push_str(text);
            self.scan(&joined, emit);
        }
    }

    fn scan(&mut self, mut text: &str, emit: &mut dyn FnMut(Fragment<'_>)) {
        loop {
            let tag = if self.inside { CLOSE } else { OPEN };
            if let Some(at) = text.find(tag) {
                self.out(&text[..at], emit);
                self.inside = !self.inside;
                self.trim |= !self.inside;
                text = &text[at + tag.len()..];
            } else {
                let keep = partial_tag_len(text, tag);
                let (out, held) = text.split_at(text.len() - keep);
                self.out(out, emit);
                self.held.push_str(held);
                return;
            }
        }
    }

    /// Emit what was held back as plain text: no tag followed.
    fn flush(&mut self, emit: &mut dyn FnMut(Fragment<'_>)) {
        let held = std::mem::take(&mut self.held);
        self.out(&held, emit);
    }

    fn out(&mut self, mut text: &str, emit: &mut dyn FnMut(Fragment<'_>)) {
        if self.inside {
            if !text.is_empty() {
                emit(Fragment::Reasoning(text));
            }
            return;
        }
        if self.trim {
            text = text.trim_start();
            if text.is_empty() {
                return;
            }
            self.trim = false;
        }
        if !text.is_empty() {
            emit(Fragment::Content(text));
        }
    }
}

/// Length of the longest proper prefix of `tag` that `text` ends with.
fn partial_tag_len(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&k| text.ends_with(&tag[..k]))
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------
// Wire shapes. Every member is optional; unknown members are ignored.

/// A chunk of a streamed completion (`C` = [`StreamChoice`]), or a whole
/// response (`C` = [`ResponseChoice`]).
#[derive(Deserialize)]
#[serde(bound(deserialize = "C: Deserialize<'de>"))]
struct Body<'a, C> {
    #[serde(borrow)]
    model: Option<Str<'a>>,
    choices: Option<Vec<C>>,
    /// Boxed: usually absent, and large enough to slow every chunk down.
    usage: Option<Box<WireUsage>>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct StreamChoice<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    delta: Option<Delta<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct ResponseChoice<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    message: Option<Delta<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Str<'a>>,
}

/// A streamed delta, or a whole response's message.
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<Str<'a>>,
    #[serde(borrow)]
    reasoning_content: Option<Str<'a>>,
    /// Lenient: some servers put an object here.
    #[serde(borrow)]
    reasoning: Option<MaybeStr<'a>>,
    #[serde(borrow)]
    tool_calls: Option<Vec<CallDelta<'a>>>,
}

#[derive(Deserialize)]
struct CallDelta<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    id: Option<Str<'a>>,
    #[serde(borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow)]
    name: Option<Str<'a>>,
    #[serde(borrow)]
    arguments: Option<Args<'a>>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
    /// Anthropic's name, at the top level.
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[allow(clippy::struct_field_names, reason = "the wire's names")]
struct PromptDetails {
    cached_tokens: Option<u64>,
    cache_creation_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    /// OpenRouter's name.
    cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    /// Split OpenAI's `prompt_tokens` (which include cache reads and writes)
    /// into pikuri's exclusive `input` / `cached` / `cache_creation`.
    fn to_usage(&self) -> Usage {
        let details = self.prompt_tokens_details.as_ref();
        let cached = details.and_then(|d| d.cached_tokens);
        let cache_creation = details
            .and_then(|d| {
                d.cache_creation_tokens
                    .or(d.cache_creation_input_tokens)
                    .or(d.cache_write_tokens)
            })
            .or(self.cache_creation_input_tokens);
        let input = self.prompt_tokens.map(|p| {
            p.saturating_sub(cached.unwrap_or(0))
                .saturating_sub(cache_creation.unwrap_or(0))
        });
        let thinking = self
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens);
        Usage::from_parts(
            input,
            self.completion_tokens,
            cached,
            cache_creation,
            thinking,
        )
    }
}

/// A JSON string, borrowed from the input when it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        deserializer.deserialize_str(StrVisitor).map(Str)
    }
}

/// A string, or `None` for any other JSON value.
struct MaybeStr<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for MaybeStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MaybeStrVisitor;
        impl<'de> Visitor<'de> for MaybeStrVisitor {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(None)
            }
        }
        deserializer.deserialize_any(MaybeStrVisitor).map(MaybeStr)
    }
}

/// Tool-call arguments: a JSON text in a string (the standard), or a JSON
/// value sent as is (some servers), serialized back to text.
struct Args<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Args<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ArgsVisitor;
        impl<'de> Visitor<'de> for ArgsVisitor {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON text or a JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Cow::Owned(serde_json::Value::from(v).to_string()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Cow::Owned(value.to_string()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Cow::Owned(value.to_string()))
            }
        }
        deserializer.deserialize_any(ArgsVisitor).map(Args)
    }
}

// ---------------------------------------------------------------------------
// Fuzzing hooks (see fuzz/); not part of the API.

/// Feeds `data` through the SSE parser whole and in pieces, and through
/// `read_sse`, and checks that all three agree. Panics only on a bug.
#[doc(hidden)]
pub fn __fuzz_sse(data: &[u8]) {
    use crate::sse::{Flow, SseParser, read_sse};

    fn run(input: &[u8], step: usize, max_line: usize) -> (Vec<String>, Option<String>) {
        let mut parser = SseParser::new(max_line);
        let mut events = Vec::new();
        let mut on = |d: &str| {
            events.push(d.to_owned());
            Ok(())
        };
        for piece in input.chunks(step) {
            if let Err(e) = parser.feed(piece, &mut on) {
                return (events, Some(e.to_string()));
            }
        }
        let err = parser.finish(&mut on).err().map(|e| e.to_string());
        (events, err)
    }

    let (max_line, step, input) = match data {
        [a, b, rest @ ..] => {
            let max_line = if *a == 255 { 1 << 20 } else { usize::from(*a) };
            (max_line, usize::from(*b).max(1), rest)
        }
        _ => (64, 1, data),
    };
    let whole = run(input, input.len().max(1), max_line);
    assert_eq!(
        run(input, step, max_line),
        whole,
        "split at every {step} bytes"
    );
    let mut events = Vec::new();
    let reader = std::io::BufReader::with_capacity(step, input);
    let result = read_sse(reader, max_line, &mut |d| {
        events.push(d.to_owned());
        Ok(Flow::Continue)
    });
    assert_eq!(
        (events, result.err().map(|e| e.to_string())),
        whole,
        "read_sse"
    );
}

/// Feeds each line of `data` (after a first byte choosing `split_think`) to
/// an `Accumulator`, then the whole of it to `parse_response`. Errors are
/// expected; a panic (or a failing `finish` after `[DONE]`) is a bug.
#[doc(hidden)]
pub fn __fuzz_accumulate(data: &[u8]) {
    let Some((&first, data)) = data.split_first() else {
        return;
    };
    let split_think = first & 1 == 1;
    let mut acc = Accumulator::new(split_think);
    for line in data.split(|&b| b == b'\n') {
        if let Ok(line) = std::str::from_utf8(line) {
            let _ = acc.push_data(line, &mut |_| {});
        }
    }
    let done = acc.is_done();
    let result = acc.finish();
    assert!(!done || result.is_ok(), "finish after [DONE] failed");
    let _ = parse_response(data, split_think);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Run `chunks` through an accumulator: the fragments seen and the result.
    fn run(split_think: bool, chunks: &[String]) -> (Vec<(bool, String)>, Result<Completion>) {
        let mut acc = Accumulator::new(split_think);
        let mut frags = Vec::new();
        for chunk in chunks {
            let pushed = acc.push_data(chunk, &mut |f| match f {
                Fragment::Content(s) => frags.push((false, s.to_owned())),
                Fragment::Reasoning(s) => frags.push((true, s.to_owned())),
            });
            if let Err(e) = pushed {
                return (frags, Err(e));
            }
        }
        (frags, acc.finish())
    }

    fn ok(split_think: bool, chunks: &[String]) -> (Vec<(bool, String)>, Completion) {
        let (frags, result) = run(split_think, chunks);
        (frags, result.unwrap())
    }

    fn delta(delta: &serde_json::Value) -> String {
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        .to_string()
    }

    fn text(t: &str) -> String {
        delta(&json!({"content": t}))
    }

    fn finish(reason: &str) -> String {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
    }

    fn done() -> String {
        "[DONE]".to_owned()
    }

    fn concat(frags: &[(bool, String)], reasoning: bool) -> String {
        frags
            .iter()
            .filter(|f| f.0 == reasoning)
            .map(|f| &*f.1)
            .collect()
    }

    #[test]
    fn content_stream() {
        let (frags, c) = ok(
            false,
            &[
                delta(&json!({"role": "assistant", "content": ""})),
                text("Hel"),
                text("lo \"w\u{f6}rld\"\n"),
                finish("stop"),
                done(),
            ],
        );
        assert_eq!(
            frags,
            [(false, "Hel".into()), (false, "lo \"wörld\"\n".into())]
        );
        assert_eq!(c.message, {
            let mut m = Message::assistant("Hello \"wörld\"\n");
            m.model = Some("m".into());
            m
        });
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!(c.model.as_deref(), Some("m"));
        assert_eq!(c.usage, None);
    }

    #[test]
    fn interleaved_tool_calls() {
        let call = |index: u64, f: serde_json::Value| {
            delta(&json!({"tool_calls": [{"index": index, "function": f}]}))
        };
        let chunks = [
            delta(
                &json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                         "function": {"name": "search", "arguments": ""}}]}),
            ),
            delta(
                &json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                         "function": {"name": "read", "arguments": "{\"pa"}}]}),
            ),
            call(0, json!({"arguments": "{\"q\":"})),
            call(1, json!({"arguments": "th\":"})),
            call(0, json!({"arguments": "\"rust\"}"})),
            call(1, json!({"arguments": "\"a.txt\"}"})),
            finish("tool_calls"),
            done(),
        ];
        let (frags, c) = ok(false, &chunks);
        assert!(frags.is_empty());
        assert_eq!(
            c.message.tool_calls,
            [
                ToolCall::new("call_a", "search", "{\"q\":\"rust\"}"),
                ToolCall::new("call_b", "read", "{\"path\":\"a.txt\"}"),
            ]
        );
        assert_eq!(c.message.content, "");
        assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn tool_calls_ordered_by_index_with_late_and_repeated_ids() {
        let chunks = [
            // Index 1 first, id and name arriving late and repeated.
            delta(&json!({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]})),
            delta(
                &json!({"tool_calls": [{"index": 0, "function": {"name": "a", "arguments": "["}}]}),
            ),
            delta(&json!({"tool_calls": [{"index": 1, "id": "x", "function": {"name": "b"}}]})),
            delta(
                &json!({"tool_calls": [{"index": 1, "id": "x", "function": {"name": "b", "arguments": null}}]}),
            ),
            delta(
                &json!({"tool_calls": [{"index": 0, "id": null, "function": {"arguments": "]"}}]}),
            ),
            finish("tool_calls"),
        ];
        let (_, c) = ok(false, &chunks);
        assert_eq!(
            c.message.tool_calls,
            [
                ToolCall::new("call_0", "a", "[]"),
                ToolCall::new("x", "b", "{}")
            ]
        );
    }

    #[test]
    fn tool_calls_without_index() {
        let chunks = [
            delta(
                &json!({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{\"x\""}}]}),
            ),
            delta(&json!({"tool_calls": [{"function": {"arguments": ":1}"}}]})),
            // A new id without an index starts a new call.
            delta(
                &json!({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
            ),
            // Name sent in pieces.
            delta(&json!({"tool_calls": [{"index": 5, "function": {"name": "get_"}}]})),
            delta(&json!({"tool_calls": [{"index": 5, "function": {"name": "weather"}}]})),
            done(),
        ];
        let (_, c) = ok(false, &chunks);
        assert_eq!(
            c.message.tool_calls,
            [
                ToolCall::new("a", "f", "{\"x\":1}"),
                ToolCall::new("b", "g", "{}"),
                ToolCall::new("call_5", "get_weather", ""),
            ]
        );
    }

    #[test]
    fn reasoning_in_both_field_names() {
        let chunks = [
            delta(&json!({"reasoning_content": "Let me ", "content": null})),
            delta(&json!({"reasoning": "think. "})),
            // Some servers send both with the same text: taken once.
            delta(&json!({"reasoning": "Done.", "reasoning_content": "Done."})),
            // `reasoning` of another shape is ignored.
            delta(&json!({"reasoning": {"effort": "high"}, "content": "42"})),
            finish("stop"),
        ];
        let (frags, c) = ok(false, &chunks);
        assert_eq!(
            frags,
            [
                (true, "Let me ".into()),
                (true, "think. ".into()),
                (true, "Done.".into()),
                (false, "42".into())
            ]
        );
        assert_eq!(c.message.reasoning.as_deref(), Some("Let me think. Done."));
        assert_eq!(c.message.content, "42");
    }

    #[test]
    fn usage_only_final_chunk() {
        let usage = json!({"id": "c1", "model": "gpt-x", "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                      "prompt_tokens_details": {"cached_tokens": 60, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 7}}});
        let (_, c) = ok(
            false,
            &[text("hi"), finish("stop"), usage.to_string(), done()],
        );
        let expected = Usage::from_parts(Some(40), Some(20), Some(60), None, Some(7));
        assert_eq!(c.usage, Some(expected));
        assert_eq!(c.message.usage, Some(expected));
        assert_eq!(expected.context_used(), 100);
        // The first model named wins.
        assert_eq!(c.model.as_deref(), Some("m"));
    }

    #[test]
    fn usage_variants() {
        let parse = |u: serde_json::Value| {
            let chunk = json!({"choices": [], "usage": u}).to_string();
            ok(false, &[chunk, done()]).1.usage.unwrap()
        };
        // Cache reads larger than the prompt (a server bug) saturate.
        assert_eq!(
            parse(json!({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}})),
            Usage::from_parts(Some(0), None, Some(9), None, None)
        );
        for details in [
            json!({"cached_tokens": 10, "cache_creation_tokens": 30}),
            json!({"cached_tokens": 10, "cache_creation_input_tokens": 30}),
            json!({"cached_tokens": 10, "cache_write_tokens": 30}),
        ] {
            let u = parse(json!({"prompt_tokens": 100, "completion_tokens": 1,
                                 "prompt_tokens_details": details}));
            assert_eq!(
                u,
                Usage::from_parts(Some(60), Some(1), Some(10), Some(30), None)
            );
            assert_eq!(u.context_used(), 100);
        }
        assert_eq!(parse(json!({})), Usage::default());
        // null usage in ordinary chunks is not usage.
        let chunk = json!({"choices": [], "usage": null}).to_string();
        assert_eq!(ok(false, &[chunk, done()]).1.usage, None);
    }

    #[test]
    fn unknown_fields_and_shapes_are_ignored() {
        let chunks = [
            json!({"object": "chat.completion.chunk", "system_fingerprint": "fp",
                   "choices": [{"index": 0, "logprobs": null,
                                "delta": {"content": "a", "refusal": null, "extra": [1, {"x": 2}]}}],
                   "x_groq": {"id": "q"}})
            .to_string(),
            // Another choice (n > 1) is not mixed in.
            json!({"choices": [{"index": 1, "delta": {"content": "OTHER"}}]}).to_string(),
            json!({}).to_string(),
            json!({"choices": null}).to_string(),
            json!({"choices": []}).to_string(),
            "\"keep-alive\"".to_owned(),
            "42".to_owned(),
            json!([1, 2]).to_string(),
            json!({"choices": [{"delta": {"content": 5}}]}).to_string(),
            json!({"choices": [{"delta": {"content": "b"}, "finish_reason": "eos_custom"}],
                   "timings": {"predicted_per_second": 50.1}})
            .to_string(),
            json!({"error": null, "choices": [{"delta": {}}]}).to_string(),
        ];
        let (frags, c) = ok(false, &chunks);
        assert_eq!(concat(&frags, false), "ab");
        assert_eq!(c.message.content, "ab");
        assert_eq!(c.finish_reason.as_deref(), Some("eos_custom"));
    }

    #[test]
    fn truncated_stream() {
        let (frags, result) = run(false, &[text("Hel"), text("lo")]);
        assert_eq!(frags.len(), 2);
        assert!(matches!(result, Err(Error::Truncated)));
        assert!(matches!(run(false, &[]).1, Err(Error::Truncated)));
        // An empty finish_reason (some servers send it mid-stream) is none.
        assert!(matches!(
            run(false, &[text("a"), finish("")]).1,
            Err(Error::Truncated)
        ));
    }

    #[test]
    fn finish_reason_without_done_and_done_without_finish_reason() {
        let (_, c) = ok(false, &[text("x"), finish("length")]);
        assert_eq!(
            (c.message.content.as_str(), c.finish_reason.as_deref()),
            ("x", Some("length"))
        );
        let (_, c) = ok(false, &[text("x"), done()]);
        assert_eq!((c.message.content.as_str(), c.finish_reason), ("x", None));
    }

    #[test]
    fn data_after_done_is_ignored() {
        let mut acc = Accumulator::new(false);
        acc.push_data(&text("a"), &mut |_| {}).unwrap();
        assert!(!acc.is_done());
        acc.push_data(" [DONE] ", &mut |_| {}).unwrap();
        assert!(acc.is_done());
        acc.push_data(&text("b"), &mut |_| panic!("after done"))
            .unwrap();
        acc.push_data("{not json", &mut |_| {}).unwrap();
        assert_eq!(acc.finish().unwrap().message.content, "a");
    }

    #[test]
    fn error_chunk() {
        let err = run(
            false,
            &[
                text("a"),
                json!({"error": {"message": "overloaded", "code": 529}}).to_string(),
            ],
        )
        .1
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "protocol error: server error in stream: overloaded"
        );
        let err = run(false, &[json!({"error": "boom"}).to_string()])
            .1
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "protocol error: server error in stream: boom"
        );
        let err = run(false, &[json!({"error": {"code": 1}}).to_string()])
            .1
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "protocol error: server error in stream: {\"code\":1}"
        );
    }

    #[test]
    fn malformed_chunk() {
        let err = run(false, &["{\"choices\": [".to_owned()]).1.unwrap_err();
        let Error::Protocol(msg) = &err else {
            panic!("{err:?}")
        };
        assert!(
            msg.starts_with("malformed stream chunk (EOF while parsing"),
            "{msg}"
        );
        assert!(msg.ends_with("): {\"choices\": ["), "{msg}");

        let long = format!("{{\"content\": \"{}", "é".repeat(500));
        let Error::Protocol(msg) = run(false, &[long]).1.unwrap_err() else {
            panic!()
        };
        let quoted = msg.split_once("): ").unwrap().1;
        assert_eq!(quoted.chars().count(), 203, "{quoted}");
        assert!(quoted.ends_with("é..."));
    }

    /// `<think>` splitting: content chunked at every char boundary (once and
    /// twice) gives the same fragments, and no partial tag leaks.
    #[test]
    fn think_tags_split_at_every_offset() {
        let sample = "<think>\nLet me think: a<b, </thi</think>\n\n The answer: <b>42</b> \u{e9}<";
        let reasoning = "\nLet me think: a<b, </thi";
        let content = "The answer: <b>42</b> \u{e9}<";
        let check = |pieces: &[&str]| {
            let mut chunks: Vec<String> = pieces.iter().map(|p| text(p)).collect();
            chunks.push(finish("stop"));
            let (frags, c) = ok(true, &chunks);
            assert_eq!(concat(&frags, false), content, "{pieces:?}");
            assert_eq!(concat(&frags, true), reasoning, "{pieces:?}");
            assert_eq!(c.message.content, content);
            assert_eq!(c.message.reasoning.as_deref(), Some(reasoning));
            for (_, f) in &frags {
                assert!(!f.is_empty());
                assert!(!f.contains("think>"), "{f:?}");
            }
            let first_content = frags.iter().find(|f| !f.0).unwrap();
            assert!(
                !first_content.1.starts_with(char::is_whitespace),
                "{frags:?}"
            );
        };
        let bounds: Vec<usize> = (0..=sample.len())
            .filter(|&i| sample.is_char_boundary(i))
            .collect();
        for &a in &bounds {
            check(&[&sample[..a], &sample[a..]]);
            for &b in bounds.iter().filter(|&&b| b >= a) {
                check(&[&sample[..a], &sample[a..b], &sample[b..]]);
            }
        }
        let chars: Vec<String> = sample.chars().map(String::from).collect();
        check(&chars.iter().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn think_tags_edge_cases() {
        let split = |pieces: &[&str]| {
            let mut chunks: Vec<String> = pieces.iter().map(|p| text(p)).collect();
            chunks.push(done());
            let (frags, c) = ok(true, &chunks);
            assert_eq!(concat(&frags, false), c.message.content);
            (c.message.content, c.message.reasoning.unwrap_or_default())
        };
        assert_eq!(split(&["plain"]), ("plain".into(), String::new()));
        assert_eq!(
            split(&["<think></think>", "\n\n", "  ", "x"]),
            ("x".into(), String::new())
        );
        // Unterminated think: everything is reasoning.
        assert_eq!(
            split(&["<think>abc", "</th"]),
            (String::new(), "abc</th".into())
        );
        // Text before the block stays content; whitespace inside stays.
        assert_eq!(
            split(&["Hi <thi", "nk> r </think> there"]),
            ("Hi there".into(), " r ".into())
        );
        // Held text that never became a tag is released at [DONE].
        assert_eq!(split(&["a <", "b <th"]), ("a <b <th".into(), String::new()));
        // Reasoning from the field and from tags both land in reasoning.
        let chunks = [
            delta(&json!({"reasoning_content": "R1 "})),
            text("<think>R2</think>C"),
            finish("stop"),
        ];
        let (_, c) = ok(true, &chunks);
        assert_eq!(
            (c.message.content.as_str(), c.message.reasoning.as_deref()),
            ("C", Some("R1 R2"))
        );
        // Without split_think tags are content.
        let (_, c) = ok(false, &[text("<think>r</think>c"), done()]);
        assert_eq!(c.message.content, "<think>r</think>c");
        assert_eq!(c.message.reasoning, None);
    }

    #[test]
    fn parse_response_text() {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "qwen3",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Hi \"there\"", "reasoning_content": "hmm"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3},
            "timings": {"prompt_n": 10}
        });
        let c = parse_response(body.to_string().as_bytes(), false).unwrap();
        let mut m = Message::assistant("Hi \"there\"");
        m.reasoning = Some("hmm".into());
        m.usage = Some(Usage::from_parts(Some(10), Some(3), None, None, None));
        m.model = Some("qwen3".into());
        assert_eq!(c.message, m);
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!(c.usage, m.usage);
        assert_eq!(c.model.as_deref(), Some("qwen3"));
    }

    #[test]
    fn parse_response_tool_calls_null_content_object_arguments() {
        let body = json!({
            "choices": [{"finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null, "reasoning": "use tools",
                "tool_calls": [
                    {"id": "call_9", "type": "function",
                     "function": {"name": "add", "arguments": "{\"a\":1}"}},
                    {"type": "function", "function": {"name": "mul", "arguments": {"a": 2, "b": [3]}}},
                    {"id": "", "function": {"name": "noargs"}}
                ]}}]
        });
        let c = parse_response(body.to_string().as_bytes(), false).unwrap();
        assert_eq!(c.message.content, "");
        assert_eq!(c.message.reasoning.as_deref(), Some("use tools"));
        assert_eq!(
            c.message.tool_calls,
            [
                ToolCall::new("call_9", "add", "{\"a\":1}"),
                ToolCall::new("call_1", "mul", "{\"a\":2,\"b\":[3]}"),
                ToolCall::new("call_2", "noargs", ""),
            ]
        );
        assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!((c.usage, c.model), (None, None));
    }

    #[test]
    fn parse_response_split_think() {
        let body = json!({"choices": [{"message": {"content": "<think>r</think>\n\nanswer"}}]});
        let c = parse_response(body.to_string().as_bytes(), true).unwrap();
        assert_eq!(c.message.content, "answer");
        assert_eq!(c.message.reasoning.as_deref(), Some("r"));
        let c = parse_response(body.to_string().as_bytes(), false).unwrap();
        assert_eq!(c.message.content, "<think>r</think>\n\nanswer");
    }

    #[test]
    fn parse_response_errors() {
        let msg = |body: &[u8]| match parse_response(body, false) {
            Err(Error::Protocol(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(msg(b"{\"choices\":").starts_with("malformed response (EOF"));
        assert!(msg(b"<html>502 Bad Gateway</html>").ends_with("): <html>502 Bad Gateway</html>"));
        assert_eq!(msg(b"{}"), "response has no choices: {}");
        assert_eq!(
            msg(b"{\"choices\":[]}"),
            "response has no choices: {\"choices\":[]}"
        );
        assert!(
            msg(b"{\"choices\":[{\"index\":0}]}").starts_with("response choice has no message")
        );
        assert_eq!(
            msg(br#"{"error":{"message":"bad key","type":"auth"}}"#),
            "server error in response: bad key"
        );
        let long = vec![b'x'; 10_000];
        assert!(msg(&long).len() < 300);
        assert!(msg(b"\xff\xfe").contains("\u{fffd}"));
    }

    use crate::test_util::Rng;

    #[test]
    fn property_random_chunk_sequences() {
        const WORDS: &[&str] = &[
            "<think>", "</think>", "<", "</", "<th", "ink>", "\n", " ", "a", "é", "\"", "{",
        ];
        let mut rng = Rng(0x1234_5678_9ABC_DEF1);
        let word = |rng: &mut Rng| -> String {
            (0..rng.below(4))
                .map(|_| WORDS[rng.below(WORDS.len())])
                .collect()
        };
        for round in 0..2000 {
            let mut chunks = Vec::new();
            for _ in 0..rng.below(12) {
                let w = word(&mut rng);
                let index = rng.below(3);
                chunks.push(match rng.below(12) {
                    0..=3 => text(&w),
                    4 => delta(&json!({"reasoning_content": w})),
                    5 => delta(&json!({"reasoning": w})),
                    6 => delta(
                        &json!({"tool_calls": [{"index": index, "id": format!("id{index}"),
                                                     "function": {"name": "f", "arguments": w}}]}),
                    ),
                    7 => delta(&json!({"tool_calls": [{"function": {"arguments": w}}]})),
                    8 => json!({"choices": [], "usage": {"prompt_tokens": index}}).to_string(),
                    9 => finish("stop"),
                    10 => {
                        // Random bytes, or a valid chunk cut short.
                        let c = text(&w);
                        let cut = rng.below(c.len() + 1);
                        if rng.below(2) == 0 {
                            c[..cut].to_owned()
                        } else {
                            (0..rng.below(20))
                                .map(|_| char::from(rng.below(128) as u8))
                                .collect()
                        }
                    }
                    _ => done(),
                });
            }
            let split_think = round % 2 == 0;
            let ends_done = chunks.last().is_some_and(|c| c == "[DONE]");
            let (frags, result) = run(split_think, &chunks);
            match result {
                Ok(c) => {
                    if ends_done {
                        assert_eq!(concat(&frags, false), c.message.content, "{chunks:?}");
                        assert_eq!(
                            concat(&frags, true),
                            c.message.reasoning.unwrap_or_default()
                        );
                    }
                    let mut ids: Vec<_> =
                        c.message.tool_calls.iter().map(|t| t.id.clone()).collect();
                    ids.dedup();
                    assert_eq!(ids.len(), c.message.tool_calls.len());
                }
                Err(Error::Protocol(m)) => assert!(m.len() < 400, "{m}"),
                Err(Error::Truncated) => {}
                Err(e) => panic!("unexpected error {e:?}"),
            }
            let body: String = chunks.concat();
            let _ = parse_response(body.as_bytes(), split_think);
            __fuzz_accumulate(body.as_bytes());
        }
    }

    #[test]
    fn fuzz_hooks_smoke() {
        let mut rng = Rng(7);
        for _ in 0..500 {
            let len = rng.below(300);
            let data: Vec<u8> = (0..len)
                .map(|_| match rng.below(6) {
                    0 => b'\n',
                    1 => b'\r',
                    2 => b':',
                    3 => b'd',
                    _ => rng.next() as u8,
                })
                .collect();
            __fuzz_sse(&data);
            __fuzz_accumulate(&data);
        }
        __fuzz_sse(b"");
        __fuzz_sse(b"\x10\x03data: a\r\n\r\ndata: b");
        __fuzz_accumulate(b"");
    }

    /// `n` text-delta events as a typical server sends them, then `[DONE]`.
    fn bench_input(n: usize) -> Vec<u8> {
        let mut input = Vec::new();
        for i in 0..n {
            let chunk = json!({"id": "chatcmpl-8f3a2b", "object": "chat.completion.chunk",
                "created": 1_700_000_000, "model": "qwen3-30b",
                "choices": [{"index": 0, "delta": {"content": format!(" tok{}", i % 100)},
                             "finish_reason": null}]});
            input.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
        }
        input.extend_from_slice(b"data: [DONE]\n\n");
        input
    }

    /// The baseline of [`throughput`]: owned, minimal typed structs.
    #[derive(Deserialize)]
    struct BChunk {
        #[allow(dead_code, reason = "parsed like a real client would")]
        model: Option<String>,
        choices: Vec<BChoice>,
    }
    #[derive(Deserialize)]
    struct BChoice {
        delta: BDelta,
        finish_reason: Option<String>,
    }
    #[derive(Deserialize)]
    struct BDelta {
        content: Option<String>,
    }

    /// Chunks/s through `read_sse` + `Accumulator`, against a baseline that
    /// splits lines and parses each `data:` line into owned typed structs.
    /// Run with `cargo test --release --lib -- --ignored --nocapture throughput`.
    #[test]
    #[ignore = "timing; run in release mode"]
    fn throughput() {
        use crate::sse::{Flow, read_sse};
        use std::time::Instant;

        const N: usize = 200_000;
        let input = bench_input(N);
        println!("average event size {} bytes", input.len() / N);

        let mut best = (f64::MAX, f64::MAX);
        for _ in 0..5 {
            let start = Instant::now();
            let mut acc = Accumulator::new(false);
            let mut n = 0usize;
            read_sse(std::io::BufReader::new(&input[..]), 1 << 20, &mut |d| {
                acc.push_data(d, &mut |_| n += 1)?;
                Ok(if acc.is_done() {
                    Flow::Stop
                } else {
                    Flow::Continue
                })
            })
            .unwrap();
            let c = acc.finish().unwrap();
            let ours = start.elapsed().as_secs_f64();
            assert_eq!(n, N);
            assert!(c.message.content.len() > N);

            let start = Instant::now();
            let mut content = String::new();
            for line in std::io::BufRead::lines(std::io::BufReader::new(&input[..])) {
                let line = line.unwrap();
                let Some(data) = line.strip_prefix("data: ") else {
                    continue;
                };
                if data == "[DONE]" {
                    break;
                }
                let chunk: BChunk = serde_json::from_str(data).unwrap();
                for choice in chunk.choices {
                    if let Some(t) = choice.delta.content {
                        content.push_str(&t);
                    }
                    let _ = choice.finish_reason;
                }
            }
            let base = start.elapsed().as_secs_f64();
            assert_eq!(content, c.message.content);
            best = (best.0.min(ours), best.1.min(base));
        }
        // Breakdown: the SSE parser alone, the accumulator alone.
        let datas: Vec<&str> = input
            .split(|&b| b == b'\n')
            .filter_map(|l| l.strip_prefix(b"data: "))
            .map(|d| std::str::from_utf8(d).unwrap())
            .collect();
        let (mut sse_only, mut acc_only) = (f64::MAX, f64::MAX);
        for _ in 0..5 {
            let start = Instant::now();
            let mut n = 0usize;
            read_sse(std::io::BufReader::new(&input[..]), 1 << 20, &mut |d| {
                n += d.len();
                Ok(Flow::Continue)
            })
            .unwrap();
            sse_only = sse_only.min(start.elapsed().as_secs_f64());
            assert!(n > 0);
            let start = Instant::now();
            let mut acc = Accumulator::new(false);
            for d in &datas {
                acc.push_data(d, &mut |_| {}).unwrap();
            }
            acc.finish().unwrap();
            acc_only = acc_only.min(start.elapsed().as_secs_f64());
        }
        println!(
            "sse alone: {:.0} events/s; accumulator alone: {:.0} chunks/s",
            N as f64 / sse_only,
            N as f64 / acc_only
        );
        let (ours, base) = (N as f64 / best.0, N as f64 / best.1);
        println!(
            "parser+accumulator: {ours:.0} chunks/s; baseline: {base:.0} chunks/s; ratio {:.2}",
            ours / base
        );
    }
}
