//! Strict-mode checks of a Gemini `generateContent` request: what the API
//! answers 400 (`INVALID_ARGUMENT`) to. See the
//! [module docs](super#strict-mode).

use serde_json::{Map, Value};

use super::strict_common::check_arguments;

type Body = Map<String, Value>;

/// The top-level fields of a `generateContent` body.
const FIELDS: [&str; 7] = [
    "contents",
    "systemInstruction",
    "tools",
    "toolConfig",
    "generationConfig",
    "safetySettings",
    "cachedContent",
];

/// The `generationConfig` fields pikuri may send, and a few more the API
/// has.
const CONFIG_FIELDS: [&str; 15] = [
    "temperature",
    "topP",
    "topK",
    "maxOutputTokens",
    "stopSequences",
    "seed",
    "candidateCount",
    "presencePenalty",
    "frequencyPenalty",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseModalities",
    "thinkingConfig",
    "mediaResolution",
];

/// `Ok` if Gemini would accept `body`, sent to `path` (which names the
/// model); otherwise why not.
pub(super) fn validate(body: Option<&Value>, path: &str) -> Result<(), String> {
    let body = body
        .ok_or("request body is not valid JSON")?
        .as_object()
        .ok_or("request body must be a JSON object")?;
    if let Some(k) = body.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!("Invalid JSON payload received. Unknown name {k:?}"));
    }
    if let Some(system) = body.get("systemInstruction") {
        parts("systemInstruction", system)?;
    }
    contents(body)?;
    if signs_calls(path) {
        signed_calls(body)?;
    }
    tools(body)?;
    if let Some(config) = body.get("generationConfig") {
        generation_config(config)?;
    }
    Ok(())
}

/// The parts of a content, each with exactly one kind of data.
fn parts<'v>(at: &str, content: &'v Value) -> Result<&'v [Value], String> {
    let parts = match content.get("parts") {
        Some(Value::Array(p)) if !p.is_empty() => p,
        _ => return Err(format!("{at}.parts must be a non-empty array")),
    };
    for (i, p) in parts.iter().enumerate() {
        let at = format!("{at}.parts[{i}]");
        let kinds = [
            "text",
            "inlineData",
            "fileData",
            "functionCall",
            "functionResponse",
        ];
        let n = kinds.iter().filter(|k| p.get(**k).is_some()).count();
        if n != 1 {
            return Err(format!("{at} must have exactly one of {kinds:?}"));
        }
        if p.get("text").is_some_and(|t| !t.is_string()) {
            return Err(format!("{at}.text must be a string"));
        }
        if let Some(sig) = p.get("thoughtSignature")
            && sig.as_str().is_none_or(str::is_empty)
        {
            return Err(format!("{at}.thoughtSignature must be a non-empty string"));
        }
        if let Some(d) = p.get("inlineData")
            && !(d["mimeType"].is_string() && d["data"].is_string())
        {
            return Err(format!("{at}.inlineData needs mimeType and data"));
        }
        if let Some(f) = p.get("functionCall") {
            name(&format!("{at}.functionCall"), f)?;
            check_arguments(&format!("{at}.functionCall.args"), &f["args"].to_string())?;
        }
        if let Some(f) = p.get("functionResponse") {
            name(&format!("{at}.functionResponse"), f)?;
            if !f["response"].is_object() {
                return Err(format!("{at}.functionResponse.response must be an object"));
            }
        }
    }
    Ok(parts)
}

fn name(at: &str, v: &Value) -> Result<(), String> {
    match v.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => Ok(()),
        _ => Err(format!("{at}.name must be a non-empty string")),
    }
}

/// `contents`: user and model turns; each model turn's calls answered, in
/// the next turn, by as many function responses of the same names (and
/// ids, where the call had one).
fn contents(body: &Body) -> Result<(), String> {
    let contents = match body.get("contents") {
        Some(Value::Array(c)) if !c.is_empty() => c,
        Some(_) => return Err("`contents` must be a non-empty array".into()),
        None => return Err("`contents` is required".into()),
    };
    let mut calls: Vec<&Value> = Vec::new();
    for (i, c) in contents.iter().enumerate() {
        let at = format!("contents[{i}]");
        let role = c.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(role, "user" | "model") {
            return Err(format!("{at}.role must be user or model, got {role:?}"));
        }
        let parts = parts(&at, c)?;
        let responses: Vec<&Value> = parts
            .iter()
            .filter_map(|p| p.get("functionResponse"))
            .collect();
        if !calls.is_empty() {
            if role != "user" || responses.len() != calls.len() {
                return Err(format!(
                    "Please ensure that the number of function response parts is equal to the \
                     number of function call parts of the function call turn ({at})"
                ));
            }
            for (call, resp) in calls.iter().zip(&responses) {
                if call["name"] != resp["name"]
                    || (call.get("id").is_some() && call.get("id") != resp.get("id"))
                {
                    return Err(format!(
                        "{at}: the function response {} does not answer the call {}",
                        resp["name"], call["name"]
                    ));
                }
            }
        } else if !responses.is_empty() {
            return Err(format!(
                "{at}: a function response without a function call turn"
            ));
        }
        calls = parts.iter().filter_map(|p| p.get("functionCall")).collect();
        if role == "user" && !calls.is_empty() {
            return Err(format!("{at}: a function call in a user turn"));
        }
    }
    if !calls.is_empty() {
        return Err("the last turn's function calls are not answered".into());
    }
    Ok(())
}

/// Whether the model in `path` (`/models/{model}:...`) is one that
/// requires signed calls: Gemini 3 and later.
fn signs_calls(path: &str) -> bool {
    path.split("/models/")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .is_some_and(|model| model.starts_with("gemini-3"))
}

/// Gemini 3's rule: in the current turn (the model turns after the last
/// user turn that is not only function responses), the first call of each
/// step carries a `thoughtSignature` (the model's, or the documented skip
/// value for a call another model wrote). Earlier turns are not checked.
fn signed_calls(body: &Body) -> Result<(), String> {
    let contents = body["contents"].as_array().map_or(&[][..], Vec::as_slice);
    let is_message = |c: &Value| {
        c["role"] == "user"
            && c["parts"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p.get("functionResponse").is_none()))
    };
    let start = contents.iter().rposition(is_message).map_or(0, |i| i + 1);
    for (i, c) in contents.iter().enumerate().skip(start) {
        let first_call = c["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p.get("functionCall").is_some());
        if let Some(p) = first_call
            && p.get("thoughtSignature")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            return Err(format!(
                "Function call is missing a thought_signature in functionCall parts \
                 (contents[{i}]): required for the calls of the current turn"
            ));
        }
    }
    Ok(())
}

/// `tools` of `functionDeclarations`, `toolConfig` only with them.
fn tools(body: &Body) -> Result<(), String> {
    let mut names = Vec::new();
    for (i, t) in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, d) in t["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("tools[{i}].functionDeclarations[{j}]");
            name(&at, d)?;
            if d.get("parameters").is_some() && d.get("parametersJsonSchema").is_some() {
                return Err(format!(
                    "{at}: parameters and parametersJsonSchema are exclusive"
                ));
            }
            names.push(d["name"].as_str().unwrap_or(""));
        }
    }
    let Some(tc) = body.get("toolConfig") else {
        return Ok(());
    };
    let fc = &tc["functionCallingConfig"];
    match fc["mode"].as_str() {
        Some("AUTO" | "ANY" | "NONE" | "VALIDATED") => {}
        _ => {
            return Err(format!(
                "toolConfig.functionCallingConfig.mode is invalid: {fc}"
            ));
        }
    }
    if let Some(allowed) = fc.get("allowedFunctionNames") {
        if fc["mode"] != "ANY" && fc["mode"] != "VALIDATED" {
            return Err("allowedFunctionNames needs mode ANY".into());
        }
        let known = allowed
            .as_array()
            .is_some_and(|a| a.iter().all(|n| names.contains(&n.as_str().unwrap_or("-"))));
        if !known {
            return Err(format!(
                "allowedFunctionNames names no declared function: {allowed}"
            ));
        }
    }
    Ok(())
}

fn generation_config(config: &Value) -> Result<(), String> {
    let config = config
        .as_object()
        .ok_or("generationConfig must be an object")?;
    if let Some(k) = config.keys().find(|k| !CONFIG_FIELDS.contains(&k.as_str())) {
        return Err(format!("Unknown name {k:?} at 'generation_config'"));
    }
    let number = |k: &str, max: f64| match config.get(k) {
        None => Ok(()),
        Some(v) if v.as_f64().is_some_and(|x| (0.0..=max).contains(&x)) => Ok(()),
        Some(v) => Err(format!(
            "generationConfig.{k} must be from 0 to {max}, got {v}"
        )),
    };
    number("temperature", 2.0)?;
    number("topP", 1.0)?;
    if let Some(v) = config.get("maxOutputTokens")
        && v.as_u64().is_none_or(|n| n < 1)
    {
        return Err(format!(
            "generationConfig.maxOutputTokens must be positive, got {v}"
        ));
    }
    if let Some(v) = config.get("seed")
        && v.as_i64().is_none_or(|n| i32::try_from(n).is_err())
    {
        return Err(format!("generationConfig.seed must be an int32, got {v}"));
    }
    if let Some(v) = config.get("stopSequences")
        && !v
            .as_array()
            .is_some_and(|a| a.len() <= 5 && a.iter().all(Value::is_string))
    {
        return Err(format!(
            "generationConfig.stopSequences: at most 5 strings, got {v}"
        ));
    }
    let schema = config.contains_key("responseSchema") || config.contains_key("responseJsonSchema");
    if config.contains_key("responseSchema") && config.contains_key("responseJsonSchema") {
        return Err("responseSchema and responseJsonSchema are exclusive".into());
    }
    if schema && config.get("responseMimeType").and_then(Value::as_str) != Some("application/json")
    {
        return Err("a response schema needs responseMimeType application/json".into());
    }
    if let Some(t) = config.get("thinkingConfig") {
        if t.get("thinkingBudget")
            .is_some_and(|b| b.as_i64().is_none())
        {
            return Err(format!(
                "thinkingConfig.thinkingBudget must be an integer: {t}"
            ));
        }
        let levels = ["minimal", "low", "medium", "high"];
        if !t
            .get("thinkingLevel")
            .is_none_or(|l| l.as_str().is_some_and(|l| levels.contains(&l)))
        {
            return Err(format!(
                "thinkingConfig.thinkingLevel must be one of {levels:?}: {t}"
            ));
        }
        if !t.get("includeThoughts").is_none_or(Value::is_boolean) {
            return Err(format!(
                "thinkingConfig.includeThoughts must be a boolean: {t}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(body: &Value) -> Result<(), String> {
        validate(Some(body), "/v1beta/models/m:generateContent")
    }

    #[test]
    fn gemini_3_wants_the_current_turns_calls_signed() {
        let user = json!({"role": "user", "parts": [{"text": "hi"}]});
        let call = |sig: Option<&str>| {
            let mut p = json!({"functionCall": {"name": "f", "args": {}}});
            if let Some(s) = sig {
                p["thoughtSignature"] = json!(s);
            }
            json!({"role": "model", "parts": [p, {"functionCall": {"name": "f", "args": {}}}]})
        };
        let answer = json!({"role": "user", "parts": [
            {"functionResponse": {"name": "f", "response": {}}},
            {"functionResponse": {"name": "f", "response": {}}}]});
        let body = |first: Option<&str>, second: Option<&str>| json!({"contents": [user, call(first), answer, user, call(second), answer]});
        let g3 = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse";
        let g25 = "/v1beta/models/gemini-2.5-flash:generateContent";
        // An earlier turn's unsigned call is fine; the current turn's is not.
        assert_eq!(validate(Some(&body(None, Some("s"))), g3), Ok(()));
        assert_eq!(
            validate(
                Some(&body(None, Some("skip_thought_signature_validator"))),
                g3
            ),
            Ok(())
        );
        let err = validate(Some(&body(Some("s"), None)), g3).unwrap_err();
        assert!(err.contains("missing a thought_signature"), "{err}");
        assert!(err.contains("contents[4]"), "{err}");
        // Older models do not ask.
        assert_eq!(validate(Some(&body(None, None)), g25), Ok(()));
    }

    #[test]
    fn what_gemini_rejects() {
        let user = json!({"role": "user", "parts": [{"text": "hi"}]});
        assert_eq!(check(&json!({"contents": [user]})), Ok(()));
        for (body, why) in [
            (json!({"contents": []}), "non-empty"),
            (
                json!({"contents": [user], "model": "m"}),
                "Unknown name \"model\"",
            ),
            (
                json!({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}),
                "role",
            ),
            (
                json!({"contents": [{"role": "user", "parts": []}]}),
                "parts",
            ),
            (
                json!({"contents": [{"role": "user", "parts": [{"text": "x", "inlineData": {}}]}]}),
                "exactly one",
            ),
            (
                json!({"contents": [user, {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}]}),
                "not answered",
            ),
            (
                json!({"contents": [user, {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}, "id": "a"}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}, "id": "b"}}]}]}),
                "does not answer",
            ),
            (
                json!({"contents": [user], "generationConfig": {"temperature": 3}}),
                "temperature",
            ),
            (
                json!({"contents": [user], "generationConfig": {"max_tokens": 3}}),
                "Unknown name",
            ),
            (
                json!({"contents": [user], "generationConfig": {"responseJsonSchema": {}}}),
                "responseMimeType",
            ),
            (
                json!({"contents": [user], "generationConfig": {"thinkingConfig": {"thinkingLevel": "max"}}}),
                "thinkingLevel",
            ),
            (
                json!({"contents": [user], "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}}),
                "no declared",
            ),
        ] {
            let err = check(&body).unwrap_err();
            assert!(err.contains(why), "{body}: {err}");
        }
    }
}
