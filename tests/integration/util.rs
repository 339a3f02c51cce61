//! Shared helpers.

use std::collections::HashSet;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use pikuri::testing::FakeServer;
use pikuri::tool::{FnTool, Parameters};
use pikuri::{
    Agent, ChatTransport, Configurator, Event, HttpConfig, Message, Role,
    listeners::InMemoryEventList,
};

/// The assistant text streamed in `events`: every `AssistantDelta`'s
/// content, in order (a listener that fell behind may have seen them
/// joined; the text is the same).
pub(crate) fn streamed_text(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantDelta { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect()
}

/// A port nobody listens on.
pub(crate) fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Read one HTTP request from `conn`: the head, then a body of its
/// `Content-Length`, for hand-written servers that answer it however they
/// like.
pub(crate) fn read_request(conn: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = conn.read_exact(&mut body);
}

/// HTTP settings for tests: quick retries, short timeouts.
pub(crate) fn fast_http() -> HttpConfig {
    HttpConfig::default()
        .with_retry_base(Duration::from_millis(5))
        .with_read_timeout(Duration::from_secs(20))
        .with_probe_timeout(Duration::from_millis(500))
}

/// An agent on `server` with a recorder, configured further by `f`.
pub(crate) fn agent_with(
    server: &FakeServer,
    f: impl FnOnce(Configurator) -> Configurator,
) -> (Agent, InMemoryEventList) {
    let rec = InMemoryEventList::new();
    let cfg = Agent::builder(server.transport())
        .system_prompt("You are a test agent.")
        .http(fast_http())
        .add_listener(rec.clone());
    (f(cfg).build().expect("agent builds"), rec)
}

/// A strict `FakeServer` (it rejects a request its API would reject).
pub(crate) fn strict_server() -> FakeServer {
    let server = FakeServer::start();
    server.set_strict(true);
    server
}

/// An agent on `transport` with a system prompt, a recorder and no
/// retries, configured further by `f`.
pub(crate) fn agent_on(
    transport: ChatTransport,
    f: impl FnOnce(Configurator) -> Configurator,
) -> (Agent, InMemoryEventList) {
    let rec = InMemoryEventList::new();
    let cfg = Agent::builder(transport)
        .system_prompt("You are a test agent.")
        .http(fast_http().with_max_retries(0))
        .add_listener(rec.clone());
    (f(cfg).build().expect("agent builds"), rec)
}

/// `add(a, b)`: the sum, as text.
pub(crate) fn add() -> FnTool {
    FnTool::new(
        "add",
        "Adds two integers.",
        Parameters::builder()
            .required_integer("a", "first")
            .required_integer("b", "second")
            .build(),
        |args, _| {
            let (a, b) = (args["a"].as_i64().unwrap(), args["b"].as_i64().unwrap());
            Ok((a + b).to_string())
        },
    )
}

/// `echo(text)`: `echo: <text>`.
pub(crate) fn echo_tool() -> FnTool {
    FnTool::new(
        "echo",
        "Echoes its text.",
        Parameters::builder()
            .required_string("text", "What to echo")
            .build(),
        |args, _| {
            Ok(format!(
                "echo: {}",
                args["text"].as_str().unwrap_or_default()
            ))
        },
    )
}

/// Every assistant tool call is answered before the next non-tool message,
/// and every tool message answers an open call.
pub(crate) fn assert_valid_history(messages: &[Message]) {
    let mut open: HashSet<String> = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            let id = m.tool_call_id.clone().unwrap_or_default();
            assert!(
                open.remove(&id),
                "message {i}: tool result {id} answers no open call: {messages:#?}"
            );
        } else {
            assert!(
                open.is_empty(),
                "message {i}: calls {open:?} unanswered: {messages:#?}"
            );
            if m.role == Role::Assistant {
                open.extend(m.tool_calls.iter().map(|c| c.id.clone()));
            }
        }
    }
    assert!(open.is_empty(), "calls {open:?} unanswered at the end");
}

/// The kinds of the events of the main agent, without context_cap, with
/// neighbouring deltas merged (how a stream is cut into deltas depends on
/// the listener's pace).
pub(crate) fn main_kinds(rec: &InMemoryEventList) -> Vec<&'static str> {
    pikuri::testing::merge_deltas(rec.events())
        .iter()
        .filter(|e| e.agent().is_empty())
        .map(Event::kind)
        .filter(|k| *k != "context_cap")
        .collect()
}

/// Concatenated AssistantDelta text of agent `id`.
pub(crate) fn deltas(rec: &InMemoryEventList, id: &str) -> String {
    rec.events()
        .iter()
        .filter_map(|e| match e {
            Event::AssistantDelta { agent, content } if &**agent == id => Some(content.clone()),
            _ => None,
        })
        .collect()
}
