//! The API's own tool search on OpenAI Responses: deferred tools and the
//! `tool_search` tool in the request, the search items kept and sent back.

use serde_json::{Value, json};

use super::{Decoder, parse_response, write_body};
use crate::protocol::decode::{Completion, StreamDecoder};
use crate::protocol::error::DecodeError;
use crate::protocol::found_tool_names;
use crate::protocol::request::ToolSpecs;
use crate::protocol::test_util::{encoded, search_tools as tools};
use crate::{Api, ChatTransport, Message, ProviderData, ToolCall};

const BASE: &str = "http://127.0.0.1:9/v1";

fn transport() -> ChatTransport {
    ChatTransport::new("gpt")
        .with_api(Api::OpenAiResponses)
        .with_api_base(BASE)
}

fn encode(msgs: &[Message], tools: &ToolSpecs) -> Value {
    encoded(&transport(), msgs, tools, write_body)
}

fn search_call() -> Value {
    json!({"type": "tool_search_call", "id": "tsc_1", "call_id": null, "execution": "server",
           "status": "completed", "arguments": {"query": "weather"}})
}

fn search_output(names: &[&str]) -> Value {
    let tools: Vec<Value> = names
        .iter()
        .map(|n| json!({"type": "function", "name": n, "parameters": {"type": "object"}}))
        .collect();
    json!({"type": "tool_search_output", "id": "tso_1", "call_id": null, "execution": "server",
           "status": "completed", "tools": tools})
}

#[test]
fn a_deferred_tool_goes_with_defer_loading_and_the_search_tool_last() {
    let body = encode(&[Message::user("hi")], &tools(true));
    let sent = body["tools"].as_array().unwrap();
    assert_eq!(sent.len(), 3, "{body}");
    assert_eq!(sent[0].get("defer_loading"), None);
    assert_eq!(sent[1]["name"], "get_weather");
    assert_eq!(sent[1]["defer_loading"], true);
    assert_eq!(sent[2], json!({"type": "tool_search"}));
    let plain = encode(&[Message::user("hi")], &tools(false));
    let sent = plain["tools"].as_array().unwrap();
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|t| t.get("defer_loading").is_none()));
}

fn searched_answer(model: &str) -> Message {
    let mut m = Message::assistant_tool_calls(
        "Found it.",
        vec![ToolCall::new("call_1", "get_weather", r#"{"city":"Oslo"}"#)],
    );
    m.provider_data = Some(ProviderData::new(
        Api::OpenAiResponses,
        BASE,
        model,
        vec![search_call(), search_output(&["get_weather"])],
    ));
    m
}

#[test]
fn search_items_go_back_in_order_only_to_their_model() {
    let msgs = vec![
        Message::user("weather?"),
        searched_answer("gpt"),
        Message::tool("call_1", "sunny"),
    ];
    let body = encode(&msgs, &tools(false));
    let input = body["input"].as_array().unwrap();
    let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "tool_search_call",
            "tool_search_output",
            "message",
            "function_call",
            "function_call_output"
        ]
    );
    assert_eq!(input[1], search_call());
    assert_eq!(input[2], search_output(&["get_weather"]));
    // Sent back with nothing deferred any more: the search tool still goes.
    assert_eq!(
        body["tools"].as_array().unwrap().last().unwrap(),
        &json!({"type": "tool_search"})
    );
    let other = vec![
        Message::user("weather?"),
        searched_answer("gpt-other"),
        Message::tool("call_1", "sunny"),
    ];
    let body = encode(&other, &tools(false));
    let input = body["input"].as_array().unwrap();
    assert!(input.iter().all(|i| i["type"] != "tool_search_call"));
    assert_eq!(body["tools"].as_array().unwrap().len(), 2);
}

fn call_item(done: bool) -> Value {
    json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
           "arguments": if done { "{\"city\":\"Oslo\"}" } else { "" }})
}

#[test]
fn a_response_keeps_the_search_items_apart_from_text_and_calls() {
    let body = json!({"id": "resp_1", "model": "gpt", "status": "completed", "output": [
        search_call(),
        search_output(&["get_weather"]),
        call_item(true),
    ]});
    let c = parse_response(body.to_string().as_bytes(), false).unwrap();
    assert_eq!(c.message.content, "");
    assert_eq!(c.message.tool_calls.len(), 1);
    let pd = c.message.provider_data.as_ref().unwrap();
    assert_eq!(
        pd.items,
        vec![search_call(), search_output(&["get_weather"])]
    );
    assert_eq!(found_tool_names(&c.message), ["get_weather"]);
}

fn run(events: &[Value]) -> (Result<Completion, DecodeError>, u64) {
    let mut d = Decoder::new(false, None);
    for e in events {
        if let Err(err) = d.push_data(&e.to_string(), &mut |_| {}) {
            return (Err(err), d.progress());
        }
    }
    let p = d.progress();
    (d.finish(), p)
}

#[allow(clippy::needless_pass_by_value, reason = "called with json! values")]
fn item(kind: &str, at: u64, item: Value) -> Value {
    json!({"type": kind, "output_index": at, "item": item})
}

fn search_events() -> Vec<Value> {
    let mut head = search_call();
    head["status"] = json!("in_progress");
    vec![
        json!({"type": "response.created", "response": {"id": "resp_1", "model": "gpt"}}),
        item("response.output_item.added", 0, head),
        item("response.output_item.done", 0, search_call()),
        item(
            "response.output_item.added",
            1,
            search_output(&["get_weather"]),
        ),
        item(
            "response.output_item.done",
            1,
            search_output(&["get_weather"]),
        ),
    ]
}

#[test]
fn a_stream_keeps_the_search_items_and_counts_them_as_progress() {
    let mut events = search_events();
    events.extend([
        item("response.output_item.added", 2, call_item(false)),
        item("response.output_item.done", 2, call_item(true)),
        json!({"type": "response.completed", "response": {"status": "completed"}}),
    ]);
    let (c, progress) = run(&events);
    let c = c.unwrap();
    assert_eq!(c.message.content, "");
    assert_eq!(c.message.tool_calls[0].arguments, "{\"city\":\"Oslo\"}");
    let pd = c.message.provider_data.as_ref().unwrap();
    assert_eq!(
        pd.items,
        vec![search_call(), search_output(&["get_weather"])]
    );
    // Each finished search item, the call (added, finished) and the end.
    assert_eq!(progress, 2 + 2 + 1);
}

#[test]
fn a_stream_cut_or_failing_after_a_search_is_an_error() {
    let (c, _) = run(&search_events()[..2]);
    assert!(matches!(c, Err(DecodeError::Truncated)), "{c:?}");
    let mut events = search_events();
    events.push(json!({"type": "error", "code": "invalid_request", "message": "boom"}));
    let e = run(&events).0.unwrap_err();
    assert!(e.to_string().contains("boom"), "{e}");
    // A search item announced but never finished is not kept (its output
    // alone stays).
    let mut events = search_events();
    events.remove(2);
    events.push(json!({"type": "response.completed", "response": {"status": "completed"}}));
    let c = run(&events).0.unwrap();
    let items = c.message.provider_data.unwrap().items;
    assert_eq!(items, vec![search_output(&["get_weather"])]);
}
