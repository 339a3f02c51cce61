//! A streamed Messages response, one SSE event's data at a time, into one
//! [`Completion`] (see the [module docs](super#streaming) for the rules).

use std::collections::HashMap;

use super::response::Parts;
use super::shapes::{self, Event};
use crate::protocol::decode::{Completion, Fragment, StreamDecoder, StreamState};
use crate::protocol::error::DecodeError;
use crate::protocol::rules;
use crate::{ToolCall, Usage};

/// A content block being streamed.
#[derive(Debug)]
enum Open {
    Text,
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Redacted,
    Tool {
        call: usize,
        json: String,
        /// The `input` the block started with, used when no delta follows.
        initial: String,
    },
    /// The API's own tool search (`server_tool_use`): its item stands in
    /// the provider data already (in block order), its `input` is set at
    /// the stop from the deltas.
    Search {
        item: usize,
        json: String,
    },
    /// A kind pikuri does not read (other server tools, ...): its deltas
    /// are skipped.
    Other,
}

/// The stream decoder: feed it each event's data in order.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    parts: Parts,
    /// Open blocks (`Some`) and stopped ones (`None`) by their index: one
    /// lookup per event, however many blocks a server starts.
    blocks: HashMap<u64, Option<Open>>,
    usage: Option<Usage>,
    model: Option<String>,
    /// The message's id, from `message_start`.
    id: Option<String>,
    stop_reason: Option<String>,
    /// Progress, `message_stop`, the secret redacted from quoted events.
    stream: StreamState,
    started: bool,
}

impl Decoder {
    /// A decoder; `split_think` is unused (Anthropic streams thinking in
    /// blocks of its own), `secret` is redacted from what log lines quote.
    pub(crate) fn new(split_think: bool, secret: Option<&str>) -> Decoder {
        let _ = split_think;
        Decoder {
            stream: StreamState::new(secret),
            ..Decoder::default()
        }
    }
}

/// The end event is `message_stop`.
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
            Ok(e) => e,
            Err(e) => return self.unreadable(data, &e),
        };
        let Some(kind) = event.kind.as_deref() else {
            log::warn!("anthropic stream: skipping an event without a type");
            return Ok(());
        };
        match kind {
            "content_block_delta" => self.delta(&event, on_fragment),
            "content_block_start" => self.start(event),
            "content_block_stop" => self.stop(event.index),
            "message_start" => {
                self.started = true;
                if let Some(head) = event.message {
                    self.model = head.model.as_deref().and_then(rules::model_name);
                    self.id = head.id.as_deref().and_then(rules::response_id);
                    if let Some(u) = head.usage {
                        self.report_usage(u.to_usage(), on_fragment);
                    }
                }
                Ok(())
            }
            "message_delta" => {
                // A stop reason is progress (once: a repeated one is not
                // news); usage is, when it changed.
                if let Some(reason) = event.delta.and_then(|d| d.stop_reason) {
                    let reason = rules::bounded(&reason, rules::MAX_LABEL);
                    if self.stop_reason.as_deref() != Some(&*reason) {
                        self.stream.progress.made();
                        self.stop_reason = Some(reason.into_owned());
                    }
                }
                if let Some(u) = event.usage {
                    self.report_usage(u.to_usage(), on_fragment);
                }
                Ok(())
            }
            "message_stop" => {
                self.stream.end();
                Ok(())
            }
            "error" => Err(rules::server_error("in stream", event.error.as_deref())),
            // `ping` keeps the connection alive; event types added later
            // are not pikuri's to read.
            _ => Ok(()),
        }
    }

    /// The complete message, or `Truncated` when `message_stop` never came.
    fn finish(mut self) -> Result<Completion, DecodeError> {
        if !self.stream.is_done() {
            return Err(DecodeError::Truncated);
        }
        // A block left open at `message_stop` is closed as if its stop had
        // come: what it holds is all there is.
        let mut open: Vec<u64> = self
            .blocks
            .iter()
            .filter(|(_, b)| b.is_some())
            .map(|(i, _)| *i)
            .collect();
        // In index order: a thinking block's text joins the reasoning in
        // the order the blocks stand in the message.
        open.sort_unstable();
        for index in open {
            self.stop(Some(index))?;
        }
        let finish =
            rules::anthropic_finish(self.stop_reason.as_deref(), !self.parts.calls.is_empty());
        self.parts
            .into_completion(finish, self.usage, self.model)
            .map(|c| c.with_id(self.id))
    }
}

impl Decoder {
    /// Data that is not an event of this shape: not JSON at all is a
    /// protocol error; JSON of another shape (a member of an unexpected
    /// type) is skipped with a `warn` line.
    fn unreadable(&self, data: &str, e: &serde_json::Error) -> Result<(), DecodeError> {
        let quoted = crate::util::redact(data, self.stream.secret());
        let quoted = crate::util::excerpt(&quoted, 200);
        if !e.is_data() {
            return Err(DecodeError::Protocol(format!(
                "stream event is not JSON: {quoted}"
            )));
        }
        log::warn!("anthropic stream: skipping an event of an unexpected shape ({e}): {quoted}");
        Ok(())
    }

    fn report_usage(&mut self, u: Usage, on_fragment: &mut dyn FnMut(Fragment<'_>)) {
        let merged = shapes::merge_usage(self.usage, u);
        self.usage = Some(merged);
        // Repeated figures are neither progress nor news to the listeners.
        if self.stream.progress.usage(merged) {
            on_fragment(Fragment::Usage(merged));
        }
    }

    fn start(&mut self, event: Event<'_>) -> Result<(), DecodeError> {
        let index = event.index.ok_or_else(|| {
            DecodeError::Protocol("content_block_start without an index".to_string())
        })?;
        if !self.started {
            return Err(DecodeError::Protocol(
                "content_block_start before message_start".to_string(),
            ));
        }
        if self.blocks.contains_key(&index) {
            return Err(DecodeError::Protocol(format!(
                "content block {index} started twice"
            )));
        }
        let block = event.content_block.map(|b| *b);
        let kind = block.as_ref().and_then(|b| b.kind.as_deref());
        let open = match (kind, block.as_ref()) {
            (Some("text"), Some(b)) => {
                // A start may carry text already (it usually is empty).
                let text = b.text.as_deref().unwrap_or("");
                self.stream.progress.text(text);
                self.parts.content.push_str(text);
                Open::Text
            }
            (Some("thinking"), Some(b)) => {
                let text = b.thinking.clone().unwrap_or_default();
                self.stream.progress.text(&text);
                Open::Thinking {
                    text,
                    signature: b.signature.clone().filter(|s| !s.is_empty()),
                }
            }
            (Some("redacted_thinking"), Some(b)) => {
                self.stream.progress.made();
                self.parts
                    .items
                    .push(shapes::redacted_item(b.data.as_deref().unwrap_or("")));
                Open::Redacted
            }
            (Some("tool_use"), Some(b)) => {
                // A new call is part of the answer (its name and id).
                self.stream.progress.made();
                let call = self.parts.calls.len();
                let id =
                    b.id.clone()
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| format!("call_{call}"));
                self.parts.calls.push(ToolCall::new(
                    id,
                    b.name.clone().unwrap_or_default(),
                    String::new(),
                ));
                Open::Tool {
                    call,
                    json: String::new(),
                    initial: shapes::arguments_of(b.input.as_ref()),
                }
            }
            (Some("server_tool_use"), Some(b)) if b.is_search_use() => {
                self.stream.progress.made();
                let input = shapes::search_input(b.input.as_ref());
                self.parts.items.push(b.search_use_item(input));
                Open::Search {
                    item: self.parts.items.len() - 1,
                    json: String::new(),
                }
            }
            (Some("tool_search_tool_result"), Some(b)) => {
                // Whole in its start, as the API streams it.
                self.stream.progress.made();
                self.parts.items.push(b.search_result_item());
                Open::Other
            }
            _ => Open::Other,
        };
        self.blocks.insert(index, Some(open));
        Ok(())
    }

    fn delta(
        &mut self,
        event: &Event<'_>,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<(), DecodeError> {
        let index = event.index.ok_or_else(|| {
            DecodeError::Protocol("content_block_delta without an index".to_string())
        })?;
        let Some(delta) = &event.delta else {
            return Ok(());
        };
        let Decoder {
            blocks,
            parts,
            stream,
            ..
        } = self;
        let progress = &mut stream.progress;
        let open = open_block(blocks, index, "content_block_delta")?;
        // Only a delta of a known kind with something in it is progress.
        let piece = delta.text.as_deref().unwrap_or("");
        match (open, delta.kind.as_deref()) {
            (Open::Text, Some("text_delta")) => {
                if !piece.is_empty() {
                    progress.text(piece);
                    parts.content.push_str(piece);
                    on_fragment(Fragment::Content(piece));
                }
            }
            (Open::Thinking { text, .. }, Some("thinking_delta")) => {
                if !piece.is_empty() {
                    progress.text(piece);
                    text.push_str(piece);
                    on_fragment(Fragment::Reasoning(piece));
                }
            }
            (Open::Thinking { signature, .. }, Some("signature_delta")) => {
                progress.text(piece);
                signature.get_or_insert_with(String::new).push_str(piece);
            }
            (Open::Tool { json, .. } | Open::Search { json, .. }, Some("input_json_delta")) => {
                progress.text(piece);
                json.push_str(piece);
            }
            // Citations and delta kinds added later; a delta of another
            // block's kind (a server bug) is not worth the answer.
            (_, kind) => log::debug!("anthropic stream: skipping a {kind:?} delta"),
        }
        Ok(())
    }

    fn stop(&mut self, index: Option<u64>) -> Result<(), DecodeError> {
        let index = index.ok_or_else(|| {
            DecodeError::Protocol("content_block_stop without an index".to_string())
        })?;
        open_block(&mut self.blocks, index, "content_block_stop")?;
        let slot = self.blocks.get_mut(&index).and_then(Option::take);
        match slot {
            Some(Open::Thinking { text, signature }) => {
                self.parts
                    .items
                    .extend(shapes::thinking_item(&text, signature.as_deref()));
                self.parts.reasoning.push_str(&text);
            }
            Some(Open::Tool {
                call,
                json,
                initial,
            }) => {
                // Arguments that never completed as JSON are kept as sent:
                // the agent answers the call with an error observation
                // quoting them, and the history sends `{}` instead (as for
                // chat completions).
                let args = if json.trim().is_empty() {
                    initial
                } else {
                    json
                };
                self.parts.calls[call].arguments = args;
            }
            Some(Open::Search { item, json }) => {
                // The whole input, when the deltas made one JSON object;
                // else the one the block started with (the API takes back
                // only an object).
                if !json.trim().is_empty() {
                    match serde_json::from_str::<serde_json::Value>(&json) {
                        Ok(input @ serde_json::Value::Object(_)) => {
                            self.parts.items[item]["input"] = input;
                        }
                        _ => log::warn!(
                            "anthropic stream: a tool search's input is not one JSON object; \
                             kept as it started"
                        ),
                    }
                }
            }
            Some(Open::Text | Open::Redacted | Open::Other) | None => {}
        }
        Ok(())
    }
}

/// The open block at `index`; an error when none started there or it
/// already stopped (out-of-order events).
fn open_block<'b>(
    blocks: &'b mut HashMap<u64, Option<Open>>,
    index: u64,
    what: &str,
) -> Result<&'b mut Open, DecodeError> {
    match blocks.get_mut(&index) {
        Some(Some(open)) => Ok(open),
        Some(None) => Err(DecodeError::Protocol(format!(
            "{what} for content block {index}, which already stopped"
        ))),
        None => Err(DecodeError::Protocol(format!(
            "{what} for content block {index}, which never started"
        ))),
    }
}
