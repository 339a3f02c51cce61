//! The extension protocol: [`Extension`] hooks and the [`ExtensionContext`]
//! capability facade.

use std::sync::{Arc, Weak};

use serde_json::Value;

use super::Shared;
use crate::listener::ListenerList;
use crate::{Cancellable, ChatTransport, Error, Event, Result, Tool};

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
/// use pikuri::{Agent, Configurator, Result};
/// use pikuri::extension::{Extension, ExtensionContext};
/// use pikuri::listeners::InMemoryEventList;
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
    fn configure(&mut self, c: &crate::Configurator) -> Result<()> {
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

/// The capabilities an agent hands its extensions; see [`Extension`].
///
/// Cheap to clone. It holds the agent weakly: once the agent is dropped,
/// emitting does nothing and the other calls report an error or `None`.
#[derive(Clone)]
pub struct ExtensionContext {
    shared: Weak<Shared>,
}

impl std::fmt::Debug for ExtensionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.shared.upgrade() {
            Some(s) => write!(f, "ExtensionContext(agent={:?})", &*s.id),
            None => f.write_str("ExtensionContext(closed)"),
        }
    }
}

fn gone() -> Error {
    Error::invalid("the agent behind this extension context is gone")
}

impl ExtensionContext {
    pub(super) fn new(shared: &Arc<Shared>) -> ExtensionContext {
        ExtensionContext {
            shared: Arc::downgrade(shared),
        }
    }

    fn shared(&self) -> Result<Arc<Shared>> {
        self.shared.upgrade().ok_or_else(gone)
    }

    /// Emit a domain event ([`Event::Domain`]) onto the agent's stream.
    pub fn emit_event(&self, name: impl Into<String>, payload: Value, transient: bool) {
        if let Some(s) = self.shared.upgrade() {
            s.listeners.emit(Event::Domain {
                agent: Arc::clone(&s.id),
                name: name.into(),
                payload,
                transient,
            });
        }
    }

    /// Register a model-visible tool at runtime; it is offered from the next
    /// request on.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the name is taken.
    pub fn add_tool(&self, tool: Arc<dyn Tool>) -> Result<()> {
        self.shared()?.add_tool(tool, false)
    }

    /// Register a sub-agent-only tool at runtime (the pool of
    /// [`Configurator::add_sub_agent_tool`](crate::Configurator::add_sub_agent_tool)):
    /// never offered to this agent's model, reachable by the
    /// [`Persona`](crate::subagent::Persona)s that name it from the next sub-agent on.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the name is taken (in either pool).
    pub fn add_sub_agent_tool(&self, tool: Arc<dyn Tool>) -> Result<()> {
        self.shared()?.add_tool(tool, true)
    }

    /// Remove the tool called `name` from either pool (e.g. a tool a server
    /// withdrew); it is no longer offered from the next request on. Returns
    /// whether there was one.
    pub fn remove_tool(&self, name: &str) -> bool {
        self.shared.upgrade().is_some_and(|s| s.remove_tool(name))
    }

    /// Append a system message after the current user turn (memory-style
    /// context); emits [`Event::SystemInjected`]. It reaches the model in the
    /// next request, never between a tool call and its result.
    pub fn inject_system_message(&self, content: impl Into<String>) -> Result<()> {
        let s = self.shared()?;
        let content = content.into();
        s.state.lock().pending_system.push(content.clone());
        s.listeners.emit(Event::SystemInjected {
            agent: Arc::clone(&s.id),
            content,
        });
        Ok(())
    }

    /// A listener list for a sub-agent with id `id`.
    pub fn listeners_for_sub_agent(&self, id: &str) -> ListenerList {
        self.shared
            .upgrade()
            .map(|s| s.listeners.for_sub_agent(id))
            .unwrap_or_default()
    }

    /// Register a close handler (same LIFO list as
    /// [`Configurator::on_close`](crate::Configurator::on_close)).
    pub fn on_close(&self, handler: impl FnOnce() + Send + 'static) -> Result<()> {
        self.shared()?.on_close.lock().push(Box::new(handler));
        Ok(())
    }

    /// The agent's id.
    pub fn agent_id(&self) -> String {
        self.shared
            .upgrade()
            .map(|s| s.id.to_string())
            .unwrap_or_default()
    }

    /// The agent's current transport.
    pub fn transport(&self) -> Option<ChatTransport> {
        Some(self.shared.upgrade()?.state.lock().transport.clone())
    }

    /// The agent's resolved context cap.
    pub fn context_window_cap(&self) -> Option<u64> {
        self.shared.upgrade()?.state.lock().context_cap
    }

    /// The agent's cancellation token.
    pub fn cancellable(&self) -> Option<Cancellable> {
        self.shared.upgrade()?.cancellable.clone()
    }

    /// Whether the agent streams.
    pub fn streaming(&self) -> bool {
        self.shared.upgrade().is_some_and(|s| s.streaming)
    }

    /// The model-visible tools.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared
            .upgrade()
            .map(|s| s.state.lock().tools.clone())
            .unwrap_or_default()
    }

    /// The sub-agent-only tools.
    pub fn sub_agent_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared
            .upgrade()
            .map(|s| s.state.lock().sub_agent_tools.clone())
            .unwrap_or_default()
    }

    /// Build a child agent of this context's agent (see `agent/child.rs` for
    /// what it inherits).
    pub(crate) fn spawn_child(&self, spec: super::child::ChildSpec) -> Result<crate::Agent> {
        self.shared()?.spawn_child(spec)
    }
}
