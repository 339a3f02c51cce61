//! Benchmark 8: many agents in one process.
//!
//! 1, 10, 100 and 1,000 agents in one process, each with one no-op listener,
//! all streaming a 2,000-delta answer at once from one loopback replay
//! server (chunked, one HTTP chunk per event). The baseline is as many bare
//! ureq 3 clients (one `ureq::Agent` per thread, a `BufReader` over the
//! body, every `data:` line parsed into typed serde structs), each on its
//! own thread, against the same server. A second baseline, "bare +
//! hand-off", gives each bare client a consumer thread fed every delta over
//! a bounded crossbeam channel, joined when the stream ends: the plainest
//! way to run a listener on its own thread, so its ratio to bare is what
//! the crate's shape (two threads per agent) costs before pikuri adds
//! anything.
//!
//! Each (count, subject) pair runs in a child process (this binary
//! re-executed), so that its peak RSS (`VmHWM`) and CPU time (`utime +
//! stime` of `/proc/self/stat`, all threads) are its own; the replay
//! server runs in a process of its own too (see `common::Server`;
//! `PIKURI_BENCH_IN_PROCESS=1` keeps it in the parent, which measures
//! nothing itself). A child that runs past `PIKURI_BENCH_TIMEOUT_S` (default
//! 120 s) is killed and reported.
//!
//! The server sends each stream in two halves: the second only once all
//! `n` clients have had their first (`Script::Gather`). So the peak RSS is
//! that of `n` streams in flight at once for every subject. (Before
//! session 12 the server answered each request as it came: how many
//! streams overlapped then depended on the scheduling, and a bare client
//! often finished before the next started, while pikuri's, switching to
//! its listener thread, overlapped more, so the RSS ratio measured the
//! overlap more than the memory: 1.3x to 6.7x from the same build.)
//!
//! Figures: total deltas per second (all agents' deltas over the wall time
//! from the start signal until every agent finished), CPU time of the
//! streaming phase, peak RSS above the process's RSS before the clients were
//! created, per agent, and threads per agent (counted once every client is
//! built, before the start signal).
//!
//! Diagnostics: `PIKURI_MANY_TRACE=1` samples the RSS and prints, for its
//! highest reading, how many clients were in their turn and the resident
//! memory by kind (malloc arenas, thread stacks, ...; `common::rss_by_kind`);
//! `PIKURI_BENCH_GATHER_HOLD_MS=300` holds the gathered streams that long,
//! for the sampler to see them. `PIKURI_MANY_WRAP="heaptrack -o /tmp/x"`
//! runs each child under a profiler.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::BufReader;
use std::sync::atomic::AtomicIsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use pikuri::{Agent, ChatTransport, Event, HttpConfig};

use common::{
    Framing, Payload, Script, Server, header, median, proc_status_kib, process_cpu, quick, runs,
    secs, sse_body, sse_response, thread_count,
};

const DELTAS: usize = 2_000;

/// The child-process subjects, in table order.
const SUBJECTS: [&str; 3] = ["bare", "handoff", "pikuri"];

/// One bare client's stream: returns the answer's length. With `handoff`,
/// every delta's text is also sent to it as it is parsed.
fn bare_stream(agent: &ureq::Agent, url: &str, handoff: Option<&common::Handoff>) -> usize {
    let body =
        br#"{"model":"qwen3-8b","messages":[{"role":"user","content":"Go."}],"stream":true}"#;
    // A burst of 1,000 connects can overflow the listen backlog: retry
    // failed connects as pikuri's client does (see `pikuri_http`).
    let mut attempt = 0;
    let resp = loop {
        match agent
            .post(url)
            .header("Content-Type", "application/json")
            .send(&body[..])
        {
            Ok(r) => break r,
            Err(e) if attempt < 20 => {
                attempt += 1;
                let _ = e;
                std::thread::sleep(Duration::from_millis(1 << attempt.min(3)));
            }
            Err(e) => panic!("bare request: {e}"),
        }
    };
    let mut reader = BufReader::new(resp.into_body().into_reader());
    common::sse_text_each(&mut reader, |t| {
        if let Some(h) = handoff {
            h.text(t);
        }
    })
    .len()
}

/// Connection failures are retried (20 times, 1 ms doubling to 8 ms), like
/// the bare client's loop, for the listen backlog a burst of connects can
/// overflow.
fn pikuri_http() -> HttpConfig {
    HttpConfig::default()
        .with_max_retries(20)
        .with_retry_base(Duration::from_millis(1))
        .with_retry_cap(Duration::from_millis(8))
}

/// What a child measured.
#[derive(Clone, Copy, Default)]
struct Figures {
    wall_s: f64,
    cpu_s: f64,
    rss_per_agent_kib: f64,
    threads_per_agent: f64,
}

fn child(subject: &str, n: usize, base: &str, expect: usize) {
    let rss0 = proc_status_kib("VmRSS");
    let threads0 = thread_count();
    let go = Arc::new(Barrier::new(n + 1));
    let ready = Arc::new(Barrier::new(n + 1));
    // PIKURI_MANY_TRACE=1: a sampler follows the RSS and, at its peak,
    // reports how many clients were in their turn and where the memory was.
    let streaming = Arc::new(AtomicIsize::new(0));
    let trace = std::env::var_os("PIKURI_MANY_TRACE")
        .is_some()
        .then(|| common::RssSampler::start(Arc::clone(&streaming)));
    let url = format!("{base}/chat/completions");
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (go, ready) = (Arc::clone(&go), Arc::clone(&ready));
            let (subject, base, url) = (subject.to_string(), base.to_string(), url.clone());
            let streaming = Arc::clone(&streaming);
            std::thread::spawn(move || {
                if subject == "bare" || subject == "handoff" {
                    let agent = ureq::Agent::config_builder()
                        .http_status_as_error(false)
                        .build()
                        .new_agent();
                    let handoff = (subject == "handoff").then(common::Handoff::new);
                    ready.wait();
                    go.wait();
                    streaming.fetch_add(1, Relaxed);
                    assert_eq!(bare_stream(&agent, &url, handoff.as_ref()), expect);
                    streaming.fetch_sub(1, Relaxed);
                    if let Some(h) = handoff {
                        // The flush: the consumer has taken every delta.
                        assert_eq!(h.finish(), expect);
                    }
                } else {
                    let t = ChatTransport::new("qwen3-8b")
                        .with_api_base(base)
                        .with_context_window(Some(32_768));
                    let mut agent = Agent::builder(t)
                        .streaming(true)
                        .http(pikuri_http())
                        .add_listener(|_: &Event| {})
                        .build()
                        .expect("agent builds");
                    ready.wait();
                    go.wait();
                    streaming.fetch_add(1, Relaxed);
                    let out = agent.run_loop("Go.").expect("turn");
                    streaming.fetch_sub(1, Relaxed);
                    assert_eq!(out.answer.map_or(0, |a| a.len()), expect);
                    agent.close();
                }
            })
        })
        .collect();
    ready.wait();
    let built = proc_status_kib("VmRSS");
    let threads = thread_count() - threads0;
    let cpu0 = process_cpu();
    let t = Instant::now();
    go.wait();
    for h in handles {
        h.join().expect("client thread");
    }
    let wall = t.elapsed();
    let cpu = process_cpu().saturating_sub(cpu0);
    if let Some(sampler) = trace {
        let peak = sampler.finish();
        eprintln!(
            "{subject} x{n}: VmRSS {rss0} KiB at the start, {built} built, peak sample {} with {} in a turn",
            peak.rss_kib, peak.count
        );
        for (kind, maps, kib) in peak.kinds {
            eprintln!("{subject} x{n}:   {kind}: {maps} mappings, {kib} KiB");
        }
    }
    let hwm = proc_status_kib("VmHWM");
    println!(
        "{} {} {} {}",
        secs(wall),
        secs(cpu),
        hwm.saturating_sub(rss0) as f64 / n as f64,
        threads as f64 / n as f64
    );
}

fn in_child(subject: &str, n: usize, base: &str, expect: usize) -> Option<Figures> {
    let timeout = Duration::from_secs(
        std::env::var("PIKURI_BENCH_TIMEOUT_S")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120),
    );
    let exe = std::env::current_exe().expect("exe");
    // PIKURI_MANY_WRAP="heaptrack -o /tmp/many": the child runs under a
    // profiler (its own figures then include the profiler's).
    let wrap = env("PIKURI_MANY_WRAP");
    let mut words = wrap.split_whitespace();
    let mut command = match words.next() {
        Some(tool) => {
            let mut c = std::process::Command::new(tool);
            c.args(words).arg(&exe);
            c
        }
        None => std::process::Command::new(&exe),
    };
    let mut child = command
        .env("PIKURI_MANY_CHILD", subject)
        .env("PIKURI_MANY_N", n.to_string())
        .env("PIKURI_MANY_BASE", base)
        .env("PIKURI_MANY_EXPECT", expect.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("child starts");
    let t = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if t.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("{subject} x{n}: killed after {timeout:?}");
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("child output");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    (v.len() == 4).then(|| Figures {
        wall_s: v[0],
        cpu_s: v[1],
        rss_per_agent_kib: v[2],
        threads_per_agent: v[3],
    })
}

/// A server that sends every client half its stream, then the rest once
/// all `n` have had their half: the peak is `n` streams in flight at once
/// (see the module docs).
fn gathering(response: &[u8], n: usize) -> Server {
    Server::start(
        Script::Gather {
            at: response.len() / 2,
            n,
            response: response.to_vec(),
        },
        false,
    )
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn main() {
    common::serve_if_child();
    if let Ok(subject) = std::env::var("PIKURI_MANY_CHILD") {
        child(
            &subject,
            env("PIKURI_MANY_N").parse().expect("n"),
            &env("PIKURI_MANY_BASE"),
            env("PIKURI_MANY_EXPECT").parse().expect("expect"),
        );
        return;
    }
    header("many agents streaming at once (loopback)");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("# load average at start: {}", load.trim());
    println!("# {}", common::server_placement());
    let body = sse_body(Payload::Text, DELTAS);
    let expect = common::baseline_decode(&body).delta_bytes;
    let response = sse_response(&body, Framing::Chunked);
    let counts: &[usize] = if quick() {
        &[1, 10, 50]
    } else {
        &[1, 10, 100, 1_000]
    };
    println!(
        "| agents | client | deltas/s | CPU s | CPU ratio | CPU ratio to hand-off | wall ratio | peak RSS KiB/agent | RSS ratio | threads/agent |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in counts {
        if !common::selected(&format!("x{n}")) {
            continue;
        }
        let server = gathering(&response, n);
        let base = server.base_url();
        let mut figs: [Vec<Figures>; 3] = Default::default();
        // Per subject: ratios to bare (CPU, wall, RSS) and CPU to hand-off.
        let mut cpu_r: [Vec<f64>; 3] = Default::default();
        let mut wall_r: [Vec<f64>; 3] = Default::default();
        let mut rss_r: [Vec<f64>; 3] = Default::default();
        let mut cpu_h: [Vec<f64>; 3] = Default::default();
        for r in 0..runs() {
            let mut this = [None; 3];
            for k in 0..3 {
                // Rotate the order each run so drift hits every subject alike.
                let i = (k + r) % 3;
                this[i] = in_child(SUBJECTS[i], n, &base, expect);
            }
            for i in 0..3 {
                if let (Some(b), Some(p)) = (this[0], this[i]) {
                    cpu_r[i].push(p.cpu_s / b.cpu_s.max(0.01));
                    wall_r[i].push(p.wall_s / b.wall_s);
                    rss_r[i].push(p.rss_per_agent_kib / b.rss_per_agent_kib.max(1.0));
                }
                if let (Some(h), Some(p)) = (this[1], this[i]) {
                    cpu_h[i].push(p.cpu_s / h.cpu_s.max(0.01));
                }
                if let Some(f) = this[i] {
                    figs[i].push(f);
                }
            }
        }
        for (i, name) in [
            "bare ureq + serde",
            "bare + hand-off thread",
            "pikuri, 1 listener",
        ]
        .iter()
        .enumerate()
        {
            let col = |f: fn(&Figures) -> f64| {
                let mut v: Vec<f64> = figs[i].iter().map(f).collect();
                median(&mut v)
            };
            let rate = {
                let mut v: Vec<f64> = figs[i]
                    .iter()
                    .map(|f| (n * DELTAS) as f64 / f.wall_s)
                    .collect();
                median(&mut v)
            };
            let ratio = |v: &mut Vec<f64>| {
                if v.is_empty() {
                    String::new()
                } else {
                    format!("{:.2}x", median(v))
                }
            };
            println!(
                "| {n} | {name} | {:.0} | {:.2} | {} | {} | {} | {:.0} | {} | {:.1} |",
                rate,
                col(|f| f.cpu_s),
                ratio(&mut cpu_r[i]),
                ratio(&mut cpu_h[i]),
                ratio(&mut wall_r[i]),
                col(|f| f.rss_per_agent_kib),
                ratio(&mut rss_r[i]),
                col(|f| f.threads_per_agent),
            );
        }
    }
}
