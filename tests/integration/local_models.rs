//! Local-model robustness: leaked tool calls, `<think>` tags, budget
//! wind-down, safe model switches, the context warning.

use pikuri::builtin;
use pikuri::listeners::TokenLog;
use pikuri::testing::{FakeServer, Reply, SharedBuffer};
use pikuri::{Event, Role, StepLimit};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history, deltas};

fn leaked(text: &str, recover: bool) -> (Vec<pikuri::Message>, FakeServer) {
    let server = FakeServer::start();
    server.push(Reply::text(text));
    server.push(Reply::text("It is 42."));
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator())
            .recover_text_tool_calls(recover)
    });
    agent.run_loop("What is 6*7?").unwrap();
    (agent.messages().to_vec(), server)
}

#[test]
fn leaked_tool_calls_are_recovered_in_each_format() {
    for text in [
        "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"6*7\"}}\n</tool_call>",
        "<function=calculator>{\"expression\": \"6*7\"}</function>",
        "{\"name\": \"calculator\", \"arguments\": {\"expression\": \"6*7\"}}",
        "```json\n{\"name\": \"calculator\", \"arguments\": \"{\\\"expression\\\": \\\"6*7\\\"}\"}\n```",
    ] {
        let (messages, server) = leaked(text, true);
        assert_valid_history(&messages);
        let call = &messages[1].tool_calls[0];
        assert_eq!(call.name, "calculator", "{text}");
        assert_eq!(messages[2].content, "42", "{text}");
        // Recorded as a proper tool call in the next request.
        let second = &server.chat_requests()[1].messages();
        assert_eq!(second[2]["tool_calls"][0]["function"]["name"], "calculator");
        server.assert_all_used();
    }
}

#[test]
fn leaked_calls_stay_text_when_off_unknown_or_invalid() {
    let (messages, server) = leaked(
        "<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1\"}}</tool_call>",
        false,
    );
    assert!(messages[1].tool_calls.is_empty());
    assert_eq!(server.remaining(), 1);
    let (messages, _) = leaked(
        "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
        true,
    );
    assert!(
        messages[1].tool_calls.is_empty(),
        "unknown tool names are not recovered"
    );
    let (messages, _) = leaked(
        "<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expr\": 1}}</tool_call>",
        true,
    );
    assert!(
        messages[1].tool_calls.is_empty(),
        "arguments that do not validate are not recovered"
    );
}

#[test]
fn think_tags_split_across_chunks_become_reasoning() {
    for chunk in [1, 2, 3, 5, 7] {
        let server = FakeServer::start();
        server.push(
            Reply::text("<think>Let me add them.</think>\n\nThe sum is 5.").with_chunk_chars(chunk),
        );
        let (mut agent, rec) = agent_with(&server, |c| c.streaming(true).split_think_tags(true));
        agent.run_loop("2+3?").unwrap();
        let m = &agent.messages()[1];
        assert_eq!(m.content, "The sum is 5.", "chunk {chunk}");
        assert_eq!(
            m.reasoning.as_deref(),
            Some("Let me add them."),
            "chunk {chunk}"
        );
        let text = deltas(&rec, "");
        assert!(
            !text.contains('<') && !text.contains("think"),
            "chunk {chunk}: {text:?}"
        );
        assert!(rec.events().iter().any(
            |e| matches!(e, Event::Thinking { content, .. } if content == "Let me add them.")
        ));
    }
}

#[test]
fn remaining_steps_note_appears_near_the_end_of_the_budget() {
    let server = FakeServer::start();
    for _ in 0..3 {
        server.push(Reply::tool_call("calculator", json!({"expression": "1+1"})));
    }
    server.push(Reply::text("done"));
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_tool(builtin::calculator())
            .step_limit(StepLimit::new(3))
            .wind_down(2)
    });
    agent.run_loop("loop").unwrap();
    let notes: Vec<Option<String>> = server
        .chat_requests()
        .iter()
        .map(|r| {
            let msgs = r.messages();
            let last = msgs.last().unwrap();
            (last["role"] == "system").then(|| last["content"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(notes[0], None, "3 steps left: no note yet");
    assert!(
        notes[1].as_deref().unwrap().contains("2 tool calls remain"),
        "{notes:?}"
    );
    assert!(
        notes[2].as_deref().unwrap().contains("1 tool call remains"),
        "{notes:?}"
    );
    assert!(
        notes[3].as_deref().unwrap().contains("used up"),
        "{notes:?}"
    );
    // The note is per request, never stored in the history.
    assert!(agent.messages().iter().all(|m| m.role != Role::System));
}

#[test]
fn a_model_switch_does_not_resend_the_previous_models_reasoning() {
    let server = FakeServer::start();
    server.push(Reply::text("first").with_reasoning("private chain of thought"));
    server.push(Reply::text("second"));
    server.push(Reply::text("third"));
    let (mut agent, _) = agent_with(&server, |c| c.replay_reasoning(true));
    agent.run_loop("one").unwrap();
    assert_eq!(agent.messages()[1].model.as_deref(), Some("fake-model"));
    agent.run_loop("two").unwrap();
    let same_model = server.chat_requests()[1].messages();
    assert_eq!(
        same_model[2]["reasoning_content"],
        "private chain of thought"
    );
    agent
        .run_loop_with("three", server.transport().with_model("another-model"))
        .unwrap();
    let switched = server.chat_requests()[2].messages();
    assert!(
        switched[2].get("reasoning_content").is_none(),
        "{switched:?}"
    );
    // The reasoning stays in the exported history.
    assert_eq!(
        agent.export_history().messages()[1].reasoning.as_deref(),
        Some("private chain of thought")
    );
}

#[test]
fn token_log_warns_when_the_context_fills_up() {
    let server = FakeServer::start();
    server.set_context_size(Some(1000));
    server.push(Reply::text("big").with_usage(850, 10));
    let out = SharedBuffer::new();
    let (mut agent, _) = agent_with(&server, |c| c.add_listener(TokenLog::new(out.clone())));
    agent.run_loop("fill it").unwrap();
    let text = out.text();
    assert!(text.contains("ctx=850/1.0k"), "{text}");
    assert!(text.contains("85% full"), "{text}");
}
