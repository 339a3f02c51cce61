//! Model Context Protocol: tools of MCP servers as agent tools.
//!
//! Needs the `mcp` feature (on by default).
//!
//! Declare servers in a [`Registry`] and add it as an extension. At
//! [`build`](crate::Configurator::build) every server is started (stdio) or
//! reached (Streamable HTTP), the `initialize` handshake runs, its tools are
//! listed and offered to the model as `<server>__<tool>`, and an
//! `<available_mcps>` block joins the system prompt.
//! [`Agent::close`](crate::Agent::close) shuts every server down.
//!
//! ```no_run
//! use pikuri::Agent;
//! use pikuri::mcp::{Registry, Server};
//!
//! let mcp = Registry::new()
//!     .server("everything", Server::stdio("npx", ["-y", "@modelcontextprotocol/server-everything"]))
//!     .server("time", Server::stdio("uvx", ["mcp-server-time"]))
//!     .server("remote", Server::http("http://127.0.0.1:3001/mcp").bearer_token("…"));
//! let mut agent = Agent::builder(pikuri::ChatTransport::from_env())
//!     .add_extension(mcp.clone())
//!     .build()?;
//! assert!(mcp.tool_names("everything").contains(&"everything__echo".to_string()));
//! agent.run_loop("Echo 'hello' with the everything server.")?;
//! agent.close();
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! A [`Client`] talks to one server without an agent.
//!
//! # Protocol
//!
//! JSON-RPC 2.0 as the 2025-06-18 revision describes it. The client offers
//! `2025-06-18` and accepts a server answering `2025-03-26` (or, over stdio,
//! `2024-11-05`); any other answer fails the connect. It declares no client
//! capabilities: the server's `sampling/createMessage`, `elicitation/create`,
//! `roots/list` and any other request get a `-32601` error at once; its
//! `ping` gets an empty result. Unknown notifications are logged at `debug`
//! and ignored. Over HTTP, `Mcp-Session-Id` is kept and sent,
//! `MCP-Protocol-Version` follows the handshake, and a 404 to a request
//! with a session id (an expired session) runs the handshake again once and
//! retries.
//!
//! # Names
//!
//! A tool is offered as `<server>__<tool>`, every character outside
//! `[a-zA-Z0-9_-]` replaced by `_`. A name over 64 characters, or one that
//! collides after that replacement, is cut and ends in `_` and 8 hex
//! digits of a hash of the original name. Two servers cannot collide: the
//! server name is the prefix, and the registry refuses a name declared
//! twice. A tool whose `inputSchema` [`Parameters::from_json_schema`](crate::Parameters::from_json_schema)
//! rejects is logged at `warn` and left out.
//!
//! [`Server::sub_agent_only`] puts a server's tools in the sub-agent-only
//! pool; add the registry before [`SubAgents`](crate::SubAgents), whose
//! personas are checked against the tools present at its `bind`.
//!
//! # What the model sees
//!
//! Text content as is; images, audio, resource links and embedded binary
//! resources as one bracketed line (`[image: image/png, 1234 bytes]`),
//! never the base64; an embedded text resource as such a line followed by
//! its text; `structuredContent` as compact JSON when no item is text. A
//! result with `isError: true` is a [`ToolError`](crate::ToolError): the
//! model sees `Error: <its text>`.
//!
//! # Refresh points
//!
//! `notifications/tools/list_changed` only marks the server's list stale.
//! It is listed again, and its tools swapped in the agent (removed and
//! re-added, through [`ExtensionContext::remove_tool`](crate::ExtensionContext::remove_tool)),
//! at two points: at the start of each turn (the registry's
//! [`Extension::on_user_message`](crate::Extension::on_user_message), before
//! the first request), and right after any call to one of that server's
//! tools returns (before the next request of the same turn). A restart
//! after a crash marks the list stale too.
//!
//! # Events
//!
//! Through [`Event::Domain`](crate::Event::Domain): `mcp.progress`
//! (transient; `server`, `tool`, `progress`, `total`, `message`) for
//! `notifications/progress` of a running call (every `tools/call` sends a
//! `progressToken`); `mcp.log` (`server`, `level`, `logger`, `data`) for
//! `notifications/message`, which is also logged; `mcp.tools_changed` and
//! `mcp.tools_refreshed` (`server`, `tools`).
//!
//! # Timeouts, cancellation and faults
//!
//! | what happens | what the caller gets |
//! |---|---|
//! | no answer within [`Server::timeout`] (default 60 s) | `Error: ... did not answer within 60 s`; the server gets `notifications/cancelled` |
//! | the run's [`Cancellable`](crate::Cancellable) fires during a call | returns at once (a channel wait, not a read); `notifications/cancelled` with the id and a reason is sent |
//! | the stdio server exits mid-call | `Error: ... stopped during the call`; the next call restarts it ([`Server::restarts`], default once), then `Error: ... is down` |
//! | a non-JSON line on stdout (a banner), a line over [`Server::max_message_bytes`] (default 4 MiB) | logged at `warn` and skipped |
//! | an unknown notification | logged at `debug` and ignored |
//!
//! In every case the agent's history stays valid: each tool call gets its
//! result.
//!
//! # Shutdown
//!
//! A stdio server runs in its own process group. Closing it closes its
//! stdin, waits up to [`Server::shutdown_grace`] (default 2 s), then sends
//! `SIGTERM` to the group, and `SIGKILL` one second later if any member
//! is left, so a wrapper such as `npx` leaves no child behind. The signals
//! are sent with the system's `kill` command. On Windows there are no
//! process groups: the server process is killed and its own children may
//! survive (best effort). An HTTP session is ended with `DELETE`.
//!
//! # Log levels
//!
//! Target `pikuri::mcp`. `info`: connected, session re-initialized, list
//! refreshed. `warn`: skipped lines and tools, a restart, an optional server
//! left out. `debug`: the server's stderr, ignored notifications, refused
//! server requests, abandoned requests. The server's own
//! `notifications/message` at its level.

mod client;
mod conn;
mod content;
mod http;
mod jsonrpc;
mod registry;
mod server;
mod stdio;

pub use client::{Client, ToolInfo};
pub use registry::Registry;
pub use server::Server;
