//! A scripted OTLP/HTTP collector on 127.0.0.1, the turn the tests export,
//! and helpers to read spans back.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Configurator, Outcome};
use serde_json::{Value, json};

/// How the collector answers one request.
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    Ok,
    Status(u16),
    RetryAfter(u16, u64),
    Slow(Duration),
    /// Read the request and never answer (the connection stays open).
    Silent,
    /// `302 Found` to this URL (ureq follows it as a GET).
    Redirect(String),
}

/// One request the collector received.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Value,
}

pub(crate) struct Collector {
    port: u16,
    script: Arc<Mutex<VecDeque<Answer>>>,
    default: Arc<Mutex<Answer>>,
    pub(crate) received: Arc<Mutex<Vec<Received>>>,
}

impl Collector {
    pub(crate) fn start(default: Answer) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let c = Collector {
            port,
            script: Arc::default(),
            default: Arc::new(Mutex::new(default)),
            received: Arc::default(),
        };
        let (script, default, received) = (
            Arc::clone(&c.script),
            Arc::clone(&c.default),
            Arc::clone(&c.received),
        );
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (script, default, received, held) = (
                    Arc::clone(&script),
                    Arc::clone(&default),
                    Arc::clone(&received),
                    Arc::clone(&held),
                );
                std::thread::spawn(move || serve(stream, &script, &default, &received, &held));
            }
        });
        c
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Answers for the next requests, in order; then the default.
    pub(crate) fn push(&self, a: Answer) {
        self.script.lock().push_back(a);
    }

    /// Every span received, across requests.
    pub(crate) fn spans(&self) -> Vec<Value> {
        self.received
            .lock()
            .iter()
            .filter(|r| r.path == "/v1/traces")
            .flat_map(|r| spans_of(&r.body))
            .collect()
    }

    pub(crate) fn requests(&self, path: &str) -> usize {
        self.received
            .lock()
            .iter()
            .filter(|r| r.path == path)
            .count()
    }
}

fn serve(
    stream: TcpStream,
    script: &Mutex<VecDeque<Answer>>,
    default: &Mutex<Answer>,
    received: &Mutex<Vec<Received>>,
    held: &Mutex<Vec<TcpStream>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut headers = Vec::new();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
                if k == "content-length" {
                    len = v.parse().unwrap_or(0);
                }
                headers.push((k, v));
            }
        }
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let answer = script
            .lock()
            .pop_front()
            .unwrap_or_else(|| default.lock().clone());
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        received.lock().push(Received {
            path,
            headers,
            body,
        });
        let (status, extra) = match answer {
            Answer::Ok => (200, String::new()),
            Answer::Status(s) => (s, String::new()),
            Answer::RetryAfter(s, secs) => (s, format!("Retry-After: {secs}\r\n")),
            Answer::Redirect(to) => (302, format!("Location: {to}\r\n")),
            Answer::Slow(d) => {
                std::thread::sleep(d);
                (200, String::new())
            }
            Answer::Silent => {
                held.lock().push(out);
                return;
            }
        };
        let text = if status == 200 {
            "{\"partialSuccess\":null}"
        } else {
            "no"
        };
        let resp = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if out.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

/// The spans of one `ExportTraceServiceRequest`.
pub(crate) fn spans_of(body: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for rs in body["resourceSpans"].as_array().into_iter().flatten() {
        for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
            out.extend(ss["spans"].as_array().into_iter().flatten().cloned());
        }
    }
    out
}

/// A span attribute's value as text (strings, ints as their decimal form).
pub(crate) fn attr(span: &Value, key: &str) -> Option<String> {
    let a = span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?;
    let v = &a["value"];
    v["stringValue"]
        .as_str()
        .or(v["intValue"].as_str())
        .map(str::to_string)
        .or_else(|| v["boolValue"].as_bool().map(|b| b.to_string()))
        .or_else(|| {
            v["arrayValue"]["values"].as_array().map(|a| {
                a.iter()
                    .filter_map(|x| x["stringValue"].as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            })
        })
}

pub(crate) fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// The agent tree the tests export: the main agent delegates to a `clerk`
/// sub-agent, which calls `add`, then the main agent answers. Four
/// requests, each with usage.
pub(crate) fn scripted_turn(server: &FakeServer) {
    server.push(
        Reply::tool_call("agent", json!({"name": "clerk", "task": "add 2 and 3"}))
            .with_usage(100, 10),
    );
    server.push(Reply::tool_call("add", json!({"a": 2, "b": 3})).with_usage(50, 5)); // clerk 0
    server.push(Reply::text("5").with_usage(60, 1).with_cached_tokens(20)); // clerk 0
    server.push(Reply::text("It is 5.").with_usage(120, 4));
}

pub(crate) fn add_tool() -> FnTool {
    FnTool::new(
        "add",
        "Adds two numbers.",
        Parameters::builder()
            .required_integer("a", "first")
            .required_integer("b", "second")
            .build(),
        |args, _cx| {
            Ok((args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string())
        },
    )
}

/// Run the scripted turn with `listener` and close the agent (which
/// flushes the exporter).
pub(crate) fn run_turn(server: &FakeServer, listener: impl pikuri::Listener) -> Outcome {
    run_turn_with(server, listener, |c| c)
}

/// [`run_turn`] with more configuration.
pub(crate) fn run_turn_with(
    server: &FakeServer,
    listener: impl pikuri::Listener,
    configure: impl FnOnce(Configurator) -> Configurator,
) -> Outcome {
    scripted_turn(server);
    let personas = vec![Persona::new("clerk", "Adds.", "You add.", 4).with_tools(&["add"])];
    let builder = Agent::builder(server.transport())
        .add_sub_agent_tool(add_tool())
        .add_extension(SubAgents::new(personas).unwrap())
        .add_listener(listener);
    let mut agent = configure(builder).build().unwrap();
    let outcome = agent.run_loop("What is 2 + 3?").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("It is 5."));
    agent.close();
    outcome
}
