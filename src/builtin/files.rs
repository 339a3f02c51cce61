//! The read-only file tools, confined to a root.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::tool::Parameters;
use crate::util::excerpt;
use crate::{Tool, ToolContext, ToolError};

// ---------------------------------------------------------------------------
// file tools

/// Default cap of [`ReadFile`]: 256 KiB.
const DEFAULT_MAX_BYTES: usize = 256 * 1024;
/// Default cap of [`ListDir`].
const DEFAULT_MAX_ENTRIES: usize = 500;
/// How many characters of a path argument are quoted in messages.
const PATH_EXCERPT: usize = 120;

/// The `read_file` tool, confined to `root`; see [`ReadFile`].
///
/// # Examples
///
/// ```
/// use pikuri::builtin::read_file;
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let tool = read_file(std::env::temp_dir());
/// let cx = ToolContext::detached();
/// let err = tool.call(&json!({"path": "../etc/passwd"}), &cx).unwrap_err();
/// assert!(err.message().contains("`..`"));
/// let err = tool.call(&json!({"path": "/etc/passwd"}), &cx).unwrap_err();
/// assert!(err.message().contains("absolute"));
/// ```
pub fn read_file(root: impl Into<PathBuf>) -> ReadFile {
    ReadFile {
        root: root.into(),
        max_bytes: DEFAULT_MAX_BYTES,
        description: ReadFile::describe(DEFAULT_MAX_BYTES),
        parameters: Parameters::builder()
            .required_string(
                "path",
                "The file's path relative to the workspace root, e.g. `src/main.rs`.",
            )
            .build(),
    }
}

/// The `list_dir` tool, confined to `root`; see [`ListDir`].
///
/// # Examples
///
/// ```
/// use pikuri::builtin::list_dir;
/// use pikuri::{Tool, ToolContext};
/// let tool = list_dir(std::env::temp_dir());
/// assert!(tool.parameters().validate(&serde_json::json!({})).is_ok()); // `path` is optional
/// ```
pub fn list_dir(root: impl Into<PathBuf>) -> ListDir {
    ListDir {
        root: root.into(),
        max_entries: DEFAULT_MAX_ENTRIES,
        parameters: Parameters::builder()
            .optional_string(
                "path",
                "The directory relative to the workspace root; the root itself if left out.",
            )
            .build(),
    }
}

/// Reads a text file under a root directory (the tool `read_file`).
///
/// Argument `path`, relative to the root and confined to it as the [module
/// docs](crate::builtin#confinement-of-the-file-tools) describe. At most
/// [`max_bytes`](ReadFile::max_bytes) bytes are read (256 KiB by default);
/// a longer file is cut and the output ends with `[truncated at N bytes ...]`.
/// Bytes that are not UTF-8 are replaced by U+FFFD, with a note. A missing
/// file, a directory or a special file is a [`ToolError`].
///
/// # Examples
///
/// ```
/// use pikuri::builtin::read_file;
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let root = std::env::temp_dir().join(format!("pikuri-doc-read-{}", std::process::id()));
/// std::fs::create_dir_all(&root).unwrap();
/// std::fs::write(root.join("notes.txt"), "hello").unwrap();
///
/// let tool = read_file(&root).max_bytes(4);
/// let out = tool.call(&json!({"path": "notes.txt"}), &ToolContext::detached())?;
/// assert_eq!(out, "hell\n\n[truncated at 4 bytes; the file has 5 bytes]");
/// # std::fs::remove_dir_all(&root).unwrap();
/// # Ok::<(), pikuri::ToolError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ReadFile {
    root: PathBuf,
    max_bytes: usize,
    description: String,
    parameters: Parameters,
}

impl ReadFile {
    /// Read at most `max_bytes` bytes of a file (default 256 KiB).
    #[must_use]
    pub fn max_bytes(mut self, max_bytes: usize) -> ReadFile {
        self.max_bytes = max_bytes;
        self.description = ReadFile::describe(max_bytes);
        self
    }

    fn describe(max_bytes: usize) -> String {
        format!(
            "Reads a text file under the workspace root and returns its contents. `path` \
             is relative to the root; absolute paths and `..` are refused. Only the first \
             {max_bytes} bytes of a larger file are returned."
        )
    }
}

impl Tool for ReadFile {
    fn reads_private_data(&self) -> bool {
        true
    }

    /// A read: running it again changes nothing.
    fn idempotent(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "read_file"
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    fn call(&self, args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
        let path = args["path"].as_str().unwrap_or_default();
        if path.trim().is_empty() {
            return Err(ToolError::new(
                "`path` is empty; give a file path relative to the root",
            ));
        }
        let shown = excerpt(path, PATH_EXCERPT);
        let target = resolve(&self.root, path)?;
        let metadata = fs::metadata(&target).map_err(|e| io_error(&shown, &e))?;
        if metadata.is_dir() {
            return Err(ToolError::new(format!(
                "`{shown}` is a directory, not a file (list_dir shows what it contains)"
            )));
        }
        if !metadata.is_file() {
            return Err(ToolError::new(format!("`{shown}` is not a regular file")));
        }
        let mut bytes = Vec::new();
        let limit = u64::try_from(self.max_bytes).unwrap_or(u64::MAX);
        fs::File::open(&target)
            .and_then(|file| file.take(limit.saturating_add(1)).read_to_end(&mut bytes))
            .map_err(|e| io_error(&shown, &e))?;
        let truncated = bytes.len() > self.max_bytes;
        if truncated {
            bytes.truncate(self.max_bytes);
            drop_partial_char(&mut bytes);
        }
        if bytes.is_empty() && !truncated {
            return Ok("[the file is empty]".to_string());
        }
        let mut out = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let mut text = String::from_utf8_lossy(e.as_bytes()).into_owned();
                text.push_str(
                    "\n\n[note: the file is not valid UTF-8; invalid bytes are shown as U+FFFD]",
                );
                text
            }
        };
        if truncated {
            let _ = write!(
                out,
                "{}[truncated at {} bytes; the file has {} bytes]",
                if out.is_empty() { "" } else { "\n\n" },
                self.max_bytes,
                metadata.len()
            );
        }
        Ok(out)
    }
}

/// Lists a directory under a root directory (the tool `list_dir`).
///
/// Argument `path`, optional (the root itself when left out), relative to the
/// root and confined to it as the [module
/// docs](crate::builtin#confinement-of-the-file-tools) describe. Entries come one per
/// line, sorted by name, directories (and links to directories) with a
/// trailing `/`. At most [`max_entries`](ListDir::max_entries) are listed
/// (500 by default), then a note says how many were left out.
///
/// # Examples
///
/// ```
/// use pikuri::builtin::list_dir;
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let root = std::env::temp_dir().join(format!("pikuri-doc-list-{}", std::process::id()));
/// std::fs::create_dir_all(root.join("src")).unwrap();
/// std::fs::write(root.join("README.md"), "").unwrap();
///
/// let out = list_dir(&root).call(&json!({}), &ToolContext::detached())?;
/// assert_eq!(out, "README.md\nsrc/");
/// # std::fs::remove_dir_all(&root).unwrap();
/// # Ok::<(), pikuri::ToolError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ListDir {
    root: PathBuf,
    max_entries: usize,
    parameters: Parameters,
}

impl ListDir {
    /// List at most `max_entries` entries of a directory (default 500).
    #[must_use]
    pub fn max_entries(mut self, max_entries: usize) -> ListDir {
        self.max_entries = max_entries;
        self
    }
}

impl Tool for ListDir {
    fn reads_private_data(&self) -> bool {
        true
    }

    /// A read: running it again changes nothing.
    fn idempotent(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "list_dir"
    }

    fn description(&self) -> &'static str {
        "Lists the entries of a directory under the workspace root, one per line, \
         directories with a trailing `/`. `path` is relative to the root (default: the \
         root itself); absolute paths and `..` are refused."
    }

    fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    fn call(&self, args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
        let path = args
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
            .unwrap_or(".");
        let shown = excerpt(path, PATH_EXCERPT);
        let target = resolve(&self.root, path)?;
        if !target.is_dir() {
            return Err(ToolError::new(format!(
                "`{shown}` is not a directory (read_file reads files)"
            )));
        }
        let mut names = Vec::new();
        for entry in fs::read_dir(&target).map_err(|e| io_error(&shown, &e))? {
            let entry = entry.map_err(|e| io_error(&shown, &e))?;
            let mut name = printable(&entry.file_name().to_string_lossy());
            let is_dir = entry
                .file_type()
                .is_ok_and(|t| t.is_dir() || (t.is_symlink() && entry.path().is_dir()));
            if is_dir {
                name.push('/');
            }
            names.push(name);
        }
        if names.is_empty() {
            return Ok("[the directory is empty]".to_string());
        }
        names.sort_unstable();
        let total = names.len();
        let mut out = names
            .iter()
            .take(self.max_entries)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n");
        if total > self.max_entries {
            let _ = write!(
                out,
                "\n[... {} more entries not shown; {total} in all]",
                total - self.max_entries
            );
        }
        Ok(out)
    }
}

/// Resolve a model-supplied relative path under `root`, following symbolic
/// links, and refuse anything outside it. See the module docs.
fn resolve(root: &Path, path: &str) -> Result<PathBuf, ToolError> {
    let shown = excerpt(path, PATH_EXCERPT);
    for component in Path::new(path).components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {
                return Err(ToolError::new(format!(
                    "`{shown}` is an absolute path; give a path relative to the root \
                     directory, e.g. `src/main.rs`"
                )));
            }
            Component::ParentDir => {
                return Err(ToolError::new(format!(
                    "`{shown}` contains `..`; only paths inside the root directory are \
                     allowed, written without `..`"
                )));
            }
            Component::CurDir | Component::Normal(_) => {}
        }
    }
    let root = root
        .canonicalize()
        .map_err(|e| ToolError::new(format!("the tool's root directory is not accessible: {e}")))?;
    let target = root
        .join(path)
        .canonicalize()
        .map_err(|e| io_error(&shown, &e))?;
    if !target.starts_with(&root) {
        return Err(ToolError::new(format!(
            "`{shown}` leads outside the root directory through a symbolic link; \
             only files under the root are accessible"
        )));
    }
    Ok(target)
}

fn io_error(shown: &str, error: &io::Error) -> ToolError {
    ToolError::new(match error.kind() {
        io::ErrorKind::NotFound => format!("`{shown}` does not exist"),
        io::ErrorKind::PermissionDenied => format!("permission denied for `{shown}`"),
        _ => format!("cannot read `{shown}`: {error}"),
    })
}

/// After a cut at an arbitrary byte, drop an incomplete UTF-8 sequence at the
/// end, so the cut does not show up as a U+FFFD.
fn drop_partial_char(bytes: &mut Vec<u8>) {
    let tail = bytes.len().saturating_sub(3);
    for start in (tail..bytes.len()).rev() {
        if bytes[start] & 0xC0 != 0x80 {
            // `start` begins the last character (or is ASCII).
            if let Err(e) = std::str::from_utf8(&bytes[start..])
                && e.error_len().is_none()
            {
                bytes.truncate(start);
            }
            return;
        }
    }
}

/// A file name with control characters escaped, so that each entry stays on
/// one line.
fn printable(name: &str) -> String {
    if !name.chars().any(char::is_control) {
        return name.to_string();
    }
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
