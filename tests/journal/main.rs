//! The run journal (`pikuri::journal`): what it refuses (another
//! configuration, a hand edit, a second resumer, storage that cannot be
//! written) in `errors`, and the crash harness in `crash`: an agent in a
//! child process killed with SIGKILL at each boundary, then resumed in a
//! new one.

mod crash;
mod errors;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

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
