//! Record a session through `Recorder`, replay it with
//! `FakeServer::from_cassette`, and fail loudly on a mismatch.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use pikuri::builtin;
use pikuri::testing::{Cassette, FakeServer, Recorder, Reply};
use pikuri::{Agent, ChatTransport, Error, HttpConfig, listeners::InMemoryEventList};
use serde_json::json;

use crate::util::{deltas, fast_http, main_kinds};

const QUESTION: &str = "What is 6*7?";
const ANSWER: &str = "6*7 is 42.";

/// The agent configuration used for recording and for every replay.
fn agent(transport: ChatTransport, http: HttpConfig) -> (Agent, InMemoryEventList) {
    let rec = InMemoryEventList::new();
    let agent = Agent::builder(transport.with_api_key("sk-secret"))
        .system_prompt("You are a calculator assistant.")
        .add_tool(builtin::calculator())
        .streaming(true)
        .request_field("temperature", json!(0))
        .http(http)
        .add_listener(rec.clone())
        .build()
        .expect("agent builds");
    (agent, rec)
}

/// A fresh path in the temp dir.
fn temp_path() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "pikuri-cassette-{}-{}.json",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Record a tool call then a streamed answer from a scripted upstream.
fn record() -> (Cassette, Vec<&'static str>, String) {
    let upstream = FakeServer::start();
    upstream.push(Reply::tool_call("calculator", json!({"expression": "6*7"})));
    upstream.push(Reply::text(ANSWER).with_reasoning("Multiply."));
    let recorder = Recorder::start(&upstream.base_url());

    let (mut agent, rec) = agent(recorder.transport_for("fake-model"), fast_http());
    let out = agent.run_loop(QUESTION).unwrap();
    assert_eq!(out.answer.as_deref(), Some(ANSWER));
    upstream.assert_all_used();
    // The key reached the upstream...
    let chats = upstream.chat_requests();
    assert_eq!(chats.len(), 2);
    assert_eq!(chats[0].header("authorization"), Some("Bearer sk-secret"));
    // ...and stays out of the recording.
    let path = temp_path();
    recorder.save(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(!text.contains("sk-secret"), "API key in the cassette");
    assert!(!text.to_ascii_lowercase().contains("authorization"));
    let cassette = Cassette::parse(&text).unwrap();
    assert_eq!(cassette, recorder.cassette());
    (cassette, main_kinds(&rec), deltas(&rec, ""))
}

#[test]
fn cassette_records_probes_and_streams() {
    let (cassette, _, _) = record();
    let all = cassette.interactions();
    assert!(
        all.iter().any(|i| i.method == "GET" && i.path == "/props"),
        "the context-window probe is recorded: {all:#?}"
    );
    let chats: Vec<_> = all
        .iter()
        .filter(|i| i.path == "/v1/chat/completions")
        .collect();
    assert_eq!(chats.len(), 2);
    for chat in &chats {
        assert_eq!(chat.method, "POST");
        assert_eq!(chat.status, 200);
        assert_eq!(chat.content_type, "text/event-stream");
        assert!(chat.body.trim_end().ends_with("data: [DONE]"));
        assert_eq!(chat.request["stream"], true);
        assert_eq!(chat.request["temperature"], 0);
    }
    assert!(chats[0].body.contains("calculator"));
    assert_eq!(chats[1].request["messages"][3]["role"], "tool");
    assert_eq!(chats[1].request["messages"][3]["content"], "42");
}

#[test]
fn replay_reproduces_the_session() {
    let (cassette, kinds, text) = record();
    let path = temp_path();
    cassette.save(&path).unwrap();
    let loaded = Cassette::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();

    let server = FakeServer::from_cassette(loaded);
    let (mut agent, rec) = agent(server.transport(), fast_http());
    let out = agent.run_loop(QUESTION).unwrap();
    assert_eq!(out.answer.as_deref(), Some(ANSWER));
    assert_eq!(main_kinds(&rec), kinds);
    assert_eq!(deltas(&rec, ""), text);
    assert!(kinds.contains(&"tool_call") && kinds.contains(&"assistant_delta"));
    assert!(server.mismatches().is_empty());
    assert_eq!(server.chat_requests().len(), 2);
    server.assert_all_used();
}

#[test]
fn a_different_request_fails_loudly_with_a_diff() {
    let (cassette, _, _) = record();
    let server = FakeServer::from_cassette(cassette);
    let (mut agent, _) = agent(server.transport(), fast_http().with_max_retries(0));
    let err = agent.run_loop("What is 6*8?").unwrap_err();
    let Error::Http {
        status, message, ..
    } = &err
    else {
        panic!("expected an HTTP error, got {err:?}");
    };
    assert_eq!(*status, 500);
    assert!(
        message.contains("matches no unused cassette interaction"),
        "{message}"
    );
    assert!(
        message.contains(r#"-       "content": "What is 6*7?""#),
        "{message}"
    );
    assert!(
        message.contains(r#"+       "content": "What is 6*8?""#),
        "{message}"
    );
    assert_eq!(server.mismatches().len(), 1);

    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        server.assert_all_used();
    }))
    .expect_err("assert_all_used panics on a mismatch");
    let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        text.contains("1 request(s) matched no cassette interaction"),
        "{text}"
    );
    assert!(
        text.contains(r#"+       "content": "What is 6*8?""#),
        "{text}"
    );
    assert!(
        text.contains("cassette interaction(s) never used"),
        "{text}"
    );
}

#[test]
fn ignored_fields_may_differ() {
    let (cassette, _, _) = record();
    let warmer = |server: &FakeServer| {
        let rec = InMemoryEventList::new();
        Agent::builder(server.transport().with_api_key("sk-secret"))
            .system_prompt("You are a calculator assistant.")
            .add_tool(builtin::calculator())
            .streaming(true)
            .request_field("temperature", json!(0.7))
            .http(fast_http().with_max_retries(0))
            .add_listener(rec)
            .build()
            .unwrap()
            .run_loop(QUESTION)
    };
    let strict = FakeServer::from_cassette(cassette.clone());
    assert!(warmer(&strict).is_err());
    let diff = &strict.mismatches()[0];
    assert!(diff.contains(r#"-   "temperature": 0"#), "{diff}");
    assert!(diff.contains(r#"+   "temperature": 0.7"#), "{diff}");

    let lenient = FakeServer::from_cassette(cassette.ignore_field("temperature"));
    let out = warmer(&lenient).unwrap();
    assert_eq!(out.answer.as_deref(), Some(ANSWER));
    lenient.assert_all_used();
}
