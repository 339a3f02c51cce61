//! Stub; being written.

use crate::{Event, Listener};

/// Stub.
#[derive(Debug, Default)]
pub struct TokenLog;

impl Listener for TokenLog {
    fn on_event(&mut self, event: &Event) {
        let _ = event;
    }
}
