//! examples/chat with `--mcp` / `--mcp-url`: a scripted model (a
//! FakeServer behind OPENAI_BASE_URL) calls a tool of the real everything
//! server through the example, and the answer, built from the tool's
//! result, reaches stdout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use pikuri::testing::{FakeServer, Reply};
use serde_json::json;

use super::real::{everything, everything_http};
use super::{cache, eventually, processes_tagged, python, skip, unique_tag};

/// `target/<profile>/examples/chat`, or `None` after a skip notice
/// (`cargo test` builds examples; `cargo test --test mcp` alone does not,
/// hence `cargo build --example chat` in scripts/mcp-servers.sh).
pub(super) fn chat_bin() -> Option<PathBuf> {
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
pub(super) fn model(tool: &str) -> FakeServer {
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

/// The example against `model`, with no API key and no colour.
pub(super) fn chat(bin: &Path, model: &FakeServer) -> Command {
    let mut command = Command::new(bin);
    command
        .env("OPENAI_BASE_URL", model.base_url())
        .env("OPENAI_MODEL", "fake-model")
        .env_remove("OPENAI_API_KEY")
        .env("NO_COLOR", "1");
    command
}

fn run(bin: &Path, model: &FakeServer, args: &[&str]) -> Output {
    chat(bin, model)
        .args(args)
        .args(["--tools", "none", "-p", "Echo something."])
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

/// Issue 13 class 7: SIGTERM mid-turn ends the chat with 143 after closing
/// its agent, so an MCP server that ignores stdin EOF and SIGTERM (and its
/// child) is killed too. Without the example's handler the default action
/// ends the chat alone and leaves both running.
#[cfg(unix)]
#[test]
fn sigterm_mid_turn_closes_the_mcp_servers_and_exits_143() {
    let Some(bin) = chat_bin() else {
        return;
    };
    let Some((py, script)) = python() else {
        return;
    };
    let tag = unique_tag("sigterm");
    let model = FakeServer::start();
    model.respond_with(|_| Reply::hang());
    let mcp = format!("fake={py} {script} --child --stubborn");
    let chat = chat(&bin, &model)
        .args(["--mcp", &mcp, "--tools", "none", "-p", "Wait for me."])
        .env("PIKURI_MCP_TAG", &tag)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The turn is in flight once the model has the request; by then the
    // chat, the fake server and its child carry the tag.
    let in_flight = eventually(Duration::from_secs(20), || model.chat_requests().len() == 1);
    let tagged = processes_tagged(&tag);
    let status = Command::new("kill")
        .args(["-TERM", &chat.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = chat.wait_with_output().unwrap();
    let code = out.status.code();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(in_flight, "the model got no request: {stderr}");
    assert_eq!(tagged, 3, "the chat, the MCP server and its child");
    assert_eq!(code, Some(143), "{stderr}");
    assert!(
        eventually(Duration::from_secs(5), || processes_tagged(&tag) == 0),
        "{} tagged processes left",
        processes_tagged(&tag)
    );
}

/// Issue 32: the REPL lists the resources and prompts of a 2026 server,
/// sends a prompt as the next message, and an input request of the tool
/// the model then calls is answered at the terminal (the REPL's stdin).
#[test]
fn chat_repl_lists_resources_and_prompts_sends_a_prompt_and_answers_an_input_request() {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};
    let Some((py, script)) = python() else { return };
    let Some(bin) = chat_bin() else { return };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__ask", json!({})));
    model.respond_with(|req| {
        let last = req.messages().last().cloned().unwrap_or_default();
        Reply::text(format!(
            "The tool said: {}",
            last["content"].as_str().unwrap_or("?")
        ))
    });
    let spec = format!("fake={py} '{script}' --modern");
    let mut child = chat(&bin, &model)
        .args(["--tools", "none", "--mcp", &spec])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let collect = |mut r: Box<dyn Read + Send>| {
        let text = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&text);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        text
    };
    let stdout = collect(Box::new(child.stdout.take().unwrap()));
    let stderr = collect(Box::new(child.stderr.take().unwrap()));
    let mut stdin = child.stdin.take().unwrap();
    let limit = Duration::from_secs(60);
    let seen = |text: &Arc<Mutex<String>>, what: &str| {
        let what = what.to_string();
        let text = Arc::clone(text);
        eventually(limit, move || text.lock().unwrap().contains(&what))
    };
    stdin
        .write_all(b"/resources\n/prompts\n/prompts fake greet who=Ada\n")
        .unwrap();
    assert!(seen(&stderr, "Answer? [y]es"), "{}", stderr.lock().unwrap());
    stdin.write_all(b"y\n").unwrap();
    assert!(seen(&stderr, "name: "), "{}", stderr.lock().unwrap());
    stdin.write_all(b"octocat\n").unwrap();
    assert!(
        seen(&stdout, "The tool said: hello octocat"),
        "stdout: {}\nstderr: {}",
        stdout.lock().unwrap(),
        stderr.lock().unwrap()
    );
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success());
    let err = stderr.lock().unwrap().clone();
    assert!(err.contains("fake mem://r0  Resource 0"), "{err}");
    assert!(err.contains("fake mem://item/{n}  (template)"), "{err}");
    assert!(err.contains("fake greet who=…  Greets someone."), "{err}");
    assert!(
        err.contains("MCP server fake asks: Your GitHub login?"),
        "{err}"
    );
    // The prompt's text was the user's message.
    let first = &model.chat_requests()[0];
    assert_eq!(
        first.messages().last().unwrap()["content"],
        "Say hello to Ada."
    );
}

/// The fake with `--many 40` (52 tools) through the example: above
/// `--defer-above`'s default of 30 its tools are held back, the model
/// searches, finds `fake__echo` and calls it; `/tools` shows the pools
/// before and after. With `--no-tool-search` every schema is sent.
#[test]
fn chat_example_defers_mcp_tools_above_the_threshold() {
    use std::io::Write;
    let Some((py, script)) = python() else { return };
    let Some(bin) = chat_bin() else { return };
    let spec = format!("fake={py} '{script}' --many 40");
    let model = FakeServer::start();
    model.push(Reply::tool_call(
        "search_tools",
        json!({"query": "echo text"}),
    ));
    model.push(Reply::tool_call("fake__echo", json!({"text": "hi"})));
    model.respond_with(|req| {
        let last = req.messages().last().cloned().unwrap_or_default();
        Reply::text(format!(
            "The tool said: {}",
            last["content"].as_str().unwrap_or("?")
        ))
    });
    let mut child = chat(&bin, &model)
        .args(["--tools", "calculator", "--mcp", &spec])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A /command after a message waits for its turn to end.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"/tools\nEcho hi.\n/tools\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(stdout.contains("The tool said: echo: hi"), "{stdout}");
    let reqs = model.chat_requests();
    assert_eq!(reqs[0].tool_names(), ["calculator", "search_tools"]);
    assert_eq!(
        reqs[1].tool_names(),
        ["calculator", "search_tools", "fake__echo"]
    );
    assert!(
        stderr.contains("sent (1): calculator\ndeferred (52, held back until found: more than 30): fake__echo, fake__hang,"),
        "{stderr}"
    );
    assert!(stderr.contains("found (0): (none)"), "{stderr}");
    assert!(stderr.contains("found (1): fake__echo"), "{stderr}");

    // Every schema with --no-tool-search; a small server's sent as they
    // are with the default.
    for (args, sent) in [
        (&["--mcp", spec.as_str(), "--no-tool-search"][..], 52),
        (&["--mcp", spec.as_str(), "--defer-above", "52"][..], 52),
    ] {
        let model = FakeServer::start();
        model.push(Reply::text("ok"));
        let out = chat(&bin, &model)
            .args(args)
            .args(["--tools", "none", "-p", "hi"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let names = model.chat_requests()[0].tool_names();
        assert_eq!(names.len(), sent, "{args:?}: {names:?}");
        assert!(!names.contains(&"search_tools".to_string()), "{names:?}");
    }
}
