//! `ListenerList`: one std thread and one bounded crossbeam channel per
//! listener, fed batches of events where the agent waits anyway.
//!
//! # Batches
//!
//! What the agent emits collects in one pending batch, shared by the
//! list's listeners, each delta appended to a delta of its kind and agent
//! right before it. The batch goes out, one channel message per listener,
//! at each `hand_over`, where the agent is about to wait (before a request,
//! before each read of a stream, before a tool runs and its approval,
//! before a sub-agent runs), and at the flush that ends a turn, in one
//! message with the flush request; the run's opening waits for the first
//! response (below). A quick turn is one message per listener (the
//! `UserTurn`, the answer's events and the flush), waking its thread at
//! most once, as the plainest hand-off to a thread would; a stream is one
//! message per read that brought text and could be followed by a wait (a
//! read that filled the client's whole buffer cannot: what follows it has
//! arrived already, see `protocol::client`).
//!
//! A batch is one `Arc<Vec<Event>>` shared by the listeners. The list
//! keeps the last one: when every listener dropped its handle by the next
//! send, that allocation carries the next batch, and the spent events are
//! dropped on the agent's thread, not on a listener's (freeing into
//! another thread's allocator arena is the costlier path). So a quick turn
//! allocates no batch, and the list holds at most one spent batch.
//!
//! Events wait only while the agent works: from `hold` (a request or a
//! tool returned) or `open` (a run starts) to the next hand-over.
//! Otherwise (the agent waits, or no run is going on) an event goes out as
//! it is emitted, so what a tool, an approver or another thread emits
//! meanwhile is not kept until the wait ends. Deltas always wait: they
//! come from the agent's reads, each followed by a hand-over, or by a
//! `hold` and the flush.
//!
//! # The opening
//!
//! What a run emits before its first request (the `UserTurn` of the
//! host's own message, what extensions emit for it) is its opening, and
//! the hand-over before that request (`hand_over_for_request`) keeps it:
//! it goes out when the response is in (at the first read of a stream, or
//! with the answer's events when the answer is read whole), or at any
//! other hand-over first (a retry's back-off, a sub-agent, the end of the
//! run). So it is late by at most the first request's round trip, never
//! past a wait of another kind, and a quick turn wakes a listener once,
//! not twice: the wake-up before the request came while the server needed
//! the cores, and cost about 2,000 of a barrier listener's 8,500
//! instructions a turn (`BENCHMARKS.md`, issue 42, session 12). What other
//! threads emit during that first request waits with the opening. Any
//! later request hands over first: a tool's result is shown while the
//! model answers.
//!
//! Nothing reads a clock: batches go out at points of the agent's control
//! flow, a listener's thread parks as soon as its channel is empty (see
//! `Bell`), and a flush blocks until its countdown reaches zero. (The
//! design before napped, lingered, spun and counted cores to spare
//! wake-ups, and much of its behaviour depended on timing.)
//!
//! # Backpressure
//!
//! A listener's channel holds `QUEUE` batches, and a held batch that
//! reaches `BATCH` events, or whose last delta reaches `JOINED` bytes of
//! joined text, goes out at once. A hand-over offers the batch to
//! every listener with room first, then waits for room at each listener a
//! whole channel behind: the agent waits for a slow listener, and the
//! others wait only as long as the agent. A listener's memory is so
//! bounded by `QUEUE` batches of `BATCH` events, plus joined delta text,
//! which the agent holds anyway.
//!
//! # The flush
//!
//! `flush` sends each listener the batch and a request to run
//! `Listener::flush`. Each `Delivery::Barrier` listener's request carries
//! a ticket of one countdown, and `flush` waits until the countdown ends;
//! a `Delivery::HandOff` listener's carries none, so an agent whose
//! listeners all hand off returns without waiting (`flush_all`, behind
//! `Agent::flush_listeners`, gives every listener a ticket). A ticket
//! counts when dropped: after `Listener::flush` ran, or undelivered when
//! the thread has stopped, so a flush never waits for a listener that is
//! gone. The last ticket unparks the flushing thread.
//!
//! The wait has the shape of a crossbeam receiver's: a short spin, a few
//! `yield_now`, then `park` until the last ticket unparks it. It is no
//! channel: the countdown is all a flush needs, and its one allocation is
//! kept for the next flush once every ticket is gone (a channel per flush
//! cost two allocations and the waker's registration; measured in
//! `BENCHMARKS.md`, issue 42, session 12).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::thread::{JoinHandle, Thread};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded};
use parking_lot::Mutex;

use super::{Delivery, SubAgentListener};
use crate::{Event, Listener};

/// Batches a listener's channel holds; see the module docs on backpressure.
const QUEUE: usize = 8;

/// Events a held batch reaches before it goes out; see the module docs on
/// backpressure.
const BATCH: usize = 32;

/// Bytes of joined delta text a held batch reaches before it goes out; see
/// the module docs on backpressure.
const JOINED: usize = 64 * 1024;

enum Msg {
    /// Events in emission order, then what ends the batch.
    Batch(Arc<Vec<Event>>, Tail),
    /// Boxed: the rare message keeps every channel slot small.
    Derive(Box<(String, Sender<SubAgentListener>)>),
    Stop,
}

/// What a listener's thread does after a batch's events.
enum Tail {
    /// Nothing: more of the turn may follow.
    Open,
    /// Run `Listener::flush`; nobody waits for it (a hand-off listener at
    /// the end of a turn, see the module docs on the flush).
    Flush,
    /// Run `Listener::flush`, then count down the flush that waits.
    Wait(Ticket),
}

/// A flush's countdown of listeners not done yet, and the thread the last
/// one unparks.
struct Gate {
    left: AtomicUsize,
    waiter: Thread,
}

impl Gate {
    /// A gate for `count` tickets, waited on by this thread: `kept` when
    /// no ticket of its last flush is left (see the module docs on the
    /// flush), else a new one.
    fn reuse(kept: Option<Arc<Gate>>, count: usize) -> Arc<Gate> {
        if let Some(mut gate) = kept
            && let Some(g) = Arc::get_mut(&mut gate)
        {
            *g.left.get_mut() = count;
            g.waiter = std::thread::current();
            return gate;
        }
        Arc::new(Gate {
            left: AtomicUsize::new(count),
            waiter: std::thread::current(),
        })
    }

    /// Block until every ticket counted: spin, yield, then park (see the
    /// module docs on the flush). A stray unpark (another flush's last
    /// ticket, a crossbeam wake-up) only costs one more look.
    fn wait(&self) {
        let mut step = 0u32;
        while self.left.load(Ordering::Acquire) != 0 {
            if step <= SPIN_STEPS {
                for _ in 0..1u32 << step {
                    std::hint::spin_loop();
                }
            } else if step <= YIELD_STEPS {
                std::thread::yield_now();
            } else {
                std::thread::park();
            }
            step = step.saturating_add(1);
        }
    }
}

/// A flush's back-off, crossbeam's shape: spin `2^step` times for steps up
/// to this one (127 spins in all)...
const SPIN_STEPS: u32 = 6;

/// ...then yield for steps up to this one (four `yield_now`), then park.
const YIELD_STEPS: u32 = 10;

/// A flush's gate and which listeners get a ticket of it.
type Pick<'a> = (&'a Arc<Gate>, &'a dyn Fn(&Slot) -> bool);

/// One listener's place in a flush's countdown: it counts when dropped,
/// whether the listener's thread handled it or the message was dropped
/// undelivered (see the module docs on the flush).
struct Ticket(Arc<Gate>);

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.0.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.waiter.unpark();
        }
    }
}

/// One listener's thread. Shared (`Arc`) between the list that owns it and
/// the lists derived for sub-agents whose listener chose `Share`. The owner
/// stops and joins it on close; the thread also ends when every holder is
/// gone.
struct Slot {
    name: String,
    /// The listener's [`Delivery`], read once when it was added.
    delivery: Delivery,
    tx: Sender<Msg>,
    /// How the thread is woken; see [`Bell`].
    bell: Arc<Bell>,
    /// The listener's thread, to unpark.
    waker: Thread,
    /// Whether `Stop` is not sent yet. Every message is sent under this
    /// lock, so each is either queued before the `Stop`, and handled, or
    /// not sent at all (which answers a flush ticket).
    open: Mutex<bool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Messages sent, for the tests that count them.
    #[cfg(test)]
    sent: AtomicUsize,
}

impl Slot {
    fn spawn(listener: Box<dyn Listener>) -> Arc<Slot> {
        let name = listener.name();
        let delivery = listener.delivery();
        let (tx, rx) = bounded(QUEUE);
        let bell = Arc::new(Bell::default());
        let rung = Arc::clone(&bell);
        let thread = std::thread::Builder::new()
            .name(format!("pikuri-listener-{name}"))
            .spawn(move || run(listener, &rx, &rung))
            .expect("failed to spawn a listener thread");
        Arc::new(Slot {
            name,
            delivery,
            tx,
            bell,
            waker: thread.thread().clone(),
            open: Mutex::new(true),
            thread: Mutex::new(Some(thread)),
            #[cfg(test)]
            sent: AtomicUsize::new(0),
        })
    }

    /// Queue `msg`: at once if there is room, else after waiting for room
    /// if `wait`, else give it back. Whether it was queued: a message for a
    /// thread that stopped is dropped.
    fn send(&self, msg: Msg, wait: bool) -> Result<bool, Msg> {
        let open = self.open.lock();
        if !*open {
            return Ok(false);
        }
        let sent = match self.tx.try_send(msg) {
            Ok(()) => true,
            Err(TrySendError::Full(msg)) if !wait => return Err(msg),
            Err(TrySendError::Full(msg)) => self.tx.send(msg).is_ok(),
            Err(TrySendError::Disconnected(_)) => false,
        };
        if sent {
            self.wake();
        }
        #[cfg(test)]
        self.sent.fetch_add(usize::from(sent), Ordering::Relaxed);
        Ok(sent)
    }

    /// Stop the thread after it handled what was queued, and join it.
    fn stop(&self) {
        {
            let mut open = self.open.lock();
            if *open {
                *open = false;
                let _ = self.tx.send(Msg::Stop);
                self.wake();
            }
        }
        // A list dropped on its own listener's thread cannot join it.
        if let Some(handle) = self.thread.lock().take()
            && handle.thread().id() != std::thread::current().id()
        {
            let _ = handle.join();
        }
    }

    /// Unpark the thread if it sleeps (see [`Bell`]): after a message was
    /// queued.
    fn wake(&self) {
        // Pairs with the fence in `next`: either the thread's second look
        // finds the message, or this sees that it went to sleep.
        fence(Ordering::SeqCst);
        if self.bell.asleep.swap(false, Ordering::SeqCst) {
            self.waker.unpark();
        }
    }
}

impl Drop for Slot {
    /// The last holder is gone, so nothing more will be queued: the thread
    /// handles what is and ends (the sender is dropped only after this
    /// runs, so the thread cannot learn it from the channel in time).
    fn drop(&mut self) {
        self.bell.gone.store(true, Ordering::SeqCst);
        self.waker.unpark();
    }
}

/// How a listener's thread waits for its next message: it parks at once
/// when its channel is empty, with no spin and no `yield_now` first (a
/// crossbeam `recv` spins, then yields four times: with several listener
/// threads on few cores, each yield hands the core to another of them, a
/// context switch that does nothing; `BENCHMARKS.md`, issue 42, session
/// 15), and the sender unparks it.
#[derive(Default)]
struct Bell {
    /// The thread parks, or is about to, with nothing queued.
    asleep: AtomicBool,
    /// Every holder of the slot is gone.
    gone: AtomicBool,
}

/// The thread's next message, parked while there is none; `None` once the
/// channel is disconnected or every holder gone and nothing is queued.
fn next(rx: &Receiver<Msg>, bell: &Bell) -> Option<Msg> {
    loop {
        match rx.try_recv() {
            Ok(msg) => return Some(msg),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        bell.asleep.store(true, Ordering::SeqCst);
        // Pairs with the fence in `Slot::wake`.
        fence(Ordering::SeqCst);
        match rx.try_recv() {
            Ok(msg) => {
                bell.asleep.store(false, Ordering::Relaxed);
                return Some(msg);
            }
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        if bell.gone.load(Ordering::SeqCst) {
            return None;
        }
        // A stray unpark (or one for a message already taken) costs one
        // more look.
        std::thread::park();
    }
}

/// A listener's thread: handle messages in order until `Stop`, or until
/// every sender is gone.
fn run(mut listener: Box<dyn Listener>, rx: &Receiver<Msg>, bell: &Bell) {
    let name = listener.name();
    while let Some(msg) = next(rx, bell) {
        match msg {
            Msg::Batch(events, tail) => {
                for event in events.iter() {
                    super::guarded(&name, "on_event", || listener.on_event(event));
                }
                // Before the flush: the agent may reuse the batch once a
                // flush that waited returns.
                drop(events);
                match tail {
                    Tail::Open => {}
                    Tail::Flush => {
                        super::guarded(&name, "flush", || listener.flush());
                    }
                    Tail::Wait(ticket) => {
                        super::guarded(&name, "flush", || listener.flush());
                        // Last: the flush returns once every ticket counted.
                        drop(ticket);
                    }
                }
            }
            Msg::Derive(derive) => {
                let (id, reply) = *derive;
                let derived =
                    super::guarded(&name, "for_sub_agent", || listener.for_sub_agent(&id))
                        .unwrap_or(SubAgentListener::Skip);
                let _ = reply.send(derived);
            }
            Msg::Stop => break,
        }
    }
    super::guarded(&name, "close", || listener.close());
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
    /// What was emitted and not handed over yet; see the module docs.
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    /// In emission order, deltas joined.
    events: Vec<Event>,
    /// Whether events wait for the next hand-over (see the module docs).
    held: bool,
    /// Whether what waits is a run's opening, kept past its first request
    /// (see the module docs).
    opening: bool,
    /// The batch sent last, kept to be reused (see the module docs on
    /// batches).
    last: Option<Arc<Vec<Event>>>,
    /// The last flush's gate, kept to be reused (see the module docs on
    /// the flush).
    gate: Option<Arc<Gate>>,
}

impl Pending {
    /// The pending events as a batch to send. When every listener is done
    /// with the batch sent last, its allocation is reused and its events
    /// are dropped here, on the agent's thread (see the module docs on
    /// batches).
    fn take_batch(&mut self) -> Arc<Vec<Event>> {
        match self.last.as_mut().and_then(Arc::get_mut) {
            Some(spent) => {
                spent.clear();
                std::mem::swap(spent, &mut self.events);
            }
            None => self.last = Some(Arc::new(std::mem::take(&mut self.events))),
        }
        Arc::clone(self.last.as_ref().expect("just set"))
    }

    /// Whether the held batch must go out now (see the module docs on
    /// backpressure): `BATCH` events, or a last delta of `JOINED` bytes (a
    /// stream read in full buffers is handed over late, `protocol::client`).
    fn is_full(&self) -> bool {
        self.events.len() >= BATCH || self.events.last().is_some_and(|e| e.delta_len() >= JOINED)
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
        self.push(Slot::spawn(super::into_boxed(listener)), true);
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
    /// The list for a sub-agent with id `id`: each listener decides (on its own
    /// thread) whether it is shared, replaced or skipped.
    pub fn for_sub_agent(&self, id: &str) -> ListenerList {
        // The parent's events come first; the parent waits for the child.
        self.hand_over();
        let replies: Vec<_> = self
            .slots
            .iter()
            .map(|slot| {
                let (tx, rx) = bounded(1);
                let sent = slot.send(Msg::Derive(Box::new((id.to_string(), tx))), true);
                (slot, (sent.ok() == Some(true)).then_some(rx))
            })
            .collect();
        let mut list = ListenerList::new();
        for (slot, rx) in replies {
            match rx.and_then(|rx| rx.recv().ok()) {
                Some(SubAgentListener::Share) => list.push(Arc::clone(slot), false),
                Some(SubAgentListener::Replace(l)) => list.add(l),
                Some(SubAgentListener::Skip) | None => {}
            }
        }
        list
    }

    /// Deliver `event` to every listener: at the next hand-over while the
    /// agent holds events, else now.
    pub(crate) fn emit(&self, event: Event) {
        if self.slots.is_empty() {
            return;
        }
        let mut p = self.pending.lock();
        if let Some(last) = p.events.last_mut()
            && let Some(text) = last.continued_by(&event)
        {
            last.append_delta(text);
        } else {
            p.events.push(event);
        }
        if !p.held || p.is_full() {
            self.send(&mut p, None, false);
        }
    }

    /// Deliver a delta of `agent` ([`Event::ThinkingDelta`] if `thinking`,
    /// else [`Event::AssistantDelta`]) with `text` to every listener, at the
    /// next hand-over, appended to the delta before it when that is one of
    /// its kind from its agent (no event is built then).
    pub(crate) fn emit_delta(&self, agent: &Arc<str>, thinking: bool, text: &str) {
        if self.slots.is_empty() {
            return;
        }
        let mut p = self.pending.lock();
        if let Some(last) = p.events.last_mut()
            && last.is_delta_of(agent, thinking)
        {
            last.append_delta(text);
            if p.is_full() {
                self.send(&mut p, None, false);
            }
            return;
        }
        let (agent, content) = (Arc::clone(agent), text.to_string());
        p.events.push(if thinking {
            Event::ThinkingDelta { agent, content }
        } else {
            Event::AssistantDelta { agent, content }
        });
        if p.is_full() {
            self.send(&mut p, None, false);
        }
    }

    /// The agent works: what it emits waits for its next hand-over (see the
    /// module docs).
    pub(crate) fn hold(&self) {
        if !self.slots.is_empty() {
            let mut p = self.pending.lock();
            p.held = true;
            p.opening = false;
        }
    }

    /// A run starts: what it emits waits, like [`hold`](Self::hold), and
    /// until its first request is answered (see the module docs on the
    /// opening).
    pub(crate) fn open(&self) {
        if !self.slots.is_empty() {
            let mut p = self.pending.lock();
            p.held = true;
            p.opening = true;
        }
    }

    /// The agent is about to wait (for the network, a tool, an approval, a
    /// sub-agent): hand over what waits, and deliver what is emitted
    /// meanwhile as it comes (see the module docs).
    pub(crate) fn hand_over(&self) {
        if self.slots.is_empty() {
            return;
        }
        let mut p = self.pending.lock();
        p.held = false;
        p.opening = false;
        if !p.events.is_empty() {
            self.send(&mut p, None, false);
        }
    }

    /// The agent sends a request and waits for its response:
    /// [`hand_over`](Self::hand_over), but for a run's opening, which waits
    /// for the response (see the module docs on the opening).
    pub(crate) fn hand_over_for_request(&self) {
        if self.slots.is_empty() || self.pending.lock().opening {
            return;
        }
        self.hand_over();
    }

    /// The end of a turn: hand every listener what was emitted so far with
    /// a flush, and wait until each [`Delivery::Barrier`] listener handled
    /// it and flushed; the [`Delivery::HandOff`] ones are not waited for.
    pub(crate) fn flush(&self) {
        self.flush_for(false);
    }

    /// Like [`flush`](ListenerList::flush), waiting for every listener,
    /// hand-off ones too.
    pub(crate) fn flush_all(&self) {
        self.flush_for(true);
    }

    fn flush_for(&self, all: bool) {
        if self.slots.is_empty() {
            return;
        }
        let waited = |slot: &Slot| all || slot.delivery == Delivery::Barrier;
        let count = self.slots.iter().filter(|s| waited(s)).count();
        let gate = {
            let mut p = self.pending.lock();
            p.held = false;
            p.opening = false;
            let gate = (count > 0).then(|| Gate::reuse(p.gate.take(), count));
            let picked = gate
                .as_ref()
                .map(|g| (g, &waited as &dyn Fn(&Slot) -> bool));
            self.send(&mut p, picked, true);
            gate
        };
        if let Some(gate) = gate {
            gate.wait();
            // Kept for the next flush; a ticket may still hold it (its
            // count done, its unpark under way): then the next makes its own.
            self.pending.lock().gate = Some(gate);
        }
    }

    /// Send the pending batch to every listener, in order after what was
    /// sent before; see the module docs on backpressure. With `flush`, the
    /// batch ends with a flush, and each listener `gate` picks gets a
    /// ticket of it. Called under the `pending` lock, which keeps
    /// concurrent emitters' batches in one order for every listener.
    fn send(&self, p: &mut Pending, gate: Option<Pick<'_>>, flush: bool) {
        let batch = p.take_batch();
        let msg = |slot: &Slot| {
            let tail = match gate {
                Some((gate, waited)) if waited(slot) => Tail::Wait(Ticket(Arc::clone(gate))),
                _ if flush => Tail::Flush,
                _ => Tail::Open,
            };
            Msg::Batch(Arc::clone(&batch), tail)
        };
        // Every listener with room first: one that is behind holds up the
        // others only while the agent waits for it.
        let mut behind = Vec::new();
        for slot in &self.slots {
            if let Err(msg) = slot.send(msg(slot), false) {
                behind.push((slot, msg));
            }
        }
        for (slot, msg) in behind {
            let _ = slot.send(msg, true);
        }
    }

    /// Stop and join the threads this list started, after they handled what
    /// was emitted. Later events to them are dropped. Idempotent.
    pub(crate) fn close(&self) {
        self.hand_over();
        for (slot, owned) in self.slots.iter().zip(&self.owned) {
            if *owned {
                slot.stop();
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
    use std::time::{Duration, Instant};

    use super::*;
    use crate::listeners::InMemoryEventList;

    fn delta(s: &str) -> Event {
        Event::AssistantDelta {
            agent: "".into(),
            content: s.into(),
        }
    }

    /// An event other than a delta (which never joins), numbered `i`.
    fn turn(i: usize) -> Event {
        Event::UserTurn {
            agent: "".into(),
            content: i.to_string(),
            mid_loop: false,
        }
    }

    /// The texts of the answer deltas and user turns `rec` saw, in order.
    fn texts(rec: &InMemoryEventList) -> Vec<String> {
        let text = |e| match e {
            Event::AssistantDelta { content, .. } | Event::UserTurn { content, .. } => content,
            _ => String::new(),
        };
        rec.events().into_iter().map(text).collect()
    }

    fn numbers(n: usize) -> Vec<String> {
        (0..n).map(|i| i.to_string()).collect()
    }

    /// A list of one recorder, and the recorder.
    fn recorded() -> (ListenerList, InMemoryEventList) {
        let rec = InMemoryEventList::new();
        let mut list = ListenerList::new();
        list.add(rec.clone());
        (list, rec)
    }

    /// A list of one listener held inside its first `on_event` until the
    /// returned sender is dropped, and what that listener saw.
    fn stalled() -> (ListenerList, Sender<()>, InMemoryEventList) {
        let (release, held) = bounded::<()>(0);
        let rec = InMemoryEventList::new();
        let mut seen = rec.clone();
        let mut first = true;
        let mut list = ListenerList::new();
        list.add(move |e: &Event| {
            if std::mem::take(&mut first) {
                let _ = held.recv();
            }
            seen.on_event(e);
        });
        (list, release, rec)
    }

    /// Wait until `done` holds, for up to 60 s: a bound against hangs, not
    /// a timing claim. Past it the test fails here, saying so, rather than
    /// at the caller's next assertion for a reason its message does not
    /// give.
    #[track_caller]
    fn eventually(mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "not done within 60 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn sent(list: &ListenerList) -> usize {
        list.slots[0].sent.load(Ordering::Relaxed)
    }

    #[test]
    fn order_is_kept_and_flush_waits() {
        let (mut list, rec) = recorded();
        let slow = InMemoryEventList::new();
        let mut seen = slow.clone();
        list.add(move |e: &Event| {
            std::thread::sleep(Duration::from_millis(1));
            seen.on_event(e);
        });
        list.emit(turn(0));
        list.hold();
        for i in 1..50 {
            list.emit(turn(i));
        }
        list.flush();
        // Both listeners handled everything before `flush` returned.
        assert_eq!(texts(&rec), numbers(50));
        assert_eq!(texts(&slow), numbers(50));
    }

    /// A quick turn (a request, a plain answer) is one message per
    /// listener: the `UserTurn` waits for the answer (the run's opening),
    /// and goes with the answer's events and the flush. It wakes the
    /// listener's thread at most once.
    #[test]
    fn a_quick_turn_is_one_message_per_listener() {
        use crate::testing::{FakeServer, Reply};
        let server = FakeServer::start();
        let (mut list, rec) = recorded();
        list.add(|_: &Event| {});
        let slots: Vec<_> = list.slots.iter().map(Arc::clone).collect();
        let sent = || -> Vec<usize> {
            slots
                .iter()
                .map(|s| s.sent.load(Ordering::Relaxed))
                .collect()
        };
        let mut agent = crate::Agent::builder(server.transport())
            .listener_list(list)
            .build()
            .unwrap();
        for turn in 0..3 {
            server.push(Reply::text("Hello!"));
            let before = sent();
            agent.run_loop("Hi").unwrap();
            let after: Vec<_> = sent().iter().zip(&before).map(|(a, b)| a - b).collect();
            assert_eq!(after, [1, 1], "turn {turn}");
        }
        let kinds = rec.kinds();
        assert_eq!(
            kinds[kinds.len() - 4..],
            ["user_turn", "assistant", "tokens", "stopped"]
        );
    }

    /// Held events go out as one message at the hand-over, even to a
    /// listener that is busy; deltas of one kind and agent are joined on
    /// the way, and the agent builds no event for a joined delta.
    #[test]
    fn held_events_go_out_at_the_hand_over_with_deltas_joined() {
        let (list, release, rec) = stalled();
        list.emit(turn(0));
        list.hold();
        let n = 20 * BATCH;
        for i in 0..n {
            list.emit_delta(&Arc::from(""), false, &format!("{i},"));
        }
        assert_eq!(
            list.pending.lock().events.len(),
            1,
            "one event for {n} deltas"
        );
        list.emit(turn(1));
        assert_eq!(sent(&list), 1, "nothing goes out while held");
        list.hand_over();
        assert_eq!(sent(&list), 2, "one batch");
        // Not held any more (the agent waits): an event goes out at once.
        list.emit(turn(2));
        assert_eq!(sent(&list), 3);
        drop(release);
        let joined: String = (0..n).map(|i| i.to_string() + ",").collect();
        eventually(|| rec.len() == 4);
        assert_eq!(texts(&rec), ["0", &joined, "1", "2"]);
        list.flush();
    }

    /// A held batch that reaches `BATCH` events goes out without waiting
    /// for a hand-over: what waits with the agent is bounded.
    #[test]
    fn a_full_held_batch_goes_out_at_once() {
        let (list, rec) = recorded();
        list.hold();
        for i in 0..BATCH - 1 {
            list.emit(turn(i));
        }
        assert_eq!(sent(&list), 0);
        list.emit(turn(BATCH - 1));
        assert_eq!(sent(&list), 1);
        assert!(list.pending.lock().events.is_empty());
        // Deltas count too, once they stop joining.
        for i in 0..BATCH {
            list.emit_delta(&Arc::from(""), i % 2 == 0, "x");
        }
        assert_eq!(sent(&list), 2);
        list.flush();
        assert_eq!(rec.len(), 2 * BATCH);
    }

    #[test]
    fn held_delta_text_goes_out_when_it_reaches_its_bound() {
        let (list, rec) = recorded();
        list.hold();
        let agent: Arc<str> = Arc::from("");
        let piece = "y".repeat(1024);
        for _ in 0..JOINED / 1024 - 1 {
            list.emit_delta(&agent, false, &piece);
        }
        assert_eq!(sent(&list), 0, "joined, held");
        list.emit_delta(&agent, false, &piece);
        assert_eq!(sent(&list), 1, "the joined text reached its bound");
        list.emit_delta(&agent, false, "z");
        list.flush();
        assert_eq!(texts(&rec).concat().len(), JOINED + 1);
        assert_eq!(rec.len(), 2);
    }

    #[test]
    fn an_event_after_a_flush_arrives_without_another_flush() {
        let (list, rec) = recorded();
        list.hold();
        list.emit(delta("a"));
        list.flush();
        // The next event must reach the listener when nothing else happens
        // (no run is going on, or a turn whose answer takes seconds).
        list.emit(delta("b"));
        eventually(|| rec.len() == 2);
        assert_eq!(texts(&rec), ["a", "b"]);
    }

    /// A listener a whole channel behind when the agent is about to wait:
    /// the agent waits for room instead of keeping events, which nothing
    /// would hand over while it waits.
    #[test]
    fn the_hand_over_waits_for_room_rather_than_leave_events_behind() {
        let (list, release, rec) = stalled();
        // One held by the listener, a full channel, one kept.
        let n = QUEUE + 2;
        for i in 0..n {
            if i == n - 1 {
                list.hold();
            }
            list.emit(turn(i));
        }
        let list = Arc::new(list);
        let handed = {
            let list = Arc::clone(&list);
            std::thread::spawn(move || list.hand_over())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!handed.is_finished(), "the hand-over left events behind");
        drop(release);
        handed.join().unwrap();
        eventually(|| rec.len() == n);
        assert_eq!(texts(&rec), numbers(n));
        list.flush();
    }

    /// A listener that never returns holds the emitter up once its channel
    /// is full, and nothing is lost or reordered; another listener has
    /// every batch the emitter handed over meanwhile.
    #[test]
    fn a_stalled_listener_makes_the_emitter_wait_in_order() {
        let (mut list, release, stalled_rec) = stalled();
        let (other, rec) = recorded();
        list.push(Arc::clone(&other.slots[0]), false);
        let list = Arc::new(list);
        let emitted = Arc::new(AtomicUsize::new(0));
        let n = QUEUE + 20;
        let producer = {
            let (list, emitted) = (Arc::clone(&list), Arc::clone(&emitted));
            std::thread::spawn(move || {
                for i in 0..n {
                    list.emit(turn(i));
                    emitted.fetch_add(1, Ordering::SeqCst);
                }
                list.flush();
            })
        };
        // The listener holds one message, its channel `QUEUE` more.
        let bound = QUEUE + 1;
        eventually(|| emitted.load(Ordering::SeqCst) >= bound && rec.len() >= bound);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(emitted.load(Ordering::SeqCst), bound, "the emitter waits");
        // The other listener got everything emitted before the wait, in
        // order, and the event the emitter waits to give the stalled one
        // too, unless its own channel was full at that moment (a busy
        // machine): then it waits with the emitter.
        let other = texts(&rec);
        assert!(
            other == numbers(bound) || other == numbers(bound + 1),
            "{other:?}"
        );
        drop(release);
        producer.join().unwrap();
        assert_eq!(texts(&stalled_rec), numbers(n));
        assert_eq!(texts(&rec), numbers(n));
    }

    /// The batch's allocation is reused once every listener is done with
    /// it, and the events it held are dropped on the emitting thread.
    #[test]
    fn a_spent_batch_is_reused_for_the_next() {
        let (mut list, rec) = recorded();
        list.add(|_: &Event| {});
        let kept = |list: &ListenerList| list.pending.lock().last.as_ref().map(Arc::as_ptr);
        list.hold();
        list.emit(turn(0));
        list.flush();
        let first = kept(&list).expect("sent");
        // Both listeners dropped the batch before the flush returned.
        for i in 1..4 {
            list.hold();
            list.emit(turn(i));
            list.flush();
            assert_eq!(kept(&list), Some(first), "turn {i}");
        }
        assert_eq!(texts(&rec), numbers(4));
        assert_eq!(
            list.pending.lock().last.as_ref().map(|b| b.len()),
            Some(1),
            "only the last batch's events are kept"
        );
    }

    /// A flush waits on a countdown whose allocation serves the next
    /// flush once its tickets are gone: a warm flush allocates nothing
    /// (the channel per flush it replaced cost two allocations).
    #[test]
    fn a_flush_reuses_its_gate() {
        let (mut list, rec) = recorded();
        list.add(|_: &Event| {});
        let kept = |list: &ListenerList| list.pending.lock().gate.as_ref().map(Arc::as_ptr);
        assert_eq!(kept(&list), None);
        list.flush();
        let first = kept(&list).expect("kept");
        for i in 0..50 {
            list.hold();
            list.emit(turn(i));
            list.flush();
            assert_eq!(rec.len(), i + 1, "flush {i} waited");
            // A ticket may still hold the gate as the flush returns (its
            // unpark under way); by the next flush it is gone.
            eventually(|| {
                list.pending
                    .lock()
                    .gate
                    .as_ref()
                    .is_some_and(|g| Arc::strong_count(g) == 1)
            });
        }
        assert_eq!(kept(&list), Some(first));
    }

    /// Flushes from two threads at once each wait for their own tickets.
    #[test]
    fn concurrent_flushes_each_return() {
        let (list, rec) = recorded();
        let list = Arc::new(list);
        let (done_tx, done) = bounded(2);
        for _ in 0..2 {
            let (list, done_tx) = (Arc::clone(&list), done_tx.clone());
            std::thread::spawn(move || {
                for i in 0..200 {
                    list.emit(turn(i));
                    list.flush();
                }
                done_tx.send(()).unwrap();
            });
        }
        for _ in 0..2 {
            // A bound against hangs, not a timing claim.
            done.recv_timeout(Duration::from_secs(10))
                .expect("a flush never returned");
        }
        assert_eq!(rec.len(), 400);
    }

    #[test]
    fn deltas_join_only_with_their_own_kind_and_agent() {
        let (list, rec) = recorded();
        list.hold();
        let d = |agent: &str, thinking: bool, s: &str| {
            let (agent, content) = (agent.into(), s.into());
            if thinking {
                Event::ThinkingDelta { agent, content }
            } else {
                Event::AssistantDelta { agent, content }
            }
        };
        for e in [
            d("", false, "x"),
            d("", false, "y"),
            d("c", false, "p"),
            d("c", false, "q"),
        ] {
            list.emit(e);
        }
        for (agent, thinking, s) in [("", true, "t"), ("", false, "z"), ("c", false, "r")] {
            list.emit_delta(&Arc::from(agent), thinking, s);
        }
        list.emit_delta(&Arc::from("c"), true, "s");
        list.emit_delta(&Arc::from("c"), true, "u");
        list.emit(turn(0));
        list.emit_delta(&Arc::from("c"), true, "v");
        list.flush();
        let want = [
            d("", false, "xy"),
            d("c", false, "pq"),
            d("", true, "t"),
            d("", false, "z"),
            d("c", false, "r"),
            d("c", true, "su"),
            turn(0),
            d("c", true, "v"),
        ];
        assert_eq!(rec.events(), want);
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
        list.hold();
        list.emit(turn(0));
        list.close();
        assert_eq!(*log.lock(), ["assistant_delta", "user_turn", "close"]);
        // Later events are dropped, and closing again changes nothing.
        list.emit(delta("c"));
        list.close();
        list.flush();
        assert_eq!(log.lock().len(), 3);
    }

    #[test]
    fn a_thread_whose_slot_has_no_holder_left_handles_what_is_queued_and_ends() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let slot = Slot::spawn(Box::new(Closing(Arc::clone(&log))));
        let batch = Msg::Batch(Arc::new(vec![turn(0)]), Tail::Open);
        assert!(matches!(slot.send(batch, true), Ok(true)));
        // Handled, and the thread gone to sleep on its empty channel, so
        // the disconnect comes too late for it to see.
        eventually(|| log.lock().len() == 1 && slot.bell.asleep.load(Ordering::SeqCst));
        // Nobody stops it: the last holder's drop alone must end it, as
        // nothing can be queued after.
        drop(slot);
        eventually(|| log.lock().len() == 2);
        assert_eq!(*log.lock(), ["user_turn", "close"]);
    }

    #[test]
    fn no_wake_up_is_lost_between_a_send_and_the_thread_parking() {
        // Bounded stress: each event goes out as it is emitted (nothing is
        // held), so every send may find the thread about to park; a lost
        // wake-up leaves a flush waiting, and the bound fails the test.
        const N: usize = 20_000;
        let (list, rec) = recorded();
        let (done_tx, done_rx) = bounded(1);
        std::thread::spawn(move || {
            for i in 0..N {
                list.emit(turn(i));
                if i % 97 == 0 {
                    list.flush();
                }
            }
            list.flush();
            done_tx.send(()).unwrap();
        });
        assert!(
            done_rx.recv_timeout(Duration::from_secs(60)).is_ok(),
            "a flush waited for a listener that was never woken"
        );
        assert_eq!(texts(&rec), numbers(N));
    }

    #[test]
    fn flush_returns_when_a_shared_listener_was_stopped() {
        let (parent, _rec) = recorded();
        let child = parent.for_sub_agent("c");
        assert_eq!(child.len(), 1);
        parent.close();
        let (done_tx, done_rx) = bounded(1);
        std::thread::spawn(move || {
            for i in 0..3 * QUEUE {
                child.emit(turn(i));
            }
            child.hold();
            child.emit(turn(0));
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
        let mut list = ListenerList::new();
        list.add(|e: &Event| assert!(!matches!(e, Event::AssistantDelta { .. }), "boom"));
        let (other, rec) = recorded();
        list.push(Arc::clone(&other.slots[0]), false);
        list.emit(delta("a"));
        list.hold();
        list.emit(turn(0));
        list.emit(delta("b"));
        list.flush();
        // The panicking listener got its flush, and gets the next turn.
        list.emit(delta("c"));
        list.flush();
        assert_eq!(rec.len(), 4);
    }
}
