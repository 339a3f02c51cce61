//! [`Experiment`]: every case of a dataset run N times on a bounded number
//! of threads, each run bounded in time, then judged.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;
use parking_lot::Mutex;
use serde_json::Value;

use super::capture::{Run, RunStatus, TaskContext};
use super::dataset::{Case, Dataset};
use super::report::{Report, RunResult};
use super::verdict::{Evaluator, Verdict};
use crate::Cancellable;
use crate::util::panic_message;

/// What an experiment runs for each case: usually an agent built on the
/// transport under test, run on the case's turns.
///
/// Implemented for closures `Fn(&mut TaskContext) -> Result<O, E>` where
/// `O: Into<Value>` (a `String`, an `Option<String>` such as
/// [`Outcome::answer`](crate::Outcome::answer), a `Value`) and `E:
/// Display` (so `?` on a [`pikuri::Error`](crate::Error) works).
///
/// # Thread safety
///
/// Each run calls the task on a thread of its own (so a run that hangs can
/// be left behind), several runs at once: hence `Send + Sync + 'static`.
pub trait Task: Send + Sync + 'static {
    /// Run the case in `cx` once: the output, or why it failed.
    fn run(&self, cx: &mut TaskContext) -> Result<Value, String>;
}

impl<F, O, E> Task for F
where
    F: Fn(&mut TaskContext) -> Result<O, E> + Send + Sync + 'static,
    O: Into<Value>,
    E: fmt::Display,
{
    fn run(&self, cx: &mut TaskContext) -> Result<Value, String> {
        self(cx).map(Into::into).map_err(|e| e.to_string())
    }
}

/// Where an experiment stands, handed to [`Experiment::on_progress`] after
/// each run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Runs finished so far.
    pub done: usize,
    /// Runs in all (cases × repeats).
    pub total: usize,
    /// Of the finished runs, how many passed.
    pub passed: usize,
    /// The case whose run just finished.
    pub case: String,
}

type ProgressFn = Box<dyn FnMut(&Progress) + Send>;

/// Runs every case of a [`Dataset`] through a [`Task`], judges each run
/// and returns a [`Report`](super::Report).
///
/// Each case runs [`repeats`](Experiment::repeats) times (default 1), on at
/// most [`threads`](Experiment::threads) runs at once (default 1). A run
/// gets its own [`TaskContext`] and thread:
///
/// - a task that returns `Err` is [`RunStatus::Failed`];
/// - one that panics is [`RunStatus::Panicked`], with the message;
/// - one still running after the [`timeout`](Experiment::timeout) (default
///   10 minutes) has its [`Cancellable`] cancelled and is
///   [`RunStatus::TimedOut`]: the experiment moves on at once, leaving the
///   thread behind;
/// - after the experiment's own [`cancellable`](Experiment::cancellable)
///   is cancelled, runs not started are [`RunStatus::Cancelled`], and so
///   are those in flight (their `Cancellable` is cancelled too, and the
///   experiment waits for them, within their timeout).
///
/// Only a completed run is judged: the dataset's checks and evaluators,
/// then the case's, each verdict named after its evaluator. A run passes
/// when it completed and every verdict passes.
///
/// # Examples
///
/// ```
/// use pikuri::Agent;
/// use pikuri::evals::{Case, Check, Dataset, Experiment};
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.push(Reply::text("Paris"));
/// server.push(Reply::text("I do not know."));
/// let dataset = Dataset::new("capitals")
///     .case(Case::new("france", "Capital of France?").check(Check::contains("Paris")))
///     .case(Case::new("peru", "Capital of Peru?").check(Check::contains("Lima")));
///
/// let transport = server.transport();
/// let report = Experiment::new("baseline").run(&dataset, move |cx: &mut pikuri::evals::TaskContext| {
///     let mut agent = Agent::builder(transport.clone()).add_listener(cx.listener()).build()?;
///     Ok::<_, pikuri::Error>(agent.run_loop(cx.input())?.answer)
/// });
/// assert_eq!(report.cases[0].pass_rate, 1.0);
/// assert_eq!(report.cases[1].pass_rate, 0.0);
/// assert_eq!(report.cases[1].runs[0].run.requests, 1);
/// ```
pub struct Experiment {
    name: String,
    repeats: u32,
    threads: usize,
    timeout: Duration,
    cancellable: Cancellable,
    progress: Option<Mutex<ProgressFn>>,
}

impl fmt::Debug for Experiment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Experiment")
            .field("name", &self.name)
            .field("repeats", &self.repeats)
            .field("threads", &self.threads)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// How often a waiting worker looks at the experiment's cancel signal.
const CANCEL_POLL: Duration = Duration::from_millis(20);

impl Experiment {
    /// An experiment named `name` (the report's name: "baseline",
    /// "new-prompt").
    pub fn new(name: impl Into<String>) -> Experiment {
        Experiment {
            name: name.into(),
            repeats: 1,
            threads: 1,
            timeout: Duration::from_secs(600),
            cancellable: Cancellable::new(),
            progress: None,
        }
    }

    /// Run each case `n` times (at least once).
    #[must_use]
    pub fn repeats(mut self, n: u32) -> Experiment {
        self.repeats = n.max(1);
        self
    }

    /// Run at most `n` runs at once (at least one).
    #[must_use]
    pub fn threads(mut self, n: usize) -> Experiment {
        self.threads = n.max(1);
        self
    }

    /// The longest a run may take before it is cancelled and recorded as
    /// timed out. `Duration::MAX` means no limit.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Experiment {
        self.timeout = timeout;
        self
    }

    /// The experiment's cancel signal: keep a clone and cancel it to stop.
    #[must_use]
    pub fn cancellable(mut self, cancellable: Cancellable) -> Experiment {
        self.cancellable = cancellable;
        self
    }

    /// Call `f` after each run (from a worker thread, one call at a time):
    /// a progress line on a terminal, say.
    #[must_use]
    pub fn on_progress(mut self, f: impl FnMut(&Progress) + Send + 'static) -> Experiment {
        self.progress = Some(Mutex::new(Box::new(f)));
        self
    }

    /// Run every case of `dataset` through `task`, and judge each run.
    pub fn run(&self, dataset: &Dataset, task: impl Task) -> Report {
        let task: Arc<dyn Task> = Arc::new(task);
        let jobs: Vec<(usize, u32)> = (0..dataset.cases().len())
            .flat_map(|c| (0..self.repeats).map(move |r| (c, r)))
            .collect();
        let results: Vec<Mutex<Option<RunResult>>> =
            jobs.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let counts = Mutex::new((0usize, 0usize));
        std::thread::scope(|s| {
            for _ in 0..self.threads.min(jobs.len()) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(c, repeat)) = jobs.get(i) else {
                            break;
                        };
                        let case = &dataset.cases()[c];
                        let result = self.one(dataset, case, repeat, &task);
                        self.report_progress(&counts, jobs.len(), &result);
                        *results[i].lock() = Some(result);
                    }
                });
            }
        });
        let runs = results.into_iter().filter_map(Mutex::into_inner).collect();
        Report::from_runs(&self.name, dataset, self.repeats, runs)
    }

    fn report_progress(&self, counts: &Mutex<(usize, usize)>, total: usize, result: &RunResult) {
        let Some(progress) = &self.progress else {
            return;
        };
        let mut counts = counts.lock();
        counts.0 += 1;
        counts.1 += usize::from(result.pass);
        let p = Progress {
            done: counts.0,
            total,
            passed: counts.1,
            case: result.run.case.clone(),
        };
        // Under `counts`' lock, so calls come in order.
        let mut f = progress.lock();
        if catch_unwind(AssertUnwindSafe(|| f(&p))).is_err() {
            log::warn!("evals: the progress callback panicked");
        }
    }

    /// One run of `case`, judged.
    fn one(&self, dataset: &Dataset, case: &Case, repeat: u32, task: &Arc<dyn Task>) -> RunResult {
        let mut run = Run::empty(case.name().to_string(), repeat);
        run.input = case.turns().to_vec();
        run.expected = case.expected().cloned();
        run.metadata.clone_from(case.metadata());
        if self.cancellable.is_cancelled() {
            run.status = RunStatus::Cancelled;
            run.error = Some("the experiment was cancelled before this run".into());
            return RunResult::judged(run, Vec::new());
        }
        let run = self.execute(run, task);
        let verdicts = if run.is_completed() {
            judge(dataset, case, &run)
        } else {
            Vec::new()
        };
        RunResult::judged(run, verdicts)
    }

    /// Run the task on a thread of its own and wait for it, within the
    /// timeout and while the experiment is not cancelled.
    fn execute(&self, run: Run, task: &Arc<dyn Task>) -> Run {
        let mut cx = TaskContext::new(run.clone());
        let run_cancel = cx.cancellable.clone();
        let collected = Arc::clone(&cx.collected);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let task = Arc::clone(task);
        let started = Instant::now();
        let spawned = std::thread::Builder::new()
            .name(format!(
                "pikuri-eval-{}",
                run.case.chars().take(16).collect::<String>()
            ))
            .spawn(move || {
                let out = catch_unwind(AssertUnwindSafe(|| task.run(&mut cx)));
                let _ = tx.send((out, cx.run.cost));
            });
        if let Err(e) = spawned {
            return finished(
                run,
                RunStatus::Failed,
                Some(format!("cannot start a thread: {e}")),
            );
        }
        let deadline = crate::util::deadline_after(self.timeout);
        let mut cancelled = false;
        let received = loop {
            let wait = deadline.map_or(CANCEL_POLL, |d| {
                d.saturating_duration_since(Instant::now()).min(CANCEL_POLL)
            });
            match rx.recv_timeout(wait) {
                Ok(v) => break Some(v),
                Err(RecvTimeoutError::Disconnected) => break None,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if self.cancellable.is_cancelled() {
                // Again at every poll: an agent resets its `Cancellable`
                // when its turn starts, which may come after the first.
                run_cancel.cancel();
                cancelled = true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                run_cancel.cancel();
                break None;
            }
        };
        let mut run = run;
        run.duration_ms = crate::util::millis(started.elapsed());
        collected.lock().fill(&mut run);
        let Some((out, cost)) = received else {
            if cancelled {
                let why = "the experiment was cancelled; the run did not stop within its timeout";
                return finished(run, RunStatus::Cancelled, Some(why.into()));
            }
            let why = format!(
                "timed out after {:?} (cancelled and left running)",
                self.timeout
            );
            return finished(run, RunStatus::TimedOut, Some(why));
        };
        run.cost = cost.map(|c| (c * 1e9).round() / 1e9);
        match out {
            _ if cancelled => finished(
                run,
                RunStatus::Cancelled,
                Some("the experiment was cancelled".into()),
            ),
            Ok(Ok(output)) => {
                run.output = output;
                run
            }
            Ok(Err(e)) => finished(run, RunStatus::Failed, Some(e)),
            Err(payload) => {
                let msg = format!("panicked: {}", panic_message(&*payload));
                finished(run, RunStatus::Panicked, Some(msg))
            }
        }
    }
}

/// The most characters of a task's error or panic message a run keeps.
const MAX_ERROR_CHARS: usize = 4000;

fn finished(mut run: Run, status: RunStatus, error: Option<String>) -> Run {
    run.status = status;
    run.error = error.map(|e| crate::util::excerpt(&e, MAX_ERROR_CHARS).into_owned());
    run
}

/// Every evaluator of the dataset, then of the case, on `run`; a panic in
/// one is a failing verdict.
fn judge(dataset: &Dataset, case: &Case, run: &Run) -> Vec<Verdict> {
    let evaluators = dataset
        .checks()
        .iter()
        .map(|c| c as &dyn Evaluator)
        .chain(dataset.evaluators().map(|e| e as &dyn Evaluator))
        .chain(case.checks().iter().map(|c| c as &dyn Evaluator))
        .chain(case.evaluators().iter().map(|e| e as &dyn Evaluator));
    evaluators
        .map(|e| {
            let name = e.name();
            let mut verdict =
                catch_unwind(AssertUnwindSafe(|| e.evaluate(run))).unwrap_or_else(|p| {
                    Verdict::fail(format!("the evaluator panicked: {}", panic_message(&*p)))
                        .with_label("panicked")
                });
            verdict.evaluator = name;
            verdict.score = super::verdict::unit_score(verdict.score);
            verdict
        })
        .collect()
}
