//! [`Registry`]: the extension that connects the declared servers, offers
//! their tools and keeps the tool lists current.

use std::collections::HashSet;
use std::fmt::{self, Write as _};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::client::{Client, ToolInfo};
use super::conn::{Notice, Observer};
use super::input::InputProvider;
use super::server::Server;
use crate::agent::{Extension, ExtensionContext};
use crate::tool::{self, Parameters};
use crate::{Configurator, Error, Result, Tool, ToolContext, ToolError};

/// The MCP extension: a registry of named servers, connected when the agent
/// is built, whose tools the model can call.
///
/// `Clone` shares the registry: keep a clone to reach the connected
/// [`Client`]s after the build. See the [module docs](super) for names,
/// events, refresh points and shutdown.
///
/// # Examples
///
/// ```
/// use pikuri::Agent;
/// use pikuri::mcp::{Registry, Server};
/// use pikuri::testing::FakeServer;
///
/// // An optional server that cannot start is logged and left out.
/// let mcp = Registry::new()
///     .server("missing", Server::stdio("/nonexistent/mcp-server", ["--stdio"]).with_optional(true));
/// let model = FakeServer::start();
/// let agent = Agent::builder(model.transport()).add_extension(mcp.clone()).build()?;
/// assert!(mcp.client("missing").is_none());
/// assert!(agent.system_prompt().contains("- missing: unavailable"));
///
/// // A required one fails the build, naming the server.
/// let err = Agent::builder(model.transport())
///     .add_extension(Registry::new().server("broken", Server::stdio("/nonexistent/mcp-server", [""; 0])))
///     .build()
///     .unwrap_err();
/// assert!(err.to_string().contains("`broken`"), "{err}");
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Default)]
#[must_use = "a Registry does nothing until added to an agent"]
pub struct Registry {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    entries: Vec<Entry>,
    ctx: Option<ExtensionContext>,
    /// The agent's API keys and every server's credentials, redacted from
    /// what any of the servers sends.
    secrets: crate::util::Secrets,
    /// The input provider of every server that has none of its own.
    input: Option<Arc<dyn InputProvider>>,
    /// Whether the tools of a server without [`Server::with_deferred`] are
    /// deferred ([`Registry::defer_tools`]).
    #[cfg(feature = "tool-search")]
    defer: bool,
}

struct Entry {
    name: String,
    server: Server,
    client: Option<Client>,
    /// One line for `<available_mcps>`.
    summary: String,
    /// The tools offered now.
    tools: Vec<Offered>,
}

/// One tool a server's entry offers to the agent.
#[derive(Clone, PartialEq, Eq)]
struct Offered {
    /// The agent-side name.
    name: String,
    /// The server's name of the tool; `None` for the resource tool.
    remote: Option<String>,
    /// A hash of the listed description and schema: a refresh keeps a tool
    /// whose hash did not change where it is (in its pool, found or not).
    hash: u64,
}

impl Offered {
    fn hash(info: &ToolInfo) -> u64 {
        let text = format!(
            "{}\u{0}{}\u{0}{}\u{0}{}",
            info.name,
            info.title.as_deref().unwrap_or_default(),
            info.description,
            info.input_schema
        );
        tool::fnv1a(text.as_bytes())
    }

    /// Whether the refreshed list (its names and hashes) still has this
    /// tool, unchanged.
    fn listed_in(&self, listed: &HashSet<(&str, u64)>) -> bool {
        self.remote
            .as_deref()
            .is_some_and(|remote| listed.contains(&(remote, self.hash)))
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Declare a server under `name` (the prefix of its tools' names).
    pub fn server(self, name: impl Into<String>, server: Server) -> Registry {
        self.inner.lock().entries.push(Entry {
            name: name.into(),
            server,
            client: None,
            summary: String::new(),
            tools: Vec::new(),
        });
        self
    }

    /// Answer the input requests of every server that has no
    /// [`Server::with_input_provider`] of its own with `provider` (see
    /// [`InputProvider`]).
    pub fn input_provider(self, provider: impl InputProvider + 'static) -> Registry {
        self.inner.lock().input = Some(Arc::new(provider));
        self
    }

    /// Add the tools of every server that has no [`Server::with_deferred`]
    /// of its own as deferred tools (`true`), or as ordinary ones (`false`,
    /// the default). See [Deferred tools](super#deferred-tools).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Agent;
    /// use pikuri::mcp::{Registry, Server};
    /// use pikuri::testing::FakeServer;
    /// use pikuri::tool_search::{Threshold, ToolSearch};
    ///
    /// let mcp = Registry::new()
    ///     .defer_tools(true)
    ///     .server("small", Server::stdio("/nonexistent/mcp-server", [""; 0]).with_optional(true));
    /// let model = FakeServer::start();
    /// let agent = Agent::builder(model.transport())
    ///     .tool_search(ToolSearch::new().threshold(Threshold::Count(40)))
    ///     .add_extension(mcp)
    ///     .build()?;
    /// // The server is down, so nothing was deferred; a connected one's
    /// // tools would be in `deferred_tools()`, not in `tools()`.
    /// assert!(agent.deferred_tools().is_empty());
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    #[cfg(feature = "tool-search")]
    pub fn defer_tools(self, yes: bool) -> Registry {
        self.inner.lock().defer = yes;
        self
    }

    /// The declared server names, in order.
    pub fn names(&self) -> Vec<String> {
        self.inner
            .lock()
            .entries
            .iter()
            .map(|e| e.name.clone())
            .collect()
    }

    /// The connected client of server `name` (after the build; `None` for an
    /// optional server that failed to connect).
    pub fn client(&self, name: &str) -> Option<Client> {
        self.inner
            .lock()
            .entries
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.client.clone())
    }

    /// The agent-side tool names offered for server `name`.
    pub fn tool_names(&self, name: &str) -> Vec<String> {
        self.inner
            .lock()
            .entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.tools.iter().map(|o| o.name.clone()).collect())
            .unwrap_or_default()
    }

    /// Re-list the tools of every server whose list changed, and swap them
    /// in the agent. Runs at the refresh points of the module docs.
    fn refresh(&self, only: Option<&str>, cancel: Option<&crate::Cancellable>) {
        let mut inner = self.inner.lock();
        let Some(ctx) = inner.ctx.clone() else { return };
        let pools = Pools::of(&inner);
        for entry in &mut inner.entries {
            if only.is_some_and(|n| n != entry.name) {
                continue;
            }
            let Some(client) = entry.client.clone() else {
                continue;
            };
            if !client.take_tools_changed() {
                continue;
            }
            let listed = match client.list_tools_with(cancel) {
                Ok(listed) => listed,
                Err(e) => {
                    log::warn!(target: "pikuri::mcp", "[{}] refreshing the tool list failed: {e}", entry.name);
                    continue;
                }
            };
            // A tool listed unchanged stays where it is (its place in the
            // request, its pool, found or not); the rest go, in one pass
            // over the agent's pools, and the new or changed ones join.
            // Hashed sets: a list of 10,000 tools is swapped in O(n).
            let now: HashSet<(&str, u64)> = listed
                .iter()
                .map(|i| (i.name.as_str(), Offered::hash(i)))
                .collect();
            let (kept, gone): (Vec<Offered>, Vec<Offered>) = std::mem::take(&mut entry.tools)
                .into_iter()
                .partition(|o| o.listed_in(&now));
            let gone: Vec<&str> = gone.iter().map(|o| o.name.as_str()).collect();
            ctx.remove_tools(&gone);
            let kept_remote: HashSet<&str> =
                kept.iter().filter_map(|o| o.remote.as_deref()).collect();
            let fresh: Vec<ToolInfo> = listed
                .into_iter()
                .filter(|i| !kept_remote.contains(i.name.as_str()))
                .collect();
            entry.tools = kept;
            let added = offer(&ctx, entry, pools, &client, fresh, self);
            entry.tools.extend(added);
            let names: Vec<&str> = entry.tools.iter().map(|o| o.name.as_str()).collect();
            log::info!(target: "pikuri::mcp", "[{}] tool list refreshed: {} tools", entry.name, names.len());
            ctx.emit_event(
                "mcp.tools_refreshed",
                json!({"server": entry.name, "tools": names}),
                false,
            );
        }
    }
}

/// Which pool a server's tools join: the registry's default for deferral.
#[derive(Clone, Copy)]
struct Pools {
    #[cfg(feature = "tool-search")]
    defer: bool,
}

/// A pool of the agent's tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pool {
    Model,
    SubAgent,
    #[cfg(feature = "tool-search")]
    Deferred,
}

impl Pools {
    fn of(inner: &Inner) -> Pools {
        #[cfg(not(feature = "tool-search"))]
        let _ = inner;
        Pools {
            #[cfg(feature = "tool-search")]
            defer: inner.defer,
        }
    }

    /// The pool of `server`'s tools: sub-agent-only wins, then the
    /// server's own choice, then the registry's.
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(
            clippy::unused_self,
            reason = "the registry's default is read with the feature"
        )
    )]
    fn of_server(self, server: &Server) -> Pool {
        if server.sub_agent_only {
            return Pool::SubAgent;
        }
        #[cfg(feature = "tool-search")]
        if server.deferred.unwrap_or(self.defer) {
            return Pool::Deferred;
        }
        Pool::Model
    }
}

/// Most names tried for one tool when the pools the registry cannot list
/// (another extension's deferred tools) hold the name it picked.
const NAME_TRIES: usize = 8;

/// Add the tool `make` builds under a collision-free name to `pool`;
/// returns the name, or `None` after a `warn`.
fn add_named(
    ctx: &ExtensionContext,
    server: &str,
    remote: &str,
    pool: Pool,
    taken: &mut HashSet<String>,
    make: impl Fn(String) -> Arc<dyn Tool>,
) -> Option<String> {
    for _ in 0..NAME_TRIES {
        let name = tool_name(server, remote, taken);
        let tool = make(name.clone());
        let added = match pool {
            Pool::Model => ctx.add_tool(tool),
            Pool::SubAgent => ctx.add_sub_agent_tool(tool),
            #[cfg(feature = "tool-search")]
            Pool::Deferred => ctx.add_deferred_tool(tool),
        };
        match added {
            Ok(()) => {
                taken.insert(name.clone());
                return Some(name);
            }
            // Taken in a pool `taken` does not list: pick the next name.
            Err(e) if e.to_string().contains("duplicate tool name") => {
                taken.insert(name);
            }
            Err(e) => {
                log::warn!(target: "pikuri::mcp", "[{server}] skipped tool `{name}`: {e}");
                return None;
            }
        }
    }
    log::warn!(target: "pikuri::mcp", "[{server}] skipped tool `{remote}`: no free name");
    None
}

/// Add `listed` to the agent under collision-free names, and the resource
/// tool if asked for; returns what was added.
fn offer(
    ctx: &ExtensionContext,
    entry: &Entry,
    pools: Pools,
    client: &Client,
    listed: Vec<ToolInfo>,
    registry: &Registry,
) -> Vec<Offered> {
    let mut taken: HashSet<String> = ctx
        .tools()
        .iter()
        .chain(&ctx.sub_agent_tools())
        .map(|t| t.name().to_string())
        .chain(entry.tools.iter().map(|o| o.name.clone()))
        .collect();
    let pool = pools.of_server(&entry.server);
    let mut names = Vec::new();
    for info in listed {
        let params = match Parameters::from_json_schema(info.input_schema.clone()) {
            Ok(p) => p,
            Err(e) => {
                log::warn!(target: "pikuri::mcp", "[{}] skipped tool `{}`: its inputSchema was rejected: {e}", entry.name, info.name);
                continue;
            }
        };
        let description = if info.description.trim().is_empty() {
            info.title.clone().unwrap_or_else(|| {
                format!("Tool `{}` of the MCP server `{}`.", info.name, entry.name)
            })
        } else {
            info.description.clone()
        };
        let hash = Offered::hash(&info);
        let make = |name: String| -> Arc<dyn Tool> {
            Arc::new(McpTool {
                client: client.clone(),
                registry: registry.clone(),
                server: entry.name.clone(),
                remote: info.name.clone(),
                name,
                description: description.clone(),
                params: params.clone(),
            })
        };
        if let Some(name) = add_named(ctx, &entry.name, &info.name, pool, &mut taken, make) {
            names.push(Offered {
                name,
                remote: Some(info.name.clone()),
                hash,
            });
        }
    }
    if entry.server.resource_tool {
        let make = |name: String| -> Arc<dyn Tool> {
            Arc::new(ReadResource::new(client, &entry.name, name))
        };
        if let Some(name) = add_named(ctx, &entry.name, "read_resource", pool, &mut taken, make) {
            names.push(Offered {
                name,
                remote: None,
                hash: 0,
            });
        }
    }
    names
}

/// Most resources named in the reading tool's description.
const LISTED_RESOURCES: usize = 50;

/// A server's resources as one reading tool (opt-in,
/// [`Server::with_resource_tool`]).
struct ReadResource {
    client: Client,
    name: String,
    description: String,
    params: Parameters,
}

impl ReadResource {
    fn new(client: &Client, server: &str, name: String) -> ReadResource {
        let mut description = format!("Read a resource of the MCP server `{server}` by its URI.");
        match client.list_resources() {
            Ok(list) if !list.is_empty() => {
                description.push_str(" Resources:");
                for r in list.iter().take(LISTED_RESOURCES) {
                    let _ = write!(description, "\n- {}", r.uri);
                    if let Some(d) = r.description.as_ref().or(r.title.as_ref()) {
                        let _ = write!(description, ": {}", crate::util::excerpt(d, 120));
                    }
                }
                if list.len() > LISTED_RESOURCES {
                    let _ = write!(
                        description,
                        "\n(and {} more)",
                        list.len() - LISTED_RESOURCES
                    );
                }
            }
            Ok(_) => {}
            Err(e) => {
                log::warn!(target: "pikuri::mcp", "[{server}] listing resources failed: {e}");
            }
        }
        ReadResource {
            client: client.clone(),
            name,
            description,
            params: Parameters::builder()
                .required_string("uri", "The URI of the resource to read.")
                .build(),
        }
    }
}

impl Tool for ReadResource {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &Parameters {
        &self.params
    }
    fn call(&self, args: &Value, cx: &ToolContext) -> std::result::Result<String, ToolError> {
        let uri = args["uri"].as_str().unwrap_or_default();
        let contents = self
            .client
            .read_resource_with(uri, cx.cancellable())
            .map_err(|e| ToolError::new(e.to_string()))?;
        let text: Vec<String> = contents
            .iter()
            .map(super::ResourceContent::to_text)
            .collect();
        Ok(if text.is_empty() {
            "(no content)".to_string()
        } else {
            text.join("\n")
        })
    }
}

/// The agent-side name of server `server`'s tool `tool`: the rule of the
/// [module docs](super#names). `taken` holds every name already in use.
pub(super) fn tool_name(server: &str, tool: &str, taken: &HashSet<String>) -> String {
    let raw = format!("{server}__{tool}");
    let clean = tool::sanitize(&raw);
    if clean.len() <= tool::MAX_NAME_LEN && !taken.contains(&clean) {
        return clean;
    }
    // Cut, and told apart by a hash of the server's own text: stable across
    // runs, so a refreshed list gets the same names.
    let mut n = 0u32;
    loop {
        let hash = if n == 0 {
            tool::fnv1a(raw.as_bytes())
        } else {
            tool::fnv1a(format!("{raw}#{n}").as_bytes())
        };
        let candidate = tool::hashed(&clean, hash);
        if !taken.contains(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

/// The one line of `<available_mcps>` for a connected server.
fn summary(server: &Server, client: &Client) -> String {
    if let Some(d) = &server.description {
        return d.clone();
    }
    let title = client.server_title();
    let line = client.instructions().and_then(|text| {
        // The first line of prose: markdown headings are skipped.
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#') && *l != title)
            .map(|l| crate::util::excerpt(l, 160).into_owned())
    });
    match line {
        Some(l) if !title.is_empty() => format!("{title}: {l}"),
        Some(l) => l,
        None if title.is_empty() => "an MCP server".to_string(),
        None => title,
    }
}

impl Extension for Registry {
    fn configure(&mut self, c: &Configurator) -> Result<()> {
        let mut inner = self.inner.lock();
        let servers: Vec<String> = inner
            .entries
            .iter()
            .flat_map(|e| e.server.credentials())
            .collect();
        inner.secrets = crate::util::Secrets::new(c.credentials().into_iter().chain(servers));
        let mut seen = HashSet::new();
        for e in &inner.entries {
            if e.name.trim().is_empty() {
                return Err(Error::invalid("an MCP server needs a name"));
            }
            if !seen.insert(e.name.as_str()) {
                return Err(Error::invalid(format!(
                    "MCP server `{}` declared twice",
                    e.name
                )));
            }
        }
        Ok(())
    }

    fn bind(&mut self, ctx: &ExtensionContext) -> Result<()> {
        let observer = observer(ctx);
        let (specs, secrets): (Vec<(String, Server)>, _) = {
            let mut inner = self.inner.lock();
            inner.ctx = Some(ctx.clone());
            let secrets = inner.secrets.clone();
            let input = inner.input.clone();
            let specs = inner
                .entries
                .iter_mut()
                .map(|e| {
                    if e.server.input.is_none() {
                        e.server.input.clone_from(&input);
                    }
                    (e.name.clone(), e.server.clone())
                })
                .collect();
            (specs, secrets)
        };
        // Servers start in parallel: `npx` and `uvx` take seconds each.
        let connected: Vec<Result<(Client, Vec<ToolInfo>)>> = std::thread::scope(|s| {
            let handles: Vec<_> = specs
                .iter()
                .map(|(name, server)| {
                    let observer = observer.clone();
                    let secrets = &secrets;
                    s.spawn(move || {
                        let client = Client::connect_with(name, server, Some(observer), secrets)?;
                        let tools = client.list_tools();
                        client.take_tools_changed();
                        tools.map(|t| (client, t))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::invalid("MCP connect panicked")))
                })
                .collect()
        });
        let mut inner = self.inner.lock();
        let pools = Pools::of(&inner);
        let mut failure = None;
        for (entry, result) in inner.entries.iter_mut().zip(connected) {
            match result {
                Ok((client, listed)) => {
                    let closing = client.clone();
                    ctx.on_close(move || closing.close())?;
                    entry.summary = summary(&entry.server, &client);
                    entry.tools = offer(ctx, entry, pools, &client, listed, self);
                    entry.client = Some(client);
                }
                Err(e) if entry.server.optional => {
                    log::warn!(target: "pikuri::mcp", "[{}] left out: {e}", entry.name);
                    entry.summary = format!("unavailable ({e})");
                }
                Err(e) => {
                    let e = e.to_string();
                    let named = format!("MCP server `{}`", entry.name);
                    failure.get_or_insert_with(|| {
                        if e.contains(&named) {
                            e
                        } else {
                            format!("{named}: {e}")
                        }
                    });
                }
            }
        }
        match failure {
            Some(msg) => Err(Error::invalid(msg)),
            None => Ok(()),
        }
    }

    fn on_user_message(&mut self, ctx: &ExtensionContext, _message: &str) {
        let cancel = ctx.shared().ok().and_then(|s| s.cancellable.clone());
        self.refresh(None, cancel.as_ref());
    }

    fn system_prompt_snippets(&self) -> Vec<String> {
        let inner = self.inner.lock();
        if inner.entries.is_empty() {
            return Vec::new();
        }
        let mut s = String::from(
            "<available_mcps>\nTools of these MCP servers are named `<server>__<tool>`.\n",
        );
        for e in &inner.entries {
            let summary = if e.summary.is_empty() {
                "not connected"
            } else {
                &e.summary
            };
            let _ = writeln!(s, "- {}: {summary}", e.name);
        }
        s.push_str("</available_mcps>");
        vec![s]
    }

    fn name(&self) -> String {
        "mcp".to_string()
    }
}

/// Notices become domain events: `mcp.progress` (transient), `mcp.log`,
/// `mcp.tools_changed`, `mcp.list_changed`.
fn observer(ctx: &ExtensionContext) -> Observer {
    let ctx = ctx.clone();
    Arc::new(move |notice| {
        match notice {
        Notice::Progress { server, tool, progress, total, message } => ctx.emit_event(
            "mcp.progress",
            json!({"server": &*server, "tool": tool, "progress": progress, "total": total, "message": message}),
            true,
        ),
        Notice::Log { server, level, logger, data } => ctx.emit_event(
            "mcp.log",
            json!({"server": &*server, "level": level, "logger": logger, "data": data}),
            false,
        ),
        Notice::ToolsChanged { server } => {
            ctx.emit_event("mcp.tools_changed", json!({"server": &*server}), false);
        }
        Notice::ListChanged { server, what } => {
            ctx.emit_event("mcp.list_changed", json!({"server": &*server, "list": what}), false);
        }
    }
    })
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("servers", &self.names())
            .finish()
    }
}

/// One server tool as an agent tool.
struct McpTool {
    client: Client,
    registry: Registry,
    server: String,
    remote: String,
    name: String,
    description: String,
    params: Parameters,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &Parameters {
        &self.params
    }
    fn call(&self, args: &Value, cx: &ToolContext) -> std::result::Result<String, ToolError> {
        let out = self.client.call_tool(&self.remote, args, cx);
        // Second refresh point: a list that changed during the call is
        // current before the next request of this turn.
        self.registry.refresh(Some(&self.server), cx.cancellable());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_bounded_and_unique() {
        let none = HashSet::new();
        assert_eq!(
            tool_name("everything", "get-sum", &none),
            "everything__get-sum"
        );
        assert_eq!(tool_name("my server", "a.b/c", &none), "my_server__a_b_c");
        let long = tool_name("s", &"x".repeat(100), &none);
        assert_eq!(long.len(), 64);
        assert_ne!(long, tool_name("s", &"x".repeat(101), &none));
        let taken: HashSet<String> = ["a__b_c".to_string()].into();
        let other = tool_name("a", "b.c", &taken);
        assert!(other.starts_with("a__b_c_") && other.len() <= 64, "{other}");
        let re_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        assert!(re_ok(&long) && re_ok(&other));
    }
}
