//! Tool-calling LLM agents for ordinary, non-async Rust programs.
//!
//! `pikuri` runs a blocking agent loop on std threads against any
//! OpenAI-compatible chat-completions server (llama.cpp, Ollama, vLLM, LM
//! Studio, OpenRouter, OpenAI): it sends the conversation, streams the answer,
//! runs the tools the model asks for, feeds the results back, and repeats
//! until the model answers. It is a port of the agent core of the Ruby
//! toolkit [pikuri](https://codeberg.org/mvysny/pikuri), whose names it keeps.
//!
//! ```
//! use pikuri::{Agent, StepLimit, OnExhausted};
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::tool::builtin;
//!
//! // A scripted model; point `ChatTransport` at a real server instead.
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("calculator", serde_json::json!({"expression": "2^10"})));
//! server.push(Reply::text("2^10 = 1024"));
//!
//! let mut agent = Agent::builder(server.transport())
//!     .system_prompt("You are a helpful assistant.")
//!     .step_limit(StepLimit::with_policy(10, OnExhausted::Synthesize)?)
//!     .add_tool(builtin::calculator())
//!     .streaming(true)
//!     .build()?;
//! let outcome = agent.run_loop("What is 2 to the 10th?")?;
//! assert_eq!(outcome.answer.as_deref(), Some("2^10 = 1024"));
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # Usage
//!
//! - Describe the endpoint with a [`ChatTransport`] (model, API base, key,
//!   optional context window); [`ChatTransport::from_env`] reads
//!   `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL`.
//! - Build an [`Agent`] with its [`Configurator`]: system prompt, [`Tool`]s,
//!   [`Listener`]s, controls ([`StepLimit`], [`Cancellable`], [`Interloper`]),
//!   [`Extension`]s such as [`SubAgents`].
//! - Call [`Agent::run_loop`] once per user turn. Everything the agent does is
//!   narrated as [`Event`]s to the listeners, each on its own thread.
//! - Test with [`testing::FakeServer`]: no model, no network, deterministic.
//!   Turn a real session into a regression test with [`testing::Recorder`]
//!   and a [`testing::Cassette`] (see [record and replay](testing#record-and-replay)).
//!
//! The [`agent`](Agent) docs draw the loop; [`control`] tables which control
//! is read at which boundary; [`listener`] explains threads and ordering;
//! [`tool`] how failures become observations.
//!
//! # Errors
//!
//! One error type, [`Error`], for what aborts a run: HTTP statuses (with the
//! server's own message), transport failures, timeouts, protocol violations,
//! truncated streams, cancellation and an exhausted step budget. A tool's
//! failure is never an `Error`: it goes back to the model as an
//! `"Error: ..."` observation. After any error the history is valid and the
//! same agent can take the next turn.
//!
//! # Features
//!
//! - `rustls` (default): HTTPS through ureq's rustls. Without it
//!   (`default-features = false`) the crate speaks plain HTTP only, enough for
//!   local servers, with a smaller binary.
//! - `testing`: accepted for compatibility; [`testing`] is always compiled.
//!
//! # Log levels
//!
//! Through the `log` facade. pikuri never logs the API key, and ureq's own
//! request and response lines redact it; but at `trace`, ureq-proto (target
//! `ureq_proto`) hex-dumps the raw bytes of every request, the
//! `Authorization` header included. Where logs are kept, cap that target
//! below `trace` (e.g. `RUST_LOG=trace,ureq_proto=debug`).
//! - `error`: a listener or tool panicked.
//! - `warn`: an on-close handler panicked; a JSON-lines write failed.
//! - `info`: a transport without API base falls back to OpenAI's.
//! - `debug`: each request (method, URL, status, time), retries, probes.
//! - `trace`: request bodies (the conversation).
//!
//! # Scope
//!
//! In scope: the OpenAI chat-completions wire format (streamed and not), tool
//! calling, reasoning fields (`reasoning_content`, `reasoning`, `<think>`),
//! sub-agents, history persistence, context-window detection for llama.cpp,
//! Ollama and vLLM.
//!
//! Out of scope: async runtimes, other wire formats (Anthropic messages,
//! Gemini, the Responses API), embeddings, images and audio.
//!
//! # Glossary (pikuri → Rust)
//!
//! | pikuri | pikuri (Rust) |
//! |---|---|
//! | `Agent.new(transport:, ...) { \|c\| ... }` | [`Agent::builder`] → [`Configurator`] → [`Configurator::build`] |
//! | `run_loop(user_message:, transport:)` | [`Agent::run_loop`], [`Agent::run_loop_with`] |
//! | `tick!`, `reset!`, `cancel!`, `cancelled?`, `check!` | `tick()`, `reset()`, `cancel()`, `is_cancelled()`, `check()` |
//! | `inject_user_message`, `pending?`, `drain!` | [`Interloper::inject_user_message`], `is_pending()`, `drain()` |
//! | `StepLimit::Exceeded`, `Cancellable::Cancelled` | [`Error::StepLimitExceeded`], [`Error::Cancelled`] |
//! | `Event::*` (`Data` classes) | [`Event`] variants, each with an `agent` id |
//! | domain events, `Transient` | [`Event::Domain`] with `transient` |
//! | `Listener::Base#on_event` | [`Listener::on_event`] |
//! | `SubAgent::Extension` | [`SubAgents`] |
//! | `load_history!` | [`Agent::load_history`] |
//!
//! Additions over pikuri: call ids and tool names on `ToolCall`/`ToolResult`,
//! [`Event::Retrying`], [`Event::Stopped`] with a [`StopReason`], cancellation
//! that interrupts requests in flight.
//!
//! # MSRV
//!
//! Rust 1.88 (edition 2024, let-chains). Raising it is a minor release.

#![forbid(unsafe_code)]

pub mod agent;
pub mod control;
mod error;
pub mod event;
pub mod listener;
mod message;
mod provider;
mod sse;
mod stream;
pub mod subagent;
#[cfg(test)]
mod test_util;
pub mod testing;
pub mod tool;
mod util;
pub mod web;

// Unstable hooks for `benches/` only: not part of the API, no semver promise.
#[doc(hidden)]
pub mod __bench;

pub use crate::agent::{
    Agent, Configurator, Extension, ExtensionContext, History, Outcome, Synthesizer,
};
pub use crate::control::{Cancellable, Interloper, OnExhausted, StepLimit};
pub use crate::error::{Error, Result};
pub use crate::event::{Event, StopReason};
pub use crate::listener::{InMemoryEventList, Listener, ListenerList, SubAgentListener};
pub use crate::message::{Message, Role, ToolCall, Usage};
pub use crate::provider::{ChatTransport, ContextWindowDetector, HttpConfig};
pub use crate::subagent::{Persona, SubAgents};
pub use crate::tool::{Tool, ToolContext, ToolError};

#[doc(hidden)]
pub use crate::stream::{__fuzz_accumulate, __fuzz_sse};
