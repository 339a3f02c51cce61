//! One guard's check on a thread of its own, bounded in time and by the
//! host's cancel: a panic, an error and an overrun each come back as the
//! reason of a stop. The check runs in the run's [`Scope`]: the
//! [`Spender`] through which a model-backed guard ([`Judge`](super::Judge))
//! asks before a request and counts it, and the host's token, which cuts
//! its request.
//!
//! The threads are kept: a check goes to an idle guard thread when there is
//! one, and a thread starts only when none is idle. Starting a thread per
//! check cost a turn with one blocking input guard several times the turn
//! itself on a loaded machine (`benches/guards.rs`); handing the check to a
//! waiting thread costs one wake-up. A thread idle for [`IDLE_FOR`] ends,
//! and at most [`MAX_IDLE`] wait, so a host that stops using guards keeps
//! none.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};
use parking_lot::Mutex;

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

/// What a run lends its guards' checks: its budget and the host's cancel
/// (none of either outside a run).
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
    /// The host cancelled while it ran (its thread finishes the check and
    /// drops what it returns).
    Cancelled,
    /// It failed (its error), panicked, or took longer than its bound.
    Failed(String),
}

/// A check handed to a guard thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// How long a guard thread waits for its next check before it ends.
const IDLE_FOR: Duration = Duration::from_secs(30);
/// The most guard threads kept waiting; more end after their check.
const MAX_IDLE: usize = 8;

/// The most checks that may still run past their bound (or the host's
/// cancel): a guard that never returns keeps its thread, one thread per
/// check, so past this many no new check starts (it is a stop, naming
/// why) and the threads stay bounded.
const MAX_OVERRUNS: usize = 64;

/// The checks still running that nobody waits for any more.
pub(super) struct Overruns {
    count: AtomicUsize,
    max: usize,
}

impl Overruns {
    pub(super) const fn new(max: usize) -> Overruns {
        Overruns {
            count: AtomicUsize::new(0),
            max,
        }
    }

    /// How many checks run past their bound now.
    #[cfg(test)]
    pub(super) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
}

static OVERRUNS: Overruns = Overruns::new(MAX_OVERRUNS);

/// A check's state, shared by its job and its waiter.
const RUNNING: u8 = 0;
const FINISHED: u8 = 1;
const ABANDONED: u8 = 2;

/// The idle guard threads: each one's id and the sender of its checks.
static IDLE: Mutex<Vec<(u64, Sender<Job>)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Run `check` on a guard thread, in `scope`, and wait at most `timeout`
/// for it, or until the scope's token is cancelled.
///
/// # Errors
///
/// Why the guard gave no verdict: the host cancelled, or it failed (its
/// error), panicked, or took longer than `timeout` (its thread finishes
/// the check, drops what it returns and goes back to waiting).
pub(super) fn run<T, E>(
    timeout: Duration,
    scope: &Scope,
    check: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, NoVerdict>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    run_counted(&OVERRUNS, timeout, scope, check)
}

/// [`run`], counting the checks left running in `overruns`.
pub(super) fn run_counted<T, E>(
    overruns: &'static Overruns,
    timeout: Duration,
    scope: &Scope,
    check: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, NoVerdict>
where
    T: Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    // The host's cancel, on its own channel: the verdict's sender lives
    // only in the job, so a panic still disconnects it.
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
    if overruns.count.load(Ordering::Acquire) >= overruns.max {
        return Err(NoVerdict::Failed(format!(
            "the guard was not started: {} guard checks still run past their bound",
            overruns.max
        )));
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let lent = scope.clone();
    let state = Arc::new(AtomicU8::new(RUNNING));
    let job_state = Arc::clone(&state);
    // A panic drops `tx` unsent: the receiver sees the disconnect. The
    // thread is kept: the scope is lent for this check only.
    let job: Job = Box::new(move || {
        SCOPE.with(|s| *s.borrow_mut() = lent);
        let verdict = catch_unwind(AssertUnwindSafe(check));
        SCOPE.with(|s| *s.borrow_mut() = Scope::default());
        // Abandoned by its waiter: it counted this check as running on.
        if job_state.swap(FINISHED, Ordering::AcqRel) == ABANDONED {
            overruns.count.fetch_sub(1, Ordering::AcqRel);
        }
        if let Ok(v) = verdict {
            let _ = tx.send(v);
        }
    });
    if let Err(e) = hand_over(job) {
        return Err(NoVerdict::Failed(format!("the guard could not start: {e}")));
    }
    let failed = |why: String| Err(NoVerdict::Failed(why));
    // No longer waited for: counted as running on until its job ends.
    // Counted first, so the job's decrement never comes before it.
    let abandon = || {
        overruns.count.fetch_add(1, Ordering::AcqRel);
        let was = state.compare_exchange(RUNNING, ABANDONED, Ordering::AcqRel, Ordering::Acquire);
        if was.is_err() {
            overruns.count.fetch_sub(1, Ordering::AcqRel);
        }
    };
    crossbeam_channel::select! {
        recv(rx) -> got => match got {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => failed(format!("the guard failed: {e}")),
            Err(_) => failed("the guard panicked".into()),
        },
        recv(on_cancel) -> _ => {
            abandon();
            Err(NoVerdict::Cancelled)
        }
        default(timeout) => {
            abandon();
            failed(format!("the guard took longer than {} ms", crate::util::millis(timeout)))
        }
    }
}

/// Run `check` on this thread (a guard that says it may, see
/// [`Input::inline`](super::Input::inline)): a panic or an error is still
/// a stop; no bound in time, no scope.
pub(super) fn run_inline<T, E: std::fmt::Display>(
    check: impl FnOnce() -> Result<T, E>,
) -> Result<T, NoVerdict> {
    match catch_unwind(AssertUnwindSafe(check)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(NoVerdict::Failed(format!("the guard failed: {e}"))),
        Err(_) => Err(NoVerdict::Failed("the guard panicked".into())),
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
        let none = &Scope::default();
        let failed = |why: &str| Err(NoVerdict::Failed(why.to_string()));
        assert_eq!(
            run(Duration::from_secs(5), none, || Ok::<_, String>(7)),
            Ok(7)
        );
        assert_eq!(
            run(Duration::from_secs(5), none, || Err::<u8, _>(
                "no".to_string()
            )),
            failed("the guard failed: no")
        );
        assert_eq!(
            run(Duration::from_secs(5), none, || -> Result<u8, String> {
                panic!("boom")
            }),
            failed("the guard panicked")
        );
        let (release, wait) = crossbeam_channel::bounded::<()>(0);
        let slow = run(Duration::from_millis(1), none, move || {
            let _ = wait.recv();
            Ok::<_, String>(1)
        });
        assert_eq!(slow, failed("the guard took longer than 1 ms"));
        drop(release);
        // The threads are still good after a panic and an overrun.
        assert_eq!(
            run(Duration::from_secs(5), none, || Ok::<_, String>(8)),
            Ok(8)
        );
    }

    #[test]
    fn many_checks_at_once_each_get_their_own_verdict() {
        let handles: Vec<_> = (0..16u32)
            .map(|i| {
                std::thread::spawn(move || {
                    (0..50u32)
                        .map(|j| {
                            run(Duration::from_secs(10), &Scope::default(), move || {
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
    fn a_check_sees_its_scope_and_a_kept_thread_forgets_it() {
        let cancel = Cancellable::new();
        let lent = Scope {
            spender: None,
            cancel: Some(cancel.clone()),
        };
        let seen = |s: &Scope| {
            run(Duration::from_secs(5), s, || {
                Ok::<_, String>(scope().cancel.is_some())
            })
        };
        assert_eq!(seen(&lent), Ok(true));
        assert_eq!(seen(&Scope::default()), Ok(false));
        // A cancelled scope gives no verdict.
        cancel.cancel();
        assert_eq!(seen(&lent), Err(NoVerdict::Cancelled));
    }

    /// A check that overran its bound is not waited for, but it keeps its
    /// scope: what its request spends when it finishes is still counted.
    #[test]
    fn an_overrun_check_still_counts_through_its_scope() {
        #[derive(Default)]
        struct Tally(AtomicU64);
        impl Spender for Tally {
            fn refuses(&self, _: Option<&str>, _: u64) -> Option<Limit> {
                None
            }
            fn count(&self, _: Option<&str>, _: Option<Usage>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let tally = Arc::new(Tally::default());
        let lent = Scope {
            spender: Some(Arc::clone(&tally) as Arc<dyn Spender>),
            cancel: None,
        };
        let (release, wait) = crossbeam_channel::bounded::<()>(0);
        let (finished, done) = crossbeam_channel::bounded::<()>(1);
        let got = run(Duration::from_millis(1), &lent, move || {
            let _ = wait.recv();
            if let Some(s) = scope().spender {
                s.count(None, None);
            }
            let _ = finished.send(());
            Ok::<_, String>(1)
        });
        assert_eq!(
            got,
            Err(NoVerdict::Failed("the guard took longer than 1 ms".into()))
        );
        assert_eq!(tally.0.load(Ordering::SeqCst), 0);
        drop(release);
        done.recv().unwrap();
        assert_eq!(tally.0.load(Ordering::SeqCst), 1);
    }

    /// Guards that never return keep a thread each: past the bound on
    /// such checks, a new one is not started (a stop, naming why), so the
    /// threads stay bounded; once they end, checks start again.
    #[test]
    fn checks_running_past_their_bound_are_bounded_in_number() {
        static STUCK: Overruns = Overruns::new(3);
        let none = &Scope::default();
        let (release, wait) = crossbeam_channel::bounded::<()>(0);
        for _ in 0..3 {
            let wait = wait.clone();
            let got = run_counted(&STUCK, Duration::from_millis(1), none, move || {
                let _ = wait.recv();
                Ok::<_, String>(0)
            });
            assert_eq!(
                got,
                Err(NoVerdict::Failed("the guard took longer than 1 ms".into()))
            );
        }
        assert_eq!(STUCK.count(), 3);
        let ran = Arc::new(AtomicU8::new(0));
        let r = Arc::clone(&ran);
        let refused = run_counted(&STUCK, Duration::from_secs(5), none, move || {
            r.store(1, Ordering::SeqCst);
            Ok::<_, String>(1)
        });
        assert_eq!(
            refused,
            Err(NoVerdict::Failed(
                "the guard was not started: 3 guard checks still run past their bound".into()
            ))
        );
        assert_eq!(ran.load(Ordering::SeqCst), 0, "never started");
        drop((release, wait));
        while STUCK.count() > 0 {
            std::thread::yield_now();
        }
        assert_eq!(
            run_counted(&STUCK, Duration::from_secs(5), none, || Ok::<_, String>(2)),
            Ok(2)
        );
        // A check that ends in time is never counted.
        assert_eq!(STUCK.count(), 0);
    }

    #[test]
    fn a_thread_taken_off_the_idle_list_is_not_retired() {
        // Park one id that is not in the list: retire must refuse.
        assert!(!retire(u64::MAX));
    }
}
