//! [`Recorder`]: a loopback proxy that records a real session into a
//! [`Cassette`]. It is the [`FakeServer`](super::FakeServer)'s listener and connection code
//! with another [`Responder`], the [`Proxy`]: it passes every request on
//! (through `forward.rs`) and keeps what came back.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use super::cassette::{Cassette, Interaction, request_value};
use super::conn::Answer;
use super::forward::Forwarder;
use super::render;
use super::request::RecordedRequest;
use super::server::{Reaction, Responder, Server};
use crate::ChatTransport;

/// Records a real session: a proxy on `127.0.0.1` and a free port that
/// passes every request to the upstream server and keeps each request and
/// response as an [`Interaction`].
///
/// Point the agent at [`base_url`](Recorder::base_url) (or use
/// [`transport_for`](Recorder::transport_for)), run it, then
/// [`save`](Recorder::save) the [`Cassette`]. The
/// [module docs](super#record-and-replay) walk through turning a llama.cpp
/// session into a regression test.
///
/// # Examples
///
/// ```
/// use pikuri::Agent;
/// use pikuri::testing::{FakeServer, Recorder, Reply};
///
/// // The "real" server; in practice llama.cpp at http://127.0.0.1:8080/v1.
/// let upstream = FakeServer::start();
/// upstream.push(Reply::text("Hello!"));
///
/// let recorder = Recorder::start(&upstream.base_url());
/// let mut agent = Agent::builder(recorder.transport_for("fake-model")).build()?;
/// assert_eq!(agent.run_loop("Hi")?.answer.as_deref(), Some("Hello!"));
///
/// let cassette = recorder.cassette();
/// let chat = cassette.interactions().iter().find(|i| i.path == "/v1/chat/completions").unwrap();
/// assert_eq!(chat.request["messages"][0]["content"], "Hi");
/// assert!(chat.body.contains("Hello!"));
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # What is recorded
///
/// Every request, whatever its path (chat completions, and the agent's
/// context-window probes such as `GET /props`), in the order the responses
/// completed: method, target, body, and the response's status,
/// `Content-Type` and whole body. Request headers are passed on (except
/// hop-by-hop ones and `Accept-Encoding`) but never recorded, so the API key
/// in `Authorization` stays out of the cassette. Other response headers
/// (`Retry-After`, …) are neither recorded nor passed back.
///
/// # Streams
///
/// The proxy reads the upstream's whole response before answering, so a
/// streamed answer reaches the client at once, as one body framed with
/// `Content-Length`, when generation has finished. The SSE events and their
/// order are kept; their timing is not. Give the client a read timeout
/// longer than the longest generation.
///
/// # Errors
///
/// When the upstream cannot be reached or its response cannot be read, the
/// client gets `502` with an OpenAI error body starting `Recorder:`, logged
/// at `warn`, and nothing is recorded.
///
/// # Thread safety
///
/// `Send + Sync`; each connection is served on its own thread, as by
/// [`FakeServer`](super::FakeServer).
pub struct Recorder {
    server: Server,
    proxy: Arc<Proxy>,
    upstream: String,
    base_path: String,
}

/// The recorder's [`Responder`]: where to forward, and what was recorded.
#[derive(Debug)]
struct Proxy {
    upstream: Arc<Upstream>,
    /// What was passed on, in order of completion.
    recorded: Arc<Mutex<Vec<Interaction>>>,
}

/// Where the proxy forwards to.
#[derive(Debug)]
struct Upstream {
    /// `scheme://host:port`, no path.
    origin: String,
    forwarder: Forwarder,
}

/// One request to pass on.
#[derive(Debug)]
struct Forward {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    /// The body as an [`Interaction::request`].
    request: serde_json::Value,
    /// The body as received, passed on byte for byte.
    body: Vec<u8>,
}

impl Responder for Proxy {
    fn respond(&self, req: &RecordedRequest, body: &[u8], _number: usize) -> Reaction {
        let f = Forward {
            method: req.method.clone(),
            path: req.path.clone(),
            headers: req.headers.clone(),
            request: request_value(req),
            body: body.to_vec(),
        };
        let upstream = Arc::clone(&self.upstream);
        let recorded = Arc::clone(&self.recorded);
        // The upstream may think for minutes: never while the server's
        // request log is locked.
        Reaction::Later(Box::new(move || forward(&upstream, &recorded, &f)))
    }
}

/// Pass `f` to the upstream and record the interaction; the answer is the
/// upstream's response, or 502 when there was none.
fn forward(upstream: &Upstream, recorded: &Mutex<Vec<Interaction>>, f: &Forward) -> Answer {
    let url = format!("{}{}", upstream.origin, f.path);
    match upstream
        .forwarder
        .send(&f.method, &url, &f.headers, &f.body)
    {
        Ok(resp) => {
            log::debug!("Recorder: {} {url} -> {}", f.method, resp.status);
            // An upstream (or a proxy) that echoes the key's header
            // (`Authorization`, Anthropic's `x-api-key`, Gemini's
            // `x-goog-api-key`) must not put the key into the cassette.
            let token = f
                .headers
                .iter()
                .find(|(n, _)| {
                    ["authorization", "x-api-key", "x-goog-api-key"]
                        .iter()
                        .any(|k| n.eq_ignore_ascii_case(k))
                })
                .map(|(_, v)| {
                    let v = v.trim();
                    v.get(..7)
                        .filter(|p| p.eq_ignore_ascii_case("bearer "))
                        .map_or(v, |_| v[7..].trim())
                });
            let body = String::from_utf8_lossy(&resp.body);
            let interaction = Interaction {
                method: f.method.clone(),
                path: f.path.clone(),
                request: f.request.clone(),
                status: resp.status,
                content_type: resp.content_type.clone(),
                body: crate::util::redact(&body, token).into_owned(),
            };
            recorded.lock().push(interaction);
            Answer::Raw {
                status: resp.status,
                content_type: resp.content_type,
                body: resp.body,
            }
        }
        Err(why) => {
            let msg = format!("Recorder: {} {url} failed: {why}", f.method);
            log::warn!("{msg}");
            Answer::Json {
                status: 502,
                body: render::error_json(502, &msg),
            }
        }
    }
}

/// Split `http://host:port/some/path/` into `("http://host:port", "/some/path")`.
fn split_base(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "http" | "https") {
        return None;
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if authority.is_empty() || path.contains(['?', '#']) {
        return None;
    }
    Some((
        format!("{scheme}://{authority}"),
        path.trim_end_matches('/').to_string(),
    ))
}

impl Recorder {
    /// Start recording in front of `upstream_base_url`, the API base the
    /// agent would otherwise use (e.g. `http://127.0.0.1:8080/v1`).
    ///
    /// # Panics
    ///
    /// If the URL is not `http://` or `https://` with a host, or no loopback
    /// port can be bound (see [`try_start`](Recorder::try_start)).
    pub fn start(upstream_base_url: &str) -> Recorder {
        Recorder::try_start(upstream_base_url)
            .unwrap_or_else(|e| panic!("Recorder: cannot start: {e}"))
    }

    /// Like [`start`](Recorder::start), returning the error:
    /// [`io::ErrorKind::InvalidInput`] for a bad URL, else the bind or spawn
    /// error.
    pub fn try_start(upstream_base_url: &str) -> io::Result<Recorder> {
        let Some((origin, base_path)) = split_base(upstream_base_url) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not an http(s) base URL: {upstream_base_url:?}"),
            ));
        };
        let proxy = Arc::new(Proxy {
            upstream: Arc::new(Upstream {
                origin,
                forwarder: Forwarder::new(),
            }),
            recorded: Arc::new(Mutex::new(Vec::new())),
        });
        let server = Server::start(Arc::clone(&proxy) as Arc<dyn Responder>)?;
        log::debug!(
            "Recorder: {} forwards to {upstream_base_url}",
            server.local_addr()
        );
        Ok(Recorder {
            server,
            proxy,
            upstream: upstream_base_url.trim_end_matches('/').to_string(),
            base_path,
        })
    }

    /// The upstream API base, as given (without a trailing `/`).
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// The socket address the proxy listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The API base to give the agent: the upstream's path on the proxy,
    /// e.g. `http://127.0.0.1:PORT/v1` for an upstream
    /// `http://127.0.0.1:8080/v1`, so root paths such as llama.cpp's
    /// `/props` keep their place too.
    ///
    /// ```
    /// use pikuri::testing::Recorder;
    /// let r = Recorder::start("http://127.0.0.1:9/api/v1/");
    /// assert!(r.base_url().starts_with("http://127.0.0.1:"));
    /// assert!(r.base_url().ends_with("/api/v1"));
    /// assert_eq!(r.upstream(), "http://127.0.0.1:9/api/v1");
    /// ```
    pub fn base_url(&self) -> String {
        format!("{}{}", self.server.root_url(), self.base_path)
    }

    /// A transport for `model` through the proxy: API base
    /// [`base_url`](Recorder::base_url), no key (add one with
    /// [`ChatTransport::with_api_key`]; it is passed on, never recorded).
    pub fn transport_for(&self, model: &str) -> ChatTransport {
        ChatTransport::new(model).with_api_base(self.base_url())
    }

    /// What was recorded so far.
    ///
    /// ```
    /// use pikuri::testing::Recorder;
    /// let r = Recorder::start("http://127.0.0.1:9/v1");
    /// assert!(r.cassette().interactions().is_empty());
    /// ```
    pub fn cassette(&self) -> Cassette {
        let mut cassette = Cassette::new();
        for interaction in self.proxy.recorded.lock().iter().cloned() {
            cassette.push(interaction);
        }
        cassette
    }

    /// Save what was recorded so far to `path` (see [`Cassette::save`]).
    ///
    /// # Errors
    ///
    /// As [`Cassette::save`]: [`Error::InvalidInput`](crate::Error::InvalidInput)
    /// naming the file and the I/O error.
    pub fn save(&self, path: impl AsRef<Path>) -> crate::Result<()> {
        self.cassette().save(path)
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("addr", &self.server.local_addr())
            .field("upstream", &self.upstream)
            .field("base_path", &self.base_path)
            .field("recorded", &self.proxy.recorded.lock().len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_base_keeps_the_path_layout() {
        assert_eq!(
            split_base("http://127.0.0.1:8080/v1"),
            Some(("http://127.0.0.1:8080".into(), "/v1".into()))
        );
        assert_eq!(
            split_base("https://openrouter.ai/api/v1/"),
            Some(("https://openrouter.ai".into(), "/api/v1".into()))
        );
        assert_eq!(
            split_base("http://h:1"),
            Some(("http://h:1".into(), String::new()))
        );
        assert_eq!(split_base("ftp://h/v1"), None);
        assert_eq!(split_base("http:///v1"), None);
        assert_eq!(split_base("h:8080/v1"), None);
        assert_eq!(split_base("http://h/v1?x=1"), None);
    }

    #[test]
    fn unreachable_upstream_is_a_502_and_not_recorded() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = Recorder::start(&format!("http://127.0.0.1:{port}/v1"));
        let t = r.transport_for("m");
        let mut agent = crate::Agent::builder(t)
            .http(crate::HttpConfig::default().with_max_retries(0))
            .build()
            .unwrap();
        match agent.run_loop("hi").unwrap_err() {
            crate::Error::Http {
                status, message, ..
            } => {
                assert_eq!(status, 502);
                assert!(message.starts_with("Recorder: POST"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(r.cassette().interactions().is_empty());
        assert!(Recorder::try_start("nope").is_err());
    }
}
