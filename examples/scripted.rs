//! One streamed question to the scripted server over loopback HTTP, with a
//! listener on its own thread: the static-linking check in `.ci/run`
//! builds this with `--no-default-features --features testing` for
//! `x86_64-unknown-linux-musl` and runs it. It exits non-zero unless the
//! answer arrives intact, both as the outcome and as the streamed deltas.
//!
//! `cargo run --example scripted`

use std::sync::{Arc, Mutex};

use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Event};

const ANSWER: &str = "Sunlight scatters off air molecules, blue the most.";

fn main() -> Result<(), pikuri::Error> {
    let server = FakeServer::start();
    server.push(Reply::text(ANSWER));
    let streamed = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&streamed);
    let mut agent = Agent::builder(server.transport())
        .streaming(true)
        .add_listener(move |e: &Event| {
            if let Event::AssistantDelta { content, .. } = e {
                sink.lock().unwrap().push_str(content);
            }
        })
        .build()?;
    let outcome = agent.run_loop("Why is the sky blue?")?;
    assert_eq!(outcome.answer.as_deref(), Some(ANSWER));
    assert_eq!(*streamed.lock().unwrap(), ANSWER);
    assert_eq!(server.chat_requests().len(), 1);
    println!("{ANSWER}");
    Ok(())
}
