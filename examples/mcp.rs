//! Tools of an MCP server in an agent: start a server, list what it offers,
//! and let a model call one of its tools.
//!
//! ```text
//! cargo run --example mcp                                   # npx -y @modelcontextprotocol/server-everything
//! cargo run --example mcp -- uvx mcp-server-time            # any stdio server
//! cargo run --example mcp -- --url http://127.0.0.1:3001/mcp    # a Streamable HTTP server
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 cargo run --example mcp -- "What time is it in Oslo?"
//! ```
//!
//! Without `OPENAI_BASE_URL` a scripted model ([`FakeServer`]) calls the
//! server's `echo` tool (or one that takes no required argument), so the
//! example runs with no model server; scripts/mcp-servers.sh installs the
//! reference servers without npx. Progress and the server's log messages
//! arrive as `mcp.*` domain events and are printed as they come.

use std::process::ExitCode;

use pikuri::mcp::{Registry, Server};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, ChatTransport, Event};
use serde_json::json;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> pikuri::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let question = match args.last() {
        Some(q) if q.contains(' ') && std::env::var("OPENAI_BASE_URL").is_ok() => args.pop(),
        _ => None,
    };
    let server = match args.first().map(String::as_str) {
        Some("--url") => Server::http(args.get(1).cloned().unwrap_or_default()),
        Some(cmd) => Server::stdio(cmd, &args[1..]),
        None => Server::stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]),
    };
    let mcp = Registry::new().server("demo", server);

    // A real model when configured, else a scripted one.
    let scripted = std::env::var("OPENAI_BASE_URL")
        .is_err()
        .then(FakeServer::start);
    let transport = match &scripted {
        Some(fake) => fake.transport(),
        None => ChatTransport::from_env()?,
    };
    let mut agent = Agent::builder(transport)
        .system_prompt("You are a helpful assistant. Use the tools.")
        .add_extension(mcp.clone())
        .on_event(|e| {
            if let Event::Domain { name, payload, .. } = e {
                eprintln!("[{name}] {payload}");
            }
        })
        .build()?;

    let client = mcp.client("demo").expect("connected at build");
    println!(
        "connected to {} (protocol {}); tools:",
        client.server_title(),
        client.protocol_version()
    );
    let tools = client.list_tools()?;
    for t in &tools {
        println!("  demo__{}: {}", t.name, t.description);
    }

    let question = match (&scripted, question) {
        (None, q) => q.unwrap_or_else(|| "Use one of your tools and tell me what it said.".into()),
        (Some(fake), _) => {
            let takes_nothing = |t: &&pikuri::mcp::ToolInfo| {
                t.input_schema["required"]
                    .as_array()
                    .is_none_or(Vec::is_empty)
            };
            let (tool, args) = match tools.iter().find(|t| t.name == "echo") {
                Some(_) => ("echo".to_string(), json!({"message": "hello from pikuri"})),
                // Else one without required arguments, else the first (its
                // schema then rejects `{}`, and the model sees why).
                None => match tools.iter().find(takes_nothing).or(tools.first()) {
                    Some(t) => (t.name.clone(), json!({})),
                    None => {
                        return Err(pikuri::Error::InvalidInput(
                            "the server has no tools".into(),
                        ));
                    }
                },
            };
            fake.push(Reply::tool_call(&format!("demo__{tool}"), args));
            fake.respond_with(|req| {
                let last = req.messages().last().cloned().unwrap_or_default();
                Reply::text(format!(
                    "The tool said: {}",
                    last["content"].as_str().unwrap_or("?")
                ))
            });
            format!("Call {tool}.")
        }
    };
    let outcome = agent.run_loop(&question)?;
    println!("{}", outcome.answer.unwrap_or_default());
    // Shuts the server down (its whole process group for stdio).
    agent.close();
    Ok(())
}
