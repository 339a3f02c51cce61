//! Approval of state-changing tools: the example's one such tool,
//! `write_file`, and who answers the y/n prompt before each call.
//!
//! | Mode | Approver |
//! |---|---|
//! | `--yes` (`-y`) | [`AutoApprove`]: every call runs |
//! | REPL | [`TerminalApprover`] on stderr, its answers read by the REPL's own stdin thread ([`Answers`]) |
//! | `-p`, stdin a terminal | [`TerminalApprover::stdio`] |
//! | `-p`, stdin not a terminal | deny, with a note on stderr to pass `--yes` |
//!
//! All but `--yes` sit behind [`StateChangingOnly`]: read-only tools run
//! without a question.
//!
//! The REPL cannot use [`TerminalApprover::stdio`]: its stdin thread holds
//! the stdin lock for good, so a second reader would never get a line.
//! Instead, while a prompt waits, the REPL hands it the next line it reads
//! (instead of queuing it for the agent). A Ctrl+C during the prompt ends
//! the turn; the abandoned prompt sees the turn is over and gives up (deny),
//! so the next line typed is not swallowed by it, and no "press Enter" is
//! needed. In `-p` mode Ctrl+C ends the process, pending read included.

use std::fs;
use std::io::{self, BufRead, IsTerminal, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use pikuri::ToolError;
use pikuri::approval::{
    ApprovalRequest, Approver, AutoApprove, Decision, StateChangingOnly, TerminalApprover,
};
use pikuri::listeners::sanitize;
use pikuri::mcp::{InputProvider, TerminalInput};
use pikuri::tool::{FnTool, Parameters};

use crate::args::Options;

/// The approver for this run (the REPL's unless `-p`).
pub(crate) fn approver(opts: &Options) -> Arc<dyn Approver> {
    if opts.yes {
        return Arc::new(AutoApprove);
    }
    match opts.prompt {
        None => Arc::new(StateChangingOnly::new(TerminalApprover::new(
            Answers::stdin().reader(),
            Answers::stdin().prompt_out(),
        ))),
        Some(_) if io::stdin().is_terminal() => {
            Arc::new(StateChangingOnly::new(TerminalApprover::stdio()))
        }
        Some(_) => Arc::new(StateChangingOnly::new(|req: &ApprovalRequest| {
            let tool = sanitize(req.tool()).into_owned();
            eprintln!(
                "({tool} not run: it needs approval and stdin is not a terminal; pass --yes to allow it)"
            );
            Decision::deny(format!(
                "{tool} needs the user's approval, which cannot be asked (stdin is not a \
                 terminal); the user can rerun with --yes to allow it"
            ))
        })),
    }
}

/// Who answers MCP servers that ask the user: the terminal, as for the
/// approval prompt (in the REPL through the same line feed); nobody with
/// `-p` and stdin not a terminal (refused).
pub(crate) fn input_provider(opts: &Options) -> Option<Box<dyn InputProvider>> {
    match opts.prompt {
        None => Some(Box::new(TerminalInput::new(
            Answers::stdin().reader(),
            io::stderr(),
        ))),
        Some(_) if io::stdin().is_terminal() => Some(Box::new(TerminalInput::stdio())),
        Some(_) => None,
    }
}

// ---------------------------------------------------------------------------
// The REPL's answers

/// The REPL's side of the approval prompt: whether a prompt waits for a
/// line, and the way to hand it one. There is one, [`Answers::stdin`], as
/// there is one stdin.
#[derive(Clone)]
pub(crate) struct Answers {
    shared: Arc<Shared>,
}

struct Shared {
    /// The generation of the turn whose prompt is blocked reading its
    /// answer; 0 when none is.
    waiting: AtomicU64,
    /// A turn runs: a prompt outside one is stale and gives up.
    turn: AtomicBool,
    /// Counts the turns started: a prompt that began reading in an earlier
    /// turn is stale too (the next turn may start before it looks).
    generation: AtomicU64,
    tx: Mutex<Option<Sender<String>>>,
    /// Shared by the readers (the approval prompt's, the MCP input's).
    rx: Mutex<Option<Receiver<String>>>,
}

impl Answers {
    /// The process's feed of stdin lines to the approval prompt.
    pub(crate) fn stdin() -> &'static Answers {
        static STDIN: OnceLock<Answers> = OnceLock::new();
        STDIN.get_or_init(Answers::new)
    }

    fn new() -> Answers {
        let (tx, rx) = mpsc::channel();
        Answers {
            shared: Arc::new(Shared {
                waiting: AtomicU64::new(0),
                turn: AtomicBool::new(false),
                generation: AtomicU64::new(0),
                tx: Mutex::new(Some(tx)),
                rx: Mutex::new(Some(rx)),
            }),
        }
    }

    /// A reader for a prompt; every reader takes the next line handed over.
    fn reader(&self) -> AnswerReader {
        AnswerReader {
            shared: Arc::clone(&self.shared),
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// Where the prompt writes its question: stderr, marking the prompt as
    /// waiting before the question shows, so a line typed the moment it
    /// shows is the answer (it went to the model as a queued message when
    /// the mark came only as the prompt began to read). The approver
    /// writes only right before it reads (the question, or a "please
    /// answer" line and the question again), so the mark is never stale.
    fn prompt_out(&self) -> PromptOut {
        PromptOut {
            shared: Arc::clone(&self.shared),
        }
    }

    /// A prompt of the running turn waits for its answer.
    pub(crate) fn waiting(&self) -> bool {
        let s = &self.shared;
        s.turn.load(Ordering::SeqCst)
            && s.waiting.load(Ordering::SeqCst) == s.generation.load(Ordering::SeqCst)
    }

    /// Hand `line` to the waiting prompt.
    pub(crate) fn answer(&self, line: String) {
        let tx = self
            .shared
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = tx.as_ref() {
            let _ = tx.send(line);
        }
    }

    /// End of input: every prompt from now on reads end of input (deny).
    pub(crate) fn close(&self) {
        self.shared
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// A turn starts (`true`) or ended (`false`).
    pub(crate) fn set_turn(&self, running: bool) {
        if running {
            self.shared.generation.fetch_add(1, Ordering::SeqCst);
        }
        self.shared.turn.store(running, Ordering::SeqCst);
    }
}

/// The approval prompt's stderr (see [`Answers::prompt_out`]).
struct PromptOut {
    shared: Arc<Shared>,
}

impl io::Write for PromptOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let generation = self.shared.generation.load(Ordering::SeqCst);
        self.shared.waiting.store(generation, Ordering::SeqCst);
        io::stderr().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// Lines handed over by [`Answers::answer`], as a `BufRead`.
struct AnswerReader {
    shared: Arc<Shared>,
    buf: Vec<u8>,
    pos: usize,
}

impl AnswerReader {
    /// The next line, `None` at end of input or when the turn the read
    /// began in is over.
    fn next_line(&self, generation: u64) -> Option<String> {
        let guard = self
            .shared
            .rx
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let rx = guard.as_ref()?;
        loop {
            if !self.shared.turn.load(Ordering::SeqCst)
                || self.shared.generation.load(Ordering::SeqCst) != generation
            {
                return None;
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => return Some(line),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }
}

impl Read for AnswerReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let available = self.fill_buf()?;
            let n = available.len().min(out.len());
            out[..n].copy_from_slice(&available[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for AnswerReader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            let generation = self.shared.generation.load(Ordering::SeqCst);
            self.shared.waiting.store(generation, Ordering::SeqCst);
            let line = self.next_line(generation);
            self.shared.waiting.store(0, Ordering::SeqCst);
            if let Some(line) = line {
                self.buf = line.into_bytes();
                self.buf.push(b'\n');
            }
        }
        Ok(&self.buf[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.buf.len());
    }
}

// ---------------------------------------------------------------------------
// write_file

/// The `write_file` tool: creates or replaces a text file under `root`,
/// confined like `read_file` (no absolute paths, no `..`, no symbolic link
/// leading out). It declares [`changes_user_state`](pikuri::Tool::changes_user_state),
/// so each call is put to the approver.
pub(crate) fn write_file(root: PathBuf) -> FnTool {
    let params = Parameters::builder()
        .required_string(
            "path",
            "The file's path relative to the workspace root, e.g. `notes.txt`; its \
             directory must exist.",
        )
        .required_string("content", "The complete new content of the file.")
        .build();
    FnTool::new(
        "write_file",
        "Create or overwrite a text file under the workspace root with the given content. \
         The user is asked to approve each write.",
        params,
        move |args, _| {
            let path = args["path"].as_str().unwrap_or_default();
            let content = args["content"].as_str().unwrap_or_default();
            let target = confine(&root, path)?;
            fs::write(&target, content)
                .map_err(|e| ToolError::new(format!("cannot write `{path}`: {e}")))?;
            Ok(format!("wrote {} bytes to {path}", content.len()))
        },
    )
    .state_changing()
}

/// Where to write `path` under `root`, or why not.
fn confine(root: &Path, path: &str) -> Result<PathBuf, ToolError> {
    let relative = Path::new(path);
    for component in relative.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {
                return Err(ToolError::new(format!(
                    "`{path}` is an absolute path; give a path relative to the root directory"
                )));
            }
            Component::ParentDir => {
                return Err(ToolError::new(format!(
                    "`{path}` contains `..`; only paths inside the root directory are allowed"
                )));
            }
            Component::CurDir | Component::Normal(_) => {}
        }
    }
    let Some(name) = relative.file_name() else {
        return Err(ToolError::new(format!("`{path}` names no file")));
    };
    let root = root
        .canonicalize()
        .map_err(|e| ToolError::new(format!("the root directory is not accessible: {e}")))?;
    let parent = relative.parent().unwrap_or(Path::new(""));
    let dir = root.join(parent).canonicalize().map_err(|_| {
        ToolError::new(format!(
            "the directory of `{path}` does not exist; create files in existing directories"
        ))
    })?;
    let outside = || {
        ToolError::new(format!(
            "`{path}` leads outside the root directory through a symbolic link"
        ))
    };
    if !dir.starts_with(&root) {
        return Err(outside());
    }
    let target = dir.join(name);
    match fs::symlink_metadata(&target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            // A dangling link could create a file anywhere: refuse it too.
            let real = target.canonicalize().map_err(|_| outside())?;
            if !real.starts_with(&root) {
                return Err(outside());
            }
            if real.is_dir() {
                return Err(ToolError::new(format!("`{path}` is a directory")));
            }
            if !real.is_file() {
                return Err(not_regular(path));
            }
            Ok(real)
        }
        Ok(meta) if meta.is_dir() => Err(ToolError::new(format!("`{path}` is a directory"))),
        // A FIFO would block the write until a reader came; a device is
        // no file to replace.
        Ok(meta) if !meta.is_file() => Err(not_regular(path)),
        _ => Ok(target),
    }
}

fn not_regular(path: &str) -> ToolError {
    ToolError::new(format!(
        "`{path}` is not a regular file (a FIFO or a device); write regular files only"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_file_stays_under_the_root() {
        let root = std::env::temp_dir().join(format!("pikuri-chat-confine-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("sub")).unwrap();
        let err = |path: &str| confine(&root, path).unwrap_err().message().to_string();
        assert!(err("/etc/x").contains("absolute"));
        assert!(err("sub/../x").contains("`..`"));
        assert!(err("sub").contains("directory"));
        assert!(err("missing/x").contains("does not exist"));
        assert!(confine(&root, "sub/new.txt").is_ok());
        #[cfg(unix)]
        {
            use std::os::unix::fs::symlink;
            symlink(std::env::temp_dir(), root.join("out")).unwrap();
            symlink("/nonexistent/pikuri", root.join("dangling")).unwrap();
            assert!(err("out/x").contains("outside"));
            assert!(err("dangling").contains("outside"));
        }
        fs::remove_dir_all(&root).unwrap();
    }
}
