//! Anthropic's Messages API (`POST {base}/messages`): the request encoder
//! and the response and stream decoders, into the same [`Completion`] and
//! [`Fragment`]s as chat completions.
//!
//! | file | job |
//! |---|---|
//! | `encode.rs` | a request → the body, by reference |
//! | `response.rs` | a non-streamed body → completion |
//! | `decode.rs` | stream events → fragments and a completion |
//! | `shapes.rs` | the serde shapes, stop reasons, usage |
//!
//! # The request
//!
//! - `system`: the system prompt, then the history's system messages, each
//!   a text block.
//! - `messages`: user and assistant messages of content blocks;
//!   consecutive messages of one role are merged into one (the API wants
//!   the roles to alternate), so the tool results of one batch are one user
//!   message of `tool_result` blocks, and a user message that follows them
//!   joins it. Empty texts are left out. Images go as `image` blocks
//!   (`base64` or `url` sources) after the text, in user messages and
//!   inside tool results.
//! - The request's per-request note (the remaining-steps note) is the last
//!   text block of the last user message, after the conversation's cache
//!   breakpoint, so a note that changes from one request to the next never
//!   changes the cached prefix.
//! - An assistant message sends, in order: the `thinking`,
//!   `redacted_thinking` and tool-search blocks of its
//!   [`ProviderData`](crate::ProviderData)
//!   when that data is for this API, API base and model (the API requires
//!   them back within a tool loop; another model's are dropped, as is
//!   reasoning text that came without them, from another API), its text,
//!   then a `tool_use` block per call, whose `input` is the parsed
//!   arguments (`{}` when they are not one JSON object). The thinking goes
//!   back whatever
//!   [`Configurator::replay_reasoning`](crate::Configurator::replay_reasoning)
//!   says: the API requires it within a tool loop, and drops it itself from
//!   earlier turns.
//! - `tools`: `{name, description, input_schema}` each; a deferred tool
//!   (the native form of [`tool_search`](crate::tool_search)) with
//!   `defer_loading: true`. When any is deferred, or the history sends a
//!   search back, the API's own search tool goes last,
//!   `{"type": "tool_search_tool_bm25_20251119", "name":
//!   "tool_search_tool_bm25"}`, or its regex variant
//!   (`tool_search_tool_regex_20251119`) with
//!   [`ToolSearch::regex`](crate::tool_search::ToolSearch::regex), and
//!   each variant a search sent back names (never deferred, so it also
//!   carries the tools' cache breakpoint). No beta header: the SDK has these types
//!   outside its beta namespace.
//! - `max_tokens`, which the API requires: the
//!   [`ModelSettings`](crate::ModelSettings) bound, else
//!   `DEFAULT_MAX_TOKENS` (4096), plus the thinking budget when one is set.
//! - The settings: `temperature`, `top_p`, `stop_sequences`, `tool_choice`
//!   (`{"type": "auto"|"none"|"any"|"tool", "name"?}`, with
//!   `disable_parallel_tool_use: true` when parallel calls are off; only
//!   with tools), `thinking: {"type": "enabled", "budget_tokens": n}`,
//!   `output_config.effort` (`minimal` as `low`); a `seed` fails the
//!   request before it is sent.
//! - Structured output: `output_config.format: {"type": "json_schema",
//!   "schema": ..}`.
//! - The request fields
//!   ([`Configurator::request_field`](crate::Configurator::request_field))
//!   come last, as given, in Anthropic's own shapes (`top_k`, `metadata`,
//!   ...); a field they name (`max_tokens`, `system`, `tools`, `stream`,
//!   even `messages`) replaces pikuri's.
//!
//! # Prompt caching
//!
//! Unless [`ChatTransport::with_prompt_caching`](crate::ChatTransport::with_prompt_caching)
//! turned it off, three `cache_control: {"type": "ephemeral"}` breakpoints
//! of the API's four are placed: on the last tool, on the last system
//! block, and on the conversation's last block before the per-request note
//! (the moving end: each request reads the prefix the one before wrote). To
//! place its own, a host turns the automatic ones off and sends `system`
//! and `tools` with its breakpoints as request fields.
//!
//! # Responses and streams
//!
//! - Text blocks make the content; `thinking` blocks the reasoning, and,
//!   with their signature, the provider data (with `redacted_thinking`
//!   blocks, verbatim, in order); `tool_use` blocks the tool calls. The
//!   API's own tool search, a `server_tool_use` block named
//!   `tool_search_tool_*` and its `tool_search_tool_result`, joins the
//!   provider data in order, in the shape the API takes back (`id`,
//!   `name`, `input`, `caller`; `tool_use_id`, `content`): never text,
//!   never a client call ([`found`](super::found) reads what it found).
//!   Only whole searches are kept: a search block with garbage content,
//!   an empty or repeated id, or without its pair is dropped with its
//!   pair, since the API would refuse every later request that sent it
//!   back.
//!   Other block kinds (other server tools, citations) are skipped.
//! - `stop_reason` is mapped to a [`FinishReason`](crate::FinishReason)
//!   (`rules::anthropic_finish`): `end_turn`, `stop_sequence` → `Complete`
//!   (`ToolCalls` when calls came); `tool_use` → `ToolCalls`; `max_tokens`,
//!   `model_context_window_exceeded` → `Length`; `refusal` → `Filtered`;
//!   `pause_turn` (only server tools pause) → `Complete`, the message kept
//!   as the answer; any other → `ServerCut`.
//! - A `tool_use` block without a name, or two under one id, refuse the
//!   answer (the shared [identity rule](super::rules#identity)).
//! - Usage: `input_tokens` → input, `output_tokens` → output,
//!   `cache_read_input_tokens` → cached, `cache_creation_input_tokens` →
//!   cache creation (Anthropic's slices are already exclusive). A figure
//!   that is not a non-negative integer up to 2^40 is dropped with a `warn`
//!   line, as if not reported.
//!
//! # Streaming
//!
//! Events by their `type`: `message_start` (model, first usage),
//! `content_block_start` (a `tool_search_tool_result` comes whole in
//! it), `content_block_delta` (`text_delta`, `thinking_delta`,
//! `signature_delta`, `input_json_delta`, also a tool search's input),
//! `content_block_stop`, `message_delta` (stop reason, cumulative usage:
//! its figures replace those before), `message_stop` (the end; anything
//! after is ignored). `ping` and unknown event types, delta kinds and
//! members are skipped, and are not [progress](super::rules#progress) for
//! the idle bound (nor is a `message_delta` with nothing new).
//!
//! Bad streams:
//! - an `error` event (and an error body that came with a 200) is read by
//!   the shared [in-stream error rule](super::rules#in-stream-errors):
//!   `server error in stream: <message> (<type>)`; one the API also
//!   answers with a status before a stream (`overloaded_error` 529,
//!   `rate_limit_error` 429, `api_error` 500, `timeout_error` 504) is an
//!   HTTP error of that status (so it is classified, and a fallback
//!   transport takes over, as then), any other a protocol error. It is not
//!   retried: its text already reached the listeners;
//! - a stream that ends without `message_stop` is `Truncated`;
//! - a delta or stop for a block that never started or already stopped, a
//!   block started twice or before `message_start`, data that is not JSON:
//!   a protocol error (JSON of an unexpected shape is skipped with a `warn`
//!   line);
//! - a block still open at `message_stop` is closed as it stands;
//! - `tool_use` input JSON that never completes is kept as the call's
//!   arguments: the agent answers the call with an error observation and
//!   the history sends `{}` back; a tool search's input that never
//!   completes as one object is kept as it started (`{}`);
//! - a `thinking` block without a signature keeps its text as reasoning
//!   but is not kept to send back (the API rejects unsigned thinking).
//!
//! The agent's next turn works after each: a failed request leaves no
//! message in the history.
//!
//! # Not supported yet
//!
//! - Server tools other than the tool search (web search, code
//!   execution), citations,
//!   documents (PDF) and `search_result` blocks: skipped when received,
//!   never sent.
//! - Interleaved thinking: a message's thinking blocks are sent back before
//!   its text and calls, not between them.
//! - `pause_turn` is not continued (pikuri declares no server tools).
//! - `tool_result` never sets `is_error` (the observation text says it).
//! - `/v1/messages/count_tokens` is not used; `split_think` has no effect
//!   (thinking comes in blocks of its own).

mod decode;
mod encode;
mod response;
mod shapes;

#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod tests;

pub(crate) use decode::Decoder;
#[cfg(test)]
use encode::DEFAULT_MAX_TOKENS;
pub(crate) use encode::write_body;
pub(crate) use response::parse_response;

#[cfg(doc)]
use super::decode::{Completion, Fragment};

/// The version header every request carries.
pub(crate) const VERSION: &str = "2023-06-01";

/// `x-api-key` and `anthropic-version`.
pub(crate) fn headers(key: Option<&str>) -> Vec<(&'static str, String)> {
    let mut h = vec![("anthropic-version", VERSION.to_string())];
    if let Some(k) = key {
        h.push(("x-api-key", k.to_string()));
    }
    h
}
