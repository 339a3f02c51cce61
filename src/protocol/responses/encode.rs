//! A [`Request`] as the body of `POST /responses`, serialized by reference
//! into the reused buffer (no clone of the history), under the
//! [rules](super#encoding) of the module docs.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Value, json};

use crate::protocol::found::is_search_item;
use crate::protocol::is_sendable;
use crate::protocol::request::{Request, ToolSpec, raw_field_sent};
use crate::protocol::settings::ToolChoice;
use crate::{Api, Image, ImageSource, Message, Role};

/// Serialize `req` into `buf` (cleared first).
pub(crate) fn write_body(req: &Request<'_>, buf: &mut Vec<u8>) {
    buf.clear();
    let mut ser = serde_json::Serializer::new(&mut *buf);
    // Serializing plain data into a Vec cannot fail.
    Body(req)
        .serialize(&mut ser)
        .expect("request serialization cannot fail");
}

struct Body<'r, 'a>(&'r Request<'a>);

impl Serialize for Body<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.0;
        let extra = req.extra;
        // Each field pikuri writes gives way to the host's field of the
        // same name, written with the others at the end: one key, never two.
        let own = |key: &str| !extra.contains_key(key);
        let mut map = s.serialize_map(None)?;
        if own("model") {
            map.serialize_entry("model", req.transport.model().unwrap_or_default())?;
        }
        // The system prompt is the top-level `instructions`: OpenAI's own
        // place for it, outside the input items.
        if let Some(system) = req.system.filter(|s| !s.is_empty())
            && own("instructions")
        {
            map.serialize_entry("instructions", system)?;
        }
        if own("input") {
            map.serialize_entry("input", &Input(req))?;
        }
        let tools = req.tools.specs();
        if !tools.is_empty() && own("tools") {
            map.serialize_entry(
                "tools",
                &Tools {
                    specs: tools,
                    search: tools.iter().any(|t| t.deferred) || replays_search(req),
                },
            )?;
        }
        if own("stream") {
            map.serialize_entry("stream", &req.stream)?;
        }
        // Nothing kept server-side unless the host asks; the reasoning
        // then travels in the request, encrypted.
        if own("store") {
            map.serialize_entry("store", &false)?;
        }
        if own("include") {
            map.serialize_entry("include", &["reasoning.encrypted_content"])?;
        }
        if let Some(rs) = req.response_schema
            && own("text")
        {
            map.serialize_entry(
                "text",
                &json!({ "format": {
                    "type": "json_schema",
                    "name": rs.name,
                    "schema": rs.schema,
                    "strict": rs.strict,
                }}),
            )?;
        }
        let st = req.settings;
        let steer = !tools.is_empty();
        let mut put = |k: &str, v: Option<Value>| match v {
            Some(v) if own(k) => map.serialize_entry(k, &v),
            _ => Ok(()),
        };
        put("temperature", st.temperature().map(Value::from))?;
        put("top_p", st.top_p().map(Value::from))?;
        put("max_output_tokens", st.max_output_tokens().map(Value::from))?;
        put(
            "tool_choice",
            st.tool_choice().filter(|_| steer).map(tool_choice),
        )?;
        put(
            "parallel_tool_calls",
            st.parallel_tool_calls().filter(|_| steer).map(Value::from),
        )?;
        put(
            "reasoning",
            st.reasoning_effort()
                .map(|e| json!({ "effort": e.as_str() })),
        )?;
        // The raw fields, the Responses API's own, as given, last.
        for (k, v) in extra {
            if raw_field_sent(k, steer) {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// A [`ToolChoice`] as `tool_choice`: `"auto"`, `"none"`, `"required"` or
/// `{"type":"function","name":..}`.
fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => "auto".into(),
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Tool(name) => json!({ "type": "function", "name": name }),
    }
}

/// Whether the history sends back a search of the API's own (its
/// `tool_search_call` and `tool_search_output` items): the search tool
/// must then be in `tools` too.
fn replays_search(req: &Request<'_>) -> bool {
    let endpoint = req.transport.base_or_default();
    let model = req.transport.model().unwrap_or_default();
    req.messages.iter().any(|m| {
        m.provider_data.as_ref().is_some_and(|pd| {
            pd.is_for(Api::OpenAiResponses, endpoint, model) && pd.items.iter().any(is_search_item)
        })
    })
}

/// The tools, flat: `{"type":"function", "name", "description",
/// "parameters"}`, with `"defer_loading": true` for a deferred one; then,
/// when any is deferred, the API's own search, `{"type":"tool_search"}`.
struct Tools<'a> {
    specs: &'a [ToolSpec],
    search: bool,
}

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.specs.len() + usize::from(self.search)))?;
        for spec in self.specs {
            seq.serialize_element(&Tool(spec))?;
        }
        if self.search {
            seq.serialize_element(&json!({ "type": SEARCH_TOOL_TYPE }))?;
        }
        seq.end()
    }
}

/// The `type` of the API's own tool search (run by the server: no
/// `execution`, `description` or `parameters`).
pub(crate) const SEARCH_TOOL_TYPE: &str = "tool_search";

struct Tool<'a>(&'a ToolSpec);

impl Serialize for Tool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(5))?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry("name", &self.0.name)?;
        map.serialize_entry("description", &self.0.description)?;
        map.serialize_entry("parameters", &self.0.parameters)?;
        if self.0.deferred {
            map.serialize_entry("defer_loading", &true)?;
        }
        map.end()
    }
}

struct Input<'r, 'a>(&'r Request<'a>);

impl Serialize for Input<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.0;
        let endpoint = req.transport.base_or_default();
        let model = req.transport.model().unwrap_or_default();
        let mut seq = s.serialize_seq(None)?;
        for m in req.messages {
            match m.role {
                Role::User => seq.serialize_element(&InputMessage {
                    role: "user",
                    text: &m.content,
                    images: &m.images,
                })?,
                Role::System => seq.serialize_element(&InputMessage {
                    role: "system",
                    text: &m.content,
                    images: &[],
                })?,
                Role::Assistant => {
                    // Reasoning items go back, verbatim and before what
                    // they led to, only to the API, endpoint and model
                    // that wrote them; reasoning text alone has no place
                    // in the input and is left out.
                    if let Some(pd) = &m.provider_data
                        && pd.is_for(Api::OpenAiResponses, endpoint, model)
                    {
                        for item in &pd.items {
                            seq.serialize_element(item)?;
                        }
                    }
                    if !m.content.is_empty() {
                        seq.serialize_element(&OutputMessage(&m.content))?;
                    }
                    for call in &m.tool_calls {
                        seq.serialize_element(&FunctionCall {
                            kind: "function_call",
                            call_id: &call.id,
                            name: &call.name,
                            // See `request::sendable_arguments`: arguments
                            // that are not one JSON object go back as `{}`.
                            arguments: if is_sendable(&call.arguments) {
                                &call.arguments
                            } else {
                                "{}"
                            },
                        })?;
                    }
                }
                Role::Tool => seq.serialize_element(&CallOutput(m))?,
            }
        }
        if let Some(note) = req.trailing_system {
            seq.serialize_element(&InputMessage {
                role: "system",
                text: note,
                images: &[],
            })?;
        }
        seq.end()
    }
}

/// A user or system message: `input_text`, then an `input_image` per
/// image.
struct InputMessage<'a> {
    role: &'a str,
    text: &'a str,
    images: &'a [Image],
}

impl Serialize for InputMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("type", "message")?;
        map.serialize_entry("role", self.role)?;
        map.serialize_entry(
            "content",
            &Parts {
                text: self.text,
                images: self.images,
            },
        )?;
        map.end()
    }
}

struct TextPart<'a> {
    kind: &'a str,
    text: &'a str,
}

crate::serde_macros::json_struct! { Serialize for TextPart<'a> { kind [rename = "type"], text } }

struct Parts<'a> {
    text: &'a str,
    images: &'a [Image],
}

impl Serialize for Parts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        // An image alone needs no empty text part beside it.
        if !self.text.is_empty() || self.images.is_empty() {
            seq.serialize_element(&TextPart {
                kind: "input_text",
                text: self.text,
            })?;
        }
        for image in self.images {
            seq.serialize_element(&InputImage(image))?;
        }
        seq.end()
    }
}

/// `{"type":"input_image","image_url":..,"detail":"auto"}`: a URL as
/// given, bytes as a `data:` URL.
struct InputImage<'a>(&'a Image);

impl Serialize for InputImage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("type", "input_image")?;
        match &self.0.source {
            ImageSource::Url(url) => map.serialize_entry("image_url", url)?,
            ImageSource::Base64(data) => map.serialize_entry(
                "image_url",
                &format!("data:{};base64,{data}", self.0.media_type),
            )?,
        }
        map.serialize_entry("detail", "auto")?;
        map.end()
    }
}

/// An assistant's text: `{"type":"message","role":"assistant","content":
/// [{"type":"output_text","text":..}]}`.
struct OutputMessage<'a>(&'a str);

impl Serialize for OutputMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("type", "message")?;
        map.serialize_entry("role", "assistant")?;
        map.serialize_entry(
            "content",
            &[TextPart {
                kind: "output_text",
                text: self.0,
            }],
        )?;
        map.end()
    }
}

struct FunctionCall<'a> {
    kind: &'a str,
    call_id: &'a str,
    name: &'a str,
    arguments: &'a str,
}

crate::serde_macros::json_struct! {
    Serialize for FunctionCall<'a> { kind [rename = "type"], call_id, name, arguments }
}

/// A tool result: `function_call_output` with the text as `output`, or,
/// with images, the text and the images as input parts.
struct CallOutput<'a>(&'a Message);

impl Serialize for CallOutput<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("type", "function_call_output")?;
        map.serialize_entry("call_id", m.tool_call_id.as_deref().unwrap_or(""))?;
        if m.images.is_empty() {
            map.serialize_entry("output", &m.content)?;
        } else {
            map.serialize_entry(
                "output",
                &Parts {
                    text: &m.content,
                    images: &m.images,
                },
            )?;
        }
        map.end()
    }
}
