//! Tool-calling LLM agents for ordinary, non-async Rust programs.
//!
//! `pikuri` runs a blocking agent loop on std threads against any
//! OpenAI-compatible chat-completions server (llama.cpp, Ollama, vLLM, LM
//! Studio, OpenRouter, OpenAI), Anthropic's Messages API or OpenAI's
//! Responses API ([`Api`]): it sends the conversation, streams the answer,
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
//!   `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL`, or
//!   `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY` and `ANTHROPIC_MODEL`
//!   (`PIKURI_API` picks the API when both are set).
//! - Build an [`Agent`] with its [`Configurator`]: system prompt, [`Tool`]s,
//!   [`Listener`]s (a closure: [`Configurator::on_event`]), controls
//!   ([`StepLimit`], [`Cancellable`], [`Interloper`]),
//!   [`Extension`](extension::Extension)s such as
//!   [`SubAgents`](subagent::SubAgents) and [`mcp::Registry`] (the tools of
//!   MCP servers, over stdio or Streamable HTTP).
//! - Call [`Agent::run_loop`] once per user turn. Everything the agent does is
//!   narrated as [`Event`]s to the listeners, each on its own thread.
//! - For conversations longer than the context window, set a
//!   [`Compaction`](compaction::Compaction) ([`Configurator::compaction`]);
//!   for a server that may go down, a fallback list
//!   ([`Configurator::add_fallback`]).
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
//! Every item has exactly one path. The core types are at the crate root:
//! the agent and its turn ([`Agent`], [`Configurator`], [`Outcome`],
//! [`History`], [`close_all`], [`register_close`]), the endpoint ([`ChatTransport`],
//! [`Api`], [`HttpConfig`]), the conversation ([`Message`], [`Role`],
//! [`ToolCall`], [`Usage`], [`Image`], [`ImageSource`], [`ProviderData`]), events and listeners ([`Event`], [`StopReason`],
//! [`Listener`]), tools ([`Tool`], [`ToolContext`], [`ToolError`]), the
//! controls ([`Cancellable`], [`Interloper`], [`StepLimit`],
//! [`OnExhausted`]) and [`Error`]/[`Result`]. What is secondary sits in a
//! namespace named for it:
//!
//! | namespace | what |
//! |---|---|
//! | [`tool`] | helpers for writing tools: [`FnTool`](tool::FnTool), [`TypedTool`](tool::TypedTool), [`Parameters`](tool::Parameters), [`schema_type!`](tool::schema_type), [`TrifectaPolicy`](tool::TrifectaPolicy) |
//! | [`approval`] | hosts that review tool calls: [`Approver`](approval::Approver), [`Decision`](approval::Decision), the built-in approvers |
//! | [`guard`] | guardrails on what goes in, comes out and runs: [`Guards`](guard::Guards), the ready-made [`Redactor`](guard::Redactor), [`Shape`](guard::Shape), [`Judge`](guard::Judge) |
//! | [`journal`] | runs that survive a crash: [`JournalStore`](journal::JournalStore), [`FileStore`](journal::FileStore) |
//! | [`compaction`] | fitting the context window: [`Compaction`](compaction::Compaction), [`ToolResultLimit`](compaction::ToolResultLimit) |
//! | [`structured`] | typed answers: [`StructuredOutput`](structured::StructuredOutput) |
//! | [`subagent`] | child agents: [`SubAgents`](subagent::SubAgents), [`Persona`](subagent::Persona), [`Synthesizer`](subagent::Synthesizer) |
//! | [`extension`] | [`Extension`](extension::Extension), [`ExtensionContext`](extension::ExtensionContext) |
//! | [`listeners`] | ready-made listeners, [`ListenerList`](listeners::ListenerList), the sanitizer |
//! | [`builtin`] | the built-in tools (calculator, clock, files, web) |
//! | [`skill`] | Agent Skills read on demand: [`Catalog`](skill::Catalog), the [`Skills`](skill::Skills) extension |
//! | [`tool_search`] | deferred tools found on demand: [`ToolSearch`](tool_search::ToolSearch), [`Threshold`](tool_search::Threshold), the search [`Index`](tool_search::Index) |
//! | [`otel`] | OpenTelemetry export over OTLP/HTTP: [`OtlpExporter`](otel::OtlpExporter), [`OtlpConfig`](otel::OtlpConfig) |
//! | [`mcp`] | Model Context Protocol servers (2026-07-28 and 2025): their tools, resources, prompts, and questions to the user |
//! | [`testing`] | the scripted server, record and replay |
//! | [`evals`] | datasets, evaluators, runs, reports and baselines |
//! | [`guide`] | documentation only |
//!
//! # Controls
//!
//! Controls are signal holders the host keeps a clone of; the loop reads them
//! at fixed boundaries only. `Clone` shares the instance (an `Arc` inside), so
//! a clone handed to another thread or a signal handler acts on the same
//! control. This table is the single source of truth for when each is read:
//!
//! | Boundary | [`StepLimit`] | [`Cancellable`] | [`Interloper`] | [`Approver`](approval::Approver) |
//! |---|---|---|---|---|
//! | turn start ([`run_loop`](Agent::run_loop), [`resume`](Agent::resume)) | `reset()` | `reset()` (not in a child agent) | — | — |
//! | before each request (then compaction, when due: [`Compaction`](compaction::Compaction)) | — | `check()` | — | — |
//! | during a request (HTTP, stream) | — | `cancel()` shuts the socket down | — | — |
//! | before each tool call (after [`Event::ToolCall`]) | 1. `tick()` | 2. `check()` | — | 4. `review()`, after 3. the arguments validate |
//! | while the approver decides | — | `cancel()` ends the wait at once | — | the late decision is dropped |
//! | during a tool | — | visible through [`ToolContext`] | — | — |
//! | after each tool batch (one the budget or a cancel stopped too, before the synthesizer) | — | — | `drain()` | — |
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
//! A [`Budget`] is no signal but a configuration; its count is reset at the
//! turn start (not in a child, which counts into its parent's run), checked
//! before each request (after compaction), added to after each response,
//! and checked before each tool call between `tick()` and `check()`; see
//! [`Budget`](Budget#when-it-is-checked).
//!
//! # Errors
//!
//! One error type, [`Error`], for what aborts a run: HTTP statuses (with the
//! server's own message), connections that could not be made or broke,
//! timeouts, protocol violations, truncated streams, cancellation and an
//! exhausted step budget. Branch on [`Error::kind`], a stable
//! [`ErrorKind`] (`Connect`, `Timeout`, `Auth`, `RateLimit`,
//! `ModelNotFound`, `ImageUnsupported`, `ContextOverflow`, `Server`, `Protocol`, `Cancelled`,
//! `InvalidInput`...; the table on [`Error`] says when each occurs and
//! whether trying again helps). An error about a server names the URL it
//! was talking to, with user info and query values redacted, and its
//! `Debug` reads as a sentence, so `fn main() -> pikuri::Result<()>` prints
//! `Error: cannot connect to http://127.0.0.1:8080/v1/chat/completions:
//! connection refused (os error 111)`.
//!
//! A tool's failure is never an `Error`: it goes back to the model as an
//! `"Error: ..."` observation. After any error the history is valid and the
//! same agent can take the next turn. A request the server rejected because
//! the conversation does not fit the window is of kind
//! [`ErrorKind::ContextOverflow`]; with a [`Compaction`](compaction::Compaction) set, the
//! agent compacts and retries it once by itself first. [`Agent::retry_turn`]
//! retries a failed turn without sending the question twice (what the history holds after
//! each error is tabled on [`Agent::run_loop`]). A [`History`] is valid by
//! construction, so a loaded conversation cannot break later turns.
//!
//! # Features
//!
//! All on by default. `default-features = false` is the core alone: the
//! agent loop, OpenAI chat completions, tool schemas and typed tools,
//! controls, events, the [`Listener`] trait and its delivery, history,
//! compaction, structured output, sub-agents and the
//! [`Approver`](approval::Approver) seam, over plain HTTP. Each feature
//! adds one piece of the periphery and no direct dependency (`rustls` and
//! `web` turn on features of ureq):
//!
//! - `anthropic`: Anthropic's Messages API ([`Api::AnthropicMessages`]).
//! - `responses`: OpenAI's Responses API ([`Api::OpenAiResponses`]).
//! - `gemini`: Google's Gemini API, `generateContent` ([`Api::Gemini`]).
//!   [`Api`] has every variant in every build (a history or journal
//!   written by a full build names them, and a lean build loads it); a
//!   request on an API whose feature is off fails at once, before anything
//!   is sent, with [`Error::InvalidInput`] (kind
//!   [`ErrorKind::InvalidInput`]) naming the feature.
//! - `journal`: [`journal`], the crash-safe run journal, with
//!   [`Configurator::journal`] and [`Configurator::resume`],
//!   [`Agent::resume_run`] and [`Agent::interrupted`]. Without it no
//!   journal is written; the `ErrorKind::Journal*` kinds (and
//!   [`ErrorKind::RunLocked`]) stay in every build, so [`ErrorKind`] has one
//!   shape, and never occur.
//! - `rustls`: HTTPS through ureq's rustls. Without it the crate speaks
//!   plain HTTP only, enough for local servers, with a smaller binary that
//!   needs no C toolchain (so it links statically for musl as is). With
//!   it, a musl build compiles ring's C code: install a musl C compiler
//!   (`musl-tools` on Debian and Ubuntu, which provides `musl-gcc`).
//! - `mcp`: [`mcp`], Model Context Protocol servers (stdio and Streamable
//!   HTTP, with an OAuth 2.1 login for remote servers that ask): tools,
//!   resources, prompts, input requests (`mcp::TerminalInput` also needs
//!   `terminal`).
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
//! - `terminal`: [`listeners::Terminal`] and [`TerminalApprover`](approval::TerminalApprover).
//! - `testing`: [`testing`], the scripted server and record/replay. The
//!   crate's own unit tests compile it whatever the features.
//! - `otel`: [`otel`], the [`OtlpExporter`](otel::OtlpExporter) listener:
//!   each run as OpenTelemetry GenAI spans (and metrics) over OTLP/HTTP
//!   JSON, configured in code or from the `OTEL_*` variables.
//! - `tool-search`: [`tool_search`], deferred tools
//!   ([`Configurator::add_deferred_tool`], MCP servers'
//!   [`mcp::Server::with_deferred`]) held back above a threshold and found
//!   by a search: a local `search_tools` tool, or the API's own search.
//! - `evals` (turns on `testing`): [`evals`], datasets, evaluators,
//!   repeated runs, reports and baselines, offline from cassettes.
//! - `guard`: guardrails, [`guard`]'s [`Guards`](guard::Guards), point
//!   traits and verdicts, [`Redactor`](guard::Redactor),
//!   [`Shape`](guard::Shape) and [`Judge`](guard::Judge), with
//!   [`Configurator::guards`]. Without it the loop asks no guard and
//!   [`guard`] holds only [`Point`](guard::Point) and
//!   [`Action`](guard::Action): [`Event::Guard`], [`Error::Guardrail`] and
//!   [`StopReason::Guardrail`] stay in every build, as [`Api`]'s variants
//!   do, and never occur (but in a run resumed from a journal a guard
//!   ended).
//! - `budgets`: spending limits, [`Budget`] with
//!   [`Configurator::budget`], [`budget::Price`] and
//!   [`budget::PriceTable`], and [`Outcome::spend`]. Without it nothing
//!   counts a run's spend beyond [`Outcome::usage`] and
//!   [`Outcome::requests`]; [`Spend`], [`budget::Cost`] and
//!   [`budget::Limit`] stay, the values [`Event::BudgetExceeded`],
//!   [`Event::Spent`] and [`Error::BudgetExceeded`] carry, which such a
//!   build never emits.
//! - `hub`: each [`Listener`] on its own thread, fed over a bounded
//!   channel (see its docs). Without it listeners are called on the
//!   thread that emits, as each event is emitted (order, contained
//!   panics, `flush` and `close` kept; a slow listener slows the agent),
//!   and a program that adds no listener links no channel.
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
//! - `warn`: an on-close handler panicked; a JSON-lines write failed; an
//!   OTLP export failed (the first of a streak), its queue overflowed, or
//!   its close timed out (never with a header value).
//! - `info`: a transport without API base falls back to OpenAI's.
//! - `debug`: each request (method, URL, status, time), retries, probes.
//! - target `pikuri::mcp`: MCP servers' stderr (`debug`), skipped lines and
//!   restarts (`warn`), their log messages at their own level; see
//!   [`mcp`](mcp#log-levels).
//! - `trace`: request bodies (the conversation).
//!
//! # Scope
//!
//! In scope: the OpenAI chat-completions wire format, Anthropic's
//! Messages API ([`Api::AnthropicMessages`]: thinking blocks, prompt-cache
//! breakpoints) and OpenAI's Responses API ([`Api::OpenAiResponses`]: input
//! items, reasoning items carried across tool rounds without server-side
//! storage, structured output as `text.format`) and Google's Gemini API
//! ([`Api::Gemini`]: thought signatures, thinking settings, safety
//! finishes), each streamed and not, tool
//! calling, reasoning fields (`reasoning_content`, `reasoning`, `<think>`),
//! sub-agents, history persistence, context-window detection for llama.cpp,
//! Ollama and vLLM, images in user messages and tool results, a crash-safe
//! run journal, OpenTelemetry export, and MCP servers (client side: stdio
//! and Streamable HTTP, protocols 2025-03-26 to 2026-07-28: tools,
//! resources, prompts, input requests, OAuth 2.1; no sampling or roots).
//!
//! Out of scope: async runtimes, other wire formats (Gemini's own API),
//! the Responses API's built-in tools and server-side state
//! (`previous_response_id`), embeddings, and audio.
//!
//! # Mapping from pikuri (Ruby)
//!
//! The crate is a port of the agent core of the Ruby toolkit
//! [pikuri](https://codeberg.org/mvysny/pikuri) and keeps its type names in Rust idiom
//! (`tick!` → `tick()`, `cancelled?` → `is_cancelled()`, `to_s` → `Display`).
//!
//! | pikuri | pikuri (Rust) |
//! |---|---|
//! | `Agent.new(transport:, ...) { \|c\| ... }` | [`Agent::builder`] → [`Configurator`] → [`Configurator::build`] |
//! | `run_loop(user_message:, transport:)` | [`Agent::run_loop`], [`Agent::run_loop_with`] |
//! | `last_assistant_content`, `clear_conversation`, `export_history`, `close` | [`Agent::last_assistant_content`], [`Agent::clear_conversation`], [`Agent::export_history`], [`Agent::close`] |
//! | `tick!`, `reset!`, `cancel!`, `cancelled?`, `check!` | `tick()`, `reset()`, `cancel()`, `is_cancelled()`, `check()` |
//! | `inject_user_message`, `pending?`, `drain!` | [`Interloper::inject_user_message`], `is_pending()`, `drain()` |
//! | `StepLimit::Exceeded`, `Cancellable::Cancelled` | [`Error::StepLimitExceeded`], [`Error::Cancelled`] |
//! | `Event::*` (`Data` classes) | [`Event`] variants, each with an `agent` id |
//! | domain events, `Transient` | [`Event::Domain`] with `transient` |
//! | `Listener::Base#on_event`, `for_sub_agent(id:)` | [`Listener::on_event`], [`Listener::for_sub_agent`] → [`SubAgentListener`](subagent::SubAgentListener) |
//! | `SubAgent::Extension` | [`SubAgents`](subagent::SubAgents) |
//! | `Skill::Catalog`, `Skill::Extension.new(catalog:, root:)` (pikuri-skills) | [`skill::Catalog`] ([`Catalog::discover`](skill::Catalog::discover) takes the folders; pikuri searches `.pikuri/skills`, `.claude/skills`, ... itself), [`skill::Skills`] (the extension: `<available_skills>` and the `skill` tool) |
//! | `Mcp::Registry`, `Mcp::Servers`, `Mcp::Extension` | [`mcp::Registry`] (declares, connects and is the extension), [`mcp::Server`], [`mcp::Client`] |
//! | `load_history!`, `History.parse`, `#to_json` | [`Agent::load_history`] (returns `Result`), [`History::parse`], [`History::to_json`] |
//! | `Finalizers.register(agent)` (in `Agent.new`), `Finalizers.register { ... }`, `unregister`, `run!` | agents register at build; [`register_close`], [`CloseRegistration::unregister`], [`close_all`] (called from the host's exit path and signal handlers) |
//! | `Tool::Confirmer`, `AUTO_APPROVE`, `TERMINAL` (pikuri-workspace) | [`Approver`](approval::Approver) (on the agent, inherited by sub-agents, not per tool instance), [`AutoApprove`](approval::AutoApprove), [`TerminalApprover`](approval::TerminalApprover); `confirm(description) → Bool` becomes [`Approver::review`](approval::Approver::review) → [`Decision`](approval::Decision) |
//! | `Synthesizer` (a module of constants) | [`Synthesizer`](subagent::Synthesizer), a value set with [`Configurator::synthesizer`] |
//! | `ContextWindowDetector.detect(transport)` | [`ChatTransport::detect_context_window`] |
//! | `SubAgent::RESEARCHER`, `FILE_MINER` | [`Persona::researcher`](subagent::Persona::researcher), [`Persona::file_miner`](subagent::Persona::file_miner) (the file miner has `read_file` and `list_dir`; pikuri's grep and glob tools are not ported) |
//! | `Tool::FETCH`, `WEB_SCRAPE`, `Tool::WebSearch.build` | [`builtin::fetch`], [`builtin::web_scrape`], [`builtin::WebSearch`] over a [`builtin::SearchProvider`] ([`builtin::SearXng`]; pikuri's Brave/DuckDuckGo/Exa cascade is not ported) |
//! | `Trifecta`, `Tool::TrifectaLegs` | [`Tool::reaches_network`], [`Tool::reads_private_data`], checked at build under [`TrifectaPolicy`](tool::TrifectaPolicy) |
//! | `Agent::Extension`, `ExtensionContext` | [`extension::Extension`], [`extension::ExtensionContext`] |
//! | `ctx.agent.model`, `.transport`, `.tools`, `.cancellable`, ... (an extension reading its agent) | readers on [`ExtensionContext`](extension::ExtensionContext) itself: `model()`, `transport()`, `tools()`, `cancellable()`, `step_limit()`, `interloper()`, `system_prompt()`... |
//! | `Agent::ListenerList`, `Listener::Terminal`, `TokenLog`, `InMemoryEventList`, `RateLimited` | [`listeners::ListenerList`], [`listeners::Terminal`], [`listeners::TokenLog`], [`listeners::InMemoryEventList`], [`listeners::RateLimited`] |
//! | `Sanitizer.sanitize` | [`listeners::sanitize`], [`listeners::sanitize_report`] |
//! | `Tool::Parameters`, `Tool::ExecuteContext` | [`tool::Parameters`] (with [`tool::FnTool`], [`tool::TypedTool`]), [`ToolContext`]; the `Tool` trait stays at the root |
//! | `SubAgent::Persona`, `Agent::Synthesizer` | [`subagent::Persona`], [`subagent::Synthesizer`] |
//! | `configure(c)` on an extension (may add tools) | [`Extension::configure`](extension::Extension::configure) validates only; tools and close handlers are added in [`Extension::bind`](extension::Extension::bind) |
//! | model parameters passed through to the provider (`temperature:`, `max_tokens:`, ...) | typed [`ModelSettings`] on [`ChatTransport::with_settings`] and [`Configurator::settings`], mapped to each [`Api`]'s own fields ([guide](guide#model-settings)); [`Configurator::request_field`] for a raw field of that API's own body |
//! | `Event::Assistant` (content) | [`Event::Assistant`] with `content` and `finish` ([`FinishReason`]) |
//!
//! ## Deliberate differences
//!
//! Each with its reason; the pikuri behaviour is the one its documentation
//! describes.
//!
//! - **Building.** The [`Configurator`] is a by-value builder (it can be
//!   stored and passed around, and `build` consumes it, so it cannot build
//!   twice); a configurator dropped unbuilt runs the close handlers armed so
//!   far; a budget of zero steps is a programmer error that panics
//!   ([`StepLimit::try_new`] for values read at run time). An extension's
//!   failed `bind` fails the build with its own error and kind.
//! - **Skills.** pikuri-skills' `Catalog` searches `.pikuri/skills`,
//!   `.claude/skills` and more on its own; [`skill::Catalog::discover`]
//!   reads only the folders the host names (a library does not read
//!   folders nobody asked it to). A skill that does not load is left out and
//!   listed with its reason ([`skill::Catalog::rejected`]) rather than
//!   failing the others, and the `skill` tool reads only inside the skill's
//!   folder, bounded, and never runs a skill's scripts.
//! - **Listener delivery.** pikuri calls every listener on the run thread,
//!   inside the callback that emits (a streamed chunk inside the read of the
//!   stream), so a slow listener slows the loop and every chunk is one
//!   event. Here each listener runs on a thread of its own, fed events in
//!   order through a bounded queue, and the agent hands them over at the
//!   points where it waits (see [`Listener`]): a slow terminal or socket
//!   does not stall the stream or the tools, and memory stays bounded.
//!   Neighbouring deltas may therefore reach a listener joined, with the
//!   same text. What pikuri's synchronous calls guarantee is kept: order,
//!   and, for a [`Delivery::Barrier`](listeners::Delivery) listener (the
//!   default), a `run_loop` that returns only after it handled every event
//!   of the turn. A listener that returns
//!   [`Delivery::HandOff`](listeners::Delivery) (a counter, a log file, a
//!   trace exporter) is handed the events and not waited for;
//!   [`Agent::flush_listeners`] waits until it has caught up. A run's
//!   opening (the `UserTurn` and what extensions emit before the first
//!   request) reaches the listeners with that request's response, not
//!   before it. Without the `hub` feature the delivery is pikuri's own: each
//!   listener is called on the thread that emits, as each event is emitted
//!   (a panic still contained).
//! - **Tool results are capped.** A result over a quarter of the context
//!   window (or 100,000 characters when the window is unknown) is cut, with
//!   a note saying so ([`ToolResultLimit`](compaction::ToolResultLimit));
//!   pikuri sends results whole. One oversized result (a large page, a log)
//!   would otherwise make every later request exceed the window.
//!   [`ToolResultLimit::off`](compaction::ToolResultLimit::off) restores
//!   pikuri's behaviour.
//! - **The [`Interloper`] is also drained when the model answers without a
//!   tool call**, and the turn goes on with one more round when anything
//!   was pending. pikuri drains only after tool results, so input typed
//!   while the model wrote its final answer waited for some later turn's
//!   tool batch, or was never delivered.
//! - **The synthesizer's answer is appended** to the history as an
//!   assistant message; pikuri keeps it only for `last_assistant_content`.
//!   The next turn's model then sees the answer the user saw (a follow-up
//!   question refers to it). An empty answer is no answer: nothing is
//!   appended and the answer is `None`.
//! - **[`Agent::last_assistant_content`] reads the latest turn only**;
//!   pikuri's walks the whole history. After a turn that failed before the
//!   model answered it is `None`, not an earlier turn's answer that a
//!   caller (a sub-agent's parent) would take for this turn's.
//! - **A closed agent refuses to run** ([`Error::InvalidInput`]); pikuri's
//!   `close` only runs the close handlers (and leaves `Finalizers`). Here `close` also stops the
//!   listener threads, and the handlers released what the tools use (an
//!   MCP server's process), so a later turn would run unheard and broken.
//! - **One [`Event::Cancelled`] per agent whose run a cancel ended**: the
//!   agent whose `run_loop` returns [`Error::Cancelled`], and each sub-agent
//!   it stopped on the way (as pikuri). A cancel during synthesis is
//!   announced by the parent only: pikuri's comes from the nested
//!   synthesizer agent instead, because its rescue of `Cancelled` does not
//!   cover the synthesizer running inside the step-limit rescue; here the
//!   parent's turn is what ends and returns the error. The compactor, a
//!   helper child too, is silent the same way.
//! - **The lethal trifecta is a build check**, not pikuri's report
//!   (`Trifecta::Report`, `trifecta_contribution`): under
//!   [`TrifectaPolicy::Refuse`](tool::TrifectaPolicy::Refuse) a parent
//!   holding both legs fails the build, and so does a persona of
//!   [`SubAgents`](subagent::SubAgents) naming both; each child is checked
//!   again when spawned, since a pool can change at run time.
//! - **[`ExtensionContext`](extension::ExtensionContext) has readers, not an
//!   `agent`**: the `Agent` is mutably borrowed by the turn that runs the
//!   hooks, so the context reads the shared state it needs (the other
//!   extensions are not reachable).
//! - **Histories and sub-agents.** A [`History`] is valid by construction
//!   (its one allowed gap is the trailing batch of a turn awaiting
//!   approval). Sub-agents also inherit the parent's loop options and
//!   request fields, because every child agent is built by one constructor.
//!
//! - **A cut answer is no completed run.** pikuri reports a run whose
//!   final answer the token limit (or a filter, or the server) cut short as
//!   completed; here it ends with [`StopReason::Incomplete`] and
//!   [`Outcome::finish`] says which ([`FinishReason`]), so a truncated
//!   answer is never taken for a whole one. The answer is still returned
//!   and kept in the history.
//! - **A resumed run re-announces its cut-off turn**
//!   ([`Event::Resumed`], then the stored turn as events): pikuri has no
//!   journal, and a listener here may belong to a process that saw none of
//!   the turn.
//! - **The model defaults to the server's `/models`** when the transport
//!   names none; pikuri uses a configured default name. A local server
//!   (llama.cpp, Ollama) serves the one model it loaded, under a name the
//!   host rarely knows; a hosted API needs a named model anyway.
//! - **`fetch` converts HTML to Markdown unless `raw`, and its cache is off
//!   by default**; pikuri returns the page and caches it. Markdown costs a
//!   fraction of the HTML's tokens, and a cache on by default would serve
//!   stale pages to a long-running host that never asked for one.
//! - **A call the budget or a cancel stops gets a `ToolResult` event** (its
//!   "not run" or "cancelled" observation) when its `ToolCall` was
//!   announced; pikuri emits none, and a listener would show the call as
//!   running for ever.
//! - **A child agent never resets the shared [`Cancellable`]** at its
//!   start, where pikuri's nested agents reset it like any run: a reset
//!   would swallow a cancel given while the parent spawned the child.
//! - **Not ported, each for its reason:** the `Subprocess` chokepoint and
//!   `cleanup!` (processes are started only by MCP's stdio transport, which
//!   restarts and kills its own; tools that run commands are the host's);
//!   the per-tool sharing classification (a persona names its tools and
//!   each child gets its own instances from the one child constructor);
//!   `for_sub_agent` on [`Interloper`] and [`Cancellable`] (a child shares
//!   the parent's token, which is what pikuri's returns, and has no
//!   interloper, which is what pikuri's `nil` means); `Mcp::Verifier` (the
//!   host's approver screens calls to the servers it configured);
//!   `assume_model_exists` (no pre-check: a missing model fails the first
//!   request with the server's own error).
//! - **Wire formats other than chat completions, and the run journal, are
//!   Cargo features** (`anthropic`, `responses`, `journal`, on by default):
//!   pikuri loads everything; a small static tool here pays only for the
//!   format it speaks.
//! - **Wire formats are named, not inferred.** pikuri reaches each provider
//!   through ruby_llm, which picks the provider's native API from the
//!   provider; here a [`ChatTransport`] names its [`Api`] (chat completions
//!   unless set, or from `PIKURI_API` / the `ANTHROPIC_*` variables in
//!   [`ChatTransport::from_env`]), so the same model id on a compatible
//!   endpoint is never sent a format it does not speak. What only one
//!   provider can read (thinking signatures, encrypted reasoning items,
//!   Gemini's thought signatures) is kept as [`ProviderData`] and sent back
//!   only to the API, endpoint and model that issued it.
//! - **A history holds its images inline.** An [`Image`] is kept base64 in
//!   the one JSON document ([`History::to_json`], format version 2;
//!   version 1 files still load), where pikuri's `History#save(dir)` writes
//!   a directory with `attachments/`.
//!
//! ## Not ported
//!
//! - `History#save(dir)` / `History.load(dir)` (a directory with
//!   `attachments/`): a history is one JSON document,
//!   [`History::to_json`] and [`History::parse`], images included (see
//!   above).
//! - Per-tool hooks inside a child agent (`Tool#for_sub_agent`,
//!   `with_workspace`) and `Persona#needs_temp_workspace`: they serve
//!   pikuri-workspace's `Workspace` seam, which is not ported (the file
//!   tools take their root when built: [`builtin::read_file`]). A child
//!   gets the parent's tool instances as they are; a tool that keeps state
//!   per agent keys it by [`ToolContext::agent_id`] (`"researcher 0"`).
//! - `Mcp::Synthesizer` (a model writes the description of a server that
//!   has none): it costs a model request per server at every build, before
//!   the first turn. The `<available_mcps>` line is the host's
//!   [`mcp::Server::with_description`], else the server's title and first line
//!   of its instructions.
//! - The `Extractor` registry behind `web_scrape` (pikuri-pdf,
//!   pikuri-extractors): [`builtin::web_scrape`] reads HTML, JSON and text
//!   itself and refuses binary content; converting PDF or office documents
//!   needs parsers or external processes beyond the crate's six
//!   dependencies. A host wraps its converter as a [`Tool`].
//! - pikuri-tasks, -memory, -vectordb, -code and the CLIs other
//!   than the chat example: toolkits on top of the core, built on the same
//!   [`Extension`](extension::Extension) protocol.
//!
//! Additions over pikuri: call ids and tool names on `ToolCall`/`ToolResult`,
//! [`Event::Retrying`], [`Event::RequestFailed`] (a failed model request, after its retries or cut by a cancel), [`Event::Stopped`] with a [`StopReason`] and the
//! run's [`Usage`], cancellation that interrupts requests in flight,
//! deferred approval ([`Decision::Defer`](approval::Decision::Defer),
//! [`Agent::resume`]), [`Agent::retry_turn`], per-turn token totals
//! ([`Outcome::usage`], [`Agent::total_usage`]), a pull-style event stream
//! ([`listeners::ChannelListener`]), compaction and fallback transports
//! ([`Configurator::compaction`], [`Configurator::add_fallback`]), typed
//! answers ([`Agent::run_typed`]), tool names checked against what every
//! provider accepts ([`Tool::name`]; MCP tools renamed by the rule under
//! [`mcp`](mcp#names)), tool-call arguments a strict server would reject
//! kept as `{}` in the history once answered ([`ToolCall::arguments`]),
//! a stable [`ErrorKind`] on every [`Error`] to branch on, three wire
//! formats ([`Api`]: OpenAI chat completions, Anthropic Messages with
//! prompt-cache breakpoints, OpenAI Responses with reasoning items carried
//! across tool rounds), runs that survive a crash ([`journal`]:
//! [`Configurator::resume`], [`Agent::resume_run`]), OpenTelemetry spans
//! and metrics over OTLP ([`otel`]), in [`mcp`], the 2026-07-28
//! protocol, resources, prompts, input requests and OAuth 2.1 (pikuri-mcp
//! uses servers' tools only), a fourth wire format, Google Gemini's own
//! `generateContent` ([`Api::Gemini`]; pikuri reaches Gemini only through
//! its OpenAI-compatible endpoint) with explicit context caches
//! ([`ContextCache`]), guardrails at four points ([`guard`], feature
//! `guard`; [`Guards::hold_deltas`](guard::Guards::hold_deltas) holds a
//! streamed answer until the output guards passed it), budgets in
//! tokens, requests, time and money ([`Budget`], feature `budgets`,
//! per run and over the agent's lifetime with [`Budget::lifetime`];
//! [`Spend`] on [`Outcome::spend`]), deferred tools found on demand
//! ([`tool_search`]: a local BM25 search tool, or the API's own search on
//! Anthropic Messages and OpenAI Responses; MCP servers' tools deferred
//! with [`mcp::Server::with_deferred`]), and an evals kit ([`evals`]:
//! datasets, evaluators, reports and baselines, modelled on
//! pydantic-evals).
//!
//! # MSRV
//!
//! Rust 1.89 (edition 2024, let-chains, `File::try_lock` for the run
//! journal's lock). Raising it is a minor release.

#![forbid(unsafe_code)]

// Private modules; the public API is the flat `pub use` block below plus the
// namespaces declared after it, which hold what is secondary.
mod agent;
mod codec;
mod control;
mod error;
mod event;
mod image;
mod listener;
mod media_type;
mod message;
mod net;
mod protocol;
mod sanitize;
mod serde_macros;
mod spend;
mod util;
#[cfg(feature = "web")]
mod web;

// Namespaces that are real modules: every public item in them has this one
// path (the root types of `tool` sit in crate-private submodules). The
// periphery is gated, one Cargo feature each (see "Features" above):
// `builtin` holds the web tools too, so it exists with either feature;
// `listeners` always exists (`ListenerList` and the sanitizer are core),
// and the ready-made listeners in it each need their feature.
pub mod approval;
#[cfg(any(feature = "builtin", feature = "web"))]
pub mod builtin;
#[cfg(feature = "guard")]
pub mod guard;
// Without the feature, only the values events name (`Point`, `Action`) and
// no-op stand-ins of the crate-private seam (`Guarding`).
#[cfg(not(feature = "guard"))]
#[path = "guard_off.rs"]
pub mod guard;
pub mod guide;
#[cfg(feature = "journal")]
pub mod journal;
#[cfg(feature = "skills")]
pub mod skill;
#[cfg(feature = "tool-search")]
pub mod tool_search;
// Without the feature, the agent's boundaries call a no-op stand-in of the
// same crate-private seam (`Record`, `Journal`).
#[cfg(feature = "evals")]
pub mod evals;
#[cfg(not(feature = "journal"))]
#[path = "journal_off.rs"]
mod journal;
pub mod listeners;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "otel")]
pub mod otel;
// The crate's own unit tests run against the scripted server whatever the
// features, so `cargo test --lib --no-default-features` tests the core too.
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tool;

#[cfg(test)]
mod test_util;

// What the expansions of `tool::schema_type!` and the serde macros it
// calls name in the user's crate, so that crate needs neither serde nor
// serde_json by name: not part of the API, no semver promise.
#[doc(hidden)]
pub mod __private {
    pub use crate::serde_macros::{Keys, key, missing, too_short, unit_variant};
    pub use serde;
    pub use serde_json::{Map, Value, json};
}

// Unstable hooks for `benches/` only, behind the internal `_bench` feature:
// not part of the API, no semver promise.
#[cfg(feature = "_bench")]
#[doc(hidden)]
pub mod __bench;

#[cfg(feature = "budgets")]
pub use crate::agent::Budget;
pub use crate::agent::{
    Agent, CloseRegistration, Configurator, History, Outcome, close_all, register_close,
};
pub use crate::control::{Cancellable, Interloper, OnExhausted, StepLimit};
pub use crate::error::{Error, ErrorKind, Result};
pub use crate::event::{Event, StopReason};
pub use crate::listener::Listener;
pub use crate::message::{
    Api, FinishReason, Image, ImageSource, Message, ProviderData, Role, ToolCall, Usage,
};
#[cfg(feature = "gemini")]
pub use crate::protocol::{CachedContent, ContextCache};
pub use crate::protocol::{ChatTransport, HttpConfig, ModelSettings, ReasoningEffort, ToolChoice};
pub use crate::spend::Spend;
pub use crate::tool::base::{Tool, ToolError};
pub use crate::tool::context::ToolContext;

// Namespaces that only re-export: the types live in the private `agent`
// module (and `event`, `listener`), and are named here once.

pub mod budget {
    //! Spending limits: a [`Budget`](crate::Budget) on requests, tokens,
    //! tool calls, wall time and money, the [`PriceTable`] its cost comes
    //! from, and the values a budget stop reports.
    //!
    //! The rules are documented on [`Budget`](crate::Budget); what a run
    //! spent is its [`Spend`](crate::Spend) ([`Outcome::spend`](crate::Outcome::spend)).

    #[cfg(feature = "budgets")]
    pub use crate::agent::{Price, PriceTable};
    pub use crate::spend::{Cost, Limit};
}

pub mod compaction {
    //! Keeping a conversation inside the context window: [`Compaction`]
    //! summarizes or drops older turns, [`ToolResultLimit`] cuts one oversized
    //! tool result.
    //!
    //! Both are set on the [`Configurator`](crate::Configurator); the rules
    //! are documented on [`Compaction`], and each compaction is narrated as
    //! an [`Event::Compacted`](crate::Event::Compacted).

    pub use crate::agent::{Compaction, ToolResultLimit};
    pub use crate::event::CompactionStrategy;
}

pub mod extension {
    //! Extensions: the [`Extension`] trait (pikuri's extension protocol) and
    //! the [`ExtensionContext`] an extension binds through.
    //!
    //! [`SubAgents`](crate::subagent::SubAgents) and
    //! [`Registry`](crate::mcp::Registry) are extensions; add one with
    //! [`Configurator::add_extension`](crate::Configurator::add_extension).

    pub use crate::agent::{Extension, ExtensionContext};
}

pub mod structured {
    //! Structured output: a turn whose answer is a value of a Rust type
    //! ([`StructuredOutput`], [`StructuredMode`], and the [`Typed`] answer).

    pub use crate::agent::{StructuredMode, StructuredOutput, Typed};
}

pub mod subagent {
    //! Child agents: delegation to [`Persona`]s through the [`SubAgents`]
    //! extension, the [`Synthesizer`] that answers when the step budget runs
    //! out, and [`SubAgentListener`], what a listener gives a child agent.
    //!
    //! What a delegated child inherits from its parent is listed on
    //! [`SubAgents`].

    pub use crate::agent::{Persona, SubAgents, Synthesizer};
    pub use crate::listener::SubAgentListener;
}

// The old root paths of the namespaced items are gone (one path per item):
// each of these must fail to compile. Doctests only, never rendered.
#[cfg(doctest)]
mod one_path {
    /// ```compile_fail
    /// use pikuri::Parameters;
    /// ```
    ///
    /// ```compile_fail
    /// use pikuri::Approver;
    /// ```
    ///
    /// ```compile_fail
    /// use pikuri::Compaction;
    /// ```
    ///
    /// ```compile_fail
    /// use pikuri::StructuredOutput;
    /// ```
    ///
    /// ```compile_fail
    /// use pikuri::Persona;
    /// ```
    ///
    /// ```compile_fail
    /// use pikuri::Extension;
    /// ```
    ///
    /// ```compile_fail
    /// use pikuri::ListenerList;
    /// ```
    ///
    /// ```compile_fail
    /// pikuri::schema_type! { struct P { x: i64 } }
    /// ```
    ///
    /// ```compile_fail
    /// use pikuri::tool::Tool;
    /// ```
    struct OldRootPaths;
}

// Hooks for `fuzz/` only: cargo-fuzz builds with `--cfg fuzzing`.
#[cfg(fuzzing)]
#[doc(hidden)]
pub use crate::protocol::fuzz::{
    __fuzz_accumulate, __fuzz_anthropic, __fuzz_responses, __fuzz_sse,
};
