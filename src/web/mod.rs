//! Web tools: `fetch`, `web_scrape` and `web_search`, and the HTML to
//! Markdown converter they use.
//!
//! | Tool | Constructor | Takes | Returns |
//! |---|---|---|---|
//! | `fetch` | [`fetch`], [`Fetch::builder`] | `url`, optional `raw` | text as is, JSON pretty-printed, HTML as Markdown |
//! | `web_scrape` | [`web_scrape`], `WebScrape::from(Fetch)` | `url` | the page as Markdown |
//! | `web_search` | [`WebSearch::new`] over a [`SearchProvider`] such as [`SearXng`] | `query`, optional `max_results` | numbered title / URL / snippet list |
//!
//! # Examples
//!
//! ```
//! use pikuri::web;
//!
//! let md = web::html_to_markdown("<h1>Hi</h1><p>See <a href=\"/x\">x</a></p>", Some("https://e.org/a"));
//! assert_eq!(md, "# Hi\n\nSee [x](https://e.org/x)");
//! let tools: Vec<std::sync::Arc<dyn pikuri::Tool>> =
//!     vec![std::sync::Arc::new(web::fetch()), std::sync::Arc::new(web::web_scrape())];
//! assert_eq!(tools[1].name(), "web_scrape");
//! ```
//!
//! # Address policy (SSRF)
//!
//! A model that reads untrusted pages can be talked into fetching
//! `http://169.254.169.254/` or an admin page on the LAN. So by default
//! `fetch` and `web_scrape` refuse, **before connecting**:
//!
//! - loopback (`127.0.0.0/8`, `::1`), private (`10/8`, `172.16/12`,
//!   `192.168/16`, `fc00::/7`), shared CGNAT (`100.64/10`) and link-local
//!   (`169.254/16`, `fe80::/10`) addresses, and a few reserved blocks;
//! - always, even with [`FetchBuilder::allow_private_addresses`]: cloud
//!   metadata addresses (`169.254.169.254`, `169.254.170.2`,
//!   `100.100.100.200`, `fd00:ec2::254`), unspecified (`0.0.0.0/8`, `::`),
//!   multicast, broadcast and reserved (`240/4`) addresses.
//!
//! IPv4 addresses embedded in IPv6 (mapped `::ffff:a.b.c.d`, NAT64, 6to4)
//! are judged by their IPv4 part. The host name is resolved first
//! (`std::net::ToSocketAddrs`, so `http://2130706433/` is seen as
//! 127.0.0.1) and **every** address must pass; a name with one private
//! address among public ones is refused. Each redirect hop (at most 5,
//! followed by the tool, not by the HTTP client) is checked the same way.
//!
//! ## DNS rebinding
//!
//! The connection goes to the addresses that were checked: the HTTP client
//! is given a resolver that returns exactly those, so a name that answers
//! differently a second time cannot slip through. Proxy settings from the
//! environment (`HTTP_PROXY`...) are ignored for the same reason: a proxy
//! would resolve the name itself.
//!
//! # Limits and cancellation
//!
//! A download stops after [`FetchBuilder::max_bytes`] (2 MiB) and says so;
//! the returned text is cut at [`FetchBuilder::max_chars`] (50,000). Time is
//! bounded by a connect timeout (10 s), a read timeout (15 s) and a deadline
//! for the whole call (30 s). A cancel of the run's [`Cancellable`](crate::Cancellable)
//! closes the connection: the call returns an error observation at once,
//! mid-download included. Name resolution cannot be interrupted; the call
//! stops waiting for it on cancel.
//!
//! # Bodies
//!
//! Only `http` and `https` URLs (https needs the `rustls` feature). Non-2xx
//! statuses are errors naming the status. Bodies are decoded as UTF-8, or
//! windows-1252 when ISO-8859-1, US-ASCII or windows-1252 is declared (in
//! `Content-Type` or an HTML `<meta charset>`); other charsets are refused.
//! Binary types (images, PDF, archives) are refused. The result begins
//! with `URL: <final url> (<content type>)`, and `Title:` for HTML.
//!
//! # Cache
//!
//! Off by default. [`FetchBuilder::cache`] turns on a process-wide cache,
//! keyed by the URL and the address policy, of at most 32 downloads
//! (16 MiB in all), each kept 10 minutes.

mod cache;
mod charset;
mod fetch;
mod html;
mod http;
mod policy;
mod search;
mod url;

pub use fetch::{Fetch, FetchBuilder, WebScrape};
pub use search::{SearXng, SearchProvider, SearchResult, WebSearch};

/// The `fetch` tool with default options (private addresses refused).
///
/// # Examples
///
/// ```
/// use pikuri::{Tool, ToolContext};
/// let err = pikuri::web::fetch()
///     .call(&serde_json::json!({"url": "http://169.254.169.254/latest/meta-data/"}), &ToolContext::detached())
///     .unwrap_err();
/// assert!(err.message().contains("cloud metadata address"), "{err}");
/// ```
pub fn fetch() -> Fetch {
    Fetch::builder().build()
}

/// The `web_scrape` tool with default options.
///
/// # Examples
///
/// ```
/// use pikuri::{Tool, ToolContext};
/// let err = pikuri::web::web_scrape()
///     .call(&serde_json::json!({"url": "ftp://example.org/"}), &ToolContext::detached())
///     .unwrap_err();
/// assert!(err.message().contains("only http and https"), "{err}");
/// ```
pub fn web_scrape() -> WebScrape {
    WebScrape::from(fetch())
}

/// HTML to readable Markdown-ish text, with links resolved against
/// `base_url` when given.
///
/// Kept: headings as `#`, lists as `-` / `1.` (nested by indentation),
/// links as `[text](url)`, images with alt text as `![alt](src)`, tables
/// as `| a | b |` rows, paragraphs, `<br>`, block quotes as `>`, `<pre>` as
/// fenced code and `<code>` in backticks. Dropped with their content:
/// `script`, `style`, `noscript`, `template`, `svg`, `math`, `head`, `nav`,
/// `aside`, forms and their controls, embedded media, page-level
/// `header`/`footer` (kept inside `article`/`main`), and hidden elements
/// (`hidden`, `aria-hidden="true"`, `role="navigation"`, inline
/// `display:none` / `visibility:hidden`). Character references are decoded
/// (the HTML 4 names plus `&apos;`, and numeric ones). Whitespace is
/// collapsed.
///
/// Never panics; time and memory are linear in the input. Nesting deeper
/// than 512 elements is flattened (the text stays, the markup of the deeper
/// elements is ignored).
///
/// # Examples
///
/// ```
/// let html = "<ul><li>one &amp; two<li><a href='b.html'>next</a></ul>\
///             <script>x()</script><table><tr><th>k<th>v<tr><td>a<td>1</table>";
/// assert_eq!(
///     pikuri::web::html_to_markdown(html, Some("https://e.org/docs/a.html")),
///     "- one & two\n- [next](https://e.org/docs/b.html)\n\n| k | v |\n| --- | --- |\n| a | 1 |"
/// );
/// ```
pub fn html_to_markdown(html: &str, base_url: Option<&str>) -> String {
    html::convert(html, base_url).0
}
