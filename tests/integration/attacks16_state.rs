//! ATTACKS.md ("Files and stores", "Lifecycle") over the crate's own files:
//! the evals kit's saved files, images read from a path. The table of
//! which class each component's tests cover is in `changes/state.md`.

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
