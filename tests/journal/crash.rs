//! The crash harness. Each case runs an agent with a journal in a child
//! process (this test binary again, running [`child`]) against a scripted
//! server in this process, kills it with SIGKILL at one boundary, then
//! resumes the run in a new child and checks:
//!
//! - the first child really died (the boundary was reached);
//! - the journal reads after the kill;
//! - the final history equals an uninterrupted run's, apart from the
//!   documented "interrupted" observation of a non-idempotent call;
//! - the server got no request twice, except the one in flight when the
//!   process died (sent, or half streamed), which is re-issued;
//! - the non-idempotent `send` ran at most once, the idempotent `lookup`
//!   at least once, with the same idempotency key each time;
//! - the resumed child's listener alone saw every call of the turn with
//!   its result, after `Event::Resumed` (issue 38 item 5).
//!
//! Boundaries covered: after the user message is journaled (before the
//! request is sent), after a request is sent (the server kills the
//! child), mid-stream, after a response is journaled, mid-tool (an
//! idempotent and a non-idempotent tool), after a tool result, while an
//! approval waits, and (in a second conversation, whose first turn makes
//! the second compact) during compaction, while the summary request is in
//! flight; and (with a budget of one call under `OnExhausted::Synthesize`)
//! during synthesis, while the synthesizer's request is in flight; and
//! inside a sub-agent (its `send` call dies: the parent's `agent` call is
//! then interrupted, as a non-idempotent tool). And with
//! `parallel_tool_calls` (a response calling `lookup` and `send` at once,
//! both running together): mid-batch with one tool done and the other
//! running (each way round), between the two results (one journaled, the
//! other not yet), and after all results.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pikuri::approval::{ApprovalRequest, Decision};
use pikuri::compaction::Compaction;
use pikuri::journal::{FileStore, JournalStore, RunLock};
use pikuri::listeners::InMemoryEventList as Events;
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, ChatTransport, Event, OnExhausted, StepLimit};
use serde_json::{Value, json};

use super::{no_spawn, temp_dir};

const RUN: &str = "run";
const QUESTION: &str = "look up k and send it to bob";
const SYSTEM: &str = "You look things up and send them.";
/// The sub-agent's system prompt.
const HELPER: &str = "You send values.";
/// The first turn of the compaction variant.
const FIRST: &str =
    "first, a long word about the weather, which has been sunny all week and may stay so";
/// How long a child may take before the harness gives up on it.
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------ the child

/// Kill this process the way the harness means: SIGKILL, no destructor,
/// no flush.
fn die() -> ! {
    let _ = Command::new("kill")
        .args(["-9", &std::process::id().to_string()])
        .status();
    std::process::abort()
}

/// Append one line to `dir/name`: how the harness counts tool runs.
fn tally(dir: &Path, name: &str, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .expect("count file");
    writeln!(f, "{line}").expect("count line");
    f.sync_all().expect("count sync");
}

/// Block until `flag` is set (by the other tool of a parallel batch), then
/// die: the other tool is done, this one is still running. Sequential
/// calls never get here for the tool called first: the harness then times
/// out.
fn die_once(flag: &AtomicBool) -> ! {
    let deadline = Instant::now() + CHILD_TIMEOUT;
    while !flag.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the other tool never finished");
        std::thread::sleep(Duration::from_millis(1));
    }
    die()
}

/// Set when `lookup` (resp. `send`) has done its work, for [`die_once`].
static LOOKUP_DONE: AtomicBool = AtomicBool::new(false);
static SEND_DONE: AtomicBool = AtomicBool::new(false);

/// A file store that kills the process right after storing the `nth`
/// (1-based) record of one type.
struct KillAfter {
    inner: FileStore,
    record: Option<&'static str>,
    nth: usize,
    seen: AtomicUsize,
}

impl JournalStore for KillAfter {
    fn append(&self, run: &str, record: &str) -> pikuri::Result<()> {
        self.inner.append(run, record)?;
        if let Some(ty) = self.record
            && record.starts_with(&format!(r#"{{"type":"{ty}""#))
            && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.nth
        {
            die();
        }
        Ok(())
    }
    fn read(&self, run: &str) -> pikuri::Result<Vec<String>> {
        self.inner.read(run)
    }
    fn runs(&self) -> pikuri::Result<Vec<String>> {
        self.inner.runs()
    }
    fn lock(&self, run: &str) -> pikuri::Result<RunLock> {
        self.inner.lock(run)
    }
}

/// The child's store: it kills the first child right after the record
/// its boundary names.
fn kill_store(first: bool, kill: &str, dir: String) -> KillAfter {
    let (record, nth) = match kill {
        _ if !first => (None, 1),
        "before_request" => (Some("user"), 1),
        "after_response" => (Some("response"), 1),
        "after_result" | "between_results" => (Some("tool_result"), 1),
        // A parallel batch's two results.
        "after_results" => (Some("tool_result"), 2),
        _ => (None, 1),
    };
    KillAfter {
        inner: FileStore::new(dir).expect("store"),
        record,
        nth,
        seen: AtomicUsize::new(0),
    }
}

/// Not a test of its own: the body of a child process, run only when the
/// harness sets `PJ_MODE` (`new`: run the question; `resume`: finish the
/// run). Prints the final history and its events ([`report`]).
#[test]
fn child() {
    let Ok(mode) = std::env::var("PJ_MODE") else {
        return;
    };
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} unset"));
    let first = mode == "new";
    let kill: &'static str = Box::leak(env("PJ_KILL").into_boxed_str());
    let armed = move |point: &str| first && kill == point;
    let counts = PathBuf::from(env("PJ_COUNTS"));
    let transport = ChatTransport::new(env("PJ_MODEL")).with_api_base(env("PJ_URL"));

    let dir = counts.clone();
    let lookup = FnTool::new(
        "lookup",
        "Looks a key up.",
        Parameters::builder().required_string("key", "Key.").build(),
        move |a, cx| {
            tally(&dir, "lookup", cx.idempotency_key().unwrap_or("none"));
            if armed("mid_tool_lookup") {
                die();
            }
            if armed("mid_batch_lookup_running") {
                die_once(&SEND_DONE);
            }
            LOOKUP_DONE.store(true, Ordering::SeqCst);
            Ok(format!("value of {}", a["key"].as_str().unwrap_or("")))
        },
    )
    .idempotent_calls();
    let dir = counts.clone();
    let send = FnTool::new(
        "send",
        "Sends a value.",
        Parameters::builder()
            .required_string("to", "Recipient.")
            .build(),
        move |a, cx| {
            tally(&dir, "send", cx.idempotency_key().unwrap_or("none"));
            if armed("mid_tool_send") || armed("inside_subagent") {
                die();
            }
            if armed("mid_batch_send_running") {
                die_once(&LOOKUP_DONE);
            }
            SEND_DONE.store(true, Ordering::SeqCst);
            Ok(format!("sent to {}", a["to"].as_str().unwrap_or("")))
        },
    )
    .state_changing();
    let approver = move |r: &ApprovalRequest| {
        if r.tool() == "send" && armed("approval") {
            die();
        }
        Decision::Approve
    };
    let listener = move |e: &Event| {
        if matches!(e, Event::AssistantDelta { .. }) && armed("mid_stream") {
            die();
        }
    };
    let seen = Events::new();
    let store = kill_store(first, &env("PJ_KILL"), env("PJ_DIR"));
    let variant = std::env::var("PJ_VARIANT").unwrap_or_default();
    let compacting = variant == "compaction";
    let mut builder = Agent::builder(transport)
        .system_prompt(SYSTEM)
        .add_tool(lookup)
        .add_tool(send)
        .approver(approver)
        .add_listener(listener)
        .add_listener(seen.clone())
        .streaming(true);
    if variant == "subagent" {
        let helper = Persona::new("helper", "Sends values.", HELPER, 3).with_tools(&["send"]);
        builder = builder.add_extension(SubAgents::new(vec![helper]).expect("personas"));
    }
    if variant == "parallel" {
        builder = builder.parallel_tool_calls(true);
    }
    if variant == "synthesis" {
        builder = builder.step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize));
    }
    if compacting {
        let compaction = Compaction::summarize().with_keep_turns(1);
        builder = builder.compaction(compaction.with_threshold(0.1));
    }
    let mut agent = if first {
        builder.journal(store, RUN).build().expect("build")
    } else {
        builder.resume(store, RUN).build().expect("resume")
    };
    if first {
        if compacting {
            agent.run_loop(FIRST).expect("first turn");
        }
        agent.run_loop(QUESTION).expect("run");
    } else {
        assert!(agent.interrupted(), "the journal shows no cut-off run");
        agent.resume_run().expect("resume_run");
    }
    report(&agent, &seen);
}

/// The final history on a `HISTORY:` line, and the main agent's events
/// (what this process's listener saw) on an `EVENTS:` line.
fn report(agent: &Agent, seen: &Events) {
    let history: Value = serde_json::from_str(&agent.export_history().to_json()).expect("JSON");
    println!("\nHISTORY:{history}");
    let events: Vec<Event> = seen
        .events()
        .into_iter()
        .filter(|e| e.agent().is_empty())
        .collect();
    let events = serde_json::to_string(&events).expect("events JSON");
    println!("\nEVENTS:{events}");
}

// ------------------------------------------------------------ the harness

/// One case's world: a scripted server, a journal directory, a count
/// directory, and the child to kill from the server side, if any.
struct World {
    variant: &'static str,
    server: FakeServer,
    dir: PathBuf,
    counts: PathBuf,
    pid: Arc<Mutex<Option<u32>>>,
}

impl World {
    /// The model: look up, then send, then answer (streamed in small
    /// pieces so a stream can be cut). `kill_on`: the server kills the
    /// first child when that request (1-based) arrives.
    fn new(name: &str, variant: &'static str, kill_on: Option<usize>) -> World {
        let server = FakeServer::start();
        let pid: Arc<Mutex<Option<u32>>> = Arc::new(Mutex::new(None));
        let seen = Arc::new(Mutex::new(0usize));
        if variant == "compaction" {
            // A window the first turn already overflows (threshold 0.1).
            server.set_context_size(Some(100));
        }
        let victim = Arc::clone(&pid);
        let victim_armed = Arc::new(Mutex::new(true));
        // `mid_stream`: the first answer stops mid-stream (the socket left
        // open), so the child dies there. The listeners get deltas on
        // threads of their own: an answer streamed in full could be
        // journaled before the listener saw its first piece.
        let stall = Arc::new(AtomicBool::new(name == "mid_stream"));
        server.respond_with(move |req| {
            // The compactor's summary request (and the synthesizer's) has
            // a system prompt of its own; the parent's may have the
            // sub-agent list after it.
            let system = req
                .messages()
                .first()
                .map(|m| m["content"].clone())
                .unwrap_or_default();
            let system = system.as_str().unwrap_or("");
            let helper = system == HELPER;
            let summary = !helper && !system.starts_with(SYSTEM);
            let n = {
                let mut seen = seen.lock().unwrap();
                *seen += 1;
                *seen
            };
            // `kill_on` 0: the first summary request.
            let kill = match kill_on {
                Some(0) => {
                    summary && {
                        let mut v = victim_armed.lock().unwrap();
                        std::mem::replace(&mut *v, false)
                    }
                }
                k => k == Some(n),
            };
            if kill {
                // The request is sent: kill its sender before it answers.
                let deadline = Instant::now() + CHILD_TIMEOUT;
                let pid = loop {
                    if let Some(pid) = *victim.lock().unwrap() {
                        break pid;
                    }
                    assert!(Instant::now() < deadline, "no child pid");
                    std::thread::sleep(Duration::from_millis(5));
                };
                let _serial = no_spawn();
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
            let last = req.messages().last().cloned().unwrap_or_default();
            if summary {
                return Reply::text("Weather.");
            }
            if helper {
                return if last["role"] == "tool" {
                    Reply::text("Sent it.")
                } else {
                    Reply::tool_call("send", json!({"to": "bob"})).with_id("s1")
                };
            }
            if last["content"] == FIRST {
                return Reply::text("Sunny, they say.");
            }
            match (last["role"].as_str(), last["tool_call_id"].as_str()) {
                (Some("tool"), Some("c1")) if variant == "subagent" => Reply::tool_call(
                    "agent",
                    json!({"name": "helper", "task": "send the value of k to bob"}),
                )
                .with_id("c2"),
                (Some("tool"), Some("c1")) => {
                    Reply::tool_call("send", json!({"to": "bob"})).with_id("c2")
                }
                (Some("tool"), Some("c2")) => {
                    let answer = Reply::text("All done: the value of k went to bob.")
                        .with_chunk_chars(4)
                        .with_chunk_delay(Duration::from_millis(2));
                    if stall.swap(false, Ordering::SeqCst) {
                        answer.hang_after(3)
                    } else {
                        answer
                    }
                }
                // Both calls in one response, run at once.
                _ if variant == "parallel" => Reply::tool_calls(vec![
                    ("lookup", json!({"key": "k"})),
                    ("send", json!({"to": "bob"})),
                ])
                .with_id("c1")
                .with_id("c2"),
                _ => Reply::tool_call("lookup", json!({"key": "k"})).with_id("c1"),
            }
        });
        let root = temp_dir(name);
        let (dir, counts) = (root.join("journal"), root.join("counts"));
        std::fs::create_dir_all(&counts).unwrap();
        World {
            variant,
            server,
            dir,
            counts,
            pid,
        }
    }

    /// Run a child; its exit status and stdout.
    fn run(&self, mode: &str, kill: &str) -> (std::process::ExitStatus, String) {
        let exe = std::env::current_exe().expect("test binary");
        let serial = no_spawn();
        let mut child = Command::new(exe)
            .args(["crash::child", "--exact", "--nocapture", "--test-threads=1"])
            .env("PJ_MODE", mode)
            .env("PJ_KILL", kill)
            .env("PJ_VARIANT", self.variant)
            .env("PJ_URL", self.server.base_url())
            .env("PJ_MODEL", self.server.transport().model().unwrap_or("m"))
            .env("PJ_DIR", &self.dir)
            .env("PJ_COUNTS", &self.counts)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the child");
        drop(serial);
        *self.pid.lock().unwrap() = Some(child.id());
        let deadline = Instant::now() + CHILD_TIMEOUT;
        while child.try_wait().expect("wait").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("child {mode}/{kill} hung");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let out = child.wait_with_output().expect("output");
        *self.pid.lock().unwrap() = None;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if mode == "resume" || kill == "none" {
            assert!(
                out.status.success(),
                "child {mode}/{kill} failed:\n{stdout}\n{stderr}"
            );
        }
        (out.status, stdout)
    }

    fn lines(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.counts.join(name))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Each chat request's messages, and how often it was made.
    fn request_counts(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for r in self.server.chat_requests() {
            *counts.entry(json!(r.messages()).to_string()).or_insert(0) += 1;
        }
        counts
    }
}

fn history(stdout: &str) -> Vec<Value> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("HISTORY:"))
        .unwrap_or_else(|| panic!("no history in:\n{stdout}"));
    let v: Value = serde_json::from_str(line).expect("history JSON");
    v["messages"].as_array().expect("messages").clone()
}

/// The main agent's events the resumed child's listener saw.
fn events(stdout: &str) -> Vec<Event> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("EVENTS:"))
        .unwrap_or_else(|| panic!("no events in:\n{stdout}"));
    serde_json::from_str(line).expect("events JSON")
}

/// A listener of the resumed process alone can render the turn (issue 38
/// item 5): each call of the final history announced once, before its
/// result, and each result announced, the resume marker first.
fn assert_renderable(kill: &str, events: &[Event], got: &[Value]) {
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    let first = kinds.iter().find(|k| **k != "context_cap");
    assert_eq!(first, Some(&"resumed"), "{kill}: {kinds:?}");
    let mut called: Vec<&str> = Vec::new();
    let mut answered: Vec<&str> = Vec::new();
    for e in events {
        match e {
            Event::ToolCall { id, .. } => {
                assert!(
                    !called.contains(&id.as_str()),
                    "{kill}: {id} twice: {kinds:?}"
                );
                called.push(id);
            }
            Event::ToolResult { id, .. } => {
                assert!(
                    called.contains(&id.as_str()),
                    "{kill}: {id} before its call: {kinds:?}"
                );
                answered.push(id);
            }
            _ => {}
        }
    }
    called.sort_unstable();
    answered.sort_unstable();
    assert_eq!(called, answered, "{kill}: a call left pending: {kinds:?}");
    // The turn's results: the messages after its question.
    let question = got
        .iter()
        .rposition(|m| m["role"] == "user" && m["content"] == QUESTION)
        .unwrap_or_else(|| panic!("{kill}: no question in {got:?}"));
    for m in got[question..].iter().filter(|m| m["role"] == "tool") {
        let id = m["tool_call_id"].as_str().unwrap_or("");
        assert!(
            answered.contains(&id),
            "{kill}: result {id} never announced: {kinds:?}"
        );
    }
}

/// Histories equal apart from the content of an "interrupted" observation.
fn same_history(got: &[Value], want: &[Value]) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(g, w)| {
            let interrupted = g["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("Error: interrupted"));
            if interrupted {
                g["role"] == "tool" && g["tool_call_id"] == w["tool_call_id"]
            } else {
                g == w
            }
        })
}

/// An uninterrupted run: its history, its request count, the lines the
/// lookup and send tools wrote (their idempotency keys).
type Baseline = (Vec<Value>, usize, Vec<String>, Vec<String>);

/// Each variant's uninterrupted run, checked.
fn baselines() -> HashMap<&'static str, Baseline> {
    let mut baselines: HashMap<&'static str, Baseline> = HashMap::new();
    for variant in ["plain", "compaction", "synthesis", "subagent", "parallel"] {
        let base = World::new("baseline", variant, None);
        let (_, out) = base.run("new", "none");
        let want = history(&out);
        let requests = base.server.chat_requests().len();
        baselines.insert(
            variant,
            (want, requests, base.lines("lookup"), base.lines("send")),
        );
    }
    assert_eq!(baselines["plain"].0.len(), 6);
    assert_eq!(baselines["plain"].1, 3);
    // The compaction variant: the first turn was summarized away.
    let base = &baselines["compaction"];
    assert_eq!(base.1, 5, "first turn, a summary, three rounds");
    let base = &baselines["synthesis"];
    assert_eq!(base.1, 3, "two rounds, the synthesizer");
    assert_eq!(base.0.last().unwrap()["content"], "Weather.");
    assert!(base.3.is_empty(), "send was over budget");
    let base = &baselines["subagent"];
    assert_eq!(base.1, 5, "three rounds, the sub-agent's two");
    assert_eq!(base.0[4]["content"], "Sent it.");
    assert_eq!(base.3, ["none"], "a child keeps no journal: no key");
    let base = &baselines["parallel"];
    assert_eq!(base.1, 2, "one round with both calls, the answer");
    assert_eq!(base.0.len(), 5, "user, both calls, two results, answer");
    assert_eq!(base.0[1]["tool_calls"].as_array().map(Vec::len), Some(2));
    assert!(Compaction::is_summary(
        &serde_json::from_value(baselines["compaction"].0[0].clone()).unwrap()
    ));
    baselines
}

/// Every boundary, killed then resumed, against one uninterrupted run.
#[test]
fn killed_at_each_boundary_the_run_resumes_without_repeating_work() {
    // (boundary, variant, the request the server kills at (0: the first
    // summary or synthesizer request), a request re-issued)
    let cases: [(&str, &str, Option<usize>, bool); 15] = [
        ("before_request", "plain", None, false),
        ("after_request_sent", "plain", Some(2), true),
        ("mid_stream", "plain", None, true),
        ("after_response", "plain", None, false),
        ("mid_tool_lookup", "plain", None, false),
        ("mid_tool_send", "plain", None, false),
        ("after_result", "plain", None, false),
        ("approval", "plain", None, false),
        ("during_compaction", "compaction", Some(0), true),
        ("during_synthesis", "synthesis", Some(0), true),
        ("inside_subagent", "subagent", None, false),
        ("mid_batch_send_running", "parallel", None, false),
        ("mid_batch_lookup_running", "parallel", None, false),
        ("between_results", "parallel", None, false),
        ("after_results", "parallel", None, false),
    ];
    let baselines = baselines();

    for (kill, variant, kill_on, reissued) in cases {
        let (want, base_requests, base_lookups, base_sends) = &baselines[variant];
        let w = World::new(kill, variant, kill_on);
        let (status, out) = w.run("new", kill);
        assert!(
            !status.success() && !out.contains("HISTORY:"),
            "{kill}: the first child was not killed:\n{out}"
        );
        let store = FileStore::new(&w.dir).unwrap();
        let records = store.read(RUN).unwrap_or_else(|e| panic!("{kill}: {e}"));
        assert_eq!(store.unfinished().unwrap(), [RUN], "{kill}: {records:?}");

        let (_, out) = w.run("resume", kill);
        let got = history(&out);
        assert_renderable(kill, &events(&out), &got);
        assert!(
            same_history(&got, want),
            "{kill}:\n{got:#?}\nwant\n{want:#?}"
        );

        let counts = w.request_counts();
        let repeated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
        if reissued {
            assert!(
                repeated.len() == 1 && repeated.iter().all(|(_, n)| **n == 2),
                "{kill}: {repeated:?}"
            );
        } else {
            assert!(
                repeated.is_empty(),
                "{kill}: repeated requests {repeated:?}"
            );
        }
        // Killed in its tool, the sub-agent never made its second request.
        let skipped = usize::from(kill == "inside_subagent");
        assert_eq!(
            w.server.chat_requests().len(),
            base_requests + usize::from(reissued) - skipped,
            "{kill}"
        );

        let sends = w.lines("send");
        let lookups = w.lines("lookup");
        assert!(sends.len() <= 1, "{kill}: send ran {} times", sends.len());
        assert!(!lookups.is_empty(), "{kill}: lookup never ran");
        // The same idempotency key in both processes.
        assert!(
            lookups.iter().all(|k| *k == base_lookups[0]),
            "{kill}: {lookups:?}"
        );
        match kill {
            "mid_tool_lookup" => assert_eq!(lookups.len(), 2, "idempotent: run again"),
            // A parallel batch's results are journaled once both tools
            // returned: cut off before that, `lookup` runs again and
            // `send` (which may have run to its end) is interrupted.
            "mid_batch_send_running" | "mid_batch_lookup_running" | "between_results" => {
                let again = usize::from(kill != "between_results");
                assert_eq!(lookups.len(), 1 + again, "{kill}: {lookups:?}");
                assert_eq!(sends.len(), 1, "{kill}");
                let observation = got[3]["content"].as_str().unwrap_or("");
                assert!(
                    observation.starts_with("Error: interrupted"),
                    "{kill}: {observation}"
                );
                assert_eq!(got[2]["content"], "value of k", "{kill}");
            }
            "mid_tool_send" | "inside_subagent" => {
                let observation = got[4]["content"].as_str().unwrap_or("");
                assert!(
                    observation.starts_with("Error: interrupted"),
                    "{observation}"
                );
            }
            _ => {
                assert_eq!(lookups.len(), 1, "{kill}");
                assert_eq!(&sends, base_sends, "{kill}");
            }
        }
        assert!(store.unfinished().unwrap().is_empty(), "{kill}");
        let _ = std::fs::remove_dir_all(w.dir.parent().unwrap());
    }
}
