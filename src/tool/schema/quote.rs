//! Values quoted in problem messages, each within a bound. Apart from
//! `message.rs` because the schema compiler quotes values too, and
//! `message.rs` reads the compiled nodes: in one file the two would import
//! each other.

use serde_json::Value;

use crate::util::excerpt;

/// How many characters of a value a problem message quotes.
pub(super) const QUOTE_LIMIT: usize = 80;
/// How many enum values a message lists.
const ENUM_LIST_LIMIT: usize = 20;

/// A value for a problem message: its JSON type, then the value, bounded.
pub(super) fn describe(value: &Value) -> String {
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
pub(super) fn quote_str(s: &str) -> String {
    Value::from(excerpt(s, QUOTE_LIMIT).into_owned()).to_string()
}

/// A schema value (enum member, const) as JSON, bounded.
pub(super) fn quote_value(v: &Value) -> String {
    match v {
        Value::String(s) => quote_str(s),
        other => excerpt(&other.to_string(), QUOTE_LIMIT).into_owned(),
    }
}

pub(super) fn value_list(values: &[Value]) -> String {
    let mut list: Vec<String> = values
        .iter()
        .take(ENUM_LIST_LIMIT)
        .map(quote_value)
        .collect();
    if values.len() > ENUM_LIST_LIMIT {
        list.push(format!("… ({} more)", values.len() - ENUM_LIST_LIMIT));
    }
    list.join(", ")
}
