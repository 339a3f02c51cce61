//! The API-neutral view of a recorded request: its conversation in
//! chat-completions shape, its system prompt and its tool names, whichever
//! wire format (chat completions, Anthropic Messages, OpenAI Responses) it
//! came in. Used by [`RecordedRequest`](super::RecordedRequest)'s
//! accessors.

use serde_json::{Map, Value, json};

use crate::Api;

/// Text of a content value: a string, or the `text` of each text part
/// (`text`, `input_text`, `output_text`) joined; `None` when there is none.
fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter(|p| {
                    matches!(
                        p["type"].as_str(),
                        Some("text" | "input_text" | "output_text")
                    )
                })
                .filter_map(|p| p["text"].as_str())
                .collect();
            (!texts.is_empty()).then(|| texts.concat())
        }
        _ => None,
    }
}

fn tool_call(id: &Value, name: &Value, arguments: &str) -> Value {
    json!({ "id": id, "type": "function", "function": { "name": name, "arguments": arguments } })
}

/// The conversation of `body` (a request of `api`) as chat-completions
/// messages: a `system` message for a top-level system prompt, assistant
/// messages with `content`, `reasoning_content` and `tool_calls`, and one
/// `tool` message per tool result.
pub(super) fn conversation(api: Api, body: &Value) -> Vec<Value> {
    match api {
        Api::AnthropicMessages => anthropic(body),
        Api::OpenAiResponses => responses(body),
        Api::Gemini => gemini(body),
        _ => body["messages"].as_array().cloned().unwrap_or_default(),
    }
}

fn anthropic(body: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = text_of(&body["system"]) {
        out.push(json!({ "role": "system", "content": system }));
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("");
        let Some(blocks) = m["content"].as_array() else {
            out.push(json!({ "role": role, "content": m["content"] }));
            continue;
        };
        if role == "assistant" {
            let mut msg = Map::new();
            msg.insert("role".into(), json!("assistant"));
            msg.insert(
                "content".into(),
                text_of(&m["content"]).map_or(Value::Null, Value::String),
            );
            let thinking: String = blocks
                .iter()
                .filter(|b| b["type"] == "thinking")
                .filter_map(|b| b["thinking"].as_str())
                .collect();
            if !thinking.is_empty() {
                msg.insert("reasoning_content".into(), json!(thinking));
            }
            let calls: Vec<Value> = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| tool_call(&b["id"], &b["name"], &b["input"].to_string()))
                .collect();
            if !calls.is_empty() {
                msg.insert("tool_calls".into(), Value::Array(calls));
            }
            out.push(Value::Object(msg));
            continue;
        }
        // A user turn: its tool results first (as the API wants them), then
        // what else it says.
        for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
            let content = text_of(&b["content"]).unwrap_or_default();
            out.push(
                json!({ "role": "tool", "tool_call_id": b["tool_use_id"], "content": content }),
            );
        }
        if let Some(text) = text_of(&m["content"]) {
            out.push(json!({ "role": role, "content": text }));
        }
    }
    out
}

/// The texts of Gemini `parts` (thoughts when `thought`), joined.
fn gemini_text(parts: &[Value], thought: bool) -> Option<String> {
    let texts: Vec<&str> = parts
        .iter()
        .filter(|p| p["thought"].as_bool().unwrap_or(false) == thought)
        .filter_map(|p| p["text"].as_str())
        .collect();
    (!texts.is_empty()).then(|| texts.concat())
}

fn gemini(body: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let empty = Vec::new();
    let system = body["systemInstruction"]["parts"]
        .as_array()
        .unwrap_or(&empty);
    if let Some(text) = gemini_text(system, false) {
        out.push(json!({ "role": "system", "content": text }));
    }
    for m in body["contents"].as_array().into_iter().flatten() {
        let parts = m["parts"].as_array().unwrap_or(&empty);
        // A call without an id is named by its name, as Gemini matches it.
        let id = |f: &Value| f.get("id").cloned().unwrap_or_else(|| f["name"].clone());
        if m["role"] == "model" {
            let mut msg = json!({ "role": "assistant",
                "content": gemini_text(parts, false).map_or(Value::Null, Value::String) });
            if let Some(r) = gemini_text(parts, true) {
                msg["reasoning_content"] = json!(r);
            }
            let calls: Vec<Value> = parts
                .iter()
                .filter_map(|p| p.get("functionCall"))
                .map(|f| tool_call(&id(f), &f["name"], &f["args"].to_string()))
                .collect();
            if !calls.is_empty() {
                msg["tool_calls"] = Value::Array(calls);
            }
            out.push(msg);
            continue;
        }
        for f in parts.iter().filter_map(|p| p.get("functionResponse")) {
            let r = &f["response"];
            let content = r["result"]
                .as_str()
                .map_or_else(|| r.to_string(), str::to_string);
            out.push(json!({ "role": "tool", "tool_call_id": id(f), "content": content }));
        }
        if let Some(text) = gemini_text(parts, false) {
            out.push(json!({ "role": "user", "content": text }));
        }
    }
    out
}

fn responses(body: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    if let Some(system) = body["instructions"].as_str() {
        out.push(json!({ "role": "system", "content": system }));
    }
    let items = match &body["input"] {
        Value::String(s) => return [out, vec![json!({ "role": "user", "content": s })]].concat(),
        Value::Array(items) => items.as_slice(),
        _ => &[],
    };
    // Reasoning and calls join the assistant message they belong to: the
    // last one when nothing else came after it, else a new one.
    let mut pending_reasoning: Option<String> = None;
    let assistant = |out: &mut Vec<Value>, open: bool| -> usize {
        if !(open && out.last().is_some_and(|m| m["role"] == "assistant")) {
            out.push(json!({ "role": "assistant", "content": null }));
        }
        out.len() - 1
    };
    let mut open = false;
    for item in items {
        let kind = item["type"].as_str().unwrap_or("message");
        match kind {
            "reasoning" => {
                let text: String = item["summary"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s["text"].as_str())
                    .collect();
                pending_reasoning = Some(text);
                open = false;
            }
            "function_call" => {
                let i = assistant(&mut out, open);
                if let Some(r) = pending_reasoning.take() {
                    out[i]["reasoning_content"] = json!(r);
                }
                let args = item["arguments"].as_str().unwrap_or("");
                let call = tool_call(&item["call_id"], &item["name"], args);
                match out[i]["tool_calls"].as_array_mut() {
                    Some(calls) => calls.push(call),
                    None => out[i]["tool_calls"] = json!([call]),
                }
                open = true;
            }
            "function_call_output" => {
                let content = text_of(&item["output"]).unwrap_or_default();
                out.push(
                    json!({ "role": "tool", "tool_call_id": item["call_id"], "content": content }),
                );
                open = false;
            }
            "message" => {
                let role = match item["role"].as_str() {
                    Some("developer") => "system",
                    Some(r) => r,
                    None => "user",
                };
                let text = text_of(&item["content"]);
                if role == "assistant" {
                    let i = assistant(&mut out, false);
                    if let Some(r) = pending_reasoning.take() {
                        out[i]["reasoning_content"] = json!(r);
                    }
                    out[i]["content"] = text.map_or(Value::Null, Value::String);
                    open = true;
                } else {
                    out.push(json!({ "role": role, "content": text.unwrap_or_default() }));
                    open = false;
                }
            }
            _ => open = false,
        }
    }
    out
}

/// The names of the tools offered: `function.name` (chat completions),
/// `name` (Anthropic, Responses function tools) or the names of each
/// tool's `functionDeclarations` (Gemini).
pub(super) fn tool_names(body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().into_iter().flatten();
    let flat = tools.flat_map(|t| match t.get("functionDeclarations") {
        Some(Value::Array(decls)) => decls.iter().collect(),
        _ => vec![t],
    });
    flat.filter_map(|t| {
        t.pointer("/function/name")
            .or_else(|| t.get("name"))
            .and_then(Value::as_str)
    })
    .map(str::to_string)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_and_responses_read_as_chat() {
        let a = json!({
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [
                {"role": "user", "content": "6*7?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "mult", "signature": "s"},
                    {"type": "tool_use", "id": "t1", "name": "calc", "input": {"e": "6*7"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]},
            ],
        });
        let r = json!({
            "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": "6*7?"},
                {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "mult"}]},
                {"type": "function_call", "call_id": "t1", "name": "calc", "arguments": "{\"e\":\"6*7\"}"},
                {"type": "function_call_output", "call_id": "t1", "output": "42"},
            ],
        });
        let g = json!({
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "6*7?"}]},
                {"role": "model", "parts": [
                    {"text": "mult", "thought": true},
                    {"functionCall": {"id": "t1", "name": "calc", "args": {"e": "6*7"}}}]},
                {"role": "user", "parts": [
                    {"functionResponse": {"id": "t1", "name": "calc", "response": {"result": "42"}}}]},
            ],
        });
        for conv in [
            conversation(Api::AnthropicMessages, &a),
            conversation(Api::OpenAiResponses, &r),
            conversation(Api::Gemini, &g),
        ] {
            assert_eq!(conv.len(), 4, "{conv:?}");
            assert_eq!(conv[0], json!({"role": "system", "content": "Be brief."}));
            assert_eq!(conv[1], json!({"role": "user", "content": "6*7?"}));
            assert_eq!(conv[2]["reasoning_content"], "mult");
            assert_eq!(conv[2]["tool_calls"][0]["function"]["name"], "calc");
            assert_eq!(
                conv[2]["tool_calls"][0]["function"]["arguments"],
                "{\"e\":\"6*7\"}"
            );
            assert_eq!(
                conv[3],
                json!({"role": "tool", "tool_call_id": "t1", "content": "42"})
            );
        }
    }
}
