//! OAuth 2.1 for remote MCP servers: the host-facing configuration
//! ([`OAuth`], [`Browser`], the stores) and the per-connection state
//! ([`Session`]) that `http.rs` asks for a token and tells of a 401. The
//! flow is described once, on [`OAuth`]; `flow.rs` runs it over the network
//! (`redirect.rs` is the loopback redirect the browser comes back to),
//! `pkce.rs` holds the byte-level pieces (SHA-256, base64url, forms).

mod config;
mod flow;
mod pkce;
mod redirect;
mod store;

use std::time::Duration;

use parking_lot::Mutex;

pub(super) use config::AuthError;
pub use config::{Browser, OAuth, SystemBrowser};
pub use store::{FileTokenStore, MemoryTokenStore, TokenStore, Tokens};

/// The OAuth state of one HTTP connection: the tokens in use, and one
/// login at a time.
pub(super) struct Session {
    config: OAuth,
    /// The MCP endpoint's URL: the store's key.
    url: String,
    tokens: Mutex<Option<Tokens>>,
    /// Held during a refresh or login, so concurrent 401s run one.
    login: Mutex<()>,
}

impl Session {
    pub(super) fn new(config: OAuth, url: &str) -> Session {
        let stored = match config.store.load(url) {
            Ok(t) => t,
            Err(e) => {
                log::warn!(target: "pikuri::mcp", "OAuth: the token store failed to load: {e}");
                None
            }
        };
        Session {
            config,
            url: url.to_string(),
            tokens: Mutex::new(stored),
            login: Mutex::new(()),
        }
    }

    /// The access token to send, if any; one about to expire is refreshed
    /// first (by one worker: the others send the old one and, at worst,
    /// meet a 401).
    pub(super) fn bearer(&self) -> Option<String> {
        let held = self.tokens.lock().clone()?;
        if held.refresh_token.is_some()
            && held.expires_within(Duration::from_secs(30))
            && let Some(_login) = self.login.try_lock()
        {
            match flow::refresh(&self.config, &held) {
                Ok(fresh) => {
                    let token = fresh.access_token.clone();
                    self.keep(fresh);
                    return Some(token);
                }
                Err(e) => log::info!(target: "pikuri::mcp", "{e}"),
            }
        }
        Some(held.access_token)
    }

    /// The server answered 401 to a request that carried `sent`: refresh
    /// or log in, unless another worker did since. `challenge` is the
    /// `WWW-Authenticate` header; `closed` says the connection was closed.
    pub(super) fn renew(
        &self,
        sent: Option<&str>,
        challenge: Option<&str>,
        closed: &dyn Fn() -> bool,
    ) -> Result<(), AuthError> {
        let _login = self.login.lock();
        let held = self.tokens.lock().clone();
        // Another worker renewed the token while this request was out.
        if held.as_ref().map(|t| t.access_token.as_str()) != sent && held.is_some() {
            return Ok(());
        }
        if let Some(old) = held.filter(|t| t.refresh_token.is_some() && sent.is_some()) {
            match flow::refresh(&self.config, &old) {
                Ok(fresh) => {
                    self.keep(fresh);
                    return Ok(());
                }
                Err(e) => {
                    log::info!(target: "pikuri::mcp", "{e}; logging in again");
                }
            }
        }
        let fresh = flow::login(&self.config, &self.url, challenge, closed)?;
        self.keep(fresh);
        Ok(())
    }

    /// The tokens held, to redact from what the server sends (it may echo
    /// them); empty without any.
    pub(super) fn secrets(&self) -> crate::util::Secrets {
        let held = self.tokens.lock();
        crate::util::Secrets::new(held.iter().flat_map(|t| {
            [Some(&t.access_token), t.refresh_token.as_ref()]
                .into_iter()
                .flatten()
        }))
    }

    fn keep(&self, tokens: Tokens) {
        if let Err(e) = self.config.store.save(&self.url, &tokens) {
            log::warn!(target: "pikuri::mcp", "OAuth: the token store failed to save: {e}");
        }
        *self.tokens.lock() = Some(tokens);
    }
}
