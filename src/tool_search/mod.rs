//! Deferred tools and tool search: hundreds of tools, small requests.
//!
//! A tool added with
//! [`Configurator::add_deferred_tool`](crate::Configurator::add_deferred_tool)
//! (or an extension's
//! [`ExtensionContext::add_deferred_tool`](crate::extension::ExtensionContext::add_deferred_tool))
//! is *deferred*. Once the deferred tools pass the [`ToolSearch`]
//! threshold ([`Threshold::Count`] of tools, or [`Threshold::Tokens`] of
//! their schemas, estimated at four characters a token), deferral is
//! *active*: their schemas are not sent, and the request carries one more
//! tool, `search_tools` (`query`, optional `limit`), whose [`Index`] ranks
//! the deferred tools by the words of their names, descriptions and
//! parameter names. Its result lists the tools it found (JSON:
//! `{"found":[{"name":..,"description":..}],"note":..}`) and *reveals*
//! them: they are sent, and callable, from the next request on. Below the
//! threshold deferred tools are sent like any other tool.
//!
//! # The prompt cache
//!
//! A request's tools are the ordinary tools in their order, then
//! `search_tools`, then the found tools in the order they were found. A
//! reveal only appends, so the request before it stays a prefix of the one
//! after it and a provider's prompt cache keeps it.
//!
//! # Calls
//!
//! A call to a found tool runs like any other. A call to a deferred tool
//! not found yet does not run: the model gets an error observation telling
//! it to search for the tool first (the history stays valid, the next
//! request goes on). A found tool a server withdrew
//! ([`ExtensionContext::remove_tool`](crate::extension::ExtensionContext::remove_tool))
//! is no longer sent; a call to it gets the usual unknown-tool observation.
//!
//! # Native search
//!
//! With [`ToolSearch::native`] on (the default) and a transport on
//! Anthropic's Messages or OpenAI's Responses API, the API searches itself:
//! every deferred tool goes in the request marked for deferred loading, no
//! `search_tools` is added, and a call to any deferred tool runs.
//!
//! # Found for the conversation
//!
//! The found tools are the conversation's: [`Agent::found_tools`](crate::Agent::found_tools)
//! lists them, [`Agent::clear_conversation`](crate::Agent::clear_conversation)
//! forgets them, and they are read again from the history itself (the
//! results of `search_tools` in its tool messages) whenever a history is
//! loaded ([`Agent::load_history`](crate::Agent::load_history)) or a
//! journal resumed, so a reloaded conversation keeps calling them. A
//! damaged result (not the JSON above) reveals nothing. Compaction that
//! summarises a search away keeps the tools it found: the agent's found
//! set lives beside the history, and is derived from it only when a
//! history comes from outside.
//!
//! # Sub-agents
//!
//! A [`Persona`](crate::subagent::Persona) may name a deferred tool: its
//! child gets it as an ordinary tool (a persona's few tools need no
//! search). A child has no deferred pool of its own.
//!
//! # Examples
//!
//! ```
//! use pikuri::Agent;
//! use serde_json::json;
//! use pikuri::testing::{FakeServer, Reply};
//! use pikuri::tool::{FnTool, Parameters};
//! use pikuri::tool_search::{Threshold, ToolSearch};
//!
//! let server = FakeServer::start();
//! server.push(Reply::tool_call("search_tools", json!({"query": "weather"})));
//! server.push(Reply::tool_call("tool_7_weather", json!({})));
//! server.push(Reply::text("Sunny."));
//! let mut config = Agent::builder(server.transport())
//!     .tool_search(ToolSearch::new().threshold(Threshold::Count(2)));
//! for i in 0..10 {
//!     let name = if i == 7 { format!("tool_{i}_weather") } else { format!("tool_{i}") };
//!     let tool = FnTool::new(name, format!("Tool number {i}."), Parameters::empty(),
//!         move |_, _| Ok(format!("ran {i}")));
//!     config = config.add_deferred_tool(tool);
//! }
//! let mut agent = config.build()?;
//! assert_eq!(agent.run_loop("Weather?")?.answer.as_deref(), Some("Sunny."));
//! assert_eq!(agent.found_tools(), ["tool_7_weather"]);
//! let sent = server.chat_requests();
//! assert_eq!(sent[0].tool_names(), ["search_tools"]);
//! assert_eq!(sent[1].tool_names(), ["search_tools", "tool_7_weather"]);
//! assert_eq!(agent.messages()[4].content, "ran 7");
//! # Ok::<(), pikuri::Error>(())
//! ```

mod index;

pub use index::Index;

/// The name of the local search tool.
pub(crate) const SEARCH_TOOL: &str = "search_tools";

/// The local search tool's description, for the model.
pub(crate) const SEARCH_DESCRIPTION: &str = "Search the tools that are not loaded yet by \
what they do (keywords: names, actions, objects). The tools found can be called from the \
next step on.";

/// What a call to a deferred tool not found yet observes.
pub(crate) fn not_found_note(name: &str) -> String {
    format!(
        "Error: tool `{name}` is not loaded yet: call `{SEARCH_TOOL}` with what it does first, \
         then call it"
    )
}

/// When deferred tools are held back: above a count of tools, or above an
/// estimated size of their schemas in tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Threshold {
    /// Defer when there are more than this many deferred tools.
    Count(usize),
    /// Defer when the deferred tools' schemas are estimated at more than
    /// this many tokens.
    Tokens(u64),
}

/// How deferred tools are searched and revealed; set with
/// [`Configurator::tool_search`](crate::Configurator::tool_search).
///
/// # Examples
///
/// ```
/// use pikuri::tool_search::{Threshold, ToolSearch};
/// let search = ToolSearch::new().threshold(Threshold::Count(50)).max_results(3);
/// assert_eq!(search.threshold_value(), Threshold::Count(50));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSearch {
    pub(crate) threshold: Threshold,
    pub(crate) native: bool,
    pub(crate) regex: bool,
    pub(crate) max_results: usize,
}

impl Default for ToolSearch {
    fn default() -> ToolSearch {
        ToolSearch::new()
    }
}

impl ToolSearch {
    /// Defer above 30 deferred tools, search locally and natively where the
    /// API offers its own search, five results a search.
    pub fn new() -> ToolSearch {
        ToolSearch {
            threshold: Threshold::Count(30),
            native: true,
            regex: false,
            max_results: 5,
        }
    }

    /// Defer only above `threshold`.
    #[must_use]
    pub fn threshold(mut self, threshold: Threshold) -> ToolSearch {
        self.threshold = threshold;
        self
    }

    /// The threshold set.
    pub fn threshold_value(&self) -> Threshold {
        self.threshold
    }

    /// Use the API's own tool search where it has one (Anthropic Messages,
    /// OpenAI Responses); the local search tool elsewhere. On by default.
    #[must_use]
    pub fn native(mut self, on: bool) -> ToolSearch {
        self.native = on;
        self
    }

    /// On Anthropic's Messages API, search with its regex variant
    /// (`tool_search_tool_regex`: the model writes Python regular
    /// expressions over tool names and descriptions) instead of its BM25
    /// one (natural-language queries, the default). Off by default; no
    /// effect on other APIs (OpenAI Responses has one search) or with
    /// [`native`](Self::native) off. A conversation that switches keeps
    /// sending the search tools its history used, so searches sent back
    /// stay valid.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, Api};
    /// use pikuri::testing::{FakeServer, Reply};
    /// use pikuri::tool::{FnTool, Parameters};
    /// use pikuri::tool_search::{Threshold, ToolSearch};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::text("ok"));
    /// let search = ToolSearch::new().threshold(Threshold::Count(0)).regex(true);
    /// let mut agent = Agent::builder(server.transport().with_api(Api::AnthropicMessages))
    ///     .tool_search(search)
    ///     .add_deferred_tool(FnTool::new("get_weather", "The weather.", Parameters::empty(),
    ///         |_, _| Ok("sunny".into())))
    ///     .build()?;
    /// agent.run_loop("weather?")?;
    /// let body = server.chat_requests()[0].raw_body.clone();
    /// assert!(body.contains(r#""type":"tool_search_tool_regex_20251119""#));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    #[must_use]
    pub fn regex(mut self, on: bool) -> ToolSearch {
        self.regex = on;
        self
    }

    /// At most this many tools found by one search (at least one); the
    /// model may ask for fewer with the search's `limit`.
    #[must_use]
    pub fn max_results(mut self, n: usize) -> ToolSearch {
        self.max_results = n.max(1);
        self
    }

    /// Whether deferred tools this many, whose schemas are estimated at
    /// `tokens`, are held back.
    pub(crate) fn defers(&self, count: usize, tokens: impl FnOnce() -> u64) -> bool {
        count > 0
            && match self.threshold {
                Threshold::Count(n) => count > n,
                Threshold::Tokens(n) => tokens() > n,
            }
    }
}
