//! The `fetch` and `web_scrape` tools: one download engine, two renderings.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

use super::charset::{self, Kind};
use super::http::{self, Limits, Response};
use super::{cache, html};
use crate::ToolError;
use crate::tool::Parameters;
use crate::{Tool, ToolContext};

/// Default cap on downloaded bytes.
const MAX_BYTES: usize = 2 << 20;
/// Default cap on returned characters (about 12k tokens).
const MAX_CHARS: usize = 50_000;

/// The `fetch` tool: downloads a URL and returns its text.
///
/// Text is returned as is, JSON pretty-printed, and HTML converted to
/// Markdown by [`html_to_markdown`](super::html_to_markdown) (the model can
/// ask for the HTML source with `"raw": true`). The result starts with a
/// `URL: <final url> (<content type>)` line, and a `Title:` line for HTML.
/// Binary content is refused. See the [`builtin`](crate::builtin#web-tools) docs for the address
/// policy, limits and cancellation.
///
/// # Examples
///
/// ```
/// use pikuri::testing::FakeServer;
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let server = FakeServer::start();
/// server.set_route("GET", "/data", 200, json!({"a": [1, 2]}));
/// let url = format!("{}/data", server.root_url());
///
/// // Refused by default: the server is on 127.0.0.1.
/// let err = pikuri::builtin::fetch().call(&json!({"url": url}), &ToolContext::detached());
/// assert!(err.unwrap_err().message().contains("a loopback address"));
///
/// let fetch = pikuri::builtin::Fetch::builder().allow_private_addresses(true).build();
/// let out = fetch.call(&json!({"url": url}), &ToolContext::detached())?;
/// assert!(out.starts_with(&format!("URL: {url} (application/json)\n\n{{\n  \"a\": [")), "{out}");
/// # Ok::<(), pikuri::ToolError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Fetch {
    options: FetchBuilder,
    parameters: Parameters,
    description: String,
}

/// Options of [`Fetch`] and [`WebScrape`], from [`Fetch::builder`].
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// let fetch = pikuri::builtin::Fetch::builder()
///     .max_bytes(512 * 1024)
///     .max_chars(20_000)
///     .timeout(Duration::from_secs(10))
///     .cache(true)
///     .build();
/// assert_eq!(pikuri::Tool::name(&fetch), "fetch");
/// ```
#[derive(Debug, Clone)]
pub struct FetchBuilder {
    limits: Limits,
    max_chars: usize,
    cache: bool,
}

impl Default for FetchBuilder {
    fn default() -> FetchBuilder {
        FetchBuilder {
            limits: Limits {
                connect_timeout: Duration::from_secs(10),
                read_timeout: Duration::from_secs(15),
                total_timeout: Duration::from_secs(30),
                max_bytes: MAX_BYTES,
                max_redirects: 5,
                allow_private: false,
            },
            max_chars: MAX_CHARS,
            cache: false,
        }
    }
}

impl FetchBuilder {
    /// Download at most this many bytes (default 2 MiB); the rest of a longer
    /// body is not read, and the result says so.
    #[must_use]
    pub fn max_bytes(mut self, max_bytes: usize) -> FetchBuilder {
        self.limits.max_bytes = max_bytes;
        self
    }

    /// Return at most this many characters (default 50,000); the result
    /// says when it was cut.
    #[must_use]
    pub fn max_chars(mut self, max_chars: usize) -> FetchBuilder {
        self.max_chars = max_chars;
        self
    }

    /// Time allowed to connect (default 10 s).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> FetchBuilder {
        self.limits.connect_timeout = timeout;
        self
    }

    /// Longest wait for any data while reading (default 15 s).
    #[must_use]
    pub fn read_timeout(mut self, timeout: Duration) -> FetchBuilder {
        self.limits.read_timeout = timeout;
        self
    }

    /// Deadline for the whole call, redirects included (default 30 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> FetchBuilder {
        self.limits.total_timeout = timeout;
        self
    }

    /// Redirects followed before giving up (default 5).
    #[must_use]
    pub fn max_redirects(mut self, max_redirects: usize) -> FetchBuilder {
        self.limits.max_redirects = max_redirects;
        self
    }

    /// Allow loopback, private (RFC 1918, CGNAT, fc00::/7) and link-local
    /// addresses (default `false`). Cloud metadata, unspecified, multicast
    /// and reserved addresses stay refused.
    #[must_use]
    pub fn allow_private_addresses(mut self, allow: bool) -> FetchBuilder {
        self.limits.allow_private = allow;
        self
    }

    /// Serve repeated URLs from the process-wide cache (default `false`).
    /// At most 32 downloads (16 MiB) are kept, each for 10 minutes.
    #[must_use]
    pub fn cache(mut self, cache: bool) -> FetchBuilder {
        self.cache = cache;
        self
    }

    /// The `fetch` tool with these options.
    pub fn build(self) -> Fetch {
        Fetch {
            description: format!(
                "Downloads a web page or file (http or https) and returns its text: plain \
                 text as is, JSON pretty-printed, HTML converted to Markdown (or the HTML \
                 source with raw=true). Binary files are refused. At most {} characters are \
                 returned.",
                self.max_chars
            ),
            parameters: Parameters::builder()
                .required_string("url", "The absolute http:// or https:// URL to download.")
                .optional_boolean("raw", "Return HTML source instead of Markdown.")
                .build(),
            options: self,
        }
    }
}

impl Fetch {
    /// Options for a [`Fetch`] or, through `From`, a [`WebScrape`].
    ///
    /// # Examples
    ///
    /// ```
    /// let fetch = pikuri::builtin::Fetch::builder().max_redirects(2).build();
    /// assert!(pikuri::Tool::description(&fetch).contains("50000 characters"));
    /// ```
    pub fn builder() -> FetchBuilder {
        FetchBuilder::default()
    }

    fn download(&self, url: &str, cx: &ToolContext) -> Result<Response, ToolError> {
        let o = &self.options;
        let key = o
            .cache
            .then(|| cache::key(url.trim(), o.limits.allow_private, o.limits.max_bytes));
        if let Some(hit) = key.as_deref().and_then(cache::get) {
            return Ok(hit);
        }
        let accept = [(
            "accept",
            "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5",
        )];
        let response = http::get(url, &accept, &o.limits, cx)?;
        if let Some(key) = key {
            cache::put(key, response.clone());
        }
        Ok(response)
    }

    /// Download and render: `raw` keeps HTML as HTML.
    fn run(&self, args: &Value, cx: &ToolContext, raw: bool) -> Result<String, ToolError> {
        let url = args["url"].as_str().unwrap_or_default();
        if url.trim().is_empty() {
            return Err(ToolError::new(
                "`url` is empty; give an absolute http(s) URL",
            ));
        }
        let response = self.download(url, cx)?;
        render(&response, raw, &self.options)
    }
}

impl Tool for Fetch {
    fn reaches_network(&self) -> bool {
        true
    }

    /// A GET (a search is one too): harmless to send again on a resume.
    fn idempotent(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "fetch"
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    fn call(&self, args: &Value, cx: &ToolContext) -> Result<String, ToolError> {
        self.run(args, cx, args["raw"].as_bool().unwrap_or(false))
    }
}

/// The `web_scrape` tool: a web page as readable Markdown.
///
/// The same download as [`Fetch`] (and the same options, through
/// `From<Fetch>`), but HTML is always converted and the tool takes only a
/// `url`. Plain text and JSON pages are returned as `fetch` returns them.
///
/// # Examples
///
/// ```
/// use pikuri::builtin::{Fetch, WebScrape};
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
/// # fn serve(body: &'static str) -> String {
/// #     use std::io::{Read, Write};
/// #     let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// #     let addr = listener.local_addr().unwrap();
/// #     std::thread::spawn(move || {
/// #         let (mut s, _) = listener.accept().unwrap();
/// #         let _ = s.read(&mut [0; 4096]);
/// #         let _ = write!(s, "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n\
/// #             content-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
/// #     });
/// #     format!("http://{addr}/page")
/// # }
///
/// let url = serve("<title>T</title><h1>Hello</h1><nav>menu</nav><p>World</p>");
/// let scrape = WebScrape::from(Fetch::builder().allow_private_addresses(true).build());
/// let out = scrape.call(&json!({"url": url}), &ToolContext::detached())?;
/// assert_eq!(out, format!("URL: {url} (text/html)\nTitle: T\n\n# Hello\n\nWorld"));
/// # Ok::<(), pikuri::ToolError>(())
/// ```
#[derive(Debug, Clone)]
pub struct WebScrape {
    fetch: Fetch,
    parameters: Parameters,
}

impl From<Fetch> for WebScrape {
    fn from(fetch: Fetch) -> WebScrape {
        WebScrape {
            fetch,
            parameters: Parameters::builder()
                .required_string("url", "The absolute http:// or https:// URL of the page.")
                .build(),
        }
    }
}

impl Tool for WebScrape {
    fn reaches_network(&self) -> bool {
        true
    }

    /// A GET (a search is one too): harmless to send again on a resume.
    fn idempotent(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "web_scrape"
    }

    fn description(&self) -> &'static str {
        "Reads a web page (http or https) and returns its main text as Markdown: headings, \
         lists, links, tables and code kept; scripts, navigation, ads and forms dropped."
    }

    fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    fn call(&self, args: &Value, cx: &ToolContext) -> Result<String, ToolError> {
        self.fetch.run(args, cx, false)
    }
}

/// The observation for a download: header line, content, truncation notes.
fn render(response: &Response, raw: bool, options: &FetchBuilder) -> Result<String, ToolError> {
    let url = &response.url;
    let (media, declared) = charset::parse_content_type(&response.content_type);
    let kind = charset::kind(&media, &response.body);
    let shown_media = if media.is_empty() {
        "no content type"
    } else {
        &media
    };
    if kind == Kind::Binary {
        return Err(ToolError::new(format!(
            "{url} is {shown_media} ({} bytes of binary data), which this tool cannot show",
            response.body.len()
        )));
    }
    let declared = declared.or_else(|| {
        (kind == Kind::Html)
            .then(|| charset::meta_charset(&response.body))
            .flatten()
    });
    let text = match declared.as_deref() {
        Some(label) if response.utf8 => charset::decoded_utf8(&response.body, label),
        declared => charset::decode(&response.body, declared),
    }
    .map_err(|e| ToolError::new(format!("{url}: {e}")))?;
    let mut title = None;
    let content = match kind {
        Kind::Html if !raw => {
            let (md, t) = html::convert(&text, Some(&url.to_string()));
            title = t;
            md
        }
        Kind::Json => serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or(text),
        _ => text,
    };
    let mut out = format!("URL: {url} ({shown_media})\n");
    if let Some(t) = title {
        let _ = writeln!(out, "Title: {t}");
    }
    out.push('\n');
    let total = content.chars().count();
    if content.trim().is_empty() {
        out.push_str("(no readable text)");
    } else if total > options.max_chars {
        let end = content
            .char_indices()
            .nth(options.max_chars)
            .map_or(content.len(), |(i, _)| i);
        out.push_str(&content[..end]);
        let _ = write!(
            out,
            "\n\n[cut: showing the first {} of {total} characters]",
            options.max_chars
        );
    } else {
        out.push_str(&content);
    }
    if response.truncated {
        let _ = write!(
            out,
            "\n\n[download stopped after {} bytes; the rest was not read]",
            options.limits.max_bytes
        );
    }
    Ok(out)
}
