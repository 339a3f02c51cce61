//! The order a run stores a response's tool results in: call order,
//! always. A sequential batch answers each call before the next starts; a
//! parallel batch stores its results only once every call returned, in
//! call order; a stopped batch, a deferred approval and a resume answer
//! the calls still open in call order too. So a result must answer the
//! first call still open: one for a later call, out of that order, is a
//! sequence no run writes (swapped or moved records), refused by the
//! replay as [`Error::JournalCorrupt`](crate::Error::JournalCorrupt).
//! (A result for a call that is not open at all, never made or answered
//! already, the replay refuses itself.)
//!
//! The calls open are a response's, or those a replaced history ends
//! with ([`open_after`]): a loaded history may end with a batch awaiting
//! approval, answered later by the host's decisions or a new turn.

use crate::{Message, Role};

/// The calls a replaced history leaves open, in call order: those of its
/// trailing assistant message that no tool message after it answers (a
/// loaded history may end with a batch awaiting approval; the host's
/// decisions then answer it).
pub(crate) fn open_after(messages: &[Message]) -> Vec<String> {
    let tail = messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::Tool)
        .count();
    let Some(last) = messages.len().checked_sub(tail + 1).map(|i| &messages[i]) else {
        return Vec::new();
    };
    if last.role != Role::Assistant {
        return Vec::new();
    }
    let answered = &messages[messages.len() - tail..];
    last.tool_calls
        .iter()
        .filter(|c| {
            !answered
                .iter()
                .any(|m| m.tool_call_id.as_deref() == Some(c.id.as_str()))
        })
        .map(|c| c.id.clone())
        .collect()
}

/// Check that the result for the call at index `at` of `open` (the
/// response's calls not yet answered, in call order) comes in call order;
/// what is wrong otherwise.
pub(crate) fn in_call_order(open: &[String], at: usize) -> Result<(), String> {
    if at == 0 {
        Ok(())
    } else {
        Err(format!(
            "a result for tool call `{}` before the result for `{}`, which comes first in call order",
            open[at], open[0]
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_open_call_may_be_answered() {
        let open = vec!["c1".to_string(), "c2".to_string()];
        assert_eq!(in_call_order(&open, 0), Ok(()));
        let err = in_call_order(&open, 1).unwrap_err();
        assert!(err.contains("`c2` before the result for `c1`"), "{err}");
    }

    #[test]
    fn a_history_ending_with_a_batch_leaves_its_unanswered_calls_open() {
        use crate::ToolCall;
        let calls = Message::assistant_tool_calls(
            "",
            vec![
                ToolCall::new("c1", "t", "{}"),
                ToolCall::new("c2", "t", "{}"),
            ],
        );
        let answered = Message::tool("c1", "ok");
        assert_eq!(
            open_after(&[Message::user("u"), calls.clone()]),
            ["c1", "c2"]
        );
        assert_eq!(
            open_after(&[Message::user("u"), calls.clone(), answered.clone()]),
            ["c2"]
        );
        let done = [
            calls,
            answered,
            Message::tool("c2", "ok"),
            Message::assistant("a"),
        ];
        assert!(open_after(&done).is_empty());
        assert!(open_after(&[]).is_empty());
    }
}
