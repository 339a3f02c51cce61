use std::collections::HashSet;
use std::fmt;
use std::io::{self, BufRead, Write};

use parking_lot::Mutex;
use serde_json::Value;

use super::{ApprovalRequest, Approver, Decision};
use crate::sanitize::sanitize;

/// A y/n prompt: asks on a writer, reads the answer from a reader (the
/// terminal by default, pikuri's `Confirmer::TERMINAL`).
///
/// Needs the `terminal` feature (on by default).
///
/// The prompt names the tool and its arguments, routed through
/// [`sanitize`](crate::listeners::sanitize) (they are model-written). The
/// answers, one line each:
///
/// - `y` / `yes`: approve;
/// - `n` / `no`, optionally followed by a reason (`n use the test db`):
///   deny, with that reason or "denied by the user";
/// - `a` / `always`: approve, and approve this tool without asking for the
///   rest of the agent's life;
/// - `e` / `edit`: then a line of JSON, the arguments to run on instead;
/// - anything else asks again; end of input denies.
///
/// Reviews are serialized (one prompt at a time, even for parallel
/// sub-agents). Wire it into a REPL with
/// `.approver(StateChangingOnly::new(TerminalApprover::stdio()))`.
///
/// # Examples
///
/// ```
/// use pikuri::approval::{ApprovalRequest, Approver, Decision, TerminalApprover};
/// let input = b"maybe\nn not that file\na\n".to_vec();
/// let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
/// # struct W(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
/// # impl std::io::Write for W {
/// #     fn write(&mut self, b: &[u8]) -> std::io::Result<usize> { self.0.lock().unwrap().extend_from_slice(b); Ok(b.len()) }
/// #     fn flush(&mut self) -> std::io::Result<()> { Ok(()) }
/// # }
/// let prompt = TerminalApprover::new(std::io::Cursor::new(input), W(out.clone()));
/// let req = ApprovalRequest::new("rm", serde_json::json!({"path": "a.txt"}));
/// assert_eq!(prompt.review(&req), Decision::deny("not that file"));
/// assert_eq!(prompt.review(&req), Decision::Approve); // "a"
/// assert_eq!(prompt.review(&req), Decision::Approve); // remembered, no read
/// let shown = String::from_utf8(out.lock().unwrap().clone()).unwrap();
/// assert!(shown.starts_with("Allow rm {\"path\":\"a.txt\"}? [y]es [n]o [a]lways [e]dit: "));
/// assert!(shown.contains("Please answer y, n, a or e."));
/// ```
pub struct TerminalApprover {
    inner: Mutex<Inner>,
}

struct Inner {
    reader: Box<dyn BufRead + Send>,
    writer: Box<dyn Write + Send>,
    always: HashSet<String>,
}

impl TerminalApprover {
    /// A prompt reading lines from `reader` and writing to `writer`.
    pub fn new(
        reader: impl BufRead + Send + 'static,
        writer: impl Write + Send + 'static,
    ) -> TerminalApprover {
        TerminalApprover {
            inner: Mutex::new(Inner {
                reader: Box::new(reader),
                writer: Box::new(writer),
                always: HashSet::new(),
            }),
        }
    }

    /// A prompt on stdin and stderr.
    ///
    /// A cancel while it waits ends the turn at once, but the read on stdin
    /// stays pending on the helper thread: the next line typed answers (and
    /// is swallowed by) that stale prompt. A REPL that cancels with Ctrl+C
    /// should say so ("press Enter").
    pub fn stdio() -> TerminalApprover {
        TerminalApprover::new(io::BufReader::new(io::stdin()), io::stderr())
    }
}

impl Approver for TerminalApprover {
    fn review(&self, request: &ApprovalRequest) -> Decision {
        let mut inner = self.inner.lock();
        if inner.always.contains(request.tool()) {
            return Decision::Approve;
        }
        let who = if request.agent_id().is_empty() {
            String::new()
        } else {
            format!("[{}] ", sanitize(request.agent_id()))
        };
        let args = request.arguments().to_string();
        let question = format!(
            "{who}Allow {} {}? [y]es [n]o [a]lways [e]dit: ",
            sanitize(request.tool()),
            sanitize(&args)
        );
        loop {
            let Some(line) = inner.ask(&question) else {
                return Decision::deny("no answer (end of input)");
            };
            if request.is_cancelled() {
                return Decision::deny("cancelled");
            }
            let (word, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
            match word.to_ascii_lowercase().as_str() {
                "y" | "yes" => return Decision::Approve,
                "n" | "no" if rest.trim().is_empty() => {
                    return Decision::deny("denied by the user");
                }
                "n" | "no" => return Decision::deny(rest.trim()),
                "a" | "always" => {
                    inner.always.insert(request.tool().to_string());
                    return Decision::Approve;
                }
                "e" | "edit" => {
                    let Some(json) = inner.ask("New arguments (JSON): ") else {
                        return Decision::deny("no answer (end of input)");
                    };
                    match serde_json::from_str::<Value>(&json) {
                        Ok(arguments) => return Decision::edit(arguments),
                        Err(e) => inner.say(&format!("Not JSON ({e}).")),
                    }
                }
                _ => inner.say("Please answer y, n, a or e."),
            }
        }
    }
}

impl Inner {
    /// Write `question`, read one trimmed line; `None` at end of input.
    fn ask(&mut self, question: &str) -> Option<String> {
        let _ = self.writer.write_all(question.as_bytes());
        let _ = self.writer.flush();
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim().to_string()),
        }
    }

    fn say(&mut self, text: &str) {
        let _ = writeln!(self.writer, "{text}");
    }
}

impl fmt::Debug for TerminalApprover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TerminalApprover").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::sync::Arc;

    #[derive(Clone, Default)]
    struct Out(Arc<Mutex<Vec<u8>>>);
    impl Write for Out {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn answer(input: &str) -> (Decision, String) {
        let out = Out::default();
        let t = TerminalApprover::new(Cursor::new(input.as_bytes().to_vec()), out.clone());
        let req =
            ApprovalRequest::new("w\x1b[2J", serde_json::json!({"a": 1})).with_agent_id("r 0");
        let d = t.review(&req);
        let shown = String::from_utf8(out.0.lock().clone()).unwrap();
        (d, shown)
    }

    #[test]
    fn answers() {
        assert_eq!(answer("y\n").0, Decision::Approve);
        assert_eq!(answer("YES\n").0, Decision::Approve);
        assert_eq!(answer("n\n").0, Decision::deny("denied by the user"));
        assert_eq!(answer("").0, Decision::deny("no answer (end of input)"));
        assert_eq!(
            answer("e\n{\"a\": 2}\n").0,
            Decision::edit(serde_json::json!({"a": 2}))
        );
        let (d, shown) = answer("e\nnope\ny\n");
        assert_eq!(d, Decision::Approve);
        assert!(shown.contains("Not JSON ("), "{shown}");
    }

    #[test]
    fn the_prompt_is_sanitized_and_names_the_agent() {
        let (_, shown) = answer("y\n");
        assert!(
            shown.starts_with("[r 0] Allow w\\x1b[2J {\"a\":1}?"),
            "{shown}"
        );
    }
}
