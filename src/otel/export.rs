//! The export thread: a bounded queue of finished spans, batches posted as
//! OTLP/HTTP JSON, retries with backoff and `Retry-After`, and a close
//! bounded in time. Nothing here runs on the agent's thread or the
//! listener's, apart from the queue push.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};
use parking_lot::Mutex;
use serde_json::Value;

use super::config::OtlpConfig;
use super::context::Context;
use super::metrics;
use super::span::{Attrs, Span, now_nanos, traces_body};
use super::tracer::ChatRecord;
use crate::net::AgentSetup;
use crate::util::{Secrets, excerpt, instant_after, limit, redact_url, redact_url_in};

/// What waits for export.
pub(super) enum Item {
    Span(Span),
    /// A turn's chat requests, for the metrics.
    Chats(Vec<ChatRecord>),
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Item>,
    /// The spans among `items`.
    spans: usize,
    /// The spans of the batch the export thread is sending (taken from
    /// `items`, not counted yet).
    in_flight: u64,
    /// The close timed out: what waited and what was in flight is counted
    /// as dropped already, and the thread counts nothing more.
    abandoned: bool,
}

/// The handle the listener keeps: push, and close.
pub(super) struct Export {
    queue: Arc<Mutex<Queue>>,
    cap: usize,
    max_batch: usize,
    wake: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    done: Receiver<()>,
    context: Arc<Context>,
    close_timeout: Duration,
    deadline: Arc<Mutex<Option<Instant>>>,
}

impl Export {
    pub(super) fn start(config: OtlpConfig, context: Arc<Context>) -> Export {
        let (cap, max_batch, close_timeout) = (
            config.max_queued_spans,
            config.max_batch,
            config.close_timeout,
        );
        let queue = Arc::new(Mutex::new(Queue::default()));
        let (wake, wake_rx) = bounded(1);
        let (done_tx, done) = bounded(1);
        let deadline = Arc::new(Mutex::new(None));
        let worker = Worker {
            queue: Arc::clone(&queue),
            wake: wake_rx,
            resource: config.resource(),
            secrets: secrets(&config),
            config,
            context: Arc::clone(&context),
            deadline: Arc::clone(&deadline),
            // Every status is read: 429 and 5xx go through the retries.
            // No redirect is followed: ureq would send the headers (API
            // keys) to whatever origin the `Location` names, as a GET.
            agent: AgentSetup::new().agent(),
            failing: false,
            chats: Vec::new(),
            chats_since: now_nanos(),
        };
        let thread = std::thread::Builder::new()
            .name("pikuri-otlp".into())
            .spawn(move || {
                worker.run();
                let _ = done_tx.send(());
            })
            .map_err(|e| log::warn!("otlp: no export thread ({e}); spans are dropped"))
            .ok();
        Export {
            queue,
            cap,
            max_batch,
            wake: Some(wake),
            thread,
            done,
            context,
            close_timeout,
            deadline,
        }
    }

    /// Queue `items`; a span past the bound is dropped and counted. Never
    /// blocks beyond the queue's lock, and wakes the export thread only
    /// when a whole batch waits (else it wakes on its interval).
    pub(super) fn push(&self, items: impl IntoIterator<Item = Item>) {
        if self.thread.is_none() {
            let spans = items
                .into_iter()
                .filter(|i| matches!(i, Item::Span(_)))
                .count();
            self.context
                .dropped
                .fetch_add(spans as u64, Ordering::Relaxed);
            return;
        }
        let mut dropped = 0u64;
        let full_batch = {
            let mut q = self.queue.lock();
            for item in items {
                match item {
                    Item::Span(_) if q.spans >= self.cap => dropped += 1,
                    Item::Span(_) => {
                        q.spans += 1;
                        q.items.push_back(item);
                    }
                    // A dead collector keeps no backlog of metrics either.
                    Item::Chats(_) if q.items.len() >= self.cap => {}
                    Item::Chats(_) => q.items.push_back(item),
                }
            }
            q.spans >= self.max_batch
        };
        if dropped > 0 {
            let before = self.context.dropped.fetch_add(dropped, Ordering::Relaxed);
            if before == 0 {
                log::warn!(
                    "otlp: export queue full; dropping spans (counted in OtlpHandle::dropped_spans)"
                );
            }
        }
        if full_batch && let Some(w) = &self.wake {
            // Full: the thread is awake already and will see the items.
            if let Err(TrySendError::Disconnected(())) = w.try_send(()) {
                log::debug!("otlp: export thread gone");
            }
        }
    }

    /// Send what waits, within the close timeout, and stop the thread.
    /// Returns at the latest after the close timeout; a thread still in a
    /// request then is left to end on its own request timeout.
    pub(super) fn close(&mut self) {
        *self.deadline.lock() = Some(instant_after(self.close_timeout));
        // Disconnecting the wake channel is the stop signal.
        self.wake = None;
        let Some(handle) = self.thread.take() else {
            return;
        };
        if self
            .done
            .recv_timeout(
                self.close_timeout
                    .saturating_add(Duration::from_millis(100)),
            )
            .is_ok()
        {
            let _ = handle.join();
            return;
        }
        // What is still queued or in a request now is dropped, and counted
        // now: a stuck request may end much later, or never (the process
        // exits).
        let lost = {
            let mut q = self.queue.lock();
            q.abandoned = true;
            let lost = q.in_flight + q.spans as u64;
            q.items.clear();
            q.spans = 0;
            q.in_flight = 0;
            lost
        };
        self.context.dropped.fetch_add(lost, Ordering::Relaxed);
        log::warn!("otlp: close timed out; {lost} unsent spans dropped");
    }
}

struct Worker {
    queue: Arc<Mutex<Queue>>,
    wake: Receiver<()>,
    config: OtlpConfig,
    resource: Attrs,
    context: Arc<Context>,
    deadline: Arc<Mutex<Option<Instant>>>,
    agent: ureq::Agent,
    /// The header values and URL secrets of `config`, hidden from an
    /// error body before it is logged (a collector may quote the request).
    secrets: Secrets,
    /// The last export failed (log the first failure of a streak only).
    failing: bool,
    /// Chat requests since the last metrics export, and when that was.
    chats: Vec<ChatRecord>,
    chats_since: u64,
}

impl Worker {
    fn run(mut self) {
        loop {
            // The interval batches turns together; a full batch or the
            // close wakes the thread sooner.
            let stopping = matches!(
                self.wake.recv_timeout(self.config.export_interval),
                Err(RecvTimeoutError::Disconnected)
            );
            while let Some(spans) = self.next_batch() {
                self.send(Batch::Spans(spans));
            }
            if !self.chats.is_empty() {
                let now = now_nanos();
                let chats = std::mem::take(&mut self.chats);
                let body = metrics::body(&self.resource, &chats, self.chats_since, now);
                self.chats_since = now;
                if let Some(body) = body {
                    self.send(Batch::Metrics(body));
                }
            }
            if stopping {
                return;
            }
        }
    }

    /// Up to `max_batch` spans; the chat records met on the way go to
    /// `self.chats`.
    fn next_batch(&mut self) -> Option<Vec<Span>> {
        let mut q = self.queue.lock();
        let mut spans = Vec::new();
        while spans.len() < self.config.max_batch {
            match q.items.pop_front() {
                Some(Item::Span(s)) => spans.push(s),
                Some(Item::Chats(c)) => self.chats.extend(c),
                None => break,
            }
        }
        q.spans -= spans.len();
        q.in_flight = spans.len() as u64;
        (!spans.is_empty()).then_some(spans)
    }

    fn deadline(&self) -> Option<Instant> {
        *self.deadline.lock()
    }

    fn send(&mut self, batch: Batch) {
        let (url, body, spans) = match batch {
            Batch::Spans(s) => (
                self.config.traces_endpoint.clone(),
                traces_body(&self.resource, &s),
                s.len() as u64,
            ),
            Batch::Metrics(b) => match &self.config.metrics_endpoint {
                Some(u) => (u.clone(), b, 0),
                None => return,
            },
        };
        let mut attempt = 0u32;
        let failure = loop {
            attempt += 1;
            let (outcome, retry_after) = self.post(&url, &body);
            let why = match outcome {
                Ok(rejected) => {
                    if self.failing {
                        log::info!("otlp: export to {} works again", redact_url(&url));
                    }
                    self.failing = false;
                    self.settle(spans.saturating_sub(rejected), rejected.min(spans), false);
                    return;
                }
                Err(Failure::Final(why)) => break why,
                Err(Failure::Retry(why)) => why,
            };
            if attempt > self.config.max_retries {
                break why;
            }
            let backoff = backoff(self.config.retry_base, attempt);
            let wait = retry_after.unwrap_or(backoff).min(self.config.retry_cap);
            if !self.pause(wait) {
                break format!("{why}; closing");
            }
        };
        if !self.settle(0, spans, true) {
            // The close counted this batch already.
            return;
        }
        if !self.failing {
            log::warn!(
                "otlp: export to {} failed ({failure}); {spans} spans dropped",
                redact_url(&url)
            );
        }
        self.failing = true;
    }

    /// Count the batch just sent: `exported` and `dropped` spans, and a
    /// failed export. False (nothing counted) when the close timed out
    /// meanwhile and counted the batch as dropped.
    fn settle(&self, exported: u64, dropped: u64, failed: bool) -> bool {
        let mut q = self.queue.lock();
        if q.abandoned {
            return false;
        }
        q.in_flight = 0;
        self.context.exported.fetch_add(exported, Ordering::Relaxed);
        self.context.dropped.fetch_add(dropped, Ordering::Relaxed);
        if failed {
            self.context.failed_exports.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Wait `d` before a retry; false when closing leaves no time for it.
    fn pause(&self, d: Duration) -> bool {
        let until = instant_after(d);
        loop {
            if let Some(deadline) = self.deadline()
                && until >= deadline
            {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            match self.wake.recv_timeout(left) {
                // New spans meanwhile: they wait for this batch.
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout) => return true,
                // Closing: the loop re-checks the deadline.
                Err(RecvTimeoutError::Disconnected) => {
                    if self.deadline().is_none() {
                        return false;
                    }
                    std::thread::sleep(left.min(Duration::from_millis(10)));
                }
            }
        }
    }

    /// One POST. `Ok(rejected spans)` on 2xx; a retryable or final failure
    /// otherwise, with the `Retry-After` the collector asked for.
    fn post(&self, url: &str, body: &[u8]) -> (Result<u64, Failure>, Option<Duration>) {
        let mut timeout = self.config.timeout;
        if let Some(d) = self.deadline() {
            // Closing: no request outlives the close.
            timeout = timeout.min(d.saturating_duration_since(Instant::now()));
            if timeout.is_zero() {
                return (Err(Failure::Final("close timeout".into())), None);
            }
        }
        let mut req = self
            .agent
            .post(url)
            .config()
            // `Duration::MAX` (or any timeout from `NO_LIMIT` up): no limit.
            .timeout_global(limit(timeout))
            .build()
            .header("Content-Type", "application/json");
        for (k, v) in &self.config.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        match req.send(body) {
            // The error's text may carry the URL; it never carries a header.
            Err(e) => (
                Err(Failure::Retry(
                    redact_url_in(&e.to_string(), url).into_owned(),
                )),
                None,
            ),
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                let retry_after = retry_after(resp.headers());
                let text = resp
                    .body_mut()
                    .with_config()
                    .limit(64 * 1024)
                    .read_to_string()
                    .unwrap_or_default();
                if (200..300).contains(&status) {
                    return (Ok(rejected(&text)), None);
                }
                // Hidden before the cut, so no part of a secret is left.
                let text = self.secrets.redact(text.trim());
                let why = format!("http status {status}: {}", excerpt(&text, 120));
                // OTLP/HTTP: only these may be retried; any other status
                // (408 and 500 included) drops the batch.
                let failure = if matches!(status, 429 | 502 | 503 | 504) {
                    Failure::Retry(why)
                } else {
                    Failure::Final(why)
                };
                (Err(failure), retry_after)
            }
        }
    }
}

enum Batch {
    Spans(Vec<Span>),
    /// An `ExportMetricsServiceRequest` body.
    Metrics(Vec<u8>),
}

enum Failure {
    Retry(String),
    Final(String),
}

/// What a collector's answer must not bring into a log line: each header
/// value (and its last word: the token of `Bearer <token>`), and each
/// endpoint's user info, query and query values.
fn secrets(config: &OtlpConfig) -> Secrets {
    let mut all = Vec::new();
    for (_, value) in &config.headers {
        all.push(value.clone());
        if let Some((_, last)) = value.trim().rsplit_once(' ') {
            all.push(last.to_string());
        }
    }
    let urls = std::iter::once(&config.traces_endpoint).chain(&config.metrics_endpoint);
    for url in urls {
        let url = url.split('#').next().unwrap_or("");
        let (before, query) = url.split_once('?').unwrap_or((url, ""));
        let authority = before.split_once("://").map_or(before, |(_, r)| r);
        let authority = authority.split('/').next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            all.push(userinfo.to_string());
            all.extend(
                userinfo
                    .split_once(':')
                    .map(|(_, password)| password.to_string()),
            );
        }
        all.push(query.to_string());
        all.extend(
            query
                .split('&')
                .filter_map(|kv| Some(kv.split_once('=')?.1.to_string())),
        );
    }
    Secrets::new(all)
}

/// The spans a 2xx answer's `partialSuccess` says were rejected.
fn rejected(body: &str) -> u64 {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            let n = &v["partialSuccess"]["rejectedSpans"];
            n.as_u64()
                .or_else(|| n.as_str().and_then(|s| s.parse().ok()))
        })
        .unwrap_or(0)
}

/// A `Retry-After` in seconds (the HTTP-date form is not parsed: the
/// backoff applies).
fn retry_after(headers: &ureq::http::HeaderMap) -> Option<Duration> {
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    v.parse::<u64>().ok().map(Duration::from_secs)
}

/// `base * 2^(attempt-1)`, times a jitter in [0.5, 1.0).
fn backoff(base: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let jitter = f64::from(super::span::span_id().to_le_bytes()[0] % 16) / 32.0 + 0.5;
    exp.mul_f64(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_success() {
        assert_eq!(rejected(r#"{"partialSuccess":{"rejectedSpans":"3"}}"#), 3);
        assert_eq!(rejected(r#"{"partialSuccess":{"rejectedSpans":2}}"#), 2);
        assert_eq!(rejected(r#"{"partialSuccess":null}"#), 0);
        assert_eq!(rejected(""), 0);
    }

    #[test]
    fn backoff_grows() {
        let b = Duration::from_millis(100);
        assert!(backoff(b, 1) >= Duration::from_millis(50) && backoff(b, 1) < b);
        assert!(backoff(b, 3) >= Duration::from_millis(200));
    }
}
