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

use std::io::{BufReader, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use super::{ChatTransport, HttpConfig};
use crate::sse::{Flow, read_sse};
use crate::stream::{Accumulator, Completion, Fragment, parse_response};
use crate::{Cancellable, Error, Result};

/// Status codes worth another attempt.
const RETRYABLE: [u16; 5] = [429, 500, 502, 503, 504];
/// Longest server message kept in [`Error::Http`].
const MAX_MESSAGE_CHARS: usize = 500;

/// A failed attempt that will be retried.
#[derive(Debug)]
pub(crate) struct RetryNotice {
    pub(crate) attempt: u32,
    pub(crate) error: String,
    pub(crate) wait: Duration,
}

/// Options of one chat call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Exchange<'a> {
    pub(crate) cancel: Option<&'a Cancellable>,
    pub(crate) stream: bool,
    pub(crate) split_think: bool,
}

struct Shared {
    config: HttpConfig,
    agent: Mutex<ureq::Agent>,
    /// Whether the fallback to OpenAI's API base was logged (once per client).
    default_base_logged: std::sync::atomic::AtomicBool,
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
                default_base_logged: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    pub(crate) fn config(&self) -> &HttpConfig {
        &self.shared.config
    }

    fn agent(&self) -> ureq::Agent {
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

    /// One chat completion, with retries. `body` is the serialized request.
    pub(crate) fn chat(
        &self,
        transport: &ChatTransport,
        body: &[u8],
        x: Exchange<'_>,
        on_retry: &mut dyn FnMut(&RetryNotice),
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<Completion> {
        let cfg = &self.shared.config;
        let url = format!("{}/chat/completions", transport.base_or_default());
        if transport.api_base().is_none()
            && !self
                .shared
                .default_base_logged
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            log::info!("no api_base set: using {url}");
        }
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            if let Some(c) = x.cancel {
                c.check()?;
            }
            // Take the agent before arming: a cancel that lands between the
            // check above and the registration runs the hook at once, and the
            // hook must shut down the agent this request uses, not the one
            // it would otherwise pick up afterwards (a fresh one, which no
            // later hook run would stop).
            let agent = self.agent();
            let _hook = self.arm(x.cancel);
            let started = Instant::now();
            let mut req = agent
                .post(&url)
                .header("Content-Type", "application/json")
                .header(
                    "Accept",
                    if x.stream {
                        "text/event-stream"
                    } else {
                        "application/json"
                    },
                );
            if let Some(key) = transport.api_key() {
                req = req.header("Authorization", format!("Bearer {key}"));
            }
            log::trace!("request body: {}", String::from_utf8_lossy(body));
            let failure = match req.send(body) {
                Err(e) => {
                    log::debug!(
                        "POST {url} failed after {} ms: {e}",
                        started.elapsed().as_millis()
                    );
                    if is_cancelled(x.cancel) {
                        return Err(Error::Cancelled);
                    }
                    let retryable = is_connection_failure(&e);
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
                        return self.read_success(resp, x, on_fragment);
                    }
                    let retry_after = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let message = read_error_body(resp, cfg.max_line_bytes);
                    if is_cancelled(x.cancel) {
                        return Err(Error::Cancelled);
                    }
                    let err = Error::Http { status, message };
                    if !RETRYABLE.contains(&status) {
                        return Err(err);
                    }
                    (err, retry_after)
                }
            };
            let (err, retry_after) = failure;
            if attempt > cfg.max_retries {
                return Err(err);
            }
            let wait = retry_after
                .unwrap_or_else(|| backoff(cfg.retry_base, attempt))
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
            sleep(wait, x.cancel)?;
        }
    }

    fn read_success(
        &self,
        resp: ureq::http::Response<ureq::Body>,
        x: Exchange<'_>,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<Completion> {
        let cfg = &self.shared.config;
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        let reader = resp.into_body().into_reader();
        let result = if is_sse {
            let reader = BufReader::with_capacity(64 * 1024, reader);
            read_stream(
                reader,
                cfg.max_line_bytes,
                cfg.max_body_bytes,
                x.split_think,
                on_fragment,
            )
        } else {
            let mut body = Vec::new();
            match reader.take(cfg.max_body_bytes + 1).read_to_end(&mut body) {
                Ok(_) if body.len() as u64 > cfg.max_body_bytes => Err(Error::protocol(format!(
                    "response body exceeds {} bytes",
                    cfg.max_body_bytes
                ))),
                Ok(_) => parse_response(&body, x.split_think).inspect(|c| {
                    // A server that ignored `stream: true` still feeds the listeners.
                    if x.stream {
                        if let Some(r) = c.message.reasoning.as_deref().filter(|r| !r.is_empty()) {
                            on_fragment(Fragment::Reasoning(r));
                        }
                        if !c.message.content.is_empty() {
                            on_fragment(Fragment::Content(&c.message.content));
                        }
                    }
                }),
                Err(e) => Err(Error::Transport(Box::new(e))),
            }
        };
        result.map_err(|e| {
            if is_cancelled(x.cancel) {
                Error::Cancelled
            } else {
                refine(e, cfg)
            }
        })
    }

    /// GET `url` and parse JSON, within `timeout`; `None` on any failure.
    pub(crate) fn get_json(
        &self,
        url: &str,
        api_key: Option<&str>,
        timeout: Duration,
    ) -> Option<Value> {
        let mut req = self
            .agent()
            .get(url)
            .config()
            .timeout_global(Some(timeout))
            .build();
        if let Some(key) = api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        finish_probe(url, req.call())
    }

    /// POST JSON to `url` and parse JSON, within `timeout`; `None` on any failure.
    pub(crate) fn post_json(&self, url: &str, body: &Value, timeout: Duration) -> Option<Value> {
        let req = self
            .agent()
            .post(url)
            .config()
            .timeout_global(Some(timeout))
            .build();
        let body = serde_json::to_vec(body).ok()?;
        finish_probe(
            url,
            req.header("Content-Type", "application/json")
                .send(&body[..]),
        )
    }
}

/// Decode a streamed body: SSE events into the accumulator, fragments to
/// `on_fragment`, until `[DONE]` or EOF. The whole streaming path after the
/// socket (the benches drive it through `crate::__bench`).
pub(crate) fn read_stream<R: std::io::BufRead>(
    reader: R,
    max_line: usize,
    max_body: u64,
    split_think: bool,
    on_fragment: &mut dyn FnMut(Fragment<'_>),
) -> Result<Completion> {
    let mut acc = Accumulator::new(split_think);
    // Small, valid events can still grow the message without end:
    // the event data of one stream is capped like a plain body.
    let mut total = 0u64;
    read_sse(reader, max_line, &mut |data| {
        total = total.saturating_add(data.len() as u64);
        if total > max_body {
            return Err(Error::protocol(format!(
                "streamed response exceeds {max_body} bytes"
            )));
        }
        acc.push_data(data, on_fragment)?;
        Ok(if acc.is_done() {
            Flow::Stop
        } else {
            Flow::Continue
        })
    })
    .map_err(eof_is_truncation)
    .and_then(|()| acc.finish())
}

fn finish_probe(
    url: &str,
    result: std::result::Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Option<Value> {
    match result {
        Ok(resp) if resp.status().is_success() => {
            let mut body = Vec::new();
            resp.into_body()
                .into_reader()
                .take(4 * 1024 * 1024)
                .read_to_end(&mut body)
                .ok()?;
            let v = serde_json::from_slice(&body).ok();
            log::debug!(
                "probe {url}: {}",
                if v.is_some() { "ok" } else { "not json" }
            );
            v
        }
        Ok(resp) => {
            log::debug!("probe {url}: status {}", resp.status().as_u16());
            None
        }
        Err(e) => {
            log::debug!("probe {url}: {e}");
            None
        }
    }
}

fn is_cancelled(c: Option<&Cancellable>) -> bool {
    c.is_some_and(Cancellable::is_cancelled)
}

fn is_connection_failure(e: &ureq::Error) -> bool {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::ConnectionFailed => true,
        ureq::Error::Io(io) => matches!(
            io.kind(),
            K::ConnectionRefused
                | K::ConnectionReset
                | K::ConnectionAborted
                | K::BrokenPipe
                | K::UnexpectedEof
        ),
        _ => false,
    }
}

fn map_ureq(e: ureq::Error, cfg: &HttpConfig) -> Error {
    match e {
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

/// A stream whose body ended mid-frame (the server closed a chunked body
/// early) was cut, like one that ended without `[DONE]`.
fn eof_is_truncation(e: Error) -> Error {
    match e {
        Error::Transport(inner)
            if inner
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::UnexpectedEof) =>
        {
            Error::Truncated
        }
        other => other,
    }
}

/// Give timeouts that surfaced as I/O errors from the body reader their own
/// variant and the configured duration.
fn refine(e: Error, cfg: &HttpConfig) -> Error {
    match e {
        Error::Timeout(d) if d.is_zero() => Error::Timeout(cfg.read_timeout),
        Error::Transport(inner) => {
            if let Some(io) = inner.downcast_ref::<std::io::Error>() {
                if io.kind() == std::io::ErrorKind::TimedOut {
                    return Error::Timeout(cfg.read_timeout);
                }
                if let Some(ureq::Error::Timeout(_)) =
                    io.get_ref().and_then(|r| r.downcast_ref::<ureq::Error>())
                {
                    return Error::Timeout(cfg.read_timeout);
                }
            }
            Error::Transport(inner)
        }
        other => other,
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

/// `base * 2^(attempt-1)`, scaled by a jitter factor in [0.5, 1.0).
fn backoff(base: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << (attempt - 1).min(16));
    exp.mul_f64(0.5 + jitter() * 0.5)
}

/// A cheap pseudo-random number in [0, 1) (no `rand` dependency; jitter only
/// needs to de-synchronize clients).
fn jitter() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x9E37_79B9, |d| d.as_nanos() as u64);
    let mut x = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) ^ seed;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Sleep `d`, returning early with `Cancelled` when `cancel` fires.
fn sleep(d: Duration, cancel: Option<&Cancellable>) -> Result<()> {
    let Some(cancel) = cancel else {
        std::thread::sleep(d);
        return Ok(());
    };
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    let _hook = cancel.on_cancel(move || {
        let _ = tx.try_send(());
    });
    let _ = rx.recv_timeout(d);
    cancel.check()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn backoff_grows_and_jitters() {
        let b = Duration::from_millis(100);
        for attempt in 1..5 {
            let d = backoff(b, attempt);
            let full = b * (1 << (attempt - 1));
            assert!(d >= full / 2 && d <= full, "{d:?} vs {full:?}");
        }
    }

    #[test]
    fn sleep_is_cut_by_cancel() {
        let c = Cancellable::new();
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            c2.cancel();
        });
        let started = Instant::now();
        assert!(
            sleep(Duration::from_secs(10), Some(&c))
                .unwrap_err()
                .is_cancelled()
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
    }
}
