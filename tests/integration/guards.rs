//! Issue 39: guardrails. Each verdict at each point with the history and
//! the next turn checked; chains; guards that panic, fail or overrun; the
//! model-judged guard; the ready-made redactor on tool output.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use pikuri::approval::Decision;
use pikuri::guard::{
    Action, BoxError, Guards, InputVerdict, Judge, Output, OutputVerdict, Point, Redactor,
    ToolInputVerdict, ToolOutputVerdict,
};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Error, ErrorKind, Event, Role, StopReason, ToolCall};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history};

/// The guard events of a run: `(guard, point, action, detail)`.
fn guard_events(
    rec: &pikuri::listeners::InMemoryEventList,
) -> Vec<(String, Point, Action, String)> {
    rec.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Guard {
                guard,
                point,
                action,
                detail,
                ..
            } => Some((guard, point, action, detail)),
            _ => None,
        })
        .collect()
}

/// The stop reason of the run's last `Stopped` event.
fn last_stop(rec: &pikuri::listeners::InMemoryEventList) -> StopReason {
    rec.events()
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::Stopped { reason, .. } => Some(*reason),
            _ => None,
        })
        .expect("a Stopped event")
}

fn secret_tool() -> FnTool {
    FnTool::new("lookup", "Looks up.", Parameters::empty(), |_, _| {
        Ok("owner: jo@example.com, key sk-abcdefghijklmnopqrstuvwxyz".into())
    })
}

fn input_guard() -> Guards {
    Guards::new().input("policy", |t: &str| {
        if t.contains("homework") {
            InputVerdict::Block("I won't do homework.".into())
        } else if t.contains("attack") {
            InputVerdict::Stop("a harmful request".into())
        } else if t.contains("typo") {
            InputVerdict::Replace(t.replace("typo", "type"))
        } else {
            InputVerdict::Allow
        }
    })
}

#[test]
fn input_replace_enters_the_new_text() {
    let server = FakeServer::start();
    server.push(Reply::text("ok"));
    let (mut agent, rec) = agent_with(&server, |c| c.guards(input_guard()));
    let out = agent.run_loop("fix my typo").unwrap();
    assert_eq!(out.stop_reason, StopReason::Completed);
    assert_eq!(agent.messages()[0].content, "fix my type");
    let sent = server.chat_requests()[0].messages();
    assert_eq!(sent.last().unwrap()["content"], "fix my type");
    assert_eq!(
        guard_events(&rec),
        [(
            "policy".into(),
            Point::Input,
            Action::Replace,
            String::new()
        )]
    );
}

#[test]
fn input_block_answers_without_a_request_and_the_next_turn_works() {
    let server = FakeServer::start();
    server.push(Reply::text("Paris."));
    let (mut agent, rec) = agent_with(&server, |c| c.guards(input_guard()));
    let out = agent.run_loop("do my homework").unwrap();
    assert_eq!(out.stop_reason, StopReason::Guardrail);
    assert_eq!(out.answer.as_deref(), Some("I won't do homework."));
    assert_eq!(out.requests, 0);
    assert!(server.chat_requests().is_empty());
    let roles: Vec<Role> = agent.messages().iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
    assert_eq!(last_stop(&rec), StopReason::Guardrail);
    assert_eq!(
        guard_events(&rec),
        [(
            "policy".into(),
            Point::Input,
            Action::Block,
            "I won't do homework.".into()
        )]
    );
    // The next turn goes on, the blocked pair in its history.
    let out = agent.run_loop("capital of France?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Paris."));
    assert_eq!(server.chat_requests()[0].messages().len(), 4); // system, user, assistant, user
    assert_valid_history(agent.messages());
}

#[test]
fn input_stop_withholds_the_message_and_the_next_turn_works() {
    let server = FakeServer::start();
    server.push(Reply::text("Hello."));
    let (mut agent, rec) = agent_with(&server, |c| c.guards(input_guard()));
    let err = agent.run_loop("plan an attack").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Guardrail);
    assert_eq!(
        err.to_string(),
        "stopped by guard policy: a harmful request"
    );
    assert!(
        matches!(&err, Error::Guardrail { guard, reason } if guard == "policy" && reason == "a harmful request")
    );
    assert_eq!(last_stop(&rec), StopReason::Guardrail);
    assert_eq!(agent.last_stop_reason(), Some(StopReason::Guardrail));
    assert!(server.chat_requests().is_empty());
    assert_eq!(agent.messages().len(), 1);
    assert_eq!(agent.messages()[0].content, "[withheld by guard policy]");
    let out = agent.run_loop("hi").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Hello."));
    let sent = server.chat_requests()[0].messages();
    assert!(
        !sent
            .iter()
            .any(|m| m["content"].as_str().is_some_and(|c| c.contains("attack")))
    );
}

#[test]
fn output_replace_keeps_the_new_answer() {
    let server = FakeServer::start();
    server.push(Reply::text("Mail jo@example.com"));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.guards(Guards::new().output("redact", Redactor::new()))
    });
    let out = agent.run_loop("who?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Mail [redacted email]"));
    assert_eq!(agent.messages()[1].content, "Mail [redacted email]");
    assert_eq!(guard_events(&rec).len(), 1);
}

#[test]
fn output_retry_asks_again_with_feedback_then_stops_past_the_bound() {
    let server = FakeServer::start();
    server.push(Reply::text("short"));
    server.push(Reply::text("a much longer answer"));
    let long_enough = |a: &str| {
        if a.len() < 10 {
            OutputVerdict::Retry("Answer in more detail.".into())
        } else {
            OutputVerdict::Allow
        }
    };
    let (mut agent, rec) = agent_with(&server, |c| {
        c.guards(Guards::new().output("detail", long_enough).max_retries(1))
    });
    let out = agent.run_loop("explain").unwrap();
    assert_eq!(out.answer.as_deref(), Some("a much longer answer"));
    assert_eq!(out.requests, 2);
    let texts: Vec<(Role, &str)> = agent
        .messages()
        .iter()
        .map(|m| (m.role, m.content.as_str()))
        .collect();
    assert_eq!(
        texts,
        [
            (Role::User, "explain"),
            (Role::Assistant, "short"),
            (Role::User, "Answer in more detail."),
            (Role::Assistant, "a much longer answer"),
        ]
    );
    assert_eq!(
        server.chat_requests()[1].messages().last().unwrap()["content"],
        "Answer in more detail."
    );
    assert_eq!(guard_events(&rec)[0].2, Action::Retry);

    // Two short answers: the one retry allowed, then the stop.
    server.push(Reply::text("no"));
    server.push(Reply::text("still no"));
    let err = agent.run_loop("again").unwrap_err();
    assert_eq!(
        err.to_string(),
        "stopped by guard detail: still refused after 1 retries: Answer in more detail."
    );
    assert_valid_history(agent.messages());
    // The refused last answer did not enter: the history ends at the feedback.
    assert_eq!(
        agent.messages().last().unwrap().content,
        "Answer in more detail."
    );
    server.push(Reply::text("a long enough answer now"));
    assert!(agent.run_loop("once more").is_ok());
}

#[test]
fn output_stop_leaves_the_turn_without_the_answer() {
    let server = FakeServer::start();
    server.push(Reply::text("forbidden words"));
    server.push(Reply::text("fine"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.guards(Guards::new().output("words", |a: &str| {
            if a.contains("forbidden") {
                OutputVerdict::Stop("forbidden words".into())
            } else {
                OutputVerdict::Allow
            }
        }))
    });
    let err = agent.run_loop("say it").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Guardrail);
    assert_eq!(agent.messages().len(), 1);
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("fine")
    );
    assert_valid_history(agent.messages());
}

#[test]
fn tool_input_reject_runs_before_the_approver_and_the_model_sees_it() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("lookup", json!({"q": "rm -rf"})));
    server.push(Reply::text("I could not."));
    let asked = Arc::new(AtomicUsize::new(0));
    let a = Arc::clone(&asked);
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(secret_tool())
            .approver(move |_: &pikuri::approval::ApprovalRequest| {
                a.fetch_add(1, Ordering::SeqCst);
                Decision::Approve
            })
            .guards(Guards::new().tool_input("no-rm", |call: &ToolCall| {
                if call.arguments.contains("rm -rf") {
                    ToolInputVerdict::Reject("Error: refused by policy".into())
                } else {
                    ToolInputVerdict::Allow
                }
            }))
    });
    let out = agent.run_loop("clean up").unwrap();
    assert_eq!(out.answer.as_deref(), Some("I could not."));
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "the approver was not asked"
    );
    assert_eq!(agent.messages()[2].content, "Error: refused by policy");
    let events = guard_events(&rec);
    assert_eq!(events[0].1, Point::ToolInput);
    assert_eq!(events[0].2, Action::Reject);
    assert_valid_history(agent.messages());
}

#[test]
fn tool_input_stop_answers_every_call_and_the_next_turn_works() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("lookup", json!({})),
        ("lookup", json!({})),
    ]));
    server.push(Reply::text("next"));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(secret_tool())
            .guards(Guards::new().tool_input("never", |_: &ToolCall| {
                ToolInputVerdict::Stop("no tools today".into())
            }))
    });
    let err = agent.run_loop("go").unwrap_err();
    assert_eq!(err.to_string(), "stopped by guard never: no tools today");
    assert_eq!(last_stop(&rec), StopReason::Guardrail);
    assert_valid_history(agent.messages());
    let results: Vec<&str> = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(results, ["Error: not run: stopped by a guard"; 2]);
    assert_eq!(
        agent.run_loop("hi").unwrap().answer.as_deref(),
        Some("next")
    );
}

#[test]
fn tool_output_redaction_keeps_secrets_out_of_history_and_requests() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("lookup", json!({})));
    server.push(Reply::text("done"));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(secret_tool())
            .guards(Guards::new().tool_output("redact", Redactor::new()))
    });
    agent.run_loop("who owns it?").unwrap();
    let result = &agent.messages()[2].content;
    assert_eq!(result, "owner: [redacted email], key [redacted key]");
    let body = serde_json::to_string(&server.chat_requests()[1].body).unwrap();
    assert!(
        !body.contains("jo@example.com") && !body.contains("sk-abc"),
        "{body}"
    );
    // The event the listeners get carries the redacted text too.
    let shown = rec.events().into_iter().find_map(|e| match e {
        Event::ToolResult { content, .. } => Some(content),
        _ => None,
    });
    assert_eq!(shown.as_deref(), Some(result.as_str()));
}

#[test]
fn tool_output_stop_withholds_the_result_and_the_rest_of_the_batch() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("lookup", json!({})),
        ("lookup", json!({})),
    ]));
    server.push(Reply::text("after"));
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    let counting = FnTool::new("lookup", "Looks up.", Parameters::empty(), move |_, _| {
        r.fetch_add(1, Ordering::SeqCst);
        Ok("secret stuff".into())
    });
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(counting)
            .guards(Guards::new().tool_output("dlp", |_: &ToolCall, out: &str| {
                if out.contains("secret") {
                    ToolOutputVerdict::Stop("a secret in a tool result".into())
                } else {
                    ToolOutputVerdict::Allow
                }
            }))
    });
    let err = agent.run_loop("look").unwrap_err();
    assert_eq!(
        err.to_string(),
        "stopped by guard dlp: a secret in a tool result"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the second call did not run");
    let results: Vec<&str> = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        results,
        [
            "Error: withheld by guard dlp",
            "Error: not run: stopped by a guard"
        ]
    );
    assert_valid_history(agent.messages());
    assert_eq!(server.chat_requests().len(), 1);
    assert_eq!(
        agent.run_loop("hi").unwrap().answer.as_deref(),
        Some("after")
    );
}

#[test]
fn chained_guards_run_in_order_each_seeing_the_last_replacement() {
    let server = FakeServer::start();
    server.push(Reply::text("ok"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s1, s2) = (Arc::clone(&seen), Arc::clone(&seen));
    let guards = Guards::new()
        .input("first", move |t: &str| {
            s1.lock().push(format!("first saw {t}"));
            InputVerdict::Replace(format!("{t}+1"))
        })
        .input("second", move |t: &str| {
            s2.lock().push(format!("second saw {t}"));
            InputVerdict::Replace(format!("{t}+2"))
        });
    let (mut agent, rec) = agent_with(&server, |c| c.guards(guards));
    agent.run_loop("x").unwrap();
    assert_eq!(*seen.lock(), ["first saw x", "second saw x+1"]);
    assert_eq!(agent.messages()[0].content, "x+1+2");
    let names: Vec<String> = guard_events(&rec).into_iter().map(|e| e.0).collect();
    assert_eq!(names, ["first", "second"]);
}

#[test]
fn a_panicking_failing_or_slow_guard_stops_the_run_naming_it() {
    struct Down;
    impl Output for Down {
        fn check(&self, _: &str) -> Result<OutputVerdict, BoxError> {
            Err("the moderation service is down".into())
        }
    }
    let cases: Vec<(Guards, &str)> = vec![
        (
            Guards::new().output("boom", |_: &str| -> OutputVerdict { panic!("boom") }),
            "stopped by guard boom: the guard panicked",
        ),
        (
            Guards::new().output("boom", Down),
            "stopped by guard boom: the guard failed: the moderation service is down",
        ),
        (
            Guards::new()
                .output("boom", |_: &str| {
                    std::thread::sleep(Duration::from_secs(3600));
                    OutputVerdict::Allow
                })
                .timeout(Duration::from_millis(1)),
            "stopped by guard boom: the guard took longer than 1 ms",
        ),
    ];
    for (guards, message) in cases {
        let server = FakeServer::start();
        server.push(Reply::text("an answer"));
        let (mut agent, rec) = agent_with(&server, |c| c.guards(guards));
        let err = agent.run_loop("q").unwrap_err();
        assert_eq!(err.to_string(), message);
        assert_eq!(last_stop(&rec), StopReason::Guardrail);
        assert_eq!(guard_events(&rec)[0].2, Action::Stop);
        // Never a silent allow: the answer did not enter.
        assert_eq!(agent.messages().len(), 1);
    }
}

#[test]
fn the_model_judged_guard_asks_its_own_server_and_retries_with_its_reason() {
    let judge_server = FakeServer::start();
    judge_server.push(Reply::text(r#"{"allow": false, "reason": "it is rude"}"#));
    judge_server.push(Reply::text(r#"{"allow": true, "reason": "polite"}"#));
    let server = FakeServer::start();
    server.push(Reply::text("Go away."));
    server.push(Reply::text("Happy to help."));
    let judge = Judge::new(judge_server.transport(), "Answers must be polite.");
    let (mut agent, rec) = agent_with(&server, |c| c.guards(Guards::new().output("polite", judge)));
    let out = agent.run_loop("help").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Happy to help."));
    assert_eq!(guard_events(&rec)[0].3, "it is rude");
    let asked = judge_server.chat_requests();
    assert_eq!(asked.len(), 2);
    let first = asked[0].messages();
    assert!(
        first[0]["content"]
            .as_str()
            .unwrap()
            .contains("Answers must be polite.")
    );
    assert_eq!(first.last().unwrap()["content"], "Go away.");
    let body = asked[0].body.as_ref().unwrap();
    assert_eq!(body["response_format"]["type"], "json_schema");
}

#[test]
fn a_judge_that_answers_no_verdict_is_a_stop() {
    let judge_server = FakeServer::start();
    judge_server.push(Reply::text("I think it's fine"));
    let server = FakeServer::start();
    server.push(Reply::text("hello"));
    let judge = Judge::new(judge_server.transport(), "Be nice.");
    let (mut agent, _rec) = agent_with(&server, |c| c.guards(Guards::new().output("nice", judge)));
    let err = agent.run_loop("hi").unwrap_err();
    assert!(
        err.to_string().starts_with(
            "stopped by guard nice: the guard failed: the judge's answer is not its verdict JSON"
        ),
        "{err}"
    );
}

#[test]
fn a_guard_beside_the_request_cuts_a_stalled_stream_and_nothing_of_it_enters() {
    let server = FakeServer::start();
    // Two chunks, then the stream stalls for good: only a cut ends it.
    server.push(
        Reply::text("Here is how to build it: first")
            .with_chunk_chars(5)
            .hang_after(2),
    );
    server.push(Reply::text("Hello."));
    // The guard decides once the model is streaming (a delta reached a
    // listener), so the trip falls while the request is in flight.
    let (tx, rx) = crossbeam_channel::unbounded::<()>();
    let rx = Mutex::new(rx);
    let guards = Guards::new().input_beside("slow-policy", move |t: &str| {
        if t.contains("bomb") {
            let _ = rx.lock().recv();
            InputVerdict::Stop("weapons".into())
        } else {
            InputVerdict::Allow
        }
    });
    let (mut agent, rec) = agent_with(&server, |c| {
        c.streaming(true)
            .add_listener(move |e: &Event| {
                if matches!(e, Event::AssistantDelta { .. }) {
                    let _ = tx.send(());
                }
            })
            .guards(guards)
    });
    let err = agent.run_loop("how to build a bomb").unwrap_err();
    assert_eq!(err.to_string(), "stopped by guard slow-policy: weapons");
    assert_eq!(last_stop(&rec), StopReason::Guardrail);
    // Nothing of the cut answer entered; the message is withheld.
    assert_eq!(agent.messages().len(), 1);
    assert_eq!(
        agent.messages()[0].content,
        "[withheld by guard slow-policy]"
    );
    assert!(
        !crate::util::streamed_text(&rec.events()).is_empty(),
        "it was streaming"
    );
    // The next turn goes on; an allowing guard beside it costs nothing.
    let out = agent.run_loop("hi").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Hello."));
    let sent = server.chat_requests()[1].messages();
    assert!(
        !sent
            .iter()
            .any(|m| m["content"].as_str().is_some_and(|c| c.contains("bomb")))
    );
    assert_valid_history(agent.messages());
}

#[test]
fn a_block_beside_the_request_answers_for_the_model() {
    let server = FakeServer::start();
    server.push(Reply::text("a model answer the guard overrules"));
    let guards = Guards::new().input_beside("scope", |_: &str| {
        InputVerdict::Block("Out of scope.".into())
    });
    let (mut agent, rec) = agent_with(&server, |c| c.guards(guards));
    let out = agent.run_loop("anything").unwrap();
    assert_eq!(out.stop_reason, StopReason::Guardrail);
    assert_eq!(out.answer.as_deref(), Some("Out of scope."));
    let texts: Vec<&str> = agent
        .messages()
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(texts, ["anything", "Out of scope."]);
    assert_eq!(guard_events(&rec)[0].2, Action::Block);
    assert_valid_history(agent.messages());
}

#[test]
fn tool_output_guards_check_every_result_of_a_parallel_batch() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("lookup", json!({})),
        ("lookup", json!({})),
    ]));
    server.push(Reply::text("after"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(secret_tool())
            .parallel_tool_calls(true)
            .guards(Guards::new().tool_output("dlp", |_: &ToolCall, out: &str| {
                if out.contains("sk-") {
                    ToolOutputVerdict::Stop("a key in a tool result".into())
                } else {
                    ToolOutputVerdict::Allow
                }
            }))
    });
    let err = agent.run_loop("look").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Guardrail);
    // Both ran together; neither result entered: the first tripped the
    // guard, the second is withheld unread.
    let results: Vec<&str> = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(
        results,
        [
            "Error: withheld by guard dlp",
            "Error: withheld: a guard stopped the run"
        ]
    );
    assert_eq!(server.chat_requests().len(), 1, "no request after the stop");
    assert_valid_history(agent.messages());
    assert_eq!(
        agent.run_loop("hi").unwrap().answer.as_deref(),
        Some("after")
    );
}

/// The answer's text as the listeners saw it: every delta and bookend.
fn shown(rec: &pikuri::listeners::InMemoryEventList) -> Vec<String> {
    rec.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::AssistantDelta { content, .. } => Some(format!("delta {content}")),
            Event::Assistant { content, .. } => Some(format!("answer {content}")),
            _ => None,
        })
        .collect()
}

#[test]
fn held_deltas_show_only_what_the_output_guards_let_through() {
    let server = FakeServer::start();
    server.push(Reply::text("Mail jo@example.com").with_chunk_chars(4));
    server.push(Reply::text("You are wrong!").with_chunk_chars(4));
    server.push(Reply::text("Happy to help.").with_chunk_chars(4));
    let guards = Guards::new()
        .output("redact", Redactor::new())
        .output("polite", |a: &str| {
            if a.contains('!') {
                OutputVerdict::Retry("be polite".into())
            } else {
                OutputVerdict::Allow
            }
        })
        .hold_deltas(true);
    let (mut agent, rec) = agent_with(&server, |c| c.streaming(true).guards(guards));
    let out = agent.run_loop("who?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Mail [redacted email]"));
    // No delta, and the secret never reached a listener.
    assert_eq!(shown(&rec), ["answer Mail [redacted email]"]);
    let out = agent.run_loop("help").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Happy to help."));
    // The answer sent back was never shown; the one let through once.
    assert_eq!(
        shown(&rec),
        ["answer Mail [redacted email]", "answer Happy to help."]
    );
    assert_valid_history(agent.messages());
}

#[test]
fn without_holding_the_deltas_show_the_answer_before_the_guards() {
    let server = FakeServer::start();
    server.push(Reply::text("Mail jo@example.com").with_chunk_chars(10));
    let guards = Guards::new().output("redact", Redactor::new());
    let (mut agent, rec) = agent_with(&server, |c| c.streaming(true).guards(guards));
    let out = agent.run_loop("who?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Mail [redacted email]"));
    // As documented: the stream shows the text the guards then replaced.
    assert!(shown(&rec).iter().any(|s| s.starts_with("delta ")));
}

/// A guard that says it may run inline, recording the thread it ran on.
struct OnThread {
    inline: bool,
    seen: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    panics: bool,
}

impl pikuri::guard::Input for OnThread {
    fn check(&self, _text: &str) -> Result<InputVerdict, BoxError> {
        self.seen.lock().push(std::thread::current().id());
        assert!(!self.panics, "the inline guard broke");
        Ok(InputVerdict::Allow)
    }

    fn inline(&self) -> bool {
        self.inline
    }
}

/// A guard that says it may run inline runs on the loop's thread (no
/// hand-off to a guard thread); any other runs on a guard thread; a
/// panicking inline guard is still a stop, with a valid history and no
/// request sent.
#[test]
fn an_inline_guard_runs_on_the_loop_s_thread_and_a_panic_is_still_a_stop() {
    for inline in [true, false] {
        let server = FakeServer::start();
        server.push(Reply::text("ok"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let guard = OnThread {
            inline,
            seen: Arc::clone(&seen),
            panics: false,
        };
        let (mut agent, _) = agent_with(&server, |c| c.guards(Guards::new().input("t", guard)));
        agent.run_loop("hi").unwrap();
        let here = std::thread::current().id();
        assert_eq!(seen.lock().len(), 1);
        assert_eq!(seen.lock()[0] == here, inline, "inline={inline}");
    }
    let server = FakeServer::start();
    server.push(Reply::text("next"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let broken = OnThread {
        inline: true,
        seen,
        panics: true,
    };
    let (mut agent, _) = agent_with(&server, |c| c.guards(Guards::new().input("broken", broken)));
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Guardrail, "{err}");
    assert!(err.to_string().contains("panicked"), "{err}");
    assert_valid_history(agent.messages());
    assert_eq!(server.chat_requests().len(), 0);
}
