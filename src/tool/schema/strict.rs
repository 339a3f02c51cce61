//! The rules of OpenAI's strict mode (`"strict": true` on a function, or
//! Structured Outputs), checked on a schema `Value`.
//!
//! From OpenAI's "Supported schemas" guide: the root is an object (not
//! `anyOf`); every object has `"additionalProperties": false` and lists
//! every property in `required` (optional fields are nullable instead); at
//! most 10 levels of object nesting and 5000 properties in all; enums of at
//! most 1000 values; and only these keywords: [`SUPPORTED`].

use serde_json::{Map, Value};

use super::compile::escape;

/// Keywords strict mode accepts.
pub(super) const SUPPORTED: &[&str] = &[
    "type",
    "description",
    "title",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "pattern",
    "format",
    "multipleOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
];

const MAX_NESTING: usize = 10;
const MAX_PROPERTIES: usize = 5000;
const MAX_ENUM_VALUES: usize = 1000;

/// Every way `schema` breaks strict mode, each with its location.
pub(super) fn violations(schema: &Value) -> Vec<String> {
    let mut s = Strict {
        problems: Vec::new(),
        properties: 0,
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        s.problems
            .push("/: the root must be an object schema (\"type\": \"object\")".to_string());
    }
    if schema.get("anyOf").is_some() {
        s.problems
            .push("/: the root must not be `anyOf`".to_string());
    }
    s.walk(schema, "", 0, 0);
    if s.properties > MAX_PROPERTIES {
        s.problems.push(format!(
            "/: {} properties in all, more than {MAX_PROPERTIES}",
            s.properties
        ));
    }
    s.problems
}

struct Strict {
    problems: Vec<String>,
    properties: usize,
}

impl Strict {
    fn walk(&mut self, schema: &Value, path: &str, nesting: usize, depth: usize) {
        let at = if path.is_empty() { "/" } else { path };
        if depth > super::compile::MAX_SCHEMA_DEPTH {
            self.problems.push(format!("{at}: nested too deeply"));
            return;
        }
        let Some(obj) = schema.as_object() else {
            self.problems.push(format!(
                "{at}: a schema must be an object (boolean schemas are not supported)"
            ));
            return;
        };
        for key in obj.keys() {
            if !SUPPORTED.contains(&key.as_str()) {
                self.problems.push(format!(
                    "{at}: keyword `{key}` is not supported in strict mode"
                ));
            }
        }
        let typed = ["type", "anyOf", "$ref", "enum", "const"]
            .iter()
            .any(|k| obj.contains_key(*k));
        if !typed {
            self.problems.push(format!(
                "{at}: every schema needs a `type` (or `anyOf`, `$ref`, `enum`)"
            ));
        }
        if let Some(values) = obj.get("enum").and_then(Value::as_array)
            && values.len() > MAX_ENUM_VALUES
        {
            self.problems.push(format!(
                "{at}: {} enum values, more than {MAX_ENUM_VALUES}",
                values.len()
            ));
        }
        let nesting = if is_object(obj) {
            self.object(obj, at);
            nesting + 1
        } else {
            nesting
        };
        if nesting > MAX_NESTING {
            self.problems.push(format!(
                "{at}: objects nested more than {MAX_NESTING} levels deep"
            ));
            return;
        }
        if let Some(Value::Object(props)) = obj.get("properties") {
            self.properties += props.len();
            for (name, sub) in props {
                self.walk(
                    sub,
                    &format!("{path}/properties/{}", escape(name)),
                    nesting,
                    depth + 1,
                );
            }
        }
        if let Some(items) = obj.get("items") {
            self.walk(items, &format!("{path}/items"), nesting, depth + 1);
        }
        if let Some(Value::Array(alternatives)) = obj.get("anyOf") {
            for (i, sub) in alternatives.iter().enumerate() {
                self.walk(sub, &format!("{path}/anyOf/{i}"), nesting, depth + 1);
            }
        }
        for defs in ["$defs", "definitions"] {
            if let Some(Value::Object(defs_map)) = obj.get(defs) {
                for (name, sub) in defs_map {
                    self.walk(
                        sub,
                        &format!("{path}/{defs}/{}", escape(name)),
                        nesting,
                        depth + 1,
                    );
                }
            }
        }
    }

    fn object(&mut self, obj: &Map<String, Value>, at: &str) {
        if obj.get("additionalProperties") != Some(&Value::Bool(false)) {
            self.problems.push(format!(
                "{at}: objects need \"additionalProperties\": false"
            ));
        }
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(Value::Object(props)) = obj.get("properties") {
            for name in props.keys() {
                if !required.contains(&name.as_str()) {
                    self.problems.push(format!(
                        "{at}: property `{name}` must be listed in `required` \
                         (make its type nullable to make it optional)"
                    ));
                }
            }
        }
    }
}

fn is_object(obj: &Map<String, Value>) -> bool {
    match obj.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => obj.contains_key("properties"),
    }
}
