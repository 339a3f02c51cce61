//! Benchmark 9: building an agent with many tools.
//!
//! Wall time of `Agent::builder(..).add_tool(..)* .build()` with 10, 100,
//! 1,000 and 10,000 trivial [`FnTool`]s (each with a one-property schema),
//! and of a build whose tools come from one MCP server over stdio
//! (`pikuri::mcp::Registry`). The MCP server is this binary re-executed
//! (`PIKURI_BENCH_MCP_TOOLS=N`): it answers `initialize` and a paginated
//! `tools/list` (1,000 tools a page) from memory, so the figure is the
//! crate's own cost plus the pipe, not a server's. The baseline is the
//! floor of the work itself: building the same tools into a `Vec` and
//! encoding their specs once.
//!
//! Building should be linear: the last column (µs per tool) stays flat from
//! 100 to 10,000 tools. Before issue 28 it grew with N (1,000 tools took
//! 1.8 s, an MCP server with 10,000 did not build in a minute).

#[allow(dead_code, reason = "shared by several bench binaries")]
mod common;

use std::io::{BufRead, Write};
use std::time::Instant;

use serde_json::{Value, json};

use pikuri::mcp::{Registry, Server};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, ChatTransport, Tool};

use common::{header, median, quick, runs};

/// The variable that turns this binary into the MCP server.
const SERVE: &str = "PIKURI_BENCH_MCP_TOOLS";

fn transport() -> ChatTransport {
    // An explicit context window: no probe, nothing touches the network.
    ChatTransport::new("qwen3-8b")
        .with_api_base("http://127.0.0.1:9/v1")
        .with_context_window(Some(32_768))
}

fn params() -> Parameters {
    Parameters::builder()
        .required_string("text", "The text.")
        .build()
}

fn fn_tool(i: usize) -> FnTool {
    FnTool::new(
        format!("tool_{i}"),
        "Echo the text.",
        params(),
        |args, _| Ok(args["text"].as_str().unwrap_or_default().to_string()),
    )
}

/// The floor: the same tools built into a `Vec`, specs encoded once.
fn baseline(n: usize) -> usize {
    let tools: Vec<FnTool> = (0..n).map(fn_tool).collect();
    let specs: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name(), "description": t.description(),
                "parameters": t.parameters().to_json()}})
        })
        .collect();
    std::hint::black_box(specs).len()
}

fn fn_tools(n: usize) -> usize {
    let mut cfg = Agent::builder(transport());
    for i in 0..n {
        cfg = cfg.add_tool(fn_tool(i));
    }
    let mut agent = cfg.build().expect("agent builds");
    let count = agent.tools().len();
    agent.close();
    count
}

fn mcp_tools(n: usize) -> usize {
    let exe = std::env::current_exe().expect("own path");
    let server = Server::stdio(exe, [""; 0]).with_env(SERVE, n.to_string());
    let mcp = Registry::new().server("bench", server);
    let mut agent = Agent::builder(transport())
        .add_extension(mcp)
        .build()
        .expect("agent builds");
    let count = agent.tools().len();
    agent.close();
    count
}

/// Median wall time of `f(n)` in ms; checks it built `n` tools.
fn time(n: usize, f: fn(usize) -> usize) -> f64 {
    let reps = if n >= 10_000 { runs().min(3) } else { runs() };
    let mut ms: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            let built = f(n);
            let elapsed = t.elapsed().as_secs_f64() * 1e3;
            assert_eq!(built, n);
            elapsed
        })
        .collect();
    median(&mut ms)
}

/// The MCP server side: `initialize`, `tools/list` in pages, `ping`.
fn serve(n: usize) {
    const PAGE: usize = 1_000;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue; // a notification
        };
        let result = match msg["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "bench", "version": "1.0"}
            }),
            Some("tools/list") => {
                let start: usize = msg["params"]["cursor"]
                    .as_str()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                let end = (start + PAGE).min(n);
                let tools: Vec<Value> = (start..end)
                    .map(|i| {
                        json!({"name": format!("tool.{i}"), "description": "Echo the text.",
                        "inputSchema": {"type": "object",
                            "properties": {"text": {"type": "string"}}, "required": ["text"]}})
                    })
                    .collect();
                let mut page = json!({ "tools": tools });
                if end < n {
                    page["nextCursor"] = json!(end.to_string());
                }
                page
            }
            _ => json!({}),
        };
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
}

fn main() {
    if let Some(n) = std::env::var(SERVE).ok().and_then(|v| v.parse().ok()) {
        serve(n);
        return;
    }
    header("tools");
    println!("building an agent with N tools: median ms (µs per tool)");
    let sizes: &[usize] = if quick() {
        &[10, 100, 1_000]
    } else {
        &[10, 100, 1_000, 10_000]
    };
    println!(
        "{:>8} {:>22} {:>22} {:>22}",
        "tools", "baseline (Vec+specs)", "FnTool build", "MCP stdio build"
    );
    for &n in sizes {
        let cell = |ms: f64| format!("{ms:.2} ({:.1} µs)", ms * 1e3 / n as f64);
        let base = time(n, baseline);
        let fns = time(n, fn_tools);
        let mcp = time(n, mcp_tools);
        println!(
            "{n:>8} {:>22} {:>22} {:>22}",
            cell(base),
            cell(fns),
            cell(mcp)
        );
    }
}
