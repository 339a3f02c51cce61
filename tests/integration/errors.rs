//! The fault matrix: one row per fault, run streamed and non-streamed. Each
//! row states the outcome, then the history must be valid and the next turn
//! on the same agent must succeed. A new fault is one line.

use std::time::{Duration, Instant};

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Error, ErrorKind, HttpConfig, Role};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history, fast_http};

/// How a row must end.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// The run succeeds (after retries or recovery).
    Ok,
    Http(u16),
    Truncated,
    Protocol,
    Timeout,
}

struct Row {
    name: &'static str,
    replies: fn() -> Vec<Reply>,
    /// None: both modes; Some(b): only streaming == b.
    only: Option<bool>,
    expect: Expect,
    /// Chat requests the row makes.
    requests: usize,
}

fn ok_text() -> Reply {
    Reply::text("fine")
}

const ROWS: &[Row] = &[
    Row {
        name: "400 with error body",
        replies: || vec![Reply::status(400, "bad request: messages")],
        only: None,
        expect: Expect::Http(400),
        requests: 1,
    },
    Row {
        name: "401",
        replies: || vec![Reply::status(401, "invalid api key")],
        only: None,
        expect: Expect::Http(401),
        requests: 1,
    },
    Row {
        name: "404 wrong model",
        replies: || vec![Reply::status(404, "model not found")],
        only: None,
        expect: Expect::Http(404),
        requests: 1,
    },
    Row {
        name: "429 with Retry-After then ok",
        replies: || {
            vec![
                Reply::status(429, "slow down").with_retry_after(1),
                ok_text(),
            ]
        },
        only: None,
        expect: Expect::Ok,
        requests: 2,
    },
    Row {
        name: "429 without Retry-After then ok",
        replies: || vec![Reply::status(429, "slow down"), ok_text()],
        only: None,
        expect: Expect::Ok,
        requests: 2,
    },
    Row {
        name: "500 502 then ok",
        replies: || {
            vec![
                Reply::status(500, "oops"),
                Reply::status(502, "bad gateway"),
                ok_text(),
            ]
        },
        only: None,
        expect: Expect::Ok,
        requests: 3,
    },
    Row {
        name: "503 then ok",
        replies: || vec![Reply::status(503, "loading model"), ok_text()],
        only: None,
        expect: Expect::Ok,
        requests: 2,
    },
    Row {
        name: "500 forever",
        replies: || {
            vec![
                Reply::status(500, "a"),
                Reply::status(500, "b"),
                Reply::status(500, "c"),
            ]
        },
        only: None,
        expect: Expect::Http(500),
        requests: 3,
    },
    Row {
        name: "stream cut without [DONE]",
        replies: || vec![Reply::text("a long answer that is cut").cut_after(3)],
        only: Some(true),
        expect: Expect::Truncated,
        requests: 1,
    },
    Row {
        name: "garbage and keep-alives",
        replies: || vec![Reply::text("still fine").with_garbage()],
        only: None,
        expect: Expect::Ok,
        requests: 1,
    },
    Row {
        name: "malformed JSON chunk",
        replies: || vec![Reply::text("will break").malformed_after(2)],
        only: Some(true),
        expect: Expect::Protocol,
        requests: 1,
    },
    Row {
        name: "garbage body",
        replies: || vec![Reply::raw_body(200, "application/json", "{not json")],
        only: None,
        expect: Expect::Protocol,
        requests: 1,
    },
    Row {
        name: "oversized line",
        replies: || vec![Reply::text("x".repeat(100_000)).with_chunk_chars(100_000)],
        only: Some(true),
        expect: Expect::Protocol,
        requests: 1,
    },
    Row {
        name: "server never answers",
        replies: || vec![Reply::hang()],
        only: None,
        expect: Expect::Timeout,
        requests: 1,
    },
    Row {
        name: "stream goes silent",
        replies: || vec![Reply::text("silence follows").hang_after(2)],
        only: Some(true),
        expect: Expect::Timeout,
        requests: 1,
    },
    Row {
        name: "unknown finish_reason",
        replies: || vec![Reply::text("odd but fine").with_finish_reason("eos_token_reached")],
        only: None,
        expect: Expect::Ok,
        requests: 1,
    },
    Row {
        name: "truncated tool arguments",
        replies: || {
            vec![
                Reply::raw_tool_call("look", r#"{"query": "cut he"#).with_finish_reason("length"),
                ok_text(),
            ]
        },
        only: None,
        expect: Expect::Ok,
        requests: 2,
    },
];

fn matches(expect: Expect, result: &Result<pikuri::Outcome, Error>) -> bool {
    match (expect, result) {
        (Expect::Http(code), Err(e)) => e.status() == Some(code),
        (Expect::Ok, Ok(_))
        | (Expect::Truncated, Err(Error::Truncated))
        | (Expect::Protocol, Err(Error::Protocol { .. }))
        | (Expect::Timeout, Err(Error::Timeout { .. })) => true,
        _ => false,
    }
}

#[test]
fn fault_matrix() {
    let http = fast_http()
        .with_read_timeout(Duration::from_millis(400))
        .with_max_line_bytes(64 * 1024);
    for row in ROWS {
        for streaming in [false, true] {
            if row.only.is_some_and(|only| only != streaming) {
                continue;
            }
            let server = FakeServer::start();
            for r in (row.replies)() {
                server.push(r);
            }
            let look = FnTool::new(
                "look",
                "Looks.",
                Parameters::builder().required_string("query", "q").build(),
                |_, _| Ok("seen".into()),
            );
            let (mut agent, rec) = agent_with(&server, |c| {
                c.streaming(streaming).http(http.clone()).add_tool(look)
            });
            let started = Instant::now();
            let result = agent.run_loop("go");
            let label = format!("{} (streaming={streaming})", row.name);
            assert!(
                matches(row.expect, &result),
                "{label}: expected {:?}, got {result:?}",
                row.expect
            );
            assert_eq!(
                server.chat_requests().len(),
                row.requests,
                "{label}: request count"
            );
            if row.name.contains("with Retry-After") {
                assert!(
                    started.elapsed() >= Duration::from_millis(900),
                    "{label}: Retry-After not respected"
                );
            }
            if row.name == "truncated tool arguments" {
                let obs = agent
                    .messages()
                    .iter()
                    .find(|m| m.role == Role::Tool)
                    .unwrap();
                assert!(
                    obs.content.starts_with("Error: ") && obs.content.contains("cut he"),
                    "{label}: {}",
                    obs.content
                );
            }
            if let Err(e) = &result {
                assert!(!e.to_string().is_empty());
                // A failed round leaves no half message behind.
                assert_eq!(agent.messages().last().unwrap().role, Role::User, "{label}");
            }
            assert_valid_history(agent.messages());
            assert_eq!(rec.kinds().last(), Some(&"stopped"), "{label}");
            server.push(Reply::text("next turn works"));
            let next = agent.run_loop("again");
            assert!(next.is_ok(), "{label}: next turn failed: {next:?}");
            assert_valid_history(agent.messages());
        }
    }
}

#[test]
fn connection_refused_is_retried_then_a_connect_error() {
    let port = crate::util::closed_port();
    let transport =
        pikuri::ChatTransport::new("m").with_api_base(format!("http://127.0.0.1:{port}/v1"));
    let mut agent = Agent::builder(transport)
        .http(fast_http().with_max_retries(2))
        .build()
        .unwrap();
    let err = agent.run_loop("hi").unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn retries_are_observable_as_events_and_requests() {
    let server = FakeServer::start();
    server.push(Reply::status(503, "warming up"));
    server.push(Reply::text("ready"));
    let (mut agent, rec) = agent_with(&server, |c| c);
    agent.run_loop("hi").unwrap();
    assert_eq!(server.chat_requests().len(), 2);
    assert!(rec.events().iter().any(
        |e| matches!(e, pikuri::Event::Retrying { attempt: 1, error, .. } if error.contains("503"))
    ));
}

#[test]
fn retries_are_configurable_to_zero() {
    let server = FakeServer::start();
    server.push(Reply::status(503, "busy"));
    let (mut agent, _) = agent_with(&server, |c| {
        c.http(HttpConfig::default().with_max_retries(0))
    });
    assert_eq!(agent.run_loop("hi").unwrap_err().status(), Some(503));
    assert_eq!(server.chat_requests().len(), 1);
}

#[test]
fn http_error_message_is_the_servers_own() {
    let server = FakeServer::start();
    server.push(Reply::status(
        400,
        "exceed_context_size_error: the request exceeds the available context size",
    ));
    let (mut agent, _) = agent_with(&server, |c| c);
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "http status 400 from {}/chat/completions: exceed_context_size_error: the request exceeds the available context size",
            server.base_url()
        )
    );
}

#[test]
fn stream_request_answered_with_plain_json_still_works() {
    let server = FakeServer::start();
    server.push(Reply::raw_body(
        200,
        "application/json",
        json!({"choices":[{"index":0,"message":{"role":"assistant","content":"plain"},"finish_reason":"stop"}]}).to_string(),
    ));
    let (mut agent, rec) = agent_with(&server, |c| c.streaming(true));
    assert_eq!(
        agent.run_loop("hi").unwrap().answer.as_deref(),
        Some("plain")
    );
    assert!(rec.kinds().contains(&"assistant_delta"));
}

/// Malformed arguments in a response that ended on `finish_reason: "length"`
/// get the "cut off by the output token limit" observation (make a shorter
/// call); the same arguments in a response that ended normally get the plain
/// parse error, which says nothing of a cut. (Mutation pass: the matrix row
/// above checked only that an error came back.)
#[test]
fn cut_off_arguments_are_named_only_after_finish_reason_length() {
    for (finish, cut) in [("length", true), ("tool_calls", false)] {
        for streaming in [false, true] {
            let server = FakeServer::start();
            server.push(
                Reply::raw_tool_call("look", r#"{"query": "cut he"#).with_finish_reason(finish),
            );
            server.push(ok_text());
            let look = FnTool::new(
                "look",
                "Looks.",
                Parameters::builder().required_string("query", "q").build(),
                |_, _| Ok("seen".into()),
            );
            let (mut agent, _) = agent_with(&server, |c| c.streaming(streaming).add_tool(look));
            agent.run_loop("go").unwrap();
            let obs = &agent
                .messages()
                .iter()
                .find(|m| m.role == Role::Tool)
                .unwrap()
                .content;
            assert!(
                obs.starts_with("Error: ") && obs.contains("cut he"),
                "{obs}"
            );
            assert_eq!(
                obs.contains("cut off by the output token limit"),
                cut,
                "finish_reason {finish}, streaming {streaming}: {obs}"
            );
        }
    }
}

/// An agent on `transport` that does not retry.
fn no_retry(transport: pikuri::ChatTransport) -> Agent {
    no_retry_streaming(transport, false)
}

/// An agent on `transport` that does not retry, streaming or not.
fn no_retry_streaming(transport: pikuri::ChatTransport, streaming: bool) -> Agent {
    Agent::builder(transport)
        .http(fast_http().with_max_retries(0))
        .streaming(streaming)
        .build()
        .unwrap()
}

/// A turn against a closed port on loopback, with no retry: its error and
/// the URL it should name.
fn refused() -> (pikuri::Error, String) {
    let port = crate::util::closed_port();
    let transport =
        pikuri::ChatTransport::new("m").with_api_base(format!("http://127.0.0.1:{port}/v1"));
    let err = no_retry(transport).run_loop("hi").unwrap_err();
    (err, format!("http://127.0.0.1:{port}/v1/chat/completions"))
}

#[test]
fn a_refused_connection_is_connect_and_names_the_url() {
    let (err, url) = refused();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err:?}");
    assert_eq!(err.url(), Some(url.as_str()));
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!("cannot connect to {url}: ")),
        "{shown}"
    );
    assert!(!shown.contains('\n'), "{shown}");
}

#[test]
fn debug_reads_as_a_sentence() {
    let (err, url) = refused();
    // What `fn main() -> pikuri::Result<()>` prints after `Error: `.
    let debug = format!("{err:?}");
    assert!(debug.starts_with(&err.to_string()), "{debug}");
    for structure in ["Os {", "Transport(", "Connect {", "Io(", "kind:"] {
        assert!(!debug.contains(structure), "{debug}");
    }
    // The refusal reads on in the sentence, lowercase, once.
    if cfg!(target_os = "linux") {
        assert_eq!(
            debug,
            format!("cannot connect to {url}: connection refused (os error 111)")
        );
    }
    // The structure stays one `#` away.
    assert!(format!("{err:#?}").starts_with("Connect {"), "{err:#?}");
    // A cause the line does not say is listed under `Caused by:`.
    let wrapped = Error::Transport {
        url: None,
        source: Box::new(std::io::Error::other(Outer)),
    };
    assert_eq!(
        format!("{wrapped:?}"),
        "transport error: outer\n\nCaused by:\n    inner"
    );
}

/// An error with a cause, for the `Caused by:` lines.
#[derive(Debug)]
struct Outer;
impl std::fmt::Display for Outer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("outer")
    }
}
impl std::error::Error for Outer {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&Inner)
    }
}
#[derive(Debug)]
struct Inner;
impl std::fmt::Display for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("inner")
    }
}
impl std::error::Error for Inner {}

#[test]
fn statuses_map_to_kinds_and_name_the_url() {
    let rows = [
        (401, "invalid api key", ErrorKind::Auth),
        (403, "forbidden", ErrorKind::Auth),
        (429, "rate limit reached", ErrorKind::RateLimit),
        (
            404,
            "The model `nope` does not exist or you do not have access to it.",
            ErrorKind::ModelNotFound,
        ),
        (
            404,
            r#"model "nope" not found, try pulling it first"#,
            ErrorKind::ModelNotFound,
        ),
        (
            400,
            "the request exceeds the available context size, try increasing it",
            ErrorKind::ContextOverflow,
        ),
        (500, "oops", ErrorKind::Server),
        (503, "loading model", ErrorKind::Server),
        (400, "bad request: messages", ErrorKind::Rejected),
        (404, "404 page not found", ErrorKind::Rejected),
    ];
    for streaming in [false, true] {
        for (status, message, kind) in rows {
            let server = FakeServer::start();
            server.push(Reply::status(status, message));
            let mut agent = no_retry_streaming(server.transport(), streaming);
            let err = agent.run_loop("hi").unwrap_err();
            assert_eq!(err.kind(), kind, "{status} {message}: {err}");
            assert_eq!(err.status(), Some(status));
            assert_eq!(
                err.is_context_overflow(),
                kind == ErrorKind::ContextOverflow
            );
            let url = format!("{}/chat/completions", server.base_url());
            assert_eq!(err.url(), Some(url.as_str()));
            assert_eq!(
                err.to_string(),
                format!("http status {status} from {url}: {message}")
            );
            // A failed turn leaves the agent usable.
            server.push(Reply::text("fine"));
            assert!(agent.run_loop("again").is_ok());
        }
    }
}

#[test]
fn an_overflow_is_not_retried_even_as_a_500() {
    let server = FakeServer::start();
    server.push(Reply::status(500, "prompt too long"));
    let (mut agent, _) = agent_with(&server, |c| c);
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ContextOverflow, "{err}");
    assert_eq!(server.chat_requests().len(), 1);
}

#[test]
fn a_garbage_body_is_protocol_and_names_the_url() {
    for streaming in [false, true] {
        let server = FakeServer::start();
        let reply = if streaming {
            Reply::raw_sse("data: {not json\n\n")
        } else {
            Reply::raw_body(200, "application/json", "<html>not json</html>")
        };
        server.push(reply);
        let mut agent = no_retry_streaming(server.transport(), streaming);
        let err = agent.run_loop("hi").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
        let url = format!("{}/chat/completions", server.base_url());
        assert_eq!(err.url(), Some(url.as_str()));
        assert!(
            err.to_string()
                .starts_with(&format!("protocol error from {url}: ")),
            "{err}"
        );
    }
}

#[test]
fn urls_in_errors_hide_user_info_and_query_values() {
    // A refused connection, with a key in the query.
    let port = crate::util::closed_port();
    let transport = pikuri::ChatTransport::new("m")
        .with_api_base(format!("http://127.0.0.1:{port}/v1?key=sk-query-secret"));
    let err = no_retry(transport).run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err:?}");
    for shown in [err.to_string(), format!("{err:?}"), format!("{err:#?}")] {
        assert!(!shown.contains("sk-query-secret"), "{shown}");
        assert!(
            shown.contains(&format!("http://127.0.0.1:{port}/v1?key=<redacted>")),
            "{shown}"
        );
    }
    // A server that answers, reached with a user and password in the URL.
    let server = FakeServer::start();
    server.push(Reply::status(401, "who are you"));
    let base = server
        .base_url()
        .replace("http://", "http://me:hunter2-secret@");
    let transport = server.transport().with_api_base(base);
    let err = no_retry(transport).run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err:?}");
    let expected = format!(
        "{}/chat/completions",
        server.base_url().replace("http://", "http://<redacted>@")
    );
    assert_eq!(err.url(), Some(expected.as_str()));
    for shown in [err.to_string(), format!("{err:?}"), format!("{err:#?}")] {
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("me:"), "{shown}");
    }
}

#[test]
fn timeouts_name_the_url() {
    let server = FakeServer::start();
    server.push(Reply::hang());
    let read = Duration::from_millis(300);
    let mut agent = Agent::builder(server.transport())
        .http(fast_http().with_max_retries(0).with_read_timeout(read))
        .build()
        .unwrap();
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err:?}");
    let url = format!("{}/chat/completions", server.base_url());
    assert_eq!(
        err.to_string(),
        format!("timed out after 300 ms waiting for {url}")
    );
}

#[test]
fn an_unreachable_mcp_server_is_connect_and_names_its_url() {
    let port = crate::util::closed_port();
    let url = format!("http://127.0.0.1:{port}/mcp?token=mcp-secret");
    let err = pikuri::mcp::Client::connect("web", &pikuri::mcp::Server::http(&url)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err:?}");
    let shown = format!("http://127.0.0.1:{port}/mcp?token=<redacted>");
    assert_eq!(err.url(), Some(shown.as_str()));
    assert!(
        err.to_string()
            .starts_with(&format!("cannot connect to {shown}: MCP server `web`")),
        "{err}"
    );
    assert!(!format!("{err:?}").contains("mcp-secret"), "{err:?}");
}

#[test]
fn an_mcp_endpoint_that_refuses_the_token_is_auth() {
    let server = FakeServer::start();
    server.set_route("POST", "/mcp", 401, json!({"error": "bad token"}));
    let url = format!("{}/mcp", server.root_url());
    let mcp = pikuri::mcp::Server::http(&url).with_bearer_token("wrong");
    let err = pikuri::mcp::Client::connect("web", &mcp).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Auth, "{err:?}");
    assert_eq!(err.status(), Some(401));
    assert_eq!(err.url(), Some(url.as_str()));
}
