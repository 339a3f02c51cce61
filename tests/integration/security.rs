//! Security properties: the API key never leaks (formatting, events, logs,
//! errors, redirects), response size limits hold against endless servers,
//! model text never reaches a terminal raw, and `read_file` stays in its root.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pikuri::builtin;
use pikuri::listeners::{JsonLines, Terminal};
use pikuri::testing::{FakeServer, Recorder, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, ChatTransport, Error, HttpConfig, Role, listeners::InMemoryEventList};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history, closed_port, fast_http, read_request};

/// A key with no dictionary words, so that any 6-character piece of it
/// found in the output is a leak and not a coincidence.
const KEY: &str = "sk-Qz7vX2mK9pL4wR8tN6yB3cJ5hF1dG0aS";

/// The pieces of [`KEY`] a leak check looks for: the whole key and every
/// 6-character window (a hex dump splits the key over rows of 16 bytes).
fn key_pieces() -> Vec<&'static str> {
    let mut pieces = vec![KEY];
    pieces.extend((0..=KEY.len() - 6).map(|i| &KEY[i..i + 6]));
    pieces
}

/// Panics if `text` holds the key or a piece of it.
#[track_caller]
fn assert_no_key(what: &str, text: &str) {
    for piece in key_pieces() {
        if let Some(at) = text.find(piece) {
            let mut from = at.saturating_sub(80);
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            let mut to = (at + piece.len() + 80).min(text.len());
            while !text.is_char_boundary(to) {
                to += 1;
            }
            panic!(
                "{what} leaks the API key (found {piece:?}) in: …{}…",
                &text[from..to]
            );
        }
    }
}

/// A `Write` into a shared buffer.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().clone()).expect("UTF-8 output")
    }
}

fn keyed(server: &FakeServer) -> ChatTransport {
    server.transport().with_api_key(KEY)
}

// ---------------------------------------------------------------------------
// A capturing logger
// ---------------------------------------------------------------------------

/// The process-wide test logger: it records every line while a capture is
/// on, from any thread and any target, at every level. `log::set_logger`
/// works once per process, so it is installed once and used by this module
/// only; outside a capture it drops everything and the max level is `Off`.
struct CaptureLogger {
    on: AtomicBool,
    lines: StdMutex<Vec<String>>,
}

static LOGGER: CaptureLogger = CaptureLogger {
    on: AtomicBool::new(false),
    lines: StdMutex::new(Vec::new()),
};
static INSTALLED: OnceLock<()> = OnceLock::new();
/// One capture at a time.
static CAPTURE: StdMutex<()> = StdMutex::new(());

impl log::Log for CaptureLogger {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.on.load(Ordering::SeqCst) {
            let line = format!("{} {}: {}", record.level(), record.target(), record.args());
            self.lines
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(line);
        }
    }

    fn flush(&self) {}
}

/// Run `f` with every log line of the process captured at `Trace`.
pub(crate) fn capture_logs<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    INSTALLED.get_or_init(|| {
        log::set_logger(&LOGGER).expect("no other logger is installed in the test binary");
    });
    let _one = CAPTURE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    LOGGER
        .lines
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear();
    log::set_max_level(log::LevelFilter::Trace);
    LOGGER.on.store(true, Ordering::SeqCst);
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    LOGGER.on.store(false, Ordering::SeqCst);
    log::set_max_level(log::LevelFilter::Off);
    let lines = std::mem::take(
        &mut *LOGGER
            .lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    match out {
        Ok(v) => (v, lines),
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Rebuild the bytes of ureq-proto's trace hex dumps (`7365 6372 ...  ascii`)
/// so that a key split over several rows is still found.
fn hex_dump_bytes(lines: &[String]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for line in lines {
        let Some((_, msg)) = line.split_once(": ") else {
            continue;
        };
        // 8 groups of 4 hex digits (or `--` padding), then the ASCII column.
        let groups: Vec<&str> = msg.split(' ').take(8).collect();
        if groups.len() != 8
            || !groups
                .iter()
                .all(|g| g.len() == 4 && g.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
        {
            continue;
        }
        for g in groups {
            for pair in [&g[..2], &g[2..]] {
                if let Ok(b) = u8::from_str_radix(pair, 16) {
                    bytes.push(b);
                }
            }
        }
    }
    bytes
}

/// Everything a key could leak through in a run: two turns (streamed, a
/// tool call, a model switch to another keyed transport), a 401, a retried
/// 503, a refused connection. Returns the texts to search.
fn run_keyed_session() -> Vec<(String, String)> {
    let mut texts = Vec::new();
    let server = FakeServer::start();
    let other = FakeServer::start();
    server.push(Reply::tool_call("echo", json!({"text": "hi"})));
    server.push(Reply::text("done"));
    server.push(Reply::status(503, "busy"));
    server.push(Reply::text("after retry"));
    other.push(Reply::text("other model"));
    other.push(Reply::status(401, "invalid api key"));

    let jsonl = Buf::default();
    let term = Buf::default();
    let rec = InMemoryEventList::new();
    let echo = FnTool::new(
        "echo",
        "Echoes.",
        Parameters::builder().required_string("text", "t").build(),
        |a, _| Ok(a["text"].as_str().unwrap_or("").to_string()),
    );
    let mut cfg = Agent::builder(keyed(&server));
    cfg = cfg
        .http(fast_http())
        .streaming(true)
        .add_tool(echo)
        .add_listener(rec.clone())
        .add_listener(JsonLines::new(jsonl.clone()))
        .add_listener(Terminal::new(term.clone()));
    texts.push(("Configurator Debug".into(), format!("{cfg:?}")));
    let mut agent = cfg.build().expect("builds");
    texts.push(("Agent Debug".into(), format!("{agent:?}")));
    texts.push(("Agent Display".into(), agent.to_string()));
    texts.push((
        "ChatTransport Debug".into(),
        format!("{:?}", agent.transport()),
    ));
    texts.push((
        "ChatTransport Display".into(),
        agent.transport().to_string(),
    ));
    texts.push((
        "ChatTransport JSON".into(),
        serde_json::to_string(&agent.transport()).expect("serializes"),
    ));

    agent.run_loop("first").expect("first turn");
    agent.run_loop("second").expect("retried turn");
    let switched = other.transport().with_api_key(format!("{KEY}-other"));
    agent
        .run_loop_with("third", switched.clone())
        .expect("switched turn");
    let unauthorized = agent.run_loop_with("fourth", switched).expect_err("401");
    assert_eq!(unauthorized.status(), Some(401));
    texts.push(("401 Display".into(), unauthorized.to_string()));
    texts.push(("401 Debug".into(), format!("{unauthorized:?}")));

    let refused = ChatTransport::new("m")
        .with_api_base(format!("http://127.0.0.1:{}/v1", closed_port()))
        .with_api_key(KEY);
    let transport_err = agent.run_loop_with("fifth", refused).expect_err("refused");
    assert!(
        matches!(transport_err, Error::Connect { .. }),
        "{transport_err:?}"
    );
    let mut chain = transport_err.to_string();
    let mut source = std::error::Error::source(&transport_err);
    while let Some(s) = source {
        let _ = write!(chain, " <- {s} / {s:?}");
        source = s.source();
    }
    texts.push(("transport error Display chain".into(), chain));
    texts.push(("transport error Debug".into(), format!("{transport_err:?}")));

    for e in rec.events() {
        texts.push((format!("Event Debug {}", e.kind()), format!("{e:?}")));
    }
    texts.push(("History JSON".into(), agent.export_history().to_json()));
    texts.push(("Agent Debug after".into(), format!("{agent:?}")));
    agent.close();
    texts.push(("JsonLines".into(), jsonl.text()));
    texts.push(("Terminal".into(), term.text()));
    // The key did travel: the server saw it, so the checks above are not vacuous.
    let auth = server.chat_requests()[0]
        .header("authorization")
        .map(str::to_string);
    assert_eq!(auth.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    assert!(rec.kinds().contains(&"model_switched"));
    texts
}

#[test]
fn api_key_never_in_debug_display_events_or_errors() {
    for (what, text) in run_keyed_session() {
        assert_no_key(&what, &text);
    }
}

/// Whether `line` is one row of ureq-proto's `trace` hex dump of the raw
/// HTTP bytes (see [`api_key_never_in_any_log_line_at_trace`]).
fn is_ureq_proto_wire_dump(line: &str) -> bool {
    line.starts_with("TRACE ureq_proto")
}

/// No log line carries the key, at any level, from pikuri, ureq (whose
/// request and response lines redact `Authorization`) or anything else,
/// except ureq-proto's raw wire dump at `trace` (the ignored test below).
#[test]
fn api_key_never_in_log_lines_except_the_wire_dump() {
    let (_, lines) = capture_logs(run_keyed_session);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("TRACE pikuri") && l.contains("request body")),
        "the capture saw pikuri's trace lines ({} lines)",
        lines.len()
    );
    assert!(
        lines.iter().any(|l| l.starts_with("DEBUG ureq")),
        "the capture saw ureq's debug lines"
    );
    for line in lines.iter().filter(|l| !is_ureq_proto_wire_dump(l)) {
        assert_no_key("a log line", line);
    }
}

/// Every captured line at `Trace`, from every crate, never carries the key.
///
/// Fails: ureq-proto 0.7 (`ureq_proto::util::log_data`, called when its
/// request writer drops) logs every byte ureq sends at `trace`, as 16-byte
/// hex/ASCII rows, so `authorization: Bearer <key>` is spread over two or
/// three rows. ureq has no feature to turn that off and pikuri cannot filter
/// a host's logger; the crate docs ("Log levels") tell hosts to cap the
/// `ureq_proto` target below `trace`.
#[test]
#[ignore = "known leak in a dependency: ureq-proto hex-dumps request headers at trace level"]
fn api_key_never_in_any_log_line_at_trace() {
    let (_, lines) = capture_logs(run_keyed_session);
    assert!(!lines.is_empty());
    let dumped = String::from_utf8_lossy(&hex_dump_bytes(&lines)).into_owned();
    assert_no_key("the hex dumps of the log, reassembled", &dumped);
    for line in &lines {
        assert_no_key("a log line", line);
    }
}

/// A session recorded through `testing::Recorder` forwards the key to the
/// upstream but keeps it out of the cassette (and its file) and out of
/// `Debug`.
#[test]
fn api_key_never_in_a_recorded_cassette() {
    let upstream = FakeServer::start();
    upstream.push(Reply::tool_call("echo", json!({"text": "hi"})));
    upstream.push(Reply::text("recorded answer"));
    let recorder = Recorder::start(&upstream.base_url());
    let echo = FnTool::new(
        "echo",
        "Echoes.",
        Parameters::builder().required_string("text", "t").build(),
        |a, _| Ok(a["text"].as_str().unwrap_or("").to_string()),
    );
    let mut agent = Agent::builder(recorder.transport_for("fake-model").with_api_key(KEY))
        .http(fast_http())
        .streaming(true)
        .add_tool(echo)
        .build()
        .expect("builds");
    agent.run_loop("record me").expect("recorded turn");
    assert_no_key("Agent Debug on a recorder", &format!("{agent:?}"));
    // The upstream got the key: forwarding works, so the check means something.
    let auth = upstream.chat_requests()[0]
        .header("authorization")
        .map(str::to_string);
    assert_eq!(auth.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    let cassette = recorder.cassette();
    assert!(cassette.interactions().len() >= 2);
    assert_no_key("the cassette JSON", &cassette.to_json());
    assert_no_key("the cassette Debug", &format!("{cassette:?}"));
    assert_no_key("the recorder Debug", &format!("{recorder:?}"));
    let (_tree, root, _) = temp_tree();
    let file = root.join("session.cassette.json");
    recorder.save(&file).expect("saves");
    let saved = std::fs::read_to_string(&file).expect("reads");
    assert!(saved.contains("/v1/chat/completions"), "{saved}");
    assert_no_key("the saved cassette", &saved);
}

// ---------------------------------------------------------------------------
// Redirects
// ---------------------------------------------------------------------------

#[test]
fn a_redirect_to_another_host_does_not_carry_the_key() {
    for code in [301u16, 302, 303, 307, 308] {
        let first = FakeServer::start();
        let second = FakeServer::start();
        second.push(Reply::text("redirected answer"));
        let location = format!("{}/chat/completions", second.base_url());
        first.push(
            Reply::raw_body(code, "application/json", "{}").with_header("Location", &location),
        );
        let mut agent = Agent::builder(keyed(&first))
            .http(fast_http().with_max_retries(0))
            .build()
            .expect("builds");
        let result = agent.run_loop("hello");
        let label = format!("{code}: {result:?}");
        // The first server got the key (so the check below means something).
        assert_eq!(
            first
                .requests()
                .last()
                .and_then(|r| r.header("authorization")),
            Some(format!("Bearer {KEY}").as_str()),
            "{label}"
        );
        for r in second.requests() {
            assert_eq!(
                r.header("authorization"),
                None,
                "{label}: the redirect target got the key: {r:?}"
            );
            assert_no_key(&label, &format!("{r:?}"));
        }
        match &result {
            Ok(out) => assert_eq!(out.answer.as_deref(), Some("redirected answer"), "{label}"),
            Err(e) => {
                assert_no_key(&label, &format!("{e} {e:?}"));
                assert!(!e.to_string().is_empty());
            }
        }
        assert_valid_history(agent.messages());
        eprintln!(
            "[security] redirect {code}: second server saw {} request(s) ({}); result {}",
            second.requests().len(),
            second
                .requests()
                .iter()
                .map(|r| format!("{} {}", r.method, r.path))
                .collect::<Vec<_>>()
                .join(", "),
            match &result {
                Ok(_) => "ok".to_string(),
                Err(e) => e.to_string(),
            }
        );
    }
}

// ---------------------------------------------------------------------------
// Size limits against endless servers
// ---------------------------------------------------------------------------

/// `VmRSS` of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Samples `VmRSS` every few milliseconds until dropped; `peak` is the
/// highest value seen (a freed buffer no longer shows in a later reading).
struct RssSampler {
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<u64>>,
}

impl RssSampler {
    fn start() -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handle = thread::spawn(move || {
            let mut peak = rss_kib();
            while !s.load(Ordering::SeqCst) {
                peak = peak.max(rss_kib());
                thread::sleep(Duration::from_millis(2));
            }
            peak.max(rss_kib())
        });
        RssSampler {
            stop,
            handle: Some(handle),
        }
    }

    fn peak(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.take().map_or(0, |h| h.join().expect("sampler"))
    }
}

/// A raw HTTP server for one connection: read the request, send `head`,
/// then `unit` over and over until the client goes away, 60 s pass or
/// `cap` bytes were sent (then it closes the connection).
/// Returns the address and the number of body bytes sent.
fn endless_server(
    head: &'static str,
    unit: Vec<u8>,
    cap: u64,
) -> (String, thread::JoinHandle<u64>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let handle = thread::spawn(move || {
        let Ok((mut conn, _)) = listener.accept() else {
            return 0;
        };
        read_request(&mut conn);
        // Drain anything else the client sends, so it never blocks on us.
        if let Ok(mut rd) = conn.try_clone() {
            thread::spawn(move || {
                let mut sink = [0u8; 4096];
                while matches!(rd.read(&mut sink), Ok(n) if n > 0) {}
            });
        }
        if conn.write_all(head.as_bytes()).is_err() {
            return 0;
        }
        let mut block = Vec::with_capacity(64 * 1024);
        while block.len() < 64 * 1024 {
            block.extend_from_slice(&unit);
        }
        let started = Instant::now();
        let mut sent = 0u64;
        while started.elapsed() < Duration::from_secs(60) && sent < cap {
            if conn.write_all(&block).is_err() {
                break;
            }
            sent += block.len() as u64;
        }
        let _ = conn.shutdown(std::net::Shutdown::Both);
        sent
    });
    (format!("http://{addr}/v1"), handle)
}

/// Read one request head and its `Content-Length` body.
const MIB: usize = 1024 * 1024;

struct Endless {
    name: &'static str,
    streaming: bool,
    head: &'static str,
    unit: &'static [u8],
}

#[test]
fn endless_responses_end_in_a_bounded_error() {
    let cases = [
        Endless {
            name: "SSE without newlines",
            streaming: true,
            head: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: ",
            unit: b"aaaaaaaaaaaaaaaa",
        },
        Endless {
            name: "SSE: one event of endless data lines",
            streaming: true,
            head: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
            unit: b"data: xxxxxxxxxx\n",
        },
        Endless {
            name: "JSON body without end",
            streaming: false,
            head: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"a\":\"",
            unit: b"bbbbbbbbbbbbbbbb",
        },
        Endless {
            name: "error body without end",
            streaming: false,
            head: "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n",
            unit: b"cccccccccccccccc",
        },
    ];
    for case in cases {
        let (base, server) = endless_server(case.head, case.unit.to_vec(), u64::MAX);
        let before = rss_kib();
        let sampler = RssSampler::start();
        let started = Instant::now();
        let mut agent = Agent::builder(
            ChatTransport::new("m")
                .with_api_base(base)
                .with_context_window(Some(4096)),
        )
        .streaming(case.streaming)
        .http(bounded_http())
        .build()
        .expect("builds");
        let result = agent.run_loop("hello");
        let took = started.elapsed();
        let peak = sampler.peak();
        // The failed round appended nothing.
        assert_valid_history(agent.messages());
        assert_eq!(agent.messages().len(), 1, "{}", case.name);
        drop(agent);
        let sent = server.join().expect("server thread");
        let shown = match &result {
            Err(Error::Http {
                status, message, ..
            }) => {
                format!(
                    "http {status}, message of {} chars",
                    message.chars().count()
                )
            }
            other => format!("{other:?}"),
        };
        eprintln!(
            "[security] {}: {shown} after {took:?}; server sent {} KiB; VmRSS {before} -> peak {peak} KiB",
            case.name,
            sent / 1024
        );
        match (&result, case.name) {
            (
                Err(Error::Http {
                    status: 400,
                    message,
                    ..
                }),
                "error body without end",
            ) => {
                assert!(message.chars().count() <= 501, "{}", case.name);
            }
            (Err(Error::Protocol { .. }), _) => {}
            _ => panic!("{}: expected a protocol error, got {result:?}", case.name),
        }
        assert!(
            peak.saturating_sub(before) < 64 * 1024,
            "{}: VmRSS peaked at {peak} KiB (from {before} KiB)",
            case.name
        );
        assert!(
            took < Duration::from_secs(20),
            "{}: took {took:?}",
            case.name
        );
    }
}

// ---------------------------------------------------------------------------
// Terminal output
// ---------------------------------------------------------------------------

/// Text a hostile model (or a page it fetched) might produce.
const HOSTILE: &str = "clear\x1b[2J title\x1b]0;pwned\x07 bidi\u{202e}txt.exe zw\u{200b}sp \
                       cr\roverwrite bs\x08x csi\u{9b}31m bell\x07 tag\u{e0041}";

/// Characters that must never reach a terminal raw.
fn raw_hazards(out: &str, allow_own_styles: bool) -> Vec<String> {
    const OWN: [&str; 7] = [
        "\x1b[2m", "\x1b[0m", "\x1b[1m", "\x1b[36m", "\x1b[33m", "\x1b[K", "\r\x1b[K",
    ];
    let mut found = Vec::new();
    let chars: Vec<(usize, char)> = out.char_indices().collect();
    for (n, &(i, c)) in chars.iter().enumerate() {
        let next = chars.get(n + 1).map(|&(_, c)| c);
        let bad = match c {
            '\x1b' => !(allow_own_styles && OWN.iter().any(|o| out[i..].starts_with(o))),
            '\r' => next != Some('\n') && !(allow_own_styles && out[i..].starts_with("\r\x1b[K")),
            '\n' | '\t' => false,
            '\0'..='\x1f'
            | '\x7f'..='\u{9f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200b}'..='\u{200f}'
            | '\u{e0000}'..='\u{e007f}'
            | '\u{feff}' => true,
            _ => false,
        };
        if bad {
            found.push(format!("{c:?} at byte {i}"));
        }
    }
    found
}

#[test]
fn terminal_never_prints_control_sequences_from_the_model() {
    for color in [false, true] {
        for streaming in [true, false] {
            let server = FakeServer::start();
            // A retried error (its message shows in the Retrying line), a
            // call with hostile arguments and reasoning, a call to a tool
            // with a hostile name, a hostile streamed answer.
            server.push(Reply::status(503, HOSTILE));
            server.push(
                Reply::tool_call("echo", json!({"text": HOSTILE}))
                    .with_reasoning(HOSTILE)
                    .with_text(HOSTILE),
            );
            server.push(Reply::tool_call(HOSTILE, json!({})));
            server.push(
                Reply::text(HOSTILE)
                    .with_reasoning(HOSTILE)
                    .with_chunk_chars(3),
            );
            let out = Buf::default();
            let echo = FnTool::new(
                "echo",
                "Echoes.",
                Parameters::builder().required_string("text", "t").build(),
                |a, _| Ok(format!("{}\n{}", a["text"].as_str().unwrap_or(""), HOSTILE)),
            );
            let (mut agent, _) = agent_with(&server, |c| {
                c.streaming(streaming)
                    .add_tool(echo)
                    .add_listener(Terminal::new(out.clone()).with_color(color))
            });
            agent.run_loop("render this").expect("turn");
            agent.close();
            let text = out.text();
            let label = format!("color={color} streaming={streaming}");
            let found = raw_hazards(&text, color);
            assert!(found.is_empty(), "{label}: raw {found:?} in:\n{text:?}");
            if !color {
                assert!(!text.contains('\x1b'), "{label}");
            }
            // The hazards are shown, escaped.
            assert!(text.contains("retrying after"), "{label}: {text}");
            assert!(text.contains(r"\x1b[2J"), "{label}: {text}");
            assert!(text.contains(r"\u{202e}"), "{label}: {text}");
        }
    }
}

/// A host prints errors for people (`eprintln!("error: {e}")`), and an
/// error's text quotes the server: an HTTP error's message, a chunk that is
/// not JSON. `Display` must not hand the terminal raw control sequences;
/// the `message` field keeps the server's exact text for programs.
#[test]
fn error_display_never_carries_raw_control_sequences() {
    let cases: [(&str, Reply, bool); 4] = [
        ("http error message", Reply::status(400, HOSTILE), false),
        (
            "body that is not JSON",
            Reply::raw_body(200, "application/json", format!("{{{HOSTILE}")),
            false,
        ),
        (
            "chunk that is not JSON",
            Reply::raw_sse(format!("data: {{{HOSTILE}\n\n")),
            true,
        ),
        (
            "error member mid-stream",
            Reply::raw_sse(format!(
                "data: {}\n\n",
                json!({"error": {"message": HOSTILE}})
            )),
            true,
        ),
    ];
    for (name, reply, streaming) in cases {
        let server = FakeServer::start();
        server.push(reply);
        let (mut agent, _) = agent_with(&server, |c| {
            c.streaming(streaming).http(fast_http().with_max_retries(0))
        });
        let err = agent.run_loop("hi").expect_err(name);
        let shown = err.to_string();
        let found = raw_hazards(&shown, false);
        assert!(found.is_empty(), "{name}: raw {found:?} in {shown:?}");
        if let Error::Http { message, .. } = &err {
            assert_eq!(message, HOSTILE, "{name}: the field keeps the exact text");
        }
    }
}

// ---------------------------------------------------------------------------
// read_file confinement
// ---------------------------------------------------------------------------

struct TempTree(PathBuf);

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `base/root/{inside.txt, sub/ok.txt, link_file, link_dir, sub/up}` and
/// `base/outside/secret.txt`; the links point outside (`sub/up` to the root).
fn temp_tree() -> (TempTree, PathBuf, PathBuf) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let base = std::env::temp_dir().join(format!("pikuri-sec-{}-{nanos}", std::process::id()));
    let root = base.join("root");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(root.join("inside.txt"), "visible").expect("write");
    std::fs::write(root.join("sub/ok.txt"), "also visible").expect("write");
    std::fs::write(outside.join("secret.txt"), "TOPSECRET-4711").expect("write");
    symlink(&outside.join("secret.txt"), &root.join("link_file"));
    symlink(&outside, &root.join("link_dir"));
    symlink(&root, &root.join("sub/up"));
    (TempTree(base), root, outside)
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
}

#[cfg(not(unix))]
fn symlink(_: &Path, _: &Path) {}

#[test]
fn read_file_cannot_escape_its_root() {
    let (_tree, root, outside) = temp_tree();
    let secret = outside.join("secret.txt");
    let escapes: Vec<String> = vec![
        "../outside/secret.txt".into(),
        "sub/../../outside/secret.txt".into(),
        "./../outside/secret.txt".into(),
        "sub/./../../outside/secret.txt".into(),
        "..".into(),
        secret.display().to_string(),
        format!("/{}", secret.display()),
        "/etc/passwd".into(),
        "link_file".into(),
        "link_dir/secret.txt".into(),
        "./link_dir/secret.txt".into(),
        "sub/up/link_file".into(),
        "sub/up/../outside/secret.txt".into(),
        "inside.txt\0../outside/secret.txt".into(),
        "~/../outside/secret.txt".into(),
        "%2e%2e/outside/secret.txt".into(),
        "..\\outside\\secret.txt".into(),
        "link_dir".into(),
    ];
    let allowed = [
        ("inside.txt", "visible"),
        ("sub/up/inside.txt", "visible"),
        ("sub/ok.txt", "also visible"),
    ];

    let server = FakeServer::start();
    let mut calls: Vec<(&str, serde_json::Value)> = escapes
        .iter()
        .map(|p| ("read_file", json!({ "path": p })))
        .collect();
    calls.extend(
        allowed
            .iter()
            .map(|(p, _)| ("read_file", json!({ "path": p }))),
    );
    calls.push(("list_dir", json!({ "path": "link_dir" })));
    calls.push(("list_dir", json!({ "path": "../outside" })));
    calls.push(("list_dir", json!({ "path": outside.display().to_string() })));
    calls.push(("list_dir", json!({})));
    let n_calls = calls.len();
    server.push(Reply::tool_calls(calls));
    server.push(Reply::text("done"));
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(builtin::read_file(&root))
            .add_tool(builtin::list_dir(&root))
    });
    agent.run_loop("read everything").expect("turn");
    assert_valid_history(agent.messages());
    let observations: Vec<&str> = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(observations.len(), n_calls);
    for (path, obs) in escapes.iter().zip(&observations) {
        assert!(
            obs.starts_with("Error:"),
            "read_file({path:?}) was not refused: {obs}"
        );
        assert!(
            !obs.contains("TOPSECRET"),
            "read_file({path:?}) leaked: {obs}"
        );
    }
    for ((path, want), obs) in allowed.iter().zip(&observations[escapes.len()..]) {
        assert_eq!(obs, want, "read_file({path:?})");
    }
    let lists = &observations[escapes.len() + allowed.len()..];
    for obs in &lists[..3] {
        assert!(obs.starts_with("Error:"), "list_dir escaped: {obs}");
        assert!(!obs.contains("secret.txt"), "list_dir leaked: {obs}");
    }
    assert!(lists[3].contains("inside.txt"), "{}", lists[3]);
    // Nothing outside the root reached the model in any request either.
    for req in server.chat_requests() {
        assert!(!req.raw_body.contains("TOPSECRET"));
    }
}

/// A server that streams valid content deltas forever: each event is small,
/// so no line or event limit trips, but the answer grows without end. The
/// total is bounded by `max_body_bytes` (the server stops after 64 MiB so
/// that a regression fails instead of exhausting memory).
#[test]
fn endless_valid_deltas_are_bounded_by_max_body_bytes() {
    let unit = format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n",
        "a".repeat(1000)
    );
    let (base, server) = endless_server(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
        unit.into_bytes(),
        64 * MIB as u64,
    );
    let before = rss_kib();
    let sampler = RssSampler::start();
    let started = Instant::now();
    let deltas = Arc::new(AtomicU64::new(0));
    let d = Arc::clone(&deltas);
    let mut agent = Agent::builder(
        ChatTransport::new("m")
            .with_api_base(base)
            .with_context_window(Some(4096)),
    )
    .streaming(true)
    .add_listener(move |e: &pikuri::Event| {
        if let pikuri::Event::AssistantDelta { content, .. } = e {
            d.fetch_add(content.len() as u64, Ordering::Relaxed);
        }
    })
    .http(bounded_http())
    .build()
    .expect("builds");
    let result = agent.run_loop("hello");
    let took = started.elapsed();
    let peak = sampler.peak();
    assert_eq!(agent.messages().len(), 1, "nothing appended");
    drop(agent);
    let sent = server.join().expect("server thread");
    eprintln!(
        "[security] endless valid deltas: {result:?} after {took:?}; server sent {} KiB; \
         {} KiB of deltas reached the listener; VmRSS {before} -> peak {peak} KiB",
        sent / 1024,
        deltas.load(Ordering::Relaxed) / 1024
    );
    assert!(
        matches!(result, Err(Error::Protocol { .. })),
        "expected a protocol error, got {result:?} after {} KiB",
        sent / 1024
    );
    assert!(
        peak.saturating_sub(before) < 64 * 1024,
        "VmRSS peaked at {peak} KiB (from {before} KiB)"
    );
    assert!(deltas.load(Ordering::Relaxed) <= 4 * MIB as u64);
}

/// Settings of the endless-response tests: no retries, and limits far below
/// what an endless server sends (1 MiB lines, 4 MiB bodies).
fn bounded_http() -> HttpConfig {
    HttpConfig::default()
        .with_max_retries(0)
        .with_read_timeout(Duration::from_secs(20))
        .with_max_line_bytes(MIB)
        .with_max_body_bytes(4 * MIB as u64)
}
