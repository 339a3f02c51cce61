//! One test per fixed bug, named `issue_NNN_...`.

use pikuri::testing::{FakeServer, Reply};
use pikuri::{Cancellable, Persona, SubAgents};
use pikuri::{FnTool, Parameters};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history};

/// A nested agent (sub-agent, synthesizer) shares its parent's Cancellable;
/// resetting it at the child's turn start would swallow a cancel that came
/// while the parent was spawning the child.
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
