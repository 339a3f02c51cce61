//! Hosts in control of tool calls: approve, deny, edit, a cancel while the
//! approver blocks, deferred turns saved and resumed, sub-agents.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pikuri::approval::{ApprovalRequest, Decision, StateChangingOnly};
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Cancellable, Error, Event, History, StopReason, builtin};
use serde_json::{Value, json};

use crate::util::{agent_with, assert_valid_history, main_kinds};

/// A state-changing tool that records what it ran with.
fn write_tool(ran: &Arc<Mutex<Vec<Value>>>) -> FnTool {
    let ran = Arc::clone(ran);
    FnTool::new(
        "write",
        "Writes a file.",
        Parameters::builder()
            .required_string("path", "Where.")
            .optional_integer("mode", "Permissions.")
            .build(),
        move |args, _| {
            ran.lock().push(args.clone());
            Ok(format!(
                "wrote {}",
                args["path"].as_str().unwrap_or_default()
            ))
        },
    )
    .state_changing()
}

/// The content of the tool message answering `id` in the last request.
fn tool_message(server: &FakeServer, id: &str) -> String {
    let reqs = server.chat_requests();
    let last = reqs.last().expect("a request");
    last.messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool message for {id}: {:?}", last.messages()))
        .to_string()
}

#[test]
fn an_approved_call_runs_and_the_approver_sees_the_validated_call() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("write", json!({"path": "a.txt", "mode": 7.0})).with_id("c1"));
    server.push(Reply::text("done"));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(write_tool(&ran))
            .approver(move |r: &ApprovalRequest| {
                s.lock().push((
                    r.tool().to_string(),
                    r.arguments().clone(),
                    r.call_id().to_string(),
                    r.agent_id().to_string(),
                    r.changes_user_state(),
                ));
                Decision::Approve
            })
    });
    agent.run_loop("write it").unwrap();
    // Normalized: 7.0 became 7 before the approver saw it.
    let expected_args = json!({"path": "a.txt", "mode": 7});
    assert_eq!(
        *seen.lock(),
        [(
            "write".into(),
            expected_args.clone(),
            "c1".into(),
            String::new(),
            true
        )]
    );
    assert_eq!(*ran.lock(), [expected_args]);
    assert_eq!(tool_message(&server, "c1"), "wrote a.txt");
    assert_eq!(
        main_kinds(&rec),
        [
            "user_turn",
            "tokens",
            "tool_call",
            "tool_result",
            "assistant",
            "tokens",
            "stopped"
        ]
    );
}

#[test]
fn a_denied_call_does_not_run_and_the_model_reads_the_reason() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("write", json!({"path": "/etc/passwd"})).with_id("c1"));
    server.push(Reply::text("ok, I will not"));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(write_tool(&ran))
            .approver(|_: &ApprovalRequest| Decision::deny("system files are off limits"))
    });
    let outcome = agent.run_loop("write it").unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert!(ran.lock().is_empty());
    assert_eq!(
        tool_message(&server, "c1"),
        "Error: not run: denied: system files are off limits"
    );
    let denied: Vec<_> = rec
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::ToolDenied { .. }))
        .collect();
    assert_eq!(
        denied,
        [Event::ToolDenied {
            agent: "".into(),
            id: "c1".into(),
            name: "write".into(),
            reason: "system files are off limits".into()
        }]
    );
    let kinds = main_kinds(&rec);
    let at = kinds.iter().position(|k| *k == "tool_denied").unwrap();
    assert_eq!(
        &kinds[at - 1..=at + 1],
        ["tool_call", "tool_denied", "tool_result"]
    );
    assert_valid_history(agent.messages());
}

#[test]
fn an_edit_is_validated_again_and_an_invalid_edit_denies() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("write", json!({"path": "prod.db"})),
        ("write", json!({"path": "other.db"})),
    ]));
    server.push(Reply::text("done"));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(write_tool(&ran))
            .approver(|r: &ApprovalRequest| {
                if r.arguments()["path"] == "prod.db" {
                    Decision::edit(json!({"path": "test.db", "mode": 6.0}))
                } else {
                    Decision::edit(json!({"path": 5, "colour": "red"}))
                }
            })
    });
    agent.run_loop("write both").unwrap();
    // Only the valid edit ran, normalized.
    assert_eq!(*ran.lock(), [json!({"path": "test.db", "mode": 6})]);
    let ids: Vec<String> = agent.messages()[1]
        .tool_calls
        .iter()
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(
        tool_message(&server, &ids[0]),
        "Note: your arguments were edited before the call; the tool ran with {\"mode\":6,\"path\":\"test.db\"}\nwrote test.db"
    );
    let invalid = tool_message(&server, &ids[1]);
    assert!(
        invalid.starts_with(
            "Error: not run: denied: the approver's edit of the arguments failed validation: invalid arguments:\n"
        ),
        "{invalid}"
    );
    assert!(
        invalid.contains("parameter `path`: expected string"),
        "{invalid}"
    );
    assert!(invalid.contains("unknown parameter `colour`"), "{invalid}");
    let kinds = main_kinds(&rec);
    assert!(
        kinds.contains(&"tool_edited") && kinds.contains(&"tool_denied"),
        "{kinds:?}"
    );
    assert!(rec.events().iter().any(|e| matches!(e,
        Event::ToolEdited { arguments, .. } if *arguments == json!({"path": "test.db", "mode": 6}))));
}

#[test]
fn invalid_model_arguments_are_answered_without_asking_the_approver() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("write", json!({"mode": 1})).with_id("c1"));
    server.push(Reply::text("sorry"));
    let asked = Arc::new(Mutex::new(0));
    let a = Arc::clone(&asked);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(write_tool(&ran))
            .approver(move |_: &ApprovalRequest| {
                *a.lock() += 1;
                Decision::Approve
            })
    });
    agent.run_loop("write").unwrap();
    assert_eq!(*asked.lock(), 0);
    assert!(tool_message(&server, "c1").starts_with("Error: invalid arguments:"));
}

#[test]
fn a_cancel_while_the_approver_blocks_ends_the_turn_promptly() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("write", json!({"path": "a"})),
        ("write", json!({"path": "b"})),
    ]));
    let cancel = Cancellable::new();
    // The first review blocks until the test ends; later ones approve.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(Some(release_rx));
    let (asked_tx, asked_rx) = mpsc::channel::<()>();
    let asked_tx = Mutex::new(asked_tx);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(write_tool(&ran))
            .cancellable(cancel.clone())
            .approver(move |_: &ApprovalRequest| {
                let _ = asked_tx.lock().send(());
                let first = release_rx.lock().take();
                if let Some(rx) = first {
                    let _ = rx.recv();
                }
                Decision::Approve
            })
    });
    let c = cancel.clone();
    let canceller = std::thread::spawn(move || {
        asked_rx.recv().unwrap();
        let at = Instant::now();
        c.cancel();
        at
    });
    let result = agent.run_loop("write both");
    let returned = Instant::now();
    let cancelled_at = canceller.join().unwrap();
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    let took = returned.duration_since(cancelled_at);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    assert!(ran.lock().is_empty());
    assert_valid_history(agent.messages());
    let tools: Vec<&str> = agent.messages()[2..]
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        tools,
        [
            "Error: not run: cancelled by the user",
            "Error: not run: cancelled by the user"
        ]
    );
    assert_eq!(main_kinds(&rec).last(), Some(&"stopped"));

    // The next turn works, with the approver still in place.
    server.push(Reply::tool_call("write", json!({"path": "c"})));
    server.push(Reply::text("wrote c"));
    let outcome = agent.run_loop("try again").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("wrote c"));
    assert_eq!(*ran.lock(), [json!({"path": "c"})]);
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    drop(release_tx);
}

#[test]
fn a_deferred_turn_is_saved_loaded_in_a_new_agent_and_resumed() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("calculator", json!({"expression": "6*7"})),
        ("write", json!({"path": "a.txt"})),
        ("write", json!({"path": "b.txt"})),
    ]));
    let ran = Arc::new(Mutex::new(Vec::new()));
    // Read-only tools pass; writes wait for a human who is not here.
    let build = |ran: &Arc<Mutex<Vec<Value>>>| {
        let ran = Arc::clone(ran);
        move |c: pikuri::Configurator| {
            c.add_tool(builtin::calculator())
                .add_tool(write_tool(&ran))
                .approver(StateChangingOnly::new(|_: &ApprovalRequest| {
                    Decision::Defer
                }))
        }
    };
    let (mut agent, rec) = agent_with(&server, build(&ran));
    let outcome = agent.run_loop("compute, then write two files").unwrap();
    assert_eq!(outcome.stop_reason, StopReason::ApprovalPending);
    assert_eq!(agent.last_stop_reason(), Some(StopReason::ApprovalPending));
    let pending: Vec<(String, Value)> = outcome
        .pending_approvals
        .iter()
        .map(|p| (p.tool.clone(), p.arguments.clone()))
        .collect();
    assert_eq!(
        pending,
        [
            ("write".to_string(), json!({"path": "a.txt"})),
            ("write".to_string(), json!({"path": "b.txt"})),
        ]
    );
    assert!(ran.lock().is_empty());
    // The calculator ran; the writes are unanswered, last.
    assert_eq!(agent.messages().len(), 3);
    assert_eq!(agent.messages()[2].content, "42");
    assert!(matches!(
        rec.events().last(),
        Some(Event::Stopped {
            reason: StopReason::ApprovalPending,
            ..
        })
    ));

    let saved = agent.export_history().to_json();
    drop(agent);

    // Another process: a new agent, the history alone.
    let ran2 = Arc::new(Mutex::new(Vec::new()));
    let (mut agent, rec) = agent_with(&server, build(&ran2));
    agent.load_history(History::parse(&saved).unwrap()).unwrap();
    let pending = agent.pending_approvals();
    assert_eq!(pending, outcome.pending_approvals);
    server.push(Reply::text("Wrote a.txt; b.txt was refused."));
    let bad = agent.resume([("nope", Decision::Approve)]);
    assert!(matches!(bad, Err(Error::InvalidInput(_))), "{bad:?}");
    let resumed = agent
        .resume([
            (pending[0].call_id.clone(), Decision::Approve),
            (pending[1].call_id.clone(), Decision::deny("not b")),
        ])
        .unwrap();
    assert_eq!(resumed.stop_reason, StopReason::Completed);
    assert_eq!(
        resumed.answer.as_deref(),
        Some("Wrote a.txt; b.txt was refused.")
    );
    assert!(resumed.pending_approvals.is_empty());
    assert_eq!(*ran2.lock(), [json!({"path": "a.txt"})]);
    assert_eq!(tool_message(&server, &pending[0].call_id), "wrote a.txt");
    assert_eq!(
        tool_message(&server, &pending[1].call_id),
        "Error: not run: denied: not b"
    );
    assert!(agent.pending_approvals().is_empty());
    assert_valid_history(agent.messages());
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    assert_eq!(
        main_kinds(&rec)
            .into_iter()
            .filter(|k| !matches!(*k, "reset" | "history_loaded"))
            .collect::<Vec<_>>(),
        [
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_denied",
            "tool_result",
            "assistant",
            "tokens",
            "stopped"
        ]
    );
    assert!(matches!(
        agent.resume(Vec::<(String, Decision)>::new()),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn a_new_message_instead_of_a_decision_answers_the_pending_calls() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("write", json!({"path": "a"})).with_id("c1"));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(write_tool(&ran))
            .approver(|_: &ApprovalRequest| Decision::Defer)
    });
    assert_eq!(
        agent.run_loop("write").unwrap().stop_reason,
        StopReason::ApprovalPending
    );
    server.push(Reply::text("fine"));
    agent.run_loop("never mind").unwrap();
    assert_eq!(tool_message(&server, "c1"), "Error: not run: not approved");
    assert!(ran.lock().is_empty());
    assert_valid_history(agent.messages());
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
}

#[test]
fn a_sub_agents_tool_is_reviewed_by_the_parents_approver() {
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "scribe", "task": "write a and b"}),
    ));
    server.push(Reply::tool_calls(vec![
        ("write", json!({"path": "a"})),
        ("write", json!({"path": "b"})),
    ]));
    server.push(Reply::text("a written, b refused")); // the child
    server.push(Reply::text("The scribe wrote a.")); // the parent
    let ran = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let personas = vec![Persona::new("scribe", "Writes.", "You write.", 5).with_tools(&["write"])];
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_sub_agent_tool(write_tool(&ran))
            .add_extension(SubAgents::new(personas).unwrap())
            .approver(StateChangingOnly::new(move |r: &ApprovalRequest| {
                s.lock()
                    .push((r.agent_id().to_string(), r.tool().to_string()));
                if r.arguments()["path"] == "a" {
                    Decision::Approve
                } else {
                    Decision::Defer // a child cannot wait: denied
                }
            }))
    });
    agent.run_loop("delegate").unwrap();
    assert_eq!(
        *seen.lock(),
        [
            ("scribe 0".into(), "write".into()),
            ("scribe 0".into(), "write".into())
        ]
    );
    assert_eq!(*ran.lock(), [json!({"path": "a"})]);
    let child_request = &server.chat_requests()[2];
    let msgs = child_request.messages();
    let tool_texts: Vec<&str> = msgs
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        tool_texts,
        [
            "wrote a",
            "Error: not run: denied: the call needs the host's approval, which a sub-agent cannot wait for"
        ]
    );
    assert!(server.rejections().is_empty());
}

#[test]
fn parallel_calls_are_reviewed_in_order_and_answered_in_order() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("write", json!({"path": "a"})),
        ("write", json!({"path": "b"})),
        ("write", json!({"path": "c"})),
    ]));
    server.push(Reply::text("done"));
    let ran = Arc::new(Mutex::new(Vec::new()));
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = Arc::clone(&order);
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(write_tool(&ran))
            .parallel_tool_calls(true)
            .cancellable(Cancellable::new())
            .approver(move |r: &ApprovalRequest| {
                let path = r.arguments()["path"].as_str().unwrap().to_string();
                o.lock().push(path.clone());
                if path == "b" {
                    Decision::deny("not b")
                } else {
                    Decision::Approve
                }
            })
    });
    agent.run_loop("write three").unwrap();
    assert_eq!(*order.lock(), ["a", "b", "c"]);
    let contents: Vec<&str> = agent.messages()[2..5]
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        contents,
        ["wrote a", "Error: not run: denied: not b", "wrote c"]
    );
    assert_eq!(ran.lock().len(), 2);
    assert_valid_history(agent.messages());
}
