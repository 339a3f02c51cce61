//! Benchmark 4: loop overhead against history length.
//!
//! Tool rounds against an instant server (a replay thread answering
//! non-streamed tool calls over keep-alive loopback) with 10, 100, 1,000 and
//! 5,000 messages of history preloaded through `Agent::load_history`. Each
//! `run_loop` makes 10 tool rounds and one answer round (history grows by
//! 20 messages meanwhile). Reported per round: time and request bytes.
//!
//! The baseline is what a minimal hand-written client must do per round:
//! serialize the history once with `serde_json` (the same messages, at the
//! run's mean length), then one HTTP exchange of those bytes on a
//! keep-alive `TcpStream` to the same kind of server. Target: pikuri within
//! 1.5x of it, and time growing linearly with the history.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pikuri::tool::Parameters;
use pikuri::{
    Agent, ChatTransport, History, HttpConfig, Message, Tool, ToolCall, ToolContext, ToolError,
};
use serde_json::Value;

use common::{Replay, Script, header, json_response, median, quick, runs, secs};

/// Tool rounds per `run_loop` (plus one answer round).
const ROUNDS: usize = 10;

struct Lookup {
    params: Parameters,
    out: String,
}

impl Tool for Lookup {
    fn name(&self) -> &'static str {
        "lookup"
    }
    fn description(&self) -> &'static str {
        "Looks a query up."
    }
    fn parameters(&self) -> &Parameters {
        &self.params
    }
    fn call(&self, _args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
        Ok(self.out.clone())
    }
}

fn text(n: usize, seed: usize) -> String {
    const WORDS: &str = "the agent asked the tool about streaming parsers and the tool said \"ok\" \
        with a list: alpha, beta, gamma; délai naïve 42 ";
    WORDS.chars().cycle().skip(seed % 17).take(n).collect()
}

/// `n` messages: a user question, then tool-call/result pairs with an
/// answer and a new question every ten pairs. Sizes: user 120 chars, tool
/// results 400, answers 200.
fn history(n: usize) -> Vec<Message> {
    let mut m = vec![Message::user(text(120, 0))];
    let mut k = 0usize;
    while m.len() < n {
        k += 1;
        if k.is_multiple_of(10) {
            m.push(Message::assistant(text(200, k)));
            m.push(Message::user(text(120, k)));
        } else {
            let id = format!("call_{k}");
            let args = format!("{{\"q\":\"{}\"}}", text(30, k));
            m.push(Message::assistant_tool_calls(
                "",
                vec![ToolCall::new(id.clone(), "lookup", args)],
            ));
            m.push(Message::tool(id, text(400, k)));
        }
    }
    m.truncate(n);
    if let Some(last) = m.last_mut()
        && !last.tool_calls.is_empty()
    {
        *last = Message::assistant(text(200, 1));
    }
    m
}

const TOOL_REPLY: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"qwen3-8b","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_x","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"rust sse parser\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}"#;
const TEXT_REPLY: &str = r#"{"id":"chatcmpl-2","object":"chat.completion","created":1741569952,"model":"qwen3-8b","choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":2,"total_tokens":102}}"#;

/// Baseline: one POST of `body` on a kept-alive stream, response read whole.
fn raw_exchange(
    reader: &mut BufReader<TcpStream>,
    head: &str,
    body: &[u8],
    line: &mut Vec<u8>,
    resp: &mut Vec<u8>,
) {
    let w = reader.get_mut();
    w.write_all(head.as_bytes()).expect("write head");
    w.write_all(body).expect("write body");
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_until(b'\n', line).expect("read head");
        let l = std::str::from_utf8(line).unwrap_or("").trim_end();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("Content-Length:") {
            length = v.trim().parse().expect("length");
        }
    }
    resp.resize(length, 0);
    reader.read_exact(resp).expect("read body");
    let v: Value = serde_json::from_slice(resp).expect("json");
    assert!(v["choices"].is_array());
}

fn main() {
    header("loop overhead vs history length");
    let sizes: &[usize] = if quick() {
        &[10, 100]
    } else {
        &[10, 100, 1_000, 5_000]
    };
    let budget = Duration::from_millis(if quick() { 20 } else { 150 });

    let server = Replay::start(
        Script::Cycle {
            first: json_response(TOOL_REPLY),
            then: json_response(TEXT_REPLY),
            every: ROUNDS as u64 + 1,
        },
        false,
    );
    let raw_server = Replay::start(Script::Fixed(json_response(TOOL_REPLY)), false);

    println!(
        "| history msgs | pikuri us/round | rounds/s | req bytes/round | baseline us (serialize + raw HTTP) | serialize us | history JSON bytes | ratio | target <= 1.5x |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut per_round = Vec::new();
    for &n in sizes {
        let l = measure(n, &server, &raw_server, budget);
        per_round.push((n, l));
    }
    // Linearity: the marginal cost per history message between sizes.
    for w in per_round.windows(2) {
        let ((n0, t0), (n1, t1)) = (w[0], w[1]);
        println!(
            "marginal cost {n0} -> {n1} messages: {:.0} ns per message per round",
            (t1 - t0) / (n1 - n0) as f64 * 1e9
        );
    }
}

/// One history size: prints its row, returns pikuri's seconds per round.
fn measure(n: usize, server: &Replay, raw_server: &Replay, budget: Duration) -> f64 {
    let base_history = history(n);
    let mid = history(n + ROUNDS); // baseline: the run's mean length
    let transport = ChatTransport::new("qwen3-8b")
        .with_api_base(server.base_url())
        .with_context_window(Some(1_000_000));
    let mut agent = Agent::builder(transport)
        .system_prompt("You are a research agent. Use the lookup tool.")
        .http(HttpConfig::default().with_max_retries(0))
        .add_tool(Lookup {
            params: Parameters::builder()
                .required_string("q", "The query")
                .build(),
            out: text(400, 3),
        })
        .build()
        .expect("agent builds");

    let mut stream = BufReader::with_capacity(
        64 * 1024,
        TcpStream::connect(raw_server.addr()).expect("connect"),
    );
    stream.get_ref().set_nodelay(true).expect("nodelay");
    let (mut ser_buf, mut line, mut resp) = (Vec::new(), Vec::new(), Vec::new());

    let (mut lib, mut base, mut ser, mut bytes) = (Vec::new(), Vec::new(), Vec::new(), 0.0);
    for r in 0..runs() {
        let mut one = |pikuri: bool| {
            let started = Instant::now();
            let (mut spent, mut count) = (Duration::ZERO, 0usize);
            if pikuri {
                let before = server.request_bytes.load(Ordering::Relaxed);
                while started.elapsed() < budget || count == 0 {
                    agent
                        .load_history(History::new(base_history.clone()).expect("valid history"))
                        .expect("loads");
                    let t = Instant::now();
                    let out = agent.run_loop("Look it up again.").expect("run completes");
                    spent += t.elapsed();
                    assert_eq!(out.steps as usize, ROUNDS);
                    count += ROUNDS + 1;
                }
                let total = server.request_bytes.load(Ordering::Relaxed) - before;
                bytes = total as f64 / count as f64;
                lib.push(secs(spent) / count as f64);
            } else {
                let (mut spent_ser, mut hist_bytes) = (Duration::ZERO, 0);
                while started.elapsed() < budget || count == 0 {
                    let t = Instant::now();
                    ser_buf.clear();
                    serde_json::to_writer(&mut ser_buf, &mid).expect("serializes");
                    let s = t.elapsed();
                    let head = format!(
                        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        ser_buf.len()
                    );
                    raw_exchange(&mut stream, &head, &ser_buf, &mut line, &mut resp);
                    spent += t.elapsed();
                    spent_ser += s;
                    hist_bytes = ser_buf.len();
                    count += 1;
                }
                base.push(secs(spent) / count as f64);
                ser.push((secs(spent_ser) / count as f64, hist_bytes));
            }
        };
        one(r % 2 == 0);
        one(r % 2 == 1);
    }
    let (l, b) = (median(&mut lib), median(&mut base));
    let hist_bytes = ser[0].1;
    let s = median(&mut ser.iter().map(|x| x.0).collect::<Vec<_>>());
    println!(
        "| {n} | {:.1} | {:.0} | {:.0} | {:.1} | {:.1} | {hist_bytes} | {:.2}x | {} |",
        l * 1e6,
        1.0 / l,
        bytes,
        b * 1e6,
        s * 1e6,
        l / b,
        if l / b <= 1.5 { "met" } else { "MISSED" }
    );
    agent.close();
    l
}
