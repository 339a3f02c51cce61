//! The state an [`Agent`](crate::Agent) shares with its
//! [`ExtensionContext`](crate::extension::ExtensionContext)s, the registry and its
//! children: [`Shared`], and the loop options every child inherits.
//!
//! Each control and option is held once. What an extension context, a
//! tool's run or a child reads lives in [`Shared`] (the controls, the
//! [`LoopOptions`], the tools and transport in its [`State`]); what only
//! the loop reads (the history, the compactor, the fallbacks, the
//! synthesizer, a typed turn's request) lives in the `Agent`.

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::structured::StructuredOutput;
use crate::approval::{Approver, Decision};
use crate::journal::{Journal, Record};
use crate::listener::ListenerList;
use crate::protocol::{Client, ToolSpecs};
use crate::tool::TrifectaPolicy;
use crate::{
    Api, Cancellable, ChatTransport, Error, Event, FinishReason, Image, Interloper, ModelSettings,
    Result, StepLimit, Tool, ToolCall, Usage,
};

/// A handler run once when the agent closes.
pub(crate) type CloseHandler = Box<dyn FnOnce() + Send>;

/// The options of the loop, set by the [`Configurator`](crate::Configurator)
/// and fixed once the agent is built; held in [`Shared`] only, and inherited
/// by children (`child.rs` says which differ).
#[derive(Clone, Debug, Default)]
#[allow(clippy::struct_excessive_bools, reason = "independent opt-in switches")]
pub(crate) struct LoopOptions {
    /// Stream responses (deltas become events as they arrive).
    pub(crate) streaming: bool,
    pub(crate) parallel_tools: bool,
    pub(crate) split_think: bool,
    /// Recovers tool calls written into text, when switched on: a pointer,
    /// so a program that never switches it on does not link the parser.
    pub(crate) recover_tool_calls: Option<super::recover::Recover>,
    /// The step-exhaustion rescue, stored by the limits' setters: a
    /// pointer, so a program that sets no limit does not link it.
    pub(crate) synthesize: Option<Rescue>,
    pub(crate) wind_down: Option<u32>,
    pub(crate) replay_reasoning: bool,
    /// A host's agent, or which kind of child.
    pub(crate) nesting: Nesting,
    pub(crate) extra: Map<String, Value>,
    /// The agent's model settings, over the transport's.
    pub(crate) settings: ModelSettings,
    pub(crate) trifecta: TrifectaPolicy,
    /// The settings of typed turns.
    pub(crate) structured: StructuredOutput,
    /// How deferred tools are searched and held back.
    #[cfg(feature = "tool-search")]
    pub(crate) tool_search: crate::tool_search::ToolSearch,
    /// Asked for a `traceparent` header before each request.
    pub(crate) traceparent: Option<TraceSource>,
}

/// Which agent runs the loop: it decides who resets the shared
/// [`Cancellable`] and who announces a cancel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Nesting {
    /// A host's agent: each run resets its `Cancellable`, a cancel is
    /// announced with [`Event::Cancelled`].
    #[default]
    Main,
    /// A sub-agent: it shares its parent's `Cancellable` and never resets
    /// it (that would lose a cancel that raced with the spawn); it
    /// announces its own cancel, which a host may render apart.
    SubAgent,
    /// A helper child (the synthesizer, the compactor): shares the
    /// `Cancellable` like a sub-agent, but leaves the announcement to its
    /// parent, whose turn the same cancel ends.
    Helper,
}

impl Nesting {
    /// Whether the agent is a child (it shares its parent's `Cancellable`).
    pub(crate) fn is_child(self) -> bool {
        self != Nesting::Main
    }
}

/// The step-exhaustion rescue (`child.rs`) as a function pointer in the
/// loop options, stored only by the setters of the limits that can ask for
/// it ([`Configurator::step_limit`](crate::Configurator::step_limit),
/// `Configurator::budget`) and inherited by children: a program that sets
/// neither does not link the synthesizer's child (BENCHMARKS.md, issue 36,
/// session 13). It takes the agent as `Any`: this file is below the one
/// that defines `Agent`.
#[derive(Clone, Copy)]
pub(crate) struct Rescue(
    pub(crate) fn(&mut dyn std::any::Any, &str, &Error) -> Result<FinishReason>,
);

impl std::fmt::Debug for Rescue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rescue")
    }
}

/// The host's source of `traceparent` header values
/// ([`Configurator::traceparent`](crate::Configurator::traceparent)).
#[derive(Clone)]
pub(crate) struct TraceSource(pub(crate) Arc<dyn Fn() -> Option<String> + Send + Sync>);

impl std::fmt::Debug for TraceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceSource")
    }
}

/// The approver and the code that consults it (`approval.rs`), as a
/// function pointer stored only by
/// [`Configurator::approver`](crate::Configurator::approver): a program that
/// sets no approver does not link the consulting (its journal records, its
/// helper thread; BENCHMARKS.md, issue 36, session 13).
#[derive(Clone)]
pub(crate) struct Reviewer {
    pub(crate) approver: Arc<dyn Approver>,
    pub(crate) ask: AskApprover,
}

/// [`Reviewer::ask`]: the approver asked about one call on its validated
/// arguments.
pub(crate) type AskApprover =
    fn(&Shared, &Arc<dyn Approver>, &Arc<dyn Tool>, &ToolCall, &Value) -> Result<Decision>;

/// A call that passed its controls and its review.
pub(crate) enum Prepared {
    /// Run the tool (only a [`ToolPath`] makes one).
    Ready(Ready),
    /// Do not run anything: this is the observation (invalid arguments, an
    /// unknown tool, a denial).
    Done(String),
}

/// An approved call of a registered tool, on its validated (normalized)
/// arguments, and the path that runs it.
pub(crate) struct Ready {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) args: Value,
    /// The approver edited the arguments (the observation says so).
    pub(crate) edited: bool,
    pub(crate) path: ToolPath,
}

/// What the review of one call says.
pub(crate) enum Verdict {
    Go(Prepared),
    /// The approver deferred: the batch stops before this call.
    Defer,
}

/// The code that reviews, runs and checks the calls of registered tools
/// (argument validation, the approval flow, the tool's run and its
/// context, the parallel batch's threads, the trifecta check), as function
/// pointers stored only by what registers a tool: the
/// [`Configurator`](crate::Configurator)'s `add_*tool` setters,
/// [`Shared::add_tool`] (an extension's tools), a child given tools. An
/// agent without tools answers every call as an unknown tool, which needs
/// none of it, so a program that registers no tool does not link it
/// (BENCHMARKS.md, issue 36, session 14). The one value is
/// `ToolPath::ON` (`batch.rs`, which names the files it points into).
#[derive(Clone, Copy)]
pub(crate) struct ToolPath {
    /// Validate a call of a registered tool and review it (`approval.rs`).
    pub(crate) review: ReviewTool,
    /// Run one approved call (`approval.rs`).
    pub(crate) run: fn(&Shared, &ToolCall, Ready) -> Observation,
    /// Run the calls gated in parallel mode together, answers in order
    /// (`batch.rs`).
    pub(crate) run_parallel: for<'c> fn(&Shared, Gated<'c>) -> Vec<(&'c ToolCall, Observation)>,
    /// The lethal-trifecta check of a model-visible pool (`trifecta.rs`).
    pub(crate) trifecta: CheckTrifecta,
    /// The names of the three pools (model, sub-agent, deferred), each
    /// valid and unique, as a set; else what is wrong with them
    /// (`builder.rs`).
    pub(crate) names: fn(Pools<'_>) -> std::result::Result<HashSet<String>, Vec<String>>,
    /// The pools encoded for a request (`deferred.rs`).
    pub(crate) specs: fn(&mut State) -> Arc<ToolSpecs>,
}

/// The model-visible, sub-agent-only and deferred pools, in that order.
pub(crate) type Pools<'a> = [&'a [Arc<dyn Tool>]; 3];

/// [`ToolPath::review`]: validate a call of `tool` (its raw arguments, cut
/// by the length limit when the flag says so), then take the host's
/// decision when a resume gave one, else the approver's.
pub(crate) type ReviewTool =
    fn(&Shared, &Arc<dyn Tool>, &ToolCall, bool, Option<Decision>) -> Result<Verdict>;

/// [`ToolPath::trifecta`]: check `tools` under the policy for the agent
/// named, emitting the warning through the callback.
pub(crate) type CheckTrifecta =
    fn(&[Arc<dyn Tool>], TrifectaPolicy, &Arc<str>, &mut dyn FnMut(Event)) -> Result<()>;

/// What a call's tool message carries: the observation and the images the
/// tool attached.
pub(crate) type Observation = (String, Vec<Image>);

/// The calls of a parallel batch, each reviewed, waiting to run together.
pub(crate) type Gated<'c> = Vec<(&'c ToolCall, Prepared)>;

impl std::fmt::Debug for ToolPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolPath")
    }
}

/// State shared with [`ExtensionContext`](crate::extension::ExtensionContext)s and
/// tools that captured one.
pub(crate) struct Shared {
    pub(crate) id: Arc<str>,
    pub(crate) listeners: ListenerList,
    pub(crate) client: Client,
    /// The controls: the loop reads them, an
    /// [`ExtensionContext`](crate::extension::ExtensionContext) hands them
    /// out, a child shares the `Cancellable`.
    pub(crate) cancellable: Option<Cancellable>,
    pub(crate) step_limit: Option<StepLimit>,
    pub(crate) interloper: Option<Interloper>,
    /// The loop options, inherited by children.
    pub(crate) options: LoopOptions,
    pub(crate) state: Mutex<State>,
    pub(crate) on_close: Mutex<Vec<CloseHandler>>,
    /// Consulted before each tool call; inherited by children.
    pub(crate) approver: Option<Reviewer>,
    /// The current run's tokens and requests, children's included.
    pub(crate) tally: Arc<Mutex<Tally>>,
    /// A child's run adds its tally here: the parent's.
    pub(crate) parent_tally: Option<Arc<Mutex<Tally>>>,
    /// The run's spend and its budget: a child shares its parent's.
    pub(crate) meter: Arc<super::budget::Meter>,
    /// The run journal, opened at the end of `build` (its fingerprint
    /// needs the tools extensions bind); never inherited by children.
    pub(crate) journal: std::sync::OnceLock<Journal>,
}

/// The pool a tool joins: see [`Shared::add_tool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pool {
    /// Sent to the model.
    Model,
    /// Only for sub-agent personas.
    SubAgent,
    /// Sent once found (`pikuri::tool_search`).
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(dead_code, reason = "added through the tool-search API")
    )]
    Deferred,
}

/// What a run cost so far: the tokens and the number of completed requests,
/// its children's included.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tally {
    pub(crate) usage: Usage,
    pub(crate) requests: u32,
}

impl Tally {
    pub(crate) fn clear(&mut self) {
        *self = Tally::default();
    }

    /// One completed request with this usage.
    pub(crate) fn count(&mut self, usage: Option<Usage>) {
        self.requests = self.requests.saturating_add(1);
        self.usage += usage.unwrap_or_default();
    }

    fn add(&mut self, other: Tally) {
        self.requests = self.requests.saturating_add(other.requests);
        self.usage += other.usage;
    }
}

pub(crate) struct State {
    /// Shared, so that a request takes it without copying its strings
    /// (every turn reads it; a model switch or fallback replaces it).
    pub(crate) transport: Arc<ChatTransport>,
    pub(crate) context_cap: Option<u64>,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    /// The sub-agent-only pool (never sent to this agent's model).
    pub(crate) sub_agent_tools: Vec<Arc<dyn Tool>>,
    /// The deferred pool (`pikuri::tool_search`): sent once found.
    pub(crate) deferred: Vec<Arc<dyn Tool>>,
    pub(crate) pending_system: Vec<String>,
    /// The system prompt as last assembled (base and extensions' snippets).
    pub(crate) system_prompt: String,
    /// The names in both pools: uniqueness is checked in O(1) per tool.
    names: HashSet<String>,
    /// The encoded `tools` of a request and the API they were built for,
    /// or `None` after a change: encoded again at the next request, not at
    /// every add, so adding N tools (an MCP server's list) costs O(N), not
    /// O(N²). Built in `deferred.rs`.
    pub(super) tool_specs: Option<(Api, Arc<ToolSpecs>)>,
    /// What the deferred pool has found and derived (`deferred.rs`).
    pub(crate) deferral: Deferral,
    /// Set once any pool holds a tool (see [`ToolPath`]).
    pub(crate) tool_path: Option<ToolPath>,
}

/// The deferred pool's search state: the settings, the search tool, the
/// index and the token estimate (both dropped when the pool changes), and
/// the names found in this conversation, in the order found.
#[derive(Default)]
pub(crate) struct Deferral {
    #[cfg(feature = "tool-search")]
    pub(crate) config: crate::tool_search::ToolSearch,
    /// The local search tool (it holds the agent's `Shared` weakly).
    #[cfg(feature = "tool-search")]
    pub(crate) tool: Option<Arc<dyn Tool>>,
    #[cfg(feature = "tool-search")]
    pub(crate) index: Option<Arc<crate::tool_search::Index>>,
    /// The deferred schemas' estimated tokens.
    pub(crate) tokens: Option<u64>,
    /// Each deferred tool's position by name (`deferred.rs`).
    pub(crate) positions: Option<std::collections::HashMap<String, usize>>,
    pub(crate) found: Found,
}

/// The names found in this conversation, in the order found, with a set
/// beside them: a reveal, a look-up and a reload each cost O(1) a name,
/// so a history naming 100,000 found tools loads in linear time.
#[derive(Debug, Default)]
pub(crate) struct Found {
    order: Vec<String>,
    set: HashSet<String>,
}

impl Found {
    /// Add `name` at the end; false when it was found before.
    pub(super) fn push(&mut self, name: String) -> bool {
        if self.set.contains(&name) {
            return false;
        }
        self.set.insert(name.clone());
        self.order.push(name);
        true
    }

    #[cfg_attr(
        not(feature = "tool-search"),
        allow(dead_code, reason = "the tool-search feature's")
    )]
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &String> {
        self.order.iter()
    }

    pub(super) fn clear(&mut self) {
        self.order.clear();
        self.set.clear();
    }

    /// Keep the names `keep` says yes to, in order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&String) -> bool) {
        let set = &mut self.set;
        self.order.retain(|n| {
            let kept = keep(n);
            if !kept {
                set.remove(n);
            }
            kept
        });
    }
}

impl State {
    /// The state of a new agent; the names are unique (checked by
    /// [`Configurator::validate`](super::Configurator)), and a pool holding
    /// a tool came with its `tool_path`.
    pub(crate) fn new(
        transport: ChatTransport,
        tools: Vec<Arc<dyn Tool>>,
        sub_agent_tools: Vec<Arc<dyn Tool>>,
        deferred: Vec<Arc<dyn Tool>>,
        tool_path: Option<ToolPath>,
    ) -> State {
        let names = match tool_path {
            Some(path) => (path.names)([&tools, &sub_agent_tools, &deferred]).unwrap_or_default(),
            None => HashSet::new(),
        };
        State {
            transport: Arc::new(transport),
            context_cap: None,
            tools,
            sub_agent_tools,
            deferred,
            pending_system: Vec::new(),
            system_prompt: String::new(),
            names,
            tool_specs: None,
            deferral: Deferral::default(),
            tool_path,
        }
    }

    /// The deferred pool changed: what was derived from it goes.
    fn deferred_changed(&mut self) {
        self.tool_specs = None;
        self.deferral.tokens = None;
        self.deferral.positions = None;
        #[cfg(feature = "tool-search")]
        {
            self.deferral.index = None;
        }
    }
}

impl Shared {
    /// Journal the record `record` builds when the agent keeps a journal
    /// (built only then: a build without the `journal` feature builds
    /// none).
    pub(crate) fn journal<'r>(&self, record: impl FnOnce() -> Record<'r>) -> Result<()> {
        match self.journal.get() {
            Some(j) => j.append_with(record),
            None => Ok(()),
        }
    }

    /// Add a tool to one of the pools.
    pub(crate) fn add_tool(&self, tool: Arc<dyn Tool>, pool: Pool) -> Result<()> {
        let mut st = self.state.lock();
        let name = tool.name();
        crate::tool::check_name(name).map_err(Error::invalid)?;
        check_search_name(&st.names, name, pool, !st.deferred.is_empty())?;
        if !st.names.insert(name.to_string()) {
            return Err(Error::invalid(format!("duplicate tool name `{name}`")));
        }
        st.tool_path = Some(ToolPath::ON);
        match pool {
            Pool::SubAgent => st.sub_agent_tools.push(tool),
            Pool::Model => {
                st.tools.push(tool);
                st.tool_specs = None;
            }
            Pool::Deferred => {
                st.deferred.push(tool);
                st.deferred_changed();
            }
        }
        Ok(())
    }

    /// Remove the tools called `names` from either pool, in one pass over
    /// each pool; how many there were.
    pub(crate) fn remove_tools(&self, names: &[&str]) -> usize {
        let mut st = self.state.lock();
        let gone: HashSet<&str> = names
            .iter()
            .copied()
            .filter(|n| st.names.contains(*n))
            .collect();
        if gone.is_empty() {
            return 0;
        }
        let before = st.tools.len();
        st.tools.retain(|t| !gone.contains(t.name()));
        if st.tools.len() != before {
            st.tool_specs = None;
        }
        st.sub_agent_tools.retain(|t| !gone.contains(t.name()));
        let before = st.deferred.len();
        st.deferred.retain(|t| !gone.contains(t.name()));
        if st.deferred.len() != before {
            st.deferred_changed();
            // A withdrawn tool is no longer found: back under its name
            // (perhaps with another schema), it is searched for again.
            st.deferral.found.retain(|n| !gone.contains(n.as_str()));
        }
        for name in &gone {
            st.names.remove(*name);
        }
        gone.len()
    }

    pub(crate) fn emit(&self, event: Event) {
        self.listeners.emit(event);
    }

    /// [`emit`](Self::emit) the event `build` makes, built only when a
    /// listener will receive it: the listeners are the one consumer of what
    /// the agent emits (OpenTelemetry, an eval's capture,
    /// [`InMemoryEventList`] and what a parent's [`SubAgentListener`] shares
    /// are listeners; the journal keeps records of its own), and the list
    /// is fixed once the agent is built, so with none an event is built
    /// only to be dropped (a quick turn's four, 531 instructions;
    /// BENCHMARKS.md, issue 42, session 16).
    ///
    /// [`InMemoryEventList`]: crate::listeners::InMemoryEventList
    /// [`SubAgentListener`]: crate::subagent::SubAgentListener
    pub(crate) fn emit_with(&self, build: impl FnOnce() -> Event) {
        if !self.listeners.is_empty() {
            self.listeners.emit(build());
        }
    }

    /// End a run's accounting: its tally, which a child also adds to its
    /// parent's run.
    pub(crate) fn settle_tally(&self) -> Tally {
        let tally = std::mem::take(&mut *self.tally.lock());
        if let Some(parent) = &self.parent_tally {
            parent.lock().add(tally);
        }
        tally
    }
}

/// The local search tool's name is taken once there are deferred tools.
#[cfg(feature = "tool-search")]
pub(crate) fn check_search_name(
    names: &HashSet<String>,
    name: &str,
    pool: Pool,
    have_deferred: bool,
) -> Result<()> {
    use crate::tool_search::SEARCH_TOOL;
    if (name == SEARCH_TOOL && (have_deferred || pool == Pool::Deferred))
        || (pool == Pool::Deferred && names.contains(SEARCH_TOOL))
    {
        return Err(Error::invalid(format!(
            "tool name `{SEARCH_TOOL}` is the tool search's, taken once there are deferred tools"
        )));
    }
    Ok(())
}

#[cfg(not(feature = "tool-search"))]
#[allow(
    clippy::unnecessary_wraps,
    reason = "the feature's twin returns errors"
)]
fn check_search_name(_: &HashSet<String>, _: &str, _: Pool, _: bool) -> Result<()> {
    Ok(())
}

/// Run close handlers, last registered first, each isolated: a panicking
/// one is logged at `warn` and the rest still run.
pub(crate) fn run_close_handlers(handlers: Vec<CloseHandler>) {
    for handler in handlers.into_iter().rev() {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(handler)) {
            let msg = crate::util::panic_message(&*panic);
            log::warn!("on_close handler panicked: {msg}");
        }
    }
}
