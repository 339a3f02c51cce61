//! The wire-format seam: what differs between the APIs a transport can
//! speak ([`Api`]), chosen in one place. The client asks this file for the
//! path, the headers, the request body and the non-streamed decoder;
//! `stream.rs` picks the streamed decoder. Each API's encoder and decoders
//! live in their own module (`decode/` and `request.rs` for chat
//! completions, `anthropic/`, `responses/`) and produce the same
//! [`Completion`] and [`Fragment`](super::Fragment)s, so nothing above the
//! protocol knows which API answered.

use super::decode::{self, Completion};
use super::error::DecodeError;
use super::request::Request;
use super::{ChatTransport, anthropic, responses};
use crate::Api;

/// The path after the API base that chats go to.
pub(crate) fn path(api: Api) -> &'static str {
    match api {
        Api::ChatCompletions => "/chat/completions",
        Api::AnthropicMessages => "/messages",
        Api::OpenAiResponses => "/responses",
    }
}

/// The headers that carry the API key (and the API's version, where it
/// asks for one), as `(name, value)` pairs.
pub(crate) fn auth_headers(api: Api, key: Option<&str>) -> Vec<(&'static str, String)> {
    match api {
        Api::AnthropicMessages => anthropic::headers(key),
        Api::ChatCompletions | Api::OpenAiResponses => key
            .map(|k| ("Authorization", format!("Bearer {k}")))
            .into_iter()
            .collect(),
    }
}

/// Serialize `req` into `buf` (cleared first) in its transport's format;
/// `include_usage` comes from the client's
/// [`HttpConfig`](super::HttpConfig).
pub(crate) fn encode(req: &Request<'_>, buf: &mut Vec<u8>, include_usage: bool) {
    match req.transport.api() {
        Api::ChatCompletions => req.write_to(buf, include_usage),
        Api::AnthropicMessages => anthropic::write_body(req, buf),
        Api::OpenAiResponses => responses::write_body(req, buf),
    }
}

/// Fill in where the provider data of a decoded answer came from: the
/// decoders do not know the endpoint, and the model that signs is the one
/// the transport asked for (a server may name a dated alias instead), so
/// [`ProviderData::is_for`](crate::ProviderData::is_for) matches the next
/// request to the same transport.
pub(crate) fn stamp(transport: &ChatTransport, completion: &mut Completion) {
    if let Some(pd) = &mut completion.message.provider_data {
        if pd.endpoint.is_empty() {
            pd.endpoint = transport.base_or_default().to_string();
        }
        if pd.model.is_empty() {
            pd.model = transport.model().unwrap_or_default().to_string();
        }
    }
}

/// Decode a non-streamed response body of `api`.
pub(crate) fn parse_response(
    api: Api,
    body: &[u8],
    split_think: bool,
) -> Result<Completion, DecodeError> {
    match api {
        Api::ChatCompletions => decode::parse_response(body, split_think),
        Api::AnthropicMessages => anthropic::parse_response(body, split_think),
        Api::OpenAiResponses => responses::parse_response(body, split_think),
    }
}
