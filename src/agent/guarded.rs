//! The loop's side of the [guards](crate::guard): one method per point,
//! each called from one line of `turn.rs`, each returning at once when the
//! host set no guard for its point (no thread, no allocation). What the
//! history holds after each verdict is tabled in the guard module's docs,
//! [What the history holds](crate::guard#what-the-history-holds).
//!
//! A verdict one boundary takes and a later one acts on waits in
//! `Guarding::pending`: an input block or stop (acted on before the first
//! request, [`guarded_rounds`](Agent::guarded_rounds)), an output retry
//! (after the answer is appended, [`guard_retry`](Agent::guard_retry)),
//! a tool output stop (at the next call or the batch's end).

use super::Agent;
use super::approval::{Prepared, Verdict};
use super::turn::{End, Run};
use crate::guard::{Action, Pending, Point, Trip};
use crate::journal::Record;
use crate::{Event, FinishReason, Message, Result, ToolCall};

impl Agent {
    /// The input point, before the user message enters: the message to
    /// append, its text maybe replaced. A block or a stop waits for
    /// [`guarded_rounds`](Self::guarded_rounds); a stopped message enters
    /// as `[withheld by guard <name>]` (so the journal and the history
    /// never hold it, and the turn still shows).
    pub(super) fn guard_input(&mut self, mut message: Message) -> Message {
        let Some(guards) = self.guarding.at(Point::Input) else {
            return message;
        };
        let Some(trip) = guards.check_input(&mut message.content, &mut |g, a, d| {
            self.emit_guard(g, Point::Input, a, d, "");
        }) else {
            return message;
        };
        if trip.action == Action::Block {
            self.guarding.pending = Some(Pending::Block(trip.detail));
        } else {
            message.content = format!("[withheld by guard {}]", trip.guard);
            message.images.clear();
            self.guarding.pending = Some(Pending::Stop(trip.stop()));
        }
        message
    }

    /// A new turn's rounds, unless an input guard ended it: a stop is the
    /// run's error; a block appends the guard's answer, and no request is
    /// sent.
    pub(super) fn guarded_rounds(&mut self, run: &mut Run) -> Result<End> {
        match self.guarding.pending.take() {
            Some(Pending::Stop(e)) => Err(e),
            Some(Pending::Block(answer)) => {
                let message = Message::assistant(answer);
                self.journal_response(&message, FinishReason::Complete)?;
                self.messages.push(message);
                Ok(End::Blocked)
            }
            _ => self.rounds(run),
        }
    }

    /// The output point, on an answer without tool calls, before it is
    /// stored: the answer (maybe replaced). A retry keeps the answer and
    /// leaves its feedback for [`guard_retry`](Self::guard_retry).
    ///
    /// # Errors
    ///
    /// A stop, or a retry past [`Guards::max_retries`](crate::guard::Guards::max_retries).
    pub(super) fn guard_output(
        &mut self,
        (mut message, finish): (Message, FinishReason),
    ) -> Result<(Message, FinishReason)> {
        let pass = !message.tool_calls.is_empty();
        let Some(guards) = self.guarding.at(Point::Output).filter(|_| !pass) else {
            return Ok((message, finish));
        };
        let Some(trip) = guards.check_output(&mut message.content, &mut |g, a, d| {
            self.emit_guard(g, Point::Output, a, d, "");
        }) else {
            return Ok((message, finish));
        };
        if trip.action != Action::Retry {
            return Err(trip.stop());
        }
        self.guarding.retries += 1;
        let max = guards.retries();
        if self.guarding.retries > max {
            let detail = format!("still refused after {max} retries: {}", trip.detail);
            return Err(Trip { detail, ..trip }.stop());
        }
        self.guarding.pending = Some(Pending::Retry(trip.detail));
        Ok((message, finish))
    }

    /// After an answer is appended: an output guard's feedback enters as
    /// a user message (true: one more round answers it).
    pub(super) fn guard_retry(&mut self) -> Result<bool> {
        let Some(Pending::Retry(feedback)) = self.guarding.pending.take() else {
            return Ok(false);
        };
        self.journal(&Record::User {
            content: feedback.as_str().into(),
        })?;
        self.messages.push(Message::user(feedback));
        Ok(true)
    }

    /// The tool input point, before the approval review: a rejection as
    /// the call's observation, or `None` to go on to the review.
    ///
    /// # Errors
    ///
    /// A stop (this guard's, or a tool output guard's earlier in the batch).
    pub(super) fn guard_tool_input(&mut self, call: &ToolCall) -> Result<Option<Verdict>> {
        self.guard_stopped()?;
        let Some(guards) = self.guarding.at(Point::ToolInput) else {
            return Ok(None);
        };
        let Some(trip) = guards.check_tool_input(call, &mut |g, a, d| {
            self.emit_guard(g, Point::ToolInput, a, d, &call.id);
        }) else {
            return Ok(None);
        };
        if trip.action == Action::Reject {
            return Ok(Some(Verdict::Go(Prepared::Done(trip.detail))));
        }
        Err(trip.stop())
    }

    /// The tool output point, before a result enters: the content to
    /// append. A stop appends `Error: withheld by guard <name>` and waits
    /// for [`guard_stopped`](Self::guard_stopped); once one waits, every
    /// later result of the batch is withheld unread.
    pub(super) fn guard_tool_output(&mut self, call: &ToolCall, mut content: String) -> String {
        let Some(guards) = self.guarding.at(Point::ToolOutput) else {
            return content;
        };
        if self.guarding.pending.is_some() {
            return "Error: withheld: a guard stopped the run".to_string();
        }
        let Some(trip) = guards.check_tool_output(call, &mut content, &mut |g, a, d| {
            self.emit_guard(g, Point::ToolOutput, a, d, &call.id);
        }) else {
            return content;
        };
        let note = format!("Error: withheld by guard {}", trip.guard);
        self.guarding.pending = Some(Pending::Stop(trip.stop()));
        note
    }

    /// A tool output guard's stop, at the next call or the batch's end.
    pub(super) fn guard_stopped(&mut self) -> Result<()> {
        match self.guarding.pending.take() {
            Some(Pending::Stop(e)) => Err(e),
            other => {
                self.guarding.pending = other;
                Ok(())
            }
        }
    }

    /// Announce one verdict ([`Event::Guard`]).
    fn emit_guard(&self, guard: &str, point: Point, action: Action, detail: &str, call_id: &str) {
        self.emit(Event::Guard {
            agent: self.agent_id(),
            guard: guard.to_string(),
            point,
            action,
            detail: detail.to_string(),
            call_id: call_id.to_string(),
        });
    }
}
