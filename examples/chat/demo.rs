//! The built-in demo model: a [`FakeServer`] whose
//! [`respond_with`](FakeServer::respond_with) function plays a small model.
//!
//! It reads the question (the last user message of each request) and
//! answers deterministically, at a human pace so that Ctrl+C and typing
//! while it works can be tried:
//!
//! | Question | Reply (when the tool is offered) |
//! |---|---|
//! | arithmetic (`What is 17*23?`) | `calculator` with the user's own expression |
//! | time or date (`What time is it?`) | `current_time` |
//! | `read FILE` (`read Cargo.toml`) | `read_file` with that path |
//! | `write TEXT to FILE` (`write hello to notes.txt`) | `write_file` with that path and content |
//! | `ask PERSONA to TASK` (`ask file_miner to list files`) | `agent` (`--subagents`), which runs TASK in a sub-agent |
//! | files, directory (`list files`) | `list_dir` of the working directory |
//! | anything else | a plain answer: this is the demo, and how to connect a real model |
//!
//! After a tool call, the next request ends with the tool's message, and the
//! demo answers with the tool's result. It only calls tools that the request
//! offers (`--tools`), and never claims a result it did not get.

use std::time::Duration;

use pikuri::testing::{FakeServer, RecordedRequest, Reply};
use serde_json::{Value, json};

/// Pause between streamed pieces of 4 characters: about 130 characters
/// (30-odd tokens) a second, like a small local model.
const PIECE_DELAY: Duration = Duration::from_millis(30);
/// "Thinking" before the first byte of each response.
const FIRST_BYTE_DELAY: Duration = Duration::from_millis(300);

/// Start the demo server; `model` names the model it reports.
pub(crate) fn start(model: Option<&str>) -> std::io::Result<FakeServer> {
    let server = FakeServer::try_start()?;
    server.set_model_id(model.unwrap_or("pikuri-demo"));
    server.respond_with(|req| {
        reply(req)
            .with_delay(FIRST_BYTE_DELAY)
            .with_chunk_delay(PIECE_DELAY)
    });
    Ok(server)
}

/// The demo's reply to one chat request.
fn reply(req: &RecordedRequest) -> Reply {
    // The API-neutral view: the same chat-completions messages whichever
    // wire format (`--api`) the request came in.
    let messages = req.conversation();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    if last["role"] == "tool" {
        return Reply::text(report(&messages));
    }
    let question = last["content"].as_str().unwrap_or("");
    let offered = req.tool_names();
    let offers = |tool: &str| offered.iter().any(|t| t == tool);
    let (tool, args) = match classify(question) {
        Intent::Calculate(expression) => ("calculator", json!({ "expression": expression })),
        Intent::Time => ("current_time", json!({})),
        Intent::Read(path) => ("read_file", json!({ "path": path })),
        Intent::List => ("list_dir", json!({})),
        Intent::Write { path, content } => {
            ("write_file", json!({ "path": path, "content": content }))
        }
        Intent::Delegate { name, task } => ("agent", json!({ "name": name, "task": task })),
        Intent::Other => return Reply::text(introduce(offered.is_empty())),
    };
    if offers(tool) {
        Reply::tool_call(tool, args)
    } else {
        Reply::text(format!(
            "I would use the {tool} tool for that, but it is not offered (see --tools), \
             and as the built-in demo model I cannot work it out on my own. {CONNECT}"
        ))
    }
}

const CONNECT: &str = "For a real model, run with OPENAI_BASE_URL=http://127.0.0.1:8080/v1 \
(llama.cpp, Ollama, any OpenAI-compatible server), or run scripts/chat-local.sh to build \
and start llama.cpp with SmolLM2 on this machine.";

/// The plain answer to a question the demo does not handle.
fn introduce(no_tools: bool) -> String {
    let tools = if no_tools {
        " (All tools are off now: drop --tools none to try them.)"
    } else {
        ""
    };
    format!(
        "I am the built-in demo model of pikuri's chat example, not a language model, so I \
         cannot really answer that. I can show the agent loop: ask me to calculate \
         (\"What is 17*23?\"), for the time, to list files, to read one \
         (\"read Cargo.toml\") or write one (\"write hello to notes.txt\"), and I call the \
         matching tool.{tools} {CONNECT}"
    )
}

/// What a question asks for.
#[derive(Debug, PartialEq)]
enum Intent {
    Calculate(String),
    Time,
    Read(String),
    List,
    Write {
        path: String,
        content: String,
    },
    /// `agent`: a task for the sub-agent `name`.
    Delegate {
        name: String,
        task: String,
    },
    Other,
}

fn classify(question: &str) -> Intent {
    let lower = question.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let has = |set: &[&str]| words.iter().any(|w| set.contains(w));
    if let Some((name, task)) = delegation(question) {
        return Intent::Delegate { name, task };
    }
    if let Some((content, path)) = file_to_write(question) {
        return Intent::Write { path, content };
    }
    if let Some(path) = file_to_read(question) {
        return Intent::Read(path);
    }
    if let Some(expression) = expression(question) {
        return Intent::Calculate(expression);
    }
    if has(&[
        "time", "date", "day", "today", "clock", "weekday", "year", "month",
    ]) {
        return Intent::Time;
    }
    if has(&["file", "files", "directory", "folder", "dir", "ls"]) {
        return Intent::List;
    }
    Intent::Other
}

/// The longest run of arithmetic characters holding a digit and an operator.
fn expression(question: &str) -> Option<String> {
    let is_math = |c: char| c.is_ascii_digit() || " .+-*/^%()".contains(c);
    question
        .split(|c: char| !is_math(c))
        .map(str::trim)
        .filter(|run| run.contains(|c: char| c.is_ascii_digit()))
        .filter(|run| {
            run.trim_start_matches('-')
                .contains(['+', '-', '*', '/', '^', '%'])
        })
        .max_by_key(|run| run.len())
        .map(str::to_string)
}

/// `write TEXT to FILE`: (TEXT, FILE), quotes around TEXT dropped.
fn file_to_write(question: &str) -> Option<(String, String)> {
    let rest = strip_word(question.trim(), "write ")?;
    let (content, path) = rest.rsplit_once(" to ")?;
    let content = content.trim().trim_matches(|c: char| "\"'`".contains(c));
    let path = path.trim().trim_matches(|c: char| "\"'`?!,;:".contains(c));
    let path = path.strip_suffix('.').unwrap_or(path);
    (!content.is_empty() && !path.is_empty()).then(|| (content.to_string(), path.to_string()))
}

/// `text` without the ASCII `prefix`, in any case.
fn strip_word<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// `ask PERSONA to TASK` for the bundled personas: (PERSONA, TASK).
fn delegation(question: &str) -> Option<(String, String)> {
    let rest = strip_word(question.trim(), "ask ")?;
    let rest = rest.strip_prefix("the ").unwrap_or(rest);
    let (name, task) = rest.split_once(" to ")?;
    let name = name.trim();
    (["researcher", "file_miner"].contains(&name) && !task.trim().is_empty())
        .then(|| (name.to_string(), task.trim().to_string()))
}

/// `read X`, `show X`, `cat X`, `open X`: the path X.
fn file_to_read(question: &str) -> Option<String> {
    let mut words = question.split_whitespace();
    while let Some(word) = words.next() {
        if ["read", "show", "cat", "open"].contains(&word.to_lowercase().as_str())
            && let Some(next) = words.next()
        {
            let path = next.trim_matches(|c: char| "\"'`?!,;:".contains(c));
            let path = path.strip_suffix('.').unwrap_or(path);
            if !path.is_empty() && path != "the" && path != "a" {
                return Some(path.to_string());
            }
        }
    }
    None
}

/// The answer after tool batches: each call made since the model last
/// answered in words (a line typed mid-turn adds calls to the same turn),
/// with its result.
fn report(messages: &[Value]) -> String {
    let since = messages
        .iter()
        .rposition(|m| m["role"] == "assistant" && m["tool_calls"].as_array().is_none())
        .map_or(0, |i| i + 1);
    let recent = &messages[since..];
    let result = |id: &Value| {
        recent
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == *id)
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
    };
    let parts: Vec<String> = recent
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|call| {
            let name = call["function"]["name"].as_str().unwrap_or("");
            let args: Value = call["function"]["arguments"]
                .as_str()
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or(Value::Null);
            describe(name, &args, result(&call["id"]))
        })
        .collect();
    parts.join("\n\n")
}

fn describe(tool: &str, args: &Value, result: &str) -> String {
    if let Some(why) = result.strip_prefix("Error: ") {
        return format!("The {tool} tool failed: {why}");
    }
    match tool {
        "calculator" => format!(
            "The calculator says {} = {result}.",
            args["expression"].as_str().unwrap_or("?")
        ),
        "current_time" => format!("It is {result} (UTC)."),
        "read_file" => format!(
            "{} holds:\n\n{result}",
            args["path"].as_str().unwrap_or("The file")
        ),
        "list_dir" => format!("The working directory holds:\n\n{result}"),
        "write_file" => format!("Done: {result}."),
        "agent" => format!(
            "The {} sub-agent answered:\n\n{result}",
            args["name"].as_str().unwrap_or("?")
        ),
        other => format!("The {other} tool answered: {result}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_classified() {
        let calc = |e: &str| Intent::Calculate(e.to_string());
        assert_eq!(classify("What is 17*23?"), calc("17*23"));
        assert_eq!(classify("compute (2 + 3) * 4 please"), calc("(2 + 3) * 4"));
        assert_eq!(classify("What time is it?"), Intent::Time);
        assert_eq!(classify("list files"), Intent::List);
        assert_eq!(
            classify("Please read notes.txt."),
            Intent::Read("notes.txt".into())
        );
        assert_eq!(
            classify("write \"hello there\" to notes.txt"),
            Intent::Write {
                path: "notes.txt".into(),
                content: "hello there".into()
            }
        );
        assert_eq!(
            classify("ask the file_miner to list files"),
            Intent::Delegate {
                name: "file_miner".into(),
                task: "list files".into()
            }
        );
        assert_eq!(classify("Who are you?"), Intent::Other);
        assert_eq!(classify("I am 42 years old"), Intent::Other);
    }
}
