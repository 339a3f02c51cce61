//! The public configuration of the protocol layer: [`ChatTransport`] (where
//! a chat goes) and [`HttpConfig`] (how the client behaves).

use std::fmt;
use std::time::Duration;

use super::settings::ModelSettings;
use crate::Api;
use crate::serde_macros::json_struct;

/// Everything that must travel together so a chat always reaches the same
/// model on the same server: model, provider hint, API base, API key and
/// context window.
///
/// A value type: `Clone`, `PartialEq` (a model switch is detected by
/// structural difference), and `with_*` methods that return a changed copy.
/// `Debug` and serialization never show the API key.
///
/// # Examples
///
/// ```
/// use pikuri::ChatTransport;
/// let t = ChatTransport::new("qwen3")
///     .with_api_base("http://127.0.0.1:8080/v1")
///     .with_api_key("sk-secret");
/// assert_eq!(t.model(), Some("qwen3"));
/// assert!(!format!("{t:?}").contains("sk-secret"));
/// assert_ne!(t, t.clone().with_model("llama3"));
/// ```
///
/// # Environment
///
/// Nothing is read from the environment unless you call
/// [`from_env`](ChatTransport::from_env). When no API base is set, requests go
/// to `https://api.openai.com/v1` (logged at `info` once per client).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct ChatTransport {
    api: Api,
    model: Option<String>,
    provider: Option<String>,
    api_base: Option<String>,
    api_key: Option<String>,
    context_window: Option<u64>,
    /// Automatic prompt-cache breakpoints turned off (Anthropic).
    no_auto_cache: bool,
    /// The model settings of every request on this transport.
    settings: ModelSettings,
    /// The Gemini context cache each request names (`gemini/cache.rs`).
    pub(super) cached_content: Option<String>,
}

json_struct! {
    Serialize, Deserialize for ChatTransport {
        api [default, skip_if = is_default_api],
        model [opt],
        provider [opt],
        api_base [opt],
        api_key [skip],
        context_window [opt],
        no_auto_cache [default, skip_if = is_false],
        settings [default, skip_if = ModelSettings::is_empty],
        cached_content [opt],
    }
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_false(b: &bool) -> bool {
    !*b
}

/// The API base used when a transport names none: OpenAI's, for chat
/// completions and Responses.
pub(crate) const DEFAULT_API_BASE: &str = "https://api.openai.com/v1";

/// The API base used for [`Api::AnthropicMessages`] when a transport names
/// none.
pub(crate) const DEFAULT_ANTHROPIC_BASE: &str = "https://api.anthropic.com/v1";

/// Google's Gemini API base (its `v1beta` version, which has every field
/// pikuri sends).
pub(crate) const DEFAULT_GEMINI_BASE: &str = "https://generativelanguage.googleapis.com/v1beta";

// A plain history written before the `api` field existed reads as chat
// completions, and one on chat completions is written as before.
#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_default_api(api: &Api) -> bool {
    *api == Api::ChatCompletions
}

/// Why `url` cannot be an endpoint of this build, in a sentence naming
/// `what` it is and the fix: no `http://` or `https://` scheme (ureq would
/// say `http: invalid format`), no host, or `https://` without the
/// `rustls` feature (ureq would say `TlsRequired`). The one check behind
/// [`ChatTransport::check`] and the MCP HTTP transport.
pub(crate) fn check_http_url(what: &str, url: &str) -> Result<(), String> {
    check_http_url_for(what, url, cfg!(feature = "rustls"))
}

/// [`check_http_url`] for a build with or without TLS (so the message of
/// either build is tested in both).
fn check_http_url_for(what: &str, url: &str, tls: bool) -> Result<(), String> {
    let shown = crate::util::excerpt(url, 200);
    let lower = url.trim_start().to_ascii_lowercase();
    let rest = if let Some(rest) = lower.strip_prefix("http://") {
        rest
    } else if let Some(rest) = lower.strip_prefix("https://") {
        if !tls {
            return Err(tls_missing(what, &shown));
        }
        rest
    } else if let Some((scheme, _)) = lower.split_once("://") {
        return Err(format!(
            "{what} `{shown}` has the scheme `{}`: only http:// and https:// are supported",
            crate::util::excerpt(scheme, 20)
        ));
    } else {
        return Err(format!(
            "{what} `{shown}` has no scheme: write `http://{}` (or `https://` for TLS)",
            crate::util::excerpt(url.trim(), 200)
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(format!("{what} `{shown}` has no host"));
    }
    Ok(())
}

/// Whether an API base looks like Ollama's: its port (11434) or an `/api`
/// path segment. (The probe also reads a model list's shape.)
pub(crate) fn ollama_base(base: &str) -> bool {
    let rest = base.split_once("://").map_or(base, |(_, r)| r);
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    authority.ends_with(":11434") || path.split('/').any(|seg| seg == "api")
}

/// The message for an `https://` URL in a build without TLS.
fn tls_missing(what: &str, url: &str) -> String {
    format!(
        "{what} `{url}` needs TLS, which this build lacks: build pikuri with the `rustls` \
         feature (on by default; `default-features = false` turns it off), or use an \
         http:// URL"
    )
}

impl ChatTransport {
    /// A transport for `model`, with no base (OpenAI's), no key and no cap.
    pub fn new(model: impl Into<String>) -> ChatTransport {
        ChatTransport {
            model: Some(model.into()),
            ..ChatTransport::default()
        }
    }

    /// A transport from `OPENAI_BASE_URL`, `OPENAI_API_KEY` and
    /// `OPENAI_MODEL`; unset or empty variables leave the field unset. The
    /// variables used are logged at `debug` (the key's value never is).
    ///
    /// The API: `PIKURI_API` names it (`chat` or `chat_completions`,
    /// `responses` or `openai_responses`, both with the `OPENAI_*`
    /// variables; `anthropic` or `anthropic_messages`). Unset, it is
    /// [`Api::AnthropicMessages`] when `ANTHROPIC_API_KEY` or
    /// `ANTHROPIC_BASE_URL` is set and neither `OPENAI_BASE_URL` nor
    /// `OPENAI_API_KEY` is, else chat completions. Anthropic reads the
    /// variables its SDK reads: `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`
    /// (the server's root, as the SDK takes it, e.g. `http://127.0.0.1:8080`
    /// for llama.cpp: the API base is that root with `/v1` appended, unless
    /// it already ends with it; unset, `https://api.anthropic.com/v1`), and
    /// `ANTHROPIC_MODEL` for the model. `ANTHROPIC_BASE_URL` has that one
    /// meaning wherever pikuri reads it (the chat example too); an API base
    /// given in code ([`with_api_base`](ChatTransport::with_api_base)) is
    /// used as given.
    ///
    /// Gemini ([`Api::Gemini`]: `PIKURI_API=gemini`, or unset when
    /// `GEMINI_API_KEY` or `GOOGLE_GEMINI_BASE_URL` is set and none of the
    /// OpenAI and Anthropic variables is) reads what the `google-genai`
    /// SDK reads: the key from `GOOGLE_API_KEY`, else `GEMINI_API_KEY`;
    /// the server's root from `GOOGLE_GEMINI_BASE_URL` (the API base is
    /// that root with `/v1beta` appended, unless it already ends with a
    /// version; unset, `https://generativelanguage.googleapis.com/v1beta`);
    /// and `GEMINI_MODEL` for the model.
    ///
    /// Without `OPENAI_BASE_URL` the transport talks to OpenAI's hosted API
    /// (`https://api.openai.com/v1`), which needs `OPENAI_API_KEY`; without
    /// `OPENAI_MODEL` the server's only model is taken at
    /// [`build`](crate::Configurator::build).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) naming the
    /// variables when neither `OPENAI_BASE_URL` nor `OPENAI_API_KEY` is set:
    /// an empty environment is a setup mistake, not a wish to reach
    /// OpenAI without a key (which would fail later, at the first request,
    /// with an error about the key or the model instead).
    ///
    /// ```
    /// # // The variables are the process's: this example only reads them.
    /// use pikuri::{ChatTransport, ErrorKind};
    /// match ChatTransport::from_env() {
    ///     Ok(t) => assert!(t.api_base().is_some() || t.has_api_key()),
    ///     Err(e) => {
    ///         assert_eq!(e.kind(), ErrorKind::InvalidInput);
    ///         assert!(e.to_string().contains("OPENAI_BASE_URL"));
    ///     }
    /// }
    /// ```
    pub fn from_env() -> crate::Result<ChatTransport> {
        ChatTransport::from_vars(|name| std::env::var(name).ok())
    }

    /// [`from_env`](ChatTransport::from_env) over any source of variables.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> crate::Result<ChatTransport> {
        // One body for every source (the tests' maps, the environment):
        // monomorphised, each source would carry its own copy.
        ChatTransport::from_source(&|name: &str| var(name).filter(|v| !v.trim().is_empty()))
    }

    /// [`from_vars`](ChatTransport::from_vars), unset and blank variables
    /// already `None`: the API, then that API's variables, read the way
    /// its SDK reads them.
    fn from_source(var: &dyn Fn(&str) -> Option<String>) -> crate::Result<ChatTransport> {
        let api = match var("PIKURI_API")
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            None => {
                let anthropic =
                    var("ANTHROPIC_API_KEY").is_some() || var("ANTHROPIC_BASE_URL").is_some();
                let openai = var("OPENAI_API_KEY").is_some() || var("OPENAI_BASE_URL").is_some();
                let gemini =
                    var("GEMINI_API_KEY").is_some() || var("GOOGLE_GEMINI_BASE_URL").is_some();
                if anthropic && !openai {
                    Api::AnthropicMessages
                } else if gemini && !openai && !anthropic {
                    Api::Gemini
                } else {
                    Api::ChatCompletions
                }
            }
            Some("chat" | "chat_completions") => Api::ChatCompletions,
            Some("responses" | "openai_responses") => Api::OpenAiResponses,
            Some("anthropic" | "anthropic_messages") => Api::AnthropicMessages,
            Some("gemini") => Api::Gemini,
            Some(other) => {
                return Err(crate::Error::InvalidInput(format!(
                    "PIKURI_API `{other}` is not an API: use chat, responses, anthropic or gemini"
                )));
            }
        };
        // Per API: the provider hint, the API base, the model, the key,
        // the names the debug line gives them, and what to set when
        // neither a base nor a key is.
        let (provider, api_base, model, api_key, names, missing) = match api {
            Api::AnthropicMessages => (
                "anthropic",
                // The SDK's base is the server's root; pikuri's ends with
                // the version, like OpenAI's.
                var("ANTHROPIC_BASE_URL").map(|b| {
                    let b = b.trim().trim_end_matches('/');
                    if b.ends_with("/v1") {
                        b.to_string()
                    } else {
                        format!("{b}/v1")
                    }
                }),
                var("ANTHROPIC_MODEL"),
                var("ANTHROPIC_API_KEY"),
                [
                    "ANTHROPIC_BASE_URL",
                    "ANTHROPIC_MODEL",
                    "ANTHROPIC_API_KEY=",
                ],
                "set ANTHROPIC_BASE_URL to your server's root (e.g. http://127.0.0.1:8080 for \
                 llama.cpp), or ANTHROPIC_API_KEY for Anthropic's hosted API; ANTHROPIC_MODEL \
                 picks the model",
            ),
            Api::Gemini => (
                "gemini",
                // The SDK's base is the server's root, and it appends the
                // version.
                var("GOOGLE_GEMINI_BASE_URL").map(|b| {
                    let b = b.trim().trim_end_matches('/');
                    let last = b.rsplit('/').next().unwrap_or("");
                    let versioned = last.starts_with('v')
                        && last[1..].starts_with(|c: char| c.is_ascii_digit());
                    if versioned {
                        b.to_string()
                    } else {
                        format!("{b}/v1beta")
                    }
                }),
                var("GEMINI_MODEL"),
                var("GOOGLE_API_KEY").or_else(|| var("GEMINI_API_KEY")),
                ["GOOGLE_GEMINI_BASE_URL", "GEMINI_MODEL", "API key "],
                "set GEMINI_API_KEY (or GOOGLE_API_KEY) for Google's hosted API, or \
                 GOOGLE_GEMINI_BASE_URL to your server's root; GEMINI_MODEL picks the model",
            ),
            _ => (
                "openai",
                var("OPENAI_BASE_URL"),
                var("OPENAI_MODEL"),
                var("OPENAI_API_KEY"),
                ["OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY="],
                "set OPENAI_BASE_URL to your server's API base (e.g. http://127.0.0.1:8080/v1 \
                 for llama.cpp, http://127.0.0.1:11434/v1 for Ollama), or OPENAI_API_KEY for \
                 OpenAI's hosted API; OPENAI_MODEL picks the model",
            ),
        };
        let [base_name, model_name, key_name] = names;
        log::debug!(
            "transport from env: {base_name}={api_base:?} {model_name}={model:?} {key_name}{}",
            if api_key.is_some() { "set" } else { "unset" }
        );
        if api_base.is_none() && api_key.is_none() {
            return Err(crate::Error::InvalidInput(format!(
                "no endpoint in the environment: {missing}"
            )));
        }
        Ok(ChatTransport {
            api,
            model,
            provider: Some(provider.to_string()),
            api_base,
            api_key,
            ..ChatTransport::default()
        })
    }

    /// Whether this transport can be used by this build: its API base
    /// (OpenAI's when none is set) is an `http://` or `https://` URL with
    /// a host, and `https://` needs the `rustls` feature.
    /// [`Configurator::build`](crate::Configurator::build) checks the
    /// transport and every fallback, and
    /// [`Agent::run_loop_with`](crate::Agent::run_loop_with) the one it
    /// switches to.
    ///
    /// ```
    /// use pikuri::{ChatTransport, ErrorKind};
    /// let t = ChatTransport::new("m").with_api_base("127.0.0.1:8080/v1");
    /// let err = t.check().unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidInput);
    /// assert_eq!(
    ///     err.to_string(),
    ///     "invalid input: the API base `127.0.0.1:8080/v1` has no scheme: \
    ///      write `http://127.0.0.1:8080/v1` (or `https://` for TLS)"
    /// );
    /// assert!(ChatTransport::new("m").with_api_base("http://127.0.0.1:8080/v1").check().is_ok());
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) saying what is
    /// wrong and the fix (`build pikuri with the rustls feature` for
    /// `https://` in a build without it).
    pub fn check(&self) -> crate::Result<()> {
        let what = if self.api_base.is_some() {
            "the API base"
        } else {
            "the default API base (no api_base is set)"
        };
        check_http_url(what, self.base_or_default()).map_err(crate::Error::InvalidInput)
    }

    /// The wire format this transport speaks ([`Api::ChatCompletions`]
    /// unless set).
    pub fn api(&self) -> Api {
        self.api
    }
    /// A copy speaking another wire format. The API base is kept; with none
    /// set, [`Api::AnthropicMessages`] goes to `https://api.anthropic.com/v1`
    /// and the others to `https://api.openai.com/v1`.
    #[must_use]
    pub fn with_api(mut self, api: Api) -> ChatTransport {
        self.api = api;
        self
    }

    /// The model id, if set.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }
    /// The provider hint (informational: [`api`](ChatTransport::api)
    /// decides the wire format).
    pub fn provider(&self) -> Option<&str> {
        self.provider.as_deref()
    }
    /// The API base, e.g. `http://127.0.0.1:8080/v1` (see
    /// [`with_api_base`](ChatTransport::with_api_base)).
    pub fn api_base(&self) -> Option<&str> {
        self.api_base.as_deref()
    }
    /// Whether an API key is set (the key itself is only sent, never shown).
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }
    /// The explicit context window, which wins over probing.
    pub fn context_window(&self) -> Option<u64> {
        self.context_window
    }

    /// A copy with another model.
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> ChatTransport {
        self.model = Some(model.into());
        self
    }
    /// A copy with a provider hint.
    #[must_use]
    pub fn with_provider(mut self, provider: impl Into<String>) -> ChatTransport {
        self.provider = Some(provider.into());
        self
    }
    /// A copy with another API base, used as given (a trailing `/` is
    /// removed): the URL the API's paths follow, ending with the version
    /// on every API (`http://127.0.0.1:8080/v1`,
    /// `https://api.anthropic.com/v1`). `ANTHROPIC_BASE_URL` is not an API
    /// base but the server's root, as Anthropic's SDK takes it;
    /// [`from_env`](ChatTransport::from_env) appends the `/v1`. A 404 from
    /// a base without a version segment says the `/v1` may be missing.
    #[must_use]
    pub fn with_api_base(mut self, api_base: impl Into<String>) -> ChatTransport {
        let mut base: String = api_base.into();
        while base.ends_with('/') {
            base.pop();
        }
        self.api_base = Some(base);
        self
    }
    /// A copy with an API key, sent as the transport's [`Api`] asks:
    /// `Authorization: Bearer <key>` for chat completions and Responses,
    /// `x-api-key: <key>` (with `anthropic-version`) for
    /// [`Api::AnthropicMessages`]. Context-window probes of a local server
    /// send it as a bearer token.
    ///
    /// ```
    /// use pikuri::{Api, ChatTransport};
    /// use pikuri::testing::{FakeServer, Reply};
    /// let server = FakeServer::start();
    /// server.push(Reply::text("hi"));
    /// let t = server.transport().with_api(Api::AnthropicMessages).with_api_key("sk-test");
    /// pikuri::Agent::builder(t).build()?.run_loop("hello")?;
    /// let sent = &server.chat_requests()[0];
    /// assert_eq!(sent.header("x-api-key"), Some("sk-test"));
    /// assert_eq!(sent.header("authorization"), None);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    #[must_use]
    pub fn with_api_key(mut self, api_key: impl Into<String>) -> ChatTransport {
        self.api_key = Some(api_key.into());
        self
    }
    /// A copy with automatic prompt-cache breakpoints on (the default) or
    /// off. On [`Api::AnthropicMessages`] pikuri marks the last tool, the
    /// system prompt and the conversation's moving end with `cache_control`
    /// (three of the API's four breakpoints); off, it marks none, and a
    /// host places its own by sending `system` and `tools` as request
    /// fields ([`Configurator::request_field`](crate::Configurator::request_field)),
    /// which replace pikuri's. The other APIs cache without breakpoints.
    ///
    /// ```
    /// use pikuri::{Api, ChatTransport};
    /// let t = ChatTransport::new("claude-sonnet-4-5").with_api(Api::AnthropicMessages);
    /// assert!(t.prompt_caching());
    /// assert!(!t.with_prompt_caching(false).prompt_caching());
    /// ```
    #[must_use]
    pub fn with_prompt_caching(mut self, on: bool) -> ChatTransport {
        self.no_auto_cache = !on;
        self
    }
    /// Whether pikuri places prompt-cache breakpoints (see
    /// [`with_prompt_caching`](ChatTransport::with_prompt_caching)).
    pub fn prompt_caching(&self) -> bool {
        !self.no_auto_cache
    }
    /// A copy with model settings (temperature, token bound, tool choice,
    /// ...) for every request on this transport; an agent's own
    /// ([`Configurator::settings`](crate::Configurator::settings)) override
    /// them field by field. See [`ModelSettings`] for which field each
    /// becomes on each API.
    ///
    /// ```
    /// use pikuri::{ChatTransport, ModelSettings};
    /// let t = ChatTransport::new("qwen3")
    ///     .with_settings(ModelSettings::new().with_temperature(0.0).with_seed(42));
    /// assert_eq!(t.settings().seed(), Some(42));
    /// assert_ne!(t, ChatTransport::new("qwen3"));
    /// ```
    #[must_use]
    pub fn with_settings(mut self, settings: ModelSettings) -> ChatTransport {
        self.settings = settings;
        self
    }
    /// The model settings of this transport (none set by default).
    pub fn settings(&self) -> &ModelSettings {
        &self.settings
    }
    /// A copy with an explicit context window (`None` to probe).
    #[must_use]
    pub fn with_context_window(mut self, context_window: Option<u64>) -> ChatTransport {
        self.context_window = context_window;
        self
    }

    pub(crate) fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    pub(crate) fn base_or_default(&self) -> &str {
        self.api_base.as_deref().unwrap_or(match self.api {
            Api::AnthropicMessages => DEFAULT_ANTHROPIC_BASE,
            Api::ChatCompletions | Api::OpenAiResponses => DEFAULT_API_BASE,
            Api::Gemini => DEFAULT_GEMINI_BASE,
        })
    }

    /// Whether switching from `self` to `other` changes where or what a chat
    /// talks to (the context window alone does not count).
    pub(crate) fn same_endpoint(&self, other: &ChatTransport) -> bool {
        self.api == other.api
            && self.model == other.model
            && self.provider == other.provider
            && self.api_base == other.api_base
            && self.api_key == other.api_key
    }
}

impl fmt::Debug for ChatTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("ChatTransport");
        d.field("api", &self.api)
            .field("model", &self.model)
            .field("provider", &self.provider)
            .field("api_base", &self.api_base)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("context_window", &self.context_window);
        // Shown only when off, so the usual output stays as it was.
        if self.no_auto_cache {
            d.field("prompt_caching", &false);
        }
        if !self.settings.is_empty() {
            d.field("settings", &self.settings);
        }
        if let Some(name) = &self.cached_content {
            d.field("cached_content", name);
        }
        d.finish()
    }
}

impl fmt::Display for ChatTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}",
            self.model.as_deref().unwrap_or("?"),
            self.base_or_default()
        )
    }
}

/// How the HTTP client behaves: timeouts, retries, size limits.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use pikuri::HttpConfig;
/// let cfg = HttpConfig::default().with_max_retries(0).with_read_timeout(Duration::from_secs(30));
/// assert_eq!(cfg.max_retries(), 0);
/// ```
///
/// # Extreme values
///
/// Every setter takes any value without panicking, then or later:
///
/// - A duration of about 30 years or more (`Duration::MAX` included) means
///   *no limit*: the wait is unbounded (a cancel still ends it).
/// - `Duration::ZERO` as a timeout, idle bound or deadline expires at once:
///   requests end in [`Error::Timeout`](crate::Error::Timeout).
/// - `usize::MAX` / `u64::MAX` sizes mean no size limit; `0` rejects every
///   non-empty line or body with [`Error::Protocol`](crate::Error::Protocol).
/// - `u32::MAX` retries retry without end (bounded by a
///   [request deadline](HttpConfig::with_request_deadline) or a cancel).
/// - Backoff arithmetic saturates: a huge base or cap waits "forever", never
///   overflows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    pub(crate) connect_timeout: Duration,
    pub(crate) read_timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) retry_base: Duration,
    pub(crate) retry_cap: Duration,
    pub(crate) max_line_bytes: usize,
    pub(crate) max_body_bytes: u64,
    pub(crate) include_usage: bool,
    pub(crate) probe_timeout: Duration,
    /// `None`: the read timeout.
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) request_deadline: Option<Duration>,
}

impl Default for HttpConfig {
    fn default() -> HttpConfig {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            max_retries: 2,
            retry_base: Duration::from_millis(500),
            retry_cap: Duration::from_secs(30),
            max_line_bytes: 8 * 1024 * 1024,
            max_body_bytes: 64 * 1024 * 1024,
            include_usage: true,
            probe_timeout: Duration::from_secs(2),
            idle_timeout: None,
            request_deadline: None,
        }
    }
}

impl HttpConfig {
    /// Connect timeout (default 10 s).
    #[must_use]
    pub fn with_connect_timeout(mut self, d: Duration) -> HttpConfig {
        self.connect_timeout = d;
        self
    }
    /// Longest wait for any byte of a response: the headers, and each read of
    /// a streamed body (default 300 s; local models can think for minutes).
    /// Also the default [idle bound](HttpConfig::with_idle_timeout) of a
    /// stream.
    #[must_use]
    pub fn with_read_timeout(mut self, d: Duration) -> HttpConfig {
        self.read_timeout = d;
        self
    }
    /// Retries after a 429, 500, 502, 503, 504, 529 or a connection failure
    /// before any response byte (default 2), and after such a status
    /// reported inside a stream before any of its text reached the
    /// listeners (Anthropic's `overloaded_error` event right after its
    /// `200`). Never once a stream's text has.
    #[must_use]
    pub fn with_max_retries(mut self, n: u32) -> HttpConfig {
        self.max_retries = n;
        self
    }
    /// First backoff (default 500 ms), doubled per attempt with jitter.
    #[must_use]
    pub fn with_retry_base(mut self, d: Duration) -> HttpConfig {
        self.retry_base = d;
        self
    }
    /// Longest wait between attempts, including a server's `Retry-After`
    /// (default 30 s).
    #[must_use]
    pub fn with_retry_cap(mut self, d: Duration) -> HttpConfig {
        self.retry_cap = d;
        self
    }
    /// Largest SSE line or event, and largest error body kept (default 8 MiB).
    #[must_use]
    pub fn with_max_line_bytes(mut self, n: usize) -> HttpConfig {
        self.max_line_bytes = n;
        self
    }
    /// Largest response: a non-streamed body, or the total event data of a
    /// stream (default 64 MiB). Past it the run ends with
    /// [`Error::Protocol`](crate::Error::Protocol).
    #[must_use]
    pub fn with_max_body_bytes(mut self, n: u64) -> HttpConfig {
        self.max_body_bytes = n;
        self
    }
    /// Whether streamed requests ask for `stream_options.include_usage`
    /// (default true; turn off for servers that reject the field).
    #[must_use]
    pub fn with_include_usage(mut self, on: bool) -> HttpConfig {
        self.include_usage = on;
        self
    }
    /// Timeout of each context-window probe (default 2 s).
    #[must_use]
    pub fn with_probe_timeout(mut self, d: Duration) -> HttpConfig {
        self.probe_timeout = d;
        self
    }
    /// Longest time a streamed response may go without chat data (default:
    /// the [read timeout](HttpConfig::with_read_timeout)); past it the
    /// request ends in [`Error::Timeout`](crate::Error::Timeout) with this
    /// duration.
    ///
    /// Only a chunk that carries part of the answer (text, reasoning, a tool
    /// call, a finish reason, usage) or `[DONE]` counts: SSE comments,
    /// blank keep-alive lines, `event: ping` and JSON keep-alive objects do
    /// not, so a server that sends only those cannot hold a run forever. A
    /// slow but live model, one token inside the bound each time, is never
    /// cut. A silent socket is also bounded by it (each read waits at most
    /// the smaller of the read timeout and this bound).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use pikuri::{Agent, Error, HttpConfig};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// // A server that only ever sends comments.
    /// server.push(Reply::raw_sse(": ping\n\n".repeat(400)).with_chunk_delay(Duration::from_millis(20)));
    /// let idle = Duration::from_millis(200);
    /// let mut agent = Agent::builder(server.transport())
    ///     .http(HttpConfig::default().with_idle_timeout(idle))
    ///     .streaming(true)
    ///     .build()?;
    /// assert!(matches!(agent.run_loop("hi"), Err(Error::Timeout { after, .. }) if after == idle));
    /// assert_eq!(HttpConfig::default().with_idle_timeout(idle).idle_timeout(), idle);
    /// # Ok::<(), Error>(())
    /// ```
    #[must_use]
    pub fn with_idle_timeout(mut self, d: Duration) -> HttpConfig {
        self.idle_timeout = Some(d);
        self
    }

    /// The longest one chat request may take in all (default: none): from
    /// the first attempt until the answer is read, retries and their waits
    /// included. Past it the request ends in
    /// [`Error::Timeout`](crate::Error::Timeout) with this duration, even
    /// while the server is still sending.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use pikuri::{Agent, Error, HttpConfig};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::hang());
    /// let deadline = Duration::from_millis(200);
    /// let mut agent = Agent::builder(server.transport())
    ///     .http(HttpConfig::default().with_request_deadline(deadline))
    ///     .build()?;
    /// assert!(matches!(agent.run_loop("hi"), Err(Error::Timeout { after, .. }) if after == deadline));
    /// assert_eq!(HttpConfig::default().request_deadline(), None);
    /// # Ok::<(), Error>(())
    /// ```
    #[must_use]
    pub fn with_request_deadline(mut self, d: Duration) -> HttpConfig {
        self.request_deadline = Some(d);
        self
    }

    /// The retry count.
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// The idle bound of a stream: the one set, else the read timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use pikuri::HttpConfig;
    /// let cfg = HttpConfig::default().with_read_timeout(Duration::from_secs(9));
    /// assert_eq!(cfg.idle_timeout(), Duration::from_secs(9));
    /// ```
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout.unwrap_or(self.read_timeout)
    }

    /// The request deadline, if one is set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use pikuri::HttpConfig;
    /// let cfg = HttpConfig::default().with_request_deadline(Duration::from_secs(60));
    /// assert_eq!(cfg.request_deadline(), Some(Duration::from_secs(60)));
    /// ```
    pub fn request_deadline(&self) -> Option<Duration> {
        self.request_deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_messages_name_the_fix() {
        let check = |url: &str, tls: bool| check_http_url_for("the API base", url, tls);
        assert_eq!(check("http://127.0.0.1:8080/v1", false), Ok(()));
        assert_eq!(check("HTTPS://api.example.com/v1", true), Ok(()));
        assert_eq!(
            check("127.0.0.1:8080/v1", true).unwrap_err(),
            "the API base `127.0.0.1:8080/v1` has no scheme: write `http://127.0.0.1:8080/v1` \
             (or `https://` for TLS)"
        );
        assert_eq!(
            check("ftp://h/v1", true).unwrap_err(),
            "the API base `ftp://h/v1` has the scheme `ftp`: only http:// and https:// are supported"
        );
        assert_eq!(
            check("http:///v1", true).unwrap_err(),
            "the API base `http:///v1` has no host"
        );
        let tls = check("https://api.openai.com/v1", false).unwrap_err();
        assert!(
            tls.contains("build pikuri with the `rustls` feature"),
            "{tls}"
        );
        assert!(
            tls.starts_with("the API base `https://api.openai.com/v1` needs TLS"),
            "{tls}"
        );
    }

    #[test]
    fn an_empty_environment_is_an_error_naming_the_variables() {
        let none = |_: &str| None;
        let err = ChatTransport::from_vars(none).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        let text = err.to_string();
        for name in ["OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"] {
            assert!(text.contains(name), "{text}");
        }
        // Blank counts as unset.
        assert!(ChatTransport::from_vars(|_| Some("  ".to_string())).is_err());
        let local = ChatTransport::from_vars(|n| {
            (n == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:8080/v1".to_string())
        })
        .unwrap();
        assert_eq!(local.api_base(), Some("http://127.0.0.1:8080/v1"));
        assert_eq!(local.model(), None);
        let hosted =
            ChatTransport::from_vars(|n| (n == "OPENAI_API_KEY").then(|| "sk-x".to_string()))
                .unwrap();
        assert!(hosted.has_api_key() && hosted.api_base().is_none());
    }

    /// Session 14 folded the three APIs' halves of `from_vars` into one
    /// table: each API's error text and transport stay what they were.
    #[test]
    fn each_api_reads_its_own_variables_and_names_them_when_none_is_set() {
        let missing = |api: &str| {
            ChatTransport::from_vars(vars(&[("PIKURI_API", api)]))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            missing("chat"),
            "invalid input: no endpoint in the environment: set OPENAI_BASE_URL to your \
             server's API base (e.g. http://127.0.0.1:8080/v1 for llama.cpp, \
             http://127.0.0.1:11434/v1 for Ollama), or OPENAI_API_KEY for OpenAI's hosted \
             API; OPENAI_MODEL picks the model"
        );
        assert_eq!(missing("responses"), missing("chat"));
        assert_eq!(
            missing("anthropic"),
            "invalid input: no endpoint in the environment: set ANTHROPIC_BASE_URL to your \
             server's root (e.g. http://127.0.0.1:8080 for llama.cpp), or ANTHROPIC_API_KEY \
             for Anthropic's hosted API; ANTHROPIC_MODEL picks the model"
        );
        assert_eq!(
            missing("gemini"),
            "invalid input: no endpoint in the environment: set GEMINI_API_KEY (or \
             GOOGLE_API_KEY) for Google's hosted API, or GOOGLE_GEMINI_BASE_URL to your \
             server's root; GEMINI_MODEL picks the model"
        );
        let all = [
            ("OPENAI_BASE_URL", "http://o/v1"),
            ("OPENAI_MODEL", "om"),
            ("OPENAI_API_KEY", "ok"),
            ("ANTHROPIC_BASE_URL", "http://a"),
            ("ANTHROPIC_MODEL", "am"),
            ("ANTHROPIC_API_KEY", "ak"),
            ("GOOGLE_GEMINI_BASE_URL", "http://g"),
            ("GEMINI_MODEL", "gm"),
            ("GEMINI_API_KEY", "gk"),
        ];
        for (name, api, provider, base, model, key) in [
            (
                "responses",
                Api::OpenAiResponses,
                "openai",
                "http://o/v1",
                "om",
                "ok",
            ),
            (
                "anthropic",
                Api::AnthropicMessages,
                "anthropic",
                "http://a/v1",
                "am",
                "ak",
            ),
            (
                "gemini",
                Api::Gemini,
                "gemini",
                "http://g/v1beta",
                "gm",
                "gk",
            ),
        ] {
            let mut v = all.to_vec();
            v.push(("PIKURI_API", name));
            let t = ChatTransport::from_vars(vars(&v)).unwrap();
            let expected = ChatTransport::new(model)
                .with_api(api)
                .with_provider(provider)
                .with_api_base(base)
                .with_api_key(key);
            assert!(t == expected, "{name}: {t:?}");
        }
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn the_environment_picks_gemini() {
        // Only Gemini's key: Gemini, on Google's API base.
        let t = ChatTransport::from_vars(vars(&[
            ("GEMINI_API_KEY", "g-1"),
            ("GEMINI_MODEL", "gemini-2.5-flash"),
        ]))
        .unwrap();
        assert_eq!(t.api(), Api::Gemini);
        assert_eq!(t.api_key(), Some("g-1"));
        assert_eq!(t.model(), Some("gemini-2.5-flash"));
        assert_eq!(t.base_or_default(), DEFAULT_GEMINI_BASE);
        // The SDK's precedence: GOOGLE_API_KEY over GEMINI_API_KEY; the
        // root gets the version, a versioned base is kept.
        let t = ChatTransport::from_vars(vars(&[
            ("PIKURI_API", "gemini"),
            ("GEMINI_API_KEY", "g-1"),
            ("GOOGLE_API_KEY", "g-2"),
            ("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9/"),
        ]))
        .unwrap();
        assert_eq!(t.api_key(), Some("g-2"));
        assert_eq!(t.api_base(), Some("http://127.0.0.1:9/v1beta"));
        let t =
            ChatTransport::from_vars(vars(&[("GOOGLE_GEMINI_BASE_URL", "http://h/v1")])).unwrap();
        assert_eq!((t.api(), t.api_base()), (Api::Gemini, Some("http://h/v1")));
        // OpenAI's variables win the guess; nothing set is an error.
        let t = ChatTransport::from_vars(vars(&[
            ("GEMINI_API_KEY", "g"),
            ("OPENAI_BASE_URL", "http://h/v1"),
        ]))
        .unwrap();
        assert_eq!(t.api(), Api::ChatCompletions);
        let e = ChatTransport::from_vars(vars(&[("PIKURI_API", "gemini")])).unwrap_err();
        assert!(e.to_string().contains("GEMINI_API_KEY"), "{e}");
    }

    #[test]
    fn the_environment_picks_the_api() {
        // Only Anthropic's variables: Anthropic, with the SDK's root base.
        let t = ChatTransport::from_vars(vars(&[
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080/"),
            ("ANTHROPIC_MODEL", "claude-x"),
        ]))
        .unwrap();
        assert_eq!(t.api(), Api::AnthropicMessages);
        assert_eq!(t.api_base(), Some("http://127.0.0.1:8080/v1"));
        assert_eq!(t.model(), Some("claude-x"));
        assert_eq!(t.provider(), Some("anthropic"));
        assert!(t.has_api_key());
        // A base that already names the version is kept; a key alone goes
        // to Anthropic's hosted API.
        let t = ChatTransport::from_vars(vars(&[("ANTHROPIC_BASE_URL", "http://h/v1")])).unwrap();
        assert_eq!(t.api_base(), Some("http://h/v1"));
        let t = ChatTransport::from_vars(vars(&[("ANTHROPIC_API_KEY", "k")])).unwrap();
        assert_eq!(t.base_or_default(), DEFAULT_ANTHROPIC_BASE);
        // Both sets: OpenAI's, unless PIKURI_API says otherwise.
        let both = [
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
        ];
        let t = ChatTransport::from_vars(vars(&both)).unwrap();
        assert_eq!(t.api(), Api::ChatCompletions);
        for (name, api) in [
            ("anthropic", Api::AnthropicMessages),
            ("Anthropic_Messages", Api::AnthropicMessages),
            ("responses", Api::OpenAiResponses),
            ("chat", Api::ChatCompletions),
        ] {
            let mut v = both.to_vec();
            v.push(("PIKURI_API", name));
            assert_eq!(
                ChatTransport::from_vars(vars(&v)).unwrap().api(),
                api,
                "{name}"
            );
        }
        let err = ChatTransport::from_vars(vars(&[("PIKURI_API", "soap")])).unwrap_err();
        assert!(err.to_string().contains("PIKURI_API `soap`"), "{err}");
        // Anthropic asked for with none of its variables set.
        let err = ChatTransport::from_vars(vars(&[
            ("PIKURI_API", "anthropic"),
            ("OPENAI_API_KEY", "sk"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("ANTHROPIC_BASE_URL"), "{err}");
    }

    #[test]
    fn a_transport_writes_and_reads_its_pinned_json() {
        let full = ChatTransport::new("m")
            .with_api(Api::AnthropicMessages)
            .with_provider("p")
            .with_api_base("http://h/v1")
            .with_api_key("sk-secret")
            .with_context_window(Some(100))
            .with_prompt_caching(false)
            .with_settings(ModelSettings::new().with_seed(1));
        let mut cached = ChatTransport::new("g").with_api(Api::Gemini);
        cached.cached_content = Some("cachedContents/x".into());
        let values = [full.clone(), cached.clone(), ChatTransport::default()];
        let written: Vec<String> = values
            .iter()
            .map(|t| serde_json::to_string(t).unwrap())
            .collect();
        let pinned: &[&str] = &[
            r#"{"api":"anthropic_messages","model":"m","provider":"p","api_base":"http://h/v1","context_window":100,"no_auto_cache":true,"settings":{"seed":1}}"#,
            r#"{"api":"gemini","model":"g","cached_content":"cachedContents/x"}"#,
            r"{}",
        ];
        assert_eq!(written, pinned, "written:\n{}", written.join("\n"));
        let without_key = full.clone().with_api_key("");
        let mut back: ChatTransport = serde_json::from_str(&written[0]).unwrap();
        assert_eq!(back.api_key, None);
        back.api_key = without_key.api_key.clone();
        assert_eq!(back, without_key);
        assert_eq!(
            serde_json::from_str::<ChatTransport>(&written[1]).unwrap(),
            cached
        );
        let read: ChatTransport =
            serde_json::from_str(r#"{"api_key":"k","other":1,"model":"m"}"#).unwrap();
        assert_eq!(read, ChatTransport::new("m"));
        let inputs = [
            r#"{"api":"soap"}"#,
            r#"{"model":"a","model":"b"}"#,
            r#"{"no_auto_cache":1}"#,
            r"[]",
        ];
        let errors: Vec<String> = inputs
            .iter()
            .map(|s| match serde_json::from_str::<ChatTransport>(s) {
                Ok(t) => format!("read {t:?}"),
                Err(e) => e.to_string(),
            })
            .collect();
        let expected: &[&str] = &[
            r"unknown variant `soap`, expected one of `chat_completions`, `anthropic_messages`, `open_ai_responses`, `gemini` at line 1 column 13",
            r"duplicate field `model` at line 1 column 20",
            r"invalid type: integer `1`, expected a boolean at line 1 column 18",
            // The derive also read a struct from an array of its fields'
            // values; the crate's impls (`serde_macros`) read objects only.
            "invalid type: sequence, expected struct ChatTransport at line 1 column 2",
        ];
        assert_eq!(errors, expected, "errors:\n{}", errors.join("\n"));
    }
}
