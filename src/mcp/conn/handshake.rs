//! The start of a connection: the modern `server/discover` probe and its
//! fallback to the legacy `initialize` handshake, what the server told
//! (`InitInfo`), and the `subscriptions/listen` stream the modern
//! generation opens after it. Requests and dispatch are the parent's
//! ([`Conn`]); this file only says what is asked and how the answers are
//! read.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, bounded};
use serde_json::{Value, json};

use super::{Conn, Opts, merge_meta};
use crate::mcp::jsonrpc::{self, LATEST_VERSION, MODERN_ERRORS, MODERN_VERSION, RpcError};

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
        let result = self.request("initialize", init_params(self.asker.is_some()), &opts)?;
        let info = parse_init(&result, accepted)?;
        if let Some(wire) = self.wire.get() {
            wire.set_protocol_version(&info.protocol_version);
        }
        self.send(jsonrpc::notification("notifications/initialized", None))?;
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
        let meta = modern_meta(self.asker.is_some());
        if let Some(wire) = self.wire.get() {
            wire.set_protocol_version(MODERN_VERSION);
        }
        let mut params = json!({});
        merge_meta(&mut params, &meta);
        let legacy = |why: &dyn std::fmt::Display| {
            log::debug!(target: "pikuri::mcp", "[{}] server/discover: {why}; trying initialize", self.name);
            if let Some(wire) = self.wire.get() {
                wire.set_protocol_version("");
            }
            Ok(None)
        };
        let result = match self.request("server/discover", params, &opts) {
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
