//! JSON-RPC 2.0 framing: what an incoming message is, how outgoing ones are
//! built, and the failures of one request.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::oauth::AuthError;
use crate::util::Secrets;

/// The protocol revision offered in `initialize`.
pub(super) const LATEST_VERSION: &str = "2025-06-18";
/// Revisions accepted when the server answers with one of them. 2024-11-05
/// had the old HTTP+SSE transport, so it is accepted over stdio only.
pub(super) const STDIO_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];
pub(super) const HTTP_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26"];

/// The one protocol revision of the modern generation this client speaks:
/// no `initialize`, a `server/discover` probe, version and capabilities in
/// each request's `_meta`.
pub(super) const MODERN_VERSION: &str = "2026-07-28";

/// Error codes by which a modern server says "I am modern, but ...":
/// header mismatch, a missing client capability, an unsupported version.
/// Any of them to the `server/discover` probe means "do not fall back".
pub(super) const MODERN_ERRORS: &[i64] = &[-32020, -32021, -32022];

/// JSON-RPC "method not found": the answer to sampling, elicitation,
/// roots/list and any other request the client does not serve.
pub(super) const METHOD_NOT_FOUND: i64 = -32601;

/// One incoming message, classified.
#[derive(Debug)]
pub(super) enum Incoming {
    /// A response (`result` or `error`) to our request `id`. Ids are ours, so
    /// numeric; a string of digits is accepted too.
    Response {
        id: Option<u64>,
        outcome: Result<Value, RpcError>,
    },
    /// A request from the server: must be answered.
    Request {
        id: Value,
        method: String,
        params: Value,
    },
    /// A notification from the server.
    Notification { method: String, params: Value },
    /// Not JSON-RPC.
    Invalid(String),
}

impl Incoming {
    pub(super) fn classify(mut msg: Value) -> Incoming {
        let Some(obj) = msg.as_object_mut() else {
            return Incoming::Invalid("not a JSON object".into());
        };
        let method = obj.get("method").and_then(Value::as_str).map(String::from);
        let params = obj.remove("params").unwrap_or(Value::Null);
        match (method, obj.remove("id")) {
            (Some(method), Some(id)) if !id.is_null() => Incoming::Request { id, method, params },
            (Some(method), _) => Incoming::Notification { method, params },
            (None, Some(id)) => {
                let id = id
                    .as_u64()
                    .or_else(|| id.as_str().and_then(|s| s.parse().ok()));
                let outcome = if let Some(result) = obj.remove("result") {
                    Ok(result)
                } else if let Some(err) = obj.get("error") {
                    Err(RpcError::Remote {
                        code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: err
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("(no message)")
                            .to_string(),
                    })
                } else {
                    return Incoming::Invalid("a response without result or error".into());
                };
                Incoming::Response { id, outcome }
            }
            (None, None) => Incoming::Invalid("neither a method nor an id".into()),
        }
    }
}

#[allow(clippy::needless_pass_by_value, reason = "moved into the json! value")]
pub(super) fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

pub(super) fn notification(method: &str, params: Option<Value>) -> Value {
    match params {
        Some(p) => json!({"jsonrpc": "2.0", "method": method, "params": p}),
        None => json!({"jsonrpc": "2.0", "method": method}),
    }
}

#[allow(clippy::needless_pass_by_value, reason = "moved into the json! value")]
pub(super) fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

#[allow(clippy::needless_pass_by_value, reason = "moved into the json! value")]
pub(super) fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Why a request got no result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum RpcError {
    /// The server answered with a JSON-RPC error.
    Remote { code: i64, message: String },
    /// No answer within the timeout (the server was told).
    Timeout(Duration),
    /// The caller's [`Cancellable`](crate::Cancellable) fired (the server was told).
    Cancelled,
    /// The connection is gone: the process exited, stdout closed, or it was
    /// closed by us.
    Closed(String),
    /// The transport failed (a bad body, a connection reset).
    Transport(String),
    /// The connection could not be made (HTTP: refused, unreachable, the
    /// name did not resolve).
    Unreachable(String),
    /// The server's requests for input could not be served (too many
    /// rounds, a kind this client does not offer).
    Input(String),
    /// The server answered with a non-success HTTP status.
    Status {
        status: u16,
        /// The start of the body.
        message: String,
    },
    /// The OAuth login or refresh that the server's 401 started failed.
    Auth(AuthError),
}

impl RpcError {
    /// The error without any of `secrets` in its text.
    pub(super) fn redacted(self, secrets: &Secrets) -> RpcError {
        let clean = |s: String| match secrets.redact(&s) {
            std::borrow::Cow::Owned(c) => c,
            std::borrow::Cow::Borrowed(_) => s,
        };
        match self {
            RpcError::Remote { code, message } => RpcError::Remote {
                code,
                message: clean(message),
            },
            RpcError::Closed(why) => RpcError::Closed(clean(why)),
            RpcError::Transport(why) => RpcError::Transport(clean(why)),
            RpcError::Input(why) => RpcError::Input(clean(why)),
            RpcError::Unreachable(why) => RpcError::Unreachable(clean(why)),
            RpcError::Status { status, message } => RpcError::Status {
                status,
                message: clean(message),
            },
            RpcError::Auth(e) => RpcError::Auth(e.map(clean)),
            e @ (RpcError::Timeout(_) | RpcError::Cancelled) => e,
        }
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcError::Remote { code, message } => write!(f, "{message} (code {code})"),
            RpcError::Timeout(d) => write!(f, "no answer within {} s", d.as_secs_f64()),
            RpcError::Cancelled => f.write_str("cancelled"),
            RpcError::Closed(why) => write!(f, "connection closed: {why}"),
            RpcError::Transport(why) | RpcError::Unreachable(why) | RpcError::Input(why) => {
                f.write_str(why)
            }
            RpcError::Status { status, message } if message.is_empty() => {
                write!(f, "http status {status}")
            }
            RpcError::Status { status, message } => write!(f, "http status {status}: {message}"),
            RpcError::Auth(e) => e.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_every_shape() {
        let r = Incoming::classify(json!({"jsonrpc":"2.0","id":3,"result":{"ok":true}}));
        assert!(matches!(
            r,
            Incoming::Response {
                id: Some(3),
                outcome: Ok(_)
            }
        ));
        let r = Incoming::classify(
            json!({"jsonrpc":"2.0","id":"4","error":{"code":-1,"message":"no"}}),
        );
        let Incoming::Response { id, outcome } = r else {
            panic!()
        };
        assert_eq!(id, Some(4));
        assert_eq!(outcome.unwrap_err().to_string(), "no (code -1)");
        let r = Incoming::classify(json!({"jsonrpc":"2.0","id":"abc","method":"ping"}));
        assert!(matches!(r, Incoming::Request { method, .. } if method == "ping"));
        let r = Incoming::classify(json!({"jsonrpc":"2.0","method":"notifications/x"}));
        assert!(matches!(r, Incoming::Notification { .. }));
        assert!(matches!(
            Incoming::classify(json!([1])),
            Incoming::Invalid(_)
        ));
        assert!(matches!(
            Incoming::classify(json!({"id": 1})),
            Incoming::Invalid(_)
        ));
    }
}
