//! How the crate talks HTTP, written once: every `ureq::Agent` (the model
//! client, the model list, the MCP HTTP transport and its OAuth side, the
//! OTLP exporter, the web tools, the recording proxy) is built from an
//! [`AgentSetup`], and every transport failure that becomes text goes
//! through [`error_text`].
//!
//! What all of them share, set here and nowhere else:
//!
//! - every status is read as a response (`http_status_as_error(false)`):
//!   each caller reads the server's message from an error body and decides
//!   itself what to retry;
//! - a timeout of [`NO_LIMIT`](crate::util::NO_LIMIT) or more is no limit
//!   (ureq adds timeouts to an `Instant`, which panics on overflow);
//! - the `User-Agent` is `pikuri/<version>` unless a caller names another;
//! - TLS is ureq's, from the crate's TLS feature; proxies come from the
//!   environment (`ALL_PROXY`, `HTTPS_PROXY`, ...) unless a caller turns
//!   them off;
//! - an error's text has the secrets of the URL requested hidden (ureq's
//!   `bad uri: ...` quotes the URL raw);
//! - each connection's buffers are [`INPUT_BUFFER`] and [`OUTPUT_BUFFER`]
//!   bytes: a connection holds them, touched, as long as it lives,
//!   kept-alive in the pool between requests included, so with many
//!   agents they are most of each one's memory (`benches/many.rs`,
//!   BENCHMARKS.md, issue 42); the output buffer is a quarter of ureq's
//!   128 KiB, the input buffer ureq's size, for streams.
//!
//! - no redirect is followed: a 3xx comes back as a response for the
//!   caller to read (the web tools check each hop before following it by
//!   hand). ureq would carry every header but `Authorization` to another
//!   origin: an API key in `x-api-key`, an MCP session id.
//!
//! What differs is a setter away: each caller names its timeouts and (the
//! web tools) its own resolver.

use std::time::Duration;

use crate::util::{limit, redact_url_in};

/// The `User-Agent` of every request the crate sends.
pub(crate) const USER_AGENT: &str = concat!("pikuri/", env!("CARGO_PKG_VERSION"));

/// The longest response head read: ureq's own limit, 64 KiB.
const MAX_HEAD: usize = 64 * 1024;

/// Bytes of a connection's input buffer: ureq's default, 128 KiB. A
/// stream arrives in reads of up to this, and each read that drains it
/// hands a listener its text, waking the listener's thread; at 68 KiB
/// (session 12 to 15) that was twice as many wake-ups, a streamed turn's
/// CPU with a listener 0.08x of the bare client's higher (BENCHMARKS.md,
/// issue 42, session 15). ureq reads a response head whole into it, so
/// it must be more than [`MAX_HEAD`]: a head past the limit is then told
/// as such (`LargeResponseHeader`), not as a connection that made no
/// progress.
pub(crate) const INPUT_BUFFER: usize = 128 * 1024;

const _: () = assert!(
    INPUT_BUFFER >= MAX_HEAD + 4096,
    "a head at the limit must fit"
);

/// Bytes of a connection's output buffer. ureq writes a request's head
/// into it a line at a time and its body in pieces of it, so it bounds the
/// longest head line: 32 KiB, four times the 8 KiB most servers accept.
pub(crate) const OUTPUT_BUFFER: usize = 32 * 1024;

/// The settings one `ureq::Agent` is built from; see the [module
/// doc](self) for what every agent shares. [`AgentSetup::new`] sets no
/// timeout and follows no redirect.
#[derive(Clone, Debug)]
pub(crate) struct AgentSetup {
    connect: Option<Duration>,
    send: Option<Duration>,
    recv_response: Option<Duration>,
    per_read: Option<Duration>,
    global: Option<Duration>,
    env_proxy: bool,
    user_agent: &'static str,
}

// Each setter serves a caller behind some feature.
#[cfg_attr(
    not(all(feature = "mcp", feature = "web", feature = "testing")),
    allow(dead_code)
)]
impl AgentSetup {
    pub(crate) fn new() -> AgentSetup {
        AgentSetup {
            connect: None,
            send: None,
            recv_response: None,
            per_read: None,
            global: None,
            env_proxy: true,
            user_agent: USER_AGENT,
        }
    }

    /// Bound on resolving and connecting.
    pub(crate) fn with_connect_timeout(mut self, d: Duration) -> AgentSetup {
        self.connect = limit(d);
        self
    }

    /// Bound on sending the request head and its body (a server that stops
    /// reading ties the caller up no longer).
    pub(crate) fn with_send_timeout(mut self, d: Duration) -> AgentSetup {
        self.send = limit(d);
        self
    }

    /// Bound on waiting for the response head once the request is sent.
    pub(crate) fn with_response_timeout(mut self, d: Duration) -> AgentSetup {
        self.recv_response = limit(d);
        self
    }

    /// Bound on each read of the body (a silent socket).
    pub(crate) fn with_read_timeout(mut self, d: Duration) -> AgentSetup {
        self.per_read = limit(d);
        self
    }

    /// Bound on the whole call.
    pub(crate) fn with_total_timeout(mut self, d: Duration) -> AgentSetup {
        self.global = limit(d);
        self
    }

    /// Ignore the environment's proxy variables (a proxy would resolve the
    /// host itself, around the web tools' address check).
    pub(crate) fn without_proxy(mut self) -> AgentSetup {
        self.env_proxy = false;
        self
    }

    /// Send `user_agent` instead of [`USER_AGENT`].
    pub(crate) fn with_user_agent(mut self, user_agent: &'static str) -> AgentSetup {
        self.user_agent = user_agent;
        self
    }

    fn config(&self) -> ureq::config::Config {
        let mut b = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(self.connect)
            .timeout_send_request(self.send)
            .timeout_send_body(self.send)
            .timeout_recv_response(self.recv_response)
            .timeout_per_read(self.per_read)
            .timeout_global(self.global)
            .input_buffer_size(INPUT_BUFFER)
            .max_response_header_size(MAX_HEAD)
            .output_buffer_size(OUTPUT_BUFFER)
            .user_agent(self.user_agent)
            // No redirect (see the module docs), and no history of them.
            .max_redirects(0)
            .save_redirect_history(false);
        if !self.env_proxy {
            b = b.proxy(None);
        }
        b.build()
    }

    /// The agent, with ureq's resolver.
    pub(crate) fn agent(&self) -> ureq::Agent {
        self.config().new_agent()
    }

    /// The agent, resolving host names through `resolver` (the web tools
    /// pin the addresses they checked).
    #[cfg(feature = "web")]
    pub(crate) fn agent_with_resolver(
        &self,
        resolver: impl ureq::unversioned::resolver::Resolver,
    ) -> ureq::Agent {
        let connector = ureq::unversioned::transport::DefaultConnector::new();
        ureq::Agent::with_parts(self.config(), connector, resolver)
    }
}

/// A transport failure of a request to `url` as text: an I/O error's own
/// text (it reads better than ureq's `io: ...`), anything else ureq's text
/// with the secrets of `url` hidden (see [`redact_url_in`]).
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
pub(crate) fn error_text(e: &ureq::Error, url: &str) -> String {
    match e {
        ureq::Error::Io(io) => redact_url_in(&io.to_string(), url).into_owned(),
        other => redact_url_in(&other.to_string(), url).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ureq::config::AutoHeaderValue;

    #[test]
    fn every_agent_reads_statuses_and_names_the_crate() {
        let agent = AgentSetup::new().agent();
        let c = agent.config();
        assert!(!c.http_status_as_error());
        assert_eq!(c.max_redirects(), 0);
        assert!(!c.save_redirect_history());
        assert!(
            matches!(c.user_agent(), AutoHeaderValue::Provided(v) if v.as_str() == USER_AGENT),
            "{:?}",
            c.user_agent()
        );
        let t = c.timeouts();
        assert_eq!((t.connect, t.global), (None, None));
        assert_eq!(c.timeout_per_read(), None);
    }

    #[test]
    fn a_connection_keeps_a_small_output_buffer_and_a_stream_sized_input_buffer() {
        let agent = AgentSetup::new().agent();
        let c = agent.config();
        assert_eq!(c.input_buffer_size(), 128 * 1024);
        assert_eq!(c.max_response_header_size(), 64 * 1024);
        assert_eq!(c.output_buffer_size(), 32 * 1024);
    }

    /// One exchange with a loopback server answering `head` (a status line
    /// and headers, without the blank line) and a 5-byte body: the request
    /// head the server read, and what the agent made of the answer.
    fn exchange(request_header: &str, head: String) -> (String, Result<String, ureq::Error>) {
        use std::io::{BufRead, BufReader, Write};
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", server.local_addr().unwrap());
        let answered = std::thread::spawn(move || {
            let (conn, _) = server.accept().unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut seen = String::new();
            while reader.read_line(&mut seen).unwrap() > 2 && !seen.ends_with("\r\n\r\n") {}
            let mut conn = conn;
            let _ = write!(conn, "{head}\r\ncontent-length: 5\r\n\r\nhello");
            seen
        });
        let got = AgentSetup::new()
            .agent()
            .get(&url)
            .header("x-long", request_header)
            .call()
            .and_then(|mut r| r.body_mut().read_to_string());
        (answered.join().unwrap(), got)
    }

    #[test]
    fn the_buffers_take_a_long_head_line_each_way() {
        // Within the limits: a 30 KiB request header line and a response
        // head of 60 KiB.
        let long = "a".repeat(30 * 1024);
        let head = format!("HTTP/1.1 200 OK\r\nx-big: {}", "b".repeat(60 * 1024));
        let (seen, got) = exchange(&long, head);
        assert!(seen.contains(&long));
        assert_eq!(got.unwrap(), "hello");
        // Past the input buffer: ureq's own header-limit error, not a hang.
        let head = format!("HTTP/1.1 200 OK\r\nx-big: {}", "b".repeat(70 * 1024));
        let (_, got) = exchange("x", head);
        assert!(
            matches!(got, Err(ureq::Error::LargeResponseHeader(..))),
            "{got:?}"
        );
    }

    #[test]
    fn each_caller_sets_what_differs() {
        let s = Duration::from_secs;
        let agent = AgentSetup::new()
            .with_connect_timeout(s(1))
            .with_send_timeout(s(2))
            .with_response_timeout(s(3))
            .with_read_timeout(s(4))
            .with_total_timeout(s(5))
            .without_proxy()
            .with_user_agent("other/1")
            .agent();
        let c = agent.config();
        assert!(matches!(c.user_agent(), AutoHeaderValue::Provided(v) if v.as_str() == "other/1"));
        let t = c.timeouts();
        assert_eq!(t.connect, Some(s(1)));
        assert_eq!((t.send_request, t.send_body), (Some(s(2)), Some(s(2))));
        assert_eq!(t.recv_response, Some(s(3)));
        assert_eq!(c.timeout_per_read(), Some(s(4)));
        assert_eq!(t.global, Some(s(5)));
        assert_eq!(c.max_redirects(), 0);
        assert!(!c.save_redirect_history());
        assert!(c.proxy().is_none());
        assert!(!c.http_status_as_error());
    }

    #[test]
    fn a_huge_timeout_is_no_limit() {
        let agent = AgentSetup::new()
            .with_total_timeout(Duration::MAX)
            .with_read_timeout(crate::util::NO_LIMIT)
            .agent();
        assert_eq!(agent.config().timeouts().global, None);
        assert_eq!(agent.config().timeout_per_read(), None);
    }

    #[test]
    fn error_text_hides_the_secrets_of_the_url() {
        let url = "https://user:pw@h.example/x?token=s3cret";
        let e = ureq::Error::BadUri(format!("bad {url}"));
        let text = error_text(&e, url);
        assert!(!text.contains("s3cret") && !text.contains("pw"), "{text}");
        assert!(text.contains("h.example"), "{text}");
        let io = ureq::Error::Io(std::io::Error::other(format!("refused: {url}")));
        let text = error_text(&io, url);
        assert!(
            text.starts_with("refused: ") && !text.contains("s3cret"),
            "{text}"
        );
    }
}
