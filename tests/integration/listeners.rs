//! Listener ordering, isolation and the end-of-turn flush.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use pikuri::subagent::SubAgentListener;
use pikuri::testing::{FakeServer, Reply, merge_deltas};
use pikuri::{Event, Listener};

use crate::util::agent_with;

/// A custom listener that records kinds and counts flushes.
struct Kinds {
    seen: Arc<Mutex<Vec<&'static str>>>,
    flushes: Arc<AtomicUsize>,
}

impl Listener for Kinds {
    fn on_event(&mut self, event: &Event) {
        self.seen.lock().push(event.kind());
    }
    fn flush(&mut self) {
        self.flushes.fetch_add(1, Ordering::SeqCst);
    }
    fn for_sub_agent(&mut self, _id: &str) -> SubAgentListener {
        SubAgentListener::Skip
    }
}

#[test]
fn custom_and_closure_listeners_see_the_same_ordered_stream() {
    let server = FakeServer::start();
    server.push(Reply::text("one two three four five six").with_chunk_chars(3));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let flushes = Arc::new(AtomicUsize::new(0));
    let closure_seen = Arc::new(Mutex::new(Vec::new()));
    let cs = closure_seen.clone();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.streaming(true)
            .add_listener(Kinds {
                seen: seen.clone(),
                flushes: flushes.clone(),
            })
            .add_listener(move |e: &Event| cs.lock().push(e.kind()))
    });
    agent.run_loop("count").unwrap();
    // Each listener may get the stream cut into deltas differently.
    let merged = |mut kinds: Vec<&'static str>| {
        kinds.dedup_by(|a, b| a == b && a.ends_with("_delta"));
        kinds
    };
    let expected = merged(rec.kinds());
    assert_eq!(merged(seen.lock().clone()), expected);
    assert_eq!(merged(closure_seen.lock().clone()), expected);
    assert!(expected.contains(&"assistant_delta"));
    assert!(flushes.load(Ordering::SeqCst) >= 1);
    assert_eq!(expected.last(), Some(&"stopped"));
}

#[test]
fn a_panicking_listener_is_isolated() {
    let server = FakeServer::start();
    server.push(Reply::text("still delivered"));
    server.push(Reply::text("and again"));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_listener(|e: &Event| {
            assert!(e.kind() != "assistant", "listener bug");
        })
    });
    agent.run_loop("a").unwrap();
    agent.run_loop("b").unwrap();
    assert_eq!(rec.kinds().iter().filter(|k| **k == "assistant").count(), 2);
}

#[test]
fn run_loop_returns_after_slow_listeners_handled_everything() {
    let server = FakeServer::start();
    server.push(Reply::text("a b c d e f g h i j").with_chunk_chars(2));
    let slow = pikuri::listeners::InMemoryEventList::new();
    let mut seen = slow.clone();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.streaming(true).add_listener(move |e: &Event| {
            std::thread::sleep(Duration::from_millis(10));
            seen.on_event(e);
        })
    });
    agent.run_loop("go").unwrap();
    // Every event of the turn, including the initial ContextCap, was
    // handled; the slow listener may have had deltas joined.
    assert_eq!(merge_deltas(slow.events()), merge_deltas(rec.events()));
    assert_eq!(
        crate::util::streamed_text(&slow.events()),
        "a b c d e f g h i j"
    );
}

struct OnClose(Arc<AtomicUsize>);

impl Listener for OnClose {
    fn on_event(&mut self, _: &Event) {}
    fn close(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn listener_threads_are_joined_on_close() {
    let server = FakeServer::start();
    let closed = Arc::new(AtomicUsize::new(0));
    let (mut agent, _) = agent_with(&server, |c| c.add_listener(OnClose(closed.clone())));
    agent.close();
    // close() joined the thread, so its close hook already ran.
    assert_eq!(closed.load(Ordering::SeqCst), 1);
}

#[test]
fn events_serialize_with_type_and_agent() {
    let server = FakeServer::start();
    server.push(Reply::text("hi"));
    let (mut agent, rec) = agent_with(&server, |c| c);
    agent.run_loop("x").unwrap();
    for e in rec.events() {
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], e.kind());
        assert_eq!(v["agent"], "");
        let back: Event = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }
}

/// A fast burst of deltas, then silence: the listener gets the whole burst
/// while the agent still waits on the network, although it fell a whole
/// queue behind at the start of the burst (before each network read, the
/// agent hands over what it kept, waiting for room if need be).
#[test]
fn a_listener_sees_a_whole_burst_while_the_stream_stalls() {
    let server = FakeServer::start();
    let text: String = (0..400).map(|i| i.to_string() + " ").collect();
    let chunks = text.len().div_ceil(4);
    // The role chunk, then every content chunk; no finish chunk, no [DONE].
    server.push(Reply::text(&text).hang_after(1 + chunks));
    let seen = Arc::new(Mutex::new(String::new()));
    let shown = Arc::clone(&seen);
    let mut first = true;
    let cancel = pikuri::Cancellable::new();
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.streaming(true)
            .cancellable(cancel.clone())
            .add_listener(move |e: &Event| {
                if let Event::AssistantDelta { content, .. } = e {
                    // Behind from the first delta: the queue fills, and
                    // the agent waits for room.
                    if std::mem::take(&mut first) {
                        std::thread::sleep(Duration::from_millis(300));
                    }
                    shown.lock().push_str(content);
                }
            })
    });
    let run = std::thread::spawn(move || {
        let err = agent.run_loop("count").unwrap_err();
        (agent, err)
    });
    // A bound against hangs, not a timing claim: the stream stays silent
    // (up to the 20 s idle bound) until the cancel below.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while *seen.lock() != text && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let burst_shown = seen.lock().clone();
    cancel.cancel();
    let (mut agent, err) = run.join().unwrap();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(
        burst_shown.len(),
        text.len(),
        "the burst waited behind the stall"
    );
    assert_eq!(burst_shown, text, "the burst waited behind the stall");
    assert_eq!(agent.messages().len(), 1);
    server.push(Reply::text("back"));
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("back")
    );
}

/// Script one answer of `calls` calls to `tool`, each with its number as
/// `n`.
fn push_calls(server: &FakeServer, tool: &str, calls: usize) {
    server.push(Reply::tool_calls(
        (0..calls)
            .map(|n| (tool, serde_json::json!({ "n": n })))
            .collect(),
    ));
}

/// A listener far behind when a tool runs: the agent hands it every event
/// up to the tool's call before the tool runs, so a tool that waits (like
/// an approval prompt) never waits on a call its listener has not shown.
#[test]
fn a_listener_shows_a_call_before_its_tool_runs_even_when_far_behind() {
    let server = FakeServer::start();
    // Two events per call (the call, its result) overflow a slow
    // listener's queue long before the last call.
    let calls = 60;
    push_calls(&server, "mark", calls);
    server.push(Reply::text("done"));
    let shown = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&shown);
    let last = calls - 1;
    let mark = pikuri::tool::FnTool::new(
        "mark",
        "Marks.",
        pikuri::tool::Parameters::builder()
            .required_integer("n", "which")
            .build(),
        move |args, _| {
            if args["n"].as_u64() != Some(last as u64) {
                return Ok("marked".into());
            }
            // A bound against hangs: the call must be shown by now.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while seen.load(Ordering::SeqCst) < calls && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(format!("shown {}", seen.load(Ordering::SeqCst)))
        },
    );
    let count = Arc::clone(&shown);
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(mark).add_listener(move |e: &Event| {
            std::thread::sleep(Duration::from_millis(1));
            if let Event::ToolCall { .. } = e {
                count.fetch_add(1, Ordering::SeqCst);
            }
        })
    });
    agent.run_loop("mark them").unwrap();
    let tool_messages: Vec<_> = agent
        .messages()
        .iter()
        .filter(|m| m.role == pikuri::Role::Tool)
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(tool_messages.len(), calls);
    assert_eq!(tool_messages[last], format!("shown {calls}"));
}

/// A listener far behind when the agent sends a request: it gets every
/// event of the turn so far while the model takes its time.
#[test]
fn a_listener_catches_up_while_the_model_answers() {
    let server = FakeServer::start();
    let calls = 60;
    push_calls(&server, "noop", calls);
    server.push(Reply::hang());
    let results = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&results);
    let noop = pikuri::tool::FnTool::new(
        "noop",
        "Nothing.",
        pikuri::tool::Parameters::empty(),
        |_, _| Ok("ok".into()),
    );
    let cancel = pikuri::Cancellable::new();
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(noop)
            .cancellable(cancel.clone())
            .add_listener(move |e: &Event| {
                std::thread::sleep(Duration::from_millis(1));
                if let Event::ToolResult { .. } = e {
                    count.fetch_add(1, Ordering::SeqCst);
                }
            })
    });
    let run = std::thread::spawn(move || agent.run_loop("go").unwrap_err());
    // A bound against hangs: the second request never gets an answer.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while results.load(Ordering::SeqCst) < calls && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let shown = results.load(Ordering::SeqCst);
    cancel.cancel();
    assert!(run.join().unwrap().is_cancelled());
    assert_eq!(shown, calls, "results waited behind the request");
}

/// A slow tool, then a stream that stalls between its chunks, seen by a
/// slow listener: when `run_loop` returns, that listener has handled every
/// event of the turn and the whole text (the flush waits for it, and
/// nothing is left with the agent).
#[test]
fn run_loop_returns_after_a_slow_listener_saw_a_slow_tool_and_a_stalled_stream() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("nap", serde_json::json!({})));
    server.push(
        Reply::text("one two three four")
            .with_chunk_chars(3)
            .with_chunk_delay(Duration::from_millis(20)),
    );
    let nap =
        pikuri::tool::FnTool::new("nap", "Naps.", pikuri::tool::Parameters::empty(), |_, _| {
            std::thread::sleep(Duration::from_millis(100));
            Ok("rested".into())
        });
    let slow = pikuri::listeners::InMemoryEventList::new();
    let mut seen = slow.clone();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.streaming(true)
            .add_tool(nap)
            .add_listener(move |e: &Event| {
                std::thread::sleep(Duration::from_millis(2));
                seen.on_event(e);
            })
    });
    agent.run_loop("go").unwrap();
    let events = slow.events();
    assert_eq!(events.last().map(Event::kind), Some("stopped"));
    assert!(events.iter().any(|e| e.kind() == "tool_result"));
    assert_eq!(crate::util::streamed_text(&events), "one two three four");
    assert_eq!(merge_deltas(events), merge_deltas(rec.events()));
}

/// A stream that arrives faster than the agent reads it fills the client's
/// read buffer on every read; such a read is followed by no wait, so the
/// text is handed to the listeners at the next short read or the answer's
/// end, in a few long deltas, not one batch (and one wake-up) per 8 KiB.
/// (One hand-over per read would give at least one delta event per read:
/// the 430 KB body below takes over 50 reads.)
#[test]
fn a_stream_that_is_already_there_reaches_a_listener_in_few_deltas() {
    let server = FakeServer::start();
    let piece = r#"data: {"choices":[{"index":0,"delta":{"content":"abcd"}}]}"#;
    let mut body = String::new();
    for _ in 0..7_000 {
        body.push_str(piece);
        body.push_str("\n\n");
    }
    body.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
    );
    assert!(body.len() > 400_000);
    // One write of the whole body: it is all there before the agent reads.
    server.push(Reply::raw_sse(body));
    let deltas = Arc::new(Mutex::new(Vec::<usize>::new()));
    let seen = Arc::clone(&deltas);
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.streaming(true).add_listener(move |e: &Event| {
            if let Event::AssistantDelta { content, .. } = e {
                seen.lock().push(content.len());
            }
        })
    });
    let outcome = agent.run_loop("go").unwrap();
    assert_eq!(outcome.answer.as_deref().map(str::len), Some(28_000));
    let deltas = deltas.lock();
    assert_eq!(deltas.iter().sum::<usize>(), 28_000, "every byte, once");
    assert!(
        deltas.len() < 25,
        "{} delta events for a stream that was all there: handed over per read",
        deltas.len()
    );
}

/// A listener that signals `tx` when it sees the turn-start `UserTurn`.
fn signals_user_turn(tx: crossbeam_channel::Sender<()>) -> impl Listener {
    move |e: &Event| {
        if let Event::UserTurn {
            mid_loop: false, ..
        } = e
        {
            let _ = tx.send(());
        }
    }
}

/// The run's opening (the `UserTurn`) waits for the first response, not
/// the request: while a non-streamed request is in flight a barrier
/// listener has seen nothing of the turn, and it gets the opening first,
/// with the answer, before `run_loop` returns.
#[test]
fn the_opening_waits_for_the_response_not_the_request() {
    let server = FakeServer::start();
    let turns = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&turns);
    let in_flight = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&in_flight);
    server.respond_with(move |_| {
        let mut record = record.lock();
        let before = record.len();
        // Before the change the batch was in the listener's channel before
        // the request was written; the bound only keeps this test short.
        let deadline = std::time::Instant::now() + Duration::from_millis(200);
        while counted.load(Ordering::SeqCst) == before && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        record.push(counted.load(Ordering::SeqCst) > before);
        Reply::text("hello")
    });
    let count = Arc::clone(&turns);
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_listener(move |e: &Event| {
            if let Event::UserTurn { .. } = e {
                count.fetch_add(1, Ordering::SeqCst);
            }
        })
    });
    for turn in 0..2 {
        assert_eq!(
            agent.run_loop("hi").unwrap().answer.as_deref(),
            Some("hello")
        );
        let kinds = rec.kinds();
        assert_eq!(
            kinds[kinds.len() - 4..],
            ["user_turn", "assistant", "tokens", "stopped"],
            "turn {turn}"
        );
        assert_eq!(turns.load(Ordering::SeqCst), turn + 1);
    }
    assert_eq!(
        *in_flight.lock(),
        [false, false],
        "the opening went out before the request"
    );
}

/// A stream hands the opening over at its first read: a listener sees the
/// `UserTurn` while the stream stalls before any text (late by one round
/// trip at most, never by the whole answer).
#[test]
fn a_stalled_stream_does_not_keep_the_opening() {
    let server = FakeServer::start();
    // The role chunk only, then silence.
    server.push(Reply::text("never shown").hang_after(1));
    let (tx, seen) = crossbeam_channel::bounded(8);
    let cancel = pikuri::Cancellable::new();
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.streaming(true)
            .cancellable(cancel.clone())
            .add_listener(signals_user_turn(tx))
    });
    let run = std::thread::spawn(move || agent.run_loop("hi").unwrap_err());
    // A bound against hangs, not a timing claim: the stream stays silent
    // until the cancel below.
    let shown = seen.recv_timeout(Duration::from_secs(10)).is_ok();
    cancel.cancel();
    assert!(run.join().unwrap().is_cancelled());
    assert!(shown, "the opening waited behind the stalled stream");
}

/// A retry's back-off hands the opening over: a listener has the
/// `UserTurn` and the `Retrying` notice before the retried request is
/// answered.
#[test]
fn a_retry_hands_the_opening_over() {
    let server = FakeServer::start();
    server.push(Reply::status(503, "busy"));
    let (tx, seen) = crossbeam_channel::bounded(8);
    let retried = Arc::new(Mutex::new(None));
    let record = Arc::clone(&retried);
    let (mut agent, rec) = agent_with(&server, |c| c.add_listener(signals_user_turn(tx)));
    server.respond_with(move |_| {
        // A bound against hangs, not a timing claim.
        *record.lock() = Some(seen.recv_timeout(Duration::from_secs(10)).is_ok());
        Reply::text("hello")
    });
    assert_eq!(
        agent.run_loop("hi").unwrap().answer.as_deref(),
        Some("hello")
    );
    assert_eq!(
        *retried.lock(),
        Some(true),
        "the opening waited past a back-off"
    );
    let kinds = rec.kinds();
    let at = kinds.iter().position(|k| *k == "user_turn").unwrap();
    assert_eq!(kinds[at..at + 2], ["user_turn", "retrying"]);
}
