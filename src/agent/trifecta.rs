//! The lethal-trifecta check run at build: one agent holding a tool that
//! reaches the network together with one that reads private data can be
//! talked (by text it reads) into sending that data out.

use std::sync::Arc;

use serde_json::json;

use crate::{Error, Event, Result, Tool};

/// What [`Configurator::build`](crate::Configurator::build) does when one
/// agent's model-visible tools both reach the network
/// ([`Tool::reaches_network`]) and read private data
/// ([`Tool::reads_private_data`]).
///
/// The answer to the warning is the second tool pool: give the network tools
/// to a sub-agent persona only
/// ([`Configurator::add_sub_agent_tool`](crate::Configurator::add_sub_agent_tool)),
/// so the agent that reads private files never holds egress itself. The
/// check counts the model-visible pool of each agent, sub-agents included
/// (a child is checked with the tools its persona names).
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, TrifectaPolicy, builtin};
/// use pikuri::testing::FakeServer;
///
/// let server = FakeServer::start();
/// let err = Agent::builder(server.transport())
///     .add_tool(builtin::read_file("."))
///     .add_tool(builtin::fetch())
///     .trifecta(TrifectaPolicy::Refuse)
///     .build()
///     .unwrap_err();
/// assert!(err.to_string().contains("lethal trifecta"), "{err}");
///
/// // The same tools split across the two pools pass.
/// let agent = Agent::builder(server.transport())
///     .add_tool(builtin::read_file("."))
///     .add_sub_agent_tool(builtin::fetch())
///     .trifecta(TrifectaPolicy::Refuse)
///     .build()?;
/// assert_eq!(agent.tools().len(), 1);
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrifectaPolicy {
    /// Build the agent, log a warning and emit a domain event
    /// `trifecta.warning` naming the tools (the default).
    #[default]
    Warn,
    /// Fail the build with [`Error::InvalidInput`].
    Refuse,
    /// Say nothing: the host has judged the combination safe.
    Allow,
}

/// Check `tools` (one agent's model-visible pool) under `policy`.
pub(super) fn check(
    tools: &[Arc<dyn Tool>],
    policy: TrifectaPolicy,
    agent: &Arc<str>,
    emit: impl FnOnce(Event),
) -> Result<()> {
    let names = |pick: fn(&dyn Tool) -> bool| -> Vec<&str> {
        tools
            .iter()
            .filter(|t| pick(&***t))
            .map(|t| Tool::name(&**t))
            .collect()
    };
    let network = names(<dyn Tool>::reaches_network);
    let private = names(<dyn Tool>::reads_private_data);
    if network.is_empty() || private.is_empty() || policy == TrifectaPolicy::Allow {
        return Ok(());
    }
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
