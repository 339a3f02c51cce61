//! Rendering of a scripted [`Completion`] as an Anthropic Messages response:
//! the `message` object and its SSE stream (`message_start`, `ping`,
//! `content_block_start`/`delta`/`stop`, `message_delta`, `message_stop`).
//! Shapes follow the official SDK's types (`Message`, `RawMessageStartEvent`,
//! `RawContentBlockDeltaEvent`, `MessageDeltaUsage`, …).

use serde_json::{Value, json};

use super::render::{
    Frame, Meta, StreamOptions, fake_signature, named_event_frames, pieces, usage_counts,
};
use super::reply::Completion;

/// The `stop_reason` for the scripted (chat-completions) finish reason.
fn stop_reason(c: &Completion) -> &str {
    let default = if c.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    match c.finish_reason.as_deref().unwrap_or(default) {
        "stop" => "end_turn",
        "tool_calls" => "tool_use",
        "length" => "max_tokens",
        "content_filter" => "refusal",
        // `pause_turn`, `stop_sequence`, …: as scripted.
        other => other,
    }
}

/// `usage`: `input_tokens` is the prompt less what was read from or written
/// to the cache (Anthropic counts them apart).
fn usage(c: &Completion) -> Value {
    let (prompt, completion) = usage_counts(c);
    let cached = c.cached.unwrap_or(0);
    let created = c.cache_creation.unwrap_or(0);
    json!({
        "input_tokens": prompt.saturating_sub(cached).saturating_sub(created),
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": cached,
        "output_tokens": completion,
    })
}

/// A call's `input`: its arguments as a JSON object; text that is not one
/// (a [`raw_tool_call`](super::Reply::raw_tool_call)) is sent as a JSON
/// string, since a non-streamed `tool_use` block cannot carry broken JSON.
fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::String(arguments.to_string()),
    }
}

fn signature(c: &Completion, thinking: &str) -> String {
    c.signature
        .clone()
        .unwrap_or_else(|| fake_signature(thinking))
}

/// The content blocks: thinking, text, then one `tool_use` per call.
fn blocks(c: &Completion, meta: &Meta) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(data) = &c.redacted {
        out.push(json!({ "type": "redacted_thinking", "data": data }));
    }
    if let Some(thinking) = &c.reasoning {
        out.push(json!({
            "type": "thinking",
            "thinking": thinking,
            "signature": signature(c, thinking),
        }));
    }
    for (i, (query, found)) in c.searches.iter().enumerate() {
        out.push(search_use(meta, i, query, true));
        out.push(search_result(meta, i, found));
    }
    if let Some(text) = &c.content {
        out.push(json!({ "type": "text", "text": text }));
    }
    for (call, id) in c.calls.iter().zip(&meta.call_ids) {
        out.push(json!({
            "type": "tool_use",
            "id": id,
            "name": call.name,
            "input": input(&call.arguments),
        }));
    }
    out
}

/// The id of the answer's `i`th tool search.
fn search_id(meta: &Meta, i: usize) -> String {
    format!("srvtoolu_{}_{i}", meta.id)
}

/// A tool search's `server_tool_use` block: with its `input`, or, as a
/// stream starts it, with `{}`.
fn search_use(meta: &Meta, i: usize, query: &str, whole: bool) -> Value {
    json!({
        "type": "server_tool_use",
        "id": search_id(meta, i),
        "name": "tool_search_tool_bm25",
        "input": if whole { json!({ "query": query }) } else { json!({}) },
    })
}

/// A tool search's `tool_search_tool_result`: a `tool_reference` per name.
fn search_result(meta: &Meta, i: usize, found: &[String]) -> Value {
    let refs: Vec<Value> = found
        .iter()
        .map(|n| json!({ "type": "tool_reference", "tool_name": n }))
        .collect();
    json!({
        "type": "tool_search_tool_result",
        "tool_use_id": search_id(meta, i),
        "content": { "type": "tool_search_tool_search_result", "tool_references": refs },
    })
}

fn message(c: &Completion, meta: &Meta, content: &[Value], stop: Option<&str>) -> Value {
    json!({
        "id": meta.id,
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": usage(c),
    })
}

/// The non-streamed `message` object.
pub(super) fn message_json(c: &Completion, meta: &Meta) -> Value {
    message(c, meta, &blocks(c, meta), Some(stop_reason(c)))
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The SSE frames of a streamed message, ending with `message_stop` as
/// [`Frame::Final`]. A `ping` follows `message_start`, as the API sends.
pub(super) fn stream_frames(c: &Completion, meta: &Meta, opts: StreamOptions) -> Vec<Frame> {
    let mut events: Vec<String> = Vec::new();
    let mut start = message(c, meta, &[], None);
    // The real API reports the prompt up front and 1 output token so far.
    start["usage"]["output_tokens"] = json!(1);
    events.push(event(
        "message_start",
        &json!({ "type": "message_start", "message": start }),
    ));
    events.push(event("ping", &json!({ "type": "ping" })));
    let mut index = 0usize;
    let mut block = |events: &mut Vec<String>, head: Value, deltas: Vec<Value>| {
        events.push(event(
            "content_block_start",
            &json!({ "type": "content_block_start", "index": index, "content_block": head }),
        ));
        for delta in deltas {
            events.push(event(
                "content_block_delta",
                &json!({ "type": "content_block_delta", "index": index, "delta": delta }),
            ));
        }
        events.push(event(
            "content_block_stop",
            &json!({ "type": "content_block_stop", "index": index }),
        ));
        index += 1;
    };
    if let Some(data) = &c.redacted {
        block(
            &mut events,
            json!({ "type": "redacted_thinking", "data": data }),
            Vec::new(),
        );
    }
    if let Some(thinking) = &c.reasoning {
        let mut deltas: Vec<Value> = pieces(thinking, opts.chunk_chars)
            .into_iter()
            .map(|p| json!({ "type": "thinking_delta", "thinking": p }))
            .collect();
        deltas.push(json!({ "type": "signature_delta", "signature": signature(c, thinking) }));
        block(
            &mut events,
            json!({ "type": "thinking", "thinking": "", "signature": "" }),
            deltas,
        );
    }
    for (i, (query, found)) in c.searches.iter().enumerate() {
        let input = json!({ "query": query }).to_string();
        let deltas = pieces(&input, opts.chunk_chars)
            .into_iter()
            .map(|p| json!({ "type": "input_json_delta", "partial_json": p }))
            .collect();
        block(&mut events, search_use(meta, i, query, false), deltas);
        // The result comes whole in its start, as the API streams it.
        block(&mut events, search_result(meta, i, found), Vec::new());
    }
    if let Some(text) = &c.content {
        let deltas = pieces(text, opts.chunk_chars)
            .into_iter()
            .map(|p| json!({ "type": "text_delta", "text": p }))
            .collect();
        block(&mut events, json!({ "type": "text", "text": "" }), deltas);
    }
    for (call, id) in c.calls.iter().zip(&meta.call_ids) {
        let deltas = pieces(&call.arguments, opts.chunk_chars)
            .into_iter()
            .map(|p| json!({ "type": "input_json_delta", "partial_json": p }))
            .collect();
        block(
            &mut events,
            json!({ "type": "tool_use", "id": id, "name": call.name, "input": {} }),
            deltas,
        );
    }
    let u = usage(c);
    events.push(event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": { "stop_reason": stop_reason(c), "stop_sequence": null },
            "usage": {
                "input_tokens": u["input_tokens"],
                "cache_creation_input_tokens": u["cache_creation_input_tokens"],
                "cache_read_input_tokens": u["cache_read_input_tokens"],
                "output_tokens": u["output_tokens"],
            },
        }),
    ));
    named_event_frames(
        events,
        event("message_stop", &json!({ "type": "message_stop" })),
        opts.garbage,
        "event: fake_unknown\ndata: {\"type\":\"fake_unknown\",\"x\":[1]}\n\n",
    )
}

/// The Anthropic error `type` for an HTTP status.
fn error_type(code: u16) -> &'static str {
    match code {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// `{"type":"error","error":{"type":…,"message":…}}`.
pub(super) fn error_json(code: u16, message: &str) -> Value {
    json!({ "type": "error", "error": { "type": error_type(code), "message": message } })
}

/// The mid-stream `error` event (the API sends `overloaded_error` there).
pub(super) fn stream_error(message: &str) -> String {
    event("error", &error_json(529, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::reply::CallSpec;

    #[test]
    fn usage_splits_the_prompt_and_stop_reasons_map() {
        let c = Completion {
            usage: Some((100, 7)),
            cached: Some(60),
            cache_creation: Some(30),
            finish_reason: Some("length".into()),
            ..Completion::default()
        };
        let u = usage(&c);
        assert_eq!(u["input_tokens"], 10);
        assert_eq!(u["cache_read_input_tokens"], 60);
        assert_eq!(u["cache_creation_input_tokens"], 30);
        assert_eq!(stop_reason(&c), "max_tokens");
        let call = Completion {
            calls: vec![CallSpec {
                id: None,
                name: "f".into(),
                arguments: "{\"a\"".into(),
            }],
            ..Completion::default()
        };
        assert_eq!(stop_reason(&call), "tool_use");
        assert_eq!(input("{\"a\""), json!("{\"a\""));
    }
}
