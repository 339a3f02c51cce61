//! Google's Gemini API (`POST {base}/models/{model}:generateContent`,
//! streamed `:streamGenerateContent?alt=sse`): the request encoder and the
//! response and stream decoders, into the same [`Completion`] and
//! [`Fragment`]s as chat completions.
//!
//! | file | job |
//! |---|---|
//! | `encode.rs` | a request → the body, by reference |
//! | `decode.rs` | a body, or each streamed chunk (the same shape) → fragments and a completion |
//! | `shapes.rs` | the serde shapes, usage, the retry hint of an error body |
//!
//! # The request
//!
//! - The model and whether the answer streams are in the path, not the
//!   body; the key goes in `x-goog-api-key`.
//! - `systemInstruction`: the system prompt, then the history's system
//!   messages, each a text part.
//! - `contents`: `user` and `model` turns of parts; consecutive messages
//!   of one role are merged into one turn, so the results of one batch are
//!   one `user` turn of `functionResponse` parts (with a user message that
//!   follows them). Images go as `inlineData` (base64) or `fileData`
//!   (`fileUri`: a URL, which only some URLs are accepted as) parts after
//!   the text, in user turns and after a tool result. The per-request note
//!   is the last text part of the last user turn.
//! - An assistant message sends its text, then a `functionCall` part per
//!   call (`args`: the parsed arguments, `{}` when they are not one JSON
//!   object). When its [`ProviderData`](crate::ProviderData) is for this
//!   API, API base and model, the text part carries the answer's
//!   `thoughtSignature`, each call its own, and `id` the id the server gave
//!   the call (when it gave one); for any other model a call goes without
//!   its id, and the first call of a message that has no signature of its
//!   own for this model carries `skip_thought_signature_validator`, the
//!   value Google documents for calls written by another model (Gemini 3
//!   refuses calls of the current turn without a signature).
//! - A tool result is `functionResponse: {name, response: {"result":
//!   text}, id?}`: the name of the call it answers (looked up by id in the
//!   history), and the id when the call's went.
//! - `tools: [{functionDeclarations: [{name, description,
//!   parametersJsonSchema}]}]`: the JSON-Schema field, which takes the
//!   tool's schema as it is (`additionalProperties`, `$ref`, `anyOf`,
//!   ...), not `parameters`, the OpenAPI subset that would need a
//!   translation losing what it lacks.
//! - `toolConfig.functionCallingConfig` from the tool choice: `AUTO`,
//!   `NONE`, `ANY`, or `ANY` with `allowedFunctionNames: [name]` (only
//!   with tools). Gemini has no switch for parallel calls: a
//!   `parallel_tool_calls(false)` setting fails the request before it is
//!   sent.
//! - `generationConfig`: `temperature`, `topP`, `maxOutputTokens`,
//!   `stopSequences`, `seed`; structured output as `responseMimeType:
//!   "application/json"` with `responseJsonSchema` (JSON Schema, as for
//!   tools; Gemini takes it together with tools); `thinkingConfig` with
//!   `thinkingBudget` from the thinking budget, `thinkingLevel` from the
//!   reasoning effort (`minimal`, `low`, `medium`, `high`), and
//!   `includeThoughts: true` with either, so the thought summaries come
//!   back as reasoning.
//! - The request fields
//!   ([`Configurator::request_field`](crate::Configurator::request_field))
//!   come last, in Gemini's own shapes (`safetySettings`,
//!   `cachedContent`, ...); a field they name (`generationConfig`,
//!   `tools`, even `contents`) replaces pikuri's.
//!
//! # Responses and streams
//!
//! A streamed chunk has the shape of a whole response, so one decoder
//! reads both (a body is one chunk). Only candidate 0 is read.
//!
//! - Text parts make the content, `thought: true` text parts the
//!   reasoning; `functionCall` parts the calls (their `args` object as the
//!   arguments). A call without an `id` (most models give none) gets
//!   `gemini_call_<n>`, unique in the process, which the history carries;
//!   it is never sent to Gemini. Other parts (inline data the model wrote,
//!   code execution) are skipped.
//! - `thoughtSignature`: a call's is kept in its
//!   [`ToolCall::provider_data`](crate::ToolCall::provider_data)
//!   (`{"thoughtSignature": .., "id": ..}`, with the server's id), the
//!   last one on any other part in the message's provider data.
//! - `finishReason` (`rules::gemini_finish`): `STOP` → `Complete`
//!   (`ToolCalls` when calls came), `MAX_TOKENS` → `Length`; `SAFETY`,
//!   `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`,
//!   `IMAGE_SAFETY` and a prompt blocked by `promptFeedback.blockReason`
//!   (no candidate then) → `Filtered`; any other → `ServerCut`.
//! - `usageMetadata`: `promptTokenCount` less `cachedContentTokenCount` →
//!   input, `cachedContentTokenCount` → cached, `candidatesTokenCount` plus
//!   `thoughtsTokenCount` → output (the thoughts are output, as OpenAI
//!   counts reasoning), `thoughtsTokenCount` → thinking. A figure that is
//!   not a non-negative integer up to 2^40 is dropped with a `warn` line.
//!   In a stream each chunk's figures replace the last.
//! - `responseId` is the answer's id (the first one given, bounded);
//!   `modelVersion` the model.
//!
//! # Streaming
//!
//! The stream has no end event: the chunk with a `finishReason` (or a
//! blocked prompt) ends it, and anything after it is ignored. A stream
//! that ends before one is `Truncated`. A chunk with an `error` member is
//! read by the shared [in-stream error rule](super::rules#in-stream-errors)
//! (Gemini's numeric `code` is the status); data that is not JSON is a
//! protocol error; JSON of another shape is skipped with a `warn` line.
//! Two calls under one id, or a call without a name, refuse the answer
//! (the shared [identity rule](super::rules#identity)).
//!
//! # Errors and retries
//!
//! An error body `{"error": {"code", "message", "status", "details"}}`
//! shows its message and `status`; a 429 or 503 is retried after the
//! `Retry-After` header, else after the `retryDelay` of a
//! `google.rpc.RetryInfo` detail (`"30s"`, `"1.5s"`), else the backoff.
//!
//! # Not supported yet
//!
//! - The Files API (`fileData` with a Files API URI works when the host
//!   has one). (Explicit context caching is `cache.rs`.)
//! - Code execution, Google Search grounding and URL context (server
//!   tools): never declared, their parts skipped; grounding and citation
//!   metadata and safety ratings are not read.
//! - More than one candidate; the model's own image output.
//! - `split_think` has no effect (thoughts come as parts of their own).

mod cache;
mod decode;
mod encode;
mod shapes;

#[cfg(test)]
mod tests;

pub(crate) use cache::expired_hint;
pub use cache::{CachedContent, ContextCache};
pub(crate) use decode::{Decoder, parse_response};
pub(crate) use encode::write_body;
pub(crate) use shapes::retry_delay;

#[cfg(doc)]
use super::decode::{Completion, Fragment};

/// `x-goog-api-key`.
pub(crate) fn headers(key: Option<&str>) -> Vec<(&'static str, String)> {
    key.map(|k| ("x-goog-api-key", k.to_string()))
        .into_iter()
        .collect()
}
