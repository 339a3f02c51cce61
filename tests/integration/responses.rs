//! Issue 29: OpenAI's Responses API through the public API, against a raw
//! scripted server that serves each request the next bytes it was given
//! and records every request (path and JSON body).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use parking_lot::Mutex;
use pikuri::listeners::InMemoryEventList;
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Api, ChatTransport, ErrorKind, Event, Role};
use serde_json::{Value, json};

use crate::util::{assert_valid_history, fast_http, streamed_text};

/// One recorded request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    body: Value,
}

/// A server that answers each `POST` with the next scripted
/// `(content type, body)` (status 200), anything else with 404, one
/// request per connection.
struct Scripted {
    base: String,
    replies: Arc<Mutex<VecDeque<(&'static str, String)>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    fn start() -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let replies: Arc<Mutex<VecDeque<(&'static str, String)>>> = Arc::default();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let (r, s) = (Arc::clone(&replies), Arc::clone(&seen));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let (method, path, body) = read(&mut conn);
                let reply = if method == "POST" {
                    s.lock().push(Seen {
                        path,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                    });
                    r.lock().pop_front()
                } else {
                    None
                };
                let (status, ct, body) = match reply {
                    Some((ct, body)) => ("200 OK", ct, body),
                    None => ("404 Not Found", "text/plain", "not found".to_string()),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(body.as_bytes());
            }
        });
        Scripted {
            base,
            replies,
            seen,
        }
    }

    fn json(&self, body: &Value) {
        self.replies
            .lock()
            .push_back(("application/json", body.to_string()));
    }

    fn sse(&self, events: &[Value]) {
        self.replies
            .lock()
            .push_back(("text/event-stream", sse(events)));
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }

    fn transport(&self, api: Api) -> ChatTransport {
        ChatTransport::new("gpt-test")
            .with_api_base(self.base.as_str())
            .with_api(api)
    }
}

/// The head (method, path) and the `Content-Length` body of one request.
fn read(conn: &mut TcpStream) -> (String, String, Vec<u8>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head).to_string();
    let mut first = head.split_whitespace();
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let len: usize = head
        .to_ascii_lowercase()
        .lines()
        .find_map(|l| l.strip_prefix("content-length:").map(str::to_string))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = conn.read_exact(&mut body);
    (method, path, body)
}

/// SSE with each event named by its `type`.
fn sse(events: &[Value]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for e in events {
        let kind = e["type"].as_str().unwrap_or("");
        let _ = write!(out, "event: {kind}\ndata: {e}\n\n");
    }
    out
}

fn usage(input: u64, cached: u64, output: u64, reasoning: u64) -> Value {
    json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output,
    })
}

fn text_item(text: &str) -> Value {
    json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

fn response(output: &[Value], usage: &Value) -> Value {
    json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-test-2025",
           "output": output, "usage": usage})
}

/// A streamed text answer, as OpenAI sends it.
fn streamed_text_answer(pieces: &[&str]) -> Vec<Value> {
    let text: String = pieces.concat();
    let mut events = vec![
        json!({"type": "response.created", "sequence_number": 0,
               "response": {"id": "resp_2", "status": "in_progress", "model": "gpt-test-2025", "output": []}}),
        json!({"type": "response.output_item.added", "output_index": 0,
               "item": {"type": "message", "id": "msg_2", "role": "assistant", "status": "in_progress", "content": []}}),
        json!({"type": "response.content_part.added", "item_id": "msg_2", "output_index": 0, "content_index": 0,
               "part": {"type": "output_text", "text": ""}}),
    ];
    for p in pieces {
        events.push(
            json!({"type": "response.output_text.delta", "item_id": "msg_2",
                           "output_index": 0, "content_index": 0, "delta": p, "logprobs": []}),
        );
    }
    let item = json!({"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": text}]});
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(json!({"type": "response.completed",
                       "response": {"id": "resp_2", "status": "completed", "model": "gpt-test-2025",
                                    "output": [item], "usage": usage(50, 20, 5, 0)}}));
    events
}

fn agent(server: &Scripted, streaming: bool) -> (Agent, InMemoryEventList) {
    let rec = InMemoryEventList::new();
    let agent = Agent::builder(server.transport(Api::OpenAiResponses))
        .system_prompt("You are a test agent.")
        .http(fast_http().with_max_retries(0))
        .streaming(streaming)
        .add_tool(add())
        .add_listener(rec.clone())
        .build()
        .expect("agent builds");
    (agent, rec)
}

fn add() -> FnTool {
    FnTool::new(
        "add",
        "Adds two numbers.",
        Parameters::from_json_schema(json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        }))
        .unwrap(),
        |args, _| {
            Ok(
                json!(args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0))
                    .to_string(),
            )
        },
    )
}

/// input, cached, output, thinking.
type Figures = (Option<u64>, Option<u64>, Option<u64>, Option<u64>);

fn tokens(rec: &InMemoryEventList) -> Vec<Figures> {
    rec.events()
        .iter()
        .filter_map(|e| match e {
            Event::Tokens {
                input,
                output,
                cached,
                thinking,
                ..
            } => Some((*input, *cached, *output, *thinking)),
            _ => None,
        })
        .collect()
}

/// The body's `input` items of one `type` (`message` items by role).
fn items<'v>(body: &'v Value, kind: &str) -> Vec<&'v Value> {
    body["input"]
        .as_array()
        .expect("input items")
        .iter()
        .filter(|i| i["type"] == kind)
        .collect()
}

#[test]
fn plain_answer_request_shape_and_usage() {
    let server = Scripted::start();
    server.json(&response(&[text_item("Paris.")], &usage(100, 40, 7, 3)));
    let (mut agent, rec) = agent(&server, false);
    let out = agent.run_loop("Capital of France?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Paris."));
    // input excludes the cached tokens; reasoning tokens are the thinking.
    assert_eq!(tokens(&rec), vec![(Some(60), Some(40), Some(7), Some(3))]);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/responses");
    let b = &seen[0].body;
    assert_eq!(b["model"], "gpt-test");
    assert_eq!(b["instructions"], "You are a test agent.");
    assert_eq!(b["store"], false);
    assert_eq!(b["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(b["stream"], false);
    assert!(b.get("messages").is_none(), "{b}");
    assert_eq!(
        b["input"],
        json!([{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "Capital of France?"}]}])
    );
    assert_eq!(
        b["tools"],
        json!([{"type": "function", "name": "add", "description": "Adds two numbers.",
                "parameters": {"type": "object",
                               "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                               "required": ["a", "b"]}}])
    );
    let last = agent.messages().last().unwrap();
    assert_eq!(last.model.as_deref(), Some("gpt-test-2025"));
}

#[test]
fn streamed_answer_arrives_in_deltas_with_usage() {
    let server = Scripted::start();
    server.sse(&streamed_text_answer(&["Hel", "lo", " there"]));
    let (mut agent, rec) = agent(&server, true);
    let out = agent.run_loop("Say hello.").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Hello there"));
    assert_eq!(streamed_text(&rec.events()), "Hello there");
    assert_eq!(tokens(&rec), vec![(Some(30), Some(20), Some(5), Some(0))]);
    assert_eq!(server.seen()[0].body["stream"], true);
}

/// A streamed `function_call` item with argument deltas, then the answer.
fn streamed_call(call_id: &str, pieces: &[&str]) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": "add",
                 "arguments": "", "status": "in_progress"}}),
    ];
    for p in pieces {
        events.push(
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                           "output_index": 0, "delta": p}),
        );
    }
    let args: String = pieces.concat();
    events.push(
        json!({"type": "response.function_call_arguments.done", "item_id": "fc_1",
                       "output_index": 0, "arguments": args}),
    );
    events.push(
        json!({"type": "response.output_item.done", "output_index": 0,
        "item": {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": "add",
                 "arguments": args, "status": "completed"}}),
    );
    events.push(json!({"type": "response.completed",
        "response": {"status": "completed", "model": "gpt-test-2025", "usage": usage(10, 0, 5, 0)}}));
    events
}

#[test]
fn a_tool_round_sends_function_call_and_output_items() {
    let server = Scripted::start();
    server.sse(&streamed_call(
        "call_abc",
        &["{\"a\":", " 2, \"b\"", ": 3}"],
    ));
    server.sse(&streamed_text_answer(&["5"]));
    let (mut agent, rec) = agent(&server, true);
    let out = agent.run_loop("2+3?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("5"));
    let calls: Vec<Value> = rec
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall { arguments, .. } => Some(arguments.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, vec![json!({"a": 2, "b": 3})]);
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1].body["input"],
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "2+3?"}]},
            {"type": "function_call", "call_id": "call_abc", "name": "add", "arguments": "{\"a\": 2, \"b\": 3}"},
            {"type": "function_call_output", "call_id": "call_abc", "output": "5"},
        ])
    );
    assert_valid_history(agent.messages());
}

#[test]
fn reasoning_items_go_back_verbatim_to_the_same_model_only() {
    let reasoning = json!({"type": "reasoning", "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Adding two numbers."}],
        "encrypted_content": "gAAAAB-opaque"});
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add",
                      "arguments": "{\"a\":1,\"b\":1}", "status": "completed"});
    let server = Scripted::start();
    server.json(&response(&[reasoning.clone(), call], &usage(10, 0, 20, 12)));
    server.json(&response(&[text_item("2")], &usage(30, 10, 1, 0)));
    let (mut agent, rec) = agent(&server, false);
    agent.run_loop("1+1?").unwrap();
    assert!(
        rec.events().iter().any(
            |e| matches!(e, Event::Thinking { content, .. } if content == "Adding two numbers.")
        )
    );
    let second = &server.seen()[1].body;
    let input = second["input"].as_array().unwrap();
    // In place: after the user message, before the call it led to.
    assert_eq!(input[1], reasoning);
    assert_eq!(input[2]["type"], "function_call");
    // The history keeps it, for this API, endpoint and model.
    let pd = agent.messages()[1].provider_data.clone().expect("kept");
    assert!(pd.is_for(Api::OpenAiResponses, &server.base, "gpt-test"));

    // Another model on the same server gets no reasoning item.
    server.json(&response(&[text_item("ok")], &usage(1, 0, 1, 0)));
    let other = ChatTransport::new("other-model")
        .with_api_base(server.base.as_str())
        .with_api(Api::OpenAiResponses);
    agent.run_loop_with("and now?", other).unwrap();
    let third = &server.seen()[2].body;
    assert!(items(third, "reasoning").is_empty(), "{third}");
    assert_eq!(items(third, "function_call").len(), 1);
}

pikuri::tool::schema_type! {
    /// A count.
    #[derive(PartialEq)]
    struct Count { n: u32 }
}

#[test]
fn structured_output_goes_as_text_format() {
    let server = Scripted::start();
    server.json(&response(&[text_item(r#"{"n": 3}"#)], &usage(5, 0, 3, 0)));
    let rec = InMemoryEventList::new();
    let mut agent = Agent::builder(server.transport(Api::OpenAiResponses))
        .http(fast_http())
        .add_listener(rec)
        .build()
        .unwrap();
    let typed = agent.run_typed::<Count>("How many?").unwrap();
    assert_eq!(typed.value, Count { n: 3 });
    let b = &server.seen()[0].body;
    assert!(b.get("response_format").is_none(), "{b}");
    let format = &b["text"]["format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["name"], "Count");
    assert_eq!(format["strict"], true);
    assert_eq!(format["schema"]["properties"]["n"]["type"], "integer");
}

#[test]
fn a_mid_stream_error_is_typed_and_the_next_turn_works() {
    let server = Scripted::start();
    let mut events = streamed_text_answer(&["Hal"]);
    events.truncate(4);
    events.push(json!({"type": "error", "code": "server_error",
                       "message": "The model crashed", "param": null, "sequence_number": 5}));
    server.sse(&events);
    server.sse(&[
        json!({"type": "response.failed", "response": {"status": "failed",
               "error": {"code": "server_error", "message": "Backend exploded"}}}),
    ]);
    server.sse(&streamed_text_answer(&["fine"]));
    let (mut agent, _) = agent(&server, true);
    // Issue 36: an in-stream `server_error` is the 500 it stands for (so
    // retry classification and fallback treat it as before a stream).
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Server, "{err}");
    assert!(
        err.to_string().contains("The model crashed (server_error)"),
        "{err}"
    );
    let err = agent.run_loop("again").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Server, "{err}");
    assert!(err.to_string().contains("Backend exploded"), "{err}");
    let out = agent.run_loop("once more").unwrap();
    assert_eq!(out.answer.as_deref(), Some("fine"));
    assert_valid_history(agent.messages());
}

#[test]
fn a_stream_without_its_end_event_is_truncated_and_the_next_turn_works() {
    let server = Scripted::start();
    let mut events = streamed_call("call_1", &["{\"a\": 1"]);
    events.truncate(2);
    server.sse(&events);
    server.sse(&streamed_text_answer(&["after"]));
    let (mut agent, _) = agent(&server, true);
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Truncated, "{err}");
    let out = agent.run_loop("again").unwrap();
    assert_eq!(out.answer.as_deref(), Some("after"));
    assert_valid_history(agent.messages());
    // The failed turn left no call without its answer in the request.
    let last = &server.seen()[1].body;
    assert!(items(last, "function_call").is_empty(), "{last}");
}

#[test]
fn switching_between_chat_completions_and_responses_keeps_the_conversation() {
    let server = Scripted::start();
    let chat = json!({"id": "c1", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "one"}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1}});
    server.json(&chat);
    let reasoning = json!({"type": "reasoning", "id": "rs_9", "summary": [],
                           "encrypted_content": "opaque"});
    server.json(&response(
        &[reasoning, text_item("two")],
        &usage(9, 0, 1, 0),
    ));
    server.json(&chat);
    let rec = InMemoryEventList::new();
    let mut agent = Agent::builder(server.transport(Api::ChatCompletions))
        .system_prompt("Sys.")
        .http(fast_http())
        .add_listener(rec)
        .build()
        .unwrap();
    agent.run_loop("first").unwrap();
    agent
        .run_loop_with("second", server.transport(Api::OpenAiResponses))
        .unwrap();
    agent
        .run_loop_with("third", server.transport(Api::ChatCompletions))
        .unwrap();
    let seen = server.seen();
    let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions",
            "/v1/responses",
            "/v1/chat/completions"
        ]
    );
    // On Responses, the chat-completions history as input items.
    assert_eq!(seen[1].body["instructions"], "Sys.");
    assert_eq!(
        seen[1].body["input"],
        json!([
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "first"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}]},
        ])
    );
    // Back on chat completions: the Responses answer is a plain message,
    // its reasoning item is not sent.
    let messages = seen[2].body["messages"].as_array().unwrap();
    let texts: Vec<&str> = messages
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(texts, ["Sys.", "first", "one", "second", "two", "third"]);
    assert!(!seen[2].body.to_string().contains("opaque"));
    assert_eq!(agent.messages()[3].role, Role::Assistant);
}
