//! Issue 36: the decoder rules written once (`protocol/rules.rs`), through
//! the public API on each of the three APIs: progress and the idle bound,
//! call identity and the exported history, in-stream errors and fallback,
//! bounded server strings, truncation wording.

use std::time::Duration;

use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Api, Error, ErrorKind, History};
use serde_json::{Value, json};

use crate::util::{assert_valid_history, fast_http};

const APIS: [Api; 3] = [
    Api::ChatCompletions,
    Api::AnthropicMessages,
    Api::OpenAiResponses,
];

/// The events as an SSE body.
fn sse(events: &[Value]) -> String {
    let mut body = String::new();
    for e in events {
        let data = match e {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        body.push_str("data: ");
        body.push_str(&data);
        body.push_str("\n\n");
    }
    body
}

fn opening(api: Api) -> Vec<Value> {
    match api {
        Api::ChatCompletions => vec![json!({"model": "m", "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}})],
        Api::AnthropicMessages => vec![json!({"type": "message_start",
            "message": {"model": "m", "usage": {"input_tokens": 1, "output_tokens": 1}}})],
        _ => vec![json!({"type": "response.created", "response": {"model": "m"}})],
    }
}

fn text(api: Api, text: &str) -> Vec<Value> {
    match api {
        Api::ChatCompletions => {
            vec![json!({"choices": [{"index": 0, "delta": {"content": text}}]})]
        }
        Api::AnthropicMessages => vec![
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}),
            json!({"type": "content_block_stop", "index": 0}),
        ],
        _ => vec![json!({"type": "response.output_text.delta",
            "item_id": "msg", "output_index": 0, "delta": text})],
    }
}

fn call(api: Api, i: u64, id: &str, name: &str) -> Vec<Value> {
    match api {
        Api::ChatCompletions => vec![json!({"choices": [{"index": 0, "delta":
            {"tool_calls": [{"index": i, "id": id, "type": "function",
                             "function": {"name": name, "arguments": "{}"}}]}}]})],
        Api::AnthropicMessages => vec![
            json!({"type": "content_block_start", "index": i + 1,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            json!({"type": "content_block_stop", "index": i + 1}),
        ],
        _ => vec![
            json!({"type": "response.output_item.done", "output_index": i + 1,
            "item": {"type": "function_call", "id": format!("fc_{i}"), "call_id": id,
                     "name": name, "arguments": "{}"}}),
        ],
    }
}

fn ending(api: Api, calls: bool) -> Vec<Value> {
    match api {
        Api::ChatCompletions => vec![
            json!({"choices": [{"index": 0, "delta": {},
                "finish_reason": if calls { "tool_calls" } else { "stop" }}]}),
            Value::from("[DONE]"),
        ],
        Api::AnthropicMessages => vec![
            json!({"type": "message_delta",
                "delta": {"stop_reason": if calls { "tool_use" } else { "end_turn" }},
                "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ],
        _ => vec![json!({"type": "response.completed", "response":
            {"status": "completed", "usage": {"input_tokens": 1, "output_tokens": 2}}})],
    }
}

/// Events that carry nothing new (issue 36 item 1's list).
fn idle(api: Api) -> Vec<Value> {
    match api {
        Api::ChatCompletions => vec![
            json!({"choices": [{"index": 0, "delta": {}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": ""}}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
        ],
        Api::AnthropicMessages => vec![
            json!({"type": "ping"}),
            json!({"type": "message_delta", "delta": {},
                "usage": {"input_tokens": 1, "output_tokens": 1}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "a_future_delta", "x": 1}}),
        ],
        _ => vec![
            json!({"type": "response.output_text.delta", "item_id": "msg",
                "output_index": 0, "delta": ""}),
            json!({"type": "response.in_progress", "response": {}}),
            json!({"type": "keepalive"}),
        ],
    }
}

fn agent(server: &FakeServer, api: Api) -> Agent {
    Agent::builder(server.transport().with_api(api))
        .http(fast_http().with_max_retries(0))
        .streaming(true)
        .build()
        .expect("agent builds")
}

/// Item 1: a server that sends only events that carry nothing (after an
/// opening and an open text block) holds the run no longer than the idle
/// bound, on every API.
#[test]
fn a_stream_of_empty_events_ends_at_the_idle_bound_on_every_api() {
    for api in APIS {
        let server = FakeServer::start();
        let mut events = opening(api);
        if api == Api::AnthropicMessages {
            // An open block, so its unknown deltas are well formed.
            events.push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}));
        }
        for _ in 0..200 {
            events.extend(idle(api));
        }
        events.extend(ending(api, false));
        server.push(Reply::raw_sse(sse(&events)).with_chunk_delay(Duration::from_millis(20)));
        server.push(Reply::text("next"));
        let mut agent = Agent::builder(server.transport().with_api(api))
            .http(
                fast_http()
                    .with_max_retries(0)
                    .with_idle_timeout(Duration::from_secs(1)),
            )
            .streaming(true)
            .build()
            .unwrap();
        let err = agent.run_loop("hi").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{api:?}: {err:?}");
        assert_valid_history(agent.messages());
        assert_eq!(
            agent.run_loop("again").unwrap().answer.as_deref(),
            Some("next"),
            "{api:?}"
        );
    }
}

/// Item 2: two calls under one id refuse the answer on every API; nothing
/// reaches the history, which exports and loads again, and the next turn
/// works.
#[test]
fn two_calls_under_one_id_are_refused_and_the_history_loads_again() {
    for api in APIS {
        let server = FakeServer::start();
        let mut events = opening(api);
        events.extend(call(api, 0, "dup", "clock"));
        events.extend(call(api, 1, "dup", "clock"));
        events.extend(ending(api, true));
        server.push(Reply::raw_sse(sse(&events)));
        server.push(Reply::text("fine"));
        let mut agent = agent(&server, api);
        let err = agent.run_loop("time?").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol, "{api:?}: {err:?}");
        assert!(
            err.to_string().contains("duplicate tool call id `dup`"),
            "{api:?}: {err}"
        );
        let json = agent.export_history().to_json();
        History::parse(&json).unwrap_or_else(|e| panic!("{api:?}: {e}"));
        assert_eq!(
            agent.run_loop("again").unwrap().answer.as_deref(),
            Some("fine")
        );
        let json = agent.export_history().to_json();
        History::parse(&json).unwrap_or_else(|e| panic!("{api:?}: {e}"));
    }
}

/// Item 2: a call without a name is refused, not kept and re-sent with
/// `"name": ""`.
#[test]
fn a_call_without_a_name_is_refused_on_every_api() {
    for api in APIS {
        let server = FakeServer::start();
        let mut events = opening(api);
        events.extend(call(api, 0, "c1", ""));
        events.extend(ending(api, true));
        server.push(Reply::raw_sse(sse(&events)));
        server.push(Reply::text("fine"));
        let mut agent = agent(&server, api);
        let err = agent.run_loop("go").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol, "{api:?}: {err:?}");
        assert!(err.to_string().contains("has no name"), "{api:?}: {err}");
        agent.run_loop("again").unwrap();
        let sent = server.chat_requests().last().unwrap().raw_body.clone();
        assert!(!sent.contains(r#""name":"""#), "{api:?}: {sent}");
    }
}

/// The in-stream error of each API for a type or code.
fn stream_error(api: Api, label: &str) -> Value {
    match api {
        Api::ChatCompletions => json!({"error": {"message": "boom", "type": label}}),
        Api::AnthropicMessages => {
            json!({"type": "error", "error": {"type": label, "message": "boom"}})
        }
        _ => json!({"type": "error", "code": label, "message": "boom"}),
    }
}

/// Item 4: an in-stream server error or rate limit falls back to the next
/// transport on every API, as Anthropic's overload always did.
#[test]
fn in_stream_server_errors_and_rate_limits_fall_back_on_every_api() {
    for api in APIS {
        for label in ["server_error", "rate_limit_exceeded", "overloaded_error"] {
            let primary = FakeServer::start();
            let mut events = opening(api);
            events.extend(text(api, "Par"));
            events.push(stream_error(api, label));
            primary.push(Reply::raw_sse(sse(&events)));
            let backup = FakeServer::start();
            backup.push(Reply::text("From the backup."));
            let mut agent = Agent::builder(primary.transport().with_api(api))
                .http(fast_http().with_max_retries(0))
                .streaming(true)
                .add_fallback(backup.transport().with_api(api).with_model("backup"))
                .build()
                .unwrap();
            let out = agent
                .run_loop("Hi")
                .unwrap_or_else(|e| panic!("{api:?} {label}: {e:?}"));
            assert_eq!(
                out.answer.as_deref(),
                Some("From the backup."),
                "{api:?} {label}"
            );
        }
    }
}

/// The same, for a Responses `response.failed` event.
#[test]
fn a_failed_responses_stream_falls_back() {
    let primary = FakeServer::start();
    let failed = json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "server_error", "message": "The server had an error."}}});
    primary.push(Reply::raw_sse(sse(&[
        opening(Api::OpenAiResponses).remove(0),
        failed,
    ])));
    let backup = FakeServer::start();
    backup.push(Reply::text("From the backup."));
    let mut agent = Agent::builder(primary.transport().with_api(Api::OpenAiResponses))
        .http(fast_http().with_max_retries(0))
        .streaming(true)
        .add_fallback(backup.transport().with_api(Api::OpenAiResponses))
        .build()
        .unwrap();
    let out = agent.run_loop("Hi").unwrap();
    assert_eq!(out.answer.as_deref(), Some("From the backup."));
}

/// Item 5: a 20 KB error code (and message) does not land whole in the
/// error text.
#[test]
fn a_huge_error_code_is_bounded_in_the_error() {
    let huge = "E".repeat(20_000);
    for api in APIS {
        let server = FakeServer::start();
        let mut events = opening(api);
        events.push(match api {
            Api::OpenAiResponses => json!({"type": "error", "code": huge, "message": huge}),
            _ => stream_error(api, &huge),
        });
        server.push(Reply::raw_sse(sse(&events)));
        let err = agent(&server, api).run_loop("hi").unwrap_err();
        let shown = err.to_string();
        assert!(shown.len() < 1_500, "{api:?}: {} bytes", shown.len());
    }
}

/// Item 6: a cut stream is `Truncated` on every API, and its wording names
/// no end event the API does not have.
#[test]
fn a_cut_stream_is_truncated_in_words_true_for_every_api() {
    for api in APIS {
        let server = FakeServer::start();
        let mut events = opening(api);
        events.extend(text(api, "partial"));
        server.push(Reply::raw_sse(sse(&events)));
        let mut agent = agent(&server, api);
        let err = agent.run_loop("hi").unwrap_err();
        assert!(matches!(err, Error::Truncated), "{api:?}: {err:?}");
        assert!(!err.to_string().contains("[DONE]"), "{api:?}: {err}");
        assert_valid_history(agent.messages());
        assert!(
            agent
                .messages()
                .iter()
                .all(|m| m.role != pikuri::Role::Assistant),
            "{api:?}: a cut answer reached the history"
        );
    }
}
