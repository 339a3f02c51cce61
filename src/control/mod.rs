//! Host → loop signals: [`StepLimit`], [`Cancellable`], [`Interloper`].
//!
//! Controls are signal holders the host keeps a clone of; the loop reads them
//! at fixed boundaries only. `Clone` shares the instance (an `Arc` inside), so
//! a clone handed to another thread or a signal handler acts on the same
//! control.
//!
//! # Which control is read at which boundary
//!
//! This table is the single source of truth; the [`agent`](crate::Agent) docs
//! and the seed pages say the same.
//!
//! | Boundary | StepLimit | Cancellable | Interloper |
//! |---|---|---|---|
//! | turn start ([`run_loop`](crate::Agent::run_loop)) | `reset()` | `reset()` | — |
//! | before each request | — | `check()` | — |
//! | during a request (HTTP, stream) | — | `cancel()` shuts the socket down | — |
//! | before each tool call (after [`Event::ToolCall`](crate::Event::ToolCall)) | `tick()` | `check()` | — |
//! | during a tool | — | visible through [`ToolContext`](crate::ToolContext) | — |
//! | after each tool batch | — | — | `drain()` |
//! | the model answers with no tool call | — | — | `drain()`; if anything was pending the loop goes on |
//! | mid-loop injection | never reset | never reset | — |
//!
//! # Sub-agents
//!
//! | Control | Child agent | Synthesizer |
//! |---|---|---|
//! | StepLimit | fresh, `max = persona.max_steps` | fresh, `max = 1` |
//! | Cancellable | the same instance (one cancel stops the tree) | the same instance |
//! | Interloper | none | none |

mod cancellable;
mod interloper;
mod step_limit;

pub(crate) use cancellable::CancelHook;
pub use cancellable::Cancellable;
pub use interloper::Interloper;
pub use step_limit::{OnExhausted, StepLimit};
