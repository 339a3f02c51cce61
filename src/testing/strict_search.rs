//! Strict-mode checks of the API's own tool search (deferred tools), on
//! Anthropic Messages and OpenAI Responses: `defer_loading` only where the
//! API takes it, the search tool present whenever a tool is deferred or a
//! search is sent back, and the search blocks or items sent back
//! well-formed. See the [module docs](super#strict-mode).

use serde_json::{Map, Value};

type Body = Map<String, Value>;

/// The `tools` of `body` (none when absent).
fn tools(body: &Body) -> &[Value] {
    body.get("tools")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A tool's `defer_loading`: absent (false) or a boolean.
fn deferred(at: &str, tool: &Value) -> Result<bool, String> {
    match tool.get("defer_loading") {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(format!("{at}.defer_loading must be a boolean, got {v}")),
    }
}

/// The Messages API's rules: a deferred tool needs a tool search tool
/// (`tool_search_tool_bm25_*` or `tool_search_tool_regex_*`), which is not
/// deferred itself (so one tool always loads); a
/// `server_tool_use` search sent back is answered by its
/// `tool_search_tool_result` in the same message, whose `content` is a
/// search result (`tool_references` of `{type: tool_reference, tool_name}`)
/// or an error (`error_code`).
pub(super) fn anthropic(body: &Body) -> Result<(), String> {
    let mut any_deferred = false;
    let mut search_tool = false;
    // The search tools offered, by name: a search sent back names one.
    let mut search_names: Vec<&str> = Vec::new();
    for (i, tool) in tools(body).iter().enumerate() {
        let at = format!("tools[{i}]");
        let deferred = deferred(&at, tool)?;
        let is_search = tool
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.starts_with("tool_search_tool_"));
        if is_search && deferred {
            return Err(format!("{at}: the tool search tool cannot be deferred"));
        }
        search_tool |= is_search;
        if is_search {
            search_names.extend(tool.get("name").and_then(Value::as_str));
        }
        any_deferred |= deferred;
    }
    if any_deferred && !search_tool {
        return Err("tools with `defer_loading` need a tool search tool in `tools`".into());
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for (i, m) in messages.iter().enumerate() {
        let Some(blocks) = m.get("content").and_then(Value::as_array) else {
            continue;
        };
        let mut open: Vec<&str> = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            let at = format!("messages[{i}].content[{j}]");
            match b.get("type").and_then(Value::as_str) {
                Some("server_tool_use")
                    if b.get("name")
                        .and_then(Value::as_str)
                        .is_some_and(|n| n.starts_with("tool_search_tool_")) =>
                {
                    let name = b.get("name").and_then(Value::as_str).unwrap_or("");
                    if !search_tool || !search_names.contains(&name) {
                        return Err(format!(
                            "{at}: a tool search `{name}` sent back without that tool search \
                             tool in `tools`"
                        ));
                    }
                    let Some(id) = b
                        .get("id")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                    else {
                        return Err(format!("{at}: server_tool_use without a string `id`"));
                    };
                    if !b.get("input").is_some_and(Value::is_object) {
                        return Err(format!("{at}.input must be a JSON object"));
                    }
                    open.push(id);
                }
                Some("tool_search_tool_result") => {
                    let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
                    let Some(k) = open.iter().position(|o| *o == id) else {
                        return Err(format!(
                            "{at}: tool_search_tool_result for `{id}`, which is no tool search \
                             before it in this message"
                        ));
                    };
                    open.remove(k);
                    search_content(&at, b.get("content"))?;
                }
                _ => {}
            }
        }
        if let Some(id) = open.first() {
            return Err(format!(
                "messages[{i}]: tool search `{id}` sent back without its tool_search_tool_result"
            ));
        }
    }
    Ok(())
}

fn search_content(at: &str, content: Option<&Value>) -> Result<(), String> {
    let kind = content.and_then(|c| c.get("type")).and_then(Value::as_str);
    match kind {
        Some("tool_search_tool_search_result") => {
            let refs = content
                .and_then(|c| c.get("tool_references"))
                .and_then(Value::as_array)
                .ok_or_else(|| format!("{at}.content.tool_references must be an array"))?;
            for (k, r) in refs.iter().enumerate() {
                if r.get("type").and_then(Value::as_str) != Some("tool_reference")
                    || !r.get("tool_name").is_some_and(Value::is_string)
                {
                    return Err(format!(
                        "{at}.content.tool_references[{k}] must be {{\"type\": \"tool_reference\", \"tool_name\": ..}}"
                    ));
                }
            }
            Ok(())
        }
        Some("tool_search_tool_result_error") => {
            if content
                .and_then(|c| c.get("error_code"))
                .is_some_and(Value::is_string)
            {
                Ok(())
            } else {
                Err(format!("{at}.content.error_code: Field required"))
            }
        }
        _ => Err(format!(
            "{at}.content must be a tool_search_tool_search_result or a \
             tool_search_tool_result_error"
        )),
    }
}

/// The Responses API's rules: `defer_loading` (a boolean) only on
/// `function` and `namespace` tools; a deferred one needs the
/// `{"type": "tool_search"}` tool; a `tool_search_call` or
/// `tool_search_output` sent back needs it too, a call carries its
/// `arguments`, an output its `tools` (each with a string `name`) and
/// follows a search call.
pub(super) fn responses(body: &Body) -> Result<(), String> {
    let mut any_deferred = false;
    let mut search_tool = false;
    for (i, tool) in tools(body).iter().enumerate() {
        let at = format!("tools[{i}]");
        let kind = tool.get("type").and_then(Value::as_str);
        let deferred = deferred(&at, tool)?;
        if deferred && !matches!(kind, Some("function" | "namespace")) {
            return Err(format!(
                "{at}: `defer_loading` is only for function and namespace tools"
            ));
        }
        search_tool |= kind == Some("tool_search");
        any_deferred |= deferred;
    }
    if any_deferred && !search_tool {
        return Err("deferred tools need a `tool_search` tool in `tools`".into());
    }
    let items = body
        .get("input")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut calls = 0usize;
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let kind = item.get("type").and_then(Value::as_str);
        if matches!(kind, Some("tool_search_call" | "tool_search_output")) && !search_tool {
            return Err(format!(
                "{at}: a tool search sent back without a `tool_search` tool in `tools`"
            ));
        }
        match kind {
            Some("tool_search_call") => {
                if item.get("arguments").is_none() {
                    return Err(format!("{at}: tool_search_call without `arguments`"));
                }
                calls += 1;
            }
            Some("tool_search_output") => {
                let Some(tools) = item.get("tools").and_then(Value::as_array) else {
                    return Err(format!("{at}.tools must be an array"));
                };
                if let Some(k) = tools
                    .iter()
                    .position(|t| !t.get("name").is_some_and(Value::is_string))
                {
                    return Err(format!("{at}.tools[{k}] without a string `name`"));
                }
                if calls == 0 {
                    return Err(format!(
                        "{at}: tool_search_output without a tool_search_call before it"
                    ));
                }
                calls -= 1;
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: &Value) -> &Body {
        v.as_object().unwrap()
    }

    #[test]
    fn anthropic_deferral_and_replayed_searches() {
        let search =
            json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"});
        let f = json!({"name": "f", "input_schema": {"type": "object"}, "defer_loading": true});
        let g = json!({"name": "g", "input_schema": {"type": "object"}});
        anthropic(obj(&json!({"tools": [g, f, search]}))).unwrap();
        let e = anthropic(obj(&json!({"tools": [g, f]}))).unwrap_err();
        assert!(e.contains("tool search tool"), "{e}");
        // The search tool is the one loaded tool: enough.
        anthropic(obj(&json!({"tools": [f, search]}))).unwrap();
        let mut deferred_search = search.clone();
        deferred_search["defer_loading"] = json!(true);
        let e = anthropic(obj(&json!({"tools": [g, f, deferred_search]}))).unwrap_err();
        assert!(e.contains("cannot be deferred"), "{e}");
        let e = anthropic(obj(
            &json!({"tools": [{"name": "f", "defer_loading": "yes"}]}),
        ))
        .unwrap_err();
        assert!(e.contains("boolean"), "{e}");
        let uses = json!({"type": "server_tool_use", "id": "s1", "name": "tool_search_tool_bm25", "input": {}});
        let result = json!({"type": "tool_search_tool_result", "tool_use_id": "s1",
            "content": {"type": "tool_search_tool_search_result",
                        "tool_references": [{"type": "tool_reference", "tool_name": "f"}]}});
        let body = |blocks: Value, tools: Value| json!({"tools": tools, "messages": [{"role": "assistant", "content": blocks}]});
        anthropic(obj(&body(json!([uses, result]), json!([g, search])))).unwrap();
        let e = anthropic(obj(&body(json!([uses, result]), json!([g])))).unwrap_err();
        assert!(e.contains("without that tool search tool"), "{e}");
        // A search sent back names the variant offered: the regex one's
        // search is refused beside the BM25 tool alone.
        let mut regex_use = uses.clone();
        regex_use["name"] = json!("tool_search_tool_regex");
        let e = anthropic(obj(&body(json!([regex_use, result]), json!([search])))).unwrap_err();
        assert!(e.contains("`tool_search_tool_regex`"), "{e}");
        let regex =
            json!({"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"});
        anthropic(obj(&body(
            json!([regex_use, result]),
            json!([search, regex]),
        )))
        .unwrap();
        let e = anthropic(obj(&body(json!([uses]), json!([search])))).unwrap_err();
        assert!(e.contains("without its tool_search_tool_result"), "{e}");
        let e = anthropic(obj(&body(json!([result]), json!([search])))).unwrap_err();
        assert!(e.contains("no tool search before it"), "{e}");
        let mut bad = result.clone();
        bad["content"] = json!({"type": "tool_search_tool_result_error"});
        let e = anthropic(obj(&body(json!([uses, bad]), json!([search])))).unwrap_err();
        assert!(e.contains("error_code"), "{e}");
    }

    #[test]
    fn responses_deferral_and_replayed_searches() {
        let f = json!({"type": "function", "name": "f", "defer_loading": true});
        let search = json!({"type": "tool_search"});
        responses(obj(&json!({"tools": [f, search]}))).unwrap();
        let e = responses(obj(&json!({"tools": [f]}))).unwrap_err();
        assert!(e.contains("tool_search"), "{e}");
        let e = responses(obj(
            &json!({"tools": [{"type": "web_search", "defer_loading": true}, search]}),
        ))
        .unwrap_err();
        assert!(e.contains("only for function"), "{e}");
        let call = json!({"type": "tool_search_call", "arguments": {"query": "q"}});
        let out =
            json!({"type": "tool_search_output", "tools": [{"type": "function", "name": "f"}]});
        responses(obj(&json!({"tools": [search], "input": [call, out]}))).unwrap();
        let e = responses(obj(&json!({"tools": [], "input": [call, out]}))).unwrap_err();
        assert!(e.contains("without a `tool_search` tool"), "{e}");
        let e = responses(obj(&json!({"tools": [search], "input": [out]}))).unwrap_err();
        assert!(e.contains("before it"), "{e}");
        let e = responses(obj(
            &json!({"tools": [search], "input": [call, {"type": "tool_search_output", "tools": [{}]}]}),
        ))
        .unwrap_err();
        assert!(e.contains("name"), "{e}");
    }
}
