//! The API's own tool search on Anthropic Messages: deferred tools and the
//! search tool in the request, the search blocks kept and sent back.

use serde_json::{Value, json};

use super::*;
use crate::protocol::decode::{Completion, Fragment, StreamDecoder};
use crate::protocol::error::DecodeError;
use crate::protocol::found_tool_names;
use crate::protocol::request::ToolSpecs;
use crate::protocol::test_util::{encoded, search_tools as tools};
use crate::{Api, ChatTransport, Message, ProviderData, ToolCall};

const BASE: &str = "http://127.0.0.1:9/v1";

fn transport() -> ChatTransport {
    ChatTransport::new("claude")
        .with_api(Api::AnthropicMessages)
        .with_api_base(BASE)
}

fn encode(msgs: &[Message], tools: &ToolSpecs) -> Value {
    encoded(&transport(), msgs, tools, write_body)
}

fn search_use() -> Value {
    json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25",
           "input": {"query": "weather"}})
}

fn search_result(names: &[&str]) -> Value {
    let refs: Vec<Value> = names
        .iter()
        .map(|n| json!({"type": "tool_reference", "tool_name": n}))
        .collect();
    json!({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1",
           "content": {"type": "tool_search_tool_search_result", "tool_references": refs}})
}

#[test]
fn a_deferred_tool_goes_with_defer_loading_and_the_search_tool_last() {
    let body = encode(&[Message::user("hi")], &tools(true));
    let sent = body["tools"].as_array().unwrap();
    assert_eq!(sent.len(), 3, "{body}");
    assert_eq!(sent[0].get("defer_loading"), None);
    assert_eq!(sent[1]["name"], "get_weather");
    assert_eq!(sent[1]["defer_loading"], true);
    assert_eq!(
        sent[2],
        json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25",
               "cache_control": {"type": "ephemeral"}})
    );
    // Nothing deferred, nothing searched: no search tool, no flag.
    let plain = encode(&[Message::user("hi")], &tools(false));
    let sent = plain["tools"].as_array().unwrap();
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|t| t.get("defer_loading").is_none()));
}

fn searched_answer(model: &str) -> Message {
    let mut m = Message::assistant_tool_calls(
        "Found it.",
        vec![ToolCall::new(
            "toolu_1",
            "get_weather",
            r#"{"city":"Oslo"}"#,
        )],
    );
    m.provider_data = Some(ProviderData::new(
        Api::AnthropicMessages,
        BASE,
        model,
        vec![search_use(), search_result(&["get_weather"])],
    ));
    m
}

#[test]
fn search_blocks_go_back_in_order_only_to_their_model() {
    let msgs = vec![
        Message::user("weather?"),
        searched_answer("claude"),
        Message::tool("toolu_1", "sunny"),
    ];
    let body = encode(&msgs, &tools(true));
    let content = body["messages"][1]["content"].as_array().unwrap();
    let kinds: Vec<&str> = content
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "server_tool_use",
            "tool_search_tool_result",
            "text",
            "tool_use"
        ]
    );
    assert_eq!(content[0], search_use());
    assert_eq!(content[1], search_result(&["get_weather"]));
    // Sent back with nothing deferred any more: the search tool still goes.
    let body = encode(&msgs, &tools(false));
    let last = body["tools"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["name"], "tool_search_tool_bm25");
    // Another model's search stays out, and so does the search tool.
    let other = vec![
        Message::user("weather?"),
        searched_answer("claude-other"),
        Message::tool("toolu_1", "sunny"),
    ];
    let body = encode(&other, &tools(false));
    let content = body["messages"][1]["content"].as_array().unwrap();
    assert!(content.iter().all(|b| b["type"] != "server_tool_use"));
    assert_eq!(body["tools"].as_array().unwrap().len(), 2);
}

fn body(content: &Value) -> Vec<u8> {
    json!({"type": "message", "id": "msg_1", "model": "claude", "content": content,
           "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 2}})
    .to_string()
    .into_bytes()
}

#[test]
fn a_response_keeps_the_search_blocks_apart_from_text_and_calls() {
    let content = json!([
        {"type": "text", "text": "Let me look. "},
        search_use(),
        search_result(&["get_weather"]),
        {"type": "text", "text": "Found it."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ]);
    let c = parse_response(&body(&content), false).unwrap();
    assert_eq!(c.message.content, "Let me look. Found it.");
    assert_eq!(c.message.tool_calls.len(), 1);
    assert_eq!(c.message.tool_calls[0].name, "get_weather");
    let pd = c.message.provider_data.as_ref().unwrap();
    assert_eq!(
        pd.items,
        vec![search_use(), search_result(&["get_weather"])]
    );
    assert_eq!(found_tool_names(&c.message), ["get_weather"]);
    // Another server tool's blocks (web search) are still skipped.
    let web = json!([
        {"type": "server_tool_use", "id": "s2", "name": "web_search", "input": {}},
        {"type": "text", "text": "ok"},
    ]);
    let c = parse_response(&body(&web), false).unwrap();
    assert!(c.message.provider_data.is_none());
}

// ---- streamed ----

fn stream(events: &[Value]) -> (Result<Completion, DecodeError>, u64, String) {
    let mut d = Decoder::new(false, None);
    let mut text = String::new();
    for e in events {
        let r = d.push_data(&e.to_string(), &mut |f| {
            if let Fragment::Content(s) = f {
                text.push_str(s);
            }
        });
        if let Err(e) = r {
            return (Err(e), d.progress(), text);
        }
    }
    let progress = d.progress();
    (d.finish(), progress, text)
}

fn search_events() -> Vec<Value> {
    vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "model": "claude"}}),
        json!({"type": "content_block_start", "index": 0, "content_block":
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta":
            {"type": "input_json_delta", "partial_json": "{\"query\": "}}),
        json!({"type": "content_block_delta", "index": 0, "delta":
            {"type": "input_json_delta", "partial_json": "\"weather\"}"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block":
            search_result(&["get_weather"])}),
        json!({"type": "content_block_stop", "index": 1}),
    ]
}

fn end_events() -> Vec<Value> {
    vec![
        json!({"type": "content_block_start", "index": 2, "content_block":
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta":
            {"type": "input_json_delta", "partial_json": "{\"city\":\"Oslo\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
        json!({"type": "message_stop"}),
    ]
}

#[test]
fn a_stream_keeps_the_search_blocks_with_their_input_and_counts_them_as_progress() {
    let mut events = search_events();
    events.extend(end_events());
    let (c, progress, text) = stream(&events);
    let c = c.unwrap();
    assert_eq!(text, "");
    assert_eq!(c.message.content, "");
    assert_eq!(c.message.tool_calls.len(), 1);
    let pd = c.message.provider_data.as_ref().unwrap();
    assert_eq!(
        pd.items,
        vec![search_use(), search_result(&["get_weather"])]
    );
    assert_eq!(found_tool_names(&c.message), ["get_weather"]);
    // The search's start, its two input pieces and its result are progress
    // for the idle bound, beside the call (start, arguments), the stop
    // reason and the end.
    assert_eq!(progress, 4 + 2 + 2);
}

#[test]
fn a_stream_cut_or_failing_after_a_search_is_an_error() {
    // Cut inside the search's input.
    let (c, _, _) = stream(&search_events()[..3]);
    assert!(matches!(c, Err(DecodeError::Truncated)), "{c:?}");
    // An error event after the search blocks.
    let mut events = search_events();
    events.push(
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "boom"}}),
    );
    let (c, _, _) = stream(&events);
    let e = c.unwrap_err();
    assert!(e.to_string().contains("boom"), "{e}");
    // A search input that never completes as JSON keeps the input it
    // started with (the API takes back only an object).
    let mut events = search_events();
    events.remove(3);
    events.extend(end_events());
    let c = stream(&events).0.unwrap();
    assert_eq!(
        c.message.provider_data.unwrap().items[0]["input"],
        json!({})
    );
}
