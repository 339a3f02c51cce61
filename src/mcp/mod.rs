//! Model Context Protocol: tools of MCP servers as agent tools; their
//! resources and prompts for the host; their questions to the user.
//!
//! Needs the `mcp` feature (on by default).
//!
//! Declare servers in a [`Registry`] and add it as an extension. At
//! [`build`](crate::Configurator::build) every server is started (stdio) or
//! reached (Streamable HTTP), its protocol generation is found (see
//! [Protocol](#protocol)), its tools are
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
//!     .server("remote", Server::http("http://127.0.0.1:3001/mcp").with_bearer_token("…"));
//! let mut agent = Agent::builder(pikuri::ChatTransport::from_env()?)
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
//! JSON-RPC 2.0, in either generation; [`Client::protocol_version`] says
//! which one a server speaks.
//!
//! **2026-07-28.** The client first sends `server/discover` with the
//! version, its name and its capabilities in `_meta`
//! (`io.modelcontextprotocol/protocolVersion`, `.../clientInfo`,
//! `.../clientCapabilities`). A server answering with `supportedVersions`
//! that lists `2026-07-28` is spoken to in that revision: no handshake, no
//! session, the same `_meta` merged into every request (beside a
//! `progressToken`), and over HTTP `MCP-Protocol-Version`, `Mcp-Method`
//! and, for `tools/call`, `resources/read` and `prompts/get`, `Mcp-Name`
//! headers (base64 in the `=?base64?…?=` form when not plain ASCII).
//!
//! **Fallback to 2025.** Any other answer to the probe (a JSON-RPC error
//! such as `-32601`, no answer within 10 s or the startup timeout if
//! shorter, an HTTP 400, 404 or 405 whose body is not one of the modern
//! errors `-32020`..`-32022`, an empty result, or a `supportedVersions`
//! listing only 2025 revisions) makes it a 2025 server: the `initialize`
//! handshake runs as the 2025-06-18 revision describes. The client offers
//! `2025-06-18` and accepts `2025-03-26` (or, over stdio, `2024-11-05`).
//! Over HTTP, `Mcp-Session-Id` is kept and sent, `MCP-Protocol-Version`
//! follows the handshake, and a 404 to a request with a session id (an
//! expired session) runs the handshake again once and retries.
//!
//! **Failures of the probe** are errors of the connect, not fallbacks: a
//! modern error (`-32020`..`-32022`: the server is modern but refuses this
//! client's version), a result that is not an object or whose
//! `supportedVersions` is not a list of strings ("not a discover result"),
//! or one listing only versions this client does not speak.
//!
//! Both generations give the same tools, events, timeouts, cancellation
//! and restarts (a restart probes again). The server's `ping` gets an
//! empty result; `sampling/createMessage`, `roots/list` and any other
//! request it sends get `-32601` at once, as does `elicitation/create`
//! without an [`InputProvider`]. Unknown notifications are logged at
//! `debug` and ignored.
//!
//! # Resources and prompts
//!
//! [`Client::list_resources`], [`Client::list_resource_templates`] and
//! [`Client::list_prompts`] follow every page; [`Client::read_resource`]
//! and [`Client::get_prompt`] (arguments as name/value pairs;
//! [`Prompt::text`] is a ready next user message) ask one. A list result
//! is kept for the `ttlMs` the server gives (none, or 0: asked again each
//! time) unless the server announces a change of that list. A result over
//! [`Server::with_max_message_bytes`] (say a 10 MB resource) fails the request
//! at once with an error naming the bound, over stdio too when the
//! answer's id is near the start of its line (as JSON-RPC libraries
//! write it); else at the timeout. [`Server::with_resource_tool`] (off by
//! default) offers the model a `<server>__read_resource` tool whose
//! description lists up to 50 resources.
//!
//! # Servers that ask the user
//!
//! A 2026 server answers a `tools/call`, `resources/read` or `prompts/get`
//! with `resultType: "input_required"` and `elicitation/create` requests;
//! a 2025 server sends `elicitation/create` during the call. Both go to
//! the [`InputProvider`] of the server ([`Server::with_input_provider`], or
//! [`Registry::input_provider`]); its answer is validated against the
//! schema the server sent, and the 2026 request is sent again with
//! `inputResponses` and the server's `requestState` (echoed unread), up to
//! 8 rounds, then `Error: ... still asked for input after 8 rounds`. A
//! request whose schema is not a flat object of simple fields (or is over
//! 64 KiB, or has over 64 fields), or of `url` mode, is declined without
//! asking; so is every request when no provider is set (a 2025 server gets
//! `-32601`, and no elicitation capability is declared). A 2026
//! `sampling/createMessage` or `roots/list` input request (deprecated, and
//! never declared) fails the call with an error naming it. The wait for
//! the provider ends at once on a cancel of the run (the call returns
//! "cancelled"), or after [`Server::with_input_timeout`] (the server is
//! answered `cancel`). `TerminalInput` (feature `terminal`) asks at a
//! terminal, sanitizing everything the server wrote.
//!
//! # Not supported (2026-07-28)
//!
//! Completion (`completion/complete`), logging levels per request,
//! `resourceSubscriptions` (updates of one resource), the `url` mode of
//! elicitation, sampling and roots (deprecated), `Mcp-Param-*` headers
//! for tool parameters, `traceparent` in `_meta` of requests other than
//! `tools/call` (see [`ToolContext::traceparent`](crate::ToolContext::traceparent)), the deprecated HTTP+SSE
//! transport, `UnsupportedProtocolVersionError` retry with another version
//! (this client speaks one modern version), `cacheScope`, caching of
//! `resources/read`, and closing the response stream to cancel over HTTP
//! (the client sends `notifications/cancelled` as over stdio and stops
//! waiting; the worker hangs up at the stream's next read, or at the read
//! timeout if the server is silent).
//!
//! # OAuth
//!
//! A Streamable HTTP server declared with [`Server::with_oauth`] that answers
//! `401` gets an OAuth 2.1 login: protected resource and authorization
//! server metadata discovery, dynamic client registration, the
//! authorization code with PKCE through the user's [`Browser`] and a
//! loopback redirect, the `state`, `iss` and audience checks, refresh, and
//! tokens kept in a [`TokenStore`] (a [`FileTokenStore`] readable by its
//! owner only is built in). See [`OAuth`] for the flow, its bounds and
//! errors (each an [`ErrorKind::Auth`](crate::ErrorKind::Auth) whose text
//! starts with `OAuth:`), and what is not supported.
//!
//! # Names
//!
//! Every provider accepts only tool names of 1 to 64 characters from
//! `[a-zA-Z0-9_-]` starting with a letter or `_` (see
//! [`Tool::name`](crate::Tool::name)); an MCP server may list any text.
//! A server's tool is offered under a name made by this rule, the same
//! in every run for the same server name and tool list:
//!
//! 1. `<server>__<tool>`, from the registry's name for the server and the
//!    server's name for the tool;
//! 2. every character outside `[a-zA-Z0-9_-]` (a `.`, a space, a control
//!    character, markup such as `<`, any non-ASCII character) becomes one
//!    `_`, and a `_` is put in front unless it starts with a letter or `_`;
//! 3. a result over 64 characters, or one already taken (by a host tool,
//!    another extension's, an earlier tool of this or another server, say
//!    `a.b` after `a_b`), is cut to 55 characters and ends in `_` and 8
//!    hex digits of the FNV-1a hash of step 1's text; should that be taken
//!    too, the hash of that text followed by `#1`, `#2`, … is used.
//!
//! Tools are named in the order the server lists them.
//! [`Registry::tool_names`] gives the names offered; a call of an offered
//! name reaches the server as a `tools/call` of the server's own name. A
//! tool whose `inputSchema`
//! [`Parameters::from_json_schema`](crate::tool::Parameters::from_json_schema)
//! rejects is logged at `warn` and left out.
//!
//! [`Server::with_sub_agent_only`] puts a server's tools in the sub-agent-only
//! pool; add the registry before [`SubAgents`](crate::subagent::SubAgents), whose
//! personas are checked against the tools present at its `bind`.
//!
//! # Deferred tools
//!
//! With the `tool-search` feature, a server's tools can join the agent's
//! deferred pool (see [`tool_search`](crate::tool_search)) instead of the
//! tools sent with every request: [`Server::with_deferred`] decides for
//! one server, [`Registry::defer_tools`] for every server that does not
//! say (off by default: MCP tools are ordinary tools unless asked). A
//! deferred tool is held back only while the deferred tools pass the
//! agent's [`ToolSearch`](crate::tool_search::ToolSearch) threshold (by
//! default, more than 30 of them), so a small server's tools are still
//! sent as they are; [`Agent::deferred_tools`](crate::Agent::deferred_tools)
//! lists them either way. A sub-agent-only server's tools are never
//! deferred. The names follow [Names](#names); one already taken in the
//! deferred pool is passed over the same way.
//!
//! At a [refresh](#refresh-points) a deferred server's tools are swapped
//! as deferred tools again: a tool the server still lists stays deferred,
//! a tool it no longer lists leaves the deferred pool (found or not), and
//! a new one joins it.
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
//! A 2025 server sends it when it likes; a 2026 server that declares
//! `listChanged` for tools, resources or prompts gets a
//! `subscriptions/listen` request at connect, whose stream carries it
//! (one that ended is opened again at the next refresh point, and the
//! list counts as changed); a 2026 server without one has its tool list
//! listed again once the list's `ttlMs` has passed.
//! It is listed again, and its tools swapped in the agent (removed and
//! re-added, through [`ExtensionContext::remove_tool`](crate::extension::ExtensionContext::remove_tool)),
//! at two points: at the start of each turn (the registry's
//! [`Extension::on_user_message`](crate::extension::Extension::on_user_message), before
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
//! `mcp.tools_refreshed` (`server`, `tools`); `mcp.list_changed`
//! (`server`, `list`: `resources` or `prompts`).
//!
//! # Timeouts, cancellation and faults
//!
//! | what happens | what the caller gets |
//! |---|---|
//! | no answer within [`Server::with_request_timeout`] (default 60 s), counted from the moment the request is made, its writing included | `Error: ... did not answer within 60 s`; the server gets `notifications/cancelled` |
//! | the run's [`Cancellable`](crate::Cancellable) fires during a call | returns at once (a channel wait, never a write or a read); `notifications/cancelled` with the id and a reason is sent; a call waiting for a dead server's restart returns at once too, and the restart goes on on its own thread |
//! | a stdio server stops reading its stdin (a large call cannot be written) | the timeout or a cancel ends the call all the same; only a writer thread waits on the pipe, and [`Agent::close`](crate::Agent::close) ends it |
//! | notifications before the answer (100,000 of them, or a listener slow to take the events) | the answer is not delayed and the timeout not extended: notices wait in a queue of 1,024, further ones are dropped and their count logged at `warn` |
//! | the stdio server exits, mid-call or at start | `Error: ... stopped during the call` (at start: the connect fails), with the last lines of its stderr (at most 20 lines, 2 KiB, escaped, credentials redacted); the next call restarts it ([`Server::with_restarts`], default once), then `Error: ... is down` |
//! | a non-JSON line on stdout (a banner), a line over [`Server::with_max_message_bytes`] (default 4 MiB) | logged at `warn` and skipped |
//! | an unknown notification | logged at `debug` and ignored |
//!
//! In every case the agent's history stays valid: each tool call gets its
//! result.
//!
//! # Secrets
//!
//! A server may echo what it was given: a bearer token in an error body, an
//! API key inherited through its environment in a result. Every credential
//! the crate holds for the agent (its [`ChatTransport`](crate::ChatTransport)'s
//! API key and its fallbacks', every server's bearer token, the password
//! and secret-looking query values of its URL, and the secret-looking
//! environment values of [`Server::with_env`]) is replaced by
//! `<redacted>` in everything a server sends, before a model, an event, a
//! log line or an error sees it: results, errors, log notifications,
//! `instructions`, tool descriptions and schemas, stderr. A secret is
//! caught verbatim only (not base64- or URL-encoded). HTTP media types are
//! compared as RFC 9110 says (`Text/Event-Stream; charset=UTF-8` is an
//! event stream), through the same parser as the chat client.
//!
//! # Shutdown
//!
//! A stdio server runs in its own process group. Closing it closes its
//! stdin, waits up to [`Server::with_shutdown_grace`] (default 2 s), then sends
//! `SIGTERM` to the group, and `SIGKILL` one second later if any member
//! is left, so a wrapper such as `npx` leaves no child behind. The signals
//! are sent with the system's `kill` command. A descendant that left the
//! group (`setsid`) is found on Linux through `/proc` and signalled too,
//! if its parent still runs when the shutdown begins (a double-forked
//! daemon, adopted by init, is not found); elsewhere it survives. On
//! Windows there are no process groups: the server process is killed and
//! its own children may survive (best effort). An HTTP session is ended
//! with `DELETE`. Closing returns within the grace period plus about two
//! seconds, whatever the server does.
//!
//! # Log levels
//!
//! Target `pikuri::mcp`. `info`: connected, session re-initialized, list
//! refreshed, OAuth authorized, a refused refresh. `warn`: skipped lines
//! and tools, a restart, an optional server left out, notifications
//! dropped in a flood, a failed OAuth login, a failing token store.
//! `debug`: the server's
//! stderr, ignored notifications, refused
//! server requests, abandoned requests. The server's own
//! `notifications/message` at its level.

mod catalog;
mod client;
mod conn;
mod content;
mod http;
mod input;
mod jsonrpc;
mod oauth;
mod registry;
mod server;
mod stdio;
#[cfg(feature = "terminal")]
mod terminal;

pub use catalog::{
    Prompt, PromptArgument, PromptInfo, ResourceContent, ResourceInfo, ResourceTemplate,
};
pub use client::{Client, ToolInfo};
pub use input::{InputAnswer, InputProvider, InputRequest};
pub use oauth::{
    Browser, FileTokenStore, MemoryTokenStore, OAuth, SystemBrowser, TokenStore, Tokens,
};
pub use registry::Registry;
pub use server::Server;
#[cfg(feature = "terminal")]
pub use terminal::TerminalInput;
