//! One test per fixed bug, named `issue_NNN_...`.

use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Cancellable, OnExhausted, StepLimit};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history};

/// A cancel set by one tool call stops the batch at the parent's check
/// before the `agent` call, so no child is spawned. (That nested agents do
/// not reset the shared Cancellable is tested by
/// `a_cancel_before_the_synthesizer_starts_is_not_swallowed`, which reaches a
/// child.)
#[test]
fn nested_agents_do_not_reset_the_shared_cancellable() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("stop", json!({})),
        ("agent", json!({"name": "helper", "task": "t"})),
    ]));
    let cancel = Cancellable::new();
    let c2 = cancel.clone();
    // The first call cancels; the parent's check before the second call must see it.
    let stop = FnTool::new("stop", "Cancels.", Parameters::empty(), move |_, _| {
        c2.cancel();
        Ok("cancelled".into())
    });
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(stop)
            .cancellable(cancel.clone())
            .add_extension(SubAgents::new(vec![Persona::new("helper", "h", "p", 2)]).unwrap())
    });
    assert!(agent.run_loop("go").unwrap_err().is_cancelled());
    assert!(cancel.is_cancelled());
    assert_valid_history(agent.messages());
    assert_eq!(server.chat_requests().len(), 1, "no child request was made");
}

/// The same rule, where the race can be staged: the last tool call the
/// budget allows cancels, the next call trips the budget, and the
/// synthesizer (a nested agent) starts with the cancel already set. A child
/// that reset the shared Cancellable at its turn start would swallow that
/// cancel and ask the model for a synthesized answer.
#[test]
fn a_cancel_before_the_synthesizer_starts_is_not_swallowed() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("stop", json!({})),
        ("stop", json!({})),
    ]));
    server.push(Reply::text("synthesized (must not be requested)"));
    let cancel = Cancellable::new();
    let c2 = cancel.clone();
    let stop = FnTool::new("stop", "Cancels.", Parameters::empty(), move |_, _| {
        c2.cancel();
        Ok("cancelled".into())
    });
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(stop)
            .cancellable(cancel.clone())
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
    });
    let err = agent.run_loop("go").unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(cancel.is_cancelled());
    assert_eq!(
        server.chat_requests().len(),
        1,
        "the synthesizer must not have sent a request"
    );
    assert!(
        rec.kinds().contains(&"fallback_notice"),
        "{:?}",
        rec.kinds()
    );
    assert_valid_history(agent.messages());
}

/// `last_assistant_content` (and `Outcome::answer`) once returned an earlier
/// turn's answer when the latest turn's final message was empty.
#[test]
fn answer_is_never_an_earlier_turns() {
    let server = FakeServer::start();
    server.push(Reply::text("first answer"));
    server.push(Reply::text(""));
    let (mut agent, _) = agent_with(&server, |c| c);
    assert_eq!(
        agent.run_loop("one").unwrap().answer.as_deref(),
        Some("first answer")
    );
    assert_eq!(agent.run_loop("two").unwrap().answer, None);
    assert_eq!(agent.last_assistant_content(), None);
}
