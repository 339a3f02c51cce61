//! Guardrails' stand-in when the `guard` feature is off (declared as
//! `pikuri::guard` in `lib.rs`, in place of `guard/`).
//!
//! What stays in every build are the values an
//! [`Event::Guard`](crate::Event::Guard) names ([`Point`], [`Action`]),
//! as [`Error::Guardrail`](crate::Error::Guardrail) and
//! [`StopReason::Guardrail`](crate::StopReason::Guardrail) stay: events,
//! errors and journals keep one vocabulary whatever the features. The
//! machinery goes: no `Guards`, no point traits, no redactor, shape check
//! or judge. The loop calls the same crate-private hooks
//! (`agent/guarded_off.rs`), each a no-op, and the agent's [`Guarding`]
//! holds nothing.

use std::sync::Arc;

use crate::control::Cancellable;

#[path = "guard/point.rs"]
mod point;

pub(crate) use point::NOT_RUN;
pub use point::{Action, Point};

/// The host's guards, which a build without the `guard` feature never
/// has: the type is uninhabited, so the configurator's
/// `Option<Arc<Guards>>` stays empty.
#[derive(Debug)]
pub(crate) enum Guards {}

/// An agent's guard state: nothing to hold without guards (zero-sized).
#[derive(Debug, Default)]
pub(crate) struct Guarding;

impl Guarding {
    #[expect(clippy::needless_pass_by_value, reason = "the seam's signature")]
    pub(crate) fn new(guards: Option<Arc<Guards>>) -> Guarding {
        let _ = guards;
        Guarding
    }

    /// A new run: nothing to reset.
    #[expect(clippy::unused_self, reason = "the seam's signature")]
    pub(crate) fn reset(&mut self) {}

    /// Whether a streamed answer is held for the output guards: never.
    #[expect(clippy::unused_self, reason = "the seam's signature")]
    pub(crate) fn holds(&self) -> bool {
        false
    }

    /// No guard runs beside a request: the request keeps the host's token.
    #[expect(clippy::unused_self, reason = "the seam's signature")]
    pub(crate) fn cancel(&self) -> Option<&Cancellable> {
        None
    }
}
