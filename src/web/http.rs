//! The download engine shared by the web tools: one GET with redirects
//! followed by hand, every hop's addresses checked before connecting, the
//! connection pinned to the checked addresses, and bounds on size, time and
//! cancellation. See [`crate::web`] for the policy.

use std::io::Read;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use super::policy;
use super::url::Url;
use crate::ToolContext;
use crate::ToolError;
use crate::net::AgentSetup;

/// How often a blocked wait (name resolution) looks at the cancel flag.
const POLL: Duration = Duration::from_millis(20);

/// Bounds of one download.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub(crate) connect_timeout: Duration,
    pub(crate) read_timeout: Duration,
    pub(crate) total_timeout: Duration,
    pub(crate) max_bytes: usize,
    pub(crate) max_redirects: usize,
    pub(crate) allow_private: bool,
}

/// A completed download (status 2xx).
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub(crate) url: Url,
    /// The `Content-Type` header, or empty.
    pub(crate) content_type: String,
    pub(crate) body: Vec<u8>,
    /// The body was longer than `max_bytes` and was cut there.
    pub(crate) truncated: bool,
    /// ureq's body reader has already decoded `body` to UTF-8 from the
    /// charset the header names (see [`charset`](super::charset)).
    pub(crate) utf8: bool,
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// GET `url`, following up to `limits.max_redirects` redirects.
pub(crate) fn get(
    url: &str,
    headers: &[(&str, &str)],
    limits: &Limits,
    cx: &ToolContext,
) -> Result<Response, ToolError> {
    let deadline = crate::util::instant_after(limits.total_timeout);
    let mut url = Url::parse(url).map_err(|e| ToolError::new(format!("invalid URL: {e}")))?;
    for hop in 0..=limits.max_redirects {
        if url.scheme == "https" && !cfg!(feature = "rustls") {
            return Err(ToolError::new(format!(
                "cannot fetch {url}: https is not available (pikuri was built without its \
                 `rustls` feature)"
            )));
        }
        let addrs = resolve(&url, limits, deadline, cx)?;
        match exchange(&url, &addrs, headers, limits, deadline, cx)? {
            Step::Done(response) => return Ok(response),
            Step::Redirect(location) if hop < limits.max_redirects => {
                url = url.join(&location).map_err(|e| {
                    ToolError::new(format!("{url} redirected to an unusable location: {e}"))
                })?;
            }
            Step::Redirect(_) => break,
        }
    }
    Err(ToolError::new(format!(
        "too many redirects (more than {}), last to {url}",
        limits.max_redirects
    )))
}

fn cancelled() -> ToolError {
    ToolError::new("cancelled: the download was stopped before it finished")
}

/// Every address of `url`'s host, each checked against the policy.
fn resolve(
    url: &Url,
    limits: &Limits,
    deadline: Instant,
    cx: &ToolContext,
) -> Result<Vec<SocketAddr>, ToolError> {
    let host = url.bare_host().to_string();
    let port = url.port_or_default();
    let addrs: Vec<SocketAddr> = if let Ok(ip) = host.parse::<IpAddr>() {
        vec![SocketAddr::new(ip, port)]
    } else {
        // getaddrinfo cannot be interrupted: run it on a thread of its own and
        // stop waiting on cancel or timeout (the thread ends when it returns).
        let (tx, rx) = crossbeam_channel::bounded(1);
        let name = host.clone();
        std::thread::Builder::new()
            .name("pikuri-resolve".into())
            .spawn(move || {
                let _ = tx.send(
                    (name.as_str(), port)
                        .to_socket_addrs()
                        .map(Iterator::collect),
                );
            })
            .map_err(|e| ToolError::new(format!("cannot resolve {host}: {e}")))?;
        let give_up = deadline.min(crate::util::instant_after(limits.connect_timeout));
        loop {
            if cx.is_cancelled() {
                return Err(cancelled());
            }
            match rx.recv_timeout(POLL) {
                Ok(Ok(addrs)) => break addrs,
                Ok(Err(e)) => return Err(ToolError::new(format!("cannot resolve {host}: {e}"))),
                Err(_) if Instant::now() >= give_up => {
                    return Err(ToolError::new(format!("timed out resolving {host}")));
                }
                Err(_) => {}
            }
        }
    };
    if addrs.is_empty() {
        return Err(ToolError::new(format!("{host} has no address")));
    }
    for addr in &addrs {
        if let Some(why) = policy::refusal(addr.ip(), limits.allow_private) {
            return Err(ToolError::new(format!(
                "refused to fetch {url}: {host} is {} ({why}); only public internet \
                 addresses may be fetched",
                addr.ip()
            )));
        }
    }
    Ok(addrs)
}

/// A resolver that answers with addresses checked beforehand, and only for
/// the host they were checked for.
#[derive(Debug)]
struct Pinned {
    host: String,
    addrs: Vec<SocketAddr>,
}

impl Resolver for Pinned {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        _config: &ureq::config::Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.host().unwrap_or("");
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if !host.eq_ignore_ascii_case(&self.host) {
            return Err(ureq::Error::HostNotFound);
        }
        let mut out = self.empty();
        for addr in self.addrs.iter().take(16) {
            out.push(*addr);
        }
        Ok(out)
    }
}

enum Step {
    Done(Response),
    Redirect(String),
}

/// One request to the checked `addrs`, with no redirect followed.
fn exchange(
    url: &Url,
    addrs: &[SocketAddr],
    headers: &[(&str, &str)],
    limits: &Limits,
    deadline: Instant,
    cx: &ToolContext,
) -> Result<Step, ToolError> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        return Err(ToolError::new(format!(
            "timed out after {} fetching {url}",
            secs(limits.total_timeout)
        )));
    }
    let pinned = Pinned {
        host: url.bare_host().to_string(),
        addrs: addrs.to_vec(),
    };
    // Redirects are checked here, hop by hop; environment proxies would
    // resolve the host themselves, around the check.
    let agent = AgentSetup::new()
        .without_proxy()
        .with_connect_timeout(limits.connect_timeout)
        .with_read_timeout(limits.read_timeout)
        .with_total_timeout(remaining)
        .agent_with_resolver(pinned);
    // A cancel shuts the agent's sockets, so a blocked read returns at once.
    let slot = Arc::new(Mutex::new(Some(agent.clone())));
    let _hook = cx.cancellable().map(|c| {
        let slot = Arc::clone(&slot);
        c.on_cancel(move || {
            if let Some(agent) = slot.lock().take() {
                agent.shutdown();
            }
        })
    });
    let mut request = agent.get(url.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request
        .call()
        .map_err(|e| transport_error(&e, url, limits, cx))?;
    let status = response.status().as_u16();
    if matches!(status, 301 | 302 | 303 | 307 | 308) {
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                ToolError::new(format!(
                    "HTTP {status} redirect without a Location from {url}"
                ))
            })?;
        return Ok(Step::Redirect(location.to_string()));
    }
    if !(200..300).contains(&status) {
        let reason = response.status().canonical_reason().unwrap_or("");
        return Err(ToolError::new(
            format!("HTTP {status} {reason} from {url}")
                .trim_end()
                .to_string(),
        ));
    }
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    // ureq (with `charset`) decodes exactly the bodies whose own parse of
    // the header gives a `text/...` type and a charset; ask it, rather than
    // our parser, which lowercases and so would disagree on `Text/HTML`.
    let utf8 = response
        .body()
        .mime_type()
        .is_some_and(|m| m.starts_with("text/"))
        && response.body().charset().is_some();
    let mut reader = response.into_body().into_reader();
    let mut body = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut truncated = false;
    loop {
        if cx.is_cancelled() {
            return Err(cancelled());
        }
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return Err(read_error(&e, url, limits, cx)),
        };
        let room = limits.max_bytes - body.len();
        if n > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Step::Done(Response {
        url: url.clone(),
        content_type,
        body,
        truncated,
        utf8,
    }))
}

fn transport_error(e: &ureq::Error, url: &Url, limits: &Limits, cx: &ToolContext) -> ToolError {
    if cx.is_cancelled() {
        return cancelled();
    }
    ToolError::new(match e {
        ureq::Error::Timeout(ureq::Timeout::Connect) => {
            format!(
                "timed out connecting to {url} after {}",
                secs(limits.connect_timeout)
            )
        }
        ureq::Error::Timeout(ureq::Timeout::Global) => {
            format!(
                "timed out after {} fetching {url}",
                secs(limits.total_timeout)
            )
        }
        ureq::Error::Timeout(_) => format!(
            "timed out waiting for {url} (no data for {})",
            secs(limits.read_timeout)
        ),
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
            format!("could not connect to {url}")
        }
        other => format!("fetching {url} failed: {other}"),
    })
}

fn read_error(e: &std::io::Error, url: &Url, limits: &Limits, cx: &ToolContext) -> ToolError {
    let inner = e.get_ref().and_then(|r| r.downcast_ref::<ureq::Error>());
    match inner {
        Some(ue) => transport_error(ue, url, limits, cx),
        None if cx.is_cancelled() => cancelled(),
        None if e.kind() == std::io::ErrorKind::TimedOut => ToolError::new(format!(
            "timed out reading {url} (no data for {})",
            secs(limits.read_timeout)
        )),
        None => ToolError::new(format!("reading {url} failed: {e}")),
    }
}
