//! What problem messages say: where a problem is, what was expected, and
//! the value that was sent (quoted within a bound by `quote.rs`).

use super::compile::{Node, NodeId, Types, escape};
use super::quote::{QUOTE_LIMIT, quote_value, value_list};
use crate::util::excerpt;

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
