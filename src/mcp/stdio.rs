//! The stdio transport: a child process in its own process group, one
//! reader thread parsing newline-delimited JSON from its stdout, one thread
//! forwarding its stderr to the log, and an orderly shutdown.
//!
//! # Shutdown
//!
//! As the spec's lifecycle asks: close the child's stdin, wait up to the
//! grace period for it to exit, then `SIGTERM` its process group, wait up
//! to one more second, then `SIGKILL` the group. The group is signalled even
//! when the leader exited on its own, so a wrapper (`npx`, `uvx`, a shell)
//! cannot leave its real server behind. Signals are sent with the system's
//! `kill` command (the crate has no libc binding and forbids `unsafe`).
//!
//! On Windows there are no process groups: the child is killed with
//! [`Child::kill`] and its own children may survive (best effort).

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio as Pipe};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use super::conn::{Conn, Wire};
use super::jsonrpc::RpcError;
use crate::util::excerpt;

pub(super) struct Stdio {
    stdin: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
    grace: Duration,
}

pub(super) struct Spawn<'a> {
    pub(super) command: &'a OsString,
    pub(super) args: &'a [OsString],
    pub(super) env: &'a [(OsString, OsString)],
    pub(super) cwd: Option<&'a PathBuf>,
    pub(super) max_message: usize,
    pub(super) grace: Duration,
}

/// Start the process and its reader threads; the wire is set on `conn`.
pub(super) fn spawn(conn: &Arc<Conn>, spec: &Spawn<'_>) -> io::Result<()> {
    let mut cmd = Command::new(spec.command);
    cmd.args(spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Pipe::piped())
        .stdout(Pipe::piped())
        .stderr(Pipe::piped());
    if let Some(dir) = spec.cwd {
        cmd.current_dir(dir);
    }
    // Its own process group, so shutdown can reach its children too.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn()?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    log::debug!(target: "pikuri::mcp", "[{}] started pid {}", conn.name, child.id());
    conn.set_wire(Box::new(Stdio {
        stdin: Mutex::new(stdin),
        child: Mutex::new(child),
        grace: spec.grace,
    }));

    let reader_conn = Arc::clone(conn);
    let max = spec.max_message;
    thread::Builder::new()
        .name(format!("mcp-{}-out", conn.name))
        .spawn(move || read_stdout(&reader_conn, stdout, max))?;
    let name = Arc::clone(&conn.name);
    thread::Builder::new()
        .name(format!("mcp-{}-err", conn.name))
        .spawn(move || read_stderr(&name, stderr, max))?;
    Ok(())
}

fn read_stdout(conn: &Arc<Conn>, stdout: impl Read, max: usize) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let reason = loop {
        match read_line_bounded(&mut reader, &mut line, max) {
            Ok(None) => break "the server closed its stdout".to_string(),
            Err(e) => break format!("reading the server's stdout failed: {e}"),
            Ok(Some(false)) => {
                log::warn!(
                    target: "pikuri::mcp",
                    "[{}] skipped a line over {max} bytes",
                    conn.name
                );
            }
            Ok(Some(true)) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(text) {
                    Ok(Value::Array(batch)) => {
                        for msg in batch {
                            conn.dispatch(msg);
                        }
                    }
                    Ok(msg) => {
                        conn.dispatch(msg);
                    }
                    Err(_) => log::warn!(
                        target: "pikuri::mcp",
                        "[{}] skipped a stdout line that is not JSON: {}",
                        conn.name,
                        excerpt(text, 200)
                    ),
                }
            }
        }
    };
    log::debug!(target: "pikuri::mcp", "[{}] {reason}", conn.name);
    conn.fail_all(&reason);
}

fn read_stderr(name: &str, stderr: impl Read, max: usize) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    while let Ok(Some(complete)) = read_line_bounded(&mut reader, &mut line, max) {
        if complete {
            let text = String::from_utf8_lossy(&line);
            log::debug!(target: "pikuri::mcp", "[{name}] stderr: {}", text.trim_end());
        }
    }
}

/// Read one `\n`-terminated line into `buf` (without the `\n`). `Ok(None)`
/// at end of input; `Ok(Some(false))` when the line was longer than `max`
/// bytes (its bytes are discarded, never buffered); `Ok(Some(true))` else.
pub(super) fn read_line_bounded(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Option<bool>> {
    buf.clear();
    let mut any = false;
    let mut fits = true;
    loop {
        let avail = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(any.then_some(fits));
        }
        any = true;
        let (chunk, used, done) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (&avail[..i], i + 1, true),
            None => (avail, avail.len(), false),
        };
        if fits {
            if buf.len() + chunk.len() > max {
                fits = false;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        r.consume(used);
        if done {
            return Ok(Some(fits));
        }
    }
}

impl Wire for Stdio {
    fn send(&self, _conn: &Arc<Conn>, msg: Value, _id: Option<u64>) -> Result<(), RpcError> {
        // A write fails at once, here, so the caller fails the request.
        Stdio::send(self, &msg)
    }
    fn close(&self, name: &str) {
        self.shutdown(name);
    }
}

impl Stdio {
    pub(super) fn send(&self, msg: &Value) -> Result<(), RpcError> {
        let mut line = serde_json::to_vec(msg).expect("a Value always serializes");
        line.push(b'\n');
        let mut stdin = self.stdin.lock();
        let pipe = stdin
            .as_mut()
            .ok_or_else(|| RpcError::Closed("stdin closed".into()))?;
        pipe.write_all(&line)
            .and_then(|()| pipe.flush())
            .map_err(|e| RpcError::Closed(format!("writing to the server failed: {e}")))
    }

    /// The orderly shutdown of the module docs. Idempotent.
    pub(super) fn shutdown(&self, name: &str) {
        drop(self.stdin.lock().take());
        let mut child = self.child.lock();
        let pid = child.id();
        let exited = wait_for(&mut child, self.grace);
        #[cfg(unix)]
        {
            if !exited {
                log::debug!(target: "pikuri::mcp", "[{name}] did not exit after stdin closed; SIGTERM");
            }
            if group_alive(pid) {
                signal_group(pid, "TERM");
                let deadline = Instant::now() + Duration::from_secs(1);
                while group_alive(pid) && Instant::now() < deadline {
                    let _ = child.try_wait();
                    thread::sleep(Duration::from_millis(10));
                }
                if group_alive(pid) {
                    log::debug!(target: "pikuri::mcp", "[{name}] still running after SIGTERM; SIGKILL");
                    signal_group(pid, "KILL");
                    // SIGKILL is delivered asynchronously: wait until the
                    // group is gone, so `close` returning means no process.
                    let deadline = Instant::now() + Duration::from_secs(1);
                    while group_alive(pid) && Instant::now() < deadline {
                        let _ = child.try_wait();
                        thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
        #[cfg(not(unix))]
        let _ = (exited, name, pid);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Wait up to `grace` for the child to exit.
fn wait_for(child: &mut Child, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(unix)]
fn signal_group(pgid: u32, signal: &str) {
    let status = Command::new("kill")
        .args(["-s", signal, "--", &format!("-{pgid}")])
        .stdin(Pipe::null())
        .stdout(Pipe::null())
        .stderr(Pipe::null())
        .status();
    if let Err(e) = status {
        log::warn!(target: "pikuri::mcp", "could not run `kill` to signal process group {pgid}: {e}");
    }
}

/// Whether any live (non-zombie) process is in group `pgid`. Linux reads
/// /proc; elsewhere it cannot tell and answers `true` (so the group is
/// always signalled).
#[cfg(unix)]
pub(super) fn group_alive(pgid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp …: comm may hold spaces and parens.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<u32>().ok());
        pgrp == Some(pgid) && state != Some("Z")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_lines_skip_the_long_ones_without_buffering_them() {
        let input = b"short\nthis line is far too long\n\nlast";
        let mut r = BufReader::with_capacity(4, &input[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line_bounded(&mut r, &mut buf, 10).unwrap(), Some(true));
        assert_eq!(buf, b"short");
        assert_eq!(
            read_line_bounded(&mut r, &mut buf, 10).unwrap(),
            Some(false)
        );
        assert!(buf.is_empty());
        assert_eq!(read_line_bounded(&mut r, &mut buf, 10).unwrap(), Some(true));
        assert!(buf.is_empty());
        assert_eq!(read_line_bounded(&mut r, &mut buf, 10).unwrap(), Some(true));
        assert_eq!(buf, b"last");
        assert_eq!(read_line_bounded(&mut r, &mut buf, 10).unwrap(), None);
    }
}
