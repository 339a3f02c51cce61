//! Tool-calling LLM agents for ordinary, non-async Rust programs.
//!
//! (Crate documentation is being written.)

#![forbid(unsafe_code)]

mod agent;
pub mod control;
mod error;
pub mod event;
pub mod listener;
mod message;
mod provider;
mod sse;
mod stream;
pub mod testing;
pub mod tool;

pub use crate::agent::{Agent, Configurator, Extension, ExtensionContext, History, Outcome, Synthesizer};
pub use crate::control::{Cancellable, Interloper, OnExhausted, StepLimit};
pub use crate::error::{Error, Result};
pub use crate::event::{Event, StopReason};
pub use crate::listener::{InMemoryEventList, Listener, ListenerList, SubAgentListener};
pub use crate::message::{Message, Role, ToolCall, Usage};
pub use crate::provider::{ChatTransport, ContextWindowDetector, HttpConfig};
pub use crate::tool::{Tool, ToolContext, ToolError};
