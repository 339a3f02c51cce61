//! A Gemini response, whole or streamed one chunk at a time, into one
//! [`Completion`] (see the [module docs](super#responses-and-streams) for
//! the rules).

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

use super::shapes::{Chunk, Part};
use crate::protocol::decode::{Completion, Fragment, StreamDecoder, StreamState};
use crate::protocol::error::DecodeError;
use crate::protocol::rules;
use crate::{Api, Message, ProviderData, ToolCall, Usage};

/// The number of the next call that came without an id: unique in the
/// process, so two answers' made-up ids never meet in one history.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// Decode a non-streamed response body: one chunk, which must end the
/// answer.
pub(crate) fn parse_response(body: &[u8], split_think: bool) -> Result<Completion, DecodeError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| DecodeError::Protocol(format!("response is not UTF-8: {e}")))?;
    let mut d = Decoder::new(split_think, None);
    d.whole = true;
    d.push_data(text, &mut |_| {})?;
    if !d.is_done() {
        return Err(DecodeError::Protocol(format!(
            "response is not a Gemini answer: no candidate with a finishReason: {}",
            rules::quoted_body(body)
        )));
    }
    d.finish()
}

/// The decoder: feed it each chunk's data in order.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    content: String,
    reasoning: String,
    calls: Vec<ToolCall>,
    /// The last signature on a part that is not a call.
    signature: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    /// The `responseId`, the first one given.
    id: Option<String>,
    finish: Option<String>,
    blocked: bool,
    /// Progress, the finish reason, the secret redacted from quoted chunks.
    stream: StreamState,
    /// A whole body: data of another shape is an error, not skipped.
    whole: bool,
}

impl Decoder {
    /// A decoder; `split_think` is unused (thoughts come as parts of their
    /// own), `secret` is redacted from what log lines quote.
    pub(crate) fn new(split_think: bool, secret: Option<&str>) -> Decoder {
        let _ = split_think;
        Decoder {
            stream: StreamState::new(secret),
            ..Decoder::default()
        }
    }
}

/// The end event is a chunk with a finish reason (or a blocked prompt).
impl StreamDecoder for Decoder {
    fn state(&self) -> &StreamState {
        &self.stream
    }

    fn event(
        &mut self,
        data: &str,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<(), DecodeError> {
        let chunk: Chunk<'_> = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => return self.unreadable(data, &e),
        };
        let where_ = if self.whole {
            "in response"
        } else {
            "in stream"
        };
        if let Some(error) = chunk.error.as_deref().filter(|e| !e.is_null()) {
            return Err(rules::server_error(where_, Some(error)));
        }
        if self.model.is_none() {
            self.model = chunk.model.as_deref().and_then(rules::model_name);
        }
        if self.id.is_none() {
            self.id = chunk.id.as_deref().and_then(rules::response_id);
        }
        let candidate = chunk
            .candidates
            .into_iter()
            .flatten()
            .find(|c| c.index.unwrap_or(0) == 0);
        if let Some(c) = candidate {
            let parts = c.content.and_then(|c| c.parts).unwrap_or_default();
            for part in parts {
                self.part(part, on_fragment);
            }
            if let Some(reason) = c.finish.filter(|r| !r.is_empty()) {
                self.finish = Some(rules::bounded(&reason, rules::MAX_LABEL).into_owned());
                self.stream.end();
            }
        }
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            log::info!(
                "gemini: the prompt was blocked ({})",
                rules::bounded(&reason, rules::MAX_LABEL)
            );
            self.blocked = true;
            self.stream.end();
        }
        if let Some(u) = chunk.usage {
            let u = u.to_usage();
            self.usage = Some(u);
            if self.stream.progress.usage(u) {
                on_fragment(Fragment::Usage(u));
            }
        }
        Ok(())
    }

    /// The complete message, or `Truncated` when no finish reason came.
    fn finish(self) -> Result<Completion, DecodeError> {
        if !self.stream.is_done() {
            return Err(DecodeError::Truncated);
        }
        let finish =
            rules::gemini_finish(self.finish.as_deref(), self.blocked, !self.calls.is_empty());
        let signed = self.calls.iter().any(|c| c.provider_data.is_some());
        let mut message = Message::assistant_tool_calls(self.content, self.calls);
        message.reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
        message.usage = self.usage;
        message.model.clone_from(&self.model);
        if signed || self.signature.is_some() {
            // Endpoint and model are stamped by the client (`wire::stamp_origin`).
            let items = self
                .signature
                .map(|s| vec![serde_json::json!({ "thoughtSignature": s })])
                .unwrap_or_default();
            message.provider_data = Some(ProviderData::new(Api::Gemini, "", "", items));
        }
        Completion::new(message, finish, self.usage, self.model).map(|c| c.with_id(self.id))
    }
}

impl Decoder {
    fn part(&mut self, part: Part<'_>, on_fragment: &mut dyn FnMut(Fragment<'_>)) {
        let signature = part.signature.filter(|s| !s.is_empty());
        if let Some(call) = part.call {
            self.stream.progress.made();
            let server_id = call.id.filter(|id| !id.is_empty());
            let mut data = Map::new();
            if let Some(sig) = &signature {
                data.insert("thoughtSignature".into(), Value::from(&**sig));
            }
            if let Some(id) = &server_id {
                data.insert("id".into(), Value::from(id.as_str()));
            }
            let id = server_id.unwrap_or_else(|| {
                format!("gemini_call_{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed))
            });
            let arguments = match call.args {
                Some(v @ Value::Object(_)) => v.to_string(),
                _ => "{}".to_string(),
            };
            let mut c = ToolCall::new(id, call.name.unwrap_or_default(), arguments);
            c.provider_data = (!data.is_empty()).then_some(Value::Object(data));
            self.calls.push(c);
            return;
        }
        if let Some(sig) = signature {
            self.stream.progress.made();
            self.signature = Some(sig.0.into_owned());
        }
        let text = part.text.as_deref().unwrap_or("");
        if text.is_empty() {
            return;
        }
        self.stream.progress.text(text);
        if part.thought == Some(true) {
            self.reasoning.push_str(text);
            on_fragment(Fragment::Reasoning(text));
        } else {
            self.content.push_str(text);
            on_fragment(Fragment::Content(text));
        }
    }

    /// Data that is not a chunk of this shape: not JSON at all is a
    /// protocol error; in a stream, JSON of another shape is skipped with
    /// a `warn` line.
    fn unreadable(&self, data: &str, e: &serde_json::Error) -> Result<(), DecodeError> {
        if self.whole {
            let quoted = rules::quoted_body(data.as_bytes());
            return Err(DecodeError::Protocol(format!(
                "response is not a Gemini answer: {e}: {quoted}"
            )));
        }
        let quoted = crate::util::redact(data, self.stream.secret());
        let quoted = crate::util::excerpt(&quoted, 200);
        if !e.is_data() {
            return Err(DecodeError::Protocol(format!(
                "response is not a Gemini answer: {e}: {quoted}"
            )));
        }
        log::warn!("gemini stream: skipping a chunk of an unexpected shape ({e}): {quoted}");
        Ok(())
    }
}
