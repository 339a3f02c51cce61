//! Failed requests, classified: a context overflow
//! ([`ErrorKind::ContextOverflow`], recovered by compaction) and a
//! server that stays down after its retries (recovered by moving the turn to
//! the next transport of [`Configurator::fallback`](crate::Configurator::fallback)).
//!
//! # Fallback rules
//!
//! - Only after the client's own retries ([`HttpConfig::with_max_retries`](crate::HttpConfig::with_max_retries))
//!   gave up, and only for errors another server may not have, by
//!   [`ErrorKind`]: `RateLimit` (429), `Server` (5xx, 529 "overloaded"
//!   included), `Timeout`, `Connect` (refused, unreachable) and `Transport`
//!   (reset). An overflow, a missing model, another 4xx, a protocol error
//!   or a cancel ends the turn as before.
//! - The next transport is the one after the current transport in the
//!   list (the first when the current one is not in it: the primary). The
//!   agent stays on it for later turns; [`Agent::run_loop_with`] goes back.
//! - The switch follows the rules of a model switch: the history is kept,
//!   reasoning written by another model is not sent to the new one, the
//!   context window is detected again. [`Event::ModelFallback`] (with the
//!   failure as its reason) replaces [`Event::ModelSwitched`], then
//!   [`Event::ContextCap`] follows.
//! - When the last transport fails too, its error ends the turn.

use super::Agent;
use crate::protocol::Completion;
use crate::{Error, ErrorKind, Event, Result};

/// Whether another server might answer where this one failed after its
/// retries.
fn worth_another_server(e: &Error) -> bool {
    // Failures of this server, not of the request: an overflow, a missing
    // model or a bad request would fail on the next server too.
    matches!(
        e.kind(),
        ErrorKind::RateLimit
            | ErrorKind::Server
            | ErrorKind::Timeout
            | ErrorKind::Connect
            | ErrorKind::Transport
    )
}

impl Agent {
    /// One request; on a failure worth another server, the next transport
    /// of the fallback list takes the turn over (see the module docs).
    pub(crate) fn request_with_fallback(&mut self) -> Result<Completion> {
        loop {
            let err = match self.request() {
                Err(e) if worth_another_server(&e) => e,
                other => return other,
            };
            let from = self.transport();
            let next = self
                .fallbacks
                .iter()
                .position(|t| *t == from)
                .map_or(0, |i| i + 1);
            let Some(to) = self.fallbacks.get(next).cloned() else {
                return Err(err);
            };
            self.shared.state.lock().transport = to.clone();
            self.emit(Event::ModelFallback {
                agent: self.agent_id(),
                from,
                to,
                reason: err.to_string(),
            });
            self.detect_and_emit_context_cap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_only_for_server_side_failures() {
        let http = |status: u16, message: &str| Error::Http {
            status,
            message: message.into(),
            url: "http://h/v1/chat/completions".into(),
        };
        assert!(worth_another_server(&http(503, "overloaded")));
        assert!(worth_another_server(&http(529, "overloaded")));
        assert!(worth_another_server(&http(429, "slow down")));
        assert!(worth_another_server(&Error::Timeout {
            after: std::time::Duration::from_secs(1),
            url: None,
        }));
        assert!(worth_another_server(&Error::Connect {
            url: "http://h/v1/chat/completions".into(),
            source: "refused".into(),
        }));
        assert!(!worth_another_server(&http(
            404,
            "model `m` does not exist"
        )));
        assert!(!worth_another_server(&http(400, "bad request")));
        assert!(!worth_another_server(&http(500, "prompt too long")));
        assert!(!worth_another_server(&Error::Cancelled));
        assert!(!worth_another_server(&Error::Truncated));
    }
}
