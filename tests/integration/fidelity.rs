//! Issue 28, class 10: differences from pikuri that were fixed (the others
//! are listed in the crate docs' "Mapping from pikuri (Ruby)").

use std::sync::Arc;

use parking_lot::Mutex;
use pikuri::extension::{Extension, ExtensionContext};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{
    Agent, Error, ErrorKind, Interloper, OnExhausted, Result, Role, StepLimit, StopReason,
};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history};

/// An extension whose `bind` fails with the error it was given.
struct FailingBind(Option<Error>);

impl Extension for FailingBind {
    fn bind(&mut self, _ctx: &ExtensionContext) -> Result<()> {
        Err(self.0.take().expect("bind runs once"))
    }
}

/// An extension's `bind` error keeps its kind: a cancel stays a cancel (it
/// became `InvalidInput`), while a message of its own names the extension.
#[test]
fn a_bind_error_keeps_its_kind() {
    let server = FakeServer::start();
    let err = Agent::builder(server.transport())
        .add_extension(FailingBind(Some(Error::Cancelled)))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err:?}");
    assert!(err.is_cancelled());

    let err = Agent::builder(server.transport())
        .add_extension(FailingBind(Some(Error::StepLimitExceeded { max: 3 })))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StepLimit, "{err:?}");

    let err = Agent::builder(server.transport())
        .add_extension(FailingBind(Some(Error::InvalidInput("bad key".into()))))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        Error::InvalidInput("extension FailingBind failed to bind: bad key".into()).to_string()
    );
}

/// `close()` stops the listener threads: a later run would run with nobody
/// listening and with its close handlers' resources gone. It is refused,
/// with no request sent and no event emitted (it ran silently before).
#[test]
fn a_closed_agent_refuses_to_run() {
    let server = FakeServer::start();
    server.push(Reply::text("nobody hears this"));
    let (mut agent, rec) = agent_with(&server, |c| c);
    let before = rec.events().len();
    agent.close();
    let err = agent.run_loop("hello?").unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains("closed"), "{err}");
    assert!(agent.retry_turn().is_err());
    assert!(matches!(agent.compact(), Err(Error::InvalidInput(_))));
    assert!(matches!(
        agent.run_loop_with("hello?", server.transport()),
        Err(Error::InvalidInput(_))
    ));
    assert!(server.chat_requests().is_empty());
    assert!(agent.messages().is_empty());
    assert_eq!(rec.events().len(), before);
    // The readers still work: a closed conversation can be saved.
    assert_eq!(agent.export_history().messages().len(), 0);
}

fn look() -> FnTool {
    FnTool::new("look", "Looks.", Parameters::empty(), |_, _| {
        Ok("seen".into())
    })
}

/// An empty synthesized answer is no answer: `None`, not `Some("")`, and no
/// empty assistant message in the history; not the narration of the
/// tool-calling message either.
#[test]
fn an_empty_synthesized_answer_is_none() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("look", json!({})).with_text("Let me look."));
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::text("")); // the synthesizer writes nothing
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(look())
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
    });
    let out = agent.run_loop("what is there?").unwrap();
    assert_eq!(out.stop_reason, StopReason::Synthesized);
    assert_eq!(out.answer, None);
    assert_eq!(agent.last_assistant_content(), None);
    let last = agent.messages().last().unwrap();
    assert_eq!(last.role, Role::Tool, "{:#?}", agent.messages());
    assert_valid_history(agent.messages());

    // A non-empty one is appended and is the answer, as before.
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::tool_call("look", json!({})));
    server.push(Reply::text("It is a cat."));
    let out = agent.run_loop("and now?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("It is a cat."));
    assert_eq!(agent.messages().last().unwrap().content, "It is a cat.");
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
}

/// An extension that keeps the context it was bound with.
struct Keep(Arc<Mutex<Option<ExtensionContext>>>);

impl Extension for Keep {
    fn bind(&mut self, ctx: &ExtensionContext) -> Result<()> {
        *self.0.lock() = Some(ctx.clone());
        Ok(())
    }

    fn system_prompt_snippets(&self) -> Vec<String> {
        vec!["<kept/>".into()]
    }
}

/// The context reaches what pikuri's `ctx.agent` reads: the model, the
/// assembled system prompt and the agent's own controls.
#[test]
fn the_extension_context_reads_the_agents_model_prompt_and_controls() {
    let server = FakeServer::start();
    let slot = Arc::new(Mutex::new(None));
    let queue = Interloper::new();
    let (agent, _rec) = agent_with(&server, |c| {
        c.step_limit(StepLimit::new(7))
            .interloper(queue.clone())
            .add_extension(Keep(Arc::clone(&slot)))
    });
    let ctx = slot.lock().clone().expect("bound");
    assert_eq!(ctx.model(), agent.model());
    assert_eq!(ctx.system_prompt().as_deref(), Some(agent.system_prompt()));
    assert!(agent.system_prompt().ends_with("<kept/>"));
    assert_eq!(ctx.step_limit().map(|s| s.max()), Some(7));
    // The same queue, not a copy.
    ctx.interloper()
        .expect("an interloper")
        .inject_user_message("from the extension")
        .unwrap();
    assert_eq!(queue.peek(), ["from the extension"]);
    drop(agent);
    assert_eq!(ctx.model(), None);
    assert!(ctx.step_limit().is_none());
}
