//! [`Server`]: how to reach one MCP server, and the per-server options.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::input::InputProvider;
use crate::util::{Secrets, redact_url};

/// How to reach one MCP server (a child process over stdio, or a Streamable
/// HTTP endpoint) and the options for using it.
///
/// A value only: nothing starts until [`Client::connect`](super::Client::connect)
/// or the [`Registry`](super::Registry)'s `bind`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use pikuri::mcp::Server;
///
/// let time = Server::stdio("uvx", ["mcp-server-time"])
///     .with_env("TZ", "UTC")
///     .with_request_timeout(Duration::from_secs(10))
///     .with_description("Current time and time-zone conversion");
/// assert!(time.is_stdio());
/// assert_eq!(time.request_timeout(), Duration::from_secs(10));
///
/// let remote = Server::http("http://127.0.0.1:3001/mcp").with_bearer_token("s3cret");
/// assert!(!remote.is_stdio());
/// // The token never shows in Debug.
/// assert!(!format!("{remote:?}").contains("s3cret"));
/// ```
#[derive(Clone)]
#[must_use = "a Server does nothing until connected"]
pub struct Server {
    pub(super) transport: Transport,
    pub(super) timeout: Duration,
    pub(super) startup_timeout: Duration,
    /// How long the `server/discover` probe is waited for alone before
    /// `initialize` is asked too ([`PROBE_TIMEOUT`]; shorter in tests).
    pub(super) probe_timeout: Duration,
    pub(super) description: Option<String>,
    pub(super) sub_agent_only: bool,
    pub(super) optional: bool,
    pub(super) restarts: u32,
    pub(super) max_message: usize,
    pub(super) shutdown_grace: Duration,
    /// How to log in when the HTTP server asks (`None`: never).
    pub(super) oauth: Option<super::oauth::OAuth>,
    pub(super) input: Option<Arc<dyn InputProvider>>,
    pub(super) input_timeout: Duration,
    pub(super) resource_tool: bool,
    /// Whether the tools are deferred (`None`: the registry's default,
    /// [`Registry::defer_tools`](super::Registry::defer_tools)).
    #[cfg(feature = "tool-search")]
    pub(super) deferred: Option<bool>,
}

#[derive(Clone)]
pub(super) enum Transport {
    Stdio {
        command: OsString,
        args: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        bearer: Option<String>,
    },
}

/// Default per-request timeout.
pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the `server/discover` probe is waited for alone: a server that
/// has not answered by then is either slow to start or a 2025 one that
/// ignores unknown methods (`conn/handshake.rs` says what follows).
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on one stdio line or one SSE event (4 MiB).
pub(super) const DEFAULT_MAX_MESSAGE: usize = 4 << 20;

impl Server {
    fn with(transport: Transport) -> Server {
        Server {
            transport,
            timeout: DEFAULT_TIMEOUT,
            startup_timeout: DEFAULT_TIMEOUT,
            probe_timeout: PROBE_TIMEOUT,
            description: None,
            sub_agent_only: false,
            optional: false,
            restarts: 1,
            max_message: DEFAULT_MAX_MESSAGE,
            shutdown_grace: Duration::from_secs(2),
            oauth: None,
            input: None,
            input_timeout: Duration::from_secs(300),
            resource_tool: false,
            #[cfg(feature = "tool-search")]
            deferred: None,
        }
    }

    /// A server started as a child process speaking newline-delimited
    /// JSON-RPC on its stdin and stdout (its stderr goes to the log at
    /// `debug`).
    ///
    /// An argument that looks secret (at least 8 characters, after an
    /// option whose name looks secret as [`Server::with_env`]'s names do:
    /// `--api-key VALUE`, `--token=VALUE`) is treated as the environment's
    /// secrets are: hidden from `Debug` and from what the server sends.
    pub fn stdio<I, A>(command: impl Into<OsString>, args: I) -> Server
    where
        I: IntoIterator<Item = A>,
        A: Into<OsString>,
    {
        Server::with(Transport::Stdio {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: None,
        })
    }

    /// A server at a Streamable HTTP endpoint (e.g. `http://host:port/mcp`).
    pub fn http(url: impl Into<String>) -> Server {
        Server::with(Transport::Http {
            url: url.into(),
            bearer: None,
        })
    }

    /// Whether this server can be reached by this build: an HTTP server's
    /// URL is an `http://` or `https://` URL with a host (`https://`
    /// needs the `rustls` feature); a stdio server always passes. The
    /// registry checks it when it connects; call it to reject a bad URL
    /// earlier (a command line, a config file).
    ///
    /// ```
    /// use pikuri::mcp::Server;
    /// let err = Server::http("127.0.0.1:3001/mcp").check().unwrap_err();
    /// assert!(err.to_string().contains("has no scheme: write `http://127.0.0.1:3001/mcp`"));
    /// assert!(Server::http("http://127.0.0.1:3001/mcp").check().is_ok());
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) saying what is
    /// wrong with the URL and the fix.
    pub fn check(&self) -> crate::Result<()> {
        match &self.transport {
            Transport::Http { url, .. } => {
                crate::protocol::check_http_url("the MCP server URL", url)
                    .map_err(crate::Error::InvalidInput)
            }
            Transport::Stdio { .. } => Ok(()),
        }
    }

    /// Set an environment variable of the child process (stdio only; the
    /// child inherits the rest of the environment).
    ///
    /// A value of at least 8 characters whose name contains `TOKEN`, `KEY`,
    /// `SECRET`, `PASSWORD`, `PASSWD`, `AUTH` or `CREDENTIAL` (any case) is
    /// treated as a credential: it is redacted from everything the server
    /// sends (see [`Client`](super::Client#secrets)).
    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Server {
        if let Transport::Stdio { env, .. } = &mut self.transport {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// The working directory of the child process (stdio only).
    pub fn with_current_dir(mut self, dir: impl Into<PathBuf>) -> Server {
        if let Transport::Stdio { cwd, .. } = &mut self.transport {
            *cwd = Some(dir.into());
        }
        self
    }

    /// Send `Authorization: Bearer <token>` with every request (HTTP only).
    /// The token is redacted from everything the server sends, as are the
    /// URL's password and its query values whose names look secret (the
    /// names of [`Server::with_env`]).
    pub fn with_bearer_token(mut self, token: impl Into<String>) -> Server {
        if let Transport::Http { bearer, .. } = &mut self.transport {
            *bearer = Some(token.into());
        }
        self
    }

    /// Log in with OAuth 2.1 when the server answers `401` (HTTP only):
    /// discovery, the browser, the loopback redirect and refresh, as
    /// [`OAuth`](super::OAuth#flow) describes. A token from
    /// [`with_bearer_token`](Server::with_bearer_token) is sent first if both are
    /// given; the store's token otherwise.
    ///
    /// The login runs while the request that met the `401` waits (at
    /// connect, the `initialize` request), so raise
    /// [`with_startup_timeout`](Server::with_startup_timeout) to cover a user at a
    /// browser.
    pub fn with_oauth(mut self, oauth: super::oauth::OAuth) -> Server {
        if matches!(self.transport, Transport::Http { .. }) {
            self.oauth = Some(oauth);
        }
        self
    }

    /// How long one request (a `tools/list` page, a `tools/call`, a `ping`;
    /// the handshake has [`with_startup_timeout`](Server::with_startup_timeout)) may take before it is abandoned, the server is told
    /// (`notifications/cancelled`) and the call fails. Default 60 s.
    ///
    /// The time counts from the moment the request is made until its
    /// answer is read: writing the request is part of it (a stdio server
    /// that stops reading its stdin cannot stretch it), and nothing the
    /// server sends meanwhile extends it, progress notifications included
    /// (the spec allows either; a fixed bound is the one a host can rely
    /// on). A flood of notifications does not delay the answer: see the
    /// [module docs](super#timeouts-cancellation-and-faults).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Server {
        self.timeout = timeout;
        self
    }

    /// How long the `initialize` handshake may take, start-up included
    /// (`npx` and `uvx` may download first). Default 60 s.
    pub fn with_startup_timeout(mut self, timeout: Duration) -> Server {
        self.startup_timeout = timeout;
        self
    }

    /// A one-line description for the `<available_mcps>` block, instead of
    /// the one derived from the server's `instructions` or `serverInfo`.
    pub fn with_description(mut self, text: impl Into<String>) -> Server {
        self.description = Some(text.into());
        self
    }

    /// Put this server's tools in the sub-agent-only pool (reachable by
    /// [`Persona`](crate::subagent::Persona)s that name them, never offered to the
    /// parent model). Default: model-visible.
    pub fn with_sub_agent_only(mut self, yes: bool) -> Server {
        self.sub_agent_only = yes;
        self
    }

    /// Add this server's tools as deferred tools (`true`) or as ordinary
    /// ones (`false`), whatever the registry's default
    /// ([`Registry::defer_tools`](super::Registry::defer_tools)) says. A
    /// deferred tool is sent only once the model found it with a search,
    /// and only while the deferred tools pass the agent's
    /// [`ToolSearch`](crate::tool_search::ToolSearch) threshold; see
    /// [Deferred tools](super#deferred-tools). A sub-agent-only server's
    /// tools are never deferred.
    ///
    /// ```
    /// use pikuri::mcp::Server;
    /// let big = Server::http("http://127.0.0.1:3001/mcp").with_deferred(true);
    /// assert_eq!(big.is_deferred(), Some(true));
    /// assert_eq!(Server::http("http://127.0.0.1:3001/mcp").is_deferred(), None);
    /// ```
    #[cfg(feature = "tool-search")]
    pub fn with_deferred(mut self, yes: bool) -> Server {
        self.deferred = Some(yes);
        self
    }

    /// A server that fails to connect at build is logged and left out,
    /// instead of failing [`Configurator::build`](crate::Configurator::build).
    pub fn with_optional(mut self, yes: bool) -> Server {
        self.optional = yes;
        self
    }

    /// How many times a stdio server that exited is started again, on the
    /// next call (default 1); after that its tools answer that it is down.
    pub fn with_restarts(mut self, n: u32) -> Server {
        self.restarts = n;
        self
    }

    /// The largest accepted message: one stdio line or one SSE event
    /// (default 4 MiB). Longer lines are logged and skipped.
    pub fn with_max_message_bytes(mut self, bytes: usize) -> Server {
        self.max_message = bytes.max(1024);
        self
    }

    /// How long a stdio server gets to exit after its stdin is closed before
    /// its process group is sent `SIGTERM`, then `SIGKILL` (default 2 s).
    ///
    /// On Linux, the server's descendants that left its process group
    /// (`setsid`) get the same signals, if they are found: their parent
    /// must still be running when the shutdown begins (a double-forked
    /// daemon, adopted by init, is not found). Elsewhere only the group is
    /// signalled.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Server {
        self.shutdown_grace = grace;
        self
    }

    /// Who answers when the server asks the user for input (see
    /// [`InputProvider`]). Without one (the default), every input request
    /// is refused and no elicitation capability is declared.
    pub fn with_input_provider(mut self, provider: impl InputProvider + 'static) -> Server {
        self.input = Some(Arc::new(provider));
        self
    }

    /// The longest wait for the [`InputProvider`]'s answer (default 5
    /// minutes); then the server is answered `cancel`.
    pub fn with_input_timeout(mut self, timeout: Duration) -> Server {
        self.input_timeout = timeout;
        self
    }

    /// Offer the model a `<server>__read_resource` tool that reads one of
    /// the server's resources by URI, and list the resources in the
    /// tool's description (default: off; resources are the host's through
    /// [`Client::read_resource`](super::Client::read_resource)).
    pub fn with_resource_tool(mut self, yes: bool) -> Server {
        self.resource_tool = yes;
        self
    }

    /// Whether an input provider is set.
    pub fn has_input_provider(&self) -> bool {
        self.input.is_some()
    }

    /// The credentials this server is given: its bearer token, its URL's
    /// password and secret-looking query values (`?api_key=...`), its
    /// environment values and arguments that look secret (see
    /// [`Server::with_env`], [`Server::stdio`]).
    pub(super) fn credentials(&self) -> Vec<String> {
        match &self.transport {
            Transport::Http { url, bearer } => {
                let mut found: Vec<String> = bearer.iter().cloned().collect();
                // The user info's password, and secret-looking query values.
                let url = url.split('#').next().unwrap_or_default();
                let rest = url.split_once("://").map_or(url, |(_, r)| r);
                let (before, query) = rest.split_once('?').unwrap_or((rest, ""));
                let authority = before.split('/').next().unwrap_or_default();
                if let Some((user, _)) = authority.rsplit_once('@') {
                    found.extend(user.split_once(':').map(|(_, p)| p.to_string()));
                }
                found.extend(
                    query
                        .split('&')
                        .filter_map(|pair| pair.split_once('='))
                        .filter(|(k, v)| secret(k, v))
                        .map(|(_, v)| v.to_string()),
                );
                found
            }
            Transport::Stdio { env, args, .. } => env
                .iter()
                .filter(|(k, v)| secret(&k.to_string_lossy(), &v.to_string_lossy()))
                .map(|(_, v)| v.to_string_lossy().into_owned())
                .chain(secret_args(args))
                .collect(),
        }
    }

    /// Whether this is a stdio server.
    pub fn is_stdio(&self) -> bool {
        matches!(self.transport, Transport::Stdio { .. })
    }

    /// The per-request timeout.
    pub fn request_timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether the tools go to the sub-agent-only pool.
    pub fn is_sub_agent_only(&self) -> bool {
        self.sub_agent_only
    }

    /// Whether the tools are deferred as set by [`Server::with_deferred`];
    /// `None` when the registry's default decides.
    #[cfg(feature = "tool-search")]
    pub fn is_deferred(&self) -> Option<bool> {
        self.deferred
    }
}

/// Whether `value`, named `name`, looks secret: a name with `TOKEN`,
/// `KEY`, `SECRET`, `PASSWORD`, `PASSWD`, `AUTH` or `CREDENTIAL` in it (any
/// case), and a value of 8 characters or more.
fn secret(name: &str, value: &str) -> bool {
    const NAMES: [&str; 7] = [
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "AUTH",
        "CREDENTIAL",
    ];
    let name = name.to_ascii_uppercase();
    NAMES.iter().any(|n| name.contains(n)) && value.len() >= 8
}

/// The values of secret-looking options among `args`: `--name=VALUE`, and
/// `--name VALUE` (the next argument, unless it is an option itself).
fn secret_args(args: &[OsString]) -> Vec<String> {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut found = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        let Some(option) = arg.strip_prefix('-') else {
            continue;
        };
        match option.split_once('=') {
            Some((name, value)) if secret(name, value) => found.push(value.to_string()),
            Some(_) => {}
            None => {
                if let Some(next) = args.get(i + 1)
                    && !next.starts_with('-')
                    && secret(option, next)
                {
                    found.push(next.clone());
                }
            }
        }
    }
    found
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Server");
        match &self.transport {
            Transport::Stdio {
                command, args, cwd, ..
            } => {
                let hidden = Secrets::new(secret_args(args));
                let args: Vec<String> = args
                    .iter()
                    .map(|a| hidden.redact(&a.to_string_lossy()).into_owned())
                    .collect();
                d.field("command", command).field("args", &args);
                if let Some(cwd) = cwd {
                    d.field("cwd", cwd);
                }
            }
            Transport::Http { url, bearer } => {
                d.field("url", &redact_url(url));
                if bearer.is_some() {
                    d.field("bearer", &"<redacted>");
                }
                if let Some(oauth) = &self.oauth {
                    d.field("oauth", oauth);
                }
            }
        }
        d.field("timeout", &self.timeout)
            .field("sub_agent_only", &self.sub_agent_only)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_tokens_passwords_and_secret_looking_values() {
        let http = Server::http(
            "https://me:pa55word!@h/mcp?api_key=k3y-12345678&page=12345678&token=short",
        )
        .with_bearer_token("tok-1");
        assert_eq!(http.credentials(), ["tok-1", "pa55word!", "k3y-12345678"]);
        let stdio = Server::stdio("x", [""; 0])
            .with_env("GITHUB_PERSONAL_ACCESS_TOKEN", "ghp_0123456789")
            .with_env("TZ", "Europe/Amsterdam")
            .with_env("API_KEY", "short");
        assert_eq!(stdio.credentials(), ["ghp_0123456789"]);
        let args = Server::stdio(
            "x",
            [
                "--api-key",
                "k3y-12345678",
                "--token=t0k-12345678",
                "--key",
                "--verbose",
            ],
        );
        assert_eq!(args.credentials(), ["k3y-12345678", "t0k-12345678"]);
    }
}
