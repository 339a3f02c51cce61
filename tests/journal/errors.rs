//! What a journal refuses, each with its typed error and nothing loaded.

use std::fs;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pikuri::approval::Decision;
use pikuri::journal::{FileStore, JournalStore, SyncMode};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, ErrorKind, StopReason};
use serde_json::json;

use super::{agent, echo, finished_run, no_spawn, temp_dir};

#[test]
fn a_finished_run_resumes_whole_and_a_new_run_id_must_be_free() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("whole")).unwrap();
    finished_run(&server, &store, "r1");
    let a = agent(&server).resume(store.clone(), "r1").build().unwrap();
    assert!(!a.interrupted());
    assert_eq!(a.messages().len(), 4);
    assert_eq!(a.messages()[2].content, "hi");
    drop(a);
    let err = agent(&server)
        .journal(store.clone(), "r1")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalMismatch, "{err}");
    let err = agent(&server)
        .resume(store.clone(), "nope")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalMismatch, "{err}");
    let err = agent(&server).journal(store, "../x").build().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

#[cfg(unix)]
#[test]
fn the_journal_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("mode")).unwrap();
    finished_run(&server, &store, "r");
    let mode = fs::metadata(store.path("r")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn another_configuration_is_refused_with_what_differs() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("config")).unwrap();
    finished_run(&server, &store, "r");
    let other_tools = Agent::builder(server.transport()).system_prompt("You echo.");
    let err = other_tools.resume(store.clone(), "r").build().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalMismatch);
    assert!(err.to_string().contains("tools [echo]"), "{err}");
    let other_prompt = Agent::builder(server.transport())
        .system_prompt("You shout.")
        .add_tool(echo());
    let err = other_prompt.resume(store.clone(), "r").build().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalMismatch);
    let other_model = Agent::builder(server.transport().with_model("other"))
        .system_prompt("You echo.")
        .add_tool(echo());
    let err = other_model.resume(store, "r").build().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalMismatch);
    assert!(err.to_string().contains("model"), "{err}");
}

#[test]
fn a_torn_last_record_is_ignored_and_cut_off_by_the_next_append() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("torn")).unwrap();
    finished_run(&server, &store, "r");
    let before = store.read("r").unwrap();
    // A crash mid-write: half a record, no newline.
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(store.path("r"))
        .unwrap();
    f.write_all(b"0000004a 1234abcd {\"type\":\"us").unwrap();
    drop(f);
    assert_eq!(store.read("r").unwrap(), before);
    server.push(Reply::text("Again."));
    // A new process: a new store, no file handle open yet.
    let store = FileStore::new(store.dir()).unwrap();
    let mut a = agent(&server).resume(store.clone(), "r").build().unwrap();
    a.run_loop("more").unwrap();
    drop(a);
    // The torn tail is gone: every line reads.
    let after = store.read("r").unwrap();
    assert_eq!(after.len(), before.len() + 3, "{after:?}");
}

#[test]
fn a_hand_edit_is_refused_and_nothing_is_loaded() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("edit")).unwrap();
    finished_run(&server, &store, "r");
    let path = store.path("r");
    let text = fs::read_to_string(&path).unwrap();
    // A changed word in a record that is not the last: its checksum fails.
    fs::write(&path, text.replacen("echo hi", "echo ho", 1)).unwrap();
    let err = agent(&server)
        .resume(store.clone(), "r")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalCorrupt, "{err}");
    assert!(err.to_string().contains("record 2"), "{err}");

    // A well-framed record in an impossible place: a tool result for a
    // call that is not open.
    fs::write(&path, &text).unwrap();
    let store2 = FileStore::new(store.dir()).unwrap();
    store2
        .append(
            "r",
            r#"{"type":"tool_result","call_id":"nope","content":"x"}"#,
        )
        .unwrap();
    let err = agent(&server).resume(store2, "r").build().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalCorrupt, "{err}");
    assert!(err.to_string().contains("not open"), "{err}");
}

#[test]
fn two_resumers_cannot_both_proceed() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("lock")).unwrap();
    finished_run(&server, &store, "r");
    let first = agent(&server).resume(store.clone(), "r").build().unwrap();
    // A second store on the same directory: another file handle, as
    // another process would have.
    let other = FileStore::new(store.dir()).unwrap();
    let err = agent(&server)
        .resume(other.clone(), "r")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RunLocked, "{err}");
    drop(first);
    agent(&server).resume(other, "r").build().unwrap();
}

#[test]
fn storage_that_cannot_be_written_is_a_clear_error() {
    let _serial = no_spawn();
    // A directory under a regular file cannot exist, even for root (for
    // whom a 0500 directory would still be writable).
    let dir = temp_dir("ro");
    fs::write(dir.join("file"), "x").unwrap();
    let err = FileStore::new(dir.join("file").join("sub")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalIo, "{err}");

    // A device where the journal should be (/dev/full takes no byte) is
    // refused before any write: a journal is a regular file (see
    // `damage`). A full disk under a regular file is the failed write of
    // `a_write_failure_mid_run_stops_the_run_before_the_tool`.
    #[cfg(target_os = "linux")]
    if std::path::Path::new("/dev/full").exists() {
        let dir = temp_dir("full");
        let store = FileStore::new(&dir).unwrap();
        std::os::unix::fs::symlink("/dev/full", store.path("r")).unwrap();
        let err = store
            .append("r", r#"{"type":"user","content":"x"}"#)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::JournalIo, "{err}");
        assert!(err.to_string().contains("regular files"), "{err}");
    }
}

/// A write that fails mid-run stops the run with the error, the tool it
/// could not record the start of is not run, and the journal reads.
#[test]
fn a_write_failure_mid_run_stops_the_run_before_the_tool() {
    struct Fails(FileStore, Arc<AtomicU32>);
    impl JournalStore for Fails {
        fn append(&self, run: &str, record: &str) -> pikuri::Result<()> {
            if record.contains(r#""type":"tool_start""#) {
                self.1.fetch_add(1, Ordering::SeqCst);
                return Err(pikuri::Error::JournalIo {
                    run: run.into(),
                    message: "disk full".into(),
                });
            }
            self.0.append(run, record)
        }
        fn read(&self, run: &str) -> pikuri::Result<Vec<String>> {
            self.0.read(run)
        }
        fn runs(&self) -> pikuri::Result<Vec<String>> {
            self.0.runs()
        }
        fn lock(&self, run: &str) -> pikuri::Result<pikuri::journal::RunLock> {
            self.0.lock(run)
        }
    }
    let _serial = no_spawn();
    let server = FakeServer::start();
    server.push(Reply::tool_call("count", json!({})));
    let ran = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&ran);
    let count = FnTool::new("count", "Counts.", Parameters::empty(), move |_, _| {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok("1".into())
    });
    let store = FileStore::new(temp_dir("fails")).unwrap();
    let refused = Arc::new(AtomicU32::new(0));
    let mut a = Agent::builder(server.transport())
        .add_tool(count)
        .journal(Fails(store.clone(), Arc::clone(&refused)), "r")
        .build()
        .unwrap();
    let err = a.run_loop("count").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalIo, "{err}");
    assert_eq!(refused.load(Ordering::SeqCst), 1);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "the tool ran without its start recorded"
    );
    assert_eq!(server.chat_requests().len(), 1);
    assert!(store.read("r").is_ok());
    assert_eq!(store.unfinished().unwrap(), ["r"]);
}

/// A turn paused for approval ends (not unfinished); the host's later
/// decision continues it, journaled; a relaxed store reads the same.
#[test]
fn a_deferred_approval_is_journaled_and_resumed_by_the_host() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    server.push(Reply::tool_call("echo", json!({"s": "x"})));
    server.push(Reply::text("Done."));
    let store = FileStore::new(temp_dir("defer"))
        .unwrap()
        .with_sync(SyncMode::Relaxed);
    let build = || agent(&server).approver(|_: &pikuri::approval::ApprovalRequest| Decision::Defer);
    let mut a = build().journal(store.clone(), "r").build().unwrap();
    let out = a.run_loop("echo x").unwrap();
    assert_eq!(out.stop_reason, StopReason::ApprovalPending);
    drop(a);
    assert!(store.unfinished().unwrap().is_empty());
    let mut a = build().resume(store.clone(), "r").build().unwrap();
    assert!(!a.interrupted());
    let id = a.pending_approvals()[0].call_id.clone();
    let out = a.resume([(id, Decision::Approve)]).unwrap();
    assert_eq!(out.answer.as_deref(), Some("Done."));
    drop(a);
    let a = build().resume(store, "r").build().unwrap();
    assert_eq!(a.messages().len(), 4);
    assert_eq!(a.messages()[2].content, "x");
}

/// A journal of a newer format version is refused, not half read.
#[test]
fn a_newer_format_version_is_refused() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("version")).unwrap();
    store
        .append(
            "r",
            r#"{"type":"header","version":2,"run":"r","model":null,"tools":[],"digest":"0"}"#,
        )
        .unwrap();
    let err = agent(&server).resume(store, "r").build().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalCorrupt, "{err}");
    assert!(err.to_string().contains("newer"), "{err}");
}

/// The images a tool attached come back with its result when the run is
/// resumed from its journal (the record keeps them, not just the text).
#[test]
fn a_tool_results_images_survive_a_resume() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("images")).unwrap();
    let shot = || {
        FnTool::new("shot", "A screenshot.", Parameters::empty(), |_, cx| {
            cx.attach_image(pikuri::Image::from_bytes(
                b"GIF89a\x01\x00\x01\x00\x00\x00\x00;",
            )?);
            Ok("Here.".to_string())
        })
    };
    let build = || {
        Agent::builder(server.transport())
            .system_prompt("s")
            .add_tool(shot())
    };
    server.push(Reply::tool_call("shot", json!({})));
    server.push(Reply::text("A pixel."));
    let mut a = build().journal(store.clone(), "r").build().unwrap();
    a.run_loop("look").unwrap();
    let before = a.messages()[2].images.clone();
    assert_eq!(before.len(), 1);
    drop(a);
    let a = build().resume(store, "r").build().unwrap();
    assert_eq!(a.messages()[2].content, "Here.");
    assert_eq!(a.messages()[2].images, before);
}

/// A missing parent folder is never created (a typo higher up the path
/// would leave a tree the user never named): the store's own folder is
/// made, owner-only, only where its parent exists.
#[test]
fn a_store_in_a_missing_folder_is_refused_and_the_folder_not_created() {
    let dir = temp_dir("missing-parent");
    let nested = dir.join("typo").join("journals");
    let err = FileStore::new(&nested).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalIo, "{err}");
    assert!(err.to_string().contains("journals"), "{err}");
    assert!(
        err.to_string().contains("parent folder does not exist"),
        "{err}"
    );
    assert!(!dir.join("typo").exists(), "created a folder nobody named");
    let store = FileStore::new(dir.join("journals")).unwrap();
    assert!(store.dir().is_dir());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(store.dir()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
    // An existing folder is taken as it is.
    FileStore::new(dir.join("journals")).unwrap();
    fs::remove_dir_all(&dir).ok();
}
