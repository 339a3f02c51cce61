//! The attack classes of `ATTACKS.md` left over from the last walk, where
//! no area's file fits: guard checks that never return (at most 64 of the
//! process run past their bound). The API's own tool search in streams is
//! in `tool_search_native.rs`, MCP tools deferred in `tests/mcp/deferred.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pikuri::guard::{Guards, InputVerdict};
use pikuri::testing::{FakeServer, Reply};

use crate::hardening::run_in_own_process;
use crate::util::agent_with;

// ------------------------------------------------------------ guard overruns

/// Lifecycle, a hanging callback is bounded: a guard that never returns
/// keeps the thread its check runs on, so at most 64 checks of the process
/// may run past their bound. The 65th is not started: its run stops
/// naming the guard and why, never a silent allow; once the stuck checks
/// end, checks run again. In a process of its own: the bound is the
/// process's, and the tests beside it use guards.
#[test]
fn at_most_64_guard_checks_run_past_their_bound() {
    run_in_own_process("attacks13::overrun_cap_in_own_process");
}

#[test]
#[ignore = "run in its own process by at_most_64_guard_checks_run_past_their_bound"]
fn overrun_cap_in_own_process() {
    assert_eq!(
        std::env::var("PIKURI_OWN_PROCESS").as_deref(),
        Ok("1"),
        "holds the process's guard threads: run by its caller"
    );
    let released = Arc::new(AtomicBool::new(false));
    let server = FakeServer::start();
    for _ in 0..64 {
        let released = Arc::clone(&released);
        let stuck = Guards::new()
            .input("stuck", move |_: &str| {
                while !released.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                InputVerdict::Allow
            })
            .timeout(Duration::from_millis(1));
        let (mut agent, _) = agent_with(&server, |c| c.guards(stuck));
        let err = agent.run_loop("q").unwrap_err();
        assert_eq!(
            err.to_string(),
            "stopped by guard stuck: the guard took longer than 1 ms"
        );
    }
    // The 65th check, of a guard that would allow at once, is not started.
    let ran = Arc::new(AtomicUsize::new(0));
    let quick = || {
        let ran = Arc::clone(&ran);
        Guards::new().input("quick", move |_: &str| {
            ran.fetch_add(1, Ordering::AcqRel);
            InputVerdict::Allow
        })
    };
    server.push(Reply::text("an answer"));
    let (mut agent, _) = agent_with(&server, |c| c.guards(quick()));
    let err = agent.run_loop("q").unwrap_err();
    assert_eq!(
        err.to_string(),
        "stopped by guard quick: the guard was not started: 64 guard checks still run past their bound"
    );
    assert_eq!(ran.load(Ordering::Acquire), 0);
    assert!(server.chat_requests().is_empty(), "a stop, not an allow");
    assert_eq!(agent.messages().len(), 1);

    // The stuck checks end and give their places back. Polled: when each
    // thread ends is the scheduler's business; the deadline only bounds a
    // failure.
    released.store(true, Ordering::Release);
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut agent, _) = agent_with(&server, |c| c.guards(quick()));
    loop {
        match agent.run_loop("q") {
            Ok(out) => {
                assert_eq!(out.answer.as_deref(), Some("an answer"));
                break;
            }
            Err(e) => assert!(
                Instant::now() < deadline && e.to_string().contains("not started"),
                "{e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(ran.load(Ordering::Acquire), 1);
}
