//! Issue 17: compaction before the window fills, recovery from an overflow,
//! oversized tool results, fallback between transports. The FakeServer is
//! strict: an invalid history would be answered 400 and show up in
//! `rejections()`.

use pikuri::compaction::{Compaction, CompactionStrategy, ToolResultLimit};
use pikuri::listeners::InMemoryEventList;
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{ChatTransport, Event, History, Interloper, Message, Role, ToolCall, builtin};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history};

/// llama.cpp b11434's body for a prompt over `n_ctx` (verbatim from `-c 1024`).
const LLAMA_OVERFLOW: &str = r#"{"error":{"code":400,"message":"request (5034 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5034,"n_ctx":1024}}"#;

fn three_calls() -> Reply {
    Reply::tool_calls(vec![
        ("calculator", json!({"expression": "1+1"})),
        ("calculator", json!({"expression": "2+2"})),
        ("calculator", json!({"expression": "3+3"})),
    ])
}

fn compacted(rec: &InMemoryEventList) -> Vec<Event> {
    rec.events()
        .into_iter()
        .filter(|e| matches!(e, Event::Compacted { .. }))
        .collect()
}

fn contents(sent: &[serde_json::Value]) -> Vec<String> {
    sent.iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn threshold_summarizes_older_turns_with_tool_batches() {
    let server = FakeServer::start();
    server.set_context_size(Some(1000));
    // Turn 1 and 2: a batch of three calls, then an answer.
    server.push(three_calls().with_usage(100, 10));
    server.push(Reply::text("a1").with_usage(300, 5));
    server.push(three_calls().with_usage(700, 10));
    server.push(Reply::text("a2").with_usage(800, 5));
    // Turn 3 starts past 80% of 1000: the summary, then the turn.
    server.push(Reply::text("The user asked for sums; all were computed."));
    server.push(Reply::text("a3").with_usage(120, 5));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator())
            .compaction(Compaction::summarize().with_keep_turns(1))
    });
    for q in ["q1", "q2"] {
        agent.run_loop(q).unwrap();
        assert_valid_history(agent.messages());
    }
    assert!(
        compacted(&rec).is_empty(),
        "below the threshold: nothing yet"
    );
    let before = agent.messages().len();
    assert_eq!(before, 12);
    agent.run_loop("q3").unwrap();
    assert_valid_history(agent.messages());
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());

    let requests = server.chat_requests();
    assert_eq!(requests.len(), 6);
    // The compactor's request: no tools, its system prompt, the transcript.
    let summarizer = &requests[4];
    assert!(summarizer.tool_names().is_empty());
    let sent = summarizer.messages();
    assert_eq!(sent[0]["content"], Compaction::SYSTEM_PROMPT);
    let transcript = sent[1]["content"].as_str().unwrap();
    assert!(transcript.contains("[user] q1") && transcript.contains("[user] q2"));
    assert!(transcript.contains("[tool call] calculator"));
    assert!(transcript.contains("[calculator result] 6"));
    // The next main request: system prompt, summary, the kept turn only.
    let main = contents(&requests[5].messages());
    assert_eq!(main.len(), 3, "{main:?}");
    assert_eq!(main[0], "You are a test agent.");
    assert!(main[1].starts_with(Compaction::SUMMARY_MARKER));
    assert!(main[1].ends_with("all were computed."));
    assert_eq!(main[2], "q3");
    assert_eq!(requests[5].tool_names(), ["calculator"]);

    // The summary is marked in the export and survives a reload.
    let history = History::parse(&agent.export_history().to_json()).unwrap();
    assert!(Compaction::is_summary(&history.messages()[0]));
    assert_eq!(agent.last_assistant_content().as_deref(), Some("a3"));

    let events = compacted(&rec);
    assert_eq!(events.len(), 1);
    let Event::Compacted {
        strategy,
        messages_before,
        messages_after,
        tokens_before,
        tokens_after,
        ..
    } = &events[0]
    else {
        unreachable!()
    };
    assert_eq!(*strategy, CompactionStrategy::Summarize);
    assert_eq!((*messages_before, *messages_after), (13, 2));
    assert!(*tokens_before > 800 && tokens_after < tokens_before);
    // The compactor's events carry its own id.
    assert!(rec.events().iter().any(|e| e.agent() == "compactor"));
}

#[test]
fn the_cut_falls_on_an_injected_user_message_never_inside_a_batch() {
    let server = FakeServer::start();
    server.set_context_size(Some(1000));
    let interloper = Interloper::new();
    let q = interloper.clone();
    let inject = FnTool::new("inject", "Injects.", Parameters::empty(), move |_, _| {
        q.inject_user_message("also this").unwrap();
        Ok("injected".to_string())
    });
    // One turn: a batch whose tool injects a user message; the next request
    // is past the threshold, and the only boundary is that message.
    server.push(
        Reply::tool_calls(vec![("inject", json!({})), ("inject", json!({}))]).with_usage(850, 10),
    );
    server.push(Reply::text("turn so far"));
    server.push(Reply::text("done").with_usage(100, 5));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(inject)
            .interloper(interloper)
            .compaction(Compaction::summarize().with_keep_turns(1))
    });
    agent.run_loop("start").unwrap();
    assert_valid_history(agent.messages());
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    assert_eq!(compacted(&rec).len(), 1);
    let roles: Vec<Role> = agent.messages().iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::User, Role::Assistant]);
    assert!(Compaction::is_summary(&agent.messages()[0]));
    assert_eq!(agent.messages()[1].content, "also this");
    assert_eq!(agent.last_assistant_content().as_deref(), Some("done"));
}

#[test]
fn drop_oldest_keeps_valid_histories_at_every_cut() {
    // Long tool batches, several injected user messages, previous summary.
    let mut h = vec![Message::user(format!(
        "{}\nold",
        Compaction::SUMMARY_MARKER
    ))];
    for t in 0..4 {
        h.push(Message::user(format!("turn {t}")));
        let calls: Vec<ToolCall> = (0..5)
            .map(|i| ToolCall::new(format!("c{t}{i}"), "calculator", "{}"))
            .collect();
        h.push(Message::assistant_tool_calls("", calls));
        for i in 0..5 {
            h.push(Message::tool(format!("c{t}{i}"), "r"));
        }
        h.push(Message::user(format!("injected {t}")));
        h.push(Message::assistant(format!("answer {t}")));
    }
    for keep in 1..=9 {
        let server = FakeServer::start();
        let (mut agent, rec) = agent_with(&server, |c| {
            c.compaction(Compaction::drop_oldest().with_keep_turns(keep))
        });
        agent
            .load_history(History::new(h.clone()).unwrap())
            .unwrap();
        let did = agent.compact().unwrap();
        let m = agent.messages();
        assert_valid_history(m);
        assert_eq!(
            m[0].role,
            Role::User,
            "keep {keep}: starts at a user message"
        );
        assert_eq!(did, keep < 8, "keep {keep}");
        if did {
            let users = m.iter().filter(|m| m.role == Role::User).count();
            assert_eq!(users, keep, "keep {keep}: exactly the kept user turns");
            assert!(matches!(
                compacted(&rec)[..],
                [Event::Compacted {
                    strategy: CompactionStrategy::DropOldest,
                    ..
                }]
            ));
        }
        assert!(server.chat_requests().is_empty(), "dropping sends nothing");
    }
}

#[test]
fn overflow_recovers_with_one_compaction_and_one_retry() {
    let server = FakeServer::start();
    server.set_context_size(None); // no proactive compaction: only the 400 triggers it
    // A first turn longer than its summary: a summary must shrink the history.
    let a1 = format!("a1 {}", "and so on ".repeat(20));
    server.push(Reply::text(a1.clone()));
    server.push(Reply::raw_body(400, "application/json", LLAMA_OVERFLOW));
    server.push(Reply::text("Summary: the user said q1."));
    server.push(Reply::text("a2"));
    let (mut agent, rec) = agent_with(&server, |c| c.compaction(Compaction::summarize()));
    agent.run_loop("q1").unwrap();
    let out = agent.run_loop("q2").unwrap();
    assert_eq!(out.answer.as_deref(), Some("a2"));
    assert_valid_history(agent.messages());
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 4, "first, summary, one retry");
    assert_eq!(
        contents(&requests[1].messages()),
        contents(&requests[0].messages())
            .into_iter()
            .chain([a1, "q2".to_string()])
            .collect::<Vec<_>>()
    );
    let retry = contents(&requests[3].messages());
    assert_eq!(retry.len(), 3);
    assert!(retry[1].starts_with(Compaction::SUMMARY_MARKER));
    assert_eq!(retry[2], "q2");
    assert_eq!(compacted(&rec).len(), 1);
}

#[test]
fn still_too_big_is_a_typed_error_and_the_next_turn_works() {
    let server = FakeServer::start();
    server.set_context_size(None);
    // A first turn longer than its summary: a summary must shrink the history.
    server.push(Reply::text(format!("a1 {}", "and so on ".repeat(20))));
    server.push(Reply::raw_body(400, "application/json", LLAMA_OVERFLOW));
    server.push(Reply::text("Summary."));
    server.push(Reply::raw_body(400, "application/json", LLAMA_OVERFLOW));
    server.push(Reply::text("a3"));
    let (mut agent, rec) = agent_with(&server, |c| c.compaction(Compaction::summarize()));
    agent.run_loop("q1").unwrap();
    let err = agent.run_loop("q2 (far too long)").unwrap_err();
    assert!(err.is_context_overflow(), "{err:?}");
    assert_eq!(err.status(), Some(400));
    assert_eq!(compacted(&rec).len(), 1, "one compaction, one retry only");
    assert_eq!(server.chat_requests().len(), 4);
    assert_valid_history(agent.messages());
    // Without a compaction set, an overflow is the error at once.
    let plain = FakeServer::start();
    plain.push(Reply::raw_body(400, "application/json", LLAMA_OVERFLOW));
    let (mut p, _) = agent_with(&plain, |c| c);
    assert!(p.run_loop("x").unwrap_err().is_context_overflow());
    assert_eq!(plain.chat_requests().len(), 1);
    // The next turn works.
    assert_eq!(agent.run_loop("q3").unwrap().answer.as_deref(), Some("a3"));
    assert_valid_history(agent.messages());
    assert!(server.rejections().is_empty());
}

/// One turn whose tool returns 5,000 characters, against a server that
/// reports `window` (or none), with `limit` set (or the default): the tool
/// message the next request sent, and whether a `ToolResult` event carried
/// the same text.
fn dump_turn(window: Option<u64>, limit: Option<ToolResultLimit>) -> (String, bool) {
    let server = FakeServer::start();
    server.set_context_size(window);
    let big = FnTool::new("dump", "Dumps.", Parameters::empty(), |_, _| {
        Ok("x".repeat(5000))
    });
    server.push(Reply::tool_call("dump", json!({})));
    server.push(Reply::text("ok"));
    let (mut agent, rec) = agent_with(&server, |c| {
        let c = c.add_tool(big);
        match limit {
            Some(limit) => c.tool_result_limit(limit),
            None => c,
        }
    });
    agent.run_loop("dump it").unwrap();
    let sent = server.chat_requests()[1].messages();
    let sent = sent.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    let in_event = rec
        .events()
        .iter()
        .any(|e| matches!(e, Event::ToolResult { content, .. } if *content == sent));
    (sent, in_event)
}

/// The text a truncated result of `shown` characters reads.
fn truncated(shown: usize) -> String {
    format!(
        "{}\n[... truncated: {shown} of 5000 characters shown]",
        "x".repeat(shown)
    )
}

#[test]
fn an_oversized_tool_result_is_truncated_with_a_marker() {
    // 25% of 1000 tokens: 250 tokens, 1000 characters.
    assert_eq!(dump_turn(Some(1000), None), (truncated(1000), true));
}

/// `ToolResultLimit::off()` sends the same oversized result whole. (Mutation
/// pass: only the doctest saw `off`, and no test saw it reach the loop.)
#[test]
fn an_oversized_tool_result_goes_whole_with_the_limit_off() {
    // The default limit would be 1000 characters.
    let got = dump_turn(Some(1000), Some(ToolResultLimit::off()));
    assert_eq!(got, ("x".repeat(5000), true));
}

/// A configured limit is the one applied: `share` of a known window (half
/// of 1000 tokens: 2000 characters), `chars_without_cap` when the server
/// reports none. (Mutation pass: no test set either.)
#[test]
fn a_configured_tool_result_limit_is_the_one_applied() {
    for (window, limit, shown) in [
        (Some(1000), ToolResultLimit::default().share(0.5), 2000),
        (None, ToolResultLimit::default().chars_without_cap(300), 300),
    ] {
        let (sent, _) = dump_turn(window, Some(limit));
        assert_eq!(sent, truncated(shown), "window {window:?}");
    }
}

#[test]
fn fallback_skips_a_dead_server_and_a_503_server_and_lands_on_the_third() {
    let dead_port = crate::util::closed_port();
    let dead =
        ChatTransport::new("dead-model").with_api_base(format!("http://127.0.0.1:{dead_port}/v1"));
    let busy = FakeServer::start();
    busy.respond_with(|_| Reply::status(503, "overloaded"));
    let good = FakeServer::start();
    good.set_context_size(Some(2048));
    good.push(Reply::text("from the third"));
    let busy_t = busy.transport().with_model("busy-model");
    let good_t = good.transport().with_model("good-model");
    let rec = InMemoryEventList::new();
    let mut agent = pikuri::Agent::builder(dead)
        .http(crate::util::fast_http().with_max_retries(1))
        .fallback(vec![busy_t.clone(), good_t.clone()])
        .add_listener(rec.clone())
        .build()
        .unwrap();
    let out = agent.run_loop("hi").unwrap();
    assert_eq!(out.answer.as_deref(), Some("from the third"));
    assert_eq!(agent.model().as_deref(), Some("good-model"));
    assert_eq!(agent.context_window_cap(), Some(2048), "detected again");
    assert_eq!(
        busy.chat_requests().len(),
        2,
        "the 503 server got its retry"
    );
    let hops: Vec<(String, String, String)> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::ModelFallback {
                from, to, reason, ..
            } => Some((
                from.model().unwrap().to_string(),
                to.model().unwrap().to_string(),
                reason,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(hops.len(), 2, "{hops:?}");
    assert_eq!(
        (hops[0].0.as_str(), hops[0].1.as_str()),
        ("dead-model", "busy-model")
    );
    assert!(
        hops[0].2.starts_with(&format!(
            "cannot connect to http://127.0.0.1:{dead_port}/v1/chat/completions: "
        )),
        "{}",
        hops[0].2
    );
    assert_eq!(
        (hops[1].0.as_str(), hops[1].1.as_str()),
        ("busy-model", "good-model")
    );
    assert_eq!(
        hops[1].2,
        format!(
            "http status 503 from {}/chat/completions: overloaded",
            busy.base_url()
        )
    );
    // Each hop is followed by the new window.
    let kinds = rec.kinds();
    let at = kinds.iter().position(|k| *k == "model_fallback").unwrap();
    assert_eq!(kinds[at + 1], "context_cap");
    // The agent stays on the third for the next turn.
    good.push(Reply::text("again"));
    assert_eq!(
        agent.run_loop("more").unwrap().answer.as_deref(),
        Some("again")
    );
    assert_eq!(busy.chat_requests().len(), 2);
    // The last transport failing ends the turn with its error.
    good.push(Reply::status(503, "down").repeat(2));
    let err = agent.run_loop("once more").unwrap_err();
    assert_eq!(err.status(), Some(503));
    assert_valid_history(agent.messages());
}

#[test]
fn a_compactor_request_too_long_for_the_server_is_retried_with_less() {
    let server = FakeServer::start();
    server.set_context_size(None);
    server.push(Reply::text("a1"));
    server.push(Reply::raw_body(400, "application/json", LLAMA_OVERFLOW));
    server.push(Reply::raw_body(400, "application/json", LLAMA_OVERFLOW)); // the compactor's
    server.push(Reply::text("Summary of a long paste."));
    server.push(Reply::text("a2"));
    let (mut agent, rec) = agent_with(&server, |c| c.compaction(Compaction::summarize()));
    agent.run_loop(&"long paste ".repeat(1000)).unwrap();
    assert_eq!(agent.run_loop("q2").unwrap().answer.as_deref(), Some("a2"));
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 5);
    let first = requests[2].messages()[1]["content"].as_str().unwrap().len();
    let second = requests[3].messages()[1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        second.len() < first / 2 + 200,
        "{first} then {}",
        second.len()
    );
    assert!(second.contains("characters omitted"));
    assert_eq!(compacted(&rec).len(), 1);
    assert_valid_history(agent.messages());
}

#[test]
fn compact_on_demand_summarizes_without_a_configuration() {
    // No `Compaction` configured: `Agent::compact` summarizes by the
    // default (keeping the last 2 user turns) through the compactor child.
    let server = FakeServer::start();
    server.push(Reply::text("Summary: the user said q1."));
    let (mut agent, rec) = agent_with(&server, |c| c);
    let long = "and so on ".repeat(40);
    agent
        .load_history(
            History::new(vec![
                Message::user("q1"),
                Message::assistant(format!("a1 {long}")),
                Message::user("q2"),
                Message::assistant("a2"),
                Message::user("q3"),
                Message::assistant("a3"),
            ])
            .unwrap(),
        )
        .unwrap();
    assert!(agent.compact().unwrap());
    let m = agent.messages();
    assert_valid_history(m);
    assert!(
        m[0].content.starts_with(Compaction::SUMMARY_MARKER),
        "{}",
        m[0].content
    );
    assert_eq!(contents_of(&m[1..]), ["q2", "a2", "q3", "a3"]);
    assert_eq!(server.chat_requests().len(), 1, "the summary request");
    assert_eq!(compacted(&rec).len(), 1);
}

fn contents_of(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.content.as_str()).collect()
}
