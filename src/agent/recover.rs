//! Recovery of tool calls a model wrote into its text instead of the
//! `tool_calls` field (opt-in: [`Configurator::recover_text_tool_calls`](crate::Configurator::recover_text_tool_calls)).
//!
//! Small local models, or a server whose chat template does not parse their
//! tool-call syntax, leave calls in the content. Three shapes are recognised:
//!
//! - `<tool_call>{"name": "..", "arguments": {..}}</tool_call>` (Hermes, Qwen),
//!   any number of them;
//! - `<function=name>{..}</function>` (Llama 3.x), any number of them;
//! - the whole content being one JSON object `{"name": .., "arguments": ..}`
//!   (also `"parameters"`), optionally in a Markdown code fence.
//!
//! A call is accepted only when its name is an offered tool and its arguments
//! validate against that tool's schema; if any candidate fails, nothing is
//! recovered (the text stays an answer). Recovered calls get ids
//! `recovered_<n>` and are recorded in the history as proper tool calls, with
//! the text around them kept as the message content.

use std::sync::Arc;

use serde_json::Value;

use crate::{Tool, ToolCall};

/// What [`recover`] is, held by the loop's options when switched on.
pub(crate) type Recover = fn(&str, &[Arc<dyn Tool>]) -> Option<(String, Vec<ToolCall>)>;

/// The recovered calls and the remaining text, or `None`.
pub(crate) fn recover(content: &str, tools: &[Arc<dyn Tool>]) -> Option<(String, Vec<ToolCall>)> {
    let (rest, candidates) = tagged(content, "<tool_call>", "</tool_call>", |inner| {
        let v: Value = serde_json::from_str(inner.trim()).ok()?;
        name_and_args(&v)
    })
    .or_else(|| {
        tagged(content, "<function=", "</function>", |inner| {
            let (name, body) = inner.split_once('>')?;
            let body = body.trim();
            let args = if body.is_empty() {
                Value::Object(serde_json::Map::new())
            } else {
                serde_json::from_str(body).ok()?
            };
            Some((name.trim().to_string(), args))
        })
    })
    .or_else(|| {
        let v: Value = serde_json::from_str(strip_fence(content.trim())).ok()?;
        Some((String::new(), vec![name_and_args(&v)?]))
    })?;
    let mut calls = Vec::with_capacity(candidates.len());
    for (i, (name, args)) in candidates.into_iter().enumerate() {
        let tool = tools.iter().find(|t| t.name() == name)?;
        tool.parameters().validate(&args).ok()?;
        calls.push(ToolCall::new(
            format!("recovered_{i}"),
            name,
            args.to_string(),
        ));
    }
    log::debug!("recovered {} tool call(s) from message text", calls.len());
    Some((rest, calls))
}

fn name_and_args(v: &Value) -> Option<(String, Value)> {
    let name = v.get("name")?.as_str()?.to_string();
    let args = v
        .get("arguments")
        .or_else(|| v.get("parameters"))
        .cloned()
        .unwrap_or(Value::Null);
    // Some models send the arguments as a JSON string.
    let args = match args {
        Value::String(s) => serde_json::from_str(&s).ok()?,
        Value::Null => Value::Object(serde_json::Map::new()),
        other => other,
    };
    Some((name, args))
}

type Candidate = (String, Value);

/// Every `open ... close` block parsed by `parse`; `None` when there is none
/// or one does not parse.
fn tagged(
    content: &str,
    open: &str,
    close: &str,
    parse: impl Fn(&str) -> Option<Candidate>,
) -> Option<(String, Vec<Candidate>)> {
    let mut rest = String::new();
    let mut found = Vec::new();
    let mut s = content;
    while let Some(start) = s.find(open) {
        rest.push_str(&s[..start]);
        let after = &s[start + open.len()..];
        let end = after.find(close).unwrap_or(after.len());
        found.push(parse(&after[..end])?);
        s = after.get(end + close.len()..).unwrap_or("");
    }
    rest.push_str(s);
    if found.is_empty() {
        None
    } else {
        Some((rest.trim().to_string(), found))
    }
}

fn strip_fence(s: &str) -> &str {
    let Some(body) = s.strip_prefix("```") else {
        return s;
    };
    let body = body.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
    body.strip_suffix("```").unwrap_or(body).trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{FnTool, Parameters};

    fn tools() -> Vec<Arc<dyn Tool>> {
        let calc = FnTool::new(
            "calculator",
            "calc",
            Parameters::builder()
                .required_string("expression", "e")
                .build(),
            |_, _| Ok(String::new()),
        );
        vec![Arc::new(calc)]
    }

    #[test]
    fn hermes_tags() {
        let text = "Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1+1\"}}\n</tool_call>";
        let (rest, calls) = recover(text, &tools()).unwrap();
        assert_eq!(rest, "Let me compute.");
        assert_eq!(calls[0].name, "calculator");
        assert_eq!(calls[0].id, "recovered_0");
        assert_eq!(
            serde_json::from_str::<Value>(&calls[0].arguments).unwrap()["expression"],
            "1+1"
        );
    }

    #[test]
    fn function_tags_and_bare_json() {
        let (_, calls) = recover(
            "<function=calculator>{\"expression\": \"2*3\"}</function>",
            &tools(),
        )
        .unwrap();
        assert_eq!(calls.len(), 1);
        let (rest, calls) = recover(
            "```json\n{\"name\":\"calculator\",\"parameters\":{\"expression\":\"4\"}}\n```",
            &tools(),
        )
        .unwrap();
        assert_eq!(rest, "");
        assert_eq!(calls[0].name, "calculator");
    }

    #[test]
    fn unknown_names_and_prose_are_left_alone() {
        assert!(
            recover(
                "<tool_call>{\"name\":\"rm\",\"arguments\":{}}</tool_call>",
                &tools()
            )
            .is_none()
        );
        assert!(recover("The answer is 4.", &tools()).is_none());
        assert!(recover("{\"name\": \"Bob\"}", &tools()).is_none());
        assert!(recover("<tool_call>{broken</tool_call>", &tools()).is_none());
    }
}
