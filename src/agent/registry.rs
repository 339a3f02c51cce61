//! The process-wide registry of open agents and host handlers behind
//! [`close_all`]: the counterpart of pikuri's `Finalizers`.
//!
//! Each agent's shared state is registered, as a weak reference, when it is
//! built and removed when it is closed; a host's handler
//! ([`register_close`]) when it is registered, until it runs or is
//! unregistered. One list, in registration order, so `close_all` tears down
//! in reverse dependency order across both. A weak reference keeps nothing alive:
//! an agent dropped normally leaves a dead entry, pruned at the next
//! registration. A leaked agent (`std::mem::forget`, a reference cycle, a
//! `static`) keeps its shared state alive, so [`close_all`] still reaches it.
//!
//! Locking: the registry's lock is held only to copy or edit the list, never
//! while a handler runs or a shared state is dropped; an agent's handler list
//! is locked only to take it. So `close_all` can run on any thread, while a
//! turn runs on another, and a handler may itself call `close_all`.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::shared::{CloseHandler, Shared, run_close_handlers};

/// One registration: an open agent, or a host's handler not yet run.
enum Entry {
    Agent(Weak<Shared>),
    Handler(u64, CloseHandler),
}

impl Entry {
    /// A dropped agent's entry is dead; a handler lives until it runs.
    fn is_live(&self) -> bool {
        match self {
            Entry::Agent(w) => w.strong_count() > 0,
            Entry::Handler(..) => true,
        }
    }
}

/// The open agents and pending handlers, oldest first.
static OPEN: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The id of the next [`register_close`] handler.
static NEXT_HANDLER: AtomicU64 = AtomicU64::new(0);

/// Track a newly built agent.
pub(super) fn register(shared: &Arc<Shared>) {
    let mut open = OPEN.lock();
    open.retain(Entry::is_live);
    open.push(Entry::Agent(Arc::downgrade(shared)));
}

/// Forget a closed agent (and any dead entries).
pub(super) fn unregister(shared: &Arc<Shared>) {
    OPEN.lock().retain(|e| match e {
        Entry::Agent(w) => w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(shared)),
        Entry::Handler(..) => true,
    });
}

/// Register `handler` to run at the next [`close_all`], in the same list as
/// the open agents: pikuri's `Finalizers.register { ... }`, for a host's own
/// resources (a container to stop, a temporary directory, a server the
/// agents' tools talk to).
///
/// Handlers and agents are torn down newest first, so registration order is
/// dependency order: a resource registered before the agents that use it is
/// released after they closed. A handler runs at most once, isolated like an
/// agent's (a panic is logged at `warn`); dropping the returned
/// [`CloseRegistration`] keeps it registered, and
/// [`unregister`](CloseRegistration::unregister) takes it back. Values that
/// clean up in `Drop` need none of this: it is for the exit paths where
/// `Drop` does not run (see [Closing](crate::Agent#closing)).
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use pikuri::Agent;
/// use pikuri::testing::FakeServer;
///
/// let order = Arc::new(Mutex::new(Vec::new()));
/// let log = |what: &'static str| {
///     let order = Arc::clone(&order);
///     move || order.lock().unwrap().push(what)
/// };
/// let server = FakeServer::start();
/// let _db = pikuri::register_close(log("database")); // used by the agent's tools
/// let agent = Agent::builder(server.transport()).on_close(log("agent")).build()?;
/// std::mem::forget(agent); // as if the process were exiting from a signal handler
/// let scratch = pikuri::register_close(log("scratch dir"));
/// let unused = pikuri::register_close(log("never"));
/// assert!(unused.unregister());
///
/// assert_eq!(pikuri::close_all(), 3);
/// assert_eq!(*order.lock().unwrap(), ["scratch dir", "agent", "database"]);
/// assert!(!scratch.unregister()); // it already ran
/// assert_eq!(pikuri::close_all(), 0);
/// # Ok::<(), pikuri::Error>(())
/// ```
pub fn register_close(handler: impl FnOnce() + Send + 'static) -> CloseRegistration {
    let id = NEXT_HANDLER.fetch_add(1, Ordering::Relaxed);
    let mut open = OPEN.lock();
    open.retain(Entry::is_live);
    open.push(Entry::Handler(id, Box::new(handler)));
    CloseRegistration { id }
}

/// A handler registered with [`register_close`]; dropping it keeps the
/// handler registered.
pub struct CloseRegistration {
    id: u64,
}

impl CloseRegistration {
    /// Take the handler back without running it (pikuri's
    /// `Finalizers.unregister`): whether it was still registered, `false`
    /// once a [`close_all`] ran it.
    pub fn unregister(self) -> bool {
        let mut open = OPEN.lock();
        let before = open.len();
        open.retain(|e| !matches!(e, Entry::Handler(id, _) if *id == self.id));
        open.len() != before
    }
}

impl fmt::Debug for CloseRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloseRegistration").finish_non_exhaustive()
    }
}

/// What `close_all` runs, newest first, outside the registry's lock.
enum Task {
    Agent(Arc<Shared>),
    Handler(CloseHandler),
}

/// Run the on-close handlers of every agent still open in this process, and
/// the handlers registered with [`register_close`]: the call for a host's
/// exit path and signal handlers, where `Drop` does not run.
///
/// Agents and registered handlers are visited newest first, in one list;
/// each agent's handlers last registered first, each handler isolated (a
/// panic is logged at `warn`), as [`Agent::close`](crate::Agent::close) runs
/// them. Every handler runs at
/// most once, whoever runs it first: `close_all` called twice, or an agent
/// closed or dropped afterwards, runs nothing again. Then each agent's
/// listeners are closed as [`Agent::close`](crate::Agent::close) closes
/// them: every event emitted before goes out, each listener's thread
/// handles it, runs its [`close`](crate::Listener::close) (a file flushed,
/// an [`OtlpExporter`](crate::otel::OtlpExporter)'s spans sent) and is
/// joined, [`Delivery::HandOff`](crate::listeners::Delivery) listeners
/// too: when `close_all` returns, everything was delivered. The agents
/// stay usable (one may be mid-turn on another thread); what they emit
/// afterwards reaches no listener.
///
/// Returns the number of handlers run.
///
/// # Thread safety
///
/// Call it from any thread, including a signal-handling thread such as the
/// one the `ctrlc` crate runs handlers on, while agents run turns elsewhere:
/// no lock is held while a handler runs, so it cannot deadlock on the
/// registry or on an agent. It locks and allocates, so it is not for a raw
/// `sigaction` handler. Handlers registered after it ran (an extension's
/// [`ExtensionContext::on_close`](crate::extension::ExtensionContext::on_close) during
/// a later turn) run at the agent's close as usual, or at the next
/// `close_all`.
///
/// A [`Configurator`](crate::Configurator) not yet built is not an open
/// agent: its armed handlers run when it is dropped.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use pikuri::Agent;
/// use pikuri::testing::FakeServer;
///
/// let server = FakeServer::start();
/// let closed = Arc::new(AtomicUsize::new(0));
/// let c = Arc::clone(&closed);
/// let agent = Agent::builder(server.transport())
///     .on_close(move || { c.fetch_add(1, Ordering::SeqCst); })
///     .build()?;
/// std::mem::forget(agent); // leaked: `Drop` will never run
///
/// pikuri::close_all(); // e.g. in a Ctrl+C handler, before `process::exit`
/// assert_eq!(closed.load(Ordering::SeqCst), 1);
/// pikuri::close_all(); // idempotent
/// assert_eq!(closed.load(Ordering::SeqCst), 1);
/// # Ok::<(), pikuri::Error>(())
/// ```
pub fn close_all() -> usize {
    let tasks: Vec<Task> = {
        let mut open = OPEN.lock();
        let mut tasks = Vec::with_capacity(open.len());
        // Agents stay registered (they stay usable); handlers are taken,
        // since each runs once.
        let kept: Vec<Entry> = open
            .drain(..)
            .filter_map(|e| match e {
                Entry::Agent(w) => {
                    let shared = w.upgrade()?;
                    tasks.push(Task::Agent(shared));
                    Some(Entry::Agent(w))
                }
                Entry::Handler(_, handler) => {
                    tasks.push(Task::Handler(handler));
                    None
                }
            })
            .collect();
        *open = kept;
        tasks
    };
    let mut ran = 0;
    for task in tasks.into_iter().rev() {
        // An agent's `Arc` drops at the end of its arm, outside every lock:
        // if the agent was dropped meanwhile, its shared state is freed on
        // this thread.
        let (handlers, agent) = match task {
            Task::Agent(shared) => {
                let handlers = std::mem::take(&mut *shared.on_close.lock());
                (handlers, Some(shared))
            }
            Task::Handler(handler) => (vec![handler], None),
        };
        ran += handlers.len();
        run_close_handlers(handlers);
        if let Some(shared) = agent {
            shared.listeners.close();
        }
    }
    ran
}
