//! The loop side of approval: reviewing one call (after validation, before
//! the call), waiting for a blocking approver with a way out on cancel, and
//! the deferred flow (pending calls read back from the history, `resume`).
//! The contract is documented once, on [`Approver`](crate::approval::Approver).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde_json::Value;

use super::run::{End, parse_arguments};
use super::{Agent, Outcome, Shared};
use crate::ToolContext;
use crate::approval::{ApprovalRequest, Approver, Decision, PendingApproval};
use crate::tool;
use crate::{Cancellable, Error, Event, Message, Result, Role, Tool, ToolCall};

/// Observation for a pending call answered because a new user message came
/// instead of a decision.
pub(crate) const NOT_APPROVED: &str = "Error: not run: not approved";

/// Observation prefix for a denied call; the reason follows.
const DENIED: &str = "Error: not run: denied: ";

/// The reason given to the model when a sub-agent's approver defers.
const NESTED_DEFER: &str = "the call needs the host's approval, which a sub-agent cannot wait for";

/// A call that passed its controls and its review.
pub(super) enum Prepared {
    /// Run the tool on these (validated, normalized) arguments.
    Ready {
        tool: Arc<dyn Tool>,
        args: Value,
        edited: bool,
    },
    /// Do not run anything: this is the observation (invalid arguments, an
    /// unknown tool, a denial).
    Done(String),
}

/// What the review of one call says.
pub(super) enum Verdict {
    Go(Prepared),
    /// The approver deferred: the batch stops before this call.
    Defer,
}

/// Host decisions handed to [`Agent::resume`], by call id.
pub(super) type Decisions = Vec<(String, Decision)>;

/// Take the host's decision for `id`, if it gave one.
pub(super) fn take_decision(decisions: &mut Decisions, id: &str) -> Option<Decision> {
    let i = decisions.iter().position(|(d, _)| d == id)?;
    Some(decisions.swap_remove(i).1)
}

impl Agent {
    /// Validate one call and review it: the host's decision when it gave
    /// one (resume), else the approver's. Errors only with
    /// [`Error::Cancelled`] (a cancel while the approver was deciding).
    pub(super) fn review(
        &self,
        tools: &[Arc<dyn Tool>],
        call: &ToolCall,
        truncated: bool,
        decided: Option<Decision>,
    ) -> Result<Verdict> {
        let Some(tool) = tools.iter().find(|t| t.name() == call.name) else {
            let names: Vec<&str> = tools.iter().map(Tool::name).collect();
            return Ok(Verdict::Go(Prepared::Done(tool::unknown_tool(
                &call.name, &names,
            ))));
        };
        let args = match tool::prepare(&**tool, &call.arguments, truncated) {
            Ok(args) => args,
            Err(observation) => return Ok(Verdict::Go(Prepared::Done(observation))),
        };
        let decision = match (decided, &self.shared.approver) {
            (Some(d), _) => d,
            (None, None) => Decision::Approve,
            (None, Some(approver)) => {
                let changes =
                    catch_unwind(AssertUnwindSafe(|| tool.changes_user_state())).unwrap_or(true);
                let request = ApprovalRequest::for_call(
                    call.name.clone(),
                    args.clone(),
                    call.id.clone(),
                    Arc::clone(&self.shared.id),
                    changes,
                    self.shared.cancellable.clone(),
                );
                consult(approver, request, self.shared.cancellable.as_ref())?
            }
        };
        Ok(self.apply(tool, call, args, decision))
    }

    fn apply(
        &self,
        tool: &Arc<dyn Tool>,
        call: &ToolCall,
        args: Value,
        decision: Decision,
    ) -> Verdict {
        let ready = |args, edited| {
            Verdict::Go(Prepared::Ready {
                tool: Arc::clone(tool),
                args,
                edited,
            })
        };
        match decision {
            Decision::Approve => ready(args, false),
            Decision::Deny { reason } => Verdict::Go(self.deny(call, reason)),
            Decision::Edit { arguments } => match tool::revalidate(&**tool, arguments) {
                Ok(args) => {
                    self.emit(Event::ToolEdited {
                        agent: self.agent_id(),
                        id: call.id.clone(),
                        name: call.name.clone(),
                        arguments: args.clone(),
                    });
                    ready(args, true)
                }
                Err(problems) => Verdict::Go(self.deny(
                    call,
                    format!(
                        "the approver's edit of the arguments failed validation: {}",
                        problems.strip_prefix("Error: ").unwrap_or(&problems)
                    ),
                )),
            },
            Decision::Defer if self.options.nested => {
                Verdict::Go(self.deny(call, NESTED_DEFER.to_string()))
            }
            Decision::Defer => Verdict::Defer,
        }
    }

    fn deny(&self, call: &ToolCall, reason: String) -> Prepared {
        let observation = format!("{DENIED}{reason}");
        self.emit(Event::ToolDenied {
            agent: self.agent_id(),
            id: call.id.clone(),
            name: call.name.clone(),
            reason,
        });
        Prepared::Done(observation)
    }

    /// The tool calls awaiting a decision: the unanswered calls of the
    /// conversation's trailing assistant message, in call order. Empty
    /// unless the last turn stopped with
    /// [`StopReason::ApprovalPending`](crate::StopReason::ApprovalPending)
    /// (or such a history was loaded). See [`Approver`](crate::approval::Approver),
    /// "Deciding later".
    pub fn pending_approvals(&self) -> Vec<PendingApproval> {
        unanswered(&self.messages)
            .into_iter()
            .map(|c| {
                PendingApproval::new(c.id.clone(), c.name.clone(), parse_arguments(&c.arguments))
            })
            .collect()
    }

    /// Continue a turn that stopped with
    /// [`StopReason::ApprovalPending`](crate::StopReason::ApprovalPending):
    /// apply the host's `decisions` (by call id) to the
    /// [pending calls](Agent::pending_approvals), in call order, then go on
    /// like [`run_loop`](Agent::run_loop) until the model answers.
    ///
    /// A resume is a run of its own: the [`StepLimit`](crate::StepLimit) and
    /// [`Cancellable`](crate::Cancellable) are reset, each resumed call
    /// counts a step and gets its [`Event::ToolCall`] again, the run ends
    /// with [`Event::Stopped`], and the [`Outcome`] counts its own requests.
    /// A pending call without a decision is reviewed by the approver (it may
    /// defer again); [`Decision::Defer`] keeps a call pending.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, History, StopReason};
    /// use pikuri::approval::Decision;
    /// use pikuri::tool::{FnTool, Parameters};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::tool_call("send", serde_json::json!({"to": "bob"})));
    /// server.push(Reply::text("Sent."));
    /// let send = || FnTool::new("send", "Sends mail.",
    ///     Parameters::builder().required_string("to", "Recipient.").build(),
    ///     |args, _| Ok(format!("sent to {}", args["to"].as_str().unwrap()))).state_changing();
    /// let build = || Agent::builder(server.transport())
    ///     .add_tool(send())
    ///     .approver(|_: &pikuri::approval::ApprovalRequest| Decision::Defer)
    ///     .build();
    ///
    /// // A web handler: the turn stops, the history is saved.
    /// let mut agent = build()?;
    /// let outcome = agent.run_loop("mail bob")?;
    /// assert_eq!(outcome.stop_reason, StopReason::ApprovalPending);
    /// let saved = agent.export_history().to_json();
    ///
    /// // Later, maybe in another process: load and decide.
    /// let mut agent = build()?;
    /// agent.load_history(History::parse(&saved)?);
    /// let pending = agent.pending_approvals();
    /// assert_eq!(pending[0].tool, "send");
    /// let outcome = agent.resume([(pending[0].call_id.clone(), Decision::Approve)])?;
    /// assert_eq!(outcome.answer.as_deref(), Some("Sent."));
    /// assert_eq!(agent.messages()[2].content, "sent to bob");
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`] when no call is pending, or a decision
    ///   names a call id that is not pending (nothing happens).
    /// - The errors of [`run_loop`](Agent::run_loop).
    pub fn resume<I, S>(&mut self, decisions: I) -> Result<Outcome>
    where
        I: IntoIterator<Item = (S, Decision)>,
        S: Into<String>,
    {
        let pending: Vec<ToolCall> = unanswered(&self.messages).into_iter().cloned().collect();
        if pending.is_empty() {
            return Err(Error::invalid("no tool call awaits approval"));
        }
        let mut decisions: Decisions = decisions
            .into_iter()
            .map(|(id, d)| (id.into(), d))
            .collect();
        if let Some((id, _)) = decisions
            .iter()
            .find(|(id, _)| !pending.iter().any(|c| &c.id == id))
        {
            return Err(Error::invalid(format!("no pending tool call `{id}`")));
        }
        self.begin_run();
        let user_message = self.last_user_message();
        let mut steps = 0u32;
        let result = match self.tool_batch(&pending, false, &mut steps, &mut decisions) {
            Ok(End::Answered) => {
                self.deliver_injections();
                self.rounds(&mut steps)
            }
            other => other,
        };
        self.finish_run(result, steps, &user_message)
    }

    /// Before a new user message: answer the calls still pending, so the
    /// next request is valid. Each gets its [`Event::ToolResult`].
    pub(super) fn answer_stale_pending(&mut self) {
        let stale: Vec<ToolCall> = unanswered(&self.messages).into_iter().cloned().collect();
        for call in &stale {
            self.emit(Event::ToolResult {
                agent: self.agent_id(),
                id: call.id.clone(),
                name: call.name.clone(),
                content: NOT_APPROVED.to_string(),
            });
            self.messages
                .push(Message::tool(call.id.clone(), NOT_APPROVED.to_string()));
        }
    }
}

/// Run a prepared call; the observation for its tool message.
pub(super) fn run_prepared(shared: &Shared, call: &ToolCall, prepared: Prepared) -> String {
    match prepared {
        Prepared::Done(observation) => observation,
        Prepared::Ready { tool, args, edited } => {
            let cx = ToolContext::new(
                shared.cancellable.clone(),
                Arc::clone(&shared.id),
                call.id.clone(),
            );
            let out = tool::invoke(&*tool, &args, &cx);
            if edited {
                format!(
                    "Note: your arguments were edited before the call; the tool ran with {args}\n{out}"
                )
            } else {
                out
            }
        }
    }
}

/// The calls of the trailing assistant message that no tool message after
/// it answers (only tool messages may follow it).
pub(super) fn unanswered(messages: &[Message]) -> Vec<&ToolCall> {
    let tail = messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::Tool)
        .count();
    let Some(assistant) = messages
        .len()
        .checked_sub(tail + 1)
        .map(|i| &messages[i])
        .filter(|m| m.role == Role::Assistant)
    else {
        return Vec::new();
    };
    let answered = &messages[messages.len() - tail..];
    assistant
        .tool_calls
        .iter()
        .filter(|c| {
            !answered
                .iter()
                .any(|m| m.tool_call_id.as_deref() == Some(c.id.as_str()))
        })
        .collect()
}

/// Ask the approver. With a [`Cancellable`], the review runs on a helper
/// thread and the loop waits for the decision or a cancel, whichever comes
/// first (a cancel hook wakes the wait); a late decision is dropped with
/// the channel. Without one, it runs here.
fn consult(
    approver: &Arc<dyn Approver>,
    request: ApprovalRequest,
    cancel: Option<&Cancellable>,
) -> Result<Decision> {
    let Some(cancel) = cancel else {
        return Ok(review_guarded(&**approver, &request));
    };
    cancel.check()?;
    // Room for the decision and one wake-up from the hook: neither sender
    // ever blocks, whoever comes first.
    let (tx, rx) = crossbeam_channel::bounded::<Option<Decision>>(2);
    let wake = tx.clone();
    let _hook = cancel.on_cancel(move || {
        let _ = wake.try_send(None);
    });
    let approver = Arc::clone(approver);
    let spawned = std::thread::Builder::new()
        .name("pikuri-approver".to_string())
        .spawn(move || {
            let decision = review_guarded(&*approver, &request);
            let _ = tx.send(Some(decision));
        });
    if let Err(e) = spawned {
        log::error!("could not start the approver thread: {e}");
        return Ok(Decision::deny("the approver could not be started"));
    }
    match rx.recv() {
        Ok(Some(decision)) => {
            // A cancel that raced with the decision still wins: the tool
            // must not start after the host cancelled.
            cancel.check()?;
            Ok(decision)
        }
        _ => Err(Error::Cancelled),
    }
}

fn review_guarded(approver: &dyn Approver, request: &ApprovalRequest) -> Decision {
    catch_unwind(AssertUnwindSafe(|| approver.review(request))).unwrap_or_else(|panic| {
        let msg = crate::util::panic_message(&*panic);
        log::error!("the approver panicked: {msg}");
        Decision::deny(format!("the approver panicked: {msg}"))
    })
}
