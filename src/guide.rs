//! The guide: from a first agent to one in production, one task per chapter.
//!
//! This module holds documentation only. Every snippet is a doc test that
//! runs against [`FakeServer`](crate::testing::FakeServer), a scripted
//! OpenAI-compatible server on 127.0.0.1, and asserts what it shows; only the
//! last chapter's snippets need a real model server and are not run.
//!
//! 1. [Getting started](#getting-started)
//! 2. [Writing tools](#writing-tools)
//! 3. [Streaming to your own UI thread](#streaming-to-your-own-ui-thread)
//! 4. [Cancel from Ctrl+C](#cancel-from-ctrlc)
//! 5. [Steering a running turn](#steering-a-running-turn)
//! 6. [Persisting sessions](#persisting-sessions)
//! 7. [Testing your agent](#testing-your-agent)
//! 8. [Running against llama.cpp or Ollama](#running-against-llamacpp-or-ollama)
//!
//! The chat example (`cargo run --example chat`) puts chapters 1 to 6
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
//! what was found so far when it runs out.
//!
//! # Writing tools
//!
//! A tool is a name, a description the model reads, a JSON schema for the
//! arguments, and a function. [`FnTool`](crate::FnTool) with
//! [`Parameters`](crate::Parameters) covers most of them. The arguments are
//! validated against the schema before the function runs. A failure is an
//! observation for the model, not an error of the run: return a
//! [`ToolError`](crate::ToolError) and the model reads `Error: ...`, so it
//! can correct itself.
//!
//! ```
//! use pikuri::{Agent, FnTool, Parameters, ToolError};
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
//! **Placeholder:** typed tools (arguments as a Rust struct, the schema
//! derived from it) are being added in a separate change; their chapter
//! goes here.
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
//! let from_env = ChatTransport::from_env();
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
