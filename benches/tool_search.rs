//! Issue 40: the local tool search over 10,000 deferred tools.
//!
//! Builds `pikuri::tool_search::Index` over 10,000 tools (names like
//! `archive_invoice_42`, one-sentence descriptions, two parameters each)
//! and times queries of one to six words, some matching thousands of
//! tools, some none. Reports the index's build time and the median,
//! 90th percentile and worst time per query (each query timed alone,
//! best of `PIKURI_BENCH_RUNS` passes, default 5). Target: a median under
//! 1 ms per query.
//!
//! `cargo bench --bench tool_search`

use std::sync::Arc;
use std::time::{Duration, Instant};

use pikuri::Tool;
use pikuri::tool::{FnTool, Parameters};
use pikuri::tool_search::Index;

const TOOLS: usize = 10_000;
const TOPICS: [&str; 25] = [
    "invoice",
    "calendar",
    "ticket",
    "photo",
    "playlist",
    "recipe",
    "shipment",
    "contract",
    "sensor",
    "backup",
    "forum",
    "payroll",
    "warehouse",
    "podcast",
    "vaccine",
    "repository",
    "customer",
    "flight",
    "hotel",
    "budget",
    "lease",
    "device",
    "course",
    "patient",
    "order",
];
const VERBS: [&str; 20] = [
    "create", "delete", "list", "update", "archive", "export", "import", "share", "tag", "search",
    "merge", "split", "lock", "unlock", "rename", "copy", "move", "restore", "audit", "count",
];
const QUERIES: [&str; 12] = [
    "invoice",
    "archive invoice",
    "create a calendar event for tomorrow",
    "export payroll records to csv",
    "convert currency",
    "unlock device remotely",
    "xyzzy",
    "list all the open tickets of a customer",
    "restoreBackup",
    "patient vaccine history audit",
    "merge two repositories and rename",
    "flight hotel budget lease course order",
];

fn tools() -> Vec<Arc<dyn Tool>> {
    (0..TOOLS)
        .map(|i| {
            let verb = VERBS[i % VERBS.len()];
            let topic = TOPICS[(i / VERBS.len()) % TOPICS.len()];
            let other = TOPICS[(i * 7 + 3) % TOPICS.len()];
            let tool: Arc<dyn Tool> = Arc::new(FnTool::new(
                format!("{verb}_{topic}_{i}"),
                format!("{verb} a {topic} record, linked to a {other}, in the {topic} service."),
                Parameters::builder()
                    .required_string(&format!("{topic}Id"), "Which one.")
                    .optional_integer("limit", "How many.")
                    .build(),
                |_, _| Ok(String::new()),
            ));
            tool
        })
        .collect()
}

fn main() {
    let runs: usize = std::env::var("PIKURI_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let tools = tools();
    let t = Instant::now();
    let index = Index::new(&tools);
    let build = t.elapsed();
    assert_eq!(index.len(), TOOLS);
    println!("tool_search: {TOOLS} tools, index built in {build:.2?}");
    let mut per_query: Vec<Duration> = Vec::new();
    for q in QUERIES {
        let mut best = Duration::MAX;
        let mut hits = 0;
        for _ in 0..runs {
            let t = Instant::now();
            let found = std::hint::black_box(index.search(std::hint::black_box(q), 5));
            best = best.min(t.elapsed());
            hits = found.len();
        }
        println!("  {q:<45} {hits} found, {best:>10.1?}");
        per_query.push(best);
    }
    per_query.sort();
    let at = |p: usize| per_query[(per_query.len() - 1) * p / 100];
    println!(
        "per query: median {:.1?}, p90 {:.1?}, worst {:.1?} (target: median < 1 ms)",
        at(50),
        at(90),
        per_query[per_query.len() - 1]
    );
}
