//! [`Client`]: one connected server, with the restart policy.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::catalog::{self, Prompt, PromptInfo, ResourceContent, ResourceInfo, ResourceTemplate};
use super::conn::{Conn, InitInfo, Observer, Opts};
use super::content;
use super::input;
use super::jsonrpc::RpcError;
use super::server::{Server, Transport};
use crate::util::{Secrets, redact_url};
use crate::{Cancellable, Error, Result, ToolContext, ToolError};

mod start;

/// A tool as a server lists it (`tools/list`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolInfo {
    /// The server's name for it (`tools/call` uses this one).
    pub name: String,
    /// Its human-readable title, if any.
    pub title: Option<String>,
    /// Its description (empty if the server gave none).
    pub description: String,
    /// Its `inputSchema`, as sent.
    pub input_schema: Value,
}

/// A connection to one MCP server of either protocol generation: its
/// generation found, tools listed and called, resources read, prompts
/// got. The [`Registry`](super::Registry) makes one per server; use one
/// directly to talk to a server without an agent.
///
/// Cheap to clone (clones share the connection). Dropping the last clone
/// closes it, as [`close`](Client::close) does.
///
/// # Examples
///
/// ```no_run
/// use pikuri::mcp::{Client, Server};
/// use pikuri::ToolContext;
///
/// let client = Client::connect("everything", &Server::stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]))?;
/// assert!(client.list_tools()?.iter().any(|t| t.name == "echo"));
/// let out = client.call_tool("echo", &serde_json::json!({"message": "hi"}), &ToolContext::detached());
/// assert_eq!(out.unwrap(), "Echo: hi");
/// client.close();
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # Crashes and restarts
///
/// A stdio server whose process exits fails the calls in flight (the model
/// sees `Error: ...`). The next call starts it again and repeats the
/// handshake, up to [`Server::with_restarts`] times (default once) over the
/// client's life; after that every call answers that the server is down.
/// The tool list is marked changed after a restart.
///
/// # Cancellation boundary
///
/// [`call_tool`](Client::call_tool) waits on a channel, never on a write or
/// a read: a cancel of the context's [`Cancellable`](crate::Cancellable)
/// returns at once, after sending `notifications/cancelled` with the
/// request id (when the request was written). [`close`](Client::close)
/// ends every wait too, a restart's handshake included.
///
/// # Secrets
///
/// The server's bearer token, its URL's password and secret-looking query
/// values, and the values of its environment variables and arguments that
/// look secret (see [`Server::with_env`], [`Server::stdio`]), are removed from
/// everything the server sends (results, errors, log messages, tool
/// descriptions, its stderr) before a caller, a log line or a model sees
/// it; a [`Registry`](super::Registry) adds the agent's API keys and every
/// other server's tokens. A secret is caught verbatim, not encoded.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    name: Arc<str>,
    server: Server,
    observer: Option<Observer>,
    secrets: Secrets,
    state: Mutex<State>,
    /// Held by the one thread restarting the server (never by `close`).
    restarting: Mutex<()>,
    /// List results kept for their `ttlMs`, by method: when they go stale,
    /// and the items.
    cache: Mutex<HashMap<&'static str, (Instant, Vec<Value>)>>,
    /// When the last `tools/list` of a 2026 server without a listen stream
    /// goes stale (its `ttlMs`).
    tools_fresh_until: Mutex<Option<Instant>>,
}

struct State {
    conn: Arc<Conn>,
    info: InitInfo,
    restarts_left: u32,
    closed: bool,
    /// A restart's connection during its handshake, for `close` to end.
    starting: Option<Arc<Conn>>,
}

/// Most pages a list follows (a server that never stops paginating).
const MAX_PAGES: usize = 1000;
/// Most `input_required` rounds one request goes through before giving up
/// (a server that asks again and again).
pub(super) const MAX_INPUT_ROUNDS: usize = 8;
/// Most input requests one `input_required` result may carry.
const MAX_INPUT_REQUESTS: usize = 16;
impl Client {
    /// Start (stdio) or reach (HTTP) the server, probe it with
    /// `server/discover` and, for a 2025 server, run the `initialize`
    /// handshake (see [Protocol](super#protocol)). `name` labels logs and
    /// errors.
    ///
    /// # Errors
    ///
    /// [`Error::Connect`] when an HTTP endpoint cannot be reached;
    /// [`Error::Http`] when it answers with an error status;
    /// [`Error::Transport`] when the process cannot start, the connection
    /// fails, the server speaks an unsupported protocol version, or answers
    /// `server/discover` with something that is not a discover result;
    /// [`Error::Timeout`] when it does not answer in time;
    /// [`Error::Protocol`] when it answers `initialize` with an error. Over
    /// HTTP, each names the endpoint's URL (redacted).
    pub fn connect(name: &str, server: &Server) -> Result<Client> {
        Client::connect_with(name, server, None, &Secrets::default())
    }

    /// The name given at connect.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The protocol revision agreed on: `"2026-07-28"` for a server that
    /// answered the `server/discover` probe, else the one `initialize`
    /// agreed on (`"2025-06-18"`, `"2025-03-26"`, or over stdio
    /// `"2024-11-05"`).
    pub fn protocol_version(&self) -> String {
        self.inner.state.lock().info.protocol_version.clone()
    }

    /// The server's `serverInfo.name`.
    pub fn server_name(&self) -> String {
        self.inner.state.lock().info.name.clone()
    }

    /// The server's `serverInfo.title`, or its name.
    pub fn server_title(&self) -> String {
        let st = self.inner.state.lock();
        st.info
            .title
            .clone()
            .unwrap_or_else(|| st.info.name.clone())
    }

    /// The server's `instructions`, if it sent any.
    pub fn instructions(&self) -> Option<String> {
        self.inner.state.lock().info.instructions.clone()
    }

    /// Every tool the server offers (all pages of `tools/list`).
    ///
    /// # Errors
    ///
    /// As [`connect`](Client::connect), for the `tools/list` requests.
    pub fn list_tools(&self) -> Result<Vec<ToolInfo>> {
        self.list_tools_with(None)
    }

    /// `list_tools`, ended early by `cancel` too.
    pub(super) fn list_tools_with(&self, cancel: Option<&Cancellable>) -> Result<Vec<ToolInfo>> {
        let conn = self.live()?;
        // Cleared first: a change announced while listing marks it again.
        conn.tools_dirty.store(false, Ordering::SeqCst);
        let (items, ttl) = self.pages(&conn, "tools/list", "tools", cancel)?;
        *self.inner.tools_fresh_until.lock() = ttl.map(|ttl| Instant::now() + ttl);
        let mut tools = Vec::new();
        {
            for t in &items {
                match t["name"].as_str() {
                    Some(name) if !name.is_empty() => tools.push(ToolInfo {
                        name: name.to_string(),
                        title: t["title"].as_str().map(String::from),
                        description: t["description"].as_str().unwrap_or_default().to_string(),
                        input_schema: t
                            .get("inputSchema")
                            .cloned()
                            .unwrap_or_else(|| json!({"type": "object"})),
                    }),
                    _ => {
                        log::warn!(target: "pikuri::mcp", "[{}] skipped a tool without a name", self.name());
                    }
                }
            }
        }
        Ok(tools)
    }

    /// Every page of a list (`method`, items under `key`), and the
    /// shortest `ttlMs` of its pages (`None` when a page had none).
    fn pages(
        &self,
        conn: &Arc<Conn>,
        method: &'static str,
        key: &str,
        cancel: Option<&Cancellable>,
    ) -> Result<(Vec<Value>, Option<Duration>)> {
        let opts = self.opts(cancel, None);
        let mut items = Vec::new();
        let mut cursors = HashSet::new();
        let mut cursor: Option<String> = None;
        let mut ttl: Option<Duration> = Some(Duration::MAX);
        for _ in 0..MAX_PAGES {
            let params = cursor.map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let mut page = conn
                .request(method, params, &opts)
                .map_err(|e| self.error(e))?;
            // A negative or absent ttlMs means "stale at once".
            let page_ttl = page["ttlMs"].as_u64().map(Duration::from_millis);
            ttl = ttl.zip(page_ttl).map(|(a, b)| a.min(b));
            if let Some(Value::Array(list)) = page.get_mut(key).map(Value::take) {
                items.extend(list);
            }
            match page["nextCursor"].as_str() {
                Some(c) if !c.is_empty() && cursors.insert(c.to_string()) => {
                    cursor = Some(c.to_string());
                }
                _ => break,
            }
        }
        Ok((items, ttl.filter(|t| *t != Duration::MAX)))
    }

    /// A list, from the cache while its `ttlMs` lasts and no change notice
    /// came (`dirty`), else listed again.
    fn cached_list(
        &self,
        method: &'static str,
        key: &str,
        dirty: impl Fn(&Conn) -> &std::sync::atomic::AtomicBool,
    ) -> Result<Vec<Value>> {
        let conn = self.live()?;
        let changed = dirty(&conn).swap(false, Ordering::SeqCst);
        if !changed
            && let Some((until, items)) = self.inner.cache.lock().get(method)
            && Instant::now() < *until
        {
            return Ok(items.clone());
        }
        let (items, ttl) = self.pages(&conn, method, key, None)?;
        let mut cache = self.inner.cache.lock();
        match ttl.filter(|t| !t.is_zero()) {
            Some(ttl) => {
                cache.insert(method, (Instant::now() + ttl, items.clone()));
            }
            None => {
                cache.remove(method);
            }
        }
        Ok(items)
    }

    /// Every resource the server lists (all pages of `resources/list`),
    /// kept for the `ttlMs` it gives unless it announces a change.
    ///
    /// # Errors
    ///
    /// As [`connect`](Client::connect); a server without resources answers
    /// with an error ([`Error::Protocol`]).
    pub fn list_resources(&self) -> Result<Vec<ResourceInfo>> {
        let items = self.cached_list("resources/list", "resources", |c| &c.resources_dirty)?;
        Ok(items.iter().filter_map(catalog::resource).collect())
    }

    /// Every resource template the server lists (all pages of
    /// `resources/templates/list`); cached as
    /// [`list_resources`](Client::list_resources).
    ///
    /// # Errors
    ///
    /// As [`list_resources`](Client::list_resources).
    pub fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>> {
        let items = self.cached_list("resources/templates/list", "resourceTemplates", |c| {
            &c.resources_dirty
        })?;
        Ok(items.iter().filter_map(catalog::template).collect())
    }

    /// Read the resource `uri` (a listed one, or an expansion of a
    /// template). A server that asks for input meanwhile is answered
    /// through the [`InputProvider`](super::InputProvider).
    ///
    /// # Errors
    ///
    /// As [`connect`](Client::connect); a result larger than
    /// [`Server::with_max_message_bytes`] is an [`Error::Transport`] saying so
    /// (over stdio too, as soon as the line is read).
    pub fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContent>> {
        self.read_resource_with(uri, None)
    }

    pub(super) fn read_resource_with(
        &self,
        uri: &str,
        cancel: Option<&Cancellable>,
    ) -> Result<Vec<ResourceContent>> {
        let conn = self.live()?;
        let opts = self.opts(cancel, None);
        let result = self
            .rounds(&conn, "resources/read", &json!({"uri": uri}), &opts)
            .map_err(|e| self.error(e))?;
        Ok(catalog::contents(&result))
    }

    /// Every prompt the server lists (all pages of `prompts/list`); cached
    /// as [`list_resources`](Client::list_resources).
    ///
    /// # Errors
    ///
    /// As [`list_resources`](Client::list_resources).
    pub fn list_prompts(&self) -> Result<Vec<PromptInfo>> {
        let items = self.cached_list("prompts/list", "prompts", |c| &c.prompts_dirty)?;
        Ok(items.iter().filter_map(catalog::prompt_info).collect())
    }

    /// The prompt `name` filled in with `arguments` (`prompts/get`).
    ///
    /// # Errors
    ///
    /// As [`read_resource`](Client::read_resource); an unknown prompt or a
    /// missing required argument is the server's [`Error::Protocol`].
    pub fn get_prompt<K, V>(
        &self,
        name: &str,
        arguments: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Prompt>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let conn = self.live()?;
        let opts = self.opts(None, None);
        let args: serde_json::Map<String, Value> = arguments
            .into_iter()
            .map(|(k, v)| (k.into(), Value::String(v.into())))
            .collect();
        let result = self
            .rounds(
                &conn,
                "prompts/get",
                &json!({"name": name, "arguments": args}),
                &opts,
            )
            .map_err(|e| self.error(e))?;
        Ok(catalog::prompt(&result))
    }

    /// One request, through as many `input_required` rounds as the server
    /// asks for (at most [`MAX_INPUT_ROUNDS`]): each round's elicitation
    /// requests go to the input provider, and the request is sent again
    /// with their answers (`inputResponses`) and the server's
    /// `requestState`, echoed unread.
    fn rounds(
        &self,
        conn: &Arc<Conn>,
        method: &str,
        params: &Value,
        opts: &Opts<'_>,
    ) -> std::result::Result<Value, RpcError> {
        let mut retry = params.clone();
        for _ in 0..=MAX_INPUT_ROUNDS {
            let result = conn.request(method, retry.clone(), opts)?;
            if result["resultType"] != "input_required" {
                return Ok(result);
            }
            let asks = result["inputRequests"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            if asks.len() > MAX_INPUT_REQUESTS {
                return Err(RpcError::Input(format!(
                    "the server asked for {} inputs at once (at most {MAX_INPUT_REQUESTS})",
                    asks.len()
                )));
            }
            let mut answers = serde_json::Map::new();
            for (key, ask) in asks {
                let answer = match ask["method"].as_str().unwrap_or_default() {
                    "elicitation/create" => input::elicit(
                        conn.asker.as_ref(),
                        self.name(),
                        &ask["params"],
                        opts.cancel,
                        None,
                    )?,
                    // Sampling and roots are deprecated, and not declared.
                    other => {
                        return Err(RpcError::Input(format!(
                            "the server asked for `{}`, which this client does not offer",
                            crate::util::excerpt(other, 60)
                        )));
                    }
                };
                answers.insert(key, answer);
            }
            retry = params.clone();
            if let Some(p) = retry.as_object_mut() {
                p.insert("inputResponses".into(), Value::Object(answers));
                if let Some(state) = result.get("requestState").filter(|s| s.is_string()) {
                    p.insert("requestState".into(), state.clone());
                }
            }
        }
        Err(RpcError::Input(format!(
            "the server still asked for input after {MAX_INPUT_ROUNDS} rounds; gave up"
        )))
    }

    /// Call the server's tool `tool` with `args`; the text the model sees
    /// (the [content mapping](super#what-the-model-sees)), or a
    /// [`ToolError`] for an `isError` result, a timeout, a cancel, a crash.
    /// Progress is requested (a `progressToken` in `_meta`) and reported
    /// through the registry's events or the log.
    pub fn call_tool(
        &self,
        tool: &str,
        args: &Value,
        cx: &ToolContext,
    ) -> Result<String, ToolError> {
        let conn = self
            .conn_unless_cancelled(cx.cancellable())
            .map_err(|e| ToolError::new(e.to_string()))?;
        let opts = self.opts(cx.cancellable(), Some(tool.to_string()));
        let args = if args.is_object() {
            args.clone()
        } else {
            json!({})
        };
        let mut params = json!({"name": tool, "arguments": args});
        if let Some(tp) = cx.traceparent() {
            // The trace context goes where both protocol generations put
            // it: the bare `traceparent` key of `_meta` (2026-07-28,
            // basic, "OpenTelemetry trace context"; SEP-414).
            super::conn::merge_meta(&mut params, &json!({"traceparent": tp}));
        }
        let name = &self.inner.name;
        match self.rounds(&conn, "tools/call", &params, &opts) {
            Ok(result) => content::observation(&result),
            Err(RpcError::Cancelled) => Err(ToolError::new("cancelled")),
            Err(RpcError::Timeout(d)) => Err(ToolError::new(format!(
                "MCP server `{name}` did not answer within {} s; the call was cancelled",
                d.as_secs_f64()
            ))),
            Err(RpcError::Closed(why)) => {
                let next = if self.inner.state.lock().restarts_left > 0 {
                    "it will be restarted on the next call"
                } else {
                    "it will not be restarted"
                };
                Err(ToolError::new(format!(
                    "MCP server `{name}` stopped during the call ({why}); {next}"
                )))
            }
            Err(e) => Err(ToolError::new(format!("MCP server `{name}`: {e}"))),
        }
    }

    /// Send a `ping` and wait for the answer.
    ///
    /// # Errors
    ///
    /// As [`connect`](Client::connect).
    pub fn ping(&self) -> Result<()> {
        let conn = self.live()?;
        let opts = self.opts(None, None);
        conn.request("ping", json!({}), &opts)
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    /// Shut the server down (stdio: close stdin, wait, then `SIGTERM` and
    /// `SIGKILL` to its process group; HTTP: DELETE the session). Idempotent;
    /// later calls fail with "closed".
    ///
    /// Returns within [`Server::with_shutdown_grace`] plus about two seconds,
    /// whatever the server does (one that stopped reading its stdin
    /// included), and ends every wait on this client, a restart's included.
    /// A process that left the server's process group is reached on Linux
    /// only, and only if its parent was still running; see
    /// [`Server::with_shutdown_grace`].
    pub fn close(&self) {
        let (conn, starting) = {
            let mut st = self.inner.state.lock();
            st.closed = true;
            (Arc::clone(&st.conn), st.starting.take())
        };
        if let Some(starting) = starting {
            starting.close();
        }
        conn.close();
    }

    /// Take the "tool list changed" mark (set by
    /// `notifications/tools/list_changed` and by a restart).
    ///
    /// A 2026 server announces changes on a `subscriptions/listen` stream:
    /// one that ended is opened again here, and the list counts as changed
    /// (a change may have gone unseen). A 2026 server that offers no such
    /// stream has its list relisted once its `ttlMs` has passed.
    pub(super) fn take_tools_changed(&self) -> bool {
        let (conn, caps) = {
            let st = self.inner.state.lock();
            (Arc::clone(&st.conn), st.info.capabilities.clone())
        };
        let mut changed = conn.tools_dirty.swap(false, Ordering::SeqCst);
        if conn.is_modern() && conn.closed_reason().is_none() {
            if let Some(filter) = listen_filter(&caps) {
                if !conn.listening() {
                    conn.listen(&filter);
                    changed = true;
                }
            } else if self
                .inner
                .tools_fresh_until
                .lock()
                .is_some_and(|until| Instant::now() >= until)
            {
                changed = true;
            }
        }
        changed
    }

    /// [`conn`](Client::conn) for the host's calls: a failure is the
    /// [`Error::Transport`] naming the server's URL.
    fn live(&self) -> Result<Arc<Conn>> {
        self.conn().map_err(|source| Error::Transport {
            url: shown_url(&self.inner.server),
            source,
        })
    }

    /// The options of one request to this server: its request timeout,
    /// `cancel`, and progress reported under `progress`.
    fn opts<'a>(&self, cancel: Option<&'a Cancellable>, progress: Option<String>) -> Opts<'a> {
        Opts {
            timeout: self.inner.server.timeout,
            cancel,
            progress,
        }
    }

    #[allow(
        clippy::needless_pass_by_value,
        reason = "called as map_err(|e| self.error(e))"
    )]
    fn error(&self, e: RpcError) -> Error {
        rpc_error(&self.inner.name, &self.inner.server, e, "")
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.state.get_mut().conn.close();
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.inner.name)
            .field("server", &self.inner.server)
            .finish_non_exhaustive()
    }
}

/// The `subscriptions/listen` filter for what the server says may change,
/// or `None` when it announces no list changes.
fn listen_filter(capabilities: &Value) -> Option<Value> {
    let mut filter = serde_json::Map::new();
    for (cap, key) in [
        ("tools", "toolsListChanged"),
        ("resources", "resourcesListChanged"),
        ("prompts", "promptsListChanged"),
    ] {
        if capabilities[cap]["listChanged"] == Value::Bool(true) {
            filter.insert(key.into(), Value::Bool(true));
        }
    }
    (!filter.is_empty()).then_some(Value::Object(filter))
}

/// The server's URL, redacted, for errors; `None` over stdio.
fn shown_url(server: &Server) -> Option<String> {
    match &server.transport {
        Transport::Http { url, .. } => Some(redact_url(url)),
        Transport::Stdio { .. } => None,
    }
}

/// `e`, from the server `name`, as an [`Error`]; `what` prefixes the text
/// (`initialize failed: `).
fn rpc_error(name: &str, server: &Server, e: RpcError, what: &str) -> Error {
    let url = shown_url(server);
    match (e, url) {
        (RpcError::Timeout(after), url) => Error::Timeout { after, url },
        (RpcError::Cancelled, _) => Error::Cancelled,
        (RpcError::Auth(e), url) => e.into_error(url),
        (RpcError::Status { status, message }, Some(url)) => Error::Http {
            status,
            message,
            url,
        },
        (RpcError::Unreachable(why), Some(url)) => Error::Connect {
            url,
            source: format!("MCP server `{name}`: {what}{why}").into(),
        },
        (e @ (RpcError::Remote { .. } | RpcError::Input(_)), url) => Error::Protocol {
            message: format!("MCP server `{name}`: {what}{e}"),
            url,
        },
        (e, url) => Error::Transport {
            url,
            source: format!("MCP server `{name}`: {what}{e}").into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use crate::mcp::oauth::AuthError;

    /// Every OAuth cause reaches the host as one kind, through one mapping,
    /// with its secrets redacted on the way.
    #[test]
    fn oauth_failures_are_auth_errors_whatever_the_cause() {
        let server = Server::http("http://127.0.0.1:9/mcp");
        let secrets = Secrets::new(["tok-123"]);
        for cause in [
            AuthError::Unreachable("cannot reach http://as/ tok-123".into()),
            AuthError::Timeout("http://as/ did not answer within 2 s".into()),
            AuthError::Refused("the token request was refused (400)".into()),
            AuthError::Unusable("the token answer has no access_token".into()),
            AuthError::Local("the browser could not be opened".into()),
        ] {
            let rpc = RpcError::Auth(cause.clone()).redacted(&secrets);
            let e = rpc_error("fake", &server, rpc, "");
            assert_eq!(e.kind(), ErrorKind::Auth, "{cause:?}");
            assert_eq!(e.status(), Some(401));
            let text = e.to_string();
            assert!(
                text.contains("OAuth: ") && !text.contains("tok-123"),
                "{text}"
            );
        }
    }
}
