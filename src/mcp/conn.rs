//! One live connection to one server, whatever the transport: request ids,
//! the table of requests waiting for an answer, and the dispatch of
//! everything the server sends. How a connection starts (the
//! `server/discover` probe, the `initialize` handshake, the
//! `subscriptions/listen` stream) is in `conn/handshake.rs`.
//!
//! A request registers a one-slot channel under its id, fixes its deadline
//! (the timeout counts from here), hands the message to the transport and
//! waits in a `select!` on three things: the answer, the caller's cancel
//! hook, and the deadline. Handing over is bounded the same way: the stdio
//! transport queues the message for its writer thread and, when that queue
//! is full (a server that stopped reading its stdin), waits on the same
//! deadline and cancel, and on the request failing (the connection closed
//! or died); HTTP hands it to a worker thread at once. The transport's
//! reader (the stdio reader thread, or the HTTP worker reading a response)
//! calls [`Conn::dispatch`], which completes the waiting request. So a
//! cancel or a timeout never waits for a write or a read to return: the
//! waiter just stops waiting, tells the server (`notifications/cancelled`)
//! and drops the id; an answer that comes later is logged and ignored.
//!
//! # Floods
//!
//! The reader completes requests itself, at once, but hands what the server
//! notifies (progress, log messages) to a thread of its own through a
//! bounded queue ([`NOTICE_QUEUE`]); when that queue is full, the notice is
//! dropped and counted, and the count is logged at `warn`. So a server
//! that sends 100,000 notifications before its answer, or a listener slow
//! to take the events, never delays the answer: its cost is parsing the
//! lines. `tools/list_changed` is never dropped (it only sets a flag, on
//! the reader).
//!
//! # Secrets
//!
//! Everything the server sends passes [`Conn::dispatch`], which removes the
//! connection's [`Secrets`] from every string of it before anything else
//! reads it; errors of the transport pass [`Conn::fail`] and
//! [`Conn::fail_all`], which do the same.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError, at, bounded, select};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::input::{self, Asker};
use super::jsonrpc::{self, Incoming, METHOD_NOT_FOUND, RpcError};
use crate::Cancellable;
use crate::util::{Secrets, instant_after};

mod handshake;

pub(super) use handshake::{DISCOVER_FAILED, INIT_FAILED, InitInfo, init_params, parse_init};

/// How many notices wait for the notice thread before more are dropped.
pub(super) const NOTICE_QUEUE: usize = 1024;

/// What a server said that the host may want to see (progress, log
/// messages, a changed tool list).
#[derive(Clone, Debug)]
pub(super) enum Notice {
    Progress {
        server: Arc<str>,
        tool: String,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    Log {
        server: Arc<str>,
        level: String,
        logger: Option<String>,
        data: Value,
    },
    ToolsChanged {
        server: Arc<str>,
    },
    /// `notifications/resources/list_changed` or `.../prompts/list_changed`.
    ListChanged {
        server: Arc<str>,
        /// `"resources"` or `"prompts"`.
        what: &'static str,
    },
}

pub(super) type Observer = Arc<dyn Fn(Notice) + Send + Sync>;

/// An answer on its way to the caller that waits for it.
type Answer = (Sender<Result<Value, RpcError>>, Result<Value, RpcError>);

/// What the notice thread takes, in the order the server sent it.
enum Queued {
    Notice(Notice),
    /// An answer that came after notices still queued: it waits its turn,
    /// so a tool's progress reaches the listeners before its result.
    Answer(Answer),
}

/// The transport under a connection (`stdio.rs`, `http.rs`). A trait, so
/// that the transports depend on the connection (they hand what they read
/// to [`Conn::dispatch`]) and the connection does not depend on them.
pub(super) trait Wire: Send + Sync {
    /// Hand one message to the server. `id` is the request that waits for
    /// the answer (`None` for notifications and responses); a transport
    /// that fails later, off this thread, fails that request on `conn`.
    /// With `bound`, a transport that cannot take the message at once waits
    /// no longer than it allows; without, it never waits (a message it
    /// cannot take is an error).
    fn send(
        &self,
        conn: &Arc<Conn>,
        msg: Value,
        id: Option<u64>,
        bound: Option<&Bound<'_>>,
    ) -> Result<(), RpcError>;
    /// Hand a notification to the server and return once the server has
    /// it, waiting until `deadline` at most (`timeout` names that bound in
    /// the error). By default the same as `send`: a transport that keeps
    /// the order (a pipe) has delivered it before anything sent later.
    /// HTTP posts each message on its own, so it waits for the POST's
    /// answer (the 202).
    fn notify_delivered(
        &self,
        conn: &Arc<Conn>,
        msg: Value,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), RpcError> {
        let _ = (deadline, timeout);
        self.send(conn, msg, None, None)
    }
    /// The protocol version `initialize` agreed on. Only HTTP needs it
    /// (every later request carries it as a header).
    fn set_protocol_version(&self, _version: &str) {}
    /// Close the transport; `name` is the server's, for the log.
    fn close(&self, name: &str);
}

/// What ends a wait to hand a request to the transport: its deadline, the
/// caller's cancel, or the request failing meanwhile (the connection was
/// closed or died).
pub(super) struct Bound<'a> {
    pub(super) deadline: Instant,
    /// The request's timeout, for the error.
    pub(super) timeout: Duration,
    pub(super) cancel: &'a Receiver<()>,
    pub(super) failed: &'a Receiver<Result<Value, RpcError>>,
}

impl Bound<'_> {
    /// Send `item` on `tx`, waiting at most as the bound allows.
    pub(super) fn send<T>(&self, tx: &Sender<T>, item: T) -> Result<(), RpcError> {
        select! {
            send(tx, item) -> sent => sent.map_err(|_| RpcError::Closed("the server's stdin is closed".into())),
            recv(self.cancel) -> _ => Err(RpcError::Cancelled),
            recv(self.failed) -> failed => Err(match failed {
                Ok(Err(e)) => e,
                _ => RpcError::Closed("connection dropped".into()),
            }),
            recv(at(self.deadline)) -> _ => Err(RpcError::Timeout(self.timeout)),
        }
    }
}

/// Options of one request.
pub(super) struct Opts<'a> {
    pub(super) timeout: Duration,
    pub(super) cancel: Option<&'a Cancellable>,
    /// Ask for progress notifications, reported under this label.
    pub(super) progress: Option<String>,
}

pub(super) struct Conn {
    pub(super) name: Arc<str>,
    wire: OnceLock<Box<dyn Wire>>,
    pending: Mutex<HashMap<u64, Sender<Result<Value, RpcError>>>>,
    progress: Mutex<HashMap<u64, String>>,
    next_id: AtomicU64,
    closed: Mutex<Option<String>>,
    pub(super) tools_dirty: AtomicBool,
    /// Set by `notifications/resources/list_changed`.
    pub(super) resources_dirty: AtomicBool,
    /// Set by `notifications/prompts/list_changed`.
    pub(super) prompts_dirty: AtomicBool,
    /// The modern generation's per-request `_meta` (version, client info
    /// and capabilities), merged into every request; `None` for a 2025
    /// server (and during `initialize`).
    modern: Mutex<Option<Value>>,
    /// Who answers the server's input requests; `None`: refused.
    pub(super) asker: Option<Asker>,
    /// The cancel of the call in flight, for a 2025 `elicitation/create`
    /// sent during it.
    active_cancel: Mutex<Option<Cancellable>>,
    /// The `subscriptions/listen` request's answer slot, while one is open.
    listen: Mutex<Option<Receiver<Result<Value, RpcError>>>>,
    /// Notices for the notice thread (see the module docs on floods);
    /// `None` if that thread could not start (notices are then handled on
    /// the reader).
    notices: Option<Sender<Queued>>,
    /// Notices queued or being delivered (see [`Conn::complete`]).
    queued: Arc<AtomicU64>,
    observer: Option<Observer>,
    /// Notices dropped since the notice thread last reported it.
    shed: Arc<AtomicU64>,
    /// Redacted from everything the server sends.
    pub(super) secrets: Secrets,
}

impl Conn {
    pub(super) fn new(
        name: Arc<str>,
        observer: Option<Observer>,
        secrets: Secrets,
        asker: Option<Asker>,
    ) -> Arc<Conn> {
        let shed = Arc::new(AtomicU64::new(0));
        let queued = Arc::new(AtomicU64::new(0));
        let (tx, rx) = bounded::<Queued>(NOTICE_QUEUE);
        let thread_name = format!("mcp-{name}-notices");
        let (n, o, s) = (Arc::clone(&name), observer.clone(), Arc::clone(&shed));
        let in_queue = Arc::clone(&queued);
        // The thread ends when the connection (the only sender) is dropped.
        let notices = match thread::Builder::new()
            .name(thread_name)
            .spawn(move || {
                for queued in rx {
                    let notice = match queued {
                        Queued::Notice(notice) => notice,
                        Queued::Answer((tx, outcome)) => {
                            let _ = tx.try_send(outcome);
                            continue;
                        }
                    };
                    deliver(o.as_ref(), notice);
                    in_queue.fetch_sub(1, Ordering::AcqRel);
                    let dropped = s.swap(0, Ordering::Relaxed);
                    if dropped > 0 {
                        log::warn!(target: "pikuri::mcp", "[{n}] dropped {dropped} notifications: they came faster than they were handled");
                    }
                }
            }) {
            Ok(_) => Some(tx),
            Err(e) => {
                log::warn!(target: "pikuri::mcp", "[{name}] could not start the notice thread ({e}); notices are handled on the reader");
                None
            }
        };
        Arc::new(Conn {
            name,
            wire: OnceLock::new(),
            pending: Mutex::new(HashMap::new()),
            progress: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: Mutex::new(None),
            tools_dirty: AtomicBool::new(false),
            resources_dirty: AtomicBool::new(false),
            prompts_dirty: AtomicBool::new(false),
            modern: Mutex::new(None),
            asker,
            active_cancel: Mutex::new(None),
            listen: Mutex::new(None),
            notices,
            queued,
            observer,
            shed,
            secrets,
        })
    }

    pub(super) fn set_wire(&self, wire: Box<dyn Wire>) {
        let _ = self.wire.set(wire);
    }

    pub(super) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Why the connection is unusable, if it is.
    pub(super) fn closed_reason(&self) -> Option<String> {
        self.closed.lock().clone()
    }

    /// Send a message without waiting for anything.
    pub(super) fn send(self: &Arc<Self>, msg: Value) -> Result<(), RpcError> {
        match self.wire.get() {
            Some(wire) => wire.send(self, msg, None, None),
            None => Err(RpcError::Closed("not connected".into())),
        }
    }

    /// Send a request and wait for its answer; see the module docs.
    pub(super) fn request(
        self: &Arc<Self>,
        method: &str,
        mut params: Value,
        opts: &Opts<'_>,
    ) -> Result<Value, RpcError> {
        if let Some(why) = self.closed_reason() {
            return Err(RpcError::Closed(why));
        }
        if opts.cancel.is_some_and(Cancellable::is_cancelled) {
            return Err(RpcError::Cancelled);
        }
        // The timeout counts from here: writing the request is part of it,
        // and nothing the server sends meanwhile (progress included)
        // extends it.
        let deadline = instant_after(opts.timeout);
        let id = self.next_id();
        let (tx, rx) = bounded(1);
        self.pending.lock().insert(id, tx);
        if let Some(meta) = self.modern.lock().as_ref() {
            merge_meta(&mut params, meta);
        }
        if let Some(label) = &opts.progress {
            merge_meta(&mut params, &json!({"progressToken": id}));
            self.progress.lock().insert(id, label.clone());
            if let Some(c) = opts.cancel {
                *self.active_cancel.lock() = Some(c.clone());
            }
        }
        // `cancel_tx` lives until the wait ends (a dropped sender would wake
        // the `select!` as if cancelled).
        let (cancel_tx, cancel_rx) = bounded::<()>(1);
        let _hook = opts.cancel.map(|c| {
            let tx = cancel_tx.clone();
            // Runs on the cancelling thread: only wakes the waiter up.
            c.on_cancel(move || {
                let _ = tx.try_send(());
            })
        });
        let msg = jsonrpc::request(id, method, params);
        let bound = Bound {
            deadline,
            timeout: opts.timeout,
            cancel: &cancel_rx,
            failed: &rx,
        };
        let sent = match self.wire.get() {
            Some(wire) => wire.send(self, msg, Some(id), Some(&bound)),
            None => Err(RpcError::Closed("not connected".into())),
        };
        if let Err(e) = sent {
            // Never handed over: there is nothing to cancel at the server.
            self.forget(id);
            if !matches!(e, RpcError::Cancelled | RpcError::Timeout(_)) {
                log::debug!(target: "pikuri::mcp", "[{}] {method} #{id} not sent: {e}", self.name);
            }
            return Err(e);
        }
        select! {
            recv(rx) -> answer => {
                self.progress.lock().remove(&id);
                answer.unwrap_or_else(|_| Err(RpcError::Closed("connection dropped".into())))
            }
            recv(cancel_rx) -> _ => {
                drop(cancel_tx);
                self.abandon(id, method, "cancelled by the user");
                Err(RpcError::Cancelled)
            }
            recv(at(deadline)) -> _ => {
                let why = format!("no answer within {} s", opts.timeout.as_secs_f64());
                self.abandon(id, method, &why);
                Err(RpcError::Timeout(opts.timeout))
            }
        }
    }

    fn forget(&self, id: u64) {
        self.pending.lock().remove(&id);
        self.progress.lock().remove(&id);
    }

    /// Stop waiting for `id` and tell the server (never for `initialize`,
    /// which the spec forbids cancelling).
    fn abandon(self: &Arc<Self>, id: u64, method: &str, reason: &str) {
        self.forget(id);
        log::debug!(target: "pikuri::mcp", "[{}] {method} #{id} abandoned: {reason}", self.name);
        if method != "initialize" {
            let note = jsonrpc::notification(
                "notifications/cancelled",
                Some(json!({"requestId": id, "reason": reason})),
            );
            if let Err(e) = self.send(note) {
                log::debug!(target: "pikuri::mcp", "[{}] could not send cancellation: {e}", self.name);
            }
        }
    }

    /// Whether request `id` is still waited for (not answered, failed,
    /// timed out or cancelled).
    pub(super) fn is_waiting(&self, id: u64) -> bool {
        self.pending.lock().contains_key(&id)
    }

    /// Fail one waiting request (a transport saw it die).
    pub(super) fn fail(&self, id: u64, err: RpcError) {
        if let Some(tx) = self.pending.lock().remove(&id) {
            let _ = tx.try_send(Err(err.redacted(&self.secrets)));
        }
    }

    /// Mark the connection dead and fail every waiting request.
    pub(super) fn fail_all(&self, reason: &str) {
        let reason = self.secrets.redact(reason);
        self.closed.lock().get_or_insert_with(|| reason.to_string());
        let waiting: Vec<_> = self.pending.lock().drain().collect();
        for (_, tx) in waiting {
            let _ = tx.try_send(Err(RpcError::Closed(reason.to_string())));
        }
    }

    /// Handle one message from the server; returns the id of the request it
    /// answered, if any. The secrets are redacted from it first.
    pub(super) fn dispatch(self: &Arc<Self>, mut msg: Value) -> Option<u64> {
        self.secrets.redact_json(&mut msg);
        match Incoming::classify(msg) {
            Incoming::Response {
                id: Some(id),
                outcome,
            } => {
                self.progress.lock().remove(&id);
                match self.pending.lock().remove(&id) {
                    Some(tx) => self.complete(tx, outcome),
                    None => log::debug!(
                        target: "pikuri::mcp",
                        "[{}] answer to #{id} arrived after it was abandoned; ignored",
                        self.name
                    ),
                }
                Some(id)
            }
            Incoming::Response { id: None, outcome } => {
                log::warn!(target: "pikuri::mcp", "[{}] response without a usable id: {outcome:?}", self.name);
                None
            }
            Incoming::Request { id, method, params } => {
                if method == "elicitation/create" && self.asker.is_some() {
                    self.elicit_2025(id, params);
                    return None;
                }
                let reply = if method == "ping" {
                    jsonrpc::result(id, json!({}))
                } else {
                    // sampling/createMessage, elicitation/create, roots/list, …
                    log::debug!(target: "pikuri::mcp", "[{}] refused server request `{method}`", self.name);
                    let text = format!("method not supported by this client: {method}");
                    jsonrpc::error(id, METHOD_NOT_FOUND, &text)
                };
                if let Err(e) = self.send(reply) {
                    log::debug!(target: "pikuri::mcp", "[{}] could not answer `{method}`: {e}", self.name);
                }
                None
            }
            Incoming::Notification { method, params } => {
                self.notification(&method, &params);
                None
            }
            Incoming::Invalid(why) => {
                log::warn!(target: "pikuri::mcp", "[{}] skipped a message that is not JSON-RPC: {why}", self.name);
                None
            }
        }
    }

    /// Classify a notification on the reader; what is more than a flag goes
    /// to the notice thread (see the module docs on floods).
    fn notification(&self, method: &str, params: &Value) {
        let server = Arc::clone(&self.name);
        let notice = match method {
            "notifications/tools/list_changed" => {
                self.tools_dirty.store(true, Ordering::SeqCst);
                log::debug!(target: "pikuri::mcp", "[{server}] tool list changed");
                if self.observer.is_none() {
                    return;
                }
                Notice::ToolsChanged { server }
            }
            "notifications/resources/list_changed" | "notifications/prompts/list_changed" => {
                let what = if method.contains("resources") {
                    self.resources_dirty.store(true, Ordering::SeqCst);
                    "resources"
                } else {
                    self.prompts_dirty.store(true, Ordering::SeqCst);
                    "prompts"
                };
                log::debug!(target: "pikuri::mcp", "[{server}] {what} list changed");
                if self.observer.is_none() {
                    return;
                }
                Notice::ListChanged { server, what }
            }
            "notifications/subscriptions/acknowledged" => {
                log::debug!(target: "pikuri::mcp", "[{server}] subscription acknowledged: {}", params["notifications"]);
                return;
            }
            "notifications/progress" => {
                let token = &params["progressToken"];
                let token = token
                    .as_u64()
                    .or_else(|| token.as_str().and_then(|s| s.parse().ok()));
                let Some(tool) = token.and_then(|t| self.progress.lock().get(&t).cloned()) else {
                    return;
                };
                Notice::Progress {
                    server,
                    tool,
                    progress: params["progress"].as_f64().unwrap_or(0.0),
                    total: params["total"].as_f64(),
                    message: params["message"].as_str().map(String::from),
                }
            }
            "notifications/message" => Notice::Log {
                server,
                level: params["level"].as_str().unwrap_or("info").to_string(),
                logger: params["logger"].as_str().map(String::from),
                data: params.get("data").cloned().unwrap_or(Value::Null),
            },
            other => {
                log::debug!(target: "pikuri::mcp", "[{server}] ignored notification `{other}`");
                return;
            }
        };
        let Some(tx) = &self.notices else {
            deliver(self.observer.as_ref(), notice);
            return;
        };
        self.queued.fetch_add(1, Ordering::AcqRel);
        match tx.try_send(Queued::Notice(notice)) {
            Ok(()) => {}
            // A flood, or a slow listener: the answers come first.
            Err(TrySendError::Full(_)) => {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                self.shed.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(queued)) => {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                if let Queued::Notice(notice) = queued {
                    deliver(self.observer.as_ref(), notice);
                }
            }
        }
    }

    /// Answer a 2025 `elicitation/create` on a thread of its own (the user
    /// may take minutes; the reader must not wait), bounded by the cancel
    /// of the call in flight.
    fn elicit_2025(self: &Arc<Self>, id: Value, params: Value) {
        let conn = Arc::clone(self);
        let spawned = thread::Builder::new()
            .name(format!("mcp-{}-elicit", self.name))
            .spawn(move || {
                let cancel = conn.active_cancel.lock().clone();
                let reply = match input::elicit(
                    conn.asker.as_ref(),
                    &conn.name,
                    &params,
                    cancel.as_ref(),
                    None,
                ) {
                    Ok(answer) => jsonrpc::result(id, answer),
                    Err(_) => jsonrpc::result(id, json!({"action": "cancel"})),
                };
                if let Err(e) = conn.send(reply) {
                    log::debug!(target: "pikuri::mcp", "[{}] could not answer elicitation/create: {e}", conn.name);
                }
            });
        if let Err(e) = spawned {
            log::warn!(target: "pikuri::mcp", "[{}] could not start an input thread: {e}", self.name);
        }
    }

    /// Hand an answer to the caller waiting for it: after the notices the
    /// server sent before it (a tool's progress precedes its result), so
    /// through the notice thread while any is queued or being delivered,
    /// and at once otherwise, or when that queue is full (a flood: notices
    /// are being dropped then, and the answer must not wait behind them).
    fn complete(&self, tx: Sender<Result<Value, RpcError>>, outcome: Result<Value, RpcError>) {
        if let Some(queue) = &self.notices
            && self.queued.load(Ordering::Acquire) > 0
        {
            if let Err(e) = queue.try_send(Queued::Answer((tx, outcome)))
                && let Queued::Answer((tx, outcome)) = e.into_inner()
            {
                let _ = tx.try_send(outcome);
            }
            return;
        }
        let _ = tx.try_send(outcome);
    }

    /// Close the transport (stdio: stdin, then the process group; HTTP:
    /// DELETE the session) and fail whatever still waits.
    pub(super) fn close(&self) {
        self.fail_all("closed");
        if let Some(wire) = self.wire.get() {
            wire.close(&self.name);
        }
    }
}

/// Log a notice and hand it to the observer (on the notice thread).
fn deliver(observer: Option<&Observer>, notice: Notice) {
    match &notice {
        Notice::Progress { .. } => log::debug!(target: "pikuri::mcp", "{notice:?}"),
        Notice::Log {
            server,
            level,
            logger,
            data,
        } => {
            let lvl = match level.as_str() {
                "debug" => log::Level::Debug,
                "info" | "notice" => log::Level::Info,
                "warning" => log::Level::Warn,
                _ => log::Level::Error,
            };
            let text = data.as_str().map_or_else(|| data.to_string(), String::from);
            log::log!(target: "pikuri::mcp", lvl, "[{server}] {}: {text}", logger.as_deref().unwrap_or("server"));
        }
        Notice::ToolsChanged { .. } | Notice::ListChanged { .. } => {}
    }
    if let Some(observer) = observer {
        observer(notice);
    }
}

/// Merge the keys of `meta` into `params._meta` (made an object if it is
/// not one), keeping keys already there.
pub(super) fn merge_meta(params: &mut Value, meta: &Value) {
    if !params.is_object() {
        *params = json!({});
    }
    let Some(p) = params.as_object_mut() else {
        return;
    };
    let slot = p.entry("_meta").or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    if let (Some(slot), Some(meta)) = (slot.as_object_mut(), meta.as_object()) {
        for (k, v) in meta {
            slot.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
}
