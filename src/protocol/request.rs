//! What the agent loop asks for, in no API's shape ([`Request`],
//! [`ToolSpecs`], [`ResponseSchema`], [`ModelSettings`]), and its encoding
//! as the body of `POST /chat/completions`.
//!
//! The request is neutral: tool specs are names, descriptions and schemas,
//! structured output is a [`ResponseSchema`], model settings are typed,
//! reasoning replay and prompt caching are flags.
//! Each API's encoder (this file for chat completions, `anthropic/encode.rs`,
//! `responses/encode.rs`) maps them to its own fields; then the raw request
//! fields ([`Request::extra`]) are written as given, last, and a field they
//! name replaces the encoder's own (one key, never two).
//!
//! # Chat completions
//!
//! - Tools: `{"type":"function","function":{name, description, parameters}}`.
//! - Structured output: `response_format: {"type":"json_schema",
//!   "json_schema":{name, strict, schema}}`; to a server that looks like
//!   Ollama (port 11434 or `ollama` in the API base), its own `format:
//!   <schema>` as well: Ollama's OpenAI layer has ignored `response_format`
//!   in some versions, and its native `format` is what constrains the
//!   answer there. An encoder decision: nothing above the protocol knows.
//! - Settings: `temperature`, `top_p`, `stop`, `seed`, `tool_choice`
//!   (`"auto"`, `"none"`, `"required"`, `{"type":"function","function":
//!   {"name":..}}`), `parallel_tool_calls`, `reasoning_effort`; the token
//!   bound is `max_completion_tokens` on OpenAI's own API base
//!   (`api.openai.com`, whose reasoning models reject `max_tokens`) and
//!   `max_tokens` elsewhere (llama.cpp, Ollama, vLLM, DeepSeek read that
//!   one). `thinking_budget` has no chat field: the request fails (see
//!   [`ModelSettings`]). `tool_choice` and `parallel_tool_calls` are sent
//!   only with tools (servers reject them alone), on every API, raw
//!   request fields of those names included.
//!
//! The conversation is serialized **by reference** straight into a reused
//! byte buffer: no per-request clone of the history, no intermediate
//! `serde_json::Value`. Response and chunk parsing lives in
//! [`decode`](super::decode).

use std::sync::Arc;

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use super::ChatTransport;
use super::settings::{ModelSettings, ToolChoice};
use crate::{Api, Cancellable, Message, Role, Tool, ToolCall};

/// One chat completion as the agent loop describes it, borrowed: where it
/// goes, what it says, and how the answer is read. The client encodes it
/// (see [`Request::write_to`]) and decodes the answer into a
/// [`Completion`](super::Completion).
#[derive(Debug, Clone, Copy)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent switches of one request"
)]
pub(crate) struct Request<'a> {
    /// Model, API base and key; the model names the request's `model`.
    pub(crate) transport: &'a ChatTransport,
    /// The system prompt, sent first unless empty.
    pub(crate) system: Option<&'a str>,
    /// The conversation.
    pub(crate) messages: &'a [Message],
    /// Extra system notes appended after the history for this request only
    /// (the remaining-steps note).
    pub(crate) trailing_system: Option<&'a str>,
    /// The tools the model may call.
    pub(crate) tools: &'a ToolSpecs,
    /// The model settings: the run's over the transport's, merged by the
    /// caller ([`ModelSettings::over`]).
    pub(crate) settings: &'a ModelSettings,
    /// Ask for an answer of this JSON schema (structured output).
    pub(crate) response_schema: Option<&'a ResponseSchema>,
    /// Ask for a streamed answer (SSE).
    pub(crate) stream: bool,
    /// Send `reasoning_content` back for assistant messages written by the
    /// transport's model.
    pub(crate) replay_reasoning: bool,
    /// Place prompt-cache breakpoints (Anthropic; the other APIs cache
    /// without them): the transport's
    /// [`prompt_caching`](ChatTransport::prompt_caching).
    #[cfg_attr(
        not(feature = "anthropic"),
        allow(dead_code, reason = "read by the Anthropic encoder only")
    )]
    pub(crate) prompt_caching: bool,
    /// Move `<think>` blocks in the content to the reasoning.
    pub(crate) split_think: bool,
    /// Raw top-level fields of the API's own body, written last: a field
    /// named here replaces the encoder's own.
    pub(crate) extra: &'a Map<String, Value>,
    /// Interrupts the request in flight and the waits between retries.
    pub(crate) cancel: Option<&'a Cancellable>,
    /// A W3C `traceparent` header value, sent when given.
    pub(crate) traceparent: Option<&'a str>,
}

impl Request<'_> {
    /// Serialize into `buf` (cleared first); `include_usage` comes from the
    /// client's [`HttpConfig`](super::HttpConfig).
    pub(crate) fn write_to(&self, buf: &mut Vec<u8>, include_usage: bool) {
        buf.clear();
        let model = self.transport.model().unwrap_or_default();
        let endpoint = self.transport.base_or_default();
        let body = Body {
            model,
            system: self.system,
            messages: self.messages,
            trailing_system: self.trailing_system,
            tools: &self.tools.specs,
            stream: self.stream,
            include_usage,
            reasoning_for_model: self.replay_reasoning.then_some(model),
            endpoint,
            settings: self.settings,
            response_schema: self.response_schema,
            extra: self.extra,
        };
        let mut ser = serde_json::Serializer::new(&mut *buf);
        // Serializing plain data into a Vec cannot fail.
        body.serialize(&mut ser)
            .expect("request serialization cannot fail");
    }
}

/// One tool as a request offers it: no API's shape.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    /// The JSON Schema of the arguments (an object schema).
    pub(crate) parameters: Value,
    /// Sent for an API's own tool search only, not loaded until found
    /// (`pikuri::tool_search`): Anthropic's and Responses' `defer_loading`.
    pub(crate) deferred: bool,
}

/// The tools of a request, built once when the tool set changes rather
/// than on every request.
#[derive(Debug, Default)]
pub(crate) struct ToolSpecs {
    specs: Vec<ToolSpec>,
    /// The API's own search is Anthropic's regex variant, not its BM25
    /// one ([`ToolSearch::regex`](crate::tool_search::ToolSearch::regex)).
    regex: bool,
}

impl ToolSpecs {
    /// The tools of a request that has none, shared by every such request
    /// (no allocation per request).
    pub(crate) const NONE: &'static ToolSpecs = &ToolSpecs {
        specs: Vec::new(),
        regex: false,
    };

    pub(crate) fn new(tools: &[Arc<dyn Tool>]) -> ToolSpecs {
        ToolSpecs {
            specs: tools
                .iter()
                .map(|t| ToolSpec {
                    name: t.name().to_string(),
                    description: t.description().to_string(),
                    parameters: t.parameters().to_json().clone(),
                    deferred: false,
                })
                .collect(),
            regex: false,
        }
    }

    /// `tools`, then `deferred` marked for the API's own tool search
    /// (`pikuri::tool_search`'s native form; Anthropic's `regex` variant
    /// when asked).
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(dead_code, reason = "deferred tools need the tool-search feature")
    )]
    pub(crate) fn with_deferred(
        tools: &[Arc<dyn Tool>],
        deferred: &[Arc<dyn Tool>],
        regex: bool,
    ) -> ToolSpecs {
        let mut specs = ToolSpecs::new(tools);
        specs
            .specs
            .extend(ToolSpecs::new(deferred).specs.into_iter().map(|mut s| {
                s.deferred = true;
                s
            }));
        specs.regex = regex;
        specs
    }

    /// Whether the API's own search is Anthropic's regex variant.
    #[cfg(feature = "anthropic")]
    pub(crate) fn regex(&self) -> bool {
        self.regex
    }

    /// Specs from chat-shaped values (tests of the other APIs' encoders).
    #[cfg(test)]
    #[cfg_attr(
        not(all(feature = "anthropic", feature = "responses", feature = "gemini")),
        allow(
            dead_code,
            reason = "used by those encoders' tests, which are features"
        )
    )]
    pub(crate) fn from_values(specs: &[Value]) -> ToolSpecs {
        let text = |f: &Value, k: &str| f.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        ToolSpecs {
            specs: specs
                .iter()
                .map(|v| {
                    let f = v.get("function").unwrap_or(v);
                    ToolSpec {
                        name: text(f, "name"),
                        description: text(f, "description"),
                        parameters: f
                            .get("parameters")
                            .cloned()
                            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                        deferred: v.get("defer_loading").and_then(Value::as_bool) == Some(true),
                    }
                })
                .collect(),
            regex: false,
        }
    }

    /// The specs (the Anthropic, Responses and Gemini encoders shape them).
    #[cfg(any(feature = "anthropic", feature = "responses", feature = "gemini"))]
    pub(crate) fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }
}

/// Whether a raw request field goes in a request with (`has_tools`) or
/// without tools: the tool-steering fields (`tool_choice`,
/// `parallel_tool_calls`) do not go without, as servers reject them there
/// (a helper child inherits its parent's fields but has no tools). The one
/// exception to "raw fields go as given", on every API.
pub(crate) fn raw_field_sent(key: &str, has_tools: bool) -> bool {
    has_tools || !matches!(key, "tool_choice" | "parallel_tool_calls")
}

/// The shape a structured answer must have: a named JSON schema, and
/// whether the server is asked to hold to it strictly.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResponseSchema {
    /// `[A-Za-z0-9_-]{1,64}`, as OpenAI accepts it.
    pub(crate) name: String,
    pub(crate) schema: Value,
    pub(crate) strict: bool,
}

/// The request body, borrowed: the wire's own shape of a [`Request`].
struct Body<'a> {
    model: &'a str,
    system: Option<&'a str>,
    messages: &'a [Message],
    trailing_system: Option<&'a str>,
    tools: &'a [ToolSpec],
    stream: bool,
    include_usage: bool,
    /// Send `reasoning_content` back for assistant messages written by this
    /// model (None: never).
    reasoning_for_model: Option<&'a str>,
    /// The API base, which with `model` decides whose provider fields go
    /// back (see [`crate::ProviderData::is_for`]).
    endpoint: &'a str,
    settings: &'a ModelSettings,
    /// Sent as `response_format`, and as `format` too to a server that
    /// looks like Ollama (`transport::ollama_base` of `endpoint`).
    response_schema: Option<&'a ResponseSchema>,
    extra: &'a Map<String, Value>,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // A raw field replaces pikuri's of the same name: written once, at
        // the end (duplicate keys are invalid JSON for strict servers).
        let ours = |k: &str| unclaimed(self.extra, k);
        let mut map = s.serialize_map(None)?;
        if ours("model") {
            map.serialize_entry("model", self.model)?;
        }
        if ours("messages") {
            map.serialize_entry("messages", &Messages(self))?;
        }
        // An empty `tools` array is rejected by some servers: leave it out.
        if !self.tools.is_empty() && ours("tools") {
            map.serialize_entry("tools", &ChatTools(self.tools))?;
        }
        if ours("stream") {
            map.serialize_entry("stream", &self.stream)?;
        }
        // Without `stream_options.include_usage` OpenAI sends no usage in a
        // stream; the field is invalid without `stream`.
        if self.stream && self.include_usage && ours("stream_options") {
            map.serialize_entry(
                "stream_options",
                &StreamOptions {
                    include_usage: true,
                },
            )?;
        }
        if let Some(rs) = self.response_schema {
            if ours("response_format") {
                map.serialize_entry(
                    "response_format",
                    &serde_json::json!({
                        "type": "json_schema",
                        "json_schema": {"name": rs.name, "strict": rs.strict, "schema": rs.schema},
                    }),
                )?;
            }
            // Asked only here: a request without a schema never needs it.
            if ours("format") && super::transport::ollama_base(self.endpoint) {
                map.serialize_entry("format", &rs.schema)?;
            }
        }
        let st = self.settings;
        let max_key = if self
            .endpoint
            .starts_with(super::transport::DEFAULT_API_BASE)
        {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        let steer = !self.tools.is_empty();
        let mut put = |k: &str, v: Option<Value>| match v {
            Some(v) if ours(k) => map.serialize_entry(k, &v),
            _ => Ok(()),
        };
        put("temperature", st.temperature().map(Value::from))?;
        put("top_p", st.top_p().map(Value::from))?;
        put(max_key, st.max_output_tokens().map(Value::from))?;
        put("stop", st.stop().map(Value::from))?;
        put("seed", st.seed().map(Value::from))?;
        put(
            "tool_choice",
            st.tool_choice().filter(|_| steer).map(chat_tool_choice),
        )?;
        put(
            "parallel_tool_calls",
            st.parallel_tool_calls().filter(|_| steer).map(Value::from),
        )?;
        put(
            "reasoning_effort",
            st.reasoning_effort().map(|e| Value::from(e.as_str())),
        )?;
        // The caller's own fields, passed through as given, last.
        for (k, v) in self.extra {
            if raw_field_sent(k, steer) {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// Whether no raw field of `extra` is named `key` (so the encoder writes
/// its own). Out of line: a `BTreeMap` lookup inlined at each of the
/// dozen fields the body may write is kilobytes of the same search.
#[inline(never)]
pub(crate) fn unclaimed(extra: &Map<String, Value>, key: &str) -> bool {
    !extra.contains_key(key)
}

/// A [`ToolChoice`] as chat completions' `tool_choice`.
fn chat_tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::None => "none".into(),
        ToolChoice::Required => "required".into(),
        ToolChoice::Tool(name) => {
            serde_json::json!({"type": "function", "function": {"name": name}})
        }
        ToolChoice::Auto => "auto".into(),
    }
}

/// The tools as `{"type":"function","function":{name, description,
/// parameters}}`.
struct ChatTools<'a>(&'a [ToolSpec]);

impl Serialize for ChatTools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a> {
            name: &'a str,
            description: &'a str,
            parameters: &'a Value,
        }
        crate::serde_macros::json_struct! {
            Serialize for Function<'a> { name, description, parameters }
        }
        struct Tool<'a> {
            kind: &'static str,
            function: Function<'a>,
        }
        crate::serde_macros::json_struct! {
            Serialize for Tool<'a> { kind [rename = "type"], function }
        }
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for t in self.0 {
            seq.serialize_element(&Tool {
                kind: "function",
                function: Function {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })?;
        }
        seq.end()
    }
}

struct StreamOptions {
    include_usage: bool,
}

crate::serde_macros::json_struct! { Serialize for StreamOptions { include_usage } }

struct Messages<'r, 'a>(&'r Body<'a>);

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
        // Images a tool attached go in a user message after the batch's
        // tool messages: chat completions takes only text in a tool
        // message, and nothing may come between the results of one batch.
        let mut from_tools: Vec<&Message> = Vec::new();
        for m in req.messages {
            if m.role != Role::Tool && !from_tools.is_empty() {
                seq.serialize_element(&ToolImages(&from_tools))?;
                from_tools.clear();
            }
            seq.serialize_element(&Wire {
                m,
                reasoning_for_model: req.reasoning_for_model,
                endpoint: req.endpoint,
                model: req.model,
            })?;
            if m.role == Role::Tool && !m.images.is_empty() {
                from_tools.push(m);
            }
        }
        if !from_tools.is_empty() {
            seq.serialize_element(&ToolImages(&from_tools))?;
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

struct Plain<'a> {
    role: &'a str,
    content: &'a str,
}

crate::serde_macros::json_struct! { Serialize for Plain<'a> { role, content } }

struct Wire<'a> {
    m: &'a Message,
    reasoning_for_model: Option<&'a str>,
    endpoint: &'a str,
    model: &'a str,
}

/// Fields pikuri writes itself in a message or a tool call: a provider
/// field of the same name (from a hand-edited history) is not sent twice.
const OWNED: [&str; 7] = [
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "reasoning_content",
    "id",
    "function",
];

/// Write the fields of `object` into `map`, but those pikuri owns.
fn echo_fields<M: SerializeMap>(map: &mut M, object: &Value) -> Result<(), M::Error> {
    if let Value::Object(fields) = object {
        for (k, v) in fields {
            if !OWNED.contains(&k.as_str()) && k != "type" {
                map.serialize_entry(k, v)?;
            }
        }
    }
    Ok(())
}

impl Serialize for Wire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.m;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("role", m.role.as_str())?;
        match m.role {
            Role::Assistant => {
                // An assistant turn that only called tools goes back with
                // `content: null`, the way OpenAI itself sends it.
                if m.tool_calls.is_empty() || !m.content.is_empty() {
                    map.serialize_entry("content", &m.content)?;
                } else {
                    map.serialize_entry("content", &Option::<&str>::None)?;
                }
                // Reasoning goes back only to the model that wrote it:
                // another model would read foreign thoughts as its own.
                if let (Some(model), Some(reasoning)) = (self.reasoning_for_model, &m.reasoning)
                    && m.model.as_deref() == Some(model)
                {
                    map.serialize_entry("reasoning_content", reasoning)?;
                }
                // Provider fields go back only to the API, endpoint and
                // model that issued them: another provider rejects them
                // (or, worse, reads a foreign signature as its own).
                let echo = m
                    .provider_data
                    .as_ref()
                    .is_some_and(|p| p.is_for(Api::ChatCompletions, self.endpoint, self.model));
                if echo {
                    for item in m.provider_data.iter().flat_map(|p| &p.items) {
                        echo_fields(&mut map, item)?;
                    }
                }
                if !m.tool_calls.is_empty() {
                    map.serialize_entry(
                        "tool_calls",
                        &Calls {
                            calls: &m.tool_calls,
                            echo,
                        },
                    )?;
                }
            }
            Role::Tool => {
                map.serialize_entry("tool_call_id", m.tool_call_id.as_deref().unwrap_or(""))?;
                map.serialize_entry("content", &m.content)?;
            }
            Role::User if !m.images.is_empty() => {
                map.serialize_entry("content", &Parts(m))?;
            }
            Role::System | Role::User => map.serialize_entry("content", &m.content)?,
        }
        map.end()
    }
}

/// A user message's text and images as content parts: `text` (left out
/// when empty), then one `image_url` part per image, its URL a `data:` URL
/// for bytes.
struct Parts<'a>(&'a Message);

impl Serialize for Parts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut seq = s.serialize_seq(None)?;
        if !m.content.is_empty() {
            seq.serialize_element(&TextPart {
                kind: "text",
                text: &m.content,
            })?;
        }
        for image in &m.images {
            seq.serialize_element(&ImagePart(image))?;
        }
        seq.end()
    }
}

struct TextPart<'a> {
    kind: &'static str,
    text: &'a str,
}

crate::serde_macros::json_struct! { Serialize for TextPart<'a> { kind [rename = "type"], text } }

struct ImagePart<'a>(&'a crate::Image);

impl Serialize for ImagePart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Url<'a> {
            url: &'a str,
        }
        crate::serde_macros::json_struct! { Serialize for Url<'a> { url } }
        let url = self.0.url();
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", "image_url")?;
        map.serialize_entry("image_url", &Url { url: &url })?;
        map.end()
    }
}

/// The images of a batch's tool messages, as one user message: a text
/// part naming the call before each call's images.
struct ToolImages<'r, 'a>(&'r [&'a Message]);

impl Serialize for ToolImages<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct All<'r, 'a>(&'r [&'a Message]);
        impl Serialize for All<'_, '_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(None)?;
                for m in self.0 {
                    let text = format!(
                        "Images from tool call {}:",
                        m.tool_call_id.as_deref().unwrap_or("")
                    );
                    seq.serialize_element(&TextPart {
                        kind: "text",
                        text: &text,
                    })?;
                    for image in &m.images {
                        seq.serialize_element(&ImagePart(image))?;
                    }
                }
                seq.end()
            }
        }
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", "user")?;
        map.serialize_entry("content", &All(self.0))?;
        map.end()
    }
}

/// The calls of one message; `echo`: with their provider fields (the
/// message's [`crate::ProviderData`] names this request's API, endpoint
/// and model).
struct Calls<'a> {
    calls: &'a [ToolCall],
    echo: bool,
}

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.calls.len()))?;
        for c in self.calls {
            seq.serialize_element(&Call(c, self.echo))?;
        }
        seq.end()
    }
}

struct Call<'a>(&'a ToolCall, bool);

impl Serialize for Call<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Function<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        crate::serde_macros::json_struct! { Serialize for Function<'a> { name, arguments } }
        let Call(c, echo) = *self;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("id", &c.id)?;
        map.serialize_entry("type", "function")?;
        map.serialize_entry(
            "function",
            &Function {
                name: &c.name,
                arguments: sendable_arguments(&c.arguments),
            },
        )?;
        // Gemini's `extra_content` (its thought signature) after the
        // fields pikuri owns; without it Gemini 3 refuses the history.
        if let (true, Some(data)) = (echo, &c.provider_data) {
            echo_fields(&mut map, data)?;
        }
        map.end()
    }
}

/// The arguments as they go back to the server. Servers that render the
/// history through a chat template (llama.cpp) parse them and reject the
/// whole request when they are not JSON; the model already got an error
/// observation quoting what it sent, so the history carries `{}` instead.
/// The agent puts `{}` in its history too, once the call is answered (see
/// [`ToolCall::arguments`]); this covers a history a host set itself.
fn sendable_arguments(raw: &str) -> &str {
    if is_sendable(raw) { raw } else { "{}" }
}

/// Whether tool-call arguments can go back to any server as they are: one
/// JSON object that serde_json parses into a `Value`, so nested at most 128
/// deep and free of lone surrogate escapes (`"\ud800"`), which a quick
/// syntax check (`IgnoredAny`) lets through and strict servers reject. No
/// allocation beyond serde_json's scratch buffer for escaped strings.
pub(crate) fn is_sendable(raw: &str) -> bool {
    raw.trim_start().starts_with('{') && serde_json::from_str::<Checked>(raw).is_ok()
}

/// Any JSON value, read through `deserialize_any` at every level (unlike
/// `IgnoredAny`, whose skipping neither bounds the depth nor decodes
/// escapes) and kept as nothing.
struct Checked;

impl<'de> serde::Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Checked, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> serde::de::Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// The encoders' tests' request: system `sys`, no settings, streamed,
/// prompt caching on; a test sets what it varies with `..`.
#[cfg(test)]
impl<'a> Request<'a> {
    pub(crate) fn for_test(
        transport: &'a ChatTransport,
        messages: &'a [Message],
        tools: &'a ToolSpecs,
        extra: &'a Map<String, Value>,
    ) -> Request<'a> {
        Request {
            transport,
            system: Some("sys"),
            messages,
            trailing_system: None,
            tools,
            settings: &super::settings::NONE,
            response_schema: None,
            stream: true,
            replay_reasoning: false,
            prompt_caching: true,
            split_think: false,
            extra,
            cancel: None,
            traceparent: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(
        transport: &'a ChatTransport,
        messages: &'a [Message],
        tools: &'a ToolSpecs,
        extra: &'a serde_json::Map<String, Value>,
    ) -> Request<'a> {
        Request::for_test(transport, messages, tools, extra)
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
        let (transport, tools) = (ChatTransport::new("m"), ToolSpecs::default());
        let mut buf = Vec::new();
        req(&transport, &msgs, &tools, &extra).write_to(&mut buf, true);
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
    fn only_arguments_any_server_parses_are_sendable() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(100_000), "]".repeat(100_000));
        let shallow = format!("{{\"a\":{}1{}}}", "[".repeat(100), "]".repeat(100));
        for ok in [
            "{}",
            r#" {"a":[1,{"b":null}],"c":"\ud83d\ude00"}"#,
            &shallow,
        ] {
            assert!(is_sendable(ok), "{ok}");
            assert_eq!(sendable_arguments(ok), ok);
        }
        for bad in [
            "",
            "[]",
            r#"{"a":"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00x"}"#,
            r#"{"\ud800":1}"#,
            r#"{"a":1e999}"#,
            &deep,
        ] {
            assert!(!is_sendable(bad), "{}", &bad[..bad.len().min(40)]);
            assert_eq!(sendable_arguments(bad), "{}");
        }
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
        let (transport, tools) = (ChatTransport::new("m"), ToolSpecs::default());
        let mut r = req(&transport, &msgs, &tools, &extra);
        r.replay_reasoning = true;
        let mut buf = Vec::new();
        r.write_to(&mut buf, true);
        let v: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(v["messages"][2]["reasoning_content"], "because");
        assert!(v["messages"][3].get("reasoning_content").is_none());
    }

    /// Every setting's bytes on the chat body: key order, a negative seed,
    /// a non-finite float as `null`, the named tool's object. (Session 14
    /// tried writing each as its own type rather than a `Value`: the same
    /// bytes, and no smaller a program.)
    #[test]
    fn every_setting_is_written_byte_for_byte() {
        use super::super::settings::ReasoningEffort;
        let extra = serde_json::Map::new();
        let tools = ToolSpecs {
            specs: vec![ToolSpec {
                name: "t".into(),
                description: "d".into(),
                parameters: serde_json::json!({"type": "object"}),
                deferred: false,
            }],
            regex: false,
        };
        let msgs = [Message::user("q")];
        let transport = ChatTransport::new("m").with_api_base("http://h/v1");
        let body = |settings: &ModelSettings| {
            let mut r = req(&transport, &msgs, &tools, &extra);
            r.settings = settings;
            r.system = None;
            r.stream = false;
            let mut buf = Vec::new();
            r.write_to(&mut buf, true);
            String::from_utf8(buf).unwrap()
        };
        let head = r#"{"model":"m","messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"t","description":"d","parameters":{"type":"object"}}}],"stream":false"#;
        let all = ModelSettings::new()
            .with_temperature(0.25)
            .with_top_p(1.0)
            .with_max_output_tokens(64)
            .with_stop(["a\"b", "c"])
            .with_seed(-7)
            .with_tool_choice(ToolChoice::Tool("t".into()))
            .with_parallel_tool_calls(false)
            .with_reasoning_effort(ReasoningEffort::High);
        assert_eq!(
            body(&all),
            format!(
                r#"{head},"temperature":0.25,"top_p":1.0,"max_tokens":64,"stop":["a\"b","c"],"seed":-7,"tool_choice":{{"function":{{"name":"t"}},"type":"function"}},"parallel_tool_calls":false,"reasoning_effort":"high"}}"#
            )
        );
        let choice = ModelSettings::new().with_tool_choice(ToolChoice::Required);
        assert_eq!(
            body(&choice),
            format!(r#"{head},"tool_choice":"required"}}"#)
        );
        let nan = ModelSettings::new().with_temperature(f64::NAN);
        assert_eq!(body(&nan), format!(r#"{head},"temperature":null}}"#));
    }

    #[test]
    fn the_token_bound_is_max_completion_tokens_on_openai_s_own_base_only() {
        let extra = serde_json::Map::new();
        let tools = ToolSpecs::default();
        let settings = ModelSettings::new().with_max_output_tokens(9);
        let msgs = [Message::user("q")];
        for (transport, key) in [
            (ChatTransport::new("gpt-5"), "max_completion_tokens"),
            (
                ChatTransport::new("m").with_api_base("http://127.0.0.1:8080/v1"),
                "max_tokens",
            ),
        ] {
            let mut r = req(&transport, &msgs, &tools, &extra);
            r.settings = &settings;
            let mut buf = Vec::new();
            r.write_to(&mut buf, true);
            let v: Value = serde_json::from_slice(&buf).unwrap();
            assert_eq!(v[key], 9, "{v}");
            assert_eq!(v.as_object().unwrap().len(), 5, "{v}");
        }
    }

    #[test]
    fn the_response_schema_goes_as_response_format_and_to_ollama_as_format() {
        let extra = serde_json::Map::new();
        let tools = ToolSpecs::default();
        let schema = ResponseSchema {
            name: "Answer".into(),
            schema: serde_json::json!({"type": "object"}),
            strict: true,
        };
        let msgs = [Message::user("q")];
        let llama = ChatTransport::new("m").with_api_base("http://127.0.0.1:8080/v1");
        let ollama = ChatTransport::new("m").with_api_base("http://127.0.0.1:11434/v1");
        for (transport, format) in [(llama, false), (ollama, true)] {
            let mut r = req(&transport, &msgs, &tools, &extra);
            r.response_schema = Some(&schema);
            let mut buf = Vec::new();
            r.write_to(&mut buf, true);
            let v: Value = serde_json::from_slice(&buf).unwrap();
            assert_eq!(
                v["response_format"],
                serde_json::json!({"type": "json_schema",
                    "json_schema": {"name": "Answer", "strict": true, "schema": {"type": "object"}}})
            );
            assert_eq!(v.get("format").is_some(), format, "{v}");
        }
    }
}
