//! Strict-mode checks of an Anthropic Messages request: what the API
//! answers 400 to. See the [module docs](super#strict-mode).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::strict_common::object_with_model;

/// `Ok` if the Messages API would accept `body`; otherwise why not.
pub(super) fn validate(body: Option<&Value>) -> Result<(), String> {
    let body = object_with_model(body)?;
    super::strict_search::anthropic(body)?;
    match body.get("max_tokens") {
        Some(n) if n.as_u64().is_some_and(|n| n >= 1) => {}
        Some(_) => return Err("`max_tokens` must be a positive integer".into()),
        None => return Err("`max_tokens` is required".into()),
    }
    // Chat completions' structured-output field is not one of Anthropic's
    // (it answers "Extra inputs are not permitted"); its own is
    // `output_config.format`, a JSON schema.
    if body.contains_key("response_format") {
        return Err(
            "`response_format` is not a Messages API field (use `output_config.format`)".into(),
        );
    }
    if let Some(format) = body.get("output_config").and_then(|c| c.get("format"))
        && (format.get("type").and_then(Value::as_str) != Some("json_schema")
            || !format.get("schema").is_some_and(Value::is_object))
    {
        return Err(
            "`output_config.format` must be {\"type\": \"json_schema\", \"schema\": {..}}".into(),
        );
    }
    let messages = match body.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(Value::Array(_)) => return Err("`messages` must not be empty".into()),
        Some(_) => return Err("`messages` must be an array".into()),
        None => return Err("`messages` is required".into()),
    };
    let thinking = body
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        == Some("enabled");
    let mut previous: Option<&str> = None;
    // The tool_use ids of the assistant turn just before, to be answered.
    let mut calls: Vec<&str> = Vec::new();
    // Every tool_use id of the conversation: the API wants each once.
    let mut all: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let Some(m) = m.as_object() else {
            return Err(format!("messages[{i}] must be an object"));
        };
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(role, "user" | "assistant") {
            return Err(format!(
                "messages[{i}].role {:?} is not user or assistant (the system prompt is the top-level `system`)",
                m.get("role").unwrap_or(&Value::Null)
            ));
        }
        if previous == Some(role) {
            return Err(format!(
                "messages[{i}]: two {role} messages in a row (roles must alternate)"
            ));
        }
        previous = Some(role);
        let blocks = blocks(i, m)?;
        if role == "user" {
            answered(i, &calls, &blocks)?;
            calls.clear();
        } else {
            calls = tool_uses(i, &blocks)?;
            if let Some(id) = calls.iter().find(|id| !all.insert(id)) {
                return Err(format!(
                    "messages[{i}]: `tool_use` ids must be unique (`{id}` is used earlier)"
                ));
            }
            signed(i, &blocks)?;
        }
    }
    if !calls.is_empty() {
        return Err(format!(
            "messages[{}]: tool_use block(s) {} not answered: a user message with a \
             tool_result for each must follow",
            messages.len() - 1,
            calls.join(", ")
        ));
    }
    if thinking {
        thinking_sent_back(messages)?;
    }
    Ok(())
}

/// The content blocks of a message (a string is one text block).
fn blocks(i: usize, m: &Map<String, Value>) -> Result<Vec<&Value>, String> {
    match m.get("content") {
        Some(Value::String(_)) => Ok(Vec::new()),
        Some(Value::Array(b)) if !b.is_empty() => Ok(b.iter().collect()),
        Some(Value::Array(_)) => Err(format!("messages[{i}].content must not be empty")),
        _ => Err(format!(
            "messages[{i}].content must be a string or an array of blocks"
        )),
    }
}

/// The ids of the `tool_use` blocks of assistant message `i`, checked.
fn tool_uses<'a>(i: usize, blocks: &[&'a Value]) -> Result<Vec<&'a str>, String> {
    let mut ids = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        if b["type"] != "tool_use" {
            continue;
        }
        let at = format!("messages[{i}].content[{j}]");
        let Some(id) = b["id"].as_str() else {
            return Err(format!("{at}: tool_use without a string `id`"));
        };
        // The API's own pattern for the id.
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(format!(
                "{at}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
            ));
        }
        if b["name"].as_str().is_none() {
            return Err(format!("{at}: tool_use without a string `name`"));
        }
        if !b["input"].is_object() {
            return Err(format!("{at}.input must be a JSON object"));
        }
        if ids.contains(&id) {
            return Err(format!("{at}: duplicate tool_use id `{id}`"));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// Every thinking block of message `i` carries its signature.
fn signed(i: usize, blocks: &[&Value]) -> Result<(), String> {
    for (j, b) in blocks.iter().enumerate() {
        let ok = match b["type"].as_str() {
            Some("thinking") => b["signature"].as_str().is_some_and(|s| !s.is_empty()),
            Some("redacted_thinking") => b["data"].as_str().is_some(),
            _ => true,
        };
        if !ok {
            return Err(format!(
                "messages[{i}].content[{j}]: a thinking block must be sent back with its signature"
            ));
        }
    }
    Ok(())
}

/// User message `i` answers each of `calls` with a `tool_result`, the
/// results coming before any other block, and answers nothing else.
fn answered(i: usize, calls: &[&str], blocks: &[&Value]) -> Result<(), String> {
    let mut seen = HashSet::new();
    let mut other_seen = false;
    for (j, b) in blocks.iter().enumerate() {
        if b["type"] != "tool_result" {
            other_seen = true;
            continue;
        }
        let at = format!("messages[{i}].content[{j}]");
        let Some(id) = b["tool_use_id"].as_str() else {
            return Err(format!("{at}: tool_result without a string `tool_use_id`"));
        };
        if other_seen {
            return Err(format!(
                "{at}: tool_result blocks must come first in the user message"
            ));
        }
        if !calls.contains(&id) {
            return Err(format!(
                "{at}: tool_result for `{id}`, which is no tool_use of the message just before"
            ));
        }
        if !seen.insert(id) {
            return Err(format!("{at}: tool_use `{id}` answered twice"));
        }
    }
    let missing: Vec<&str> = calls
        .iter()
        .copied()
        .filter(|c| !seen.contains(c))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "messages[{i}]: tool_use block(s) {} of messages[{}] not answered by a tool_result \
             in this message",
            missing.join(", "),
            i.saturating_sub(1)
        ))
    }
}

/// With thinking enabled, a request that continues a tool loop (it ends
/// with tool results) sends the assistant turn that made the calls back
/// starting with its thinking block.
fn thinking_sent_back(messages: &[Value]) -> Result<(), String> {
    let n = messages.len();
    let ends_with_results = messages[n - 1]["content"]
        .as_array()
        .is_some_and(|b| b.iter().any(|b| b["type"] == "tool_result"));
    if !ends_with_results || n < 2 {
        return Ok(());
    }
    let first = &messages[n - 2]["content"][0]["type"];
    if first == "thinking" || first == "redacted_thinking" {
        Ok(())
    } else {
        Err(format!(
            "messages[{}]: with thinking enabled, the assistant message of an ongoing tool \
             loop must start with its thinking block",
            n - 2
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[allow(clippy::needless_pass_by_value, reason = "called with json! literals")]
    fn check(extra: Value, messages: Value) -> Result<(), String> {
        let mut body = json!({ "model": "m", "max_tokens": 16, "messages": messages });
        for (k, v) in extra.as_object().into_iter().flatten() {
            body[k] = v.clone();
        }
        validate(Some(&body))
    }

    fn round(thinking: bool) -> Value {
        let mut assistant = vec![json!({"type": "tool_use", "id": "t1", "name": "f", "input": {}})];
        if thinking {
            assistant.insert(
                0,
                json!({"type": "thinking", "thinking": "hm", "signature": "sig"}),
            );
        }
        json!([
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}]},
        ])
    }

    #[test]
    fn accepts_a_tool_round_and_rejects_broken_ones() {
        check(json!({}), round(false)).unwrap();
        let on = json!({"thinking": {"type": "enabled", "budget_tokens": 1024}});
        check(on.clone(), round(true)).unwrap();
        let e = check(on, round(false)).unwrap_err();
        assert!(e.contains("thinking block"), "{e}");
        let e = validate(Some(
            &json!({"model": "m", "messages": [{"role": "user", "content": "q"}]}),
        ))
        .unwrap_err();
        assert!(e.contains("max_tokens"), "{e}");
        let e = check(
            json!({}),
            json!([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
        )
        .unwrap_err();
        assert!(e.contains("alternate"), "{e}");
        let e = check(json!({}), json!([
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": "no result"},
        ]))
        .unwrap_err();
        assert!(e.contains("t1"), "{e}");
        let e = check(
            json!({}),
            json!([
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]},
                {"role": "user", "content": "again"},
            ]),
        )
        .unwrap_err();
        assert!(e.contains("signature"), "{e}");
        let e = check(json!({}), json!([{"role": "system", "content": "s"}])).unwrap_err();
        assert!(e.contains("top-level `system`"), "{e}");
    }
}
