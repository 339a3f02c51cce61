//! The tool batch, boundary 5 of the [turn diagram](crate::Agent#a-turn):
//! the calls of one answer, each announced, ticked and reviewed
//! ([`tool_call`](Agent::tool_call)), run in order or (parallel mode)
//! together, and answered with one tool message each, cut by the
//! [`ToolResultLimit`](crate::compaction::ToolResultLimit). Whatever stops
//! the batch (the budget, a cancel, a guard), every call still gets its
//! answer ([`stop_batch`](Agent::stop_batch)): the history stays valid. The
//! loop that calls it is `turn.rs`; the review is the approval `Gate`
//! (`approval.rs`). What runs a registered tool's call (its validation and
//! review, its run, the parallel threads) is reached through the agent's
//! [`ToolPath`], whose one value is named here: an agent without tools
//! answers every call as an unknown tool without any of it.

use std::borrow::Cow;
use std::sync::Arc;

use super::Agent;
use super::approval::{self, NOT_APPROVED};
use super::builder;
use super::shared::{Gated, Observation, Prepared, Shared, State, ToolPath, Verdict};
use super::trifecta;
use super::turn::{End, Run};
use crate::journal::Record;
use crate::protocol::is_sendable;
use crate::{Error, Event, FinishReason, Image, Message, Result, Tool, ToolCall};

/// Observation for calls left unanswered when the budget ran out.
const NOT_RUN_BUDGET: &str = "Error: not run: step budget exhausted";
/// Observation for calls left unanswered when the run was cancelled.
const NOT_RUN_CANCELLED: &str = "Error: not run: cancelled by the user";
/// Observation, on a journal's resume, for a call that started before the
/// crash and has no result, of a tool not declared idempotent.
const INTERRUPTED: &str = "Error: interrupted: the run stopped while this call ran, so its effect is unknown; it was not run again (the tool is not idempotent)";

impl Agent {
    /// The answer's tool calls, each through [`tool_call`](Agent::tool_call).
    /// Every call gets a tool message, even when the batch stops early,
    /// except the calls left pending by a deferred approval (`End::Pending`).
    pub(super) fn tool_batch(
        &mut self,
        calls: &[ToolCall],
        truncated: bool,
        run: &mut Run,
    ) -> Result<End> {
        self.tool_batch_resumed(calls, &[], truncated, run)
    }

    /// [`tool_batch`](Self::tool_batch) on a journal's resume: the calls
    /// whose ids are in `interrupted` are not run; they get the
    /// [`INTERRUPTED`] observation in their place in the batch, so the
    /// results stay in call order (parallel mode included).
    pub(super) fn tool_batch_resumed(
        &mut self,
        calls: &[ToolCall],
        interrupted: &[&str],
        truncated: bool,
        run: &mut Run,
    ) -> Result<End> {
        let (tools, path) = {
            let mut st = self.shared.state.lock();
            (st.callable(), st.tool_path)
        };
        let mut gated: Gated<'_> = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            // Neither announced nor ticked again: it was, before the cut.
            let verdict = if interrupted.contains(&call.id.as_str()) {
                Ok(Verdict::Go(Prepared::Done(INTERRUPTED.to_string())))
            } else {
                self.tool_call(&tools, path, call, truncated, run)
            };
            match verdict {
                Err(e) => {
                    self.stop_batch(gated, call, &calls[i + 1..], interrupted, &e);
                    // What the user typed while the batch ran enters where
                    // a whole batch would have put it: before the
                    // synthesizer reads the evidence, not after the next
                    // turn's first answer.
                    self.after_batch();
                    return Err(e);
                }
                // The calls approved before it still run; it and the rest
                // stay unanswered for the host to decide.
                Ok(Verdict::Defer) => {
                    self.run_gated(gated);
                    return Ok(End::Pending);
                }
                // In parallel mode every call is reviewed first, then the
                // approved ones run together.
                Ok(Verdict::Go(prepared)) if self.shared.options.parallel_tools => {
                    gated.push((call, prepared));
                }
                Ok(Verdict::Go(prepared)) => {
                    let (out, images) = run_prepared(&self.shared, call, prepared);
                    self.answer_call_with(call, out, images, true);
                }
            }
        }
        self.run_gated(gated);
        self.guard_stopped()
            .map(|()| End::Answered(FinishReason::ToolCalls))
    }

    /// Boundary 5, one tool call: announced ([`Event::ToolCall`], and the
    /// listeners shown it before anyone decides on it), then the per-call
    /// controls in the documented order (`StepLimit::tick`, then
    /// `Cancellable::check`), then the review.
    fn tool_call(
        &mut self,
        tools: &[Arc<dyn Tool>],
        path: Option<ToolPath>,
        call: &ToolCall,
        truncated: bool,
        run: &mut Run,
    ) -> Result<Verdict> {
        self.emit(Event::ToolCall {
            agent: self.agent_id(),
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: approval::parse_arguments(&call.arguments),
        });
        // The listeners show the call before it is reviewed or run, and
        // get what the tool or the approver emits as it comes.
        self.shared.listeners.hand_over();
        if let Some(s) = &self.shared.step_limit {
            s.tick()?;
        }
        self.budget_tool_call()?;
        if let Some(c) = &self.shared.cancellable {
            c.check()?;
        }
        run.steps += 1;
        // A deferred tool not found yet does not run (`tool_search`).
        if let Some(note) = self.shared.state.lock().not_found_yet(&call.name) {
            return Ok(Verdict::Go(Prepared::Done(note)));
        }
        self.guard_tool_input(call, |a| {
            run.gate.review(&a.shared, tools, path, call, truncated)
        })
    }

    /// A batch stopped at `call` by `err` (the budget or a cancel): every
    /// call not run gets its "not run" observation, so the history stays
    /// valid (a call of `rest` in `interrupted` keeps its "interrupted"
    /// one: it may have run before the cut).
    fn stop_batch(
        &mut self,
        gated: Gated<'_>,
        call: &ToolCall,
        rest: &[ToolCall],
        interrupted: &[&str],
        err: &Error,
    ) {
        let note = match err {
            e if e.is_cancelled() => NOT_RUN_CANCELLED,
            Error::Guardrail { .. } => crate::guard::NOT_RUN,
            e if e.kind() == crate::ErrorKind::Budget => "Error: not run: budget exhausted",
            _ => NOT_RUN_BUDGET,
        };
        // Calls already gated in parallel mode have not run either; a
        // denied one keeps its denial.
        for (c, p) in gated {
            let out = match p {
                Prepared::Done(observation) => observation,
                Prepared::Ready(_) => note.to_string(),
            };
            self.answer_call(c, out, true);
        }
        self.answer_call(call, note.to_string(), true);
        // The rest were never announced: answered without a ToolResult,
        // except an interrupted one, answered as in a batch not stopped.
        for c in rest {
            if interrupted.contains(&c.id.as_str()) {
                self.answer_call(c, INTERRUPTED.to_string(), true);
            } else {
                self.answer_call(c, note.to_string(), false);
            }
        }
    }

    /// Run the calls gated in parallel mode concurrently; answer in order.
    /// Only an approved call runs anything: without one (no tool
    /// registered, every call denied or invalid), the observations are
    /// answered here.
    fn run_gated(&mut self, gated: Gated<'_>) {
        let path = gated.iter().find_map(|(_, p)| match p {
            Prepared::Ready(r) => Some(r.path),
            Prepared::Done(_) => None,
        });
        let outputs = match path {
            Some(path) => (path.run_parallel)(&self.shared, gated),
            None => gated
                .into_iter()
                .map(|(call, p)| (call, run_prepared(&self.shared, call, p)))
                .collect(),
        };
        for (call, (out, images)) in outputs {
            self.answer_call_with(call, out, images, true);
        }
    }

    /// Append a call's tool message, cut to the [`ToolResultLimit`](crate::compaction::ToolResultLimit);
    /// `emit`: announce it as [`Event::ToolResult`].
    pub(super) fn answer_call(&mut self, call: &ToolCall, content: String, emit: bool) {
        self.answer_call_with(call, content, Vec::new(), emit);
    }

    /// [`answer_call`](Self::answer_call) with the images the tool attached.
    fn answer_call_with(
        &mut self,
        call: &ToolCall,
        content: String,
        images: Vec<Image>,
        emit: bool,
    ) {
        // The call is done: the agent works again (see `begin_run`).
        self.shared.listeners.hold();
        let content = self.guard_tool_output(call, content);
        let content = self.tool_limit.apply(content, self.context_window_cap());
        if emit {
            self.emit(Event::ToolResult {
                agent: self.agent_id(),
                id: call.id.clone(),
                name: call.name.clone(),
                content: content.clone(),
            });
        }
        // A failed write is kept by the journal and stops the run at the
        // batch's end; the history stays valid meanwhile.
        let _ = self.journal(|| Record::ToolResult {
            call_id: call.id.as_str().into(),
            content: content.as_str().into(),
            images: images.as_slice().into(),
        });
        let mut answer = Message::tool(call.id.clone(), content);
        answer.images = images;
        self.messages.push(answer);
        // Answered, so the observation now tells the model what was wrong
        // with the arguments: the history keeps `{}` instead of text a
        // strict server would reject in every later request.
        if !is_sendable(&call.arguments) {
            self.repair_arguments(&call.id);
        }
    }

    /// Replace the arguments of the answered call `id` with `{}` in the
    /// assistant message that holds it (searched from the end: it is in the
    /// current round, or a resumed one).
    fn repair_arguments(&mut self, id: &str) {
        let held = self
            .messages
            .iter_mut()
            .rev()
            .flat_map(|m| m.tool_calls.iter_mut())
            .find(|c| c.id == id);
        if let Some(c) = held {
            c.arguments = "{}".to_string();
        }
    }

    /// Before a new user message: answer the calls still pending, so the
    /// next request is valid. Each gets its [`Event::ToolResult`].
    pub(super) fn answer_stale_pending(&mut self) {
        let stale: Vec<ToolCall> = approval::unanswered(&self.messages)
            .into_iter()
            .cloned()
            .collect();
        for call in &stale {
            self.emit(Event::ToolResult {
                agent: self.agent_id(),
                id: call.id.clone(),
                name: call.name.clone(),
                content: NOT_APPROVED.to_string(),
            });
            let _ = self.journal(|| Record::ToolResult {
                call_id: call.id.as_str().into(),
                content: NOT_APPROVED.into(),
                images: Cow::Borrowed(&[]),
            });
            self.messages
                .push(Message::tool(call.id.clone(), NOT_APPROVED.to_string()));
        }
    }
}

/// Run a prepared call (an approved one through its path): the observation
/// for its tool message and the images the tool attached.
fn run_prepared(shared: &Shared, call: &ToolCall, prepared: Prepared) -> Observation {
    match prepared {
        Prepared::Done(observation) => (observation, Vec::new()),
        Prepared::Ready(ready) => (ready.path.run)(shared, call, ready),
    }
}

/// [`ToolPath::run_parallel`]: the gated calls on scoped threads, one each.
fn run_parallel<'c>(shared: &Shared, gated: Gated<'c>) -> Vec<(&'c ToolCall, Observation)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = gated
            .into_iter()
            .map(|(call, p)| (call, s.spawn(move || run_prepared(shared, call, p))))
            .collect();
        handles
            .into_iter()
            .map(|(call, h)| {
                let out = h
                    .join()
                    .unwrap_or_else(|_| ("Error: the tool panicked".to_string(), Vec::new()));
                (call, out)
            })
            .collect()
    })
}

impl ToolPath {
    /// The one tool path, stored by what registers a tool (see
    /// [`ToolPath`]); named here, the file that can name each part.
    pub(crate) const ON: ToolPath = ToolPath {
        review: approval::review_tool,
        run: approval::run_ready,
        run_parallel,
        trifecta: trifecta::check,
        names: builder::tool_names,
        specs: State::encode_tools,
    };
}
