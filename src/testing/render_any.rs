//! One scripted reply in the API the request came on: the dispatch to
//! `render` (chat completions), `render_anthropic`, `render_responses` and
//! `render_gemini`.

use serde_json::Value;

use super::render::{self, Frame, Meta, StreamOptions};
use super::reply::Completion;
use super::{render_anthropic, render_gemini, render_responses};
use crate::Api;

/// The error body of `api` for an HTTP status: Anthropic's
/// `{"type":"error","error":{…}}`, Gemini's `{"error":{code, message,
/// status}}`, else OpenAI's (Responses uses it too).
pub(super) fn error_body(api: Api, code: u16, message: &str) -> Value {
    match api {
        Api::AnthropicMessages => render_anthropic::error_json(code, message),
        Api::Gemini => render_gemini::error_json(code, message),
        _ => render::error_json(code, message),
    }
}

/// The non-streamed body of `c` in `api`.
pub(super) fn body(api: Api, c: &Completion, meta: &Meta) -> Value {
    match api {
        Api::AnthropicMessages => render_anthropic::message_json(c, meta),
        Api::OpenAiResponses => render_responses::response_json(c, meta),
        Api::Gemini => render_gemini::response_json(c, meta),
        _ => render::completion_json(c, meta),
    }
}

/// The SSE frames of `c` in `api`, and the API's mid-stream error event
/// carrying `error` (a [`Reply::error_after`](super::Reply::error_after)
/// placed after `after` events).
pub(super) fn stream(
    api: Api,
    c: &Completion,
    meta: &Meta,
    opts: StreamOptions,
    error: Option<(usize, &str)>,
) -> (Vec<Frame>, Option<String>) {
    match api {
        Api::AnthropicMessages => (
            render_anthropic::stream_frames(c, meta, opts),
            error.map(|(_, m)| render_anthropic::stream_error(m)),
        ),
        Api::OpenAiResponses => (
            render_responses::stream_frames(c, meta, opts),
            error.map(|(n, m)| render_responses::stream_error(meta, m, n)),
        ),
        Api::Gemini => (
            render_gemini::stream_frames(c, meta, opts),
            error.map(|(_, m)| render_gemini::stream_error(m)),
        ),
        _ => (
            render::stream_frames(c, meta, opts),
            error.map(|(_, m)| render::stream_error(m)),
        ),
    }
}
