//! `--subagents`: the bundled personas behind the `agent` tool.
//!
//! - `researcher` ([`Persona::researcher`]): `fetch`, `web_scrape`, and
//!   `web_search` when a SearXNG instance is configured (`--searxng`,
//!   `SEARXNG_URL`); without one the persona is narrowed to the first two.
//! - `file_miner` ([`Persona::file_miner`]): `read_file`, `list_dir`.
//!
//! The web tools go to the sub-agent-only pool
//! ([`Configurator::add_sub_agent_tool`]): the main agent, which reads the
//! user's files, never holds network egress itself, and neither persona
//! holds both legs, so the lethal-trifecta check stays quiet. The file tools
//! the main agent was not given (`--tools`) join that pool too, so the
//! file_miner has them whatever `--tools` says.

use std::path::Path;

use pikuri::Configurator;
use pikuri::builtin::{self, SearXng, WebSearch};
use pikuri::subagent::{Persona, SubAgents};

use crate::Failure;
use crate::args::Options;

/// Add the personas (and their tools) to `cfg`; `root` confines the file tools.
pub(crate) fn wire(
    cfg: Configurator,
    opts: &Options,
    root: &Path,
) -> Result<Configurator, Failure> {
    if !opts.subagents {
        return Ok(cfg);
    }
    let mut cfg = cfg
        .add_sub_agent_tool(builtin::fetch())
        .add_sub_agent_tool(builtin::web_scrape());
    let researcher = match &opts.searxng {
        Some(url) => {
            cfg = cfg.add_sub_agent_tool(WebSearch::new(SearXng::new(url.clone())));
            Persona::researcher()
        }
        None => Persona::researcher().with_tools(&["web_scrape", "fetch"]),
    };
    let offered = |name: &str| opts.tools.iter().any(|t| t == name);
    if !offered("read_file") {
        cfg = cfg.add_sub_agent_tool(builtin::read_file(root));
    }
    if !offered("list_dir") {
        cfg = cfg.add_sub_agent_tool(builtin::list_dir(root));
    }
    let personas = SubAgents::new(vec![researcher, Persona::file_miner()])
        .map_err(|e| Failure::Other(e.to_string()))?;
    Ok(cfg.add_extension(personas))
}
