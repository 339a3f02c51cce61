use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::{Event, Listener};

/// The in-memory recorder: keeps every event, shared by reference.
///
/// Clones share one list, so keep a clone, hand another to the agent, and
/// read [`events`](InMemoryEventList::events) after the turn. Sub-agents share
/// it too (one list sees the whole tree; filter by [`Event::agent`]).
///
/// # Examples
///
/// ```
/// use pikuri::{Event, listeners::InMemoryEventList, Listener};
/// let rec = InMemoryEventList::new();
/// let mut handle = rec.clone();
/// handle.on_event(&Event::Reset { agent: "".into() });
/// assert_eq!(rec.len(), 1);
/// assert_eq!(rec.kinds(), vec!["reset"]);
/// ```
#[derive(Clone, Default)]
pub struct InMemoryEventList {
    events: Arc<Mutex<Vec<Event>>>,
}

impl InMemoryEventList {
    /// An empty list.
    pub fn new() -> InMemoryEventList {
        InMemoryEventList::default()
    }

    /// A snapshot of every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().clone()
    }

    /// The snake_case kinds of every event so far (handy in assertions).
    pub fn kinds(&self) -> Vec<&'static str> {
        self.events.lock().iter().map(Event::kind).collect()
    }

    /// Number of events so far.
    pub fn len(&self) -> usize {
        self.events.lock().len()
    }

    /// Whether no event arrived yet.
    pub fn is_empty(&self) -> bool {
        self.events.lock().is_empty()
    }

    /// Forget every event so far.
    pub fn clear(&self) {
        self.events.lock().clear();
    }
}

impl Listener for InMemoryEventList {
    fn on_event(&mut self, event: &Event) {
        self.events.lock().push(event.clone());
    }

    fn name(&self) -> String {
        "InMemoryEventList".to_string()
    }
}

impl fmt::Debug for InMemoryEventList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryEventList")
            .field("len", &self.len())
            .finish()
    }
}
