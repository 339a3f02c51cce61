//! The loop's side of the guards when the `guard` feature is off (declared
//! as `guarded` in `agent/mod.rs`, in place of `guarded.rs`): the same
//! hooks, each called from the same line of `turn.rs` (or `batch.rs`), each returning its
//! input untouched, so the loop has one shape whatever the features and
//! the compiler drops every call. Only the resume of a journal that a
//! build with guards wrote acts: it ends the run as the guard did.

#![expect(
    clippy::unused_self,
    clippy::unnecessary_wraps,
    reason = "the seam's signatures, as in `guarded.rs`"
)]

use super::Agent;
use super::shared::Verdict;
use super::turn::{End, Run};
use crate::{FinishReason, Message, Result, ToolCall};

impl Agent {
    /// Whether `message`'s `Assistant` event is emitted as it comes: when
    /// it has text (no output guard holds it).
    pub(super) fn shows_now(&self, message: &Message) -> bool {
        !message.content.is_empty()
    }

    /// The input point: the message, untouched.
    pub(super) fn guard_input(&self, message: Message) -> Message {
        message
    }

    /// A new turn's rounds: no input guard can have ended it.
    pub(super) fn guarded_rounds(&mut self, run: &mut Run) -> Result<End> {
        self.rounds(run)
    }

    /// No guard runs beside the first request.
    pub(super) fn guard_beside(&self) -> Result<()> {
        Ok(())
    }

    /// The output point: the answer, untouched.
    pub(super) fn guard_output(
        &self,
        answer: (Message, FinishReason),
    ) -> Result<(Message, FinishReason)> {
        Ok(answer)
    }

    /// No output guard's feedback to append.
    pub(super) fn guard_retry(&self) -> Result<bool> {
        Ok(false)
    }

    /// The tool input point: the review's verdict.
    pub(super) fn guard_tool_input(
        &self,
        _call: &ToolCall,
        review: impl FnOnce(&Agent) -> Result<Verdict>,
    ) -> Result<Verdict> {
        review(self)
    }

    /// The tool output point: the content, untouched.
    pub(super) fn guard_tool_output(&self, _call: &ToolCall, content: String) -> String {
        content
    }

    /// No tool output guard's stop waits.
    pub(super) fn guard_stopped(&self) -> Result<()> {
        Ok(())
    }
}
