//! `examples/chat/` run as a process: one-shot mode, exit codes, the events
//! file, the demo model, and a REPL driven through piped stdin.
//!
//! Plain `cargo test` builds the examples first; `cargo test --test
//! integration` does not, hence the freshness check in [`chat_bin`].

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use pikuri::History;
use pikuri::compaction::Compaction;
use pikuri::testing::{FakeServer, RecordedRequest, Reply};
use serde_json::{Value, json};

/// How long a child may run before the test kills it and fails.
const TIMEOUT: Duration = Duration::from_secs(60);

/// `target/<profile>/examples/chat`, built after every source it depends on.
fn chat_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/integration-<hash> → target/<profile>/examples/chat
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = profile_dir
        .join("examples")
        .join(format!("chat{}", std::env::consts::EXE_SUFFIX));
    let hint = "run `cargo build --examples` first (plain `cargo test` builds them; \
                `cargo test --test integration` does not)";
    let built = std::fs::metadata(&bin)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| panic!("{} is missing: {hint}", bin.display()));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let newest = newest_mtime(&root.join("src")).max(newest_mtime(&root.join("examples/chat")));
    assert!(
        built >= newest,
        "{} is older than its sources: {hint}",
        bin.display()
    );
    bin
}

/// The newest modification time of the `.rs` files under `path` (only those
/// make cargo rebuild; an editor's swap file must not count).
fn newest_mtime(path: &Path) -> SystemTime {
    if path.is_dir() {
        let entries = std::fs::read_dir(path).into_iter().flatten().flatten();
        return entries
            .map(|e| newest_mtime(&e.path()))
            .fold(SystemTime::UNIX_EPOCH, SystemTime::max);
    }
    let is_rust = path.extension().is_some_and(|e| e == "rs");
    let modified = std::fs::metadata(path).and_then(|m| m.modified());
    match modified {
        Ok(time) if is_rust => time,
        _ => SystemTime::UNIX_EPOCH,
    }
}

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(chat_bin());
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("PIKURI_API")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("ANTHROPIC_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// A running chat process whose output is collected as it arrives.
struct Chat {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

/// What a finished process left.
struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn collect(mut pipe: impl Read + Send + 'static, into: &Arc<Mutex<String>>) -> JoinHandle<()> {
    let into = Arc::clone(into);
    thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
}

impl Chat {
    fn spawn(args: &[&str]) -> Chat {
        Chat::spawn_in(None, args)
    }

    /// [`spawn`](Chat::spawn) with `dir` as the working directory.
    fn spawn_in(dir: Option<&Path>, args: &[&str]) -> Chat {
        let mut cmd = command(args);
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().expect("spawn the chat example");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            collect(child.stdout.take().expect("stdout"), &stdout),
            collect(child.stderr.take().expect("stderr"), &stderr),
        ];
        let stdin = child.stdin.take();
        Chat {
            child,
            stdin,
            stdout,
            stderr,
            readers,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}").expect("write to the chat's stdin");
        stdin.flush().expect("flush the chat's stdin");
    }

    fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Wait until `done` holds for stdout, or fail after [`TIMEOUT`].
    fn wait_stdout(&mut self, what: &str, done: impl Fn(&str) -> bool) {
        self.wait_for(what, |chat| done(&chat.stdout()));
    }

    /// Wait until `done` holds for stderr, or fail after [`TIMEOUT`].
    fn wait_stderr(&mut self, what: &str, done: impl Fn(&str) -> bool) {
        self.wait_for(what, |chat| done(&chat.stderr()));
    }

    fn wait_for(&mut self, what: &str, done: impl Fn(&Chat) -> bool) {
        let deadline = Instant::now() + TIMEOUT;
        while !done(self) {
            if Instant::now() > deadline || matches!(self.child.try_wait(), Ok(Some(_))) {
                let _ = self.child.kill();
                panic!(
                    "waiting for {what}: gave up\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    self.stdout(),
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait for the `n`th `> ` prompt (counting from 1).
    fn wait_prompt(&mut self, n: usize) {
        self.wait_stdout(&format!("prompt #{n}"), |out| prompts(out) >= n);
    }

    /// Close stdin (end of input), then [`wait`](Chat::wait).
    fn finish(mut self) -> Finished {
        drop(self.stdin.take());
        self.wait()
    }

    /// Wait for the exit with stdin left open, killing the child after
    /// [`TIMEOUT`].
    fn wait(mut self) -> Finished {
        let deadline = Instant::now() + TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for the chat") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the chat example did not exit within {TIMEOUT:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    self.stdout(),
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(10));
        };
        for reader in self.readers.drain(..) {
            reader.join().expect("pipe reader");
        }
        Finished {
            code: status.code(),
            stdout: self.stdout(),
            stderr: self.stderr(),
        }
    }
}

/// `> ` prompts printed so far. Piped input is not echoed, so a prompt may
/// follow another on the same line; the scripted answers contain no `> `.
fn prompts(out: &str) -> usize {
    out.matches("> ").count()
}

fn run(args: &[&str]) -> Finished {
    Chat::spawn(args).finish()
}

/// Arguments pointing the chat at a FakeServer's `base` URL, then `extra`.
fn against<'a>(base: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--base-url", base, "--model", "fake-model"];
    args.extend_from_slice(extra);
    args
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("pikuri-chat-{}-{name}", std::process::id()))
}

#[test]
fn one_shot_prints_only_the_answer() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("calculator", json!({"expression": "6*7"})));
    server.push(Reply::text("The answer is 42."));
    server.push(Reply::text("Unstreamed."));
    let base = server.base_url();

    let out = run(&against(&base, &["-p", "What is 6*7?"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "The answer is 42.\n");
    assert_eq!(out.stderr, "");
    let requests = server.chat_requests();
    assert_eq!(requests[0].body.as_ref().unwrap()["model"], "fake-model");
    assert!(requests[0].is_stream(), "streams by default");
    assert_eq!(requests[1].messages().last().unwrap()["content"], "42");

    let out = run(&against(&base, &["--no-stream", "-p", "again"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "Unstreamed.\n");
    assert!(!server.chat_requests()[2].is_stream());
    server.assert_all_used();
}

/// Issue 36: a one-shot answer cut by the token limit is printed whole as
/// it came, and stderr says it is cut (streamed or not).
#[test]
fn one_shot_says_on_stderr_that_a_cut_answer_is_incomplete() {
    let server = FakeServer::start();
    server.push(Reply::text("The causes are").with_finish_reason("length"));
    server.push(Reply::text("Withheld").with_finish_reason("content_filter"));
    let base = server.base_url();
    let out = run(&against(&base, &["-p", "Name the causes."]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "The causes are\n");
    assert_eq!(
        out.stderr,
        "warning: the answer was cut off by the token limit; it is incomplete\n"
    );
    let out = run(&against(&base, &["--no-stream", "-p", "again"]));
    assert_eq!(out.stdout, "Withheld\n");
    assert_eq!(
        out.stderr,
        "warning: the answer was withheld by a content filter; it is incomplete\n"
    );
    server.assert_all_used();
}

#[test]
fn model_comes_from_the_server_list_and_tools_from_the_flag() {
    let server = FakeServer::start();
    server.set_model_id("listed-model");
    server.push(Reply::text("a").repeat(3));
    let base = server.base_url();

    let out = run(&["--base-url", &base, "--tools", "calculator", "-p", "hi"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let out2 = run(&["--base-url", &base, "--tools", "none", "-p", "hi"]);
    assert_eq!(out2.code, Some(0), "stderr: {}", out2.stderr);
    let out3 = run(&["--base-url", &base, "-p", "hi"]);
    assert_eq!(out3.code, Some(0), "stderr: {}", out3.stderr);

    let requests = server.chat_requests();
    assert_eq!(requests[0].body.as_ref().unwrap()["model"], "listed-model");
    assert_eq!(requests[0].tool_names(), ["calculator"]);
    assert!(requests[1].tool_names().is_empty());
    assert_eq!(
        requests[2].tool_names(),
        [
            "calculator",
            "current_time",
            "read_file",
            "list_dir",
            "write_file"
        ]
    );
}

#[test]
fn exit_codes_per_outcome() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("calculator", json!({"expression": "1+1"})));
    server.push(Reply::tool_call("calculator", json!({"expression": "2+2"})));
    let base = server.base_url();
    let step_args = ["--on-exhausted", "raise", "--max-steps", "1", "-p", "go"];
    let out = run(&against(&base, &step_args));
    assert_eq!(out.code, Some(3), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr, "error: step limit of 1 exceeded\n");

    server.push(Reply::status(401, "invalid api key"));
    let out = run(&against(&base, &["-p", "hi"]));
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    assert_eq!(
        out.stderr,
        format!("error: http status 401 from {base}/chat/completions: invalid api key\n")
    );
    server.assert_all_used();

    for bad in [
        &["--bogus"][..],
        &["--max-steps", "0"],
        &["--max-steps"],
        &["--on-exhausted", "panic"],
        &["--tools", "shell"],
        &["-p", " "],
        &["stray"],
    ] {
        let out = run(bad);
        assert_eq!(out.code, Some(2), "{bad:?}: stderr: {}", out.stderr);
        assert!(out.stderr.starts_with("error: "), "{bad:?}: {}", out.stderr);
        assert_eq!(out.stderr.lines().count(), 1, "{bad:?}: {}", out.stderr);
        assert_eq!(out.stdout, "");
    }

    let help = run(&["--help"]);
    assert_eq!(help.code, Some(0));
    assert!(help.stdout.contains("Exit status:") && help.stdout.contains("130"));
}

#[cfg(unix)]
#[test]
fn ctrl_c_cancels_a_one_shot_run_with_130() {
    let server = FakeServer::start();
    server.push(Reply::hang());
    let base = server.base_url();
    let chat = Chat::spawn(&against(&base, &["-p", "hi"]));
    wait_for_requests(&server, 1);
    interrupt(&chat.child);
    let out = chat.wait();
    assert_eq!(out.code, Some(130), "stderr: {}", out.stderr);
    assert_eq!(out.stderr, "error: cancelled\n");
    assert_eq!(out.stdout, "");
}

#[test]
fn events_file_is_json_lines() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("calculator", json!({"expression": "6*7"})));
    server.push(Reply::text("42"));
    let base = server.base_url();
    let path = temp_path("events.jsonl");
    let path_arg = path.to_str().expect("utf-8 temp path");
    let out = run(&against(&base, &["--events", path_arg, "-p", "6*7?"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);

    let text = std::fs::read_to_string(&path).expect("the events file");
    std::fs::remove_file(&path).ok();
    let types: Vec<String> = text
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            v["type"].as_str().expect("a type field").to_string()
        })
        .collect();
    for kind in [
        "user_turn",
        "tool_call",
        "tool_result",
        "assistant",
        "stopped",
    ] {
        assert!(
            types.iter().any(|t| t == kind),
            "{kind} missing in {types:?}"
        );
    }
    assert_eq!(types.last().map(String::as_str), Some("stopped"));
}

#[test]
fn without_a_base_url_the_demo_model_answers() {
    let out = run(&["-p", "What is 6*7?"]);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(out.stdout.contains("42"), "{}", out.stdout);
    assert_eq!(out.stdout.lines().count(), 1);
    assert!(
        out.stderr
            .contains("no --base-url or OPENAI_BASE_URL: using the built-in demo model"),
        "{}",
        out.stderr
    );
}

/// The tool calls in an `--events` file, as (name, arguments).
fn tool_calls(events: &Path) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(events).expect("the events file");
    std::fs::remove_file(events).ok();
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .filter(|v| v["type"] == "tool_call")
        .map(|v| {
            (
                v["name"].as_str().unwrap().to_string(),
                v["arguments"].clone(),
            )
        })
        .collect()
}

/// `-p QUESTION` on the demo model with an events file, in `dir`.
fn ask_demo(
    dir: Option<&Path>,
    name: &str,
    extra: &[&str],
    question: &str,
) -> (Finished, Vec<(String, Value)>) {
    let events = temp_path(name);
    let mut args = vec!["--events", events.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-p", question]);
    let mut cmd = command(&args);
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .expect("run the chat example");
    let out = Finished {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    (out, tool_calls(&events))
}

#[test]
fn demo_calculates_with_the_users_own_expression() {
    let (out, calls) = ask_demo(None, "demo-calc.jsonl", &[], "What is 17*23?");
    assert_eq!(
        calls,
        [("calculator".to_string(), json!({"expression": "17*23"}))]
    );
    assert_eq!(out.stdout, "The calculator says 17*23 = 391.\n");
}

#[test]
fn demo_asks_the_clock_for_the_time() {
    let (out, calls) = ask_demo(None, "demo-time.jsonl", &[], "What time is it?");
    assert_eq!(calls, [("current_time".to_string(), json!({}))]);
    assert!(out.stdout.starts_with("It is 2"), "{}", out.stdout);
    assert!(out.stdout.contains("Unix time"), "{}", out.stdout);
}

#[test]
fn demo_lists_and_reads_files_in_the_working_directory() {
    let dir = temp_path("demo-files");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "pikuri was here\n").unwrap();

    let (out, calls) = ask_demo(Some(&dir), "demo-ls.jsonl", &[], "list files");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].0, "list_dir");
    assert!(out.stdout.contains("notes.txt"), "{}", out.stdout);

    let (out, calls) = ask_demo(Some(&dir), "demo-read.jsonl", &[], "read notes.txt");
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(
        calls,
        [("read_file".to_string(), json!({"path": "notes.txt"}))]
    );
    assert!(out.stdout.contains("pikuri was here"), "{}", out.stdout);
}

#[test]
fn demo_says_what_it_is_to_any_other_question() {
    let (out, calls) = ask_demo(None, "demo-other.jsonl", &[], "Who wrote Hamlet?");
    assert!(calls.is_empty(), "{calls:?}");
    assert!(out.stdout.contains("built-in demo model"), "{}", out.stdout);
    assert!(out.stdout.contains("OPENAI_BASE_URL="), "{}", out.stdout);
    assert!(
        out.stdout.contains("scripts/chat-local.sh"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("42"), "{}", out.stdout);
}

#[test]
fn demo_with_no_tools_claims_no_tool_result() {
    let (out, calls) = ask_demo(
        None,
        "demo-none.jsonl",
        &["--tools", "none"],
        "What is 17*23?",
    );
    assert!(calls.is_empty(), "{calls:?}");
    assert!(!out.stdout.contains("391"), "{}", out.stdout);
    assert!(!out.stdout.contains("says"), "{}", out.stdout);
    assert!(out.stdout.contains("not offered"), "{}", out.stdout);
    // Only the offered tools: with the calculator alone, no clock.
    let (out, calls) = ask_demo(
        None,
        "demo-calc-only.jsonl",
        &["--tools", "calculator"],
        "What time is it?",
    );
    assert!(calls.is_empty(), "{calls:?}");
    assert!(out.stdout.contains("current_time tool"), "{}", out.stdout);
}

#[cfg(unix)]
#[test]
fn demo_streams_a_one_shot_answer_and_ctrl_c_stops_it_with_130() {
    let mut chat = Chat::spawn(&["-p", "Who are you?"]);
    // Part of the answer is on stdout before it is complete: it streams.
    chat.wait_stdout("the first words", |out| out.contains("I am the built-in"));
    assert!(
        !chat.stdout().contains("chat-local.sh"),
        "{}",
        chat.stdout()
    );
    interrupt(&chat.child);
    let out = chat.wait();
    assert_eq!(out.code, Some(130), "stderr: {}", out.stderr);
    assert!(out.stderr.ends_with("error: cancelled\n"), "{}", out.stderr);
    assert!(!out.stdout.contains("chat-local.sh"), "{}", out.stdout);
}

#[cfg(unix)]
#[test]
fn demo_repl_survives_one_ctrl_c_during_an_answer() {
    let mut chat = Chat::spawn(&[]);
    chat.wait_prompt(1);
    chat.send("Who are you?");
    chat.wait_stdout("the first words", |out| out.contains("I am the built-in"));
    interrupt(&chat.child);
    chat.wait_prompt(2);
    assert!(chat.stdout().contains("cancelled"), "{}", chat.stdout());
    assert!(
        !chat.stdout().contains("chat-local.sh"),
        "{}",
        chat.stdout()
    );
    chat.send("What is 2+3?");
    chat.wait_stdout("the next answer", |out| out.contains("2+3 = 5"));
    chat.wait_prompt(3);
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    // One token line per turn, not one per model message: the cancelled
    // turn got no usage, the second had two model messages (call, answer).
    let token_lines = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("[main] ctx="))
        .count();
    assert_eq!(token_lines, 1, "{}", out.stderr);
}

#[test]
fn demo_repl_takes_a_line_typed_during_an_answer() {
    let mut chat = Chat::spawn(&[]);
    chat.wait_prompt(1);
    chat.send("What is 17*23?");
    chat.send("and what time is it?");
    chat.wait_prompt(2);
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("(queued: and what time is it?)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("(delivered: and what time is it?)"),
        "{}",
        out.stdout
    );
    // Both questions answered in the one turn: the sum, then the clock.
    assert!(out.stdout.contains("17*23 = 391"), "{}", out.stdout);
    assert!(out.stdout.contains("Unix time"), "{}", out.stdout);
}

#[test]
fn repl_commands_model_reset_save_load_quit() {
    let server = FakeServer::start();
    for answer in ["Hi there.", "Switched.", "Fresh.", "Loaded."] {
        server.push(Reply::text(answer));
    }
    let base = server.base_url();
    let saved = temp_path("history.json");
    let saved_arg = saved.to_str().expect("utf-8 temp path");
    let mut chat = Chat::spawn(&against(&base, &[]));

    chat.wait_prompt(1);
    chat.send("hello");
    chat.wait_prompt(2);
    chat.send("/model other-model");
    chat.wait_prompt(3);
    chat.send("again");
    chat.wait_prompt(4);
    let requests = server.chat_requests();
    assert_eq!(requests[0].body.as_ref().unwrap()["model"], "fake-model");
    assert_eq!(requests[1].body.as_ref().unwrap()["model"], "other-model");
    assert_eq!(
        requests[1].messages().len(),
        4,
        "system, hello, answer, again"
    );

    chat.send(&format!("/save {saved_arg}"));
    chat.wait_prompt(5);
    let json = std::fs::read_to_string(&saved).expect("the saved history");
    std::fs::remove_file(&saved).ok();
    let history = History::parse(&json).expect("the saved file parses");
    assert_eq!(history.messages().len(), 4);

    chat.send("/reset");
    chat.wait_prompt(6);
    chat.send("after reset");
    chat.wait_prompt(7);
    let msgs = server.chat_requests()[2].messages();
    assert_eq!(msgs.len(), 2, "only the system prompt and the new message");
    assert_eq!(msgs[1]["content"], "after reset");

    std::fs::write(&saved, &json).expect("rewrite the history");
    chat.send(&format!("/load {saved_arg}"));
    chat.wait_prompt(8);
    chat.send("after load");
    chat.wait_prompt(9);
    std::fs::remove_file(&saved).ok();
    let msgs = server.chat_requests()[3].messages();
    assert_eq!(msgs.len(), 6, "system, the 4 loaded, the new message");
    assert_eq!(msgs[1]["content"], "hello");

    chat.send("/quit");
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    for answer in ["Hi there.", "Switched.", "Fresh.", "Loaded."] {
        assert!(
            out.stdout.contains(answer),
            "{answer} missing: {}",
            out.stdout
        );
    }
    assert!(
        out.stderr.contains("(saved 4 messages to "),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("(loaded 4 messages from "),
        "{}",
        out.stderr
    );
    server.assert_all_used();
}

#[test]
fn repl_injects_lines_typed_during_a_turn_and_exits_on_eof() {
    let server = FakeServer::start();
    // The delay keeps the first request open while the second line arrives.
    let call = Reply::tool_call("calculator", json!({"expression": "6*7"}));
    server.push(call.with_delay(Duration::from_millis(500)));
    server.push(Reply::text("Done, and noted."));
    let base = server.base_url();
    let mut chat = Chat::spawn(&against(&base, &[]));
    chat.wait_prompt(1);
    chat.send("What is 6*7?");
    chat.send("also, be brief");
    chat.wait_prompt(2);
    let out = chat.finish(); // end of input
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("(queued: also, be brief)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("(delivered: also, be brief)"),
        "{}",
        out.stdout
    );
    let msgs = server.chat_requests()[1].messages();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    assert_eq!(msgs[4]["content"], "also, be brief");
}

#[cfg(unix)]
#[test]
fn repl_ctrl_c_cancels_the_turn_then_exits_at_the_prompt() {
    let server = FakeServer::start();
    server.push(Reply::hang());
    server.push(Reply::text("Back again."));
    let base = server.base_url();
    let mut chat = Chat::spawn(&against(&base, &[]));
    chat.wait_prompt(1);
    chat.send("wait forever");
    wait_for_requests(&server, 1);
    interrupt(&chat.child);
    chat.wait_prompt(2);
    assert!(chat.stdout().contains("cancelled"), "{}", chat.stdout());
    chat.send("and now?");
    chat.wait_prompt(3);
    assert!(chat.stdout().contains("Back again."), "{}", chat.stdout());
    interrupt(&chat.child);
    chat.wait_prompt(4); // the first Ctrl+C at the prompt only warns
    interrupt(&chat.child);
    let out = chat.wait(); // stdin stays open: the Ctrl+C alone ends it
    assert_eq!(out.code, Some(130), "stderr: {}", out.stderr);
    assert!(out.stderr.contains("press Ctrl+C again"), "{}", out.stderr);
}

/// Wait until the server saw `n` chat requests.
fn wait_for_requests(server: &FakeServer, n: usize) {
    let deadline = Instant::now() + TIMEOUT;
    while server.chat_requests().len() < n {
        assert!(Instant::now() < deadline, "no chat request #{n} arrived");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Send SIGINT, as Ctrl+C in a terminal does.
#[cfg(unix)]
fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -INT failed");
}

#[test]
fn repl_falls_back_and_compacts_on_demand() {
    let busy = FakeServer::start();
    busy.respond_with(|_| Reply::status(503, "overloaded"));
    let good = FakeServer::start();
    // A first answer longer than its summary: a summary must shrink the history.
    let a1 = format!("A1. {}", "And so on. ".repeat(20));
    for answer in [a1.as_str(), "A2.", "A3.", "The user counted.", "A4."] {
        good.push(Reply::text(answer));
    }
    let busy_base = busy.base_url();
    let good_base = format!("{},good-model", good.base_url());
    let mut chat = Chat::spawn(&against(&busy_base, &["--fallback", &good_base]));
    chat.wait_prompt(1);
    for (i, line) in ["one", "two", "three"].into_iter().enumerate() {
        chat.send(line);
        chat.wait_prompt(i + 2);
    }
    // One turn's retries on the failing server, then the agent stays on the fallback.
    assert_eq!(busy.chat_requests().len(), 3, "first try and 2 retries");
    chat.send("/compact");
    chat.wait_prompt(5);
    chat.send("four");
    chat.wait_prompt(6);
    let requests = good.chat_requests();
    assert_eq!(requests.len(), 5);
    assert!(
        requests[3].tool_names().is_empty(),
        "the compactor has no tools"
    );
    assert_eq!(requests[4].body.as_ref().unwrap()["model"], "good-model");
    let sent: Vec<String> = requests[4]
        .messages()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(sent[1].starts_with(Compaction::SUMMARY_MARKER), "{sent:?}");
    assert!(sent[1].ends_with("The user counted."));
    assert_eq!(&sent[2..], ["two", "A2.", "three", "A3.", "four"]);
    chat.send("/quit");
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("(compacted 6 messages to 5)"),
        "{}",
        out.stderr
    );
}

#[test]
fn fallback_and_no_compact_flags() {
    let out = Chat::spawn(&["--fallback", "not-a-url", "-p", "hi"]).finish();
    assert_eq!(out.code, Some(2), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("--fallback needs URL[,MODEL]"),
        "{}",
        out.stderr
    );
    // --no-compact: an overflow is an error at once, no summary request.
    let server = FakeServer::start();
    server.push(Reply::status(
        400,
        "the request exceeds the available context size, try increasing it",
    ));
    let base = server.base_url();
    let out = Chat::spawn(&against(&base, &["--no-compact", "-p", "hi"])).finish();
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("exceeds the available context size"),
        "{}",
        out.stderr
    );
    assert_eq!(server.chat_requests().len(), 1);
}

// ---------------------------------------------------------------------------
// Approval of write_file, /usage, --subagents

/// A fresh empty directory for one test.
/// The model's call to write `hello there` to notes.txt.
fn write_notes_call() -> Reply {
    Reply::tool_call(
        "write_file",
        json!({"path": "notes.txt", "content": "hello there"}),
    )
}

/// The approval prompt for [`write_notes_call`].
#[cfg(unix)]
const WRITE_NOTES_ASKS: &str =
    "Allow write_file {\"content\":\"hello there\",\"path\":\"notes.txt\"}? [y]es";

/// A REPL on `args` in `dir` asked to write notes.txt, SIGKILLed at the
/// approval prompt: nothing is written.
#[cfg(unix)]
fn kill_at_the_write_approval(dir: &Path, args: &[&str]) {
    let mut chat = Chat::spawn_in(Some(dir), args);
    chat.wait_prompt(1);
    chat.send("Write hello there to notes.txt");
    chat.wait_stderr("the approval prompt", |err| err.contains(WRITE_NOTES_ASKS));
    chat.child.kill().expect("SIGKILL the chat");
    let out = chat.wait();
    assert_eq!(out.code, None, "killed by a signal: {}", out.stderr);
    assert!(!dir.join("notes.txt").exists());
}

/// The tool messages of a recorded request, in order.
fn tool_results(request: &RecordedRequest) -> Vec<Value> {
    request
        .messages()
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .collect()
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = temp_path(name);
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The REPL on the demo model in `dir`: ask it to write, answer the prompt
/// with `answer`; returns what the process left.
fn demo_write_answered(dir: &Path, answer: &str) -> Finished {
    let mut chat = Chat::spawn_in(Some(dir), &[]);
    chat.wait_prompt(1);
    chat.send("write hello there to notes.txt");
    chat.wait_stderr("the approval prompt", |err| {
        err.contains("Allow write_file {\"content\":\"hello there\",\"path\":\"notes.txt\"}? [y]es")
    });
    assert!(!dir.join("notes.txt").exists(), "written before the answer");
    chat.send(answer);
    chat.wait_prompt(2);
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    out
}

#[test]
fn demo_repl_asks_before_writing_and_y_writes() {
    let dir = fresh_dir("approve-y");
    let out = demo_write_answered(&dir, "y");
    let written = std::fs::read_to_string(dir.join("notes.txt"));
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(written.expect("the written file"), "hello there");
    assert!(
        out.stdout.contains("Done: wrote 11 bytes to notes.txt."),
        "{}",
        out.stdout
    );
    // The answer went to the prompt, not to the agent as a message.
    assert!(!out.stderr.contains("(queued: y)"), "{}", out.stderr);
}

#[test]
fn demo_repl_n_denies_the_write() {
    let dir = fresh_dir("approve-n");
    let out = demo_write_answered(&dir, "n");
    let exists = dir.join("notes.txt").exists();
    std::fs::remove_dir_all(&dir).ok();
    assert!(!exists, "written although denied");
    assert!(
        out.stdout
            .contains("The write_file tool failed: not run: denied: denied by the user"),
        "{}",
        out.stdout
    );
}

#[test]
fn yes_writes_without_asking() {
    let dir = fresh_dir("approve-yes");
    let (out, calls) = ask_demo(Some(&dir), "yes.jsonl", &["-y"], "write hi to a.txt");
    assert_eq!(
        calls,
        [(
            "write_file".to_string(),
            json!({"path": "a.txt", "content": "hi"})
        )]
    );
    assert_eq!(out.stdout, "Done: wrote 2 bytes to a.txt.\n");
    assert!(!out.stderr.contains("Allow"), "{}", out.stderr);

    let mut chat = Chat::spawn_in(Some(&dir), &["--yes"]);
    chat.wait_prompt(1);
    chat.send("write ho to b.txt");
    chat.wait_prompt(2);
    let out = chat.finish();
    let a = std::fs::read_to_string(dir.join("a.txt"));
    let b = std::fs::read_to_string(dir.join("b.txt"));
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(!out.stderr.contains("Allow"), "{}", out.stderr);
    assert_eq!(a.expect("a.txt").as_str(), "hi");
    assert_eq!(b.expect("b.txt").as_str(), "ho");
}

#[test]
fn one_shot_without_a_terminal_denies_writes_and_write_file_stays_inside() {
    let dir = fresh_dir("approve-p");
    std::fs::create_dir_all(dir.join("inner")).unwrap();
    // stdin is not a terminal (ask_demo gives it /dev/null) and no --yes.
    let (out, calls) = ask_demo(Some(&dir), "deny.jsonl", &[], "write hi to a.txt");
    let exists = dir.join("a.txt").exists();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(!exists, "written although nobody approved");
    assert!(out.stdout.contains("not run: denied:"), "{}", out.stdout);
    assert!(out.stderr.contains("pass --yes"), "{}", out.stderr);

    // Confined to the working directory, like read_file.
    let (out, _) = ask_demo(
        Some(&dir.join("inner")),
        "escape.jsonl",
        &["--yes"],
        "write x to ../escaped.txt",
    );
    let escaped = dir.join("escaped.txt").exists();
    std::fs::remove_dir_all(&dir).ok();
    assert!(!escaped, "wrote outside the working directory");
    assert!(out.stdout.contains("contains `..`"), "{}", out.stdout);
}

#[cfg(unix)]
#[test]
fn demo_repl_ctrl_c_during_the_prompt_cancels_and_the_next_line_is_a_message() {
    let dir = fresh_dir("approve-ctrl-c");
    let mut chat = Chat::spawn_in(Some(&dir), &[]);
    chat.wait_prompt(1);
    chat.send("write hi to a.txt");
    chat.wait_stderr("the approval prompt", |err| {
        err.contains("Allow write_file")
    });
    interrupt(&chat.child);
    chat.wait_prompt(2);
    // Not swallowed by the abandoned prompt: a question of its own.
    chat.send("What is 2+3?");
    chat.wait_stdout("the answer", |out| out.contains("2+3 = 5"));
    chat.wait_prompt(3);
    assert!(!dir.join("a.txt").exists(), "written after a cancel");
    // The abandoned prompt is gone: the next write asks anew, and its
    // answer is its own.
    chat.send("write ho to a.txt");
    chat.wait_stderr("a second prompt", |err| {
        err.matches("Allow write_file").count() == 2
    });
    chat.send("y");
    chat.wait_prompt(4);
    let out = chat.finish();
    let written = std::fs::read_to_string(dir.join("a.txt"));
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(written.expect("a.txt after y").as_str(), "ho");
    assert!(out.stdout.contains("cancelled"), "{}", out.stdout);
}

#[test]
fn repl_usage_reports_the_last_turn_and_the_conversation() {
    let server = FakeServer::start();
    let call = Reply::tool_call("calculator", json!({"expression": "6*7"}));
    server.push(call.with_usage(100, 10));
    server.push(Reply::text("42.").with_usage(130, 5));
    server.push(Reply::text("Again.").with_usage(200, 7));
    let base = server.base_url();
    let mut chat = Chat::spawn(&against(&base, &[]));
    chat.wait_prompt(1);
    chat.send("/usage");
    chat.wait_prompt(2);
    chat.send("What is 6*7?");
    chat.wait_prompt(3);
    chat.send("/usage");
    chat.wait_prompt(4);
    // stderr is read by a thread of its own: the prompt on stdout can
    // arrive before the report on stderr.
    chat.wait_stderr("the second report", |err| {
        err.matches("conversation:").count() >= 2
    });
    let first = chat.stderr();
    chat.send("again");
    chat.wait_prompt(5);
    chat.send("/usage");
    chat.wait_prompt(6);
    chat.send("/help");
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(first.contains("last turn: none yet"), "{first}");
    assert!(
        first.contains(
            "last turn: input 230, output 15, cached -, reasoning -, cache creation -, \
             total 245, requests 2\nconversation: input 230, output 15"
        ),
        "{first}"
    );
    assert!(
        out.stderr.contains(
            "last turn: input 200, output 7, cached -, reasoning -, cache creation -, \
             total 207, requests 1\nconversation: input 430, output 22, cached -, \
             reasoning -, cache creation -, total 452, requests 3"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("/usage "),
        "/help lists it: {}",
        out.stderr
    );
    server.assert_all_used();
}

#[test]
fn subagents_offers_the_personas_and_keeps_the_web_tools_off_the_main_agent() {
    let server = FakeServer::start();
    server.push(Reply::text("Hello."));
    let delegate = json!({"name": "researcher", "task": "find pikuri"});
    for _ in 0..2 {
        server.push(Reply::tool_call("agent", delegate.clone()));
        server.push(Reply::text("Found it.")); // the researcher
        server.push(Reply::text("It found it.")); // the main agent
    }
    let base = server.base_url();
    let events = temp_path("subagents.jsonl");
    let events_arg = events.to_str().unwrap();
    let args = ["--subagents", "--events", events_arg, "-p", "hi"];
    let out = run(&against(&base, &args));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let log = std::fs::read_to_string(&events).expect("the events file");
    std::fs::remove_file(&events).ok();
    assert!(!log.contains("trifecta"), "{log}");

    let requests = server.chat_requests();
    let system = requests[0].messages()[0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains("<available_agents>"), "{system}");
    assert!(system.contains("- researcher: "), "{system}");
    assert!(system.contains("- file_miner: "), "{system}");
    let main_tools = requests[0].tool_names();
    assert!(main_tools.iter().any(|t| t == "agent"), "{main_tools:?}");
    for web in ["fetch", "web_scrape", "web_search"] {
        assert!(!main_tools.iter().any(|t| t == web), "{main_tools:?}");
    }

    // Without a SearXNG URL the researcher has no web_search; with one it has.
    let out = run(&against(&base, &["--subagents", "-p", "research"]));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "It found it.\n");
    let searx = [
        "--subagents",
        "--searxng",
        "http://127.0.0.1:9",
        "-p",
        "research",
    ];
    let out = run(&against(&base, &searx));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let requests = server.chat_requests();
    assert_eq!(requests[2].tool_names(), ["web_scrape", "fetch"]);
    assert_eq!(
        requests[5].tool_names(),
        ["web_search", "web_scrape", "fetch"]
    );
    server.assert_all_used();
}

#[test]
fn demo_with_subagents_still_reads_files_and_delegates_to_the_file_miner() {
    let dir = fresh_dir("demo-subagents");
    std::fs::write(dir.join("notes.txt"), "pikuri was here\n").unwrap();
    let (out, calls) = ask_demo(
        Some(&dir),
        "sub-read.jsonl",
        &["--subagents"],
        "read notes.txt",
    );
    assert_eq!(
        calls,
        [("read_file".to_string(), json!({"path": "notes.txt"}))]
    );
    assert!(out.stdout.contains("pikuri was here"), "{}", out.stdout);

    let (out, calls) = ask_demo(
        Some(&dir),
        "sub-ask.jsonl",
        &["--subagents", "--tools", "calculator"],
        "ask the file_miner to list files",
    );
    std::fs::remove_dir_all(&dir).ok();
    let names: Vec<&str> = calls.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["agent", "list_dir"], "{calls:?}");
    assert!(
        out.stdout.starts_with("The file_miner sub-agent answered:"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("notes.txt"), "{}", out.stdout);
}

#[test]
fn session_keeps_the_conversation_in_a_journal_across_runs() {
    let server = FakeServer::start();
    server.push(Reply::text("Hi, Ada."));
    server.push(Reply::text("You are Ada."));
    let dir = fresh_dir("session");
    let session = dir.join("talk");
    let session = session.to_str().unwrap();
    let base = server.base_url();
    let out = run(&against(&base, &["--session", session, "-p", "I am Ada."]));
    assert_eq!(out.stdout.trim(), "Hi, Ada.", "{}", out.stderr);
    // The next start goes on with the same conversation.
    let out = run(&against(&base, &["--session", session, "-p", "Who am I?"]));
    assert_eq!(out.stdout.trim(), "You are Ada.", "{}", out.stderr);
    let sent = server.chat_requests()[1].messages();
    let contents: Vec<&str> = sent.iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(contents.contains(&"I am Ada."), "{contents:?}");
    assert!(contents.contains(&"Hi, Ada."), "{contents:?}");
    assert!(dir.join("talk.journal").exists());
    std::fs::remove_dir_all(&dir).ok();
}

/// The messages of a request after the system prompt, as (role, content)
/// pairs (a tool call's content: its name).
fn turns(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let content = match m["tool_calls"][0]["function"]["name"].as_str() {
                Some(name) => format!("call {name}"),
                None => m["content"].as_str().unwrap_or("").to_string(),
            };
            (m["role"].as_str().unwrap_or("").to_string(), content)
        })
        .collect()
}

/// Issue 30: `--session`, SIGKILLed mid-turn (after a tool round, while
/// the answer streams): the next start finishes that turn from where the
/// journal stops (the tool's journaled result is not run again, the cut
/// stream's request is made again as it was), then takes the new message.
#[cfg(unix)]
#[test]
fn session_killed_mid_stream_finishes_the_turn_at_the_next_start() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("calculator", json!({"expression": "6*7"})));
    // Two pieces of the answer, then silence with the socket open.
    let answer = "It is forty-two.";
    server.push(Reply::text(answer).with_chunk_chars(6).hang_after(2));
    server.push(Reply::text(answer));
    server.push(Reply::text("You asked for 6*7."));
    let dir = fresh_dir("session-kill");
    let session = dir.join("talk");
    let session = session.to_str().unwrap();
    let base = server.base_url();
    let flags = ["--session", session, "--tools", "calculator", "-p"];

    let mut args = against(&base, &flags);
    args.push("What is 6*7?");
    let mut chat = Chat::spawn(&args);
    chat.wait_stdout("the answer's first piece", |out| out.contains("It is"));
    chat.child.kill().expect("SIGKILL the chat"); // no handler runs
    let out = chat.wait();
    assert_eq!(out.code, None, "killed by a signal: {}", out.stderr);
    assert!(!out.stdout.contains(answer), "{}", out.stdout);
    assert_eq!(server.chat_requests().len(), 2);

    let mut args = against(&base, &flags);
    args.push("What did I ask?");
    let out = run(&args);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stderr
            .contains("the last turn of this session was cut off"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.ends_with("You asked for 6*7.\n"),
        "{}",
        out.stdout
    );
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 4);
    // The cut-off request again, as it was: the calculator ran once.
    assert_eq!(requests[2].messages(), requests[1].messages());
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(r, c)| (r.to_string(), c.to_string()))
            .collect()
    };
    assert_eq!(
        turns(&requests[3].messages()),
        pairs(&[
            ("user", "What is 6*7?"),
            ("assistant", "call calculator"),
            ("tool", "42"),
            ("assistant", answer),
            ("user", "What did I ask?"),
        ])
    );
    server.assert_all_used();
    std::fs::remove_dir_all(&dir).ok();
}

/// The same in the REPL, killed while its first request waits for an
/// answer: the next start answers that line first, then the REPL goes on.
#[cfg(unix)]
#[test]
fn session_repl_killed_mid_request_answers_that_line_at_the_next_start() {
    let server = FakeServer::start();
    server.push(Reply::hang());
    server.push(Reply::text("Hello, Ada."));
    server.push(Reply::text("Your name is Ada."));
    let dir = fresh_dir("session-repl-kill");
    let session = dir.join("talk");
    let session = session.to_str().unwrap();
    let base = server.base_url();
    let args = against(&base, &["--session", session, "--tools", "none"]);

    let mut chat = Chat::spawn(&args);
    chat.wait_prompt(1);
    chat.send("I am Ada.");
    wait_for_requests(&server, 1);
    chat.child.kill().expect("SIGKILL the chat");
    let out = chat.wait();
    assert_eq!(out.code, None, "killed by a signal: {}", out.stderr);

    let mut chat = Chat::spawn(&args);
    chat.wait_prompt(1);
    assert!(chat.stdout().contains("Hello, Ada."), "{}", chat.stdout());
    chat.send("What is my name?");
    chat.wait_prompt(2);
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stderr
            .contains("the last turn of this session was cut off"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("Your name is Ada."), "{}", out.stdout);
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1].messages(), requests[0].messages());
    let got = turns(&requests[2].messages());
    let want = [
        ("user", "I am Ada."),
        ("assistant", "Hello, Ada."),
        ("user", "What is my name?"),
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for ((role, content), (r, c)) in got.iter().zip(want) {
        assert_eq!((role.as_str(), content.as_str()), (r, c));
    }
    server.assert_all_used();
    std::fs::remove_dir_all(&dir).ok();
}

// Issue 29, item 10: the API by flag or environment, images.

/// `--image FILE` goes with the `-p` message as an image part; a file that
/// is not an image fails before any request, naming it.
#[test]
fn image_flag_attaches_to_the_message() {
    let server = FakeServer::start();
    server.push(Reply::text("A pixel."));
    let base = server.base_url();
    let gif = temp_path("pixel.gif");
    std::fs::write(&gif, b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").unwrap();
    let gif_arg = gif.to_str().unwrap();
    let out = run(&against(&base, &["--image", gif_arg, "-p", "What is it?"]));
    std::fs::remove_file(&gif).ok();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let sent = &server.chat_requests()[0].messages()[1];
    assert_eq!(sent["content"][0]["text"], "What is it?");
    let url = sent["content"][1]["image_url"]["url"].as_str().unwrap();
    assert!(url.starts_with("data:image/gif;base64,R0lGODlh"), "{url}");

    let text = temp_path("not-an-image.txt");
    std::fs::write(&text, "hello").unwrap();
    let out = run(&against(
        &base,
        &["--image", text.to_str().unwrap(), "-p", "x"],
    ));
    std::fs::remove_file(&text).ok();
    // A bad value of a flag: a usage error (issue 38, item 8).
    assert_eq!(out.code, Some(2), "stderr: {}", out.stderr);
    assert!(out.stderr.contains("--image"), "{}", out.stderr);
    assert!(out.stderr.contains("not an image"), "{}", out.stderr);
    assert_eq!(server.chat_requests().len(), 1);
}

/// `--api responses` sends to `<base>/responses`; a bad `--api` or
/// `PIKURI_API` is a usage error (exit 2).
#[test]
fn api_flag_and_environment() {
    let server = FakeServer::start();
    let base = server.base_url();
    let _ = run(&against(&base, &["--api", "responses", "-p", "hi"]));
    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert!(paths.iter().any(|p| p == "/v1/responses"), "{paths:?}");

    let out = run(&against(&base, &["--api", "soap", "-p", "hi"]));
    assert_eq!(out.code, Some(2), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("chat, anthropic, responses or gemini"),
        "{}",
        out.stderr
    );
    let out = command(&against(&base, &["-p", "hi"]))
        .env("PIKURI_API", "soap")
        .output()
        .expect("run the chat example");
    assert_eq!(out.status.code(), Some(2));
}

/// `/image FILE` attaches to the next line only; `/api` names the API.
#[test]
fn repl_image_and_api_commands() {
    let server = FakeServer::start();
    server.push(Reply::text("A pixel."));
    server.push(Reply::text("Text."));
    let base = server.base_url();
    let gif = temp_path("repl.gif");
    std::fs::write(&gif, b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").unwrap();
    let mut chat = Chat::spawn(&against(&base, &[]));
    chat.wait_prompt(1);
    chat.send(&format!("/image {}", gif.to_str().unwrap()));
    chat.wait_prompt(2);
    chat.send("What is it?");
    chat.wait_prompt(3);
    chat.send("And now?");
    chat.wait_prompt(4);
    chat.send("/api");
    chat.wait_prompt(5);
    chat.send("/quit");
    let out = chat.finish();
    std::fs::remove_file(&gif).ok();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stderr
            .contains("(1 image(s) attached to the next message)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("(api: chat_completions)"),
        "{}",
        out.stderr
    );
    let requests = server.chat_requests();
    assert_eq!(requests[0].messages()[1]["content"][1]["type"], "image_url");
    assert_eq!(requests[1].messages()[3]["content"], "And now?");
}

/// The demo model answers over each API's own wire format: the same
/// calculator round and answer with `--api anthropic`, `--api responses`
/// and `--api gemini`.
#[test]
fn demo_speaks_anthropic_and_responses() {
    for api in ["anthropic", "responses", "gemini"] {
        let (out, calls) = ask_demo(
            None,
            &format!("demo-api-{api}.jsonl"),
            &["--api", api],
            "What is 17*23?",
        );
        assert_eq!(
            calls,
            [("calculator".to_string(), json!({"expression": "17*23"}))],
            "{api}"
        );
        assert_eq!(out.stdout, "The calculator says 17*23 = 391.\n", "{api}");
    }
}

/// A scripted FakeServer driven through `--api anthropic` and `--api
/// responses`: a tool round then a streamed answer, each request on the
/// API's own route and in its shape.
#[test]
fn scripted_tool_round_on_anthropic_and_responses() {
    for (api, route) in [
        ("anthropic", "/v1/messages"),
        ("responses", "/v1/responses"),
        (
            "gemini",
            "/v1/models/fake-model:streamGenerateContent?alt=sse",
        ),
    ] {
        let server = FakeServer::start();
        server.set_strict(true);
        server.push(
            Reply::tool_call("calculator", json!({"expression": "6*7"})).with_reasoning("Sum."),
        );
        server.push(Reply::text("The answer is 42.").with_chunk_chars(4));
        let base = server.base_url();
        let out = run(&against(&base, &["--api", api, "-p", "What is 6*7?"]));
        assert_eq!(out.code, Some(0), "{api} stderr: {}", out.stderr);
        assert_eq!(out.stdout, "The answer is 42.\n", "{api}");
        assert!(
            server.rejections().is_empty(),
            "{api}: {:?}",
            server.rejections()
        );
        let requests = server.chat_requests();
        assert_eq!(requests.len(), 2, "{api}");
        assert!(requests.iter().all(|r| r.path == route), "{api}");
        assert!(requests[0].is_stream(), "{api}: streams by default");
        let results: Vec<Value> = requests[1]
            .conversation()
            .into_iter()
            .filter(|m| m["role"] == "tool")
            .collect();
        assert_eq!(results.len(), 1, "{api}");
        assert_eq!(results[0]["content"], "42", "{api}");
        server.assert_all_used();
    }
}

// Issue 38, items 6 to 8 and 19: `--session` and the command line tried as
// a user would.

/// Item 6: the same `-p` question run again after a crash: finishing the
/// cut-off turn answers it, once; it is not asked a second time (no third
/// request, the answer printed once, the question once in the history).
#[cfg(unix)]
#[test]
fn session_same_prompt_after_a_crash_is_answered_once() {
    let server = FakeServer::start();
    server.push(Reply::hang());
    server.push(Reply::text("It is 42."));
    server.push(Reply::text("You asked for 6*7."));
    let dir = fresh_dir("session-same-prompt");
    let session = dir.join("talk");
    let session = session.to_str().unwrap();
    let base = server.base_url();
    let args = against(
        &base,
        &[
            "--session",
            session,
            "--tools",
            "none",
            "-p",
            "What is 6*7?",
        ],
    );

    let mut chat = Chat::spawn(&args);
    wait_for_requests(&server, 1);
    chat.child.kill().expect("SIGKILL the chat");
    let out = chat.wait();
    assert_eq!(out.code, None, "killed by a signal: {}", out.stderr);

    let out = run(&args);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "It is 42.\n");
    assert!(
        out.stderr
            .contains("the last turn of this session was cut off: finishing it (\"What is 6*7?\")"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("not asked again"), "{}", out.stderr);
    assert_eq!(server.chat_requests().len(), 2);

    // The next question sees the first one once, answered once.
    let out = run(&against(
        &base,
        &[
            "--session",
            session,
            "--tools",
            "none",
            "-p",
            "What did I ask?",
        ],
    ));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "You asked for 6*7.\n");
    assert!(!out.stderr.contains("cut off"), "{}", out.stderr);
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 3);
    let want = [
        ("user", "What is 6*7?"),
        ("assistant", "It is 42."),
        ("user", "What did I ask?"),
    ];
    let got = turns(&requests[2].messages());
    let got: Vec<(&str, &str)> = got.iter().map(|(r, c)| (r.as_str(), c.as_str())).collect();
    assert_eq!(got, want);
    server.assert_all_used();
    std::fs::remove_dir_all(&dir).ok();
}

/// Item 7 and item 8's banner and notice: the REPL killed at an approval
/// prompt and started again asks that approval again, answerable like any
/// other (the `y` goes to the prompt, not to the model); the banner comes
/// first, then the notice naming the question.
#[cfg(unix)]
#[test]
fn session_repl_killed_at_an_approval_prompt_asks_it_again() {
    let server = FakeServer::start();
    server.push(write_notes_call());
    server.push(Reply::text("Written."));
    let dir = fresh_dir("session-approval");
    let base = server.base_url();
    let args = against(&base, &["--session", "talk", "--tools", "write_file"]);
    kill_at_the_write_approval(&dir, &args);

    let mut chat = Chat::spawn_in(Some(&dir), &args);
    chat.wait_stderr("the approval prompt again", |err| {
        err.contains(WRITE_NOTES_ASKS)
    });
    chat.send("y");
    chat.wait_prompt(1);
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let written = std::fs::read_to_string(dir.join("notes.txt"));
    assert_eq!(
        written.as_deref().ok(),
        Some("hello there"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("Written."), "{}", out.stdout);
    assert!(!out.stderr.contains("(queued: y)"), "{}", out.stderr);
    assert!(!out.stderr.contains("end of input"), "{}", out.stderr);
    let banner = out.stderr.find("chatting with").expect("the banner");
    let notice = out
        .stderr
        .find("cut off: finishing it (\"Write hello there to notes.txt\")")
        .expect("the notice naming the question");
    assert!(banner < notice, "{}", out.stderr);
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 2, "{}", out.stderr);
    let results = tool_results(&requests[1]);
    assert_eq!(results[0]["content"], "wrote 11 bytes to notes.txt");
    server.assert_all_used();
    std::fs::remove_dir_all(&dir).ok();
}

/// Item 8: a `--session` name the journal cannot use (a space, non-ASCII,
/// a leading dot, no file at all) is a usage error naming `--session`, and
/// nothing is written.
#[test]
fn session_names_a_journal_cannot_use_are_usage_errors() {
    let dir = fresh_dir("session-names");
    for name in ["my chat", "sessión", ".hidden", "..", "x/.journal"] {
        let out = Chat::spawn_in(Some(&dir), &["--session", name, "-p", "hi"]).finish();
        assert_eq!(out.code, Some(2), "{name}: {}", out.stderr);
        assert!(out.stderr.contains("--session"), "{name}: {}", out.stderr);
        assert!(!out.stderr.contains("run id"), "{name}: {}", out.stderr);
    }
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
    // A name it can use, with `.journal` or without, in the current folder.
    for name in ["my-chat_1.2", "other.journal"] {
        let out = Chat::spawn_in(Some(&dir), &["--session", name, "-p", "What is 2+2?"]).finish();
        assert_eq!(out.code, Some(0), "{name}: {}", out.stderr);
    }
    assert!(dir.join("my-chat_1.2.journal").is_file());
    assert!(dir.join("other.journal").is_file());
    std::fs::remove_dir_all(&dir).ok();
}

/// Item 8: a `--session` in a folder that does not exist is refused (exit
/// 2, naming the flag); the folder is not created.
#[test]
fn session_in_a_missing_folder_is_refused_and_not_created() {
    let dir = fresh_dir("session-missing-parent");
    let missing = dir.join("missing");
    let path = missing.join("deeper").join("talk");
    let out = run(&["--session", path.to_str().unwrap(), "-p", "hi"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--session"), "{}", out.stderr);
    assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
    assert!(!missing.exists(), "created a folder the user did not make");
    // A folder named as the session: refused, not `<folder>.journal`.
    let out = run(&["--session", dir.to_str().unwrap(), "-p", "hi"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("is a folder"), "{}", out.stderr);
    // A file where the folder should be: refused the same way.
    std::fs::write(&missing, "").unwrap();
    let out = run(&[
        "--session",
        missing.join("talk").to_str().unwrap(),
        "-p",
        "hi",
    ]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    std::fs::remove_dir_all(&dir).ok();
}

/// Item 8 (ATTACKS.md, the command line): every bad flag value exits 2
/// with a message naming the flag, as `--help` promises; so does a bad
/// value in a variable the flag falls back on.
#[test]
fn every_bad_flag_value_exits_2_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--base-url", "127.0.0.1:8080/v1"], "--base-url"),
        (&["--base-url", "ftp://example.com"], "--base-url"),
        (&["--model", " "], "--model"),
        (&["--api-key", ""], "--api-key"),
        (&["--api", "soap"], "--api"),
        (&["--image", "/nonexistent/pikuri.png"], "--image"),
        (&["--max-steps", "0"], "--max-steps"),
        (&["--on-exhausted", "panic"], "--on-exhausted"),
        (&["--context-window", "lots"], "--context-window"),
        (&["--fallback", "127.0.0.1:1"], "--fallback"),
        (
            &["--events", "/nonexistent/pikuri/events.jsonl"],
            "--events",
        ),
        (&["--session", "my chat"], "--session"),
        (&["--tools", "shell"], "--tools"),
        (&["--searxng", "searx.local"], "--searxng"),
        (&["--mcp", ""], "--mcp"),
        (&["--mcp-url", "localhost:1/mcp"], "--mcp-url"),
        (&["-p", "hi", "--model"], "--model"),
    ];
    for (flags, flag) in cases {
        let mut args = flags.to_vec();
        if args[0] != "-p" {
            args.extend(["-p", "hi"]);
        }
        let out = run(&args);
        assert_eq!(out.code, Some(2), "{flags:?}: {}", out.stderr);
        assert!(out.stderr.contains(flag), "{flags:?}: {}", out.stderr);
    }
    let out = run(&["-p", " "]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    for (var, value) in [
        ("OPENAI_BASE_URL", "127.0.0.1:8080/v1"),
        ("ANTHROPIC_BASE_URL", "127.0.0.1:8080"),
        ("PIKURI_API", "soap"),
        ("OPENAI_FALLBACK_URLS", "127.0.0.1:1"),
        ("SEARXNG_URL", "searx.local"),
    ] {
        let out = command(&["-p", "hi"])
            .env(var, value)
            .output()
            .expect("run the chat example");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}: {stderr}");
        assert!(stderr.contains(var), "{var}: {stderr}");
    }
}

/// Item 8: `--help` tells what a session leaves on disk and which names
/// it takes, and what a restart does with `-p` and a pending approval.
#[test]
fn help_describes_the_session_files_and_restarts() {
    let out = run(&["--help"]);
    assert_eq!(out.code, Some(0));
    for words in [
        "NAME.lock",
        "not\n                            starting with a dot",
        "none\n                            is created",
        "not asked again",
        "approval it was waiting for is asked again",
    ] {
        assert!(out.stdout.contains(words), "{words}: {}", out.stdout);
    }
}

/// Item 19: the README's line `ANTHROPIC_API_KEY=... ANTHROPIC_MODEL=...
/// cargo run --example chat` speaks Anthropic's API with that model, as
/// `ChatTransport::from_env` reads the variables, instead of the demo
/// model. `ANTHROPIC_BASE_URL` is the server's root, as the SDK takes it.
#[test]
fn anthropic_variables_alone_choose_anthropic_as_from_env_does() {
    let server = FakeServer::start();
    server.set_strict(true);
    server.push(Reply::text("Hello from Claude."));
    server.push(Reply::text("Again."));
    let base = server.base_url();
    let root = base.strip_suffix("/v1").expect("a /v1 base");
    let out = command(&["-p", "hi"])
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_MODEL", "claude-test")
        .env("ANTHROPIC_BASE_URL", root)
        .output()
        .expect("run the chat example");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("demo model"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello from Claude.\n");
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].body.as_ref().unwrap()["model"], "claude-test");
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    // With an OpenAI variable set too, chat completions stays the default
    // (as `from_env` decides), and `PIKURI_API` picks Anthropic all the same.
    let out = command(&["-p", "hi"])
        .env("ANTHROPIC_MODEL", "claude-test")
        .env("ANTHROPIC_BASE_URL", root)
        .env("OPENAI_BASE_URL", &base)
        .env("OPENAI_MODEL", "fake-model")
        .env("PIKURI_API", "anthropic")
        .output()
        .expect("run the chat example");
    assert_eq!(out.status.code(), Some(0));
    let requests = server.chat_requests();
    assert_eq!(requests[1].path, "/v1/messages");
    assert_eq!(requests[1].body.as_ref().unwrap()["model"], "claude-test");
}

/// Item 8: the resume notice names the cut-off question on one line, its
/// control characters made harmless and its length bounded.
#[cfg(unix)]
#[test]
fn resume_notice_names_the_question_sanitized_and_bounded() {
    let server = FakeServer::start();
    server.push(Reply::hang());
    server.push(Reply::text("Done."));
    let dir = fresh_dir("session-notice");
    let session = dir.join("talk");
    let session = session.to_str().unwrap();
    let base = server.base_url();
    let question = format!("line one\nline two \x1b[31mred {}", "x".repeat(500));
    let args = against(
        &base,
        &["--session", session, "--tools", "none", "-p", &question],
    );
    let mut chat = Chat::spawn(&args);
    wait_for_requests(&server, 1);
    chat.child.kill().expect("SIGKILL the chat");
    chat.wait();

    let out = run(&args);
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "Done.\n");
    let notice = out
        .stderr
        .lines()
        .find(|l| l.contains("cut off: finishing it"))
        .expect("the notice");
    assert!(notice.contains("(\"line one line two "), "{notice}");
    assert!(!notice.contains('\x1b'), "{notice}");
    assert!(notice.contains("xxx…\")"), "{notice}");
    assert!(notice.chars().count() < 200, "{notice}");
    server.assert_all_used();
    std::fs::remove_dir_all(&dir).ok();
}

/// Item 8: a session another chat has open is refused in the user's
/// terms: the flag, the lock file, what to do.
#[test]
fn session_held_by_another_chat_names_the_lock_file() {
    let server = FakeServer::start();
    let dir = fresh_dir("session-locked");
    let base = server.base_url();
    let mut first = Chat::spawn_in(Some(&dir), &against(&base, &["--session", "talk"]));
    first.wait_prompt(1);
    let second = Chat::spawn_in(
        Some(&dir),
        &against(&base, &["--session", "talk", "-p", "hi"]),
    )
    .finish();
    assert_eq!(second.code, Some(1), "{}", second.stderr);
    assert!(
        second
            .stderr
            .contains("--session talk.journal is in use by another chat"),
        "{}",
        second.stderr
    );
    assert!(second.stderr.contains("talk.lock"), "{}", second.stderr);
    let out = first.finish();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(server.chat_requests().is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

/// Item 7 with stdin closed: no answer can come, so the re-asked approval
/// is denied (the model is told), nothing is written, and the chat ends.
#[cfg(unix)]
#[test]
fn session_repl_restarted_with_stdin_closed_denies_the_re_asked_approval() {
    let server = FakeServer::start();
    server.push(write_notes_call());
    server.push(Reply::text("Not written."));
    let dir = fresh_dir("session-approval-eof");
    let base = server.base_url();
    let args = against(&base, &["--session", "talk", "--tools", "write_file"]);
    kill_at_the_write_approval(&dir, &args);

    let out = Chat::spawn_in(Some(&dir), &args).finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(!dir.join("notes.txt").exists(), "{}", out.stderr);
    assert!(out.stdout.contains("Not written."), "{}", out.stdout);
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 2, "{}", out.stderr);
    let results = tool_results(&requests[1]);
    let result = results[0]["content"].as_str().unwrap_or_default();
    assert!(result.contains("end of input"), "{result}");
    server.assert_all_used();
    std::fs::remove_dir_all(&dir).ok();
}

/// ATTACKS.md, the command line: file names with a space, non-ASCII and a
/// leading dot work for the flags that take any file (`--events`,
/// `--image`). A guard: they worked before issue 38 too.
#[test]
fn file_flags_take_names_with_spaces_non_ascii_and_a_leading_dot() {
    let server = FakeServer::start();
    server.push(Reply::text("A pixel."));
    let dir = fresh_dir("odd-names");
    let events = dir.join(".my évents.jsonl");
    let gif = dir.join(".a pïxel.gif");
    std::fs::write(&gif, b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").unwrap();
    let base = server.base_url();
    let out = run(&against(
        &base,
        &[
            "--events",
            events.to_str().unwrap(),
            "--image",
            gif.to_str().unwrap(),
            "-p",
            "What is it?",
        ],
    ));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "A pixel.\n");
    let lines = std::fs::read_to_string(&events).expect("the events file");
    assert!(lines.lines().count() > 1, "{lines}");
    let sent = &server.chat_requests()[0].messages()[1];
    assert_eq!(sent["content"][1]["type"], "image_url");
    std::fs::remove_dir_all(&dir).ok();
}

/// Issue 40: `--skills DIR` gives the model the skills' names and
/// descriptions and the `skill` tool; a broken skill is named on stderr and
/// left out; `/skills` lists them; a missing folder is a usage error.
#[test]
fn skills_flag_and_command() {
    let dir = fresh_dir("skills");
    std::fs::create_dir_all(dir.join("haiku")).unwrap();
    std::fs::write(
        dir.join("haiku/SKILL.md"),
        "---\nname: haiku\ndescription: Writes haiku.\n---\nFive, seven, five.\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("broken")).unwrap();
    std::fs::write(dir.join("broken/SKILL.md"), "no front matter\n").unwrap();
    let server = FakeServer::start();
    server.push(Reply::tool_call("skill", json!({"name": "haiku"})));
    server.push(Reply::text("An old silent pond."));
    let base = server.base_url();
    let skills = dir.display().to_string();

    let out = run(&against(
        &base,
        &["--skills", &skills, "--tools", "none", "-p", "A haiku?"],
    ));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "An old silent pond.\n");
    assert!(
        out.stderr.contains("warning: skill left out:"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("broken"), "{}", out.stderr);
    let requests = server.chat_requests();
    let system = requests[0].system().unwrap();
    assert!(system.contains("- haiku: Writes haiku."), "{system}");
    assert_eq!(requests[0].tool_names(), ["skill"]);
    let read = requests[1].messages().last().unwrap()["content"].clone();
    assert!(
        read.as_str().unwrap().contains("Five, seven, five."),
        "{read}"
    );

    let mut chat = Chat::spawn(&against(&base, &["--skills", &skills, "--tools", "none"]));
    chat.wait_prompt(1);
    chat.send("/skills");
    chat.wait_stderr("the skill list", |e| e.contains("haiku: Writes haiku."));
    assert!(chat.stderr().contains("(left out: "), "{}", chat.stderr());
    chat.send("/quit");
    assert_eq!(chat.finish().code, Some(0));

    let missing = dir.join("missing").display().to_string();
    let out = run(&against(&base, &["--skills", &missing, "-p", "hi"]));
    assert_eq!(out.code, Some(2), "stderr: {}", out.stderr);
    assert!(out.stderr.contains("--skills"), "{}", out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 39: a guard of each kind from the command line. Tool results are
/// redacted by default (`--no-redact` turns it off), `--block-input`
/// answers a message itself, `--deny-tool` refuses a call before it runs,
/// `--max-answer-chars` sends a long answer back; what tripped is on
/// stderr.
#[test]
fn guard_flags_redact_block_deny_and_bound_the_answer() {
    let dir = fresh_dir("guards");
    std::fs::write(dir.join("note.txt"), "write to jo@example.com").unwrap();
    let server = FakeServer::start();
    let base = server.base_url();
    let read = || Reply::tool_call("read_file", json!({"path": "note.txt"}));
    let tool_result = |n: usize| {
        server.chat_requests()[n].messages().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };

    // Redacted by default.
    server.push(read()).push(Reply::text("Noted."));
    let out = Chat::spawn_in(Some(&dir), &against(&base, &["-p", "read note.txt"])).finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        tool_result(1).contains("[redacted email]"),
        "{}",
        tool_result(1)
    );
    assert!(
        out.stderr
            .contains("(guard redact at tool_output: replaced"),
        "{}",
        out.stderr
    );
    // Not with --no-redact.
    server.push(read()).push(Reply::text("Noted."));
    let out = Chat::spawn_in(
        Some(&dir),
        &against(&base, &["--no-redact", "-p", "read note.txt"]),
    )
    .finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        tool_result(3).contains("jo@example.com"),
        "{}",
        tool_result(3)
    );

    // A blocked message costs no request.
    let before = server.chat_requests().len();
    let out = run(&against(
        &base,
        &["--block-input", "password", "-p", "My PASSWORD is x"],
    ));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stdout.contains("blocked by --block-input"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("(guard block-input at input: answered"),
        "{}",
        out.stderr
    );
    assert_eq!(server.chat_requests().len(), before);

    // A denied tool never runs; the model is told why.
    server
        .push(Reply::tool_call("calculator", json!({"expression": "1+1"})))
        .push(Reply::text("I may not calculate."));
    let out = run(&against(
        &base,
        &["--deny-tool", "calculator", "-p", "1+1?"],
    ));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let n = server.chat_requests().len() - 1;
    assert!(
        tool_result(n).contains("does not allow the tool `calculator`"),
        "{}",
        tool_result(n)
    );
    assert!(
        out.stderr
            .contains("(guard deny-tool at tool_input: refused"),
        "{}",
        out.stderr
    );

    // A long answer goes back with the bound; the short one is printed.
    server
        .push(Reply::text("This answer is far too long."))
        .push(Reply::text("Short."));
    let out = run(&against(
        &base,
        &["--max-answer-chars", "10", "--no-stream", "-p", "hi"],
    ));
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "Short.\n");
    assert!(
        out.stderr
            .contains("(guard max-answer-chars at output: sent the answer back"),
        "{}",
        out.stderr
    );
    server.assert_all_used();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--lifetime-tokens` counts every turn of a `--session` across starts:
/// once spent, the next turn is refused before any request (exit 3, the
/// lifetime named). `--hold-deltas` keeps a streamed answer the output
/// guard sends back off stdout. Bad values name the flag.
#[test]
fn lifetime_budget_and_hold_deltas_flags() {
    let server = FakeServer::start();
    let base = server.base_url();
    let dir = fresh_dir("lifetime");
    let session = dir.join("talk");
    let session = session.to_str().unwrap();
    let turn = |prompt: &'static str| {
        run(&against(
            &base,
            &[
                "--session",
                session,
                "--lifetime-tokens",
                "1500",
                "-p",
                prompt,
            ],
        ))
    };
    server.push(Reply::text("First.").with_usage(1_000, 600));
    let out = turn("one");
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let before = server.chat_requests().len();
    let out = turn("two");
    assert_eq!(out.code, Some(3), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("lifetime total_tokens limit"),
        "{}",
        out.stderr
    );
    assert_eq!(server.chat_requests().len(), before);
    std::fs::remove_dir_all(&dir).ok();

    // A streamed answer sent back by the guard is never shown with
    // --hold-deltas; without it, its text was streamed already.
    let long = || Reply::text("This answer is far too long.").with_chunk_chars(4);
    let short = || Reply::text("Short.").with_chunk_chars(2);
    for hold in [true, false] {
        server.push(long()).push(short());
        let mut args = vec!["--max-answer-chars", "10", "-p", "hi"];
        if hold {
            args.insert(0, "--hold-deltas");
        }
        let out = run(&against(&base, &args));
        assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
        assert!(out.stdout.contains("Short."), "{}", out.stdout);
        assert_eq!(
            out.stdout.contains("far too long"),
            !hold,
            "hold {hold}: {}",
            out.stdout
        );
    }
    server.assert_all_used();

    for (flag, value) in [
        ("--lifetime-tokens", "0"),
        ("--lifetime-tokens", "many"),
        ("--lifetime-cost", "-1"),
        ("--lifetime-cost", "free"),
    ] {
        let out = run(&against(&base, &[flag, value, "-p", "hi"]));
        assert_eq!(out.code, Some(2), "{flag} {value}: {}", out.stderr);
        assert!(out.stderr.contains(flag), "{flag} {value}: {}", out.stderr);
    }
    // A lifetime cost needs the model's price, as --max-cost does.
    let out = run(&against(&base, &["--lifetime-cost", "0.01", "-p", "hi"]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("price"), "{}", out.stderr);
    let help = run(&["--help"]);
    for words in [
        "--lifetime-tokens N",
        "--lifetime-cost USD",
        "--hold-deltas",
    ] {
        assert!(help.stdout.contains(words), "{words}: {}", help.stdout);
    }
}

/// Issue 40: `/tools` lists the tools sent with every request (no MCP
/// server here, so nothing is deferred); `--help` and `/help` name it and
/// the deferral flags. tests/mcp/chat.rs drives it with MCP servers.
#[test]
fn repl_tools_lists_the_tools_sent() {
    let server = FakeServer::start();
    let base = server.base_url();
    let mut chat = Chat::spawn(&against(&base, &["--tools", "calculator,read_file"]));
    chat.wait_prompt(1);
    chat.send("/tools");
    chat.wait_prompt(2);
    chat.send("/help");
    chat.wait_prompt(3);
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert!(
        out.stderr.contains("sent (2): calculator, read_file"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("deferred ("), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("/tools        list the tools sent, the deferred ones and those found"),
        "{}",
        out.stderr
    );
    let help = run(&["--help"]);
    for words in ["--defer-above N", "--no-tool-search", "/tools"] {
        assert!(help.stdout.contains(words), "{words}: {}", help.stdout);
    }
}

/// Issue 40: a bad `--defer-above`, or both deferral flags, is a usage
/// error naming the flag.
#[test]
fn deferral_flags_are_checked() {
    for (flags, says) in [
        (
            &["--defer-above", "many"][..],
            "--defer-above needs a whole number",
        ),
        (
            &["--defer-above", "-1"][..],
            "--defer-above needs a whole number",
        ),
        (
            &["--defer-above", "3", "--no-tool-search"][..],
            "--defer-above and --no-tool-search contradict each other",
        ),
    ] {
        let mut args = flags.to_vec();
        args.extend(["-p", "hi"]);
        let out = run(&args);
        assert_eq!(out.code, Some(2), "{flags:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{flags:?}: {}", out.stderr);
    }
}

/// Make a FIFO at `path`; false when `mkfifo` is not there.
#[cfg(unix)]
fn mkfifo(path: &Path) -> bool {
    Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// ATTACKS.md, files: `--events` truncated whatever file it named and
/// blocked on a FIFO. Now a file the chat did not write, a FIFO, a folder
/// and a link to nothing are usage errors naming the flag, each left as it
/// was; an events file is replaced by the same command run again.
#[cfg(unix)]
#[test]
fn events_flag_never_replaces_a_file_it_did_not_write_nor_waits_on_a_fifo() {
    let dir = fresh_dir("events-targets");
    let notes = dir.join("notes.md");
    std::fs::write(&notes, "# my notes\nkeep them\n").unwrap();
    let fifo = dir.join("pipe.jsonl");
    let made_fifo = mkfifo(&fifo);
    let dangling = dir.join("dangling.jsonl");
    std::os::unix::fs::symlink(dir.join("elsewhere/x.jsonl"), &dangling).unwrap();
    let locked = dir.join("kept.jsonl");
    std::fs::write(&locked, "{\"type\":\"user_turn\"}\n").unwrap();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let mut refused = vec![
        (locked.clone(), "is read-only"),
        (notes.clone(), "is not an events file"),
        (dir.clone(), "is a folder"),
        (dangling.clone(), "symbolic link to nothing"),
    ];
    if made_fifo {
        refused.push((fifo.clone(), "not a regular file"));
    }
    // A full disk's stand-in takes no byte: refused, not written to with
    // every error ignored.
    if Path::new("/dev/full").exists() {
        refused.push((PathBuf::from("/dev/full"), "not a regular file"));
    }
    for (path, says) in &refused {
        let out = run(&["--events", path.to_str().unwrap(), "-p", "What is 2+2?"]);
        assert_eq!(out.code, Some(2), "{}: {}", path.display(), out.stderr);
        assert!(out.stderr.contains("--events"), "{}", out.stderr);
        assert!(out.stderr.contains(says), "{}", out.stderr);
    }
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "# my notes\nkeep them\n"
    );
    assert!(!dir.join("elsewhere").exists());
    assert_eq!(
        std::fs::read_to_string(&locked).unwrap(),
        "{\"type\":\"user_turn\"}\n"
    );

    // The same command twice: the second run's events replace the first's.
    let events = dir.join("run.jsonl");
    for _ in 0..2 {
        let out = run(&["--events", events.to_str().unwrap(), "-p", "What is 2+2?"]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let text = std::fs::read_to_string(&events).unwrap();
    assert_eq!(text.matches("\"user_turn\"").count(), 1, "{text}");
    // Again after a crash that cut the first event short: still the
    // chat's own file, replaced.
    std::fs::write(&events, "{\"type\":\"user_turn\",\"agent\":\"ma").unwrap();
    let out = run(&["--events", events.to_str().unwrap(), "-p", "What is 2+2?"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    std::fs::remove_dir_all(&dir).ok();
}

/// ATTACKS.md, files: `/save` replaced any file and `/load` read any, a
/// FIFO blocking both for ever. Now a file the chat did not write is not
/// replaced, a FIFO or a device is refused without being opened, and
/// `/save` run twice replaces its own file.
#[cfg(unix)]
#[test]
fn repl_save_and_load_refuse_fifos_devices_and_foreign_files() {
    let dir = fresh_dir("save-load-targets");
    let notes = dir.join("notes.md");
    std::fs::write(&notes, "# my notes\n").unwrap();
    let fifo = dir.join("pipe.json");
    let made_fifo = mkfifo(&fifo);
    let saved = dir.join("my chät.json");
    let mut chat = Chat::spawn_in(Some(&dir), &[]);
    chat.wait_prompt(1);
    chat.send("What is 2+2?");
    chat.wait_prompt(2);
    let mut prompt = 2;
    let mut step = |chat: &mut Chat, line: String| {
        chat.send(&line);
        prompt += 1;
        chat.wait_prompt(prompt);
    };
    step(&mut chat, format!("/save {}", notes.display()));
    if made_fifo {
        step(&mut chat, format!("/save {}", fifo.display()));
        step(&mut chat, format!("/load {}", fifo.display()));
    }
    step(&mut chat, "/load /dev/zero".to_string());
    step(&mut chat, format!("/save {}", saved.display()));
    step(&mut chat, format!("/save {}", saved.display()));
    step(&mut chat, format!("/load {}", saved.display()));
    chat.send("/quit");
    let out = chat.finish();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("notes.md exists and is not a saved history"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "# my notes\n");
    if made_fifo {
        assert!(
            out.stderr.contains("pipe.json is not a regular file"),
            "{}",
            out.stderr
        );
        assert_eq!(out.stderr.matches("not a regular file").count(), 3);
    }
    assert!(
        out.stderr.contains("/dev/zero: not a regular file"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("(saved 4 messages to ").count(),
        2,
        "{}",
        out.stderr
    );
    // Each save was whole: no temporary file is left beside the history.
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        out.stderr.contains("(loaded 4 messages from "),
        "{}",
        out.stderr
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// ATTACKS.md, files: the `write_file` tool blocked for ever on a FIFO in
/// the workspace; it answers the model that it writes regular files only.
#[cfg(unix)]
#[test]
fn write_file_refuses_a_fifo_instead_of_waiting_for_a_reader() {
    let dir = fresh_dir("write-fifo");
    if !mkfifo(&dir.join("p.txt")) {
        return;
    }
    let out = Chat::spawn_in(Some(&dir), &["-y", "-p", "write hi to p.txt"]).finish();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("not a regular file"), "{}", out.stdout);
    std::fs::remove_dir_all(&dir).ok();
}

/// ATTACKS.md, the command line: a flag followed by another option took
/// the option as its value and then blamed the next word (`--model -p
/// hi`: "unexpected argument `hi`"), or ran (`-p --model` asked the model
/// "--model"). Now each exits 2 naming the flag missing its value; a value
/// that begins with `-` is given inline. The flags no other test gave a
/// bad value are here too.
#[test]
fn a_flag_followed_by_another_option_names_the_flag_missing_its_value() {
    let cases: &[(&[&str], &str)] = &[
        (&["--model", "-p", "hi"], "--model needs a value"),
        (&["--system", "-p", "hi"], "--system needs a value"),
        (
            &["--events", "--model", "m", "-p", "hi"],
            "--events needs a value",
        ),
        (&["-p", "--model"], "-p needs a value"),
        (&["--max-cost", "abc", "-p", "hi"], "--max-cost"),
        (&["--max-cost", "NaN", "-p", "hi"], "--max-cost"),
        (&["--max-tokens", "0", "-p", "hi"], "--max-tokens"),
        (&["--price", "1:2", "-p", "hi"], "--price"),
        (&["--judge", " ", "-p", "hi"], "--judge"),
        (&["-p", "hi", "--system"], "--system"),
    ];
    for (args, says) in cases {
        let out = run(args);
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
    // Inline, a value may begin with `-`; a negative number is a value.
    let out = run(&["--system=-be brief-", "--prompt=-what is 2+2?"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let out = run(&["--max-steps", "-1", "-p", "hi"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("got `-1`"), "{}", out.stderr);
}

/// The chat with `args` on a terminal: a pty from `script`, in `dir`.
/// On a terminal everything arrives on stdout, the echo of what is typed
/// included.
#[cfg(target_os = "linux")]
fn tty_chat(dir: &Path, args: &str) -> Chat {
    let mut cmd = Command::new("script");
    cmd.args([
        "-qec",
        &format!("'{}' {args}", chat_bin().display()),
        "/dev/null",
    ])
    .current_dir(dir)
    .env("NO_COLOR", "1")
    .env_remove("OPENAI_BASE_URL")
    .env_remove("OPENAI_MODEL")
    .env_remove("OPENAI_API_KEY")
    .env_remove("PIKURI_API")
    .env_remove("ANTHROPIC_API_KEY")
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn script");
    let stdout = Arc::new(Mutex::new(String::new()));
    let stderr = Arc::new(Mutex::new(String::new()));
    let readers = vec![
        collect(child.stdout.take().unwrap(), &stdout),
        collect(child.stderr.take().unwrap(), &stderr),
    ];
    let stdin = child.stdin.take();
    Chat {
        child,
        stdin,
        stdout,
        stderr,
        readers,
    }
}

/// ATTACKS.md, the command line: standard input as a terminal (a pty from
/// `script`), where the other tests give a pipe or nothing: the REPL
/// prompts, the approval is asked on the terminal and `y` writes, and
/// end of input at the prompt exits 0; a one-shot `-p` asks on the
/// terminal too (without one it denies).
#[cfg(target_os = "linux")]
#[test]
fn on_a_terminal_the_repl_asks_before_writing_and_exits_at_end_of_input() {
    let has_script = Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        return;
    }
    let dir = fresh_dir("tty");
    let mut chat = tty_chat(&dir, "");
    chat.wait_stdout("the first prompt", |out| out.contains("> "));
    chat.send("write hello there to notes.txt");
    chat.wait_stdout("the approval prompt", |out| out.contains("[y]es"));
    assert!(!dir.join("notes.txt").exists(), "written before the answer");
    chat.send("y");
    chat.wait_stdout("the answer", |out| {
        out.contains("Done: wrote 11 bytes to notes.txt.")
    });
    // Ctrl+D at the prompt: end of input.
    let stdin = chat.stdin.as_mut().unwrap();
    stdin.write_all(b"\x04").unwrap();
    stdin.flush().unwrap();
    let out = chat.wait();
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let written = std::fs::read_to_string(dir.join("notes.txt"));
    assert_eq!(written.expect("notes.txt").as_str(), "hello there");

    let mut chat = tty_chat(&dir, "-p 'write hi to a.txt'");
    chat.wait_stdout("the approval prompt", |out| out.contains("[y]es"));
    chat.send("y");
    let out = chat.wait();
    let written = std::fs::read_to_string(dir.join("a.txt"));
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert_eq!(written.expect("a.txt").as_str(), "hi");
}

/// Lifecycle: `--session` ended by SIGTERM (or SIGHUP) mid-stream, where
/// the handler closes the open agents before exiting, resumes at the next
/// start exactly as after a SIGKILL: the cut-off request is made again,
/// the journaled tool result is not run again, then the new message.
#[cfg(unix)]
#[test]
fn session_terminated_mid_stream_finishes_the_turn_at_the_next_start() {
    for (signal, code) in [("-TERM", 143), ("-HUP", 129)] {
        let server = FakeServer::start();
        server.push(Reply::tool_call("calculator", json!({"expression": "6*7"})));
        let answer = "It is forty-two.";
        server.push(Reply::text(answer).with_chunk_chars(6).hang_after(2));
        server.push(Reply::text(answer));
        server.push(Reply::text("You asked for 6*7."));
        let dir = fresh_dir(&format!("session-term{signal}"));
        let session = dir.join("talk");
        let session = session.to_str().unwrap();
        let base = server.base_url();
        let flags = ["--session", session, "--tools", "calculator", "-p"];

        let mut args = against(&base, &flags);
        args.push("What is 6*7?");
        let mut chat = Chat::spawn(&args);
        chat.wait_stdout("the answer's first piece", |out| out.contains("It is"));
        let status = Command::new("kill")
            .args([signal, &chat.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        let out = chat.wait();
        assert_eq!(out.code, Some(code), "{signal}: {}", out.stderr);

        let mut args = against(&base, &flags);
        args.push("What did I ask?");
        let out = run(&args);
        assert_eq!(out.code, Some(0), "{signal}: {}", out.stderr);
        assert!(
            out.stdout.ends_with("You asked for 6*7.\n"),
            "{signal}: {}",
            out.stdout
        );
        let requests = server.chat_requests();
        assert_eq!(requests.len(), 4, "{signal}");
        assert_eq!(requests[2].messages(), requests[1].messages(), "{signal}");
        assert_eq!(
            turns(&requests[3].messages())[..4],
            [
                ("user".to_string(), "What is 6*7?".to_string()),
                ("assistant".to_string(), "call calculator".to_string()),
                ("tool".to_string(), "42".to_string()),
                ("assistant".to_string(), answer.to_string()),
            ],
            "{signal}"
        );
        server.assert_all_used();
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// ATTACKS.md, the command line: `--session` naming a journal the chat
/// cannot use (a folder, a FIFO, a file that is not a journal, another
/// configuration's) is a usage error naming the flag, exit 2, as `--help`
/// says of an option's file; it was exit 1 with the store's words only.
/// The file is left as it was.
#[cfg(unix)]
#[test]
fn a_session_file_the_chat_cannot_use_exits_2_naming_the_flag() {
    let dir = fresh_dir("session-bad-files");
    std::fs::create_dir(dir.join("folder.journal")).unwrap();
    std::fs::write(dir.join("notes.journal"), "my notes\n").unwrap();
    let mut names = vec![("folder", "a directory"), ("notes", "not a journal")];
    if mkfifo(&dir.join("pipe.journal")) {
        names.push(("pipe", "a FIFO"));
    }
    let out = Chat::spawn_in(Some(&dir), &["--session", "mine", "-p", "What is 2+2?"]).finish();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for (name, says) in names {
        let out = Chat::spawn_in(Some(&dir), &["--session", name, "-p", "hi"]).finish();
        assert_eq!(out.code, Some(2), "{name}: {}", out.stderr);
        assert!(out.stderr.contains("--session"), "{name}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{name}: {}", out.stderr);
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.journal")).unwrap(),
        "my notes\n"
    );
    // Another configuration (other tools) than the one that wrote it.
    let before = std::fs::read(dir.join("mine.journal")).unwrap();
    let out = Chat::spawn_in(
        Some(&dir),
        &["--session", "mine", "--tools", "calculator", "-p", "hi"],
    )
    .finish();
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--session mine"), "{}", out.stderr);
    assert_eq!(std::fs::read(dir.join("mine.journal")).unwrap(), before);
    std::fs::remove_dir_all(&dir).ok();
}
