//! Strict-mode checks of an OpenAI Responses request: what the API answers
//! 400 to. See the [module docs](super#strict-mode).

use std::collections::HashSet;

use serde_json::Value;

use super::strict_common::{check_arguments, object_with_model};

/// `Ok` if the Responses API would accept `body`; otherwise why not.
pub(super) fn validate(body: Option<&Value>) -> Result<(), String> {
    let body = object_with_model(body)?;
    super::strict_search::responses(body)?;
    let items = match body.get("input") {
        Some(Value::String(_)) => return Ok(()),
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) => return Err("`input` must not be empty".into()),
        Some(_) => return Err("`input` must be a string or an array of items".into()),
        None => return Err("`input` is required".into()),
    };
    // With `previous_response_id` the calls live on the server.
    let chained = body
        .get("previous_response_id")
        .is_some_and(|v| !v.is_null());
    let mut calls: Vec<(&str, usize)> = Vec::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        match item["type"].as_str() {
            Some("function_call") => {
                let Some(id) = item["call_id"].as_str() else {
                    return Err(format!("{at}: function_call without a string `call_id`"));
                };
                if item["name"].as_str().is_none() {
                    return Err(format!("{at}: function_call without a string `name`"));
                }
                let Some(args) = item["arguments"].as_str() else {
                    return Err(format!("{at}.arguments must be a string (JSON text)"));
                };
                check_arguments(&format!("{at}.arguments"), args)?;
                if calls.iter().any(|(c, _)| *c == id) {
                    return Err(format!("{at}: duplicate function_call call_id `{id}`"));
                }
                calls.push((id, i));
            }
            Some("function_call_output") => {
                let Some(id) = item["call_id"].as_str() else {
                    return Err(format!(
                        "{at}: function_call_output without a string `call_id`"
                    ));
                };
                if !chained && !calls.iter().any(|(c, _)| *c == id) {
                    return Err(format!(
                        "{at}: no function_call found for function_call_output with call_id `{id}`"
                    ));
                }
                if !answered.insert(id) {
                    return Err(format!("{at}: call_id `{id}` answered twice"));
                }
            }
            Some("message") | None => {
                let role = item["role"].as_str().unwrap_or("");
                if !matches!(role, "user" | "assistant" | "system" | "developer") {
                    return Err(format!(
                        "{at}.role {:?} is not user, assistant, system or developer",
                        item["role"]
                    ));
                }
            }
            // Reasoning items and the rest: the server judges their content.
            Some(_) => {}
        }
    }
    let missing: Vec<String> = calls
        .iter()
        .filter(|(id, _)| !answered.contains(id))
        .map(|(id, i)| format!("{id} (input[{i}])"))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "no tool output found for function call(s) {}",
            missing.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_must_match_calls() {
        let call =
            json!({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"});
        let out = |id: &str| json!({"type": "function_call_output", "call_id": id, "output": "1"});
        let body = |items: Value| json!({"model": "m", "input": items});
        validate(Some(&body(
            json!([{"role": "user", "content": "q"}, call, out("c1")]),
        )))
        .unwrap();
        let e = validate(Some(&body(json!([call, out("zz")])))).unwrap_err();
        assert!(e.contains("zz"), "{e}");
        let e = validate(Some(&body(json!([call])))).unwrap_err();
        assert!(e.contains("no tool output found"), "{e}");
        let e = validate(Some(&body(json!([call, out("c1"), out("c1")])))).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let mut chained = body(json!([out("c0")]));
        chained["previous_response_id"] = json!("resp_1");
        validate(Some(&chained)).unwrap();
        assert!(
            validate(Some(&json!({"input": "q"})))
                .unwrap_err()
                .contains("model")
        );
    }
}
