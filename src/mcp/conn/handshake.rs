//! The start of a connection: the modern `server/discover` probe and its
//! fallback to the legacy `initialize` handshake, what the server told
//! (`InitInfo`), and the `subscriptions/listen` stream the modern
//! generation opens after it. Requests and dispatch are the parent's
//! ([`Conn`]); this file only says what is asked and how the answers are
//! read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, at, bounded, never, select};
use serde_json::{Value, json};

use super::{Bound, Conn, Opts, merge_meta};
use crate::mcp::jsonrpc::{self, LATEST_VERSION, MODERN_ERRORS, MODERN_VERSION, RpcError};
use crate::util::instant_after;

/// What `initialize` (or `server/discover`) told us about the server.
#[derive(Clone, Debug, Default)]
pub(in crate::mcp) struct InitInfo {
    pub(in crate::mcp) protocol_version: String,
    /// The server's `capabilities`, as sent.
    pub(in crate::mcp) capabilities: Value,
    pub(in crate::mcp) name: String,
    pub(in crate::mcp) title: Option<String>,
    pub(in crate::mcp) version: Option<String>,
    pub(in crate::mcp) instructions: Option<String>,
}

/// The prefix of an error of the `server/discover` probe.
pub(in crate::mcp) const DISCOVER_FAILED: &str = "server/discover failed: ";
/// The prefix of an error of the `initialize` handshake.
pub(in crate::mcp) const INIT_FAILED: &str = "initialize failed: ";

/// An answer slot's outcome: a dropped slot is a dropped connection.
fn answer(
    got: Result<Result<Value, RpcError>, crossbeam_channel::RecvError>,
) -> Result<Value, RpcError> {
    got.unwrap_or_else(|_| Err(RpcError::Closed("connection dropped".into())))
}

impl Conn {
    /// The `initialize` handshake, then `notifications/initialized`.
    pub(in crate::mcp) fn initialize(
        self: &Arc<Self>,
        timeout: Duration,
        accepted: &[&str],
    ) -> Result<InitInfo, RpcError> {
        let opts = Opts {
            timeout,
            cancel: None,
            progress: None,
        };
        let deadline = instant_after(timeout);
        let result = self.request("initialize", init_params(self.asker.is_some()), &opts)?;
        self.initialized(&result, accepted, deadline, timeout)
    }

    /// Read `initialize`'s `result` and tell the server the handshake is
    /// done. The handshake is complete when the server has
    /// `notifications/initialized`, not when it was handed over: over
    /// HTTP, a request posted before the notification's 202 may reach a
    /// server that is not yet initialized (the SDK's answers -32602).
    /// `deadline` ends the wait, `timeout` names it in the error.
    fn initialized(
        self: &Arc<Self>,
        result: &Value,
        accepted: &[&str],
        deadline: Instant,
        timeout: Duration,
    ) -> Result<InitInfo, RpcError> {
        let info = parse_init(result, accepted)?;
        let Some(wire) = self.wire.get() else {
            return Err(RpcError::Closed("not connected".into()));
        };
        wire.set_protocol_version(&info.protocol_version);
        let note = jsonrpc::notification("notifications/initialized", None);
        wire.notify_delivered(self, note, deadline, timeout)?;
        Ok(info)
    }

    /// The modern probe: `server/discover` with the 2026 `_meta`. On
    /// success the connection speaks the modern generation from then on.
    /// `Ok(None)` means "a legacy server: run `initialize`" (any error that
    /// is not a recognized modern one, or no answer within `timeout`, as
    /// the specification's stdio and HTTP fallback rules say).
    pub(in crate::mcp) fn discover(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Result<Option<InitInfo>, RpcError> {
        let opts = Opts {
            timeout,
            cancel: None,
            progress: None,
        };
        let (params, meta) = self.discover_params();
        let got = self.request("server/discover", params, &opts);
        self.judge_discover(got, meta)
    }

    /// The handshake over a transport that keeps the order (stdio): the
    /// probe; when it is not answered within `probe`, `initialize` is
    /// queued behind it and both are waited for until `startup` ends.
    ///
    /// A server that has not answered within `probe` is either slow to
    /// start (the first `npx -y` or `uvx` downloads before the server
    /// runs) or a 2025 one that ignores unknown methods. Abandoning the
    /// probe would refuse the first kind: it reads the queued probe once
    /// it runs, takes the client for a modern one and refuses the
    /// `initialize` that follows. So the probe stays pending, and a pipe
    /// delivers both in order: a discover result makes the connection
    /// modern (a late answer to `initialize`, refused or not, is dropped;
    /// `initialize` is never cancelled, as the specification asks); a
    /// legacy answer to the probe, or an answer to `initialize` that comes
    /// first, makes it a 2025 one. An `initialize` refused while the probe
    /// is still pending waits for the probe (a server that answers out of
    /// order). Returns the prefix for an error.
    pub(in crate::mcp) fn discover_in_order(
        self: &Arc<Self>,
        probe: Duration,
        startup: Duration,
        accepted: &[&str],
    ) -> (Result<InitInfo, RpcError>, &'static str) {
        let deadline = instant_after(startup);
        let (params, meta) = self.discover_params();
        let (probe_id, probe_rx) = match self.begin("server/discover", params, deadline, startup) {
            Ok(sent) => sent,
            Err(e) => return (Err(e), DISCOVER_FAILED),
        };
        let alone = instant_after(probe).min(deadline);
        select! {
            recv(probe_rx) -> got => {
                return match self.judge_discover(answer(got), meta) {
                    Ok(Some(info)) => (Ok(info), ""),
                    Ok(None) => {
                        let left = deadline.saturating_duration_since(std::time::Instant::now());
                        (self.initialize(left, accepted), INIT_FAILED)
                    }
                    Err(e) => (Err(e), DISCOVER_FAILED),
                };
            }
            recv(at(alone)) -> _ => {}
        }
        log::debug!(
            target: "pikuri::mcp",
            "[{}] no answer to server/discover within {} s; asking initialize too",
            self.name,
            probe.as_secs_f64()
        );
        let init = init_params(self.asker.is_some());
        let (init_id, init_rx) = match self.begin("initialize", init, deadline, startup) {
            Ok(sent) => sent,
            Err(e) => {
                self.forget(probe_id);
                return (Err(e), INIT_FAILED);
            }
        };
        let (mut probe_rx, mut init_rx) = (Some(probe_rx), Some(init_rx));
        // `initialize`'s refusal, kept while the probe may still say modern.
        let mut refused = None;
        loop {
            let waiting_probe = probe_rx.clone().unwrap_or_else(never);
            let waiting_init = init_rx.clone().unwrap_or_else(never);
            select! {
                recv(waiting_probe) -> got => {
                    probe_rx = None;
                    match self.judge_discover(answer(got), meta.clone()) {
                        Ok(Some(info)) => {
                            self.forget(init_id);
                            return (Ok(info), "");
                        }
                        Ok(None) => {
                            if let Some(e) = refused.take() {
                                return (Err(e), INIT_FAILED);
                            }
                        }
                        Err(e) => {
                            self.forget(init_id);
                            return (Err(e), DISCOVER_FAILED);
                        }
                    }
                }
                recv(waiting_init) -> got => {
                    init_rx = None;
                    match answer(got) {
                        Ok(result) => {
                            self.forget(probe_id);
                            let shaken = self.initialized(&result, accepted, deadline, startup);
                            return (shaken, INIT_FAILED);
                        }
                        Err(e @ RpcError::Closed(_)) => {
                            self.forget(probe_id);
                            return (Err(e), INIT_FAILED);
                        }
                        Err(e) if probe_rx.is_some() => refused = Some(e),
                        Err(e) => return (Err(e), INIT_FAILED),
                    }
                }
                recv(at(deadline)) -> _ => {
                    self.forget(probe_id);
                    self.forget(init_id);
                    return (Err(RpcError::Timeout(startup)), INIT_FAILED);
                }
            }
        }
    }

    /// The probe's params (with the modern `_meta`) and that `_meta`; the
    /// transport is told the modern version for the probe.
    fn discover_params(&self) -> (Value, Value) {
        let meta = modern_meta(self.asker.is_some());
        if let Some(wire) = self.wire.get() {
            wire.set_protocol_version(MODERN_VERSION);
        }
        let mut params = json!({});
        merge_meta(&mut params, &meta);
        (params, meta)
    }

    /// What the probe's answer says: modern (the connection keeps `meta`),
    /// legacy (`Ok(None)`), or a failure.
    fn judge_discover(
        &self,
        got: Result<Value, RpcError>,
        meta: Value,
    ) -> Result<Option<InitInfo>, RpcError> {
        let legacy = |why: &dyn std::fmt::Display| {
            log::debug!(target: "pikuri::mcp", "[{}] server/discover: {why}; trying initialize", self.name);
            if let Some(wire) = self.wire.get() {
                wire.set_protocol_version("");
            }
            Ok(None)
        };
        let result = match got {
            Ok(result) => result,
            Err(RpcError::Remote { code, message }) if MODERN_ERRORS.contains(&code) => {
                return Err(RpcError::Transport(format!(
                    "the server speaks a newer protocol but refused this client's {MODERN_VERSION}: {message} (code {code})"
                )));
            }
            Err(e @ (RpcError::Remote { .. } | RpcError::Timeout(_))) => return legacy(&e),
            // A 2025 server over HTTP refuses a request without a session:
            // 400, 404 or 405, without a modern error in the body.
            Err(RpcError::Status { status, message })
                if matches!(status, 400 | 404 | 405) && !names_modern_error(&message) =>
            {
                return legacy(&format!("http status {status}"));
            }
            Err(e) => return Err(e),
        };
        let info = parse_discover(&result)?;
        let Some(info) = info else {
            // A dual-era server listing only legacy versions.
            return legacy(&"no modern version offered");
        };
        *self.modern.lock() = Some(meta);
        Ok(Some(info))
    }

    /// Hand a request to the transport without waiting for its answer:
    /// its id and its answer slot. Handing over waits until `deadline` at
    /// most; `timeout` names that bound in the error.
    fn begin(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(u64, Receiver<Result<Value, RpcError>>), RpcError> {
        let id = self.next_id();
        let (tx, rx) = bounded(1);
        self.pending.lock().insert(id, tx);
        // Never cancelled: the sender lives until the hand-over is done.
        let (_never_cancelled, cancel) = bounded::<()>(1);
        let bound = Bound {
            deadline,
            timeout,
            cancel: &cancel,
            failed: &rx,
        };
        let sent = match self.wire.get() {
            Some(wire) => wire.send(
                self,
                jsonrpc::request(id, method, params),
                Some(id),
                Some(&bound),
            ),
            None => Err(RpcError::Closed("not connected".into())),
        };
        match sent {
            Ok(()) => Ok((id, rx)),
            Err(e) => {
                self.forget(id);
                Err(e)
            }
        }
    }

    /// Open a `subscriptions/listen` stream asking for `filter` (the
    /// 2026 replacement of the list-changed notifications outside a
    /// request): a request that is never answered while the stream lives.
    pub(in crate::mcp) fn listen(self: &Arc<Self>, filter: &Value) {
        let id = self.next_id();
        let (tx, rx) = bounded(1);
        self.pending.lock().insert(id, tx);
        let mut params = json!({"notifications": filter});
        if let Some(meta) = self.modern.lock().as_ref() {
            merge_meta(&mut params, meta);
        }
        let msg = jsonrpc::request(id, "subscriptions/listen", params);
        let sent = match self.wire.get() {
            Some(wire) => wire.send(self, msg, Some(id), None),
            None => Err(RpcError::Closed("not connected".into())),
        };
        if let Err(e) = sent {
            self.forget(id);
            log::debug!(target: "pikuri::mcp", "[{}] subscriptions/listen not sent: {e}", self.name);
            return;
        }
        *self.listen.lock() = Some(rx);
    }

    /// Whether a `subscriptions/listen` stream is open (opened, and neither
    /// ended by the server nor failed).
    pub(in crate::mcp) fn listening(&self) -> bool {
        self.closed_reason().is_none()
            && self.listen.lock().as_ref().is_some_and(Receiver::is_empty)
    }

    /// Whether this connection speaks the 2026 generation.
    pub(in crate::mcp) fn is_modern(&self) -> bool {
        self.modern.lock().is_some()
    }
}

pub(in crate::mcp) fn init_params(elicitation: bool) -> Value {
    json!({
        "protocolVersion": LATEST_VERSION,
        // No roots or sampling: such requests get -32601; elicitation only
        // with an input provider.
        "capabilities": capabilities(elicitation),
        "clientInfo": {"name": "pikuri", "version": env!("CARGO_PKG_VERSION")},
    })
}

fn capabilities(elicitation: bool) -> Value {
    if elicitation {
        json!({"elicitation": {"form": {}}})
    } else {
        json!({})
    }
}

/// The modern generation's per-request `_meta`.
fn modern_meta(elicitation: bool) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "pikuri", "version": env!("CARGO_PKG_VERSION")},
        "io.modelcontextprotocol/clientCapabilities": capabilities(elicitation),
    })
}

/// Whether an HTTP error body carries one of the modern JSON-RPC errors.
fn names_modern_error(body: &str) -> bool {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["code"].as_i64())
        .is_some_and(|c| MODERN_ERRORS.contains(&c))
}

/// A `DiscoverResult`: `Ok(None)` when it lists no modern version this
/// client speaks but a legacy one (try `initialize`); an error when it is
/// not a discover result at all, or lists no version this client speaks.
fn parse_discover(result: &Value) -> Result<Option<InitInfo>, RpcError> {
    let garbage = || {
        RpcError::Transport(format!(
            "the server answered server/discover with something that is not a discover result: {}",
            crate::util::excerpt(&result.to_string(), 200)
        ))
    };
    let Some(fields) = result.as_object() else {
        return Err(garbage());
    };
    // Some legacy servers answer every unknown method with an empty result.
    let Some(versions) = fields.get("supportedVersions") else {
        return Ok(None);
    };
    let versions: Vec<&str> = versions
        .as_array()
        .ok_or_else(garbage)?
        .iter()
        .map(|v| v.as_str().ok_or_else(garbage))
        .collect::<Result<_, _>>()?;
    if !versions.contains(&MODERN_VERSION) {
        if versions.iter().any(|v| jsonrpc::STDIO_VERSIONS.contains(v)) {
            return Ok(None);
        }
        return Err(RpcError::Transport(format!(
            "the server speaks protocol versions {versions:?}; this client supports {MODERN_VERSION}, {}",
            jsonrpc::STDIO_VERSIONS.join(", ")
        )));
    }
    let info = &result["_meta"]["io.modelcontextprotocol/serverInfo"];
    Ok(Some(InitInfo::read(MODERN_VERSION, result, info)))
}

pub(in crate::mcp) fn parse_init(result: &Value, accepted: &[&str]) -> Result<InitInfo, RpcError> {
    let version = result["protocolVersion"].as_str().unwrap_or_default();
    if !accepted.contains(&version) {
        return Err(RpcError::Transport(format!(
            "the server speaks protocol version {version:?}; this client supports {}",
            accepted.join(", ")
        )));
    }
    Ok(InitInfo::read(version, result, &result["serverInfo"]))
}

impl InitInfo {
    /// What a discover or initialize `result` says, the server's name,
    /// title and version read from `info` (where each generation puts
    /// them); blank strings count as absent.
    fn read(protocol_version: &str, result: &Value, info: &Value) -> InitInfo {
        let text = |v: &Value| {
            v.as_str()
                .filter(|s| !s.trim().is_empty())
                .map(String::from)
        };
        InitInfo {
            protocol_version: protocol_version.to_string(),
            capabilities: result.get("capabilities").cloned().unwrap_or(Value::Null),
            name: text(&info["name"]).unwrap_or_default(),
            title: text(&info["title"]),
            version: text(&info["version"]),
            instructions: text(&result["instructions"]),
        }
    }
}
