//! Stub; being written.

use crate::{Event, Listener};

/// Stub.
#[derive(Debug, Default)]
pub struct RateLimited;

impl Listener for RateLimited {
    fn on_event(&mut self, event: &Event) {
        let _ = event;
    }
}
