//! A [`Request`] as the body of `POST {base}/messages`, serialized by
//! reference (see the [module docs](super#the-request) for the rules).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use crate::protocol::found::is_search_item;
use crate::protocol::request::{Request, ToolSpec, raw_field_sent};
use crate::protocol::settings::{ModelSettings, ReasoningEffort, ToolChoice};
use crate::{Api, Image, ImageSource, Message, Role, ToolCall};

/// The `type` of the API's own tool search that pikuri sends (the BM25
/// variant: natural-language queries, as pikuri's local search takes).
pub(crate) const SEARCH_TOOL_TYPE: &str = "tool_search_tool_bm25_20251119";
/// Its `name`, fixed by the API for that type.
pub(crate) const SEARCH_TOOL_NAME: &str = "tool_search_tool_bm25";
/// The regex variant's `type` and name
/// ([`ToolSearch::regex`](crate::tool_search::ToolSearch::regex)).
pub(crate) const REGEX_TOOL_TYPE: &str = "tool_search_tool_regex_20251119";
/// The regex variant's name.
pub(crate) const REGEX_TOOL_NAME: &str = "tool_search_tool_regex";

/// `max_tokens` (which the API requires) when no setting or request field
/// sets it; with a thinking budget, added to the budget (the budget must
/// be below `max_tokens`).
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// Serialize `req` into `buf` (cleared first).
pub(crate) fn write_body(req: &Request<'_>, buf: &mut Vec<u8>) {
    buf.clear();
    let body = Body::new(req);
    let mut ser = serde_json::Serializer::new(&mut *buf);
    // Serializing plain data into a Vec cannot fail.
    body.serialize(&mut ser)
        .expect("request serialization cannot fail");
}

/// One content block, borrowed from the history.
enum Block<'a> {
    Text(&'a str),
    Image(&'a Image),
    /// A `thinking`, `redacted_thinking` or tool-search block, verbatim.
    Item(&'a Value),
    /// A call, and how many earlier calls of the history had its id.
    ToolUse(&'a ToolCall, u32),
    /// A result, and how many earlier calls had the id of its call.
    ToolResult(&'a Message, u32),
}

/// A block and whether a cache breakpoint follows it.
struct Piece<'a> {
    block: Block<'a>,
    cache: bool,
}

/// A message on the wire: consecutive history messages of one role merged.
struct Turn<'a> {
    user: bool,
    pieces: Vec<Piece<'a>>,
}

struct Body<'a> {
    req: &'a Request<'a>,
    system: Vec<Piece<'a>>,
    turns: Vec<Turn<'a>>,
    /// The tools, `{name, description, input_schema}` each.
    tools: Vec<Value>,
}

impl<'a> Body<'a> {
    fn new(req: &'a Request<'a>) -> Body<'a> {
        let t = req.transport;
        let endpoint = t.base_or_default();
        let model = t.model().unwrap_or_default();
        let mut system: Vec<Piece<'a>> = Vec::new();
        if let Some(s) = req.system.filter(|s| !s.is_empty()) {
            system.push(piece(Block::Text(s)));
        }
        let mut turns: Vec<Turn<'a>> = Vec::new();
        // The searches of the API's own sent back, by variant (BM25,
        // regex): their tools must then be in `tools` too.
        let mut searched = [false; 2];
        // The API wants every `tool_use` id of the conversation once; some
        // servers number each answer's calls from `call_0` again. Per id:
        // how many calls had it so far, and the number of its latest call
        // (the one the results that follow answer).
        let mut uses: HashMap<&str, (u32, u32)> = HashMap::new();
        for m in req.messages {
            match m.role {
                // Anthropic has no system role in the conversation: the
                // history's system messages join the top-level system, in
                // order.
                Role::System => {
                    if !m.content.is_empty() {
                        system.push(piece(Block::Text(&m.content)));
                    }
                }
                Role::User => {
                    let pieces = turn(&mut turns, true);
                    if !m.content.is_empty() {
                        pieces.push(piece(Block::Text(&m.content)));
                    }
                    pieces.extend(m.images.iter().map(|i| piece(Block::Image(i))));
                }
                // The results of one batch go in one user message, as the
                // API requires; a user message after them joins it too,
                // since the roles must alternate.
                Role::Tool => {
                    let id = m.tool_call_id.as_deref().unwrap_or("");
                    let reuse = uses.get(id).map_or(0, |&(_, latest)| latest);
                    turn(&mut turns, true).push(piece(Block::ToolResult(m, reuse)));
                }
                Role::Assistant => {
                    let pieces = turn(&mut turns, false);
                    // Thinking goes back first, and only to the very API,
                    // endpoint and model that signed it.
                    if let Some(pd) = m
                        .provider_data
                        .as_ref()
                        .filter(|pd| pd.is_for(Api::AnthropicMessages, endpoint, model))
                    {
                        for item in pd.items.iter().filter(|i| is_search_item(i)) {
                            let name = item.get("name").and_then(serde_json::Value::as_str);
                            searched[usize::from(name == Some(REGEX_TOOL_NAME))] |= name.is_some();
                        }
                        pieces.extend(pd.items.iter().map(|i| piece(Block::Item(i))));
                    }
                    if !m.content.is_empty() {
                        pieces.push(piece(Block::Text(&m.content)));
                    }
                    pieces.extend(m.tool_calls.iter().map(|c| {
                        let (count, latest) = uses.entry(&c.id).or_default();
                        *latest = *count;
                        *count = count.saturating_add(1);
                        piece(Block::ToolUse(c, *latest))
                    }));
                }
            }
        }
        // The last message may have had nothing to send: the API rejects
        // empty content.
        turns.retain(|t| !t.pieces.is_empty());
        let specs = req.tools.specs();
        let mut tools: Vec<Value> = specs.iter().map(anthropic_tool).collect();
        // The API's own search over the deferred tools, last: never
        // deferred itself, so the cache breakpoint on the last tool is on
        // a tool that is always sent.
        if specs.iter().any(|t| t.deferred) {
            searched[usize::from(req.tools.regex())] = true;
        }
        let variants = [
            (SEARCH_TOOL_TYPE, SEARCH_TOOL_NAME),
            (REGEX_TOOL_TYPE, REGEX_TOOL_NAME),
        ];
        for (&(kind, name), _) in variants.iter().zip(searched).filter(|(_, s)| *s) {
            tools.push(serde_json::json!({ "type": kind, "name": name }));
        }
        if req.prompt_caching {
            mark_breakpoints(&mut system, &mut turns, &mut tools);
        }
        // The per-request note goes after the last breakpoint, as the last
        // block of the last user turn: in `system`, which the API caches
        // before the messages, each change of the note would miss the
        // cache for the whole history.
        if let Some(note) = req.trailing_system.filter(|s| !s.is_empty()) {
            turn(&mut turns, true).push(piece(Block::Text(note)));
        }
        Body {
            req,
            system,
            turns,
            tools,
        }
    }
}

/// The breakpoints pikuri places: after the tools, after the system prompt,
/// and after the conversation's last block, the moving end (before a
/// per-request note). Three of the API's four.
fn mark_breakpoints(system: &mut [Piece<'_>], turns: &mut [Turn<'_>], tools: &mut [Value]) {
    if let Some(Value::Object(last)) = tools.last_mut() {
        last.insert(
            "cache_control".to_string(),
            serde_json::json!({ "type": "ephemeral" }),
        );
    }
    if let Some(last) = system.last_mut() {
        last.cache = true;
    }
    // Thinking blocks cannot carry a breakpoint: the last block that can.
    if let Some(last) = turns.last_mut().and_then(|t| {
        t.pieces
            .iter_mut()
            .rev()
            .find(|p| !matches!(p.block, Block::Item(_)))
    }) {
        last.cache = true;
    }
}

fn piece(block: Block<'_>) -> Piece<'_> {
    Piece {
        block,
        cache: false,
    }
}

/// The pieces of the last turn when it has this role, else of a new one.
fn turn<'t, 'a>(turns: &'t mut Vec<Turn<'a>>, user: bool) -> &'t mut Vec<Piece<'a>> {
    // A message that had nothing to send (an empty answer) leaves no turn:
    // the ones around it then merge, as the roles must alternate.
    if turns.last().is_some_and(|t| t.pieces.is_empty()) {
        turns.pop();
    }
    if turns.last().is_none_or(|t| t.user != user) {
        turns.push(Turn {
            user,
            pieces: Vec::new(),
        });
    }
    &mut turns.last_mut().expect("pushed above").pieces
}

/// A tool in Anthropic's shape, `{name, description, input_schema}` (a
/// `Value`: the last one gets a cache breakpoint).
fn anthropic_tool(spec: &ToolSpec) -> Value {
    let mut tool = serde_json::json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.parameters,
    });
    if spec.deferred {
        tool["defer_loading"] = Value::Bool(true);
    }
    tool
}

/// `max_tokens`: the setting, else the default (above the thinking budget).
fn max_tokens(st: &ModelSettings) -> u64 {
    st.max_output_tokens().unwrap_or_else(|| {
        st.thinking_budget()
            .map_or(DEFAULT_MAX_TOKENS, |b| b.saturating_add(DEFAULT_MAX_TOKENS))
    })
}

/// `tool_choice`: `{"type": auto|none|any|tool, "name"?}`, with
/// `disable_parallel_tool_use` when parallel calls are off (a choice of
/// `auto` carries it when no choice is set).
fn tool_choice(st: &ModelSettings) -> Option<Value> {
    let serial = st.parallel_tool_calls() == Some(false);
    let mut choice = match st.tool_choice() {
        None if serial => serde_json::json!({"type": "auto"}),
        None => return None,
        Some(ToolChoice::Auto) => serde_json::json!({"type": "auto"}),
        Some(ToolChoice::None) => return Some(serde_json::json!({"type": "none"})),
        Some(ToolChoice::Required) => serde_json::json!({"type": "any"}),
        Some(ToolChoice::Tool(name)) => serde_json::json!({"type": "tool", "name": name}),
    };
    if serial {
        choice["disable_parallel_tool_use"] = Value::Bool(true);
    }
    Some(choice)
}

/// `output_config`: the structured-output `format` and the `effort`.
fn output_config(req: &Request<'_>) -> Option<Value> {
    let mut out = serde_json::Map::new();
    if let Some(rs) = req.response_schema {
        out.insert(
            "format".into(),
            serde_json::json!({ "type": "json_schema", "schema": rs.schema }),
        );
    }
    if let Some(effort) = req.settings.reasoning_effort() {
        let effort = match effort {
            // Anthropic has no `minimal`: its lowest.
            ReasoningEffort::Minimal | ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        };
        out.insert("effort".into(), effort.into());
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let req = self.req;
        let extra = req.extra;
        // A field the caller set in `extra` replaces pikuri's own: written
        // once, by the loop at the end (duplicate keys are invalid JSON for
        // strict servers).
        let ours = |k: &str| crate::protocol::request::unclaimed(extra, k);
        let mut map = s.serialize_map(None)?;
        if ours("model") {
            map.serialize_entry("model", req.transport.model().unwrap_or_default())?;
        }
        if ours("max_tokens") {
            map.serialize_entry("max_tokens", &max_tokens(req.settings))?;
        }
        if ours("system") && !self.system.is_empty() {
            map.serialize_entry("system", self.system.as_slice())?;
        }
        if ours("messages") {
            map.serialize_entry("messages", self.turns.as_slice())?;
        }
        // An empty `tools` array is rejected by some servers: leave it out.
        if ours("tools") && !self.tools.is_empty() {
            map.serialize_entry("tools", &self.tools)?;
        }
        if ours("stream") {
            map.serialize_entry("stream", &req.stream)?;
        }
        let st = req.settings;
        let steer = !self.tools.is_empty();
        let mut put = |k: &str, v: Option<Value>| match v {
            Some(v) if ours(k) => map.serialize_entry(k, &v),
            _ => Ok(()),
        };
        put("temperature", st.temperature().map(Value::from))?;
        put("top_p", st.top_p().map(Value::from))?;
        put("stop_sequences", st.stop().map(Value::from))?;
        put("tool_choice", tool_choice(st).filter(|_| steer))?;
        put(
            "thinking",
            st.thinking_budget()
                .map(|b| serde_json::json!({"type": "enabled", "budget_tokens": b})),
        )?;
        put("output_config", output_config(req))?;
        // The raw fields, Anthropic's own, as given, last.
        for (k, v) in extra {
            if raw_field_sent(k, steer) {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// A turn goes as `{"role", "content"}`; a slice of them (and
/// of their pieces) serializes as a sequence.
impl Serialize for Turn<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("role", if self.user { "user" } else { "assistant" })?;
        map.serialize_entry("content", self.pieces.as_slice())?;
        map.end()
    }
}

impl Serialize for Piece<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Block::Item(item) = self.block {
            return item.serialize(s);
        }
        let mut map = s.serialize_map(None)?;
        match self.block {
            Block::Text(text) => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
            }
            Block::Image(image) => write_image(&mut map, image)?,
            Block::ToolUse(call, reuse) => {
                map.serialize_entry("type", "tool_use")?;
                map.serialize_entry("id", &wire_id(&call.id, reuse))?;
                map.serialize_entry("name", &call.name)?;
                map.serialize_entry("input", &input_of(&call.arguments))?;
            }
            Block::ToolResult(m, reuse) => {
                map.serialize_entry("type", "tool_result")?;
                let id = m.tool_call_id.as_deref().unwrap_or("");
                map.serialize_entry("tool_use_id", &wire_id(id, reuse))?;
                if m.images.is_empty() {
                    map.serialize_entry("content", &m.content)?;
                } else {
                    map.serialize_entry("content", &ResultContent(m))?;
                }
            }
            Block::Item(_) => unreachable!("serialized above"),
        }
        if self.cache {
            map.serialize_entry("cache_control", &Ephemeral)?;
        }
        map.end()
    }
}

/// `{"type":"ephemeral"}`, the one kind of breakpoint.
struct Ephemeral;

impl Serialize for Ephemeral {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("type", "ephemeral")?;
        map.end()
    }
}

/// A call id as the API accepts it, `^[a-zA-Z0-9_-]+$` and once per
/// conversation: the id itself when it matches and no earlier call had it
/// (every id Anthropic issues), else each other character replaced by `_`
/// and the FNV-1a of the id appended, so that two ids that differ still
/// differ, and `_re<n>` for the `n`th reuse of an id. Another server's ids
/// (Kimi's `functions.add:0`, an MCP-derived `srv.tool|1`, `call_0` in
/// every answer) met in the history after a switch or a fallback would
/// otherwise make Anthropic refuse the whole request with a 400. Applied
/// to a `tool_use` and to the `tool_result` that answers it alike, so the
/// pair still matches; the history keeps the ids as they came.
pub(super) fn wire_id(id: &str, reuse: u32) -> Cow<'_, str> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let valid = !id.is_empty() && id.chars().all(allowed);
    if valid && reuse == 0 {
        return Cow::Borrowed(id);
    }
    let mut out: String = id
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .collect();
    if !valid {
        let _ = write!(out, "_{:016x}", crate::tool::fnv1a(id.as_bytes()));
    }
    if reuse > 0 {
        let _ = write!(out, "_re{reuse}");
    }
    Cow::Owned(out)
}

/// A tool call's arguments as the `input` object: what does not parse as
/// one JSON object goes as `{}` (the model already got an error
/// observation quoting what it sent).
fn input_of(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(serde_json::Map::new()),
    }
}

/// A tool result with images: its text block (when not empty), then the
/// images.
struct ResultContent<'a>(&'a Message);

impl Serialize for ResultContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut seq = s.serialize_seq(None)?;
        if !m.content.is_empty() {
            seq.serialize_element(&piece(Block::Text(&m.content)))?;
        }
        for i in &m.images {
            seq.serialize_element(&piece(Block::Image(i)))?;
        }
        seq.end()
    }
}

fn write_image<M: SerializeMap>(map: &mut M, image: &Image) -> Result<(), M::Error> {
    enum Source<'a> {
        Base64 { media_type: &'a str, data: &'a str },
        Url { url: &'a str },
    }
    crate::serde_macros::json_tagged! {
        Serialize for Source<'a>, tag = "type" {
            Base64 = "base64" { media_type, data },
            Url = "url" { url },
        }
    }
    map.serialize_entry("type", "image")?;
    let source = match &image.source {
        ImageSource::Base64(data) => Source::Base64 {
            media_type: &image.media_type,
            data,
        },
        ImageSource::Url(url) => Source::Url { url },
    };
    map.serialize_entry("source", &source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_tokens_never_overflows_and_follows_the_budget() {
        let none = ModelSettings::new();
        assert_eq!(max_tokens(&none), DEFAULT_MAX_TOKENS);
        let huge = ModelSettings::new().with_thinking_budget(u64::MAX);
        assert_eq!(max_tokens(&huge), u64::MAX);
        let budget = ModelSettings::new().with_thinking_budget(1024);
        assert_eq!(max_tokens(&budget), 1024 + DEFAULT_MAX_TOKENS);
        // An explicit bound wins, whatever the budget.
        assert_eq!(max_tokens(&budget.with_max_output_tokens(100)), 100);
    }
}
