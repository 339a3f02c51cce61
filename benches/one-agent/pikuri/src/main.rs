//! One streaming agent with one listener on its own thread, as
//! `benches/turn.rs`'s pikuri client in its `rss` child: five turns of the
//! streamed answer at `PIKURI_TURN_BASE`, the conversation cleared after
//! each. Prints `VmHWM` at the start and the end and `RssFile` at the end,
//! KiB.

use pikuri::{Agent, ChatTransport, Event, HttpConfig};

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let base = std::env::var("PIKURI_TURN_BASE").expect("PIKURI_TURN_BASE");
    let expect: usize = std::env::var("PIKURI_TURN_EXPECT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let start = status_kib("VmHWM");
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
    println!("{start} {} {}", status_kib("VmHWM"), status_kib("RssFile"));
}
