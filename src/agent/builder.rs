//! [`Configurator`]: the build-time collector for an
//! [`Agent`](crate::Agent), and the [`Extension`] trait whose `configure`
//! receives it (the two name each other, so they share a file).
//! [`Configurator::build`] is written next to the agent it builds.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use parking_lot::Mutex;

use super::budget::{Budget, Meter};
use super::compact::{Compaction, Engine};
use super::extension::ExtensionContext;
use super::shared::{CloseHandler, LoopOptions, Tally, TraceSource, run_close_handlers};
use super::shared::{Pools, Reviewer, ToolPath};
use super::structured::StructuredOutput;
use super::synthesizer::Synthesizer;
use super::tool_limit::ToolResultLimit;
use crate::approval::Approver;
use crate::guard::Guards;
#[cfg(feature = "journal")]
use crate::journal::{JournalStore, Open};
use crate::listener::ListenerList;
use crate::protocol::Client;
use crate::tool::TrifectaPolicy;
use crate::{
    Cancellable, ChatTransport, Error, Event, HttpConfig, Interloper, Listener, Result, StepLimit,
    Tool,
};

/// Collects an agent's configuration; [`build`](Configurator::build) turns it
/// into an [`Agent`](crate::Agent).
///
/// Hosts and extensions use the same type: an extension's
/// [`configure`](Extension::configure) receives it from
/// [`add_extension`](Configurator::add_extension).
///
/// # Two tool pools
///
/// [`add_tool`](Configurator::add_tool) tools are sent to the model.
/// [`add_sub_agent_tool`](Configurator::add_sub_agent_tool) tools are
/// **never** sent to this agent's model; only sub-agent personas that name
/// them can use them. This is the lethal-trifecta defence: keep network tools
/// off an agent that reads untrusted files, while a researcher persona can
/// still fetch. Tool names must be unique across both pools, and valid for
/// every provider (see [`Tool::name`]): `build` refuses a duplicate or an
/// invalid name with [`Error::InvalidInput`].
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, StepLimit, listeners::InMemoryEventList};
/// use pikuri::testing::FakeServer;
/// let server = FakeServer::start();
/// let agent = Agent::builder(server.transport())
///     .system_prompt("You are terse.")
///     .step_limit(StepLimit::new(5))
///     .add_listener(InMemoryEventList::new())
///     .build()?;
/// assert_eq!(agent.to_string(), "Agent(id=, model=fake-model, tools=0, listeners=[InMemoryEventList])");
/// # Ok::<(), pikuri::Error>(())
/// ```
#[must_use = "a Configurator does nothing until `build` is called"]
pub struct Configurator {
    pub(super) transport: ChatTransport,
    pub(super) system_prompt: String,
    pub(super) step_limit: Option<StepLimit>,
    pub(super) cancellable: Option<Cancellable>,
    pub(super) interloper: Option<Interloper>,
    pub(super) id: String,
    pub(super) http: HttpConfig,
    pub(super) client: Option<Client>,
    pub(super) tools: Vec<Arc<dyn Tool>>,
    pub(super) sub_agent_tools: Vec<Arc<dyn Tool>>,
    /// Tools sent only once found (`pikuri::tool_search`).
    pub(super) deferred_tools: Vec<Arc<dyn Tool>>,
    /// Set by what adds a tool to a pool (see `ToolPath`).
    pub(super) tool_path: Option<ToolPath>,
    pub(super) listeners: ListenerList,
    pub(super) extensions: Vec<Box<dyn Extension>>,
    pub(super) on_close: Vec<CloseHandler>,
    pub(crate) options: LoopOptions,
    pub(super) synthesizer: Synthesizer,
    pub(super) errors: Vec<String>,
    pub(super) approver: Option<Reviewer>,
    pub(super) parent_tally: Option<Arc<Mutex<Tally>>>,
    pub(super) budget: Budget,
    /// A child's: its parent's meter.
    pub(super) meter: Option<Arc<Meter>>,
    pub(super) compaction: Option<(Compaction, Engine)>,
    pub(super) tool_result_limit: ToolResultLimit,
    pub(super) fallbacks: Vec<ChatTransport>,
    pub(super) guards: Option<Arc<Guards>>,
    /// The run journal to open at the end of `build`.
    #[cfg(feature = "journal")]
    pub(super) journal: Option<(Box<dyn JournalStore>, String, Open)>,
}

impl Configurator {
    pub(super) fn new(transport: ChatTransport) -> Configurator {
        Configurator {
            transport,
            system_prompt: String::new(),
            step_limit: None,
            cancellable: None,
            interloper: None,
            id: String::new(),
            http: HttpConfig::default(),
            client: None,
            tools: Vec::new(),
            sub_agent_tools: Vec::new(),
            deferred_tools: Vec::new(),
            tool_path: None,
            listeners: ListenerList::new(),
            extensions: Vec::new(),
            on_close: Vec::new(),
            options: LoopOptions::default(),
            synthesizer: Synthesizer::default(),
            errors: Vec::new(),
            approver: None,
            parent_tally: None,
            budget: Budget::default(),
            meter: None,
            compaction: None,
            tool_result_limit: ToolResultLimit::default(),
            fallbacks: Vec::new(),
            guards: None,
            #[cfg(feature = "journal")]
            journal: None,
        }
    }

    /// The base system prompt; extensions' snippets are appended to it.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Configurator {
        self.system_prompt = prompt.into();
        self
    }

    /// The cancellation token (none by default).
    pub fn cancellable(mut self, cancellable: Cancellable) -> Configurator {
        self.cancellable = Some(cancellable);
        self
    }

    /// The approver consulted before each tool call (none by default: every
    /// call runs). Sub-agents inherit it. See [`Approver`] for when it is
    /// consulted and what each [`Decision`](crate::approval::Decision) does.
    pub fn approver(mut self, approver: impl Approver) -> Configurator {
        self.approver = Some(Reviewer::new(into_shared_approver(approver)));
        self
    }

    /// Keep a crash-survivable journal of a **new** run `run` in `store`
    /// (see [`journal`](crate::journal) for what is recorded and the
    /// guarantees). The agent holds the run's lock until it is dropped.
    /// Feature `journal`.
    ///
    /// # Errors
    ///
    /// At [`build`](Configurator::build): [`Error::JournalMismatch`] when
    /// `run` already has a journal ([`resume`](Configurator::resume) it),
    /// [`Error::RunLocked`] when another agent holds it,
    /// [`Error::JournalIo`] when the store cannot write,
    /// [`Error::InvalidInput`] for a run id that is not 1 to 128 characters
    /// of `[A-Za-z0-9._-]`.
    #[cfg(feature = "journal")]
    pub fn journal(mut self, store: impl JournalStore, run: impl Into<String>) -> Configurator {
        self.journal = Some((Box::new(store), run.into(), Open::New));
        self
    }

    /// Build the agent of an existing run `run` from its journal in
    /// `store`, and keep journaling it: the conversation is restored as
    /// journaled, and when the journal shows a run cut off by a crash,
    /// [`Agent::resume_run`](crate::Agent::resume_run) finishes it. The
    /// configuration (model, tools, system prompt) must be the one that
    /// wrote the run. The agent holds the run's lock until it is dropped.
    /// Feature `journal`.
    ///
    /// # Errors
    ///
    /// At [`build`](Configurator::build), with nothing loaded:
    /// [`Error::RunLocked`] when another agent (another resumer) holds
    /// the run; [`Error::JournalMismatch`] when the journal was written by
    /// another configuration, or there is none; [`Error::JournalCorrupt`]
    /// when a record before the last is damaged or the sequence is one no
    /// run writes (a hand edit); [`Error::JournalIo`] when it cannot be
    /// read.
    #[cfg(feature = "journal")]
    pub fn resume(mut self, store: impl JournalStore, run: impl Into<String>) -> Configurator {
        self.journal = Some((Box::new(store), run.into(), Open::Resume));
        self
    }

    /// The mid-loop user-input queue (none by default).
    pub fn interloper(mut self, interloper: Interloper) -> Configurator {
        self.interloper = Some(interloper);
        self
    }

    /// The agent's id: empty for a main agent (the default).
    pub fn id(mut self, id: impl Into<String>) -> Configurator {
        self.id = id.into();
        self
    }

    /// Stream responses (deltas become events as they arrive). Off by default.
    pub fn streaming(mut self, on: bool) -> Configurator {
        self.options.streaming = on;
        self
    }

    /// HTTP timeouts, retries and limits.
    pub fn http(mut self, config: HttpConfig) -> Configurator {
        self.http = config;
        self
    }

    /// Add a tool the model can call. An `Arc<dyn Tool>` (a tool shared
    /// with other agents) is a tool too.
    pub fn add_tool(mut self, tool: impl Tool) -> Configurator {
        self.tools.push(into_shared(tool));
        self.tool_path = Some(ToolPath::ON);
        self
    }

    /// Add a tool only sub-agent personas can use (see "Two tool pools").
    pub fn add_sub_agent_tool(mut self, tool: impl Tool) -> Configurator {
        self.sub_agent_tools.push(into_shared(tool));
        self.tool_path = Some(ToolPath::ON);
        self
    }

    /// Add a deferred tool: once the deferred tools pass the
    /// [`ToolSearch`](crate::tool_search::ToolSearch) threshold, it is sent
    /// only after the model found it with a search (see
    /// [`tool_search`](crate::tool_search)); below it, it is sent like any
    /// tool.
    #[cfg(feature = "tool-search")]
    pub fn add_deferred_tool(mut self, tool: impl Tool) -> Configurator {
        self.deferred_tools.push(into_shared(tool));
        self.tool_path = Some(ToolPath::ON);
        self
    }

    /// How deferred tools are searched and when they are held back.
    #[cfg(feature = "tool-search")]
    pub fn tool_search(mut self, search: crate::tool_search::ToolSearch) -> Configurator {
        self.options.tool_search = search;
        self
    }

    /// The tools added so far (model-visible pool).
    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    /// The sub-agent-only tools added so far.
    pub fn sub_agent_tools(&self) -> &[Arc<dyn Tool>] {
        &self.sub_agent_tools
    }

    /// Add a listener (it starts on its own thread at once).
    pub fn add_listener(mut self, listener: impl Listener) -> Configurator {
        self.listeners.add(listener);
        self
    }

    /// Add a closure as a listener. Same as
    /// [`add_listener`](Configurator::add_listener), but the explicit
    /// `FnMut(&Event)` bound lets the closure's argument go unannotated:
    /// `on_event(|e| ...)`, where `add_listener(|e| ...)` fails to infer
    /// (E0631) and needs `|e: &Event|`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::mpsc;
    /// use pikuri::{Agent, Event};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::text("Hello!"));
    /// let (tx, rx) = mpsc::channel();
    /// let mut agent = Agent::builder(server.transport())
    ///     .on_event(move |e| {
    ///         if let Event::Assistant { content, .. } = e {
    ///             let _ = tx.send(content.clone());
    ///         }
    ///     })
    ///     .build()?;
    /// agent.run_loop("Hi")?;
    /// assert_eq!(rx.try_recv().as_deref(), Ok("Hello!"));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    ///
    /// The configurator is a value: it can be stored, passed to helpers and
    /// reassigned before [`build`](Configurator::build) consumes it.
    ///
    /// ```
    /// use pikuri::{Agent, Configurator, builtin};
    /// use pikuri::testing::FakeServer;
    ///
    /// fn with_tools(cfg: Configurator, math: bool) -> Configurator {
    ///     if math { cfg.add_tool(builtin::calculator()) } else { cfg }
    /// }
    ///
    /// let server = FakeServer::start();
    /// let mut cfg = Agent::builder(server.transport()).system_prompt("Be brief.");
    /// cfg = with_tools(cfg, true);
    /// cfg = cfg.on_event(|e| assert_eq!(e.agent(), "")); // only the main agent here
    /// assert_eq!(cfg.tools().len(), 1);
    /// let agent = cfg.build()?;
    /// assert_eq!(agent.tools().len(), 1);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn on_event(self, listener: impl FnMut(&Event) + Send + 'static) -> Configurator {
        self.add_listener(listener)
    }

    /// Use a prebuilt list (e.g. one derived with
    /// [`ExtensionContext::listeners_for_sub_agent`](crate::extension::ExtensionContext::listeners_for_sub_agent)),
    /// replacing the listeners added so far.
    pub fn listener_list(mut self, list: ListenerList) -> Configurator {
        self.listeners = list;
        self
    }

    /// Add an extension; its [`configure`](Extension::configure) runs now. A
    /// failure is reported by [`build`](Configurator::build).
    pub fn add_extension(mut self, mut extension: impl Extension) -> Configurator {
        if let Err(e) = extension.configure(&self) {
            self.errors
                .push(format!("extension {}: {e}", extension.name()));
        }
        self.extensions.push(Box::new(extension));
        self
    }

    /// Register a handler run by [`Agent::close`](crate::Agent::close) (last registered, first
    /// run). Armed at once: it also runs if the build fails later, or if the
    /// configurator is dropped without being built.
    pub fn on_close(mut self, handler: impl FnOnce() + Send + 'static) -> Configurator {
        self.on_close.push(Box::new(handler));
        self
    }

    /// The synthesizer used when a [`StepLimit`] with
    /// [`OnExhausted::Synthesize`](crate::OnExhausted::Synthesize) trips
    /// (default: [`Synthesizer::default`]).
    pub fn synthesizer(mut self, synthesizer: Synthesizer) -> Configurator {
        self.synthesizer = synthesizer;
        self
    }

    /// What `build` does when the model-visible tools reach the network and
    /// read private data together (default: [`TrifectaPolicy::Warn`]).
    pub fn trifecta(mut self, policy: TrifectaPolicy) -> Configurator {
        self.options.trifecta = policy;
        self
    }

    /// The cap on one tool result (default [`ToolResultLimit::default`]:
    /// 25% of the window; [`ToolResultLimit::off`] disables it).
    ///
    /// ```
    /// use pikuri::{Agent, builtin};
    /// use pikuri::compaction::ToolResultLimit;
    /// use pikuri::testing::{FakeServer, Reply};
    /// let server = FakeServer::start();
    /// server.set_context_size(None); // the window is unknown: the char limit applies
    /// server.push(Reply::tool_call("calculator", serde_json::json!({"expression": "2^100"})));
    /// server.push(Reply::text("big"));
    /// let mut agent = Agent::builder(server.transport())
    ///     .add_tool(builtin::calculator())
    ///     .tool_result_limit(ToolResultLimit::default().chars_without_cap(5))
    ///     .build()?;
    /// agent.run_loop("2^100?")?;
    /// let result = &agent.messages()[2].content;
    /// assert_eq!(result, "1.267\n[... truncated: 5 of 19 characters shown]");
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn tool_result_limit(mut self, limit: ToolResultLimit) -> Configurator {
        self.tool_result_limit = limit;
        self
    }

    /// Transports to move the turn to, in order, when a request still fails
    /// after its retries with an error another server may not have (5xx,
    /// 429, timeout, connection failure). Replaces the list set so far; the
    /// rules and an example are on [`add_fallback`](Configurator::add_fallback).
    pub fn fallback(mut self, transports: Vec<ChatTransport>) -> Configurator {
        self.fallbacks = transports;
        self
    }

    /// Append one transport to the fallback list.
    ///
    /// - Only after the client's own retries, and only for HTTP 429 and 5xx
    ///   (529 included), timeouts and connection failures.
    /// - The next transport is the one after the current one in the list;
    ///   the agent stays on it for later turns
    ///   ([`Agent::run_loop_with`](crate::Agent::run_loop_with) goes back).
    /// - The switch is a model switch: history kept, another model's
    ///   reasoning not sent, the window detected again;
    ///   [`Event::ModelFallback`] then [`Event::ContextCap`].
    ///
    /// ```
    /// use pikuri::{Agent, Event, ChatTransport, HttpConfig, listeners::InMemoryEventList};
    /// use pikuri::testing::{FakeServer, Reply};
    /// let down = FakeServer::start();
    /// down.push(Reply::status(503, "overloaded").repeat(10));
    /// let backup = FakeServer::start();
    /// backup.push(Reply::text("from the backup"));
    /// let events = InMemoryEventList::new();
    /// let mut agent = Agent::builder(down.transport())
    ///     .http(HttpConfig::default().with_max_retries(0))
    ///     .add_fallback(backup.transport().with_model("backup-model"))
    ///     .add_listener(events.clone())
    ///     .build()?;
    /// let out = agent.run_loop("hi")?;
    /// assert_eq!(out.answer.as_deref(), Some("from the backup"));
    /// assert_eq!(agent.model().as_deref(), Some("backup-model"));
    /// assert!(events.kinds().contains(&"model_fallback"));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn add_fallback(mut self, transport: ChatTransport) -> Configurator {
        self.fallbacks.push(transport);
        self
    }

    /// The [guards](crate::guard) the loop asks at their points (replacing
    /// any set before); the agent's own, not its sub-agents'. An empty
    /// [`Guards`] is none: a run without guards pays nothing for them.
    #[cfg(feature = "guard")]
    pub fn guards(mut self, guards: Guards) -> Configurator {
        self.guards = (!guards.is_empty()).then(|| Arc::new(guards));
        self
    }

    /// Run several tool calls of one response concurrently (scoped threads);
    /// results are still appended in call order. Off by default.
    pub fn parallel_tool_calls(mut self, on: bool) -> Configurator {
        self.options.parallel_tools = on;
        self
    }

    /// Split `<think>...</think>` out of content into reasoning (for models
    /// that do not use `reasoning_content`). Off by default.
    pub fn split_think_tags(mut self, on: bool) -> Configurator {
        self.options.split_think = on;
        self
    }

    /// Recover tool calls a model wrote into its text (`<tool_call>{..}</tool_call>`,
    /// `<function=name>{..}</function>`, a bare `{"name":..,"arguments":..}`)
    /// when the name is an offered tool and the arguments validate. Off by
    /// default.
    pub fn recover_text_tool_calls(mut self, on: bool) -> Configurator {
        self.options.recover_tool_calls = on.then_some(super::recover::recover);
        self
    }

    /// Before each model request (this agent's and its children's), ask
    /// `source` for a W3C `traceparent`; when it gives one, the request
    /// carries it as the `traceparent` header, so a server that traces
    /// continues the host's trace; before each tool call too, for
    /// [`ToolContext::traceparent`](crate::ToolContext::traceparent) (MCP
    /// tool calls send it as `_meta.traceparent`). Off by default. With the `otel` feature,
    /// [`OtlpHandle::traceparent`](crate::otel::OtlpHandle::traceparent)
    /// names the turn's span:
    /// `.traceparent(move || Some(handle.traceparent()))`.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Agent;
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::text("hi"));
    /// let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    /// let mut agent = Agent::builder(server.transport())
    ///     .traceparent(move || Some(tp.to_string()))
    ///     .build()?;
    /// agent.run_loop("hello")?;
    /// assert_eq!(server.chat_requests()[0].header("traceparent"), Some(tp));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn traceparent(
        mut self,
        source: impl Fn() -> Option<String> + Send + Sync + 'static,
    ) -> Configurator {
        self.options.traceparent = Some(TraceSource(Arc::new(source)));
        self
    }

    /// When at most `last_steps` tool calls remain in the budget, tell the
    /// model so in a short note at the end of each request (after the
    /// history, so the cached prefix stays the same). Off by default.
    pub fn wind_down(mut self, last_steps: u32) -> Configurator {
        self.options.wind_down = Some(last_steps);
        self
    }

    /// Send reasoning back to the model that wrote it (`reasoning_content`),
    /// for models with interleaved thinking. Reasoning written by another
    /// model is never sent. Off by default.
    pub fn replay_reasoning(mut self, on: bool) -> Configurator {
        self.options.replay_reasoning = on;
        self
    }

    /// A raw top-level field of the request body, in the transport's API's
    /// own shape (chat completions, Anthropic Messages or Responses: no
    /// translation), written last: it replaces any field pikuri writes
    /// under that name, typed [settings](Configurator::settings) included.
    /// For what [`ModelSettings`](crate::ModelSettings) does not cover.
    ///
    /// OpenAI's prompt caching is steered this way too: a stable
    /// `("prompt_cache_key", json!("user-42"))` routes requests that share
    /// a prefix to the same cache (chat completions and Responses); the
    /// tokens served from it come back in [`Usage::cached`](crate::Usage::cached).
    /// No typed switch: the field is OpenAI's alone and passes through as
    /// given.
    ///
    /// ```
    /// use pikuri::{Agent, ChatTransport};
    /// use serde_json::json;
    /// let agent = Agent::builder(ChatTransport::new("gpt-5"))
    ///     .request_field("prompt_cache_key", json!("user-42"))
    ///     .build()?;
    /// # let _ = agent;
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn request_field(mut self, name: impl Into<String>, value: Value) -> Configurator {
        self.options.extra.insert(name.into(), value);
        self
    }

    /// Model settings (temperature, token bound, tool choice, ...) for
    /// every request of this agent, its sub-agents and helpers: each field
    /// set here overrides the transport's
    /// ([`ChatTransport::with_settings`](crate::ChatTransport::with_settings)),
    /// the transport's applies where this leaves one unset (so a fallback
    /// or a [`run_loop_with`](crate::Agent::run_loop_with) transport keeps
    /// its own). Which field each setting becomes on each API is in the
    /// [guide](crate::guide#model-settings).
    ///
    /// ```
    /// use pikuri::{Agent, ModelSettings};
    /// let agent = Agent::builder(pikuri::ChatTransport::new("m"))
    ///     .settings(ModelSettings::new().with_temperature(0.0))
    ///     .build()?;
    /// assert_eq!(agent.settings().temperature(), Some(0.0));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn settings(mut self, settings: crate::ModelSettings) -> Configurator {
        self.options.settings = settings;
        self
    }

    /// The settings of typed turns ([`Agent::run_typed`](crate::Agent::run_typed)); default
    /// [`StructuredOutput::default`].
    ///
    /// ```
    /// use pikuri::{Agent};
    /// use pikuri::structured::{StructuredMode, StructuredOutput};
    /// use pikuri::testing::FakeServer;
    /// let server = FakeServer::start();
    /// let agent = Agent::builder(server.transport())
    ///     .structured_output(StructuredOutput::default().with_mode(StructuredMode::Prompt))
    ///     .build()?;
    /// assert_eq!(agent.structured_output().mode(), StructuredMode::Prompt);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn structured_output(mut self, settings: StructuredOutput) -> Configurator {
        self.options.structured = settings;
        self
    }

    pub(super) fn validate(&self) -> Result<()> {
        let mut errors = self.errors.clone();
        // A URL ureq cannot use fails here, with the fix, not at the
        // first request as `http: invalid format` or `TlsRequired`.
        for t in std::iter::once(&self.transport).chain(&self.fallbacks) {
            if let Err(Error::InvalidInput(why)) = t.check() {
                errors.push(why);
            }
        }
        // Without a tool there is no name to check (and no path to check
        // them with).
        if let Some(path) = self.tool_path {
            let pools = [&self.tools[..], &self.sub_agent_tools, &self.deferred_tools];
            if let Err(problems) = (path.names)(pools) {
                errors.extend(problems);
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::invalid(errors.join("; ")))
        }
    }
}

/// [`ToolPath::names`](super::shared::ToolPath): the names of the pools as
/// a set, each valid for every provider and unique across the pools (the
/// tool search's name taken once there are deferred tools); else every
/// problem found.
pub(super) fn tool_names(pools: Pools<'_>) -> std::result::Result<HashSet<String>, Vec<String>> {
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    for tool in pools.iter().flat_map(|p| p.iter()) {
        if let Err(e) = crate::tool::check_name(tool.name()) {
            errors.push(e);
        } else if !seen.insert(tool.name().to_string()) {
            errors.push(format!("duplicate tool name `{}`", tool.name()));
        }
    }
    #[cfg(feature = "tool-search")]
    if !pools[2].is_empty() && seen.contains(crate::tool_search::SEARCH_TOOL) {
        errors.push(format!(
            "tool name `{}` is the tool search's, taken once there are deferred tools",
            crate::tool_search::SEARCH_TOOL
        ));
    }
    if errors.is_empty() {
        Ok(seen)
    } else {
        Err(errors)
    }
}

/// A plug-in that grows an agent without touching it. Every hook has a no-op
/// default.
///
/// # Build order
///
/// 1. Each [`Configurator::add_extension`](crate::Configurator::add_extension)
///    calls [`Extension::configure`] at once.
/// 2. [`Configurator::build`](crate::Configurator::build) validates, wires the
///    agent, builds one [`ExtensionContext`], then calls
///    [`Extension::bind`] for each extension in registration order.
/// 3. The context cap is resolved and [`Event::ContextCap`] emitted.
///
/// Per turn: the user message is appended, [`Event::UserTurn`] emitted, then
/// [`Extension::on_user_message`] runs for each extension (a system message it
/// injects lands right after the user message, before the first request).
///
/// Hooks run on the parent agent only; sub-agents never inherit extensions.
///
/// # Capabilities
///
/// Holding an [`Agent`](crate::Agent) grants read access to its configuration
/// and nothing more. Emitting events, registering tools at runtime, injecting
/// system messages, deriving sub-agent listener lists and registering close
/// handlers all go through the [`ExtensionContext`] an extension receives.
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, Configurator, listeners::InMemoryEventList, Result};
/// use pikuri::extension::{Extension, ExtensionContext};
/// use pikuri::testing::{FakeServer, Reply};
///
/// struct Greeter;
/// impl Extension for Greeter {
///     fn system_prompt_snippets(&self) -> Vec<String> {
///         vec!["<greeting>Say hello.</greeting>".into()]
///     }
///     fn on_user_message(&mut self, ctx: &ExtensionContext, _message: &str) {
///         ctx.emit_event("greeter.seen", serde_json::json!({"ok": true}), false);
///     }
/// }
///
/// let server = FakeServer::start();
/// server.push(Reply::text("hello"));
/// let rec = InMemoryEventList::new();
/// let mut agent = Agent::builder(server.transport())
///     .system_prompt("Base.")
///     .add_extension(Greeter)
///     .add_listener(rec.clone())
///     .build()?;
/// assert!(agent.system_prompt().ends_with("<greeting>Say hello.</greeting>"));
/// agent.run_loop("hi")?;
/// assert!(rec.kinds().contains(&"domain"));
/// # Ok::<(), pikuri::Error>(())
/// ```
pub trait Extension: Send + 'static {
    /// Called at once from `add_extension`: validate against what is
    /// configured so far (tools in both pools, the transport). Tools and close
    /// handlers are added in [`bind`](Extension::bind), through the
    /// [`ExtensionContext`], once the agent exists.
    fn configure(&mut self, c: &Configurator) -> Result<()> {
        let _ = c;
        Ok(())
    }

    /// Called once after the agent is wired, in registration order. Keep a
    /// clone of `ctx` to act later (e.g. from a tool).
    fn bind(&mut self, ctx: &ExtensionContext) -> Result<()> {
        let _ = ctx;
        Ok(())
    }

    /// Called each turn after the user message is appended and
    /// [`Event::UserTurn`] emitted, before the first request.
    fn on_user_message(&mut self, ctx: &ExtensionContext, message: &str) {
        let _ = (ctx, message);
    }

    /// Called on [`Agent::clear_conversation`](crate::Agent::clear_conversation),
    /// after [`Event::Reset`].
    fn on_conversation_reset(&mut self, ctx: &ExtensionContext) {
        let _ = ctx;
    }

    /// Blocks appended to the system prompt whenever it is assembled.
    fn system_prompt_snippets(&self) -> Vec<String> {
        Vec::new()
    }

    /// A short name for logs and errors. Default: the type name.
    fn name(&self) -> String {
        let full = std::any::type_name::<Self>();
        full.rsplit("::").next().unwrap_or(full).to_string()
    }
}

/// A configurator dropped before [`build`](Configurator::build) (an early
/// return, a `?` between `add_extension` and `build`) still runs the close
/// handlers armed so far, so nothing an extension started leaks.
impl Drop for Configurator {
    fn drop(&mut self) {
        run_close_handlers(std::mem::take(&mut self.on_close));
    }
}

/// `Arc<dyn Tool>` is itself a [`Tool`]; unwrap it instead of wrapping it
/// again, so a shared tool costs one indirection, not two.
fn into_shared(tool: impl Tool) -> Arc<dyn Tool> {
    let mut slot = Some(tool);
    if let Some(shared) =
        (&mut slot as &mut dyn std::any::Any).downcast_mut::<Option<Arc<dyn Tool>>>()
    {
        return shared.take().expect("just set");
    }
    Arc::new(slot.expect("just set"))
}

/// An `Arc<dyn Approver>` is used as is rather than wrapped again.
fn into_shared_approver(approver: impl Approver) -> Arc<dyn Approver> {
    let mut slot = Some(approver);
    if let Some(shared) =
        (&mut slot as &mut dyn std::any::Any).downcast_mut::<Option<Arc<dyn Approver>>>()
    {
        return shared.take().expect("just set");
    }
    Arc::new(slot.expect("just set"))
}

impl Configurator {
    /// The API keys of the transport and of every fallback: credentials the
    /// extensions redact from what their servers send (MCP).
    #[cfg(feature = "mcp")]
    pub(crate) fn credentials(&self) -> Vec<String> {
        std::iter::once(&self.transport)
            .chain(&self.fallbacks)
            .filter_map(|t| t.api_key().map(String::from))
            .collect()
    }
}

impl fmt::Debug for Configurator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Configurator")
            .field("transport", &self.transport)
            .field("id", &self.id)
            .field("tools", &self.tools.len())
            .field("sub_agent_tools", &self.sub_agent_tools.len())
            .field("deferred_tools", &self.deferred_tools.len())
            .field("listeners", &self.listeners)
            .finish_non_exhaustive()
    }
}
