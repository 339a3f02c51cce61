//! Parameters schema builder and validation (stub; being written).

use std::fmt;

use serde_json::{Map, Value};

/// A JSON-Schema object describing a tool's arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameters {
    schema: Value,
}

/// Builds [`Parameters`].
#[derive(Debug, Default)]
pub struct ParametersBuilder {
    props: Map<String, Value>,
    required: Vec<String>,
}

impl Parameters {
    /// A builder.
    pub fn builder() -> ParametersBuilder {
        ParametersBuilder::default()
    }
    /// No parameters.
    pub fn empty() -> Parameters {
        ParametersBuilder::default().build()
    }
    /// The JSON schema.
    pub fn to_json(&self) -> &Value {
        &self.schema
    }
    /// Validate arguments.
    pub fn validate(&self, args: &Value) -> Result<(), ValidationError> {
        let _ = args;
        Ok(())
    }
}

impl ParametersBuilder {
    /// A required string.
    #[must_use]
    pub fn required_string(mut self, name: &str, description: &str) -> ParametersBuilder {
        self.props.insert(
            name.into(),
            serde_json::json!({"type": "string", "description": description}),
        );
        self.required.push(name.into());
        self
    }
    /// A required integer.
    #[must_use]
    pub fn required_integer(mut self, name: &str, description: &str) -> ParametersBuilder {
        self.props.insert(
            name.into(),
            serde_json::json!({"type": "integer", "description": description}),
        );
        self.required.push(name.into());
        self
    }
    /// Build.
    pub fn build(self) -> Parameters {
        Parameters {
            schema: serde_json::json!({"type": "object", "properties": self.props, "required": self.required}),
        }
    }
}

/// Why arguments did not validate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationError {
    message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ValidationError {}

impl ParametersBuilder {
    /// A required enum (stub).
    #[must_use]
    pub fn required_enum(mut self, name: &str, description: &str, values: &[&str]) -> ParametersBuilder {
        self.props.insert(name.into(), serde_json::json!({"type": "string", "description": description, "enum": values}));
        self.required.push(name.into());
        self
    }
}
