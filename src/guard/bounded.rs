//! One guard's check on a thread of its own, bounded in time: a panic, an
//! error and an overrun each come back as the reason of a stop.

use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;

/// Run `check` on a new thread and wait at most `timeout` for it.
///
/// # Errors
///
/// Why the guard gave no verdict: it failed (its error), panicked, or took
/// longer than `timeout` (its thread is left to finish; what it returns
/// then is dropped).
pub(super) fn run<T, E>(
    timeout: Duration,
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
