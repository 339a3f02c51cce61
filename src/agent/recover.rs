//! Recovery of tool calls a model wrote into its text (stub; being written).

use std::sync::Arc;

use crate::{Tool, ToolCall};

/// Find tool calls leaked into `content`; returns the remaining text and the calls.
pub(crate) fn recover(content: &str, tools: &[Arc<dyn Tool>]) -> Option<(String, Vec<ToolCall>)> {
    let _ = (content, tools);
    None
}
