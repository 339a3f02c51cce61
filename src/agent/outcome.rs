//! What a run reports: [`Outcome`].

#[cfg(feature = "budgets")]
use crate::Spend;
use crate::approval::PendingApproval;
use crate::{FinishReason, StopReason, Usage};

/// What a finished [`run_loop`](crate::Agent::run_loop) (or
/// [`resume`](crate::Agent::resume)) reports.
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, Usage};
/// use pikuri::subagent::{Persona, SubAgents};
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.push(Reply::tool_call("agent", serde_json::json!({"name": "helper", "task": "hi"})).with_usage(100, 10));
/// server.push(Reply::text("hi").with_usage(20, 2)); // the sub-agent
/// server.push(Reply::text("It said hi.").with_usage(130, 5));
/// let personas = vec![Persona::new("helper", "Says hi.", "You say hi.", 3)];
/// let mut agent = Agent::builder(server.transport()).add_extension(SubAgents::new(personas)?).build()?;
/// let outcome = agent.run_loop("delegate")?;
/// assert_eq!(outcome.requests, 3);
/// assert_eq!(outcome.usage, Usage::new().with_input(250).with_output(17));
/// assert_eq!(outcome.usage.total(), 267);
/// assert_eq!(agent.total_usage(), outcome.usage);
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// Why the run stopped: [`StopReason::Completed`],
    /// [`StopReason::Incomplete`] (the final answer was cut short),
    /// [`StopReason::Synthesized`], [`StopReason::ApprovalPending`] or
    /// [`StopReason::Guardrail`] (an input guard blocked the message: the
    /// answer is the guard's) (the others arrive as errors).
    pub stop_reason: StopReason,
    /// Why the final answer ended (the synthesizer's, when it wrote it;
    /// [`FinishReason::ToolCalls`] with [`StopReason::ApprovalPending`]).
    /// Anything but [`FinishReason::Complete`] and
    /// [`FinishReason::ToolCalls`] comes with [`StopReason::Incomplete`].
    ///
    /// ```
    /// use pikuri::{Agent, FinishReason, StopReason};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::text("The three causes are: first,").with_finish_reason("length"));
    /// let mut agent = Agent::builder(server.transport()).build()?;
    /// let outcome = agent.run_loop("Name the three causes.")?;
    /// assert_eq!(outcome.stop_reason, StopReason::Incomplete);
    /// assert_eq!(outcome.finish, FinishReason::Length);
    /// assert_eq!(outcome.answer.as_deref(), Some("The three causes are: first,"));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub finish: FinishReason,
    /// The final answer ([`Agent::last_assistant_content`](crate::Agent::last_assistant_content)).
    pub answer: Option<String>,
    /// Tool calls made in this turn.
    pub steps: u32,
    /// The tokens of every request of the run: this agent's, its
    /// sub-agents', the synthesizer's and the compactor's, summed field by
    /// field (also on the run's [`Event::Stopped`](crate::Event::Stopped)).
    pub usage: Usage,
    /// How many requests were answered in the run, sub-agents' and the
    /// synthesizer's included.
    pub requests: u32,
    /// What the run spent, in tokens, tool calls (sub-agents' included),
    /// time and, with a [`PriceTable`](crate::budget::PriceTable), money:
    /// this run's, a per-turn figure (see [`Budget`](crate::Budget#what-counts)).
    /// A sub-agent's outcome shows the count of the whole run so far.
    /// Boxed, so an `Outcome` stays small to move. Needs the `budgets`
    /// feature (without it nothing counts a run's spend).
    #[cfg(feature = "budgets")]
    pub spend: Box<Spend>,
    /// With [`StopReason::ApprovalPending`], the calls awaiting the host's
    /// decision ([`Agent::pending_approvals`](crate::Agent::pending_approvals)); empty otherwise.
    pub pending_approvals: Vec<PendingApproval>,
}
