//! Strict-mode validation of a request body: the checks a strict server
//! (OpenAI, Anthropic themselves) makes on the conversation's shape, so a
//! test fails when the agent sends a history a real server would reject.
//! Chat completions here; the other APIs in `strict_anthropic.rs` and
//! `strict_responses.rs`.

use std::collections::HashSet;

use serde_json::Value;

use super::strict_common::{check_arguments, object_with_model};
use crate::Api;

/// `Ok` if a strict server of `api` would accept `body`; otherwise why not.
pub(super) fn validate(api: Api, body: Option<&Value>) -> Result<(), String> {
    match api {
        Api::AnthropicMessages => super::strict_anthropic::validate(body),
        Api::OpenAiResponses => super::strict_responses::validate(body),
        _ => validate_chat(body),
    }
}

/// The chat-completions checks.
fn validate_chat(body: Option<&Value>) -> Result<(), String> {
    let body = object_with_model(body)?;
    let messages = match body.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(Value::Array(_)) => return Err("`messages` must not be empty".into()),
        Some(_) => return Err("`messages` must be an array".into()),
        None => return Err("`messages` is required".into()),
    };
    validate_messages(messages)
}

/// The calls of the last assistant message with tool calls, while its tool
/// results are being read.
struct Pending<'a> {
    /// Index of the assistant message.
    at: usize,
    /// `(id, name)` of each call.
    calls: Vec<(&'a str, &'a str)>,
    answered: HashSet<&'a str>,
}

impl Pending<'_> {
    /// Error unless every call has been answered.
    fn check_complete(&self) -> Result<(), String> {
        let missing: Vec<String> = self
            .calls
            .iter()
            .filter(|(id, _)| !self.answered.contains(id))
            .map(|(id, name)| format!("{id} ({name})"))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "messages[{}]: assistant tool call(s) not answered by a tool message \
                 before the next non-tool message: {}",
                self.at,
                missing.join(", ")
            ))
        }
    }
}

fn validate_messages(messages: &[Value]) -> Result<(), String> {
    let mut pending: Option<Pending<'_>> = None;
    for (i, m) in messages.iter().enumerate() {
        let Some(m) = m.as_object() else {
            return Err(format!("messages[{i}] must be an object"));
        };
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(role, "system" | "user" | "assistant" | "tool") {
            return Err(format!(
                "messages[{i}].role {:?} is not one of system, user, assistant, tool",
                m.get("role").unwrap_or(&Value::Null)
            ));
        }
        if role == "tool" {
            let Some(id) = m.get("tool_call_id").and_then(Value::as_str) else {
                return Err(format!(
                    "messages[{i}]: tool message without `tool_call_id`"
                ));
            };
            let Some(p) = pending.as_mut() else {
                return Err(format!(
                    "messages[{i}]: tool message answers `{id}`, but no assistant tool call precedes it"
                ));
            };
            if !p.calls.iter().any(|(call, _)| *call == id) {
                return Err(format!(
                    "messages[{i}]: tool message answers `{id}`, which is not a call of messages[{}]",
                    p.at
                ));
            }
            if !p.answered.insert(id) {
                return Err(format!("messages[{i}]: tool call `{id}` answered twice"));
            }
            continue;
        }
        if let Some(p) = pending.take() {
            p.check_complete()?;
        }
        if role == "assistant" {
            pending = assistant_calls(i, m)?;
        }
    }
    match pending {
        Some(p) => p.check_complete(),
        None => Ok(()),
    }
}

/// The calls of an assistant message, checked for shape.
fn assistant_calls(
    i: usize,
    m: &serde_json::Map<String, Value>,
) -> Result<Option<Pending<'_>>, String> {
    let calls = match m.get("tool_calls") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(c)) if c.is_empty() => {
            return Err(format!(
                "messages[{i}].tool_calls is an empty array (omit the field instead)"
            ));
        }
        Some(Value::Array(c)) => c,
        Some(_) => return Err(format!("messages[{i}].tool_calls must be an array")),
    };
    let mut out = Vec::with_capacity(calls.len());
    for (j, call) in calls.iter().enumerate() {
        let at = format!("messages[{i}].tool_calls[{j}]");
        let Some(id) = call.get("id").and_then(Value::as_str) else {
            return Err(format!("{at}.id must be a string"));
        };
        let Some(name) = call.pointer("/function/name").and_then(Value::as_str) else {
            return Err(format!("{at}.function.name must be a string"));
        };
        match call.pointer("/function/arguments") {
            Some(Value::String(text)) => {
                check_arguments(&format!("{at}.function.arguments"), text)?;
            }
            other => {
                return Err(format!(
                    "{at}.function.arguments must be a string (JSON text), got {}",
                    other.map_or("nothing".to_string(), Value::to_string)
                ));
            }
        }
        if out.iter().any(|(seen, _)| *seen == id) {
            return Err(format!("{at}: duplicate tool call id `{id}`"));
        }
        out.push((id, name));
    }
    Ok(Some(Pending {
        at: i,
        calls: out,
        answered: HashSet::new(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[allow(clippy::needless_pass_by_value, reason = "called with json! literals")]
    fn check(messages: Value) -> Result<(), String> {
        validate(
            Api::ChatCompletions,
            Some(&json!({ "model": "m", "messages": messages })),
        )
    }

    #[allow(clippy::needless_pass_by_value, reason = "called with json! literals")]
    fn call(id: &str, args: Value) -> Value {
        json!({ "id": id, "type": "function", "function": { "name": "f", "arguments": args } })
    }

    #[test]
    fn accepts_a_complete_tool_round() {
        check(json!([
            { "role": "system", "content": "s" },
            { "role": "user", "content": "u" },
            { "role": "assistant", "content": null, "tool_calls": [call("a", json!("{}")), call("b", json!("{}"))] },
            { "role": "tool", "tool_call_id": "b", "content": "2" },
            { "role": "tool", "tool_call_id": "a", "content": "1" },
            { "role": "assistant", "content": "done" },
        ]))
        .unwrap();
    }

    #[test]
    fn rejects_body_shape() {
        let chat = |b: Option<&Value>| validate(Api::ChatCompletions, b);
        assert!(chat(None).unwrap_err().contains("not valid JSON"));
        assert!(
            chat(Some(&json!({ "messages": [] })))
                .unwrap_err()
                .contains("`model`")
        );
        assert!(
            chat(Some(&json!({ "model": "m" })))
                .unwrap_err()
                .contains("`messages`")
        );
        assert!(check(json!([])).unwrap_err().contains("empty"));
        assert!(
            check(json!([{ "role": "developer", "content": "x" }]))
                .unwrap_err()
                .contains("role")
        );
    }

    #[test]
    fn rejects_unanswered_call() {
        let e = check(json!([
            { "role": "user", "content": "u" },
            { "role": "assistant", "tool_calls": [call("a", json!("{}")), call("b", json!("{}"))] },
            { "role": "tool", "tool_call_id": "a", "content": "1" },
            { "role": "user", "content": "again" },
        ]))
        .unwrap_err();
        assert!(e.contains("b (f)"), "{e}");
        assert!(!e.contains("a (f)"), "{e}");
        // At the end of the list too.
        let e = check(json!([
            { "role": "user", "content": "u" },
            { "role": "assistant", "tool_calls": [call("a", json!("{}"))] },
        ]))
        .unwrap_err();
        assert!(e.contains("a (f)"), "{e}");
    }

    #[test]
    fn rejects_orphan_and_duplicate_tool_messages() {
        let e = check(json!([
            { "role": "user", "content": "u" },
            { "role": "tool", "tool_call_id": "a", "content": "1" },
        ]))
        .unwrap_err();
        assert!(e.contains("no assistant tool call precedes"), "{e}");
        let e = check(json!([
            { "role": "assistant", "tool_calls": [call("a", json!("{}"))] },
            { "role": "tool", "tool_call_id": "zzz", "content": "1" },
        ]))
        .unwrap_err();
        assert!(e.contains("zzz"), "{e}");
        let e = check(json!([
            { "role": "assistant", "tool_calls": [call("a", json!("{}"))] },
            { "role": "tool", "tool_call_id": "a", "content": "1" },
            { "role": "tool", "tool_call_id": "a", "content": "1" },
        ]))
        .unwrap_err();
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn rejects_bad_call_shapes() {
        let e = check(json!([
            { "role": "assistant", "tool_calls": [call("a", json!({"x": 1}))] },
            { "role": "tool", "tool_call_id": "a", "content": "1" },
        ]))
        .unwrap_err();
        assert!(e.contains("arguments must be a string"), "{e}");
        for (bad, why) in [
            (r#"{"x":"#.to_string(), "not valid JSON"),
            (
                r#"{"x":"\ud800"}"#.to_string(),
                "not valid JSON (unexpected end of hex escape",
            ),
            (
                format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200)),
                "recursion limit",
            ),
            ("[1]".to_string(), "not a JSON object"),
        ] {
            let e = check(json!([
                { "role": "assistant", "tool_calls": [call("a", json!(bad))] },
                { "role": "tool", "tool_call_id": "a", "content": "1" },
            ]))
            .unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let e =
            check(json!([{ "role": "assistant", "content": "x", "tool_calls": [] }])).unwrap_err();
        assert!(e.contains("empty array"), "{e}");
    }
}
