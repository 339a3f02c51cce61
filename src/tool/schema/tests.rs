//! Unit tests of the schema: the builder, raw schemas, validation and
//! strict mode.

use super::validate::ITEM_PROBLEM_LIMIT;
use super::*;
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
