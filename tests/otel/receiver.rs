//! A real OTLP/HTTP receiver: rotel's `rotel-agent` (PyPI `rotel`, cached by
//! `scripts/otlp-receiver.sh`), which decodes OTLP JSON into the protobuf
//! types (and answers 400 to what does not decode) and prints each span it
//! decoded in its debug log. The test exports a turn with a tool and a
//! sub-agent to it and reads the spans back from that log: names, ids,
//! parent links, kinds, status and attributes; and a turn whose guard
//! replaced a result, whose `pikuri.guard` span event it reads back.
//!
//! Skipped unless `PIKURI_OTLP_RECEIVER` names the binary; a failure when
//! `PIKURI_REQUIRE_OTLP=1` (as `scripts/otlp-receiver.sh test` sets it).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pikuri::otel::{OtlpConfig, OtlpExporter};
use pikuri::testing::FakeServer;

use crate::collector::run_turn;

/// The receiver binary, or `None` after a skip notice.
fn receiver() -> Option<String> {
    let require = std::env::var("PIKURI_REQUIRE_OTLP").as_deref() == Ok("1");
    match std::env::var("PIKURI_OTLP_RECEIVER") {
        Ok(p) if std::path::Path::new(&p).is_file() => Some(p),
        _ if require => panic!("PIKURI_REQUIRE_OTLP=1 but PIKURI_OTLP_RECEIVER names no file"),
        _ => {
            eprintln!("skipped: no OTLP receiver (scripts/otlp-receiver.sh test runs this)");
            None
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The running receiver and what it printed; killed on drop.
struct Rotel {
    child: Child,
    log: Arc<Mutex<String>>,
    port: u16,
}

impl Rotel {
    fn start(bin: &str) -> Rotel {
        let (port, grpc) = (free_port(), free_port());
        let mut child = Command::new(bin)
            .args([
                "start",
                "--exporter",
                "blackhole",
                "--debug-log",
                "traces",
                "--debug-log",
                "metrics",
                "--debug-log-verbosity",
                "detailed",
                "--otlp-http-endpoint",
                &format!("127.0.0.1:{port}"),
                "--otlp-grpc-endpoint",
                &format!("127.0.0.1:{grpc}"),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rotel-agent starts");
        let log = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for pipe in [
            Box::new(out) as Box<dyn std::io::Read + Send>,
            Box::new(err),
        ] {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut l = log.lock();
                    l.push_str(&line);
                    l.push('\n');
                }
            });
        }
        let r = Rotel { child, log, port };
        // Bounded: up to 20 s for the receiver to listen.
        for _ in 0..400 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return r;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("rotel-agent did not listen; it printed:\n{}", r.log.lock());
    }

    fn text(&self) -> String {
        // Its own log lines are coloured; the span dump is plain.
        let raw = self.log.lock().clone();
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One span as the debug log printed it.
#[derive(Debug, Default)]
struct Printed {
    trace: String,
    parent: String,
    id: String,
    name: String,
    kind: String,
    status: String,
    attrs: HashMap<String, String>,
}

fn parse(text: &str) -> Vec<Printed> {
    let mut spans: Vec<Printed> = Vec::new();
    let mut in_attrs = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Span #") {
            spans.push(Printed::default());
            in_attrs = false;
            continue;
        }
        let Some(s) = spans.last_mut() else { continue };
        let field = |name: &str| {
            t.strip_prefix(name)
                .and_then(|r| r.trim_start().strip_prefix(':'))
                .map(|v| v.trim().to_string())
        };
        if let Some(v) = field("Trace ID") {
            s.trace = v;
        } else if let Some(v) = field("Parent ID") {
            s.parent = v;
        } else if let Some(v) = field("ID") {
            s.id = v;
        } else if let Some(v) = field("Name") {
            s.name = v;
        } else if let Some(v) = field("Kind") {
            s.kind = v;
        } else if let Some(v) = field("Status code") {
            s.status = v;
        } else if t == "Attributes:" {
            in_attrs = true;
        } else if t == "Events:" || t.starts_with("ResourceSpans") || t.starts_with("ScopeSpans") {
            in_attrs = false;
        } else if in_attrs
            && let Some((k, v)) = t.strip_prefix("-> ").and_then(|kv| kv.split_once(": "))
        {
            s.attrs.insert(k.to_string(), v.to_string());
        }
    }
    spans
}

#[test]
fn receiver_gets_the_turn() {
    let Some(bin) = receiver() else { return };
    let rotel = Rotel::start(&bin);
    let server = FakeServer::start();
    let model = server.transport().model().unwrap().to_string();
    let config = OtlpConfig::new(format!("http://127.0.0.1:{}", rotel.port))
        .with_service_name("pikuri-receiver-test");
    let exporter = OtlpExporter::new(config).with_transport(&server.transport());
    let handle = exporter.handle();
    run_turn(&server, exporter);
    // The receiver answered 200 to every span: it decoded the JSON.
    assert_eq!(
        (handle.exported_spans(), handle.dropped_spans()),
        (8, 0),
        "{}",
        rotel.text()
    );

    // It prints what it decoded after its batch timeout: wait, bounded.
    let mut spans = Vec::new();
    for _ in 0..200 {
        spans = parse(&rotel.text());
        if spans.len() >= 8 && rotel.text().contains("gen_ai.client.operation.duration") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = rotel.text();
    assert_eq!(spans.len(), 8, "{text}");
    assert!(
        text.contains("service.name: Str(pikuri-receiver-test)"),
        "{text}"
    );
    // The metrics request decoded too (this rotel prints a histogram's name
    // and unit, not its points: "DataType: Empty").
    assert!(
        text.contains("-> Name: gen_ai.client.token.usage"),
        "{text}"
    );
    assert!(text.contains("-> Unit: {token}"), "{text}");
    assert!(
        text.contains("-> Name: gen_ai.client.operation.duration"),
        "{text}"
    );
    let one = |name: &str| {
        let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "{name}: {text}");
        found[0]
    };
    let main = one("invoke_agent agent");
    let delegate = one("execute_tool agent");
    let clerk = one("invoke_agent clerk 0");
    let add = one("execute_tool add");
    assert_eq!(main.parent, "");
    assert_eq!(delegate.parent, main.id);
    assert_eq!(clerk.parent, delegate.id);
    assert_eq!(add.parent, clerk.id);
    assert!(
        spans
            .iter()
            .all(|s| s.trace == main.trace && s.trace.len() == 32)
    );
    let chats: Vec<_> = spans
        .iter()
        .filter(|s| s.name == format!("chat {model}"))
        .collect();
    assert_eq!(chats.len(), 4, "{text}");
    for c in &chats {
        assert_eq!(c.kind, "SPAN_KIND_CLIENT");
        assert!(c.parent == main.id || c.parent == clerk.id);
        assert_eq!(
            c.attrs.get("gen_ai.operation.name").map(String::as_str),
            Some("Str(chat)")
        );
        assert!(
            c.attrs
                .get("gen_ai.usage.input_tokens")
                .is_some_and(|v| v.starts_with("Int(")),
            "{c:?}"
        );
        assert!(
            c.attrs
                .get("gen_ai.response.id")
                .is_some_and(|v| v.starts_with("Str(chatcmpl-")),
            "{c:?}"
        );
    }
    assert_eq!(
        add.attrs.get("gen_ai.tool.name").map(String::as_str),
        Some("Str(add)")
    );
    assert_eq!(main.status, "STATUS_CODE_UNSET");
    assert_eq!(
        main.attrs.get("pikuri.stop_reason").map(String::as_str),
        Some("Str(completed)")
    );
}

/// The span events of the span named `span`, as the debug log printed
/// them: each event's name and its attributes (`-> k: v` lines after its
/// `-> Attributes::`); the list ends at the first line of another kind.
fn span_events(text: &str, span: &str) -> Vec<(String, HashMap<String, String>)> {
    let mut events: Vec<(String, HashMap<String, String>)> = Vec::new();
    let (mut in_span, mut in_events, mut in_attrs) = (false, false, false);
    for line in text.lines() {
        let t = line.trim();
        if in_events {
            if t.starts_with("SpanEvent #") {
                in_attrs = false;
                continue;
            }
            let Some(kv) = t.strip_prefix("-> ") else {
                (in_span, in_events) = (false, false);
                continue;
            };
            if let Some(name) = kv.strip_prefix("Name: ") {
                events.push((name.to_string(), HashMap::new()));
            } else if kv == "Attributes::" {
                in_attrs = true;
            } else if in_attrs
                && let (Some((k, v)), Some(e)) = (kv.split_once(": "), events.last_mut())
            {
                e.1.insert(k.to_string(), v.to_string());
            }
            continue;
        }
        if t.starts_with("Span #") {
            in_span = false;
        } else if let Some(name) = t
            .strip_prefix("Name")
            .and_then(|r| r.trim_start().strip_prefix(':'))
        {
            in_span = name.trim() == span;
        } else if in_span && t == "Events:" {
            in_events = true;
        }
    }
    events
}

#[test]
fn receiver_gets_the_guard_event() {
    use pikuri::guard::{Guards, ToolOutputVerdict};
    let Some(bin) = receiver() else { return };
    let rotel = Rotel::start(&bin);
    let server = FakeServer::start();
    let config = OtlpConfig::new(format!("http://127.0.0.1:{}", rotel.port))
        .with_service_name("pikuri-receiver-guard");
    let exporter = OtlpExporter::new(config).with_transport(&server.transport());
    let handle = exporter.handle();
    // The delegation's result is replaced by a tool output guard: a
    // `pikuri.guard` event on the turn's span.
    let guards = Guards::new().tool_output("mark", |_: &pikuri::ToolCall, out: &str| {
        ToolOutputVerdict::Replace(format!("checked: {out}"))
    });
    crate::collector::run_turn_with(&server, exporter, |c| c.guards(guards));
    assert_eq!(handle.dropped_spans(), 0, "{}", rotel.text());
    let mut events = Vec::new();
    for _ in 0..200 {
        events = span_events(&rotel.text(), "invoke_agent agent");
        if events.iter().any(|e| e.0 == "pikuri.guard") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = rotel.text();
    let guard = events
        .iter()
        .find(|e| e.0 == "pikuri.guard")
        .unwrap_or_else(|| panic!("no pikuri.guard event in:\n{text}"));
    let attr = |k: &str| guard.1.get(k).map(String::as_str);
    assert_eq!(attr("pikuri.guard.name"), Some("Str(mark)"), "{text}");
    assert_eq!(attr("pikuri.guard.point"), Some("Str(tool_output)"));
    assert_eq!(attr("pikuri.guard.action"), Some("Str(replace)"));
    assert!(
        attr("gen_ai.tool.call.id").is_some_and(|v| v.starts_with("Str(")),
        "{guard:?}"
    );
    // No content capture: no detail.
    assert_eq!(attr("pikuri.guard.detail"), None);
}
