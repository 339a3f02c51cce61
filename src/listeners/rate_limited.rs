//! `RateLimited`: coalesces bursts of deltas for a slow listener.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::listener::{Delivery, SubAgentListener};
use crate::{Event, Listener};

/// Wraps a listener so that it receives at most `max_per_second` delta
/// deliveries per second, consecutive deltas being concatenated.
///
/// Put it in front of a chrome that is slow to redraw (a TUI, a web page
/// over a socket): a fast model can stream hundreds of
/// [`AssistantDelta`](Event::AssistantDelta)s per second, and the listener's
/// queue would otherwise grow.
///
/// # Examples
///
/// ```
/// use pikuri::{Event, listeners::InMemoryEventList, Listener};
/// use pikuri::listeners::RateLimited;
///
/// let rec = InMemoryEventList::new();
/// let mut limited = RateLimited::new(rec.clone(), 10);
/// for piece in ["Hel", "lo", ", ", "world"] {
///     limited.on_event(&Event::AssistantDelta { agent: "".into(), content: piece.into() });
/// }
/// limited.flush(); // the end of the turn
/// // The first delta goes through at once, the burst after it is held and
/// // joined, and the flush delivers what is held.
/// let deltas: Vec<String> = rec
///     .events()
///     .into_iter()
///     .filter_map(|e| match e {
///         Event::AssistantDelta { content, .. } => Some(content),
///         _ => None,
///     })
///     .collect();
/// assert_eq!(deltas[0], "Hel");
/// assert_eq!(deltas.concat(), "Hello, world");
/// ```
///
/// # Coalescing
///
/// - A delta ([`AssistantDelta`](Event::AssistantDelta) or
///   [`ThinkingDelta`](Event::ThinkingDelta)) is delivered at once when no
///   delta was delivered in the last `1 / max_per_second` seconds; otherwise it
///   is held, and the deltas that follow it with the same kind and agent are
///   appended to it.
/// - A held delta is delivered, before anything else, when the window has
///   passed at the next delta; when a delta of another kind or agent
///   arrives; when any other event arrives (which then passes through
///   unchanged, so the order of events is kept); and in
///   [`flush`](Listener::flush) and [`close`](Listener::close). Only the
///   first case is paced; the others deliver early to keep the order.
/// - `max_per_second == 0` delivers no delta on time: each run of deltas
///   reaches the inner listener as one, at the next other event or flush.
///
/// There is no timer thread: a held delta waits for the next event. Since
/// every turn ends with a [`Stopped`](Event::Stopped) event and a
/// [`flush`](Listener::flush), nothing is held past the end of a turn; while
/// a stream stalls, the last fragment may show up to the stall's length late.
///
/// # Sub-agents
///
/// [`for_sub_agent`](Listener::for_sub_agent) asks the inner listener: a
/// `Replace` comes back wrapped in a new `RateLimited` with the same rate;
/// `Share` and `Skip` are passed on (a shared instance keeps coalescing,
/// and never glues fragments of different agents together).
pub struct RateLimited<L: Listener> {
    inner: L,
    max_per_second: u32,
    /// `None` when `max_per_second` is 0.
    interval: Option<Duration>,
    /// When a delta was last delivered.
    last: Option<Instant>,
    pending: Option<Pending>,
    clock: Box<dyn FnMut() -> Instant + Send>,
}

/// A held delta.
struct Pending {
    thinking: bool,
    agent: Arc<str>,
    content: String,
}

impl Pending {
    fn into_event(self) -> Event {
        let Pending {
            thinking,
            agent,
            content,
        } = self;
        if thinking {
            Event::ThinkingDelta { agent, content }
        } else {
            Event::AssistantDelta { agent, content }
        }
    }
}

impl<L: Listener> RateLimited<L> {
    /// Wrap `inner`, delivering at most `max_per_second` deltas per second
    /// (see [Coalescing](RateLimited#coalescing) for when deltas go early, and
    /// for `0`).
    pub fn new(inner: L, max_per_second: u32) -> RateLimited<L> {
        RateLimited::with_clock(inner, max_per_second, Box::new(Instant::now))
    }

    fn with_clock(
        inner: L,
        max_per_second: u32,
        clock: Box<dyn FnMut() -> Instant + Send>,
    ) -> RateLimited<L> {
        RateLimited {
            inner,
            max_per_second,
            interval: (max_per_second > 0).then(|| Duration::from_secs(1) / max_per_second),
            last: None,
            pending: None,
            clock,
        }
    }

    /// The wrapped listener.
    pub fn get_ref(&self) -> &L {
        &self.inner
    }

    /// Unwrap, dropping a held delta (call [`flush`](Listener::flush) first
    /// to deliver it).
    pub fn into_inner(self) -> L {
        self.inner
    }

    /// Deliver the held delta, if any.
    fn deliver(&mut self) {
        if let Some(pending) = self.pending.take() {
            self.last = Some((self.clock)());
            self.inner.on_event(&pending.into_event());
        }
    }

    fn on_delta(&mut self, thinking: bool, agent: &Arc<str>, content: &str) {
        match &mut self.pending {
            Some(p) if p.thinking == thinking && p.agent == *agent => p.content.push_str(content),
            _ => {
                self.deliver();
                self.pending = Some(Pending {
                    thinking,
                    agent: Arc::clone(agent),
                    content: content.to_string(),
                });
            }
        }
        let due = match (self.interval, self.last) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(interval), Some(last)) => {
                (self.clock)().saturating_duration_since(last) >= interval
            }
        };
        if due {
            self.deliver();
        }
    }
}

impl<L: Listener> Listener for RateLimited<L> {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::AssistantDelta { agent, content } => self.on_delta(false, agent, content),
            Event::ThinkingDelta { agent, content } => self.on_delta(true, agent, content),
            other => {
                self.deliver();
                self.inner.on_event(other);
            }
        }
    }

    fn flush(&mut self) {
        self.deliver();
        self.inner.flush();
    }

    fn close(&mut self) {
        Listener::flush(self);
        self.inner.close();
    }

    /// The inner listener's.
    fn delivery(&self) -> Delivery {
        self.inner.delivery()
    }

    fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
        match self.inner.for_sub_agent(id) {
            SubAgentListener::Replace(child) => SubAgentListener::Replace(Box::new(
                RateLimited::new(Boxed(child), self.max_per_second),
            )),
            other => other,
        }
    }

    fn name(&self) -> String {
        format!("RateLimited<{}>", self.inner.name())
    }
}

impl<L: Listener> fmt::Debug for RateLimited<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimited")
            .field("inner", &self.inner.name())
            .field("max_per_second", &self.max_per_second)
            .field("pending", &self.pending.as_ref().map(|p| p.content.len()))
            .finish_non_exhaustive()
    }
}

/// A boxed listener as a sized one, to wrap a sub-agent's replacement.
struct Boxed(Box<dyn Listener>);

impl Listener for Boxed {
    fn on_event(&mut self, event: &Event) {
        self.0.on_event(event);
    }
    fn flush(&mut self) {
        self.0.flush();
    }
    fn close(&mut self) {
        self.0.close();
    }
    fn delivery(&self) -> Delivery {
        self.0.delivery()
    }
    fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
        self.0.for_sub_agent(id)
    }
    fn name(&self) -> String {
        self.0.name()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::listeners::InMemoryEventList;

    /// The wrapper keeps its inner listener's delivery, a replaced child's
    /// too: a hand-off listener limited stays a hand-off listener.
    #[test]
    fn delivery_is_the_inner_listeners() {
        struct HandOff;
        impl Listener for HandOff {
            fn on_event(&mut self, _: &Event) {}
            fn delivery(&self) -> Delivery {
                Delivery::HandOff
            }
            fn for_sub_agent(&mut self, _: &str) -> SubAgentListener {
                SubAgentListener::Replace(Box::new(HandOff))
            }
        }
        let mut limited = RateLimited::new(HandOff, 10);
        assert_eq!(limited.delivery(), Delivery::HandOff);
        let SubAgentListener::Replace(child) = limited.for_sub_agent("c") else {
            panic!("replaced");
        };
        assert_eq!(child.delivery(), Delivery::HandOff);
        let barrier = RateLimited::new(InMemoryEventList::new(), 10);
        assert_eq!(barrier.delivery(), Delivery::Barrier);
    }

    /// A clock the test moves by hand, in milliseconds.
    #[derive(Clone)]
    struct FakeClock {
        base: Instant,
        ms: Arc<AtomicU64>,
    }

    impl FakeClock {
        fn new() -> FakeClock {
            FakeClock {
                base: Instant::now(),
                ms: Arc::new(AtomicU64::new(0)),
            }
        }
        fn advance(&self, ms: u64) {
            self.ms.fetch_add(ms, Ordering::SeqCst);
        }
        fn boxed(&self) -> Box<dyn FnMut() -> Instant + Send> {
            let c = self.clone();
            Box::new(move || c.base + Duration::from_millis(c.ms.load(Ordering::SeqCst)))
        }
    }

    fn limited(per_second: u32) -> (RateLimited<InMemoryEventList>, InMemoryEventList, FakeClock) {
        let rec = InMemoryEventList::new();
        let clock = FakeClock::new();
        let l = RateLimited::with_clock(rec.clone(), per_second, clock.boxed());
        (l, rec, clock)
    }

    fn delta(agent: &str, s: &str) -> Event {
        Event::AssistantDelta {
            agent: agent.into(),
            content: s.into(),
        }
    }

    fn think(s: &str) -> Event {
        Event::ThinkingDelta {
            agent: "".into(),
            content: s.into(),
        }
    }

    /// Events as short strings: `a:text` (assistant delta), `t:text`
    /// (thinking delta), or the kind.
    fn seen(rec: &InMemoryEventList) -> Vec<String> {
        rec.events()
            .iter()
            .map(|e| match e {
                Event::AssistantDelta { agent, content } if agent.is_empty() => {
                    format!("a:{content}")
                }
                Event::AssistantDelta { agent, content } => format!("a[{agent}]:{content}"),
                Event::ThinkingDelta { content, .. } => format!("t:{content}"),
                other => other.kind().to_string(),
            })
            .collect()
    }

    #[test]
    fn bursts_are_coalesced_to_the_rate() {
        let (mut l, rec, clock) = limited(10); // one per 100 ms
        l.on_event(&delta("", "a")); // first: at once
        for s in ["b", "c", "d"] {
            clock.advance(30);
            l.on_event(&delta("", s)); // 30, 60, 90 ms: held
        }
        assert_eq!(seen(&rec), ["a:a"]);
        clock.advance(10);
        l.on_event(&delta("", "e")); // 100 ms: window passed
        assert_eq!(seen(&rec), ["a:a", "a:bcde"]);
        clock.advance(50);
        l.on_event(&delta("", "f"));
        clock.advance(200);
        l.on_event(&delta("", "g")); // the held "f" goes with it
        assert_eq!(seen(&rec), ["a:a", "a:bcde", "a:fg"]);
    }

    #[test]
    fn other_events_flush_pending_first_and_keep_order() {
        let (mut l, rec, clock) = limited(10);
        l.on_event(&think("x"));
        l.on_event(&think("y"));
        l.on_event(&delta("", "1")); // kind switch: "y" delivered first
        l.on_event(&delta("", "2"));
        l.on_event(&Event::Assistant {
            agent: "".into(),
            content: "12".into(),
            finish: crate::FinishReason::Complete,
        });
        l.on_event(&delta("", "3"));
        clock.advance(10);
        l.on_event(&delta("child", "c")); // agent switch
        l.on_event(&Event::Reset { agent: "".into() });
        assert_eq!(
            seen(&rec),
            [
                "t:x",
                "t:y",
                "a:12",
                "assistant",
                "a:3",
                "a[child]:c",
                "reset"
            ]
        );
    }

    #[test]
    fn flush_and_close_deliver_pending() {
        let (mut l, rec, _clock) = limited(1);
        l.on_event(&delta("", "a"));
        l.on_event(&delta("", "b"));
        l.flush();
        assert_eq!(seen(&rec), ["a:a", "a:b"]);
        l.on_event(&delta("", "c"));
        l.close();
        assert_eq!(seen(&rec), ["a:a", "a:b", "a:c"]);
    }

    #[test]
    fn zero_rate_coalesces_whole_runs() {
        let (mut l, rec, clock) = limited(0);
        for s in ["a", "b", "c"] {
            clock.advance(5000);
            l.on_event(&delta("", s));
        }
        assert!(rec.is_empty());
        l.on_event(&Event::Cancelled {
            agent: "".into(),
            partial_answer: String::new(),
        });
        assert_eq!(seen(&rec), ["a:abc", "cancelled"]);
    }

    // `Terminal` is the ready-made listener that replaces itself in a child.
    #[cfg(feature = "terminal")]
    #[test]
    fn sub_agent_replacement_is_wrapped() {
        let mut l = RateLimited::new(crate::listeners::Terminal::new(std::io::sink()), 5);
        assert_eq!(l.name(), "RateLimited<Terminal>");
        let SubAgentListener::Replace(child) = l.for_sub_agent("r 0") else {
            panic!("expected Replace");
        };
        assert_eq!(child.name(), "RateLimited<Terminal>");
        let (mut shared, _, _) = limited(5);
        assert!(matches!(
            shared.for_sub_agent("r 0"),
            SubAgentListener::Share
        ));
        assert_eq!(
            format!("{shared:?}"),
            "RateLimited { inner: \"InMemoryEventList\", max_per_second: 5, pending: None, .. }"
        );
    }
}
