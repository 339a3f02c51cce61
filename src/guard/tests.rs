use std::time::Duration;

use super::*;

/// The chain's reports, as `guard:action:detail` lines.
fn run_input(guards: &Guards, text: &str) -> (String, Option<Trip>, Vec<String>) {
    let mut text = text.to_string();
    let mut seen = Vec::new();
    let trip = guards.check_input(&mut text, &Scope::default(), &mut |g, a, d| {
        seen.push(format!("{g}:{}:{d}", a.as_str()));
    });
    (text, trip, seen)
}

#[test]
fn a_replace_feeds_the_next_guard_and_a_block_ends_the_chain() {
    let guards = Guards::new()
        .input("upper", |t: &str| InputVerdict::Replace(t.to_uppercase()))
        .input("no-x", |t: &str| {
            if t.contains('X') {
                InputVerdict::Block("no x".into())
            } else {
                InputVerdict::Allow
            }
        })
        .input("never", |_: &str| -> InputVerdict { panic!("not reached") });
    let (text, trip, seen) = run_input(&guards, "x");
    assert_eq!(text, "X");
    assert_eq!(seen, ["upper:replace:", "no-x:block:no x"]);
    let trip = trip.unwrap();
    assert_eq!((&*trip.guard, trip.action), ("no-x", Action::Block));
}

#[test]
fn all_allowing_is_no_trip_and_no_report() {
    let guards = Guards::new().input("ok", |_: &str| InputVerdict::Allow);
    let (text, trip, seen) = run_input(&guards, "hi");
    assert_eq!((text.as_str(), trip, seen.len()), ("hi", None, 0));
}

#[test]
fn a_panicking_failing_or_slow_guard_is_a_stop_naming_it() {
    struct Failing;
    impl Input for Failing {
        fn check(&self, _: &str) -> Result<InputVerdict, BoxError> {
            Err("backend down".into())
        }
    }
    let cases: Vec<(Guards, &str)> = vec![
        (
            Guards::new().input("boom", |_: &str| -> InputVerdict { panic!("boom") }),
            "the guard panicked",
        ),
        (
            Guards::new().input("boom", Failing),
            "the guard failed: backend down",
        ),
        (
            Guards::new()
                .input("boom", |_: &str| {
                    std::thread::sleep(Duration::from_secs(3600));
                    InputVerdict::Allow
                })
                .timeout(Duration::from_millis(1)),
            "the guard took longer than 1 ms",
        ),
    ];
    for (guards, why) in cases {
        let (_, trip, seen) = run_input(&guards, "hi");
        let trip = trip.unwrap();
        assert_eq!((&*trip.guard, trip.action), ("boom", Action::Stop));
        assert_eq!(trip.detail, why);
        assert_eq!(seen, [format!("boom:stop:{why}")]);
    }
}

#[test]
fn the_tool_points_see_the_call() {
    let call = ToolCall::new("c1", "shell", r#"{"cmd":"rm -rf /"}"#);
    let guards = Guards::new()
        .tool_input("no-rm", |c: &ToolCall| {
            if c.arguments.contains("rm -rf") {
                ToolInputVerdict::Reject(format!("refused {}", c.name))
            } else {
                ToolInputVerdict::Allow
            }
        })
        .tool_output("tag", |c: &ToolCall, out: &str| {
            ToolOutputVerdict::Replace(format!("{}:{out}", c.id))
        });
    let trip = guards
        .check_tool_input(&call, &Scope::default(), &mut |_, _, _| {})
        .unwrap();
    assert_eq!(trip.detail, "refused shell");
    let mut out = "done".to_string();
    assert_eq!(
        guards.check_tool_output(&call, &mut out, &Scope::default(), &mut |_, _, _| {}),
        None
    );
    assert_eq!(out, "c1:done");
    assert!(guards.has(Point::ToolInput) && !guards.has(Point::Input));
}

#[test]
fn names_are_stable() {
    let points = [
        Point::Input,
        Point::Output,
        Point::ToolInput,
        Point::ToolOutput,
    ];
    for p in points {
        assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
    }
    let actions = [
        Action::Replace,
        Action::Block,
        Action::Retry,
        Action::Reject,
        Action::Stop,
    ];
    for a in actions {
        assert_eq!(serde_json::to_value(a).unwrap(), a.as_str());
    }
    assert_eq!(
        format!(
            "{:?}",
            Guards::new().input("a", |_: &str| InputVerdict::Allow)
        ),
        "Guards { input: [\"a\"], beside: [], output: [], tool_input: [], tool_output: [], timeout: 60s, max_retries: 2, hold_deltas: false }"
    );
}
