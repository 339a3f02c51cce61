//! Writing the kit's files (datasets, reports): whole or not at all.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Error, Result};

/// What kind of file the kit writes, to tell one it may replace.
pub(super) struct Kind<'a> {
    /// Names the file in errors ("report").
    pub(super) what: &'a str,
    /// The largest file of this kind read.
    pub(super) max: u64,
    /// Whether a file's text is one of this kind.
    pub(super) is_one: &'a dyn Fn(&str) -> bool,
}

/// Write `bytes` to `path` through a new temporary file beside it, renamed
/// over `path` once complete: a reader (or a crash) never sees half a file,
/// and a symbolic link at `path` is replaced, never written through (one to
/// a non-empty file not of `kind` is refused, as that file would be). A
/// missing parent folder is an error (never created), and so is a
/// directory at `path`, a non-empty file that does not read as one of
/// `kind` (the kit never replaces what it did not write), a read-only file
/// (its owner kept it from changes), and `bytes` over `kind.max` (they
/// would not read back). The new file keeps the mode of the one it
/// replaces.
pub(super) fn write_atomic(path: &Path, bytes: &[u8], kind: &Kind<'_>) -> Result<()> {
    let existing = check_replaceable(path, bytes.len() as u64, kind)?;
    let at = |msg: String| Error::InvalidInput(format!("{} {}: {msg}", kind.what, path.display()));
    let name = path
        .file_name()
        .ok_or_else(|| at("has no file name".into()))?
        .to_string_lossy();
    let (tmp, mut file) =
        create_temporary(path, &name).map_err(|(tmp, e)| at(format!("{}: {e}", tmp.display())))?;
    // The replacement keeps the mode of the file it replaces (a report
    // made owner-only stays so), not the umask's default.
    let kept = existing.map_or(Ok(()), |m| file.set_permissions(m.permissions()));
    let written = kept
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    written.map_err(|e| {
        // Only the temporary file this call created is removed.
        let _ = std::fs::remove_file(&tmp);
        at(e.to_string())
    })
}

/// The checks of [`write_atomic`] before it writes `len` bytes of `kind`
/// to `path`: the regular file found there (to take its mode), if any.
pub(super) fn check_replaceable(
    path: &Path,
    len: u64,
    kind: &Kind<'_>,
) -> Result<Option<std::fs::Metadata>> {
    let what = kind.what;
    let at = |msg: String| Error::InvalidInput(format!("{what} {}: {msg}", path.display()));
    // Why refuse: a file over the limit its `load` reads would be written
    // whole, and then refused at the next run (a baseline lost).
    if len > kind.max {
        return Err(at(format!(
            "{len} bytes, over the limit of {} a {what} is read with: not written",
            kind.max
        )));
    }
    // A device, a FIFO or a socket is never replaced by a file (as root,
    // the rename would succeed even in /dev); a link is replaced itself.
    let found = std::fs::symlink_metadata(path);
    match &found {
        Ok(meta) if meta.is_dir() => return Err(at("is a directory".into())),
        Ok(meta) if !meta.is_file() && !meta.file_type().is_symlink() => {
            return Err(at("not a regular file".into()));
        }
        // Why read it first: a report saved over the dataset (or a
        // cassette over a report) by a mixed-up path would lose a file the
        // user wrote by hand. One of this kind, even stale, is the kit's
        // own to replace; anything else is left for the user to remove.
        Ok(meta) if meta.is_file() && meta.len() > 0 => {
            let ours = read_bounded(path, kind.max).is_ok_and(|t| (kind.is_one)(&t));
            if !ours {
                return Err(at(format!(
                    "exists and is not a {what}: not replaced (remove it first)"
                )));
            }
        }
        // A link the user made to a file the kit did not write (a dataset
        // by hand, `/etc/passwd`) is not replaced either: only the link
        // would be lost, but it says where the user keeps that file.
        Ok(meta) if meta.file_type().is_symlink() => {
            let target = std::fs::metadata(path)
                .ok()
                .filter(|t| t.is_file() && t.len() > 0);
            if target.is_some() && !read_bounded(path, kind.max).is_ok_and(|t| (kind.is_one)(&t)) {
                return Err(at(format!(
                    "is a link to a file that is not a {what}: not replaced (remove it first)"
                )));
            }
        }
        _ => {}
    }
    // Why refuse: the rename would replace a file its owner made read-only
    // (a baseline kept from accidents) without asking, as `cp` does not.
    let existing = found.ok().filter(std::fs::Metadata::is_file);
    if existing
        .as_ref()
        .is_some_and(|m| m.permissions().readonly())
    {
        return Err(at("is read-only: not replaced".into()));
    }
    Ok(existing)
}

/// A new temporary file beside `path`, `.<name>.tmp<pid>.<n>`: the pid
/// keeps two processes apart, the counter two saves of one process, and a
/// name that exists already (left by a crashed run whose pid this process
/// has now) is skipped, never opened.
fn create_temporary(
    path: &Path,
    name: &str,
) -> std::result::Result<(PathBuf, File), (PathBuf, std::io::Error)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut tries = 0;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_file_name(format!(".{name}.tmp{}.{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 100 => tries += 1,
            Err(e) => return Err((tmp, e)),
        }
    }
}

/// The text of the regular file at `path`, refused when over `max` bytes,
/// not a regular file (a FIFO would block the read, a device never end) or
/// not UTF-8.
pub(super) fn read_bounded(path: &Path, max: u64) -> Result<String> {
    let at = |msg: String| Error::InvalidInput(format!("{}: {msg}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| at(e.to_string()))?;
    if !meta.is_file() {
        return Err(at("not a regular file".into()));
    }
    if meta.len() > max {
        return Err(at(format!("{} bytes, over the limit of {max}", meta.len())));
    }
    let file = std::fs::File::open(path).map_err(|e| at(e.to_string()))?;
    let mut bytes = Vec::new();
    // The file may have grown since `metadata`: read one byte past the limit.
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| at(e.to_string()))?;
    if bytes.len() as u64 > max {
        return Err(at(format!("over the limit of {max} bytes")));
    }
    String::from_utf8(bytes)
        .map_err(|e| at(format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind() -> Kind<'static> {
        Kind {
            what: "report",
            max: 16,
            is_one: &|t| t.starts_with('{'),
        }
    }

    #[test]
    fn what_would_not_read_back_is_not_written() {
        let dir = std::env::temp_dir().join(format!("pikuri-evals-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        write_atomic(&path, b"{\"ok\": 1}", &kind()).unwrap();
        let e = write_atomic(&path, &[b' '; 17], &kind()).unwrap_err();
        assert!(
            e.to_string().contains("17 bytes, over the limit of 16"),
            "{e}"
        );
        // The old file is untouched, and no temporary file is left.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"ok\": 1}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
