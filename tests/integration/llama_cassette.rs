//! A real llama.cpp session, recorded once and replayed in every test run.
//!
//! The fixture `tests/fixtures/llama_calculator.cassette.json` was recorded
//! with the `record` test below against llama.cpp build b11434
//! (`llama-server --jinja` with Qwen2.5-7B-Instruct's chat template, `-c 4096`)
//! serving SmolLM2-135M-Instruct Q4_1 under the alias `smollm2`, as started
//! by `scripts/llama-server.sh`:
//!
//! ```text
//! url=$(scripts/llama-server.sh start)
//! PIKURI_LLAMA_URL=$url cargo test --test integration -- --ignored --exact llama_cassette::record
//! scripts/llama-server.sh stop
//! ```
//!
//! The replay asserts on the structure of the session (a calculator call
//! with an expression the tool evaluates, then an answer), not on the
//! model's words, so a re-recording with another model or build that still
//! calls the tool keeps the test green. Any change to the requests the agent
//! sends (system prompt, tool schema, wire format) makes the replay fail with
//! a diff: re-record then.

use pikuri::builtin;
use pikuri::testing::{Cassette, FakeServer, Recorder};
use pikuri::{
    Agent, ChatTransport, Event, History, HttpConfig, Message, StepLimit, ToolCall,
    listeners::InMemoryEventList,
};
use serde_json::json;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/llama_calculator.cassette.json"
);
const MODEL: &str = "smollm2";
const QUESTION: &str = "What is 17*23?";

/// The agent of the recording, and of the replay: greedy sampling, the
/// calculator, and worked examples in the history that show the model how
/// to call it (`tool_choice: "required"` would apply to every round, the
/// answer after the tool result included). SmolLM2-135M copies the final
/// answers of one or two examples without calling the tool; with three it
/// calls it.
fn llama_agent(transport: ChatTransport, streaming: bool) -> (Agent, InMemoryEventList) {
    let rec = InMemoryEventList::new();
    let mut agent = Agent::builder(transport)
        .system_prompt(
            "You are a helpful assistant. Use the calculator tool for every arithmetic question.",
        )
        .add_tool(builtin::calculator())
        .streaming(streaming)
        .request_field("temperature", json!(0))
        .request_field("max_tokens", json!(128))
        .step_limit(StepLimit::new(4))
        .http(HttpConfig::default().with_max_retries(0))
        .add_listener(rec.clone())
        .build()
        .expect("agent builds");
    let examples = [("2+3", "5"), ("12*4", "48"), ("100-7", "93")];
    let mut history = Vec::new();
    for (i, (expression, result)) in examples.into_iter().enumerate() {
        let id = format!("call_example_{i}");
        history.push(Message::user(format!("What is {expression}?")));
        history.push(Message::assistant_tool_calls(
            "",
            vec![ToolCall::new(
                id.as_str(),
                "calculator",
                json!({ "expression": expression }).to_string(),
            )],
        ));
        history.push(Message::tool(id.as_str(), result));
        history.push(Message::assistant(format!("{expression} is {result}.")));
    }
    agent.load_history(History::new(history).unwrap()).unwrap();
    (agent, rec)
}

#[test]
#[ignore = "records the fixture from a llama.cpp server at PIKURI_LLAMA_URL"]
fn record() {
    let url = std::env::var("PIKURI_LLAMA_URL")
        .expect("PIKURI_LLAMA_URL: the llama.cpp root URL, e.g. http://127.0.0.1:8080");
    let recorder = Recorder::start(&format!("{}/v1", url.trim_end_matches('/')));
    for streaming in [false, true] {
        let (mut agent, rec) = llama_agent(recorder.transport_for(MODEL), streaming);
        let out = agent.run_loop(QUESTION).expect("the session runs");
        eprintln!("streaming={streaming}: {out:?}");
        for e in rec.events() {
            eprintln!("  {e:?}");
        }
    }
    recorder.save(FIXTURE).expect("fixture written");
}

#[test]
fn replay() {
    let cassette = Cassette::load(FIXTURE).expect("fixture loads");
    let server = FakeServer::from_cassette(cassette);
    for streaming in [false, true] {
        let (mut agent, rec) = llama_agent(server.transport().with_model(MODEL), streaming);
        let out = agent.run_loop(QUESTION).expect("the replay matches");
        let answer = out.answer.unwrap_or_default();
        assert!(!answer.trim().is_empty(), "no answer: {:?}", rec.events());

        let events = rec.events();
        let expression = events
            .iter()
            .find_map(|e| match e {
                Event::ToolCall {
                    name, arguments, ..
                } if name == "calculator" => arguments["expression"].as_str().map(str::to_string),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no calculator call with an expression: {events:?}"));
        assert!(!expression.trim().is_empty());
        let result = events
            .iter()
            .find_map(|e| match e {
                Event::ToolResult { name, content, .. } if name == "calculator" => {
                    Some(content.clone())
                }
                _ => None,
            })
            .expect("a calculator result");
        assert!(
            result.parse::<f64>().is_ok(),
            "{expression:?} did not evaluate: {result}"
        );
        if streaming {
            assert!(events.iter().any(|e| e.kind() == "assistant_delta"));
        }
    }
    assert!(server.mismatches().is_empty());
    server.assert_all_used();
}
