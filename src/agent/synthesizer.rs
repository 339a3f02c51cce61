//! The step-exhaustion rescue's prompt: [`Synthesizer`].

use std::fmt::Write as _;

use crate::{Message, Role};

/// Builds the prompt of the step-exhaustion rescue.
///
/// When a [`StepLimit`](crate::StepLimit) with
/// [`OnExhausted::Synthesize`](crate::OnExhausted::Synthesize) trips, the
/// agent emits [`Event::FallbackNotice`](crate::Event::FallbackNotice) and
/// runs a nested, tools-free agent: same transport (and resolved context
/// window), the same [`Cancellable`](crate::Cancellable), listeners derived
/// for the id `"synthesizer"`, a defensive `StepLimit` of 1, this
/// [`SYSTEM_PROMPT`](Synthesizer::SYSTEM_PROMPT), and
/// [`build_prompt`](Synthesizer::build_prompt) as its user message. Its answer
/// becomes [`Agent::last_assistant_content`](crate::Agent::last_assistant_content)
/// and is appended to the parent's history as an assistant message, so the
/// next turn sees what the user saw.
///
/// Why: the usual failure is the "wait, but what about X?" loop. The
/// evidence was gathered in the first steps; a tools-free pass turns it into
/// an answer instead of a stack trace.
#[derive(Debug, Clone, Copy)]
pub struct Synthesizer;

impl Synthesizer {
    /// The synthesizer's system prompt: use the evidence, admit gaps, no
    /// apologies.
    pub const SYSTEM_PROMPT: &'static str = "You are given evidence another agent collected before running out of steps. \
Answer the user's question using only this evidence. You have no tools. \
If the evidence is insufficient, state plainly what's missing and what partial answer you can give. \
Do not apologize or comment on the previous agent.";

    /// The question plus an "Evidence gathered" transcript of
    /// `parent_messages`. Pure: no I/O.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Message, Synthesizer, ToolCall};
    /// let history = vec![
    ///     Message::user("How big is the file?"),
    ///     Message::assistant_tool_calls("", vec![ToolCall::new("c1", "stat", r#"{"path":"a"}"#)]),
    ///     Message::tool("c1", "1234 bytes"),
    /// ];
    /// let p = Synthesizer::build_prompt(&history, "How big is the file?");
    /// assert!(p.starts_with("Question: How big is the file?\n\nEvidence gathered:\n"));
    /// assert!(p.contains("stat"));
    /// assert!(p.contains("1234 bytes"));
    /// ```
    pub fn build_prompt(parent_messages: &[Message], user_message: &str) -> String {
        format!(
            "Question: {user_message}\n\nEvidence gathered:\n{}",
            transcript(parent_messages)
        )
    }
}

fn transcript(messages: &[Message]) -> String {
    let mut out = String::new();
    let mut names = std::collections::HashMap::new();
    for m in messages {
        match m.role {
            Role::System => {}
            Role::User => {
                let _ = writeln!(out, "[user] {}", m.content);
            }
            Role::Assistant => {
                if !m.content.is_empty() {
                    let _ = writeln!(out, "[assistant] {}", m.content);
                }
                for c in &m.tool_calls {
                    names.insert(c.id.as_str(), c.name.as_str());
                    let _ = writeln!(out, "[tool call] {}({})", c.name, c.arguments);
                }
            }
            Role::Tool => {
                let name = m
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| names.get(id))
                    .copied()
                    .unwrap_or("tool");
                let _ = writeln!(out, "[{name} result] {}", m.content);
            }
        }
    }
    if out.is_empty() {
        out.push_str("(none)\n");
    }
    out
}
