//! [`Dataset`] and [`Case`]: what an experiment runs, and their JSON and
//! JSON Lines files. The file format is on [`Dataset`].

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::check::Check;
use super::file;
use super::verdict::Evaluator;
use crate::{Error, Result};

/// The largest dataset file [`Dataset::load`] reads (64 MiB): a bigger one
/// is refused before it is read, so a wrong path cannot eat the memory.
pub const MAX_DATASET_BYTES: u64 = 64 * 1024 * 1024;

/// One case: a name, the input (one user message, or several turns), an
/// optional expected output, free metadata, and the case's own checks and
/// evaluators (run after the dataset's shared ones).
///
/// # Examples
///
/// ```
/// use pikuri::evals::{Case, Check};
/// use serde_json::json;
///
/// let case = Case::new("capital", "Capital of France?")
///     .expect("Paris")
///     .meta("difficulty", json!("easy"))
///     .check(Check::contains("Paris"));
/// assert_eq!(case.name(), "capital");
/// assert_eq!(case.turns(), ["Capital of France?"]);
/// assert_eq!(case.expected(), Some(&json!("Paris")));
/// assert_eq!(case.metadata()["difficulty"], "easy");
///
/// let chat = Case::with_turns("follow-up", ["Hi", "And then?"]);
/// assert_eq!(chat.turns().len(), 2);
/// ```
#[derive(Clone)]
pub struct Case {
    name: String,
    turns: Vec<String>,
    expected: Option<Value>,
    metadata: Map<String, Value>,
    checks: Vec<Check>,
    evaluators: Vec<Arc<dyn Evaluator>>,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let evaluators: Vec<String> = self.evaluators.iter().map(Evaluator::name).collect();
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("turns", &self.turns)
            .field("expected", &self.expected)
            .field("metadata", &self.metadata)
            .field("checks", &self.checks)
            .field("evaluators", &evaluators)
            .finish()
    }
}

impl PartialEq for Case {
    /// Equal when everything that a file holds is equal (code evaluators
    /// are compared by name).
    fn eq(&self, other: &Case) -> bool {
        let names = |c: &Case| c.evaluators.iter().map(Evaluator::name).collect::<Vec<_>>();
        self.name == other.name
            && self.turns == other.turns
            && self.expected == other.expected
            && self.metadata == other.metadata
            && self.checks == other.checks
            && names(self) == names(other)
    }
}

impl Case {
    /// A case whose input is one user message.
    pub fn new(name: impl Into<String>, input: impl Into<String>) -> Case {
        Case::with_turns(name, [input.into()])
    }

    /// A case whose input is several user turns, sent one after the other
    /// to the same agent.
    pub fn with_turns<I, S>(name: impl Into<String>, turns: I) -> Case
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Case {
            name: name.into(),
            turns: turns.into_iter().map(Into::into).collect(),
            expected: None,
            metadata: Map::new(),
            checks: Vec::new(),
            evaluators: Vec::new(),
        }
    }

    /// The expected output (what [`Check::equals_expected`] and typed
    /// equality compare with, and what a judge is shown).
    #[must_use]
    pub fn expect(mut self, expected: impl Into<Value>) -> Case {
        self.expected = Some(expected.into());
        self
    }

    /// Add a metadata entry (kept in files, shown to nobody but the host).
    #[must_use]
    pub fn meta(mut self, key: impl Into<String>, value: Value) -> Case {
        self.metadata.insert(key.into(), value);
        self
    }

    /// Add a built-in check of this case (saved with it).
    #[must_use]
    pub fn check(mut self, check: Check) -> Case {
        self.checks.push(check);
        self
    }

    /// Add an evaluator written in code (not saved in files).
    #[must_use]
    pub fn evaluator(mut self, evaluator: impl Evaluator) -> Case {
        self.evaluators.push(Arc::new(evaluator));
        self
    }

    /// The case's name, unique in its dataset.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The user turns, in order (one for a single message).
    pub fn turns(&self) -> &[String] {
        &self.turns
    }

    /// The expected output, if any.
    pub fn expected(&self) -> Option<&Value> {
        self.expected.as_ref()
    }

    /// The metadata.
    pub fn metadata(&self) -> &Map<String, Value> {
        &self.metadata
    }

    /// The case's own checks.
    pub fn checks(&self) -> &[Check] {
        &self.checks
    }

    /// The case's own code evaluators.
    pub fn evaluators(&self) -> &[Arc<dyn Evaluator>] {
        &self.evaluators
    }

    /// The case as stored: `input` is a string for one turn, an array for
    /// several.
    fn to_value(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("name".into(), json!(self.name));
        let input = match self.turns.as_slice() {
            [one] => json!(one),
            turns => json!(turns),
        };
        obj.insert("input".into(), input);
        if let Some(expected) = &self.expected {
            obj.insert("expected".into(), expected.clone());
        }
        if !self.metadata.is_empty() {
            obj.insert("metadata".into(), Value::Object(self.metadata.clone()));
        }
        if !self.checks.is_empty() {
            obj.insert("checks".into(), json!(self.checks));
        }
        Value::Object(obj)
    }

    /// A case read from its stored form; `at` names it in errors
    /// (`case #3`), and the error names the field too.
    fn from_value(value: Value, at: &str) -> Result<Case> {
        let Value::Object(obj) = value else {
            return Err(invalid(format!("{at}: not a JSON object")));
        };
        let name = match obj.get("name") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::String(_)) => {
                return Err(invalid(format!("{at}: field \"name\" is blank")));
            }
            Some(_) => return Err(invalid(format!("{at}: field \"name\": not a string"))),
            None => return Err(invalid(format!("{at}: field \"name\" is missing"))),
        };
        let at = format!("{at} ({})", quoted(&name));
        let mut case = Case::with_turns(name, Vec::<String>::new());
        for (key, value) in obj {
            match key.as_str() {
                "name" => {}
                "input" => case.turns = turns(value, &at)?,
                "expected" => case.expected = Some(value),
                "metadata" => case.metadata = field(value, &at, "metadata")?,
                "checks" => case.checks = checks(value, &at)?,
                other => {
                    return Err(invalid(format!(
                        "{at}: unknown field {} (expected name, input, expected, metadata, checks)",
                        quoted(other)
                    )));
                }
            }
        }
        if case.turns.is_empty() {
            return Err(invalid(format!("{at}: field \"input\" is missing")));
        }
        Ok(case)
    }
}

/// A named list of cases and the checks and evaluators every case gets.
///
/// # File format
///
/// JSON ([`to_json`](Dataset::to_json), [`save`](Dataset::save) and
/// [`load`](Dataset::load) of a path not ending in `.jsonl`):
///
/// ```json
/// {"name": "capitals",
///  "checks": [{"type": "max_requests", "max": 3}],
///  "cases": [{"name": "france", "input": "Capital of France?", "expected": "Paris",
///             "metadata": {"level": 1}, "checks": [{"type": "contains", "text": "Paris"}]}]}
/// ```
///
/// `input` is a string (one message) or an array of strings (turns). JSON
/// Lines (a path ending in `.jsonl`) holds one case per line, after an
/// optional first line `{"dataset": NAME, "checks": [...]}`. Blank lines
/// are skipped. Code evaluators are not saved. A file over
/// [`MAX_DATASET_BYTES`], one that is not a regular file, an empty one
/// (nothing but blanks: not a dataset of no cases), a case without a
/// name or an input, an unknown field, a wrong type, or two cases of one
/// name is an [`Error::InvalidInput`] naming the file, the case (its
/// number from 1 and its name) and the field.
///
/// # Examples
///
/// ```
/// use pikuri::evals::{Case, Check, Dataset};
///
/// let dataset = Dataset::new("capitals")
///     .check(Check::max_requests(3))
///     .case(Case::new("france", "Capital of France?").expect("Paris"));
/// let back = Dataset::from_json(&dataset.to_json())?;
/// assert_eq!(back, dataset);
/// assert_eq!(Dataset::from_jsonl(&dataset.to_jsonl(), "x")?, dataset);
///
/// let err = Dataset::from_json(r#"{"name": "d", "cases": [{"name": "a", "input": 3}]}"#).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     r#"invalid input: case #1 ("a"): field "input": expected a string or an array of strings"#
/// );
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    name: String,
    cases: Vec<Case>,
    checks: Vec<Check>,
    evaluators: Vec<EvaluatorList>,
}

/// A code evaluator of the dataset, compared by name.
#[derive(Clone)]
struct EvaluatorList(Arc<dyn Evaluator>);

impl fmt::Debug for EvaluatorList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.name())
    }
}

impl PartialEq for EvaluatorList {
    fn eq(&self, other: &EvaluatorList) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Dataset {
    /// An empty dataset.
    pub fn new(name: impl Into<String>) -> Dataset {
        Dataset {
            name: name.into(),
            cases: Vec::new(),
            checks: Vec::new(),
            evaluators: Vec::new(),
        }
    }

    /// Add a case.
    ///
    /// # Panics
    ///
    /// When a case of the same name is already there (names key reports
    /// and baselines); files with a duplicate are an error instead.
    #[must_use]
    pub fn case(mut self, case: Case) -> Dataset {
        assert!(
            !self.cases.iter().any(|c| c.name == case.name),
            "Dataset::case: a case named {:?} is already there",
            case.name
        );
        self.cases.push(case);
        self
    }

    /// Add a check every case gets (saved with the dataset).
    #[must_use]
    pub fn check(mut self, check: Check) -> Dataset {
        self.checks.push(check);
        self
    }

    /// Add a code evaluator every case gets (not saved).
    #[must_use]
    pub fn evaluator(mut self, evaluator: impl Evaluator) -> Dataset {
        self.evaluators.push(EvaluatorList(Arc::new(evaluator)));
        self
    }

    /// The dataset's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cases, in order.
    pub fn cases(&self) -> &[Case] {
        &self.cases
    }

    /// The shared checks.
    pub fn checks(&self) -> &[Check] {
        &self.checks
    }

    /// The shared code evaluators.
    pub fn evaluators(&self) -> impl Iterator<Item = &Arc<dyn Evaluator>> {
        self.evaluators.iter().map(|e| &e.0)
    }

    /// The dataset as pretty JSON.
    pub fn to_json(&self) -> String {
        let mut obj = Map::new();
        obj.insert("name".into(), json!(self.name));
        if !self.checks.is_empty() {
            obj.insert("checks".into(), json!(self.checks));
        }
        let cases: Vec<Value> = self.cases.iter().map(Case::to_value).collect();
        obj.insert("cases".into(), Value::Array(cases));
        let mut text = serde_json::to_string_pretty(&Value::Object(obj)).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The dataset as JSON Lines: a header line with the name and shared
    /// checks, then one case per line.
    pub fn to_jsonl(&self) -> String {
        let mut header = Map::new();
        header.insert("dataset".into(), json!(self.name));
        if !self.checks.is_empty() {
            header.insert("checks".into(), json!(self.checks));
        }
        let mut text = Value::Object(header).to_string();
        text.push('\n');
        for case in &self.cases {
            text.push_str(&case.to_value().to_string());
            text.push('\n');
        }
        text
    }

    /// Parse the JSON form.
    pub fn from_json(text: &str) -> Result<Dataset> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| invalid(format!("dataset: not valid JSON: {e}")))?;
        let Value::Object(mut obj) = value else {
            return Err(invalid("dataset: not a JSON object".into()));
        };
        let name = match obj.remove("name") {
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid("dataset: field \"name\": not a string".into())),
            None => return Err(invalid("dataset: field \"name\" is missing".into())),
        };
        let mut dataset = Dataset::new(name);
        if let Some(value) = obj.remove("checks") {
            dataset.checks = checks(value, "dataset")?;
        }
        let cases = match obj.remove("cases") {
            Some(Value::Array(cases)) => cases,
            Some(_) => return Err(invalid("dataset: field \"cases\": not an array".into())),
            None => return Err(invalid("dataset: field \"cases\" is missing".into())),
        };
        if let Some(other) = obj.keys().next() {
            return Err(invalid(format!(
                "dataset: unknown field {} (expected name, checks, cases)",
                quoted(other)
            )));
        }
        let mut seen = HashMap::new();
        for (i, value) in cases.into_iter().enumerate() {
            let case = Case::from_value(value, &format!("case #{}", i + 1))?;
            dataset.push_unique(case, i + 1, &mut seen)?;
        }
        Ok(dataset)
    }

    /// Parse the JSON Lines form; `name` names a dataset without a header
    /// line (usually the file's stem).
    pub fn from_jsonl(text: &str, name: &str) -> Result<Dataset> {
        let mut dataset = Dataset::new(name);
        let mut seen = HashMap::new();
        let mut number = 0;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(line)
                .map_err(|e| invalid(format!("line {}: not valid JSON: {e}", i + 1)))?;
            if number == 0
                && let Some(Value::String(name)) = value.get("dataset")
            {
                dataset.name.clone_from(name);
                if let Some(value) = value.get("checks") {
                    dataset.checks = checks(value.clone(), &format!("line {}", i + 1))?;
                }
                number = 1;
                continue;
            }
            number = number.max(1);
            let at = format!("line {}: case #{}", i + 1, dataset.cases.len() + 1);
            let case = Case::from_value(value, &at)?;
            dataset.push_unique(case, dataset.cases.len() + 1, &mut seen)?;
        }
        Ok(dataset)
    }

    /// Read a dataset file: JSON Lines when the name ends in `.jsonl`, JSON
    /// otherwise. See [File format](Dataset#file-format) for the errors.
    pub fn load(path: impl AsRef<Path>) -> Result<Dataset> {
        let path = path.as_ref();
        let text = file::read_bounded(path, MAX_DATASET_BYTES)?;
        let in_file = |e: Error| match e {
            Error::InvalidInput(msg) => invalid(format!("dataset {}: {msg}", path.display())),
            other => other,
        };
        // Why refuse it here: an empty JSON Lines file parses as a dataset
        // of no cases, and an experiment on it passes; a file emptied by a
        // failed copy or a torn write is not a dataset.
        if text.trim().is_empty() {
            return Err(in_file(invalid("the file is empty".to_string())));
        }
        if is_jsonl(path) {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("dataset");
            Dataset::from_jsonl(&text, stem).map_err(in_file)
        } else {
            Dataset::from_json(&text).map_err(in_file)
        }
    }

    /// Write the dataset (JSON Lines when the name ends in `.jsonl`),
    /// through a temporary file renamed over `path`, so a reader never sees
    /// half a file.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the file: a directory, a FIFO or a
    /// device at `path`, a missing parent folder (never created), a
    /// read-only file there (never replaced; a file replaced keeps its
    /// mode), a dataset over [`MAX_DATASET_BYTES`] (it would not load
    /// again), a non-empty file there that is not a dataset, or a link to
    /// such a file (never replaced), or the write's error.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let jsonl = is_jsonl(path);
        let text = if jsonl {
            self.to_jsonl()
        } else {
            self.to_json()
        };
        let is_one = |text: &str| {
            if jsonl {
                Dataset::from_jsonl(text, "").is_ok()
            } else {
                Dataset::from_json(text).is_ok()
            }
        };
        let kind = file::Kind {
            what: "dataset",
            max: MAX_DATASET_BYTES,
            is_one: &is_one,
        };
        file::write_atomic(path, text.as_bytes(), &kind)
    }

    fn push_unique(
        &mut self,
        case: Case,
        number: usize,
        seen: &mut HashMap<String, usize>,
    ) -> Result<()> {
        if let Some(first) = seen.insert(case.name.clone(), number) {
            return Err(invalid(format!(
                "case #{number} ({}): field \"name\": case #{first} has the same name",
                quoted(&case.name)
            )));
        }
        self.cases.push(case);
        Ok(())
    }
}

fn is_jsonl(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
}

fn turns(value: Value, at: &str) -> Result<Vec<String>> {
    let wrong = || {
        invalid(format!(
            "{at}: field \"input\": expected a string or an array of strings"
        ))
    };
    match value {
        Value::String(s) => Ok(vec![s]),
        Value::Array(items) if !items.is_empty() => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(wrong()),
            })
            .collect(),
        _ => Err(wrong()),
    }
}

fn checks(value: Value, at: &str) -> Result<Vec<Check>> {
    let Value::Array(items) = value else {
        return Err(invalid(format!("{at}: field \"checks\": not an array")));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| field(v, at, &format!("checks[{i}]")))
        .collect()
}

fn field<T: DeserializeOwned>(value: Value, at: &str, name: &str) -> Result<T> {
    serde_json::from_value(value).map_err(|e| invalid(format!("{at}: field \"{name}\": {e}")))
}

/// A name as shown in an error: quoted, escaped, at most 80 characters.
pub(super) fn quoted(name: &str) -> String {
    format!("{:?}", crate::util::excerpt(name, 80))
}

pub(super) fn invalid(msg: String) -> Error {
    Error::InvalidInput(msg)
}
