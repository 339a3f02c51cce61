//! Responses events and bodies → one [`Completion`], under the
//! [rules](super#decoding) of the module docs.

use std::collections::HashMap;

use serde_json::Value;

use super::shapes::{Event, Response};
use crate::protocol::decode::{
    Completion, Fragment, StreamDecoder, StreamState, ThinkSplitter, excerpt,
};
use crate::protocol::error::DecodeError;
use crate::protocol::rules;
use crate::{Api, Message, ProviderData, ToolCall, Usage};

/// One output item, as far as it has arrived.
#[derive(Debug)]
struct Item {
    /// The item's `id`, when the server gave one.
    id: Option<String>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// Assistant text: whether any delta arrived (else the text comes
    /// from the item when it is done).
    Message { streamed: bool },
    /// A reasoning item: whether any text delta arrived, the summary part
    /// the last one was for, and the whole item once done (kept verbatim
    /// for the next request).
    Reasoning {
        streamed: bool,
        part: Option<u64>,
        item: Option<Value>,
    },
    /// A function call.
    Call {
        call_id: String,
        name: String,
        arguments: String,
    },
    /// The API's own tool search: a `tool_search_call` or
    /// `tool_search_output` item, kept whole once done (`protocol::found`).
    Search { item: Option<Value> },
    /// Any other item type (a built-in tool's call, ...): skipped.
    Other,
}

/// The stream decoder: one event's data at a time (see the
/// [module docs](super#decoding)).
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    think: Option<ThinkSplitter>,
    items: Vec<Item>,
    /// The newest item with each id, and with each output index: one
    /// lookup per event, however many items a server names.
    by_id: HashMap<String, usize>,
    by_index: HashMap<u64, usize>,
    content: String,
    reasoning: String,
    /// Progress, the end event, the secret redacted from quoted events.
    stream: StreamState,
    model: Option<String>,
    /// The response's id: the first lifecycle event that names one.
    id: Option<String>,
    usage: Option<Usage>,
    /// `response.status` of the end event.
    status: Option<String>,
    /// `incomplete_details.reason`.
    incomplete: Option<String>,
    /// A `refusal` content part arrived.
    refused: bool,
}

impl Decoder {
    /// A decoder; `split_think` moves `<think>` tags out of the text,
    /// `secret` is redacted from what log lines quote.
    pub(crate) fn new(split_think: bool, secret: Option<&str>) -> Decoder {
        Decoder {
            think: split_think.then(ThinkSplitter::default),
            stream: StreamState::new(secret),
            ..Decoder::default()
        }
    }
}

/// Progress counts deltas, items and the end event (`response.completed`
/// or `response.incomplete`); lifecycle and unknown events do not count.
impl StreamDecoder for Decoder {
    fn state(&self) -> &StreamState {
        &self.stream
    }

    fn event(
        &mut self,
        data: &str,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<(), DecodeError> {
        let event: Event<'_> = match serde_json::from_str(data) {
            Ok(event) => event,
            Err(e) => return self.unreadable(data, &e),
        };
        let Some(kind) = event.kind.as_deref() else {
            log::warn!(
                "skipping stream event without a type: {}",
                crate::util::redact(&excerpt(data), self.stream.secret())
            );
            return Ok(());
        };
        match kind {
            "response.output_text.delta" => {
                let at = self.item_for(&event, || Kind::Message { streamed: true });
                if let Kind::Message { streamed } = &mut self.items[at].kind {
                    *streamed = true;
                }
                if let Some(delta) = event.delta.as_deref() {
                    self.stream.progress.text(delta);
                    self.push_text(delta, on_fragment);
                }
            }
            "response.refusal.delta" => {
                if !self.refused {
                    self.refused = true;
                    self.stream.progress.made();
                }
                if let Some(delta) = event.delta.as_deref() {
                    self.stream.progress.text(delta);
                    self.push_text(delta, on_fragment);
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.reasoning_delta(&event, on_fragment);
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                self.arguments(kind, &event, data)?;
            }
            "response.output_item.added" => {
                if let Some(item) = &event.item {
                    // A new call's id and name are part of the answer; an
                    // empty item of another kind, or one announced again,
                    // is not.
                    let before = self.items.len();
                    self.added(item, event.output_index);
                    if is_call(item) && self.items.len() > before {
                        self.stream.progress.made();
                    }
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event.item {
                    self.item_done(item, event.output_index, on_fragment);
                }
            }
            "response.created" | "response.in_progress" => {
                if let Some(response) = event.response {
                    self.name(response.model.as_deref(), response.id.as_deref());
                }
            }
            "response.completed" | "response.incomplete" => {
                if let Some(response) = event.response {
                    self.end(*response, on_fragment);
                } else {
                    self.status = Some(if kind == "response.completed" {
                        "completed".to_string()
                    } else {
                        "incomplete".to_string()
                    });
                    self.release(on_fragment);
                }
                self.stream.end();
            }
            "response.failed" | "error" => return Err(failure(event, on_fragment)),
            // Every other event (content_part.added, output_text.done,
            // annotations, a built-in tool's progress, ...) repeats what
            // the deltas and items carry, or is not for this crate.
            _ => {}
        }
        Ok(())
    }

    /// The complete message, or `Truncated` when the end event never came.
    fn finish(mut self) -> Result<Completion, DecodeError> {
        if !self.stream.is_done() {
            return Err(DecodeError::Truncated);
        }
        if let Some(think) = &mut self.think {
            let (content, reasoning) = (&mut self.content, &mut self.reasoning);
            think.flush(&mut |f| collect(content, reasoning, f));
        }
        let mut calls = Vec::new();
        let mut kept = Vec::new();
        for (n, item) in self.items.into_iter().enumerate() {
            match item.kind {
                Kind::Call {
                    call_id,
                    name,
                    arguments,
                } => {
                    // A call without a `call_id` (no server seen sends
                    // one) is answered by its item id, else by position.
                    let id = if call_id.is_empty() {
                        item.id.unwrap_or_else(|| format!("call_{n}"))
                    } else {
                        call_id
                    };
                    calls.push(ToolCall::new(id, name, arguments));
                }
                Kind::Reasoning {
                    item: Some(value), ..
                }
                | Kind::Search { item: Some(value) } => kept.push(value),
                Kind::Search { item: None } => {
                    log::warn!("responses: a tool search item never finished; not kept");
                }
                _ => {}
            }
        }
        let finish = rules::responses_finish(
            self.status.as_deref(),
            self.incomplete.as_deref(),
            self.refused,
            !calls.is_empty(),
        );
        let mut message = Message::assistant_tool_calls(self.content, calls);
        message.reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
        message.usage = self.usage;
        message.model.clone_from(&self.model);
        // Endpoint and model are stamped by the client, which knows the
        // transport (`wire::stamp_origin`).
        // Only whole searches: a broken one would poison the history.
        let kept = crate::protocol::found::whole_responses_searches(kept);
        message.provider_data =
            (!kept.is_empty()).then(|| ProviderData::new(Api::OpenAiResponses, "", "", kept));
        Completion::new(message, finish, self.usage, self.model).map(|c| c.with_id(self.id))
    }
}

impl Decoder {
    /// Data that is not an event of the expected shape. Valid JSON of
    /// another shape is skipped like an unknown event, unless it claims to
    /// be the end of the answer, whose loss would only surface later as a
    /// misleading `Truncated`; data that is not JSON is a protocol error.
    fn unreadable(&self, data: &str, e: &serde_json::Error) -> Result<(), DecodeError> {
        if !e.is_data() {
            return Err(DecodeError::Protocol(format!(
                "malformed stream event ({e}): {}",
                excerpt(data)
            )));
        }
        let kind = serde_json::from_str::<Value>(data)
            .ok()
            .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string));
        if let Some(kind) = kind.filter(|k| is_terminal(k)) {
            return Err(DecodeError::Protocol(format!(
                "malformed {} event ({e}): {}",
                rules::bounded(&kind, rules::MAX_LABEL),
                excerpt(data)
            )));
        }
        log::warn!(
            "skipping stream event of unexpected shape ({e}): {}",
            crate::util::redact(&excerpt(data), self.stream.secret())
        );
        Ok(())
    }

    /// A reasoning summary or text delta.
    fn reasoning_delta(&mut self, event: &Event<'_>, on_fragment: &mut dyn FnMut(Fragment<'_>)) {
        let at = self.item_for(event, || Kind::Reasoning {
            streamed: false,
            part: None,
            item: None,
        });
        // A new item or summary part starts a new paragraph.
        let first = match &mut self.items[at].kind {
            Kind::Reasoning { streamed, part, .. } => {
                let new_part = std::mem::replace(part, event.summary_index) != *part;
                !std::mem::replace(streamed, true) || new_part
            }
            _ => false,
        };
        if let Some(delta) = event.delta.as_deref() {
            self.stream.progress.text(delta);
            self.push_reasoning(first, delta, on_fragment);
        }
    }

    /// `response.function_call_arguments.delta` or `.done`.
    fn arguments(&mut self, kind: &str, event: &Event<'_>, data: &str) -> Result<(), DecodeError> {
        // A piece of arguments for no known call cannot be attached to
        // anything: the call's name is missing.
        let Some(at) = self.find(event.item_id.as_deref(), event.output_index) else {
            return Err(DecodeError::Protocol(format!(
                "{kind} for an unknown output item: {}",
                excerpt(data)
            )));
        };
        let Kind::Call { arguments, .. } = &mut self.items[at].kind else {
            return Err(DecodeError::Protocol(format!(
                "{kind} for an output item that is not a function call: {}",
                excerpt(data)
            )));
        };
        if kind == "response.function_call_arguments.delta" {
            if let Some(delta) = event.delta.as_deref() {
                self.stream.progress.text(delta);
                arguments.push_str(delta);
            }
        } else if let Some(all) = &event.arguments
            && **all != **arguments
        {
            // The whole arguments: they win over the pieces (progress
            // only when they say something the pieces did not).
            self.stream.progress.made();
            all.as_ref().clone_into(arguments);
        }
        Ok(())
    }

    /// The index of the item `event` is about, created with `kind` when no
    /// item matches (a delta before its `output_item.added`, or with an id
    /// never announced: taken as a new item rather than lost).
    fn item_for(&mut self, event: &Event<'_>, kind: impl FnOnce() -> Kind) -> usize {
        if let Some(at) = self.find(event.item_id.as_deref(), event.output_index) {
            return at;
        }
        self.push_item(event.item_id.as_deref(), event.output_index, kind())
    }

    /// A new item, indexed by its id and output index.
    fn push_item(&mut self, id: Option<&str>, index: Option<u64>, kind: Kind) -> usize {
        let at = self.items.len();
        if let Some(id) = id {
            self.by_id.insert(id.to_string(), at);
        }
        if let Some(index) = index {
            self.by_index.insert(index, at);
        }
        self.items.push(Item {
            id: id.map(str::to_string),
            kind,
        });
        at
    }

    /// The newest item with this id, else with this index, else (neither
    /// given) the last one.
    fn find(&self, id: Option<&str>, index: Option<u64>) -> Option<usize> {
        if let Some(id) = id {
            return self.by_id.get(id).copied();
        }
        if let Some(index) = index {
            return self.by_index.get(&index).copied();
        }
        self.items.len().checked_sub(1)
    }

    fn added(&mut self, item: &Value, index: Option<u64>) -> usize {
        let id = item.get("id").and_then(Value::as_str);
        let kind = match item.get("type").and_then(Value::as_str) {
            Some("message") => Kind::Message { streamed: false },
            Some("reasoning") => Kind::Reasoning {
                streamed: false,
                part: None,
                item: None,
            },
            Some("function_call") => Kind::Call {
                call_id: str_of(item, "call_id"),
                name: str_of(item, "name"),
                arguments: str_of(item, "arguments"),
            },
            Some("tool_search_call" | "tool_search_output") => Kind::Search { item: None },
            _ => Kind::Other,
        };
        if let Some(at) = self
            .find(id, index)
            .filter(|_| id.is_some() || index.is_some())
        {
            // An item a stray delta started under this id takes the type
            // the server now gives it.
            let known = &mut self.items[at].kind;
            if std::mem::discriminant(known) != std::mem::discriminant(&kind) {
                *known = kind;
            }
            return at;
        }
        self.push_item(id, index, kind)
    }

    /// A finished item: what it says wins over what its deltas said, and
    /// its text is reported when no delta carried it.
    fn item_done(
        &mut self,
        item: Value,
        index: Option<u64>,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) {
        let before = self.items.len();
        let at = self.added(&item, index);
        let new = self.items.len() > before;
        match &mut self.items[at].kind {
            Kind::Message { streamed } => {
                let streamed = std::mem::replace(streamed, true);
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let (text, refusal) = match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => (part.get("text"), false),
                        Some("refusal") => (part.get("refusal"), true),
                        _ => (None, false),
                    };
                    self.refused |= refusal;
                    if !streamed && let Some(text) = text.and_then(Value::as_str) {
                        self.stream.progress.text(text);
                        self.push_text(text, on_fragment);
                    }
                }
            }
            Kind::Reasoning { streamed, .. } => {
                if !std::mem::replace(streamed, true) {
                    // The summary is the text a person may read; a server
                    // that sends none may send the reasoning itself.
                    let mut texts = texts_of(&item, "summary");
                    if texts.is_empty() {
                        texts = texts_of(&item, "content");
                    }
                    for text in texts {
                        self.stream.progress.text(text);
                        self.push_reasoning(true, text, on_fragment);
                    }
                }
                if let Kind::Reasoning { item: kept, .. } = &mut self.items[at].kind {
                    *kept = Some(item);
                }
            }
            Kind::Call {
                call_id,
                name,
                arguments,
            } => {
                // A new call, or one whose fields changed, is progress; the
                // same call finished again is not.
                let mut changed = new;
                for (field, slot) in [
                    ("call_id", call_id),
                    ("name", name),
                    ("arguments", arguments),
                ] {
                    if let Some(v) = item.get(field).and_then(Value::as_str)
                        && v != slot.as_str()
                    {
                        changed = true;
                        v.clone_into(slot);
                    }
                }
                if changed {
                    self.stream.progress.made();
                }
            }
            Kind::Search { item: kept } => {
                // A finished search (or its output) is part of the answer;
                // the same item finished again is not news.
                if kept.as_ref() != Some(&item) {
                    self.stream.progress.made();
                    *kept = Some(item);
                }
            }
            Kind::Other => {}
        }
    }

    /// The end event: model, usage, status; the output items when the
    /// stream sent none of its own (a server that answers a stream with
    /// the end event alone).
    fn end(&mut self, response: Response, on_fragment: &mut dyn FnMut(Fragment<'_>)) {
        self.name(response.model.as_deref(), response.id.as_deref());
        if let Some(usage) = &response.usage {
            let usage = usage.to_usage();
            self.usage = Some(usage);
            if self.stream.progress.usage(usage) {
                on_fragment(Fragment::Usage(usage));
            }
        }
        self.status = response.status;
        self.incomplete = response.incomplete_details.and_then(|d| d.reason);
        if self.items.is_empty() {
            for (n, item) in response.output.into_iter().enumerate() {
                self.item_done(item, Some(n as u64), on_fragment);
            }
        }
        self.release(on_fragment);
    }

    /// The first model and the first response id named win, as in chat
    /// completions.
    fn name(&mut self, model: Option<&str>, id: Option<&str>) {
        if self.model.is_none() {
            self.model = model.and_then(rules::model_name);
        }
        if self.id.is_none() {
            self.id = id.and_then(rules::response_id);
        }
    }

    fn push_text(&mut self, text: &str, on_fragment: &mut dyn FnMut(Fragment<'_>)) {
        let (content, reasoning) = (&mut self.content, &mut self.reasoning);
        match &mut self.think {
            Some(think) => think.push(text, &mut |f| {
                collect(content, reasoning, f);
                on_fragment(f);
            }),
            None if !text.is_empty() => {
                content.push_str(text);
                on_fragment(Fragment::Content(text));
            }
            None => {}
        }
    }

    /// Reasoning text; the first text of a new item or summary part is set
    /// apart from what came before by a blank line.
    fn push_reasoning(
        &mut self,
        first_of_item: bool,
        text: &str,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) {
        if text.is_empty() {
            return;
        }
        if first_of_item && !self.reasoning.is_empty() {
            self.reasoning.push_str("\n\n");
            on_fragment(Fragment::Reasoning("\n\n"));
        }
        self.reasoning.push_str(text);
        on_fragment(Fragment::Reasoning(text));
    }

    /// Text held back by the think splitter, released at the end.
    fn release(&mut self, on_fragment: &mut dyn FnMut(Fragment<'_>)) {
        let (content, reasoning) = (&mut self.content, &mut self.reasoning);
        if let Some(think) = &mut self.think {
            think.flush(&mut |f| {
                collect(content, reasoning, f);
                on_fragment(f);
            });
        }
    }
}

/// `response.failed` or an `error` event: the server's error under the
/// [shared rule](crate::protocol::rules#in-stream-errors), after reporting
/// what the failed request still cost.
fn failure(event: Event<'_>, on_fragment: &mut dyn FnMut(Fragment<'_>)) -> DecodeError {
    if let Some(response) = event.response {
        if let Some(usage) = &response.usage {
            on_fragment(Fragment::Usage(usage.to_usage()));
        }
        let error = response
            .error
            .filter(|e| !e.is_null())
            .unwrap_or_else(|| Value::from("response failed"));
        return rules::server_error("in stream", Some(&error));
    }
    // An `error` event: `{code, message}` at the top (OpenAI), or an
    // `error` object (some compatible servers).
    if let Some(error) = event.error.filter(|e| !e.is_null()) {
        return rules::server_error("in stream", Some(&error));
    }
    let mut error = serde_json::Map::new();
    if let Some(message) = event.message {
        error.insert("message".into(), Value::String(message));
    }
    if let Some(code) = event.code.filter(|c| !c.is_null()) {
        error.insert("code".into(), code);
    }
    rules::server_error("in stream", Some(&Value::Object(error)))
}

/// Whether an output item is a function call.
fn is_call(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("function_call")
}

fn collect(content: &mut String, reasoning: &mut String, f: Fragment<'_>) {
    match f {
        Fragment::Content(s) => content.push_str(s),
        Fragment::Reasoning(s) => reasoning.push_str(s),
        Fragment::Usage(_) => {}
    }
}

fn is_terminal(kind: &str) -> bool {
    matches!(
        kind,
        "response.completed" | "response.incomplete" | "response.failed" | "error"
    )
}

fn str_of(item: &Value, field: &str) -> String {
    item.get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The `text` of each part in `item[field]` (a reasoning item's `summary`
/// or `content`).
fn texts_of<'v>(item: &'v Value, field: &str) -> Vec<&'v str> {
    item.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .filter(|t| !t.is_empty())
        .collect()
}

/// Decode a non-streamed response body: its output items go through the
/// stream decoder's item rules, so both paths agree.
pub(crate) fn parse_response(body: &[u8], split_think: bool) -> Result<Completion, DecodeError> {
    let response: Response = crate::util::json_from_slice(body).map_err(|e| {
        let sent = rules::quoted_body(body);
        DecodeError::Protocol(format!("malformed response ({e}): {sent}"))
    })?;
    if let Some(error) = response.error.as_ref().filter(|e| !e.is_null()) {
        return Err(rules::server_error("in response", Some(error)));
    }
    match response.status.as_deref() {
        Some("completed" | "incomplete") | None => {}
        // `failed` without an error member, `cancelled`, or a response
        // still `queued` / `in_progress` (a background request): no answer.
        Some(other) => {
            return Err(DecodeError::Protocol(format!(
                "response status is {other}, not completed"
            )));
        }
    }
    let mut decoder = Decoder::new(split_think, None);
    decoder.end(response, &mut |_| {});
    decoder.stream.end();
    decoder.finish()
}
