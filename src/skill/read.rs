//! What the `skill` tool reads: a skill's body and the files beside it,
//! confined to the skill's folder and bounded in size.

use std::fmt::Write as _;
use std::fs;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

use serde_json::Value as Json;

use super::{Catalog, Skill, front};
use crate::tool::Parameters;
use crate::{Error, Result, Tool, ToolContext, ToolError};

/// The largest file the tool reads by default.
const DEFAULT_MAX_BYTES: u64 = 256 * 1024;
/// The most files listed under a skill, and how deep the listing goes.
const MAX_LISTED: usize = 200;
const MAX_DEPTH: usize = 4;

/// The model-facing tool that reads a [`Catalog`]'s skills: `name` gives
/// the skill's instructions (its `SKILL.md` body, read at the call, so an
/// edit shows at once) and the list of the files in its folder; `name` and
/// `path` give one of those files. See the [module](super) for what it
/// refuses. Idempotent, reads no private data (skills are instructions the
/// host installed), reaches no network.
#[derive(Debug)]
pub struct SkillTool {
    catalog: Catalog,
    name: String,
    description: String,
    parameters: Parameters,
    max_bytes: u64,
}

impl SkillTool {
    pub(super) fn new(catalog: Catalog, name: &str) -> Result<SkillTool> {
        crate::tool::name::check_name(name).map_err(Error::invalid)?;
        if catalog.is_empty() {
            return Err(Error::invalid(format!(
                "the `{name}` tool needs at least one skill in its catalog"
            )));
        }
        Ok(SkillTool {
            parameters: super::parameters(&catalog),
            catalog,
            name: name.to_string(),
            description: "Read a skill: its instructions, or a file in its folder. The skills \
                          are listed in <available_skills>."
                .into(),
            max_bytes: DEFAULT_MAX_BYTES,
        })
    }

    /// Refuse files larger than `max_bytes` (256 KiB by default; the
    /// `SKILL.md` body too).
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: u64) -> SkillTool {
        self.max_bytes = max_bytes;
        self
    }

    /// The skills it reads.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub(super) fn max_bytes(&self) -> u64 {
        self.max_bytes
    }
}

impl Tool for SkillTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    fn call(&self, args: &Json, cx: &ToolContext) -> std::result::Result<String, ToolError> {
        super::call(self, args, cx)
    }

    fn idempotent(&self) -> bool {
        true
    }
}

/// The text of the regular file `path`, refused over `max` bytes or when
/// not UTF-8.
pub(super) fn bounded_text(path: &Path, max: u64) -> std::result::Result<String, String> {
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

/// The skill's instructions (the body of its `SKILL.md`) and its files.
pub(super) fn instructions(skill: &Skill, max: u64) -> std::result::Result<String, ToolError> {
    let text = bounded_text(&skill.dir.join("SKILL.md"), max)
        .map_err(|e| ToolError::new(format!("SKILL.md of {:?}: {e}", skill.name)))?;
    let body = front::parse(&text)
        .map_err(|e| ToolError::new(format!("SKILL.md of {:?}: {e}", skill.name)))?
        .body;
    let mut out = format!("# Skill: {}\n\n{}", skill.name, body.trim());
    let files = list(&skill.dir);
    if !files.is_empty() {
        out.push_str("\n\nFiles in this skill's folder (read one with `path`):\n");
        for line in files {
            let _ = writeln!(out, "- {line}");
        }
    }
    Ok(out)
}

/// One file of the skill, by its path relative to the skill's folder.
pub(super) fn file(skill: &Skill, path: &str, max: u64) -> std::result::Result<String, ToolError> {
    let shown = crate::util::excerpt(path, 120);
    let target =
        confined(&skill.dir, path).map_err(|e| ToolError::new(format!("`{shown}`: {e}")))?;
    bounded_text(&target, max).map_err(|e| ToolError::new(format!("`{shown}`: {e}")))
}

/// `path` under `dir`, when it stays there: relative, without `..`, and
/// not leading out through a link.
pub(super) fn confined(dir: &Path, path: &str) -> std::result::Result<PathBuf, String> {
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
