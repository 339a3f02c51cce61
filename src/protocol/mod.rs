//! The wire protocols (OpenAI chat completions, Anthropic Messages, OpenAI
//! Responses, Google Gemini): everything between the agent loop and the socket. Its HTTP
//! agent comes from the crate's one HTTP setup, [`crate::net`].
//!
//! The loop describes a call as a [`Request`] and gets a [`Completion`]
//! back from [`Client::chat`]; it never sees JSON. Inside, a request goes
//! down and its answer comes up through these layers, each in its own file:
//!
//! ```text
//!  agent loop ── Request ──▶ wire.rs      the API's path, headers, encoder
//!                            client.rs    POST, status, cancel, retry.rs
//!                            sse.rs       bytes → event data (sans-IO)
//!                            stream.rs    event data → the API's decoder
//!                            decode/      (or anthropic/, responses/, gemini/) → Completion
//!  agent loop ◀─ Completion ─┘
//! ```
//!
//! | file | job |
//! |---|---|
//! | `transport.rs` | the public [`ChatTransport`] and [`HttpConfig`] |
//! | `wire.rs` | the seam: per [`Api`](crate::Api), path, headers, encoder, body decoder |
//! | `request.rs` | the neutral [`Request`] ([`ToolSpecs`], the response schema); the chat-completions body |
//! | `settings.rs` | the public [`ModelSettings`], [`ToolChoice`], [`ReasoningEffort`] |
//! | `anthropic/` | Anthropic Messages: encoder, body and stream decoders |
//! | `responses/` | OpenAI Responses: encoder, body and stream decoders |
//! | `gemini/` | Google Gemini: encoder, body and stream decoders |
//! | `stream.rs` | a streamed body: SSE events into the API's decoder |
//! | `client.rs` | the blocking HTTP client: cancellation, error mapping |
//! | `connect.rs` | a ureq failure that is not a timeout as `Error::Connect` or `Error::Transport`: one mapping for the client, the model list and Gemini's caches |
//! | `body.rs` | an error body in one bounded line: message, code and type, or a summary |
//! | `retry.rs` | which failures are retried, backoff, a cancellable wait (`Wake`, also the approval gate's) |
//! | `sse.rs` | the sans-IO SSE parser and its `BufRead` adapter |
//! | `decode/` | chat completions: chunk accumulation, `<think>` splitting, bodies; the shared [`Completion`] and [`Fragment`] |
//! | `sink.rs` | `Sink`: what a chat request reports while it runs (retries, progress, fragments, before a read) |
//! | `rules.rs` | the rules all four decoders apply, written once: progress, call identity, in-stream errors, bounds, finish reasons |
//! | `error.rs` | `DecodeError`, what `sse.rs` and `decode/` fail with |
//! | `found.rs` | the API's own tool search in the history: its blocks and items, `found_tool_names` |
//! | `probe.rs` | context-window detection ([`ChatTransport::detect_context_window`]) |
//! | `models.rs` | [`ChatTransport::list_models`]: the ids at `<api base>/models` |
//! | `fuzz.rs` | hooks for `fuzz/` (`cfg(fuzzing)` and tests only) |
//!
//! Decoding fails with its own `DecodeError`; `error::decode_error` turns
//! it into the public [`Error`](crate::Error), once.

#[cfg(feature = "anthropic")]
mod anthropic;
mod body;
mod client;
mod connect;
mod decode;
mod error;
mod found;
#[cfg(any(fuzzing, test))]
#[allow(
    unreachable_pub,
    reason = "re-exported at the crate root under cfg(fuzzing)"
)]
pub(crate) mod fuzz;
#[cfg(feature = "gemini")]
mod gemini;
mod models;
mod probe;
mod request;
#[cfg(feature = "responses")]
mod responses;
mod retry;
mod rules;
mod settings;
mod sink;
mod sse;
mod stream;
mod transport;
mod wire;
// A request on an API whose feature is off, and histories that name it.
#[cfg(test)]
mod test_util;
#[cfg(test)]
mod unbuilt_tests;

pub(crate) use client::Client;
#[cfg(feature = "mcp")]
pub(crate) use connect::cannot_connect;
pub(crate) use decode::{Completion, Fragment};
#[cfg(feature = "mcp")]
pub(crate) use error::DecodeError;
#[cfg(feature = "_bench")]
pub(crate) use error::decode_error;
#[allow(
    unused_imports,
    reason = "the agent's native tool search (issue 40) calls it"
)]
pub(crate) use found::found_tool_names;
pub(crate) use request::{Request, ResponseSchema, ToolSpecs, is_sendable};
pub(crate) use retry::{RetryNotice, Wake};
pub(crate) use sink::Callbacks;
#[cfg(feature = "_bench")]
pub(crate) use sink::Fragments;
// The MCP client reads its Streamable HTTP replies with the same SSE reader.
#[cfg(feature = "gemini")]
pub use gemini::{CachedContent, ContextCache};
pub use settings::{ModelSettings, ReasoningEffort, ToolChoice};
#[cfg(feature = "mcp")]
pub(crate) use sse::{Flow, read_sse};
#[cfg(feature = "_bench")]
pub(crate) use stream::{StreamOptions, read_stream};
pub(crate) use transport::check_http_url;
pub use transport::{ChatTransport, HttpConfig};
