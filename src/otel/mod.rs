//! Traces of every run in the tracing tools teams already use: an
//! [`OtlpExporter`] listener that turns the event stream into OpenTelemetry
//! spans, following the GenAI semantic conventions, and posts them as
//! OTLP/HTTP JSON to a collector (Jaeger, Grafana Tempo, Langfuse, Arize
//! Phoenix through a collector, Honeycomb, Datadog, Logfire, MLflow...).
//! No OpenTelemetry crate and no async runtime: the JSON is serde_json's and
//! the HTTP ureq's.
//!
//! Needs the `otel` feature (on by default).
//!
//! # What a turn becomes
//!
//! The names and attributes follow the OpenTelemetry semantic conventions
//! **1.41.0** for GenAI (status: Development), the last release with GenAI in
//! the main conventions repository:
//!
//! ```text
//! invoke_agent agent                      one per run_loop (a turn)
//! ├── chat qwen3                          one per model request (CLIENT)
//! ├── execute_tool delegate               one per tool call
//! │   └── invoke_agent researcher 0       the sub-agent that call started
//! │       ├── chat qwen3
//! │       └── execute_tool calculator
//! ├── chat qwen3
//! └── invoke_agent synthesizer            a helper child: under its agent
//! ```
//!
//! - `invoke_agent {name}`: `gen_ai.operation.name`, `gen_ai.agent.name`
//!   (the configured name, or the sub-agent's id), `gen_ai.conversation.id`
//!   (one per exporter, renewed when the main agent is reset),
//!   `gen_ai.provider.name`, `gen_ai.request.model`, `server.address`,
//!   `server.port`, `pikuri.agent.id`, `pikuri.stop_reason`.
//! - `chat {model}`: the same request attributes, `gen_ai.response.model`,
//!   `gen_ai.response.id` (the id the server gave the answer, when it gave one),
//!   `gen_ai.response.finish_reasons` (`stop`, `tool_calls`, `length`,
//!   `content_filter` or `server_cut`, from the answer's
//!   [`FinishReason`](crate::FinishReason)),
//!   `gen_ai.request.stream`, `gen_ai.response.time_to_first_chunk`
//!   (seconds, streamed requests), `gen_ai.usage.input_tokens` (cached
//!   tokens included, as the conventions count them),
//!   `gen_ai.usage.output_tokens`, `gen_ai.usage.cache_read.input_tokens`,
//!   `gen_ai.usage.cache_creation.input_tokens`,
//!   `gen_ai.usage.reasoning.output_tokens`; `error.type` when it failed
//!   (after its retries, or cut by a cancel, streamed or not): the
//!   provider's HTTP status (`401`, `500`), else the crate's
//!   [`ErrorKind`](crate::ErrorKind) in snake_case (`timeout`, `connect`,
//!   `protocol`, `cancelled`, ...), as the conventions ask, from
//!   [`Event::RequestFailed`]; a `pikuri.retry` event per retry. Every
//!   model request is one `chat` span, whatever happens to it.
//! - `execute_tool {name}`: `gen_ai.tool.name`, `gen_ai.tool.call.id`,
//!   `gen_ai.tool.type` (`function`), and only when the host opts in
//!   ([`OtlpConfig::with_capture_content`]) `gen_ai.tool.call.arguments`
//!   and `gen_ai.tool.call.result`; a `pikuri.approval` event when an
//!   approver edited or denied the call; `error.type = tool_error` when the
//!   result is an `Error: ...` observation.
//! - Span events on `invoke_agent`: `pikuri.compaction`, `pikuri.fallback`
//!   (the synthesizer takes over), `pikuri.model_fallback` (the next
//!   transport takes over; the failed request is a failed `chat` span),
//!   `pikuri.steering` (a message from the
//!   [`Interloper`](crate::Interloper)), `pikuri.cancel`, `pikuri.guard`
//!   (a [guard](crate::guard)'s verdict other than allow: its name, point
//!   and action; the conventions define no guardrail span yet, see
//!   `otel/guard.rs`).
//! - Status: unset for a completed, synthesized or approval-pending run;
//!   error with `error.type` `incomplete` (the final answer was cut
//!   short: [`StopReason::Incomplete`](crate::StopReason::Incomplete)),
//!   `cancelled`, `step_limit`, `guardrail` or `error` otherwise. pikuri never sets `Ok`, which the conventions leave to the
//!   application.
//! - Resource: `service.name`, the host's attributes, and
//!   `telemetry.sdk.{name,language,version}`.
//!
//! Times are taken when the listener handles an event: events reach it
//! where the agent is about to wait (before a request, a tool call, a
//! sub-agent, at the end of the turn), so a span opens at the last
//! hand-over before its work and closes at the first after it. The response
//! id is not in the event stream and is not recorded.
//!
//! # No double counting
//!
//! Token usage is recorded on `chat` spans only, one per request, whoever
//! sent it (the main agent, a sub-agent, the synthesizer, the compactor).
//! `invoke_agent` spans carry no usage: a run's total includes its
//! sub-agents' ([`Event::Stopped`]), so recording it
//! there too would count a sub-agent's tokens once on its `chat` spans and
//! again on every `invoke_agent` above them. A backend that sums
//! `gen_ai.usage.*` over a trace gets the run's total exactly once. The
//! `gen_ai.client.token.usage` metric is recorded per request too.
//!
//! # Never in the agent's way
//!
//! The listener runs on its own thread, and the HTTP on one more, which the
//! exporter owns: the agent's thread never waits for the collector. Finished
//! spans are queued, unencoded, at the end of each turn (and whenever 64
//! wait), in a queue of [`OtlpConfig::with_max_queued_spans`] spans; the
//! export thread encodes and posts them once per
//! [`OtlpConfig::with_export_interval`] (1 s), or at once when a batch of
//! 512 waits, so a busy agent's turns share requests. Past the bound, spans are
//! dropped and counted ([`OtlpHandle::dropped_spans`], with one `warn` log
//! line). Each export has a timeout; 429, 502, 503, 504 (the statuses
//! OTLP lets a client retry) and transport errors are retried with exponential backoff and jitter, honouring
//! `Retry-After`; other failures drop the batch (counted), a redirect
//! among them (it is not followed: the headers would go to the origin it
//! names). Closing the agent
//! sends what waits, within [`OtlpConfig::with_close_timeout`]. Header
//! values (`OTEL_EXPORTER_OTLP_HEADERS` may carry credentials) appear in no
//! log line, error, event or `Debug` output; URLs in logs have their user
//! info and query values redacted. ureq, the HTTP library, writes each
//! request at `debug` with the URL's path and query hidden, but in full
//! (and the raw request bytes, headers included) when its own target
//! (`ureq`) logs at `trace`: keep `ureq` below `trace` where the collector's
//! URL or headers carry a credential.
//!
//! # Trace context
//!
//! A host continues a trace of its own by handing in its W3C `traceparent`
//! ([`OtlpHandle::set_parent`]): the next turns are children of that span.
//! [`OtlpHandle::traceparent`] gives the current turn's context (its
//! `invoke_agent` span); to send it as the `traceparent` header of every
//! model request, the agent's and its children's, opt in with
//! [`Configurator::traceparent`](crate::Configurator::traceparent):
//! `.traceparent(move || Some(handle.traceparent()))`. The same source
//! feeds each tool call's [`ToolContext::traceparent`](crate::ToolContext::traceparent),
//! and MCP tool calls (`tools/call`) send it as `_meta.traceparent`; other
//! MCP requests (listing, resources, prompts) do not carry it.
//!
//! # Examples
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::otel::{OtlpConfig, OtlpExporter};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("hi"));
//! // Nothing listens on port 9: the export fails, the turn does not.
//! let config = OtlpConfig::new("http://127.0.0.1:9")
//!     .with_service_name("doc")
//!     .with_max_retries(0);
//! let exporter = OtlpExporter::new(config).with_transport(&server.transport());
//! let handle = exporter.handle();
//! let mut agent = Agent::builder(server.transport()).add_listener(exporter).build()?;
//! assert_eq!(agent.run_loop("hello")?.answer.as_deref(), Some("hi"));
//! agent.close();
//! assert_eq!(handle.exported_spans(), 0);
//! assert_eq!(handle.dropped_spans(), 2); // invoke_agent and chat
//! # Ok::<(), pikuri::Error>(())
//! ```

mod config;
mod context;
mod export;
mod guard;
mod metrics;
mod runs;
mod span;
mod tracer;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub use config::OtlpConfig;

use crate::listener::{Delivery, SubAgentListener};
use crate::{ChatTransport, Event, Listener};
use context::Context;
use export::{Export, Item};
use tracer::{ModelInfo, Tracer};

/// Finished spans the listener holds before it queues them mid-turn.
const SHIP_AT: usize = 64;

/// A listener that exports each run as OpenTelemetry spans over OTLP/HTTP
/// JSON; see the [module documentation](self) for the spans, the
/// attributes and the guarantees.
///
/// # Sub-agents
///
/// Shared (the default): one exporter sees the whole agent tree and nests
/// each child's spans under the span that started it.
///
/// # Thread safety
///
/// Like every listener, it runs on its own thread; it starts one more for
/// the HTTP. Keep an [`OtlpHandle`] to read its counters or hand it a parent
/// context from another thread.
pub struct OtlpExporter {
    tracer: Tracer,
    export: Export,
    context: Arc<Context>,
    held: Vec<Item>,
    closed: bool,
    /// Metrics are on (they have an endpoint).
    metrics: bool,
}

impl OtlpExporter {
    /// An exporter for `config`; its export thread starts now.
    pub fn new(config: OtlpConfig) -> OtlpExporter {
        let context = Arc::new(Context::default());
        let tracer = Tracer::new(
            config.capture_content,
            config.agent_name.clone(),
            Arc::clone(&context),
        );
        let metrics = config.metrics_endpoint.is_some();
        OtlpExporter {
            tracer,
            export: Export::start(config, Arc::clone(&context)),
            context,
            held: Vec::new(),
            closed: false,
            metrics,
        }
    }

    /// An exporter configured from the `OTEL_*` variables
    /// ([`OtlpConfig::from_env`]), or `None` when no endpoint is set.
    pub fn from_env() -> Option<OtlpExporter> {
        OtlpConfig::from_env().map(OtlpExporter::new)
    }

    /// Describe requests with this transport (request model, provider,
    /// server address and port) until the agent switches models. Without
    /// it, spans carry the model only once a switch or a fallback names it.
    #[must_use]
    pub fn with_transport(mut self, transport: &ChatTransport) -> OtlpExporter {
        self.tracer.set_model(ModelInfo::of(transport));
        self
    }

    /// A handle on the counters and the trace context, usable from any
    /// thread after the exporter moved onto its own.
    pub fn handle(&self) -> OtlpHandle {
        OtlpHandle {
            context: Arc::clone(&self.context),
        }
    }

    /// Queue the finished spans once `at_least` wait, with the chat
    /// records. The spans are encoded on the export thread: the end of a
    /// turn (which the agent waits for) only moves them.
    fn ship(&mut self, at_least: usize) {
        self.held.extend(self.tracer.done.drain(..).map(Item::Span));
        if !self.metrics {
            self.tracer.chats.clear();
        } else if at_least <= 1 && !self.tracer.chats.is_empty() {
            self.held
                .push(Item::Chats(std::mem::take(&mut self.tracer.chats)));
        }
        if self.held.len() >= at_least && !self.held.is_empty() {
            self.export.push(self.held.drain(..));
        }
    }
}

impl Listener for OtlpExporter {
    fn on_event(&mut self, event: &Event) {
        self.tracer.on_event(event);
        // A delta never finishes a span.
        if !event.is_delta() {
            self.ship(SHIP_AT);
        }
    }

    fn flush(&mut self) {
        // A sub-agent's run ends with a flush too: its spans wait for the
        // turn's, so a turn is one export request (unless 64 spans wait).
        if self.tracer.is_idle() {
            self.ship(1);
        }
    }

    fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        // Spans of runs the close cut short end now.
        self.tracer.abandon();
        self.ship(1);
        self.export.close();
    }

    /// Hands off: nothing a turn returns depends on the export, and the
    /// agent's close (or [`close_all`](crate::close_all)) stops the
    /// listener only after it took every event and sent what waits,
    /// within [`OtlpConfig::with_close_timeout`].
    fn delivery(&self) -> Delivery {
        Delivery::HandOff
    }

    fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
        self.tracer.sub_agent(id);
        SubAgentListener::Share
    }

    fn name(&self) -> String {
        "OtlpExporter".to_string()
    }
}

impl Drop for OtlpExporter {
    fn drop(&mut self) {
        Listener::close(self);
    }
}

impl fmt::Debug for OtlpExporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpExporter")
            .field("handle", &self.handle())
            .finish_non_exhaustive()
    }
}

/// The host's side of an [`OtlpExporter`]: its counters, and the trace
/// context. Cheap to clone; every clone sees the same exporter.
///
/// # Examples
///
/// ```
/// use pikuri::otel::{OtlpConfig, OtlpExporter};
///
/// let exporter = OtlpExporter::new(OtlpConfig::new("http://127.0.0.1:9"));
/// let handle = exporter.handle();
/// assert!(handle.set_parent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
/// assert!(!handle.set_parent("not a traceparent"));
/// // The turn's context continues the host's trace.
/// let tp = handle.traceparent();
/// assert!(tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
/// assert_eq!(handle.dropped_spans(), 0);
/// ```
#[derive(Clone)]
pub struct OtlpHandle {
    context: Arc<Context>,
}

impl OtlpHandle {
    /// Spans the collector accepted.
    pub fn exported_spans(&self) -> u64 {
        self.context.exported.load(Ordering::Relaxed)
    }

    /// Spans dropped: the queue was full, the export failed after its
    /// retries, the close timed out, or the collector rejected them
    /// (`partialSuccess`).
    pub fn dropped_spans(&self) -> u64 {
        self.context.dropped.load(Ordering::Relaxed)
    }

    /// Export requests that failed after their retries.
    pub fn failed_exports(&self) -> u64 {
        self.context.failed_exports.load(Ordering::Relaxed)
    }

    /// Continue the host's trace: the turns that start from now on are
    /// children of the span this W3C `traceparent`
    /// (`00-{trace id}-{span id}-{flags}`) names. Returns false, and
    /// changes nothing, when it is malformed.
    pub fn set_parent(&self, traceparent: &str) -> bool {
        match parse_traceparent(traceparent) {
            Some(p) => {
                self.context.ids.lock().parent = Some(p);
                true
            }
            None => false,
        }
    }

    /// Stop continuing the host's trace: the next turns start traces of
    /// their own.
    pub fn clear_parent(&self) {
        self.context.ids.lock().parent = None;
    }

    /// The current turn's context as a W3C `traceparent`, naming its
    /// `invoke_agent` span (made now when the turn has not begun, and used
    /// by the turn that begins next).
    pub fn traceparent(&self) -> String {
        let (trace, span, _) = self.context.turn();
        format!("00-{trace:032x}-{span:016x}-01")
    }
}

impl fmt::Debug for OtlpHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpHandle")
            .field("exported_spans", &self.exported_spans())
            .field("dropped_spans", &self.dropped_spans())
            .field("failed_exports", &self.failed_exports())
            .finish()
    }
}

/// `00-{32 hex}-{16 hex}-{2 hex}`, lowercase, ids not all zero (W3C Trace
/// Context, version 00; a later version's extra fields are ignored).
fn parse_traceparent(s: &str) -> Option<(u128, u64)> {
    let mut parts = s.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |p: &str, n: usize| {
        p.len() == n
            && p.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    };
    let ok = hex(version, 2)
        && version != "ff"
        && (version != "00" || parts.next().is_none())
        && hex(trace, 32)
        && hex(span, 16)
        && hex(flags, 2)
        && trace.bytes().any(|c| c != b'0')
        && span.bytes().any(|c| c != b'0');
    if !ok {
        return None;
    }
    Some((
        u128::from_str_radix(trace, 16).ok()?,
        u64::from_str_radix(span, 16).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_parsing() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            parse_traceparent(ok),
            Some((
                0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
                0x00f0_67aa_0ba9_02b7
            ))
        );
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-4bf92f35-00f067aa0ba902b7-01",
            "",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }
}
