//! Issue 39: a run cut off between a guard's verdict and the action it
//! ends with resumes to the same end, asking neither the guard nor the
//! model again.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pikuri::guard::{Guards, InputVerdict, ToolOutputVerdict};
use pikuri::journal::FileStore;
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, ErrorKind, Role, StopReason, ToolCall};
use serde_json::json;

use super::{no_spawn, temp_dir};

/// Keep the journal in `dir` up to its guard record, as a crash right
/// after it would have left it.
fn cut_after_the_guard_record(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Some(at) = text.find(r#""type":"guard""#) else {
            continue;
        };
        let end = at + text[at..].find('\n').unwrap() + 1;
        std::fs::write(&path, &text[..end]).unwrap();
        return;
    }
    panic!("no journal with a guard record in {}", dir.display());
}

/// Guards that count how often they are asked.
fn guards(asked: &Arc<AtomicUsize>) -> Guards {
    let (a, b) = (Arc::clone(asked), Arc::clone(asked));
    Guards::new()
        .input("scope", move |t: &str| {
            a.fetch_add(1, Ordering::SeqCst);
            if t.contains("homework") {
                InputVerdict::Block("No homework.".into())
            } else {
                InputVerdict::Allow
            }
        })
        .tool_output("dlp", move |_: &ToolCall, out: &str| {
            b.fetch_add(1, Ordering::SeqCst);
            if out.contains("secret") {
                ToolOutputVerdict::Stop("a secret".into())
            } else {
                ToolOutputVerdict::Allow
            }
        })
}

#[test]
fn a_block_cut_off_before_its_answer_resumes_to_the_answer() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let dir = temp_dir("guard-block");
    let store = FileStore::new(dir.clone()).unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let mut a = Agent::builder(server.transport())
        .guards(guards(&asked))
        .journal(store.clone(), "b")
        .build()
        .unwrap();
    a.run_loop("do my homework").unwrap();
    drop(a);
    cut_after_the_guard_record(&dir);
    let mut a = Agent::builder(server.transport())
        .guards(guards(&asked))
        .resume(store, "b")
        .build()
        .unwrap();
    assert!(a.interrupted());
    let out = a.resume_run().unwrap();
    assert_eq!(out.stop_reason, StopReason::Guardrail);
    assert_eq!(out.answer.as_deref(), Some("No homework."));
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the guard was not asked again"
    );
    assert!(server.chat_requests().is_empty(), "nor the model");
    let roles: Vec<Role> = a.messages().iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
}

#[test]
fn a_stop_cut_off_before_the_runs_end_resumes_to_the_stop() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    server.push(Reply::tool_call("lookup", json!({})));
    let dir = temp_dir("guard-stop");
    let store = FileStore::new(dir.clone()).unwrap();
    let asked = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    let tool = || {
        let r = Arc::clone(&ran);
        FnTool::new("lookup", "Looks up.", Parameters::empty(), move |_, _| {
            r.fetch_add(1, Ordering::SeqCst);
            Ok("the secret".into())
        })
    };
    let mut a = Agent::builder(server.transport())
        .add_tool(tool())
        .guards(guards(&asked))
        .journal(store.clone(), "s")
        .build()
        .unwrap();
    let err = a.run_loop("look").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Guardrail);
    drop(a);
    let before = asked.load(Ordering::SeqCst);
    cut_after_the_guard_record(&dir);
    let mut a = Agent::builder(server.transport())
        .add_tool(tool())
        .guards(guards(&asked))
        .resume(store, "s")
        .build()
        .unwrap();
    assert!(a.interrupted());
    let err = a.resume_run().unwrap_err();
    assert_eq!(err.to_string(), "stopped by guard dlp: a secret");
    assert_eq!(ran.load(Ordering::SeqCst), 1, "the tool did not run again");
    assert_eq!(server.chat_requests().len(), 1, "nor was the model asked");
    let last = a.messages().last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(last.content, "Error: not run: stopped by a guard");
    // The secret was not read again: only the "not run" note went through
    // the tool output guard, as every result does.
    assert_eq!(asked.load(Ordering::SeqCst) - before, 1);
}
