//! The `web_search` tool and its provider seam.

use std::fmt;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::http::{self, Limits};
use crate::ToolError;
use crate::codec::percent::{self, Keep, Space};
use crate::tool::Parameters;
use crate::{Tool, ToolContext};

/// Longest snippet shown per result, in characters.
const MAX_SNIPPET: usize = 400;
/// Most results a model may ask for.
const MAX_RESULTS: usize = 20;

/// One search hit.
///
/// # Examples
///
/// ```
/// let hit = pikuri::builtin::SearchResult::new("Rust", "https://www.rust-lang.org/", "A language");
/// assert_eq!(hit.title, "Rust");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SearchResult {
    /// The page title.
    pub title: String,
    /// The page address.
    pub url: String,
    /// A short extract, possibly empty.
    pub snippet: String,
}

impl SearchResult {
    /// A result from its parts.
    pub fn new(
        title: impl Into<String>,
        url: impl Into<String>,
        snippet: impl Into<String>,
    ) -> SearchResult {
        SearchResult {
            title: title.into(),
            url: url.into(),
            snippet: snippet.into(),
        }
    }
}

/// A search engine behind [`WebSearch`]. The host builds one with its
/// endpoint and credentials; nothing is read from the environment.
///
/// `search` runs on the agent's tool thread; it should give up promptly
/// when `cx` is cancelled ([`ToolContext::is_cancelled`]). A failure is an
/// `Err` whose message the model reads.
///
/// # Examples
///
/// ```
/// use pikuri::builtin::{SearchProvider, SearchResult, WebSearch};
/// use pikuri::{Tool, ToolContext, ToolError};
/// use serde_json::json;
///
/// struct Canned;
/// impl SearchProvider for Canned {
///     fn search(&self, query: &str, max: usize, _cx: &ToolContext)
///         -> Result<Vec<SearchResult>, ToolError> {
///         Ok(vec![SearchResult::new(query, "https://example.org/", "snippet")].into_iter().take(max).collect())
///     }
/// }
///
/// let tool = WebSearch::new(Canned);
/// let out = tool.call(&json!({"query": "cats"}), &ToolContext::detached())?;
/// assert_eq!(out, "1. cats\n   https://example.org/\n   snippet");
/// # Ok::<(), ToolError>(())
/// ```
pub trait SearchProvider: Send + Sync + 'static {
    /// Up to `max_results` results for `query`, best first.
    fn search(
        &self,
        query: &str,
        max_results: usize,
        cx: &ToolContext,
    ) -> Result<Vec<SearchResult>, ToolError>;
}

/// The `web_search` tool: a query to a [`SearchProvider`], results as a
/// numbered list of title, URL and snippet.
///
/// It takes `query` and an optional `max_results` (default 5, at most 20).
///
/// # Examples
///
/// See [`SearchProvider`] and [`SearXng`].
#[derive(Clone)]
pub struct WebSearch {
    provider: Arc<dyn SearchProvider>,
    default_results: usize,
    parameters: Parameters,
}

impl WebSearch {
    /// The tool over `provider`.
    ///
    /// # Examples
    ///
    /// ```
    /// let tool = pikuri::builtin::WebSearch::new(pikuri::builtin::SearXng::new("http://127.0.0.1:8888"));
    /// assert_eq!(pikuri::Tool::name(&tool), "web_search");
    /// ```
    pub fn new(provider: impl SearchProvider) -> WebSearch {
        WebSearch {
            provider: Arc::new(provider),
            default_results: 5,
            parameters: Parameters::builder()
                .required_string("query", "What to search the web for.")
                .optional_integer(
                    "max_results",
                    "How many results to return (1-20, default 5).",
                )
                .build(),
        }
    }
}

impl fmt::Debug for WebSearch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSearch")
            .field("default_results", &self.default_results)
            .finish_non_exhaustive()
    }
}

impl Tool for WebSearch {
    fn reaches_network(&self) -> bool {
        true
    }

    /// A GET (a search is one too): harmless to send again on a resume.
    fn idempotent(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "web_search"
    }

    fn description(&self) -> &'static str {
        "Searches the web and returns a numbered list of results (title, URL, snippet). \
         Read a result with web_scrape or fetch."
    }

    fn parameters(&self) -> &Parameters {
        &self.parameters
    }

    fn call(&self, args: &Value, cx: &ToolContext) -> Result<String, ToolError> {
        let query = args["query"].as_str().unwrap_or_default().trim();
        if query.is_empty() {
            return Err(ToolError::new("`query` is empty"));
        }
        let max = args["max_results"]
            .as_u64()
            .map_or(self.default_results, |n| {
                n.clamp(1, MAX_RESULTS as u64) as usize
            });
        let results = self.provider.search(query, max, cx)?;
        Ok(render(query, &results[..results.len().min(max)]))
    }
}

fn one_line(s: &str, max: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::util::excerpt(&s, max).into_owned()
}

fn render(query: &str, results: &[SearchResult]) -> String {
    if results.is_empty() {
        return format!("No results for \"{}\".", one_line(query, 200));
    }
    let mut out = String::new();
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            out.push_str("\n\n");
        }
        let title = one_line(&r.title, 200);
        let _ = write!(
            out,
            "{}. {}\n   {}",
            i + 1,
            if title.is_empty() {
                "(untitled)"
            } else {
                &title
            },
            one_line(&r.url, 500)
        );
        let snippet = one_line(&r.snippet, MAX_SNIPPET);
        if !snippet.is_empty() {
            let _ = write!(out, "\n   {snippet}");
        }
    }
    out
}

/// A [`SearchProvider`] for a SearXNG instance's JSON API
/// (`GET {base}/search?q=...&format=json`; the instance must have the
/// `json` format enabled in its `settings.yml`).
///
/// The base URL is the host's, so it may be on a private address (a
/// self-hosted instance usually is); only the query comes from the model.
///
/// # Examples
///
/// ```
/// use pikuri::testing::FakeServer;
/// use pikuri::builtin::{SearXng, WebSearch};
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let server = FakeServer::start();
/// server.set_route("GET", "/search", 200, json!({"results": [
///     {"title": "Rust", "url": "https://www.rust-lang.org/", "content": "A language."},
/// ]}));
/// let tool = WebSearch::new(SearXng::new(server.root_url()).header("authorization", "Bearer k"));
/// let out = tool.call(&json!({"query": "rust lang"}), &ToolContext::detached())?;
/// assert_eq!(out, "1. Rust\n   https://www.rust-lang.org/\n   A language.");
/// # Ok::<(), pikuri::ToolError>(())
/// ```
#[derive(Clone)]
pub struct SearXng {
    base: String,
    headers: Vec<(String, String)>,
    limits: Limits,
}

impl SearXng {
    /// A provider for the instance at `base_url` (`https://searx.example.org`).
    pub fn new(base_url: impl Into<String>) -> SearXng {
        SearXng {
            base: base_url.into().trim_end_matches('/').to_string(),
            headers: Vec::new(),
            limits: Limits {
                connect_timeout: Duration::from_secs(10),
                read_timeout: Duration::from_secs(15),
                total_timeout: Duration::from_secs(20),
                max_bytes: 1 << 20,
                max_redirects: 2,
                allow_private: true,
            },
        }
    }

    /// Send this header with every search (an API key, basic auth for a
    /// private instance). Values never appear in `Debug` output.
    ///
    /// # Examples
    ///
    /// ```
    /// let p = pikuri::builtin::SearXng::new("https://searx.example.org").header("x-api-key", "secret");
    /// assert!(!format!("{p:?}").contains("secret"));
    /// ```
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> SearXng {
        self.headers.push((name.into(), value.into()));
        self
    }
}

impl fmt::Debug for SearXng {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("SearXng")
            .field("base", &self.base)
            .field("headers", &names)
            .finish_non_exhaustive()
    }
}

impl SearchProvider for SearXng {
    fn search(
        &self,
        query: &str,
        max_results: usize,
        cx: &ToolContext,
    ) -> Result<Vec<SearchResult>, ToolError> {
        let url = format!(
            "{}/search?q={}&format=json",
            self.base,
            percent::encode(query, Keep::Unreserved, Space::Plus)
        );
        let mut headers: Vec<(&str, &str)> = vec![("accept", "application/json")];
        headers.extend(self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        let response = http::get(&url, &headers, &self.limits, cx)
            .map_err(|e| ToolError::new(format!("web search failed: {}", e.message())))?;
        let json: Value = crate::util::json_from_slice(&response.body).map_err(|_| {
            ToolError::new(
                "web search failed: the search service did not answer in JSON (is the \
                 `json` format enabled on the SearXNG instance?)",
            )
        })?;
        let results = json["results"].as_array().map_or(&[][..], Vec::as_slice);
        Ok(results
            .iter()
            .filter_map(|r| {
                let url = r["url"].as_str()?;
                let text = |k: &str| r[k].as_str().unwrap_or_default();
                Some(SearchResult::new(text("title"), url, text("content")))
            })
            .take(max_results)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering() {
        assert_eq!(render("q", &[]), "No results for \"q\".");
        let hits = [
            SearchResult::new("A\ntitle", "https://a/", ""),
            SearchResult::new("", "https://b/", "  two\n lines "),
        ];
        assert_eq!(
            render("q", &hits),
            "1. A title\n   https://a/\n\n2. (untitled)\n   https://b/\n   two lines"
        );
    }
}
