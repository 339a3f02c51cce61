//! Conversation persistence: [`History`], [`Agent::export_history`],
//! [`Agent::load_history`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Agent;
use crate::{Error, Event, Message, Result, Role};

/// The format version written by [`History::to_json`].
const VERSION: u32 = 1;

/// A conversation as a value: its messages, each assistant message with its
/// token usage and model.
///
/// The system prompt is not stored: a loaded conversation gets today's
/// prompt, reassembled from the agent's configuration and extensions.
///
/// [`History::parse`] is the only door for untrusted bytes: it returns
/// [`Error::History`] and never a half-built value.
///
/// # Examples
///
/// ```
/// use pikuri::{History, Message};
/// let h = History::new(vec![Message::user("hi"), Message::assistant("hello")]);
/// let json = h.to_json();
/// assert_eq!(History::parse(&json)?, h);
/// assert!(History::parse("{\"version\":1,\"messages\":[{\"role\":\"wizard\"}]}").is_err());
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    version: u32,
    messages: Vec<Message>,
}

impl History {
    /// A history of these messages.
    pub fn new(messages: Vec<Message>) -> History {
        History {
            version: VERSION,
            messages,
        }
    }

    /// The messages.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Self-contained JSON.
    ///
    /// # Panics
    ///
    /// Never: messages are plain data, and serializing them cannot fail.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("history serialization cannot fail")
    }

    /// Parse and validate JSON written by [`to_json`](History::to_json).
    ///
    /// # Errors
    ///
    /// [`Error::History`] when the JSON does not parse, has another version,
    /// or is not a valid conversation (a system message inside, a tool
    /// message answering no call, an assistant tool call left unanswered
    /// before a later message).
    ///
    /// Unanswered calls are accepted in one place: the trailing batch of a
    /// turn that stopped for approval (see [`Approver`](crate::Approver),
    /// "Deciding later"). Nothing is sent with them unanswered:
    /// [`Agent::resume`] or the next [`run_loop`](Agent::run_loop) answers
    /// them first.
    ///
    /// ```
    /// use pikuri::{History, Message, ToolCall};
    /// let pending = Message::assistant_tool_calls("", vec![ToolCall::new("c1", "rm", "{}")]);
    /// assert!(History::parse(&History::new(vec![Message::user("go"), pending.clone()]).to_json()).is_ok());
    /// let gap = History::new(vec![Message::user("go"), pending, Message::user("hm")]);
    /// assert!(History::parse(&gap.to_json()).is_err());
    /// ```
    pub fn parse(json: &str) -> Result<History> {
        let h: History = serde_json::from_str(json).map_err(|e| Error::History(e.to_string()))?;
        if h.version != VERSION {
            return Err(Error::History(format!("unsupported version {}", h.version)));
        }
        h.validate()?;
        Ok(h)
    }

    fn validate(&self) -> Result<()> {
        let mut open: Vec<&str> = Vec::new();
        for (i, m) in self.messages.iter().enumerate() {
            match m.role {
                Role::Tool => {
                    let id = m.tool_call_id.as_deref().unwrap_or("");
                    let Some(pos) = open.iter().position(|o| *o == id) else {
                        return Err(Error::History(format!(
                            "message {i}: tool result `{id}` answers no open call"
                        )));
                    };
                    open.remove(pos);
                }
                _ if !open.is_empty() => {
                    return Err(Error::History(format!(
                        "message {i}: tool call `{}` left unanswered",
                        open[0]
                    )));
                }
                Role::Assistant => open.extend(m.tool_calls.iter().map(|c| c.id.as_str())),
                Role::System | Role::User => {}
            }
        }
        // Calls still open here belong to the trailing batch: pending
        // approval, answered before anything is sent.
        Ok(())
    }
}

impl Agent {
    /// The conversation as a [`History`] value.
    pub fn export_history(&self) -> History {
        History::new(self.messages.clone())
    }

    /// Replace the conversation with `history`: [`clear_conversation`](Agent::clear_conversation)
    /// (which emits [`Event::Reset`]), append the messages, then emit
    /// [`Event::HistoryLoaded`] with the last assistant message's usage so a
    /// context readout can resume.
    pub fn load_history(&mut self, history: History) {
        self.clear_conversation();
        let tokens = history
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .and_then(|m| m.usage);
        let count = history.messages.len();
        self.messages = history.messages;
        self.emit(Event::HistoryLoaded {
            agent: Arc::clone(&self.shared.id),
            messages: count,
            tokens,
        });
        self.shared.listeners.flush();
    }
}
