//! The one error type for failures that abort a run, and its stable
//! [`ErrorKind`].
//!
//! A tool's failure is *not* an [`Error`]: it goes back to the model as an
//! `"Error: ..."` observation and the loop continues (see [`crate::tool`]).
//! Everything here ends [`Agent::run_loop`](crate::Agent::run_loop) (or a
//! configuration call) and leaves the conversation history valid for the next
//! turn.
//!
//! This module depends on nothing of the crate above it: what a server's
//! status and message mean (an overflow, a missing model) is decided here,
//! from the fields alone, so that every layer can build and classify errors
//! without importing the agent.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use crate::sanitize::sanitize;
use crate::spend::{Limit, Spend};

/// A specialized `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can abort a run or a configuration call.
///
/// Branch on [`kind`](Error::kind), a small `Copy` enum that stays stable
/// as variants gain fields; match the variants for their details (the
/// status, the server's message, the timeout that expired).
///
/// | [`ErrorKind`] | when | worth retrying? |
/// |---|---|---|
/// | [`Connect`](ErrorKind::Connect) | the connection could not be made: refused, unreachable, DNS, TLS handshake, a URL ureq cannot use ([`Error::Connect`]) | later, or on another server: the client already retried |
/// | [`Transport`](ErrorKind::Transport) | the connection failed once made: reset, closed early; an MCP server's process or pipe failed ([`Error::Transport`]) | yes ([`Agent::retry_turn`](crate::Agent::retry_turn)) |
/// | [`Timeout`](ErrorKind::Timeout) | a connect, read, idle or deadline bound expired ([`Error::Timeout`]) | yes |
/// | [`Auth`](ErrorKind::Auth) | HTTP 401 or 403 ([`Error::Http`]) | no: fix the key |
/// | [`CacheExpired`](ErrorKind::CacheExpired) | the Gemini context cache a request named expired or was deleted (Gemini's 403 `CachedContent not found`; the message names the cache) ([`Error::Http`]) | after creating it again ([`ChatTransport::create_cache`](crate::ChatTransport::create_cache)) |
/// | [`RateLimit`](ErrorKind::RateLimit) | HTTP 429 ([`Error::Http`]) | later: the client already waited and retried |
/// | [`ModelNotFound`](ErrorKind::ModelNotFound) | a 4xx whose message says the model does not exist (OpenAI's `model_not_found`, Ollama's `model "x" not found`) ([`Error::Http`]) | no: pick another model |
/// | [`ImageUnsupported`](ErrorKind::ImageUnsupported) | a 4xx (or a 500, as llama-server sends it; not retried) whose message says the model takes no images (llama-server without a vision projector, OpenAI's `image_url is only supported by certain models`, vLLM's `not a multimodal model`) ([`Error::Http`]) | not as is: another model, or the question without its images |
/// | [`ContextOverflow`](ErrorKind::ContextOverflow) | the conversation does not fit the model's window ([`Error::Http`], see [`is_context_overflow`](Error::is_context_overflow)) | not as is: compact or start afresh |
/// | [`Server`](ErrorKind::Server) | any other 5xx ([`Error::Http`]) | later, or on another server |
/// | [`Rejected`](ErrorKind::Rejected) | any other non-success status: a 4xx, a redirect ([`Error::Http`]) | no |
/// | [`Protocol`](ErrorKind::Protocol) | the server sent something that is not the protocol ([`Error::Protocol`]) | rarely |
/// | [`Truncated`](ErrorKind::Truncated) | a stream ended before its end event ([`Error::Truncated`]) | yes |
/// | [`Cancelled`](ErrorKind::Cancelled) | the [`Cancellable`](crate::Cancellable) fired ([`Error::Cancelled`]) | when the host wants to |
/// | [`StepLimit`](ErrorKind::StepLimit) | the step budget ran out ([`Error::StepLimitExceeded`]) | with a larger budget |
/// | [`Budget`](ErrorKind::Budget) | a spending limit was reached ([`Error::BudgetExceeded`]) | with a larger budget |
/// | [`Guardrail`](ErrorKind::Guardrail) | a [guard](crate::guard) stopped the run ([`Error::Guardrail`]) | not as is: the guard decided |
/// | [`InvalidInput`](ErrorKind::InvalidInput) | an argument or setting was invalid ([`Error::InvalidInput`]) | no |
/// | [`History`](ErrorKind::History) | a history did not parse or broke a rule ([`Error::History`]) | no |
/// | [`InvalidAnswer`](ErrorKind::InvalidAnswer) | a typed answer stayed invalid ([`Error::InvalidAnswer`]) | perhaps: the model may answer otherwise |
/// | [`JournalIo`](ErrorKind::JournalIo) | a [run journal](crate::journal) could not be written or read: a full disk, a read-only directory, a link or special file where it should be ([`Error::JournalIo`]) | after fixing the storage |
/// | [`JournalCorrupt`](ErrorKind::JournalCorrupt) | a journal does not read: a damaged record, a file that is not a journal, an impossible sequence, an unknown version ([`Error::JournalCorrupt`]) | no |
/// | [`JournalMismatch`](ErrorKind::JournalMismatch) | a journal was written by another configuration (tools, model, system prompt), or a new run's id is taken ([`Error::JournalMismatch`]) | with the configuration that wrote it |
/// | [`RunLocked`](ErrorKind::RunLocked) | another agent, in this process or another, holds the run ([`Error::RunLocked`]) | after that agent ended |
///
/// # Output
///
/// `Display` is one short lowercase line without a trailing period that
/// names the URL a server or transport error was talking to. `Debug` reads
/// as a sentence too, the `Display` line then the causes not already in it
/// (`Caused by:`), so `fn main() -> pikuri::Result<()>` prints what
/// happened; `{:#?}` prints the variant and its fields instead.
///
/// The API key never appears in either, and URLs are shown with their user
/// info and query values replaced by `<redacted>`. Text the error quotes (a
/// server's message, a bad chunk) goes through [`sanitize`], so printing an
/// error never sends a control sequence to a terminal; the fields keep the
/// exact text.
///
/// ```
/// use pikuri::{Agent, ChatTransport, ErrorKind, HttpConfig};
///
/// // A port nobody listens on.
/// let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
/// let transport = ChatTransport::new("m").with_api_base(format!("http://127.0.0.1:{port}/v1"));
/// let mut agent = Agent::builder(transport)
///     .http(HttpConfig::default().with_max_retries(0))
///     .build()?;
/// let err = agent.run_loop("hi").unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Connect);
/// let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
/// assert_eq!(err.url(), Some(url.as_str()));
/// assert!(format!("{err:?}").starts_with(&format!("cannot connect to {url}: ")));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
pub enum Error {
    /// The server answered with a non-success HTTP status (after retries, for
    /// the retryable ones: 429, 500, 502, 503, 504).
    ///
    /// `message` is the server's own `{"error":{"message":..}}` text when the
    /// body has that shape, followed by the error's `code` and `type` when
    /// they are strings the text does not already say, a type only when it
    /// is more than a generic class such as `invalid_request_error` (`Input
    /// too long. (code: context_length_exceeded)`);
    /// any other body is summarized, never quoted whole: an HTML page by its
    /// `<title>` and size, text by its first line (`an HTML page titled
    /// "404 Not Found" (1234 bytes), not an API answer: check the base
    /// URL`). At most 500 characters of the server's text are kept.
    /// [`Error::kind`] tells an auth failure, a rate limit, a missing
    /// model, an overflow and a server failure apart, from the status and
    /// this line (so from the code and type too).
    Http {
        /// The HTTP status code.
        status: u16,
        /// The server's message, or the start of its body.
        message: String,
        /// The URL requested, user info and query values redacted.
        url: String,
    },
    /// The connection could not be made: refused, host or network
    /// unreachable, the name did not resolve, the TLS handshake failed, or
    /// the URL is not one the client can use (after retries for failures
    /// before any response byte).
    Connect {
        /// The URL requested, user info and query values redacted.
        url: String,
        /// What failed (an [`std::io::Error`], or ureq's error; the type is
        /// not part of the API).
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The connection failed once it was made: reset, closed before the
    /// answer was complete, a read that failed; an MCP server's process
    /// or pipe failed.
    Transport {
        /// The URL requested, user info and query values redacted; `None`
        /// for a server reached over stdio.
        url: Option<String>,
        /// What failed (the type is not part of the API).
        source: Box<dyn StdError + Send + Sync>,
    },
    /// No byte arrived within the configured timeout, or the request
    /// deadline passed.
    Timeout {
        /// The bound that expired, as configured.
        after: Duration,
        /// The URL requested, user info and query values redacted; `None`
        /// for a server reached over stdio.
        url: Option<String>,
    },
    /// The server sent something that is not its API's wire protocol
    /// ([`Api`](crate::Api)): a JSON chunk that does not parse, an oversized SSE line, a response body
    /// that is not the expected JSON, a response over the size limits of
    /// [`HttpConfig`](crate::HttpConfig); an MCP server answered with an
    /// error; the compactor wrote an empty summary, or one over its bounds
    /// (see [`Compaction`](crate::compaction::Compaction#the-summary)).
    Protocol {
        /// What was wrong, quoting at most the start of what was sent.
        message: String,
        /// The URL requested, user info and query values redacted, when
        /// the error came from a server reached over HTTP.
        url: Option<String>,
    },
    /// The stream ended before its end event: chat completions' `[DONE]`
    /// or `finish_reason`, Anthropic's `message_stop`, Responses'
    /// `response.completed` or `response.incomplete`.
    Truncated,
    /// The [`Cancellable`](crate::Cancellable) was cancelled during the run.
    Cancelled,
    /// The [`StepLimit`](crate::StepLimit) ran out under the `Raise` policy.
    StepLimitExceeded {
        /// The budget that ran out.
        max: u32,
    },
    /// A [`Budget`](crate::Budget) limit was reached under the `Raise`
    /// policy (a request refused before it was sent, or a tool call not
    /// run): which one, and what the run had spent.
    BudgetExceeded {
        /// The limit reached.
        limit: Limit,
        /// What the run had spent when it stopped (the agent's lifetime
        /// spend when `lifetime`).
        spend: Box<Spend>,
        /// Whether the limit is over the agent's lifetime
        /// ([`Budget::lifetime`](crate::Budget::lifetime)), not the run's.
        lifetime: bool,
    },
    /// A [guard](crate::guard) stopped the run: its verdict was a stop, or
    /// it panicked, failed or overran its time bound (see
    /// [what the history holds](crate::guard#what-the-history-holds)).
    Guardrail {
        /// The name the guard was registered under.
        guard: String,
        /// Why: the guard's own reason, or what went wrong with it.
        reason: String,
    },
    /// An argument or configuration was invalid: a blank user message, a zero
    /// step budget, duplicate tool names, an unknown persona tool,
    /// [`Agent::retry_turn`](crate::Agent::retry_turn) with nothing to retry,
    /// a request on an [`Api`](crate::Api) this build leaves out (its Cargo
    /// feature, `anthropic` or `responses`, is off: nothing is sent, and
    /// the message names the feature).
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
    /// A [run journal](crate::journal) could not be written or read (a
    /// full disk, a read-only directory, a vanished file, a symbolic link or
    /// a special file where a journal or its lock should be). A journaled
    /// agent stops at the first failed write: the journal is never left
    /// with a gap.
    JournalIo {
        /// The run id.
        run: String,
        /// What failed.
        message: String,
    },
    /// A run journal does not read: a damaged record (a torn write after
    /// the last newline is a crash mid-write and is ignored), a file that
    /// is not a journal (never overwritten), a sequence no run writes (a
    /// hand edit), or a version newer than this reader's. Nothing was
    /// loaded.
    JournalCorrupt {
        /// The run id.
        run: String,
        /// What is wrong, with the record's number.
        message: String,
    },
    /// A run journal belongs to another configuration (its fingerprint of
    /// tools, model and system prompt differs from this agent's), or a new
    /// run was asked for under an id that already has a journal. Nothing
    /// was loaded.
    JournalMismatch {
        /// The run id.
        run: String,
        /// What differs.
        message: String,
    },
    /// Another agent, in this process or another, holds the run's lock:
    /// two resumers of one run cannot both proceed.
    RunLocked {
        /// The run id.
        run: String,
    },
}

/// What kind of failure an [`Error`] is: the stable thing to branch on.
///
/// New kinds may be added (it is `#[non_exhaustive]`); an error keeps its
/// kind across releases. See the table on [`Error`] for when each occurs.
///
/// ```
/// use pikuri::{Agent, ErrorKind, HttpConfig};
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.push(Reply::status(401, "invalid api key"));
/// let mut agent = Agent::builder(server.transport())
///     .http(HttpConfig::default().with_max_retries(0))
///     .build()?;
/// match agent.run_loop("hi").unwrap_err().kind() {
///     ErrorKind::Auth => {} // ask for another key
///     other => panic!("unexpected {other:?}"),
/// }
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The connection could not be made.
    Connect,
    /// The connection failed once made.
    Transport,
    /// A timeout or the request deadline expired.
    Timeout,
    /// The server refused the credentials (401, 403).
    Auth,
    /// The Gemini context cache the request named expired or was deleted.
    CacheExpired,
    /// The server asked to slow down (429).
    RateLimit,
    /// The server does not have the model asked for.
    ModelNotFound,
    /// The model takes no images, and the request carried some.
    ImageUnsupported,
    /// The conversation does not fit the model's context window.
    ContextOverflow,
    /// The server failed (another 5xx).
    Server,
    /// The server rejected the request (another non-success status).
    Rejected,
    /// The server broke the protocol.
    Protocol,
    /// A stream ended before its end event.
    Truncated,
    /// The run was cancelled.
    Cancelled,
    /// The step budget ran out.
    StepLimit,
    /// A [`Budget`](crate::Budget) limit was reached.
    Budget,
    /// A guard stopped the run.
    Guardrail,
    /// An argument or setting was invalid.
    InvalidInput,
    /// A history was invalid.
    History,
    /// A typed answer stayed invalid.
    InvalidAnswer,
    /// A run journal could not be written or read. This kind and the three
    /// below it exist in every build, so the enum has one shape; without the
    /// `journal` feature they never occur.
    JournalIo,
    /// A run journal does not read (damaged, edited, unknown version).
    JournalCorrupt,
    /// A run journal belongs to another configuration.
    JournalMismatch,
    /// Another agent holds the run.
    RunLocked,
}

impl Error {
    /// What kind of failure this is.
    ///
    /// ```
    /// use pikuri::{Error, ErrorKind};
    /// let http = |status: u16, message: &str| Error::Http {
    ///     status,
    ///     message: message.into(),
    ///     url: "http://127.0.0.1:8080/v1/chat/completions".into(),
    /// };
    /// assert_eq!(http(403, "forbidden").kind(), ErrorKind::Auth);
    /// assert_eq!(
    ///     http(403, "CachedContent not found (or permission denied)").kind(),
    ///     ErrorKind::CacheExpired
    /// );
    /// assert_eq!(http(429, "slow down").kind(), ErrorKind::RateLimit);
    /// assert_eq!(http(404, r#"model "qwen9" not found, try pulling it first"#).kind(), ErrorKind::ModelNotFound);
    /// assert_eq!(http(503, "loading model").kind(), ErrorKind::Server);
    /// assert_eq!(http(404, "page not found").kind(), ErrorKind::Rejected);
    /// assert_eq!(Error::Cancelled.kind(), ErrorKind::Cancelled);
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Http {
                status, message, ..
            } => http_kind(*status, message),
            Error::Connect { .. } => ErrorKind::Connect,
            Error::Transport { .. } => ErrorKind::Transport,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::Protocol { .. } => ErrorKind::Protocol,
            Error::Truncated => ErrorKind::Truncated,
            Error::Cancelled => ErrorKind::Cancelled,
            Error::StepLimitExceeded { .. } => ErrorKind::StepLimit,
            Error::BudgetExceeded { .. } => ErrorKind::Budget,
            Error::Guardrail { .. } => ErrorKind::Guardrail,
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::History(_) => ErrorKind::History,
            Error::InvalidAnswer { .. } => ErrorKind::InvalidAnswer,
            Error::JournalIo { .. } => ErrorKind::JournalIo,
            Error::JournalCorrupt { .. } => ErrorKind::JournalCorrupt,
            Error::JournalMismatch { .. } => ErrorKind::JournalMismatch,
            Error::RunLocked { .. } => ErrorKind::RunLocked,
        }
    }

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

    /// The URL the failed request went to, with user info and query values
    /// replaced by `<redacted>`: for [`Error::Http`] and [`Error::Connect`]
    /// always, for [`Error::Transport`], [`Error::Timeout`] and
    /// [`Error::Protocol`] when the server was reached over HTTP.
    pub fn url(&self) -> Option<&str> {
        match self {
            Error::Http { url, .. } | Error::Connect { url, .. } => Some(url),
            Error::Transport { url, .. }
            | Error::Timeout { url, .. }
            | Error::Protocol { url, .. } => url.as_deref(),
            _ => None,
        }
    }

    /// Whether the server rejected the request because the conversation
    /// does not fit the model's context window: whether
    /// [`kind`](Error::kind) is [`ErrorKind::ContextOverflow`]. That is an
    /// [`Error::Http`] whose status (a 4xx other than 401, 403 and 429, or
    /// a 500) and message match the forms of:
    ///
    /// - llama.cpp: `request (5034 tokens) exceeds the available context
    ///   size (1024 tokens), try increasing it` (b11434; older builds: `the
    ///   request exceeds ...`), type `exceed_context_size_error`, 400.
    /// - vLLM and OpenAI: `This model's maximum context length is 4096
    ///   tokens. However, you requested ...`, 400 (OpenAI's code
    ///   `context_length_exceeded`); OpenAI's newer `Your input exceeds the
    ///   context window of this model.`
    /// - Ollama: `input length exceeds maximum context length`, `the input
    ///   length exceeds the context length`, `prompt too long`.
    /// - Anthropic: `prompt is too long: 210000 tokens > 200000 maximum`,
    ///   type `invalid_request_error`, 400.
    /// - Any 413 (payload too large) whose message mentions tokens or
    ///   context.
    ///
    /// The structured fields count as much as the text: a body whose `code`
    /// or `type` is `context_length_exceeded` or `exceed_context_size_error`
    /// is an overflow whatever its message says (the client keeps both in
    /// the [message](Error::Http)).
    ///
    /// With a [`Compaction`](crate::compaction::Compaction) set, the agent compacts
    /// and retries such a request once by itself; this error reaches the
    /// host only when the retry was rejected too (the kept turns alone do
    /// not fit) or when no compaction is set. The client does not retry it.
    ///
    /// ```
    /// use pikuri::Error;
    /// let http = |status: u16, message: &str| Error::Http {
    ///     status,
    ///     message: message.into(),
    ///     url: "http://127.0.0.1:8080/v1/chat/completions".into(),
    /// };
    /// assert!(http(400, "the request exceeds the available context size, try increasing it").is_context_overflow());
    /// assert!(!http(400, "bad model").is_context_overflow());
    /// // OpenAI's code, next to a message that does not say it.
    /// assert!(http(400, "Input too long. (code: context_length_exceeded)").is_context_overflow());
    /// ```
    pub fn is_context_overflow(&self) -> bool {
        self.kind() == ErrorKind::ContextOverflow
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidInput(msg.into())
    }

    /// A protocol error not tied to a URL (the URL, when known, is set
    /// where the request was made).
    pub(crate) fn protocol(msg: impl Into<String>) -> Error {
        Error::Protocol {
            message: msg.into(),
            url: None,
        }
    }

    /// The struct form, for `{:#?}`.
    fn fmt_fields(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Http {
                status,
                message,
                url,
            } => f
                .debug_struct("Http")
                .field("status", status)
                .field("message", message)
                .field("url", url)
                .finish(),
            Error::Connect { url, source } => f
                .debug_struct("Connect")
                .field("url", url)
                .field("source", source)
                .finish(),
            Error::Transport { url, source } => f
                .debug_struct("Transport")
                .field("url", url)
                .field("source", source)
                .finish(),
            Error::Timeout { after, url } => f
                .debug_struct("Timeout")
                .field("after", after)
                .field("url", url)
                .finish(),
            Error::Protocol { message, url } => f
                .debug_struct("Protocol")
                .field("message", message)
                .field("url", url)
                .finish(),
            Error::Truncated => f.write_str("Truncated"),
            Error::Cancelled => f.write_str("Cancelled"),
            Error::StepLimitExceeded { max } => f
                .debug_struct("StepLimitExceeded")
                .field("max", max)
                .finish(),
            Error::BudgetExceeded {
                limit,
                spend,
                lifetime,
            } => f
                .debug_struct("BudgetExceeded")
                .field("limit", limit)
                .field("spend", spend)
                .field("lifetime", lifetime)
                .finish(),
            Error::Guardrail { guard, reason } => f
                .debug_struct("Guardrail")
                .field("guard", guard)
                .field("reason", reason)
                .finish(),
            Error::InvalidInput(m) => f.debug_tuple("InvalidInput").field(m).finish(),
            Error::History(m) => f.debug_tuple("History").field(m).finish(),
            Error::InvalidAnswer { problems, raw } => f
                .debug_struct("InvalidAnswer")
                .field("problems", problems)
                .field("raw", raw)
                .finish(),
            Error::JournalIo { run, message } => f
                .debug_struct("JournalIo")
                .field("run", run)
                .field("message", message)
                .finish(),
            Error::JournalCorrupt { run, message } => f
                .debug_struct("JournalCorrupt")
                .field("run", run)
                .field("message", message)
                .finish(),
            Error::JournalMismatch { run, message } => f
                .debug_struct("JournalMismatch")
                .field("run", run)
                .field("message", message)
                .finish(),
            Error::RunLocked { run } => f.debug_struct("RunLocked").field("run", run).finish(),
        }
    }
}

/// The kind of an HTTP failure, from its status and the server's message.
/// The status decides first where it is unambiguous (401, 403, 429); the
/// message then tells an overflow or a missing model from another 4xx,
/// because servers send both as a plain 400 or 404.
fn http_kind(status: u16, message: &str) -> ErrorKind {
    // Each test reads the message lowercased: once, here.
    let m = &message.to_ascii_lowercase();
    match status {
        _ if cache_gone(status, m) => ErrorKind::CacheExpired,
        401 | 403 => ErrorKind::Auth,
        429 => ErrorKind::RateLimit,
        _ if is_context_overflow(status, m) => ErrorKind::ContextOverflow,
        _ if is_image_unsupported(status, m) => ErrorKind::ImageUnsupported,
        _ if is_model_not_found(status, m) => ErrorKind::ModelNotFound,
        500..=599 => ErrorKind::Server,
        _ => ErrorKind::Rejected,
    }
}

/// Whether a refusal says a Gemini context cache is gone: Gemini answers a
/// request naming a cache that expired or was deleted with 403
/// `PERMISSION_DENIED`, "CachedContent not found (or permission denied)"
/// (404 on some paths). Before the 403 of a refused key.
#[cfg_attr(
    not(feature = "gemini"),
    allow(dead_code, reason = "the Gemini cache asks it of a refusal")
)]
pub(crate) fn is_cache_gone(status: u16, message: &str) -> bool {
    cache_gone(status, &message.to_ascii_lowercase())
}

/// [`is_cache_gone`] of a message already lowercased (`m`).
fn cache_gone(status: u16, m: &str) -> bool {
    if !matches!(status, 403 | 404) {
        return false;
    }
    m.contains("cachedcontent not found")
        || m.contains("cached content not found")
        || (m.contains("cachedcontent") && m.contains("expired"))
}

/// See [`Error::is_context_overflow`] for the forms recognized; `m` is the
/// message lowercased.
fn is_context_overflow(status: u16, m: &str) -> bool {
    // Ollama answers `prompt too long` with a 500; any other 5xx is the
    // server's own trouble, whatever its text says.
    if !(400..=499).contains(&status) && status != 500 {
        return false;
    }
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

/// Whether a 4xx (or a 500: llama-server's `image input is not supported`)
/// says the model takes no images: the message names images (or vision,
/// or multimodal input) and says they are not supported. Before the
/// missing-model test: vLLM's "is not a multimodal model" names the model
/// too. A 4xx about an image that is merely too large or broken is not
/// this: it says nothing of support. `m` is the message lowercased.
fn is_image_unsupported(status: u16, m: &str) -> bool {
    if !(400..=499).contains(&status) && status != 500 {
        return false;
    }
    (m.contains("image") || m.contains("vision") || m.contains("multimodal"))
        && (m.contains("support")
            || m.contains("not a multimodal")
            || m.contains("mmproj")
            || m.contains("invalid content type"))
}

/// Whether a 4xx says the model does not exist: OpenAI's and vLLM's `The
/// model `x` does not exist`, code `model_not_found`; Ollama's `model "x"
/// not found, try pulling it first`; OpenRouter's `x is not a valid model
/// ID`. A 404 that does not mention a model is a wrong path, not a
/// missing model. `m` is the message lowercased.
fn is_model_not_found(status: u16, m: &str) -> bool {
    if !(400..=499).contains(&status) {
        return false;
    }
    m.contains("model_not_found")
        || (m.contains("model")
            && (m.contains("not found")
                || m.contains("does not exist")
                || m.contains("no such")
                || m.contains("unknown model")
                || m.contains("not a valid model")))
}

/// `text` with its first letter lowercased when the second is lowercase
/// too (`Connection refused` → `connection refused`, but `TLS` stays), so
/// a cause reads on in a sentence. ASCII letters only: the causes are the
/// system's and the libraries' English messages, and Unicode's case tables
/// would add 16 KB to every program that prints an error (issue 36's small
/// CLI); a non-ASCII first letter stays as it is.
fn lower_first(text: &str) -> std::borrow::Cow<'_, str> {
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_ascii_uppercase() && b.is_ascii_lowercase() => {
            let mut out = String::with_capacity(text.len());
            out.push(a.to_ascii_lowercase());
            out.push_str(&text[1..]);
            out.into()
        }
        _ => text.into(),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Http {
                status,
                message,
                url,
            } => {
                write!(f, "http status {status} from {}", sanitize(url))?;
                if !message.is_empty() {
                    write!(f, ": {}", sanitize(message))?;
                }
                Ok(())
            }
            Error::Connect { url, source } => write!(
                f,
                "cannot connect to {}: {}",
                sanitize(url),
                lower_first(&sanitize(&source.to_string()))
            ),
            Error::Transport { url, source } => {
                let why = source.to_string();
                let why = sanitize(&why);
                match url {
                    Some(url) => write!(
                        f,
                        "connection to {} failed: {}",
                        sanitize(url),
                        lower_first(&why)
                    ),
                    None => write!(f, "transport error: {why}"),
                }
            }
            Error::Timeout { after, url } => {
                write!(f, "timed out after {} ms", crate::util::millis(*after))?;
                if let Some(url) = url {
                    write!(f, " waiting for {}", sanitize(url))?;
                }
                Ok(())
            }
            Error::Protocol { message, url } => match url {
                Some(url) => write!(
                    f,
                    "protocol error from {}: {}",
                    sanitize(url),
                    sanitize(message)
                ),
                None => write!(f, "protocol error: {}", sanitize(message)),
            },
            Error::Truncated => f.write_str("stream truncated before the end of the answer"),
            Error::Cancelled => f.write_str("cancelled"),
            Error::StepLimitExceeded { max } => write!(f, "step limit of {max} exceeded"),
            Error::BudgetExceeded {
                limit,
                spend,
                lifetime,
            } => {
                let scope = if *lifetime { "lifetime " } else { "" };
                write!(
                    f,
                    "budget exceeded: {scope}{limit} limit reached after {spend}"
                )
            }
            Error::Guardrail { guard, reason } => write!(
                f,
                "stopped by guard {}: {}",
                sanitize(guard),
                sanitize(reason)
            ),
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
            Error::JournalIo { run, message } => {
                write!(f, "journal of run {}: {}", sanitize(run), sanitize(message))
            }
            Error::JournalCorrupt { run, message } => write!(
                f,
                "journal of run {} is damaged: {}",
                sanitize(run),
                sanitize(message)
            ),
            Error::JournalMismatch { run, message } => write!(
                f,
                "journal of run {} does not match this agent: {}",
                sanitize(run),
                sanitize(message)
            ),
            Error::RunLocked { run } => write!(
                f,
                "run {} is held by another agent (another process may be resuming it)",
                sanitize(run)
            ),
        }
    }
}

/// A sentence, as anyhow prints one: the `Display` line, then under
/// `Caused by:` each cause in the `source()` chain whose text the line does
/// not already say. `{:#?}` prints the variant and its fields.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            return self.fmt_fields(f);
        }
        let line = self.to_string();
        f.write_str(&line)?;
        // ASCII case folding, as `lower_first` lowercases (see there).
        let said = line.to_ascii_lowercase();
        let mut causes = Vec::new();
        let mut next = StdError::source(self);
        while let Some(cause) = next {
            let text = sanitize(&cause.to_string()).into_owned();
            // The line usually quotes the innermost cause already
            // (`... : connection refused (os error 111)`): saying it twice
            // adds nothing.
            if !text.is_empty() && !said.contains(&text.to_ascii_lowercase()) {
                causes.push(text);
            }
            next = cause.source();
        }
        match causes.as_slice() {
            [] => Ok(()),
            [one] => write!(f, "\n\nCaused by:\n    {one}"),
            many => {
                f.write_str("\n\nCaused by:")?;
                for (i, cause) in many.iter().enumerate() {
                    write!(f, "\n    {i}: {cause}")?;
                }
                Ok(())
            }
        }
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Connect { source, .. } | Error::Transport { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, message: &str) -> Error {
        Error::Http {
            status,
            message: message.into(),
            url: "http://h/v1/chat/completions".into(),
        }
    }

    #[test]
    fn overflow_forms_of_real_servers() {
        let overflows = [
            // llama.cpp b11434, as its server answers a 5034-token prompt at -c 1024.
            (
                400,
                "request (5034 tokens) exceeds the available context size (1024 tokens), try increasing it",
            ),
            // Older llama.cpp builds.
            (
                400,
                "the request exceeds the available context size, try increasing it",
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"...","type":"exceed_context_size_error"}}"#,
            ),
            // vLLM.
            (
                400,
                "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
            ),
            // OpenAI: the message and the code.
            (
                400,
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
            ),
            (
                400,
                "Your input exceeds the context window of this model. Please adjust your input and try again.",
            ),
            (400, r#"{"error":{"code":"context_length_exceeded"}}"#),
            // Ollama.
            (400, "input length exceeds maximum context length"),
            (400, "the input length exceeds the context length"),
            (500, "prompt too long"),
            (413, "too many tokens"),
        ];
        for (status, message) in overflows {
            assert_eq!(
                http(status, message).kind(),
                ErrorKind::ContextOverflow,
                "{status} {message}"
            );
        }
        // Not overflows.
        assert_eq!(
            http(400, "model not found").kind(),
            ErrorKind::ModelNotFound
        );
        assert_eq!(http(401, "invalid api key").kind(), ErrorKind::Auth);
        // Gemini's answer for a context cache that expired or was deleted is
        // a 403, but no key was refused.
        let gone = "CachedContent not found (or permission denied)";
        assert_eq!(http(403, gone).kind(), ErrorKind::CacheExpired);
        assert_eq!(http(404, gone).kind(), ErrorKind::CacheExpired);
        assert_eq!(http(403, "API key not valid").kind(), ErrorKind::Auth);
        assert_eq!(http(400, gone).kind(), ErrorKind::Rejected);
        assert_eq!(
            http(503, "maximum context length").kind(),
            ErrorKind::Server
        );
        assert_eq!(http(413, "body too large").kind(), ErrorKind::Rejected);
        assert!(!http(200, "maximum context length").is_context_overflow());
    }

    #[test]
    fn missing_models_as_servers_word_them() {
        for message in [
            "The model `gpt-9` does not exist or you do not have access to it.",
            r#"{"error":{"code":"model_not_found"}}"#,
            r#"model "llama9" not found, try pulling it first"#,
            "foo/bar is not a valid model ID",
        ] {
            assert_eq!(
                http(404, message).kind(),
                ErrorKind::ModelNotFound,
                "{message}"
            );
        }
        assert_eq!(http(404, "File Not Found").kind(), ErrorKind::Rejected);
        assert_eq!(http(500, "model not found").kind(), ErrorKind::Server);
        assert_eq!(http(302, "").kind(), ErrorKind::Rejected);
    }

    #[test]
    fn models_without_vision_as_servers_word_them() {
        for message in [
            "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj",
            "Invalid content type. image_url is only supported by certain models.",
            "Qwen/Qwen3-8B is not a multimodal model",
            "This model does not support image input.",
        ] {
            assert_eq!(
                http(400, message).kind(),
                ErrorKind::ImageUnsupported,
                "{message}"
            );
        }
        assert_eq!(
            http(400, "image exceeds 5 MB maximum").kind(),
            ErrorKind::Rejected
        );
        // llama-server sends it as a 500; another 5xx is the server's own
        // trouble.
        assert_eq!(
            http(500, "image input is not supported").kind(),
            ErrorKind::ImageUnsupported
        );
        assert_eq!(
            http(503, "image input is not supported").kind(),
            ErrorKind::Server
        );
    }

    #[test]
    fn causes_already_in_the_line_are_not_repeated() {
        let e = Error::Connect {
            url: "http://h/v1".into(),
            source: Box::new(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "Connection refused (os error 111)",
            )),
        };
        assert_eq!(
            format!("{e:?}"),
            "cannot connect to http://h/v1: connection refused (os error 111)"
        );
        assert!(format!("{e:#?}").starts_with("Connect {"));
        let e = Error::Transport {
            url: None,
            source: Box::new(std::io::Error::other(Error::Cancelled)),
        };
        assert_eq!(format!("{e:?}"), "transport error: cancelled");
        assert_eq!(lower_first("TLS failed"), "TLS failed");
        assert_eq!(lower_first("É"), "É");
        assert_eq!(lower_first("Connection reset"), "connection reset");
        // ASCII only (see `lower_first`): no case tables in the binary.
        assert_eq!(lower_first("Échec"), "Échec");
    }
}
