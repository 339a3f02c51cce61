//! The guide: from a first agent to one in production, one task per chapter.
//!
//! This module holds documentation only. Every snippet is a doc test that
//! runs against [`FakeServer`](crate::testing::FakeServer), a scripted
//! OpenAI-compatible server on 127.0.0.1, and asserts what it shows; only the
//! snippets marked `no_run` in the last two chapters need a real model
//! server (or a provider's key) and are not run.
//!
//! 1. [Getting started](#getting-started)
//! 2. [Writing tools](#writing-tools)
//! 3. [Streaming to your own UI thread](#streaming-to-your-own-ui-thread)
//! 4. [Cancel from Ctrl+C](#cancel-from-ctrlc)
//! 5. [Steering a running turn](#steering-a-running-turn)
//! 6. [Persisting sessions](#persisting-sessions)
//!    - [Surviving a crash](#surviving-a-crash)
//! 7. [Testing your agent](#testing-your-agent)
//!    - [Evals](#evals)
//! 8. [Asking before a tool runs](#asking-before-a-tool-runs)
//! 9. [Tools from MCP servers](#tools-from-mcp-servers)
//! 10. [Many tools and skills](#many-tools-and-skills)
//! 11. [Conversations longer than the window](#conversations-longer-than-the-window)
//! 12. [Seeing a run in a tracing backend](#seeing-a-run-in-a-tracing-backend)
//! 13. [Running against llama.cpp or Ollama](#running-against-llamacpp-or-ollama)
//! 14. [One agent, three APIs](#one-agent-three-apis)
//!    - [Gemini](#gemini)
//! 15. [Model settings](#model-settings)
//! 16. [Context caching (Gemini)](#context-caching-gemini)
//! 17. [Guardrails and budgets](#guardrails-and-budgets)
//!
//! The chat example (`cargo run --example chat`) puts these chapters
//! together in a terminal program; `scripts/chat-local.sh` runs it against a
//! real local model.
//!
//! # Getting started
//!
//! An agent is a transport (where the model is), a system prompt, tools and
//! listeners. [`Agent::run_loop`](crate::Agent::run_loop) takes one user
//! message, and loops (request, tool calls, request…) until the model
//! answers without calling a tool:
//!
//! ```
//! use pikuri::{Agent, StopReason, builtin};
//! use pikuri::testing::{FakeServer, Reply};
//! use serde_json::json;
//!
//! // The model: here scripted. Later, `ChatTransport::new("qwen3").with_api_base(..)`.
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("calculator", json!({"expression": "17*23"})));
//! server.push(Reply::text("17*23 = 391"));
//!
//! let mut agent = Agent::builder(server.transport())
//!     .system_prompt("You are a helpful assistant.")
//!     .add_tool(builtin::calculator())
//!     .on_event(|e| println!("{e:?}")) // every step, as events
//!     .build()?;
//! let outcome = agent.run_loop("What is 17*23?")?;
//! assert_eq!(outcome.answer.as_deref(), Some("17*23 = 391"));
//! assert_eq!(outcome.steps, 1); // one tool call
//! assert_eq!(outcome.stop_reason, StopReason::Completed);
//! // The conversation goes on: the next `run_loop` sees this turn.
//! assert_eq!(agent.messages().len(), 4); // question, call, result, answer
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! Errors that abort a turn are an [`Error`](crate::Error); after one, the
//! same agent takes the next turn. A budget keeps a confused model from
//! looping: [`StepLimit`](crate::StepLimit) with
//! [`OnExhausted::Synthesize`](crate::OnExhausted::Synthesize) answers from
//! what was found so far when it runs out. An answer the model did not
//! finish (cut by the token limit, withheld by a filter) is no error and no
//! [`Completed`](crate::StopReason::Completed) run either: the run ends
//! with [`StopReason::Incomplete`](crate::StopReason::Incomplete),
//! [`Outcome::finish`](crate::Outcome::finish) says how the answer ended,
//! and the next turn (`"continue"`) can ask for the rest.
//!
//! # Writing tools
//!
//! A tool is a name, a description the model reads, a JSON schema for the
//! arguments, and a function. [`FnTool`](crate::tool::FnTool) with
//! [`Parameters`](crate::tool::Parameters) covers most of them. The arguments are
//! validated against the schema before the function runs. A failure is an
//! observation for the model, not an error of the run: return a
//! [`ToolError`](crate::ToolError) and the model reads `Error: ...`, so it
//! can correct itself.
//!
//! ```
//! use pikuri::{Agent, ToolError};
//! use pikuri::tool::{FnTool, Parameters};
//! use pikuri::testing::{FakeServer, Reply};
//! use serde_json::json;
//!
//! let weather = FnTool::new(
//!     "get_weather",
//!     "The current weather in a city.",
//!     Parameters::builder()
//!         .required_string("city", "The city, e.g. `Oslo`.")
//!         .optional_enum("unit", "Temperature unit.", &["celsius", "fahrenheit"])
//!         .build(),
//!     |args, _cx| match args["city"].as_str() {
//!         Some("Oslo") => Ok("4 °C, light rain".to_string()),
//!         Some(other) => Err(ToolError::new(format!("no station in {other}"))),
//!         None => unreachable!("validated: `city` is a required string"),
//!     },
//! );
//!
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("get_weather", json!({"city": "Atlantis"})));
//! server.push(Reply::tool_call("get_weather", json!({"city": "Oslo"})));
//! server.push(Reply::text("Oslo: 4 °C and light rain."));
//! let mut agent = Agent::builder(server.transport()).add_tool(weather).build()?;
//! agent.run_loop("Weather in Atlantis? Or else Oslo.")?;
//!
//! let sent = server.chat_requests();
//! assert_eq!(sent[0].tool_names(), ["get_weather"]);
//! let first_result = &sent[1].messages()[2];
//! assert_eq!(first_result["content"], "Error: no station in Atlantis");
//! assert_eq!(sent[2].messages()[4]["content"], "4 °C, light rain");
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! A tool that keeps state or needs its own type implements
//! [`Tool`](crate::Tool) (four methods) instead. Long-running tools should
//! check [`ToolContext::is_cancelled`](crate::ToolContext::is_cancelled).
//! The ready-made tools are in [`builtin`](crate::builtin).
//!
//! ## Typed tools
//!
//! Declare the arguments once, as a Rust type, with
//! [`schema_type!`](crate::tool::schema_type): the struct, its serde impls
//! and its JSON Schema come from one declaration, doc comments become the
//! descriptions the model reads, and the schema meets OpenAI's strict mode.
//! A [`TypedTool`](crate::tool::TypedTool)'s handler receives the deserialized
//! value; arguments that do not fit go back to the model as one `Error:`
//! observation listing every problem, and the handler never sees them.
//!
//! The macro writes the serde impls itself (as serde's derive would), so
//! the crate that uses it needs only `pikuri`: no `serde`, no
//! `serde_json`, no proc macro to build. (The example below names
//! `serde_json` for the scripted model's arguments; a program that
//! builds JSON itself depends on it for that.)
//!
//! It takes structs with named fields and enums of unit variants (sent as
//! strings); a raw identifier (`r#type`) is the field `type`, as in serde.
//! An enum whose variants carry data does not compile (the error says
//! what to use instead); the [table](crate::tool::schema_type#what-it-takes)
//! lists what is supported.
//!
//! ```
//! use pikuri::{Agent, ToolContext, ToolError};
//! use pikuri::tool::TypedTool;
//! use pikuri::testing::{FakeServer, Reply};
//!
//! pikuri::tool::schema_type! {
//!     /// A line of an order.
//!     struct Line {
//!         /// The article number.
//!         sku: String,
//!         quantity: u32,
//!     }
//! }
//! pikuri::tool::schema_type! {
//!     /// An order to price.
//!     struct Order {
//!         lines: Vec<Line>,
//!         /// A discount code, if the customer has one.
//!         code: Option<String>,
//!     }
//! }
//!
//! let price = TypedTool::new("price", "Prices an order.", |o: Order, _cx: &ToolContext| {
//!     if o.lines.is_empty() {
//!         return Err(ToolError::new("an order needs at least one line"));
//!     }
//!     let units: u32 = o.lines.iter().map(|l| l.quantity).sum();
//!     Ok(format!("{units} units: {} EUR", units * 5))
//! });
//!
//! let server = FakeServer::start();
//! // First the model gets a quantity wrong; then it corrects itself.
//! server.push(Reply::tool_call("price", serde_json::json!({"lines": [{"sku": "A1", "quantity": "two"}]})));
//! server.push(Reply::tool_call("price", serde_json::json!({"lines": [{"sku": "A1", "quantity": 2}], "code": null})));
//! server.push(Reply::text("That is 10 EUR."));
//! let mut agent = Agent::builder(server.transport()).add_tool(price).build()?;
//! agent.run_loop("Price two of A1.")?;
//!
//! let reqs = server.chat_requests();
//! let first = reqs[1].messages().last().unwrap()["content"].as_str().unwrap().to_string();
//! assert!(first.starts_with("Error:") && first.contains("quantity"), "{first}");
//! assert_eq!(reqs[2].messages().last().unwrap()["content"], "2 units: 10 EUR");
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! A schema you already have (an MCP server's, an OpenAPI document's) goes in
//! as is through [`Parameters::from_json_schema`](crate::tool::Parameters::from_json_schema).
//!
//! ## Typed answers
//!
//! [`Agent::run_typed`](crate::Agent::run_typed) makes the final answer of a
//! turn a `T`: the schema goes to the server as `response_format` (llama.cpp
//! turns it into a grammar, so even a small model answers with a valid
//! object), an answer that does not fit goes back to the model with every
//! problem listed, and when the repairs run out the turn ends in
//! [`Error::InvalidAnswer`](crate::Error::InvalidAnswer) carrying the raw
//! answer.
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::testing::{FakeServer, Reply};
//!
//! pikuri::tool::schema_type! {
//!     /// A city and its country.
//!     struct Capital {
//!         city: String,
//!         country: String,
//!     }
//! }
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("It is Paris.")); // prose: repaired
//! server.push(Reply::text(r#"{"city": "Paris", "country": "France"}"#));
//! let mut agent = Agent::builder(server.transport()).build()?;
//! let typed = agent.run_typed::<Capital>("What is the capital of France?")?;
//! assert_eq!(typed.value.city, "Paris");
//! assert_eq!(typed.repairs, 1);
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # Streaming to your own UI thread
//!
//! Listeners run on their own threads, so a listener that only forwards
//! events to a channel lets any thread (a GUI's, a web handler's) show the
//! answer as it streams. The agent runs on a worker thread; the UI thread
//! owns the receiver. [`Event::Stopped`](crate::Event::Stopped) is the last
//! event of every turn.
//!
//! ```
//! use std::sync::mpsc;
//! use std::thread;
//! use pikuri::{Agent, Event};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("Streams arrive in pieces."));
//!
//! let (tx, rx) = mpsc::channel::<Event>();
//! let mut agent = Agent::builder(server.transport())
//!     .streaming(true)
//!     .on_event(move |e| {
//!         let _ = tx.send(e.clone()); // the UI may be gone: ignore
//!     })
//!     .build()?;
//! let worker = thread::spawn(move || agent.run_loop("Say something."));
//!
//! // The UI thread.
//! let mut shown = String::new();
//! for event in rx.iter() {
//!     match event {
//!         Event::AssistantDelta { content, .. } => shown.push_str(&content),
//!         Event::Stopped { .. } => break,
//!         _ => {}
//!     }
//! }
//! assert_eq!(shown, "Streams arrive in pieces.");
//! assert!(worker.join().unwrap().is_ok());
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! Deltas are small (a token or a few). A UI that redraws per event can wrap
//! its listener in [`RateLimited`](crate::listeners::RateLimited), which
//! coalesces them. Sub-agents' events arrive too, tagged with
//! [`Event::agent`](crate::Event::agent) (empty for the main agent).
//!
//! # Cancel from Ctrl+C
//!
//! A [`Cancellable`](crate::Cancellable) is a shared flag: every clone acts
//! on the same one, from any thread or a signal handler. `cancel()` is read
//! before each request and each tool call, and it shuts down a request in
//! flight, so even a model that is still thinking stops at once. The turn
//! ends with [`Error::Cancelled`](crate::Error::Cancelled); the history stays
//! valid and the next turn starts uncancelled.
//!
//! With the `ctrlc` crate, Ctrl+C cancels the running turn instead of
//! killing the program:
//!
//! ```
//! use std::thread;
//! use std::time::Duration;
//! use pikuri::{Agent, Cancellable};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::hang()); // a model that never answers
//! server.push(Reply::text("Back again."));
//!
//! let cancel = Cancellable::new();
//! let on_signal = cancel.clone();
//! ctrlc::set_handler(move || on_signal.cancel()).expect("a Ctrl+C handler");
//!
//! let mut agent = Agent::builder(server.transport())
//!     .cancellable(cancel.clone())
//!     .build()?;
//! // Here another thread plays the user pressing Ctrl+C.
//! let user = cancel.clone();
//! thread::spawn(move || {
//!     thread::sleep(Duration::from_millis(100));
//!     user.cancel();
//! });
//! let err = agent.run_loop("Think hard.").unwrap_err();
//! assert!(err.is_cancelled());
//!
//! // The agent is still usable.
//! let outcome = agent.run_loop("Are you there?")?;
//! assert_eq!(outcome.answer.as_deref(), Some("Back again."));
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! The [controls table](crate#controls) lists where each control is read.
//!
//! # Steering a running turn
//!
//! An [`Interloper`](crate::Interloper) carries what the user types while the
//! agent works. The loop takes the queued messages after each tool batch,
//! and before it would stop, so the model sees them at its next step (an
//! [`Event::UserTurn`](crate::Event::UserTurn) with `mid_loop: true` says
//! when).
//!
//! ```
//! use std::thread;
//! use std::time::{Duration, Instant};
//! use pikuri::{Agent, Interloper, builtin};
//! use pikuri::testing::{FakeServer, Reply};
//! use serde_json::json;
//!
//! let server = FakeServer::start();
//! // The first response takes a moment: time for the user to type.
//! let call = Reply::tool_call("calculator", json!({"expression": "2+2"}));
//! server.push(call.with_delay(Duration::from_millis(300)));
//! server.respond_with(|req| {
//!     let last = req.messages().last().cloned().unwrap_or_default();
//!     Reply::text(format!("Noted: {}", last["content"].as_str().unwrap_or("")))
//! });
//!
//! let interloper = Interloper::new();
//! let mut agent = Agent::builder(server.transport())
//!     .add_tool(builtin::calculator())
//!     .interloper(interloper.clone())
//!     .build()?;
//! let outcome = thread::scope(|s| {
//!     s.spawn(|| {
//!         // The user types while the first request is out.
//!         let deadline = Instant::now() + Duration::from_secs(10);
//!         while server.chat_requests().is_empty() && Instant::now() < deadline {
//!             thread::sleep(Duration::from_millis(5));
//!         }
//!         interloper.inject_user_message("and be brief").unwrap();
//!     });
//!     agent.run_loop("What is 2+2?")
//! })?;
//! assert_eq!(outcome.answer.as_deref(), Some("Noted: and be brief"));
//! let last = server.chat_requests().last().unwrap().messages();
//! let roles: Vec<&str> = last.iter().map(|m| m["role"].as_str().unwrap()).collect();
//! assert_eq!(roles, ["user", "assistant", "tool", "user"]);
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # Persisting sessions
//!
//! [`Agent::export_history`](crate::Agent::export_history) gives the
//! conversation as a [`History`](crate::History), whose JSON can go to a
//! file or a database; [`Agent::load_history`](crate::Agent::load_history)
//! puts it back, in this agent or a new one (the system prompt stays the
//! agent's own).
//!
//! ```
//! use pikuri::{Agent, History};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("Nice to meet you, Ada."));
//! server.push(Reply::text("You are Ada."));
//!
//! let mut agent = Agent::builder(server.transport()).build()?;
//! agent.run_loop("I am Ada.")?;
//! let json = agent.export_history().to_json(); // e.g. std::fs::write(path, json)
//! drop(agent);
//!
//! // Later, perhaps in another process.
//! let mut agent = Agent::builder(server.transport()).build()?;
//! agent.load_history(History::parse(&json)?)?;
//! agent.run_loop("Who am I?")?;
//! let sent = server.chat_requests()[1].messages();
//! assert_eq!(sent[0]["content"], "I am Ada.");
//! assert_eq!(sent[1]["content"], "Nice to meet you, Ada.");
//! assert_eq!(sent[2]["content"], "Who am I?");
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! ## Surviving a crash
//!
//! A saved history is as old as its last save. For runs that take minutes
//! (a research task, a batch of documents) keep a [journal](crate::journal)
//! instead: every step is stored before it takes effect, and a new process
//! finishes the run where the old one died, without asking the model again
//! for an answer it already gave, and without running a tool twice unless
//! the tool says a second run is harmless
//! ([`idempotent_calls`](crate::tool::FnTool::idempotent_calls)).
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::journal::{FileStore, JournalStore};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("Hello, Ada."));
//! let dir = std::env::temp_dir().join(format!("pikuri-guide-journal-{}", std::process::id()));
//! let store = FileStore::new(&dir)?;
//! let build = || Agent::builder(server.transport()).system_prompt("Be brief.");
//!
//! // At startup: finish what a crash cut off, then go on.
//! for run in store.unfinished()? {
//!     let mut agent = build().resume(store.clone(), run).build()?;
//!     agent.resume_run()?;
//! }
//! let mut agent = build().journal(store.clone(), "session-1").build()?;
//! agent.run_loop("I am Ada.")?;
//! drop(agent); // releases the run's lock
//!
//! // Any later process continues the conversation from the journal.
//! let agent = build().resume(store.clone(), "session-1").build()?;
//! assert_eq!(agent.messages()[1].content, "Hello, Ada.");
//! # drop(agent);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! What is guaranteed, and what is not (a tool cut off mid-call, a request
//! in flight), is listed once, in [`journal`](crate::journal#guarantees-and-their-limits).
//!
//! The chat example's `--session NAME` is this pattern as a user meets it:
//! `NAME.journal` and its lock `NAME.lock` in a folder that must exist; a
//! start after a crash finishes the cut-off turn first, its question named on
//! stderr (the same `-p` question is not asked again, a pending approval is
//! asked again); its `--help` says the rest.
//!
//! # Testing your agent
//!
//! [`testing`](crate::testing) runs whole agent loops without a model:
//!
//! - [`FakeServer`](crate::testing::FakeServer) with
//!   [`push`](crate::testing::FakeServer::push): the model's replies, in
//!   order; assert on what your agent sent with
//!   [`chat_requests`](crate::testing::FakeServer::chat_requests).
//! - [`respond_with`](crate::testing::FakeServer::respond_with): a model
//!   that answers from the request, when the conversation is not known in
//!   advance (the chat example's demo model is one).
//! - [`Recorder`](crate::testing::Recorder) and
//!   [`Cassette`](crate::testing::Cassette): record a session with a real
//!   server once, replay it in every test run (see
//!   [record and replay](crate::testing#record-and-replay)).
//!
//! A test of your own configuration, with its tools:
//!
//! ```
//! use pikuri::{Agent, Configurator, builtin};
//! use pikuri::testing::{FakeServer, Reply};
//! use serde_json::json;
//!
//! // Your application's agent, with the transport left open for tests.
//! fn my_agent(cfg: Configurator) -> pikuri::Result<Agent> {
//!     cfg.system_prompt("You do arithmetic.").add_tool(builtin::calculator()).build()
//! }
//!
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("calculator", json!({"expression": "1/0"})));
//! server.push(Reply::text("That is undefined."));
//! let mut agent = my_agent(Agent::builder(server.transport()))?;
//! let outcome = agent.run_loop("What is 1/0?")?;
//!
//! assert_eq!(outcome.answer.as_deref(), Some("That is undefined."));
//! let sent = server.chat_requests();
//! assert_eq!(sent[0].messages()[0]["content"], "You do arithmetic.");
//! let result = sent[1].messages().last().cloned().unwrap();
//! assert!(result["content"].as_str().unwrap().starts_with("Error: "));
//! server.assert_all_used();
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! ## Evals
//!
//! A test asserts one conversation; an eval tells whether a change to the
//! prompt, the model or a tool made the agent better or worse over many.
//! [`evals`](crate::evals) (feature `evals`) runs a
//! [`Dataset`](crate::evals::Dataset) of cases through your agent, judges
//! each run with checks (the answer, the tools called and their
//! arguments, limits on calls, tokens, cost and time, a
//! [`Judge`](crate::evals::Judge) model with a rubric), and compares the
//! [`Report`](crate::evals::Report) with a baseline you keep. Record the
//! model's answers once with [`Offline::record`](crate::evals::Offline::record)
//! and CI replays them ([`Offline::replay`](crate::evals::Offline::replay)):
//! no model, and the same report every time.
//!
//! ```
//! use pikuri::{Agent, builtin};
//! use pikuri::evals::{Dataset, Experiment, TaskContext};
//! use pikuri::testing::{FakeServer, Reply};
//! use serde_json::json;
//!
//! // Usually `Dataset::load("evals/arithmetic.json")`.
//! let dataset = Dataset::from_json(r#"{
//!   "name": "arithmetic",
//!   "checks": [{"type": "max_requests", "max": 3}],
//!   "cases": [
//!     {"name": "product", "input": "What is 6 times 7?", "expected": "42",
//!      "checks": [{"type": "equals"},
//!                 {"type": "arguments", "tool": "calculator", "arguments": {"expression": "6*7"}}]},
//!     {"name": "greeting", "input": "Hi!", "checks": [{"type": "max_tool_calls", "max": 0}]}
//!   ]}"#)?;
//!
//! // The model under test; `Offline::replay(path)?.transport()` in CI.
//! let server = FakeServer::start();
//! server.respond_with(|req| match req.messages().last().unwrap()["role"].as_str() {
//!     Some("tool") => Reply::text("42"),
//!     _ if req.messages().last().unwrap()["content"] == "Hi!" => Reply::text("Hello!"),
//!     _ => Reply::tool_call("calculator", json!({"expression": "6*7"})),
//! });
//! let transport = server.transport();
//! let report = Experiment::new("new prompt").repeats(3).threads(2).run(&dataset, move |cx: &mut TaskContext| {
//!     let mut agent = Agent::builder(transport.clone())
//!         .system_prompt("You do arithmetic with the calculator.")
//!         .add_tool(builtin::calculator())
//!         .add_listener(cx.listener()) // the kit sees the tool calls and usage
//!         .cancellable(cx.cancellable()) // and can stop a run that hangs
//!         .build()?;
//!     Ok::<_, pikuri::Error>(agent.run_loop(cx.input())?.answer)
//! });
//! assert_eq!(report.pass_rate(), 1.0);
//! print!("{}", report.table()); // one line per case, failures under it
//!
//! // Keep a report as the baseline (`report.save(path)`), and fail the
//! // test when a case falls behind it by more than a tolerance.
//! let baseline = pikuri::evals::Report::from_json(&report.to_json())?;
//! report.assert_no_regressions(&baseline, 0.0);
//! // For the CI's test view: JUnit XML, one <testcase> per case.
//! assert!(report.to_junit().contains(r#"<testcase name="product" classname="arithmetic""#));
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! `cargo run --example evals` runs a ten-case dataset this way against its
//! committed recording and baseline.
//!
//! # Asking before a tool runs
//!
//! An [`Approver`](crate::approval::Approver) sees every call after its arguments
//! validate and before it runs: approve, deny with a reason (the model reads
//! it), edit the arguments, or defer the decision. Tools declare whether
//! they change the user's state ([`Tool::changes_user_state`](crate::Tool::changes_user_state),
//! [`FnTool::state_changing`](crate::tool::FnTool::state_changing)), so
//! [`StateChangingOnly`](crate::approval::StateChangingOnly) asks only about those;
//! [`TerminalApprover`](crate::approval::TerminalApprover) is a y/n prompt. A closure is
//! an approver too:
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::approval::{ApprovalRequest, Decision, StateChangingOnly};
//! use pikuri::tool::{FnTool, Parameters};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let rm = FnTool::new("rm", "Deletes a file.", Parameters::builder().required_string("path", "The file.").build(),
//!     |_, _| Ok("deleted".into())).state_changing();
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("rm", serde_json::json!({"path": "/etc/passwd"})));
//! server.push(Reply::text("I was not allowed to."));
//! let mut agent = Agent::builder(server.transport())
//!     .add_tool(rm)
//!     .approver(StateChangingOnly::new(|req: &ApprovalRequest| {
//!         if req.arguments()["path"].as_str().is_some_and(|p| p.starts_with("/etc")) {
//!             Decision::deny("system files are off limits")
//!         } else {
//!             Decision::Approve
//!         }
//!     }))
//!     .build()?;
//! agent.run_loop("Delete /etc/passwd.")?;
//! let observation = &agent.messages()[2].content;
//! assert!(observation.contains("system files are off limits"), "{observation}");
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! A host that cannot block (a web handler) returns [`Decision::Defer`](crate::approval::Decision::Defer):
//! the turn ends with [`StopReason::ApprovalPending`](crate::StopReason::ApprovalPending)
//! and the pending calls; save the history, ask the person, and call
//! [`Agent::resume`](crate::Agent::resume) with the decisions, in this
//! process or another one:
//!
//! ```
//! use pikuri::{Agent, History, StopReason};
//! use pikuri::approval::{ApprovalRequest, Decision};
//! use pikuri::tool::{FnTool, Parameters};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("pay", serde_json::json!({"amount": 40})));
//! server.push(Reply::text("Paid 40 EUR."));
//! // The same agent in each request of the web application.
//! let build = || {
//!     let pay = FnTool::new("pay", "Pays an invoice.",
//!         Parameters::builder().required_integer("amount", "In EUR.").build(),
//!         |args, _| Ok(format!("paid {}", args["amount"]))).state_changing();
//!     Agent::builder(server.transport())
//!         .add_tool(pay)
//!         .approver(|_: &ApprovalRequest| Decision::Defer)
//!         .build()
//! };
//!
//! // Request 1: the turn stops before the payment; keep the history and
//! // show the person what waits.
//! let mut agent = build()?;
//! let outcome = agent.run_loop("Pay the invoice.")?;
//! assert_eq!(outcome.stop_reason, StopReason::ApprovalPending);
//! let waiting = &outcome.pending_approvals[0];
//! assert_eq!((waiting.tool.as_str(), waiting.arguments["amount"].as_i64()), ("pay", Some(40)));
//! let saved = agent.export_history().to_json();
//! let call_id = waiting.call_id.clone();
//!
//! // Request 2, after the person said yes: load the history and resume.
//! let mut agent = build()?;
//! agent.load_history(History::parse(&saved)?)?;
//! let outcome = agent.resume([(call_id, Decision::Approve)])?;
//! assert_eq!(outcome.answer.as_deref(), Some("Paid 40 EUR."));
//! assert_eq!(agent.messages()[2].content, "paid 40");
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # Tools from MCP servers
//!
//! [`mcp::Registry`](crate::mcp::Registry) connects Model Context Protocol
//! servers when the agent is built (stdio or Streamable HTTP) and offers their
//! tools as `<server>__<tool>`, with each server's schema as sent; it shuts
//! them down (their child processes too) when the agent closes. This snippet
//! needs `npx`, so it is not run here; the crate's own tests run the reference
//! servers (`scripts/mcp-servers.sh test`).
//!
//! ```no_run
//! use pikuri::{Agent, ChatTransport, mcp};
//!
//! let mut agent = Agent::builder(ChatTransport::from_env()?)
//!     .add_extension(
//!         mcp::Registry::new()
//!             .server("everything", mcp::Server::stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]))
//!             .server("time", mcp::Server::stdio("uvx", ["mcp-server-time"]).with_sub_agent_only(true)),
//!     )
//!     .build()?;
//! assert!(agent.tools().iter().any(|t| t.name() == "everything__echo"));
//! agent.run_loop("Echo 'hello'.")?;
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! ## Remote servers that ask for OAuth
//!
//! A Streamable HTTP server may answer `401` and point to its authorization
//! server. Declared with [`Server::with_oauth`](crate::mcp::Server::with_oauth), it gets
//! an OAuth 2.1 login while the request that met the `401` waits (at build,
//! the handshake): the protected resource and authorization server metadata
//! are discovered, a client is registered, the user approves in the browser
//! ([`mcp::Browser`](crate::mcp::Browser); the default prints the URL and
//! runs `xdg-open` or `open`), the redirect comes back to a listener on
//! `127.0.0.1`, and the tokens, checked for their issuer and audience, go to
//! a [`TokenStore`](crate::mcp::TokenStore). With a
//! [`FileTokenStore`](crate::mcp::FileTokenStore) (mode 0600) the next run
//! sends the kept token and refreshes it when it expires, with no browser.
//! Any failure (a metadata document from elsewhere, an answer from another
//! issuer, a token for another audience, an authorization server that
//! redirects or never answers) is an [`ErrorKind::Auth`](crate::ErrorKind::Auth)
//! error whose text starts with `OAuth:`, within
//! [`OAuth::with_login_timeout`](crate::mcp::OAuth::with_login_timeout) and
//! [`OAuth::with_request_timeout`](crate::mcp::OAuth::with_request_timeout); no token
//! ever shows in it. The chat example does this for `--mcp-url`; the
//! crate's tests log in to a server built with the official Python SDK
//! (`scripts/mcp-oauth.sh test`).
//!
//! ```
//! use std::time::Duration;
//! use pikuri::mcp::{FileTokenStore, OAuth, Server};
//!
//! let tokens = std::env::temp_dir().join("my-app").join("mcp-tokens.json");
//! let remote = Server::http("https://mcp.example.com/mcp")
//!     .with_oauth(
//!         OAuth::new()
//!             .with_client_name("my-app")
//!             .with_store(FileTokenStore::new(&tokens))
//!             .with_login_timeout(Duration::from_secs(180)),
//!     )
//!     // The login runs within the handshake's bound.
//!     .with_startup_timeout(Duration::from_secs(200));
//! let shown = format!("{remote:?}");
//! assert!(shown.contains("oauth") && shown.contains("login_timeout: 180s"));
//! // `mcp::Registry::new().server("remote", remote)` as above.
//! ```
//!
//! Servers of both protocol generations work the same way: the client
//! probes with `server/discover` (the 2026-07-28 revision: no handshake,
//! version and capabilities in each request's `_meta`) and falls back to
//! `initialize` for a 2025 server; [`mcp::Client::protocol_version`](crate::mcp::Client::protocol_version)
//! says which it found. Besides tools, a server may offer resources and
//! prompts: they are the host's, through the [`mcp::Client`](crate::mcp::Client)
//! of [`mcp::Registry::client`](crate::mcp::Registry::client)
//! (`list_resources`, `list_resource_templates`, `read_resource`,
//! `list_prompts`, `get_prompt`, whose [`text`](crate::mcp::Prompt::text)
//! is a ready next message), and to the model only if asked for
//! ([`mcp::Server::with_resource_tool`](crate::mcp::Server::with_resource_tool)).
//! A server that needs the user's answer mid-call (elicitation) is refused
//! unless the host sets an [`mcp::InputProvider`](crate::mcp::InputProvider),
//! in the style of the [`Approver`](crate::approval::Approver); the answer is
//! checked against the server's schema, and a cancel ends the wait at once.
//!
//! ```no_run
//! use pikuri::mcp::{Registry, Server, TerminalInput};
//!
//! let mcp = Registry::new()
//!     .server("docs", Server::http("http://127.0.0.1:8000/mcp").with_resource_tool(true))
//!     .input_provider(TerminalInput::stdio());
//! let agent = pikuri::Agent::builder(pikuri::ChatTransport::from_env()?)
//!     .add_extension(mcp.clone())
//!     .build()?;
//! let docs = mcp.client("docs").expect("connected");
//! for resource in docs.list_resources()? {
//!     println!("{} {}", resource.uri, resource.description.unwrap_or_default());
//! }
//! let next = docs.get_prompt("review", [("file", "src/main.rs")])?.text();
//! # let _ = (agent, next);
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # Many tools and skills
//!
//! Agent Skills are folders of instructions (a `SKILL.md` with a `name` and
//! a `description`, then the body, and any files beside it). The
//! [`Skills`](crate::skill::Skills) extension puts only the names and
//! descriptions in the system prompt (`<available_skills>`), and gives the
//! model a `skill` tool that reads a body, or a file of the skill, when a
//! task needs it. Reads stay inside the skill's folder and are bounded; a
//! skill that does not load is left out and listed with its reason.
//!
//! ```
//! use pikuri::skill::{Catalog, Skills};
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::{Agent, Role};
//!
//! let root = std::env::temp_dir().join(format!("pikuri-guide-skills-{}", std::process::id()));
//! std::fs::create_dir_all(root.join("sql-review/references"))?;
//! std::fs::write(
//!     root.join("sql-review/SKILL.md"),
//!     "---\nname: sql-review\ndescription: Reviews SQL for injection.\n---\nRead references/rules.md first.\n",
//! )?;
//! std::fs::write(root.join("sql-review/references/rules.md"), "Bind every parameter.")?;
//! std::fs::create_dir_all(root.join("broken"))?;
//! std::fs::write(root.join("broken/SKILL.md"), "no front matter")?;
//!
//! let catalog = Catalog::discover(&[&root])?;
//! assert_eq!(catalog.names(), ["sql-review"]);
//! assert!(catalog.rejected()[0].1.contains("line 1"));
//!
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("skill", serde_json::json!({"name": "sql-review"})));
//! server.push(Reply::tool_call(
//!     "skill",
//!     serde_json::json!({"name": "sql-review", "path": "references/rules.md"}),
//! ));
//! server.push(Reply::tool_call(
//!     "skill",
//!     serde_json::json!({"name": "sql-review", "path": "../../etc/passwd"}),
//! ));
//! server.push(Reply::text("Bind the parameter."));
//! let mut agent = Agent::builder(server.transport()).add_extension(Skills::new(catalog)).build()?;
//! agent.run_loop("Review: SELECT * FROM t WHERE id = '$id'")?;
//! let seen: Vec<&str> = agent
//!     .messages()
//!     .iter()
//!     .filter(|m| m.role == Role::Tool)
//!     .map(|m| m.content.as_str())
//!     .collect();
//! assert!(seen[0].contains("Read references/rules.md first."));
//! assert_eq!(seen[1], "Bind every parameter.");
//! assert!(seen[2].contains("`..` is not allowed"));
//! std::fs::remove_dir_all(&root)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A sub-agent gets a subset: [`Catalog::subset`](crate::skill::Catalog::subset)
//! names the skills, [`Catalog::tool`](crate::skill::Catalog::tool) makes
//! their tool under a name of its own for the sub-agent pool, and
//! [`Catalog::snippet`](crate::skill::Catalog::snippet) is the block for the
//! persona's system prompt.
//!
//! ## Deferred tools and tool search
//!
//! A hundred tools cost tens of thousands of tokens in every request
//! before any work begins. Add them with
//! [`add_deferred_tool`](crate::Configurator::add_deferred_tool) instead:
//! above the [`ToolSearch`](crate::tool_search::ToolSearch) threshold (30
//! tools by default, or an estimate of their schemas' tokens) they are not
//! sent; the model gets a `search_tools` tool, and what a search finds is
//! sent, and callable, from the next request on. Found tools are added
//! after the ones already sent, so the provider's prompt cache keeps the
//! request before. On Anthropic's Messages and OpenAI's Responses APIs the
//! provider's own search is used instead. The details are in
//! [`tool_search`](crate::tool_search).
//!
//! ```
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::tool::{FnTool, Parameters};
//! use pikuri::Agent;
//! use serde_json::json;
//!
//! let server = FakeServer::start();
//! server.set_prefix_cache(true);
//! server.push(Reply::tool_call("search_tools", json!({"query": "refund an order"})));
//! server.push(Reply::tool_call("refund_order", json!({"order": "A-17"})));
//! server.push(Reply::text("Refunded."));
//! let mut config = Agent::builder(server.transport());
//! for i in 0..200 {
//!     let name = format!("shop_tool_{i}");
//!     config = config.add_deferred_tool(FnTool::new(name, "A shop tool.", Parameters::empty(),
//!         |_, _| Ok(String::new())));
//! }
//! let refund = FnTool::new(
//!     "refund_order",
//!     "Refunds an order to the customer's card.",
//!     Parameters::builder().required_string("order", "The order id.").build(),
//!     |args, _| Ok(format!("refunded {}", args["order"].as_str().unwrap_or("?"))),
//! );
//! let mut agent = config.add_deferred_tool(refund).build()?;
//! agent.run_loop("Refund order A-17.")?;
//! assert_eq!(agent.found_tools(), ["refund_order"]);
//! assert_eq!(agent.messages()[4].content, "refunded A-17");
//! let sent = server.chat_requests();
//! assert_eq!(sent[0].tool_names(), ["search_tools"]);
//! assert_eq!(sent[1].tool_names(), ["search_tools", "refund_order"]);
//! assert!(sent[0].raw_body.len() < 2_000);
//! // The found tool came after the search tool: the request before stayed cached.
//! let cached = |i: usize| agent.messages()[i].usage.and_then(|u| u.cached).unwrap_or(0);
//! assert!(cached(3) > 0);
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! ## MCP tools, deferred
//!
//! A server with dozens of tools can have them all deferred:
//! [`Server::with_deferred`](crate::mcp::Server::with_deferred) for one
//! server, [`Registry::defer_tools`](crate::mcp::Registry::defer_tools) for
//! every server that does not say (MCP tools are ordinary tools unless
//! asked). They join the deferred pool, and the agent's
//! [`ToolSearch`](crate::tool_search::ToolSearch) threshold decides, at each
//! request, whether they are held back behind the search or sent as they
//! are: a small server stays visible, a big one (or many) costs one tool
//! until the model searches. When a server's list changes, a tool it still
//! lists stays where it was (deferred, and found if it was), a withdrawn
//! one leaves the pool, a new one joins it held back. This snippet needs
//! `npx`, so it is not run here; `tests/mcp/deferred.rs` runs it against
//! the reference server.
//!
//! ```no_run
//! use pikuri::tool_search::{Threshold, ToolSearch};
//! use pikuri::{Agent, ChatTransport, mcp};
//!
//! let mut agent = Agent::builder(ChatTransport::from_env()?)
//!     .tool_search(ToolSearch::new().threshold(Threshold::Count(10)))
//!     .add_extension(
//!         mcp::Registry::new()
//!             .defer_tools(true)
//!             .server("everything", mcp::Server::stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]))
//!             // A server of two tools the model should always see.
//!             .server("time", mcp::Server::stdio("uvx", ["mcp-server-time"]).with_deferred(false)),
//!     )
//!     .build()?;
//! assert!(agent.deferred_tools().iter().any(|t| t.name() == "everything__echo"));
//! assert!(agent.tools().iter().any(|t| t.name() == "time__get_current_time"));
//! // The first request carries the time tools and `search_tools`; the
//! // model searches, and `everything__echo` is sent from then on.
//! agent.run_loop("Echo 'hello'.")?;
//! println!("found: {:?}", agent.found_tools());
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! The chat example defers its `--mcp` servers' tools above
//! `--defer-above N` (30 by default; `--no-tool-search` sends them all),
//! and `/tools` lists the tools sent, the deferred ones and those found.
//!
//! # Conversations longer than the window
//!
//! Local models have windows of 4k to 32k tokens, and tool results fill them
//! fast. A [`Compaction`](crate::compaction::Compaction) summarizes (or drops) the older
//! turns before a request would pass a share of the window, always cutting
//! at a user message so no tool call is parted from its result, and recovers
//! once from a request the server rejects as too long. One oversized tool
//! result is cut with a visible marker by default
//! ([`ToolResultLimit`](crate::compaction::ToolResultLimit)); a fallback list moves a turn
//! to another server when one goes down
//! ([`Configurator::add_fallback`](crate::Configurator::add_fallback)).
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::compaction::Compaction;
//! use pikuri::listeners::InMemoryEventList;
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.set_context_size(Some(1000));
//! server.push(Reply::text("one").with_usage(300, 5));
//! server.push(Reply::text("two").with_usage(900, 5)); // now past 80% of 1000
//! server.push(Reply::text("three"));
//! let events = InMemoryEventList::new();
//! let mut agent = Agent::builder(server.transport())
//!     .compaction(Compaction::drop_oldest().with_keep_turns(1)) // or summarize()
//!     .add_listener(events.clone())
//!     .build()?;
//! agent.run_loop("hi")?;
//! agent.run_loop("hi again")?;
//! agent.run_loop("and a third time")?;
//! // The older turns were dropped before the third request.
//! assert_eq!(agent.messages()[0].content, "and a third time");
//! assert_eq!(server.chat_requests()[2].messages().len(), 1);
//! assert!(events.kinds().contains(&"compacted"));
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # Seeing a run in a tracing backend
//!
//! With the `otel` feature (on by default), an
//! [`OtlpExporter`](crate::otel::OtlpExporter) listener sends each turn to
//! an OpenTelemetry collector over OTLP/HTTP JSON: Jaeger, Grafana Tempo,
//! Langfuse, Honeycomb, Datadog, Logfire, MLflow, or an OpenTelemetry
//! Collector in front of anything else. A turn is an `invoke_agent` span,
//! with a `chat` span per model request (model, usage, finish reason,
//! time to first chunk) and an `execute_tool` span per tool call; a
//! sub-agent's spans nest under the tool call that started it. The
//! attributes follow the GenAI semantic conventions, so a backend's LLM
//! views (token totals, cost, tool calls) work as for any instrumented
//! SDK; the full list is in [`otel`](crate::otel).
//!
//! Configure it the standard way: `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (`http://localhost:4318`), `OTEL_EXPORTER_OTLP_HEADERS` (an API key),
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`; or in code with
//! [`OtlpConfig`](crate::otel::OtlpConfig). Tool arguments and results are
//! left out unless you opt in (`with_capture_content(true)`): they can hold
//! private data. To continue a trace of your own service (the web request
//! that asked the question), hand its `traceparent` to the handle; to pass
//! the turn's context on to a model server that traces, opt in with
//! [`Configurator::traceparent`](crate::Configurator::traceparent); MCP
//! tool calls then carry it too, as `_meta.traceparent`.
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::otel::{OtlpConfig, OtlpExporter};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("Paris."));
//!
//! // In production: `OtlpExporter::from_env()` (None when no endpoint is
//! // set), and with `.with_transport(&transport)` too: without it, spans
//! // carry no model (request model, provider, server) until a switch or a
//! // fallback names one.
//! let config = OtlpConfig::new("http://127.0.0.1:9") // nothing listens: export fails quietly
//!     .with_service_name("geo-bot")
//!     .with_max_retries(0);
//! let exporter = OtlpExporter::new(config).with_transport(&server.transport());
//! let otel = exporter.handle();
//! // This turn continues the trace of the request that asked for it.
//! assert!(otel.set_parent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
//!
//! let handle = otel.clone();
//! let mut agent = Agent::builder(server.transport())
//!     .add_listener(exporter)
//!     .traceparent(move || Some(handle.traceparent()))
//!     .build()?;
//! agent.run_loop("Capital of France?")?;
//! let sent = server.chat_requests()[0].header("traceparent").unwrap().to_string();
//! assert!(sent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
//!
//! // The collector being down cost the turn nothing; the loss is counted.
//! agent.close();
//! assert_eq!(otel.exported_spans(), 0);
//! assert!(otel.dropped_spans() > 0);
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! Export never slows the agent: spans are queued at the end of a turn and
//! posted by a thread of the exporter's own, with retries, timeouts and a
//! bounded queue; [`OtlpHandle`](crate::otel::OtlpHandle) counts what was
//! exported and what was dropped. `scripts/otlp-receiver.sh` installs a
//! real collector (rotel, from PyPI) that prints what it receives.
//!
//! # Running against llama.cpp or Ollama
//!
//! Any OpenAI-compatible server works; a [`ChatTransport`](crate::ChatTransport)
//! says where it is. Local servers need no key. The context window is asked
//! from the server ([`ChatTransport::detect_context_window`](crate::ChatTransport::detect_context_window));
//! [`with_context_window`](crate::ChatTransport::with_context_window) sets it.
//!
//! ```no_run
//! use std::time::Duration;
//! use pikuri::{Agent, ChatTransport, HttpConfig, builtin};
//!
//! // llama.cpp: `llama-server -m model.gguf --jinja --port 8080`
//! // (--jinja enables tool calling with the model's chat template).
//! let llama = ChatTransport::new("any").with_api_base("http://127.0.0.1:8080/v1");
//! // The model llama-server loaded (the name is what --alias says).
//! let model = llama.list_models()?.into_iter().next().expect("a model");
//! let llama = llama.with_model(model);
//!
//! // Ollama: the model must be pulled (`ollama pull qwen3`); its context
//! // window is Ollama's `num_ctx`, often smaller than the model's.
//! let ollama = ChatTransport::new("qwen3").with_api_base("http://127.0.0.1:11434/v1");
//!
//! // Or from OPENAI_BASE_URL, OPENAI_MODEL and OPENAI_API_KEY.
//! let from_env = ChatTransport::from_env()?;
//!
//! let mut agent = Agent::builder(llama)
//!     .add_tool(builtin::calculator())
//!     .streaming(true)
//!     // Small local models on a CPU can be slow to start answering.
//!     .http(HttpConfig::default().with_read_timeout(Duration::from_secs(300)))
//!     .build()?;
//! println!("{:?}", agent.run_loop("What is 2^16?")?.answer);
//! // Switch servers between turns; the conversation stays.
//! agent.run_loop_with("And 2^17?", ollama)?;
//! # let _ = from_env;
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! To try it without setting anything up, `scripts/chat-local.sh` builds
//! llama.cpp and downloads SmolLM2-135M into `~/.cache/pikuri` (once, about
//! 13 minutes on 2 cores), starts the server and runs the chat example
//! against it. A 135M model is a toy: it calls tools erratically. For real
//! use, pick a model trained for tool calling (Qwen3, Llama 3.1+, Mistral)
//! and keep `--jinja` on llama.cpp.
//!
//! # One agent, three APIs
//!
//! A transport names its wire format ([`Api`](crate::Api)): OpenAI's chat
//! completions (the default, spoken by nearly every server), Anthropic's
//! Messages API, or OpenAI's Responses API. Nothing else changes: the
//! loop, tools, events, history and the rest work the same on all three,
//! and [`run_loop_with`](crate::Agent::run_loop_with) moves a conversation
//! from one to another between turns.
//!
//! ```
//! use pikuri::{Agent, Api, ChatTransport, builtin};
//! # use pikuri::testing::{FakeServer, Reply};
//! # // One scripted server plays the three providers here: the hidden
//! # // `with_api_base` lines point each transport at it.
//! # let server = FakeServer::start();
//! # server.push(Reply::text("65536").with_reasoning("Powers of two.").with_signature("c2ln"));
//! # server.push(Reply::text("131072"));
//! # server.push(Reply::text("262144"));
//!
//! let claude = ChatTransport::new("claude-sonnet-4-5")
//!     .with_api(Api::AnthropicMessages) // https://api.anthropic.com/v1
//! #   .with_api_base(server.base_url())
//!     .with_api_key(std::env::var("ANTHROPIC_API_KEY").unwrap_or_default());
//! let gpt = ChatTransport::new("gpt-5")
//!     .with_api(Api::OpenAiResponses)
//! #   .with_api_base(server.base_url())
//!     .with_api_key(std::env::var("OPENAI_API_KEY").unwrap_or_default());
//! let gemini = ChatTransport::new("gemini-3-pro-preview") // chat completions
//!     .with_api_base("https://generativelanguage.googleapis.com/v1beta/openai")
//! #   .with_api_base(server.base_url())
//!     .with_api_key(std::env::var("GEMINI_API_KEY").unwrap_or_default());
//!
//! let mut agent = Agent::builder(claude).add_tool(builtin::calculator()).build()?;
//! agent.run_loop("What is 2^16?")?;
//! agent.run_loop_with("And 2^17?", gpt)?; // the history translates
//! let out = agent.run_loop_with("And 2^18?", gemini)?;
//! assert_eq!(out.answer.as_deref(), Some("262144"));
//! # let requests = server.chat_requests();
//! # let apis: Vec<Option<Api>> = requests.iter().map(|r| r.api()).collect();
//! # assert_eq!(apis, [Some(Api::AnthropicMessages), Some(Api::OpenAiResponses), Some(Api::ChatCompletions)]);
//! # // Each later request holds the whole conversation, without Claude's signed thinking.
//! # assert_eq!(requests[2].conversation().len(), 5); // five turns, no system prompt
//! # assert!(!requests[1].raw_body.contains("c2ln") && !requests[2].raw_body.contains("c2ln"));
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! What a provider returned for itself alone (Anthropic's thinking
//! signatures, the Responses API's encrypted reasoning, Gemini's thought
//! signatures, OpenRouter's `reasoning_details`) is kept in the history as
//! [`ProviderData`](crate::ProviderData) and sent back only to the API,
//! API base and model that issued it: a switch drops it, the text and the
//! tool calls go on. Images ([`Message::user_with_images`](crate::Message::user_with_images),
//! [`ToolContext::attach_image`](crate::ToolContext::attach_image)) go to
//! every API, each in its own encoding; a model that takes none fails the
//! turn with [`ErrorKind::ImageUnsupported`](crate::ErrorKind::ImageUnsupported).
//!
//! The same switch, run here against the scripted server over chat
//! completions (two models; a thought signature, and an image):
//!
//! ```
//! use pikuri::{Agent, Image, Message};
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::tool::{FnTool, Parameters};
//!
//! let server = FakeServer::start();
//! // The first model calls a tool and signs the call, as Gemini does.
//! server.push(Reply::raw_sse(concat!(
//!     r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","#,
//!     r#""extra_content":{"google":{"thought_signature":"c2ln"}},"#,
//!     r#""function":{"name":"look","arguments":"{}"}}]}}]}"#, "\n\n",
//!     r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#, "\n\n",
//!     "data: [DONE]\n\n",
//! )));
//! server.push(Reply::text("A red pixel."));
//! server.push(Reply::text("Yes, red."));
//! let look = FnTool::new("look", "Looks closer.", Parameters::empty(), |_, _| {
//!     Ok("It is red.".to_string())
//! });
//! let mut agent = Agent::builder(server.transport()).add_tool(look).build()?;
//!
//! let pixel = Image::from_bytes(b"GIF89a\x01\0\x01\0\0\0\0;")?;
//! agent.run_loop_message(Message::user_with_images("What is this?", vec![pixel]))?;
//! // The same model gets its signature back with the call.
//! let sent = server.chat_requests()[1].messages();
//! assert_eq!(sent[1]["tool_calls"][0]["extra_content"]["google"]["thought_signature"], "c2ln");
//!
//! // Another model (with a real provider, another API too).
//! let other = server.transport().with_model("another-model");
//! agent.run_loop_with("Are you sure?", other)?;
//! let sent = server.chat_requests()[2].messages();
//! assert_eq!(sent[0]["content"][1]["type"], "image_url"); // the image goes on
//! assert_eq!(sent[1]["tool_calls"][0]["id"], "c1"); // so does the call
//! assert!(sent[1]["tool_calls"][0].get("extra_content").is_none()); // not the signature
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! The chat example speaks all four: `--api chat|anthropic|responses|gemini`
//! (or `PIKURI_API`), `/api` to switch mid-conversation, `--image` and
//! `/image` to attach a picture.
//!
//! # Gemini
//!
//! Google's own API ([`Api::Gemini`](crate::Api::Gemini), feature
//! `gemini`, on by default) is a fourth wire format: `generateContent`,
//! and `streamGenerateContent?alt=sse` when streaming, at
//! `https://generativelanguage.googleapis.com/v1beta` unless an API base
//! is set, the key in `x-goog-api-key`.
//! [`ChatTransport::from_env`](crate::ChatTransport::from_env) picks it
//! from `GEMINI_API_KEY` (or `GOOGLE_API_KEY`, `GOOGLE_GEMINI_BASE_URL`,
//! `GEMINI_MODEL`, `PIKURI_API=gemini`). Over it come what Gemini's
//! OpenAI-compatible endpoint leaves out: thinking settings
//! (`thinkingConfig`), thought signatures on every part (sent back to the
//! model that wrote them, and to no other), a response schema together
//! with tools, cached and thought tokens, and why an answer was withheld
//! (`SAFETY`, `RECITATION`, a blocked prompt: [`FinishReason::Filtered`](crate::FinishReason::Filtered)).
//! A 429 or 503 is retried after the `retryDelay` Google puts in the error
//! body. Tool schemas and response schemas go as JSON Schema
//! (`parametersJsonSchema`, `responseJsonSchema`), as given.
//!
//! ```
//! use pikuri::{Agent, Api, ChatTransport, FinishReason, ModelSettings, ReasoningEffort, builtin};
//! use pikuri::testing::{FakeServer, Reply};
//! use serde_json::json;
//!
//! let server = FakeServer::start();
//! server.push(
//!     Reply::tool_call("calculator", json!({"expression": "2^16"}))
//!         .with_reasoning("A power of two.")
//!         .with_signature("c2ln"),
//! );
//! server.push(Reply::text("65536").with_usage(900, 12).with_cached_tokens(800));
//! let gemini = ChatTransport::new("gemini-2.5-flash")
//!     .with_api(Api::Gemini)
//! #   .with_api_base(server.base_url())
//!     .with_api_key(std::env::var("GEMINI_API_KEY").unwrap_or_default());
//! let mut agent = Agent::builder(gemini)
//!     .add_tool(builtin::calculator())
//!     .settings(ModelSettings::new().with_reasoning_effort(ReasoningEffort::Low))
//!     .streaming(true)
//!     .build()?;
//! let out = agent.run_loop("What is 2^16?")?;
//! assert_eq!(out.answer.as_deref(), Some("65536"));
//! assert_eq!((out.finish, out.usage.cached), (FinishReason::Complete, Some(800)));
//!
//! let sent = server.chat_requests();
//! assert!(sent[0].path.ends_with("/models/gemini-2.5-flash:streamGenerateContent?alt=sse"));
//! let body = sent[0].body.clone().unwrap();
//! assert_eq!(
//!     body["generationConfig"]["thinkingConfig"],
//!     json!({"thinkingLevel": "low", "includeThoughts": true})
//! );
//! // The call goes back to the same model with its thought signature.
//! let second = sent[1].body.clone().unwrap();
//! assert_eq!(second["contents"][1]["parts"][0]["thoughtSignature"], "c2ln");
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! Most Gemini models give a function call no id: pikuri names such a call
//! `gemini_call_<n>` in the history and answers it by name, in order (a
//! call's id goes back only when the server gave one). Calls written by
//! another model or API go to Gemini without their ids and, on the first
//! call of a turn, with the `skip_thought_signature_validator` signature
//! Google documents for them. Explicit context caching has [its own
//! chapter](#context-caching-gemini). Not supported yet: the Files API,
//! server tools (code execution, Search grounding), more than one candidate.
//!
//! # Model settings
//!
//! Temperature, the token bound, stop sequences, the tool choice and
//! reasoning are typed: a [`ModelSettings`](crate::ModelSettings) on the
//! transport ([`ChatTransport::with_settings`](crate::ChatTransport::with_settings))
//! and on the agent ([`Configurator::settings`](crate::Configurator::settings)),
//! the agent's winning field by field. Each API's encoder writes each
//! setting as its own field; unset, the field is left out and the server's
//! default applies.
//!
//! | setting | chat completions | Anthropic Messages | OpenAI Responses | Gemini (`generationConfig.`) |
//! |---|---|---|---|---|
//! | `temperature` | `temperature` | `temperature` (0 to 1) | `temperature` | `temperature` |
//! | `top_p` | `top_p` | `top_p` | `top_p` | `topP` |
//! | `max_output_tokens` | `max_tokens`; `max_completion_tokens` on `api.openai.com` | `max_tokens` | `max_output_tokens` | `maxOutputTokens` |
//! | `stop` | `stop` | `stop_sequences` | error | `stopSequences` |
//! | `seed` | `seed` | error | error | `seed` |
//! | `tool_choice` | `"auto"`, `"none"`, `"required"`, `{"type":"function","function":{"name"}}` | `{"type": "auto"/"none"/"any"/"tool", "name"?}` | `"auto"`, `"none"`, `"required"`, `{"type":"function","name"}` | top-level `toolConfig.functionCallingConfig`: `AUTO`, `NONE`, `ANY`, `ANY` with `allowedFunctionNames` |
//! | `parallel_tool_calls` | `parallel_tool_calls` | `false`: `tool_choice.disable_parallel_tool_use: true` | `parallel_tool_calls` | `false`: error |
//! | `reasoning_effort` | `reasoning_effort` | `output_config.effort` (`minimal` as `low`) | `reasoning.effort` | `thinkingConfig.thinkingLevel` |
//! | `thinking_budget` | error | `thinking: {"type":"enabled","budget_tokens"}` | error | `thinkingConfig.thinkingBudget` |
//! | structured output ([typed answers](#typed-answers)) | `response_format` (and `format` to Ollama) | `output_config.format` | `text.format` | `responseMimeType` and `responseJsonSchema` |
//!
//! "error": the request fails before it is sent, with
//! [`Error::InvalidInput`](crate::Error::InvalidInput) naming the setting
//! and the API (a seed that silently did nothing would be worse); so does
//! a temperature or `top_p` that is not finite. The tool settings go only
//! with tools: servers reject them alone.
//!
//! Each API's defaults when nothing is set: chat completions and Responses
//! send none of these fields. Anthropic requires `max_tokens`: pikuri
//! sends **4096**, or the thinking budget plus 4096 when only a budget is
//! set (the budget must stay below `max_tokens`). Thinking is off on
//! Anthropic until a budget turns it on (`with_thinking_budget(n)`, at
//! least 1024); beside it Anthropic accepts no forced tool
//! ([`ToolChoice::Required`](crate::ToolChoice::Required) or `Tool`), a
//! temperature of 1 only and a `top_p` of 0.95 or more. Responses sends
//! `store: false` and asks for the encrypted reasoning back
//! ([`Api::OpenAiResponses`](crate::Api::OpenAiResponses)). Gemini thinks
//! by its model's default until a level or budget is set; either adds
//! `includeThoughts: true`, so the thoughts come back as reasoning.
//!
//! For anything else, [`Configurator::request_field`](crate::Configurator::request_field)
//! sets a raw field of the API's own request body, written last: it
//! replaces a typed setting of the same field.
//!
//! ```
//! use pikuri::{Agent, Api, ModelSettings};
//! use pikuri::testing::{FakeServer, Reply};
//! use serde_json::json;
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("Hello."));
//! let claude = server.transport().with_api(Api::AnthropicMessages);
//! let mut agent = Agent::builder(claude)
//!     .settings(
//!         ModelSettings::new()
//!             .with_temperature(1.0)
//!             .with_thinking_budget(2048)
//!             .with_stop(["\n\nHuman:"]),
//!     )
//!     .request_field("top_k", json!(40)) // Anthropic's own field
//!     .build()?;
//! agent.run_loop("Hi")?;
//! let body = server.chat_requests()[0].body.clone().unwrap();
//! assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
//! assert_eq!(body["max_tokens"], 2048 + 4096);
//! assert_eq!(body["stop_sequences"], json!(["\n\nHuman:"]));
//! assert_eq!(body["top_k"], 40);
//!
//! // A seed has no Anthropic field: the request is not sent.
//! let mut seeded = Agent::builder(server.transport().with_api(Api::AnthropicMessages))
//!     .settings(ModelSettings::new().with_seed(7))
//!     .build()?;
//! let err = seeded.run_loop("Hi").unwrap_err();
//! assert!(err.to_string().contains("`seed`"));
//! assert_eq!(server.chat_requests().len(), 1);
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # Context caching (Gemini)
//!
//! Gemini can hold a long shared prefix (a handbook, a code base, the
//! system instruction and the tools) on the server, so each request names
//! it instead of sending it again and pays less for the tokens read from
//! it. It is optional and explicit: create the cache once with
//! [`ChatTransport::create_cache`](crate::ChatTransport::create_cache)
//! (a [`ContextCache`](crate::ContextCache): the system instruction, the
//! first messages, the tools, a `ttl`), then name it on the transport with
//! [`with_cached_content`](crate::ChatTransport::with_cached_content).
//! Requests on that transport send `cachedContent` and neither the system
//! prompt nor the tools (Gemini reads them from the cache, and refuses a
//! request that repeats them), so create the cache with the agent's own.
//! The tokens read from the cache come back as
//! [`Usage::cached`](crate::Usage::cached).
//!
//! A cache belongs to one model and lives until its `ttl` runs out
//! ([`update_cache_ttl`](crate::ChatTransport::update_cache_ttl) moves
//! that) or it is deleted
//! ([`delete_cache`](crate::ChatTransport::delete_cache)); the server
//! bills what it holds meanwhile. A turn naming a cache that is gone
//! fails with [`ErrorKind::CacheExpired`](crate::ErrorKind::CacheExpired),
//! its message naming the cache: create it again and go on (the history is
//! intact).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::tool::{FnTool, Parameters};
//! use pikuri::{Agent, Api, ContextCache, ErrorKind, Message, Tool};
//!
//! let server = FakeServer::start();
//! # // The scripted server plays Gemini here: with a real key,
//! # // `ChatTransport::new("gemini-2.5-flash").with_api(Api::Gemini)`.
//! let transport = server.transport().with_api(Api::Gemini);
//! let system = "Answer from the handbook.";
//! let clock: Arc<dyn Tool> = Arc::new(FnTool::new("clock", "The time.", Parameters::empty(), |_, _| {
//!     Ok("noon".to_string())
//! }));
//!
//! let cache = transport.create_cache(
//!     &ContextCache::new(Duration::from_secs(3600))
//!         .with_system(system)
//!         .with_tool(clock.clone())
//!         .with_message(Message::user("The handbook: lunch is at noon. ...")),
//! )?;
//! let cached = transport.clone().with_cached_content(Some(cache.name()));
//! let mut agent = Agent::builder(cached)
//!     .system_prompt(system)
//!     .add_tool(clock)
//!     .build()?;
//! # server.push(Reply::text("At noon."));
//! let out = agent.run_loop("When is lunch?")?;
//! assert_eq!(out.usage.cached, cache.token_count());
//! let body = server.chat_requests()[0].body.clone().unwrap();
//! assert_eq!(body["cachedContent"], cache.name());
//! assert!(body.get("systemInstruction").is_none() && body.get("tools").is_none());
//!
//! // Once it is gone, a turn says so.
//! transport.delete_cache(cache.name())?;
//! let err = agent.run_loop("And dinner?").unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::CacheExpired);
//! assert!(err.to_string().contains(cache.name()));
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # Guardrails and budgets
//!
//! Two ways to keep a run inside what you allow: a budget stops a run
//! that would spend too much, and guardrails check what goes in, what
//! comes out and what runs. Both are features on by default (`budgets`,
//! `guard`); a run that uses neither pays for neither (`benches/turn.rs`,
//! `benches/guards.rs`).
//!
//! ## Budgets
//!
//! A [`StepLimit`](crate::StepLimit) caps one agent's tool calls; a
//! [`Budget`](crate::Budget) caps what a whole run may spend: requests,
//! input, output and total tokens, tool calls, wall time, and money from a
//! [`PriceTable`](crate::budget::PriceTable) you supply. Sub-agents, the
//! synthesizer and the compactor count into their parent's run and are
//! stopped by it. A request whose input alone would pass a limit is never
//! sent; a tripped limit ends the run as the step limit does (an error, or
//! a synthesized answer under [`OnExhausted::Synthesize`](crate::OnExhausted::Synthesize)),
//! and every outcome says what the run spent
//! ([`Outcome::spend`](crate::Outcome::spend)), its cost exact to the
//! picodollar.
//!
//! ```
//! use pikuri::budget::{Cost, Limit, Price, PriceTable};
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::{Agent, Budget, Error, builtin};
//! use serde_json::json;
//!
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("calculator", json!({"expression": "6*7"})).with_usage(1_000, 20));
//! server.push(Reply::text("42").with_usage(1_100, 5));
//! let prices = PriceTable::new().with("fake-model", Price::per_million_usd(2.5, 10.0));
//! let budget = Budget::new().prices(prices).max_cost(Cost::from_usd(0.01));
//! let mut agent = Agent::builder(server.transport())
//!     .add_tool(builtin::calculator())
//!     .budget(budget.clone())
//!     .build()?;
//! let spend = agent.run_loop("6*7?")?.spend;
//! assert_eq!((spend.requests, spend.tool_calls, spend.total_tokens()), (2, 1, 2_125));
//! assert_eq!(spend.cost, Some(Cost::from_micro_usd(5_250 + 250))); // 2100 in, 25 out
//! assert_eq!(spend.cost.unwrap().to_string(), "$0.0055");
//!
//! // A tighter budget: the second request would pass $0.005 on its input
//! // alone, so it is not sent.
//! server.push(Reply::tool_call("calculator", json!({"expression": "6*7"})).with_usage(1_000, 20));
//! let mut agent = Agent::builder(server.transport())
//!     .add_tool(builtin::calculator())
//!     .budget(budget.max_cost(Cost::from_usd(0.005)))
//!     .build()?;
//! let err = agent.run_loop("6*7?").unwrap_err();
//! let Error::BudgetExceeded { limit, spend, .. } = &err else { panic!("{err}") };
//! assert_eq!(*limit, Limit::Cost);
//! assert_eq!(spend.cost, Some(Cost::from_micro_usd(2_700)));
//! assert_eq!(server.chat_requests().len(), 3);
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! A budget is per run: the next `run_loop` starts from nothing (a run
//! resumed from its journal goes on from what it had spent). Limits over
//! the agent's whole life go beside the run's with
//! [`Budget::lifetime`](crate::Budget::lifetime): once one is reached,
//! the run stops and every later one is refused before its first request,
//! with an [`Error::BudgetExceeded`](crate::Error::BudgetExceeded) whose
//! `lifetime` is true; the journal keeps that count across a restart. The
//! chat example takes `--max-tokens`, `--max-cost` and `--price`.
//!
//! ## Guardrails
//!
//! A [guard](crate::guard) checks what goes in, what comes out and what
//! runs, at four points: the user's message, the final answer, a tool call
//! (before the approval prompt) and a tool's result (before it enters the
//! history). Each is a closure or a type implementing the point's trait;
//! the loop acts on its verdict and announces it as an
//! [`Event::Guard`](crate::Event::Guard). Here a redactor keeps a tool's
//! secrets out of the history (and so out of every later request), a tool
//! guard refuses a call before anyone is asked to approve it, and an input
//! guard answers a message itself:
//!
//! ```
//! use pikuri::{Agent, Role, StopReason, ToolCall};
//! use pikuri::guard::{Guards, InputVerdict, Redactor, ToolInputVerdict};
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::tool::{FnTool, Parameters};
//! use serde_json::json;
//!
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("whois", json!({"domain": "example.com"})));
//! server.push(Reply::tool_call("whois", json!({"domain": "internal.corp"})));
//! server.push(Reply::text("It belongs to Jo; the other one is off limits."));
//! let whois = FnTool::new(
//!     "whois",
//!     "Who owns a domain.",
//!     Parameters::builder().required_string("domain", "The domain.").build(),
//!     |_, _| Ok("owner: jo@example.com".into()),
//! );
//! let guards = Guards::new()
//!     .input("scope", |text: &str| {
//!         if text.contains("password") {
//!             InputVerdict::Block("I can't help with passwords.".into())
//!         } else {
//!             InputVerdict::Allow
//!         }
//!     })
//!     .tool_input("internal", |call: &ToolCall| {
//!         if call.arguments.contains(".corp") {
//!             ToolInputVerdict::Reject("Error: internal domains are off limits".into())
//!         } else {
//!             ToolInputVerdict::Allow
//!         }
//!     })
//!     .tool_output("redact", Redactor::new());
//! let mut agent = Agent::builder(server.transport())
//!     .add_tool(whois)
//!     .guards(guards)
//!     .build()?;
//! let outcome = agent.run_loop("Who owns example.com and internal.corp?")?;
//! assert_eq!(outcome.stop_reason, StopReason::Completed);
//! let results: Vec<&str> = agent.messages().iter()
//!     .filter(|m| m.role == Role::Tool)
//!     .map(|m| m.content.as_str())
//!     .collect();
//! assert_eq!(results, ["owner: [redacted email]", "Error: internal domains are off limits"]);
//!
//! // A blocked message is answered by the guard: no request, and the next
//! // turn goes on from a valid history.
//! let blocked = agent.run_loop("What is Jo's password?")?;
//! assert_eq!(blocked.stop_reason, StopReason::Guardrail);
//! assert_eq!(blocked.answer.as_deref(), Some("I can't help with passwords."));
//! assert_eq!(server.chat_requests().len(), 3);
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! An output guard may send the model back with feedback, at most
//! [`max_retries`](crate::guard::Guards::max_retries) times; past that, and
//! on any stop, the run ends with [`Error::Guardrail`](crate::Error::Guardrail)
//! naming the guard. A guard that panics, fails or overruns its
//! [`timeout`](crate::guard::Guards::timeout) is a stop too, never a silent
//! allow. [`Shape`](crate::guard::Shape) bounds an answer's length and
//! shape; [`Judge`](crate::guard::Judge) asks a model (any transport) to
//! decide against a rubric:
//!
//! ```
//! use pikuri::{Agent, ErrorKind};
//! use pikuri::guard::{Guards, Judge, Shape};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("Sure! Here is a very long story about everything..."));
//! server.push(Reply::text("Fine."));
//! let judge_server = FakeServer::start();
//! judge_server.push(Reply::text(r#"{"allow": false, "reason": "the answer is rude"}"#));
//! let guards = Guards::new()
//!     .output("short", Shape::new().max_chars(20))
//!     .output("polite", Judge::new(judge_server.transport(), "Answers are polite."))
//!     .max_retries(1);
//! let mut agent = Agent::builder(server.transport()).guards(guards).build()?;
//! // The long answer goes back with the shape guard's feedback; the judge
//! // then refuses the short one, and the one retry is used up.
//! let err = agent.run_loop("Tell me a story.").unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::Guardrail);
//! assert!(err.to_string().starts_with("stopped by guard polite"), "{err}");
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! A streamed answer reaches the listeners before the output guards see
//! it; [`hold_deltas`](crate::guard::Guards::hold_deltas) holds it back
//! until they let it through, at the cost of the live display.
//!
//! A judge's requests count in the run's [budget](#budgets) like the
//! agent's own: a request, its tokens, its cost at the judge's model's
//! price; one the budget refuses is not sent, and the run stops on the
//! budget ([Budgets](crate::guard::Judge#budgets)).
//!
//! What the history holds after each trip is tabled in the
//! [guard module](crate::guard#what-the-history-holds).
