//! Stub; being written.

use crate::{Event, Listener};

/// Stub.
#[derive(Debug, Default)]
pub struct JsonLines;

impl Listener for JsonLines {
    fn on_event(&mut self, event: &Event) {
        let _ = event;
    }
}
