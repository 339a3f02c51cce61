//! A ureq failure that is not a timeout, as the crate's error: whether
//! the connection could not be made at all ([`Error::Connect`]) or broke
//! later ([`Error::Transport`]). One mapping for every request the crate
//! makes to a model server: the model client's, the model list's and
//! Gemini's context caches'.

use crate::Error;
use crate::util::redact_url_in;

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
