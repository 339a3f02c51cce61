//! [`Offline`]: an experiment's model requests recorded once against a real
//! server, then replayed from the cassette in every run after.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::testing::{Cassette, FakeServer, Recorder};
use crate::{ChatTransport, Error, Result};

/// The largest cassette read or replaced (a recording of a whole
/// experiment may be large; a report has the same bound).
const MAX_CASSETTE_BYTES: u64 = super::report::MAX_REPORT_BYTES;

/// The model an experiment talks to: a real one through a recording proxy
/// ([`record`](Offline::record)), or the recording replayed
/// ([`replay`](Offline::replay)): no model, no network, the same answers
/// byte for byte, so the same report every time.
///
/// Build every agent of the task on [`transport`](Offline::transport) with
/// the same configuration in both modes (pin the sampling when recording:
/// `request_field("temperature", json!(0))`), then call
/// [`finish`](Offline::finish): it saves the cassette after a recording,
/// and after a replay reports requests the recording never saw and
/// answers never asked for. Replay matches each request by its body, so
/// runs on several threads replay in any order; a case run N times needs N
/// recorded runs (record with the same `repeats`).
///
/// # Examples
///
/// ```
/// use pikuri::Agent;
/// use pikuri::evals::{Case, Check, Dataset, Experiment, Offline, TaskContext};
/// use pikuri::testing::{FakeServer, Reply};
///
/// let dir = std::env::temp_dir().join(format!("pikuri-offline-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let cassette = dir.join("capitals.cassette.json");
/// let dataset = Dataset::new("capitals").case(Case::new("france", "Capital of France?").check(Check::contains("Paris")));
/// let run = |offline: &Offline| {
///     let transport = offline.transport();
///     Experiment::new("x").run(&dataset, move |cx: &mut TaskContext| {
///         let mut agent = Agent::builder(transport.clone()).add_listener(cx.listener()).build()?;
///         Ok::<_, pikuri::Error>(agent.run_loop(cx.input())?.answer)
///     })
/// };
///
/// // Once, against a real server (here a scripted one stands in).
/// let real = FakeServer::start();
/// real.push(Reply::text("Paris."));
/// let recording = Offline::record(&cassette, &real.transport())?;
/// let recorded = run(&recording);
/// recording.finish()?;
///
/// // In every CI run after: the same report, with no model.
/// let replay = Offline::replay(&cassette)?;
/// let replayed = run(&replay);
/// replay.finish()?;
/// assert_eq!(replayed.without_timings(), recorded.without_timings());
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Offline {
    path: PathBuf,
    mode: Mode,
}

enum Mode {
    Record {
        recorder: Box<Recorder>,
        transport: Box<ChatTransport>,
    },
    Replay(FakeServer),
}

impl fmt::Debug for Offline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Offline")
            .field("path", &self.path)
            .field("recording", &self.is_recording())
            .finish_non_exhaustive()
    }
}

impl Offline {
    /// Record the requests sent to `live` (its model, key, API and
    /// settings are kept; only its base URL is replaced by a local proxy's).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when `live` has no base URL or the proxy
    /// cannot start.
    pub fn record(path: impl AsRef<Path>, live: &ChatTransport) -> Result<Offline> {
        let upstream = live.api_base().ok_or_else(|| {
            Error::InvalidInput("evals: the live transport has no base URL to record".into())
        })?;
        let recorder = Recorder::try_start(upstream)
            .map_err(|e| Error::InvalidInput(format!("evals: cannot start the recorder: {e}")))?;
        let transport = live.clone().with_api_base(recorder.base_url());
        Ok(Offline {
            path: path.as_ref().to_path_buf(),
            mode: Mode::Record {
                recorder: Box::new(recorder),
                transport: Box::new(transport),
            },
        })
    }

    /// Replay the cassette at `path` (recorded on chat completions; for
    /// another API add `.with_api(..)` to [`transport`](Offline::transport)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the file: not a regular file (a FIFO
    /// is refused before it is opened), over 256 MiB, or not a cassette
    /// ([`Cassette::parse`]).
    pub fn replay(path: impl AsRef<Path>) -> Result<Offline> {
        let path = path.as_ref();
        // Bounded, and refusing a FIFO or a device before opening it, as
        // the kit's other files are read.
        let text = super::file::read_bounded(path, MAX_CASSETTE_BYTES)?;
        let cassette = Cassette::parse(&text).map_err(|e| match e {
            Error::InvalidInput(m) => Error::InvalidInput(format!("{}: {m}", path.display())),
            other => other,
        })?;
        Ok(Offline {
            path: path.to_path_buf(),
            mode: Mode::Replay(FakeServer::from_cassette(cassette)),
        })
    }

    /// [`record`](Offline::record) when `live` is given (a model is
    /// configured), [`replay`](Offline::replay) otherwise.
    pub fn record_or_replay(
        path: impl AsRef<Path>,
        live: Option<&ChatTransport>,
    ) -> Result<Offline> {
        match live {
            Some(live) => Offline::record(path, live),
            None => Offline::replay(path),
        }
    }

    /// Whether this records (rather than replays).
    pub fn is_recording(&self) -> bool {
        matches!(self.mode, Mode::Record { .. })
    }

    /// The transport to build the task's agents on.
    pub fn transport(&self) -> ChatTransport {
        match &self.mode {
            Mode::Record { transport, .. } => (**transport).clone(),
            Mode::Replay(server) => server.transport(),
        }
    }

    /// After a recording, save the cassette; after a replay, check that
    /// every request was in it and every recorded answer was used.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] listing the requests that matched nothing
    /// (each with a diff against the closest recording) and the answers
    /// never asked for; after a recording in which the server answered no
    /// request (nothing is written: the last cassette stays); or the
    /// cassette's write error (a non-empty file at the path that is not a
    /// cassette is never replaced).
    pub fn finish(self) -> Result<()> {
        match self.mode {
            Mode::Record { recorder, .. } => {
                let cassette = recorder.cassette();
                let kind = super::file::Kind {
                    what: "cassette",
                    max: MAX_CASSETTE_BYTES,
                    is_one: &|text| Cassette::parse(text).is_ok(),
                };
                // Why refuse: a server that answered nothing (down, a wrong
                // URL) leaves an empty recording, which would replace the
                // last good one and fail every replay after. (What stands
                // at the path is judged first, as a write would.)
                if cassette.interactions().is_empty() {
                    super::file::check_replaceable(&self.path, 0, &kind)?;
                    return Err(Error::InvalidInput(format!(
                        "evals: nothing was recorded (the server answered no request): {} is left as it was",
                        self.path.display()
                    )));
                }
                let mut text = cassette.to_json();
                text.push('\n');
                super::file::write_atomic(&self.path, text.as_bytes(), &kind)
            }
            Mode::Replay(server) => {
                let mismatches = server.mismatches();
                let unused = server.unused_interactions();
                if mismatches.is_empty() && unused.is_empty() {
                    return Ok(());
                }
                Err(Error::InvalidInput(format!(
                    "evals: the replay of {} differs from its recording: {} request(s) not recorded, {} recorded answer(s) unused\n{}",
                    self.path.display(),
                    mismatches.len(),
                    unused.len(),
                    mismatches
                        .iter()
                        .chain(&unused)
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join("\n")
                )))
            }
        }
    }
}
