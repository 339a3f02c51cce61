//! `Tracer`: the events of one agent tree in, finished spans out. Pure (no
//! I/O, no threads): the exporter listener feeds it on its thread and ships
//! what it returns. The runs it holds open are `runs.rs`.
//!
//! Times are when the listener's thread handles an event. Events reach it in
//! batches handed over where the agent is about to wait (see
//! [`Listener`](crate::Listener)), so a span starts at the last hand-over
//! before the request or call and ends at the first after it: close to the
//! truth, and never reordered.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{ChatTransport, Event, FinishReason, StopReason};

use super::config::host_port;
use super::context::Context;
use super::guard::guard_attrs;
use super::runs::{Run, Runs, ToolSpan, span_call_id};
use super::span::{self, Attr, Attrs, Kind, Span, SpanEvent, now_nanos};

/// What the current transport says about the requests (request model,
/// provider, server address and port).
#[derive(Clone, Debug, Default)]
pub(super) struct ModelInfo {
    pub(super) model: Option<Arc<str>>,
    pub(super) provider: Arc<str>,
    pub(super) address: Option<Arc<str>>,
    pub(super) port: Option<u16>,
}

impl ModelInfo {
    pub(super) fn of(t: &ChatTransport) -> ModelInfo {
        let (address, port) = t.api_base().map_or((None, None), host_port);
        ModelInfo {
            model: t.model().map(Arc::from),
            // The semantic conventions' well-known values are lowercase
            // names (`openai`, `anthropic`); a hint outside them is passed on.
            provider: t.provider().unwrap_or("openai").to_ascii_lowercase().into(),
            address: address.map(Arc::from),
            port,
        }
    }

    /// Add the model's attributes to a fresh span's (none of these keys
    /// set yet).
    fn apply(&self, attrs: &mut Attrs) {
        attrs.push("gen_ai.provider.name", &self.provider);
        if let Some(m) = &self.model {
            attrs.push("gen_ai.request.model", m);
        }
        self.apply_server(attrs);
    }

    fn apply_server(&self, attrs: &mut Attrs) {
        if let Some(a) = &self.address {
            attrs.push("server.address", a);
        }
        if let Some(p) = self.port {
            attrs.push("server.port", u64::from(p));
        }
    }
}

/// `gen_ai.response.finish_reasons` of a response that ended with
/// `finish` (`None`: it had no text, so no `Assistant` event said), a tool
/// call following it or not. The values are the semantic conventions'
/// (OpenAI's words): `stop`, `tool_calls`, `length`, `content_filter`; a
/// response the server ended for another reason is `server_cut`.
fn finish_reasons(finish: Option<FinishReason>, call_follows: bool) -> &'static [&'static str] {
    match finish {
        Some(FinishReason::Length) => &["length"],
        Some(FinishReason::Filtered) => &["content_filter"],
        Some(FinishReason::ServerCut) => &["server_cut"],
        Some(FinishReason::ToolCalls) => &["tool_calls"],
        Some(FinishReason::Complete) | None if call_follows => &["tool_calls"],
        Some(FinishReason::Complete) | None => &["stop"],
    }
}

/// A finished chat request, for the metrics.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ChatRecord {
    pub(super) attrs: Attrs,
    pub(super) seconds: f64,
    pub(super) input: Option<u64>,
    pub(super) output: Option<u64>,
}

pub(super) struct Tracer {
    capture: bool,
    agent_name: Arc<str>,
    context: Arc<Context>,
    conversation: Arc<str>,
    model: ModelInfo,
    runs: Runs,
    /// Sub-agents announced (`for_sub_agent`) and not started yet: their
    /// trace id and parent span id.
    parents: HashMap<String, (u128, u64)>,
    /// Finished spans, drained by the exporter.
    pub(super) done: Vec<Span>,
    /// Finished chat requests, drained for the metrics.
    pub(super) chats: Vec<ChatRecord>,
}

impl Tracer {
    pub(super) fn new(capture: bool, agent_name: String, context: Arc<Context>) -> Tracer {
        Tracer {
            capture,
            agent_name: agent_name.into(),
            context,
            conversation: span::trace_hex(span::trace_id()).into(),
            model: ModelInfo::default(),
            runs: Runs::default(),
            parents: HashMap::new(),
            done: Vec::new(),
            chats: Vec::new(),
        }
    }

    pub(super) fn set_model(&mut self, model: ModelInfo) {
        self.model = model;
    }

    /// A sub-agent `id` is about to start (the listener is asked for its
    /// variant): find the span it nests under. The synthesizer and the
    /// compactor nest under their agent's `invoke_agent`; a delegated
    /// sub-agent under the `execute_tool` span that started it, which is
    /// the latest tool call not answered yet (its `ToolCall` was handed
    /// over just before).
    pub(super) fn sub_agent(&mut self, id: &str) {
        let helper = ["synthesizer", "compactor"].iter().find_map(|role| {
            if id == *role {
                Some("")
            } else {
                id.strip_suffix(role).and_then(|p| p.strip_suffix(' '))
            }
        });
        let parent = match helper.and_then(|owner| self.runs.get(owner)) {
            Some(run) => Some((run.span.trace_id, run.span.id)),
            None => self.latest_open_tool(),
        };
        let parent = parent.or_else(|| self.runs.get("").map(|r| (r.span.trace_id, r.span.id)));
        if let Some(p) = parent {
            self.parents.insert(id.to_string(), p);
        }
    }

    fn latest_open_tool(&mut self) -> Option<(u128, u64)> {
        let tool = self
            .runs
            .values_mut()
            .flat_map(|r| r.tools.iter_mut())
            .filter(|t| !t.claimed)
            .max_by_key(|t| t.span.start)?;
        tool.claimed = true;
        Some((tool.span.trace_id, tool.span.id))
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one arm per event kind, in one place"
    )]
    pub(super) fn on_event(&mut self, event: &Event) {
        let agent = event.agent();
        // The hot path: a delta of a response under way only dates its
        // first chunk (no clock read after that).
        if event.is_delta()
            && let Some(run) = self.runs.get_mut(agent)
            && run.pending_chat.is_none()
        {
            if run.first_chunk.is_none() {
                run.first_chunk = Some(now_nanos());
            }
            return;
        }
        let now = now_nanos();
        match event {
            Event::ModelSwitched { to, .. } => {
                self.model = ModelInfo::of(to);
                return;
            }
            Event::Reset { agent, .. } if agent.is_empty() => {
                // A cleared conversation is a new one.
                self.conversation = span::trace_hex(span::trace_id()).into();
                return;
            }
            // Between-turn events open no run.
            Event::ContextCap { .. }
            | Event::Reset { .. }
            | Event::HistoryLoaded { .. }
            | Event::Domain { .. }
            | Event::SystemInjected { .. } => return,
            // `Agent::compact` between turns: no run to note it on.
            Event::Compacted { .. } if !self.runs.contains_key(agent) => return,
            _ => {}
        }
        self.open_run(agent, now);
        let capture = self.capture;
        let Some(run) = self.runs.get_mut(agent) else {
            return;
        };
        if let Some(mut chat) = run.pending_chat.take() {
            // Why the last response finished: as its answer said, or (a
            // response of tool calls alone) a tool call follows it in the
            // same batch, or nothing does.
            let follows = matches!(event, Event::ToolCall { .. });
            let reason = finish_reasons(run.finish.take(), follows);
            chat.attrs
                .set("gen_ai.response.finish_reasons", Attr::StaticArray(reason));
            self.done.push(chat);
        }
        match event {
            Event::AssistantDelta { .. } | Event::ThinkingDelta { .. } => {
                run.first_chunk.get_or_insert(now);
            }
            Event::Assistant { finish, .. } => run.finish = Some(*finish),
            Event::Thinking { .. } => {}
            Event::Retrying {
                attempt,
                error,
                wait_ms,
                ..
            } => {
                let mut a = Attrs::default();
                a.set("pikuri.retry.attempt", u64::from(*attempt));
                a.set("pikuri.retry.wait_ms", *wait_ms);
                a.set("error.type", error_type(error));
                run.chat_events.push(SpanEvent {
                    name: "pikuri.retry",
                    time: now,
                    attrs: a,
                });
            }
            Event::RequestFailed {
                status,
                kind,
                error,
                ..
            } => {
                // One failed chat span per failed request, whatever the
                // failure: the provider's status, else the crate's kind.
                let kind = status.map_or_else(|| kind.clone(), |s| s.to_string());
                let mut chat = chat_span(run, &self.model, &self.conversation, now);
                chat.fail(&kind, crate::util::excerpt(error, 200).into_owned());
                self.done.push(chat);
                run.last_error = Some(kind);
                run.mark = now;
            }
            Event::Tokens {
                input,
                output,
                cached,
                cache_creation,
                thinking,
                model_id,
                response_id,
                ..
            } => {
                let mut chat = chat_span(run, &self.model, &self.conversation, now);
                let a = &mut chat.attrs;
                // The conventions count cached tokens in the input tokens;
                // pikuri's `input` is the part processed anew.
                let parts = [*input, *cached, *cache_creation];
                let total_input = parts
                    .iter()
                    .any(Option::is_some)
                    .then(|| parts.iter().flatten().sum::<u64>());
                if let Some(n) = total_input {
                    a.push("gen_ai.usage.input_tokens", n);
                }
                if let Some(n) = output {
                    a.push("gen_ai.usage.output_tokens", *n);
                }
                if let Some(n) = cached {
                    a.push("gen_ai.usage.cache_read.input_tokens", *n);
                }
                if let Some(n) = cache_creation {
                    a.push("gen_ai.usage.cache_creation.input_tokens", *n);
                }
                if let Some(n) = thinking {
                    a.push("gen_ai.usage.reasoning.output_tokens", *n);
                }
                let response_model = model_id.as_deref().map(Attr::from);
                if let Some(m) = &response_model {
                    a.push("gen_ai.response.model", m.clone());
                }
                if let Some(id) = response_id {
                    a.push("gen_ai.response.id", Attr::from(id.as_str()));
                }
                self.chats.push(ChatRecord {
                    attrs: metric_attrs(&self.model, response_model),
                    seconds: chat.end.saturating_sub(chat.start) as f64 / 1e9,
                    input: total_input,
                    output: *output,
                });
                run.pending_chat = Some(chat);
                run.mark = now;
            }
            Event::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                // `resume` announces a deferred call again: one span per call.
                run.tools
                    .retain(|t| span_call_id(&t.span) != Some(id.as_str()));
                let name: Arc<str> = name.as_str().into();
                let mut s = Span::new(
                    run.span.trace_id,
                    span::span_id(),
                    Some(run.span.id),
                    "execute_tool",
                    Some(Arc::clone(&name)),
                    Kind::Internal,
                    now,
                );
                s.attrs
                    .push("gen_ai.operation.name", Attr::Static("execute_tool"));
                s.attrs.push("gen_ai.tool.name", Attr::Str(name));
                s.attrs.push("gen_ai.tool.call.id", id.as_str());
                s.attrs.push("gen_ai.tool.type", Attr::Static("function"));
                s.attrs.push("gen_ai.conversation.id", &self.conversation);
                if capture {
                    s.attrs
                        .push("gen_ai.tool.call.arguments", arguments.to_string());
                }
                run.tools.push(ToolSpan {
                    span: s,
                    claimed: false,
                });
                run.mark = now;
            }
            Event::ToolEdited { id, arguments, .. } => {
                if let Some(span) = run.tool_span(id) {
                    let private = || ("gen_ai.tool.call.arguments", arguments.to_string());
                    approval(span, now, "edited", capture.then(private));
                }
            }
            Event::ToolDenied { id, reason, .. } => {
                if let Some(span) = run.tool_span(id) {
                    let private = || ("pikuri.approval.reason", reason.clone());
                    approval(span, now, "denied", capture.then(private));
                    span.attrs.set("pikuri.tool.denied", true);
                }
            }
            Event::ToolResult { id, content, .. } => {
                if let Some(i) = run
                    .tools
                    .iter()
                    .position(|t| span_call_id(&t.span) == Some(id))
                {
                    let mut t = run.tools.remove(i).span;
                    t.end = now;
                    if capture {
                        t.attrs.set("gen_ai.tool.call.result", content.as_str());
                    }
                    // Failures reach the model as "Error: ..." observations.
                    if content.starts_with("Error:") {
                        // The message can quote private data: opt-in too.
                        let message = if capture {
                            crate::util::excerpt(content, 200).into_owned()
                        } else {
                            "the tool failed".to_string()
                        };
                        t.fail("tool_error", message);
                    }
                    self.done.push(t);
                }
                run.mark = now;
            }
            Event::UserTurn { mid_loop, .. } => {
                if *mid_loop {
                    run.span.event("pikuri.steering", now, Attrs::default());
                }
                run.mark = now;
            }
            Event::Guard { .. } => run
                .span
                .event("pikuri.guard", now, guard_attrs(event, capture)),
            Event::FallbackNotice { .. } => {
                run.span.event("pikuri.fallback", now, Attrs::default());
                run.mark = now;
            }
            Event::Compacted {
                strategy,
                messages_before,
                messages_after,
                tokens_before,
                tokens_after,
                ..
            } => {
                let mut a = Attrs::default();
                a.set("pikuri.compaction.strategy", strategy.as_str());
                a.set("pikuri.compaction.messages_before", *messages_before as u64);
                a.set("pikuri.compaction.messages_after", *messages_after as u64);
                a.set("pikuri.compaction.tokens_before", *tokens_before);
                a.set("pikuri.compaction.tokens_after", *tokens_after);
                run.span.event("pikuri.compaction", now, a);
                run.mark = now;
            }
            Event::ModelFallback {
                from, to, reason, ..
            } => {
                // The request that failed is a chat span of its own
                // (`RequestFailed`, just before): the old transport's,
                // named now when the exporter had no model to go by.
                let old = ModelInfo::of(from);
                if let Some(chat) = self
                    .done
                    .iter_mut()
                    .rev()
                    .find(|s| s.op == "chat" && s.parent == Some(run.span.id))
                    && chat.target.is_none()
                {
                    chat.target.clone_from(&old.model);
                    chat.attrs
                        .set("gen_ai.provider.name", Attr::Str(old.provider.clone()));
                    if let Some(m) = &old.model {
                        chat.attrs.set("gen_ai.request.model", Attr::Str(m.clone()));
                    }
                    if let Some(h) = &old.address {
                        chat.attrs.set("server.address", Attr::Str(h.clone()));
                    }
                    if let Some(p) = old.port {
                        chat.attrs.set("server.port", u64::from(p));
                    }
                }
                let mut a = Attrs::default();
                if let Some(m) = from.model() {
                    a.set("pikuri.fallback.from", m);
                }
                if let Some(m) = to.model() {
                    a.set("pikuri.fallback.to", m);
                }
                let kind = run.last_error.take().unwrap_or_else(|| error_type(reason));
                a.set("error.type", kind);
                run.span.event("pikuri.model_fallback", now, a);
                self.model = ModelInfo::of(to);
                run.mark = now;
            }
            Event::Cancelled { partial_answer, .. } => {
                let mut a = Attrs::default();
                a.set(
                    "pikuri.cancel.partial_chars",
                    partial_answer.chars().count() as u64,
                );
                // A request the cancel cut short (streamed or not) is a
                // failed chat span already (`RequestFailed`).
                run.span.event("pikuri.cancel", now, a);
            }
            Event::Spent { spend, .. } => run.span.attrs.set_cost(spend),
            Event::Stopped { reason, .. } => {
                let reason = *reason;
                let run = self.runs.remove(agent).expect("open above");
                self.stop(run, reason, now);
                if agent.is_empty() {
                    self.context.end_turn();
                }
            }
            _ => {
                run.mark = now;
            }
        }
    }

    fn open_run(&mut self, agent: &str, now: u64) {
        if self.runs.contains_key(agent) {
            return;
        }
        let (trace, span_id, parent) = if agent.is_empty() {
            self.context.turn()
        } else if let Some((t, p)) = self.parents.remove(agent) {
            (t, span::span_id(), Some(p))
        } else if let Some(main) = self.runs.get("") {
            (main.span.trace_id, span::span_id(), Some(main.span.id))
        } else {
            (span::trace_id(), span::span_id(), None)
        };
        // The main agent's name is shared; a sub-agent's is its id.
        let name = if agent.is_empty() {
            Arc::clone(&self.agent_name)
        } else {
            agent.into()
        };
        let mut s = Span::new(
            trace,
            span_id,
            parent,
            "invoke_agent",
            Some(Arc::clone(&name)),
            Kind::Internal,
            now,
        );
        s.attrs
            .push("gen_ai.operation.name", Attr::Static("invoke_agent"));
        s.attrs.push("gen_ai.agent.name", Attr::Str(name));
        s.attrs.push("gen_ai.conversation.id", &self.conversation);
        // The main agent's id is empty: a literal, no allocation.
        let id = if agent.is_empty() {
            Attr::Static("")
        } else {
            Attr::from(agent)
        };
        s.attrs.push("pikuri.agent.id", id);
        self.model.apply(&mut s.attrs);
        self.runs.insert(
            agent,
            Run {
                span: s,
                mark: now,
                first_chunk: None,
                chat_events: Vec::new(),
                last_error: None,
                pending_chat: None,
                finish: None,
                tools: Vec::new(),
            },
        );
    }

    /// End a run: what is still open ends with it, and the status says how
    /// it ended. Usage stays on the chat spans (see the module doc of
    /// `otel`, "No double counting").
    fn stop(&mut self, mut run: Run, reason: StopReason, now: u64) {
        if let Some(mut chat) = run.pending_chat.take() {
            let reason = finish_reasons(run.finish.take(), false);
            chat.attrs
                .set("gen_ai.response.finish_reasons", Attr::StaticArray(reason));
            self.done.push(chat);
        }
        for mut t in run.tools.drain(..) {
            t.span.end = now;
            // Deferred by an approver: waiting, not failed.
            if reason != StopReason::ApprovalPending {
                t.span
                    .fail(reason.as_str(), "the run stopped before the tool answered");
            }
            self.done.push(t.span);
        }
        let s = &mut run.span;
        s.end = now;
        s.attrs
            .set("pikuri.stop_reason", Attr::Static(reason.as_str()));
        match reason {
            StopReason::Completed | StopReason::Synthesized | StopReason::ApprovalPending => {}
            // The requests succeeded, but the run did not deliver a whole
            // answer: a trace shows the cut, the chat span says how.
            StopReason::Incomplete => s.fail("incomplete", "the final answer was cut short"),
            StopReason::Cancelled => s.fail("cancelled", "cancelled"),
            StopReason::StepLimit => s.fail("step_limit", "the step budget ran out"),
            StopReason::Budget => s.fail("budget", "a budget limit was reached"),
            StopReason::Guardrail => s.fail("guardrail", "a guard ended the run"),
            _ => s.fail("error", "the run failed"),
        }
        // The run is over: its span moves out, uncopied.
        self.done.push(run.span);
    }

    /// No run is open (the turn and its children ended).
    pub(super) fn is_idle(&self) -> bool {
        self.runs.is_empty()
    }

    /// Close what is open (the exporter is closing): spans end now, marked
    /// unfinished.
    pub(super) fn abandon(&mut self) {
        let now = now_nanos();
        let agents = self.runs.keys();
        for a in agents {
            if let Some(run) = self.runs.remove(&a) {
                self.stop(run, StopReason::Error, now);
            }
        }
    }
}

/// A `pikuri.approval` event on a tool's span: the decision, and its
/// `private` attribute (arguments or reason) only when content is captured.
fn approval(
    span: &mut Span,
    now: u64,
    decision: &'static str,
    private: Option<(&'static str, String)>,
) {
    let mut a = Attrs::default();
    a.set("pikuri.approval.decision", decision);
    if let Some((key, value)) = private {
        a.set(key, value);
    }
    span.event("pikuri.approval", now, a);
}

/// A chat span from the run's mark to `now`, taking the run's span events
/// and time to first chunk.
fn chat_span(run: &mut Run, model: &ModelInfo, conversation: &Arc<str>, now: u64) -> Span {
    let mut s = Span::new(
        run.span.trace_id,
        span::span_id(),
        Some(run.span.id),
        "chat",
        model.model.clone(),
        Kind::Client,
        run.mark,
    );
    s.end = now;
    s.attrs.push("gen_ai.operation.name", Attr::Static("chat"));
    model.apply(&mut s.attrs);
    s.attrs.push("gen_ai.conversation.id", conversation);
    s.attrs
        .push("gen_ai.request.stream", run.first_chunk.is_some());
    if let Some(t) = run.first_chunk.take() {
        let secs = t.saturating_sub(run.mark) as f64 / 1e9;
        s.attrs
            .push("gen_ai.response.time_to_first_chunk", Attr::Double(secs));
    }
    s.events = std::mem::take(&mut run.chat_events);
    s
}

/// The attributes a metric point carries (low cardinality only), built
/// from what the chat span's were (not looked up in them).
fn metric_attrs(model: &ModelInfo, response_model: Option<Attr>) -> Attrs {
    let mut out = Attrs(Vec::with_capacity(6));
    out.push("gen_ai.operation.name", Attr::Static("chat"));
    out.push("gen_ai.provider.name", &model.provider);
    if let Some(m) = &model.model {
        out.push("gen_ai.request.model", m);
    }
    if let Some(m) = response_model {
        out.push("gen_ai.response.model", m);
    }
    model.apply_server(&mut out);
    out
}

/// A low-cardinality `error.type` from a failure's text: the HTTP status
/// when it names one, else its class.
pub(super) fn error_type(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let status = lower
        .split(|c: char| !c.is_ascii_digit())
        .find(|w| w.len() == 3 && (w.starts_with('4') || w.starts_with('5')));
    if lower.contains("http")
        && let Some(code) = status
    {
        return code.to_string();
    }
    if lower.contains("timed out") || lower.contains("timeout") {
        "timeout".to_string()
    } else if lower.contains("cancel") {
        "cancelled".to_string()
    } else {
        "_OTHER".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_turn(capture: bool) -> Vec<Span> {
        let mut t = Tracer::new(capture, "a".into(), Arc::new(Context::default()));
        let agent: Arc<str> = "".into();
        t.on_event(&Event::UserTurn {
            agent: agent.clone(),
            content: "q".into(),
            mid_loop: false,
        });
        t.on_event(&Event::ToolCall {
            agent: agent.clone(),
            id: "c1".into(),
            name: "read".into(),
            arguments: serde_json::json!({"path": "/secret"}),
        });
        t.on_event(&Event::ToolResult {
            agent: agent.clone(),
            id: "c1".into(),
            name: "read".into(),
            content: "Error: /secret/key.pem is unreadable".into(),
        });
        t.on_event(&Event::Stopped {
            agent,
            reason: StopReason::Cancelled,
            usage: crate::Usage::new(),
        });
        std::mem::take(&mut t.done)
    }

    /// One response per `(text, finish)` (an `Assistant` event when the
    /// text is not empty, then `Tokens`), a tool call after each but the
    /// last, then `Stopped` with `reason`.
    fn answers(answers: &[(&str, FinishReason)], reason: StopReason) -> Vec<Span> {
        let mut t = Tracer::new(false, "a".into(), Arc::new(Context::default()));
        let agent: Arc<str> = "".into();
        t.on_event(&Event::UserTurn {
            agent: agent.clone(),
            content: "q".into(),
            mid_loop: false,
        });
        for (i, (text, finish)) in answers.iter().enumerate() {
            if !text.is_empty() {
                t.on_event(&Event::Assistant {
                    agent: agent.clone(),
                    content: (*text).into(),
                    finish: *finish,
                });
            }
            t.on_event(&Event::Tokens {
                agent: agent.clone(),
                input: Some(1),
                output: Some(1),
                cached: None,
                cache_creation: None,
                thinking: None,
                model_id: None,
                response_id: None,
            });
            if i + 1 < answers.len() {
                let id = format!("c{i}");
                t.on_event(&Event::ToolCall {
                    agent: agent.clone(),
                    id: id.clone(),
                    name: "read".into(),
                    arguments: serde_json::json!({}),
                });
                t.on_event(&Event::ToolResult {
                    agent: agent.clone(),
                    id,
                    name: "read".into(),
                    content: "ok".into(),
                });
            }
        }
        t.on_event(&Event::Stopped {
            agent,
            reason,
            usage: crate::Usage::new(),
        });
        std::mem::take(&mut t.done)
    }

    /// The finish reason of each chat span, in order (its attribute's
    /// `Debug` when it is not one static name).
    fn chat_finishes(spans: &[Span]) -> Vec<String> {
        spans
            .iter()
            .filter(|s| s.name().starts_with("chat"))
            .map(|s| match s.attrs.get("gen_ai.response.finish_reasons") {
                Some(Attr::StaticArray([one])) => (*one).to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// The main agent's span.
    fn main_span(spans: &[Span]) -> &Span {
        spans.iter().find(|s| s.name() == "invoke_agent a").unwrap()
    }

    #[test]
    fn a_cut_answer_is_on_its_chat_span_and_fails_the_run() {
        let spans = answers(
            &[
                ("", FinishReason::ToolCalls),
                ("Part", FinishReason::Length),
            ],
            StopReason::Incomplete,
        );
        assert_eq!(chat_finishes(&spans), ["tool_calls", "length"]);
        let main = main_span(&spans);
        assert_eq!(
            main.attrs.get("pikuri.stop_reason"),
            Some(&Attr::Static("incomplete"))
        );
        assert_eq!(
            main.attrs.get("error.type"),
            Some(&Attr::from("incomplete"))
        );
        assert_eq!(
            main.status,
            super::super::span::Status::Error("the final answer was cut short".into())
        );
        // A filtered answer and a server's cut, each in its own words.
        let cut = [
            (FinishReason::Filtered, "content_filter"),
            (FinishReason::ServerCut, "server_cut"),
        ];
        for (finish, name) in cut {
            let spans = answers(&[("Part", finish)], StopReason::Incomplete);
            assert_eq!(chat_finishes(&spans), [name], "{finish}");
        }
        // A whole answer after text and a call: `tool_calls`, then `stop`.
        let spans = answers(
            &[
                ("Let me look", FinishReason::ToolCalls),
                ("Done", FinishReason::Complete),
            ],
            StopReason::Completed,
        );
        assert_eq!(chat_finishes(&spans), ["tool_calls", "stop"]);
        let main = main_span(&spans);
        assert_eq!(main.status, super::super::span::Status::Unset);
    }

    /// A call span's one event's attributes and its `pikuri.tool.denied`.
    type Approval = (Vec<(String, Attr)>, Option<Attr>);

    /// The `pikuri.approval` events of two calls, one edited, one denied,
    /// in call order.
    fn approvals(capture: bool) -> Vec<Approval> {
        let mut t = Tracer::new(capture, "a".into(), Arc::new(Context::default()));
        let agent: Arc<str> = "".into();
        let call = |id: &str| Event::ToolCall {
            agent: agent.clone(),
            id: id.into(),
            name: "w".into(),
            arguments: serde_json::json!({"path": "/x"}),
        };
        let result = |id: &str| Event::ToolResult {
            agent: agent.clone(),
            id: id.into(),
            name: "w".into(),
            content: "ok".into(),
        };
        for e in [
            Event::UserTurn {
                agent: agent.clone(),
                content: "q".into(),
                mid_loop: false,
            },
            call("c1"),
            call("c2"),
            Event::ToolEdited {
                agent: agent.clone(),
                id: "c1".into(),
                name: "w".into(),
                arguments: serde_json::json!({"path": "/y"}),
            },
            Event::ToolDenied {
                agent: agent.clone(),
                id: "c2".into(),
                name: "w".into(),
                reason: "private reason".into(),
            },
            result("c1"),
            result("c2"),
            Event::Stopped {
                agent: agent.clone(),
                reason: StopReason::Completed,
                usage: crate::Usage::new(),
            },
        ] {
            t.on_event(&e);
        }
        let spans = std::mem::take(&mut t.done);
        let mut tools: Vec<&Span> = spans
            .iter()
            .filter(|s| s.name() == "execute_tool w")
            .collect();
        tools.sort_by_key(|s| span_call_id(s).map(str::to_string));
        tools
            .into_iter()
            .map(|s| {
                assert_eq!(s.events.len(), 1, "{:?}", s.events);
                assert_eq!(s.events[0].name, "pikuri.approval");
                let attrs = s.events[0]
                    .attrs
                    .0
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect();
                (attrs, s.attrs.get("pikuri.tool.denied").cloned())
            })
            .collect()
    }

    #[test]
    fn approval_events_name_the_decision_and_keep_private_text_out_unless_captured() {
        let decision = |d: &str| ("pikuri.approval.decision".to_string(), Attr::from(d));
        assert_eq!(
            approvals(false),
            [
                (vec![decision("edited")], None),
                (vec![decision("denied")], Some(Attr::Bool(true))),
            ]
        );
        assert_eq!(
            approvals(true),
            [
                (
                    vec![
                        decision("edited"),
                        (
                            "gen_ai.tool.call.arguments".to_string(),
                            Attr::from(r#"{"path":"/y"}"#)
                        )
                    ],
                    None
                ),
                (
                    vec![
                        decision("denied"),
                        (
                            "pikuri.approval.reason".to_string(),
                            Attr::from("private reason")
                        )
                    ],
                    Some(Attr::Bool(true))
                ),
            ]
        );
    }

    #[test]
    fn tool_failures_keep_private_text_out_unless_captured() {
        let spans = tool_turn(false);
        let tool = spans
            .iter()
            .find(|s| s.name() == "execute_tool read")
            .unwrap();
        assert_eq!(
            tool.status,
            super::super::span::Status::Error("the tool failed".into())
        );
        assert_eq!(
            tool.attrs.get("error.type"),
            Some(&Attr::from("tool_error"))
        );
        let json = tool.to_json().to_string();
        assert!(!json.contains("secret"), "{json}");
        let main = main_span(&spans);
        assert_eq!(main.attrs.get("error.type"), Some(&Attr::from("cancelled")));
        assert!(main.events.iter().all(|e| e.name != "pikuri.cancel"));

        let spans = tool_turn(true);
        let tool = spans
            .iter()
            .find(|s| s.name() == "execute_tool read")
            .unwrap();
        assert!(tool.to_json().to_string().contains("/secret/key.pem"));
    }

    #[test]
    #[allow(clippy::too_many_lines, reason = "one scripted run, event by event")]
    fn span_events_for_approvals_compaction_fallback_steering_retries() {
        let mut t = Tracer::new(false, "a".into(), Arc::new(Context::default()));
        let a: Arc<str> = "".into();
        let from = crate::ChatTransport::new("m1").with_api_base("http://127.0.0.1:1/v1");
        let to = crate::ChatTransport::new("m2").with_api_base("http://127.0.0.1:2/v1");
        for e in [
            Event::UserTurn {
                agent: a.clone(),
                content: "q".into(),
                mid_loop: false,
            },
            Event::Retrying {
                agent: a.clone(),
                attempt: 1,
                error: "http status 503: busy".into(),
                wait_ms: 5,
            },
            Event::RequestFailed {
                agent: a.clone(),
                status: Some(503),
                kind: "server".into(),
                error: "http status 503: busy".into(),
            },
            Event::ModelFallback {
                agent: a.clone(),
                from: Box::new(from),
                to: Box::new(to),
                reason: "http status 503: busy".into(),
            },
            Event::Tokens {
                agent: a.clone(),
                input: Some(1),
                output: Some(1),
                cached: None,
                cache_creation: None,
                thinking: None,
                model_id: None,
                response_id: None,
            },
            Event::ToolCall {
                agent: a.clone(),
                id: "c".into(),
                name: "w".into(),
                arguments: serde_json::json!({}),
            },
            Event::ToolDenied {
                agent: a.clone(),
                id: "c".into(),
                name: "w".into(),
                reason: "no".into(),
            },
            Event::ToolResult {
                agent: a.clone(),
                id: "c".into(),
                name: "w".into(),
                content: "denied".into(),
            },
            Event::UserTurn {
                agent: a.clone(),
                content: "also".into(),
                mid_loop: true,
            },
            Event::Compacted {
                agent: a.clone(),
                strategy: crate::event::CompactionStrategy::DropOldest,
                messages_before: 9,
                messages_after: 3,
                tokens_before: 900,
                tokens_after: 100,
            },
            Event::FallbackNotice {
                agent: a.clone(),
                reason: "budget".into(),
            },
            Event::Stopped {
                agent: a.clone(),
                reason: StopReason::Synthesized,
                usage: crate::Usage::new(),
            },
        ] {
            t.on_event(&e);
        }
        let spans = std::mem::take(&mut t.done);
        let main = main_span(&spans);
        let names: Vec<_> = main.events.iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            [
                "pikuri.model_fallback",
                "pikuri.steering",
                "pikuri.compaction",
                "pikuri.fallback"
            ]
        );
        assert_eq!(
            main.status,
            super::super::span::Status::Unset,
            "synthesized is a success"
        );
        let tool = spans.iter().find(|s| s.name() == "execute_tool w").unwrap();
        assert_eq!(tool.events[0].name, "pikuri.approval");
        assert_eq!(
            tool.events[0].attrs.get("pikuri.approval.decision"),
            Some(&Attr::from("denied"))
        );
        // The failed request (with its retry) is a chat span of the old
        // model; the answered one follows under the new.
        let failed = spans.iter().find(|s| s.name() == "chat m1").unwrap();
        assert_eq!(failed.attrs.get("error.type"), Some(&Attr::from("503")));
        assert_eq!(failed.events[0].name, "pikuri.retry");
        let ok = spans.iter().find(|s| s.name() == "chat m2").unwrap();
        assert_eq!(ok.status, super::super::span::Status::Unset);
        assert_eq!(
            ok.attrs.get("gen_ai.response.finish_reasons"),
            Some(&Attr::StaticArray(&["tool_calls"]))
        );
    }

    #[test]
    fn main_and_sub_runs_kept_apart_and_abandoned_together() {
        let mut t = Tracer::new(false, "a".into(), Arc::new(Context::default()));
        for agent in ["", "helper"] {
            t.on_event(&Event::UserTurn {
                agent: agent.into(),
                content: "q".into(),
                mid_loop: false,
            });
        }
        assert!(t.runs.contains_key("") && t.runs.contains_key("helper"));
        // Each is found by its own id; an unknown id finds neither.
        assert!(t.runs.get("helper").is_some() && t.runs.get("nobody").is_none());
        t.abandon();
        assert!(t.is_idle());
        let spans = std::mem::take(&mut t.done);
        let main = main_span(&spans);
        let sub = spans
            .iter()
            .find(|s| s.name() == "invoke_agent helper")
            .unwrap();
        // With no announcement, a sub-agent nests under the main run.
        assert_eq!(sub.parent, Some(main.id));
        assert_eq!(sub.trace_id, main.trace_id);
        assert_eq!(
            sub.attrs.get("pikuri.agent.id"),
            Some(&Attr::from("helper"))
        );
        assert_eq!(main.attrs.get("pikuri.agent.id"), Some(&Attr::from("")));
    }

    #[test]
    fn host_and_port() {
        assert_eq!(
            host_port("http://127.0.0.1:8080/v1"),
            (Some("127.0.0.1".into()), Some(8080))
        );
        assert_eq!(
            host_port("https://u:p@api.openai.com/v1"),
            (Some("api.openai.com".into()), Some(443))
        );
        assert_eq!(host_port("http://[::1]:9/x"), (Some("::1".into()), Some(9)));
    }

    #[test]
    fn error_types() {
        assert_eq!(error_type("http status 503: overloaded"), "503");
        assert_eq!(error_type("HTTP 429"), "429");
        assert_eq!(error_type("request timed out after 3 s"), "timeout");
        assert_eq!(error_type("connection refused"), "_OTHER");
    }

    #[test]
    fn the_agent_span_carries_the_runs_cost_and_a_budget_stop() {
        let mut t = Tracer::new(false, "a".into(), Arc::new(Context::default()));
        let a: Arc<str> = "".into();
        let spend = crate::Spend {
            cost: Some(crate::budget::Cost::from_micro_usd(8_500)),
            ..crate::Spend::default()
        };
        for e in [
            Event::UserTurn {
                agent: a.clone(),
                content: "q".into(),
                mid_loop: false,
            },
            Event::Spent {
                agent: a.clone(),
                spend,
            },
            Event::Stopped {
                agent: a.clone(),
                reason: StopReason::Budget,
                usage: crate::Usage::new(),
            },
        ] {
            t.on_event(&e);
        }
        let spans = std::mem::take(&mut t.done);
        let main = main_span(&spans);
        let Some(Attr::Double(usd)) = main.attrs.get("pikuri.usage.cost_usd") else {
            panic!("no cost on {:?}", main.attrs);
        };
        assert!((usd - 0.0085).abs() < 1e-12, "{usd}");
        assert!(matches!(
            main.attrs.get("pikuri.stop_reason"),
            Some(Attr::Static("budget"))
        ));
        assert_ne!(main.status, super::super::span::Status::Unset);
    }
}
