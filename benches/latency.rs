//! Benchmark 3: event delivery latency, and fan-out throughput.
//!
//! Latency: time from emit (an `Instant` taken just before the
//! crate-private `ListenerList::emit`, reached through
//! `pikuri::__bench::emit`) to the start of `Listener::on_event` on the
//! listener's thread, for every event of a paced stream of
//! `AssistantDelta`s, with one and with four listeners. The emit time
//! travels in a side table indexed by the delta's content (`"i,"`; a
//! listener that is behind gets several joined, each timed from its own
//! emit); each trial is a
//! quarter second of stream. Pacing (a busy-wait on the emitting thread):
//! 600k events/s, the decode rate of a fast client, as "full stream rate",
//! and 100k events/s. The baseline is the floor of a cross-thread
//! hand-off: a bare crossbeam channel per consumer thread fed the same
//! paced strings. Target: p99 < 100 us.
//!
//! Fan-out: 1M deltas emitted unpaced to 1 and 4 no-op listeners, then
//! flushed; events/s and process CPU per event, against the same design
//! built from parts (an `Arc<Event>` per delta, a crossbeam channel and a
//! thread per consumer).

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use pikuri::Event;
use pikuri::listeners::ListenerList;

use common::{header, median, process_cpu, quantile, quick, runs};

struct Table {
    base: Instant,
    emitted: Vec<AtomicU64>,
}

impl Table {
    fn new(n: usize) -> Arc<Table> {
        Arc::new(Table {
            base: Instant::now(),
            emitted: (0..n).map(|_| AtomicU64::new(0)).collect(),
        })
    }
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

fn latencies(n: usize) -> Arc<Vec<AtomicU64>> {
    Arc::new((0..n).map(|_| AtomicU64::new(0)).collect())
}

/// Spin until the `i`-th slot of a `rate`-per-second schedule.
fn pace(table: &Table, i: usize, rate: u64) {
    if rate == 0 {
        return;
    }
    let due = i as u64 * 1_000_000_000 / rate;
    while table.now() < due {
        std::hint::spin_loop();
    }
}

/// p50 and p99 (us) over all receivers of one trial.
fn summarize(lats: &[Arc<Vec<AtomicU64>>]) -> (f64, f64) {
    let mut all: Vec<u64> = lats
        .iter()
        .flat_map(|l| l.iter().map(|a| a.load(Ordering::Relaxed)))
        .collect();
    all.sort_unstable();
    (
        quantile(&all, 0.50) as f64 / 1e3,
        quantile(&all, 0.99) as f64 / 1e3,
    )
}

fn trial_pikuri(listeners: usize, n: usize, rate: u64) -> (f64, f64) {
    let table = Table::new(n);
    let mut list = ListenerList::new();
    let mut lats = Vec::new();
    for _ in 0..listeners {
        let lat = latencies(n);
        lats.push(Arc::clone(&lat));
        let table = Arc::clone(&table);
        list.add(move |e: &Event| {
            let now = table.now();
            // A listener that is behind gets deltas joined: each piece
            // ("i,") is timed from its own emit.
            if let Event::AssistantDelta { content, .. } = e {
                for piece in content.split_terminator(',') {
                    let i: usize = piece.parse().expect("index");
                    let sent = table.emitted[i].load(Ordering::Relaxed);
                    lat[i].store(now.saturating_sub(sent), Ordering::Relaxed);
                }
            }
        });
    }
    let agent: Arc<str> = Arc::from("");
    for i in 0..n {
        pace(&table, i, rate);
        let content = format!("{i},");
        table.emitted[i].store(table.now(), Ordering::Relaxed);
        pikuri::__bench::emit(
            &list,
            Event::AssistantDelta {
                agent: Arc::clone(&agent),
                content,
            },
        );
    }
    pikuri::__bench::flush(&list);
    drop(list);
    summarize(&lats)
}

fn trial_baseline(consumers: usize, n: usize, rate: u64) -> (f64, f64) {
    let table = Table::new(n);
    let mut txs = Vec::new();
    let mut threads = Vec::new();
    let mut lats = Vec::new();
    for _ in 0..consumers {
        let (tx, rx) = crossbeam_channel::unbounded::<Arc<String>>();
        let lat = latencies(n);
        lats.push(Arc::clone(&lat));
        let table = Arc::clone(&table);
        threads.push(std::thread::spawn(move || {
            for content in rx {
                let now = table.now();
                let i: usize = content.parse().expect("index");
                let sent = table.emitted[i].load(Ordering::Relaxed);
                lat[i].store(now.saturating_sub(sent), Ordering::Relaxed);
            }
        }));
        txs.push(tx);
    }
    for i in 0..n {
        pace(&table, i, rate);
        let content = Arc::new(i.to_string());
        table.emitted[i].store(table.now(), Ordering::Relaxed);
        for tx in &txs {
            tx.send(Arc::clone(&content)).expect("consumer alive");
        }
    }
    drop(txs);
    for t in threads {
        t.join().expect("consumer");
    }
    summarize(&lats)
}

/// Unpaced fan-out: emit `n` deltas as fast as possible, then flush.
/// Returns (events/s, process CPU ns per event).
fn throughput(listeners: usize, n: usize, lib: bool) -> (f64, f64) {
    let agent: Arc<str> = Arc::from("");
    let cpu = process_cpu();
    let t = Instant::now();
    if lib {
        let mut list = ListenerList::new();
        for _ in 0..listeners {
            list.add(|e: &Event| {
                std::hint::black_box(e);
            });
        }
        for i in 0..n {
            pikuri::__bench::emit(
                &list,
                Event::AssistantDelta {
                    agent: Arc::clone(&agent),
                    content: (i % 1000).to_string(),
                },
            );
        }
        pikuri::__bench::flush(&list);
        drop(list);
    } else {
        let mut txs = Vec::new();
        let mut threads = Vec::new();
        for _ in 0..listeners {
            let (tx, rx) = crossbeam_channel::unbounded::<Arc<Event>>();
            threads.push(std::thread::spawn(move || {
                for e in rx {
                    std::hint::black_box(&e);
                }
            }));
            txs.push(tx);
        }
        for i in 0..n {
            let e = Arc::new(Event::AssistantDelta {
                agent: Arc::clone(&agent),
                content: (i % 1000).to_string(),
            });
            for tx in &txs {
                tx.send(Arc::clone(&e)).expect("consumer alive");
            }
        }
        drop(txs);
        for t in threads {
            t.join().expect("consumer");
        }
    }
    let wall = t.elapsed().as_secs_f64();
    let cpu = process_cpu().saturating_sub(cpu).as_secs_f64();
    (n as f64 / wall, cpu * 1e9 / n as f64)
}

fn main() {
    header("event delivery latency");
    let n = if quick() { 5_000 } else { 200_000 };
    if common::selected("fanout") {
        println!(
            "| listeners | baseline events/s | baseline CPU ns/event | pikuri events/s | pikuri CPU ns/event | ratio (events/s) |"
        );
        println!("|---:|---:|---:|---:|---:|---:|");
        let m = n * 5;
        for listeners in [1usize, 4] {
            let (mut br, mut bc, mut pr, mut pc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for r in 0..runs() {
                for lib in [r % 2 == 0, r % 2 == 1] {
                    if !lib && std::env::var_os("PIKURI_BENCH_SKIP_BASELINE").is_some() {
                        br.push(f64::NAN);
                        bc.push(f64::NAN);
                        continue;
                    }
                    let (rate, cpu) = throughput(listeners, m, lib);
                    if lib {
                        pr.push(rate);
                        pc.push(cpu);
                    } else {
                        br.push(rate);
                        bc.push(cpu);
                    }
                }
            }
            let (b, p) = (median(&mut br), median(&mut pr));
            println!(
                "| {listeners} | {b:.0} | {:.0} | {p:.0} | {:.0} | {:.2}x |",
                median(&mut bc),
                median(&mut pc),
                p / b
            );
        }
    }
    if !common::selected("latency") {
        return;
    }
    println!(
        "| listeners | rate (events/s) | baseline p50 / p99 (us) | pikuri p50 / p99 (us) | worst pikuri p99 | target p99 < 100 us |"
    );
    println!("|---:|---:|---:|---:|---:|---|");
    for listeners in [1usize, 4] {
        for rate in [600_000u64, 100_000] {
            // A quarter second of stream per trial.
            let per_trial = if quick() { 5_000 } else { (rate / 4) as usize };
            let (mut b50, mut b99, mut p50, mut p99) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for r in 0..runs() {
                let mut one = |lib: bool| {
                    if lib {
                        let (a, b) = trial_pikuri(listeners, per_trial, rate);
                        p50.push(a);
                        p99.push(b);
                    } else {
                        let (a, b) = trial_baseline(listeners, per_trial, rate);
                        b50.push(a);
                        b99.push(b);
                    }
                };
                one(r % 2 == 0);
                one(r % 2 == 1);
            }
            let worst = p99.iter().copied().fold(0.0, f64::max);
            let p99m = median(&mut p99);
            println!(
                "| {listeners} | {rate} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} | {} |",
                median(&mut b50),
                median(&mut b99),
                median(&mut p50),
                p99m,
                worst,
                if p99m < 100.0 { "met" } else { "MISSED" }
            );
        }
    }
}
