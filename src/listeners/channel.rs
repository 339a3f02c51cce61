use std::fmt;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::{Event, Listener};

/// A listener that forwards every event into a channel; the host pulls
/// them from the paired [`Subscription`] on its own thread.
///
/// Make the pair with [`ChannelListener::unbounded`] or
/// [`ChannelListener::bounded`], give the listener to the agent, keep the
/// subscription.
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, Event};
/// use pikuri::listeners::ChannelListener;
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.push(Reply::text("hi"));
/// let (listener, events) = ChannelListener::bounded(16);
/// let mut agent = Agent::builder(server.transport()).add_listener(listener).build()?;
///
/// let host = std::thread::spawn(move || {
///     // Ends when the agent closes.
///     events.map(|e| e.kind()).collect::<Vec<_>>()
/// });
/// agent.run_loop("hello")?;
/// drop(agent);
/// let kinds = host.join().unwrap();
/// assert_eq!(kinds, ["context_cap", "user_turn", "assistant", "tokens", "stopped"]);
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # Guarantees
///
/// Those of every [`Listener`]: events arrive in emission order, and every
/// event of a turn is in the channel before [`run_loop`](crate::Agent::run_loop)
/// returns (the end-of-turn flush waits for this listener's thread, which
/// has sent them).
///
/// # Backpressure
///
/// A full bounded channel blocks this listener's thread, never drops an
/// event; the agent loop does not wait for it until the end of the turn,
/// where `run_loop` waits until the host has made room for the turn's last
/// event. So consume a bounded subscription on another thread than the one
/// that calls `run_loop`, or use an unbounded one.
///
/// # Dropping the subscription
///
/// Delivery stops: a send blocked on a full channel returns at once, later
/// events are discarded, and the agent goes on unaffected.
///
/// # Sub-agents
///
/// Shared (the default): the children's events arrive in the same channel,
/// tagged with their ids ([`Event::agent`]).
pub struct ChannelListener {
    tx: Option<Sender<Event>>,
}

impl ChannelListener {
    /// A listener and its subscription over an unbounded channel.
    pub fn unbounded() -> (ChannelListener, Subscription) {
        ChannelListener::pair(crossbeam_channel::unbounded())
    }

    /// A listener and its subscription over a channel holding at most `cap`
    /// events; see "Backpressure". A `cap` of 0 makes every event a
    /// hand-over from the listener thread to the host.
    pub fn bounded(cap: usize) -> (ChannelListener, Subscription) {
        ChannelListener::pair(crossbeam_channel::bounded(cap))
    }

    fn pair((tx, rx): (Sender<Event>, Receiver<Event>)) -> (ChannelListener, Subscription) {
        (ChannelListener { tx: Some(tx) }, Subscription { rx })
    }
}

impl Listener for ChannelListener {
    fn on_event(&mut self, event: &Event) {
        if let Some(tx) = &self.tx
            && tx.send(event.clone()).is_err()
        {
            // The host dropped its subscription: stop cloning events.
            self.tx = None;
        }
    }

    fn close(&mut self) {
        // Ends the host's iteration once it drained the channel.
        self.tx = None;
    }

    fn name(&self) -> String {
        "ChannelListener".to_string()
    }
}

impl fmt::Debug for ChannelListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelListener")
            .field("connected", &self.tx.is_some())
            .finish()
    }
}

/// The host's end of a [`ChannelListener`]: an iterator over the events,
/// in order, that ends when the agent has closed and every event was taken.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use pikuri::{Event, Listener};
/// use pikuri::listeners::{ChannelListener, RecvTimeoutError, TryRecvError};
///
/// let (mut listener, events) = ChannelListener::unbounded();
/// assert_eq!(events.try_recv(), Err(TryRecvError::Empty));
/// listener.on_event(&Event::Reset { agent: "".into() });
/// assert_eq!(events.recv_timeout(Duration::from_millis(10)).unwrap().kind(), "reset");
/// assert_eq!(events.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Timeout));
/// drop(listener); // what closing the agent does
/// assert_eq!(events.try_recv(), Err(TryRecvError::Closed));
/// ```
pub struct Subscription {
    rx: Receiver<Event>,
}

impl Subscription {
    /// The next event, waiting for it; `None` once the agent closed and the
    /// channel is drained.
    pub fn recv(&self) -> Option<Event> {
        self.rx.recv().ok()
    }

    /// The next event if one is waiting.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] when none is, [`TryRecvError::Closed`] once
    /// the agent closed and the channel is drained.
    pub fn try_recv(&self) -> Result<Event, TryRecvError> {
        self.rx.try_recv().map_err(|e| match e {
            crossbeam_channel::TryRecvError::Empty => TryRecvError::Empty,
            crossbeam_channel::TryRecvError::Disconnected => TryRecvError::Closed,
        })
    }

    /// The next event, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] when none came in time,
    /// [`RecvTimeoutError::Closed`] once the agent closed and the channel is
    /// drained.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Event, RecvTimeoutError> {
        self.rx.recv_timeout(timeout).map_err(|e| match e {
            crossbeam_channel::RecvTimeoutError::Timeout => RecvTimeoutError::Timeout,
            crossbeam_channel::RecvTimeoutError::Disconnected => RecvTimeoutError::Closed,
        })
    }

    /// How many events are waiting.
    pub fn len(&self) -> usize {
        self.rx.len()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
}

impl Iterator for Subscription {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        self.recv()
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("waiting", &self.rx.len())
            .finish()
    }
}

/// Why [`Subscription::try_recv`] returned no event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryRecvError {
    /// No event is waiting now.
    Empty,
    /// The agent closed and every event was taken.
    Closed,
}

/// Why [`Subscription::recv_timeout`] returned no event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvTimeoutError {
    /// None came in time.
    Timeout,
    /// The agent closed and every event was taken.
    Closed,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TryRecvError::Empty => "no event waiting",
            TryRecvError::Closed => "the agent closed",
        })
    }
}

impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RecvTimeoutError::Timeout => "timed out waiting for an event",
            RecvTimeoutError::Closed => "the agent closed",
        })
    }
}

impl std::error::Error for TryRecvError {}
impl std::error::Error for RecvTimeoutError {}
