//! [`Reply`]: one scripted answer to a chat-completions request.
//!
//! A `Reply` only describes *what* to send. How it becomes JSON or SSE lives in
//! `render.rs`, and how it is written to the socket (delays, cuts, hangs) in
//! `conn.rs`.

use std::time::Duration;

use serde_json::Value;

/// A scripted answer to one `POST …/chat/completions` request, queued with
/// [`FakeServer::push`](super::FakeServer::push).
///
/// A `Reply` is a builder: pick a constructor, then chain modifiers. The same
/// completion is sent as a `chat.completion` JSON object or as a stream of
/// `chat.completion.chunk` SSE events, whichever the request asked for
/// (`"stream": true`). See the [module docs](super#streamed-replies) for the
/// exact chunk sequence.
///
/// Modifiers that do not apply to a reply's kind are ignored: `with_text` on a
/// [`status`](Reply::status) reply, `cut_after` on a non-streamed request, and
/// so on.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use pikuri::testing::Reply;
/// use serde_json::json;
///
/// let plain = Reply::text("Hello!").with_usage(12, 3);
/// let call = Reply::tool_call("get_weather", json!({"city": "Oslo"}))
///     .with_text("Let me check.")
///     .with_id("call_weather");
/// let flaky = Reply::status(429, "slow down").with_retry_after(1);
/// let slow = Reply::text("...").with_chunk_delay(Duration::from_millis(5)).cut_after(3);
/// assert!(format!("{plain:?} {call:?} {flaky:?} {slow:?}").contains("get_weather"));
/// ```
#[derive(Clone, Debug)]
pub struct Reply {
    pub(super) kind: Kind,
    pub(super) delivery: Delivery,
}

/// What a reply sends.
#[derive(Clone, Debug)]
pub(super) enum Kind {
    /// A normal completion, as JSON or as SSE (boxed: the other kinds are
    /// small).
    Completion(Box<Completion>),
    /// An HTTP error with an OpenAI-style error body.
    Status { code: u16, message: String },
    /// Read the request, then never answer.
    Hang,
    /// These bytes, verbatim, as a `text/event-stream` body.
    RawSse(String),
    /// Any status, content type and body.
    RawBody {
        status: u16,
        content_type: String,
        body: String,
    },
}

/// The assistant message of a completion reply.
#[derive(Clone, Debug, Default)]
pub(super) struct Completion {
    pub(super) content: Option<String>,
    pub(super) reasoning: Option<String>,
    /// `None` means `reasoning_content` (llama.cpp, DeepSeek).
    pub(super) reasoning_field: Option<String>,
    pub(super) calls: Vec<CallSpec>,
    pub(super) usage: Option<(u64, u64)>,
    pub(super) cached: Option<u64>,
    /// Prompt tokens written to the cache (Anthropic's
    /// `cache_creation_input_tokens`).
    pub(super) cache_creation: Option<u64>,
    /// The thinking block's `signature` (Anthropic) or the reasoning item's
    /// `encrypted_content` (Responses); `None`: a fake deterministic one.
    pub(super) signature: Option<String>,
    /// Anthropic `redacted_thinking` data (a Responses reasoning item with
    /// no summary).
    pub(super) redacted: Option<String>,
    pub(super) finish_reason: Option<String>,
    pub(super) model: Option<String>,
    /// Searches of the API's own tool search, `(query, found tool names)`,
    /// rendered before the text (Anthropic and Responses only).
    pub(super) searches: Vec<(String, Vec<String>)>,
}

/// One scripted tool call. `id: None` gets `call_<n>` when served.
#[derive(Clone, Debug)]
pub(super) struct CallSpec {
    pub(super) id: Option<String>,
    pub(super) name: String,
    pub(super) arguments: String,
}

/// How a reply is delivered: timing, faults, extra headers.
#[derive(Clone, Debug)]
pub(super) struct Delivery {
    pub(super) headers: Vec<(String, String)>,
    pub(super) retry_after: Option<u64>,
    pub(super) delay: Duration,
    pub(super) chunk_delay: Duration,
    pub(super) chunk_chars: usize,
    pub(super) cut_after: Option<usize>,
    pub(super) malformed_after: Option<usize>,
    pub(super) hang_after: Option<usize>,
    pub(super) garbage: bool,
    /// After this many data chunks, the API's mid-stream error event with
    /// this message, then the end of the stream.
    pub(super) error_after: Option<(usize, String)>,
    pub(super) times: usize,
}

impl Default for Delivery {
    fn default() -> Delivery {
        Delivery {
            headers: Vec::new(),
            retry_after: None,
            delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            chunk_chars: DEFAULT_CHUNK_CHARS,
            cut_after: None,
            malformed_after: None,
            hang_after: None,
            garbage: false,
            error_after: None,
            times: 1,
        }
    }
}

/// Characters per content, reasoning or argument piece when streaming.
pub(super) const DEFAULT_CHUNK_CHARS: usize = 4;

impl Reply {
    fn new(kind: Kind) -> Reply {
        Reply {
            kind,
            delivery: Delivery::default(),
        }
    }

    fn completion(c: Completion) -> Reply {
        Reply::new(Kind::Completion(Box::new(c)))
    }

    /// A plain text answer (`finish_reason: "stop"`).
    pub fn text(content: impl Into<String>) -> Reply {
        Reply::completion(Completion {
            content: Some(content.into()),
            ..Completion::default()
        })
    }

    /// One tool call with `arguments` serialized as compact JSON
    /// (`finish_reason: "tool_calls"`). Its id is `call_<n>` (`n` counts the
    /// server's auto-named calls from 1) unless set with
    /// [`with_id`](Reply::with_id).
    pub fn tool_call(name: &str, arguments: Value) -> Reply {
        Reply::tool_calls(vec![(name, arguments)])
    }

    /// Several tool calls in one response, in order (parallel tool calling).
    pub fn tool_calls(calls: Vec<(&str, Value)>) -> Reply {
        Reply::completion(Completion {
            calls: calls
                .into_iter()
                .map(|(name, args)| CallSpec {
                    id: None,
                    name: name.to_string(),
                    arguments: args.to_string(),
                })
                .collect(),
            ..Completion::default()
        })
    }

    /// One tool call whose `arguments` string is sent verbatim, so it may be
    /// invalid or truncated JSON, as weak models produce.
    pub fn raw_tool_call(name: &str, raw_arguments: &str) -> Reply {
        Reply::completion(Completion {
            calls: vec![CallSpec {
                id: None,
                name: name.to_string(),
                arguments: raw_arguments.to_string(),
            }],
            ..Completion::default()
        })
    }

    /// An HTTP error `code` with an OpenAI-style body
    /// `{"error":{"message":…,"type":…,"code":code}}`, where `type` follows
    /// the status (`invalid_request_error`, `authentication_error`,
    /// `rate_limit_error`, `server_error`, …). Sent the same way to streamed
    /// and non-streamed requests, as real servers do.
    pub fn status(code: u16, message: &str) -> Reply {
        Reply::new(Kind::Status {
            code,
            message: message.to_string(),
        })
    }

    /// Read the request, then never answer. The socket stays open until the
    /// client closes it or the server is dropped. Use it to test read
    /// timeouts and cancellation.
    pub fn hang() -> Reply {
        Reply::new(Kind::Hang)
    }

    /// A `200 text/event-stream` response whose body is `body`, verbatim.
    /// With [`with_chunk_delay`](Reply::with_chunk_delay) the body is sent one
    /// event (up to each blank line) at a time.
    pub fn raw_sse(body: impl Into<String>) -> Reply {
        Reply::new(Kind::RawSse(body.into()))
    }

    /// A response with any status, `Content-Type` and body.
    pub fn raw_body(status: u16, content_type: &str, body: impl Into<String>) -> Reply {
        Reply::new(Kind::RawBody {
            status,
            content_type: content_type.to_string(),
            body: body.into(),
        })
    }

    fn map_completion(mut self, f: impl FnOnce(&mut Completion)) -> Reply {
        if let Kind::Completion(c) = &mut self.kind {
            f(c);
        }
        self
    }

    /// Set the text content (alongside tool calls, or replacing a
    /// [`text`](Reply::text) reply's content).
    #[must_use]
    pub fn with_text(self, content: &str) -> Reply {
        self.map_completion(|c| c.content = Some(content.to_string()))
    }

    /// Add reasoning text, sent as `reasoning_content` (llama.cpp, DeepSeek,
    /// vLLM) before the content.
    #[must_use]
    pub fn with_reasoning(self, reasoning: &str) -> Reply {
        self.map_completion(|c| c.reasoning = Some(reasoning.to_string()))
    }

    /// Send the reasoning under another field name, e.g. `"reasoning"` as
    /// OpenRouter and Ollama do.
    #[must_use]
    pub fn with_reasoning_field(self, field: &str) -> Reply {
        self.map_completion(|c| c.reasoning_field = Some(field.to_string()))
    }

    /// Report this usage instead of the default (see the
    /// [module docs](super#usage)).
    #[must_use]
    pub fn with_usage(self, prompt_tokens: u64, completion_tokens: u64) -> Reply {
        self.map_completion(|c| c.usage = Some((prompt_tokens, completion_tokens)))
    }

    /// Report `usage.prompt_tokens_details.cached_tokens` (part of
    /// `prompt_tokens`, OpenAI-style).
    #[must_use]
    pub fn with_cached_tokens(self, cached: u64) -> Reply {
        self.map_completion(|c| c.cached = Some(cached))
    }

    /// Report prompt tokens written to the provider's cache: Anthropic's
    /// `cache_creation_input_tokens`, Responses'
    /// `input_tokens_details.cache_write_tokens`, chat completions'
    /// `prompt_tokens_details.cache_write_tokens`. Like
    /// [`with_cached_tokens`](Reply::with_cached_tokens), part of the prompt
    /// tokens set with [`with_usage`](Reply::with_usage).
    #[must_use]
    pub fn with_cache_creation_tokens(self, written: u64) -> Reply {
        self.map_completion(|c| c.cache_creation = Some(written))
    }

    /// The signature of the reasoning: the Anthropic thinking block's
    /// `signature`, the Responses reasoning item's `encrypted_content`
    /// (ignored on chat completions). Without it the server makes up a
    /// deterministic one from the reasoning text (`fakesig-…`).
    #[must_use]
    pub fn with_signature(self, signature: &str) -> Reply {
        self.map_completion(|c| c.signature = Some(signature.to_string()))
    }

    /// Add encrypted reasoning with no readable text, before any
    /// [`with_reasoning`](Reply::with_reasoning) text: an Anthropic
    /// `redacted_thinking` block with this `data` (streamed whole in its
    /// `content_block_start`), a Responses `reasoning` item with an empty
    /// `summary` and this `encrypted_content`; nothing on chat completions.
    #[must_use]
    pub fn with_redacted_thinking(self, data: &str) -> Reply {
        self.map_completion(|c| c.redacted = Some(data.to_string()))
    }

    /// Begin the answer with a search of the API's own tool search for
    /// `query` that finds the tools named `found` (chain it for several
    /// searches): on Anthropic Messages a `server_tool_use` block
    /// (`tool_search_tool_bm25`) and its `tool_search_tool_result` (one
    /// `tool_reference` per name); on OpenAI Responses a
    /// `tool_search_call` item and its `tool_search_output` (one `function`
    /// per name, with its name only); nothing on chat completions and
    /// Gemini, which have no such search. See
    /// [`pikuri::tool_search`](crate::tool_search).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::testing::Reply;
    /// use serde_json::json;
    ///
    /// let found = Reply::tool_call("get_weather", json!({"city": "Oslo"}))
    ///     .with_tool_search("weather", &["get_weather"]);
    /// assert!(format!("{found:?}").contains("get_weather"));
    /// ```
    #[must_use]
    pub fn with_tool_search(self, query: &str, found: &[&str]) -> Reply {
        self.map_completion(|c| {
            c.searches.push((
                query.to_string(),
                found.iter().map(|n| (*n).to_string()).collect(),
            ));
        })
    }

    /// Override the `finish_reason` (default `"stop"`, or `"tool_calls"` when
    /// the reply has tool calls), e.g. `"length"`. On the other APIs it is
    /// mapped: Anthropic `stop_reason` `end_turn`, `tool_use`, `max_tokens`
    /// (`length`), `refusal` (`content_filter`), any other string as is
    /// (`pause_turn`); Responses `status` `completed` (`stop`,
    /// `tool_calls`), or `incomplete` with `incomplete_details.reason`
    /// `max_output_tokens` (`length`), `content_filter`, or any other
    /// string as is.
    #[must_use]
    pub fn with_finish_reason(self, reason: &str) -> Reply {
        self.map_completion(|c| c.finish_reason = Some(reason.to_string()))
    }

    /// The `model` the response names (default: the server's
    /// [model id](super::FakeServer::set_model_id)).
    #[must_use]
    pub fn with_model(self, model: &str) -> Reply {
        self.map_completion(|c| c.model = Some(model.to_string()))
    }

    /// Give the first tool call that has no id yet this id; chain it to name
    /// several calls in order.
    #[must_use]
    pub fn with_id(self, call_id: &str) -> Reply {
        self.map_completion(|c| {
            if let Some(call) = c.calls.iter_mut().find(|call| call.id.is_none()) {
                call.id = Some(call_id.to_string());
            }
        })
    }

    /// Send a `Retry-After: secs` header (meant for
    /// [`status`](Reply::status) replies such as 429 and 503).
    #[must_use]
    pub fn with_retry_after(mut self, secs: u64) -> Reply {
        self.delivery.retry_after = Some(secs);
        self
    }

    /// Sleep this long after every SSE event (streamed replies only).
    #[must_use]
    pub fn with_chunk_delay(mut self, d: Duration) -> Reply {
        self.delivery.chunk_delay = d;
        self
    }

    /// Characters per content, reasoning and argument piece when streaming
    /// (default 4; split on `char` boundaries; 0 sends each text in one piece).
    #[must_use]
    pub fn with_chunk_chars(mut self, n: usize) -> Reply {
        self.delivery.chunk_chars = n;
        self
    }

    /// Streamed replies: close the connection after `chunks` data chunks,
    /// with no finish chunk (unless it was among them), no `[DONE]` and no
    /// end of the chunked body. The role chunk counts; [`with_garbage`]
    /// noise does not.
    ///
    /// [`with_garbage`]: Reply::with_garbage
    #[must_use]
    pub fn cut_after(mut self, chunks: usize) -> Reply {
        self.delivery.cut_after = Some(chunks);
        self
    }

    /// Streamed replies: interleave noise a tolerant client must skip: SSE
    /// comments (`: …`), `event: ping` with a `{"type":"ping"}` payload,
    /// `id:` and `retry:` lines, blank keep-alive lines, unknown fields in
    /// every chunk (`system_fingerprint`, `x_fake_extra`, `logprobs`), and a
    /// chunk of an unknown shape without `choices`.
    #[must_use]
    pub fn with_garbage(mut self) -> Reply {
        self.delivery.garbage = true;
        self
    }

    /// Streamed replies: after `chunks` data chunks send one
    /// `data: {not json` event, then carry on normally.
    #[must_use]
    pub fn malformed_after(mut self, chunks: usize) -> Reply {
        self.delivery.malformed_after = Some(chunks);
        self
    }

    /// Streamed replies: after `chunks` data chunks send the API's
    /// mid-stream error with `message`, then end the stream normally (no
    /// `[DONE]`, `message_stop` or `response.completed`): chat completions
    /// `data: {"error":{…}}`, Anthropic `event: error`, Responses
    /// `event: error` then `event: response.failed`.
    #[must_use]
    pub fn error_after(mut self, chunks: usize, message: &str) -> Reply {
        self.delivery.error_after = Some((chunks, message.to_string()));
        self
    }

    /// Streamed replies: send `chunks` data chunks, then go silent with the
    /// socket open (like [`hang`](Reply::hang), mid-stream).
    #[must_use]
    pub fn hang_after(mut self, chunks: usize) -> Reply {
        self.delivery.hang_after = Some(chunks);
        self
    }

    /// Wait this long before sending the response headers (any reply).
    #[must_use]
    pub fn with_delay(mut self, d: Duration) -> Reply {
        self.delivery.delay = d;
        self
    }

    /// Add a response header (any reply).
    #[must_use]
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.delivery
            .headers
            .push((name.to_string(), value.to_string()));
        self
    }

    /// Serve this reply `times` times in a row: [`push`] enqueues that many
    /// copies (`repeat(0)` enqueues none). Auto-named call ids still differ
    /// per copy.
    ///
    /// [`push`]: super::FakeServer::push
    #[must_use]
    pub fn repeat(mut self, times: usize) -> Reply {
        self.delivery.times = times;
        self
    }

    /// A one-line description for failure messages.
    pub(super) fn describe(&self) -> String {
        fn short(s: &str) -> String {
            const MAX: usize = 40;
            if s.chars().count() > MAX {
                format!("{:?}…", s.chars().take(MAX).collect::<String>())
            } else {
                format!("{s:?}")
            }
        }
        match &self.kind {
            Kind::Completion(c) if c.calls.is_empty() => {
                format!("text({})", short(c.content.as_deref().unwrap_or("")))
            }
            Kind::Completion(c) => {
                let names: Vec<&str> = c.calls.iter().map(|call| call.name.as_str()).collect();
                format!("tool_calls({})", names.join(", "))
            }
            Kind::Status { code, message } => format!("status({code}, {})", short(message)),
            Kind::Hang => "hang()".to_string(),
            Kind::RawSse(body) => format!("raw_sse({})", short(body)),
            Kind::RawBody { status, body, .. } => format!("raw_body({status}, {})", short(body)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn with_id_names_calls_in_order() {
        let r = Reply::tool_calls(vec![("a", json!({})), ("b", json!({}))])
            .with_id("x")
            .with_id("y");
        let Kind::Completion(c) = r.kind else {
            panic!("not a completion")
        };
        assert_eq!(c.calls[0].id.as_deref(), Some("x"));
        assert_eq!(c.calls[1].id.as_deref(), Some("y"));
    }

    #[test]
    fn describe_is_short() {
        assert_eq!(Reply::text("hi").describe(), "text(\"hi\")");
        assert_eq!(
            Reply::tool_call("f", json!({"a": 1})).describe(),
            "tool_calls(f)"
        );
        assert_eq!(
            Reply::status(503, "busy").describe(),
            "status(503, \"busy\")"
        );
        assert!(Reply::text("x".repeat(100)).describe().contains('…'));
    }

    #[test]
    fn completion_modifiers_ignore_other_kinds() {
        let r = Reply::status(500, "boom")
            .with_text("ignored")
            .with_usage(1, 2);
        assert!(matches!(r.kind, Kind::Status { code: 500, .. }));
    }
}
