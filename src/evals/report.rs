//! [`Report`]: what an experiment found, per case and per run; its JSON
//! form (a baseline to keep) and its terminal table.

use std::fmt::Write as _;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::capture::{Run, RunStatus};
use super::dataset::Dataset;
use super::file;
use super::verdict::{Verdict, round6};
use crate::Result;

/// The largest report file [`Report::load`] reads (256 MiB).
pub const MAX_REPORT_BYTES: u64 = 256 * 1024 * 1024;

/// The format version [`Report::to_json`] writes.
const VERSION: u32 = 1;

/// How a set of scores spread: mean, smallest, largest and standard
/// deviation (population), each rounded to six decimals.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Spread {
    /// The mean.
    pub mean: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// The standard deviation.
    pub stddev: f64,
}

crate::serde_macros::json_struct! { Serialize, Deserialize for Spread { mean, min, max, stddev } }

impl Spread {
    /// The spread of `values` (all zero for none).
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        Spread {
            mean: round6(mean),
            min: round6(values.iter().copied().fold(f64::INFINITY, f64::min)),
            max: round6(values.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
            stddev: round6(var.sqrt()),
        }
    }
}

/// One run in a report: what was captured, the verdicts, and whether it
/// passed (it completed and every verdict passed).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RunResult {
    /// What the kit captured.
    pub run: Run,
    /// Each evaluator's verdict, in the order they ran.
    pub verdicts: Vec<Verdict>,
    /// Whether the run passed.
    pub pass: bool,
    /// The mean of the verdicts' scores (1.0 with none; 0.0 for a run that
    /// did not complete).
    pub score: f64,
}

// By hand: the run's fields are flattened into the result's object, as
// serde's `flatten` attribute would write and read them (the run's first,
// in its order; any key not the result's own goes to the run).
impl Serialize for RunResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.run.serialize_fields(&mut map)?;
        map.serialize_entry("verdicts", &self.verdicts)?;
        map.serialize_entry("pass", &self.pass)?;
        map.serialize_entry("score", &self.score)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for RunResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RunResult, D::Error> {
        deserializer.deserialize_map(RunResultVisitor)
    }
}

struct RunResultVisitor;

impl<'de> Visitor<'de> for RunResultVisitor {
    type Value = RunResult;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("struct RunResult")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RunResult, A::Error> {
        fn once<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
            map: &mut A,
            slot: &mut Option<T>,
            key: &'static str,
        ) -> Result<(), A::Error> {
            if slot.is_some() {
                return Err(de::Error::duplicate_field(key));
            }
            *slot = Some(map.next_value()?);
            Ok(())
        }
        let (mut verdicts, mut pass, mut score) = (None, None, None);
        // The run's keys in the order read (a key twice reaches the run,
        // which refuses it as serde's flatten does).
        let mut rest: Vec<(String, Value)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "verdicts" => once(&mut map, &mut verdicts, "verdicts")?,
                "pass" => once(&mut map, &mut pass, "pass")?,
                "score" => once(&mut map, &mut score, "score")?,
                _ => rest.push((key, map.next_value()?)),
            }
        }
        let run = Run::deserialize(de::value::MapDeserializer::<_, serde_json::Error>::new(
            rest.into_iter(),
        ))
        .map_err(crate::serde_macros::recast)?;
        Ok(RunResult {
            run,
            verdicts: verdicts.unwrap_or_default(),
            pass: pass.ok_or_else(|| de::Error::missing_field("pass"))?,
            score: score.ok_or_else(|| de::Error::missing_field("score"))?,
        })
    }
}

impl RunResult {
    pub(super) fn judged(run: Run, verdicts: Vec<Verdict>) -> RunResult {
        let completed = run.is_completed();
        let pass = completed && verdicts.iter().all(|v| v.pass);
        let score = if !completed {
            0.0
        } else if verdicts.is_empty() {
            1.0
        } else {
            round6(verdicts.iter().map(|v| v.score).sum::<f64>() / verdicts.len() as f64)
        };
        RunResult {
            run,
            verdicts,
            pass,
            score,
        }
    }
}

/// One evaluator's results over the runs of a case.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct EvaluatorSummary {
    /// The evaluator's name.
    pub name: String,
    /// The share of its verdicts that passed.
    pub pass_rate: f64,
    /// Its scores.
    pub score: Spread,
}

crate::serde_macros::json_struct! {
    Serialize, Deserialize for EvaluatorSummary { name, pass_rate, score }
}

/// One case in a report: its runs and what they add up to.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CaseReport {
    /// The case's name.
    pub name: String,
    /// The share of runs that passed.
    pub pass_rate: f64,
    /// The runs' scores.
    pub score: Spread,
    /// Per evaluator, in the order they ran.
    pub evaluators: Vec<EvaluatorSummary>,
    /// Every run, in repeat order.
    pub runs: Vec<RunResult>,
}

crate::serde_macros::json_struct! {
    Serialize, Deserialize for CaseReport { name, pass_rate, score, evaluators [default], runs }
}

impl CaseReport {
    fn of(name: String, runs: Vec<RunResult>) -> CaseReport {
        let passed = runs.iter().filter(|r| r.pass).count();
        let pass_rate = if runs.is_empty() {
            0.0
        } else {
            round6(passed as f64 / runs.len() as f64)
        };
        let scores: Vec<f64> = runs.iter().map(|r| r.score).collect();
        let mut evaluators: Vec<EvaluatorSummary> = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        for v in runs.iter().flat_map(|r| &r.verdicts) {
            if !names.contains(&v.evaluator.as_str()) {
                names.push(&v.evaluator);
            }
        }
        for name in names {
            let verdicts: Vec<&Verdict> = runs
                .iter()
                .flat_map(|r| &r.verdicts)
                .filter(|v| v.evaluator == name)
                .collect();
            let passed = verdicts.iter().filter(|v| v.pass).count();
            let scores: Vec<f64> = verdicts.iter().map(|v| v.score).collect();
            evaluators.push(EvaluatorSummary {
                name: name.to_string(),
                pass_rate: round6(passed as f64 / verdicts.len() as f64),
                score: Spread::of(&scores),
            });
        }
        CaseReport {
            name,
            pass_rate,
            score: Spread::of(&scores),
            evaluators,
            runs,
        }
    }

    /// The reasons of the failing runs, one line each (`run 2: contains
    /// "Paris": "Paris" not in "Lyon"`), for tables and diffs.
    pub fn failures(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for r in self.runs.iter().filter(|r| !r.pass) {
            if let Some(e) = &r.run.error {
                lines.push(format!("run {}: {:?}: {e}", r.run.repeat + 1, r.run.status));
            }
            for v in r.verdicts.iter().filter(|v| !v.pass) {
                lines.push(format!(
                    "run {}: {}: {}",
                    r.run.repeat + 1,
                    v.evaluator,
                    v.reason
                ));
            }
        }
        lines
    }
}

/// What an [`Experiment`](super::Experiment) found: per case, the runs,
/// their verdicts, pass rates and score spreads.
///
/// Keep one as a baseline ([`save`](Report::save), JSON) and compare each
/// new report with it ([`diff`](Report::diff),
/// [`assert_no_regressions`](Report::assert_no_regressions)); show it on a
/// terminal ([`table`](Report::table)) or to a CI system
/// ([`to_junit`](Report::to_junit)).
///
/// # Examples
///
/// ```
/// use pikuri::evals::{Case, Check, Dataset, Experiment, Report};
///
/// let dataset = Dataset::new("d").case(Case::new("echo", "hi").check(Check::equals("hi")));
/// let report = Experiment::new("x").repeats(3).run(&dataset, |cx: &mut pikuri::evals::TaskContext| {
///     Ok::<_, String>(cx.input().to_string())
/// });
/// assert_eq!(report.pass_rate(), 1.0);
/// assert_eq!(report.cases[0].runs.len(), 3);
/// let back = Report::from_json(&report.to_json())?;
/// assert_eq!(back, report);
/// assert!(report.table().contains("echo"));
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Report {
    /// The format version.
    pub version: u32,
    /// The experiment's name.
    pub name: String,
    /// The dataset's name.
    pub dataset: String,
    /// Runs per case.
    pub repeats: u32,
    /// Per case, in the dataset's order.
    pub cases: Vec<CaseReport>,
}

crate::serde_macros::json_struct! {
    Serialize, Deserialize for Report { version [default], name, dataset, repeats, cases }
}

impl Report {
    pub(super) fn from_runs(
        name: &str,
        dataset: &Dataset,
        repeats: u32,
        runs: Vec<RunResult>,
    ) -> Report {
        let mut per_case: Vec<Vec<RunResult>> =
            dataset.cases().iter().map(|_| Vec::new()).collect();
        let index: std::collections::HashMap<&str, usize> = dataset
            .cases()
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name(), i))
            .collect();
        for r in runs {
            if let Some(&i) = index.get(r.run.case.as_str()) {
                per_case[i].push(r);
            }
        }
        let cases = dataset
            .cases()
            .iter()
            .zip(per_case)
            .map(|(c, mut runs)| {
                runs.sort_by_key(|r| r.run.repeat);
                CaseReport::of(c.name().to_string(), runs)
            })
            .collect();
        Report {
            version: VERSION,
            name: name.to_string(),
            dataset: dataset.name().to_string(),
            repeats,
            cases,
        }
    }

    /// The share of all runs that passed.
    pub fn pass_rate(&self) -> f64 {
        let runs: Vec<&RunResult> = self.cases.iter().flat_map(|c| &c.runs).collect();
        if runs.is_empty() {
            return 0.0;
        }
        round6(runs.iter().filter(|r| r.pass).count() as f64 / runs.len() as f64)
    }

    /// The mean score of all runs.
    pub fn score(&self) -> f64 {
        let scores: Vec<f64> = self
            .cases
            .iter()
            .flat_map(|c| &c.runs)
            .map(|r| r.score)
            .collect();
        Spread::of(&scores).mean
    }

    /// The case named `name`.
    pub fn case(&self, name: &str) -> Option<&CaseReport> {
        self.cases.iter().find(|c| c.name == name)
    }

    /// This report with every time set to zero: what stays the same when
    /// the same runs are replayed (compare two replays with `==` on this).
    #[must_use]
    pub fn without_timings(&self) -> Report {
        let mut r = self.clone();
        for run in r.cases.iter_mut().flat_map(|c| &mut c.runs) {
            run.run.duration_ms = 0;
            // A time limit's reason names the time.
            for v in run
                .verdicts
                .iter_mut()
                .filter(|v| v.evaluator == "max_millis")
            {
                v.reason.clear();
            }
        }
        r
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Parse the JSON form.
    pub fn from_json(text: &str) -> Result<Report> {
        serde_json::from_str(text).map_err(|e| crate::Error::InvalidInput(format!("report: {e}")))
    }

    /// Write the JSON form to `path`, whole or not at all.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) naming the file:
    /// a directory, a FIFO or a device at `path`, a missing parent folder
    /// (never created), a read-only file there (never replaced; a file
    /// replaced keeps its mode), a report over [`MAX_REPORT_BYTES`] (it
    /// would not load again), a non-empty file there that is not a report,
    /// or a link to such a file (never replaced), or the write's error.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let kind = file::Kind {
            what: "report",
            max: MAX_REPORT_BYTES,
            is_one: &|text| Report::from_json(text).is_ok(),
        };
        file::write_atomic(path.as_ref(), self.to_json().as_bytes(), &kind)
    }

    /// Read a report written by [`save`](Report::save); a file that is not
    /// a regular file, over [`MAX_REPORT_BYTES`] or not a report is an
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) naming it.
    pub fn load(path: impl AsRef<Path>) -> Result<Report> {
        let path = path.as_ref();
        let text = file::read_bounded(path, MAX_REPORT_BYTES)?;
        Report::from_json(&text).map_err(|e| match e {
            crate::Error::InvalidInput(m) => {
                crate::Error::InvalidInput(format!("{}: {m}", path.display()))
            }
            other => other,
        })
    }

    /// A table for a terminal: one row per case (pass rate, mean score and
    /// spread, tool calls, requests and tokens per run, time per run), the
    /// failures' reasons under it, and a total line. Text from the cases
    /// and the model is sanitized (no terminal escapes) and cut short.
    pub fn table(&self) -> String {
        let name_width = self
            .cases
            .iter()
            .map(|c| shown(&c.name, 40).chars().count())
            .max()
            .unwrap_or(4)
            .max(4);
        let mut out = format!(
            "{} on {} ({} run(s) per case)\n{:<name_width$}  {:>6}  {:>13}  {:>5}  {:>4}  {:>7}  {:>8}\n",
            shown(&self.name, 60),
            shown(&self.dataset, 60),
            self.repeats,
            "case",
            "pass",
            "score (sd)",
            "tools",
            "reqs",
            "tokens",
            "ms",
        );
        for c in &self.cases {
            let n = c.runs.len().max(1) as f64;
            let mean = |f: &dyn Fn(&RunResult) -> f64| c.runs.iter().map(f).sum::<f64>() / n;
            let _ = writeln!(
                out,
                "{:<name_width$}  {:>5.0}%  {:>6.2} ({:.2})  {:>5.1}  {:>4.1}  {:>7.0}  {:>8.0}",
                shown(&c.name, 40),
                c.pass_rate * 100.0,
                c.score.mean,
                c.score.stddev,
                mean(&|r| r.run.tool_calls.len() as f64),
                mean(&|r| f64::from(r.run.requests)),
                mean(&|r| r.run.usage.total() as f64),
                mean(&|r| r.run.duration_ms as f64),
            );
            for line in c.failures().iter().take(5) {
                let _ = writeln!(out, "    {}", shown(line, 160));
            }
        }
        let failing = self.cases.iter().filter(|c| c.pass_rate < 1.0).count();
        let _ = writeln!(
            out,
            "{} case(s): pass rate {:.0}%, mean score {:.2}; {failing} case(s) with a failing run",
            self.cases.len(),
            self.pass_rate() * 100.0,
            self.score()
        );
        out
    }

    /// Whether any run did not complete (failed, panicked, timed out or was
    /// cancelled), as opposed to completing and failing a check.
    pub fn has_errors(&self) -> bool {
        self.cases
            .iter()
            .flat_map(|c| &c.runs)
            .any(|r| r.run.status != RunStatus::Completed)
    }
}

/// `text` sanitized for a terminal, on one line, at most `max` characters.
pub(super) fn shown(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', " ");
    crate::util::excerpt(&crate::sanitize::sanitize(&one_line), max).into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Usage;
    use crate::evals::ToolCallRecord;

    fn full_run() -> Run {
        let mut run = Run::from_output("4").with_tool_call(ToolCallRecord::new(
            "calc",
            json!({"e": "2+2"}),
            Some("4".into()),
        ));
        run.case = "sum".into();
        run.repeat = 1;
        run.status = RunStatus::TimedOut;
        run.error = Some("late".into());
        run.usage = Usage::new().with_input(3);
        run.requests = 2;
        run.duration_ms = 9;
        run.cost = Some(0.5);
        run.input = vec!["hidden".into()];
        run
    }

    const RUN_RESULT: &str = concat!(
        r#"{"case":"sum","repeat":1,"status":"timed_out","output":"4","error":"late","#,
        r#""tool_calls":[{"name":"calc","arguments":{"e":"2+2"},"result":"4"}],"#,
        r#""usage":{"input":3},"requests":2,"duration_ms":9,"cost":0.5,"#,
        r#""verdicts":[{"evaluator":"x","pass":false,"score":0.0,"label":"l","reason":"r"}],"#,
        r#""pass":false,"score":0.0}"#
    );

    #[test]
    fn a_run_result_writes_its_run_flat_then_its_own_fields() {
        let verdict = Verdict::fail("r").with_label("l");
        let mut result = RunResult::judged(full_run(), vec![verdict]);
        result.verdicts[0].evaluator = "x".into();
        assert_eq!(serde_json::to_string(&result).unwrap(), RUN_RESULT);
        // The run alone writes the same fields; skipped ones stay out.
        let minimal = Run::from_output(json!(null));
        assert_eq!(
            serde_json::to_string(&minimal).unwrap(),
            r#"{"case":"","repeat":0,"status":"completed","output":null,"usage":{},"requests":0,"duration_ms":0}"#
        );
        let back: RunResult = serde_json::from_str(RUN_RESULT).unwrap();
        assert_eq!(back, result);
        assert!(back.run.input.is_empty(), "a report keeps no input");
    }

    #[test]
    fn a_run_result_reads_its_keys_in_any_order_and_refuses_what_serde_flatten_refuses() {
        let shuffled =
            r#"{"score": 1, "pass": true, "status": "completed", "input": ["x"], "other": 1}"#;
        let r: RunResult = serde_json::from_str(shuffled).unwrap();
        assert!(r.pass && r.verdicts.is_empty());
        assert_eq!(r.score.to_bits(), 1.0f64.to_bits());
        assert_eq!(r.run, Run::from_output(json!(null)));
        assert!(r.run.input.is_empty(), "a skipped field is not read");
        for (bad, error) in [
            (r#"{"pass": true, "score": 1}"#, "missing field `status`"),
            (
                r#"{"status": "completed", "score": 1}"#,
                "missing field `pass`",
            ),
            (
                r#"{"status": "completed", "pass": true, "pass": true, "score": 1}"#,
                "duplicate field `pass`",
            ),
            (
                r#"{"status": "completed", "case": "a", "case": "b", "pass": true, "score": 1}"#,
                "duplicate field `case`",
            ),
            (
                r#"{"status": "done", "pass": true, "score": 1}"#,
                "unknown variant `done`",
            ),
            ("[1]", "invalid type: sequence, expected struct RunResult"),
        ] {
            let e = serde_json::from_str::<RunResult>(bad)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(error), "{bad}: {e}");
        }
    }

    #[test]
    fn a_report_round_trips_with_its_fields_in_order() {
        let report = Report {
            version: 1,
            name: "x".into(),
            dataset: "d".into(),
            repeats: 1,
            cases: vec![CaseReport::of(
                "c".into(),
                vec![RunResult::judged(Run::from_output("o"), vec![])],
            )],
        };
        let json = serde_json::to_value(&report).unwrap();
        let text = serde_json::to_string(&report).unwrap();
        assert!(
            text.starts_with(r#"{"version":1,"name":"x","dataset":"d","repeats":1,"cases":[{"name":"c","pass_rate":1.0,"score":{"mean":1.0,"min":1.0,"max":1.0,"stddev":0.0},"evaluators":[],"runs":[{"case":"#),
            "{text}"
        );
        assert_eq!(Report::from_json(&text).unwrap(), report);
        assert_eq!(json["cases"][0]["runs"][0]["pass"], json!(true));
        // `version` and `evaluators` may be absent.
        let old = r#"{"name":"x","dataset":"d","repeats":0,"cases":[{"name":"c","pass_rate":0,"score":{"mean":0,"min":0,"max":0,"stddev":0},"runs":[]}]}"#;
        let back = Report::from_json(old).unwrap();
        assert_eq!((back.version, back.cases[0].evaluators.len()), (0, 0));
    }
}
