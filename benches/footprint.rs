//! Benchmark 6: footprint of idle agents.
//!
//! Resident memory (`/proc/self/status` VmRSS, and VmHWM for the peak) and
//! threads (`/proc/self/task`) of one idle agent and of 1,000 idle agents in
//! one process, each with one listener; threads again after `close`. The
//! baseline is the design's floor: one parked std thread plus one crossbeam
//! channel per agent. Binary sizes and build times are measured by
//! `scripts/bench-build.sh` (see BENCHMARKS.md).

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::time::Instant;

use pikuri::{Agent, ChatTransport, Event};

use common::{header, median, proc_status_kib, quick, runs, thread_count};

fn agent() -> Agent {
    // An explicit context window: no probe, so nothing touches the network.
    let t = ChatTransport::new("qwen3-8b")
        .with_api_base("http://127.0.0.1:9/v1")
        .with_context_window(Some(32_768));
    Agent::builder(t)
        .system_prompt("You are an idle agent.")
        .add_listener(|_: &Event| {})
        .build()
        .expect("agent builds")
}

struct Phase {
    rss_one_kib: f64,
    rss_per_kib: f64,
    threads_one: usize,
    threads_per: f64,
    threads_after_close: usize,
    build_us: f64,
}

fn measure_agents(n: usize) -> Phase {
    let (rss0, th0) = (proc_status_kib("VmRSS"), thread_count());
    let first = agent();
    let (rss1, th1) = (proc_status_kib("VmRSS"), thread_count());
    let t = Instant::now();
    let mut rest: Vec<Agent> = (1..n).map(|_| agent()).collect();
    let build_us = t.elapsed().as_secs_f64() * 1e6 / (n - 1).max(1) as f64;
    let (rss_n, th_n) = (proc_status_kib("VmRSS"), thread_count());
    let mut all = vec![first];
    all.append(&mut rest);
    for a in &mut all {
        a.close();
    }
    let th_closed = thread_count();
    drop(all);
    Phase {
        rss_one_kib: rss1.saturating_sub(rss0) as f64,
        rss_per_kib: rss_n.saturating_sub(rss0) as f64 / n as f64,
        threads_one: th1 - th0,
        threads_per: (th_n - th0) as f64 / n as f64,
        threads_after_close: th_closed - th0,
        build_us,
    }
}

fn measure_baseline(n: usize) -> Phase {
    let (rss0, th0) = (proc_status_kib("VmRSS"), thread_count());
    let spawn = || {
        let (tx, rx) = crossbeam_channel::unbounded::<Event>();
        let h = std::thread::spawn(move || for _ in rx {});
        (tx, h)
    };
    let first = spawn();
    let (rss1, th1) = (proc_status_kib("VmRSS"), thread_count());
    let t = Instant::now();
    let mut all: Vec<_> = (1..n).map(|_| spawn()).collect();
    let build_us = t.elapsed().as_secs_f64() * 1e6 / (n - 1).max(1) as f64;
    let (rss_n, th_n) = (proc_status_kib("VmRSS"), thread_count());
    all.push(first);
    for (tx, h) in all {
        drop(tx);
        h.join().expect("joins");
    }
    Phase {
        rss_one_kib: rss1.saturating_sub(rss0) as f64,
        rss_per_kib: rss_n.saturating_sub(rss0) as f64 / n as f64,
        threads_one: th1 - th0,
        threads_per: (th_n - th0) as f64 / n as f64,
        threads_after_close: thread_count() - th0,
        build_us,
    }
}

fn main() {
    header("footprint (idle agents)");
    let n = if quick() { 50 } else { 1_000 };
    println!(
        "process at start: VmRSS {} KiB, {} threads",
        proc_status_kib("VmRSS"),
        thread_count()
    );
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for r in 0..runs() {
        if r % 2 == 0 {
            a.push(measure_agents(n));
            b.push(measure_baseline(n));
        } else {
            b.push(measure_baseline(n));
            a.push(measure_agents(n));
        }
    }
    let med = |v: &[Phase], f: fn(&Phase) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
    println!(
        "| subject | RSS of the first (KiB) | RSS per unit at {n} (KiB) | build us/unit | threads, first | threads per unit | threads after close |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, v) in [
        ("baseline: thread + channel", &b),
        ("pikuri agent, 1 listener", &a),
    ] {
        println!(
            "| {name} | {:.0} | {:.1} | {:.1} | {:.0} | {:.2} | {:.0} |",
            med(v, |p| p.rss_one_kib),
            med(v, |p| p.rss_per_kib),
            med(v, |p| p.build_us),
            med(v, |p| p.threads_one as f64),
            med(v, |p| p.threads_per),
            med(v, |p| p.threads_after_close as f64),
        );
    }
    println!(
        "ratio (agent / baseline) RSS per unit: {:.2}x",
        med(&a, |p| p.rss_per_kib) / med(&b, |p| p.rss_per_kib)
    );
    println!(
        "peak VmHWM of the process: {} KiB",
        proc_status_kib("VmHWM")
    );
}
