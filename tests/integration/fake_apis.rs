//! Issue 29 item 8: `FakeServer` speaks Anthropic Messages (`/v1/messages`)
//! and OpenAI Responses (`/v1/responses`) for the same scripted replies as
//! chat completions: driven here over raw HTTP (the agent's decoders for
//! those APIs are not this kit's business), parsing the JSON and SSE.
//! `sdk.rs` checks the same shapes with the official SDKs.

use pikuri::Api;
use pikuri::testing::{Cassette, FakeServer, Recorder, Reply};
use serde_json::{Value, json};

/// POST `body` to `url`; the status and the body text.
fn post(url: &str, body: &Value) -> (u16, String) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut resp = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body.to_string())
        .expect("request sent");
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().expect("body read"))
}

/// The `(event, data)` pairs of an SSE body.
fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut name = String::new();
            let mut data = None;
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(d).ok();
                }
            }
            data.map(|d| (name, d))
        })
        .collect()
}

fn anthropic(content: &Value, stream: bool) -> Value {
    json!({"model": "m", "max_tokens": 64, "stream": stream,
           "messages": [{"role": "user", "content": content}]})
}

fn responses(input: &Value, stream: bool) -> Value {
    json!({"model": "m", "stream": stream, "input": input})
}

/// The reply with everything: reasoning, text, two calls, cache figures.
fn full_reply() -> Reply {
    Reply::tool_calls(vec![("a", json!({"x": 1})), ("b", json!({"y": 2}))])
        .with_text("Calling.")
        .with_reasoning("Think.")
        .with_usage(100, 9)
        .with_cached_tokens(60)
        .with_cache_creation_tokens(30)
        .with_chunk_chars(2)
}

#[test]
fn one_reply_three_wire_formats_non_streamed() {
    let server = FakeServer::start();
    server
        .push(full_reply())
        .push(full_reply())
        .push(full_reply().with_id("c1"));
    let base = server.base_url();

    let (status, text) = post(&format!("{base}/messages"), &anthropic(&json!("q"), false));
    assert_eq!(status, 200, "{text}");
    let m: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(m["type"], "message");
    let kinds: Vec<&str> = m["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["thinking", "text", "tool_use", "tool_use"]);
    assert_eq!(
        m["content"][0]["signature"].as_str().unwrap().len(),
        "fakesig-".len() + 16
    );
    assert_eq!(m["content"][3]["input"], json!({"y": 2}));
    assert_eq!(m["stop_reason"], "tool_use");
    assert_eq!(
        m["usage"],
        json!({"input_tokens": 10, "cache_read_input_tokens": 60,
        "cache_creation_input_tokens": 30, "output_tokens": 9})
    );

    let (status, text) = post(&format!("{base}/responses"), &responses(&json!("q"), false));
    assert_eq!(status, 200, "{text}");
    let r: Value = serde_json::from_str(&text).unwrap();
    let kinds: Vec<&str> = r["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["reasoning", "message", "function_call", "function_call"]
    );
    assert_eq!(
        r["output"][0]["encrypted_content"],
        m["content"][0]["signature"]
    );
    assert_eq!(r["output"][3]["arguments"], "{\"y\":2}");
    assert_eq!(
        r["usage"]["input_tokens_details"],
        json!({"cached_tokens": 60, "cache_write_tokens": 30})
    );

    let (_, text) = post(
        &format!("{base}/chat/completions"),
        &json!({"model": "m", "messages": [{"role": "user", "content": "q"}]}),
    );
    let c: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        c["usage"]["prompt_tokens_details"],
        json!({"cached_tokens": 60, "cache_write_tokens": 30})
    );
    assert_eq!(c["choices"][0]["message"]["tool_calls"][0]["id"], "c1");
    server.assert_all_used();
    let apis: Vec<Option<Api>> = server
        .chat_requests()
        .iter()
        .map(pikuri::testing::RecordedRequest::api)
        .collect();
    assert_eq!(
        apis,
        [
            Some(Api::AnthropicMessages),
            Some(Api::OpenAiResponses),
            Some(Api::ChatCompletions)
        ]
    );
}

#[test]
fn streams_carry_each_apis_events_in_order() {
    let server = FakeServer::start();
    server
        .push(full_reply())
        .push(full_reply().with_signature("sig-1"));
    let base = server.base_url();

    let (_, text) = post(&format!("{base}/messages"), &anthropic(&json!("q"), true));
    let ev = events(&text);
    assert!(
        ev.iter().all(|(name, data)| data["type"] == name.as_str()),
        "{text}"
    );
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(&names[..2], ["message_start", "ping"]);
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    let delta_kinds: Vec<&str> = ev
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["type"].as_str().unwrap())
        .collect();
    for kind in [
        "thinking_delta",
        "signature_delta",
        "text_delta",
        "input_json_delta",
    ] {
        assert!(
            delta_kinds.contains(&kind),
            "{kind} missing: {delta_kinds:?}"
        );
    }
    let json_of = |index: u64| -> String {
        ev.iter()
            .filter(|(n, d)| n == "content_block_delta" && d["index"] == index)
            .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
            .collect()
    };
    assert_eq!(json_of(3), "{\"y\":2}");
    let md = &ev[names.len() - 2].1;
    assert_eq!(md["delta"]["stop_reason"], "tool_use");
    assert_eq!(md["usage"]["output_tokens"], 9);

    let (_, text) = post(&format!("{base}/responses"), &responses(&json!("q"), true));
    let ev = events(&text);
    for (i, (name, data)) in ev.iter().enumerate() {
        assert_eq!(data["type"], name.as_str());
        assert_eq!(data["sequence_number"], i);
    }
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    for name in [
        "response.created",
        "response.output_item.added",
        "response.reasoning_summary_text.delta",
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ] {
        assert!(names.contains(&name), "{name} missing: {names:?}");
    }
    let last = &ev.last().unwrap().1;
    assert_eq!(last["type"], "response.completed");
    assert_eq!(last["response"]["output"][0]["encrypted_content"], "sig-1");
    assert_eq!(last["response"]["usage"]["output_tokens"], 9);
    server.assert_all_used();
}

#[test]
fn faults_and_errors_in_each_api() {
    let server = FakeServer::start();
    server
        .push(Reply::text("abcdefgh").cut_after(3))
        .push(Reply::text("abcdefgh").error_after(3, "boom"))
        .push(Reply::text("abcdefgh").error_after(2, "bang"))
        .push(Reply::status(529, "Overloaded"))
        .push(Reply::status(429, "slow"));
    let base = server.base_url();
    let url = format!("{base}/messages");

    // A cut stream never reaches message_stop. (ureq reports the cut body
    // as an error or a short read; only the events matter.)
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut text = String::new();
    if let Ok(mut resp) = agent
        .post(&url)
        .header("content-type", "application/json")
        .send(anthropic(&json!("q"), true).to_string())
    {
        let _ = std::io::Read::read_to_string(&mut resp.body_mut().as_reader(), &mut text);
    }
    let names: Vec<String> = events(&text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["message_start", "ping", "content_block_start"]);

    let (_, text) = post(&url, &anthropic(&json!("q"), true));
    let ev = events(&text);
    assert_eq!(ev.len(), 4, "{text}");
    assert_eq!(ev[3].0, "error");
    assert_eq!(
        ev[3].1,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "boom"}})
    );

    let (_, text) = post(&format!("{base}/responses"), &responses(&json!("q"), true));
    let names: Vec<String> = events(&text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "error",
            "response.failed"
        ]
    );

    let (status, text) = post(&url, &anthropic(&json!("q"), false));
    assert_eq!(status, 529);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let (status, text) = post(&format!("{base}/responses"), &responses(&json!("q"), false));
    assert_eq!(status, 429);
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["error"]["message"],
        "slow"
    );
    server.assert_all_used();
}

#[test]
fn strict_mode_applies_each_apis_rules_without_consuming_the_reply() {
    let server = FakeServer::start();
    server.push(Reply::text("ok"));
    let base = server.base_url();
    let tool_round = |answer: Value| {
        json!({
            "model": "m", "max_tokens": 64,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                {"role": "user", "content": answer},
            ],
        })
    };
    // Anthropic: a thinking-enabled tool loop without the thinking block.
    let (status, text) = post(
        &format!("{base}/messages"),
        &tool_round(json!([{"type": "tool_result", "tool_use_id": "t1", "content": "1"}])),
    );
    assert_eq!(status, 400);
    let err: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(err["error"]["type"], "invalid_request_error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("thinking block"),
        "{text}"
    );
    // Anthropic: the result answers another call.
    let (status, text) = post(
        &format!("{base}/messages"),
        &tool_round(json!([{"type": "tool_result", "tool_use_id": "zz", "content": "1"}])),
    );
    assert_eq!(status, 400);
    assert!(text.contains("zz"), "{text}");
    // Anthropic: no max_tokens.
    let (status, _) = post(
        &format!("{base}/messages"),
        &json!({"model": "m", "messages": [{"role": "user", "content": "q"}]}),
    );
    assert_eq!(status, 400);
    // Responses: an output for no call.
    let (status, text) = post(
        &format!("{base}/responses"),
        &responses(
            &json!([
                {"role": "user", "content": "q"},
                {"type": "function_call_output", "call_id": "nope", "output": "1"},
            ]),
            false,
        ),
    );
    assert_eq!(status, 400);
    assert!(text.contains("nope"), "{text}");
    assert_eq!(server.rejections().len(), 4);
    assert_eq!(server.remaining(), 1);
    // A valid Responses tool round gets the reply.
    let (status, _) = post(
        &format!("{base}/responses"),
        &responses(
            &json!([
                {"role": "user", "content": "q"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "1"},
            ]),
            false,
        ),
    );
    assert_eq!(status, 200);
    server.assert_all_used();
    // The recorded view reads every API as chat completions.
    let last = server.chat_requests().pop().unwrap();
    assert_eq!(
        last.conversation()[2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "1"})
    );
    assert_eq!(
        last.conversation()[1]["tool_calls"][0]["function"]["name"],
        "f"
    );
    assert_eq!(last.messages().len(), 3);
}

#[test]
fn cassettes_record_and_replay_each_api() {
    let upstream = FakeServer::start();
    upstream.push(full_reply()).push(full_reply());
    let recorder = Recorder::start(&upstream.base_url());
    let a_body = anthropic(&json!("q"), true);
    let r_body = responses(&json!("q"), false);
    let (_, a_recorded) = post(&format!("{}/messages", recorder.base_url()), &a_body);
    let (_, r_recorded) = post(&format!("{}/responses", recorder.base_url()), &r_body);
    let cassette = Cassette::parse(&recorder.cassette().to_json()).unwrap();
    let paths: Vec<&str> = cassette
        .interactions()
        .iter()
        .map(|i| i.path.as_str())
        .collect();
    assert_eq!(paths, ["/v1/messages", "/v1/responses"]);
    assert!(
        cassette.interactions()[0]
            .content_type
            .starts_with("text/event-stream")
    );

    let replay = FakeServer::from_cassette(cassette);
    let (_, a) = post(&format!("{}/messages", replay.base_url()), &a_body);
    let (_, r) = post(&format!("{}/responses", replay.base_url()), &r_body);
    assert_eq!(a, a_recorded);
    assert_eq!(r, r_recorded);
    replay.assert_all_used();
    // Each model request is served once, whatever its API.
    let (status, text) = post(&format!("{}/messages", replay.base_url()), &a_body);
    assert_eq!(status, 500);
    assert!(
        text.contains("all 1 recorded for this route are used"),
        "{text}"
    );
    assert_eq!(replay.mismatches().len(), 1);
}

#[test]
fn garbage_adds_only_comments_and_unknown_events() {
    let server = FakeServer::start();
    for _ in 0..2 {
        server.push(Reply::text("abcdefgh"));
        server.push(Reply::text("abcdefgh").with_garbage());
    }
    let base = server.base_url();
    for (path, body) in [
        ("messages", anthropic(&json!("q"), true)),
        ("responses", responses(&json!("q"), true)),
    ] {
        let (_, clean) = post(&format!("{base}/{path}"), &body);
        let (_, noisy) = post(&format!("{base}/{path}"), &body);
        assert!(
            noisy.contains("\n: FakeServer") || noisy.starts_with(": FakeServer"),
            "{noisy}"
        );
        let known: Vec<(String, Value)> = events(&noisy)
            .into_iter()
            .filter(|(n, _)| !n.contains("fake_unknown"))
            .collect();
        let unknown = events(&noisy).len() - known.len();
        assert!(unknown > 3, "{noisy}");
        // Same events once the unknown ones are skipped (ids and sequence
        // numbers aside, which follow the request count).
        let shape =
            |ev: Vec<(String, Value)>| -> Vec<String> { ev.into_iter().map(|(n, _)| n).collect() };
        assert_eq!(shape(known), shape(events(&clean)));
    }
    server.assert_all_used();
}

#[test]
fn redacted_thinking_and_count_tokens() {
    let server = FakeServer::start();
    let reply = || {
        Reply::text("ok")
            .with_redacted_thinking("opaque-data")
            .with_reasoning("Visible.")
    };
    server.push(reply()).push(reply()).push(reply());
    let base = server.base_url();
    let (_, text) = post(&format!("{base}/messages"), &anthropic(&json!("q"), false));
    let m: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        m["content"][0],
        json!({"type": "redacted_thinking", "data": "opaque-data"})
    );
    assert_eq!(m["content"][1]["type"], "thinking");
    let (_, text) = post(&format!("{base}/messages"), &anthropic(&json!("q"), true));
    let starts: Vec<Value> = events(&text)
        .into_iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| d["content_block"].clone())
        .collect();
    assert_eq!(
        starts[0],
        json!({"type": "redacted_thinking", "data": "opaque-data"})
    );
    let (_, text) = post(&format!("{base}/responses"), &responses(&json!("q"), true));
    let last = events(&text).pop().unwrap().1;
    let output = &last["response"]["output"];
    assert_eq!(output[0]["summary"], json!([]));
    assert_eq!(output[0]["encrypted_content"], "opaque-data");
    assert_eq!(output[1]["summary"][0]["text"], "Visible.");
    server.assert_all_used();

    let (status, text) = post(
        &format!("{base}/messages/count_tokens"),
        &json!({"model": "m", "messages": [{"role": "user", "content": "q"}]}),
    );
    assert_eq!(status, 200);
    let n = serde_json::from_str::<Value>(&text).unwrap()["input_tokens"].as_u64();
    assert!(n.is_some_and(|n| n > 0), "{text}");
    // A probe, not a model request: no reply consumed, no request number.
    assert_eq!(server.chat_requests().len(), 3);
}
