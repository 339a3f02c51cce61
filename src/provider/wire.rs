//! Request serialization for `POST /chat/completions`.
//!
//! The conversation is serialized **by reference** straight into a reused
//! byte buffer: no per-request clone of the history, no intermediate
//! `serde_json::Value`. Response and chunk parsing lives in `crate::stream`.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use crate::{Message, Role, ToolCall};

/// Everything one request needs, borrowed.
pub(crate) struct ChatRequest<'a> {
    pub(crate) model: &'a str,
    pub(crate) system: Option<&'a str>,
    pub(crate) messages: &'a [Message],
    /// Extra system notes appended after the history for this request only
    /// (the remaining-steps note).
    pub(crate) trailing_system: Option<&'a str>,
    /// Prebuilt `{"type":"function","function":{..}}` objects.
    pub(crate) tools: &'a [Value],
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
    /// Send `reasoning_content` back for assistant messages written by this
    /// model (None: never).
    pub(crate) reasoning_for_model: Option<&'a str>,
    /// Extra top-level fields (temperature, tool_choice, ...), merged last.
    pub(crate) extra: &'a serde_json::Map<String, Value>,
}

impl ChatRequest<'_> {
    /// Serialize into `buf` (cleared first).
    pub(crate) fn write_to(&self, buf: &mut Vec<u8>) {
        buf.clear();
        let mut ser = serde_json::Serializer::new(&mut *buf);
        // Serializing plain data into a Vec cannot fail.
        self.serialize(&mut ser)
            .expect("request serialization cannot fail");
    }
}

impl Serialize for ChatRequest<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("model", self.model)?;
        map.serialize_entry("messages", &Messages(self))?;
        if !self.tools.is_empty() {
            map.serialize_entry("tools", self.tools)?;
        }
        map.serialize_entry("stream", &self.stream)?;
        if self.stream && self.include_usage {
            map.serialize_entry(
                "stream_options",
                &StreamOptions {
                    include_usage: true,
                },
            )?;
        }
        for (k, v) in self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

struct Messages<'r, 'a>(&'r ChatRequest<'a>);

impl Serialize for Messages<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.0;
        let mut seq = s.serialize_seq(None)?;
        if let Some(system) = req.system.filter(|s| !s.is_empty()) {
            seq.serialize_element(&Plain {
                role: "system",
                content: system,
            })?;
        }
        for m in req.messages {
            seq.serialize_element(&Wire {
                m,
                reasoning_for_model: req.reasoning_for_model,
            })?;
        }
        if let Some(note) = req.trailing_system {
            seq.serialize_element(&Plain {
                role: "system",
                content: note,
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct Plain<'a> {
    role: &'a str,
    content: &'a str,
}

struct Wire<'a> {
    m: &'a Message,
    reasoning_for_model: Option<&'a str>,
}

impl Serialize for Wire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.m;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("role", m.role.as_str())?;
        match m.role {
            Role::Assistant => {
                if m.tool_calls.is_empty() || !m.content.is_empty() {
                    map.serialize_entry("content", &m.content)?;
                } else {
                    map.serialize_entry("content", &Option::<&str>::None)?;
                }
                if let (Some(model), Some(reasoning)) = (self.reasoning_for_model, &m.reasoning)
                    && m.model.as_deref() == Some(model)
                {
                    map.serialize_entry("reasoning_content", reasoning)?;
                }
                if !m.tool_calls.is_empty() {
                    map.serialize_entry("tool_calls", &Calls(&m.tool_calls))?;
                }
            }
            Role::Tool => {
                map.serialize_entry("tool_call_id", m.tool_call_id.as_deref().unwrap_or(""))?;
                map.serialize_entry("content", &m.content)?;
            }
            Role::System | Role::User => map.serialize_entry("content", &m.content)?,
        }
        map.end()
    }
}

struct Calls<'a>(&'a [ToolCall]);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for c in self.0 {
            seq.serialize_element(&Call(c))?;
        }
        seq.end()
    }
}

struct Call<'a>(&'a ToolCall);

impl Serialize for Call<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        let c = self.0;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("id", &c.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry(
            "function",
            &Function {
                name: &c.name,
                arguments: sendable_arguments(&c.arguments),
            },
        )?;
        map.end()
    }
}

/// The arguments as they go back to the server. Servers that render the
/// history through a chat template (llama.cpp) parse them and reject the
/// whole request when they are not JSON; the model already got an error
/// observation quoting what it sent, so the history carries `{}` instead.
fn sendable_arguments(raw: &str) -> &str {
    let trimmed = raw.trim();
    if trimmed.starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok() {
        raw
    } else {
        "{}"
    }
}

/// The `tools` entry for one tool.
pub(crate) fn tool_json(name: &str, description: &str, parameters: &Value) -> Value {
    serde_json::json!({
        "type": "function",
        "function": { "name": name, "description": description, "parameters": parameters }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(
        messages: &'a [Message],
        extra: &'a serde_json::Map<String, Value>,
    ) -> ChatRequest<'a> {
        ChatRequest {
            model: "m",
            system: Some("sys"),
            messages,
            trailing_system: None,
            tools: &[],
            stream: true,
            include_usage: true,
            reasoning_for_model: None,
            extra,
        }
    }

    #[test]
    fn serializes_history_by_reference() {
        let extra = serde_json::Map::new();
        let msgs = vec![
            Message::user("hi"),
            Message::assistant_tool_calls("", vec![ToolCall::new("c1", "calc", r#"{"x":1}"#)]),
            Message::tool("c1", "2"),
            Message::assistant_tool_calls("", vec![ToolCall::new("c2", "calc", r#"{"x":"#)]),
        ];
        let mut buf = Vec::new();
        req(&msgs, &extra).write_to(&mut buf);
        let v: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(
            v["messages"][0],
            serde_json::json!({"role":"system","content":"sys"})
        );
        assert_eq!(v["messages"][2]["content"], Value::Null);
        assert_eq!(
            v["messages"][2]["tool_calls"][0]["function"]["arguments"],
            r#"{"x":1}"#
        );
        assert_eq!(
            v["messages"][3],
            serde_json::json!({"role":"tool","tool_call_id":"c1","content":"2"})
        );
        assert_eq!(
            v["messages"][4]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert!(v.get("tools").is_none());
    }

    #[test]
    fn reasoning_only_for_same_model() {
        let extra = serde_json::Map::new();
        let mut a = Message::assistant("x");
        a.reasoning = Some("because".into());
        a.model = Some("m".into());
        let mut b = a.clone();
        b.model = Some("other".into());
        let msgs = vec![Message::user("q"), a, b];
        let mut r = req(&msgs, &extra);
        r.reasoning_for_model = Some("m");
        let mut buf = Vec::new();
        r.write_to(&mut buf);
        let v: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(v["messages"][2]["reasoning_content"], "because");
        assert!(v["messages"][3].get("reasoning_content").is_none());
    }
}
