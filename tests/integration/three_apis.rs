//! Issue 29 end to end: the same scripted conversations through the agent
//! on each of the three APIs (chat completions, Anthropic Messages, OpenAI
//! Responses), all served by one `FakeServer` in strict mode, asserting on
//! what the agent returns and on the requests it sent; then a switch
//! between every pair of APIs in one conversation.

use std::sync::{Arc, Mutex};

use pikuri::approval::{ApprovalRequest, Decision};
use pikuri::compaction::Compaction;
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, RecordedRequest, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Api, Cancellable, ChatTransport, ErrorKind, Role};
use serde_json::{Value, json};

use crate::util::{add, agent_on, assert_valid_history, streamed_text, strict_server};

const APIS: [Api; 3] = [
    Api::ChatCompletions,
    Api::AnthropicMessages,
    Api::OpenAiResponses,
];

/// No request was rejected by the strict server.
fn assert_clean(server: &FakeServer, api: Api) {
    assert!(
        server.rejections().is_empty(),
        "{api:?}: {:?}",
        server.rejections()
    );
    server.assert_all_used();
}

/// The tool messages of a recorded request (API-neutral view): `(id, content)`.
fn tool_results(req: &RecordedRequest) -> Vec<(String, String)> {
    req.conversation()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or("").to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// The raw body of a request as text, to look for foreign fields.
fn raw(req: &RecordedRequest) -> String {
    req.body.as_ref().map(Value::to_string).unwrap_or_default()
}

/// Assert that `req` (sent on `api`) carries back the reasoning of the
/// previous reply the way its API wants, and nothing of the other APIs'.
fn assert_reasoning_sent_back(req: &RecordedRequest, api: Api, signature: &str) {
    let body = req.body.clone().unwrap();
    let text = raw(req);
    match api {
        Api::AnthropicMessages => {
            let assistant = body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["role"] == "assistant")
                .expect("assistant turn sent back");
            assert_eq!(assistant["content"][0]["type"], "thinking", "{assistant}");
            assert_eq!(assistant["content"][0]["thinking"], "Think.");
            assert_eq!(assistant["content"][0]["signature"], signature);
            assert!(
                !text.contains("\"encrypted_content\":") && !text.contains("reasoning_content")
            );
        }
        Api::OpenAiResponses => {
            let items: Vec<&Value> = body["input"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["type"] == "reasoning")
                .collect();
            assert_eq!(items.len(), 1, "{text}");
            assert_eq!(items[0]["encrypted_content"], signature);
            assert!(!text.contains("\"signature\"") && !text.contains("reasoning_content"));
        }
        _ => {
            // Chat completions has no signed reasoning: nothing of the
            // other APIs' shapes goes back.
            for foreign in [
                "\"signature\"",
                "\"encrypted_content\":",
                "\"thinking\"",
                "fakesig",
            ] {
                assert!(!text.contains(foreign), "{foreign} in {text}");
            }
        }
    }
}

#[test]
fn plain_and_streamed_answers_with_cache_figures_on_every_api() {
    for api in APIS {
        for streaming in [false, true] {
            let server = strict_server();
            server.push(
                Reply::text("hello there")
                    .with_usage(100, 9)
                    .with_cached_tokens(60)
                    .with_cache_creation_tokens(30)
                    .with_chunk_chars(3),
            );
            let (mut agent, rec) =
                agent_on(server.transport().with_api(api), |c| c.streaming(streaming));
            let out = agent.run_loop("hi").unwrap();
            assert_eq!(out.answer.as_deref(), Some("hello there"), "{api:?}");
            if streaming {
                assert_eq!(streamed_text(&rec.events()), "hello there", "{api:?}");
            }
            let u = out.usage;
            assert_eq!(
                (u.input, u.cached, u.cache_creation, u.output),
                (Some(10), Some(60), Some(30), Some(9)),
                "{api:?} streaming={streaming}: {u:?}"
            );
            assert_eq!(agent.total_usage().cached, Some(60));
            let reqs = server.chat_requests();
            assert_eq!(reqs.len(), 1);
            assert_eq!(reqs[0].api(), Some(api));
            assert_eq!(reqs[0].is_stream(), streaming);
            assert_eq!(reqs[0].system().as_deref(), Some("You are a test agent."));
            assert_clean(&server, api);
        }
    }
}

/// The ids of the `Tokens` events in `events`, in order.
fn response_ids(events: &[pikuri::Event]) -> Vec<Option<String>> {
    events
        .iter()
        .filter_map(|e| match e {
            pikuri::Event::Tokens { response_id, .. } => Some(response_id.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_response_id_is_reported_on_every_api_plain_and_streamed() {
    for api in APIS {
        let prefix = match api {
            Api::AnthropicMessages => "msg_fake_",
            Api::OpenAiResponses => "resp_fake_",
            _ => "chatcmpl-fake-",
        };
        for streaming in [false, true] {
            let server = strict_server();
            server.push(Reply::tool_call("add", json!({"a": 1, "b": 2})));
            server.push(Reply::text("3").with_chunk_chars(1));
            let (mut agent, rec) = agent_on(server.transport().with_api(api), |c| {
                c.streaming(streaming).add_tool(add())
            });
            agent.run_loop("add").unwrap();
            let ids = response_ids(&rec.events());
            assert_eq!(ids.len(), 2, "{api:?} streaming={streaming}");
            for id in &ids {
                let id = id.as_deref().unwrap_or_else(|| panic!("{api:?}: no id"));
                assert!(
                    id.starts_with(prefix),
                    "{api:?} streaming={streaming}: {id}"
                );
            }
            // One id per answer: the two requests' ids differ.
            assert_ne!(ids[0], ids[1], "{api:?} streaming={streaming}");
        }
    }
}

#[test]
fn a_huge_response_id_is_bounded_and_a_missing_one_is_none() {
    let server = FakeServer::start();
    let huge = "x".repeat(100_000);
    let body = json!({
        "id": huge, "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                     "finish_reason": "stop"}]
    });
    server.push(Reply::raw_body(200, "application/json", body.to_string()));
    let no_id = json!({
        "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                     "finish_reason": "stop"}]
    });
    server.push(Reply::raw_body(200, "application/json", no_id.to_string()));
    let (mut agent, rec) = agent_on(server.transport().with_api(Api::ChatCompletions), |c| {
        c.streaming(false)
    });
    agent.run_loop("one").unwrap();
    agent.run_loop("two").unwrap();
    let ids = response_ids(&rec.events());
    let first = ids[0].as_deref().expect("the first answer has an id");
    assert!(
        first.chars().count() <= 101,
        "bounded: {} chars",
        first.len()
    );
    assert!(first.starts_with("xxxx"));
    assert_eq!(ids[1], None, "no id, no invented one");
}

#[test]
fn parallel_tool_calls_with_reasoning_sent_back_on_every_api() {
    for api in APIS {
        for streaming in [false, true] {
            let server = strict_server();
            server.push(
                Reply::tool_calls(vec![
                    ("add", json!({"a": 1, "b": 2})),
                    ("add", json!({"a": 3, "b": 4})),
                ])
                .with_reasoning("Think.")
                .with_signature("sig-1")
                .with_chunk_chars(4),
            );
            server.push(Reply::text("3 and 7"));
            let (mut agent, _) = agent_on(server.transport().with_api(api), |c| {
                c.streaming(streaming).add_tool(add())
            });
            let out = agent.run_loop("add both").unwrap();
            assert_eq!(out.answer.as_deref(), Some("3 and 7"), "{api:?}");
            assert_valid_history(agent.messages());
            let reqs = server.chat_requests();
            assert_eq!(reqs.len(), 2);
            assert_eq!(reqs[0].tool_names(), ["add"]);
            let results: Vec<String> = tool_results(&reqs[1]).into_iter().map(|(_, c)| c).collect();
            assert_eq!(results, ["3", "7"], "{api:?}");
            let calls: Vec<Value> = reqs[1]
                .conversation()
                .iter()
                .filter(|m| m["role"] == "assistant")
                .map(|m| m["tool_calls"].clone())
                .collect();
            assert_eq!(
                calls[0].as_array().map(Vec::len),
                Some(2),
                "{api:?}: {calls:?}"
            );
            // The reasoning is returned on every API.
            let first = agent
                .messages()
                .iter()
                .find(|m| m.role == Role::Assistant)
                .unwrap();
            assert_eq!(first.reasoning.as_deref(), Some("Think."), "{api:?}");
            assert_reasoning_sent_back(&reqs[1], api, "sig-1");
            assert_clean(&server, api);
        }
    }
}

#[test]
fn http_and_mid_stream_errors_are_typed_and_the_next_turn_works_on_every_api() {
    for api in APIS {
        let server = strict_server();
        server.push(Reply::status(400, "bad request: messages"));
        server.push(Reply::text("abcdefgh").error_after(2, "boom"));
        server.push(Reply::text("back"));
        let (mut agent, _) = agent_on(server.transport().with_api(api), |c| c.streaming(true));
        let err = agent.run_loop("one").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Rejected, "{api:?}: {err}");
        assert_eq!(err.status(), Some(400));
        assert_valid_history(agent.messages());
        let err = agent.run_loop("two").unwrap_err();
        assert!(err.to_string().contains("boom"), "{api:?}: {err}");
        assert_valid_history(agent.messages());
        assert!(
            agent.messages().iter().all(|m| m.role != Role::Assistant),
            "{api:?}: no half answer kept"
        );
        let out = agent.run_loop("three").unwrap();
        assert_eq!(out.answer.as_deref(), Some("back"), "{api:?}");
        assert_valid_history(agent.messages());
        assert_clean(&server, api);
    }
}

#[test]
fn a_cancel_mid_stream_leaves_the_next_turn_working_on_every_api() {
    for api in APIS {
        let server = strict_server();
        server.push(Reply::text("this never finishes").hang_after(2));
        let cancel = Cancellable::new();
        let (mut agent, _) = agent_on(server.transport().with_api(api), |c| {
            c.streaming(true).cancellable(cancel.clone())
        });
        let c2 = cancel.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(150));
            c2.cancel();
        });
        let err = agent.run_loop("hello").unwrap_err();
        canceller.join().unwrap();
        assert!(err.is_cancelled(), "{api:?}: {err}");
        assert_eq!(agent.messages().len(), 1, "{api:?}");
        server.push(Reply::text("back"));
        let out = agent.run_loop("again").unwrap();
        assert_eq!(out.answer.as_deref(), Some("back"), "{api:?}");
        assert_valid_history(agent.messages());
        assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    }
}

#[test]
fn a_sub_agent_speaks_the_parents_api() {
    for api in APIS {
        let server = strict_server();
        server.push(Reply::tool_call(
            "agent",
            json!({"name": "helper", "task": "add 1 and 2"}),
        ));
        server.push(Reply::tool_call("add", json!({"a": 1, "b": 2})));
        server.push(Reply::text("it is 3"));
        server.push(Reply::text("the helper says 3"));
        let (mut agent, _) = agent_on(server.transport().with_api(api), |c| {
            c.add_sub_agent_tool(add()).add_extension(
                SubAgents::new(vec![
                    Persona::new("helper", "Adds.", "You add.", 5).with_tools(&["add"]),
                ])
                .unwrap(),
            )
        });
        let out = agent.run_loop("ask the helper").unwrap();
        assert_eq!(out.answer.as_deref(), Some("the helper says 3"), "{api:?}");
        let reqs = server.chat_requests();
        assert_eq!(reqs.len(), 4);
        assert!(reqs.iter().all(|r| r.api() == Some(api)), "{api:?}");
        assert_eq!(reqs[1].system().as_deref(), Some("You add."));
        assert_eq!(reqs[1].tool_names(), ["add"]);
        assert_eq!(tool_results(&reqs[2])[0].1, "3");
        assert_eq!(tool_results(&reqs[3])[0].1, "it is 3");
        assert_valid_history(agent.messages());
        assert_clean(&server, api);
    }
}

#[test]
fn a_denied_call_is_answered_with_the_reason_on_every_api() {
    for api in APIS {
        let server = strict_server();
        server.push(Reply::tool_call("add", json!({"a": 1, "b": 2})).with_id("c1"));
        server.push(Reply::text("ok, not adding"));
        let ran = Arc::new(Mutex::new(0));
        let ran2 = Arc::clone(&ran);
        let counting = FnTool::new(
            "add",
            "Adds.",
            Parameters::builder()
                .required_integer("a", "first")
                .required_integer("b", "second")
                .build(),
            move |_, _| {
                *ran2.lock().unwrap() += 1;
                Ok("3".into())
            },
        );
        let (mut agent, _) = agent_on(server.transport().with_api(api), |c| {
            c.add_tool(counting)
                .approver(|_: &ApprovalRequest| Decision::deny("no sums today"))
        });
        let out = agent.run_loop("add").unwrap();
        assert_eq!(out.answer.as_deref(), Some("ok, not adding"));
        assert_eq!(*ran.lock().unwrap(), 0);
        let results = tool_results(&server.chat_requests()[1]);
        assert_eq!(
            results,
            [(
                "c1".to_string(),
                "Error: not run: denied: no sums today".to_string()
            )],
            "{api:?}"
        );
        assert_clean(&server, api);
    }
}

#[test]
fn compaction_summarizes_on_every_api() {
    for api in APIS {
        let server = strict_server();
        server.push(
            Reply::tool_call("add", json!({"a": 1, "b": 2}))
                .with_reasoning("Think.")
                .with_signature("sig-c"),
        );
        server.push(Reply::text("a1"));
        server.push(Reply::text("a2"));
        server.push(Reply::text("The user asked for a sum: 3."));
        server.push(Reply::text("a3"));
        let (mut agent, _) = agent_on(server.transport().with_api(api), |c| {
            c.add_tool(add())
                .compaction(Compaction::summarize().with_keep_turns(1))
        });
        agent.run_loop("q1").unwrap();
        agent.run_loop("q2").unwrap();
        assert!(agent.compact().unwrap(), "{api:?}");
        assert_valid_history(agent.messages());
        assert_eq!(agent.run_loop("q3").unwrap().answer.as_deref(), Some("a3"));
        let reqs = server.chat_requests();
        assert_eq!(reqs.len(), 5);
        let summarizer = &reqs[3];
        assert_eq!(summarizer.api(), Some(api));
        assert!(summarizer.tool_names().is_empty());
        assert_eq!(
            summarizer.system().as_deref(),
            Some(Compaction::SYSTEM_PROMPT)
        );
        let main = reqs[4].conversation();
        // Anthropic merges the summary and `q2` (both user messages) into
        // one turn of two text blocks: compare the text in order.
        let text: String = main
            .iter()
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("|");
        assert!(
            text.contains(Compaction::SUMMARY_MARKER) && text.contains("a sum: 3."),
            "{api:?}: {text}"
        );
        assert!(!text.contains("q1"), "{api:?}: q1 was summarized: {text}");
        assert!(text.ends_with("q2|a2|q3"), "{api:?}: {text}");
        assert_clean(&server, api);
    }
}

#[test]
fn fallback_to_another_apis_transport_translates_the_history() {
    for (i, from) in APIS.into_iter().enumerate() {
        let to = APIS[(i + 1) % APIS.len()];
        let first = strict_server();
        let second = strict_server();
        // Turn 1 on `from`: a tool round with signed reasoning.
        first.push(
            Reply::tool_call("add", json!({"a": 1, "b": 2}))
                .with_id("c1")
                .with_reasoning("Think.")
                .with_signature("sig-f"),
        );
        first.push(Reply::text("3"));
        // Turn 2: `from` is down; `to` answers.
        first.push(Reply::status(503, "overloaded"));
        second.push(Reply::text("from the fallback"));
        let (mut agent, _) = agent_on(first.transport().with_api(from), |c| {
            c.add_tool(add()).fallback(vec![
                second.transport().with_api(to).with_model("other-model"),
            ])
        });
        agent.run_loop("add").unwrap();
        let out = agent.run_loop("again").unwrap();
        assert_eq!(
            out.answer.as_deref(),
            Some("from the fallback"),
            "{from:?}->{to:?}"
        );
        assert_eq!(agent.transport().api(), to);
        let req = &second.chat_requests()[0];
        assert_eq!(req.api(), Some(to));
        assert_eq!(tool_results(req), [("c1".to_string(), "3".to_string())]);
        assert_no_foreign_reasoning(req, "sig-f");
        assert_valid_history(agent.messages());
        assert_clean(&second, to);
        assert!(first.rejections().is_empty(), "{:?}", first.rejections());
    }
}

/// `req` carries no reasoning, signature or opaque field of another API.
fn assert_no_foreign_reasoning(req: &RecordedRequest, signature: &str) {
    let text = raw(req);
    for foreign in [
        signature,
        "\"signature\"",
        "\"encrypted_content\":",
        "\"thinking\"",
        "reasoning_content",
        "\"type\":\"reasoning\"",
        "Think.",
    ] {
        assert!(
            !text.contains(foreign),
            "{:?}: {foreign} in {text}",
            req.api()
        );
    }
}

pikuri::tool::schema_type! {
    /// A verdict.
    #[derive(PartialEq)]
    struct Verdict {
        /// Whether it is good.
        good: bool,
        /// How sure, 0 to 10.
        score: u8,
    }
}

#[test]
fn structured_output_is_mapped_per_api() {
    for api in APIS {
        for streaming in [false, true] {
            let server = strict_server();
            server.push(Reply::text(r#"{"good": true, "score": 7}"#).with_chunk_chars(5));
            let (mut agent, _) =
                agent_on(server.transport().with_api(api), |c| c.streaming(streaming));
            let typed = agent.run_typed::<Verdict>("judge").unwrap();
            assert_eq!(
                typed.value,
                Verdict {
                    good: true,
                    score: 7
                }
            );
            let body = server.chat_requests()[0].body.clone().unwrap();
            let schema = match api {
                Api::AnthropicMessages => {
                    assert!(body.get("response_format").is_none(), "{body}");
                    assert_eq!(body["output_config"]["format"]["type"], "json_schema");
                    body["output_config"]["format"]["schema"].clone()
                }
                Api::OpenAiResponses => {
                    assert!(body.get("response_format").is_none(), "{body}");
                    assert_eq!(body["text"]["format"]["type"], "json_schema");
                    body["text"]["format"]["schema"].clone()
                }
                _ => body["response_format"]["json_schema"]["schema"].clone(),
            };
            assert_eq!(schema["properties"]["score"]["type"], "integer", "{api:?}");
            assert_clean(&server, api);
        }
    }
}

/// Switch `from` → `to` → `from` in one conversation with `run_loop_with`.
fn switch(from: Api, to: Api) {
    let server = strict_server();
    server.push(
        Reply::tool_call("add", json!({"a": 1, "b": 2}))
            .with_id("c1")
            .with_reasoning("Think.")
            .with_signature("sig-s"),
    );
    server.push(Reply::text("3"));
    server.push(Reply::text("second answer"));
    server.push(Reply::text("third answer"));
    let (mut agent, _) = agent_on(server.transport().with_api(from), |c| c.add_tool(add()));
    agent.run_loop("first").unwrap();
    let other: ChatTransport = server.transport().with_api(to).with_model("other-model");
    let out = agent.run_loop_with("second", other).unwrap();
    assert_eq!(out.answer.as_deref(), Some("second answer"));
    let back = server.transport().with_api(from);
    let out = agent.run_loop_with("third", back).unwrap();
    assert_eq!(out.answer.as_deref(), Some("third answer"));
    assert_valid_history(agent.messages());

    let reqs = server.chat_requests();
    assert_eq!(
        reqs.iter().map(RecordedRequest::api).collect::<Vec<_>>(),
        [Some(from), Some(from), Some(to), Some(from)]
    );
    // The other API's request: the whole conversation, translated; none of
    // the first model's reasoning or signature.
    let conv = reqs[2].conversation();
    let users: Vec<&str> = conv
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(users, ["first", "second"], "{from:?}->{to:?}");
    assert_eq!(
        tool_results(&reqs[2]),
        [("c1".to_string(), "3".to_string())]
    );
    assert_no_foreign_reasoning(&reqs[2], "sig-s");
    // Back on the first API: still a valid conversation of five turns.
    assert_eq!(
        tool_results(&reqs[3]),
        [("c1".to_string(), "3".to_string())]
    );
    assert_clean(&server, from);
}

#[test]
fn switch_chat_and_anthropic() {
    switch(Api::ChatCompletions, Api::AnthropicMessages);
    switch(Api::AnthropicMessages, Api::ChatCompletions);
}

#[test]
fn switch_chat_and_responses() {
    switch(Api::ChatCompletions, Api::OpenAiResponses);
    switch(Api::OpenAiResponses, Api::ChatCompletions);
}

#[test]
fn switch_anthropic_and_responses() {
    switch(Api::AnthropicMessages, Api::OpenAiResponses);
    switch(Api::OpenAiResponses, Api::AnthropicMessages);
}
