//! The run journal's stand-in when the `journal` feature is off (declared
//! as `crate::journal` in `lib.rs`, in place of `journal/`).
//!
//! The agent's boundaries call the same crate-private seam in every build:
//! they build a [`Record`] and hand it to `Shared::journal`, which appends
//! it to the open [`Journal`], if any. Here no journal can ever be open
//! ([`Journal`] has no value), so every such call is a no-op and the
//! records are never serialized. The records themselves are the real ones
//! (`journal/record.rs`), so the call sites compile against one vocabulary
//! whatever the features.

use std::sync::Arc;

use crate::{FinishReason, Message, Result};

// Only `Record` is used without the feature: the header, the replay and
// the serializer serve the journal itself.
#[allow(
    dead_code,
    unreachable_pub,
    reason = "the replay's half is used only with the `journal` feature"
)]
#[path = "journal/order.rs"]
mod order;
#[allow(
    dead_code,
    unreachable_pub,
    reason = "the journal's own half of record.rs is used only with the `journal` feature"
)]
#[path = "journal/record.rs"]
mod record;
#[allow(
    dead_code,
    unreachable_pub,
    reason = "the stored names are read only with the `journal` feature"
)]
#[path = "journal/vocab.rs"]
mod vocab;

pub(crate) use record::Record;
pub(crate) use vocab::HistoryCause;

/// An open journal, which a build without the `journal` feature never has:
/// the type is uninhabited, so the agent's `OnceLock<Journal>` stays empty
/// and each method below is unreachable by construction (no panic path).
pub(crate) enum Journal {}

impl Journal {
    pub(crate) fn append(&self, _record: &Record<'_>) -> Result<()> {
        match *self {}
    }

    pub(crate) fn append_with<'r>(&self, _record: impl FnOnce() -> Record<'r>) -> Result<()> {
        match *self {}
    }

    pub(crate) fn check(&self) -> Result<()> {
        match *self {}
    }

    pub(crate) fn step(&self) -> u64 {
        match *self {}
    }

    pub(crate) fn key(&self, _call_id: &str) -> Arc<str> {
        match *self {}
    }

    pub(crate) fn response(
        &self,
        _message: &Message,
        _finish: FinishReason,
        _spent: (Option<crate::Spend>, Option<crate::Spend>),
    ) -> Result<()> {
        match *self {}
    }
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, _f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}
