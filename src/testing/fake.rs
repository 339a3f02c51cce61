//! [`FakeServer`]: the public handle on a [`Server`] answering through a
//! [`Script`].

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use super::cassette::{Cassette, Replay};
use super::reply::Reply;
use super::request::RecordedRequest;
use super::script::{Fallback, Script};
use super::server::{Responder, Server};
use crate::ChatTransport;

/// A scripted HTTP server on `127.0.0.1` and a free port, for tests,
/// speaking chat completions, Anthropic Messages and OpenAI Responses. See
/// the [module docs](super) for what it serves.
///
/// # Examples
///
/// ```
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.push(Reply::text("first")).push(Reply::text("second"));
/// assert_eq!(server.remaining(), 2);
/// assert!(server.base_url().starts_with("http://127.0.0.1:"));
/// assert!(server.base_url().ends_with("/v1"));
/// assert_eq!(server.transport().model(), Some("fake-model"));
/// ```
///
/// # Thread safety
///
/// Every method takes `&self`; a `FakeServer` is `Send + Sync` and can be
/// shared (`Arc` or scoped threads) between a test and the code under test.
///
/// # Drop
///
/// Dropping the server stops accepting, shuts down every open connection
/// (so a client blocked on a [`hang`](Reply::hang) reply sees the connection
/// end) and joins the threads, giving up after 5 s. Unused replies are logged
/// at `warn`; call [`assert_all_used`](FakeServer::assert_all_used) to make
/// them fail the test.
///
/// # Panics
///
/// `drop` panics (unless the thread is already panicking) if one of the
/// server's threads panicked, which is a bug in `FakeServer`.
pub struct FakeServer {
    server: Server,
    script: Arc<Script>,
}

impl FakeServer {
    /// Bind `127.0.0.1:0` and start serving on a background thread.
    ///
    /// # Panics
    ///
    /// If no loopback port can be bound (see [`try_start`](FakeServer::try_start)).
    pub fn start() -> FakeServer {
        FakeServer::try_start().expect("FakeServer: cannot listen on 127.0.0.1:0")
    }

    /// Like [`start`](FakeServer::start), returning the bind or spawn error.
    pub fn try_start() -> io::Result<FakeServer> {
        let script = Arc::new(Script::new());
        let server = Server::start(Arc::clone(&script) as Arc<dyn Responder>)?;
        Ok(FakeServer { server, script })
    }

    /// The socket address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The OpenAI-style API base, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.root_url())
    }

    /// The server root, `http://127.0.0.1:PORT` (where llama.cpp's `/props`
    /// and `/health` live).
    pub fn root_url(&self) -> String {
        self.server.root_url()
    }

    /// A transport to this server: the server's model id (`fake-model`
    /// unless [`set_model_id`](FakeServer::set_model_id) or a
    /// [loaded cassette](FakeServer::load_cassette) changed it), API
    /// base [`base_url`](FakeServer::base_url), no key.
    pub fn transport(&self) -> ChatTransport {
        let model = self.script.state.lock().model_id.clone();
        ChatTransport::new(model).with_api_base(self.base_url())
    }

    /// Queue `reply` for the next model request of any API (FIFO), as many times as its
    /// [`repeat`](Reply::repeat) count says. Returns `self` for chaining.
    pub fn push(&self, reply: Reply) -> &FakeServer {
        let times = reply.delivery.times;
        let mut st = self.script.state.lock();
        for _ in 1..times {
            st.replies.push_back(reply.clone());
        }
        if times > 0 {
            st.replies.push_back(reply);
        }
        self
    }

    /// Answer chat requests with `respond(request)` whenever no scripted
    /// reply is queued: a model that reacts to what it is asked, for demos
    /// and for tests whose conversation is not known in advance. Queued
    /// replies still come first; strict mode still judges the request
    /// first. Replaces any function set before.
    ///
    /// The function runs on the connection's thread with the server
    /// unlocked, so it may take its time or call the server's methods. Its
    /// reply's [`repeat`](Reply::repeat) count is ignored. If it panics, the
    /// request is answered 500 and the panic logged at `error`.
    ///
    /// # Examples
    ///
    /// An echo model that calls the calculator when the question has a `*`:
    ///
    /// ```
    /// use pikuri::{Agent, builtin};
    /// use pikuri::testing::{FakeServer, Reply};
    /// use serde_json::json;
    ///
    /// let server = FakeServer::start();
    /// server.respond_with(|req| {
    ///     let last = req.messages().last().cloned().unwrap_or_default();
    ///     let text = last["content"].as_str().unwrap_or("").to_string();
    ///     match last["role"].as_str() {
    ///         Some("tool") => Reply::text(format!("It is {text}.")),
    ///         _ if text.contains('*') => {
    ///             let expr: String = text.chars().filter(|c| "0123456789*".contains(*c)).collect();
    ///             Reply::tool_call("calculator", json!({ "expression": expr }))
    ///         }
    ///         _ => Reply::text(format!("You said: {text}")),
    ///     }
    /// });
    ///
    /// let mut agent = Agent::builder(server.transport())
    ///     .add_tool(builtin::calculator())
    ///     .build()?;
    /// assert_eq!(agent.run_loop("What is 6*7?")?.answer.as_deref(), Some("It is 42."));
    /// assert_eq!(agent.run_loop("hello")?.answer.as_deref(), Some("You said: hello"));
    /// assert_eq!(server.chat_requests().len(), 3);
    /// server.assert_all_used(); // nothing was queued
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn respond_with(
        &self,
        respond: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) -> &FakeServer {
        self.script.state.lock().fallback = Some(Fallback(Arc::new(respond)));
        self
    }

    /// How many TCP connections the server has accepted so far: an agent
    /// that keeps its connection alive makes one for any number of turns.
    ///
    /// ```
    /// use pikuri::Agent;
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::text("one")).push(Reply::text("two"));
    /// let mut agent = Agent::builder(server.transport()).streaming(true).build()?;
    /// agent.run_loop("1")?;
    /// agent.run_loop("2")?;
    /// assert_eq!(server.connections(), 1);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn connections(&self) -> u64 {
        self.server.connections()
    }

    /// Every request received, any path, in arrival order (a request is
    /// recorded once its body has been read, before it is answered).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.server.requests()
    }

    /// Only the model requests (`POST …/chat/completions`, `…/messages`,
    /// `…/responses`: [`RecordedRequest::api`] is `Some`), including those
    /// rejected in strict mode or left without a reply. Request `#N` in the
    /// server's messages is `chat_requests()[N - 1]`.
    pub fn chat_requests(&self) -> Vec<RecordedRequest> {
        let mut requests = self.server.requests();
        requests.retain(RecordedRequest::is_chat);
        requests
    }

    /// Scripted replies not yet served.
    pub fn remaining(&self) -> usize {
        self.script.state.lock().replies.len()
    }

    /// Chat requests that found no scripted reply left (each was answered
    /// 500 and logged at `error`).
    pub fn unexpected_requests(&self) -> usize {
        self.script.state.lock().unexpected
    }

    /// The messages of the chat requests rejected in strict mode (each was
    /// answered 400 and logged at `warn`), oldest first.
    pub fn rejections(&self) -> Vec<String> {
        self.script.state.lock().rejections.clone()
    }

    /// The cassette interactions not served yet, described (`evals`).
    #[cfg(feature = "evals")]
    pub(crate) fn unused_interactions(&self) -> Vec<String> {
        self.script
            .state
            .lock()
            .replay
            .as_ref()
            .map(super::cassette::Replay::unused)
            .unwrap_or_default()
    }

    /// Check that every scripted reply was served and, when replaying a
    /// [`Cassette`], that every request matched an interaction and every
    /// interaction was served.
    ///
    /// # Panics
    ///
    /// If not, with a message listing the unused replies, each cassette
    /// mismatch with its diff, and the unused interactions.
    #[track_caller]
    pub fn assert_all_used(&self) {
        let st = self.script.state.lock();
        let mut problems = Vec::new();
        if let Some(replay) = &st.replay {
            if !replay.mismatches.is_empty() {
                problems.push(format!(
                    "FakeServer: {} request(s) matched no cassette interaction:\n{}",
                    replay.mismatches.len(),
                    replay.mismatches.join("\n")
                ));
            }
            let unused = replay.unused();
            if !unused.is_empty() {
                problems.push(format!(
                    "FakeServer: {} cassette interaction(s) never used:\n{}",
                    unused.len(),
                    unused.join("\n")
                ));
            }
        }
        if !st.replies.is_empty() {
            let list: Vec<String> = st
                .replies
                .iter()
                .enumerate()
                .map(|(i, r)| format!("  {}. {}", i + 1, r.describe()))
                .collect();
            problems.push(format!(
                "FakeServer: {} scripted reply(ies) never used ({} chat request(s) received):\n{}",
                st.replies.len(),
                st.chat_count,
                list.join("\n")
            ));
        }
        drop(st);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// A server replaying `cassette` (see [`load_cassette`]).
    ///
    /// [`load_cassette`]: FakeServer::load_cassette
    ///
    /// # Panics
    ///
    /// As [`start`](FakeServer::start).
    pub fn from_cassette(cassette: Cassette) -> FakeServer {
        let server = FakeServer::start();
        server.load_cassette(cassette);
        server
    }

    /// Answer from `cassette` from now on, replacing any cassette loaded
    /// before. A request is served the recorded response of the first unused
    /// interaction with the same method, target and canonical body; see the
    /// [module docs](super#record-and-replay) for the rules, mismatches and
    /// what falls through to the usual routes. The server's model id
    /// becomes the recorded one (the `model` of the cassette's first model
    /// request), so [`transport`](FakeServer::transport) sends what the
    /// recording sent; its API is still chat completions: replaying an
    /// Anthropic or Responses session takes `.with_api(..)`.
    ///
    /// ```
    /// use pikuri::Agent;
    /// use pikuri::testing::{Cassette, FakeServer, Recorder, Reply};
    ///
    /// let upstream = FakeServer::start();
    /// upstream.push(Reply::text("Recorded answer."));
    /// let recorder = Recorder::start(&upstream.base_url());
    /// Agent::builder(recorder.transport_for("qwen3-8b")).build()?.run_loop("Hi")?;
    ///
    /// let replay = FakeServer::start();
    /// replay.load_cassette(recorder.cassette());
    /// assert_eq!(replay.transport().model(), Some("qwen3-8b"));
    /// let out = Agent::builder(replay.transport()).build()?.run_loop("Hi")?;
    /// assert_eq!(out.answer.as_deref(), Some("Recorded answer."));
    /// replay.assert_all_used();
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn load_cassette(&self, cassette: Cassette) {
        let mut st = self.script.state.lock();
        // The recorded requests name the recorded model: so does
        // `transport()`, or every replayed request would mismatch.
        if let Some(model) = cassette.recorded_model() {
            st.model_id = model.to_string();
        }
        st.replay = Some(Replay::new(cassette));
    }

    /// The messages of the requests that matched no cassette interaction
    /// (each was answered 500 and logged at `error`), oldest first. Each
    /// holds a line diff against the closest unused interaction.
    pub fn mismatches(&self) -> Vec<String> {
        self.script
            .state
            .lock()
            .replay
            .as_ref()
            .map(|r| r.mismatches.clone())
            .unwrap_or_default()
    }

    /// The context size `/props` and `/v1/models` report (default
    /// `Some(4096)`). `None` makes `/props` answer 404 and leaves `meta` out
    /// of `/v1/models`, like a server that does not say.
    pub fn set_context_size(&self, n_ctx: Option<u64>) {
        self.script.state.lock().n_ctx = n_ctx;
    }

    /// The model id `/v1/models` lists and responses name when the reply
    /// sets none (default `"fake-model"`).
    pub fn set_model_id(&self, id: &str) {
        self.script.state.lock().model_id = id.to_string();
    }

    /// Expire every Gemini context cache created on this server so far: a
    /// request naming one is then answered as Gemini answers it, 403
    /// `PERMISSION_DENIED` "CachedContent not found (or permission
    /// denied)". (The server's clock does not expire them: a cache lives
    /// until this, or its `DELETE`.)
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use pikuri::testing::FakeServer;
    /// use pikuri::{Api, ContextCache, ErrorKind, Message};
    ///
    /// let server = FakeServer::start();
    /// let transport = server.transport().with_api(Api::Gemini);
    /// let cache = transport.create_cache(
    ///     &ContextCache::new(Duration::from_secs(60)).with_message(Message::user("doc")),
    /// )?;
    /// server.expire_caches();
    /// let err = transport
    ///     .update_cache_ttl(cache.name(), Duration::from_secs(600))
    ///     .unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::CacheExpired);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn expire_caches(&self) {
        self.script.state.lock().caches.expire_all();
    }

    /// Simulate a provider's automatic prompt cache (default off): once
    /// on, each scripted reply that sets no cached tokens of its own
    /// reports as cached (`prompt_tokens_details.cached_tokens`, or the
    /// API's field; see [Usage](super#usage)) the bytes its prompt shares
    /// from its start with the previous chat request's, at four bytes a
    /// token, rounded down (the first request: none). The prompt is read
    /// in the order providers cache it: the `tools` array, then the system
    /// prompt, then the conversation (`messages`, `input` or `contents`),
    /// each as compact JSON. A change early in it (a reordered tool) loses
    /// the rest.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Agent;
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.set_prefix_cache(true);
    /// server.push(Reply::text("One.")).push(Reply::text("Two."));
    /// let mut agent = Agent::builder(server.transport()).build()?;
    /// let first = "What was the weather like in Paris in the spring of 1900?";
    /// assert_eq!(agent.run_loop(first)?.usage.cached.unwrap_or(0), 0);
    /// // The second request repeats the first one's conversation.
    /// assert!(agent.run_loop("Second question")?.usage.cached.unwrap_or(0) > 10);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn set_prefix_cache(&self, on: bool) {
        self.script.state.lock().prefix_cache = on.then(String::new);
    }

    /// Turn strict request validation on or off (default on). See the
    /// [module docs](super#strict-mode).
    pub fn set_strict(&self, on: bool) {
        self.script.state.lock().strict = on;
    }

    /// Answer `method path` with `status` and the JSON `body`, before any
    /// built-in route. `path` matches the request path exactly when it has a
    /// query string, else the path without its query. For probing shapes of
    /// other servers (Ollama's `/api/show`, vLLM's `/v1/models`). A later
    /// call for the same method and path replaces the earlier one.
    ///
    /// ```
    /// use pikuri::testing::FakeServer;
    /// let server = FakeServer::start();
    /// server.set_context_size(None);
    /// server.set_route("GET", "/v1/models", 200, serde_json::json!({"data": [{"id": "m", "max_model_len": 8192}]}));
    /// assert_eq!(server.transport().with_model("m").detect_context_window(), Some(8192));
    /// ```
    pub fn set_route(&self, method: &str, path: &str, status: u16, body: serde_json::Value) {
        let mut st = self.script.state.lock();
        st.routes.retain(|(m, p, _, _)| !(m == method && p == path));
        st.routes
            .push((method.to_string(), path.to_string(), status, body));
    }
}

impl fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One lock at a time: the server takes the log before the script.
        let requests = self.server.request_count();
        let st = self.script.state.lock();
        f.debug_struct("FakeServer")
            .field("addr", &self.server.local_addr())
            .field("remaining", &st.replies.len())
            .field("requests", &requests)
            .field("unexpected", &st.unexpected)
            .field("strict", &st.strict)
            .field("replaying", &st.replay.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        // Stop first, so no connection consumes a reply after the report;
        // `Server::drop` then checks for panicked threads.
        self.server.stop();
        let st = self.script.state.lock();
        if !st.replies.is_empty() {
            let unused: Vec<String> = st.replies.iter().map(Reply::describe).collect();
            log::warn!(
                "FakeServer: dropped with {} unused reply(ies): {}",
                unused.len(),
                unused.join(", ")
            );
        }
        if let Some(replay) = &st.replay {
            let unused = replay.unused();
            if !unused.is_empty() {
                log::warn!(
                    "FakeServer: dropped with {} unused cassette interaction(s):\n{}",
                    unused.len(),
                    unused.join("\n")
                );
            }
        }
    }
}
