//! The loop's side of the [guards](crate::guard): one method per point,
//! each called from one line of `turn.rs` (or `batch.rs`), each returning at once when the
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
use super::shared::{Prepared, Verdict};
use super::turn::{End, Run};
use std::sync::Arc;

use crate::guard::{Action, Beside, Guards, Pending, Point, Scope, Trip};
use crate::journal::{HistoryCause, Record};
use crate::{Cancellable, Error, Event, FinishReason, Message, Result, ToolCall};

impl Agent {
    /// The input point, before the user message enters: the message to
    /// append, its text maybe replaced. A block or a stop waits for
    /// [`guarded_rounds`](Self::guarded_rounds); a stopped message enters
    /// as `[withheld by guard <name>]` (so the journal and the history
    /// never hold it, and the turn still shows).
    pub(super) fn guard_input(&mut self, mut message: Message) -> Message {
        let Some(guards) = self.guarding.guards.clone() else {
            return message;
        };
        let scope = self.guard_scope();
        let trip = guards.check_input(&mut message.content, &scope, &mut |g, a, d| {
            self.emit_guard(g, Point::Input, a, d, "");
        });
        let Some(trip) = trip else {
            if guards.has_beside() {
                self.start_beside(guards, &message.content);
            }
            return message;
        };
        if trip.action == Action::Block {
            self.guarding.pending = Some(Pending::Block {
                guard: trip.guard,
                answer: trip.detail,
            });
        } else if let Some(e) = self.guard_refused() {
            // Cancelled, or the guard could not ask its model: the message
            // is not suspect, so it enters as it is.
            self.guarding.pending = Some(Pending::Stop(e));
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
            Some(Pending::Stop(e)) => Err(self.journal_trip(e)),
            Some(Pending::Block { guard, answer }) => {
                self.journal_block(&guard, &answer)?;
                self.block(answer)
            }
            _ => {
                let result = self.rounds(run);
                self.after_beside(result)
            }
        }
    }

    /// Start the guards beside the first request on their own thread (see
    /// [`Guards::input_beside`](crate::guard::Guards::input_beside)); the
    /// request takes their token (`send` asks [`Guarding::cancel`]).
    fn start_beside(&mut self, guards: Arc<Guards>, text: &str) {
        let cancel = Cancellable::new();
        // The host's cancel still cuts the request.
        let hook = self.shared.cancellable.as_ref().map(|c| {
            let k = cancel.clone();
            c.on_cancel(move || k.cancel())
        });
        let (tx, verdict) = crossbeam_channel::bounded(1);
        let (text, k, scope) = (text.to_string(), cancel.clone(), self.guard_scope());
        // On a kept guard thread (see `guard::bounded`). A thread that
        // cannot start drops `tx`: the disconnect is a stop.
        let _ = crate::guard::hand_over(Box::new(move || {
            let mut reported = Vec::new();
            let trip = guards.check_beside(&text, &scope, &mut |g, a, d| {
                reported.push((Arc::from(g), a, d.to_string()));
            });
            if trip.is_some() {
                k.cancel();
            }
            let _ = tx.send((trip, reported));
        }));
        self.guarding.beside = Some(Beside {
            verdict,
            cancel,
            _hook: hook,
        });
    }

    /// Before the first answer is used: the verdict of the guards beside
    /// the request (awaited). A block or a stop is the error that ends the
    /// rounds ([`after_beside`](Self::after_beside) turns a block into its
    /// answer); a stop withholds the user message.
    pub(super) fn guard_beside(&mut self) -> Result<()> {
        let Some(beside) = self.guarding.beside.take() else {
            return Ok(());
        };
        let (trip, reported) = beside.verdict.recv().unwrap_or_else(|_| {
            let detail = "the guards beside the request gave no verdict".to_string();
            let guard: Arc<str> = Arc::from("beside");
            let reported = vec![(Arc::clone(&guard), Action::Stop, detail.clone())];
            let trip = Trip {
                guard,
                action: Action::Stop,
                detail,
            };
            (Some(trip), reported)
        });
        for (g, a, d) in &reported {
            self.emit_guard(g, Point::Input, *a, d, "");
        }
        let Some(trip) = trip else {
            return Ok(());
        };
        if let Some(e) = self
            .guard_refused()
            .filter(|_| trip.action != Action::Block)
        {
            return Err(e);
        }
        if trip.action == Action::Block {
            self.journal_block(&trip.guard, &trip.detail)?;
            self.guarding.pending = Some(Pending::Block {
                guard: Arc::clone(&trip.guard),
                answer: trip.detail.clone(),
            });
        } else if let Some(m) = self.messages.get_mut(self.turn_start) {
            m.content = format!("[withheld by guard {}]", trip.guard);
            m.images.clear();
            self.journal(|| Record::History {
                cause: HistoryCause::Guard,
                messages: (&self.messages[..]).into(),
            })?;
        }
        if trip.action == Action::Block {
            return Err(trip.stop());
        }
        Err(self.journal_trip(trip.stop()))
    }

    /// The rounds' result once the guards beside the first request are
    /// heard: a failed first request (cut by their trip, or failed on its
    /// own) waits for their verdict, which wins; a block's error becomes
    /// its answer.
    fn after_beside(&mut self, result: Result<End>) -> Result<End> {
        let result = match result {
            Err(e) if self.guarding.beside.is_some() => {
                // The host cancelled: no wait for the guards.
                let host = self.shared.cancellable.as_ref();
                if host.is_some_and(Cancellable::is_cancelled) {
                    self.guarding.beside = None;
                    Err(e)
                } else {
                    self.guard_beside().and(Err(e))
                }
            }
            other => other,
        };
        match (result, self.guarding.pending.take()) {
            (Err(Error::Guardrail { .. }), Some(Pending::Block { answer, .. })) => {
                self.block(answer)
            }
            (result, pending) => {
                self.guarding.pending = pending;
                result
            }
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
        let scope = self.guard_scope();
        let Some(trip) = guards.check_output(&mut message.content, &scope, &mut |g, a, d| {
            self.emit_guard(g, Point::Output, a, d, "");
        }) else {
            self.show_held(&message, finish);
            return Ok((message, finish));
        };
        if trip.action != Action::Retry {
            return Err(self.guard_error(trip));
        }
        self.guarding.retries += 1;
        let max = guards.retries();
        if self.guarding.retries > max {
            let detail = format!("still refused after {max} retries: {}", trip.detail);
            return Err(self.journal_trip(Trip { detail, ..trip }.stop()));
        }
        self.guarding.pending = Some(Pending::Retry(trip.detail));
        Ok((message, finish))
    }

    /// Whether `message`'s `Assistant` event is emitted as it comes: not
    /// when empty, nor a final answer held for the output guards.
    pub(super) fn shows_now(&self, message: &Message) -> bool {
        let held = self.guarding.holds() && message.tool_calls.is_empty();
        !message.content.is_empty() && !held
    }

    /// A held answer the output guards let through, shown
    /// ([`Guards::hold_deltas`](crate::guard::Guards::hold_deltas)).
    fn show_held(&self, message: &Message, finish: FinishReason) {
        if self.guarding.holds() && !message.content.is_empty() {
            self.emit(Event::Assistant {
                agent: self.agent_id(),
                content: message.content.clone(),
                finish,
            });
        }
    }

    /// After an answer is appended: an output guard's feedback enters as
    /// a user message (true: one more round answers it).
    pub(super) fn guard_retry(&mut self) -> Result<bool> {
        let Some(Pending::Retry(feedback)) = self.guarding.pending.take() else {
            return Ok(false);
        };
        self.journal(|| Record::User {
            content: feedback.as_str().into(),
        })?;
        self.messages.push(Message::user(feedback));
        Ok(true)
    }

    /// The tool input point, before the approval `review`: a rejection as
    /// the call's observation, or the review's verdict.
    ///
    /// # Errors
    ///
    /// A stop (this guard's, or a tool output guard's earlier in the
    /// batch), or the review's error.
    pub(super) fn guard_tool_input(
        &mut self,
        call: &ToolCall,
        review: impl FnOnce(&Agent) -> Result<Verdict>,
    ) -> Result<Verdict> {
        self.guard_stopped()?;
        let Some(guards) = self.guarding.at(Point::ToolInput) else {
            return review(self);
        };
        let scope = self.guard_scope();
        let Some(trip) = guards.check_tool_input(call, &scope, &mut |g, a, d| {
            self.emit_guard(g, Point::ToolInput, a, d, &call.id);
        }) else {
            return review(self);
        };
        if trip.action == Action::Reject {
            return Ok(Verdict::Go(Prepared::Done(trip.detail)));
        }
        Err(self.guard_error(trip))
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
        let scope = self.guard_scope();
        let Some(trip) = guards.check_tool_output(call, &mut content, &scope, &mut |g, a, d| {
            self.emit_guard(g, Point::ToolOutput, a, d, &call.id);
        }) else {
            return content;
        };
        let note = format!("Error: withheld by guard {}", trip.guard);
        let stop = self.guard_error(trip);
        self.guarding.pending = Some(Pending::Stop(stop));
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

    /// What the guards' threads get of the run: the budget their model
    /// calls spend through, and the host's cancel.
    fn guard_scope(&self) -> Scope {
        Scope {
            spender: Some(self.shared.meter.lend()),
            cancel: self.shared.cancellable.clone(),
        }
    }

    /// The run's error when a chain stopped for the run, not the guard:
    /// the host cancelled while a guard ran, or the budget refused a
    /// guard's request ([Budgets](crate::guard::Judge#budgets)).
    fn guard_refused(&self) -> Option<Error> {
        let host = self.shared.cancellable.as_ref();
        if host.is_some_and(Cancellable::is_cancelled) {
            return Some(Error::Cancelled);
        }
        let refusal = self.shared.meter.take_refused()?;
        Some(self.budget_trip(refusal))
    }

    /// The run's error for a chain's stop: the run's own (a cancel, the
    /// budget), else the guard's, stored.
    fn guard_error(&self, trip: Trip) -> Error {
        self.guard_refused()
            .unwrap_or_else(|| self.journal_trip(trip.stop()))
    }

    /// Store a guard's stop before the loop acts on it (a resume of a run
    /// cut off here ends it the same way); the stop, to return. A failed
    /// write is kept by the journal and reported at the run's end.
    fn journal_trip(&self, stop: Error) -> Error {
        if let Error::Guardrail { guard, reason } = &stop {
            let _ = self.journal(|| Record::Guard {
                guard: guard.as_str().into(),
                reason: reason.as_str().into(),
                block: false,
            });
        }
        stop
    }

    /// Store an input guard's block before its answer is appended.
    fn journal_block(&self, guard: &str, answer: &str) -> Result<()> {
        self.journal(|| Record::Guard {
            guard: guard.into(),
            reason: answer.into(),
            block: true,
        })
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
