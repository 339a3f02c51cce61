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
//! backoff and jitter, honouring `Retry-After` (seconds) up to the cap: in
//! [`ErrorKind`](crate::ErrorKind)s, `RateLimit`, the transient `Server`
//! statuses, and the `Connect` and `Transport` failures that happen before
//! the server saw the request. An overflow is not retried, even as a 500
//! (`ContextOverflow`): it would overflow again; nor are images sent to a
//! model without vision (`ImageUnsupported`, a 500 from llama-server). A stream that has started
//! is never retried once its text reached the listeners; an error the server
//! reports in the stream before any text did (Anthropic's `overloaded_error`
//! event right after its `200`) is retried as its status would have been.
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
//! # Errors name the URL
//!
//! Every error about the server ([`Error::Http`], [`Error::Connect`],
//! [`Error::Transport`], [`Error::Timeout`], [`Error::Protocol`]) carries
//! the URL requested, with its user info and query values redacted
//! (`util::redact_url`) and the API key too, should the base hold it.
//!
//! # Secrets
//!
//! Whatever text the server sends back and the client passes on (an error
//! body, a stream's error chunk, a chunk quoted in an error or a log line,
//! the answer's text, reasoning and call arguments, the stream's deltas)
//! has the transport's API key replaced by `<redacted>` first, so a server
//! or proxy that echoes the key's header cannot put the key into an
//! [`Error`], an event, the history or a log. A redirect is not followed
//! (a 3xx is an [`Error::Http`]): ureq would strip `Authorization` from
//! it, but not Anthropic's `x-api-key` nor Gemini's `x-goog-api-key`.

use std::cell::{Cell, OnceCell};
use std::fmt;
use std::io::{self, BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use ureq::http::{HeaderName, HeaderValue, header};

use super::HttpConfig;
use super::body::error_message;
use super::connect::connection_error;
use super::decode::{Completion, Fragment};
use super::error::{DecodeError, decode_error};
use super::request::Request;
use super::retry::{self, RetryNotice};
use super::sink::{Noting, Sink};
use super::stream::{StreamOptions, read_stream};
use super::wire;
use crate::net::AgentSetup;
use crate::util::{deadline_after, redact_in, redact_url, redact_url_in};
use crate::{Api, Cancellable, ChatTransport, Error, Result};

struct Shared {
    config: HttpConfig,
    agent: Mutex<ureq::Agent>,
    /// Whether the fallback to OpenAI's API base was logged (once per client).
    default_base_logged: AtomicBool,
    /// Where the last request went; see [`Target`].
    target: Mutex<Option<Arc<Target>>>,
}

/// `post` with the `Content-Type` of every request and the `Accept` of a
/// stream or a JSON answer, names and values ready made: ureq neither
/// parses nor copies them. They are appended to the request's header map
/// in place, as `header` would append them, but without moving the whole
/// request through `http`'s builder for each (about 700 instructions a
/// request; BENCHMARKS.md, issue 42, session 16).
fn with_content_headers(
    mut post: ureq::RequestBuilder<ureq::typestate::WithBody>,
    stream: bool,
) -> ureq::RequestBuilder<ureq::typestate::WithBody> {
    // `None` only for a builder that already failed (its error is the
    // send's), which `header` leaves as it is too.
    if let Some(headers) = post.headers_mut() {
        let json = HeaderValue::from_static("application/json");
        let accept = if stream {
            HeaderValue::from_static("text/event-stream")
        } else {
            json.clone()
        };
        headers.append(header::CONTENT_TYPE, json);
        headers.append(header::ACCEPT, accept);
    }
    post
}

/// `post` with the key headers of `transport` (kept in `target`),
/// appended in place as `header` appends them; a key whose headers do not
/// parse goes to ureq as text, which fails the send.
fn with_key_headers(
    mut post: ureq::RequestBuilder<ureq::typestate::WithBody>,
    target: &Target,
    transport: &ChatTransport,
) -> ureq::RequestBuilder<ureq::typestate::WithBody> {
    match (&target.auth, post.headers_mut()) {
        (Some(auth), Some(headers)) => {
            for (name, value) in auth {
                headers.append(name.clone(), value.clone());
            }
        }
        _ => {
            for (name, value) in wire::auth_headers(transport.api(), transport.api_key()) {
                post = post.header(name, value);
            }
        }
    }
    post
}

/// A request's URL, and its parsed form, kept for the next request to the
/// same base and path: a turn neither formats the URL nor parses it again
/// (about 2,400 instructions a request; `BENCHMARKS.md`, issue 42, session
/// 15). With them, the API's key headers for the transport's key, made
/// and parsed once (session 16).
struct Target {
    url: String,
    /// `None` when the URL does not parse: ureq is then given the text and
    /// reports the error at the send, as for any request.
    uri: Option<ureq::http::Uri>,
    /// The API and the key the headers below are for.
    api: Api,
    key: Option<String>,
    /// `wire::auth_headers` of `api` and `key`, parsed; `None` when one
    /// does not parse: each request then hands ureq the text, which fails
    /// at the send, as before.
    auth: Option<Vec<(HeaderName, HeaderValue)>>,
}

impl Target {
    fn is(&self, base: &str, path: &str, api: Api, key: Option<&str>) -> bool {
        self.url.len() == base.len() + path.len()
            && self.url.starts_with(base)
            && self.url.ends_with(path)
            && self.api == api
            && self.key.as_deref() == key
    }
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

/// The agent, through the crate's one HTTP setup ([`crate::net`]: error
/// statuses are read like any response, so their body carries the server's
/// message and 429/5xx go through the retry policy).
fn build_agent(config: &HttpConfig) -> ureq::Agent {
    AgentSetup::new()
        .with_connect_timeout(config.connect_timeout)
        .with_response_timeout(config.read_timeout)
        // A silent socket is bounded by the idle bound too.
        .with_read_timeout(config.read_timeout.min(config.idle_timeout()))
        .agent()
}

impl Client {
    pub(crate) fn new(config: HttpConfig) -> Client {
        let agent = Mutex::new(build_agent(&config));
        Client {
            shared: Arc::new(Shared {
                config,
                agent,
                default_base_logged: AtomicBool::new(false),
                target: Mutex::new(None),
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

    /// The request URL for `base` and `path`, and the key headers of
    /// `api` for `key`: the last request's when they are the same (see
    /// [`Target`]).
    fn target(&self, base: &str, path: &str, api: Api, key: Option<&str>) -> Arc<Target> {
        let mut kept = self.shared.target.lock();
        if let Some(t) = kept.as_ref().filter(|t| t.is(base, path, api, key)) {
            return Arc::clone(t);
        }
        let mut url = String::with_capacity(base.len() + path.len());
        url.push_str(base);
        url.push_str(path);
        let uri = ureq::http::Uri::try_from(url.as_str()).ok();
        let auth = wire::auth_headers(api, key)
            .into_iter()
            .map(|(name, value)| {
                Some((
                    HeaderName::from_bytes(name.as_bytes()).ok()?,
                    HeaderValue::try_from(value).ok()?,
                ))
            })
            .collect();
        Arc::clone(kept.insert(Arc::new(Target {
            url,
            uri,
            api,
            key: key.map(str::to_string),
            auth,
        })))
    }

    /// One chat completion, with retries: `req` is encoded into `buf` (a
    /// buffer the caller reuses between requests), sent, and its answer
    /// decoded; `sink` hears of each retry, gets text as it streams in, and
    /// is told before each read of a stream that may wait (see [`Sink`]).
    pub(crate) fn chat(
        &self,
        req: &Request<'_>,
        buf: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> Result<Completion> {
        wire::check_built(req.transport.api())?;
        let cfg = &self.shared.config;
        wire::encode(req, buf, cfg.include_usage)?;
        let transport = req.transport;
        let target = self.target(
            transport.base_or_default(),
            &wire::path(transport, req.stream),
            transport.api(),
            transport.api_key(),
        );
        let url = target.url.as_str();
        let shown = Shown::new(url, transport.api_key());
        if transport.api_base().is_none()
            && !self
                .shared
                .default_base_logged
                .swap(true, Ordering::Relaxed)
        {
            log::info!("no api_base set: using {shown}");
        }
        let deadline = Deadline::new(cfg);
        let mut attempt = 0u32;
        loop {
            attempt = attempt.saturating_add(1);
            if let Some(c) = req.cancel {
                c.check()?;
            }
            deadline.check(&shown)?;
            // Take the agent before arming: a cancel that lands between the
            // check above and the registration runs the hook at once, and the
            // hook must shut down the agent this request uses, not the one
            // it would otherwise pick up afterwards (a fresh one, which no
            // later hook run would stop).
            let agent = self.agent();
            let _hook = self.arm(req.cancel);
            let started = Instant::now();
            let post = match &target.uri {
                Some(uri) => agent.post(uri.clone()),
                None => agent.post(url),
            };
            // The deadline bounds the socket too (connect, headers, every
            // read of the body). Without one, no request-level config: ureq
            // copies the agent's whole config into each request that has
            // one, and the agent sets no global timeout to override.
            let post = match deadline.remaining() {
                Some(left) => post.config().timeout_global(Some(left)).build(),
                None => post,
            };
            let http = with_content_headers(post, req.stream);
            let mut http = with_key_headers(http, &target, transport);
            if let Some(tp) = req.traceparent {
                http = http.header("traceparent", tp);
            }
            log::trace!("request body: {}", String::from_utf8_lossy(buf));
            let (err, retry_after) = match http.send(&buf[..]) {
                Err(e) => {
                    log::debug!(
                        "POST {shown} failed after {} ms: {}",
                        crate::util::millis(started.elapsed()),
                        redact_url_in(&e.to_string(), url)
                    );
                    // The failure is the shutdown a cancel caused: report
                    // the cancel, not the broken socket.
                    if is_cancelled(req.cancel) {
                        return Err(Error::Cancelled);
                    }
                    let retryable = retry::is_connection_failure(&e);
                    let err = map_ureq(e, cfg, &deadline, url, &shown);
                    if !retryable {
                        return Err(err);
                    }
                    (err, None)
                }
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    log::debug!(
                        "POST {shown} -> {status} in {} ms",
                        crate::util::millis(started.elapsed())
                    );
                    if (200..300).contains(&status) {
                        // The request is sent: its buffer takes the answer.
                        // An error the server reported in the stream before
                        // any text reached the listeners is retried as its
                        // status would have been (`rules`, in-stream
                        // errors), the request encoded again.
                        let mut noted = Noting::new(&mut *sink);
                        match self.read_success(resp, req, &deadline, &shown, buf, &mut noted) {
                            Err(err) if !noted.heard && retry::is_retried(&err) => {
                                wire::encode(req, buf, cfg.include_usage)?;
                                (err, None)
                            }
                            done => return done,
                        }
                    } else {
                        self.rejected(resp, status, req, shown.get())?
                    }
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
                crate::util::millis(wait)
            );
            sink.retrying(&RetryNotice {
                attempt,
                error: err.to_string(),
                wait,
            });
            retry::sleep(wait, req.cancel)?;
        }
    }

    /// A non-success answer as an error to retry (with the server's
    /// `Retry-After`), or `Err` when it is not worth retrying.
    fn rejected(
        &self,
        resp: ureq::http::Response<ureq::Body>,
        status: u16,
        req: &Request<'_>,
        shown: &str,
    ) -> Result<(Error, Option<Duration>)> {
        let cfg = &self.shared.config;
        let header_hint = retry::retry_after(resp.headers());
        let (mut message, body_hint) =
            read_error_body(resp, cfg.max_line_bytes, req.transport.api());
        let retry_after = header_hint.or(body_hint);
        redact_in(&mut message, req.transport.api_key());
        // A cancel while the error body was read cut it short: the message
        // would be partial, and the user asked to stop anyway.
        if is_cancelled(req.cancel) {
            return Err(Error::Cancelled);
        }
        if status == 404
            && let Some(hint) = version_hint(req.transport)
        {
            message.push_str(&hint);
        }
        #[cfg(feature = "gemini")]
        if let Some(hint) =
            super::gemini::expired_hint(status, &message, req.transport.cached_content())
        {
            message.push_str(&hint);
        }
        let err = Error::Http {
            status,
            message,
            url: shown.to_string(),
        };
        if !retry::is_retried(&err) {
            return Err(err);
        }
        Ok((err, retry_after))
    }

    /// A 2xx answer read and decoded: a stream through the SSE reader, a
    /// whole body into `buf` (the request's buffer, sent by now, whose room
    /// the body reuses: no allocation, and no read through ureq's layers
    /// for each doubling of a fresh `Vec`; BENCHMARKS.md, issue 42, session
    /// 16).
    fn read_success(
        &self,
        resp: ureq::http::Response<ureq::Body>,
        req: &Request<'_>,
        deadline: &Deadline,
        url: &Shown<'_>,
        buf: &mut Vec<u8>,
        sink: &mut dyn Sink,
    ) -> Result<Completion> {
        let cfg = &self.shared.config;
        let key = req.transport.api_key();
        // The server decides, not the request: some ignore `stream: true`
        // and answer with one JSON body (or the reverse).
        let is_sse = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| crate::media_type::MediaType::has_essence(v, "text/event-stream"));
        // A body with a length or chunked encoding ends where the server
        // says, so it can be read to its end after `[DONE]` (see
        // `drain_after_done`); one that ends only when the connection closes
        // would keep us waiting on a server that keeps it open.
        let framed = is_sse
            && (resp.headers().contains_key(header::CONTENT_LENGTH)
                || resp
                    .headers()
                    .get(header::TRANSFER_ENCODING)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.to_ascii_lowercase().contains("chunked")));
        let watch = Watch::new(cfg, deadline);
        let filled = Cell::new(false);
        let reader = Watched {
            inner: BodyReader(resp.into_body().into_reader()),
            watch: &watch,
            idle: is_sse,
            filled: &filled,
        };
        let result = if is_sse {
            // 8 KiB, std's default: ureq's reader buffers too, and a larger
            // buffer per stream is what dominates memory with many agents.
            let mut reader = BufReader::with_capacity(8 * 1024, reader);
            let options = StreamOptions {
                api: req.transport.api(),
                max_line: cfg.max_line_bytes,
                max_body: cfg.max_body_bytes,
                split_think: req.split_think,
                secret: key,
            };
            let mut watching = Watching {
                inner: &mut *sink,
                watch: &watch,
                filled: &filled,
            };
            let done = read_stream(&mut reader, &options, &mut watching);
            if done.is_ok() && framed {
                drain_after_done(&mut reader);
            }
            done
        } else {
            let room = buf.capacity();
            buf.clear();
            // One byte over the limit tells "exactly at the limit" from
            // "over it" without reading the rest.
            let read = reader
                .take(cfg.max_body_bytes.saturating_add(1))
                .read_to_end(buf);
            let body = &buf[..];
            let decoded = match read {
                Ok(_) if body.len() as u64 > cfg.max_body_bytes => Err(DecodeError::Protocol(
                    format!("response body exceeds {} bytes", cfg.max_body_bytes),
                )),
                Ok(_) => {
                    wire::parse_response(req.transport, body, req.split_think).inspect(|c| {
                        // A server that ignored `stream: true` still feeds the listeners.
                        if req.stream {
                            if let Some(r) =
                                c.message.reasoning.as_deref().filter(|r| !r.is_empty())
                            {
                                sink.fragment(Fragment::Reasoning(r));
                            }
                            if !c.message.content.is_empty() {
                                sink.fragment(Fragment::Content(&c.message.content));
                            }
                        }
                    })
                }
                Err(e) => Err(DecodeError::from_io(e)),
            };
            // The buffer lives as long as the agent: a large answer that
            // grew it past the requests' room and `KEPT_BODY` gives the
            // room back.
            if buf.capacity() > room.max(KEPT_BODY) {
                *buf = Vec::new();
            }
            decoded
        };
        result
            .map(|c| wire::stamp_origin(c, req.transport))
            .map_err(|e| {
                // A cancel shuts the socket down, and the read fails with
                // whatever the cut looked like: report the cancel.
                if is_cancelled(req.cancel) {
                    Error::Cancelled
                } else if let (DecodeError::TimedOut, Some(bound)) = (&e, watch.expired()) {
                    Error::Timeout {
                        after: bound,
                        url: Some(url.get().to_string()),
                    }
                } else {
                    decode_error(e, cfg, key, Some(url.get()))
                }
            })
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

    fn check(&self, url: &Shown<'_>) -> Result<()> {
        if self.passed() {
            Err(Error::Timeout {
                after: self.configured,
                url: Some(url.get().to_string()),
            })
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

/// The caller's sink, with progress going to the idle bound's watch and
/// the hand-over before a read held back after a read that filled the
/// whole buffer.
struct Watching<'a, 's> {
    inner: &'s mut dyn Sink,
    watch: &'a Watch<'a>,
    /// Whether the last read filled all the room it was given.
    filled: &'a Cell<bool>,
}

impl Sink for Watching<'_, '_> {
    fn progress(&mut self) {
        self.watch.progress();
        self.inner.progress();
    }

    fn fragment(&mut self, fragment: Fragment<'_>) {
        self.inner.fragment(fragment);
    }

    fn before_read(&mut self) {
        // A read that filled the whole buffer left the rest of what
        // arrived for the next read, which then returns at once: no wait
        // follows it, so there is nothing to hand over yet. The next short
        // read (what had arrived is all consumed, so the read after it may
        // wait) or the answer's end hands over everything, so text is late
        // by at most that much, never kept while the agent waits (but for
        // the one case of a server that sent exactly a buffer's worth, then
        // paused). Decided by the data, not a clock: a model generating
        // live fills no buffer, and gets every read handed over; a replayed
        // or cached stream arrives in full buffers, and its listeners wake
        // once per short read instead of every 8 KiB.
        if !self.filled.get() {
            self.inner.before_read();
        }
    }
}

/// A body reader that fails with `TimedOut` once the idle bound (streams
/// only) or the deadline has run out, and records which.
struct Watched<'a> {
    inner: BodyReader,
    watch: &'a Watch<'a>,
    /// Whether the idle bound applies (an SSE body).
    idle: bool,
    /// Whether the last read filled all the room it was given.
    filled: &'a Cell<bool>,
}

impl Read for Watched<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(bound) = self.watch.over(self.idle) {
            self.watch.expired.set(Some(bound));
            return Err(io::Error::new(io::ErrorKind::TimedOut, "bound expired"));
        }
        let read = self.inner.read(buf);
        if let Ok(n) = read {
            self.filled.set(n == buf.len());
        }
        read.inspect_err(|e| {
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

/// The most room a non-streamed answer leaves in the request buffer it
/// was read into, beyond what the requests had made.
const KEPT_BODY: usize = 64 * 1024;

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

/// What errors, retry notices and logs show of a request's URL (user
/// info, query values and the key redacted), worked out at its first use:
/// a request that succeeds needs it only for a debug log line.
struct Shown<'a> {
    url: &'a str,
    key: Option<&'a str>,
    text: OnceCell<String>,
}

impl<'a> Shown<'a> {
    fn new(url: &'a str, key: Option<&'a str>) -> Shown<'a> {
        Shown {
            url,
            key,
            text: OnceCell::new(),
        }
    }

    fn get(&self) -> &str {
        self.text.get_or_init(|| {
            let mut shown = redact_url(self.url);
            redact_in(&mut shown, self.key);
            shown
        })
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

/// A failed send as an [`Error`]; `raw` is the URL requested and `shown`
/// its redacted form.
fn map_ureq(
    e: ureq::Error,
    cfg: &HttpConfig,
    deadline: &Deadline,
    raw: &str,
    shown: &Shown<'_>,
) -> Error {
    let shown = shown.get();
    // Which timeout expired decides which configured duration to name.
    let after = match e {
        ureq::Error::Timeout(ureq::Timeout::Global) if deadline.at.is_some() => deadline.configured,
        ureq::Error::Timeout(ureq::Timeout::Connect | ureq::Timeout::Resolve) => {
            cfg.connect_timeout
        }
        ureq::Error::Timeout(_) => cfg.read_timeout,
        ureq::Error::BodyExceedsLimit(n) => {
            return Error::Protocol {
                message: format!("response body exceeds {n} bytes"),
                url: Some(shown.to_string()),
            };
        }
        other => return connection_error(other, raw, shown),
    };
    Error::Timeout {
        after,
        url: Some(shown.to_string()),
    }
}

/// The server's own message (see [`error_message`]), from at most `limit`
/// bytes of the body.
fn read_error_body(
    resp: ureq::http::Response<ureq::Body>,
    limit: usize,
    api: crate::Api,
) -> (String, Option<Duration>) {
    let mut body = Vec::new();
    let _ = resp
        .into_body()
        .into_reader()
        .take(limit as u64)
        .read_to_end(&mut body);
    (error_message(&body), wire::retry_hint(api, &body))
}

/// For a 404: when the API base has no version segment (`/v1`, `/v1beta`,
/// `/v4`...), every API pikuri speaks expects one (`/v1/messages`,
/// `/v1/chat/completions`, `/v1/responses`), and a server root given as
/// the base (`http://127.0.0.1:8080`, what `ANTHROPIC_BASE_URL` holds) is
/// the usual cause: say so, with the base to try.
fn version_hint(transport: &ChatTransport) -> Option<String> {
    let base = transport.base_or_default();
    let path = base
        .split_once("://")
        .map_or(base, |(_, rest)| rest)
        .split(['?', '#'])
        .next()
        .unwrap_or("");
    let versioned = path.split('/').skip(1).any(|seg| {
        let mut chars = seg.chars();
        matches!(chars.next(), Some('v' | 'V')) && chars.next().is_some_and(|c| c.is_ascii_digit())
    });
    if versioned {
        return None;
    }
    let root = base
        .split(['?', '#'])
        .next()
        .unwrap_or("")
        .trim_end_matches('/');
    Some(format!(
        " (hint: the API base has no `/v1`, and servers answer `/v1{}`: \
         an API base ends with the version, e.g. `{}/v1`)",
        wire::path(transport, false),
        crate::util::redact_url(root)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn decode_errors_map_once() {
        let cfg = HttpConfig::default().with_read_timeout(Duration::from_millis(1500));
        let shown = |e| decode_error(e, &cfg, None, None).to_string();
        assert_eq!(
            shown(DecodeError::Protocol("sse line exceeds 12 bytes".into())),
            "protocol error: sse line exceeds 12 bytes"
        );
        assert!(matches!(
            decode_error(DecodeError::Truncated, &cfg, None, None),
            Error::Truncated
        ));
        assert!(matches!(
            decode_error(DecodeError::TimedOut, &cfg, None, Some("http://h/v1")),
            Error::Timeout { after, url: Some(u) } if after == Duration::from_millis(1500) && u == "http://h/v1"
        ));
        let e = decode_error(
            DecodeError::from_io(io::Error::new(io::ErrorKind::ConnectionReset, "boom")),
            &cfg,
            None,
            Some("http://h/v1"),
        );
        assert!(matches!(e, Error::Transport { .. }));
        assert_eq!(e.to_string(), "connection to http://h/v1 failed: boom");
        assert!(std::error::Error::source(&e).is_some());
    }

    /// Issue 38, item 20: a server root given as the API base (what
    /// `ANTHROPIC_BASE_URL` holds) 404s on `/messages`; the error says the
    /// base lacks its `/v1`. A versioned base's 404 gets no hint.
    #[cfg(all(feature = "testing", feature = "anthropic"))]
    #[test]
    fn a_404_on_a_base_without_a_version_says_so() {
        use crate::testing::{FakeServer, Reply};
        use crate::{Agent, Api, ChatTransport};
        let server = FakeServer::start();
        let run = |base: &str, api: Api| {
            server.push(Reply::status(404, "Not Found"));
            let t = ChatTransport::new("m").with_api(api).with_api_base(base);
            let mut agent = Agent::builder(t).build().unwrap();
            agent.run_loop("hi").unwrap_err()
        };
        let root = server.root_url();
        let err = run(&root, Api::AnthropicMessages);
        assert_eq!(err.status(), Some(404));
        assert_eq!(
            err.to_string(),
            format!(
                "http status 404 from {root}/messages: Not Found (hint: the API base has no \
                 `/v1`, and servers answer `/v1/messages`: an API base ends with the version, \
                 e.g. `{root}/v1`)"
            )
        );
        let err = run(&format!("{root}/"), Api::ChatCompletions);
        assert!(
            err.to_string()
                .ends_with(&format!("answer `/v1/chat/completions`: an API base ends with the version, e.g. `{root}/v1`)")),
            "{err}"
        );
        for base in [server.base_url(), format!("{root}/v1beta/openai")] {
            let err = run(&base, Api::ChatCompletions);
            assert_eq!(err.status(), Some(404));
            assert!(!err.to_string().contains("hint"), "{err}");
        }
    }

    /// The headers every chat request carries, once each: its body's type
    /// and what it accepts back (a stream or JSON), beside the key (issue
    /// 42, session 16: they go into the header map in place).
    #[cfg(feature = "testing")]
    #[test]
    fn a_request_names_its_content_and_what_it_accepts() {
        use crate::testing::{FakeServer, Reply};
        let server = FakeServer::start();
        let client = Client::new(HttpConfig::default().with_max_retries(0));
        let (msgs, tools, extra) = (
            [crate::Message::user("hi")],
            super::super::request::ToolSpecs::default(),
            serde_json::Map::default(),
        );
        // The key headers are made once per key (kept with the URL): another
        // key on the same base is sent as it is, and so is no key.
        let keys = [Some("k-1"), Some("k-1"), Some("k-2"), None, Some("k-1")];
        for (i, key) in keys.into_iter().enumerate() {
            let transport = match key {
                Some(k) => server.transport().with_api_key(k),
                None => server.transport(),
            };
            server.push(Reply::text("ok"));
            let req = Request {
                stream: i % 2 == 1,
                ..Request::for_test(&transport, &msgs, &tools, &extra)
            };
            client.chat(&req, &mut Vec::new(), &mut ()).unwrap();
        }
        let sent = server.chat_requests();
        assert_eq!(sent.len(), keys.len());
        for (i, (r, key)) in sent.iter().zip(keys).enumerate() {
            let all = |name: &str| -> Vec<&str> {
                let named = r.headers.iter().filter(|(n, _)| n == name);
                named.map(|(_, v)| v.as_str()).collect()
            };
            let accept = ["application/json", "text/event-stream"][i % 2];
            assert_eq!(all("content-type"), ["application/json"], "{r:?}");
            assert_eq!(all("accept"), [accept], "{r:?}");
            let bearer: Vec<String> = key.map(|k| format!("Bearer {k}")).into_iter().collect();
            assert_eq!(all("authorization"), bearer, "{r:?}");
        }
    }

    /// A key no header can carry fails at the send, as it did before the
    /// key headers were kept (issue 42, session 16): the kept headers are
    /// only those that parse.
    #[cfg(feature = "testing")]
    #[test]
    fn a_key_no_header_can_carry_fails_the_request() {
        use crate::testing::{FakeServer, Reply};
        let server = FakeServer::start();
        let client = Client::new(HttpConfig::default().with_max_retries(0));
        let (msgs, tools, extra) = (
            [crate::Message::user("hi")],
            super::super::request::ToolSpecs::default(),
            serde_json::Map::default(),
        );
        let transport = server.transport().with_api_key("k\r\nx-injected: 1");
        server.push(Reply::text("ok"));
        let req = Request::for_test(&transport, &msgs, &tools, &extra);
        let err = client.chat(&req, &mut Vec::new(), &mut ()).unwrap_err();
        assert!(!err.to_string().contains("x-injected"), "{err}");
        assert!(server.chat_requests().is_empty(), "nothing was sent");
        // The same client sends the next request, with a good key.
        let good = server.transport().with_api_key("k-1");
        let req = Request::for_test(&good, &msgs, &tools, &extra);
        assert_eq!(
            client
                .chat(&req, &mut Vec::new(), &mut ())
                .unwrap()
                .message
                .content,
            "ok"
        );
    }

    /// Issue 42, session 16: a whole (non-streamed) answer is read into
    /// the request's buffer, sent by then: no allocation for it while the
    /// room suffices. A large answer gives the room back (the buffer lives
    /// as long as the agent), and the next request goes out from the
    /// emptied buffer.
    #[cfg(feature = "testing")]
    #[test]
    fn a_whole_answer_is_read_into_the_request_buffer() {
        use crate::testing::{FakeServer, Reply};
        let server = FakeServer::start();
        let client = Client::new(HttpConfig::default().with_max_retries(0));
        let (msgs, tools, extra) = (
            [crate::Message::user("hi")],
            super::super::request::ToolSpecs::default(),
            serde_json::Map::default(),
        );
        let transport = server.transport();
        let req = Request {
            stream: false,
            ..Request::for_test(&transport, &msgs, &tools, &extra)
        };
        let mut buf = Vec::with_capacity(16 * 1024);
        server.push(Reply::text("ok"));
        let done = client.chat(&req, &mut buf, &mut ()).unwrap();
        assert_eq!(done.message.content, "ok");
        let body: serde_json::Value = serde_json::from_slice(&buf).expect("the answer's JSON");
        assert_eq!(body["choices"][0]["message"]["content"], "ok", "{body}");
        assert_eq!(buf.capacity(), 16 * 1024, "the room was enough");
        let long = "x".repeat(3 * KEPT_BODY);
        server.push(Reply::text(long.as_str()));
        let done = client.chat(&req, &mut buf, &mut ()).unwrap();
        assert_eq!(done.message.content, long);
        assert!(buf.capacity() < KEPT_BODY, "{} kept", buf.capacity());
        server.push(Reply::text("again"));
        let done = client.chat(&req, &mut buf, &mut ()).unwrap();
        assert_eq!(done.message.content, "again");
        let sent = server.chat_requests();
        assert_eq!(sent.len(), 3);
        assert_eq!(sent[2].body, sent[0].body, "the same request each time");
    }

    /// Issue 42, session 15: a request to the base and path of the one
    /// before reuses its URL, parsed once, and sends the same headers; a
    /// request elsewhere gets its own.
    #[cfg(feature = "testing")]
    #[test]
    fn a_request_reuses_the_url_of_the_request_before() {
        use crate::testing::{FakeServer, Reply};
        let server = FakeServer::start();
        let client = Client::new(HttpConfig::default().with_max_retries(0));
        let kept = || client.shared.target.lock().clone().expect("kept");
        let (msgs, tools, extra) = (
            [crate::Message::user("hi")],
            super::super::request::ToolSpecs::default(),
            serde_json::Map::default(),
        );
        let chat = |transport: &ChatTransport, stream: bool| {
            server.push(Reply::text("ok"));
            let req = Request {
                stream,
                ..Request::for_test(transport, &msgs, &tools, &extra)
            };
            let done = client.chat(&req, &mut Vec::new(), &mut ()).unwrap();
            assert_eq!(done.message.content, "ok");
        };
        let transport = server.transport();
        chat(&transport, false);
        let first = kept();
        assert_eq!(first.url, format!("{}/chat/completions", server.base_url()));
        chat(&transport, true);
        assert!(Arc::ptr_eq(&first, &kept()), "the URL was built again");
        // Another base: another URL, kept in turn.
        let other = transport.clone().with_api_base(server.root_url());
        chat(&other, false);
        assert!(!Arc::ptr_eq(&first, &kept()));
        assert_eq!(
            kept().url,
            format!("{}/chat/completions", server.root_url())
        );
        let sent = server.chat_requests();
        let paths: Vec<_> = sent.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/v1/chat/completions",
                "/v1/chat/completions",
                "/chat/completions"
            ]
        );
        let accept: Vec<_> = sent.iter().map(|r| r.header("accept").unwrap()).collect();
        assert_eq!(
            accept,
            ["application/json", "text/event-stream", "application/json"]
        );
        assert!(
            sent.iter()
                .all(|r| r.header("content-type") == Some("application/json"))
        );
    }

    /// A URL that does not parse is kept as text: ureq reports it at the
    /// send, an error naming the URL, and the next request to it again.
    #[test]
    fn a_url_that_does_not_parse_fails_at_the_send() {
        let client = Client::new(HttpConfig::default().with_max_retries(0));
        let transport = ChatTransport::new("m").with_api_base("http://exa mple.invalid/v1");
        let (msgs, tools, extra) = (
            [crate::Message::user("hi")],
            super::super::request::ToolSpecs::default(),
            serde_json::Map::default(),
        );
        let req = Request {
            stream: false,
            ..Request::for_test(&transport, &msgs, &tools, &extra)
        };
        for _ in 0..2 {
            let err = client.chat(&req, &mut Vec::new(), &mut ()).unwrap_err();
            assert!(
                err.to_string()
                    .contains("http://exa mple.invalid/v1/chat/completions"),
                "{err}"
            );
        }
        let kept = client.shared.target.lock().clone().expect("kept");
        assert!(kept.uri.is_none());
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
