//! OpenAI's Responses API (`POST {base}/responses`): the request encoder and
//! the response and stream decoders, into the same [`Completion`] and
//! [`Fragment`](super::Fragment)s as chat completions.
//!
//! | file | job |
//! |---|---|
//! | `encode.rs` | a [`Request`](super::Request) → the request body |
//! | `decode.rs` | streamed events and a whole body → a [`Completion`] |
//! | `shapes.rs` | the serde shapes of events, responses and usage |
//!
//! # Encoding
//!
//! - The system prompt is the top-level `instructions` (OpenAI's place for
//!   it: not an input item). System messages in the history and the
//!   per-request trailing note are input messages with role `system`.
//! - User messages: `{"type":"message","role":"user","content":[..]}` with
//!   an `input_text` part and an `input_image` part per image (a URL as
//!   given, bytes as a `data:` URL).
//! - Assistant messages: first the `reasoning` and tool-search items of
//!   their [`ProviderData`](crate::ProviderData), verbatim and in order,
//!   when it names
//!   [`Api::OpenAiResponses`](crate::Api::OpenAiResponses) and the
//!   transport's own API base and model (any other provider's items, and
//!   reasoning text, are left out); then the text as an `output_text`
//!   message; then one `function_call` item (`call_id`, `name`,
//!   `arguments`) per call. Arguments that are not one JSON object go as
//!   `{}`, as on chat completions.
//! - Tool results: `function_call_output` (`call_id`, `output` the text;
//!   with images, `output` is a list of `input_text` and `input_image`).
//! - Tools: `{"type":"function","name","description","parameters"}`; a
//!   deferred tool (the native form of [`tool_search`](crate::tool_search))
//!   with `"defer_loading": true`. When any is deferred, or the history
//!   sends a search back, the API's own search tool goes last:
//!   `{"type":"tool_search"}` (run by the server).
//! - `store: false` and `include: ["reasoning.encrypted_content"]` by
//!   default: nothing is kept server-side, and reasoning survives tool
//!   rounds in the request itself. A request field
//!   ([`Configurator::request_field`](crate::Configurator::request_field))
//!   named `store` or `include` replaces either.
//! - Structured output: `text.format: {"type":"json_schema", "name",
//!   "schema", "strict"}`.
//! - The settings ([`ModelSettings`](crate::ModelSettings)):
//!   `temperature`, `top_p`, `max_output_tokens`, `tool_choice` (`"auto"`,
//!   `"none"`, `"required"`, `{"type":"function","name"}`) and
//!   `parallel_tool_calls` (only with tools), `reasoning: {"effort"}`; a
//!   `seed`, `stop` or `thinking_budget` fails the request before it is
//!   sent (the API has no such field).
//! - The request fields come last, as given, in the Responses API's own
//!   shapes (no translation from chat completions' names: `max_tokens` is
//!   sent as `max_tokens`); a field pikuri writes gives way to a request
//!   field of the same name.
//!
//! # Decoding
//!
//! - Output items: `message` (its `output_text` parts are the text; a
//!   `refusal` part is text too, and makes the finish reason
//!   `content_filter`); `reasoning` (the `summary` texts, else the
//!   `content` texts, are [`Message::reasoning`](crate::Message::reasoning),
//!   items and summary parts set apart by a blank line; the whole item is kept in the
//!   message's [`ProviderData`](crate::ProviderData), stamped with the
//!   transport's API base and model by the client); `function_call` (a
//!   [`ToolCall`](crate::ToolCall) with the `call_id`, else the item id).
//!   `tool_search_call` and `tool_search_output` (the API's own tool
//!   search) are kept whole, once done, in the provider data in output
//!   order beside the reasoning items: never text, never calls
//!   ([`found`](super::found) reads what they found; one that never
//!   finished is dropped with a `warn` line). Other item types (built-in
//!   tools) are skipped. Two calls under one
//!   `call_id`, or a call without a name, refuse the answer (the shared
//!   [identity rule](super::rules#identity)).
//! - Finish reason, a [`FinishReason`](crate::FinishReason)
//!   (`rules::responses_finish`): `completed` is `Filtered` after a
//!   refusal, `ToolCalls` when calls came, else `Complete`; `incomplete`
//!   is `Length` for `max_output_tokens` (or no reason), `Filtered` for
//!   `content_filter`, `ServerCut` otherwise.
//! - Usage: `input_tokens` minus `input_tokens_details.cached_tokens` and
//!   `cache_write_tokens` (where a server such as OpenRouter reports cache
//!   writes) is the input, the cached ones `cached` and the written ones
//!   `cache_creation` (each capped at what `input_tokens` leaves),
//!   `output_tokens` the output, `output_tokens_details.reasoning_tokens`
//!   the thinking. A figure that is not a non-negative integer within
//!   `u64` is dropped (unknown), never a failure.
//! - Streams: `response.output_item.added` / `.done` open and close items;
//!   `response.output_text.delta`, `response.reasoning_summary_text.delta`
//!   and `response.reasoning_text.delta` are reported as they come;
//!   `response.function_call_arguments.delta` pieces are appended and
//!   `.done` replaces them with the whole. A finished item wins over its
//!   deltas for calls and kept reasoning; its text is reported only when
//!   no delta carried it. Deltas find their item by `item_id`, else by
//!   `output_index` (llama.cpp sends only the id), else the last item
//!   (a hash lookup: constant time however many items a server names).
//!   A finished tool-search item is progress; empty deltas, lifecycle
//!   and unknown events are not
//!   [progress](super::rules#progress) for the idle bound.
//!   `response.completed` or `response.incomplete` ends the stream (with
//!   the usage); its `output` is read when the stream sent no items.
//! - Bad input: a text or reasoning delta for an unknown item starts a new
//!   item (nothing is lost); an arguments delta for an unknown item, or
//!   one that is not a function call, is a protocol error (a call without
//!   a name cannot run). Arguments whose JSON never completes are kept as
//!   sent: the agent answers the call with an error observation and keeps
//!   `{}` in its history (see [`ToolCall::arguments`](crate::ToolCall::arguments)).
//!   `response.failed` and `error` events (and a body's `error`) are read
//!   by the shared [in-stream error rule](super::rules#in-stream-errors):
//!   `server error in stream: <message> (<code>)`, the HTTP status a
//!   `server_error` (500) or `rate_limit_exceeded` (429) stands for, so a
//!   fallback transport takes over; other codes are protocol errors. Data that is not
//!   JSON is a protocol error; JSON of an unexpected shape is skipped with
//!   a `warn` line, except for an end event, which is a protocol error.
//!   Unknown event types are skipped. A stream without its end event is
//!   `Truncated`.
//! - With `split_think`, `<think>` tags in the text are moved to the
//!   reasoning, as on chat completions.

mod decode;
mod encode;
mod shapes;

pub(crate) use decode::{Decoder, parse_response};
pub(crate) use encode::write_body;

#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod tests;
