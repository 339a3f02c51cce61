//! `ListenerList`: one std thread and one bounded crossbeam channel per
//! listener.
//!
//! # Batching
//!
//! Two things keep a listener from chasing a fast stream one delta at a
//! time:
//!
//! - The emitting side joins deltas: a delta for a listener that already
//!   has an event waiting in its queue (`DELTA_ROOM`) waits in the
//!   backlog (see backpressure), and the next deltas of its kind from its
//!   agent are appended to it without building an event of their own. The
//!   next emit after the listener emptied its queue hands it what waits,
//!   and so does the agent before it waits for anything (`pause`: before
//!   each network read, each request, each tool call), so text never
//!   waits behind a stalled stream or a slow tool.
//! - While the stream is dense (the agent's network reads, its `pause`s,
//!   come less than `NAP` apart, as when a replayed or cached completion
//!   streams in), a listener thread that emptied its queue naps once
//!   before it blocks (`NAP`, 1 ms; a request such as the flush, or a
//!   half-full queue, ends it early), so it takes the stream in batches of
//!   a few joined deltas. Between reads further apart (a model generating
//!   live, or a thousand agents sharing two cores) a nap would find
//!   nothing and cost a wake-up: the listener blocks at once.
//!
//! Chasing was costly for the agent thread: crossbeam's receiver spins
//! before it parks, and a consumer right behind the producer pulls each
//! freshly written cache line (channel slot, event, reference count) to
//! its core, which the agent thread then pays for on its next write; and
//! each delta cost an event and a channel message on both sides. A fast
//! stream now reaches a listener as one or two events per network read (8
//! KiB of stream, a few dozen deltas) or fewer (BENCHMARKS.md, "Session
//! 6"). The price: a listener that is behind, or
//! takes a dense stream, sees fewer, longer deltas (the same text), in a
//! dense stream up to one nap late. A listener that keeps up with a model
//! generating live gets its deltas one by one with crossbeam's latency; an
//! idle listener blocks and costs nothing. The emitting side tells a dense
//! stream (one `Instant::now()` per read) because the listener cannot: a
//! listener that fell behind sees every gap as short.
//! Only deltas make a stream dense: a turn's other events come in bursts
//! too (`Assistant` then `Tokens`), and a listener napping after them
//! would wake on a timer in the middle of the next turn.
//!
//! # Lingering
//!
//! A listener thread that handled a flush (a turn ended) parks for up to
//! `LINGER` (1 ms) without watching its channel, before it blocks on it.
//! Events sent meanwhile wake nobody: crossbeam unparks only a receiver
//! that registered with the channel. What ends the lingering early is a
//! request that waits for an answer (the next flush, a sub-agent's
//! derive, stop) or a half-full queue, each of which unparks the thread.
//! So when turns follow each other quickly, as when a test replays thousands of
//! them or a local server answers in microseconds, a turn wakes its
//! listener once, at its flush, instead of once for its first event
//! (`UserTurn`, while the agent sends its request) and again for the rest.
//! Each wake-up of an idle thread costs about 10 us on a two-core VM,
//! against 67 us for a whole loopback request (BENCHMARKS.md, "Session
//! 5"). The price: an event emitted within 1 ms of a flush reaches the
//! listener up to 1 ms late, and a listener whose turns are sparse takes
//! one timed wake-up per turn. A lingering thread never naps for a dense
//! stream (see batching): a flush ends a turn, even one cut off mid-stream.
//!
//! # Rousing
//!
//! When the answer is in (a plain body's head arrived, or a stream's
//! `[DONE]`), the agent rouses the listener threads that linger
//! (`rouse`): each is unparked then, and watches its queue (spinning,
//! yielding its core now and then, for up to `WATCH`, 50 us) instead of
//! lingering. Its wake-up then overlaps the agent's own work on the turn's
//! end (reading and decoding the body, the history, the closing events),
//! and the flush finds it awake; before, the flush woke it, and the agent
//! waited out the whole wake-up (about 6 us of a 70 us loopback turn,
//! BENCHMARKS.md, "Session 6"). The thread wakes once a turn as before; it
//! spins at most `WATCH` a turn, and only after a rouse, so an idle agent
//! costs nothing. A thread that is not lingering is not roused (it is
//! awake, or blocked on its channel, which the turn's events wake), and a
//! rouse the thread did not take before the flush is dropped there. An
//! agent with as many listeners as the process has cores rouses none:
//! spinning threads without a core each would take turns with the agent
//! they wait for (four listeners on two cores: 1.91x of a bare client
//! roused, 1.75x not).
//!
//! # Backpressure
//!
//! A listener's queue holds `QUEUE` events. When it is full (for a delta:
//! holds `DELTA_ROOM`; see batching), the emitting list keeps that
//! listener's next events in a backlog of its own and moves them to the
//! queue, oldest first, as room appears (at each later emit, and at the
//! flush). In the backlog, a delta following a delta of the same kind from
//! the same agent is merged into it (the text is appended, nothing is lost
//! or reordered); any other event takes a place of its own, and an emit
//! that finds `BACKLOG` of them waits for the listener to take one. Before
//! the agent waits for anything (`pause`) it moves every backlog to its
//! queue, waiting for room if need be: an event never waits in a backlog
//! while the agent waits too and the listener idles. So a listener's
//! memory is bounded (`QUEUE` plus `BACKLOG` events, plus the text of the
//! deltas it has not seen, which the agent holds anyway) whatever the
//! scheduler does, and the agent waits for a listener that is behind on
//! deltas alone only where it would wait anyway. Before, the queues were
//! unbounded: 1,000 agents streaming at once on two cores peaked at ~480
//! KiB per agent, their queues filling while listener threads waited for a
//! core (BENCHMARKS.md, "many agents").
//!
//! # The flush
//!
//! `flush` sends each listener a flush request carrying the list's own
//! gate, and the listener's thread counts itself done on the gate after
//! `Listener::flush` ran. The agent spins on the gate (yielding its core
//! now and then) for up to `SPIN`, the common case when the listener is
//! quick, and only then parks until the last listener unparks it: the
//! turn's end costs no wake-up of the agent's thread, and no allocation.
//!
//! # Event memory
//!
//! An emitted event is allocated on the emitting thread (the agent loop),
//! read on each listener thread, and released on the emitting thread: the
//! list keeps its own handle to every event it sent (up to `QUEUE` of
//! them), oldest first, and once every listener has dropped theirs the
//! next `emit` reuses that event's allocation for the new event (one per
//! call), while `flush` and `close` free whatever was handled. So a delta
//! costs no allocation of its own beyond its text, and no block of memory
//! crosses threads. When the listener threads freed the events, glibc's
//! malloc returned every block to the emitting thread's arena under the
//! arena lock, and allocation took about a third of a delta's delivery
//! cost (BENCHMARKS.md, "event delivery").

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded};
use parking_lot::Mutex;

use super::SubAgentListener;
use crate::{Event, Listener};

enum Msg {
    Event(Arc<Event>),
    Flush(Ticket),
    /// Boxed: the rare message keeps every queue slot small.
    Derive(Box<(String, Sender<SubAgentListener>)>),
    Stop,
}

/// Events a listener's queue holds; see the module docs on backpressure.
/// The queue's slots are allocated up front (24 bytes each).
const QUEUE: usize = 32;

/// Events other than merged deltas a listener's backlog holds before an
/// emit waits for room; see the module docs on backpressure.
const BACKLOG: usize = 32;

/// How long a listener thread that emptied its queue during a dense stream
/// waits before it looks again and then blocks; see the module docs on
/// batching.
const NAP: Duration = Duration::from_millis(1);

/// Events a listener's queue holds before a delta waits in the backlog,
/// joined by the next ones; see the module docs on batching.
const DELTA_ROOM: usize = 1;

/// How long a listener thread that handled a flush keeps its channel
/// unwatched before it blocks on it; see the module docs on lingering.
const LINGER: Duration = Duration::from_millis(1);

/// A flush request's place at its list's gate: it arrives when dropped,
/// whether the listener's thread handled it or the message was dropped
/// unhandled (the thread had stopped), so a flush never waits for a
/// listener that is gone.
struct Ticket(Arc<Gate>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.arrive();
    }
}

/// How long a roused listener thread watches its queue before it blocks;
/// see the module docs on rousing.
const WATCH: Duration = Duration::from_micros(50);

/// How long `flush` spins before it parks; see the module docs on the flush.
const SPIN: Duration = Duration::from_micros(100);

/// A list's flush barrier: how many listeners are done, and who waits.
#[derive(Default)]
struct Gate {
    done: AtomicUsize,
    waiter: Mutex<Option<Thread>>,
}

impl Gate {
    /// Called by a listener's thread once it flushed.
    fn arrive(&self) {
        self.done.fetch_add(1, Ordering::SeqCst);
        // The lock orders this against the waiter's registration: either
        // the waiter sees the count after registering, or we see it here.
        if let Some(waiter) = &*self.waiter.lock() {
            waiter.unpark();
        }
    }

    /// Wait until `n` listeners arrived: spin, then park.
    fn wait(&self, n: usize) {
        let start = Instant::now();
        let mut spins = 0u32;
        while self.done.load(Ordering::SeqCst) < n {
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() >= SPIN {
                *self.waiter.lock() = Some(std::thread::current());
                while self.done.load(Ordering::SeqCst) < n {
                    std::thread::park();
                }
                *self.waiter.lock() = None;
                return;
            }
            // Let the listener's thread run if it waits for this core.
            std::thread::yield_now();
        }
    }
}

/// What the emitting side and a listener's thread tell each other besides
/// the queue.
#[derive(Default)]
struct Signals {
    /// Set by the emitting side while the stream is dense (see the module
    /// docs on batching).
    dense: AtomicBool,
    /// Set by the listener's thread while it lingers (see lingering).
    lingering: AtomicBool,
    /// Set by the emitting side when a lingering thread should watch its
    /// queue for the turn's end (see rousing).
    roused: AtomicBool,
}

/// One listener's thread. Shared (`Arc`) between the list that owns it and
/// the lists derived for sub-agents whose listener chose `Share`. The owner
/// stops and joins it on close; the thread also ends when every holder is
/// gone.
struct Slot {
    name: String,
    tx: Sender<Msg>,
    /// Flags shared with the listener's thread.
    signals: Arc<Signals>,
    /// Whether `Stop` is not sent yet. Requests that wait for an answer
    /// (flush, derive) are sent under this lock, so each is either queued
    /// before the `Stop`, and answered, or not sent at all.
    open: Mutex<bool>,
    /// The listener's thread, to unpark it when it lingers (see the module
    /// docs on lingering).
    waker: Thread,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Slot {
    fn spawn(listener: Box<dyn Listener>) -> Arc<Slot> {
        let name = listener.name();
        let (tx, rx) = bounded(QUEUE);
        let signals = Arc::new(Signals::default());
        let shared = Arc::clone(&signals);
        let thread = std::thread::Builder::new()
            .name(format!("pikuri-listener-{name}"))
            .spawn(move || run(listener, rx, &shared))
            .expect("failed to spawn a listener thread");
        Arc::new(Slot {
            name,
            signals,
            tx,
            open: Mutex::new(true),
            waker: thread.thread().clone(),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Tell the listener's thread whether the stream is dense.
    fn mark(&self, dense: bool) {
        // Written only when it changes: the listener reads this line.
        if self.signals.dense.load(Ordering::Relaxed) != dense {
            self.signals.dense.store(dense, Ordering::Relaxed);
        }
    }

    /// Send `msg`, waiting for room; false once the thread is gone.
    fn send(&self, msg: Msg) -> bool {
        // A full queue's listener may be lingering: it must take events now.
        if self.tx.is_full() {
            self.waker.unpark();
        }
        self.tx.send(msg).is_ok()
    }

    /// Send a request that waits for an answer (see `open`), and wake the
    /// thread if it lingers; false if the thread is stopping or gone (the
    /// request is dropped, which answers it).
    fn request(&self, msg: Msg) -> bool {
        let open = self.open.lock();
        let sent = *open && self.send(msg);
        // Costs no system call unless the thread is parked.
        self.waker.unpark();
        sent
    }

    /// Queue `event`, or keep it in `backlog` (this list's events for this
    /// listener that did not fit yet); see the module docs on backpressure.
    /// `room` is how many events the queue may hold: `QUEUE`, or
    /// `DELTA_ROOM` for a delta (see the module docs on batching).
    fn offer(&self, backlog: &mut VecDeque<Arc<Event>>, event: &Arc<Event>, room: usize) {
        if !backlog.is_empty() && !self.move_backlog(backlog, room) {
            return;
        }
        if backlog.is_empty() && self.tx.len() < room {
            match self.tx.try_send(Msg::Event(Arc::clone(event))) {
                Ok(()) => {
                    // A lingering listener gets a head start on a burst
                    // before its queue is full and deltas start joining.
                    if self.tx.len() == QUEUE / 2 {
                        self.waker.unpark();
                    }
                    return;
                }
                Err(TrySendError::Disconnected(_)) => return,
                // The listener may be lingering with a full queue.
                Err(TrySendError::Full(_)) => self.waker.unpark(),
            }
        }
        if let Some(back) = backlog.back_mut()
            && let Some(more) = back.continued_by(event)
        {
            // `make_mut` copies the delta if the queue or the list still
            // shares it: what was queued is never changed.
            Arc::make_mut(back).append_delta(more);
            return;
        }
        backlog.push_back(Arc::clone(event));
        if backlog.len() > BACKLOG
            && let Some(oldest) = backlog.pop_front()
            && !self.send(Msg::Event(oldest))
        {
            backlog.clear();
        }
    }

    /// Join a delta to the delta waiting at the end of `backlog`, if there
    /// is one of its kind from its agent and the listener has not emptied
    /// its queue yet; whether it did. What a listener that emptied its
    /// queue is owed goes to it at once instead (through `offer`).
    fn join(
        &self,
        backlog: &mut VecDeque<Arc<Event>>,
        agent: &str,
        thinking: bool,
        text: &str,
    ) -> bool {
        match backlog.back_mut() {
            Some(back) if back.is_delta_of(agent, thinking) && !self.tx.is_empty() => {
                // `make_mut` copies the delta if the queue or the list still
                // shares it: what was queued is never changed.
                Arc::make_mut(back).append_delta(text);
                true
            }
            _ => false,
        }
    }

    /// Move what fits of `backlog` to the queue (while it holds fewer than
    /// `room` events), oldest first, without waiting; false (and the
    /// backlog dropped) once the thread is gone.
    fn move_backlog(&self, backlog: &mut VecDeque<Arc<Event>>, room: usize) -> bool {
        while let Some(oldest) = backlog.front() {
            if self.tx.len() >= room {
                return true;
            }
            match self.tx.try_send(Msg::Event(Arc::clone(oldest))) {
                Ok(()) => {
                    backlog.pop_front();
                }
                Err(TrySendError::Full(_)) => return true,
                Err(TrySendError::Disconnected(_)) => {
                    backlog.clear();
                    return false;
                }
            }
        }
        true
    }

    /// Move all of `backlog` to the queue, waiting for room; dropped once
    /// the thread is gone.
    fn drain_backlog(&self, backlog: &mut VecDeque<Arc<Event>>) {
        while let Some(oldest) = backlog.pop_front() {
            if !self.send(Msg::Event(oldest)) {
                backlog.clear();
            }
        }
    }

    /// Stop the thread after it handled what was queued, and join it.
    fn stop(&self) {
        {
            let mut open = self.open.lock();
            if *open {
                *open = false;
                let _ = self.tx.send(Msg::Stop);
                self.waker.unpark();
            }
        }
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

fn run(mut listener: Box<dyn Listener>, rx: Receiver<Msg>, signals: &Signals) {
    let name = listener.name();
    let mut napped = false;
    // Until when the thread lingers after a flush (see the module docs).
    let mut linger: Option<Instant> = None;
    // Until when a roused thread watches its queue (see the module docs).
    let mut watch: Option<Instant> = None;
    let mut spins = 0u32;
    loop {
        let msg = match rx.try_recv() {
            Ok(msg) => msg,
            Err(TryRecvError::Disconnected) => break,
            // Drained after a flush: park without watching the channel, so
            // that the next turn's first events wake nobody, until a request
            // or a half-full queue unparks us or the time is up (see the
            // module docs on lingering). A rouse ends it in a watch (see
            // rousing).
            Err(TryRecvError::Empty) if linger.is_some() => {
                let roused = signals.roused.swap(false, Ordering::Relaxed);
                let left = linger.and_then(|until| until.checked_duration_since(Instant::now()));
                match left {
                    Some(left) if !roused && !left.is_zero() => std::thread::park_timeout(left),
                    _ => {
                        if roused {
                            watch = Some(Instant::now() + WATCH);
                        }
                        linger = None;
                        signals.lingering.store(false, Ordering::Relaxed);
                    }
                }
                continue;
            }
            // Roused: the turn's last events and its flush come within
            // microseconds; watch for them instead of blocking (see the
            // module docs on rousing).
            Err(TryRecvError::Empty) if watch.is_some() => {
                spins = spins.wrapping_add(1);
                if !spins.is_multiple_of(64) {
                    std::hint::spin_loop();
                } else if watch.is_some_and(|until| Instant::now() < until) {
                    // Let the agent's thread run if it waits for this core.
                    std::thread::yield_now();
                } else {
                    watch = None;
                }
                continue;
            }
            // Drained during a dense stream: nap once so that the stream is
            // taken in batches (see the module docs on batching), then block.
            // Lingering comes first: a flush ends a turn, even one cut off
            // in the middle of a stream.
            Err(TryRecvError::Empty) if !napped && signals.dense.load(Ordering::Relaxed) => {
                napped = true;
                // A request (the flush) or a half-full queue ends it early.
                std::thread::park_timeout(NAP);
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
            Msg::Flush(ticket) => {
                guarded(&name, "flush", || listener.flush());
                watch = None;
                // A rouse meant for this turn is spent.
                signals.roused.store(false, Ordering::Relaxed);
                signals.lingering.store(true, Ordering::Relaxed);
                linger = Some(Instant::now() + LINGER);
                // Last: the flush returns once every ticket arrived.
                drop(ticket);
            }
            Msg::Derive(derive) => {
                let (id, reply) = *derive;
                let derived = guarded(&name, "for_sub_agent", || listener.for_sub_agent(&id))
                    .unwrap_or(SubAgentListener::Skip);
                let _ = reply.send(derived);
            }
            Msg::Stop => break,
        }
    }
    // Later sends fail at once instead of filling a queue nobody reads.
    drop(rx);
    guarded(&name, "close", || listener.close());
}

/// The listeners of one agent, each on its own thread.
///
/// Built by the [`Configurator`](crate::Configurator) from
/// [`add_listener`](crate::Configurator::add_listener); there is no public way
/// to emit into a list. See the [`Listener`](crate::Listener) docs for threads,
/// ordering, backpressure, panics and sub-agents.
///
/// # Examples
///
/// ```
/// use pikuri::listeners::{InMemoryEventList, ListenerList};
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
    /// The flush barrier; locked for a whole flush, so flushes of one list
    /// never share it.
    gate: Mutex<Arc<Gate>>,
}

/// What `emit` keeps between calls.
#[derive(Default)]
struct EmitState {
    /// Events sent, oldest first, until reused or freed; see the module
    /// docs on event memory.
    sent: VecDeque<Arc<Event>>,
    /// When `pause` last ran, and whether it came less than `NAP` after
    /// the one before (network reads follow each other quickly), to tell a
    /// dense stream.
    last_pause: Option<Instant>,
    fast_reads: bool,
    /// Parallel to `slots`: this list's events that did not fit in that
    /// listener's queue yet; see the module docs on backpressure.
    backlogs: Vec<VecDeque<Arc<Event>>>,
}

impl EmitState {
    /// Whether an event continues a dense stream: a delta while network
    /// reads follow each other within `NAP`.
    fn dense(&self, is_delta: bool) -> bool {
        // Only deltas make a stream dense: a turn's other events come in
        // bursts too (`Assistant` then `Tokens`, microseconds apart), and a
        // listener napping after them would wake on a timer in the middle
        // of the next turn.
        is_delta && self.fast_reads
    }

    /// Move every backlog to its queue, waiting for room, so that what is
    /// sent next comes after everything emitted so far.
    fn drain_backlogs(&mut self, slots: &[Arc<Slot>]) {
        for (slot, backlog) in slots.iter().zip(&mut self.backlogs) {
            slot.drain_backlog(backlog);
        }
    }
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
        self.push(Slot::spawn(listener), true);
    }

    fn push(&mut self, slot: Arc<Slot>, owned: bool) {
        self.slots.push(slot);
        self.owned.push(owned);
        self.state.get_mut().backlogs.push(VecDeque::new());
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
        // The parent's events come first.
        self.state.lock().drain_backlogs(&self.slots);
        let replies: Vec<_> = self
            .slots
            .iter()
            .map(|slot| {
                let (tx, rx) = crossbeam_channel::bounded(1);
                let sent = slot.request(Msg::Derive(Box::new((id.to_string(), tx))));
                (slot, sent.then_some(rx))
            })
            .collect();
        let mut list = ListenerList::new();
        for (slot, rx) in replies {
            match rx.and_then(|rx| rx.recv().ok()) {
                Some(SubAgentListener::Share) => list.push(Arc::clone(slot), false),
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
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let dense = st.dense(event.is_delta());
        let room = room(event.is_delta());
        let event = reuse(&mut st.sent, event);
        for (slot, backlog) in self.slots.iter().zip(&mut st.backlogs) {
            slot.mark(dense);
            slot.offer(backlog, &event, room);
        }
        keep(&mut st.sent, event);
    }

    /// Deliver a delta of `agent` ([`Event::ThinkingDelta`] if `thinking`,
    /// else [`Event::AssistantDelta`]) with `text` to every listener. For a
    /// listener with an event waiting, `text` is appended to the delta
    /// waiting in its backlog when there is one (see the module docs on
    /// batching); an event is built only if some listener needs one.
    pub(crate) fn emit_delta(&self, agent: &Arc<str>, thinking: bool, text: &str) {
        if self.slots.is_empty() {
            return;
        }
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let dense = st.dense(true);
        let mut event = None;
        for (slot, backlog) in self.slots.iter().zip(&mut st.backlogs) {
            slot.mark(dense);
            if slot.join(backlog, agent, thinking, text) {
                continue;
            }
            let event = event.get_or_insert_with(|| {
                let (agent, content) = (Arc::clone(agent), text.to_string());
                reuse(
                    &mut st.sent,
                    if thinking {
                        Event::ThinkingDelta { agent, content }
                    } else {
                        Event::AssistantDelta { agent, content }
                    },
                )
            });
            slot.offer(backlog, event, DELTA_ROOM);
        }
        if let Some(event) = event {
            keep(&mut st.sent, event);
        }
    }

    /// The emitting thread is about to wait (for the network, a tool, an
    /// approval): move what waits in the backlogs to the queues, waiting
    /// for room if a listener is a whole queue behind, so that no event
    /// waits with it (see the module docs on batching and backpressure).
    pub(crate) fn pause(&self) {
        if self.slots.is_empty() {
            return;
        }
        let mut st = self.state.lock();
        let now = Instant::now();
        st.fast_reads = st.last_pause.is_some_and(|t| now.duration_since(t) < NAP);
        st.last_pause = Some(now);
        st.drain_backlogs(&self.slots);
    }

    /// The answer is in: the turn's last events and its flush follow within
    /// microseconds. Wake the listener threads that linger, so that each
    /// wakes while the agent finishes the turn rather than after the flush
    /// asked (see the module docs on rousing).
    pub(crate) fn rouse(&self) {
        // Threads that watch their queues spin: with no core free for each
        // of them beside the agent's, they would take turns on the cores
        // with the agent they wait for.
        if self.slots.len() >= cores() {
            return;
        }
        for slot in &self.slots {
            let signals = &slot.signals;
            if signals.lingering.load(Ordering::Relaxed)
                && !signals.roused.swap(true, Ordering::Relaxed)
            {
                slot.waker.unpark();
            }
        }
    }

    /// Wait until every listener handled every event emitted so far, then
    /// flushed.
    pub(crate) fn flush(&self) {
        if self.slots.is_empty() {
            return;
        }
        let gate = self.gate.lock();
        gate.done.store(0, Ordering::SeqCst);
        {
            let mut st = self.state.lock();
            st.drain_backlogs(&self.slots);
            for slot in &self.slots {
                // A ticket that cannot be sent arrives as it is dropped.
                slot.request(Msg::Flush(Ticket(Arc::clone(&gate))));
            }
        }
        gate.wait(self.slots.len());
        release_handled(&mut self.state.lock().sent);
    }

    /// Stop and join the threads this list started, after they handled what
    /// was queued. Later events to them are dropped. Idempotent.
    pub(crate) fn close(&self) {
        let mut st = self.state.lock();
        st.drain_backlogs(&self.slots);
        for (slot, owned) in self.slots.iter().zip(&self.owned) {
            if *owned {
                slot.stop();
            }
        }
        release_handled(&mut st.sent);
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

/// The cores this process may use, read once (the standard library reads
/// the scheduler's affinity and cgroup quotas on every call).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// `event` in the allocation of the oldest sent event no listener holds
/// any more, if there is one; see the module docs on event memory.
fn reuse(sent: &mut VecDeque<Arc<Event>>, event: Event) -> Arc<Event> {
    match pop_handled(sent) {
        Some(mut handled) => {
            match Arc::get_mut(&mut handled) {
                // Drops the old event here, on the emitting thread.
                Some(old) => *old = event,
                None => handled = Arc::new(event),
            }
            handled
        }
        None => Arc::new(event),
    }
}

/// Keep a handle to a sent event, to reuse or free it on this thread.
fn keep(sent: &mut VecDeque<Arc<Event>>, event: Arc<Event>) {
    // Beyond a queue's worth (a listener stuck on an old event), the
    // listeners free what they handled themselves.
    if sent.len() < QUEUE {
        sent.push_back(event);
    }
}

/// How many events a listener's queue may hold before an event waits in
/// its backlog: one for a delta (see the module docs on batching), else
/// the whole queue.
fn room(is_delta: bool) -> usize {
    if is_delta { DELTA_ROOM } else { QUEUE }
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

    /// What `pick` takes from each event `rec` saw, in order.
    fn picked(rec: &InMemoryEventList, pick: fn(Event) -> Option<String>) -> Vec<String> {
        rec.events().into_iter().filter_map(pick).collect()
    }

    /// The texts of the answer deltas `rec` saw, in order.
    fn delta_texts(rec: &InMemoryEventList) -> Vec<String> {
        picked(rec, |e| match e {
            Event::AssistantDelta { content, .. } => Some(content),
            _ => None,
        })
    }

    #[test]
    fn order_is_kept_and_flush_waits() {
        let rec = InMemoryEventList::new();
        let slow = InMemoryEventList::new();
        let mut list = ListenerList::new();
        let mut seen = slow.clone();
        list.add(move |e: &Event| {
            std::thread::sleep(Duration::from_millis(1));
            seen.on_event(e);
        });
        list.add(rec.clone());
        for i in 0..50 {
            list.emit(delta(&format!("{i},")));
        }
        list.flush();
        // Both listeners handled everything before `flush` returned.
        assert_in_order(&delta_texts(&rec), 50);
        assert_in_order(&delta_texts(&slow), 50);
    }

    /// Checks that `got` (the deltas a listener saw) is `0,1,...,n-1,` cut
    /// into pieces at item boundaries: merging under backpressure may join
    /// neighbours, never lose, reorder or split them.
    fn assert_in_order(got: &[String], n: usize) {
        let mut next = 0;
        for piece in got {
            assert!(piece.ends_with(','), "{piece:?} is not whole items");
            for item in piece.trim_end_matches(',').split(',') {
                assert_eq!(item, next.to_string());
                next += 1;
            }
        }
        assert_eq!(next, n);
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
                && content.ends_with("7,")
            {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        });
        for i in 0..2_000 {
            list.emit(delta(&format!("{i},")));
            // The list keeps a handle to what it sent (to reuse or free it
            // here), never more than a queue's worth.
            let kept = list.state.lock().sent.len();
            assert!((1..=QUEUE).contains(&kept), "{kept} kept");
        }
        list.flush();
        assert_in_order(&delta_texts(&rec), 2_000);
        // Everything was handled: flush freed it all.
        assert!(list.state.lock().sent.is_empty());
    }

    /// A list of one listener held inside `on_event` until the returned
    /// sender is dropped or sent to, and what that listener saw.
    fn stalled() -> (
        ListenerList,
        crossbeam_channel::Sender<()>,
        InMemoryEventList,
    ) {
        let (release, held) = crossbeam_channel::bounded::<()>(0);
        let rec = InMemoryEventList::new();
        let seen = rec.clone();
        let mut first = true;
        let listener = move |e: &Event| {
            if first {
                first = false;
                let _ = held.recv();
            }
            let mut r = seen.clone();
            r.on_event(e);
        };
        let mut list = ListenerList::new();
        list.add(listener);
        (list, release, rec)
    }

    /// Wait until `done` holds, for up to 10 s: a bound against hangs, not
    /// a timing claim. The caller asserts on the state afterwards.
    fn eventually(mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Only deltas make a stream dense, and only while network reads (the
    /// agent's pauses) come within `NAP` of each other: a listener must not
    /// nap after a turn's closing burst (`Assistant` then `Tokens`), or it
    /// wakes on a timer in the middle of the next turn (BENCHMARKS.md,
    /// "Session 5"), nor between reads that come seldom (a model
    /// generating live, or many agents sharing two cores), where a nap
    /// finds nothing and costs a wake-up (BENCHMARKS.md, "Session 6").
    #[test]
    fn only_deltas_of_quick_reads_make_a_stream_dense() {
        let mut list = ListenerList::new();
        list.add(|_: &Event| {});
        let dense = || list.slots[0].signals.dense.load(Ordering::Relaxed);
        let answer = || Event::Assistant {
            agent: "".into(),
            content: "done".into(),
        };
        // Two pauses in a row come within `NAP` but on a loaded machine.
        let mut tries = 0;
        while !dense() {
            tries += 1;
            assert!(tries < 1_000, "quick reads never made a stream dense");
            list.pause();
            list.pause();
            list.emit(delta("x"));
        }
        list.emit_delta(&Arc::from(""), true, "z");
        assert!(dense(), "of either kind");
        list.emit(answer());
        assert!(!dense(), "other events are not a stream");
        for _ in 0..3 {
            std::thread::sleep(2 * NAP);
            list.pause();
            list.emit(delta("w"));
            assert!(!dense(), "deltas of reads far apart are not");
        }
        list.close();
    }

    /// `rouse` wakes only a lingering listener, which then takes the flag
    /// and watches its queue; the flush that ends the turn clears a rouse
    /// that came too late, so the next turn's lingering is not cut short.
    #[test]
    fn rouse_wakes_a_lingering_listener_once_per_turn() {
        if cores() < 2 {
            return; // one core: nothing is roused (see the next test)
        }
        let rec = InMemoryEventList::new();
        let mut list = ListenerList::new();
        list.add(rec.clone());
        let signals = Arc::clone(&list.slots[0].signals);
        let flag = |f: &AtomicBool| f.load(Ordering::SeqCst);
        // Not lingering (no turn ended yet): nothing to wake.
        list.rouse();
        assert!(!flag(&signals.roused));
        list.flush();
        assert!(flag(&signals.lingering), "a flush starts the lingering");
        list.emit(delta("a"));
        list.rouse();
        // Roused, unless the lingering already timed out (a slow machine):
        // the flag is set, or the thread took it and stopped lingering.
        assert!(flag(&signals.roused) || !flag(&signals.lingering));
        // The thread takes the rouse and stops lingering at once, well
        // within `LINGER`; it handles what came meanwhile.
        eventually(|| !flag(&signals.roused) && !flag(&signals.lingering));
        assert!(!flag(&signals.roused) && !flag(&signals.lingering));
        eventually(|| rec.len() == 1);
        list.emit(delta("b"));
        eventually(|| rec.len() == 2);
        // A rouse left unanswered when the turn ends does not carry over.
        signals.roused.store(true, Ordering::SeqCst);
        list.flush();
        assert!(!flag(&signals.roused));
        assert!(flag(&signals.lingering));
        assert_eq!(delta_texts(&rec), ["a", "b"]);
    }

    /// As many listeners as cores: none is roused, so that no spinning
    /// thread takes a core from the agent it waits for.
    #[test]
    fn rouse_spares_the_cores_when_listeners_are_as_many() {
        let mut list = ListenerList::new();
        for _ in 0..cores() {
            list.add(|_: &Event| {});
        }
        list.flush();
        assert!(
            list.slots
                .iter()
                .all(|s| s.signals.lingering.load(Ordering::SeqCst))
        );
        list.rouse();
        assert!(
            list.slots
                .iter()
                .all(|s| !s.signals.roused.load(Ordering::SeqCst))
        );
    }

    #[test]
    fn an_event_after_a_flush_arrives_without_another_flush() {
        let rec = InMemoryEventList::new();
        let mut list = ListenerList::new();
        list.add(rec.clone());
        list.emit(delta("a"));
        list.flush();
        // The listener lingers now; the next event must still reach it
        // when nothing else happens (a turn whose answer takes seconds).
        list.emit(delta("b"));
        eventually(|| rec.events().len() >= 2);
        assert_eq!(delta_texts(&rec), ["a", "b"]);
    }

    /// `n` events other than deltas (which never join), numbered.
    fn turns(n: usize) -> impl Iterator<Item = Event> {
        (0..n).map(|i| Event::UserTurn {
            agent: "".into(),
            content: format!("{i}"),
            mid_loop: false,
        })
    }

    /// The contents of the user turns `rec` saw, in order.
    fn turn_texts(rec: &InMemoryEventList) -> Vec<String> {
        picked(rec, |e| match e {
            Event::UserTurn { content, .. } => Some(content),
            _ => None,
        })
    }

    #[test]
    fn a_lingering_listener_takes_a_burst_beyond_its_queue_in_order() {
        let rec = InMemoryEventList::new();
        let mut list = ListenerList::new();
        list.add(rec.clone());
        list.flush();
        // The queue and the backlog fill while the listener lingers, and it
        // must be woken to make room.
        let n = 4 * (QUEUE + BACKLOG);
        for e in turns(n) {
            list.emit(e);
        }
        list.flush();
        let want: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        assert_eq!(turn_texts(&rec), want);
    }

    /// Emit a delta of `text` back to back with the delta before.
    fn emit_more(list: &ListenerList, text: &str) {
        list.emit_delta(&Arc::from(""), false, text);
    }

    /// A delta waits, joined by the next ones, as soon as the listener has
    /// one event waiting, so a listener that is behind (or takes a stream
    /// in batches) gets one delta per batch, and the agent builds no event
    /// for the deltas it joins.
    #[test]
    fn a_busy_listener_gets_joined_deltas_and_the_agent_builds_no_event_for_them() {
        let (list, release, rec) = stalled();
        list.emit(delta("0,"));
        // The listener holds the first delta: its queue is empty again.
        eventually(|| list.slots[0].tx.is_empty());
        let n = 20 * QUEUE;
        for i in 1..n {
            emit_more(&list, &format!("{i},"));
        }
        {
            let st = list.state.lock();
            assert_eq!(list.slots[0].tx.len(), DELTA_ROOM);
            assert_eq!(st.backlogs[0].len(), 1);
            // Events built: "0,", "1," (queued) and "2," (which the rest
            // joined).
            assert_eq!(st.sent.len(), 3);
        }
        drop(release);
        list.flush();
        let got = delta_texts(&rec);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_in_order(&got, n);
    }

    /// A stalled listener holding delta "0,", one more queued ("1,"), and
    /// "2," to "9," joined in the backlog.
    fn stalled_with_joined() -> (
        ListenerList,
        crossbeam_channel::Sender<()>,
        InMemoryEventList,
    ) {
        let (list, release, rec) = stalled();
        list.emit(delta("0,"));
        eventually(|| list.slots[0].tx.is_empty());
        for i in 1..10 {
            emit_more(&list, &format!("{i},"));
        }
        (list, release, rec)
    }

    /// A listener that emptied its queue gets what waits for it at the next
    /// emit, not only at the flush: joining never holds text back from an
    /// idle listener.
    #[test]
    fn a_listener_that_emptied_its_queue_gets_the_joined_delta_at_the_next_emit() {
        let (list, release, rec) = stalled_with_joined();
        drop(release);
        eventually(|| list.slots[0].tx.is_empty());
        // Moves the joined delta first; waits itself (the queue is busy).
        emit_more(&list, "10,");
        let want: String = (0..10).map(|i| i.to_string() + ",").collect();
        eventually(|| delta_texts(&rec).concat() == want);
        assert_eq!(delta_texts(&rec).concat(), want);
        // An event of another kind moves the backlog and is queued itself.
        list.emit(Event::Assistant {
            agent: "".into(),
            content: "end".into(),
        });
        eventually(|| rec.len() == 5);
        assert_in_order(&delta_texts(&rec), 11);
        assert_eq!(rec.len(), 5);
        list.flush();
    }

    /// `pause` (the agent is about to wait) hands the joined delta over at
    /// once: a stream that stalls after a burst shows the whole burst.
    #[test]
    fn pause_hands_joined_deltas_over_before_the_agent_waits() {
        let (list, release, rec) = stalled_with_joined();
        assert_eq!(list.state.lock().backlogs[0].len(), 1);
        list.pause();
        assert!(list.state.lock().backlogs[0].is_empty());
        drop(release);
        let want: String = (0..10).map(|i| i.to_string() + ",").collect();
        eventually(|| delta_texts(&rec).concat() == want);
        assert_eq!(delta_texts(&rec).concat(), want);
        list.flush();
    }

    /// A listener a whole queue behind when the agent is about to wait: the
    /// agent waits for room instead of leaving events in the backlog, where
    /// nothing would move them while the listener idles.
    #[test]
    fn pause_waits_for_room_rather_than_leave_events_behind() {
        let (list, release, rec) = stalled();
        let n = QUEUE + 10;
        for e in turns(n) {
            list.emit(e);
        }
        assert!(!list.state.lock().backlogs[0].is_empty());
        let list = Arc::new(list);
        let paused = {
            let list = Arc::clone(&list);
            std::thread::spawn(move || list.pause())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!paused.is_finished(), "pause left events behind");
        drop(release);
        paused.join().unwrap();
        assert!(list.state.lock().backlogs[0].is_empty());
        let want: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        eventually(|| turn_texts(&rec) == want);
        assert_eq!(turn_texts(&rec), want);
        list.flush();
    }

    #[test]
    fn a_stalled_listener_makes_other_events_wait_in_order() {
        let (list, release, rec) = stalled();
        let list = Arc::new(list);
        let emitted = Arc::new(AtomicUsize::new(0));
        let n = QUEUE + BACKLOG + 20;
        let producer = {
            let (list, emitted) = (Arc::clone(&list), Arc::clone(&emitted));
            std::thread::spawn(move || {
                for e in turns(n) {
                    list.emit(e);
                    emitted.fetch_add(1, Ordering::SeqCst);
                }
                list.flush();
            })
        };
        // The emitter fills the queue (one event is held by the listener)
        // and the backlog, then waits for room.
        let bound = QUEUE + 1 + BACKLOG;
        eventually(|| emitted.load(Ordering::SeqCst) >= bound);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(emitted.load(Ordering::SeqCst), bound);
        drop(release);
        producer.join().unwrap();
        let want: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        assert_eq!(turn_texts(&rec), want);
    }

    #[test]
    fn deltas_merge_only_with_their_own_kind_and_agent() {
        let (list, release, rec) = stalled();
        list.emit(delta("0,"));
        // The listener holds the first delta: the queue is empty again.
        eventually(|| list.slots[0].tx.is_empty());
        list.emit(delta("1,"));
        // Now in the backlog: a, a, b (other agent), b, thinking, a.
        let a = |s: &str| delta(s);
        let b = |s: &str| Event::AssistantDelta {
            agent: "child".into(),
            content: s.into(),
        };
        let t = |s: &str| Event::ThinkingDelta {
            agent: "".into(),
            content: s.into(),
        };
        for e in [a("x"), a("y"), b("p"), b("q"), t("t"), a("z")] {
            list.emit(e);
        }
        list.emit_delta(&Arc::from("child"), false, "r");
        list.emit_delta(&Arc::from("child"), true, "s");
        list.emit_delta(&Arc::from("child"), true, "u");
        drop(release);
        list.flush();
        let s = |s: &str| Event::ThinkingDelta {
            agent: "child".into(),
            content: s.into(),
        };
        assert_eq!(
            rec.events(),
            vec![
                a("0,"),
                a("1,"),
                a("xy"),
                b("pq"),
                t("t"),
                a("z"),
                b("r"),
                s("su")
            ]
        );
    }

    /// A listener that records, in order, the events it saw and its close.
    struct Closing(Arc<Mutex<Vec<String>>>);

    impl Listener for Closing {
        fn on_event(&mut self, e: &Event) {
            self.0.lock().push(e.kind().to_string());
        }
        fn close(&mut self) {
            self.0.lock().push("close".into());
        }
    }

    #[test]
    fn close_returns_after_each_listener_handled_its_events_and_closed() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut list = ListenerList::new();
        list.add(Closing(Arc::clone(&log)));
        // A shared listener is the parent's to stop: the child's close
        // leaves it running.
        let child = list.for_sub_agent("c");
        child.close();
        list.emit(delta("a"));
        list.emit(delta("b"));
        list.close();
        assert_eq!(*log.lock(), ["assistant_delta", "assistant_delta", "close"]);
        // Later events are dropped, and closing again changes nothing.
        list.emit(delta("c"));
        list.close();
        assert_eq!(log.lock().len(), 3);
    }

    #[test]
    fn flush_returns_when_a_shared_listener_was_stopped() {
        let rec = InMemoryEventList::new();
        let mut parent = ListenerList::new();
        parent.add(rec.clone());
        let child = parent.for_sub_agent("c");
        assert_eq!(child.len(), 1);
        parent.close();
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            for i in 0..3 * QUEUE {
                child.emit(delta(&format!("{i},")));
            }
            child.flush();
            done_tx.send(()).unwrap();
        });
        assert!(
            done_rx.recv_timeout(Duration::from_secs(10)).is_ok(),
            "flush waited for a stopped listener"
        );
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
