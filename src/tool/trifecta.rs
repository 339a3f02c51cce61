//! [`TrifectaPolicy`]: what an agent does when its tools form the lethal
//! trifecta. The check itself runs at build, in the agent; the policy lives
//! here, next to the [`Tool`](crate::Tool) flags it reads, so that it can be
//! named without the agent module.

/// What [`Configurator::build`](crate::Configurator::build) does when one
/// agent's model-visible tools both reach the network
/// ([`Tool::reaches_network`](crate::Tool::reaches_network)) and read private data
/// ([`Tool::reads_private_data`](crate::Tool::reads_private_data)).
///
/// The answer to the warning is the second tool pool: give the network tools
/// to a sub-agent persona only
/// ([`Configurator::add_sub_agent_tool`](crate::Configurator::add_sub_agent_tool)),
/// so the agent that reads private files never holds egress itself. The
/// check counts the model-visible pool of each agent, sub-agents included
/// (a child is checked with the tools its persona names, when it is
/// spawned). Under `Refuse`, the [`SubAgents`](crate::subagent::SubAgents)
/// extension also checks every persona at build, so a persona that could
/// never run fails the build rather than the model's first delegation.
///
/// # Examples
///
/// ```
/// use pikuri::tool::TrifectaPolicy;
/// use pikuri::{Agent, builtin};
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
    /// Fail the build with [`Error::InvalidInput`](crate::Error::InvalidInput).
    Refuse,
    /// Say nothing: the host has judged the combination safe.
    Allow,
}
