//! A connection's life: start the server (stdio) or prepare to reach it
//! (HTTP), find its protocol generation (`server/discover`, else
//! `initialize`), and start it again when a stdio server died, within the
//! restart budget. What the connection is then used for is the parent's.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crossbeam_channel::{bounded, select};
use parking_lot::Mutex;

use super::{Client, Inner, State, listen_filter, rpc_error};
use crate::control::Cancellable;
use crate::mcp::conn::{Conn, DISCOVER_FAILED, INIT_FAILED, InitInfo, Observer};
use crate::mcp::http::Http;
use crate::mcp::input::Asker;
use crate::mcp::jsonrpc::{HTTP_VERSIONS, STDIO_VERSIONS};
use crate::mcp::server::{Server, Transport};
use crate::mcp::stdio;
use crate::util::Secrets;
use crate::{Error, Result};

impl Client {
    /// `connect`, with an observer of the server's notices and `secrets`
    /// to redact besides the server's own.
    pub(in crate::mcp) fn connect_with(
        name: &str,
        server: &Server,
        observer: Option<Observer>,
        secrets: &Secrets,
    ) -> Result<Client> {
        let name: Arc<str> = Arc::from(name);
        let secrets = secrets.with(server.credentials());
        let conn = start(&name, server, observer.clone(), &secrets)?;
        let info = handshake(&name, server, &conn)?;
        log::info!(
            target: "pikuri::mcp",
            "[{name}] connected: {} {} (protocol {})",
            info.name,
            info.version.as_deref().unwrap_or(""),
            info.protocol_version
        );
        Ok(Client {
            inner: Arc::new(Inner {
                name,
                server: server.clone(),
                observer,
                secrets,
                state: Mutex::new(State {
                    conn,
                    info,
                    restarts_left: server.restarts,
                    closed: false,
                    starting: None,
                }),
                restarting: Mutex::new(()),
                cache: Mutex::new(HashMap::new()),
                tools_fresh_until: Mutex::new(None),
            }),
        })
    }

    /// [`conn`](Client::conn), whose wait for a restart a cancel of
    /// `cancel` ends (the error then reads `cancelled`): a restart's
    /// handshake may take up to the startup timeout, so it runs on a
    /// thread of its own, which finishes it (or fails) whoever waits, and
    /// the next call finds the result. A live connection is returned at
    /// once, with no thread.
    pub(in crate::mcp) fn conn_unless_cancelled(
        &self,
        cancel: Option<&Cancellable>,
    ) -> std::result::Result<Arc<Conn>, Box<dyn std::error::Error + Send + Sync>> {
        let Some(cancel) = cancel else {
            return self.conn();
        };
        {
            let st = self.inner.state.lock();
            if st.closed || st.conn.closed_reason().is_none() {
                drop(st);
                return self.conn();
            }
        }
        if cancel.is_cancelled() {
            return Err("cancelled".into());
        }
        let (tx, rx) = bounded(1);
        let client = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("mcp-{}-restart", self.inner.name))
            .spawn(move || {
                let _ = tx.send(client.conn());
            });
        if spawned.is_err() {
            return self.conn();
        }
        let (woke, cancelled) = bounded::<()>(1);
        // Runs on the cancelling thread: only wakes the waiter up.
        let _hook = cancel.on_cancel(move || {
            let _ = woke.try_send(());
        });
        select! {
            recv(rx) -> conn => conn.unwrap_or_else(|_| Err("the restart ended without a result".into())),
            recv(cancelled) -> _ => Err("cancelled".into()),
        }
    }

    /// The live connection, restarting a dead stdio server within budget.
    /// The state lock is never held across the restart, so `close` and the
    /// accessors never wait for a handshake.
    pub(super) fn conn(
        &self,
    ) -> std::result::Result<Arc<Conn>, Box<dyn std::error::Error + Send + Sync>> {
        let name = &self.inner.name;
        let closed = || format!("MCP server `{name}` is closed").into();
        {
            let st = self.inner.state.lock();
            if st.closed {
                return Err(closed());
            }
            if st.conn.closed_reason().is_none() {
                return Ok(Arc::clone(&st.conn));
            }
        }
        // One restart at a time: whoever waited here finds it done.
        let _restart = self.inner.restarting.lock();
        let (old, why) = {
            let mut st = self.inner.state.lock();
            if st.closed {
                return Err(closed());
            }
            let Some(why) = st.conn.closed_reason() else {
                return Ok(Arc::clone(&st.conn));
            };
            if st.restarts_left == 0 {
                return Err(format!("MCP server `{name}` is down ({why})").into());
            }
            st.restarts_left -= 1;
            (Arc::clone(&st.conn), why)
        };
        log::warn!(target: "pikuri::mcp", "[{name}] restarting after: {why}");
        old.close();
        let failed = |e: &dyn std::fmt::Display| -> Box<dyn std::error::Error + Send + Sync> {
            format!("MCP server `{name}` is down ({why}); restarting failed: {e}").into()
        };
        let server = &self.inner.server;
        let conn = start(
            name,
            server,
            self.inner.observer.clone(),
            &self.inner.secrets,
        )
        .map_err(|e| failed(&e))?;
        {
            let mut st = self.inner.state.lock();
            if st.closed {
                drop(st);
                conn.close();
                return Err(closed());
            }
            st.starting = Some(Arc::clone(&conn));
        }
        let shaken = handshake(name, server, &conn);
        let mut st = self.inner.state.lock();
        st.starting = None;
        if st.closed {
            drop(st);
            conn.close();
            return Err(closed());
        }
        let info = shaken.map_err(|e| failed(&e))?;
        conn.tools_dirty.store(true, Ordering::SeqCst);
        st.conn = Arc::clone(&conn);
        st.info = info;
        Ok(conn)
    }
}

/// Start (stdio) or prepare to reach (HTTP) the server.
fn start(
    name: &Arc<str>,
    server: &Server,
    observer: Option<Observer>,
    secrets: &Secrets,
) -> Result<Arc<Conn>> {
    let asker = server.input.clone().map(|provider| Asker {
        provider,
        timeout: server.input_timeout,
    });
    let conn = Conn::new(Arc::clone(name), observer, secrets.clone(), asker);
    match &server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let spec = stdio::Spawn {
                command,
                args,
                env,
                cwd: cwd.as_ref(),
                max_message: server.max_message,
                grace: server.shutdown_grace,
            };
            stdio::spawn(&conn, &spec).map_err(|e| Error::Transport {
                url: None,
                source: format!(
                    "MCP server `{name}`: could not start {}: {e}",
                    command.display()
                )
                .into(),
            })?;
        }
        Transport::Http { url, bearer } => {
            crate::protocol::check_http_url(&format!("MCP server `{name}`: the URL"), url)
                .map_err(Error::InvalidInput)?;
            let slowest = server.timeout.max(server.startup_timeout);
            let mut http = Http::new(url, bearer.as_deref(), slowest, server.max_message);
            http.set_oauth(server.oauth.clone());
            conn.set_wire(Box::new(Arc::new(http)));
        }
    }
    Ok(conn)
}

/// Find out which generation the server speaks: the `server/discover`
/// probe, then, for a 2025 server, the `initialize` handshake; closes the
/// connection on failure.
fn handshake(name: &str, server: &Server, conn: &Arc<Conn>) -> Result<InitInfo> {
    let versions = if server.is_stdio() {
        STDIO_VERSIONS
    } else {
        HTTP_VERSIONS
    };
    let probe = server.startup_timeout.min(server.probe_timeout);
    let (shaken, what) = if server.is_stdio() {
        // A pipe keeps the order: see `discover_in_order`.
        conn.discover_in_order(probe, server.startup_timeout, versions)
    } else {
        match conn.discover(probe) {
            Ok(Some(info)) => (Ok(info), ""),
            Ok(None) => (
                conn.initialize(server.startup_timeout, versions),
                INIT_FAILED,
            ),
            Err(e) => (Err(e), DISCOVER_FAILED),
        }
    };
    match shaken {
        Ok(info) => {
            if conn.is_modern()
                && let Some(filter) = listen_filter(&info.capabilities)
            {
                conn.listen(&filter);
            }
            Ok(info)
        }
        Err(e) => {
            conn.close();
            Err(rpc_error(name, server, e, what))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::mcp::jsonrpc::MODERN_VERSION;

    /// The misbehaving fake (`tests/fixtures/mcp_fake.py`) with `args`, or
    /// `None` without python3.
    fn fake(args: &[&str]) -> Option<Server> {
        let ok = std::process::Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("skipped: python3 not found");
            return None;
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp_fake.py");
        let mut line = vec![script];
        line.extend(args);
        Some(Server::stdio("python3", line))
    }

    /// A server that reads its stdin only after the probe's bound (a first
    /// `npx -y`/`uvx` run) connects, in its own generation: the probe is
    /// not abandoned, so a 2026 server does not refuse the `initialize`
    /// queued behind it, and a 2025 one is still initialized.
    #[test]
    fn a_server_slower_than_the_probe_bound_connects_on_either_generation() {
        for modern in [true, false] {
            let mut args = vec!["--slow-start", "0.5"];
            if modern {
                args.push("--modern");
            }
            let Some(mut server) = fake(&args) else {
                return;
            };
            server.probe_timeout = Duration::from_millis(50);
            let client = Client::connect_with("slow", &server, None, &Secrets::default())
                .unwrap_or_else(|e| panic!("modern={modern}: {e}"));
            assert_eq!(client.protocol_version() == MODERN_VERSION, modern);
            let tools = client.list_tools().unwrap();
            assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
            client.close();
        }
    }

    /// A 2025 server that never answers an unknown method is initialized
    /// once the probe's bound has passed (the probe is left unanswered).
    #[test]
    fn a_server_that_ignores_the_probe_is_initialized_after_its_bound() {
        let Some(mut server) = fake(&["--ignore-unknown"]) else {
            return;
        };
        server.probe_timeout = Duration::from_millis(50);
        let client = Client::connect_with("deaf", &server, None, &Secrets::default()).unwrap();
        assert_ne!(client.protocol_version(), MODERN_VERSION);
        client.close();
    }
}
