//! The rules every decoder applies, written once: the chat-completions
//! accumulator (`decode/`), Anthropic Messages (`anthropic/`), OpenAI
//! Responses (`responses/`) and Gemini (`gemini/`) each read their own
//! JSON, and call these for what must mean the same on every wire format.
//! The shared rule table in `rules_tests.rs` runs the same cases through
//! all four.
//!
//! # Progress
//!
//! A stream's idle bound ([`HttpConfig::with_idle_timeout`](crate::HttpConfig::with_idle_timeout))
//! is reset only by an event that carries part of the answer: new text or
//! reasoning, a piece of a tool call (its id, name or arguments), a piece
//! of the API's own tool search (its start, input, result), a stop
//! reason or the end event, or usage figures that differ from the last
//! ones. Pings, comments, empty deltas, unknown event or delta kinds,
//! lifecycle events and repeated usage do not count ([`Progress`]), so a
//! server that sends only those ends at the idle bound on every API.
//!
//! # Identity
//!
//! Every tool call of one answer has a non-empty name and an id no other
//! call of the answer has, of at most [`MAX_CALL_ID`] bytes
//! ([`check_calls`]); an answer that breaks this is
//! refused as a protocol error (nothing reaches the history). The other
//! possible rule, making ids unique by renaming, was not chosen: a nameless
//! call cannot be repaired at all, so one rule for both means refusing;
//! a renamed id is one the server never issued, which a provider that
//! checks its own ids (Anthropic's `tool_use` ids) may reject later, far
//! from the cause; and two calls under one id are a server bug the host
//! should see, not a guess made silently. Ids the decoders make up for
//! calls that came without one (`call_<n>`) fall under the same check.
//!
//! # In-stream errors
//!
//! A server that fails after its `200` status reports it in the stream (an
//! Anthropic `error` event, a Responses `error` or `response.failed`
//! event, a chat-completions or Gemini `{"error": {...}}` chunk) or, rarely, in a
//! `200` body. [`server_error`] reads such an error object the same way
//! on every API: when its `type`, `code` or `status` names a failure the
//! API also answers with an HTTP status (overloaded 529, rate limit 429,
//! server error 500, timeout 504, Google's `RESOURCE_EXHAUSTED` 429 and
//! `UNAVAILABLE` 503, or a number from 400 to 599), it becomes
//! that status ([`DecodeError::Status`] → [`Error::Http`](crate::Error::Http)),
//! so retry classification and fallback treat it as they would have before
//! the stream; any other is a protocol error.
//!
//! # Bounds
//!
//! Every string a server supplies that is copied into an error, an event
//! or the history other than the answer itself is bounded: error messages
//! to [`MAX_MESSAGE`] characters, error codes and types to [`MAX_LABEL`],
//! model names, response ids and tool call names to [`MAX_LABEL`]
//! ([`bounded`]; a cut name ends in `…`, so it names no tool, as the
//! whole one did not). A call's id is not cut (the server would not know
//! it again): one over [`MAX_CALL_ID`] bytes refuses the answer.
//!
//! # Finish reasons
//!
//! Each decoder maps its own native reason straight to a
//! [`FinishReason`] here ([`chat_finish`], [`anthropic_finish`],
//! [`responses_finish`], [`gemini_finish`]); an unknown reason is
//! [`ServerCut`](FinishReason::ServerCut).

use std::borrow::Cow;

use serde_json::Value;

use super::error::DecodeError;
use crate::{FinishReason, ToolCall, Usage};

/// The longest server error message kept, in characters.
pub(crate) const MAX_MESSAGE: usize = 500;
/// The longest error code, error type or model name kept, in characters.
pub(crate) const MAX_LABEL: usize = 100;

/// `text` cut to at most `max` characters (with `…` when cut).
pub(crate) fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    crate::util::excerpt(text, max)
}

/// The shortest API key redacted from an answer (its text, reasoning,
/// call arguments and deltas), in bytes. A shorter one is a placeholder a
/// local server takes (`EMPTY`, `ollama`, `none`, `lm-studio`), no
/// secret, and the model's words that spell it would be cut from its
/// answer. Errors and log lines redact any key.
pub(crate) const MIN_ANSWER_SECRET: usize = 12;

/// The key to redact from an answer: `secret` trimmed, when it is at
/// least [`MIN_ANSWER_SECRET`] bytes.
pub(crate) fn answer_secret(secret: Option<&str>) -> Option<&str> {
    secret
        .map(str::trim)
        .filter(|s| s.len() >= MIN_ANSWER_SECRET)
}

/// What a body that is not the API's answer held, for its protocol error:
/// an HTML page summarized by its title (never quoted as markup), anything
/// else its first KiB, bounded. The same on every API.
pub(crate) fn quoted_body(body: &[u8]) -> String {
    super::body::html_summary(body).unwrap_or_else(|| {
        let head = String::from_utf8_lossy(&body[..body.len().min(1024)]);
        bounded(&head, 200).into_owned()
    })
}

/// A model name as kept in the completion, its events and the history:
/// non-empty, at most [`MAX_LABEL`] characters.
pub(crate) fn model_name(name: &str) -> Option<String> {
    (!name.is_empty()).then(|| bounded(name, MAX_LABEL).into_owned())
}

/// The id a server gave an answer, as kept in the completion and its
/// `Tokens` event: the same rule as [`model_name`] (non-empty, at most
/// [`MAX_LABEL`] characters), and the first one named wins.
pub(crate) fn response_id(id: &str) -> Option<String> {
    model_name(id)
}

/// What of a stream counted as progress (see the [rule](self#progress)).
#[derive(Debug, Default)]
pub(crate) struct Progress {
    count: u64,
    usage: Option<Usage>,
}

impl Progress {
    /// How many events carried part of the answer.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Text or reasoning arrived: progress when not empty.
    #[cfg_attr(
        not(any(feature = "anthropic", feature = "responses", feature = "gemini")),
        allow(dead_code, reason = "the chat decoder counts its own deltas")
    )]
    pub(crate) fn text(&mut self, text: &str) {
        if !text.is_empty() {
            self.count += 1;
        }
    }

    /// A piece of a call, a stop reason or the end event arrived.
    pub(crate) fn made(&mut self) {
        self.count += 1;
    }

    /// Usage figures arrived: progress, and `true`, when they differ from
    /// the last ones.
    pub(crate) fn usage(&mut self, usage: Usage) -> bool {
        if self.usage == Some(usage) {
            return false;
        }
        self.usage = Some(usage);
        self.count += 1;
        true
    }
}

/// The longest tool call id kept, in bytes: ten times the longest real
/// servers issue (OpenAI's 40; Kimi's `functions.<name>:<n>` stays under
/// 80).
pub(crate) const MAX_CALL_ID: usize = 400;

/// The [identity rule](self#identity): every call has a non-empty name and
/// an id of its own within the answer, at most [`MAX_CALL_ID`] bytes; and
/// the [bound](self#bounds) on names: one longer than [`MAX_LABEL`]
/// characters is cut (with `…`, so it still names no tool).
pub(crate) fn check_calls(calls: &mut [ToolCall]) -> Result<(), DecodeError> {
    for call in calls.iter_mut() {
        let id = bounded(&call.id, MAX_LABEL);
        if call.id.is_empty() {
            return Err(DecodeError::Protocol(
                "a tool call without an id".to_string(),
            ));
        }
        if call.name.is_empty() {
            return Err(DecodeError::Protocol(format!(
                "tool call `{id}` has no name"
            )));
        }
        if call.id.len() > MAX_CALL_ID {
            return Err(DecodeError::Protocol(format!(
                "tool call id `{id}` is {} bytes, over {MAX_CALL_ID}",
                call.id.len()
            )));
        }
        if let Cow::Owned(name) = bounded(&call.name, MAX_LABEL) {
            call.name = name;
        }
    }
    // The ids seen, as the keys of a JSON object: a sorted map whose code
    // every decoded `Value` links already (a `HashSet` of its own took
    // some 2 KB of the small CLI; BENCHMARKS.md, issue 36, session 16).
    let mut seen = serde_json::Map::new();
    for call in calls.iter() {
        if seen.insert(call.id.clone(), Value::Null).is_some() {
            let id = bounded(&call.id, MAX_LABEL);
            return Err(DecodeError::Protocol(format!(
                "duplicate tool call id `{id}` in one answer"
            )));
        }
    }
    Ok(())
}

/// `value` as compact JSON text, what its `Display` writes: through
/// `serde_json::to_string`, so a program whose only printing of a
/// [`Value`] is here links no `Display` (its formatter adapter and the
/// pretty printer `{:#}` needs are one more copy of the serializer).
pub(crate) fn json_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// The HTTP status an error's `type`, `code` or string `status` stands
/// for, on any of the four APIs.
fn status_of(label: &str) -> Option<u16> {
    Some(match label {
        "overloaded_error" | "overloaded" | "server_overloaded" => 529,
        // With Google's `google.rpc` status names (Gemini's `error.status`).
        "rate_limit_error"
        | "rate_limit_exceeded"
        | "rate_limited"
        | "too_many_requests"
        | "RESOURCE_EXHAUSTED" => 429,
        "api_error" | "server_error" | "internal_error" | "internal_server_error" | "INTERNAL" => {
            500
        }
        "service_unavailable" | "service_unavailable_error" | "UNAVAILABLE" => 503,
        "timeout_error" | "timeout" | "gateway_timeout" | "DEADLINE_EXCEEDED" => 504,
        _ => return None,
    })
}

/// A status carried as a number (OpenRouter's `"code": 502`) or a numeric
/// string; only 400 to 599 count.
fn numeric_status(v: &Value) -> Option<u16> {
    let n = match v {
        Value::Number(n) => n.as_u64()?,
        Value::String(s) => s.parse().ok()?,
        _ => return None,
    };
    u16::try_from(n).ok().filter(|s| (400..=599).contains(s))
}

/// An error the server reported in place of the answer (`where_`: "in
/// stream" or "in response"), read the same way on every API (see
/// [the rule](self#in-stream-errors)). `error` is the error object (or a
/// string); the message is `server error <where_>: <message> (<code>)`,
/// each part bounded.
pub(crate) fn server_error(where_: &str, error: Option<&Value>) -> DecodeError {
    let message = match error {
        None | Some(Value::Null) => "(no details)".to_string(),
        Some(Value::String(s)) => bounded(s, MAX_MESSAGE).into_owned(),
        Some(v @ Value::Object(map)) => match map.get("message") {
            Some(Value::String(s)) => bounded(s, MAX_MESSAGE).into_owned(),
            _ => bounded(&json_text(v), MAX_MESSAGE).into_owned(),
        },
        Some(other) => bounded(&json_text(other), MAX_MESSAGE).into_owned(),
    };
    let field = |name: &str| error.and_then(|e| e.get(name)).filter(|v| !v.is_null());
    // Gemini's label is its string `status` (its `code` is the number).
    let labels = [field("type"), field("code"), field("status")];
    let label = labels.iter().flatten().find_map(|v| v.as_str());
    let status = labels
        .iter()
        .flatten()
        .filter_map(|v| v.as_str())
        .find_map(status_of)
        .or_else(|| {
            [field("code"), field("status")]
                .into_iter()
                .flatten()
                .find_map(numeric_status)
        });
    let message = match (label, field("code")) {
        (Some(l), _) => format!(
            "server error {where_}: {message} ({})",
            bounded(l, MAX_LABEL)
        ),
        (None, Some(code)) => format!(
            "server error {where_}: {message} ({})",
            bounded(&json_text(code), MAX_LABEL)
        ),
        (None, None) => format!("server error {where_}: {message}"),
    };
    match status {
        Some(status) => DecodeError::Status { status, message },
        None => DecodeError::Protocol(message),
    }
}

/// A chat-completions `finish_reason` (absent only when `[DONE]` came):
/// `stop` (or none) is `ToolCalls` when calls came (some servers say `stop`
/// after a batch), else `Complete`; `tool_calls` and `function_call` are
/// `ToolCalls`; `length` is `Length`; `content_filter` is `Filtered`.
pub(crate) fn chat_finish(reason: Option<&str>, has_calls: bool) -> FinishReason {
    match reason {
        Some("stop") | None if has_calls => FinishReason::ToolCalls,
        Some("stop") | None => FinishReason::Complete,
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        Some("content_filter") => FinishReason::Filtered,
        Some(_) => FinishReason::ServerCut,
    }
}

/// An Anthropic `stop_reason` (absent only when `message_stop` came
/// without one): `end_turn`, `stop_sequence` and `pause_turn` (a server
/// tool's paused turn; pikuri declares none, so the message is the answer)
/// are `Complete` (`ToolCalls` when calls came); `tool_use` is `ToolCalls`;
/// `max_tokens` and `model_context_window_exceeded` are `Length`;
/// `refusal` is `Filtered`.
#[cfg_attr(
    not(feature = "anthropic"),
    allow(
        dead_code,
        reason = "read by the Anthropic decoders and the rule tests"
    )
)]
pub(crate) fn anthropic_finish(stop_reason: Option<&str>, has_calls: bool) -> FinishReason {
    match stop_reason {
        Some("end_turn" | "stop_sequence" | "pause_turn") | None if has_calls => {
            FinishReason::ToolCalls
        }
        Some("end_turn" | "stop_sequence" | "pause_turn") | None => FinishReason::Complete,
        Some("tool_use") => FinishReason::ToolCalls,
        Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
        Some("refusal") => FinishReason::Filtered,
        Some(_) => FinishReason::ServerCut,
    }
}

/// A Responses `status` and `incomplete_details.reason`: `completed` (or
/// none) is `Filtered` after a refusal part, else `ToolCalls` when calls
/// came, else `Complete`; `incomplete` is `Length` for `max_output_tokens`
/// (or no reason), `Filtered` for `content_filter`, else `ServerCut`; any
/// other status is `ServerCut`.
#[cfg_attr(
    not(feature = "responses"),
    allow(
        dead_code,
        reason = "read by the Responses decoders and the rule tests"
    )
)]
pub(crate) fn responses_finish(
    status: Option<&str>,
    incomplete: Option<&str>,
    refused: bool,
    has_calls: bool,
) -> FinishReason {
    match status {
        Some("completed") | None if refused => FinishReason::Filtered,
        Some("completed") | None if has_calls => FinishReason::ToolCalls,
        Some("completed") | None => FinishReason::Complete,
        Some("incomplete") => match incomplete {
            Some("max_output_tokens") | None => FinishReason::Length,
            Some("content_filter") => FinishReason::Filtered,
            Some(_) => FinishReason::ServerCut,
        },
        Some(_) => FinishReason::ServerCut,
    }
}

/// A Gemini `finishReason` (absent only for a blocked prompt): `STOP` is
/// `Complete` (`ToolCalls` when calls came); `MAX_TOKENS` is `Length`; a
/// blocked prompt (`promptFeedback.blockReason`), `SAFETY`, `RECITATION`,
/// `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII` and `IMAGE_SAFETY` are
/// `Filtered`.
#[cfg_attr(
    not(feature = "gemini"),
    allow(dead_code, reason = "read by the Gemini decoder and the rule tests")
)]
pub(crate) fn gemini_finish(reason: Option<&str>, blocked: bool, has_calls: bool) -> FinishReason {
    match reason {
        _ if blocked => FinishReason::Filtered,
        Some("STOP") if has_calls => FinishReason::ToolCalls,
        Some("STOP") => FinishReason::Complete,
        Some("MAX_TOKENS") => FinishReason::Length,
        Some(
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY",
        ) => FinishReason::Filtered,
        _ => FinishReason::ServerCut,
    }
}

// The shared rule table runs every case on the four decoders, so it
// needs all of them built (the default; `.ci/run`'s lean builds skip it).
#[cfg(all(test, feature = "anthropic", feature = "responses", feature = "gemini"))]
#[path = "rules_tests.rs"]
mod tests;
