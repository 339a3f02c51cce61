//! The one error type for failures that abort a run.
//!
//! A tool's failure is *not* an [`Error`]: it goes back to the model as an
//! `"Error: ..."` observation and the loop continues (see [`crate::tool`]).
//! Everything here ends [`Agent::run_loop`](crate::Agent::run_loop) (or a
//! configuration call) and leaves the conversation history valid for the next
//! turn.

use std::fmt;
use std::time::Duration;

use crate::sanitize::sanitize;

/// A specialized `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can abort a run or a configuration call.
///
/// `Display` is a short lowercase phrase without a trailing period. The API key
/// never appears in it, nor in `Debug`. Text it quotes (a server's message, a
/// bad chunk) goes through [`sanitize`], so printing an error never sends a
/// control sequence to a terminal; the fields keep the exact text.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The server answered with a non-success HTTP status (after retries, for
    /// the retryable ones: 429, 500, 502, 503, 504).
    ///
    /// `message` is the server's own `{"error":{"message":..}}` text when the
    /// body has that shape, else the raw body, truncated.
    Http {
        /// The HTTP status code.
        status: u16,
        /// The server's message, or the start of its body.
        message: String,
    },
    /// The connection failed, was reset, or could not be made (after retries
    /// for failures before any response byte).
    Transport(Box<dyn std::error::Error + Send + Sync>),
    /// No byte arrived within the configured timeout.
    Timeout(Duration),
    /// The server sent something that is not the chat-completions protocol: a
    /// JSON chunk that does not parse, an oversized SSE line, a response body
    /// that is not the expected JSON, a response over the size limits of
    /// [`HttpConfig`](crate::HttpConfig).
    Protocol(String),
    /// The stream ended before `[DONE]` and before a `finish_reason`.
    Truncated,
    /// The [`Cancellable`](crate::Cancellable) was cancelled during the run.
    Cancelled,
    /// The [`StepLimit`](crate::StepLimit) ran out under the `Raise` policy.
    StepLimitExceeded {
        /// The budget that ran out.
        max: u32,
    },
    /// An argument or configuration was invalid: a blank user message, a zero
    /// step budget, duplicate tool names, an unknown persona tool,
    /// [`Agent::retry_turn`](crate::Agent::retry_turn) with nothing to retry.
    InvalidInput(String),
    /// A history was invalid: the JSON did not parse, had another version,
    /// or broke a rule of [`History`](crate::History#validity) (an unanswered
    /// tool call, an orphan tool message...). Nothing was built or loaded.
    History(String),
    /// The final answer of a typed turn ([`Agent::run_typed`](crate::Agent::run_typed))
    /// still did not parse, validate against the schema or deserialize after
    /// the allowed repairs. The history ends with that answer: it is valid
    /// and the next turn works.
    ///
    /// ```
    /// use pikuri::Error;
    /// let e = Error::InvalidAnswer {
    ///     problems: vec!["/n: expected integer, got string \"x\"".into(), "b".into()],
    ///     raw: r#"{"n": "x"}"#.into(),
    /// };
    /// assert_eq!(e.to_string(), r#"invalid answer: /n: expected integer, got string "x" (and 1 more problem)"#);
    /// ```
    InvalidAnswer {
        /// Every problem of the last answer, one sentence each.
        problems: Vec<String>,
        /// The last answer, as the model sent it.
        raw: String,
    },
}

impl Error {
    /// Whether this is [`Error::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Cancelled)
    }

    /// Whether this is [`Error::StepLimitExceeded`].
    pub fn is_step_limit(&self) -> bool {
        matches!(self, Error::StepLimitExceeded { .. })
    }

    /// The HTTP status, for [`Error::Http`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the server rejected the request because the conversation
    /// does not fit the model's context window: an [`Error::Http`] whose
    /// status and message match the forms of llama.cpp (`exceeds the
    /// available context size`), vLLM and OpenAI (`maximum context
    /// length`, `context_length_exceeded`) or Ollama (`input length exceeds
    /// ... context length`).
    ///
    /// With a [`Compaction`](crate::compaction::Compaction) set, the agent compacts
    /// and retries such a request once by itself; this error reaches the
    /// host only when the retry was rejected too (the kept turns alone do
    /// not fit) or when no compaction is set.
    ///
    /// ```
    /// use pikuri::Error;
    /// let e = Error::Http {
    ///     status: 400,
    ///     message: "the request exceeds the available context size, try increasing it".into(),
    /// };
    /// assert!(e.is_context_overflow());
    /// assert!(!Error::Http { status: 400, message: "bad model".into() }.is_context_overflow());
    /// ```
    pub fn is_context_overflow(&self) -> bool {
        match self {
            Error::Http { status, message } => crate::agent::is_context_overflow(*status, message),
            _ => false,
        }
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidInput(msg.into())
    }

    pub(crate) fn protocol(msg: impl Into<String>) -> Error {
        Error::Protocol(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Http { status, message } if message.is_empty() => {
                write!(f, "http status {status}")
            }
            Error::Http { status, message } => {
                write!(f, "http status {status}: {}", sanitize(message))
            }
            Error::Transport(e) => write!(f, "transport error: {}", sanitize(&e.to_string())),
            Error::Timeout(d) => write!(f, "timed out after {} ms", d.as_millis()),
            Error::Protocol(m) => write!(f, "protocol error: {}", sanitize(m)),
            Error::Truncated => f.write_str("stream truncated before [DONE]"),
            Error::Cancelled => f.write_str("cancelled"),
            Error::StepLimitExceeded { max } => write!(f, "step limit of {max} exceeded"),
            Error::InvalidInput(m) => write!(f, "invalid input: {}", sanitize(m)),
            Error::History(m) => write!(f, "invalid history: {}", sanitize(m)),
            Error::InvalidAnswer { problems, .. } => {
                let first = problems.first().map_or("", String::as_str);
                write!(f, "invalid answer: {}", sanitize(first))?;
                match problems.len() {
                    0 | 1 => Ok(()),
                    2 => f.write_str(" (and 1 more problem)"),
                    n => write!(f, " (and {} more problems)", n - 1),
                }
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Transport(e) => Some(&**e),
            _ => None,
        }
    }
}
