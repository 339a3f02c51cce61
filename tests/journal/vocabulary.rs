//! Issue 36: the journal's own vocabulary. The names a journal stores for
//! why a run ended, why an answer ended, what an approver decided and why
//! a history was replaced are its own (not a public enum's `Debug` text);
//! the spellings older journals stored still resume; a name no version
//! wrote, an empty one or one of another JSON type is
//! `JournalCorrupt`, naming the record; a resumed run reports the finish
//! of the answer it replays.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pikuri::approval::{ApprovalRequest, Decision};
use pikuri::journal::{JournalStore, RunLock};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{ErrorKind, FinishReason, StopReason};
use serde_json::{Value, json};

use super::agent;

/// A journal store in memory, whose records a test can read and rewrite,
/// and which can be told to refuse the records of one type (a crash at
/// that boundary, as far as the journal can tell).
#[derive(Clone, Default)]
struct Memory {
    runs: Arc<Mutex<HashMap<String, Vec<String>>>>,
    refuse: Arc<Mutex<Option<&'static str>>>,
}

impl Memory {
    fn records(&self, run: &str) -> Vec<Value> {
        self.runs.lock().unwrap()[run]
            .iter()
            .map(|r| serde_json::from_str(r).unwrap())
            .collect()
    }

    /// Replace `run`'s records.
    fn set(&self, run: &str, records: &[Value]) {
        let records = records.iter().map(Value::to_string).collect();
        self.runs.lock().unwrap().insert(run.to_string(), records);
    }

    /// The records of `run` of type `kind`.
    fn of_type(&self, run: &str, kind: &str) -> Vec<Value> {
        self.records(run)
            .into_iter()
            .filter(|r| r["type"] == kind)
            .collect()
    }
}

impl JournalStore for Memory {
    fn append(&self, run: &str, record: &str) -> pikuri::Result<()> {
        let refused = *self.refuse.lock().unwrap();
        if refused.is_some_and(|kind| record.contains(&format!(r#""type":"{kind}""#))) {
            // Any error the store may return: the agent stops there.
            return Err(pikuri::Error::JournalIo {
                run: run.to_string(),
                message: "refused".into(),
            });
        }
        self.runs
            .lock()
            .unwrap()
            .entry(run.to_string())
            .or_default()
            .push(record.to_string());
        Ok(())
    }
    fn read(&self, run: &str) -> pikuri::Result<Vec<String>> {
        Ok(self
            .runs
            .lock()
            .unwrap()
            .get(run)
            .cloned()
            .unwrap_or_default())
    }
    fn runs(&self) -> pikuri::Result<Vec<String>> {
        let mut runs: Vec<String> = self.runs.lock().unwrap().keys().cloned().collect();
        runs.sort();
        Ok(runs)
    }
    fn lock(&self, _run: &str) -> pikuri::Result<RunLock> {
        Ok(RunLock::new(()))
    }
}

/// A run with every stored name in it: a denied call, an approved one, a
/// compaction-free history load, a cut final answer. Returns the store.
fn journaled_run(server: &FakeServer) -> Memory {
    let store = Memory::default();
    server.push(Reply::tool_calls(vec![
        ("echo", json!({"s": "no"})),
        ("echo", json!({"s": "yes"})),
    ]));
    server.push(Reply::text("Echoed yes; the rest is").with_finish_reason("length"));
    let mut a = agent(server)
        .approver(|r: &ApprovalRequest| {
            if r.arguments()["s"] == "no" {
                Decision::deny("not that one")
            } else {
                Decision::Approve
            }
        })
        .journal(store.clone(), "r")
        .build()
        .unwrap();
    let out = a.run_loop("echo both").unwrap();
    assert_eq!(out.stop_reason, StopReason::Incomplete);
    store
}

/// What the agent writes: the journal's own names, never `Debug` text.
#[test]
fn the_records_store_the_journals_own_names() {
    let server = FakeServer::start();
    let store = journaled_run(&server);
    let responses = store.of_type("r", "response");
    assert_eq!(responses[0]["finish"], "tool_calls");
    assert_eq!(responses[1]["finish"], "length");
    assert!(
        responses[1].get("truncated").is_none(),
        "{:?}",
        responses[1]
    );
    let answered = store.of_type("r", "approval_answered");
    assert_eq!(answered[0]["decision"], "deny");
    assert_eq!(answered[0]["reason"], "not that one");
    assert_eq!(answered[1]["decision"], "approve");
    assert!(answered[1].get("reason").is_none());
    let end = &store.of_type("r", "turn_end")[0];
    assert_eq!(end["reason"], "incomplete");
    assert_eq!(end["finish"], "length");
    assert!(end.get("error").is_none());

    // A failed run stores `error` and the message apart.
    server.push(Reply::status(500, "boom"));
    let mut a = agent(&server)
        .http(pikuri::HttpConfig::default().with_max_retries(0))
        .resume(store.clone(), "r")
        .build()
        .unwrap();
    a.run_loop("again").unwrap_err();
    a.clear_conversation();
    drop(a);
    let ends = store.of_type("r", "turn_end");
    assert_eq!(ends[1]["reason"], "error");
    assert!(
        ends[1]["error"].as_str().unwrap().contains("500"),
        "{ends:?}"
    );
    assert!(ends[1].get("finish").is_none());
    assert_eq!(store.of_type("r", "history")[0]["cause"], "cleared");
}

/// A run cut off after its cut answer was journaled, before its end: the
/// resumed run asks nothing again and reports the answer's finish.
#[test]
fn a_resumed_run_reports_the_finish_of_the_answer_it_replays() {
    for (scripted, finish, reason) in [
        ("length", FinishReason::Length, StopReason::Incomplete),
        (
            "content_filter",
            FinishReason::Filtered,
            StopReason::Incomplete,
        ),
        ("stop", FinishReason::Complete, StopReason::Completed),
    ] {
        let server = FakeServer::start();
        let store = Memory::default();
        server.push(Reply::text("Part one,").with_finish_reason(scripted));
        *store.refuse.lock().unwrap() = Some("turn_end");
        let mut a = agent(&server).journal(store.clone(), "r").build().unwrap();
        let err = a.run_loop("write").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::JournalIo, "{err}");
        drop(a);
        *store.refuse.lock().unwrap() = None;

        let mut a = agent(&server).resume(store.clone(), "r").build().unwrap();
        assert!(a.interrupted());
        let out = a.resume_run().unwrap();
        assert_eq!(
            (out.stop_reason, out.finish),
            (reason, finish),
            "{scripted}"
        );
        assert_eq!(out.answer.as_deref(), Some("Part one,"));
        assert_eq!(out.requests, 0, "nothing asked again");
        server.assert_all_used();
    }
}

/// Journals written before the names existed: `Debug` text for the stop
/// reason, `deny: <reason>` for a denial, `truncated` for a cut answer.
/// They resume, and a cut answer's finish comes back from the flag.
#[test]
fn the_spellings_older_journals_stored_still_resume() {
    let server = FakeServer::start();
    let store = journaled_run(&server);
    let old: Vec<Value> = store
        .records("r")
        .into_iter()
        .map(|mut r| {
            match r["type"].as_str().unwrap() {
                "turn_end" => r = json!({"type": "turn_end", "reason": "Completed"}),
                "approval_answered" if r["decision"] == "deny" => {
                    r = json!({"type": "approval_answered", "call_id": r["call_id"],
                        "decision": "deny: not that one"});
                }
                "response" => {
                    let cut = r["finish"] == "length";
                    let o = r.as_object_mut().unwrap();
                    o.remove("finish");
                    if cut {
                        o.insert("truncated".into(), json!(true));
                    }
                }
                _ => {}
            }
            r
        })
        .collect();
    store.set("r", &old);
    let a = agent(&server).resume(store.clone(), "r").build().unwrap();
    assert!(!a.interrupted());
    assert_eq!(a.messages().len(), 5);

    // The same journal cut off before its end: the flag says the
    // replayed answer was cut.
    let mut cut = old.clone();
    cut.pop();
    store.set("r", &cut);
    drop(a);
    let mut a = agent(&server).resume(store.clone(), "r").build().unwrap();
    let out = a.resume_run().unwrap();
    assert_eq!(out.stop_reason, StopReason::Incomplete);
    assert_eq!(out.finish, FinishReason::Length);

    // Every other old stop-reason spelling.
    for reason in [
        "Synthesized",
        "ApprovalPending",
        "error: cancelled",
        "error: x",
    ] {
        let mut records = old.clone();
        *records.last_mut().unwrap() = json!({"type": "turn_end", "reason": reason});
        store.set("r", &records);
        let a = agent(&server).resume(store.clone(), "r").build();
        assert!(a.is_ok(), "{reason}: {:?}", a.err());
    }
    let mut records = old.clone();
    let at = records
        .iter()
        .position(|r| r["type"] == "approval_answered")
        .unwrap();
    records[at]["decision"] = json!(r#"edit: {"s":"other"}"#);
    store.set("r", &records);
    assert!(agent(&server).resume(store.clone(), "r").build().is_ok());
}

/// ATTACKS, files and stores, for the stored names: an unknown name, an
/// empty one, another spelling, another JSON type in each named field is
/// `JournalCorrupt` naming the record, and nothing is loaded.
#[test]
fn a_bad_name_in_any_stored_field_is_corrupt_naming_the_record() {
    let server = FakeServer::start();
    let store = journaled_run(&server);
    // A history record, so `cause` is in the journal too.
    let mut a = agent(&server).resume(store.clone(), "r").build().unwrap();
    a.clear_conversation();
    drop(a);
    let good = store.records("r");
    let fields = [
        ("turn_end", "reason"),
        ("turn_end", "finish"),
        ("response", "finish"),
        ("approval_answered", "decision"),
        ("history", "cause"),
    ];
    let bad = [
        json!("bogus"),
        json!(""),
        json!("Completed "),
        json!("LENGTH"),
        json!("error:"),
        json!(5),
        json!(null),
        json!(true),
        json!(["approve"]),
        json!({"name": "approve"}),
    ];
    for (kind, field) in fields {
        let at = good.iter().position(|r| r["type"] == kind).unwrap();
        for value in &bad {
            // `finish` is optional: absent (`null` here) is allowed.
            if field == "finish" && value.is_null() {
                continue;
            }
            let mut records = good.clone();
            records[at][field] = value.clone();
            store.set("r", &records);
            let what = format!("{kind}.{field} = {value}");
            let err = agent(&server)
                .resume(store.clone(), "r")
                .build()
                .map(|_| ())
                .expect_err(&what);
            assert_eq!(err.kind(), ErrorKind::JournalCorrupt, "{what}: {err}");
            let msg = err.to_string();
            assert!(msg.contains(&format!("record {}", at + 1)), "{what}: {msg}");
        }
    }
    // A damaged name in the last record is listed as unfinished (its
    // resume says what is wrong), not taken for a finished run.
    let mut records = good.clone();
    *records.last_mut().unwrap() = json!({"type": "turn_end", "reason": "finished"});
    store.set("r", &records);
    assert_eq!(store.unfinished().unwrap(), ["r"]);
}
