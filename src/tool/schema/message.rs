//! What problem messages say: where a problem is, what was expected, and
//! the value that was sent, each quoted within a bound.

use serde_json::Value;

use super::compile::{Node, NodeId, Types, escape};
use crate::util::excerpt;

/// How many characters of a value a problem message quotes.
pub(super) const QUOTE_LIMIT: usize = 80;
/// How many enum values a message lists.
const ENUM_LIST_LIMIT: usize = 20;

/// One step of a location: an object key or an array index.
#[derive(Clone, Copy, Debug)]
pub(super) enum Seg<'v> {
    Key(&'v str),
    Index(usize),
}

/// Where a problem is: `parameter `name``, `parameter `name`: item [2]`,
/// or a JSON pointer such as `` `/items/2/name` `` for anything deeper.
pub(super) fn location(path: &[Seg<'_>]) -> String {
    match path {
        [] => "the arguments".to_string(),
        [Seg::Key(k)] => format!("parameter `{}`", excerpt(k, QUOTE_LIMIT)),
        [Seg::Key(k), Seg::Index(i)] => {
            format!("parameter `{}`: item [{i}]", excerpt(k, QUOTE_LIMIT))
        }
        _ => {
            let mut pointer = String::new();
            for seg in path {
                pointer.push('/');
                match seg {
                    Seg::Key(k) => {
                        pointer.push_str(&escape(&excerpt(k, QUOTE_LIMIT)));
                    }
                    Seg::Index(i) => pointer.push_str(&i.to_string()),
                }
            }
            format!("`{pointer}`")
        }
    }
}

pub(super) fn accepted_names(node: &Node, root: bool) -> String {
    let (kind, when_empty) = if root {
        ("parameters", "this tool takes no parameters")
    } else {
        ("properties", "this object takes no properties")
    };
    if node.properties.is_empty() {
        return when_empty.to_string();
    }
    let names: Vec<String> = node
        .properties
        .iter()
        .map(|(p, _)| format!("`{}`", excerpt(p, QUOTE_LIMIT)))
        .collect();
    format!("the {kind} are: {}", names.join(", "))
}

/// What a schema expects, for messages: `integer`, `string or null`,
/// `array of integers`, `one of "a", "b"`.
pub(super) fn expected(nodes: &[Node], id: NodeId, depth: usize) -> String {
    let node = &nodes[id];
    if depth > 4 {
        return "a value".to_string();
    }
    if node.never {
        return "nothing".to_string();
    }
    if let Some(values) = &node.enumeration {
        return format!("one of {}", value_list(values));
    }
    if let Some(c) = &node.constant {
        return quote_value(c);
    }
    if let Some(target) = node.reference
        && node.types.is_none()
    {
        return expected(nodes, target, depth + 1);
    }
    let Some(types) = node.types else {
        let alternatives = if node.any_of.is_empty() {
            &node.one_of
        } else {
            &node.any_of
        };
        if alternatives.is_empty() {
            return "any value".to_string();
        }
        let names: Vec<String> = alternatives
            .iter()
            .map(|&a| expected(nodes, a, depth + 1))
            .collect();
        return names.join(" or ");
    };
    types
        .names()
        .map(|name| match (name, node.items) {
            ("array", Some(item)) => match nodes[item].types.and_then(Types::single) {
                Some(single) if nodes[item].enumeration.is_none() => {
                    format!("array of {single}s")
                }
                _ => "array".to_string(),
            },
            _ => name.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

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
