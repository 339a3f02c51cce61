//! The values an [`Event::Guard`](crate::Event::Guard) names: where a
//! guard ran and what it decided. Plain values, in every build (the
//! `guard` feature off too, as `Event::Guard` is), so a listener or a
//! journal reader names them whatever the features; and the observation
//! of a call a guard's stop left unanswered (a journal written with guards
//! may be resumed by a build without them).

use serde::{Deserialize, Serialize};

/// The observation of a call a guard's stop left unanswered.
pub(crate) const NOT_RUN: &str = "Error: not run: stopped by a guard";

/// Where a guard runs (in [`Event::Guard`](crate::Event::Guard)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Point {
    /// The user's message ([`Input`](super::Input)).
    Input,
    /// The final answer ([`Output`](super::Output)).
    Output,
    /// A tool call ([`ToolInput`](super::ToolInput)).
    ToolInput,
    /// A tool's result ([`ToolOutput`](super::ToolOutput)).
    ToolOutput,
}

impl Point {
    /// The snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Point::Input => "input",
            Point::Output => "output",
            Point::ToolInput => "tool_input",
            Point::ToolOutput => "tool_output",
        }
    }
}

/// What a guard decided, when it did not allow (in
/// [`Event::Guard`](crate::Event::Guard)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Action {
    /// The text was replaced.
    Replace,
    /// The user's message was answered by the guard.
    Block,
    /// The model was asked again.
    Retry,
    /// The tool call was refused.
    Reject,
    /// The run stopped (a guard's verdict, or a guard that failed).
    Stop,
}

impl Action {
    /// The snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Replace => "replace",
            Action::Block => "block",
            Action::Retry => "retry",
            Action::Reject => "reject",
            Action::Stop => "stop",
        }
    }
}
