//! The local search index: BM25 over the words of each tool's name,
//! description and parameter names (see [`Index`]).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::Tool;

/// At most this many characters of a query are read (the rest is ignored).
pub(crate) const MAX_QUERY_CHARS: usize = 512;
/// At most this many distinct words of a query count.
pub(crate) const MAX_QUERY_TERMS: usize = 32;
/// At most this many words of one field (name, description, parameters)
/// are indexed: a huge description costs no more than a long one.
const MAX_FIELD_TERMS: usize = 512;
/// How deep the parameter schema is walked for property names.
const MAX_SCHEMA_DEPTH: usize = 8;

// BM25's usual constants: term-frequency saturation and length
// normalisation.
const K1: f32 = 1.2;
const B: f32 = 0.75;
// A word of the name says more than one of the description.
const NAME_WEIGHT: f32 = 3.0;
const PARAM_WEIGHT: f32 = 1.5;

/// A BM25 index over tools: the words of each tool's name (split on `_`,
/// `-`, `.` and camelCase), its description and its parameters' names,
/// lowercased (Unicode-aware) with a trailing plural `s` dropped.
///
/// Built once per set of deferred tools; a search costs a look-up per
/// query word and a sort of the tools that matched. Ties keep the order
/// the tools were given in.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use pikuri::Tool;
/// use pikuri::tool::{FnTool, Parameters};
/// use pikuri::tool_search::Index;
///
/// let tool = |name: &str, description: &str| -> Arc<dyn Tool> {
///     Arc::new(FnTool::new(name, description, Parameters::empty(), |_, _| Ok(String::new())))
/// };
/// let tools = [
///     tool("send_email", "Sends an email message."),
///     tool("getWeatherForecast", "The forecast for a city."),
/// ];
/// let index = Index::new(&tools);
/// assert_eq!(index.search("weather forecast", 5), vec![1]);
/// assert_eq!(index.search("emails", 5), vec![0]);
/// assert!(index.search("", 5).is_empty());
/// ```
#[derive(Debug, Default)]
pub struct Index {
    /// Word to its postings: (tool, weighted term frequency).
    postings: HashMap<String, Vec<(u32, f32)>>,
    /// Each tool's weighted length.
    lengths: Vec<f32>,
    average: f32,
}

impl Index {
    /// Index `tools`; a search answers positions in this slice.
    pub fn new(tools: &[Arc<dyn Tool>]) -> Index {
        let mut postings: HashMap<String, Vec<(u32, f32)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(tools.len());
        let mut counts: HashMap<String, f32> = HashMap::new();
        for (i, tool) in tools.iter().enumerate() {
            counts.clear();
            let mut add = |text: &str, weight: f32| {
                for word in words(text).take(MAX_FIELD_TERMS) {
                    *counts.entry(word).or_default() += weight;
                }
            };
            add(tool.name(), NAME_WEIGHT);
            add(tool.description(), 1.0);
            let mut params = Vec::new();
            property_names(tool.parameters().to_json(), 0, &mut params);
            for p in params.iter().take(MAX_FIELD_TERMS) {
                add(p, PARAM_WEIGHT);
            }
            let doc = u32::try_from(i).unwrap_or(u32::MAX);
            lengths.push(counts.values().sum());
            for (word, tf) in counts.drain() {
                postings.entry(word).or_default().push((doc, tf));
            }
        }
        #[allow(clippy::cast_precision_loss, reason = "an average length")]
        let average = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<f32>() / lengths.len() as f32
        };
        Index {
            postings,
            lengths,
            average,
        }
    }

    /// The number of tools indexed.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The positions of the (at most `k`) tools that best match `query`,
    /// best first; a tool that shares no word with it is never answered.
    /// Only the first 512 characters and 32 distinct words of `query`
    /// count.
    pub fn search(&self, query: &str, k: usize) -> Vec<usize> {
        if k == 0 || self.is_empty() {
            return Vec::new();
        }
        let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
        let mut terms: Vec<String> = Vec::new();
        for w in words(&query) {
            if terms.len() == MAX_QUERY_TERMS {
                break;
            }
            if !terms.contains(&w) {
                terms.push(w);
            }
        }
        #[allow(clippy::cast_precision_loss, reason = "BM25 is approximate")]
        let n = self.lengths.len() as f32;
        // Dense scores: a common word touches every tool, and adding into
        // a slice costs less than hashing each one.
        let mut scores = vec![0.0_f32; self.lengths.len()];
        let mut touched: Vec<u32> = Vec::new();
        for term in &terms {
            let Some(list) = self.postings.get(term) else {
                continue;
            };
            #[allow(clippy::cast_precision_loss, reason = "BM25 is approximate")]
            let df = list.len() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(doc, tf) in list {
                let len = self.lengths[doc as usize];
                let norm = K1 * (1.0 - B + B * len / self.average.max(f32::EPSILON));
                let score = &mut scores[doc as usize];
                if *score <= 0.0 {
                    touched.push(doc);
                }
                *score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        let mut ranked: Vec<(u32, f32)> = touched
            .into_iter()
            .map(|doc| (doc, scores[doc as usize]))
            .collect();
        // Best first; equal scores in the order the tools were given.
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if k < ranked.len() {
            ranked.select_nth_unstable_by(k, order);
            ranked.truncate(k);
        }
        ranked.sort_unstable_by(order);
        ranked.into_iter().map(|(doc, _)| doc as usize).collect()
    }
}

/// The words of `text`: runs of letters and digits, split again at
/// camelCase humps (`getHTTPStatus` is `get`, `http`, `status`),
/// lowercased, a plural `s` dropped (`files` is `file`).
pub(crate) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .flat_map(humps)
        .map(|w| normalize(&w.to_lowercase()))
}

/// Split a run of letters at its camelCase humps.
fn humps(run: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = run.char_indices().collect();
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..chars.len() {
        let (at, c) = chars[i];
        let prev = chars[i - 1].1;
        let next_lower = chars.get(i + 1).is_some_and(|&(_, n)| n.is_lowercase());
        // `aB` starts a word at B; `ABc` starts one at B (the end of an
        // acronym).
        if c.is_uppercase() && (prev.is_lowercase() || (prev.is_uppercase() && next_lower)) {
            out.push(&run[start..at]);
            start = at;
        }
    }
    if start < run.len() {
        out.push(&run[start..]);
    }
    out
}

fn normalize(word: &str) -> String {
    let n = word.chars().count();
    if n > 3 && word.ends_with('s') && !word.ends_with("ss") {
        word[..word.len() - 1].to_string()
    } else {
        word.to_string()
    }
}

/// The property names of a JSON Schema, nested objects and array items
/// included, down to a bounded depth.
fn property_names(schema: &Value, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_SCHEMA_DEPTH || out.len() >= MAX_FIELD_TERMS {
        return;
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            out.push(name.clone());
            property_names(sub, depth + 1, out);
        }
    }
    if let Some(items) = schema.get("items") {
        property_names(items, depth + 1, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{FnTool, Parameters};

    fn tool(name: &str, description: &str) -> Arc<dyn Tool> {
        Arc::new(FnTool::new(
            name,
            description,
            Parameters::empty(),
            |_, _| Ok(String::new()),
        ))
    }

    fn with_params(name: &str, schema: Value) -> Arc<dyn Tool> {
        let params = Parameters::from_json_schema(schema).unwrap();
        Arc::new(FnTool::new(name, "A tool.", params, |_, _| {
            Ok(String::new())
        }))
    }

    #[test]
    fn words_split_names_and_camel_case() {
        let w: Vec<String> = words("get_user-name.v2 getHTTPStatus ÉCOLE Straße").collect();
        assert_eq!(
            w,
            [
                "get", "user", "name", "v2", "get", "http", "statu", "école", "straße"
            ]
        );
        assert_eq!(words("files class").collect::<Vec<_>>(), ["file", "class"]);
    }

    #[test]
    fn ranks_name_above_description_and_ties_keep_order() {
        let tools = [
            tool("alpha", "Mentions weather once."),
            tool("weather_now", "Current conditions."),
            tool("beta", "Mentions weather once."),
        ];
        let index = Index::new(&tools);
        assert_eq!(index.search("weather", 5), vec![1, 0, 2]);
        assert_eq!(index.search("weather", 2), vec![1, 0]);
        assert!(index.search("weather", 0).is_empty());
        assert!(index.search("nothing matches", 5).is_empty());
    }

    #[test]
    fn parameter_names_count_nested_ones_too() {
        let tools = [
            tool("a", "First."),
            with_params(
                "b",
                serde_json::json!({"type": "object", "properties": {
                    "rows": {"type": "array", "items": {"type": "object",
                        "properties": {"zipCode": {"type": "string"}}}}}}),
            ),
        ];
        let index = Index::new(&tools);
        assert_eq!(index.search("zip code", 5), vec![1]);
        assert_eq!(index.search("row", 5), vec![1]);
    }

    #[test]
    fn queries_are_bounded() {
        let tools = [tool("late_word", "x"), tool("early", "y")];
        let index = Index::new(&tools);
        // A word after the first 512 characters is not read.
        let long = format!("{} late", "z".repeat(MAX_QUERY_CHARS));
        assert!(index.search(&long, 5).is_empty());
        // Nor the 33rd distinct word.
        let mut many: Vec<String> = (0..MAX_QUERY_TERMS).map(|i| format!("w{i}")).collect();
        many.push("early".into());
        assert!(index.search(&many.join(" "), 5).is_empty());
        assert_eq!(index.search("EARLY", 5), vec![1]);
    }

    #[test]
    fn empty_and_odd_input() {
        assert!(Index::new(&[]).search("anything", 5).is_empty());
        let index = Index::new(&[tool("t", "ok")]);
        for q in ["", "   ", "\u{0}\u{202e}", "🙂🙂", "___", "\u{FFFF}"] {
            assert!(index.search(q, usize::MAX).is_empty(), "{q:?}");
        }
    }
}
