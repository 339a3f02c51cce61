//! Hosts reading the agent: events pulled on the host's own thread through
//! a `ChannelListener`, and what a turn cost (`Outcome::usage`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pikuri::listeners::{ChannelListener, InMemoryEventList, RecvTimeoutError};
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply, merge_deltas};
use pikuri::{Event, OnExhausted, StepLimit, StopReason, Usage, builtin};
use serde_json::json;

use crate::util::{agent_with, streamed_text};

#[test]
fn a_slow_host_on_a_small_bounded_channel_loses_and_reorders_nothing() {
    const TURNS: usize = 4;
    const CHARS: usize = 1500;
    let server = FakeServer::start();
    let texts: Vec<String> = (0..TURNS)
        .map(|t| {
            (0..CHARS)
                .map(|i| char::from(b'a' + ((i + t) % 26) as u8))
                .collect()
        })
        .collect();
    for text in &texts {
        server.push(Reply::text(text.clone()).with_chunk_chars(1));
    }
    let (listener, subscription) = ChannelListener::bounded(3);
    let subscription = Arc::new(subscription);
    let (mut agent, rec) = agent_with(&server, |c| c.streaming(true).add_listener(listener));

    // The host takes events one at a time under `gate`, slowly; the agent
    // thread takes `gate` after each run_loop to count what was sent so far
    // (taken + waiting), with the host paused.
    let gate = Arc::new(Mutex::new(()));
    let taken = Arc::new(AtomicUsize::new(0));
    let host = {
        let (sub, gate, taken) = (
            Arc::clone(&subscription),
            Arc::clone(&gate),
            Arc::clone(&taken),
        );
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut got = Vec::new();
            loop {
                assert!(Instant::now() < deadline, "host gave up");
                let guard = gate.lock();
                match sub.recv_timeout(Duration::from_millis(1)) {
                    Ok(e) => {
                        got.push(e);
                        taken.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Closed) => break,
                }
                drop(guard);
                if got.len() % 64 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            got
        })
    };

    let mut sent_at_return = Vec::new();
    for (t, text) in texts.iter().enumerate() {
        let outcome = agent.run_loop(&format!("turn {t}")).unwrap();
        assert_eq!(outcome.answer.as_deref(), Some(text.as_str()));
        let _paused = gate.lock();
        sent_at_return.push(taken.load(Ordering::SeqCst) + subscription.len());
    }
    drop(agent); // closes the channel: the host's loop ends
    let got = host.join().unwrap();

    // Same events, same order, same text as the in-memory recorder saw them
    // (either may have had neighbouring deltas joined while it was behind).
    let expected = rec.events();
    assert!(
        merge_deltas(got.clone()) == merge_deltas(expected),
        "the channel reordered or changed events"
    );
    // Every turn's deltas arrived, each its text.
    for (t, text) in texts.iter().enumerate() {
        let user = got
            .iter()
            .position(
                |e| matches!(e, Event::UserTurn { content, .. } if *content == format!("turn {t}")),
            )
            .unwrap();
        let stopped = user
            + got[user..]
                .iter()
                .position(|e| e.kind() == "stopped")
                .unwrap();
        assert_eq!(&streamed_text(&got[user..stopped]), text, "turn {t}");
        // When run_loop returned, the turn's stopped event was already sent,
        // and nothing after it.
        assert_eq!(sent_at_return[t], stopped + 1, "turn {t}");
    }
    assert_eq!(streamed_text(&got).len(), TURNS * CHARS);
}

#[test]
fn a_dropped_subscription_stops_delivery_without_blocking_the_agent() {
    let server = FakeServer::start();
    server.push(Reply::text("x".repeat(200)).with_chunk_chars(1));
    server.push(Reply::text("again"));
    let (listener, subscription) = ChannelListener::bounded(1);
    let (mut agent, rec) = agent_with(&server, |c| c.streaming(true).add_listener(listener));
    drop(subscription);
    agent.run_loop("one").unwrap();
    agent.run_loop("two").unwrap();
    // Every delta reached the other listener (possibly joined).
    assert_eq!(
        streamed_text(&rec.events()),
        format!("{}again", "x".repeat(200))
    );
}

#[test]
fn turn_usage_sums_every_request_including_sub_agents_and_totals_run_on() {
    let server = FakeServer::start();
    server.push(
        Reply::tool_call("agent", json!({"name": "helper", "task": "compute"}))
            .with_usage(100, 10)
            .with_cached_tokens(40),
    );
    server.push(Reply::tool_call("calculator", json!({"expression": "2+2"})).with_usage(20, 2)); // child
    server.push(Reply::text("4").with_usage(30, 3)); // child
    server.push(Reply::text("It is 4.").with_usage(150, 5));
    let personas =
        vec![Persona::new("helper", "Computes.", "You compute.", 3).with_tools(&["calculator"])];
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_sub_agent_tool(builtin::calculator())
            .add_extension(SubAgents::new(personas).unwrap())
    });
    let outcome = agent.run_loop("what is 2+2?").unwrap();

    // The sum of what every Tokens event reported, children included.
    let mut from_tokens = Usage::new();
    for e in rec.events() {
        if let Event::Tokens {
            input,
            output,
            cached,
            cache_creation,
            thinking,
            ..
        } = e
        {
            let mut u = Usage::new();
            u.input = input;
            u.output = output;
            u.cached = cached;
            u.cache_creation = cache_creation;
            u.thinking = thinking;
            from_tokens += u;
        }
    }
    let expected = Usage::new()
        .with_input(60 + 20 + 30 + 150)
        .with_cached(40)
        .with_output(20);
    assert_eq!(from_tokens, expected);
    assert_eq!(outcome.usage, expected);
    assert_eq!(outcome.usage.total(), 320);
    assert_eq!(outcome.requests, 4);
    let stopped: Vec<(String, Usage)> = rec
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Stopped { agent, usage, .. } => Some((agent.to_string(), usage)),
            _ => None,
        })
        .collect();
    assert_eq!(
        stopped,
        [
            (
                "helper 0".to_string(),
                Usage::new().with_input(50).with_output(5)
            ),
            (String::new(), expected),
        ]
    );

    // A second turn: its own usage; the running total adds up.
    server.push(Reply::text("Still 4.").with_usage(200, 4));
    let second = agent.run_loop("sure?").unwrap();
    assert_eq!(second.usage, Usage::new().with_input(200).with_output(4));
    assert_eq!(second.requests, 1);
    assert_eq!(agent.total_usage(), expected + second.usage);
    agent.clear_conversation();
    assert_eq!(agent.total_usage(), Usage::new());
}

#[test]
fn turn_usage_includes_the_synthesizer() {
    let server = FakeServer::start();
    server.push(
        Reply::tool_calls(vec![
            ("calculator", json!({"expression": "1+1"})),
            ("calculator", json!({"expression": "2+2"})),
        ])
        .with_usage(10, 1),
    );
    server.push(Reply::text("2 and 4").with_usage(7, 3)); // the synthesizer
    let events = InMemoryEventList::new();
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator())
            .add_listener(events.clone())
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
    });
    let outcome = agent.run_loop("both").unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Synthesized);
    assert_eq!(outcome.requests, 2);
    assert_eq!(outcome.usage, Usage::new().with_input(17).with_output(4));
}
