//! The capabilities an agent hands its extensions: [`ExtensionContext`]. The
//! [`Extension`](crate::extension::Extension) trait lives with the
//! [`Configurator`](crate::Configurator) it is configured by.

use std::sync::{Arc, Weak};

use serde_json::Value;

use super::shared::{Pool, Shared};
use crate::listener::ListenerList;
use crate::{Cancellable, ChatTransport, Error, Event, Interloper, Result, StepLimit, Tool};

/// The capabilities an agent hands its extensions; see [`Extension`](crate::extension::Extension).
///
/// What pikuri's extensions read through `ctx.agent` is read here: the
/// agent's id, model, transport, system prompt, tools in both pools,
/// controls ([`Cancellable`], [`StepLimit`], [`Interloper`]: the agent's own
/// instances), context cap and streaming flag. The other extensions are not
/// reachable (each is mutably borrowed while its hooks run).
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

    /// The agent's shared state, while the agent exists.
    pub(crate) fn shared(&self) -> Result<Arc<Shared>> {
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
        self.shared()?.add_tool(tool, Pool::Model)
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
        self.shared()?.add_tool(tool, Pool::SubAgent)
    }

    /// Register a deferred tool at runtime (see
    /// [`Configurator::add_deferred_tool`](crate::Configurator::add_deferred_tool)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the name is taken (in any pool).
    #[cfg(feature = "tool-search")]
    pub fn add_deferred_tool(&self, tool: Arc<dyn Tool>) -> Result<()> {
        self.shared()?.add_tool(tool, Pool::Deferred)
    }

    /// Remove the tool called `name` from either pool (e.g. a tool a server
    /// withdrew); it is no longer offered from the next request on. Returns
    /// whether there was one.
    pub fn remove_tool(&self, name: &str) -> bool {
        self.remove_tools(&[name]) > 0
    }

    /// Remove several tools at once (one pass over the pools, however many
    /// names); how many were there.
    pub(crate) fn remove_tools(&self, names: &[&str]) -> usize {
        self.shared.upgrade().map_or(0, |s| s.remove_tools(names))
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
        Some(ChatTransport::clone(
            &self.shared.upgrade()?.state.lock().transport,
        ))
    }

    /// The agent's current model id (pikuri's `ctx.agent.model`).
    pub fn model(&self) -> Option<String> {
        let s = self.shared.upgrade()?;
        let st = s.state.lock();
        st.transport.model().map(str::to_string)
    }

    /// The agent's system prompt as last assembled: its base plus every
    /// extension's snippets (pikuri's `ctx.agent.system_prompt`).
    pub fn system_prompt(&self) -> Option<String> {
        Some(self.shared.upgrade()?.state.lock().system_prompt.clone())
    }

    /// The agent's step budget, the same instance the loop ticks.
    pub fn step_limit(&self) -> Option<StepLimit> {
        self.shared.upgrade()?.step_limit.clone()
    }

    /// The agent's mid-loop input queue, the same instance the loop drains
    /// (e.g. to show the host what is waiting).
    pub fn interloper(&self) -> Option<Interloper> {
        self.shared.upgrade()?.interloper.clone()
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
        self.shared.upgrade().is_some_and(|s| s.options.streaming)
    }

    /// The model-visible tools.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared
            .upgrade()
            .map(|s| s.state.lock().tools.clone())
            .unwrap_or_default()
    }

    /// The deferred tools, found or not (a persona may name one).
    pub(crate) fn deferred_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared
            .upgrade()
            .map(|s| s.state.lock().deferred.clone())
            .unwrap_or_default()
    }

    /// The sub-agent-only tools.
    pub fn sub_agent_tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared
            .upgrade()
            .map(|s| s.state.lock().sub_agent_tools.clone())
            .unwrap_or_default()
    }
}
