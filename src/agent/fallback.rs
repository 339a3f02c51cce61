//! Failed requests, classified: a context overflow
//! ([`Error::is_context_overflow`], recovered by compaction) and a
//! server that stays down after its retries (recovered by moving the turn to
//! the next transport of [`Configurator::fallback`](crate::Configurator::fallback)).
//!
//! # Fallback rules
//!
//! - Only after the client's own retries ([`HttpConfig::with_max_retries`](crate::HttpConfig::with_max_retries))
//!   gave up, and only for errors another server may not have: HTTP 429 and
//!   5xx (529 "overloaded" included), timeouts, transport failures
//!   (connection refused, reset). A 4xx other than 429, a protocol error or a
//!   cancel ends the turn as before.
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
use crate::{Error, Event, Result};

/// Whether a request rejected with `status` and the server's `message`
/// (or raw body) was rejected because the conversation does not fit the
/// model's context window. The forms recognized, each as its server
/// writes it:
///
/// - llama.cpp: `request (5034 tokens) exceeds the available context size
///   (1024 tokens), try increasing it` (b11434; older builds: `the request
///   exceeds ...`), type `exceed_context_size_error`, 400.
/// - vLLM and OpenAI: `This model's maximum context length is 4096 tokens.
///   However, you requested ...`, 400 (OpenAI's code
///   `context_length_exceeded`).
/// - OpenAI's newer form: `Your input exceeds the context window of this
///   model.`
/// - Ollama: `input length exceeds maximum context length`, `the input
///   length exceeds the context length`, `prompt too long`.
/// - Any 413 (payload too large) whose message mentions tokens or context.
pub(crate) fn is_context_overflow(status: u16, message: &str) -> bool {
    if !(400..=499).contains(&status) && status != 500 {
        return false;
    }
    let m = message.to_ascii_lowercase();
    m.contains("exceed_context_size_error")
        || m.contains("context_length_exceeded")
        || m.contains("exceeds the available context size")
        || m.contains("maximum context length")
        || (m.contains("exceed") && m.contains("context length"))
        || (m.contains("exceed") && m.contains("context window"))
        || m.contains("prompt too long")
        || m.contains("prompt is too long")
        || (status == 413 && (m.contains("token") || m.contains("context")))
}

/// Whether another server might answer where this one failed after its
/// retries.
fn worth_another_server(e: &Error) -> bool {
    match e {
        Error::Http { status, message } => {
            (*status == 429 || (500..=599).contains(status))
                && !is_context_overflow(*status, message)
        }
        Error::Timeout(_) | Error::Transport(_) => true,
        _ => false,
    }
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
            // The probe may wait on the network.
            self.shared.listeners.hand_over();
            self.detect_and_emit_context_cap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_forms_of_real_servers() {
        // llama.cpp b11434, as its server answers a 5034-token prompt at -c 1024.
        assert!(is_context_overflow(
            400,
            "request (5034 tokens) exceeds the available context size (1024 tokens), try increasing it"
        ));
        // Older llama.cpp builds.
        assert!(is_context_overflow(
            400,
            "the request exceeds the available context size, try increasing it"
        ));
        assert!(is_context_overflow(
            400,
            r#"{"error":{"code":400,"message":"...","type":"exceed_context_size_error"}}"#
        ));
        // vLLM.
        assert!(is_context_overflow(
            400,
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."
        ));
        // OpenAI: the message and the code.
        assert!(is_context_overflow(
            400,
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages."
        ));
        assert!(is_context_overflow(
            400,
            "Your input exceeds the context window of this model. Please adjust your input and try again."
        ));
        assert!(is_context_overflow(
            400,
            r#"{"error":{"code":"context_length_exceeded"}}"#
        ));
        // Ollama.
        assert!(is_context_overflow(
            400,
            "input length exceeds maximum context length"
        ));
        assert!(is_context_overflow(
            400,
            "the input length exceeds the context length"
        ));
        assert!(is_context_overflow(500, "prompt too long"));
        // Not overflows.
        assert!(!is_context_overflow(400, "model not found"));
        assert!(!is_context_overflow(401, "invalid api key"));
        assert!(!is_context_overflow(503, "maximum context length"));
        assert!(!is_context_overflow(200, "maximum context length"));
    }

    #[test]
    fn fallback_only_for_server_side_failures() {
        let http = |status: u16, message: &str| Error::Http {
            status,
            message: message.into(),
        };
        assert!(worth_another_server(&http(503, "overloaded")));
        assert!(worth_another_server(&http(529, "overloaded")));
        assert!(worth_another_server(&http(429, "slow down")));
        assert!(worth_another_server(&Error::Timeout(
            std::time::Duration::from_secs(1)
        )));
        assert!(!worth_another_server(&http(400, "bad request")));
        assert!(!worth_another_server(&http(500, "prompt too long")));
        assert!(!worth_another_server(&Error::Cancelled));
        assert!(!worth_another_server(&Error::Truncated));
    }
}
