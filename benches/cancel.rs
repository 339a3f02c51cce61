//! Benchmark 5: cancel latency.
//!
//! Time from `Cancellable::cancel()` (called on another thread once the
//! request is in flight) to `Agent::run_loop` returning `Err(Cancelled)`,
//! while the server sends nothing: a `FakeServer` `Reply::hang()` to a
//! non-streamed request, and `Reply::text(..).hang_after(2)` to a streamed
//! one (cancel after the first delta arrived). 100 trials each; p50 and p99.
//! The baseline is the floor of the mechanism: a plain `TcpStream` blocked
//! in `read` on the same silent server, interrupted by `shutdown(Both)` from
//! another thread. Target: p99 < 50 ms.

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Cancellable, Event, HttpConfig};

use common::{header, quantile, quick};

/// Wait for the server to have read `n` chat requests.
fn wait_requests(server: &FakeServer, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.chat_requests().len() < n {
        assert!(Instant::now() < deadline, "request never arrived");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn trial_pikuri(stream: bool, trials: usize) -> Vec<u64> {
    let server = FakeServer::start();
    let cancel = Cancellable::new();
    let (delta_tx, delta_rx) = crossbeam_channel::unbounded::<()>();
    let mut agent = Agent::builder(server.transport().with_context_window(Some(32_768)))
        .streaming(stream)
        .cancellable(cancel.clone())
        .http(HttpConfig::default().with_max_retries(0))
        .add_listener(move |e: &Event| {
            if e.is_delta() {
                let _ = delta_tx.send(());
            }
        })
        .build()
        .expect("agent builds");
    let mut out = Vec::with_capacity(trials);
    for i in 0..trials {
        if stream {
            server.push(Reply::text("a long answer that never finishes ".repeat(20)).hang_after(2));
        } else {
            server.push(Reply::hang());
        }
        let at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let canceller = {
            let (at, cancel, server_wait) =
                (Arc::clone(&at), cancel.clone(), (!stream).then_some(i + 1));
            let delta_rx = delta_rx.clone();
            let server = &server;
            std::thread::scope(|s| {
                let h = s.spawn(move || {
                    match server_wait {
                        Some(n) => wait_requests(server, n),
                        None => delta_rx
                            .recv_timeout(Duration::from_secs(5))
                            .expect("a delta arrived"),
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    *at.lock() = Some(Instant::now());
                    cancel.cancel();
                });
                let result = agent.run_loop("Go.");
                let end = Instant::now();
                h.join().expect("canceller");
                assert!(result.expect_err("cancelled").is_cancelled());
                end
            })
        };
        let started = at.lock().expect("cancel time");
        out.push(canceller.duration_since(started).as_nanos() as u64);
        while delta_rx.try_recv().is_ok() {}
    }
    agent.close();
    out
}

/// Baseline: a blocked `read` on a hanging server, cut by `shutdown`.
fn trial_baseline(trials: usize) -> Vec<u64> {
    let server = FakeServer::start();
    let mut out = Vec::with_capacity(trials);
    for i in 0..trials {
        server.push(Reply::hang());
        let mut s = TcpStream::connect(server.local_addr()).expect("connect");
        let body = br#"{"model":"m","messages":[{"role":"user","content":"Go."}]}"#;
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).expect("head");
        s.write_all(body).expect("body");
        wait_requests(&server, i + 1);
        let other = s.try_clone().expect("clone");
        let at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let at2 = Arc::clone(&at);
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2));
            *at2.lock() = Some(Instant::now());
            let _ = other.shutdown(Shutdown::Both);
        });
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let end = Instant::now();
        h.join().expect("shutdown thread");
        let started = at.lock().expect("cancel time");
        out.push(end.duration_since(started).as_nanos() as u64);
    }
    out
}

fn line(name: &str, mut v: Vec<u64>, target: bool) {
    v.sort_unstable();
    let (p50, p99) = (
        quantile(&v, 0.5) as f64 / 1e6,
        quantile(&v, 0.99) as f64 / 1e6,
    );
    let max = *v.last().unwrap_or(&0) as f64 / 1e6;
    let verdict = if !target {
        String::new()
    } else if p99 < 50.0 {
        "met".to_string()
    } else {
        "MISSED".to_string()
    };
    println!(
        "| {name} | {} | {p50:.3} | {p99:.3} | {max:.3} | {verdict} |",
        v.len()
    );
}

fn main() {
    header("cancel latency");
    let trials = if quick() { 10 } else { 100 };
    println!("| case | trials | p50 ms | p99 ms | max ms | target p99 < 50 ms |");
    println!("|---|---:|---:|---:|---:|---|");
    line(
        "baseline: TcpStream read cut by shutdown",
        trial_baseline(trials),
        false,
    );
    line(
        "pikuri: Reply::hang(), not streamed",
        trial_pikuri(false, trials),
        true,
    );
    line(
        "pikuri: text.hang_after(2), streamed",
        trial_pikuri(true, trials),
        true,
    );
}
