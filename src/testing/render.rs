//! Pure rendering of a [`Completion`] into chat-completions JSON and SSE
//! frames, and the pieces the other APIs' renderers (`render_anthropic.rs`,
//! `render_responses.rs`) share. No sockets, no timing: `conn.rs` decides
//! when each frame goes out.

use serde_json::{Map, Value, json};

use super::reply::Completion;

/// What a served response needs besides the scripted completion.
#[derive(Debug)]
pub(super) struct Meta {
    /// `chatcmpl-fake-<n>`.
    pub(super) id: String,
    pub(super) created: u64,
    pub(super) model: String,
    /// One id per scripted call, auto-named ones already resolved.
    pub(super) call_ids: Vec<String>,
}

/// One unit of an SSE body.
#[derive(Debug, PartialEq)]
pub(super) enum Frame {
    /// A `data: {json}` event: counted by `cut_after` and friends.
    Chunk(String),
    /// Noise from `with_garbage`, written verbatim, never counted.
    Noise(&'static str),
    /// `data: [DONE]`.
    Done,
    /// The terminal event of an Anthropic or Responses stream
    /// (`message_stop`, `response.completed`): written verbatim, and, like
    /// [`Frame::Done`], not counted, so a fault placed past the last chunk
    /// lands before it.
    Final(String),
}

/// The frames of a named-event stream (Anthropic, Responses): `events` as
/// chunks then `last` as the [`Frame::Final`]; under `with_garbage` a
/// keep-alive comment first and `unknown` (an event of a type the client
/// must skip) after each chunk.
pub(super) fn named_event_frames(
    events: Vec<String>,
    last: String,
    garbage: bool,
    unknown: &'static str,
) -> Vec<Frame> {
    let mut frames: Vec<Frame> = Vec::new();
    if garbage {
        frames.push(Frame::Noise(": FakeServer keep-alive comment\n\n"));
    }
    for e in events {
        frames.push(Frame::Chunk(e));
        if garbage {
            frames.push(Frame::Noise(unknown));
        }
    }
    frames.push(Frame::Final(last));
    frames
}

/// Prompt tokens reported when a reply sets no usage.
const DEFAULT_PROMPT_TOKENS: u64 = 10;

/// `(prompt, completion)` tokens: the scripted ones, or 10 and
/// `content chars / 4 + 1`.
pub(super) fn usage_counts(c: &Completion) -> (u64, u64) {
    c.usage.unwrap_or_else(|| {
        let chars = c.content.as_deref().map_or(0, |s| s.chars().count());
        (DEFAULT_PROMPT_TOKENS, chars as u64 / 4 + 1)
    })
}

fn usage_json(c: &Completion) -> Value {
    let (prompt, completion) = usage_counts(c);
    let mut usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt.saturating_add(completion),
    });
    if let Some(cached) = c.cached {
        usage["prompt_tokens_details"] = json!({ "cached_tokens": cached });
    }
    if let Some(written) = c.cache_creation {
        usage["prompt_tokens_details"]["cache_write_tokens"] = json!(written);
    }
    usage
}

fn finish_reason(c: &Completion) -> &str {
    match &c.finish_reason {
        Some(r) => r,
        None if c.calls.is_empty() => "stop",
        None => "tool_calls",
    }
}

fn reasoning_field(c: &Completion) -> &str {
    c.reasoning_field.as_deref().unwrap_or("reasoning_content")
}

/// The non-streamed `chat.completion` object.
pub(super) fn completion_json(c: &Completion, meta: &Meta) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    let content = match (&c.content, c.calls.is_empty()) {
        (Some(text), _) => json!(text),
        (None, true) => json!(""),
        (None, false) => Value::Null,
    };
    message.insert("content".into(), content);
    if let Some(reasoning) = &c.reasoning {
        message.insert(reasoning_field(c).into(), json!(reasoning));
    }
    if !c.calls.is_empty() {
        let calls: Vec<Value> = c
            .calls
            .iter()
            .zip(&meta.call_ids)
            .map(|(call, id)| {
                json!({
                    "id": id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments },
                })
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    json!({
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason(c),
        }],
        "usage": usage_json(c),
    })
}

/// `s` in pieces of `n` chars (`n == 0`: one piece). Empty text: no pieces.
pub(super) fn pieces(s: &str, n: usize) -> Vec<String> {
    if s.is_empty() {
        return Vec::new();
    }
    if n == 0 {
        return vec![s.to_string()];
    }
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|p| p.iter().collect()).collect()
}

/// Options of a streamed rendering.
#[derive(Debug, Clone, Copy)]
pub(super) struct StreamOptions {
    pub(super) chunk_chars: usize,
    pub(super) include_usage: bool,
    pub(super) garbage: bool,
}

/// Noise inserted after the data chunk with index `i % 4` by `with_garbage`.
const GARBAGE_AFTER: [&str; 4] = [
    "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    "\n\n",
    ": FakeServer comment between chunks\n\n",
    "data: {\"object\":\"fake.unknown\",\"x_fake\":{\"nested\":[1,2,3]}}\n\n",
];

/// The SSE frames of a streamed completion, ending with [`Frame::Done`].
pub(super) fn stream_frames(c: &Completion, meta: &Meta, opts: StreamOptions) -> Vec<Frame> {
    let chunk = |delta: Value, finish: Option<&str>| -> Value {
        let mut choice = json!({ "index": 0, "delta": delta, "finish_reason": finish });
        let mut v = json!({
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "choices": [],
        });
        if opts.garbage {
            choice["logprobs"] = Value::Null;
            v["system_fingerprint"] = json!("fp_fake");
            v["x_fake_extra"] = json!({ "a": [1, 2] });
        }
        v["choices"] = json!([choice]);
        if opts.include_usage {
            // OpenAI sends `"usage": null` on every chunk but the last.
            v["usage"] = Value::Null;
        }
        v
    };

    let mut chunks: Vec<Value> = Vec::new();
    chunks.push(chunk(json!({ "role": "assistant", "content": "" }), None));
    if let Some(reasoning) = &c.reasoning {
        for piece in pieces(reasoning, opts.chunk_chars) {
            chunks.push(chunk(json!({ reasoning_field(c): piece }), None));
        }
    }
    if let Some(content) = &c.content {
        for piece in pieces(content, opts.chunk_chars) {
            chunks.push(chunk(json!({ "content": piece }), None));
        }
    }
    for (index, (call, id)) in c.calls.iter().zip(&meta.call_ids).enumerate() {
        let head = json!({ "tool_calls": [{
            "index": index,
            "id": id,
            "type": "function",
            "function": { "name": call.name, "arguments": "" },
        }]});
        chunks.push(chunk(head, None));
        for piece in pieces(&call.arguments, opts.chunk_chars) {
            let delta = json!({ "tool_calls": [{
                "index": index,
                "function": { "arguments": piece },
            }]});
            chunks.push(chunk(delta, None));
        }
    }
    chunks.push(chunk(json!({}), Some(finish_reason(c))));
    if opts.include_usage {
        let mut last = chunk(json!({}), None);
        last["choices"] = json!([]);
        last["usage"] = usage_json(c);
        chunks.push(last);
    }

    let mut frames = Vec::new();
    if opts.garbage {
        frames.push(Frame::Noise(": FakeServer keep-alive comment\n\n"));
        frames.push(Frame::Noise("retry: 10\n\n"));
    }
    for (i, v) in chunks.iter().enumerate() {
        if opts.garbage {
            frames.push(Frame::Chunk(format!("id: {}\ndata: {v}\n\n", i + 7)));
            frames.push(Frame::Noise(GARBAGE_AFTER[i % GARBAGE_AFTER.len()]));
        } else {
            frames.push(Frame::Chunk(format!("data: {v}\n\n")));
        }
    }
    frames.push(Frame::Done);
    frames
}

/// The OpenAI error `type` for an HTTP status.
fn error_type(code: u16) -> &'static str {
    match code {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        500..=599 => "server_error",
        _ => "api_error",
    }
}

/// `{"error":{"message":…,"type":…,"code":code}}`.
pub(super) fn error_json(code: u16, message: &str) -> Value {
    json!({ "error": { "message": message, "type": error_type(code), "code": code } })
}

/// The chat-completions mid-stream error: a data event with an OpenAI
/// error object (what OpenAI sends, and what its SDK raises on).
pub(super) fn stream_error(message: &str) -> String {
    let v = json!({ "error": { "message": message, "type": "server_error", "code": null } });
    format!("data: {v}\n\n")
}

/// A deterministic stand-in for a thinking signature or
/// `encrypted_content`: `fakesig-` and the FNV-1a hash of `text` in hex.
pub(super) fn fake_signature(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("fakesig-{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::reply::CallSpec;

    fn meta(calls: usize) -> Meta {
        Meta {
            id: "chatcmpl-fake-1".into(),
            created: 1,
            model: "m".into(),
            call_ids: (1..=calls).map(|i| format!("call_{i}")).collect(),
        }
    }

    fn opts(chunk_chars: usize) -> StreamOptions {
        StreamOptions {
            chunk_chars,
            include_usage: false,
            garbage: false,
        }
    }

    #[test]
    fn pieces_split_on_char_boundaries() {
        assert_eq!(pieces("héllo wörld", 4), ["héll", "o wö", "rld"]);
        assert_eq!(pieces("abc", 0), ["abc"]);
        assert!(pieces("", 4).is_empty());
    }

    #[test]
    fn default_usage_counts_content_chars() {
        let c = Completion {
            content: Some("12345678".into()),
            ..Completion::default()
        };
        assert_eq!(usage_counts(&c), (10, 3));
        assert_eq!(usage_counts(&Completion::default()), (10, 1));
    }

    #[test]
    fn tool_only_message_has_null_content() {
        let c = Completion {
            calls: vec![CallSpec {
                id: None,
                name: "f".into(),
                arguments: "{}".into(),
            }],
            ..Completion::default()
        };
        let v = completion_json(&c, &meta(1));
        assert_eq!(v["choices"][0]["message"]["content"], Value::Null);
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["id"], "call_1");
    }

    #[test]
    fn stream_counts_one_chunk_per_piece() {
        let c = Completion {
            content: Some("abcdefgh".into()),
            reasoning: Some("hmm".into()),
            ..Completion::default()
        };
        let frames = stream_frames(&c, &meta(0), opts(4));
        // role, reasoning, 2 content, finish, [DONE]
        assert_eq!(frames.len(), 6);
        assert!(
            matches!(&frames[1], Frame::Chunk(s) if s.contains("\"reasoning_content\":\"hmm\""))
        );
        assert_eq!(frames[5], Frame::Done);
    }

    #[test]
    fn error_body_shape() {
        let v = error_json(429, "slow");
        assert_eq!(v["error"]["type"], "rate_limit_error");
        assert_eq!(v["error"]["code"], 429);
        assert_eq!(v["error"]["message"], "slow");
    }
}
