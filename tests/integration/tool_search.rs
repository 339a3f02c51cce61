//! Issue 40 parts 1-2: deferred tools found with the local search tool,
//! revealed after the tools already sent (the prompt cache kept), and
//! still found after a history reload or a journal resume.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use pikuri::extension::{Extension, ExtensionContext};
use pikuri::journal::FileStore;
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::tool_search::{Threshold, ToolSearch};
use pikuri::{Agent, Api, Configurator, ErrorKind, History, Role};
use serde_json::{Value, json};

use crate::util::assert_valid_history;

const TOPICS: [&str; 15] = [
    "invoice",
    "calendar",
    "ticket",
    "photo",
    "playlist",
    "recipe",
    "shipment",
    "contract",
    "sensor",
    "backup",
    "forum",
    "payroll",
    "warehouse",
    "podcast",
    "vaccine",
];
const VERBS: [&str; 20] = [
    "create", "delete", "list", "update", "archive", "export", "import", "share", "tag", "search",
    "merge", "split", "lock", "unlock", "rename", "copy", "move", "restore", "audit", "count",
];

/// `n` deferred-tool candidates: `verb_topic_i`, each with a description
/// and two parameters, the tool `convert_currency` at position 137.
fn pool(n: usize, calls: &Arc<AtomicUsize>) -> Vec<FnTool> {
    (0..n)
        .map(|i| {
            let (name, description) = if i == 137 {
                (
                    "convert_currency".to_string(),
                    "Converts an amount of money from one currency to another at today's rate."
                        .to_string(),
                )
            } else {
                let (verb, topic) = (
                    VERBS[i % VERBS.len()],
                    TOPICS[(i / VERBS.len()) % TOPICS.len()],
                );
                (
                    format!("{verb}_{topic}_{i}"),
                    format!("{verb} a {topic} record in the {topic} service (variant {i})."),
                )
            };
            let calls = Arc::clone(calls);
            let ran = name.clone();
            FnTool::new(
                name,
                description,
                Parameters::builder()
                    .required_string("target", "What to act on.")
                    .optional_integer("amount", "How many.")
                    .build(),
                move |_, _| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Ok(format!("ran {ran}"))
                },
            )
        })
        .collect()
}

/// An agent on `server` with two ordinary tools and `n` deferred ones.
fn config(
    server: &FakeServer,
    n: usize,
    search: ToolSearch,
    calls: &Arc<AtomicUsize>,
) -> Configurator {
    config_on(server.transport(), n, search, calls)
}

fn config_on(
    transport: pikuri::ChatTransport,
    n: usize,
    search: ToolSearch,
    calls: &Arc<AtomicUsize>,
) -> Configurator {
    let mut c = Agent::builder(transport)
        .add_tool(FnTool::new(
            "note",
            "Writes a note to the user's notebook, with a title and a body.",
            Parameters::builder()
                .required_string("title", "Its title.")
                .build(),
            |_, _| Ok("noted".into()),
        ))
        .add_tool(FnTool::new(
            "clock",
            "The current time.",
            Parameters::empty(),
            |_, _| Ok("noon".into()),
        ))
        .tool_search(search);
    for t in pool(n, calls) {
        c = c.add_deferred_tool(t);
    }
    c
}

/// `server` scripted with `replies`, an agent on it (see [`config`]) and
/// the count of `convert_currency`'s runs.
fn scripted(
    server: &FakeServer,
    replies: impl IntoIterator<Item = Reply>,
    n: usize,
    search: ToolSearch,
) -> (Agent, Arc<AtomicUsize>) {
    for reply in replies {
        server.push(reply);
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = config(server, n, search, &calls).build().unwrap();
    (agent, calls)
}

/// Whether `agent` has found `convert_currency`.
fn found_convert(agent: &Agent) -> bool {
    agent
        .found_tools()
        .contains(&"convert_currency".to_string())
}

pub(crate) fn search(query: &str) -> Reply {
    Reply::tool_call("search_tools", json!({ "query": query }))
}

fn convert() -> Reply {
    Reply::tool_call(
        "convert_currency",
        json!({"target": "100 EUR", "amount": 100}),
    )
}

/// The tool messages' contents, in order.
pub(crate) fn observations(agent: &Agent) -> Vec<String> {
    agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect()
}

pub(crate) fn found_names(observation: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(observation).expect("a search result is JSON");
    v["found"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn three_hundred_deferred_tools_searched_found_and_called() {
    let server = FakeServer::start();
    let replies = [
        search("convert money between currencies"),
        convert(),
        Reply::text("100 EUR is 108 USD."),
    ];
    let (mut agent, calls) = scripted(&server, replies, 300, ToolSearch::new());
    assert_eq!(agent.deferred_tools().len(), 300);
    assert!(agent.found_tools().is_empty());
    let out = agent.run_loop("How much is 100 EUR in USD?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("100 EUR is 108 USD."));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let obs = observations(&agent);
    assert_eq!(found_names(&obs[0])[0], "convert_currency");
    assert_eq!(obs[1], "ran convert_currency");
    let found = agent.found_tools();
    assert_eq!(found[0], "convert_currency");
    assert!(found.len() <= 5, "{found:?}");
    let sent = server.chat_requests();
    assert_eq!(sent[0].tool_names(), ["note", "clock", "search_tools"]);
    let mut revealed = vec!["note".to_string(), "clock".into(), "search_tools".into()];
    revealed.extend(found);
    assert_eq!(sent[1].tool_names(), revealed);
    assert_eq!(sent[2].tool_names(), revealed);
    assert_valid_history(agent.messages());
}

#[test]
fn first_request_with_deferral_is_at_most_a_tenth() {
    let first = |search: ToolSearch| first_request(300, search).raw_body.len();
    let deferred = first(ToolSearch::new());
    let all = first(ToolSearch::new().threshold(Threshold::Count(usize::MAX)));
    // Recorded in BENCHMARKS.md ("Issue 40").
    eprintln!("first request, 300 tools: {all} bytes sent all, {deferred} bytes deferred");
    assert!(deferred * 10 <= all, "{deferred} vs {all}");
}

/// The first request of a turn the model answers at once, with `n`
/// deferred tools searched by `search`.
fn first_request(n: usize, search: ToolSearch) -> pikuri::testing::RecordedRequest {
    let server = FakeServer::start();
    let (mut agent, _) = scripted(&server, [Reply::text("ok")], n, search);
    agent.run_loop("hi").unwrap();
    server.chat_requests().swap_remove(0)
}

/// The prompt as the simulated cache reads it (`FakeServer::set_prefix_cache`).
fn prompt(body: &Value) -> String {
    format!("{}{}", body["tools"], body["messages"])
}

fn common(a: &str, b: &str) -> u64 {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count() as u64
}

#[test]
fn a_reveal_keeps_the_cached_prefix() {
    let server = FakeServer::start();
    server.set_prefix_cache(true);
    let replies = [
        search("currency conversion"),
        convert(),
        Reply::text("done"),
    ];
    let (mut agent, _) = scripted(&server, replies, 300, ToolSearch::new().max_results(1));
    agent.run_loop("100 EUR in USD?").unwrap();
    let cached: Vec<u64> = agent
        .messages()
        .iter()
        .filter_map(|m| m.usage.map(|u| u.cached.unwrap_or(0)))
        .collect();
    let sent = server.chat_requests();
    let bodies: Vec<&Value> = sent.iter().map(|r| r.body.as_ref().unwrap()).collect();
    let (p0, p1, p2) = (prompt(bodies[0]), prompt(bodies[1]), prompt(bodies[2]));
    // Recorded in BENCHMARKS.md ("Issue 40").
    eprintln!(
        "cached tokens per request: {cached:?}; prompts {} {} {} bytes",
        p0.len(),
        p1.len(),
        p2.len()
    );
    assert_eq!(cached[0], 0);
    assert_eq!(cached[1], common(&p0, &p1) / 4);
    assert_eq!(cached[2], common(&p1, &p2) / 4);
    // The reveal appended: the first request's tools (all but their
    // closing bracket) are a prefix of the second's.
    let tools0 = bodies[0]["tools"].to_string();
    assert!(p1.starts_with(&tools0[..tools0.len() - 1]));
    assert!(cached[1] >= (tools0.len() as u64 - 1) / 4);
    // After the reveal nothing moves: the third request repeats all of
    // the second one's tools and conversation.
    assert!(cached[2] >= p1.len() as u64 / 4 - 1);
    // Had the found tool gone first (a sorted or regrouped list), the
    // prefix would have ended in the first tool.
    let mut reordered = bodies[1].clone();
    let tools = reordered["tools"].as_array_mut().unwrap();
    let found = tools.pop().unwrap();
    tools.insert(0, found);
    let lost = common(&p0, &prompt(&reordered)) / 4;
    assert!(lost * 10 < cached[1], "{lost} vs {}", cached[1]);
}

#[test]
fn a_deferred_tool_not_found_yet_is_an_observation() {
    let server = FakeServer::start();
    let replies = [
        convert(),
        search("currency"),
        convert(),
        Reply::text("done"),
    ];
    let (mut agent, calls) = scripted(&server, replies, 300, ToolSearch::new());
    agent.run_loop("convert").unwrap();
    let obs = observations(&agent);
    assert_eq!(
        obs[0],
        "Error: tool `convert_currency` is not loaded yet: call `search_tools` with what it does \
         first, then call it"
    );
    assert_eq!(obs[2], "ran convert_currency");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_valid_history(agent.messages());
}

/// A first conversation: the model searches, and the agent's history.
fn searched(server: &FakeServer, journal: Option<&std::path::Path>) -> History {
    server
        .push(search("currency"))
        .push(Reply::text("found it"));
    let calls = Arc::new(AtomicUsize::new(0));
    let mut c = config(server, 300, ToolSearch::new(), &calls);
    if let Some(dir) = journal {
        c = c.journal(FileStore::new(dir).unwrap(), "run");
    }
    let mut agent = c.build().unwrap();
    agent.run_loop("find the converter").unwrap();
    assert!(found_convert(&agent));
    agent.export_history()
}

#[test]
fn a_reloaded_history_keeps_calling_a_found_tool() {
    let server = FakeServer::start();
    let saved = searched(&server, None).to_json();
    let replies = [convert(), Reply::text("108 USD")];
    let (mut agent, calls) = scripted(&server, replies, 300, ToolSearch::new());
    agent.load_history(History::parse(&saved).unwrap()).unwrap();
    assert!(found_convert(&agent));
    agent.run_loop("now convert 100 EUR").unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let sent = server.chat_requests();
    assert!(
        sent[2]
            .tool_names()
            .contains(&"convert_currency".to_string())
    );
    // A cleared conversation has found nothing.
    agent.clear_conversation();
    assert!(agent.found_tools().is_empty());
}

#[test]
fn a_resumed_journal_keeps_calling_a_found_tool() {
    let dir = std::env::temp_dir().join(format!("pikuri-tool-search-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let server = FakeServer::start();
    searched(&server, Some(&dir));
    server.push(convert()).push(Reply::text("108 USD"));
    let calls = Arc::new(AtomicUsize::new(0));
    let mut agent = config(&server, 300, ToolSearch::new(), &calls)
        .resume(FileStore::new(&dir).unwrap(), "run")
        .build()
        .unwrap();
    assert!(found_convert(&agent));
    agent.run_loop("now convert 100 EUR").unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    drop(agent);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_search_result_in_a_loaded_history_reveals_nothing() {
    for content in [
        "not json",
        r#"{"found":"convert_currency"}"#,
        r#"{"found":[{"name":"no_such_tool"},{"name":7},{}]}"#,
        r#"{"found":[{"name":"convert_currency"}]"#,
        "Error: the query is empty",
    ] {
        let found = found_after_loading("search_tools", r#"{"query":"currency"}"#, content);
        assert!(found.is_empty(), "{content}");
    }
    // A result of another tool never reveals anything.
    let content = r#"{"found":[{"name":"convert_currency"}]}"#;
    assert!(found_after_loading("note", r#"{"title":"x"}"#, content).is_empty());
}

/// The tools found by an agent (300 deferred) that loads a history whose
/// one call, of `tool` with `arguments`, was answered `content`.
fn found_after_loading(tool: &str, arguments: &str, content: &str) -> Vec<String> {
    let server = FakeServer::start();
    let (mut agent, _) = scripted(&server, [], 300, ToolSearch::new());
    let history = json!({"version": 1, "messages": [
        {"role": "user", "content": "find"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": tool, "arguments": arguments}]},
        {"role": "tool", "tool_call_id": "c1", "content": content},
        {"role": "assistant", "content": "ok"}]});
    agent
        .load_history(History::parse(&history.to_string()).unwrap())
        .unwrap();
    agent.found_tools()
}

#[test]
fn odd_queries_and_limits() {
    let server = FakeServer::start();
    let huge = "currency ".repeat(200_000);
    server
        .push(search(""))
        .push(search("   "))
        .push(search(&huge))
        .push(search("\u{202e}\u{0}🙂 CURRENCY ÉCOLE"))
        .push(Reply::tool_call(
            "search_tools",
            json!({"query": "record", "limit": 0}),
        ))
        .push(Reply::tool_call(
            "search_tools",
            json!({"query": "record", "limit": -3}),
        ))
        .push(Reply::tool_call(
            "search_tools",
            json!({"query": "record", "limit": u64::MAX}),
        ))
        .push(Reply::tool_call(
            "search_tools",
            json!({"query": "record", "limit": "two"}),
        ))
        .push(Reply::tool_call("search_tools", json!({"limit": 2})))
        .push(Reply::text("done"));
    let calls = Arc::new(AtomicUsize::new(0));
    let mut agent = config(&server, 300, ToolSearch::new().max_results(4), &calls)
        .build()
        .unwrap();
    agent.run_loop("search").unwrap();
    let obs = observations(&agent);
    assert!(
        obs[0].starts_with("Error: the query is empty"),
        "{}",
        obs[0]
    );
    assert!(
        obs[1].starts_with("Error: the query is empty"),
        "{}",
        obs[1]
    );
    assert_eq!(found_names(&obs[2]), ["convert_currency"]);
    assert_eq!(found_names(&obs[3]), ["convert_currency"]);
    assert_eq!(found_names(&obs[4]).len(), 1);
    assert_eq!(found_names(&obs[5]).len(), 1);
    assert_eq!(found_names(&obs[6]).len(), 4);
    assert!(obs[7].starts_with("Error"), "{}", obs[7]);
    assert!(obs[8].starts_with("Error"), "{}", obs[8]);
    assert_valid_history(agent.messages());
}

#[test]
fn thresholds_zero_and_max() {
    let names = |search: ToolSearch, n: usize| first_request(n, search).tool_names().len();
    let cases = [
        // Above the threshold only: one tool over a count of 0 is deferred.
        (Threshold::Count(0), 1, 3),
        (Threshold::Count(5), 5, 7),
        (Threshold::Count(5), 6, 3),
        (Threshold::Count(usize::MAX), 300, 302),
        (Threshold::Tokens(0), 1, 3),
        (Threshold::Tokens(u64::MAX), 300, 302),
        // No deferred tools: no search tool, whatever the threshold.
        (Threshold::Count(0), 0, 2),
    ];
    for (threshold, n, sent) in cases {
        let case = format!("{threshold:?} with {n} deferred");
        assert_eq!(
            names(ToolSearch::new().threshold(threshold), n),
            sent,
            "{case}"
        );
    }
}

/// Keeps its context for the test to withdraw tools as a server would.
struct Withdraw(Arc<Mutex<Option<ExtensionContext>>>);

impl Extension for Withdraw {
    fn bind(&mut self, ctx: &ExtensionContext) -> pikuri::Result<()> {
        *self.0.lock() = Some(ctx.clone());
        Ok(())
    }
}

#[test]
fn a_found_tool_withdrawn_then_called() {
    let server = FakeServer::start();
    server.push(search("currency")).push(Reply::text("found"));
    let calls = Arc::new(AtomicUsize::new(0));
    let slot = Arc::new(Mutex::new(None));
    let mut agent = config(&server, 300, ToolSearch::new().max_results(1), &calls)
        .add_extension(Withdraw(Arc::clone(&slot)))
        .build()
        .unwrap();
    agent.run_loop("find").unwrap();
    assert_eq!(agent.found_tools(), ["convert_currency"]);
    let ctx = slot.lock().clone().unwrap();
    assert!(ctx.remove_tool("convert_currency"));
    assert!(agent.found_tools().is_empty());
    server.push(convert()).push(Reply::text("gone"));
    agent.run_loop("convert").unwrap();
    let obs = observations(&agent);
    assert!(
        obs[1].starts_with("Error: unknown tool `convert_currency`"),
        "{}",
        obs[1]
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let sent = server.chat_requests();
    assert_eq!(sent[2].tool_names(), ["note", "clock", "search_tools"]);
    // The name is free again, and a new tool under it is not found.
    ctx.add_deferred_tool(Arc::new(FnTool::new(
        "convert_currency",
        "New.",
        Parameters::empty(),
        |_, _| Ok("new".into()),
    )))
    .unwrap();
    assert!(agent.found_tools().is_empty());
    // Duplicates are refused across the pools at run time too.
    let dup = |name: &str| {
        Arc::new(FnTool::new(name, "d", Parameters::empty(), |_, _| {
            Ok(String::new())
        }))
    };
    assert_eq!(
        ctx.add_deferred_tool(dup("note")).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        ctx.add_tool(dup("convert_currency")).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        ctx.add_tool(dup("search_tools")).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
}

#[test]
fn duplicate_names_across_pools_fail_the_build() {
    let server = FakeServer::start();
    let t = |name: &str| FnTool::new(name, "d", Parameters::empty(), |_, _| Ok(String::new()));
    let err = Agent::builder(server.transport())
        .add_tool(t("x"))
        .add_deferred_tool(t("x"))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("duplicate tool name `x`"), "{err}");
    let err = Agent::builder(server.transport())
        .add_tool(t("search_tools"))
        .add_deferred_tool(t("y"))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("`search_tools`"), "{err}");
    // Without deferred tools the name is anyone's.
    assert!(
        Agent::builder(server.transport())
            .add_tool(t("search_tools"))
            .build()
            .is_ok()
    );
}

#[test]
fn ten_thousand_deferred_tools() {
    let server = FakeServer::start();
    let replies = [search("convert currency"), convert(), Reply::text("done")];
    let (mut agent, calls) = scripted(&server, replies, 10_000, ToolSearch::new());
    agent.run_loop("convert").unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(found_names(&observations(&agent)[0])[0], "convert_currency");
    assert!(server.chat_requests()[0].raw_body.len() < 4_000);
}

#[test]
fn native_search_sends_every_deferred_tool_and_runs_any() {
    let run = |native: bool| {
        let server = FakeServer::start();
        server.set_strict(false);
        server.push(convert()).push(Reply::text("done"));
        let calls = Arc::new(AtomicUsize::new(0));
        let transport = server.transport().with_api(Api::AnthropicMessages);
        let search = ToolSearch::new().native(native);
        let mut agent = config_on(transport, 140, search, &calls).build().unwrap();
        agent.run_loop("convert").unwrap();
        (
            server.chat_requests()[0].tool_names(),
            calls.load(Ordering::SeqCst),
        )
    };
    let (names, ran) = run(true);
    // The 142 tools and the API's own search tool (native forms).
    assert_eq!(names.len(), 143);
    assert_eq!(names[142], "tool_search_tool_bm25");
    assert!(!names.contains(&"search_tools".to_string()));
    assert_eq!(ran, 1);
    let (names, ran) = run(false);
    assert_eq!(names, ["note", "clock", "search_tools"]);
    assert_eq!(ran, 0);
}

#[test]
fn a_persona_naming_a_deferred_tool_gets_it_as_an_ordinary_tool() {
    let server = FakeServer::start();
    server
        .push(Reply::tool_call(
            "agent",
            json!({"name": "fx", "task": "100 EUR in USD"}),
        ))
        .push(convert())
        .push(Reply::text("108 USD"))
        .push(Reply::text("It is 108 USD."));
    let calls = Arc::new(AtomicUsize::new(0));
    let persona =
        Persona::new("fx", "Converts money.", "You convert.", 5).with_tools(&["convert_currency"]);
    let mut agent = config(&server, 300, ToolSearch::new(), &calls)
        .add_extension(SubAgents::new(vec![persona]).unwrap())
        .build()
        .unwrap();
    agent.run_loop("100 EUR in USD?").unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let sent = server.chat_requests();
    assert_eq!(
        sent[0].tool_names(),
        ["note", "clock", "agent", "search_tools"]
    );
    assert_eq!(sent[1].tool_names(), ["convert_currency"]);
    // The parent found nothing: the child's tool is the persona's.
    assert!(agent.found_tools().is_empty());
}
