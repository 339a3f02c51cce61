//! What the kit captures of one run of a case ([`Run`]), and what the task
//! is handed to run it ([`TaskContext`]), with the listener that collects
//! the events.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::{Cancellable, Event, Listener, Usage};

/// The events a run keeps (deltas are never kept); those past it are
/// counted, not stored, and the usage and tool calls still count them.
pub const MAX_EVENTS: usize = 100_000;

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunStatus {
    /// The task returned an output; the evaluators judged it.
    Completed,
    /// The task returned an error (in [`Run::error`]).
    Failed,
    /// The task panicked (the message is in [`Run::error`]).
    Panicked,
    /// The task ran past the experiment's timeout; it was cancelled and
    /// left behind.
    TimedOut,
    /// The experiment was cancelled before or while the run ran.
    Cancelled,
}

crate::serde_macros::json_enum! {
    Serialize, Deserialize for RunStatus {
        Completed = "completed",
        Failed = "failed",
        Panicked = "panicked",
        TimedOut = "timed_out",
        Cancelled = "cancelled",
    }
}

/// One tool call of a run, with its result: from the run's
/// [`Event::ToolCall`] and [`Event::ToolResult`], sub-agents' included.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolCallRecord {
    /// The agent that made the call (empty for the top agent unless it has
    /// an id).
    pub agent: String,
    /// The tool's name, as the model wrote it.
    pub name: String,
    /// The arguments, as the model sent them.
    pub arguments: Value,
    /// The result the model got (`None` when the run ended first).
    pub result: Option<String>,
}

crate::serde_macros::json_struct! {
    Serialize, Deserialize for ToolCallRecord {
        agent [default, skip_if = String::is_empty],
        name,
        arguments,
        result [opt],
    }
}

impl ToolCallRecord {
    /// A call of `name` with `arguments` and `result`.
    pub fn new(
        name: impl Into<String>,
        arguments: Value,
        result: Option<String>,
    ) -> ToolCallRecord {
        ToolCallRecord {
            agent: String::new(),
            name: name.into(),
            arguments,
            result,
        }
    }
}

/// Everything the kit captured of one run of a case: the task's output or
/// error, the tool calls, usage, requests, time and cost, and (in memory
/// only) the case's input and the events. Evaluators judge it; reports
/// keep all but the input, the metadata and the events.
///
/// Two runs are equal when what a report keeps of them is: the input,
/// expected output, metadata and events are left out, so a report read
/// back equals the one saved.
///
/// # Examples
///
/// ```
/// use pikuri::evals::{Run, RunStatus, ToolCallRecord};
/// use serde_json::json;
///
/// let run = Run::from_output("4")
///     .with_tool_call(ToolCallRecord::new("calculator", json!({"expression": "2+2"}), Some("4".into())));
/// assert_eq!(run.status, RunStatus::Completed);
/// assert_eq!(run.output_text(), "4");
/// assert_eq!(run.tool_names(), ["calculator"]);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Run {
    /// The case's name.
    pub case: String,
    /// Which repetition (from 0).
    pub repeat: u32,
    /// How the run ended.
    pub status: RunStatus,
    /// The task's output (`null` unless completed).
    pub output: Value,
    /// The error, panic message, or timeout, when not completed.
    pub error: Option<String>,
    /// Every tool call, in the order the events reported them.
    pub tool_calls: Vec<ToolCallRecord>,
    /// The tokens of every answered request ([`Event::Tokens`] summed).
    pub usage: Usage,
    /// How many requests were answered (one [`Event::Tokens`] each).
    pub requests: u32,
    /// Wall time of the task, in milliseconds.
    pub duration_ms: u64,
    /// The cost the task reported ([`TaskContext::add_cost`]), if any.
    pub cost: Option<f64>,
    /// The case's input turns (not saved in reports).
    pub input: Vec<String>,
    /// The case's expected output (not saved in reports).
    pub expected: Option<Value>,
    /// The case's metadata (not saved in reports).
    pub metadata: Map<String, Value>,
    /// The events the run's listener saw, deltas left out, at most
    /// [`MAX_EVENTS`] (not saved in reports).
    pub events: Vec<Event>,
}

crate::serde_macros::json_struct! {
    Deserialize for Run {
        case [default],
        repeat [default],
        status,
        output [default],
        error [opt],
        tool_calls [default, skip_if = Vec::is_empty],
        usage [default],
        requests [default],
        duration_ms [default],
        cost [opt],
        input [skip],
        expected [skip],
        metadata [skip],
        events [skip],
    }
}

// By hand, to share the fields with a report's run, which holds them flat
// (`RunResult`); the keys and skips are the list above's.
impl Serialize for Run {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.serialize_fields(&mut map)?;
        map.end()
    }
}

impl Run {
    /// Write the saved fields into `map`, in their order.
    pub(super) fn serialize_fields<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        map.serialize_entry("case", &self.case)?;
        map.serialize_entry("repeat", &self.repeat)?;
        map.serialize_entry("status", &self.status)?;
        map.serialize_entry("output", &self.output)?;
        if let Some(error) = &self.error {
            map.serialize_entry("error", error)?;
        }
        if !self.tool_calls.is_empty() {
            map.serialize_entry("tool_calls", &self.tool_calls)?;
        }
        map.serialize_entry("usage", &self.usage)?;
        map.serialize_entry("requests", &self.requests)?;
        map.serialize_entry("duration_ms", &self.duration_ms)?;
        if let Some(cost) = &self.cost {
            map.serialize_entry("cost", cost)?;
        }
        Ok(())
    }
}

impl PartialEq for Run {
    fn eq(&self, other: &Run) -> bool {
        self.case == other.case
            && self.repeat == other.repeat
            && self.status == other.status
            && self.output == other.output
            && self.error == other.error
            && self.tool_calls == other.tool_calls
            && self.usage == other.usage
            && self.requests == other.requests
            && self.duration_ms == other.duration_ms
            && self.cost == other.cost
    }
}

impl Run {
    /// A completed run with `output` and nothing else: for testing an
    /// [`Evaluator`](super::Evaluator).
    pub fn from_output(output: impl Into<Value>) -> Run {
        Run {
            output: output.into(),
            ..Run::empty(String::new(), 0)
        }
    }

    pub(super) fn empty(case: String, repeat: u32) -> Run {
        Run {
            case,
            repeat,
            status: RunStatus::Completed,
            output: Value::Null,
            error: None,
            tool_calls: Vec::new(),
            usage: Usage::new(),
            requests: 0,
            duration_ms: 0,
            cost: None,
            input: Vec::new(),
            expected: None,
            metadata: Map::new(),
            events: Vec::new(),
        }
    }

    /// This run with one more tool call.
    #[must_use]
    pub fn with_tool_call(mut self, call: ToolCallRecord) -> Run {
        self.tool_calls.push(call);
        self
    }

    /// This run with an expected output.
    #[must_use]
    pub fn with_expected(mut self, expected: impl Into<Value>) -> Run {
        self.expected = Some(expected.into());
        self
    }

    /// The output as text: a string as is, anything else as compact JSON.
    pub fn output_text(&self) -> Cow<'_, str> {
        match &self.output {
            Value::String(s) => Cow::Borrowed(s),
            other => Cow::Owned(other.to_string()),
        }
    }

    /// The output as a JSON value: a string that holds JSON (a structured
    /// answer, a Markdown fence around it allowed) parsed, anything else as
    /// is. `None` for a string that is not JSON.
    pub fn output_json(&self) -> Option<Value> {
        match &self.output {
            Value::String(s) => {
                let t = s.trim();
                let t = t
                    .strip_prefix("```json")
                    .or_else(|| t.strip_prefix("```"))
                    .and_then(|t| t.strip_suffix("```"))
                    .unwrap_or(t);
                serde_json::from_str(t).ok()
            }
            other => Some(other.clone()),
        }
    }

    /// The names of the tools called, in order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.tool_calls.iter().map(|c| c.name.as_str()).collect()
    }

    /// Whether the run completed (its task returned an output).
    pub fn is_completed(&self) -> bool {
        self.status == RunStatus::Completed
    }
}

/// What the task is handed for one run: the case's input, a listener to
/// attach to the agent, the run's [`Cancellable`], and a place to report
/// the cost.
///
/// Attach [`listener`](TaskContext::listener) to every agent the task
/// builds ([`Configurator::add_listener`](crate::Configurator::add_listener)):
/// the tool calls, usage and requests of the [`Run`] come from its events.
/// Hand [`cancellable`](TaskContext::cancellable) to the agent
/// ([`Configurator::cancellable`](crate::Configurator::cancellable)): the
/// kit cancels it when the run times out or the experiment is cancelled.
#[derive(Debug)]
pub struct TaskContext {
    pub(super) run: Run,
    pub(super) cancellable: Cancellable,
    pub(super) collected: Arc<Mutex<Collected>>,
}

impl TaskContext {
    pub(super) fn new(run: Run) -> TaskContext {
        TaskContext {
            run,
            cancellable: Cancellable::new(),
            collected: Arc::new(Mutex::new(Collected::default())),
        }
    }

    /// The case's name.
    pub fn case(&self) -> &str {
        &self.run.case
    }

    /// Which repetition of the case this is (from 0).
    pub fn repeat(&self) -> u32 {
        self.run.repeat
    }

    /// The user turns to send, in order.
    pub fn turns(&self) -> &[String] {
        &self.run.input
    }

    /// The first (often the only) user turn.
    pub fn input(&self) -> &str {
        self.run.input.first().map_or("", String::as_str)
    }

    /// The case's expected output, if any.
    pub fn expected(&self) -> Option<&Value> {
        self.run.expected.as_ref()
    }

    /// The case's metadata.
    pub fn metadata(&self) -> &Map<String, Value> {
        &self.run.metadata
    }

    /// The run's cancel signal (a clone: the kit keeps one).
    pub fn cancellable(&self) -> Cancellable {
        self.cancellable.clone()
    }

    /// A listener that collects this run's events; attach it to each agent
    /// the task builds (it may be called once per agent).
    pub fn listener(&self) -> impl Listener + use<> {
        Collector(Arc::clone(&self.collected))
    }

    /// Add `cost` (in any unit, the same across a dataset) to the run's
    /// cost. A NaN, infinite or negative figure is ignored.
    pub fn add_cost(&mut self, cost: f64) {
        if cost.is_finite() && cost >= 0.0 {
            self.run.cost = Some(self.run.cost.unwrap_or(0.0) + cost);
        }
    }
}

/// What the run's listener gathered.
#[derive(Debug, Default)]
pub(super) struct Collected {
    pub(super) events: Vec<Event>,
    pub(super) tool_calls: Vec<ToolCallRecord>,
    /// Call id → index in `tool_calls`, so a result finds its call in
    /// constant time.
    open: HashMap<(Arc<str>, String), usize>,
    pub(super) usage: Usage,
    pub(super) requests: u32,
}

impl Collected {
    /// Move what was gathered into `run`.
    pub(super) fn fill(&mut self, run: &mut Run) {
        run.events = std::mem::take(&mut self.events);
        run.tool_calls = std::mem::take(&mut self.tool_calls);
        run.usage = self.usage;
        run.requests = self.requests;
    }
}

/// The listener [`TaskContext::listener`] hands out.
struct Collector(Arc<Mutex<Collected>>);

impl Listener for Collector {
    fn on_event(&mut self, event: &Event) {
        let mut c = self.0.lock();
        match event {
            // Fragments of what `Assistant` and `Thinking` carry whole.
            Event::AssistantDelta { .. } | Event::ThinkingDelta { .. } => return,
            Event::Tokens {
                input,
                output,
                cached,
                cache_creation,
                thinking,
                ..
            } => {
                c.usage += Usage::from_parts(*input, *output, *cached, *cache_creation, *thinking);
                c.requests = c.requests.saturating_add(1);
            }
            Event::ToolCall {
                agent,
                id,
                name,
                arguments,
            } => {
                let index = c.tool_calls.len();
                c.tool_calls.push(ToolCallRecord {
                    agent: agent.to_string(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                    result: None,
                });
                c.open.insert((Arc::clone(agent), id.clone()), index);
            }
            Event::ToolResult {
                agent, id, content, ..
            } => {
                if let Some(index) = c.open.remove(&(Arc::clone(agent), id.clone())) {
                    c.tool_calls[index].result = Some(content.clone());
                }
            }
            _ => {}
        }
        if c.events.len() < MAX_EVENTS {
            c.events.push(event.clone());
        }
    }

    fn name(&self) -> String {
        "evals::Collector".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tokens() -> Event {
        Event::Tokens {
            agent: "".into(),
            input: Some(u64::MAX),
            output: Some(1),
            cached: None,
            cache_creation: None,
            thinking: None,
            model_id: None,
            response_id: None,
        }
    }

    #[test]
    fn the_collector_keeps_at_most_max_events_but_counts_them_all() {
        let cx = TaskContext::new(Run::empty("c".into(), 0));
        let mut listener = cx.listener();
        for _ in 0..MAX_EVENTS + 10 {
            listener.on_event(&tokens());
        }
        listener.on_event(&Event::AssistantDelta {
            agent: "".into(),
            content: "x".into(),
        });
        let mut run = Run::empty("c".into(), 0);
        cx.collected.lock().fill(&mut run);
        assert_eq!(run.events.len(), MAX_EVENTS);
        assert_eq!(run.requests as usize, MAX_EVENTS + 10);
        // Saturating sums: u64::MAX many times is still u64::MAX.
        assert_eq!(run.usage.input, Some(u64::MAX));
    }

    #[test]
    fn results_find_their_call_by_agent_and_id_and_strays_are_ignored() {
        let cx = TaskContext::new(Run::empty("c".into(), 0));
        let mut listener = cx.listener();
        let call = |agent: &str, id: &str| Event::ToolCall {
            agent: agent.into(),
            id: id.into(),
            name: "t".into(),
            arguments: json!({"id": id}),
        };
        let result = |agent: &str, id: &str, content: &str| Event::ToolResult {
            agent: agent.into(),
            id: id.into(),
            name: "t".into(),
            content: content.into(),
        };
        listener.on_event(&call("", "1"));
        listener.on_event(&call("child", "1")); // the same id in a sub-agent
        listener.on_event(&result("child", "1", "from child"));
        listener.on_event(&result("", "never-called", "stray"));
        listener.on_event(&result("", "1", "from top"));
        listener.on_event(&result("", "1", "again")); // a repeat changes nothing
        let mut run = Run::empty("c".into(), 0);
        cx.collected.lock().fill(&mut run);
        let results: Vec<_> = run
            .tool_calls
            .iter()
            .map(|c| (c.agent.as_str(), c.result.as_deref()))
            .collect();
        assert_eq!(
            results,
            [("", Some("from top")), ("child", Some("from child"))]
        );
    }
}
