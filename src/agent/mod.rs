//! The agent loop: [`Agent`], [`Outcome`]; the turn diagram and the
//! history-validity rule are documented on [`Agent`].
//!
//! `impl Agent` lives here (the agent, its construction, its readers, the
//! history in and out), in `run.rs` (the public entry points of a run) and
//! in `turn.rs` (the loop, one method per boundary) and `batch.rs` (its tool batch). What the boundaries delegate are plain types in their own
//! files: `compact.rs`, `fallback.rs`, `approval.rs`, `structured.rs`,
//! `tool_limit.rs`. No file here imports one that imports it back
//! (`scripts/check-cycles.py --graph agent`).

mod approval;
mod batch;
#[cfg(feature = "budgets")]
mod budget;
// Without the feature, a `Meter` that counts nothing and a crate-private
// `Budget` that limits nothing, for the same hooks (`metering.rs`).
#[cfg(not(feature = "budgets"))]
#[path = "budget_off.rs"]
mod budget;
mod builder;
mod child;
mod compact;
mod deferred;
mod extension;
mod fallback;
#[cfg(feature = "guard")]
mod guarded;
// Without the feature, the same hooks as no-ops (`Guarding` holds nothing).
#[cfg(not(feature = "guard"))]
#[path = "guarded_off.rs"]
mod guarded;
mod history;
mod metering;
mod outcome;
mod recover;
mod registry;
mod run;
mod shared;
mod structured;
mod subagent;
mod synthesizer;
mod tool_limit;
mod trifecta;
mod turn;

#[cfg(feature = "budgets")]
pub use budget::{Budget, Price, PriceTable};
pub use builder::{Configurator, Extension};
pub use compact::Compaction;
pub use extension::ExtensionContext;
pub use history::History;
pub use outcome::Outcome;
pub use registry::{CloseRegistration, close_all, register_close};
pub use structured::{StructuredMode, StructuredOutput, Typed};
pub use subagent::{Persona, SubAgents};
pub use synthesizer::Synthesizer;
pub use tool_limit::ToolResultLimit;

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::approval::PendingApproval;
use crate::guard::Guarding;
#[cfg(feature = "journal")]
use crate::journal::{Cut, Fingerprint, Journal, JournalStore, Open, fnv1a};
use crate::journal::{HistoryCause, Record};
use crate::protocol::Client;
use crate::{
    Cancellable, ChatTransport, Error, Event, FinishReason, Interloper, Message, Result, Role,
    StepLimit, StopReason, Tool, Usage,
};
use compact::Compactor;
use fallback::Fallbacks;
use shared::{Shared, State, Tally, run_close_handlers};
use structured::TypedSpec;

/// A tool-calling agent: one conversation, one model, its tools, listeners
/// and controls.
///
/// Build one with [`Agent::builder`]; run a turn with
/// [`run_loop`](Agent::run_loop). The module docs draw the loop.
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, listeners::InMemoryEventList, StopReason};
/// use pikuri::testing::{FakeServer, Reply};
/// use pikuri::builtin;
///
/// let server = FakeServer::start();
/// server.push(Reply::tool_call("calculator", serde_json::json!({"expression": "6*7"})));
/// server.push(Reply::text("6*7 is 42."));
///
/// let events = InMemoryEventList::new();
/// let mut agent = Agent::builder(server.transport())
///     .system_prompt("You are a careful calculator.")
///     .add_tool(builtin::calculator())
///     .add_listener(events.clone())
///     .build()?;
/// let outcome = agent.run_loop("What is 6*7?")?;
/// assert_eq!(outcome.stop_reason, StopReason::Completed);
/// assert_eq!(agent.last_assistant_content().as_deref(), Some("6*7 is 42."));
/// // The tool result went back to the model in the second request.
/// let second = &server.chat_requests()[1];
/// assert_eq!(second.messages().last().unwrap()["content"], "42");
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # Thread safety
///
/// `Agent` is `Send` (run it on a worker thread) but `run_loop` takes `&mut
/// self`: one turn at a time. Control it from other threads through clones of
/// its [`Cancellable`] and [`Interloper`].
///
/// # Closing
///
/// [`close`](Agent::close) runs the on-close handlers (last registered first,
/// each isolated) and joins the listener threads; `Drop` does the same if the
/// host forgets. Each handler runs once, whichever of these comes first.
///
/// `Drop` covers an agent that goes out of scope, including by `?` or by a
/// panic that unwinds. It does **not** run when:
///
/// - the process ends through [`std::process::exit`] (or returns from
///   `main` while the agent sits in a `static` or on another thread);
/// - a signal ends it (SIGINT, SIGTERM with their default action), or a
///   panic under `panic = "abort"`;
/// - the agent was leaked (`std::mem::forget`, a reference cycle,
///   `Box::leak`).
///
/// For those, call [`close_all`](crate::close_all) from the exit path and
/// from the signal handler (e.g. the `ctrlc` crate's, or a thread waiting
/// on `signal-hook`'s iterator): it runs the handlers of every agent still
/// open in the process (and closes its listeners), and the host's own registered with
/// [`register_close`](crate::register_close), newest first: the counterpart
/// of pikuri's `Finalizers`. The chat example does both: on its way out of
/// `main` (a second Ctrl+C mid-turn) and on SIGTERM or SIGHUP, before it
/// exits with 143 or 129. A configurator dropped unbuilt runs its armed
/// handlers itself.
///
/// # A turn
///
/// ```text
///  run_loop(msg) ── blank? ──────────────────────────────► Err(InvalidInput)
///     │ switch model if a different transport was given (ModelSwitched, ContextCap)
///     │ reset StepLimit + Cancellable; append user msg; UserTurn{mid_loop:false}
///     │ extensions' on_user_message (system injections land here)
///     ▼
///  ┌► Request ── HTTP/stream error ──────────────────────► Err(..)  (nothing appended)
///  │    │ before it: compaction when due; on failure: fallback transports,
///  │    │ or (context overflow) one compaction and one retry — see Compaction
///  │    │ deltas while streaming (AssistantDelta / ThinkingDelta)
///  │    ▼
///  │  Message complete: Thinking, Assistant, Tokens; append it
///  │    │
///  │    ├─ no tool calls ─┬─ Interloper empty ───────────► Done (Completed, or Incomplete: cut)
///  │    │                 └─ pending: append, UserTurn{mid_loop:true} ─┐
///  │    ▼                                                               │
///  │  ToolBatch: for each call                                          │
///  │    ToolCall ▸ StepLimit::tick ▸ Cancellable::check ▸ validate ▸ review ▸ run ▸ ToolResult
///  │    │   review (Approver) denies ─► ToolDenied, "Error: not run: denied: .." ─► next call
///  │    │   review defers ─► the rest stay unanswered ─────► Done (ApprovalPending)
///  │    │   tick fails ─► answer the rest "not run" ─► Raise: Err(StepLimitExceeded)
///  │    │                                         └──► Synthesize: FallbackNotice,
///  │    │                                              tools-free pass (Synthesized)
///  │    │   check fails ─► answer the rest "cancelled" ─► Cancelled, Err(Cancelled)
///  │    │   (a stopped batch drains the Interloper too, before either exit)
///  │    ▼                                                               │
///  │  Drain Interloper: append each, UserTurn{mid_loop:true}            │
///  └────┴───────────────────────────────────────────────────────────────┘
///  every exit: Stopped{reason, usage}; wait until every listener handled every event
/// ```
///
/// Which control is read at which boundary is tabled once, in
/// the crate docs, [Controls](crate#controls).
///
/// # The history is always valid
///
/// Whatever stops a turn, the next request is well formed: a half-streamed
/// assistant message is never appended; every assistant tool call is answered
/// by a tool message (a "not run" or "cancelled" observation when the turn
/// stopped before running it); injected user messages never sit between a
/// tool call and its results. One exception, never sent: the calls of a
/// turn that stopped for approval stay unanswered at the end of the
/// history until [`resume`](Agent::resume) or the next `run_loop` answers
/// them (see [`Approver`](crate::approval::Approver), "Deciding later").
pub struct Agent {
    /// The controls, the options, the tools and the transport: what
    /// extension contexts and children read too (`shared.rs`).
    shared: Arc<Shared>,
    system_base: String,
    /// The system prompt the loop sends: the base and the extensions'
    /// snippets (a typed turn sends it with its note, `typed`). Extension
    /// contexts read a copy from the shared state.
    system_prompt: String,
    extensions: Vec<Box<dyn Extension>>,
    synthesizer: Synthesizer,
    /// While a typed turn runs: its spec and the request fields it adds.
    typed: Option<TypedRequest>,
    messages: Vec<Message>,
    /// Index of the latest turn's user message (0 before any turn).
    turn_start: usize,
    synth_answer: Option<String>,
    /// The text a cancelled stream delivered, until `Event::Cancelled`.
    partial_answer: String,
    last_stop: Option<StopReason>,
    /// Every run's tally since the conversation began (or was cleared).
    total_usage: Usage,
    buf: Vec<u8>,
    closed: bool,
    /// Automatic compaction (`compact.rs`).
    compactor: Compactor,
    /// The cap on one tool result (`tool_limit.rs`).
    tool_limit: ToolResultLimit,
    /// The transports a failing request falls back to (`fallback.rs`).
    fallbacks: Fallbacks,
    /// The guards and what their verdicts left to do (`guarded.rs`).
    guarding: Guarding,
    /// Where a crash cut off the run a journal was resumed from, until
    /// [`resume_run`](Agent::resume_run) finishes it.
    #[cfg(feature = "journal")]
    interrupted: Option<Cut>,
}

/// While a typed turn runs ([`Agent::run_typed`]): what it adds to the
/// agent's requests. Not an option: it lives for the turn, in the agent's
/// `typed` field (`run.rs` sets and clears it), and no child inherits it
/// (the synthesizer gets it explicitly).
struct TypedRequest {
    /// What the turn's answer must be (read by the synthesizer).
    spec: Arc<TypedSpec>,
    /// The agent's system prompt with the spec's note: what the turn sends.
    system_prompt: String,
    /// The schema the turn's requests ask for, once the turn constrains
    /// them (the protocol maps it to each API's own field).
    schema: Option<Arc<crate::protocol::ResponseSchema>>,
}

// The agent is built next to its definition, so that `builder.rs` does not
// depend on the agent it builds (no import cycle between the two files).
impl Configurator {
    /// Build the agent: validate, resolve a missing model, bind extensions
    /// (in registration order), resolve the context window and emit
    /// [`Event::ContextCap`](crate::Event::ContextCap).
    ///
    /// # A transport without a model
    ///
    /// When the transport names no model (or a blank one), `build` asks the
    /// server for its model list ([`ChatTransport::list_models`]): a server
    /// that lists exactly one (llama.cpp serves one) gives that one, logged
    /// at `info`; several, none, or an unreadable list is an
    /// [`Error::InvalidInput`] naming the ids on offer.
    ///
    /// ```
    /// use pikuri::{Agent, ChatTransport};
    /// use pikuri::testing::FakeServer;
    ///
    /// let server = FakeServer::start();
    /// server.set_model_id("the-only-one");
    /// let agent = Agent::builder(ChatTransport::default().with_api_base(server.base_url())).build()?;
    /// assert_eq!(agent.transport().model(), Some("the-only-one"));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for duplicate tool names, a failed extension
    /// `configure`, or a missing model that cannot be resolved. A failed
    /// extension [`bind`](crate::extension::Extension::bind) returns the
    /// extension's own error with its kind kept (a cancel stays
    /// [`Error::Cancelled`], a refused connection [`Error::Connect`]); an
    /// `InvalidInput` one is prefixed with the extension's name. The
    /// on-close handlers armed so far run before the error is returned.
    pub fn build(self) -> Result<Agent> {
        let mut cfg = self;
        let on_close = std::mem::take(&mut cfg.on_close);
        if let Err(e) = cfg.validate() {
            run_close_handlers(on_close);
            return Err(e);
        }
        // A transport without a model takes the server's only one.
        match std::mem::take(&mut cfg.transport).resolve_model() {
            Ok(t) => cfg.transport = t,
            Err(e) => {
                run_close_handlers(on_close);
                return Err(e);
            }
        }
        let client = cfg
            .client
            .take()
            .unwrap_or_else(|| Client::new(cfg.http.clone()));
        let shared = Arc::new(Shared {
            id: Arc::from(cfg.id.as_str()),
            listeners: std::mem::take(&mut cfg.listeners),
            client,
            cancellable: cfg.cancellable.take(),
            step_limit: cfg.step_limit.take(),
            interloper: cfg.interloper.take(),
            options: std::mem::take(&mut cfg.options),
            state: Mutex::new(State::new(
                cfg.transport.clone(),
                std::mem::take(&mut cfg.tools),
                std::mem::take(&mut cfg.sub_agent_tools),
                std::mem::take(&mut cfg.deferred_tools),
                cfg.tool_path,
            )),
            on_close: Mutex::new(on_close),
            approver: cfg.approver.take(),
            tally: Arc::new(Mutex::new(Tally::default())),
            parent_tally: cfg.parent_tally.take(),
            meter: cfg
                .meter
                .take()
                .unwrap_or_else(|| Arc::new(budget::Meter::new(cfg.budget.clone()))),
            journal: std::sync::OnceLock::new(),
        });
        registry::register(&shared);
        #[cfg(feature = "tool-search")]
        deferred::install(&shared);
        let mut agent = Agent {
            shared,
            system_base: std::mem::take(&mut cfg.system_prompt),
            system_prompt: String::new(),
            extensions: std::mem::take(&mut cfg.extensions),
            synthesizer: std::mem::take(&mut cfg.synthesizer),
            typed: None,
            messages: Vec::new(),
            turn_start: 0,
            synth_answer: None,
            partial_answer: String::new(),
            last_stop: None,
            total_usage: Usage::new(),
            buf: Vec::new(),
            closed: false,
            compactor: Compactor::new(cfg.compaction.take()),
            tool_limit: cfg.tool_result_limit,
            fallbacks: Fallbacks::new(std::mem::take(&mut cfg.fallbacks)),
            guarding: Guarding::new(cfg.guards.take()),
            #[cfg(feature = "journal")]
            interrupted: None,
        };
        // One exit for a failed bind or check: the agent is closed (and
        // dropped) in one place.
        if let Err(e) = agent.bind_extensions() {
            agent.close();
            return Err(e);
        }
        agent.detect_and_emit_context_cap();
        // Last: the fingerprint covers the tools and prompt bind added.
        #[cfg(feature = "journal")]
        if let Some((store, run, how)) = cfg.journal.take()
            && let Err(e) = agent.open_journal(store, &run, how)
        {
            agent.close();
            return Err(e);
        }
        // Construction events are delivered before the host sees the agent.
        agent.shared.listeners.flush();
        Ok(agent)
    }
}

/// An extension's `bind` failure as `build` returns it: its kind is kept, so
/// a host can tell a cancel or a refused connection from a bad setting; a
/// message of its own (an invalid setting) is prefixed with the extension.
fn bind_error(name: &str, e: Error) -> Error {
    match e {
        Error::InvalidInput(m) => {
            Error::InvalidInput(format!("extension {name} failed to bind: {m}"))
        }
        other => other,
    }
}

impl Agent {
    /// The construction steps after the agent exists: the system prompt,
    /// each extension's `bind`, the lethal-trifecta check of the tools as
    /// bind left them, the prompt again. On an error the caller closes the
    /// agent.
    fn bind_extensions(&mut self) -> Result<()> {
        self.assemble_system_prompt();
        let ctx = self.ctx();
        for i in 0..self.extensions.len() {
            if let Err(e) = self.extensions[i].bind(&ctx) {
                return Err(bind_error(&self.extensions[i].name(), e));
            }
        }
        // Tools registered in bind count too: check the pool as it now is
        // (an agent without tools has no path: nothing to check).
        let (tools, path) = {
            let st = self.shared.state.lock();
            (st.tools.clone(), st.tool_path)
        };
        if let Some(path) = path {
            let id = self.agent_id();
            let policy = self.shared.options.trifecta;
            (path.trifecta)(&tools, policy, &id, &mut |e| self.emit(e))?;
        }
        // Tools registered in bind may have changed the prompt-relevant state.
        self.assemble_system_prompt();
        Ok(())
    }

    /// Open the configured journal: a new run's header, or a resumed run's
    /// conversation (loaded whole or not at all).
    #[cfg(feature = "journal")]
    fn open_journal(&mut self, store: Box<dyn JournalStore>, run: &str, how: Open) -> Result<()> {
        let (journal, replayed) = Journal::open(store, run, &self.fingerprint(), how)?;
        if let Some(model) = replayed.model {
            let to = self.transport().with_model(model);
            self.shared.state.lock().transport = Arc::new(to);
        }
        self.turn_start = replayed
            .turn_start
            .or_else(|| replayed.messages.iter().rposition(|m| m.role == Role::User))
            .unwrap_or(0);
        self.messages = replayed.messages;
        self.shared.state.lock().found_from(&self.messages);
        self.interrupted = replayed.cut;
        self.budget_replayed(replayed.lifetime);
        // `set` fails only when a journal is already open, and `build`
        // opens one at most once.
        let _ = self.shared.journal.set(journal);
        Ok(())
    }

    /// What a journal checks a resuming agent against: the model, the tool
    /// names, and a digest of the system prompt and the tools' schemas.
    #[cfg(feature = "journal")]
    fn fingerprint(&self) -> Fingerprint {
        let tools = self.tools();
        let schemas: Vec<String> = tools
            .iter()
            .map(|t| t.parameters().to_json().to_string())
            .collect();
        let mut parts: Vec<&str> = vec![&self.system_prompt];
        for (t, schema) in tools.iter().zip(&schemas) {
            parts.extend([t.name(), t.description(), schema.as_str()]);
        }
        Fingerprint {
            model: self.model(),
            tools: tools.iter().map(|t| t.name().to_string()).collect(),
            digest: fnv1a(&parts),
        }
    }

    /// Journal the record `record` builds, when the agent keeps a journal.
    fn journal<'r>(&self, record: impl FnOnce() -> Record<'r>) -> Result<()> {
        self.shared.journal(record)
    }

    /// Whether this agent was [resumed](Configurator::resume) from a
    /// journal whose last run a crash cut off, and
    /// [`resume_run`](Agent::resume_run) has not finished it yet.
    #[cfg(feature = "journal")]
    pub fn interrupted(&self) -> bool {
        self.interrupted.is_some()
    }

    /// A [`Configurator`] for an agent talking through `transport`.
    pub fn builder(transport: ChatTransport) -> Configurator {
        Configurator::new(transport)
    }

    fn assemble_system_prompt(&mut self) {
        let mut prompt = self.system_base.clone();
        for ext in &self.extensions {
            for snippet in ext.system_prompt_snippets() {
                if !prompt.is_empty() {
                    prompt.push_str("\n\n");
                }
                prompt.push_str(&snippet);
            }
        }
        self.shared.state.lock().system_prompt.clone_from(&prompt);
        self.system_prompt = prompt;
    }

    fn detect_and_emit_context_cap(&mut self) {
        let transport = self.transport();
        let cap = self.shared.client.detect_context_window(&transport);
        self.shared.state.lock().context_cap = cap;
        self.emit(Event::ContextCap {
            agent: self.agent_id(),
            cap,
        });
    }

    /// The capabilities handed to the extensions' hooks (the same agent,
    /// held weakly, as the context each got at `bind`).
    fn ctx(&self) -> ExtensionContext {
        ExtensionContext::new(&self.shared)
    }

    fn agent_id(&self) -> Arc<str> {
        Arc::clone(&self.shared.id)
    }

    fn emit(&self, event: Event) {
        self.shared.emit(event);
    }

    /// The event `build` makes, built only when a listener receives it
    /// ([`Shared::emit_with`](shared::Shared::emit_with)).
    fn emit_with(&self, build: impl FnOnce() -> Event) {
        self.shared.emit_with(build);
    }

    /// The transport this agent talks through (changes on a model switch).
    pub fn transport(&self) -> ChatTransport {
        ChatTransport::clone(&self.shared.state.lock().transport)
    }

    /// The transport, shared: what the loop reads on every turn.
    pub(crate) fn shared_transport(&self) -> Arc<ChatTransport> {
        Arc::clone(&self.shared.state.lock().transport)
    }

    /// The model id.
    pub fn model(&self) -> Option<String> {
        self.shared
            .state
            .lock()
            .transport
            .model()
            .map(str::to_string)
    }

    /// The model-visible tools, in declaration order.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared.state.lock().tools.clone()
    }

    /// The tools the next request offers and a call may run: the
    /// model-visible ones, then the search tool and the found or (below
    /// the threshold, or searched natively) all deferred tools.
    pub(crate) fn callable_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared.state.lock().callable()
    }

    /// The sub-agent-only tools (never sent to this agent's model).
    pub fn sub_agent_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared.state.lock().sub_agent_tools.clone()
    }

    /// The deferred tools (see [`tool_search`](crate::tool_search)), found
    /// or not, in the order they were added.
    #[cfg(feature = "tool-search")]
    pub fn deferred_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared.state.lock().deferred.clone()
    }

    /// The names of the deferred tools the model has found in this
    /// conversation and still in the pool, in the order it found them
    /// (they are sent from then on; see
    /// [found for the conversation](crate::tool_search#found-for-the-conversation)
    /// and the example there).
    #[cfg(feature = "tool-search")]
    pub fn found_tools(&self) -> Vec<String> {
        self.shared.state.lock().found_names()
    }

    /// The system prompt actually sent: the base plus extensions' snippets.
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// The extensions, in registration order (pikuri's `extensions` reader).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent};
    /// use pikuri::subagent::{Persona, SubAgents};
    /// use pikuri::testing::FakeServer;
    /// let server = FakeServer::start();
    /// let agent = Agent::builder(server.transport())
    ///     .add_extension(SubAgents::new(vec![Persona::new("helper", "Helps.", "You help.", 3)])?)
    ///     .build()?;
    /// let names: Vec<String> = agent.extensions().map(|e| e.name()).collect();
    /// assert_eq!(names, ["SubAgents"]);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn extensions(&self) -> impl ExactSizeIterator<Item = &dyn Extension> {
        self.extensions.iter().map(|e| &**e)
    }

    /// The step budget, if any.
    pub fn step_limit(&self) -> Option<&StepLimit> {
        self.shared.step_limit.as_ref()
    }

    /// The cancellation token, if any.
    pub fn cancellable(&self) -> Option<&Cancellable> {
        self.shared.cancellable.as_ref()
    }

    /// The mid-loop input queue, if any.
    pub fn interloper(&self) -> Option<&Interloper> {
        self.shared.interloper.as_ref()
    }

    /// The agent's id (empty for a main agent).
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Whether responses are streamed.
    pub fn streaming(&self) -> bool {
        self.shared.options.streaming
    }

    /// The resolved context window: the transport's explicit one, else what
    /// [`ChatTransport::detect_context_window`] found.
    pub fn context_window_cap(&self) -> Option<u64> {
        self.shared.state.lock().context_cap
    }

    /// The conversation so far (the system prompt is not part of it).
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The agent's model settings ([`Configurator::settings`]; the
    /// transport's apply where these leave a field unset).
    pub fn settings(&self) -> &crate::ModelSettings {
        &self.shared.options.settings
    }

    /// The settings of typed turns ([`Configurator::structured_output`]).
    pub fn structured_output(&self) -> &StructuredOutput {
        &self.shared.options.structured
    }

    /// The tool calls awaiting a decision: the unanswered calls of the
    /// conversation's trailing assistant message, in call order. Empty
    /// unless the last turn stopped with
    /// [`StopReason::ApprovalPending`](crate::StopReason::ApprovalPending)
    /// (or such a history was loaded). See [`Approver`](crate::approval::Approver),
    /// "Deciding later".
    pub fn pending_approvals(&self) -> Vec<PendingApproval> {
        approval::pending(&self.messages)
    }

    /// The tokens of every run of this conversation, summed like
    /// [`Outcome::usage`] (sub-agents, synthesizer and compaction summaries
    /// included, [`compact`](Agent::compact) between turns too, and the
    /// usage a cancelled or failed stream reported before it ended); zeroed by
    /// [`clear_conversation`](Agent::clear_conversation) and
    /// [`load_history`](Agent::load_history).
    pub fn total_usage(&self) -> Usage {
        self.total_usage
    }

    /// Why the last run stopped, if one ran.
    pub fn last_stop_reason(&self) -> Option<StopReason> {
        self.last_stop
    }

    /// The final answer of the latest turn: the synthesizer's when it ran
    /// (`None` when it wrote nothing), else the text of the turn's last
    /// assistant message. `None` when that message is empty (a turn stopped
    /// while calling tools) or the turn has none. Never an earlier turn's
    /// answer (pikuri's walks the whole history; see the crate's
    /// [mapping](crate#mapping-from-pikuri-ruby)); after
    /// [`load_history`](Agent::load_history), the loaded conversation counts
    /// as the latest turn.
    pub fn last_assistant_content(&self) -> Option<String> {
        if let Some(answer) = &self.synth_answer {
            return Some(answer.clone()).filter(|a| !a.is_empty());
        }
        self.messages[self.turn_start.min(self.messages.len())..]
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .filter(|m| !m.content.is_empty())
            .map(|m| m.content.clone())
    }

    /// The conversation as a [`History`] value, checked by the rules of
    /// [`History::parse`] (it is valid by [the loop's
    /// rule](crate::Agent#the-history-is-always-valid), so it loads again).
    pub fn export_history(&self) -> History {
        History::from_agent(self.messages.clone())
    }

    /// Replace the conversation with `history`: [`clear_conversation`](Agent::clear_conversation)
    /// (which emits [`Event::Reset`]), append the messages, then emit
    /// [`Event::HistoryLoaded`] with the last assistant message's usage so a
    /// context readout can resume.
    ///
    /// # Errors
    ///
    /// [`Error::History`] when `history` breaks a rule under
    /// [Validity](History#validity) (checked again here, before anything
    /// changes). Nothing is loaded, no event is emitted, and the agent keeps
    /// its previous conversation.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, History, Message};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::text("Still 4."));
    /// let mut agent = Agent::builder(server.transport()).build()?;
    /// let saved = r#"{"version":1,"messages":[
    ///     {"role":"user","content":"2+2?"},{"role":"assistant","content":"4"}]}"#;
    /// agent.load_history(History::parse(saved)?)?;
    /// agent.run_loop("Sure?")?;
    /// assert_eq!(agent.messages().len(), 4);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn load_history(&mut self, history: History) -> Result<()> {
        let messages = history.into_checked_messages()?;
        self.clear_conversation();
        let tokens = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .and_then(|m| m.usage);
        let count = messages.len();
        self.journal(|| Record::History {
            cause: HistoryCause::Loaded,
            messages: (&messages[..]).into(),
        })?;
        self.messages = messages;
        self.shared.state.lock().found_from(&self.messages);
        self.emit(Event::HistoryLoaded {
            agent: Arc::clone(&self.shared.id),
            messages: count,
            tokens,
        });
        self.shared.listeners.flush();
        Ok(())
    }

    /// Clear the conversation back to the system prompt (reassembled from
    /// today's extensions), reset the controls, emit [`Event::Reset`] once,
    /// then run the extensions' reset hooks.
    pub fn clear_conversation(&mut self) {
        self.messages.clear();
        self.shared.state.lock().found_from(&[]);
        #[cfg(feature = "journal")]
        {
            self.interrupted = None;
        }
        // A failed write is kept by the journal: the next run reports it.
        let _ = self.journal(|| Record::History {
            cause: HistoryCause::Cleared,
            messages: (&[][..]).into(),
        });
        self.compactor.reset();
        self.turn_start = 0;
        self.synth_answer = None;
        self.total_usage = Usage::new();
        self.shared.state.lock().pending_system.clear();
        if let Some(s) = &self.shared.step_limit {
            s.reset();
        }
        if let Some(c) = &self.shared.cancellable {
            c.reset();
        }
        self.assemble_system_prompt();
        self.emit(Event::Reset {
            agent: self.agent_id(),
        });
        let ctx = self.ctx();
        for ext in &mut self.extensions {
            ext.on_conversation_reset(&ctx);
        }
        self.shared.listeners.flush();
    }

    /// Wait until every listener, [`HandOff`](crate::listeners::Delivery::HandOff)
    /// ones too, handled every event emitted so far and ran its
    /// [`flush`](crate::Listener::flush). A turn waits only for the
    /// [`Barrier`](crate::listeners::Delivery::Barrier) ones; see
    /// [`Delivery`](crate::listeners::Delivery) for an example.
    pub fn flush_listeners(&self) {
        self.shared.listeners.flush_all();
    }

    /// Release the agent: run the on-close handlers (last registered first;
    /// a panicking one is logged at `warn` and the rest still run), then stop
    /// and join the listener threads. Idempotent; `Drop` calls it.
    ///
    /// A closed agent refuses to run: [`run_loop`](Agent::run_loop) and
    /// the other runs return [`Error::InvalidInput`] without a request,
    /// since nobody would hear its events and the handlers already released
    /// what its tools use (an MCP server's process). Its readers and
    /// [`export_history`](Agent::export_history) still work, so a closed
    /// conversation can be saved and loaded into a new agent.
    ///
    /// ```
    /// use pikuri::{Agent, ErrorKind};
    /// use pikuri::testing::FakeServer;
    ///
    /// let server = FakeServer::start();
    /// let mut agent = Agent::builder(server.transport()).build()?;
    /// agent.close();
    /// let err = agent.run_loop("still there?").unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidInput);
    /// assert!(err.to_string().contains("closed"), "{err}");
    /// assert!(server.chat_requests().is_empty());
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        registry::unregister(&self.shared);
        let handlers = std::mem::take(&mut *self.shared.on_close.lock());
        run_close_handlers(handlers);
        self.shared.listeners.close();
    }

    /// Journal a completed response (the next step).
    fn journal_response(&self, message: &Message, finish: FinishReason) -> Result<()> {
        match self.shared.journal.get() {
            Some(j) => j.response(message, finish, self.budget_record()),
            None => Ok(()),
        }
    }

    /// The journal's first failed write, if any.
    fn journal_check(&self) -> Result<()> {
        match self.shared.journal.get() {
            Some(j) => j.check(),
            None => Ok(()),
        }
    }
}

impl Agent {
    /// The check at the top of every run: a closed agent does not run.
    pub(super) fn ensure_open(&self) -> Result<()> {
        if self.closed {
            return Err(Error::invalid(
                "the agent is closed (its listeners stopped, its close handlers ran): build a new one",
            ));
        }
        Ok(())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.close();
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.state.lock();
        write!(
            f,
            "Agent(id={}, model={}, tools={}, listeners={})",
            self.shared.id,
            st.transport.model().unwrap_or(""),
            st.tools.len(),
            self.shared.listeners
        )
    }
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.shared.id)
            .field("transport", &self.transport())
            .field("messages", &self.messages.len())
            .field("step_limit", &self.shared.step_limit)
            .field("cancellable", &self.shared.cancellable)
            .field("interloper", &self.shared.interloper)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    /// The code lines of a Rust file: non-blank lines that are not `//`
    /// comments (doc comments included), outside `#[cfg(test)]` modules.
    /// The rule of `scripts/code-lines.py`.
    fn code_lines(text: &str) -> usize {
        let mut n = 0;
        let mut depth: i64 = 0;
        // The brace depth at which a `#[cfg(test)]` module opened.
        let mut skipping: Option<i64> = None;
        let mut cfg_test = false;
        for line in text.lines() {
            let t = line.trim();
            if skipping.is_none() && cfg_test && t.starts_with("mod ") && t.ends_with('{') {
                skipping = Some(depth);
            }
            if t == "#[cfg(test)]" {
                cfg_test = true;
                continue;
            } else if !t.starts_with("#[") {
                cfg_test = cfg_test && t.starts_with("mod ");
            }
            let comment = t.starts_with("//");
            let counted = skipping.is_none() && !t.is_empty() && !comment;
            if !comment {
                let opens = t.matches('{').count();
                let closes = t.matches('}').count();
                depth += i64::try_from(opens).unwrap() - i64::try_from(closes).unwrap();
            }
            if skipping.is_some_and(|d| depth <= d) {
                skipping = None;
                cfg_test = false;
                continue;
            }
            if counted {
                n += 1;
            }
        }
        n
    }

    #[test]
    fn code_lines_skip_comments_blanks_and_test_modules() {
        let text = "//! Doc.\n\nuse x;\n/// Item.\nfn f() {\n    // why\n    g();\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
        assert_eq!(code_lines(text), 4);
    }

    /// No file of the agent module holds more than 650 lines of code: the
    /// loop reads top to bottom in `turn.rs`, its entry points in `run.rs`
    /// (issue 36; `turn.rs` had 839), and `turn.rs` stays under 600, its
    /// tool batch in `batch.rs`.
    #[test]
    fn no_agent_file_over_650_code_lines() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/agent");
        let mut over = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let n = code_lines(&std::fs::read_to_string(&path).unwrap());
                if n > 650 {
                    over.push(format!("{}: {n}", path.display()));
                }
            }
        }
        assert!(over.is_empty(), "over 650 code lines: {over:?}");
        let turn = code_lines(&std::fs::read_to_string(dir.join("turn.rs")).unwrap());
        assert!(turn < 600, "turn.rs has {turn} code lines");
    }

    /// Issue 36, session 14, the small CLI: the tool path (validation,
    /// approval, the tool's run, the parallel threads, the trifecta check)
    /// is stored only by what registers a tool, so an agent that never
    /// registers one holds none and the program does not link it.
    #[cfg(feature = "testing")]
    #[test]
    fn only_what_registers_a_tool_stores_the_tool_path() {
        use crate::Result;
        use crate::extension::{Extension, ExtensionContext};
        use crate::testing::FakeServer;
        use crate::tool::{FnTool, Parameters};
        use std::sync::Arc;

        struct Idle;
        impl Extension for Idle {}
        struct Binds;
        impl Extension for Binds {
            fn bind(&mut self, ctx: &ExtensionContext) -> Result<()> {
                ctx.add_sub_agent_tool(Arc::new(tool("late")))
            }
        }
        fn tool(name: &str) -> FnTool {
            FnTool::new(name, "T.", Parameters::empty(), |_, _| Ok(String::new()))
        }
        let server = FakeServer::start();
        let has_path = |c: super::Configurator| {
            let agent = c.build().unwrap();
            agent.shared.state.lock().tool_path.is_some()
        };
        let builder = || super::Agent::builder(server.transport());
        assert!(!has_path(builder()));
        assert!(!has_path(builder().add_extension(Idle)));
        assert!(has_path(builder().add_tool(tool("t"))));
        assert!(has_path(builder().add_sub_agent_tool(tool("t"))));
        #[cfg(feature = "tool-search")]
        assert!(has_path(builder().add_deferred_tool(tool("t"))));
        assert!(has_path(builder().add_extension(Binds)));
    }

    /// Issue 36, session 14, the small CLI: an agent without a journal
    /// builds no journal record (each is built by a closure the journal
    /// calls), so a build without the `journal` feature links none.
    #[cfg(feature = "testing")]
    #[test]
    fn an_agent_without_a_journal_builds_no_record() {
        let server = crate::testing::FakeServer::start();
        let agent = super::Agent::builder(server.transport()).build().unwrap();
        let built = std::cell::Cell::new(false);
        let record = || {
            built.set(true);
            super::Record::Synthesizing { max: 1 }
        };
        assert!(agent.journal(record).is_ok());
        assert!(!built.get());
    }

    /// Issue 42, session 16: an agent without a listener builds no event
    /// of its turn (each is built by a closure called only for a
    /// listener); with one, the event is built and delivered.
    #[cfg(feature = "testing")]
    #[test]
    fn an_agent_without_a_listener_builds_no_event() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        let server = crate::testing::FakeServer::start();
        let built = std::cell::Cell::new(0);
        let event = || {
            built.set(built.get() + 1);
            super::Event::UserTurn {
                agent: Arc::from("a"),
                content: "hi".into(),
                mid_loop: false,
            }
        };
        let agent = super::Agent::builder(server.transport()).build().unwrap();
        agent.emit_with(event);
        assert_eq!(built.get(), 0);
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&seen);
        let agent = super::Agent::builder(server.transport())
            .on_event(move |e| {
                if matches!(e, super::Event::UserTurn { .. }) {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            })
            .build()
            .unwrap();
        agent.emit_with(event);
        agent.shared.listeners.flush();
        assert_eq!((built.get(), seen.load(Ordering::SeqCst)), (1, 1));
    }

    /// Issue 42, session 16: a request takes the transport's settings as
    /// they are when the agent sets none, which is what merging them
    /// under no settings gives.
    #[test]
    fn no_agent_settings_over_the_transports_are_the_transports() {
        use crate::{ModelSettings, ReasoningEffort, ToolChoice};
        let none = ModelSettings::default();
        for s in [
            ModelSettings::new(),
            ModelSettings::new().with_temperature(0.2).with_seed(7),
            ModelSettings::new()
                .with_top_p(-0.0)
                .with_max_output_tokens(64)
                .with_stop(["END"])
                .with_tool_choice(ToolChoice::Required)
                .with_parallel_tool_calls(false)
                .with_reasoning_effort(ReasoningEffort::High)
                .with_thinking_budget(1024),
        ] {
            assert_eq!(none.over(&s), s, "{s:?}");
        }
        assert_ne!(
            ModelSettings::new().with_seed(1),
            none,
            "a set one is no default"
        );
    }

    /// Issue 36, the small CLI: without the `guard` feature an agent holds
    /// no guard state (no chain, no pending verdict, no thread beside a
    /// request), so none of the guards' machinery is built.
    #[cfg(not(feature = "guard"))]
    #[test]
    fn without_the_guard_feature_an_agent_holds_no_guard_state() {
        assert_eq!(std::mem::size_of::<crate::guard::Guarding>(), 0);
    }

    /// Issue 36, the small CLI: without the `budgets` feature the run's
    /// meter holds nothing (no lock, no clock, no spend, no budget), so no
    /// accounting is built.
    #[cfg(not(feature = "budgets"))]
    #[test]
    fn without_the_budgets_feature_the_meter_holds_nothing() {
        assert_eq!(std::mem::size_of::<super::budget::Meter>(), 0);
        assert_eq!(std::mem::size_of::<super::budget::Budget>(), 0);
    }
}
