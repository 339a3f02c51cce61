//! The blocking chat-completions client: one shared `ureq::Agent` (connection
//! reuse), retries with backoff, streaming through the SSE parser, and
//! cancellation by socket shutdown.
//!
//! # Cancellation
//!
//! A request registers a hook on the run's [`Cancellable`]. `cancel()` runs it
//! on the cancelling thread: the hook swaps a fresh `ureq::Agent` into the
//! client and shuts the old one down (`ureq::Agent::shutdown`), which closes
//! its sockets, idle and in use. A read blocked on a silent server returns at
//! once, the request fails, and the client reports [`Error::Cancelled`]. The
//! next request uses the fresh agent. Connecting and DNS are not interrupted;
//! they are bounded by the connect timeout.
//!
//! # Retries
//!
//! 429, 500, 502, 503, 504 and connection failures before any response byte
//! are retried up to [`HttpConfig::with_max_retries`] times with exponential
//! backoff and jitter, honouring `Retry-After` (seconds) up to the cap. A
//! stream that has started is never retried: its deltas already reached the
//! listeners.
//!
//! # Bounds
//!
//! Each read waits at most the smaller of the read timeout and the idle
//! bound ([`HttpConfig::with_idle_timeout`]); a stream that delivers no chat
//! data for the idle bound ends, however many comments or keep-alives it
//! sends; a [request deadline](HttpConfig::with_request_deadline) bounds the
//! whole request, retries included (ureq's global timeout for the socket,
//! a check before every read and every retry for the rest). Each
//! [`Error::Timeout`] names the bound that expired.
//!
//! # Secrets
//!
//! Whatever text the server sends back and the client passes on (an error
//! body, a stream's error chunk, a chunk quoted in an error or a log line)
//! has the transport's API key replaced by `<redacted>` first, so a server
//! or proxy that echoes the `Authorization` header cannot put the key into
//! an [`Error`], an event or a log.

use std::cell::Cell;
use std::io::{self, BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use super::HttpConfig;
use super::decode::{
    Completion, DecodeError, Fragment, StreamOptions, parse_response, read_stream,
};
use super::request::Request;
use super::retry::{self, RETRYABLE, RetryNotice};
use crate::util::{deadline_after, limit, redact};
use crate::{Cancellable, Error, Result};

/// Longest server message kept in [`Error::Http`].
const MAX_MESSAGE_CHARS: usize = 500;

struct Shared {
    config: HttpConfig,
    agent: Mutex<ureq::Agent>,
    /// Whether the fallback to OpenAI's API base was logged (once per client).
    default_base_logged: AtomicBool,
}

/// The HTTP client. Cheap to clone (shared by sub-agents and the synthesizer).
#[derive(Clone)]
pub(crate) struct Client {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

fn build_agent(config: &HttpConfig) -> ureq::Agent {
    ureq::Agent::config_builder()
        // Error statuses are read like any response: their body carries the
        // server's message, and 429/5xx go through the retry policy.
        .http_status_as_error(false)
        // Huge durations are "no limit" (`None`): ureq adds them to an
        // `Instant`, which panics on overflow.
        .timeout_connect(limit(config.connect_timeout))
        .timeout_recv_response(limit(config.read_timeout))
        // A silent socket is bounded by the idle bound too.
        .timeout_per_read(limit(config.read_timeout.min(config.idle_timeout())))
        .user_agent(concat!("pikuri/", env!("CARGO_PKG_VERSION")))
        .build()
        .new_agent()
}

impl Client {
    pub(crate) fn new(config: HttpConfig) -> Client {
        let agent = Mutex::new(build_agent(&config));
        Client {
            shared: Arc::new(Shared {
                config,
                agent,
                default_base_logged: AtomicBool::new(false),
            }),
        }
    }

    pub(crate) fn config(&self) -> &HttpConfig {
        &self.shared.config
    }

    /// The current agent (a cancel may have swapped in a fresh one).
    pub(super) fn agent(&self) -> ureq::Agent {
        self.shared.agent.lock().clone()
    }

    /// Arm `cancel` to shut down the agent used by the request in flight.
    fn arm(&self, cancel: Option<&Cancellable>) -> Option<crate::control::CancelHook> {
        let cancel = cancel?;
        let shared = Arc::clone(&self.shared);
        Some(cancel.on_cancel(move || {
            let fresh = build_agent(&shared.config);
            let old = std::mem::replace(&mut *shared.agent.lock(), fresh);
            old.shutdown();
        }))
    }

    /// One chat completion, with retries: `req` is encoded into `buf` (a
    /// buffer the caller reuses between requests), sent, and its answer
    /// decoded; `on_retry` hears of each retry, `on_fragment` gets text as
    /// it streams in, and `on_wire` hears when a read may wait and when
    /// the answer is in.
    pub(crate) fn chat(
        &self,
        req: &Request<'_>,
        buf: &mut Vec<u8>,
        on_retry: &mut dyn FnMut(&RetryNotice),
        on_fragment: &mut dyn FnMut(Fragment<'_>),
        on_wire: &mut dyn FnMut(Wire),
    ) -> Result<Completion> {
        let cfg = &self.shared.config;
        req.write_to(buf, cfg.include_usage);
        let body = &buf[..];
        let transport = req.transport;
        let url = format!("{}/chat/completions", transport.base_or_default());
        if transport.api_base().is_none()
            && !self
                .shared
                .default_base_logged
                .swap(true, Ordering::Relaxed)
        {
            log::info!("no api_base set: using {url}");
        }
        let key = transport.api_key();
        let deadline = Deadline::new(cfg);
        let mut attempt = 0u32;
        loop {
            attempt = attempt.saturating_add(1);
            if let Some(c) = req.cancel {
                c.check()?;
            }
            deadline.check()?;
            // Take the agent before arming: a cancel that lands between the
            // check above and the registration runs the hook at once, and the
            // hook must shut down the agent this request uses, not the one
            // it would otherwise pick up afterwards (a fresh one, which no
            // later hook run would stop).
            let agent = self.agent();
            let _hook = self.arm(req.cancel);
            let started = Instant::now();
            let mut http = agent
                .post(&url)
                .config()
                // The deadline bounds the socket too (connect, headers,
                // every read of the body).
                .timeout_global(deadline.remaining())
                .build()
                .header("Content-Type", "application/json")
                .header(
                    "Accept",
                    if req.stream {
                        "text/event-stream"
                    } else {
                        "application/json"
                    },
                );
            if let Some(key) = transport.api_key() {
                http = http.header("Authorization", format!("Bearer {key}"));
            }
            log::trace!("request body: {}", String::from_utf8_lossy(body));
            let (err, retry_after) = match http.send(body) {
                Err(e) => {
                    log::debug!(
                        "POST {url} failed after {} ms: {e}",
                        started.elapsed().as_millis()
                    );
                    // The failure is the shutdown a cancel caused: report
                    // the cancel, not the broken socket.
                    if is_cancelled(req.cancel) {
                        return Err(Error::Cancelled);
                    }
                    let retryable = retry::is_connection_failure(&e);
                    let err = map_ureq(e, cfg, &deadline);
                    if !retryable {
                        return Err(err);
                    }
                    (err, None)
                }
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    log::debug!(
                        "POST {url} -> {status} in {} ms",
                        started.elapsed().as_millis()
                    );
                    if (200..300).contains(&status) {
                        return self.read_success(resp, req, &deadline, on_fragment, on_wire);
                    }
                    let retry_after = retry::retry_after(resp.headers());
                    let message =
                        redact(&read_error_body(resp, cfg.max_line_bytes), key).into_owned();
                    // A cancel while the error body was read cut it short:
                    // the message would be partial, and the user asked to
                    // stop anyway.
                    if is_cancelled(req.cancel) {
                        return Err(Error::Cancelled);
                    }
                    let err = Error::Http { status, message };
                    if !RETRYABLE.contains(&status) {
                        return Err(err);
                    }
                    (err, retry_after)
                }
            };
            if attempt > cfg.max_retries {
                return Err(err);
            }
            // The server's own estimate beats the backoff, but neither may
            // stall the run past the cap.
            let wait = retry_after
                .unwrap_or_else(|| retry::backoff(cfg.retry_base, attempt))
                .min(cfg.retry_cap)
                // Past the deadline the next attempt would not start: wait
                // no longer than until then (the check above reports it).
                .min(deadline.remaining().unwrap_or(Duration::MAX));
            log::debug!(
                "attempt {attempt} failed ({err}); retrying in {} ms",
                wait.as_millis()
            );
            on_retry(&RetryNotice {
                attempt,
                error: err.to_string(),
                wait,
            });
            retry::sleep(wait, req.cancel)?;
        }
    }

    fn read_success(
        &self,
        resp: ureq::http::Response<ureq::Body>,
        req: &Request<'_>,
        deadline: &Deadline,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
        on_wire: &mut dyn FnMut(Wire),
    ) -> Result<Completion> {
        let cfg = &self.shared.config;
        let key = req.transport.api_key();
        // The server decides, not the request: some ignore `stream: true`
        // and answer with one JSON body (or the reverse).
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .and_then(crate::media_type::MediaType::parse)
            .is_some_and(|m| m.is("text/event-stream"));
        // A body with a length or chunked encoding ends where the server
        // says, so it can be read to its end after `[DONE]` (see
        // `drain_after_done`); one that ends only when the connection closes
        // would keep us waiting on a server that keeps it open.
        let framed = resp.headers().contains_key("content-length")
            || resp
                .headers()
                .get("transfer-encoding")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let watch = Watch::new(cfg, deadline);
        let reader = Watched {
            inner: BodyReader(resp.into_body().into_reader()),
            watch: &watch,
            idle: is_sse,
        };
        let result = if is_sse {
            // 8 KiB, std's default: ureq's reader buffers too, and a larger
            // buffer per stream is what dominates memory with many agents.
            let mut reader = BufReader::with_capacity(8 * 1024, reader);
            let options = StreamOptions {
                max_line: cfg.max_line_bytes,
                max_body: cfg.max_body_bytes,
                split_think: req.split_think,
                secret: key,
            };
            let done = read_stream(
                &mut reader,
                &options,
                &mut || watch.progress(),
                on_fragment,
                &mut || on_wire(Wire::Wait),
            );
            if done.is_ok() {
                on_wire(Wire::Answered);
                if framed {
                    drain_after_done(&mut reader);
                }
            }
            done
        } else {
            // The body follows the head at once, or nearly.
            on_wire(Wire::Answered);
            let mut body = Vec::new();
            // One byte over the limit tells "exactly at the limit" from
            // "over it" without reading the rest.
            match reader
                .take(cfg.max_body_bytes.saturating_add(1))
                .read_to_end(&mut body)
            {
                Ok(_) if body.len() as u64 > cfg.max_body_bytes => Err(DecodeError::Protocol(
                    format!("response body exceeds {} bytes", cfg.max_body_bytes),
                )),
                Ok(_) => parse_response(&body, req.split_think).inspect(|c| {
                    // A server that ignored `stream: true` still feeds the listeners.
                    if req.stream {
                        if let Some(r) = c.message.reasoning.as_deref().filter(|r| !r.is_empty()) {
                            on_fragment(Fragment::Reasoning(r));
                        }
                        if !c.message.content.is_empty() {
                            on_fragment(Fragment::Content(&c.message.content));
                        }
                    }
                }),
                Err(e) => Err(DecodeError::from_io(e)),
            }
        };
        result.map_err(|e| {
            // A cancel shuts the socket down, and the read fails with
            // whatever the cut looked like: report the cancel.
            if is_cancelled(req.cancel) {
                Error::Cancelled
            } else if let (DecodeError::TimedOut, Some(bound)) = (&e, watch.expired()) {
                Error::Timeout(bound)
            } else {
                decode_error(e, cfg, key)
            }
        })
    }
}

/// The one place a [`DecodeError`] becomes a public [`Error`]; timeouts get
/// the configured read timeout, and the API key (`secret`) is redacted from
/// any text the server sent.
/// What the caller of [`Client::chat`] hears of the wire, to time its
/// listeners' deliveries (see `listener::hub`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// What was read is decoded; the next read may wait for the network.
    Wait,
    /// The answer is in (a plain body's head, or a stream's `[DONE]`): the
    /// turn's own work follows, with no more waiting on the server.
    Answered,
}

pub(crate) fn decode_error(e: DecodeError, cfg: &HttpConfig, secret: Option<&str>) -> Error {
    match e {
        DecodeError::Protocol(m) => Error::Protocol(redact(&m, secret).into_owned()),
        DecodeError::Truncated => Error::Truncated,
        DecodeError::TimedOut => Error::Timeout(cfg.read_timeout),
        DecodeError::Io(e) => Error::Transport(Box::new(e)),
    }
}

/// The request deadline of one [`Client::chat`], if any.
struct Deadline {
    at: Option<Instant>,
    configured: Duration,
}

impl Deadline {
    fn new(cfg: &HttpConfig) -> Deadline {
        Deadline {
            at: cfg.request_deadline.and_then(deadline_after),
            configured: cfg.request_deadline.unwrap_or(Duration::MAX),
        }
    }

    /// Time left; `None` without a deadline.
    fn remaining(&self) -> Option<Duration> {
        self.at
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    fn passed(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }

    fn check(&self) -> Result<()> {
        if self.passed() {
            Err(Error::Timeout(self.configured))
        } else {
            Ok(())
        }
    }
}

/// The idle bound and the deadline of one response body, checked before
/// every read; the decoder reports progress (a chat chunk) through it.
struct Watch<'a> {
    idle: Duration,
    last_progress: Cell<Instant>,
    /// Whether a chat chunk was decoded since the last check: the clock is
    /// read once per read, not once per chunk (a read often takes hundreds
    /// of them).
    progressed: Cell<bool>,
    deadline: &'a Deadline,
    /// What ureq's per-read timeout is set to.
    per_read: Duration,
    /// The bound that ended the body, for the error.
    expired: Cell<Option<Duration>>,
}

impl<'a> Watch<'a> {
    fn new(cfg: &HttpConfig, deadline: &'a Deadline) -> Watch<'a> {
        let idle = cfg.idle_timeout();
        Watch {
            idle,
            per_read: cfg.read_timeout.min(idle),
            last_progress: Cell::new(Instant::now()),
            progressed: Cell::new(false),
            deadline,
            expired: Cell::new(None),
        }
    }

    fn progress(&self) {
        self.progressed.set(true);
    }

    /// Which bound has run out, if any (the deadline first). Progress made
    /// since the last check counts as made now: the decoder reports it
    /// between two reads, microseconds before this check.
    fn over(&self, idle: bool) -> Option<Duration> {
        if self.deadline.passed() {
            return Some(self.deadline.configured);
        }
        if !idle {
            return None;
        }
        if self.progressed.replace(false) {
            self.last_progress.set(Instant::now());
            return None;
        }
        (self.last_progress.get().elapsed() >= self.idle).then_some(self.idle)
    }

    fn expired(&self) -> Option<Duration> {
        self.expired.get()
    }
}

/// A body reader that fails with `TimedOut` once the idle bound (streams
/// only) or the deadline has run out, and records which.
struct Watched<'a> {
    inner: BodyReader,
    watch: &'a Watch<'a>,
    /// Whether the idle bound applies (an SSE body).
    idle: bool,
}

impl Read for Watched<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(bound) = self.watch.over(self.idle) {
            self.watch.expired.set(Some(bound));
            return Err(io::Error::new(io::ErrorKind::TimedOut, "bound expired"));
        }
        self.inner.read(buf).inspect_err(|e| {
            if e.kind() == io::ErrorKind::TimedOut {
                // ureq's own timeouts: the global one is the deadline, the
                // per-read one the read timeout or the idle bound.
                let bound = self.watch.over(self.idle).unwrap_or(self.watch.per_read);
                self.watch.expired.set(Some(bound));
            }
        })
    }
}

/// ureq's body reader, with ureq's own timeouts surfaced as
/// [`io::ErrorKind::TimedOut`] where they are raised.
///
/// ureq enforces `timeout_per_read` itself and reports an expiry as an
/// `io::Error` of kind `Other` wrapping `ureq::Error::Timeout`; the decoder,
/// which knows nothing of ureq, classifies reads by their kind.
struct BodyReader(ureq::BodyReader<'static>);

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(ureq_timeout_kind)
    }
}

/// Bytes read after `[DONE]` before giving the connection up.
const DRAIN_MAX: usize = 16 * 1024;

/// Read the rest of a streamed body after `[DONE]`: usually only the
/// chunked encoding's last chunk, already received, so ureq can return the
/// connection to its pool and the next turn reuses it instead of opening a
/// new one (a TCP connect, and a TLS handshake with a remote provider).
/// The answer is complete whatever happens here: more than `DRAIN_MAX`
/// bytes, a read error, the idle bound or the deadline (checked before
/// each read, as for the events) just end the draining, and the connection
/// is closed as before. A server that keeps a framed body open after
/// `[DONE]` costs at most one per-read timeout (the read or idle timeout,
/// whichever is shorter), as it would for OpenAI's own clients, which read
/// a stream to its end too.
fn drain_after_done(reader: &mut impl Read) {
    const STEP: usize = 1024;
    let mut buf = [0u8; STEP];
    let mut left = DRAIN_MAX;
    while left > 0 {
        match reader.read(&mut buf[..left.min(STEP)]) {
            Ok(0) | Err(_) => return,
            Ok(n) => left -= n,
        }
    }
}

/// `e` with kind `TimedOut` when it wraps a `ureq::Error::Timeout`.
fn ureq_timeout_kind(e: io::Error) -> io::Error {
    let is_timeout = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ureq::Error>())
        .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)));
    if is_timeout {
        io::Error::new(io::ErrorKind::TimedOut, e)
    } else {
        e
    }
}

fn is_cancelled(c: Option<&Cancellable>) -> bool {
    c.is_some_and(Cancellable::is_cancelled)
}

fn map_ureq(e: ureq::Error, cfg: &HttpConfig, deadline: &Deadline) -> Error {
    match e {
        // Which timeout expired decides which configured duration to name.
        ureq::Error::Timeout(ureq::Timeout::Global) if deadline.at.is_some() => {
            Error::Timeout(deadline.configured)
        }
        ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => {
            Error::Timeout(cfg.connect_timeout)
        }
        ureq::Error::Timeout(_) => Error::Timeout(cfg.read_timeout),
        ureq::Error::BodyExceedsLimit(n) => {
            Error::protocol(format!("response body exceeds {n} bytes"))
        }
        other => Error::Transport(Box::new(other)),
    }
}

/// The server's own message: OpenAI's `{"error":{"message":..}}`, Ollama's
/// `{"error":".."}`, a bare `{"message":..}`, else the raw body; truncated.
fn read_error_body(resp: ureq::http::Response<ureq::Body>, limit: usize) -> String {
    let mut body = Vec::new();
    let _ = resp
        .into_body()
        .into_reader()
        .take(limit as u64)
        .read_to_end(&mut body);
    error_message(&body)
}

pub(crate) fn error_message(body: &[u8]) -> String {
    let from_json = crate::util::json_from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            let e = v.get("error").unwrap_or(&v);
            e.get("message")
                .and_then(Value::as_str)
                .or_else(|| e.as_str())
                .map(str::to_string)
        });
    let text = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    crate::util::excerpt(&text, MAX_MESSAGE_CHARS).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn error_message_shapes() {
        assert_eq!(
            error_message(br#"{"error":{"message":"bad model","type":"x"}}"#),
            "bad model"
        );
        assert_eq!(
            error_message(br#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(error_message(b"  plain text \n"), "plain text");
        let long = "x".repeat(2000);
        assert_eq!(
            error_message(long.as_bytes()).chars().count(),
            MAX_MESSAGE_CHARS + 1
        );
    }

    #[test]
    fn decode_errors_map_once() {
        let cfg = HttpConfig::default().with_read_timeout(Duration::from_millis(1500));
        let shown = |e| decode_error(e, &cfg, None).to_string();
        assert_eq!(
            shown(DecodeError::Protocol("sse line exceeds 12 bytes".into())),
            "protocol error: sse line exceeds 12 bytes"
        );
        assert!(matches!(
            decode_error(DecodeError::Truncated, &cfg, None),
            Error::Truncated
        ));
        assert!(matches!(
            decode_error(DecodeError::TimedOut, &cfg, None),
            Error::Timeout(d) if d == Duration::from_millis(1500)
        ));
        let e = decode_error(
            DecodeError::from_io(io::Error::new(io::ErrorKind::ConnectionReset, "boom")),
            &cfg,
            None,
        );
        assert!(matches!(e, Error::Transport(_)));
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn ureq_timeouts_read_as_timed_out() {
        // What ureq's body reader returns when `timeout_per_read` expires.
        let wrapped = ureq::Error::Timeout(ureq::Timeout::PerRead).into_io();
        assert_eq!(wrapped.kind(), io::ErrorKind::Other);
        let classified = DecodeError::from_io(ureq_timeout_kind(wrapped));
        assert!(matches!(classified, DecodeError::TimedOut));
    }
}
