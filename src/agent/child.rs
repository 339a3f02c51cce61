//! The one constructor of child agents: the sub-agents of
//! [`SubAgents`](crate::subagent::SubAgents) and the step-exhaustion
//! [`Synthesizer`](crate::subagent::Synthesizer) are both built here, so the rule of
//! what a child inherits is written once, in this table. The synthesizer's
//! run (`Agent::synthesize`, the step-exhaustion rescue at a turn's end)
//! is here too, and the [`Configurator`] setters that switch on what runs
//! a child (`step_limit`, `budget`, `compaction`): each stores a function
//! pointer to it, so a program that calls none of them does not link the
//! children (BENCHMARKS.md, issue 36, session 13).
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

use std::any::Any;
use std::sync::Arc;

use super::Agent;
use super::builder::Configurator;
use super::compact::{Compaction, Engine};
use super::shared::{Nesting, Rescue, Shared};
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
    let (transport, cap, tool_path) = {
        let st = parent.state.lock();
        (
            crate::ChatTransport::clone(&st.transport),
            st.context_cap,
            st.tool_path,
        )
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
    // The child's tools are the parent's: so is the path that runs them.
    cfg.tools = spec.tools;
    cfg.tool_path = tool_path;
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

/// [`Rescue`]: the one step-exhaustion rescue.
pub(crate) const RESCUE: Rescue = Rescue(rescue);

fn rescue(agent: &mut dyn Any, question: &str, err: &Error) -> Result<FinishReason> {
    match agent.downcast_mut::<Agent>() {
        Some(agent) => agent.synthesize_now(question, err),
        None => Err(Error::invalid("the rescue runs on an agent")),
    }
}

/// [`Engine`]: compaction, with the compactor child for its summaries.
pub(crate) const COMPACTION: Engine = Engine::new(ask_compactor);

/// The compactor child's run.
fn ask_compactor(shared: &Shared, system_prompt: &str, prompt: &str) -> Result<String> {
    ask(shared, "compactor", system_prompt, prompt)
}

/// The setters that switch on what runs a child: each stores the pointer
/// to it, so that a program that calls none of them does not link the
/// children (they live here, above `builder.rs`, which cannot name this
/// file).
impl Configurator {
    /// The step budget (none by default: the agent may loop indefinitely).
    pub fn step_limit(mut self, limit: StepLimit) -> Configurator {
        self.step_limit = Some(limit);
        self.options.synthesize = Some(RESCUE);
        self
    }

    /// The spending limits of each run (none by default: a run counts its
    /// [`Spend`](crate::Spend) and never stops for it); see [`Budget`](crate::Budget).
    #[cfg(feature = "budgets")]
    pub fn budget(mut self, budget: crate::Budget) -> Configurator {
        if let Some(problem) = budget.misconfigured(self.transport.model()) {
            self.errors.push(problem);
        }
        self.budget = budget;
        self.options.synthesize = Some(RESCUE);
        self
    }

    /// Compact the conversation automatically when it approaches the
    /// context window, and recover from a request the server rejects as
    /// too long (off by default; see [`Compaction`] for the rules and an
    /// example). Not inherited by sub-agents.
    pub fn compaction(mut self, compaction: Compaction) -> Configurator {
        self.compaction = Some((compaction, COMPACTION));
        self
    }
}

impl Agent {
    /// The step-exhaustion rescue (see `synthesize_now`), when a limit that
    /// can ask for it was set ([`Agent::synthesizes`] says so first).
    pub(super) fn synthesize(&mut self, question: &str, err: &Error) -> Result<FinishReason> {
        match self.shared.options.synthesize {
            Some(Rescue(run)) => run(self, question, err),
            None => Err(Error::invalid("no limit asks for the synthesizer")),
        }
    }

    /// The step-exhaustion rescue: a tools-free child answers from the
    /// evidence; its answer, when it wrote one, is appended and becomes the
    /// turn's answer.
    fn synthesize_now(&mut self, question: &str, err: &Error) -> Result<FinishReason> {
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
        self.journal(|| Record::Synthesizing { max })?;
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
