use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::{Error, Result};

/// A queue of user messages injected while a turn runs.
///
/// A host (a REPL reading stdin on another thread, a web handler) calls
/// [`inject_user_message`](Interloper::inject_user_message) from any thread.
/// The loop drains the queue after each tool batch, the only point where the
/// conversation is consistent: each item becomes a user message and an
/// [`Event::UserTurn`](crate::Event::UserTurn) with `mid_loop: true`. An
/// injection is never placed between an assistant tool-call message and its
/// tool results, and never lost: if the model answers without tools while
/// messages are pending, the loop appends them and continues.
///
/// # Examples
///
/// ```
/// use pikuri::Interloper;
/// let q = Interloper::new();
/// q.inject_user_message("also check the tests")?;
/// assert!(q.is_pending());
/// assert_eq!(q.to_string(), "Interloper(1 pending)");
/// assert_eq!(q.drain(), vec!["also check the tests".to_string()]);
/// assert!(q.inject_user_message("   ").is_err());
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # Thread safety
///
/// All methods take `&self` and are safe from any thread; the queue is a
/// `parking_lot::Mutex<VecDeque<String>>`. [`peek`](Interloper::peek) gives a
/// snapshot so a UI can show "2 messages waiting".
///
/// # Sub-agents
///
/// Not inherited: the host has no handle to a sub-agent, so injection is
/// always "talk to the main agent".
#[derive(Clone, Default)]
pub struct Interloper {
    items: Arc<Mutex<VecDeque<String>>>,
}

impl Interloper {
    /// An empty queue.
    pub fn new() -> Interloper {
        Interloper::default()
    }

    /// Queue a message for delivery at the next tool-batch boundary.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when `content` is empty or whitespace.
    pub fn inject_user_message(&self, content: impl Into<String>) -> Result<()> {
        let content = content.into();
        if content.trim().is_empty() {
            return Err(Error::invalid("injected message must not be blank"));
        }
        self.items.lock().push_back(content);
        Ok(())
    }

    /// A copy of the pending messages, in delivery order.
    pub fn peek(&self) -> Vec<String> {
        self.items.lock().iter().cloned().collect()
    }

    /// Whether at least one message is pending.
    pub fn is_pending(&self) -> bool {
        !self.items.lock().is_empty()
    }

    /// Take every pending message, in delivery order.
    pub fn drain(&self) -> Vec<String> {
        let mut items = self.items.lock();
        if items.is_empty() {
            return Vec::new();
        }
        items.drain(..).collect()
    }
}

impl fmt::Display for Interloper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.items.lock().len() {
            0 => f.write_str("Interloper"),
            n => write!(f, "Interloper({n} pending)"),
        }
    }
}

impl fmt::Debug for Interloper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Interloper")
            .field("pending", &self.items.lock().len())
            .finish()
    }
}
