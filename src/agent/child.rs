//! The one constructor of child agents: the sub-agents of
//! [`SubAgents`](crate::subagent::SubAgents) and the step-exhaustion
//! [`Synthesizer`](crate::subagent::Synthesizer) are both built here, so the rule of
//! what a child inherits is written once, in this table. The synthesizer's
//! run (`Agent::synthesize`, the step-exhaustion rescue at a turn's end)
//! is here too.
//!
//! | What | The child gets |
//! |---|---|
//! | transport | the parent's current one, with the parent's resolved context window (no second probe) |
//! | HTTP client | the parent's (its limits, connection pool and cancel hooks) |
//! | [`Cancellable`](crate::Cancellable) | the same instance, never reset by the child: one cancel stops the whole tree |
//! | [`Approver`](crate::approval::Approver) | the same instance: the child's tool calls are reviewed like the parent's (a deferral denies: a child cannot pause) |
//! | usage accounting | its own per run; at the end of each run the child adds its tally (tokens, requests) to the parent's running turn |
//! | [`Budget`](crate::Budget) | the parent's count, live: the child's requests and tool calls count into the parent's run and are stopped by its limits |
//! | listeners | derived for the child's id ([`Listener::for_sub_agent`](crate::Listener::for_sub_agent)) |
//! | loop options (streaming, think tags, reasoning replay, tool-call recovery, wind-down, parallel tools, [`TrifectaPolicy`](crate::tool::TrifectaPolicy)) | as the parent; the trifecta check runs on the child's own tools; its nesting says it is a sub-agent (it announces its own cancel) or a helper (it leaves that to the parent) |
//! | model settings, raw request fields | as the parent (a request without tools leaves the tool-steering ones out: servers reject them there) |
//! | [`StepLimit`](crate::StepLimit) | its own: `max_steps` of the spec |
//! | tools | only those the spec names (taken from both of the parent's pools) |
//! | system prompt | the spec's |
//! | history, [`Interloper`](crate::Interloper), extensions | none |

use std::sync::Arc;

use super::Agent;
use super::builder::Configurator;
use super::shared::{Nesting, Shared};
use crate::journal::Record;
use crate::{Error, Event, FinishReason, Message, OnExhausted, Result, StepLimit, Tool};

/// What differs between children: everything else is inherited by the table
/// in the module doc.
pub(crate) struct ChildSpec {
    /// The child's id, e.g. `"researcher 0"` or `"synthesizer"`.
    pub(crate) id: String,
    pub(crate) system_prompt: String,
    pub(crate) max_steps: u32,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    /// Whether a cancel that ends the child's run emits its own
    /// [`Event::Cancelled`](crate::Event::Cancelled): a sub-agent does (the
    /// host may render it apart), a helper child (the synthesizer, the
    /// compactor) does not, since its cancel is the parent's turn's, which
    /// the parent announces.
    pub(crate) announces_cancel: bool,
}

/// The child id for `role` under a parent whose id is `parent`: a main agent's
/// children are named by role alone, a sub-agent's are prefixed with its id.
pub(crate) fn child_id(parent: &str, role: &str) -> String {
    if parent.is_empty() {
        role.to_string()
    } else {
        format!("{parent} {role}")
    }
}

/// Build a child agent of `parent`; see the module doc for what it
/// inherits.
pub(crate) fn spawn(parent: &Shared, spec: ChildSpec) -> Result<Agent> {
    let (transport, cap) = {
        let st = parent.state.lock();
        (st.transport.clone(), st.context_cap)
    };
    let mut cfg = Configurator::new(transport.with_context_window(cap))
        .system_prompt(spec.system_prompt)
        .id(spec.id.clone())
        .step_limit(StepLimit::try_new(spec.max_steps, OnExhausted::Raise)?)
        .listener_list(parent.listeners.for_sub_agent(&spec.id));
    cfg.client = Some(parent.client.clone());
    cfg.cancellable.clone_from(&parent.cancellable);
    cfg.approver.clone_from(&parent.approver);
    cfg.parent_tally = Some(Arc::clone(&parent.tally));
    cfg.meter = Some(Arc::clone(&parent.meter));
    cfg.options = parent.options.clone();
    // A child must not reset the shared Cancellable at its turn start: that
    // would swallow a cancel that raced with the spawn.
    cfg.options.nesting = if spec.announces_cancel {
        Nesting::SubAgent
    } else {
        Nesting::Helper
    };
    cfg.tools = spec.tools;
    cfg.build()
}

/// Run a tools-free child (a [`StepLimit`] of 1) with id `role` under
/// `parent` on `prompt`; its answer, empty when it wrote none.
pub(crate) fn ask(
    parent: &Shared,
    role: &str,
    system_prompt: &str,
    prompt: &str,
) -> Result<String> {
    let mut child = spawn(
        parent,
        ChildSpec {
            id: child_id(&parent.id, role),
            system_prompt: system_prompt.to_string(),
            max_steps: 1,
            tools: Vec::new(),
            announces_cancel: false,
        },
    )?;
    let result = child.run_loop(prompt);
    let text = child.last_assistant_content().unwrap_or_default();
    child.close();
    result?;
    Ok(text)
}

impl Agent {
    /// The step-exhaustion rescue: a tools-free child answers from the
    /// evidence; its answer, when it wrote one, is appended and becomes the
    /// turn's answer.
    pub(super) fn synthesize(&mut self, question: &str, err: &Error) -> Result<FinishReason> {
        let (max, spent) = match err {
            Error::StepLimitExceeded { max } => (*max, format!("step budget of {max} tool calls")),
            // The synthesizer's one request past the limit (`Budget`).
            Error::BudgetExceeded { limit, .. } => {
                self.shared.meter.grant_one();
                (0, format!("budget ({limit} limit)"))
            }
            _ => (0, "budget".to_string()),
        };
        // A resume after a crash from here writes the answer again, not
        // a new round with a fresh budget.
        self.journal(&Record::Synthesizing { max })?;
        let reason = format!("{spent} exhausted; answering from the evidence gathered");
        self.emit(Event::FallbackNotice {
            agent: self.agent_id(),
            reason,
        });
        let prompt = self.synthesizer.build_prompt(&self.messages, question);
        let mut synth = spawn(
            &self.shared,
            ChildSpec {
                id: child_id(self.id(), "synthesizer"),
                system_prompt: self.synthesizer.system_prompt().to_string(),
                max_steps: 1,
                tools: Vec::new(),
                announces_cancel: false,
            },
        )?;
        // A typed turn's answer is typed even when the synthesizer writes it.
        if let Some(spec) = self.typed.as_ref().map(|t| Arc::clone(&t.spec)) {
            synth.begin_typed(&spec);
            synth.constrain();
        }
        let finish = synth.run_loop(&prompt)?.finish;
        let answer = synth.last_assistant_content();
        synth.close();
        // An empty answer is no answer: nothing is appended (an empty
        // assistant message is no evidence for the next turn), and
        // `last_assistant_content` says `None`, not an earlier message.
        if let Some(answer) = &answer {
            let mut m = Message::assistant(answer.clone());
            m.model = self.model();
            // Checked at the turn's end.
            let _ = self.journal_response(&m, finish);
            self.messages.push(m);
        }
        self.synth_answer = Some(answer.unwrap_or_default());
        Ok(finish)
    }
}
