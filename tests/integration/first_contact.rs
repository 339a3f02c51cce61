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
        c.compaction(Compaction::summarize().keep_turns(1))
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
        c.compaction(Compaction::summarize().keep_turns(1).threshold(0.4))
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
