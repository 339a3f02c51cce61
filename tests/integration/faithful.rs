//! Issue 29, item 4: chat completions, faithfully. Provider fields
//! (Gemini's thought signatures, OpenRouter's `reasoning_details`) are kept
//! in the history and sent back only to the API, endpoint and model that
//! issued them; cached tokens are accounted.

use std::fmt::Write as _;

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Api, ErrorKind, History, Image, Message, Role};
use serde_json::{Value, json};

use crate::util::{agent_with, assert_valid_history, echo_tool};

/// An SSE body of `chunks` (each a `choices[0].delta`), a finish reason
/// and `[DONE]`.
fn sse(deltas: &[Value], finish: &str) -> String {
    let mut body = String::new();
    for d in deltas {
        let chunk = json!({"object": "chat.completion.chunk", "model": "gemini-3-pro-preview",
                           "choices": [{"index": 0, "delta": d, "finish_reason": null}]});
        let _ = write!(body, "data: {chunk}\n\n");
    }
    let end = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]});
    let _ = write!(body, "data: {end}\n\ndata: [DONE]\n\n");
    body
}

/// The assistant message with tool calls in a recorded request.
fn assistant_with_calls(messages: &[Value]) -> &Value {
    messages
        .iter()
        .find(|m| m["role"] == "assistant" && m.get("tool_calls").is_some())
        .expect("an assistant message with tool calls")
}

/// Gemini 3 over its OpenAI-compatible endpoint: the thought signature of
/// a streamed tool call goes back with that call in the next request (Gemini
/// refuses the history without it), is kept in the history and its export,
/// and is dropped once the conversation moves to another model.
#[test]
fn gemini_thought_signatures_round_trip_and_stay_with_their_model() {
    let server = FakeServer::start();
    let signed = json!({"google": {"thought_signature": "c2lnLTE="}});
    server.push(Reply::raw_sse(sse(
        &[
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                "extra_content": signed,
                "function": {"name": "echo", "arguments": ""}}]}),
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"text\":\"hi\"}"}}]}),
            // A second, parallel call without a signature (Gemini signs
            // only the first).
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                "function": {"name": "echo", "arguments": "{\"text\":\"ho\"}"}}]}),
        ],
        "tool_calls",
    )));
    server.push(Reply::text("done"));
    let (mut agent, _) = agent_with(&server, |c| c.add_tool(echo_tool()));
    agent.run_loop("sign please").unwrap();

    // Kept in the history, with the request's endpoint and model.
    let assistant = &agent.messages()[1];
    let data = assistant.provider_data.as_ref().expect("provider data");
    assert_eq!(data.api, Api::ChatCompletions);
    assert_eq!(data.endpoint, server.base_url());
    assert_eq!(Some(data.model.as_str()), server.transport().model());
    assert_eq!(
        assistant.tool_calls[0].provider_data,
        Some(json!({"extra_content": signed}))
    );
    assert_eq!(assistant.tool_calls[1].provider_data, None);

    // Sent back, verbatim, with the call it belongs to.
    let second = server.chat_requests()[1].messages();
    let calls = &assistant_with_calls(&second)["tool_calls"];
    assert_eq!(calls[0]["extra_content"], signed);
    assert_eq!(calls[0]["function"]["arguments"], "{\"text\":\"hi\"}");
    assert!(calls[1].get("extra_content").is_none());

    // The export keeps it; an agent restored from it sends it again.
    let exported = agent.export_history().to_json();
    let restored = History::parse(&exported).unwrap();
    assert_eq!(restored.messages()[1], agent.messages()[1]);

    // Same model, next turn: still sent.
    server.push(Reply::text("again"));
    agent.run_loop("more").unwrap();
    let third = server.chat_requests()[2].messages();
    assert_eq!(
        assistant_with_calls(&third)["tool_calls"][0]["extra_content"],
        signed
    );

    // Another model: never sent (it cannot verify another model's
    // signature), the calls themselves still are.
    server.push(Reply::text("switched"));
    let other = server.transport().with_model("other-model");
    agent.run_loop_with("and now?", other).unwrap();
    let fourth = server.chat_requests()[3].messages();
    let calls = &assistant_with_calls(&fourth)["tool_calls"];
    assert_eq!(calls[0]["id"], "call_a");
    assert!(calls[0].get("extra_content").is_none(), "{calls}");
    assert_valid_history(agent.messages());
}

/// OpenRouter's `reasoning_details`: streamed deltas accumulated in order
/// into the message, echoed to the same model, dropped for another model
/// and for another API base with the same model name.
#[test]
fn openrouter_reasoning_details_accumulate_and_stay_with_their_model() {
    let server = FakeServer::start();
    let d1 = json!({"type": "reasoning.text", "text": "Let me ", "index": 0, "format": "anthropic-claude-v1"});
    let d2 = json!({"type": "reasoning.text", "text": "think.", "index": 0, "signature": "sig"});
    let d3 = json!({"type": "reasoning.encrypted", "data": "b3BhcXVl", "index": 1});
    server.push(Reply::raw_sse(sse(
        &[
            json!({"role": "assistant", "reasoning": "Let me ", "reasoning_details": [d1]}),
            json!({"reasoning": "think.", "reasoning_details": [d2, d3]}),
            json!({"content": "Hello."}),
        ],
        "stop",
    )));
    server.push(Reply::text("fine"));
    let (mut agent, _) = agent_with(&server, |c| c);
    agent.run_loop("hi").unwrap();
    let m = &agent.messages()[1];
    assert_eq!(m.reasoning.as_deref(), Some("Let me think."));
    let items = &m.provider_data.as_ref().expect("provider data").items;
    assert_eq!(items, &[json!({"reasoning_details": [d1, d2, d3]})]);

    agent.run_loop("again").unwrap();
    let second = server.chat_requests()[1].messages();
    let assistant = second.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["reasoning_details"], json!([d1, d2, d3]));
    assert_eq!(assistant["content"], "Hello.");

    // Another model: dropped.
    server.push(Reply::text("x"));
    agent
        .run_loop_with("x", server.transport().with_model("openai/gpt-5"))
        .unwrap();
    let third = server.chat_requests()[2].messages();
    let assistant = third.iter().find(|m| m["content"] == "Hello.").unwrap();
    assert!(assistant.get("reasoning_details").is_none(), "{assistant}");

    // The same model name behind another API base is another provider:
    // dropped too. (The fake server answers chats under any path.)
    server.push(Reply::text("y"));
    let elsewhere = server
        .transport()
        .with_api_base(format!("{}/gateway/v1", server.root_url()));
    agent.run_loop_with("y", elsewhere).unwrap();
    let fourth = server.chat_requests()[3].messages();
    let assistant = fourth.iter().find(|m| m["content"] == "Hello.").unwrap();
    assert!(assistant.get("reasoning_details").is_none(), "{assistant}");
}

/// A non-streamed answer keeps the same fields, and cached prompt tokens
/// are split out of `prompt_tokens` into `Usage::cached`.
#[test]
fn non_streamed_provider_fields_and_cached_tokens() {
    let server = FakeServer::start();
    let body = json!({
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "reasoning_details": [{"type": "reasoning.summary", "summary": "s"}],
            "tool_calls": [{"id": "c1", "type": "function",
                "extra_content": {"google": {"thought_signature": "AAA="}},
                "function": {"name": "echo", "arguments": "{\"text\":\"a\"}"}}]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5,
                  "prompt_tokens_details": {"cached_tokens": 80}}
    });
    server.push(Reply::raw_body(200, "application/json", body.to_string()));
    server.push(Reply::text("ok"));
    let (mut agent, _) = agent_with(&server, |c| c.add_tool(echo_tool()).streaming(false));
    agent.run_loop("go").unwrap();
    let m = &agent.messages()[1];
    let usage = m.usage.unwrap();
    assert_eq!((usage.input, usage.cached), (Some(20), Some(80)));
    let second = server.chat_requests()[1].messages();
    let assistant = assistant_with_calls(&second);
    assert_eq!(assistant["reasoning_details"][0]["summary"], "s");
    assert_eq!(
        assistant["tool_calls"][0]["extra_content"]["google"]["thought_signature"],
        "AAA="
    );
}

/// `prompt_cache_key` goes through the request's extra fields, as documented
/// on `Configurator::request_field`.
#[test]
fn prompt_cache_key_is_a_request_field() {
    let server = FakeServer::start();
    server.push(Reply::text("ok"));
    let (mut agent, _) = agent_with(&server, |c| {
        c.request_field("prompt_cache_key", json!("user-42"))
    });
    agent.run_loop("hi").unwrap();
    let req = &server.chat_requests()[0];
    assert_eq!(req.body.as_ref().unwrap()["prompt_cache_key"], "user-42");
}

// Issue 29, item 6: images in.

/// The smallest GIF (1x1), as a file would hold it.
const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;";

/// A user message with an image from a file and one by URL: content parts
/// on the wire (text, then `image_url`s), kept in the history and its
/// export, sent again on the next turn.
#[test]
fn user_images_from_file_and_url_go_as_content_parts() {
    let dir = std::env::temp_dir().join(format!("pikuri-img-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pixel.gif");
    std::fs::write(&path, GIF).unwrap();
    let from_file = Image::from_file(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(from_file.media_type, "image/gif");
    let by_url = Image::from_url("https://example.com/cat.webp").unwrap();

    let server = FakeServer::start();
    server.push(Reply::text("A pixel and a cat."));
    server.push(Reply::text("Yes."));
    let (mut agent, _) = agent_with(&server, |c| c);
    let question = Message::user_with_images("What are these?", vec![from_file, by_url]);
    agent.run_loop_message(question.clone()).unwrap();
    assert_eq!(agent.messages()[0], question);

    let sent = &server.chat_requests()[0].messages()[1];
    assert_eq!(sent["role"], "user");
    let parts = sent["content"].as_array().unwrap();
    assert_eq!(parts[0], json!({"type": "text", "text": "What are these?"}));
    let data_url = parts[1]["image_url"]["url"].as_str().unwrap();
    assert!(
        data_url.starts_with("data:image/gif;base64,R0lGODlhAQABAIAAAP"),
        "{data_url}"
    );
    assert_eq!(
        parts[2],
        json!({"type": "image_url", "image_url": {"url": "https://example.com/cat.webp"}})
    );

    // Export and import keep the images; the restored agent sends them.
    let saved = agent.export_history().to_json();
    let (mut restored, _) = agent_with(&server, |c| c);
    restored
        .load_history(History::parse(&saved).unwrap())
        .unwrap();
    assert_eq!(restored.messages()[0].images, question.images);
    restored.run_loop("Sure?").unwrap();
    assert_eq!(
        server.chat_requests()[1].messages()[1]["content"][1]["image_url"]["url"],
        data_url
    );
}

/// A tool attaches an image to its result: the tool message keeps it in
/// the history, and on the wire it follows the batch's tool messages as a
/// user message (chat completions takes only text in a tool message).
#[test]
fn a_tool_attaches_an_image_to_its_result() {
    let server = FakeServer::start();
    server.push(Reply::tool_calls(vec![
        ("screenshot", json!({})),
        ("echo", json!({"text": "x"})),
    ]));
    server.push(Reply::text("I see it."));
    let shot = FnTool::new(
        "screenshot",
        "Shows the screen.",
        Parameters::empty(),
        |_, cx| {
            cx.attach_image(Image::from_bytes(GIF)?);
            Ok("Here is the screen.".to_string())
        },
    );
    let (mut agent, _) = agent_with(&server, |c| c.add_tool(shot).add_tool(echo_tool()));
    agent.run_loop("Look.").unwrap();
    let tool_msg = &agent.messages()[2];
    assert_eq!(tool_msg.role, Role::Tool);
    assert_eq!(tool_msg.content, "Here is the screen.");
    assert_eq!(tool_msg.images.len(), 1);
    assert!(agent.messages()[3].images.is_empty());

    let sent = server.chat_requests()[1].messages();
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert_eq!(sent[3]["content"], "Here is the screen.");
    let parts = sent[5]["content"].as_array().unwrap();
    let call_id = tool_msg.tool_call_id.as_deref().unwrap();
    assert_eq!(
        parts[0]["text"],
        format!("Images from tool call {call_id}:")
    );
    assert!(
        parts[1]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/gif;base64,")
    );
    assert_valid_history(agent.messages());
}

/// A model without vision: its error is `ErrorKind::ImageUnsupported`, the
/// history keeps the question, and a turn without images works.
#[test]
fn a_model_that_refuses_images_is_a_typed_error() {
    let server = FakeServer::start();
    // What llama-server b11434 answers without a vision projector: a 500,
    // which must not be retried.
    server.push(Reply::status(
        500,
        "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj",
    ));
    server.push(Reply::text("Text only, then."));
    let (mut agent, _) = agent_with(&server, |c| c);
    let err = agent
        .run_loop_message(Message::user_with_images(
            "What is it?",
            vec![Image::from_bytes(GIF).unwrap()],
        ))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ImageUnsupported, "{err:?}");
    assert_eq!(err.status(), Some(500));
    assert_eq!(server.chat_requests().len(), 1, "not retried");
    agent.run_loop("Describe a cat instead.").unwrap();
}

/// Bad input: an image alone is a question; a message of another role, or
/// one with neither text nor images, is refused before any request.
#[test]
fn run_loop_message_checks_its_message() {
    let server = FakeServer::start();
    server.push(Reply::text("A pixel."));
    let (mut agent, _) = agent_with(&server, |c| c);
    for bad in [Message::assistant("hi"), Message::user("  ")] {
        assert_eq!(
            agent.run_loop_message(bad).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }
    assert!(server.chat_requests().is_empty());
    agent
        .run_loop_message(Message::user_with_images(
            "",
            vec![Image::from_bytes(GIF).unwrap()],
        ))
        .unwrap();
    let parts = server.chat_requests()[0].messages()[1]["content"].clone();
    assert_eq!(parts.as_array().unwrap().len(), 1, "{parts}");
    assert_eq!(parts[0]["type"], "image_url");
}

// Issue 29, item 7: the history format.

/// A file in today's format (version 1, before images and provider data)
/// loads, resumes, and is written back byte for byte: a conversation
/// without the new fields keeps version 1, readable by older versions.
#[test]
fn a_version_1_history_file_still_loads() {
    let saved = include_str!("../fixtures/history_v1.json");
    let history = History::parse(saved).unwrap();
    assert_eq!(history.messages().len(), 5);
    assert_eq!(history.messages()[1].usage.unwrap().cached, Some(64));
    assert_eq!(history.to_json(), saved.trim_end());

    let server = FakeServer::start();
    server.push(Reply::text("Yes."));
    let (mut agent, _) = agent_with(&server, |c| c);
    agent.load_history(history).unwrap();
    agent.run_loop("Sure?").unwrap();
    assert_eq!(server.chat_requests()[0].messages().len(), 7);
}

/// Images and provider data are written as version 2 and read back equal;
/// a version from the future and images where no API takes them are
/// refused.
#[test]
fn version_2_keeps_images_and_provider_data() {
    let mut assistant =
        Message::assistant_tool_calls("", vec![pikuri::ToolCall::new("c1", "echo", "{}")]);
    assistant.tool_calls[0].provider_data =
        Some(json!({"extra_content": {"google": {"thought_signature": "AAA="}}}));
    assistant.provider_data = Some(pikuri::ProviderData::new(
        Api::ChatCompletions,
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "gemini-3-pro-preview",
        vec![json!({"reasoning_details": [{"type": "reasoning.text", "text": "hm"}]})],
    ));
    let mut tool = Message::tool("c1", "seen");
    tool.images = vec![Image::from_bytes(GIF).unwrap()];
    let messages = vec![
        Message::user_with_images(
            "look",
            vec![Image::from_url("https://example.com/a.png").unwrap()],
        ),
        assistant,
        tool,
    ];
    let history = History::new(messages).unwrap();
    let json = history.to_json();
    let value: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["version"], 2);
    assert_eq!(
        value["messages"][1]["provider_data"]["api"],
        "chat_completions"
    );
    assert_eq!(History::parse(&json).unwrap(), history);

    let future = json.replacen("\"version\": 2", "\"version\": 3", 1);
    assert_eq!(
        History::parse(&future).unwrap_err().kind(),
        ErrorKind::History
    );
    let mut on_assistant = Message::assistant("a picture");
    on_assistant.images = vec![Image::from_bytes(GIF).unwrap()];
    assert!(History::new(vec![Message::user("q"), on_assistant]).is_err());
    let broken = json.replace("R0lGOD", "R0lG<>");
    assert!(History::parse(&broken).is_err());
}
