//! Servers that ask the user: the [`InputProvider`] seam, and the one place
//! that turns a server's elicitation request into its answer (checking the
//! request, asking off the waiting thread, validating the answer).
//!
//! Both generations come here: a 2026 `input_required` result names its
//! `elicitation/create` requests inside the result (`client.rs` retries the
//! call with the answers), a 2025 server sends `elicitation/create` as a
//! request of its own during a call (`conn.rs` answers it).

use std::fmt;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, at, bounded, never, select};
use serde_json::{Value, json};

use super::jsonrpc::RpcError;
use crate::Cancellable;
use crate::tool::Parameters;
use crate::util::{excerpt, instant_after};

/// Longest server message handed to a provider, in characters.
const MAX_MESSAGE_CHARS: usize = 4000;
/// Largest requested schema accepted, serialized.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Most fields a requested schema may have.
const MAX_FIELDS: usize = 64;
/// How often a provider is asked again after an answer the schema rejects.
const MAX_ATTEMPTS: usize = 3;

/// Asks the user for what an MCP server needs during a call (the
/// protocol's *elicitation*), in the style of
/// [`Approver`](crate::approval::Approver).
///
/// Set on a [`Server`](super::Server) with
/// [`Server::with_input_provider`](super::Server::with_input_provider), or on every
/// server of a [`Registry`](super::Registry) with
/// [`Registry::input_provider`](super::Registry::input_provider). Without
/// one, the client declares no elicitation capability and refuses every
/// input request (a 2025 `elicitation/create` gets `-32601`; a 2026
/// `input_required` is answered `decline`).
///
/// `ask` runs on a thread of its own: a cancel of the run, a timeout
/// ([`Server::with_input_timeout`](super::Server::with_input_timeout)) or
/// [`Client::close`](super::Client::close) ends the wait at once and
/// answers the server `cancel`; the provider's late answer is dropped.
/// An accepted answer is validated against the schema the server sent; an
/// invalid one is asked again (with [`InputRequest::problem`] set) up to
/// three times, then answered `cancel`.
///
/// # Examples
///
/// ```
/// use pikuri::mcp::{InputAnswer, InputProvider, InputRequest};
/// use serde_json::json;
///
/// struct Octocat;
/// impl InputProvider for Octocat {
///     fn ask(&self, request: &InputRequest) -> InputAnswer {
///         if request.schema()["properties"]["name"].is_object() {
///             InputAnswer::Accept(json!({"name": "octocat"}))
///         } else {
///             InputAnswer::Decline
///         }
///     }
/// }
/// let answer = Octocat.ask(&InputRequest::new("gh", "Your login?", json!({
///     "type": "object",
///     "properties": {"name": {"type": "string"}},
///     "required": ["name"],
/// })));
/// assert_eq!(answer, InputAnswer::Accept(json!({"name": "octocat"})));
/// ```
pub trait InputProvider: Send + Sync {
    /// Answer one request: accept with content matching
    /// [`InputRequest::schema`], decline, or cancel.
    fn ask(&self, request: &InputRequest) -> InputAnswer;
}

/// The user's answer to an [`InputRequest`].
#[derive(Clone, Debug, PartialEq)]
pub enum InputAnswer {
    /// The requested content: a JSON object matching the schema.
    Accept(Value),
    /// The user said no.
    Decline,
    /// The user dismissed the question without choosing.
    Cancel,
}

/// What a server asks the user.
#[derive(Clone, Debug)]
pub struct InputRequest {
    server: String,
    message: String,
    schema: Value,
    problem: Option<String>,
    cancel: Option<Cancellable>,
}

impl InputRequest {
    /// A request from `server` (the registry's name for it) with the
    /// server's `message` and requested JSON `schema`; for tests and custom
    /// providers.
    pub fn new(server: impl Into<String>, message: impl Into<String>, schema: Value) -> Self {
        InputRequest {
            server: server.into(),
            message: message.into(),
            schema,
            problem: None,
            cancel: None,
        }
    }

    /// The server's name in the registry (or as given to
    /// [`Client::connect`](super::Client::connect)).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The server's question, as it sent it (secrets redacted, at most
    /// 4,000 characters). Untrusted text: a terminal must
    /// [`sanitize`](crate::listeners::sanitize) it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The JSON schema the answer must match (an object of simple fields).
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Why the previous answer was rejected, when asking again.
    pub fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    /// Whether the run that made the call was cancelled meanwhile: a
    /// provider that can stop waiting should.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(Cancellable::is_cancelled)
    }
}

/// The provider and its bound, as a connection holds them.
#[derive(Clone)]
pub(super) struct Asker {
    pub(super) provider: Arc<dyn InputProvider>,
    pub(super) timeout: Duration,
}

impl fmt::Debug for Asker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Asker")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Why a request cannot be put to the user, if it cannot: the server's
/// text and schema are checked before anyone sees them.
fn check(params: &Value) -> Result<(), String> {
    match params["mode"].as_str() {
        None | Some("form") => {}
        Some(mode) => {
            return Err(format!(
                "input mode `{}` is not supported",
                excerpt(mode, 20)
            ));
        }
    }
    let schema = &params["requestedSchema"];
    let size = serde_json::to_vec(schema).map_or(usize::MAX, |v| v.len());
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "the requested schema is over {MAX_SCHEMA_BYTES} bytes"
        ));
    }
    if schema["type"] != "object" {
        return Err("the requested schema is not an object schema".into());
    }
    let fields = schema["properties"]
        .as_object()
        .map_or(0, serde_json::Map::len);
    if fields > MAX_FIELDS {
        return Err(format!("the requested schema has over {MAX_FIELDS} fields"));
    }
    // Elicitation asks for flat objects of simple values; anything nested is
    // not something a person can be asked for at a prompt.
    for (name, field) in schema["properties"].as_object().into_iter().flatten() {
        let simple = match field["type"].as_str() {
            Some("string" | "number" | "integer" | "boolean") => true,
            Some("array") => {
                field["items"]["type"] == "string" || field["items"]["enum"].is_array()
            }
            _ => false,
        };
        if !simple {
            return Err(format!(
                "the requested field `{}` is not a simple value",
                excerpt(name, 40)
            ));
        }
    }
    Ok(())
}

/// Answer one elicitation request (its `params`) from `server` with an
/// `ElicitResult`. No provider: `decline`. `Err(Cancelled)` when the run
/// was cancelled (or `abort` fired) while the user was being asked.
pub(super) fn elicit(
    asker: Option<&Asker>,
    server: &str,
    params: &Value,
    cancel: Option<&Cancellable>,
    abort: Option<&Receiver<()>>,
) -> Result<Value, RpcError> {
    let Some(asker) = asker else {
        log::debug!(target: "pikuri::mcp", "[{server}] refused an input request: no input provider");
        return Ok(json!({"action": "decline"}));
    };
    if let Err(why) = check(params) {
        log::warn!(target: "pikuri::mcp", "[{server}] declined an input request: {why}");
        return Ok(json!({"action": "decline"}));
    }
    let schema = params["requestedSchema"].clone();
    let Ok(compiled) = Parameters::from_json_schema(schema.clone()) else {
        log::warn!(target: "pikuri::mcp", "[{server}] declined an input request: its schema is not one this client can check");
        return Ok(json!({"action": "decline"}));
    };
    let message = params["message"].as_str().unwrap_or_default();
    let mut request = InputRequest::new(server, excerpt(message, MAX_MESSAGE_CHARS), schema);
    request.cancel = cancel.cloned();
    if cancel.is_some_and(Cancellable::is_cancelled) {
        return Err(RpcError::Cancelled);
    }
    let provider = Arc::clone(&asker.provider);
    let (tx, rx) = bounded(1);
    // The provider may block on a terminal read: it runs on a thread of its
    // own, so that a cancel or a timeout is answered at once.
    let spawned = thread::Builder::new()
        .name(format!("mcp-{server}-input"))
        .spawn(move || {
            for _ in 0..MAX_ATTEMPTS {
                let answer = match provider.ask(&request) {
                    InputAnswer::Accept(content) => match compiled.validate(&content) {
                        Ok(()) => json!({"action": "accept", "content": content}),
                        Err(e) => {
                            request.problem = Some(e.to_string());
                            continue;
                        }
                    },
                    InputAnswer::Decline => json!({"action": "decline"}),
                    InputAnswer::Cancel => json!({"action": "cancel"}),
                };
                let _ = tx.send(answer);
                return;
            }
            let _ = tx.send(json!({"action": "cancel"}));
        });
    if let Err(e) = spawned {
        log::warn!(target: "pikuri::mcp", "[{server}] could not ask for input: {e}");
        return Ok(json!({"action": "decline"}));
    }
    let (cancel_tx, cancel_rx) = bounded::<()>(1);
    let _hook = cancel.map(|c| {
        let tx = cancel_tx.clone();
        c.on_cancel(move || {
            let _ = tx.try_send(());
        })
    });
    let never_rx = never();
    let abort = abort.unwrap_or(&never_rx);
    let deadline = instant_after(asker.timeout);
    select! {
        recv(rx) -> answer => Ok(answer.unwrap_or_else(|_| json!({"action": "cancel"}))),
        recv(cancel_rx) -> _ => Err(RpcError::Cancelled),
        recv(abort) -> _ => Err(RpcError::Cancelled),
        recv(at(deadline)) -> _ => {
            log::warn!(target: "pikuri::mcp", "[{server}] no answer to an input request within {} s", asker.timeout.as_secs_f64());
            Ok(json!({"action": "cancel"}))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_huge_or_url_requests_are_not_put_to_the_user() {
        let ok = json!({"message": "x", "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}});
        assert!(check(&ok).is_ok());
        let nested =
            json!({"requestedSchema": {"type": "object", "properties": {"a": {"type": "object"}}}});
        assert!(check(&nested).unwrap_err().contains("not a simple value"));
        let url = json!({"mode": "url", "requestedSchema": {"type": "object"}});
        assert!(check(&url).unwrap_err().contains("not supported"));
        let props: serde_json::Map<String, Value> = (0..100)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect();
        let many = json!({"requestedSchema": {"type": "object", "properties": props}});
        assert!(check(&many).unwrap_err().contains("fields"));
    }
}
