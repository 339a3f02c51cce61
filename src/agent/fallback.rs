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
//!   agent stays on it for later turns; [`Agent::run_loop_with`](crate::Agent::run_loop_with) goes back.
//! - The switch follows the rules of a model switch: the history is kept,
//!   reasoning written by another model is not sent to the new one, the
//!   context window is detected again. [`Event::ModelFallback`](crate::Event::ModelFallback) (with the
//!   failure as its reason) replaces [`Event::ModelSwitched`](crate::Event::ModelSwitched), then
//!   [`Event::ContextCap`](crate::Event::ContextCap) follows.
//! - When the last transport fails too, its error ends the turn.

use crate::{ChatTransport, Error, ErrorKind};

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

/// The transports a failing request falls back to, in order (see the
/// module docs).
#[derive(Debug, Default)]
pub(crate) struct Fallbacks {
    transports: Vec<ChatTransport>,
}

impl Fallbacks {
    pub(crate) fn new(transports: Vec<ChatTransport>) -> Fallbacks {
        Fallbacks { transports }
    }

    /// Where a request that failed with `err` on `current` goes next:
    /// `None` when the failure is not worth another server or the list is
    /// used up (the error ends the turn).
    pub(crate) fn next(&self, current: &ChatTransport, err: &Error) -> Option<ChatTransport> {
        if !worth_another_server(err) {
            return None;
        }
        // The one after the current transport; the first when the current
        // one is not in the list (it is the primary).
        let next = self
            .transports
            .iter()
            .position(|t| t == current)
            .map_or(0, |i| i + 1);
        self.transports.get(next).cloned()
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

    #[test]
    fn next_walks_the_list_once_and_only_for_server_failures() {
        let primary = ChatTransport::new("primary");
        let (a, b) = (ChatTransport::new("a"), ChatTransport::new("b"));
        let list = Fallbacks::new(vec![a.clone(), b.clone()]);
        let down = Error::Http {
            status: 503,
            message: "overloaded".into(),
            url: "http://h/v1/chat/completions".into(),
        };
        assert_eq!(list.next(&primary, &down), Some(a.clone()));
        assert_eq!(list.next(&a, &down), Some(b.clone()));
        assert_eq!(
            list.next(&b, &down),
            None,
            "the last one's error ends the turn"
        );
        assert_eq!(list.next(&primary, &Error::Cancelled), None);
        assert_eq!(Fallbacks::default().next(&primary, &down), None);
    }
}
