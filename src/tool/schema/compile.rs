//! A JSON Schema as the validator sees it: [`compile`] checks a schema
//! `Value` and turns it into an arena of [`Node`]s, with local `$ref`s
//! resolved to node ids (so recursive schemas are finite graphs).
//!
//! Which keywords are understood, and which are passed through unchecked, is
//! documented on [`Parameters`](super::Parameters#json-schema-support).

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

/// Schemas nested deeper than this are rejected (a guard against runaway
/// recursion on hostile input; real tool schemas are a few levels deep).
pub(super) const MAX_SCHEMA_DEPTH: usize = 64;

pub(super) type NodeId = usize;

/// A set of JSON types, one bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Types(u8);

impl Types {
    pub(super) const NULL: Types = Types(1);
    pub(super) const BOOLEAN: Types = Types(2);
    pub(super) const INTEGER: Types = Types(4);
    pub(super) const NUMBER: Types = Types(8);
    pub(super) const STRING: Types = Types(16);
    pub(super) const ARRAY: Types = Types(32);
    pub(super) const OBJECT: Types = Types(64);

    /// In the order types are named in messages.
    const ALL: [(Types, &'static str); 7] = [
        (Types::STRING, "string"),
        (Types::INTEGER, "integer"),
        (Types::NUMBER, "number"),
        (Types::BOOLEAN, "boolean"),
        (Types::OBJECT, "object"),
        (Types::ARRAY, "array"),
        (Types::NULL, "null"),
    ];

    pub(super) fn contains(self, other: Types) -> bool {
        self.0 & other.0 == other.0
    }

    pub(super) fn with(self, other: Types) -> Types {
        Types(self.0 | other.0)
    }

    fn from_name(name: &str) -> Option<Types> {
        Types::ALL.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
    }

    /// The type names in this set, in message order.
    pub(super) fn names(self) -> impl Iterator<Item = &'static str> {
        Types::ALL
            .iter()
            .filter(move |(t, _)| self.contains(*t))
            .map(|(_, n)| *n)
    }

    /// Whether the set is exactly one type.
    pub(super) fn single(self) -> Option<&'static str> {
        let mut names = self.names();
        match (names.next(), names.next()) {
            (Some(n), None) => Some(n),
            _ => None,
        }
    }
}

/// What an object says about properties it does not list.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Additional {
    Allowed,
    Denied,
    Schema(NodeId),
}

/// A numeric bound: `minimum`/`maximum` and their exclusive forms.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Bound {
    pub(super) limit: Number,
    pub(super) exclusive: bool,
}

/// One schema, with every understood keyword parsed.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Node {
    /// `None`: any type.
    pub(super) types: Option<Types>,
    /// In the order given (declaration order for the builder).
    pub(super) properties: Vec<(String, NodeId)>,
    pub(super) required: Vec<String>,
    pub(super) additional: Additional,
    pub(super) items: Option<NodeId>,
    pub(super) enumeration: Option<Vec<Value>>,
    pub(super) constant: Option<Value>,
    pub(super) minimum: Option<Bound>,
    pub(super) maximum: Option<Bound>,
    pub(super) multiple_of: Option<f64>,
    pub(super) min_length: Option<u64>,
    pub(super) max_length: Option<u64>,
    pub(super) min_items: Option<u64>,
    pub(super) max_items: Option<u64>,
    pub(super) unique_items: bool,
    pub(super) min_properties: Option<u64>,
    pub(super) max_properties: Option<u64>,
    pub(super) any_of: Vec<NodeId>,
    pub(super) one_of: Vec<NodeId>,
    pub(super) all_of: Vec<NodeId>,
    pub(super) reference: Option<NodeId>,
    /// The `false` schema: nothing matches.
    pub(super) never: bool,
}

impl Node {
    fn any() -> Node {
        Node {
            types: None,
            properties: Vec::new(),
            required: Vec::new(),
            additional: Additional::Allowed,
            items: None,
            enumeration: None,
            constant: None,
            minimum: None,
            maximum: None,
            multiple_of: None,
            min_length: None,
            max_length: None,
            min_items: None,
            max_items: None,
            unique_items: false,
            min_properties: None,
            max_properties: None,
            any_of: Vec::new(),
            one_of: Vec::new(),
            all_of: Vec::new(),
            reference: None,
            never: false,
        }
    }

    /// Whether the node says nothing but its type (so "not integers" is an
    /// accurate summary of what is wrong with a bad item).
    pub(super) fn is_plain_type(&self) -> bool {
        self.types.and_then(Types::single).is_some()
            && *self
                == Node {
                    types: self.types,
                    ..Node::any()
                }
    }

    /// Whether `null` is accepted by the type list (the usual way to make a
    /// property optional in strict mode). A node with alternatives counts as
    /// nullable when one of them is `{"type": "null"}`-like.
    pub(super) fn accepts_null(&self, nodes: &[Node], depth: usize) -> bool {
        if depth > 8 || self.never {
            return false;
        }
        if let Some(r) = self.reference {
            return nodes[r].accepts_null(nodes, depth + 1);
        }
        if !self.any_of.is_empty() || !self.one_of.is_empty() {
            return self
                .any_of
                .iter()
                .chain(&self.one_of)
                .any(|&b| nodes[b].accepts_null(nodes, depth + 1));
        }
        self.types.is_none_or(|t| t.contains(Types::NULL))
            && self
                .enumeration
                .as_ref()
                .is_none_or(|values| values.iter().any(Value::is_null))
    }
}

/// The compiled schema: an arena whose node 0 is the root.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Compiled {
    pub(super) nodes: Vec<Node>,
}

impl Compiled {
    pub(super) fn root(&self) -> &Node {
        &self.nodes[0]
    }
}

/// Check `schema` and compile it, or list every problem found.
pub(super) fn compile(schema: &Value) -> Result<Compiled, Vec<String>> {
    let mut c = Compiler {
        root: schema,
        nodes: Vec::new(),
        refs: HashMap::new(),
        problems: Vec::new(),
        pending: Vec::new(),
    };
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(t) => c.problems.push(format!(
            "the root schema must have \"type\": \"object\", got {}",
            super::quote::describe(t)
        )),
        None if schema.is_object() => c
            .problems
            .push("the root schema must have \"type\": \"object\"".to_string()),
        None => c.problems.push(format!(
            "the root schema must be a JSON object, got {}",
            super::quote::describe(schema)
        )),
    }
    // The root is node 0 and `$ref: "#"` points at it.
    c.refs.insert(String::new(), 0);
    c.compile(schema, "", 0);
    // Referenced schemas are compiled one after another, not inside the
    // schema that refers to them, so a long chain of `$ref`s does not
    // deepen the recursion.
    while let Some((id, pointer)) = c.pending.pop() {
        if let Some(target) = schema.pointer(&pointer) {
            let depth = pointer.matches('/').count();
            c.compile_into(id, target, &pointer, depth);
        }
    }
    c.find_cycles();
    if c.problems.is_empty() {
        Ok(Compiled { nodes: c.nodes })
    } else {
        Err(c.problems)
    }
}

struct Compiler<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    /// JSON pointer (without the leading `#`) → node id.
    refs: HashMap<String, NodeId>,
    problems: Vec<String>,
    /// Referenced schemas still to compile: (node id, JSON pointer).
    pending: Vec<(NodeId, String)>,
}

impl Compiler<'_> {
    fn compile(&mut self, schema: &Value, path: &str, depth: usize) -> NodeId {
        let id = self.nodes.len();
        self.nodes.push(Node::any());
        self.compile_into(id, schema, path, depth);
        id
    }

    fn compile_into(&mut self, id: NodeId, schema: &Value, path: &str, depth: usize) {
        let at = if path.is_empty() { "/" } else { path };
        if depth > MAX_SCHEMA_DEPTH {
            self.problems.push(format!(
                "{at}: the schema is nested more than {MAX_SCHEMA_DEPTH} levels deep"
            ));
            return;
        }
        let obj = match schema {
            Value::Bool(b) => {
                self.nodes[id].never = !b;
                return;
            }
            Value::Object(obj) => obj,
            other => {
                self.problems.push(format!(
                    "{at}: a schema must be an object or a boolean, got {}",
                    super::quote::describe(other)
                ));
                return;
            }
        };
        let mut node = Node::any();
        self.types(obj, at, &mut node);
        self.object_keywords(obj, path, at, depth, &mut node);
        match obj.get("items") {
            // `items` as an array is the tuple form of drafts 4-7 (and
            // `prefixItems` its 2020-12 spelling): passed through, not checked.
            None | Some(Value::Array(_)) => {}
            Some(sub @ (Value::Object(_) | Value::Bool(_))) => {
                let p = format!("{path}/items");
                node.items = Some(self.compile(sub, &p, depth + 1));
            }
            Some(other) => self.bad(at, "items", "a schema", other),
        }
        match obj.get("enum") {
            None => {}
            Some(Value::Array(values)) => node.enumeration = Some(values.clone()),
            Some(other) => self.bad(at, "enum", "an array", other),
        }
        node.constant = obj.get("const").cloned();
        self.bounds(obj, at, &mut node);
        node.min_length = self.count(obj, at, "minLength");
        node.max_length = self.count(obj, at, "maxLength");
        node.min_items = self.count(obj, at, "minItems");
        node.max_items = self.count(obj, at, "maxItems");
        node.min_properties = self.count(obj, at, "minProperties");
        node.max_properties = self.count(obj, at, "maxProperties");
        match obj.get("uniqueItems") {
            None => {}
            Some(Value::Bool(b)) => node.unique_items = *b,
            Some(other) => self.bad(at, "uniqueItems", "a boolean", other),
        }
        node.any_of = self.alternatives(obj, path, "anyOf", depth);
        node.one_of = self.alternatives(obj, path, "oneOf", depth);
        node.all_of = self.alternatives(obj, path, "allOf", depth);
        if let Some(r) = obj.get("$ref") {
            match r.as_str() {
                Some(target) => node.reference = self.reference(target, at),
                None => self.bad(at, "$ref", "a string", r),
            }
        }
        for key in [
            "description",
            "title",
            "$schema",
            "$id",
            "$comment",
            "format",
            "pattern",
        ] {
            if let Some(v) = obj.get(key).filter(|v| !v.is_string()) {
                self.bad(at, key, "a string", v);
            }
        }
        for key in ["$defs", "definitions"] {
            if let Some(v) = obj.get(key).filter(|v| !v.is_object()) {
                self.bad(at, key, "an object of schemas", v);
            }
        }
        self.nodes[id] = node;
    }

    /// `required`, `properties` and `additionalProperties`.
    fn object_keywords(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        at: &str,
        depth: usize,
        node: &mut Node,
    ) {
        if let Some(req) = obj.get("required") {
            match req.as_array() {
                Some(names) if names.iter().all(Value::is_string) => {
                    node.required = names
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect();
                }
                _ => self.bad(at, "required", "an array of strings", req),
            }
        }
        if let Some(props) = obj.get("properties") {
            match props {
                Value::Object(props) => {
                    for (name, sub) in props {
                        let p = format!("{path}/properties/{}", escape(name));
                        let child = self.compile(sub, &p, depth + 1);
                        node.properties.push((name.clone(), child));
                    }
                }
                other => self.bad(at, "properties", "an object of schemas", other),
            }
        }
        match obj.get("additionalProperties") {
            None | Some(Value::Bool(true)) => {}
            Some(Value::Bool(false)) => node.additional = Additional::Denied,
            Some(sub @ Value::Object(_)) => {
                let p = format!("{path}/additionalProperties");
                node.additional = Additional::Schema(self.compile(sub, &p, depth + 1));
            }
            Some(other) => self.bad(at, "additionalProperties", "a boolean or a schema", other),
        }
    }

    fn bad(&mut self, at: &str, keyword: &str, expected: &str, got: &Value) {
        self.problems.push(format!(
            "{at}: `{keyword}` must be {expected}, got {}",
            super::quote::describe(got)
        ));
    }

    fn types(&mut self, obj: &Map<String, Value>, at: &str, node: &mut Node) {
        let mut types = match obj.get("type") {
            None => None,
            Some(Value::String(name)) => {
                let t = Types::from_name(name);
                if t.is_none() {
                    self.bad(at, "type", "a JSON type name", &Value::from(name.as_str()));
                }
                t
            }
            Some(Value::Array(names)) => {
                let mut set = Types::default();
                for name in names {
                    match name.as_str().and_then(Types::from_name) {
                        Some(t) => set = set.with(t),
                        None => self.bad(at, "type", "a JSON type name", name),
                    }
                }
                Some(set)
            }
            Some(other) => {
                self.bad(at, "type", "a type name or an array of them", other);
                None
            }
        };
        // OpenAPI 3.0's spelling of "or null", which some servers send.
        if obj.get("nullable") == Some(&Value::Bool(true)) {
            types = types.map(|t| t.with(Types::NULL));
        }
        node.types = types;
    }

    fn bounds(&mut self, obj: &Map<String, Value>, at: &str, node: &mut Node) {
        let mut number = |key: &str| match obj.get(key) {
            None => None,
            Some(Value::Number(n)) => Some(n.clone()),
            // Draft 4: `exclusiveMinimum: true` modifies `minimum`.
            Some(Value::Bool(_)) if key.starts_with("exclusive") => None,
            Some(other) => {
                self.bad(at, key, "a number", other);
                None
            }
        };
        let minimum = number("minimum");
        let maximum = number("maximum");
        let exclusive_minimum = number("exclusiveMinimum");
        let exclusive_maximum = number("exclusiveMaximum");
        let draft4 = |key: &str| obj.get(key) == Some(&Value::Bool(true));
        node.minimum = exclusive_minimum
            .map(|limit| Bound {
                limit,
                exclusive: true,
            })
            .or(minimum.map(|limit| Bound {
                limit,
                exclusive: draft4("exclusiveMinimum"),
            }));
        node.maximum = exclusive_maximum
            .map(|limit| Bound {
                limit,
                exclusive: true,
            })
            .or(maximum.map(|limit| Bound {
                limit,
                exclusive: draft4("exclusiveMaximum"),
            }));
        match obj.get("multipleOf") {
            None => {}
            Some(v) => match v.as_f64() {
                Some(m) if m > 0.0 => node.multiple_of = Some(m),
                _ => self.bad(at, "multipleOf", "a number greater than 0", v),
            },
        }
    }

    #[allow(clippy::cast_sign_loss)] // `f` is checked non-negative
    fn count(&mut self, obj: &Map<String, Value>, at: &str, key: &str) -> Option<u64> {
        let v = obj.get(key)?;
        let n = v.as_u64().or_else(|| {
            // `2.0` is an integer in JSON Schema.
            v.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 9.0e15)
                .map(|f| f as u64)
        });
        if n.is_none() {
            self.bad(at, key, "a non-negative integer", v);
        }
        n
    }

    fn alternatives(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        key: &str,
        depth: usize,
    ) -> Vec<NodeId> {
        match obj.get(key) {
            None => Vec::new(),
            Some(Value::Array(subs)) if !subs.is_empty() => subs
                .iter()
                .enumerate()
                .map(|(i, sub)| self.compile(sub, &format!("{path}/{key}/{i}"), depth + 1))
                .collect(),
            Some(other) => {
                let at = if path.is_empty() { "/" } else { path };
                self.bad(at, key, "a non-empty array of schemas", other);
                Vec::new()
            }
        }
    }

    /// Resolve a `$ref`. Local references (`#`, `#/$defs/X`,
    /// `#/definitions/X`, any `#/json/pointer`) are compiled once and shared;
    /// others (URLs, other documents) are passed through as "any value".
    fn reference(&mut self, target: &str, at: &str) -> Option<NodeId> {
        let pointer = target.strip_prefix('#')?;
        if let Some(&id) = self.refs.get(pointer) {
            return Some(id);
        }
        if self.root.pointer(pointer).is_none() {
            self.problems.push(format!(
                "{at}: `$ref` {} does not resolve in this schema",
                super::quote::quote_value(&Value::from(target))
            ));
            return None;
        }
        let id = self.nodes.len();
        self.nodes.push(Node::any());
        self.refs.insert(pointer.to_string(), id);
        self.pending.push((id, pointer.to_string()));
        Some(id)
    }

    /// Reject schemas that refer to themselves without descending into the
    /// value (`{"$ref": "#/$defs/A"}` where A is that same `$ref`, or an
    /// `anyOf` containing itself): validating them would never end.
    fn find_cycles(&mut self) {
        // 0 = unvisited, 1 = on the stack, 2 = done.
        let mut state = vec![0u8; self.nodes.len()];
        for start in 0..self.nodes.len() {
            if state[start] != 0 {
                continue;
            }
            // Iterative DFS: (node, next edge index).
            let mut stack = vec![(start, 0usize)];
            state[start] = 1;
            while let Some((node, edge)) = stack.last().copied() {
                let next = immediate(&self.nodes[node]).nth(edge);
                if let Some(last) = stack.last_mut() {
                    last.1 += 1;
                }
                match next {
                    None => {
                        state[node] = 2;
                        stack.pop();
                    }
                    Some(n) if state[n] == 1 => {
                        self.problems.push(
                            "a `$ref`/`anyOf`/`oneOf`/`allOf` cycle that never descends \
                             into the value (validating it would never end)"
                                .to_string(),
                        );
                        return;
                    }
                    Some(n) if state[n] == 0 => {
                        state[n] = 1;
                        stack.push((n, 0));
                    }
                    Some(_) => {}
                }
            }
        }
    }
}

/// The nodes validated against the same value as `node`.
fn immediate(node: &Node) -> impl Iterator<Item = NodeId> + '_ {
    node.reference
        .iter()
        .chain(&node.any_of)
        .chain(&node.one_of)
        .chain(&node.all_of)
        .copied()
}

/// A key as a JSON-pointer segment (RFC 6901: `~` → `~0`, `/` → `~1`).
pub(super) fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
