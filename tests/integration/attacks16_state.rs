//! ATTACKS.md ("Files and stores", "Lifecycle") over the crate's own files:
//! the evals kit's saved files, images read from a path. The table of
//! which class each component's tests cover is in `tests/attacks16.md`.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use pikuri::evals::{Case, Dataset, Experiment, Report, TaskContext};

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pikuri-a16-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn report() -> Report {
    Experiment::new("x").run(
        &Dataset::new("d").case(Case::new("a", "x")),
        |cx: &mut TaskContext| Ok::<_, String>(cx.input().to_string()),
    )
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The same save again after a crash: a crashed save left its temporary
/// file, and this process has the crashed one's pid (as the first process
/// of a container always has). The save goes through, and the stale file
/// is not opened (its bytes stay as they were).
#[test]
fn a_save_after_a_crash_that_left_a_temporary_file_under_this_pid_succeeds() {
    let dir = temp_dir("stale-tmp");
    let report = report();
    let dataset = Dataset::new("d").case(Case::new("a", "x"));
    for name in ["report.json", "dataset.json", "dataset.jsonl"] {
        // Every name a save of this process could pick first.
        for n in 0..4 {
            let stale = dir.join(format!(".{name}.tmp{}", std::process::id()));
            std::fs::write(&stale, "half a file").unwrap();
            let stale = dir.join(format!(".{name}.tmp{}.{n}", std::process::id()));
            std::fs::write(&stale, "half a file").unwrap();
        }
    }
    report.save(dir.join("report.json")).unwrap();
    dataset.save(dir.join("dataset.json")).unwrap();
    dataset.save(dir.join("dataset.jsonl")).unwrap();
    assert_eq!(Report::load(dir.join("report.json")).unwrap(), report);
    assert_eq!(Dataset::load(dir.join("dataset.json")).unwrap(), dataset);
    for name in names(&dir).iter().filter(|n| n.contains(".tmp")) {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        assert_eq!(text, "half a file", "{name} was written through");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Modes on files that exist already: a report its owner made private
/// stays private when it is saved again, and a new one gets the umask's.
#[test]
fn a_saved_file_keeps_the_mode_of_the_file_it_replaces() {
    let dir = temp_dir("modes");
    let path = dir.join("report.json");
    let report = report();
    report.save(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    report.save(&path).unwrap();
    assert_eq!(mode(&path), 0o600);
    let dataset = Dataset::new("d").case(Case::new("a", "x"));
    let data = dir.join("cases.jsonl");
    dataset.save(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o640)).unwrap();
    dataset.save(&data).unwrap();
    assert_eq!(mode(&data), 0o640);
    std::fs::remove_dir_all(&dir).ok();
}

/// A read-only path: a baseline its owner made read-only is not replaced
/// (the rename would have replaced it without asking), and nothing is
/// left beside it; a read-only folder is an error naming the file.
#[test]
fn a_read_only_file_or_folder_is_not_written() {
    let dir = temp_dir("read-only");
    let path = dir.join("baseline.json");
    let old = report();
    old.save(&path).unwrap();
    let before = std::fs::read(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let changed = Experiment::new("y").run(
        &Dataset::new("d").case(Case::new("b", "y")),
        |cx: &mut TaskContext| Ok::<_, String>(cx.input().to_string()),
    );
    let e = changed.save(&path).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
    assert!(e.contains("baseline.json"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(mode(&path), 0o444);
    assert_eq!(names(&dir), ["baseline.json"]);
    let dataset = Dataset::new("d").case(Case::new("a", "x"));
    let data = dir.join("d.json");
    dataset.save(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o400)).unwrap();
    let e = dataset.save(&data).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");

    // A folder that cannot be written (unless this runs as root).
    let locked = dir.join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    if std::fs::write(locked.join("probe"), "").is_err() {
        let e = old.save(locked.join("r.json")).unwrap_err().to_string();
        assert!(e.contains("r.json"), "{e}");
        assert!(names(&locked).is_empty());
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

/// Run `f` on a thread and wait for it, at most `bound`: a FIFO with no
/// writer blocks an `open` for ever, so the probe must not hang the suite.
fn bounded<T: Send + 'static>(
    bound: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(bound).ok()
}

/// Make a FIFO at `path`; false when `mkfifo` is not there.
fn mkfifo(path: &Path) -> bool {
    std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// Unblock whoever waits to open the FIFO at `path` for reading.
fn release(path: &Path) {
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags_nonblocking()
        .open(path);
}

trait Nonblocking {
    fn custom_flags_nonblocking(&mut self) -> &mut Self;
}

impl Nonblocking for std::fs::OpenOptions {
    fn custom_flags_nonblocking(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt as _;
        // O_NONBLOCK on Linux; elsewhere a plain open, which a reader
        // waiting on the other end lets through anyway.
        self.custom_flags(if cfg!(target_os = "linux") { 0o4000 } else { 0 })
    }
}

/// A FIFO or a device where an image file should be: refused without
/// waiting for a writer, and without reading a device that never ends.
#[test]
fn an_image_from_a_fifo_or_a_device_is_refused_without_hanging() {
    let dir = temp_dir("image-fifo");
    let fifo = dir.join("photo.png");
    if mkfifo(&fifo) {
        let path = fifo.clone();
        let got = bounded(Duration::from_secs(30), move || {
            pikuri::Image::from_file(&path).map_err(|e| e.to_string())
        });
        if got.is_none() {
            release(&fifo);
        }
        let e = got.expect("Image::from_file hung on a FIFO").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(e.contains("photo.png"), "{e}");
    }
    let e = bounded(Duration::from_secs(30), || {
        pikuri::Image::from_file("/dev/zero").map_err(|e| e.to_string())
    })
    .expect("Image::from_file read /dev/zero for ever")
    .unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `target/<profile>/examples/evals` (plain `cargo test` builds it first).
fn evals_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .join("examples/evals");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build --examples` first",
        bin.display()
    );
    bin
}

/// Run the evals example with `args` in `dir`, killed (and failed) if it
/// has not exited within two minutes: (exit code, stderr).
fn run_evals(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = std::process::Command::new(evals_bin())
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the evals example");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the evals example {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code(), reader.join().unwrap())
}

/// The evals example's command line: every bad flag value exits 2 naming
/// the flag; `--junit` never truncates a file the user wrote, never waits
/// on a FIFO, never creates a folder, takes a name with spaces, non-ASCII
/// and a leading dot, and replaces its own file when run again.
#[test]
fn the_evals_example_junit_flag_and_bad_flags() {
    let dir = temp_dir("evals-cli");
    let notes = dir.join("notes.md");
    std::fs::write(&notes, "# my notes\n").unwrap();
    let fifo = dir.join("pipe.xml");
    let made_fifo = mkfifo(&fifo);
    let mut refused: Vec<(Vec<String>, &str)> = vec![
        (vec!["--junit".into()], "--junit"),
        (
            vec!["--record".into(), "http://127.0.0.1:1/v1".into()],
            "--record",
        ),
        (vec!["--baseline".into()], "--baseline"),
        (
            vec!["--record".into(), "127.0.0.1:1/v1".into(), "m".into()],
            "--record",
        ),
        (
            vec![
                "--record".into(),
                "http://127.0.0.1:1/v1".into(),
                " ".into(),
            ],
            "--record",
        ),
        (
            vec!["--junit".into(), notes.to_string_lossy().into()],
            "--junit",
        ),
        (
            vec![
                "--junit".into(),
                dir.join("missing/out.xml").to_string_lossy().into(),
            ],
            "--junit",
        ),
        (
            vec!["--junit".into(), dir.to_string_lossy().into()],
            "--junit",
        ),
    ];
    if made_fifo {
        refused.push((
            vec!["--junit".into(), fifo.to_string_lossy().into()],
            "--junit",
        ));
    }
    let kept = dir.join("kept.xml");
    std::fs::write(&kept, "<?xml version=\"1.0\"?>\n<testsuites>\n").unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o444)).unwrap();
    refused.push((
        vec!["--junit".into(), kept.to_string_lossy().into()],
        "--junit",
    ));
    let dangling = dir.join("dangling.xml");
    std::os::unix::fs::symlink(dir.join("elsewhere/out.xml"), &dangling).unwrap();
    refused.push((
        vec!["--junit".into(), dangling.to_string_lossy().into()],
        "--junit",
    ));
    for (args, flag) in &refused {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr) = run_evals(&dir, &args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "# my notes\n");
    assert!(!dir.join("missing").exists());
    assert!(!dir.join("elsewhere").exists());
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        "<?xml version=\"1.0\"?>\n<testsuites>\n"
    );
    // Twice in a row, at an odd name: the second run replaces its file.
    let out = dir.join(".my rëport.xml");
    for _ in 0..2 {
        let (code, stderr) = run_evals(&dir, &["--junit", out.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{stderr}");
    }
    let xml = std::fs::read_to_string(&out).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert_eq!(xml.matches("<testsuites").count(), 1);
    std::fs::remove_dir_all(&dir).ok();
}

/// Lifecycle: an approver that panics, and a tool whose
/// `changes_user_state` panics, are contained: the call is denied with
/// an observation naming the panic (the tool never runs), the run goes
/// on to its answer, and the journaled run resumes whole with nothing
/// left to do.
#[cfg(feature = "journal")]
#[test]
fn a_panicking_approver_or_state_check_denies_the_call_and_the_journal_resumes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use pikuri::approval::{ApprovalRequest, Decision};
    use pikuri::journal::FileStore;
    use pikuri::testing::{FakeServer, Reply};
    use pikuri::tool::Parameters;
    use pikuri::{Agent, Tool, ToolContext, ToolError};
    use serde_json::{Value, json};

    struct Touchy {
        ran: Arc<AtomicUsize>,
        panics_on_check: bool,
        parameters: Parameters,
    }
    impl Tool for Touchy {
        fn name(&self) -> &'static str {
            "touch"
        }
        fn description(&self) -> &'static str {
            "Touches a file."
        }
        fn parameters(&self) -> &Parameters {
            &self.parameters
        }
        fn changes_user_state(&self) -> bool {
            assert!(!self.panics_on_check, "state check exploded");
            true
        }
        fn call(&self, _: &Value, _: &ToolContext) -> Result<String, ToolError> {
            self.ran.fetch_add(1, Ordering::SeqCst);
            Ok("touched".into())
        }
    }

    let dir = temp_dir("panicking-approver");
    for panics_on_check in [false, true] {
        let server = FakeServer::start();
        server.push(Reply::tool_call("touch", json!({"path": "a"})));
        server.push(Reply::text("Could not touch it."));
        let ran = Arc::new(AtomicUsize::new(0));
        let tool = || Touchy {
            ran: Arc::clone(&ran),
            panics_on_check,
            parameters: Parameters::builder()
                .required_string("path", "Path.")
                .build(),
        };
        let store = FileStore::new(&dir).unwrap();
        let run = if panics_on_check { "check" } else { "review" };
        let approver = move |_: &ApprovalRequest| -> Decision {
            assert!(panics_on_check, "approver exploded");
            Decision::Approve
        };
        let mut agent = Agent::builder(server.transport())
            .add_tool(tool())
            .approver(approver)
            .journal(store.clone(), run)
            .build()
            .unwrap();
        let outcome = agent.run_loop("touch a").unwrap();
        assert_eq!(outcome.answer.as_deref(), Some("Could not touch it."));
        let observation = agent
            .messages()
            .iter()
            .find(|m| m.role == pikuri::Role::Tool)
            .map(|m| m.content.clone())
            .unwrap();
        if panics_on_check {
            // Treated as state-changing: asked, and approved.
            assert_eq!(observation, "touched");
            assert_eq!(ran.load(Ordering::SeqCst), 1);
        } else {
            assert!(
                observation.contains("the approver panicked: approver exploded"),
                "{observation}"
            );
            assert_eq!(ran.load(Ordering::SeqCst), 0);
        }
        let before = agent.messages().to_vec();
        drop(agent);
        let resumed = Agent::builder(server.transport())
            .add_tool(tool())
            .resume(store, run)
            .build()
            .unwrap();
        assert!(!resumed.interrupted());
        assert_eq!(resumed.messages(), before.as_slice());
        server.assert_all_used();
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Lifecycle × the journal: a cancel at each boundary of a tool batch (in
/// the first call, in the second, in the approver before either) ends the
/// run with `Cancelled`, every call answered; the journal then holds
/// exactly the history the agent held, as a finished run (not one to
/// resume), and a `retry_turn` of the resumed agent goes on from there and
/// is journaled too.
#[cfg(feature = "journal")]
#[test]
fn a_cancel_at_each_boundary_of_a_journaled_batch_resumes_to_the_same_history() {
    use std::sync::Arc;

    use pikuri::approval::{ApprovalRequest, Decision};
    use pikuri::journal::FileStore;
    use pikuri::testing::{FakeServer, Reply};
    use pikuri::tool::{FnTool, Parameters};
    use pikuri::{Agent, Cancellable, Configurator};
    use serde_json::json;

    let dir = temp_dir("journaled-cancel");
    for at in ["tool 1", "tool 2", "approver 1", "approver 2"] {
        let server = FakeServer::start();
        server.push(Reply::tool_calls(vec![
            ("step", json!({"n": "1"})),
            ("step", json!({"n": "2"})),
        ]));
        server.push(Reply::text("Done."));
        let cancel = Cancellable::new();
        let builder = |cancel: &Cancellable| -> Configurator {
            let (c1, c2) = (cancel.clone(), cancel.clone());
            let tool = FnTool::new(
                "step",
                "A step.",
                Parameters::builder().required_string("n", "Which.").build(),
                move |args, _| {
                    if format!("tool {}", args["n"].as_str().unwrap()) == at {
                        c1.cancel();
                    }
                    Ok(format!("step {} done", args["n"].as_str().unwrap()))
                },
            )
            .state_changing();
            let approver = Arc::new(move |r: &ApprovalRequest| {
                if format!("approver {}", r.arguments()["n"].as_str().unwrap()) == at {
                    c2.cancel();
                }
                Decision::Approve
            });
            Agent::builder(server.transport())
                .add_tool(tool)
                .cancellable(cancel.clone())
                .approver(move |r: &ApprovalRequest| approver(r))
        };
        let store = FileStore::new(&dir).unwrap();
        let run = at.replace(' ', "-");
        let mut agent = builder(&cancel)
            .journal(store.clone(), &run)
            .build()
            .unwrap();
        let err = agent.run_loop("go").unwrap_err();
        assert!(err.is_cancelled(), "{at}: {err}");
        let held = agent.messages().to_vec();
        let tools = held.iter().filter(|m| m.role == pikuri::Role::Tool).count();
        assert_eq!(tools, 2, "{at}: every call answered: {held:?}");
        drop(agent);

        let mut resumed = builder(&cancel)
            .resume(store.clone(), &run)
            .build()
            .unwrap();
        assert!(!resumed.interrupted(), "{at}");
        assert_eq!(resumed.messages(), held.as_slice(), "{at}");
        let outcome = resumed.retry_turn().unwrap();
        assert_eq!(outcome.answer.as_deref(), Some("Done."), "{at}");
        let after = resumed.messages().to_vec();
        drop(resumed);
        let again = builder(&cancel).resume(store, &run).build().unwrap();
        assert!(!again.interrupted(), "{at}");
        assert_eq!(again.messages(), after.as_slice(), "{at}");
        server.assert_all_used();
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The builtin file tools: a FIFO where a file should be is refused
/// without waiting for a writer (the model can name any file under the
/// root), and so is a link under the root to a device; an empty file
/// says so, not "nothing".
#[cfg(feature = "builtin")]
#[test]
fn read_file_refuses_a_fifo_or_a_device_without_hanging() {
    use pikuri::{Tool, ToolContext};
    use serde_json::json;

    let root = temp_dir("read-fifo");
    std::fs::write(root.join("empty.txt"), "").unwrap();
    std::os::unix::fs::symlink("/dev/zero", root.join("zeros")).unwrap();
    let made_fifo = mkfifo(&root.join("pipe"));
    let mut paths = vec!["zeros"];
    if made_fifo {
        paths.push("pipe");
    }
    for path in paths {
        let r = root.clone();
        let got = bounded(Duration::from_secs(30), move || {
            let tool = pikuri::builtin::read_file(r);
            tool.call(&json!({ "path": path }), &ToolContext::detached())
                .map_err(|e| e.message().to_string())
        });
        if got.is_none() && path == "pipe" {
            release(&root.join("pipe"));
        }
        let e = got
            .unwrap_or_else(|| panic!("read_file hung on {path}"))
            .unwrap_err();
        assert!(
            e.contains("not a regular file") || e.contains("outside"),
            "{path}: {e}"
        );
    }
    let tool = pikuri::builtin::read_file(root.clone());
    let empty = tool
        .call(&json!({"path": "empty.txt"}), &ToolContext::detached())
        .unwrap();
    assert_eq!(empty, "[the file is empty]");
    if made_fifo {
        let e = pikuri::builtin::list_dir(root.clone())
            .call(&json!({"path": "pipe"}), &ToolContext::detached())
            .unwrap_err();
        assert!(e.message().contains("not a directory"), "{}", e.message());
    }
    std::fs::remove_dir_all(&root).ok();
}

/// A symbolic link where a saved file should be: one to a file that
/// matters is refused (its content is not the kit's), one to a report is
/// replaced by the new file and its target left as it was; a dangling one
/// is replaced, its target never created.
#[test]
fn a_link_where_a_saved_file_should_be_is_never_written_through() {
    let dir = temp_dir("save-links");
    let report = report();
    let victim = dir.join("passwd");
    std::fs::write(&victim, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    let link = dir.join("to-passwd.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let e = report.save(&link).unwrap_err().to_string();
    assert!(e.contains("is not a report"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root:x:0:0:root:/root:/bin/bash\n"
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    let old = dir.join("old.json");
    report.save(&old).unwrap();
    let before = std::fs::read(&old).unwrap();
    let link = dir.join("to-old.json");
    std::os::unix::fs::symlink(&old, &link).unwrap();
    let other = Experiment::new("other").run(
        &Dataset::new("d2").case(Case::new("b", "y")),
        |cx: &mut TaskContext| Ok::<_, String>(cx.input().to_string()),
    );
    other.save(&link).unwrap();
    assert_eq!(std::fs::read(&old).unwrap(), before, "written through");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
    assert_eq!(Report::load(&link).unwrap(), other);

    let dangling = dir.join("dangling.json");
    std::os::unix::fs::symlink(dir.join("elsewhere/r.json"), &dangling).unwrap();
    report.save(&dangling).unwrap();
    assert!(!dir.join("elsewhere").exists());
    std::fs::remove_dir_all(&dir).ok();
}

/// The same command after a failure: recording against a server that is
/// down (or a wrong URL) answered no request, and the empty recording
/// replaced the last good cassette, so every replay after failed. Now the
/// finish is an error and the cassette is left as it was.
#[test]
fn a_recording_against_a_server_that_answered_nothing_keeps_the_last_cassette() {
    use pikuri::evals::Offline;
    use pikuri::testing::{FakeServer, Reply};
    use pikuri::{Agent, ChatTransport};

    let dir = temp_dir("empty-recording");
    let cassette = dir.join("run.cassette.json");
    let dataset = Dataset::new("d").case(Case::new("a", "Capital of France?"));
    let run = |offline: &Offline| {
        let transport = offline.transport();
        Experiment::new("x").run(&dataset, move |cx: &mut TaskContext| {
            let mut agent = Agent::builder(transport.clone())
                .http(crate::util::fast_http())
                .add_listener(cx.listener())
                .build()?;
            Ok::<_, pikuri::Error>(agent.run_loop(cx.input())?.answer)
        })
    };
    let live = FakeServer::start();
    live.push(Reply::text("Paris."));
    let recording = Offline::record(&cassette, &live.transport()).unwrap();
    run(&recording);
    recording.finish().unwrap();
    let good = std::fs::read(&cassette).unwrap();

    let down = ChatTransport::new("m").with_api_base(format!(
        "http://127.0.0.1:{}/v1",
        crate::util::closed_port()
    ));
    let recording = Offline::record(&cassette, &down).unwrap();
    let report = run(&recording);
    assert!(report.cases[0].runs.iter().all(|r| !r.pass));
    let e = recording.finish().unwrap_err().to_string();
    assert!(e.contains("nothing was recorded"), "{e}");
    assert_eq!(std::fs::read(&cassette).unwrap(), good);
    let replay = Offline::replay(&cassette).unwrap();
    run(&replay);
    replay.finish().unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
