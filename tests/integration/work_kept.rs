//! Issue 38 item 25: the two deviations from pikuri that lost work. A
//! message injected while a tool batch ran, when the budget or a cancel
//! stops that batch at its second call or later; a transport that drops
//! the current one's explicit context window.

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Cancellable, Event, Interloper, OnExhausted, Role, StepLimit, StopReason};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history, main_kinds};

/// A tool that injects `message` into `q` as the user would, then (with
/// `cancel`) cancels the run.
fn injecting(q: &Interloper, message: &'static str, cancel: Option<Cancellable>) -> FnTool {
    let q = q.clone();
    FnTool::new("inject", "Injects.", Parameters::empty(), move |_, _| {
        q.inject_user_message(message).unwrap();
        if let Some(c) = &cancel {
            c.cancel();
        }
        Ok("injected".into())
    })
}

fn look() -> FnTool {
    FnTool::new("look", "Looks.", Parameters::empty(), |_, _| {
        Ok("nothing".into())
    })
}

#[test]
fn a_message_injected_in_a_batch_the_budget_stops_reaches_the_synthesizer() {
    let server = FakeServer::start();
    // One batch of two calls on a budget of one: the second call stops it.
    server.push(Reply::tool_calls(vec![
        ("inject", json!({})),
        ("look", json!({})),
    ]));
    server.push(Reply::text("Synthesized."));
    let q = Interloper::new();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(injecting(&q, "also mention cats", None))
            .add_tool(look())
            .interloper(q.clone())
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
    });
    let out = agent.run_loop("investigate").unwrap();
    assert_eq!(out.stop_reason, StopReason::Synthesized);
    assert!(!q.is_pending(), "the injected message stayed queued");
    // The synthesizer's evidence holds it, after the batch's results.
    let synth = server.chat_requests()[1].messages();
    let prompt = synth.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    let injected = prompt.find("[user] also mention cats").expect(&prompt);
    assert!(prompt.find("[look result]").unwrap() < injected, "{prompt}");
    // In the history after the "not run" observation, announced mid-loop.
    assert_valid_history(agent.messages());
    let user = agent
        .messages()
        .iter()
        .position(|m| m.role == Role::User && m.content == "also mention cats")
        .expect("in the history");
    assert_eq!(agent.messages()[user - 1].role, Role::Tool);
    assert!(rec.events().iter().any(|e| matches!(e,
        Event::UserTurn { mid_loop: true, content, .. } if content == "also mention cats")));
    // The next turn is one request, not an answer and then the leftover.
    server.push(Reply::text("next answer"));
    let next = agent.run_loop("next").unwrap();
    assert_eq!(next.answer.as_deref(), Some("next answer"));
    assert_eq!(next.requests, 1);
    assert_eq!(server.chat_requests().len(), 3);
}

#[test]
fn a_message_injected_in_a_batch_a_cancel_stops_is_kept_at_the_stop() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("inject", json!({})),
        ("look", json!({})),
    ]));
    let q = Interloper::new();
    let cancel = Cancellable::new();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(injecting(
            &q,
            "stop, use the other file",
            Some(cancel.clone()),
        ))
        .add_tool(look())
        .interloper(q.clone())
        .cancellable(cancel.clone())
    });
    assert!(agent.run_loop("investigate").unwrap_err().is_cancelled());
    assert!(!q.is_pending(), "the injected message stayed queued");
    assert_valid_history(agent.messages());
    let last = agent.messages().last().unwrap();
    assert_eq!(
        (last.role, last.content.as_str()),
        (Role::User, "stop, use the other file")
    );
    // Announced before the turn's end: the `Cancelled`, then `Stopped`.
    let kinds = main_kinds(&rec);
    let n = kinds.len();
    assert_eq!(
        &kinds[n - 3..],
        ["user_turn", "cancelled", "stopped"],
        "{kinds:?}"
    );
    // The next turn sends it in its first request and needs no second.
    server.push(Reply::text("using the other file"));
    let next = agent.run_loop("go on").unwrap();
    assert_eq!(next.requests, 1);
    let sent = server.chat_requests()[1].messages();
    assert!(
        sent.iter()
            .any(|m| m["content"] == "stop, use the other file"),
        "{sent:?}"
    );
    assert_eq!(server.chat_requests().len(), 2);
}

#[test]
fn dropping_an_explicit_window_is_a_switch_that_detects_it_again() {
    let server = FakeServer::start();
    server.set_context_size(Some(2048));
    server.push(Reply::text("one"));
    server.push(Reply::text("two"));
    server.push(Reply::text("three"));
    let rec = pikuri::listeners::InMemoryEventList::new();
    let mut agent = pikuri::Agent::builder(server.transport().with_context_window(Some(1000)))
        .http(crate::util::fast_http())
        .add_listener(rec.clone())
        .build()
        .unwrap();
    agent.run_loop("a").unwrap();
    assert_eq!(agent.context_window_cap(), Some(1000));
    // The same endpoint and model, without the explicit window: the host
    // dropped its override, so the window is the server's again.
    agent.run_loop_with("b", server.transport()).unwrap();
    assert_eq!(agent.context_window_cap(), Some(2048));
    assert_eq!(agent.transport().context_window(), None);
    let switches = || {
        rec.events()
            .iter()
            .filter(|e| matches!(e, Event::ModelSwitched { .. }))
            .count()
    };
    assert_eq!(switches(), 1);
    // Then the same endpoint again, neither window explicit, other
    // settings: no switch, the detected cap stays, the settings apply.
    let probes = server.requests().len() - server.chat_requests().len();
    let settled = server
        .transport()
        .with_settings(pikuri::ModelSettings::new().with_seed(7));
    agent.run_loop_with("c", settled).unwrap();
    assert_eq!(agent.context_window_cap(), Some(2048));
    assert_eq!(
        server.requests().len() - server.chat_requests().len(),
        probes
    );
    assert_eq!(switches(), 1);
    assert_eq!(server.chat_requests()[2].body.as_ref().unwrap()["seed"], 7);
}
