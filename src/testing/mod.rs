//! A scripted, OpenAI-compatible HTTP server for tests: [`FakeServer`].
//!
//! Tests of pikuri, and of programs built on it, run whole agent loops with no
//! model and no network: start a server on a free loopback port, queue the
//! model's answers as [`Reply`] values, point a transport at it, then assert
//! on what the agent sent ([`RecordedRequest`]).
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::TcpStream;
//! use pikuri::testing::{FakeServer, Reply};
//! use serde_json::{Value, json};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("Hello from the fake!"));
//!
//! // Any HTTP client works; pikuri's own goes through `server.transport()`.
//! let body = json!({
//!     "model": "fake-model",
//!     "messages": [{"role": "user", "content": "hi"}],
//! })
//! .to_string();
//! let mut conn = TcpStream::connect(server.local_addr())?;
//! write!(
//!     conn,
//!     "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n\
//!      Content-Type: application/json\r\nContent-Length: {}\r\n\
//!      Connection: close\r\n\r\n{body}",
//!     body.len()
//! )?;
//! let mut response = String::new();
//! conn.read_to_string(&mut response)?;
//! assert!(response.starts_with("HTTP/1.1 200 OK"));
//! let (_head, json_body) = response.split_once("\r\n\r\n").unwrap();
//! let completion: Value = serde_json::from_str(json_body)?;
//! assert_eq!(completion["choices"][0]["message"]["content"], "Hello from the fake!");
//!
//! assert_eq!(server.chat_requests()[0].messages()[0]["content"], "hi");
//! server.assert_all_used();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What it serves
//!
//! | Request | Answer |
//! |---|---|
//! | `POST …/chat/completions` | the next scripted [`Reply`] (FIFO); JSON, or SSE if the body has `"stream": true` |
//! | `GET /props`, `GET /props?model=…` | llama.cpp shape: `{"default_generation_settings":{"n_ctx":N,…},"total_slots":1,"model_alias":…}`; 404 if the context size is `None` |
//! | `GET /v1/models` | `{"object":"list","data":[{"id":…,"object":"model","owned_by":"fake","meta":{"n_ctx_train":N,"n_ctx":N}}]}` |
//! | `GET /health` | `{"status":"ok"}` |
//! | anything else | 404 with an OpenAI error body |
//!
//! Every request is recorded, whatever its path. The HTTP side is HTTP/1.1
//! with keep-alive (many requests per connection), `Content-Length` and
//! chunked request bodies, `Expect: 100-continue` and `Connection: close`.
//! Each connection is served on its own thread.
//!
//! A chat request arriving when no reply is left is answered 500 with the
//! message `FakeServer: no scripted reply left for request #N` (N counts chat
//! requests from 1, so it is `chat_requests()[N - 1]`), logged at `error` and
//! counted by [`FakeServer::unexpected_requests`].
//!
//! # Streamed replies
//!
//! A completion reply answers a streaming request with `200 text/event-stream`
//! in chunked transfer encoding, flushed after every event, in this order:
//!
//! 1. a role chunk: `"delta":{"role":"assistant","content":""}`;
//! 2. reasoning pieces (`reasoning_content`, or the field set with
//!    [`Reply::with_reasoning_field`]);
//! 3. content pieces;
//! 4. per tool call, an id/name chunk
//!    (`"tool_calls":[{"index":i,"id":…,"type":"function","function":{"name":…,"arguments":""}}]`)
//!    then argument pieces (`"tool_calls":[{"index":i,"function":{"arguments":…}}]`);
//! 5. a finish chunk: `"delta":{}` and `finish_reason`;
//! 6. if the request had `"stream_options":{"include_usage":true}`, a usage
//!    chunk with `"choices":[]` and `usage` (and, as OpenAI does,
//!    `"usage":null` on every earlier chunk);
//! 7. `data: [DONE]`.
//!
//! Pieces are [`Reply::with_chunk_chars`] characters long (default 4), split
//! on `char` boundaries. Every chunk carries `id`, `object`
//! (`chat.completion.chunk`), `created` and `model`. The fault modifiers
//! ([`cut_after`](Reply::cut_after), [`malformed_after`](Reply::malformed_after),
//! [`hang_after`](Reply::hang_after), [`with_garbage`](Reply::with_garbage))
//! count the data chunks above, the role chunk included.
//!
//! A non-streaming request gets a `chat.completion` object whose
//! `choices[0].message` has `role`, `content` (`null` when there are only
//! tool calls), the reasoning field if any and `tool_calls` if any.
//!
//! # Usage
//!
//! Non-streamed responses always carry `usage`; streamed ones when asked to.
//! Unless set with [`Reply::with_usage`], usage is `prompt_tokens = 10` and
//! `completion_tokens = content chars / 4 + 1`, and `total_tokens` is their
//! sum. [`Reply::with_cached_tokens`] adds
//! `prompt_tokens_details.cached_tokens`.
//!
//! # Strict mode
//!
//! On by default ([`FakeServer::set_strict`]). A chat request is answered 400,
//! its message starting `FakeServer (strict mode) rejected request #N:`, and
//! the scripted reply is **not** consumed, when:
//!
//! - the body is not a JSON object, `model` is missing, or `messages` is
//!   missing or empty;
//! - a message's `role` is not `system`, `user`, `assistant` or `tool`;
//! - an assistant message's `tool_calls` is empty (`[]`: omit it instead, as
//!   OpenAI requires), or a call lacks a string `id` or `function.name`, or
//!   its `function.arguments` is not a string;
//! - an assistant message's tool calls are not *each* answered by a tool
//!   message before the next non-tool message (or the end of the list);
//! - a tool message's `tool_call_id` answers no call of the assistant message
//!   just before its block, or answers one twice.
//!
//! That way a test proves the agent always sends a history a real server
//! accepts. Rejections are logged at `warn` and listed by
//! [`FakeServer::rejections`].
//!
//! # Log levels
//!
//! `debug`: each request line and the listening address. `warn`: strict
//! rejections, unreadable requests, unused replies at drop. `error`: chat
//! requests with no reply left, panicked server threads.

mod conn;
mod http;
mod render;
mod reply;
mod request;
mod server;
mod strict;
#[cfg(test)]
mod tests;

pub use self::reply::Reply;
pub use self::request::RecordedRequest;
pub use self::server::FakeServer;
