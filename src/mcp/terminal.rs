//! [`TerminalInput`]: answer a server's input request at a terminal.

use std::fmt::Write as _;
use std::io::{self, BufRead, Write};

use parking_lot::Mutex;
use serde_json::{Map, Value};

use super::input::{InputAnswer, InputProvider, InputRequest};
use crate::sanitize::sanitize;

/// Asks the user at a terminal what an MCP server needs: the server's
/// message, then one line per field of the requested schema.
///
/// Needs the `terminal` feature (on by default).
///
/// Everything the server wrote (its message, field names, titles and
/// descriptions) goes through [`sanitize`](crate::listeners::sanitize)
/// before it is shown, so escape sequences cannot drive the terminal.
/// The first line answers `y` (fill in the fields), `n` (decline) or
/// anything else (cancel); each field, in the order the server listed
/// them ([`InputRequest::fields`]), then takes one line: text as typed,
/// a number, `y`/`n` for a boolean, one of the listed choices, and an
/// empty line leaves an optional field out. End of input cancels.
///
/// # Examples
///
/// ```
/// use pikuri::mcp::{InputAnswer, InputProvider, InputRequest, TerminalInput};
/// use serde_json::json;
///
/// let input = b"y\noctocat\n3\n".to_vec();
/// let prompt = TerminalInput::new(std::io::Cursor::new(input), std::io::sink());
/// let request = InputRequest::new("gh", "Who are you?\x1b[2J", json!({
///     "type": "object",
///     "properties": {"login": {"type": "string"}, "repos": {"type": "integer"}},
///     "required": ["login"],
/// }));
/// assert_eq!(prompt.ask(&request), InputAnswer::Accept(json!({"login": "octocat", "repos": 3})));
/// ```
pub struct TerminalInput {
    inner: Mutex<Inner>,
}

struct Inner {
    reader: Box<dyn BufRead + Send>,
    writer: Box<dyn Write + Send>,
}

impl std::fmt::Debug for TerminalInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TerminalInput").finish_non_exhaustive()
    }
}

impl TerminalInput {
    /// A prompt reading lines from `reader` and writing to `writer`.
    pub fn new(
        reader: impl BufRead + Send + 'static,
        writer: impl Write + Send + 'static,
    ) -> TerminalInput {
        TerminalInput {
            inner: Mutex::new(Inner {
                reader: Box::new(reader),
                writer: Box::new(writer),
            }),
        }
    }

    /// A prompt on stdin and stderr. As with
    /// [`TerminalApprover::stdio`](crate::approval::TerminalApprover::stdio),
    /// a cancel ends the wait at once but leaves the read on stdin pending:
    /// the next line typed is swallowed.
    pub fn stdio() -> TerminalInput {
        TerminalInput::new(io::BufReader::new(io::stdin()), io::stderr())
    }
}

impl InputProvider for TerminalInput {
    fn ask(&self, request: &InputRequest) -> InputAnswer {
        let mut inner = self.inner.lock();
        let mut intro = format!(
            "MCP server {} asks: {}\n",
            sanitize(request.server()),
            sanitize(request.message())
        );
        if let Some(problem) = request.problem() {
            let _ = writeln!(
                intro,
                "(the last answer was rejected: {})",
                sanitize(problem)
            );
        }
        inner.say(&intro);
        let Some(first) = inner.ask("Answer? [y]es [n]o, anything else cancels: ") else {
            return InputAnswer::Cancel;
        };
        match first.to_ascii_lowercase().as_str() {
            "y" | "yes" => {}
            "n" | "no" => return InputAnswer::Decline,
            _ => return InputAnswer::Cancel,
        }
        let schema = request.schema();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut content = Map::new();
        // The server's order, not the sorted keys of `schema`.
        for name in request.fields() {
            let field = &schema["properties"][name.as_str()];
            if request.is_cancelled() {
                return InputAnswer::Cancel;
            }
            let label = field["title"].as_str().unwrap_or(name);
            let mut question = sanitize(label).into_owned();
            if let Some(d) = field["description"].as_str() {
                let _ = write!(question, " ({})", sanitize(d));
            }
            let choices: Vec<&str> = field["enum"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if !choices.is_empty() {
                let _ = write!(question, " [{}]", sanitize(&choices.join("/")));
            }
            let optional = !required.contains(&name.as_str());
            question.push_str(if optional { " (optional): " } else { ": " });
            let Some(line) = inner.ask(&question) else {
                return InputAnswer::Cancel;
            };
            if line.is_empty() && optional {
                continue;
            }
            let value = match field["type"].as_str() {
                Some("integer") => line.parse::<i64>().map_or(Value::String(line), Value::from),
                Some("number") => line.parse::<f64>().map_or(Value::String(line), Value::from),
                Some("boolean") => match line.to_ascii_lowercase().as_str() {
                    "y" | "yes" | "true" => Value::Bool(true),
                    "n" | "no" | "false" => Value::Bool(false),
                    _ => Value::String(line),
                },
                Some("array") => Value::Array(
                    line.split(',')
                        .map(|s| Value::String(s.trim().to_string()))
                        .collect(),
                ),
                _ => Value::String(line),
            };
            content.insert(name.clone(), value);
        }
        // A wrong type is caught by the schema check, which asks again.
        InputAnswer::Accept(Value::Object(content))
    }
}

impl Inner {
    fn say(&mut self, text: &str) {
        let _ = self.writer.write_all(text.as_bytes());
        let _ = self.writer.flush();
    }

    /// Write `question`, read one trimmed line; `None` at end of input.
    fn ask(&mut self, question: &str) -> Option<String> {
        self.say(question);
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim().to_string()),
        }
    }
}
