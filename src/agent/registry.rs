//! The process-wide registry of open agents behind [`close_all`]: the
//! counterpart of pikuri's `Finalizers`.
//!
//! Each agent's shared state is registered, as a weak reference, when it is
//! built and removed when it is closed. A weak reference keeps nothing alive:
//! an agent dropped normally leaves a dead entry, pruned at the next
//! registration. A leaked agent (`std::mem::forget`, a reference cycle, a
//! `static`) keeps its shared state alive, so [`close_all`] still reaches it.
//!
//! Locking: the registry's lock is held only to copy or edit the list, never
//! while a handler runs or a shared state is dropped; an agent's handler list
//! is locked only to take it. So `close_all` can run on any thread, while a
//! turn runs on another, and a handler may itself call `close_all`.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::shared::{Shared, run_close_handlers};

/// The open agents, oldest first.
static OPEN: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// Track a newly built agent.
pub(super) fn register(shared: &Arc<Shared>) {
    let mut open = OPEN.lock();
    open.retain(|w| w.strong_count() > 0);
    open.push(Arc::downgrade(shared));
}

/// Forget a closed agent (and any dead entries).
pub(super) fn unregister(shared: &Arc<Shared>) {
    OPEN.lock()
        .retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(shared)));
}

/// Run the on-close handlers of every agent still open in this process:
/// the call for a host's exit path and signal handlers, where `Drop` does not
/// run.
///
/// Agents are visited newest first, each agent's handlers last registered
/// first, each handler isolated (a panic is logged at `warn`), as
/// [`Agent::close`](crate::Agent::close) runs them. Every handler runs at
/// most once, whoever runs it first: `close_all` called twice, or an agent
/// closed or dropped afterwards, runs nothing again. Listener threads are
/// not joined (an agent may be mid-turn on another thread); the agents stay
/// usable, and their `close` or `Drop` joins them as usual.
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
    let live: Vec<Arc<Shared>> = OPEN.lock().iter().filter_map(Weak::upgrade).collect();
    let mut ran = 0;
    for shared in live.iter().rev() {
        let handlers = std::mem::take(&mut *shared.on_close.lock());
        ran += handlers.len();
        run_close_handlers(handlers);
    }
    // `live` drops here, outside every lock: if an agent was dropped
    // meanwhile, its shared state is freed on this thread.
    drop(live);
    ran
}
