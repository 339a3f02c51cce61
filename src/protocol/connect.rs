//! A ureq failure that is not a timeout, as the crate's error: whether
//! the connection could not be made at all ([`Error::Connect`]) or broke
//! later ([`Error::Transport`]). One mapping for every request the crate
//! makes to a model server: the model client's, the model list's and
//! Gemini's context caches'; and the one reading of the answer to a small
//! request beside the chats ([`small_answer`]: the model list, the
//! context caches).

use std::io::Read;
use std::time::Duration;

use crate::Error;
use crate::util::{redact_in, redact_url_in};

/// Whether `e` means the connection could not be made at all: refused,
/// unreachable, a name that does not resolve, a TLS handshake that failed,
/// a URL the client cannot use. (A reset is not: the server was there.)
pub(crate) fn cannot_connect(e: &ureq::Error) -> bool {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::ConnectionFailed
        | ureq::Error::HostNotFound
        | ureq::Error::BadUri(_)
        | ureq::Error::RequireHttpsOnly(_)
        | ureq::Error::TlsRequired
        | ureq::Error::Tls(_)
        | ureq::Error::InvalidProxyUrl
        | ureq::Error::ConnectProxyFailed(_) => true,
        #[cfg(feature = "rustls")]
        ureq::Error::Rustls(_) => true,
        ureq::Error::Io(io) => matches!(
            io.kind(),
            K::ConnectionRefused
                | K::HostUnreachable
                | K::NetworkUnreachable
                | K::AddrNotAvailable
                | K::NotFound
        ),
        _ => false,
    }
}

/// A ureq failure other than a timeout, as [`Error::Connect`] or
/// [`Error::Transport`] naming `shown` (the redacted form of `raw`, the URL
/// requested). An I/O error is kept as the source itself (its text reads
/// better than ureq's `io: ...`); an error whose text quotes the raw URL
/// (`bad uri: ...`) becomes that text with the URL's secrets redacted.
pub(crate) fn connection_error(e: ureq::Error, raw: &str, shown: &str) -> Error {
    let connect = cannot_connect(&e);
    let source: Box<dyn std::error::Error + Send + Sync> = match e {
        ureq::Error::Io(io) => Box::new(io),
        // Reached only past `ChatTransport::check` (a redirect, a probe):
        // still say what to do, not ureq's bare `TlsRequired`.
        ureq::Error::TlsRequired => match super::check_http_url("the URL", shown) {
            Err(why) => why.into(),
            Ok(()) => Box::new(ureq::Error::TlsRequired),
        },
        other => {
            let text = other.to_string();
            match redact_url_in(&text, raw) {
                std::borrow::Cow::Borrowed(_) => Box::new(other),
                std::borrow::Cow::Owned(redacted) => redacted.into(),
            }
        }
    };
    let url = shown.to_string();
    if connect {
        Error::Connect { url, source }
    } else {
        Error::Transport {
            url: Some(url),
            source,
        }
    }
}

/// The answer to a small request beside the chats (the model list,
/// Gemini's context caches) whose whole time was bounded by `timeout`:
/// its body, at most `max` bytes, on a success status. `sent` is what
/// ureq returned for `raw`, shown in errors as `shown`; a timeout is
/// [`Error::Timeout`] after `timeout`, any other failure
/// [`connection_error`], a failure status [`Error::Http`] with the body's
/// [error message](super::body::error_message) (with `key` redacted: a
/// server or proxy may echo it back, and `hint` appended), a longer body
/// [`Error::Protocol`] `<too_long> over <max> bytes`.
pub(crate) fn small_answer(
    sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    (raw, shown): (&str, &str),
    (timeout, max): (Duration, u64),
    key: Option<&str>,
    hint: impl FnOnce(u16, &str) -> Option<String>,
    too_long: &str,
) -> Result<Vec<u8>, Error> {
    let resp = sent.map_err(|e| match e {
        ureq::Error::Timeout(_) => Error::Timeout {
            after: timeout,
            url: Some(shown.to_string()),
        },
        other => connection_error(other, raw, shown),
    })?;
    let status = resp.status().as_u16();
    let mut body = Vec::new();
    resp.into_body()
        .into_reader()
        .take(max + 1)
        .read_to_end(&mut body)
        .map_err(|e| Error::Transport {
            url: Some(shown.to_string()),
            source: Box::new(e),
        })?;
    if !(200..300).contains(&status) {
        let mut message = super::body::error_message(&body);
        redact_in(&mut message, key);
        if let Some(hint) = hint(status, &message) {
            message.push_str(&hint);
        }
        return Err(Error::Http {
            status,
            message,
            url: shown.to_string(),
        });
    }
    if body.len() as u64 > max {
        return Err(Error::Protocol {
            message: format!("{too_long} over {max} bytes"),
            url: Some(shown.to_string()),
        });
    }
    Ok(body)
}
