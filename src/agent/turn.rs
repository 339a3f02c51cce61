//! One turn, in one place: the loop driver. Each boundary of the [turn
//! diagram](crate::Agent#a-turn) is one method here, in the order a turn
//! meets it:
//!
//! 1. [`turn_start`](Agent::turn_start): the user message enters the
//!    conversation;
//! 2. [`before_request`](Agent::before_request): the cancel check,
//!    injected system messages, compaction when due;
//! 3. [`request`](Agent::request): the request, with fallback transports
//!    and the retry after a context overflow ([`send`](Agent::send) is the
//!    one call on the wire);
//! 4. [`answer`](Agent::answer): the completed message and its events;
//! 5. [`tool_call`](Agent::tool_call), for each call of the answer: the
//!    per-call controls and the approval review (the batch, its run and
//!    its answers are `batch.rs`);
//! 6. [`after_batch`](Agent::after_batch): what the
//!    [`Interloper`](crate::Interloper) holds;
//! 7. [`turn_end`](Agent::turn_end): the synthesizer on an exhausted
//!    budget, the tally, [`Event::Stopped`], the [`Outcome`].
//!
//! [`rounds`](Agent::rounds) strings 2 to 6 together. The public entry
//! points (`run.rs`) only choose where a run starts (a new message, a
//! retry, a resume, a typed turn's repair). The controls are read at the
//! points tabled in the crate docs, [Controls](crate#controls), and only
//! here (the per-call ones in `batch.rs`). What each boundary delegates is a type of its own: `Compactor`
//! (`compact.rs`), `Fallbacks` (`fallback.rs`), the approval `Gate`
//! (`approval.rs`), `TypedTurn` (`structured.rs`) and `ToolResultLimit`
//! (`tool_limit.rs`).

use std::sync::Arc;

use super::Agent;
use super::approval::Gate;
use super::compact::{Boundary, Step};
use super::outcome::Outcome;
use super::shared::Nesting;
use crate::journal::Record;
use crate::protocol::{Callbacks, Completion, Fragment, Request, RetryNotice, ToolSpecs};
use crate::{
    ChatTransport, Error, Event, FinishReason, Message, ModelSettings, Result, Role, StopReason,
};

/// How the rounds of a run ended (errors aside).
pub(super) enum End {
    /// The model answered without calling a tool, its answer ending so (a
    /// tool batch: every call answered, `ToolCalls`).
    Answered(FinishReason),
    /// An approver deferred a call: the trailing calls await the host.
    Pending,
    /// An input guard answered the message (`guarded.rs`; without the
    /// `guard` feature, only the resume of a journal guards wrote).
    #[cfg_attr(not(any(feature = "guard", feature = "journal")), allow(dead_code))]
    Blocked,
}

/// One run's state (a turn, a retry, a resume, a typed turn's repair).
#[derive(Default)]
pub(super) struct Run {
    /// Tool calls made in this run ([`Outcome::steps`]).
    pub(super) steps: u32,
    /// Reviews each call; holds the host's decisions on a resume.
    pub(super) gate: Gate,
}

/// A model switch asked for at a turn's start
/// ([`run_loop_with`](Agent::run_loop_with)): the transport, and the code
/// that checks and applies it as a pointer, so that a program that never
/// switches (`run_loop` alone) does not link the switch (its event, the
/// second probe; BENCHMARKS.md, issue 36, session 14).
pub(super) struct Switch {
    to: ChatTransport,
    apply: fn(&mut Agent, ChatTransport) -> Result<()>,
}

impl Switch {
    /// The switch to `to`.
    pub(super) fn to(to: ChatTransport) -> Switch {
        Switch {
            to,
            apply: |agent, to| {
                to.check()?;
                agent.apply_transport(to);
                Ok(())
            },
        }
    }
}

// ------------------------------------------------------------ the boundaries

impl Agent {
    /// A run started by a user message: the boundaries in order.
    pub(super) fn run_turn(&mut self, message: Message, switch: Option<Switch>) -> Result<Outcome> {
        self.ensure_open()?;
        // The question a synthesizer answers, kept only when there is one
        // (`synthesizes`).
        let question = self
            .shared
            .options
            .synthesize
            .is_some()
            .then(|| message.content.clone());
        self.turn_start(message, switch)?;
        let mut run = Run::default();
        let result = self.guarded_rounds(&mut run);
        self.turn_end(result, run.steps, question.as_deref().unwrap_or_default())
    }

    /// Boundary 1, turn start: the model switch, fresh controls, the user
    /// message appended and announced, the extensions' hooks.
    fn turn_start(&mut self, message: Message, switch: Option<Switch>) -> Result<()> {
        if message.role != Role::User {
            return Err(Error::invalid(format!(
                "a turn starts with a user message, not a {} message",
                message.role.as_str()
            )));
        }
        // An image alone is a question ("what is this?").
        if message.content.trim().is_empty() && message.images.is_empty() {
            return Err(Error::invalid("user message must not be blank"));
        }
        if let Some(Switch { to, apply }) = switch {
            apply(self, to)?;
        }
        self.begin_run();
        // Calls left pending by a deferred approval get their "not run"
        // answer first: a new message is not a decision, and the request
        // must not carry unanswered calls.
        self.answer_stale_pending();
        let message = self.guard_input(message);
        self.journal(|| Record::User {
            content: message.content.as_str().into(),
        })?;
        self.turn_start = self.messages.len();
        self.messages.push(message);
        // The message as it entered the conversation (no copy of it).
        let user_message = self.messages[self.turn_start].content.as_str();
        self.shared.emit_with(|| Event::UserTurn {
            agent: Arc::clone(&self.shared.id),
            content: user_message.to_string(),
            mid_loop: false,
        });
        let ctx = self.ctx();
        for ext in &mut self.extensions {
            ext.on_user_message(&ctx, user_message);
        }
        Ok(())
    }

    /// What every run (a turn, a retry, a resume, a repair) does first:
    /// fresh controls, a zero tally.
    pub(super) fn begin_run(&mut self) {
        // The run's events wait for the agent's first wait, its opening for
        // the first response (`listener::hub`).
        self.shared.listeners.open();
        self.synth_answer = None;
        self.guarding.reset();
        self.partial_answer.clear();
        if let Some(s) = &self.shared.step_limit {
            s.reset();
        }
        // A nested agent shares its parent's token: resetting it here would
        // lose a cancel that arrived while the parent spawned it.
        if let Some(c) = self
            .shared
            .cancellable
            .as_ref()
            .filter(|_| !self.shared.options.nesting.is_child())
        {
            c.reset();
        }
        self.shared.tally.lock().clear();
        self.budget_begin();
    }

    /// Boundaries 2 to 6, round after round, until the model answers
    /// without calling a tool (or an approver defers a call).
    pub(super) fn rounds(&mut self, run: &mut Run) -> Result<End> {
        loop {
            self.before_request()?;
            let completion = self.request()?;
            let (message, finish) = self.answer(completion)?;
            let truncated = finish == FinishReason::Length;
            // Stored before any of its tools runs: a resume never asks
            // the model for it again.
            self.journal_response(&message, finish)?;
            if message.tool_calls.is_empty() {
                self.messages.push(message);
                // Input typed while the model answered is a new question in
                // the same turn: one more round answers it.
                if self.guard_retry()? | self.after_batch() {
                    continue;
                }
                return Ok(End::Answered(finish));
            }
            let calls = message.tool_calls.clone();
            self.messages.push(message);
            if let End::Pending = self.tool_batch(&calls, truncated, run)? {
                return Ok(End::Pending);
            }
            self.journal_check()?;
            self.after_batch();
        }
    }

    /// Boundary 2, before each request: the cancel check, the system
    /// messages extensions injected since the last request, and compaction
    /// when the estimate says the request would not fit.
    fn before_request(&mut self) -> Result<()> {
        if let Some(c) = &self.shared.cancellable {
            c.check()?;
        }
        // A record an earlier boundary could not store stops the run here.
        self.journal_check()?;
        let pending = std::mem::take(&mut self.shared.state.lock().pending_system);
        for content in &pending {
            self.journal(|| Record::System {
                content: content.into(),
            })?;
        }
        self.messages
            .extend(pending.into_iter().map(Message::system));
        self.compacting(Step::BeforeRequest)?;
        self.budget_before_request()
    }

    /// Boundary 3, the request: on a failure worth another server, the
    /// next fallback transport takes the turn over; on a rejection as too
    /// long, one compaction and one retry.
    fn request(&mut self) -> Result<Completion> {
        match self.send_with_fallback() {
            // The server, not the estimate, says the history does not fit:
            // cut it to the current turn and try once more. A second
            // rejection is the error.
            Err(e) if e.is_context_overflow() => {
                if self.compacting(Step::AfterOverflow)? {
                    self.send_with_fallback()
                } else {
                    Err(e)
                }
            }
            other => other,
        }
    }

    /// One request, moved along the fallback list while it fails in a way
    /// another server may not (see `fallback.rs`).
    fn send_with_fallback(&mut self) -> Result<Completion> {
        loop {
            let err = match self.send() {
                Err(e) => e,
                ok => return ok,
            };
            let from = self.transport();
            let Some(to) = self.fallbacks.next(&from, &err) else {
                return Err(err);
            };
            // The agent stays on the fallback for later turns: the primary
            // just failed after its retries, and `run_loop_with` goes back.
            // Not journaled: a resumed agent starts on its primary again,
            // which may be back (and a fallback is another endpoint, which
            // a model name alone would not say).
            self.shared.state.lock().transport = Arc::new(to.clone());
            self.emit(Event::ModelFallback {
                agent: self.agent_id(),
                from: Box::new(from),
                to: Box::new(to),
                reason: err.to_string(),
            });
            // The probe may wait on the network.
            self.shared.listeners.hand_over();
            self.detect_and_emit_context_cap();
        }
    }

    /// The one call on the wire; deltas become events as they arrive.
    fn send(&mut self) -> Result<Completion> {
        let (transport, tool_specs) = {
            let mut st = self.shared.state.lock();
            (st.transport.clone(), st.tool_specs())
        };
        let note = self.wind_down_note();
        let shared = &self.shared;
        let options = &shared.options;
        let traceparent = options.traceparent.as_ref().and_then(|s| (s.0)());
        let hold = self.guarding.holds();
        // A typed turn sends its note and, once constrained, its schema.
        let typed = self.typed.as_ref();
        // The agent's settings over the transport's: the transport's as
        // they are when the agent sets none (no merged copy a request).
        let merged;
        let settings = if options.settings == ModelSettings::default() {
            transport.settings()
        } else {
            merged = options.settings.over(transport.settings());
            &merged
        };
        let req = Request {
            transport: &transport,
            system: Some(typed.map_or(&self.system_prompt, |t| &t.system_prompt)),
            messages: &self.messages,
            trailing_system: note.as_deref(),
            tools: tool_specs.as_deref().unwrap_or(ToolSpecs::NONE),
            settings,
            response_schema: typed.and_then(|t| t.schema.as_deref()),
            stream: options.streaming,
            replay_reasoning: options.replay_reasoning,
            prompt_caching: transport.prompt_caching(),
            split_think: options.split_think,
            extra: &options.extra,
            cancel: self.guarding.cancel().or(shared.cancellable.as_ref()),
            traceparent: traceparent.as_deref(),
        };
        let mut buf = std::mem::take(&mut self.buf);
        let agent = &shared.id;
        // What a stream cut short leaves: its text so far (for the
        // `Cancelled` event) and the latest usage a chunk reported.
        let mut partial = String::new();
        let mut partial_usage = None;
        // What the listeners are owed goes to them before the agent waits,
        // but for the run's opening, which waits for the response.
        shared.listeners.hand_over_for_request();
        let result = shared.client.chat(
            &req,
            &mut buf,
            &mut Callbacks {
                on_retry: &mut |n: &RetryNotice| {
                    // The agent sleeps before the next attempt: the
                    // opening goes out now.
                    shared.listeners.hand_over();
                    shared.emit(Event::Retrying {
                        agent: Arc::clone(agent),
                        attempt: n.attempt,
                        error: n.error.clone(),
                        wait_ms: crate::util::millis(n.wait),
                    });
                },
                on_fragment: &mut |f: Fragment<'_>| match f {
                    Fragment::Content(s) if !s.is_empty() => {
                        (!hold).then(|| shared.listeners.emit_delta(agent, false, s));
                        partial.push_str(s);
                    }
                    Fragment::Reasoning(s) if !s.is_empty() => {
                        shared.listeners.emit_delta(agent, true, s);
                    }
                    Fragment::Usage(u) => partial_usage = Some(u),
                    _ => {}
                },
                // So before each read of the stream.
                before_read: &mut || shared.listeners.hand_over(),
            },
        );
        // The agent works on the answer: its events wait for the next wait.
        shared.listeners.hold();
        self.buf = buf;
        if let Err(e) = &result {
            // A failed stream's usage still counts, when a chunk reported
            // it (most servers report it only in the last chunk); the
            // request does not count as completed.
            if let Some(u) = partial_usage {
                self.shared.tally.lock().usage += u;
                self.budget_count(Some(u), false);
            }
            // The text the listeners saw before a cancel is not kept in the
            // history (a cancel leaves no partial state there); the
            // `Cancelled` event carries it.
            if e.is_cancelled() && !hold {
                self.partial_answer = partial;
            }
            // One event per failed request (traces give it a failed span).
            self.emit(Event::RequestFailed {
                agent: self.agent_id(),
                status: e.status(),
                kind: crate::util::snake_case(&format!("{:?}", e.kind())),
                error: e.to_string(),
            });
        }
        result
    }

    /// When the budget is nearly used up, a note telling the model so.
    fn wind_down_note(&self) -> Option<String> {
        let last = self.shared.options.wind_down?;
        let remaining = self.shared.step_limit.as_ref()?.remaining();
        if remaining > last {
            return None;
        }
        Some(match remaining {
            0 => "Note: the tool-call budget for this turn is used up. Answer now from what you have, without calling tools.".to_string(),
            1 => "Note: 1 tool call remains in this turn's budget. Wrap up: use it only if essential, then answer.".to_string(),
            n => format!("Note: {n} tool calls remain in this turn's budget. Plan to wrap up and answer before they run out."),
        })
    }

    /// Boundary 4, the answer: the request counts in the run's tally; the
    /// message gets its model stamp and the tool calls recovered from its
    /// text, and is announced (`Thinking`, `Assistant`, `Tokens`). Also
    /// why it ended (cut at the length limit, a call's arguments may be cut
    /// too, which its observation says). Guards (`guarded.rs`): first the
    /// verdict of those beside the request, last the output guards; a
    /// trip of either is the error.
    fn answer(&mut self, completion: Completion) -> Result<(Message, FinishReason)> {
        self.shared.tally.lock().count(completion.usage);
        self.budget_count(completion.usage, true);
        self.guard_beside()?;
        let mut finish = completion.finish();
        let Completion {
            mut message,
            usage,
            model,
            id: response_id,
            ..
        } = completion;
        // Some servers do not name the model in the answer: the one asked
        // for is the one that wrote it.
        let model = model.or_else(|| {
            let st = self.shared.state.lock();
            st.transport.model().map(str::to_string)
        });
        // Recovery only when the server parsed no call: text next to real
        // calls is prose, not a second copy of them.
        let recover = self.shared.options.recover_tool_calls;
        if let Some(recover) = recover.filter(|_| message.tool_calls.is_empty()) {
            let tools = self.tools();
            if let Some((content, calls)) = recover(&message.content, &tools) {
                message.content = content;
                message.tool_calls = calls;
                if finish == FinishReason::Complete {
                    finish = FinishReason::ToolCalls;
                }
            }
        }
        message.model.clone_from(&model);
        message.usage = usage;
        self.shared.state.lock().found_natively(&message);
        if let Some(r) = message.reasoning.as_deref().filter(|r| !r.is_empty()) {
            self.emit_with(|| Event::Thinking {
                agent: Arc::clone(&self.shared.id),
                content: r.to_string(),
            });
        }
        if self.shows_now(&message) {
            self.emit_with(|| Event::Assistant {
                agent: Arc::clone(&self.shared.id),
                content: message.content.clone(),
                finish,
            });
        }
        self.emit_with(|| {
            let u = usage.unwrap_or_default();
            Event::Tokens {
                agent: Arc::clone(&self.shared.id),
                input: u.input,
                output: u.output,
                cached: u.cached,
                cache_creation: u.cache_creation,
                thinking: u.thinking,
                model_id: model,
                response_id,
            }
        });
        self.guard_output((message, finish))
    }

    /// Boundary 6, after a batch (or an answer): append what the
    /// [`Interloper`](crate::Interloper) holds, each announced as a
    /// mid-loop [`Event::UserTurn`]; true when anything was delivered.
    pub(super) fn after_batch(&mut self) -> bool {
        // Only here, between whole rounds: a user message must never sit
        // between a tool call and its result.
        let Some(q) = &self.shared.interloper else {
            return false;
        };
        let items = q.drain();
        let delivered = !items.is_empty();
        for content in items {
            // Checked at the next request.
            let _ = self.journal(|| Record::User {
                content: content.as_str().into(),
            });
            self.messages.push(Message::user(content.clone()));
            self.emit(Event::UserTurn {
                agent: self.agent_id(),
                content,
                mid_loop: true,
            });
        }
        delivered
    }

    /// Boundary 7, turn end (every run's): the synthesizer on an exhausted
    /// budget, the usage tally (handed to the parent of a child),
    /// `Stopped`, the listener flush, the outcome.
    pub(super) fn turn_end(
        &mut self,
        result: Result<End>,
        steps: u32,
        question: &str,
    ) -> Result<Outcome> {
        // An answer the model did not end itself is no completed run.
        let ended = |finish: FinishReason, whole| {
            let reason = if finish.is_complete() {
                whole
            } else {
                StopReason::Incomplete
            };
            (reason, finish)
        };
        let result = match result {
            Ok(End::Answered(finish)) => Ok(ended(finish, StopReason::Completed)),
            Ok(End::Pending) => Ok((StopReason::ApprovalPending, FinishReason::ToolCalls)),
            Ok(End::Blocked) => Ok((StopReason::Guardrail, FinishReason::Complete)),
            // The budget is spent but the host asked for an answer anyway:
            // a tools-free child writes it from the evidence.
            Err(e) if self.synthesizes(&e) => self
                .synthesize(question, &e)
                .map(|finish| ended(finish, StopReason::Synthesized)),
            Err(e) => Err(e),
        };
        // A run that could not keep its journal fails, even when the model
        // answered: the journal no longer says where the run is.
        let result = match self.journal(|| Record::turn_end(&result)) {
            Err(e) if result.is_ok() => Err(e),
            _ => result,
        };
        let reason = match &result {
            Ok((r, _)) => *r,
            // Announced once, here, after the "cancelled" observations, so
            // a listener sees the cancel where the turn actually ended. A
            // helper child (the synthesizer, the compactor) leaves it to its
            // parent, whose turn the same cancel ends: one `Cancelled` for
            // the one turn the host started.
            Err(Error::Cancelled) => {
                let partial_answer = std::mem::take(&mut self.partial_answer);
                if self.shared.options.nesting != Nesting::Helper {
                    self.emit(Event::Cancelled {
                        agent: self.agent_id(),
                        partial_answer,
                    });
                }
                StopReason::Cancelled
            }
            Err(Error::StepLimitExceeded { .. }) => StopReason::StepLimit,
            Err(Error::BudgetExceeded { .. }) => StopReason::Budget,
            Err(Error::Guardrail { .. }) => StopReason::Guardrail,
            Err(_) => StopReason::Error,
        };
        self.last_stop = Some(reason);
        let tally = self.shared.settle_tally();
        self.total_usage += tally.usage;
        // `Outcome::spend` needs the `budgets` feature.
        #[cfg_attr(not(feature = "budgets"), allow(unused_variables))]
        let spend = self.budget_end();
        self.emit_with(|| Event::Stopped {
            agent: Arc::clone(&self.shared.id),
            reason,
            usage: tally.usage,
        });
        // Every event of the run is handled before the host sees its end.
        self.shared.listeners.flush();
        result.map(|(stop_reason, finish)| Outcome {
            stop_reason,
            finish,
            answer: self.last_assistant_content(),
            steps,
            usage: tally.usage,
            requests: tally.requests,
            #[cfg(feature = "budgets")]
            spend: Box::new(spend),
            pending_approvals: if stop_reason == StopReason::ApprovalPending {
                self.pending_approvals()
            } else {
                Vec::new()
            },
        })
    }
}

// ------------------------------------------------------------ what the boundaries call

impl Agent {
    /// Switch to `to` when it differs structurally from the current
    /// transport (a model switch: the history survives).
    ///
    /// Another model or endpoint is always a switch, and so is another
    /// explicit context window, or none where the current transport had
    /// one (the host drops its override: the window is detected again).
    /// The same endpoint and model, neither with an explicit window, is no
    /// switch: the detected cap stays (no second probe) and `to` is used
    /// from now on (its model settings, its prompt caching).
    fn apply_transport(&mut self, to: ChatTransport) {
        let from = self.transport();
        if from == to {
            return;
        }
        if from.same_endpoint(&to)
            && to.context_window().is_none()
            && from.context_window().is_none()
        {
            self.shared.state.lock().transport = Arc::new(to);
            return;
        }
        self.shared.state.lock().transport = Arc::new(to.clone());
        let _ = self.journal(|| Record::ModelSwitched {
            model: to.model().map(Into::into),
        });
        self.emit(Event::ModelSwitched {
            agent: self.agent_id(),
            from: Box::new(from),
            to: Box::new(to),
        });
        self.detect_and_emit_context_cap();
    }

    /// One step of the [`Compactor`](super::compact::Compactor) at a boundary of this turn; whether
    /// it compacted (then [`Event::Compacted`] says what changed).
    pub(super) fn compacting(&mut self, step: Step) -> Result<bool> {
        let turn = Boundary {
            shared: &self.shared,
            messages: &mut self.messages,
            system_prompt: self
                .typed
                .as_ref()
                .map_or(&self.system_prompt, |t| &t.system_prompt),
            turn_start: &mut self.turn_start,
        };
        self.compactor.at(turn, step)
    }
}
