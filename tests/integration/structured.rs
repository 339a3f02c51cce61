//! Issue 14: structured output. A typed turn's request carries the schema
//! (`response_format` or the prompt), a valid answer parses into `T`, an
//! invalid one is repaired with every problem listed, and one that stays
//! invalid ends in `Error::InvalidAnswer` with a valid history.

use pikuri::listeners::InMemoryEventList;
use pikuri::structured::{StructuredMode, StructuredOutput};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{JsonSchema, TypedTool};
use pikuri::{Error, Event, OnExhausted, StepLimit, StopReason};
use serde_json::{Value, json};

use crate::util::{agent_with, assert_valid_history, streamed_text};

pikuri::tool::schema_type! {
    /// Severity of a finding.
    enum Severity {
        Low = "low",
        High = "high",
    }
}

pikuri::tool::schema_type! {
    /// A tool's arguments.
    struct Lookup { path: String }
}

fn lookup() -> TypedTool {
    TypedTool::new("lookup", "Read a file.", |a: Lookup, _ctx| {
        Ok::<_, pikuri::ToolError>(format!("contents of {}", a.path))
    })
}

pikuri::tool::schema_type! {
    /// A code-review verdict.
    #[derive(PartialEq)]
    struct Review {
        /// Whether to merge.
        approve: bool,
        severity: Severity,
        /// Findings, at most a few.
        findings: Vec<String>,
        /// A score from the schema's integer bounds.
        score: u8,
    }
}

const VALID: &str = r#"{"approve": true, "severity": "low", "findings": ["typo"], "score": 7}"#;

fn body(server: &FakeServer, i: usize) -> Value {
    server.chat_requests()[i].body.clone().expect("json body")
}

fn contents(server: &FakeServer, i: usize) -> Vec<String> {
    server.chat_requests()[i]
        .messages()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn request_carries_strict_response_format_and_valid_answer_parses() {
    let server = FakeServer::start();
    server.push(Reply::text(VALID));
    let (mut agent, _) = agent_with(&server, |c| c);
    let typed = agent.run_typed::<Review>("Review this diff.").unwrap();
    assert_eq!(
        typed.value,
        Review {
            approve: true,
            severity: Severity::Low,
            findings: vec!["typo".into()],
            score: 7
        }
    );
    assert_eq!(typed.repairs, 0);
    assert_eq!(typed.outcome.answer.as_deref(), Some(VALID));
    let b = body(&server, 0);
    assert_eq!(
        b["response_format"],
        json!({"type": "json_schema", "json_schema": {
            "name": "Review", "strict": true, "schema": Review::json_schema()}})
    );
    assert!(b.get("format").is_none(), "not an Ollama transport");
    // The schema is in the system prompt too.
    assert!(contents(&server, 0)[0].contains("\"severity\""));
    // Afterwards, a plain turn sends neither.
    server.push(Reply::text("ok"));
    agent.run_loop("thanks").unwrap();
    let b = body(&server, 1);
    assert!(b.get("response_format").is_none());
    assert_eq!(contents(&server, 1)[0], "You are a test agent.");
    assert_eq!(agent.system_prompt(), "You are a test agent.");
    server.assert_all_used();
}

#[test]
fn invalid_answer_is_repaired_listing_every_problem() {
    let server = FakeServer::start();
    server.push(Reply::text(
        r#"{"approve": "yes", "severity": "medium", "findings": [], "score": 300}"#,
    ));
    server.push(Reply::text(VALID));
    let (mut agent, rec) = agent_with(&server, |c| c);
    let typed = agent.run_typed::<Review>("Review this diff.").unwrap();
    assert_eq!(typed.repairs, 1);
    assert!(typed.value.approve);
    assert_eq!(typed.outcome.requests, 2);
    // The repair request: history (strict server accepted it) ends with the
    // repair message naming each of the three problems.
    let msgs = contents(&server, 1);
    let repair = msgs.last().unwrap();
    assert!(repair.starts_with("Your answer does not match"), "{repair}");
    for field in ["`approve`", "`severity`", "`score`"] {
        assert!(repair.contains(field), "{field} missing in {repair}");
    }
    assert_eq!(repair.matches("\n- ").count(), 3, "{repair}");
    assert!(body(&server, 1).get("response_format").is_some());
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    assert!(rec.events().iter().any(|e| matches!(e,
        Event::UserTurn { content, mid_loop: true, .. } if content.starts_with("Your answer does not match"))));
    assert_valid_history(agent.messages());
}

#[test]
fn answer_that_stays_invalid_ends_in_typed_error_and_next_turn_works() {
    let server = FakeServer::start();
    server.push(Reply::text("I approve!"));
    server.push(Reply::text(r#"{"approve": true}"#));
    let (mut agent, _) = agent_with(&server, |c| {
        c.structured_output(StructuredOutput::default().with_max_repairs(1))
    });
    let err = agent.run_typed::<Review>("Review this diff.").unwrap_err();
    match &err {
        Error::InvalidAnswer { problems, raw } => {
            assert_eq!(raw, r#"{"approve": true}"#);
            assert_eq!(problems.len(), 3, "{problems:?}"); // severity, findings, score
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().starts_with("invalid answer: "), "{err}");
    // First repair said the answer was not JSON.
    assert!(
        contents(&server, 1)
            .last()
            .unwrap()
            .contains("not valid JSON")
    );
    assert_eq!(server.chat_requests().len(), 2, "one repair only");
    assert_valid_history(agent.messages());
    assert_eq!(
        agent.last_assistant_content().as_deref(),
        Some(r#"{"approve": true}"#)
    );
    // The next turn works; the typed turn's fields are gone.
    server.push(Reply::text("fine"));
    assert_eq!(
        agent.run_loop("ok?").unwrap().answer.as_deref(),
        Some("fine")
    );
    assert!(body(&server, 2).get("response_format").is_none());
    assert!(server.rejections().is_empty());
}

#[test]
fn with_tools_tool_rounds_are_unconstrained_and_answer_typed() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("lookup", json!({"path": "src/lib.rs"})));
    server.push(Reply::text(VALID));
    let tool = lookup();
    let (mut agent, _) = agent_with(&server, |c| c.add_tool(tool));
    let typed = agent.run_typed::<Review>("Review src/lib.rs.").unwrap();
    assert_eq!(typed.value.score, 7);
    assert_eq!(typed.outcome.steps, 1);
    // Tools-first: no response_format while the model may call tools (on
    // llama.cpp it would force every message into the schema)...
    for i in 0..2 {
        assert!(
            body(&server, i).get("response_format").is_none(),
            "request {i}"
        );
        assert!(
            contents(&server, i)[0].contains("\"findings\""),
            "note in {i}"
        );
    }
    assert!(
        contents(&server, 1)
            .iter()
            .any(|c| c == "contents of src/lib.rs")
    );
    // ...unless the host says the server allows both.
    server.push(Reply::tool_call("lookup", json!({"path": "a"})));
    server.push(Reply::text(VALID));
    let on = StructuredOutput::default().with_constrained_tool_rounds(true);
    agent.run_typed_with::<Review>("Again.", &on).unwrap();
    assert!(body(&server, 2).get("response_format").is_some());
    assert!(body(&server, 3).get("response_format").is_some());
    assert_valid_history(agent.messages());
}

#[test]
fn with_tools_a_prose_answer_is_repaired_under_response_format() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("lookup", json!({"path": "x"})));
    server.push(Reply::text("Looks good to me."));
    server.push(Reply::text(VALID));
    let tool = lookup();
    let (mut agent, _) = agent_with(&server, |c| c.add_tool(tool));
    let typed = agent.run_typed::<Review>("Review.").unwrap();
    assert_eq!(typed.repairs, 1);
    assert!(body(&server, 1).get("response_format").is_none());
    assert!(body(&server, 2).get("response_format").is_some());
    assert!(server.rejections().is_empty());
}

#[test]
fn streaming_deltas_flow_and_the_answer_is_typed() {
    let server = FakeServer::start();
    server.push(Reply::text(VALID));
    let (mut agent, rec) = agent_with(&server, |c| c.streaming(true));
    let typed = agent.run_typed::<Review>("Review.").unwrap();
    assert_eq!(typed.value.severity, Severity::Low);
    assert!(server.chat_requests()[0].is_stream());
    assert!(body(&server, 0).get("response_format").is_some());
    assert_eq!(streamed_text(&rec.events()), VALID);
}

#[test]
fn prompt_mode_puts_the_schema_in_the_prompt_only() {
    let server = FakeServer::start();
    server.push(Reply::text(format!("```json\n{VALID}\n```")));
    let (mut agent, _) = agent_with(&server, |c| {
        c.structured_output(StructuredOutput::default().with_mode(StructuredMode::Prompt))
    });
    let typed = agent.run_typed::<Review>("Review.").unwrap();
    assert_eq!(typed.value.findings, ["typo"]);
    let b = body(&server, 0);
    assert!(b.get("response_format").is_none());
    assert!(b.get("format").is_none());
    let system = &contents(&server, 0)[0];
    assert!(system.starts_with("You are a test agent.\n\n"), "{system}");
    assert!(system.contains("JSON Schema"), "{system}");
    assert!(
        system.contains(&Review::json_schema().to_string()),
        "{system}"
    );
}

#[test]
fn synthesized_answer_is_typed() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("lookup", json!({"path": "x"})));
    server.push(Reply::tool_call("lookup", json!({"path": "x"})));
    server.push(Reply::text(VALID)); // the synthesizer
    let tool = lookup();
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(tool)
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
    });
    let typed = agent.run_typed::<Review>("Review.").unwrap();
    assert_eq!(typed.outcome.stop_reason, StopReason::Synthesized);
    assert_eq!(typed.value.score, 7);
    let synth = body(&server, 2);
    assert_eq!(synth["response_format"]["json_schema"]["name"], "Review");
    assert!(synth.get("tools").is_none());
    assert!(contents(&server, 2)[0].contains("\"findings\""));
    assert_valid_history(agent.messages());
}

#[test]
fn ollama_transport_gets_format_too() {
    let server = FakeServer::start();
    server.push(Reply::text(VALID));
    let transport = server
        .transport()
        .with_api_base(format!("{}/api/v1", server.root_url()))
        .with_context_window(Some(4096));
    let rec = InMemoryEventList::new();
    let mut agent = pikuri::Agent::builder(transport)
        .http(crate::util::fast_http())
        .add_listener(rec)
        .build()
        .unwrap();
    agent.run_typed::<Review>("Review.").unwrap();
    let b = body(&server, 0);
    assert_eq!(b["format"], Review::json_schema());
    assert!(b.get("response_format").is_some());
}

#[test]
fn non_object_schema_is_invalid_input_and_sends_nothing() {
    let server = FakeServer::start();
    let (mut agent, _) = agent_with(&server, |c| c);
    let err = agent.run_typed::<Vec<u8>>("List.").unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(server.chat_requests().is_empty());
    assert!(agent.messages().is_empty());
}

/// A typed turn's additions (the schema note, `response_format`) live for
/// that turn only, even when it unwinds: a host that catches a panicking
/// extension hook gets an untyped next turn and its own system prompt.
#[test]
fn a_typed_turn_that_unwinds_leaves_the_next_turn_untyped() {
    struct PanicsOnce(bool);
    impl pikuri::extension::Extension for PanicsOnce {
        fn on_user_message(&mut self, _: &pikuri::extension::ExtensionContext, _: &str) {
            assert!(std::mem::replace(&mut self.0, true), "an extension bug");
        }
    }
    let server = FakeServer::start();
    server.push(Reply::text("plain"));
    let (mut agent, _) = agent_with(&server, |c| c.add_extension(PanicsOnce(false)));
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        agent.run_typed::<Review>("Review.")
    }));
    assert!(unwound.is_err());
    assert_eq!(agent.system_prompt(), "You are a test agent.");
    agent.run_loop("Hello?").unwrap();
    let sent = body(&server, 0);
    assert!(sent.get("response_format").is_none(), "{sent}");
    assert_eq!(contents(&server, 0)[0], "You are a test agent.");
}

/// The typed turn's request is the parent's alone: a sub-agent it spawns
/// sends neither the schema note nor `response_format`, though the
/// parent's own tool rounds carry them.
#[test]
fn a_sub_agent_of_a_typed_turn_is_not_constrained() {
    use pikuri::subagent::{Persona, SubAgents};
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "helper", "task": "look"}),
    ));
    server.push(Reply::text("found it")); // the sub-agent
    server.push(Reply::text(VALID));
    let personas = vec![Persona::new("helper", "Looks.", "You look.", 2)];
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_extension(SubAgents::new(personas).unwrap())
    });
    let settings = StructuredOutput::default().with_constrained_tool_rounds(true);
    let typed = agent
        .run_typed_with::<Review>("Review.", &settings)
        .unwrap();
    assert_eq!(typed.value.score, 7);
    assert_eq!(
        body(&server, 0)["response_format"]["json_schema"]["name"],
        "Review"
    );
    assert!(contents(&server, 0)[0].contains("\"findings\""));
    let child = body(&server, 1);
    assert!(child.get("response_format").is_none(), "{child}");
    assert_eq!(contents(&server, 1)[0], "You look.");
    assert_eq!(
        body(&server, 2)["response_format"]["json_schema"]["name"],
        "Review"
    );
}
