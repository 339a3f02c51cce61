//! Issue 13 (agent side): invalid histories, retrying a failed turn, close
//! handlers at process exit, one Cancelled event per agent.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Cancellable, Error, Event, History, Message, OnExhausted, StepLimit, ToolCall};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history, fast_http};

/// A call left unanswered before a later message. (A trailing unanswered
/// batch is valid: it is how a turn that stopped for approval is saved.)
fn unanswered() -> Vec<Message> {
    vec![
        Message::user("time?"),
        Message::assistant_tool_calls("", vec![ToolCall::new("c1", "clock", "{}")]),
        Message::user("well?"),
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
            vec![
                ToolCall::new("c1", "clock", "{}"),
                ToolCall::new("c1", "clock", "{}"),
            ],
        ),
        Message::tool("c1", "noon"),
        Message::tool("c1", "noon"),
    ];
    let as_json = |m: &[Message]| doc(serde_json::to_value(m).unwrap());
    vec![
        Bad {
            name: "unanswered call",
            json: as_json(&unanswered()),
            messages: Some(unanswered()),
        },
        Bad {
            name: "orphan tool message",
            messages: Some(vec![Message::user("hi"), Message::tool("x", "1")]),
            json: doc(json!([{"role": "tool", "tool_call_id": "x", "content": "1"}])),
        },
        Bad {
            name: "duplicate call id",
            json: as_json(&dup),
            messages: Some(dup),
        },
        Bad {
            name: "unknown role",
            messages: None,
            json: doc(json!([{"role": "wizard", "content": "abracadabra"}])),
        },
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
    assert_eq!(
        History::parse(&History::default().to_json()).unwrap(),
        History::default()
    );
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
    let sent = server.chat_requests().last().unwrap().messages().clone();
    let asked = sent
        .iter()
        .filter(|m| m["content"] == "what is up?")
        .count();
    assert_eq!(asked, 1, "{sent:#?}");
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    let questions = agent
        .messages()
        .iter()
        .filter(|m| m.content == "what is up?")
        .count();
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
        c.http(fast_http().with_max_retries(0))
            .add_tool(FnTool::new(
                "look",
                "Looks.",
                Parameters::empty(),
                move |_, _| {
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok("seen".into())
                },
            ))
    });
    assert_eq!(
        agent.run_loop("look around").unwrap_err().status(),
        Some(500)
    );
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

/// A retried turn that exhausts its budget: the synthesizer's question is
/// the retried turn's user message, not an earlier turn's, not a tool's
/// output, not empty. (Mutation pass: nothing checked the question a retry
/// hands to the synthesizer.)
#[test]
fn retry_turn_gives_the_synthesizer_the_retried_question() {
    let server = FakeServer::start();
    server.push(Reply::text("first answer"));
    server.push(Reply::status(503, "loading model"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.http(fast_http().with_max_retries(0))
            .add_tool(look())
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
    });
    agent.run_loop("an earlier question").unwrap();
    assert_eq!(
        agent.run_loop("what is it?").unwrap_err().status(),
        Some(503)
    );
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::text("Synthesized answer."));
    let out = agent.retry_turn().unwrap();
    assert_eq!(out.stop_reason, pikuri::StopReason::Synthesized);
    assert_eq!(out.answer.as_deref(), Some("Synthesized answer."));
    let synth = server.chat_requests().last().unwrap().messages().clone();
    let prompt = synth[1]["content"].as_str().unwrap();
    assert!(prompt.starts_with("Question: what is it?\n"), "{prompt:?}");
    server.assert_all_used();
}

/// `cancelled` events per agent id.
fn cancelled_per_agent(rec: &pikuri::listeners::InMemoryEventList) -> BTreeMap<String, usize> {
    let mut per_agent = BTreeMap::new();
    for e in rec.events() {
        if let Event::Cancelled { agent, .. } = &e {
            *per_agent.entry(agent.to_string()).or_default() += 1;
        }
    }
    per_agent
}

fn look() -> FnTool {
    FnTool::new("look", "Looks.", Parameters::empty(), |_, _| {
        Ok("seen".into())
    })
}

/// Issue 13 class 8: one cancel during synthesis, never a second
/// `cancelled` event. Issue 28 class 10: one in all, the parent's (whose
/// `run_loop` returns the error); the synthesizer is part of the parent's
/// turn and does not announce it again. Checked with the cancel arriving
/// before the synthesizer's request and while it is in flight.
#[test]
fn cancel_during_synthesis_emits_one_cancelled() {
    for in_flight in [false, true] {
        let server = FakeServer::start();
        server.push(Reply::tool_call("look", json!({})));
        server.push(Reply::tool_call("look", json!({})));
        // The synthesizer's request, if it goes out before the cancel, hangs
        // until the cancel interrupts it. The next turn's answer is chosen
        // by its question, not queued: a server thread that reads the
        // abandoned request late (a loaded machine) must not take it.
        // In flight: the cancel lands once the synthesizer's request reached
        // the server (its `UserTurn` waits for the response, see the
        // `Listener` docs on the run's opening).
        let cancel = Cancellable::new();
        let on_server = cancel.clone();
        server.respond_with(move |req| {
            let last = req.messages().last().cloned().unwrap_or_default();
            if last["role"] == "user" && last["content"] == "again" {
                Reply::text("fine")
            } else {
                if in_flight {
                    on_server.cancel();
                }
                Reply::hang()
            }
        });
        let c = cancel.clone();
        let (mut agent, rec) = agent_with(&server, |cfg| {
            cfg.add_tool(look())
                .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
                .cancellable(cancel.clone())
                .on_event(move |e| {
                    if let Event::FallbackNotice { .. } = e
                        && !in_flight
                    {
                        c.cancel();
                    }
                })
        });
        let err = agent.run_loop("what?").unwrap_err();
        assert!(err.is_cancelled(), "{err}");
        let expected: BTreeMap<String, usize> = [(String::new(), 1)].into();
        assert_eq!(
            cancelled_per_agent(&rec),
            expected,
            "in flight: {in_flight}"
        );
        let stopped = rec.kinds().iter().filter(|k| **k == "stopped").count();
        assert_eq!(stopped, 2, "one Stopped per agent");
        // The next turn works.
        assert_eq!(
            agent.run_loop("again").unwrap().answer.as_deref(),
            Some("fine")
        );
        assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    }
}

/// The same rule for a sub-agent cancelled inside its tool: the child and the
/// parent each emit one `cancelled`.
#[test]
fn cancel_inside_a_sub_agent_emits_one_cancelled_per_agent() {
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "researcher", "task": "dig"}),
    ));
    server.push(Reply::tool_call("dig", json!({})));
    let cancel = Cancellable::new();
    let c = cancel.clone();
    let (mut agent, rec) = agent_with(&server, |cfg| {
        cfg.cancellable(cancel.clone())
            .add_sub_agent_tool(FnTool::new(
                "dig",
                "Digs.",
                Parameters::empty(),
                move |_, _| {
                    c.cancel();
                    Ok("dug".into())
                },
            ))
            .add_extension(
                SubAgents::new(vec![
                    Persona::new("researcher", "Digs.", "You dig.", 5).with_tools(&["dig"]),
                ])
                .unwrap(),
            )
    });
    let err = agent.run_loop("dig it").unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    let per_agent = cancelled_per_agent(&rec);
    assert!(per_agent.values().all(|n| *n == 1), "{per_agent:?}");
    assert_eq!(per_agent.get(""), Some(&1), "{per_agent:?}");
    assert_eq!(per_agent.len(), 2, "{per_agent:?}");
}

/// A configurator dropped before `build` runs the close handlers armed so
/// far, once (fails without `Drop for Configurator`).
#[test]
fn configurator_dropped_unbuilt_runs_its_close_handlers() {
    let server = FakeServer::start();
    let ran = Arc::new(AtomicUsize::new(0));
    let (r1, r2) = (Arc::clone(&ran), Arc::clone(&ran));
    let cfg = pikuri::Agent::builder(server.transport())
        .on_close(move || {
            r1.fetch_add(1, Ordering::SeqCst);
        })
        .on_close(move || {
            r2.fetch_add(10, Ordering::SeqCst);
        });
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    drop(cfg);
    assert_eq!(ran.load(Ordering::SeqCst), 11);
}

/// Run one `#[ignore]`d test of this binary in a process of its own, so that
/// `close_all` there cannot reach the agents of tests running in parallel.
pub(crate) fn run_in_own_process(test: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PIKURI_OWN_PROCESS", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 13 class 7: `close_all` closes every live agent once, a leaked one
/// included, and the agents' own close or drop runs nothing again.
#[test]
fn close_all_runs_every_live_agents_handlers_once() {
    run_in_own_process("hardening::close_all_in_own_process");
}

#[test]
#[ignore = "run in its own process by close_all_runs_every_live_agents_handlers_once"]
fn close_all_in_own_process() {
    if std::env::var_os("PIKURI_OWN_PROCESS").is_none() {
        return; // `--ignored` in a shared process: close_all would reach other tests' agents
    }
    let server = FakeServer::start();
    let counter = |n: &Arc<AtomicUsize>| {
        let n = Arc::clone(n);
        move || {
            n.fetch_add(1, Ordering::SeqCst);
        }
    };
    let (a, b, leaked) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let mut first = pikuri::Agent::builder(server.transport())
        .on_close(counter(&a))
        .build()
        .unwrap();
    let second = pikuri::Agent::builder(server.transport())
        .on_close(counter(&b))
        .on_close(counter(&b))
        .build()
        .unwrap();
    let gone = pikuri::Agent::builder(server.transport())
        .on_close(counter(&leaked))
        .build()
        .unwrap();
    std::mem::forget(gone);
    let closed_early = Arc::new(AtomicUsize::new(0));
    let mut early = pikuri::Agent::builder(server.transport())
        .on_close(counter(&closed_early))
        .build()
        .unwrap();
    early.close();

    assert_eq!(pikuri::close_all(), 4);
    assert_eq!(
        [&a, &b, &leaked, &closed_early].map(|n| n.load(Ordering::SeqCst)),
        [1, 2, 1, 1]
    );
    assert_eq!(pikuri::close_all(), 0, "idempotent");
    first.close();
    drop(first);
    drop(second);
    drop(early);
    assert_eq!(
        [&a, &b, &leaked, &closed_early].map(|n| n.load(Ordering::SeqCst)),
        [1, 2, 1, 1],
        "never twice"
    );

    // While a turn runs on another thread (its tool blocked), close_all on
    // this one (a signal-handling thread) returns at once; the turn finishes.
    server.push(Reply::tool_call("wait", json!({})));
    server.push(Reply::text("done"));
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let release_rx = parking_lot::Mutex::new(release_rx);
    let busy = Arc::new(AtomicUsize::new(0));
    let mut agent = pikuri::Agent::builder(server.transport())
        .on_close(counter(&busy))
        .add_tool(FnTool::new(
            "wait",
            "Waits.",
            Parameters::empty(),
            move |_, _| {
                entered_tx.send(()).unwrap();
                release_rx.lock().recv().unwrap();
                Ok("waited".into())
            },
        ))
        .build()
        .unwrap();
    let turn = std::thread::spawn(move || {
        let out = agent.run_loop("wait for it");
        (agent, out)
    });
    entered_rx.recv().unwrap();
    let signal = std::thread::spawn(pikuri::close_all);
    assert_eq!(signal.join().unwrap(), 1);
    assert_eq!(busy.load(Ordering::SeqCst), 1);
    release_tx.send(()).unwrap();
    let (agent, out) = turn.join().unwrap();
    assert_eq!(out.unwrap().answer.as_deref(), Some("done"));
    drop(agent);
    assert_eq!(busy.load(Ordering::SeqCst), 1, "not again on drop");
}

/// The reason reads once, with serde's position: no doubled prefix.
#[test]
fn history_error_names_the_reason_once() {
    let json =
        serde_json::json!({"version": 1, "messages": serde_json::to_value(unanswered()).unwrap()});
    let err = History::parse(&json.to_string()).unwrap_err().to_string();
    assert!(
        err.starts_with("invalid history: message 2: tool call `c1` left unanswered"),
        "{err}"
    );
    assert_eq!(err.matches("invalid history").count(), 1, "{err}");
    let err = History::new(unanswered()).unwrap_err().to_string();
    assert_eq!(
        err,
        "invalid history: message 2: tool call `c1` left unanswered"
    );
}
