//! Helpers shared by the protocol's unit tests.

use serde_json::{Map, Value, json};

use super::request::{Request, ToolSpecs};
use crate::{ChatTransport, Message};

/// The tools of the tool-search tests: `calc`, and `get_weather`, deferred
/// (`defer_loading`) or not.
#[cfg_attr(
    not(any(feature = "anthropic", feature = "responses")),
    allow(dead_code, reason = "for the APIs with their own tool search")
)]
pub(crate) fn search_tools(deferred: bool) -> ToolSpecs {
    ToolSpecs::from_values(&[
        json!({"name": "calc", "description": "adds"}),
        json!({"name": "get_weather", "description": "weather", "defer_loading": deferred}),
    ])
}

/// The body `write_body` (an API's encoder) writes for a request of
/// `msgs` and `tools` on `transport`, not streamed, as JSON.
#[cfg_attr(
    not(any(feature = "anthropic", feature = "responses")),
    allow(dead_code, reason = "for the APIs with their own tool search")
)]
pub(crate) fn encoded(
    transport: &ChatTransport,
    msgs: &[Message],
    tools: &ToolSpecs,
    write_body: fn(&Request<'_>, &mut Vec<u8>),
) -> Value {
    let extra = Map::new();
    let req = Request {
        stream: false,
        ..Request::for_test(transport, msgs, tools, &extra)
    };
    let mut buf = Vec::new();
    write_body(&req, &mut buf);
    serde_json::from_slice(&buf).unwrap()
}
