//! A [`Request`] as the body of `POST {base}/models/{model}:generateContent`,
//! serialized by reference (see the [module docs](super#the-request) for
//! the rules).

use std::collections::HashMap;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value, json};

use crate::protocol::request::{Request, raw_field_sent};
use crate::protocol::settings::{ModelSettings, ReasoningEffort, ToolChoice};
use crate::{Api, Image, ImageSource, Message, Role, ToolCall};

/// The signature Google documents for a call no Gemini model of this
/// endpoint signed (written by another model or API).
pub(super) const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// Serialize `req` into `buf` (cleared first). When the transport names a
/// context cache, the body names it (`cachedContent`) and leaves out what
/// the cache holds (see [`cache`](super::cache)).
///
/// # Errors
///
/// [`Error::InvalidInput`](crate::Error::InvalidInput) for a cache name
/// that is not a cache's; nothing is written.
pub(crate) fn write_body(req: &Request<'_>, buf: &mut Vec<u8>) -> crate::Result<()> {
    buf.clear();
    let cache = req
        .transport
        .cached_content()
        .map(resource_path)
        .transpose()?;
    let body = Body::new(req, cache);
    let mut ser = serde_json::Serializer::new(&mut *buf);
    // Serializing plain data into a Vec cannot fail.
    body.serialize(&mut ser)
        .expect("request serialization cannot fail");
    Ok(())
}

/// `cachedContents/{id}` from a name with or without the collection, or
/// [`Error::InvalidInput`](crate::Error::InvalidInput) for one that is not a cache's.
pub(super) fn resource_path(name: &str) -> crate::Result<String> {
    let id = name.strip_prefix("cachedContents/").unwrap_or(name);
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(crate::Error::InvalidInput(format!(
            "`{}` is not a context cache's name (`cachedContents/{{id}}`)",
            crate::util::excerpt(name, 80)
        )));
    }
    Ok(format!("cachedContents/{id}"))
}

/// One part, borrowed from the history.
enum Part<'a> {
    Text(&'a str, Option<&'a str>),
    Image(&'a Image),
    /// A call, its signature and the id the server gave it.
    Call(&'a ToolCall, Option<&'a str>, Option<&'a str>),
    /// A result, the name of its call and the id to answer.
    Result(&'a Message, &'a str, Option<&'a str>),
}

/// A turn: consecutive history messages of one role merged.
struct Turn<'a> {
    user: bool,
    parts: Vec<Part<'a>>,
}

struct Body<'a> {
    req: &'a Request<'a>,
    system: Vec<&'a str>,
    turns: Vec<Turn<'a>>,
    /// The context cache the request reads (`cachedContents/{id}`).
    cache: Option<String>,
}

/// A string member of a call's provider data.
fn call_field<'a>(call: &'a ToolCall, key: &str) -> Option<&'a str> {
    call.provider_data.as_ref()?.get(key)?.as_str()
}

impl<'a> Body<'a> {
    fn new(req: &'a Request<'a>, cache: Option<String>) -> Body<'a> {
        let t = req.transport;
        let (endpoint, model) = (t.base_or_default(), t.model().unwrap_or_default());
        let mut system: Vec<&'a str> = req.system.filter(|s| !s.is_empty()).into_iter().collect();
        let mut turns: Vec<Turn<'a>> = Vec::new();
        // Each call's name and the id to answer it with, by its id.
        let mut calls: HashMap<&'a str, (&'a str, Option<&'a str>)> = HashMap::new();
        for m in req.messages {
            match m.role {
                Role::System if !m.content.is_empty() => system.push(&m.content),
                Role::System => {}
                Role::User => {
                    let parts = turn(&mut turns, true);
                    if !m.content.is_empty() {
                        parts.push(Part::Text(&m.content, None));
                    }
                    parts.extend(m.images.iter().map(Part::Image));
                }
                Role::Tool => {
                    let id = m.tool_call_id.as_deref().unwrap_or("");
                    let (name, wire_id) = calls.get(id).copied().unwrap_or((id, None));
                    let parts = turn(&mut turns, true);
                    parts.push(Part::Result(m, name, wire_id));
                    parts.extend(m.images.iter().map(Part::Image));
                }
                Role::Assistant => {
                    let same = m
                        .provider_data
                        .as_ref()
                        .filter(|pd| pd.is_for(Api::Gemini, endpoint, model));
                    let parts = turn(&mut turns, false);
                    if !m.content.is_empty() {
                        let sig = same
                            .and_then(|pd| pd.items.last())
                            .and_then(|i| i.get("thoughtSignature"))
                            .and_then(Value::as_str);
                        parts.push(Part::Text(&m.content, sig));
                    }
                    for (i, c) in m.tool_calls.iter().enumerate() {
                        let (sig, id) = match same {
                            Some(_) => (call_field(c, "thoughtSignature"), call_field(c, "id")),
                            None => (None, None),
                        };
                        // Only the first call of a step is signed, and Gemini 3
                        // refuses the step when it is not: a first call without
                        // a signature of this model (another model's, or a
                        // server that signed a later call only) gets the skip
                        // value.
                        let sig = sig.or((i == 0).then_some(SKIP_SIGNATURE));
                        calls.insert(&c.id, (&c.name, id));
                        parts.push(Part::Call(c, sig, id));
                    }
                }
            }
        }
        if let Some(note) = req.trailing_system.filter(|s| !s.is_empty()) {
            turn(&mut turns, true).push(Part::Text(note, None));
        }
        // The API rejects a turn without parts.
        turns.retain(|t| !t.parts.is_empty());
        Body {
            req,
            system,
            turns,
            cache,
        }
    }
}

/// The parts of the last turn when it has this role, else of a new one.
fn turn<'t, 'a>(turns: &'t mut Vec<Turn<'a>>, user: bool) -> &'t mut Vec<Part<'a>> {
    if turns.last().is_some_and(|t| t.parts.is_empty()) {
        turns.pop();
    }
    if turns.last().is_none_or(|t| t.user != user) {
        turns.push(Turn {
            user,
            parts: Vec::new(),
        });
    }
    &mut turns.last_mut().expect("pushed above").parts
}

/// `toolConfig.functionCallingConfig` from the tool choice.
fn tool_config(st: &ModelSettings) -> Option<Value> {
    let config = match st.tool_choice()? {
        ToolChoice::Auto => json!({"mode": "AUTO"}),
        ToolChoice::None => json!({"mode": "NONE"}),
        ToolChoice::Required => json!({"mode": "ANY"}),
        ToolChoice::Tool(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    };
    Some(json!({ "functionCallingConfig": config }))
}

/// `generationConfig`: the sampling settings, structured output and
/// thinking; `None` when nothing is set.
fn generation_config(req: &Request<'_>) -> Option<Value> {
    let st = req.settings;
    let mut out = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            out.insert(k.to_string(), v);
        }
    };
    put("temperature", st.temperature().map(Value::from));
    put("topP", st.top_p().map(Value::from));
    put("maxOutputTokens", st.max_output_tokens().map(Value::from));
    put("stopSequences", st.stop().map(Value::from));
    put("seed", st.seed().map(Value::from));
    if let Some(rs) = req.response_schema {
        put("responseMimeType", Some("application/json".into()));
        put("responseJsonSchema", Some(rs.schema.clone()));
    }
    let mut thinking = Map::new();
    if let Some(b) = st.thinking_budget() {
        thinking.insert("thinkingBudget".into(), b.into());
    }
    if let Some(effort) = st.reasoning_effort() {
        let level = match effort {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        };
        thinking.insert("thinkingLevel".into(), level.into());
    }
    if !thinking.is_empty() {
        thinking.insert("includeThoughts".into(), true.into());
        put("thinkingConfig", Some(Value::Object(thinking)));
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.req;
        let extra = req.extra;
        // A field the caller set in `extra` replaces pikuri's own.
        let ours = |k: &str| crate::protocol::request::unclaimed(extra, k);
        // Why a cache drops these, raw ones too: Gemini takes the system
        // instruction, tools and tool config from the cache and refuses a
        // request that repeats them; the cache's name is pikuri's.
        let held = |k: &str| {
            self.cache.is_some()
                && matches!(
                    k,
                    "systemInstruction" | "tools" | "toolConfig" | "cachedContent"
                )
        };
        let mut map = s.serialize_map(None)?;
        if ours("contents") {
            map.serialize_entry("contents", self.turns.as_slice())?;
        }
        if ours("systemInstruction") && !held("systemInstruction") && !self.system.is_empty() {
            map.serialize_entry("systemInstruction", &System(&self.system))?;
        }
        let steer = !req.tools.specs().is_empty();
        if ours("tools") && !held("tools") && steer {
            let decls: Vec<Value> = req
                .tools
                .specs()
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "parametersJsonSchema": t.parameters,
                    })
                })
                .collect();
            map.serialize_entry("tools", &[json!({ "functionDeclarations": decls })])?;
        }
        if let Some(tc) =
            tool_config(req.settings).filter(|_| steer && ours("toolConfig") && !held("toolConfig"))
        {
            map.serialize_entry("toolConfig", &tc)?;
        }
        if let Some(gc) = generation_config(req).filter(|_| ours("generationConfig")) {
            map.serialize_entry("generationConfig", &gc)?;
        }
        // The raw fields, Gemini's own, as given, last.
        for (k, v) in extra {
            if raw_field_sent(k, steer) && !held(k) {
                map.serialize_entry(k, v)?;
            }
        }
        if let Some(name) = &self.cache {
            map.serialize_entry("cachedContent", name)?;
        }
        map.end()
    }
}

/// `{"parts": [{"text": ..}, ..]}`.
struct System<'r, 'a>(&'r [&'a str]);

impl Serialize for System<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let parts: Vec<Part<'_>> = self.0.iter().map(|t| Part::Text(t, None)).collect();
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("parts", parts.as_slice())?;
        map.end()
    }
}

/// A turn goes as `{"role", "parts"}`; a slice of them (and
/// of their pieces) serializes as a sequence.
impl Serialize for Turn<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", if self.user { "user" } else { "model" })?;
        map.serialize_entry("parts", self.parts.as_slice())?;
        map.end()
    }
}

impl Serialize for Part<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        let sig = match *self {
            Part::Text(text, sig) => {
                map.serialize_entry("text", text)?;
                sig
            }
            Part::Image(image) => {
                match &image.source {
                    ImageSource::Base64(data) => map.serialize_entry(
                        "inlineData",
                        &json!({"mimeType": image.media_type, "data": data}),
                    )?,
                    ImageSource::Url(url) => map.serialize_entry(
                        "fileData",
                        &json!({"mimeType": image.media_type, "fileUri": url}),
                    )?,
                }
                None
            }
            Part::Call(call, sig, id) => {
                let mut fc = json!({"name": call.name, "args": args_of(&call.arguments)});
                if let Some(id) = id {
                    fc["id"] = id.into();
                }
                map.serialize_entry("functionCall", &fc)?;
                sig
            }
            Part::Result(m, name, id) => {
                let mut fr = json!({"name": name, "response": {"result": m.content}});
                if let Some(id) = id {
                    fr["id"] = id.into();
                }
                map.serialize_entry("functionResponse", &fr)?;
                None
            }
        };
        if let Some(sig) = sig {
            map.serialize_entry("thoughtSignature", sig)?;
        }
        map.end()
    }
}

/// A call's arguments as the `args` object: what does not parse as one
/// JSON object goes as `{}` (the model already got an error observation
/// quoting what it sent).
fn args_of(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}
