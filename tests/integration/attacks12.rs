//! The attack classes of `ATTACKS.md` walked over the local tool search
//! (deferred tools, `search_tools`, the found set): extreme numbers,
//! hostile names and descriptions, damaged histories, many threads, a
//! cancel in a batch with a search, and 100,000 tools (work counted, never
//! timed).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use pikuri::extension::{Extension, ExtensionContext};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::tool_search::{Threshold, ToolSearch};
use pikuri::{Agent, Cancellable, ErrorKind, History, Tool, ToolContext, ToolError};
use serde_json::{Value, json};

use crate::tool_search::{found_names, observations, search};
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

/// `limit` in the call's JSON: a float that is a whole number counts, any
/// other float, a string, a boolean or a number out of `i64` is a
/// validation error the model reads; 0, negatives and `-0.0` ask for one;
/// `null` is no limit (the configured most).
#[test]
fn a_search_limit_of_every_json_kind() {
    let server = FakeServer::start();
    let limits = [
        json!(2.0),
        json!(2.5),
        json!("3"),
        json!(1e300),
        json!(true),
        json!(null),
        json!(-0.0),
        json!(i64::MIN),
        json!(u64::MAX),
    ];
    for limit in &limits {
        server.push(Reply::tool_call(
            "search_tools",
            json!({"query": "thing", "limit": limit}),
        ));
    }
    server.push(Reply::text("done"));
    let reads = Arc::new(AtomicUsize::new(0));
    let mut agent = agent_with_counted(&server, 100, &reads);
    agent.run_loop("search").unwrap();
    let obs = observations(&agent);
    let counts: Vec<Option<usize>> = obs
        .iter()
        .map(|o| (!o.starts_with("Error")).then(|| found_names(o).len()))
        .collect();
    assert_eq!(
        counts,
        [
            Some(2),
            None,
            None,
            None,
            None,
            Some(5),
            Some(1),
            Some(1),
            Some(5)
        ],
        "{obs:#?}"
    );
    assert!(obs[1].contains("limit"), "{}", obs[1]);
    assert_valid_history(agent.messages());
    // The next turn works, with what the searches found.
    server
        .push(Reply::tool_call("tool_4", json!({})))
        .push(Reply::text("ran"));
    agent.run_loop("call").unwrap();
    assert_eq!(observations(&agent).last().unwrap(), "ran tool_4");
}

/// Keeps its context for the test to add and withdraw tools from outside
/// the loop.
struct Hold(Arc<Mutex<Option<ExtensionContext>>>);

impl Extension for Hold {
    fn bind(&mut self, ctx: &ExtensionContext) -> pikuri::Result<()> {
        *self.0.lock() = Some(ctx.clone());
        Ok(())
    }
}

fn plain(name: &str, description: &str) -> FnTool {
    let ran = format!("ran {name}");
    FnTool::new(name, description, Parameters::empty(), move |_, _| {
        Ok(ran.clone())
    })
}

/// Hostile names are refused where the tool is added (at the build and
/// at run time, the search tool's name included); a deferred tool with a
/// 1 MB description full of control characters and terminal escapes is
/// indexed, found, and quoted in the search result cut to 200 characters
/// of JSON-escaped text.
#[test]
fn hostile_names_are_refused_and_a_huge_hostile_description_is_found_bounded() {
    let server = FakeServer::start();
    for bad in [
        "",
        "wéather",
        "a\u{0}b",
        "\u{1b}[31mred",
        "x".repeat(300).as_str(),
        "search_tools",
    ] {
        let err = Agent::builder(server.transport())
            .add_deferred_tool(plain(bad, "d"))
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}: {err}");
        assert!(!err.to_string().contains('\u{1b}'), "{err}");
    }
    let hostile = format!(
        "\u{1b}[2J\u{0}\u{202e}\u{7}{}{} teleport",
        "z".repeat(1 << 20),
        " \u{1b}]0;title\u{7}".repeat(10)
    );
    let slot = Arc::new(Mutex::new(None));
    let mut config = Agent::builder(server.transport())
        .tool_search(ToolSearch::new().threshold(Threshold::Count(0)))
        .add_extension(Hold(Arc::clone(&slot)))
        .add_deferred_tool(plain("teleport_user", &hostile));
    for i in 0..50 {
        config = config.add_deferred_tool(plain(&format!("other_{i}"), "Something else."));
    }
    let mut agent = config.build().unwrap();
    let ctx = slot.lock().clone().unwrap();
    for bad in ["", "wéather", "search_tools", "other_3"] {
        let err = ctx
            .add_deferred_tool(Arc::new(plain(bad, "d")))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
    }
    server
        .push(search("teleport"))
        .push(Reply::tool_call("teleport_user", json!({})))
        .push(Reply::text("done"));
    agent.run_loop("teleport me").unwrap();
    let obs = observations(&agent);
    let result: Value = serde_json::from_str(&obs[0]).unwrap();
    assert_eq!(result["found"][0]["name"], "teleport_user");
    let quoted = result["found"][0]["description"].as_str().unwrap();
    assert_eq!(quoted.chars().count(), 200);
    assert!(obs[0].len() < 2_000, "{}", obs[0].len());
    assert_eq!(obs[1], "ran teleport_user");
    assert_valid_history(agent.messages());
}

/// A cancel in a batch with a search: the search after it does not run
/// and reveals nothing; a search before it ran, and what it revealed is
/// what the history says (a reload finds the same); the next turn works.
#[test]
fn a_cancel_beside_a_search_keeps_the_found_set_true_to_the_history() {
    for search_first in [false, true] {
        let server = FakeServer::start();
        let cancel = Cancellable::new();
        let c2 = cancel.clone();
        let stop = FnTool::new("stop", "Stops.", Parameters::empty(), move |_, _| {
            c2.cancel();
            Ok("stopping".into())
        });
        let reads = Arc::new(AtomicUsize::new(0));
        let build = || {
            let mut c = Agent::builder(server.transport())
                .cancellable(cancel.clone())
                .tool_search(ToolSearch::new());
            for t in counted(100, &reads) {
                c = c.add_deferred_tool(t);
            }
            c
        };
        let mut agent = build().add_tool(stop).build().unwrap();
        let search = ("search_tools", json!({"query": "word42"}));
        let stop = ("stop", json!({}));
        let batch = if search_first {
            vec![search, stop]
        } else {
            vec![stop, search]
        };
        server.push(Reply::tool_calls(batch));
        let err = agent.run_loop("go").unwrap_err();
        assert!(err.is_cancelled(), "{err}");
        assert_valid_history(agent.messages());
        let found = agent.found_tools();
        if search_first {
            assert_eq!(found, ["tool_42"]);
        } else {
            assert!(found.is_empty(), "{found:?}");
        }
        // A reload of the history finds exactly what the agent found.
        let mut reloaded = build().add_tool(plain("stop", "Stops.")).build().unwrap();
        reloaded.load_history(agent.export_history()).unwrap();
        assert_eq!(reloaded.found_tools(), found);
        // The next turn works.
        server
            .push(Reply::tool_call("tool_42", json!({})))
            .push(Reply::text("done"));
        agent.run_loop("call it").unwrap();
        let last = observations(&agent).pop().unwrap();
        if search_first {
            assert_eq!(last, "ran tool_42");
        } else {
            assert!(last.contains("not loaded yet"), "{last}");
        }
    }
}

/// Tools added to and withdrawn from the deferred pool on another thread
/// while the model searches and calls: every search result is whole, the
/// found set names only tools in the pool, and the history stays valid.
#[test]
fn the_pool_changing_on_another_thread_while_the_model_searches() {
    let server = FakeServer::start();
    let slot = Arc::new(Mutex::new(None));
    let reads = Arc::new(AtomicUsize::new(0));
    let mut config = Agent::builder(server.transport())
        .tool_search(ToolSearch::new())
        .add_extension(Hold(Arc::clone(&slot)));
    for t in counted(200, &reads) {
        config = config.add_deferred_tool(t);
    }
    let mut agent = config.build().unwrap();
    let ctx = slot.lock().clone().unwrap();
    for i in 0..40 {
        server.push(search(&format!("word{} churn", i * 5)));
        server.push(Reply::tool_call(&format!("tool_{}", i * 5), json!({})));
    }
    server.push(Reply::text("done"));
    let done = Arc::new(AtomicBool::new(false));
    let churn = {
        let (done, ctx) = (Arc::clone(&done), ctx.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u32;
            while !done.load(Ordering::SeqCst) || rounds < 50 {
                let name = format!("churn_{}", rounds % 7);
                let _ = ctx.add_deferred_tool(Arc::new(plain(&name, "A churn tool.")));
                let _ = ctx.tools();
                ctx.remove_tool(&name);
                rounds += 1;
            }
            rounds
        })
    };
    let result = agent.run_loop("search and call forty times");
    done.store(true, Ordering::SeqCst);
    assert!(churn.join().unwrap() >= 50);
    result.unwrap();
    let obs = observations(&agent);
    assert_eq!(obs.len(), 80);
    for pair in obs.chunks(2) {
        let names = found_names(&pair[0]);
        assert!(!names.is_empty(), "{}", pair[0]);
        assert!(pair[1].starts_with("ran tool_"), "{}", pair[1]);
    }
    let pool: Vec<String> = agent
        .deferred_tools()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    let found = agent.found_tools();
    assert!(found.iter().all(|n| pool.contains(n)), "{found:?}");
    assert!(found.contains(&"tool_195".to_string()));
    assert_valid_history(agent.messages());
}
