//! Evaluate a small arithmetic agent on a ten-case dataset, offline, and
//! compare the report with the committed baseline (issue 41).
//!
//! ```text
//! cargo run --example evals                      replay recording.cassette.json, compare with baseline.json
//! cargo run --example evals -- --junit out.xml   also write JUnit XML
//! cargo run --example evals -- --save-baseline   write this report as the new baseline
//! cargo run --example evals -- --record URL MODEL
//!                                                record the runs against a real server first
//!                                                (e.g. `scripts/llama-server.sh start` and model `smollm2`)
//! ```
//!
//! The files live beside this one, in `examples/evals/`. The exit status is
//! 0 when no case regressed against the baseline, 1 when one did (the
//! regressions are listed), 2 on a bad flag or file. `--junit` replaces a
//! JUnit file only (any other file is left alone, a FIFO refused), in a
//! folder that exists.

use std::path::PathBuf;
use std::process::ExitCode;

use pikuri::evals::{Dataset, Experiment, Offline, Report, TaskContext};
use pikuri::{Agent, ChatTransport, OnExhausted, StepLimit, builtin};
use serde_json::json;

const SYSTEM: &str = "You are a careful assistant. For any arithmetic, call the calculator tool \
and answer with its result. Answer other questions briefly, without tools.";

struct Args {
    record: Option<(String, String)>,
    junit: Option<PathBuf>,
    save_baseline: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        record: None,
        junit: None,
        save_baseline: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--record" => {
                let (Some(url), Some(model)) = (it.next(), it.next()) else {
                    return Err("--record needs a base URL and a model".into());
                };
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("--record needs an http(s) base URL, got {url:?}"));
                }
                if model.trim().is_empty() {
                    return Err("--record needs a model name, got a blank one".into());
                }
                args.record = Some((url, model));
            }
            "--junit" => {
                let path: PathBuf = it.next().ok_or("--junit needs a path")?.into();
                junit_writable(&path).map_err(|e| format!("--junit {}: {e}", path.display()))?;
                args.junit = Some(path);
            }
            "--save-baseline" => args.save_baseline = true,
            other => {
                return Err(format!(
                    "unknown argument {other:?} (see the top of examples/evals/main.rs)"
                ));
            }
        }
    }
    Ok(args)
}

/// Whether the JUnit file may be written at `path`, checked before the
/// runs: its folder exists (it is not created), and nothing but a JUnit
/// file is replaced. A FIFO would block the write until a reader came, a
/// device is no file, and a file the user wrote is not truncated.
fn junit_writable(path: &std::path::Path) -> Result<(), String> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if !parent.is_dir() {
        return Err("its folder does not exist (it is not created)".into());
    }
    let meta = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return if std::fs::symlink_metadata(path).is_ok() {
                Err("a symbolic link to nothing: name the file itself".into())
            } else {
                Ok(())
            };
        }
        Err(e) => return Err(e.to_string()),
        Ok(meta) => meta,
    };
    if !meta.is_file() {
        return Err("not a regular file (a folder, a FIFO or a device)".into());
    }
    if meta.permissions().readonly() {
        return Err("read-only: not replaced".into());
    }
    let mut head = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open(path).map_err(|e| e.to_string())?, 4096),
        &mut head,
    )
    .map_err(|e| e.to_string())?;
    let head = String::from_utf8_lossy(&head);
    if head.is_empty() || (head.starts_with("<?xml") && head.contains("<testsuite")) {
        Ok(())
    } else {
        Err("exists and is not a JUnit file: not replaced (remove it first)".into())
    }
}

/// The agent under evaluation, on `transport`, run on every turn of the case.
fn run_case(transport: &ChatTransport, cx: &mut TaskContext) -> pikuri::Result<Option<String>> {
    let mut agent = Agent::builder(transport.clone())
        .system_prompt(SYSTEM)
        .add_tool(builtin::calculator())
        .step_limit(StepLimit::with_policy(4, OnExhausted::Synthesize))
        // Pinned sampling, so a recording is worth keeping.
        .request_field("temperature", json!(0))
        .request_field("max_tokens", json!(200))
        .add_listener(cx.listener())
        .cancellable(cx.cancellable())
        .build()?;
    let mut answer = None;
    for turn in cx.turns().to_vec() {
        answer = agent.run_loop(&turn)?.answer;
    }
    Ok(answer)
}

fn run(offline: &Offline, dataset: &Dataset) -> Report {
    let transport = offline.transport();
    Experiment::new("arithmetic agent")
        // One run at a time when recording (a CPU model), two in replay.
        .threads(if offline.is_recording() { 1 } else { 2 })
        .timeout(std::time::Duration::from_secs(300))
        .on_progress(|p| eprint!("\r{}/{} runs, {} passed ", p.done, p.total, p.passed))
        .run(dataset, move |cx: &mut TaskContext| {
            run_case(&transport, cx)
        })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("evals: {e}");
            return ExitCode::from(2);
        }
    };
    match eval(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("evals: {e}");
            ExitCode::from(2)
        }
    }
}

fn eval(args: &Args) -> pikuri::Result<ExitCode> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/evals");
    let dataset = Dataset::load(dir.join("dataset.json"))?;
    let cassette = dir.join("recording.cassette.json");
    if let Some((url, model)) = &args.record {
        let live = ChatTransport::new(model).with_api_base(url);
        let recording = Offline::record(&cassette, &live)?;
        let report = run(&recording, &dataset);
        recording.finish()?;
        eprintln!("\nrecorded {} into {}", dataset.name(), cassette.display());
        print!("{}", report.table());
    }
    let replay = Offline::replay(&cassette)?;
    let report = run(&replay, &dataset);
    replay.finish()?;
    eprintln!();
    print!("{}", report.table());
    if let Some(path) = &args.junit {
        std::fs::write(path, report.to_junit())
            .map_err(|e| pikuri::Error::InvalidInput(format!("--junit {}: {e}", path.display())))?;
    }
    let baseline_path = dir.join("baseline.json");
    if args.save_baseline {
        report.without_timings().save(&baseline_path)?;
        println!("saved the baseline to {}", baseline_path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let baseline = Report::load(&baseline_path)?;
    let diff = report.diff(&baseline, 0.0);
    print!("against the baseline: {diff}");
    Ok(if diff.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
