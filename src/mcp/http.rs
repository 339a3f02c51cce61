//! The Streamable HTTP transport: every message is a POST to the endpoint;
//! a request is answered with one JSON body or an SSE stream (read with the
//! crate's sans-IO parser), which may carry notifications and server
//! requests before the answer.
//!
//! Each POST runs on its own short-lived worker thread that feeds what it
//! reads to [`Conn::dispatch`], so the caller waits on its channel like over
//! stdio, and a cancel never waits for a socket. The `Mcp-Session-Id` the
//! server assigns is kept and sent; `MCP-Protocol-Version` is sent after
//! the handshake, which ends when the server answered
//! `notifications/initialized` (the one message whose POST is waited for:
//! a request posted before that answer may reach a server that is not yet
//! initialized). A 404 to a request that carried a session id means the
//! session expired: the worker runs the handshake again (once, shared by
//! concurrent workers through a generation counter) and retries. A
//! redirect is not followed: it fails the request with its status (the
//! session id would go along, and a POST turned into a GET would lose the
//! message). On close the session is DELETEd and the HTTP agent shut down,
//! which fails reads still in flight.
//!
//! With OAuth (`oauth/`), a 401 hands the `WWW-Authenticate` challenge to
//! the connection's `Session`, which refreshes or logs in (one worker at a
//! time), and the POST is sent again once; the OAuth token is sent in
//! place of the host's, and redacted from what the server sends.
//!
//! Not implemented: the optional GET stream for server messages unrelated to
//! a request (a `tools/list_changed` sent only there is not seen), and
//! resuming a broken stream with `Last-Event-ID`.

use std::io::{BufReader, Read};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{at, bounded, select};
use parking_lot::Mutex;
use serde_json::Value;

use super::conn::{Bound, Conn, Wire, init_params, parse_init};
use super::jsonrpc::{self, HTTP_VERSIONS, MODERN_VERSION, RpcError};
use super::oauth::{AuthError, OAuth, Session};
use crate::codec::base64::{self, Alphabet, Padding};
use crate::media_type::MediaType;
use crate::net::{AgentSetup, error_text};
use crate::protocol::{DecodeError, Flow, cannot_connect, read_sse};
use crate::util::{excerpt, redact_url};

pub(super) struct Http {
    url: String,
    bearer: Option<String>,
    agent: Mutex<Option<ureq::Agent>>,
    session: Mutex<Option<String>>,
    version: Mutex<Option<String>>,
    /// Bumped by each re-initialization.
    generation: Mutex<u64>,
    timeout: Duration,
    max_message: usize,
    /// OAuth, when the server was declared with it.
    oauth: Option<Session>,
}

/// Why a POST failed.
enum PostError {
    /// 404 to a request that carried a session id.
    Expired,
    /// The connection could not be made.
    Unreachable(String),
    /// Another non-success status, with the start of the body.
    Status(u16, String),
    Failed(String),
    /// The OAuth login or refresh that a 401 started failed.
    Auth(AuthError),
    /// 401 on a connection with OAuth: the token sent (if any) and the
    /// `WWW-Authenticate` header.
    Unauthorized {
        sent: Option<String>,
        challenge: Option<String>,
    },
}

impl PostError {
    fn into_rpc(self) -> RpcError {
        match self {
            PostError::Expired => RpcError::Transport("the session expired (404)".into()),
            PostError::Unreachable(why) => RpcError::Unreachable(why),
            PostError::Status(status, message) => RpcError::Status { status, message },
            PostError::Failed(why) => RpcError::Transport(why),
            PostError::Auth(e) => RpcError::Auth(e),
            PostError::Unauthorized { .. } => RpcError::Status {
                status: 401,
                message: "unauthorized".into(),
            },
        }
    }
}

impl Http {
    pub(super) fn new(
        url: &str,
        bearer: Option<&str>,
        timeout: Duration,
        max_message: usize,
    ) -> Http {
        let agent = AgentSetup::new()
            .with_connect_timeout(Duration::from_secs(10).min(timeout))
            // A server that stops reading a large body ties up the worker
            // for no longer than a request may take.
            .with_send_timeout(timeout)
            .with_response_timeout(timeout)
            .with_read_timeout(timeout)
            .agent();
        Http {
            url: url.to_string(),
            bearer: bearer.map(String::from),
            agent: Mutex::new(Some(agent)),
            session: Mutex::new(None),
            version: Mutex::new(None),
            generation: Mutex::new(0),
            timeout,
            max_message,
            oauth: None,
        }
    }

    /// Log in with `oauth` when the server answers 401.
    pub(super) fn set_oauth(&mut self, oauth: Option<OAuth>) {
        self.oauth = oauth.map(|o| Session::new(o, &self.url));
    }

    /// The bearer token to send: the OAuth one once there is one (it
    /// replaces a host token the server refused), else the host's.
    fn token(&self) -> Option<String> {
        self.oauth
            .as_ref()
            .and_then(Session::bearer)
            .or_else(|| self.bearer.clone())
    }

    /// After a 401: refresh or log in (once for concurrent workers), then
    /// POST again, once. A second 401 ends the request: the server refused
    /// the token it just got (issued for another audience, say).
    fn renew_and_retry(
        &self,
        conn: &Conn,
        msg: &Value,
        id: Option<u64>,
        sent: Option<&str>,
        challenge: Option<&str>,
        on_msg: &mut dyn FnMut(Value) -> Option<u64>,
    ) -> Result<(), PostError> {
        let Some(session) = &self.oauth else {
            return Err(PostError::Status(401, String::new()));
        };
        let closed = || self.agent.lock().is_none();
        if let Err(e) = session.renew(sent, challenge, &closed) {
            log::warn!(target: "pikuri::mcp", "[{}] {e}", conn.name);
            return Err(PostError::Auth(e));
        }
        log::info!(target: "pikuri::mcp", "[{}] OAuth: authorized", conn.name);
        match self.post(conn, msg, id, on_msg) {
            Err(PostError::Unauthorized { .. }) => Err(PostError::Auth(AuthError::Refused(
                "the server refused the token it was just issued (a token for another audience?)"
                    .into(),
            ))),
            other => other,
        }
    }

    /// The `MCP-Protocol-Version` to send; empty: none.
    pub(super) fn set_protocol_version(&self, version: &str) {
        *self.version.lock() = (!version.is_empty()).then(|| version.to_string());
    }

    /// POST `msg` on a worker thread; `id` is the request waiting for an
    /// answer (`None` for notifications and responses).
    pub(super) fn send(self: &Arc<Self>, conn: &Arc<Conn>, msg: Value, id: Option<u64>) {
        let http = Arc::clone(self);
        let worker_conn = Arc::clone(conn);
        let spawned = thread::Builder::new()
            .name(format!("mcp-{}-http", conn.name))
            .spawn(move || http.deliver(&worker_conn, &msg, id));
        if let (Err(e), Some(id)) = (spawned, id) {
            conn.fail(
                id,
                RpcError::Transport(format!("could not start an HTTP worker: {e}")),
            );
        }
    }

    /// POST the notification `msg` on a worker thread and wait until
    /// the server answered it (its 202), or `deadline`.
    fn notify_delivered(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        msg: Value,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), RpcError> {
        let (tx, rx) = bounded(1);
        let http = Arc::clone(self);
        let worker_conn = Arc::clone(conn);
        thread::Builder::new()
            .name(format!("mcp-{}-http", conn.name))
            .spawn(move || {
                let posted = http.post_renewing(&worker_conn, &msg, None);
                let _ = tx.send(posted.map_err(PostError::into_rpc));
            })
            .map_err(|e| RpcError::Transport(format!("could not start an HTTP worker: {e}")))?;
        select! {
            recv(rx) -> posted => posted.unwrap_or_else(|_| {
                Err(RpcError::Transport("the HTTP worker ended without an answer".into()))
            }),
            recv(at(deadline)) -> _ => Err(RpcError::Timeout(timeout)),
        }
    }

    /// One POST, sent again once after a 401 that OAuth could renew.
    fn post_renewing(
        &self,
        conn: &Arc<Conn>,
        msg: &Value,
        id: Option<u64>,
    ) -> Result<(), PostError> {
        let result = self.post(conn, msg, id, &mut |m| conn.dispatch(m));
        match &result {
            Err(PostError::Unauthorized { sent, challenge }) => self.renew_and_retry(
                conn,
                msg,
                id,
                sent.as_deref(),
                challenge.as_deref(),
                &mut |m| conn.dispatch(m),
            ),
            _ => result,
        }
    }

    fn deliver(&self, conn: &Arc<Conn>, msg: &Value, id: Option<u64>) {
        let seen = *self.generation.lock();
        let mut result = self.post_renewing(conn, msg, id);
        let is_init = msg["method"] == "initialize";
        if matches!(result, Err(PostError::Expired)) && !is_init {
            log::info!(target: "pikuri::mcp", "[{}] session expired; initializing again", conn.name);
            result = match self.reinitialize(conn, seen) {
                Ok(()) => self.post(conn, msg, id, &mut |m| conn.dispatch(m)),
                Err(e) => Err(PostError::Failed(format!("re-initializing failed: {e}"))),
            };
        }
        let Some(id) = id else {
            if let Err(e) = result {
                log::debug!(target: "pikuri::mcp", "[{}] POST of a notification failed: {}", conn.name, e.into_rpc().redacted(&conn.secrets));
            }
            return;
        };
        // A no-op when the answer already arrived.
        let err = match result {
            Ok(()) => RpcError::Transport("the server ended its response without an answer".into()),
            Err(e) => e.into_rpc(),
        };
        conn.fail(id, err);
    }

    /// The handshake again on a fresh session, unless another worker did it
    /// since generation `seen`.
    fn reinitialize(&self, conn: &Arc<Conn>, seen: u64) -> Result<(), String> {
        let mut generation = self.generation.lock();
        if *generation != seen {
            return Ok(());
        }
        *self.session.lock() = None;
        *self.version.lock() = None;
        let id = conn.next_id();
        let mut answer = None;
        let msg = jsonrpc::request(id, "initialize", init_params(conn.asker.is_some()));
        self.post(conn, &msg, Some(id), &mut |mut m| {
            if m["id"].as_u64() == Some(id) {
                conn.secrets.redact_json(&mut m);
                answer = Some(m);
                Some(id)
            } else {
                conn.dispatch(m)
            }
        })
        .map_err(|e| match e {
            PostError::Expired => "404".to_string(),
            e => e.into_rpc().to_string(),
        })?;
        let answer = answer.ok_or("no answer to initialize")?;
        let result = answer
            .get("result")
            .ok_or_else(|| format!("initialize failed: {}", answer["error"]))?;
        let info = parse_init(result, HTTP_VERSIONS).map_err(|e| e.to_string())?;
        self.set_protocol_version(&info.protocol_version);
        let note = jsonrpc::notification("notifications/initialized", None);
        self.post(conn, &note, None, &mut |m| conn.dispatch(m))
            .map_err(|_| "notifications/initialized was refused".to_string())?;
        *generation += 1;
        Ok(())
    }

    /// `MCP-Protocol-Version` once known, and for the 2026 generation the
    /// headers it mirrors from the body.
    fn version_headers(&self, msg: &Value) -> Vec<(&'static str, String)> {
        match self.version.lock().as_deref() {
            None => Vec::new(),
            Some(v) if v == MODERN_VERSION => {
                let mut headers = vec![("MCP-Protocol-Version", v.to_string())];
                headers.extend(mirrored(msg));
                headers
            }
            Some(v) => vec![("MCP-Protocol-Version", v.to_string())],
        }
    }

    /// One blocking POST; every message read is handed to `on_msg`, which
    /// returns the id of the request it answered (reading stops once that
    /// is `id`).
    fn post(
        &self,
        conn: &Conn,
        msg: &Value,
        id: Option<u64>,
        on_msg: &mut dyn FnMut(Value) -> Option<u64>,
    ) -> Result<(), PostError> {
        let Some(agent) = self.agent.lock().clone() else {
            return Err(PostError::Failed("closed".into()));
        };
        let session = self.session.lock().clone();
        let mut req = agent
            .post(&self.url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json");
        if let Some(s) = &session {
            req = req.header("Mcp-Session-Id", s);
        }
        for (name, value) in self.version_headers(msg) {
            req = req.header(name, &value);
        }
        let token = self.token();
        if let Some(token) = &token {
            req = req.header("Authorization", &format!("Bearer {token}"));
        }
        let body = serde_json::to_vec(msg).expect("a Value always serializes");
        let resp = req.send(&body[..]).map_err(|e| self.send_error(&e))?;
        let status = resp.status().as_u16();
        if status == 404 && session.is_some() {
            return Err(PostError::Expired);
        }
        if (300..400).contains(&status) {
            return Err(PostError::Status(status, redirect_message(resp.headers())));
        }
        if status == 401 && self.oauth.is_some() {
            return Err(PostError::Unauthorized {
                sent: token,
                challenge: challenge(resp.headers()),
            });
        }
        if let Some(sid) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            *self.session.lock() = Some(sid.to_string());
        }
        if status == 202 {
            return Ok(());
        }
        // Tokens obtained by OAuth are not among the connection's secrets
        // (they came after it was made): redact them here, before anything
        // the server sends goes further.
        let oauth_secrets = self
            .oauth
            .as_ref()
            .map(Session::secrets)
            .unwrap_or_default();
        let on_msg = &mut |mut m: Value| {
            oauth_secrets.redact_json(&mut m);
            on_msg(m)
        };
        let is_sse = is_event_stream(resp.headers());
        // Read only while the request is waited for: a call that timed out
        // or was cancelled hangs up at the next read (of an error's body
        // too), however slowly the server trickles (the read timeout bounds
        // a silent one). The handshake's `initialize` is never abandoned,
        // and a re-initializing worker's is waited for by no one: both are
        // read to the end.
        let watched = id.filter(|_| msg["method"] != "initialize");
        let mut reader = WhileWanted {
            inner: resp.into_body().into_reader(),
            wanted: || self.agent.lock().is_some() && watched.is_none_or(|id| conn.is_waiting(id)),
        };
        if status >= 400 {
            let mut bytes = Vec::new();
            let _ = (&mut reader).take(4096).read_to_end(&mut bytes);
            let text = String::from_utf8_lossy(&bytes);
            // Hidden before the cut: a secret the excerpt ends in would
            // otherwise leave its start behind.
            let text = conn
                .secrets
                .redact(&oauth_secrets.redact(text.trim()))
                .into_owned();
            return Err(PostError::Status(status, excerpt(&text, 300).into_owned()));
        }
        if is_sse {
            self.read_stream(conn, reader, id, on_msg)
        } else {
            self.read_json(reader, on_msg)
        }
    }

    /// An event stream, each message (or each of a batch) to `on_msg`,
    /// until the one answering `id`.
    fn read_stream(
        &self,
        conn: &Conn,
        reader: impl Read,
        id: Option<u64>,
        on_msg: &mut dyn FnMut(Value) -> Option<u64>,
    ) -> Result<(), PostError> {
        let mut on_data = |data: &str| -> Result<Flow, DecodeError> {
            let Ok(mut m) = serde_json::from_str::<Value>(data) else {
                log::warn!(
                    target: "pikuri::mcp",
                    "[{}] skipped an SSE event that is not JSON: {}",
                    conn.name,
                    crate::sanitize::sanitize(&excerpt(&conn.secrets.redact(data), 200))
                );
                return Ok(Flow::Continue);
            };
            super::input::keep_field_order(data.as_bytes(), &mut m);
            // A 2025-03-26 server may batch messages in one event, as in a
            // JSON body.
            let batch = match m {
                Value::Array(all) => all,
                one => vec![one],
            };
            let mut answered = false;
            for m in batch {
                answered |= on_msg(m) == id && id.is_some();
            }
            Ok(if answered { Flow::Stop } else { Flow::Continue })
        };
        read_sse(
            BufReader::new(reader),
            self.max_message,
            &mut on_data,
            &mut || {},
        )
        .map_err(|e| PostError::Failed(format!("reading the event stream failed: {e}")))
    }

    /// A JSON body (one message or a batch), each message to `on_msg`.
    fn read_json(
        &self,
        reader: impl Read,
        on_msg: &mut dyn FnMut(Value) -> Option<u64>,
    ) -> Result<(), PostError> {
        let mut bytes = Vec::new();
        reader
            .take(self.max_message as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| PostError::Failed(format!("reading the response failed: {e}")))?;
        if bytes.len() > self.max_message {
            return Err(PostError::Failed(format!(
                "the response is over {} bytes",
                self.max_message
            )));
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let parsed = crate::util::json_from_slice::<Value>(&bytes).map(|mut msg| {
            super::input::keep_field_order(&bytes, &mut msg);
            msg
        });
        match parsed {
            Ok(Value::Array(batch)) => batch.into_iter().for_each(|m| {
                on_msg(m);
            }),
            Ok(m) => {
                on_msg(m);
            }
            Err(e) => return Err(PostError::Failed(format!("the response is not JSON: {e}"))),
        }
        Ok(())
    }

    /// A failed send: unreachable or failed.
    fn send_error(&self, e: &ureq::Error) -> PostError {
        // The error names the URL (redacted) itself; ureq's text may quote
        // it raw.
        let why = error_text(e, &self.url);
        if cannot_connect(e) {
            PostError::Unreachable(why)
        } else {
            PostError::Failed(format!("POST failed: {why}"))
        }
    }

    /// DELETE the session (a 405 is fine) and shut the agent down.
    pub(super) fn close(&self) {
        let Some(agent) = self.agent.lock().take() else {
            return;
        };
        if let Some(sid) = self.session.lock().take() {
            let mut req = agent
                .delete(&self.url)
                .config()
                .timeout_global(Some(Duration::from_secs(2).min(self.timeout)))
                .build()
                .header("Mcp-Session-Id", &sid);
            if let Some(v) = self.version.lock().as_deref() {
                req = req.header("MCP-Protocol-Version", v);
            }
            if let Some(token) = self.token() {
                req = req.header("Authorization", &format!("Bearer {token}"));
            }
            match req.call() {
                Ok(r) => log::debug!(target: "pikuri::mcp", "DELETE session: {}", r.status()),
                Err(e) => log::debug!(target: "pikuri::mcp", "DELETE session failed: {e}"),
            }
        }
        agent.shutdown();
    }
}

/// A response body read while `wanted` holds; then each read fails.
struct WhileWanted<R, F> {
    inner: R,
    wanted: F,
}

impl<R: Read, F: Fn() -> bool> Read for WhileWanted<R, F> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !(self.wanted)() {
            return Err(std::io::Error::other("no longer waited for"));
        }
        self.inner.read(buf)
    }
}

/// The headers the 2026 generation mirrors from the body: the method, and
/// the name of what a call, read or get is about.
fn mirrored(msg: &Value) -> Vec<(&'static str, String)> {
    let Some(method) = msg["method"].as_str() else {
        return Vec::new();
    };
    let mut headers = vec![("Mcp-Method", header_value(method))];
    let name = msg["params"]["name"]
        .as_str()
        .or_else(|| msg["params"]["uri"].as_str());
    if let Some(name) = name
        && matches!(method, "tools/call" | "resources/read" | "prompts/get")
    {
        headers.push(("Mcp-Name", header_value(name)));
    }
    headers
}

/// `value` as a header value: as is when it is plain visible ASCII (or
/// spaces inside), else the specification's `=?base64?…?=` form of its
/// UTF-8 bytes (also for a plain value that looks like that form).
fn header_value(value: &str) -> String {
    let visible = value.bytes().all(|b| (0x20..0x7f).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    if visible && !value.is_empty() && !padded && !sentinel {
        value.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::encode(value.as_bytes(), Alphabet::Standard, Padding::Padded)
        )
    }
}

/// The `WWW-Authenticate` headers of a 401, joined; `None` without one.
fn challenge(headers: &ureq::http::HeaderMap) -> Option<String> {
    let all = headers
        .get_all("www-authenticate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(", ");
    (!all.is_empty()).then_some(all)
}

/// What a redirect is told as: where it pointed (its secrets hidden),
/// and that it was not followed.
fn redirect_message(headers: &ureq::http::HeaderMap) -> String {
    let to = headers
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(redact_url)
        .unwrap_or_default();
    format!(
        "redirects to {}: redirects are not followed",
        crate::sanitize::sanitize(&excerpt(&to, 200))
    )
}

/// Whether the response is an event stream, through the crate's one
/// media-type parser (`Text/Event-Stream; charset=UTF-8` is one too).
fn is_event_stream(headers: &ureq::http::HeaderMap) -> bool {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .and_then(MediaType::parse)
        .is_some_and(|m| m.is("text/event-stream"))
}

/// Shared, because each POST runs on a worker thread that holds the `Http`.
impl Wire for Arc<Http> {
    fn send(
        &self,
        conn: &Arc<Conn>,
        msg: Value,
        id: Option<u64>,
        _bound: Option<&Bound<'_>>,
    ) -> Result<(), RpcError> {
        // The POST and the answer happen on a worker; a failure there fails
        // the request on `conn`, so handing it over always succeeds.
        Http::send(self, conn, msg, id);
        Ok(())
    }
    fn notify_delivered(
        &self,
        conn: &Arc<Conn>,
        msg: Value,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), RpcError> {
        Http::notify_delivered(self, conn, msg, deadline, timeout)
    }
    fn set_protocol_version(&self, version: &str) {
        Http::set_protocol_version(self, version);
    }
    fn close(&self, _name: &str) {
        Http::close(self);
    }
}

#[cfg(test)]
mod tests {
    use super::header_value;

    #[test]
    fn header_values_are_plain_or_base64_as_the_spec_shows() {
        assert_eq!(header_value("us-west1"), "us-west1");
        assert_eq!(
            header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }
}
