//! The API's own tool search, as its answers keep it: which provider items
//! are search blocks, and which tools they say the server found.
//!
//! With [`ToolSearch::native`](crate::tool_search::ToolSearch::native), a
//! request on Anthropic Messages or OpenAI Responses sends its deferred
//! tools with `defer_loading: true` and the API's search tool beside them
//! (see `anthropic/` and `responses/`); the server searches, and its answer
//! carries the search as blocks or items of its own:
//!
//! | API | the search | what it found |
//! |---|---|---|
//! | Anthropic Messages | `server_tool_use` named `tool_search_tool_bm25` (or `_regex`, with [`ToolSearch::regex`](crate::tool_search::ToolSearch::regex)) | `tool_search_tool_result`: `content.tool_references[].tool_name` |
//! | OpenAI Responses | `tool_search_call` item | `tool_search_output` item: `tools[].name` (a `namespace`'s `tools` too) |
//!
//! Both decoders keep these in the message's
//! [`ProviderData`](crate::ProviderData), in order, beside the thinking or
//! reasoning items: they are never text and never client tool calls, and
//! the encoders send them back only to the API, endpoint and model that
//! wrote them. [`found_tool_names`] reads the names back for the agent,
//! which reveals those of its deferred tools (an unknown name is the
//! agent's to ignore).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::rules::MAX_LABEL;
use crate::{Api, Message};

/// The most names [`found_tool_names`] returns for one message: a search
/// answers a handful (Anthropic's returns at most five); a server that
/// names more is cut here, with a `warn` line.
pub(crate) const MAX_FOUND: usize = 256;

/// Whether a provider item is one of the API's tool-search blocks or
/// items (see the [module docs](self)).
#[cfg_attr(
    not(any(feature = "anthropic", feature = "responses")),
    allow(dead_code, reason = "the encoders and decoders of those APIs read it")
)]
pub(crate) fn is_search_item(item: &Value) -> bool {
    match item.get("type").and_then(Value::as_str) {
        Some("tool_search_tool_result" | "tool_search_call" | "tool_search_output") => true,
        Some("server_tool_use") => item
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(is_search_tool_name),
        _ => false,
    }
}

/// Whether an Anthropic server tool's name is one of its tool searches
/// (`tool_search_tool_bm25`, `tool_search_tool_regex`).
#[cfg_attr(
    not(any(feature = "anthropic", feature = "responses")),
    allow(dead_code, reason = "the encoders and decoders of those APIs read it")
)]
pub(crate) fn is_search_tool_name(name: &str) -> bool {
    name.starts_with("tool_search_tool_")
}

/// The names of the tools the API's own search found, as `message`'s
/// provider data records them, in order, each once (see the
/// [module docs](self)). Empty for a message without a native search.
///
/// Bounded: a name is at most `MAX_LABEL` characters (a longer one is no
/// tool name and is left out), and at most [`MAX_FOUND`] names are
/// returned.
#[allow(
    dead_code,
    reason = "the agent's native tool search (issue 40) calls it; tests until then"
)]
pub(crate) fn found_tool_names(message: &Message) -> Vec<String> {
    let Some(pd) = &message.provider_data else {
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for item in &pd.items {
        let listed: Vec<&str> = match (pd.api, item.get("type").and_then(Value::as_str)) {
            (Api::AnthropicMessages, Some("tool_search_tool_result")) => item
                .pointer("/content/tool_references")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| r.get("tool_name").and_then(Value::as_str))
                .collect(),
            (Api::OpenAiResponses, Some("tool_search_output")) => item
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .flat_map(responses_tool_names)
                .collect(),
            _ => continue,
        };
        for name in listed {
            if name.is_empty() || name.chars().count() > MAX_LABEL {
                log::warn!(
                    "tool search: ignoring a found tool name that is empty or longer than \
                     {MAX_LABEL} characters"
                );
                continue;
            }
            if names.len() >= MAX_FOUND {
                log::warn!(
                    "tool search: a search named more than {MAX_FOUND} tools; the rest are ignored"
                );
                return names;
            }
            if seen.insert(name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// The Anthropic search blocks of one answer as the history keeps them:
/// only whole searches, each a `server_tool_use` with an id of its own
/// and an object `input`, answered later in the answer by a
/// `tool_search_tool_result` whose `content` is a search result or an
/// error the API takes back. A block that breaks this (garbage content,
/// an empty or repeated id, a result of no open search, a search never
/// answered) would make every later request of the conversation one the
/// API refuses; it is dropped with its pair, with a `warn` line. Other
/// items pass as they are.
#[cfg_attr(
    not(feature = "anthropic"),
    allow(dead_code, reason = "the Anthropic decoders call it")
)]
pub(crate) fn whole_searches(items: Vec<Value>) -> Vec<Value> {
    if !items.iter().any(is_search_item) {
        return items;
    }
    let mut keep = vec![true; items.len()];
    let mut seen: HashSet<&str> = HashSet::new();
    // An open search's id and its position.
    let mut open: HashMap<&str, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        match item.get("type").and_then(Value::as_str) {
            Some("server_tool_use") if is_search_item(item) => {
                let id = item.get("id").and_then(Value::as_str).unwrap_or("");
                let whole = !id.is_empty() && item.get("input").is_some_and(Value::is_object);
                if whole && seen.insert(id) {
                    open.insert(id, i);
                } else {
                    keep[i] = false;
                }
            }
            Some("tool_search_tool_result") => {
                let id = item
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match open.remove(id) {
                    Some(_) if is_search_content(item.get("content")) => {}
                    Some(search) => {
                        keep[search] = false;
                        keep[i] = false;
                    }
                    None => keep[i] = false,
                }
            }
            _ => {}
        }
    }
    for (_, search) in open {
        keep[search] = false;
    }
    let dropped = keep.iter().filter(|k| !**k).count();
    if dropped > 0 {
        log::warn!(
            "anthropic: dropping {dropped} tool-search block(s) that are no whole search \
             (garbage content, an empty or repeated id, or a search without its result)"
        );
    }
    items
        .into_iter()
        .zip(keep)
        .filter_map(|(item, kept)| kept.then_some(item))
        .collect()
}

/// The Responses search items of one answer as the history keeps them:
/// a `tool_search_call` with its `arguments`, and a `tool_search_output`
/// whose `tools` each have a string `name`, answering the first search
/// still open before it. A broken item (a call without arguments, an
/// output of no open search or with garbage `tools`) would make every
/// later request one the API refuses; it is dropped (an output with the
/// call it answers), with a `warn` line.
#[cfg_attr(
    not(feature = "responses"),
    allow(dead_code, reason = "the Responses decoder calls it")
)]
pub(crate) fn whole_responses_searches(items: Vec<Value>) -> Vec<Value> {
    if !items.iter().any(is_search_item) {
        return items;
    }
    let mut keep = vec![true; items.len()];
    let mut open: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    for (i, item) in items.iter().enumerate() {
        match item.get("type").and_then(Value::as_str) {
            Some("tool_search_call") if item.get("arguments").is_some() => open.push_back(i),
            Some("tool_search_call") => keep[i] = false,
            Some("tool_search_output") => {
                let whole = item
                    .get("tools")
                    .and_then(Value::as_array)
                    .is_some_and(|tools| {
                        tools
                            .iter()
                            .all(|t| t.get("name").is_some_and(Value::is_string))
                    });
                match open.pop_front() {
                    Some(_) if whole => {}
                    Some(call) => {
                        keep[call] = false;
                        keep[i] = false;
                    }
                    None => keep[i] = false,
                }
            }
            _ => {}
        }
    }
    let dropped = keep.iter().filter(|k| !**k).count();
    if dropped > 0 {
        log::warn!(
            "responses: dropping {dropped} tool-search item(s) that are no whole search \
             (no arguments, garbage tools, or an output of no search)"
        );
    }
    items
        .into_iter()
        .zip(keep)
        .filter_map(|(item, kept)| kept.then_some(item))
        .collect()
}

/// Whether a `tool_search_tool_result`'s `content` is one the API takes
/// back: a search result (`tool_references` of `{type: tool_reference,
/// tool_name}`) or an error (a string `error_code`).
fn is_search_content(content: Option<&Value>) -> bool {
    let Some(content) = content else {
        return false;
    };
    match content.get("type").and_then(Value::as_str) {
        Some("tool_search_tool_search_result") => content
            .get("tool_references")
            .and_then(Value::as_array)
            .is_some_and(|refs| {
                refs.iter().all(|r| {
                    r.get("type").and_then(Value::as_str) == Some("tool_reference")
                        && r.get("tool_name").is_some_and(Value::is_string)
                })
            }),
        Some("tool_search_tool_result_error") => {
            content.get("error_code").is_some_and(Value::is_string)
        }
        _ => false,
    }
}

/// The names a Responses `tool_search_output` tool stands for: a
/// `function`'s name, or the names of a `namespace`'s tools.
fn responses_tool_names(tool: &Value) -> Vec<&str> {
    match tool.get("type").and_then(Value::as_str) {
        Some("namespace") => tool
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .collect(),
        _ => tool
            .get("name")
            .and_then(Value::as_str)
            .into_iter()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ProviderData;

    fn with(api: Api, items: Vec<Value>) -> Message {
        let mut m = Message::assistant("ok");
        m.provider_data = Some(ProviderData::new(api, "http://x", "m", items));
        m
    }

    fn refs(names: &[&str]) -> Value {
        let refs: Vec<Value> = names
            .iter()
            .map(|n| json!({"type": "tool_reference", "tool_name": n}))
            .collect();
        json!({"type": "tool_search_tool_result", "tool_use_id": "s",
               "content": {"type": "tool_search_tool_search_result", "tool_references": refs}})
    }

    #[test]
    fn names_come_in_order_once_from_each_api_shape() {
        let m = with(
            Api::AnthropicMessages,
            vec![
                json!({"type": "thinking", "thinking": "t", "signature": "s"}),
                refs(&["a", "b"]),
                refs(&["b", "c"]),
                // An error result names nothing.
                json!({"type": "tool_search_tool_result", "tool_use_id": "s2",
                       "content": {"type": "tool_search_tool_result_error", "error_code": "unavailable"}}),
            ],
        );
        assert_eq!(found_tool_names(&m), ["a", "b", "c"]);
        let m = with(
            Api::OpenAiResponses,
            vec![json!({"type": "tool_search_output", "tools": [
                {"type": "function", "name": "f"},
                {"type": "namespace", "name": "crm", "tools": [{"type": "function", "name": "g"}]},
            ]})],
        );
        assert_eq!(found_tool_names(&m), ["f", "g"]);
        // Another API's shape under a provider data of this one: nothing.
        let m = with(Api::OpenAiResponses, vec![refs(&["a"])]);
        assert!(found_tool_names(&m).is_empty());
        assert!(found_tool_names(&Message::assistant("no data")).is_empty());
    }

    #[test]
    fn only_whole_searches_are_kept() {
        let uses = |id: &str| {
            json!({"type": "server_tool_use", "id": id, "name": "tool_search_tool_bm25",
                   "input": {"query": "q"}})
        };
        let result = |id: &str| {
            let mut r = refs(&["a"]);
            r["tool_use_id"] = json!(id);
            r
        };
        let thinking = json!({"type": "thinking", "thinking": "t", "signature": "s"});
        let mut garbage = result("g");
        garbage["content"] = json!("garbage");
        let mut no_input = uses("n");
        no_input["input"] = json!("text");
        let items = vec![
            thinking.clone(),
            uses("ok"),
            result("ok"),
            uses(""),
            result(""),
            uses("ok"),
            result("ok"),
            uses("g"),
            garbage,
            no_input,
            result("n"),
            result("nobody"),
            uses("never"),
        ];
        assert_eq!(
            whole_searches(items),
            vec![thinking.clone(), uses("ok"), result("ok")]
        );
        // Nothing to check: the items as they are.
        assert_eq!(whole_searches(vec![thinking.clone()]), vec![thinking]);
    }

    #[test]
    fn a_huge_or_odd_list_is_bounded() {
        let many: Vec<String> = (0..MAX_FOUND + 50).map(|i| format!("t{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let long = "x".repeat(MAX_LABEL + 1);
        let m = with(
            Api::AnthropicMessages,
            vec![refs(&["", &long]), refs(&many)],
        );
        let found = found_tool_names(&m);
        assert_eq!(found.len(), MAX_FOUND);
        assert_eq!(found[0], "t0");
        assert!(is_search_item(&refs(&[])));
        assert!(is_search_item(
            &json!({"type": "server_tool_use", "name": "tool_search_tool_regex"})
        ));
        assert!(!is_search_item(
            &json!({"type": "server_tool_use", "name": "web_search"})
        ));
    }
}
