//! The private loop driver: one function per boundary. Reads the controls at
//! the points tabled in [`control`](crate::control) only.

use std::sync::Arc;

use serde_json::Value;

use super::child::{ChildSpec, child_id};
use super::{Agent, Outcome, Shared};
use crate::protocol::{Completion, Fragment, Request, RetryNotice};
use crate::tool::{self, ToolContext};
use crate::{
    ChatTransport, Error, Event, Message, OnExhausted, Result, Role, StopReason, Tool, ToolCall,
};

/// Observation for calls left unanswered when the budget ran out.
pub(crate) const NOT_RUN_BUDGET: &str = "Error: not run: step budget exhausted";
/// Observation for calls left unanswered when the run was cancelled.
pub(crate) const NOT_RUN_CANCELLED: &str = "Error: not run: cancelled by the user";

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
        let question = self
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.clone())
            .unwrap_or_default();
        self.reset_controls();
        self.drive(&question)
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
        self.reset_controls();
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
        self.drive(user_message)
    }

    /// A turn start: clear the synthesized answer, reset the step budget and
    /// (in a main agent) the cancellation token.
    fn reset_controls(&mut self) {
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
    }

    /// The rounds of a turn whose user message is in the history, the
    /// step-exhaustion rescue, and the exit events.
    fn drive(&mut self, user_message: &str) -> Result<Outcome> {
        let mut steps = 0u32;
        let result = match self.rounds(&mut steps) {
            Ok(()) => Ok(StopReason::Completed),
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
        self.emit(Event::Stopped {
            agent: self.agent_id(),
            reason,
        });
        self.shared.listeners.flush();
        result.map(|stop_reason| Outcome {
            stop_reason,
            answer: self.last_assistant_content(),
            steps,
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
    fn rounds(&mut self, steps: &mut u32) -> Result<()> {
        loop {
            if let Some(c) = &self.shared.cancellable {
                c.check()?;
            }
            self.take_pending_system();
            let completion = self.request()?;
            let truncated = completion.finish_reason.as_deref() == Some("length");
            let message = self.finish_message(completion);
            if message.tool_calls.is_empty() {
                self.messages.push(message);
                if self.deliver_injections() {
                    continue;
                }
                return Ok(());
            }
            let calls = message.tool_calls.clone();
            self.messages.push(message);
            self.tool_batch(&calls, truncated, steps)?;
            self.deliver_injections();
        }
    }

    fn take_pending_system(&mut self) {
        let pending = std::mem::take(&mut self.shared.state.lock().pending_system);
        self.messages
            .extend(pending.into_iter().map(Message::system));
    }

    /// Append what the Interloper holds; true when anything was delivered.
    fn deliver_injections(&mut self) -> bool {
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
    fn request(&mut self) -> Result<Completion> {
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
        let result = shared.client.chat(
            &req,
            &mut buf,
            &mut |n: &RetryNotice| {
                shared.emit(Event::Retrying {
                    agent: Arc::clone(agent),
                    attempt: n.attempt,
                    error: n.error.clone(),
                    wait_ms: n.wait.as_millis() as u64,
                });
            },
            &mut |f: Fragment<'_>| match f {
                Fragment::Content(s) if !s.is_empty() => {
                    shared.emit(Event::AssistantDelta {
                        agent: Arc::clone(agent),
                        content: s.to_string(),
                    });
                }
                Fragment::Reasoning(s) if !s.is_empty() => {
                    shared.emit(Event::ThinkingDelta {
                        agent: Arc::clone(agent),
                        content: s.to_string(),
                    });
                }
                _ => {}
            },
        );
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
    /// the batch stops early.
    fn tool_batch(&mut self, calls: &[ToolCall], truncated: bool, steps: &mut u32) -> Result<()> {
        let tools = self.tools();
        let mut gated = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            self.emit(Event::ToolCall {
                agent: self.agent_id(),
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: parse_arguments(&call.arguments),
            });
            if let Err(e) = self.gate() {
                let note = if e.is_cancelled() {
                    NOT_RUN_CANCELLED
                } else {
                    NOT_RUN_BUDGET
                };
                // Calls already gated in parallel mode have not run either.
                for c in gated.drain(..).chain(std::iter::once(call)) {
                    self.answer(c, note.to_string(), true);
                }
                for c in &calls[i + 1..] {
                    self.answer(c, note.to_string(), false);
                }
                return Err(e);
            }
            *steps += 1;
            if self.options.parallel_tools {
                gated.push(call);
            } else {
                let out = run_tool(&self.shared, &tools, call, truncated);
                self.answer(call, out, true);
            }
        }
        if !gated.is_empty() {
            let outputs: Vec<String> = std::thread::scope(|s| {
                let shared = &*self.shared;
                let tools = &tools;
                let handles: Vec<_> = gated
                    .iter()
                    .map(|call| s.spawn(move || run_tool(shared, tools, call, truncated)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| "Error: the tool panicked".to_string())
                    })
                    .collect()
            });
            for (call, out) in gated.into_iter().zip(outputs) {
                self.answer(call, out, true);
            }
        }
        Ok(())
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

fn run_tool(shared: &Shared, tools: &[Arc<dyn Tool>], call: &ToolCall, truncated: bool) -> String {
    let cx = ToolContext::new(
        shared.cancellable.clone(),
        Arc::clone(&shared.id),
        call.id.clone(),
    );
    if let Some(t) = tools.iter().find(|t| t.name() == call.name) {
        tool::execute(&**t, &call.arguments, truncated, &cx)
    } else {
        let names: Vec<&str> = tools.iter().map(Tool::name).collect();
        tool::unknown_tool(&call.name, &names)
    }
}

/// The arguments as an event shows them: parsed, or the raw text as a string.
fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}
