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

use std::io::{self, BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use serde_json::Value;

use super::HttpConfig;
use super::decode::{Completion, DecodeError, Fragment, parse_response, read_stream};
use super::request::Request;
use super::retry::{self, RETRYABLE, RetryNotice};
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
        .timeout_connect(Some(config.connect_timeout))
        .timeout_recv_response(Some(config.read_timeout))
        .timeout_per_read(Some(config.read_timeout))
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
    /// it streams in.
    pub(crate) fn chat(
        &self,
        req: &Request<'_>,
        buf: &mut Vec<u8>,
        on_retry: &mut dyn FnMut(&RetryNotice),
        on_fragment: &mut dyn FnMut(Fragment<'_>),
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
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            if let Some(c) = req.cancel {
                c.check()?;
            }
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
                    let err = map_ureq(e, cfg);
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
                        return self.read_success(resp, req, on_fragment);
                    }
                    let retry_after = retry::retry_after(resp.headers());
                    let message = read_error_body(resp, cfg.max_line_bytes);
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
                .min(cfg.retry_cap);
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
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<Completion> {
        let cfg = &self.shared.config;
        // The server decides, not the request: some ignore `stream: true`
        // and answer with one JSON body (or the reverse).
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        let reader = BodyReader(resp.into_body().into_reader());
        let result = if is_sse {
            let reader = BufReader::with_capacity(64 * 1024, reader);
            read_stream(
                reader,
                cfg.max_line_bytes,
                cfg.max_body_bytes,
                req.split_think,
                on_fragment,
            )
        } else {
            let mut body = Vec::new();
            // One byte over the limit tells "exactly at the limit" from
            // "over it" without reading the rest.
            match reader.take(cfg.max_body_bytes + 1).read_to_end(&mut body) {
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
            } else {
                decode_error(e, cfg)
            }
        })
    }
}

/// The one place a [`DecodeError`] becomes a public [`Error`]; timeouts get
/// the configured read timeout.
pub(crate) fn decode_error(e: DecodeError, cfg: &HttpConfig) -> Error {
    match e {
        DecodeError::Protocol(m) => Error::Protocol(m),
        DecodeError::Truncated => Error::Truncated,
        DecodeError::TimedOut => Error::Timeout(cfg.read_timeout),
        DecodeError::Io(e) => Error::Transport(Box::new(e)),
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

fn map_ureq(e: ureq::Error, cfg: &HttpConfig) -> Error {
    match e {
        // Which timeout expired decides which configured duration to name.
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
    let from_json = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
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
        let shown = |e| decode_error(e, &cfg).to_string();
        assert_eq!(
            shown(DecodeError::Protocol("sse line exceeds 12 bytes".into())),
            "protocol error: sse line exceeds 12 bytes"
        );
        assert!(matches!(
            decode_error(DecodeError::Truncated, &cfg),
            Error::Truncated
        ));
        assert!(matches!(
            decode_error(DecodeError::TimedOut, &cfg),
            Error::Timeout(d) if d == Duration::from_millis(1500)
        ));
        let e = decode_error(
            DecodeError::from_io(io::Error::new(io::ErrorKind::ConnectionReset, "boom")),
            &cfg,
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
