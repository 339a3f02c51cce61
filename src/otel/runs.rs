//! The open runs of the agent tree the [`Tracer`](super::tracer) follows:
//! one [`Run`] per agent from its first event to its `Stopped`, its tool
//! calls in flight, kept by agent id with the main agent's apart.

use std::collections::HashMap;

use super::span::{Attr, Span, SpanEvent};
use crate::FinishReason;

/// A tool call in flight.
pub(super) struct ToolSpan {
    pub(super) span: Span,
    /// A sub-agent started under it already.
    pub(super) claimed: bool,
}

/// One agent's run (one `run_loop`), open from its first event to its
/// `Stopped`.
pub(super) struct Run {
    pub(super) span: Span,
    /// When the current request started: the last hand-over of this agent
    /// that was not part of a response.
    pub(super) mark: u64,
    pub(super) first_chunk: Option<u64>,
    pub(super) chat_events: Vec<SpanEvent>,
    /// The `error.type` of the last failed request, for the
    /// `pikuri.model_fallback` event that follows it.
    pub(super) last_error: Option<String>,
    /// The last response's span, held until the next event tells why the
    /// response finished (a tool call follows, or not).
    pub(super) pending_chat: Option<Span>,
    /// Why the current response ended, as its `Assistant` event said (a
    /// response without text has none).
    pub(super) finish: Option<FinishReason>,
    pub(super) tools: Vec<ToolSpan>,
}

/// The open runs by agent id. The main agent's (id `""`, nearly every
/// event) is held apart: no hashing and no key compare per event (profiled:
/// the map's key compares were a fifth of the listener thread's time with
/// 50 deltas a turn).
#[derive(Default)]
pub(super) struct Runs {
    main: Option<Run>,
    subs: HashMap<String, Run>,
}

impl Run {
    /// The open span of tool call `id`.
    pub(super) fn tool_span(&mut self, id: &str) -> Option<&mut Span> {
        self.tools
            .iter_mut()
            .map(|t| &mut t.span)
            .find(|s| span_call_id(s) == Some(id))
    }
}

impl Runs {
    pub(super) fn get(&self, agent: &str) -> Option<&Run> {
        if agent.is_empty() {
            self.main.as_ref()
        } else {
            self.subs.get(agent)
        }
    }

    pub(super) fn get_mut(&mut self, agent: &str) -> Option<&mut Run> {
        if agent.is_empty() {
            self.main.as_mut()
        } else {
            self.subs.get_mut(agent)
        }
    }

    pub(super) fn contains_key(&self, agent: &str) -> bool {
        self.get(agent).is_some()
    }

    pub(super) fn remove(&mut self, agent: &str) -> Option<Run> {
        if agent.is_empty() {
            self.main.take()
        } else {
            self.subs.remove(agent)
        }
    }

    pub(super) fn insert(&mut self, agent: &str, run: Run) {
        if agent.is_empty() {
            self.main = Some(run);
        } else {
            self.subs.insert(agent.to_string(), run);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.main.is_none() && self.subs.is_empty()
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Run> {
        self.main.iter_mut().chain(self.subs.values_mut())
    }

    /// The open runs' agent ids.
    pub(super) fn keys(&self) -> Vec<String> {
        let main = self.main.as_ref().map(|_| String::new());
        main.into_iter().chain(self.subs.keys().cloned()).collect()
    }
}

/// The tool call id a span carries (`gen_ai.tool.call.id`).
pub(super) fn span_call_id(s: &Span) -> Option<&str> {
    match s.attrs.get("gen_ai.tool.call.id") {
        Some(Attr::Str(id)) => Some(&**id),
        _ => None,
    }
}
