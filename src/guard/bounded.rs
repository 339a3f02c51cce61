//! One guard's check on a thread of its own, bounded in time: a panic, an
//! error and an overrun each come back as the reason of a stop.
//!
//! The threads are kept: a check goes to an idle guard thread when there is
//! one, and a thread starts only when none is idle. Starting a thread per
//! check cost a turn with one blocking input guard several times the turn
//! itself on a loaded machine (`benches/guards.rs`); handing the check to a
//! waiting thread costs one wake-up. A thread idle for [`IDLE_FOR`] ends,
//! and at most [`MAX_IDLE`] wait, so a host that stops using guards keeps
//! none.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};
use parking_lot::Mutex;

/// A check handed to a guard thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// How long a guard thread waits for its next check before it ends.
const IDLE_FOR: Duration = Duration::from_secs(30);
/// The most guard threads kept waiting; more end after their check.
const MAX_IDLE: usize = 8;

/// The idle guard threads: each one's id and the sender of its checks.
static IDLE: Mutex<Vec<(u64, Sender<Job>)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Run `check` on a guard thread and wait at most `timeout` for it.
///
/// # Errors
///
/// Why the guard gave no verdict: it failed (its error), panicked, or took
/// longer than `timeout` (its thread finishes the check, drops what it
/// returns and goes back to waiting).
pub(super) fn run<T, E>(
    timeout: Duration,
    check: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, String>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let (tx, rx) = crossbeam_channel::bounded(1);
    // A panic drops `tx` unsent: the receiver sees the disconnect.
    let job: Job = Box::new(move || {
        let _ = tx.send(check());
    });
    if let Err(e) = hand_over(job) {
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

/// Give `job` to an idle guard thread, or to a new one (the agent runs the
/// guards beside a request this way too).
///
/// # Errors
///
/// The thread could not start.
pub(crate) fn hand_over(job: Job) -> std::io::Result<()> {
    let idle = IDLE.lock().pop();
    let job = match idle {
        // A thread popped here is not waiting to end: `retire` found it
        // gone from the list, so it waits for this job.
        Some((_, worker)) => match worker.send(job) {
            Ok(()) => return Ok(()),
            // Its thread is gone (it cannot be, but a lost check would be
            // a silent allow): start one.
            Err(crossbeam_channel::SendError(job)) => job,
        },
        None => job,
    };
    let (tx, rx) = crossbeam_channel::bounded::<Job>(1);
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    tx.send(job).expect("the receiver is held here");
    std::thread::Builder::new()
        .name("pikuri-guard".into())
        .spawn(move || serve(id, &tx, &rx))?;
    Ok(())
}

/// A guard thread: run each check, then wait to be handed the next.
fn serve(id: u64, tx: &Sender<Job>, rx: &crossbeam_channel::Receiver<Job>) {
    loop {
        match rx.recv_timeout(IDLE_FOR) {
            Ok(job) => {
                // The job's own channel reports the panic (its sender is
                // dropped unsent); the thread stays usable.
                let _ = catch_unwind(AssertUnwindSafe(job));
                let mut idle = IDLE.lock();
                if idle.len() >= MAX_IDLE {
                    return;
                }
                idle.push((id, tx.clone()));
            }
            Err(RecvTimeoutError::Timeout) => {
                if retire(id) {
                    return;
                }
                // Popped just now: its job is on the way.
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Take thread `id` off the idle list; false when a caller popped it first
/// (and is handing it a job).
fn retire(id: u64) -> bool {
    let mut idle = IDLE.lock();
    match idle.iter().position(|(i, _)| *i == id) {
        Some(at) => {
            idle.swap_remove(at);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_errors_panics_and_overruns_each_come_back() {
        assert_eq!(run(Duration::from_secs(5), || Ok::<_, String>(7)), Ok(7));
        assert_eq!(
            run(Duration::from_secs(5), || Err::<u8, _>("no".to_string())),
            Err("the guard failed: no".to_string())
        );
        assert_eq!(
            run(Duration::from_secs(5), || -> Result<u8, String> {
                panic!("boom")
            }),
            Err("the guard panicked".to_string())
        );
        let (release, wait) = crossbeam_channel::bounded::<()>(0);
        let slow = run(Duration::from_millis(1), move || {
            let _ = wait.recv();
            Ok::<_, String>(1)
        });
        assert_eq!(slow, Err("the guard took longer than 1 ms".to_string()));
        drop(release);
        // The threads are still good after a panic and an overrun.
        assert_eq!(run(Duration::from_secs(5), || Ok::<_, String>(8)), Ok(8));
    }

    #[test]
    fn many_checks_at_once_each_get_their_own_verdict() {
        let handles: Vec<_> = (0..16u32)
            .map(|i| {
                std::thread::spawn(move || {
                    (0..50u32)
                        .map(|j| {
                            run(Duration::from_secs(10), move || {
                                Ok::<_, String>(i * 1000 + j)
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            let got = h.join().expect("no panic");
            let want: Vec<_> = (0..50u32).map(|j| Ok(i as u32 * 1000 + j)).collect();
            assert_eq!(got, want);
        }
        assert!(IDLE.lock().len() <= MAX_IDLE);
    }

    #[test]
    fn a_thread_taken_off_the_idle_list_is_not_retired() {
        // Park one id that is not in the list: retire must refuse.
        assert!(!retire(u64::MAX));
    }
}
