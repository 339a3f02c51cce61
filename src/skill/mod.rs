//! Agent Skills: folders of instructions the model reads when a task needs
//! them (pikuri-skills, on the open Agent Skills format).
//!
//! A skill is a folder with a `SKILL.md`: a front matter with the skill's
//! `name` and `description` (and optionally `license`, `compatibility`,
//! `metadata` and `allowed-tools`), then a Markdown body; beside it, any
//! files the body refers to (`references/`, `assets/`, `scripts/`, ...).
//! Only the names and descriptions are in every request, as an
//! `<available_skills>` block of the system prompt (at most 32 KiB: see
//! [`Catalog::snippet`]); the model reads a
//! skill's body, and the files beside it, with the `skill` tool when a task
//! matches (progressive disclosure).
//!
//! - [`Catalog`] discovers skills under folders the host names
//!   (pikuri discovers `.pikuri/skills`, `.claude/skills`, ...; here the host
//!   passes the folders), keeps their front matter, and lists what it
//!   refused and why ([`Catalog::rejected`]).
//! - [`Skills`] is the [`Extension`] that adds
//!   the block and the tool to an agent.
//! - A sub-agent or a persona gets a subset: [`Catalog::subset`], its own
//!   tool ([`Catalog::tool`], under another name) in the sub-agent pool and
//!   its block ([`Catalog::snippet`]) in the persona's prompt.
//!
//! What the tool reads stays inside the skill's folder: no absolute path,
//! no `..`, no symbolic link that leads out, no file that is not a regular
//! file, nothing larger than [`SkillTool::with_max_bytes`] (256 KiB by
//! default), text only. The extension never runs a skill's scripts: a host
//! that wants that gives the model a tool of its own to do it.
//!
//! # Examples
//!
//! ```
//! use pikuri::skill::{Catalog, Skills};
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::{Agent, Role};
//!
//! let root = std::env::temp_dir().join(format!("pikuri-skills-doc-{}", std::process::id()));
//! std::fs::create_dir_all(root.join("release-notes"))?;
//! std::fs::write(
//!     root.join("release-notes/SKILL.md"),
//!     "---\nname: release-notes\ndescription: Writes release notes from a changelog.\n---\n\
//!      Group the changes by kind; one line each.\n",
//! )?;
//! let catalog = Catalog::discover(&[&root])?;
//! assert_eq!(catalog.names(), ["release-notes"]);
//!
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("skill", serde_json::json!({"name": "release-notes"})));
//! server.push(Reply::text("Done."));
//! let mut agent = Agent::builder(server.transport()).add_extension(Skills::new(catalog)).build()?;
//! assert!(agent.system_prompt().contains("<available_skills>"));
//! assert!(agent.system_prompt().contains("release-notes: Writes release notes"));
//! agent.run_loop("Write the release notes.")?;
//! // The body reached the model only when it asked.
//! let read = agent.messages().iter().find(|m| m.role == Role::Tool).unwrap();
//! assert!(read.content.contains("Group the changes by kind"));
//! std::fs::remove_dir_all(&root)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod front;
mod read;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;

use crate::extension::{Extension, ExtensionContext};
use crate::tool::Parameters;
use crate::{Error, Result, Tool, ToolContext, ToolError};

/// The most skills a catalog holds; more are listed in
/// [`Catalog::rejected`] rather than read.
pub const MAX_SKILLS: usize = 1000;
/// The largest `<available_skills>` block, in bytes (about 8,000 tokens):
/// skills past it are counted, not listed (see [`Catalog::snippet`]).
const MAX_BLOCK_BYTES: usize = 32 * 1024;
/// The largest `SKILL.md` read (front matter and body).
const MAX_SKILL_FILE: u64 = 1024 * 1024;
/// The largest file the tool reads by default.
const DEFAULT_MAX_BYTES: u64 = 256 * 1024;

/// One skill: its front matter and its folder. The body is read when the
/// model asks for it, not here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    name: String,
    description: String,
    license: Option<String>,
    compatibility: Option<String>,
    metadata: BTreeMap<String, String>,
    allowed_tools: Vec<String>,
    dir: PathBuf,
}

impl Skill {
    /// Read the skill in folder `dir` (its `SKILL.md` front matter).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the file (and the line, for the front
    /// matter): no `SKILL.md`, one that is a link out of `dir`, a file over
    /// 1 MiB or not UTF-8, a front
    /// matter the reader refuses, or a field the format forbids (a `name`
    /// that is not 1 to 64 lowercase letters, digits and single hyphens, or
    /// is not the folder's name; no `description`, or one over 1024
    /// characters; a `compatibility` over 500; a control character other
    /// than a tab or a line break in either).
    pub fn load(dir: impl AsRef<Path>) -> Result<Skill> {
        let dir = dir.as_ref();
        let file = dir.join("SKILL.md");
        let text = read::skill_md(dir, MAX_SKILL_FILE)
            .map_err(|e| Error::invalid(format!("{}: {e}", file.display())))?;
        let parsed =
            front::parse(&text).map_err(|e| Error::invalid(format!("{}: {e}", file.display())))?;
        Skill::from_fields(dir, parsed.fields)
            .map_err(|e| Error::invalid(format!("{}: {e}", file.display())))
    }

    fn from_fields(
        dir: &Path,
        fields: Vec<(String, front::Value)>,
    ) -> std::result::Result<Skill, String> {
        let mut skill = Skill {
            name: String::new(),
            description: String::new(),
            license: None,
            compatibility: None,
            metadata: BTreeMap::new(),
            allowed_tools: Vec::new(),
            dir: dir.to_path_buf(),
        };
        for (key, value) in fields {
            match (key.as_str(), value) {
                ("name", front::Value::Str(v)) => skill.name = v,
                ("description", front::Value::Str(v)) => skill.description = v,
                ("license", front::Value::Str(v)) => skill.license = Some(v),
                ("compatibility", front::Value::Str(v)) => skill.compatibility = Some(v),
                ("metadata", front::Value::Map(m)) => skill.metadata = m.into_iter().collect(),
                // The format says a space-separated string; a list is
                // what many skills write, and means the same.
                ("allowed-tools", front::Value::Str(v)) => {
                    skill.allowed_tools = v.split_whitespace().map(str::to_string).collect();
                }
                ("allowed-tools", front::Value::List(v)) => skill.allowed_tools = v,
                (
                    key @ ("name" | "description" | "license" | "compatibility" | "metadata"
                    | "allowed-tools"),
                    _,
                ) => return Err(format!("`{key}` has the wrong kind of value")),
                // Fields added to the format later, and hosts' own: not
                // this reader's to refuse.
                _ => {}
            }
        }
        check_name(&skill.name, dir)?;
        if skill.description.trim().is_empty() {
            return Err("the front matter has no `description`".into());
        }
        // Why refuse: the description goes into every request's system
        // prompt, and from there to any terminal that shows it; a NUL or an
        // escape sequence is never part of what a skill means.
        for (key, text) in [
            ("description", Some(&skill.description)),
            ("compatibility", skill.compatibility.as_ref()),
        ] {
            if let Some(c) = text
                .into_iter()
                .flat_map(|t| t.chars())
                .find(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
            {
                return Err(format!(
                    "`{key}` has a control character (U+{:04X})",
                    u32::from(c)
                ));
            }
        }
        if skill.description.chars().count() > 1024 {
            return Err("`description` is longer than 1024 characters".into());
        }
        if skill
            .compatibility
            .as_ref()
            .is_some_and(|c| c.chars().count() > 500)
        {
            return Err("`compatibility` is longer than 500 characters".into());
        }
        Ok(skill)
    }

    /// The skill's name (its folder's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the skill does and when to use it: the line the model sees.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// `license`, when given.
    pub fn license(&self) -> Option<&str> {
        self.license.as_deref()
    }

    /// `compatibility`, when given.
    pub fn compatibility(&self) -> Option<&str> {
        self.compatibility.as_deref()
    }

    /// `metadata`, sorted by key.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// `allowed-tools`: the tools the skill says it uses. Informative only:
    /// the extension grants nothing.
    pub fn allowed_tools(&self) -> &[String] {
        &self.allowed_tools
    }

    /// The skill's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Why a folder past [`MAX_SKILLS`] is left out.
fn over_cap() -> String {
    format!("more than {MAX_SKILLS} skills: the rest are not read")
}

/// `name` as the format requires it, and equal to the folder's name.
fn check_name(name: &str, dir: &Path) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("the front matter has no `name`".into());
    }
    let ok = name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if !ok {
        return Err(format!(
            "`name` {:?} is not 1 to 64 lowercase letters, digits and single hyphens",
            crate::util::excerpt(name, 80)
        ));
    }
    let folder = dir.file_name().and_then(|f| f.to_str()).unwrap_or("");
    if folder != name {
        return Err(format!(
            "`name` {name:?} is not the folder's name {folder:?}"
        ));
    }
    Ok(())
}

/// A set of skills, by name, in name order.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    skills: BTreeMap<String, Skill>,
    rejected: Vec<(PathBuf, String)>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// The skills under `roots`: each root that holds a `SKILL.md` is one
    /// skill, otherwise each of its subfolders that holds one is (in name
    /// order; the folders are not searched deeper). A skill that does not
    /// load, or whose name an earlier root already gave, is left out and
    /// listed in [`rejected`](Catalog::rejected) with the reason (and
    /// logged at `warn`); the others load.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when a root is not a readable folder.
    pub fn discover<P: AsRef<Path>>(roots: &[P]) -> Result<Catalog> {
        let mut catalog = Catalog::new();
        for root in roots {
            let root = root.as_ref();
            if root.join("SKILL.md").is_file() {
                catalog.offer(root);
                continue;
            }
            let entries = std::fs::read_dir(root)
                .map_err(|e| Error::invalid(format!("skills folder {}: {e}", root.display())))?;
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(std::result::Result::ok)
                // Why `file_type` and not `is_dir`: a link is not followed
                // to find skills (a link out of the root is not a skill
                // the host put there).
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .filter(|p| p.join("SKILL.md").is_file())
                .collect();
            dirs.sort();
            for dir in dirs {
                catalog.offer(&dir);
            }
        }
        // Why one line: a tree of thousands of skills past the cap would
        // otherwise log a line per folder.
        let reason = over_cap();
        let over = catalog
            .rejected
            .iter()
            .filter(|(_, r)| *r == reason)
            .count();
        if over > 0 {
            log::warn!("{over} skill folders left out: {reason}");
        }
        Ok(catalog)
    }

    /// Load the skill in `dir` into the catalog, or record why not.
    fn offer(&mut self, dir: &Path) {
        if self.skills.len() >= MAX_SKILLS {
            // Not read, and logged once by `discover`.
            self.rejected.push((dir.to_path_buf(), over_cap()));
            return;
        }
        let refused = Skill::load(dir)
            .map_err(|e| e.to_string())
            .and_then(|skill| {
                if self.skills.contains_key(skill.name()) {
                    Err(format!("a skill named {:?} was found first", skill.name()))
                } else {
                    self.skills.insert(skill.name.clone(), skill);
                    Ok(())
                }
            });
        if let Err(reason) = refused {
            log::warn!("skill {} left out: {reason}", dir.display());
            self.rejected.push((dir.to_path_buf(), reason));
        }
    }

    /// Add `skill`, replacing one of the same name.
    pub fn insert(&mut self, skill: Skill) {
        self.skills.insert(skill.name.clone(), skill);
    }

    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// The skills' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.skills.keys().map(String::as_str).collect()
    }

    /// The skills, in name order.
    pub fn skills(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    /// How many skills the catalog holds.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether the catalog holds no skill.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The folders [`discover`](Catalog::discover) left out, each with the
    /// reason (the file and line for a front matter it refused).
    pub fn rejected(&self) -> &[(PathBuf, String)] {
        &self.rejected
    }

    /// The catalog of the skills named `names` (for a sub-agent or a
    /// persona).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming a skill the catalog does not hold.
    pub fn subset(&self, names: &[&str]) -> Result<Catalog> {
        let mut out = Catalog::new();
        for name in names {
            let skill = self
                .get(name)
                .ok_or_else(|| Error::invalid(format!("no skill named {name:?} in the catalog")))?;
            out.insert(skill.clone());
        }
        Ok(out)
    }

    /// The `<available_skills>` block that tells the model about these
    /// skills and the tool (named `tool_name`) that reads them; empty for
    /// an empty catalog.
    ///
    /// The block is at most 32 KiB, however many skills there are and
    /// however long their descriptions (up to [`MAX_SKILLS`] of up to 1024
    /// characters would be a megabyte in every request): the skills are
    /// listed in name order while they fit, and a last line counts the
    /// rest, which the tool still reads by name (its `name` parameter
    /// lists every skill).
    pub fn snippet(&self, tool_name: &str) -> String {
        if self.is_empty() {
            return String::new();
        }
        // A tool name a provider accepts is short; this one is public.
        let tool_name = crate::util::excerpt(tool_name, 64);
        let mut s = format!(
            "<available_skills>\nSkills are instructions for particular tasks. When a task \
             matches a skill's description, read the skill with the `{tool_name}` tool \
             (argument `name`) before you start, and the files it refers to with `path`.\n"
        );
        // Room kept for the count line and the closing tag.
        let room = MAX_BLOCK_BYTES - 512;
        let mut unlisted = 0usize;
        for skill in self.skills() {
            // One line each: a description's own line breaks would read as
            // further entries.
            let line = skill
                .description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let line = format!("- {}: {line}\n", skill.name);
            // Once one does not fit, none after it is listed: the list
            // stays a prefix of the names, in order.
            if unlisted > 0 || s.len() + line.len() > room {
                unlisted += 1;
                continue;
            }
            s.push_str(&line);
        }
        if unlisted > 0 {
            let _ = writeln!(
                s,
                "({unlisted} more skills are not listed here, for room; the `{tool_name}` \
                 tool's `name` takes any of them.)"
            );
        }
        s.push_str("</available_skills>");
        s
    }

    /// The tool that reads these skills, named `tool_name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an empty catalog (a tool with nothing to
    /// read) or a name no provider accepts.
    pub fn tool(&self, tool_name: &str) -> Result<SkillTool> {
        SkillTool::new(self.clone(), tool_name)
    }
}

/// The [`Extension`] that gives an agent a [`Catalog`]: the
/// `<available_skills>` block in its system prompt and the `skill` tool (a
/// [`SkillTool`]). An empty catalog adds neither.
#[derive(Debug)]
pub struct Skills {
    catalog: Catalog,
    tool_name: String,
    max_bytes: Option<u64>,
}

impl Skills {
    /// The extension for `catalog`, its tool named `skill`.
    pub fn new(catalog: Catalog) -> Skills {
        Skills {
            catalog,
            tool_name: "skill".into(),
            max_bytes: None,
        }
    }

    /// Name the tool `name` instead of `skill`.
    #[must_use]
    pub fn with_tool_name(mut self, name: impl Into<String>) -> Skills {
        self.tool_name = name.into();
        self
    }

    /// The largest file the tool reads (see [`SkillTool::with_max_bytes`]).
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Skills {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// The catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }
}

impl Extension for Skills {
    fn configure(&mut self, _c: &crate::Configurator) -> Result<()> {
        crate::tool::name::check_name(&self.tool_name).map_err(Error::invalid)
    }

    fn bind(&mut self, ctx: &ExtensionContext) -> Result<()> {
        if self.catalog.is_empty() {
            return Ok(());
        }
        let mut tool = self.catalog.tool(&self.tool_name)?;
        if let Some(max) = self.max_bytes {
            tool = tool.with_max_bytes(max);
        }
        ctx.add_tool(Arc::new(tool))
    }

    fn system_prompt_snippets(&self) -> Vec<String> {
        let block = self.catalog.snippet(&self.tool_name);
        if block.is_empty() {
            Vec::new()
        } else {
            vec![block]
        }
    }

    fn name(&self) -> String {
        "skills".into()
    }
}

/// The model-facing tool that reads a [`Catalog`]'s skills: `name` gives
/// the skill's instructions (its `SKILL.md` body, read at the call, so an
/// edit shows at once) and the list of the files in its folder; `name` and
/// `path` give one of those files. See the [module](self) for what it
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
    fn new(catalog: Catalog, name: &str) -> Result<SkillTool> {
        crate::tool::name::check_name(name).map_err(Error::invalid)?;
        if catalog.is_empty() {
            return Err(Error::invalid(format!(
                "the `{name}` tool needs at least one skill in its catalog"
            )));
        }
        Ok(SkillTool {
            parameters: parameters(&catalog),
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

    fn max_bytes(&self) -> u64 {
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
        call(self, args, cx)
    }

    fn idempotent(&self) -> bool {
        true
    }
}

/// The tool's parameters for `catalog`'s names.
fn parameters(catalog: &Catalog) -> Parameters {
    let names = catalog.names();
    Parameters::builder()
        .required_enum("name", "The skill to read.", &names)
        .optional_string(
            "path",
            "A file inside the skill's folder, relative to it (e.g. `references/guide.md`); \
             without it, the skill's instructions and the list of its files.",
        )
        .build()
}

/// The tool's call: the body, or a file beside it.
fn call(
    tool: &SkillTool,
    args: &Json,
    _cx: &ToolContext,
) -> std::result::Result<String, ToolError> {
    let name = args["name"].as_str().unwrap_or_default();
    let skill = tool
        .catalog()
        .get(name)
        .ok_or_else(|| ToolError::new(format!("no skill named {name:?}")))?;
    match args
        .get("path")
        .and_then(Json::as_str)
        .filter(|p| !p.trim().is_empty())
    {
        None => read::instructions(&skill.name, &skill.dir, tool.max_bytes()),
        Some(path) => read::file(&skill.dir, path, tool.max_bytes()),
    }
}
