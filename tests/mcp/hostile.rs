//! Hostile servers (issue 28, classes 1-4): a stdio server that stops
//! reading, a flood of notifications, a server that dies at start, a
//! daemon that leaves the process group, and an HTTP server that echoes
//! its bearer token in an odd-cased event stream.
//!
//! Each scenario that could hang runs under [`bounded`], a watchdog with a
//! generous bound: a hang fails the test instead of stalling the suite, and
//! nothing asserts on elapsed time.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use pikuri::listeners::InMemoryEventList;
use pikuri::mcp::{Client, Registry, Server};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Cancellable, ErrorKind, Event, ToolContext};
use serde_json::{Value, json};

use super::{assert_history_valid, eventually, processes_tagged, python, unique_tag};

/// Run `f` on a thread of its own and return its result, failing the test
/// if it has not finished after `limit` (a hang, not slowness: the limits
/// are many times what the scenario needs).
pub(super) fn bounded<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => panic!("still running after {limit:?} ({e}): it hangs"),
    }
}

pub(super) const WATCHDOG: Duration = Duration::from_secs(120);

/// The fake stdio server with `args` and a tag in its environment.
fn fake(args: &[&str]) -> Option<(Server, String)> {
    let (py, script) = python()?;
    let tag = unique_tag("hostile");
    let mut command_line = vec![script];
    command_line.extend(args.iter().map(|s| (*s).to_string()));
    Some((
        Server::stdio(py, command_line).with_env("PIKURI_MCP_TAG", &tag),
        tag,
    ))
}

/// The last message the model was sent in request `i`.
/// A model that makes the server deaf, then calls it with 1 MB of
/// arguments: far more than a pipe holds, so the write cannot finish.
fn deaf_then_large_echo() -> FakeServer {
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__deaf", json!({})));
    model.push(Reply::tool_call(
        "fake__echo",
        json!({"text": "x".repeat(1 << 20)}),
    ));
    model
}

fn observation(model: &FakeServer, i: usize) -> Value {
    model.chat_requests()[i].messages().last().unwrap()["content"].clone()
}

#[test]
fn a_server_that_stops_reading_cannot_hold_a_large_call_past_its_timeout() {
    let Some((server, tag)) = fake(&[]) else {
        return;
    };
    bounded(WATCHDOG, move || {
        let model = deaf_then_large_echo();
        model.push(Reply::text("gave up"));
        model.push(Reply::text("next turn"));
        let mut agent = Agent::builder(model.transport())
            .add_extension(Registry::new().server(
                "fake",
                server.with_request_timeout(Duration::from_millis(500)),
            ))
            .build()
            .unwrap();
        assert_eq!(
            agent
                .run_loop("deafen it, then echo")
                .unwrap()
                .answer
                .as_deref(),
            Some("gave up")
        );
        assert_eq!(observation(&model, 1), "deaf now");
        assert_eq!(
            observation(&model, 2),
            "Error: MCP server `fake` did not answer within 0.5 s; the call was cancelled"
        );
        assert_history_valid(agent.messages());
        assert_eq!(
            agent.run_loop("and now?").unwrap().answer.as_deref(),
            Some("next turn")
        );
        // The writer is still stuck on the 1 MB line: close ends it.
        agent.close();
    });
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 0));
}

#[test]
fn a_cancel_ends_a_call_whose_large_arguments_cannot_be_written() {
    let Some((server, _tag)) = fake(&[]) else {
        return;
    };
    bounded(WATCHDOG, move || {
        let model = deaf_then_large_echo();
        model.push(Reply::text("next turn"));
        let cancel = Cancellable::new();
        let fired = std::sync::Arc::new(AtomicBool::new(false));
        let (c, f) = (cancel.clone(), std::sync::Arc::clone(&fired));
        // Cancel once the large call is under way (its write blocked).
        let watcher = move |e: &Event| {
            if let Event::ToolCall { name, .. } = e
                && name == "fake__echo"
                && !f.swap(true, Ordering::SeqCst)
            {
                let c = c.clone();
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(300));
                    c.cancel();
                });
            }
        };
        let mut agent = Agent::builder(model.transport())
            .cancellable(cancel.clone())
            .add_listener(watcher)
            // Only the cancel can end this call.
            .add_extension(Registry::new().server(
                "fake",
                server.with_request_timeout(Duration::from_secs(600)),
            ))
            .build()
            .unwrap();
        let err = agent.run_loop("deafen it, then echo").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Cancelled, "{err:?}");
        assert!(fired.load(Ordering::SeqCst));
        assert_history_valid(agent.messages());
        cancel.reset();
        assert_eq!(
            agent.run_loop("and now?").unwrap().answer.as_deref(),
            Some("next turn")
        );
        agent.close();
    });
}

#[test]
fn close_ends_a_call_waiting_to_write_to_a_server_that_does_not_read() {
    let Some((server, tag)) = fake(&[]) else {
        return;
    };
    bounded(WATCHDOG, move || {
        let client = Client::connect(
            "fake",
            &server.with_request_timeout(Duration::from_secs(600)),
        )
        .unwrap();
        let cx = ToolContext::detached();
        assert_eq!(
            client.call_tool("deaf", &json!({}), &cx).unwrap(),
            "deaf now"
        );
        // More calls than the writer's queue holds, each 1 MB, each waiting
        // on a 600 s timeout: only close can end them.
        let calls: Vec<_> = (0..20)
            .map(|_| {
                let client = client.clone();
                thread::spawn(move || {
                    let big = json!({"text": "x".repeat(1 << 20)});
                    client.call_tool("echo", &big, &ToolContext::detached())
                })
            })
            .collect();
        // Time for the calls to start and block (not an assertion: a call
        // that has not started yet fails with "closed" as well).
        thread::sleep(Duration::from_secs(2));
        let started = std::time::Instant::now();
        client.close();
        eprintln!(
            "close with 20 calls blocked on a deaf server: {:?}",
            started.elapsed()
        );
        for call in calls {
            let err = call.join().unwrap().unwrap_err();
            assert!(err.message().contains("closed"), "{err}");
        }
    });
    assert_eq!(processes_tagged(&tag), 0);
}

#[test]
fn close_ends_a_restart_whose_handshake_hangs() {
    let marker = std::env::temp_dir().join(format!("pikuri-{}.restart", unique_tag("m")));
    let _ = std::fs::remove_file(&marker);
    let Some((server, tag)) = fake(&["--hang-on-restart", &marker.display().to_string()]) else {
        return;
    };
    // Only close can end the restart's handshake.
    let server = server.with_startup_timeout(Duration::from_secs(600));
    bounded(WATCHDOG, move || {
        let client = Client::connect("fake", &server).unwrap();
        let cx = ToolContext::detached();
        assert!(client.call_tool("crash", &json!({}), &cx).is_err());
        let restarting = {
            let client = client.clone();
            thread::spawn(move || {
                client.call_tool("echo", &json!({"text": "x"}), &ToolContext::detached())
            })
        };
        // Time for the restart to begin (not an assertion: a close that
        // comes first makes the call fail as closed too).
        thread::sleep(Duration::from_secs(2));
        // Neither an accessor nor close waits for the handshake.
        let _ = client.server_name();
        client.close();
        let err = restarting.join().unwrap().unwrap_err();
        assert!(err.message().contains("closed"), "{err}");
    });
    let _ = std::fs::remove_file(&marker);
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 0));
}

#[test]
fn a_flood_of_notifications_does_not_starve_the_answer() {
    let Some((server, _tag)) = fake(&[]) else {
        return;
    };
    bounded(WATCHDOG, move || {
        let model = FakeServer::start();
        model.push(Reply::tool_call("fake__flood", json!({"count": 100_000})));
        model.push(Reply::text("ok"));
        let seen = InMemoryEventList::new();
        // A listener that takes 1 ms per log event: 100 s for all of them.
        let slow = |e: &Event| {
            if let Event::Domain { name, .. } = e
                && name == "mcp.log"
            {
                thread::sleep(Duration::from_millis(1));
            }
        };
        let mut agent = Agent::builder(model.transport())
            .add_listener(slow)
            .add_listener(seen.clone())
            .add_extension(
                Registry::new()
                    .server("fake", server.with_request_timeout(Duration::from_secs(30))),
            )
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        assert_eq!(
            agent.run_loop("flood").unwrap().answer.as_deref(),
            Some("ok")
        );
        // For the record, not asserted: machines are noisy.
        eprintln!(
            "100,000 notifications, then the answer: {:?}",
            started.elapsed()
        );
        assert_eq!(observation(&model, 1), "flooded");
        agent.close();
        // Some notices got through; not all of them had to.
        assert!(
            seen.events()
                .iter()
                .any(|e| matches!(e, Event::Domain { name, .. } if name == "mcp.log"))
        );
    });
}

#[test]
fn a_server_that_dies_at_start_says_why_in_the_error() {
    let Some((server, _tag)) = fake(&["--die-at-start"]) else {
        return;
    };
    let err = bounded(WATCHDOG, move || {
        Client::connect("node", &server).unwrap_err()
    });
    let text = err.to_string();
    assert!(
        text.contains("Error: Cannot find module '/nowhere/server.js'"),
        "{text}"
    );
    assert!(text.contains("its stderr ended with"), "{text}");
    // The tail only: 20 lines at most, the escape sequence made visible.
    assert!(!text.contains("noise line 0\n"), "{text}");
    assert!(text.contains("noise line 57"), "{text}");
    assert!(text.len() < 2048 + 400, "{} bytes: {text}", text.len());
    assert!(!text.contains('\x1b'), "{text:?}");
    assert!(text.contains(r"\x1b[31m"), "{text}");
    // The same through an agent: the build fails with the reason.
    let Some((server, _tag)) = fake(&["--die-at-start"]) else {
        return;
    };
    let model = FakeServer::start();
    let err = Agent::builder(model.transport())
        .add_extension(Registry::new().server("node", server))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("Cannot find module"), "{err}");
}

#[test]
fn close_reaches_a_descendant_that_left_the_process_group() {
    let Some((server, tag)) = fake(&["--setsid-child"]) else {
        return;
    };
    if !std::path::Path::new("/proc/self/stat").exists() {
        eprintln!("skipped: needs Linux /proc");
        return;
    }
    let client = Client::connect("fake", &server).unwrap();
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 2));
    bounded(WATCHDOG, move || client.close());
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 0));
}

// ---- secrets and media types over HTTP ----

const TOKEN: &str = "mcp-tok-3f9a7c1e";
const KEY: &str = "sk-chat-key-5b2d8e";

/// Log lines of pikuri's targets that hold a secret (one of the two
/// above, or any text with `s3cret` in it) or a redaction, from every test
/// of this binary (`log` takes one logger per process).
pub(super) static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("pikuri")
    }
    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let line = format!("{} {}", r.target(), r.args());
        if line.contains(TOKEN)
            || line.contains(KEY)
            || line.contains("s3cret")
            || line.contains("<redacted>")
        {
            LINES.lock().unwrap().push(line);
        }
    }
    fn flush(&self) {}
}

pub(super) fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_logger(&Capture).expect("the only logger of this binary");
        log::set_max_level(log::LevelFilter::Debug);
    });
}

/// A tiny Streamable HTTP MCP server that echoes what it is sent: the
/// `Authorization` header goes into its instructions, a tool description,
/// a log notification, a result, and a 500 body; `/locked` answers 401
/// with the header. Event streams are sent as `Text/Event-Stream;
/// charset=UTF-8`. Returns its base URL.
fn echoing_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            thread::spawn(move || serve(conn));
        }
    });
    url
}

fn serve(conn: TcpStream) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            head.push(line.trim_end().to_string());
        }
        let path = head[0].split(' ').nth(1).unwrap_or("").to_string();
        let method = head[0].split(' ').next().unwrap_or("").to_string();
        let header = |name: &str| {
            head.iter().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let auth = header("authorization").unwrap_or_default();
        let len: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (status, ctype, text) = answer(&method, &path, &auth, &msg);
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nMcp-Session-Id: s1\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if out.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn answer(method: &str, path: &str, auth: &str, msg: &Value) -> (u16, &'static str, String) {
    const JSON: &str = "application/json";
    const SSE: &str = "Text/Event-Stream; charset=UTF-8";
    if method == "DELETE" {
        return (200, JSON, String::new());
    }
    if path == "/locked" {
        return (401, "text/plain", format!("bad token: {auth}"));
    }
    let id = msg["id"].clone();
    let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    match msg["method"].as_str().unwrap_or("") {
        "initialize" => (
            200,
            JSON,
            reply(json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "echoer", "version": "1"},
                "instructions": format!("Authenticated with {auth}."),
            })),
        ),
        "tools/list" => (
            200,
            JSON,
            reply(json!({"tools": [
                {"name": "whoami", "description": format!("Says who you are ({auth})."), "inputSchema": {"type": "object"}},
                {"name": "deny", "description": "Fails.", "inputSchema": {"type": "object"}},
            ]})),
        ),
        "tools/call" if msg["params"]["name"] == "deny" => {
            (500, "text/plain", format!("denied: Authorization: {auth}"))
        }
        "tools/call" => {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "warning", "logger": "echoer", "data": {"auth": auth}}});
            let result = reply(json!({"content": [{"type": "text",
                "text": format!("you sent Authorization: {auth}; and the key {KEY}")}]}));
            (
                200,
                SSE,
                format!("event: message\ndata: {note}\n\nevent: message\ndata: {result}\n\n"),
            )
        }
        _ if msg.get("id").is_none() => (202, JSON, String::new()),
        _ => (200, JSON, reply(json!({}))),
    }
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(
        !text.contains(TOKEN) && !text.contains(KEY),
        "{what} holds a secret: {text}"
    );
}

#[test]
fn an_event_stream_in_any_case_is_read_as_one() {
    let url = echoing_server();
    let client = Client::connect("echoer", &Server::http(format!("{url}/mcp"))).unwrap();
    let out = client
        .call_tool("whoami", &json!({}), &ToolContext::detached())
        .unwrap();
    assert_eq!(out, format!("you sent Authorization: ; and the key {KEY}"));
    client.close();
}

#[test]
fn an_echoed_token_never_reaches_the_model_events_logs_or_errors() {
    capture_logs();
    let url = echoing_server();
    let model = FakeServer::start();
    model.push(Reply::tool_calls(vec![
        ("echoer__whoami", json!({})),
        ("echoer__deny", json!({})),
    ]));
    model.push(Reply::text("done"));
    let events = InMemoryEventList::new();
    let mcp = Registry::new().server(
        "echoer",
        Server::http(format!("{url}/mcp")).with_bearer_token(TOKEN),
    );
    let mut agent = Agent::builder(model.transport().with_api_key(KEY))
        .add_listener(events.clone())
        .add_extension(mcp)
        .build()
        .unwrap();
    assert_eq!(
        agent.run_loop("who am I?").unwrap().answer.as_deref(),
        Some("done")
    );
    agent.close();

    let requests = model.chat_requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_no_secret("a request to the model", &r.raw_body);
    }
    let system = requests[0].messages()[0]["content"].clone();
    assert!(
        system
            .as_str()
            .unwrap()
            .contains("Authenticated with Bearer <redacted>."),
        "{system}"
    );
    let results: Vec<Value> = requests[1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(
        results[0],
        "you sent Authorization: Bearer <redacted>; and the key <redacted>"
    );
    assert_eq!(
        results[1],
        "Error: MCP server `echoer`: http status 500: denied: Authorization: Bearer <redacted>"
    );
    let all = format!("{:?}", events.events());
    assert_no_secret("the events", &all);
    assert!(
        all.contains("mcp.log") && all.contains("Bearer <redacted>"),
        "{all}"
    );
    assert_no_secret("the history", &format!("{:?}", agent.messages()));

    // An error built from the server's answer.
    let locked = Server::http(format!("{url}/locked")).with_bearer_token(TOKEN);
    let err = Client::connect("echoer", &locked).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err:?}");
    assert_no_secret("the error", &format!("{err} {err:?}"));
    assert!(
        err.to_string().contains("bad token: Bearer <redacted>"),
        "{err}"
    );

    let lines = LINES.lock().unwrap().clone();
    for line in &lines {
        assert_no_secret("a log line", line);
    }
    assert!(
        lines.iter().any(|l| l.contains("Bearer <redacted>")),
        "{lines:?}"
    );
}
