//! Issue 39's targets for guardrails, measured: what an input guard costs
//! a non-streamed turn.
//!
//! - "A run with no guard pays nothing measurable": `benches/turn.rs`
//!   A/B against a commit before guards (BENCHMARKS.md, issue 39).
//! - "A blocking input guard that allows costs one call of the guard":
//!   `inline (instant)` (a guard that may run on the loop's thread, as
//!   `Redactor` and `Shape` do) and `blocking (instant)` (a closure, on a
//!   kept guard thread: the call plus a hand-off, the price of bounding
//!   its time) against `no guard`, with the guard's calls counted (one per
//!   turn, asserted).
//! - "A parallel one adds no wall time when it allows": the server waits
//!   [`THINK`] before each answer (a model's think time) and the guard
//!   takes [`GUARD`], shorter; `beside (slow)` should take the time of
//!   `no guard`, while `blocking (slow)` takes the two in a row.
//!
//! The replay server runs in a child process (`common::Server`), as in
//! `benches/turn.rs`. Figures per turn: wall time and the client process's
//! CPU time (`common::turns::measure`), medians of `PIKURI_BENCH_RUNS`
//! runs, and each subject's same-run ratio to `no guard`.
//!
//! Run: `cargo bench --bench guards` (`PIKURI_BENCH_QUICK=1` for a smoke
//! run).

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::turns::{ANSWER, ANSWER_TEXT, MODEL, PerTurn, QUESTION, measure};
use common::{ReplayChild, Script, Server, header, json_response, median, runs};
use pikuri::guard::{BoxError, Guards, Input, InputVerdict};
use pikuri::{Agent, ChatTransport, HttpConfig};

/// The server's wait before each answer.
const THINK: Duration = Duration::from_millis(20);
/// The slow guard's time: shorter than [`THINK`], so that beside the
/// request it is hidden.
const GUARD: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Subject {
    NoGuard,
    InlineInstant,
    BlockingInstant,
    BlockingSlow,
    BesideSlow,
}

impl Subject {
    const ALL: [Subject; 5] = [
        Subject::NoGuard,
        Subject::InlineInstant,
        Subject::BlockingInstant,
        Subject::BlockingSlow,
        Subject::BesideSlow,
    ];

    fn name(self) -> &'static str {
        match self {
            Subject::NoGuard => "no guard",
            Subject::InlineInstant => "inline (instant)",
            Subject::BlockingInstant => "blocking (instant)",
            Subject::BlockingSlow => "blocking (slow)",
            Subject::BesideSlow => "beside (slow)",
        }
    }
}

/// An instant guard that says it may run on the loop's thread
/// (`Input::inline`), as the ready-made `Redactor` and `Shape` do.
struct Inline {
    calls: Arc<AtomicUsize>,
}

impl Input for Inline {
    fn check(&self, _text: &str) -> Result<InputVerdict, BoxError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(InputVerdict::Allow)
    }

    fn inline(&self) -> bool {
        true
    }
}

/// An agent with `subject`'s guard, counting the guard's calls in `calls`.
fn agent(base: &str, subject: Subject, calls: &Arc<AtomicUsize>) -> Agent {
    let transport = ChatTransport::new(MODEL)
        .with_api_base(base)
        .with_context_window(Some(32_768));
    let cfg = Agent::builder(transport).http(HttpConfig::default().with_max_retries(0));
    let counted = |wait: Option<Duration>| {
        let calls = Arc::clone(calls);
        move |_: &str| {
            calls.fetch_add(1, Ordering::Relaxed);
            if let Some(d) = wait {
                std::thread::sleep(d);
            }
            InputVerdict::Allow
        }
    };
    let cfg = match subject {
        Subject::NoGuard => cfg,
        Subject::InlineInstant => cfg.guards(Guards::new().input(
            "allow",
            Inline {
                calls: Arc::clone(calls),
            },
        )),
        Subject::BlockingInstant => cfg.guards(Guards::new().input("allow", counted(None))),
        Subject::BlockingSlow => cfg.guards(Guards::new().input("allow", counted(Some(GUARD)))),
        Subject::BesideSlow => {
            cfg.guards(Guards::new().input_beside("allow", counted(Some(GUARD))))
        }
    };
    cfg.build().expect("agent builds")
}

/// `turns` turns of `subject`; asserts the guard ran once a turn.
fn run(subject: Subject, base: &str, turns: usize) -> PerTurn {
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = agent(base, subject, &calls);
    let agent = std::cell::RefCell::new(agent);
    let figures = measure(
        turns,
        ANSWER_TEXT.len(),
        &mut || {
            let out = agent.borrow_mut().run_loop(QUESTION).expect("turn");
            out.answer.map_or(0, |a| a.len())
        },
        &mut || agent.borrow_mut().clear_conversation(),
    );
    let expected = if subject == Subject::NoGuard {
        0
    } else {
        turns
    };
    assert_eq!(calls.load(Ordering::Relaxed), expected, "{subject:?}");
    figures
}

fn main() {
    common::serve_if_child();
    header("input guards on a non-streamed turn");
    let quick = common::quick();
    let turns = if quick { 20 } else { 200 };
    let runs = runs();

    // Without think time: the cost of the guard's machinery.
    println!("\n## server answers at once ({turns} turns x {runs} runs)");
    table(
        &Server::start(Script::Fixed(json_response(ANSWER)), false),
        turns,
        runs,
    );

    // With think time (always a child server: the wait is its own).
    let turns = turns / 10;
    println!(
        "\n## server thinks {} ms, the slow guard takes {} ms ({turns} turns x {runs} runs)",
        THINK.as_millis(),
        GUARD.as_millis()
    );
    let child = ReplayChild::spawn_thinking(&Script::Fixed(json_response(ANSWER)), false, THINK);
    table(&Server::Child(child), turns, runs);
}

/// Each subject `runs` times against `server`, interleaved; medians and
/// same-run ratios to `no guard`.
fn table(server: &Server, turns: usize, runs: usize) {
    let base = server.base_url();
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); Subject::ALL.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); Subject::ALL.len()];
    let mut wall_ratio: Vec<Vec<f64>> = vec![Vec::new(); Subject::ALL.len()];
    let mut cpu_ratio: Vec<Vec<f64>> = vec![Vec::new(); Subject::ALL.len()];
    for _ in 0..runs {
        let figures: Vec<PerTurn> = Subject::ALL.iter().map(|&s| run(s, &base, turns)).collect();
        for (i, f) in figures.iter().enumerate() {
            wall[i].push(f.us);
            cpu[i].push(f.cpu_us);
            wall_ratio[i].push(f.us / figures[0].us);
            cpu_ratio[i].push(f.cpu_us / figures[0].cpu_us);
        }
    }
    println!(
        "{:<20} {:>10} {:>10} {:>8} {:>8}",
        "subject", "wall us", "cpu us", "wall x", "cpu x"
    );
    for (i, s) in Subject::ALL.iter().enumerate() {
        println!(
            "{:<20} {:>10.1} {:>10.1} {:>8.2} {:>8.2}",
            s.name(),
            median(&mut wall[i]),
            median(&mut cpu[i]),
            median(&mut wall_ratio[i]),
            median(&mut cpu_ratio[i]),
        );
    }
}
