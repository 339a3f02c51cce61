//! Stub; being written.

use crate::{Event, Listener};

/// Stub.
#[derive(Debug, Default)]
pub struct Terminal;

impl Listener for Terminal {
    fn on_event(&mut self, event: &Event) {
        let _ = event;
    }
}
