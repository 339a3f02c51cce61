//! Hosts in control of tool calls: the [`Approver`] seam (pikuri's
//! `Confirmer`), its [`ApprovalRequest`] and [`Decision`], the built-in
//! approvers, and [`PendingApproval`] for hosts that decide later.
//!
//! The loop side (where the approver is consulted, how a cancel ends the
//! wait, how a deferred turn resumes) lives in `agent/approval.rs` (the
//! gate) and `agent/turn.rs` (`resume`), and is documented on [`Approver`].

#[cfg(feature = "terminal")]
mod terminal;

#[cfg(feature = "terminal")]
pub use terminal::TerminalApprover;

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::Cancellable;
use crate::serde_macros::{json_struct, json_tagged};

/// Consulted before a tool call runs: approve it, deny it with a reason,
/// approve it with edited arguments, or defer the decision to the host.
///
/// Set one with [`Configurator::approver`](crate::Configurator::approver).
/// Without one, every call runs (the default). Closures
/// `Fn(&ApprovalRequest) -> Decision + Send + Sync + 'static` are approvers.
///
/// # Examples
///
/// ```
/// use pikuri::Agent;
/// use pikuri::approval::Decision;
/// use pikuri::tool::{FnTool, Parameters};
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.push(Reply::tool_call("rm", serde_json::json!({"path": "/"})));
/// server.push(Reply::text("I was not allowed to."));
/// let rm = FnTool::new("rm", "Deletes a path.",
///     Parameters::builder().required_string("path", "What to delete.").build(),
///     |_, _| Ok("deleted".into())).state_changing();
///
/// let mut agent = Agent::builder(server.transport())
///     .add_tool(rm)
///     .approver(|req: &pikuri::approval::ApprovalRequest| {
///         if req.arguments()["path"] == "/" {
///             Decision::deny("never the root")
///         } else {
///             Decision::Approve
///         }
///     })
///     .build()?;
/// agent.run_loop("clean up")?;
/// assert_eq!(agent.messages()[2].content, "Error: not run: denied: never the root");
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # Where it is consulted
///
/// For each tool call of a batch, in order: [`Event::ToolCall`](crate::Event::ToolCall),
/// [`StepLimit::tick`](crate::StepLimit::tick),
/// [`Cancellable::check`](crate::Cancellable::check), argument parsing and
/// validation, **review**, the call, [`Event::ToolResult`](crate::Event::ToolResult).
/// Calls whose arguments do not validate, or that name an unknown tool, are
/// answered with the `"Error: ..."` observation without a review: there is
/// nothing to approve, and the model gets to retry. The crate docs table
/// this with the other controls, [Controls](crate#controls).
///
/// # Decisions
///
/// - [`Decision::Approve`]: the call runs.
/// - [`Decision::Deny`]: the call does not run; [`Event::ToolDenied`](crate::Event::ToolDenied)
///   records it and the model gets `"Error: not run: denied: <reason>"` as
///   the call's result. The turn goes on.
/// - [`Decision::Edit`]: the edited arguments are validated against the
///   tool's schema again. Valid: [`Event::ToolEdited`](crate::Event::ToolEdited),
///   and the call runs on them; its result starts with a note giving the
///   arguments, so the model knows what ran. Invalid: the call is denied
///   with the validation problems as the reason (the approver is not asked
///   again, which could loop).
/// - [`Decision::Defer`]: the turn ends after the calls before this one,
///   with [`StopReason::ApprovalPending`](crate::StopReason::ApprovalPending);
///   see "Deciding later". In a sub-agent, which cannot pause its parent's
///   tool call, a deferral is a denial.
///
/// # Blocking, and cancellation
///
/// `review` may block as long as it likes (a terminal prompt, a message to
/// a phone). When the agent has a [`Cancellable`], the review runs on a
/// helper thread while the loop waits for the first of two things: the
/// decision or a cancel (a cancel hook wakes it at once). On a cancel the
/// turn ends with [`Error::Cancelled`](crate::Error::Cancelled), the call
/// and the rest of its batch are answered "not run", and the late decision,
/// whenever `review` returns, is dropped; an approver that can give up early
/// polls [`ApprovalRequest::is_cancelled`]. Without a `Cancellable`
/// nothing can cancel, and `review` runs on the loop's thread. A panic in
/// `review` denies the call.
///
/// # Deciding later
///
/// A host that cannot block (a web handler) returns [`Decision::Defer`].
/// The turn then ends with `Ok(outcome)`, `outcome.stop_reason ==
/// StopReason::ApprovalPending` and the calls awaiting a decision in
/// [`Outcome::pending_approvals`](crate::Outcome::pending_approvals): the
/// deferred call and every later call of its batch (those have not been
/// reviewed yet). The conversation then ends with the assistant message
/// whose calls are unanswered, which is all the state there is:
/// [`Agent::export_history`](crate::Agent::export_history) saves it,
/// [`History::parse`](crate::History::parse) accepts unanswered calls as the
/// trailing batch only, and [`Agent::pending_approvals`](crate::Agent::pending_approvals)
/// lists them again after [`Agent::load_history`](crate::Agent::load_history),
/// in this process or another. Nothing is sent to the model in between.
///
/// Then either [`Agent::resume`](crate::Agent::resume) with the host's
/// decisions (a call without one is reviewed by the approver again), or a
/// new [`run_loop`](crate::Agent::run_loop): it first answers each pending
/// call `"Error: not run: not approved"`, so the next request is valid.
///
/// # Sub-agents
///
/// Children inherit the parent's approver (the same instance), so a
/// sub-agent's tool calls are reviewed like the parent's; the request's
/// [`agent_id`](ApprovalRequest::agent_id) names the child.
///
/// # Thread safety
///
/// `review` runs on a helper thread, possibly several at once (parallel
/// sub-agents), hence `Send + Sync + 'static` and `&self`.
pub trait Approver: Send + Sync + 'static {
    /// Decide on one call.
    fn review(&self, request: &ApprovalRequest) -> Decision;
}

impl<F> Approver for F
where
    F: Fn(&ApprovalRequest) -> Decision + Send + Sync + 'static,
{
    fn review(&self, request: &ApprovalRequest) -> Decision {
        self(request)
    }
}

/// A shared approver is an approver.
impl Approver for Arc<dyn Approver> {
    fn review(&self, request: &ApprovalRequest) -> Decision {
        (**self).review(request)
    }
}

/// An approver's answer about one call; see [`Approver`] for what each does.
///
/// Serializes as `{"decision":"deny","reason":"..."}` etc., so a host can
/// store decisions with the history.
///
/// # Examples
///
/// ```
/// use pikuri::approval::Decision;
/// let d = Decision::deny("not today");
/// assert_eq!(serde_json::to_string(&d).unwrap(), r#"{"decision":"deny","reason":"not today"}"#);
/// assert_eq!(serde_json::from_str::<Decision>(r#"{"decision":"approve"}"#).unwrap(), Decision::Approve);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Run the call as the model sent it.
    Approve,
    /// Do not run it; the model is told why.
    Deny {
        /// Why, for the model and the [`Event::ToolDenied`](crate::Event::ToolDenied).
        reason: String,
    },
    /// Run it on these arguments instead (validated again).
    Edit {
        /// The arguments to run on.
        arguments: Value,
    },
    /// Decide later: end the turn with the call pending.
    Defer,
}

json_tagged! {
    Serialize, Deserialize for Decision, tag = "decision" {
        Approve = "approve" {},
        Deny = "deny" { reason },
        Edit = "edit" { arguments },
        Defer = "defer" {},
    }
}

impl Decision {
    /// [`Decision::Deny`] with this reason.
    pub fn deny(reason: impl Into<String>) -> Decision {
        Decision::Deny {
            reason: reason.into(),
        }
    }

    /// [`Decision::Edit`] with these arguments.
    pub fn edit(arguments: Value) -> Decision {
        Decision::Edit { arguments }
    }
}

/// What an [`Approver`] sees of one tool call.
///
/// # Examples
///
/// ```
/// use pikuri::approval::{ApprovalRequest, Approver, Decision, StateChangingOnly};
/// let req = ApprovalRequest::new("read_file", serde_json::json!({"path": "a.txt"}));
/// assert_eq!(req.tool(), "read_file");
/// assert!(!req.changes_user_state());
/// // A read-only tool passes without asking the inner approver.
/// let policy = StateChangingOnly::new(|_: &ApprovalRequest| Decision::deny("no"));
/// assert_eq!(policy.review(&req), Decision::Approve);
/// assert_eq!(policy.review(&req.with_changes_user_state(true)), Decision::deny("no"));
/// ```
#[derive(Clone)]
pub struct ApprovalRequest {
    tool: String,
    arguments: Value,
    call_id: String,
    agent_id: Arc<str>,
    changes_user_state: bool,
    cancellable: Option<Cancellable>,
}

impl ApprovalRequest {
    /// A request for `tool` with these arguments, an empty call id, the main
    /// agent, a read-only tool and no cancellation (for testing approvers).
    pub fn new(tool: impl Into<String>, arguments: Value) -> ApprovalRequest {
        ApprovalRequest {
            tool: tool.into(),
            arguments,
            call_id: String::new(),
            agent_id: Arc::from(""),
            changes_user_state: false,
            cancellable: None,
        }
    }

    pub(crate) fn for_call(
        tool: String,
        arguments: Value,
        call_id: String,
        agent_id: Arc<str>,
        changes_user_state: bool,
        cancellable: Option<Cancellable>,
    ) -> ApprovalRequest {
        ApprovalRequest {
            tool,
            arguments,
            call_id,
            agent_id,
            changes_user_state,
            cancellable,
        }
    }

    /// A copy with this call id.
    #[must_use]
    pub fn with_call_id(mut self, id: impl Into<String>) -> ApprovalRequest {
        self.call_id = id.into();
        self
    }

    /// A copy with this agent id.
    #[must_use]
    pub fn with_agent_id(mut self, id: &str) -> ApprovalRequest {
        self.agent_id = Arc::from(id);
        self
    }

    /// A copy that says whether the tool changes user state.
    #[must_use]
    pub fn with_changes_user_state(mut self, yes: bool) -> ApprovalRequest {
        self.changes_user_state = yes;
        self
    }

    /// The tool's name.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// The arguments, validated against the tool's schema and normalized.
    pub fn arguments(&self) -> &Value {
        &self.arguments
    }

    /// The id of the call.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The id of the calling agent (empty for the main agent, `"researcher
    /// 0"` for a sub-agent).
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// What the tool declares with [`Tool::changes_user_state`](crate::Tool::changes_user_state).
    pub fn changes_user_state(&self) -> bool {
        self.changes_user_state
    }

    /// Whether the run was cancelled: the loop no longer waits for this
    /// decision, and a long review may give up.
    pub fn is_cancelled(&self) -> bool {
        self.cancellable
            .as_ref()
            .is_some_and(Cancellable::is_cancelled)
    }
}

impl fmt::Debug for ApprovalRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalRequest")
            .field("tool", &self.tool)
            .field("arguments", &self.arguments)
            .field("call_id", &self.call_id)
            .field("agent_id", &self.agent_id)
            .field("changes_user_state", &self.changes_user_state)
            .finish_non_exhaustive()
    }
}

/// A tool call awaiting the host's decision after a turn stopped with
/// [`StopReason::ApprovalPending`](crate::StopReason::ApprovalPending).
/// Answer it through [`Agent::resume`](crate::Agent::resume) by its
/// `call_id`; see [`Approver`], "Deciding later".
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingApproval {
    /// The call id.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments as the model sent them: parsed, or the raw text as a
    /// JSON string when it does not parse.
    pub arguments: Value,
}

json_struct! { Serialize, Deserialize for PendingApproval { call_id, tool, arguments } }

impl PendingApproval {
    pub(crate) fn new(call_id: String, tool: String, arguments: Value) -> PendingApproval {
        PendingApproval {
            call_id,
            tool,
            arguments,
        }
    }
}

/// Approves every call: the explicit form of having no approver.
///
/// # Examples
///
/// ```
/// use pikuri::approval::{ApprovalRequest, Approver, AutoApprove, Decision};
/// assert_eq!(AutoApprove.review(&ApprovalRequest::new("rm", serde_json::json!({}))), Decision::Approve);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct AutoApprove;

impl Approver for AutoApprove {
    fn review(&self, _request: &ApprovalRequest) -> Decision {
        Decision::Approve
    }
}

/// Approves read-only tools at once and asks `inner` about tools that
/// declare [`Tool::changes_user_state`](crate::Tool::changes_user_state).
///
/// # Examples
///
/// See [`ApprovalRequest`].
#[derive(Clone, Debug)]
pub struct StateChangingOnly<A> {
    inner: A,
}

impl<A: Approver> StateChangingOnly<A> {
    /// Ask `inner` about state-changing tools only.
    pub fn new(inner: A) -> StateChangingOnly<A> {
        StateChangingOnly { inner }
    }
}

impl<A: Approver> Approver for StateChangingOnly<A> {
    fn review(&self, request: &ApprovalRequest) -> Decision {
        if request.changes_user_state() {
            self.inner.review(request)
        } else {
            Decision::Approve
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Decision, PendingApproval};

    #[test]
    fn decisions_write_and_read_their_pinned_json() {
        let decisions = [
            Decision::Approve,
            Decision::deny("no"),
            Decision::edit(json!({"path": "/tmp"})),
            Decision::Defer,
        ];
        let written: Vec<String> = decisions
            .iter()
            .map(|d| serde_json::to_string(d).unwrap())
            .collect();
        assert_eq!(
            written,
            [
                r#"{"decision":"approve"}"#,
                r#"{"decision":"deny","reason":"no"}"#,
                r#"{"decision":"edit","arguments":{"path":"/tmp"}}"#,
                r#"{"decision":"defer"}"#,
            ]
        );
        for (form, d) in written.iter().zip(&decisions) {
            assert_eq!(&serde_json::from_str::<Decision>(form).unwrap(), d);
        }
        let read: Decision =
            serde_json::from_str(r#"{"reason":"r","x":1,"decision":"deny"}"#).unwrap();
        assert_eq!(read, Decision::deny("r"));
        let p = PendingApproval::new("c".into(), "t".into(), json!("raw"));
        let form = serde_json::to_string(&p).unwrap();
        assert_eq!(form, r#"{"call_id":"c","tool":"t","arguments":"raw"}"#);
        assert_eq!(serde_json::from_str::<PendingApproval>(&form).unwrap(), p);
        let inputs = [
            r#"{"reason":"r"}"#,
            r#"{"decision":"maybe"}"#,
            r#"{"decision":"deny"}"#,
            r#"{"decision":"edit"}"#,
            r#""approve""#,
            r#"{"decision":"deny","reason":"a","reason":"b"}"#,
        ];
        let errors: Vec<String> = inputs
            .iter()
            .map(|s| serde_json::from_str::<Decision>(s).unwrap_err().to_string())
            .collect();
        let expected: &[&str] = &[
            // The tag is read after the whole object (`serde_macros`), so its
            // errors carry no position.
            r"missing field `decision`",
            r"unknown variant `maybe`, expected one of `approve`, `deny`, `edit`, `defer`",
            r"missing field `reason`",
            r"missing field `arguments`",
            r#"invalid type: string "approve", expected an object at line 1 column 9"#,
            // Refused, as the derive refused it (since main's e589090).
            "duplicate field `reason`",
        ];
        assert_eq!(errors, expected, "errors:\n{}", errors.join("\n"));
    }
}
