//! [`Client`]: one connected server, with the restart policy.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::conn::{Conn, InitInfo, Observer, Opts};
use super::http::Http;
use super::jsonrpc::{HTTP_VERSIONS, RpcError, STDIO_VERSIONS};
use super::server::{Server, Transport};
use super::{content, stdio};
use crate::util::{Secrets, redact_url};
use crate::{Cancellable, Error, Result, ToolContext, ToolError};

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

/// A connection to one MCP server: the handshake done, tools listed and
/// called. The [`Registry`](super::Registry) makes one per server; use one
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
/// handshake, up to [`Server::restarts`] times (default once) over the
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
/// The server's bearer token, and the values of its environment variables
/// whose names look secret (see [`Server::env`]), are removed from
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
}

struct State {
    conn: Arc<Conn>,
    info: InitInfo,
    restarts_left: u32,
    closed: bool,
    /// A restart's connection during its handshake, for `close` to end.
    starting: Option<Arc<Conn>>,
}

/// Most pages `list_tools` follows (a server that never stops paginating).
const MAX_PAGES: usize = 1000;

impl Client {
    /// Start (stdio) or reach (HTTP) the server and run the `initialize`
    /// handshake. `name` labels logs and errors.
    ///
    /// # Errors
    ///
    /// [`Error::Connect`] when an HTTP endpoint cannot be reached;
    /// [`Error::Http`] when it answers with an error status;
    /// [`Error::Transport`] when the process cannot start, the connection
    /// fails, or the server speaks an unsupported protocol version;
    /// [`Error::Timeout`] when it does not answer in time;
    /// [`Error::Protocol`] when it answers `initialize` with an error. Over
    /// HTTP, each names the endpoint's URL (redacted).
    pub fn connect(name: &str, server: &Server) -> Result<Client> {
        Client::connect_with(name, server, None, &Secrets::default())
    }

    /// `connect`, with an observer of the server's notices and `secrets`
    /// to redact besides the server's own.
    pub(super) fn connect_with(
        name: &str,
        server: &Server,
        observer: Option<Observer>,
        secrets: &Secrets,
    ) -> Result<Client> {
        let name: Arc<str> = Arc::from(name);
        let secrets = secrets.with(server.credentials());
        let conn = start(&name, server, observer.clone(), &secrets)?;
        let info = handshake(&name, server, &conn)?;
        log::info!(
            target: "pikuri::mcp",
            "[{name}] connected: {} {} (protocol {})",
            info.name,
            info.version.as_deref().unwrap_or(""),
            info.protocol_version
        );
        Ok(Client {
            inner: Arc::new(Inner {
                name,
                server: server.clone(),
                observer,
                secrets,
                state: Mutex::new(State {
                    conn,
                    info,
                    restarts_left: server.restarts,
                    closed: false,
                    starting: None,
                }),
                restarting: Mutex::new(()),
            }),
        })
    }

    /// The name given at connect.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The protocol revision agreed on (e.g. `"2025-06-18"`).
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
        let conn = self.conn().map_err(|source| Error::Transport {
            url: shown_url(&self.inner.server),
            source,
        })?;
        // Cleared first: a change announced while listing marks it again.
        conn.tools_dirty.store(false, Ordering::SeqCst);
        let opts = Opts {
            timeout: self.inner.server.timeout,
            cancel,
            progress: None,
        };
        let mut tools = Vec::new();
        let mut cursors = HashSet::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = cursor.map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let page = conn
                .request("tools/list", params, &opts)
                .map_err(|e| self.error(e))?;
            for t in page["tools"].as_array().map_or(&[][..], Vec::as_slice) {
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
            match page["nextCursor"].as_str() {
                Some(c) if !c.is_empty() && cursors.insert(c.to_string()) => {
                    cursor = Some(c.to_string());
                }
                _ => break,
            }
        }
        Ok(tools)
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
        let conn = self.conn().map_err(|e| ToolError::new(e.to_string()))?;
        let opts = Opts {
            timeout: self.inner.server.timeout,
            cancel: cx.cancellable(),
            progress: Some(tool.to_string()),
        };
        let args = if args.is_object() {
            args.clone()
        } else {
            json!({})
        };
        let name = &self.inner.name;
        match conn.request(
            "tools/call",
            json!({"name": tool, "arguments": args}),
            &opts,
        ) {
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
        let conn = self.conn().map_err(|source| Error::Transport {
            url: shown_url(&self.inner.server),
            source,
        })?;
        let opts = Opts {
            timeout: self.inner.server.timeout,
            cancel: None,
            progress: None,
        };
        conn.request("ping", json!({}), &opts)
            .map(|_| ())
            .map_err(|e| self.error(e))
    }

    /// Shut the server down (stdio: close stdin, wait, then `SIGTERM` and
    /// `SIGKILL` to its process group; HTTP: DELETE the session). Idempotent;
    /// later calls fail with "closed".
    ///
    /// Returns within [`Server::shutdown_grace`] plus about two seconds,
    /// whatever the server does (one that stopped reading its stdin
    /// included), and ends every wait on this client, a restart's included.
    /// A process that left the server's process group is reached on Linux
    /// only, and only if its parent was still running; see
    /// [`Server::shutdown_grace`].
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
    pub(super) fn take_tools_changed(&self) -> bool {
        let conn = Arc::clone(&self.inner.state.lock().conn);
        conn.tools_dirty.swap(false, Ordering::SeqCst)
    }

    /// The live connection, restarting a dead stdio server within budget.
    /// The state lock is never held across the restart, so `close` and the
    /// accessors never wait for a handshake.
    fn conn(&self) -> std::result::Result<Arc<Conn>, Box<dyn std::error::Error + Send + Sync>> {
        let name = &self.inner.name;
        let closed = || format!("MCP server `{name}` is closed").into();
        {
            let st = self.inner.state.lock();
            if st.closed {
                return Err(closed());
            }
            if st.conn.closed_reason().is_none() {
                return Ok(Arc::clone(&st.conn));
            }
        }
        // One restart at a time: whoever waited here finds it done.
        let _restart = self.inner.restarting.lock();
        let (old, why) = {
            let mut st = self.inner.state.lock();
            if st.closed {
                return Err(closed());
            }
            let Some(why) = st.conn.closed_reason() else {
                return Ok(Arc::clone(&st.conn));
            };
            if st.restarts_left == 0 {
                return Err(format!("MCP server `{name}` is down ({why})").into());
            }
            st.restarts_left -= 1;
            (Arc::clone(&st.conn), why)
        };
        log::warn!(target: "pikuri::mcp", "[{name}] restarting after: {why}");
        old.close();
        let failed = |e: &dyn std::fmt::Display| -> Box<dyn std::error::Error + Send + Sync> {
            format!("MCP server `{name}` is down ({why}); restarting failed: {e}").into()
        };
        let server = &self.inner.server;
        let conn = start(
            name,
            server,
            self.inner.observer.clone(),
            &self.inner.secrets,
        )
        .map_err(|e| failed(&e))?;
        {
            let mut st = self.inner.state.lock();
            if st.closed {
                drop(st);
                conn.close();
                return Err(closed());
            }
            st.starting = Some(Arc::clone(&conn));
        }
        let shaken = handshake(name, server, &conn);
        let mut st = self.inner.state.lock();
        st.starting = None;
        if st.closed {
            drop(st);
            conn.close();
            return Err(closed());
        }
        let info = shaken.map_err(|e| failed(&e))?;
        conn.tools_dirty.store(true, Ordering::SeqCst);
        st.conn = Arc::clone(&conn);
        st.info = info;
        Ok(conn)
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

/// Start (stdio) or prepare to reach (HTTP) the server.
fn start(
    name: &Arc<str>,
    server: &Server,
    observer: Option<Observer>,
    secrets: &Secrets,
) -> Result<Arc<Conn>> {
    let conn = Conn::new(Arc::clone(name), observer, secrets.clone());
    match &server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let spec = stdio::Spawn {
                command,
                args,
                env,
                cwd: cwd.as_ref(),
                max_message: server.max_message,
                grace: server.shutdown_grace,
            };
            stdio::spawn(&conn, &spec).map_err(|e| Error::Transport {
                url: None,
                source: format!(
                    "MCP server `{name}`: could not start {}: {e}",
                    command.display()
                )
                .into(),
            })?;
        }
        Transport::Http { url, bearer } => {
            crate::protocol::check_http_url(&format!("MCP server `{name}`: the URL"), url)
                .map_err(Error::InvalidInput)?;
            let slowest = server.timeout.max(server.startup_timeout);
            let mut http = Http::new(url, bearer.as_deref(), slowest, server.max_message);
            http.set_oauth(server.oauth.clone());
            conn.set_wire(Box::new(Arc::new(http)));
        }
    }
    Ok(conn)
}

/// The `initialize` handshake on a started connection; closes it on
/// failure.
fn handshake(name: &str, server: &Server, conn: &Arc<Conn>) -> Result<InitInfo> {
    let versions = if server.is_stdio() {
        STDIO_VERSIONS
    } else {
        HTTP_VERSIONS
    };
    match conn.initialize(server.startup_timeout, versions) {
        Ok(info) => Ok(info),
        Err(e) => {
            conn.close();
            Err(rpc_error(name, server, e, "initialize failed: "))
        }
    }
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
        (RpcError::Status { status, message }, Some(url)) => Error::Http {
            status,
            message,
            url,
        },
        (RpcError::Unreachable(why), Some(url)) => Error::Connect {
            url,
            source: format!("MCP server `{name}`: {what}{why}").into(),
        },
        (e @ RpcError::Remote { .. }, url) => Error::Protocol {
            message: format!("MCP server `{name}`: {what}{e}"),
            url,
        },
        (e, url) => Error::Transport {
            url,
            source: format!("MCP server `{name}`: {what}{e}").into(),
        },
    }
}
