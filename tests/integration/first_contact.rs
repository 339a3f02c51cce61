//! Issue 28, classes 7 to 9: compaction that would grow the history, errors
//! read from structured fields and non-JSON bodies, and what a new user
//! meets first (a URL without a scheme, `https://` without TLS, an empty
//! environment, raw identifiers in `schema_type!`, a cancelled stream).

use pikuri::compaction::Compaction;
use pikuri::testing::{FakeServer, Reply};
use pikuri::{ChatTransport, ErrorKind, Event, History, Message};

use crate::util::{agent_with, assert_valid_history};

/// Eight turns of about 2 KB each: 16 KB of history before the current turn.
fn sixteen_kb_of_turns() -> Vec<Message> {
    let mut h = Vec::new();
    for i in 0..8 {
        h.push(Message::user(format!("question {i}: {}", "q".repeat(1000))));
        h.push(Message::assistant(format!(
            "answer {i}: {}",
            "a".repeat(1000)
        )));
    }
    h
}

#[test]
fn a_summary_larger_than_what_it_replaces_leaves_the_history_untouched() {
    let server = FakeServer::start();
    // The compactor answers with 2 MB for 16 KB of turns.
    server.push(Reply::text("s".repeat(2_000_000)));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.compaction(Compaction::summarize().with_keep_turns(1))
    });
    let mut h = sixteen_kb_of_turns();
    h.push(Message::user("now"));
    h.push(Message::assistant("ok"));
    agent
        .load_history(History::new(h.clone()).unwrap())
        .unwrap();
    let err = agent.compact().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
    assert!(err.to_string().contains("history is unchanged"), "{err}");
    assert_eq!(agent.messages(), &h[..], "the history is untouched");
    assert!(
        !rec.events()
            .iter()
            .any(|e| matches!(e, Event::Compacted { .. })),
        "no Compacted event for a refused summary"
    );
    assert_eq!(server.chat_requests().len(), 1, "one summary request");
}

#[test]
fn a_refused_summary_before_a_request_lets_the_request_go_ahead_unchanged() {
    let server = FakeServer::start();
    server.set_context_size(Some(8_000));
    // 16 KB of turns is ~4,000 tokens: past 40% of 8,000, so compaction runs.
    server.push(Reply::text("s".repeat(2_000_000)));
    server.push(Reply::text("the answer"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.compaction(
            Compaction::summarize()
                .with_keep_turns(1)
                .with_threshold(0.4),
        )
    });
    let h = sixteen_kb_of_turns();
    agent
        .load_history(History::new(h.clone()).unwrap())
        .unwrap();
    let outcome = agent.run_loop("now").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("the answer"));
    let m = agent.messages();
    assert_valid_history(m);
    assert_eq!(&m[..h.len()], &h[..], "the older turns are untouched");
    assert_eq!(m.len(), h.len() + 2);
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].tool_names().is_empty(), "the summary request");
    let sent = requests[1].messages();
    assert!(
        !sent.iter().any(|m| m["content"]
            .as_str()
            .is_some_and(|c| c.starts_with(Compaction::SUMMARY_MARKER))),
        "no summary was sent"
    );
}

// ------------------------------------------------------------ class 8: error bodies

/// A 400 of each server's overflow form, its message unlike the others'.
const OVERFLOW_BODIES: [&str; 4] = [
    // OpenAI: the code says it, the message does not.
    r#"{"error":{"message":"Invalid request.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    // llama.cpp: the type says it.
    r#"{"error":{"code":400,"message":"request rejected","type":"exceed_context_size_error","n_prompt_tokens":5034,"n_ctx":1024}}"#,
    // vLLM (top-level form).
    r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}"#,
    // Anthropic through an OpenAI-compatible proxy.
    r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
];

#[test]
fn overflows_are_read_from_code_and_type_too() {
    for body in OVERFLOW_BODIES {
        let server = FakeServer::start();
        server.push(Reply::raw_body(400, "application/json", body));
        let (mut agent, _) = agent_with(&server, |c| c);
        let err = agent.run_loop("hi").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ContextOverflow, "{body}: {err}");
        assert!(err.is_context_overflow());
    }
    // Ollama's plain-string form.
    let server = FakeServer::start();
    server.push(Reply::raw_body(
        400,
        "application/json",
        r#"{"error":"the input length exceeds the context length"}"#,
    ));
    let (mut agent, _) = agent_with(&server, |c| c);
    assert!(agent.run_loop("hi").unwrap_err().is_context_overflow());
    // The code is shown with the message.
    let server = FakeServer::start();
    server.push(Reply::raw_body(400, "application/json", OVERFLOW_BODIES[0]));
    let (mut agent, _) = agent_with(&server, |c| c);
    let err = agent.run_loop("hi").unwrap_err();
    assert!(
        err.to_string()
            .ends_with(": Invalid request. (code: context_length_exceeded)"),
        "{err}"
    );
    // A 400 with another code is not an overflow.
    let server = FakeServer::start();
    server.push(Reply::raw_body(
        400,
        "application/json",
        r#"{"error":{"message":"Invalid request.","type":"invalid_request_error","code":"invalid_value"}}"#,
    ));
    let (mut agent, _) = agent_with(&server, |c| c);
    assert_eq!(
        agent.run_loop("hi").unwrap_err().kind(),
        ErrorKind::Rejected
    );
}

#[test]
fn an_overflow_said_only_by_the_code_is_recovered_by_compaction() {
    let server = FakeServer::start();
    server.set_context_size(None); // only the 400 triggers compaction
    server.push(Reply::text(format!("a1 {}", "and so on ".repeat(20))));
    server.push(Reply::raw_body(400, "application/json", OVERFLOW_BODIES[0]));
    server.push(Reply::text("Summary: q1."));
    server.push(Reply::text("a2"));
    let (mut agent, _) = agent_with(&server, |c| c.compaction(Compaction::summarize()));
    agent.run_loop("q1").unwrap();
    let out = agent.run_loop("q2").unwrap();
    assert_eq!(out.answer.as_deref(), Some("a2"));
    assert_eq!(server.chat_requests().len(), 4, "first, summary, one retry");
    assert_valid_history(agent.messages());
}

/// What Apache answers for a path it does not have.
const APACHE_404: &str = "<!DOCTYPE HTML PUBLIC \"-//IETF//DTD HTML 2.0//EN\">\n<html><head>\n<title>404 Not Found</title>\n</head><body>\n<h1>Not Found</h1>\n<p>The requested URL was not found on this server.</p>\n<hr>\n<address>Apache/2.4.41 (Ubuntu) Server at 127.0.0.1 Port 8080</address>\n</body></html>\n";

#[test]
fn a_web_page_instead_of_the_api_is_summarized_not_quoted() {
    let server = FakeServer::start();
    server.push(Reply::raw_body(
        404,
        "text/html; charset=iso-8859-1",
        APACHE_404,
    ));
    let (mut agent, _) = agent_with(&server, |c| c);
    let err = agent.run_loop("hi").unwrap_err();
    let shown = err.to_string();
    assert_eq!(err.status(), Some(404));
    assert_eq!(err.kind(), ErrorKind::Rejected);
    assert!(
        shown.ends_with(&format!(
            ": an HTML page titled \"404 Not Found\" ({} bytes), not an API answer: check the base URL",
            APACHE_404.len()
        )),
        "{shown}"
    );
    assert!(!shown.contains('<') && !shown.contains('\n'), "{shown}");
    // A page with a success status: the protocol error summarizes it too.
    let server = FakeServer::start();
    server.push(Reply::raw_body(
        200,
        "text/html",
        APACHE_404.replace("404 Not Found", "Welcome"),
    ));
    let (mut agent, _) = agent_with(&server, |c| c.streaming(false));
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Protocol);
    assert!(
        err.to_string().contains("an HTML page titled \"Welcome\""),
        "{err}"
    );
    assert!(!err.to_string().contains("<html"), "{err}");
    // Plain text: its first line, and how many follow.
    let server = FakeServer::start();
    server.push(Reply::raw_body(
        502,
        "text/plain",
        "Bad Gateway\nupstream: 10.0.0.1\nretry later\n",
    ));
    let (mut agent, _) = agent_with(&server, |c| {
        c.http(pikuri::HttpConfig::default().with_max_retries(0))
    });
    let err = agent.run_loop("hi").unwrap_err();
    assert!(
        err.to_string()
            .ends_with(": Bad Gateway (and 2 more lines)"),
        "{err}"
    );
}

// ------------------------------------------------------------ class 9: first contact

#[test]
fn a_refused_connection_names_the_server() {
    let port = crate::util::closed_port();
    let base = format!("http://127.0.0.1:{port}/v1");
    let mut agent = pikuri::Agent::builder(ChatTransport::new("m").with_api_base(&base))
        .http(pikuri::HttpConfig::default().with_max_retries(0))
        .build()
        .unwrap();
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect);
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!("cannot connect to {base}/chat/completions: ")),
        "{shown}"
    );
}

#[test]
fn a_base_url_without_a_scheme_is_rejected_at_build_with_the_fix() {
    let err = pikuri::Agent::builder(ChatTransport::new("m").with_api_base("127.0.0.1:8080/v1"))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        "invalid input: the API base `127.0.0.1:8080/v1` has no scheme: \
         write `http://127.0.0.1:8080/v1` (or `https://` for TLS)"
    );
    // A fallback too.
    let server = FakeServer::start();
    let err = pikuri::Agent::builder(server.transport())
        .add_fallback(ChatTransport::new("m").with_api_base("localhost:11434/v1"))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`localhost:11434/v1` has no scheme"),
        "{err}"
    );
    // And a switch between turns, before anything is sent.
    server.push(Reply::text("ok"));
    let (mut agent, _) = agent_with(&server, |c| c);
    let err = agent
        .run_loop_with(
            "hi",
            ChatTransport::new("m").with_api_base("127.0.0.1:8080"),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(agent.messages().is_empty(), "nothing entered the history");
    assert_eq!(agent.run_loop("hi").unwrap().answer.as_deref(), Some("ok"));
}

#[test]
fn an_mcp_url_without_a_scheme_is_rejected_with_the_fix() {
    let registry =
        pikuri::mcp::Registry::new().server("web", pikuri::mcp::Server::http("127.0.0.1:3001/mcp"));
    let server = FakeServer::start();
    let err = pikuri::Agent::builder(server.transport())
        .add_extension(registry)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(
        err.to_string()
            .contains("`127.0.0.1:3001/mcp` has no scheme: write `http://127.0.0.1:3001/mcp`"),
        "{err}"
    );
}

/// Without TLS compiled in, `https://` says which feature to turn on.
#[cfg(not(feature = "rustls"))]
#[test]
fn https_without_the_rustls_feature_names_the_feature() {
    let err =
        pikuri::Agent::builder(ChatTransport::new("m").with_api_base("https://api.example.com/v1"))
            .build()
            .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(
        err.to_string()
            .contains("build pikuri with the `rustls` feature"),
        "{err}"
    );
    // No API base at all means OpenAI's https:// one.
    let err = pikuri::Agent::builder(ChatTransport::new("m"))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("`rustls`"), "{err}");
}

pikuri::tool::schema_type! {
    /// What to list.
    struct Listing {
        /// `file` or `dir`.
        r#type: String,
        r#match: Option<String>,
    }
}

#[test]
fn a_raw_identifier_field_is_named_as_serde_names_it_and_the_tool_can_be_called() {
    use pikuri::ToolContext;
    use pikuri::tool::TypedTool;
    let list = TypedTool::new("list", "Lists entries.", |l: Listing, _cx: &ToolContext| {
        Ok(format!("listed {} {:?}", l.r#type, l.r#match))
    });
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "list",
        serde_json::json!({"type": "file", "match": "*.rs"}),
    ));
    server.push(Reply::text("done"));
    let (mut agent, _) = agent_with(&server, |c| c.add_tool(list));
    agent.run_loop("list the files").unwrap();
    let requests = server.chat_requests();
    let params = &requests[0].body.as_ref().unwrap()["tools"][0]["function"]["parameters"];
    assert_eq!(
        params["required"],
        serde_json::json!(["type", "match"]),
        "{params}"
    );
    assert!(params["properties"].get("type").is_some(), "{params}");
    assert!(params["properties"].get("r#type").is_none(), "{params}");
    let sent = requests[1].messages();
    assert_eq!(
        sent.last().unwrap()["content"],
        "listed file Some(\"*.rs\")",
        "the call reached the handler"
    );
}

// ------------------------------------------------------------ cancelled streams, usage

/// An agent on `server` that cancels itself when its first delta arrives.
/// An agent whose listener cancels at the first delta it sees, once: the
/// next turn's deltas must not cancel that turn too (a listener that
/// cancelled at every delta raced the next turn's end).
fn cancelling_agent(server: &FakeServer) -> (pikuri::Agent, pikuri::listeners::InMemoryEventList) {
    let cancel = pikuri::Cancellable::new();
    let c2 = cancel.clone();
    let once = std::sync::atomic::AtomicBool::new(false);
    agent_with(server, move |c| {
        c.cancellable(cancel)
            .streaming(true)
            .add_listener(move |e: &Event| {
                if matches!(e, Event::AssistantDelta { .. })
                    && !once.swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    c2.cancel();
                }
            })
    })
}

fn partial_of(rec: &pikuri::listeners::InMemoryEventList) -> String {
    let partials: Vec<String> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Cancelled { partial_answer, .. } => Some(partial_answer),
            _ => None,
        })
        .collect();
    assert_eq!(partials.len(), 1, "one Cancelled event");
    partials.into_iter().next().unwrap()
}

#[test]
fn a_cancelled_stream_keeps_its_partial_text_in_the_cancelled_event() {
    let full = "The answer is forty-two, as everyone knows.";
    let server = FakeServer::start();
    // Three chunks (the role, then two pieces of text), then silence.
    server.push(Reply::text(full).hang_after(3));
    let (mut agent, rec) = cancelling_agent(&server);
    let err = agent.run_loop("what is the answer?").unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    let partial = partial_of(&rec);
    assert!(!partial.is_empty());
    assert!(full.starts_with(&partial), "{partial:?}");
    assert_eq!(
        partial,
        crate::util::deltas(&rec, ""),
        "what the listeners saw"
    );
    // The history keeps no half message; the next turn works.
    assert_eq!(agent.messages().len(), 1);
    server.push(Reply::text("back"));
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("back")
    );
    // A cancel between requests has no partial text.
    let server = FakeServer::start();
    let cancel = pikuri::Cancellable::new();
    let c2 = cancel.clone();
    let tool = pikuri::tool::FnTool::new(
        "stop",
        "Cancels.",
        pikuri::tool::Parameters::empty(),
        move |_, _| {
            c2.cancel();
            Ok("ok".into())
        },
    );
    let (mut agent, rec) = agent_with(&server, |c| c.cancellable(cancel).add_tool(tool));
    server.push(Reply::tool_call("stop", serde_json::json!({})));
    assert!(agent.run_loop("go").unwrap_err().is_cancelled());
    assert_eq!(partial_of(&rec), "");
}

#[test]
fn usage_a_cancelled_stream_reported_counts_in_the_totals() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // A server that reports usage with every chunk (vLLM's continuous
    // usage stats), then goes silent until the client hangs up.
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        crate::util::read_request(&mut conn);
        let chunk = serde_json::json!({
            "id": "c1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Partial"}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
        });
        let _ = write!(
            conn,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {chunk}\n\n"
        );
        let _ = conn.flush();
        let mut sink = [0u8; 64];
        while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
    });
    let cancel = pikuri::Cancellable::new();
    let c2 = cancel.clone();
    let rec = pikuri::listeners::InMemoryEventList::new();
    let transport = ChatTransport::new("m")
        .with_api_base(format!("http://127.0.0.1:{port}/v1"))
        .with_context_window(Some(4096)); // no probe: one connection only
    let mut agent = pikuri::Agent::builder(transport)
        .cancellable(cancel)
        .streaming(true)
        .add_listener(rec.clone())
        .add_listener(move |e: &Event| {
            if matches!(e, Event::AssistantDelta { .. }) {
                c2.cancel();
            }
        })
        .build()
        .unwrap();
    assert!(agent.run_loop("hi").unwrap_err().is_cancelled());
    server.join().unwrap();
    assert_eq!(partial_of(&rec), "Partial");
    let total = agent.total_usage();
    assert_eq!(
        (total.input, total.output),
        (Some(50), Some(7)),
        "{total:?}"
    );
    let stopped = rec
        .events()
        .into_iter()
        .find_map(|e| match e {
            Event::Stopped { usage, .. } => Some(usage),
            _ => None,
        })
        .unwrap();
    assert_eq!(stopped.output, Some(7));
}

#[test]
fn compaction_requests_count_in_the_usage_totals() {
    // On demand, between turns.
    let server = FakeServer::start();
    server.push(Reply::text("The user asked eight questions.").with_usage(500, 20));
    let (mut agent, _) = agent_with(&server, |c| {
        c.compaction(Compaction::summarize().with_keep_turns(1))
    });
    let mut h = sixteen_kb_of_turns();
    h.push(Message::user("now"));
    h.push(Message::assistant("ok"));
    agent.load_history(History::new(h).unwrap()).unwrap();
    assert!(agent.compact().unwrap());
    let total = agent.total_usage();
    assert_eq!(
        (total.input, total.output),
        (Some(500), Some(20)),
        "{total:?}"
    );
    // Then a turn: its own request adds to it.
    server.push(Reply::text("a").with_usage(30, 2));
    agent.run_loop("next").unwrap();
    assert_eq!(agent.total_usage().input, Some(530));

    // Before a request, inside a turn: in the turn's usage and the total.
    let server = FakeServer::start();
    server.set_context_size(Some(8_000));
    server.push(Reply::text("The user asked eight questions.").with_usage(4_000, 10));
    server.push(Reply::text("the answer").with_usage(100, 3));
    let (mut agent, _) = agent_with(&server, |c| {
        c.compaction(
            Compaction::summarize()
                .with_keep_turns(1)
                .with_threshold(0.4),
        )
    });
    agent
        .load_history(History::new(sixteen_kb_of_turns()).unwrap())
        .unwrap();
    let outcome = agent.run_loop("now").unwrap();
    assert!(Compaction::is_summary(&agent.messages()[0]), "it compacted");
    assert_eq!(outcome.usage.input, Some(4_100), "{:?}", outcome.usage);
    assert_eq!(outcome.usage.output, Some(13));
    assert_eq!(agent.total_usage(), outcome.usage);
}
