//! The OpenAI chat-completions protocol: everything between the agent loop
//! and the socket, and the only module that knows ureq.
//!
//! The loop describes a call as a [`Request`] and gets a [`Completion`]
//! back from [`Client::chat`]; it never sees JSON. Inside, a request goes
//! down and its answer comes up through these layers, each in its own file:
//!
//! ```text
//!  agent loop ── Request ──▶ request.rs   encode the body (by reference)
//!                            client.rs    POST, status, cancel, retry.rs
//!                            sse.rs       bytes → event data (sans-IO)
//!                            decode/      event data or a body → Completion
//!  agent loop ◀─ Completion ─┘
//! ```
//!
//! | file | job |
//! |---|---|
//! | `transport.rs` | the public [`ChatTransport`] and [`HttpConfig`] |
//! | `request.rs` | [`Request`] and [`ToolSpecs`], encoded as the request body |
//! | `client.rs` | the blocking HTTP client: cancellation, error mapping |
//! | `body.rs` | an error body in one bounded line: message, code and type, or a summary |
//! | `retry.rs` | which failures are retried, backoff, a cancellable wait |
//! | `sse.rs` | the sans-IO SSE parser and its `BufRead` adapter |
//! | `decode/` | chunk accumulation, `<think>` splitting, non-streamed bodies |
//! | `error.rs` | `DecodeError`, what `sse.rs` and `decode/` fail with |
//! | `probe.rs` | context-window detection ([`ChatTransport::detect_context_window`]) |
//! | `models.rs` | [`ChatTransport::list_models`]: the ids at `<api base>/models` |
//! | `fuzz.rs` | hooks for `fuzz/` (`cfg(fuzzing)` and tests only) |
//!
//! Decoding fails with its own `DecodeError`; `client::decode_error` turns
//! it into the public [`Error`](crate::Error), once.

mod body;
mod client;
mod decode;
mod error;
#[cfg(any(fuzzing, test))]
#[allow(
    unreachable_pub,
    reason = "re-exported at the crate root under cfg(fuzzing)"
)]
pub(crate) mod fuzz;
mod models;
mod probe;
mod request;
mod retry;
mod sse;
mod transport;

pub(crate) use client::Client;
#[cfg(feature = "mcp")]
pub(crate) use client::cannot_connect;
#[cfg(feature = "_bench")]
pub(crate) use client::decode_error;
#[cfg(feature = "_bench")]
pub(crate) use decode::StreamOptions;
#[cfg(feature = "_bench")]
pub(crate) use decode::read_stream;
pub(crate) use decode::{Completion, Fragment};
#[cfg(feature = "mcp")]
pub(crate) use error::DecodeError;
pub(crate) use probe::looks_like_ollama;
pub(crate) use request::{Request, ToolSpecs, is_sendable};
pub(crate) use retry::RetryNotice;
// The MCP client reads its Streamable HTTP replies with the same SSE reader.
#[cfg(feature = "mcp")]
pub(crate) use sse::{Flow, read_sse};
pub(crate) use transport::check_http_url;
pub use transport::{ChatTransport, HttpConfig};
