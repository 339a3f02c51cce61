//! Gemini's explicit context caching (`cachedContents`): a long shared
//! prefix (a system instruction, tools, the first messages) stored on the
//! server once, then named by each request instead of being sent again.
//!
//! Optional: nothing caches unless the host creates a cache
//! ([`ChatTransport::create_cache`]) and names it on a transport
//! ([`ChatTransport::with_cached_content`]). The server bills the stored
//! tokens until the cache expires (its `ttl`) or is deleted, and reports
//! the tokens a request read from it as `cachedContentTokenCount`, which
//! pikuri's [`Usage::cached`](crate::Usage::cached) carries.
//!
//! A request that names a cache sends neither `systemInstruction` nor
//! `tools` nor `toolConfig`: Gemini takes them from the cache and refuses
//! a request that repeats them. The encoder leaves them out and writes
//! the cache's name (`encode::resource_path`) when the transport names one.
//!
//! A request naming a cache that expired or was deleted fails with
//! [`ErrorKind::CacheExpired`](crate::ErrorKind::CacheExpired), its
//! message naming the cache ([`expired_hint`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::encode::resource_path;
use crate::net::AgentSetup;
use crate::protocol::connect::small_answer;
use crate::protocol::request::{Request, ToolSpecs};
use crate::util::{redact, redact_url};
use crate::{Api, ChatTransport, Error, Message, ModelSettings, Result, Tool};

/// The largest answer read from the `cachedContents` endpoints.
const MAX_BODY: u64 = 1 << 20;
/// The longest cache name taken from a server, in bytes (Gemini's are
/// under 100), and the most characters kept of its other strings.
const MAX_NAME: usize = 512;
/// The time allowed for one cache request, connection included: a create
/// uploads the whole prefix.
const TIMEOUT: Duration = Duration::from_secs(120);

/// What a new context cache holds: an optional system instruction, the
/// first messages of the conversations that will use it, the tools, and
/// how long the server keeps it. [`ChatTransport::create_cache`] stores it.
///
/// Create it with the system prompt and tools of the agent that will use
/// it: a request naming a cache sends neither (Gemini takes them from the
/// cache), so the agent's own are then used only to run the calls.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use pikuri::{ContextCache, Message};
///
/// let cache = ContextCache::new(Duration::from_secs(3600))
///     .with_system("Answer from the handbook.")
///     .with_message(Message::user("The handbook: ..."));
/// assert_eq!(cache.ttl(), Duration::from_secs(3600));
/// assert_eq!(cache.messages().len(), 1);
/// ```
#[derive(Clone)]
pub struct ContextCache {
    ttl: Duration,
    display_name: Option<String>,
    system: Option<String>,
    messages: Vec<Message>,
    tools: Vec<Arc<dyn Tool>>,
}

impl fmt::Debug for ContextCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(Tool::name).collect();
        f.debug_struct("ContextCache")
            .field("ttl", &self.ttl)
            .field("display_name", &self.display_name)
            .field("system", &self.system)
            .field("messages", &self.messages.len())
            .field("tools", &tools)
            .finish()
    }
}

impl ContextCache {
    /// An empty cache kept for `ttl` after it is created (Gemini's
    /// default is an hour; whole seconds are sent, at least one).
    pub fn new(ttl: Duration) -> ContextCache {
        ContextCache {
            ttl,
            display_name: None,
            system: None,
            messages: Vec::new(),
            tools: Vec::new(),
        }
    }

    /// Name it for people (Gemini's `displayName`, at most 128 characters).
    #[must_use]
    pub fn with_display_name(mut self, name: impl Into<String>) -> ContextCache {
        self.display_name = Some(name.into());
        self
    }

    /// Cache this system instruction.
    #[must_use]
    pub fn with_system(mut self, system: impl Into<String>) -> ContextCache {
        self.system = Some(system.into());
        self
    }

    /// Cache this message after those added before.
    #[must_use]
    pub fn with_message(mut self, message: Message) -> ContextCache {
        self.messages.push(message);
        self
    }

    /// Cache this tool's declaration (its name, description and
    /// parameters), after those added before. Share one tool between the
    /// cache and the agent as an `Arc<dyn Tool>` (itself a [`Tool`]).
    #[must_use]
    pub fn with_tool(mut self, tool: impl Tool) -> ContextCache {
        self.tools.push(Arc::new(tool));
        self
    }

    /// How long the server keeps the cache after it is created.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The messages cached, in order.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }
}

/// A context cache the server holds: Gemini's `CachedContent` resource,
/// as [`ChatTransport::create_cache`] and
/// [`ChatTransport::update_cache_ttl`] return it.
///
/// Name it on a transport with
/// [`ChatTransport::with_cached_content`] to use it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedContent {
    name: String,
    model: String,
    display_name: Option<String>,
    expire_time: Option<String>,
    token_count: Option<u64>,
}

impl CachedContent {
    /// The server's name for it, `cachedContents/{id}`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model it was created for, as the server names it
    /// (`models/{model}`); only that model can use it.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The name given with [`ContextCache::with_display_name`].
    pub fn display_name(&self) -> Option<&str> {
        self.display_name.as_deref()
    }

    /// When the server drops it, in RFC 3339 (UTC), as the server wrote it.
    pub fn expire_time(&self) -> Option<&str> {
        self.expire_time.as_deref()
    }

    /// The tokens it holds (`usageMetadata.totalTokenCount`): what each
    /// request using it reports as [`Usage::cached`](crate::Usage::cached).
    pub fn token_count(&self) -> Option<u64> {
        self.token_count
    }

    /// The resource from a `cachedContents` answer; `None` without a name
    /// that is a cache's (`cachedContents/{id}`, at most
    /// [`MAX_NAME`] bytes). Why check here: the name goes into every
    /// request's body and into the path of an update or a delete, so a
    /// server's `../` or megabyte is refused where it arrives, not at the
    /// next turn. The other strings are cut to [`MAX_NAME`] characters.
    fn from_json(v: &Value) -> Option<CachedContent> {
        let text = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(|s| crate::util::excerpt(s, MAX_NAME).into_owned())
        };
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| n.len() <= MAX_NAME && n.starts_with("cachedContents/"))
            .filter(|n| resource_path(n).is_ok())?;
        Some(CachedContent {
            name: name.to_string(),
            model: text("model").unwrap_or_default(),
            display_name: text("displayName"),
            expire_time: text("expireTime"),
            token_count: v
                .pointer("/usageMetadata/totalTokenCount")
                .and_then(Value::as_u64),
        })
    }
}

impl ChatTransport {
    /// Store `cache` on the server for this transport's model: `POST
    /// {api base}/cachedContents`. Name the answer on a transport with
    /// [`with_cached_content`](ChatTransport::with_cached_content) to use
    /// it. See the [guide](crate::guide#context-caching-gemini).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the transport does not speak
    /// [`Api::Gemini`] or names no model; [`Error::Http`] for a refusal
    /// (Gemini asks for a minimum number of tokens, depending on the
    /// model); [`Error::Connect`], [`Error::Transport`] or
    /// [`Error::Timeout`] when the server cannot be reached in time (two
    /// minutes in all); [`Error::Protocol`] for an answer that is not a
    /// `CachedContent` (or names it with what is not a cache's name:
    /// `cachedContents/` then letters, digits, `-` and `_`).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use pikuri::testing::FakeServer;
    /// use pikuri::{Api, ContextCache, Message};
    ///
    /// let server = FakeServer::start();
    /// let transport = server.transport().with_api(Api::Gemini);
    /// let cache = transport.create_cache(
    ///     &ContextCache::new(Duration::from_secs(600))
    ///         .with_message(Message::user("A long shared document.")),
    /// )?;
    /// assert!(cache.name().starts_with("cachedContents/"));
    /// assert_eq!(cache.model(), "models/fake-model");
    /// assert!(cache.token_count().is_some_and(|n| n > 0));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn create_cache(&self, cache: &ContextCache) -> Result<CachedContent> {
        let model = self.cache_model()?;
        let mut body = self.cache_body(cache)?;
        body.insert("model".into(), Value::String(format!("models/{model}")));
        body.insert("ttl".into(), Value::String(ttl_text(cache.ttl)));
        if let Some(name) = &cache.display_name {
            body.insert("displayName".into(), Value::String(name.clone()));
        }
        let answer = self.cache_call("POST", "cachedContents", Some(&Value::Object(body)))?;
        self.resource(&answer, "cachedContents")
    }

    /// Keep the cache `name` for `ttl` from now: `PATCH {api
    /// base}/{name}?updateMask=ttl`. A short `ttl` makes it expire soon;
    /// [`delete_cache`](ChatTransport::delete_cache) drops it at once.
    ///
    /// # Errors
    ///
    /// As [`create_cache`](ChatTransport::create_cache); a cache that
    /// expired or was deleted is an [`Error::Http`] of kind
    /// [`ErrorKind::CacheExpired`](crate::ErrorKind::CacheExpired).
    pub fn update_cache_ttl(&self, name: &str, ttl: Duration) -> Result<CachedContent> {
        self.cache_model()?;
        let path = resource_path(name)?;
        let body = serde_json::json!({ "ttl": ttl_text(ttl) });
        let answer = self.cache_call("PATCH", &format!("{path}?updateMask=ttl"), Some(&body))?;
        self.resource(&answer, &path)
    }

    /// Drop the cache `name` now: `DELETE {api base}/{name}`. A request
    /// that names it afterwards fails with
    /// [`ErrorKind::CacheExpired`](crate::ErrorKind::CacheExpired).
    ///
    /// # Errors
    ///
    /// As [`update_cache_ttl`](ChatTransport::update_cache_ttl).
    pub fn delete_cache(&self, name: &str) -> Result<()> {
        self.cache_model()?;
        let path = resource_path(name)?;
        self.cache_call("DELETE", &path, None).map(drop)
    }

    /// This transport with every request naming the cache `name`
    /// (`cachedContent`), or none. A request naming a cache sends neither
    /// the system prompt nor the tools (Gemini reads them from the cache),
    /// so create it with the agent's own. The cache belongs to one model:
    /// a transport on another model or API is another transport, and
    /// [`with_model`](ChatTransport::with_model) keeps the name (give it
    /// the other model's cache).
    ///
    /// Only [`Api::Gemini`] has caches: a request on another API naming one
    /// fails with [`Error::InvalidInput`] before anything is sent.
    #[must_use]
    pub fn with_cached_content(mut self, name: Option<&str>) -> ChatTransport {
        self.cached_content = name.map(str::to_string);
        self
    }

    /// The cache every request names; see
    /// [`with_cached_content`](ChatTransport::with_cached_content).
    pub fn cached_content(&self) -> Option<&str> {
        self.cached_content.as_deref()
    }

    /// The model of a cache request, after checking the API.
    fn cache_model(&self) -> Result<&str> {
        if self.api() != Api::Gemini {
            return Err(Error::InvalidInput(format!(
                "context caches are Gemini's (`cachedContents`), and the transport speaks {}",
                self.api()
            )));
        }
        self.model()
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| Error::invalid("a context cache belongs to a model: name one"))
    }

    /// `systemInstruction`, `contents` and `tools` of `cache`, written by
    /// the Gemini encoder as for a request.
    fn cache_body(&self, cache: &ContextCache) -> Result<Map<String, Value>> {
        let transport = self.clone().with_cached_content(None);
        let tools = ToolSpecs::new(&cache.tools);
        let extra = Map::new();
        let settings = ModelSettings::default();
        let req = Request {
            transport: &transport,
            system: cache.system.as_deref(),
            messages: &cache.messages,
            trailing_system: None,
            tools: &tools,
            settings: &settings,
            response_schema: None,
            stream: false,
            replay_reasoning: true,
            prompt_caching: false,
            split_think: false,
            extra: &extra,
            cancel: None,
            traceparent: None,
        };
        if let Some(why) = settings.problem(Api::Gemini) {
            return Err(Error::InvalidInput(why));
        }
        let mut buf = Vec::new();
        super::write_body(&req, &mut buf)?;
        let Ok(Value::Object(encoded)) = serde_json::from_slice(&buf) else {
            unreachable!("the Gemini encoder writes a JSON object")
        };
        Ok(encoded
            .into_iter()
            .filter(|(k, _)| matches!(k.as_str(), "systemInstruction" | "contents" | "tools"))
            .collect())
    }

    /// A `CachedContent` answer of the request to `what`.
    fn resource(&self, answer: &[u8], what: &str) -> Result<CachedContent> {
        serde_json::from_slice::<Value>(answer)
            .ok()
            .as_ref()
            .and_then(CachedContent::from_json)
            .ok_or_else(|| Error::Protocol {
                message: "not a CachedContent (`{\"name\":\"cachedContents/..\",..}`)".into(),
                url: Some(self.cache_url_shown(what)),
            })
    }

    fn cache_url(&self, path: &str) -> String {
        format!("{}/{path}", self.base_or_default().trim_end_matches('/'))
    }

    fn cache_url_shown(&self, path: &str) -> String {
        redact(&redact_url(&self.cache_url(path)), self.api_key()).into_owned()
    }

    /// One request to `{api base}/{path}`: the answer's body on a success
    /// status.
    fn cache_call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Vec<u8>> {
        let url = self.cache_url(path);
        let shown = self.cache_url_shown(path);
        let agent = AgentSetup::new().with_total_timeout(TIMEOUT).agent();
        let headers = super::headers(self.api_key());
        let sent = body.map(|b| serde_json::to_vec(b).expect("a JSON value serializes"));
        let result = match (method, sent) {
            ("GET", _) => with_headers(agent.get(&url), &headers).call(),
            ("DELETE", _) => with_headers(agent.delete(&url), &headers).call(),
            (m, body) => {
                let req = if m == "PATCH" {
                    agent.patch(&url)
                } else {
                    agent.post(&url)
                };
                with_headers(req, &headers)
                    .header("Content-Type", "application/json")
                    .send(body.unwrap_or_default())
            }
        };
        small_answer(
            result,
            (&url, &shown),
            (TIMEOUT, MAX_BODY),
            self.api_key(),
            |status, message| expired_hint(status, message, Some(path)),
            "a cachedContents answer",
        )
    }
}

/// Add `headers` to a request.
fn with_headers<B>(
    mut req: ureq::RequestBuilder<B>,
    headers: &[(&'static str, String)],
) -> ureq::RequestBuilder<B> {
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    req
}

/// Gemini's duration text: whole seconds, at least one (`"600s"`).
fn ttl_text(ttl: Duration) -> String {
    format!("{}s", ttl.as_secs().max(1))
}

/// The hint a refusal of a gone cache gets, naming it and what to do.
pub(crate) fn expired_hint(status: u16, message: &str, cache: Option<&str>) -> Option<String> {
    if !crate::error::is_cache_gone(status, message) {
        return None;
    }
    let which = cache.map_or_else(String::new, |c| {
        let c = c.split('?').next().unwrap_or(c);
        format!(" `{}`", crate::util::excerpt(c, 80))
    });
    Some(format!(
        " (hint: the context cache{which} expired or was deleted: create it again with \
         ChatTransport::create_cache, or drop it from the transport with \
         with_cached_content(None))"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::wire;

    #[test]
    fn a_gone_cache_is_told_apart_from_a_refused_key() {
        let gone = "CachedContent not found (or permission denied)";
        assert!(
            expired_hint(403, "API key not valid. Please pass a valid API key.", None).is_none()
        );
        assert!(expired_hint(500, gone, None).is_none());
        let hint = expired_hint(403, gone, Some("cachedContents/abc?updateMask=ttl")).unwrap();
        assert!(hint.contains("`cachedContents/abc`"), "{hint}");
        assert!(hint.contains("create_cache"), "{hint}");
    }

    /// The body of a request with a system prompt, a tool and a tool
    /// choice, on `transport`.
    fn encoded(transport: &ChatTransport) -> Result<Value> {
        let tools = ToolSpecs::from_values(&[serde_json::json!({
            "name": "clock", "description": "The time.", "parameters": {"type": "object"}
        })]);
        let settings = ModelSettings::new().with_tool_choice(crate::ToolChoice::Required);
        let extra = Map::new();
        let messages = [Message::user("When is lunch?")];
        let req = Request {
            system: Some("Answer from the handbook."),
            settings: &settings,
            stream: false,
            replay_reasoning: true,
            prompt_caching: false,
            ..Request::for_test(transport, &messages, &tools, &extra)
        };
        let mut buf = Vec::new();
        wire::encode(&req, &mut buf, false)?;
        Ok(serde_json::from_slice(&buf).unwrap())
    }

    #[test]
    fn a_request_naming_a_cache_sends_what_the_cache_does_not_hold() {
        let plain = ChatTransport::new("gemini-x").with_api(Api::Gemini);
        let body = encoded(&plain).unwrap();
        assert!(body.get("cachedContent").is_none(), "{body}");
        for held in ["systemInstruction", "tools", "toolConfig"] {
            assert!(body.get(held).is_some(), "{held}: {body}");
        }
        let cached = plain.with_cached_content(Some("abc"));
        let body = encoded(&cached).unwrap();
        assert_eq!(body["cachedContent"], "cachedContents/abc");
        for held in ["systemInstruction", "tools", "toolConfig"] {
            assert!(body.get(held).is_none(), "{held}: {body}");
        }
        assert_eq!(body["contents"][0]["parts"][0]["text"], "When is lunch?");
        // A name that is not a cache's is refused; so is a cache on another
        // API.
        let err = encoded(&cached.clone().with_cached_content(Some("a/b"))).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{err}");
        let err = encoded(&cached.with_api(Api::ChatCompletions)).unwrap_err();
        assert!(err.to_string().contains("only Gemini"), "{err}");
    }

    #[test]
    fn names_and_ttls_are_written_as_gemini_reads_them() {
        assert_eq!(resource_path("abc-1").unwrap(), "cachedContents/abc-1");
        assert_eq!(
            resource_path("cachedContents/abc").unwrap(),
            "cachedContents/abc"
        );
        for bad in ["", "cachedContents/", "../models", "a/b", "a?b"] {
            assert!(resource_path(bad).is_err(), "{bad:?}");
        }
        assert_eq!(ttl_text(Duration::from_millis(1500)), "1s");
        assert_eq!(ttl_text(Duration::ZERO), "1s");
        assert_eq!(ttl_text(Duration::from_secs(3600)), "3600s");
    }
}
