//! Context-window probe (being written).
#![allow(dead_code)]
pub(crate) fn detect_context_window() -> Option<u64> {
    None
}
