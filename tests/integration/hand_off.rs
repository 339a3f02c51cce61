//! Issue 42: listeners that opt out of the end-of-turn barrier
//! (`Delivery::HandOff`): `run_loop` returns without waiting for them,
//! they still see every event in order, a panic is contained, a stalled
//! one holds the agent only once its bounded channel is full, and
//! `Agent::flush_listeners` waits until they caught up.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};
use pikuri::listeners::{Delivery, InMemoryEventList};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Event, Listener};

/// A listener that hands off: records what it sees, after `gate` lets it
/// (when one is given: it waits for a message or the gate's sender gone,
/// before its first event), and panics on events whose kind is `panic_on`.
struct HandOff {
    rec: InMemoryEventList,
    gate: Option<Receiver<()>>,
    panic_on: Option<&'static str>,
}

impl HandOff {
    fn new(rec: &InMemoryEventList) -> HandOff {
        HandOff {
            rec: rec.clone(),
            gate: None,
            panic_on: None,
        }
    }

    /// A hand-off recorder held before its first event until the returned
    /// sender sends or is dropped.
    fn stalled(rec: &InMemoryEventList) -> (HandOff, Sender<()>) {
        let (release, gate) = bounded(0);
        let mut l = HandOff::new(rec);
        l.gate = Some(gate);
        (l, release)
    }
}

impl Listener for HandOff {
    fn on_event(&mut self, event: &Event) {
        if let Some(gate) = self.gate.take() {
            let _ = gate.recv();
        }
        assert!(
            self.panic_on != Some(event.kind()),
            "hand-off listener panics on {}",
            event.kind()
        );
        self.rec.on_event(event);
    }

    fn delivery(&self) -> Delivery {
        Delivery::HandOff
    }
}

/// Wait until `done` holds, for up to 10 s: a bound against hangs, not a
/// timing claim. The caller asserts on the state afterwards.
fn eventually(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The kinds and texts of what `rec` saw, to compare two recorders.
fn seen(rec: &InMemoryEventList) -> Vec<String> {
    rec.events()
        .into_iter()
        .map(|e| serde_json::to_string(&e).unwrap())
        .collect()
}

#[test]
fn a_hand_off_listener_sees_every_event_in_order() {
    let server = FakeServer::start();
    let (barrier, handed) = (InMemoryEventList::new(), InMemoryEventList::new());
    let mut agent = Agent::builder(server.transport())
        .add_listener(HandOff::new(&handed))
        .add_listener(barrier.clone())
        .build()
        .unwrap();
    for i in 0..5 {
        server.push(Reply::text(format!("answer {i}, in several pieces")).with_chunk_chars(4));
        agent.run_loop(&format!("question {i}")).unwrap();
    }
    agent.flush_listeners();
    let kinds = handed.kinds();
    assert_eq!(kinds.iter().filter(|k| **k == "stopped").count(), 5);
    assert_eq!(kinds.last(), Some(&"stopped"));
    assert_eq!(seen(&handed), seen(&barrier));
}

/// The hand-off listener is held inside its first event; `run_loop`
/// returns all the same, and the listener gets the whole turn once let go.
/// Meanwhile a barrier listener has the whole turn when `run_loop`
/// returns, and `flush_listeners` waits for the held one.
#[test]
fn run_loop_returns_before_a_held_hand_off_listener_and_flush_listeners_waits_for_it() {
    let server = FakeServer::start();
    server.push(Reply::text("Hello there"));
    let (handed, barrier) = (InMemoryEventList::new(), InMemoryEventList::new());
    let (listener, release) = HandOff::stalled(&handed);
    // A barrier listener slower than the agent, to give a missing barrier
    // a chance to show.
    let mut slow = barrier.clone();
    let agent = Agent::builder(server.transport())
        .add_listener(listener)
        .add_listener(move |e: &Event| {
            std::thread::sleep(Duration::from_millis(2));
            slow.on_event(e);
        })
        .build()
        .unwrap();
    let agent = Arc::new(parking_lot::Mutex::new(agent));
    let (done_tx, done) = bounded(1);
    {
        let agent = Arc::clone(&agent);
        std::thread::spawn(move || {
            let out = agent.lock().run_loop("Hi").map(|o| o.answer);
            done_tx.send(out).unwrap();
        });
    }
    let answer = done
        .recv_timeout(Duration::from_secs(10))
        .expect("run_loop waited for a hand-off listener");
    assert_eq!(answer.unwrap().as_deref(), Some("Hello there"));
    // The barrier listener had the whole turn before `run_loop` returned.
    assert_eq!(barrier.kinds().last(), Some(&"stopped"));
    assert!(handed.is_empty(), "held in its first event");
    // `flush_listeners` waits for the held listener.
    let (flushed_tx, flushed) = bounded(1);
    {
        let agent = Arc::clone(&agent);
        std::thread::spawn(move || {
            agent.lock().flush_listeners();
            flushed_tx.send(()).unwrap();
        });
    }
    assert!(flushed.recv_timeout(Duration::from_millis(50)).is_err());
    drop(release);
    flushed
        .recv_timeout(Duration::from_secs(10))
        .expect("flush_listeners returns once the listener caught up");
    assert_eq!(seen(&handed), seen(&barrier));
}

#[test]
fn a_panicking_hand_off_listener_is_contained() {
    let server = FakeServer::start();
    let (handed, barrier) = (InMemoryEventList::new(), InMemoryEventList::new());
    let mut panicky = HandOff::new(&handed);
    panicky.panic_on = Some("assistant");
    let mut agent = Agent::builder(server.transport())
        .add_listener(panicky)
        .add_listener(barrier.clone())
        .build()
        .unwrap();
    for i in 0..3 {
        server.push(Reply::text(format!("answer {i}")));
        let out = agent.run_loop("go").unwrap();
        assert_eq!(out.answer.as_deref(), Some(format!("answer {i}").as_str()));
    }
    agent.flush_listeners();
    // It lost the events it panicked on, and nothing else.
    let want: Vec<_> = barrier
        .kinds()
        .into_iter()
        .filter(|k| *k != "assistant")
        .collect();
    assert_eq!(handed.kinds(), want);
    assert_eq!(want.iter().filter(|k| **k == "stopped").count(), 3);
}

/// Bounded memory: a hand-off listener that never returns fills its
/// channel, then the agent waits for room at its next hand-over (no event
/// is dropped); let go, it gets every event in order.
#[test]
fn a_stalled_hand_off_listener_holds_the_agent_once_its_channel_is_full() {
    const TURNS: usize = 40;
    let server = FakeServer::start();
    for i in 0..TURNS {
        server.push(Reply::text(format!("answer {i}")));
    }
    let (handed, barrier) = (InMemoryEventList::new(), InMemoryEventList::new());
    let (listener, release) = HandOff::stalled(&handed);
    let mut agent = Agent::builder(server.transport())
        .add_listener(listener)
        .add_listener(barrier.clone())
        .build()
        .unwrap();
    let turns = Arc::new(AtomicUsize::new(0));
    let runner = {
        let turns = Arc::clone(&turns);
        std::thread::spawn(move || {
            for _ in 0..TURNS {
                agent.run_loop("go").unwrap();
                turns.fetch_add(1, Ordering::SeqCst);
            }
            agent
        })
    };
    // Turns go on while the channel has room (it holds 8 batches, the
    // stalled listener one more, a quick turn is one), then the agent waits.
    eventually(|| turns.load(Ordering::SeqCst) >= 2);
    std::thread::sleep(Duration::from_millis(100));
    let held = turns.load(Ordering::SeqCst);
    assert!(
        (2..=9).contains(&held),
        "{held} turns with a stalled listener"
    );
    assert!(server.chat_requests().len() <= held + 1);
    drop(release);
    let agent = runner.join().unwrap();
    agent.flush_listeners();
    assert_eq!(
        handed.kinds().iter().filter(|k| **k == "stopped").count(),
        TURNS
    );
    assert_eq!(seen(&handed), seen(&barrier));
}

/// Many turns, streamed and not, through five listeners of both kinds, on
/// two agents at once: after each turn every barrier listener has it; at
/// the end every hand-off listener has seen what the barrier ones saw.
#[test]
fn stress_many_turns_with_listeners_of_both_kinds() {
    const TURNS: usize = 150;
    let workers: Vec<_> = (0..2)
        .map(|w| {
            std::thread::spawn(move || {
                let server = FakeServer::start();
                let barriers: Vec<_> = (0..2).map(|_| InMemoryEventList::new()).collect();
                let handed: Vec<_> = (0..3).map(|_| InMemoryEventList::new()).collect();
                let mut cfg = Agent::builder(server.transport()).streaming(w == 0);
                for (i, rec) in handed.iter().enumerate() {
                    cfg = cfg.add_listener(HandOff::new(rec));
                    if let Some(b) = barriers.get(i) {
                        cfg = cfg.add_listener(b.clone());
                    }
                }
                let mut agent = cfg.build().unwrap();
                for i in 0..TURNS {
                    server.push(Reply::text(format!("turn {i} of worker {w}")).with_chunk_chars(3));
                    agent.run_loop(&format!("q{i}")).unwrap();
                    for b in &barriers {
                        let kinds = b.kinds();
                        assert_eq!(kinds.last(), Some(&"stopped"), "turn {i}");
                        assert_eq!(kinds.iter().filter(|k| **k == "stopped").count(), i + 1);
                    }
                    if i % 50 == 49 {
                        agent.clear_conversation();
                    }
                }
                agent.close();
                let want = seen(&barriers[0]);
                assert_eq!(seen(&barriers[1]), want);
                for rec in &handed {
                    assert_eq!(seen(rec), want);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}
