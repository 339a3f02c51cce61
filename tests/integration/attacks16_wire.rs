//! ATTACKS.md, "Streams and decoders" and "Other servers" (model servers),
//! walked once more over the four wire formats: each test here covers a
//! cell of the class x format table (`tests/attacks16.md`) that no earlier
//! test covered on every format.

use pikuri::listeners::InMemoryEventList;
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Api, ChatTransport};
use serde_json::json;

use crate::security::capture_logs;
use crate::util::{assert_valid_history, fast_http};

const APIS: [Api; 4] = [
    Api::ChatCompletions,
    Api::AnthropicMessages,
    Api::OpenAiResponses,
    Api::Gemini,
];

/// A key with no dictionary words: any 6-character piece of it found in
/// the output is a leak, not a coincidence.
const KEY: &str = "sk-Wq8zR3nV6tJ1mX5pL9kD2hB7cF4gY0aE";

#[track_caller]
fn assert_no_key(what: &str, text: &str) {
    for i in 0..=KEY.len() - 6 {
        let piece = &KEY[i..i + 6];
        assert!(
            !text.contains(piece),
            "{what} leaks the key (found {piece:?}) in: {text}"
        );
    }
}

/// The header each API sends the key in.
fn key_header(api: Api) -> &'static str {
    match api {
        Api::AnthropicMessages => "x-api-key",
        Api::Gemini => "x-goog-api-key",
        _ => "authorization",
    }
}

fn keyed(server: &FakeServer, api: Api) -> ChatTransport {
    server.transport().with_api(api).with_api_key(KEY)
}

// ---------------------------------------------------------------------------
// Other servers: a redirect to another origin
// ---------------------------------------------------------------------------

/// A model server that redirects to another origin: the key goes to the
/// first only, whatever header the API carries it in (ureq strips
/// `Authorization` on a redirect, and knows nothing of `x-api-key` or
/// `x-goog-api-key`).
#[test]
fn a_redirect_to_another_origin_carries_no_key_on_any_api() {
    for api in APIS {
        for code in [301u16, 302, 303, 307, 308] {
            let first = FakeServer::start();
            let second = FakeServer::start();
            second.set_strict(false);
            second.push(Reply::text("redirected answer"));
            let location = format!("{}/elsewhere", second.base_url());
            first.push(
                Reply::raw_body(code, "application/json", "{}").with_header("Location", &location),
            );
            let mut agent = Agent::builder(keyed(&first, api))
                .http(fast_http().with_max_retries(0))
                .build()
                .expect("builds");
            let result = agent.run_loop("hello");
            let label = format!("{api:?} {code}: {result:?}");
            let sent = first.requests();
            let got = sent.last().and_then(|r| r.header(key_header(api)));
            assert!(
                got.is_some_and(|v| v.contains(KEY)),
                "{label}: the first server got no key: {sent:?}"
            );
            for r in second.requests() {
                assert_no_key(&format!("{label}: the redirect target"), &format!("{r:?}"));
            }
            // A model request is a POST: a redirect is never followed (a
            // GET without the body could not be the answer), and it fails
            // as the status it is.
            assert!(second.requests().is_empty(), "{label}");
            let err = result.as_ref().expect_err(&label);
            assert_eq!(err.status(), Some(code), "{label}");
            assert_no_key(&label, &format!("{err} {err:?}"));
            assert_valid_history(agent.messages());
        }
    }
}

// ---------------------------------------------------------------------------
// Streams and decoders: ids a history keeps, re-sent to a strict server
// ---------------------------------------------------------------------------

/// Call ids another server issued (Kimi's `functions.add:0`, ids with
/// dots, pipes, spaces, non-ASCII) are kept as they came, load again from
/// a saved history, and go to Anthropic in the form its API accepts
/// (`^[a-zA-Z0-9_-]+$`), the `tool_use` and its `tool_result` alike and two
/// ids that differ still apart: the strict server refused them before.
#[test]
fn foreign_call_ids_are_resent_to_anthropic_in_its_pattern() {
    let ids = [
        "functions.add:0",
        "functions_add_0",
        "a b|é",
        "functions.add:1",
    ];
    for streaming in [false, true] {
        // Several calls under chosen ids: the answer is pushed raw.
        let calls: Vec<serde_json::Value> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                serde_json::json!({"id": id, "type": "function", "function":
                    {"name": "add", "arguments": format!("{{\"a\":{i},\"b\":1}}")}})
            })
            .collect();
        let chat = FakeServer::start();
        chat.push(Reply::raw_body(
            200,
            "application/json",
            serde_json::json!({"choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": calls}}]})
            .to_string(),
        ));
        chat.push(Reply::text("sums done"));
        let (mut agent, _) = crate::util::agent_on(chat.transport(), |c| {
            c.add_tool(crate::util::add()).streaming(streaming)
        });
        agent.run_loop("add them").expect("chat turn");
        let kept: Vec<String> = agent.messages()[1]
            .tool_calls
            .iter()
            .map(|c| c.id.clone())
            .collect();
        assert_eq!(kept, ids, "kept as the server gave them");
        // Saved and loaded again into a fresh agent on Anthropic.
        let saved = agent.export_history().to_json();
        let claude = FakeServer::start();
        claude.set_strict(true);
        claude.push(Reply::text("from claude"));
        let (mut next, _) =
            crate::util::agent_on(claude.transport().with_api(Api::AnthropicMessages), |c| {
                c.add_tool(crate::util::add()).streaming(streaming)
            });
        next.load_history(pikuri::History::parse(&saved).expect("loads"))
            .expect("valid");
        let out = next
            .run_loop("and now?")
            .unwrap_or_else(|e| panic!("streaming {streaming}: {e}"));
        assert_eq!(out.answer.as_deref(), Some("from claude"));
        assert!(claude.rejections().is_empty(), "{:?}", claude.rejections());
        let body = claude.chat_requests()[0].body.clone().expect("a JSON body");
        let mut uses = Vec::new();
        let mut results = Vec::new();
        for m in body["messages"].as_array().expect("messages") {
            for b in m["content"].as_array().into_iter().flatten() {
                match b["type"].as_str() {
                    Some("tool_use") => uses.push(b["id"].as_str().unwrap().to_string()),
                    Some("tool_result") => {
                        results.push(b["tool_use_id"].as_str().unwrap().to_string());
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(uses.len(), ids.len(), "{body}");
        assert_eq!(uses, results, "each result answers its call");
        let distinct: std::collections::HashSet<_> = uses.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "{uses:?}");
        // An id already in the pattern goes as it is.
        assert_eq!(uses[1], "functions_add_0", "{uses:?}");
        assert!(uses[0].starts_with("functions_add_0_"), "{uses:?}");
        // The history itself still holds the ids the server gave.
        assert_eq!(next.messages()[1].tool_calls[0].id, ids[0]);
    }
}

// ---------------------------------------------------------------------------
// Other servers: a peer that echoes the key
// ---------------------------------------------------------------------------

/// An in-stream error event of `api` whose message is `message`.
fn stream_error(api: Api, message: &str) -> String {
    let event = match api {
        Api::ChatCompletions => json!({"error": {"message": message, "type": "server_error"}}),
        Api::AnthropicMessages => {
            json!({"type": "error", "error": {"type": "api_error", "message": message}})
        }
        Api::Gemini => json!({"error": {"code": 500, "status": "INTERNAL", "message": message}}),
        _ => json!({"type": "error", "code": "server_error", "message": message}),
    };
    format!("data: {event}\n\n")
}

/// A server that echoes the key it was sent, in the header its API uses:
/// in a retried 500, a plain-text 401, an in-stream error event, a
/// malformed stream chunk, the answer itself and the model name the answer
/// gives. Neither an error (its
/// `Display`, `Debug`), an event, the history nor a log line holds it.
#[test]
fn an_echoed_key_reaches_no_error_event_history_or_log_on_any_api() {
    type Echo = fn(Api, &str) -> Reply;
    let echoes: [(bool, Echo); 10] = [
        (false, |_, key| {
            Reply::raw_body(
                500,
                "application/json",
                json!({"error": {"message": format!("upstream said: {key}")}}).to_string(),
            )
        }),
        (false, |_, key| {
            Reply::raw_body(401, "text/plain", format!("no. key={key}"))
        }),
        (true, |api, key| {
            Reply::raw_sse(stream_error(api, &format!("failed for {key}")))
        }),
        (true, |_, key| {
            Reply::raw_sse(format!("data: {{not json {key}\n\n"))
        }),
        (false, |_, key| Reply::text(format!("you sent {key}"))),
        (true, |_, key| {
            Reply::text(format!("you sent {key}")).with_chunk_chars(7)
        }),
        (false, |_, key| {
            Reply::text("plain").with_model(&format!("m {key}"))
        }),
        (true, |_, key| {
            Reply::text("plain").with_model(&format!("m {key}"))
        }),
        (false, |_, key| {
            Reply::text("plain").with_header("X-Echo", key)
        }),
        (true, |_, key| {
            Reply::text("plain").with_header("X-Echo", key)
        }),
    ];
    for api in APIS {
        for (i, (streaming, echo)) in echoes.iter().enumerate() {
            let server = FakeServer::start();
            server.set_strict(false);
            let echo = *echo;
            server.respond_with(move |req| {
                let sent = req.header(key_header(api)).unwrap_or("none").to_string();
                echo(api, &sent)
            });
            let rec = InMemoryEventList::new();
            let mut agent = Agent::builder(keyed(&server, api))
                .http(fast_http().with_max_retries(1))
                .streaming(*streaming)
                .add_listener(rec.clone())
                .build()
                .unwrap();
            let (result, lines) = capture_logs(|| agent.run_loop("hi"));
            let label = format!("{api:?} case {i}");
            let got = server.requests();
            assert!(
                got.last()
                    .and_then(|r| r.header(key_header(api)))
                    .is_some_and(|v| v.contains(KEY)),
                "{label}: the server got no key"
            );
            if let Err(e) = &result {
                assert_no_key(&format!("{label}: the error"), &format!("{e} {e:?} {e:#?}"));
            }
            for e in rec.events() {
                let j = serde_json::to_string(&e).unwrap();
                assert_no_key(&format!("{label}: event {}", e.kind()), &j);
            }
            assert_no_key(
                &format!("{label}: the history"),
                &agent.export_history().to_json(),
            );
            for line in lines.iter().filter(|l| !l.contains(" ureq_proto")) {
                assert_no_key(&format!("{label}: a log line"), line);
            }
            assert_valid_history(agent.messages());
        }
    }
}

// ---------------------------------------------------------------------------
// Streams and decoders: text bounded into the history and events
// ---------------------------------------------------------------------------

/// A tool call named by a megabyte (a looping model, a hostile server):
/// the name is cut where it is kept (the history, the events), still names
/// no tool, and is answered so; the history loads again and goes to a
/// strict server. A megabyte id is refused: a cut one is an id the server
/// never issued. On every API, streamed and not.
#[test]
fn a_megabyte_call_name_is_cut_and_a_megabyte_id_refused_on_any_api() {
    let huge = "n".repeat(1_000_000);
    for api in APIS {
        for streaming in [false, true] {
            let label = format!("{api:?} streaming {streaming}");
            let server = FakeServer::start();
            server.push(Reply::tool_call(&huge, json!({})).with_id("call_1"));
            server.push(Reply::text("done"));
            let rec = InMemoryEventList::new();
            let mut agent = Agent::builder(server.transport().with_api(api))
                .http(fast_http().with_max_retries(0))
                .streaming(streaming)
                .add_listener(rec.clone())
                .build()
                .unwrap();
            let out = agent
                .run_loop("go")
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(out.answer.as_deref(), Some("done"), "{label}");
            let saved = agent.export_history().to_json();
            assert!(
                saved.len() < 10_000,
                "{label}: history of {} bytes",
                saved.len()
            );
            for e in rec.events() {
                let j = serde_json::to_string(&e).unwrap();
                assert!(
                    j.len() < 10_000,
                    "{label}: event {} of {} bytes",
                    e.kind(),
                    j.len()
                );
            }
            let name = &agent.messages()[1].tool_calls[0].name;
            assert!(
                name.starts_with("nnn") && name.ends_with('…'),
                "{label}: {name}"
            );
            // Answered as the unknown tool it is, and re-sent whole.
            assert!(
                server.rejections().is_empty(),
                "{label}: {:?}",
                server.rejections()
            );
            let mut again = Agent::builder(server.transport().with_api(api))
                .http(fast_http().with_max_retries(0))
                .build()
                .unwrap();
            again
                .load_history(pikuri::History::parse(&saved).expect("loads"))
                .expect("valid");
            server.push(Reply::text("again"));
            assert_eq!(
                again.run_loop("more").unwrap().answer.as_deref(),
                Some("again"),
                "{label}"
            );
            assert!(
                server.rejections().is_empty(),
                "{label}: {:?}",
                server.rejections()
            );

            // A megabyte id: refused, nothing kept.
            let server = FakeServer::start();
            server.push(Reply::tool_call("f", json!({})).with_id(&"i".repeat(1_000_000)));
            let mut agent = Agent::builder(server.transport().with_api(api))
                .http(fast_http().with_max_retries(0))
                .streaming(streaming)
                .build()
                .unwrap();
            let err = agent.run_loop("go").expect_err(&label);
            assert_eq!(err.kind(), pikuri::ErrorKind::Protocol, "{label}: {err}");
            assert!(err.to_string().len() < 1_000, "{label}");
            assert_eq!(agent.messages().len(), 1, "{label}: nothing kept");
        }
    }
}

// ---------------------------------------------------------------------------
// Other servers: refused, HTML, media types, Retry-After, 50 MB
// ---------------------------------------------------------------------------

/// A whole streamed text answer of `api`, as SSE.
fn text_sse(api: Api, text: &str) -> String {
    let events = match api {
        Api::ChatCompletions => vec![
            json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            json!("[DONE]"),
        ],
        Api::AnthropicMessages => vec![
            json!({"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 1}}),
            json!({"type": "message_stop"}),
        ],
        Api::Gemini => vec![
            json!({"candidates": [{"index": 0,
                "content": {"role": "model", "parts": [{"text": text}]}}]}),
            json!({"candidates": [{"index": 0,
                "content": {"role": "model", "parts": []}, "finishReason": "STOP"}]}),
        ],
        _ => vec![
            json!({"type": "response.output_text.delta", "item_id": "m", "output_index": 0,
                "delta": text}),
            json!({"type": "response.completed", "response": {"status": "completed"}}),
        ],
    };
    events
        .iter()
        .map(|e| match e {
            serde_json::Value::String(s) => format!("data: {s}\n\n"),
            other => format!("data: {other}\n\n"),
        })
        .collect()
}

fn plain_agent(transport: ChatTransport, streaming: bool, http: pikuri::HttpConfig) -> Agent {
    Agent::builder(transport)
        .http(http)
        .streaming(streaming)
        .build()
        .expect("builds")
}

/// The model-server classes of ATTACKS.md, each on every API: a refused
/// connection is `Connect`; an HTML page where JSON belongs is a protocol
/// error, and as a 503 a server error, in a bounded message naming no
/// markup; `Retry-After: 100000` waits no longer than the cap. Nothing of
/// a failed answer stays in the history.
#[test]
fn hostile_model_servers_fail_typed_and_bounded_on_any_api() {
    use pikuri::ErrorKind;
    use std::time::Duration;
    let page = format!(
        "<!DOCTYPE html><html><head><title>Bad Gateway</title><script>{}</script></head>\
         <body><h1>Bad Gateway</h1>{}</body></html>",
        "x".repeat(100_000),
        "<p>upstream</p>".repeat(10_000)
    );
    for api in APIS {
        // Refused.
        let refused = ChatTransport::new("m").with_api(api).with_api_base(format!(
            "http://127.0.0.1:{}/v1",
            crate::util::closed_port()
        ));
        let mut agent = plain_agent(refused, false, fast_http().with_max_retries(0));
        let err = agent.run_loop("hi").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connect, "{api:?}: {err}");
        assert_eq!(agent.messages().len(), 1);

        for streaming in [false, true] {
            let label = format!("{api:?} streaming {streaming}");
            // HTML with a 200, and as a 503.
            for (status, kind) in [(200, ErrorKind::Protocol), (503, ErrorKind::Server)] {
                let server = FakeServer::start();
                server.push(Reply::raw_body(
                    status,
                    "text/html; charset=utf-8",
                    page.clone(),
                ));
                let mut agent = plain_agent(
                    server.transport().with_api(api),
                    streaming,
                    fast_http().with_max_retries(0),
                );
                let err = agent.run_loop("hi").unwrap_err();
                let shown = format!("{err}");
                assert_eq!(err.kind(), kind, "{label} {status}: {shown}");
                assert!(
                    shown.len() < 2_000,
                    "{label} {status}: {} bytes",
                    shown.len()
                );
                assert!(!shown.contains("<script"), "{label} {status}: {shown}");
                assert!(format!("{err:?}").len() < 4_000, "{label} {status}");
                assert_eq!(agent.messages().len(), 1, "{label}");
            }
            // Retry-After: 100000 on a 429: the wait is the cap's.
            let server = FakeServer::start();
            server.push(Reply::status(429, "slow down").with_header("Retry-After", "100000"));
            server.push(Reply::text("after the wait"));
            let rec = InMemoryEventList::new();
            let mut agent = Agent::builder(server.transport().with_api(api))
                .http(
                    fast_http()
                        .with_max_retries(1)
                        .with_retry_cap(Duration::from_millis(50)),
                )
                .streaming(streaming)
                .add_listener(rec.clone())
                .build()
                .unwrap();
            let out = agent
                .run_loop("hi")
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(out.answer.as_deref(), Some("after the wait"), "{label}");
            let waits: Vec<u64> = rec
                .events()
                .iter()
                .filter_map(|e| match e {
                    pikuri::Event::Retrying { wait_ms, .. } => Some(*wait_ms),
                    _ => None,
                })
                .collect();
            assert_eq!(waits.len(), 1, "{label}");
            assert!(waits[0] <= 50, "{label}: waited {waits:?} ms");
        }
    }
}

/// The SSE media type in another case and with parameters streams; a 50
/// MB answer, plain or streamed, ends at the body bound, nothing of it
/// kept. On every API.
#[test]
fn odd_media_types_stream_and_50_mb_answers_end_at_the_bound_on_any_api() {
    use pikuri::ErrorKind;
    for api in APIS {
        // The SSE media type in another case, with parameters.
        for ct in [
            "Text/Event-Stream; Charset=UTF-8",
            "TEXT/EVENT-STREAM ; foo=\"a;b\"",
        ] {
            let server = FakeServer::start();
            server.push(Reply::raw_body(200, ct, text_sse(api, "streamed")));
            let mut agent = plain_agent(server.transport().with_api(api), true, fast_http());
            let out = agent
                .run_loop("hi")
                .unwrap_or_else(|e| panic!("{api:?} {ct}: {e}"));
            assert_eq!(out.answer.as_deref(), Some("streamed"), "{api:?} {ct}");
        }
        // 50 MB: a JSON body and an SSE stream, each past a 1 MiB bound.
        let mib = 1024 * 1024;
        for (ct, head, streaming) in [
            ("application/json", "{\"a\":\"", false),
            ("text/event-stream", "", true),
        ] {
            let body = if streaming {
                // The answer's first events, then one delta repeated: the
                // end never comes before 50 MB.
                let whole = text_sse(api, &"y".repeat(1000));
                let events: Vec<&str> = whole.split_inclusive("\n\n").collect();
                let at = events.iter().position(|e| e.contains("yyy")).unwrap();
                let mut body = events[..at].concat();
                body.push_str(&events[at].repeat(50 * mib / events[at].len()));
                body
            } else {
                format!("{head}{}\"}}", "z".repeat(50 * mib))
            };
            let server = FakeServer::start();
            server.push(Reply::raw_body(200, ct, body));
            let mut agent = plain_agent(
                server.transport().with_api(api),
                streaming,
                fast_http()
                    .with_max_retries(0)
                    .with_max_body_bytes(mib as u64),
            );
            let err = agent.run_loop("hi").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Protocol, "{api:?} {ct}: {err}");
            assert!(err.to_string().contains("exceeds"), "{api:?} {ct}: {err}");
            assert_eq!(agent.messages().len(), 1, "{api:?} {ct}");
        }
    }
}

// ---------------------------------------------------------------------------
// Streams and decoders: events that carry nothing end at a cancel
// ---------------------------------------------------------------------------

/// An event of `api` that carries nothing.
fn idle_event(api: Api) -> serde_json::Value {
    match api {
        Api::ChatCompletions => json!({"choices": [{"index": 0, "delta": {}}]}),
        Api::AnthropicMessages => json!({"type": "ping"}),
        Api::Gemini => json!({"candidates": []}),
        _ => json!({"type": "response.in_progress", "response": {}}),
    }
}

/// A stream that, after its first text, sends only events that carry
/// nothing ends at the host's cancel (the idle bound being far), on every
/// API: `Cancelled`, and nothing of the answer in the history. A server
/// that never answers ends at the read bound, streamed or not.
#[test]
fn a_stream_of_nothing_ends_at_a_cancel_and_silence_at_the_bound_on_any_api() {
    use pikuri::{Cancellable, ErrorKind, Event};
    use std::time::Duration;
    for api in APIS {
        let whole = text_sse(api, "first words");
        let events: Vec<&str> = whole.split_inclusive("\n\n").collect();
        let at = events
            .iter()
            .position(|e| e.contains("first words"))
            .unwrap();
        let mut body = events[..=at].concat();
        body.push_str(&format!("data: {}\n\n", idle_event(api)).repeat(20_000));
        body.push_str(&events[at + 1..].concat());
        let server = FakeServer::start();
        server.push(Reply::raw_sse(body).with_chunk_delay(Duration::from_millis(5)));
        let cancel = Cancellable::new();
        let on_text = cancel.clone();
        let mut agent = Agent::builder(server.transport().with_api(api))
            .http(
                fast_http()
                    .with_max_retries(0)
                    .with_idle_timeout(Duration::from_secs(600)),
            )
            .streaming(true)
            .cancellable(cancel)
            .add_listener(move |e: &Event| {
                if matches!(e, Event::AssistantDelta { .. }) {
                    on_text.cancel();
                }
            })
            .build()
            .unwrap();
        let err = agent.run_loop("hi").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Cancelled, "{api:?}: {err}");
        assert_eq!(
            agent.messages().len(),
            1,
            "{api:?}: nothing of the answer kept"
        );

        for streaming in [false, true] {
            let server = FakeServer::start();
            server.push(Reply::hang());
            let mut agent = plain_agent(
                server.transport().with_api(api),
                streaming,
                fast_http()
                    .with_max_retries(0)
                    .with_read_timeout(Duration::from_millis(300)),
            );
            let err = agent.run_loop("hi").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Timeout, "{api:?} {streaming}: {err}");
            assert_eq!(agent.messages().len(), 1);
        }
    }
}

// ---------------------------------------------------------------------------
// Streams and decoders: indices, and the history they leave
// ---------------------------------------------------------------------------

/// A streamed answer of `api` with two calls of `add` under ids `b` and
/// `a`, the first at the highest index there is and the second at 0 (out
/// of order), each index named again by a piece after its call began.
fn odd_index_calls(api: Api) -> String {
    let max = u64::MAX;
    let events = match api {
        Api::ChatCompletions => vec![
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": max, "id": "b",
                "type": "function", "function": {"name": "add", "arguments": "{\"a\":1,"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a",
                "type": "function", "function": {"name": "add", "arguments": "{\"a\":2,\"b\":2}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": max,
                "function": {"arguments": "\"b\":1}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
            json!("[DONE]"),
        ],
        Api::AnthropicMessages => vec![
            json!({"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 1}}}),
            json!({"type": "content_block_start", "index": max,
                "content_block": {"type": "tool_use", "id": "b", "name": "add", "input": {}}}),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": "a", "name": "add", "input": {}}}),
            json!({"type": "content_block_delta", "index": max,
                "delta": {"type": "input_json_delta", "partial_json": "{\"a\":1,\"b\":1}"}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "{\"a\":2,\"b\":2}"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_stop", "index": max}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 1}}),
            json!({"type": "message_stop"}),
        ],
        Api::Gemini => vec![json!({"candidates": [{"index": 0, "finishReason": "STOP",
            "content": {"role": "model", "parts": [
                {"functionCall": {"id": "b", "name": "add", "args": {"a": 1, "b": 1}}},
                {"functionCall": {"id": "a", "name": "add", "args": {"a": 2, "b": 2}}}]}}]})],
        _ => vec![
            json!({"type": "response.output_item.added", "output_index": max, "item":
                {"type": "function_call", "id": "fc_b", "call_id": "b", "name": "add", "arguments": ""}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item":
                {"type": "function_call", "id": "fc_a", "call_id": "a", "name": "add", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_b",
                "output_index": max, "delta": "{\"a\":1,\"b\":1}"}),
            json!({"type": "response.function_call_arguments.delta", "item_id": "fc_a",
                "output_index": 0, "delta": "{\"a\":2,\"b\":2}"}),
            json!({"type": "response.completed", "response": {"status": "completed"}}),
        ],
    };
    events
        .iter()
        .map(|e| match e {
            serde_json::Value::String(s) => format!("data: {s}\n\n"),
            other => format!("data: {other}\n\n"),
        })
        .collect()
}

/// Calls at the highest index and out of order are each kept whole and
/// run; the history loads again and goes to a strict server of every
/// API.
#[test]
fn calls_at_extreme_and_unordered_indices_leave_a_history_every_api_accepts() {
    for from in APIS {
        let server = FakeServer::start();
        server.push(Reply::raw_sse(odd_index_calls(from)));
        server.push(Reply::text("sums done"));
        let (mut agent, _) = crate::util::agent_on(server.transport().with_api(from), |c| {
            c.add_tool(crate::util::add()).streaming(true)
        });
        let out = agent
            .run_loop("add")
            .unwrap_or_else(|e| panic!("{from:?}: {e}"));
        assert_eq!(out.answer.as_deref(), Some("sums done"), "{from:?}");
        let m = agent
            .messages()
            .iter()
            .find(|m| !m.tool_calls.is_empty())
            .expect("the calls are kept");
        let mut calls: Vec<(&str, &str)> = m
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.arguments.as_str()))
            .collect();
        calls.sort_unstable();
        assert_eq!(
            calls,
            [("a", "{\"a\":2,\"b\":2}"), ("b", "{\"a\":1,\"b\":1}")],
            "{from:?}"
        );
        let results: Vec<&str> = agent
            .messages()
            .iter()
            .filter(|m| m.role == pikuri::Role::Tool)
            .map(|m| m.content.as_str())
            .collect();
        assert_eq!(results.len(), 2, "{from:?}");
        assert!(
            results.contains(&"2") && results.contains(&"4"),
            "{from:?}: {results:?}"
        );
        let saved = agent.export_history().to_json();
        for to in APIS {
            let strict = FakeServer::start();
            strict.set_strict(true);
            strict.push(Reply::text("again"));
            let (mut next, _) = crate::util::agent_on(strict.transport().with_api(to), |c| {
                c.add_tool(crate::util::add())
            });
            next.load_history(pikuri::History::parse(&saved).expect("loads"))
                .expect("valid");
            let out = next
                .run_loop("more")
                .unwrap_or_else(|e| panic!("{from:?} -> {to:?}: {e}"));
            assert_eq!(out.answer.as_deref(), Some("again"));
        }
    }
}

// ---------------------------------------------------------------------------
// Streams and decoders: in-stream errors retried as their status
// ---------------------------------------------------------------------------

/// An in-stream error of `api` standing for overloaded (529, or Gemini's
/// `UNAVAILABLE` 503) or a rate limit (429).
fn typed_stream_error(api: Api, overloaded: bool) -> serde_json::Value {
    match (api, overloaded) {
        (Api::ChatCompletions, true) => {
            json!({"error": {"message": "busy", "type": "overloaded_error"}})
        }
        (Api::ChatCompletions, false) => {
            json!({"error": {"message": "busy", "type": "rate_limit_error"}})
        }
        (Api::AnthropicMessages, true) => {
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
        }
        (Api::AnthropicMessages, false) => {
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "busy"}})
        }
        (Api::Gemini, true) => {
            json!({"error": {"code": 503, "status": "UNAVAILABLE", "message": "busy"}})
        }
        (Api::Gemini, false) => {
            json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "busy"}})
        }
        (_, true) => json!({"type": "error", "code": "server_overloaded", "message": "busy"}),
        (_, false) => json!({"type": "error", "code": "rate_limit_exceeded", "message": "busy"}),
    }
}

/// An overloaded or rate-limit error the server reports in the stream
/// before any text is retried as the same status before the stream would
/// be, on every API (Anthropic sends its `overloaded_error` event right
/// after the `200`); one that comes after text reached the listeners is
/// not (their deltas cannot be taken back), and fails as its status.
#[test]
fn an_in_stream_error_before_any_text_is_retried_like_its_status_on_any_api() {
    use pikuri::ErrorKind;
    for api in APIS {
        for overloaded in [true, false] {
            let label = format!("{api:?} overloaded {overloaded}");
            let error = format!("data: {}\n\n", typed_stream_error(api, overloaded));
            // Before any text: retried, then answered.
            let server = FakeServer::start();
            server.push(Reply::raw_sse(error.clone()));
            server.push(Reply::text("after"));
            let rec = InMemoryEventList::new();
            let mut agent = Agent::builder(server.transport().with_api(api))
                .http(fast_http().with_max_retries(2))
                .streaming(true)
                .add_listener(rec.clone())
                .build()
                .unwrap();
            let out = agent
                .run_loop("hi")
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(out.answer.as_deref(), Some("after"), "{label}");
            assert_eq!(
                rec.kinds().iter().filter(|k| **k == "retrying").count(),
                1,
                "{label}"
            );
            assert_eq!(server.chat_requests().len(), 2, "{label}");
            // The same error as a `200` body: retried, the request sent
            // again whole (the strict server reads it).
            let server = FakeServer::start();
            server.set_strict(true);
            let body = match typed_stream_error(api, overloaded) {
                // The Responses error event's shape, as a body's `error`.
                e if e["type"] == "error" && e.get("error").is_none() => json!({"error": e}),
                e if e.get("error").is_some() => json!({"error": e["error"]}),
                e => e,
            };
            server.push(Reply::raw_body(200, "application/json", body.to_string()));
            server.push(Reply::text("after"));
            let mut agent = plain_agent(
                server.transport().with_api(api),
                false,
                fast_http().with_max_retries(2),
            );
            let out = agent
                .run_loop("hi")
                .unwrap_or_else(|e| panic!("{label} plain: {e}"));
            assert_eq!(out.answer.as_deref(), Some("after"), "{label} plain");
            assert!(
                server.rejections().is_empty(),
                "{label}: {:?}",
                server.rejections()
            );
            let sent: Vec<_> = server
                .chat_requests()
                .iter()
                .map(|r| r.raw_body.clone())
                .collect();
            assert_eq!(sent.len(), 2, "{label} plain");
            assert_eq!(sent[0], sent[1], "{label}: the same request twice");
            // After text: not retried; the status it stands for.
            let whole = text_sse(api, "partial words");
            let events: Vec<&str> = whole.split_inclusive("\n\n").collect();
            let at = events
                .iter()
                .position(|e| e.contains("partial words"))
                .unwrap();
            let body = format!("{}{error}", events[..=at].concat());
            let server = FakeServer::start();
            server.push(Reply::raw_sse(body));
            let mut agent = Agent::builder(server.transport().with_api(api))
                .http(fast_http().with_max_retries(2))
                .streaming(true)
                .build()
                .unwrap();
            let err = agent.run_loop("hi").unwrap_err();
            let want = if overloaded {
                ErrorKind::Server
            } else {
                ErrorKind::RateLimit
            };
            assert_eq!(err.kind(), want, "{label}: {err}");
            assert_eq!(server.chat_requests().len(), 1, "{label}");
            assert_eq!(agent.messages().len(), 1, "{label}: nothing kept");
        }
    }
}

/// A recording proxy between the agent and an upstream that echoes the
/// key's header keeps the key out of the cassette, whatever header the API
/// sends it in.
#[test]
fn an_echoed_key_never_reaches_a_cassette_on_any_api() {
    for api in APIS {
        let upstream = FakeServer::start();
        upstream.respond_with(move |req| {
            let sent = req.header(key_header(api)).unwrap_or("none").to_string();
            Reply::raw_body(
                400,
                "application/json",
                json!({"error": {"message": format!("rejected {sent}")}}).to_string(),
            )
        });
        let recorder = pikuri::testing::Recorder::start(&upstream.base_url());
        let mut agent = Agent::builder(
            recorder
                .transport_for("fake-model")
                .with_api(api)
                .with_api_key(KEY),
        )
        .http(fast_http().with_max_retries(0))
        .build()
        .unwrap();
        let err = agent.run_loop("hi").unwrap_err();
        assert_eq!(err.status(), Some(400), "{api:?}: {err}");
        let got = upstream.requests();
        assert!(
            got.iter()
                .any(|r| r.header(key_header(api)).is_some_and(|v| v.contains(KEY))),
            "{api:?}: the upstream got no key"
        );
        let cassette = recorder.cassette().to_json();
        assert!(cassette.contains("rejected"), "{api:?}: {cassette}");
        assert_no_key(&format!("{api:?}: the cassette"), &cassette);
    }
}

/// A server that numbers each answer's calls from `call_0` again leaves a
/// history with one id in several answers (each answer valid on its own):
/// Anthropic, which wants every `tool_use` id of a conversation once, gets
/// the later ones renamed, each result with its own call.
#[test]
fn an_id_reused_across_answers_goes_to_anthropic_once() {
    let chat = FakeServer::start();
    chat.push(Reply::tool_call("add", json!({"a": 1, "b": 1})).with_id("call_0"));
    chat.push(Reply::tool_call("add", json!({"a": 2, "b": 2})).with_id("call_0"));
    chat.push(Reply::tool_call("add", json!({"a": 3, "b": 3})).with_id("call_0"));
    chat.push(Reply::text("sums done"));
    let (mut agent, _) =
        crate::util::agent_on(chat.transport(), |c| c.add_tool(crate::util::add()));
    agent.run_loop("add thrice").expect("chat turn");
    let saved = agent.export_history().to_json();
    let claude = FakeServer::start();
    claude.set_strict(true);
    claude.push(Reply::text("from claude"));
    let (mut next, _) =
        crate::util::agent_on(claude.transport().with_api(Api::AnthropicMessages), |c| {
            c.add_tool(crate::util::add())
        });
    next.load_history(pikuri::History::parse(&saved).expect("loads"))
        .expect("valid");
    let out = next.run_loop("and now?").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.answer.as_deref(), Some("from claude"));
    let body = claude.chat_requests()[0].body.clone().expect("a JSON body");
    let mut pairs = Vec::new();
    for m in body["messages"].as_array().expect("messages") {
        for b in m["content"].as_array().into_iter().flatten() {
            match b["type"].as_str() {
                Some("tool_use") => pairs.push((b["id"].as_str().unwrap().to_string(), None)),
                Some("tool_result") => {
                    let last = pairs.last_mut().expect("a call before its result");
                    last.1 = Some(b["tool_use_id"].as_str().unwrap().to_string());
                }
                _ => {}
            }
        }
    }
    let want = ["call_0", "call_0_re1", "call_0_re2"];
    assert_eq!(
        pairs,
        want.iter()
            .map(|id| (id.to_string(), Some(id.to_string())))
            .collect::<Vec<_>>()
    );
    // The history keeps the ids as the server gave them.
    let kept: Vec<&str> = next
        .messages()
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
        .collect();
    assert_eq!(kept, ["call_0"; 3]);
}

/// A server that trickles its answer a character at a time, each apart,
/// ends at the request deadline on every API (each piece is progress, so
/// the idle bound alone would never end it), with nothing kept.
#[test]
fn a_trickling_server_ends_at_the_request_deadline_on_any_api() {
    use pikuri::ErrorKind;
    use std::time::Duration;
    for api in APIS {
        let server = FakeServer::start();
        server.push(
            Reply::text("t".repeat(2_000))
                .with_chunk_chars(1)
                .with_chunk_delay(Duration::from_millis(10)),
        );
        let mut agent = plain_agent(
            server.transport().with_api(api),
            true,
            fast_http()
                .with_max_retries(0)
                .with_idle_timeout(Duration::from_secs(600))
                .with_request_deadline(Duration::from_millis(300)),
        );
        let err = agent.run_loop("hi").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{api:?}: {err}");
        assert_eq!(agent.messages().len(), 1, "{api:?}: nothing kept");
    }
}
