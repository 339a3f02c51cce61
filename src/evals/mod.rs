//! Evals: know whether a change to a prompt, a model or a tool made the
//! agent better or worse, offline, in CI.
//!
//! A [`Dataset`] holds [`Case`]s (a name, one user message or several
//! turns, an optional expected output, metadata, and the case's own
//! checks); an [`Experiment`] runs each case through a [`Task`] (usually
//! an [`Agent`](crate::Agent) on the transport under test) N times on a
//! bounded number of threads, captures each [`Run`] (output, events, tool
//! calls with arguments and results, usage, requests, time, a cost the task
//! reports), judges it with [`Evaluator`]s and returns a [`Report`]: pass
//! rates and score spreads per case, a terminal [`table`](Report::table),
//! JSON to keep as a baseline, [JUnit XML](Report::to_junit) for CI, and a
//! [`diff`](Report::diff) against the baseline naming each regression and
//! improvement ([`assert_no_regressions`](Report::assert_no_regressions)
//! fails a `cargo test`). [`Offline`] records the model's answers once and
//! replays them, so an eval of the agent's logic costs nothing and gives
//! the same report every time.
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::builtin;
//! use pikuri::evals::{Case, Check, Dataset, Experiment, Order, TaskContext};
//! use pikuri::testing::{FakeServer, Reply};
//! use serde_json::json;
//!
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("calculator", json!({"expression": "6*7"})));
//! server.push(Reply::text("42"));
//!
//! let dataset = Dataset::new("arithmetic")
//!     .check(Check::max_tool_calls(2))
//!     .case(
//!         Case::new("product", "What is 6 times 7?")
//!             .expect("42")
//!             .check(Check::equals_expected())
//!             .check(Check::trajectory(["calculator"], Order::Exact))
//!             .check(Check::arguments("calculator", json!({"expression": "6*7"}))),
//!     );
//!
//! let transport = server.transport();
//! let report = Experiment::new("baseline").run(&dataset, move |cx: &mut TaskContext| {
//!     let mut agent = Agent::builder(transport.clone())
//!         .add_tool(builtin::calculator())
//!         .add_listener(cx.listener())
//!         .cancellable(cx.cancellable())
//!         .build()?;
//!     Ok::<_, pikuri::Error>(agent.run_loop(cx.input())?.answer)
//! });
//! assert_eq!(report.pass_rate(), 1.0);
//! let run = &report.cases[0].runs[0].run;
//! assert_eq!(run.tool_calls[0].result.as_deref(), Some("42"));
//! assert_eq!(run.requests, 2);
//! ```
//!
//! # The evaluators
//!
//! | evaluator | what it checks |
//! |---|---|
//! | [`Check`] `equals`, `contains` | the output |
//! | [`TypedEquals`] | the output read as a Rust type equals the expected one |
//! | [`Check`] `json_schema` | the output against a JSON Schema |
//! | [`Check`] `tools_called`, `trajectory`, `arguments` | the tool calls: which, in what order, with what arguments |
//! | [`Check`] `max_tool_calls`, `max_requests`, `max_tokens`, `max_cost`, `max_millis` | the run's figures |
//! | [`Judge`] | a model grades the output against a rubric |
//! | your type | implement [`Evaluator`] |
//!
//! [`Check`]s are stored in dataset files; the others are attached in code.
//! The guide's [Evals](crate::guide#evals) chapter walks through a whole
//! eval with a baseline.

mod capture;
mod check;
mod dataset;
mod diff;
mod experiment;
mod file;
mod judge;
mod junit;
mod offline;
mod report;
mod verdict;

pub use capture::{MAX_EVENTS, Run, RunStatus, TaskContext, ToolCallRecord};
pub use check::{Check, Order, TypedEquals};
pub use dataset::{Case, Dataset, MAX_DATASET_BYTES};
pub use diff::{Change, Diff};
pub use experiment::{Experiment, Progress, Task};
pub use judge::Judge;
pub use offline::Offline;
pub use report::{CaseReport, EvaluatorSummary, MAX_REPORT_BYTES, Report, RunResult, Spread};
pub use verdict::{Evaluator, Verdict};
