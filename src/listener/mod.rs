//! Event delivery: the [`Listener`] trait, [`Delivery`], [`SubAgentListener`]
//! and [`ListenerList`] (the fan-out that gives each listener its own thread).
//! The listeners the crate ships live in the public [`listeners`](crate::listeners)
//! namespace. The push model is documented once, on [`Listener`].

#[cfg(feature = "hub")]
mod hub;
// Without the `hub` feature: listeners called on the emitting thread.
#[cfg(not(feature = "hub"))]
#[path = "hub_off.rs"]
mod hub;

pub use hub::ListenerList;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::Event;

// What both builds of `ListenerList` (`hub.rs`, `hub_off.rs`) share.

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

/// Run `f`, containing a panic: it is logged at `error` and costs the
/// listener that one call.
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

/// `[a, b]`: a list's listeners by name, its `Display`.
fn write_names<'a>(
    f: &mut fmt::Formatter<'_>,
    names: impl Iterator<Item = &'a str>,
) -> fmt::Result {
    f.write_str("[")?;
    for (i, name) in names.enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        f.write_str(name)?;
    }
    f.write_str("]")
}

/// Whether [`Agent::run_loop`](crate::Agent::run_loop) waits for a listener
/// at the end of each turn; see [`Listener::delivery`] and the guarantees
/// per kind in the [`Listener`] docs.
///
/// # Examples
///
/// A counter that nobody reads before the agent closes needs no barrier:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use pikuri::{Agent, Event, Listener};
/// use pikuri::listeners::Delivery;
/// use pikuri::testing::{FakeServer, Reply};
///
/// struct Count(Arc<AtomicUsize>);
/// impl Listener for Count {
///     fn on_event(&mut self, _: &Event) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
///     fn delivery(&self) -> Delivery {
///         Delivery::HandOff
///     }
/// }
///
/// let server = FakeServer::start();
/// server.push(Reply::text("hi"));
/// let seen = Arc::new(AtomicUsize::new(0));
/// let mut agent = Agent::builder(server.transport())
///     .add_listener(Count(Arc::clone(&seen)))
///     .build()?;
/// agent.run_loop("hello")?; // returns without waiting for `Count`
/// agent.flush_listeners(); // now it has caught up
/// assert_eq!(seen.load(Ordering::Relaxed), 5); // context_cap … stopped
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Delivery {
    /// `run_loop` (and every other call that ends a turn) returns only
    /// after this listener handled every event emitted so far and ran its
    /// [`flush`](Listener::flush): what a terminal prints is whole before
    /// the host prints its prompt. The default.
    #[default]
    Barrier,
    /// The agent hands the events over and goes on: `run_loop` returns
    /// without waiting for this listener, which catches up on its own
    /// thread. For counters, log files, trace exporters. A host that must
    /// know it caught up calls
    /// [`Agent::flush_listeners`](crate::Agent::flush_listeners) (or
    /// closes the agent).
    HandOff,
}

/// What a listener wants for a sub-agent's events; see [`Listener::for_sub_agent`].
#[non_exhaustive]
pub enum SubAgentListener {
    /// Deliver the child's events to this same instance (the default).
    Share,
    /// Deliver the child's events to this new listener, on its own thread.
    Replace(Box<dyn Listener>),
    /// Do not deliver the child's events to this listener.
    Skip,
}

impl std::fmt::Debug for SubAgentListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubAgentListener::Share => f.write_str("Share"),
            SubAgentListener::Replace(l) => write!(f, "Replace({})", l.name()),
            SubAgentListener::Skip => f.write_str("Skip"),
        }
    }
}

/// A consumer of the event stream.
///
/// One method is required, [`on_event`](Listener::on_event). Match on the
/// event and ignore what you do not know (`_ => {}`): the enum grows.
/// Closures `FnMut(&Event) + Send + 'static` are listeners too.
///
/// # The push model
///
/// An agent pushes every [`Event`] to every listener. Each listener is moved
/// onto **its own std thread**, fed by its own channel (the `hub` feature,
/// on by default; without it each is called on the emitting thread), so:
///
/// - a slow listener does not slow the agent loop or the other listeners
///   while it keeps up on average (see *Backpressure* below);
/// - each listener sees events in emission order;
/// - a listener that panics is isolated: the panic is logged at `error`, the
///   event is skipped for that listener only, and it keeps receiving later
///   events;
/// - at the end of a turn, every listener's [`Listener::flush`] runs on its
///   thread after the turn's last event; whether
///   [`Agent::run_loop`](crate::Agent::run_loop) waits for that depends on
///   the listener's [`Delivery`] (next section).
///
/// Threads are joined when the agent closes (or drops), after they handled
/// every event: once [`Agent::close`](crate::Agent::close) returns, every
/// listener has seen everything and ran its [`close`](Listener::close);
/// [`close_all`](crate::close_all), a host's exit path, does the same for
/// every open agent.
///
/// # Guarantees per kind
///
/// A listener says which it needs with [`Listener::delivery`], read once
/// when it is added.
///
/// | | [`Barrier`](Delivery::Barrier) (the default) | [`HandOff`](Delivery::HandOff) |
/// |---|---|---|
/// | order | emission order | emission order |
/// | every event delivered | yes | yes, none dropped |
/// | events reach it | at the agent's waits, the run's opening with the first response (below) | at the same points |
/// | `run_loop` returns | after it handled the turn and flushed | at once after the hand-over |
/// | caught up | when `run_loop` returns | after [`Agent::flush_listeners`](crate::Agent::flush_listeners), [`Agent::close`](crate::Agent::close) or [`close_all`](crate::close_all) |
/// | own thread, own bounded channel | yes | yes |
/// | a panic | contained, logged at `error` | contained, logged at `error` |
/// | memory | bounded (*Backpressure*) | bounded, the same way |
/// | a whole channel behind | the agent waits at its next hand-over | the agent waits at its next hand-over |
///
/// The barrier costs two wake-ups per turn on the agent's path (the agent
/// sleeps until the last barrier listener acknowledges); an agent whose
/// listeners all hand off never sleeps for them while they keep up. The
/// ready-made listeners choose: [`Terminal`](crate::listeners::Terminal),
/// [`TokenLog`](crate::listeners::TokenLog),
/// [`InMemoryEventList`](crate::listeners::InMemoryEventList) and
/// [`ChannelListener`](crate::listeners::ChannelListener) keep the barrier
/// (what they hold is read right after the turn); a
/// [`JsonLines`](crate::listeners::JsonLines) log file and the
/// `OtlpExporter` (feature `otel`) hand off;
/// [`RateLimited`](crate::listeners::RateLimited) takes its inner
/// listener's kind. Closures keep the default.
///
/// Differences from lossy telemetry queues (an OpenTelemetry batch
/// processor, a non-blocking log appender): those drop what does not fit
/// and count it. A hand-off listener here loses nothing: when it is a whole
/// channel behind, the agent waits for room at its next hand-over, so what
/// a listener sees never depends on the scheduler. A listener that must
/// never hold the agent up keeps up on average, or queues (and drops) on
/// its own.
///
/// Delivery follows the agent's waits. While the agent works (starts a
/// turn, decodes what one read of a stream brought, takes in an answer or
/// a tool's result), what it emits is kept, and handed to the listeners in
/// one batch where it is about to wait: before each request, each read of
/// a stream, each tool call (and its approval) and each sub-agent, and at
/// the end of the turn. What is emitted while the agent waits (by a tool,
/// an approver, an extension's own thread) or between turns goes out at
/// once. So no text waits with the agent while the network or a tool is
/// slow, a stream reaches a listener read by read, and a quick turn wakes
/// a listener's thread once. Nothing in the delivery depends on timing.
///
/// One exception, the run's *opening*: what a run emits before its first
/// request (the turn-start [`UserTurn`](Event::UserTurn), the host's own
/// message, and what extensions emit for it) waits for that request's
/// response instead of going out before it. It is handed over at the
/// first read of a streamed answer (the response's headers are in, before
/// any text), with the answer's own events when the answer is read whole,
/// or before a retry's back-off, whichever comes first; what another
/// thread emits during that first request waits with it. So the opening
/// is late by at most the first request's round trip, always reaches a
/// listener before the answer's text and events, and never waits past a
/// tool call, a sub-agent or a back-off; every later request of the run
/// hands over first (a tool's result is shown while the model answers).
///
/// # Backpressure
///
/// A listener's channel holds 8 batches, and a batch at most 32 events (a
/// kept batch that reaches 32 goes out at once), so a listener's memory is
/// bounded whatever the scheduler does (1,000 agents streaming at once on
/// two cores). In a batch, a delta is appended to the delta right before
/// it when both are of one kind ([`AssistantDelta`](Event::AssistantDelta)
/// or [`ThinkingDelta`](Event::ThinkingDelta)) and from one agent: a
/// listener gets fewer, longer deltas, with the same text, and no event is
/// lost or reordered. How a text is cut therefore depends on the reads,
/// not on the server's chunks: compare with
/// [`testing::merge_deltas`](crate::testing::merge_deltas). When a listener
/// is a whole channel behind, the agent waits for it to take a batch
/// before it hands over the next one (the other listeners have theirs
/// already), so a listener that never returns holds the agent up at its
/// next hand-over. To slow a listener's deltas down on purpose (a terminal
/// that repaints), wrap it in [`RateLimited`](crate::listeners::RateLimited).
///
/// # Sub-agents
///
/// When a sub-agent (or the synthesizer) starts, every listener is asked for
/// its variant through [`Listener::for_sub_agent`]: share itself (the
/// default; the child's events reach the same instance on the same thread,
/// tagged with the child's id), hand over a fresh listener (a
/// [`Terminal`](crate::listeners::Terminal) indented under the child's id, a
/// [`TokenLog`](crate::listeners::TokenLog) zeroed), or skip the child.
///
/// # Examples
///
/// ```
/// use pikuri::{Event, Listener};
///
/// #[derive(Default)]
/// struct Count(usize);
/// impl Listener for Count {
///     fn on_event(&mut self, event: &Event) {
///         if let Event::AssistantDelta { content, .. } = event {
///             self.0 += content.len();
///         }
///     }
/// }
///
/// let mut c = Count::default();
/// c.on_event(&Event::AssistantDelta { agent: "".into(), content: "hey".into() });
/// assert_eq!(c.0, 3);
/// ```
///
/// # Thread safety
///
/// Every method runs on the listener's own thread, one call at a time, in
/// emission order; hence `Send + 'static` and `&mut self`. Listeners never
/// write back into the loop.
pub trait Listener: Send + 'static {
    /// Handle one event.
    fn on_event(&mut self, event: &Event);

    /// Called after the last event of each turn; flush buffered output
    /// here. Before `run_loop` returns for a [`Delivery::Barrier`]
    /// listener; a [`Delivery::HandOff`] one may run it later. Default:
    /// nothing.
    fn flush(&mut self) {}

    /// Whether `run_loop` waits for this listener at the end of each turn
    /// (see *Guarantees per kind* above). Read once, when the listener is
    /// added. Default: [`Delivery::Barrier`].
    fn delivery(&self) -> Delivery {
        Delivery::Barrier
    }

    /// Called once when the listener's thread stops (the agent closed).
    /// Default: nothing.
    fn close(&mut self) {}

    /// The variant to use for a sub-agent with id `id`. Default:
    /// [`SubAgentListener::Share`].
    fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
        let _ = id;
        SubAgentListener::Share
    }

    /// A short name for `Display` of agents (`listeners=[Terminal]`). Default:
    /// the type name without its path.
    fn name(&self) -> String {
        let full = std::any::type_name::<Self>();
        let base = full.split('<').next().unwrap_or(full);
        base.rsplit("::").next().unwrap_or(base).to_string()
    }
}

/// A boxed listener (for example the one a [`SubAgentListener::Replace`]
/// carries) is a listener.
impl Listener for Box<dyn Listener> {
    fn on_event(&mut self, event: &Event) {
        (**self).on_event(event);
    }
    fn flush(&mut self) {
        (**self).flush();
    }
    fn delivery(&self) -> Delivery {
        (**self).delivery()
    }
    fn close(&mut self) {
        (**self).close();
    }
    fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
        (**self).for_sub_agent(id)
    }
    fn name(&self) -> String {
        (**self).name()
    }
}

impl<F> Listener for F
where
    F: FnMut(&Event) + Send + 'static,
{
    fn on_event(&mut self, event: &Event) {
        self(event);
    }

    fn name(&self) -> String {
        "Fn".to_string()
    }
}
