//! Issue 29: Anthropic Messages through the public API, against a raw
//! scripted server that answers `POST …/messages` with bodies written here
//! byte for byte (JSON or SSE) and records each request.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Api, ChatTransport, ErrorKind, Event, Role};
use serde_json::{Value, json};

use crate::util::{assert_valid_history, echo_tool, fast_http, streamed_text};

/// One scripted answer: status, content type, body.
type Answer = (u16, &'static str, String);

/// A recorded request: path, lowercased headers, parsed body.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A server answering `POST …/messages` from a queue (404 for any other
/// request, 500 when the queue is empty), one connection per request.
struct Raw {
    base: String,
    queue: Arc<Mutex<VecDeque<Answer>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Raw {
    fn start() -> Raw {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let queue: Arc<Mutex<VecDeque<Answer>>> = Arc::default();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (q, s) = (Arc::clone(&queue), Arc::clone(&seen));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let (method, path) = (
                    parts.next().unwrap_or("").to_string(),
                    parts.next().unwrap_or("").to_string(),
                );
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((n, v)) = h.split_once(':') {
                        headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
                    }
                }
                let len: usize = headers
                    .iter()
                    .find(|(n, _)| n == "content-length")
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                let (status, ctype, text) = if method == "POST" && path.ends_with("/messages") {
                    s.lock().unwrap().push(Seen {
                        path,
                        headers,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    });
                    q.lock().unwrap().pop_front().unwrap_or((
                        500,
                        "application/json",
                        r#"{"type":"error","error":{"type":"api_error","message":"no reply scripted"}}"#
                            .to_string(),
                    ))
                } else {
                    (404, "application/json", "{}".to_string())
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = conn.flush();
            }
        });
        Raw { base, queue, seen }
    }

    fn push(&self, answer: Answer) -> &Raw {
        self.queue.lock().unwrap().push_back(answer);
        self
    }

    fn json(&self, body: &Value) -> &Raw {
        self.push((200, "application/json", body.to_string()))
    }

    fn sse(&self, events: &[Value]) -> &Raw {
        use std::fmt::Write as _;
        let mut text = String::new();
        for e in events {
            let kind = e["type"].as_str().unwrap_or("message");
            let _ = write!(text, "event: {kind}\ndata: {e}\n\n");
        }
        self.push((200, "text/event-stream", text))
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn transport(&self) -> ChatTransport {
        ChatTransport::new("claude-test")
            .with_api(Api::AnthropicMessages)
            .with_api_base(&self.base)
            .with_api_key("sk-ant-test")
            .with_context_window(Some(100_000))
    }
}

fn message(content: &Value, stop: &str) -> Value {
    json!({"id":"msg_1","type":"message","role":"assistant","model":"claude-test-20250101",
           "content":content,"stop_reason":stop,
           "usage":{"input_tokens":20,"output_tokens":4,"cache_read_input_tokens":50,
                    "cache_creation_input_tokens":6}})
}

/// The events of a streamed message with the given blocks (each block's
/// start, then its deltas).
fn events(blocks: &[(Value, Vec<Value>)], stop: &str) -> Vec<Value> {
    let mut out = vec![
        json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",
            "model":"claude-test-20250101","content":[],"usage":{"input_tokens":20,"output_tokens":1}}}),
        json!({"type":"ping"}),
    ];
    for (i, (start, deltas)) in blocks.iter().enumerate() {
        out.push(json!({"type":"content_block_start","index":i,"content_block":start}));
        for d in deltas {
            out.push(json!({"type":"content_block_delta","index":i,"delta":d}));
        }
        out.push(json!({"type":"content_block_stop","index":i}));
    }
    out.push(
        json!({"type":"message_delta","delta":{"stop_reason":stop,"stop_sequence":null},
        "usage":{"output_tokens":7}}),
    );
    out.push(json!({"type":"message_stop"}));
    out
}

fn text_block(parts: &[&str]) -> (Value, Vec<Value>) {
    (
        json!({"type":"text","text":""}),
        parts
            .iter()
            .map(|t| json!({"type":"text_delta","text":t}))
            .collect(),
    )
}

fn agent(raw: &Raw, streaming: bool) -> (Agent, pikuri::listeners::InMemoryEventList) {
    let rec = pikuri::listeners::InMemoryEventList::new();
    let agent = Agent::builder(raw.transport())
        .system_prompt("You are a test agent.")
        .http(fast_http().with_max_retries(1))
        .streaming(streaming)
        .add_tool(echo_tool())
        .add_listener(rec.clone())
        .build()
        .unwrap();
    (agent, rec)
}

#[test]
fn a_plain_answer_with_usage_headers_and_body() {
    let raw = Raw::start();
    raw.json(&message(
        &json!([{"type":"text","text":"Hello."}]),
        "end_turn",
    ));
    let (mut agent, _) = agent(&raw, false);
    let out = agent.run_loop("Hi").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Hello."));
    assert_eq!(out.usage.input, Some(20));
    assert_eq!(out.usage.cached, Some(50));
    assert_eq!(out.usage.cache_creation, Some(6));
    assert_eq!(out.usage.output, Some(4));
    let req = &raw.seen()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.header("authorization"), None);
    let b = &req.body;
    assert_eq!(b["model"], "claude-test");
    assert_eq!(b["max_tokens"], 4096);
    assert_eq!(b["stream"], false);
    assert_eq!(b["system"][0]["text"], "You are a test agent.");
    assert_eq!(
        b["messages"],
        json!([{"role":"user","content":[{"type":"text","text":"Hi",
            "cache_control":{"type":"ephemeral"}}]}])
    );
    assert_eq!(b["tools"][0]["name"], "echo");
    assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(b["tools"][0]["cache_control"], json!({"type":"ephemeral"}));
    assert_eq!(b["system"][0]["cache_control"], json!({"type":"ephemeral"}));
    let last = &agent.messages()[agent.messages().len() - 1];
    assert_eq!(last.model.as_deref(), Some("claude-test-20250101"));
}

#[test]
fn a_streamed_answer_reaches_the_listeners() {
    let raw = Raw::start();
    raw.sse(&events(
        &[text_block(&["Hel", "lo ", "world."])],
        "end_turn",
    ));
    let (mut agent, rec) = agent(&raw, true);
    let out = agent.run_loop("Hi").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Hello world."));
    assert_eq!(streamed_text(&rec.events()), "Hello world.");
    assert_eq!(out.usage.input, Some(20));
    assert_eq!(out.usage.output, Some(7));
    assert_eq!(raw.seen()[0].body["stream"], true);
}

/// A tool round with thinking: the second request sends the thinking
/// block (with its signature) first in the assistant message, the
/// `tool_use`, and the result in one user message; the breakpoints sit
/// on the last tool, the system and the moving end.
#[test]
fn a_tool_round_with_thinking_goes_back_signed() {
    for streaming in [false, true] {
        let raw = Raw::start();
        let thinking = json!({"type":"thinking","thinking":"I should echo.","signature":"SIG=="});
        let call = json!({"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"ping"}});
        if streaming {
            raw.sse(&events(
                &[
                    (
                        json!({"type":"thinking","thinking":""}),
                        vec![
                            json!({"type":"thinking_delta","thinking":"I should echo."}),
                            json!({"type":"signature_delta","signature":"SIG=="}),
                        ],
                    ),
                    (
                        json!({"type":"tool_use","id":"toolu_1","name":"echo","input":{}}),
                        vec![
                            json!({"type":"input_json_delta","partial_json":"{\"text\":"}),
                            json!({"type":"input_json_delta","partial_json":"\"ping\"}"}),
                        ],
                    ),
                ],
                "tool_use",
            ));
            raw.sse(&events(&[text_block(&["Done."])], "end_turn"));
        } else {
            raw.json(&message(&json!([thinking, call]), "tool_use"));
            raw.json(&message(
                &json!([{"type":"text","text":"Done."}]),
                "end_turn",
            ));
        }
        let (mut agent, rec) = agent(&raw, streaming);
        let out = agent.run_loop("Echo ping").unwrap();
        assert_eq!(
            out.answer.as_deref(),
            Some("Done."),
            "streaming {streaming}"
        );
        assert_eq!(out.steps, 1);
        assert!(
            rec.events().iter().any(
                |e| matches!(e, Event::Thinking { content, .. } if content == "I should echo.")
            )
        );
        assert_valid_history(agent.messages());
        let second = &raw.seen()[1].body;
        assert_eq!(
            second["messages"],
            json!([
                {"role":"user","content":[{"type":"text","text":"Echo ping"}]},
                {"role":"assistant","content":[
                    {"type":"thinking","thinking":"I should echo.","signature":"SIG=="},
                    {"type":"tool_use","id":"toolu_1","name":"echo","input":{"text":"ping"}}]},
                {"role":"user","content":[
                    {"type":"tool_result","tool_use_id":"toolu_1","content":"echo: ping",
                     "cache_control":{"type":"ephemeral"}}]}
            ]),
            "streaming {streaming}"
        );
        let text = second.to_string();
        assert_eq!(text.matches("cache_control").count(), 3, "{text}");
        assert_eq!(second["tools"][0]["cache_control"]["type"], "ephemeral");
    }
}

#[test]
fn parallel_results_and_a_following_user_message_share_one_user_turn() {
    let raw = Raw::start();
    raw.json(&message(
        &json!([
            {"type":"tool_use","id":"a","name":"echo","input":{"text":"1"}},
            {"type":"tool_use","id":"b","name":"echo","input":{"text":"2"}}
        ]),
        "tool_use",
    ));
    raw.json(&message(
        &json!([{"type":"text","text":"Both."}]),
        "end_turn",
    ));
    raw.json(&message(
        &json!([{"type":"text","text":"Again."}]),
        "end_turn",
    ));
    let (mut agent, _) = agent(&raw, false);
    agent.run_loop("Echo twice").unwrap();
    let m = &raw.seen()[1].body["messages"];
    assert_eq!(m[2]["role"], "user");
    assert_eq!(m[2]["content"][0]["tool_use_id"], "a");
    assert_eq!(m[2]["content"][1]["tool_use_id"], "b");
    agent.run_loop("Next").unwrap();
    let m = raw.seen()[2].body["messages"].as_array().unwrap().clone();
    let roles: Vec<&str> = m.iter().map(|t| t["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    // The prompt-cache breakpoint moved to the new end.
    assert_eq!(m[4]["content"][0]["cache_control"]["type"], "ephemeral");
    assert!(m[2]["content"][1].get("cache_control").is_none());
}

#[test]
fn prompt_caching_off_places_no_breakpoints() {
    let raw = Raw::start();
    raw.json(&message(&json!([{"type":"text","text":"Hi."}]), "end_turn"));
    let mut agent = Agent::builder(raw.transport().with_prompt_caching(false))
        .system_prompt("S")
        .http(fast_http())
        .add_tool(echo_tool())
        .build()
        .unwrap();
    agent.run_loop("Hi").unwrap();
    assert!(!raw.seen()[0].body.to_string().contains("cache_control"));
}

#[test]
fn a_mid_stream_error_is_typed_and_the_next_turn_works() {
    let raw = Raw::start();
    let mut bad = events(&[text_block(&["Par"])], "end_turn");
    bad.truncate(4);
    bad.push(json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}));
    raw.sse(&bad);
    raw.sse(&events(&[text_block(&["Fine."])], "end_turn"));
    let (mut agent, _) = agent(&raw, true);
    let err = agent.run_loop("Hi").unwrap_err();
    // Classified as the same error before a stream would be.
    assert_eq!(err.kind(), ErrorKind::Server, "{err:?}");
    assert_eq!(err.status(), Some(529));
    assert!(
        err.to_string()
            .contains("server error in stream: Overloaded (overloaded_error)"),
        "{err}"
    );
    let out = agent.retry_turn().unwrap();
    assert_eq!(out.answer.as_deref(), Some("Fine."));
    assert_valid_history(agent.messages());
}

#[test]
fn a_truncated_stream_is_truncated_and_the_next_turn_works() {
    let raw = Raw::start();
    let mut cut = events(&[text_block(&["Half"])], "end_turn");
    cut.pop(); // no message_stop
    raw.sse(&cut);
    raw.sse(&events(&[text_block(&["Whole."])], "end_turn"));
    let (mut agent, _) = agent(&raw, true);
    let err = agent.run_loop("Hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Truncated, "{err:?}");
    let out = agent.retry_turn().unwrap();
    assert_eq!(out.answer.as_deref(), Some("Whole."));
    assert_eq!(
        agent
            .messages()
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count(),
        1
    );
}

#[test]
fn overloaded_529_is_retried() {
    let raw = Raw::start();
    raw.push((
        529,
        "application/json",
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            .to_string(),
    ));
    raw.json(&message(
        &json!([{"type":"text","text":"Back."}]),
        "end_turn",
    ));
    let (mut agent, rec) = agent(&raw, false);
    let out = agent.run_loop("Hi").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Back."));
    assert_eq!(raw.seen().len(), 2);
    assert!(rec.events().iter().any(|e| e.kind() == "retrying"));
}

/// A conversation on chat completions continued on Anthropic and back:
/// the history translates, and neither API's reasoning reaches the other.
#[test]
fn switching_between_chat_completions_and_anthropic() {
    let chat = FakeServer::start();
    chat.push(Reply::text("From chat.").with_reasoning("chat thoughts"));
    chat.push(Reply::text("Chat again."));
    let raw = Raw::start();
    raw.json(&message(
        &json!([{"type":"thinking","thinking":"claude thoughts","signature":"S"},
               {"type":"text","text":"From Claude."}]),
        "end_turn",
    ));
    let mut agent = Agent::builder(chat.transport())
        .system_prompt("S")
        .http(fast_http())
        .replay_reasoning(true)
        .build()
        .unwrap();
    agent.run_loop("one").unwrap();
    let out = agent.run_loop_with("two", raw.transport()).unwrap();
    assert_eq!(out.answer.as_deref(), Some("From Claude."));
    let sent = &raw.seen()[0].body;
    assert_eq!(
        sent["messages"][1],
        json!({"role":"assistant","content":[{"type":"text","text":"From chat."}]})
    );
    assert!(!sent.to_string().contains("chat thoughts"));
    let claude = agent.messages().last().unwrap().clone();
    assert!(claude.provider_data.is_some());
    agent.run_loop_with("three", chat.transport()).unwrap();
    let back = chat.chat_requests()[1].body.clone().unwrap().to_string();
    assert!(!back.contains("claude thoughts"), "{back}");
    assert!(!back.contains("signature"), "{back}");
    assert!(back.contains("From Claude."));
}

#[test]
fn overloaded_mid_stream_falls_back_like_a_529() {
    let primary = Raw::start();
    let mut bad = events(&[text_block(&["Par"])], "end_turn");
    bad.truncate(4);
    bad.push(json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}));
    primary.sse(&bad);
    let backup = Raw::start();
    backup.sse(&events(&[text_block(&["From the backup."])], "end_turn"));
    let rec = pikuri::listeners::InMemoryEventList::new();
    let mut agent = Agent::builder(primary.transport())
        .http(fast_http().with_max_retries(0))
        .streaming(true)
        .add_fallback(backup.transport().with_model("claude-backup"))
        .add_listener(rec.clone())
        .build()
        .unwrap();
    let out = agent.run_loop("Hi").unwrap();
    assert_eq!(out.answer.as_deref(), Some("From the backup."));
    assert!(rec.kinds().contains(&"model_fallback"), "{:?}", rec.kinds());
    assert_eq!(backup.seen()[0].body["model"], "claude-backup");
}
