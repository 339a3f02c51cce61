//! Listener ordering, isolation and the end-of-turn flush.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Event, Listener, SubAgentListener};

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
    let expected = rec.kinds();
    assert_eq!(*seen.lock(), expected);
    assert_eq!(*closure_seen.lock(), expected);
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
    let handled = Arc::new(AtomicUsize::new(0));
    let h = handled.clone();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.streaming(true).add_listener(move |_e: &Event| {
            std::thread::sleep(Duration::from_millis(10));
            h.fetch_add(1, Ordering::SeqCst);
        })
    });
    agent.run_loop("go").unwrap();
    // Every event of the turn, including the initial ContextCap, was handled.
    assert_eq!(handled.load(Ordering::SeqCst), rec.len());
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
