//! The web tools (`fetch`, `web_scrape`, `web_search`) and the HTML to
//! Markdown converter; documented in the public `builtin` namespace.

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
/// let err = pikuri::builtin::fetch()
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
/// let err = pikuri::builtin::web_scrape()
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
///     pikuri::builtin::html_to_markdown(html, Some("https://e.org/docs/a.html")),
///     "- one & two\n- [next](https://e.org/docs/b.html)\n\n| k | v |\n| --- | --- |\n| a | 1 |"
/// );
/// ```
pub fn html_to_markdown(html: &str, base_url: Option<&str>) -> String {
    html::convert(html, base_url).0
}
