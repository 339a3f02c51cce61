//! A non-streamed Messages response → one [`Completion`].

use serde_json::Value;

use super::shapes::{self, Response};
use crate::protocol::decode::Completion;
use crate::protocol::error::DecodeError;
use crate::protocol::rules;
use crate::{Api, FinishReason, Message, ProviderData, ToolCall, Usage};

/// Decode a non-streamed response body (see the
/// [module docs](super) for the rules).
pub(crate) fn parse_response(body: &[u8], split_think: bool) -> Result<Completion, DecodeError> {
    // Anthropic sends thinking as blocks of its own: nothing to split.
    let _ = split_think;
    let r: Response = crate::util::json_from_slice(body).map_err(|e| {
        DecodeError::Protocol(format!(
            "response is not an Anthropic message: {e}: {}",
            rules::quoted_body(body)
        ))
    })?;
    if let Some(error) = r.error.as_ref().filter(|e| !e.is_null()) {
        return Err(rules::server_error("in response", Some(error)));
    }
    if r.content.is_none() && r.kind.as_deref() != Some("message") {
        return Err(DecodeError::Protocol(
            "response is not an Anthropic message: no `content`".to_string(),
        ));
    }
    let mut parts = Parts::default();
    for block in r.content.unwrap_or_default() {
        match block.kind.as_deref() {
            Some("text") => parts.content.push_str(block.text.as_deref().unwrap_or("")),
            Some("thinking") => {
                let thinking = block.thinking.unwrap_or_default();
                parts
                    .items
                    .extend(shapes::thinking_item(&thinking, block.signature.as_deref()));
                parts.reasoning.push_str(&thinking);
            }
            Some("redacted_thinking") => {
                parts
                    .items
                    .push(shapes::redacted_item(block.data.as_deref().unwrap_or("")));
            }
            Some("tool_use") => {
                let id = block
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("call_{}", parts.calls.len()));
                parts.calls.push(ToolCall::new(
                    id,
                    block.name.unwrap_or_default(),
                    shapes::arguments_of(block.input.as_ref()),
                ));
            }
            // The API's own tool search: kept, in order, to send back
            // (`protocol::found`); never text, never a client call.
            Some("server_tool_use") if block.is_search_use() => {
                let input = shapes::search_input(block.input.as_ref());
                parts.items.push(block.search_use_item(input));
            }
            Some("tool_search_tool_result") => parts.items.push(block.search_result_item()),
            // Other server-tool blocks, citations and kinds added later:
            // not pikuri's to read.
            other => log::debug!("anthropic: skipping a content block of type {other:?}"),
        }
    }
    let usage = r.usage.as_ref().map(shapes::WireUsage::to_usage);
    let finish = rules::anthropic_finish(r.stop_reason.as_deref(), !parts.calls.is_empty());
    let model = r.model.as_deref().and_then(rules::model_name);
    let id = r.id.as_deref().and_then(rules::response_id);
    parts
        .into_completion(finish, usage, model)
        .map(|c| c.with_id(id))
}

/// What the blocks of one message add up to, streamed or not.
#[derive(Debug, Default)]
pub(super) struct Parts {
    pub(super) content: String,
    pub(super) reasoning: String,
    pub(super) calls: Vec<ToolCall>,
    /// `thinking`, `redacted_thinking` and tool-search blocks, in order.
    pub(super) items: Vec<Value>,
}

impl Parts {
    /// The completion; the provider data's endpoint and model are left
    /// empty for the client to stamp (`wire::stamp_origin`), which knows where the
    /// request went.
    pub(super) fn into_completion(
        self,
        finish: FinishReason,
        usage: Option<Usage>,
        model: Option<String>,
    ) -> Result<Completion, DecodeError> {
        let mut message = Message::assistant_tool_calls(self.content, self.calls);
        message.reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
        message.usage = usage;
        message.model.clone_from(&model);
        // Only whole searches: a broken one would poison the history.
        let items = crate::protocol::found::whole_searches(self.items);
        if !items.is_empty() {
            message.provider_data = Some(ProviderData::new(
                Api::AnthropicMessages,
                String::new(),
                String::new(),
                items,
            ));
        }
        Completion::new(message, finish, usage, model)
    }
}
