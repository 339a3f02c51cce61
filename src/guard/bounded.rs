//! One guard's check on a thread of its own, bounded in time: a panic, an
//! error and an overrun each come back as the reason of a stop. The
//! thread carries the run's [`Spender`], through which a model-backed
//! guard ([`Judge`](super::Judge)) asks before a request and counts it.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;

use crate::Usage;
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

thread_local! {
    /// The spender of the check running on this guard thread.
    static SPENDER: RefCell<Option<Arc<dyn Spender>>> = const { RefCell::new(None) };
}

/// The spender of the check running on this thread (none outside a run:
/// a guard called directly spends nothing the crate counts).
pub(super) fn spender() -> Option<Arc<dyn Spender>> {
    SPENDER.with(|s| s.borrow().clone())
}

/// Run `check` on a new thread, `spender` in reach of it, and wait at
/// most `timeout` for it.
///
/// # Errors
///
/// Why the guard gave no verdict: it failed (its error), panicked, or took
/// longer than `timeout` (its thread is left to finish; what it returns
/// then is dropped).
pub(super) fn run<T, E>(
    timeout: Duration,
    spender: Option<Arc<dyn Spender>>,
    check: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, String>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let (tx, rx) = crossbeam_channel::bounded(1);
    let spawned = std::thread::Builder::new()
        .name("pikuri-guard".into())
        // A panic drops `tx` unsent: the receiver sees the disconnect.
        .spawn(move || {
            SPENDER.with(|s| *s.borrow_mut() = spender);
            let _ = tx.send(check());
        });
    if let Err(e) = spawned {
        return Err(format!("the guard could not start: {e}"));
    }
    match rx.recv_timeout(timeout) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("the guard failed: {e}")),
        Err(RecvTimeoutError::Disconnected) => Err("the guard panicked".into()),
        Err(RecvTimeoutError::Timeout) => Err(format!(
            "the guard took longer than {} ms",
            timeout.as_millis()
        )),
    }
}
