//! [`DecodeError`]: why decoding a response failed. Its own file, below
//! both `sse.rs` and `decode/`, because both fail with it and `decode/`
//! drives the SSE parser: kept in either, the two would import each other.

use std::fmt;
use std::io;

/// Why decoding a response failed. Mapped to [`crate::Error`] once, by the
/// client; `Display` is the bare message (the mapping adds the prefix).
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// Not the transport's wire protocol: invalid SSE framing, a chunk or
    /// body that is not the expected JSON, a server `error` object, a size
    /// limit passed. Becomes [`Error::Protocol`](crate::Error::Protocol).
    Protocol(String),
    /// An error the server reported inside a stream (or a 200 body) that
    /// stands for an HTTP status on any API (an overload is 529, a rate
    /// limit 429, a server error 500: `rules::server_error`). Becomes
    /// [`Error::Http`](crate::Error::Http) with that status, so it is
    /// classified (and falls back) like the same error before the stream.
    #[cfg_attr(
        not(all(feature = "anthropic", feature = "responses", feature = "gemini")),
        allow(
            dead_code,
            reason = "reported by the other APIs' decoders, which are features"
        )
    )]
    Status { status: u16, message: String },
    /// The stream ended before its API's end event (`[DONE]` or a
    /// `finish_reason`, `message_stop`, `response.completed` or
    /// `.incomplete`), or the body was cut mid-frame. Becomes
    /// [`Error::Truncated`](crate::Error::Truncated).
    Truncated,
    /// A read of the body timed out. Becomes
    /// [`Error::Timeout`](crate::Error::Timeout) with the configured read
    /// timeout.
    TimedOut,
    /// Any other failed read. Becomes
    /// [`Error::Transport`](crate::Error::Transport) (or a timeout, when the
    /// HTTP library wrapped one).
    Io(io::Error),
}

impl DecodeError {
    /// Classify a failed read of a body.
    pub(crate) fn from_io(e: io::Error) -> DecodeError {
        match e.kind() {
            // std documents either kind for an expired socket read timeout,
            // depending on the platform.
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => DecodeError::TimedOut,
            _ => DecodeError::Io(e),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Protocol(m) => f.write_str(m),
            DecodeError::Status { message, .. } => f.write_str(message),
            DecodeError::Truncated => f.write_str("stream truncated before the end of the answer"),
            DecodeError::TimedOut => f.write_str("read timed out"),
            DecodeError::Io(e) => write!(f, "read failed: {e}"),
        }
    }
}

/// The one place a [`DecodeError`] becomes a public [`Error`](crate::Error); timeouts get
/// the configured read timeout, the API key (`secret`) is redacted from
/// any text the server sent, and `url` (already redacted) is the URL
/// requested.
pub(crate) fn decode_error(
    e: DecodeError,
    cfg: &super::HttpConfig,
    secret: Option<&str>,
    url: Option<&str>,
) -> crate::Error {
    let url = url.map(str::to_string);
    match e {
        DecodeError::Protocol(mut message) => {
            crate::util::redact_in(&mut message, secret);
            crate::Error::Protocol { message, url }
        }
        DecodeError::Status {
            status,
            mut message,
        } => {
            crate::util::redact_in(&mut message, secret);
            crate::Error::Http {
                status,
                message,
                url: url.unwrap_or_default(),
            }
        }
        DecodeError::Truncated => crate::Error::Truncated,
        DecodeError::TimedOut => crate::Error::Timeout {
            after: cfg.read_timeout,
            url,
        },
        DecodeError::Io(e) => crate::Error::Transport {
            url,
            source: Box::new(e),
        },
    }
}
