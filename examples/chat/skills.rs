//! `--skills DIR`: Agent Skills the model reads on demand (the
//! `<available_skills>` block and the `skill` tool); `/skills` lists them.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::OnceLock;

use pikuri::listeners::sanitize;
use pikuri::skill::{Catalog, Skills};

use crate::Failure;

/// What `/skills` prints, set once at start.
static LISTING: OnceLock<String> = OnceLock::new();

/// The extension for the `--skills` folders, or `None` without any. A
/// folder that is not one is a usage error; a skill that does not load is
/// named on stderr and left out.
pub(crate) fn extension(dirs: &[PathBuf]) -> Result<Option<Skills>, Failure> {
    if dirs.is_empty() {
        return Ok(None);
    }
    let catalog = Catalog::discover(dirs).map_err(|e| Failure::Usage(format!("--skills: {e}")))?;
    for (_, reason) in catalog.rejected() {
        eprintln!("warning: skill left out: {}", sanitize(reason));
    }
    let _ = LISTING.set(listing(&catalog));
    Ok(Some(Skills::new(catalog)))
}

/// `/skills`: the skills the model can read, and those left out.
pub(crate) fn list() -> String {
    LISTING
        .get()
        .cloned()
        .unwrap_or_else(|| "(no skills: start the chat with --skills DIR)".to_string())
}

fn listing(catalog: &Catalog) -> String {
    let mut out = String::new();
    if catalog.is_empty() {
        out.push_str("(no skill loaded)");
    }
    for skill in catalog.skills() {
        let _ = writeln!(out, "{}: {}", skill.name(), sanitize(skill.description()));
    }
    for (path, _) in catalog.rejected() {
        let _ = writeln!(out, "(left out: {})", sanitize(&path.display().to_string()));
    }
    out.trim_end().to_string()
}
