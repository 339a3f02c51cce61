//! Rendering of a scripted [`Completion`] as an OpenAI Responses response:
//! the `response` object and its SSE stream of `response.*` events. Shapes
//! follow the official SDK's types (`Response`, `ResponseReasoningItem`,
//! `ResponseOutputMessage`, `ResponseFunctionToolCall`, the stream events).
//!
//! Output items, in order: a `reasoning` item (summary and
//! `encrypted_content`) if the reply has reasoning, a `message` if it has
//! text, one `function_call` per call. Item ids are `rs_…`, `msg_…`,
//! `fc_…` after the response id.

use serde_json::{Value, json};

use super::render::{
    Frame, Meta, StreamOptions, fake_signature, named_event_frames, pieces, usage_counts,
};
use super::reply::Completion;

/// `(status, incomplete_details)` for the scripted finish reason.
fn status(c: &Completion) -> (&'static str, Value) {
    match c.finish_reason.as_deref() {
        Some("length") => ("incomplete", json!({ "reason": "max_output_tokens" })),
        Some("content_filter") => ("incomplete", json!({ "reason": "content_filter" })),
        Some("stop" | "tool_calls") | None => ("completed", Value::Null),
        // Another reason the server cut the response for, as scripted.
        Some(other) => ("incomplete", json!({ "reason": other })),
    }
}

fn usage(c: &Completion) -> Value {
    let (prompt, completion) = usage_counts(c);
    // Reasoning tokens are part of the output; a rough share for the fake.
    let reasoning = c
        .reasoning
        .as_deref()
        .map_or(0, |r| (r.chars().count() as u64 / 4 + 1).min(completion));
    json!({
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": c.cached.unwrap_or(0),
            "cache_write_tokens": c.cache_creation.unwrap_or(0),
        },
        "output_tokens": completion,
        "output_tokens_details": { "reasoning_tokens": reasoning },
        "total_tokens": prompt.saturating_add(completion),
    })
}

/// One output item, `done` (complete) or as first announced.
#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Added,
    Done,
}

fn reasoning_item(c: &Completion, meta: &Meta, phase: Phase) -> Option<Value> {
    let text = c.reasoning.as_ref()?;
    let encrypted = c.signature.clone().unwrap_or_else(|| fake_signature(text));
    let summary = if phase == Phase::Done {
        json!([{ "type": "summary_text", "text": text }])
    } else {
        json!([])
    };
    Some(json!({
        "type": "reasoning",
        "id": format!("rs_{}", meta.id),
        "summary": summary,
        "encrypted_content": encrypted,
    }))
}

fn message_item(c: &Completion, meta: &Meta, phase: Phase) -> Option<Value> {
    let text = c.content.as_ref()?;
    let (state, content) = match phase {
        Phase::Added => ("in_progress", json!([])),
        Phase::Done => (
            "completed",
            json!([{ "type": "output_text", "text": text, "annotations": [] }]),
        ),
    };
    Some(json!({
        "type": "message",
        "id": format!("msg_{}", meta.id),
        "status": state,
        "role": "assistant",
        "content": content,
    }))
}

fn call_items(c: &Completion, meta: &Meta, phase: Phase) -> Vec<Value> {
    c.calls
        .iter()
        .zip(&meta.call_ids)
        .enumerate()
        .map(|(i, (call, id))| {
            let (state, arguments) = match phase {
                Phase::Added => ("in_progress", ""),
                Phase::Done => ("completed", call.arguments.as_str()),
            };
            json!({
                "type": "function_call",
                "id": format!("fc_{}_{i}", meta.id),
                "call_id": id,
                "name": call.name,
                "arguments": arguments,
                "status": state,
            })
        })
        .collect()
}

/// The reasoning item of [`Reply::with_redacted_thinking`](super::Reply::with_redacted_thinking): no summary.
fn redacted_item(c: &Completion, meta: &Meta) -> Option<Value> {
    let data = c.redacted.as_ref()?;
    Some(json!({
        "type": "reasoning",
        "id": format!("rs_redacted_{}", meta.id),
        "summary": [],
        "encrypted_content": data,
    }))
}

/// The items of [`Reply::with_tool_search`](super::Reply::with_tool_search):
/// a `tool_search_call` and its `tool_search_output` per search, run by the
/// server; each found tool as a `function` with its name.
fn search_items(c: &Completion, meta: &Meta, phase: Phase) -> Vec<Value> {
    let state = if phase == Phase::Done {
        "completed"
    } else {
        "in_progress"
    };
    let mut out = Vec::new();
    for (i, (query, found)) in c.searches.iter().enumerate() {
        out.push(json!({
            "type": "tool_search_call",
            "id": format!("tsc_{}_{i}", meta.id),
            "call_id": null,
            "execution": "server",
            "status": state,
            "arguments": { "query": query },
        }));
        let tools: Vec<Value> = found
            .iter()
            .map(|n| json!({ "type": "function", "name": n }))
            .collect();
        out.push(json!({
            "type": "tool_search_output",
            "id": format!("tso_{}_{i}", meta.id),
            "call_id": null,
            "execution": "server",
            "status": state,
            "tools": tools,
        }));
    }
    out
}

fn items(c: &Completion, meta: &Meta, phase: Phase) -> Vec<Value> {
    let mut out: Vec<Value> = redacted_item(c, meta).into_iter().collect();
    out.extend(reasoning_item(c, meta, phase));
    out.extend(search_items(c, meta, phase));
    out.extend(message_item(c, meta, phase));
    out.extend(call_items(c, meta, phase));
    out
}

/// The `response` object in `state` with `output`.
fn response(meta: &Meta, state: &str, output: &[Value]) -> Value {
    json!({
        "id": meta.id,
        "object": "response",
        "created_at": meta.created,
        "status": state,
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "max_output_tokens": null,
        "metadata": {},
        "model": meta.model,
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "store": false,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": null,
    })
}

fn finished(c: &Completion, meta: &Meta) -> Value {
    let (state, incomplete) = status(c);
    let mut r = response(meta, state, &items(c, meta, Phase::Done));
    r["incomplete_details"] = incomplete;
    r["usage"] = usage(c);
    r
}

/// The non-streamed `response` object.
pub(super) fn response_json(c: &Completion, meta: &Meta) -> Value {
    finished(c, meta)
}

/// Serializes events with their `event:` line and `sequence_number`.
struct Events {
    out: Vec<String>,
}

impl Events {
    fn push(&mut self, mut data: Value) {
        data["sequence_number"] = json!(self.out.len());
        let name = data["type"].as_str().unwrap_or("").to_string();
        self.out.push(format!("event: {name}\ndata: {data}\n\n"));
    }
}

/// The events between an item's `added` and `done`: its parts and deltas.
fn item_events(
    ev: &mut Events,
    output_index: usize,
    item_id: &Value,
    full: &Value,
    opts: StreamOptions,
) {
    let at = json!({ "item_id": item_id, "output_index": output_index });
    let with = |mut v: Value| {
        for (k, x) in at.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        v
    };
    match full["type"].as_str() {
        // Redacted reasoning: nothing readable to stream.
        Some("reasoning") if full["summary"].as_array().is_some_and(Vec::is_empty) => {}
        Some("reasoning") => {
            let text = full["summary"][0]["text"].as_str().unwrap_or("");
            let part = |t: &str| json!({ "type": "summary_text", "text": t });
            ev.push(with(json!({
                "type": "response.reasoning_summary_part.added",
                "summary_index": 0, "part": part(""),
            })));
            for p in pieces(text, opts.chunk_chars) {
                ev.push(with(json!({
                    "type": "response.reasoning_summary_text.delta",
                    "summary_index": 0, "delta": p,
                })));
            }
            ev.push(with(json!({
                "type": "response.reasoning_summary_text.done",
                "summary_index": 0, "text": text,
            })));
            ev.push(with(json!({
                "type": "response.reasoning_summary_part.done",
                "summary_index": 0, "part": part(text),
            })));
        }
        Some("message") => {
            let text = full["content"][0]["text"].as_str().unwrap_or("");
            let part = |t: &str| json!({ "type": "output_text", "text": t, "annotations": [] });
            ev.push(with(json!({
                "type": "response.content_part.added", "content_index": 0, "part": part(""),
            })));
            for p in pieces(text, opts.chunk_chars) {
                ev.push(with(json!({
                    "type": "response.output_text.delta",
                    "content_index": 0, "delta": p, "logprobs": [],
                })));
            }
            ev.push(with(json!({
                "type": "response.output_text.done",
                "content_index": 0, "text": text, "logprobs": [],
            })));
            ev.push(with(json!({
                "type": "response.content_part.done", "content_index": 0, "part": part(text),
            })));
        }
        // A tool search: its items alone, no deltas.
        Some("tool_search_call" | "tool_search_output") => {}
        _ => {
            let arguments = full["arguments"].as_str().unwrap_or("");
            for p in pieces(arguments, opts.chunk_chars) {
                ev.push(with(json!({
                    "type": "response.function_call_arguments.delta", "delta": p,
                })));
            }
            ev.push(with(json!({
                "type": "response.function_call_arguments.done",
                "name": full["name"], "arguments": arguments,
            })));
        }
    }
}

/// The SSE frames of a streamed response, ending with `response.completed`
/// (or `response.incomplete`) as [`Frame::Final`].
pub(super) fn stream_frames(c: &Completion, meta: &Meta, opts: StreamOptions) -> Vec<Frame> {
    let mut ev = Events { out: Vec::new() };
    let created = response(meta, "in_progress", &[]);
    ev.push(json!({ "type": "response.created", "response": created.clone() }));
    ev.push(json!({ "type": "response.in_progress", "response": created }));
    let added = items(c, meta, Phase::Added);
    let done = items(c, meta, Phase::Done);
    for (output_index, (head, full)) in added.into_iter().zip(done).enumerate() {
        let item_id = full["id"].clone();
        ev.push(json!({
            "type": "response.output_item.added", "output_index": output_index, "item": head,
        }));
        item_events(&mut ev, output_index, &item_id, &full, opts);
        ev.push(json!({
            "type": "response.output_item.done", "output_index": output_index, "item": full,
        }));
    }
    let last = finished(c, meta);
    let name = if last["status"] == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    ev.push(json!({ "type": name, "response": last }));
    let mut events = ev.out;
    let last = events.pop().unwrap_or_default();
    named_event_frames(
        events,
        last,
        opts.garbage,
        "event: response.fake_unknown\ndata: {\"type\":\"response.fake_unknown\",\"x\":[1]}\n\n",
    )
}

/// The mid-stream failure: an `error` event, then `response.failed`, with
/// sequence numbers going on from `sent` (the events already written).
pub(super) fn stream_error(meta: &Meta, message: &str, sent: usize) -> String {
    let error = json!({
        "type": "error", "code": "server_error", "message": message, "param": null,
        "sequence_number": sent,
    });
    let mut failed = response(meta, "failed", &[]);
    failed["error"] = json!({ "code": "server_error", "message": message });
    let failed =
        json!({ "type": "response.failed", "response": failed, "sequence_number": sent + 1 });
    format!("event: error\ndata: {error}\n\nevent: response.failed\ndata: {failed}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            id: "resp_fake_1".into(),
            created: 1,
            model: "m".into(),
            call_ids: vec!["call_1".into()],
        }
    }

    #[test]
    fn events_are_numbered_and_end_completed() {
        let c = Completion {
            content: Some("hi".into()),
            ..Completion::default()
        };
        let opts = StreamOptions {
            chunk_chars: 0,
            include_usage: false,
            garbage: false,
        };
        let frames = stream_frames(&c, &meta(), opts);
        // created, in_progress, item added, part added, delta, text done,
        // part done, item done, completed.
        assert_eq!(frames.len(), 9);
        let Frame::Final(last) = &frames[8] else {
            panic!("no final frame")
        };
        assert!(last.starts_with("event: response.completed\n"), "{last}");
        assert!(last.contains("\"sequence_number\":8"), "{last}");
        let length = Completion {
            finish_reason: Some("length".into()),
            ..c
        };
        let r = response_json(&length, &meta());
        assert_eq!(r["status"], "incomplete");
        assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
    }
}
