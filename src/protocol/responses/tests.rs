//! The decoder's rules for bad and unusual input, and the encoder's
//! translations, one by one (the integration tests in
//! `tests/integration/responses.rs` cover the common paths end to end).

use serde_json::{Map, Value, json};

use super::{Decoder, parse_response, write_body};
use crate::protocol::decode::{Completion, Fragment, StreamDecoder};
use crate::protocol::error::DecodeError;
use crate::protocol::request::{Request, ToolSpecs};
use crate::{Api, ChatTransport, Image, ImageSource, Message, ProviderData, ToolCall};

/// Feed `events`, collecting the text fragments; the completion or error.
fn run(events: &[Value], split_think: bool) -> (String, Result<Completion, DecodeError>) {
    let mut d = Decoder::new(split_think, None);
    let mut seen = String::new();
    let mut on = |f: Fragment<'_>| match f {
        Fragment::Content(s) => seen.push_str(s),
        Fragment::Reasoning(s) => {
            seen.push('[');
            seen.push_str(s);
            seen.push(']');
        }
        Fragment::Usage(_) => {}
    };
    for e in events {
        if let Err(err) = d.push_data(&e.to_string(), &mut on) {
            return (seen, Err(err));
        }
    }
    (seen, d.finish())
}

fn completed(extra: &Value) -> Value {
    let mut r = json!({"status": "completed"});
    if let (Some(r), Some(extra)) = (r.as_object_mut(), extra.as_object()) {
        r.extend(extra.clone());
    }
    json!({"type": "response.completed", "response": r})
}

fn delta(item: &str, text: &str) -> Value {
    json!({"type": "response.output_text.delta", "item_id": item, "delta": text})
}

#[test]
fn finish_reasons_in_chat_completions_terms() {
    let incomplete = |reason: &str| {
        json!({"type": "response.incomplete",
               "response": {"status": "incomplete", "incomplete_details": {"reason": reason}}})
    };
    let reason = |events: &[Value]| run(events, false).1.unwrap().finish();
    assert_eq!(
        reason(&[delta("m", "a"), completed(&json!({}))]),
        crate::FinishReason::Complete
    );
    assert_eq!(
        reason(&[incomplete("max_output_tokens")]),
        crate::FinishReason::Length
    );
    assert_eq!(
        reason(&[incomplete("content_filter")]),
        crate::FinishReason::Filtered
    );
    assert_eq!(
        reason(&[incomplete("something_new")]),
        crate::FinishReason::ServerCut
    );
    let call = json!({"type": "response.output_item.done",
        "item": {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}});
    assert_eq!(
        reason(&[call, completed(&json!({}))]),
        crate::FinishReason::ToolCalls
    );
    let refusal = json!({"type": "response.output_item.done",
        "item": {"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}});
    let (text, c) = run(&[refusal, completed(&json!({}))], false);
    assert_eq!(text, "No.");
    assert_eq!(c.unwrap().finish(), crate::FinishReason::Filtered);
}

#[test]
fn absurd_usage_is_bounded_or_dropped_and_the_stream_completes() {
    let usage = |u: Value| {
        run(&[completed(&json!({"usage": u}))], false)
            .1
            .unwrap()
            .usage
            .unwrap()
    };
    // More cached than input: capped, so the slices add up to the input.
    let u = usage(
        json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 50},
                         "output_tokens": 1}),
    );
    assert_eq!((u.input, u.cached, u.output), (Some(0), Some(10), Some(1)));
    // Negative, fractional, beyond u64, a string: unknown, not a failure.
    let u = usage(json!({"input_tokens": -5, "output_tokens": 1e30,
                         "output_tokens_details": {"reasoning_tokens": "7"}}));
    assert_eq!((u.input, u.output, u.thinking), (None, None, None));
    let mut d = Decoder::new(false, None);
    d.push_data(
        r#"{"type":"response.completed","response":{"usage":{"input_tokens":100000000000000000000000}}}"#,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(d.finish().unwrap().usage.unwrap().input, None);
}

#[test]
fn deltas_find_their_item_by_id_or_index_or_start_one() {
    let added = |id: &str, index: u64| {
        json!({"type": "response.output_item.added", "output_index": index,
               "item": {"type": "message", "id": id, "content": []}})
    };
    let events = [
        added("m1", 0),
        // By index alone (no id).
        json!({"type": "response.output_text.delta", "output_index": 0, "delta": "a"}),
        // By id alone (llama.cpp).
        delta("m1", "b"),
        // An item never announced: a new item, nothing lost.
        delta("ghost", "c"),
        completed(&json!({})),
    ];
    let (text, c) = run(&events, false);
    assert_eq!(text, "abc");
    assert_eq!(c.unwrap().message.content, "abc");
}

#[test]
fn argument_pieces_for_an_unknown_or_wrong_item_are_errors() {
    let args = json!({"type": "response.function_call_arguments.delta", "item_id": "nope",
                      "delta": "{"});
    let err = run(std::slice::from_ref(&args), false).1.unwrap_err();
    assert!(err.to_string().contains("unknown output item"), "{err}");
    let msg = json!({"type": "response.output_item.added",
                     "item": {"type": "message", "id": "nope", "content": []}});
    let err = run(&[msg, args], false).1.unwrap_err();
    assert!(err.to_string().contains("not a function call"), "{err}");
}

#[test]
fn an_item_started_by_a_stray_delta_takes_its_announced_type() {
    let events = [
        delta("x", "text"),
        json!({"type": "response.output_item.added",
               "item": {"type": "function_call", "id": "x", "call_id": "c", "name": "f", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "x", "delta": "{}"}),
        completed(&json!({})),
    ];
    let c = run(&events, false).1.unwrap();
    assert_eq!(c.message.content, "text");
    assert_eq!(c.message.tool_calls, vec![ToolCall::new("c", "f", "{}")]);
}

#[test]
fn arguments_that_never_complete_are_kept_as_sent() {
    let events = [
        json!({"type": "response.output_item.added",
               "item": {"type": "function_call", "id": "fc", "call_id": "c", "name": "f", "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": "fc", "delta": "{\"a\": "}),
        json!({"type": "response.incomplete",
               "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}}),
    ];
    let c = run(&events, false).1.unwrap();
    assert_eq!(c.finish(), crate::FinishReason::Length);
    assert_eq!(
        c.message.tool_calls,
        vec![ToolCall::new("c", "f", "{\"a\": ")]
    );
}

#[test]
fn bad_data_unknown_events_and_odd_shapes() {
    let mut d = Decoder::new(false, None);
    let mut on = |_: Fragment<'_>| {};
    let err = d.push_data("{not json", &mut on).unwrap_err();
    assert!(
        err.to_string().starts_with("malformed stream event"),
        "{err}"
    );
    // Unknown event types and odd shapes are skipped, not progress.
    d.push_data(r#"{"type":"response.web_search_call.searching"}"#, &mut on)
        .unwrap();
    d.push_data(
        r#"{"type":"response.output_text.delta","delta":5}"#,
        &mut on,
    )
    .unwrap();
    d.push_data(r#"{"no":"type"}"#, &mut on).unwrap();
    assert_eq!(d.progress(), 0);
    // An end event of the wrong shape would otherwise surface as Truncated.
    let err = d
        .push_data(
            r#"{"type":"response.completed","response":{"status":5}}"#,
            &mut on,
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("malformed response.completed"),
        "{err}"
    );
    assert!(matches!(
        Decoder::new(false, None).finish(),
        Err(DecodeError::Truncated)
    ));
}

#[test]
fn finished_items_supply_text_no_delta_carried() {
    let reasoning = json!({"type": "reasoning", "id": "rs", "encrypted_content": "E",
        "summary": [{"type": "summary_text", "text": "one"}, {"type": "summary_text", "text": "two"}]});
    let events = [
        json!({"type": "response.output_item.done", "item": reasoning}),
        json!({"type": "response.output_item.done", "item":
               {"type": "message", "id": "m", "content": [{"type": "output_text", "text": "hi"}]}}),
        completed(&json!({})),
    ];
    let (text, c) = run(&events, false);
    assert_eq!(text, "[one][\n\n][two]hi");
    let c = c.unwrap();
    assert_eq!(c.message.reasoning.as_deref(), Some("one\n\ntwo"));
    assert_eq!(c.message.provider_data.unwrap().items, vec![reasoning]);
}

#[test]
fn an_end_event_alone_carries_the_output() {
    let events = [completed(&json!({"model": "m", "output": [
        {"type": "message", "content": [{"type": "output_text", "text": "all at once"}]}]}))];
    let (text, c) = run(&events, false);
    assert_eq!(text, "all at once");
    assert_eq!(c.unwrap().model.as_deref(), Some("m"));
}

#[test]
fn think_tags_move_to_the_reasoning() {
    let events = [
        delta("m", "<thi"),
        delta("m", "nk>hmm</think> ok"),
        completed(&json!({})),
    ];
    let c = run(&events, true).1.unwrap();
    assert_eq!(c.message.reasoning.as_deref(), Some("hmm"));
    assert_eq!(c.message.content, "ok");
}

#[test]
fn reasoning_deltas_and_failed_responses() {
    let events = [
        json!({"type": "response.output_item.added", "item": {"type": "reasoning", "id": "r"}}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": "r", "delta": "think"}),
        json!({"type": "response.failed", "response": {"status": "failed",
               "error": {"message": "quota"}}}),
    ];
    let (text, r) = run(&events, false);
    assert_eq!(text, "[think]");
    assert!(
        r.unwrap_err()
            .to_string()
            .contains("server error in stream: quota")
    );
}

#[test]
fn bodies_that_are_no_answer_are_errors() {
    let err = |body: &str| {
        parse_response(body.as_bytes(), false)
            .unwrap_err()
            .to_string()
    };
    assert!(err(r#"{"status":"failed","error":{"message":"boom"}}"#).contains("boom"));
    assert!(err(r#"{"status":"in_progress","output":[]}"#).contains("in_progress"));
    assert!(err("<html><title>Bad Gateway</title></html>").contains("Bad Gateway"));
    let ok = parse_response(
        br#"{"status":"completed","error":null,"output":[{"type":"message","content":[{"type":"output_text","text":"x"}]}]}"#,
        false,
    )
    .unwrap();
    assert_eq!(ok.message.content, "x");
}

fn encode(transport: &ChatTransport, messages: &[Message], extra: &Map<String, Value>) -> Value {
    let tools = ToolSpecs::default();
    let req = Request {
        trailing_system: Some("note"),
        ..Request::for_test(transport, messages, &tools, extra)
    };
    let mut buf = Vec::new();
    write_body(&req, &mut buf);
    serde_json::from_slice(&buf).unwrap()
}

#[test]
fn request_fields_go_as_given_and_the_host_wins() {
    let t = ChatTransport::new("m");
    // Raw fields are the Responses API's own: chat completions' names are
    // not translated (they were before issue 36).
    let extra: Map<String, Value> = serde_json::from_value(json!({
        "max_tokens": 64,
        "reasoning_effort": "low",
        "store": true,
        "response_format": {"type": "json_object"},
        "temperature": 0,
    }))
    .unwrap();
    let b = encode(&t, &[Message::user("hi")], &extra);
    assert_eq!(b["max_tokens"], 64);
    assert_eq!(b["reasoning_effort"], "low");
    assert_eq!(b["response_format"], json!({"type": "json_object"}));
    assert_eq!(b["store"], true);
    assert_eq!(b["temperature"], 0);
    for absent in ["max_output_tokens", "reasoning", "text"] {
        assert!(b.get(absent).is_none(), "{absent}: {b}");
    }
    // One key each, though both pikuri and the host name `store`.
    let text = String::from_utf8(serde_json::to_vec(&b).unwrap()).unwrap();
    assert_eq!(text.matches("\"store\"").count(), 1);
    assert_eq!(
        b["input"][1],
        json!({"type": "message", "role": "system",
                                     "content": [{"type": "input_text", "text": "note"}]})
    );
}

#[test]
fn history_items_images_and_foreign_reasoning() {
    let t = ChatTransport::new("m").with_api_base("http://h/v1");
    let mut user = Message::user("look");
    user.images.push(Image {
        media_type: "image/png".into(),
        source: ImageSource::Base64("AAAA".into()),
    });
    let mut answer =
        Message::assistant_tool_calls("", vec![ToolCall::new("c1", "f", "{\"cut\": ")]);
    let item = json!({"type": "reasoning", "id": "rs", "encrypted_content": "E"});
    answer.provider_data = Some(ProviderData::new(
        Api::OpenAiResponses,
        "http://other/v1",
        "m",
        vec![item.clone()],
    ));
    let mut result = Message::tool("c1", "shot");
    result.images.push(Image {
        media_type: "image/jpeg".into(),
        source: ImageSource::Url("https://x/y.jpg".into()),
    });
    let msgs = [user, answer.clone(), result];
    let b = encode(&t, &msgs, &Map::new());
    let input = &b["input"];
    assert_eq!(
        input[0]["content"][1],
        json!({"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"})
    );
    // Another endpoint's reasoning is not sent; cut arguments go as {}.
    assert_eq!(
        input[1],
        json!({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"})
    );
    assert_eq!(input[2]["output"][1]["image_url"], "https://x/y.jpg");
    // The same endpoint and model get it, first.
    let mut same = answer;
    same.provider_data = Some(ProviderData::new(
        Api::OpenAiResponses,
        "http://h/v1",
        "m",
        vec![item.clone()],
    ));
    let b = encode(&t, &[Message::user("q"), same], &Map::new());
    assert_eq!(b["input"][1], item);
}
