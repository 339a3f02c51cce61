//! [`RecordedRequest`]: what the fake server saw.

use serde_json::Value;

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

    /// The `messages` array of a chat request (empty if there is none).
    pub fn messages(&self) -> Vec<Value> {
        self.body
            .as_ref()
            .and_then(|b| b.get("messages"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether the body has `"stream": true`.
    pub fn is_stream(&self) -> bool {
        self.body
            .as_ref()
            .and_then(|b| b.get("stream"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// Whether the body has `"stream_options": {"include_usage": true}`.
    pub fn includes_usage(&self) -> bool {
        self.body
            .as_ref()
            .and_then(|b| b.pointer("/stream_options/include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// The names of the tools offered in `tools` (`function.name` of each),
    /// in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.body
            .as_ref()
            .and_then(|b| b.get("tools"))
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The path without the query.
    pub(super) fn route(&self) -> &str {
        self.path.split('?').next().unwrap_or("")
    }

    /// Whether this is a `POST …/chat/completions`.
    pub(super) fn is_chat(&self) -> bool {
        self.method == "POST" && self.route().ends_with("/chat/completions")
    }
}
