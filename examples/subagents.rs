//! Delegation with [`SubAgents`]: two personas, one of them using a tool
//! only sub-agents can reach, and the event tree printed by agent id.
//!
//! ```text
//! cargo run --example subagents
//! ```
//!
//! `archive_search` is added with `add_sub_agent_tool`: it is never offered
//! to the main agent's model, only to the `librarian` persona that names it
//! (keep risky tools off the agent that talks to the user). One
//! [`FakeServer`] answers the main agent and both children, in request order.

use pikuri::builtin;
use pikuri::listeners::InMemoryEventList;
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Event};
use serde_json::json;

fn main() -> Result<(), pikuri::Error> {
    let server = FakeServer::start();
    let delegate =
        |name: &str, task: &str| Reply::tool_call("agent", json!({"name": name, "task": task}));
    server.push(delegate("librarian", "Find the year the archive opened."));
    server.push(Reply::tool_call(
        "archive_search",
        json!({"query": "opening year"}),
    )); // librarian 0
    server.push(Reply::text("It opened in 1874.")); // librarian 0
    server.push(delegate("clerk", "How many years from 1874 to 2024?"));
    server.push(Reply::tool_call(
        "calculator",
        json!({"expression": "2024 - 1874"}),
    )); // clerk 0
    server.push(Reply::text("150 years.")); // clerk 0
    server.push(Reply::text(
        "The archive opened in 1874, 150 years before 2024.",
    ));

    let archive = FnTool::new(
        "archive_search",
        "Searches the private archive.",
        Parameters::builder()
            .required_string("query", "What to look for.")
            .build(),
        |_args, _cx| Ok("founding charter, 1874".to_string()),
    );
    let personas = vec![
        Persona::new(
            "librarian",
            "Searches the archive.",
            "You search the archive.",
            5,
        )
        .with_tools(&["archive_search"]),
        Persona::new("clerk", "Does arithmetic.", "You compute carefully.", 3)
            .with_tools(&["calculator"]),
    ];
    let events = InMemoryEventList::new(); // shared by reference with the children
    let mut agent = Agent::builder(server.transport())
        .system_prompt("You coordinate helpers.")
        .add_tool(builtin::calculator())
        .add_sub_agent_tool(archive)
        .add_extension(SubAgents::new(personas)?)
        .add_listener(events.clone())
        .build()?;
    agent.run_loop("When did the archive open, and how long ago was that?")?;

    println!("event tree:");
    for event in events.events() {
        print_event(&event);
    }
    println!(
        "\nanswer: {}",
        agent.last_assistant_content().unwrap_or_default()
    );

    let requests = server.chat_requests();
    assert_eq!(
        requests[0].tool_names(),
        ["calculator", "agent"],
        "no archive_search for main"
    );
    assert_eq!(
        requests[1].tool_names(),
        ["archive_search"],
        "the librarian's only tool"
    );
    for id in ["librarian 0", "clerk 0"] {
        assert!(
            events.events().iter().any(|e| e.agent() == id),
            "no events from {id}"
        );
    }
    server.assert_all_used();
    Ok(())
}

/// One line per event, indented under its agent: `main` at the left,
/// children (`"librarian 0"`) one step in.
fn print_event(event: &Event) {
    let (indent, who) = match event.agent() {
        "" => ("", "main"),
        id => ("    ", id),
    };
    let detail = match event {
        Event::UserTurn { content, .. } => format!("task: {content}"),
        Event::ToolCall {
            name, arguments, ..
        } => format!("calls {name} {arguments}"),
        Event::ToolResult { name, content, .. } => format!("{name} → {content}"),
        Event::Assistant { content, .. } => format!("says: {content}"),
        Event::Stopped { reason, .. } => format!("stopped ({reason})"),
        _ => return, // tokens, context caps…
    };
    println!("{indent}[{who}] {detail}");
}
