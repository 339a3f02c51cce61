//! Issue 13 (agent side): invalid histories, retrying a failed turn, close
//! handlers at process exit, one Cancelled event per agent.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pikuri::testing::{FakeServer, Reply};
use pikuri::{
    Cancellable, Error, Event, FnTool, History, Parameters, Message, OnExhausted, StepLimit, ToolCall, Usage,
};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history, fast_http};

fn unanswered() -> Vec<Message> {
    vec![
        Message::user("time?"),
        Message::assistant_tool_calls("", vec![ToolCall::new("c1", "clock", "{}")]),
    ]
}

/// One bad conversation, as messages (when it can be built as values) and as
/// a saved file.
struct Bad {
    name: &'static str,
    messages: Option<Vec<Message>>,
    json: String,
}

fn bad_histories() -> Vec<Bad> {
    let doc = |messages: serde_json::Value| json!({"version": 1, "messages": messages}).to_string();
    let dup = vec![
        Message::user("time?"),
        Message::assistant_tool_calls(
            "",
            vec![ToolCall::new("c1", "clock", "{}"), ToolCall::new("c1", "clock", "{}")],
        ),
        Message::tool("c1", "noon"),
        Message::tool("c1", "noon"),
    ];
    let mut huge = Message::assistant("hello");
    huge.usage = Some(Usage::new().with_input(u64::MAX).with_cached(1));
    let huge = vec![Message::user("hi"), huge];
    let as_json = |m: &[Message]| doc(serde_json::to_value(m).unwrap());
    vec![
        Bad { name: "unanswered call", json: as_json(&unanswered()), messages: Some(unanswered()) },
        Bad {
            name: "orphan tool message",
            messages: Some(vec![Message::user("hi"), Message::tool("x", "1")]),
            json: doc(json!([{"role": "tool", "tool_call_id": "x", "content": "1"}])),
        },
        Bad { name: "duplicate call id", json: as_json(&dup), messages: Some(dup) },
        Bad {
            name: "unknown role",
            messages: None,
            json: doc(json!([{"role": "wizard", "content": "abracadabra"}])),
        },
        Bad { name: "huge usage number", json: as_json(&huge), messages: Some(huge) },
        Bad {
            name: "usage beyond u64",
            messages: None,
            json: doc(json!([{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "x", "usage": {"input": 1e300}}])),
        },
    ]
}

/// Issue 13 class 5: no way in lets an invalid history reach an agent; the
/// agent keeps its conversation and the next turn is accepted by a strict
/// server. Before the fix, `History::new` and serde accepted all of these and
/// every later turn failed with HTTP 400.
#[test]
fn invalid_histories_are_rejected_by_every_way_in() {
    let server = FakeServer::start();
    server.push(Reply::text("first answer"));
    let (mut agent, rec) = agent_with(&server, |c| c);
    agent.run_loop("first question").unwrap();
    let before = agent.messages().to_vec();
    for bad in bad_histories() {
        if let Some(messages) = bad.messages {
            let err = History::new(messages).unwrap_err();
            assert!(matches!(err, Error::History(_)), "{}: {err}", bad.name);
        }
        assert!(
            serde_json::from_str::<History>(&bad.json).is_err(),
            "{}: serde accepted it",
            bad.name
        );
        let err = History::parse(&bad.json).unwrap_err();
        assert!(matches!(err, Error::History(_)), "{}: {err}", bad.name);
        // The host's load path: parse, then load; the agent is untouched.
        rec.clear();
        let loaded = History::parse(&bad.json).and_then(|h| agent.load_history(h));
        assert!(matches!(loaded, Err(Error::History(_))), "{}", bad.name);
        assert_eq!(agent.messages(), before, "{}", bad.name);
        assert!(rec.is_empty(), "{}: {:?}", bad.name, rec.kinds());
    }
    server.push(Reply::text("second answer"));
    let out = agent.run_loop("second question").unwrap();
    assert_eq!(out.answer.as_deref(), Some("second answer"));
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    assert_eq!(server.chat_requests()[1].messages().len(), 4);
}

/// A valid history loads through each way in, system messages inside
/// included, and an id reused after its call was answered is accepted.
#[test]
fn valid_histories_load_by_every_way_in() {
    let messages = vec![
        Message::user("time?"),
        Message::system("context an extension injected"),
        Message::assistant_tool_calls("", vec![ToolCall::new("call_0", "clock", "{}")]),
        Message::tool("call_0", "noon"),
        Message::assistant("noon"),
        Message::user("again?"),
        Message::assistant_tool_calls("", vec![ToolCall::new("call_0", "clock", "{}")]),
        Message::tool("call_0", "one"),
        Message::assistant("one"),
    ];
    let h = History::new(messages.clone()).unwrap();
    let json = h.to_json();
    assert_eq!(serde_json::from_str::<History>(&json).unwrap(), h);
    assert_eq!(History::parse(&json).unwrap(), h);
    assert_eq!(History::parse(&History::default().to_json()).unwrap(), History::default());
    let server = FakeServer::start();
    server.push(Reply::text("two"));
    let (mut agent, _rec) = agent_with(&server, |c| c);
    agent.load_history(h).unwrap();
    agent.run_loop("and now?").unwrap();
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    assert_eq!(agent.messages().len(), messages.len() + 2);
}

/// Issue 13 class 6: a server that answers 503 until it recovers; the host
/// retries with `retry_turn`, and the request that succeeds carries the
/// question once. Before the fix the only retry was `run_loop` with the same
/// text, which appended the question again on every attempt.
#[test]
fn retry_turn_after_503_forever_sends_the_question_once() {
    let server = FakeServer::start();
    let healthy = Arc::new(AtomicBool::new(false));
    let h = Arc::clone(&healthy);
    server.respond_with(move |_| {
        if h.load(Ordering::SeqCst) {
            Reply::text("recovered")
        } else {
            Reply::status(503, "loading model")
        }
    });
    let (mut agent, rec) = agent_with(&server, |c| c.http(fast_http().with_max_retries(1)));
    let err = agent.run_loop("what is up?").unwrap_err();
    assert_eq!(err.status(), Some(503));
    // Still down: the retry fails the same way and adds nothing.
    assert_eq!(agent.retry_turn().unwrap_err().status(), Some(503));
    assert_eq!(agent.messages().len(), 1);

    healthy.store(true, Ordering::SeqCst);
    rec.clear();
    let out = agent.retry_turn().unwrap();
    assert_eq!(out.answer.as_deref(), Some("recovered"));
    let sent = server.chat_requests().last().unwrap().messages().to_vec();
    let asked = sent.iter().filter(|m| m["content"] == "what is up?").count();
    assert_eq!(asked, 1, "{sent:#?}");
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    let questions = agent.messages().iter().filter(|m| m.content == "what is up?").count();
    assert_eq!(questions, 1);
    assert!(!rec.kinds().contains(&"user_turn"), "{:?}", rec.kinds());
    assert_eq!(rec.kinds().last(), Some(&"stopped"));
    // Answered: nothing left to retry, and nothing changes.
    assert!(matches!(agent.retry_turn(), Err(Error::InvalidInput(_))));
    assert_eq!(agent.messages().len(), 2);
}

/// A failure after a tool ran: the retry resumes the turn, the tool does not
/// run again, and the history stays valid.
#[test]
fn retry_turn_resumes_after_a_completed_round() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::status(500, "oops"));
    let runs = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&runs);
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.http(fast_http().with_max_retries(0)).add_tool(FnTool::new(
            "look",
            "Looks.",
            Parameters::empty(),
            move |_, _| {
                r.fetch_add(1, Ordering::SeqCst);
                Ok("seen".into())
            },
        ))
    });
    assert_eq!(agent.run_loop("look around").unwrap_err().status(), Some(500));
    server.push(Reply::text("I saw it."));
    let out = agent.retry_turn().unwrap();
    assert_eq!(out.answer.as_deref(), Some("I saw it."));
    assert_eq!(out.steps, 0);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    assert_valid_history(agent.messages());
    let (fresh, _) = agent_with(&server, |c| c);
    let mut fresh = fresh;
    assert!(matches!(fresh.retry_turn(), Err(Error::InvalidInput(_))));
}

#[test]
fn prefix_cancel_during_synthesis_one_event_per_agent() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::hang());
    let cancel = Cancellable::new();
    let c2 = cancel.clone();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(FnTool::new("look", "Looks.", Parameters::empty(), |_, _| Ok("x".into())))
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
            .cancellable(cancel.clone())
            .on_event(move |e| {
                if matches!(e, Event::FallbackNotice { .. }) {
                    c2.cancel();
                }
            })
    });
    let err = agent.run_loop("what?").unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    let mut per_agent: HashMap<String, usize> = HashMap::new();
    for e in rec.events() {
        if let Event::Cancelled { agent } = &e {
            *per_agent.entry(agent.to_string()).or_default() += 1;
        }
    }
    eprintln!("{:?}", rec.events().iter().map(|e| (e.agent().to_string(), e.kind())).collect::<Vec<_>>());
    assert!(per_agent.values().all(|n| *n == 1), "{per_agent:?}");
}
