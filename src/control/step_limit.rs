use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Error, Result};

/// What [`Agent::run_loop`](crate::Agent::run_loop) does when a [`StepLimit`] runs out.
///
/// The policy travels with the budget (pikuri's design): synthesis can only
/// follow a tripped budget, so an agent without a budget cannot be configured
/// to synthesize.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnExhausted {
    /// Return [`Error::StepLimitExceeded`]; the history stays intact, and the
    /// next turn (e.g. "continue") gets a fresh budget. For coding agents.
    #[default]
    Raise,
    /// Emit [`Event::FallbackNotice`](crate::Event::FallbackNotice) and answer
    /// from the evidence gathered so far with a tools-free pass (the
    /// [`Synthesizer`](crate::subagent::Synthesizer)). For Q&A agents.
    Synthesize,
}

/// Caps the number of tool calls in one [`run_loop`](crate::Agent::run_loop).
///
/// The loop calls [`tick`](StepLimit::tick) before every tool call and
/// [`reset`](StepLimit::reset) at the start of every turn (never on a mid-loop
/// injection: a chatty user could otherwise refresh the budget forever). See
/// the [boundary table](crate#controls).
///
/// # Examples
///
/// ```
/// use pikuri::{OnExhausted, StepLimit};
/// let limit = StepLimit::new(2);
/// assert_eq!(limit.to_string(), "StepLimit(max=2)");
/// limit.tick()?;
/// limit.tick()?;
/// assert!(limit.tick().unwrap_err().is_step_limit());
/// limit.reset();
/// assert_eq!(limit.step(), 0);
///
/// let q_and_a = StepLimit::with_policy(5, OnExhausted::Synthesize);
/// assert_eq!(q_and_a.to_string(), "StepLimit(max=5, on_exhausted=synthesize)");
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # Thread safety
///
/// `Clone` shares the counter. Each agent (each sub-agent, the synthesizer)
/// gets its own instance from the loop, so budgets are per agent.
#[derive(Clone)]
pub struct StepLimit {
    inner: Arc<Inner>,
}

struct Inner {
    max: u32,
    on_exhausted: OnExhausted,
    step: AtomicU32,
}

impl StepLimit {
    /// A budget of `max` tool calls with the default `Raise` policy.
    ///
    /// # Panics
    ///
    /// When `max` is zero: a budget is written as a literal, so zero is a
    /// programmer error (the crate's one policy for those, as
    /// [`Parameters::builder`](crate::tool::Parameters::builder) follows too). For a
    /// value read at run time use [`try_new`](StepLimit::try_new).
    pub fn new(max: u32) -> StepLimit {
        StepLimit::with_policy(max, OnExhausted::Raise)
    }

    /// A budget of `max` tool calls with the given policy.
    ///
    /// # Panics
    ///
    /// When `max` is zero; see [`new`](StepLimit::new).
    pub fn with_policy(max: u32, on_exhausted: OnExhausted) -> StepLimit {
        match StepLimit::try_new(max, on_exhausted) {
            Ok(limit) => limit,
            Err(e) => panic!("{e}"),
        }
    }

    /// A budget from a value read at run time (a configuration file, a flag).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when `max` is zero.
    pub fn try_new(max: u32, on_exhausted: OnExhausted) -> Result<StepLimit> {
        if max == 0 {
            return Err(Error::invalid("step limit max must be positive, got 0"));
        }
        Ok(StepLimit {
            inner: Arc::new(Inner {
                max,
                on_exhausted,
                step: AtomicU32::new(0),
            }),
        })
    }

    /// The configured cap.
    pub fn max(&self) -> u32 {
        self.inner.max
    }

    /// The policy applied when the budget runs out.
    pub fn on_exhausted(&self) -> OnExhausted {
        self.inner.on_exhausted
    }

    /// The number of ticks since the last reset.
    pub fn step(&self) -> u32 {
        self.inner.step.load(Ordering::Relaxed)
    }

    /// Tool calls left before the budget trips.
    pub fn remaining(&self) -> u32 {
        self.inner.max.saturating_sub(self.step())
    }

    /// Count one tool call.
    ///
    /// # Errors
    ///
    /// [`Error::StepLimitExceeded`] once the count passes `max`.
    pub fn tick(&self) -> Result<()> {
        let step = self
            .inner
            .step
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        if step > self.inner.max {
            return Err(Error::StepLimitExceeded {
                max: self.inner.max,
            });
        }
        Ok(())
    }

    /// Set the count back to zero.
    pub fn reset(&self) {
        self.inner.step.store(0, Ordering::Relaxed);
    }

    #[must_use]
    /// A fresh, independent budget with the same max and policy.
    pub fn fresh(&self) -> StepLimit {
        StepLimit {
            inner: Arc::new(Inner {
                max: self.inner.max,
                on_exhausted: self.inner.on_exhausted,
                step: AtomicU32::new(0),
            }),
        }
    }
}

impl fmt::Display for StepLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.inner.on_exhausted {
            OnExhausted::Raise => write!(f, "StepLimit(max={})", self.inner.max),
            OnExhausted::Synthesize => {
                write!(
                    f,
                    "StepLimit(max={}, on_exhausted=synthesize)",
                    self.inner.max
                )
            }
        }
    }
}

impl fmt::Debug for StepLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepLimit")
            .field("max", &self.inner.max)
            .field("on_exhausted", &self.inner.on_exhausted)
            .field("step", &self.step())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_rejected() {
        assert!(matches!(
            StepLimit::try_new(0, OnExhausted::Raise),
            Err(Error::InvalidInput(_))
        ));
        assert!(std::panic::catch_unwind(|| StepLimit::new(0)).is_err());
    }

    #[test]
    fn clone_shares_fresh_does_not() {
        let a = StepLimit::new(3);
        let b = a.clone();
        let c = a.fresh();
        a.tick().unwrap();
        assert_eq!(b.step(), 1);
        assert_eq!(c.step(), 0);
        assert_eq!(a.remaining(), 2);
    }

    #[test]
    fn trips_after_max() {
        let a = StepLimit::new(1);
        a.tick().unwrap();
        assert!(matches!(a.tick(), Err(Error::StepLimitExceeded { max: 1 })));
        assert_eq!(a.remaining(), 0);
    }
}
