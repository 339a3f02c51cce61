//! [`Parameters`]: a tool's JSON Schema, and the validation whose message
//! goes back to the model.
//!
//! A schema comes from the [builder](ParametersBuilder), from a JSON Schema
//! given as is ([`Parameters::from_json_schema`], e.g. an MCP tool's
//! `inputSchema`), or from a Rust type ([`Parameters::for_type`], see
//! [`JsonSchema`](crate::tool::JsonSchema)). All three are compiled to one
//! private representation (`compile`), checked by one validator
//! (`validate`), and can be checked against OpenAI's strict mode (`strict`).
//! The rules are documented on [`Parameters`], the public home of this
//! mechanism.

mod builder;
mod compile;
mod message;
mod quote;
mod strict;
mod validate;

#[cfg(test)]
mod tests;

use std::fmt;

use serde_json::Value;

pub use builder::{ItemType, ParametersBuilder};
use compile::{Compiled, compile};
use quote::describe;
use validate::Validator;

/// The parameters a tool takes, as a JSON Schema object; immutable once built.
///
/// [`Parameters::to_json`] is the JSON Schema sent to the server;
/// [`Parameters::validate`] checks what the model sent back. A schema comes
/// from one of three places:
///
/// - the [builder](Parameters::builder): named parameters of a few types
///   (string, integer, number, boolean, arrays of those, string enums,
///   nested objects, arrays of objects, or any schema given as is);
/// - [`Parameters::from_json_schema`]: a JSON Schema as is, e.g. what an MCP
///   server sends as a tool's `inputSchema`;
/// - [`Parameters::for_type`]: the schema of a Rust type, for
///   [`TypedTool`](crate::tool::TypedTool).
///
/// # Examples
///
/// ```
/// use pikuri::tool::{ItemType, Parameters};
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
/// lists every missing, mistyped, out-of-list, out-of-bounds and unknown
/// value, one per line, and then reprints the schema. Its `Display` is meant
/// to be sent to the model verbatim (the agent loop prefixes it with
/// `"Error: "`). Each problem says where it is: `parameter `limit``,
/// `parameter `tags`: item [1]`, and deeper down a JSON pointer such as
/// `` `/items/2/name` ``. Values quoted in a message are cut at 80
/// characters, so a model that pastes a whole file into the wrong parameter
/// does not get it echoed back; of one array, the problems of the first 5
/// bad items are listed and the rest counted.
///
/// Validation never panics and always ends, whatever the schema and the
/// arguments: values nested more than 128 levels are reported rather than
/// checked, and a step budget stops alternatives that branch exponentially.
///
/// # JSON Schema support
///
/// The root must be an object schema (`"type": "object"`), as the
/// chat-completions API requires. These keywords are checked when the schema
/// is compiled (a malformed one, such as `"required": 5`, is an error of
/// [`Parameters::from_json_schema`]) and enforced by validation:
///
/// - `type` (a name or an array of names, so `["string", "null"]` is a
///   nullable string), OpenAPI's `nullable: true`, `enum`, `const`;
/// - objects: `properties`, `required`, `additionalProperties` (a boolean
///   or a schema), `minProperties`, `maxProperties`;
/// - arrays: `items` (one schema), `minItems`, `maxItems`, `uniqueItems`;
/// - strings: `minLength`, `maxLength` (counted in characters);
/// - numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`
///   (as numbers, or draft 4's booleans), `multipleOf`;
/// - `anyOf`, `oneOf`, `allOf`, and boolean schemas (`true`, `false`);
/// - `$ref` to a local JSON pointer: `#`, `#/$defs/Name`,
///   `#/definitions/Name`, recursion included. A cycle of references that
///   never descends into the value (`A` is `{"$ref": "#/$defs/A"}`) is an
///   error.
///
/// Everything else is sent to the model untouched but not enforced: `pattern`
/// and `format` (no regex engine), `default` and `examples` (annotations),
/// the tuple form of `items` and `prefixItems`, `not`,
/// `if`/`then`/`else`, `patternProperties`, `propertyNames`, `contains`,
/// `dependentRequired`, `$ref` to another document, and unknown keywords.
///
/// # Differences from strict JSON Schema
///
/// The schema says exactly what is wanted; validation is a little more
/// forgiving about what small models actually send, and the agent loop
/// normalizes the accepted arguments before the tool sees them:
///
/// - An `integer` accepts a number with a zero fraction (`3.0`); the tool
///   receives the integer `3`, so `as_i64()` works.
/// - An optional property sent as `null` counts as not sent; the tool does
///   not see the key at all.
/// - A required property whose type includes `null` may be left out (so a
///   model that skips an `Option` field of a [`TypedTool`] argument is not
///   sent back; serde reads the field as `None`).
/// - The builder's schemas have `"additionalProperties": false`, and
///   validation enforces it: an unknown parameter name is a problem, usually
///   a typo worth reporting. A schema given as is allows unknown properties
///   unless it says otherwise, as JSON Schema does.
/// - Properties appear in the schema in alphabetical order, as `serde_json`
///   keeps object keys sorted (unless some crate in the build turns on its
///   `preserve_order` feature); the builder's top-level problems are listed
///   in declaration order.
///
/// No defaults are applied (as in pikuri): a tool reads an optional
/// parameter with `args.get("name")` and supplies its own default.
///
/// # Strict mode
///
/// [`Parameters::strict_violations`] lists what OpenAI's strict mode
/// (`"strict": true`) would reject. Schemas of types built with
/// [`schema_type!`](crate::tool::schema_type) pass; the builder's optional
/// parameters do not (strict mode wants every property required, optional
/// ones nullable).
///
/// [`TypedTool`]: crate::tool::TypedTool
#[derive(Clone)]
pub struct Parameters {
    schema: Value,
    compiled: Compiled,
    /// The validator, reached through the schema that needs it (see
    /// [`Checker`]).
    checker: Checker,
}

/// The validator's entry points, which each [`Parameters`] holds. Calls go
/// through these pointers, not to `validate.rs` by name, so the validator
/// is linked into a program only with the constructors that store them: a
/// program whose agent has no tool with a schema does not carry it (the
/// small CLI of issue 36).
#[derive(Clone, Copy)]
struct Checker {
    /// Every problem with arguments that are a JSON object.
    problems: fn(&Compiled, &Value) -> Vec<String>,
    /// Normalize arguments (a JSON object) that passed.
    normalize: fn(&Compiled, &mut Value),
}

/// Why a tool's arguments were rejected: every problem found, and the schema.
///
/// `Display` is the text sent to the model: the problems, one per line, then
/// the expected schema as pretty JSON. See [`Parameters`].
///
/// # Examples
///
/// ```
/// use pikuri::tool::Parameters;
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

/// Why [`Parameters::from_json_schema`] rejected a schema: every problem,
/// each with the JSON pointer of the schema it is in.
///
/// # Examples
///
/// ```
/// use pikuri::tool::Parameters;
/// use serde_json::json;
/// let err = Parameters::from_json_schema(json!({
///     "type": "object",
///     "properties": {"n": {"type": "integer", "minimum": "1"}},
///     "required": 5
/// }))
/// .unwrap_err();
/// assert_eq!(
///     err.problems(),
///     [
///         "/: `required` must be an array of strings, got integer 5",
///         "/properties/n: `minimum` must be a number, got string \"1\"",
///     ]
/// );
/// assert!(err.to_string().starts_with("invalid JSON Schema:\n- /: `required`"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    problems: Vec<String>,
}

impl Parameters {
    /// The one constructor: `compiled` is `schema` compiled.
    fn new(schema: Value, compiled: Compiled) -> Parameters {
        Parameters {
            schema,
            compiled,
            checker: Checker {
                problems: |c, args| Validator::new(c).problems(args),
                normalize: |c, args| Validator::new(c).normalize(0, args, 0),
            },
        }
    }

    /// A JSON Schema given as is, checked and compiled for validation.
    ///
    /// The schema is sent to the model as the [`Value`] holds it: every
    /// keyword and value unchanged, arrays in their order, but an object's
    /// keys in `serde_json::Map` order, which is alphabetical (pikuri does
    /// not enable serde_json's `preserve_order` feature; a build that does,
    /// through any crate, keeps the order the value was built in). The
    /// root must be an object schema; see [JSON Schema support](Parameters#json-schema-support)
    /// for what is enforced and what is passed through.
    ///
    /// # Examples
    ///
    /// An MCP tool's `inputSchema`:
    ///
    /// ```
    /// use pikuri::tool::Parameters;
    /// use serde_json::json;
    /// let schema = json!({
    ///     "$schema": "http://json-schema.org/draft-07/schema#",
    ///     "type": "object",
    ///     "properties": {
    ///         "messageType": {"type": "string", "enum": ["error", "success"]},
    ///         "count": {"type": "number", "default": 3, "minimum": 1}
    ///     },
    ///     "required": ["messageType"],
    ///     "additionalProperties": false
    /// });
    /// let params = Parameters::from_json_schema(schema.clone())?;
    /// assert_eq!(*params.to_json(), schema);
    /// let err = params.validate(&json!({"messageType": "info", "count": 0})).unwrap_err();
    /// assert_eq!(
    ///     err.problems(),
    ///     [
    ///         "parameter `count`: expected at least 1, got 0",
    ///         "parameter `messageType`: \"info\" is not one of \"error\", \"success\"",
    ///     ]
    /// );
    /// # Ok::<(), pikuri::tool::SchemaError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`SchemaError`] listing every problem: a root that is not an object
    /// schema, a malformed keyword the validator understands (`"required":
    /// 5`, `"minimum": "1"`, `"type": "text"`), a local `$ref` that does not
    /// resolve, a reference cycle that never descends into the value, or
    /// nesting deeper than 64 levels.
    pub fn from_json_schema(schema: Value) -> Result<Parameters, SchemaError> {
        match compile(&schema) {
            Ok(compiled) => Ok(Parameters::new(schema, compiled)),
            Err(problems) => Err(SchemaError { problems }),
        }
    }

    /// The schema of the type `T`; see [`JsonSchema`](crate::tool::JsonSchema).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::Parameters;
    /// use serde_json::json;
    /// pikuri::tool::schema_type! {
    ///     /// A point.
    ///     pub struct Point {
    ///         /// Across.
    ///         pub x: i32,
    ///         /// Down.
    ///         pub y: i32,
    ///     }
    /// }
    /// let params = Parameters::for_type::<Point>();
    /// assert_eq!(params.to_json()["properties"]["x"]["description"], "Across.");
    /// assert!(params.validate(&json!({"x": 1, "y": 2})).is_ok());
    /// assert!(params.strict_violations().is_empty());
    /// ```
    ///
    /// # Panics
    ///
    /// If `T`'s schema is not a valid object schema (`Parameters::for_type::<u8>()`),
    /// a programming error.
    pub fn for_type<T: crate::tool::JsonSchema + ?Sized>() -> Parameters {
        match Parameters::from_json_schema(T::json_schema()) {
            Ok(params) => params,
            Err(e) => panic!(
                "Parameters::for_type::<{}>: not a tool parameter schema: {}",
                std::any::type_name::<T>(),
                e.problems.join("; ")
            ),
        }
    }

    /// Whether there are no parameters (the root lists no properties).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::Parameters;
    /// assert!(!Parameters::builder().optional_string("q", "Query.").build().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.compiled.root().properties.is_empty()
    }

    /// The JSON Schema sent to the server as the tool's `parameters`.
    ///
    /// The builder's schema is always an object schema with `properties`,
    /// `required` (both present even when empty) and
    /// `"additionalProperties": false`; a schema given as is comes back
    /// as given (the same [`Value`]; see
    /// [`from_json_schema`](Parameters::from_json_schema) for the order of
    /// its keys on the wire).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::Parameters;
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
    /// use pikuri::tool::Parameters;
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

    /// Every way the schema breaks OpenAI's strict mode, one sentence each
    /// with its location; empty if strict mode would accept it.
    ///
    /// The rules: the root is an object schema, not `anyOf`; every object
    /// has `"additionalProperties": false` and lists every property in
    /// `required` (optional values are nullable instead); every schema has a
    /// `type` (or `anyOf`, `$ref`, `enum`, `const`); objects nest at most 10
    /// levels; at most 5000 properties in all and 1000 values per enum; and
    /// only these keywords: `type`, `description`, `title`, `properties`,
    /// `required`, `additionalProperties`, `items`, `enum`, `const`,
    /// `anyOf`, `$ref`, `$defs`, `definitions`, `pattern`, `format`,
    /// `multipleOf`, `minimum`, `maximum`, `exclusiveMinimum`,
    /// `exclusiveMaximum`, `minItems`, `maxItems`.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::Parameters;
    /// let params = Parameters::builder()
    ///     .required_string("q", "Query.")
    ///     .optional_integer("limit", "Max results.")
    ///     .build();
    /// assert_eq!(
    ///     params.strict_violations(),
    ///     ["/: property `limit` must be listed in `required` \
    ///       (make its type nullable to make it optional)"]
    /// );
    /// ```
    pub fn strict_violations(&self) -> Vec<String> {
        strict::violations(&self.schema)
    }

    /// Normalize arguments that passed [`validate`](Parameters::validate):
    /// integral numbers where an integer is expected become JSON integers,
    /// and optional properties sent as `null` are removed.
    pub(crate) fn normalize(&self, mut args: Value) -> Value {
        if args.is_object() {
            (self.checker.normalize)(&self.compiled, &mut args);
        }
        args
    }

    fn problems(&self, args: &Value) -> Vec<String> {
        if !args.is_object() {
            return vec![format!(
                "the arguments must be a JSON object, got {}",
                describe(args)
            )];
        }
        (self.checker.problems)(&self.compiled, args)
    }
}

impl fmt::Debug for Parameters {
    /// The schema; the compiled form is an implementation detail.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parameters")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Parameters {
    /// Equal when the schemas are.
    fn eq(&self, other: &Parameters) -> bool {
        self.schema == other.schema
    }
}

impl Default for Parameters {
    /// The same as [`Parameters::empty`].
    fn default() -> Parameters {
        Parameters::empty()
    }
}

impl ValidationError {
    /// The problems found, one sentence each, in the order reported.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::Parameters;
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

impl SchemaError {
    /// The problems found, one sentence each, in the order reported.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::Parameters;
    /// let err = Parameters::from_json_schema(serde_json::json!({"type": "string"})).unwrap_err();
    /// assert_eq!(
    ///     err.problems(),
    ///     ["the root schema must have \"type\": \"object\", got string \"string\""]
    /// );
    /// ```
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid JSON Schema:")?;
        for problem in &self.problems {
            write!(f, "\n- {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SchemaError {}
