//! `ListenerList`: one std thread and one crossbeam channel per listener.
//!
//! # Batching
//!
//! While deltas are emitted less than `DENSE` (5 us) apart, as when a
//! replayed or cached completion streams in (never a model generating
//! live), a listener thread that emptied its queue naps once before it
//! blocks (`NAP`: 1 us asked, about 55 us slept, Linux's default timer
//! slack being 50 us), and so takes the stream in batches instead of
//! chasing the agent thread one delta at a time. Chasing was costly for the
//! agent thread: crossbeam's receiver spins before it parks, and a consumer
//! right behind the producer pulls each freshly written cache line (channel
//! slot, event, reference count) to its core, which the agent thread then
//! pays for on its next write. Batching cut the agent thread's CPU time per
//! delivered delta by about 240 ns, at the cost of up to one nap of delivery
//! latency in such streams. Slower streams never nap and keep crossbeam's
//! latency; an idle listener blocks and costs nothing. The emitting side
//! tells a dense stream (one `Instant::now()` per emit) because the
//! listener cannot: a listener that fell behind sees every gap as short.
//! The figures are in BENCHMARKS.md ("end to end", "event delivery
//! latency").
//!
//! # Event memory
//!
//! An emitted event is allocated on the emitting thread (the agent loop),
//! read on each listener thread, and released on the emitting thread: the
//! list keeps its own handle to every event it sent, oldest first, and once
//! every listener has dropped theirs the next `emit` reuses that event's
//! allocation for the new event (one per call), while `flush` and `close`
//! free whatever was handled. So a delta costs no allocation of its own
//! beyond its text, and no block of memory crosses threads. When the
//! listener threads freed the events, glibc's malloc returned every block
//! to the emitting thread's arena under the arena lock, and allocation took
//! about a third of a delta's delivery cost (BENCHMARKS.md, "event
//! delivery").

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, unbounded};
use parking_lot::Mutex;

use super::SubAgentListener;
use crate::{Event, Listener};

enum Msg {
    Event(Arc<Event>),
    Flush(Sender<()>),
    Derive(String, Sender<SubAgentListener>),
    Stop,
}

/// How long a listener thread that emptied its queue during a dense stream
/// waits before it looks again and then blocks; see the module docs on
/// batching. Linux adds its default 50 us timer slack.
const NAP: Duration = Duration::from_micros(1);

/// Deltas emitted closer together than this make a dense stream.
const DENSE: Duration = Duration::from_micros(5);

/// One listener's thread. Shared (`Arc`) between the list that owns it and
/// the lists derived for sub-agents whose listener chose `Share`. The owner
/// stops and joins it on close; the thread also ends when every holder is
/// gone.
struct Slot {
    name: String,
    tx: Sender<Msg>,
    /// Set by the emitting side while the stream is dense; read by the
    /// listener thread (see the module docs on batching).
    dense: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Slot {
    fn spawn(listener: Box<dyn Listener>) -> Arc<Slot> {
        let name = listener.name();
        let (tx, rx) = unbounded();
        let dense = Arc::new(AtomicBool::new(false));
        let shared = Arc::clone(&dense);
        let thread = std::thread::Builder::new()
            .name(format!("pikuri-listener-{name}"))
            .spawn(move || run(listener, &rx, &shared))
            .expect("failed to spawn a listener thread");
        Arc::new(Slot {
            name,
            dense,
            tx,
            thread: Mutex::new(Some(thread)),
        })
    }

    fn send(&self, msg: Msg) -> bool {
        self.tx.send(msg).is_ok()
    }

    /// Stop the thread after it handled what was queued, and join it.
    fn stop(&self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(handle) = self.thread.lock().take()
            && handle.thread().id() != std::thread::current().id()
        {
            let _ = handle.join();
        }
    }
}

/// A `Box<dyn Listener>` passed to [`ListenerList::add`] is used as is rather
/// than boxed a second time.
fn into_boxed(listener: impl Listener) -> Box<dyn Listener> {
    let mut slot = Some(listener);
    if let Some(boxed) =
        (&mut slot as &mut dyn std::any::Any).downcast_mut::<Option<Box<dyn Listener>>>()
    {
        return boxed.take().expect("just set");
    }
    Box::new(slot.expect("just set"))
}

fn guarded<T>(name: &str, what: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(panic) => {
            let msg = crate::util::panic_message(&*panic);
            log::error!("listener {name} panicked in {what}: {msg}");
            None
        }
    }
}

fn run(mut listener: Box<dyn Listener>, rx: &Receiver<Msg>, dense: &AtomicBool) {
    let name = listener.name();
    let mut napped = false;
    loop {
        let msg = match rx.try_recv() {
            Ok(msg) => msg,
            Err(TryRecvError::Disconnected) => break,
            // Drained during a dense stream: nap once so that the stream is
            // taken in batches (see the module docs on batching), then block.
            Err(TryRecvError::Empty) if !napped && dense.load(Ordering::Relaxed) => {
                napped = true;
                std::thread::sleep(NAP);
                continue;
            }
            Err(TryRecvError::Empty) => match rx.recv() {
                Ok(msg) => msg,
                Err(_) => break,
            },
        };
        napped = false;
        match msg {
            Msg::Event(event) => {
                guarded(&name, "on_event", || listener.on_event(&event));
            }
            Msg::Flush(ack) => {
                guarded(&name, "flush", || listener.flush());
                let _ = ack.send(());
            }
            Msg::Derive(id, reply) => {
                let derived = guarded(&name, "for_sub_agent", || listener.for_sub_agent(&id))
                    .unwrap_or(SubAgentListener::Skip);
                let _ = reply.send(derived);
            }
            Msg::Stop => break,
        }
    }
    guarded(&name, "close", || listener.close());
}

/// The listeners of one agent, each on its own thread.
///
/// Built by the [`Configurator`](crate::Configurator) from
/// [`add_listener`](crate::Configurator::add_listener); there is no public way
/// to emit into a list. See the [`Listener`](crate::Listener) docs for threads,
/// ordering, panics and sub-agents.
///
/// # Examples
///
/// ```
/// use pikuri::{listeners::InMemoryEventList, ListenerList};
/// let mut list = ListenerList::new();
/// list.add(InMemoryEventList::new());
/// list.add(|_e: &pikuri::Event| {});
/// assert_eq!(list.to_string(), "[InMemoryEventList, Fn]");
/// let child = list.for_sub_agent("researcher 0");
/// assert_eq!(child.len(), 2);
/// ```
#[derive(Default)]
pub struct ListenerList {
    slots: Vec<Arc<Slot>>,
    /// Parallel to `slots`: whether this list started (and so stops) the thread.
    owned: Vec<bool>,
    /// The emitting side's state, see the module docs.
    state: Mutex<EmitState>,
}

/// What `emit` keeps between calls.
#[derive(Default)]
struct EmitState {
    /// Events sent, oldest first, until reused or freed; see the module
    /// docs on event memory.
    sent: VecDeque<Arc<Event>>,
    /// When the last event was emitted, to tell a dense stream.
    last: Option<Instant>,
}

impl ListenerList {
    /// An empty list.
    pub fn new() -> ListenerList {
        ListenerList::default()
    }

    /// Add a listener, starting its thread. A `Box<dyn Listener>` is a
    /// listener too.
    pub fn add(&mut self, listener: impl Listener) {
        self.add_boxed(into_boxed(listener));
    }

    fn add_boxed(&mut self, listener: Box<dyn Listener>) {
        self.slots.push(Slot::spawn(listener));
        self.owned.push(true);
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
    /// The list for a sub-agent with id `id`: each listener decides (on its own
    /// thread) whether it is shared, replaced or skipped.
    pub fn for_sub_agent(&self, id: &str) -> ListenerList {
        let replies: Vec<_> = self
            .slots
            .iter()
            .map(|slot| {
                let (tx, rx) = crossbeam_channel::bounded(1);
                let sent = slot.send(Msg::Derive(id.to_string(), tx));
                (slot, sent.then_some(rx))
            })
            .collect();
        let mut list = ListenerList::new();
        for (slot, rx) in replies {
            match rx.and_then(|rx| rx.recv().ok()) {
                Some(SubAgentListener::Share) => {
                    list.slots.push(Arc::clone(slot));
                    list.owned.push(false);
                }
                Some(SubAgentListener::Replace(l)) => list.add_boxed(l),
                Some(SubAgentListener::Skip) | None => {}
            }
        }
        list
    }

    /// Deliver `event` to every listener.
    pub(crate) fn emit(&self, event: Event) {
        if self.slots.is_empty() {
            return;
        }
        let mut st = self.state.lock();
        let now = Instant::now();
        let dense = st.last.is_some_and(|t| now.duration_since(t) < DENSE);
        st.last = Some(now);
        let event = match pop_handled(&mut st.sent) {
            Some(mut handled) => {
                match Arc::get_mut(&mut handled) {
                    // Drops the old event here, on the emitting thread.
                    Some(old) => *old = event,
                    None => handled = Arc::new(event),
                }
                handled
            }
            None => Arc::new(event),
        };
        for slot in &self.slots {
            // Written only when it changes: the listener reads this line.
            if slot.dense.load(Ordering::Relaxed) != dense {
                slot.dense.store(dense, Ordering::Relaxed);
            }
            slot.send(Msg::Event(Arc::clone(&event)));
        }
        st.sent.push_back(event);
    }

    /// Wait until every listener handled every event emitted so far, then
    /// flushed.
    pub(crate) fn flush(&self) {
        let acks: Vec<_> = self
            .slots
            .iter()
            .filter_map(|slot| {
                let (tx, rx) = crossbeam_channel::bounded(1);
                slot.send(Msg::Flush(tx)).then_some(rx)
            })
            .collect();
        for rx in acks {
            let _ = rx.recv();
        }
        release_handled(&mut self.state.lock().sent);
    }

    /// Stop and join the threads this list started, after they handled what
    /// was queued. Later events to them are dropped. Idempotent.
    pub(crate) fn close(&self) {
        for (slot, owned) in self.slots.iter().zip(&self.owned) {
            if *owned {
                slot.stop();
            }
        }
        release_handled(&mut self.state.lock().sent);
    }
}

/// Whether every listener dropped its handle to `event`: the count is this
/// list's own handle, and it cannot grow again (the event was sent).
fn is_handled(event: &Arc<Event>) -> bool {
    Arc::strong_count(event) == 1
}

/// Free the oldest events that no listener holds any more. Each listener
/// handles events in order, so the first event still held ends the scan.
fn release_handled(sent: &mut VecDeque<Arc<Event>>) {
    while pop_handled(sent).is_some() {}
}

/// The oldest event, if no listener holds it any more.
fn pop_handled(sent: &mut VecDeque<Arc<Event>>) -> Option<Arc<Event>> {
    // `VecDeque::pop_front_if` needs Rust 1.93; the MSRV is 1.88.
    if sent.front().is_some_and(is_handled) {
        sent.pop_front()
    } else {
        None
    }
}

impl Drop for ListenerList {
    fn drop(&mut self) {
        self.close();
    }
}

impl fmt::Display for ListenerList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, slot) in self.slots.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&slot.name)?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for ListenerList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ListenerList{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listeners::InMemoryEventList;

    fn delta(s: &str) -> Event {
        Event::AssistantDelta {
            agent: "".into(),
            content: s.into(),
        }
    }

    /// The texts of the deltas `rec` saw, in order (it saw nothing else).
    fn delta_texts(rec: &InMemoryEventList) -> Vec<String> {
        rec.events()
            .into_iter()
            .map(|e| match e {
                Event::AssistantDelta { content, .. } => content,
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn order_is_kept_and_flush_waits() {
        let rec = InMemoryEventList::new();
        let mut list = ListenerList::new();
        list.add(|_: &Event| std::thread::sleep(std::time::Duration::from_millis(1)));
        list.add(rec.clone());
        for i in 0..50 {
            list.emit(delta(&i.to_string()));
        }
        list.flush();
        let got = delta_texts(&rec);
        assert_eq!(got, (0..50).map(|i| i.to_string()).collect::<Vec<_>>());
    }

    #[test]
    fn reused_event_memory_never_changes_what_a_listener_saw() {
        let rec = InMemoryEventList::new();
        let mut list = ListenerList::new();
        list.add(rec.clone());
        // A listener that lags now and then, so some events wait while
        // others are reused.
        list.add(|e: &Event| {
            if let Event::AssistantDelta { content, .. } = e
                && content.ends_with('7')
            {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        });
        for i in 0..2_000 {
            list.emit(delta(&i.to_string()));
        }
        list.flush();
        let got = delta_texts(&rec);
        assert_eq!(got, (0..2_000).map(|i| i.to_string()).collect::<Vec<_>>());
        // Everything was handled: flush freed it all.
        assert!(list.state.lock().sent.is_empty());
    }

    #[test]
    fn panicking_listener_is_isolated() {
        let rec = InMemoryEventList::new();
        let mut list = ListenerList::new();
        list.add(|_: &Event| panic!("boom"));
        list.add(rec.clone());
        list.emit(delta("a"));
        list.emit(delta("b"));
        list.flush();
        assert_eq!(rec.len(), 2);
    }
}
