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
    fields: Vec<String>,
    problem: Option<String>,
    cancel: Option<Cancellable>,
}

impl InputRequest {
    /// A request from `server` (the registry's name for it) with the
    /// server's `message` and requested JSON `schema`; for tests and custom
    /// providers.
    pub fn new(server: impl Into<String>, message: impl Into<String>, schema: Value) -> Self {
        let fields = field_names(&schema);
        InputRequest {
            server: server.into(),
            message: message.into(),
            schema,
            fields,
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

    /// The names of the schema's fields, in the order the server's schema
    /// lists them (a form asks them in this order). [`schema`] is a
    /// `serde_json` value, whose objects are sorted by key; a request
    /// from a server keeps the order of the JSON text it sent, one made
    /// with [`InputRequest::new`] has its schema's key order.
    ///
    /// [`schema`]: InputRequest::schema
    pub fn fields(&self) -> &[String] {
        &self.fields
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
    if let Some(order) = sent_order(params, &request.fields) {
        request.fields = order;
    }
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

/// The key under which [`keep_field_order`] puts, beside a
/// `requestedSchema`, its field names in the order of the text (a NUL
/// starts it: no schema a server means has such a key).
const FIELD_ORDER: &str = "\u{0}pikuri/fieldOrder";

/// The `properties` keys of `schema`, in its map's order.
fn field_names(schema: &Value) -> Vec<String> {
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// The order [`keep_field_order`] found for `params`' schema, if it names
/// exactly the schema's `fields`.
fn sent_order(params: &Value, fields: &[String]) -> Option<Vec<String>> {
    let order: Vec<String> = params
        .get(FIELD_ORDER)?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(String::from))
        .collect::<Option<_>>()?;
    let same = order.len() == fields.len() && fields.iter().all(|f| order.contains(f));
    same.then_some(order)
}

/// Keep the order of the fields a server's form lists: `serde_json` sorts
/// an object's keys (the `preserve_order` feature would change every map
/// of the crate), so the readers hand the message's JSON text `raw` here
/// with the parsed `msg`, and every object of `msg` with a
/// `requestedSchema` gets the schema's field names in the text's order
/// beside it ([`FIELD_ORDER`]), which [`elicit`] takes. Costs a scan of
/// the text only when it names a `requestedSchema`.
pub(super) fn keep_field_order(raw: &[u8], msg: &mut Value) {
    const NEEDLE: &[u8] = b"requestedSchema";
    if !raw.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
        return;
    }
    let mut orders = Vec::new();
    let mut pos = 0;
    // `raw` parsed, so it is well-formed and nests at most 128 deep; a
    // scan that fails anyway leaves the sorted order.
    if skim(raw, &mut pos, &mut orders).is_err() {
        return;
    }
    mark(msg, &orders);
}

/// Put the order of `orders` that has exactly a schema's keys beside each
/// `requestedSchema` in `v`.
fn mark(v: &mut Value, orders: &[Vec<String>]) {
    match v {
        Value::Object(map) => {
            let found = map
                .get("requestedSchema")
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
                .and_then(|props| {
                    orders
                        .iter()
                        .find(|o| o.len() == props.len() && o.iter().all(|k| props.contains_key(k)))
                });
            if let Some(order) = found {
                map.insert(FIELD_ORDER.into(), json!(order));
            }
            map.values_mut().for_each(|x| mark(x, orders));
        }
        Value::Array(items) => items.iter_mut().for_each(|x| mark(x, orders)),
        _ => {}
    }
}

/// Skip the JSON value at `pos` in `raw`, pushing the keys of every
/// `properties` object in it (in the text's order) to `out`; an object's
/// own keys are returned. `Err` on text that is not JSON.
fn skim(
    raw: &[u8],
    pos: &mut usize,
    out: &mut Vec<Vec<String>>,
) -> Result<Option<Vec<String>>, ()> {
    let skip_ws = |pos: &mut usize| {
        while raw.get(*pos).is_some_and(u8::is_ascii_whitespace) {
            *pos += 1;
        }
    };
    skip_ws(pos);
    match raw.get(*pos).ok_or(())? {
        b'{' => {
            *pos += 1;
            let mut keys = Vec::new();
            loop {
                skip_ws(pos);
                match raw.get(*pos).ok_or(())? {
                    b'}' => {
                        *pos += 1;
                        return Ok(Some(keys));
                    }
                    b',' => *pos += 1,
                    b'"' => {
                        let key = string(raw, pos)?;
                        skip_ws(pos);
                        if raw.get(*pos) != Some(&b':') {
                            return Err(());
                        }
                        *pos += 1;
                        let inner = skim(raw, pos, out)?;
                        if key == "properties"
                            && let Some(inner) = inner
                        {
                            out.push(inner);
                        }
                        keys.push(key);
                    }
                    _ => return Err(()),
                }
            }
        }
        b'[' => {
            *pos += 1;
            loop {
                skip_ws(pos);
                match raw.get(*pos).ok_or(())? {
                    b']' => {
                        *pos += 1;
                        return Ok(None);
                    }
                    b',' => *pos += 1,
                    _ => {
                        skim(raw, pos, out)?;
                    }
                }
            }
        }
        b'"' => string(raw, pos).map(|_| None),
        _ => {
            // A number, `true`, `false` or `null`: up to the next delimiter.
            let start = *pos;
            while raw.get(*pos).is_some_and(|b| {
                !matches!(b, b',' | b'}' | b']' | b':') && !b.is_ascii_whitespace()
            }) {
                *pos += 1;
            }
            if *pos == start { Err(()) } else { Ok(None) }
        }
    }
}

/// The JSON string at `pos` (at its opening quote), decoded; `pos` ends
/// after its closing quote.
fn string(raw: &[u8], pos: &mut usize) -> Result<String, ()> {
    let start = *pos;
    let mut i = start + 1;
    loop {
        match raw.get(i).ok_or(())? {
            b'"' => break,
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    *pos = i + 1;
    serde_json::from_slice(&raw[start..=i]).map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `keep_field_order` gives `elicit` for the request at `path`.
    fn order_of(raw: &str, path: &[&str]) -> Vec<String> {
        let mut msg: Value = serde_json::from_str(raw).unwrap();
        keep_field_order(raw.as_bytes(), &mut msg);
        let params = path.iter().fold(&msg, |v, k| match k.parse::<usize>() {
            Ok(i) => &v[i],
            Err(_) => &v[*k],
        });
        let fields = field_names(&params["requestedSchema"]);
        sent_order(params, &fields).unwrap_or(fields)
    }

    #[test]
    fn the_field_order_is_read_from_the_text() {
        // 2025: one request; a nested `properties` in a field and escaped
        // keys do not confuse the scan.
        let raw = r#"{"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {
            "message": "x", "requestedSchema": {"type": "object", "properties": {
                "zip": {"type": "string", "description": "a \"properties\": {\"a\": 1} text"},
                "n\u00e4me": {"type": "string"},
                "age": {"type": "integer", "x": [1, 2.5e3, true, null, {"properties": {"q": 1, "p": 2}}]}
            }}}}"#;
        assert_eq!(order_of(raw, &["params"]), ["zip", "näme", "age"]);
        // 2026: two requests in one result, each with its own order; in a
        // batch.
        let raw = r#"[{"jsonrpc": "2.0", "id": 2, "result": {"inputRequests": {
            "b": {"method": "elicitation/create", "params": {"requestedSchema":
                {"type": "object", "properties": {"y": {}, "x": {}}}}},
            "a": {"method": "elicitation/create", "params": {"requestedSchema":
                {"type": "object", "properties": {"c": {}, "b": {}, "a": {}}}}}
        }}}]"#;
        assert_eq!(
            order_of(raw, &["0", "result", "inputRequests", "b", "params"]),
            ["y", "x"]
        );
        assert_eq!(
            order_of(raw, &["0", "result", "inputRequests", "a", "params"]),
            ["c", "b", "a"]
        );
        // Duplicate keys (the parse keeps the last): the sorted order.
        let raw = r#"{"params": {"requestedSchema": {"properties": {"b": {}, "a": {}, "b": {}}}}}"#;
        assert_eq!(order_of(raw, &["params"]), ["a", "b"]);
        // A server's own order key that does not name the fields is ignored.
        let params =
            json!({FIELD_ORDER: ["q"], "requestedSchema": {"properties": {"b": {}, "a": {}}}});
        assert_eq!(sent_order(&params, &["a".into(), "b".into()]), None);
    }

    #[test]
    fn text_that_is_not_json_leaves_the_message_as_it_is() {
        for raw in [
            &b"{\"requestedSchema\": "[..],
            b"[1, :]requestedSchema",
            b"\"requestedSchema",
        ] {
            let mut msg = json!({"requestedSchema": {"properties": {"b": {}, "a": {}}}});
            let before = msg.clone();
            keep_field_order(raw, &mut msg);
            assert_eq!(msg, before);
        }
    }

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
