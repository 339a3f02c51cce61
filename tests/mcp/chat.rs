//! examples/chat with `--mcp` / `--mcp-url`: a scripted model (a
//! FakeServer behind OPENAI_BASE_URL) calls a tool of the real everything
//! server through the example, and the answer, built from the tool's
//! result, reaches stdout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pikuri::testing::{FakeServer, Reply};
use serde_json::json;

use super::real::{everything, everything_http};
use super::{cache, skip};

/// `target/<profile>/examples/chat`, or `None` after a skip notice
/// (`cargo test` builds examples; `cargo test --test mcp` alone does not,
/// hence `cargo build --example chat` in scripts/mcp-servers.sh).
fn chat_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile = exe.parent().and_then(Path::parent)?;
    let bin = profile
        .join("examples")
        .join(format!("chat{}", std::env::consts::EXE_SUFFIX));
    if bin.is_file() {
        Some(bin)
    } else {
        skip(&format!(
            "{} is not built (cargo build --example chat)",
            bin.display()
        ));
        None
    }
}

/// A model that calls `tool` once, then answers with the tool's result.
fn model(tool: &str) -> FakeServer {
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        tool,
        json!({"message": "through the example"}),
    ));
    server.respond_with(|req| {
        let last = req.messages().last().cloned().unwrap_or_default();
        Reply::text(format!(
            "The tool said: {}",
            last["content"].as_str().unwrap_or("?")
        ))
    });
    server
}

fn run(bin: &Path, model: &FakeServer, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .args(["--tools", "none", "-p", "Echo something."])
        .env("OPENAI_BASE_URL", model.base_url())
        .env("OPENAI_MODEL", "fake-model")
        .env_remove("OPENAI_API_KEY")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

#[test]
fn chat_example_calls_an_everything_tool_over_stdio() {
    let Some(dir) = cache() else { return };
    let Some((node, js)) = everything(&dir) else {
        return;
    };
    let Some(bin) = chat_bin() else { return };
    let model = model("everything__echo");
    let spec = format!("everything={node} '{}' stdio", js.display());
    let out = run(&bin, &model, &["--mcp", &spec]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "The tool said: Echo: through the example");
    // The model saw the server's tools and the <available_mcps> block.
    let first = &model.chat_requests()[0];
    assert!(first.tool_names().contains(&"everything__echo".to_string()));
    assert!(
        first.messages()[0]["content"]
            .as_str()
            .unwrap()
            .contains("<available_mcps>")
    );
}

#[test]
fn chat_example_calls_an_everything_tool_over_http() {
    let Some(dir) = cache() else { return };
    let Some(bin) = chat_bin() else { return };
    let Some(server) = everything_http(&dir) else {
        return;
    };
    let model = model("web__echo");
    let out = run(&bin, &model, &["--mcp-url", &format!("web={}", server.url)]);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "The tool said: Echo: through the example"
    );
}
