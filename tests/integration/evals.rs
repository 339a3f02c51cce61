//! Issue 41: the evals kit through its public API: datasets and their
//! files, what a run captures, each evaluator passing and failing, the
//! judge on the scripted server, repeats, panics, hangs and cancel, the
//! report's forms, the baseline diff, and a cassette replayed twice.

// The kit rounds its figures to six decimals, so they compare exactly; the
// evaluator matrix reads best as one list.
#![allow(clippy::float_cmp, clippy::too_many_lines)]

use std::io::Write as _;
use std::os::unix::fs::FileTypeExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pikuri::evals::{
    Case, Check, Dataset, Evaluator, Experiment, Judge, MAX_DATASET_BYTES, Offline, Order, Report,
    Run, RunStatus, TaskContext, ToolCallRecord, TypedEquals, Verdict,
};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Cancellable, ChatTransport, Event, Usage, builtin};
use serde_json::{Value, json};

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pikuri-evals-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The usual task: an agent with the calculator on `transport`, every turn
/// of the case sent in order, the answer of the last one as the output.
fn agent_task(
    transport: ChatTransport,
) -> impl Fn(&mut TaskContext) -> Result<Option<String>, pikuri::Error> + Send + Sync + 'static {
    move |cx: &mut TaskContext| {
        let mut agent = Agent::builder(transport.clone())
            .add_tool(builtin::calculator())
            .add_listener(cx.listener())
            .cancellable(cx.cancellable())
            .build()?;
        let mut answer = None;
        for turn in cx.turns().to_vec() {
            answer = agent.run_loop(&turn)?.answer;
        }
        Ok(answer)
    }
}

fn err(result: pikuri::Result<Dataset>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn dataset_files_round_trip_and_errors_name_the_case_and_field() {
    let dataset = Dataset::new("mixed")
        .check(Check::max_requests(4))
        .case(
            Case::new("one", "Hi")
                .expect(json!({"a": 1}))
                .meta("tag", json!(["x"])),
        )
        .case(
            Case::with_turns("two", ["Hi", "Bye"])
                .check(Check::trajectory(["a", "b"], Order::Subset)),
        );
    let dir = temp_dir("dataset");
    for name in ["d.json", "d.jsonl"] {
        let path = dir.join(name);
        dataset.save(&path).unwrap();
        assert_eq!(Dataset::load(&path).unwrap(), dataset, "{name}");
    }
    // A JSON Lines file without a header takes its name from the file.
    std::fs::write(
        dir.join("plain.jsonl"),
        "{\"name\":\"a\",\"input\":\"x\"}\n\n",
    )
    .unwrap();
    assert_eq!(
        Dataset::load(dir.join("plain.jsonl")).unwrap().name(),
        "plain"
    );

    let cases = |c: &str| Dataset::from_json(&format!(r#"{{"name": "d", "cases": [{c}]}}"#));
    assert_eq!(
        err(cases(
            r#"{"name": "a", "input": "x"}, {"name": "b", "input": ["x", 2]}"#
        )),
        r#"invalid input: case #2 ("b"): field "input": expected a string or an array of strings"#
    );
    assert_eq!(
        err(cases(r#"{"name": "a", "input": "x", "expect": 1}"#)),
        r#"invalid input: case #1 ("a"): unknown field "expect" (expected name, input, expected, metadata, checks)"#
    );
    assert_eq!(
        err(cases(r#"{"input": "x"}"#)),
        r#"invalid input: case #1: field "name" is missing"#
    );
    assert_eq!(
        err(cases(r#"{"name": "a"}"#)),
        r#"invalid input: case #1 ("a"): field "input" is missing"#
    );
    assert_eq!(
        err(cases(
            r#"{"name": "a", "input": "x"}, {"name": "a", "input": "y"}"#
        )),
        r#"invalid input: case #2 ("a"): field "name": case #1 has the same name"#
    );
    let bad_check = err(cases(
        r#"{"name": "a", "input": "x", "checks": [{"type": "max_tool_calls", "max": -1}]}"#,
    ));
    assert!(
        bad_check.starts_with(
            r#"invalid input: case #1 ("a"): field "checks[0]": invalid value: integer `-1`"#
        ),
        "{bad_check}"
    );
    let unknown = err(cases(
        r#"{"name": "a", "input": "x", "checks": [{"type": "nope"}]}"#,
    ));
    assert!(
        unknown.contains(r#"field "checks[0]": unknown variant `nope`"#),
        "{unknown}"
    );
    let line = err(Dataset::from_jsonl(
        "{\"name\":\"a\",\"input\":\"x\"}\n{\"name\":\"b\",\"input\":{}}\n",
        "d",
    ));
    assert!(
        line.contains(r#"line 2: case #2 ("b"): field "input""#),
        "{line}"
    );
}

#[test]
fn damaged_or_huge_dataset_files_are_clear_errors() {
    let dir = temp_dir("damaged");
    let at = |name: &str| dir.join(name);
    // Huge: refused from its size, never read (a sparse file).
    let f = std::fs::File::create(at("huge.json")).unwrap();
    f.set_len(MAX_DATASET_BYTES + 1).unwrap();
    assert!(err(Dataset::load(at("huge.json"))).contains("over the limit of 67108864"));
    // A directory, a dangling link, a FIFO (which would block a read).
    assert!(err(Dataset::load(&dir)).contains("not a regular file"));
    std::os::unix::fs::symlink(at("nowhere"), at("dangling.json")).unwrap();
    assert!(err(Dataset::load(at("dangling.json"))).contains("dangling.json"));
    let fifo = at("fifo.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        assert!(err(Dataset::load(&fifo)).contains("not a regular file"));
    }
    // Empty, zeros, garbage, not UTF-8, nested 100,000 deep, torn.
    for (name, bytes) in [
        ("empty.json", b"".to_vec()),
        ("zeros.json", vec![0u8; 4096]),
        ("garbage.json", b"\x89PNG\r\n".to_vec()),
        ("deep.json", "[".repeat(100_000).into_bytes()),
        (
            "torn.json",
            br#"{"name": "d", "cases": [{"name": "a", "inp"#.to_vec(),
        ),
    ] {
        std::fs::write(at(name), bytes).unwrap();
        let e = err(Dataset::load(at(name)));
        assert!(
            e.starts_with("invalid input: dataset ") || e.contains("not UTF-8"),
            "{name}: {e}"
        );
        assert!(e.contains(name), "{name}: {e}");
    }
}

#[test]
fn a_run_captures_output_tool_calls_usage_events_and_cost() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("calculator", json!({"expression": "6*7"})).with_usage(30, 5));
    server.push(Reply::text("42").with_usage(40, 2));
    server.push(Reply::text("Bye.").with_usage(50, 1));
    let dataset = Dataset::new("d").case(Case::with_turns("two turns", ["6 times 7?", "Thanks"]));
    let task = agent_task(server.transport());
    let report = Experiment::new("x").run(&dataset, move |cx: &mut TaskContext| {
        cx.add_cost(0.25);
        cx.add_cost(f64::NAN); // ignored
        let out = task(cx)?;
        cx.add_cost(0.5);
        Ok::<_, pikuri::Error>(out)
    });
    let run = &report.cases[0].runs[0].run;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.output, json!("Bye."));
    assert_eq!(
        run.tool_calls,
        [ToolCallRecord::new(
            "calculator",
            json!({"expression": "6*7"}),
            Some("42".into())
        )]
    );
    assert_eq!(run.usage, Usage::new().with_input(120).with_output(8));
    assert_eq!(run.requests, 3);
    assert_eq!(run.cost, Some(0.75));
    let stops = run
        .events
        .iter()
        .filter(|e| matches!(e, Event::Stopped { .. }))
        .count();
    assert_eq!(stops, 2);
    assert!(
        !run.events
            .iter()
            .any(|e| matches!(e, Event::AssistantDelta { .. }))
    );
    server.assert_all_used();
}

fn with_calls(output: &str, calls: &[(&str, Value)]) -> Run {
    let mut run = Run::from_output(output);
    for (name, args) in calls {
        run = run.with_tool_call(ToolCallRecord::new(*name, args.clone(), Some("ok".into())));
    }
    run
}

#[test]
fn each_check_passes_and_fails() {
    let run = with_calls(
        r#"{"city": "Paris", "pop": 2}"#,
        &[
            ("search", json!({"q": "paris", "n": 3})),
            ("fetch", json!({"url": "u"})),
            ("search", json!({"q": "x"})),
        ],
    )
    .with_expected(json!({"pop": 2, "city": "Paris"}));
    let pass = |c: Check| {
        let v = c.evaluate(&run);
        assert!(v.pass, "{c:?} should pass: {v:?}");
    };
    let fail = |c: Check| {
        let v = c.evaluate(&run);
        assert!(!v.pass, "{c:?} should fail: {v:?}");
        v
    };
    pass(Check::equals_expected());
    assert_eq!(
        fail(Check::equals(json!({"city": "Lyon"}))).reason,
        r#"expected "{\"city\":\"Lyon\"}", got "\"{\\\"city\\\": \\\"Paris\\\", \\\"pop\\\": 2}\"""#
    );
    pass(Check::contains("Paris"));
    fail(Check::contains("paris"));
    pass(Check::Contains {
        text: "PARIS".into(),
        ignore_case: true,
    });
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "pop": {"type": "integer"}}, "required": ["city", "pop"]});
    pass(Check::json_schema(schema));
    let v = fail(Check::json_schema(
        json!({"type": "object", "properties": {"pop": {"type": "string"}}, "required": ["pop", "area"]}),
    ));
    assert!(
        v.reason.contains("pop") && v.reason.contains("area"),
        "{v:?}"
    );
    let v = Check::json_schema(json!({"type": "object"})).evaluate(&Run::from_output("not json"));
    assert_eq!(v.label.as_deref(), Some("not_json"));
    pass(Check::tools_called(["search", "fetch"]));
    let v = fail(Check::tools_called(["search", "browse"]));
    assert_eq!((v.score, v.reason.as_str()), (0.5, "not called: browse"));
    pass(Check::trajectory(
        ["search", "fetch", "search"],
        Order::Exact,
    ));
    fail(Check::trajectory(
        ["search", "search", "fetch"],
        Order::Exact,
    ));
    pass(Check::trajectory(
        ["search", "search", "fetch"],
        Order::AnyOrder,
    ));
    fail(Check::trajectory(["search", "fetch"], Order::AnyOrder));
    pass(Check::trajectory(["fetch", "search"], Order::InOrder));
    fail(Check::trajectory(["fetch", "fetch"], Order::InOrder));
    pass(Check::trajectory(["search", "search"], Order::Subset));
    fail(Check::trajectory(["fetch", "fetch"], Order::Subset));
    pass(Check::arguments("search", json!({"q": "x"})));
    pass(Check::arguments("search", json!({"n": 3})));
    let v = fail(Check::arguments("search", json!({"q": "lyon"})));
    assert!(
        v.reason
            .contains(r#"sent: "{\"n\":3,\"q\":\"paris\"}", "{\"q\":\"x\"}""#),
        "{}",
        v.reason
    );
    assert_eq!(
        fail(Check::arguments("browse", json!({}))).reason,
        "browse was not called"
    );
    pass(Check::max_tool_calls(3));
    fail(Check::max_tool_calls(2));
    let mut figures = run.clone();
    figures.requests = 4;
    figures.usage = Usage::new().with_input(90).with_output(11);
    figures.duration_ms = 1500;
    figures.cost = Some(0.02);
    for (check, ok) in [
        (Check::max_requests(4), true),
        (Check::max_requests(3), false),
        (Check::max_tokens(101), true),
        (Check::max_tokens(100), false),
        (Check::max_millis(1500), true),
        (Check::max_millis(1499), false),
        (Check::max_cost(0.02), true),
        (Check::max_cost(0.019), false),
    ] {
        assert_eq!(check.evaluate(&figures).pass, ok, "{check:?}");
    }
    let v = Check::max_cost(1.0).evaluate(&run);
    assert_eq!(
        (v.pass, v.reason.as_str(), v.label.as_deref()),
        (false, "no cost reported", Some("unknown"))
    );
    // `equals` with no expected output fails rather than passing vacuously.
    assert!(
        !Check::equals_expected()
            .evaluate(&Run::from_output("x"))
            .pass
    );
}

#[derive(serde::Deserialize, PartialEq, Debug)]
struct City {
    city: String,
    pop: u32,
}

#[test]
fn typed_equality_reads_both_sides_as_the_type() {
    let typed = TypedEquals::<City>::new();
    assert_eq!(typed.name(), "typed_equals<City>");
    let expected = json!({"city": "Paris", "pop": 2});
    let ok = Run::from_output("```json\n{\"pop\": 2, \"city\": \"Paris\", \"extra\": true}\n```")
        .with_expected(expected.clone());
    assert!(typed.evaluate(&ok).pass);
    let wrong =
        Run::from_output(json!({"city": "Paris", "pop": 3})).with_expected(expected.clone());
    let v = typed.evaluate(&wrong);
    assert!(!v.pass);
    assert!(
        v.reason.contains("pop: 2") && v.reason.contains("pop: 3"),
        "{}",
        v.reason
    );
    let untyped = Run::from_output(json!({"city": "Paris"})).with_expected(expected);
    assert_eq!(typed.evaluate(&untyped).label.as_deref(), Some("not_typed"));
}

#[test]
fn the_judge_scores_through_any_transport_with_structured_output() {
    let judge_model = FakeServer::start();
    judge_model.push(Reply::text(
        r#"{"score": 0.8, "reason": "Correct and short."}"#,
    ));
    judge_model.push(Reply::text(r#"{"score": 0.2, "reason": "Wrong city."}"#));
    // Never valid: the answer is repaired twice, then the judge fails.
    for _ in 0..3 {
        judge_model.push(Reply::text("looks fine to me"));
    }
    let judge = Judge::new(judge_model.transport(), "Names the capital of France.").threshold(0.7);
    let run = Run::from_output("Paris").with_expected("Paris");
    let v = judge.evaluate(&run);
    assert_eq!(
        (v.pass, v.score, v.reason.as_str()),
        (true, 0.8, "Correct and short.")
    );
    let v = judge.evaluate(&Run::from_output("Lyon"));
    assert_eq!(
        (v.pass, v.score, v.reason.as_str()),
        (false, 0.2, "Wrong city.")
    );
    let v = judge.evaluate(&run);
    assert_eq!((v.pass, v.label.as_deref()), (false, Some("judge_error")));
    assert!(v.reason.starts_with("the judge failed: "), "{}", v.reason);

    let first = &judge_model.chat_requests()[0];
    let body = first.body.clone().unwrap();
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert!(body.get("tools").is_none());
    let prompt = first.messages()[1]["content"].as_str().unwrap().to_string();
    assert!(
        prompt.contains("# Rubric\nNames the capital of France."),
        "{prompt}"
    );
    assert!(
        prompt.contains("# Expected output\nParis") && prompt.contains("# Output\nParis"),
        "{prompt}"
    );
    judge_model.assert_all_used();
}

#[test]
fn repeats_give_pass_rates_and_spreads_on_bounded_threads() {
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let dataset = Dataset::new("d")
        .case(Case::new("flaky", "x").check(Check::equals("x")))
        .case(Case::new("steady", "y").check(Check::equals("y")));
    let (r, m) = (Arc::clone(&running), Arc::clone(&most));
    let report =
        Experiment::new("x")
            .repeats(4)
            .threads(2)
            .run(&dataset, move |cx: &mut TaskContext| {
                let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(now, Ordering::SeqCst);
                let out = if cx.case() == "flaky" && cx.repeat() % 2 == 1 {
                    "no"
                } else {
                    cx.input()
                }
                .to_string();
                r.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, String>(out)
            });
    assert!(most.load(Ordering::SeqCst) <= 2);
    let flaky = report.case("flaky").unwrap();
    assert_eq!(
        flaky.runs.iter().map(|r| r.run.repeat).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert_eq!(flaky.pass_rate, 0.5);
    assert_eq!(
        (
            flaky.score.mean,
            flaky.score.min,
            flaky.score.max,
            flaky.score.stddev
        ),
        (0.5, 0.0, 1.0, 0.5)
    );
    assert_eq!(flaky.evaluators[0].name, "equals");
    assert_eq!(report.case("steady").unwrap().pass_rate, 1.0);
    assert_eq!(report.pass_rate(), 0.75);
}

#[test]
fn a_panicking_a_failing_and_a_hanging_task_are_failed_runs() {
    let dataset = Dataset::new("d")
        .case(Case::new("panics", "x"))
        .case(Case::new("fails", "x"))
        .case(Case::new("hangs", "x"))
        .case(Case::new("stops on cancel", "x"))
        .case(Case::new("fine", "x").evaluator(Boom));
    let (saw_cancel, cancel_seen) = crossbeam_channel::unbounded();
    // The hanging ones under a short timeout, the others under the default
    // one (a panic's backtrace can take a while on a busy machine).
    let task = move |cx: &mut TaskContext| match cx.case() {
        "panics" => panic!("boom in the task"),
        "fails" => Err("the model is down".to_string()),
        "hangs" => {
            // Never returns: the run is left behind.
            let (_tx, rx) = crossbeam_channel::bounded::<()>(0);
            let _ = rx.recv();
            unreachable!()
        }
        "stops on cancel" => {
            let cancel = cx.cancellable();
            while !cancel.is_cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = saw_cancel.send(());
            Err("cancelled".to_string())
        }
        _ => Ok(json!("fine")),
    };
    let task = Arc::new(task);
    let (hanging, others): (Vec<&Case>, Vec<&Case>) = dataset
        .cases()
        .iter()
        .partition(|c| c.name() == "hangs" || c.name() == "stops on cancel");
    let subset = |cases: Vec<&Case>| {
        cases
            .into_iter()
            .fold(Dataset::new("d"), |d, c| d.case(c.clone()))
    };
    let t = Arc::clone(&task);
    let mut report = Experiment::new("x")
        .threads(2)
        .run(&subset(others), move |cx: &mut TaskContext| t(cx));
    let t = Arc::clone(&task);
    let timed = Experiment::new("x")
        .threads(2)
        .timeout(Duration::from_millis(300))
        .run(&subset(hanging), move |cx: &mut TaskContext| t(cx));
    report.cases.extend(timed.cases);
    let status = |name: &str| {
        let r = &report.case(name).unwrap().runs[0];
        (
            r.run.status,
            r.run.error.clone().unwrap_or_default(),
            r.pass,
        )
    };
    assert_eq!(
        status("panics"),
        (
            RunStatus::Panicked,
            "panicked: boom in the task".into(),
            false
        )
    );
    assert_eq!(
        status("fails"),
        (RunStatus::Failed, "the model is down".into(), false)
    );
    assert_eq!(status("hangs").0, RunStatus::TimedOut);
    assert!(status("hangs").1.starts_with("timed out after 300ms"));
    assert_eq!(status("stops on cancel").0, RunStatus::TimedOut);
    cancel_seen.recv().unwrap(); // the run's Cancellable was cancelled
    // A panicking evaluator is a failing verdict, the run still judged.
    let fine = &report.case("fine").unwrap().runs[0];
    assert_eq!(fine.run.status, RunStatus::Completed);
    assert_eq!(fine.verdicts[0].label.as_deref(), Some("panicked"));
    assert!(report.has_errors());
}

struct Boom;
impl Evaluator for Boom {
    fn name(&self) -> String {
        "boom".into()
    }
    fn evaluate(&self, _: &Run) -> Verdict {
        panic!("evaluator bug")
    }
}

#[test]
fn cancelling_the_experiment_stops_new_runs_and_cancels_those_in_flight() {
    let cancel = Cancellable::new();
    let started = Arc::new(AtomicUsize::new(0));
    let dataset = Dataset::new("d")
        .case(Case::new("a", "x"))
        .case(Case::new("b", "x"))
        .case(Case::new("c", "x"));
    let c = cancel.clone();
    let s = Arc::clone(&started);
    let report = Experiment::new("x")
        .cancellable(cancel.clone())
        .on_progress(move |p| {
            if p.done == 1 {
                c.cancel();
            }
        })
        .run(&dataset, move |cx: &mut TaskContext| {
            s.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(cx.input().to_string())
        });
    assert_eq!(started.load(Ordering::SeqCst), 1);
    let statuses: Vec<RunStatus> = report.cases.iter().map(|c| c.runs[0].run.status).collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Completed,
            RunStatus::Cancelled,
            RunStatus::Cancelled
        ]
    );

    // In flight: a task waiting on its Cancellable ends as cancelled.
    let cancel = Cancellable::new();
    let c = cancel.clone();
    let report = Experiment::new("x").cancellable(cancel).run(
        &Dataset::new("d").case(Case::new("a", "x")),
        move |cx: &mut TaskContext| {
            c.cancel(); // as another thread (a Ctrl+C handler) would
            let mine = cx.cancellable();
            while !mine.is_cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err::<Value, _>("stopped".to_string())
        },
    );
    assert_eq!(report.cases[0].runs[0].run.status, RunStatus::Cancelled);
}

fn hostile_report() -> Report {
    let hostile = "]]></testcase><x a=\"1\">&amp;'\u{1}\u{1b}[31mred\u{FFFE}";
    let dataset = Dataset::new("d<&>")
        .case(Case::new(hostile, "x").check(Check::equals("y")))
        .case(Case::new("ok", "y").check(Check::equals("y")));
    Experiment::new("run \"1\"").run(&dataset, |cx: &mut TaskContext| {
        Ok::<_, String>(format!("{}\u{7}", cx.input()).replace('\u{7}', ""))
    })
}

#[test]
fn reports_round_trip_as_json_and_render_safely() {
    let report = hostile_report();
    let dir = temp_dir("report");
    let path = dir.join("baseline.json");
    report.save(&path).unwrap();
    assert_eq!(Report::load(&path).unwrap(), report);
    assert!(
        Report::load(&dir)
            .unwrap_err()
            .to_string()
            .contains("not a regular file")
    );
    std::fs::write(dir.join("bad.json"), "{\"name\": 1}").unwrap();
    assert!(
        Report::load(dir.join("bad.json"))
            .unwrap_err()
            .to_string()
            .contains("bad.json")
    );

    let table = report.table();
    assert!(
        !table.contains('\u{1b}') && !table.contains('\u{1}'),
        "{table}"
    );
    assert!(table.contains(r"&amp;'\x01\x1b[31"), "{table}");
    assert!(table.contains("2 case(s): pass rate 50%"), "{table}");
}

#[test]
fn junit_escapes_everything_and_a_real_parser_reads_it() {
    let xml = hostile_report().to_junit();
    assert!(!xml.contains('\u{1}') && !xml.contains('\u{1b}') && !xml.contains('\u{FFFE}'));
    assert!(
        xml.contains(r#"<testsuite name="d&lt;&amp;&gt;" tests="2" failures="1" errors="0""#),
        "{xml}"
    );
    // A real JUnit consumer reads it back: junitparser (PyPI) from the venv
    // of scripts/evals-junit.sh when PIKURI_JUNIT_PYTHON names it, else
    // Python's own XML parser where there is a python3.
    let junit_python = std::env::var("PIKURI_JUNIT_PYTHON").ok();
    let required = std::env::var("PIKURI_REQUIRE_JUNIT").is_ok_and(|v| v == "1");
    let script = if junit_python.is_some() {
        "import sys\n\
         from junitparser import JUnitXml, Failure\n\
         xml = JUnitXml.fromstring(sys.stdin.read())\n\
         cases = [c for s in xml for c in s]\n\
         print(cases[0].name); print(sum(isinstance(r, Failure) for r in cases[0].result), len(cases[1].result))"
    } else {
        "import sys, xml.etree.ElementTree as ET\n\
         root = ET.fromstring(sys.stdin.read())\n\
         cases = root.findall('./testsuite/testcase')\n\
         print(cases[0].get('name')); print(len(cases[0].findall('failure')), len(cases[1].findall('failure')))"
    };
    let python = junit_python.as_deref().unwrap_or("python3");
    let child = std::process::Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            assert!(
                !required,
                "PIKURI_REQUIRE_JUNIT=1 but {python} does not run: {e}"
            );
            eprintln!("skipped the parse: {python}: {e}");
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(xml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "]]></testcase><x a=\"1\">&amp;'\\u{1}\\u{1b}[31mred\\u{fffe}\n1 0\n"
    );
}

#[test]
fn the_baseline_diff_names_exactly_the_changed_cases() {
    let dataset = Dataset::new("d")
        .case(Case::new("same", "a").check(Check::equals("a")))
        .case(Case::new("worse", "b").check(Check::equals("b")))
        .case(Case::new("better", "c").check(Check::equals("c")))
        .case(Case::new("new", "d"));
    let baseline_set = Dataset::new("d")
        .case(Case::new("same", "a").check(Check::equals("a")))
        .case(Case::new("worse", "b").check(Check::equals("b")))
        .case(Case::new("better", "c").check(Check::equals("c")))
        .case(Case::new("gone", "e"));
    let baseline =
        Experiment::new("before")
            .repeats(2)
            .run(&baseline_set, |cx: &mut TaskContext| {
                Ok::<_, String>(if cx.case() == "better" {
                    "?".into()
                } else {
                    cx.input().to_string()
                })
            });
    let now = Experiment::new("after")
        .repeats(2)
        .run(&dataset, |cx: &mut TaskContext| {
            Ok::<_, String>(if cx.case() == "worse" && cx.repeat() == 0 {
                "?".into()
            } else {
                cx.input().to_string()
            })
        });
    let diff = now.diff(&baseline, 0.0);
    assert_eq!(
        diff.regressions
            .iter()
            .map(|c| c.case.as_str())
            .collect::<Vec<_>>(),
        ["worse"]
    );
    assert_eq!(diff.regressions[0].evaluators, ["equals"]);
    assert_eq!(
        (
            diff.regressions[0].pass_before,
            diff.regressions[0].pass_after
        ),
        (1.0, 0.5)
    );
    assert_eq!(
        diff.improvements
            .iter()
            .map(|c| c.case.as_str())
            .collect::<Vec<_>>(),
        ["better"]
    );
    assert_eq!(
        (diff.added.clone(), diff.removed.clone()),
        (vec!["new".to_string()], vec!["gone".to_string()])
    );
    assert!(diff.to_string().contains("regressed worse: pass 100% -> 50%, score 1.00 -> 0.50 (equals)\n    run 1: equals: expected \"\\\"b\\\"\", got \"\\\"?\\\"\""), "{diff}");
    // Within a tolerance of half the runs, nothing regressed.
    assert!(now.diff(&baseline, 0.5).is_ok());
    now.assert_no_regressions(&baseline, 0.5);
    let caught =
        std::panic::catch_unwind(|| now.assert_no_regressions(&baseline, 0.1)).unwrap_err();
    let msg = caught.downcast_ref::<String>().unwrap();
    assert!(
        msg.starts_with(
            "1 regression(s) of after against before (tolerance 0.1):\nregressed worse"
        ),
        "{msg}"
    );
}

#[test]
fn a_recorded_dataset_replays_to_the_same_report_twice() {
    let upstream = FakeServer::start();
    // Runs on two threads reach the server in any order: answer each
    // request by what it asks.
    upstream.respond_with(|req| {
        let last = req.messages().last().cloned().unwrap_or_default();
        match (last["role"].as_str(), last["content"].as_str()) {
            (Some("tool"), _) => Reply::text("4").with_usage(20, 2),
            (_, Some("2+2?")) => {
                Reply::tool_call("calculator", json!({"expression": "2+2"})).with_usage(10, 3)
            }
            (_, text) => Reply::text(format!("echo: {}", text.unwrap_or(""))).with_usage(20, 2),
        }
    });
    let dataset = Dataset::new("d")
        .case(
            Case::new("sum", "2+2?")
                .check(Check::contains("4"))
                .check(Check::tools_called(["calculator"])),
        )
        .case(Case::new("echo", "hello").check(Check::contains("hello")));
    let dir = temp_dir("offline");
    let cassette = dir.join("d.cassette.json");
    let run = |offline: &Offline| {
        Experiment::new("x")
            .repeats(2)
            .threads(2)
            .run(&dataset, agent_task(offline.transport()))
    };
    let recording = Offline::record(&cassette, &upstream.transport()).unwrap();
    assert!(recording.is_recording());
    let recorded = run(&recording);
    recording.finish().unwrap();
    assert_eq!(
        recorded.cases.iter().map(|c| c.runs.len()).sum::<usize>(),
        4
    );

    let first = Offline::replay(&cassette).unwrap();
    let one = run(&first);
    first.finish().unwrap();
    let second = Offline::replay(&cassette).unwrap();
    let two = run(&second);
    second.finish().unwrap();
    assert_eq!(one.without_timings(), two.without_timings());
    assert_eq!(one.without_timings(), recorded.without_timings());

    // A changed agent (another question) is a replay error naming it.
    let changed = Dataset::new("d").case(Case::new("sum", "3+3?"));
    let third = Offline::replay(&cassette).unwrap();
    let transport = third.transport();
    let report = Experiment::new("x").run(&changed, move |cx: &mut TaskContext| {
        let mut agent = Agent::builder(transport.clone())
            .http(pikuri::HttpConfig::default().with_max_retries(0))
            .build()?;
        Ok::<_, pikuri::Error>(agent.run_loop(cx.input())?.answer)
    });
    assert_eq!(report.cases[0].runs[0].run.status, RunStatus::Failed);
    let e = third.finish().unwrap_err().to_string();
    assert!(
        e.contains("1 request(s) not recorded") && e.contains("3+3?"),
        "{e}"
    );
}

#[test]
fn saving_never_replaces_a_fifo_or_a_directory_and_bounds_hold() {
    let dir = temp_dir("save");
    let report = Experiment::new("x")
        .timeout(Duration::MAX) // no limit, not an overflow
        .run(
            &Dataset::new("d").case(Case::new("a", "x")),
            |_: &mut TaskContext| Err::<Value, _>("e".repeat(1_000_000)),
        );
    let error = report.cases[0].runs[0].run.error.clone().unwrap();
    assert_eq!(error.chars().count(), 4001, "bounded, with an ellipsis");
    assert!(
        report
            .save(&dir)
            .unwrap_err()
            .to_string()
            .contains("is a directory")
    );
    let fifo = dir.join("fifo.json");
    if std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        let e = report.save(&fifo).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let dataset = Dataset::new("d").case(Case::new("a", "x"));
        assert!(
            dataset
                .save(&fifo)
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
    }
    // A missing folder is not created.
    let e = report
        .save(dir.join("missing/report.json"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing/report.json"), "{e}");
    assert!(!dir.join("missing").exists());
    // No temporary file is left behind by a failed or a good save.
    report.save(dir.join("ok.json")).unwrap();
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains(".tmp")), "{names:?}");
}

/// An evaluator that scores whatever it was made with.
struct Fixed(f64);
impl Evaluator for Fixed {
    fn name(&self) -> String {
        format!("fixed {}", self.0)
    }
    fn evaluate(&self, _: &Run) -> Verdict {
        let mut v = Verdict::pass("as told");
        v.score = self.0;
        v
    }
}

/// ATTACKS.md, "Numbers": an evaluator of the host's that scores NaN, an
/// infinity, a negative or a huge number gets a score in 0..=1 (NaN reads
/// 0), so the report's figures are numbers, its JSON loads again (JSON has
/// no NaN: it would be written `null`) and a diff against it is finite.
#[test]
fn extreme_scores_are_read_as_scores_and_the_report_loads_again() {
    let dataset = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -5.0, 1e308]
        .into_iter()
        .enumerate()
        .fold(Dataset::new("extreme"), |d, (i, s)| {
            d.case(Case::new(format!("c{i}"), "hi").evaluator(Fixed(s)))
        });
    let report = Experiment::new("x").run(&dataset, |_: &mut TaskContext| Ok::<_, String>("out"));
    let scores: Vec<f64> = report
        .cases
        .iter()
        .map(|c| c.runs[0].verdicts[0].score)
        .collect();
    assert_eq!(scores, [0.0, 1.0, 0.0, 0.0, 1.0]);
    for c in &report.cases {
        assert!(
            c.score.mean.is_finite() && c.score.stddev.is_finite(),
            "{c:?}"
        );
    }
    let dir = temp_dir("extreme");
    let path = dir.join("baseline.json");
    report.save(&path).unwrap();
    let again = Report::load(&path).unwrap();
    assert_eq!(again.without_timings(), report.without_timings());
    assert!(report.diff(&again, 0.0).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

/// ATTACKS.md, "Files and stores": a damaged baseline (empty, zeros,
/// garbage, torn, a directory, scores of the wrong type) is an error
/// naming the file, never an empty report that every run "beats".
#[test]
fn a_damaged_baseline_is_a_clear_error() {
    let dir = temp_dir("baseline");
    let good = Experiment::new("x").run(
        &Dataset::new("d").case(Case::new("a", "hi").check(Check::contains("o"))),
        |_: &mut TaskContext| Ok::<_, String>("out"),
    );
    let text = good.to_json();
    let torn = &text[..text.len() / 2];
    let wrong = text.replacen("\"mean\": 1.0", "\"mean\": \"high\"", 1);
    assert_ne!(wrong, text, "the report has a mean to spoil");
    for (name, bytes) in [
        ("empty.json", Vec::new()),
        ("zeros.json", vec![0u8; 512]),
        ("garbage.json", b"\x89PNG\r\n\x1a\n".to_vec()),
        ("torn.json", torn.as_bytes().to_vec()),
        ("wrong.json", wrong.into_bytes()),
        ("deep.json", "[".repeat(100_000).into_bytes()),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let e = Report::load(&path).unwrap_err();
        assert_eq!(e.kind(), pikuri::ErrorKind::InvalidInput, "{name}: {e}");
        assert!(e.to_string().contains(name), "{name}: {e}");
    }
    let e = Report::load(&dir).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// ATTACKS.md, "Files and stores": a JSON Lines dataset with a bad line, a
/// huge line, a torn last line, or nothing at all is an error naming the
/// file (and the line); an empty file is not a dataset of no cases.
#[test]
fn damaged_json_lines_datasets_are_clear_errors() {
    let dir = temp_dir("jsonl");
    let good = r#"{"name": "a", "input": "hi"}"#;
    let huge = format!(
        r#"{{"name": "b", "input": "{}"#,
        "x".repeat(8 * 1024 * 1024)
    );
    for (name, text, expected) in [
        (
            "bad.jsonl",
            format!("{good}\n{{nope\n"),
            "line 2: not valid JSON",
        ),
        (
            "huge.jsonl",
            format!("{good}\n{huge}\n"),
            "line 2: not valid JSON",
        ),
        ("torn.jsonl", format!("{good}\n{}", &good[..10]), "line 2"),
        ("empty.jsonl", String::new(), "empty"),
        ("blank.jsonl", "\n  \n\n".into(), "empty"),
        ("empty.json", String::new(), "dataset"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, &text).unwrap();
        let e = err(Dataset::load(&path));
        assert!(e.contains(expected), "{name}: {e}");
        assert!(e.contains(name), "{name}: {e}");
        assert!(e.len() < 1000, "{name}: {} bytes", e.len());
    }
    // A header and no case is a dataset the host wrote: read.
    let path = dir.join("header.jsonl");
    std::fs::write(&path, "{\"dataset\": \"h\"}\n").unwrap();
    assert_eq!(Dataset::load(&path).unwrap().cases().len(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// ATTACKS.md, "Other servers": a judge that answers garbage, a score out
/// of range, a reason of megabytes, or never answers gives a failing or
/// bounded verdict within the host's HTTP settings, never a hang.
#[test]
fn a_judge_answering_garbage_huge_or_nothing_is_bounded() {
    let judge_model = FakeServer::start();
    // A score past 1 is refused by the schema and repaired; then clamped.
    judge_model.push(Reply::text(r#"{"score": 7, "reason": "great"}"#));
    judge_model.push(Reply::text(r#"{"score": 1, "reason": "great"}"#));
    let huge = "r".repeat(2 * 1024 * 1024);
    judge_model.push(Reply::text(
        json!({"score": 0.9, "reason": huge}).to_string(),
    ));
    judge_model.push(Reply::hang());
    let http = pikuri::HttpConfig::default()
        .with_max_retries(0)
        .with_read_timeout(Duration::from_secs(3));
    let judge = Judge::new(judge_model.transport(), "Is it good?").http(http);
    let run = Run::from_output("out");
    let v = judge.evaluate(&run);
    assert_eq!((v.pass, v.score), (true, 1.0));
    let v = judge.evaluate(&run);
    assert_eq!(
        (v.pass, v.score),
        (true, 0.9),
        "{}",
        &v.reason[..v.reason.len().min(500)]
    );
    assert!(v.reason.chars().count() <= 2001, "{} chars", v.reason.len());
    let v = judge.evaluate(&run);
    assert_eq!((v.pass, v.label.as_deref()), (false, Some("judge_error")));
    assert!(
        v.reason.contains("timed out") || v.reason.contains("timeout"),
        "{}",
        v.reason
    );
}

/// ATTACKS.md, "Files and stores": the kit never replaces a non-empty file
/// it did not write. A report, a dataset or a cassette saved over a path
/// that holds something else (a mixed-up argument: the dataset, notes) is
/// refused and the file left as it was; a file of the same kind, or an
/// empty one, is replaced. A cassette is read as the kit's other files
/// are: a FIFO refused before it is opened, a huge file from its size.
#[test]
fn saving_never_replaces_a_file_the_kit_did_not_write() {
    let dir = temp_dir("foreign");
    let dataset = Dataset::new("d").case(Case::new("a", "hi").check(Check::contains("o")));
    let report = Experiment::new("x").run(&dataset, |_: &mut TaskContext| Ok::<_, String>("out"));
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, "my notes").unwrap();
    let cases = dir.join("cases.json");
    dataset.save(&cases).unwrap();
    let cases_text = std::fs::read_to_string(&cases).unwrap();
    for path in [&notes, &cases] {
        let e = report.save(path).unwrap_err().to_string();
        assert!(e.contains("exists and is not a report"), "{e}");
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes");
    assert_eq!(std::fs::read_to_string(&cases).unwrap(), cases_text);
    // Its own kind, or an empty file: replaced.
    let baseline = dir.join("baseline.json");
    report.save(&baseline).unwrap();
    report.save(&baseline).unwrap();
    let empty = dir.join("empty.json");
    std::fs::write(&empty, "").unwrap();
    report.save(&empty).unwrap();
    dataset.save(&cases).unwrap();
    let e = dataset.save(&baseline).unwrap_err().to_string();
    assert!(e.contains("exists and is not a dataset"), "{e}");
    let e = dataset.save(dir.join("notes.txt")).unwrap_err().to_string();
    assert!(e.contains("not a dataset"), "{e}");
    // A recording saved over the baseline is refused too.
    let real = FakeServer::start();
    let recording = Offline::record(&baseline, &real.transport()).unwrap();
    let e = recording.finish().unwrap_err().to_string();
    assert!(e.contains("exists and is not a cassette"), "{e}");
    assert!(Report::load(&baseline).is_ok());
    // Reading a cassette: a FIFO, a huge file, an empty one, the baseline.
    let fifo = dir.join("fifo.cassette.json");
    if std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        let e = Offline::replay(&fifo).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }
    let huge = dir.join("huge.cassette.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(256 * 1024 * 1024 + 1)
        .unwrap();
    let e = Offline::replay(&huge).unwrap_err().to_string();
    assert!(e.contains("over the limit"), "{e}");
    let blank = dir.join("blank.cassette.json");
    std::fs::write(&blank, "").unwrap();
    for path in [&blank, &baseline] {
        let e = Offline::replay(path).unwrap_err();
        assert_eq!(e.kind(), pikuri::ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
