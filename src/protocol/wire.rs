//! The wire-format seam: what differs between the APIs a transport can
//! speak ([`Api`]), chosen in one place. The client asks this file for the
//! path, the headers, the request body and the non-streamed decoder;
//! `stream.rs` picks the streamed decoder. Each API's encoder and decoders
//! live in their own module (`decode/` and `request.rs` for chat
//! completions, `anthropic/`, `responses/`, `gemini/`) and produce the same
//! [`Completion`] and [`Fragment`](super::Fragment)s, so nothing above the
//! protocol knows which API answered.

use std::borrow::Cow;
use std::time::Duration;

use super::ChatTransport;
#[cfg(feature = "anthropic")]
use super::anthropic;
use super::decode::{self, Completion};
use super::error::DecodeError;
#[cfg(feature = "gemini")]
use super::gemini;
use super::request::Request;
#[cfg(feature = "responses")]
use super::responses;
use crate::{Api, Error};

/// Refuse `api` when this build leaves its wire format out (its Cargo
/// feature is off): [`Error::InvalidInput`] naming the feature, before
/// anything is encoded or sent. The client calls it first, so the other
/// functions of this file only ever see an API that is built.
pub(crate) fn check_built(api: Api) -> crate::Result<()> {
    let feature = match api {
        Api::ChatCompletions => return Ok(()),
        Api::AnthropicMessages if cfg!(feature = "anthropic") => return Ok(()),
        Api::OpenAiResponses if cfg!(feature = "responses") => return Ok(()),
        Api::Gemini if cfg!(feature = "gemini") => return Ok(()),
        Api::AnthropicMessages => "anthropic",
        Api::OpenAiResponses => "responses",
        Api::Gemini => "gemini",
    };
    Err(Error::InvalidInput(format!(
        "the transport speaks {api}, which this build of pikuri leaves out: enable the Cargo feature `{feature}`"
    )))
}

/// An API whose feature is off reached a dispatch point: `check_built`
/// refuses it before that, so this is a bug in the crate.
#[cfg(not(all(feature = "anthropic", feature = "responses", feature = "gemini")))]
pub(crate) fn not_built(api: Api) -> ! {
    unreachable!("{api} is not built, and check_built refuses it first")
}

/// The path after the API base that chats go to; Gemini's names the
/// model and whether the answer is streamed.
pub(crate) fn path(transport: &ChatTransport, stream: bool) -> Cow<'static, str> {
    match transport.api() {
        Api::ChatCompletions => "/chat/completions".into(),
        Api::AnthropicMessages => "/messages".into(),
        Api::OpenAiResponses => "/responses".into(),
        Api::Gemini => gemini_path(transport.model().unwrap_or_default(), stream).into(),
    }
}

/// `/models/{model}:generateContent`, or `:streamGenerateContent?alt=sse`
/// (a model that names its collection, `tunedModels/x`, keeps it). Not
/// behind the feature: a 404 hint names it in any build.
fn gemini_path(model: &str, stream: bool) -> String {
    let method = if stream {
        "streamGenerateContent?alt=sse"
    } else {
        "generateContent"
    };
    if model.contains('/') {
        format!("/{model}:{method}")
    } else {
        format!("/models/{model}:{method}")
    }
}

/// The server's own retry hint in an error body, where the API puts one
/// there (Gemini's `google.rpc.RetryInfo` `retryDelay`); the client
/// prefers a `Retry-After` header.
pub(crate) fn retry_hint(api: Api, body: &[u8]) -> Option<Duration> {
    match api {
        #[cfg(feature = "gemini")]
        Api::Gemini => gemini::retry_delay(body),
        _ => {
            let _ = body;
            None
        }
    }
}

/// The headers that carry the API key (and the API's version, where it
/// asks for one), as `(name, value)` pairs.
pub(crate) fn auth_headers(api: Api, key: Option<&str>) -> Vec<(&'static str, String)> {
    match api {
        #[cfg(feature = "anthropic")]
        Api::AnthropicMessages => anthropic::headers(key),
        #[cfg(not(feature = "anthropic"))]
        Api::AnthropicMessages => not_built(api),
        #[cfg(feature = "gemini")]
        Api::Gemini => gemini::headers(key),
        #[cfg(not(feature = "gemini"))]
        Api::Gemini => not_built(api),
        Api::ChatCompletions | Api::OpenAiResponses => key
            .map(|k| ("Authorization", format!("Bearer {k}")))
            .into_iter()
            .collect(),
    }
}

/// Serialize `req` into `buf` (cleared first) in its transport's format;
/// `include_usage` comes from the client's
/// [`HttpConfig`](super::HttpConfig).
///
/// # Errors
///
/// [`Error::InvalidInput`](crate::Error::InvalidInput) when the request
/// has a model setting the API has no field for, or a temperature or
/// `top_p` that is not finite (see [`ModelSettings`](crate::ModelSettings)):
/// nothing is sent.
pub(crate) fn encode(
    req: &Request<'_>,
    buf: &mut Vec<u8>,
    include_usage: bool,
) -> crate::Result<()> {
    let api = req.transport.api();
    if let Some(why) = req.settings.problem(api) {
        return Err(crate::Error::InvalidInput(why));
    }
    if req.transport.cached_content.is_some() && api != Api::Gemini {
        return Err(crate::Error::InvalidInput(format!(
            "the transport names a context cache, which only Gemini has, and speaks {api}: \
             drop it with `with_cached_content(None)`"
        )));
    }
    match api {
        Api::ChatCompletions => req.write_to(buf, include_usage),
        #[cfg(feature = "anthropic")]
        Api::AnthropicMessages => anthropic::write_body(req, buf),
        #[cfg(feature = "responses")]
        Api::OpenAiResponses => responses::write_body(req, buf),
        #[cfg(feature = "gemini")]
        Api::Gemini => gemini::write_body(req, buf)?,
        #[cfg(not(all(feature = "anthropic", feature = "responses", feature = "gemini")))]
        #[allow(unreachable_patterns, reason = "some of the APIs are built")]
        api => not_built(api),
    }
    Ok(())
}

/// Decode a non-streamed response body of the transport's API, its API
/// key redacted from the answer ([`Completion::redacted`]).
pub(crate) fn parse_response(
    transport: &ChatTransport,
    body: &[u8],
    split_think: bool,
) -> Result<Completion, DecodeError> {
    parse_body(transport.api(), body, split_think).map(|c| c.redacted(transport.api_key()))
}

/// Decode a non-streamed response body of `api`.
pub(crate) fn parse_body(
    api: Api,
    body: &[u8],
    split_think: bool,
) -> Result<Completion, DecodeError> {
    match api {
        Api::ChatCompletions => decode::parse_response(body, split_think),
        #[cfg(feature = "anthropic")]
        Api::AnthropicMessages => anthropic::parse_response(body, split_think),
        #[cfg(feature = "responses")]
        Api::OpenAiResponses => responses::parse_response(body, split_think),
        #[cfg(feature = "gemini")]
        Api::Gemini => gemini::parse_response(body, split_think),
        #[cfg(not(all(feature = "anthropic", feature = "responses", feature = "gemini")))]
        #[allow(unreachable_patterns, reason = "some of the APIs are built")]
        api => not_built(api),
    }
}

/// Name the request's API base and model in the answer's
/// [`ProviderData`](crate::ProviderData): decoders do not know where the
/// request went, so they leave `endpoint` and `model` empty and the client
/// fills them in here, for every API, before the message reaches the
/// history. The model is the one requested (not the one the server named):
/// the next request's transport is compared with it.
pub(crate) fn stamp_origin(mut completion: Completion, transport: &ChatTransport) -> Completion {
    if let Some(data) = &mut completion.message.provider_data {
        transport.base_or_default().clone_into(&mut data.endpoint);
        transport
            .model()
            .unwrap_or_default()
            .clone_into(&mut data.model);
    }
    completion
}
