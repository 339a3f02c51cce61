//! The JSON shapes of Anthropic's responses and stream events, and the
//! mappings both decoders share (stop reasons, usage figures). Every member
//! is optional and unknown members are ignored; strings are borrowed from
//! the input when they have no escapes.

use serde_json::Value;

use crate::Usage;
use crate::protocol::decode::shapes::Str;

/// One stream event (`message_start`, `content_block_delta`, ...), every
/// kind's members in one struct: the `type` says which are meaningful.
pub(super) struct Event<'a> {
    pub(super) kind: Option<Str<'a>>,
    pub(super) index: Option<u64>,
    pub(super) delta: Option<Delta<'a>>,
    /// `content_block_start`: the block, with its first (often empty)
    /// content. Boxed: absent from the deltas, which are most events.
    pub(super) content_block: Option<Box<Block>>,
    /// `message_start`: the message's id, model and first usage.
    pub(super) message: Option<Box<Head>>,
    /// `message_delta`: the cumulative usage. Boxed, as the other rare
    /// members: an event is returned by value, and a small one is cheaper
    /// to move (the bulk of a stream is deltas).
    pub(super) usage: Option<Box<WireUsage>>,
    /// `error`: `{type, message}`.
    pub(super) error: Option<Box<Value>>,
}

crate::serde_macros::json_struct! {
    Deserialize for Event<'a> {
        kind [rename = "type"],
        index,
        delta,
        content_block,
        message,
        usage,
        error,
    }
}

/// The `delta` of a `content_block_delta` or a `message_delta`.
pub(super) struct Delta<'a> {
    pub(super) kind: Option<Str<'a>>,
    /// The delta's one payload, whatever its kind names it: `text`
    /// (`text_delta`), `thinking`, `signature` or `partial_json`. One field
    /// for the four keeps the struct small (a delta carries one of them;
    /// one that carries two is a duplicate field, and its event is skipped
    /// as of an unexpected shape).
    pub(super) text: Option<Str<'a>>,
    pub(super) stop_reason: Option<Str<'a>>,
}

crate::serde_macros::json_struct! {
    Deserialize for Delta<'a> {
        kind [rename = "type"],
        text [alias = "thinking", alias = "signature", alias = "partial_json"],
        stop_reason,
    }
}

/// The `message` of a `message_start`.
pub(super) struct Head {
    pub(super) id: Option<String>,
    pub(super) model: Option<String>,
    pub(super) usage: Option<WireUsage>,
}

crate::serde_macros::json_struct! { Deserialize for Head { id, model, usage } }

/// A content block, whole (a response) or as it starts (a stream).
pub(super) struct Block {
    pub(super) kind: Option<String>,
    pub(super) text: Option<String>,
    pub(super) thinking: Option<String>,
    pub(super) signature: Option<String>,
    /// `redacted_thinking`: the encrypted thinking.
    pub(super) data: Option<String>,
    pub(super) id: Option<String>,
    pub(super) name: Option<String>,
    pub(super) input: Option<Value>,
    /// A `server_tool_use` block's `caller` (kept to send back).
    pub(super) caller: Option<Value>,
    /// A `tool_search_tool_result`'s call id and `content`.
    pub(super) tool_use_id: Option<String>,
    pub(super) content: Option<Value>,
}

crate::serde_macros::json_struct! {
    Deserialize for Block {
        kind [rename = "type"],
        text,
        thinking,
        signature,
        data,
        id,
        name,
        input,
        caller,
        tool_use_id,
        content,
    }
}

impl Block {
    /// Whether this is the `server_tool_use` block of the API's own tool
    /// search (other server tools are not pikuri's to read).
    pub(super) fn is_search_use(&self) -> bool {
        self.kind.as_deref() == Some("server_tool_use")
            && self
                .name
                .as_deref()
                .is_some_and(crate::protocol::found::is_search_tool_name)
    }

    /// The provider item for a tool-search `server_tool_use` block with
    /// this `input`, in the shape the API takes back (`type`, `id`,
    /// `name`, `input`, and `caller` when it came with one).
    pub(super) fn search_use_item(&self, input: Value) -> Value {
        let mut item = serde_json::json!({
            "type": "server_tool_use",
            "id": self.id.as_deref().unwrap_or(""),
            "name": self.name.as_deref().unwrap_or(""),
        });
        item["input"] = input;
        if let Some(caller) = self.caller.as_ref().filter(|c| !c.is_null()) {
            item["caller"] = caller.clone();
        }
        item
    }

    /// The provider item for a `tool_search_tool_result` block, in the
    /// shape the API takes back (`type`, `tool_use_id`, `content`).
    pub(super) fn search_result_item(&self) -> Value {
        serde_json::json!({
            "type": "tool_search_tool_result",
            "tool_use_id": self.tool_use_id.as_deref().unwrap_or(""),
            "content": self.content.clone().unwrap_or(Value::Null),
        })
    }
}

/// A search's `input`: the object it came with, else `{}` (the API takes
/// back only an object).
pub(super) fn search_input(input: Option<&Value>) -> Value {
    match input {
        Some(v @ Value::Object(_)) => v.clone(),
        _ => Value::Object(serde_json::Map::new()),
    }
}

/// A non-streamed response (or an error body that came with a 200).
pub(super) struct Response {
    pub(super) kind: Option<String>,
    pub(super) id: Option<String>,
    pub(super) model: Option<String>,
    pub(super) content: Option<Vec<Block>>,
    pub(super) stop_reason: Option<String>,
    pub(super) usage: Option<WireUsage>,
    pub(super) error: Option<Value>,
}

crate::serde_macros::json_struct! {
    Deserialize for Response {
        kind [rename = "type"],
        id,
        model,
        content,
        stop_reason,
        usage,
        error,
    }
}

/// Anthropic's usage figures; each read leniently (see [`figure`]).
#[derive(Default)]
pub(super) struct WireUsage {
    input: Option<Value>,
    output: Option<Value>,
    cache_read: Option<Value>,
    cache_creation: Option<Value>,
}

crate::serde_macros::json_struct! {
    Deserialize for WireUsage {
        input [rename = "input_tokens"],
        output [rename = "output_tokens"],
        cache_read [rename = "cache_read_input_tokens"],
        cache_creation [rename = "cache_creation_input_tokens"],
    }
}

/// The largest token figure taken as real: a trillion tokens is beyond
/// any context or answer, so a larger one is a server bug.
pub(super) const MAX_FIGURE: u64 = 1 << 40;

/// A usage figure: a non-negative integer up to [`MAX_FIGURE`]. Anything
/// else (negative, fractional, a string, absurdly large) is dropped with a
/// `warn` line, as if not reported: usage is bookkeeping, and a bad figure
/// must not cost the answer it came with.
fn figure(name: &str, v: Option<&Value>) -> Option<u64> {
    let v = v.filter(|v| !v.is_null())?;
    match v.as_u64() {
        Some(n) if n <= MAX_FIGURE => Some(n),
        _ => {
            log::warn!("anthropic usage: ignoring {name} = {v} (not a plausible token count)");
            None
        }
    }
}

impl WireUsage {
    /// The figures into pikuri's [`Usage`]: Anthropic's `input_tokens`
    /// already exclude the cached slices, so they map one to one.
    pub(super) fn to_usage(&self) -> Usage {
        Usage::from_parts(
            figure("input_tokens", self.input.as_ref()),
            figure("output_tokens", self.output.as_ref()),
            figure("cache_read_input_tokens", self.cache_read.as_ref()),
            figure("cache_creation_input_tokens", self.cache_creation.as_ref()),
            None,
        )
    }
}

/// `newer`'s figures over `older`'s, where `newer` has them: a
/// `message_delta`'s usage is cumulative but may omit the input figures
/// `message_start` gave.
pub(super) fn merge_usage(older: Option<Usage>, newer: Usage) -> Usage {
    let o = older.unwrap_or_default();
    Usage::from_parts(
        newer.input.or(o.input),
        newer.output.or(o.output),
        newer.cached.or(o.cached),
        newer.cache_creation.or(o.cache_creation),
        newer.thinking.or(o.thinking),
    )
}

/// A tool call's arguments as pikuri keeps them (a JSON text) from a
/// block's `input` object.
pub(super) fn arguments_of(input: Option<&Value>) -> String {
    match input {
        Some(v @ Value::Object(_)) => v.to_string(),
        _ => "{}".to_string(),
    }
}

/// The provider item for a `thinking` block, or `None` (logged) when it
/// has no signature: the API rejects a thinking block sent back unsigned,
/// so its text is kept as the message's reasoning only.
pub(super) fn thinking_item(thinking: &str, signature: Option<&str>) -> Option<Value> {
    if let Some(sig) = signature.filter(|s| !s.is_empty()) {
        Some(serde_json::json!({
            "type": "thinking",
            "thinking": thinking,
            "signature": sig,
        }))
    } else {
        log::warn!(
            "anthropic: a thinking block without a signature is kept as reasoning only \
             (it cannot be sent back)"
        );
        None
    }
}

/// The provider item for a `redacted_thinking` block.
pub(super) fn redacted_item(data: &str) -> Value {
    serde_json::json!({ "type": "redacted_thinking", "data": data })
}

#[cfg(test)]
mod tests {
    use super::Delta;

    fn delta(json: &str) -> Result<Delta<'_>, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// Whether `s` points into `input`: borrowed, not copied.
    fn borrowed(input: &str, s: Option<&str>) -> bool {
        s.is_some_and(|s| input.as_bytes().as_ptr_range().contains(&s.as_ptr()))
    }

    #[test]
    fn an_event_borrows_its_strings_from_the_input_unless_escaped() {
        let input = r#"{"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "abc", "stop_reason": "end_turn"}}"#;
        let event: super::Event<'_> = serde_json::from_str(input).unwrap();
        assert!(borrowed(input, event.kind.as_deref()));
        let d = event.delta.unwrap();
        assert!(borrowed(input, d.kind.as_deref()));
        assert!(borrowed(input, d.text.as_deref()));
        assert!(borrowed(input, d.stop_reason.as_deref()));
        // An escape must be undone: a copy, of the same text.
        let input = r#"{"thinking": "a\tb"}"#;
        let d = delta(input).unwrap();
        assert_eq!(d.text.as_deref(), Some("a\tb"));
        assert!(!borrowed(input, d.text.as_deref()));
    }

    #[test]
    fn a_delta_reads_its_payload_under_any_of_its_four_keys() {
        for key in ["text", "thinking", "signature", "partial_json"] {
            let json = format!(r#"{{"type": "x_delta", "{key}": "p", "other": [1]}}"#);
            let d = delta(&json).unwrap();
            assert_eq!(d.kind.as_deref(), Some("x_delta"));
            assert_eq!(d.text.as_deref(), Some("p"), "{key}");
            assert!(d.stop_reason.is_none());
        }
        let d = delta(r#"{"stop_reason": "end_turn", "text": null}"#).unwrap();
        assert_eq!(d.stop_reason.as_deref(), Some("end_turn"));
        assert!(d.kind.is_none() && d.text.is_none());
        // An escaped key is still one of the four.
        let d = delta(r#"{"thinkin\u0067": "q\n"}"#).unwrap();
        assert_eq!(d.text.as_deref(), Some("q\n"));
    }

    #[test]
    fn a_delta_with_two_payloads_is_refused_as_serde_derive_refused_it() {
        // serde's derive names an aliased field by its own name.
        for twice in [
            r#"{"text": "a", "thinking": "b"}"#,
            r#"{"partial_json": "a", "partial_json": "b"}"#,
            r#"{"text": null, "signature": "b"}"#,
        ] {
            let e = delta(twice).err().expect(twice);
            assert!(
                e.to_string().starts_with("duplicate field `text`"),
                "{twice}: {e}"
            );
        }
        let e = delta(r#"{"type": "a", "type": "b"}"#).err().unwrap();
        assert!(e.to_string().starts_with("duplicate field `type`"), "{e}");
        let e = delta(r#"{"text": 3}"#).err().unwrap();
        assert!(
            e.to_string().starts_with("invalid type: integer `3`"),
            "{e}"
        );
    }
}
