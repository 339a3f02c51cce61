//! One guard's check on a thread of its own, bounded in time and by the
//! host's cancel: a panic, an error and an overrun each come back as the
//! reason of a stop. The thread carries the run's [`Scope`]: the
//! [`Spender`] through which a model-backed guard ([`Judge`](super::Judge))
//! asks before a request and counts it, and the host's token, which cuts
//! its request.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use crate::Usage;
use crate::control::Cancellable;
use crate::spend::Limit;

/// The run's budget as a guard's thread sees it (the agent's `Meter`,
/// `agent/budget.rs`): a model-backed guard's requests are refused and
/// counted like the loop's own.
pub(crate) trait Spender: Send + Sync {
    /// The limit that refuses a request to `model` of about `input`
    /// tokens (remembered, so the loop reports the guard's failure as
    /// that budget stop).
    fn refuses(&self, model: Option<&str>, input: u64) -> Option<Limit>;
    /// One request answered by `model`, with the usage it reported.
    fn count(&self, model: Option<&str>, usage: Option<Usage>);
}

/// What a run lends its guards' threads: its budget and the host's
/// cancel (none of either outside a run).
#[derive(Clone, Default)]
pub(crate) struct Scope {
    pub(crate) spender: Option<Arc<dyn Spender>>,
    pub(crate) cancel: Option<Cancellable>,
}

thread_local! {
    /// The scope of the check running on this guard thread.
    static SCOPE: RefCell<Scope> = RefCell::new(Scope::default());
}

/// The scope of the check running on this thread (empty outside a run: a
/// guard called directly spends nothing the crate counts).
pub(super) fn scope() -> Scope {
    SCOPE.with(|s| s.borrow().clone())
}

/// Why a guard gave no verdict.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum NoVerdict {
    /// The host cancelled while it ran (its thread is left to finish).
    Cancelled,
    /// It failed (its error), panicked, or took longer than its bound (its
    /// thread is left to finish; what it returns then is dropped).
    Failed(String),
}

/// Run `check` on a new thread, `scope` in reach of it, and wait at most
/// `timeout` for it, or until the scope's token is cancelled.
///
/// # Errors
///
/// Why the guard gave no verdict.
pub(super) fn run<T, E>(
    timeout: Duration,
    scope: &Scope,
    check: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, NoVerdict>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    // The host's cancel, on its own channel: the verdict's sender lives
    // only on the guard's thread, so a panic still disconnects it.
    let (mut _hook, mut on_cancel) = (None, crossbeam_channel::never());
    if let Some(c) = &scope.cancel {
        let (cancelled, rx) = crossbeam_channel::bounded(1);
        // The hook owns the sender: it lives as long as the wait.
        _hook = Some(c.on_cancel(move || {
            let _ = cancelled.try_send(());
        }));
        on_cancel = rx;
    }
    if on_cancel.try_recv().is_ok() {
        return Err(NoVerdict::Cancelled);
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let lent = scope.clone();
    let spawned = std::thread::Builder::new()
        .name("pikuri-guard".into())
        // A panic drops `tx` unsent: the receiver sees the disconnect.
        .spawn(move || {
            SCOPE.with(|s| *s.borrow_mut() = lent);
            let _ = tx.send(check());
        });
    if let Err(e) = spawned {
        return Err(NoVerdict::Failed(format!("the guard could not start: {e}")));
    }
    let failed = |why: String| Err(NoVerdict::Failed(why));
    crossbeam_channel::select! {
        recv(rx) -> got => match got {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => failed(format!("the guard failed: {e}")),
            Err(_) => failed("the guard panicked".into()),
        },
        recv(on_cancel) -> _ => Err(NoVerdict::Cancelled),
        default(timeout) => failed(format!(
            "the guard took longer than {} ms",
            timeout.as_millis()
        )),
    }
}
