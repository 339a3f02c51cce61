//! Conversation persistence: [`History`] (the agent's side:
//! [`Agent::export_history`](crate::Agent::export_history),
//! [`Agent::load_history`](crate::Agent::load_history)).

use std::collections::HashSet;

use serde::{Deserialize, Deserializer};

use crate::serde_macros::json_struct;
use crate::{Error, Image, ImageSource, Message, Result, Role};

/// The newest format version: 2 added [`Message::images`],
/// [`Message::provider_data`] and [`ToolCall::provider_data`](crate::ToolCall::provider_data).
const VERSION: u32 = 2;

/// The version a conversation is written with: the oldest that holds it, so
/// a conversation without images or provider data stays readable by a
/// pikuri that knows only version 1 (which would drop the new fields, not
/// refuse them: better refused).
fn version_for(messages: &[Message]) -> u32 {
    let uses_v2 = messages.iter().any(|m| {
        !m.images.is_empty()
            || m.provider_data.is_some()
            || m.tool_calls.iter().any(|c| c.provider_data.is_some())
    });
    if uses_v2 { VERSION } else { 1 }
}

/// A valid conversation as a value: its messages, each assistant message with
/// its token usage and model.
///
/// The system prompt is not stored: a loaded conversation gets today's
/// prompt, reassembled from the agent's configuration and extensions.
/// System messages *inside* the conversation (context an extension injected
/// during a turn) are kept and sent again, as the agent that wrote them did.
///
/// # Validity
///
/// A `History` is valid by construction: every way to make one
/// ([`History::new`], [`History::parse`], serde deserialization,
/// [`Agent::export_history`](crate::Agent::export_history)) checks the same rules and fails with
/// [`Error::History`], never with a half-built value. The rules are what a
/// chat-completions server accepts:
///
/// - every assistant tool call is answered by exactly one tool message
///   before the next message of another role, and call ids are unique among
///   the calls open at once (an id may be reused once its call is answered,
///   as some servers do);
/// - one exception: the last batch of calls may stay unanswered, as a turn
///   that stopped for approval leaves it (see [`Approver`](crate::approval::Approver),
///   "Deciding later"); nothing is sent with them unanswered:
///   [`Agent::resume`](crate::Agent::resume) or the next [`run_loop`](crate::Agent::run_loop) answers them
///   first;
/// - every tool message answers an open call;
/// - tool calls only on assistant messages, a call id only on tool messages;
/// - images only on user and tool messages, each at most
///   [`Image::MAX_BYTES`](crate::Image::MAX_BYTES) and, when inline, in
///   standard base64;
/// - the format version is 1 or 2 (serde and `parse`): files written by
///   earlier versions load. [`to_json`](History::to_json) writes version 1
///   unless a message carries images or provider data (version 2).
///
/// Unknown roles and malformed JSON fail in deserialization, and so does a
/// token figure that is not a `u64`. Token figures are not checked further:
/// they are never sent to a server, and every sum over them saturates.
///
/// # Examples
///
/// ```
/// use pikuri::{Error, History, Message, ToolCall};
/// let h = History::new(vec![Message::user("hi"), Message::assistant("hello")])?;
/// let json = h.to_json();
/// assert_eq!(History::parse(&json)?, h);
/// assert_eq!(serde_json::from_str::<History>(&json).unwrap(), h);
/// assert!(History::parse("{\"version\":1,\"messages\":[{\"role\":\"wizard\"}]}").is_err());
///
/// // A tool call left unanswered before a later message would make every
/// // later request fail.
/// let call = ToolCall::new("c1", "clock", "{}");
/// let calls = Message::assistant_tool_calls("", vec![call]);
/// let bad = vec![Message::user("time?"), calls.clone(), Message::user("well?")];
/// assert!(matches!(History::new(bad), Err(Error::History(_))));
/// // At the end, the batch is one awaiting approval: valid.
/// assert!(History::new(vec![Message::user("time?"), calls]).is_ok());
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    version: u32,
    messages: Vec<Message>,
}

json_struct! { Serialize for History { version, messages } }

// Reads an `Unchecked`, then validates it (serde's `try_from`).
impl<'de> Deserialize<'de> for History {
    fn deserialize<D: Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<History, D::Error> {
        let raw = Unchecked::deserialize(deserializer)?;
        History::try_from(raw).map_err(serde::de::Error::custom)
    }
}

/// The serialized form, before validation: what serde reads first.
struct Unchecked {
    version: u32,
    messages: Vec<Message>,
}

json_struct! { Deserialize for Unchecked { version, messages } }

/// The bare reason (serde adds the position; [`History::parse`] the
/// "invalid history" prefix of [`Error::History`]).
impl TryFrom<Unchecked> for History {
    type Error = String;

    fn try_from(raw: Unchecked) -> std::result::Result<History, String> {
        if !(1..=VERSION).contains(&raw.version) {
            return Err(format!("unsupported version {}", raw.version));
        }
        validate(&raw.messages)?;
        Ok(History {
            version: version_for(&raw.messages),
            messages: raw.messages,
        })
    }
}

/// The empty conversation (version 1).
impl Default for History {
    fn default() -> History {
        History {
            version: 1,
            messages: Vec::new(),
        }
    }
}

impl History {
    /// A history of these messages, validated by the rules under
    /// [Validity](History#validity).
    ///
    /// # Errors
    ///
    /// [`Error::History`] naming the first offending message.
    pub fn new(messages: Vec<Message>) -> Result<History> {
        validate(&messages).map_err(Error::History)?;
        Ok(History {
            version: version_for(&messages),
            messages,
        })
    }

    /// The messages.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The agent's own history, checked by the same rules as
    /// [`parse`](History::parse), so that what an agent exports always
    /// loads again. It is valid by [the loop's
    /// rule](crate::Agent#the-history-is-always-valid) (the decoders refuse
    /// an answer whose calls break it); a breach is a pikuri bug, reported
    /// as an `error` log line (and a panic in debug builds) rather than
    /// hidden until the file is loaded.
    pub(crate) fn from_agent(messages: Vec<Message>) -> History {
        if let Err(why) = validate(&messages) {
            log::error!("the agent's own history breaks a history rule: {why}");
            debug_assert!(false, "the agent's own history is invalid: {why}");
        }
        History {
            version: version_for(&messages),
            messages,
        }
    }

    /// The messages, checked again by the rules under
    /// [Validity](History#validity): [`Agent::load_history`](crate::Agent::load_history)
    /// promises the check before it replaces a conversation.
    pub(crate) fn into_checked_messages(self) -> Result<Vec<Message>> {
        validate(&self.messages).map_err(Error::History)?;
        Ok(self.messages)
    }

    /// Self-contained JSON.
    ///
    /// # Panics
    ///
    /// Never: messages are plain data, and serializing them cannot fail.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("history serialization cannot fail")
    }

    /// Parse and validate JSON written by [`to_json`](History::to_json); the
    /// door for untrusted bytes.
    ///
    /// # Errors
    ///
    /// [`Error::History`] when the JSON does not parse, has another version,
    /// or breaks a rule under [Validity](History#validity).
    pub fn parse(json: &str) -> Result<History> {
        serde_json::from_str(json).map_err(|e| Error::History(e.to_string()))
    }
}

/// The rules under [Validity](History#validity), in one pass.
fn validate(messages: &[Message]) -> std::result::Result<(), String> {
    let fail = |i: usize, what: String| Err(format!("message {i}: {what}"));
    let mut open: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if m.role != Role::Assistant && !m.tool_calls.is_empty() {
            return fail(i, format!("tool calls on a {} message", m.role.as_str()));
        }
        if !m.images.is_empty() && !matches!(m.role, Role::User | Role::Tool) {
            return fail(i, format!("images on a {} message", m.role.as_str()));
        }
        for image in &m.images {
            if let ImageSource::Base64(data) = &image.source {
                if data.len() / 4 * 3 > Image::MAX_BYTES {
                    return fail(i, format!("an image of over {} bytes", Image::MAX_BYTES));
                }
                if !data
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                {
                    return fail(i, "an image whose data is not base64".to_string());
                }
            }
        }
        if m.role != Role::Tool && m.tool_call_id.is_some() {
            return fail(
                i,
                format!("a tool call id on a {} message", m.role.as_str()),
            );
        }
        match m.role {
            Role::Tool => {
                let Some(id) = m.tool_call_id.as_deref() else {
                    return fail(i, "tool message without a call id".to_string());
                };
                let Some(pos) = open.iter().position(|o| *o == id) else {
                    return fail(i, format!("tool result `{id}` answers no open call"));
                };
                open.remove(pos);
            }
            _ if !open.is_empty() => {
                return fail(i, format!("tool call `{}` left unanswered", open[0]));
            }
            Role::Assistant => {
                let mut seen = HashSet::new();
                for c in &m.tool_calls {
                    if !seen.insert(c.id.as_str()) {
                        return fail(i, format!("duplicate tool call id `{}`", c.id));
                    }
                    open.push(c.id.as_str());
                }
            }
            Role::System | Role::User => {}
        }
    }
    // Calls still open here are the trailing batch of a turn that stopped
    // for approval: valid, and answered before anything is sent.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    // Only the test that runs in debug builds uses it.
    #[cfg(debug_assertions)]
    use crate::ToolCall;

    /// Issue 36: the agent's export applies the check `parse` applies, so
    /// an invalid history is caught where it is made (in debug builds, a
    /// panic), not when the file is loaded again.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "duplicate tool call id `dup`")]
    fn from_agent_applies_the_parse_check() {
        let calls = vec![
            ToolCall::new("dup", "f", "{}"),
            ToolCall::new("dup", "g", "{}"),
        ];
        let _ = History::from_agent(vec![
            Message::user("go"),
            Message::assistant_tool_calls("", calls),
        ]);
    }

    #[test]
    fn from_agent_keeps_a_valid_history() {
        let messages = vec![Message::user("hi"), Message::assistant("hello")];
        let h = History::from_agent(messages.clone());
        assert_eq!(History::parse(&h.to_json()).unwrap().messages(), messages);
    }

    #[test]
    fn a_history_writes_and_reads_its_pinned_json() {
        let h = History::new(vec![Message::user("hi"), Message::assistant("hello")]).unwrap();
        let written = serde_json::to_string(&h).unwrap();
        assert_eq!(
            written,
            r#"{"version":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}"#
        );
        assert_eq!(serde_json::from_str::<History>(&written).unwrap(), h);
        let value = serde_json::to_value(&h).unwrap();
        assert_eq!(serde_json::from_value::<History>(value).unwrap(), h);
        // Unknown keys are skipped; the version is the messages' own.
        let read: History = serde_json::from_str(r#"{"messages":[],"x":0,"version":2}"#).unwrap();
        assert_eq!(read, History::default());
        let inputs = [
            r#"{"version":3,"messages":[]}"#,
            r#"{"version":0,"messages":[]}"#,
            r#"{"messages":[]}"#,
            r#"{"version":1}"#,
            r#"{"version":1,"version":1,"messages":[]}"#,
            r#"{"version":1,"messages":[{"role":"user","tool_calls":[{"id":"c","name":"n","arguments":""}]}]}"#,
            r#"{"version":-1,"messages":[]}"#,
            r"[1,[]]",
            r#""history""#,
        ];
        let errors: Vec<String> = inputs
            .iter()
            .map(|s| match serde_json::from_str::<History>(s) {
                Ok(h) => format!("read {h:?}"),
                Err(e) => e.to_string(),
            })
            .collect();
        let expected: &[&str] = &[
            r"unsupported version 3",
            r"unsupported version 0",
            r"missing field `version` at line 1 column 15",
            r"missing field `messages` at line 1 column 13",
            r"duplicate field `version` at line 1 column 22",
            r"message 0: tool calls on a user message",
            r"invalid value: integer `-1`, expected u32 at line 1 column 13",
            // The derive also read a struct from an array of its fields'
            // values; the crate's impls (`serde_macros`) read objects only.
            "invalid type: sequence, expected struct Unchecked at line 1 column 1",
            r#"invalid type: string "history", expected struct Unchecked at line 1 column 9"#,
        ];
        assert_eq!(errors, expected, "errors:\n{}", errors.join("\n"));
    }
}
