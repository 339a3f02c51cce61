//! Running one tool call, turning every failure into an observation.
//!
//! The agent loop hands [`execute`] the raw argument text exactly as the model
//! sent it. Whatever happens (bad JSON, arguments cut off by the token limit,
//! schema violations, a [`ToolError`](super::ToolError), a panic), the result
//! is a string for the tool message: the tool's output, or `"Error: ..."`
//! written so that the model can correct itself. See the [`tool`](super)
//! module docs.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;

use super::{Tool, ToolContext, excerpt};

/// How many characters of malformed arguments are quoted back to the model.
const ARGUMENTS_EXCERPT: usize = 200;
/// How many characters of a tool name are quoted back to the model.
const NAME_EXCERPT: usize = 80;
/// How many tool names an unknown-tool observation lists.
const LISTED_TOOLS: usize = 50;
/// How many characters of a panic message are passed on.
const PANIC_EXCERPT: usize = 500;

/// Run `tool` on the raw arguments the model sent; never panics. The loop
/// runs the two halves, [`prepare`] and [`invoke`], with the review between.
#[cfg(test)]
/// `truncated` is true when the message ended with `finish_reason: length`.
///
/// Empty or all-whitespace arguments count as `{}` (several servers send `""`
/// for a tool without parameters). Anything else that is not valid JSON is
/// reported, never replaced by `{}`.
pub(crate) fn execute(
    tool: &dyn Tool,
    raw_arguments: &str,
    truncated: bool,
    cx: &ToolContext,
) -> String {
    // Everything that runs user code (the `Tool` impl, including
    // `parameters()`) is inside the guard, so the loop never unwinds.
    guard(tool, || run(tool, raw_arguments, truncated, cx)).unwrap_or_else(|e| e)
}

/// The error observation for a call to a tool the agent does not have.
pub(crate) fn unknown_tool(name: &str, available: &[&str]) -> String {
    // An agent may hold thousands of tools (an MCP server's): the list is
    // bounded, the model has the full one in the request anyway.
    let available = match available.len() {
        0 => "(none)".to_string(),
        n if n <= LISTED_TOOLS => available.join(", "),
        n => format!(
            "{}, … and {} more",
            available[..LISTED_TOOLS].join(", "),
            n - LISTED_TOOLS
        ),
    };
    format!(
        "Error: unknown tool `{}`; available tools: {available}",
        excerpt(name, NAME_EXCERPT)
    )
}

#[cfg(test)]
fn run(tool: &dyn Tool, raw_arguments: &str, truncated: bool, cx: &ToolContext) -> String {
    match prepare_unguarded(tool, raw_arguments, truncated) {
        Ok(args) => call_unguarded(tool, &args, cx),
        Err(observation) => observation,
    }
}

/// The first half of [`execute`], for calls that are approved between
/// validation and the call: parse, validate and normalize the arguments, or
/// the `"Error: ..."` observation. Never panics.
pub(crate) fn prepare(
    tool: &dyn Tool,
    raw_arguments: &str,
    truncated: bool,
) -> Result<Value, String> {
    guard(tool, || prepare_unguarded(tool, raw_arguments, truncated)).unwrap_or_else(Err)
}

/// Validate and normalize arguments that are already JSON (an approver's
/// edit). Never panics.
pub(crate) fn revalidate(tool: &dyn Tool, args: Value) -> Result<Value, String> {
    guard(tool, || {
        let params = tool.parameters();
        params.validate(&args).map_err(|e| format!("Error: {e}"))?;
        Ok(params.normalize(args))
    })
    .unwrap_or_else(Err)
}

/// The second half of [`execute`]: call the tool on prepared arguments.
/// Never panics.
pub(crate) fn invoke(tool: &dyn Tool, args: &Value, cx: &ToolContext) -> String {
    guard(tool, || call_unguarded(tool, args, cx)).unwrap_or_else(|e| e)
}

/// Run `f` (user code of `tool`), turning a panic into the observation.
fn guard<T>(tool: &dyn Tool, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = panic_message(payload.as_ref());
        let name = catch_unwind(AssertUnwindSafe(|| {
            excerpt(tool.name(), NAME_EXCERPT).into_owned()
        }))
        .unwrap_or_else(|_| "?".to_string());
        log::error!("tool `{name}` panicked: {message}");
        format!("Error: the tool panicked: {message}")
    })
}

fn prepare_unguarded(
    tool: &dyn Tool,
    raw_arguments: &str,
    truncated: bool,
) -> Result<Value, String> {
    let args = parse_arguments(raw_arguments, truncated)?;
    let params = tool.parameters();
    params.validate(&args).map_err(|e| format!("Error: {e}"))?;
    Ok(params.normalize(args))
}

fn call_unguarded(tool: &dyn Tool, args: &Value, cx: &ToolContext) -> String {
    match tool.call(args, cx) {
        Ok(text) => text,
        Err(e) => format!("Error: {e}"),
    }
}

fn parse_arguments(raw: &str, truncated: bool) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(raw).map_err(|e| {
        let quoted = excerpt(raw, ARGUMENTS_EXCERPT);
        if truncated {
            format!(
                "Error: the arguments were cut off by the output token limit before \
                 the JSON was complete ({} bytes arrived): {quoted}\n\
                 Make a shorter call: send less text in the arguments, or split the \
                 work into several smaller calls.",
                raw.len()
            )
        } else {
            format!(
                "Error: the arguments are not valid JSON ({e}): {quoted}\n\
                 Send the arguments again as one complete JSON object."
            )
        }
    })
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    excerpt(crate::util::panic_message(payload), PANIC_EXCERPT).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolError;
    use crate::tool::{FnTool, Parameters};

    fn echo() -> FnTool {
        FnTool::new(
            "echo",
            "Echoes its arguments.",
            Parameters::builder()
                .required_string("text", "Text.")
                .optional_integer("times", "Repeat count.")
                .build(),
            |args, _cx| Ok(args.to_string()),
        )
    }

    fn run_echo(raw: &str, truncated: bool) -> String {
        execute(&echo(), raw, truncated, &ToolContext::detached())
    }

    #[test]
    fn ok_text_is_returned_as_is() {
        assert_eq!(run_echo(r#"{"text":"hi"}"#, false), r#"{"text":"hi"}"#);
        // A complete call is run even if the message hit the token limit.
        assert_eq!(run_echo(r#"{"text":"hi"}"#, true), r#"{"text":"hi"}"#);
    }

    #[test]
    fn arguments_are_normalized_before_the_call() {
        assert_eq!(
            run_echo(r#"{"text":"hi","times":2.0}"#, false),
            r#"{"text":"hi","times":2}"#
        );
        assert_eq!(
            run_echo(r#"{"text":"hi","times":null}"#, false),
            r#"{"text":"hi"}"#
        );
    }

    #[test]
    fn empty_arguments_mean_an_empty_object() {
        let now = FnTool::new("now", "No args.", Parameters::empty(), |args, _| {
            Ok(args.to_string())
        });
        let cx = ToolContext::detached();
        for raw in ["", "   ", "\n\t", "{}"] {
            assert_eq!(execute(&now, raw, false, &cx), "{}", "{raw:?}");
        }
        // But an empty object is still validated against the schema.
        let out = run_echo("", false);
        assert!(
            out.starts_with("Error: invalid arguments:\n- missing required parameter `text`"),
            "{out}"
        );
    }

    #[test]
    fn invalid_json_is_quoted_with_the_parser_error() {
        let out = run_echo(r#"{"text": 'hi'}"#, false);
        assert_eq!(
            out,
            "Error: the arguments are not valid JSON (expected value at line 1 column 10): \
             {\"text\": 'hi'}\n\
             Send the arguments again as one complete JSON object."
        );
    }

    #[test]
    fn invalid_json_excerpt_is_bounded() {
        let raw = format!("{{\"text\": \"{}", "a".repeat(5000));
        let out = run_echo(&raw, false);
        assert!(
            out.starts_with("Error: the arguments are not valid JSON (EOF"),
            "{out}"
        );
        assert!(out.contains(&format!("{}…\n", "a".repeat(190))), "{out}");
        assert!(out.chars().count() < 400, "{out}");
    }

    #[test]
    fn truncated_arguments_say_so() {
        let out = run_echo(r#"{"text": "a long essay that never en"#, true);
        assert_eq!(
            out,
            "Error: the arguments were cut off by the output token limit before the JSON \
             was complete (36 bytes arrived): {\"text\": \"a long essay that never en\n\
             Make a shorter call: send less text in the arguments, or split the work into \
             several smaller calls."
        );
    }

    #[test]
    fn non_object_arguments_fail_validation() {
        for (raw, got) in [
            ("null", "null"),
            ("[1]", "array [1]"),
            ("\"hi\"", "string \"hi\""),
            ("42", "integer 42"),
        ] {
            let out = run_echo(raw, false);
            assert!(
                out.starts_with(&format!(
                    "Error: invalid arguments:\n- the arguments must be a JSON object, got {got}\n\
                     expected schema:\n{{"
                )),
                "{out}"
            );
        }
    }

    #[test]
    fn schema_violations_list_problems_and_schema() {
        let out = run_echo(r#"{"times":"ten","extra":1}"#, false);
        assert!(
            out.starts_with(
                "Error: invalid arguments:\n\
                 - missing required parameter `text` (string)\n\
                 - parameter `times`: expected integer, got string \"ten\"\n\
                 - unknown parameter `extra`; the parameters are: `text`, `times`\n\
                 expected schema:\n{\n"
            ),
            "{out}"
        );
        assert!(out.ends_with('}'), "{out}");
    }

    #[test]
    fn tool_errors_become_observations() {
        let failing = FnTool::new("fail", "Fails.", Parameters::empty(), |_, _| {
            Err(ToolError::new("no network"))
        });
        assert_eq!(
            execute(&failing, "{}", false, &ToolContext::detached()),
            "Error: no network"
        );
    }

    #[test]
    fn panics_are_caught() {
        let cx = ToolContext::detached();
        let boom = FnTool::new("boom", "Panics.", Parameters::empty(), |_, _| {
            panic!("index {} out of range", 7)
        });
        assert_eq!(
            execute(&boom, "", false, &cx),
            "Error: the tool panicked: index 7 out of range"
        );
        let literal = FnTool::new("boom", "Panics.", Parameters::empty(), |_, _| {
            panic!("plain literal")
        });
        assert_eq!(
            execute(&literal, "{}", false, &cx),
            "Error: the tool panicked: plain literal"
        );
        let odd = FnTool::new("boom", "Panics.", Parameters::empty(), |_, _| {
            std::panic::panic_any(42_u8)
        });
        assert_eq!(
            execute(&odd, "{}", false, &cx),
            "Error: the tool panicked: (a panic payload that is not a string)"
        );
    }

    #[test]
    fn a_panicking_parameters_impl_is_caught_too() {
        struct Broken;
        impl Tool for Broken {
            fn name(&self) -> &'static str {
                "broken"
            }
            fn description(&self) -> &'static str {
                "Broken."
            }
            fn parameters(&self) -> &Parameters {
                panic!("no schema")
            }
            fn call(&self, _: &Value, _: &ToolContext) -> Result<String, ToolError> {
                Ok(String::new())
            }
        }
        assert_eq!(
            execute(&Broken, "{}", false, &ToolContext::detached()),
            "Error: the tool panicked: no schema"
        );
    }

    #[test]
    fn unknown_tool_lists_the_available_ones() {
        assert_eq!(
            unknown_tool("serch", &["search", "fetch"]),
            "Error: unknown tool `serch`; available tools: search, fetch"
        );
        assert_eq!(
            unknown_tool("x", &[]),
            "Error: unknown tool `x`; available tools: (none)"
        );
        let long = "n".repeat(1000);
        let many: Vec<String> = (0..10_000).map(|i| format!("t{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let out = unknown_tool("x", &many);
        assert!(out.ends_with(", t49, … and 9950 more"), "{out}");
        let out = unknown_tool(&long, &["a"]);
        assert!(out.chars().count() < 150, "{out}");
    }
}
