//! Running one tool call, turning every failure into an observation (stub).

use super::{Tool, ToolContext};

/// Run `tool` on the raw arguments the model sent; never panics.
/// `truncated` is true when the message ended with `finish_reason: length`.
pub(crate) fn execute(
    tool: &dyn Tool,
    raw_arguments: &str,
    truncated: bool,
    cx: &ToolContext,
) -> String {
    let _ = truncated;
    match serde_json::from_str(raw_arguments) {
        Ok(args) => match tool.call(&args, cx) {
            Ok(s) => s,
            Err(e) => format!("Error: {e}"),
        },
        Err(e) => format!("Error: {e}"),
    }
}

/// The observation for a call to a tool that does not exist.
pub(crate) fn unknown_tool(name: &str, available: &[&str]) -> String {
    format!("Error: unknown tool `{name}`; available tools: {}", available.join(", "))
}
