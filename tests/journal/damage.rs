//! The file store under damage (the "Files and stores" attacks): what
//! stands where a journal or its lock should be (a link, a directory, a
//! FIFO, a device), damage in every position, a file that is not a
//! journal, records out of order, and the mode of a file that already
//! exists. Each is told apart with a typed error naming the path, the
//! file found there is left byte for byte, and a fresh run id works next.

use std::fs;
use std::io::Write;
use std::path::Path;

use pikuri::journal::{FileStore, JournalStore};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Error, ErrorKind};
use serde_json::json;

use super::{agent, finished_run, no_spawn, temp_dir};

const RECORD: &str = r#"{"type":"user","content":"x"}"#;

/// What a program's file looks like: text lines, newline-terminated.
const PASSWD: &[u8] = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/:/usr/sbin/nologin\n";

/// `err` is of `kind` and names `path`.
#[track_caller]
fn names(err: &Error, kind: ErrorKind, path: &Path) {
    assert_eq!(err.kind(), kind, "{err}");
    let path = path.display().to_string();
    assert!(err.to_string().contains(&path), "{err} (expected {path})");
}

/// Every way in refuses `run` with `kind` naming `path`: the store's
/// append and read, a new run, a resume.
#[track_caller]
fn refused(server: &FakeServer, store: &FileStore, run: &str, kind: ErrorKind, path: &Path) {
    // A new store, as a new process has: no file handle open yet (a
    // store keeps the file it appends to open).
    let fresh = FileStore::new(store.dir()).unwrap();
    names(&fresh.append(run, RECORD).unwrap_err(), kind, path);
    names(&fresh.read(run).unwrap_err(), kind, path);
    let err = agent(server)
        .journal(fresh.clone(), run)
        .build()
        .unwrap_err();
    names(&err, kind, path);
    let err = agent(server).resume(fresh, run).build().unwrap_err();
    names(&err, kind, path);
}

/// A fresh run id in the same store still works, and resumes whole.
#[track_caller]
fn a_fresh_run_works(server: &FakeServer, store: &FileStore) {
    let store = FileStore::new(store.dir()).unwrap();
    finished_run(server, &store, "fresh");
    let a = agent(server).resume(store, "fresh").build().unwrap();
    assert_eq!(a.messages().len(), 4);
}

#[cfg(unix)]
#[test]
fn a_link_where_the_journal_should_be_is_refused_and_its_target_untouched() {
    use std::os::unix::fs::symlink;
    let _serial = no_spawn();
    let server = FakeServer::start();
    let root = temp_dir("link");
    let store = FileStore::new(root.join("journals")).unwrap();
    // A link to a file that matters.
    let victim = root.join("passwd");
    fs::write(&victim, PASSWD).unwrap();
    symlink(&victim, store.path("r")).unwrap();
    refused(&server, &store, "r", ErrorKind::JournalIo, &store.path("r"));
    let err = store.append("r", RECORD).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(fs::read(&victim).unwrap(), PASSWD);

    // A dangling link: its target is not created.
    let missing = root.join("missing");
    symlink(&missing, store.path("d")).unwrap();
    refused(&server, &store, "d", ErrorKind::JournalIo, &store.path("d"));
    assert!(!missing.exists());

    // A link to a device: nothing is written to it, and it does not read
    // as "no journal".
    symlink("/dev/null", store.path("n")).unwrap();
    refused(&server, &store, "n", ErrorKind::JournalIo, &store.path("n"));

    a_fresh_run_works(&server, &store);
}

#[cfg(unix)]
#[test]
fn a_link_where_the_lock_should_be_is_refused_and_its_target_untouched() {
    use std::os::unix::fs::symlink;
    let _serial = no_spawn();
    let server = FakeServer::start();
    let root = temp_dir("lock-link");
    let store = FileStore::new(root.join("journals")).unwrap();
    let victim = root.join("passwd");
    fs::write(&victim, PASSWD).unwrap();
    let lock = store.dir().join("r.lock");
    symlink(&victim, &lock).unwrap();
    names(&store.lock("r").unwrap_err(), ErrorKind::JournalIo, &lock);
    let err = agent(&server)
        .journal(store.clone(), "r")
        .build()
        .unwrap_err();
    names(&err, ErrorKind::JournalIo, &lock);
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(fs::read(&victim).unwrap(), PASSWD);
    assert!(!store.path("r").exists(), "no journal was begun");

    let missing = root.join("missing");
    let lock = store.dir().join("d.lock");
    symlink(&missing, &lock).unwrap();
    let err = agent(&server)
        .journal(store.clone(), "d")
        .build()
        .unwrap_err();
    names(&err, ErrorKind::JournalIo, &lock);
    assert!(!missing.exists());

    // A directory where the lock should be.
    let lock = store.dir().join("x.lock");
    fs::create_dir(&lock).unwrap();
    names(&store.lock("x").unwrap_err(), ErrorKind::JournalIo, &lock);

    a_fresh_run_works(&server, &store);
}

#[cfg(unix)]
#[test]
fn a_directory_fifo_or_device_where_the_journal_should_be_is_refused() {
    use std::process::Command;
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("special")).unwrap();

    fs::create_dir(store.path("dir")).unwrap();
    refused(
        &server,
        &store,
        "dir",
        ErrorKind::JournalIo,
        &store.path("dir"),
    );
    let err = store.read("dir").unwrap_err();
    assert!(err.to_string().contains("a directory"), "{err}");

    // A FIFO opened for reading and writing would take the records into
    // its buffer (and lose them); opened for reading only it would block.
    let fifo = store.path("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        refused(&server, &store, "fifo", ErrorKind::JournalIo, &fifo);
        let err = store.append("fifo", RECORD).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
    }

    // A device node (only root may make one): /dev/null's numbers.
    let device = store.path("null");
    let made = Command::new("mknod")
        .arg(&device)
        .args(["c", "1", "3"])
        .status();
    if made.is_ok_and(|s| s.success()) {
        refused(&server, &store, "null", ErrorKind::JournalIo, &device);
        let err = store.append("null", RECORD).unwrap_err();
        assert!(err.to_string().contains("a device"), "{err}");
    }

    a_fresh_run_works(&server, &store);
}

/// Only the bytes after the last newline are a torn write: a damaged
/// record before them is damage, wherever it is.
#[test]
fn damage_in_any_whole_record_is_corrupt_even_before_a_torn_one() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("damage")).unwrap();
    finished_run(&server, &store, "r");
    let path = store.path("r");
    let good = fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let torn = &lines[1][..20];
    for damaged in 0..lines.len() {
        let mut text: String = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == damaged {
                    // One byte of the JSON changed: its checksum fails.
                    format!("{}X\n", &l[..l.len() - 1])
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        for tail in ["", torn] {
            text.push_str(tail);
            fs::write(&path, &text).unwrap();
            refused(&server, &store, "r", ErrorKind::JournalCorrupt, &path);
            let err = store.read("r").unwrap_err();
            let record = format!("record {} is damaged", damaged + 1);
            assert!(err.to_string().contains(&record), "{err}");
            assert_eq!(fs::read_to_string(&path).unwrap(), text, "left as it was");
        }
    }
    // Bytes after the last newline that no record begins with.
    fs::write(&path, format!("{good}\0\0\0\0")).unwrap();
    refused(&server, &store, "r", ErrorKind::JournalCorrupt, &path);
    // A torn last record alone is a crash: ignored.
    fs::write(&path, format!("{good}{torn}")).unwrap();
    assert_eq!(store.read("r").unwrap().len(), lines.len());
    agent(&server).resume(store.clone(), "r").build().unwrap();
    a_fresh_run_works(&server, &store);
}

/// A file that is not a journal (zeros, random bytes, text, a line with a
/// huge length) is refused under its run id, and never truncated or
/// written to.
#[test]
fn a_file_that_is_not_a_journal_is_refused_and_never_overwritten() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("foreign")).unwrap();
    let mut random = Vec::with_capacity(4096);
    let mut x: u32 = 0x2545_f491;
    while random.len() < 4096 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        random.push(x.to_le_bytes()[0]);
    }
    let mut random_line = random.clone();
    random_line.retain(|&b| b != b'\n');
    let foreign: [(&str, Vec<u8>); 6] = [
        ("zeros", vec![0; 4096]),
        ("random", random_line),
        ("random-lines", random),
        ("passwd", PASSWD.to_vec()),
        ("text", b"notes, no newline".to_vec()),
        ("huge", b"ffffffffffffffff 00000000 {}\n".to_vec()),
    ];
    for (run, bytes) in &foreign {
        let path = store.path(run);
        fs::write(&path, bytes).unwrap();
        refused(&server, &store, run, ErrorKind::JournalCorrupt, &path);
        assert_eq!(&fs::read(&path).unwrap(), bytes, "{run} left as it was");
    }
    // Files whose name is no run id are not runs (they could not be
    // read): the listing skips them instead of failing on them.
    fs::write(store.dir().join("my notes.journal"), "x").unwrap();
    fs::write(store.dir().join(".hidden.journal"), "x").unwrap();
    assert!(
        !store
            .runs()
            .unwrap()
            .iter()
            .any(|r| r.contains(' ') || r.starts_with('.'))
    );
    let err = store.read("zeros").unwrap_err();
    assert!(err.to_string().contains("not a journal"), "{err}");
    assert!(err.to_string().contains("move the file aside"), "{err}");
    // A listing shows them, as damaged.
    let unfinished = store.unfinished().unwrap();
    assert!(unfinished.contains(&"zeros".to_string()), "{unfinished:?}");
    a_fresh_run_works(&server, &store);
}

/// An empty file and a torn first record hold no record (a crash before
/// the first one was whole): told apart from damage, a new run takes them.
#[test]
fn an_empty_file_or_a_torn_first_record_holds_no_record() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("empty")).unwrap();
    fs::write(store.path("empty"), "").unwrap();
    fs::write(store.path("torn"), "0000004a 1234abcd {\"type\":\"hea").unwrap();
    for run in ["empty", "torn"] {
        assert!(store.read(run).unwrap().is_empty());
        let err = agent(&server)
            .resume(store.clone(), run)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::JournalMismatch, "{err}");
        finished_run(&server, &store, run);
        assert_eq!(store.read(run).unwrap().len(), 7, "{run}");
    }
}

/// Tool results in an order no run writes are refused, and the orders a
/// run does write (sequential and parallel batches) still read.
#[test]
fn tool_results_out_of_call_order_are_corrupt() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let two = || {
        Reply::tool_calls(vec![
            ("echo", json!({"s": "first"})),
            ("echo", json!({"s": "second"})),
        ])
    };
    // Parallel first: its starts come before both results, so only the
    // order check can tell a swap (a sequential swap also puts a start
    // after its call's result).
    for (run, parallel) in [("par", true), ("seq", false)] {
        let store = FileStore::new(temp_dir("order")).unwrap();
        server.push(two());
        server.push(Reply::text("Both."));
        let mut a = agent(&server)
            .parallel_tool_calls(parallel)
            .journal(store.clone(), run)
            .build()
            .unwrap();
        a.run_loop("echo twice").unwrap();
        drop(a);
        // As written, it resumes with the results in call order.
        let a = agent(&server).resume(store.clone(), run).build().unwrap();
        assert_eq!(a.messages()[2].content, "first");
        assert_eq!(a.messages()[3].content, "second");
        drop(a);

        let path = store.path(run);
        let good = fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = good.lines().collect();
        let results: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].contains(r#""type":"tool_result""#))
            .collect();
        assert_eq!(results.len(), 2, "{good}");
        // Swapped: each record whole, the sequence impossible.
        lines.swap(results[0], results[1]);
        let swapped: String = lines.iter().flat_map(|l| [*l, "\n"]).collect();
        fs::write(&path, &swapped).unwrap();
        let err = agent(&server)
            .resume(store.clone(), run)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::JournalCorrupt, "{err}");
        if parallel {
            assert!(err.to_string().contains("call order"), "{err}");
        }
        assert_eq!(fs::read_to_string(&path).unwrap(), swapped);

        // Repeated: the first result twice.
        lines.swap(results[0], results[1]);
        let first = lines[results[0]];
        lines.insert(results[0] + 1, first);
        let repeated: String = lines.iter().flat_map(|l| [*l, "\n"]).collect();
        fs::write(&path, &repeated).unwrap();
        let err = agent(&server)
            .resume(store.clone(), run)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::JournalCorrupt, "{err}");
        a_fresh_run_works(&server, &store);
    }
}

/// A journal that exists with a wider mode is owner-only once the store
/// writes to it.
#[cfg(unix)]
#[test]
fn an_existing_journal_is_made_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("existing-mode")).unwrap();
    finished_run(&server, &store, "r");
    let path = store.path("r");
    let mode = || fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    // A resumed run writes to it.
    server.push(Reply::text("Again."));
    let store = FileStore::new(store.dir()).unwrap();
    let mut a = agent(&server).resume(store.clone(), "r").build().unwrap();
    a.run_loop("more").unwrap();
    drop(a);
    assert_eq!(mode(), 0o600);
    // The store's own append does too.
    fs::set_permissions(&path, fs::Permissions::from_mode(0o664)).unwrap();
    let fresh = FileStore::new(store.dir()).unwrap();
    let before = fresh.read("r").unwrap().len();
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(b"0000").unwrap(); // and a torn tail, cut as usual
    drop(f);
    fresh.append("r", RECORD).unwrap();
    assert_eq!(mode(), 0o600);
    assert_eq!(fresh.read("r").unwrap().len(), before + 1);
}

/// A loaded history may end with a batch awaiting approval; the results
/// the host's decisions then store are a sequence a run writes, and the
/// journal resumes.
#[test]
fn results_for_a_loaded_histories_pending_calls_resume() {
    use pikuri::approval::Decision;
    use pikuri::{History, Message, ToolCall};
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("loaded")).unwrap();
    let calls = Message::assistant_tool_calls(
        "",
        vec![
            ToolCall::new("c1", "echo", r#"{"s":"one"}"#),
            ToolCall::new("c2", "echo", r#"{"s":"two"}"#),
        ],
    );
    let history = History::new(vec![Message::user("echo"), calls]).unwrap();
    let mut a = agent(&server).journal(store.clone(), "r").build().unwrap();
    a.load_history(history).unwrap();
    server.push(Reply::text("Both."));
    a.resume([("c1", Decision::Approve), ("c2", Decision::Approve)])
        .unwrap();
    let before = a.messages().len();
    drop(a);
    let a = agent(&server).resume(store, "r").build().unwrap();
    assert_eq!(a.messages().len(), before);
    assert_eq!(a.messages()[2].content, "one");
}

/// A folder, a FIFO or a dangling link named like a journal is listed by
/// `unfinished` with the runs a crash cut off, instead of failing the
/// whole listing: a host that resumes every unfinished run at start still
/// finds the others, and the odd one's resume names it.
#[cfg(unix)]
#[test]
fn an_odd_entry_in_the_store_is_listed_unfinished_and_hides_no_other_run() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("odd-entries")).unwrap();
    finished_run(&server, &store, "cut");
    // Cut off before its end: the last record (the run's end) never came.
    let path = store.path("cut");
    let text = fs::read_to_string(&path).unwrap();
    let kept: String = text
        .lines()
        .rev()
        .skip(1)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .flat_map(|l| [l, "\n"])
        .collect();
    fs::write(&path, kept).unwrap();
    finished_run(&server, &store, "done");
    fs::create_dir(store.path("dir")).unwrap();
    std::os::unix::fs::symlink(store.dir().join("nowhere"), store.path("link")).unwrap();
    let mut odd = vec!["dir", "link"];
    if std::process::Command::new("mkfifo")
        .arg(store.path("fifo"))
        .status()
        .is_ok_and(|s| s.success())
    {
        odd.push("fifo");
    }
    let fresh = FileStore::new(store.dir()).unwrap();
    let unfinished = fresh.unfinished().unwrap();
    let mut expected = vec!["cut"];
    expected.extend(&odd);
    expected.sort_unstable();
    assert_eq!(unfinished, expected);
    for run in odd {
        let err = agent(&server)
            .resume(fresh.clone(), run)
            .build()
            .unwrap_err();
        names(&err, ErrorKind::JournalIo, &store.path(run));
    }
    assert!(
        agent(&server)
            .resume(fresh, "cut")
            .build()
            .unwrap()
            .interrupted()
    );
}

/// A huge length prefix after the last newline is damage, not a torn
/// record: no crash leaves a length no record can have (past `isize::MAX`,
/// or more than eight digits with a leading zero). It was read as torn and
/// cut off by the next append, bytes the store never wrote.
#[test]
fn a_huge_length_after_the_last_record_is_corrupt_not_torn() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("huge-tail")).unwrap();
    for (run, tail) in [
        ("max", "ffffffffffffffff 00000000 {\"type\":\"user\""),
        ("zeros", "000000000000001e 1234abcd {"),
        ("cut", "8000000000000000"),
    ] {
        finished_run(&server, &store, run);
        let path = store.path(run);
        let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(tail.as_bytes()).unwrap();
        drop(file);
        let before = fs::read(&path).unwrap();
        refused(&server, &store, run, ErrorKind::JournalCorrupt, &path);
        assert_eq!(fs::read(&path).unwrap(), before, "{run} left as it was");
    }
    // A torn record of an ordinary length is still cut off and resumed.
    finished_run(&server, &store, "torn");
    let path = store.path("torn");
    let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(b"0000001e 1234abcd {\"type\"").unwrap();
    drop(file);
    assert_eq!(store.read("torn").unwrap().len(), 7);
}

/// Records swapped at a run's end: the final answer after its own
/// `turn_end` read as a run cut off after its answer (resumable, so a
/// resume would go on from a finished turn). No writer stores a response
/// after a run's end unless a retry has a message to answer: corrupt.
#[test]
fn a_final_answer_swapped_with_the_runs_end_is_corrupt() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("swapped-end")).unwrap();
    finished_run(&server, &store, "r");
    let path = store.path("r");
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    assert!(lines[n - 1].contains("\"turn_end\""), "{text}");
    assert!(lines[n - 2].contains("\"response\""), "{text}");
    lines.swap(n - 1, n - 2);
    let swapped: String = lines.iter().flat_map(|l| [*l, "\n"]).collect();
    fs::write(&path, &swapped).unwrap();
    let err = agent(&server)
        .resume(store.clone(), "r")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::JournalCorrupt, "{err}");
    assert!(
        err.to_string().contains("does not end with its answer"),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), swapped);
    a_fresh_run_works(&server, &store);
}
