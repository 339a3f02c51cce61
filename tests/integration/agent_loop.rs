//! Rounds, tools, streaming, events, model switch, close.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pikuri::builtin;
use pikuri::extension::{Extension, ExtensionContext};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Error, Event, Role, StopReason, ToolError};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history, deltas, echo_tool, main_kinds};

#[test]
fn text_answer_non_streamed() {
    let server = FakeServer::start();
    server.push(Reply::text("Hello there.").with_usage(12, 3));
    let (mut agent, rec) = agent_with(&server, |c| c);
    let out = agent.run_loop("Hi").unwrap();
    assert_eq!(out.stop_reason, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("Hello there."));
    assert_eq!(
        main_kinds(&rec),
        vec!["user_turn", "assistant", "tokens", "stopped"]
    );
    let req = &server.chat_requests()[0];
    assert!(!req.is_stream());
    let msgs = req.messages();
    assert_eq!(
        msgs[0],
        json!({"role": "system", "content": "You are a test agent."})
    );
    assert_eq!(msgs[1], json!({"role": "user", "content": "Hi"}));
    let tokens = rec
        .events()
        .into_iter()
        .find(|e| e.kind() == "tokens")
        .unwrap();
    match tokens {
        Event::Tokens {
            input,
            output,
            model_id,
            ..
        } => {
            assert_eq!((input, output), (Some(12), Some(3)));
            assert!(model_id.is_some());
        }
        _ => unreachable!(),
    }
    server.assert_all_used();
}

#[test]
fn streamed_answer_emits_deltas_before_the_bookend() {
    let server = FakeServer::start();
    server.push(Reply::text("Streaming works fine.").with_reasoning("Let me think."));
    let (mut agent, rec) = agent_with(&server, |c| c.streaming(true));
    agent.run_loop("go").unwrap();
    let kinds = main_kinds(&rec);
    let first_delta = kinds.iter().position(|k| *k == "assistant_delta").unwrap();
    let bookend = kinds.iter().position(|k| *k == "assistant").unwrap();
    assert!(first_delta < bookend);
    assert!(kinds.contains(&"thinking_delta") && kinds.contains(&"thinking"));
    assert_eq!(deltas(&rec, ""), "Streaming works fine.");
    let req = &server.chat_requests()[0];
    assert!(req.is_stream());
    assert_eq!(
        req.body.as_ref().unwrap()["stream_options"]["include_usage"],
        true
    );
    assert_eq!(
        agent.messages()[1].reasoning.as_deref(),
        Some("Let me think.")
    );
}

#[test]
fn tool_round_trip_feeds_the_result_back() {
    for streaming in [false, true] {
        let server = FakeServer::start();
        server.push(Reply::tool_call("echo", json!({"text": "ping"})).with_id("call_A"));
        server.push(Reply::text("done"));
        let (mut agent, rec) =
            agent_with(&server, |c| c.add_tool(echo_tool()).streaming(streaming));
        let out = agent.run_loop("use the tool").unwrap();
        assert_eq!(out.steps, 1);
        let kinds: Vec<_> = main_kinds(&rec)
            .into_iter()
            .filter(|k| *k != "assistant_delta")
            .collect();
        assert_eq!(
            kinds,
            vec![
                "user_turn",
                "tokens",
                "tool_call",
                "tool_result",
                "assistant",
                "tokens",
                "stopped"
            ]
        );
        let second = &server.chat_requests()[1];
        let msgs = second.messages();
        assert_eq!(msgs[2]["tool_calls"][0]["id"], "call_A");
        assert_eq!(
            msgs[3],
            json!({"role": "tool", "tool_call_id": "call_A", "content": "echo: ping"})
        );
        assert_eq!(server.chat_requests()[0].tool_names(), vec!["echo"]);
        let ev = rec.events();
        let call = ev.iter().find(|e| e.kind() == "tool_call").unwrap();
        assert!(matches!(call, Event::ToolCall { id, name, arguments, .. }
            if id == "call_A" && name == "echo" && arguments["text"] == "ping"));
        assert_valid_history(agent.messages());
    }
}

#[test]
fn several_calls_in_one_response_run_in_order() {
    for parallel in [false, true] {
        let server = FakeServer::start();
        server.push(Reply::tool_calls(vec![
            ("echo", json!({"text": "one"})),
            ("echo", json!({"text": "two"})),
            ("echo", json!({"text": "three"})),
        ]));
        server.push(Reply::text("ok"));
        let (mut agent, _rec) = agent_with(&server, |c| {
            c.add_tool(echo_tool()).parallel_tool_calls(parallel)
        });
        agent.run_loop("x").unwrap();
        let tool_msgs: Vec<&str> = agent
            .messages()
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.content.as_str())
            .collect();
        assert_eq!(tool_msgs, vec!["echo: one", "echo: two", "echo: three"]);
        assert_valid_history(agent.messages());
    }
}

#[test]
fn parallel_calls_really_overlap() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("wait", json!({})),
        ("wait", json!({})),
    ]));
    server.push(Reply::text("ok"));
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let wait = FnTool::new("wait", "Waits.", Parameters::empty(), move |_, _| {
        let now = r.fetch_add(1, Ordering::SeqCst) + 1;
        p.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(100));
        r.fetch_sub(1, Ordering::SeqCst);
        Ok("waited".into())
    });
    let (mut agent, _) = agent_with(&server, |c| c.add_tool(wait).parallel_tool_calls(true));
    agent.run_loop("x").unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 2);
}

#[test]
fn tool_failures_become_observations() {
    let server = FakeServer::start();
    server.push(Reply::raw_tool_call("echo", r#"{"text": "unterminated"#).with_id("c1"));
    server.push(Reply::tool_call("echo", json!({"wrong": 1})).with_id("c2"));
    server.push(Reply::tool_call("nope", json!({})).with_id("c3"));
    server.push(Reply::tool_call("fail", json!({})).with_id("c4"));
    server.push(Reply::tool_call("boom", json!({})).with_id("c5"));
    server.push(Reply::text("recovered"));
    let fail = FnTool::new("fail", "Fails.", Parameters::empty(), |_, _| {
        Err(ToolError::new("disk full"))
    });
    let boom = FnTool::new("boom", "Panics.", Parameters::empty(), |_, _| {
        panic!("kaboom")
    });
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(echo_tool()).add_tool(fail).add_tool(boom)
    });
    let out = agent.run_loop("try things").unwrap();
    assert_eq!(out.answer.as_deref(), Some("recovered"));
    let results: Vec<(String, String)> = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.clone().unwrap(), m.content.clone()))
        .collect();
    assert_eq!(results.len(), 5);
    assert!(
        results[0].1.starts_with("Error: ") && results[0].1.contains("unterminated"),
        "{results:?}"
    );
    assert!(
        results[1].1.starts_with("Error: ") && results[1].1.contains("text"),
        "{results:?}"
    );
    assert!(
        results[2].1.contains("unknown tool") && results[2].1.contains("echo"),
        "{results:?}"
    );
    assert_eq!(results[3].1, "Error: disk full");
    assert!(
        results[4].1.starts_with("Error: ") && results[4].1.contains("kaboom"),
        "{results:?}"
    );
    // The malformed arguments went back to the server as `{}` (servers reject invalid JSON).
    let last = server.chat_requests().last().unwrap().messages();
    let sent = last
        .iter()
        .find(|m| m["tool_calls"][0]["id"] == "c1")
        .unwrap();
    assert_eq!(sent["tool_calls"][0]["function"]["arguments"], "{}");
    assert_valid_history(agent.messages());
}

#[test]
fn blank_message_is_rejected_without_a_request() {
    let server = FakeServer::start();
    let (mut agent, _) = agent_with(&server, |c| c);
    assert!(matches!(
        agent.run_loop("  \n"),
        Err(Error::InvalidInput(_))
    ));
    assert!(server.chat_requests().is_empty());
}

#[test]
fn model_switch_keeps_history_and_emits_events() {
    let server = FakeServer::start();
    server.push(Reply::text("first"));
    server.push(Reply::text("second"));
    let (mut agent, rec) = agent_with(&server, |c| c);
    agent.run_loop("one").unwrap();
    server.set_context_size(Some(2048));
    let other = server.transport().with_model("other-model");
    agent.run_loop_with("two", other.clone()).unwrap();
    assert_eq!(agent.model().as_deref(), Some("other-model"));
    assert_eq!(agent.context_window_cap(), Some(2048));
    let kinds = main_kinds(&rec);
    let switched = rec
        .kinds()
        .iter()
        .position(|k| *k == "model_switched")
        .unwrap();
    assert_eq!(rec.kinds()[switched + 1], "context_cap");
    assert!(kinds.contains(&"model_switched"));
    let req = &server.chat_requests()[1];
    assert_eq!(req.body.as_ref().unwrap()["model"], "other-model");
    assert_eq!(req.messages().len(), 4); // system, one, first, two
    // The same transport again is no switch.
    server.push(Reply::text("third"));
    agent.run_loop_with("three", other).unwrap();
    assert_eq!(
        rec.kinds()
            .iter()
            .filter(|k| **k == "model_switched")
            .count(),
        1
    );
}

#[test]
fn display_and_accessors() {
    let server = FakeServer::start();
    server.set_context_size(Some(32768));
    let (agent, rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator()).add_tool(echo_tool())
    });
    assert_eq!(
        agent.to_string(),
        "Agent(id=, model=fake-model, tools=2, listeners=[InMemoryEventList])"
    );
    assert_eq!(agent.context_window_cap(), Some(32768));
    assert_eq!(agent.id(), "");
    assert!(!agent.streaming());
    assert_eq!(agent.system_prompt(), "You are a test agent.");
    drop(agent);
    assert!(matches!(
        rec.events()[0],
        Event::ContextCap {
            cap: Some(32768),
            ..
        }
    ));
}

#[test]
fn explicit_context_window_wins_over_probe() {
    let server = FakeServer::start();
    server.set_context_size(Some(4096));
    let agent = Agent::builder(server.transport().with_context_window(Some(100)))
        .build()
        .unwrap();
    assert_eq!(agent.context_window_cap(), Some(100));
    assert!(
        server.requests().is_empty(),
        "no probe when the window is explicit"
    );
}

#[test]
fn close_runs_handlers_lifo_isolated_and_once() {
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let server = FakeServer::start();
    let (o1, o2, o3) = (order.clone(), order.clone(), order.clone());
    let mut agent = Agent::builder(server.transport())
        .on_close(move || o1.lock().push(1))
        .on_close(move || {
            o2.lock().push(2);
            panic!("handler two fails");
        })
        .on_close(move || o3.lock().push(3))
        .build()
        .unwrap();
    agent.close();
    agent.close();
    drop(agent);
    assert_eq!(*order.lock(), vec![3, 2, 1]);
}

#[test]
fn failed_build_runs_handlers_armed_so_far() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let server = FakeServer::start();
    let err = Agent::builder(server.transport())
        .on_close(move || {
            r.fetch_add(1, Ordering::SeqCst);
        })
        .add_tool(echo_tool())
        .add_tool(echo_tool())
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("duplicate tool name `echo`"),
        "{err}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

/// AddsAnInvalidTool a tool named `web.fetch` at bind and checks it is refused.
struct AddsAnInvalidTool;
impl Extension for AddsAnInvalidTool {
    fn bind(&mut self, ctx: &ExtensionContext) -> pikuri::Result<()> {
        let tool = FnTool::new("web.fetch", "A tool.", Parameters::empty(), |_, _| {
            Ok(String::new())
        });
        let err = ctx.add_tool(Arc::new(tool)).unwrap_err();
        assert!(
            err.to_string().contains("invalid tool name \"web.fetch\""),
            "{err}"
        );
        Ok(())
    }
}

#[test]
fn tool_names_no_provider_accepts_are_refused_at_build_and_at_runtime() {
    let server = FakeServer::start();
    let named = |name: &str| {
        FnTool::new(name, "A tool.", Parameters::empty(), |_, _| {
            Ok(String::new())
        })
    };
    for bad in [
        "read.file",
        "9lives",
        "",
        "a b",
        "bell\u{7}",
        "<b>",
        "é",
        &"x".repeat(65),
    ] {
        let err = Agent::builder(server.transport())
            .add_tool(named(bad))
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), pikuri::ErrorKind::InvalidInput, "{bad:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("invalid tool name") && msg.contains("[a-zA-Z0-9_-]"),
            "{msg}"
        );
    }
    for good in ["read_file", "_x", "A-9", &"x".repeat(64)] {
        assert!(
            Agent::builder(server.transport())
                .add_tool(named(good))
                .build()
                .is_ok()
        );
    }
    // An extension adding a tool at bind gets the same check.
    let agent = Agent::builder(server.transport())
        .add_extension(AddsAnInvalidTool)
        .build()
        .unwrap();
    assert!(agent.tools().is_empty());
}

#[test]
fn api_key_is_sent_as_bearer_and_never_shown() {
    let server = FakeServer::start();
    server.push(Reply::status(401, "bad key"));
    let transport = server.transport().with_api_key("sk-very-secret");
    let rec = pikuri::listeners::InMemoryEventList::new();
    let mut agent = Agent::builder(transport.clone())
        .add_listener(rec.clone())
        .build()
        .unwrap();
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.status(), Some(401));
    assert_eq!(
        server.chat_requests()[0].header("authorization"),
        Some("Bearer sk-very-secret")
    );
    for shown in [
        format!("{err}"),
        format!("{err:?}"),
        format!("{agent}"),
        format!("{agent:?}"),
        format!("{transport:?}"),
        serde_json::to_string(&transport).unwrap(),
        serde_json::to_string(&rec.events()).unwrap(),
    ] {
        assert!(!shown.contains("sk-very-secret"), "key leaked in {shown}");
    }
}

#[test]
fn an_agent_with_10_000_tools_builds_offers_them_all_and_answers_an_unknown_name_briefly() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("nope", json!({})));
    server.push(Reply::text("done"));
    let mut cfg = Agent::builder(server.transport());
    for i in 0..10_000 {
        cfg = cfg.add_tool(FnTool::new(
            format!("t{i}"),
            "Trivial.",
            Parameters::empty(),
            |_, _| Ok(String::new()),
        ));
    }
    let mut agent = cfg.build().unwrap();
    assert_eq!(agent.tools().len(), 10_000);
    agent.run_loop("go").unwrap();
    let requests = server.chat_requests();
    assert_eq!(requests[0].tool_names().len(), 10_000);
    let observation = requests[1].messages().last().unwrap()["content"].clone();
    let observation = observation.as_str().unwrap();
    assert!(observation.starts_with("Error: unknown tool `nope`; available tools: t0, t1,"));
    assert!(
        observation.ends_with(", t49, … and 9950 more"),
        "{observation}"
    );
}

/// Issue 36, session 14: an agent that registered no tool holds no tool
/// path (it links none of the validation, approval or run code); the calls
/// a model makes anyway are each announced and answered as unknown, in
/// order, in sequential and in parallel mode (where nothing runs on a
/// thread).
#[test]
fn calls_to_an_agent_without_tools_are_answered_as_unknown_in_both_modes() {
    for parallel in [false, true] {
        let server = FakeServer::start();
        server.push(Reply::tool_calls(vec![
            ("a", json!({})),
            ("b", json!({"x": 1})),
        ]));
        server.push(Reply::text("done"));
        let (mut agent, rec) = agent_with(&server, |c| c.parallel_tool_calls(parallel));
        let out = agent.run_loop("go").unwrap();
        assert_eq!(out.answer.as_deref(), Some("done"));
        assert_eq!(out.steps, 2);
        let results: Vec<&str> = agent
            .messages()
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.content.as_str())
            .collect();
        assert_eq!(
            results,
            [
                "Error: unknown tool `a`; available tools: (none)",
                "Error: unknown tool `b`; available tools: (none)"
            ],
            "parallel: {parallel}"
        );
        // Parallel mode reviews every call before any answer.
        let batch = if parallel {
            ["tool_call", "tool_call", "tool_result", "tool_result"]
        } else {
            ["tool_call", "tool_result", "tool_call", "tool_result"]
        };
        let mut want = vec!["user_turn", "tokens"];
        want.extend(batch);
        want.extend(["assistant", "tokens", "stopped"]);
        assert_eq!(main_kinds(&rec), want, "parallel: {parallel}");
        assert_valid_history(agent.messages());
        // No tool is offered in any request.
        for request in server.chat_requests() {
            assert!(request.tool_names().is_empty());
            assert!(request.body.as_ref().unwrap().get("tools").is_none());
        }
    }
}
