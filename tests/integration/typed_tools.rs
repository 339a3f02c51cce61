//! Typed tools and JSON Schema parameters, end to end: the request carries
//! the generated schema, the tool receives a typed value, and malformed
//! arguments come back to the model with every problem listed.

use std::sync::{Arc, Mutex};

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Json, JsonSchema, Parameters, TypedTool};
use pikuri::{Agent, ToolContext, ToolError};
use serde_json::{Value, json};

pikuri::tool::schema_type! {
    /// Cup size.
    enum Size {
        Small = "small",
        Large = "large",
    }
}

pikuri::tool::schema_type! {
    /// One order line.
    #[derive(PartialEq)]
    struct Item {
        /// What to brew.
        name: String,
        /// How many cups.
        qty: u32,
        size: Size,
    }
}

pikuri::tool::schema_type! {
    #[derive(PartialEq)]
    struct Customer {
        name: String,
        /// Loyalty card number, if any.
        card: Option<u64>,
    }
}

pikuri::tool::schema_type! {
    /// A coffee order.
    #[derive(PartialEq)]
    struct Order {
        customer: Customer,
        items: Vec<Item>,
        note: Option<String>,
    }
}

/// Compile-only: the new public types can cross threads.
#[allow(dead_code)]
fn new_types_are_send_and_sync() {
    fn is<T: Send + Sync + 'static>() {}
    is::<TypedTool>();
    is::<Parameters>();
    is::<pikuri::tool::SchemaError>();
    is::<Json<Vec<u8>>>();
}

#[derive(serde::Serialize)]
struct Receipt {
    cups: u32,
    total_cents: u64,
}

/// The `order` tool, recording every value it receives.
fn order_tool(seen: &Arc<Mutex<Vec<Order>>>) -> TypedTool {
    let seen = Arc::clone(seen);
    TypedTool::new(
        "order",
        "Places a coffee order.",
        move |order: Order, _cx: &ToolContext| {
            let cups: u32 = order.items.iter().map(|i| i.qty).sum();
            let total_cents = order
                .items
                .iter()
                .map(|i| u64::from(i.qty) * if i.size == Size::Large { 400 } else { 300 })
                .sum();
            seen.lock().unwrap().push(order);
            Ok::<_, ToolError>(Json(Receipt { cups, total_cents }))
        },
    )
}

fn agent(server: &FakeServer, tool: impl pikuri::Tool) -> Agent {
    Agent::builder(server.transport())
        .add_tool(tool)
        .build()
        .expect("agent builds")
}

/// The tool message answering `call_id` in the `n`th chat request.
fn observation(server: &FakeServer, n: usize, call_id: &str) -> String {
    let messages = server.chat_requests()[n].messages();
    let m = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool message for {call_id}: {messages:#?}"));
    m["content"].as_str().unwrap().to_string()
}

#[test]
fn typed_tool_receives_nested_objects_and_arrays() {
    let server = FakeServer::start();
    server.push(
        Reply::tool_call(
            "order",
            json!({
                "customer": {"name": "Ann", "card": 1234},
                "items": [
                    {"name": "flat white", "qty": 2, "size": "large"},
                    {"name": "espresso", "qty": 1.0, "size": "small"}
                ],
                "note": null
            }),
        )
        .with_id("call_1"),
    );
    server.push(Reply::text("Ordered."));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut agent = agent(&server, order_tool(&seen));
    agent
        .run_loop("Two large flat whites and an espresso for Ann")
        .unwrap();

    assert_eq!(
        *seen.lock().unwrap(),
        [Order {
            customer: Customer {
                name: "Ann".into(),
                card: Some(1234)
            },
            items: vec![
                Item {
                    name: "flat white".into(),
                    qty: 2,
                    size: Size::Large
                },
                Item {
                    name: "espresso".into(),
                    qty: 1,
                    size: Size::Small
                },
            ],
            note: None,
        }]
    );
    // `Json` output is compact JSON, bound to the call id.
    assert_eq!(
        observation(&server, 1, "call_1"),
        r#"{"cups":3,"total_cents":1100}"#
    );
    // The request carries the schema generated from the type.
    let body = server.chat_requests()[0].body.clone().unwrap();
    let function = &body["tools"][0]["function"];
    assert_eq!(function["name"], "order");
    assert_eq!(function["parameters"], Order::json_schema());
    assert_eq!(
        function["parameters"]["properties"]["items"]["items"]["properties"]["size"]["enum"],
        json!(["small", "large"])
    );
    server.assert_all_used();
}

#[test]
fn malformed_typed_arguments_list_every_problem() {
    let server = FakeServer::start();
    server.push(
        Reply::tool_call(
            "order",
            json!({
                "customer": {"card": -5},
                "items": [
                    {"name": "latte", "qty": 1, "size": "medium"},
                    {"name": 7, "qty": "two", "size": "small", "sugar": true}
                ],
                "tip": 1
            }),
        )
        .with_id("bad"),
    );
    server.push(
        Reply::tool_call(
            "order",
            json!({"customer": {"name": "Bo"}, "items": [{"name": "latte", "qty": 1, "size": "small"}]}),
        )
        .with_id("good"),
    );
    server.push(Reply::text("Fixed and ordered."));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut agent = agent(&server, order_tool(&seen));
    agent.run_loop("A latte").unwrap();

    let feedback = observation(&server, 1, "bad");
    let problems = "Error: invalid arguments:\n\
        - `/customer/card`: expected at least 0, got -5\n\
        - parameter `customer`: missing required property `name` (string)\n\
        - `/items/0/size`: \"medium\" is not one of \"small\", \"large\"\n\
        - `/items/1/name`: expected string, got integer 7\n\
        - `/items/1/qty`: expected integer, got string \"two\"\n\
        - parameter `items`: item [1]: unknown property `sugar`; the properties are: `name`, `qty`, `size`\n\
        - unknown parameter `tip`; the parameters are: `customer`, `items`, `note`\n\
        expected schema:\n";
    assert!(feedback.starts_with(problems), "{feedback}");
    // The bad call never reached the handler; the corrected one did.
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(
        observation(&server, 2, "good"),
        r#"{"cups":1,"total_cents":300}"#
    );
    server.assert_all_used();
}

#[test]
fn generated_schemas_satisfy_strict_mode_on_the_wire() {
    let server = FakeServer::start();
    server.push(Reply::text("hi"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut agent = agent(&server, order_tool(&seen));
    agent.run_loop("hi").unwrap();
    let body = server.chat_requests()[0].body.clone().unwrap();
    let sent = body["tools"][0]["function"]["parameters"].clone();
    let params = Parameters::from_json_schema(sent).unwrap();
    assert_eq!(params.strict_violations(), Vec::<String>::new());
    for schema in [
        Item::json_schema(),
        Customer::json_schema(),
        Order::json_schema(),
    ] {
        let params = Parameters::from_json_schema(schema).unwrap();
        assert_eq!(params.strict_violations(), Vec::<String>::new());
    }
}

#[test]
fn text_output_is_not_json_quoted() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("greet", json!({"name": "Ann", "card": null})).with_id("g"));
    server.push(Reply::text("done"));
    let greet = TypedTool::new("greet", "Greets.", |c: Customer, _cx: &ToolContext| {
        Ok::<_, ToolError>(format!("Hello, {}!", c.name))
    });
    agent(&server, greet).run_loop("greet Ann").unwrap();
    assert_eq!(observation(&server, 1, "g"), "Hello, Ann!");
}

#[test]
fn raw_mcp_schema_is_sent_as_is_and_enforced() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "messageType": {"type": "string", "enum": ["error", "success", "debug"]},
            "includeImage": {"type": "boolean", "default": false},
            "tags": {"type": "array", "items": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                "required": ["key"],
                "additionalProperties": false
            }}
        },
        "required": ["messageType"],
        "additionalProperties": false
    });
    let server = FakeServer::start();
    server.push(
        Reply::tool_call(
            "annotate",
            json!({"messageType": "info", "tags": [{"value": "x"}]}),
        )
        .with_id("m1"),
    );
    server.push(
        Reply::tool_call(
            "annotate",
            json!({"messageType": "debug", "tags": [{"key": "k"}]}),
        )
        .with_id("m2"),
    );
    server.push(Reply::text("done"));
    let tool = FnTool::new(
        "annotate",
        "An MCP tool.",
        Parameters::from_json_schema(schema.clone()).unwrap(),
        |args: &Value, _cx| Ok(args.to_string()),
    );
    agent(&server, tool).run_loop("annotate").unwrap();
    let body = server.chat_requests()[0].body.clone().unwrap();
    assert_eq!(body["tools"][0]["function"]["parameters"], schema);
    let feedback = observation(&server, 1, "m1");
    assert!(
        feedback.starts_with(
            "Error: invalid arguments:\n\
             - parameter `messageType`: \"info\" is not one of \"error\", \"success\", \"debug\"\n\
             - parameter `tags`: item [0]: missing required property `key` (string)\n"
        ),
        "{feedback}"
    );
    assert_eq!(
        observation(&server, 2, "m2"),
        r#"{"messageType":"debug","tags":[{"key":"k"}]}"#
    );
}

// The JSON a `schema_type!` type reads and writes: what serde's derive
// reads and writes for the same declaration (the macro used to expand to
// that derive; these tests pinned it first).

/// Not matched syntactically: an alias of `Option` reads as `None` too.
type MaybeCount = Option<u32>;

pikuri::tool::schema_type! {
    /// Every field kind the macro takes.
    #[derive(PartialEq)]
    struct Everything {
        r#type: String,
        size: Size,
        customer: Customer,
        lines: Vec<Item>,
        tags: std::collections::HashMap<String, u8>,
        maybe: Option<Size>,
        count: MaybeCount,
        nested: Option<Option<bool>>,
    }
}

pikuri::tool::schema_type! {
    /// A variant with its own string, one without.
    enum Mode {
        Fast = "fast-mode",
        Careful,
        r#Loop,
    }
}

pikuri::tool::schema_type! {
    struct NoFields {}
}

fn everything() -> Everything {
    Everything {
        r#type: "t".into(),
        size: Size::Large,
        customer: Customer {
            name: "Ann".into(),
            card: None,
        },
        lines: vec![Item {
            name: "tea".into(),
            qty: 2,
            size: Size::Small,
        }],
        tags: [("k".to_string(), 1)].into_iter().collect(),
        maybe: None,
        count: Some(3),
        nested: Some(None),
    }
}

#[test]
fn a_schema_type_writes_its_fields_in_order_with_serde_names_and_reads_them_back() {
    let value = everything();
    assert_eq!(
        serde_json::to_string(&value).unwrap(),
        r#"{"type":"t","size":"large","customer":{"name":"Ann","card":null},"lines":[{"name":"tea","qty":2,"size":"small"}],"tags":{"k":1},"maybe":null,"count":3,"nested":null}"#
    );
    let text = serde_json::to_string(&value).unwrap();
    // `Some(None)` is written `null` and read back `None`, as with serde.
    let back: Everything = serde_json::from_str(&text).unwrap();
    assert_eq!(
        back,
        Everything {
            nested: None,
            ..everything()
        }
    );
    let back: Everything = serde_json::from_value(serde_json::to_value(&value).unwrap()).unwrap();
    assert_eq!(
        back,
        Everything {
            nested: None,
            ..everything()
        }
    );
    assert_eq!(serde_json::to_string(&NoFields {}).unwrap(), "{}");
    let _: NoFields = serde_json::from_str(r#"{"ignored": 1}"#).unwrap();
}

#[test]
fn a_schema_type_reads_absent_option_fields_as_none_and_skips_unknown_keys() {
    let text = r#"{"type": "t", "size": "large", "unknown": {"deep": [1, 2]},
        "customer": {"name": "Ann"}, "lines": [], "tags": {}}"#;
    let read: Everything = serde_json::from_str(text).unwrap();
    assert_eq!((read.maybe, read.count, read.nested), (None, None, None));
    assert_eq!(read.customer.card, None);
    let read: Everything = serde_json::from_value(serde_json::from_str(text).unwrap()).unwrap();
    assert_eq!(read.count, None);
}

#[test]
fn a_schema_type_skips_an_unknown_key_nested_100000_deep_without_overflowing() {
    let deep = format!(
        r#"{{"name": "Ann", "x": {}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    // Skipped as serde_json skips any value: without recursion.
    assert_eq!(serde_json::from_str::<Customer>(&deep).unwrap().name, "Ann");
    // In a known field, it is the field's type error, not an overflow.
    let deep = format!(
        r#"{{"name": {}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let err = serde_json::from_str::<Customer>(&deep).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid type: sequence, expected a string"),
        "{err}"
    );
}

#[test]
fn a_schema_type_refuses_a_missing_field_a_key_twice_and_a_wrong_type_as_serde_does() {
    let missing = serde_json::from_str::<Item>(r#"{"name": "tea", "size": "small"}"#).unwrap_err();
    assert_eq!(
        missing.to_string(),
        "missing field `qty` at line 1 column 32"
    );
    let missing = serde_json::from_value::<Item>(json!({"name": "tea", "qty": 1})).unwrap_err();
    assert_eq!(missing.to_string(), "missing field `size`");
    let twice =
        serde_json::from_str::<Customer>(r#"{"name": "a", "card": 1, "name": "b"}"#).unwrap_err();
    assert_eq!(
        twice.to_string(),
        "duplicate field `name` at line 1 column 31"
    );
    let wrong = serde_json::from_str::<Customer>(r#""Ann""#).unwrap_err();
    assert_eq!(
        wrong.to_string(),
        "invalid type: string \"Ann\", expected struct Customer at line 1 column 5"
    );
    let field = serde_json::from_value::<Item>(json!({"name": "tea", "qty": -1, "size": "small"}))
        .unwrap_err();
    assert_eq!(
        field.to_string(),
        "invalid value: integer `-1`, expected u32"
    );
    // An array fills the fields in order, as serde's derive reads it.
    let seq: Customer = serde_json::from_str(r#"["Ann", 7]"#).unwrap();
    assert_eq!(
        seq,
        Customer {
            name: "Ann".into(),
            card: Some(7)
        }
    );
    let short = serde_json::from_str::<Customer>(r#"["Ann"]"#).unwrap_err();
    assert_eq!(
        short.to_string(),
        "invalid length 1, expected struct Customer with 2 elements at line 1 column 7"
    );
}

#[test]
fn a_schema_type_enum_is_its_wire_string() {
    use serde::Deserialize as _;
    use serde::de::IntoDeserializer;
    type Plain = serde::de::value::Error;
    assert_eq!(
        serde_json::to_value(Mode::Fast).unwrap(),
        json!("fast-mode")
    );
    assert_eq!(
        serde_json::to_value(Mode::Careful).unwrap(),
        json!("Careful")
    );
    assert_eq!(serde_json::to_value(Mode::Loop).unwrap(), json!("Loop"));
    assert_eq!(
        Mode::json_schema()["enum"],
        json!(["fast-mode", "Careful", "Loop"])
    );
    for (text, mode) in [
        (r#""fast-mode""#, Mode::Fast),
        (r#""Careful""#, Mode::Careful),
        (r#""Loop""#, Mode::Loop),
        // serde's enum form: a one-key object whose value is null.
        (r#"{"Careful": null}"#, Mode::Careful),
    ] {
        assert_eq!(serde_json::from_str::<Mode>(text).unwrap(), mode, "{text}");
    }
    let unknown = serde_json::from_str::<Mode>(r#""Fast""#).unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "unknown variant `Fast`, expected one of `fast-mode`, `Careful`, `Loop` at line 1 column 6"
    );
    let unknown = serde_json::from_value::<Size>(json!("huge")).unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "unknown variant `huge`, expected `small` or `large`"
    );
    // A format that numbers variants reads the index, as with the derive.
    let by_index = Mode::deserialize(IntoDeserializer::<Plain>::into_deserializer(2u32));
    assert_eq!(by_index.unwrap(), Mode::Loop);
    let past = Mode::deserialize(IntoDeserializer::<Plain>::into_deserializer(3u32)).unwrap_err();
    assert_eq!(
        past.to_string(),
        "invalid value: integer `3`, expected variant index 0 <= i < 3"
    );
    let huge =
        Mode::deserialize(IntoDeserializer::<Plain>::into_deserializer(u32::MAX)).unwrap_err();
    assert_eq!(
        huge.to_string(),
        "invalid value: integer `4294967295`, expected variant index 0 <= i < 3"
    );
    let number = serde_json::from_value::<Size>(json!(1)).unwrap_err();
    assert_eq!(
        number.to_string(),
        "invalid type: integer `1`, expected string or map"
    );
}

// Names the expansion uses for its own items and generic parameters: a
// type or field so named still works (serde's derive prefixes its own
// with `__` for the same reason).
pikuri::tool::schema_type! {
    #[derive(PartialEq)]
    struct S {
        map: u8,
        seq: Option<u8>,
        key: String,
        read: bool,
        index: D,
    }
}

pikuri::tool::schema_type! {
    enum D {
        E,
        A = "a",
    }
}

pikuri::tool::schema_type! {
    #[derive(PartialEq)]
    struct Fields {
        len: Variant,
    }
}

pikuri::tool::schema_type! {
    enum Variant {
        Visitor,
        Index,
    }
}

#[test]
fn a_schema_type_may_use_the_names_its_expansion_uses() {
    let s = S {
        map: 1,
        seq: None,
        key: "k".into(),
        read: true,
        index: D::A,
    };
    let text = serde_json::to_string(&s).unwrap();
    assert_eq!(
        text,
        r#"{"map":1,"seq":null,"key":"k","read":true,"index":"a"}"#
    );
    assert_eq!(serde_json::from_str::<S>(&text).unwrap(), s);
    let f: Fields = serde_json::from_str(r#"{"len": "Index"}"#).unwrap();
    assert_eq!(
        f,
        Fields {
            len: Variant::Index
        }
    );
    assert_eq!(
        serde_json::to_value(Variant::Visitor).unwrap(),
        json!("Visitor")
    );
    assert_eq!(serde_json::from_value::<D>(json!("E")).unwrap(), D::E);
    // One field: "element", as serde's derive words it.
    let short = serde_json::from_str::<Fields>("[]").unwrap_err();
    assert_eq!(
        short.to_string(),
        "invalid length 0, expected struct Fields with 1 element at line 1 column 2"
    );
}
