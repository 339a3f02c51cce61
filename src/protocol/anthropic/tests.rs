use serde_json::{Map, Value, json};

use super::*;
use crate::protocol::decode::{Completion, Fragment, StreamDecoder};
use crate::protocol::error::DecodeError;
use crate::protocol::request::{Request, ToolSpecs};
use crate::{Api, ChatTransport, Image, ImageSource, Message, ProviderData, ToolCall, Usage};

const BASE: &str = "http://127.0.0.1:9/v1";

fn transport() -> ChatTransport {
    ChatTransport::new("claude")
        .with_api(Api::AnthropicMessages)
        .with_api_base(BASE)
}

fn encode(t: &ChatTransport, msgs: &[Message], extra: &Map<String, Value>) -> Value {
    encode_with(t, msgs, extra, None, &ToolSpecs::default())
}

fn encode_with(
    t: &ChatTransport,
    msgs: &[Message],
    extra: &Map<String, Value>,
    note: Option<&str>,
    tools: &ToolSpecs,
) -> Value {
    let req = Request {
        trailing_system: note,
        prompt_caching: t.prompt_caching(),
        ..Request::for_test(t, msgs, tools, extra)
    };
    let mut buf = Vec::new();
    write_body(&req, &mut buf);
    serde_json::from_slice(&buf).unwrap()
}

fn thinking_pd(endpoint: &str, model: &str) -> ProviderData {
    ProviderData::new(
        Api::AnthropicMessages,
        endpoint,
        model,
        vec![json!({"type":"thinking","thinking":"hmm","signature":"sig"})],
    )
}

#[test]
fn encodes_a_tool_round_with_merged_results() {
    let mut call = Message::assistant_tool_calls(
        "",
        vec![
            ToolCall::new("t1", "calc", r#"{"x":1}"#),
            ToolCall::new("t2", "calc", r#"{"x":"#),
        ],
    );
    call.reasoning = Some("hmm".into());
    call.provider_data = Some(thinking_pd(BASE, "claude"));
    let mut result = Message::tool("t2", "err");
    result.images.push(Image {
        media_type: "image/png".into(),
        source: ImageSource::Base64("AAAA".into()),
    });
    let msgs = vec![
        Message::user("hi"),
        call,
        Message::tool("t1", "2"),
        result,
        Message::user("and?"),
        Message::system("be brief"),
    ];
    let v = encode(&transport(), &msgs, &Map::new());
    assert_eq!(v["model"], "claude");
    assert_eq!(v["max_tokens"], DEFAULT_MAX_TOKENS);
    assert_eq!(v["stream"], true);
    assert_eq!(
        v["system"],
        json!([{"type":"text","text":"sys"},
               {"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}])
    );
    let m = v["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(
        m[0],
        json!({"role":"user","content":[{"type":"text","text":"hi"}]})
    );
    assert_eq!(
        m[1],
        json!({"role":"assistant","content":[
            {"type":"thinking","thinking":"hmm","signature":"sig"},
            {"type":"tool_use","id":"t1","name":"calc","input":{"x":1}},
            {"type":"tool_use","id":"t2","name":"calc","input":{}}]})
    );
    assert_eq!(
        m[2],
        json!({"role":"user","content":[
            {"type":"tool_result","tool_use_id":"t1","content":"2"},
            {"type":"tool_result","tool_use_id":"t2","content":[
                {"type":"text","text":"err"},
                {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
            {"type":"text","text":"and?","cache_control":{"type":"ephemeral"}}]})
    );
    assert!(v.get("tools").is_none());
}

#[test]
fn thinking_goes_back_only_to_its_endpoint_and_model() {
    let mut a = Message::assistant("ok");
    a.reasoning = Some("hmm".into());
    a.provider_data = Some(thinking_pd(BASE, "other-model"));
    let msgs = vec![Message::user("q"), a.clone()];
    let v = encode(&transport(), &msgs, &Map::new());
    assert_eq!(
        v["messages"][1]["content"],
        json!([{"type":"text","text":"ok","cache_control":{"type":"ephemeral"}}])
    );
    a.provider_data = Some(thinking_pd("http://elsewhere/v1", "claude"));
    let v = encode(&transport(), &[Message::user("q"), a], &Map::new());
    assert_eq!(v["messages"][1]["content"].as_array().unwrap().len(), 1);
}

#[test]
fn caching_marks_tools_system_and_end_and_can_be_turned_off() {
    let tools = ToolSpecs::from_values(&[
        json!({"type":"function","function":{"name":"a","description":"A","parameters":{"type":"object"}}}),
        json!({"type":"function","function":{"name":"b","description":"B","parameters":{"type":"object"}}}),
    ]);
    let msgs = vec![Message::user("q")];
    let v = encode_with(&transport(), &msgs, &Map::new(), Some("note"), &tools);
    assert_eq!(
        v["tools"],
        json!([{"name":"a","description":"A","input_schema":{"type":"object"}},
               {"name":"b","description":"B","input_schema":{"type":"object"},
                "cache_control":{"type":"ephemeral"}}])
    );
    assert_eq!(
        v["system"],
        json!([{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}])
    );
    // The per-request note comes after the conversation's breakpoint.
    assert_eq!(
        v["messages"],
        json!([{"role":"user","content":[
            {"type":"text","text":"q","cache_control":{"type":"ephemeral"}},
            {"type":"text","text":"note"}]}])
    );
    let off = transport().with_prompt_caching(false);
    let v = encode_with(&off, &msgs, &Map::new(), None, &tools);
    assert!(!v.to_string().contains("cache_control"), "{v}");
}

/// The bytes of a request body with caching on.
fn body_bytes(msgs: &[Message], note: Option<&str>, tools: &ToolSpecs) -> Vec<u8> {
    let t = transport();
    let extra = Map::new();
    let req = Request {
        trailing_system: note,
        ..Request::for_test(&t, msgs, tools, &extra)
    };
    let mut buf = Vec::new();
    write_body(&req, &mut buf);
    buf
}

/// Issue 38, item 22: the wind-down note changes from one request to the
/// next; the bytes through the earlier request's last breakpoint must not,
/// or the whole history misses the provider's cache.
#[test]
fn a_changing_note_keeps_the_prefix_through_the_last_breakpoint() {
    let tools = ToolSpecs::from_values(&[
        json!({"type":"function","function":{"name":"a","description":"A","parameters":{"type":"object"}}}),
    ]);
    let mut msgs = vec![
        Message::user("q"),
        Message::assistant_tool_calls("", vec![ToolCall::new("t1", "a", "{}")]),
        Message::tool("t1", "one"),
    ];
    let first = body_bytes(&msgs, Some("Note: 2 tool calls remain."), &tools);
    msgs.push(Message::assistant_tool_calls(
        "",
        vec![ToolCall::new("t2", "a", "{}")],
    ));
    msgs.push(Message::tool("t2", "two"));
    let second = body_bytes(&msgs, Some("Note: 1 tool call remains."), &tools);
    let first = String::from_utf8(first).unwrap();
    let second = String::from_utf8(second).unwrap();
    // The API caches tools, then system, then messages; the tools are
    // the same, and `system` and `messages` come first in the body:
    // through the first request's last breakpoint in the messages,
    // everything before its `cache_control` marker (the marker itself
    // moves on to the new end) is a prefix of the second body.
    let tools_of = |b: &str| serde_json::from_str::<Value>(b).unwrap()["tools"].clone();
    assert_eq!(tools_of(&first), tools_of(&second));
    assert!(first.find(r#""system""#) < first.find(r#""messages""#));
    assert!(first.find(r#""messages""#) < first.find(r#""tools""#));
    let cut = first.rfind(r#","cache_control""#).unwrap();
    assert!(cut < first.find(r#""tools""#).unwrap());
    assert!(
        second.starts_with(&first[..cut]),
        "prefix differs:\n{}\n{}",
        &first[..cut],
        second
    );
    // The note is the last block, after the moving breakpoint, in both.
    for body in [&first, &second] {
        let v: Value = serde_json::from_str(body).unwrap();
        let last = v["messages"].as_array().unwrap().last().unwrap().clone();
        let blocks = last["content"].as_array().unwrap();
        let n = blocks.len();
        assert_eq!(last["role"], "user");
        assert!(blocks[n - 1]["text"].as_str().unwrap().starts_with("Note:"));
        assert!(blocks[n - 1].get("cache_control").is_none());
        assert_eq!(blocks[n - 2]["cache_control"], json!({"type":"ephemeral"}));
        assert_eq!(v["system"].as_array().unwrap().len(), 1);
    }
}

/// Issue 38, item 23: a tool's schema goes as its `Value` holds it, on
/// every API: each keyword and value unchanged (arrays in their order),
/// an object's keys in serde_json's `Map` order, alphabetical (pikuri does
/// not enable `preserve_order`), whatever order the text gave.
#[test]
fn a_tool_schema_is_sent_with_its_keys_in_map_order() {
    let given = r#"{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}},"required":["zeta","alpha"]}"#;
    let schema: Value = serde_json::from_str(given).unwrap();
    let tools = ToolSpecs::from_values(&[
        json!({"type":"function","function":{"name":"a","description":"A","parameters":schema}}),
    ]);
    let sorted = r#"{"properties":{"alpha":{"type":"number"},"zeta":{"type":"string"}},"required":["zeta","alpha"],"type":"object"}"#;
    let extra = Map::new();
    let msgs = [Message::user("q")];
    // Every API this build speaks (this file needs `anthropic`; a build
    // without `responses` refuses that API before encoding).
    let apis = [
        Api::ChatCompletions,
        Api::AnthropicMessages,
        #[cfg(feature = "responses")]
        Api::OpenAiResponses,
    ];
    for api in apis {
        let t = transport().with_api(api);
        let req = Request {
            system: None,
            stream: false,
            prompt_caching: false,
            ..Request::for_test(&t, &msgs, &tools, &extra)
        };
        let mut buf = Vec::new();
        crate::protocol::wire::encode(&req, &mut buf, false).unwrap();
        let body = String::from_utf8(buf).unwrap();
        assert!(body.contains(sorted), "{api:?}: {body}");
        assert!(!body.contains(given), "{api:?}: {body}");
    }
}

#[test]
fn request_fields_replace_pikuris_own() {
    let mut extra = Map::new();
    extra.insert("max_tokens".into(), json!(100));
    extra.insert("tool_choice".into(), json!({"type":"any"}));
    extra.insert("system".into(), json!("mine"));
    let mut buf = Vec::new();
    let t = transport();
    // With a tool: a tool-less request leaves `tool_choice` out.
    let tools = ToolSpecs::from_values(&[json!({"name": "f"})]);
    let msgs = [Message::user("q")];
    let req = Request {
        stream: false,
        prompt_caching: t.prompt_caching(),
        ..Request::for_test(&t, &msgs, &tools, &extra)
    };
    write_body(&req, &mut buf);
    let text = String::from_utf8(buf).unwrap();
    assert_eq!(text.matches("\"max_tokens\"").count(), 1, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["max_tokens"], 100);
    assert_eq!(v["system"], "mine");
    assert_eq!(v["tool_choice"], json!({"type":"any"}));
    assert_eq!(v["stream"], false);
}

#[test]
fn an_empty_answer_leaves_no_turn_and_the_roles_still_alternate() {
    let msgs = vec![
        Message::user("q"),
        Message::assistant(""),
        Message::user("r"),
        Message::assistant(""),
    ];
    let v = encode(&transport().with_prompt_caching(false), &msgs, &Map::new());
    assert_eq!(
        v["messages"],
        json!([{"role":"user","content":[{"type":"text","text":"q"},{"type":"text","text":"r"}]}])
    );
}

#[test]
fn user_images_and_url_sources() {
    let mut u = Message::user("see");
    u.images.push(Image {
        media_type: "image/jpeg".into(),
        source: ImageSource::Url("https://x/y.jpg".into()),
    });
    let v = encode(&transport().with_prompt_caching(false), &[u], &Map::new());
    assert_eq!(
        v["messages"][0]["content"],
        json!([{"type":"text","text":"see"},
               {"type":"image","source":{"type":"url","url":"https://x/y.jpg"}}])
    );
}

// ---- non-streamed ----

#[test]
fn parses_a_response_with_thinking_tools_and_usage() {
    let body = json!({
        "id":"msg_1","type":"message","role":"assistant","model":"claude-x",
        "content":[
            {"type":"thinking","thinking":"let me see","signature":"S1"},
            {"type":"redacted_thinking","data":"ENC"},
            {"type":"text","text":"Calling."},
            {"type":"tool_use","id":"toolu_1","name":"calc","input":{"x":2}},
            {"type":"server_tool_use","id":"s","name":"web","input":{}}
        ],
        "stop_reason":"tool_use",
        "usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,
                 "cache_creation_input_tokens":7}
    });
    let c = parse_response(body.to_string().as_bytes(), false).unwrap();
    assert_eq!(c.finish(), crate::FinishReason::ToolCalls);
    assert_eq!(c.model.as_deref(), Some("claude-x"));
    assert_eq!(
        c.usage,
        Some(Usage::from_parts(
            Some(10),
            Some(5),
            Some(100),
            Some(7),
            None
        ))
    );
    let m = &c.message;
    assert_eq!(m.content, "Calling.");
    assert_eq!(m.reasoning.as_deref(), Some("let me see"));
    assert_eq!(m.tool_calls.len(), 1);
    assert_eq!(m.tool_calls[0].id, "toolu_1");
    assert_eq!(m.tool_calls[0].arguments, r#"{"x":2}"#);
    let pd = m.provider_data.as_ref().unwrap();
    assert_eq!(pd.api, Api::AnthropicMessages);
    assert_eq!(
        pd.items,
        vec![
            json!({"type":"thinking","thinking":"let me see","signature":"S1"}),
            json!({"type":"redacted_thinking","data":"ENC"})
        ]
    );
}

#[test]
fn stop_reasons_map_to_finish_reasons() {
    for (stop, finish) in [
        ("end_turn", crate::FinishReason::Complete),
        ("stop_sequence", crate::FinishReason::Complete),
        ("pause_turn", crate::FinishReason::Complete),
        ("tool_use", crate::FinishReason::ToolCalls),
        ("max_tokens", crate::FinishReason::Length),
        ("model_context_window_exceeded", crate::FinishReason::Length),
        ("refusal", crate::FinishReason::Filtered),
        ("something_new", crate::FinishReason::ServerCut),
    ] {
        let body = json!({"type":"message","content":[],"stop_reason":stop});
        let c = parse_response(body.to_string().as_bytes(), false).unwrap();
        assert_eq!(c.finish(), finish, "{stop}");
    }
}

#[test]
fn error_bodies_and_other_json_are_protocol_errors() {
    let e = parse_response(
        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        false,
    )
    .unwrap_err();
    // The shared rule: an overload in a 200 body is the 529 it stands for.
    assert!(
        matches!(e, DecodeError::Status { status: 529, .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "server error in response: Overloaded (overloaded_error)"
    );
    assert!(matches!(
        parse_response(br#"{"choices":[]}"#, false),
        Err(DecodeError::Protocol(_))
    ));
    assert!(parse_response(b"nope", false).is_err());
}

// ---- streamed ----

fn stream(events: &[Value]) -> (Result<Completion, DecodeError>, Vec<String>) {
    let mut d = Decoder::new(false, None);
    let mut seen = Vec::new();
    for e in events {
        let r = d.push_data(&e.to_string(), &mut |f| match f {
            Fragment::Content(s) => seen.push(format!("c:{s}")),
            Fragment::Reasoning(s) => seen.push(format!("r:{s}")),
            Fragment::Usage(u) => seen.push(format!("u:{:?}/{:?}", u.input, u.output)),
        });
        if let Err(e) = r {
            return (Err(e), seen);
        }
    }
    (d.finish(), seen)
}

fn start() -> Value {
    json!({"type":"message_start","message":{"id":"msg_1","model":"claude-x",
        "usage":{"input_tokens":12,"output_tokens":1,"cache_read_input_tokens":3}}})
}

fn stop_events(reason: &str) -> [Value; 2] {
    [
        json!({"type":"message_delta","delta":{"stop_reason":reason},"usage":{"output_tokens":9}}),
        json!({"type":"message_stop"}),
    ]
}

#[test]
fn decodes_a_stream_with_thinking_text_and_a_tool() {
    let mut events = vec![
        start(),
        json!({"type":"ping"}),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"ponder"}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"SIG"}}),
        json!({"type":"content_block_stop","index":0}),
        json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}),
        json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo","extra":1}}),
        json!({"type":"content_block_stop","index":1}),
        json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_9","name":"calc","input":{}}}),
        json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}),
        json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"x\":"}}),
        json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"3}"}}),
        json!({"type":"content_block_stop","index":2}),
        json!({"type":"some_future_event","x":1}),
    ];
    events.extend(stop_events("tool_use"));
    let (c, seen) = stream(&events);
    let c = c.unwrap();
    assert_eq!(
        seen,
        [
            "u:Some(12)/Some(1)",
            "r:ponder",
            "c:Hel",
            "c:lo",
            "u:Some(12)/Some(9)"
        ]
    );
    assert_eq!(c.finish(), crate::FinishReason::ToolCalls);
    assert_eq!(c.model.as_deref(), Some("claude-x"));
    assert_eq!(
        c.usage,
        Some(Usage::from_parts(Some(12), Some(9), Some(3), None, None))
    );
    assert_eq!(c.message.content, "Hello");
    assert_eq!(c.message.reasoning.as_deref(), Some("ponder"));
    assert_eq!(c.message.tool_calls[0].arguments, r#"{"x":3}"#);
    assert_eq!(c.message.tool_calls[0].id, "toolu_9");
    assert_eq!(
        c.message.provider_data.unwrap().items,
        vec![json!({"type":"thinking","thinking":"ponder","signature":"SIG"})]
    );
}

#[test]
fn an_error_event_is_a_protocol_error_with_the_message() {
    let events = [
        start(),
        json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}),
    ];
    let e = stream(&events).0.unwrap_err();
    assert_eq!(
        e.to_string(),
        "server error in stream: Overloaded (overloaded_error)"
    );
    assert!(matches!(e, DecodeError::Status { status: 529, .. }));
    let events = [
        start(),
        json!({"type":"error","error":{"type":"invalid_request_error","message":"bad"}}),
    ];
    let e = stream(&events).0.unwrap_err();
    assert!(matches!(e, DecodeError::Protocol(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "server error in stream: bad (invalid_request_error)"
    );
}

#[test]
fn a_stream_without_message_stop_is_truncated() {
    let events = [
        start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}),
        json!({"type":"message_delta","delta":{"stop_reason":"end_turn"}}),
    ];
    assert!(matches!(stream(&events).0, Err(DecodeError::Truncated)));
    assert!(matches!(stream(&[]).0, Err(DecodeError::Truncated)));
}

#[test]
fn out_of_order_blocks_are_protocol_errors() {
    let text_start =
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}});
    let delta = |i: u64| json!({"type":"content_block_delta","index":i,"delta":{"type":"text_delta","text":"x"}});
    let cases: Vec<(Vec<Value>, &str)> = vec![
        (vec![start(), delta(0)], "never started"),
        (
            vec![
                start(),
                text_start.clone(),
                json!({"type":"content_block_stop","index":0}),
                delta(0),
            ],
            "already stopped",
        ),
        (
            vec![start(), text_start.clone(), text_start.clone()],
            "started twice",
        ),
        (vec![text_start.clone()], "before message_start"),
        (
            vec![start(), json!({"type":"content_block_stop","index":4})],
            "never started",
        ),
    ];
    for (events, want) in cases {
        let e = stream(&events).0.unwrap_err();
        assert!(e.to_string().contains(want), "{e} vs {want}");
    }
}

#[test]
fn unfinished_tool_json_is_kept_raw_and_blocks_left_open_close() {
    let mut events = vec![
        start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"calc","input":{}}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"x\":"}}),
    ];
    events.extend(stop_events("max_tokens"));
    let c = stream(&events).0.unwrap();
    assert_eq!(c.finish(), crate::FinishReason::Length);
    assert_eq!(c.message.tool_calls[0].arguments, r#"{"x":"#);
    // A call with no input deltas has `{}`.
    let mut events = vec![
        start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"now","input":{}}}),
        json!({"type":"content_block_stop","index":0}),
    ];
    events.extend(stop_events("tool_use"));
    assert_eq!(
        stream(&events).0.unwrap().message.tool_calls[0].arguments,
        "{}"
    );
}

#[test]
fn thinking_without_a_signature_is_reasoning_only() {
    let mut events = vec![
        start(),
        json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
        json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}),
        json!({"type":"content_block_stop","index":0}),
    ];
    events.extend(stop_events("end_turn"));
    let c = stream(&events).0.unwrap();
    assert_eq!(c.message.reasoning.as_deref(), Some("hm"));
    assert!(c.message.provider_data.is_none());
}

#[test]
fn absurd_usage_is_dropped_not_fatal() {
    let events = [
        json!({"type":"message_start","message":{"model":"m",
            "usage":{"input_tokens":-5,"output_tokens":1.5,"cache_read_input_tokens":"7",
                     "cache_creation_input_tokens":u64::MAX}}}),
        json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},
            "usage":{"output_tokens":4}}),
        json!({"type":"message_stop"}),
    ];
    let c = stream(&events).0.unwrap();
    assert_eq!(
        c.usage,
        Some(Usage::from_parts(None, Some(4), None, None, None))
    );
}

#[test]
fn garbage_and_odd_shapes() {
    let mut d = Decoder::new(false, Some("sk-secret"));
    let e = d.push_data("not json sk-secret", &mut |_| {}).unwrap_err();
    assert!(!e.to_string().contains("sk-secret"), "{e}");
    // JSON of another shape is skipped.
    let mut d = Decoder::new(false, None);
    d.push_data(r#"{"type":"message_start","message":"x"}"#, &mut |_| {})
        .unwrap();
    d.push_data(r#"{"no_type":1}"#, &mut |_| {}).unwrap();
    d.push_data(r"[1,2]", &mut |_| {}).unwrap();
    d.push_data(
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text"}}"#,
        &mut |_| {},
    )
    .unwrap_err(); // before message_start
    let mut seen = String::new();
    let mut d2 = Decoder::new(false, None);
    for e in [
        r#"{"type":"message_start","message":{}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","thinking":"b"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"c"}}"#,
    ] {
        d2.push_data(e, &mut |f| {
            if let Fragment::Content(s) = f {
                seen.push_str(s);
            }
        })
        .unwrap();
    }
    assert_eq!(seen, "c", "a delta with two payloads is skipped");
    d.push_data(r#"{"type":"message_stop"}"#, &mut |_| {})
        .unwrap();
    assert!(d.is_done());
    // After the end, anything is ignored.
    d.push_data("garbage", &mut |_| {}).unwrap();
    assert!(d.finish().is_ok());
}
