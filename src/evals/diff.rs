//! [`Diff`]: a report against its baseline, case by case, and the helper
//! that fails a test on a regression.

use std::collections::{HashMap, HashSet};
use std::fmt;

use super::report::{CaseReport, Report, shown};

/// One case whose pass rate or mean score moved past the tolerance.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Change {
    /// The case's name.
    pub case: String,
    /// Pass rate in the baseline.
    pub pass_before: f64,
    /// Pass rate now.
    pub pass_after: f64,
    /// Mean score in the baseline.
    pub score_before: f64,
    /// Mean score now.
    pub score_after: f64,
    /// The evaluators whose pass rate fell (for a regression) or rose.
    pub evaluators: Vec<String>,
    /// The failures of the new runs (for a regression), as
    /// [`CaseReport::failures`].
    pub failures: Vec<String>,
}

/// A report compared with a baseline: the regressions, the improvements,
/// and the cases only one of them has. Cases are matched by name.
///
/// A case regresses when its pass rate or its mean score fell by more than
/// the tolerance, and improves when either rose by more than it (and
/// neither fell).
///
/// # Examples
///
/// ```
/// use pikuri::evals::{Case, Check, Dataset, Experiment};
///
/// let dataset = Dataset::new("d")
///     .case(Case::new("a", "x").check(Check::equals("x")))
///     .case(Case::new("b", "y").check(Check::equals("y")));
/// let echo = Experiment::new("echo").run(&dataset, |cx: &mut pikuri::evals::TaskContext| {
///     Ok::<_, String>(cx.input().to_string())
/// });
/// let broken = Experiment::new("broken").run(&dataset, |cx: &mut pikuri::evals::TaskContext| {
///     Ok::<_, String>(if cx.case() == "b" { "?".to_string() } else { cx.input().to_string() })
/// });
/// let diff = broken.diff(&echo, 0.0);
/// assert_eq!(diff.regressions.len(), 1);
/// assert_eq!(diff.regressions[0].case, "b");
/// assert!(echo.diff(&broken, 0.0).improvements[0].case == "b");
/// assert!(diff.to_string().contains("regressed b: pass 100% -> 0%"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Diff {
    /// Cases that got worse.
    pub regressions: Vec<Change>,
    /// Cases that got better.
    pub improvements: Vec<Change>,
    /// Cases new in this report.
    pub added: Vec<String>,
    /// Cases of the baseline this report does not have.
    pub removed: Vec<String>,
}

impl Diff {
    /// Whether nothing regressed.
    pub fn is_ok(&self) -> bool {
        self.regressions.is_empty()
    }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |x: f64| format!("{:.0}%", x * 100.0);
        for (word, list) in [
            ("regressed", &self.regressions),
            ("improved", &self.improvements),
        ] {
            for c in list {
                write!(
                    f,
                    "{word} {}: pass {} -> {}, score {:.2} -> {:.2}",
                    shown(&c.case, 80),
                    pct(c.pass_before),
                    pct(c.pass_after),
                    c.score_before,
                    c.score_after
                )?;
                if !c.evaluators.is_empty() {
                    write!(f, " ({})", shown(&c.evaluators.join(", "), 160))?;
                }
                writeln!(f)?;
                for line in c.failures.iter().take(5) {
                    writeln!(f, "    {}", shown(line, 160))?;
                }
            }
        }
        for name in &self.added {
            writeln!(f, "added {}", shown(name, 80))?;
        }
        for name in &self.removed {
            writeln!(f, "removed {}", shown(name, 80))?;
        }
        if self.regressions.is_empty()
            && self.improvements.is_empty()
            && self.added.is_empty()
            && self.removed.is_empty()
        {
            writeln!(f, "no change")?;
        }
        Ok(())
    }
}

impl Report {
    /// This report against `baseline`: which cases regressed and improved
    /// by more than `tolerance` (in pass rate or mean score, 0.0 to 1.0).
    pub fn diff(&self, baseline: &Report, tolerance: f64) -> Diff {
        let tolerance = if tolerance.is_nan() {
            0.0
        } else {
            tolerance.max(0.0)
        };
        let mut diff = Diff::default();
        // By name, in constant time per case: a dataset may be large.
        let before_by_name: HashMap<&str, &CaseReport> = baseline
            .cases
            .iter()
            .map(|c| (c.name.as_str(), c))
            .collect();
        let now_names: HashSet<&str> = self.cases.iter().map(|c| c.name.as_str()).collect();
        for now in &self.cases {
            let Some(&before) = before_by_name.get(now.name.as_str()) else {
                diff.added.push(now.name.clone());
                continue;
            };
            let pass = now.pass_rate - before.pass_rate;
            let score = now.score.mean - before.score.mean;
            let worse = pass < -tolerance - 1e-9 || score < -tolerance - 1e-9;
            let better = pass > tolerance + 1e-9 || score > tolerance + 1e-9;
            if worse {
                let mut change = change(before, now, |b, a| a < b);
                change.failures = now.failures();
                diff.regressions.push(change);
            } else if better {
                diff.improvements.push(change(before, now, |b, a| a > b));
            }
        }
        for before in &baseline.cases {
            if !now_names.contains(before.name.as_str()) {
                diff.removed.push(before.name.clone());
            }
        }
        diff
    }

    /// Panic (failing the `cargo test` that calls it) when a case regressed
    /// against `baseline` by more than `tolerance`; the message lists every
    /// regression with its failures, then the improvements.
    ///
    /// # Panics
    ///
    /// On a regression, as above.
    #[track_caller]
    pub fn assert_no_regressions(&self, baseline: &Report, tolerance: f64) {
        let diff = self.diff(baseline, tolerance);
        assert!(
            diff.is_ok(),
            "{} regression(s) of {} against {} (tolerance {tolerance}):\n{diff}",
            diff.regressions.len(),
            shown(&self.name, 80),
            shown(&baseline.name, 80)
        );
    }
}

fn change(before: &CaseReport, now: &CaseReport, moved: impl Fn(f64, f64) -> bool) -> Change {
    let evaluators = now
        .evaluators
        .iter()
        .filter(|e| {
            let b = before
                .evaluators
                .iter()
                .find(|b| b.name == e.name)
                .map_or(1.0, |b| b.pass_rate);
            moved(b, e.pass_rate)
        })
        .map(|e| e.name.clone())
        .collect();
    Change {
        case: now.name.clone(),
        pass_before: before.pass_rate,
        pass_after: now.pass_rate,
        score_before: before.score.mean,
        score_after: now.score.mean,
        evaluators,
        failures: Vec::new(),
    }
}
