//! The built-in store: one append-only file per run in a directory,
//! `<run>.journal`, and its lock file `<run>.lock`.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::frame::{frame, unframe};
use super::{JournalStore, RunLock, SyncMode};
use crate::{Error, Result};

/// The built-in [`JournalStore`]: a directory holding one append-only file
/// per run, `<run>.journal`, one framed record a line (its length and
/// CRC-32, then its JSON), readable and writable by its owner only (mode
/// 0600 on Unix: it holds prompts and tool results), and a lock file
/// `<run>.lock` beside it.
///
/// A clone shares the open files. The directory is created when missing.
///
/// # Damage
///
/// The last line may be torn (a crash mid-write): [`read`](JournalStore::read)
/// ignores it and the next append cuts it off. A damaged line before the
/// last is [`Error::JournalCorrupt`]: nothing of the run is returned.
///
/// # Examples
///
/// ```
/// use pikuri::journal::{FileStore, JournalStore, SyncMode};
///
/// let dir = std::env::temp_dir().join(format!("pikuri-doc-file-store-{}", std::process::id()));
/// let store = FileStore::new(&dir)?.with_sync(SyncMode::Relaxed);
/// store.append("run-1", r#"{"type":"user","content":"hi"}"#)?;
/// assert_eq!(store.read("run-1")?, [r#"{"type":"user","content":"hi"}"#]);
/// assert_eq!(store.runs()?, ["run-1"]);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct FileStore {
    dir: PathBuf,
    sync: SyncMode,
    open: Arc<Mutex<HashMap<String, File>>>,
}

impl FileStore {
    /// A store keeping its journals in `dir` (created, mode 0700 on Unix,
    /// when missing), syncing every record ([`SyncMode::Durable`]).
    ///
    /// # Errors
    ///
    /// [`Error::JournalIo`] when the directory cannot be created.
    pub fn new(dir: impl AsRef<Path>) -> Result<FileStore> {
        let dir = dir.as_ref().to_path_buf();
        create_dir(&dir)
            .map_err(|e| io_error("", &format!("cannot create {}", dir.display()), &e))?;
        Ok(FileStore {
            dir,
            sync: SyncMode::Durable,
            open: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// This store with another [`SyncMode`].
    #[must_use]
    pub fn with_sync(mut self, sync: SyncMode) -> FileStore {
        self.sync = sync;
        self
    }

    /// The directory holding the journals.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of `run`'s journal.
    pub fn path(&self, run: &str) -> PathBuf {
        self.dir.join(format!("{run}.journal"))
    }

    /// The run's file, opened for appending: a torn last line (a crash
    /// mid-write) is cut off first, so the next record starts a line.
    fn open_for_append(&self, run: &str) -> io::Result<File> {
        let path = self.path(run);
        let mut options = OpenOptions::new();
        options.read(true).append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let created = !path.exists();
        let mut file = options.open(&path)?;
        // Only a regular file has a tail to check (a device such as
        // /dev/full would read forever).
        let mut text = Vec::new();
        if file.metadata()?.is_file() {
            file.read_to_end(&mut text)?;
        }
        let keep = whole_lines(&text);
        if keep < text.len() {
            file.set_len(keep as u64)?;
            file.seek(SeekFrom::End(0))?;
        }
        // A new file's name must survive a crash too: sync the directory.
        if created && self.sync == SyncMode::Durable {
            File::open(&self.dir)?.sync_all()?;
        }
        Ok(file)
    }
}

/// The length of `text` up to the end of its last valid line: a last line
/// without its newline, or one whose frame does not hold, is torn.
fn whole_lines(text: &[u8]) -> usize {
    let Some(end) = text.iter().rposition(|&b| b == b'\n') else {
        return 0;
    };
    let start = text[..end]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let last = std::str::from_utf8(&text[start..end]).ok();
    if last.and_then(unframe).is_some() {
        end + 1
    } else {
        start
    }
}

fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

fn io_error(run: &str, what: &str, e: &io::Error) -> Error {
    Error::JournalIo {
        run: run.to_string(),
        message: format!("{what}: {e}"),
    }
}

impl JournalStore for FileStore {
    fn append(&self, run: &str, record: &str) -> Result<()> {
        super::check_run_id(run)?;
        let mut open = self.open.lock();
        if !open.contains_key(run) {
            let file = self.open_for_append(run).map_err(|e| {
                io_error(
                    run,
                    &format!("cannot open {}", self.path(run).display()),
                    &e,
                )
            })?;
            open.insert(run.to_string(), file);
        }
        let file = open.get_mut(run).expect("inserted above");
        let line = frame(record);
        let written = file
            .write_all(line.as_bytes())
            .and_then(|()| match self.sync {
                SyncMode::Durable => file.sync_data(),
                SyncMode::Relaxed => Ok(()),
            });
        if let Err(e) = written {
            // The handle may sit after a partial line: reopen (and cut it)
            // at the next append.
            open.remove(run);
            return Err(io_error(run, "cannot write a record", &e));
        }
        Ok(())
    }

    fn read(&self, run: &str) -> Result<Vec<String>> {
        super::check_run_id(run)?;
        let path = self.path(run);
        if fs::metadata(&path).is_ok_and(|m| !m.is_file()) {
            return Err(io_error(
                run,
                &format!("{} is not a regular file", path.display()),
                &io::Error::from(io::ErrorKind::InvalidInput),
            ));
        }
        let text = match fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(run, "cannot read the journal", &e)),
        };
        let whole = whole_lines(&text);
        let mut records = Vec::new();
        if whole == 0 {
            return Ok(records);
        }
        // `whole` ends with a newline: every piece before it is a line.
        for (i, line) in text[..whole - 1].split(|&b| b == b'\n').enumerate() {
            let json = std::str::from_utf8(line).ok().and_then(unframe);
            let Some(json) = json else {
                return Err(Error::JournalCorrupt {
                    run: run.to_string(),
                    message: format!(
                        "record {} is damaged (its length or checksum does not match)",
                        i + 1
                    ),
                });
            };
            records.push(json.to_string());
        }
        Ok(records)
    }

    fn runs(&self) -> Result<Vec<String>> {
        let entries = fs::read_dir(&self.dir)
            .map_err(|e| io_error("", &format!("cannot list {}", self.dir.display()), &e))?;
        let mut runs: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                name.strip_suffix(".journal").map(str::to_string)
            })
            .collect();
        runs.sort();
        Ok(runs)
    }

    fn lock(&self, run: &str) -> Result<RunLock> {
        super::check_run_id(run)?;
        let path = self.dir.join(format!("{run}.lock"));
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options
            .open(&path)
            .map_err(|e| io_error(run, &format!("cannot open {}", path.display()), &e))?;
        // An OS lock (flock on Unix) dies with its process: a crashed
        // run's lock is free at once, a live holder's never is.
        match file.try_lock() {
            Ok(()) => Ok(RunLock::new(file)),
            Err(fs::TryLockError::WouldBlock) => Err(Error::RunLocked {
                run: run.to_string(),
            }),
            Err(fs::TryLockError::Error(e)) => Err(io_error(run, "cannot lock the run", &e)),
        }
    }
}
