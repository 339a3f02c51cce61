//! `ListenerList` when the `hub` feature is off (declared as
//! `listener::hub` in `listener/mod.rs`, in place of `hub.rs`): each
//! listener is called on the thread that emits, as each event is emitted.
//!
//! The agent calls the same crate-private methods in every build (`emit`,
//! `emit_delta`, `hold`, `hand_over`, `flush`, `close`); here they call the
//! listeners at once, so no thread, channel or batch is built, and a program
//! that registers no listener (the small CLI of issue 36) links none of the
//! hub's machinery. What stays from the hub's guarantees: every listener
//! sees every event in emission order, a panic is contained and logged at
//! `error`, `flush` runs at the end of each turn before `run_loop` returns
//! (whatever the listener's `Delivery`), and `close` runs when the agent
//! closes. What goes: a slow listener slows the agent (it runs on the
//! agent's thread), and deltas reach it as the agent emits them, not
//! joined into batches.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use super::SubAgentListener;
use crate::{Event, Listener};

/// One listener, shared (`Arc`) between the list that owns it and the lists
/// derived for sub-agents whose listener chose `Share`. `None` once the
/// owner closed it: later events are dropped.
struct Slot {
    name: String,
    listener: Mutex<Option<Box<dyn Listener>>>,
}

impl Slot {
    /// Run `f` on the listener, if it is not closed, containing a panic:
    /// it is logged at `error` and costs the listener that one call.
    fn call<T>(&self, what: &str, f: impl FnOnce(&mut dyn Listener) -> T) -> Option<T> {
        let mut guard = self.listener.lock();
        let listener = guard.as_mut()?;
        super::guarded(&self.name, what, || f(&mut **listener))
    }
}

/// The listeners of one agent, each called on the thread that emits (the
/// `hub` feature, on by default, gives each its own thread instead).
///
/// Built by the [`Configurator`](crate::Configurator) from
/// [`add_listener`](crate::Configurator::add_listener); there is no public way
/// to emit into a list. See the [`Listener`](crate::Listener) docs for
/// ordering, panics and sub-agents.
///
/// # Examples
///
/// ```
/// use pikuri::listeners::ListenerList;
/// let mut list = ListenerList::new();
/// list.add(|_e: &pikuri::Event| {});
/// assert_eq!(list.to_string(), "[Fn]");
/// let child = list.for_sub_agent("researcher 0");
/// assert_eq!(child.len(), 1);
/// ```
#[derive(Default)]
pub struct ListenerList {
    slots: Vec<Arc<Slot>>,
    /// Parallel to `slots`: whether this list added (and so closes) the listener.
    owned: Vec<bool>,
}

impl ListenerList {
    /// An empty list.
    pub fn new() -> ListenerList {
        ListenerList::default()
    }

    /// Add a listener. A `Box<dyn Listener>` is a listener too.
    pub fn add(&mut self, listener: impl Listener) {
        let listener = super::into_boxed(listener);
        let slot = Slot {
            name: listener.name(),
            listener: Mutex::new(Some(listener)),
        };
        self.push(Arc::new(slot), true);
    }

    fn push(&mut self, slot: Arc<Slot>, owned: bool) {
        self.slots.push(slot);
        self.owned.push(owned);
    }

    /// Number of listeners.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    #[must_use]
    /// The list for a sub-agent with id `id`: each listener decides whether
    /// it is shared, replaced or skipped.
    pub fn for_sub_agent(&self, id: &str) -> ListenerList {
        let mut list = ListenerList::new();
        for slot in &self.slots {
            match slot.call("for_sub_agent", |l| l.for_sub_agent(id)) {
                Some(SubAgentListener::Share) => list.push(Arc::clone(slot), false),
                Some(SubAgentListener::Replace(l)) => list.add(l),
                Some(SubAgentListener::Skip) | None => {}
            }
        }
        list
    }

    /// Deliver `event` to every listener, now.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "the hub's signature, which keeps the event"
    )]
    pub(crate) fn emit(&self, event: Event) {
        for slot in &self.slots {
            slot.call("on_event", |l| l.on_event(&event));
        }
    }

    /// Deliver a delta of `agent` ([`Event::ThinkingDelta`] if `thinking`,
    /// else [`Event::AssistantDelta`]) with `text` to every listener, now.
    pub(crate) fn emit_delta(&self, agent: &Arc<str>, thinking: bool, text: &str) {
        if self.slots.is_empty() {
            return;
        }
        let (agent, content) = (Arc::clone(agent), text.to_string());
        self.emit(if thinking {
            Event::ThinkingDelta { agent, content }
        } else {
            Event::AssistantDelta { agent, content }
        });
    }

    /// Nothing is held here: events go out as they are emitted.
    #[allow(clippy::unused_self, reason = "the hub's signature")]
    pub(crate) fn hold(&self) {}

    /// A run starts: nothing is held here either.
    #[allow(clippy::unused_self, reason = "the hub's signature")]
    pub(crate) fn open(&self) {}

    /// Nothing waits here: events went out as they were emitted.
    #[allow(clippy::unused_self, reason = "the hub's signature")]
    pub(crate) fn hand_over(&self) {}

    /// Nothing waits here, for a request as anywhere.
    #[allow(clippy::unused_self, reason = "the hub's signature")]
    pub(crate) fn hand_over_for_request(&self) {}

    /// The end of a turn: run every listener's `flush`, whatever its
    /// [`Delivery`](super::Delivery) (it saw every event already).
    pub(crate) fn flush(&self) {
        for slot in &self.slots {
            slot.call("flush", Listener::flush);
        }
    }

    /// Like [`flush`](ListenerList::flush): every listener is caught up.
    pub(crate) fn flush_all(&self) {
        self.flush();
    }

    /// Close the listeners this list added; later events to them are
    /// dropped. Idempotent.
    pub(crate) fn close(&self) {
        for (slot, owned) in self.slots.iter().zip(&self.owned) {
            if *owned {
                slot.call("close", Listener::close);
                *slot.listener.lock() = None;
            }
        }
    }
}

impl Drop for ListenerList {
    fn drop(&mut self) {
        self.close();
    }
}

impl fmt::Display for ListenerList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::write_names(f, self.slots.iter().map(|slot| slot.name.as_str()))
    }
}

impl fmt::Debug for ListenerList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ListenerList{self}")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::thread::ThreadId;

    use parking_lot::Mutex;

    use super::ListenerList;
    use crate::listener::{Delivery, SubAgentListener};
    use crate::{Event, Listener};

    /// What a listener saw, and on which thread.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<(String, ThreadId)>>>);

    impl Seen {
        fn note(&self, what: impl Into<String>) {
            self.0
                .lock()
                .push((what.into(), std::thread::current().id()));
        }

        fn names(&self) -> Vec<String> {
            self.0.lock().iter().map(|(w, _)| w.clone()).collect()
        }
    }

    struct Probe {
        seen: Seen,
        delivery: Delivery,
        panics_on: Option<&'static str>,
    }

    impl Listener for Probe {
        fn on_event(&mut self, event: &Event) {
            let text = match event {
                Event::AssistantDelta { content, .. } => format!("delta {content}"),
                other => format!("{other:?}").chars().take(8).collect(),
            };
            assert!(
                !self.panics_on.is_some_and(|p| text.contains(p)),
                "on {text}"
            );
            self.seen.note(text);
        }
        fn flush(&mut self) {
            self.seen.note("flush");
        }
        fn delivery(&self) -> Delivery {
            self.delivery
        }
        fn close(&mut self) {
            self.seen.note("close");
        }
        fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
            self.seen.note(format!("sub {id}"));
            SubAgentListener::Share
        }
    }

    fn probe(delivery: Delivery, panics_on: Option<&'static str>) -> (Probe, Seen) {
        let seen = Seen::default();
        let p = Probe {
            seen: seen.clone(),
            delivery,
            panics_on,
        };
        (p, seen)
    }

    #[test]
    fn listeners_run_on_the_emitting_thread_in_order_and_flush_whatever_their_delivery() {
        let (a, seen_a) = probe(Delivery::Barrier, None);
        let (b, seen_b) = probe(Delivery::HandOff, None);
        let mut list = ListenerList::new();
        list.add(a);
        list.add(Box::new(b) as Box<dyn Listener>);
        assert_eq!(list.to_string(), "[Probe, Probe]");
        let agent: Arc<str> = Arc::from("a");
        list.hold();
        list.emit_delta(&agent, false, "he");
        // Seen at once: nothing is held for a hand-over.
        assert_eq!(seen_a.names(), ["delta he"]);
        list.emit_delta(&agent, false, "llo");
        list.hand_over();
        list.flush();
        list.close();
        list.close();
        list.emit_delta(&agent, false, "dropped");
        for seen in [&seen_a, &seen_b] {
            assert_eq!(seen.names(), ["delta he", "delta llo", "flush", "close"]);
            let me = std::thread::current().id();
            assert!(seen.0.lock().iter().all(|(_, t)| *t == me));
        }
    }

    #[test]
    fn a_panic_costs_the_listener_one_call() {
        let (a, seen) = probe(Delivery::Barrier, Some("boom"));
        let mut list = ListenerList::new();
        list.add(a);
        let agent: Arc<str> = Arc::from("a");
        list.emit_delta(&agent, false, "boom");
        list.emit_delta(&agent, false, "after");
        list.flush();
        assert_eq!(seen.names(), ["delta after", "flush"]);
    }

    #[test]
    fn a_shared_listener_is_closed_by_its_owner_only() {
        let (a, seen) = probe(Delivery::Barrier, None);
        let mut list = ListenerList::new();
        list.add(a);
        let child = list.for_sub_agent("c");
        assert_eq!(child.len(), 1);
        drop(child);
        let agent: Arc<str> = Arc::from("p");
        list.emit_delta(&agent, false, "x");
        drop(list);
        assert_eq!(seen.names(), ["sub c", "delta x", "close"]);
    }
}
