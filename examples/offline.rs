//! The whole agent loop with no model and no network.
//!
//! A [`FakeServer`] plays the model: it asks for the calculator, then streams
//! an answer. A closure listener prints every event as it arrives; the final
//! answer comes from the [`Outcome`](pikuri::Outcome).
//!
//! ```text
//! cargo run --example offline
//! ```
//!
//! Swap `server.transport()` for `ChatTransport::from_env()` to run the same
//! code against llama.cpp, Ollama or OpenAI.

use std::io::Write;

use pikuri::builtin;
use pikuri::listeners::sanitize;
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Event, StopReason};
use serde_json::json;

fn main() -> Result<(), pikuri::Error> {
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "calculator",
        json!({"expression": "(2 + 3) * 4"}),
    ));
    server.push(
        Reply::text("(2 + 3) * 4 = 20.")
            .with_reasoning("The calculator said 20.")
            .with_chunk_chars(3),
    );

    let mut agent = Agent::builder(server.transport())
        .system_prompt("You are a careful calculator. Use the calculator tool.")
        .add_tool(builtin::calculator())
        .streaming(true)
        .add_listener({
            let mut streaming = None;
            move |event: &Event| print_event(&mut streaming, event)
        })
        .build()?;

    // run_loop returns once the listener has seen every event of the turn.
    let outcome = agent.run_loop("What is (2 + 3) * 4?")?;
    println!(
        "\nfinal answer: {}",
        outcome.answer.as_deref().unwrap_or("")
    );
    println!(
        "stop reason: {}, tool calls: {}",
        outcome.stop_reason, outcome.steps
    );

    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("(2 + 3) * 4 = 20."));
    // The tool's result went back to the model as the last message.
    let second = &server.chat_requests()[1];
    assert_eq!(
        second.messages().last().map(|m| m["content"].clone()),
        Some(json!("20"))
    );
    server.assert_all_used();
    Ok(())
}

/// Print one event. `streaming` is the label of the delta line left open,
/// if any. Model text goes through `sanitize` so that an escape sequence a
/// model writes is shown, not obeyed, by the terminal.
fn print_event(streaming: &mut Option<&'static str>, event: &Event) {
    let who = if event.agent().is_empty() {
        "main"
    } else {
        event.agent()
    };
    let delta = match event {
        Event::ThinkingDelta { content, .. } => Some(("thinking", content)),
        Event::AssistantDelta { content, .. } => Some(("answer", content)),
        _ => None,
    };
    if let Some((label, content)) = delta {
        if *streaming != Some(label) {
            if streaming.is_some() {
                println!();
            }
            print!("[{who}] {label}: ");
            *streaming = Some(label);
        }
        print!("{}", sanitize(content));
        let _ = std::io::stdout().flush(); // show each fragment as it arrives
        return;
    }
    if streaming.take().is_some() {
        println!(); // any other event ends the streamed line
    }
    match event {
        Event::UserTurn { content, .. } => println!("[{who}] user: {content}"),
        Event::ToolCall {
            name, arguments, ..
        } => println!("[{who}] calls {name}({arguments})"),
        Event::ToolResult { name, content, .. } => {
            println!("[{who}] {name} returned {}", sanitize(content));
        }
        Event::Tokens { input, output, .. } => {
            println!("[{who}] tokens: in={input:?} out={output:?}");
        }
        Event::Stopped { reason, .. } => println!("[{who}] stopped: {reason}"),
        _ => {} // Thinking and Assistant repeat the deltas; the enum also grows
    }
}
