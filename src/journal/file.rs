//! The built-in store: one append-only file per run in a directory,
//! `<run>.journal`, and its lock file `<run>.lock`.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::frame::{frame, is_torn, unframe};
use super::{JournalStore, RunLock, SyncMode};
use crate::{Error, Result};

/// The built-in [`JournalStore`]: a directory holding one append-only file
/// per run, `<run>.journal`, one framed record a line (its length and
/// CRC-32, then its JSON), readable and writable by its owner only (mode
/// 0600 on Unix: it holds prompts and tool results), and a lock file
/// `<run>.lock` beside it.
///
/// A clone shares the open files. The directory is created when missing,
/// its parent never.
///
/// # What stands where a journal should be
///
/// `<run>.journal` and `<run>.lock` are opened only as regular files (or
/// created when missing). A symbolic link (dangling or not), a directory,
/// a FIFO, a socket or a device in their place is [`Error::JournalIo`]
/// naming the path, and nothing is read from it, written to it or
/// created through it: the store never follows a link out of its
/// directory. (On Linux the open itself refuses a link, `O_NOFOLLOW`; on
/// other systems the file is checked before and after it is opened.)
///
/// An existing journal is made owner-only (mode 0600 on Unix) when the
/// store first appends to it, whatever mode it had.
///
/// # Damage
///
/// Only the bytes after the file's last newline can be a torn write (a
/// crash mid-write), and only when they begin like a record (the hex
/// digits of a length a record can have and of its checksum, then no more
/// JSON than the length says): [`read`](JournalStore::read) leaves them
/// out and the next append cuts them off. A huge length there
/// (`ffffffffffffffff`) is damage. Anything else is [`Error::JournalCorrupt`] naming the
/// path, nothing of the run is returned, and the file is never truncated
/// or written to:
///
/// - a whole line (one that ends with a newline) whose length or checksum
///   does not match, wherever it is, the last line included;
/// - bytes after the last newline that no record begins with (zeros, text);
/// - a file that is not a journal at all (zeros, random bytes, another
///   program's file), with or without newlines.
///
/// To start over under that run id, move the file aside (rename or delete
/// `<run>.journal`), or use another run id: the store will not. An empty
/// file, or one holding only a torn first record, holds no record: it
/// reads as no journal and a new run writes it.
///
/// [`runs`](JournalStore::runs) lists the files named `<run>.journal`
/// whose name is a run id; a damaged one is listed by
/// [`unfinished`](JournalStore::unfinished) (its resume says what is
/// wrong).
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
    /// when missing; its parent must exist), syncing every record
    /// ([`SyncMode::Durable`]).
    ///
    /// # Errors
    ///
    /// [`Error::JournalIo`] naming `dir` when it cannot be created: its
    /// parent folder is missing (never created), or is not a folder, or
    /// cannot be written.
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

    /// The path of `run`'s lock file.
    fn lock_path(&self, run: &str) -> PathBuf {
        self.dir.join(format!("{run}.lock"))
    }

    /// The run's file, opened for appending: a torn last line (a crash
    /// mid-write) is cut off first, so the next record starts a line. A
    /// file that is not a journal, or a damaged one, is refused untouched;
    /// an existing file is made owner-only.
    fn open_for_append(&self, run: &str) -> Result<File> {
        let path = self.path(run);
        let cannot = |e: &io::Error| io_error(run, &format!("cannot open {}", path.display()), e);
        let mut options = OpenOptions::new();
        options.read(true).append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let created = !path.exists();
        let mut file = open_regular(&path, &mut options).map_err(|e| cannot(&e))?;
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(|e| cannot(&e))?;
        let (_, keep) = scan(run, &path, &text)?;
        if keep < text.len() {
            file.set_len(keep as u64).map_err(|e| cannot(&e))?;
            file.seek(SeekFrom::End(0)).map_err(|e| cannot(&e))?;
        }
        // The mode given at creation does not reach a file that already
        // exists: it holds prompts and tool results, so its owner only.
        #[cfg(unix)]
        if !created {
            use std::os::unix::fs::PermissionsExt;
            let mode = file
                .metadata()
                .map_err(|e| cannot(&e))?
                .permissions()
                .mode();
            if mode & 0o777 != 0o600 {
                file.set_permissions(fs::Permissions::from_mode(0o600))
                    .map_err(|e| cannot(&e))?;
            }
        }
        // A new file's name must survive a crash too: sync the directory.
        if created && self.sync == SyncMode::Durable {
            File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| cannot(&e))?;
        }
        Ok(file)
    }
}

/// Extra `open` flags on Linux: `O_NOFOLLOW` (a symbolic link as the last
/// component fails instead of being followed, so a link swapped in after
/// the check below is refused too) and `O_NONBLOCK` (a FIFO swapped in
/// does not block the open; a regular file ignores it). The values differ
/// by architecture and the crate has no libc: elsewhere the flags are
/// left out and the checks before and after the open stand alone.
#[cfg(unix)]
const OPEN_FLAGS: i32 = {
    // `O_NONBLOCK` is 0o4000 on all of them; `O_NOFOLLOW` has two values.
    let linux = cfg!(any(target_os = "linux", target_os = "android"));
    if !linux {
        0
    } else if cfg!(any(
        target_arch = "x86",
        target_arch = "x86_64",
        target_arch = "riscv32",
        target_arch = "riscv64",
        target_arch = "s390x",
        target_arch = "loongarch64"
    )) {
        0o400_000 | 0o4000
    } else if cfg!(any(
        target_arch = "arm",
        target_arch = "aarch64",
        target_arch = "powerpc",
        target_arch = "powerpc64"
    )) {
        0o100_000 | 0o4000
    } else {
        0
    }
};

/// Open `path` with `options` only if it is a regular file (or missing,
/// when `options` create it): never through a symbolic link, dangling or
/// not, and never a directory, FIFO, socket or device. Anything else is
/// an `InvalidInput` error saying what is there.
fn open_regular(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    match fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => return Err(not_regular(m.file_type())),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(OPEN_FLAGS);
    }
    let file = match options.open(path) {
        Ok(file) => file,
        // Swapped for something else since the check: say what it is now.
        Err(e) => {
            return Err(match fs::symlink_metadata(path) {
                Ok(m) if !m.file_type().is_file() => not_regular(m.file_type()),
                _ => e,
            });
        }
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(meta.file_type()));
    }
    Ok(file)
}

fn not_regular(kind: fs::FileType) -> io::Error {
    let what = if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else {
        special(kind)
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {what}, and a journal and its lock must be regular files"),
    )
}

#[cfg(unix)]
fn special(kind: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

#[cfg(not(unix))]
fn special(_: fs::FileType) -> &'static str {
    "not a regular file"
}

/// The records of a journal file's bytes, and the length up to the end
/// of its last whole record. Only the bytes after the last newline may be
/// torn, and only when they begin like a record ([`is_torn`]); any other
/// damage, or a file that is not a journal at all, is
/// [`Error::JournalCorrupt`] naming `path`.
fn scan<'t>(run: &str, path: &Path, text: &'t [u8]) -> Result<(Vec<&'t str>, usize)> {
    let corrupt = |what: String| Error::JournalCorrupt {
        run: run.to_string(),
        message: format!(
            "{}: {what}; nothing was read or changed (move the file aside, or use another run id)",
            path.display()
        ),
    };
    let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut records = Vec::new();
    if whole > 0 {
        // `whole` ends with a newline: every piece before it is a line.
        for (i, line) in text[..whole - 1].split(|&b| b == b'\n').enumerate() {
            let Some(json) = std::str::from_utf8(line).ok().and_then(unframe) else {
                return Err(corrupt(if i == 0 && !is_torn(line) {
                    "not a journal (its first line is not a framed record)".into()
                } else {
                    format!(
                        "record {} is damaged (its length or checksum does not match)",
                        i + 1
                    )
                }));
            };
            records.push(json);
        }
    }
    let tail = &text[whole..];
    if !tail.is_empty() && !is_torn(tail) {
        return Err(corrupt(if whole == 0 {
            "not a journal (it does not begin with a framed record)".into()
        } else {
            format!(
                "the bytes after record {} are damaged (not the beginning of a record a crash cut short)",
                records.len()
            )
        }));
    }
    Ok((records, whole))
}

/// Create `dir` when missing, but not its parent: a folder the caller did
/// not name (a typo higher up the path) is never made.
fn create_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    match builder.create(dir) {
        // Made meanwhile by another store.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "its parent folder does not exist (it is not created: make it first)",
        )),
        other => other,
    }
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
            let file = self.open_for_append(run)?;
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
        let cannot = |e: &io::Error| io_error(run, &format!("cannot read {}", path.display()), e);
        let mut file = match open_regular(&path, OpenOptions::new().read(true)) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(cannot(&e)),
        };
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(|e| cannot(&e))?;
        let (records, _) = scan(run, &path, &text)?;
        Ok(records.into_iter().map(str::to_string).collect())
    }

    fn runs(&self) -> Result<Vec<String>> {
        let entries = fs::read_dir(&self.dir)
            .map_err(|e| io_error("", &format!("cannot list {}", self.dir.display()), &e))?;
        let mut runs: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let run = name.strip_suffix(".journal")?;
                // A name no run id makes ("my notes.journal") is not a
                // run: it could not be read or resumed.
                super::check_run_id(run).is_ok().then(|| run.to_string())
            })
            .collect();
        runs.sort();
        Ok(runs)
    }

    fn lock(&self, run: &str) -> Result<RunLock> {
        super::check_run_id(run)?;
        let path = self.lock_path(run);
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = open_regular(&path, &mut options)
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
