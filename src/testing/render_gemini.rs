//! Rendering of a scripted [`Completion`] as a Gemini `generateContent`
//! response, and its `streamGenerateContent?alt=sse` stream (chunks of the
//! same shape, the last with the `finishReason` and the usage). Shapes
//! follow the `google-genai` SDK's types (`GenerateContentResponse`,
//! `Candidate`, `Part`, `UsageMetadata`).

use serde_json::{Map, Value, json};

use super::render::{Frame, Meta, StreamOptions, fake_signature, named_event_frames, pieces};
use super::reply::Completion;

/// The `finishReason` for the scripted (chat-completions) finish reason;
/// `None` for `prompt_blocked` (a blocked prompt has no candidate).
fn finish_reason(c: &Completion) -> Option<&str> {
    match c.finish_reason.as_deref() {
        None | Some("stop" | "tool_calls") => Some("STOP"),
        Some("length") => Some("MAX_TOKENS"),
        Some("content_filter") => Some("SAFETY"),
        Some("prompt_blocked") => None,
        // `RECITATION`, `OTHER`, …: as scripted.
        Some(other) => Some(other),
    }
}

/// `usageMetadata`: the prompt includes the cached tokens; the thoughts
/// are counted apart from the candidates (a quarter of the output when
/// there is reasoning).
fn usage(c: &Completion) -> Value {
    let (prompt, completion) = super::render::usage_counts(c);
    let thoughts = if c.reasoning.is_some() {
        completion / 4
    } else {
        0
    };
    let mut u = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion - thoughts,
        "totalTokenCount": prompt.saturating_add(completion),
    });
    if let Some(cached) = c.cached {
        u["cachedContentTokenCount"] = json!(cached);
    }
    if thoughts > 0 {
        u["thoughtsTokenCount"] = json!(thoughts);
    }
    u
}

/// The signature of the answer: the scripted one, else a fake one of the
/// reasoning (or of the first call, for a model that did not show its
/// thoughts); `None` when there is neither.
fn signature(c: &Completion) -> Option<String> {
    c.signature.clone().or_else(|| {
        c.reasoning
            .as_deref()
            .or(c.calls.first().map(|call| call.name.as_str()))
            .map(fake_signature)
    })
}

/// The call parts: a call's `id` only when the script named it (most
/// Gemini models give none); the first call carries the signature.
fn call_parts(c: &Completion, meta: &Meta) -> Vec<Value> {
    let sig = signature(c);
    c.calls
        .iter()
        .zip(&meta.call_ids)
        .enumerate()
        .map(|(i, (call, id))| {
            let args = match serde_json::from_str::<Value>(&call.arguments) {
                Ok(v @ Value::Object(_)) => v,
                _ => Value::String(call.arguments.clone()),
            };
            let mut fc = json!({"name": call.name, "args": args});
            if call.id.is_some() {
                fc["id"] = json!(id);
            }
            let mut part = json!({ "functionCall": fc });
            if let (0, Some(sig)) = (i, &sig) {
                part["thoughtSignature"] = json!(sig);
            }
            part
        })
        .collect()
}

/// A text part; the signature goes on the answer's text when no call
/// carries it.
fn text_part(c: &Completion, text: &str) -> Value {
    let mut part = json!({ "text": text });
    if c.calls.is_empty()
        && let Some(sig) = signature(c).filter(|_| c.reasoning.is_some() || c.signature.is_some())
    {
        part["thoughtSignature"] = json!(sig);
    }
    part
}

fn response(meta: &Meta, parts: &[Value], finish: Option<&str>, usage: Option<Value>) -> Value {
    let mut candidate = Map::new();
    candidate.insert("content".into(), json!({ "role": "model", "parts": parts }));
    if let Some(f) = finish {
        candidate.insert("finishReason".into(), json!(f));
    }
    candidate.insert("index".into(), json!(0));
    let mut v = json!({
        "candidates": [candidate],
        "modelVersion": meta.model,
        "responseId": meta.id,
    });
    if let Some(u) = usage {
        v["usageMetadata"] = u;
    }
    v
}

/// A blocked prompt: no candidate, `promptFeedback.blockReason`.
fn blocked(c: &Completion, meta: &Meta) -> Value {
    json!({
        "promptFeedback": { "blockReason": "SAFETY" },
        "usageMetadata": { "promptTokenCount": super::render::usage_counts(c).0 },
        "modelVersion": meta.model,
        "responseId": meta.id,
    })
}

/// The non-streamed `GenerateContentResponse`.
pub(super) fn response_json(c: &Completion, meta: &Meta) -> Value {
    let Some(finish) = finish_reason(c) else {
        return blocked(c, meta);
    };
    let mut parts = Vec::new();
    if let Some(r) = &c.reasoning {
        parts.push(json!({ "text": r, "thought": true }));
    }
    if let Some(text) = &c.content {
        parts.push(text_part(c, text));
    }
    parts.extend(call_parts(c, meta));
    response(meta, &parts, Some(finish), Some(usage(c)))
}

fn data(v: &Value) -> String {
    format!("data: {v}\r\n\r\n")
}

/// The SSE frames of a streamed answer: thought pieces, text pieces, then
/// the calls with the `finishReason` and the usage as [`Frame::Final`]
/// (the API has no end event: that chunk ends the answer).
pub(super) fn stream_frames(c: &Completion, meta: &Meta, opts: StreamOptions) -> Vec<Frame> {
    let Some(finish) = finish_reason(c) else {
        return vec![Frame::Final(data(&blocked(c, meta)))];
    };
    let mut events = Vec::new();
    let early_usage = || {
        let mut u = usage(c);
        if let Some(m) = u.as_object_mut() {
            m.retain(|k, _| k == "promptTokenCount");
        }
        u
    };
    for p in pieces(c.reasoning.as_deref().unwrap_or(""), opts.chunk_chars) {
        let part = json!({ "text": p, "thought": true });
        events.push(data(&response(meta, &[part], None, Some(early_usage()))));
    }
    let text = pieces(c.content.as_deref().unwrap_or(""), opts.chunk_chars);
    let mut last = Vec::new();
    for (i, p) in text.iter().enumerate() {
        let part = if i + 1 == text.len() {
            text_part(c, p)
        } else {
            json!({ "text": p })
        };
        if i + 1 == text.len() {
            last.push(part);
        } else {
            events.push(data(&response(meta, &[part], None, Some(early_usage()))));
        }
    }
    last.extend(call_parts(c, meta));
    let final_chunk = data(&response(meta, &last, Some(finish), Some(usage(c))));
    named_event_frames(
        events,
        final_chunk,
        opts.garbage,
        "data: {\"x_fake_unknown\":{\"nested\":[1,2,3]}}\r\n\r\n",
    )
}

/// The `google.rpc` status name of an HTTP status.
fn status_name(code: u16) -> &'static str {
    match code {
        400 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// `{"error":{"code":…,"message":…,"status":…}}`.
pub(super) fn error_json(code: u16, message: &str) -> Value {
    json!({ "error": { "code": code, "message": message, "status": status_name(code) } })
}

/// The mid-stream error: a data event with the error object (the API
/// sends a 503 `UNAVAILABLE` there when the model is overloaded).
pub(super) fn stream_error(message: &str) -> String {
    data(&error_json(503, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::reply::CallSpec;

    #[test]
    fn usage_and_finish_reasons_map() {
        let c = Completion {
            usage: Some((100, 8)),
            cached: Some(60),
            reasoning: Some("r".into()),
            finish_reason: Some("length".into()),
            ..Completion::default()
        };
        let u = usage(&c);
        assert_eq!(u["promptTokenCount"], 100);
        assert_eq!(u["cachedContentTokenCount"], 60);
        assert_eq!(u["candidatesTokenCount"], 6);
        assert_eq!(u["thoughtsTokenCount"], 2);
        assert_eq!(finish_reason(&c), Some("MAX_TOKENS"));
        let call = Completion {
            calls: vec![CallSpec {
                id: None,
                name: "f".into(),
                arguments: "{}".into(),
            }],
            finish_reason: Some("prompt_blocked".into()),
            ..Completion::default()
        };
        assert_eq!(finish_reason(&call), None);
        assert_eq!(signature(&call), Some(fake_signature("f")));
    }
}
