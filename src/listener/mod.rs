//! Event delivery: the [`Listener`] trait, [`SubAgentListener`] and
//! [`ListenerList`] (the fan-out that gives each listener its own thread).
//! The listeners the crate ships live in the public [`listeners`](crate::listeners)
//! namespace. The push model is documented once, on [`Listener`].

mod hub;

pub use hub::ListenerList;

use crate::Event;

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
/// onto **its own std thread**, fed by its own channel, so:
///
/// - a slow listener does not slow the agent loop or the other listeners
///   while it keeps up on average (see *Backpressure* below);
/// - each listener sees events in emission order;
/// - a listener that panics is isolated: the panic is logged at `error`, the
///   event is skipped for that listener only, and it keeps receiving later
///   events;
/// - [`Agent::run_loop`](crate::Agent::run_loop) returns only after every
///   listener has handled every event of the turn (and
///   [`Listener::flush`] ran), so a REPL never prints its prompt into the
///   middle of an answer.
///
/// Threads are joined when the agent closes (or drops).
///
/// Delivery is prompt, with one exception that buys speed: for 1 ms after
/// a turn's flush, a listener's thread does not watch its queue, so an
/// event emitted in that millisecond (the next turn's first events, when
/// turns follow each other quickly) reaches the listener up to 1 ms late,
/// or with the turn's end if that comes first. A fast turn then wakes each
/// listener's thread once instead of twice.
///
/// # Backpressure
///
/// Each listener's queue holds 32 events, so its memory is bounded whatever
/// the scheduler does (1,000 agents streaming at once on two cores). When a
/// listener falls that far behind, its agent keeps the next events for it
/// in a backlog and joins each delta to the delta before it when both are
/// of one kind ([`AssistantDelta`](Event::AssistantDelta) or
/// [`ThinkingDelta`](Event::ThinkingDelta)) and from one agent: the
/// listener then gets fewer, longer deltas, with the same text, and no
/// event is lost or reordered. Deltas that come back to back (a replayed
/// or cached stream, or several in one network read) are joined as soon
/// as the listener has one event waiting, and a listener that emptied its
/// queue in such a stream waits up to 1 ms for more before it blocks, so
/// it takes a fast stream in a few long deltas instead of chasing it one
/// delta at a time; the agent hands over what waits before each network
/// read, so no text waits behind a stalled stream. Other events wait in the backlog too; once
/// 32 of them wait, the agent waits for the listener to take one. So a
/// listener that is slow only on deltas never holds up the agent, and a
/// listener that never returns holds it up at the latest at the end of the
/// turn, as the flush always did. Two listeners of one agent can therefore
/// see one text cut into different deltas: compare what they saw with
/// [`testing::merge_deltas`](crate::testing::merge_deltas). To slow a
/// listener's deltas down on purpose (a terminal that repaints), wrap it in
/// [`RateLimited`](crate::listeners::RateLimited).
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

    /// Called after the last event of each turn, before `run_loop` returns;
    /// flush buffered output here. Default: nothing.
    fn flush(&mut self) {}

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
