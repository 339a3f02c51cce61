//! [`FakeServer`]: the listener, its threads, the shared script and record.
//!
//! Threads: one accept thread, plus one thread per connection (`conn.rs`).
//! Everything they share sits in [`Shared`]; the script and the record are
//! one `parking_lot::Mutex<State>`, never held across socket I/O.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::cassette::{Cassette, Interaction, Replay};
use super::conn;
use super::recorder::Upstream;
use super::reply::Reply;
use super::request::RecordedRequest;
use crate::ChatTransport;

/// How long `drop` waits for the server's threads before detaching them.
const JOIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A scripted OpenAI-compatible HTTP server on `127.0.0.1` and a free port,
/// for tests. See the [module docs](super) for what it serves.
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
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// Everything the server's threads share.
pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    shutdown: AtomicBool,
    /// A clone of every open connection, so `drop` can shut them down.
    conns: Mutex<HashMap<u64, TcpStream>>,
    handlers: Mutex<Vec<JoinHandle<()>>>,
    panics: Mutex<Vec<String>>,
}

/// The script and the record.
pub(super) struct State {
    pub(super) replies: VecDeque<Reply>,
    pub(super) requests: Vec<RecordedRequest>,
    /// Chat requests seen so far, rejected ones included.
    pub(super) chat_count: usize,
    pub(super) unexpected: usize,
    pub(super) rejections: Vec<String>,
    pub(super) n_ctx: Option<u64>,
    pub(super) model_id: String,
    pub(super) strict: bool,
    /// Auto-named tool calls served so far (`call_<n>`).
    pub(super) auto_calls: u64,
    /// Fixed answers set with [`FakeServer::set_route`], checked first.
    pub(super) routes: Vec<(String, String, u16, serde_json::Value)>,
    /// The cassette being replayed, if any.
    pub(super) replay: Option<Replay>,
    /// Recorder mode: pass every request on to this server.
    pub(super) upstream: Option<Arc<Upstream>>,
    /// Recorder mode: what was passed on, in order of completion.
    pub(super) recorded: Vec<Interaction>,
}

impl Shared {
    pub(super) fn is_shutdown(&self) -> bool {
        // Acquire pairs with the Release in `drop`: a thread that sees the
        // wake-up connection or a shut-down socket also sees the flag.
        self.shutdown.load(Ordering::Acquire)
    }

    /// Join the handler threads that are done, keeping their panics.
    fn reap(&self) {
        let mut handlers = self.handlers.lock();
        let (done, running): (Vec<_>, Vec<_>) =
            handlers.drain(..).partition(JoinHandle::is_finished);
        *handlers = running;
        drop(handlers);
        for h in done {
            self.join(h, Instant::now());
        }
    }

    /// Join `h`, waiting until `deadline` at most; record a panic.
    fn join(&self, h: JoinHandle<()>, deadline: Instant) {
        while !h.is_finished() {
            if Instant::now() >= deadline {
                log::warn!("FakeServer: a server thread did not stop in time; detaching it");
                return;
            }
            thread::sleep(Duration::from_millis(1));
        }
        if let Err(payload) = h.join() {
            let msg = crate::util::panic_message(&*payload).to_string();
            log::error!("FakeServer: a server thread panicked: {msg}");
            self.panics.lock().push(msg);
        }
    }
}

/// Removes a connection from [`Shared::conns`] when its thread ends, even by
/// panic, so the socket is really closed.
struct Registration<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.shared.conns.lock().remove(&self.id);
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut next_id = 0u64;
    for stream in listener.incoming() {
        if shared.is_shutdown() {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                log::warn!("FakeServer: accept failed: {e}");
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        next_id += 1;
        let id = next_id;
        match stream.try_clone() {
            Ok(clone) => {
                shared.conns.lock().insert(id, clone);
            }
            Err(e) => {
                log::warn!("FakeServer: cannot track connection: {e}");
                continue;
            }
        }
        let sh = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name(format!("fake-server-conn-{id}"))
            .spawn(move || {
                let _registration = Registration { shared: &sh, id };
                conn::serve(stream, &sh);
            });
        match spawned {
            Ok(handle) => shared.handlers.lock().push(handle),
            Err(e) => {
                log::error!("FakeServer: cannot spawn a connection thread: {e}");
                shared.conns.lock().remove(&id);
            }
        }
        shared.reap();
    }
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
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                replies: VecDeque::new(),
                requests: Vec::new(),
                chat_count: 0,
                unexpected: 0,
                rejections: Vec::new(),
                n_ctx: Some(4096),
                model_id: "fake-model".to_string(),
                strict: true,
                auto_calls: 0,
                routes: Vec::new(),
                replay: None,
                upstream: None,
                recorded: Vec::new(),
            }),
            shutdown: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            handlers: Mutex::new(Vec::new()),
            panics: Mutex::new(Vec::new()),
        });
        let sh = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("fake-server-accept".to_string())
            .spawn(move || accept_loop(&listener, &sh))?;
        log::debug!("FakeServer: listening on {addr}");
        Ok(FakeServer {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// The socket address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The OpenAI-style API base, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.root_url())
    }

    /// The server root, `http://127.0.0.1:PORT` (where llama.cpp's `/props`
    /// and `/health` live).
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A transport to this server: the server's model id (`fake-model`
    /// unless [`set_model_id`](FakeServer::set_model_id) changed it), API
    /// base [`base_url`](FakeServer::base_url), no key.
    pub fn transport(&self) -> ChatTransport {
        let model = self.shared.state.lock().model_id.clone();
        ChatTransport::new(model).with_api_base(self.base_url())
    }

    /// Queue `reply` for the next chat request (FIFO), as many times as its
    /// [`repeat`](Reply::repeat) count says. Returns `self` for chaining.
    pub fn push(&self, reply: Reply) -> &FakeServer {
        let times = reply.delivery.times;
        let mut st = self.shared.state.lock();
        for _ in 1..times {
            st.replies.push_back(reply.clone());
        }
        if times > 0 {
            st.replies.push_back(reply);
        }
        self
    }

    /// Every request received, any path, in arrival order (a request is
    /// recorded once its body has been read, before it is answered).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.state.lock().requests.clone()
    }

    /// Only the `POST …/chat/completions` requests, including those rejected
    /// in strict mode or left without a reply. Request `#N` in the server's
    /// messages is `chat_requests()[N - 1]`.
    pub fn chat_requests(&self) -> Vec<RecordedRequest> {
        let st = self.shared.state.lock();
        st.requests
            .iter()
            .filter(|r| r.is_chat())
            .cloned()
            .collect()
    }

    /// Scripted replies not yet served.
    pub fn remaining(&self) -> usize {
        self.shared.state.lock().replies.len()
    }

    /// Chat requests that found no scripted reply left (each was answered
    /// 500 and logged at `error`).
    pub fn unexpected_requests(&self) -> usize {
        self.shared.state.lock().unexpected
    }

    /// The messages of the chat requests rejected in strict mode (each was
    /// answered 400 and logged at `warn`), oldest first.
    pub fn rejections(&self) -> Vec<String> {
        self.shared.state.lock().rejections.clone()
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
        let st = self.shared.state.lock();
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
    /// what falls through to the usual routes.
    ///
    /// ```
    /// use pikuri::Agent;
    /// use pikuri::testing::{Cassette, FakeServer, Recorder, Reply};
    ///
    /// let upstream = FakeServer::start();
    /// upstream.push(Reply::text("Recorded answer."));
    /// let recorder = Recorder::start(&upstream.base_url());
    /// Agent::builder(recorder.transport_for("fake-model")).build()?.run_loop("Hi")?;
    ///
    /// let replay = FakeServer::start();
    /// replay.load_cassette(recorder.cassette());
    /// let out = Agent::builder(replay.transport()).build()?.run_loop("Hi")?;
    /// assert_eq!(out.answer.as_deref(), Some("Recorded answer."));
    /// replay.assert_all_used();
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn load_cassette(&self, cassette: Cassette) {
        self.shared.state.lock().replay = Some(Replay::new(cassette));
    }

    /// The messages of the requests that matched no cassette interaction
    /// (each was answered 500 and logged at `error`), oldest first. Each
    /// holds a line diff against the closest unused interaction.
    pub fn mismatches(&self) -> Vec<String> {
        self.shared
            .state
            .lock()
            .replay
            .as_ref()
            .map(|r| r.mismatches.clone())
            .unwrap_or_default()
    }

    /// Recorder mode: forward every request to `upstream`.
    pub(super) fn set_upstream(&self, upstream: Upstream) {
        self.shared.state.lock().upstream = Some(Arc::new(upstream));
    }

    /// Recorder mode: the interactions passed on so far.
    pub(super) fn recorded(&self) -> Vec<Interaction> {
        self.shared.state.lock().recorded.clone()
    }

    /// The context size `/props` and `/v1/models` report (default
    /// `Some(4096)`). `None` makes `/props` answer 404 and leaves `meta` out
    /// of `/v1/models`, like a server that does not say.
    pub fn set_context_size(&self, n_ctx: Option<u64>) {
        self.shared.state.lock().n_ctx = n_ctx;
    }

    /// The model id `/v1/models` lists and responses name when the reply
    /// sets none (default `"fake-model"`).
    pub fn set_model_id(&self, id: &str) {
        self.shared.state.lock().model_id = id.to_string();
    }

    /// Turn strict request validation on or off (default on). See the
    /// [module docs](super#strict-mode).
    pub fn set_strict(&self, on: bool) {
        self.shared.state.lock().strict = on;
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
        let mut st = self.shared.state.lock();
        st.routes.retain(|(m, p, _, _)| !(m == method && p == path));
        st.routes
            .push((method.to_string(), path.to_string(), status, body));
    }
}

impl fmt::Debug for FakeServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.state.lock();
        f.debug_struct("FakeServer")
            .field("addr", &self.addr)
            .field("remaining", &st.replies.len())
            .field("requests", &st.requests.len())
            .field("unexpected", &st.unexpected)
            .field("strict", &st.strict)
            .field("replaying", &st.replay.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let shared = &self.shared;
        shared.shutdown.store(true, Ordering::Release);
        // Wake the accept thread, blocked in `accept`.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let deadline = Instant::now() + JOIN_TIMEOUT;
        if let Some(accept) = self.accept.take() {
            shared.join(accept, deadline);
        }
        for stream in shared.conns.lock().values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let handlers = std::mem::take(&mut *shared.handlers.lock());
        for h in handlers {
            shared.join(h, deadline);
        }

        let st = shared.state.lock();
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
        drop(st);
        let panics = std::mem::take(&mut *shared.panics.lock());
        assert!(
            panics.is_empty() || thread::panicking(),
            "FakeServer: server thread panicked: {}",
            panics.join("; ")
        );
    }
}
