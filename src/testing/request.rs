//! [`RecordedRequest`]: what the fake server saw.

use serde_json::Value;

use super::view;
use crate::Api;

/// One request received by a [`FakeServer`](super::FakeServer), any path,
/// kept for assertions.
///
/// # Examples
///
/// ```
/// use pikuri::testing::RecordedRequest;
/// use serde_json::json;
///
/// let body = json!({
///     "model": "m",
///     "stream": true,
///     "messages": [{"role": "user", "content": "hi"}],
///     "tools": [{"type": "function", "function": {"name": "read_file"}}],
/// });
/// let req = RecordedRequest {
///     method: "POST".into(),
///     path: "/v1/chat/completions".into(),
///     headers: vec![("authorization".into(), "Bearer k".into())],
///     raw_body: body.to_string(),
///     body: Some(body),
/// };
/// assert_eq!(req.header("Authorization"), Some("Bearer k"));
/// assert_eq!(req.messages()[0]["content"], "hi");
/// assert!(req.is_stream());
/// assert_eq!(req.tool_names(), ["read_file"]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target: path and query, e.g. `/props?model=m`.
    pub path: String,
    /// Headers in arrival order, names lowercased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `None` if empty or not JSON.
    pub body: Option<Value>,
    /// The body as text (invalid UTF-8 replaced).
    pub raw_body: String,
}

impl RecordedRequest {
    /// The first header named `name` (matched case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `messages` array of a chat or Anthropic request, the `input`
    /// items of a Responses request, the `contents` of a Gemini request,
    /// as sent (empty if there is none). For
    /// the same view whatever the API, see
    /// [`conversation`](RecordedRequest::conversation).
    pub fn messages(&self) -> Vec<Value> {
        let field = match self.api() {
            Some(Api::OpenAiResponses) => "input",
            Some(Api::Gemini) => "contents",
            _ => "messages",
        };
        self.body
            .as_ref()
            .and_then(|b| b.get(field))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether the body has `"stream": true` (or, on Gemini, whose
    /// body does not say it, the path is `…:streamGenerateContent`).
    pub fn is_stream(&self) -> bool {
        if self.api() == Some(Api::Gemini) {
            return self.route().ends_with(":streamGenerateContent");
        }
        self.body
            .as_ref()
            .and_then(|b| b.get("stream"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Whether the body has `"stream_options": {"include_usage": true}`
    /// (chat completions; the other APIs always stream their usage).
    pub fn includes_usage(&self) -> bool {
        self.body
            .as_ref()
            .and_then(|b| b.pointer("/stream_options/include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The names of the tools offered in `tools`, in order: `function.name`
    /// of each (chat completions), or `name` (Anthropic Messages, Responses).
    pub fn tool_names(&self) -> Vec<String> {
        self.body.as_ref().map(view::tool_names).unwrap_or_default()
    }

    /// The API of a model request, from its path: `POST …/chat/completions`,
    /// `…/messages` (Anthropic Messages), `…/responses` (OpenAI
    /// Responses) or `…/models/{model}:generateContent` and
    /// `…:streamGenerateContent` (Gemini); `None` for any other request
    /// (probes, `count_tokens`).
    ///
    /// ```
    /// use pikuri::Api;
    /// use pikuri::testing::RecordedRequest;
    /// let req = |method: &str, path: &str| RecordedRequest {
    ///     method: method.into(),
    ///     path: path.into(),
    ///     headers: Vec::new(),
    ///     body: None,
    ///     raw_body: String::new(),
    /// };
    /// assert_eq!(req("POST", "/v1/messages").api(), Some(Api::AnthropicMessages));
    /// assert_eq!(req("POST", "/v1/responses").api(), Some(Api::OpenAiResponses));
    /// assert_eq!(req("POST", "/v1/chat/completions").api(), Some(Api::ChatCompletions));
    /// assert_eq!(req("POST", "/v1beta/models/g:generateContent").api(), Some(Api::Gemini));
    /// assert_eq!(req("POST", "/v1/messages/count_tokens").api(), None);
    /// assert_eq!(req("GET", "/v1/messages").api(), None);
    /// ```
    pub fn api(&self) -> Option<Api> {
        if self.method != "POST" {
            return None;
        }
        let route = self.route();
        if route.ends_with("/chat/completions") {
            Some(Api::ChatCompletions)
        } else if route.ends_with("/messages") {
            Some(Api::AnthropicMessages)
        } else if route.ends_with("/responses") {
            Some(Api::OpenAiResponses)
        } else if route.ends_with(":generateContent") || route.ends_with(":streamGenerateContent") {
            Some(Api::Gemini)
        } else {
            None
        }
    }

    /// The conversation sent, in chat-completions shape whatever the
    /// [`api`](RecordedRequest::api), so one assertion serves all three:
    /// a `system` message first for a top-level system prompt (Anthropic
    /// `system`, Responses `instructions`); assistant messages with
    /// `content` (`null` if none), `reasoning_content` (thinking blocks,
    /// reasoning summaries) and `tool_calls` (`tool_use` blocks,
    /// `function_call` items, arguments as JSON text); one `tool` message
    /// per tool result (`tool_result` block, `function_call_output` item)
    /// with its text. Text parts are joined; other parts (images) are left
    /// out: read [`messages`](RecordedRequest::messages) for those. Chat
    /// completions requests give their `messages` unchanged.
    ///
    /// ```
    /// use pikuri::testing::RecordedRequest;
    /// use serde_json::json;
    /// let body = json!({
    ///     "model": "m", "max_tokens": 64, "system": "Be brief.",
    ///     "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    ///     "tools": [{"name": "calc", "input_schema": {"type": "object"}}],
    /// });
    /// let req = RecordedRequest {
    ///     method: "POST".into(),
    ///     path: "/v1/messages".into(),
    ///     headers: Vec::new(),
    ///     raw_body: body.to_string(),
    ///     body: Some(body),
    /// };
    /// assert_eq!(req.conversation(), [
    ///     json!({"role": "system", "content": "Be brief."}),
    ///     json!({"role": "user", "content": "hi"}),
    /// ]);
    /// assert_eq!(req.system().as_deref(), Some("Be brief."));
    /// assert_eq!(req.tool_names(), ["calc"]);
    /// ```
    pub fn conversation(&self) -> Vec<Value> {
        match (&self.body, self.api()) {
            (Some(body), Some(api)) => view::conversation(api, body),
            (Some(body), None) => view::conversation(Api::ChatCompletions, body),
            (None, _) => Vec::new(),
        }
    }

    /// The system prompt: the `system` messages of the
    /// [`conversation`](RecordedRequest::conversation), joined by a blank
    /// line; `None` if there is none.
    pub fn system(&self) -> Option<String> {
        let parts: Vec<String> = self
            .conversation()
            .iter()
            .filter(|m| m["role"] == "system")
            .filter_map(|m| m["content"].as_str().map(str::to_string))
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// The path without the query.
    pub(super) fn route(&self) -> &str {
        self.path.split('?').next().unwrap_or("")
    }

    /// Whether this is a model request of any API (see
    /// [`api`](RecordedRequest::api)).
    pub(super) fn is_chat(&self) -> bool {
        self.api().is_some()
    }
}
