//! Session 16's outside pass over the MCP clients (ATTACKS.md, "Other
//! servers" and "Lifecycle"): each test is a class the earlier files did
//! not cover. The Streamable HTTP peers are `FakeServer`s answering
//! JSON-RPC from a `respond_with` function (the endpoint is one of its chat
//! paths, which that function serves); the stdio peers are
//! `tests/fixtures/mcp_overtake.py` and the main fake.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use pikuri::ToolContext;
use pikuri::mcp::{Client, Server};
use pikuri::testing::{FakeServer, RecordedRequest, Reply};
use serde_json::{Value, json};

use super::hostile::{WATCHDOG, bounded};
use super::{Log, eventually, processes_tagged, python, unique_tag};

/// A JSON-RPC answer to `req` with `result`, as `application/json`.
fn answer(req: &RecordedRequest, result: &Value) -> Reply {
    let id = req.body.as_ref().map_or(Value::Null, |b| b["id"].clone());
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
    Reply::raw_body(200, "application/json", body.to_string())
}

/// The JSON-RPC method of `req`.
fn method(req: &RecordedRequest) -> String {
    req.body
        .as_ref()
        .and_then(|b| b["method"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// A 2025-06-18 Streamable HTTP server on a `FakeServer`: it answers the
/// handshake (session `sess-s3cret`) and `tools/list` (one tool, `t`);
/// every other request is `other`'s. Returns the server and the endpoint.
fn http_server(
    other: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
) -> (FakeServer, String) {
    let server = FakeServer::start();
    server.set_strict(false);
    server.respond_with(move |req| {
        let Some(body) = &req.body else {
            return Reply::raw_body(405, "text/plain", "");
        };
        match method(req).as_str() {
            "initialize" => answer(
                req,
                &json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                       "serverInfo": {"name": "scripted", "version": "1"}}),
            )
            .with_header("Mcp-Session-Id", "sess-s3cret"),
            "tools/list" => answer(
                req,
                &json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}),
            ),
            _ if body.get("id").is_none() => Reply::raw_body(202, "application/json", ""),
            "server/discover" => {
                let body = json!({"jsonrpc": "2.0", "id": body["id"],
                    "error": {"code": -32601, "message": "Method not found"}});
                Reply::raw_body(200, "application/json", body.to_string())
            }
            _ => other(req),
        }
    });
    let url = format!("{}/chat/completions", server.base_url());
    (server, url)
}

fn connect(url: &str) -> Client {
    let server = Server::http(url)
        .with_bearer_token("host-s3cret")
        .with_request_timeout(Duration::from_secs(20))
        .with_startup_timeout(Duration::from_secs(20));
    Client::connect("scripted", &server).unwrap()
}

/// The `tools/call` requests `server` received.
fn calls(server: &FakeServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| method(r) == "tools/call")
        .count()
}

/// A server that redirects a request elsewhere: neither the session id
/// nor the token (nor the request) reaches the other origin; the request
/// fails, naming the status, for a redirect that would turn the POST into
/// a GET (302) and for one that keeps it a POST (307).
#[test]
fn a_redirect_to_another_origin_is_not_followed() {
    let elsewhere = FakeServer::start();
    elsewhere.set_strict(false);
    elsewhere.respond_with(|req| answer(req, &json!({"content": []})));
    let target = format!("{}/chat/completions", elsewhere.base_url());
    for status in [302, 307] {
        let to = target.clone();
        let (server, url) = http_server(move |_| {
            Reply::raw_body(status, "application/json", "{}").with_header("Location", &to)
        });
        let client = connect(&url);
        let err = bounded(WATCHDOG, move || {
            let out = client.call_tool("t", &json!({}), &ToolContext::detached());
            client.close();
            out.unwrap_err()
        });
        assert!(err.to_string().contains(&status.to_string()), "{err}");
        assert!(!err.to_string().contains("s3cret"), "{err}");
        assert_eq!(calls(&server), 1);
    }
    assert!(
        elsewhere.requests().is_empty(),
        "the other origin was sent {:#?}",
        elsewhere.requests()
    );
}

/// `429` with `Retry-After: 100000`: the call fails at once (the MCP
/// client does not retry), it does not wait 28 hours.
#[test]
fn retry_after_100000_is_not_waited_for() {
    let (server, url) = http_server(|_| {
        Reply::raw_body(429, "application/json", r#"{"error":"slow down"}"#)
            .with_header("Retry-After", "100000")
    });
    let client = connect(&url);
    let err = bounded(WATCHDOG, move || {
        let out = client.call_tool("t", &json!({}), &ToolContext::detached());
        client.close();
        out.unwrap_err()
    });
    assert!(err.to_string().contains("429"), "{err}");
    assert_eq!(calls(&server), 1);
}

/// A 50 MB answer, as one JSON body and as one SSE event: each is a
/// bounded error naming the limit, and the next call works.
#[test]
fn a_50_mb_answer_is_refused_at_the_message_limit() {
    let big = "x".repeat(50 << 20);
    let json_body = Arc::new(format!(
        r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"{big}"}}]}}}}"#
    ));
    let sse_body = Arc::new(format!("event: message\ndata: {json_body}\n\n"));
    drop(big);
    let (_server, url) = http_server(move |req| {
        match req.body.as_ref().unwrap()["params"]["arguments"]["as"].as_str() {
            Some("json") => Reply::raw_body(200, "application/json", json_body.as_str()),
            Some("sse") => Reply::raw_sse(sse_body.as_str()),
            _ => answer(
                req,
                &json!({"content": [{"type": "text", "text": "small"}]}),
            ),
        }
    });
    let client = connect(&url);
    let out = bounded(WATCHDOG, move || {
        let cx = ToolContext::detached();
        let json = client.call_tool("t", &json!({"as": "json"}), &cx);
        let sse = client.call_tool("t", &json!({"as": "sse"}), &cx);
        let after = client.call_tool("t", &json!({}), &cx);
        client.close();
        (json, sse, after)
    });
    let json = out.0.unwrap_err().to_string();
    assert!(json.contains("over 4194304 bytes"), "{json}");
    let sse = out.1.unwrap_err().to_string();
    assert!(sse.contains("4194304"), "{sse}");
    assert!(json.len() < 1000 && sse.len() < 1000, "{json}\n{sse}");
    assert_eq!(out.2.unwrap(), "small");
}

/// An HTML page where JSON belongs is a short error (no page in it); JSON
/// under `Application/JSON; charset=utf-8` is read as JSON.
#[test]
fn html_is_an_error_and_json_with_parameters_is_json() {
    let (_server, url) = http_server(|req| {
        if req.body.as_ref().unwrap()["params"]["arguments"]["html"] == true {
            let page = format!(
                "<html><body>{}</body></html>",
                "<p>login</p>".repeat(10_000)
            );
            return Reply::raw_body(200, "text/html; charset=utf-8", page);
        }
        let id = &req.body.as_ref().unwrap()["id"];
        let body = json!({"jsonrpc": "2.0", "id": id,
            "result": {"content": [{"type": "text", "text": "json"}]}});
        Reply::raw_body(200, "Application/JSON; charset=utf-8", body.to_string())
    });
    let client = connect(&url);
    let cx = ToolContext::detached();
    let err = client
        .call_tool("t", &json!({"html": true}), &cx)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not JSON"), "{err}");
    assert!(!err.contains("login"), "{err}");
    assert_eq!(client.call_tool("t", &json!({}), &cx).unwrap(), "json");
    client.close();
}

/// An event stream that trickles (a comment every 100 ms, never the
/// answer) ends at the request timeout, as a timeout.
#[test]
fn a_trickling_event_stream_ends_at_the_request_timeout() {
    let (_server, url) = http_server(|_| {
        Reply::raw_sse(": tick\n\n".repeat(100_000)).with_chunk_delay(Duration::from_millis(100))
    });
    let server = Server::http(&url)
        .with_request_timeout(Duration::from_secs(1))
        .with_startup_timeout(Duration::from_secs(20));
    let client = Client::connect("trickle", &server).unwrap();
    let err = bounded(WATCHDOG, move || {
        let out = client.call_tool("t", &json!({}), &ToolContext::detached());
        client.close();
        out.unwrap_err()
    });
    assert!(
        err.to_string().contains("did not answer within 1 s"),
        "{err}"
    );
}

/// The overtaking fixture, logging what it receives.
fn overtake(mode: &str) -> Option<(Server, Log, String)> {
    let (py, _) = python()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_overtake.py");
    let tag = unique_tag("overtake");
    let log = Log::new(&tag);
    let args = [
        script.display().to_string(),
        mode.to_string(),
        "--log".into(),
        log.0.display().to_string(),
    ];
    let server = Server::stdio(py, args)
        .with_env("PIKURI_MCP_TAG", &tag)
        .with_startup_timeout(Duration::from_secs(30))
        .with_request_timeout(Duration::from_secs(30));
    Some((server, log, tag))
}

/// Before its `initialize` answer the server sends a notification, two
/// requests of its own, an answer to an id never sent and a second answer
/// to the probe: the handshake ends with the right answer, the server's
/// `ping` is answered, and a call answered twice keeps the first answer.
#[test]
fn messages_that_overtake_the_initialize_answer_are_handled() {
    let Some((server, log, _tag)) = overtake("overtake") else {
        return;
    };
    let client = bounded(WATCHDOG, move || {
        Client::connect("overtake", &server).unwrap()
    });
    assert_eq!(client.server_name(), "overtake");
    let cx = ToolContext::detached();
    assert_eq!(
        client.call_tool("echo", &json!({"a": 1}), &cx).unwrap(),
        r#"{"a": 1}"#
    );
    assert_eq!(
        client.call_tool("echo", &json!({"a": 2}), &cx).unwrap(),
        r#"{"a": 2}"#
    );
    client.close();
    let received: Vec<Value> = log
        .text()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ping = received
        .iter()
        .find(|m| m["id"] == "srv-ping")
        .unwrap_or_else(|| panic!("the server's ping was not answered: {received:#?}"));
    assert_eq!(ping["result"], json!({}), "{ping}");
    assert!(
        received.iter().any(|m| m["id"] == "srv-roots"),
        "roots/list was not answered: {received:#?}"
    );
}

/// Two calls in flight answered in the other order each get their own
/// answer.
#[test]
fn answers_out_of_order_reach_their_own_calls() {
    let Some((server, _log, _tag)) = overtake("overtake") else {
        return;
    };
    let client = Arc::new(Client::connect("overtake", &server).unwrap());
    let first = {
        let client = Arc::clone(&client);
        thread::spawn(move || client.call_tool("pair", &json!({"n": 1}), &ToolContext::detached()))
    };
    // The fixture holds the first call until a second arrives; this one
    // may be sent first, which changes nothing.
    let second = client.call_tool("pair", &json!({"n": 2}), &ToolContext::detached());
    let first = bounded(WATCHDOG, move || first.join().unwrap());
    let mut got = [first.unwrap(), second.unwrap()];
    got.sort();
    assert_eq!(got, ["pair 1", "pair 2"]);
    client.close();
}

/// A server that floods stderr (20 MB, no newline) and dies: the error
/// names the line it skipped and stays short, and the connect returns.
#[test]
fn a_stderr_flood_then_death_is_a_short_error() {
    let Some((server, _log, _tag)) = overtake("stderr-flood") else {
        return;
    };
    let err = bounded(WATCHDOG, move || {
        Client::connect("flood", &server).unwrap_err()
    });
    let text = err.to_string();
    assert!(text.contains("[a line over 4194304 bytes]"), "{text}");
    assert!(!text.contains("EEEE"), "{text}");
    assert!(text.len() < 4096, "{} bytes", text.len());
}

/// A server that exits at once, saying nothing: a clear error.
#[test]
fn a_server_that_exits_at_once_is_a_clear_error() {
    let Some((server, _log, _tag)) = overtake("exit-at-once") else {
        return;
    };
    let err = bounded(WATCHDOG, move || {
        Client::connect("gone", &server).unwrap_err()
    });
    assert!(err.to_string().contains("closed its stdout"), "{err}");
}

/// Closing twice is harmless, a call after the close fails, and a client
/// dropped without a close still ends its server.
#[test]
fn close_twice_and_drop_without_close() {
    let Some((server, _log, tag)) = overtake("overtake") else {
        return;
    };
    let client = Client::connect("twice", &server).unwrap();
    assert!(eventually(Duration::from_secs(10), || processes_tagged(
        &tag
    ) == 1));
    let clone = client.clone();
    client.close();
    clone.close();
    let err = client
        .call_tool("echo", &json!({}), &ToolContext::detached())
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
    assert_eq!(processes_tagged(&tag), 0);

    let Some((server, _log, tag)) = overtake("overtake") else {
        return;
    };
    let client = Client::connect("dropped", &server).unwrap();
    assert!(eventually(Duration::from_secs(10), || processes_tagged(
        &tag
    ) == 1));
    drop(client);
    assert!(
        eventually(Duration::from_secs(30), || processes_tagged(&tag) == 0),
        "the server outlived its dropped client"
    );
}

/// A server that starts slowly (3 s before it reads) under a startup
/// timeout of 1 s: the connect gives up and says which bound it hit, and
/// the `initialize` it gave up on is never cancelled (the spec forbids
/// it).
#[test]
fn a_slow_start_past_the_startup_timeout_says_so() {
    let Some((py, script)) = python() else {
        return;
    };
    let log = Log::new(&unique_tag("slow"));
    let server = Server::stdio(
        py,
        [
            script,
            "--slow-start".into(),
            "3".into(),
            "--log".into(),
            log.0.display().to_string(),
        ],
    )
    .with_startup_timeout(Duration::from_secs(1))
    // Time for it to wake, read what was sent and log it.
    .with_shutdown_grace(Duration::from_secs(10));
    let err = bounded(WATCHDOG, move || {
        Client::connect("slow", &server).unwrap_err()
    });
    assert!(err.to_string().contains("timed out after 1000 ms"), "{err}");
    let init_ids: Vec<Value> = log
        .text()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "initialize")
        .map(|m| m["id"].clone())
        .collect();
    assert!(!init_ids.is_empty(), "{}", log.text());
    for m in log
        .text()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        if m["method"] == "notifications/cancelled" {
            assert!(
                !init_ids.contains(&m["params"]["requestId"]),
                "initialize was cancelled: {m}"
            );
        }
    }
}

/// A Streamable HTTP server on a raw socket that answers the handshake,
/// then answers `tools/call` with the head `head` and a body that
/// trickles a comment line every 50 ms and never the answer. Returns its
/// URL and a flag set once a write fails (the client hung up).
fn trickling_server(head: &'static str) -> (String, Arc<std::sync::atomic::AtomicBool>) {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let hung_up = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&hung_up);
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let flag = Arc::clone(&flag);
            thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut out = conn;
                loop {
                    let mut len = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((k, v)) = line.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; len];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let reply = |result: Value| {
                        json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}).to_string()
                    };
                    let json = match msg["method"].as_str().unwrap_or("") {
                        "initialize" => reply(json!({"protocolVersion": "2025-06-18",
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "trickle", "version": "1"}})),
                        "tools/call" => break,
                        _ if msg.get("id").is_none() => {
                            let _ = out
                                .write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
                            continue;
                        }
                        _ => json!({"jsonrpc": "2.0", "id": msg["id"],
                            "error": {"code": -32601, "message": "no"}})
                        .to_string(),
                    };
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        json.len()
                    );
                    let _ = out.write_all((head + &json).as_bytes());
                }
                if out.write_all(head.as_bytes()).is_err() {
                    return;
                }
                for _ in 0..20 * 600 {
                    thread::sleep(Duration::from_millis(50));
                    if out.write_all(b":\n").and_then(|()| out.flush()).is_err() {
                        flag.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            });
        }
    });
    (url, hung_up)
}

/// Once a call over a trickling answer has timed out, the client stops
/// reading it and hangs up, instead of holding the worker thread and the
/// socket for as long as the server trickles: an event stream, and the
/// body of an error status.
#[test]
fn a_timed_out_call_hangs_up_on_a_trickling_stream() {
    const SSE: &str =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    const ERROR: &str =
        "HTTP/1.1 500 Oops\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n";
    for head in [SSE, ERROR] {
        let (url, hung_up) = trickling_server(head);
        let server = Server::http(&url)
            .with_request_timeout(Duration::from_secs(1))
            .with_startup_timeout(Duration::from_secs(20));
        let client = Client::connect("trickle", &server).unwrap();
        let err = client
            .call_tool("t", &json!({}), &ToolContext::detached())
            .unwrap_err();
        assert!(
            err.to_string().contains("did not answer within 1 s"),
            "{err}"
        );
        // The client is still open: only the abandoned call's stream ends.
        assert!(
            eventually(Duration::from_secs(30), || hung_up
                .load(std::sync::atomic::Ordering::SeqCst)),
            "the client still reads the answer of a call it gave up on: {head}"
        );
        client.close();
    }
}

/// The Streamable HTTP MUSTs of 2025-06-18 a client can break: every POST
/// accepts both `application/json` and `text/event-stream`; after the
/// handshake each request carries the negotiated `MCP-Protocol-Version`
/// and the session's `Mcp-Session-Id`; a 404 on a session starts a new one
/// with an `initialize` that carries no session id, followed by
/// `notifications/initialized`. A JSON-RPC error's message reaches the
/// tool's error.
#[test]
fn streamable_http_musts_hold_across_a_session_that_expires() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let sessions = Arc::new(AtomicU32::new(0));
    let server = FakeServer::start();
    server.set_strict(false);
    server.respond_with(move |req| {
        let body = req.body.clone().unwrap_or_default();
        let session = req.header("mcp-session-id").unwrap_or_default();
        match method(req).as_str() {
            "initialize" => {
                let n = sessions.fetch_add(1, Ordering::SeqCst) + 1;
                answer(
                    req,
                    &json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "musts", "version": "1"}}),
                )
                .with_header("Mcp-Session-Id", &format!("s{n}"))
            }
            _ if session == "s1" && method(req) == "tools/call" => {
                Reply::raw_body(404, "application/json", "{}")
            }
            _ if body.get("id").is_none() => Reply::raw_body(202, "application/json", ""),
            "tools/call" if body["params"]["name"] == "bad" => {
                let e = json!({"jsonrpc": "2.0", "id": body["id"],
                    "error": {"code": -32602, "message": "Unknown tool: bad"}});
                Reply::raw_body(200, "application/json", e.to_string())
            }
            "tools/call" => answer(req, &json!({"content": [{"type": "text", "text": "ok"}]})),
            "tools/list" => answer(
                req,
                &json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}),
            ),
            _ => {
                let e = json!({"jsonrpc": "2.0", "id": body["id"],
                    "error": {"code": -32601, "message": "Method not found"}});
                Reply::raw_body(200, "application/json", e.to_string())
            }
        }
    });
    let url = format!("{}/chat/completions", server.base_url());
    let client = connect(&url);
    let cx = ToolContext::detached();
    assert_eq!(client.call_tool("t", &json!({}), &cx).unwrap(), "ok");
    let err = client.call_tool("bad", &json!({}), &cx).unwrap_err();
    assert!(err.to_string().contains("Unknown tool: bad"), "{err}");
    client.close();

    let posts: Vec<RecordedRequest> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    let methods: Vec<String> = posts.iter().map(method).collect();
    let inits: Vec<usize> = (0..posts.len())
        .filter(|&i| methods[i] == "initialize")
        .collect();
    assert_eq!(inits.len(), 2, "{methods:?}");
    for (i, post) in posts.iter().enumerate() {
        let accept = post.header("accept").unwrap_or_default();
        assert!(
            accept.contains("application/json") && accept.contains("text/event-stream"),
            "{}: Accept {accept:?}",
            methods[i]
        );
        if i > inits[0] && methods[i] != "initialize" {
            assert_eq!(
                post.header("mcp-protocol-version"),
                Some("2025-06-18"),
                "{}",
                methods[i]
            );
            let session = if i > inits[1] { "s2" } else { "s1" };
            assert_eq!(
                post.header("mcp-session-id"),
                Some(session),
                "{}",
                methods[i]
            );
        }
    }
    // The new session's initialize carries no session id, and the
    // notification follows it.
    assert_eq!(posts[inits[1]].header("mcp-session-id"), None);
    assert_eq!(methods[inits[1] + 1], "notifications/initialized");
    // The call that met the 404 was sent again in the new session.
    assert_eq!(
        methods.iter().filter(|m| *m == "tools/call").count(),
        3,
        "{methods:?}"
    );
}

/// A stdio server that echoes a secret of its environment (`API_KEY`) in
/// a log notification, on stderr and in its result: the model, the
/// events, pikuri's log lines and the server's `Debug` never see it.
#[test]
fn a_stdio_server_echoing_its_secret_env_leaks_nothing() {
    use pikuri::listeners::InMemoryEventList;
    use pikuri::mcp::Registry;
    const SECRET: &str = "sk-env-s3cret-77f1";
    super::hostile::capture_logs();
    let Some((server, _log, _tag)) = overtake("overtake") else {
        return;
    };
    let server = server.with_env("API_KEY", SECRET);
    assert!(!format!("{server:?}").contains(SECRET));
    let model = FakeServer::start();
    model.push(Reply::tool_call("ov__env", json!({"name": "API_KEY"})));
    model.push(Reply::text("done"));
    let events = InMemoryEventList::new();
    let mut agent = pikuri::Agent::builder(model.transport())
        .add_listener(events.clone())
        .add_extension(Registry::new().server("ov", server))
        .build()
        .unwrap();
    agent.run_loop("show the key").unwrap();
    agent.close();
    let seen = model.chat_requests()[1].messages().last().unwrap()["content"].clone();
    assert_eq!(seen, "value: <redacted>");
    let all = format!("{:?}", events.events());
    assert!(!all.contains(SECRET), "{all}");
    // The stderr line was logged (redacted), so the check below saw it.
    let lines = || super::hostile::LINES.lock().unwrap().clone();
    assert!(
        eventually(Duration::from_secs(10), || lines()
            .iter()
            .any(|l| l.contains("env: <redacted>"))),
        "{:#?}",
        lines()
    );
    for line in lines() {
        assert!(!line.contains(SECRET), "{line}");
    }
}

/// Over HTTP, the `initialize` answer comes as an event stream behind a
/// log notification and a `ping` of the server's own: the handshake ends,
/// and the `ping` is answered with a POST of its own.
#[test]
fn an_event_stream_initialize_answer_behind_a_server_request_is_handled() {
    let server = FakeServer::start();
    server.set_strict(false);
    server.respond_with(|req| {
        let body = req.body.clone().unwrap_or_default();
        match method(req).as_str() {
            "initialize" => {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": "first"}});
                let ping = json!({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"});
                let result = json!({"jsonrpc": "2.0", "id": body["id"], "result": {
                    "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "streamed", "version": "1"}}});
                Reply::raw_sse(format!(
                    "data: {note}\n\ndata: {ping}\n\nevent: message\ndata: {result}\n\n"
                ))
            }
            "tools/list" => answer(req, &json!({"tools": []})),
            _ if body.get("id").is_none() || body.get("method").is_none() => {
                Reply::raw_body(202, "application/json", "")
            }
            _ => {
                let e = json!({"jsonrpc": "2.0", "id": body["id"],
                    "error": {"code": -32601, "message": "Method not found"}});
                Reply::raw_body(200, "application/json", e.to_string())
            }
        }
    });
    let url = format!("{}/chat/completions", server.base_url());
    let client = connect(&url);
    assert_eq!(client.server_name(), "streamed");
    client.close();
    let answered = eventually(Duration::from_secs(10), || {
        server.requests().iter().any(|r| {
            r.body
                .as_ref()
                .is_some_and(|b| b["id"] == "srv-1" && b["result"] == json!({}))
        })
    });
    assert!(answered, "{:#?}", server.requests());
}

/// A call over HTTP to a server that never answers: a cancel ends it at
/// once as "cancelled" and the server is told (`notifications/cancelled`
/// with the request's id); a close with another call in flight ends that
/// one too.
#[test]
fn cancel_and_close_end_http_calls_in_flight() {
    use pikuri::Cancellable;
    let (server, url) = http_server(|req| {
        if method(req) == "tools/call" {
            Reply::hang()
        } else {
            Reply::raw_body(202, "application/json", "")
        }
    });
    let server = Arc::new(server);
    let client = connect(&url);
    let cancel = Cancellable::new();
    let watcher = {
        let (server, cancel) = (Arc::clone(&server), cancel.clone());
        thread::spawn(move || {
            assert!(eventually(Duration::from_secs(10), || calls(&server) == 1));
            cancel.cancel();
        })
    };
    let err = {
        let client = client.clone();
        bounded(WATCHDOG, move || {
            client
                .call_tool("t", &json!({}), &ToolContext::with_cancellable(cancel))
                .unwrap_err()
        })
    };
    watcher.join().unwrap();
    assert_eq!(err.to_string(), "cancelled");
    let call_id = server
        .requests()
        .iter()
        .find(|r| method(r) == "tools/call")
        .and_then(|r| r.body.as_ref().map(|b| b["id"].clone()))
        .unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        server.requests().iter().any(|r| {
            method(r) == "notifications/cancelled"
                && r.body.as_ref().unwrap()["params"]["requestId"] == call_id
        })
    }));

    let in_flight = {
        let client = client.clone();
        thread::spawn(move || client.call_tool("t", &json!({}), &ToolContext::detached()))
    };
    assert!(eventually(Duration::from_secs(10), || calls(&server) == 2));
    client.close();
    let err = bounded(WATCHDOG, move || in_flight.join().unwrap().unwrap_err());
    assert!(err.to_string().contains("closed"), "{err}");
}

/// Refused and silent peers at the handshake: an HTTP port nothing
/// listens on is a connect error; an HTTP server that takes the
/// `initialize` and never answers ends at the startup timeout, as a
/// timeout naming it; a stdio command that does not exist is an error
/// naming it and the OS's reason (its kind is `Transport`: `Error::Connect`
/// carries a URL, which a stdio server has not).
#[test]
fn refused_and_silent_peers_fail_the_connect_typed() {
    use pikuri::ErrorKind;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = Client::connect(
        "down",
        &Server::http(format!("http://127.0.0.1:{port}/mcp")),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err}");

    let silent = FakeServer::start();
    silent.set_strict(false);
    silent.respond_with(|_| Reply::hang());
    let server = Server::http(format!("{}/chat/completions", silent.base_url()))
        .with_startup_timeout(Duration::from_secs(1));
    let err = bounded(WATCHDOG, move || {
        Client::connect("silent", &server).unwrap_err()
    });
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("1000 ms"), "{err}");

    let server = Server::stdio("/nonexistent/pikuri-mcp-server", Vec::<String>::new());
    let text = Client::connect("missing", &server).unwrap_err().to_string();
    assert!(
        text.contains("could not start /nonexistent/pikuri-mcp-server: No such file"),
        "{text}"
    );
}

/// An input provider that panics: on both generations the server is
/// answered `cancel` (its tool says so), the panic does not reach the
/// caller, and the next call works.
#[test]
fn a_panicking_input_provider_is_contained() {
    use pikuri::mcp::{InputAnswer, InputProvider, InputRequest};
    struct Panics;
    impl InputProvider for Panics {
        fn ask(&self, _: &InputRequest) -> InputAnswer {
            panic!("the provider broke");
        }
    }
    for generation in ["--modern", "--asks"] {
        let Some((py, script)) = python() else {
            return;
        };
        let server = Server::stdio(py, [script, generation.to_string()])
            .with_input_provider(Panics)
            .with_request_timeout(Duration::from_secs(30))
            .with_input_timeout(Duration::from_secs(20));
        let (first, second) = bounded(WATCHDOG, move || {
            let client = Client::connect("fake", &server).unwrap();
            let cx = ToolContext::detached();
            let first = client.call_tool("ask", &json!({}), &cx);
            let second = client.call_tool("echo", &json!({"text": "after"}), &cx);
            client.close();
            (first, second)
        });
        assert_eq!(first.unwrap(), "input cancel", "{generation}");
        assert_eq!(second.unwrap(), "echo: after", "{generation}");
    }
}

/// A 2025-03-26 server may batch: an event of its stream that holds an
/// array (a notification and the answer) is read as its messages, as a
/// JSON body holding one is.
#[test]
fn a_batched_event_stream_answer_is_read() {
    let (_server, url) = http_server(|req| {
        let id = &req.body.as_ref().unwrap()["id"];
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "batched"}});
        let result = json!({"jsonrpc": "2.0", "id": id,
            "result": {"content": [{"type": "text", "text": "from a batch"}]}});
        if req.body.as_ref().unwrap()["params"]["arguments"]["sse"] == true {
            Reply::raw_sse(format!("data: {}\n\n", json!([note, result])))
        } else {
            Reply::raw_body(200, "application/json", json!([note, result]).to_string())
        }
    });
    let client = connect(&url);
    let cx = ToolContext::detached();
    let out = bounded(WATCHDOG, move || {
        let json = client.call_tool("t", &json!({}), &cx);
        let sse = client.call_tool("t", &json!({"sse": true}), &cx);
        client.close();
        (json, sse)
    });
    assert_eq!(out.0.unwrap(), "from a batch");
    assert_eq!(out.1.unwrap(), "from a batch");
}

/// An HTTP client dropped without `close` still ends its session: the
/// server gets the `DELETE` with the session id.
#[test]
fn an_http_client_dropped_without_close_deletes_its_session() {
    let (server, url) = http_server(|req| answer(req, &json!({})));
    let client = connect(&url);
    drop(client);
    let deleted = server
        .requests()
        .iter()
        .any(|r| r.method == "DELETE" && r.header("mcp-session-id") == Some("sess-s3cret"));
    assert!(deleted, "{:#?}", server.requests());
}

/// A stdio server that trickles its answer (a byte every 20 ms, 3 s in
/// all) past a 1 s request timeout: the call times out, the late answer
/// (now for no one) is dropped, and the connection works on.
#[test]
fn a_stdio_answer_trickled_past_the_timeout_is_dropped_and_the_connection_works() {
    let Some((server, _log, _tag)) = overtake("overtake") else {
        return;
    };
    let server = server.with_request_timeout(Duration::from_secs(1));
    let client = Client::connect("trickle", &server).unwrap();
    let cx = ToolContext::detached();
    let err = client.call_tool("trickle", &json!({}), &cx).unwrap_err();
    assert!(
        err.to_string().contains("did not answer within 1 s"),
        "{err}"
    );
    // The server reads the next call once it has written the late answer.
    let worked = eventually(Duration::from_secs(30), || {
        client.call_tool("echo", &json!({"n": 1}), &cx).ok() == Some(r#"{"n": 1}"#.into())
    });
    assert!(worked);
    client.close();
}

/// Secrets in a server's declaration: an HTTP URL's password and
/// secret-looking query value, a stdio server's secret-looking arguments
/// (`--api-key VALUE`, `--token=VALUE`). `Debug` shows none of them, and a
/// server that echoes its command line on stderr as it dies does not put
/// them in the error.
#[test]
fn secrets_in_a_servers_url_or_arguments_stay_hidden() {
    let http = Server::http("https://me:pw-s3cret-9@h.example/mcp?api_key=q-s3cret-9&page=2")
        .with_bearer_token("b-s3cret-9");
    let shown = format!("{http:?}");
    for secret in ["pw-s3cret-9", "q-s3cret-9", "b-s3cret-9"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("h.example/mcp"), "{shown}");

    let Some((py, _)) = python() else {
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_overtake.py");
    let server = Server::stdio(
        py,
        [
            script.display().to_string(),
            "argv-die".into(),
            "--api-key".into(),
            "a-s3cret-9".into(),
            "--token=t-s3cret-9".into(),
            "--verbose".into(),
        ],
    );
    let shown = format!("{server:?}");
    for secret in ["a-s3cret-9", "t-s3cret-9"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("--verbose"), "{shown}");
    let err = bounded(WATCHDOG, move || {
        Client::connect("argv", &server).unwrap_err()
    });
    let text = format!("{err} {err:?}");
    assert!(text.contains("usage error in"), "{text}");
    for secret in ["a-s3cret-9", "t-s3cret-9"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

/// A cancel while a call waits for the restart of a dead stdio server
/// whose handshake hangs: the call ends at once as cancelled, not at the
/// startup timeout; the client still closes.
#[test]
fn a_cancel_ends_a_call_waiting_for_a_restart_whose_handshake_hangs() {
    use pikuri::Cancellable;
    let Some((py, script)) = python() else {
        return;
    };
    let marker = std::env::temp_dir().join(format!("pikuri-{}.restart", unique_tag("c")));
    let _ = std::fs::remove_file(&marker);
    let tag = unique_tag("cancel-restart");
    let server = Server::stdio(
        py,
        [
            script,
            "--hang-on-restart".into(),
            marker.display().to_string(),
        ],
    )
    .with_env("PIKURI_MCP_TAG", &tag)
    // Only the cancel can end the wait in time.
    .with_startup_timeout(Duration::from_secs(600));
    let client = Client::connect("fake", &server).unwrap();
    assert!(
        client
            .call_tool("crash", &json!({}), &ToolContext::detached())
            .is_err()
    );
    let cancel = Cancellable::new();
    let restarting = {
        let (client, cancel) = (client.clone(), cancel.clone());
        thread::spawn(move || {
            client.call_tool(
                "echo",
                &json!({"text": "x"}),
                &ToolContext::with_cancellable(cancel),
            )
        })
    };
    // The restarted server is running (and will never answer).
    assert!(eventually(Duration::from_secs(30), || processes_tagged(
        &tag
    ) == 1));
    cancel.cancel();
    let err = bounded(Duration::from_secs(60), move || {
        restarting.join().unwrap().unwrap_err()
    });
    assert_eq!(err.message(), "cancelled");
    bounded(WATCHDOG, move || client.close());
    let _ = std::fs::remove_file(&marker);
    assert!(eventually(Duration::from_secs(10), || processes_tagged(
        &tag
    ) == 0));
}

/// A 2026 server whose lists say they stay fresh for `ttlMs` 2^64 - 1:
/// the client keeps them (no panic adding 584 million years to now) and
/// serves the next listing from its cache.
#[test]
fn a_ttl_of_u64_max_is_kept_without_a_panic() {
    let Some((server, log, _tag)) = overtake("modern-ttl") else {
        return;
    };
    let out = bounded(WATCHDOG, move || {
        let client = Client::connect("ttl", &server).unwrap();
        let tools = client.list_tools().map(|t| t.len());
        let resources = client.list_resources().map(|r| r.len());
        let again = client.list_resources().map(|r| r.len());
        client.close();
        (tools, resources, again)
    });
    assert_eq!(out.0.unwrap(), 3);
    assert_eq!(out.1.unwrap(), 1);
    assert_eq!(out.2.unwrap(), 1);
    let lists = log.text().matches("\"resources/list\"").count();
    assert_eq!(lists, 1, "{}", log.text());
}

/// `Duration::MAX` given as "no limit" for the shutdown grace: the close
/// of a server that exits when its stdin closes returns, no panic.
#[test]
fn a_shutdown_grace_of_duration_max_is_no_limit() {
    let Some((server, _log, tag)) = overtake("overtake") else {
        return;
    };
    let server = server.with_shutdown_grace(Duration::MAX);
    bounded(WATCHDOG, move || {
        let client = Client::connect("grace", &server).unwrap();
        client.close();
    });
    assert_eq!(processes_tagged(&tag), 0);
}

/// An error body that echoes the host's token where the 300-character
/// excerpt of it ends: no part of the token is left in the error.
#[test]
fn a_token_cut_by_the_error_excerpt_leaves_no_part_of_itself() {
    let (_server, url) = http_server(|_| {
        Reply::raw_body(
            500,
            "text/plain",
            format!("{}host-s3cret and more", "x".repeat(293)),
        )
    });
    let client = connect(&url);
    let err = client
        .call_tool("t", &json!({}), &ToolContext::detached())
        .unwrap_err();
    client.close();
    assert!(err.to_string().contains("500"), "{err}");
    assert!(!err.to_string().contains("host-s3"), "{err}");
}

/// An event that is not JSON, echoing the host's token where the logged
/// excerpt of it ends: the warning keeps no part of the token.
#[test]
fn a_token_cut_by_a_logged_excerpt_leaves_no_part_of_itself() {
    const TOKEN: &str = "s3cret-tail-7781";
    super::hostile::capture_logs();
    let (_server, url) = http_server(|req| {
        let id = &req.body.as_ref().unwrap()["id"];
        let done = json!({"jsonrpc": "2.0", "id": id,
            "result": {"content": [{"type": "text", "text": "done"}]}});
        Reply::raw_sse(format!(
            "data: {}{TOKEN} not json\n\ndata: {done}\n\n",
            "x".repeat(190)
        ))
    });
    let server = Server::http(&url)
        .with_bearer_token(TOKEN)
        .with_startup_timeout(Duration::from_secs(20));
    let client = Client::connect("cut", &server).unwrap();
    let out = client.call_tool("t", &json!({}), &ToolContext::detached());
    client.close();
    assert_eq!(out.unwrap(), "done");
    let lines = super::hostile::LINES.lock().unwrap().clone();
    let warned: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("[cut] skipped an SSE event"))
        .collect();
    assert_eq!(warned.len(), 1, "{lines:#?}");
    assert!(!warned[0].contains("s3cret-t"), "{}", warned[0]);
}

/// An agent with an MCP server closed twice: the second close is a no-op,
/// the server is gone after the first.
#[test]
fn an_agent_with_a_server_closes_twice() {
    use pikuri::mcp::Registry;
    let Some((server, _log, tag)) = overtake("overtake") else {
        return;
    };
    let model = FakeServer::start();
    let mut agent = pikuri::Agent::builder(model.transport())
        .add_extension(Registry::new().server("ov", server))
        .build()
        .unwrap();
    assert_eq!(processes_tagged(&tag), 1);
    bounded(WATCHDOG, move || {
        agent.close();
        agent.close();
    });
    assert_eq!(processes_tagged(&tag), 0);
}
