//! The smallest useful CLI on pikuri, for binary-size measurements
//! (`scripts/bench-build.sh`): one streamed turn against the endpoint in
//! `OPENAI_BASE_URL` / `OPENAI_MODEL` / `OPENAI_API_KEY`, deltas to stdout.
//!
//! `cargo run --example minimal -- "Why is the sky blue?"`

use std::io::Write;

use pikuri::{Agent, ChatTransport, Event};

fn main() -> Result<(), pikuri::Error> {
    let prompt: Vec<String> = std::env::args().skip(1).collect();
    let mut agent = Agent::builder(ChatTransport::from_env()?)
        .streaming(true)
        .add_listener(|e: &Event| {
            if let Event::AssistantDelta { content, .. } = e {
                print!("{content}");
                let _ = std::io::stdout().flush();
            }
        })
        .build()?;
    agent.run_loop(&prompt.join(" "))?;
    println!();
    Ok(())
}
