use std::time::Duration;

use serde_json::{Map, Value, json};

use super::*;
use crate::protocol::decode::{Completion, Fragment, StreamDecoder};
use crate::protocol::error::DecodeError;
use crate::protocol::request::{Request, ResponseSchema, ToolSpecs};
use crate::protocol::settings::{ModelSettings, ReasoningEffort, ToolChoice};
use crate::{
    Api, ChatTransport, FinishReason, Image, ImageSource, Message, ProviderData, ToolCall, Usage,
};

const BASE: &str = "http://127.0.0.1:9/v1beta";

fn transport() -> ChatTransport {
    ChatTransport::new("gemini-x")
        .with_api(Api::Gemini)
        .with_api_base(BASE)
}

fn encode_full(
    t: &ChatTransport,
    msgs: &[Message],
    tools: &ToolSpecs,
    settings: &ModelSettings,
    schema: Option<&ResponseSchema>,
    extra: &Map<String, Value>,
) -> Value {
    let req = Request {
        trailing_system: Some("note"),
        settings,
        response_schema: schema,
        ..Request::for_test(t, msgs, tools, extra)
    };
    let mut buf = Vec::new();
    write_body(&req, &mut buf).unwrap();
    serde_json::from_slice(&buf).unwrap()
}

fn encode(t: &ChatTransport, msgs: &[Message]) -> Value {
    encode_full(
        t,
        msgs,
        &ToolSpecs::default(),
        &ModelSettings::new(),
        None,
        &Map::new(),
    )
}

/// An answer of Gemini at `BASE` with a signed call (server id `s1`) and
/// an unsigned one without id.
fn signed_answer(endpoint: &str, model: &str) -> Message {
    let mut c1 = ToolCall::new("s1", "calc", r#"{"x":1}"#);
    c1.provider_data = Some(json!({"thoughtSignature": "SIG1", "id": "s1"}));
    let c2 = ToolCall::new("gemini_call_7", "calc", r#"{"x":"#);
    let mut m = Message::assistant_tool_calls("let me see", vec![c1, c2]);
    m.provider_data = Some(ProviderData::new(
        Api::Gemini,
        endpoint,
        model,
        vec![json!({"thoughtSignature": "TEXTSIG"})],
    ));
    m
}

#[test]
fn encodes_a_tool_round_with_signatures_for_the_same_model() {
    let mut result = Message::tool("gemini_call_7", "err");
    result.images.push(Image {
        media_type: "image/png".into(),
        source: ImageSource::Base64("AAAA".into()),
    });
    let msgs = vec![
        Message::user("hi"),
        Message::system("be brief"),
        signed_answer(BASE, "gemini-x"),
        Message::tool("s1", "2"),
        result,
        Message::user("and?"),
    ];
    let body = encode(&transport(), &msgs);
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "sys"}, {"text": "be brief"}]})
    );
    assert!(body.get("model").is_none() && body.get("stream").is_none());
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [
                {"text": "let me see", "thoughtSignature": "TEXTSIG"},
                {"functionCall": {"name": "calc", "args": {"x": 1}, "id": "s1"}, "thoughtSignature": "SIG1"},
                {"functionCall": {"name": "calc", "args": {}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "calc", "response": {"result": "2"}, "id": "s1"}},
                {"functionResponse": {"name": "calc", "response": {"result": "err"}}},
                {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
                {"text": "and?"},
                {"text": "note"},
            ]},
        ])
    );
}

#[test]
fn another_models_signatures_and_ids_are_not_sent() {
    for (endpoint, model) in [
        (BASE, "gemini-other"),
        ("http://elsewhere/v1beta", "gemini-x"),
    ] {
        let msgs = vec![Message::user("hi"), signed_answer(endpoint, model)];
        let body = encode(&transport(), &msgs);
        let parts = &body["contents"][1]["parts"];
        assert_eq!(parts[0], json!({"text": "let me see"}));
        // The first call carries the documented skip value, not SIG1.
        assert_eq!(
            parts[1],
            json!({"functionCall": {"name": "calc", "args": {"x": 1}}, "thoughtSignature": SKIP})
        );
        assert_eq!(
            parts[2],
            json!({"functionCall": {"name": "calc", "args": {}}})
        );
        assert!(!body.to_string().contains("SIG"), "{body}");
    }
}

const SKIP: &str = "skip_thought_signature_validator";

#[test]
fn settings_tools_and_structured_output_map_to_gemini_fields() {
    let tools = ToolSpecs::from_values(&[json!({
        "type": "function",
        "function": {"name": "calc", "description": "adds",
                     "parameters": {"type": "object", "additionalProperties": false}}
    })]);
    let settings = ModelSettings::new()
        .with_temperature(0.5)
        .with_top_p(0.9)
        .with_max_output_tokens(100)
        .with_stop(["END"])
        .with_seed(7)
        .with_tool_choice(ToolChoice::Tool("calc".into()))
        .with_reasoning_effort(ReasoningEffort::Low)
        .with_thinking_budget(512);
    let schema = ResponseSchema {
        name: "answer".into(),
        schema: json!({"type": "object"}),
        strict: true,
    };
    let mut extra = Map::new();
    extra.insert("safetySettings".into(), json!([]));
    let body = encode_full(
        &transport(),
        &[Message::user("hi")],
        &tools,
        &settings,
        Some(&schema),
        &extra,
    );
    assert_eq!(
        body["tools"],
        json!([{"functionDeclarations": [{"name": "calc", "description": "adds",
            "parametersJsonSchema": {"type": "object", "additionalProperties": false}}]}])
    );
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["calc"]}})
    );
    assert_eq!(
        body["generationConfig"],
        json!({
            "temperature": 0.5, "topP": 0.9, "maxOutputTokens": 100,
            "stopSequences": ["END"], "seed": 7,
            "responseMimeType": "application/json", "responseJsonSchema": {"type": "object"},
            "thinkingConfig": {"thinkingBudget": 512, "thinkingLevel": "low", "includeThoughts": true},
        })
    );
    assert_eq!(body["safetySettings"], json!([]));
    // No tools: no tool config, whatever the choice.
    let body = encode_full(
        &transport(),
        &[Message::user("hi")],
        &ToolSpecs::default(),
        &ModelSettings::new().with_tool_choice(ToolChoice::None),
        None,
        &Map::new(),
    );
    assert!(body.get("toolConfig").is_none() && body.get("tools").is_none());
    assert!(body.get("generationConfig").is_none());
}

fn stream(events: &[Value]) -> (Result<Completion, DecodeError>, Vec<String>) {
    let mut d = Decoder::new(false, None);
    let mut seen = Vec::new();
    for e in events {
        d.push_data(&e.to_string(), &mut |f| match f {
            Fragment::Content(t) => seen.push(format!("c:{t}")),
            Fragment::Reasoning(t) => seen.push(format!("r:{t}")),
            Fragment::Usage(u) => seen.push(format!("u:{:?}", u.output)),
        })
        .unwrap();
    }
    (d.finish(), seen)
}

#[test]
fn a_stream_decodes_text_thoughts_calls_and_usage() {
    let chunk = |parts: Value, finish: Option<&str>, usage: Value| {
        json!({"candidates": [{"content": {"role": "model", "parts": parts},
               "finishReason": finish, "index": 0}],
               "usageMetadata": usage, "modelVersion": "gemini-x-001", "responseId": "resp-1"})
    };
    let (c, seen) = stream(&[
        chunk(
            json!([{"text": "think", "thought": true}]),
            None,
            json!({"promptTokenCount": 10}),
        ),
        chunk(
            json!([{"text": "Hel"}]),
            None,
            json!({"promptTokenCount": 10}),
        ),
        chunk(
            json!([{"text": "lo", "thoughtSignature": "TS"},
                   {"functionCall": {"name": "calc", "args": {"a": 1}, "id": "fc1"},
                    "thoughtSignature": "CS"},
                   {"functionCall": {"name": "calc", "args": {"a": 2}}}]),
            Some("STOP"),
            json!({"promptTokenCount": 10, "cachedContentTokenCount": 4,
                   "candidatesTokenCount": 5, "thoughtsTokenCount": 3}),
        ),
        // After the finish reason: ignored.
        chunk(json!([{"text": "late"}]), None, json!({})),
    ]);
    let c = c.unwrap();
    let text: Vec<&str> = seen
        .iter()
        .map(String::as_str)
        .filter(|s| !s.starts_with("u:"))
        .collect();
    assert_eq!(text, ["r:think", "c:Hel", "c:lo"]);
    assert_eq!(seen.last().map(String::as_str), Some("u:Some(8)"));
    assert_eq!(c.message.content, "Hello");
    assert_eq!(c.message.reasoning.as_deref(), Some("think"));
    assert_eq!(c.finish, FinishReason::ToolCalls);
    assert_eq!(c.model.as_deref(), Some("gemini-x-001"));
    assert_eq!(c.id.as_deref(), Some("resp-1"));
    assert_eq!(
        c.usage,
        Some(Usage::from_parts(Some(6), Some(8), Some(4), None, Some(3)))
    );
    let calls = &c.message.tool_calls;
    assert_eq!(
        (calls[0].id.as_str(), calls[0].arguments.as_str()),
        ("fc1", r#"{"a":1}"#)
    );
    assert_eq!(
        calls[0].provider_data,
        Some(json!({"thoughtSignature": "CS", "id": "fc1"}))
    );
    assert!(calls[1].id.starts_with("gemini_call_"));
    assert_eq!(calls[1].provider_data, None);
    let pd = c.message.provider_data.unwrap();
    assert_eq!(
        (pd.api, pd.items),
        (Api::Gemini, vec![json!({"thoughtSignature": "TS"})])
    );
}

#[test]
fn finish_reasons_and_blocked_prompts_map() {
    for (reason, want) in [
        ("STOP", FinishReason::Complete),
        ("MAX_TOKENS", FinishReason::Length),
        ("SAFETY", FinishReason::Filtered),
        ("RECITATION", FinishReason::Filtered),
        ("MALFORMED_FUNCTION_CALL", FinishReason::ServerCut),
        ("OTHER", FinishReason::ServerCut),
    ] {
        let body = json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]});
        let c = parse_response(body.to_string().as_bytes(), false).unwrap();
        assert_eq!(c.finish, want, "{reason}");
    }
    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"},
                         "usageMetadata": {"promptTokenCount": 3}});
    let c = parse_response(blocked.to_string().as_bytes(), false).unwrap();
    assert_eq!(
        (c.finish, c.message.content.as_str()),
        (FinishReason::Filtered, "")
    );
    // A stream that ends before a finish reason is cut.
    let (c, _) = stream(&[json!({"candidates": [{"content": {"parts": [{"text": "x"}]}}]})]);
    assert!(matches!(c, Err(DecodeError::Truncated)));
}

#[test]
fn errors_in_bodies_and_streams_carry_their_status() {
    let err = json!({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}});
    match parse_response(err.to_string().as_bytes(), false) {
        Err(DecodeError::Status { status, message }) => {
            assert_eq!(status, 503);
            assert!(message.contains("overloaded"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let mut d = Decoder::new(false, None);
    let e = d.push_data(&err.to_string(), &mut |_| {}).unwrap_err();
    assert!(
        matches!(e, DecodeError::Status { status: 503, .. }),
        "{e:?}"
    );
    assert!(matches!(
        parse_response(b"not json", false),
        Err(DecodeError::Protocol(_))
    ));
    assert!(matches!(
        parse_response(b"{\"candidates\": 3}", false),
        Err(DecodeError::Protocol(_))
    ));
    // A duplicate id refuses the answer.
    let dup = json!({"candidates": [{"content": {"parts": [
        {"functionCall": {"name": "f", "id": "a"}}, {"functionCall": {"name": "f", "id": "a"}}]},
        "finishReason": "STOP"}]});
    assert!(matches!(
        parse_response(dup.to_string().as_bytes(), false),
        Err(DecodeError::Protocol(m)) if m.contains("duplicate")
    ));
}

#[test]
fn the_retry_delay_is_read_from_retry_info() {
    let body = json!({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}});
    assert_eq!(
        retry_delay(body.to_string().as_bytes()),
        Some(Duration::from_millis(1500))
    );
    for bad in [
        json!({"error": {"details": [{"@type": "x.google.rpc.RetryInfo", "retryDelay": "-1s"}]}}),
        json!({"error": {"details": [{"@type": "x.google.rpc.RetryInfo", "retryDelay": "soon"}]}}),
        json!({"error": {"details": "x"}}),
    ] {
        assert_eq!(retry_delay(bad.to_string().as_bytes()), None, "{bad}");
    }
    // Past what a Duration holds: the longest wait, which the retry cap cuts.
    for huge in ["1e30s", "99999999999999999999s", "infs"] {
        let body = json!({"error": {"details": [
            {"@type": "x.google.rpc.RetryInfo", "retryDelay": huge}]}});
        assert_eq!(
            retry_delay(body.to_string().as_bytes()),
            Some(Duration::MAX),
            "{huge}"
        );
    }
}

#[test]
fn huge_and_negative_usage_figures_are_dropped() {
    let body = json!({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 1e30, "candidatesTokenCount": -1,
                          "thoughtsTokenCount": 2}});
    let c = parse_response(body.to_string().as_bytes(), false).unwrap();
    assert_eq!(
        c.usage,
        Some(Usage::from_parts(None, Some(2), None, None, Some(2)))
    );
}

/// ATTACKS.md, "Cost per event": 100,000 chunks, each a call under its
/// own id or all under one id, decode in one pass (no search over what was
/// seen per chunk): the distinct ones into one answer, the repeated ones
/// refused once, at the end; and 100,000 empty chunks are no progress.
#[test]
fn a_hundred_thousand_chunks_decode_in_one_pass() {
    const N: usize = 100_000;
    let chunk = |id: &str| {
        format!(
            r#"{{"candidates":[{{"content":{{"parts":[{{"functionCall":{{"name":"f","args":{{}},"id":"{id}"}}}}]}}}}]}}"#
        )
    };
    let stop = r#"{"candidates":[{"finishReason":"STOP"}]}"#;
    let mut d = Decoder::new(false, None);
    for i in 0..N {
        d.push_data(&chunk(&format!("c{i}")), &mut |_| {}).unwrap();
    }
    d.push_data(stop, &mut |_| {}).unwrap();
    assert_eq!(d.finish().unwrap().message.tool_calls.len(), N);

    let mut d = Decoder::new(false, None);
    let same = chunk("c");
    for _ in 0..N {
        d.push_data(&same, &mut |_| {}).unwrap();
    }
    d.push_data(stop, &mut |_| {}).unwrap();
    assert!(matches!(d.finish(), Err(DecodeError::Protocol(m)) if m.contains("duplicate")));

    let mut d = Decoder::new(false, None);
    for _ in 0..N {
        d.push_data(
            r#"{"candidates":[{"content":{"parts":[{"text":""}]}}]}"#,
            &mut |_| {},
        )
        .unwrap();
    }
    assert_eq!(d.progress(), 0);
    assert!(!d.is_done());
}
