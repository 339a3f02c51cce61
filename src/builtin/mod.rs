//! Built-in tools: a calculator, the current time, and read-only access to
//! one directory tree.
//!
//! Needs the `builtin` feature, and for the [web tools](#web-tools) the
//! `web` feature (both on by default).
//!
//! Each function returns a ready tool; [`all`] returns all four for one root
//! directory.
//!
//! # Examples
//!
//! ```
//! use pikuri::builtin;
//! use pikuri::{Tool, ToolContext};
//! use serde_json::json;
//!
//! let tools = builtin::all(std::env::temp_dir());
//! let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
//! assert_eq!(names, ["calculator", "current_time", "read_file", "list_dir"]);
//!
//! let calc = builtin::calculator();
//! let out = calc.call(&json!({"expression": "2 + 3 * 4"}), &ToolContext::detached())?;
//! assert_eq!(out, "14");
//! # Ok::<(), pikuri::ToolError>(())
//! ```
//!
//! Every tool here declares [`Tool::idempotent`]: each is a pure function,
//! a read, or (the web tools) a GET, so a [journaled](crate::journal) run
//! that a crash cut off while one ran runs that call again on resume rather
//! than telling the model it was interrupted.
//!
//! # Confinement of the file tools
//!
//! [`read_file`] and [`list_dir`] see only the tree under the `root` they
//! were built with. A `path` argument:
//!
//! - is relative to `root`; an absolute path (`/etc/passwd`, or on Windows
//!   `C:\x` and `\x`) is refused;
//! - may not contain a `..` component at all, even one that would stay inside
//!   (`a/../b`): the model can always send the plain path;
//! - is resolved with every symbolic link followed (the root too), and the
//!   result must lie under the resolved root. A link to somewhere else inside
//!   the tree works; a link that leads out of it is refused.
//!
//! Messages name the path as the model wrote it and never show the host's
//! absolute root path.
//!
//! This guards against a model (or a prompt injected into what it read)
//! wandering into `~/.ssh`; it is not a sandbox against a local process
//! that can write inside the root while a call runs: between the check and
//! the open, such a process could swap a directory for a link. Run
//! untrusted work under the operating system's own isolation.
//!
//! Reads are capped ([`ReadFile::max_bytes`], [`ListDir::max_entries`]) so one
//! call cannot flood the context window; the output says when it was cut.
//!
//! # Web tools
//!
//! They reach the network: give them to a sub-agent persona (see
//! [`Configurator::add_sub_agent_tool`](crate::Configurator::add_sub_agent_tool))
//! rather than to an agent that reads private files.
//!
//! | Tool | Constructor | Takes | Returns |
//! |---|---|---|---|
//! | `fetch` | [`fetch`], [`Fetch::builder`] | `url`, optional `raw` | text as is, JSON pretty-printed, HTML as Markdown |
//! | `web_scrape` | [`web_scrape`], `WebScrape::from(Fetch)` | `url` | the page as Markdown |
//! | `web_search` | [`WebSearch::new`] over a [`SearchProvider`] such as [`SearXng`] | `query`, optional `max_results` | numbered title / URL / snippet list |
//!
//! ## Examples
//!
//! ```
//! use pikuri::builtin as web;
//!
//! let md = web::html_to_markdown("<h1>Hi</h1><p>See <a href=\"/x\">x</a></p>", Some("https://e.org/a"));
//! assert_eq!(md, "# Hi\n\nSee [x](https://e.org/x)");
//! let tools: Vec<std::sync::Arc<dyn pikuri::Tool>> =
//!     vec![std::sync::Arc::new(web::fetch()), std::sync::Arc::new(web::web_scrape())];
//! assert_eq!(tools[1].name(), "web_scrape");
//! ```
//!
//! ## Address policy (SSRF)
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
//! ### DNS rebinding
//!
//! The connection goes to the addresses that were checked: the HTTP client
//! is given a resolver that returns exactly those, so a name that answers
//! differently a second time cannot slip through. Proxy settings from the
//! environment (`HTTP_PROXY`...) are ignored for the same reason: a proxy
//! would resolve the name itself.
//!
//! ## Limits and cancellation
//!
//! A download stops after [`FetchBuilder::max_bytes`] (2 MiB) and says so;
//! the returned text is cut at [`FetchBuilder::max_chars`] (50,000). Time is
//! bounded by a connect timeout (10 s), a read timeout (15 s) and a deadline
//! for the whole call (30 s). A cancel of the run's [`Cancellable`](crate::Cancellable)
//! closes the connection: the call returns an error observation at once,
//! mid-download included. Name resolution cannot be interrupted; the call
//! stops waiting for it on cancel.
//!
//! ## Bodies
//!
//! Only `http` and `https` URLs (https needs the `rustls` feature). Non-2xx
//! statuses are errors naming the status. Bodies are decoded as UTF-8, or
//! windows-1252 when ISO-8859-1, US-ASCII or windows-1252 is declared (in
//! `Content-Type` or an HTML `<meta charset>`); other charsets are refused.
//! Binary types (images, PDF, archives) are refused. The result begins
//! with `URL: <final url> (<content type>)`, and `Title:` for HTML.
//!
//! ## Cache
//!
//! Off by default. [`FetchBuilder::cache`] turns on a process-wide cache,
//! keyed by the URL and the address policy, of at most 32 downloads
//! (16 MiB in all), each kept 10 minutes.

#[cfg(feature = "builtin")]
use std::path::PathBuf;
#[cfg(feature = "builtin")]
use std::sync::Arc;

#[cfg(feature = "builtin")]
use crate::Tool;

#[cfg(feature = "builtin")]
mod calculator;
#[cfg(feature = "builtin")]
mod clock;
#[cfg(feature = "builtin")]
mod files;

#[cfg(feature = "web")]
pub use crate::web::{
    Fetch, FetchBuilder, SearXng, SearchProvider, SearchResult, WebScrape, WebSearch, fetch,
    html_to_markdown, web_scrape,
};
#[cfg(feature = "builtin")]
pub use calculator::calculator;
#[cfg(feature = "builtin")]
pub use clock::current_time;
#[cfg(feature = "builtin")]
pub use files::{ListDir, ReadFile, list_dir, read_file};

/// All four built-in tools, the file tools confined to `root`.
///
/// In order: [`calculator`], [`current_time`], [`read_file`], [`list_dir`].
///
/// # Examples
///
/// ```
/// let tools = pikuri::builtin::all(".");
/// assert_eq!(tools.len(), 4);
/// ```
#[cfg(feature = "builtin")]
pub fn all(root: impl Into<PathBuf>) -> Vec<Arc<dyn Tool>> {
    let root = root.into();
    vec![
        Arc::new(calculator()),
        Arc::new(current_time()),
        Arc::new(read_file(root.clone())),
        Arc::new(list_dir(root)),
    ]
}

#[cfg(all(test, feature = "builtin"))]
mod tests;
