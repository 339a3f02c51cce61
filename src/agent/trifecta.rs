//! The lethal-trifecta check run at build: one agent holding a tool that
//! reaches the network together with one that reads private data can be
//! talked (by text it reads) into sending that data out.

use std::sync::Arc;

use serde_json::json;

use crate::tool::TrifectaPolicy;
use crate::{Error, Event, Result, Tool};

/// The names of the tools in `tools` that reach the network and of those
/// that read private data, when both are present: the trifecta.
pub(super) fn legs(tools: &[Arc<dyn Tool>]) -> Option<(Vec<&str>, Vec<&str>)> {
    let names = |pick: fn(&dyn Tool) -> bool| -> Vec<&str> {
        tools
            .iter()
            .filter(|t| pick(&***t))
            .map(|t| Tool::name(&**t))
            .collect()
    };
    let network = names(<dyn Tool>::reaches_network);
    let private = names(<dyn Tool>::reads_private_data);
    (!network.is_empty() && !private.is_empty()).then_some((network, private))
}

/// Check `tools` (one agent's model-visible pool) under `policy`
/// ([`ToolPath::trifecta`](super::shared::ToolPath)).
pub(super) fn check(
    tools: &[Arc<dyn Tool>],
    policy: TrifectaPolicy,
    agent: &Arc<str>,
    emit: &mut dyn FnMut(Event),
) -> Result<()> {
    if policy == TrifectaPolicy::Allow {
        return Ok(());
    }
    let Some((network, private)) = legs(tools) else {
        return Ok(());
    };
    let text = format!(
        "lethal trifecta: agent {agent:?} holds network tools ({}) and private-data tools ({}); \
         give the network tools to a sub-agent persona (add_sub_agent_tool)",
        network.join(", "),
        private.join(", ")
    );
    if policy == TrifectaPolicy::Refuse {
        return Err(Error::invalid(text));
    }
    log::warn!("{text}");
    emit(Event::Domain {
        agent: Arc::clone(agent),
        name: "trifecta.warning".to_string(),
        payload: json!({ "network": network, "private_data": private }),
        transient: false,
    });
    Ok(())
}
