//! Testing your own agent with [`FakeServer`]: script the model's replies,
//! run the agent, then assert on what it sent and on its history.
//!
//! ```text
//! cargo run --example testing
//! ```
//!
//! In your crate these checks are `#[test]` functions under `tests/`; here
//! `main` runs them so the example shows its output. No model, no network:
//! the server listens on a free loopback port.

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, ChatTransport, Error, Role, listeners::InMemoryEventList};
use serde_json::json;

/// The code under test: how the application builds its support agent.
fn support_agent(transport: ChatTransport, events: &InMemoryEventList) -> pikuri::Result<Agent> {
    let lookup = FnTool::new(
        "order_status",
        "Looks up an order by number.",
        Parameters::builder()
            .required_string("order", "Order number, e.g. `A-17`.")
            .build(),
        |args, _cx| match args["order"].as_str() {
            Some("A-17") => Ok("shipped on Monday".to_string()),
            _ => Err("no such order".into()),
        },
    );
    Agent::builder(transport)
        .system_prompt("You are the support desk. Look orders up before answering.")
        .add_tool(lookup)
        .add_listener(events.clone())
        .build()
}

fn looks_up_the_order_before_answering() -> pikuri::Result<()> {
    let server = FakeServer::start();
    server.push(Reply::tool_call("order_status", json!({"order": "A-17"})));
    server.push(Reply::text("Your order A-17 shipped on Monday."));
    let events = InMemoryEventList::new();
    let mut agent = support_agent(server.transport(), &events)?;

    let outcome = agent.run_loop("Where is my order A-17?")?;
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Your order A-17 shipped on Monday.")
    );

    // What the agent sent: the system prompt and the tool, then the tool's result.
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 2);
    let first = requests[0].messages();
    assert_eq!(first[0]["role"], "system");
    assert!(
        first[0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("support desk")
    );
    assert_eq!(requests[0].tool_names(), ["order_status"]);
    assert_eq!(
        requests[1].messages().last().map(|m| m["content"].clone()),
        Some(json!("shipped on Monday"))
    );

    // The history, and the events the listeners saw.
    let roles: Vec<Role> = agent.messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    let kinds = events.kinds();
    assert!(
        kinds.contains(&"tool_call") && kinds.last() == Some(&"stopped"),
        "{kinds:?}"
    );
    server.assert_all_used(); // every scripted reply was needed
    Ok(())
}

fn a_tool_failure_is_an_observation_not_an_error() -> pikuri::Result<()> {
    let server = FakeServer::start();
    server.push(Reply::tool_call("order_status", json!({"order": "Z-9"})));
    server.push(Reply::text("I cannot find order Z-9."));
    let mut agent = support_agent(server.transport(), &InMemoryEventList::new())?;
    agent.run_loop("Where is Z-9?")?;
    let tool_message = &agent.messages()[2];
    assert_eq!(tool_message.content, "Error: no such order");
    Ok(())
}

fn an_http_error_leaves_the_history_usable() -> pikuri::Result<()> {
    let server = FakeServer::start();
    server.push(Reply::status(400, "context length exceeded"));
    server.push(Reply::text("Hello again."));
    let mut agent = support_agent(server.transport(), &InMemoryEventList::new())?;
    let err = agent.run_loop("hi").unwrap_err();
    assert!(matches!(err, Error::Http { status: 400, .. }), "{err}");
    // The next turn goes through; the strict server checks the history it gets.
    agent.run_loop("hi again")?;
    assert_eq!(
        agent.last_assistant_content().as_deref(),
        Some("Hello again.")
    );
    assert!(server.rejections().is_empty());
    Ok(())
}

fn main() -> pikuri::Result<()> {
    looks_up_the_order_before_answering()?;
    a_tool_failure_is_an_observation_not_an_error()?;
    an_http_error_leaves_the_history_usable()?;
    println!("ok: 3 checks passed");
    Ok(())
}
