//! The attack classes of `ATTACKS.md` walked over the local tool search
//! (deferred tools, `search_tools`, the found set): extreme numbers,
//! hostile names and descriptions, damaged histories, many threads, a
//! cancel in a batch with a search, and 100,000 tools (work counted, never
//! timed).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::Parameters;
use pikuri::tool_search::ToolSearch;
use pikuri::{Agent, History, Role, Tool, ToolContext, ToolError};
use serde_json::{Value, json};

use crate::util::assert_valid_history;

/// A deferred tool that counts every read of its name: the work the
/// agent does per tool, counted instead of timed.
struct Counted {
    name: String,
    description: String,
    reads: Arc<AtomicUsize>,
    params: Parameters,
}

impl Tool for Counted {
    fn name(&self) -> &str {
        self.reads.fetch_add(1, Ordering::Relaxed);
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> &Parameters {
        &self.params
    }

    fn call(&self, _args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
        Ok(format!("ran {}", self.name))
    }
}

fn counted(n: usize, reads: &Arc<AtomicUsize>) -> Vec<Counted> {
    (0..n)
        .map(|i| Counted {
            name: format!("tool_{i}"),
            description: format!("Does thing number {i} for the user (word{i})."),
            reads: Arc::clone(reads),
            params: Parameters::empty(),
        })
        .collect()
}

fn agent_with_counted(server: &FakeServer, n: usize, reads: &Arc<AtomicUsize>) -> Agent {
    let mut c = Agent::builder(server.transport()).tool_search(ToolSearch::new());
    for t in counted(n, reads) {
        c = c.add_deferred_tool(t);
    }
    c.build().unwrap()
}

fn search(query: &str) -> Reply {
    Reply::tool_call("search_tools", json!({ "query": query }))
}

/// The tool messages' contents, in order.
fn observations(agent: &Agent) -> Vec<String> {
    agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect()
}

fn found_names(observation: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(observation).expect("a search result is JSON");
    v["found"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

/// A history whose one search result names `names`.
fn history_naming(names: impl Iterator<Item = String>) -> History {
    let found: Vec<Value> = names.map(|n| json!({ "name": n })).collect();
    let result = json!({ "found": found, "note": "" }).to_string();
    let history = json!({"version": 1, "messages": [
        {"role": "user", "content": "find them all"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "search_tools", "arguments": "{\"query\":\"thing\"}"}]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
        {"role": "assistant", "content": "found"}]});
    History::parse(&history.to_string()).unwrap()
}

/// A loaded history naming thousands of found tools (and the same names
/// again) costs linear work: each found name was once checked against
/// the whole pool (and against every name found before it) on the load,
/// in `found_tools` and in every request that sent the found tools.
#[test]
fn a_history_naming_thousands_of_found_tools_loads_and_runs_in_linear_work() {
    const N: usize = 3_000;
    let server = FakeServer::start();
    let reads = Arc::new(AtomicUsize::new(0));
    let mut agent = agent_with_counted(&server, N, &reads);
    let names = (0..N)
        .rev()
        .map(|i| format!("tool_{i}"))
        .chain((0..N).map(|i| format!("tool_{i}")))
        .chain(["no_such_tool".to_string()]);
    let history = history_naming(names);
    let before = reads.load(Ordering::Relaxed);
    agent.load_history(history).unwrap();
    let found = agent.found_tools();
    assert_eq!(found.len(), N);
    assert_eq!(found[0], format!("tool_{}", N - 1));
    server
        .push(Reply::tool_call("tool_0", json!({})))
        .push(Reply::text("done"));
    agent.run_loop("call the first").unwrap();
    assert_eq!(observations(&agent).last().unwrap(), "ran tool_0");
    let sent = server.chat_requests();
    assert_eq!(sent[0].tool_names().len(), N + 1);
    assert_eq!(sent[0].tool_names()[0], "search_tools");
    let work = reads.load(Ordering::Relaxed) - before;
    // A few reads a tool a request; quadratic was N²/2 = 4.5 million.
    assert!(work < 40 * N, "{work} name reads for {N} tools");
    assert_valid_history(agent.messages());
}

/// 100,000 deferred tools: the build, the index, a search and a call of
/// what it found, in work linear in the pool.
#[test]
fn a_hundred_thousand_deferred_tools_are_built_searched_and_called_in_linear_work() {
    const N: usize = 100_000;
    let server = FakeServer::start();
    let reads = Arc::new(AtomicUsize::new(0));
    let mut agent = agent_with_counted(&server, N, &reads);
    server
        .push(search("word77777"))
        .push(Reply::tool_call("tool_77777", json!({})))
        .push(Reply::text("done"));
    agent.run_loop("do thing 77777").unwrap();
    let obs = observations(&agent);
    assert_eq!(found_names(&obs[0]), ["tool_77777"]);
    assert_eq!(obs[1], "ran tool_77777");
    assert_eq!(agent.found_tools(), ["tool_77777"]);
    let sent = server.chat_requests();
    assert_eq!(sent[0].tool_names(), ["search_tools"]);
    assert_eq!(sent[1].tool_names(), ["search_tools", "tool_77777"]);
    // The first request is small whatever the pool.
    assert!(sent[0].raw_body.len() < 4_000);
    let work = reads.load(Ordering::Relaxed);
    assert!(work < 20 * N, "{work} name reads for {N} tools");
}
