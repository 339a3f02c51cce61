//! MCP tools as deferred tools (`Server::with_deferred`,
//! `Registry::defer_tools`; issue 40): the pools they join, names taken in
//! the deferred pool, refreshes that keep unchanged tools in place, the
//! reference server's tools deferred, and 10,000 tools deferred.

use std::path::PathBuf;
use std::sync::Arc;

use pikuri::mcp::{Registry, Server};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::tool_search::{Threshold, ToolSearch};
use pikuri::{Agent, Tool, ToolContext};
use serde_json::json;

use super::real::everything;
use super::{cache, python, unique_tag};

/// The fake server over stdio (no log file).
fn fake() -> Option<Server> {
    let (py, script) = python()?;
    Some(Server::stdio(py, [script]).with_env("PIKURI_MCP_TAG", unique_tag("deferred")))
}

fn names(tools: &[Arc<dyn Tool>]) -> Vec<String> {
    tools.iter().map(|t| t.name().to_string()).collect()
}

/// A search that never holds anything back: deferred tools are sent (and
/// callable) like any other, whatever the search does with them.
fn never_held_back() -> ToolSearch {
    ToolSearch::new().threshold(Threshold::Count(10_000))
}

/// The fake withdraws its `echo` tool (and adds `extra`), as a server's
/// list changes between turns.
fn withdraw_echo(mcp: &Registry) {
    let said = mcp
        .client("fake")
        .unwrap()
        .call_tool("change", &json!({"drop": "echo"}), &ToolContext::detached())
        .unwrap();
    assert_eq!(said, "changed");
}

#[test]
fn a_deferred_server_s_tools_join_the_deferred_pool_only() {
    let Some(server) = fake() else { return };
    let model = FakeServer::start();
    let mcp = Registry::new().server("fake", server.with_deferred(true));
    let mut agent = Agent::builder(model.transport())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    let deferred = names(&agent.deferred_tools());
    // The fake's 13 tools, less the one with a bad schema.
    assert_eq!(deferred.len(), 12, "{deferred:?}");
    assert!(deferred.contains(&"fake__echo".to_string()));
    assert_eq!(deferred, mcp.tool_names("fake"));
    assert!(
        !names(&agent.tools())
            .iter()
            .any(|n| n.starts_with("fake__")),
        "{:?}",
        names(&agent.tools())
    );
    agent.close();
}

#[test]
fn the_registry_default_defers_and_a_server_may_say_otherwise() {
    let (Some(a), Some(b), Some(c)) = (fake(), fake(), fake()) else {
        return;
    };
    let model = FakeServer::start();
    let mut agent = Agent::builder(model.transport())
        .add_extension(
            Registry::new()
                .defer_tools(true)
                .server("a", a)
                .server("b", b.with_deferred(false))
                .server("c", c.with_sub_agent_only(true)),
        )
        .build()
        .unwrap();
    let deferred = names(&agent.deferred_tools());
    let tools = names(&agent.tools());
    assert!(deferred.contains(&"a__echo".to_string()), "{deferred:?}");
    assert!(!tools.contains(&"a__echo".to_string()), "{tools:?}");
    assert!(tools.contains(&"b__echo".to_string()), "{tools:?}");
    assert!(
        !deferred.iter().any(|n| n.starts_with("b__")),
        "{deferred:?}"
    );
    // Sub-agent-only wins over the registry's default.
    assert!(names(&agent.sub_agent_tools()).contains(&"c__echo".to_string()));
    assert!(
        !deferred.iter().any(|n| n.starts_with("c__")),
        "{deferred:?}"
    );
    agent.close();

    // Off by default: MCP tools are ordinary tools unless asked.
    let Some(d) = fake() else { return };
    let mut agent = Agent::builder(model.transport())
        .add_extension(Registry::new().server("d", d))
        .build()
        .unwrap();
    assert!(agent.deferred_tools().is_empty());
    assert!(names(&agent.tools()).contains(&"d__echo".to_string()));
    agent.close();
}

#[test]
fn a_name_taken_in_the_deferred_pool_is_passed_over() {
    let Some(server) = fake() else { return };
    let model = FakeServer::start();
    let host = FnTool::new(
        "fake__echo",
        "The host's own.",
        Parameters::empty(),
        |_, _| Ok("host".to_string()),
    );
    let mcp = Registry::new().server("fake", server.with_deferred(true));
    let mut agent = Agent::builder(model.transport())
        .add_deferred_tool(host)
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    let offered = mcp.tool_names("fake");
    // Twelve tools still: the server's `echo` got a hashed name, it was
    // not left out.
    assert_eq!(offered.len(), 12, "{offered:?}");
    let echo = offered
        .iter()
        .find(|n| n.starts_with("fake__echo_"))
        .unwrap_or_else(|| panic!("{offered:?}"));
    let deferred = names(&agent.deferred_tools());
    assert_eq!(deferred[0], "fake__echo", "the host's stays first");
    assert!(deferred.contains(echo), "{deferred:?}");
    agent.close();
}

#[test]
fn list_changed_keeps_deferred_tools_deferred_and_unchanged_ones_in_place() {
    let Some(server) = fake() else { return };
    let model = FakeServer::start();
    model.push(Reply::text("one"));
    model.push(Reply::text("two"));
    let mcp = Registry::new().server("fake", server.with_deferred(true));
    let mut agent = Agent::builder(model.transport())
        .tool_search(never_held_back())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    agent.run_loop("one").unwrap();
    let before = agent.deferred_tools();
    let hang = before
        .iter()
        .find(|t| t.name() == "fake__hang")
        .unwrap()
        .clone();
    // The server's list changes (the refresh point is the next turn).
    withdraw_echo(&mcp);
    agent.run_loop("two").unwrap();

    let after = agent.deferred_tools();
    let after_names = names(&after);
    // The new tool joined the deferred pool, the withdrawn one left it.
    assert!(
        after_names.contains(&"fake__extra".to_string()),
        "{after_names:?}"
    );
    assert!(
        !after_names.contains(&"fake__echo".to_string()),
        "{after_names:?}"
    );
    assert!(
        !names(&agent.tools())
            .iter()
            .any(|n| n.starts_with("fake__"))
    );
    // Unchanged tools were not swapped: same order, same tool.
    let kept: Vec<String> = names(&before)
        .into_iter()
        .filter(|n| n != "fake__echo")
        .collect();
    assert_eq!(after_names[..kept.len()], kept[..]);
    assert_eq!(after_names.last().map(String::as_str), Some("fake__extra"));
    let hang_after = after.iter().find(|t| t.name() == "fake__hang").unwrap();
    assert!(
        Arc::ptr_eq(&hang, hang_after),
        "an unchanged tool is kept as is"
    );
    assert_eq!(mcp.tool_names("fake"), after_names);

    // Below the threshold the deferred tools were sent: the refreshed list
    // before the next turn's request.
    let reqs = model.chat_requests();
    assert!(reqs[0].tool_names().contains(&"fake__echo".to_string()));
    assert!(!reqs[1].tool_names().contains(&"fake__echo".to_string()));
    assert!(reqs[1].tool_names().contains(&"fake__extra".to_string()));
    agent.close();
}

#[test]
fn an_ordinary_server_s_unchanged_tools_survive_a_refresh() {
    let Some(server) = fake() else { return };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__change", json!({})));
    model.push(Reply::text("ok"));
    let mut agent = Agent::builder(model.transport())
        .add_extension(Registry::new().server("fake", server))
        .build()
        .unwrap();
    let echo = agent
        .tools()
        .into_iter()
        .find(|t| t.name() == "fake__echo")
        .unwrap();
    agent.run_loop("change").unwrap();
    let tools = agent.tools();
    let echo_after = tools.iter().find(|t| t.name() == "fake__echo").unwrap();
    assert!(Arc::ptr_eq(&echo, echo_after));
    assert_eq!(tools.last().map(|t| Tool::name(&**t)), Some("fake__extra"));
    agent.close();
}

/// `node` and the everything server's entry point, or `None` (skipped).
fn everything_server() -> Option<(String, PathBuf)> {
    let dir = cache()?;
    everything(&dir)
}

#[test]
fn the_reference_server_s_tools_are_deferred() {
    let Some((node, js)) = everything_server() else {
        return;
    };
    let server = Server::stdio(node, [js.as_os_str(), "stdio".as_ref()])
        .with_env("PIKURI_MCP_TAG", unique_tag("everything-deferred"));
    let model = FakeServer::start();
    model.push(Reply::text("done"));
    let mcp = Registry::new()
        .defer_tools(true)
        .server("everything", server);
    let mut agent = Agent::builder(model.transport())
        .tool_search(never_held_back())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    let offered = mcp.tool_names("everything");
    assert!(offered.len() >= 10, "{offered:?}");
    assert!(
        offered.contains(&"everything__echo".to_string()),
        "{offered:?}"
    );
    assert_eq!(names(&agent.deferred_tools()), offered);
    assert!(agent.tools().is_empty(), "{:?}", names(&agent.tools()));
    // Below the threshold they are sent as they are.
    agent.run_loop("hi").unwrap();
    assert_eq!(model.chat_requests()[0].tool_names(), offered);
    agent.close();
}

/// The reference server's tools above the threshold: the first request
/// holds their schemas back behind `search_tools`; a scripted search
/// reveals `everything__echo`, and its call reaches the real server.
#[test]
fn the_reference_server_s_tools_are_held_back_found_and_called() {
    let Some((node, js)) = everything_server() else {
        return;
    };
    let server = Server::stdio(node, [js.as_os_str(), "stdio".as_ref()])
        .with_env("PIKURI_MCP_TAG", unique_tag("everything-found"));
    let model = FakeServer::start();
    model.push(Reply::tool_call(
        "search_tools",
        json!({"query": "echo a message back"}),
    ));
    model.push(Reply::tool_call(
        "everything__echo",
        json!({"message": "found and called"}),
    ));
    model.push(Reply::text("done"));
    let mcp = Registry::new()
        .defer_tools(true)
        .server("everything", server);
    let mut agent = Agent::builder(model.transport())
        // Fewer than the server lists: deferral is active.
        .tool_search(ToolSearch::new().threshold(Threshold::Count(3)))
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    let offered = mcp.tool_names("everything");
    assert!(offered.len() > 3, "{offered:?}");
    agent.run_loop("echo something").unwrap();

    let reqs = model.chat_requests();
    assert_eq!(reqs.len(), 3);
    // The first request: the search tool only, no deferred schema.
    assert_eq!(reqs[0].tool_names(), ["search_tools"]);
    // The search found the echo tool: sent, after the search tool.
    let second = reqs[1].tool_names();
    assert_eq!(second[0], "search_tools");
    assert!(
        second.contains(&"everything__echo".to_string()),
        "{second:?}"
    );
    assert!(second.len() < offered.len() + 1, "{second:?}");
    // The call reached the real server.
    assert_eq!(
        reqs[2].messages().last().unwrap()["content"],
        "Echo: found and called"
    );
    assert!(
        agent
            .found_tools()
            .contains(&"everything__echo".to_string()),
        "{:?}",
        agent.found_tools()
    );
    // The first request's size with and without deferral (issue 40).
    let held_back = serde_json::to_vec(reqs[0].body.as_ref().unwrap())
        .unwrap()
        .len();
    agent.close();

    let Some((node, js)) = everything_server() else {
        return;
    };
    let server = Server::stdio(node, [js.as_os_str(), "stdio".as_ref()]);
    let model = FakeServer::start();
    model.push(Reply::text("done"));
    let mut agent = Agent::builder(model.transport())
        .add_extension(Registry::new().server("everything", server))
        .build()
        .unwrap();
    agent.run_loop("echo something").unwrap();
    let all = serde_json::to_vec(model.chat_requests()[0].body.as_ref().unwrap())
        .unwrap()
        .len();
    eprintln!(
        "first request: {all} bytes with every schema ({} tools), {held_back} bytes deferred",
        offered.len()
    );
    assert!(held_back < all, "{held_back} < {all}");
    agent.close();
}

/// A found tool the server withdraws is no longer sent, and a call to it
/// is an unknown tool's; the rest stay deferred.
#[test]
fn a_found_tool_the_server_withdraws_is_gone() {
    let Some(server) = fake() else { return };
    let model = FakeServer::start();
    model.push(Reply::tool_call(
        "search_tools",
        json!({"query": "echo text"}),
    ));
    model.push(Reply::text("found"));
    model.push(Reply::tool_call("fake__echo", json!({"text": "hi"})));
    model.push(Reply::text("gone"));
    let mcp = Registry::new().server("fake", server.with_deferred(true));
    let mut agent = Agent::builder(model.transport())
        .tool_search(ToolSearch::new().threshold(Threshold::Count(3)))
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    agent.run_loop("find echo").unwrap();
    assert_eq!(
        agent.found_tools()[0],
        "fake__echo",
        "{:?}",
        agent.found_tools()
    );
    withdraw_echo(&mcp);
    agent.run_loop("call echo").unwrap();

    let reqs = model.chat_requests();
    assert!(reqs[1].tool_names().contains(&"fake__echo".to_string()));
    // The next turn's request: refreshed, the withdrawn tool not sent.
    assert!(!reqs[2].tool_names().contains(&"fake__echo".to_string()));
    assert!(!agent.found_tools().contains(&"fake__echo".to_string()));
    let obs = reqs[3].messages().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(obs.contains("unknown tool `fake__echo`"), "{obs}");
    // The new tool joined the deferred pool, held back (not found).
    assert!(names(&agent.deferred_tools()).contains(&"fake__extra".to_string()));
    assert!(!reqs[3].tool_names().contains(&"fake__extra".to_string()));
    agent.close();
}

/// ATTACKS.md, other servers, a huge answer: a server that lists 10,000
/// tools, deferred. The first request carries the search tool alone, not
/// 10,000 schemas; a search among them reveals the one asked for (and a
/// handful at most), whose call reaches the server under its own name.
#[test]
fn ten_thousand_deferred_tools_are_held_back_and_the_one_searched_for_is_called() {
    let Some((py, script)) = python() else { return };
    let server = Server::stdio(py, [script.as_str(), "--many", "10000", "--page", "1000"])
        .with_env("PIKURI_MCP_TAG", unique_tag("deferred-many"));
    let model = FakeServer::start();
    model.push(Reply::tool_call("search_tools", json!({"query": "t9999"})));
    model.push(Reply::tool_call("many__t9999", json!({})));
    model.push(Reply::text("done"));
    let mcp = Registry::new().server("many", server.with_deferred(true));
    let mut agent = Agent::builder(model.transport())
        .tool_search(ToolSearch::new().threshold(Threshold::Count(100)))
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    assert_eq!(agent.deferred_tools().len(), 10_012);
    agent.run_loop("call t9999").unwrap();

    let reqs = model.chat_requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0].tool_names(), ["search_tools"]);
    let first = serde_json::to_vec(reqs[0].body.as_ref().unwrap())
        .unwrap()
        .len();
    assert!(first < 16 * 1024, "the first request has {first} bytes");
    let revealed = reqs[1].tool_names();
    assert!(
        revealed.contains(&"many__t9999".to_string()),
        "{revealed:?}"
    );
    assert!(revealed.len() <= 11, "{revealed:?}");
    let answer = reqs[2].messages().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    // The fake answers a trivial tool's call with an error naming it: the
    // call reached the server under its own name.
    assert!(answer.contains("unknown tool t9999"), "{answer}");
    agent.close();
}

/// A name colliding with a deferred tool at a refresh: the server adds
/// `extra` while the host's own deferred tool holds `fake__extra`. The
/// host's tool keeps its name, its place and its calls; the server's
/// joins under another name (the pool the registry cannot list is tried,
/// never overwritten), once.
#[test]
fn a_tool_added_under_a_deferred_tool_s_name_gets_another() {
    let Some(server) = fake() else { return };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__change", json!({})));
    model.push(Reply::text("changed"));
    model.push(Reply::tool_call("fake__extra", json!({})));
    model.push(Reply::text("done"));
    let host = FnTool::new(
        "fake__extra",
        "The host's own.",
        Parameters::empty(),
        |_, _| Ok("host".to_string()),
    );
    let mcp = Registry::new().server("fake", server.with_deferred(true));
    let mut agent = Agent::builder(model.transport())
        .tool_search(never_held_back())
        .add_deferred_tool(host)
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    agent.run_loop("change").unwrap();
    agent.run_loop("call extra").unwrap();

    let offered = mcp.tool_names("fake");
    let extra: Vec<&String> = offered
        .iter()
        .filter(|n| n.starts_with("fake__extra"))
        .collect();
    assert_eq!(extra.len(), 1, "{offered:?}");
    assert_ne!(extra[0], "fake__extra", "{offered:?}");
    let deferred = names(&agent.deferred_tools());
    assert_eq!(deferred[0], "fake__extra", "the host's keeps its place");
    assert!(deferred.contains(extra[0]), "{deferred:?}");
    assert_eq!(
        deferred.iter().filter(|n| *n == "fake__extra").count(),
        1,
        "{deferred:?}"
    );
    // The call by the taken name went to the host's tool.
    let reqs = model.chat_requests();
    assert_eq!(reqs[3].messages().last().unwrap()["content"], "host");
    agent.close();
}
