//! The JSON shapes of Gemini's responses (a streamed chunk is one too),
//! the usage mapping and the retry hint of an error body. Every member is
//! optional and unknown members are ignored; strings are borrowed from the
//! input when they have no escapes.

use std::time::Duration;

use serde_json::Value;

use crate::Usage;
use crate::protocol::decode::shapes::Str;

/// A `GenerateContentResponse`: a whole body, or one streamed chunk.
pub(super) struct Chunk<'a> {
    pub(super) candidates: Option<Vec<Candidate<'a>>>,
    pub(super) prompt_feedback: Option<Box<Feedback>>,
    pub(super) usage: Option<Box<WireUsage>>,
    pub(super) model: Option<Str<'a>>,
    pub(super) id: Option<Str<'a>>,
    pub(super) error: Option<Box<Value>>,
}

crate::serde_macros::json_struct! {
    Deserialize for Chunk<'a> {
        candidates,
        prompt_feedback [rename = "promptFeedback"],
        usage [rename = "usageMetadata"],
        model [rename = "modelVersion"],
        id [rename = "responseId"],
        error,
    }
}

pub(super) struct Candidate<'a> {
    pub(super) content: Option<Content<'a>>,
    pub(super) finish: Option<Str<'a>>,
    pub(super) index: Option<u64>,
}

crate::serde_macros::json_struct! {
    Deserialize for Candidate<'a> { content, finish [rename = "finishReason"], index }
}

pub(super) struct Content<'a> {
    pub(super) parts: Option<Vec<Part<'a>>>,
}

crate::serde_macros::json_struct! { Deserialize for Content<'a> { parts } }

/// One part: text (a thought when `thought` is true), a function call, or
/// a kind pikuri does not read; any may carry a signature.
pub(super) struct Part<'a> {
    pub(super) text: Option<Str<'a>>,
    pub(super) thought: Option<bool>,
    pub(super) signature: Option<Str<'a>>,
    pub(super) call: Option<Box<Call>>,
}

crate::serde_macros::json_struct! {
    Deserialize for Part<'a> {
        text,
        thought,
        signature [rename = "thoughtSignature"],
        call [rename = "functionCall"],
    }
}

pub(super) struct Call {
    pub(super) name: Option<String>,
    pub(super) args: Option<Value>,
    pub(super) id: Option<String>,
}

crate::serde_macros::json_struct! { Deserialize for Call { name, args, id } }

pub(super) struct Feedback {
    pub(super) block_reason: Option<String>,
}

crate::serde_macros::json_struct! { Deserialize for Feedback { block_reason [rename = "blockReason"] } }

/// Gemini's usage figures; each read leniently (see [`figure`]).
#[derive(Default)]
pub(super) struct WireUsage {
    prompt: Option<Value>,
    candidates: Option<Value>,
    cached: Option<Value>,
    thoughts: Option<Value>,
}

crate::serde_macros::json_struct! {
    Deserialize for WireUsage {
        prompt [rename = "promptTokenCount"],
        candidates [rename = "candidatesTokenCount"],
        cached [rename = "cachedContentTokenCount"],
        thoughts [rename = "thoughtsTokenCount"],
    }
}

/// The largest token figure taken as real.
const MAX_FIGURE: u64 = 1 << 40;

/// A usage figure: a non-negative integer up to [`MAX_FIGURE`]; anything
/// else is dropped with a `warn` line, as if not reported.
fn figure(name: &str, v: Option<&Value>) -> Option<u64> {
    let v = v.filter(|v| !v.is_null())?;
    match v.as_u64() {
        Some(n) if n <= MAX_FIGURE => Some(n),
        _ => {
            log::warn!("gemini usage: ignoring {name} = {v} (not a plausible token count)");
            None
        }
    }
}

impl WireUsage {
    /// The figures into pikuri's exclusive slices: the prompt count
    /// includes the cached tokens; the output is the candidates and the
    /// thoughts.
    pub(super) fn to_usage(&self) -> Usage {
        let prompt = figure("promptTokenCount", self.prompt.as_ref());
        let cached = figure("cachedContentTokenCount", self.cached.as_ref());
        let candidates = figure("candidatesTokenCount", self.candidates.as_ref());
        let thoughts = figure("thoughtsTokenCount", self.thoughts.as_ref());
        let output = match (candidates, thoughts) {
            (None, None) => None,
            (c, t) => Some(c.unwrap_or(0) + t.unwrap_or(0)),
        };
        Usage::from_parts(
            prompt.map(|p| p.saturating_sub(cached.unwrap_or(0))),
            output,
            cached,
            None,
            thoughts,
        )
    }
}

/// The `retryDelay` of a `google.rpc.RetryInfo` in an error body's
/// `error.details` (`"30s"`, `"1.5s"`); `None` when there is none or it
/// does not read as a non-negative number of seconds. A delay past what a
/// `Duration` holds is `Duration::MAX` (the client's retry cap applies).
pub(crate) fn retry_delay(body: &[u8]) -> Option<Duration> {
    let v: Value = crate::util::json_from_slice(body).ok()?;
    let details = v.get("error")?.get("details")?.as_array()?;
    let delay = details
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| d.get("retryDelay")?.as_str())?;
    let secs: f64 = delay.strip_suffix('s')?.trim().parse().ok()?;
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    // Why saturate: a server that asks for an absurdly long wait still asks
    // for a long one; falling back to the short backoff would retry at
    // once (a huge `Retry-After` saturates the same way).
    Some(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX))
}

#[cfg(test)]
mod tests {
    use super::Chunk;

    /// Whether `s` points into `input`: borrowed, not copied.
    fn borrowed(input: &str, s: Option<&str>) -> bool {
        s.is_some_and(|s| input.as_bytes().as_ptr_range().contains(&s.as_ptr()))
    }

    #[test]
    fn a_chunk_borrows_its_strings_from_the_input_unless_escaped() {
        let input = r#"{"candidates": [{"content": {"parts": [
            {"text": "abc", "thoughtSignature": "sig"}, {"text": "a\nb"}]},
            "finishReason": "STOP"}], "modelVersion": "gemini-x", "responseId": "r1"}"#;
        let chunk: Chunk<'_> = serde_json::from_str(input).unwrap();
        assert!(borrowed(input, chunk.model.as_deref()));
        assert!(borrowed(input, chunk.id.as_deref()));
        let candidate = &chunk.candidates.as_ref().unwrap()[0];
        assert!(borrowed(input, candidate.finish.as_deref()));
        let parts = candidate.content.as_ref().unwrap().parts.as_ref().unwrap();
        assert!(borrowed(input, parts[0].text.as_deref()));
        assert!(borrowed(input, parts[0].signature.as_deref()));
        // An escape must be undone: a copy, of the same text.
        assert_eq!(parts[1].text.as_deref(), Some("a\nb"));
        assert!(!borrowed(input, parts[1].text.as_deref()));
    }
}
