//! The [`Parameters`] schema builder and argument validation.
//!
//! Parameter types, the JSON Schema they produce, and the validation whose
//! message goes back to the model. The rules are documented on
//! [`Parameters`], the public home of this mechanism.

use std::fmt;

use serde_json::{Map, Value, json};

use super::excerpt;

/// How many characters of a value a problem message quotes.
const QUOTE_LIMIT: usize = 80;
/// How many bad items of one array are reported individually.
const ITEM_PROBLEM_LIMIT: usize = 5;

/// The parameters a tool takes, as a JSON Schema object; immutable once built.
///
/// A tool's parameters are one flat JSON object. Each parameter has a name, a
/// description for the model, and one of a few types: string, integer,
/// number, boolean, an array of one of those, or a string from a fixed list
/// (enum). [`Parameters::to_json`] is the JSON Schema sent to the server;
/// [`Parameters::validate`] checks what the model sent back.
///
/// # Examples
///
/// ```
/// use pikuri::{ItemType, Parameters};
/// use serde_json::json;
///
/// let params = Parameters::builder()
///     .required_string("query", "What to search for.")
///     .optional_integer("limit", "At most this many results.")
///     .optional_array("sites", "Only these sites.", ItemType::String)
///     .build();
/// assert!(params.validate(&json!({"query": "cats", "limit": 3})).is_ok());
///
/// let err = params.validate(&json!({"limit": "ten"})).unwrap_err();
/// assert_eq!(
///     err.problems(),
///     [
///         "missing required parameter `query` (string)",
///         "parameter `limit`: expected integer, got string \"ten\"",
///     ]
/// );
/// ```
///
/// # Validation feeds the model
///
/// A model that gets its arguments wrong needs to know everything that is
/// wrong at once, and what was expected, or it fixes one problem per round.
/// So validation does not stop at the first problem: a [`ValidationError`]
/// lists every missing, mistyped, out-of-list and unknown parameter, one per
/// line, and then reprints the schema. Its `Display` is meant to be sent to
/// the model verbatim (the agent loop prefixes it with `"Error: "`). Values
/// quoted in a message are cut at 80 characters, so a model that pastes a
/// whole file into the wrong parameter does not get it echoed back.
///
/// # Differences from strict JSON Schema
///
/// The schema says exactly what is wanted; validation is a little more
/// forgiving about what small models actually send, and the agent loop
/// normalizes the accepted arguments before the tool sees them:
///
/// - An `integer` parameter accepts a number with a zero fraction (`3.0`);
///   the tool receives the integer `3`, so `as_i64()` works.
/// - An optional parameter sent as `null` counts as not sent; the tool does
///   not see the key at all.
/// - The schema has `"additionalProperties": false`, and validation enforces
///   it: an unknown parameter name is a problem, usually a typo worth
///   reporting.
/// - Properties appear in the schema in alphabetical order, as `serde_json`
///   keeps object keys sorted (unless some crate in the build turns on its
///   `preserve_order` feature); problems are listed in declaration order.
///
/// No defaults are applied (as in pikuri): a tool reads an optional
/// parameter with `args.get("name")` and supplies its own default.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameters {
    params: Vec<Param>,
    schema: Value,
}

/// Builds [`Parameters`]; see [`Parameters::builder`].
///
/// Each method adds one parameter and takes its name and a description
/// written for the model.
///
/// # Panics
///
/// The methods panic on a programming error, so that it shows on the first
/// run rather than as a confused model:
///
/// - a parameter name used twice,
/// - an empty parameter name,
/// - an enum parameter with no values.
///
/// ```should_panic
/// use pikuri::Parameters;
/// let _ = Parameters::builder()
///     .required_string("path", "A file.")
///     .optional_string("path", "Another file."); // panics: duplicate `path`
/// ```
#[derive(Clone, Debug, Default)]
pub struct ParametersBuilder {
    params: Vec<Param>,
}

/// The type of the items of an array parameter (see
/// [`ParametersBuilder::required_array`]).
///
/// # Examples
///
/// ```
/// use pikuri::{ItemType, Parameters};
/// use serde_json::json;
/// let params = Parameters::builder()
///     .required_array("ids", "Issue numbers.", ItemType::Integer)
///     .build();
/// assert_eq!(
///     params.to_json()["properties"]["ids"],
///     json!({"type": "array", "description": "Issue numbers.", "items": {"type": "integer"}})
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ItemType {
    /// A JSON string.
    String,
    /// A JSON integer (a number with a zero fraction, like `3.0`, is accepted).
    Integer,
    /// Any JSON number.
    Number,
    /// `true` or `false` (not the strings `"true"` / `"false"`).
    Boolean,
}

/// Why a tool's arguments were rejected: every problem found, and the schema.
///
/// `Display` is the text sent to the model: the problems, one per line, then
/// the expected schema as pretty JSON. See [`Parameters`].
///
/// # Examples
///
/// ```
/// use pikuri::Parameters;
/// use serde_json::json;
/// let params = Parameters::builder().required_boolean("force", "Overwrite.").build();
/// let err = params.validate(&json!({"force": "yes", "mode": 1})).unwrap_err();
/// assert_eq!(err.problems().len(), 2);
/// let text = err.to_string();
/// assert!(text.starts_with(
///     "invalid arguments:\n\
///      - parameter `force`: expected boolean, got string \"yes\"\n\
///      - unknown parameter `mode`; the parameters are: `force`\n\
///      expected schema:\n{"
/// ));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationError {
    problems: Vec<String>,
    schema: String,
}

#[derive(Clone, Debug, PartialEq)]
struct Param {
    name: String,
    description: String,
    kind: Kind,
    required: bool,
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Scalar(ItemType),
    Array(ItemType),
    Enum(Vec<String>),
}

impl Parameters {
    /// A builder with no parameters yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Parameters;
    /// let params = Parameters::builder().required_string("path", "A file.").build();
    /// assert_eq!(params.to_json()["required"][0], "path");
    /// ```
    pub fn builder() -> ParametersBuilder {
        ParametersBuilder::default()
    }

    /// No parameters: the tool accepts only `{}` (or no arguments at all).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Parameters;
    /// use serde_json::json;
    /// let params = Parameters::empty();
    /// assert!(params.is_empty());
    /// assert!(params.validate(&json!({})).is_ok());
    /// assert!(params.validate(&json!({"x": 1})).is_err());
    /// ```
    pub fn empty() -> Parameters {
        ParametersBuilder::default().build()
    }

    /// Whether there are no parameters.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Parameters;
    /// assert!(!Parameters::builder().optional_string("q", "Query.").build().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The JSON Schema sent to the server as the tool's `parameters`.
    ///
    /// It is always an object schema with `properties`, `required` (both
    /// present even when empty) and `"additionalProperties": false`.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Parameters;
    /// use serde_json::json;
    /// let params = Parameters::builder()
    ///     .required_enum("unit", "Temperature unit.", &["celsius", "fahrenheit"])
    ///     .build();
    /// assert_eq!(
    ///     *params.to_json(),
    ///     json!({
    ///         "type": "object",
    ///         "properties": {
    ///             "unit": {
    ///                 "type": "string",
    ///                 "description": "Temperature unit.",
    ///                 "enum": ["celsius", "fahrenheit"]
    ///             }
    ///         },
    ///         "required": ["unit"],
    ///         "additionalProperties": false
    ///     })
    /// );
    /// ```
    pub fn to_json(&self) -> &Value {
        &self.schema
    }

    /// Check arguments against the schema, reporting every problem.
    ///
    /// `args` must be a JSON object. See [`Parameters`] for where validation
    /// is more forgiving than the schema it prints.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Parameters;
    /// use serde_json::json;
    /// let params = Parameters::builder().required_integer("n", "A count.").build();
    /// assert!(params.validate(&json!({"n": 3})).is_ok());
    /// assert!(params.validate(&json!({"n": 3.0})).is_ok());
    /// assert!(params.validate(&json!({"n": 3.5})).is_err());
    /// let err = params.validate(&json!([3])).unwrap_err();
    /// assert_eq!(err.problems(), ["the arguments must be a JSON object, got array [3]"]);
    /// ```
    pub fn validate(&self, args: &Value) -> Result<(), ValidationError> {
        let problems = self.problems(args);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ValidationError {
                problems,
                schema: format!("{:#}", self.schema),
            })
        }
    }

    /// Normalize arguments that passed [`validate`](Parameters::validate):
    /// integral numbers of integer parameters become JSON integers, and
    /// optional parameters sent as `null` are removed.
    pub(crate) fn normalize(&self, mut args: Value) -> Value {
        let Some(obj) = args.as_object_mut() else {
            return args;
        };
        for p in &self.params {
            if !p.required && obj.get(&p.name).is_some_and(Value::is_null) {
                obj.remove(&p.name);
                continue;
            }
            match (&p.kind, obj.get_mut(&p.name)) {
                (Kind::Scalar(ItemType::Integer), Some(v)) => normalize_integer(v),
                (Kind::Array(ItemType::Integer), Some(Value::Array(items))) => {
                    items.iter_mut().for_each(normalize_integer);
                }
                _ => {}
            }
        }
        args
    }

    fn problems(&self, args: &Value) -> Vec<String> {
        let Some(obj) = args.as_object() else {
            return vec![format!(
                "the arguments must be a JSON object, got {}",
                describe(args)
            )];
        };
        let mut problems = Vec::new();
        for p in &self.params {
            match obj.get(&p.name) {
                None if p.required => problems.push(format!(
                    "missing required parameter `{}` ({})",
                    p.name,
                    p.kind.describe()
                )),
                None => {}
                Some(Value::Null) if !p.required => {}
                Some(value) => p.kind.check(&p.name, value, &mut problems),
            }
        }
        for key in obj.keys() {
            if !self.params.iter().any(|p| p.name == *key) {
                problems.push(format!(
                    "unknown parameter `{}`; {}",
                    excerpt(key, QUOTE_LIMIT),
                    self.accepted_names()
                ));
            }
        }
        problems
    }

    fn accepted_names(&self) -> String {
        if self.params.is_empty() {
            return "this tool takes no parameters".to_string();
        }
        let names: Vec<String> = self
            .params
            .iter()
            .map(|p| format!("`{}`", p.name))
            .collect();
        format!("the parameters are: {}", names.join(", "))
    }
}

impl Default for Parameters {
    /// The same as [`Parameters::empty`].
    fn default() -> Parameters {
        Parameters::empty()
    }
}

impl ParametersBuilder {
    /// A required string parameter.
    #[must_use]
    pub fn required_string(self, name: &str, description: &str) -> ParametersBuilder {
        self.add(name, description, Kind::Scalar(ItemType::String), true)
    }

    /// An optional string parameter.
    #[must_use]
    pub fn optional_string(self, name: &str, description: &str) -> ParametersBuilder {
        self.add(name, description, Kind::Scalar(ItemType::String), false)
    }

    /// A required integer parameter.
    #[must_use]
    pub fn required_integer(self, name: &str, description: &str) -> ParametersBuilder {
        self.add(name, description, Kind::Scalar(ItemType::Integer), true)
    }

    /// An optional integer parameter.
    #[must_use]
    pub fn optional_integer(self, name: &str, description: &str) -> ParametersBuilder {
        self.add(name, description, Kind::Scalar(ItemType::Integer), false)
    }

    /// A required number parameter (integer or fractional).
    #[must_use]
    pub fn required_number(self, name: &str, description: &str) -> ParametersBuilder {
        self.add(name, description, Kind::Scalar(ItemType::Number), true)
    }

    /// An optional number parameter (integer or fractional).
    #[must_use]
    pub fn optional_number(self, name: &str, description: &str) -> ParametersBuilder {
        self.add(name, description, Kind::Scalar(ItemType::Number), false)
    }

    /// A required boolean parameter.
    #[must_use]
    pub fn required_boolean(self, name: &str, description: &str) -> ParametersBuilder {
        self.add(name, description, Kind::Scalar(ItemType::Boolean), true)
    }

    /// An optional boolean parameter.
    #[must_use]
    pub fn optional_boolean(self, name: &str, description: &str) -> ParametersBuilder {
        self.add(name, description, Kind::Scalar(ItemType::Boolean), false)
    }

    /// A required array parameter whose items are all of type `items`.
    #[must_use]
    pub fn required_array(
        self,
        name: &str,
        description: &str,
        items: ItemType,
    ) -> ParametersBuilder {
        self.add(name, description, Kind::Array(items), true)
    }

    /// An optional array parameter whose items are all of type `items`.
    #[must_use]
    pub fn optional_array(
        self,
        name: &str,
        description: &str,
        items: ItemType,
    ) -> ParametersBuilder {
        self.add(name, description, Kind::Array(items), false)
    }

    /// A required string parameter that must be one of `values`.
    ///
    /// # Panics
    ///
    /// If `values` is empty (and, like every method, on a duplicate or empty
    /// name).
    #[must_use]
    pub fn required_enum(
        self,
        name: &str,
        description: &str,
        values: &[&str],
    ) -> ParametersBuilder {
        let kind = enum_kind(name, values);
        self.add(name, description, kind, true)
    }

    /// An optional string parameter that, when sent, must be one of `values`.
    ///
    /// # Panics
    ///
    /// If `values` is empty (and, like every method, on a duplicate or empty
    /// name).
    #[must_use]
    pub fn optional_enum(
        self,
        name: &str,
        description: &str,
        values: &[&str],
    ) -> ParametersBuilder {
        let kind = enum_kind(name, values);
        self.add(name, description, kind, false)
    }

    /// The finished, immutable [`Parameters`].
    pub fn build(self) -> Parameters {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for p in &self.params {
            properties.insert(p.name.clone(), p.kind.schema(&p.description));
            if p.required {
                required.push(Value::from(p.name.as_str()));
            }
        }
        Parameters {
            schema: json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            }),
            params: self.params,
        }
    }

    fn add(
        mut self,
        name: &str,
        description: &str,
        kind: Kind,
        required: bool,
    ) -> ParametersBuilder {
        assert!(
            !name.is_empty(),
            "Parameters: a parameter name must not be empty"
        );
        assert!(
            !self.params.iter().any(|p| p.name == name),
            "Parameters: duplicate parameter name `{name}`"
        );
        self.params.push(Param {
            name: name.to_string(),
            description: description.to_string(),
            kind,
            required,
        });
        self
    }
}

fn enum_kind(name: &str, values: &[&str]) -> Kind {
    assert!(
        !values.is_empty(),
        "Parameters: enum parameter `{name}` has no values"
    );
    Kind::Enum(values.iter().map(|v| (*v).to_string()).collect())
}

impl ValidationError {
    /// The problems found, one sentence each, in the order reported.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Parameters;
    /// use serde_json::json;
    /// let params = Parameters::builder().required_string("q", "Query.").build();
    /// let err = params.validate(&json!({})).unwrap_err();
    /// assert_eq!(err.problems(), ["missing required parameter `q` (string)"]);
    /// ```
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid arguments:\n")?;
        for problem in &self.problems {
            writeln!(f, "- {problem}")?;
        }
        write!(f, "expected schema:\n{}", self.schema)
    }
}

impl std::error::Error for ValidationError {}

impl ItemType {
    fn name(self) -> &'static str {
        match self {
            ItemType::String => "string",
            ItemType::Integer => "integer",
            ItemType::Number => "number",
            ItemType::Boolean => "boolean",
        }
    }

    fn matches(self, value: &Value) -> bool {
        match self {
            ItemType::String => value.is_string(),
            ItemType::Integer => is_integer(value),
            ItemType::Number => value.is_number(),
            ItemType::Boolean => value.is_boolean(),
        }
    }
}

impl Kind {
    fn schema(&self, description: &str) -> Value {
        match self {
            Kind::Scalar(t) => json!({"type": t.name(), "description": description}),
            Kind::Array(t) => json!({
                "type": "array",
                "description": description,
                "items": {"type": t.name()},
            }),
            Kind::Enum(values) => json!({
                "type": "string",
                "description": description,
                "enum": values,
            }),
        }
    }

    /// What the parameter expects, for messages: `integer`, `array of
    /// strings`, `one of "a", "b"`.
    fn describe(&self) -> String {
        match self {
            Kind::Scalar(t) => t.name().to_string(),
            Kind::Array(t) => format!("array of {}s", t.name()),
            Kind::Enum(values) => format!("one of {}", quote_list(values)),
        }
    }

    fn check(&self, name: &str, value: &Value, problems: &mut Vec<String>) {
        match self {
            Kind::Scalar(t) => {
                if !t.matches(value) {
                    problems.push(format!(
                        "parameter `{name}`: expected {}, got {}",
                        t.name(),
                        describe(value)
                    ));
                }
            }
            Kind::Enum(values) => match value.as_str() {
                Some(s) if values.iter().any(|v| v == s) => {}
                Some(s) => problems.push(format!(
                    "parameter `{name}`: {} is not one of {}",
                    quote_str(s),
                    quote_list(values)
                )),
                None => problems.push(format!(
                    "parameter `{name}`: expected {}, got {}",
                    self.describe(),
                    describe(value)
                )),
            },
            Kind::Array(t) => {
                let Some(items) = value.as_array() else {
                    problems.push(format!(
                        "parameter `{name}`: expected {}, got {}",
                        self.describe(),
                        describe(value)
                    ));
                    return;
                };
                let mut bad = items
                    .iter()
                    .enumerate()
                    .filter(|(_, item)| !t.matches(item));
                for (i, item) in bad.by_ref().take(ITEM_PROBLEM_LIMIT) {
                    problems.push(format!(
                        "parameter `{name}`: item [{i}]: expected {}, got {}",
                        t.name(),
                        describe(item)
                    ));
                }
                let more = bad.count();
                if more > 0 {
                    problems.push(format!(
                        "parameter `{name}`: {more} more items are not {}s",
                        t.name()
                    ));
                }
            }
        }
    }
}

/// The bounds of an `f64` that converts to `i64` without saturating:
/// `[-2^63, 2^63)`.
const I64_LOW: f64 = -9_223_372_036_854_775_808.0;
const I64_HIGH: f64 = 9_223_372_036_854_775_808.0;

/// A JSON integer, or a number with a zero fraction that fits an `i64`.
fn is_integer(value: &Value) -> bool {
    if value.is_i64() || value.is_u64() {
        return true;
    }
    value
        .as_f64()
        .is_some_and(|f| f.fract() == 0.0 && (I64_LOW..I64_HIGH).contains(&f))
}

fn normalize_integer(value: &mut Value) {
    if value.is_f64()
        && let Some(f) = value.as_f64()
        && is_integer(value)
    {
        *value = Value::from(f as i64);
    }
}

/// A value for a problem message: its JSON type, then the value, bounded.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) if n.is_f64() => format!("number {n}"),
        Value::Number(n) => format!("integer {n}"),
        Value::String(s) => format!("string {}", quote_str(s)),
        Value::Array(_) => format!("array {}", excerpt(&value.to_string(), QUOTE_LIMIT)),
        Value::Object(_) => format!("object {}", excerpt(&value.to_string(), QUOTE_LIMIT)),
    }
}

/// A string as a JSON string literal, cut at [`QUOTE_LIMIT`] characters.
fn quote_str(s: &str) -> String {
    Value::from(excerpt(s, QUOTE_LIMIT).into_owned()).to_string()
}

fn quote_list(values: &[String]) -> String {
    values
        .iter()
        .map(|v| quote_str(v))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Parameters {
        Parameters::builder()
            .required_string("query", "The query.")
            .optional_integer("limit", "Max results.")
            .optional_number("threshold", "Score cut-off.")
            .optional_boolean("exact", "Exact match.")
            .optional_array("tags", "Tags.", ItemType::String)
            .optional_enum("order", "Sort order.", &["asc", "desc"])
            .build()
    }

    #[test]
    fn empty_schema_has_every_key() {
        assert_eq!(
            *Parameters::empty().to_json(),
            json!({
                "type": "object",
                "properties": {},
                "required": [],
                "additionalProperties": false
            })
        );
        assert_eq!(Parameters::default(), Parameters::empty());
    }

    #[test]
    fn schema_has_exact_shape() {
        let params = Parameters::builder()
            .required_string("s", "a string")
            .optional_string("os", "opt string")
            .required_integer("i", "an integer")
            .optional_integer("oi", "opt integer")
            .required_number("n", "a number")
            .optional_number("on", "opt number")
            .required_boolean("b", "a boolean")
            .optional_boolean("ob", "opt boolean")
            .required_array("a", "an array", ItemType::Number)
            .optional_array("oa", "opt array", ItemType::Boolean)
            .required_enum("e", "an enum", &["x", "y"])
            .optional_enum("oe", "opt enum", &["z"])
            .build();
        assert_eq!(
            *params.to_json(),
            json!({
                "type": "object",
                "properties": {
                    "s": {"type": "string", "description": "a string"},
                    "os": {"type": "string", "description": "opt string"},
                    "i": {"type": "integer", "description": "an integer"},
                    "oi": {"type": "integer", "description": "opt integer"},
                    "n": {"type": "number", "description": "a number"},
                    "on": {"type": "number", "description": "opt number"},
                    "b": {"type": "boolean", "description": "a boolean"},
                    "ob": {"type": "boolean", "description": "opt boolean"},
                    "a": {"type": "array", "description": "an array", "items": {"type": "number"}},
                    "oa": {"type": "array", "description": "opt array", "items": {"type": "boolean"}},
                    "e": {"type": "string", "description": "an enum", "enum": ["x", "y"]},
                    "oe": {"type": "string", "description": "opt enum", "enum": ["z"]}
                },
                "required": ["s", "i", "n", "b", "a", "e"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    #[should_panic(expected = "duplicate parameter name `q`")]
    fn duplicate_name_panics() {
        let _ = Parameters::builder()
            .required_string("q", "one")
            .optional_integer("q", "two");
    }

    #[test]
    #[should_panic(expected = "must not be empty")]
    fn empty_name_panics() {
        let _ = Parameters::builder().required_string("", "nameless");
    }

    #[test]
    #[should_panic(expected = "enum parameter `e` has no values")]
    fn empty_enum_panics() {
        let _ = Parameters::builder().required_enum("e", "nothing", &[]);
    }

    #[test]
    fn valid_arguments_pass() {
        let params = sample();
        assert!(params.validate(&json!({"query": "cats"})).is_ok());
        assert!(
            params
                .validate(&json!({
                    "query": "cats",
                    "limit": 10,
                    "threshold": 0.5,
                    "exact": false,
                    "tags": ["a", "b"],
                    "order": "desc"
                }))
                .is_ok()
        );
        // A number with a zero fraction is an integer; an integer is a number.
        assert!(
            params
                .validate(&json!({"query": "q", "limit": 3.0, "threshold": 1}))
                .is_ok()
        );
        // `null` for an optional parameter means "not sent".
        assert!(
            params
                .validate(&json!({"query": "q", "limit": null, "order": null}))
                .is_ok()
        );
        assert!(params.validate(&json!({"query": "q", "tags": []})).is_ok());
    }

    #[test]
    fn every_problem_is_listed() {
        let err = sample()
            .validate(&json!({
                "limit": "ten",
                "threshold": "high",
                "exact": "true",
                "tags": ["ok", 1, null],
                "order": "sideways",
                "qeury": "cats"
            }))
            .unwrap_err();
        assert_eq!(
            err.problems(),
            [
                "missing required parameter `query` (string)",
                "parameter `limit`: expected integer, got string \"ten\"",
                "parameter `threshold`: expected number, got string \"high\"",
                "parameter `exact`: expected boolean, got string \"true\"",
                "parameter `tags`: item [1]: expected string, got integer 1",
                "parameter `tags`: item [2]: expected string, got null",
                "parameter `order`: \"sideways\" is not one of \"asc\", \"desc\"",
                "unknown parameter `qeury`; the parameters are: `query`, `limit`, \
                 `threshold`, `exact`, `tags`, `order`",
            ]
        );
    }

    #[test]
    fn display_lists_problems_then_reprints_schema() {
        let params = Parameters::builder()
            .required_string("query", "The query.")
            .optional_integer("limit", "Max results.")
            .build();
        let err = params.validate(&json!({"limit": "ten"})).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid arguments:
- missing required parameter `query` (string)
- parameter `limit`: expected integer, got string "ten"
expected schema:
{
  "additionalProperties": false,
  "properties": {
    "limit": {
      "description": "Max results.",
      "type": "integer"
    },
    "query": {
      "description": "The query.",
      "type": "string"
    }
  },
  "required": [
    "query"
  ],
  "type": "object"
}"#
        );
    }

    #[test]
    fn non_objects_are_rejected_with_their_type() {
        let params = Parameters::empty();
        for (args, got) in [
            (json!(null), "null"),
            (json!([1, 2]), "array [1,2]"),
            (json!("x"), "string \"x\""),
            (json!(7), "integer 7"),
            (json!(true), "boolean true"),
        ] {
            let err = params.validate(&args).unwrap_err();
            assert_eq!(
                err.problems(),
                [format!("the arguments must be a JSON object, got {got}")]
            );
        }
        let err = params.validate(&json!({"x": 1})).unwrap_err();
        assert_eq!(
            err.problems(),
            ["unknown parameter `x`; this tool takes no parameters"]
        );
    }

    #[test]
    fn integers_are_strict_about_fractions_and_range() {
        let params = Parameters::builder().required_integer("n", "n").build();
        for ok in [
            json!(0),
            json!(-5),
            json!(u64::MAX),
            json!(4.0),
            json!(-1e18),
        ] {
            assert!(params.validate(&json!({ "n": ok })).is_ok(), "{ok}");
        }
        for bad in [
            json!(2.5),
            json!(1e30),
            json!("3"),
            json!(true),
            json!(null),
        ] {
            assert!(params.validate(&json!({ "n": bad })).is_err(), "{bad}");
        }
        let err = params.validate(&json!({"n": 2.5})).unwrap_err();
        assert_eq!(
            err.problems(),
            ["parameter `n`: expected integer, got number 2.5"]
        );
    }

    #[test]
    fn enum_rejects_non_strings() {
        let params = Parameters::builder()
            .required_enum("unit", "u", &["c", "f"])
            .build();
        let err = params.validate(&json!({"unit": 1})).unwrap_err();
        assert_eq!(
            err.problems(),
            ["parameter `unit`: expected one of \"c\", \"f\", got integer 1"]
        );
        let err = params.validate(&json!({})).unwrap_err();
        assert_eq!(
            err.problems(),
            ["missing required parameter `unit` (one of \"c\", \"f\")"]
        );
    }

    #[test]
    fn array_problems_are_bounded() {
        let params = Parameters::builder()
            .required_array("ids", "ids", ItemType::Integer)
            .build();
        let err = params.validate(&json!({"ids": "1,2"})).unwrap_err();
        assert_eq!(
            err.problems(),
            ["parameter `ids`: expected array of integers, got string \"1,2\""]
        );
        let many: Vec<Value> = (0..20).map(|i| json!(i.to_string())).collect();
        let err = params.validate(&json!({ "ids": many })).unwrap_err();
        assert_eq!(err.problems().len(), ITEM_PROBLEM_LIMIT + 1);
        assert_eq!(
            err.problems()[ITEM_PROBLEM_LIMIT],
            "parameter `ids`: 15 more items are not integers"
        );
    }

    #[test]
    fn quoted_values_are_bounded() {
        let params = Parameters::builder().required_integer("n", "n").build();
        let long = "x".repeat(10_000);
        let err = params
            .validate(&json!({ "n": long.clone(), long.clone(): 1 }))
            .unwrap_err();
        for problem in err.problems() {
            assert!(problem.chars().count() < 200, "{problem}");
        }
        assert!(err.problems()[0].ends_with(&format!("\"{}…\"", "x".repeat(80))));
        let err = params
            .validate(&json!({ "n": [long.clone()], "m": {"k": long} }))
            .unwrap_err();
        for problem in err.problems() {
            assert!(problem.chars().count() < 200, "{problem}");
        }
    }

    #[test]
    fn normalize_fixes_integers_and_drops_null_optionals() {
        let params = Parameters::builder()
            .required_integer("n", "n")
            .optional_array("ids", "ids", ItemType::Integer)
            .optional_string("s", "s")
            .optional_number("x", "x")
            .build();
        let args = json!({"n": 3.0, "ids": [1.0, 2], "s": null, "x": 2.0});
        assert!(params.validate(&args).is_ok());
        let args = params.normalize(args);
        assert_eq!(args, json!({"n": 3, "ids": [1, 2], "x": 2.0}));
        assert_eq!(args["n"].as_i64(), Some(3));
    }
}
