//! Shared pieces of the benchmark suite: timing and statistics, the
//! pre-built SSE streams, the loopback replay server and the plain
//! `TcpStream` + typed-serde baseline client.
//!
//! Everything here uses std only (plus the crate's own serde/serde_json
//! dependencies), so the benches need no dev-dependency.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;

pub(crate) mod apis;
pub(crate) mod turns;

// ---------------------------------------------------------------- settings

/// `PIKURI_BENCH_QUICK=1`: tiny sizes, for a smoke run (CI, debugging).
pub(crate) fn quick() -> bool {
    std::env::var("PIKURI_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Repetitions per measurement: `PIKURI_BENCH_RUNS`, else 7 (3 when quick).
/// Reported figures are medians over these runs.
pub(crate) fn runs() -> usize {
    std::env::var("PIKURI_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(if quick() { 3 } else { 7 })
}

/// Stream length: 200,000 deltas, or 2,000 when quick.
pub(crate) fn stream_chunks() -> usize {
    if quick() { 2_000 } else { 200_000 }
}

// ---------------------------------------------------------------- statistics

/// Median of `v` (sorted in place).
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    }
}

/// The `p`-quantile (0..=1) of sorted `v`, nearest rank.
pub(crate) fn quantile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    // Nearest rank: the smallest value with at least `p` of the values at
    // or below it.
    let n = sorted.len();
    let rank = (1..=n).find(|r| *r as f64 >= p * n as f64).unwrap_or(n);
    sorted[rank - 1]
}

/// Seconds of a duration as f64.
pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Print the machine line every bench starts with.
pub(crate) fn header(name: &str) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    println!(
        "# {name}: {cores} cores, {cpu}; runs={}{}",
        runs(),
        if quick() { " (QUICK)" } else { "" }
    );
}

// ---------------------------------------------------------------- streams

/// Which deltas a pre-built stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Payload {
    /// `delta.content` pieces of 3 characters of prose.
    Text,
    /// `delta.tool_calls[0].function.arguments` pieces of 3 characters of a
    /// JSON object whose string holds source code: quotes, backslashes and
    /// newlines, so the wire text is dense with escapes.
    ToolArgs,
}

impl Payload {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Payload::Text => "text",
            Payload::ToolArgs => "tool-args",
        }
    }
}

/// The prose the text streams cycle through.
pub(crate) const PROSE: &str = "The quick brown fox jumps over the lazy dog, and then it \
    considers the nature of streaming tokens: each one small, each one late. \
    Café naïve résumé — über straße.\nA second paragraph starts here; it has \
    \"quotes\" and a tab\tor two.\n";

/// The source code the tool-argument streams cycle through.
pub(crate) const CODE: &str = "fn main() {\n    let path = \"C:\\\\tmp\\\\out.txt\";\n    \
    println!(\"{}\\t{}\", path, 42);\n    // naïve: \"quoted\" \\ backslash\n}\n";

/// `count` pieces of `n` chars cycling through `text`.
pub(crate) fn pieces(text: &str, n: usize, count: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::with_capacity(count);
    let mut i = 0;
    for _ in 0..count {
        let mut p = String::with_capacity(n * 2);
        for _ in 0..n {
            p.push(chars[i % chars.len()]);
            i += 1;
        }
        out.push(p);
    }
    out
}

/// A JSON string literal (with quotes) for `s`.
fn lit(s: &str) -> String {
    serde_json::to_string(s).expect("string serializes")
}

const HEAD: &str = r#"{"id":"chatcmpl-42","object":"chat.completion.chunk","created":1741569952,"model":"qwen3","choices":[{"index":0,"delta":"#;

/// The SSE body of one streamed completion with `chunks` deltas: a role
/// chunk, the deltas, a finish chunk, a usage chunk and `[DONE]`. Text
/// deltas are about 170 bytes each on the wire (200,000 of them: ~34 MB).
pub(crate) fn sse_body(payload: Payload, chunks: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(chunks * 170 + 1024);
    let mut event = |delta: &str, finish: &str| {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(HEAD.as_bytes());
        out.extend_from_slice(delta.as_bytes());
        out.extend_from_slice(b",\"finish_reason\":");
        out.extend_from_slice(finish.as_bytes());
        out.extend_from_slice(b"}]}\n\n");
    };
    event(r#"{"role":"assistant","content":""}"#, "null");
    match payload {
        Payload::Text => {
            for p in pieces(PROSE, 3, chunks) {
                event(&format!("{{\"content\":{}}}", lit(&p)), "null");
            }
        }
        Payload::ToolArgs => {
            event(
                r#"{"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"write_file","arguments":""}}]}"#,
                "null",
            );
            // The arguments: {"path":"src/main.rs","content":"<CODE repeated>"}
            // as JSON text, cut in 3-char pieces; each piece is a JSON string
            // in the chunk, so `"` and `\` in it are escaped once more.
            let mut args = String::from(r#"{"path":"src/main.rs","content":"#);
            let body_chars = chunks * 3;
            let code = lit(CODE);
            let code = &code[1..code.len() - 1];
            let mut body = String::with_capacity(body_chars + code.len());
            while body.chars().count() < body_chars {
                body.push_str(code);
            }
            args.push('"');
            args.push_str(&body);
            args.push_str("\"}");
            let all: Vec<char> = args.chars().collect();
            for piece in all.chunks(3).take(chunks) {
                let p: String = piece.iter().collect();
                event(
                    &format!(
                        "{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{}}}}}]}}",
                        lit(&p)
                    ),
                    "null",
                );
            }
        }
    }
    let finish = match payload {
        Payload::Text => "\"stop\"",
        Payload::ToolArgs => "\"tool_calls\"",
    };
    event("{}", finish);
    out.extend_from_slice(
        br#"data: {"id":"chatcmpl-42","object":"chat.completion.chunk","created":1741569952,"model":"qwen3","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":200000,"total_tokens":200012}}"#,
    );
    out.extend_from_slice(b"\n\ndata: [DONE]\n\n");
    out
}

/// The SSE body of one streamed tool call of `write_file` whose arguments,
/// `{"path":"src/main.rs","content":"<source code>"}` with the code's
/// quotes, backslashes and newlines escaped, are cut into pieces of 3
/// characters, about `chunks` of them (whole copies of the code, so the
/// arguments stay valid JSON; unlike [`sse_body`] with
/// [`Payload::ToolArgs`], which stops after exactly `chunks` pieces).
/// Returns the body and the arguments' text.
pub(crate) fn sse_tool_call(chunks: usize) -> (Vec<u8>, String) {
    let code = lit(CODE);
    let code = &code[1..code.len() - 1];
    let mut args = String::from(r#"{"path":"src/main.rs","content":""#);
    // Bytes, not chars: counting chars each round would be quadratic.
    while args.len() < chunks * 3 {
        args.push_str(code);
    }
    args.push_str("\"}");
    let mut out = Vec::with_capacity(chunks * 200 + 1024);
    let mut event = |delta: &str, finish: &str| {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(HEAD.as_bytes());
        out.extend_from_slice(delta.as_bytes());
        out.extend_from_slice(b",\"finish_reason\":");
        out.extend_from_slice(finish.as_bytes());
        out.extend_from_slice(b"}]}\n\n");
    };
    event(r#"{"role":"assistant","content":null}"#, "null");
    event(
        r#"{"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"write_file","arguments":""}}]}"#,
        "null",
    );
    let all: Vec<char> = args.chars().collect();
    for piece in all.chunks(3) {
        let p: String = piece.iter().collect();
        event(
            &format!(
                "{{\"tool_calls\":[{{\"index\":0,\"function\":{{\"arguments\":{}}}}}]}}",
                lit(&p)
            ),
            "null",
        );
    }
    event("{}", "\"tool_calls\"");
    out.extend_from_slice(b"data: [DONE]\n\n");
    (out, args)
}

// ---------------------------------------------------------------- baseline

/// The baseline's typed chunk: what a hand-written client deserializes.
#[derive(Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    pub(crate) choices: Vec<Choice>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
}

#[derive(Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    pub(crate) delta: Delta,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
pub(crate) struct Delta {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) reasoning_content: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
pub(crate) struct ToolCallDelta {
    #[serde(default)]
    pub(crate) index: u32,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
pub(crate) struct FunctionDelta {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) arguments: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) prompt_tokens: u64,
    #[serde(default)]
    pub(crate) completion_tokens: u64,
}

/// What the baseline saw: chunks parsed and delta bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) chunks: usize,
    pub(crate) delta_bytes: usize,
}

impl Tally {
    /// Parse one `data:` payload into typed structs; `false` on `[DONE]`.
    pub(crate) fn data(&mut self, data: &[u8]) -> bool {
        if data == b"[DONE]" {
            return false;
        }
        let chunk: Chunk = serde_json::from_slice(data).expect("baseline: chunk parses");
        self.chunks += 1;
        for c in &chunk.choices {
            self.delta_bytes += c.delta.content.as_ref().map_or(0, String::len);
            self.delta_bytes += c.delta.reasoning_content.as_ref().map_or(0, String::len);
            for t in c.delta.tool_calls.iter().flatten() {
                let args = t.function.as_ref().and_then(|f| f.arguments.as_ref());
                self.delta_bytes += args.map_or(0, String::len);
            }
        }
        true
    }

    /// One SSE line (without its `\n`); `false` on `[DONE]`.
    pub(crate) fn line(&mut self, line: &[u8]) -> bool {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match line.strip_prefix(b"data:") {
            Some(rest) => self.data(rest.strip_prefix(b" ").unwrap_or(rest)),
            None => true,
        }
    }
}

/// The in-memory baseline: read lines through a 64 KiB `BufReader` (as a
/// socket client would; `read_until` finds line ends with memchr), parse
/// every data line, nothing else.
pub(crate) fn baseline_decode(body: &[u8]) -> Tally {
    let mut t = Tally::default();
    let mut r = BufReader::with_capacity(64 * 1024, body);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).expect("in memory") == 0 {
            break;
        }
        let l = line.strip_suffix(b"\n").unwrap_or(&line);
        if !t.line(l) {
            break;
        }
    }
    t
}

/// `PIKURI_BENCH_FILTER`: run only cases whose name contains it.
pub(crate) fn selected(name: &str) -> bool {
    std::env::var("PIKURI_BENCH_FILTER").map_or(true, |f| name.contains(&f))
}

// ---------------------------------------------------------------- HTTP framing

/// How the replay server frames a streamed body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `Transfer-Encoding: chunked`, one HTTP chunk per SSE event (servers
    /// flush per token), keep-alive.
    Chunked,
    /// No length: the body ends when the server closes the connection.
    Close,
}

impl Framing {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Framing::Chunked => "chunked",
            Framing::Close => "close",
        }
    }
}

/// The full HTTP response for a streamed `body` under `framing`.
pub(crate) fn sse_response(body: &[u8], framing: Framing) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / 16 + 256);
    out.extend_from_slice(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n",
    );
    match framing {
        Framing::Close => {
            out.extend_from_slice(b"Connection: close\r\n\r\n");
            out.extend_from_slice(body);
        }
        Framing::Chunked => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            let mut rest = body;
            while !rest.is_empty() {
                // One chunk per event: up to and including the blank line.
                let end = rest
                    .windows(2)
                    .position(|w| w == b"\n\n")
                    .map_or(rest.len(), |p| p + 2);
                let (event, tail) = rest.split_at(end);
                out.extend_from_slice(format!("{:x}\r\n", event.len()).as_bytes());
                out.extend_from_slice(event);
                out.extend_from_slice(b"\r\n");
                rest = tail;
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    out
}

/// A complete JSON response with `Content-Length`, keep-alive.
pub(crate) fn json_response(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Read one request head and body; `None` at EOF. Returns the body length.
pub(crate) fn read_request<R: BufRead>(
    r: &mut R,
    line: &mut Vec<u8>,
    body: &mut Vec<u8>,
) -> io::Result<Option<usize>> {
    let mut length = 0usize;
    let mut first = true;
    loop {
        line.clear();
        if r.read_until(b'\n', line)? == 0 {
            return if first {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        first = false;
        let l = std::str::from_utf8(line).unwrap_or("").trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    body.resize(length, 0);
    r.read_exact(body)?;
    Ok(Some(length))
}

// ---------------------------------------------------------------- replay server

/// What the replay server answers.
pub(crate) enum Script {
    /// The same pre-built response to every request.
    Fixed(Vec<u8>),
    /// `first` to requests 1..n of each cycle, `then` to every n-th
    /// (`n = every`): `n-1` tool calls, then an answer.
    Cycle {
        first: Vec<u8>,
        then: Vec<u8>,
        every: u64,
    },
    /// The same response to every request, in two parts: the first `at`
    /// bytes, then, once `n` connections have been sent theirs (or after
    /// a minute), the rest. So `n` clients are all in the middle of their
    /// streams at once, whatever the scheduling (`benches/many.rs`).
    Gather {
        response: Vec<u8>,
        at: usize,
        n: usize,
    },
}

/// Where the connections of a [`Script::Gather`] wait: how many have
/// arrived in this round, and the round.
static GATHER: (std::sync::Mutex<(usize, u64)>, std::sync::Condvar) =
    (std::sync::Mutex::new((0, 0)), std::sync::Condvar::new());

/// Wait until `n` connections (this one included) have called this in
/// the current round, or a minute has passed.
fn gather(n: usize) {
    let (lock, turned) = &GATHER;
    let mut state = lock.lock().expect("gather lock");
    state.0 += 1;
    if state.0 >= n {
        // PIKURI_BENCH_GATHER_HOLD_MS: keep every client waiting a while,
        // for a profiler to look (`PIKURI_MANY_TRACE`).
        let hold = std::env::var("PIKURI_BENCH_GATHER_HOLD_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        std::thread::sleep(Duration::from_millis(hold));
        *state = (0, state.1 + 1);
        turned.notify_all();
        return;
    }
    let round = state.1;
    let _ = turned
        .wait_timeout_while(state, Duration::from_secs(60), |s| s.1 == round)
        .expect("gather lock");
}

/// `PIKURI_BENCH_REPLAY_DELAY_US`: how long the replay server waits before
/// each answer (a model's think time); zero when unset. Set in a child by
/// [`ReplayChild::spawn_thinking`].
const REPLAY_DELAY_ENV: &str = "PIKURI_BENCH_REPLAY_DELAY_US";

fn reply_delay() -> Duration {
    let us = std::env::var(REPLAY_DELAY_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Duration::from_micros(us)
}

/// A loopback server thread answering every request with pre-built bytes.
pub(crate) struct Replay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Request-body bytes received so far.
    pub(crate) request_bytes: Arc<AtomicU64>,
    /// Requests answered so far.
    pub(crate) requests: Arc<AtomicU64>,
    handle: Option<JoinHandle<()>>,
}

impl Replay {
    /// Serve `script` on 127.0.0.1:0. With `close`, each response ends by
    /// closing the connection.
    pub(crate) fn start(script: Script, close: bool) -> Replay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let stop = Arc::new(AtomicBool::new(false));
        let request_bytes = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(AtomicU64::new(0));
        let (s, rb, rq) = (
            Arc::clone(&stop),
            Arc::clone(&request_bytes),
            Arc::clone(&requests),
        );
        let handle = std::thread::Builder::new()
            .name("replay-server".into())
            .spawn(move || {
                // One thread per connection: a keep-alive client (ureq's
                // pool) must not block the next one.
                let script = Arc::new(script);
                for conn in listener.incoming() {
                    if s.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let (script, rb, rq) = (Arc::clone(&script), Arc::clone(&rb), Arc::clone(&rq));
                    // Named, so that the benches can leave the server's
                    // threads out of their per-thread counts.
                    let _ = std::thread::Builder::new()
                        .name("replay-conn".into())
                        .spawn(move || {
                            let _ = serve(conn, &script, close, &rb, &rq);
                        });
                }
            })
            .expect("spawn replay server");
        Replay {
            addr,
            stop,
            request_bytes,
            requests,
            handle: Some(handle),
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:port/v1`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

fn serve(
    conn: TcpStream,
    script: &Script,
    close: bool,
    request_bytes: &AtomicU64,
    requests: &AtomicU64,
) -> io::Result<()> {
    conn.set_nodelay(true)?;
    let mut writer = conn.try_clone()?;
    let mut reader = BufReader::with_capacity(256 * 1024, conn);
    let (mut line, mut body) = (Vec::new(), Vec::new());
    let delay = reply_delay();
    while let Some(n) = read_request(&mut reader, &mut line, &mut body)? {
        request_bytes.fetch_add(n as u64, Ordering::Relaxed);
        // A model's think time, when a bench asks for one (`benches/guards.rs`).
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let count = requests.fetch_add(1, Ordering::Relaxed) + 1;
        let response = match script {
            Script::Fixed(r) => r,
            Script::Gather { response, at, n } => {
                writer.write_all(&response[..*at])?;
                gather(*n);
                &response[*at..]
            }
            Script::Cycle { first, then, every } => {
                if count.is_multiple_of(*every) {
                    then
                } else {
                    first
                }
            }
        };
        writer.write_all(response)?;
        if close {
            writer.shutdown(Shutdown::Write)?;
            // Let the client read to the end before the socket goes away.
            let mut sink = [0u8; 4096];
            while reader.read(&mut sink)? > 0 {}
            break;
        }
    }
    Ok(())
}

impl Drop for Replay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

// ---------------------------------------------------------------- out of process

/// Set in a child that serves a replay script (see [`Server`]).
const SERVE_ENV: &str = "PIKURI_BENCH_REPLAY_CHILD";

/// `PIKURI_BENCH_IN_PROCESS=1`: [`Server::start`] runs the replay server as
/// a thread of the bench process (the setup before session 7), so that
/// its CPU time and its scheduling share the client's process.
pub(crate) fn in_process() -> bool {
    std::env::var("PIKURI_BENCH_IN_PROCESS").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The replay server the benches measure against: by default in a child
/// process (this bench binary re-executed, see [`serve_if_child`]), so
/// that the client process's CPU time is the client's alone and the
/// server's threads do not share its address space or allocator; with
/// [`in_process`], a thread of this process.
pub(crate) enum Server {
    Here(Replay),
    Child(ReplayChild),
}

impl Server {
    /// Serve `script` on 127.0.0.1:0 (see [`Replay::start`]).
    pub(crate) fn start(script: Script, close: bool) -> Server {
        if in_process() {
            Server::Here(Replay::start(script, close))
        } else {
            Server::Child(ReplayChild::spawn(&script, close))
        }
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        match self {
            Server::Here(r) => r.addr(),
            Server::Child(c) => c.addr,
        }
    }

    /// `http://127.0.0.1:port/v1`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr())
    }

    /// CPU time the server has used so far, when it is a child process
    /// (`utime + stime` of `/proc/<pid>/stat`, 10 ms ticks).
    pub(crate) fn child_cpu(&self) -> Option<Duration> {
        match self {
            Server::Here(_) => None,
            Server::Child(c) => Some(stat_cpu(&format!("/proc/{}/stat", c.child.id()))),
        }
    }
}

/// Where the replay server of this run lives, for the header line.
pub(crate) fn server_placement() -> &'static str {
    if in_process() {
        "replay server IN PROCESS (PIKURI_BENCH_IN_PROCESS=1): its threads are left out of the per-thread counts"
    } else {
        "replay server in a child process: every figure is the client process's own"
    }
}

/// A replay server in a child process. The script goes over the child's
/// stdin, its port comes back as one line on its stdout; the child serves
/// until its stdin closes, so it ends when this value drops and also when
/// this process dies of anything (a panic, a kill): no orphan outlives
/// the bench.
pub(crate) struct ReplayChild {
    addr: SocketAddr,
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
}

impl ReplayChild {
    pub(crate) fn spawn(script: &Script, close: bool) -> ReplayChild {
        ReplayChild::spawn_thinking(script, close, Duration::ZERO)
    }

    /// [`spawn`](Self::spawn), the child waiting `think` before each answer.
    pub(crate) fn spawn_thinking(script: &Script, close: bool, think: Duration) -> ReplayChild {
        use std::process::{Command, Stdio};
        let mut child = Command::new(std::env::current_exe().expect("bench executable"))
            .env(SERVE_ENV, "1")
            .env(REPLAY_DELAY_ENV, think.as_micros().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("replay child starts");
        let mut stdin = child.stdin.take().expect("piped stdin");
        let close = u8::from(close);
        let parts: Vec<&[u8]> = match script {
            Script::Fixed(r) => {
                writeln!(stdin, "fixed {close} {}", r.len()).expect("script head");
                vec![r]
            }
            Script::Cycle { first, then, every } => {
                writeln!(
                    stdin,
                    "cycle {close} {} {every} {}",
                    first.len(),
                    then.len()
                )
                .expect("script head");
                vec![first, then]
            }
            Script::Gather { response, at, n } => {
                writeln!(stdin, "gather {close} {} {at} {n}", response.len()).expect("script head");
                vec![response]
            }
        };
        for p in parts {
            stdin.write_all(p).expect("script body");
        }
        stdin.flush().expect("script flushed");
        let mut port = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut port)
            .expect("replay child reports its port");
        let port: u16 = port
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("replay child printed {port:?}, not a port"));
        ReplayChild {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            stdin: Some(stdin),
        }
    }
}

impl Drop for ReplayChild {
    fn drop(&mut self) {
        // Closing stdin ends the child; wait for it a bounded time, then
        // kill it.
        drop(self.stdin.take());
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Call first in `main` of every bench that uses [`Server`]: in a replay
/// child (started by [`ReplayChild::spawn`]) this reads the script from
/// stdin, serves it on 127.0.0.1:0, prints the port, serves until stdin
/// closes and exits the process; elsewhere it returns at once.
pub(crate) fn serve_if_child() {
    if std::env::var_os(SERVE_ENV).is_none() {
        return;
    }
    let mut input = BufReader::new(io::stdin().lock());
    let mut head = String::new();
    input.read_line(&mut head).expect("script head");
    let f: Vec<&str> = head.split_whitespace().collect();
    let num = |i: usize| -> usize { f[i].parse().expect("number in the script head") };
    let mut bytes = |n: usize| {
        let mut v = vec![0u8; n];
        input.read_exact(&mut v).expect("script body");
        v
    };
    let close = num(1) == 1;
    let script = match f[0] {
        "fixed" => Script::Fixed(bytes(num(2))),
        "cycle" => {
            let (n1, every, n2) = (num(2), num(3) as u64, num(4));
            let first = bytes(n1);
            Script::Cycle {
                first,
                then: bytes(n2),
                every,
            }
        }
        "gather" => Script::Gather {
            response: bytes(num(2)),
            at: num(3),
            n: num(4),
        },
        other => panic!("unknown script kind {other:?}"),
    };
    let server = Replay::start(script, close);
    println!("{}", server.addr().port());
    io::stdout().flush().expect("port printed");
    // Serve until the parent closes our stdin (it is done, or died).
    let _ = io::copy(&mut input, &mut io::sink());
    // Exit without joining the connection threads: a client may still
    // hold a kept-alive connection.
    std::process::exit(0);
}

// ---------------------------------------------------------------- baseline client

/// `Read` over a chunked body (the baseline's own decoder).
pub(crate) struct Dechunk<R> {
    inner: R,
    left: usize,
    done: bool,
    line: Vec<u8>,
}

impl<R: BufRead> Dechunk<R> {
    pub(crate) fn new(inner: R) -> Dechunk<R> {
        Dechunk {
            inner,
            left: 0,
            done: false,
            line: Vec::new(),
        }
    }
}

impl<R: BufRead> Read for Dechunk<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            self.line.clear();
            self.inner.read_until(b'\n', &mut self.line)?;
            let hex = std::str::from_utf8(&self.line).unwrap_or("").trim();
            let size = usize::from_str_radix(hex, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if size == 0 {
                self.done = true;
                self.line.clear();
                self.inner.read_until(b'\n', &mut self.line)?;
                return Ok(0);
            }
            self.left = size;
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= n;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.inner.read_exact(&mut crlf)?;
        }
        Ok(n)
    }
}

/// The end-to-end baseline: a fresh `TcpStream`, a minimal POST, then every
/// `data:` line of the response parsed into typed structs; nothing else.
pub(crate) fn baseline_fetch(addr: SocketAddr, request_body: &[u8]) -> Tally {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {}\r\n\r\n",
        request_body.len()
    );
    stream.write_all(head.as_bytes()).expect("write head");
    stream.write_all(request_body).expect("write body");
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let mut line = Vec::with_capacity(1024);
    let mut chunked = false;
    loop {
        line.clear();
        reader.read_until(b'\n', &mut line).expect("read head");
        let l = std::str::from_utf8(&line).unwrap_or("").trim_end();
        if l.is_empty() {
            break;
        }
        if l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
        {
            chunked = true;
        }
    }
    let mut tally = Tally::default();
    let mut lines = |r: &mut dyn BufRead| {
        loop {
            line.clear();
            if r.read_until(b'\n', &mut line).expect("read body") == 0 {
                break;
            }
            let l = line.strip_suffix(b"\n").unwrap_or(&line);
            if !tally.line(l) {
                break;
            }
        }
    };
    if chunked {
        lines(&mut BufReader::with_capacity(
            64 * 1024,
            Dechunk::new(reader),
        ));
    } else {
        lines(&mut reader);
    }
    tally
}

/// Time `f`, returning its result and the elapsed time.
/// The bare client's stream reader: the answer text of an SSE body, read
/// line by line up to `[DONE]` and parsed into typed serde structs.
pub(crate) fn sse_text<R: BufRead>(reader: &mut R) -> String {
    sse_text_each(reader, |_| {})
}

/// [`sse_text`], calling `each` with every delta's text as it is parsed.
pub(crate) fn sse_text_each<R: BufRead>(reader: &mut R, mut each: impl FnMut(&str)) -> String {
    let mut text = String::new();
    apis::data_lines(reader, |data| {
        if data == b"[DONE]" {
            return false;
        }
        let chunk: Chunk = serde_json::from_slice(data).expect("chunk");
        for c in chunk.choices {
            if let Some(t) = c.delta.content {
                each(&t);
                text.push_str(&t);
            }
        }
        true
    });
    text
}

enum Hand {
    Text(String),
    Flush,
}

/// The "bare + hand-off" baseline's consumer: one thread behind a bounded
/// channel that takes every text it is sent and acknowledges a flush, the
/// plainest form of a listener on a thread of its own.
pub(crate) struct Handoff {
    /// Whether `flush` waits for the consumer (the default); without, the
    /// "no wait" floor of a listener that hands off (issue 42).
    waits: bool,
    tx: Option<crossbeam_channel::Sender<Hand>>,
    ack: crossbeam_channel::Receiver<()>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Handoff {
    pub(crate) fn new() -> Handoff {
        let (tx, rx) = crossbeam_channel::bounded::<Hand>(32);
        let (ack_tx, ack) = crossbeam_channel::bounded(1);
        let thread = std::thread::spawn(move || {
            let mut bytes = 0;
            while let Ok(hand) = rx.recv() {
                match hand {
                    Hand::Text(t) => bytes += std::hint::black_box(t).len(),
                    Hand::Flush => ack_tx.send(()).expect("the sender waits"),
                }
            }
            bytes
        });
        Handoff {
            waits: true,
            tx: Some(tx),
            ack,
            thread: Some(thread),
        }
    }

    fn send(&self, hand: Hand) {
        self.tx
            .as_ref()
            .expect("open until finished")
            .send(hand)
            .expect("consumer runs");
    }

    /// Hand `t` over.
    pub(crate) fn text(&self, t: &str) {
        self.send(Hand::Text(t.to_owned()));
    }

    /// The consumer of [`Handoff::new`], whose `flush` does not wait.
    pub(crate) fn without_wait() -> Handoff {
        let mut h = Handoff::new();
        h.waits = false;
        h
    }

    /// Wait until the consumer has taken everything sent so far (nothing,
    /// without wait).
    pub(crate) fn flush(&self) {
        self.ask_flush();
        self.wait_flushed();
    }

    /// The first half of [`Handoff::flush`]: ask the consumer to
    /// acknowledge what was sent so far.
    pub(crate) fn ask_flush(&self) {
        if self.waits {
            self.send(Hand::Flush);
        }
    }

    /// The second half of [`Handoff::flush`]: wait for the acknowledgement.
    pub(crate) fn wait_flushed(&self) {
        if self.waits {
            self.ack.recv().expect("consumer acknowledges");
        }
    }

    /// Close the channel and join the consumer: the bytes it took.
    pub(crate) fn finish(mut self) -> usize {
        self.close()
    }

    fn close(&mut self) -> usize {
        drop(self.tx.take());
        self.thread
            .take()
            .map_or(0, |t| t.join().expect("consumer"))
    }
}

impl Drop for Handoff {
    fn drop(&mut self) {
        self.close();
    }
}

pub(crate) fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

/// Current value of a `/proc/self/status` field in KiB (`VmRSS`, `VmHWM`).
pub(crate) fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time of the whole process so far (all threads, including exited
/// ones): `utime + stime` from `/proc/self/stat`, at the kernel's 100 Hz
/// tick, so 10 ms resolution.
pub(crate) fn process_cpu() -> Duration {
    stat_cpu("/proc/self/stat")
}

/// `utime + stime` of a `/proc/<pid>/stat` file (10 ms ticks).
fn stat_cpu(path: &str) -> Duration {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the parenthesized command name; utime and stime are the
    // 14th and 15th fields overall.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    Duration::from_millis(f.iter().sum::<u64>() * 10)
}

/// On-CPU time of the calling thread, in ns (`/proc/thread-self/schedstat`).
pub(crate) fn thread_cpu() -> Duration {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    Duration::from_nanos(
        s.split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
    )
}

/// Threads of this process (`/proc/self/task`).
pub(crate) fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count)
}

/// Context switches (voluntary + involuntary) of every thread of this
/// process except the replay server's (`/proc/self/task/*/status`; threads
/// that exited are not counted, so measure across a span in which the
/// client's threads stay alive).
pub(crate) fn client_ctx_switches() -> u64 {
    client_threads().0
}

/// `(context switches, on-CPU ns)` summed over every thread of this process
/// except the replay server's; see [`client_ctx_switches`]. The CPU time is
/// the first field of `/proc/self/task/*/schedstat`.
pub(crate) fn client_threads() -> (u64, u64) {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    let (mut total, mut cpu) = (0, 0);
    for task in dir.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        if status
            .lines()
            .next()
            .is_some_and(|l| l.trim_start_matches("Name:").trim().starts_with("replay"))
        {
            continue;
        }
        total += ctx_in(&status);
        cpu += std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
    }
    (total, cpu)
}

/// Context switches of the calling thread (`/proc/thread-self/status`).
pub(crate) fn thread_ctx_switches() -> u64 {
    ctx_in(&std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default())
}

fn ctx_in(status: &str) -> u64 {
    // `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches`;
    // PIKURI_BENCH_VOLUNTARY=1 counts the voluntary ones only.
    let only_voluntary = std::env::var_os("PIKURI_BENCH_VOLUNTARY").is_some();
    status
        .lines()
        .filter(|l| l.contains("ctxt_switches:") && !(only_voluntary && l.starts_with("non")))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Resident memory of this process by kind of mapping, from
/// `/proc/self/smaps`: `(kind, mappings with resident pages, KiB)`. The
/// kinds: `heap` (the main arena, `[heap]`), `arenas` (glibc's other malloc
/// arenas: anonymous mappings at a 64 MiB boundary, where glibc puts
/// them), `stacks` (anonymous mappings right above a `---p` guard page, as
/// thread stacks are), `anon` (other anonymous mappings: large
/// allocations), `files` (the binary and libraries).
pub(crate) fn rss_by_kind() -> Vec<(&'static str, usize, u64)> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut kinds: Vec<(&'static str, usize, u64)> = ["heap", "arenas", "stacks", "anon", "files"]
        .iter()
        .map(|k| (*k, 0, 0))
        .collect();
    let (mut kind, mut prev_guard_end) = ("anon", 0u64);
    for line in smaps.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))
        {
            let perms = f.next().unwrap_or("");
            let name = f.nth(3).unwrap_or("");
            kind = if name == "[heap]" {
                "heap"
            } else if !name.is_empty() {
                "files"
            } else if start % (64 << 20) == 0 {
                "arenas"
            } else if start == prev_guard_end {
                "stacks"
            } else {
                "anon"
            };
            // A guard is a page or a few: an arena's reserved tail is not.
            prev_guard_end = if perms == "---p" && end - start <= 64 << 10 {
                end
            } else {
                0
            };
        } else if first == "Rss:" {
            let kib: u64 = f.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            if kib > 0
                && let Some(k) = kinds.iter_mut().find(|k| k.0 == kind)
            {
                k.1 += 1;
                k.2 += kib;
            }
        }
    }
    kinds
}

/// `PIKURI_MANY_TRACE=1`'s sampler: a thread that reads `VmRSS` every 2 ms
/// and keeps, for the highest reading, `count` at that moment and
/// [`rss_by_kind`]. A diagnostic: what it costs is in the figures of the
/// run it samples.
pub(crate) struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<RssPeak>,
}

/// What an [`RssSampler`] saw at its highest reading.
pub(crate) struct RssPeak {
    pub(crate) rss_kib: u64,
    pub(crate) count: isize,
    pub(crate) kinds: Vec<(&'static str, usize, u64)>,
}

impl RssSampler {
    pub(crate) fn start(count: Arc<std::sync::atomic::AtomicIsize>) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut peak = RssPeak {
                rss_kib: 0,
                count: 0,
                kinds: Vec::new(),
            };
            while !stopped.load(Ordering::Relaxed) {
                let rss = proc_status_kib("VmRSS");
                // A MiB above the last peak: reading smaps is slow.
                if rss > peak.rss_kib + 1024 {
                    peak = RssPeak {
                        rss_kib: rss,
                        count: count.load(Ordering::Relaxed),
                        kinds: rss_by_kind(),
                    };
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        });
        RssSampler { stop, thread }
    }

    pub(crate) fn finish(self) -> RssPeak {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("sampler")
    }
}
