//! Tool-calling LLM agents for ordinary, non-async Rust programs.
//!
//! `pikuri` runs a blocking agent loop on std threads against any
//! OpenAI-compatible chat-completions server (llama.cpp, Ollama, vLLM, LM
//! Studio, OpenRouter, OpenAI): it sends the conversation, streams the answer,
//! runs the tools the model asks for, feeds the results back, and repeats
//! until the model answers. Listeners see every step as an [`Event`] on
//! their own threads; other threads cancel or steer a running turn. No async
//! runtime, and six small dependencies.
//!
//! ```
//! use pikuri::{Agent, StepLimit, OnExhausted};
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::builtin;
//!
//! // A scripted model; point `ChatTransport` at a real server instead.
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("calculator", serde_json::json!({"expression": "2^10"})));
//! server.push(Reply::text("2^10 = 1024"));
//!
//! let mut agent = Agent::builder(server.transport())
//!     .system_prompt("You are a helpful assistant.")
//!     .step_limit(StepLimit::with_policy(10, OnExhausted::Synthesize))
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
//! The [`guide`] walks through the common tasks, each with a tested
//! example: getting started, writing tools, streaming to a UI thread,
//! Ctrl+C, steering, persisting sessions, testing, local servers. In short:
//!
//! - Describe the endpoint with a [`ChatTransport`] (model, API base, key,
//!   optional context window); [`ChatTransport::from_env`] reads
//!   `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL`.
//! - Build an [`Agent`] with its [`Configurator`]: system prompt, [`Tool`]s,
//!   [`Listener`]s (a closure: [`Configurator::on_event`]), controls ([`StepLimit`], [`Cancellable`], [`Interloper`]),
//!   [`Extension`]s such as [`SubAgents`] and [`mcp::Registry`] (the tools
//!   of MCP servers, over stdio or Streamable HTTP).
//! - Call [`Agent::run_loop`] once per user turn. Everything the agent does is
//!   narrated as [`Event`]s to the listeners, each on its own thread.
//! - For conversations longer than the context window, set a
//!   [`Compaction`] ([`Configurator::compaction`]); for a server that may
//!   go down, a fallback list ([`Configurator::add_fallback`]).
//! - Test with [`testing::FakeServer`]: no model, no network, deterministic.
//!   Turn a real session into a regression test with [`testing::Recorder`]
//!   and a [`testing::Cassette`] (see [record and replay](testing#record-and-replay)).
//!
//! Where the rules live: [`Agent`] draws the loop of a turn; [Controls](#controls)
//! below tables which control is read at which boundary; [`Listener`]
//! explains threads and ordering; [`Tool`] how failures become observations;
//! [`Event`] the order of events and their JSON form.
//!
//! # Public paths
//!
//! Every item has exactly one path. The core types are at the crate root;
//! four namespaces hold what is visibly secondary: [`builtin`] (the
//! built-in tools), [`listeners`] (ready-made listeners), [`mcp`] (tools of
//! Model Context Protocol servers) and [`testing`] (the scripted server and
//! record/replay).
//!
//! # Controls
//!
//! Controls are signal holders the host keeps a clone of; the loop reads them
//! at fixed boundaries only. `Clone` shares the instance (an `Arc` inside), so
//! a clone handed to another thread or a signal handler acts on the same
//! control. This table is the single source of truth for when each is read:
//!
//! | Boundary | [`StepLimit`] | [`Cancellable`] | [`Interloper`] | [`Approver`] |
//! |---|---|---|---|---|
//! | turn start ([`run_loop`](Agent::run_loop), [`resume`](Agent::resume)) | `reset()` | `reset()` (not in a child agent) | — | — |
//! | before each request (then compaction, when due: [`Compaction`]) | — | `check()` | — | — |
//! | during a request (HTTP, stream) | — | `cancel()` shuts the socket down | — | — |
//! | before each tool call (after [`Event::ToolCall`]) | 1. `tick()` | 2. `check()` | — | 4. `review()`, after 3. the arguments validate |
//! | while the approver decides | — | `cancel()` ends the wait at once | — | the late decision is dropped |
//! | during a tool | — | visible through [`ToolContext`] | — | — |
//! | after each tool batch | — | — | `drain()` | — |
//! | the model answers with no tool call | — | — | `drain()`; if anything was pending the loop goes on | — |
//! | mid-loop injection | never reset | never reset | — | — |
//!
//! Why this order: a call the budget or a cancel stops is never shown to the
//! host for approval, and the host reviews the arguments the tool will
//! really get (validated, normalized), never malformed ones, which go back
//! to the model without asking anyone. The review comes last so that an
//! approval is acted on at once.
//!
//! A sub-agent or the synthesizer gets its own `StepLimit`, shares the
//! parent's `Cancellable` (one cancel stops the tree) and `Approver`, and has
//! no `Interloper`.
//!
//! # Errors
//!
//! One error type, [`Error`], for what aborts a run: HTTP statuses (with the
//! server's own message), transport failures, timeouts, protocol violations,
//! truncated streams, cancellation and an exhausted step budget. A tool's
//! failure is never an `Error`: it goes back to the model as an
//! `"Error: ..."` observation. After any error the history is valid and the
//! same agent can take the next turn. A request the server rejected because
//! the conversation does not fit the window is an [`Error::Http`] for which
//! [`Error::is_context_overflow`] is true; with a [`Compaction`] set, the
//! agent compacts and retries it once by itself first. [`Agent::retry_turn`]
//! retries a failed turn without sending the question twice (what the history holds after
//! each error is tabled on [`Agent::run_loop`]). A [`History`] is valid by
//! construction, so a loaded conversation cannot break later turns.
//!
//! # Features
//!
//! All on by default. `default-features = false` is the core alone: the
//! agent loop, the protocol, tool schemas and typed tools, controls,
//! events, the [`Listener`] trait and its delivery, history, compaction,
//! structured output, sub-agents and the [`Approver`] seam, over plain
//! HTTP. Each feature adds one piece of the periphery and no direct
//! dependency (`rustls` and `web` turn on features of ureq):
//!
//! - `rustls`: HTTPS through ureq's rustls. Without it the crate speaks
//!   plain HTTP only, enough for local servers, with a smaller binary that
//!   needs no C toolchain (so it links statically for musl as is).
//! - `mcp`: [`mcp`], the tools of Model Context Protocol servers.
//! - `web`: the web tools in [`builtin`] ([`builtin::fetch`],
//!   [`builtin::web_scrape`], [`builtin::WebSearch`]) and
//!   [`builtin::html_to_markdown`]; turns on ureq's `charset`, so pages in
//!   any WHATWG encoding decode.
//! - `builtin`: the other built-in tools ([`builtin::calculator`],
//!   [`builtin::current_time`], [`builtin::read_file`],
//!   [`builtin::list_dir`], [`builtin::all`]).
//! - `listeners`: the ready-made listeners in [`listeners`]
//!   ([`ChannelListener`](listeners::ChannelListener),
//!   [`JsonLines`](listeners::JsonLines),
//!   [`InMemoryEventList`](listeners::InMemoryEventList),
//!   [`RateLimited`](listeners::RateLimited),
//!   [`TokenLog`](listeners::TokenLog)); the sanitizer is there with
//!   either this feature or `terminal`.
//! - `terminal`: [`listeners::Terminal`] and [`TerminalApprover`].
//! - `testing`: [`testing`], the scripted server and record/replay. The
//!   crate's own unit tests compile it whatever the features.
//!
//! Doc tests run with the default features only: the examples of core
//! items use [`testing::FakeServer`] and often a built-in tool or
//! listener. The test targets, examples and benches declare the features
//! they need.
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
//! - target `pikuri::mcp`: MCP servers' stderr (`debug`), skipped lines and
//!   restarts (`warn`), their log messages at their own level; see
//!   [`mcp`](mcp#log-levels).
//! - `trace`: request bodies (the conversation).
//!
//! # Scope
//!
//! In scope: the OpenAI chat-completions wire format (streamed and not), tool
//! calling, reasoning fields (`reasoning_content`, `reasoning`, `<think>`),
//! sub-agents, history persistence, context-window detection for llama.cpp,
//! Ollama and vLLM, and MCP servers' tools (client side: stdio and
//! Streamable HTTP; no resources, prompts, sampling or elicitation).
//!
//! Out of scope: async runtimes, other wire formats (Anthropic messages,
//! Gemini, the Responses API), embeddings, images and audio.
//!
//! # Mapping from pikuri (Ruby)
//!
//! The crate is a port of the agent core of the Ruby toolkit
//! [pikuri](https://codeberg.org/mvysny/pikuri) and keeps its type names in Rust idiom
//! (`tick!` → `tick()`, `cancelled?` → `is_cancelled()`).
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
//! | `Mcp::Registry`, `Mcp::Servers`, `Mcp::Extension` | [`mcp::Registry`] (declares, connects and is the extension), [`mcp::Server`], [`mcp::Client`] |
//! | `load_history!` | [`Agent::load_history`] (returns `Result`) |
//! | `Finalizers` (close every open agent at exit) | [`close_all`], called from the host's exit path and signal handlers |
//! | `Tool::Confirmer`, `AUTO_APPROVE`, `TERMINAL` (pikuri-workspace) | [`Approver`] (on the agent, inherited by sub-agents, not per tool instance), [`AutoApprove`], [`TerminalApprover`]; `confirm(description) → Bool` becomes [`Approver::review`] → [`Decision`] |
//! | `Synthesizer` (a module of constants) | [`Synthesizer`], a value set with [`Configurator::synthesizer`] |
//! | `ContextWindowDetector.detect(transport)` | [`ChatTransport::detect_context_window`] |
//! | `SubAgent::RESEARCHER`, `FILE_MINER` | [`Persona::researcher`], [`Persona::file_miner`] (the file miner has `read_file` and `list_dir`; pikuri's grep and glob tools are not ported) |
//! | `Tool::FETCH`, `WEB_SCRAPE`, `Tool::WebSearch.build` | [`builtin::fetch`], [`builtin::web_scrape`], [`builtin::WebSearch`] over a [`builtin::SearchProvider`] ([`builtin::SearXng`]; pikuri's Brave/DuckDuckGo/Exa cascade is not ported) |
//! | `Trifecta`, `Tool::TrifectaLegs` | [`Tool::reaches_network`], [`Tool::reads_private_data`], checked at build under [`TrifectaPolicy`] |
//! | `configure(c)` on an extension (may add tools) | [`Extension::configure`] validates only; tools and close handlers are added in [`Extension::bind`] |
//!
//! Deliberate differences: the [`Configurator`] is a by-value builder (it can
//! be stored and passed around, and `build` consumes it, so it cannot build
//! twice); a budget of zero steps is a programmer error that panics
//! ([`StepLimit::try_new`] for values read at run time); a configurator
//! dropped unbuilt runs the close handlers armed so far; a [`History`] is
//! valid by construction (its one allowed gap is the trailing batch of a
//! turn awaiting approval); sub-agents also inherit the parent's loop options
//! and request fields, because every child agent is built by one constructor;
//! a listener's queue is bounded (32 events), and a listener that is
//! behind, or takes a fast stream, gets neighbouring deltas joined, with the
//! same text ([`Listener`], "Backpressure"), where pikuri's queues grow
//! without bound and every chunk is an event.
//!
//! Additions over pikuri: call ids and tool names on `ToolCall`/`ToolResult`,
//! [`Event::Retrying`], [`Event::Stopped`] with a [`StopReason`] and the
//! run's [`Usage`], cancellation that interrupts requests in flight,
//! deferred approval ([`Decision::Defer`], [`Agent::resume`]), per-turn token
//! totals ([`Outcome::usage`], [`Agent::total_usage`]), and a pull-style
//! event stream ([`listeners::ChannelListener`]).
//!
//! # MSRV
//!
//! Rust 1.88 (edition 2024, let-chains). Raising it is a minor release.

#![forbid(unsafe_code)]

// Private modules; the public API is the flat `pub use` block below plus the
// secondary namespaces `builtin`, `listeners`, `mcp` and `testing`.
mod agent;
mod approval;
mod control;
mod error;
mod event;
mod listener;
mod media_type;
mod message;
mod protocol;
// Public through `listeners`; without that module only `Error`'s `Display`
// uses it (the plain `sanitize`), and the report half is left unused.
#[cfg_attr(
    not(any(test, feature = "listeners", feature = "terminal")),
    allow(dead_code, unreachable_pub)
)]
mod sanitize;
mod tool;
mod util;
#[cfg(feature = "web")]
mod web;

// The periphery, one Cargo feature each (see "Features" above). `builtin`
// holds the web tools too, so it exists with either feature; `listeners`
// holds the terminal listener, so it exists with `listeners` or `terminal`.
#[cfg(any(feature = "builtin", feature = "web"))]
pub mod builtin;
pub mod guide;
// (Unit tests also use its `InMemoryEventList`, whatever the features.)
#[cfg(any(test, feature = "listeners", feature = "terminal"))]
pub mod listeners;
#[cfg(feature = "mcp")]
pub mod mcp;
// The crate's own unit tests run against the scripted server whatever the
// features, so `cargo test --lib --no-default-features` tests the core too.
#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod test_util;

// Unstable hooks for `benches/` only, behind the internal `_bench` feature:
// not part of the API, no semver promise.
#[cfg(feature = "_bench")]
#[doc(hidden)]
pub mod __bench;

pub use crate::agent::{
    Agent, Compaction, CompactionStrategy, Configurator, Extension, ExtensionContext, History,
    Outcome, Persona, StructuredMode, StructuredOutput, SubAgents, Synthesizer, ToolResultLimit,
    TrifectaPolicy, Typed, close_all,
};
#[cfg(feature = "terminal")]
pub use crate::approval::TerminalApprover;
pub use crate::approval::{
    ApprovalRequest, Approver, AutoApprove, Decision, PendingApproval, StateChangingOnly,
};
pub use crate::control::{Cancellable, Interloper, OnExhausted, StepLimit};
pub use crate::error::{Error, Result};
pub use crate::event::{Event, StopReason};
pub use crate::listener::{Listener, ListenerList, SubAgentListener};
pub use crate::message::{Message, Role, ToolCall, Usage};
pub use crate::protocol::{ChatTransport, HttpConfig};
pub use crate::tool::{
    FnTool, IntoObservation, ItemType, Json, JsonSchema, Parameters, ParametersBuilder,
    SchemaError, Tool, ToolContext, ToolError, TypedTool, ValidationError,
};

// Hooks for `fuzz/` only: cargo-fuzz builds with `--cfg fuzzing`.
#[cfg(fuzzing)]
#[doc(hidden)]
pub use crate::protocol::fuzz::{__fuzz_accumulate, __fuzz_sse};
