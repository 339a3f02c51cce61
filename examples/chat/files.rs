//! The files the chat writes and reads by name (`--events`, `/save`,
//! `/load`): what may stand at the path, checked before it is opened.
//!
//! A FIFO would block the open until another program came, a device never
//! ends, and a file the user wrote by hand is not replaced because a path
//! was mixed up. The same command run twice replaces its own file.

use std::fs;
use std::io::Read as _;
use std::path::Path;

/// The largest history `/load` reads.
pub(crate) const MAX_HISTORY_BYTES: u64 = 256 * 1024 * 1024;

/// How much of an existing events file is read to tell it is one.
pub(crate) const EVENTS_SNIFF_BYTES: u64 = 1024 * 1024;

/// Whether `path` may be written (created, or replaced) as a `what`: a
/// missing file, an empty one, or one that `is_ours` recognises from its
/// first `sniff` bytes. A dangling symbolic link (it would create a file
/// somewhere the user did not name), a folder, a FIFO, a socket or a
/// device is refused, and so is a read-only file and any other non-empty
/// file.
pub(crate) fn check_writable(
    path: &Path,
    what: &str,
    sniff: u64,
    is_ours: impl Fn(&str) -> bool,
) -> Result<(), String> {
    let shown = path.display();
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{shown}: {e}")),
        Ok(_) => {}
    }
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "{shown} is a symbolic link to nothing: name the file itself"
            ));
        }
        Err(e) => return Err(format!("{shown}: {e}")),
    };
    if meta.is_dir() {
        return Err(format!("{shown} is a folder: name a file in it"));
    }
    if !meta.is_file() {
        return Err(format!(
            "{shown} is not a regular file (a FIFO or a device): name a file"
        ));
    }
    // Why refuse: the owner made it read-only to keep it (root could
    // write it all the same).
    if meta.permissions().readonly() {
        return Err(format!("{shown} is read-only: not replaced"));
    }
    if meta.len() == 0 {
        return Ok(());
    }
    let mut head = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(sniff).read_to_end(&mut head))
        .map_err(|e| format!("{shown}: {e}"))?;
    let head = String::from_utf8_lossy(&head);
    if is_ours(&head) {
        Ok(())
    } else {
        Err(format!(
            "{shown} exists and is not {what}: not replaced (remove it first, or name another file)"
        ))
    }
}

/// Whether `head` (the beginning of a file) begins like an events file:
/// its first line one JSON object with a `type`, or, when a crash cut the
/// first line short, the beginning of one.
pub(crate) fn is_events(head: &str) -> bool {
    if !head.contains('\n') && head.starts_with("{\"type\":\"") {
        return true;
    }
    let first = head.lines().next().unwrap_or_default();
    serde_json::from_str::<serde_json::Value>(first)
        .is_ok_and(|v| v.get("type").is_some_and(serde_json::Value::is_string))
}

/// Write `bytes` to `path` whole or not at all: a new file beside it,
/// renamed over `path` once complete, so a crash mid-write never leaves
/// half a file (which the next save would refuse as not its own). The
/// replaced file's mode is kept.
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write as _;
    let shown = path.display();
    let name = path
        .file_name()
        .ok_or_else(|| format!("{shown} names no file"))?
        .to_string_lossy();
    let mode = fs::metadata(path).ok().map(|m| m.permissions());
    let mut n = 0u32;
    let (tmp, mut file) = loop {
        let tmp = path.with_file_name(format!(".{name}.tmp{}.{n}", std::process::id()));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(file) => break (tmp, file),
            // Left by a crashed save under this pid: skipped, not opened.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            Err(e) => return Err(format!("cannot write {shown}: {e}")),
        }
    };
    let written = mode
        .map_or(Ok(()), |m| file.set_permissions(m))
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&tmp, path));
    written.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        format!("cannot write {shown}: {e}")
    })
}

/// The text of the regular file at `path`, at most `max` bytes: a FIFO, a
/// device or a folder is refused before it is opened.
pub(crate) fn read_bounded(path: &Path, max: u64) -> Result<String, String> {
    let shown = path.display();
    let meta = fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "cannot read {shown}: not a regular file (a folder, a FIFO or a device)"
        ));
    }
    if meta.len() > max {
        return Err(format!(
            "cannot read {shown}: {} bytes, over the limit of {max}",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "cannot read {shown}: over the limit of {max} bytes"
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("cannot read {shown}: not UTF-8 text"))
}
