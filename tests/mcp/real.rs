//! The reference servers: `@modelcontextprotocol/server-everything` over
//! stdio and Streamable HTTP, and `mcp-server-time` over stdio.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pikuri::Agent;
use pikuri::ToolContext;
use pikuri::mcp::{Client, Registry, Server};
use pikuri::testing::{FakeServer, Reply};
use serde_json::json;

use super::{assert_history_valid, cache, eventually, processes_tagged, skip, unique_tag};

/// `node` and the installed everything server's entry point.
pub(super) fn everything(cache: &Path) -> Option<(String, PathBuf)> {
    let node_ok = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !node_ok {
        skip("node not found");
        return None;
    }
    let js =
        cache.join("everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    Some(("node".into(), js))
}

#[test]
fn everything_over_stdio_through_an_agent() {
    let Some(dir) = cache() else { return };
    let Some((node, js)) = everything(&dir) else {
        return;
    };
    let tag = unique_tag("everything");
    let server =
        Server::stdio(node, [js.as_os_str(), "stdio".as_ref()]).with_env("PIKURI_MCP_TAG", &tag);
    let model = FakeServer::start();
    model.push(Reply::tool_call(
        "everything__echo",
        json!({"message": "hello"}),
    ));
    model.push(Reply::tool_call("everything__get-tiny-image", json!({})));
    model.push(Reply::tool_call(
        "everything__get-sum",
        json!({"a": 2, "b": 3}),
    ));
    model.push(Reply::text("done"));
    let mcp = Registry::new().server("everything", server);
    let mut agent = Agent::builder(model.transport())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    let names = mcp.tool_names("everything");
    assert!(names.contains(&"everything__echo".to_string()), "{names:?}");
    let prompt = agent.system_prompt();
    assert!(
        prompt.contains("- everything: Everything Reference Server: "),
        "{prompt}"
    );
    assert_eq!(
        mcp.client("everything").unwrap().protocol_version(),
        "2025-06-18"
    );

    agent.run_loop("use the tools").unwrap();
    let reqs = model.chat_requests();
    let result = |i: usize| {
        reqs[i].messages().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(result(1), "Echo: hello");
    let image = result(2);
    assert!(
        image.contains("[image: image/png, ") && !image.contains("iVBOR"),
        "{image}"
    );
    assert!(result(3).contains('5'), "{}", result(3));
    assert_history_valid(agent.messages());
    assert!(processes_tagged(&tag) >= 1);
    agent.close();
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 0));
}

#[test]
fn time_server_over_stdio() {
    let Some(dir) = cache() else { return };
    let bin = dir.join("time-venv/bin/mcp-server-time");
    let tag = unique_tag("time");
    let client = Client::connect(
        "time",
        &Server::stdio(bin, [""; 0]).with_env("PIKURI_MCP_TAG", &tag),
    )
    .unwrap();
    let tools = client.list_tools().unwrap();
    assert!(
        tools.iter().any(|t| t.name == "get_current_time"),
        "{tools:?}"
    );
    let out = client
        .call_tool(
            "get_current_time",
            &json!({"timezone": "UTC"}),
            &ToolContext::detached(),
        )
        .unwrap();
    assert!(out.contains("UTC") && out.contains("datetime"), "{out}");
    let err = client
        .call_tool(
            "get_current_time",
            &json!({"timezone": "Not/AZone"}),
            &ToolContext::detached(),
        )
        .unwrap_err();
    assert!(!err.message().is_empty());
    client.close();
    assert_eq!(processes_tagged(&tag), 0);
}

/// The everything server in `streamableHttp` mode on a free loopback port
/// (killed, with its group, on drop).
pub(super) struct EverythingHttp {
    child: Child,
    pub(super) url: String,
}

impl Drop for EverythingHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn everything_http(dir: &Path) -> Option<EverythingHttp> {
    let (node, js) = everything(dir)?;
    for _ in 0..3 {
        // A free port, released just before the server takes it.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(&node)
            .arg(&js)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let up = eventually(Duration::from_secs(20), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
                || child.try_wait().ok().flatten().is_some()
        });
        if up && child.try_wait().ok().flatten().is_none() {
            return Some(EverythingHttp {
                child,
                url: format!("http://127.0.0.1:{port}/mcp"),
            });
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("the everything server did not start in HTTP mode");
}

#[test]
fn everything_over_streamable_http_through_an_agent() {
    let Some(dir) = cache() else { return };
    let Some(server) = everything_http(&dir) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call(
        "everything__echo",
        json!({"message": "over http"}),
    ));
    model.push(Reply::tool_call(
        "everything__get-structured-content",
        json!({"location": "New York"}),
    ));
    model.push(Reply::text("done"));
    let mcp = Registry::new().server("everything", Server::http(&server.url));
    let mut agent = Agent::builder(model.transport())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    agent.run_loop("echo").unwrap();
    let reqs = model.chat_requests();
    assert_eq!(
        reqs[1].messages().last().unwrap()["content"],
        "Echo: over http"
    );
    let structured = reqs[2].messages().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(structured.contains("temperature"), "{structured}");
    assert!(mcp.client("everything").unwrap().ping().is_ok());
    // The 2025 generation: the server/discover probe fell back to initialize.
    assert_eq!(
        mcp.client("everything").unwrap().protocol_version(),
        "2025-06-18"
    );
    assert_history_valid(agent.messages());
    agent.close();
}
