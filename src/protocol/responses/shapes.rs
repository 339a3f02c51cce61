//! The JSON shapes of Responses events and bodies: every member optional,
//! unknown members ignored, the text of a delta borrowed from the input
//! when it has no escapes (no allocation per delta for plain text). Output
//! items stay `Value`s: they are few per answer, and reasoning items are
//! kept verbatim.

use serde_json::Value;

use crate::Usage;
use crate::protocol::decode::shapes::Str;

/// One streamed event (`data` of an SSE event): the members of every event
/// type this decoder reads, by name.
pub(super) struct Event<'a> {
    /// `response.output_text.delta`, `response.completed`, `error`, ...
    pub(super) kind: Option<Str<'a>>,
    /// The text of a `*.delta` event.
    pub(super) delta: Option<Str<'a>>,
    /// The output item a delta belongs to.
    pub(super) item_id: Option<Str<'a>>,
    /// The position of that item in the output (llama.cpp omits it).
    pub(super) output_index: Option<u64>,
    /// Which part of a reasoning summary a delta belongs to.
    pub(super) summary_index: Option<u64>,
    /// The whole arguments of `response.function_call_arguments.done`.
    pub(super) arguments: Option<Str<'a>>,
    /// The item of `response.output_item.added` / `.done`.
    pub(super) item: Option<Value>,
    /// The response of `response.created`, `.completed`, `.incomplete`,
    /// `.failed`.
    pub(super) response: Option<Box<Response>>,
    /// The message of an `error` event.
    pub(super) message: Option<String>,
    /// The code of an `error` event.
    pub(super) code: Option<Value>,
    /// The error object of an `error` event that nests one.
    pub(super) error: Option<Box<Value>>,
}

crate::serde_macros::json_struct! {
    Deserialize for Event<'a> {
        kind [rename = "type"],
        delta,
        item_id,
        output_index,
        summary_index,
        arguments,
        item,
        response,
        message,
        code,
        error,
    }
}

/// A response object: the body of a non-streamed answer, or the
/// `response` of a lifecycle event.
pub(super) struct Response {
    pub(super) id: Option<String>,
    pub(super) model: Option<String>,
    pub(super) status: Option<String>,
    pub(super) output: Vec<Value>,
    pub(super) usage: Option<WireUsage>,
    pub(super) incomplete_details: Option<Incomplete>,
    pub(super) error: Option<Value>,
}

crate::serde_macros::json_struct! {
    Deserialize for Response {
        id,
        model,
        status,
        output [default],
        usage,
        incomplete_details,
        error,
    }
}

pub(super) struct Incomplete {
    pub(super) reason: Option<String>,
}

crate::serde_macros::json_struct! { Deserialize for Incomplete { reason } }

/// `usage`: figures read leniently (see [`figure`]), so that an absurd
/// figure cannot cost the event that carries the end of the answer.
#[allow(clippy::struct_field_names, reason = "the wire's names")]
pub(super) struct WireUsage {
    input_tokens: Option<Value>,
    output_tokens: Option<Value>,
    input_tokens_details: Option<Value>,
    output_tokens_details: Option<Value>,
}

crate::serde_macros::json_struct! {
    Deserialize for WireUsage {
        input_tokens,
        output_tokens,
        input_tokens_details,
        output_tokens_details,
    }
}

/// A figure that is a non-negative integer within `u64`; anything else
/// (negative, fractional, too large, a string) is dropped as unknown.
fn figure(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
}

impl WireUsage {
    /// Split `input_tokens` (which include the cached and cache-written
    /// ones) into pikuri's exclusive `input`, `cached` and `cache_creation`. A cached count above the input
    /// count (no server should send one) is capped at it, so the figures
    /// never add up to more than the server billed.
    pub(super) fn to_usage(&self) -> Usage {
        let input = figure(self.input_tokens.as_ref());
        let cached = figure(
            self.input_tokens_details
                .as_ref()
                .and_then(|d| d.get("cached_tokens")),
        )
        .map(|c| input.map_or(c, |i| c.min(i)));
        // Cache writes, where the server reports them (OpenRouter-style
        // `cache_write_tokens`, as chat completions' details carry them):
        // also part of `input_tokens`, capped like the cached count.
        let written = figure(
            self.input_tokens_details
                .as_ref()
                .and_then(|d| d.get("cache_write_tokens")),
        )
        .map(|w| input.map_or(w, |i| w.min(i - cached.unwrap_or(0))));
        let thinking = figure(
            self.output_tokens_details
                .as_ref()
                .and_then(|d| d.get("reasoning_tokens")),
        );
        Usage::from_parts(
            input.map(|i| i - cached.unwrap_or(0) - written.unwrap_or(0)),
            figure(self.output_tokens.as_ref()),
            cached,
            written,
            thinking,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Event;

    /// Whether `s` points into `input`: borrowed, not copied.
    fn borrowed(input: &str, s: Option<&str>) -> bool {
        s.is_some_and(|s| input.as_bytes().as_ptr_range().contains(&s.as_ptr()))
    }

    #[test]
    fn an_event_borrows_its_strings_from_the_input_unless_escaped() {
        let input = r#"{"type": "response.output_text.delta", "item_id": "msg_1",
            "delta": "abc", "arguments": "{\"x\": 1}"}"#;
        let event: Event<'_> = serde_json::from_str(input).unwrap();
        assert!(borrowed(input, event.kind.as_deref()));
        assert!(borrowed(input, event.item_id.as_deref()));
        assert!(borrowed(input, event.delta.as_deref()));
        // An escape must be undone: a copy, of the same text.
        assert_eq!(event.arguments.as_deref(), Some(r#"{"x": 1}"#));
        assert!(!borrowed(input, event.arguments.as_deref()));
    }
}
