//! `--defer-above N` and `--no-tool-search`: MCP tools as deferred tools
//! ([`pikuri::tool_search`]); `/tools` lists what is sent, what is
//! deferred and what the model found.
//!
//! The MCP servers' tools join the agent's deferred pool
//! ([`Registry::defer_tools`](pikuri::mcp::Registry::defer_tools)); the
//! agent holds them back while there are more than N of them
//! ([`Threshold::Count`]) and sends each once the model found it with a
//! search. With N or fewer (a small server) they are sent as they are.
//! `--no-tool-search` makes them ordinary tools.

use std::fmt::Write as _;
use std::sync::OnceLock;

use pikuri::tool_search::{Threshold, ToolSearch};
use pikuri::{Agent, Configurator};

use crate::args::Options;

/// `--defer-above`, for `/tools`.
static DEFER_ABOVE: OnceLock<usize> = OnceLock::new();

/// The tool search of `--defer-above` (none with `--no-tool-search`).
pub(crate) fn search(cfg: Configurator, opts: &Options) -> Configurator {
    match opts.defer_above {
        Some(n) => {
            let _ = DEFER_ABOVE.set(n);
            cfg.tool_search(ToolSearch::new().threshold(Threshold::Count(n)))
        }
        None => cfg,
    }
}

/// `/tools`: the tools sent with every request, the deferred ones (held
/// back or not), and those found. Names come from the agent's pools, which
/// only valid tool names (`[a-zA-Z0-9_-]`) join: printed as they are.
pub(crate) fn list(agent: &Agent) -> String {
    let names = |tools: &[std::sync::Arc<dyn pikuri::Tool>]| -> Vec<String> {
        tools.iter().map(|t| t.name().to_string()).collect()
    };
    let mut out = String::new();
    let sent = names(&agent.tools());
    let _ = writeln!(out, "sent ({}): {}", sent.len(), joined(&sent));
    let deferred = names(&agent.deferred_tools());
    if !deferred.is_empty() {
        let found = agent.found_tools();
        let how = match DEFER_ABOVE.get() {
            Some(&n) if deferred.len() > n => format!("held back until found: more than {n}"),
            Some(&n) => format!("sent as they are: {n} or fewer"),
            None => "sent as they are".to_string(),
        };
        let _ = writeln!(
            out,
            "deferred ({}, {how}): {}",
            deferred.len(),
            joined(&deferred)
        );
        let _ = writeln!(out, "found ({}): {}", found.len(), joined(&found));
    }
    out.trim_end().to_string()
}

fn joined(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}
