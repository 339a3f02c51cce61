//! The built-in evaluators: [`Check`] (saved in dataset files) and
//! [`TypedEquals`] (a Rust type, so code only).

use std::fmt;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::capture::Run;
use super::verdict::{Evaluator, Verdict};
use crate::tool::Parameters;

/// How [`Check::Trajectory`] compares the tools called with the expected
/// list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Order {
    /// The same calls in the same order, nothing else.
    #[default]
    Exact,
    /// The same calls (as many of each), in any order.
    AnyOrder,
    /// The expected calls appear in this order, other calls between them
    /// allowed.
    InOrder,
    /// Every expected call appears (as many of each), in any order, other
    /// calls allowed.
    Subset,
}

crate::serde_macros::json_enum! {
    Serialize, Deserialize for Order {
        Exact = "exact",
        AnyOrder = "any_order",
        InOrder = "in_order",
        Subset = "subset",
    }
}

/// A built-in evaluator, stored in dataset files as a JSON object with a
/// `"type"` (the variant's snake_case name) and its fields.
///
/// | check | passes when | score |
/// |---|---|---|
/// | `equals` | the output equals `value` (or the case's expected output) | 1 or 0 |
/// | `contains` | the output's text contains `text` | 1 or 0 |
/// | `json_schema` | the output (a JSON string or value) is valid against `schema` | 1 or 0 |
/// | `tools_called` | every tool of `tools` was called | share called |
/// | `trajectory` | the tools called match `tools` under `order` | 1 or 0 |
/// | `arguments` | a call of `tool` has `arguments` (a subset match: extra fields allowed) | 1 or 0 |
/// | `max_tool_calls`, `max_requests`, `max_tokens`, `max_cost`, `max_millis` | the run's figure is at most `max` | 1 or 0 |
///
/// # Examples
///
/// ```
/// use pikuri::evals::{Check, Evaluator, Order, Run, ToolCallRecord};
/// use serde_json::json;
///
/// let run = Run::from_output("2 + 2 = 4")
///     .with_tool_call(ToolCallRecord::new("calculator", json!({"expression": "2+2"}), Some("4".into())));
/// assert!(Check::contains("= 4").evaluate(&run).pass);
/// assert!(Check::trajectory(["calculator"], Order::Exact).evaluate(&run).pass);
/// assert!(Check::arguments("calculator", json!({"expression": "2+2"})).evaluate(&run).pass);
/// let v = Check::max_tool_calls(0).evaluate(&run);
/// assert_eq!(v.reason, "1 tool call(s), over the limit of 0");
///
/// let stored = serde_json::to_value(Check::max_tool_calls(3))?;
/// assert_eq!(stored, json!({"type": "max_tool_calls", "max": 3}));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Check {
    /// The output equals `value`, or the case's expected output when
    /// `value` is absent. A string output that holds JSON equals a
    /// non-string value it parses to.
    Equals {
        /// What to compare with.
        value: Option<Value>,
    },
    /// The output's text contains `text`.
    Contains {
        /// The text to find.
        text: String,
        /// Compare without regard to case.
        ignore_case: bool,
    },
    /// The output is valid against a JSON Schema (the dialect of
    /// [`Parameters`]).
    JsonSchema {
        /// The schema.
        schema: Value,
    },
    /// Every one of these tools was called at least once.
    ToolsCalled {
        /// Tool names.
        tools: Vec<String>,
    },
    /// The tools called, by name, match `tools` under `order`.
    Trajectory {
        /// The expected calls, by name.
        tools: Vec<String>,
        /// How to compare.
        order: Order,
    },
    /// Some call of `tool` has these arguments: every field given here is
    /// there with this value (objects compared the same way, recursively;
    /// other values exactly).
    Arguments {
        /// Tool name.
        tool: String,
        /// The expected arguments.
        arguments: Value,
    },
    /// At most `max` tool calls.
    MaxToolCalls {
        /// The limit.
        max: u64,
    },
    /// At most `max` model requests.
    MaxRequests {
        /// The limit.
        max: u64,
    },
    /// At most `max` tokens in all (input, output, cached, cache writes).
    MaxTokens {
        /// The limit.
        max: u64,
    },
    /// A reported cost of at most `max`; a run that reported none fails.
    MaxCost {
        /// The limit.
        max: f64,
    },
    /// At most `max` milliseconds of wall time.
    MaxMillis {
        /// The limit.
        max: u64,
    },
}

crate::serde_macros::json_tagged! {
    Serialize, Deserialize for Check, tag = "type", deny {
        Equals = "equals" { value [opt] },
        Contains = "contains" { text, ignore_case [default, skip_if = is_false] },
        JsonSchema = "json_schema" { schema },
        ToolsCalled = "tools_called" { tools },
        Trajectory = "trajectory" { tools, order [default] },
        Arguments = "arguments" { tool, arguments },
        MaxToolCalls = "max_tool_calls" { max },
        MaxRequests = "max_requests" { max },
        MaxTokens = "max_tokens" { max },
        MaxCost = "max_cost" { max },
        MaxMillis = "max_millis" { max },
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // `skip_if` `skip_serializing_if` passes a reference
fn is_false(b: &bool) -> bool {
    !b
}

impl Check {
    /// [`Check::Equals`] the case's expected output.
    pub fn equals_expected() -> Check {
        Check::Equals { value: None }
    }
    /// [`Check::Equals`] `value`.
    pub fn equals(value: impl Into<Value>) -> Check {
        Check::Equals {
            value: Some(value.into()),
        }
    }
    /// [`Check::Contains`] `text`, case-sensitive.
    pub fn contains(text: impl Into<String>) -> Check {
        Check::Contains {
            text: text.into(),
            ignore_case: false,
        }
    }
    /// [`Check::JsonSchema`].
    pub fn json_schema(schema: Value) -> Check {
        Check::JsonSchema { schema }
    }
    /// [`Check::ToolsCalled`].
    pub fn tools_called<I: IntoIterator<Item = S>, S: Into<String>>(tools: I) -> Check {
        Check::ToolsCalled {
            tools: tools.into_iter().map(Into::into).collect(),
        }
    }
    /// [`Check::Trajectory`].
    pub fn trajectory<I: IntoIterator<Item = S>, S: Into<String>>(tools: I, order: Order) -> Check {
        Check::Trajectory {
            tools: tools.into_iter().map(Into::into).collect(),
            order,
        }
    }
    /// [`Check::Arguments`].
    pub fn arguments(tool: impl Into<String>, arguments: Value) -> Check {
        Check::Arguments {
            tool: tool.into(),
            arguments,
        }
    }
    /// [`Check::MaxToolCalls`].
    pub fn max_tool_calls(max: u64) -> Check {
        Check::MaxToolCalls { max }
    }
    /// [`Check::MaxRequests`].
    pub fn max_requests(max: u64) -> Check {
        Check::MaxRequests { max }
    }
    /// [`Check::MaxTokens`].
    pub fn max_tokens(max: u64) -> Check {
        Check::MaxTokens { max }
    }
    /// [`Check::MaxCost`].
    pub fn max_cost(max: f64) -> Check {
        Check::MaxCost { max }
    }
    /// [`Check::MaxMillis`].
    pub fn max_millis(max: u64) -> Check {
        Check::MaxMillis { max }
    }
}

impl Evaluator for Check {
    fn name(&self) -> String {
        match self {
            Check::Equals { .. } => "equals".into(),
            Check::Contains { text, .. } => {
                format!("contains {:?}", crate::util::excerpt(text, 40))
            }
            Check::JsonSchema { .. } => "json_schema".into(),
            Check::ToolsCalled { .. } => "tools_called".into(),
            Check::Trajectory { .. } => "trajectory".into(),
            Check::Arguments { tool, .. } => format!("arguments of {tool}"),
            Check::MaxToolCalls { .. } => "max_tool_calls".into(),
            Check::MaxRequests { .. } => "max_requests".into(),
            Check::MaxTokens { .. } => "max_tokens".into(),
            Check::MaxCost { .. } => "max_cost".into(),
            Check::MaxMillis { .. } => "max_millis".into(),
        }
    }

    fn evaluate(&self, run: &Run) -> Verdict {
        match self {
            Check::Equals { value } => equals(run, value.as_ref()),
            Check::Contains { text, ignore_case } => {
                let out = run.output_text();
                let found = if *ignore_case {
                    out.to_lowercase().contains(&text.to_lowercase())
                } else {
                    out.contains(text.as_str())
                };
                if found {
                    Verdict::pass(format!("found {}", show(text)))
                } else {
                    Verdict::fail(format!("{} not in {}", show(text), show(&out)))
                }
            }
            Check::JsonSchema { schema } => json_schema(run, schema),
            Check::ToolsCalled { tools } => {
                let called = run.tool_names();
                let missing: Vec<&str> = tools
                    .iter()
                    .map(String::as_str)
                    .filter(|t| !called.contains(t))
                    .collect();
                let share = if tools.is_empty() {
                    1.0
                } else {
                    1.0 - missing.len() as f64 / tools.len() as f64
                };
                if missing.is_empty() {
                    Verdict::scored(share, 1.0, "every expected tool was called")
                } else {
                    Verdict::scored(share, 1.0, format!("not called: {}", missing.join(", ")))
                }
            }
            Check::Trajectory { tools, order } => trajectory(run, tools, *order),
            Check::Arguments { tool, arguments } => {
                let calls: Vec<&Value> = run
                    .tool_calls
                    .iter()
                    .filter(|c| c.name == *tool)
                    .map(|c| &c.arguments)
                    .collect();
                if calls.is_empty() {
                    return Verdict::fail(format!("{tool} was not called"));
                }
                if let Some(i) = calls.iter().position(|a| contains_json(a, arguments)) {
                    return Verdict::pass(format!("call {} of {tool} matches", i + 1));
                }
                let sent: Vec<String> = calls.iter().map(|a| show(&a.to_string())).collect();
                Verdict::fail(format!(
                    "no call of {tool} has {}; sent: {}",
                    show(&arguments.to_string()),
                    sent.join(", ")
                ))
            }
            Check::MaxToolCalls { max } => limit(run.tool_calls.len() as u64, *max, "tool call(s)"),
            Check::MaxRequests { max } => limit(u64::from(run.requests), *max, "request(s)"),
            Check::MaxTokens { max } => limit(run.usage.total(), *max, "token(s)"),
            Check::MaxMillis { max } => limit(run.duration_ms, *max, "ms"),
            Check::MaxCost { max } => match run.cost {
                None => Verdict::fail("no cost reported").with_label("unknown"),
                Some(cost) if cost <= *max => Verdict::pass(format!("cost {cost}, within {max}")),
                Some(cost) => Verdict::fail(format!("cost {cost}, over the limit of {max}")),
            },
        }
    }
}

fn limit(value: u64, max: u64, unit: &str) -> Verdict {
    if value <= max {
        Verdict::pass(format!("{value} {unit}, within {max}"))
    } else {
        Verdict::fail(format!("{value} {unit}, over the limit of {max}"))
    }
}

fn equals(run: &Run, value: Option<&Value>) -> Verdict {
    let Some(want) = value.or(run.expected.as_ref()) else {
        return Verdict::fail("no expected output to compare with").with_label("no_expected");
    };
    let same = run.output == *want
        || (!want.is_string()
            && run.output.is_string()
            && run.output_json().as_ref() == Some(want));
    if same {
        Verdict::pass("equal")
    } else {
        Verdict::fail(format!(
            "expected {}, got {}",
            show(&want.to_string()),
            show(&run.output.to_string())
        ))
    }
}

fn json_schema(run: &Run, schema: &Value) -> Verdict {
    let params = match Parameters::from_json_schema(schema.clone()) {
        Ok(p) => p,
        Err(e) => {
            return Verdict::fail(format!("the schema is invalid: {e}")).with_label("bad_schema");
        }
    };
    let Some(value) = run.output_json() else {
        return Verdict::fail(format!(
            "the output is not JSON: {}",
            show(&run.output_text())
        ))
        .with_label("not_json");
    };
    match params.validate(&value) {
        Ok(()) => Verdict::pass("valid against the schema"),
        Err(e) => Verdict::fail(e.problems().join("; ")).with_label("invalid"),
    }
}

fn trajectory(run: &Run, tools: &[String], order: Order) -> Verdict {
    let called = run.tool_names();
    let want: Vec<&str> = tools.iter().map(String::as_str).collect();
    let ok = match order {
        Order::Exact => called == want,
        Order::AnyOrder => sorted(&called) == sorted(&want),
        Order::InOrder => {
            let mut it = called.iter();
            want.iter().all(|w| it.any(|c| c == w))
        }
        Order::Subset => {
            let mut left = called.clone();
            want.iter().all(|w| match left.iter().position(|c| c == w) {
                Some(i) => {
                    left.swap_remove(i);
                    true
                }
                None => false,
            })
        }
    };
    let reason = format!(
        "called [{}], expected [{}] ({order:?})",
        called.join(", "),
        want.join(", ")
    );
    if ok {
        Verdict::pass(reason)
    } else {
        Verdict::fail(reason)
    }
}

fn sorted<'a>(names: &[&'a str]) -> Vec<&'a str> {
    let mut v = names.to_vec();
    v.sort_unstable();
    v
}

/// Whether `have` holds everything `want` has: objects field by field
/// (extra fields in `have` allowed), everything else equal.
fn contains_json(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| h.get(k).is_some_and(|hv| contains_json(hv, wv))),
        _ => have == want,
    }
}

/// Text quoted for a reason: at most 200 characters.
fn show(text: &str) -> String {
    format!("{:?}", crate::util::excerpt(text, 200))
}

/// Equality after both the output and the expected output are read as a
/// `T` (a structured answer): field order, whitespace and fields `T` does
/// not have make no difference. The output may be a JSON string (as an
/// agent's answer is) or a JSON value.
///
/// # Examples
///
/// ```
/// use pikuri::evals::{Evaluator, Run, TypedEquals};
///
/// #[derive(serde::Deserialize, PartialEq, Debug)]
/// struct City { name: String, country: String }
///
/// let run = Run::from_output(r#"{"country": "FR", "name": "Paris", "note": "x"}"#)
///     .with_expected(serde_json::json!({"name": "Paris", "country": "FR"}));
/// assert!(TypedEquals::<City>::new().evaluate(&run).pass);
/// let run = Run::from_output("Paris").with_expected(serde_json::json!({"name": "Paris", "country": "FR"}));
/// assert_eq!(TypedEquals::<City>::new().evaluate(&run).label.as_deref(), Some("not_typed"));
/// ```
pub struct TypedEquals<T> {
    _type: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for TypedEquals<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TypedEquals<{}>", std::any::type_name::<T>())
    }
}

impl<T> Default for TypedEquals<T> {
    fn default() -> Self {
        TypedEquals { _type: PhantomData }
    }
}

impl<T> TypedEquals<T> {
    /// Compare with the case's expected output.
    pub fn new() -> TypedEquals<T> {
        TypedEquals::default()
    }
}

impl<T: DeserializeOwned + PartialEq + fmt::Debug + 'static> Evaluator for TypedEquals<T> {
    fn name(&self) -> String {
        let full = std::any::type_name::<T>();
        format!("typed_equals<{}>", full.rsplit("::").next().unwrap_or(full))
    }

    fn evaluate(&self, run: &Run) -> Verdict {
        let Some(expected) = &run.expected else {
            return Verdict::fail("no expected output to compare with").with_label("no_expected");
        };
        let want: T = match serde_json::from_value(expected.clone()) {
            Ok(v) => v,
            Err(e) => {
                return Verdict::fail(format!("the expected output is not a {}: {e}", self.name()))
                    .with_label("bad_expected");
            }
        };
        let got = run.output_json().map(serde_json::from_value::<T>);
        match got {
            Some(Ok(got)) if got == want => Verdict::pass("equal"),
            Some(Ok(got)) => Verdict::fail(format!("expected {want:?}, got {got:?}")),
            Some(Err(e)) => Verdict::fail(format!("the output does not read as the type: {e}"))
                .with_label("not_typed"),
            None => Verdict::fail(format!(
                "the output is not JSON: {}",
                show(&run.output_text())
            ))
            .with_label("not_typed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Check, Order};

    #[test]
    fn each_check_is_stored_as_its_tagged_object() {
        let checks = [
            (Check::equals_expected(), r#"{"type":"equals"}"#),
            (Check::equals(1), r#"{"type":"equals","value":1}"#),
            (Check::contains("a"), r#"{"type":"contains","text":"a"}"#),
            (
                Check::Contains {
                    text: "a".into(),
                    ignore_case: true,
                },
                r#"{"type":"contains","text":"a","ignore_case":true}"#,
            ),
            (
                Check::json_schema(json!({})),
                r#"{"type":"json_schema","schema":{}}"#,
            ),
            (
                Check::tools_called(["t"]),
                r#"{"type":"tools_called","tools":["t"]}"#,
            ),
            (
                Check::trajectory(["t"], Order::AnyOrder),
                r#"{"type":"trajectory","tools":["t"],"order":"any_order"}"#,
            ),
            (
                Check::arguments("t", json!({"a": 1})),
                r#"{"type":"arguments","tool":"t","arguments":{"a":1}}"#,
            ),
            (
                Check::max_tool_calls(1),
                r#"{"type":"max_tool_calls","max":1}"#,
            ),
            (Check::max_requests(2), r#"{"type":"max_requests","max":2}"#),
            (Check::max_tokens(3), r#"{"type":"max_tokens","max":3}"#),
            (Check::max_cost(0.5), r#"{"type":"max_cost","max":0.5}"#),
            (Check::max_millis(4), r#"{"type":"max_millis","max":4}"#),
        ];
        for (check, stored) in checks {
            assert_eq!(serde_json::to_string(&check).unwrap(), stored);
            assert_eq!(serde_json::from_str::<Check>(stored).unwrap(), check);
        }
        for (order, name) in [
            (Order::Exact, "exact"),
            (Order::InOrder, "in_order"),
            (Order::Subset, "subset"),
        ] {
            assert_eq!(serde_json::to_value(order).unwrap(), json!(name));
        }
    }

    #[test]
    fn a_stored_check_reads_defaults_and_refuses_unknown_fields() {
        let read = |v: serde_json::Value| serde_json::from_value::<Check>(v);
        assert_eq!(
            read(json!({"tools": ["t"], "type": "trajectory"})).unwrap(),
            Check::trajectory(["t"], Order::Exact)
        );
        assert_eq!(
            read(json!({"type": "equals", "value": null})).unwrap(),
            Check::equals_expected()
        );
        for (bad, error) in [
            (
                json!({"type": "contains", "text": "a", "case": true}),
                "unknown field `case`",
            ),
            (
                json!({"type": "equals", "value": 1, "x": 2}),
                "unknown field `x`",
            ),
            (json!({"type": "contains"}), "missing field `text`"),
            (
                json!({"type": "max_cost", "max": "1"}),
                "invalid type: string \"1\"",
            ),
            (
                json!({"type": "max_seconds", "max": 1}),
                "unknown variant `max_seconds`",
            ),
            (json!({"max": 1}), "missing field `type`"),
            (
                json!({"type": "trajectory", "tools": [], "order": "any"}),
                "unknown variant `any`",
            ),
        ] {
            let e = read(bad.clone()).unwrap_err().to_string();
            assert!(e.starts_with(error), "{bad}: {e}");
        }
        // What serde's derive refused in a file's text: a key twice, the
        // first unknown key named.
        for (bad, error) in [
            (
                r#"{"type":"contains","text":"a","text":"b"}"#,
                "duplicate field `text`",
            ),
            (
                r#"{"type":"contains","type":"contains","text":"a"}"#,
                "duplicate field `type`",
            ),
            (
                r#"{"type":"contains","b":1,"a":2,"text":"x"}"#,
                "unknown field `b`",
            ),
        ] {
            let e = serde_json::from_str::<Check>(bad).unwrap_err().to_string();
            assert!(e.starts_with(error), "{bad}: {e}");
        }
    }
}
