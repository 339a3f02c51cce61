//! Built-in tools: a calculator, the current time, and read-only access to
//! one directory tree.
//!
//! Each function returns a ready tool; [`all`] returns all four for one root
//! directory.
//!
//! # Examples
//!
//! ```
//! use pikuri::builtin;
//! use pikuri::{Tool, ToolContext};
//! use serde_json::json;
//!
//! let tools = builtin::all(std::env::temp_dir());
//! let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
//! assert_eq!(names, ["calculator", "current_time", "read_file", "list_dir"]);
//!
//! let calc = builtin::calculator();
//! let out = calc.call(&json!({"expression": "2 + 3 * 4"}), &ToolContext::detached())?;
//! assert_eq!(out, "14");
//! # Ok::<(), pikuri::ToolError>(())
//! ```
//!
//! # Confinement of the file tools
//!
//! [`read_file`] and [`list_dir`] see only the tree under the `root` they
//! were built with. A `path` argument:
//!
//! - is relative to `root`; an absolute path (`/etc/passwd`, or on Windows
//!   `C:\x` and `\x`) is refused;
//! - may not contain a `..` component at all, even one that would stay inside
//!   (`a/../b`): the model can always send the plain path;
//! - is resolved with every symbolic link followed (the root too), and the
//!   result must lie under the resolved root. A link to somewhere else inside
//!   the tree works; a link that leads out of it is refused.
//!
//! Messages name the path as the model wrote it and never show the host's
//! absolute root path.
//!
//! This guards against a model (or a prompt injected into what it read)
//! wandering into `~/.ssh`; it is not a sandbox against a local process
//! that can write inside the root while a call runs: between the check and
//! the open, such a process could swap a directory for a link. Run
//! untrusted work under the operating system's own isolation.
//!
//! Reads are capped ([`ReadFile::max_bytes`], [`ListDir::max_entries`]) so one
//! call cannot flood the context window; the output says when it was cut.

use std::path::PathBuf;
use std::sync::Arc;

use crate::Tool;

mod calculator;
mod clock;
mod files;

pub use calculator::calculator;
pub use clock::current_time;
pub use files::{ListDir, ReadFile, list_dir, read_file};

/// All four built-in tools, the file tools confined to `root`.
///
/// In order: [`calculator`], [`current_time`], [`read_file`], [`list_dir`].
///
/// # Examples
///
/// ```
/// let tools = pikuri::builtin::all(".");
/// assert_eq!(tools.len(), 4);
/// ```
pub fn all(root: impl Into<PathBuf>) -> Vec<Arc<dyn Tool>> {
    let root = root.into();
    vec![
        Arc::new(calculator()),
        Arc::new(current_time()),
        Arc::new(read_file(root.clone())),
        Arc::new(list_dir(root)),
    ]
}

#[cfg(test)]
mod tests;
