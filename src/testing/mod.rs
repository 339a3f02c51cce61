//! A scripted HTTP server for tests that speaks OpenAI chat completions,
//! Anthropic Messages and OpenAI Responses: [`FakeServer`], and
//! record/replay of real sessions: [`Recorder`] and [`Cassette`].
//!
//! Needs the `testing` feature (on by default); a program that uses it
//! only in its own tests can enable it in `[dev-dependencies]`.
//!
//! Tests of pikuri, and of programs built on it, run whole agent loops with no
//! model and no network: start a server on a free loopback port, queue the
//! model's answers as [`Reply`] values, point a transport at it, then assert
//! on what the agent sent ([`RecordedRequest`]).
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::builtin;
//! use serde_json::json;
//!
//! // The "model": it asks for the calculator, then answers.
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("calculator", json!({"expression": "6*7"})));
//! server.push(Reply::text("6*7 = 42"));
//!
//! let mut agent = Agent::builder(server.transport())
//!     .system_prompt("You are a helpful assistant.")
//!     .add_tool(builtin::calculator())
//!     .build()?;
//! let outcome = agent.run_loop("What is 6*7?")?;
//! assert_eq!(outcome.answer.as_deref(), Some("6*7 = 42"));
//!
//! // What the agent sent: the question and the tool first, then the
//! // calculator's result, answering the scripted call.
//! let sent = server.chat_requests();
//! assert_eq!(sent.len(), 2);
//! assert_eq!(sent[0].messages()[1]["content"], "What is 6*7?");
//! assert_eq!(sent[0].tool_names(), ["calculator"]);
//! let result = sent[1].messages().last().cloned().unwrap();
//! assert_eq!(result["role"], "tool");
//! assert_eq!(result["content"], "42");
//! server.assert_all_used();
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # What it serves
//!
//! | Request | Answer |
//! |---|---|
//! | `POST …/chat/completions` | the next scripted [`Reply`] (FIFO), else the [`respond_with`](FakeServer::respond_with) function's reply; JSON, or SSE if the body has `"stream": true` |
//! | `POST …/messages` | the same, as an Anthropic Messages response (see [Other APIs](#other-apis)) |
//! | `POST …/responses` | the same, as an OpenAI Responses response (see [Other APIs](#other-apis)) |
//! | `POST …/models/{model}:generateContent`, `…:streamGenerateContent` | the same, as a Gemini response, SSE for the second (see [Gemini](#gemini)) |
//! | `GET /props`, `GET /props?model=…` | llama.cpp shape: `{"default_generation_settings":{"n_ctx":N,…},"total_slots":1,"model_alias":…}`; 404 if the context size is `None` |
//! | `GET /v1/models` | `{"object":"list","data":[{"id":…,"object":"model","owned_by":"fake","meta":{"n_ctx_train":N,"n_ctx":N}}]}` |
//! | `GET /health` | `{"status":"ok"}` |
//! | `POST …/messages/count_tokens` | Anthropic's shape: `{"input_tokens":N}`, N the body's characters / 4 + 1 |
//! | `POST …/cachedContents`; `GET`, `PATCH` (`ttl`), `DELETE …/cachedContents/{id}` | Gemini's context caches: a `CachedContent` (`name`, `model`, times, `usageMetadata.totalTokenCount`, N the cached fields' characters / 4 + 1); 403 `PERMISSION_DENIED` for one expired ([`FakeServer::expire_caches`]) or deleted, as for a Gemini request naming it (`cachedContent`), whose usage then reports the cache's tokens as `cachedContentTokenCount` |
//! | anything else | 404 with an OpenAI error body |
//!
//! Routes set with [`FakeServer::set_route`] come first, then a loaded
//! [`Cassette`] (see [Record and replay](#record-and-replay)), then the
//! table above.
//!
//! Every request is recorded, whatever its path. The HTTP side is HTTP/1.1
//! with keep-alive (many requests per connection), `Content-Length` and
//! chunked request bodies, `Expect: 100-continue` and `Connection: close`.
//! Each connection is served on its own thread.
//!
//! A "chat request" below is a model request of any of the three APIs
//! ([`RecordedRequest::api`] is `Some`): they share one queue of replies
//! and one count. A chat request arriving when no reply is left (and no
//! [`respond_with`](FakeServer::respond_with) function is set) is answered 500 with the
//! message `FakeServer: no scripted reply left for request #N` (N counts chat
//! requests from 1, so it is `chat_requests()[N - 1]`), logged at `error` and
//! counted by [`FakeServer::unexpected_requests`].
//!
//! # Any HTTP client
//!
//! The server speaks plain HTTP/1.1, so any client can drive it, here raw
//! TCP; `FakeServer::transport` is only the shortcut for pikuri's own.
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
//! # Other APIs
//!
//! The same [`Reply`] is rendered in the API of the request's path; a
//! transport reaches them with
//! `server.transport().with_api(Api::AnthropicMessages)` (or
//! `Api::OpenAiResponses`). Shapes follow the official SDKs' types, which
//! `tests/integration/sdk.rs` checks with the `openai` and `anthropic`
//! Python packages.
//!
//! | | Anthropic Messages (`…/messages`) | OpenAI Responses (`…/responses`) |
//! |---|---|---|
//! | JSON | a `message`: `content` blocks `thinking` (with `signature`), `text`, one `tool_use` per call (`input` the arguments object; a broken [`raw_tool_call`](Reply::raw_tool_call) text as a JSON string), `stop_reason`, `usage` | a `response`: `output` items `reasoning` (`summary`, `encrypted_content`), `message` (`output_text`), one `function_call` per call (`call_id` the call id), `status`, `usage` |
//! | SSE events | `message_start`, `ping`, per block `content_block_start`, `content_block_delta` (`thinking_delta` then `signature_delta`, `text_delta`, `input_json_delta`), `content_block_stop`; `message_delta` (`stop_reason`, usage), `message_stop` | each with `event:` and `sequence_number`: `response.created`, `response.in_progress`, per item `response.output_item.added`, its part and delta events (`response.reasoning_summary_text.delta`, `response.output_text.delta`, `response.function_call_arguments.delta`/`.done`), `response.output_item.done`; `response.completed` (`response.incomplete` for any reason but `stop` and `tool_calls`) |
//! | finish reason | `end_turn`, `tool_use`, `max_tokens` (`length`), `refusal` (`content_filter`), others as is (`pause_turn`) | `completed`; `incomplete` with `max_output_tokens` (`length`), `content_filter`, others as is |
//! | [`status`](Reply::status) | `{"type":"error","error":{"type":…,"message":…}}` (`overloaded_error` for 529) | the OpenAI error body |
//! | [`error_after`](Reply::error_after) | `event: error` (`overloaded_error`) | `event: error`, then `response.failed` |
//!
//! The signature and `encrypted_content` are [`Reply::with_signature`]'s,
//! else `fakesig-` and a hash of the reasoning.
//! [`Reply::with_redacted_thinking`] adds a `redacted_thinking` block (a
//! reasoning item without summary) before them.
//! [`Reply::with_tool_search`] adds the API's own tool search after the
//! reasoning, before the text: a `server_tool_use` block
//! (`tool_search_tool_bm25`, its `input` streamed as `input_json_delta`)
//! and its `tool_search_tool_result` (whole in its start); on Responses a
//! `tool_search_call` and a `tool_search_output` item (each found tool as
//! a `function` with its name), without deltas. Streams end without
//! `[DONE]`; the fault modifiers count every event before the last
//! (`ping` included), and a count past them lands before the last, as
//! before `[DONE]`. [`with_garbage`](Reply::with_garbage) adds comments and
//! unknown event types. [`RecordedRequest::conversation`] reads any API's
//! request as chat-completions messages.
//!
//! # Gemini
//!
//! `server.transport().with_api(Api::Gemini)` posts to
//! `…/models/{model}:generateContent` (`:streamGenerateContent?alt=sse`
//! streamed: the path, not the body, says it). The reply is a
//! `GenerateContentResponse`: one candidate whose `content.parts` are the
//! reasoning (`thought: true`), the text and one `functionCall` per call
//! (`args` the arguments object; an `id` only when the script named the
//! call with [`Reply::with_id`], as most Gemini models give none), the
//! `finishReason` (`STOP`, `MAX_TOKENS` for `length`, `SAFETY` for
//! `content_filter`, others as scripted, e.g. `RECITATION`), and
//! `usageMetadata` (`promptTokenCount` including `cachedContentTokenCount`;
//! with reasoning a quarter of the output as `thoughtsTokenCount`). The
//! thought signature ([`Reply::with_signature`], else a fake one of the
//! reasoning or the call) is on the first call, else on the text when
//! there is reasoning. `with_finish_reason("prompt_blocked")` answers with
//! no candidate and `promptFeedback.blockReason: "SAFETY"`. A stream is
//! chunks of the same shape, the last (with the finish reason and usage)
//! counted like an end event; [`Reply::status`] is `{"error": {"code",
//! "message", "status"}}` (`RESOURCE_EXHAUSTED`, `UNAVAILABLE`, …), and
//! [`error_after`](Reply::error_after) a chunk with a 503 `UNAVAILABLE`
//! error.
//!
//! Strict mode answers 400 when the body has a field Gemini does not
//! (`model`, `messages`, …), `contents` is missing or empty, a role is not
//! `user` or `model`, a content has no parts or a part has not exactly one
//! of `text`, `inlineData`, `fileData`, `functionCall`, `functionResponse`,
//! a model turn's calls are not answered in the next turn by as many
//! function responses of the same names (and ids, where the call had
//! one), a `generationConfig` field is unknown or out of range
//! (`temperature` 0 to 2, `topP` 0 to 1, an int32 `seed`, at most 5
//! `stopSequences`, a `thinkingLevel` of `minimal`, `low`, `medium` or
//! `high`), a response schema comes without `responseMimeType:
//! "application/json"`, or `allowedFunctionNames` names no declared
//! function.
//!
//! # Usage
//!
//! Non-streamed responses always carry `usage`; streamed ones when asked to
//! (always on Anthropic and Responses).
//! Unless set with [`Reply::with_usage`], usage is `prompt_tokens = 10` and
//! `completion_tokens = content chars / 4 + 1`, and `total_tokens` is their
//! sum. [`Reply::with_cached_tokens`] adds
//! `prompt_tokens_details.cached_tokens` and
//! [`Reply::with_cache_creation_tokens`]
//! `prompt_tokens_details.cache_write_tokens`, both part of the prompt
//! tokens. Anthropic reports them as `cache_read_input_tokens` and
//! `cache_creation_input_tokens`, with `input_tokens` the rest of the
//! prompt; Responses as `input_tokens_details.cached_tokens` and
//! `cache_write_tokens`, with `output_tokens_details.reasoning_tokens`.
//! [`FakeServer::set_prefix_cache`] simulates a provider's automatic
//! prompt cache: the cached tokens are then the bytes each request's
//! prompt (tools, system prompt, conversation) shares from its start with
//! the one before, / 4.
//!
//! # Strict mode
//!
//! On by default ([`FakeServer::set_strict`]). A chat-completions request is answered 400,
//! its message starting `FakeServer (strict mode) rejected request #N:`, and
//! the scripted reply is **not** consumed, when:
//!
//! - the body is not a JSON object, `model` is missing, or `messages` is
//!   missing or empty;
//! - a message's `role` is not `system`, `user`, `assistant` or `tool`;
//! - an assistant message's `tool_calls` is empty (`[]`: omit it instead, as
//!   OpenAI requires), or a call lacks a string `id` or `function.name`, or
//!   its `function.arguments` is not a string holding one JSON object that
//!   serde_json parses (so not invalid JSON, not a lone surrogate escape
//!   such as `\ud800`, not nested past 128 levels): what llama.cpp parses;
//! - an assistant message's tool calls are not *each* answered by a tool
//!   message before the next non-tool message (or the end of the list);
//! - a tool message's `tool_call_id` answers no call of the assistant message
//!   just before its block, or answers one twice.
//!
//! An Anthropic Messages request is answered 400 (with Anthropic's error
//! body) when `model` or a positive `max_tokens` is missing, `messages` is
//! empty, a role is not `user` or `assistant`, two messages in a row have
//! the same role, a `tool_use` block (id, name, object `input`, ids unique)
//! is not answered by a `tool_result` in the very next user message (the
//! results first in it, none for another call, none twice), a thinking
//! block comes back without its signature, or thinking is enabled and a
//! request that ends with tool results sends the assistant turn that made
//! the calls without its leading thinking block. It is also answered 400
//! for chat completions' `response_format` (Anthropic's own field is
//! `output_config.format`) and for an `output_config.format` that is not
//! `{"type": "json_schema", "schema": {..}}`. For the API's own tool
//! search: a tool's `defer_loading` not a boolean, a deferred tool without
//! a tool search tool (`tool_search_tool_bm25_*`, `_regex_*`) in
//! `tools`, a deferred search tool, or a search sent back without the
//! search tool, without a string `id` and object `input`, or without its
//! `tool_search_tool_result` in the same message (whose `content` must be
//! `tool_references` of `{type: tool_reference, tool_name}` or an error
//! with its `error_code`).
//!
//! A Responses request is answered 400 when `model` or `input` is missing,
//! a `function_call` lacks `call_id`, `name` or JSON-object `arguments`, a
//! `function_call_output` answers no earlier `function_call` (unless
//! `previous_response_id` is set) or answers one twice, or a call has no
//! output; for the API's own tool search, when `defer_loading` is not a
//! boolean or is on a tool other than a `function` or `namespace`, a
//! deferred tool or a search sent back comes without a
//! `{"type": "tool_search"}` tool, a `tool_search_call` has no
//! `arguments`, or a `tool_search_output` has no `tools` (each with a
//! `name`) or no search call before it.
//!
//! That way a test proves the agent always sends a history a real server
//! accepts. Rejections are logged at `warn` and listed by
//! [`FakeServer::rejections`].
//!
//! # Record and replay
//!
//! Scripted replies say what a test author *thinks* a server sends. A
//! cassette holds what a real one *did* send: record a session once against
//! llama.cpp (or any OpenAI-compatible server) with a [`Recorder`], commit
//! the [`Cassette`] file, and replay it in every test run with
//! [`FakeServer::from_cassette`]: no model, no network, byte-for-byte the
//! responses of the real server, streams included.
//!
//! 1. Start the real server, e.g.
//!    `llama-server -m model.gguf --jinja --port 8080`.
//! 2. Put a [`Recorder`] in front of it and run the agent through the proxy,
//!    with the configuration the test will use. Pin sampling so the answer is
//!    worth keeping (`request_field("temperature", json!(0))`).
//! 3. [`save`](Recorder::save) the cassette under `tests/fixtures/`, and
//!    write down how it was made (command, server build, model) in the test.
//! 4. In the test, build the *same* agent on
//!    `FakeServer::from_cassette(Cassette::load(path)?)`, run it, assert, and
//!    call [`assert_all_used`](FakeServer::assert_all_used).
//!
//! ```
//! use pikuri::{Agent, HttpConfig};
//! use pikuri::testing::{Cassette, FakeServer, Recorder, Reply};
//!
//! // Step 1: here a scripted upstream stands in for llama.cpp.
//! let real = FakeServer::start();
//! real.push(Reply::text("The capital of France is Paris."));
//!
//! // Step 2: record.
//! let recorder = Recorder::start(&real.base_url());
//! let mut agent = Agent::builder(recorder.transport_for("qwen3-8b"))
//!     .streaming(true)
//!     .build()?;
//! agent.run_loop("Capital of France?")?;
//! let json = recorder.cassette().to_json(); // step 3: `recorder.save(path)`
//!
//! // Step 4: replay, with the same configuration (the replaying server's
//! // transport names the recorded model).
//! let server = FakeServer::from_cassette(Cassette::parse(&json)?);
//! let mut agent = Agent::builder(server.transport()).streaming(true).build()?;
//! let out = agent.run_loop("Capital of France?")?;
//! assert_eq!(out.answer.as_deref(), Some("The capital of France is Paris."));
//! server.assert_all_used();
//!
//! // A request the recording never saw fails loudly, with a diff.
//! let server = FakeServer::from_cassette(Cassette::parse(&json)?);
//! let mut agent = Agent::builder(server.transport())
//!     .streaming(true)
//!     .http(HttpConfig::default().with_max_retries(0))
//!     .build()?;
//! let err = agent.run_loop("Capital of Spain?").unwrap_err();
//! assert!(err.to_string().contains(r#"-       "content": "Capital of France?""#));
//! assert!(err.to_string().contains(r#"+       "content": "Capital of Spain?""#));
//! assert_eq!(server.mismatches().len(), 1);
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! ## Matching
//!
//! A request is answered with the recorded response (status, `Content-Type`,
//! body; framed with `Content-Length`) of the first **unused** interaction
//! with the same method, the same target (path and query) and the same
//! **canonical body**: the JSON with object keys sorted at every level,
//! without the top-level fields named by [`Cassette::ignore_field`] (none by
//! default). Each interaction answers once, so a session that asks the same
//! thing twice is replayed in order. Requests other than model requests
//! (context-window probes) may reuse an interaction already served. The
//! interaction keeps the path, and with it the API: Anthropic and
//! Responses sessions record and replay like chat completions.
//!
//! A request whose method and target the cassette holds, but whose body
//! matches no unused interaction, is a **mismatch**: it is answered 500 with
//! an OpenAI error body whose message carries a line diff (`-` recorded,
//! `+` sent) between the canonical pretty JSON of the closest unused
//! interaction (same route, most lines in common) and the request. It is
//! logged at `error`, listed by [`FakeServer::mismatches`], and makes
//! [`assert_all_used`](FakeServer::assert_all_used) panic with the full diff
//! (the client's [`Error::Http`](crate::Error::Http) keeps only its first
//! 500 characters). The client retries a 500 like any other, so each attempt
//! is one more mismatch.
//!
//! Requests for a method and target the cassette never saw are served as
//! usual: [`set_route`](FakeServer::set_route) routes, scripted replies,
//! the built-in `/props`, `/v1/models` and `/health`. `set_route` routes
//! also come before the cassette. Strict mode does not judge requests the
//! cassette answers: the real server already did.
//!
//! Replay serves paths as recorded: a cassette recorded through an API base
//! ending in `/v1` replays with [`FakeServer::transport`] as is; for another
//! layout (OpenRouter's `/api/v1`) set the transport's API base to
//! [`root_url`](FakeServer::root_url) plus that path.
//!
//! # Log levels
//!
//! `debug`: each request line and the listening address; what the recorder
//! forwarded. `warn`: strict rejections, unreadable requests, unused replies
//! and cassette interactions at drop, upstream failures while recording.
//! `error`: chat requests with no reply left, cassette mismatches, panicked
//! server threads.

// Layers, each importing only those above it in this list (values first):
//
// - values: `reply` (the script's `Reply`), `request` (`RecordedRequest`,
//   with `view`: any API's request read as chat completions), `cassette`
//   (+ `diff`), `strict` (request validation, dispatching to
//   `strict_anthropic` and `strict_responses`, all three on
//   `strict_common`; the tool search's in `strict_search`), `buffer`;
// - bytes: `http` (HTTP/1.1 framing), `render` (chat-completions JSON and
//   SSE, and what the others share), `render_anthropic`,
//   `render_responses`, and `render_any` picking one by the request's API;
// - one connection: `conn` (request parsing, answer writing, faults);
// - the server: `server` (listener, accept loop, threads, request log, the
//   `Responder` seam);
// - what answers, each a `Responder`: `script` (routes, cassette replay,
//   scripted replies, built-in routes) under `fake` (`FakeServer`), and
//   `recorder` (`Recorder`, the recording proxy) with `forward` (its
//   upstream client).
mod buffer;
mod caches;
mod cassette;
mod diff;
mod events;
mod reply;
mod request;
mod strict;
mod strict_anthropic;
mod strict_common;
mod strict_gemini;
mod strict_responses;
mod strict_search;
mod view;

mod http;
mod render;
mod render_anthropic;
mod render_any;
mod render_gemini;
mod render_responses;

mod conn;

mod server;

mod fake;
mod forward;
mod recorder;
mod script;

#[cfg(test)]
mod tests;

pub use self::buffer::SharedBuffer;
pub use self::cassette::{Cassette, Interaction};
pub use self::events::merge_deltas;
pub use self::fake::FakeServer;
pub use self::recorder::Recorder;
pub use self::reply::Reply;
pub use self::request::RecordedRequest;
