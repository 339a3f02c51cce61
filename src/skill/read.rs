//! What the `skill` tool reads: a skill's body and the files beside it,
//! confined to the skill's folder and bounded in size.

use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

use super::front;
use crate::ToolError;

/// The most files listed under a skill, and how deep the listing goes.
const MAX_LISTED: usize = 200;
const MAX_DEPTH: usize = 4;

/// The text of the regular file `path`, refused over `max` bytes or when
/// not UTF-8.
pub(super) fn bounded_text(path: &Path, max: u64) -> Result<String, String> {
    let meta = fs::metadata(path).map_err(|e| e.to_string())?;
    // Why check before opening: a FIFO or a device would block or never
    // end.
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > max {
        return Err(format!("{} bytes, more than the {max} read", meta.len()));
    }
    let mut bytes = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    // The file may have grown since `metadata`.
    if bytes.len() as u64 > max {
        return Err(format!("more than the {max} bytes read"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".into())
}

/// The text of the `SKILL.md` in `dir`, under the rules of any other file
/// of the skill: why confined, a `SKILL.md` that is (or, after the catalog
/// was built, becomes) a link out of the folder would hand the model a
/// file the host never installed as a skill.
pub(super) fn skill_md(dir: &Path, max: u64) -> Result<String, String> {
    bounded_text(&confined(dir, "SKILL.md")?, max)
}

/// The instructions of skill `name` in folder `dir` (the body of its
/// `SKILL.md`) and its files.
pub(super) fn instructions(name: &str, dir: &Path, max: u64) -> Result<String, ToolError> {
    let text =
        skill_md(dir, max).map_err(|e| ToolError::new(format!("SKILL.md of {name:?}: {e}")))?;
    let body = front::parse(&text)
        .map_err(|e| ToolError::new(format!("SKILL.md of {name:?}: {e}")))?
        .body;
    // Why normalise: the front matter reader takes CRLF files (written on
    // Windows); their body's `\r`s would reach the model and any terminal
    // that shows the result.
    let body = body.trim().replace("\r\n", "\n");
    let mut out = format!("# Skill: {name}\n\n{body}");
    let files = list(dir);
    if !files.is_empty() {
        out.push_str("\n\nFiles in this skill's folder (read one with `path`):\n");
        for line in files {
            let _ = writeln!(out, "- {line}");
        }
    }
    Ok(out)
}

/// One file of the skill in `dir`, by its path relative to that folder.
pub(super) fn file(dir: &Path, path: &str, max: u64) -> Result<String, ToolError> {
    let shown = crate::util::excerpt(path, 120);
    let target = confined(dir, path).map_err(|e| ToolError::new(format!("`{shown}`: {e}")))?;
    bounded_text(&target, max).map_err(|e| ToolError::new(format!("`{shown}`: {e}")))
}

/// `path` under `dir`, when it stays there: relative, without `..`, and
/// not leading out through a link.
pub(super) fn confined(dir: &Path, path: &str) -> Result<PathBuf, String> {
    for c in Path::new(path).components() {
        match c {
            Component::Prefix(_) | Component::RootDir => {
                return Err("an absolute path; give a path relative to the skill's folder".into());
            }
            Component::ParentDir => {
                return Err("`..` is not allowed; only files inside the skill's folder".into());
            }
            Component::CurDir | Component::Normal(_) => {}
        }
    }
    let root = dir
        .canonicalize()
        .map_err(|e| format!("the skill's folder: {e}"))?;
    let target = root.join(path).canonicalize().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file in the skill's folder".to_string(),
        _ => e.to_string(),
    })?;
    if !target.starts_with(&root) {
        return Err("leads out of the skill's folder through a symbolic link".into());
    }
    Ok(target)
}

/// The regular files under `dir` (not `SKILL.md` itself), relative, with
/// their sizes, in order; links are not followed, the listing is bounded.
fn list(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut more = 0usize;
    walk(dir, dir, 0, &mut out, &mut more);
    out.sort();
    if more > 0 {
        out.push(format!("... and {more} more"));
    }
    out
}

fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<String>, more: &mut usize) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(std::result::Result::ok).collect();
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() && depth + 1 < MAX_DEPTH {
            walk(root, &path, depth + 1, out, more);
        } else if kind.is_file() {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            if rel == Path::new("SKILL.md") {
                continue;
            }
            if out.len() >= MAX_LISTED {
                *more += 1;
                continue;
            }
            let size = entry.metadata().map_or(0, |m| m.len());
            out.push(format!("{} ({size} bytes)", rel.display()));
        }
    }
}
