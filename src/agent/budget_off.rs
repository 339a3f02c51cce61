//! Budgets' stand-in when the `budgets` feature is off (declared as
//! `budget` in `agent/mod.rs`, in place of `budget.rs`).
//!
//! The loop calls the same hooks (`metering.rs`) at the same boundaries;
//! here the [`Meter`] holds nothing and counts nothing, and every check
//! passes, so the compiler drops the calls: no lock, no clock, no
//! estimate of a request's input. [`Budget`] is crate-private and
//! zero-sized (`Configurator::budget` needs the feature), so nothing is
//! ever limited or priced and no [`Spend`] is announced.

#![expect(
    clippy::unused_self,
    reason = "the seam's signatures, as in `budget.rs`"
)]

use crate::spend::Limit;
use crate::{OnExhausted, Spend, Usage};

/// No limit and no prices: a build without the `budgets` feature cannot
/// set any.
#[derive(Clone, Debug, Default)]
pub(crate) struct Budget {}

impl Budget {
    /// What a tripped limit does: none can trip.
    pub(crate) fn policy(&self) -> OnExhausted {
        OnExhausted::Raise
    }

    /// Whether anything is limited or priced: never.
    pub(crate) fn is_set(&self) -> bool {
        false
    }

    /// Whether a price table is set: never.
    pub(crate) fn is_priced(&self) -> bool {
        false
    }

    /// Whether a limit spans the agent's lifetime: never.
    pub(crate) fn has_lifetime(&self) -> bool {
        false
    }
}

/// A limit that refused, as `budget.rs` reports it: never made here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Refusal {
    pub(crate) limit: Limit,
    pub(crate) lifetime: bool,
}

/// The run's count, which counts nothing (zero-sized).
#[derive(Debug)]
pub(crate) struct Meter {
    budget: Budget,
}

impl Meter {
    pub(crate) fn new(budget: Budget) -> Meter {
        Meter { budget }
    }

    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Whether any limit is set: never.
    pub(crate) fn limits(&self) -> bool {
        false
    }

    pub(crate) fn reset(&self) {}

    #[cfg(feature = "journal")]
    pub(crate) fn restore(&self, _spent: Spend) {}

    #[cfg(feature = "journal")]
    pub(crate) fn restore_lifetime(&self, _earlier: Spend, _last: Spend) {}

    /// The earlier runs' spend: nothing counted.
    pub(crate) fn earlier(&self) -> Spend {
        Spend::default()
    }

    /// The lifetime spend: nothing counted.
    pub(crate) fn lifetime_spend(&self) -> Spend {
        Spend::default()
    }

    /// A guard's request the budget refused: none is.
    #[cfg(feature = "guard")]
    pub(crate) fn take_refused(&self) -> Option<Refusal> {
        None
    }

    /// Nothing counted: never read (no budget is set, so no `Spent` is
    /// announced and no journal record keeps it).
    pub(crate) fn spend(&self) -> Spend {
        Spend::default()
    }

    pub(crate) fn count(&self, _model: Option<&str>, _usage: Option<Usage>, _completed: bool) {}

    pub(crate) fn grant_one(&self) {}

    /// Before a request: never refused (the estimate is never made).
    pub(crate) fn before_request(
        &self,
        _model: Option<&str>,
        _estimate: impl FnOnce() -> u64,
    ) -> Option<Refusal> {
        None
    }

    /// Before a tool call: never stopped.
    pub(crate) fn tool_call(&self) -> Option<Refusal> {
        None
    }
}

#[cfg(feature = "guard")]
impl Meter {
    /// The meter as a run lends it to a guard's check.
    pub(crate) fn lend(self: &std::sync::Arc<Meter>) -> std::sync::Arc<dyn crate::guard::Spender> {
        std::sync::Arc::clone(self) as _
    }
}

/// A model-backed guard's requests: never refused, not counted.
#[cfg(feature = "guard")]
impl crate::guard::Spender for Meter {
    fn refuses(&self, _model: Option<&str>, _input: u64) -> Option<Limit> {
        None
    }

    fn count(&self, _model: Option<&str>, _usage: Option<Usage>) {}
}
