//! Issue 36: why an answer ended, on all three APIs. A cut answer (the
//! token limit, a filter, the server) is never a `Completed` run: the
//! outcome says `Incomplete` and how it ended, the `Assistant` event
//! carries the finish, the history keeps the answer, and the next turn
//! works.

use pikuri::listeners::InMemoryEventList;
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Api, Event, FinishReason, Role, StopReason};
use serde_json::json;

use crate::util::{assert_valid_history, fast_http};

const APIS: [Api; 3] = [
    Api::ChatCompletions,
    Api::AnthropicMessages,
    Api::OpenAiResponses,
];

/// An agent speaking `api` on a strict server, streaming or not.
fn agent(server: &FakeServer, api: Api, stream: bool) -> (Agent, InMemoryEventList) {
    let rec = InMemoryEventList::new();
    let agent = Agent::builder(server.transport().with_api(api))
        .system_prompt("You are a test agent.")
        .http(fast_http().with_max_retries(0))
        .streaming(stream)
        .add_listener(rec.clone())
        .add_tool(FnTool::new(
            "echo",
            "Echoes.",
            Parameters::builder().required_string("s", "text").build(),
            |args, _| Ok(args["s"].as_str().unwrap_or_default().to_string()),
        ))
        .build()
        .expect("agent builds");
    (agent, rec)
}

/// The finishes of the main agent's `Assistant` events, in order.
fn assistant_finishes(rec: &InMemoryEventList) -> Vec<(String, FinishReason)> {
    rec.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Assistant {
                agent,
                content,
                finish,
                ..
            } if agent.is_empty() => Some((content, finish)),
            _ => None,
        })
        .collect()
}

/// The reasons of the main agent's `Stopped` events, in order.
fn stops(rec: &InMemoryEventList) -> Vec<StopReason> {
    rec.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Stopped { agent, reason, .. } if agent.is_empty() => Some(reason),
            _ => None,
        })
        .collect()
}

/// `(scripted finish, what the run reports)`: the reasons each API's
/// FakeServer renders in its own words (`max_tokens`, `refusal`, an
/// `incomplete` status with its reason, ...).
const CUTS: [(&str, FinishReason); 3] = [
    ("length", FinishReason::Length),
    ("content_filter", FinishReason::Filtered),
    ("server_went_away", FinishReason::ServerCut),
];

#[test]
fn a_cut_answer_ends_the_run_incomplete_on_every_api() {
    for api in APIS {
        for stream in [false, true] {
            for (scripted, finish) in CUTS {
                let server = FakeServer::start();
                server.set_strict(true);
                server.push(Reply::text("The causes are: first,").with_finish_reason(scripted));
                server.push(Reply::text("second and third."));
                let (mut agent, rec) = agent(&server, api, stream);
                let what = format!("{api:?}, stream {stream}, {scripted}");

                let outcome = agent.run_loop("Name the causes.").expect(&what);
                assert_eq!(outcome.stop_reason, StopReason::Incomplete, "{what}");
                assert_eq!(outcome.finish, finish, "{what}");
                assert_eq!(
                    outcome.answer.as_deref(),
                    Some("The causes are: first,"),
                    "{what}"
                );
                assert_eq!(agent.last_stop_reason(), Some(StopReason::Incomplete));
                assert_eq!(
                    assistant_finishes(&rec),
                    [("The causes are: first,".to_string(), finish)],
                    "{what}"
                );
                assert_eq!(stops(&rec), [StopReason::Incomplete], "{what}");

                // The cut answer stays in the history; the next turn goes on.
                let next = agent.run_loop("continue").expect(&what);
                assert_eq!(next.stop_reason, StopReason::Completed, "{what}");
                assert_eq!(next.finish, FinishReason::Complete, "{what}");
                assert_eq!(next.answer.as_deref(), Some("second and third."));
                let roles: Vec<Role> = agent.messages().iter().map(|m| m.role).collect();
                assert_eq!(
                    roles,
                    [Role::User, Role::Assistant, Role::User, Role::Assistant],
                    "{what}"
                );
                assert_eq!(agent.messages()[1].content, "The causes are: first,");
                assert_valid_history(agent.messages());
                // The second request carried the cut answer back.
                let sent = server.chat_requests()[1].conversation();
                assert!(
                    sent.iter().any(|m| m["content"] == "The causes are: first,"
                        || m["content"][0]["text"] == "The causes are: first,"),
                    "{what}: {sent:?}"
                );
                assert_eq!(
                    assistant_finishes(&rec).last().map(|(_, f)| *f),
                    Some(FinishReason::Complete),
                    "{what}"
                );
                assert!(server.rejections().is_empty(), "{what}");
                server.assert_all_used();
            }
        }
    }
}

#[test]
fn a_complete_answer_after_tool_calls_is_completed_on_every_api() {
    for api in APIS {
        let server = FakeServer::start();
        server.set_strict(true);
        server.push(Reply::tool_call("echo", json!({"s": "hi"})).with_text("Let me check."));
        server.push(Reply::text("It said hi."));
        let (mut agent, rec) = agent(&server, api, true);
        let outcome = agent.run_loop("echo hi").unwrap();
        assert_eq!(outcome.stop_reason, StopReason::Completed, "{api:?}");
        assert_eq!(outcome.finish, FinishReason::Complete, "{api:?}");
        assert_eq!(
            assistant_finishes(&rec),
            [
                ("Let me check.".to_string(), FinishReason::ToolCalls),
                ("It said hi.".to_string(), FinishReason::Complete),
            ],
            "{api:?}"
        );
        server.assert_all_used();
    }
}

#[test]
fn only_the_final_answer_decides_the_stop_reason() {
    // A round cut at the limit whose calls still ran (their arguments
    // were whole), then a complete answer: the run completed.
    let server = FakeServer::start();
    server.push(
        Reply::tool_call("echo", json!({"s": "hi"}))
            .with_text("Checking")
            .with_finish_reason("length"),
    );
    server.push(Reply::text("Done."));
    let (mut agent, rec) = agent(&server, Api::ChatCompletions, false);
    let outcome = agent.run_loop("echo hi").unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    assert_eq!(outcome.finish, FinishReason::Complete);
    assert_eq!(assistant_finishes(&rec)[0].1, FinishReason::Length);
    assert_valid_history(agent.messages());
}

#[test]
fn a_sub_agents_cut_answer_tells_the_parent_it_was_cut() {
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "helper", "task": "list the causes"}),
    ));
    server.push(Reply::text("Causes: one, two,").with_finish_reason("length")); // the sub-agent
    server.push(Reply::text("The helper was cut off."));
    let rec = InMemoryEventList::new();
    let personas = vec![Persona::new("helper", "Lists.", "You list.", 3)];
    let mut agent = Agent::builder(server.transport())
        .http(fast_http())
        .add_listener(rec.clone())
        .add_extension(SubAgents::new(personas).unwrap())
        .build()
        .unwrap();
    let outcome = agent.run_loop("delegate").unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Completed);
    let result = &agent.messages()[2];
    assert_eq!(result.role, Role::Tool);
    assert!(
        result.content.starts_with("Causes: one, two,"),
        "{}",
        result.content
    );
    assert!(
        result.content.contains("cut off") && result.content.contains("length"),
        "{}",
        result.content
    );
    // The sub-agent's own events say so too.
    let child: Vec<(FinishReason, StopReason)> = rec
        .events()
        .into_iter()
        .filter(|e| e.agent() == "helper 0")
        .filter_map(|e| match e {
            Event::Stopped { reason, .. } => Some((FinishReason::Length, reason)),
            Event::Assistant { finish, .. } => Some((finish, StopReason::Incomplete)),
            _ => None,
        })
        .collect();
    assert_eq!(
        child,
        [
            (FinishReason::Length, StopReason::Incomplete),
            (FinishReason::Length, StopReason::Incomplete)
        ]
    );
}

#[test]
fn a_cut_synthesized_answer_is_incomplete() {
    use pikuri::{OnExhausted, StepLimit};
    let server = FakeServer::start();
    server.push(Reply::tool_call("echo", json!({"s": "a"})));
    server.push(Reply::tool_call("echo", json!({"s": "b"})));
    server.push(Reply::text("From the evidence: a and").with_finish_reason("length"));
    let (mut agent, rec) = {
        let rec = InMemoryEventList::new();
        let agent = Agent::builder(server.transport())
            .http(fast_http())
            .add_listener(rec.clone())
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
            .add_tool(FnTool::new(
                "echo",
                "Echoes.",
                Parameters::builder().required_string("s", "text").build(),
                |args, _| Ok(args["s"].as_str().unwrap_or_default().to_string()),
            ))
            .build()
            .unwrap();
        (agent, rec)
    };
    let outcome = agent.run_loop("go").unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Incomplete);
    assert_eq!(outcome.finish, FinishReason::Length);
    assert_eq!(outcome.answer.as_deref(), Some("From the evidence: a and"));
    assert_eq!(stops(&rec), [StopReason::Incomplete]);
    assert_valid_history(agent.messages());
}

#[test]
fn the_assistant_events_json_carries_the_finish_and_reads_old_lines() {
    let e = Event::Assistant {
        agent: "".into(),
        content: "Hi".into(),
        finish: FinishReason::Length,
    };
    let json = serde_json::to_string(&e).unwrap();
    assert_eq!(
        json,
        r#"{"type":"assistant","agent":"","content":"Hi","finish":"length"}"#
    );
    assert_eq!(serde_json::from_str::<Event>(&json).unwrap(), e);
    // A line written before the field existed reads as a complete answer.
    let old: Event =
        serde_json::from_str(r#"{"type":"assistant","agent":"","content":"Hi"}"#).unwrap();
    assert!(matches!(
        old,
        Event::Assistant {
            finish: FinishReason::Complete,
            ..
        }
    ));
    assert_eq!(StopReason::Incomplete.as_str(), "incomplete");
    assert_eq!(
        serde_json::to_string(&StopReason::Incomplete).unwrap(),
        r#""incomplete""#
    );
}

pikuri::tool::schema_type! {
    /// A count.
    struct Count {
        /// How many.
        n: u32,
    }
}

#[test]
fn a_typed_turn_still_repairs_a_cut_answer_and_ends_completed() {
    for api in APIS {
        let server = FakeServer::start();
        server.push(Reply::text(r#"{"n": "#).with_finish_reason("length"));
        server.push(Reply::text(r#"{"n": 3}"#));
        let (mut agent, rec) = agent(&server, api, true);
        let typed = agent.run_typed::<Count>("count").unwrap();
        assert_eq!(typed.value.n, 3, "{api:?}");
        assert_eq!(typed.repairs, 1, "{api:?}");
        assert_eq!(typed.outcome.stop_reason, StopReason::Completed);
        assert_eq!(typed.outcome.finish, FinishReason::Complete);
        // The cut run and the repair run each ended with their own reason.
        assert_eq!(
            stops(&rec),
            [StopReason::Incomplete, StopReason::Completed],
            "{api:?}"
        );
        assert_valid_history(agent.messages());
        server.assert_all_used();
    }
}
