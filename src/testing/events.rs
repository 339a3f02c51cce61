//! Comparing what listeners saw.

use crate::Event;

/// `events` with every run of neighbouring deltas of one kind from one
/// agent joined into one delta.
///
/// A listener that falls a full queue behind gets some neighbouring deltas
/// joined (see [`Listener`](crate::Listener), "Backpressure"), so two
/// listeners of one agent can see the same text in a different number of
/// deltas. Compare them through this function: equal results mean the same
/// events, in the same order, with the same text.
///
/// # Examples
///
/// ```
/// use pikuri::{Event, testing::merge_deltas};
/// let d = |s: &str| Event::AssistantDelta { agent: "".into(), content: s.into() };
/// let slow = vec![d("Hel"), d("lo")];
/// let fast = vec![d("H"), d("e"), d("llo")];
/// assert_eq!(merge_deltas(slow), merge_deltas(fast));
/// assert_eq!(merge_deltas(vec![d("a"), d("b")]), vec![d("ab")]);
/// ```
pub fn merge_deltas(events: impl IntoIterator<Item = Event>) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for event in events {
        if let Some(last) = out.last_mut()
            && let Some(text) = last.continued_by(&event)
        {
            last.append_delta(text);
            continue;
        }
        out.push(event);
    }
    out
}
