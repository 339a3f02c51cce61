//! Unit tests of the schema: the builder, raw schemas, validation and
//! strict mode.

use super::validate::ITEM_PROBLEM_LIMIT;
use super::*;
use crate::test_util::Rng;
use serde_json::json;

fn sample() -> Parameters {
    Parameters::builder()
        .required_string("query", "The query.")
        .optional_integer("limit", "Max results.")
        .optional_number("threshold", "Score cut-off.")
        .optional_boolean("exact", "Exact match.")
        .optional_array("tags", "Tags.", ItemType::String)
        .optional_enum("order", "Sort order.", &["asc", "desc"])
        .build()
}

#[test]
fn empty_schema_has_every_key() {
    assert_eq!(
        *Parameters::empty().to_json(),
        json!({
            "type": "object",
            "properties": {},
            "required": [],
            "additionalProperties": false
        })
    );
    assert_eq!(Parameters::default(), Parameters::empty());
}

#[test]
fn schema_has_exact_shape() {
    let params = Parameters::builder()
        .required_string("s", "a string")
        .optional_string("os", "opt string")
        .required_integer("i", "an integer")
        .optional_integer("oi", "opt integer")
        .required_number("n", "a number")
        .optional_number("on", "opt number")
        .required_boolean("b", "a boolean")
        .optional_boolean("ob", "opt boolean")
        .required_array("a", "an array", ItemType::Number)
        .optional_array("oa", "opt array", ItemType::Boolean)
        .required_enum("e", "an enum", &["x", "y"])
        .optional_enum("oe", "opt enum", &["z"])
        .build();
    assert_eq!(
        *params.to_json(),
        json!({
            "type": "object",
            "properties": {
                "s": {"type": "string", "description": "a string"},
                "os": {"type": "string", "description": "opt string"},
                "i": {"type": "integer", "description": "an integer"},
                "oi": {"type": "integer", "description": "opt integer"},
                "n": {"type": "number", "description": "a number"},
                "on": {"type": "number", "description": "opt number"},
                "b": {"type": "boolean", "description": "a boolean"},
                "ob": {"type": "boolean", "description": "opt boolean"},
                "a": {"type": "array", "description": "an array", "items": {"type": "number"}},
                "oa": {"type": "array", "description": "opt array", "items": {"type": "boolean"}},
                "e": {"type": "string", "description": "an enum", "enum": ["x", "y"]},
                "oe": {"type": "string", "description": "opt enum", "enum": ["z"]}
            },
            "required": ["s", "i", "n", "b", "a", "e"],
            "additionalProperties": false
        })
    );
}

#[test]
#[should_panic(expected = "duplicate parameter name `q`")]
fn duplicate_name_panics() {
    let _ = Parameters::builder()
        .required_string("q", "one")
        .optional_integer("q", "two");
}

#[test]
#[should_panic(expected = "must not be empty")]
fn empty_name_panics() {
    let _ = Parameters::builder().required_string("", "nameless");
}

#[test]
#[should_panic(expected = "enum parameter `e` has no values")]
fn empty_enum_panics() {
    let _ = Parameters::builder().required_enum("e", "nothing", &[]);
}

#[test]
fn valid_arguments_pass() {
    let params = sample();
    assert!(params.validate(&json!({"query": "cats"})).is_ok());
    assert!(
        params
            .validate(&json!({
                "query": "cats",
                "limit": 10,
                "threshold": 0.5,
                "exact": false,
                "tags": ["a", "b"],
                "order": "desc"
            }))
            .is_ok()
    );
    // A number with a zero fraction is an integer; an integer is a number.
    assert!(
        params
            .validate(&json!({"query": "q", "limit": 3.0, "threshold": 1}))
            .is_ok()
    );
    // `null` for an optional parameter means "not sent".
    assert!(
        params
            .validate(&json!({"query": "q", "limit": null, "order": null}))
            .is_ok()
    );
    assert!(params.validate(&json!({"query": "q", "tags": []})).is_ok());
}

#[test]
fn every_problem_is_listed() {
    let err = sample()
        .validate(&json!({
            "limit": "ten",
            "threshold": "high",
            "exact": "true",
            "tags": ["ok", 1, null],
            "order": "sideways",
            "qeury": "cats"
        }))
        .unwrap_err();
    assert_eq!(
        err.problems(),
        [
            "missing required parameter `query` (string)",
            "parameter `limit`: expected integer, got string \"ten\"",
            "parameter `threshold`: expected number, got string \"high\"",
            "parameter `exact`: expected boolean, got string \"true\"",
            "parameter `tags`: item [1]: expected string, got integer 1",
            "parameter `tags`: item [2]: expected string, got null",
            "parameter `order`: \"sideways\" is not one of \"asc\", \"desc\"",
            "unknown parameter `qeury`; the parameters are: `query`, `limit`, \
                 `threshold`, `exact`, `tags`, `order`",
        ]
    );
}

#[test]
fn display_lists_problems_then_reprints_schema() {
    let params = Parameters::builder()
        .required_string("query", "The query.")
        .optional_integer("limit", "Max results.")
        .build();
    let err = params.validate(&json!({"limit": "ten"})).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid arguments:
- missing required parameter `query` (string)
- parameter `limit`: expected integer, got string "ten"
expected schema:
{
  "additionalProperties": false,
  "properties": {
    "limit": {
      "description": "Max results.",
      "type": "integer"
    },
    "query": {
      "description": "The query.",
      "type": "string"
    }
  },
  "required": [
    "query"
  ],
  "type": "object"
}"#
    );
}

#[test]
fn non_objects_are_rejected_with_their_type() {
    let params = Parameters::empty();
    for (args, got) in [
        (json!(null), "null"),
        (json!([1, 2]), "array [1,2]"),
        (json!("x"), "string \"x\""),
        (json!(7), "integer 7"),
        (json!(true), "boolean true"),
    ] {
        let err = params.validate(&args).unwrap_err();
        assert_eq!(
            err.problems(),
            [format!("the arguments must be a JSON object, got {got}")]
        );
    }
    let err = params.validate(&json!({"x": 1})).unwrap_err();
    assert_eq!(
        err.problems(),
        ["unknown parameter `x`; this tool takes no parameters"]
    );
}

#[test]
fn integers_are_strict_about_fractions_and_range() {
    let params = Parameters::builder().required_integer("n", "n").build();
    for ok in [
        json!(0),
        json!(-5),
        json!(u64::MAX),
        json!(4.0),
        json!(-1e18),
    ] {
        assert!(params.validate(&json!({ "n": ok })).is_ok(), "{ok}");
    }
    for bad in [
        json!(2.5),
        json!(1e30),
        json!("3"),
        json!(true),
        json!(null),
    ] {
        assert!(params.validate(&json!({ "n": bad })).is_err(), "{bad}");
    }
    let err = params.validate(&json!({"n": 2.5})).unwrap_err();
    assert_eq!(
        err.problems(),
        ["parameter `n`: expected integer, got number 2.5"]
    );
}

#[test]
fn enum_rejects_non_strings() {
    let params = Parameters::builder()
        .required_enum("unit", "u", &["c", "f"])
        .build();
    let err = params.validate(&json!({"unit": 1})).unwrap_err();
    assert_eq!(
        err.problems(),
        ["parameter `unit`: expected one of \"c\", \"f\", got integer 1"]
    );
    let err = params.validate(&json!({})).unwrap_err();
    assert_eq!(
        err.problems(),
        ["missing required parameter `unit` (one of \"c\", \"f\")"]
    );
}

#[test]
fn array_problems_are_bounded() {
    let params = Parameters::builder()
        .required_array("ids", "ids", ItemType::Integer)
        .build();
    let err = params.validate(&json!({"ids": "1,2"})).unwrap_err();
    assert_eq!(
        err.problems(),
        ["parameter `ids`: expected array of integers, got string \"1,2\""]
    );
    let many: Vec<Value> = (0..20).map(|i| json!(i.to_string())).collect();
    let err = params.validate(&json!({ "ids": many })).unwrap_err();
    assert_eq!(err.problems().len(), ITEM_PROBLEM_LIMIT + 1);
    assert_eq!(
        err.problems()[ITEM_PROBLEM_LIMIT],
        "parameter `ids`: 15 more items are not integers"
    );
}

#[test]
fn quoted_values_are_bounded() {
    let params = Parameters::builder().required_integer("n", "n").build();
    let long = "x".repeat(10_000);
    let err = params
        .validate(&json!({ "n": long.clone(), long.clone(): 1 }))
        .unwrap_err();
    for problem in err.problems() {
        assert!(problem.chars().count() < 200, "{problem}");
    }
    assert!(err.problems()[0].ends_with(&format!("\"{}…\"", "x".repeat(80))));
    let err = params
        .validate(&json!({ "n": [long.clone()], "m": {"k": long} }))
        .unwrap_err();
    for problem in err.problems() {
        assert!(problem.chars().count() < 200, "{problem}");
    }
}

#[test]
fn normalize_fixes_integers_and_drops_null_optionals() {
    let params = Parameters::builder()
        .required_integer("n", "n")
        .optional_array("ids", "ids", ItemType::Integer)
        .optional_string("s", "s")
        .optional_number("x", "x")
        .build();
    let args = json!({"n": 3.0, "ids": [1.0, 2], "s": null, "x": 2.0});
    assert!(params.validate(&args).is_ok());
    let args = params.normalize(args);
    assert_eq!(args, json!({"n": 3, "ids": [1, 2], "x": 2.0}));
    assert_eq!(args["n"].as_i64(), Some(3));
}

// ---- JSON Schema given as is ----

/// Tool schemas in the shape `zod-to-json-schema` emits for
/// @modelcontextprotocol/server-everything (draft 7, `$schema`,
/// `additionalProperties: false`, defaults, enums, bounds), plus an array of
/// objects and a recursive `$defs` schema as MCP servers send them.
fn mcp_schemas() -> Vec<Value> {
    let draft7 = "http://json-schema.org/draft-07/schema#";
    vec![
        json!({
            "type": "object",
            "properties": {"message": {"type": "string", "description": "Message to echo"}},
            "required": ["message"],
            "additionalProperties": false,
            "$schema": draft7
        }),
        json!({
            "type": "object",
            "properties": {
                "duration": {"type": "number", "default": 10, "description": "Duration in seconds"},
                "steps": {"type": "number", "default": 5, "description": "Number of steps"}
            },
            "additionalProperties": false,
            "$schema": draft7
        }),
        json!({
            "type": "object",
            "properties": {
                "messageType": {"type": "string", "enum": ["error", "success", "debug"]},
                "includeImage": {"type": "boolean", "default": false}
            },
            "required": ["messageType"],
            "additionalProperties": false,
            "$schema": draft7
        }),
        json!({
            "type": "object",
            "properties": {"resourceId": {"type": "number", "minimum": 1, "maximum": 100}},
            "required": ["resourceId"],
            "additionalProperties": false,
            "$schema": draft7
        }),
        json!({"type": "object", "properties": {}, "additionalProperties": false, "$schema": draft7}),
        order_schema(),
        tree_schema(),
    ]
}

fn order_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "customer": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "email": {"type": ["string", "null"], "format": "email"}
                },
                "required": ["name"],
                "additionalProperties": false
            },
            "items": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                        "size": {"type": "string", "enum": ["s", "m", "l"]}
                    },
                    "required": ["name", "qty"],
                    "additionalProperties": false
                }
            },
            "note": {"type": "string", "maxLength": 10, "x-unknown": {"kept": true}}
        },
        "required": ["customer", "items"],
        "additionalProperties": false
    })
}

fn tree_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}},
        "required": ["root"],
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}
                },
                "required": ["label"],
                "additionalProperties": false
            }
        }
    })
}

#[test]
fn mcp_schemas_are_accepted_and_sent_untouched() {
    for schema in mcp_schemas() {
        let params = Parameters::from_json_schema(schema.clone())
            .unwrap_or_else(|e| panic!("{e}\n{schema:#}"));
        assert_eq!(*params.to_json(), schema);
    }
}

#[test]
fn nested_problems_are_all_listed_with_their_paths() {
    let params = Parameters::from_json_schema(order_schema()).unwrap();
    assert!(
        params
            .validate(&json!({
                "customer": {"name": "Ann", "email": null},
                "items": [{"name": "tea", "qty": 2, "size": "m"}],
                "anything": "else is fine: no additionalProperties at the root? it is false"
            }))
            .is_err()
    );
    assert!(
        params
            .validate(&json!({
                "customer": {"name": "Ann"},
                "items": [{"name": "tea", "qty": 2.0}]
            }))
            .is_ok()
    );
    let err = params
        .validate(&json!({
            "customer": {"name": "", "phone": 5},
            "items": [
                {"name": "tea", "qty": 2},
                {"name": "cup", "qty": 0, "size": "xl"},
                {"name": 7, "qty": 1.5},
                "mug"
            ],
            "note": "far too long a note"
        }))
        .unwrap_err();
    assert_eq!(
        err.problems(),
        [
            "`/customer/name`: expected at least 1 characters, got 0",
            "parameter `customer`: unknown property `phone`; the properties are: `email`, `name`",
            "`/items/1/qty`: expected at least 1, got 0",
            "`/items/1/size`: \"xl\" is not one of \"s\", \"m\", \"l\"",
            "`/items/2/name`: expected string, got integer 7",
            "`/items/2/qty`: expected integer, got number 1.5",
            "parameter `items`: item [3]: expected object, got string \"mug\"",
            "parameter `note`: expected at most 10 characters, got 19",
        ]
    );
    let err = params.validate(&json!({"items": []})).unwrap_err();
    assert_eq!(
        err.problems(),
        [
            "missing required parameter `customer` (object)",
            "parameter `items`: expected at least 1 items, got 0",
        ]
    );
}

#[test]
fn normalize_reaches_nested_integers_and_nulls() {
    let params = Parameters::from_json_schema(order_schema()).unwrap();
    let args = json!({
        "customer": {"name": "Ann", "email": null},
        "items": [{"name": "tea", "qty": 2.0, "size": null}]
    });
    params.validate(&args).unwrap();
    assert_eq!(
        params.normalize(args),
        json!({"customer": {"name": "Ann"}, "items": [{"name": "tea", "qty": 2}]})
    );
}

#[test]
fn recursive_refs_are_followed() {
    let params = Parameters::from_json_schema(tree_schema()).unwrap();
    let ok =
        json!({"root": {"label": "a", "children": [{"label": "b", "children": [{"label": "c"}]}]}});
    assert!(params.validate(&ok).is_ok());
    let err = params
        .validate(&json!({"root": {"label": "a", "children": [{"children": [{"label": 1}]}]}}))
        .unwrap_err();
    assert_eq!(
        err.problems(),
        [
            "`/root/children/0/children/0/label`: expected string, got integer 1",
            "`/root/children/0`: missing required property `label` (string)",
        ]
    );
    // A value deeper than the cap is reported, not recursed into.
    let mut deep = json!({"label": "leaf"});
    for _ in 0..200 {
        deep = json!({"label": "x", "children": [deep]});
    }
    let err = params.validate(&json!({ "root": deep })).unwrap_err();
    assert_eq!(err.problems().len(), 1, "{:?}", err.problems());
    assert!(err.problems()[0].contains("nested more than 128 levels deep"));
}

#[test]
fn malformed_known_keywords_are_all_errors() {
    let err = Parameters::from_json_schema(json!({
        "type": "object",
        "required": 5,
        "additionalProperties": "no",
        "properties": {
            "a": {"type": "text"},
            "b": {"type": "array", "items": 3, "minItems": -1},
            "c": {"anyOf": []},
            "d": {"$ref": "#/$defs/missing"},
            "e": {"enum": "x", "multipleOf": 0},
            "f": 7,
            "g": {"description": 1, "exclusiveMinimum": "0"}
        }
    }))
    .unwrap_err();
    assert_eq!(
        err.problems(),
        [
            "/: `required` must be an array of strings, got integer 5",
            "/properties/a: `type` must be a JSON type name, got string \"text\"",
            "/properties/b: `items` must be a schema, got integer 3",
            "/properties/b: `minItems` must be a non-negative integer, got integer -1",
            "/properties/c: `anyOf` must be a non-empty array of schemas, got array []",
            "/properties/d: `$ref` \"#/$defs/missing\" does not resolve in this schema",
            "/properties/e: `enum` must be an array, got string \"x\"",
            "/properties/e: `multipleOf` must be a number greater than 0, got integer 0",
            "/properties/f: a schema must be an object or a boolean, got integer 7",
            "/properties/g: `exclusiveMinimum` must be a number, got string \"0\"",
            "/properties/g: `description` must be a string, got integer 1",
            "/: `additionalProperties` must be a boolean or a schema, got string \"no\"",
        ]
    );
    for (root, problem) in [
        (
            json!([]),
            "the root schema must be a JSON object, got array []",
        ),
        (json!({}), "the root schema must have \"type\": \"object\""),
        (
            json!({"type": ["object", "null"]}),
            "the root schema must have \"type\": \"object\", got array [\"object\",\"null\"]",
        ),
    ] {
        let err = Parameters::from_json_schema(root).unwrap_err();
        assert_eq!(err.problems()[0], problem);
    }
}

#[test]
fn unknown_keywords_pass_through_unchecked() {
    let schema = json!({
        "type": "object",
        "properties": {
            "s": {"type": "string", "pattern": "^[a-z]+$", "format": "uri", "x-ui": {"w": 3}},
            "t": {"type": "array", "items": [{"type": "string"}], "contains": {"const": 1}},
            "n": {"not": {"type": "null"}, "if": {}, "then": {}},
            "r": {"$ref": "https://example.com/schema.json"}
        },
        "patternProperties": {"^x": {"type": "string"}}
    });
    let params = Parameters::from_json_schema(schema.clone()).unwrap();
    assert_eq!(*params.to_json(), schema);
    // Not enforced: pattern, tuple items, not, remote $ref.
    assert!(
        params
            .validate(&json!({"s": "UPPER", "t": [1], "n": null, "r": 5, "extra": 1}))
            .is_ok()
    );
}

#[test]
fn ref_cycles_without_descent_are_rejected() {
    for schema in [
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
               "$defs": {"A": {"$ref": "#/$defs/A"}}}),
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
               "$defs": {"A": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/B"}]},
                         "B": {"allOf": [{"$ref": "#/$defs/A"}]}}}),
        json!({"type": "object", "anyOf": [{"$ref": "#"}]}),
    ] {
        let err = Parameters::from_json_schema(schema).unwrap_err();
        assert!(err.problems()[0].contains("cycle"), "{err}");
    }
    // Recursion through `properties` or `items` is fine.
    let ok = json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
    let params = Parameters::from_json_schema(ok).unwrap();
    let err = params.validate(&json!({"next": {"next": 3}})).unwrap_err();
    assert_eq!(
        err.problems(),
        ["`/next/next`: expected object, got integer 3"]
    );
}

#[test]
fn alternatives_and_nullable_types() {
    let params = Parameters::from_json_schema(json!({
        "type": "object",
        "properties": {
            "n": {"type": ["integer", "null"]},
            "id": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]},
            "pt": {"oneOf": [
                {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
                {"type": "string", "enum": ["origin"]}
            ]},
            "any": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            "odd": {"allOf": [{"type": "integer"}, {"multipleOf": 2}]},
            "no": false,
            "c": {"const": "fixed"},
            "nullable": {"type": "string", "nullable": true}
        },
        "required": ["n"]
    }))
    .unwrap();
    assert!(
        params
            .validate(&json!({"n": null, "id": "a", "pt": "origin", "nullable": null}))
            .is_ok()
    );
    // A required property that accepts null may be left out.
    assert!(params.validate(&json!({"id": 3, "pt": {"x": 1.5}})).is_ok());
    let err = params
        .validate(&json!({
            "n": "1", "id": -1, "pt": {"y": 1}, "any": 2, "odd": 3, "no": 1, "c": "other"
        }))
        .unwrap_err();
    assert_eq!(
        err.problems(),
        [
            "parameter `any`: matches 2 of the `oneOf` alternatives; it must match exactly one",
            "parameter `c`: expected \"fixed\", got string \"other\"",
            "parameter `id`: expected at least 0, got -1",
            "parameter `n`: expected integer or null, got string \"1\"",
            "parameter `no`: no value is allowed here, got integer 1",
            "parameter `odd`: expected a multiple of 2, got 3",
            "parameter `pt`: missing required property `x` (number)",
        ]
    );
    let err = params.validate(&json!({"id": true})).unwrap_err();
    assert_eq!(
        err.problems(),
        ["parameter `id`: expected string or integer, got boolean true"]
    );
}

#[test]
fn bounds_are_exact_for_big_integers() {
    let params = Parameters::from_json_schema(json!({
        "type": "object",
        "properties": {
            "u": {"type": "integer", "minimum": 0, "maximum": u64::MAX},
            "i": {"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX},
            "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "d4": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
            "tags": {"type": "array", "uniqueItems": true, "maxItems": 3},
            "o": {"type": "object", "minProperties": 1, "maxProperties": 1}
        }
    }))
    .unwrap();
    assert!(
        params
            .validate(&json!({"u": u64::MAX, "i": i64::MIN, "x": 0.5, "d4": 0.1}))
            .is_ok()
    );
    let err = params
        .validate(&json!({
            "u": -1, "i": u64::MAX, "x": 1, "d4": 0, "tags": [1, 2, 1, 4], "o": {}
        }))
        .unwrap_err();
    assert_eq!(
        err.problems(),
        [
            "parameter `d4`: expected more than 0, got 0",
            "parameter `i`: expected at most 9223372036854775807, got 18446744073709551615",
            "parameter `o`: expected at least 1 properties, got 0",
            "parameter `tags`: expected at most 3 items, got 4",
            "parameter `tags`: items [0] and [2] are equal",
            "parameter `u`: expected at least 0, got -1",
            "parameter `x`: expected less than 1, got 1",
        ]
    );
}

#[test]
fn builder_nests_objects_and_arrays_of_objects() {
    let line = Parameters::builder()
        .required_string("sku", "Article.")
        .optional_integer("qty", "Count.")
        .build();
    let params = Parameters::builder()
        .required_object(
            "ship_to",
            "Address.",
            Parameters::builder()
                .required_string("city", "City.")
                .build(),
        )
        .optional_object_array("lines", "Lines.", line)
        .required_schema(
            "priority",
            "",
            json!({"type": "integer", "minimum": 1, "maximum": 3, "default": 2}),
        )
        .build();
    assert_eq!(
        params.to_json()["properties"]["lines"],
        json!({
            "type": "array",
            "description": "Lines.",
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "description": "Article."},
                    "qty": {"type": "integer", "description": "Count."}
                },
                "required": ["sku"],
                "additionalProperties": false
            }
        })
    );
    assert_eq!(params.to_json()["properties"]["priority"]["default"], 2);
    let args = json!({"ship_to": {"city": "Oslo"}, "priority": 1.0, "lines": [{"sku": "a", "qty": 2.0}, {"sku": "b", "qty": null}]});
    params.validate(&args).unwrap();
    assert_eq!(
        params.normalize(args),
        json!({"ship_to": {"city": "Oslo"}, "priority": 1, "lines": [{"sku": "a", "qty": 2}, {"sku": "b"}]})
    );
    let err = params
        .validate(
            &json!({"ship_to": {}, "priority": 4, "lines": [{"qty": "x", "sku": "a", "z": 1}]}),
        )
        .unwrap_err();
    assert_eq!(
        err.problems(),
        [
            "parameter `ship_to`: missing required property `city` (string)",
            "`/lines/0/qty`: expected integer, got string \"x\"",
            "parameter `lines`: item [0]: unknown property `z`; the properties are: `qty`, `sku`",
            "parameter `priority`: expected at most 3, got 4",
        ]
    );
}

#[test]
#[should_panic(expected = "the schema of parameter `n` is invalid")]
fn builder_rejects_a_malformed_schema() {
    let _ =
        Parameters::builder().required_schema("n", "n", json!({"type": "integer", "minimum": "0"}));
}

#[test]
fn many_bad_object_items_are_bounded() {
    let item = Parameters::builder().required_string("s", "s").build();
    let params = Parameters::builder()
        .required_object_array("xs", "xs", item)
        .build();
    let many: Vec<Value> = (0..12).map(|i| json!({ "s": i })).collect();
    let err = params.validate(&json!({ "xs": many })).unwrap_err();
    assert_eq!(err.problems().len(), ITEM_PROBLEM_LIMIT + 1);
    assert_eq!(
        err.problems()[ITEM_PROBLEM_LIMIT],
        "parameter `xs`: 7 more items have problems"
    );
}

// ---- strict mode ----

#[test]
fn strict_violations_name_every_rule_broken() {
    let params = Parameters::from_json_schema(json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "minLength": 1, "default": "x"},
            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
            "v": {},
            "o": {"type": "object", "properties": {"p": {"type": "boolean"}}, "required": ["p"]}
        },
        "required": ["a", "m", "v"],
        "additionalProperties": false
    }))
    .unwrap();
    assert_eq!(
        params.strict_violations(),
        [
            "/: property `o` must be listed in `required` (make its type nullable to make it optional)",
            "/properties/a: keyword `default` is not supported in strict mode",
            "/properties/a: keyword `minLength` is not supported in strict mode",
            "/properties/m: objects need \"additionalProperties\": false",
            "/properties/o: objects need \"additionalProperties\": false",
            "/properties/v: every schema needs a `type` (or `anyOf`, `$ref`, `enum`)",
        ]
    );
    assert!(Parameters::empty().strict_violations().is_empty());
    for schema in mcp_schemas() {
        // Annotations such as `$schema` and `default` are what MCP sends.
        let _ = Parameters::from_json_schema(schema)
            .unwrap()
            .strict_violations();
    }
}

// ---- robustness ----

/// A random JSON value, biased towards schema keywords and edge cases.
fn random_value(rng: &mut Rng, depth: usize) -> Value {
    const KEYS: &[&str] = &[
        "type",
        "properties",
        "required",
        "items",
        "enum",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "$defs",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "minLength",
        "maxItems",
        "additionalProperties",
        "const",
        "multipleOf",
        "uniqueItems",
        "nullable",
        "a",
        "b",
        "",
    ];
    const STRINGS: &[&str] = &[
        "object",
        "string",
        "integer",
        "number",
        "array",
        "null",
        "boolean",
        "#",
        "#/$defs/a",
        "#/properties/a",
        "#/$defs/b",
        "a",
        "b",
        "~1/",
        "\u{0}",
        "ünï",
    ];
    let leaf = depth > 5 || rng.below(3) == 0;
    match rng.below(if leaf { 5 } else { 7 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => match rng.below(6) {
            0 => json!(u64::MAX),
            1 => json!(i64::MIN),
            2 => json!(f64::MAX),
            3 => json!(-0.0),
            4 => json!(rng.below(5) as f64 + 0.5),
            _ => json!(i64::try_from(rng.below(10)).unwrap_or(0) - 3),
        },
        3 | 4 => json!(STRINGS[rng.below(STRINGS.len())]),
        5 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => {
            let mut obj = serde_json::Map::new();
            for _ in 0..rng.below(5) {
                obj.insert(
                    KEYS[rng.below(KEYS.len())].to_string(),
                    random_value(rng, depth + 1),
                );
            }
            Value::Object(obj)
        }
    }
}

#[test]
fn random_schemas_and_values_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut compiled = 0;
    for _ in 0..4000 {
        let mut schema = random_value(&mut rng, 0);
        if let Some(obj) = schema.as_object_mut() {
            obj.insert("type".into(), json!("object"));
        }
        let Ok(params) = Parameters::from_json_schema(schema) else {
            continue;
        };
        compiled += 1;
        let _ = params.strict_violations();
        for _ in 0..10 {
            let value = random_value(&mut rng, 0);
            if params.validate(&value).is_ok() {
                let _ = params.normalize(value);
            } else if let Err(e) = params.validate(&value) {
                assert!(!e.problems().is_empty());
                let _ = e.to_string();
            }
        }
    }
    assert!(compiled > 100, "only {compiled} random schemas compiled");
}

#[test]
fn exponential_alternatives_stop_on_the_budget() {
    // Each level branches in two, 40 levels deep: 2^40 paths.
    let mut defs = serde_json::Map::new();
    for i in 0..40 {
        let next = format!("#/$defs/n{}", i + 1);
        defs.insert(
            format!("n{i}"),
            json!({"type": "array", "items": {"anyOf": [{"$ref": next}, {"$ref": next}]}}),
        );
    }
    defs.insert("n40".into(), json!({"type": "string"}));
    let params = Parameters::from_json_schema(json!({
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/n0"}},
        "$defs": defs
    }))
    .unwrap();
    let mut value = json!(1);
    for _ in 0..40 {
        value = json!([value]);
    }
    let start = std::time::Instant::now();
    let err = params.validate(&json!({ "x": value })).unwrap_err();
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    assert!(
        err.problems()
            .last()
            .unwrap()
            .starts_with("validation stopped"),
        "{err}"
    );
}
