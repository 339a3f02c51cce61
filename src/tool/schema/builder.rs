//! [`ParametersBuilder`]: parameters one at a time, with the schema and the
//! validator built from them.

use serde_json::{Map, Value, json};

use super::Parameters;
use super::compile::compile;

// The two constructors that go through the builder live with it, so that
// `mod.rs` (which defines `Parameters`) does not import this file back.
impl Parameters {
    /// A builder with no parameters yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::Parameters;
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
    /// use pikuri::tool::Parameters;
    /// use serde_json::json;
    /// let params = Parameters::empty();
    /// assert!(params.is_empty());
    /// assert!(params.validate(&json!({})).is_ok());
    /// assert!(params.validate(&json!({"x": 1})).is_err());
    /// ```
    pub fn empty() -> Parameters {
        ParametersBuilder::default().build()
    }
}

/// Builds [`Parameters`]; see [`Parameters::builder`].
///
/// Each method adds one parameter and takes its name and a description
/// written for the model. Scalars, arrays of scalars and string enums have a
/// method each; nested objects and arrays of objects take a [`Parameters`]
/// describing the inner object ([`required_object`](Self::required_object),
/// [`required_object_array`](Self::required_object_array)); anything else
/// (bounds, defaults, `anyOf`, …) is one JSON Schema given as is
/// ([`required_schema`](Self::required_schema)).
///
/// ```
/// use pikuri::tool::Parameters;
/// use serde_json::json;
/// let line = Parameters::builder()
///     .required_string("sku", "Article number.")
///     .required_schema("qty", "How many.", json!({"type": "integer", "minimum": 1}))
///     .build();
/// let params = Parameters::builder()
///     .required_object_array("lines", "Order lines.", line)
///     .build();
/// let err = params
///     .validate(&json!({"lines": [{"sku": "A1", "qty": 2}, {"sku": 7, "qty": 0}]}))
///     .unwrap_err();
/// assert_eq!(
///     err.problems(),
///     [
///         "`/lines/1/qty`: expected at least 1, got 0",
///         "`/lines/1/sku`: expected string, got integer 7",
///     ]
/// );
/// ```
///
/// # Panics
///
/// The methods panic on a programming error, so that it shows on the first
/// run rather than as a confused model:
///
/// - a parameter name used twice,
/// - an empty parameter name,
/// - an enum parameter with no values,
/// - a schema given to [`required_schema`](Self::required_schema) (or an
///   object given as [`Parameters`]) that
///   [`Parameters::from_json_schema`] would reject; a local `$ref` inside
///   one does not resolve once nested, so it is rejected too.
///
/// ```should_panic
/// use pikuri::tool::Parameters;
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
/// use pikuri::tool::{ItemType, Parameters};
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

impl ItemType {
    fn name(self) -> &'static str {
        match self {
            ItemType::String => "string",
            ItemType::Integer => "integer",
            ItemType::Number => "number",
            ItemType::Boolean => "boolean",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Param {
    name: String,
    /// The property's schema, description included.
    schema: Value,
    required: bool,
}

macro_rules! scalar_methods {
    ($($required:ident, $optional:ident, $item:ident, $what:literal;)*) => {$(
        #[doc = concat!("A required ", $what, " parameter.")]
        #[must_use]
        pub fn $required(self, name: &str, description: &str) -> ParametersBuilder {
            self.add(name, json!({"type": ItemType::$item.name(), "description": description}), true)
        }

        #[doc = concat!("An optional ", $what, " parameter.")]
        #[must_use]
        pub fn $optional(self, name: &str, description: &str) -> ParametersBuilder {
            self.add(name, json!({"type": ItemType::$item.name(), "description": description}), false)
        }
    )*};
}

impl ParametersBuilder {
    scalar_methods! {
        required_string, optional_string, String, "string";
        required_integer, optional_integer, Integer, "integer";
        required_number, optional_number, Number, "number (integer or fractional)";
        required_boolean, optional_boolean, Boolean, "boolean";
    }

    /// A required array parameter whose items are all of type `items`.
    #[must_use]
    pub fn required_array(
        self,
        name: &str,
        description: &str,
        items: ItemType,
    ) -> ParametersBuilder {
        self.add(name, array_schema(description, items), true)
    }

    /// An optional array parameter whose items are all of type `items`.
    #[must_use]
    pub fn optional_array(
        self,
        name: &str,
        description: &str,
        items: ItemType,
    ) -> ParametersBuilder {
        self.add(name, array_schema(description, items), false)
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
        let schema = enum_schema(name, description, values);
        self.add(name, schema, true)
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
        let schema = enum_schema(name, description, values);
        self.add(name, schema, false)
    }

    /// A required object parameter whose properties are `object`'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::Parameters;
    /// use serde_json::json;
    /// let address = Parameters::builder()
    ///     .required_string("city", "City.")
    ///     .optional_string("zip", "Postal code.")
    ///     .build();
    /// let params = Parameters::builder()
    ///     .required_object("to", "Recipient address.", address)
    ///     .build();
    /// assert_eq!(params.to_json()["properties"]["to"]["description"], "Recipient address.");
    /// let err = params.validate(&json!({"to": {"zip": 1}})).unwrap_err();
    /// assert_eq!(
    ///     err.problems(),
    ///     [
    ///         "parameter `to`: missing required property `city` (string)",
    ///         "`/to/zip`: expected string, got integer 1",
    ///     ]
    /// );
    /// ```
    ///
    /// # Panics
    ///
    /// See [`ParametersBuilder`].
    #[must_use]
    pub fn required_object(
        self,
        name: &str,
        description: &str,
        object: Parameters,
    ) -> ParametersBuilder {
        self.add(name, described(object.schema, description), true)
    }

    /// An optional object parameter whose properties are `object`'s.
    ///
    /// # Panics
    ///
    /// See [`ParametersBuilder`].
    #[must_use]
    pub fn optional_object(
        self,
        name: &str,
        description: &str,
        object: Parameters,
    ) -> ParametersBuilder {
        self.add(name, described(object.schema, description), false)
    }

    /// A required array parameter whose items are objects with `item`'s
    /// properties (see the [`ParametersBuilder`] example).
    ///
    /// # Panics
    ///
    /// See [`ParametersBuilder`].
    #[must_use]
    pub fn required_object_array(
        self,
        name: &str,
        description: &str,
        item: Parameters,
    ) -> ParametersBuilder {
        let schema = object_array_schema(description, item);
        self.add(name, schema, true)
    }

    /// An optional array parameter whose items are objects with `item`'s
    /// properties.
    ///
    /// # Panics
    ///
    /// See [`ParametersBuilder`].
    #[must_use]
    pub fn optional_object_array(
        self,
        name: &str,
        description: &str,
        item: Parameters,
    ) -> ParametersBuilder {
        let schema = object_array_schema(description, item);
        self.add(name, schema, false)
    }

    /// A required parameter with a JSON Schema given as is; `description`
    /// is added unless it is empty or the schema has one.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::Parameters;
    /// use serde_json::json;
    /// let params = Parameters::builder()
    ///     .required_schema("port", "TCP port.", json!({"type": "integer", "minimum": 1, "maximum": 65535}))
    ///     .optional_schema("mode", "", json!({"type": "string", "default": "fast"}))
    ///     .build();
    /// let err = params.validate(&json!({"port": 70000})).unwrap_err();
    /// assert_eq!(err.problems(), ["parameter `port`: expected at most 65535, got 70000"]);
    /// ```
    ///
    /// # Panics
    ///
    /// See [`ParametersBuilder`].
    #[must_use]
    pub fn required_schema(
        self,
        name: &str,
        description: &str,
        schema: Value,
    ) -> ParametersBuilder {
        self.add(name, described(schema, description), true)
    }

    /// An optional parameter with a JSON Schema given as is; see
    /// [`required_schema`](Self::required_schema).
    ///
    /// # Panics
    ///
    /// See [`ParametersBuilder`].
    #[must_use]
    pub fn optional_schema(
        self,
        name: &str,
        description: &str,
        schema: Value,
    ) -> ParametersBuilder {
        self.add(name, described(schema, description), false)
    }

    /// The finished, immutable [`Parameters`].
    pub fn build(self) -> Parameters {
        let mut properties = Map::new();
        let mut required = Vec::new();
        for p in &self.params {
            properties.insert(p.name.clone(), p.schema.clone());
            if p.required {
                required.push(Value::from(p.name.as_str()));
            }
        }
        let schema = json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        });
        let mut compiled = match compile(&schema) {
            Ok(c) => c,
            // Each property was checked when it was added.
            Err(problems) => unreachable!("Parameters: {problems:?}"),
        };
        // Problems are reported in declaration order, whatever order the
        // JSON map keeps its keys in.
        let root = &mut compiled.nodes[0];
        root.properties.sort_by_key(|(name, _)| {
            self.params
                .iter()
                .position(|p| p.name == *name)
                .unwrap_or(usize::MAX)
        });
        Parameters::new(schema, compiled)
    }

    fn add(mut self, name: &str, schema: Value, required: bool) -> ParametersBuilder {
        assert!(
            !name.is_empty(),
            "Parameters: a parameter name must not be empty"
        );
        assert!(
            !self.params.iter().any(|p| p.name == name),
            "Parameters: duplicate parameter name `{name}`"
        );
        let alone = json!({"type": "object", "properties": {name: &schema}});
        if let Err(problems) = compile(&alone) {
            panic!(
                "Parameters: the schema of parameter `{name}` is invalid: {}",
                problems.join("; ")
            );
        }
        self.params.push(Param {
            name: name.to_string(),
            schema,
            required,
        });
        self
    }
}

/// `schema` with `description`, unless that is empty or already there.
fn described(mut schema: Value, description: &str) -> Value {
    if let Some(obj) = schema.as_object_mut()
        && !description.is_empty()
        && !obj.contains_key("description")
    {
        obj.insert("description".to_string(), Value::from(description));
    }
    schema
}

fn object_array_schema(description: &str, item: Parameters) -> Value {
    let mut schema = json!({"type": "array", "description": description});
    schema["items"] = item.schema;
    schema
}

fn array_schema(description: &str, items: ItemType) -> Value {
    json!({"type": "array", "description": description, "items": {"type": items.name()}})
}

fn enum_schema(name: &str, description: &str, values: &[&str]) -> Value {
    assert!(
        !values.is_empty(),
        "Parameters: enum parameter `{name}` has no values"
    );
    json!({"type": "string", "description": description, "enum": values})
}
