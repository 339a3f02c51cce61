//! The recording proxy's upstream client: pass one request on as received
//! and read the whole response. Used only by [`Recorder`](super::Recorder);
//! it talks to ureq directly rather than through the agent's client, because
//! a proxy must not retry, follow redirects or treat statuses as errors.

use std::io::Read;
use std::time::Duration;

use crate::net::AgentSetup;

/// Largest upstream response body kept (a long streamed answer is far less).
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;

/// Request headers not passed on: hop-by-hop ones, those ureq sets from the
/// request itself, and `Accept-Encoding`, so the upstream never compresses a
/// body the recorder stores as text.
const DROPPED_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "expect",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
    "accept-encoding",
];

/// A whole upstream response.
#[derive(Debug)]
pub(super) struct Forwarded {
    pub(super) status: u16,
    /// The `Content-Type`, or empty.
    pub(super) content_type: String,
    pub(super) body: Vec<u8>,
}

/// A ureq agent that reports every status as a response and follows no
/// redirect, so the client behind the recorder sees what the upstream sent.
#[derive(Debug)]
pub(super) struct Forwarder {
    agent: ureq::Agent,
}

impl Forwarder {
    pub(super) fn new() -> Forwarder {
        let agent = AgentSetup::new()
            .with_connect_timeout(Duration::from_secs(10))
            // A slow model may think for minutes before the first byte; the
            // client behind the recorder has its own read timeout.
            .with_response_timeout(Duration::from_secs(600))
            .with_read_timeout(Duration::from_secs(600))
            .with_user_agent(concat!("pikuri-recorder/", env!("CARGO_PKG_VERSION")))
            .agent();
        Forwarder { agent }
    }

    /// Send `method url` with `headers` (except [`DROPPED_HEADERS`]) and
    /// `body` (none when empty); read the full response. `Err` is a readable
    /// reason when no complete response arrived.
    pub(super) fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Result<Forwarded, String> {
        let mut builder = ureq::http::Request::builder().method(method).uri(url);
        for (name, value) in headers {
            if !DROPPED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                builder = builder.header(name.as_str(), value.as_str());
            }
        }
        let sent = if body.is_empty() {
            builder
                .body(())
                .map_err(|e| e.to_string())
                .and_then(|req| self.agent.run(req).map_err(|e| e.to_string()))
        } else {
            builder
                .body(body)
                .map_err(|e| e.to_string())
                .and_then(|req| self.agent.run(req).map_err(|e| e.to_string()))
        };
        let resp = sent?;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mut body = Vec::new();
        resp.into_body()
            .into_reader()
            .take(MAX_RESPONSE_BYTES + 1)
            .read_to_end(&mut body)
            .map_err(|e| format!("reading the response body: {e}"))?;
        if body.len() as u64 > MAX_RESPONSE_BYTES {
            return Err(format!("response body exceeds {MAX_RESPONSE_BYTES} bytes"));
        }
        Ok(Forwarded {
            status,
            content_type,
            body,
        })
    }
}
