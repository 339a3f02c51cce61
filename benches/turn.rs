//! Benchmark 7: the fixed cost of a turn.
//!
//! Many short turns over one kept-alive loopback connection, each a whole
//! `Agent::run_loop` (request built, sent, answer decoded, events delivered,
//! listeners flushed), against a bare ureq 3 loop in the same process and
//! against the same replay server: a typed serde request (the same growing
//! conversation), `ureq::Agent::post(..).send(..)`, the answer parsed into
//! typed serde structs (a JSON body, or every `data:` line of a stream).
//! pikuri runs with zero, one and four no-op listeners, each waiting at the
//! end of a turn (closures: `Delivery::Barrier`), and with one and four that
//! hand off (`Delivery::HandOff`, issue 42). The bare client,
//! the conversation and the measurement are in `common/turns.rs`, shared
//! with the async-openai comparison (`scripts/bench-compare.sh`).
//!
//! The replay server runs in a child process (this binary re-executed, see
//! `common::Server`), so the CPU time counted is the client process's
//! alone and the server's threads compete with the client only for the
//! cores, as a real server would. `PIKURI_BENCH_IN_PROCESS=1` puts it back
//! in this process (its threads are then left out of the counts).
//!
//! A second baseline, "bare + hand-off", is the least the crate's shape
//! costs on top of the bare client: the same loop, plus one consumer thread
//! fed over a bounded crossbeam channel (the answer, or each delta as it is
//! parsed) that acknowledges a flush message before the turn returns, the
//! plainest way to hand a turn to a listener thread and wait for it. Its
//! ratio to bare is the floor under pikuri's one-listener ratio on the
//! machine at hand; pikuri's ratio to it is what pikuri adds on top.
//! "bare + hand-off thread, no wait" is the same without the
//! acknowledgement: the floor under a listener that hands off (issue 42).
//! "bare + 4 hand-off threads" has four such consumers, all four flushes
//! asked first and then awaited: the floor under four barrier listeners.
//!
//! Shapes: a non-streamed answer; streams of 50 (a short chat answer),
//! 20,000 and 200,000 deltas (chunked, one HTTP chunk per event). The
//! conversation is cleared every `BLOCK` turns, outside the timed span, on
//! both sides.
//!
//! Figures, per turn: wall time of the timed blocks; CPU time of the
//! client process over the whole run (read once before and once after:
//! reading `/proc` per block would charge subjects with more threads),
//! as the sum of its threads' on-CPU time (`/proc/self/task/*/schedstat`,
//! ns), and as `utime + stime` of `/proc/self/stat` (10 ms ticks; a
//! cross-check that also counts threads that exited); context switches (`voluntary_ctxt_switches +
//! nonvoluntary_ctxt_switches` over the process's threads, and the calling
//! thread's alone). Ratios are medians of same-run ratios, to the bare
//! client and to the hand-off baseline.
//!
//! On a machine shared with other work, `chrt -f 10` before the command
//! (root, or `CAP_SYS_NICE`) lets the bench and its replay server preempt
//! the rest and steadies the non-streamed rows for an A/B comparison; it
//! is not the quiet machine the targets are set on, and it distorts the
//! stream rows (see `BENCHMARKS.md`, issue 42, session 14).
//!
//! Peak RSS of one streaming agent: each subject runs alone in a child
//! process (this binary re-executed), which streams the 20,000-delta answer
//! five times (`rss`), or takes one tool-call turn whose call streams
//! 200,000 argument deltas, runs the tool and streams the answer
//! (`rss-tool`), from the replay server, and reports its `VmHWM`; for
//! `rss`, also `VmHWM - RssFile`: the peak less the pages of the binary
//! and libraries the run touched (pikuri runs more code than the bare
//! client, a cost per process, not per agent, shared through the page
//! cache). With `PIKURI_RSS_PROGRAMS` set (`scripts/bench-one-agent.sh`
//! sets it), the `rss` case also runs the same turns in two standalone
//! programs (`benches/one-agent`), as users run them: this binary holds
//! every bench's and every feature's code, so a run's code pages are
//! spread wider. `PIKURI_TURN_SMAPS=1` prints each child's resident
//! memory by mapping.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use pikuri::listeners::Delivery;
use pikuri::tool::Parameters;
use pikuri::{Agent, ChatTransport, Event, HttpConfig, Listener, Tool, ToolContext, ToolError};

use common::turns::{ANSWER, ANSWER_TEXT, Bare, MODEL, PerTurn, QUESTION, measure};
use common::{
    Framing, Payload, Script, Server, header, json_response, median, proc_status_kib, quick, runs,
    sse_body, sse_response, sse_tool_call,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Subject {
    Bare,
    Handoff,
    /// The hand-off baseline with four consumer threads, each acknowledging
    /// the end of the turn: the floor of four barrier listeners (issue 42).
    Handoff4,
    /// The hand-off baseline whose turn does not wait for its consumer:
    /// the floor of a listener that hands off (issue 42).
    HandoffNoWait,
    /// pikuri with that many no-op listeners (closures: each waits at the
    /// end of a turn, `Delivery::Barrier`).
    Pikuri(usize),
    /// pikuri with that many no-op listeners that hand off
    /// (`Delivery::HandOff`, issue 42).
    PikuriHandOff(usize),
    /// pikuri with one listener, the OTLP exporter, posting to a collector
    /// on 127.0.0.1 that answers (`true`) or accepts and never answers.
    Otlp(bool),
}

impl Subject {
    fn name(self) -> String {
        match self {
            Subject::Bare => "bare ureq + serde".to_string(),
            Subject::Handoff => "bare + hand-off thread".to_string(),
            Subject::Handoff4 => "bare + 4 hand-off threads".to_string(),
            Subject::HandoffNoWait => "bare + hand-off thread, no wait".to_string(),
            Subject::Pikuri(n) => format!("pikuri, {n} listener(s)"),
            Subject::PikuriHandOff(n) => format!("pikuri, {n} hand-off listener(s)"),
            Subject::Otlp(true) => "pikuri, OTLP exporter, answering collector".to_string(),
            Subject::Otlp(false) => "pikuri, OTLP exporter, silent collector".to_string(),
        }
    }
}

/// Set in a child that runs a collector (`answer` or `silent`, see
/// [`Collector`]).
const COLLECTOR_ENV: &str = "PIKURI_TURN_COLLECTOR_CHILD";

/// A collector on 127.0.0.1 for the OTLP subjects: it reads each request
/// and answers 200, or reads and never answers. By default it runs in a
/// child process (this binary re-executed), as a real collector would, so
/// its CPU is not counted with the client's; with `PIKURI_BENCH_IN_PROCESS=1`
/// its threads live in this process (the setup of the first issue 31
/// figures).
struct Collector {
    url: String,
    /// The child and its stdin: closing stdin ends the child.
    child: Option<(std::process::Child, std::process::ChildStdin)>,
}

impl Collector {
    fn start(answer: bool) -> Collector {
        use std::process::{Command, Stdio};
        if common::in_process() {
            return Collector {
                url: collector_here(answer),
                child: None,
            };
        }
        let mut child = Command::new(std::env::current_exe().expect("bench executable"))
            .env(COLLECTOR_ENV, if answer { "answer" } else { "silent" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("collector child starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let mut url = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut url)
            .expect("collector child reports its url");
        Collector {
            url: url.trim().to_string(),
            child: Some((child, stdin)),
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if let Some((mut child, stdin)) = self.child.take() {
            drop(stdin);
            // A silent collector's parked threads do not end the process
            // by themselves: the child exits when its stdin closes; kill it
            // if it has not after a short wait.
            for _ in 0..50 {
                if child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// In a collector child: serve, print the url, exit when stdin closes.
fn collector_child(mode: &str) {
    let url = collector_here(mode == "answer");
    println!("{url}");
    std::io::Write::flush(&mut std::io::stdout()).expect("stdout");
    let mut sink = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    std::process::exit(0);
}

/// The collector's accept loop on threads of this process; its url.
fn collector_here(answer: bool) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().expect("clone"));
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    // Request line and headers, up to the blank line.
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    if !answer {
                        // Hold the connection open, silent, until the client gives up.
                        std::thread::park();
                        return;
                    }
                    let ok = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
                    if conn.write_all(ok.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// A no-op listener that hands off (`Delivery::HandOff`).
struct NoOpHandOff;

impl Listener for NoOpHandOff {
    fn on_event(&mut self, event: &Event) {
        std::hint::black_box(event);
    }
    fn delivery(&self) -> Delivery {
        Delivery::HandOff
    }
}

/// pikuri with `listeners` no-op listeners, handing off if `hand_off`.
fn pikuri_agent(base: &str, stream: bool, listeners: usize, hand_off: bool) -> Agent {
    let transport = ChatTransport::new(MODEL)
        .with_api_base(base)
        .with_context_window(Some(32_768));
    let mut cfg = Agent::builder(transport)
        .streaming(stream)
        .http(HttpConfig::default().with_max_retries(0));
    for _ in 0..listeners {
        cfg = if hand_off {
            cfg.add_listener(NoOpHandOff)
        } else {
            cfg.add_listener(|_: &Event| {})
        };
    }
    cfg.build().expect("agent builds")
}

/// `turns` turns of `subject` (see [`measure`]).
fn run(subject: Subject, base: &str, stream: bool, turns: usize, expect: usize) -> PerTurn {
    match subject {
        Subject::Bare | Subject::Handoff | Subject::Handoff4 | Subject::HandoffNoWait => {
            let mut plain = Bare::new(base, stream);
            plain.handoff = match subject {
                Subject::Handoff => vec![common::Handoff::new()],
                Subject::Handoff4 => (0..4).map(|_| common::Handoff::new()).collect(),
                Subject::HandoffNoWait => vec![common::Handoff::without_wait()],
                _ => Vec::new(),
            };
            let client = std::cell::RefCell::new(plain);
            measure(
                turns,
                expect,
                &mut || client.borrow_mut().turn(),
                &mut || {
                    client.borrow_mut().reset();
                },
            )
        }
        Subject::Pikuri(_) | Subject::PikuriHandOff(_) | Subject::Otlp(_) => {
            // Outlives the agent: its close flushes to the collector.
            let collector = match subject {
                Subject::Otlp(answer) => Some(Collector::start(answer)),
                _ => None,
            };
            let agent = match subject {
                Subject::Otlp(_) => {
                    use pikuri::otel::{OtlpConfig, OtlpExporter};
                    use std::time::Duration;
                    let url = collector.as_ref().map(|c| c.url.clone()).expect("started");
                    let config = OtlpConfig::new(url)
                        .with_timeout(Duration::from_secs(2))
                        .with_close_timeout(Duration::from_secs(1));
                    let transport = ChatTransport::new(MODEL)
                        .with_api_base(base)
                        .with_context_window(Some(32_768));
                    Agent::builder(transport.clone())
                        .streaming(stream)
                        .http(HttpConfig::default().with_max_retries(0))
                        .add_listener(OtlpExporter::new(config).with_transport(&transport))
                        .build()
                        .expect("agent builds")
                }
                Subject::Pikuri(listeners) => pikuri_agent(base, stream, listeners, false),
                Subject::PikuriHandOff(listeners) => pikuri_agent(base, stream, listeners, true),
                _ => unreachable!("matched above"),
            };
            let agent = std::cell::RefCell::new(agent);
            let per = measure(
                turns,
                expect,
                &mut || {
                    let out = agent.borrow_mut().run_loop(QUESTION).expect("turn");
                    out.answer.map_or(0, |a| a.len())
                },
                &mut || agent.borrow_mut().clear_conversation(),
            );
            agent.borrow_mut().close();
            per
        }
    }
}

struct Shape {
    name: &'static str,
    response: Vec<u8>,
    stream: bool,
    turns: usize,
    expect: usize,
}

fn shapes() -> Vec<Shape> {
    let q = quick();
    let answer_len = ANSWER_TEXT.len();
    let mut out = vec![Shape {
        name: "non-streamed",
        response: json_response(ANSWER),
        stream: false,
        turns: if q { 200 } else { 2_000 },
        expect: answer_len,
    }];
    for (name, deltas, turns) in [
        ("50 deltas", 50, if q { 50 } else { 1_000 }),
        ("20,000 deltas", 20_000, if q { 2 } else { 10 }),
        ("200,000 deltas", 200_000, if q { 1 } else { 2 }),
    ] {
        let deltas = if q && deltas > 100 {
            deltas / 100
        } else {
            deltas
        };
        let body = sse_body(Payload::Text, deltas);
        let expect = common::baseline_decode(&body).delta_bytes;
        out.push(Shape {
            name,
            response: sse_response(&body, Framing::Chunked),
            stream: true,
            turns,
            expect,
        });
    }
    out
}

fn selected(name: &str) -> bool {
    common::selected(name)
}

/// The `write_file` tool of the tool-argument RSS case: counts the
/// content bytes it was given, writes nothing.
struct WriteFile {
    params: Parameters,
    seen: Arc<AtomicUsize>,
}

impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        "write_file"
    }
    fn description(&self) -> &'static str {
        "Writes a file."
    }
    fn parameters(&self) -> &Parameters {
        &self.params
    }
    fn call(&self, args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
        let n = args["content"].as_str().map_or(0, str::len);
        self.seen.store(n, Ordering::SeqCst);
        Ok(format!("wrote {n} bytes"))
    }
}

/// The bare client's request message, tool calls included.
#[derive(Serialize)]
struct ToolTurnMessage<'a> {
    role: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<Vec<OutCall<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

#[derive(Serialize)]
struct OutCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    function: OutFunction<'a>,
}

#[derive(Serialize)]
struct OutFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct ToolTurnRequest<'a> {
    model: &'a str,
    messages: &'a [ToolTurnMessage<'a>],
    stream: bool,
}

/// What the bare client parses the arguments into.
#[derive(Deserialize)]
struct WriteFileArgs {
    #[allow(dead_code, reason = "parsed like a real client would")]
    path: String,
    content: String,
}

/// The bare client's tool-call turn: stream the call (its arguments
/// accumulated from typed chunks), parse the arguments, "run" the tool,
/// send the history back with the result and stream the answer. Returns
/// (content bytes, answer bytes).
fn bare_tool_turn(base: &str) -> (usize, usize) {
    let agent = common::turns::ureq_agent();
    let url = format!("{base}/chat/completions");
    let post = |messages: &[ToolTurnMessage<'_>]| {
        let body = serde_json::to_vec(&ToolTurnRequest {
            model: MODEL,
            messages,
            stream: true,
        })
        .expect("request serializes");
        let resp = agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(&body[..])
            .expect("bare request");
        BufReader::new(resp.into_body().into_reader())
    };
    let user = ToolTurnMessage {
        role: "user",
        content: Some(QUESTION),
        tool_calls: None,
        tool_call_id: None,
    };
    let mut reader = post(std::slice::from_ref(&user));
    let (mut id, mut name, mut arguments) = (String::new(), String::new(), String::new());
    common::apis::data_lines(&mut reader, |data| {
        if data == b"[DONE]" {
            return false;
        }
        let chunk: common::Chunk = serde_json::from_slice(data).expect("chunk");
        for c in chunk.choices {
            for t in c.delta.tool_calls.into_iter().flatten() {
                assert_eq!(t.index, 0);
                if let Some(i) = t.id {
                    id = i;
                }
                if let Some(f) = t.function {
                    if let Some(n) = f.name {
                        name = n;
                    }
                    if let Some(a) = f.arguments {
                        arguments.push_str(&a);
                    }
                }
            }
        }
        true
    });
    let _ = std::io::copy(&mut reader, &mut std::io::sink());
    let args: WriteFileArgs = serde_json::from_str(&arguments).expect("arguments parse");
    let result = format!("wrote {} bytes", args.content.len());
    let history = [
        user,
        ToolTurnMessage {
            role: "assistant",
            content: None,
            tool_calls: Some(vec![OutCall {
                id: &id,
                kind: "function",
                function: OutFunction {
                    name: &name,
                    arguments: &arguments,
                },
            }]),
            tool_call_id: None,
        },
        ToolTurnMessage {
            role: "tool",
            content: Some(&result),
            tool_calls: None,
            tool_call_id: Some(&id),
        },
    ];
    let mut reader = post(&history);
    let answer = common::sse_text(&mut reader);
    let _ = std::io::copy(&mut reader, &mut std::io::sink());
    (args.content.len(), answer.len())
}

fn env_usize(name: &str) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Child mode for the RSS figures: `bare` and `pikuri` stream the text
/// answer five times, `bare-tool` and `pikuri-tool` take the tool-call
/// turn once (the call, the tool, the answer), all from
/// `PIKURI_TURN_BASE`; prints `VmHWM` in KiB before and after, and
/// `RssFile` after (the binary's and libraries' pages the run touched).
fn rss_child(subject: &str, base: &str) {
    let expect = env_usize("PIKURI_TURN_EXPECT");
    let content = env_usize("PIKURI_TURN_CONTENT");
    let start = proc_status_kib("VmHWM");
    match subject {
        "bare" => {
            let mut client = Bare::new(base, true);
            for _ in 0..5 {
                assert_eq!(client.turn(), expect);
                client.reset();
            }
        }
        "pikuri" => {
            let mut agent = pikuri_agent(base, true, 1, false);
            for _ in 0..5 {
                let out = agent.run_loop(QUESTION).expect("turn");
                assert_eq!(out.answer.map_or(0, |a| a.len()), expect);
                agent.clear_conversation();
            }
            agent.close();
        }
        "bare-tool" => assert_eq!(bare_tool_turn(base), (content, expect)),
        "pikuri-tool" => {
            let seen = Arc::new(AtomicUsize::new(0));
            let transport = ChatTransport::new(MODEL)
                .with_api_base(base)
                .with_context_window(Some(1 << 20));
            let mut agent = Agent::builder(transport)
                .streaming(true)
                .http(HttpConfig::default().with_max_retries(0))
                .add_listener(|_: &Event| {})
                .add_tool(WriteFile {
                    params: Parameters::builder()
                        .required_string("path", "Where to write")
                        .required_string("content", "What to write")
                        .build(),
                    seen: Arc::clone(&seen),
                })
                .build()
                .expect("agent builds");
            let out = agent.run_loop(QUESTION).expect("turn");
            assert_eq!(out.answer.map_or(0, |a| a.len()), expect);
            assert_eq!(seen.load(Ordering::SeqCst), content);
            agent.close();
        }
        other => panic!("unknown RSS child {other:?}"),
    }
    if std::env::var_os("PIKURI_TURN_SMAPS").is_some() {
        smaps_summary(subject);
    }
    println!(
        "{start} {} {}",
        proc_status_kib("VmHWM"),
        proc_status_kib("RssFile")
    );
}

/// `PIKURI_TURN_SMAPS=1`: the child's resident KiB by mapping (the
/// binary, each library, anonymous memory), from `/proc/self/smaps`, on
/// stderr: where a peak's file pages come from.
fn smaps_summary(subject: &str) {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut by = std::collections::BTreeMap::<String, u64>::new();
    let mut name = String::new();
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap_or("");
        if first.contains('-') && first.chars().next().is_some_and(|c| c.is_ascii_hexdigit()) {
            // A mapping's header: its path is the sixth field, if any.
            let perms = f.next().unwrap_or("");
            name = format!("{} {}", f.nth(3).unwrap_or("[anon]"), perms);
        } else if first == "Rss:" {
            *by.entry(name.clone()).or_default() +=
                f.next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    for (name, kib) in by.iter().filter(|(_, k)| **k > 0) {
        eprintln!("smaps {subject}: {kib:>6} KiB {name}");
    }
}

/// Where `scripts/bench-one-agent.sh` puts the standalone programs of
/// `benches/one-agent` (their `release` folder).
const RSS_PROGRAMS: &str = "PIKURI_RSS_PROGRAMS";

/// `(VmHWM at the start, VmHWM at the end, RssFile at the end)`, KiB.
/// A subject `program:<name>` runs `one-agent-<name>` from
/// `PIKURI_RSS_PROGRAMS` (the standalone programs of `benches/one-agent`,
/// which follow the same protocol) instead of this binary.
fn rss_in_child(subject: &str, base: &str, expect: usize, content: usize) -> (f64, f64, f64) {
    let exe = match subject.strip_prefix("program:") {
        Some(name) => std::path::Path::new(&std::env::var_os(RSS_PROGRAMS).expect(RSS_PROGRAMS))
            .join(format!("one-agent-{name}")),
        None => std::env::current_exe().expect("exe"),
    };
    let out = std::process::Command::new(exe)
        .env("PIKURI_TURN_CHILD", subject)
        .env("PIKURI_TURN_BASE", base)
        .env("PIKURI_TURN_EXPECT", expect.to_string())
        .env("PIKURI_TURN_CONTENT", content.to_string())
        .output()
        .expect("child runs");
    assert!(
        out.status.success(),
        "RSS child {subject} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if std::env::var_os("PIKURI_TURN_SMAPS").is_some() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text
        .split_whitespace()
        .filter_map(|v| v.parse::<f64>().ok());
    let mut next = || it.next().unwrap_or(0.0);
    (next(), next(), next())
}

/// Peak RSS of one streaming agent, each subject alone in a child process
/// against `server`: (bare KiB, pikuri KiB, same-run ratio), medians, of
/// `VmHWM`, then of `VmHWM - RssFile`, the peak less the binary's and
/// libraries' pages (pikuri runs more code, so touches more of them).
fn rss_pair(server: &Server, names: [&str; 2], expect: usize, content: usize) -> [[f64; 3]; 2] {
    let mut v: [[Vec<f64>; 3]; 2] = Default::default();
    for r in 0..runs() {
        // Alternate the order run by run.
        let one = |i: usize| {
            let (_, hwm, file) = rss_in_child(names[i], &server.base_url(), expect, content);
            [hwm, hwm - file]
        };
        let (b, p) = if r % 2 == 0 {
            let b = one(0);
            (b, one(1))
        } else {
            let p = one(1);
            (one(0), p)
        };
        for k in 0..2 {
            v[k][0].push(b[k]);
            v[k][1].push(p[k]);
            v[k][2].push(p[k] / b[k]);
        }
    }
    v.map(|mut f| [median(&mut f[0]), median(&mut f[1]), median(&mut f[2])])
}

/// `Agent::build` against three servers: none needed (the context window
/// given, no probe), an OpenAI-shaped one (`/props` 404, `/v1/models`
/// without `meta`) and a llama.cpp-shaped one (`/props` answers). Prints
/// microseconds per build and the probe requests each build made.
fn build_cost() {
    use pikuri::testing::FakeServer;
    let builds: u32 = if quick() { 20 } else { 200 };
    let shapes: [(&str, Option<Option<u64>>); 3] = [
        ("context window given (no probe)", None),
        ("OpenAI-shaped (no /props)", Some(None)),
        ("llama.cpp-shaped (/props)", Some(Some(8_192))),
    ];
    for (name, ctx) in shapes {
        let server = FakeServer::start();
        if let Some(c) = ctx {
            server.set_context_size(c);
        }
        let mut us = Vec::new();
        let mut probes = 0;
        for _ in 0..runs() {
            let before = server.requests().len();
            let t = Instant::now();
            for _ in 0..builds {
                let mut transport = server.transport();
                if ctx.is_none() {
                    transport = transport.with_context_window(Some(32_768));
                }
                let mut agent = Agent::builder(transport)
                    .add_listener(|_: &Event| {})
                    .build()
                    .expect("agent builds");
                agent.close();
            }
            us.push(t.elapsed().as_secs_f64() * 1e6 / f64::from(builds));
            probes = server.requests().len() - before;
        }
        println!(
            "| build | {name} | {:.1} us/build | | | | {:.1} probe requests/build | |",
            median(&mut us),
            probes as f64 / f64::from(builds)
        );
    }
}

/// The OTLP exporter's own work per turn on its listener thread (what the
/// end-of-turn flush can wait for): the events of a non-streamed turn and
/// of a 50-delta one fed straight to `on_event` and `flush`, on this
/// thread, exporting to an answering collector (its encoding and HTTP run
/// on the exporter's thread, not counted here).
fn otlp_listener_cost() {
    use pikuri::otel::{OtlpConfig, OtlpExporter};
    use pikuri::{Listener, StopReason, Usage};
    let turns: u32 = if quick() { 2_000 } else { 50_000 };
    let agent: std::sync::Arc<str> = "".into();
    for deltas in [0usize, 50] {
        let mut events = vec![Event::UserTurn {
            agent: agent.clone(),
            content: QUESTION.into(),
            mid_loop: false,
        }];
        for _ in 0..deltas {
            events.push(Event::AssistantDelta {
                agent: agent.clone(),
                content: "word ".into(),
            });
        }
        events.push(Event::Assistant {
            agent: agent.clone(),
            content: ANSWER_TEXT.into(),
            finish: pikuri::FinishReason::Complete,
        });
        events.push(Event::Tokens {
            agent: agent.clone(),
            input: Some(20),
            output: Some(10),
            cached: None,
            cache_creation: None,
            thinking: None,
            model_id: Some(MODEL.into()),
            response_id: None,
        });
        events.push(Event::Stopped {
            agent: agent.clone(),
            reason: StopReason::Completed,
            usage: Usage::new(),
        });
        let mut us = Vec::new();
        for _ in 0..runs() {
            let sink = Collector::start(true);
            let mut exporter = OtlpExporter::new(OtlpConfig::new(sink.url.clone()));
            let t = Instant::now();
            for _ in 0..turns {
                for e in &events {
                    exporter.on_event(e);
                }
                exporter.flush();
            }
            us.push(t.elapsed().as_secs_f64() * 1e6 / f64::from(turns));
            exporter.close();
        }
        println!(
            "| otlp listener | {deltas} deltas: on_event + flush per turn, listener thread | {:.2} us/turn | | | | | |",
            median(&mut us)
        );
    }
}

/// The per-turn table: every shape, every subject.
fn turn_table() {
    let subjects = [
        Subject::Bare,
        Subject::Handoff,
        Subject::Pikuri(0),
        Subject::Pikuri(1),
        Subject::Pikuri(4),
        Subject::Handoff4,
        Subject::Otlp(true),
        Subject::Otlp(false),
        Subject::HandoffNoWait,
        Subject::PikuriHandOff(1),
        Subject::PikuriHandOff(4),
    ];
    println!(
        "| shape | client | us/turn | wall ratio to bare | wall ratio to hand-off | CPU us/turn (client threads) | CPU ratio to bare | CPU ratio to hand-off | CPU us/turn (/proc/self/stat, whole run) | ctx switches/turn (client threads) | calling thread |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut server_cpu = Vec::new();
    for shape in shapes() {
        if !subjects
            .iter()
            .any(|s| selected(&format!("{}/{}", shape.name, s.name())))
        {
            continue;
        }
        let server = Server::start(Script::Fixed(shape.response.clone()), false);
        let base = server.base_url();
        let n = subjects.len();
        let mut all: Vec<Vec<PerTurn>> = vec![Vec::new(); n];
        // Same-run ratios: wall and CPU, to bare and to the hand-off.
        let mut wall_bare: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut wall_hand: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut cpu_bare: Vec<Vec<f64>> = vec![Vec::new(); n];
        let mut cpu_hand: Vec<Vec<f64>> = vec![Vec::new(); n];
        for r in 0..runs() {
            let mut this = vec![PerTurn::default(); n];
            for k in 0..n {
                // Rotate the order each run so drift hits every subject alike.
                let i = (k + r) % n;
                if i > 1 && !selected(&format!("{}/{}", shape.name, subjects[i].name())) {
                    continue;
                }
                this[i] = run(subjects[i], &base, shape.stream, shape.turns, shape.expect);
            }
            for i in 0..n {
                all[i].push(this[i]);
                wall_bare[i].push(this[i].us / this[0].us);
                wall_hand[i].push(this[i].us / this[1].us);
                cpu_bare[i].push(this[i].cpu_us / this[0].cpu_us);
                cpu_hand[i].push(this[i].cpu_us / this[1].cpu_us);
            }
        }
        for (i, s) in subjects.iter().enumerate() {
            // Filtered out by PIKURI_BENCH_FILTER.
            if all[i].iter().all(|p| p.us == 0.0) {
                continue;
            }
            let col = |f: fn(&PerTurn) -> f64| {
                let mut v: Vec<f64> = all[i].iter().map(f).collect();
                median(&mut v)
            };
            println!(
                "| {} | {} | {:.1} | {:.2}x | {:.2}x | {:.1} | {:.2}x | {:.2}x | {:.1} | {:.2} | {:.2} |",
                shape.name,
                s.name(),
                col(|p| p.us),
                median(&mut wall_bare[i]),
                median(&mut wall_hand[i]),
                col(|p| p.cpu_us),
                median(&mut cpu_bare[i]),
                median(&mut cpu_hand[i]),
                col(|p| p.stat_cpu_us),
                col(|p| p.ctx),
                col(|p| p.own_ctx),
            );
        }
        if let Some(cpu) = server.child_cpu() {
            server_cpu.push(format!("{} {:.2} s", shape.name, cpu.as_secs_f64()));
        }
    }
    if !server_cpu.is_empty() {
        println!(
            "# replay server process CPU, not counted above: {}",
            server_cpu.join(", ")
        );
    }
}

/// The peak-RSS rows.
fn rss_figures() {
    if selected("rss") {
        let body = sse_body(Payload::Text, if quick() { 200 } else { 20_000 });
        let expect = common::baseline_decode(&body).delta_bytes;
        let server = Server::start(Script::Fixed(sse_response(&body, Framing::Chunked)), false);
        let [[bare, pik, ratio], [bare_anon, pik_anon, ratio_anon]] =
            rss_pair(&server, ["bare", "pikuri"], expect, 0);
        println!(
            "| rss | one streaming agent (20,000 text deltas x5), peak VmHWM KiB: bare / pikuri 1 listener | {bare:.0} / {pik:.0} | {ratio:.2}x | | | | | | | |",
        );
        println!(
            "| rss | the same, VmHWM - RssFile (less code and library pages) KiB: bare / pikuri 1 listener | {bare_anon:.0} / {pik_anon:.0} | {ratio_anon:.2}x | | | | | | | |",
        );
        // The same turns in two programs of their own, as users run them
        // (this binary holds every bench's and every feature's code, so
        // the pages a run touches are spread over more of it).
        if std::env::var_os(RSS_PROGRAMS).is_some() {
            let [[bare, pik, ratio], [bare_anon, pik_anon, ratio_anon]] =
                rss_pair(&server, ["program:bare", "program:pikuri"], expect, 0);
            println!(
                "| rss | the same in standalone programs (benches/one-agent), peak VmHWM KiB: bare / pikuri 1 listener | {bare:.0} / {pik:.0} | {ratio:.2}x | | | | | | | |",
            );
            println!(
                "| rss | standalone, VmHWM - RssFile KiB: bare / pikuri 1 listener | {bare_anon:.0} / {pik_anon:.0} | {ratio_anon:.2}x | | | | | | | |",
            );
        }
    }
    if selected("rss-tool") {
        let deltas = if quick() { 2_000 } else { 200_000 };
        let (call, args) = sse_tool_call(deltas);
        let content = serde_json::from_str::<Value>(&args).expect("arguments are JSON")["content"]
            .as_str()
            .map_or(0, str::len);
        let answer = sse_body(Payload::Text, 5);
        let expect = common::baseline_decode(&answer).delta_bytes;
        // Each child makes two requests: the call, then the answer.
        let server = Server::start(
            Script::Cycle {
                first: sse_response(&call, Framing::Chunked),
                then: sse_response(&answer, Framing::Chunked),
                every: 2,
            },
            false,
        );
        let [[bare, pik, ratio], _] =
            rss_pair(&server, ["bare-tool", "pikuri-tool"], expect, content);
        println!(
            "| rss | one streaming agent, a {} tool-argument-delta call ({} KiB of arguments) then the answer, peak VmHWM KiB: bare / pikuri 1 listener | {bare:.0} / {pik:.0} | {ratio:.2}x | | | | | | | |",
            args.len().div_ceil(3),
            args.len() / 1024,
        );
    }
}

fn main() {
    common::serve_if_child();
    if let Ok(mode) = std::env::var(COLLECTOR_ENV) {
        collector_child(&mode);
        return;
    }
    if let Ok(subject) = std::env::var("PIKURI_TURN_CHILD") {
        rss_child(&subject, &std::env::var("PIKURI_TURN_BASE").expect("base"));
        return;
    }
    header("per-turn cost (loopback, keep-alive)");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("# load average at start: {}", load.trim());
    println!("# {}", common::server_placement());
    turn_table();
    if selected("otlp listener") {
        otlp_listener_cost();
    }
    if selected("build") {
        build_cost();
    }
    rss_figures();
}
