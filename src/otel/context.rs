//! `Context`: what the exporter, its threads and its handles share (the
//! counters and the trace context).

use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;

use super::span;

/// What the exporter, its threads and its handles share: the counters and
/// the trace context.
#[derive(Default)]
pub(super) struct Context {
    pub(super) exported: AtomicU64,
    pub(super) dropped: AtomicU64,
    pub(super) failed_exports: AtomicU64,
    pub(super) ids: Mutex<Ids>,
}

#[derive(Default)]
pub(super) struct Ids {
    /// The host's parent: trace id and span id.
    pub(super) parent: Option<(u128, u64)>,
    /// The current turn's trace id and `invoke_agent` span id.
    pub(super) current: Option<(u128, u64)>,
}

impl Context {
    /// The current turn's trace id, `invoke_agent` span id and parent span
    /// id, made by whoever asks first: the listener when the turn's first
    /// event arrives, or a request header sent before it did.
    pub(super) fn turn(&self) -> (u128, u64, Option<u64>) {
        let mut ids = self.ids.lock();
        let parent = ids.parent;
        let (trace, span) = *ids.current.get_or_insert_with(|| {
            let trace = parent.map_or_else(span::trace_id, |p| p.0);
            (trace, span::span_id())
        });
        (trace, span, parent.map(|p| p.1))
    }

    pub(super) fn end_turn(&self) {
        self.ids.lock().current = None;
    }
}
