//! The loop side of approval: the `Gate` that reviews each call (after
//! validation, before the call), waiting for a blocking approver with a way
//! out on cancel, and the deferred flow's pieces (pending calls read back
//! from the history; `Agent::resume` hands the host's decisions to a gate).
//! The contract is documented once, on [`Approver`](crate::approval::Approver).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde_json::Value;

use super::shared::{Observation, Prepared, Ready, Reviewer, Shared, ToolPath, Verdict};
use crate::ToolContext;
use crate::approval::{ApprovalRequest, Approver, Decision, PendingApproval};
use crate::journal::Record;
use crate::protocol::Wake;
use crate::tool;
use crate::{Cancellable, Error, Event, Message, Result, Role, Tool, ToolCall};

/// Observation for a pending call answered because a new user message came
/// instead of a decision.
pub(crate) const NOT_APPROVED: &str = "Error: not run: not approved";

/// Observation prefix for a denied call; the reason follows.
const DENIED: &str = "Error: not run: denied: ";

/// The reason given to the model when a sub-agent's approver defers.
const NESTED_DEFER: &str = "the call needs the host's approval, which a sub-agent cannot wait for";

/// Host decisions handed to [`Agent::resume`](crate::Agent::resume), by call id.
pub(crate) type Decisions = Vec<(String, Decision)>;

/// The review of each tool call of a run, after its controls and before it
/// runs: the host's decision when a resume gave one, else the approver's
/// (none: approved). Emits [`Event::ToolEdited`] and [`Event::ToolDenied`].
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// The host's decisions not yet applied (a resume); each is taken once.
    decisions: Decisions,
}

impl Gate {
    /// A gate applying the host's `decisions` first.
    pub(crate) fn with_decisions(decisions: Decisions) -> Gate {
        Gate { decisions }
    }

    /// Validate one call and review it. Errors only with
    /// [`Error::Cancelled`] (a cancel while the approver was deciding).
    pub(crate) fn review(
        &mut self,
        shared: &Shared,
        tools: &[Arc<dyn Tool>],
        path: Option<ToolPath>,
        call: &ToolCall,
        truncated: bool,
    ) -> Result<Verdict> {
        // The host's decision is taken even when the call turns out
        // invalid: it was about this call and must not apply to another.
        let decided = self.take(&call.id);
        // A pool holding a tool has its path (`ToolPath`).
        let found = tools.iter().find(|t| t.name() == call.name);
        let (Some(tool), Some(path)) = (found, path) else {
            let names: Vec<&str> = tools.iter().map(Tool::name).collect();
            return Ok(Verdict::Go(Prepared::Done(tool::unknown_tool(
                &call.name, &names,
            ))));
        };
        (path.review)(shared, tool, call, truncated, decided)
    }

    /// Take the host's decision for `id`, if it gave one.
    fn take(&mut self, id: &str) -> Option<Decision> {
        let i = self.decisions.iter().position(|(d, _)| d == id)?;
        Some(self.decisions.swap_remove(i).1)
    }
}

/// [`ToolPath::review`]: validate the call of a registered `tool`, then
/// apply the host's decision, or the approver's (none: approved).
pub(crate) fn review_tool(
    shared: &Shared,
    tool: &Arc<dyn Tool>,
    call: &ToolCall,
    truncated: bool,
    decided: Option<Decision>,
) -> Result<Verdict> {
    let args = match tool::prepare(&**tool, &call.arguments, truncated) {
        Ok(args) => args,
        Err(observation) => return Ok(Verdict::Go(Prepared::Done(observation))),
    };
    let decision = match (decided, &shared.approver) {
        (Some(d), _) => d,
        (None, None) => Decision::Approve,
        (None, Some(reviewer)) => (reviewer.ask)(shared, &reviewer.approver, tool, call, &args)?,
    };
    Ok(apply(shared, tool, call, args, decision))
}

impl Reviewer {
    /// The reviewer of [`Configurator::approver`](crate::Configurator::approver):
    /// the one place that names the consulting (see [`Reviewer`]).
    pub(crate) fn new(approver: Arc<dyn Approver>) -> Reviewer {
        Reviewer {
            approver,
            ask: ask_approver,
        }
    }
}

/// Ask `approver` about `call` on its validated `args`, journalled.
fn ask_approver(
    shared: &Shared,
    approver: &Arc<dyn Approver>,
    tool: &Arc<dyn Tool>,
    call: &ToolCall,
    args: &Value,
) -> Result<Decision> {
    shared.journal(|| Record::ApprovalAsked {
        call_id: call.id.as_str().into(),
    })?;
    let changes = catch_unwind(AssertUnwindSafe(|| tool.changes_user_state())).unwrap_or(true);
    let request = ApprovalRequest::for_call(
        call.name.clone(),
        args.clone(),
        call.id.clone(),
        Arc::clone(&shared.id),
        changes,
        shared.cancellable.clone(),
    );
    let decision = consult(approver, request, shared.cancellable.as_ref())?;
    shared.journal(|| Record::approval_answered(&call.id, &decision))?;
    Ok(decision)
}

fn apply(
    shared: &Shared,
    tool: &Arc<dyn Tool>,
    call: &ToolCall,
    args: Value,
    decision: Decision,
) -> Verdict {
    let ready = |args, edited| {
        Verdict::Go(Prepared::Ready(Ready {
            tool: Arc::clone(tool),
            args,
            edited,
            path: ToolPath::ON,
        }))
    };
    match decision {
        Decision::Approve => ready(args, false),
        Decision::Deny { reason } => Verdict::Go(deny(shared, call, reason)),
        Decision::Edit { arguments } => match tool::revalidate(&**tool, arguments) {
            Ok(args) => {
                shared.emit(Event::ToolEdited {
                    agent: Arc::clone(&shared.id),
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: args.clone(),
                });
                ready(args, true)
            }
            Err(problems) => Verdict::Go(deny(
                shared,
                call,
                format!(
                    "the approver's edit of the arguments failed validation: {}",
                    problems.strip_prefix("Error: ").unwrap_or(&problems)
                ),
            )),
        },
        // A child cannot pause its parent's turn: a deferral denies.
        Decision::Defer if shared.options.nesting.is_child() => {
            Verdict::Go(deny(shared, call, NESTED_DEFER.to_string()))
        }
        Decision::Defer => Verdict::Defer,
    }
}

fn deny(shared: &Shared, call: &ToolCall, reason: String) -> Prepared {
    let observation = format!("{DENIED}{reason}");
    shared.emit(Event::ToolDenied {
        agent: Arc::clone(&shared.id),
        id: call.id.clone(),
        name: call.name.clone(),
        reason,
    });
    Prepared::Done(observation)
}

/// The calls awaiting a decision, as the host sees them.
pub(crate) fn pending(messages: &[Message]) -> Vec<PendingApproval> {
    unanswered(messages)
        .into_iter()
        .map(|c| PendingApproval::new(c.id.clone(), c.name.clone(), parse_arguments(&c.arguments)))
        .collect()
}

/// The arguments as an event shows them: parsed, or the raw text as a string.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// [`ToolPath::run`]: run an approved call; the observation for its tool
/// message and the images the tool attached
/// ([`ToolContext::attach_image`]).
pub(crate) fn run_ready(shared: &Shared, call: &ToolCall, ready: Ready) -> Observation {
    let Ready {
        tool, args, edited, ..
    } = ready;
    let mut key = None;
    if let Some(journal) = shared.journal.get() {
        // The start is stored before the tool runs, or the tool does not
        // run: a resume must know it may have run.
        let start = Record::ToolStart {
            step: journal.step(),
            call_id: call.id.as_str().into(),
        };
        if let Err(e) = journal.append(&start) {
            return (
                format!("Error: not run: the run journal failed: {e}"),
                Vec::new(),
            );
        }
        key = Some(journal.key(&call.id));
    }
    let cx = ToolContext::new(
        shared.cancellable.clone(),
        Arc::clone(&shared.id),
        call.id.clone(),
    )
    .with_idempotency_key(key)
    .with_traceparent(shared.options.traceparent.as_ref().and_then(|s| (s.0)()));
    let out = tool::invoke(&*tool, &args, &cx);
    let out = if edited {
        format!("Note: your arguments were edited before the call; the tool ran with {args}\n{out}")
    } else {
        out
    };
    (out, cx.take_images())
}

/// The calls of the trailing assistant message that no tool message after
/// it answers (only tool messages may follow it).
pub(crate) fn unanswered(messages: &[Message]) -> Vec<&ToolCall> {
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
    // The decision or the hook's wake-up, whichever comes first; neither
    // side ever blocks on the other.
    let wake = Wake::<Option<Decision>>::new();
    let hook_wake = wake.clone();
    let _hook = cancel.on_cancel(move || hook_wake.put(None));
    let approver = Arc::clone(approver);
    let decided = wake.clone();
    let spawned = std::thread::Builder::new()
        .name("pikuri-approver".to_string())
        .spawn(move || {
            let decision = review_guarded(&*approver, &request);
            decided.put(Some(decision));
        });
    if let Err(e) = spawned {
        log::error!("could not start the approver thread: {e}");
        return Ok(Decision::deny("the approver could not be started"));
    }
    match wake.wait() {
        Some(decision) => {
            // A cancel that raced with the decision still wins: the tool
            // must not start after the host cancelled.
            cancel.check()?;
            Ok(decision)
        }
        None => Err(Error::Cancelled),
    }
}

fn review_guarded(approver: &dyn Approver, request: &ApprovalRequest) -> Decision {
    catch_unwind(AssertUnwindSafe(|| approver.review(request))).unwrap_or_else(|panic| {
        let msg = crate::util::panic_message(&*panic);
        log::error!("the approver panicked: {msg}");
        Decision::deny(format!("the approver panicked: {msg}"))
    })
}
