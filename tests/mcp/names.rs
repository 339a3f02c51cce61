//! Tool names from servers (issue 28, class 5): whatever a server lists,
//! the names offered are valid for every provider and unique, the rule is
//! deterministic, calls reach the server under its own names, and a server
//! with 10,000 tools builds.

use std::path::PathBuf;

use pikuri::Agent;
use pikuri::mcp::{Registry, Server};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use serde_json::{Value, json};

use super::{python, unique_tag};

/// `^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`: what OpenAI, Anthropic and Gemini all
/// accept.
fn valid_everywhere(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The fake server with `args` and the file it logs what it receives to
/// (removed on drop).
struct Fake {
    server: Server,
    log: PathBuf,
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

fn fake(args: &[&str]) -> Option<Fake> {
    let (py, script) = python()?;
    let log = std::env::temp_dir().join(format!("pikuri-mcp-{}.log", unique_tag("names")));
    let mut line = vec![script, "--log".to_string(), log.display().to_string()];
    line.extend(args.iter().map(|s| (*s).to_string()));
    Some(Fake {
        server: Server::stdio(py, line),
        log,
    })
}

/// The `name` of every `tools/call` the server received, in order.
fn called(fake: &Fake) -> Vec<String> {
    std::fs::read_to_string(&fake.log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn host_tool(name: &str) -> FnTool {
    FnTool::new(name, "A host tool.", Parameters::empty(), |_, _| {
        Ok("host".into())
    })
}

#[test]
fn odd_server_names_become_valid_unique_names_and_calls_use_the_originals() {
    let Some(odd) = fake(&["--odd-names", "--page", "50"]) else {
        return;
    };
    let Some(plain) = fake(&[]) else { return };
    let model = FakeServer::start();
    let mcp = Registry::new()
        .server("odd", odd.server.clone())
        .server("9 lives", plain.server.clone());
    let mut agent = Agent::builder(model.transport())
        // Taken before the server's `echo` is named.
        .add_tool(host_tool("odd__echo"))
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    let names = mcp.tool_names("odd");
    let find = |prefix: &str| -> String {
        let hits: Vec<&String> = names.iter().filter(|n| n.starts_with(prefix)).collect();
        assert_eq!(hits.len(), 1, "{prefix}: {names:?}");
        hits[0].clone()
    };
    // Cleaned: every character outside [a-zA-Z0-9_-] is one `_`.
    assert!(names.contains(&"odd__a_b".to_string()), "{names:?}");
    assert!(
        names.contains(&"odd__bell_tab_end".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"odd___b_bold__b_".to_string()), "{names:?}");
    assert!(names.contains(&"odd__h_llo".to_string()), "{names:?}");
    assert!(names.contains(&"odd__9lives".to_string()), "{names:?}");
    // `a_b` comes after `a.b` took `odd__a_b`; `echo` after the host tool:
    // each ends in `_` and 8 hex digits.
    let a_b = find("odd__a_b_");
    let echo = find("odd__echo_");
    for hashed in [&a_b, &echo] {
        let (_, hex) = hashed.rsplit_once('_').unwrap();
        assert!(
            hex.len() == 8 && hex.chars().all(|c| c.is_ascii_hexdigit()),
            "{hashed}"
        );
    }
    // 100 characters: cut to 64, told apart by the hash.
    let long: Vec<&String> = names.iter().filter(|n| n.starts_with("odd__xxx")).collect();
    assert_eq!(long.len(), 2, "{names:?}");
    assert!(
        long.iter().all(|n| n.len() == 64) && long[0] != long[1],
        "{long:?}"
    );
    // A server name starting with a digit: `_` in front.
    let lives = mcp.tool_names("9 lives");
    assert!(lives.contains(&"_9_lives__echo".to_string()), "{lives:?}");

    let all: Vec<String> = agent.tools().iter().map(|t| t.name().to_string()).collect();
    let mut unique = all.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), all.len(), "{all:?}");
    assert!(all.iter().all(|n| valid_everywhere(n)), "{all:?}");

    // The same server and list give the same names (deterministic).
    let again = Registry::new().server("odd", odd.server.clone());
    let other = Agent::builder(model.transport())
        .add_tool(host_tool("odd__echo"))
        .add_extension(again.clone())
        .build()
        .unwrap();
    assert_eq!(again.tool_names("odd"), names);
    drop(other);

    // Calls reach the server under its own names.
    // A name with no allowed character at all still names a tool.
    let snowman = "odd___".to_string();
    assert!(names.contains(&snowman), "{names:?}");
    model.push(Reply::tool_calls(vec![
        ("odd__a_b", json!({})),
        (a_b.as_str(), json!({"k": 1})),
        ("odd__bell_tab_end", json!({})),
        (long[1].as_str(), json!({})),
        (snowman.as_str(), json!({})),
        (echo.as_str(), json!({"text": "hi"})),
    ]));
    model.push(Reply::text("done"));
    agent.run_loop("call them").unwrap();
    let sent = model.chat_requests();
    let offered = sent[0].tool_names();
    assert!(offered.iter().all(|n| valid_everywhere(n)), "{offered:?}");
    assert!(offered.contains(&a_b) && offered.contains(&"odd__echo".to_string()));
    assert_eq!(
        called(&odd),
        vec![
            "a.b".to_string(),
            "a_b".to_string(),
            "bell\u{7}tab\tend".to_string(),
            // Named in listing order: `long[1]` is the second one listed.
            format!("{}y", "x".repeat(99)),
            "\u{2603}".to_string(),
            "echo".to_string(),
        ]
    );
    let results: Vec<String> = sent[1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(results[0], "called a.b {}");
    assert_eq!(results[1], "called a_b {\"k\": 1}");
    assert_eq!(results[5], "echo: hi");
    agent.close();
}

#[test]
fn a_server_with_10_000_tools_builds_and_offers_them_all() {
    let Some(many) = fake(&["--many", "10000", "--page", "1000"]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::text("ok"));
    let mcp = Registry::new().server("many", many.server.clone());
    let mut agent = Agent::builder(model.transport())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    // The 12 usable tools of the fake (one has a bad schema) and t0..t9999.
    let names = mcp.tool_names("many");
    assert_eq!(names.len(), 10_012);
    assert_eq!(names[12], "many__t0");
    assert_eq!(names[10_011], "many__t9999");
    assert_eq!(agent.tools().len(), 10_012);
    agent.run_loop("hi").unwrap();
    assert_eq!(model.chat_requests()[0].tool_names().len(), 10_012);
    agent.close();
}
