//! The loopback redirect of a login (RFC 8252 §7.3): a listener on
//! 127.0.0.1, the one request that brings the authorization answer back
//! from the browser, and the checks of that answer. The rest of the flow,
//! around it, is `flow.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::config::{AuthError, Result, local, refused, unusable};
use crate::codec::percent;
use crate::sanitize::sanitize;
use crate::util::excerpt;

/// The listener the browser is sent back to, and its redirect URI.
pub(super) struct Loopback {
    listener: TcpListener,
    /// `http://127.0.0.1:{port}/callback`.
    pub(super) uri: String,
}

impl Loopback {
    /// Listen on 127.0.0.1:`port` (0: a port the system picks).
    pub(super) fn bind(port: u16) -> Result<Loopback> {
        let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
            AuthError::Local(format!(
                "cannot listen on 127.0.0.1:{port} for the redirect: {e}"
            ))
        })?;
        let port = listener
            .local_addr()
            .map_err(|e| AuthError::Local(format!("the redirect listener has no address: {e}")))?
            .port();
        let uri = format!("http://127.0.0.1:{port}/callback");
        Ok(Loopback { listener, uri })
    }

    /// Accept connections until one asks for `/callback`, the time is up
    /// or the connection is closed; the query.
    pub(super) fn wait(&self, timeout: Duration, closed: &dyn Fn() -> bool) -> Result<String> {
        let listener = &self.listener;
        listener
            .set_nonblocking(true)
            .map_err(|e| AuthError::Local(format!("the redirect listener failed: {e}")))?;
        // `Duration::MAX` (a host's "no limit") saturates instead of panicking.
        let deadline = crate::util::instant_after(timeout);
        loop {
            if closed() {
                return local("the connection was closed during the login");
            }
            match listener.accept() {
                Ok((stream, _)) => {
                    let until = (Instant::now() + PER_CONNECTION).min(deadline);
                    if let Some(query) = serve_callback(stream, until) {
                        return Ok(query);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(AuthError::Timeout(format!(
                            "no authorization answer within {} s (the redirect to 127.0.0.1 never came)",
                            timeout.as_secs_f64()
                        )));
                    }
                    // A poll: std has no accept with a timeout.
                    std::thread::sleep(Duration::from_millis(25));
                }
                Err(e) => return local(format!("the redirect listener failed: {e}")),
            }
        }
    }
}

/// How long one connection may take to send its request: a browser sends
/// it at once, and the listener serves one connection at a time, so a
/// silent or trickling peer (a stuck prefetch, another local process) is
/// let go before it can hold up the browser's callback.
const PER_CONNECTION: Duration = Duration::from_secs(5);

/// A connection read until `until`, however its bytes arrive.
struct Until {
    stream: TcpStream,
    until: Instant,
}

impl Read for Until {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// Read one request, until `until` at the latest; answer it.
/// `Some(query)` when it was the callback.
fn serve_callback(stream: TcpStream, until: Instant) -> Option<String> {
    let _ = stream.set_nonblocking(false);
    let mut reader = BufReader::new(Until { stream, until }.take(8192));
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    // Drain the headers, so the browser sees an answer, not a reset.
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
        header.clear();
    }
    let mut stream = reader.into_inner().into_inner().stream;
    let target = line.split_whitespace().nth(1).unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let (status, body, found) = if path == "/callback" {
        (
            "200 OK",
            "Authorization received: you may close this window.",
            true,
        )
    } else {
        ("404 Not Found", "Not found.", false)
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
    found.then(|| query.to_string())
}

/// Check the authorization answer (`state`, then `iss` per RFC 9207 §2.4,
/// then an error) against the request's `state` and the authorization
/// server's `issuer` (whose metadata may promise `iss`); the code.
pub(super) fn check_answer(
    query: &str,
    state: &str,
    issuer: &str,
    iss_supported: bool,
) -> Result<String> {
    let pairs = percent::parse_form(query);
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if get("state") != Some(state) {
        return refused("the authorization answer's state does not match the request's");
    }
    // Compared as sent: no case folding or other normalization (the spec).
    match get("iss") {
        Some(iss) if iss != issuer => {
            return refused(format!(
                "the authorization answer came from issuer `{}`, not `{}` (RFC 9207)",
                sanitize(&excerpt(iss, 200)),
                sanitize(&excerpt(issuer, 200))
            ));
        }
        None if iss_supported => {
            return refused(
                "the authorization answer has no `iss` though the server's metadata promises one (RFC 9207)",
            );
        }
        _ => {}
    }
    if let Some(error) = get("error") {
        let text = match get("error_description") {
            Some(d) => format!("{error}: {d}"),
            None => error.to_string(),
        };
        return refused(format!(
            "the authorization was refused: {}",
            sanitize(&excerpt(&text, 200))
        ));
    }
    match get("code") {
        Some(code) if !code.is_empty() => Ok(code.to_string()),
        _ => unusable("the authorization answer has no code"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `check_answer` with the issuer `http://127.0.0.1:9/`, `iss`
    /// promised or not.
    fn check(query: &str, state: &str, iss_supported: bool) -> Result<String> {
        check_answer(query, state, "http://127.0.0.1:9/", iss_supported)
    }

    #[test]
    fn answers_are_checked_state_then_iss_then_error() {
        let ok = "code=c1&state=s&iss=http%3A%2F%2F127.0.0.1%3A9%2F";
        assert_eq!(check(ok, "s", true).unwrap(), "c1");
        assert_eq!(check("code=c1&state=s", "s", false).unwrap(), "c1");
        let err = |q: &str, m: bool| check(q, "s", m).unwrap_err().message().to_string();
        assert!(err("code=c1&state=t", false).contains("state"));
        assert!(err("code=c1&state=s", true).contains("no `iss`"));
        // No normalization: a missing trailing slash is another issuer,
        // and the error it carries is not shown.
        let e = err("error=evil&state=s&iss=http%3A%2F%2F127.0.0.1%3A9", false);
        assert!(e.contains("not `http://127.0.0.1:9/`") && !e.contains("evil"));
        assert!(err("error=access_denied&state=s", false).contains("refused: access_denied"));
        assert!(err("state=s", false).contains("no code"));
        // By cause: a failed check is a refusal, a missing code unusable.
        let cause = |q: &str| check(q, "s", false).unwrap_err();
        assert!(matches!(cause("code=c1&state=t"), AuthError::Refused(_)));
        assert!(matches!(
            cause("error=access_denied&state=s"),
            AuthError::Refused(_)
        ));
        assert!(matches!(cause("state=s"), AuthError::Unusable(_)));
    }
}
