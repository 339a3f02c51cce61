//! Deferred tools and tool search: hundreds of tools, small requests.
//!
//! A tool added with
//! [`Configurator::add_deferred_tool`](crate::Configurator::add_deferred_tool)
//! (or an extension's
//! [`ExtensionContext::add_deferred_tool`](crate::extension::ExtensionContext::add_deferred_tool))
//! is *deferred*: once the deferred tools pass the [`ToolSearch`]
//! threshold, their schemas are not sent until the model finds them with
//! a search tool. Below the threshold they are sent like any other tool.
//!
//! (Work in progress: the search itself lands with issue 40.)

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

    /// At most this many tools found by one search (at least one).
    #[must_use]
    pub fn max_results(mut self, n: usize) -> ToolSearch {
        self.max_results = n.max(1);
        self
    }
}
