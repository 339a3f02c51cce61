//! Issue 13: nothing a server or a host's configuration sends can panic the
//! crate, leak the API key or wedge an agent. Every test here goes through
//! the public API only.
//!
//! Classes: extreme numbers (1), the key echoed back (2), media types (3),
//! streams that never end (4), runtime context windows and probe counts
//! (9), a transport without a model (10).

use std::time::{Duration, Instant};

use pikuri::listeners::{InMemoryEventList, TokenLog};
use pikuri::testing::{FakeServer, Reply, SharedBuffer};
use pikuri::{
    Agent, Cancellable, ChatTransport, Error, Event, History, HttpConfig, Listener, Message,
    OnExhausted, StepLimit, Usage,
};
use serde_json::json;

use crate::security::capture_logs;
use crate::util::{assert_valid_history, fast_http};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A small xorshift generator: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

/// Extreme numbers as JSON text, as a server might send them.
const EXTREMES: [&str; 14] = [
    "0",
    "1",
    "-1",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "1e308",
    "-1e308",
    "\"NaN\"",
    "null",
];

const DURATIONS: [Duration; 6] = [
    Duration::ZERO,
    Duration::from_nanos(1),
    Duration::from_secs(u32::MAX as u64),
    Duration::from_secs(u64::MAX),
    Duration::MAX,
    Duration::from_millis(300),
];

/// A streamed completion whose every number is `n`: usage in every field
/// and a tool call at index `n`, then a text chunk and `[DONE]`.
fn sse_with_numbers(n: &str, m: &str) -> String {
    let chunks = [
        format!(
            r#"{{"choices":[{{"index":0,"delta":{{"role":"assistant","tool_calls":[{{"index":{n},"id":"call_x","type":"function","function":{{"name":"nope","arguments":"{{}}"}}}}]}}}}]}}"#
        ),
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_y","function":{"name":"nope2","arguments":"{}"}}]}}]}"#
            .to_string(),
        format!(
            r#"{{"choices":[{{"index":0,"delta":{{"content":"ok"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":{n},"completion_tokens":{m},"total_tokens":{n},"prompt_tokens_details":{{"cached_tokens":{m},"cache_creation_tokens":{n}}},"completion_tokens_details":{{"reasoning_tokens":{m}}},"cache_creation_input_tokens":{m}}}}}"#
        ),
    ];
    let mut out = String::new();
    for c in chunks {
        out.push_str("data: ");
        out.push_str(&c);
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out
}

/// Every listener that does arithmetic on event figures, fed `events` on
/// this thread (a panic in a listener thread would only be logged).
fn feed_arithmetic_listeners(events: &[Event], cap: Option<u64>) {
    let mut log = TokenLog::new(SharedBuffer::new());
    log.on_event(&Event::ContextCap {
        agent: "".into(),
        cap,
    });
    for e in events {
        log.on_event(e);
    }
    for e in events {
        if let Event::Tokens {
            input,
            cached,
            cache_creation,
            ..
        } = e
        {
            let mut u = Usage::new();
            if let Some(v) = input {
                u = u.with_input(*v);
            }
            if let Some(v) = cached {
                u = u.with_cached(*v);
            }
            if let Some(v) = cache_creation {
                u = u.with_cache_creation(*v);
            }
            let _ = u.context_used();
        }
    }
}

// ---------------------------------------------------------------------------
// Class 1: arithmetic on outside values
// ---------------------------------------------------------------------------

/// Usage figures at `u64::MAX` in every field: their sums (context in use)
/// saturate instead of overflowing.
#[test]
fn usage_at_u64_max_in_every_field_does_not_overflow() {
    let u = Usage::new()
        .with_input(u64::MAX)
        .with_cached(u64::MAX)
        .with_cache_creation(u64::MAX);
    assert_eq!(u.context_used(), u64::MAX);

    let server = FakeServer::start();
    server.push(Reply::raw_sse(sse_with_numbers(
        "18446744073709551615",
        "18446744073709551615",
    )));
    // The first turn's second round (after the unknown tools) and the next turn.
    server.push(Reply::text("next").repeat(2));
    let rec = InMemoryEventList::new();
    let mut agent = Agent::builder(server.transport())
        .http(fast_http())
        .add_listener(rec.clone())
        .add_listener(TokenLog::new(SharedBuffer::new()))
        .build()
        .unwrap();
    let _ = agent.run_loop("hi");
    feed_arithmetic_listeners(&rec.events(), Some(u64::MAX));
    feed_arithmetic_listeners(&rec.events(), Some(0));
    feed_arithmetic_listeners(&rec.events(), Some(1));
    assert_valid_history(agent.messages());
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("next")
    );
}

/// A saved history whose usage figures are all `u64::MAX` loads, and the
/// context accounting of the restored session does not overflow.
#[test]
fn history_with_usage_at_u64_max_loads_and_accounts() {
    let m = u64::MAX;
    let mut answer = Message::assistant("hello");
    answer.usage = Some(
        Usage::new()
            .with_input(m)
            .with_output(m)
            .with_cached(m)
            .with_cache_creation(m)
            .with_thinking(m),
    );
    let doc = History::new(vec![Message::user("hi"), answer])
        .unwrap()
        .to_json();
    assert!(doc.contains("18446744073709551615"), "{doc}");
    let history = History::parse(&doc).expect("a valid history");
    let server = FakeServer::start();
    server.push(Reply::text("after restore"));
    let rec = InMemoryEventList::new();
    let mut agent = Agent::builder(server.transport())
        .http(fast_http())
        .add_listener(rec.clone())
        .build()
        .unwrap();
    agent.load_history(history).unwrap();
    assert_eq!(
        agent.run_loop("go on").unwrap().answer.as_deref(),
        Some("after restore")
    );
    let events = rec.events();
    assert!(events.iter().any(|e| e.kind() == "history_loaded"));
    feed_arithmetic_listeners(&events, Some(8192));
    feed_arithmetic_listeners(&events, Some(u64::MAX));
    assert_valid_history(agent.messages());
}

/// Tool-call indices at the extremes (2^63, u64::MAX, negative, floats,
/// strings): never a panic; the message is either decoded or the chunk is
/// skipped, and the history stays valid.
#[test]
fn extreme_tool_call_indices_and_usage_never_panic() {
    for n in EXTREMES {
        for m in ["18446744073709551615", "0", "-1"] {
            let server = FakeServer::start();
            server.push(Reply::raw_sse(sse_with_numbers(n, m)));
            server.push(Reply::text("next"));
            let rec = InMemoryEventList::new();
            let mut agent = Agent::builder(server.transport())
                .http(fast_http())
                .add_listener(rec.clone())
                .streaming(true)
                .build()
                .unwrap();
            let first = agent.run_loop("hi");
            if let Err(e) = &first {
                assert!(
                    matches!(e, Error::Protocol { .. } | Error::Truncated),
                    "{n}/{m}: {e:?}"
                );
            }
            feed_arithmetic_listeners(&rec.events(), Some(4096));
            assert_valid_history(agent.messages());
            // The unknown tools get error observations; the next round
            // (the "next" reply) ends the turn, or the next turn does.
            if first.is_err() || server.remaining() == 1 {
                assert_eq!(
                    agent.run_loop("again").unwrap().answer.as_deref(),
                    Some("next"),
                    "{n}/{m}"
                );
            }
        }
    }
}

/// `Retry-After` values a hostile or broken server sends: huge, negative,
/// fractional, garbage. The wait stays within the cap, nothing panics.
#[test]
fn extreme_retry_after_values_stay_within_the_cap() {
    for v in [
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999",
        "-1",
        "1e308",
        "0.5",
        "NaN",
        "",
    ] {
        let server = FakeServer::start();
        server.push(Reply::status(503, "busy").with_header("Retry-After", v));
        server.push(Reply::text("ok"));
        let rec = InMemoryEventList::new();
        let mut agent = Agent::builder(server.transport())
            .http(
                fast_http()
                    .with_retry_cap(Duration::from_millis(20))
                    .with_max_retries(1),
            )
            .add_listener(rec.clone())
            .build()
            .unwrap();
        let started = Instant::now();
        assert_eq!(
            agent.run_loop("hi").unwrap().answer.as_deref(),
            Some("ok"),
            "{v}"
        );
        assert!(started.elapsed() < Duration::from_secs(30), "{v}");
    }
}

/// Configuration at the extremes: every setter with 0, 1, MAX-ish values;
/// building and one turn never panic; the turn ends in an answer or a typed
/// error, the history stays valid, and a sane configuration then works.
#[test]
fn extreme_configuration_values_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let sizes_usize = [0usize, 1, 64, usize::MAX];
    let sizes_u64 = [0u64, 1, 64, u64::MAX];
    let retries = [0u32, 1, u32::MAX];
    let windows = [None, Some(0u64), Some(1), Some(u64::MAX)];
    let steps = [1u32, 2, u32::MAX];
    for i in 0..48 {
        let d = |rng: &mut Rng| *rng.pick(&DURATIONS);
        // Timeouts are never below what the fake server needs to answer,
        // except when the draw says zero: then the turn may time out.
        let cfg = HttpConfig::default()
            .with_connect_timeout(d(&mut rng))
            .with_read_timeout(d(&mut rng))
            .with_probe_timeout(d(&mut rng))
            .with_max_line_bytes(*rng.pick(&sizes_usize))
            .with_max_body_bytes(*rng.pick(&sizes_u64))
            .with_max_retries(*rng.pick(&retries))
            .with_retry_base(d(&mut rng))
            .with_retry_cap(d(&mut rng))
            .with_idle_timeout(d(&mut rng))
            .with_request_deadline(d(&mut rng));
        let window = *rng.pick(&windows);
        let max_steps = *rng.pick(&steps);
        let wind = *rng.pick(&steps);
        let stream = rng.next().is_multiple_of(2);
        let server = FakeServer::start();
        server.push(Reply::tool_call("calculator", json!({"expression": "1+1"})));
        server.push(Reply::text("two").with_usage(u64::MAX, u64::MAX));
        let cancel = Cancellable::new();
        let rec = InMemoryEventList::new();
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Agent::builder(server.transport().with_context_window(window))
                .http(cfg.clone())
                .add_tool(pikuri::builtin::calculator())
                .step_limit(StepLimit::with_policy(max_steps, OnExhausted::Synthesize))
                .wind_down(wind)
                .cancellable(cancel.clone())
                .streaming(stream)
                .add_listener(rec.clone())
                .build()
        }));
        let mut agent = built
            .unwrap_or_else(|_| panic!("draw {i}: build panicked with {cfg:?}"))
            .unwrap_or_else(|e| panic!("draw {i}: build failed: {e}"));
        // A draw may retry forever (max retries, huge waits): a cancel
        // from another thread bounds the turn.
        let c = cancel.clone();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let guard = std::thread::spawn(move || {
            let timed_out = wait.recv_timeout(Duration::from_secs(3))
                == Err(std::sync::mpsc::RecvTimeoutError::Timeout);
            if timed_out {
                c.cancel();
            }
        });
        let turn =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| agent.run_loop("1+1?")));
        let turn = turn.unwrap_or_else(|_| panic!("draw {i}: run_loop panicked with {cfg:?}"));
        if let Err(e) = &turn {
            assert!(
                matches!(
                    e,
                    Error::Timeout { .. }
                        | Error::Protocol { .. }
                        | Error::Cancelled
                        | Error::Transport { .. }
                        | Error::Connect { .. }
                        | Error::Http { .. }
                        | Error::Truncated
                ),
                "draw {i}: {e:?} with {cfg:?}"
            );
        }
        drop(done);
        guard.join().unwrap();
        feed_arithmetic_listeners(&rec.events(), window);
        assert_valid_history(agent.messages());
    }
}

/// The extreme setters are documented as saturating: `Duration::MAX`
/// timeouts mean "no limit" and a request goes through.
#[test]
fn max_timeouts_mean_no_limit() {
    let server = FakeServer::start();
    server.push(Reply::text("hi"));
    server.push(Reply::text("hi again"));
    let cfg = HttpConfig::default()
        .with_connect_timeout(Duration::MAX)
        .with_read_timeout(Duration::MAX)
        .with_probe_timeout(Duration::MAX)
        .with_idle_timeout(Duration::MAX)
        .with_request_deadline(Duration::MAX)
        .with_max_line_bytes(usize::MAX)
        .with_max_body_bytes(u64::MAX)
        .with_max_retries(u32::MAX)
        .with_retry_base(Duration::MAX)
        .with_retry_cap(Duration::MAX);
    for streaming in [true, false] {
        let mut agent = Agent::builder(server.transport())
            .http(cfg.clone())
            .streaming(streaming)
            .step_limit(StepLimit::new(u32::MAX))
            .wind_down(u32::MAX)
            .build()
            .unwrap();
        assert!(agent.run_loop("hello").unwrap().answer.is_some());
    }
}

// ---------------------------------------------------------------------------
// Class 2: the key can come back from the server
// ---------------------------------------------------------------------------

const KEY: &str = "sk-hostile-0123456789abcdef";

fn assert_no_key(what: &str, text: &str) {
    assert!(!text.contains(KEY), "the key leaked into {what}: {text}");
    assert!(
        !text.contains("0123456789abcdef"),
        "part of the key leaked into {what}: {text}"
    );
}

/// A server that echoes the `Authorization` header back: in a 500 (retried,
/// so it reaches `Retrying` events), a 400, a plain-text 401, a streamed
/// error chunk, a malformed chunk and a chunk of unknown shape (logged).
#[test]
fn an_echoed_key_never_reaches_errors_events_or_logs() {
    type Echo = fn(&str) -> Reply;
    let echoes: [Echo; 6] = [
        |auth| {
            Reply::raw_body(
                500,
                "application/json",
                json!({"error": {"message": format!("upstream said: {auth}")}}).to_string(),
            )
        },
        |auth| {
            Reply::raw_body(
                400,
                "application/json",
                json!({"error": format!("bad header {auth}")}).to_string(),
            )
        },
        |auth| Reply::raw_body(401, "text/plain", format!("no. key={}", &auth[7..])),
        |auth| {
            Reply::raw_sse(format!(
                "data: {}\n\n",
                json!({"error": {"message": format!("stream failed for {auth}")}})
            ))
        },
        |auth| Reply::raw_sse(format!("data: {{not json {auth}\n\n")),
        |auth| {
            Reply::raw_sse(format!(
                "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
                json!({"echo": auth, "choices": "nope"}),
                json!({"choices": [{"index": 0, "delta": {"content": "fine"}, "finish_reason": "stop"}]})
            ))
        },
    ];
    for (i, echo) in echoes.into_iter().enumerate() {
        let server = FakeServer::start();
        server.respond_with(move |req| {
            let auth = req
                .header("authorization")
                .unwrap_or("Bearer none")
                .to_string();
            echo(&auth)
        });
        let rec = InMemoryEventList::new();
        let mut agent = Agent::builder(server.transport().with_api_key(KEY))
            .http(fast_http().with_max_retries(1))
            .add_listener(rec.clone())
            .build()
            .unwrap();
        let (result, lines) = capture_logs(|| agent.run_loop("hi"));
        // The server really echoed the key (the test is not vacuous).
        assert_eq!(
            server.requests().last().unwrap().header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        if let Err(e) = &result {
            assert_no_key(&format!("case {i}: Display"), &e.to_string());
            assert_no_key(&format!("case {i}: Debug"), &format!("{e:?}"));
            assert_no_key(&format!("case {i}: Debug"), &format!("{e:#?}"));
        }
        for e in rec.events() {
            let j = serde_json::to_string(&e).unwrap();
            assert_no_key(&format!("case {i}: event {}", e.kind()), &j);
        }
        for line in lines.iter().filter(|l| !l.contains(" ureq_proto")) {
            assert_no_key(&format!("case {i}: a log line"), line);
        }
        if i == 0 {
            assert!(rec.kinds().contains(&"retrying"), "{:?}", rec.kinds());
        }
        assert_valid_history(agent.messages());
    }
}

/// A recorded session against an upstream that echoes the key keeps the
/// key out of the cassette.
#[test]
fn an_echoed_key_never_reaches_a_cassette() {
    let upstream = FakeServer::start();
    upstream.respond_with(|req| {
        let auth = req.header("authorization").unwrap_or("none").to_string();
        Reply::raw_body(
            400,
            "application/json",
            json!({"error": {"message": format!("rejected {auth}")}}).to_string(),
        )
    });
    let recorder = pikuri::testing::Recorder::start(&upstream.base_url());
    let mut agent = Agent::builder(recorder.transport_for("fake-model").with_api_key(KEY))
        .http(fast_http())
        .build()
        .unwrap();
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.status(), Some(400));
    let cassette = recorder.cassette().to_json();
    assert!(cassette.contains("rejected"), "{cassette}");
    assert_no_key("the cassette", &cassette);
}

// ---------------------------------------------------------------------------
// Class 3: media types
// ---------------------------------------------------------------------------

fn stream_body() -> String {
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "streamed"}, "finish_reason": "stop"}]});
    format!("data: {chunk}\n\ndata: [DONE]\n\n")
}

/// `Content-Type` is compared as RFC 9110 says: type and subtype ignore
/// case, whitespace and parameters (quoted or not) are allowed.
#[test]
fn media_types_are_parsed_case_insensitively_with_parameters() {
    for ct in [
        "Text/Event-Stream",
        "TEXT/EVENT-STREAM; charset=UTF-8",
        "text/event-stream ; charset=\"utf-8\"",
        "text/event-stream;charset=utf-8;foo=\"a;b\"",
        " text/event-stream\t",
    ] {
        let server = FakeServer::start();
        server.push(Reply::raw_body(200, ct, stream_body()));
        let mut agent = streaming_agent(&server, fast_http());
        let out = agent
            .run_loop("hi")
            .unwrap_or_else(|e| panic!("{ct:?}: {e}"));
        assert_eq!(out.answer.as_deref(), Some("streamed"), "{ct:?}");
    }
    // A type that merely starts like the SSE one is not SSE.
    let server = FakeServer::start();
    server.push(Reply::raw_body(200, "text/event-streamy", stream_body()));
    let mut agent = Agent::builder(server.transport())
        .http(fast_http())
        .build()
        .unwrap();
    assert!(matches!(agent.run_loop("hi"), Err(Error::Protocol { .. })));
}

// ---------------------------------------------------------------------------
// Class 4: streams that never end
// ---------------------------------------------------------------------------

/// `count` SSE comment events, sent `every` apart (about forever, for the
/// bounds used here).
fn comments_forever(count: usize, every: Duration) -> Reply {
    Reply::raw_sse(": keep-alive\n\n".repeat(count)).with_chunk_delay(every)
}

/// A stream of only comments ends at the idle bound with `Timeout`, though
/// each read gets bytes well within the read timeout.
#[test]
fn a_stream_of_only_comments_ends_at_the_idle_bound() {
    let server = FakeServer::start();
    // ~60 s of comments if nothing cuts it short.
    server.push(comments_forever(1200, Duration::from_millis(50)));
    server.push(Reply::text("next"));
    let idle = Duration::from_millis(300);
    let mut agent = streaming_agent(&server, fast_http().with_idle_timeout(idle));
    let started = Instant::now();
    let err = agent.run_loop("hi").unwrap_err();
    assert_timeout(&err, idle);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_valid_history(agent.messages());
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("next")
    );
}

/// Keep-alive data that is not a chat chunk (`{"type":"ping"}`) does not
/// reset the idle bound either.
#[test]
fn keep_alive_events_do_not_reset_the_idle_bound() {
    let server = FakeServer::start();
    let ping = "event: ping\ndata: {\"type\":\"ping\"}\n\n".repeat(1200);
    server.push(Reply::raw_sse(ping).with_chunk_delay(Duration::from_millis(50)));
    server.push(Reply::text("next"));
    let idle = Duration::from_millis(300);
    let mut agent = streaming_agent(&server, fast_http().with_idle_timeout(idle));
    let err = agent.run_loop("hi").unwrap_err();
    assert_timeout(&err, idle);
    assert_valid_history(agent.messages());
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("next")
    );
}

/// The idle bound defaults to the read timeout.
#[test]
fn the_idle_bound_defaults_to_the_read_timeout() {
    let server = FakeServer::start();
    server.push(comments_forever(1200, Duration::from_millis(50)));
    let read = Duration::from_millis(400);
    let mut agent = streaming_agent(&server, fast_http().with_read_timeout(read));
    let err = agent.run_loop("hi").unwrap_err();
    assert_timeout(&err, read);
}

/// A slow but live model, one token well within the idle bound each time,
/// with comments in between, completes, though the whole stream takes
/// longer than the bound: each token restarts it.
#[test]
fn a_slow_live_stream_under_the_idle_bound_completes() {
    let server = FakeServer::start();
    // Seven chunks 200 ms apart: 1.4 s in all, against a 1 s bound.
    server.push(
        Reply::text("one two three four five six")
            .with_chunk_chars(4)
            .with_garbage()
            .with_chunk_delay(Duration::from_millis(200)),
    );
    let mut agent = streaming_agent(
        &server,
        fast_http().with_idle_timeout(Duration::from_secs(1)),
    );
    assert_eq!(
        agent.run_loop("hi").unwrap().answer.as_deref(),
        Some("one two three four five six")
    );
}

/// A request deadline ends a live stream that goes on for too long.
#[test]
fn a_request_deadline_ends_a_live_stream() {
    let server = FakeServer::start();
    server.push(
        Reply::text("word ".repeat(2000))
            .with_chunk_chars(5)
            .with_chunk_delay(Duration::from_millis(20)),
    );
    server.push(Reply::text("next"));
    let deadline = Duration::from_millis(500);
    let mut agent = streaming_agent(&server, fast_http().with_request_deadline(deadline));
    let err = agent.run_loop("hi").unwrap_err();
    assert_timeout(&err, deadline);
    assert_valid_history(agent.messages());
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("next")
    );
}

/// The deadline also bounds a server that never answers and retries.
#[test]
fn a_request_deadline_bounds_silence_and_retries() {
    let server = FakeServer::start();
    server.push(Reply::hang());
    server.push(Reply::status(503, "busy").with_retry_after(60).repeat(3));
    let deadline = Duration::from_millis(400);
    for _ in 0..2 {
        let mut agent = Agent::builder(server.transport())
            .http(
                fast_http()
                    .with_request_deadline(deadline)
                    .with_retry_cap(Duration::from_secs(60))
                    .with_max_retries(5),
            )
            .build()
            .unwrap();
        let started = Instant::now();
        let err = agent.run_loop("hi").unwrap_err();
        assert_timeout(&err, deadline);
        assert!(started.elapsed() < Duration::from_secs(20));
    }
    // The first agent's hanging request and the second's 503: once the
    // deadline has passed during the retry wait, no attempt goes out.
    assert_eq!(server.chat_requests().len(), 2);
}

// ---------------------------------------------------------------------------
// Class 8b: what a server sends after `[DONE]`, and keep-alive
// ---------------------------------------------------------------------------

/// Streamed turns reuse one connection: the body is read to its end after
/// `[DONE]` (the chunked encoding's last chunk), so the connection goes
/// back to the pool instead of a new connect (and TLS handshake) per turn.
#[test]
fn streamed_turns_reuse_one_connection() {
    let server = FakeServer::start();
    server.push(Reply::text("one two").with_chunk_chars(3));
    server.push(Reply::tool_call("calculator", json!({"expression": "2*3"})));
    server.push(Reply::text("six"));
    let mut agent = Agent::builder(server.transport())
        .add_tool(pikuri::builtin::calculator())
        .streaming(true)
        .build()
        .unwrap();
    assert_eq!(
        agent.run_loop("a").unwrap().answer.as_deref(),
        Some("one two")
    );
    assert_eq!(agent.run_loop("b").unwrap().answer.as_deref(), Some("six"));
    assert_eq!(server.chat_requests().len(), 3);
    assert_eq!(
        server.connections(),
        1,
        "one connection for three streamed requests"
    );
}

/// Some bytes after `[DONE]` are read and ignored, and the connection is
/// still reused; more than the drain's budget (16 KiB) and the connection
/// is given up, the answer intact, the next turn on a new one.
#[test]
fn bytes_after_done_are_ignored_and_too_many_cost_only_the_connection() {
    let server = FakeServer::start();
    let garbage = |n: usize| format!("{}: ignored\n\n", "x".repeat(n));
    server.push(Reply::raw_sse(stream_body() + &garbage(100)));
    server.push(Reply::raw_sse(stream_body()));
    server.push(Reply::raw_sse(stream_body() + &garbage(1 << 20)));
    server.push(Reply::raw_sse(stream_body()));
    let mut agent = Agent::builder(server.transport())
        .streaming(true)
        .build()
        .unwrap();
    for (turn, connections) in [(1, 1), (2, 1), (3, 1), (4, 2)] {
        let out = agent.run_loop("hi").unwrap();
        assert_eq!(out.answer.as_deref(), Some("streamed"), "turn {turn}");
        assert_eq!(server.connections(), connections, "after turn {turn}");
    }
    assert_valid_history(agent.messages());
}

/// A raw server on loopback for two requests: each answered with a stream
/// body that has `[DONE]` and is then kept open until the test ends,
/// chunked (never sending the last chunk) or unframed (never closing).
fn kept_open_after_done(chunked: bool) -> (String, std::thread::JoinHandle<usize>) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for _ in 0..2 {
            let (mut stream, _) = listener.accept().unwrap();
            crate::util::read_request(&mut stream);
            let body = stream_body();
            let mut out = &stream;
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n";
            if chunked {
                let n = body.len();
                write!(
                    out,
                    "{head}Transfer-Encoding: chunked\r\n\r\n{n:x}\r\n{body}\r\n"
                )
            } else {
                write!(out, "{head}\r\n{body}")
            }
            .unwrap();
            out.flush().unwrap();
            kept.push(stream);
        }
        kept.len()
    });
    (base, server)
}

/// A server that keeps a body open after `[DONE]`: the turn ends with the
/// whole answer, and the next works on a new connection. Chunked (the last
/// chunk never comes), reading on for it costs at most the idle bound;
/// unframed (the body would end only when the server closes), nothing is
/// read after `[DONE]` at all.
#[test]
fn a_body_kept_open_after_done_costs_at_most_the_idle_bound() {
    for (chunked, idle) in [(true, Duration::from_millis(300)), (false, Duration::MAX)] {
        let (base, server) = kept_open_after_done(chunked);
        let transport = ChatTransport::new("m")
            .with_api_base(base)
            .with_context_window(Some(8192));
        // `Duration::MAX`: the idle bound defaults to the read timeout, 20 s.
        let http = if idle == Duration::MAX {
            fast_http()
        } else {
            fast_http().with_idle_timeout(idle)
        };
        let mut agent = Agent::builder(transport)
            .http(http)
            .streaming(true)
            .build()
            .unwrap();
        for turn in 0..2 {
            let started = Instant::now();
            let out = agent.run_loop("hi").unwrap();
            assert_eq!(out.answer.as_deref(), Some("streamed"), "{chunked} {turn}");
            // A bound on a hang, not a speed target: reading on past the
            // idle bound, or into an unframed body, waits for the 20 s read
            // timeout.
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{chunked} {turn}"
            );
        }
        drop(agent);
        assert_eq!(server.join().unwrap(), 2);
    }
}

// ---------------------------------------------------------------------------
// Class 9: the runtime context window; probe counts
// ---------------------------------------------------------------------------

fn probe_requests(server: &FakeServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| !r.path.ends_with("/chat/completions"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// Training-window figures are not the runtime window: `/v1/models`
/// `meta.n_ctx_train` and Ollama's `model_info.*.context_length` are not
/// reported.
#[test]
fn training_windows_are_not_reported() {
    let server = FakeServer::start();
    server.set_context_size(None);
    server.set_route(
        "GET",
        "/v1/models",
        200,
        json!({"data": [{"id": "fake-model", "meta": {"n_ctx_train": 131_072}}]}),
    );
    assert_eq!(server.transport().detect_context_window(), None);

    let server = FakeServer::start();
    server.set_context_size(None);
    server.set_route(
        "GET",
        "/v1/models",
        200,
        json!({"data": [{"id": "fake-model", "owned_by": "library"}]}),
    );
    server.set_route(
        "POST",
        "/api/show",
        200,
        json!({"model_info": {"llama.context_length": 131_072}}),
    );
    assert_eq!(server.transport().detect_context_window(), None);
}

/// An OpenAI-style server without any probe route: count the probes that
/// `build()` sends.
#[test]
fn an_unknown_server_gets_few_probes() {
    let server = FakeServer::start();
    server.set_context_size(None);
    let agent = Agent::builder(server.transport())
        .http(fast_http())
        .build()
        .unwrap();
    assert_eq!(agent.context_window_cap(), None);
    let probes = probe_requests(&server);
    assert!(
        probes.len() <= 3,
        "{} probes at build: {probes:?}",
        probes.len()
    );
    assert!(
        !probes.iter().any(|p| p.contains("/api/")),
        "Ollama probes against a server that does not look like Ollama: {probes:?}"
    );
}

/// A server that looks like Ollama (its `/v1/models` says `owned_by:
/// "library"`) still gets the Ollama probes.
#[test]
fn an_ollama_looking_server_gets_the_ollama_probes() {
    let server = FakeServer::start();
    server.set_context_size(None);
    server.set_route(
        "GET",
        "/v1/models",
        200,
        json!({"object": "list", "data": [{"id": "fake-model:latest", "object": "model", "owned_by": "library"}]}),
    );
    server.set_route(
        "GET",
        "/api/ps",
        200,
        json!({"models": [{"name": "fake-model:latest", "context_length": 8192}]}),
    );
    assert_eq!(server.transport().detect_context_window(), Some(8192));
}

// ---------------------------------------------------------------------------
// Class 10: a transport without a model
// ---------------------------------------------------------------------------

fn modelless(server: &FakeServer) -> ChatTransport {
    ChatTransport::default().with_api_base(server.base_url())
}

/// A server listing exactly one model: `build()` takes it, and the request
/// names it.
#[test]
fn a_missing_model_resolves_to_the_servers_only_one() {
    let server = FakeServer::start();
    server.set_model_id("the-only-one");
    server.push(Reply::text("hi"));
    for t in [modelless(&server), modelless(&server).with_model("  ")] {
        let mut agent = Agent::builder(t).http(fast_http()).build().unwrap();
        assert_eq!(agent.transport().model(), Some("the-only-one"));
        if server.remaining() > 0 {
            agent.run_loop("hello").unwrap();
            let body = server.chat_requests()[0].body.clone().unwrap();
            assert_eq!(body["model"], json!("the-only-one"));
        }
    }
}

/// A server listing several models, or none: `build()` fails and names
/// the ones on offer.
#[test]
fn a_missing_model_with_several_or_none_on_offer_fails_at_build() {
    let server = FakeServer::start();
    server.set_route(
        "GET",
        "/v1/models",
        200,
        json!({"data": [{"id": "alpha"}, {"id": "beta"}]}),
    );
    let err = Agent::builder(modelless(&server)).build().unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    let shown = err.to_string();
    assert!(shown.contains("alpha") && shown.contains("beta"), "{shown}");

    server.set_route("GET", "/v1/models", 200, json!({"data": []}));
    let err = Agent::builder(modelless(&server)).build().unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(server.chat_requests().is_empty());
}

/// A streaming agent on `server` with `http`, no system prompt.
fn streaming_agent(server: &FakeServer, http: HttpConfig) -> Agent {
    Agent::builder(server.transport())
        .http(http)
        .streaming(true)
        .build()
        .unwrap()
}

/// `err` is the timeout of the bound `after`.
fn assert_timeout(err: &Error, after: Duration) {
    assert!(
        matches!(err, Error::Timeout { after: d, .. } if *d == after),
        "{err:?}"
    );
}
