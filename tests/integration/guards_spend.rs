//! Issue 39 leftovers: a model-judged guard's requests count in the run's
//! budget (tokens, requests, cost) and are refused by it like the loop's
//! own; guards and budgets against the attack classes of ATTACKS.md.

use pikuri::budget::{Cost, Limit, Price, PriceTable};
use pikuri::guard::{Action, Guards, Judge, Point};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Budget, Error, Event, Role, Spend, StopReason};

use crate::util::{agent_with, assert_valid_history};

/// The run's error must be a budget stop on `limit`; its spend.
fn tripped(result: pikuri::Result<pikuri::Outcome>, limit: Limit) -> Spend {
    match result {
        Err(Error::BudgetExceeded {
            limit: l, spend, ..
        }) => {
            assert_eq!(l, limit);
            *spend
        }
        other => panic!("expected a {limit} stop, got {other:?}"),
    }
}

fn allow() -> Reply {
    Reply::text(r#"{"allow": true, "reason": "fine"}"#)
}

/// The agent's model and the judge's, each priced.
fn prices() -> PriceTable {
    PriceTable::new()
        .with("fake-model", Price::per_million_usd(1.0, 2.0))
        .with("judge-model", Price::per_million_usd(10.0, 20.0))
}

#[test]
fn a_judges_usage_counts_and_trips_a_tight_budget_before_the_first_request() {
    let judge_server = FakeServer::start();
    judge_server.push(allow().with_usage(500, 20));
    let server = FakeServer::start();
    server.push(Reply::text("never sent"));
    let judge = Judge::new(
        judge_server.transport().with_model("judge-model"),
        "Be kind.",
    );
    let (mut agent, rec) = agent_with(&server, |c| {
        c.guards(Guards::new().input("kind", judge))
            .budget(Budget::new().max_total_tokens(400).prices(prices()))
    });
    let spend = tripped(agent.run_loop("hello"), Limit::TotalTokens);
    assert_eq!(
        (spend.requests, spend.input_tokens(), spend.output_tokens()),
        (1, 500, 20),
        "the judge's request, its tokens"
    );
    // 500 × $10/M + 20 × $20/M, at the judge's model's price.
    assert_eq!(spend.cost, Some(Cost::from_micro_usd(5_400)));
    assert_eq!(judge_server.chat_requests().len(), 1);
    assert!(
        server.chat_requests().is_empty(),
        "the model was never asked"
    );
    assert_eq!(agent.last_stop_reason(), Some(StopReason::Budget));
    assert!(rec.events().iter().any(|e| matches!(
        e,
        Event::BudgetExceeded { limit: Limit::TotalTokens, spend, .. } if spend.requests == 1
    )));
    assert_valid_history(agent.messages());
}

#[test]
fn a_judges_requests_are_in_the_outcome_spend_without_a_limit() {
    let judge_server = FakeServer::start();
    judge_server.push(allow().with_usage(300, 10));
    let server = FakeServer::start();
    server.push(Reply::text("an answer").with_usage(100, 5));
    let judge = Judge::new(
        judge_server.transport().with_model("judge-model"),
        "Be kind.",
    );
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.guards(Guards::new().output("kind", judge))
            .budget(Budget::new().prices(prices()))
    });
    let out = agent.run_loop("hello").unwrap();
    assert_eq!(out.answer.as_deref(), Some("an answer"));
    let s = *out.spend;
    assert_eq!(
        (s.requests, s.input_tokens(), s.output_tokens()),
        (2, 400, 15)
    );
    // 100 × $1/M + 5 × $2/M + 300 × $10/M + 10 × $20/M
    assert_eq!(s.cost, Some(Cost::from_micro_usd(100 + 10 + 3_000 + 200)));
}

#[test]
fn a_judge_request_the_budget_refuses_is_not_sent_and_the_run_stops_on_the_budget() {
    let judge_server = FakeServer::start();
    judge_server.push(allow());
    let server = FakeServer::start();
    server.push(Reply::text("an answer").with_usage(100, 5));
    server.push(Reply::text("the next turn"));
    let judge = Judge::new(judge_server.transport(), "Be kind.");
    let (mut agent, rec) = agent_with(&server, |c| {
        c.guards(Guards::new().output("kind", judge))
            .budget(Budget::new().max_requests(1))
    });
    let spend = tripped(agent.run_loop("hello"), Limit::Requests);
    assert_eq!(spend.requests, 1);
    assert!(
        judge_server.chat_requests().is_empty(),
        "the judge's request was refused before it was sent"
    );
    assert_eq!(agent.last_stop_reason(), Some(StopReason::Budget));
    let events = rec.events();
    let guard = events
        .iter()
        .find_map(|e| match e {
            Event::Guard {
                guard,
                point,
                action,
                detail,
                ..
            } => Some((guard.clone(), *point, *action, detail.clone())),
            _ => None,
        })
        .expect("the guard's failure is shown");
    assert_eq!(guard.0, "kind");
    assert_eq!((guard.1, guard.2), (Point::Output, Action::Stop));
    assert!(
        guard.3.contains("requests budget is exhausted"),
        "{}",
        guard.3
    );
    // The unjudged answer is left out, as after an output guard's stop.
    assert_eq!(agent.messages().len(), 1);
    assert_eq!(agent.messages()[0].role, Role::User);
    // The next turn has a fresh budget: the model is asked again (and its
    // judge refused again, one request being the whole budget).
    let again = tripped(agent.run_loop("again"), Limit::Requests);
    assert_eq!(again.requests, 1);
    assert_eq!(server.chat_requests().len(), 2);
    assert!(judge_server.chat_requests().is_empty());
    assert_valid_history(agent.messages());
}

#[test]
fn a_tool_input_judge_past_the_limit_stops_the_batch_on_the_budget() {
    let judge_server = FakeServer::start();
    judge_server.push(allow().with_usage(1_000, 10));
    let server = FakeServer::start();
    server.push(
        Reply::tool_call("calculator", serde_json::json!({"expression": "1+1"})).with_usage(10, 2),
    );
    let judge = Judge::new(judge_server.transport(), "Only arithmetic.");
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(pikuri::builtin::calculator())
            .guards(Guards::new().tool_input("arith", judge))
            .budget(Budget::new().max_input_tokens(500))
    });
    let spend = tripped(agent.run_loop("1+1?"), Limit::InputTokens);
    assert_eq!((spend.requests, spend.input_tokens()), (2, 1_010));
    // The judge allowed, the tool ran; the next request was refused.
    assert_eq!(server.chat_requests().len(), 1);
    let last = agent.messages().last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(last.content, "2");
    assert_valid_history(agent.messages());
}

// ------------------------------------------------------------ ATTACKS.md

/// A judge on `server` with fast retries.
fn judge_on(server: &FakeServer) -> Judge {
    Judge::with_http(server.transport(), "Be kind.", crate::util::fast_http())
}

#[test]
fn cancelling_while_a_judge_waits_on_its_server_stops_the_run_as_a_cancel() {
    let judge_server = FakeServer::start();
    judge_server.push(Reply::hang());
    let server = FakeServer::start();
    server.push(Reply::text("an answer"));
    let cancel = pikuri::Cancellable::new();
    // Only the cancel ends the wait early: without it, the run would stop
    // at this bound as the guard's failure.
    let guards = Guards::new()
        .output("kind", judge_on(&judge_server))
        .timeout(std::time::Duration::from_secs(20));
    let (mut agent, rec) = agent_with(&server, |c| c.guards(guards).cancellable(cancel.clone()));
    let err = std::thread::scope(|s| {
        s.spawn(|| {
            // Once the judge's request is at its server, bounded.
            for _ in 0..2_000 {
                if !judge_server.chat_requests().is_empty() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            cancel.cancel();
        });
        agent.run_loop("hello").unwrap_err()
    });
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(agent.last_stop_reason(), Some(StopReason::Cancelled));
    // Not reported as the guard's verdict: the host stopped the run.
    assert!(
        !rec.events()
            .iter()
            .any(|e| matches!(e, Event::Guard { .. }))
    );
    // The unjudged answer did not enter.
    assert_eq!(agent.messages().len(), 1);
}

#[test]
fn a_judge_server_that_fails_answers_html_or_hangs_is_a_bounded_stop_naming_it() {
    let huge_html = format!("<html><body>{}</body></html>", "x".repeat(1_000_000));
    let cases = [
        Reply::status(500, "internal error"),
        Reply::status(429, "slow down").with_retry_after(100_000),
        Reply::raw_body(200, "text/html", huge_html),
        Reply::text(r#"{"allow": "maybe"}"#),
        Reply::hang(),
    ];
    for reply in cases {
        let judge_server = FakeServer::start();
        judge_server.push(reply.repeat(4));
        let server = FakeServer::start();
        server.push(Reply::text("an answer"));
        server.push(Reply::text("the next turn"));
        let guards = Guards::new()
            .output("kind", judge_on(&judge_server))
            .timeout(std::time::Duration::from_millis(500));
        let (mut agent, rec) = agent_with(&server, |c| c.guards(guards));
        let err = agent.run_loop("hello").unwrap_err();
        assert_eq!(err.kind(), pikuri::ErrorKind::Guardrail, "{err}");
        let text = err.to_string();
        assert!(text.starts_with("stopped by guard kind: "), "{text}");
        assert!(text.len() < 2_000, "bounded: {} bytes", text.len());
        assert_eq!(agent.last_stop_reason(), Some(StopReason::Guardrail));
        assert!(rec.events().iter().any(|e| matches!(
            e,
            Event::Guard { action: Action::Stop, detail, .. } if detail.len() < 2_000
        )));
        // Never a silent allow; the history stays valid for the next turn.
        assert_eq!(agent.messages().len(), 1);
        assert_valid_history(agent.messages());
    }
}

#[test]
fn extreme_bounds_and_limits_are_no_limit_not_an_overflow() {
    let judge_server = FakeServer::start();
    judge_server.push(allow().with_usage(u64::MAX, u64::MAX));
    let server = FakeServer::start();
    server.push(Reply::text("an answer").with_usage(u64::MAX, u64::MAX));
    let every = |b: Budget| {
        b.max_requests(u64::MAX)
            .max_input_tokens(u64::MAX)
            .max_output_tokens(u64::MAX)
            .max_total_tokens(u64::MAX)
            .max_tool_calls(u64::MAX)
            .max_wall_time(std::time::Duration::MAX)
            .max_cost(Cost::from_usd(f64::INFINITY))
    };
    let budget = every(Budget::new())
        .prices(PriceTable::new().with(
            "fake-model",
            Price::per_million_micro_usd(u64::MAX, u64::MAX),
        ))
        .lifetime(every(Budget::new()));
    let guards = Guards::new()
        .output("kind", judge_on(&judge_server))
        .timeout(std::time::Duration::MAX)
        .max_retries(u32::MAX);
    let (mut agent, _rec) = agent_with(&server, |c| c.guards(guards).budget(budget));
    let out = agent.run_loop("hello").unwrap();
    assert_eq!(out.answer.as_deref(), Some("an answer"));
    assert_eq!(out.spend.requests, 2);
    assert_eq!(out.spend.total_tokens(), u64::MAX, "saturated");
    assert_eq!(out.spend.cost, Some(Cost::from_pico_usd(u64::MAX)));
}

#[test]
fn cancelling_while_any_guard_runs_ends_the_wait_at_once() {
    let server = FakeServer::start();
    server.push(Reply::text("an answer"));
    let cancel = pikuri::Cancellable::new();
    let token = cancel.clone();
    // The guard cancels the run, then takes far longer than its bound:
    // without the cancel watch the run would stop at the bound as the
    // guard's failure.
    let guards = Guards::new()
        .output("slow", move |_: &str| {
            token.cancel();
            std::thread::sleep(std::time::Duration::from_secs(60));
            pikuri::guard::OutputVerdict::Allow
        })
        .timeout(std::time::Duration::from_secs(20));
    let (mut agent, rec) = agent_with(&server, |c| c.guards(guards).cancellable(cancel));
    let err = agent.run_loop("hello").unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(agent.last_stop_reason(), Some(StopReason::Cancelled));
    // The wait ended with the cancel, not at the bound (which would have
    // reported the guard's overrun).
    let guard_events: Vec<_> = rec
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::Guard { .. }))
        .collect();
    assert!(guard_events.is_empty(), "{guard_events:?}");
    assert_eq!(agent.messages().len(), 1);
}

/// Many agents on threads share one set of guards (a judge, a guard that
/// panics on one word, the redactor) and the kept guard threads: each
/// run's spend holds its own judge request only, at its own price (the
/// thread lends each check its own run's meter), a panic stops only the
/// run that met it, and its agent's next turn works. Bounded by the
/// number of turns, not by time.
#[test]
fn many_agents_sharing_guards_each_count_their_own_judge_and_panic_alone() {
    const AGENTS: usize = 6;
    const TURNS: usize = 5;
    let judge_server = FakeServer::start();
    judge_server.push(allow().with_usage(10, 1).repeat(AGENTS * (TURNS - 1)));
    let server = FakeServer::start();
    server.push(
        Reply::text("fine")
            .with_usage(100, 5)
            .repeat(AGENTS * (TURNS - 1)),
    );
    let judge = Judge::with_http(
        judge_server.transport().with_model("judge-model"),
        "Be kind.",
        crate::util::fast_http(),
    );
    let guards = Guards::new()
        .input("boom", |text: &str| {
            assert!(!text.contains("boom"), "a guard that breaks");
            pikuri::guard::InputVerdict::Allow
        })
        .input("kind", judge)
        .tool_output("redact", pikuri::guard::Redactor::new());
    let threads: Vec<_> = (0..AGENTS)
        .map(|i| {
            let (guards, transport) = (guards.clone(), server.transport());
            std::thread::spawn(move || {
                let mut agent = pikuri::Agent::builder(transport)
                    .guards(guards)
                    .budget(Budget::new().prices(prices()))
                    .build()
                    .unwrap();
                (0..TURNS)
                    .map(|t| {
                        let word = if t == 2 { "boom" } else { "hello" };
                        let out = agent.run_loop(&format!("agent {i} turn {t}: {word}"));
                        assert_valid_history(agent.messages());
                        out
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let judge_cost = Price::per_million_usd(10.0, 20.0)
        .cost(&pikuri::Usage::new().with_input(10).with_output(1));
    let model_cost =
        Price::per_million_usd(1.0, 2.0).cost(&pikuri::Usage::new().with_input(100).with_output(5));
    for t in threads {
        for (turn, out) in t.join().expect("no agent panicked").into_iter().enumerate() {
            if turn == 2 {
                let err = out.unwrap_err();
                assert_eq!(err.to_string(), "stopped by guard boom: the guard panicked");
                continue;
            }
            let spend = out.unwrap().spend;
            assert_eq!(spend.requests, 2, "turn {turn}: {spend:?}");
            assert_eq!(spend.input_tokens(), 110, "turn {turn}: {spend:?}");
            assert_eq!(spend.cost, Some(judge_cost.saturating_add(model_cost)));
        }
    }
    server.assert_all_used();
    judge_server.assert_all_used();
}
