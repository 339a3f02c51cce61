//! Runs that survive a crash: an append-only journal of every step of a
//! run, and the resume that finishes the run where it stopped without
//! paying for a model call twice.
//!
//! An agent built with [`Configurator::journal`](crate::Configurator::journal)
//! writes one record per step boundary to a [`JournalStore`], and the
//! record is stored (synced, in [`SyncMode::Durable`]) **before** the
//! step's effect is acted on:
//!
//! | boundary | record |
//! |---|---|
//! | a user message enters (a turn, the [`Interloper`](crate::Interloper), a typed turn's repair) | `user` |
//! | an extension injects a system message | `system` |
//! | the model's response is complete, before any of its tools runs | `response` |
//! | a tool call was approved and is about to run | `tool_start` |
//! | a call's observation is appended | `tool_result` |
//! | the approver is asked, and decides | `approval_asked`, `approval_answered` |
//! | a compaction, a loaded or cleared history | `history` (the whole new history) |
//! | a model switch ([`run_loop_with`](crate::Agent::run_loop_with)) | `model_switched`: the resumed agent uses the transport it was built with, with that model |
//! | the budget ran out and the synthesizer is to answer | `synthesizing` |
//! | the run ends, with its stop reason (and its final answer's finish, or its error) | `turn_end` |
//!
//! After a crash, an agent built with the host's tools and configuration
//! by [`Configurator::resume`](crate::Configurator::resume) holds the
//! conversation as journaled, and [`Agent::resume_run`](crate::Agent::resume_run)
//! finishes the run that was cut off.
//!
//! # Guarantees, and their limits
//!
//! - **No completed model call is paid twice.** A response in the journal
//!   is never requested again. A request in flight when the process died
//!   (sent, or half streamed) left no record: its partial stream is
//!   dropped and the request re-issued.
//! - **Tools: at most once, or at least once.** A call with a journaled
//!   result is not run again. A call that started and has no result runs
//!   again only when its tool says it is [`idempotent`](crate::Tool::idempotent)
//!   (at least once); any other gets the observation
//!   `Error: interrupted: ...` and the model decides (at most once). Each
//!   call's [`ToolContext::idempotency_key`](crate::ToolContext::idempotency_key)
//!   (`run/step/call id`) is the same in both runs, so a tool that talks
//!   to an outside system can have it drop a second copy.
//! - **Parallel tool calls** ([`parallel_tool_calls`](crate::Configurator::parallel_tool_calls)):
//!   each call's start is journaled as it starts, but the batch's results
//!   only once every call of it returned (in call order). A crash
//!   mid-batch therefore reruns its idempotent calls and interrupts the
//!   others, even one that had returned; the resumed results stay in call
//!   order.
//! - A run cut off while the [synthesizer](crate::subagent::Synthesizer)
//!   wrote the answer has it written again (the spent budget stays spent).
//! - **A pending approval is asked again**: a call whose approval was
//!   asked and not yet answered (or answered, but the call not started)
//!   is reviewed again on resume.
//! - A child agent (a sub-agent, the synthesizer, the compactor's summary)
//!   keeps no journal of its own: a crash inside a sub-agent's call is a
//!   crash inside its parent's tool call, resumed as above; a summary
//!   request in flight is made again.
//! - A [fallback](crate::Configurator::fallback) is not journaled: a
//!   resumed agent starts on its primary transport again.
//! - A run that ended with an error (an HTTP failure, a cancel) ended: its
//!   `turn_end` is journaled, [`Agent::interrupted`](crate::Agent::interrupted)
//!   is false, and [`Agent::retry_turn`](crate::Agent::retry_turn) goes on
//!   as usual (journaled too).
//! - **Listeners see the whole turn again.** The resumed run starts with
//!   [`Event::Resumed`](crate::Event::Resumed) and replays the cut-off
//!   turn's stored messages as events (a stored result with its call's
//!   `ToolCall` and its `ToolResult`), so a listener of the new process can
//!   render the turn and shows no call pending for ever; see
//!   [`Agent::resume_run`](crate::Agent::resume_run), "What listeners see".
//! - The resumed run gets a fresh [`StepLimit`](crate::StepLimit) budget
//!   and its own [`Outcome`](crate::Outcome); [`Agent::total_usage`](crate::Agent::total_usage)
//!   starts from zero.
//!
//! # Two resumers
//!
//! An agent holds its run's [lock](JournalStore::lock) from `build` until
//! it is dropped. The [`FileStore`]'s is an OS file lock, which dies with
//! its process: a second agent on the same run, in this process or
//! another, gets [`Error::RunLocked`]. A process forked by another
//! thread shares the lock file until it execs: a run dropped and taken
//! again in that moment gets [`Error::RunLocked`] too (the
//! `tests/journal` suite keeps its process starts apart from its runs).
//!
//! # Format, versions and growth
//!
//! A journal is a sequence of JSON records, the first a header with the
//! format version (1), the run id and a fingerprint of the configuration
//! (model, tool names, a digest of the system prompt and the tools'
//! descriptions and schemas). A reader reads every version up to its own
//! (a new version only adds record types and optional fields) and refuses
//! a newer one ([`Error::JournalCorrupt`]);
//! a journal written by another configuration is
//! [`Error::JournalMismatch`]. Messages are
//! written through their serde form, so they round-trip whole.
//!
//! The names a record stores for why a run ended (`completed`,
//! `incomplete`, `error`, ...), why an answer ended (`complete`, `length`,
//! ...), what an approver decided (`approve`, `deny`, `edit`, `defer`) and
//! why a history was replaced are the journal's own, spelled out in one
//! place and pinned by a test: renaming a public enum's variant does not
//! change the file. The spellings earlier writers of version 1 stored
//! (`"Completed"`, `"error: ..."`, `"deny: ..."`, a `truncated` flag) are
//! still read; a name no writer stored is [`Error::JournalCorrupt`],
//! naming the record. A resumed run reports the finish of the answer it
//! replays ([`Outcome::finish`](crate::Outcome::finish)).
//!
//! A journal grows by each message of the conversation once, plus a
//! `tool_start` per call, the approvals and a `turn_end` per run: about
//! the size of [`History::to_json`](crate::History::to_json) plus 100 bytes
//! per call. A compaction writes the compacted history, so a compacting
//! agent's journal grows by about its window per compaction; start a new
//! run (a new id) to drop the old file.
//!
//! # Examples
//!
//! ```
//! use pikuri::{Agent, Tool};
//! use pikuri::journal::{FileStore, JournalStore};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("Hello!"));
//! let dir = std::env::temp_dir().join(format!("pikuri-doc-journal-{}", std::process::id()));
//! let store = FileStore::new(&dir)?;
//!
//! let mut agent = Agent::builder(server.transport()).journal(store.clone(), "run-1").build()?;
//! agent.run_loop("Hi")?;
//! drop(agent);
//! assert!(store.unfinished()?.is_empty()); // the turn ended
//!
//! // A new process: the conversation comes back from the journal.
//! let agent = Agent::builder(server.transport()).resume(store.clone(), "run-1").build()?;
//! assert_eq!(agent.messages().len(), 2);
//! assert!(!agent.interrupted());
//! # drop(agent);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), pikuri::Error>(())
//! ```

mod file;
mod frame;
mod order;
mod record;
mod vocab;

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

pub use file::FileStore;
pub(crate) use record::{Cut, Fingerprint, Guarded, Record, Replayed, fnv1a, replay};
pub(crate) use vocab::HistoryCause;

use crate::{Error, FinishReason, Message, Result, Spend};

/// When a [`FileStore`] makes a record durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncMode {
    /// Sync every record to the disk before the step's effect (`fsync`):
    /// a crash of the process or of the machine loses nothing written.
    #[default]
    Durable,
    /// Write every record, sync none: a crash of the process loses
    /// nothing (the data is in the kernel); a crash of the machine may
    /// lose the last records, and a resume then repeats their steps.
    Relaxed,
}

/// Where journals are kept: the seam a host implements to keep them on
/// shared storage (and resume a run on another machine); [`FileStore`] is
/// the built-in one.
///
/// A store deals in records as JSON text (one value, no newline); it
/// frames, checks and syncs them as its medium needs.
pub trait JournalStore: Send + Sync + 'static {
    /// Append `record` to `run`'s journal (created by the first append).
    /// When it returns `Ok`, the record is stored as durably as the store
    /// promises; the agent acts on the step only then.
    ///
    /// # Errors
    ///
    /// [`Error::JournalIo`] when the record could not be stored.
    fn append(&self, run: &str, record: &str) -> Result<()>;

    /// `run`'s records, in order; empty when the run has no journal. A
    /// torn last record (a crash mid-write) is left out.
    ///
    /// # Errors
    ///
    /// [`Error::JournalCorrupt`] for a damaged record (any but a torn last
    /// one) or data that is not a journal, [`Error::JournalIo`] when the
    /// journal cannot be read (see [`FileStore`] for what its files refuse).
    fn read(&self, run: &str) -> Result<Vec<String>>;

    /// Every run with a journal, sorted.
    ///
    /// # Errors
    ///
    /// [`Error::JournalIo`] when the store cannot be listed.
    fn runs(&self) -> Result<Vec<String>>;

    /// Take `run`'s exclusive lock, held until the [`RunLock`] drops.
    ///
    /// # Errors
    ///
    /// [`Error::RunLocked`] when another holder has it.
    fn lock(&self, run: &str) -> Result<RunLock>;

    /// The runs whose last run was cut off (their journal does not end
    /// with the end of a run): the ones to [resume](crate::Configurator::resume).
    /// A run paused for approval ended; a journal that cannot be read (a
    /// damaged one, or a link, a folder or a FIFO in its place) is listed,
    /// and its resume says what is wrong: one such entry never hides the
    /// others.
    ///
    /// # Errors
    ///
    /// As [`runs`](JournalStore::runs), and [`read`](JournalStore::read)'s
    /// errors other than [`Error::JournalCorrupt`] and [`Error::JournalIo`].
    fn unfinished(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for run in self.runs()? {
            let records = match self.read(&run) {
                Ok(records) => records,
                Err(e)
                    if matches!(
                        e.kind(),
                        crate::ErrorKind::JournalCorrupt | crate::ErrorKind::JournalIo
                    ) =>
                {
                    out.push(run);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let ended = records.last().is_none_or(|last| {
                matches!(
                    serde_json::from_str::<Record<'_>>(last),
                    Ok(Record::TurnEnd { .. } | Record::Header { .. })
                )
            });
            if !ended {
                out.push(run);
            }
        }
        Ok(out)
    }
}

/// A shared store is a store.
impl JournalStore for Arc<dyn JournalStore> {
    fn append(&self, run: &str, record: &str) -> Result<()> {
        (**self).append(run, record)
    }
    fn read(&self, run: &str) -> Result<Vec<String>> {
        (**self).read(run)
    }
    fn runs(&self) -> Result<Vec<String>> {
        (**self).runs()
    }
    fn lock(&self, run: &str) -> Result<RunLock> {
        (**self).lock(run)
    }
    fn unfinished(&self) -> Result<Vec<String>> {
        (**self).unfinished()
    }
}

/// A run's exclusive lock, released when dropped. A store wraps whatever
/// holds its lock (a locked file, a lease) in one.
pub struct RunLock {
    _held: Box<dyn Any + Send + Sync>,
}

impl RunLock {
    /// A lock held as long as `held` lives.
    pub fn new(held: impl Any + Send + Sync) -> RunLock {
        RunLock {
            _held: Box::new(held),
        }
    }
}

impl fmt::Debug for RunLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RunLock")
    }
}

/// A run id names a file: 1 to 128 characters of `[A-Za-z0-9._-]`, not
/// starting with a dot.
pub(crate) fn check_run_id(run: &str) -> Result<()> {
    let ok = !run.is_empty()
        && run.len() <= 128
        && !run.starts_with('.')
        && run
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "run id `{run}` must be 1 to 128 characters of [A-Za-z0-9._-], not starting with a dot"
        )))
    }
}

/// An agent's open journal: the store, the run, its lock, and the
/// writer's state. Shared by the loop, the approval gate and the tool
/// threads.
pub(crate) struct Journal {
    store: Box<dyn JournalStore>,
    run: Arc<str>,
    _lock: RunLock,
    state: Mutex<WriterState>,
}

#[derive(Default)]
struct WriterState {
    /// Responses journaled so far.
    step: u64,
    /// The first failed write: every later write fails with it, so the
    /// journal never has a gap.
    failed: Option<Error>,
}

/// How a journal is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Open {
    /// A new run: its id must be free.
    New,
    /// An existing run.
    Resume,
}

impl Journal {
    /// Open `run` in `store` for an agent whose configuration is
    /// `fingerprint`: lock it, then write the header (new) or replay it
    /// (resume).
    pub(crate) fn open(
        store: Box<dyn JournalStore>,
        run: &str,
        fingerprint: &Fingerprint,
        how: Open,
    ) -> Result<(Journal, Replayed)> {
        check_run_id(run)?;
        let lock = store.lock(run)?;
        let records = store.read(run)?;
        let replayed = match how {
            Open::New if !records.is_empty() => {
                return Err(Error::JournalMismatch {
                    run: run.to_string(),
                    message: "a new run was asked for, but the run already has a journal (resume it, or pick a new id)".into(),
                });
            }
            Open::New => {
                let header = Record::header(run, fingerprint);
                store.append(run, &header.to_json())?;
                Replayed::default()
            }
            Open::Resume if records.is_empty() => {
                return Err(Error::JournalMismatch {
                    run: run.to_string(),
                    message: "there is no journal to resume".into(),
                });
            }
            Open::Resume => replay(run, &records, fingerprint)?,
        };
        let journal = Journal {
            store,
            run: Arc::from(run),
            _lock: lock,
            state: Mutex::new(WriterState {
                step: replayed.step,
                failed: None,
            }),
        };
        Ok((journal, replayed))
    }

    /// Store `record`; after a failure, every later call fails the same.
    /// [`append`](Journal::append) the record `record` builds: a caller
    /// builds it only when there is a journal (without the feature, never).
    pub(crate) fn append_with<'r>(&self, record: impl FnOnce() -> Record<'r>) -> Result<()> {
        self.append(&record())
    }

    pub(crate) fn append(&self, record: &Record<'_>) -> Result<()> {
        let mut st = self.state.lock();
        if let Some(e) = &st.failed {
            return Err(same(e));
        }
        if let Record::Response { step, .. } = record {
            st.step = *step;
        }
        let result = self.store.append(&self.run, &record.to_json());
        if let Err(e) = &result {
            st.failed = Some(same(e));
        }
        result
    }

    /// The first failed write, if any.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.state.lock().failed {
            Some(e) => Err(same(e)),
            None => Ok(()),
        }
    }

    /// The step the next response gets.
    pub(crate) fn next_step(&self) -> u64 {
        self.state.lock().step + 1
    }

    /// The current step (the latest response's).
    pub(crate) fn step(&self) -> u64 {
        self.state.lock().step
    }

    /// The idempotency key of `call_id` in the current step.
    pub(crate) fn key(&self, call_id: &str) -> Arc<str> {
        Arc::from(format!("{}/{}/{call_id}", self.run, self.step()))
    }

    pub(crate) fn response(
        &self,
        message: &Message,
        finish: FinishReason,
        (spent, earlier): (Option<Spend>, Option<Spend>),
    ) -> Result<()> {
        self.append(&Record::Response {
            step: self.next_step(),
            message: Cow::Borrowed(message),
            finish: Some(vocab::Finish::from_public(finish)),
            truncated: false,
            spent,
            earlier,
        })
    }
}

/// A copy of a journal error (errors are not `Clone`: the I/O source is
/// kept as text).
fn same(e: &Error) -> Error {
    match e {
        Error::JournalIo { run, message } => Error::JournalIo {
            run: run.clone(),
            message: message.clone(),
        },
        other => Error::JournalIo {
            run: String::new(),
            message: other.to_string(),
        },
    }
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal")
            .field("run", &self.run)
            .finish_non_exhaustive()
    }
}
