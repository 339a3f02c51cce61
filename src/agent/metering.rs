//! The loop's hooks into the run's [`Meter`] (`budget.rs`, `Meter`): one method per
//! boundary that counts or checks, called from `turn.rs` and `batch.rs` (and the journal's
//! response record, `resume_run`, the synthesizer). The rules are on
//! [`Budget`](crate::Budget).

use std::sync::Arc;

use super::Agent;
use super::budget::Refusal;
use super::compact::Conversation;
use crate::{Error, Event, OnExhausted, Result, Spend, Usage};

impl Agent {
    /// The run's start: the host's agent starts a fresh count; a child
    /// counts into its parent's.
    pub(super) fn budget_begin(&self) {
        if !self.shared.options.nesting.is_child() {
            self.shared.meter.reset();
        }
    }

    /// Before a request (after compaction): refuse it when the budget
    /// says so (with no limit set, nothing to check).
    pub(super) fn budget_before_request(&mut self) -> Result<()> {
        if !self.shared.meter.limits() {
            return Ok(());
        }
        let transport = self.shared_transport();
        let meter = Arc::clone(&self.shared.meter);
        let refused = meter.before_request(transport.model(), || self.request_estimate());
        refused.map_or(Ok(()), |r| Err(self.budget_trip(r)))
    }

    /// A request answered with `usage` (or a failed one's usage). The
    /// model prices it, so it is read only when a price table is set.
    pub(super) fn budget_count(&self, usage: Option<Usage>, completed: bool) {
        let meter = &self.shared.meter;
        if meter.budget().is_priced() {
            let transport = self.shared_transport();
            meter.count(transport.model(), usage, completed);
        } else {
            meter.count(None, usage, completed);
        }
    }

    /// Before a tool call: count it, stop it when a limit is passed.
    pub(super) fn budget_tool_call(&self) -> Result<()> {
        match self.shared.meter.tool_call() {
            Some(r) => Err(self.budget_trip(r)),
            None => Ok(()),
        }
    }

    /// The run's end: its spend, announced ([`Event::Spent`]) by the
    /// host's agent when the budget limits or prices anything.
    pub(super) fn budget_end(&self) -> Spend {
        let spend = self.shared.meter.spend();
        let main = !self.shared.options.nesting.is_child();
        if main && self.shared.meter.budget().is_set() {
            self.emit(Event::Spent {
                agent: self.agent_id(),
                spend,
            });
        }
        spend
    }

    /// What a journaled response records: the run's spend, when the agent
    /// has a budget (a limit or prices) to keep across a resume, and what
    /// the earlier runs spent, when it has lifetime limits.
    pub(super) fn budget_record(&self) -> (Option<Spend>, Option<Spend>) {
        let meter = &self.shared.meter;
        let earlier = meter.budget().has_lifetime().then(|| meter.earlier());
        (meter.budget().is_set().then(|| meter.spend()), earlier)
    }

    /// An opened journal's lifetime count (its last response's record of
    /// the earlier runs' spend and its run's).
    #[cfg(feature = "journal")]
    pub(super) fn budget_replayed(&self, lifetime: Option<(Spend, Spend)>) {
        if let Some((earlier, last)) = lifetime {
            self.shared.meter.restore_lifetime(earlier, last);
        }
    }

    /// A run resumed from its journal goes on from what it had spent.
    #[cfg(feature = "journal")]
    pub(super) fn budget_resume(&self, spent: Option<Spend>) {
        if let Some(spent) = spent {
            self.shared.meter.restore(spent);
        }
    }

    /// Whether `err` ends the run in the synthesizer (a tripped limit
    /// under [`OnExhausted::Synthesize`], of the step limit or the budget).
    pub(super) fn synthesizes(&self, err: &Error) -> bool {
        if self.shared.options.synthesize.is_none() {
            return false;
        }
        match err {
            Error::StepLimitExceeded { .. } => self
                .shared
                .step_limit
                .as_ref()
                .is_some_and(|s| s.on_exhausted() == OnExhausted::Synthesize),
            // A lifetime limit is never synthesized past.
            Error::BudgetExceeded { lifetime, .. } => {
                !lifetime && self.shared.meter.budget().policy() == OnExhausted::Synthesize
            }
            _ => false,
        }
    }

    /// The tripped limit announced, as the run's error (with the run's
    /// spend, or the lifetime's for a lifetime limit).
    pub(super) fn budget_trip(&self, Refusal { limit, lifetime }: Refusal) -> Error {
        let meter = &self.shared.meter;
        let spend = if lifetime {
            meter.lifetime_spend()
        } else {
            meter.spend()
        };
        self.emit(Event::BudgetExceeded {
            agent: self.agent_id(),
            limit,
            spend,
            lifetime,
        });
        Error::BudgetExceeded {
            limit,
            spend: Box::new(spend),
            lifetime,
        }
    }

    /// The next request's input, in tokens, as compaction estimates it.
    fn request_estimate(&mut self) -> u64 {
        let tools = self.callable_tools();
        let mut none = |_: &str, _: &str| Ok(String::new());
        let conversation = Conversation {
            messages: &mut self.messages,
            system_prompt: self
                .typed
                .as_ref()
                .map_or(&self.system_prompt, |t| &t.system_prompt),
            tools: &tools,
            window: None,
            summarize: &mut none,
        };
        self.compactor.estimate(&conversation)
    }
}
