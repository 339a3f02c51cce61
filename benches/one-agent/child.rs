//! What both programs of `benches/one-agent` share (each includes this
//! file, as neither depends on the other): the protocol of
//! `benches/turn.rs`'s `rss` children. The server's URL comes in
//! `PIKURI_TURN_BASE`, the answer's length in `PIKURI_TURN_EXPECT`, and
//! the child prints `VmHWM` at its start and end and `RssFile` at its end,
//! KiB.

/// One run of the child, from its start.
pub struct Child {
    /// The replay server's base URL.
    pub base: String,
    /// The bytes of text each answer must have.
    pub expect: usize,
    start: u64,
}

impl Child {
    /// Read the protocol's variables and the peak so far.
    pub fn start() -> Child {
        Child {
            base: std::env::var("PIKURI_TURN_BASE").expect("PIKURI_TURN_BASE"),
            expect: std::env::var("PIKURI_TURN_EXPECT")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            start: status_kib("VmHWM"),
        }
    }

    /// Print the figures the bench reads.
    pub fn report(self) {
        println!(
            "{} {} {}",
            self.start,
            status_kib("VmHWM"),
            status_kib("RssFile")
        );
    }
}

/// A `/proc/self/status` field in KiB (0 when absent).
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
