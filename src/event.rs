//! The event stream: [`Event`], [`StopReason`] and [`CompactionStrategy`];
//! the ordering rules and the JSON form are documented on [`Event`].

use std::sync::Arc;

use serde_json::Value;

use crate::guard::{Action, Point};
use crate::serde_macros::{json_enum, json_tagged};
use crate::spend::Limit;
use crate::{ChatTransport, FinishReason, Spend, Usage};

/// How older turns are removed by a
/// [`Compaction`](crate::compaction::Compaction).
///
/// Public as `pikuri::compaction::CompactionStrategy`. Defined with the
/// events because [`Event::Compacted`] carries it: in the agent module, the
/// events would import the agent that imports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompactionStrategy {
    /// Replace them with a summary written by a tools-free child agent (one
    /// extra request).
    Summarize,
    /// Drop them (no request; the model forgets them).
    DropOldest,
}

json_enum! {
    Serialize, Deserialize for CompactionStrategy {
        Summarize = "summarize",
        DropOldest = "drop_oldest",
    }

    /// The snake_case name, as in JSON.
    pub fn as_str;
}

/// Why a run stopped.
///
/// Only [`Completed`](StopReason::Completed) says the model ended its final
/// answer where it meant to; an answer cut short (by the token limit, a
/// filter or the server) ends the run with
/// [`Incomplete`](StopReason::Incomplete), and
/// [`Outcome::finish`](crate::Outcome::finish) says how it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// The model answered without calling a tool, and ended its answer
    /// itself ([`FinishReason::Complete`]).
    Completed,
    /// The final answer did not end where the model meant it to: cut by the
    /// token limit ([`FinishReason::Length`]), withheld by a filter
    /// ([`FinishReason::Filtered`]) or ended by the server
    /// ([`FinishReason::ServerCut`]), as
    /// [`Outcome::finish`](crate::Outcome::finish) says. What arrived is the
    /// answer ([`Outcome::answer`](crate::Outcome::answer)) and stays in the
    /// history; the next turn goes on as usual (`"continue"` asks for the
    /// rest). A synthesized answer that was cut ends so too.
    Incomplete,
    /// The step budget ran out and the synthesizer produced the answer.
    Synthesized,
    /// The step budget ran out under the `Raise` policy.
    StepLimit,
    /// A [`Budget`](crate::Budget) limit was reached under the `Raise`
    /// policy ([`Error::BudgetExceeded`](crate::Error::BudgetExceeded) names it).
    Budget,
    /// The run was cancelled.
    Cancelled,
    /// The run failed (HTTP, transport, protocol error).
    Error,
    /// An [`Approver`](crate::approval::Approver) deferred a tool call: the turn ended
    /// with calls awaiting the host's decision
    /// ([`Outcome::pending_approvals`](crate::Outcome::pending_approvals),
    /// [`Agent::resume`](crate::Agent::resume)).
    ApprovalPending,
    /// A [guard](crate::guard) ended the run: an input guard blocked the
    /// message with its own answer ([`Outcome`](crate::Outcome) carries
    /// it), or a guard stopped the run ([`Error::Guardrail`](crate::Error::Guardrail)).
    Guardrail,
}

json_enum! {
    Serialize, Deserialize for StopReason {
        Completed = "completed",
        Incomplete = "incomplete",
        Synthesized = "synthesized",
        StepLimit = "step_limit",
        Budget = "budget",
        Cancelled = "cancelled",
        Error = "error",
        ApprovalPending = "approval_pending",
        Guardrail = "guardrail",
    }

    /// The snake_case name, as in JSON.
    pub fn as_str;
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing an agent narrates. The ordering rules and the JSON form follow.
///
/// Every variant carries `agent`: the id of the agent that emitted it (empty
/// for the main agent, `"researcher 0"` for a sub-agent). Match with `..` and a
/// `_ => {}` arm: the enum is `#[non_exhaustive]` and listeners must ignore
/// what they do not know.
///
/// # Ordering
///
/// - All of one round's deltas ([`Event::ThinkingDelta`], [`Event::AssistantDelta`])
///   arrive before that round's bookend: [`Event::Thinking`], [`Event::Assistant`]
///   (each only when non-empty), then [`Event::Tokens`] (always).
/// - For each tool call: [`Event::ToolCall`], then [`Event::ToolResult`] with the same id;
///   between them [`Event::ToolEdited`] when an approver edited the arguments,
///   or [`Event::ToolDenied`] when it denied the call. A deferred call gets its
///   `ToolResult` in the run that answers it ([`Agent::resume`](crate::Agent::resume),
///   which emits `ToolCall` again first, or the next `run_loop`, which answers it
///   "not run" with a `ToolResult` alone).
/// - Mid-loop injections arrive as [`Event::UserTurn`] with `mid_loop: true`
///   after the tool results of the batch they were delivered in.
/// - A run a crash cut off, finished by [`Agent::resume_run`](crate::Agent::resume_run),
///   starts with [`Event::Resumed`] and the replay of the stored turn it
///   counts: there too each `ToolCall` comes before its `ToolResult`.
/// - Every [`run_loop`](crate::Agent::run_loop) ends with exactly one
///   [`Event::Stopped`] for the agent that ran it.
///
/// Deltas are a preview: consume [`Event::Assistant`] for the exact text.
///
/// # JSON
///
/// An event serializes to one JSON object with a `"type"` field (the
/// snake_case variant name) and an `"agent"` field (the emitting agent's id,
/// empty for the main agent):
///
/// ```
/// use pikuri::Event;
/// let e = Event::AssistantDelta { agent: "".into(), content: "Hi".into() };
/// let json = serde_json::to_string(&e).unwrap();
/// assert_eq!(json, r#"{"type":"assistant_delta","agent":"","content":"Hi"}"#);
/// let back: Event = serde_json::from_str(&json).unwrap();
/// assert_eq!(back, e);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A user message entered the conversation: at turn start
    /// (`mid_loop: false`) or drained from the [`Interloper`](crate::Interloper)
    /// after a tool batch (`mid_loop: true`).
    UserTurn {
        /// Emitting agent.
        agent: Arc<str>,
        /// The message.
        content: String,
        /// Whether it was injected mid-turn.
        mid_loop: bool,
    },
    /// The complete reasoning text of an assistant message (never empty).
    Thinking {
        /// Emitting agent.
        agent: Arc<str>,
        /// Reasoning text.
        content: String,
    },
    /// A streamed fragment of reasoning (never empty).
    ThinkingDelta {
        /// Emitting agent.
        agent: Arc<str>,
        /// The fragment.
        content: String,
    },
    /// The complete text of an assistant message (never empty), and why it
    /// ended.
    Assistant {
        /// Emitting agent.
        agent: Arc<str>,
        /// The text (often Markdown).
        content: String,
        /// Why the message ended: anything but [`FinishReason::Complete`]
        /// and [`FinishReason::ToolCalls`] means the text is cut short.
        /// Absent in JSON written before it existed: read as complete.
        finish: FinishReason,
    },
    /// A streamed fragment of assistant text (never empty).
    AssistantDelta {
        /// Emitting agent.
        agent: Arc<str>,
        /// The fragment.
        content: String,
    },
    /// The model asked for a tool; emitted before the tool runs.
    ToolCall {
        /// Emitting agent.
        agent: Arc<str>,
        /// Call id (correlates with [`Event::ToolResult`]; an addition over pikuri).
        id: String,
        /// Tool name, as the model wrote it.
        name: String,
        /// Arguments, unvalidated: the parsed JSON, or the raw text as a JSON
        /// string when it does not parse.
        arguments: Value,
    },
    /// A tool call's result, as sent back to the model. Recoverable failures
    /// arrive as `"Error: ..."` text.
    ToolResult {
        /// Emitting agent.
        agent: Arc<str>,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// The result text.
        content: String,
    },
    /// An [`Approver`](crate::approval::Approver) (or the host, through
    /// [`Agent::resume`](crate::Agent::resume)) denied a tool call; the
    /// [`Event::ToolResult`] with the observation the model gets follows.
    ToolDenied {
        /// Emitting agent.
        agent: Arc<str>,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Why, as the approver gave it.
        reason: String,
    },
    /// An [`Approver`](crate::approval::Approver) approved a tool call with edited
    /// arguments, which passed validation; the tool runs on these.
    ToolEdited {
        /// Emitting agent.
        agent: Arc<str>,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// The arguments the tool runs on (validated, normalized).
        arguments: Value,
    },
    /// A [guard](crate::guard) returned a verdict other than allow (or
    /// failed, which is a stop). Emitted before the loop acts on it: a
    /// replaced text, a blocked message, a retried answer, a rejected call
    /// or a stop ([`Event::Stopped`] with [`StopReason::Guardrail`]
    /// follows).
    Guard {
        /// Emitting agent.
        agent: Arc<str>,
        /// The name the guard was registered under.
        guard: String,
        /// Where it ran.
        point: Point,
        /// What it decided.
        action: Action,
        /// The guard's text for the action: the answer of a block, the
        /// feedback of a retry, the message of a reject, the reason of a
        /// stop; empty for a replace (the replaced text may be a secret).
        detail: String,
        /// The tool call's id at the tool points; empty at the others.
        call_id: String,
    },
    /// Token usage of one assistant message; emitted for every one, including
    /// pure tool-call messages. `None` means not reported.
    Tokens {
        /// Emitting agent.
        agent: Arc<str>,
        /// Prompt tokens processed anew.
        input: Option<u64>,
        /// Completion tokens.
        output: Option<u64>,
        /// Prompt tokens served from cache.
        cached: Option<u64>,
        /// Prompt tokens written to cache.
        cache_creation: Option<u64>,
        /// Reasoning tokens.
        thinking: Option<u64>,
        /// The model id the server reported (or the requested one).
        model_id: Option<String>,
        /// The id the server gave this answer (chat completions' `id`,
        /// Anthropic's message `id`, the Responses `response.id`; at most
        /// 100 characters), when it gave one. Traces report it as
        /// `gen_ai.response.id`.
        response_id: Option<String>,
    },
    /// The step budget ran out and the synthesizer is about to answer.
    FallbackNotice {
        /// Emitting agent.
        agent: Arc<str>,
        /// Human-readable reason.
        reason: String,
    },
    /// The run was cancelled; no recovery follows. Emitted once per agent
    /// whose run the cancel ended: the agent whose `run_loop` returns
    /// [`Error::Cancelled`](crate::Error::Cancelled), and each sub-agent it
    /// ended on the way; never by the synthesizer or the compactor, whose
    /// cancel is their parent's.
    ///
    /// The history keeps nothing of a streamed answer the cancel cut
    /// short (the next request must not carry half a message); its text
    /// so far is here instead, and whatever usage its chunks reported
    /// counts in the run's usage ([`Event::Stopped`],
    /// [`Agent::total_usage`](crate::Agent::total_usage)). Most servers
    /// report usage only in a stream's last chunk, so a stream cancelled
    /// early usually adds no tokens.
    Cancelled {
        /// Emitting agent.
        agent: Arc<str>,
        /// The assistant text streamed before the cancel in the request it
        /// cut short; empty when the cancel came between requests (or the
        /// answer was not streamed).
        partial_answer: String,
    },
    /// The context window cap: at construction and after each model switch.
    ContextCap {
        /// Emitting agent.
        agent: Arc<str>,
        /// The cap in tokens, `None` when unknown.
        cap: Option<u64>,
    },
    /// The model changed (emitted just before the new [`Event::ContextCap`]).
    ///
    /// The transports are boxed: an event takes the room of the largest
    /// variant wherever it is kept (a listener's queue, a recorded list),
    /// and two transports inline made every event 600 bytes (now 144).
    ModelSwitched {
        /// Emitting agent.
        agent: Arc<str>,
        /// Previous transport (the API key is never serialized).
        from: Box<ChatTransport>,
        /// New transport.
        to: Box<ChatTransport>,
    },
    /// The conversation was cleared back to the system prompt.
    Reset {
        /// Emitting agent.
        agent: Arc<str>,
    },
    /// A history was loaded (always follows a [`Event::Reset`]).
    HistoryLoaded {
        /// Emitting agent.
        agent: Arc<str>,
        /// Number of messages restored.
        messages: usize,
        /// Usage of the last restored assistant message, so a context readout
        /// can resume.
        tokens: Option<Usage>,
    },
    /// An extension appended a system message after the user turn.
    SystemInjected {
        /// Emitting agent.
        agent: Arc<str>,
        /// The injected text.
        content: String,
    },
    /// An extension's own event (pikuri's domain events). A `transient` event
    /// replaces the previous transient event of the same `name` (progress).
    Domain {
        /// Emitting agent.
        agent: Arc<str>,
        /// The event's name, e.g. `"tasks.list_changed"`.
        name: String,
        /// Its payload.
        payload: Value,
        /// Whether a later event of this name replaces it.
        transient: bool,
    },
    /// A request failed with a retryable error and will be retried.
    Retrying {
        /// Emitting agent.
        agent: Arc<str>,
        /// Attempt number that failed (1 for the first).
        attempt: u32,
        /// Short description of the failure.
        error: String,
        /// How long the client waits before the next attempt.
        wait_ms: u64,
    },
    /// A model request failed, after its retries: an error status, a
    /// transport failure, a body that did not decode, or a cancel while it
    /// was in flight. Once per failed request, before what follows it (the
    /// run's end, an [`Event::ModelFallback`], a compaction and a second
    /// try). An addition over pikuri.
    RequestFailed {
        /// Emitting agent.
        agent: Arc<str>,
        /// The HTTP status the server answered with, if it answered.
        status: Option<u16>,
        /// The failure's [`ErrorKind`](crate::ErrorKind) in snake_case
        /// (`auth`, `timeout`, `cancelled`, `model_not_found`, ...).
        kind: String,
        /// The failure, as the error displays it.
        error: String,
    },
    /// The conversation was compacted: automatically before a request, after
    /// the server rejected one as too long, or by
    /// [`Agent::compact`](crate::Agent::compact). With the `Summarize`
    /// strategy it follows the compactor child's own events (agent id
    /// `"compactor"`). Token figures are estimates (see
    /// [`Compaction`](crate::compaction::Compaction)).
    Compacted {
        /// Emitting agent.
        agent: Arc<str>,
        /// How the older turns were removed.
        strategy: CompactionStrategy,
        /// Messages in the history before.
        messages_before: usize,
        /// Messages after (the summary included).
        messages_after: usize,
        /// Estimated tokens of the next request before.
        tokens_before: u64,
        /// Estimated tokens after.
        tokens_after: u64,
    },
    /// A request failed after its retries and the turn moved to the next
    /// transport of the fallback list (emitted just before the new
    /// [`Event::ContextCap`]).
    ModelFallback {
        /// Emitting agent.
        agent: Arc<str>,
        /// The transport that failed (the API key is never serialized).
        /// Boxed, as in [`Event::ModelSwitched`].
        from: Box<ChatTransport>,
        /// The transport that takes over.
        to: Box<ChatTransport>,
        /// The failure, as the error displays it.
        reason: String,
    },
    /// [`Agent::resume_run`](crate::Agent::resume_run) finishes a run a
    /// crash cut off: the next `replayed` events of this agent re-announce
    /// what the journal holds of the cut-off turn, so a listener of the new
    /// process alone can render the whole turn. They are, in history
    /// order: [`Event::UserTurn`] for its user messages (`mid_loop: true`
    /// for all but the first), [`Event::SystemInjected`] for its system
    /// messages, for each stored answer [`Event::Thinking`] and
    /// [`Event::Assistant`] (when non-empty) and an [`Event::ToolCall`] per
    /// call, and an [`Event::ToolResult`] per stored result. Not replayed:
    /// deltas, [`Event::Tokens`] (the usage was counted in the first
    /// process), approvals, and the `ToolCall` of a call the resumed run
    /// reviews or runs again (it gets its `ToolCall` then, as in any run).
    /// A listener that saw the first process (one that outlived it) may
    /// skip the replayed events.
    Resumed {
        /// Emitting agent.
        agent: Arc<str>,
        /// How many events follow that replay the stored turn.
        replayed: usize,
    },
    /// A [`Budget`](crate::Budget) limit was reached: a request was not
    /// sent, or a tool call not run. The policy decides what follows
    /// ([`Event::FallbackNotice`] and the synthesizer, or the run's end).
    BudgetExceeded {
        /// Emitting agent (a sub-agent when its request tripped it).
        agent: Arc<str>,
        /// The limit reached.
        limit: Limit,
        /// What the run had spent, its whole tree's (the agent's lifetime
        /// spend when `lifetime`).
        spend: Spend,
        /// Whether the limit is over the agent's lifetime
        /// ([`Budget::lifetime`](crate::Budget::lifetime)), not the run's.
        lifetime: bool,
    },
    /// What the run spent, just before its [`Event::Stopped`]: from the
    /// agent the host called (not a sub-agent: the count is the whole
    /// tree's), and only when it has a [`Budget`](crate::Budget) with a
    /// limit or prices (as [`Outcome::spend`](crate::Outcome::spend)).
    Spent {
        /// Emitting agent.
        agent: Arc<str>,
        /// The run's spend, its money included with a price table.
        spend: Spend,
    },
    /// The run ended; the last event of every `run_loop`.
    Stopped {
        /// Emitting agent.
        agent: Arc<str>,
        /// Why.
        reason: StopReason,
        /// The tokens of every request of the run, its sub-agents' and the
        /// synthesizer's included (as [`Outcome::usage`](crate::Outcome::usage)).
        usage: Usage,
    },
}

/// The finish of an [`Event::Assistant`] read from JSON that has none.
fn complete() -> FinishReason {
    FinishReason::Complete
}

json_tagged! {
    Serialize, Deserialize for Event, tag = "type" {
        UserTurn = "user_turn" { agent, content, mid_loop },
        Thinking = "thinking" { agent, content },
        ThinkingDelta = "thinking_delta" { agent, content },
        Assistant = "assistant" { agent, content, finish [default = complete] },
        AssistantDelta = "assistant_delta" { agent, content },
        ToolCall = "tool_call" { agent, id, name, arguments },
        ToolResult = "tool_result" { agent, id, name, content },
        ToolDenied = "tool_denied" { agent, id, name, reason },
        ToolEdited = "tool_edited" { agent, id, name, arguments },
        Guard = "guard" { agent, guard, point, action, detail, call_id },
        Tokens = "tokens" {
            agent,
            input,
            output,
            cached,
            cache_creation,
            thinking,
            model_id,
            response_id [opt],
        },
        FallbackNotice = "fallback_notice" { agent, reason },
        Cancelled = "cancelled" { agent, partial_answer [default, skip_if = String::is_empty] },
        ContextCap = "context_cap" { agent, cap },
        ModelSwitched = "model_switched" { agent, from, to },
        Reset = "reset" { agent },
        HistoryLoaded = "history_loaded" { agent, messages, tokens },
        SystemInjected = "system_injected" { agent, content },
        Domain = "domain" { agent, name, payload, transient },
        Retrying = "retrying" { agent, attempt, error, wait_ms },
        RequestFailed = "request_failed" { agent, status [opt], kind, error },
        Compacted = "compacted" {
            agent,
            strategy,
            messages_before,
            messages_after,
            tokens_before,
            tokens_after,
        },
        ModelFallback = "model_fallback" { agent, from, to, reason },
        Resumed = "resumed" { agent, replayed },
        BudgetExceeded = "budget_exceeded" {
            agent,
            limit,
            spend,
            lifetime [default, skip_if = std::ops::Not::not],
        },
        Spent = "spent" { agent, spend },
        Stopped = "stopped" { agent, reason, usage [default] },
    }
}

impl Event {
    /// The id of the agent that emitted this event.
    pub fn agent(&self) -> &str {
        match self {
            Event::UserTurn { agent, .. }
            | Event::Thinking { agent, .. }
            | Event::ThinkingDelta { agent, .. }
            | Event::Assistant { agent, .. }
            | Event::AssistantDelta { agent, .. }
            | Event::ToolCall { agent, .. }
            | Event::ToolResult { agent, .. }
            | Event::ToolDenied { agent, .. }
            | Event::ToolEdited { agent, .. }
            | Event::Guard { agent, .. }
            | Event::Tokens { agent, .. }
            | Event::FallbackNotice { agent, .. }
            | Event::Cancelled { agent, .. }
            | Event::ContextCap { agent, .. }
            | Event::ModelSwitched { agent, .. }
            | Event::Reset { agent }
            | Event::HistoryLoaded { agent, .. }
            | Event::SystemInjected { agent, .. }
            | Event::Domain { agent, .. }
            | Event::Retrying { agent, .. }
            | Event::RequestFailed { agent, .. }
            | Event::Compacted { agent, .. }
            | Event::ModelFallback { agent, .. }
            | Event::Resumed { agent, .. }
            | Event::BudgetExceeded { agent, .. }
            | Event::Spent { agent, .. }
            | Event::Stopped { agent, .. } => agent,
        }
    }

    /// The snake_case variant name, as in the JSON `"type"` field.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::UserTurn { .. } => "user_turn",
            Event::Thinking { .. } => "thinking",
            Event::ThinkingDelta { .. } => "thinking_delta",
            Event::Assistant { .. } => "assistant",
            Event::AssistantDelta { .. } => "assistant_delta",
            Event::ToolCall { .. } => "tool_call",
            Event::ToolResult { .. } => "tool_result",
            Event::ToolDenied { .. } => "tool_denied",
            Event::Guard { .. } => "guard",
            Event::ToolEdited { .. } => "tool_edited",
            Event::Tokens { .. } => "tokens",
            Event::FallbackNotice { .. } => "fallback_notice",
            Event::Cancelled { .. } => "cancelled",
            Event::ContextCap { .. } => "context_cap",
            Event::ModelSwitched { .. } => "model_switched",
            Event::Reset { .. } => "reset",
            Event::HistoryLoaded { .. } => "history_loaded",
            Event::SystemInjected { .. } => "system_injected",
            Event::Domain { .. } => "domain",
            Event::Retrying { .. } => "retrying",
            Event::RequestFailed { .. } => "request_failed",
            Event::Compacted { .. } => "compacted",
            Event::ModelFallback { .. } => "model_fallback",
            Event::Resumed { .. } => "resumed",
            Event::BudgetExceeded { .. } => "budget_exceeded",
            Event::Spent { .. } => "spent",
            Event::Stopped { .. } => "stopped",
        }
    }

    /// Whether this is a streamed fragment ([`Event::AssistantDelta`] or
    /// [`Event::ThinkingDelta`]).
    pub fn is_delta(&self) -> bool {
        matches!(
            self,
            Event::AssistantDelta { .. } | Event::ThinkingDelta { .. }
        )
    }

    /// The text of `next` if it continues this delta: a delta of the same
    /// kind from the same agent, which a listener that fell behind may get
    /// joined to this one (see [`Listener`](crate::Listener), "Backpressure").
    #[cfg_attr(
        not(feature = "hub"),
        allow(dead_code, reason = "only the hub joins deltas")
    )]
    pub(crate) fn continued_by<'e>(&self, next: &'e Event) -> Option<&'e str> {
        match next {
            Event::AssistantDelta { agent, content } => {
                self.is_delta_of(agent, false).then_some(content)
            }
            Event::ThinkingDelta { agent, content } => {
                self.is_delta_of(agent, true).then_some(content)
            }
            _ => None,
        }
    }

    /// Whether this is a delta of `agent`, of reasoning if `thinking`, else
    /// of the answer: one a delta of that kind from that agent may be
    /// joined to.
    #[cfg_attr(
        not(feature = "hub"),
        allow(dead_code, reason = "only the hub joins deltas")
    )]
    pub(crate) fn is_delta_of(&self, agent: &str, thinking: bool) -> bool {
        match self {
            Event::AssistantDelta { agent: a, .. } => !thinking && **a == *agent,
            Event::ThinkingDelta { agent: a, .. } => thinking && **a == *agent,
            _ => false,
        }
    }

    /// The length of this delta's content in bytes; 0 for other events.
    #[cfg_attr(
        not(feature = "hub"),
        allow(dead_code, reason = "only the hub joins deltas")
    )]
    pub(crate) fn delta_len(&self) -> usize {
        match self {
            Event::AssistantDelta { content, .. } | Event::ThinkingDelta { content, .. } => {
                content.len()
            }
            _ => 0,
        }
    }

    /// Append `text` to this delta's content; nothing for other events.
    #[cfg_attr(
        not(feature = "hub"),
        allow(dead_code, reason = "only the hub joins deltas")
    )]
    pub(crate) fn append_delta(&mut self, text: &str) {
        if let Event::AssistantDelta { content, .. } | Event::ThinkingDelta { content, .. } = self {
            content.push_str(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::{CompactionStrategy, Event, StopReason};
    use crate::guard::{Action, Point};
    use crate::spend::{Cost, Limit};
    use crate::{Api, ChatTransport, FinishReason, ModelSettings, Spend, Usage};

    /// One event of each variant, optional fields set and unset.
    #[allow(clippy::too_many_lines, reason = "one literal per variant")]
    fn every_event() -> Vec<Event> {
        let a = || Arc::<str>::from("a");
        let from = ChatTransport::new("m1");
        let to = ChatTransport::new("m2")
            .with_api(Api::Gemini)
            .with_api_base("http://h/v1")
            .with_provider("p")
            .with_context_window(Some(9))
            .with_prompt_caching(false)
            .with_settings(ModelSettings::new().with_seed(3));
        let usage = Usage::new().with_input(1).with_output(2);
        let spend = Spend {
            requests: 2,
            usage,
            tool_calls: 1,
            cost: Some(Cost::from_pico_usd(5)),
            elapsed_ms: 7,
        };
        vec![
            Event::UserTurn {
                agent: a(),
                content: "q".into(),
                mid_loop: true,
            },
            Event::Thinking {
                agent: a(),
                content: "t".into(),
            },
            Event::ThinkingDelta {
                agent: a(),
                content: "t".into(),
            },
            Event::Assistant {
                agent: a(),
                content: "x".into(),
                finish: FinishReason::Length,
            },
            Event::AssistantDelta {
                agent: a(),
                content: "x".into(),
            },
            Event::ToolCall {
                agent: a(),
                id: "c".into(),
                name: "n".into(),
                arguments: json!({"k": [1]}),
            },
            Event::ToolResult {
                agent: a(),
                id: "c".into(),
                name: "n".into(),
                content: "r".into(),
            },
            Event::ToolDenied {
                agent: a(),
                id: "c".into(),
                name: "n".into(),
                reason: "no".into(),
            },
            Event::ToolEdited {
                agent: a(),
                id: "c".into(),
                name: "n".into(),
                arguments: json!("raw"),
            },
            Event::Guard {
                agent: a(),
                guard: "g".into(),
                point: Point::ToolInput,
                action: Action::Reject,
                detail: "d".into(),
                call_id: "c".into(),
            },
            Event::Tokens {
                agent: a(),
                input: Some(1),
                output: None,
                cached: Some(0),
                cache_creation: None,
                thinking: Some(3),
                model_id: None,
                response_id: None,
            },
            Event::Tokens {
                agent: a(),
                input: None,
                output: Some(2),
                cached: None,
                cache_creation: Some(4),
                thinking: None,
                model_id: Some("m".into()),
                response_id: Some("r".into()),
            },
            Event::FallbackNotice {
                agent: a(),
                reason: "why".into(),
            },
            Event::Cancelled {
                agent: a(),
                partial_answer: String::new(),
            },
            Event::Cancelled {
                agent: a(),
                partial_answer: "half".into(),
            },
            Event::ContextCap {
                agent: a(),
                cap: None,
            },
            Event::ContextCap {
                agent: a(),
                cap: Some(8),
            },
            Event::ModelSwitched {
                agent: a(),
                from: Box::new(from.clone()),
                to: Box::new(to.clone()),
            },
            Event::Reset { agent: a() },
            Event::HistoryLoaded {
                agent: a(),
                messages: 3,
                tokens: None,
            },
            Event::HistoryLoaded {
                agent: a(),
                messages: 3,
                tokens: Some(usage),
            },
            Event::SystemInjected {
                agent: a(),
                content: "s".into(),
            },
            Event::Domain {
                agent: a(),
                name: "x.y".into(),
                payload: json!(null),
                transient: true,
            },
            Event::Retrying {
                agent: a(),
                attempt: 1,
                error: "e".into(),
                wait_ms: 5,
            },
            Event::RequestFailed {
                agent: a(),
                status: None,
                kind: "timeout".into(),
                error: "e".into(),
            },
            Event::RequestFailed {
                agent: a(),
                status: Some(429),
                kind: "rate_limit".into(),
                error: "e".into(),
            },
            Event::Compacted {
                agent: a(),
                strategy: CompactionStrategy::DropOldest,
                messages_before: 9,
                messages_after: 3,
                tokens_before: 900,
                tokens_after: 300,
            },
            Event::ModelFallback {
                agent: a(),
                from: Box::new(from),
                to: Box::new(to),
                reason: "down".into(),
            },
            Event::Resumed {
                agent: a(),
                replayed: 4,
            },
            Event::BudgetExceeded {
                agent: a(),
                limit: Limit::WallTime,
                spend,
                lifetime: false,
            },
            Event::BudgetExceeded {
                agent: a(),
                limit: Limit::Cost,
                spend: Spend::default(),
                lifetime: true,
            },
            Event::Spent { agent: a(), spend },
            Event::Stopped {
                agent: a(),
                reason: StopReason::ApprovalPending,
                usage: Usage::default(),
            },
        ]
    }

    /// What [`every_event`] writes, pinned: the serde derive wrote these
    /// before the impls were the crate's own.
    const FORMS: &[&str] = &[
        r#"{"type":"user_turn","agent":"a","content":"q","mid_loop":true}"#,
        r#"{"type":"thinking","agent":"a","content":"t"}"#,
        r#"{"type":"thinking_delta","agent":"a","content":"t"}"#,
        r#"{"type":"assistant","agent":"a","content":"x","finish":"length"}"#,
        r#"{"type":"assistant_delta","agent":"a","content":"x"}"#,
        r#"{"type":"tool_call","agent":"a","id":"c","name":"n","arguments":{"k":[1]}}"#,
        r#"{"type":"tool_result","agent":"a","id":"c","name":"n","content":"r"}"#,
        r#"{"type":"tool_denied","agent":"a","id":"c","name":"n","reason":"no"}"#,
        r#"{"type":"tool_edited","agent":"a","id":"c","name":"n","arguments":"raw"}"#,
        r#"{"type":"guard","agent":"a","guard":"g","point":"tool_input","action":"reject","detail":"d","call_id":"c"}"#,
        r#"{"type":"tokens","agent":"a","input":1,"output":null,"cached":0,"cache_creation":null,"thinking":3,"model_id":null}"#,
        r#"{"type":"tokens","agent":"a","input":null,"output":2,"cached":null,"cache_creation":4,"thinking":null,"model_id":"m","response_id":"r"}"#,
        r#"{"type":"fallback_notice","agent":"a","reason":"why"}"#,
        r#"{"type":"cancelled","agent":"a"}"#,
        r#"{"type":"cancelled","agent":"a","partial_answer":"half"}"#,
        r#"{"type":"context_cap","agent":"a","cap":null}"#,
        r#"{"type":"context_cap","agent":"a","cap":8}"#,
        r#"{"type":"model_switched","agent":"a","from":{"model":"m1"},"to":{"api":"gemini","model":"m2","provider":"p","api_base":"http://h/v1","context_window":9,"no_auto_cache":true,"settings":{"seed":3}}}"#,
        r#"{"type":"reset","agent":"a"}"#,
        r#"{"type":"history_loaded","agent":"a","messages":3,"tokens":null}"#,
        r#"{"type":"history_loaded","agent":"a","messages":3,"tokens":{"input":1,"output":2}}"#,
        r#"{"type":"system_injected","agent":"a","content":"s"}"#,
        r#"{"type":"domain","agent":"a","name":"x.y","payload":null,"transient":true}"#,
        r#"{"type":"retrying","agent":"a","attempt":1,"error":"e","wait_ms":5}"#,
        r#"{"type":"request_failed","agent":"a","kind":"timeout","error":"e"}"#,
        r#"{"type":"request_failed","agent":"a","status":429,"kind":"rate_limit","error":"e"}"#,
        r#"{"type":"compacted","agent":"a","strategy":"drop_oldest","messages_before":9,"messages_after":3,"tokens_before":900,"tokens_after":300}"#,
        r#"{"type":"model_fallback","agent":"a","from":{"model":"m1"},"to":{"api":"gemini","model":"m2","provider":"p","api_base":"http://h/v1","context_window":9,"no_auto_cache":true,"settings":{"seed":3}},"reason":"down"}"#,
        r#"{"type":"resumed","agent":"a","replayed":4}"#,
        r#"{"type":"budget_exceeded","agent":"a","limit":"wall_time","spend":{"requests":2,"usage":{"input":1,"output":2},"tool_calls":1,"cost":5,"elapsed_ms":7}}"#,
        r#"{"type":"budget_exceeded","agent":"a","limit":"cost","spend":{"requests":0,"usage":{},"tool_calls":0,"cost":null,"elapsed_ms":0},"lifetime":true}"#,
        r#"{"type":"spent","agent":"a","spend":{"requests":2,"usage":{"input":1,"output":2},"tool_calls":1,"cost":5,"elapsed_ms":7}}"#,
        r#"{"type":"stopped","agent":"a","reason":"approval_pending","usage":{}}"#,
    ];

    #[test]
    fn every_event_writes_and_reads_its_pinned_json() {
        let events = every_event();
        let written: Vec<String> = events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap())
            .collect();
        assert_eq!(written, FORMS, "written:\n{}", written.join("\n"));
        for (e, form) in events.iter().zip(FORMS) {
            assert_eq!(&serde_json::from_str::<Event>(form).unwrap(), e, "{form}");
            let value: serde_json::Value = serde_json::from_str(form).unwrap();
            assert_eq!(
                &serde_json::from_value::<Event>(value).unwrap(),
                e,
                "{form}"
            );
        }
    }

    #[test]
    fn an_event_reads_its_tag_anywhere_and_defaults_absent_fields() {
        let read = |s: &str| serde_json::from_str::<Event>(s).unwrap();
        let a = || Arc::<str>::from("a");
        assert_eq!(
            read(r#"{"agent":"a","content":"x","extra":[1],"type":"assistant"}"#),
            Event::Assistant {
                agent: a(),
                content: "x".into(),
                finish: FinishReason::Complete
            }
        );
        assert_eq!(
            read(r#"{"type":"stopped","agent":"a","reason":"completed"}"#),
            Event::Stopped {
                agent: a(),
                reason: StopReason::Completed,
                usage: Usage::default()
            }
        );
        assert_eq!(
            read(r#"{"type":"cancelled","agent":"a"}"#),
            Event::Cancelled {
                agent: a(),
                partial_answer: String::new()
            }
        );
        assert_eq!(
            read(r#"{"type":"tokens","agent":"a"}"#),
            Event::Tokens {
                agent: a(),
                input: None,
                output: None,
                cached: None,
                cache_creation: None,
                thinking: None,
                model_id: None,
                response_id: None,
            }
        );
        let e = read(r#"{"type":"model_switched","agent":"a","from":{"api_key":"k"},"to":{}}"#);
        let Event::ModelSwitched { from, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!(*from, ChatTransport::default(), "an api_key is never read");
    }

    #[test]
    fn an_event_refuses_what_the_derive_refused() {
        let inputs = [
            r#"{"agent":"a"}"#,
            r#"{"type":"nope","agent":"a"}"#,
            r#"{"type":"reset"}"#,
            r#"{"type":7,"agent":"a"}"#,
            r#"{"type":"tokens","agent":"a","input":-1}"#,
            r#"{"type":"compacted","agent":"a","strategy":"fold","messages_before":1,"messages_after":1,"tokens_before":1,"tokens_after":1}"#,
            r#"{"type":"stopped","agent":"a","reason":"done"}"#,
            r#"{"type":"reset","agent":"a","agent":"b"}"#,
            r#"{"type":"reset","type":"reset","agent":"a"}"#,
        ];
        let errors: Vec<String> = inputs
            .iter()
            .map(|s| serde_json::from_str::<Event>(s).unwrap_err().to_string())
            .collect();
        let expected: &[&str] = &[
            // The tag is read after the whole object (`serde_macros`), so its
            // errors carry no position, and a tag that is no string says so.
            r"missing field `type`",
            r"unknown variant `nope`, expected one of `user_turn`, `thinking`, `thinking_delta`, `assistant`, `assistant_delta`, `tool_call`, `tool_result`, `tool_denied`, `tool_edited`, `guard`, `tokens`, `fallback_notice`, `cancelled`, `context_cap`, `model_switched`, `reset`, `history_loaded`, `system_injected`, `domain`, `retrying`, `request_failed`, `compacted`, `model_fallback`, `resumed`, `budget_exceeded`, `spent`, `stopped`",
            r"missing field `agent`",
            r"`type` is not a string",
            r"invalid value: integer `-1`, expected u64",
            r"unknown variant `fold`, expected `summarize` or `drop_oldest`",
            r"unknown variant `done`, expected one of `completed`, `incomplete`, `synthesized`, `step_limit`, `budget`, `cancelled`, `error`, `approval_pending`, `guardrail`",
            // A key twice is refused, as the derive refused it.
            "duplicate field `agent`",
            "duplicate field `type`",
        ];
        assert_eq!(errors, expected, "errors:\n{}", errors.join("\n"));
    }

    /// An event takes the room of its largest variant wherever it is kept
    /// (see [`Event::ModelSwitched`](super::Event::ModelSwitched)): a
    /// variant that would grow it past this is boxed.
    #[test]
    fn an_event_is_small() {
        let size = size_of::<super::Event>();
        assert!(size <= 160, "{size} bytes");
    }
}
