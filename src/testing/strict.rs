//! Strict-mode validation of a request body: the checks a strict server
//! (OpenAI, Anthropic themselves) makes on the conversation's shape, so a
//! test fails when the agent sends a history a real server would reject.
//! Chat completions here; the other APIs in `strict_anthropic.rs`,
//! `strict_responses.rs` and `strict_gemini.rs`.

use std::collections::HashSet;

use serde_json::Value;

use super::strict_common::{check_arguments, object_with_model};
use crate::Api;

/// `Ok` if a strict server of `api` would accept `body`, sent to `path`;
/// otherwise why not.
pub(super) fn validate(api: Api, body: Option<&Value>, path: &str) -> Result<(), String> {
    // Gemini's settings are its own (`generationConfig`), checked there;
    // its model is in the path.
    if api == Api::Gemini {
        return super::strict_gemini::validate(body, path);
    }
    match api {
        Api::AnthropicMessages => super::strict_anthropic::validate(body),
        Api::OpenAiResponses => super::strict_responses::validate(body),
        _ => validate_chat(body),
    }?;
    match body.and_then(Value::as_object) {
        Some(body) => validate_settings(api, body),
        None => Ok(()),
    }
}

/// Fields of another API that `api` rejects as unknown.
fn foreign_fields(api: Api) -> &'static [&'static str] {
    match api {
        Api::AnthropicMessages => &[
            "stop",
            "seed",
            "max_completion_tokens",
            "reasoning_effort",
            "parallel_tool_calls",
        ],
        Api::OpenAiResponses => &[
            "max_tokens",
            "max_completion_tokens",
            "stop",
            "seed",
            "reasoning_effort",
            "response_format",
            "stream_options",
        ],
        _ => &["max_output_tokens", "stop_sequences", "output_config"],
    }
}

/// The sampling and steering fields (the ones [`crate::ModelSettings`]
/// maps to): each API's names, types and ranges.
/// A request body, as an object.
type Body = serde_json::Map<String, Value>;

fn validate_settings(api: Api, body: &Body) -> Result<(), String> {
    if let Some(k) = foreign_fields(api).iter().find(|k| body.contains_key(**k)) {
        return Err(format!("`{k}` is not a field of the {api:?} API"));
    }
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    for k in ["tool_choice", "parallel_tool_calls"] {
        if body.contains_key(k) && !has_tools && api != Api::AnthropicMessages {
            return Err(format!("`{k}` is only allowed when `tools` are given"));
        }
    }
    number(body, "top_p", 1.0)?;
    number(
        body,
        "temperature",
        if api == Api::AnthropicMessages {
            1.0
        } else {
            2.0
        },
    )?;
    boolean(body, "parallel_tool_calls")?;
    match api {
        Api::AnthropicMessages => anthropic_settings(body),
        Api::OpenAiResponses => responses_settings(body),
        _ => chat_settings(body),
    }
}

/// The efforts OpenAI's APIs name.
const EFFORTS: [&str; 6] = ["none", "minimal", "low", "medium", "high", "xhigh"];

fn number(body: &Body, k: &str, max: f64) -> Result<(), String> {
    match body.get(k) {
        None => Ok(()),
        Some(v) if v.as_f64().is_some_and(|x| (0.0..=max).contains(&x)) => Ok(()),
        Some(v) => Err(format!("`{k}` must be a number from 0 to {max}, got {v}")),
    }
}

fn positive(body: &Body, k: &str) -> Result<(), String> {
    match body.get(k) {
        None => Ok(()),
        Some(v) if v.as_u64().is_some_and(|n| n >= 1) => Ok(()),
        Some(v) => Err(format!("`{k}` must be a positive integer, got {v}")),
    }
}

fn boolean(body: &Body, k: &str) -> Result<(), String> {
    match body.get(k) {
        None | Some(Value::Bool(_)) => Ok(()),
        Some(v) => Err(format!("`{k}` must be a boolean, got {v}")),
    }
}

fn one_of(at: &str, v: Option<&Value>, allowed: &[&str]) -> Result<(), String> {
    match v {
        None => Ok(()),
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(()),
        Some(v) => Err(format!("`{at}` must be one of {allowed:?}, got {v}")),
    }
}

fn anthropic_settings(body: &Body) -> Result<(), String> {
    if let Some(v) = body.get("stop_sequences")
        && !v.as_array().is_some_and(|a| a.iter().all(Value::is_string))
    {
        return Err(format!(
            "`stop_sequences` must be an array of strings, got {v}"
        ));
    }
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    anthropic_tool_choice(body.get("tool_choice"), has_tools)?;
    if let Some(t) = body.get("thinking") {
        let max = body.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
        match (
            t.get("type").and_then(Value::as_str),
            t.get("budget_tokens").and_then(Value::as_u64),
        ) {
            (Some("disabled"), _) => {}
            (Some("enabled"), Some(b)) if b >= 1024 && b < max => thinking_rules(body)?,
            _ => {
                return Err(format!(
                    "`thinking` must be {{\"type\":\"enabled\",\"budget_tokens\":n}} \
                         with 1024 <= n < max_tokens ({max}), got {t}"
                ));
            }
        }
    }
    if let Some(c) = body.get("output_config") {
        one_of(
            "output_config.effort",
            c.get("effort"),
            &["low", "medium", "high", "max"],
        )?;
        if let Some(f) = c.get("format")
            && (f.get("type") != Some(&Value::from("json_schema"))
                || !f.get("schema").is_some_and(Value::is_object))
        {
            return Err(format!(
                "`output_config.format` must be {{\"type\":\"json_schema\",\"schema\":{{..}}}}, got {f}"
            ));
        }
    }
    Ok(())
}

fn responses_settings(body: &Body) -> Result<(), String> {
    positive(body, "max_output_tokens")?;
    openai_tool_choice(body, "/name", r#"{"type":"function","name":..}"#)?;
    if let Some(r) = body.get("reasoning") {
        one_of("reasoning.effort", r.get("effort"), &EFFORTS)?;
    }
    if let Some(f) = body.get("text").and_then(|t| t.get("format")) {
        let ok = match f.get("type").and_then(Value::as_str) {
            Some("json_schema") => {
                f.get("name").is_some_and(Value::is_string)
                    && f.get("schema").is_some_and(Value::is_object)
            }
            Some("json_object" | "text") => true,
            _ => false,
        };
        if !ok {
            return Err(format!("`text.format` is not a valid format: {f}"));
        }
    }
    Ok(())
}

fn chat_settings(body: &Body) -> Result<(), String> {
    if body.contains_key("max_tokens") && body.contains_key("max_completion_tokens") {
        return Err("`max_tokens` and `max_completion_tokens` are exclusive".into());
    }
    positive(body, "max_tokens")?;
    positive(body, "max_completion_tokens")?;
    match body.get("stop") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(a)) if a.len() <= 4 && a.iter().all(Value::is_string) => {}
        Some(v) => {
            return Err(format!(
                "`stop` must be a string or up to 4 strings, got {v}"
            ));
        }
    }
    if let Some(v) = body.get("seed")
        && !(v.is_i64() || v.is_u64())
    {
        return Err(format!("`seed` must be an integer, got {v}"));
    }
    openai_tool_choice(
        body,
        "/function/name",
        r#"{"type":"function","function":{"name":..}}"#,
    )?;
    one_of("reasoning_effort", body.get("reasoning_effort"), &EFFORTS)?;
    if let Some(f) = body.get("response_format") {
        let ok = match f.get("type").and_then(Value::as_str) {
            Some("json_schema") => f.pointer("/json_schema/name").is_some_and(Value::is_string),
            Some("json_object" | "text") => true,
            _ => false,
        };
        if !ok {
            return Err(format!("`response_format` is not a valid format: {f}"));
        }
    }
    Ok(())
}

/// What Anthropic refuses beside extended thinking: a forced tool
/// (`any`, `tool`), a temperature other than 1, a `top_p` below 0.95.
/// OpenAI's `tool_choice` (chat completions and Responses): `auto`,
/// `none`, `required`, or a named function, whose name sits at `name_at`
/// (`named` is that shape, for the error).
fn openai_tool_choice(body: &Body, name_at: &str, named: &str) -> Result<(), String> {
    match body.get("tool_choice") {
        None => Ok(()),
        Some(choice @ Value::String(_)) => {
            one_of("tool_choice", Some(choice), &["auto", "none", "required"])
        }
        Some(c)
            if c.get("type") == Some(&Value::from("function"))
                && c.pointer(name_at).is_some_and(Value::is_string) =>
        {
            Ok(())
        }
        Some(c) => Err(format!(
            "`tool_choice` must be auto, none, required or {named}, got {c}"
        )),
    }
}

fn thinking_rules(body: &Body) -> Result<(), String> {
    let forced = body
        .get("tool_choice")
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t == "any" || t == "tool");
    if forced {
        return Err("thinking may not be enabled when `tool_choice` forces tool use".into());
    }
    if let Some(t) = body.get("temperature")
        && t.as_f64() != Some(1.0)
    {
        return Err(format!(
            "`temperature` may only be 1 when thinking is enabled, got {t}"
        ));
    }
    if let Some(p) = body.get("top_p")
        && p.as_f64().is_none_or(|p| p < 0.95)
    {
        return Err(format!(
            "`top_p` must be from 0.95 to 1 when thinking is enabled, got {p}"
        ));
    }
    Ok(())
}

/// Anthropic's `tool_choice`: an object of type `auto`, `any`, `tool`
/// (with a `name`) or `none`, only with tools (but `none`).
fn anthropic_tool_choice(choice: Option<&Value>, has_tools: bool) -> Result<(), String> {
    let Some(c) = choice else { return Ok(()) };
    let kind = c.get("type").and_then(Value::as_str);
    let ok = match kind {
        Some("auto" | "any" | "none") => c.get("name").is_none(),
        Some("tool") => c.get("name").is_some_and(Value::is_string),
        _ => false,
    };
    if !ok {
        return Err(format!(
            "`tool_choice` must be {{\"type\": auto|any|tool|none}} (a name for tool), got {c}"
        ));
    }
    if kind != Some("none") && !has_tools {
        return Err("`tool_choice` is only allowed when `tools` are given".into());
    }
    match c.get("disable_parallel_tool_use") {
        None | Some(Value::Bool(_)) => Ok(()),
        Some(v) => Err(format!(
            "`tool_choice.disable_parallel_tool_use` must be a boolean, got {v}"
        )),
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

    /// The checks of a body sent to a path that names no model.
    fn validate(api: Api, body: Option<&Value>) -> Result<(), String> {
        super::validate(api, body, "")
    }

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

    #[test]
    fn settings_fields_are_checked_per_api() {
        let tools = json!([{ "type": "function", "function": { "name": "f" } }]);
        let chat = |extra: Value| {
            let mut b = json!({ "model": "m", "messages": [{ "role": "user", "content": "u" }], "tools": tools });
            b.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            validate(Api::ChatCompletions, Some(&b))
        };
        chat(
            json!({ "temperature": 0, "stop": ["a"], "seed": 1, "tool_choice": "required",
                     "parallel_tool_calls": false, "reasoning_effort": "low", "max_tokens": 5 }),
        )
        .unwrap();
        for (bad, says) in [
            (json!({ "max_output_tokens": 5 }), "not a field"),
            (json!({ "temperature": 3 }), "`temperature`"),
            (json!({ "stop": ["a", "b", "c", "d", "e"] }), "`stop`"),
            (json!({ "tool_choice": { "type": "any" } }), "`tool_choice`"),
            (
                json!({ "max_tokens": 1, "max_completion_tokens": 1 }),
                "exclusive",
            ),
            (json!({ "reasoning_effort": "huge" }), "`reasoning_effort`"),
        ] {
            let e = chat(bad.clone()).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let no_tools = json!({ "model": "m", "messages": [{ "role": "user", "content": "u" }],
                               "tool_choice": "auto" });
        assert!(
            validate(Api::ChatCompletions, Some(&no_tools))
                .unwrap_err()
                .contains("only allowed")
        );
        let claude = |extra: Value| {
            let mut b = json!({ "model": "m", "max_tokens": 4096,
                                "messages": [{ "role": "user", "content": "u" }],
                                "tools": [{ "name": "f", "input_schema": { "type": "object" } }] });
            b.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            validate(Api::AnthropicMessages, Some(&b))
        };
        claude(
            json!({ "tool_choice": { "type": "auto", "disable_parallel_tool_use": true },
                       "thinking": { "type": "enabled", "budget_tokens": 2048 },
                       "temperature": 1, "top_p": 0.95,
                       "output_config": { "effort": "low" }, "stop_sequences": ["x"] }),
        )
        .unwrap();
        let thinking = json!({ "type": "enabled", "budget_tokens": 2048 });
        for (extra, says) in [
            (
                json!({ "tool_choice": { "type": "any" } }),
                "forces tool use",
            ),
            (json!({ "temperature": 0.5 }), "`temperature`"),
            (json!({ "top_p": 0.5 }), "`top_p`"),
        ] {
            let mut extra = extra;
            extra["thinking"] = thinking.clone();
            let e = claude(extra).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        for bad in [
            json!({ "tool_choice": "auto" }),
            json!({ "seed": 1 }),
            json!({ "temperature": 1.5 }),
            json!({ "thinking": { "type": "enabled", "budget_tokens": 8000 } }),
            json!({ "output_config": { "effort": "minimal" } }),
        ] {
            assert!(claude(bad.clone()).is_err(), "{bad}");
        }
        let responses = |extra: Value| {
            let mut b = json!({ "model": "m", "input": "hi" });
            b.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            validate(Api::OpenAiResponses, Some(&b))
        };
        responses(json!({ "max_output_tokens": 5, "reasoning": { "effort": "low" } })).unwrap();
        for bad in [
            json!({ "max_tokens": 5 }),
            json!({ "stop": "x" }),
            json!({ "seed": 1 }),
        ] {
            assert!(
                responses(bad.clone()).unwrap_err().contains("not a field"),
                "{bad}"
            );
        }
    }
}
