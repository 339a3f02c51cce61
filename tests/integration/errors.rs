//! The fault matrix: one row per fault, run streamed and non-streamed. Each
//! row states the outcome, then the history must be valid and the next turn
//! on the same agent must succeed. A new fault is one line.

use std::time::{Duration, Instant};

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Error, HttpConfig, Role};
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
        | (Expect::Protocol, Err(Error::Protocol(_)))
        | (Expect::Timeout, Err(Error::Timeout(_))) => true,
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
fn connection_refused_is_retried_then_a_transport_error() {
    let port = crate::util::closed_port();
    let transport =
        pikuri::ChatTransport::new("m").with_api_base(format!("http://127.0.0.1:{port}/v1"));
    let mut agent = Agent::builder(transport)
        .http(fast_http().with_max_retries(2))
        .build()
        .unwrap();
    let err = agent.run_loop("hi").unwrap_err();
    assert!(matches!(err, Error::Transport(_)), "{err:?}");
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
        "http status 400: exceed_context_size_error: the request exceeds the available context size"
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
