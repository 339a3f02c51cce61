//! A custom [`Listener`] that renders streamed text live, next to the
//! shipped [`JsonLines`] writing the raw event stream to stderr.
//!
//! ```text
//! cargo run --example listener              # both
//! cargo run --example listener 2>/dev/null  # only the custom rendering
//! ```
//!
//! Each listener runs on its own thread and sees every event in order;
//! `run_loop` returns after both handled the whole turn (and `flush` ran).
//! Between listeners there is no order: on a terminal the two streams
//! interleave.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use pikuri::listeners::{JsonLines, sanitize};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Event, Listener};
use serde_json::json;

/// Prints answer fragments as they stream in, a marker per tool call, and a
/// per-turn summary in `flush`. It also keeps the streamed text so the end of
/// `main` can compare it with the final answer.
struct LiveText {
    out: io::Stdout,
    streamed: Arc<Mutex<String>>,
    fragments: usize,
}

impl LiveText {
    fn write(&mut self, text: &str) {
        // A broken stdout must not take the listener (or the agent) down.
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
    }
}

impl Listener for LiveText {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::AssistantDelta { content, .. } => {
                self.fragments += 1;
                if let Ok(mut s) = self.streamed.lock() {
                    s.push_str(content);
                }
                self.write(&sanitize(content)); // never let model text drive the terminal
            }
            Event::Assistant { .. } => self.write("\n"),
            Event::ToolCall { name, .. } => self.write(&format!("[using {}…]\n", sanitize(name))),
            _ => {} // ignore what this listener does not render
        }
    }

    fn flush(&mut self) {
        let summary = format!("({} fragments this turn)\n", self.fragments);
        self.write(&summary);
        self.fragments = 0;
    }
}

fn main() -> Result<(), pikuri::Error> {
    let server = FakeServer::start();
    server.push(Reply::tool_call("current_time", json!({})));
    server
        .push(Reply::text("It is a fine day to stream text in small pieces.").with_chunk_chars(5));

    let streamed = Arc::new(Mutex::new(String::new()));
    let live = LiveText {
        out: io::stdout(),
        streamed: Arc::clone(&streamed),
        fragments: 0,
    };
    let mut agent = Agent::builder(server.transport())
        .add_tool(pikuri::builtin::current_time())
        .streaming(true)
        .add_listener(live)
        .add_listener(JsonLines::stderr())
        .build()?;
    let outcome = agent.run_loop("What day is it?")?;

    // Deltas are a preview; the Assistant event (and the outcome) is exact.
    // With this server they match.
    let streamed = streamed.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(Some(streamed.as_str()), outcome.answer.as_deref());
    assert_eq!(
        agent.to_string(),
        "Agent(id=, model=fake-model, tools=1, listeners=[LiveText, JsonLines])"
    );
    server.assert_all_used();
    Ok(())
}
