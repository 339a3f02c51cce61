//! [`Evaluator`], the one trait every check implements, and the
//! [`Verdict`] it returns.

use super::capture::Run;

/// What an [`Evaluator`] says of one run: pass or fail, a score in
/// `0.0..=1.0`, an optional label (a category such as `"wrong_tool"`) and a
/// reason a person can act on.
///
/// # Examples
///
/// ```
/// use pikuri::evals::Verdict;
///
/// let v = Verdict::pass("the answer names Paris");
/// assert!(v.pass);
/// assert_eq!(v.score, 1.0);
///
/// let v = Verdict::scored(0.4, 0.5, "two of five facts").with_label("partial");
/// assert!(!v.pass);
/// assert_eq!(v.label.as_deref(), Some("partial"));
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Verdict {
    /// The evaluator's [name](Evaluator::name); the kit sets it.
    pub evaluator: String,
    /// Whether the run passes this evaluator.
    pub pass: bool,
    /// A score from 0.0 (worst) to 1.0 (best); the experiment clamps what
    /// an evaluator sets to that range (NaN reads 0.0).
    pub score: f64,
    /// A category, if the evaluator gives one.
    pub label: Option<String>,
    /// Why.
    pub reason: String,
}

crate::serde_macros::json_struct! {
    Serialize, Deserialize for Verdict {
        evaluator [default],
        pass,
        score,
        label [opt],
        reason [default],
    }
}

impl Verdict {
    /// A pass with score 1.0.
    pub fn pass(reason: impl Into<String>) -> Verdict {
        Verdict::new(true, 1.0, reason.into())
    }

    /// A failure with score 0.0.
    pub fn fail(reason: impl Into<String>) -> Verdict {
        Verdict::new(false, 0.0, reason.into())
    }

    /// A pass or a failure with `score`, passing when it is at least
    /// `threshold`. The score is clamped to `0.0..=1.0` (NaN reads 0.0) and
    /// rounded to six decimals, so reports read back equal.
    pub fn scored(score: f64, threshold: f64, reason: impl Into<String>) -> Verdict {
        let score = unit_score(score);
        Verdict::new(score >= threshold, score, reason.into())
    }

    /// This verdict with a label.
    #[must_use]
    pub fn with_label(mut self, label: impl Into<String>) -> Verdict {
        self.label = Some(label.into());
        self
    }

    fn new(pass: bool, score: f64, reason: String) -> Verdict {
        Verdict {
            evaluator: String::new(),
            pass,
            score,
            label: None,
            reason,
        }
    }
}

/// `score` as a score: clamped to `0.0..=1.0` (NaN reads 0.0), rounded to
/// six decimals. The experiment applies it to every verdict, since a
/// host's evaluator may set [`Verdict::score`] to anything: a NaN would be
/// written `null` in the report's JSON, which then would not load again.
pub(super) fn unit_score(score: f64) -> f64 {
    round6(if score.is_nan() {
        0.0
    } else {
        score.clamp(0.0, 1.0)
    })
}

/// `x` rounded to six decimals: a short decimal that JSON reads back to the
/// same `f64`.
pub(super) fn round6(x: f64) -> f64 {
    if x.is_finite() && x.abs() < 1e9 {
        (x * 1e6).round() / 1e6
    } else {
        x
    }
}

/// Judges one [`Run`] of a case: the built-in [`Check`](super::Check)s,
/// [`TypedEquals`](super::TypedEquals), the model-judged
/// [`Judge`](super::Judge), or your own.
///
/// # Examples
///
/// ```
/// use pikuri::evals::{Evaluator, Run, Verdict};
///
/// struct Short;
/// impl Evaluator for Short {
///     fn name(&self) -> String { "short".into() }
///     fn evaluate(&self, run: &Run) -> Verdict {
///         let len = run.output_text().len();
///         if len <= 20 { Verdict::pass(format!("{len} bytes")) } else { Verdict::fail(format!("{len} bytes")) }
///     }
/// }
/// assert!(Short.evaluate(&Run::from_output("Paris.")).pass);
/// ```
///
/// # Thread safety
///
/// An experiment calls `evaluate` from its worker threads, several runs at
/// once, after each run's task returned (never for a run that failed,
/// panicked, timed out or was cancelled: such a run fails anyway). A panic
/// in `evaluate` is caught and becomes a failing verdict.
pub trait Evaluator: Send + Sync + 'static {
    /// A short name, unique among a case's evaluators (it keys the report).
    fn name(&self) -> String;

    /// The verdict on `run`.
    fn evaluate(&self, run: &Run) -> Verdict;
}

impl<E: Evaluator + ?Sized> Evaluator for std::sync::Arc<E> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn evaluate(&self, run: &Run) -> Verdict {
        (**self).evaluate(run)
    }
}
