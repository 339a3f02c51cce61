//! Benchmark 7: the fixed cost of a turn.
//!
//! Many short turns over one kept-alive loopback connection, each a whole
//! `Agent::run_loop` (request built, sent, answer decoded, events delivered,
//! listeners flushed), against a bare ureq 3 loop in the same process and
//! against the same replay server: a typed serde request (the same growing
//! conversation), `ureq::Agent::post(..).send(..)`, the answer parsed into
//! typed serde structs (a JSON body, or every `data:` line of a stream).
//! pikuri runs with zero, one and four no-op listeners.
//!
//! A second baseline, "bare + hand-off", is the least the crate's shape
//! costs on top of the bare client: the same loop, plus one consumer thread
//! fed over a bounded crossbeam channel (the answer, or each delta as it is
//! parsed) that acknowledges a flush message before the turn returns, the
//! plainest way to hand a turn to a listener thread and wait for it. Its
//! ratio to bare is the floor under pikuri's one-listener ratio on the
//! machine at hand; pikuri's ratio to it is what pikuri adds on top.
//!
//! Shapes: a non-streamed answer; streams of 50 (a short chat answer),
//! 20,000 and 200,000 deltas (chunked, one HTTP chunk per event). The
//! conversation is cleared every `BLOCK` turns, outside the timed span, on
//! both sides.
//!
//! Figures: microseconds per turn, and context switches per turn: the sum
//! of `voluntary_ctxt_switches + nonvoluntary_ctxt_switches` over every
//! thread of the process except the replay server's
//! (`/proc/self/task/*/status`: the calling thread plus the listener
//! threads, which live through the whole span), and the calling thread's
//! alone (`/proc/thread-self/status`).
//!
//! Peak RSS of one streaming agent: each subject runs alone in a child
//! process (this binary re-executed), which streams the 20,000-delta answer
//! five times from the parent's server and reports its `VmHWM`.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::BufReader;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use pikuri::{Agent, ChatTransport, Event, HttpConfig};

use common::{
    Framing, Payload, Replay, Script, client_threads, header, json_response, median,
    proc_status_kib, quick, runs, sse_body, sse_response, thread_ctx_switches,
};

/// Turns between two conversation resets.
const BLOCK: usize = 10;

const ANSWER: &str = r#"{"id":"chatcmpl-42","object":"chat.completion","created":1741569952,"model":"qwen3","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today? Ask me anything about the code base."},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":17,"total_tokens":38}}"#;

const QUESTION: &str = "What does the listener hub do?";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Subject {
    Bare,
    Handoff,
    Pikuri(usize),
}

impl Subject {
    fn name(self) -> String {
        match self {
            Subject::Bare => "bare ureq + serde".to_string(),
            Subject::Handoff => "bare + hand-off thread".to_string(),
            Subject::Pikuri(n) => format!("pikuri, {n} listener(s)"),
        }
    }
}

#[derive(Serialize, Deserialize, Clone)]
struct WireMessage {
    role: String,
    content: String,
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: &'a [WireMessage],
    stream: bool,
}

#[derive(Deserialize)]
struct Response {
    choices: Vec<ResponseChoice>,
    #[allow(dead_code, reason = "parsed like a real client would")]
    usage: Option<common::WireUsage>,
}

#[derive(Deserialize)]
struct ResponseChoice {
    message: ResponseMessage,
    #[allow(dead_code, reason = "parsed like a real client would")]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<String>,
}

/// The bare client: one ureq agent, a conversation, nothing else (or, for
/// the hand-off baseline, plus a [`common::Handoff`]).
struct Bare {
    agent: ureq::Agent,
    url: String,
    messages: Vec<WireMessage>,
    stream: bool,
    body: Vec<u8>,
    handoff: Option<common::Handoff>,
}

impl Bare {
    fn new(base: &str, stream: bool) -> Bare {
        Bare {
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .new_agent(),
            url: format!("{base}/chat/completions"),
            messages: Vec::new(),
            stream,
            body: Vec::new(),
            handoff: None,
        }
    }

    /// One turn: returns the answer's length in bytes.
    fn turn(&mut self) -> usize {
        self.messages.push(WireMessage {
            role: "user".into(),
            content: QUESTION.into(),
        });
        self.body.clear();
        serde_json::to_writer(
            &mut self.body,
            &WireRequest {
                model: "qwen3-8b",
                messages: &self.messages,
                stream: self.stream,
            },
        )
        .expect("request serializes");
        let resp = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .send(&self.body[..])
            .expect("bare request");
        let answer = if self.stream {
            let mut reader = BufReader::new(resp.into_body().into_reader());
            let handoff = self.handoff.as_ref();
            let text = common::sse_text_each(&mut reader, |t| {
                if let Some(h) = handoff {
                    h.text(t);
                }
            });
            // Drain to the end so the connection is reused.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
            text
        } else {
            let bytes = resp.into_body().read_to_vec().expect("answer read");
            let r: Response = serde_json::from_slice(&bytes).expect("answer parses");
            r.choices
                .into_iter()
                .next()
                .and_then(|c| c.message.content)
                .unwrap_or_default()
        };
        if let Some(h) = &self.handoff {
            if !self.stream {
                h.text(&answer);
            }
            h.flush();
        }
        let n = answer.len();
        self.messages.push(WireMessage {
            role: "assistant".into(),
            content: answer,
        });
        n
    }

    fn reset(&mut self) {
        self.messages.clear();
    }
}

fn pikuri_agent(base: &str, stream: bool, listeners: usize) -> Agent {
    let transport = ChatTransport::new("qwen3-8b")
        .with_api_base(base)
        .with_context_window(Some(32_768));
    let mut cfg = Agent::builder(transport)
        .streaming(stream)
        .http(HttpConfig::default().with_max_retries(0));
    for _ in 0..listeners {
        cfg = cfg.add_listener(|_: &Event| {});
    }
    cfg.build().expect("agent builds")
}

/// What one run measured, per turn.
#[derive(Default, Clone, Copy)]
struct PerTurn {
    us: f64,
    cpu_us: f64,
    ctx: f64,
    own_ctx: f64,
}

/// `turns` turns of `subject`, timed in blocks of `BLOCK`.
fn run(subject: Subject, base: &str, stream: bool, turns: usize, expect: usize) -> PerTurn {
    let mut time = Duration::ZERO;
    let (mut ctx, mut own, mut cpu) = (0u64, 0u64, 0u64);
    let mut block = |one: &mut dyn FnMut() -> usize, reset: &mut dyn FnMut()| {
        let mut done = 0;
        while done < turns {
            let n = BLOCK.min(turns - done);
            let ((c0, cpu0), o0) = (client_threads(), thread_ctx_switches());
            let t = Instant::now();
            for _ in 0..n {
                assert_eq!(one(), expect);
            }
            time += t.elapsed();
            let (c1, cpu1) = client_threads();
            ctx += c1 - c0;
            cpu += cpu1 - cpu0;
            own += thread_ctx_switches() - o0;
            reset();
            done += n;
        }
    };
    match subject {
        Subject::Bare | Subject::Handoff => {
            let mut plain = Bare::new(base, stream);
            if subject == Subject::Handoff {
                plain.handoff = Some(common::Handoff::new());
            }
            let client = std::cell::RefCell::new(plain);
            block(&mut || client.borrow_mut().turn(), &mut || {
                client.borrow_mut().reset();
            });
        }
        Subject::Pikuri(listeners) => {
            let agent = std::cell::RefCell::new(pikuri_agent(base, stream, listeners));
            block(
                &mut || {
                    let out = agent.borrow_mut().run_loop(QUESTION).expect("turn");
                    out.answer.map_or(0, |a| a.len())
                },
                &mut || agent.borrow_mut().clear_conversation(),
            );
            agent.borrow_mut().close();
        }
    }
    PerTurn {
        us: time.as_secs_f64() * 1e6 / turns as f64,
        cpu_us: cpu as f64 / 1e3 / turns as f64,
        ctx: ctx as f64 / turns as f64,
        own_ctx: own as f64 / turns as f64,
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
    let answer_len = "Hello! How can I help you today? Ask me anything about the code base.".len();
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

/// Child mode for the RSS figure: stream the 20,000-delta answer five times
/// from `PIKURI_TURN_BASE` and print `VmHWM` in KiB.
fn rss_child(subject: &str, base: &str) {
    let expect: usize = std::env::var("PIKURI_TURN_EXPECT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let start = proc_status_kib("VmHWM");
    if subject == "bare" {
        let mut client = Bare::new(base, true);
        for _ in 0..5 {
            assert_eq!(client.turn(), expect);
            client.reset();
        }
    } else {
        let mut agent = pikuri_agent(base, true, 1);
        for _ in 0..5 {
            let out = agent.run_loop(QUESTION).expect("turn");
            assert_eq!(out.answer.map_or(0, |a| a.len()), expect);
            agent.clear_conversation();
        }
        agent.close();
    }
    println!("{start} {}", proc_status_kib("VmHWM"));
}

fn rss_in_child(subject: &str, base: &str, expect: usize) -> (f64, f64) {
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .env("PIKURI_TURN_CHILD", subject)
        .env("PIKURI_TURN_BASE", base)
        .env("PIKURI_TURN_EXPECT", expect.to_string())
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text
        .split_whitespace()
        .filter_map(|v| v.parse::<f64>().ok());
    (it.next().unwrap_or(0.0), it.next().unwrap_or(0.0))
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

fn main() {
    if let Ok(subject) = std::env::var("PIKURI_TURN_CHILD") {
        rss_child(&subject, &std::env::var("PIKURI_TURN_BASE").expect("base"));
        return;
    }
    header("per-turn cost (loopback, keep-alive)");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("# load average at start: {}", load.trim());
    let subjects = [
        Subject::Bare,
        Subject::Handoff,
        Subject::Pikuri(0),
        Subject::Pikuri(1),
        Subject::Pikuri(4),
    ];
    println!(
        "| shape | client | us/turn | ratio to bare | ratio to hand-off | CPU us/turn (client threads) | CPU ratio | ctx switches/turn (client threads) | calling thread |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for shape in shapes() {
        if !subjects
            .iter()
            .any(|s| selected(&format!("{}/{}", shape.name, s.name())))
        {
            continue;
        }
        let server = Replay::start(Script::Fixed(shape.response.clone()), false);
        let base = server.base_url();
        let mut all: Vec<Vec<PerTurn>> = vec![Vec::new(); subjects.len()];
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
        let mut floor_ratios: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
        let mut cpu_ratios: Vec<Vec<f64>> = vec![Vec::new(); subjects.len()];
        for r in 0..runs() {
            let mut this = [PerTurn::default(); 5];
            for k in 0..subjects.len() {
                // Rotate the order each run so drift hits every subject alike.
                let i = (k + r) % subjects.len();
                if i > 1 && !selected(&format!("{}/{}", shape.name, subjects[i].name())) {
                    continue;
                }
                this[i] = run(subjects[i], &base, shape.stream, shape.turns, shape.expect);
            }
            for i in 0..subjects.len() {
                all[i].push(this[i]);
                ratios[i].push(this[i].us / this[0].us);
                floor_ratios[i].push(this[i].us / this[1].us);
                cpu_ratios[i].push(this[i].cpu_us / this[0].cpu_us);
            }
        }
        for (i, s) in subjects.iter().enumerate() {
            // Filtered out by PIKURI_BENCH_FILTER.
            if all[i].iter().all(|p| p.us == 0.0) {
                continue;
            }
            let mut us: Vec<f64> = all[i].iter().map(|p| p.us).collect();
            let mut ctx: Vec<f64> = all[i].iter().map(|p| p.ctx).collect();
            let mut cpu: Vec<f64> = all[i].iter().map(|p| p.cpu_us).collect();
            let mut own: Vec<f64> = all[i].iter().map(|p| p.own_ctx).collect();
            println!(
                "| {} | {} | {:.1} | {:.2}x | {:.2}x | {:.1} | {:.2}x | {:.2} | {:.2} |",
                shape.name,
                s.name(),
                median(&mut us),
                median(&mut ratios[i]),
                median(&mut floor_ratios[i]),
                median(&mut cpu),
                median(&mut cpu_ratios[i]),
                median(&mut ctx),
                median(&mut own),
            );
        }
    }
    if selected("build") {
        build_cost();
    }
    if selected("rss") {
        let body = sse_body(Payload::Text, if quick() { 200 } else { 20_000 });
        let expect = common::baseline_decode(&body).delta_bytes;
        let server = Replay::start(Script::Fixed(sse_response(&body, Framing::Chunked)), false);
        let (mut bare, mut pik, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs() {
            let (_, b) = rss_in_child("bare", &server.base_url(), expect);
            let (_, p) = rss_in_child("pikuri", &server.base_url(), expect);
            bare.push(b);
            pik.push(p);
            ratio.push(p / b);
        }
        println!(
            "| rss | one streaming agent (20,000 deltas x5), peak VmHWM KiB: bare / pikuri 1 listener | {:.0} / {:.0} | {:.2}x | | |",
            median(&mut bare),
            median(&mut pik),
            median(&mut ratio)
        );
    }
}
