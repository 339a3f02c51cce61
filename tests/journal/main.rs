//! The run journal (`pikuri::journal`): what it refuses (another
//! configuration, a hand edit, a second resumer, storage that cannot be
//! written) in `errors`, the names its records store in `vocabulary`, the
//! file store under damage (links, special files, damage in every
//! position, foreign files, order, modes) in `damage`, and the crash
//! harness in `crash`: an agent in a child process killed with SIGKILL at
//! each boundary, then resumed in a new one.

mod crash;
mod damage;
mod errors;
#[cfg(feature = "guard")]
mod guards; // issue 39: a run cut off after a guard's verdict resumes to the same end
mod resume_events;
mod vocabulary;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use pikuri::journal::FileStore;
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Configurator};
use serde_json::json;

/// A fresh, empty directory for one test.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "pikuri-journal-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Held by each test of `errors` while it runs, and by the crash harness
/// while it starts a process. A process forked meanwhile shares this
/// process's open files until it execs, a run's lock file and its `flock`
/// included: a run lock dropped in that moment stays held, and the test's
/// next resume of that run would fail with `RunLocked`.
pub(crate) fn no_spawn() -> MutexGuard<'static, ()> {
    static SPAWN: Mutex<()> = Mutex::new(());
    SPAWN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The one tool of `errors`, `damage` and `vocabulary`: returns its `s`.
pub(crate) fn echo() -> FnTool {
    FnTool::new(
        "echo",
        "Echoes.",
        Parameters::builder().required_string("s", "Text.").build(),
        |a, _| Ok(a["s"].as_str().unwrap_or("").to_string()),
    )
}

/// An agent with [`echo`] on `server`, the setup those tests journal.
pub(crate) fn agent(server: &FakeServer) -> Configurator {
    Agent::builder(server.transport())
        .system_prompt("You echo.")
        .add_tool(echo())
}

/// A finished run of one tool round, journaled in `store` as `run`.
pub(crate) fn finished_run(server: &FakeServer, store: &FileStore, run: &str) {
    server.push(Reply::tool_call("echo", json!({"s": "hi"})));
    server.push(Reply::text("Echoed."));
    let mut a = agent(server).journal(store.clone(), run).build().unwrap();
    a.run_loop("echo hi").unwrap();
}
