use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::{Error, Result};

type Hook = Arc<dyn Fn() + Send + Sync>;

/// A cancellation token for a run and everything it spawned.
///
/// [`cancel`](Cancellable::cancel) may be called from any thread (a Ctrl+C
/// handler's thread, a UI thread). Unlike pikuri's gentle cancel, it is not
/// only observed at the next tool boundary: a request in flight (streamed or
/// not, even one the server never answers) is interrupted by shutting its
/// sockets down, so [`run_loop`](crate::Agent::run_loop) returns
/// [`Error::Cancelled`] within milliseconds. A running tool sees the flag
/// through its [`ToolContext`](crate::ToolContext) and may stop early; the
/// loop checks again before every tool call and every request.
///
/// # Examples
///
/// ```
/// use pikuri::Cancellable;
/// let c = Cancellable::new();
/// assert_eq!(c.to_string(), "Cancellable(armed)");
/// let for_handler = c.clone(); // shares the flag
/// std::thread::spawn(move || for_handler.cancel()).join().unwrap();
/// assert!(c.is_cancelled());
/// assert!(c.check().unwrap_err().is_cancelled());
/// c.reset();
/// assert!(c.check().is_ok());
/// ```
///
/// # Thread safety
///
/// The flag is an `AtomicBool` written and read with `SeqCst`, so a hook
/// registered by a request either sees the flag set or is seen by
/// `cancel()`: a cancel can never fall between the check and the
/// registration. Hooks live in a `parking_lot::Mutex`.
///
/// # Sub-agents
///
/// Shared by reference with every sub-agent and the synthesizer: one cancel
/// stops the whole tree.
#[derive(Clone, Default)]
pub struct Cancellable {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    next_hook: AtomicU64,
    hooks: Mutex<Vec<(u64, Hook)>>,
}

impl Cancellable {
    /// An armed (not cancelled) token.
    pub fn new() -> Cancellable {
        Cancellable::default()
    }

    /// Cancel: set the flag and interrupt requests in flight. Idempotent.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        let hooks: Vec<Hook> = self
            .inner
            .hooks
            .lock()
            .iter()
            .map(|(_, h)| Arc::clone(h))
            .collect();
        for hook in hooks {
            hook();
        }
    }

    /// Whether [`cancel`](Cancellable::cancel) was called since the last reset.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// `Err(Error::Cancelled)` when cancelled, else `Ok(())`.
    ///
    /// # Errors
    ///
    /// [`Error::Cancelled`] when the flag is set.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Re-arm. The loop calls this at the start of every turn (never on a
    /// mid-loop injection, which would lose a cancel that came just before).
    pub fn reset(&self) {
        self.inner.cancelled.store(false, Ordering::SeqCst);
    }

    /// Register `hook` to run on `cancel()` until the returned guard drops. If
    /// the token is already cancelled, the hook runs at once.
    pub(crate) fn on_cancel(&self, hook: impl Fn() + Send + Sync + 'static) -> CancelHook {
        let id = self.inner.next_hook.fetch_add(1, Ordering::Relaxed);
        let hook: Hook = Arc::new(hook);
        self.inner.hooks.lock().push((id, Arc::clone(&hook)));
        if self.is_cancelled() {
            hook();
        }
        CancelHook {
            owner: Arc::clone(&self.inner),
            id,
        }
    }

    /// Whether two handles share one token.
    pub fn same_as(&self, other: &Cancellable) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// Unregisters a cancel hook on drop.
pub(crate) struct CancelHook {
    owner: Arc<Inner>,
    id: u64,
}

impl Drop for CancelHook {
    fn drop(&mut self) {
        self.owner.hooks.lock().retain(|(id, _)| *id != self.id);
    }
}

impl fmt::Display for Cancellable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.is_cancelled() {
            "cancelled"
        } else {
            "armed"
        };
        write!(f, "Cancellable({state})")
    }
}

impl fmt::Debug for Cancellable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancellable")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn hooks_fire_once_registered_and_unregister_on_drop() {
        let c = Cancellable::new();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hits);
        let guard = c.on_cancel(move || {
            h.fetch_add(1, Ordering::SeqCst);
        });
        c.cancel();
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        drop(guard);
        c.cancel();
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn hook_registered_after_cancel_runs_immediately() {
        let c = Cancellable::new();
        c.cancel();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hits);
        let _g = c.on_cancel(move || {
            h.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }
}
