//! The guardrail flags: one guard of each kind, switchable from the command
//! line, and what tripped printed plainly on stderr.
//!
//! - tool output: secrets and personal data redacted (`Redactor`), on by
//!   default, `--no-redact` turns it off;
//! - input: `--block-input WORD` answers a message that contains WORD
//!   itself (the model is not asked);
//! - tool input: `--deny-tool NAME` refuses calls of tool NAME before the
//!   approval prompt, the model sees why;
//! - output: `--max-answer-chars N` sends a longer answer back with the
//!   limit (`Shape`), `--judge RUBRIC` has the same model decide whether
//!   the answer meets RUBRIC (`Judge`).

use pikuri::guard::{Action, Guards, InputVerdict, Judge, Redactor, Shape, ToolInputVerdict};
use pikuri::listeners::sanitize;
use pikuri::{ChatTransport, Event, ToolCall};

use crate::args::Options;

/// The guards the flags ask for (`None`: none at all).
pub(crate) fn guards(opts: &Options, transport: &ChatTransport) -> Option<Guards> {
    let mut g = Guards::new();
    let mut any = false;
    if !opts.block_input.is_empty() {
        let words: Vec<String> = opts.block_input.iter().map(|w| w.to_lowercase()).collect();
        g = g.input("block-input", move |text: &str| {
            let lower = text.to_lowercase();
            match words.iter().find(|w| lower.contains(w.as_str())) {
                Some(w) => InputVerdict::Block(format!(
                    "(not sent to the model: the message contains \"{w}\", blocked by --block-input)"
                )),
                None => InputVerdict::Allow,
            }
        });
        any = true;
    }
    if !opts.deny_tools.is_empty() {
        let denied = opts.deny_tools.clone();
        g = g.tool_input("deny-tool", move |call: &ToolCall| {
            if denied.contains(&call.name) {
                ToolInputVerdict::Reject(format!(
                    "Error: the user does not allow the tool `{}` in this chat",
                    call.name
                ))
            } else {
                ToolInputVerdict::Allow
            }
        });
        any = true;
    }
    if !opts.no_redact {
        g = g.tool_output("redact", Redactor::new());
        any = true;
    }
    if let Some(n) = opts.max_answer_chars {
        g = g.output("max-answer-chars", Shape::new().max_chars(n));
        any = true;
    }
    if let Some(rubric) = &opts.judge {
        g = g.output("judge", Judge::new(transport.clone(), rubric));
        any = true;
    }
    any.then_some(g.hold_deltas(opts.hold_deltas))
}

/// The stderr line for a guard's verdict, or `None` for other events.
pub(crate) fn tripped(event: &Event) -> Option<String> {
    let Event::Guard {
        guard,
        point,
        action,
        detail,
        ..
    } = event
    else {
        return None;
    };
    let what = match action {
        Action::Replace => "replaced part of the text".to_string(),
        Action::Block => "answered the message itself".to_string(),
        Action::Retry => format!("sent the answer back: {}", sanitize(detail)),
        Action::Reject => format!("refused the tool call: {}", sanitize(detail)),
        Action::Stop => format!("stopped the run: {}", sanitize(detail)),
        _ => format!("{}: {}", action.as_str(), sanitize(detail)),
    };
    Some(format!("(guard {guard} at {}: {what})", point.as_str()))
}
