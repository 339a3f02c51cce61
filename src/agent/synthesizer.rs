//! The step-exhaustion rescue's prompt: [`Synthesizer`].

use std::fmt::Write as _;

use crate::{Message, Role};

/// The step-exhaustion rescue: how a tools-free pass turns the evidence an
/// agent gathered into an answer.
///
/// When a [`StepLimit`](crate::StepLimit) with
/// [`OnExhausted::Synthesize`](crate::OnExhausted::Synthesize) trips, the
/// agent emits [`Event::FallbackNotice`](crate::Event::FallbackNotice) and
/// runs a child agent (inheriting as every child does: same transport and
/// resolved context window, the same [`Cancellable`](crate::Cancellable),
/// listeners derived for the id `"synthesizer"`) with no tools, a
/// `StepLimit` of 1, this synthesizer's
/// [`system_prompt`](Synthesizer::system_prompt), and
/// [`build_prompt`](Synthesizer::build_prompt) as its user message. Its answer
/// becomes [`Agent::last_assistant_content`](crate::Agent::last_assistant_content)
/// and is appended to the parent's history as an assistant message, so the
/// next turn sees what the user saw (pikuri does not append it; an empty
/// answer is `None` and is not appended). A cancel during synthesis is
/// announced once, by the parent. Set one with
/// [`Configurator::synthesizer`](crate::Configurator::synthesizer).
///
/// Why: the usual failure is the "wait, but what about X?" loop. The
/// evidence was gathered in the first steps; a tools-free pass turns it into
/// an answer instead of a stack trace.
///
/// # Examples
///
/// ```
/// use pikuri::{Message, ToolCall};
/// use pikuri::subagent::Synthesizer;
/// let history = vec![
///     Message::user("How big is the file?"),
///     Message::assistant_tool_calls("", vec![ToolCall::new("c1", "stat", r#"{"path":"a"}"#)]),
///     Message::tool("c1", "1234 bytes"),
/// ];
/// let synth = Synthesizer::default();
/// assert_eq!(synth.system_prompt(), Synthesizer::SYSTEM_PROMPT);
/// let p = synth.build_prompt(&history, "How big is the file?");
/// assert!(p.starts_with("Question: How big is the file?\n\nEvidence gathered:\n"));
/// assert!(p.contains("stat"));
/// assert!(p.contains("1234 bytes"));
///
/// let terse = Synthesizer::default().with_system_prompt("Answer in one line from the evidence.");
/// assert_eq!(terse.system_prompt(), "Answer in one line from the evidence.");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synthesizer {
    system_prompt: String,
}

impl Default for Synthesizer {
    fn default() -> Synthesizer {
        Synthesizer {
            system_prompt: Synthesizer::SYSTEM_PROMPT.to_string(),
        }
    }
}

impl Synthesizer {
    /// The default system prompt: use the evidence, admit gaps, no
    /// apologies.
    pub const SYSTEM_PROMPT: &'static str = "You are given evidence another agent collected before running out of steps. \
Answer the user's question using only this evidence. You have no tools. \
If the evidence is insufficient, state plainly what's missing and what partial answer you can give. \
Do not apologize or comment on the previous agent.";

    /// A copy with another system prompt.
    #[must_use]
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Synthesizer {
        self.system_prompt = prompt.into();
        self
    }

    /// The system prompt of the tools-free pass.
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// The question plus an "Evidence gathered" transcript of
    /// `parent_messages`. Pure: no I/O.
    pub fn build_prompt(&self, parent_messages: &[Message], user_message: &str) -> String {
        format!(
            "Question: {user_message}\n\nEvidence gathered:\n{}",
            transcript(parent_messages, false)
        )
    }
}

/// The conversation as plain text for a tools-free child (the synthesizer,
/// the compactor): one line per message, tool results named after their
/// tool. System notes (extension injections) are included when asked.
pub(super) fn transcript(messages: &[Message], system_notes: bool) -> String {
    let mut out = String::new();
    let mut names = std::collections::HashMap::new();
    for m in messages {
        match m.role {
            Role::System => {
                if system_notes {
                    let _ = writeln!(out, "[system note] {}", m.content);
                }
            }
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
