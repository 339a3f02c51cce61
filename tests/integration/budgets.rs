//! Issue 39 part 3: budgets. Each limit, a request refused before it is
//! sent, sub-agents and compaction counted, the exact cost for a known
//! price table, the synthesize policy, the next turn, a resumed run.

use std::time::Duration;

use pikuri::budget::{Cost, Limit, Price, PriceTable};
use pikuri::compaction::Compaction;
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Budget, Error, Event, OnExhausted, Role, Spend, StopReason, builtin};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history};

fn calc(expr: &str) -> Reply {
    Reply::tool_call("calculator", json!({"expression": expr}))
}

/// The run's error must be a budget stop on `limit`; its spend.
fn tripped(result: pikuri::Result<pikuri::Outcome>, limit: Limit) -> Spend {
    match result {
        Err(Error::BudgetExceeded {
            limit: l,
            spend,
            lifetime: false,
        }) => {
            assert_eq!(l, limit);
            *spend
        }
        other => panic!("expected a {limit} stop, got {other:?}"),
    }
}

fn budget_events(rec: &pikuri::listeners::InMemoryEventList) -> Vec<Limit> {
    rec.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::BudgetExceeded { limit, .. } => Some(limit),
            _ => None,
        })
        .collect()
}

#[test]
fn max_requests_refuses_the_next_request_unsent_and_the_next_turn_is_fresh() {
    let server = FakeServer::start();
    server.push(calc("1+1").with_usage(100, 10));
    server.push(Reply::text("2").with_usage(120, 2));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator())
            .budget(Budget::new().max_requests(1))
    });
    let spend = tripped(agent.run_loop("1+1?"), Limit::Requests);
    assert_eq!(spend.requests, 1);
    assert_eq!(spend.tool_calls, 1);
    assert_eq!(
        server.chat_requests().len(),
        1,
        "the second request was never sent"
    );
    assert_eq!(budget_events(&rec), vec![Limit::Requests]);
    assert_eq!(agent.last_stop_reason(), Some(StopReason::Budget));
    assert!(rec.events().iter().any(|e| matches!(
        e,
        Event::Stopped {
            reason: StopReason::Budget,
            ..
        }
    )));
    assert_valid_history(agent.messages());
    // A new run gets a fresh budget: one request, answered.
    let out = agent.run_loop("and now?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("2"));
    assert_eq!(out.spend.requests, 1);
}

#[test]
fn a_request_whose_input_alone_passes_the_limit_is_never_sent() {
    let server = FakeServer::start();
    server.push(Reply::text("never"));
    let (mut agent, _rec) = agent_with(&server, |c| c.budget(Budget::new().max_input_tokens(50)));
    // About 250 tokens by the chars/4 estimate.
    let spend = tripped(agent.run_loop(&"word ".repeat(200)), Limit::InputTokens);
    assert_eq!(spend.requests, 0);
    assert!(server.chat_requests().is_empty(), "nothing was sent");
    // The total limit refuses it the same way.
    let (mut agent, _rec) = agent_with(&server, |c| c.budget(Budget::new().max_total_tokens(50)));
    tripped(agent.run_loop(&"word ".repeat(200)), Limit::TotalTokens);
    assert!(server.chat_requests().is_empty());
}

#[test]
fn max_output_tokens_stops_the_calls_of_the_response_that_passed_it() {
    let server = FakeServer::start();
    server.push(calc("1+1").with_usage(100, 20));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator())
            .budget(Budget::new().max_output_tokens(10))
    });
    let spend = tripped(agent.run_loop("1+1?"), Limit::OutputTokens);
    assert_eq!(spend.output_tokens(), 20);
    let last = agent.messages().last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(last.content, "Error: not run: budget exhausted");
    assert_valid_history(agent.messages());
}

#[test]
fn max_total_tokens_refuses_the_request_its_input_would_pass() {
    let server = FakeServer::start();
    server.push(calc("1+1").with_usage(100, 10));
    server.push(Reply::text("never"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator())
            .budget(Budget::new().max_total_tokens(150))
    });
    // 110 spent; the next request carries at least those 110 again.
    let spend = tripped(agent.run_loop("1+1?"), Limit::TotalTokens);
    assert_eq!(spend.total_tokens(), 110);
    assert_eq!(server.chat_requests().len(), 1);
}

#[test]
fn max_tool_calls_answers_the_rest_of_the_batch_not_run() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("calculator", json!({"expression": "1+1"})),
        ("calculator", json!({"expression": "2+2"})),
    ]));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator())
            .budget(Budget::new().max_tool_calls(1))
    });
    let spend = tripped(agent.run_loop("sums"), Limit::ToolCalls);
    assert_eq!(spend.tool_calls, 2, "the refused call is counted as asked");
    let tools: Vec<&str> = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(tools, vec!["2", "Error: not run: budget exhausted"]);
    assert_valid_history(agent.messages());
}

#[test]
fn zero_wall_time_sends_nothing() {
    let server = FakeServer::start();
    server.push(Reply::text("never"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.budget(Budget::new().max_wall_time(Duration::ZERO))
    });
    tripped(agent.run_loop("hi"), Limit::WallTime);
    assert!(server.chat_requests().is_empty());
}

fn table() -> PriceTable {
    PriceTable::new().with(
        "fake-model",
        Price::per_million_usd(2.5, 10.0).cached_input_usd(1.25),
    )
}

#[test]
fn the_cost_is_exact_for_a_known_price_table() {
    let server = FakeServer::start();
    // 1000 prompt tokens of which 400 cached, 100 out; then 2000 fresh, 50 out.
    server.push(calc("1+1").with_usage(1_000, 100).with_cached_tokens(400));
    server.push(Reply::text("2").with_usage(2_000, 50));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator())
            .budget(Budget::new().prices(table()))
    });
    let out = agent.run_loop("1+1?").unwrap();
    // 600 × 2.5 + 400 × 1.25 + 2000 × 2.5 + 150 × 10 microdollars.
    let micro = 600 * 5 / 2 + 400 * 5 / 4 + 2_000 * 5 / 2 + 150 * 10;
    assert_eq!(out.spend.cost, Some(Cost::from_micro_usd(micro)));
    assert_eq!(out.spend.cost.unwrap().to_string(), "$0.0085");
    assert_eq!((out.spend.requests, out.spend.tool_calls), (2, 1));
    assert_eq!(out.spend.total_tokens(), 3_150);
    // Announced just before `Stopped`, for the host and the tracer.
    let kinds = rec.kinds();
    assert_eq!(&kinds[kinds.len() - 2..], ["spent", "stopped"]);
    let spent = rec.events().into_iter().find_map(|e| match e {
        Event::Spent { spend, .. } => Some(spend),
        _ => None,
    });
    assert_eq!(spent.map(|s| s.cost), Some(out.spend.cost));
}

#[test]
fn max_cost_refuses_a_request_its_input_would_take_past_it() {
    let server = FakeServer::start();
    server.push(calc("1+1").with_usage(1_000, 100));
    server.push(Reply::text("never"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator()).budget(
            Budget::new()
                .prices(table())
                .max_cost(Cost::from_micro_usd(5_000)),
        )
    });
    // $0.0035 spent; 1100 more input tokens would cost $0.00275.
    let spend = tripped(agent.run_loop("1+1?"), Limit::Cost);
    assert_eq!(spend.cost, Some(Cost::from_micro_usd(3_500)));
    assert_eq!(server.chat_requests().len(), 1);
}

#[test]
fn a_cost_limit_without_the_models_price_is_a_configuration_error() {
    let server = FakeServer::start();
    let err = Agent::builder(server.transport())
        .budget(Budget::new().max_cost(Cost::from_usd(1.0)))
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains("`fake-model`"), "{err}");
}

fn helper() -> SubAgents {
    SubAgents::new(vec![Persona::new("helper", "Helps.", "You help.", 3)]).unwrap()
}

#[test]
fn sub_agents_count_into_the_parents_run_and_are_stopped_by_it() {
    let server = FakeServer::start();
    server.push(
        Reply::tool_call("agent", json!({"name": "helper", "task": "hi"})).with_usage(100, 10),
    );
    server.push(Reply::text("hi").with_usage(20, 2));
    server.push(Reply::text("It said hi.").with_usage(130, 5));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_extension(helper())
            .budget(Budget::new().prices(table()))
    });
    let out = agent.run_loop("delegate").unwrap();
    assert_eq!(out.spend.requests, 3);
    assert_eq!(out.spend.total_tokens(), 267);
    assert_eq!(
        out.spend.cost,
        Some(Cost::from_micro_usd(250 * 5 / 2 + 17 * 10))
    );

    // With two requests allowed, the parent's second is never sent.
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "helper", "task": "hi"}),
    ));
    server.push(Reply::text("hi"));
    server.push(Reply::text("never"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.add_extension(helper())
            .budget(Budget::new().max_requests(2))
    });
    let before = server.chat_requests().len();
    let spend = tripped(agent.run_loop("delegate"), Limit::Requests);
    assert_eq!(spend.requests, 2);
    assert_eq!(server.chat_requests().len() - before, 2);
    assert_valid_history(agent.messages());
}

#[test]
fn a_sub_agent_is_refused_by_the_shared_count() {
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "helper", "task": "hi"}),
    ));
    server.push(Reply::text("never"));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_extension(helper())
            .budget(Budget::new().max_requests(1))
    });
    tripped(agent.run_loop("delegate"), Limit::Requests);
    assert_eq!(
        server.chat_requests().len(),
        1,
        "neither the child's nor the parent's sent"
    );
    let by: Vec<String> = rec
        .events()
        .iter()
        .filter(|e| e.kind() == "budget_exceeded")
        .map(|e| e.agent().to_string())
        .collect();
    assert_eq!(by, vec!["helper 0".to_string(), String::new()]);
}

#[test]
fn compaction_requests_count() {
    let server = FakeServer::start();
    server.set_context_size(Some(1000));
    server.push(Reply::text("a1").with_usage(900, 5));
    server.push(Reply::text("The user said q1.").with_usage(50, 7));
    server.push(Reply::text("a2").with_usage(120, 5));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.compaction(Compaction::summarize().with_keep_turns(1))
            .budget(Budget::new().prices(table()))
    });
    agent.run_loop("q1").unwrap();
    let out = agent.run_loop("q2").unwrap();
    assert_eq!(out.spend.requests, 2, "the summary and the answer");
    assert_eq!(out.spend.total_tokens(), 182);
    assert_eq!(
        out.spend.cost,
        Some(Cost::from_micro_usd(170 * 5 / 2 + 12 * 10))
    );
}

#[test]
fn synthesize_answers_with_one_request_past_the_limit() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("calculator", json!({"expression": "1+1"})),
        ("calculator", json!({"expression": "2+2"})),
    ]));
    server.push(Reply::text("1+1 is 2."));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator()).budget(
            Budget::new()
                .max_tool_calls(1)
                .on_exhausted(OnExhausted::Synthesize),
        )
    });
    let out = agent.run_loop("sums").unwrap();
    assert_eq!(out.stop_reason, StopReason::Synthesized);
    assert_eq!(out.answer.as_deref(), Some("1+1 is 2."));
    assert_eq!(out.spend.requests, 2);
    assert_eq!(budget_events(&rec), vec![Limit::ToolCalls]);
    assert!(rec.events().iter().any(|e| matches!(
        e,
        Event::FallbackNotice { reason, .. } if reason.contains("tool_calls limit")
    )));
    assert_valid_history(agent.messages());
}

/// A journal store in memory that refuses tool results while `refuse` is
/// set: the run stops there, as a crash would leave it.
#[derive(Clone, Default)]
struct Memory {
    records: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    refuse: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Memory {
    /// Refuse tool results from now on (`true`), or take them again.
    fn set_refusing(&self, on: bool) {
        self.refuse.store(on, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An agent on `server` with the calculator and `budget`, its run `r`
/// journaled to `store`.
fn journaled(server: &FakeServer, budget: Budget, store: &Memory) -> Agent {
    Agent::builder(server.transport())
        .add_tool(builtin::calculator())
        .budget(budget)
        .journal(store.clone(), "r")
        .build()
        .unwrap()
}

/// The agent of [`journaled`] resuming run `r` from `store`.
fn resumed(server: &FakeServer, budget: Budget, store: Memory) -> pikuri::Result<Agent> {
    Agent::builder(server.transport())
        .add_tool(builtin::calculator())
        .budget(budget)
        .resume(store, "r")
        .build()
}

/// `question` on `agent`, cut after its first response as by a crash:
/// `store` refuses the tool results, so the run stops with a journal
/// error; then the agent is gone and the store takes records again.
fn crash(mut agent: Agent, store: &Memory, question: &str) {
    store.set_refusing(true);
    assert_eq!(
        agent.run_loop(question).unwrap_err().kind(),
        pikuri::ErrorKind::JournalIo
    );
    drop(agent);
    store.set_refusing(false);
}

impl pikuri::journal::JournalStore for Memory {
    fn append(&self, run: &str, record: &str) -> pikuri::Result<()> {
        if self.refuse.load(std::sync::atomic::Ordering::SeqCst)
            && record.contains(r#""type":"tool_result""#)
        {
            return Err(Error::JournalIo {
                run: run.to_string(),
                message: "refused".into(),
            });
        }
        self.records.lock().unwrap().push(record.to_string());
        Ok(())
    }
    fn read(&self, _run: &str) -> pikuri::Result<Vec<String>> {
        Ok(self.records.lock().unwrap().clone())
    }
    fn runs(&self) -> pikuri::Result<Vec<String>> {
        Ok(vec!["r".to_string()])
    }
    fn lock(&self, _run: &str) -> pikuri::Result<pikuri::journal::RunLock> {
        Ok(pikuri::journal::RunLock::new(()))
    }
}

#[test]
fn a_resumed_run_goes_on_from_what_its_journal_says_was_spent() {
    let server = FakeServer::start();
    server.push(calc("1+1").with_usage(100, 10));
    server.push(calc("2+2").with_usage(200, 10));
    server.push(Reply::text("never"));
    let store = Memory::default();
    let budget = || Budget::new().max_requests(2).prices(table());
    crash(journaled(&server, budget(), &store), &store, "sums");
    let recorded: Vec<String> = store
        .records
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.contains(r#""spent""#))
        .cloned()
        .collect();
    assert_eq!(
        recorded.len(),
        1,
        "one response, its spend recorded with it"
    );

    let mut a = resumed(&server, budget(), store.clone()).unwrap();
    assert!(a.interrupted());
    // One request was spent before the crash: one more is allowed, not two.
    let spend = tripped(a.resume_run(), Limit::Requests);
    assert_eq!(spend.requests, 2);
    assert_eq!(spend.usage.context_used(), 300);
    assert_eq!(
        spend.cost,
        Some(Cost::from_micro_usd(300 * 5 / 2 + 20 * 10))
    );
    assert_eq!(server.chat_requests().len(), 2);
}

/// The chat example's `--max-tokens` and `--max-cost`: what tripped is
/// printed plainly, and the request past it is never sent.
#[test]
fn the_chat_example_stops_on_max_tokens_and_max_cost() {
    let bin = {
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().and_then(std::path::Path::parent).unwrap();
        dir.join("examples")
            .join(format!("chat{}", std::env::consts::EXE_SUFFIX))
    };
    let server = FakeServer::start();
    let base = server.base_url();
    let run = |args: &[&str]| {
        std::process::Command::new(&bin)
            .args([
                "--base-url",
                &base,
                "--model",
                "fake-model",
                "--on-exhausted",
                "raise",
            ])
            .args(args)
            .env("NO_COLOR", "1")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("PIKURI_API")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run `cargo build --examples` first")
    };
    // Nothing else is scripted: a request past the limit would fail.
    server.push(calc("1+1").with_usage(1_000, 100));
    let out = run(&["--max-tokens", "1500", "-p", "go"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("budget exceeded: total_tokens limit reached"),
        "{stderr}"
    );
    assert_eq!(server.chat_requests().len(), 1);

    // Nothing else is scripted: a request past the limit would fail.
    server.push(calc("1+1").with_usage(1_000, 100));
    let out = run(&["--max-cost", "0.004", "--price", "2.5,10", "-p", "go"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("budget exceeded: cost limit reached"),
        "{stderr}"
    );
    assert!(stderr.contains("$0.0035"), "the spend is shown: {stderr}");
    assert_eq!(server.chat_requests().len(), 2);

    // A cost limit on a model without a price is a usage mistake.
    let out = run(&["--max-cost", "0.004", "-p", "go"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr.contains("price"), "{stderr}");
}

/// The run's error must be a lifetime budget stop on `limit`; the
/// lifetime spend.
fn lifetime_tripped(result: pikuri::Result<pikuri::Outcome>, limit: Limit) -> Spend {
    match result {
        Err(Error::BudgetExceeded {
            limit: l,
            spend,
            lifetime: true,
        }) => {
            assert_eq!(l, limit);
            *spend
        }
        other => panic!("expected a lifetime {limit} stop, got {other:?}"),
    }
}

#[test]
fn a_lifetime_limit_trips_across_runs_and_refuses_every_later_turn() {
    let server = FakeServer::start();
    server.push(calc("1+1").with_usage(100, 10));
    server.push(Reply::text("2").with_usage(100, 10));
    server.push(calc("2+2").with_usage(100, 10));
    server.push(Reply::text("never sent"));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator()).budget(
            Budget::new()
                .max_requests(5)
                .lifetime(Budget::new().max_requests(3)),
        )
    });
    let first = agent.run_loop("1+1?").unwrap();
    assert_eq!(first.spend.requests, 2, "the outcome's spend is the run's");
    let err = agent.run_loop("2+2?").unwrap_err();
    assert_eq!(
        err.to_string(),
        "budget exceeded: lifetime requests limit reached after 3 requests, 300 in, 30 out, 2 tool calls"
    );
    let spend = lifetime_tripped(Err(err), Limit::Requests);
    assert_eq!((spend.requests, spend.tool_calls), (3, 2));
    assert_eq!(server.chat_requests().len(), 3);
    assert_eq!(agent.last_stop_reason(), Some(StopReason::Budget));
    assert!(rec.events().iter().any(|e| matches!(
        e,
        Event::BudgetExceeded { limit: Limit::Requests, lifetime: true, spend, .. }
            if spend.requests == 3
    )));
    // Every later turn is refused before its first request, the same way.
    let spend = lifetime_tripped(agent.run_loop("3+3?"), Limit::Requests);
    assert_eq!(spend.requests, 3);
    assert_eq!(server.chat_requests().len(), 3);
    assert_valid_history(agent.messages());
}

#[test]
fn a_lifetime_limit_is_never_synthesized_past() {
    let server = FakeServer::start();
    server.push(Reply::text("one").with_usage(100, 10));
    server.push(Reply::text("never sent"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.budget(
            Budget::new()
                .on_exhausted(OnExhausted::Synthesize)
                .lifetime(Budget::new().max_total_tokens(100)),
        )
    });
    agent.run_loop("first").unwrap();
    let spend = lifetime_tripped(agent.run_loop("second"), Limit::TotalTokens);
    assert_eq!(spend.total_tokens(), 110);
    assert_eq!(server.chat_requests().len(), 1, "no synthesizer's request");
}

#[test]
fn a_lifetime_cost_limit_needs_the_models_price() {
    let server = FakeServer::start();
    let err = Agent::builder(server.transport())
        .budget(Budget::new().lifetime(Budget::new().max_cost(Cost::from_usd(1.0))))
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), pikuri::ErrorKind::InvalidInput);
    // Priced by the run's table (the lifetime's own is ignored).
    let server = FakeServer::start();
    server.push(Reply::text("one").with_usage(1_000, 100));
    server.push(Reply::text("never sent"));
    let mut agent = Agent::builder(server.transport())
        .budget(
            Budget::new()
                .prices(table())
                .lifetime(Budget::new().max_cost(Cost::from_micro_usd(3_000))),
        )
        .build()
        .unwrap();
    agent.run_loop("first").unwrap();
    let spend = lifetime_tripped(agent.run_loop("second"), Limit::Cost);
    assert_eq!(
        spend.cost,
        Some(Cost::from_micro_usd(1_000 * 5 / 2 + 100 * 10))
    );
}

#[test]
fn the_lifetime_count_survives_a_journal_resume() {
    let server = FakeServer::start();
    server.push(Reply::text("one").with_usage(100, 10));
    server.push(calc("1+1").with_usage(100, 10));
    server.push(Reply::text("2").with_usage(100, 10));
    server.push(Reply::text("never sent"));
    let store = Memory::default();
    let budget = || Budget::new().lifetime(Budget::new().max_requests(3));
    let mut a = journaled(&server, budget(), &store);
    a.run_loop("first").unwrap();
    // The second run is cut off after its first response, as by a crash.
    crash(a, &store, "1+1?");

    let mut a = resumed(&server, budget(), store.clone()).unwrap();
    assert!(a.interrupted());
    // Two requests were spent before the crash, one in each run: the
    // resumed run gets the third.
    let out = a.resume_run().unwrap();
    assert_eq!(out.answer.as_deref(), Some("2"));
    assert_eq!(out.spend.requests, 2, "the resumed run's own");
    drop(a);

    // A clean restart: the journal says the lifetime is spent.
    let mut a = resumed(&server, budget(), store.clone()).unwrap();
    assert!(!a.interrupted());
    let spend = lifetime_tripped(a.run_loop("again"), Limit::Requests);
    assert_eq!(spend.requests, 3);
    assert_eq!(server.chat_requests().len(), 3);
}

#[test]
fn a_damaged_spend_record_is_a_corrupt_journal_not_a_refilled_budget() {
    let server = FakeServer::start();
    server.push(calc("1+1").with_usage(100, 10));
    server.push(Reply::text("never"));
    let budget = || {
        Budget::new()
            .max_requests(2)
            .lifetime(Budget::new().max_requests(5))
    };
    let damaged = [
        (r#""requests":1"#, r#""requests":-1"#),
        (r#""requests":1"#, r#""requests":"1""#),
        (r#""requests":1"#, r#""requests":18446744073709551616"#),
        (r#""earlier":{"#, r#""earlier":[{"#),
    ];
    let store = Memory::default();
    crash(journaled(&server, budget(), &store), &store, "sums");
    let records = store.records.lock().unwrap().clone();
    let at = records
        .iter()
        .position(|r| r.contains(r#""earlier":{"#))
        .expect("the response records the earlier runs' spend");
    for (from, to) in damaged {
        assert!(records[at].contains(from), "{}", records[at]);
        let mut bad = records.clone();
        bad[at] = bad[at].replacen(from, to, 1);
        let tampered = Memory::default();
        *tampered.records.lock().unwrap() = bad;
        let err = resumed(&server, budget(), tampered).unwrap_err();
        assert_eq!(err.kind(), pikuri::ErrorKind::JournalCorrupt, "{to}: {err}");
    }
}

/// `record` with the run's spend's `elapsed_ms` (the one after
/// `"spent":{`) set to `ms`.
fn with_run_elapsed(record: &str, ms: u64) -> String {
    let at = record.find(r#""spent":{"#).expect("the run's spend") + 9;
    let key = at
        + record[at..]
            .find(r#""elapsed_ms":"#)
            .expect("its wall time")
        + 13;
    let digits = record[key..]
        .find(|c: char| !c.is_ascii_digit())
        .expect("a number");
    format!("{}{ms}{}", &record[..key], &record[key + digits..])
}

/// A journal whose run had spent a century of wall time (more than any
/// machine's uptime, which an `Instant` cannot go back past on Windows;
/// Linux's can, so this passed there before too): the resumed run is past
/// its wall-time limit, not given the time again; the most a journal can
/// say saturates.
#[test]
fn a_resumed_run_keeps_a_wall_time_longer_than_the_machines_uptime() {
    let server = FakeServer::start();
    server.push(calc("1+1").with_usage(100, 10));
    let budget = || {
        Budget::new()
            .max_wall_time(Duration::from_secs(3_600))
            .on_exhausted(OnExhausted::Raise)
            .lifetime(Budget::new().max_requests(100))
    };
    let store = Memory::default();
    crash(journaled(&server, budget(), &store), &store, "sums");
    let records = store.records.lock().unwrap().clone();
    let at = records
        .iter()
        .position(|r| r.contains(r#""spent":{"#))
        .expect("the response records the run's spend");
    let century_ms: u64 = 100 * 365 * 24 * 3_600 * 1_000;
    for ms in [century_ms, u64::MAX] {
        let mut tampered = records.clone();
        tampered[at] = with_run_elapsed(&tampered[at], ms);
        let store = Memory::default();
        *store.records.lock().unwrap() = tampered;
        let mut a = resumed(&server, budget(), store).unwrap();
        assert!(a.interrupted());
        let spend = tripped(a.resume_run(), Limit::WallTime);
        assert!(spend.elapsed_ms >= ms, "{ms}: {spend:?}");
        assert_eq!(server.chat_requests().len(), 1, "nothing more sent");
        assert_valid_history(a.messages());
    }
}

/// A lifetime limit of zero, of each kind: the first request of the
/// agent's first run is refused unsent, as a lifetime stop (never
/// synthesized past), and so is every later turn's; the history keeps the
/// user messages only.
#[test]
fn a_lifetime_limit_of_zero_refuses_the_first_request_of_every_run() {
    let table = PriceTable::new().with("fake-model", Price::per_million_usd(1.0, 2.0));
    let zero = Duration::ZERO;
    let limits: [(Budget, Limit); 6] = [
        (Budget::new().max_requests(0), Limit::Requests),
        (Budget::new().max_input_tokens(0), Limit::InputTokens),
        (Budget::new().max_output_tokens(0), Limit::OutputTokens),
        (Budget::new().max_total_tokens(0), Limit::TotalTokens),
        (Budget::new().max_wall_time(zero), Limit::WallTime),
        (Budget::new().max_cost(Cost::from_usd(0.0)), Limit::Cost),
    ];
    for (lifetime, limit) in limits {
        let server = FakeServer::start();
        let (mut agent, _rec) = agent_with(&server, |c| {
            c.budget(
                Budget::new()
                    .prices(table.clone())
                    .on_exhausted(OnExhausted::Synthesize)
                    .lifetime(lifetime),
            )
        });
        for turn in ["one", "two"] {
            let spend = lifetime_tripped(agent.run_loop(turn), limit);
            assert_eq!(spend.requests, 0, "{limit}");
        }
        assert!(server.chat_requests().is_empty(), "{limit}");
        assert_valid_history(agent.messages());
    }
}
