//! The conversation model: [`Message`], [`Role`], [`ToolCall`], [`Usage`],
//! [`Image`], [`ProviderData`], the [`Api`] a transport speaks and the
//! [`FinishReason`] an answer ended with.
//!
//! These are plain values. Their mapping to each wire format lives privately
//! in `protocol` (one encoder and decoder per [`Api`]); the serde impls
//! here are for the history format ([`History`](crate::History)), which
//! stores a little more than the wire needs (usage, the model that wrote a
//! message, what a provider asked to get back).

use serde::de::{Deserializer, EnumAccess, VariantAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::serde_macros::{json_enum, json_struct};

/// Why the model's answer ended: the one vocabulary every wire format's
/// finish or stop reason is mapped to (`stop`, `end_turn`, `completed`,
/// `length`, `max_tokens`, `incomplete`, `refusal`, `content_filter`, ...).
///
/// A [`Complete`](FinishReason::Complete) answer is the only one the model
/// meant to end where it did; [`Length`](FinishReason::Length) and
/// [`Filtered`](FinishReason::Filtered) answers are cut, and a run never
/// reports them as complete.
///
/// # Examples
///
/// ```
/// use pikuri::FinishReason;
/// assert_eq!(FinishReason::Length.as_str(), "length");
/// assert!(FinishReason::Complete.is_complete());
/// assert!(!FinishReason::Length.is_complete());
/// assert_eq!(serde_json::to_string(&FinishReason::ServerCut)?, r#""server_cut""#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FinishReason {
    /// The model ended its answer (`stop`, `end_turn`, `stop_sequence`,
    /// Responses `completed`).
    Complete,
    /// The model stopped to call tools.
    ToolCalls,
    /// Cut by the maximum output tokens (or the context window).
    Length,
    /// Refused by the model or withheld by a content filter.
    Filtered,
    /// Ended by the server for another reason, or for none it named.
    ServerCut,
}

json_enum! {
    Serialize, Deserialize for FinishReason {
        Complete = "complete",
        ToolCalls = "tool_calls",
        Length = "length",
        Filtered = "filtered",
        ServerCut = "server_cut",
    }

    /// The stable snake_case name, as in JSON, the journal and traces.
    pub fn as_str;
}

impl FinishReason {
    /// True for an answer the model meant to end where it did
    /// ([`Complete`](FinishReason::Complete) or
    /// [`ToolCalls`](FinishReason::ToolCalls)).
    pub fn is_complete(self) -> bool {
        matches!(self, FinishReason::Complete | FinishReason::ToolCalls)
    }
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The wire format a [`ChatTransport`](crate::ChatTransport) speaks.
///
/// Every API carries the same conversation ([`Message`]s, tool calls and
/// results, usage); the loop, events, listeners, tools and history do not
/// depend on it. What only one API has (Anthropic's thinking signatures,
/// OpenAI's encrypted reasoning items) travels in [`ProviderData`].
///
/// Chat completions is always built; the others are Cargo features
/// (`anthropic`, `responses`, `gemini`, all on by default). Every variant exists in
/// every build, since histories and journals name them; a request on an
/// API whose feature is off fails at once with
/// [`Error::InvalidInput`](crate::Error::InvalidInput)
/// ([`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)).
///
/// # Examples
///
/// ```
/// use pikuri::{Api, ChatTransport};
/// let t = ChatTransport::new("claude-sonnet-4-5").with_api(Api::AnthropicMessages);
/// assert_eq!(t.api(), Api::AnthropicMessages);
/// assert_eq!(ChatTransport::new("gpt-5").api(), Api::ChatCompletions);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Api {
    /// OpenAI's chat completions, `POST {base}/chat/completions`: OpenAI,
    /// llama.cpp, Ollama, vLLM, OpenRouter, Gemini's compatible endpoint
    /// and most servers.
    #[default]
    ChatCompletions,
    /// Anthropic's Messages API, `POST {base}/messages`.
    AnthropicMessages,
    /// OpenAI's Responses API, `POST {base}/responses`.
    OpenAiResponses,
    /// Google's Gemini API, `POST {base}/models/{model}:generateContent`
    /// (`:streamGenerateContent?alt=sse` streamed).
    Gemini,
}

// `open_ai_responses`, not `as_str`'s `openai_responses`: serde's
// snake_case of `OpenAiResponses`, which histories already hold.
json_enum! {
    Serialize, Deserialize for Api {
        ChatCompletions = "chat_completions",
        AnthropicMessages = "anthropic_messages",
        OpenAiResponses = "open_ai_responses",
        Gemini = "gemini",
    }
}

impl Api {
    /// A short stable name: `chat_completions`, `anthropic_messages`,
    /// `openai_responses` or `gemini` (the history format writes the same
    /// names but `open_ai_responses`, serde's snake case of the variant).
    pub fn as_str(self) -> &'static str {
        match self {
            Api::ChatCompletions => "chat_completions",
            Api::AnthropicMessages => "anthropic_messages",
            Api::OpenAiResponses => "openai_responses",
            Api::Gemini => "gemini",
        }
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a provider returned that only it can read, kept in the history so it
/// can be sent back, verbatim, to the same API, endpoint and model, and
/// dropped for any other (a switch of model or API never sends one
/// provider's signatures to another).
///
/// Which items an API keeps:
/// - [`Api::AnthropicMessages`]: the `thinking` and `redacted_thinking`
///   content blocks, with their signatures, and the API's own tool search
///   (`server_tool_use`, `tool_search_tool_result`), in the order they came;
/// - [`Api::OpenAiResponses`]: the `reasoning` output items (with
///   `encrypted_content`) and the tool search's `tool_search_call` and
///   `tool_search_output` items, in order;
/// - [`Api::Gemini`]: the `thoughtSignature` of the answer's text, as
///   `{"thoughtSignature": ..}` (a call's signature, and the id the
///   server gave it, are in [`ToolCall::provider_data`]);
/// - [`Api::ChatCompletions`]: provider fields of the message, such as
///   OpenRouter's `reasoning_details`, as one object
///   (per-call fields such as Gemini's thought signatures are in
///   [`ToolCall::provider_data`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderData {
    /// The API that returned the items.
    pub api: Api,
    /// The API base they came from.
    pub endpoint: String,
    /// The model that wrote them.
    pub model: String,
    /// The items, verbatim.
    pub items: Vec<Value>,
}

json_struct! { Serialize, Deserialize for ProviderData { api, endpoint, model, items } }

impl ProviderData {
    /// Items from `api` at `endpoint`, written by `model`.
    pub fn new(
        api: Api,
        endpoint: impl Into<String>,
        model: impl Into<String>,
        items: Vec<Value>,
    ) -> ProviderData {
        ProviderData {
            api,
            endpoint: endpoint.into(),
            model: model.into(),
            items,
        }
    }

    /// Whether these items may be sent to `model` over `api` at `endpoint`:
    /// only to the very API, endpoint and model that issued them.
    pub fn is_for(&self, api: Api, endpoint: &str, model: &str) -> bool {
        self.api == api && self.endpoint == endpoint && self.model == model
    }
}

/// An image in a user message or a tool result.
///
/// Made with [`Image::from_bytes`], [`Image::from_file`] or
/// [`Image::from_url`] (bounded by [`Image::MAX_BYTES`]); sent with
/// [`Message::user_with_images`] and
/// [`Agent::run_loop_message`](crate::Agent::run_loop_message), or by a
/// tool through [`ToolContext::attach_image`](crate::ToolContext::attach_image).
/// Kept in the history and its export.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Image {
    /// The media type, e.g. `image/png` (for a URL, as far as known).
    pub media_type: String,
    /// Where the image is.
    pub source: ImageSource,
}

json_struct! { Serialize, Deserialize for Image { media_type, source } }

/// Where an [`Image`]'s bytes are.
///
/// In JSON, `{"base64": "..."}` or `{"url": "..."}` (serde's externally
/// tagged form).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageSource {
    /// The bytes, base64-encoded (standard alphabet, padded).
    Base64(String),
    /// A URL the provider fetches itself.
    Url(String),
}

// By hand (the macros have no variant with data), as serde's derive writes
// an externally tagged enum: the same calls, so the same JSON both ways.
impl Serialize for ImageSource {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ImageSource::Base64(data) => {
                serializer.serialize_newtype_variant("ImageSource", 0, "base64", data)
            }
            ImageSource::Url(url) => {
                serializer.serialize_newtype_variant("ImageSource", 1, "url", url)
            }
        }
    }
}

impl<'de> Deserialize<'de> for ImageSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ImageSource, D::Error> {
        /// The variant's name.
        #[derive(Clone, Copy)]
        enum Kind {
            Base64,
            Url,
        }
        json_enum! { Deserialize for Kind { Base64 = "base64", Url = "url" } }

        struct Source;
        impl<'de> Visitor<'de> for Source {
            type Value = ImageSource;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("enum ImageSource")
            }
            fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<ImageSource, A::Error> {
                let (kind, value) = data.variant::<Kind>()?;
                match kind {
                    Kind::Base64 => value.newtype_variant().map(ImageSource::Base64),
                    Kind::Url => value.newtype_variant().map(ImageSource::Url),
                }
            }
        }
        deserializer.deserialize_enum("ImageSource", &["base64", "url"], Source)
    }
}

/// Who wrote a [`Message`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions: the system prompt, or context an extension injected.
    System,
    /// The person (or host) talking to the agent.
    User,
    /// The model.
    Assistant,
    /// A tool's result, bound to a [`ToolCall`] by id.
    Tool,
}

json_enum! {
    Serialize, Deserialize for Role {
        System = "system",
        User = "user",
        Assistant = "assistant",
        Tool = "tool",
    }

    /// The wire name: `"system"`, `"user"`, `"assistant"` or `"tool"`.
    pub fn as_str;
}

/// One tool call requested by the model in an assistant message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The id the model gave the call; the tool message answering it carries
    /// the same id.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model sent them (a JSON text, possibly invalid
    /// or truncated). In an agent's history, once the call is answered,
    /// arguments that are not one JSON object every server accepts
    /// (invalid or cut-off JSON, nesting deeper than 128, a lone surrogate
    /// escape such as `\ud800`) are replaced by `{}`: the tool result
    /// already told the model what was wrong and quoted what it sent, and
    /// the history stays sendable to any server. [`Event::ToolCall`](crate::Event::ToolCall)
    /// carries what was sent.
    pub arguments: String,
    /// Provider fields of this call to send back with it, verbatim (Gemini's
    /// `extra_content` with its `thought_signature`), under the same rule
    /// as the message's [`ProviderData`]: only to the API, endpoint and
    /// model named there.
    pub provider_data: Option<Value>,
}

json_struct! { Serialize, Deserialize for ToolCall { id, name, arguments, provider_data [opt] } }

impl ToolCall {
    /// A tool call with the given id, name and raw JSON arguments.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            provider_data: None,
        }
    }
}

/// Token usage reported for one assistant message.
///
/// `input`, `cached` and `cache_creation` are exclusive slices of the prompt
/// (pikuri's convention): their sum is the context in use for that request.
/// OpenAI-style `prompt_tokens` (which include cached tokens) are split on
/// the way in. `None` means the server did not report the figure; treat it as
/// zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Usage {
    /// Prompt tokens processed anew (not served from a cache).
    pub input: Option<u64>,
    /// Completion tokens.
    pub output: Option<u64>,
    /// Prompt tokens served from the provider's cache.
    pub cached: Option<u64>,
    /// Prompt tokens written to a cache (Anthropic-style providers).
    pub cache_creation: Option<u64>,
    /// Reasoning tokens, where the server reports them.
    pub thinking: Option<u64>,
}

json_struct! {
    Serialize, Deserialize for Usage {
        input [opt],
        output [opt],
        cached [opt],
        cache_creation [opt],
        thinking [opt],
    }
}

impl Usage {
    /// No figures reported (every field `None`); set the ones known with the
    /// `with_*` methods.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Usage;
    /// let u = Usage::new().with_input(100).with_cached(20).with_output(7);
    /// assert_eq!(u.context_used(), 120);
    /// assert_eq!(u.thinking, None);
    /// ```
    pub const fn new() -> Usage {
        Usage {
            input: None,
            output: None,
            cached: None,
            cache_creation: None,
            thinking: None,
        }
    }

    /// All five figures at once (the decoder's and the tests' shorthand).
    pub(crate) const fn from_parts(
        input: Option<u64>,
        output: Option<u64>,
        cached: Option<u64>,
        cache_creation: Option<u64>,
        thinking: Option<u64>,
    ) -> Usage {
        Usage {
            input,
            output,
            cached,
            cache_creation,
            thinking,
        }
    }

    /// A copy with `input` set.
    #[must_use]
    pub const fn with_input(mut self, tokens: u64) -> Usage {
        self.input = Some(tokens);
        self
    }

    /// A copy with `output` set.
    #[must_use]
    pub const fn with_output(mut self, tokens: u64) -> Usage {
        self.output = Some(tokens);
        self
    }

    /// A copy with `cached` set.
    #[must_use]
    pub const fn with_cached(mut self, tokens: u64) -> Usage {
        self.cached = Some(tokens);
        self
    }

    /// A copy with `cache_creation` set.
    #[must_use]
    pub const fn with_cache_creation(mut self, tokens: u64) -> Usage {
        self.cache_creation = Some(tokens);
        self
    }

    /// A copy with `thinking` set.
    #[must_use]
    pub const fn with_thinking(mut self, tokens: u64) -> Usage {
        self.thinking = Some(tokens);
        self
    }

    /// The context in use for the request: `input + cached + cache_creation`,
    /// saturating at `u64::MAX` (the figures come from a server or a saved
    /// history, and may be anything).
    ///
    /// ```
    /// use pikuri::Usage;
    /// let u = Usage::new().with_input(u64::MAX).with_cached(1);
    /// assert_eq!(u.context_used(), u64::MAX);
    /// ```
    pub fn context_used(&self) -> u64 {
        self.input
            .unwrap_or(0)
            .saturating_add(self.cached.unwrap_or(0))
            .saturating_add(self.cache_creation.unwrap_or(0))
    }

    /// Every token billed: `input + cached + cache_creation + output`
    /// (saturating). `thinking` is not added again: servers count reasoning
    /// tokens inside `output` (OpenAI's `completion_tokens`).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::Usage;
    /// let u = Usage::new().with_input(100).with_cached(20).with_output(7).with_thinking(5);
    /// assert_eq!(u.total(), 127);
    /// ```
    pub fn total(&self) -> u64 {
        [self.input, self.cached, self.cache_creation, self.output]
            .into_iter()
            .flatten()
            .fold(0u64, u64::saturating_add)
    }
}

/// Field by field, saturating; a figure stays `None` only when both sides
/// lack it.
///
/// # Examples
///
/// ```
/// use pikuri::Usage;
/// let mut turn = Usage::new();
/// turn += Usage::new().with_input(10).with_output(3);
/// turn += Usage::new().with_input(u64::MAX).with_thinking(2);
/// assert_eq!(turn.input, Some(u64::MAX));
/// assert_eq!(turn.output, Some(3));
/// assert_eq!(turn.thinking, Some(2));
/// assert_eq!(turn.cached, None);
/// ```
impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, b) => a.or(b),
            }
        }
        Usage {
            input: sum(self.input, other.input),
            output: sum(self.output, other.output),
            cached: sum(self.cached, other.cached),
            cache_creation: sum(self.cache_creation, other.cache_creation),
            thinking: sum(self.thinking, other.thinking),
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

/// One message of a conversation.
///
/// # Examples
///
/// ```
/// use pikuri::{Message, Role};
/// let m = Message::user("What is 2+2?");
/// assert_eq!(m.role, Role::User);
/// assert_eq!(m.content, "What is 2+2?");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The text. Empty for an assistant message that only calls tools.
    pub content: String,
    /// Reasoning text the model produced alongside (assistant only).
    pub reasoning: Option<String>,
    /// Tool calls requested (assistant only).
    pub tool_calls: Vec<ToolCall>,
    /// The call this message answers (tool only).
    pub tool_call_id: Option<String>,
    /// Token usage of the request that produced it (assistant only).
    pub usage: Option<Usage>,
    /// The model that wrote it (assistant only), as the server named it or, if
    /// it did not, as the transport requested it.
    pub model: Option<String>,
    /// Images (user and tool messages), sent after the text.
    pub images: Vec<Image>,
    /// What the provider asked to get back (assistant only): see
    /// [`ProviderData`].
    pub provider_data: Option<ProviderData>,
}

json_struct! {
    Serialize, Deserialize for Message {
        role,
        content [default],
        reasoning [opt],
        tool_calls [default, skip_if = Vec::is_empty],
        tool_call_id [opt],
        usage [opt],
        model [opt],
        images [default, skip_if = Vec::is_empty],
        provider_data [opt],
    }
}

impl Message {
    fn with_role(role: Role, content: String) -> Message {
        Message {
            role,
            content,
            reasoning: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            usage: None,
            model: None,
            images: Vec::new(),
            provider_data: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::with_role(Role::System, content.into())
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::with_role(Role::User, content.into())
    }

    /// A user message with images, sent after the text (send it with
    /// [`Agent::run_loop_message`](crate::Agent::run_loop_message)).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Image, Message};
    /// let photo = Image::from_url("https://example.com/cat.png")?;
    /// let m = Message::user_with_images("What is this?", vec![photo]);
    /// assert_eq!(m.images.len(), 1);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn user_with_images(content: impl Into<String>, images: Vec<Image>) -> Message {
        let mut m = Message::with_role(Role::User, content.into());
        m.images = images;
        m
    }

    /// An assistant message with text and no tool calls.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::with_role(Role::Assistant, content.into())
    }

    /// An assistant message that calls tools.
    pub fn assistant_tool_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Message {
        let mut m = Message::with_role(Role::Assistant, content.into());
        m.tool_calls = calls;
        m
    }

    /// A tool message answering the call `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Message {
        let mut m = Message::with_role(Role::Tool, content.into());
        m.tool_call_id = Some(tool_call_id.into());
        m
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{
        Api, FinishReason, Image, ImageSource, Message, ProviderData, Role, ToolCall, Usage,
    };

    fn forms<T: serde::Serialize>(values: &[T]) -> Vec<String> {
        values
            .iter()
            .map(|v| serde_json::to_string(v).unwrap())
            .collect()
    }

    #[test]
    fn the_unit_enums_are_their_snake_case_names() {
        use FinishReason::{Complete, Filtered, Length, ServerCut, ToolCalls};
        let finishes = [Complete, ToolCalls, Length, Filtered, ServerCut];
        let apis = [
            Api::ChatCompletions,
            Api::AnthropicMessages,
            Api::OpenAiResponses,
            Api::Gemini,
        ];
        let roles = [Role::System, Role::User, Role::Assistant, Role::Tool];
        for (written, f) in forms(&finishes).iter().zip(finishes) {
            assert_eq!(*written, format!("\"{}\"", f.as_str()));
            assert_eq!(serde_json::from_str::<FinishReason>(written).unwrap(), f);
        }
        // Not `as_str`: the derive's snake_case of `OpenAiResponses` split
        // "Ai", and histories hold it so.
        let api_forms = [
            r#""chat_completions""#,
            r#""anthropic_messages""#,
            r#""open_ai_responses""#,
            r#""gemini""#,
        ];
        assert_eq!(forms(&apis), api_forms);
        for (written, a) in api_forms.iter().zip(apis) {
            assert_eq!(serde_json::from_str::<Api>(written).unwrap(), a);
        }
        for (written, r) in forms(&roles).iter().zip(roles) {
            assert_eq!(*written, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<Role>(written).unwrap(), r);
        }
        let e = serde_json::from_str::<Role>("\"wizard\"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown variant `wizard`, expected one of `system`, `user`, `assistant`, `tool` at line 1 column 8"
        );
    }

    /// Every field set, then none of the optional ones: the history format.
    #[test]
    fn a_message_writes_and_reads_its_pinned_json() {
        let mut call = ToolCall::new("c1", "clock", "{\"tz\":\"UTC\"}");
        call.provider_data = Some(json!({"extra_content": {"sig": "s"}}));
        let full = Message {
            role: Role::Assistant,
            content: "hi".into(),
            reasoning: Some("r".into()),
            tool_calls: vec![call, ToolCall::new("c2", "n", "")],
            tool_call_id: Some("t".into()),
            usage: Some(Usage::new().with_input(1).with_cached(2)),
            model: Some("m".into()),
            images: vec![
                Image {
                    media_type: "image/png".into(),
                    source: ImageSource::Base64("AAAA".into()),
                },
                Image {
                    media_type: "image/jpeg".into(),
                    source: ImageSource::Url("https://x/y.jpg".into()),
                },
            ],
            provider_data: Some(ProviderData::new(
                Api::AnthropicMessages,
                "http://h",
                "m",
                vec![json!({"type": "thinking"})],
            )),
        };
        let plain = Message::tool("c1", "");
        let written = forms(&[full.clone(), plain.clone()]);
        let pinned: &[&str] = &[
            r#"{"role":"assistant","content":"hi","reasoning":"r","tool_calls":[{"id":"c1","name":"clock","arguments":"{\"tz\":\"UTC\"}","provider_data":{"extra_content":{"sig":"s"}}},{"id":"c2","name":"n","arguments":""}],"tool_call_id":"t","usage":{"input":1,"cached":2},"model":"m","images":[{"media_type":"image/png","source":{"base64":"AAAA"}},{"media_type":"image/jpeg","source":{"url":"https://x/y.jpg"}}],"provider_data":{"api":"anthropic_messages","endpoint":"http://h","model":"m","items":[{"type":"thinking"}]}}"#,
            r#"{"role":"tool","content":"","tool_call_id":"c1"}"#,
        ];
        assert_eq!(written, pinned, "written:\n{}", written.join("\n"));
        assert_eq!(serde_json::from_str::<Message>(&written[0]).unwrap(), full);
        assert_eq!(serde_json::from_str::<Message>(&written[1]).unwrap(), plain);
        let value = serde_json::to_value(&full).unwrap();
        assert_eq!(serde_json::from_value::<Message>(value).unwrap(), full);
    }

    #[test]
    fn a_message_reads_as_the_derive_read_it() {
        let m: Message =
            serde_json::from_str(r#"{"x":{"y":[1]},"role":"assistant","usage":{}}"#).unwrap();
        assert_eq!(
            (m.role, m.content.as_str(), m.usage),
            (Role::Assistant, "", Some(Usage::new()))
        );
        let inputs = [
            r#"{"content":"hi"}"#,
            r#"{"role":"user","role":"user"}"#,
            r#"{"role":"user","images":[{"media_type":"image/png","source":{"file":"a"}}]}"#,
            r#"{"role":"user","images":[{"media_type":"image/png","source":"url"}]}"#,
            r#"{"role":"user","images":[{"media_type":"image/png","source":{"url":"a","base64":"b"}}]}"#,
            r#"{"role":"user","images":[{"source":{"url":"a"}}]}"#,
            r#"{"role":"assistant","tool_calls":[{"id":"c","name":"n"}]}"#,
            r#"{"role":"assistant","provider_data":{"api":"grpc","endpoint":"e","model":"m","items":[]}}"#,
            r#"{"role":"user","usage":{"input":1.5}}"#,
            r"[]",
        ];
        let errors: Vec<String> = inputs
            .iter()
            .map(|s| serde_json::from_str::<Message>(s).unwrap_err().to_string())
            .collect();
        let expected: &[&str] = &[
            r"missing field `role` at line 1 column 16",
            r"duplicate field `role` at line 1 column 21",
            r"unknown variant `file`, expected `base64` or `url` at line 1 column 67",
            r"invalid type: unit variant, expected newtype variant at line 1 column 66",
            r"expected value at line 1 column 70",
            r"missing field `media_type` at line 1 column 47",
            r"missing field `arguments` at line 1 column 55",
            r"unknown variant `grpc`, expected one of `chat_completions`, `anthropic_messages`, `open_ai_responses`, `gemini` at line 1 column 49",
            r"invalid type: floating point `1.5`, expected u64 at line 1 column 35",
            // The derive also read a struct from an array of its fields'
            // values; the crate's impls (`serde_macros`) read objects only.
            "invalid type: sequence, expected struct Message at line 1 column 2",
        ];
        assert_eq!(errors, expected, "errors:\n{}", errors.join("\n"));
    }
}
