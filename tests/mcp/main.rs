//! MCP against real servers: a misbehaving fake (tests/fixtures/mcp_fake.py,
//! needs python3), the reference servers `@modelcontextprotocol/server-everything`
//! (stdio and Streamable HTTP) and `mcp-server-time`, and the chat example
//! calling one of them.
//!
//! The reference servers come from `scripts/mcp-servers.sh install`, which
//! caches them under `~/.cache/pikuri`; `scripts/mcp-servers.sh test` runs
//! this target with `PIKURI_MCP_CACHE` set and `PIKURI_REQUIRE_MCP=1`.
//! Without them (or without python3 / node) each test says on stderr that it
//! is skipped and passes, unless `PIKURI_REQUIRE_MCP=1`, which turns a
//! missing piece into a failure.

mod attacks16; // session 16's outside pass: redirects, limits, overtaking, lifecycle
mod chat; // examples/chat with --mcp / --mcp-url, driven by a scripted model
#[cfg(feature = "tool-search")]
mod deferred; // tools of a server as deferred tools (issue 40)
mod fake; // the fault matrix against the misbehaving Python server
mod handshake; // the 2025 handshake over HTTP ends when the server has notifications/initialized
mod hostile; // servers that stop reading, flood, die, daemonize or echo secrets
mod modern; // both generations, resources, prompts, input requests, bad input
mod names; // tool names from servers: valid, unique, mapped back; 10,000 tools
mod oauth; // OAuth 2.1: a Python SDK server and authorization server, and a scripted bad one
mod real; // the reference servers over stdio and HTTP
mod sdk; // a server of the official Python SDK: protocol 2026-07-28

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use pikuri::Message;

/// Whether a missing server fails instead of skipping.
fn required() -> bool {
    std::env::var("PIKURI_REQUIRE_MCP").is_ok_and(|v| v == "1")
}

/// Skip (or, under `PIKURI_REQUIRE_MCP=1`, fail) with `why`.
fn skip(why: &str) {
    assert!(!required(), "{why}, but PIKURI_REQUIRE_MCP=1");
    eprintln!("skipped: {why} (scripts/mcp-servers.sh test runs these)");
}

/// `python3` and the fake server script, or `None` after a skip notice.
fn python() -> Option<(String, String)> {
    let ok = Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip("python3 not found");
        return None;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_fake.py");
    Some(("python3".into(), script.display().to_string()))
}

/// The install dir of `scripts/mcp-servers.sh` (`PIKURI_MCP_CACHE`), or
/// `None` after a skip notice.
fn cache() -> Option<PathBuf> {
    let dir = std::env::var("PIKURI_MCP_CACHE").unwrap_or_default();
    if dir.trim().is_empty() {
        skip("PIKURI_MCP_CACHE not set");
        return None;
    }
    let dir = PathBuf::from(dir);
    if !dir.join(".installed").is_file() {
        skip(&format!("{} has no installed servers", dir.display()));
        return None;
    }
    Some(dir)
}

/// A tag no other test uses, put in a server's environment so its
/// processes (and their children, which inherit it) can be counted.
fn unique_tag(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A file the fake server logs what it receives to, removed on drop.
struct Log(PathBuf);

impl Log {
    /// A fresh log file named after `tag`.
    fn new(tag: &str) -> Log {
        let path = std::env::temp_dir().join(format!("pikuri-mcp-{tag}.log"));
        let _ = std::fs::remove_file(&path);
        Log(path)
    }

    /// What the server logged so far.
    fn text(&self) -> String {
        std::fs::read_to_string(&self.0).unwrap_or_default()
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The fake over HTTP (`--http`) with `args`: the process (killed on
/// drop), its URL and its log.
struct Http {
    child: std::process::Child,
    url: String,
    log: Log,
}

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fake over HTTP with `args`, or `None` after a skip notice.
fn http(args: &[&str]) -> Option<Http> {
    use std::io::BufRead;
    let (py, script) = python()?;
    let log = Log::new(&unique_tag("http"));
    let mut child = Command::new(py)
        .arg(&script)
        .args(["--http", "--log", &log.0.display().to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", line.trim());
    Some(Http { child, url, log })
}

/// How many live processes carry `PIKURI_MCP_TAG=<tag>` in their
/// environment (Linux /proc; zombies excluded).
fn processes_tagged(tag: &str) -> usize {
    let needle = format!("PIKURI_MCP_TAG={tag}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            state != Some("Z")
        })
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .unwrap_or_default()
                .split(|b| *b == 0)
                .any(|kv| kv == needle.as_bytes())
        })
        .count()
}

/// Wait up to `limit` for `cond`.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// Every tool call in the history is answered by a tool message with its id.
fn assert_history_valid(messages: &[Message]) {
    for (i, m) in messages.iter().enumerate() {
        for call in &m.tool_calls {
            let answered = messages[i + 1..]
                .iter()
                .any(|r| r.tool_call_id.as_deref() == Some(call.id.as_str()));
            assert!(
                answered,
                "tool call {} has no result: {messages:#?}",
                call.id
            );
        }
    }
}
