//! Issue 28, class 6: tool-call arguments the crate refuses (nested 100,000
//! deep, a lone surrogate escape, cut off) never poison the history. The
//! model is told its call failed; the history keeps `{}`; every later
//! request is one a strict server (FakeServer's strict mode, which parses
//! each call's arguments as llama.cpp does) accepts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, History, Message, ToolCall};
use serde_json::Value;

use crate::util::assert_valid_history;

/// An `echo` tool and how many times it ran.
fn echo() -> (FnTool, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&runs);
    let params = Parameters::builder()
        .required_string("text", "Text")
        .build();
    let tool = FnTool::new("echo", "Echoes its text.", params, move |args, _| {
        r.fetch_add(1, Ordering::SeqCst);
        Ok(args["text"].as_str().unwrap_or_default().to_string())
    });
    (tool, runs)
}

/// Arguments parsed as a strict server does: one JSON object.
fn parses_as_object(arguments: &str) -> bool {
    serde_json::from_str::<Value>(arguments).is_ok_and(|v| v.is_object())
}

/// Every call's arguments in every recorded chat request parse as a JSON
/// object.
fn assert_requests_resendable(server: &FakeServer) {
    for (n, req) in server.chat_requests().iter().enumerate() {
        for m in req.messages() {
            for c in m["tool_calls"].as_array().into_iter().flatten() {
                let args = c["function"]["arguments"].as_str().expect("a string");
                assert!(
                    parses_as_object(args),
                    "request {n}: {}",
                    &args[..args.len().min(60)]
                );
            }
        }
    }
}

fn deep(levels: usize) -> String {
    format!(
        "{{\"text\":{}\"x\"{}}}",
        "[".repeat(levels),
        "]".repeat(levels)
    )
}

/// The tool message answering the only call of request `n`'s last
/// assistant message, and that call's arguments as sent.
fn sent_call(server: &FakeServer, n: usize) -> (String, String) {
    let msgs = server.chat_requests()[n].messages();
    let call = msgs
        .iter()
        .rev()
        .find_map(|m| m["tool_calls"].as_array().map(|c| c[0].clone()))
        .expect("a call");
    let result = msgs.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    (
        call["function"]["arguments"].as_str().unwrap().to_string(),
        result,
    )
}

#[test]
fn refused_arguments_are_observations_and_the_history_keeps_json() {
    for streaming in [false, true] {
        let server = FakeServer::start();
        // Big pieces: the 200 KB arguments in a few hundred chunks.
        server.push(Reply::raw_tool_call("echo", &deep(100_000)).with_chunk_chars(1_000));
        server.push(Reply::raw_tool_call("echo", r#"{"text":"\ud800"}"#));
        server.push(Reply::raw_tool_call("echo", r#"{"\udc00":1,"text":"a"}"#));
        server.push(Reply::raw_tool_call("echo", r#"{"text":"ok"}"#));
        server.push(Reply::text("done"));
        server.push(Reply::text("again"));
        let (tool, runs) = echo();
        let mut agent = Agent::builder(server.transport())
            .streaming(streaming)
            .add_tool(tool)
            .build()
            .unwrap();
        let out = agent.run_loop("echo things").unwrap();
        assert_eq!(out.answer.as_deref(), Some("done"), "streaming={streaming}");
        // Only the last, valid call ran.
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(server.rejections().is_empty(), "{:?}", server.rejections());

        // The model was told each call failed, and what it sent is quoted.
        let (args, result) = sent_call(&server, 1);
        assert_eq!(args, "{}");
        assert!(
            result.starts_with("Error: the arguments are not valid JSON (recursion limit"),
            "{}",
            &result[..result.len().min(200)]
        );
        assert!(
            result.len() < 1_000,
            "the quote is bounded: {}",
            result.len()
        );
        let (args, result) = sent_call(&server, 2);
        assert_eq!(args, "{}");
        assert!(
            result.starts_with("Error: the arguments are not valid JSON"),
            "{result}"
        );
        assert!(result.contains(r#"{"text":"\ud800"}"#), "{result}");
        let (args, result) = sent_call(&server, 3);
        assert_eq!(args, "{}");
        assert!(result.starts_with("Error:"), "{result}");
        let (args, result) = sent_call(&server, 4);
        assert_eq!((args.as_str(), result.as_str()), (r#"{"text":"ok"}"#, "ok"));
        assert_requests_resendable(&server);

        // The history holds JSON any server parses, and is valid.
        let messages = agent.messages();
        assert_valid_history(messages);
        for c in messages.iter().flat_map(|m| &m.tool_calls) {
            assert!(
                parses_as_object(&c.arguments),
                "{}",
                &c.arguments[..c.arguments.len().min(60)]
            );
        }
        assert!(History::new(messages.to_vec()).is_ok());

        // The next turn works.
        let out = agent.run_loop("once more").unwrap();
        assert_eq!(out.answer.as_deref(), Some("again"));
        assert_requests_resendable(&server);
        assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    }
}

#[test]
fn a_loaded_history_with_refused_arguments_is_sent_with_empty_objects() {
    let server = FakeServer::start();
    server.push(Reply::text("fine"));
    let (tool, _) = echo();
    let mut agent = Agent::builder(server.transport())
        .add_tool(tool)
        .build()
        .unwrap();
    // A history written elsewhere (another program, an older version).
    let history = History::new(vec![
        Message::user("hi"),
        Message::assistant_tool_calls("", vec![ToolCall::new("c1", "echo", deep(100_000))]),
        Message::tool("c1", "Error: bad"),
        Message::assistant_tool_calls(
            "",
            vec![ToolCall::new("c2", "echo", r#"{"text":"\ud800"}"#)],
        ),
        Message::tool("c2", "Error: bad"),
        Message::assistant("ok"),
    ])
    .unwrap();
    agent.load_history(history).unwrap();
    assert_eq!(
        agent.run_loop("next").unwrap().answer.as_deref(),
        Some("fine")
    );
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    let msgs = server.chat_requests()[0].messages();
    let sent: Vec<&str> = msgs
        .iter()
        .filter_map(|m| m["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(sent, ["{}", "{}"]);
}
