//! Step limit, synthesizer, cancellation, interloper.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pikuri::extension::{Extension, ExtensionContext};
use pikuri::subagent::Synthesizer;
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Cancellable, Error, Event, Interloper, OnExhausted, Role, StepLimit, StopReason};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history, main_kinds};

fn noop_tool(name: &str) -> FnTool {
    FnTool::new(name, "Does nothing.", Parameters::empty(), |_, _| {
        Ok("nothing".into())
    })
}

#[test]
fn step_limit_raise_keeps_history_and_continue_works() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::tool_calls(vec![
        ("look", json!({})),
        ("look", json!({})),
    ]));
    let limit = StepLimit::new(2);
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(noop_tool("look")).step_limit(limit.clone())
    });
    let err = agent.run_loop("investigate").unwrap_err();
    assert!(matches!(err, Error::StepLimitExceeded { max: 2 }), "{err}");
    assert_eq!(agent.last_stop_reason(), Some(StopReason::StepLimit));
    assert_valid_history(agent.messages());
    let last = agent.messages().last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert!(last.content.contains("step budget"));
    // The third call's ToolCall was emitted, then tick tripped: its result says "not run".
    let kinds = main_kinds(&rec);
    assert_eq!(kinds.iter().filter(|k| **k == "tool_call").count(), 3);
    assert_eq!(kinds.last(), Some(&"stopped"));
    // "continue": a fresh budget, and the strict server accepts the history.
    server.push(Reply::text("continuing"));
    let out = agent.run_loop("continue").unwrap();
    assert_eq!(out.answer.as_deref(), Some("continuing"));
    assert_eq!(limit.step(), 0);
}

#[test]
fn step_limit_synthesize_runs_a_tools_free_pass() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::text("Synthesized answer."));
    let limit = StepLimit::with_policy(1, OnExhausted::Synthesize);
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(noop_tool("look"))
            .step_limit(limit)
            .request_field("tool_choice", json!("required"))
            .request_field("temperature", json!(0))
    });
    let out = agent.run_loop("what is it?").unwrap();
    assert_eq!(out.stop_reason, StopReason::Synthesized);
    assert_eq!(
        agent.last_assistant_content().as_deref(),
        Some("Synthesized answer.")
    );
    let synth_req = &server.chat_requests()[2];
    assert!(
        synth_req.tool_names().is_empty(),
        "the synthesizer gets no tools"
    );
    let body = synth_req.body.as_ref().unwrap();
    assert!(
        body.get("tool_choice").is_none(),
        "no tool steering without tools"
    );
    assert_eq!(body["temperature"], 0, "other request fields are inherited");
    let msgs = synth_req.messages();
    assert_eq!(msgs[0]["content"], Synthesizer::SYSTEM_PROMPT);
    assert!(
        msgs[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Question: what is it?")
    );
    let kinds = rec.kinds();
    assert!(kinds.contains(&"fallback_notice"));
    assert!(
        rec.events()
            .iter()
            .any(|e| e.agent() == "synthesizer" && e.kind() == "assistant")
    );
    assert_valid_history(agent.messages());
    server.push(Reply::text("next"));
    agent.run_loop("thanks").unwrap();
}

/// A synthesizer set with `Configurator::synthesizer` is the one that runs:
/// its system prompt heads the tools-free pass's request, and the evidence
/// carries the assistant's words beside its calls. (Mutation pass: only the
/// doctest saw `with_system_prompt`, no test saw the setting reach a
/// request, and none looked at the assistant lines of the evidence.)
#[test]
fn a_custom_synthesizer_prompt_reaches_the_tools_free_pass() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("look", json!({})).with_text("Let me look."));
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::text("In one line."));
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(noop_tool("look"))
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
            .synthesizer(Synthesizer::default().with_system_prompt("Answer in one line."))
    });
    let out = agent.run_loop("what is it?").unwrap();
    assert_eq!(out.stop_reason, StopReason::Synthesized);
    let synth = server.chat_requests()[2].messages().clone();
    assert_eq!(synth[0]["content"], "Answer in one line.");
    // The evidence: the assistant's words once, no empty assistant lines
    // for the call that came without text.
    let prompt = synth[1]["content"].as_str().unwrap();
    assert!(prompt.starts_with("Question: what is it?\n"), "{prompt}");
    assert_eq!(prompt.matches("[assistant]").count(), 1, "{prompt}");
    assert!(prompt.contains("[assistant] Let me look.\n"), "{prompt}");
    assert_eq!(prompt.matches("[tool call] look").count(), 2, "{prompt}");
    server.assert_all_used();
}

#[test]
fn cancel_from_a_tool_stops_at_the_next_boundary() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("stop", json!({})),
        ("look", json!({})),
    ]));
    let cancel = Cancellable::new();
    let c2 = cancel.clone();
    let stop = FnTool::new("stop", "Cancels.", Parameters::empty(), move |_, cx| {
        c2.cancel();
        assert!(cx.is_cancelled());
        Ok("stopping".into())
    });
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(stop)
            .add_tool(noop_tool("look"))
            .cancellable(cancel.clone())
    });
    let err = agent.run_loop("go").unwrap_err();
    assert!(err.is_cancelled());
    assert!(rec.kinds().contains(&"cancelled"));
    assert_valid_history(agent.messages());
    assert!(
        agent
            .messages()
            .last()
            .unwrap()
            .content
            .contains("cancelled")
    );
    // No synthesis after a cancel, and the next turn works (reset at turn start).
    server.push(Reply::text("fresh"));
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("fresh")
    );
}

fn cancel_during(reply: Reply, streaming: bool) {
    let server = FakeServer::start();
    server.push(reply);
    let cancel = Cancellable::new();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.cancellable(cancel.clone()).streaming(streaming)
    });
    let c2 = cancel.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        c2.cancel();
    });
    let started = Instant::now();
    let err = agent.run_loop("hello").unwrap_err();
    // A generous bound that only catches a hang (the benchmark measures latency).
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(err.is_cancelled(), "{err}");
    canceller.join().unwrap();
    assert_eq!(
        main_kinds(&rec).iter().rev().take(2).collect::<Vec<_>>(),
        vec![&"stopped", &"cancelled"]
    );
    // No half message was appended.
    assert_eq!(agent.messages().len(), 1);
    server.push(Reply::text("back"));
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("back")
    );
    assert_valid_history(agent.messages());
}

#[test]
fn cancel_interrupts_a_silent_stream() {
    cancel_during(Reply::text("this will never finish").hang_after(2), true);
}

#[test]
fn cancel_interrupts_a_server_that_never_answers() {
    cancel_during(Reply::hang(), false);
    cancel_during(Reply::hang(), true);
}

#[test]
fn cancel_interrupts_a_retry_wait() {
    cancel_during(Reply::status(429, "slow down").with_retry_after(30), false);
}

#[test]
fn cancel_stops_a_long_tool_through_its_context() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("long", json!({})));
    let cancel = Cancellable::new();
    let long = FnTool::new(
        "long",
        "Runs until cancelled.",
        Parameters::empty(),
        |_, cx| {
            let started = Instant::now();
            while !cx.is_cancelled() && started.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok("stopped early".into())
        },
    );
    let (mut agent, _) = agent_with(&server, |c| c.add_tool(long).cancellable(cancel.clone()));
    let c2 = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        c2.cancel();
    });
    assert!(agent.run_loop("go").unwrap_err().is_cancelled());
    t.join().unwrap();
    assert_valid_history(agent.messages());
    assert_eq!(agent.messages().last().unwrap().content, "stopped early");
}

#[test]
fn injection_is_delivered_after_the_tool_batch() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("inject", json!({})));
    server.push(Reply::text("noted"));
    let q = Interloper::new();
    let q2 = q.clone();
    let inject = FnTool::new("inject", "Injects.", Parameters::empty(), move |_, _| {
        q2.inject_user_message("also mention cats").unwrap();
        Ok("injected".into())
    });
    let (mut agent, rec) = agent_with(&server, |c| c.add_tool(inject).interloper(q.clone()));
    agent.run_loop("start").unwrap();
    let kinds = main_kinds(&rec);
    let result = kinds.iter().position(|k| *k == "tool_result").unwrap();
    assert_eq!(kinds[result + 1], "user_turn");
    assert!(rec.events().iter().any(|e| matches!(e, Event::UserTurn { mid_loop: true, content, .. } if content == "also mention cats")));
    let msgs = server.chat_requests()[1].messages();
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(
        msgs[4],
        json!({"role": "user", "content": "also mention cats"})
    );
    assert!(!q.is_pending());
}

struct InjectOnTurn(Interloper);
impl Extension for InjectOnTurn {
    fn on_user_message(&mut self, _ctx: &ExtensionContext, _m: &str) {
        self.0.inject_user_message("wait, one more thing").unwrap();
    }
}

#[test]
fn injection_pending_when_the_model_finishes_is_not_lost() {
    let server = FakeServer::start();
    server.push(Reply::text("first answer"));
    server.push(Reply::text("answer including the addition"));
    let q = Interloper::new();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.interloper(q.clone())
            .add_extension(InjectOnTurn(q.clone()))
    });
    let out = agent.run_loop("question").unwrap();
    assert_eq!(out.answer.as_deref(), Some("answer including the addition"));
    assert_eq!(server.chat_requests().len(), 2);
    let msgs = server.chat_requests()[1].messages();
    assert_eq!(msgs[2]["content"], "first answer");
    assert_eq!(
        msgs[3],
        json!({"role": "user", "content": "wait, one more thing"})
    );
    assert_eq!(rec.kinds().iter().filter(|k| **k == "user_turn").count(), 2);
}

#[test]
fn controls_are_not_reset_by_injection_and_reset_at_turn_start() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("inject", json!({})));
    server.push(Reply::tool_call("inject", json!({})));
    let q = Interloper::new();
    let q2 = q.clone();
    let inject = FnTool::new("inject", "Injects.", Parameters::empty(), move |_, _| {
        q2.inject_user_message("more").unwrap();
        Ok("ok".into())
    });
    let limit = StepLimit::new(1);
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(inject)
            .interloper(q.clone())
            .step_limit(limit.clone())
    });
    // The injection after the first batch does not refresh the budget.
    assert!(agent.run_loop("go").unwrap_err().is_step_limit());
    assert_valid_history(agent.messages());
    server.push(Reply::text("ok"));
    agent.run_loop("next").unwrap();
    assert_eq!(limit.step(), 0);
    let _ = Arc::new(());
}
