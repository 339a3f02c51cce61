//! One streaming agent with one listener on its own thread, as
//! `benches/turn.rs`'s pikuri client in its `rss` child: five turns of the
//! streamed answer at `PIKURI_TURN_BASE`, the conversation cleared after
//! each. Prints `VmHWM` at the start and the end and `RssFile` at the end,
//! KiB.

#[path = "../../child.rs"]
mod child;

use pikuri::{Agent, ChatTransport, Event, HttpConfig};

fn main() {
    let child = child::Child::start();
    let (base, expect) = (child.base.as_str(), child.expect);
    let transport = ChatTransport::new("qwen3-8b")
        .with_api_base(base)
        .with_context_window(Some(32_768));
    let mut agent = Agent::builder(transport)
        .streaming(true)
        .http(HttpConfig::default().with_max_retries(0))
        .add_listener(|_: &Event| {})
        .build()
        .expect("agent builds");
    for _ in 0..5 {
        let out = agent
            .run_loop("What does the listener hub do?")
            .expect("turn");
        assert_eq!(out.answer.map_or(0, |a| a.len()), expect, "every delta");
        agent.clear_conversation();
    }
    agent.close();
    child.report();
}
