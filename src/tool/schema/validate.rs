//! Checking a value against a [`Compiled`] schema, listing every problem
//! with its location, and normalizing accepted arguments.
//!
//! Termination on any input: recursion follows the value (whose depth is
//! capped at [`MAX_DEPTH`]), pure `$ref`/`anyOf` cycles are rejected when the
//! schema is compiled, and every node visit spends one step of a fixed
//! budget, so alternatives that branch exponentially stop with a problem
//! instead of running forever.

use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::{Number, Value};

use super::compile::{Additional, Bound, Compiled, Node, NodeId, Types};
use super::message::{Seg, accepted_names, expected, location};
use super::quote::{QUOTE_LIMIT, describe, quote_str, quote_value, value_list};
use crate::util::excerpt;

/// How many bad items of one array are reported individually.
pub(super) const ITEM_PROBLEM_LIMIT: usize = 5;
/// Values nested deeper than this are reported, not checked.
pub(super) const MAX_DEPTH: usize = 128;
const TOO_DEEP: &str = "nested more than 128 levels deep; not checked";
/// Node visits per validation before it gives up: far above what arguments
/// a model can write within its output-token limit ever need.
const STEP_BUDGET: usize = 200_000;

/// Validation state: the problems found so far and the step budget.
pub(super) struct Validator<'s> {
    nodes: &'s [Node],
    problems: Vec<String>,
    steps: usize,
    gave_up: bool,
}

impl<'s> Validator<'s> {
    pub(super) fn new(compiled: &'s Compiled) -> Validator<'s> {
        Validator {
            nodes: &compiled.nodes,
            problems: Vec::new(),
            steps: STEP_BUDGET,
            gave_up: false,
        }
    }

    /// Every problem with `args` (which the caller checked is an object).
    pub(super) fn problems(mut self, args: &Value) -> Vec<String> {
        self.check(0, args, &mut Vec::new(), 0);
        // The depth cap is reported once, not once per sibling.
        let mut seen_too_deep = false;
        self.problems.retain(|p| {
            let first = !(seen_too_deep && p.ends_with(TOO_DEEP));
            seen_too_deep |= p.ends_with(TOO_DEEP);
            first
        });
        if self.gave_up {
            self.problems.push(format!(
                "validation stopped after {STEP_BUDGET} steps: the arguments are too \
                 large, or the schema's alternatives branch too much, to check"
            ));
        }
        self.problems
    }

    /// Spend one step; false when the budget is gone.
    fn step(&mut self) -> bool {
        if self.steps == 0 {
            self.gave_up = true;
        } else {
            self.steps -= 1;
        }
        !self.gave_up
    }

    fn push(&mut self, path: &[Seg<'_>], problem: &str) {
        self.problems.push(format!("{}: {problem}", location(path)));
    }

    fn check<'v>(&mut self, id: NodeId, value: &'v Value, path: &mut Vec<Seg<'v>>, depth: usize) {
        if !self.step() {
            return;
        }
        if depth > MAX_DEPTH {
            self.push(path, TOO_DEEP);
            return;
        }
        let nodes = self.nodes;
        let node = &nodes[id];
        if node.never {
            self.push(
                path,
                &format!("no value is allowed here, got {}", describe(value)),
            );
            return;
        }
        if let Some(target) = node.reference {
            self.check(target, value, path, depth + 1);
        }
        if let Some(types) = node.types
            && !matches_types(types, value)
        {
            let expected = expected(nodes, id, 0);
            self.push(
                path,
                &format!("expected {expected}, got {}", describe(value)),
            );
            return;
        }
        if let Some(values) = &node.enumeration
            && !values.iter().any(|v| json_eq(v, value, 0))
        {
            let got = match value {
                Value::String(s) => quote_str(s),
                other => describe(other),
            };
            self.push(path, &format!("{got} is not one of {}", value_list(values)));
            return;
        }
        if let Some(c) = &node.constant
            && !json_eq(c, value, 0)
        {
            self.push(
                path,
                &format!("expected {}, got {}", quote_value(c), describe(value)),
            );
            return;
        }
        match value {
            Value::Number(n) => self.number(node, n, path),
            Value::String(s) => self.string(node, s, path),
            Value::Array(items) => self.array(node, items, path, depth),
            Value::Object(obj) => self.object(node, obj, path, depth),
            Value::Null | Value::Bool(_) => {}
        }
        for &sub in &node.all_of {
            self.check(sub, value, path, depth + 1);
        }
        if !node.any_of.is_empty() {
            self.alternatives(&node.any_of, false, value, path, depth);
        }
        if !node.one_of.is_empty() {
            self.alternatives(&node.one_of, true, value, path, depth);
        }
    }

    fn number(&mut self, node: &Node, n: &Number, path: &[Seg<'_>]) {
        let out_of_bound = |bound: &Bound, below: bool| {
            let ord = cmp_numbers(n, &bound.limit);
            match (below, bound.exclusive) {
                (true, false) => ord == Some(Ordering::Less),
                (true, true) => ord != Some(Ordering::Greater),
                (false, false) => ord == Some(Ordering::Greater),
                (false, true) => ord != Some(Ordering::Less),
            }
        };
        if let Some(b) = &node.minimum
            && out_of_bound(b, true)
        {
            let word = if b.exclusive { "more than" } else { "at least" };
            self.push(path, &format!("expected {word} {}, got {n}", b.limit));
        }
        if let Some(b) = &node.maximum
            && out_of_bound(b, false)
        {
            let word = if b.exclusive { "less than" } else { "at most" };
            self.push(path, &format!("expected {word} {}, got {n}", b.limit));
        }
        if let (Some(m), Some(v)) = (node.multiple_of, n.as_f64()) {
            let q = v / m;
            if !q.is_finite() || (q - q.round()).abs() > 1e-9 {
                self.push(path, &format!("expected a multiple of {m}, got {n}"));
            }
        }
    }

    fn string(&mut self, node: &Node, s: &str, path: &[Seg<'_>]) {
        if node.min_length.is_none() && node.max_length.is_none() {
            return;
        }
        let len = s.chars().count() as u64;
        if let Some(min) = node.min_length.filter(|&min| len < min) {
            self.push(
                path,
                &format!("expected at least {min} characters, got {len}"),
            );
        }
        if let Some(max) = node.max_length.filter(|&max| len > max) {
            self.push(
                path,
                &format!("expected at most {max} characters, got {len}"),
            );
        }
    }

    fn array<'v>(
        &mut self,
        node: &Node,
        items: &'v [Value],
        path: &mut Vec<Seg<'v>>,
        depth: usize,
    ) {
        let len = items.len() as u64;
        if let Some(min) = node.min_items.filter(|&min| len < min) {
            self.push(path, &format!("expected at least {min} items, got {len}"));
        }
        if let Some(max) = node.max_items.filter(|&max| len > max) {
            self.push(path, &format!("expected at most {max} items, got {len}"));
        }
        if node.unique_items {
            let mut seen: HashMap<String, usize> = HashMap::new();
            for (i, item) in items.iter().enumerate() {
                if let Some(first) = seen.insert(item.to_string(), i) {
                    self.push(path, &format!("items [{first}] and [{i}] are equal"));
                    break;
                }
            }
        }
        let Some(item_node) = node.items else {
            return;
        };
        let mut bad = 0usize;
        for (i, item) in items.iter().enumerate() {
            if self.gave_up {
                return;
            }
            let saved = std::mem::take(&mut self.problems);
            path.push(Seg::Index(i));
            self.check(item_node, item, path, depth + 1);
            path.pop();
            let found = std::mem::replace(&mut self.problems, saved);
            if !found.is_empty() {
                if bad < ITEM_PROBLEM_LIMIT {
                    self.problems.extend(found);
                }
                bad += 1;
            }
        }
        if bad > ITEM_PROBLEM_LIMIT {
            let more = bad - ITEM_PROBLEM_LIMIT;
            let item = &self.nodes[item_node];
            let what = match item.types.and_then(Types::single) {
                Some(name) if item.is_plain_type() => format!("are not {name}s"),
                _ => "have problems".to_string(),
            };
            self.push(path, &format!("{more} more items {what}"));
        }
    }

    fn object<'v>(
        &mut self,
        node: &Node,
        obj: &'v serde_json::Map<String, Value>,
        path: &mut Vec<Seg<'v>>,
        depth: usize,
    ) {
        let nodes = self.nodes;
        let root = path.is_empty();
        for (name, child) in &node.properties {
            let required = node.required.iter().any(|r| r == name);
            match obj.get_key_value(name) {
                // A required property that accepts null may be left out
                // (serde reads a missing `Option` field as `None`).
                None if required && !nodes[*child].accepts_null(nodes, 0) => {
                    let expected = expected(nodes, *child, 0);
                    self.missing(path, root, name, &expected);
                }
                // An optional property sent as `null` counts as not sent.
                None | Some((_, Value::Null)) if !required => {}
                None => {}
                Some((key, value)) => {
                    path.push(Seg::Key(key));
                    self.check(*child, value, path, depth + 1);
                    path.pop();
                }
            }
        }
        for name in &node.required {
            if !obj.contains_key(name) && !node.properties.iter().any(|(p, _)| p == name) {
                self.missing(path, root, name, "any value");
            }
        }
        for (key, value) in obj {
            if node.properties.iter().any(|(p, _)| p == key) {
                continue;
            }
            match node.additional {
                Additional::Allowed => {}
                Additional::Denied => {
                    let key = excerpt(key, QUOTE_LIMIT);
                    let names = accepted_names(node, root);
                    if root {
                        self.problems
                            .push(format!("unknown parameter `{key}`; {names}"));
                    } else {
                        self.push(path, &format!("unknown property `{key}`; {names}"));
                    }
                }
                Additional::Schema(sub) => {
                    path.push(Seg::Key(key));
                    self.check(sub, value, path, depth + 1);
                    path.pop();
                }
            }
        }
        let len = obj.len() as u64;
        if let Some(min) = node.min_properties.filter(|&min| len < min) {
            self.push(
                path,
                &format!("expected at least {min} properties, got {len}"),
            );
        }
        if let Some(max) = node.max_properties.filter(|&max| len > max) {
            self.push(
                path,
                &format!("expected at most {max} properties, got {len}"),
            );
        }
    }

    fn missing(&mut self, path: &[Seg<'_>], root: bool, name: &str, expected: &str) {
        let name = excerpt(name, QUOTE_LIMIT);
        if root {
            self.problems
                .push(format!("missing required parameter `{name}` ({expected})"));
        } else {
            self.push(
                path,
                &format!("missing required property `{name}` ({expected})"),
            );
        }
    }

    fn alternatives<'v>(
        &mut self,
        ids: &[NodeId],
        exactly_one: bool,
        value: &'v Value,
        path: &mut Vec<Seg<'v>>,
        depth: usize,
    ) {
        let saved = std::mem::take(&mut self.problems);
        let mut results = Vec::with_capacity(ids.len());
        for &id in ids {
            self.check(id, value, path, depth + 1);
            results.push(std::mem::take(&mut self.problems));
        }
        self.problems = saved;
        if self.gave_up {
            return;
        }
        let matched = results.iter().filter(|p| p.is_empty()).count();
        if matched == 1 || (matched > 1 && !exactly_one) {
            return;
        }
        if matched > 1 {
            self.push(
                path,
                &format!(
                    "matches {matched} of the `oneOf` alternatives; it must match exactly one"
                ),
            );
            return;
        }
        // When only one alternative has the value's type, its problems say
        // the most; otherwise name the alternatives.
        let nodes = self.nodes;
        let candidates: Vec<usize> = (0..ids.len())
            .filter(|&i| type_accepts(nodes, ids[i], value, 0))
            .collect();
        if let [only] = candidates[..] {
            self.problems.append(&mut results[only]);
        } else {
            let alternatives: Vec<String> = ids.iter().map(|&id| expected(nodes, id, 1)).collect();
            self.push(
                path,
                &format!(
                    "expected {}, got {}",
                    alternatives.join(" or "),
                    describe(value)
                ),
            );
        }
    }

    /// Make accepted arguments easy on the tool: integral numbers where an
    /// integer is expected become JSON integers, and optional properties
    /// sent as `null` are removed.
    pub(super) fn normalize(&mut self, id: NodeId, value: &mut Value, depth: usize) {
        if depth > MAX_DEPTH || !self.step() {
            return;
        }
        let nodes = self.nodes;
        let node = &nodes[id];
        if let Some(target) = node.reference {
            self.normalize(target, value, depth + 1);
        }
        if node
            .types
            .is_some_and(|t| t.contains(Types::INTEGER) && !t.contains(Types::NUMBER))
        {
            normalize_integer(value);
        }
        match value {
            Value::Array(items) => {
                if let Some(item_node) = node.items {
                    for item in items {
                        self.normalize(item_node, item, depth + 1);
                    }
                }
            }
            Value::Object(obj) => {
                for (name, child) in &node.properties {
                    let required = node.required.iter().any(|r| r == name);
                    if !required && obj.get(name).is_some_and(Value::is_null) {
                        obj.remove(name);
                    } else if let Some(v) = obj.get_mut(name) {
                        self.normalize(*child, v, depth + 1);
                    }
                }
                if let Additional::Schema(sub) = node.additional {
                    for (key, v) in obj.iter_mut() {
                        if !node.properties.iter().any(|(p, _)| p == key) {
                            self.normalize(sub, v, depth + 1);
                        }
                    }
                }
            }
            _ => {}
        }
        for &sub in &node.all_of {
            self.normalize(sub, value, depth + 1);
        }
        // Normalize by the first alternative the value matches.
        for alternatives in [&node.any_of, &node.one_of] {
            for &alt in alternatives {
                let saved = std::mem::take(&mut self.problems);
                self.check(alt, value, &mut Vec::new(), depth + 1);
                let ok = self.problems.is_empty();
                self.problems = saved;
                if ok {
                    self.normalize(alt, value, depth + 1);
                    break;
                }
            }
        }
    }
}

/// Whether the value's JSON type is one the schema could accept.
fn type_accepts(nodes: &[Node], id: NodeId, value: &Value, depth: usize) -> bool {
    let node = &nodes[id];
    if depth > 8 {
        return true;
    }
    if let Some(target) = node.reference {
        return type_accepts(nodes, target, value, depth + 1);
    }
    node.types.is_none_or(|t| matches_types(t, value))
}

fn matches_types(types: Types, value: &Value) -> bool {
    match value {
        Value::Null => types.contains(Types::NULL),
        Value::Bool(_) => types.contains(Types::BOOLEAN),
        Value::Number(_) => {
            types.contains(Types::NUMBER) || (types.contains(Types::INTEGER) && is_integer(value))
        }
        Value::String(_) => types.contains(Types::STRING),
        Value::Array(_) => types.contains(Types::ARRAY),
        Value::Object(_) => types.contains(Types::OBJECT),
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

/// Exact for integers (as `i128`), `f64` otherwise.
fn cmp_numbers(a: &Number, b: &Number) -> Option<Ordering> {
    let int = |n: &Number| n.as_i64().map(i128::from).or(n.as_u64().map(i128::from));
    match (int(a), int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// JSON equality where `3` equals `3.0`.
fn json_eq(a: &Value, b: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y, depth + 1))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w, depth + 1)))
        }
        _ => a == b,
    }
}
