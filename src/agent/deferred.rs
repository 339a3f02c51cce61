//! The agent's side of deferred tools (`pikuri::tool_search`, whose module
//! doc is the contract): which tools a request carries and which a call
//! may run, the local search tool, and the found set read back from a
//! history.

use std::collections::HashMap;
use std::sync::Arc;

use super::shared::State;
use crate::protocol::ToolSpecs;
use crate::{Message, Tool};

/// How the deferred pool is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Like any other tool: no deferred tools, or not past the threshold.
    Off,
    /// Held back behind the local search tool until found.
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(dead_code, reason = "the tool-search feature's")
    )]
    Local,
    /// All sent, marked for the API's own search.
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(dead_code, reason = "the tool-search feature's")
    )]
    Native,
}

impl State {
    /// How the deferred pool goes in the next request.
    #[cfg(feature = "tool-search")]
    pub(crate) fn mode(&mut self) -> Mode {
        use crate::Api;
        let count = self.deferred.len();
        let (deferred, cached) = (&self.deferred, &mut self.deferral.tokens);
        let tokens = || *cached.get_or_insert_with(|| schema_tokens(deferred));
        let config = &self.deferral.config;
        if !config.defers(count, tokens) {
            Mode::Off
        } else if config.native
            && matches!(
                self.transport.api(),
                Api::AnthropicMessages | Api::OpenAiResponses
            )
        {
            Mode::Native
        } else {
            Mode::Local
        }
    }

    /// How the deferred pool goes in the next request (always with the
    /// others: the tool-search feature is off).
    #[cfg(not(feature = "tool-search"))]
    #[allow(clippy::unused_self, reason = "the feature's twin reads the pool")]
    pub(crate) fn mode(&mut self) -> Mode {
        Mode::Off
    }

    /// The tools encoded for a request: `None` without a tool (no
    /// [`ToolPath`](super::shared::ToolPath); the request carries
    /// [`ToolSpecs::NONE`]), else [`encode_tools`](State::encode_tools).
    pub(crate) fn tool_specs(&mut self) -> Option<Arc<ToolSpecs>> {
        self.tool_path.map(|path| (path.specs)(self))
    }

    /// [`ToolPath::specs`](super::shared::ToolPath): the tools encoded
    /// for a request (built once per change): the ordinary tools in their
    /// order, then (deferral active) the search tool and the found tools in
    /// the order found, so a reveal keeps the previous request a prefix.
    pub(crate) fn encode_tools(&mut self) -> Arc<ToolSpecs> {
        let api = self.transport.api();
        if let Some((built_for, specs)) = &self.tool_specs
            && *built_for == api
        {
            return Arc::clone(specs);
        }
        let mode = self.mode();
        let specs = Arc::new(match mode {
            Mode::Off if self.deferred.is_empty() => ToolSpecs::new(&self.tools),
            Mode::Native => {
                ToolSpecs::with_deferred(&self.tools, &self.deferred, self.native_regex())
            }
            Mode::Off | Mode::Local => ToolSpecs::new(&self.callable_in(mode)),
        });
        self.tool_specs = Some((api, Arc::clone(&specs)));
        specs
    }

    /// Whether the API's own search is Anthropic's regex variant.
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(clippy::unused_self, reason = "the feature's")
    )]
    fn native_regex(&self) -> bool {
        #[cfg(feature = "tool-search")]
        return self.deferral.config.regex;
        #[cfg(not(feature = "tool-search"))]
        false
    }

    /// The tools a call may run now: what the request offers (a native
    /// search's deferred tools included).
    pub(crate) fn callable(&mut self) -> Vec<Arc<dyn Tool>> {
        let mode = self.mode();
        self.callable_in(mode)
    }

    fn callable_in(&mut self, mode: Mode) -> Vec<Arc<dyn Tool>> {
        let mut all = self.tools.clone();
        match mode {
            Mode::Off | Mode::Native => all.extend(self.deferred.iter().cloned()),
            Mode::Local => {
                #[cfg(feature = "tool-search")]
                all.extend(self.deferral.tool.iter().cloned());
                all.extend(self.found_pool());
            }
        }
        all
    }

    /// Each deferred tool's position by name (built once per change of
    /// the pool: a look-up by name never scans it).
    pub(crate) fn positions(&mut self) -> &HashMap<String, usize> {
        let deferred = &self.deferred;
        self.deferral.positions.get_or_insert_with(|| {
            deferred
                .iter()
                .enumerate()
                .map(|(i, t)| (t.name().to_string(), i))
                .collect()
        })
    }

    /// The found names still in the deferred pool, in the order found.
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(dead_code, reason = "the tool-search feature's")
    )]
    pub(crate) fn found_names(&mut self) -> Vec<String> {
        if self.deferral.found.is_empty() {
            return Vec::new();
        }
        self.positions();
        let (Some(positions), found) = (&self.deferral.positions, &self.deferral.found) else {
            return Vec::new();
        };
        found
            .iter()
            .filter(|n| positions.contains_key(n.as_str()))
            .cloned()
            .collect()
    }

    /// Whether `name` is a deferred tool's.
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(dead_code, reason = "the tool-search feature's")
    )]
    pub(crate) fn is_deferred(&mut self, name: &str) -> bool {
        !self.deferred.is_empty() && self.positions().contains_key(name)
    }

    /// The found tools still in the deferred pool, in the order found.
    fn found_pool(&mut self) -> Vec<Arc<dyn Tool>> {
        if self.deferral.found.is_empty() {
            return Vec::new();
        }
        self.positions();
        let (Some(positions), deferred) = (&self.deferral.positions, &self.deferred) else {
            return Vec::new();
        };
        self.deferral
            .found
            .iter()
            .filter_map(|name| positions.get(name).map(|&i| Arc::clone(&deferred[i])))
            .collect()
    }

    /// The observation of a call to a deferred tool not found yet (it
    /// does not run), or `None` for any other call.
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(clippy::unused_self, reason = "the feature's")
    )]
    pub(crate) fn not_found_yet(&mut self, name: &str) -> Option<String> {
        #[cfg(feature = "tool-search")]
        if self.mode() == Mode::Local
            && !self.deferral.found.contains(name)
            && self.is_deferred(name)
        {
            return Some(crate::tool_search::not_found_note(name));
        }
        let _ = name;
        None
    }

    /// Reveal `names` (appended in order; a name found before stays where
    /// it is).
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(dead_code, reason = "the tool-search feature's")
    )]
    pub(crate) fn reveal(&mut self, names: impl IntoIterator<Item = String>) {
        for name in names {
            if self.deferral.found.push(name) {
                self.tool_specs = None;
            }
        }
    }

    /// Reveal what the API's own search found in `answer` (Anthropic's
    /// `tool_search_tool_result`, a Responses `tool_search_output`): every
    /// deferred tool is sent and callable in that form already, so this
    /// only keeps [`Agent::found_tools`](crate::Agent::found_tools) true,
    /// and the tools found if the conversation moves to an API searched
    /// locally.
    #[cfg_attr(
        not(feature = "tool-search"),
        allow(clippy::unused_self, reason = "the feature's")
    )]
    pub(crate) fn found_natively(&mut self, answer: &Message) {
        #[cfg(feature = "tool-search")]
        if answer.provider_data.is_some() && !self.deferred.is_empty() {
            let names = crate::protocol::found_tool_names(answer);
            let known: Vec<String> = names.into_iter().filter(|n| self.is_deferred(n)).collect();
            self.reveal(known);
        }
        let _ = answer;
    }

    /// Forget the found tools and read them again from `messages` (a
    /// loaded history, a resumed journal, a cleared conversation).
    pub(crate) fn found_from(&mut self, messages: &[Message]) {
        if !self.deferral.found.is_empty() {
            self.deferral.found.clear();
            self.tool_specs = None;
        }
        #[cfg(feature = "tool-search")]
        {
            let positions = self.positions();
            let names = search::found_in(messages, |name| positions.contains_key(name));
            self.reveal(names);
        }
        let _ = messages;
    }
}

/// Give a new agent its search settings and its search tool.
#[cfg(feature = "tool-search")]
pub(crate) fn install(shared: &Arc<super::shared::Shared>) {
    let tool = search::SearchTool::new(Arc::downgrade(shared));
    let mut st = shared.state.lock();
    st.deferral.config = shared.options.tool_search.clone();
    st.deferral.tool = Some(Arc::new(tool));
}

/// The estimated tokens of `tools`' schemas (as compaction estimates them).
#[cfg(feature = "tool-search")]
fn schema_tokens(tools: &[Arc<dyn Tool>]) -> u64 {
    use super::compact::estimate_tokens;
    tools
        .iter()
        .map(|t| {
            estimate_tokens(t.name())
                + estimate_tokens(t.description())
                + estimate_tokens(&t.parameters().to_json().to_string())
        })
        .sum()
}

#[cfg(feature = "tool-search")]
pub(crate) mod search {
    //! The local search tool.

    use std::collections::HashSet;
    use std::sync::{Arc, Weak};

    use serde_json::{Value, json};

    use super::super::shared::Shared;
    use crate::tool::Parameters;
    use crate::tool_search::{Index, SEARCH_DESCRIPTION, SEARCH_TOOL};
    use crate::{Message, Role, Tool, ToolContext, ToolError};

    /// At most this many characters of a found tool's description go in
    /// the result (the schema follows in the next request).
    const DESCRIPTION_CHARS: usize = 200;

    /// `search_tools`: ranks the deferred pool, reveals the best matches.
    pub(crate) struct SearchTool {
        shared: Weak<Shared>,
        params: Parameters,
    }

    impl SearchTool {
        pub(crate) fn new(shared: Weak<Shared>) -> SearchTool {
            SearchTool {
                shared,
                params: Parameters::builder()
                    .required_string(
                        "query",
                        "What the tool should do, in a few keywords (e.g. `send email`).",
                    )
                    .optional_integer("limit", "At most this many tools (default: the most).")
                    .build(),
            }
        }
    }

    impl Tool for SearchTool {
        fn name(&self) -> &str {
            SEARCH_TOOL
        }

        fn description(&self) -> &str {
            SEARCH_DESCRIPTION
        }

        fn parameters(&self) -> &Parameters {
            &self.params
        }

        fn idempotent(&self) -> bool {
            true
        }

        fn call(&self, args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
            let query = args.get("query").and_then(Value::as_str).unwrap_or("");
            if query.trim().is_empty() {
                return Err(ToolError::new(
                    "the query is empty: name what the tool should do",
                ));
            }
            let shared = self
                .shared
                .upgrade()
                .ok_or_else(|| ToolError::new("the agent is closed"))?;
            let mut guard = shared.state.lock();
            let st = &mut *guard;
            let max = st.deferral.config.max_results;
            // Out of range asks for the nearest allowed: 0 (or less) is 1.
            let limit = args.get("limit").and_then(Value::as_i64).map_or(max, |l| {
                usize::try_from(l.max(1)).unwrap_or(usize::MAX).min(max)
            });
            let deferred = &st.deferred;
            let index = Arc::clone(
                st.deferral
                    .index
                    .get_or_insert_with(|| Arc::new(Index::new(deferred))),
            );
            let hits: Vec<Arc<dyn Tool>> = index
                .search(query, limit)
                .into_iter()
                .map(|i| Arc::clone(&st.deferred[i]))
                .collect();
            st.reveal(hits.iter().map(|t| t.name().to_string()));
            drop(guard);
            let found: Vec<Value> = hits
                .iter()
                .map(|t| {
                    let d: String = t.description().chars().take(DESCRIPTION_CHARS).collect();
                    json!({"name": t.name(), "description": d})
                })
                .collect();
            let note = if found.is_empty() {
                "No tool matched: try other words."
            } else {
                "These tools can be called from the next step on."
            };
            Ok(json!({"found": found, "note": note}).to_string())
        }
    }

    /// The deferred tools the search results in `messages` found, in the
    /// order found: the results of the search tool's calls that parse (a
    /// damaged one reveals nothing) and name a tool `known` says is in the
    /// pool. Linear in the names read.
    pub(crate) fn found_in(messages: &[Message], known: impl Fn(&str) -> bool) -> Vec<String> {
        let calls: HashSet<&str> = messages
            .iter()
            .flat_map(|m| &m.tool_calls)
            .filter(|c| c.name == SEARCH_TOOL)
            .map(|c| c.id.as_str())
            .collect();
        let mut out: Vec<String> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut add = |name: &str| {
            if known(name) && !seen.contains(name) {
                seen.insert(name.to_string());
                out.push(name.to_string());
            }
        };
        for m in messages {
            // What an API's own search found (kept in the answer's
            // provider data) counts as found too.
            if m.role == Role::Assistant && m.provider_data.is_some() {
                for name in crate::protocol::found_tool_names(m) {
                    add(&name);
                }
                continue;
            }
            let ours = m.role == Role::Tool
                && m.tool_call_id
                    .as_deref()
                    .is_some_and(|id| calls.contains(id));
            if !ours {
                continue;
            }
            let Ok(result) = serde_json::from_str::<Value>(&m.content) else {
                continue;
            };
            let names = result
                .get("found")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|f| f.get("name").and_then(Value::as_str));
            for name in names {
                add(name);
            }
        }
        out
    }
}
