//! The stdio transport: a child process in its own process group, one
//! writer thread feeding its stdin from a bounded queue, one reader thread
//! parsing newline-delimited JSON from its stdout, one thread forwarding its
//! stderr to the log (and keeping its last lines), and an orderly shutdown.
//!
//! # Writing
//!
//! Only the writer thread writes to the child's stdin, so a server that
//! stops reading blocks that thread and nothing else: a request waits for
//! room in the queue ([`QUEUE`] messages) no longer than its deadline or
//! a cancel allows (see [`Bound`]), and a message that was queued is written
//! whole or not at all (a cancel never cuts a line in half). A message
//! without a waiting request (a cancellation, an answer to a server
//! request) is dropped and logged when the queue is full.
//!
//! # A server that dies
//!
//! When its stdout ends, every waiting request fails with the reason and
//! the last lines the server wrote to its stderr (at most [`TAIL_LINES`]
//! lines and [`TAIL_BYTES`] bytes, escaped as the
//! [sanitizer](crate::listeners::sanitize) does, credentials redacted):
//! `connection closed: the server closed its stdout; its stderr ended
//! with: Error: Cannot find module ...`.
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
//! A descendant that left the group (`setsid`, a daemon) is not reached by
//! the group's signal. On Linux the descendants of the server are read from
//! `/proc` (each process's parent) before its stdin is closed, and each
//! one still running, the same process (its start time unchanged), gets
//! the same signals as the group. What this cannot find: a descendant whose
//! parent exited before the shutdown began (a double-forked daemon is
//! adopted by init and no longer traceable), and, elsewhere than Linux,
//! any descendant outside the group.
//!
//! On Windows there are no process groups: the child is killed with
//! [`Child::kill`] and its own children may survive (best effort).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio as Pipe};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use parking_lot::Mutex;
use serde_json::Value;

use super::conn::{Bound, Conn, Wire};
use super::jsonrpc::RpcError;
use crate::sanitize::sanitize;
use crate::util::{Secrets, excerpt};

/// Messages that may wait for the writer thread.
pub(super) const QUEUE: usize = 16;
/// Most lines of stderr an error carries.
pub(super) const TAIL_LINES: usize = 20;
/// Most bytes of stderr an error carries.
pub(super) const TAIL_BYTES: usize = 2048;

pub(super) struct Stdio {
    /// The writer's queue; `None` once closed (the writer then finishes
    /// what is queued and closes stdin).
    queue: Mutex<Option<Sender<Vec<u8>>>>,
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

/// The last lines of the server's stderr, and whether it ended.
#[derive(Default)]
struct Tail {
    lines: VecDeque<String>,
}

impl Tail {
    fn push(&mut self, line: String) {
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// The lines, at most [`TAIL_BYTES`] of their end; `None` if none.
    fn text(&self) -> Option<String> {
        let all = self
            .lines
            .iter()
            .map(String::as_str)
            .filter(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        if all.is_empty() {
            return None;
        }
        if all.len() <= TAIL_BYTES {
            return Some(all);
        }
        let mut start = all.len() - TAIL_BYTES;
        while !all.is_char_boundary(start) {
            start += 1;
        }
        Some(format!("…{}", &all[start..]))
    }
}

/// Start the process and its threads; the wire is set on `conn`.
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
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    log::debug!(target: "pikuri::mcp", "[{}] started pid {}", conn.name, child.id());
    let (tx, rx) = bounded::<Vec<u8>>(QUEUE);
    let wire = Stdio {
        queue: Mutex::new(Some(tx)),
        child: Mutex::new(child),
        grace: spec.grace,
    };
    let started = (|| {
        let name = Arc::clone(&conn.name);
        thread::Builder::new()
            .name(format!("mcp-{}-in", conn.name))
            .spawn(move || write_stdin(&name, stdin, &rx))?;
        let tail = Arc::new(Mutex::new(Tail::default()));
        // Dropped by the stderr thread when stderr ends.
        let (err_done_tx, err_done_rx) = bounded::<()>(0);
        let (name, secrets) = (Arc::clone(&conn.name), conn.secrets.clone());
        let err_tail = Arc::clone(&tail);
        let max = spec.max_message;
        thread::Builder::new()
            .name(format!("mcp-{}-err", conn.name))
            .spawn(move || {
                read_stderr(&name, &secrets, stderr, max, &err_tail);
                drop(err_done_tx);
            })?;
        let reader_conn = Arc::downgrade(conn);
        let reader_name = Arc::clone(&conn.name);
        let reader_secrets = conn.secrets.clone();
        thread::Builder::new()
            .name(format!("mcp-{}-out", conn.name))
            .spawn(move || {
                let reason = read_stdout(&reader_conn, &reader_name, &reader_secrets, stdout, max);
                // The server's own words on why: its stderr usually ends a
                // moment after its stdout.
                let _ = err_done_rx.recv_timeout(Duration::from_millis(500));
                let reason = match tail.lock().text() {
                    Some(t) => format!("{reason}; its stderr ended with:\n{t}"),
                    None => reason,
                };
                log::debug!(target: "pikuri::mcp", "[{reader_name}] {reason}");
                if let Some(conn) = reader_conn.upgrade() {
                    conn.fail_all(&reason);
                }
            })?;
        Ok::<(), io::Error>(())
    })();
    conn.set_wire(Box::new(wire));
    if let Err(e) = started {
        // Without its threads the server cannot be used: stop it.
        conn.close();
        return Err(e);
    }
    Ok(())
}

/// The writer thread: write each queued message whole; close stdin when
/// the queue is closed and empty, or stop at the first failed write.
fn write_stdin(name: &str, mut stdin: ChildStdin, queue: &Receiver<Vec<u8>>) {
    for line in queue {
        if let Err(e) = stdin.write_all(&line).and_then(|()| stdin.flush()) {
            // The reader sees the server go and fails what waits, with its
            // stderr; a write error alone says less.
            log::debug!(target: "pikuri::mcp", "[{name}] writing to the server failed: {e}");
            return;
        }
    }
}

/// The reader thread's loop; returns why it ended. Holds the connection
/// weakly, so a dropped client is not kept alive by its reader.
fn read_stdout(
    conn: &Weak<Conn>,
    name: &str,
    secrets: &Secrets,
    stdout: impl Read,
    max: usize,
) -> String {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let mut head = Vec::new();
    loop {
        match read_line_head(&mut reader, &mut line, max, &mut head) {
            Ok(None) => return "the server closed its stdout".to_string(),
            Err(e) => return format!("reading the server's stdout failed: {e}"),
            Ok(Some(false)) => {
                log::warn!(target: "pikuri::mcp", "[{name}] skipped a line over {max} bytes");
                // An answer too large to take fails its request now rather
                // than at the timeout, when its id is near the start.
                if let (Some(id), Some(conn)) = (answer_id(&head), conn.upgrade()) {
                    conn.fail(
                        id,
                        RpcError::Transport(format!("the server's answer is over {max} bytes")),
                    );
                }
            }
            Ok(Some(true)) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                let Some(conn) = conn.upgrade() else {
                    return "the client was dropped".to_string();
                };
                let parsed = serde_json::from_str::<Value>(text).map(|mut msg| {
                    super::input::keep_field_order(text.as_bytes(), &mut msg);
                    msg
                });
                match parsed {
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
                        "[{name}] skipped a stdout line that is not JSON: {}",
                        sanitize(&excerpt(&secrets.redact(text), 200))
                    ),
                }
            }
        }
    }
}

/// The stderr thread: every line to the log at `debug`, the last ones kept
/// in `tail`, both sanitized and redacted.
fn read_stderr(name: &str, secrets: &Secrets, stderr: impl Read, max: usize, tail: &Mutex<Tail>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    while let Ok(Some(complete)) = read_line_bounded(&mut reader, &mut line, max) {
        let shown = if complete {
            let text = String::from_utf8_lossy(&line);
            let text = secrets.redact(text.trim_end());
            log::debug!(target: "pikuri::mcp", "[{name}] stderr: {text}");
            sanitize(&excerpt(&text, TAIL_BYTES)).into_owned()
        } else {
            format!("[a line over {max} bytes]")
        };
        tail.lock().push(shown);
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
    read_line_head(r, buf, max, &mut Vec::new())
}

/// How many bytes of a line over the bound are kept in `head`.
const HEAD: usize = 256;

/// [`read_line_bounded`], keeping the first bytes of a line over the bound
/// in `head` (emptied otherwise).
fn read_line_head(
    r: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
    head: &mut Vec<u8>,
) -> io::Result<Option<bool>> {
    buf.clear();
    head.clear();
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
                buf.extend_from_slice(&chunk[..chunk.len().min(HEAD)]);
                head.extend_from_slice(&buf[..buf.len().min(HEAD)]);
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

/// The id of a JSON-RPC response from the first bytes of its line: a
/// `"id":` followed by digits, before any `"result"` or `"error"` key (the
/// usual field order), else `None`.
fn answer_id(head: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(head);
    let at = text.find("\"id\"")?;
    let before = &text[..at];
    if before.contains("\"result\"")
        || before.contains("\"error\"")
        || before.contains("\"method\"")
    {
        return None;
    }
    let rest = text[at + 4..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

impl Wire for Stdio {
    fn send(
        &self,
        _conn: &Arc<Conn>,
        msg: Value,
        _id: Option<u64>,
        bound: Option<&Bound<'_>>,
    ) -> Result<(), RpcError> {
        let mut line = serde_json::to_vec(&msg).expect("a Value always serializes");
        line.push(b'\n');
        // Cloned, so no lock is held while waiting for room.
        let Some(queue) = self.queue.lock().clone() else {
            return Err(RpcError::Closed("stdin closed".into()));
        };
        match bound {
            Some(bound) => bound.send(&queue, line),
            None => queue.try_send(line).map_err(|e| match e {
                TrySendError::Full(_) => RpcError::Transport(format!(
                    "the server is not reading its stdin ({QUEUE} messages wait)"
                )),
                TrySendError::Disconnected(_) => RpcError::Closed("stdin closed".into()),
            }),
        }
    }
    fn close(&self, name: &str) {
        self.shutdown(name);
    }
}

impl Stdio {
    /// The orderly shutdown of the module docs. Idempotent.
    pub(super) fn shutdown(&self, name: &str) {
        let mut child = self.child.lock();
        let pid = child.id();
        // Before stdin closes: a server that exits then orphans them.
        #[cfg(unix)]
        let strays = descendants(pid);
        // The writer finishes what is queued, then closes stdin; a writer
        // stuck on a server that does not read ends when the signals below
        // end the server.
        drop(self.queue.lock().take());
        let exited = wait_for(&mut child, self.grace);
        #[cfg(unix)]
        {
            if !exited {
                log::debug!(target: "pikuri::mcp", "[{name}] did not exit after stdin closed; SIGTERM");
            }
            let alive = |child: &mut Child| {
                let _ = child.try_wait();
                group_alive(pid) || strays.iter().any(Stray::alive)
            };
            if alive(&mut child) {
                signal(pid, &strays, "TERM");
                let deadline = Instant::now() + Duration::from_secs(1);
                while alive(&mut child) && Instant::now() < deadline {
                    thread::sleep(Duration::from_millis(10));
                }
                if alive(&mut child) {
                    log::debug!(target: "pikuri::mcp", "[{name}] still running after SIGTERM; SIGKILL");
                    signal(pid, &strays, "KILL");
                    // SIGKILL is delivered asynchronously: wait until the
                    // processes are gone, so `close` returning means none.
                    let deadline = Instant::now() + Duration::from_secs(1);
                    while alive(&mut child) && Instant::now() < deadline {
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
    // `Duration::MAX` (a host's "no limit") saturates instead of panicking.
    let deadline = crate::util::instant_after(grace);
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

/// Signal group `pgid` and every stray still alive, with one `kill`.
#[cfg(unix)]
fn signal(pgid: u32, strays: &[Stray], signal: &str) {
    let mut args = vec![
        "-s".to_string(),
        signal.to_string(),
        "--".to_string(),
        format!("-{pgid}"),
    ];
    args.extend(
        strays
            .iter()
            .filter(|s| s.alive())
            .map(|s| s.pid.to_string()),
    );
    let status = Command::new("kill")
        .args(&args)
        .stdin(Pipe::null())
        .stdout(Pipe::null())
        .stderr(Pipe::null())
        .status();
    if let Err(e) = status {
        log::warn!(target: "pikuri::mcp", "could not run `kill` to signal process group {pgid}: {e}");
    }
}

/// One process of `/proc/<pid>/stat`: its parent, group, state and start
/// time (clock ticks since boot; with the pid, it names one process).
#[cfg(unix)]
struct Stat {
    ppid: u32,
    pgrp: u32,
    zombie: bool,
    start: u64,
}

#[cfg(unix)]
fn stat(pid: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
    // majflt cmajflt utime stime cutime cstime priority nice threads
    // itrealvalue starttime …: comm may hold spaces and parens.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        zombie: *fields.first()? == "Z",
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// Every live process, from /proc (empty where there is none).
#[cfg(unix)]
fn processes() -> Vec<(u32, Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            let pid = name.parse().ok()?;
            stat(name).map(|s| (pid, s))
        })
        .collect()
}

/// A descendant of the server outside its process group.
#[cfg(unix)]
struct Stray {
    pid: u32,
    start: u64,
}

#[cfg(unix)]
impl Stray {
    /// Still running, and still the same process.
    fn alive(&self) -> bool {
        stat(&self.pid.to_string()).is_some_and(|s| !s.zombie && s.start == self.start)
    }
}

/// The live descendants of `root` outside its group (Linux /proc; none
/// elsewhere): see the module docs.
#[cfg(unix)]
fn descendants(root: u32) -> Vec<Stray> {
    let all = processes();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            all.iter()
                .filter(|(_, s)| s.ppid == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    all.into_iter()
        .filter(|(pid, s)| tree[1..].contains(pid) && s.pgrp != root && !s.zombie)
        .map(|(pid, s)| Stray {
            pid,
            start: s.start,
        })
        .collect()
}

/// Whether any live (non-zombie) process is in group `pgid`. Linux reads
/// /proc; elsewhere it cannot tell and answers `true` (so the group is
/// always signalled).
#[cfg(unix)]
pub(super) fn group_alive(pgid: u32) -> bool {
    if std::fs::metadata("/proc/self/stat").is_err() {
        return true;
    }
    processes().iter().any(|(_, s)| s.pgrp == pgid && !s.zombie)
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

    #[test]
    fn the_id_of_an_oversized_answer_is_found_at_its_start() {
        let input = format!(
            "{{\"jsonrpc\": \"2.0\", \"id\": 42, \"result\": \"{}\"}}\n",
            "x".repeat(100)
        );
        let mut r = BufReader::with_capacity(8, input.as_bytes());
        let (mut buf, mut head) = (Vec::new(), Vec::new());
        assert_eq!(
            read_line_head(&mut r, &mut buf, 50, &mut head).unwrap(),
            Some(false)
        );
        assert!(buf.is_empty());
        assert_eq!(answer_id(&head), Some(42));
        assert_eq!(answer_id(br#"{"method": "x", "id": 3"#), None);
        assert_eq!(answer_id(br#"{"result": {"id": 3"#), None);
        assert_eq!(answer_id(br#"{"id":"7","#), Some(7));
    }
}
