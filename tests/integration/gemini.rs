//! Issue 37: Google Gemini's own API (`generateContent`,
//! `streamGenerateContent?alt=sse`) through the public API, on the strict
//! `FakeServer`: answers, tools, thought signatures, structured output,
//! images, usage, finish reasons, errors, retries, fallback, switches to
//! and from the other APIs, and the decoder attacks.

use std::time::Duration;

use pikuri::listeners::InMemoryEventList;
use pikuri::structured::StructuredOutput;
use pikuri::testing::{FakeServer, RecordedRequest, Reply};
use pikuri::{
    Agent, Api, ChatTransport, ErrorKind, Event, FinishReason, Image, Message, ModelSettings,
    ReasoningEffort, ToolChoice,
};
use serde_json::{Value, json};

use crate::util::{add, agent_on, assert_valid_history, fast_http, streamed_text, strict_server};

fn gemini(server: &FakeServer) -> ChatTransport {
    server.transport().with_api(Api::Gemini)
}

fn assert_clean(server: &FakeServer) {
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    server.assert_all_used();
}

/// The waits of the `Retrying` events `rec` saw, in milliseconds.
fn retry_waits(rec: &InMemoryEventList) -> Vec<u64> {
    rec.events()
        .iter()
        .filter_map(|e| match e {
            Event::Retrying { wait_ms, .. } => Some(*wait_ms),
            _ => None,
        })
        .collect()
}

fn body(req: &RecordedRequest) -> Value {
    req.body.clone().expect("a JSON body")
}

/// The parts of the model turns of a Gemini request.
fn model_parts(req: &RecordedRequest) -> Vec<Value> {
    body(req)["contents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["role"] == "model")
        .flat_map(|c| c["parts"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn plain_and_streamed_answers_go_to_generate_content() {
    for streaming in [false, true] {
        let server = strict_server();
        server.push(
            Reply::text("Hello from Gemini.")
                .with_chunk_chars(4)
                .with_garbage(),
        );
        let (mut agent, rec) = agent_on(gemini(&server).with_api_key("g-key"), |c| {
            c.streaming(streaming)
        });
        let out = agent.run_loop("hi").unwrap();
        assert_eq!(out.answer.as_deref(), Some("Hello from Gemini."));
        assert_eq!(out.finish, FinishReason::Complete);
        let req = &server.chat_requests()[0];
        let method = if streaming {
            ":streamGenerateContent"
        } else {
            ":generateContent"
        };
        assert!(
            req.path.ends_with(&format!(
                "/models/{}{method}{}",
                server.transport().model().unwrap(),
                if streaming { "?alt=sse" } else { "" }
            )),
            "{}",
            req.path
        );
        assert_eq!(req.api(), Some(Api::Gemini));
        assert_eq!(req.is_stream(), streaming);
        assert_eq!(req.header("x-goog-api-key"), Some("g-key"));
        assert_eq!(req.header("authorization"), None);
        assert_eq!(req.system().as_deref(), Some("You are a test agent."));
        if streaming {
            assert_eq!(streamed_text(&rec.events()), "Hello from Gemini.");
        }
        assert_clean(&server);
    }
}

#[test]
fn parallel_tool_calls_round_trip_their_ids_and_thought_signatures() {
    for streaming in [false, true] {
        let server = strict_server();
        // One call the server named (`fc-1`), one it did not.
        server.push(
            Reply::tool_calls(vec![
                ("add", json!({"a": 1, "b": 2})),
                ("add", json!({"a": 3, "b": 4})),
            ])
            .with_reasoning("Two sums.")
            .with_signature("sig-g"),
        );
        server.push(Reply::text("3 and 7"));
        let (mut agent, _) = agent_on(gemini(&server), |c| c.streaming(streaming).add_tool(add()));
        let out = agent.run_loop("sums").unwrap();
        assert_eq!(out.answer.as_deref(), Some("3 and 7"));
        let answer = agent
            .messages()
            .iter()
            .find(|m| !m.tool_calls.is_empty())
            .unwrap();
        assert_eq!(answer.reasoning.as_deref(), Some("Two sums."));
        let ids: Vec<&str> = answer.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert!(
            ids[0] != ids[1] && ids.iter().all(|i| i.starts_with("gemini_call_")),
            "{ids:?}"
        );
        let reqs = server.chat_requests();
        let parts = model_parts(&reqs[1]);
        assert_eq!(parts[0]["functionCall"]["args"], json!({"a": 1, "b": 2}));
        assert_eq!(parts[0]["thoughtSignature"], "sig-g");
        assert!(parts[1].get("thoughtSignature").is_none(), "{parts:?}");
        // The made-up ids never reach Gemini; results go by name, in order.
        assert!(
            !reqs[1].raw_body.contains("gemini_call_"),
            "{}",
            reqs[1].raw_body
        );
        let results: Vec<(String, String)> = reqs[1]
            .conversation()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap().into(),
                    m["content"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(
            results,
            [("add".into(), "3".into()), ("add".into(), "7".into())]
        );
        assert_valid_history(agent.messages());
        assert_clean(&server);
    }
}

#[test]
fn a_call_id_the_server_gave_is_kept_and_answered() {
    let server = strict_server();
    server.push(Reply::tool_call("add", json!({"a": 2, "b": 2})).with_id("fc-1"));
    server.push(Reply::text("4"));
    let (mut agent, _) = agent_on(gemini(&server), |c| c.add_tool(add()));
    agent.run_loop("2+2").unwrap();
    assert_eq!(agent.messages()[1].tool_calls[0].id, "fc-1");
    let b = body(&server.chat_requests()[1]);
    let contents = b["contents"].as_array().unwrap();
    assert_eq!(contents[1]["parts"][0]["functionCall"]["id"], "fc-1");
    assert_eq!(
        contents[2]["parts"][0]["functionResponse"],
        json!({"name": "add", "id": "fc-1", "response": {"result": "4"}})
    );
    assert_clean(&server);
}

/// Gemini → `to` → Gemini in one conversation: the other API gets the
/// whole conversation and none of Gemini's signatures; back on Gemini
/// (another model first) the signatures go only to the model that wrote
/// them.
fn switch_from_gemini(to: Api) {
    let server = strict_server();
    server.push(
        Reply::tool_call("add", json!({"a": 1, "b": 2}))
            .with_reasoning("Think.")
            .with_signature("sig-gem"),
    );
    server.push(Reply::text("3").with_signature("sig-text"));
    server.push(Reply::text("second answer"));
    server.push(Reply::text("third answer"));
    server.push(Reply::text("fourth answer"));
    let (mut agent, _) = agent_on(gemini(&server), |c| c.add_tool(add()));
    agent.run_loop("first").unwrap();
    let other = server.transport().with_api(to).with_model("other-model");
    agent.run_loop_with("second", other).unwrap();
    let gemini_other = gemini(&server).with_model("gemini-other");
    agent.run_loop_with("third", gemini_other).unwrap();
    agent.run_loop_with("fourth", gemini(&server)).unwrap();
    assert_valid_history(agent.messages());
    let reqs = server.chat_requests();
    assert_eq!(reqs[2].api(), Some(to));
    for r in [&reqs[2], &reqs[3]] {
        assert!(
            !r.raw_body.contains("sig-gem") && !r.raw_body.contains("sig-text"),
            "{}",
            r.raw_body
        );
        let users: Vec<String> = r
            .conversation()
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str().map(str::to_string))
            .collect();
        assert_eq!(users[..2], ["first", "second"]);
    }
    // Another Gemini model: the documented skip value on the call.
    assert_eq!(
        model_parts(&reqs[3])[0]["thoughtSignature"],
        "skip_thought_signature_validator"
    );
    // The model that signed: its signatures, on the call and the text.
    let parts = model_parts(&reqs[4]);
    assert_eq!(parts[0]["thoughtSignature"], "sig-gem");
    assert_eq!(
        parts[1],
        json!({"text": "3", "thoughtSignature": "sig-text"})
    );
    assert_clean(&server);
}

/// `from` → Gemini → `from`: Gemini gets the other API's conversation,
/// its calls without ids and with the skip value; back on `from`, a valid
/// conversation.
fn switch_to_gemini(from: Api) {
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
    let out = agent.run_loop_with("second", gemini(&server)).unwrap();
    assert_eq!(out.answer.as_deref(), Some("second answer"));
    let out = agent
        .run_loop_with("third", server.transport().with_api(from))
        .unwrap();
    assert_eq!(out.answer.as_deref(), Some("third answer"));
    assert_valid_history(agent.messages());
    let reqs = server.chat_requests();
    assert_eq!(reqs[2].api(), Some(Api::Gemini));
    assert!(!reqs[2].raw_body.contains("sig-s") && !reqs[2].raw_body.contains("\"c1\""));
    let parts = model_parts(&reqs[2]);
    assert_eq!(
        parts[0]["functionCall"],
        json!({"name": "add", "args": {"a": 1, "b": 2}})
    );
    assert_eq!(
        parts[0]["thoughtSignature"],
        "skip_thought_signature_validator"
    );
    assert_eq!(reqs[3].api(), Some(from));
    assert_clean(&server);
}

#[test]
fn a_switch_from_and_to_each_other_api_keeps_signatures_home() {
    for api in [
        Api::ChatCompletions,
        Api::AnthropicMessages,
        Api::OpenAiResponses,
    ] {
        switch_from_gemini(api);
        switch_to_gemini(api);
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
fn structured_output_with_tools_uses_response_json_schema() {
    for streaming in [false, true] {
        let server = strict_server();
        server.push(Reply::tool_call("add", json!({"a": 3, "b": 4})));
        server.push(Reply::text(r#"{"good": true, "score": 7}"#).with_chunk_chars(5));
        // Gemini takes a response schema together with tools: the tool
        // rounds are constrained too.
        let both = StructuredOutput::default().with_constrained_tool_rounds(true);
        let (mut agent, _) = agent_on(gemini(&server), |c| {
            c.streaming(streaming)
                .add_tool(add())
                .structured_output(both)
        });
        let typed = agent.run_typed::<Verdict>("judge").unwrap();
        assert_eq!(
            typed.value,
            Verdict {
                good: true,
                score: 7
            }
        );
        for req in server.chat_requests() {
            let b = body(&req);
            let config = &b["generationConfig"];
            assert_eq!(config["responseMimeType"], "application/json");
            assert_eq!(
                config["responseJsonSchema"]["properties"]["score"]["type"],
                "integer"
            );
            assert_eq!(b["tools"][0]["functionDeclarations"][0]["name"], "add");
            assert!(b["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"].is_object());
        }
        assert_clean(&server);
    }
}

#[test]
fn settings_map_to_generation_and_tool_config() {
    let server = strict_server();
    server.push(Reply::text("ok"));
    let settings = ModelSettings::new()
        .with_temperature(0.3)
        .with_top_p(0.8)
        .with_max_output_tokens(256)
        .with_stop(["END"])
        .with_seed(11)
        .with_tool_choice(ToolChoice::Required)
        .with_reasoning_effort(ReasoningEffort::High);
    let (mut agent, _) = agent_on(gemini(&server), |c| c.add_tool(add()).settings(settings));
    agent.run_loop("go").unwrap();
    let b = body(&server.chat_requests()[0]);
    assert_eq!(
        b["generationConfig"],
        json!({"temperature": 0.3, "topP": 0.8, "maxOutputTokens": 256, "stopSequences": ["END"],
               "seed": 11, "thinkingConfig": {"thinkingLevel": "high", "includeThoughts": true}})
    );
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    assert_clean(&server);
    // Gemini has no switch for parallel calls: refused before sending.
    let serial = ModelSettings::new().with_parallel_tool_calls(false);
    let (mut agent, _) = agent_on(gemini(&server), |c| c.add_tool(add()).settings(serial));
    let err = agent.run_loop("go").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(err.to_string().contains("parallel_tool_calls") && err.to_string().contains("Gemini"));
    assert_eq!(server.chat_requests().len(), 1);
}

#[test]
fn images_go_as_inline_data() {
    let server = strict_server();
    server.push(Reply::text("a red pixel"));
    let (mut agent, _) = agent_on(gemini(&server), |c| c);
    let png =
        Image::from_bytes(&[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0]).unwrap();
    agent
        .run_loop_message(Message::user_with_images("what is it?", vec![png]))
        .unwrap();
    let b = body(&server.chat_requests()[0]);
    let parts = &b["contents"][0]["parts"];
    assert_eq!(parts[0], json!({"text": "what is it?"}));
    assert_eq!(parts[1]["inlineData"]["mimeType"], "image/png");
    assert!(
        parts[1]["inlineData"]["data"]
            .as_str()
            .unwrap()
            .starts_with("iVBORw0KGgo")
    );
    assert_clean(&server);
}

#[test]
fn usage_counts_cached_and_thought_tokens() {
    for streaming in [false, true] {
        let server = strict_server();
        server.push(
            Reply::text("ok")
                .with_reasoning("hmm")
                .with_usage(1000, 40)
                .with_cached_tokens(600),
        );
        let (mut agent, _) = agent_on(gemini(&server), |c| c.streaming(streaming));
        let out = agent.run_loop("go").unwrap();
        let u = out.usage;
        assert_eq!(
            (u.input, u.cached, u.output, u.thinking),
            (Some(400), Some(600), Some(40), Some(10))
        );
        assert_eq!(agent.messages()[1].reasoning.as_deref(), Some("hmm"));
        assert_clean(&server);
    }
}

#[test]
fn each_finish_reason_maps() {
    for streaming in [false, true] {
        for (scripted, want) in [
            ("stop", FinishReason::Complete),
            ("length", FinishReason::Length),
            ("SAFETY", FinishReason::Filtered),
            ("RECITATION", FinishReason::Filtered),
            ("prompt_blocked", FinishReason::Filtered),
            ("OTHER", FinishReason::ServerCut),
        ] {
            let server = strict_server();
            server.push(Reply::text("partial").with_finish_reason(scripted));
            let (mut agent, _) = agent_on(gemini(&server), |c| c.streaming(streaming));
            let out = agent.run_loop("go").unwrap();
            assert_eq!(out.finish, want, "{scripted} streaming={streaming}");
        }
    }
}

#[test]
fn errors_mid_stream_are_typed_and_the_next_turn_works() {
    let server = strict_server();
    server.push(
        Reply::text("Hello there")
            .with_chunk_chars(2)
            .error_after(2, "overloaded"),
    );
    // A cut stream (no finish reason) is a truncation.
    server.push(Reply::text("Hello there").with_chunk_chars(2).cut_after(2));
    server.push(Reply::text("recovered"));
    let (mut agent, _) = agent_on(gemini(&server), |c| c.streaming(true));
    let err = agent.run_loop("go").unwrap_err();
    match &err {
        pikuri::Error::Http {
            status, message, ..
        } => {
            assert_eq!(*status, 503);
            assert!(message.contains("overloaded"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let err = agent.run_loop("again").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Truncated, "{err}");
    let out = agent.run_loop("once more").unwrap();
    assert_eq!(out.answer.as_deref(), Some("recovered"));
    assert_valid_history(agent.messages());
}

#[test]
fn rate_limits_and_unavailable_are_retried_with_the_servers_hint() {
    let server = strict_server();
    let retry_info = json!({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}]}});
    server.push(Reply::raw_body(
        429,
        "application/json",
        retry_info.to_string(),
    ));
    server.push(Reply::status(503, "The model is overloaded.").with_retry_after(0));
    server.push(Reply::text("finally"));
    let (mut agent, rec) = agent_on(gemini(&server), |c| {
        c.http(
            fast_http()
                .with_max_retries(3)
                .with_retry_base(Duration::from_secs(30)),
        )
    });
    let out = agent.run_loop("go").unwrap();
    assert_eq!(out.answer.as_deref(), Some("finally"));
    let waits = retry_waits(&rec);
    // The body's RetryInfo, then the header: never the 30 s backoff.
    assert_eq!(waits, [50, 0]);
    // The error shows Gemini's status name.
    let server2 = strict_server();
    server2.push(Reply::status(400, "bad field"));
    let (mut agent, _) = agent_on(gemini(&server2), |c| c);
    let err = agent.run_loop("go").unwrap_err();
    assert!(err.to_string().contains("bad field"), "{err}");
}

#[test]
fn a_failing_gemini_falls_back_to_another_api() {
    let server = strict_server();
    server.push(Reply::status(503, "unavailable"));
    server.push(Reply::text("from the fallback"));
    let (mut agent, _) = agent_on(gemini(&server), |c| {
        c.add_fallback(server.transport().with_api(Api::AnthropicMessages))
    });
    let out = agent.run_loop("go").unwrap();
    assert_eq!(out.answer.as_deref(), Some("from the fallback"));
    let apis: Vec<_> = server
        .chat_requests()
        .iter()
        .map(RecordedRequest::api)
        .collect();
    assert_eq!(apis, [Some(Api::Gemini), Some(Api::AnthropicMessages)]);
}

/// The decoder attacks of ATTACKS.md: garbage, truncated and endless
/// streams, huge numbers and strings, duplicate ids.
#[test]
fn hostile_streams_are_refused_or_bounded() {
    let done = |parts: Value| json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]});
    let cases: Vec<(String, &str)> = vec![
        ("data: {not json\n\n".into(), "not a Gemini answer"),
        (
            sse(&[json!({"candidates": [{"content": {"parts": [{"text": "cut"}]}}]})]),
            "truncated",
        ),
        (
            sse(&[done(
                json!([{"functionCall": {"name": "add", "args": {}, "id": "x"}},
                              {"functionCall": {"name": "add", "args": {}, "id": "x"}}]),
            )]),
            "duplicate tool call id",
        ),
        (
            sse(&[done(json!([{"functionCall": {"args": {}}}]))]),
            "has no name",
        ),
    ];
    for (raw, want) in cases {
        let server = FakeServer::start();
        server.push(Reply::raw_sse(raw.clone()));
        let (mut agent, _) = agent_on(gemini(&server), |c| c.add_tool(add()));
        let err = agent.run_loop("go").unwrap_err();
        assert!(
            err.to_string()
                .to_lowercase()
                .contains(&want.to_lowercase()),
            "{raw}: {err}"
        );
        assert_eq!(agent.messages().len(), 1, "no half answer kept");
    }
    // Huge numbers are dropped from usage; a huge model name is bounded.
    let server = FakeServer::start();
    let huge = "m".repeat(100_000);
    server.push(Reply::raw_sse(sse(&[json!({
        "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 1e300, "candidatesTokenCount": u64::MAX},
        "modelVersion": huge,
    })])));
    let (mut agent, _) = agent_on(gemini(&server), |c| c);
    let out = agent.run_loop("go").unwrap();
    assert_eq!(out.answer.as_deref(), Some("ok"));
    assert_eq!((out.usage.input, out.usage.output), (None, None));
    assert!(agent.messages()[1].model.as_ref().unwrap().chars().count() <= 101);
    // An endless stream of chunks that carry nothing ends at the body cap.
    let server = FakeServer::start();
    let empty = format!(
        "data: {}\n\n",
        json!({"candidates": [{"content": {"parts": []}}]})
    );
    server.push(Reply::raw_sse(empty.repeat(20_000)));
    let mut agent = Agent::builder(gemini(&server))
        .http(
            fast_http()
                .with_max_retries(0)
                .with_max_body_bytes(64 * 1024),
        )
        .build()
        .unwrap();
    let err = agent.run_loop("go").unwrap_err();
    assert!(err.to_string().contains("exceeds"), "{err}");
}

/// A Gemini session recorded through `Recorder` replays from its cassette:
/// Gemini names the model only in the path, and the replaying server's
/// transport names the recorded one, so the same agent run is served
/// again, plain and streamed, with no mismatch.
#[test]
fn a_recorded_gemini_session_replays_from_its_cassette() {
    use pikuri::testing::{Cassette, Recorder};
    for streaming in [false, true] {
        let upstream = FakeServer::start();
        upstream.set_model_id("gemini-rec-1");
        upstream.push(Reply::tool_call("add", serde_json::json!({"a": 2, "b": 3})));
        upstream.push(Reply::text("5"));
        let recorder = Recorder::start(&upstream.base_url());
        let transport = ChatTransport::new("gemini-rec-1")
            .with_api_base(recorder.base_url())
            .with_api(Api::Gemini);
        let (mut agent, _) = agent_on(transport, |c| c.streaming(streaming).add_tool(add()));
        let first = agent.run_loop("2+3?").unwrap();
        let cassette = Cassette::parse(&recorder.cassette().to_json()).unwrap();

        let replay = FakeServer::from_cassette(cassette);
        let (mut again, _) = agent_on(gemini(&replay), |c| c.streaming(streaming).add_tool(add()));
        let second = again.run_loop("2+3?").unwrap();
        assert_eq!(second.answer, first.answer, "streaming={streaming}");
        assert_eq!(second.answer.as_deref(), Some("5"));
        assert!(replay.mismatches().is_empty(), "{:?}", replay.mismatches());
        replay.assert_all_used();
    }
}

/// `data:` lines of `chunks`, for `Reply::raw_sse`.
fn sse(chunks: &[Value]) -> String {
    chunks.iter().fold(String::new(), |mut out, c| {
        out.push_str("data: ");
        out.push_str(&c.to_string());
        out.push_str("\n\n");
        out
    })
}

/// ATTACKS.md, "Other servers": a `RetryInfo` delay that is negative or
/// not a number falls back to the backoff; one past what a `Duration`
/// holds is a long wait, cut to the retry cap (as a huge `Retry-After`
/// is), never the short backoff that would hammer a server asking for
/// time.
#[test]
fn absurd_retry_info_delays_fall_back_or_hit_the_cap() {
    let server = strict_server();
    let delays = ["-5s", "NaNs", "soon", "1e30s", "99999999999999999999s"];
    for delay in delays {
        let body = json!({"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]}});
        server.push(Reply::raw_body(429, "application/json", body.to_string()));
    }
    server.push(Reply::text("finally"));
    let (mut agent, rec) = agent_on(gemini(&server), |c| {
        c.http(
            fast_http()
                .with_max_retries(5)
                .with_retry_base(Duration::from_millis(1))
                .with_retry_cap(Duration::from_millis(40)),
        )
    });
    let out = agent.run_loop("go").unwrap();
    assert_eq!(out.answer.as_deref(), Some("finally"));
    let waits = retry_waits(&rec);
    assert_eq!(waits.len(), delays.len(), "{waits:?}");
    // The backoff of 1 ms base (at most 8 ms by the third attempt) for
    // the three that do not read; the cap for the two huge ones.
    assert!(waits[..3].iter().all(|w| *w < 40), "{waits:?}");
    assert_eq!(waits[3..], [40, 40], "{waits:?}");
    assert_valid_history(agent.messages());
    assert_clean(&server);
}

/// ATTACKS.md, "Streams and decoders": a safety block after some text,
/// a candidate with no parts and one with no content at all end the turn
/// with a typed finish, keep a history Gemini accepts again, and the next
/// turn works.
#[test]
fn a_safety_block_mid_stream_and_empty_candidates_keep_the_history_valid() {
    let server = strict_server();
    server.push(Reply::raw_sse(sse(&[
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Here is how to"}]}}]}),
        json!({"candidates": [{"finishReason": "SAFETY", "index": 0}]}),
    ])));
    server.push(Reply::raw_sse(sse(&[json!({
        "candidates": [{"content": {"role": "model"}, "finishReason": "STOP"}]
    })])));
    server.push(Reply::raw_sse(sse(&[json!({
        "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": "12", "candidatesTokenCount": -3}
    })])));
    server.push(Reply::text("recovered"));
    let (mut agent, _) = agent_on(gemini(&server), |c| c.streaming(true));
    let out = agent.run_loop("how?").unwrap();
    assert_eq!(out.finish, FinishReason::Filtered);
    let out = agent.run_loop("and now?").unwrap();
    assert_eq!(out.answer.as_deref().unwrap_or(""), "");
    let out = agent.run_loop("still?").unwrap();
    assert_eq!(out.answer.as_deref().unwrap_or(""), "");
    // A string and a negative number are not token counts.
    assert_eq!((out.usage.input, out.usage.output), (None, None));
    let out = agent.run_loop("once more").unwrap();
    assert_eq!(out.answer.as_deref(), Some("recovered"));
    assert_valid_history(agent.messages());
    // Every request, the last one with the empty answers in its history,
    // passed the strict server.
    assert_clean(&server);
}

/// ATTACKS.md, "Ids and indices": two calls under one id in two chunks of
/// one stream refuse the answer as two in one chunk do, and nothing of it
/// is kept; calls without ids get distinct ones, which never go back to
/// Gemini.
#[test]
fn a_call_id_repeated_across_chunks_is_refused_and_the_next_turn_works() {
    let call = |id: &str| {
        json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "add", "args": {"a": 1, "b": 2}, "id": id}}]}}]})
    };
    let stop = json!({"candidates": [{"finishReason": "STOP"}]});
    let server = strict_server();
    server.push(Reply::raw_sse(sse(&[call("c1"), call("c1"), stop.clone()])));
    let unnamed = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "add", "args": {"a": 1, "b": 2}}},
        {"functionCall": {"name": "add", "args": {"a": 3, "b": 4}}}]}}]});
    server.push(Reply::raw_sse(sse(&[unnamed, stop])));
    server.push(Reply::text("3 and 7"));
    let (mut agent, _) = agent_on(gemini(&server), |c| c.streaming(true).add_tool(add()));
    let err = agent.run_loop("add twice").unwrap_err();
    assert!(err.to_string().contains("duplicate tool call id"), "{err}");
    assert_eq!(agent.messages().len(), 1, "nothing of the refused answer");
    let out = agent.run_loop("add twice").unwrap();
    assert_eq!(out.answer.as_deref(), Some("3 and 7"));
    let ids: Vec<&str> = agent.messages()[2]
        .tool_calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    // The made-up ids stayed home: the calls went without them.
    let last = server.chat_requests().pop().unwrap();
    for part in model_parts(&last) {
        if let Some(call) = part.get("functionCall") {
            assert!(call.get("id").is_none(), "{call}");
        }
    }
    assert_valid_history(agent.messages());
    assert_clean(&server);
}

/// ATTACKS.md, "Streams and decoders": chunks that carry nothing (an
/// empty text, a candidate without content, usage repeated, a member of
/// another shape) are not progress: a stream of them ends at the idle
/// bound, as on the other APIs (`decoder_rules.rs`), and the next turn
/// works.
#[test]
fn a_stream_of_empty_chunks_ends_at_the_idle_bound() {
    let server = FakeServer::start();
    let mut chunks =
        vec![json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}}]})];
    for _ in 0..200 {
        chunks
            .push(json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}}]}));
        chunks.push(json!({"candidates": [{"index": 0}]}));
        chunks.push(json!({"usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}}));
        chunks.push(json!({"somethingNew": {"x": 1}}));
    }
    chunks.push(json!({"candidates": [{"finishReason": "STOP"}]}));
    server.push(Reply::raw_sse(sse(&chunks)).with_chunk_delay(Duration::from_millis(20)));
    server.push(Reply::text("next"));
    let (mut agent, _) = agent_on(gemini(&server), |c| {
        c.streaming(true).http(
            fast_http()
                .with_max_retries(0)
                .with_idle_timeout(Duration::from_secs(1)),
        )
    });
    let err = agent.run_loop("hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err:?}");
    assert_valid_history(agent.messages());
    assert_eq!(agent.messages().len(), 1, "nothing of the cut answer");
    assert_eq!(
        agent.run_loop("again").unwrap().answer.as_deref(),
        Some("next")
    );
}

/// ATTACKS.md, "Streams and decoders": an error inside a Gemini stream is
/// typed by what it stands for, as the same failure as an HTTP status is
/// (a rate limit, a server error, an overload; Gemini's numeric `code`,
/// its `status` name, or a code given as a string), so a fallback takes
/// over; a huge status is bounded in the error.
#[test]
fn in_stream_errors_are_typed_as_their_status_and_fall_back() {
    let cases = [
        (
            json!({"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}),
            ErrorKind::RateLimit,
        ),
        (
            json!({"code": 500, "message": "boom", "status": "INTERNAL"}),
            ErrorKind::Server,
        ),
        (
            json!({"code": 503, "message": "busy", "status": "UNAVAILABLE"}),
            ErrorKind::Server,
        ),
        (
            json!({"message": "quota", "status": "RESOURCE_EXHAUSTED"}),
            ErrorKind::RateLimit,
        ),
        (
            json!({"code": "429", "message": "quota"}),
            ErrorKind::RateLimit,
        ),
        (
            json!({"code": 500, "message": "x", "status": "S".repeat(20_000)}),
            ErrorKind::Server,
        ),
    ];
    for (error, kind) in cases {
        let partial =
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Par"}]}}]});
        let raw = sse(&[partial, json!({ "error": error })]);
        // Alone: the typed error, bounded, nothing kept.
        let server = FakeServer::start();
        server.push(Reply::raw_sse(raw.clone()));
        let (mut agent, _) = agent_on(gemini(&server), |c| c.streaming(true));
        let err = agent.run_loop("Hi").unwrap_err();
        assert_eq!(err.kind(), kind, "{error}: {err:?}");
        assert!(
            err.to_string().len() < 1_500,
            "{} bytes",
            err.to_string().len()
        );
        assert_eq!(agent.messages().len(), 1);
        // With a fallback: the backup answers.
        let primary = FakeServer::start();
        primary.push(Reply::raw_sse(raw));
        let backup = strict_server();
        backup.push(Reply::text("From the backup."));
        let (mut agent, _) = agent_on(gemini(&primary), |c| {
            c.streaming(true)
                .add_fallback(gemini(&backup).with_model("backup"))
        });
        let out = agent
            .run_loop("Hi")
            .unwrap_or_else(|e| panic!("{error}: {e:?}"));
        assert_eq!(out.answer.as_deref(), Some("From the backup."));
        assert_clean(&backup);
    }
    // A cut stream's error names no end event Gemini does not have.
    let server = FakeServer::start();
    server.push(Reply::raw_sse(sse(&[
        json!({"candidates": [{"content": {"parts": [{"text": "cut"}]}}]}),
    ])));
    let (mut agent, _) = agent_on(gemini(&server), |c| c.streaming(true));
    let err = agent.run_loop("Hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Truncated);
    assert!(!err.to_string().contains("[DONE]"), "{err}");
}

/// ATTACKS.md, "Ids and indices" on signatures: a fallback to another
/// Gemini model on the same endpoint, in the middle of a tool round, sends
/// the first model's call without its signature and id (the documented
/// skip value instead, which the other model accepts), and the answer to
/// it without the id; back on the first model, its own signature and id
/// go again.
#[test]
fn a_fallback_to_another_gemini_model_sends_none_of_the_first_ones_signatures() {
    let server = strict_server();
    server.push(
        Reply::tool_call("add", json!({"a": 2, "b": 2}))
            .with_id("fc-1")
            .with_signature("sig-a"),
    );
    server.push(Reply::status(503, "overloaded"));
    server.push(Reply::text("4"));
    server.push(Reply::text("still 4"));
    let (mut agent, _) = agent_on(gemini(&server), |c| {
        c.add_tool(add())
            .add_fallback(gemini(&server).with_model("gemini-other"))
    });
    assert_eq!(agent.run_loop("2+2").unwrap().answer.as_deref(), Some("4"));
    let reqs = server.chat_requests();
    assert_eq!(reqs.len(), 3);
    assert!(
        reqs[2].path.contains("/models/gemini-other:"),
        "{}",
        reqs[2].path
    );
    let call = &model_parts(&reqs[2])[0];
    assert_eq!(call["thoughtSignature"], "skip_thought_signature_validator");
    assert!(call["functionCall"].get("id").is_none(), "{call}");
    assert!(!reqs[2].raw_body.contains("sig-a"), "{}", reqs[2].raw_body);
    let contents = body(&reqs[2])["contents"].clone();
    assert!(
        contents[2]["parts"][0]["functionResponse"]
            .get("id")
            .is_none(),
        "{contents}"
    );
    // The agent stays on the fallback; back on the first model (the host
    // switches), its own signature and id go again.
    assert_eq!(
        agent
            .run_loop_with("sure?", gemini(&server))
            .unwrap()
            .answer
            .as_deref(),
        Some("still 4")
    );
    let last = server.chat_requests().pop().unwrap();
    assert!(!last.path.contains("gemini-other"), "{}", last.path);
    let call = &model_parts(&last)[0];
    assert_eq!(call["thoughtSignature"], "sig-a");
    assert_eq!(call["functionCall"]["id"], "fc-1");
    assert_valid_history(agent.messages());
    assert_clean(&server);
}

/// Gemini 3 refuses a call of the current turn whose step's first call has
/// no signature (the strict server checks it for `gemini-3*` models). A
/// server that signed only the second call of a step (a quirk, or calls
/// joined from chunks) gets the first sent with the documented skip value,
/// the second with its own signature, and the turn goes on.
#[test]
fn a_step_signed_on_its_second_call_only_is_accepted_by_gemini_3() {
    let server = strict_server();
    server.push(Reply::raw_sse(sse(&[
        json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "add", "args": {"a": 1, "b": 2}}},
            {"functionCall": {"name": "add", "args": {"a": 3, "b": 4}}, "thoughtSignature": "sig-2"}]}}]}),
        json!({"candidates": [{"finishReason": "STOP"}]}),
    ])));
    server.push(Reply::text("3 and 7"));
    let transport = gemini(&server).with_model("gemini-3-pro-preview");
    let (mut agent, _) = agent_on(transport, |c| c.streaming(true).add_tool(add()));
    let out = agent.run_loop("two sums").unwrap();
    assert_eq!(out.answer.as_deref(), Some("3 and 7"));
    let parts = model_parts(&server.chat_requests()[1]);
    assert_eq!(
        parts[0]["thoughtSignature"],
        "skip_thought_signature_validator"
    );
    assert_eq!(parts[1]["thoughtSignature"], "sig-2");
    assert_valid_history(agent.messages());
    assert_clean(&server);
}
