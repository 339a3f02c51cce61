//! What the strict checks of every API share: the body's `model`, and a
//! call's arguments as JSON text.

use serde_json::Value;

/// The body as an object with a non-empty string `model`.
pub(super) fn object_with_model(
    body: Option<&Value>,
) -> Result<&serde_json::Map<String, Value>, String> {
    let Some(body) = body else {
        return Err("request body is not valid JSON".into());
    };
    let Some(body) = body.as_object() else {
        return Err("request body must be a JSON object".into());
    };
    match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => Ok(body),
        Some(_) => Err("`model` must be a non-empty string".into()),
        None => Err("`model` is required".into()),
    }
}

/// `Ok` if `text`, a call's arguments, is one JSON object serde_json
/// parses: what llama.cpp does with it (and what a strict parser rejects:
/// invalid JSON, a lone surrogate escape, nesting past 128 levels).
pub(super) fn check_arguments(at: &str, text: &str) -> Result<(), String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(_)) => Ok(()),
        Ok(_) => Err(format!("{at} is not a JSON object")),
        Err(e) => Err(format!(
            "{at} is not valid JSON ({e}): {}",
            crate::util::excerpt(text, 80)
        )),
    }
}
