//! The private loop driver: one function per boundary. Reads the controls at
//! the points tabled in [`control`](crate::control) only.

use std::sync::Arc;

use serde_json::Value;

use super::approval::{Decisions, Prepared, Verdict, run_prepared, take_decision};
use super::child::{ChildSpec, child_id};
use super::{Agent, Outcome};
use crate::protocol::{Completion, Fragment, Request, RetryNotice};
use crate::{
    ChatTransport, Error, Event, Message, OnExhausted, Result, Role, StopReason, ToolCall,
};

/// Observation for calls left unanswered when the budget ran out.
pub(crate) const NOT_RUN_BUDGET: &str = "Error: not run: step budget exhausted";
/// Observation for calls left unanswered when the run was cancelled.
pub(crate) const NOT_RUN_CANCELLED: &str = "Error: not run: cancelled by the user";

/// How the rounds of a run ended (errors aside).
pub(super) enum End {
    /// The model answered without calling a tool.
    Answered,
    /// An approver deferred a call: the trailing calls await the host.
    Pending,
}

impl Agent {
    /// Run one user turn to completion; see the [turn diagram](crate::Agent#a-turn)
    /// for the sequence and the events.
    ///
    /// # Errors
    ///
    /// After any error the history is valid (every tool call answered) and
    /// the agent takes the next turn. What it holds, per error:
    ///
    /// | Error | The history afterwards | To go on |
    /// |---|---|---|
    /// | [`Error::InvalidInput`] (blank message) | unchanged, no event | fix the message |
    /// | [`Error::Http`], [`Error::Transport`], [`Error::Timeout`], [`Error::Protocol`], [`Error::Truncated`] | the user message, then every round completed before the failure (assistant messages, tool results, system injections); nothing of the failed request | [`retry_turn`](Agent::retry_turn): the same question, sent once |
    /// | [`Error::Cancelled`] (after [`Event::Cancelled`]) | as above, plus a "cancelled" observation for each call not run | a new `run_loop`, or `retry_turn` to resume |
    /// | [`Error::StepLimitExceeded`] (under [`OnExhausted::Raise`]) | as above, plus a "not run" observation for each call over budget | `run_loop("continue")` or `retry_turn`: either gets a fresh budget |
    /// | any of these from the synthesizer (under [`OnExhausted::Synthesize`]) | as for the step limit: the synthesizer's own exchange is not part of it | `retry_turn` |
    ///
    /// Calling `run_loop` again with the same text after a failure sends the
    /// question twice (the first copy is still in the history, unanswered);
    /// [`retry_turn`](Agent::retry_turn) is the way to retry.
    pub fn run_loop(&mut self, user_message: &str) -> Result<Outcome> {
        self.run_turn(user_message, None)
    }

    /// Like [`run_loop`](Agent::run_loop), but first switch to `transport`
    /// when it differs structurally from the current one: the history
    /// survives, [`Event::ModelSwitched`] then [`Event::ContextCap`] are
    /// emitted and the context window is detected again.
    pub fn run_loop_with(
        &mut self,
        user_message: &str,
        transport: ChatTransport,
    ) -> Result<Outcome> {
        self.run_turn(user_message, Some(transport))
    }

    /// Run the latest turn again, from where it failed, without adding the
    /// user's message a second time: after an HTTP error, a timeout or a
    /// cancel, this is the retry that keeps the question once in the history
    /// (calling [`run_loop`](Agent::run_loop) again with the same text would
    /// send it twice).
    ///
    /// The controls are reset as at a turn start (a fresh [`StepLimit`](crate::StepLimit)
    /// budget; the [`Cancellable`](crate::Cancellable) unless this is a child
    /// agent), then the loop continues from the history as it stands: a
    /// round that completed (a tool that ran) is not repeated. No
    /// [`Event::UserTurn`] is emitted (nothing entered the conversation) and
    /// extensions' `on_user_message` hooks do not run again; the turn ends
    /// with [`Event::Stopped`] as every run does. The synthesizer, if it
    /// runs, gets the last user message as the question. The
    /// [`Outcome::steps`] count this run's tool calls only.
    ///
    /// This also resumes a loaded [`History`](crate::History) that ends with
    /// an unanswered user message.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when there is nothing to retry: the
    /// conversation is empty or ends with an assistant message (the last turn
    /// was answered). Otherwise as [`run_loop`](Agent::run_loop).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, HttpConfig};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::status(503, "loading model"));
    /// let mut agent = Agent::builder(server.transport())
    ///     .http(HttpConfig::default().with_max_retries(0))
    ///     .build()?;
    /// assert_eq!(agent.run_loop("Hello?").unwrap_err().status(), Some(503));
    ///
    /// server.push(Reply::text("Hi!"));
    /// let outcome = agent.retry_turn()?;
    /// assert_eq!(outcome.answer.as_deref(), Some("Hi!"));
    /// // The retried request carries the question once.
    /// let sent = server.chat_requests()[1].messages();
    /// assert_eq!(sent.len(), 1);
    /// assert_eq!(sent[0]["content"], "Hello?");
    /// assert!(agent.retry_turn().is_err()); // answered: nothing to retry
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn retry_turn(&mut self) -> Result<Outcome> {
        match self.messages.last() {
            None => {
                return Err(Error::invalid(
                    "nothing to retry: the conversation is empty",
                ));
            }
            Some(m) if m.role == Role::Assistant => {
                return Err(Error::invalid(
                    "nothing to retry: the conversation ends with an assistant message",
                ));
            }
            Some(_) => {}
        }
        let question = self.last_user_message();
        self.begin_run();
        let mut steps = 0u32;
        let result = self.rounds(&mut steps);
        self.finish_run(result, steps, &question)
    }

    /// The content of the latest user message (the question a retried or
    /// resumed run answers, and the synthesizer's question).
    pub(super) fn last_user_message(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.clone())
            .unwrap_or_default()
    }

    fn run_turn(
        &mut self,
        user_message: &str,
        transport: Option<ChatTransport>,
    ) -> Result<Outcome> {
        if user_message.trim().is_empty() {
            return Err(Error::invalid("user message must not be blank"));
        }
        if let Some(t) = transport {
            self.apply_transport(t);
        }
        self.begin_run();
        // Calls left pending by a deferred approval get their "not run"
        // answer first: a new message is not a decision.
        self.answer_stale_pending();
        self.turn_start = self.messages.len();
        self.messages.push(Message::user(user_message));
        self.emit(Event::UserTurn {
            agent: self.agent_id(),
            content: user_message.to_string(),
            mid_loop: false,
        });
        let ctx = self.ctx.clone();
        for ext in &mut self.extensions {
            ext.on_user_message(&ctx, user_message);
        }

        let mut steps = 0u32;
        let result = self.rounds(&mut steps);
        self.finish_run(result, steps, user_message)
    }

    /// What every run (a turn, a resume) does first: fresh controls, a zero
    /// tally.
    pub(super) fn begin_run(&mut self) {
        // The run's events wait for the agent's first wait (`listener::hub`).
        self.shared.listeners.hold();
        self.synth_answer = None;
        if let Some(s) = &self.step_limit {
            s.reset();
        }
        // A nested agent shares its parent's token: resetting it here would
        // lose a cancel that arrived while the parent spawned it.
        if let Some(c) = self
            .shared
            .cancellable
            .as_ref()
            .filter(|_| !self.options.nested)
        {
            c.reset();
        }
        self.shared.tally.lock().clear();
    }

    /// What every run does last: the synthesizer on an exhausted budget,
    /// the usage tally (handed to the parent of a child), `Stopped`, the
    /// listener flush, the outcome.
    pub(super) fn finish_run(
        &mut self,
        result: Result<End>,
        steps: u32,
        user_message: &str,
    ) -> Result<Outcome> {
        let result = match result {
            Ok(End::Answered) => Ok(StopReason::Completed),
            Ok(End::Pending) => Ok(StopReason::ApprovalPending),
            Err(Error::StepLimitExceeded { max })
                if self
                    .step_limit
                    .as_ref()
                    .is_some_and(|s| s.on_exhausted() == OnExhausted::Synthesize) =>
            {
                self.synthesize(user_message, max)
                    .map(|()| StopReason::Synthesized)
            }
            Err(e) => Err(e),
        };
        let reason = match &result {
            Ok(r) => *r,
            Err(Error::Cancelled) => {
                self.emit(Event::Cancelled {
                    agent: self.agent_id(),
                });
                StopReason::Cancelled
            }
            Err(Error::StepLimitExceeded { .. }) => StopReason::StepLimit,
            Err(_) => StopReason::Error,
        };
        self.last_stop = Some(reason);
        let tally = self.shared.settle_tally();
        self.total_usage += tally.usage;
        self.emit(Event::Stopped {
            agent: self.agent_id(),
            reason,
            usage: tally.usage,
        });
        self.shared.listeners.flush();
        result.map(|stop_reason| Outcome {
            stop_reason,
            answer: self.last_assistant_content(),
            steps,
            usage: tally.usage,
            requests: tally.requests,
            pending_approvals: if stop_reason == StopReason::ApprovalPending {
                self.pending_approvals()
            } else {
                Vec::new()
            },
        })
    }

    fn apply_transport(&mut self, to: ChatTransport) {
        let from = self.transport();
        if from == to || (from.same_endpoint(&to) && to.context_window().is_none()) {
            return;
        }
        self.shared.state.lock().transport = to.clone();
        self.emit(Event::ModelSwitched {
            agent: self.agent_id(),
            from,
            to,
        });
        self.detect_and_emit_context_cap();
    }

    /// Completion rounds until the model answers without tool calls.
    pub(super) fn rounds(&mut self, steps: &mut u32) -> Result<End> {
        loop {
            if let Some(c) = &self.shared.cancellable {
                c.check()?;
            }
            self.take_pending_system();
            let completion = self.guarded_request()?;
            self.shared.tally.lock().count(completion.usage);
            let truncated = completion.finish_reason.as_deref() == Some("length");
            let message = self.finish_message(completion);
            if message.tool_calls.is_empty() {
                self.messages.push(message);
                if self.deliver_injections() {
                    continue;
                }
                return Ok(End::Answered);
            }
            let calls = message.tool_calls.clone();
            self.messages.push(message);
            if let End::Pending = self.tool_batch(&calls, truncated, steps, &mut Vec::new())? {
                return Ok(End::Pending);
            }
            self.deliver_injections();
        }
    }

    fn take_pending_system(&mut self) {
        let pending = std::mem::take(&mut self.shared.state.lock().pending_system);
        self.messages
            .extend(pending.into_iter().map(Message::system));
    }

    /// Append what the Interloper holds; true when anything was delivered.
    pub(super) fn deliver_injections(&mut self) -> bool {
        let Some(q) = &self.interloper else {
            return false;
        };
        let items = q.drain();
        let delivered = !items.is_empty();
        for content in items {
            self.messages.push(Message::user(content.clone()));
            self.emit(Event::UserTurn {
                agent: self.agent_id(),
                content,
                mid_loop: true,
            });
        }
        delivered
    }

    /// One request; deltas become events as they arrive.
    pub(super) fn request(&mut self) -> Result<Completion> {
        let (transport, tool_specs) = {
            let st = self.shared.state.lock();
            (st.transport.clone(), Arc::clone(&st.tool_specs))
        };
        let note = self.wind_down_note();
        let shared = &self.shared;
        let req = Request {
            transport: &transport,
            system: Some(&self.system_prompt),
            messages: &self.messages,
            trailing_system: note.as_deref(),
            tools: &tool_specs,
            stream: shared.streaming,
            replay_reasoning: self.options.replay_reasoning,
            split_think: self.options.split_think,
            extra: &self.options.extra,
            cancel: shared.cancellable.as_ref(),
        };
        let mut buf = std::mem::take(&mut self.buf);
        let agent = &shared.id;
        // What the listeners are owed goes to them before the agent waits.
        shared.listeners.hand_over();
        let result = shared.client.chat(
            &req,
            &mut buf,
            &mut |n: &RetryNotice| {
                shared.emit(Event::Retrying {
                    agent: Arc::clone(agent),
                    attempt: n.attempt,
                    error: n.error.clone(),
                    wait_ms: u64::try_from(n.wait.as_millis()).unwrap_or(u64::MAX),
                });
            },
            &mut |f: Fragment<'_>| match f {
                Fragment::Content(s) if !s.is_empty() => {
                    shared.listeners.emit_delta(agent, false, s);
                }
                Fragment::Reasoning(s) if !s.is_empty() => {
                    shared.listeners.emit_delta(agent, true, s);
                }
                _ => {}
            },
            // So before each read of the stream.
            &mut || shared.listeners.hand_over(),
        );
        // The agent works on the answer: its events wait for the next wait.
        shared.listeners.hold();
        self.buf = buf;
        result
    }

    fn wind_down_note(&self) -> Option<String> {
        let last = self.options.wind_down?;
        let remaining = self.step_limit.as_ref()?.remaining();
        if remaining > last {
            return None;
        }
        Some(match remaining {
            0 => "Note: the tool-call budget for this turn is used up. Answer now from what you have, without calling tools.".to_string(),
            1 => "Note: 1 tool call remains in this turn's budget. Wrap up: use it only if essential, then answer.".to_string(),
            n => format!("Note: {n} tool calls remain in this turn's budget. Plan to wrap up and answer before they run out."),
        })
    }

    /// Emit the bookends and stamp the model; recover leaked tool calls.
    fn finish_message(&mut self, completion: Completion) -> Message {
        let Completion {
            mut message,
            usage,
            model,
            ..
        } = completion;
        let model = model.or_else(|| self.transport().model().map(str::to_string));
        if self.options.recover_tool_calls && message.tool_calls.is_empty() {
            let tools = self.tools();
            if let Some((content, calls)) = super::recover::recover(&message.content, &tools) {
                message.content = content;
                message.tool_calls = calls;
            }
        }
        message.model.clone_from(&model);
        message.usage = usage;
        let agent = self.agent_id();
        if let Some(r) = message.reasoning.as_deref().filter(|r| !r.is_empty()) {
            self.emit(Event::Thinking {
                agent: Arc::clone(&agent),
                content: r.to_string(),
            });
        }
        if !message.content.is_empty() {
            self.emit(Event::Assistant {
                agent: Arc::clone(&agent),
                content: message.content.clone(),
            });
        }
        let u = usage.unwrap_or_default();
        self.emit(Event::Tokens {
            agent,
            input: u.input,
            output: u.output,
            cached: u.cached,
            cache_creation: u.cache_creation,
            thinking: u.thinking,
            model_id: model,
        });
        message
    }

    /// Run one batch of tool calls; every call gets a tool message, even when
    /// the batch stops early, except the calls left pending by a deferred
    /// approval (`End::Pending`). `decisions` are the host's (a resume).
    pub(super) fn tool_batch(
        &mut self,
        calls: &[ToolCall],
        truncated: bool,
        steps: &mut u32,
        decisions: &mut Decisions,
    ) -> Result<End> {
        let tools = self.tools();
        let mut gated: Vec<(&ToolCall, Prepared)> = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            self.emit(Event::ToolCall {
                agent: self.agent_id(),
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: parse_arguments(&call.arguments),
            });
            // The listeners show the call before it is reviewed or run, and
            // get what the tool or the approver emits as it comes.
            self.shared.listeners.hand_over();
            let verdict = self.gate().and_then(|()| {
                *steps += 1;
                let decided = take_decision(decisions, &call.id);
                self.review(&tools, call, truncated, decided)
            });
            match verdict {
                Err(e) => {
                    let note = if e.is_cancelled() {
                        NOT_RUN_CANCELLED
                    } else {
                        NOT_RUN_BUDGET
                    };
                    // Calls already gated in parallel mode have not run
                    // either; a denied one keeps its denial.
                    for (c, p) in gated.drain(..) {
                        let out = match p {
                            Prepared::Done(observation) => observation,
                            Prepared::Ready { .. } => note.to_string(),
                        };
                        self.answer(c, out, true);
                    }
                    self.answer(call, note.to_string(), true);
                    for c in &calls[i + 1..] {
                        self.answer(c, note.to_string(), false);
                    }
                    return Err(e);
                }
                Ok(Verdict::Defer) => {
                    self.run_gated(gated);
                    return Ok(End::Pending);
                }
                Ok(Verdict::Go(prepared)) if self.options.parallel_tools => {
                    gated.push((call, prepared));
                }
                Ok(Verdict::Go(prepared)) => {
                    let out = run_prepared(&self.shared, call, prepared);
                    self.answer(call, out, true);
                }
            }
        }
        self.run_gated(gated);
        Ok(End::Answered)
    }

    /// Run the calls gated in parallel mode concurrently; answer in order.
    fn run_gated(&mut self, gated: Vec<(&ToolCall, Prepared)>) {
        if gated.is_empty() {
            return;
        }
        let outputs: Vec<(&ToolCall, String)> = std::thread::scope(|s| {
            let shared = &*self.shared;
            let handles: Vec<_> = gated
                .into_iter()
                .map(|(call, p)| (call, s.spawn(move || run_prepared(shared, call, p))))
                .collect();
            handles
                .into_iter()
                .map(|(call, h)| {
                    let out = h
                        .join()
                        .unwrap_or_else(|_| "Error: the tool panicked".to_string());
                    (call, out)
                })
                .collect()
        });
        for (call, out) in outputs {
            self.answer(call, out, true);
        }
    }

    /// The per-call controls, in the documented order: tick, then check.
    fn gate(&self) -> Result<()> {
        if let Some(s) = &self.step_limit {
            s.tick()?;
        }
        if let Some(c) = &self.shared.cancellable {
            c.check()?;
        }
        Ok(())
    }

    fn answer(&mut self, call: &ToolCall, content: String, emit: bool) {
        // The call is done: the agent works again (see `begin_run`).
        self.shared.listeners.hold();
        let content = self.limit_tool_result(content);
        if emit {
            self.emit(Event::ToolResult {
                agent: self.agent_id(),
                id: call.id.clone(),
                name: call.name.clone(),
                content: content.clone(),
            });
        }
        self.messages.push(Message::tool(call.id.clone(), content));
    }

    /// The step-exhaustion rescue: a tools-free nested agent answers from the
    /// evidence; its answer is appended and becomes the turn's answer.
    fn synthesize(&mut self, user_message: &str, max: u32) -> Result<()> {
        let reason = format!(
            "step budget of {max} tool calls exhausted; answering from the evidence gathered"
        );
        self.emit(Event::FallbackNotice {
            agent: self.agent_id(),
            reason,
        });
        let prompt = self.synthesizer.build_prompt(&self.messages, user_message);
        let mut synth = self.shared.spawn_child(ChildSpec {
            id: child_id(self.id(), "synthesizer"),
            system_prompt: self.synthesizer.system_prompt().to_string(),
            max_steps: 1,
            tools: Vec::new(),
        })?;
        self.type_synthesizer(&mut synth);
        synth.run_loop(&prompt)?;
        let answer = synth.last_assistant_content().unwrap_or_default();
        synth.close();
        let mut m = Message::assistant(answer.clone());
        m.model = self.model();
        self.messages.push(m);
        self.synth_answer = Some(answer);
        Ok(())
    }
}

/// The arguments as an event shows them: parsed, or the raw text as a string.
pub(super) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}
