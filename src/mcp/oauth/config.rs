//! [`OAuth`], the host's configuration of a login, with its [`Browser`]
//! seam; [`AuthError`], why a login failed.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::store::{MemoryTokenStore, TokenStore};

/// Opens the authorization URL for the user: the seam where a host puts
/// its browser, and a test its own HTTP client.
///
/// Called on an HTTP worker thread; the login waits for the redirect to
/// the loopback listener after it returns, so `open` should not block
/// until the user is done. An `Err` fails the login.
///
/// Closures `Fn(&str) -> io::Result<()>` are browsers.
///
/// ```
/// use pikuri::mcp::{Browser, OAuth};
/// let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
/// let log = seen.clone();
/// let browser = move |url: &str| {
///     log.lock().unwrap().push(url.to_string());
///     Ok(())
/// };
/// browser.open("http://127.0.0.1:9/authorize?state=x")?;
/// assert_eq!(seen.lock().unwrap().len(), 1);
/// let oauth = OAuth::new().with_browser(browser);
/// # let _ = oauth;
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait Browser: Send + Sync {
    /// Show `url` to the user.
    ///
    /// # Errors
    ///
    /// Whatever stops it; the login fails with that text.
    fn open(&self, url: &str) -> io::Result<()>;
}

impl<F> Browser for F
where
    F: Fn(&str) -> io::Result<()> + Send + Sync,
{
    fn open(&self, url: &str) -> io::Result<()> {
        self(url)
    }
}

/// The default [`Browser`]: prints the URL on stderr and asks the desktop
/// to open it (`xdg-open` on Linux and the BSDs, `open` on macOS,
/// `rundll32 url.dll,FileProtocolHandler` on Windows); a missing opener is
/// not an error, the printed URL is enough.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemBrowser;

impl Browser for SystemBrowser {
    fn open(&self, url: &str) -> io::Result<()> {
        eprintln!("To authorize, open this URL in a browser:\n  {url}");
        let (program, args) = opener(std::env::consts::OS, url);
        let spawned = std::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Ok(mut child) = spawned {
            // Reaped on a thread so no zombie is left; its status is moot.
            std::thread::spawn(move || child.wait());
        }
        Ok(())
    }
}

/// The program that opens `url` on `os` (`std::env::consts::OS`), and its
/// arguments: the URL always one argument of its own, given to no shell.
/// (Windows' `cmd /C start "" <url>` would split the URL at each `&`,
/// which every authorization URL has, and run what follows: the endpoint
/// comes from the server's metadata.)
fn opener<'a>(os: &str, url: &'a str) -> (&'static str, Vec<&'a str>) {
    match os {
        "macos" => ("open", vec![url]),
        "windows" => ("rundll32", vec!["url.dll,FileProtocolHandler", url]),
        _ => ("xdg-open", vec![url]),
    }
}

/// How to log in to an MCP server that asks for OAuth 2.1, as the MCP
/// authorization spec (2025-06-18 to 2026-07-28) asks of a client: the
/// client registration, the browser, where tokens are kept and the bounds.
///
/// # Flow
///
/// A server declared with [`Server::with_oauth`](crate::mcp::Server::with_oauth) is first
/// called with the access token its [`TokenStore`] holds, if any. When it
/// answers `401`:
///
/// 1. **Discovery.** The `resource_metadata` URL of the
///    `WWW-Authenticate: Bearer` challenge, or else the well-known URLs
///    (`/.well-known/oauth-protected-resource` + the endpoint's path, then
///    at the root) give the protected resource metadata (RFC 9728); its
///    `resource` must be the server's URL or a parent of it. Its first
///    authorization server's metadata is read from the RFC 8414 and OpenID
///    Connect well-known URLs in the spec's order; its `issuer` must be
///    exactly the one the URL was made from, and it must offer PKCE `S256`.
///    Its issuer and endpoints must be `https` (plain `http` only on a
///    loopback host), as the spec asks.
/// 2. **Client.** The host's client id ([`OAuth::with_client_id`]), or one from
///    dynamic client registration (RFC 7591) when the server offers it.
/// 3. **Refresh** when a refresh token is held; otherwise, or when the
///    refresh is refused:
/// 4. **Authorization code with PKCE** (RFC 7636, `S256`): a listener on
///    `127.0.0.1` (port 0 unless [`OAuth::with_redirect_port`] says) takes the
///    redirect; the URL to open goes to the [`Browser`]. The answer must
///    carry the `state` sent, and its `iss` (RFC 9207) must be the issuer
///    when present (and be present when the metadata promises it). The
///    code is exchanged with the verifier and `resource` (RFC 8707, sent in
///    both requests).
/// 5. The request is sent again, once, with the new token.
///
/// A token that is a JWT naming audiences (`aud`) must name the server; a
/// server that refuses the token it just got ends the request. Requests
/// to the authorization server follow no redirects and are bounded by
/// [`OAuth::with_request_timeout`]; the wait for the browser by
/// [`OAuth::with_login_timeout`] (and by [`Server::with_startup_timeout`] or
/// [`Server::with_request_timeout`](crate::mcp::Server::with_request_timeout) for the request waiting);
/// the loopback listener serves one connection at a time and gives each
/// 5 s to send its request, so a silent or trickling local peer cannot
/// hold up the browser's callback. Every failure is an [`Error::Http`](crate::Error::Http) with status
/// 401 (so [`ErrorKind::Auth`](crate::ErrorKind::Auth)) whose message
/// starts with `OAuth:` and says what went wrong, never with a token.
///
/// [`Server::with_startup_timeout`]: crate::mcp::Server::with_startup_timeout
///
/// # Not supported
///
/// Client ID metadata documents (a URL as `client_id`; give a registered
/// id or rely on dynamic registration instead), step-up authorization on a
/// `403 insufficient_scope`, token revocation, and any flow but the
/// authorization code (no client credentials, no device flow). Dynamic
/// registration asks for a public client (`token_endpoint_auth_method:
/// none`); a confidential client's secret ([`OAuth::with_client_secret`]) is
/// sent in the token request's body.
///
/// # Secrets
///
/// Tokens are sent only in the `Authorization` header of requests to the
/// server they were issued for, never in a URL. They and the client secret
/// never show in `Debug` ([`Tokens`](crate::mcp::Tokens), [`OAuth`]), in a log line, an event
/// or an error, and are replaced by `<redacted>` in everything the server
/// sends (it may echo them). The [`FileTokenStore`](crate::mcp::FileTokenStore) keeps them in a file
/// only its owner may read.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use pikuri::mcp::{FileTokenStore, OAuth, Server};
///
/// let server = Server::http("http://127.0.0.1:3001/mcp").with_oauth(
///     OAuth::new()
///         .with_client_name("my-app")
///         .with_scope("mcp:tools")
///         .with_store(FileTokenStore::new("/tmp/my-app-tokens.json"))
///         .with_login_timeout(Duration::from_secs(120)),
/// );
/// assert!(format!("{server:?}").contains("oauth"));
/// ```
#[derive(Clone)]
#[must_use = "an OAuth does nothing until given to Server::oauth"]
pub struct OAuth {
    pub(super) client_id: Option<String>,
    pub(super) client_secret: Option<String>,
    pub(super) client_name: String,
    pub(super) scope: Option<String>,
    pub(super) redirect_port: u16,
    pub(super) browser: Arc<dyn Browser>,
    pub(super) store: Arc<dyn TokenStore>,
    pub(super) login_timeout: Duration,
    pub(super) request_timeout: Duration,
}

impl Default for OAuth {
    fn default() -> OAuth {
        OAuth::new()
    }
}

impl OAuth {
    /// Dynamic client registration, the [`SystemBrowser`], a
    /// [`MemoryTokenStore`], a 5-minute login and 10-second requests.
    pub fn new() -> OAuth {
        OAuth {
            client_id: None,
            client_secret: None,
            client_name: "pikuri".into(),
            scope: None,
            redirect_port: 0,
            browser: Arc::new(SystemBrowser),
            store: Arc::new(MemoryTokenStore::new()),
            login_timeout: Duration::from_secs(300),
            request_timeout: Duration::from_secs(10),
        }
    }

    /// A client id registered beforehand with the authorization server
    /// (no dynamic registration then). Its redirect URI is
    /// `http://127.0.0.1:<port>/callback`: set the port with
    /// [`with_redirect_port`](OAuth::with_redirect_port) if the registration fixed it.
    pub fn with_client_id(mut self, id: impl Into<String>) -> OAuth {
        self.client_id = Some(id.into());
        self
    }

    /// The secret of [`with_client_id`](OAuth::with_client_id), for a confidential
    /// client (sent in the token request's body).
    pub fn with_client_secret(mut self, secret: impl Into<String>) -> OAuth {
        self.client_secret = Some(secret.into());
        self
    }

    /// The `client_name` given in dynamic registration (default `pikuri`).
    pub fn with_client_name(mut self, name: impl Into<String>) -> OAuth {
        self.client_name = name.into();
        self
    }

    /// The scopes to ask for, space-separated. Default: the `scope` of the
    /// server's challenge, else its metadata's `scopes_supported`, else
    /// none.
    pub fn with_scope(mut self, scope: impl Into<String>) -> OAuth {
        self.scope = Some(scope.into());
        self
    }

    /// The loopback port of the redirect listener (default 0: any free
    /// port).
    pub fn with_redirect_port(mut self, port: u16) -> OAuth {
        self.redirect_port = port;
        self
    }

    /// Who opens the authorization URL (default [`SystemBrowser`]).
    pub fn with_browser(mut self, browser: impl Browser + 'static) -> OAuth {
        self.browser = Arc::new(browser);
        self
    }

    /// Where tokens are kept (default a [`MemoryTokenStore`]).
    pub fn with_store(mut self, store: impl TokenStore + 'static) -> OAuth {
        self.store = Arc::new(store);
        self
    }

    /// How long to wait for the redirect after the browser was asked to
    /// open the URL (default 5 minutes).
    pub fn with_login_timeout(mut self, timeout: Duration) -> OAuth {
        self.login_timeout = timeout;
        self
    }

    /// The bound on each request to the authorization server and the
    /// metadata documents (default 10 s).
    pub fn with_request_timeout(mut self, timeout: Duration) -> OAuth {
        self.request_timeout = timeout;
        self
    }
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("scope", &self.scope)
            .field("redirect_port", &self.redirect_port)
            .field("login_timeout", &self.login_timeout)
            .finish_non_exhaustive()
    }
}

/// Why a login or refresh failed, by cause; each carries one line for the
/// user, without tokens. Crate-private: [`AuthError::into_error`] is the
/// one place it becomes a public [`Error`](crate::Error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::mcp) enum AuthError {
    /// The authorization side could not be reached.
    Unreachable(String),
    /// A request to the authorization side, or the user's login in the
    /// browser, took longer than its bound.
    Timeout(String),
    /// The authorization side answered no: an error status or `error`
    /// answer, or a browser answer that fails a check (state, issuer).
    Refused(String),
    /// An answer a login cannot go on with: metadata missing, malformed,
    /// for another resource or issuer; a token for another audience.
    Unusable(String),
    /// The login could not run on this side: no redirect listener, no
    /// browser, no refresh token, the connection closed meanwhile.
    Local(String),
}

impl AuthError {
    /// The line for the user.
    pub(in crate::mcp) fn message(&self) -> &str {
        match self {
            AuthError::Unreachable(m)
            | AuthError::Timeout(m)
            | AuthError::Refused(m)
            | AuthError::Unusable(m)
            | AuthError::Local(m) => m,
        }
    }

    /// The same error with `f` applied to its line (redaction).
    pub(in crate::mcp) fn map(self, f: impl FnOnce(String) -> String) -> AuthError {
        match self {
            AuthError::Unreachable(m) => AuthError::Unreachable(f(m)),
            AuthError::Timeout(m) => AuthError::Timeout(f(m)),
            AuthError::Refused(m) => AuthError::Refused(f(m)),
            AuthError::Unusable(m) => AuthError::Unusable(f(m)),
            AuthError::Local(m) => AuthError::Local(f(m)),
        }
    }

    /// The public error of a request to the MCP server at `url` that met
    /// this: whatever the cause, a `401` whose message starts `OAuth: `
    /// ([`ErrorKind::Auth`](crate::ErrorKind::Auth)): the server refused
    /// the request, and a login is what it takes.
    pub(in crate::mcp) fn into_error(self, url: Option<String>) -> crate::Error {
        let message = self.to_string();
        match url {
            Some(url) => crate::Error::Http {
                status: 401,
                message,
                url,
            },
            None => crate::Error::Transport {
                url: None,
                source: message.into(),
            },
        }
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OAuth: {}", self.message())
    }
}

/// The result of a step of the login (`flow.rs`, `redirect.rs`).
pub(super) type Result<T> = std::result::Result<T, AuthError>;

/// An answer a login cannot go on with ([`AuthError::Unusable`]).
pub(super) fn unusable<T>(message: impl Into<String>) -> Result<T> {
    Err(AuthError::Unusable(message.into()))
}

/// The authorization side said no ([`AuthError::Refused`]).
pub(super) fn refused<T>(message: impl Into<String>) -> Result<T> {
    Err(AuthError::Refused(message.into()))
}

/// The login cannot run on this side ([`AuthError::Local`]).
pub(super) fn local<T>(message: impl Into<String>) -> Result<T> {
    Err(AuthError::Local(message.into()))
}

#[cfg(test)]
mod tests {
    use super::opener;

    /// No opener hands the URL to a shell: the URL is one argument, whole,
    /// `&` and all, on every system.
    #[test]
    fn the_url_is_one_argument_and_no_shell_reads_it() {
        let url = "https://as.example/authorize?a=1&b=2&calc.exe";
        for os in ["linux", "macos", "windows", "freebsd"] {
            let (program, args) = opener(os, url);
            assert!(
                !["cmd", "sh", "bash", "powershell"].contains(&program),
                "{os}"
            );
            assert_eq!(args.last(), Some(&url), "{os}");
            assert!(
                args[..args.len() - 1].iter().all(|a| !a.contains(url)),
                "{os}"
            );
        }
        assert_eq!(opener("windows", url).0, "rundll32");
    }
}
