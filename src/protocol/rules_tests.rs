//! The shared rule table: the same cases, written once in API-neutral
//! steps, rendered into each API's stream events (and bodies where they
//! apply) and run through the whole streaming path (`stream::read_stream`:
//! SSE framing, the API's decoder, the progress count the idle bound
//! reads). A case that holds on one decoder must hold on all four.

use serde_json::{Value, json};

use super::*;
use crate::Api;
use crate::protocol::stream::{StreamOptions, read_stream};
use crate::protocol::{Completion, wire};

/// A sink that counts progress.
struct Count(u64);

impl crate::protocol::sink::Sink for Count {
    fn progress(&mut self) {
        self.0 += 1;
    }
}

const APIS: [Api; 4] = [
    Api::ChatCompletions,
    Api::AnthropicMessages,
    Api::OpenAiResponses,
    Api::Gemini,
];

/// A Gemini chunk of candidate 0 with these parts.
fn gemini_parts(parts: &Value) -> Value {
    json!({"candidates": [{"index": 0, "content": {"role": "model", "parts": parts}}]})
}

/// Renders API-neutral steps into one API's event data.
struct Script {
    api: Api,
    data: Vec<String>,
    /// The next Anthropic block index, Responses output index, chat call
    /// index.
    next: u64,
}

impl Script {
    /// The opening events (model, first usage of 1 in and 1 out).
    fn new(api: Api) -> Script {
        let mut s = Script {
            api,
            data: Vec::new(),
            next: 0,
        };
        match api {
            Api::ChatCompletions => s.push(json!({"model": "m", "choices": [],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}})),
            Api::AnthropicMessages => s.push(json!({"type": "message_start",
                "message": {"model": "m", "usage": {"input_tokens": 1, "output_tokens": 1}}})),
            Api::Gemini => s.push(json!({"modelVersion": "m",
                "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}})),
            _ => s.push(json!({"type": "response.created", "response": {"model": "m"}})),
        }
        s
    }

    fn push(&mut self, v: impl std::fmt::Display) {
        self.data.push(v.to_string());
    }

    fn raw(mut self, data: &str) -> Script {
        self.data.push(data.to_string());
        self
    }

    fn text(mut self, text: &str) -> Script {
        match self.api {
            Api::ChatCompletions => {
                self.push(json!({"choices": [{"index": 0, "delta": {"content": text}}]}));
            }
            Api::AnthropicMessages => {
                let i = self.next;
                self.next += 1;
                self.push(json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "text", "text": ""}}));
                self.push(json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "text_delta", "text": text}}));
                self.push(json!({"type": "content_block_stop", "index": i}));
            }
            Api::Gemini => self.push(gemini_parts(&json!([{"text": text}]))),
            _ => {
                let i = self.next;
                self.next += 1;
                self.push(json!({"type": "response.output_text.delta",
                    "item_id": format!("msg_{i}"), "output_index": i, "delta": text}));
            }
        }
        self
    }

    fn call(mut self, id: &str, name: &str, args: &str) -> Script {
        let i = self.next;
        self.next += 1;
        match self.api {
            Api::ChatCompletions => self.push(json!({"choices": [{"index": 0, "delta":
                {"tool_calls": [{"index": i, "id": id, "type": "function",
                                 "function": {"name": name, "arguments": args}}]}}]})),
            Api::AnthropicMessages => {
                self.push(json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
                self.push(json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": args}}));
                self.push(json!({"type": "content_block_stop", "index": i}));
            }
            // Gemini sends a call whole, its arguments an object.
            Api::Gemini => {
                let args: Value = serde_json::from_str(args).unwrap_or(Value::Null);
                self.push(gemini_parts(
                    &json!([{"functionCall": {"id": id, "name": name, "args": args}}]),
                ));
            }
            _ => {
                let item = json!({"type": "function_call", "id": format!("fc_{i}"),
                    "call_id": id, "name": name, "arguments": ""});
                self.push(json!({"type": "response.output_item.added",
                    "output_index": i, "item": item}));
                self.push(json!({"type": "response.function_call_arguments.delta",
                    "item_id": format!("fc_{i}"), "output_index": i, "delta": args}));
            }
        }
        self
    }

    /// Events that carry nothing new: pings, empty deltas, unknown event
    /// and delta kinds, lifecycle events, the usage already reported.
    fn idle(mut self) -> Script {
        let events: Vec<Value> = match self.api {
            Api::ChatCompletions => vec![
                json!({"choices": [{"index": 0, "delta": {}}]}),
                json!({"choices": [{"index": 0, "delta": {"content": ""}}]}),
                json!({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}),
                json!({"object": "keep-alive"}),
                json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
            ],
            Api::AnthropicMessages => {
                let i = self.next;
                self.next += 1;
                vec![
                    json!({"type": "ping"}),
                    json!({"type": "message_delta", "delta": {},
                        "usage": {"input_tokens": 1, "output_tokens": 1}}),
                    json!({"type": "content_block_start", "index": i,
                        "content_block": {"type": "text", "text": ""}}),
                    json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": ""}}),
                    json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "citations_delta", "citation": {}}}),
                    json!({"type": "content_block_stop", "index": i}),
                    json!({"type": "a_future_event"}),
                ]
            }
            Api::Gemini => vec![
                gemini_parts(&json!([])),
                gemini_parts(&json!([{"text": ""}])),
                json!({"candidates": []}),
                json!({"candidates": [{"index": 1, "content": {"parts": [{"text": "other"}]}}]}),
                json!({"x_future_member": {"a": 1}}),
                json!({"usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}}),
            ],
            _ => vec![
                json!({"type": "response.in_progress", "response": {"model": "m"}}),
                json!({"type": "response.output_text.delta", "item_id": "msg_idle",
                    "output_index": 999, "delta": ""}),
                json!({"type": "response.output_item.added", "output_index": 998,
                    "item": {"type": "message", "id": "msg_empty", "content": []}}),
                json!({"type": "response.content_part.added", "item_id": "msg_empty"}),
                json!({"type": "a_future_event"}),
            ],
        };
        for e in events {
            self.push(e);
        }
        self
    }

    /// An in-stream error object (`{type or code, message}`).
    fn error(mut self, label: &str, message: &str) -> Script {
        match self.api {
            Api::ChatCompletions => {
                self.push(json!({"error": {"message": message, "type": label}}));
            }
            Api::AnthropicMessages => self.push(json!({"type": "error",
                "error": {"type": label, "message": message}})),
            Api::Gemini => self.push(json!({"error": {"status": label, "message": message}})),
            _ => self.push(json!({"type": "error", "code": label, "message": message})),
        }
        self
    }

    /// The end: a stop reason (calls or not), usage 1/2, the end event.
    fn end(mut self) -> Script {
        match self.api {
            Api::ChatCompletions => {
                self.push(
                    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 2}}),
                );
                self.data.push("[DONE]".into());
            }
            Api::AnthropicMessages => {
                self.push(
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 2}}),
                );
                self.push(json!({"type": "message_stop"}));
            }
            Api::Gemini => self.push(json!({"candidates": [{"index": 0,
                "content": {"role": "model", "parts": []}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 2}})),
            _ => self.push(json!({"type": "response.completed", "response":
                {"status": "completed", "usage": {"input_tokens": 1, "output_tokens": 2}}})),
        }
        self
    }

    /// The events as an SSE body, through the streaming path: how many
    /// events counted as progress, and the result.
    fn run(&self) -> (u64, Result<Completion, DecodeError>) {
        let mut body = String::new();
        for d in &self.data {
            body.push_str("data: ");
            body.push_str(d);
            body.push_str("\n\n");
        }
        let options = StreamOptions {
            api: self.api,
            max_line: 1 << 24,
            max_body: 1 << 32,
            split_think: false,
            secret: None,
        };
        let mut count = Count(0);
        let result = read_stream(body.as_bytes(), &options, &mut count);
        (count.0, result)
    }
}

fn protocol(api: Api, r: Result<Completion, DecodeError>) -> String {
    match r {
        Err(DecodeError::Protocol(m)) => m,
        other => panic!("{api:?}: not a protocol error: {other:?}"),
    }
}

// ---- progress ----

#[test]
fn events_that_carry_nothing_are_not_progress() {
    for api in APIS {
        let (base, r) = Script::new(api).text("a").end().run();
        r.unwrap();
        let mut idle = Script::new(api).text("a");
        for _ in 0..50 {
            idle = idle.idle();
        }
        let (with_idle, r) = idle.end().run();
        assert_eq!(r.unwrap().message.content, "a", "{api:?}");
        assert_eq!(with_idle, base, "{api:?}: idle events counted as progress");
    }
}

#[test]
fn text_calls_and_the_end_are_progress() {
    for api in APIS {
        let (none, _) = Script::new(api).run();
        let (text, _) = Script::new(api).text("a").run();
        let (call, _) = Script::new(api).call("c1", "f", "{}").run();
        let (end, _) = Script::new(api).end().run();
        assert!(text > none, "{api:?}: text");
        assert!(call > none, "{api:?}: a call");
        assert!(end > none, "{api:?}: the end");
    }
    // A Responses message or reasoning item whose text comes only with
    // the finished item (no deltas) is progress too.
    for item in [
        json!({"type": "message", "id": "m", "content": [{"type": "output_text", "text": "hi"}]}),
        json!({"type": "reasoning", "id": "r", "summary": [{"type": "summary_text", "text": "hm"}]}),
    ] {
        let (none, _) = Script::new(Api::OpenAiResponses).run();
        let done = json!({"type": "response.output_item.done", "output_index": 0, "item": item});
        let (with, _) = Script::new(Api::OpenAiResponses)
            .raw(&done.to_string())
            .run();
        assert!(with > none, "{item}");
    }
}

#[test]
fn a_call_repeated_without_news_is_not_progress() {
    // The same call announced, finished, or given its whole arguments
    // again says nothing new: a server repeating it holds no run.
    let item = json!({"type": "function_call", "id": "fc", "call_id": "c", "name": "f",
        "arguments": "{}"});
    let added = json!({"type": "response.output_item.added", "output_index": 0, "item": item});
    let done = json!({"type": "response.output_item.done", "output_index": 0, "item": item});
    let args = json!({"type": "response.function_call_arguments.done", "item_id": "fc",
        "arguments": "{}"});
    let once = Script::new(Api::OpenAiResponses)
        .raw(&added.to_string())
        .raw(&done.to_string())
        .end()
        .run();
    let mut again = Script::new(Api::OpenAiResponses)
        .raw(&added.to_string())
        .raw(&done.to_string());
    for _ in 0..20 {
        again = again
            .raw(&added.to_string())
            .raw(&args.to_string())
            .raw(&done.to_string());
    }
    let again = again.end().run();
    assert_eq!(again.1.unwrap().message.tool_calls.len(), 1);
    assert_eq!(again.0, once.0);
    // Anthropic: the same stop reason again is not news either.
    let stop = json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}});
    let (base, _) = Script::new(Api::AnthropicMessages)
        .raw(&stop.to_string())
        .run();
    let mut s = Script::new(Api::AnthropicMessages);
    for _ in 0..20 {
        s = s.raw(&stop.to_string());
    }
    assert_eq!(s.run().0, base);
    // Chat completions: the same finish reason again.
    let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let (base, _) = Script::new(Api::ChatCompletions)
        .raw(&finish.to_string())
        .run();
    let mut s = Script::new(Api::ChatCompletions);
    for _ in 0..20 {
        s = s.raw(&finish.to_string());
    }
    assert_eq!(s.run().0, base);
}

// ---- identity ----

/// The first id seen twice, in the answer's order, is the one reported,
/// however far apart the two calls; ids that differ in case or by a
/// prefix are different ids; many distinct ids pass.
#[test]
fn check_calls_reports_the_first_id_seen_twice_in_order() {
    let calls = |ids: &[&str]| -> Vec<ToolCall> {
        ids.iter().map(|id| ToolCall::new(*id, "f", "{}")).collect()
    };
    let refused = |ids: &[&str]| match check_calls(&mut calls(ids)) {
        Err(DecodeError::Protocol(m)) => m,
        other => panic!("{ids:?}: {other:?}"),
    };
    assert_eq!(
        refused(&["a", "b", "c", "b", "a"]),
        "duplicate tool call id `b` in one answer"
    );
    assert_eq!(
        refused(&["x", "y", "z", "w", "x"]),
        "duplicate tool call id `x` in one answer"
    );
    check_calls(&mut calls(&["a", "A", "ab", "a b", "b"])).unwrap();
    let many: Vec<String> = (0..2000).map(|i| format!("call_{i}")).collect();
    let mut many: Vec<ToolCall> = many.iter().map(|id| ToolCall::new(id, "f", "{}")).collect();
    check_calls(&mut many).unwrap();
    many.push(ToolCall::new("call_1000", "g", "{}"));
    assert!(
        matches!(check_calls(&mut many), Err(DecodeError::Protocol(m)) if m.contains("`call_1000`"))
    );
}

#[test]
fn two_calls_under_one_id_refuse_the_answer() {
    for api in APIS {
        let (_, r) = Script::new(api)
            .call("dup", "f", "{}")
            .call("dup", "g", "{}")
            .end()
            .run();
        let m = protocol(api, r);
        assert!(m.contains("duplicate tool call id `dup`"), "{api:?}: {m}");
        // Distinct ids pass.
        let (_, r) = Script::new(api)
            .call("a", "f", "{}")
            .call("b", "g", "{}")
            .end()
            .run();
        assert_eq!(r.unwrap().message.tool_calls.len(), 2, "{api:?}");
    }
}

#[test]
fn a_call_without_a_name_refuses_the_answer() {
    for api in APIS {
        let (_, r) = Script::new(api).call("c1", "", "{}").end().run();
        let m = protocol(api, r);
        assert!(m.contains("has no name"), "{api:?}: {m}");
    }
}

#[test]
fn bodies_follow_the_identity_rule() {
    let bodies = [
        (
            Api::ChatCompletions,
            json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message":
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "dup", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    {"id": "dup", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}}]}),
        ),
        (
            Api::AnthropicMessages,
            json!({"type": "message", "stop_reason": "tool_use", "content": [
                {"type": "tool_use", "id": "dup", "name": "f", "input": {}},
                {"type": "tool_use", "id": "dup", "name": "g", "input": {}}]}),
        ),
        (
            Api::OpenAiResponses,
            json!({"status": "completed", "output": [
                {"type": "function_call", "id": "fc1", "call_id": "dup", "name": "f", "arguments": "{}"},
                {"type": "function_call", "id": "fc2", "call_id": "dup", "name": "g", "arguments": "{}"}]}),
        ),
        (
            Api::Gemini,
            json!({"candidates": [{"finishReason": "STOP", "content": {"parts": [
                {"functionCall": {"id": "dup", "name": "f", "args": {}}},
                {"functionCall": {"id": "dup", "name": "g", "args": {}}}]}}]}),
        ),
    ];
    for (api, body) in bodies {
        let r = wire::parse_body(api, body.to_string().as_bytes(), false);
        let m = protocol(api, r);
        assert!(m.contains("duplicate tool call id"), "{api:?}: {m}");
    }
}

// ---- in-stream errors ----

#[test]
fn in_stream_errors_become_the_status_they_stand_for() {
    for api in APIS {
        for (label, status) in [
            ("server_error", 500),
            ("api_error", 500),
            ("rate_limit_exceeded", 429),
            ("rate_limit_error", 429),
            ("overloaded_error", 529),
            ("timeout_error", 504),
        ] {
            let (_, r) = Script::new(api).text("a").error(label, "boom").run();
            match r {
                Err(DecodeError::Status { status: s, message }) => {
                    assert_eq!(s, status, "{api:?} {label}");
                    assert_eq!(message, format!("server error in stream: boom ({label})"));
                }
                other => panic!("{api:?} {label}: {other:?}"),
            }
        }
        // Anything else is a protocol error, quoted.
        let (_, r) = Script::new(api).error("invalid_prompt", "no").run();
        assert_eq!(
            protocol(api, r),
            "server error in stream: no (invalid_prompt)",
            "{api:?}"
        );
    }
}

#[test]
fn a_failed_response_event_is_mapped_like_an_error_event() {
    let failed = json!({"type": "response.failed", "response": {"status": "failed",
        "error": {"code": "server_error", "message": "oops"}}});
    let (_, r) = Script::new(Api::OpenAiResponses)
        .raw(&failed.to_string())
        .run();
    assert!(
        matches!(&r, Err(DecodeError::Status { status: 500, message })
            if message == "server error in stream: oops (server_error)"),
        "{r:?}"
    );
}

#[test]
fn errors_in_bodies_follow_the_same_rule() {
    let bodies = [
        (
            Api::ChatCompletions,
            json!({"error": {"message": "busy", "type": "server_error"}}),
        ),
        (
            Api::AnthropicMessages,
            json!({"type": "error", "error": {"type": "api_error", "message": "busy"}}),
        ),
        (
            Api::OpenAiResponses,
            json!({"error": {"code": "server_error", "message": "busy"}}),
        ),
        (
            Api::Gemini,
            json!({"error": {"code": 500, "message": "busy", "status": "INTERNAL"}}),
        ),
    ];
    for (api, body) in bodies {
        let r = wire::parse_body(api, body.to_string().as_bytes(), false);
        assert!(
            matches!(&r, Err(DecodeError::Status { status: 500, message })
                if message.starts_with("server error in response: busy")),
            "{api:?}: {r:?}"
        );
    }
}

// ---- bounds ----

#[test]
fn server_strings_in_errors_are_bounded() {
    let huge = "x".repeat(20_000);
    for api in APIS {
        let (_, r) = Script::new(api).error(&huge, &huge).run();
        let m = protocol(api, r);
        assert!(
            m.chars().count() <= MAX_MESSAGE + MAX_LABEL + 40,
            "{api:?}: {} chars",
            m.len()
        );
    }
    // A Responses `code` that is not a string, and huge.
    let event = json!({"type": "error", "code": [huge], "message": "m"});
    let (_, r) = Script::new(Api::OpenAiResponses)
        .raw(&event.to_string())
        .run();
    assert!(protocol(Api::OpenAiResponses, r).len() < 400);
}

#[test]
fn model_names_are_bounded() {
    let huge = "m".repeat(20_000);
    for api in APIS {
        let mut s = Script::new(api);
        // The opening event again, naming a huge model (the first is "m",
        // so each decoder's own rule keeps "m"): start from scratch.
        s.data.clear();
        s.push(match api {
            Api::ChatCompletions => json!({"model": huge, "choices": []}),
            Api::AnthropicMessages => {
                json!({"type": "message_start", "message": {"model": huge}})
            }
            Api::Gemini => json!({"modelVersion": huge}),
            _ => json!({"type": "response.created", "response": {"model": huge}}),
        });
        let c = s.text("a").end().run().1.unwrap();
        let model = c.model.unwrap();
        assert!(model.chars().count() <= MAX_LABEL + 1, "{api:?}");
        assert_eq!(c.message.model.as_deref(), Some(&*model));
    }
}

// ---- truncation ----

#[test]
fn a_stream_cut_before_its_end_is_truncated() {
    for api in APIS {
        let (_, r) = Script::new(api).text("partial").call("c", "f", "{").run();
        assert!(matches!(r, Err(DecodeError::Truncated)), "{api:?}: {r:?}");
        let shown = DecodeError::Truncated.to_string();
        assert!(!shown.contains("[DONE]"), "{shown}");
    }
}

// ---- ATTACKS.md, streams and decoders ----

#[test]
fn absurd_usage_figures_cost_nothing() {
    let max = u64::MAX;
    for api in APIS {
        let mut s = Script::new(api).text("a");
        s.push(match api {
            Api::ChatCompletions => json!({"choices": [],
                "usage": {"prompt_tokens": max, "completion_tokens": max, "total_tokens": max}}),
            Api::AnthropicMessages => json!({"type": "message_delta", "delta": {},
                "usage": {"input_tokens": max, "output_tokens": max}}),
            Api::Gemini => json!({"usageMetadata": {"promptTokenCount": max,
                "candidatesTokenCount": max, "cachedContentTokenCount": max,
                "thoughtsTokenCount": max}}),
            _ => json!({"type": "response.in_progress"}),
        });
        let s = match api {
            Api::OpenAiResponses => s.raw(
                &json!({"type": "response.completed", "response": {"status": "completed",
                    "usage": {"input_tokens": max, "output_tokens": max,
                              "input_tokens_details": {"cached_tokens": max}}}})
                .to_string(),
            ),
            _ => s.end(),
        };
        let c = s.run().1.unwrap();
        assert_eq!(c.message.content, "a", "{api:?}");
    }
}

#[test]
fn strings_where_integers_belong_do_not_break_the_answer() {
    let events = |api: Api| -> Vec<Value> {
        match api {
            Api::ChatCompletions => vec![
                json!({"choices": [{"index": "0", "delta": {"content": "x"}}]}),
                json!({"choices": [], "usage": {"prompt_tokens": "1"}}),
            ],
            Api::AnthropicMessages => vec![
                json!({"type": "content_block_start", "index": "7",
                    "content_block": {"type": "text", "text": ""}}),
                json!({"type": "message_delta", "delta": {}, "usage": {"output_tokens": "9"}}),
            ],
            Api::Gemini => vec![
                json!({"candidates": [{"index": "0", "content": {"parts": [{"text": "x"}]}}]}),
                json!({"usageMetadata": {"promptTokenCount": "1"}}),
            ],
            _ => vec![
                json!({"type": "response.output_text.delta", "item_id": "m",
                    "output_index": "0", "delta": "x"}),
                json!({"type": "response.in_progress", "response": {"usage": {"input_tokens": "1"}}}),
            ],
        }
    };
    for api in APIS {
        let mut s = Script::new(api).text("a");
        for e in events(api) {
            s.push(e);
        }
        // Skipped as of an unexpected shape: the answer is intact.
        let c = s.end().run().1.unwrap();
        assert_eq!(c.message.content, "a", "{api:?}");
    }
}

#[test]
fn huge_negative_and_out_of_order_indices() {
    let max = u64::MAX;
    // Huge indices are only numbers: the answer stands.
    for api in APIS {
        let mut s = Script::new(api);
        s.next = max - 1;
        let c = s.call("b", "g", "{}").end().run().1.unwrap();
        assert_eq!(c.message.tool_calls.len(), 1, "{api:?}");
    }
    for api in APIS {
        let mut s = Script::new(api).text("a");
        s.push(match api {
            Api::ChatCompletions => json!({"choices": [{"index": 0, "delta": {"tool_calls":
                [{"index": -1, "id": "n", "function": {"name": "f", "arguments": "{}"}}]}}]}),
            Api::AnthropicMessages => json!({"type": "content_block_start", "index": -1,
                "content_block": {"type": "tool_use", "id": "n", "name": "f"}}),
            Api::Gemini => json!({"candidates": [{"index": -1, "content": {"parts":
                [{"functionCall": {"id": "n", "name": "f", "args": {}}}]}}]}),
            _ => json!({"type": "response.output_item.added", "output_index": -1,
                "item": {"type": "function_call", "id": "n", "call_id": "n", "name": "f"}}),
        });
        // A negative index is not an index: the event is skipped.
        let c = s.end().run().1.unwrap();
        assert!(c.message.tool_calls.is_empty(), "{api:?}");
    }
    // Out of order: a chat call whose index 1 comes before 0 is listed by
    // index.
    let c = Script::new(Api::ChatCompletions)
        .raw(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}"#)
        .raw(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#)
        .end()
        .run()
        .1
        .unwrap();
    let ids: Vec<_> = c.message.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
}

#[test]
fn naming_a_block_never_started_or_already_finished() {
    // Anthropic: a delta or stop for a block that never started or
    // already stopped.
    for late in [
        json!({"type": "content_block_delta", "index": 5,
            "delta": {"type": "text_delta", "text": "x"}}),
        json!({"type": "content_block_stop", "index": 5}),
    ] {
        let (_, r) = Script::new(Api::AnthropicMessages)
            .raw(&late.to_string())
            .end()
            .run();
        assert!(protocol(Api::AnthropicMessages, r).contains("never started"));
    }
    let mut s = Script::new(Api::AnthropicMessages).text("a");
    s.push(json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": "x"}}));
    let m = protocol(Api::AnthropicMessages, s.end().run().1);
    assert!(m.contains("already stopped"), "{m}");
    // Responses: arguments for an item never announced.
    let (_, r) = Script::new(Api::OpenAiResponses)
        .raw(r#"{"type":"response.function_call_arguments.delta","item_id":"ghost","delta":"{"}"#)
        .end()
        .run();
    assert!(protocol(Api::OpenAiResponses, r).contains("unknown output item"));
    // Chat completions has no block lifecycle: a piece for a call index
    // never named begins that call, and a nameless one is refused at the
    // end (the identity rule).
    let (_, r) = Script::new(Api::ChatCompletions)
        .raw(r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"arguments":"{}"}}]}}]}"#)
        .end()
        .run();
    assert!(protocol(Api::ChatCompletions, r).contains("has no name"));
}

// ---- cost per event ----

#[test]
fn many_distinct_items_finish() {
    // Issue 36 item 3: each delta under a new item id (or block index)
    // used to search every item before it. No timing assertion: the test
    // finishing is the point (60,000 never finished before).
    const N: usize = 60_000;
    let mut s = Script::new(Api::OpenAiResponses);
    for _ in 0..N {
        s = s.text("x");
    }
    let c = s.end().run().1.unwrap();
    assert_eq!(c.message.content.len(), N);
    let mut s = Script::new(Api::AnthropicMessages);
    for _ in 0..N / 3 {
        s = s.text("x");
    }
    let c = s.end().run().1.unwrap();
    assert_eq!(c.message.content.len(), N / 3);
    // Gemini: calls under distinct ids (the identity check is one pass).
    let mut s = Script::new(Api::Gemini);
    for i in 0..N / 3 {
        s = s.call(&format!("c{i}"), "f", "{}");
    }
    let c = s.end().run().1.unwrap();
    assert_eq!(c.message.tool_calls.len(), N / 3);
}

// ---- finish reasons ----

#[test]
fn finish_reasons_per_api() {
    use crate::FinishReason as F;
    for (reason, calls, want) in [
        (Some("stop"), false, F::Complete),
        (None, false, F::Complete),
        (Some("stop"), true, F::ToolCalls),
        (Some("tool_calls"), true, F::ToolCalls),
        (Some("function_call"), true, F::ToolCalls),
        (Some("length"), false, F::Length),
        (Some("content_filter"), false, F::Filtered),
        (Some("eos"), false, F::ServerCut),
    ] {
        assert_eq!(chat_finish(reason, calls), want, "chat {reason:?} {calls}");
    }
    for (reason, calls, want) in [
        (Some("end_turn"), false, F::Complete),
        (Some("stop_sequence"), false, F::Complete),
        (Some("pause_turn"), false, F::Complete),
        (None, false, F::Complete),
        (Some("end_turn"), true, F::ToolCalls),
        (Some("tool_use"), true, F::ToolCalls),
        (Some("max_tokens"), false, F::Length),
        (Some("model_context_window_exceeded"), false, F::Length),
        (Some("refusal"), false, F::Filtered),
        (Some("a_new_reason"), false, F::ServerCut),
    ] {
        assert_eq!(
            anthropic_finish(reason, calls),
            want,
            "anthropic {reason:?} {calls}"
        );
    }
    for (status, incomplete, refused, calls, want) in [
        (Some("completed"), None, false, false, F::Complete),
        (None, None, false, false, F::Complete),
        (Some("completed"), None, false, true, F::ToolCalls),
        (Some("completed"), None, true, false, F::Filtered),
        (Some("incomplete"), None, false, false, F::Length),
        (
            Some("incomplete"),
            Some("max_output_tokens"),
            false,
            false,
            F::Length,
        ),
        (
            Some("incomplete"),
            Some("content_filter"),
            false,
            false,
            F::Filtered,
        ),
        (
            Some("incomplete"),
            Some("other"),
            false,
            false,
            F::ServerCut,
        ),
        (Some("cancelled"), None, false, false, F::ServerCut),
    ] {
        assert_eq!(
            responses_finish(status, incomplete, refused, calls),
            want,
            "responses {status:?} {incomplete:?}"
        );
    }
}

#[test]
fn gemini_finish_reasons() {
    use crate::FinishReason as F;
    for (reason, blocked, calls, want) in [
        (Some("STOP"), false, false, F::Complete),
        (Some("STOP"), false, true, F::ToolCalls),
        (Some("MAX_TOKENS"), false, false, F::Length),
        (Some("SAFETY"), false, false, F::Filtered),
        (Some("RECITATION"), false, false, F::Filtered),
        (Some("PROHIBITED_CONTENT"), false, false, F::Filtered),
        (None, true, false, F::Filtered),
        (Some("STOP"), true, false, F::Filtered),
        (Some("MALFORMED_FUNCTION_CALL"), false, true, F::ServerCut),
        (Some("A_NEW_REASON"), false, false, F::ServerCut),
    ] {
        assert_eq!(
            gemini_finish(reason, blocked, calls),
            want,
            "gemini {reason:?} {blocked}"
        );
    }
}

#[test]
fn each_stream_maps_its_own_end_to_a_finish_reason() {
    for api in APIS {
        let c = Script::new(api).text("a").end().run().1.unwrap();
        assert_eq!(c.finish(), crate::FinishReason::Complete, "{api:?}");
        let c = Script::new(api).call("c", "f", "{}").end().run().1.unwrap();
        assert_eq!(c.finish(), crate::FinishReason::ToolCalls, "{api:?}");
    }
}

#[test]
fn floats_deep_nesting_and_lone_surrogates() {
    for api in APIS {
        // A float where an integer belongs: the figure is dropped or the
        // event skipped, the answer stands.
        let mut s = Script::new(api).text("a");
        s.push(match api {
            Api::ChatCompletions => {
                json!({"choices": [], "usage": {"prompt_tokens": 1.5, "completion_tokens": -3}})
            }
            Api::AnthropicMessages => json!({"type": "message_delta", "delta": {},
                "usage": {"input_tokens": 1.5, "output_tokens": -3}}),
            Api::Gemini => json!({"usageMetadata": {"promptTokenCount": 1.5,
                "candidatesTokenCount": -3}}),
            _ => json!({"type": "response.in_progress", "response": {"usage": {"input_tokens": 1.5}}}),
        });
        assert_eq!(s.end().run().1.unwrap().message.content, "a", "{api:?}");
        // JSON nested 100,000 deep, where a member is read as any JSON:
        // the parser's depth limit refuses it (or the event is skipped),
        // never a stack overflow, and nothing of it lands in the answer.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let deep = match api {
            Api::ChatCompletions => format!(r#"{{"choices":[],"extra":{deep}}}"#),
            Api::AnthropicMessages => format!(r#"{{"type":"error","error":{deep}}}"#),
            Api::Gemini => format!(r#"{{"error":{deep}}}"#),
            _ => format!(r#"{{"type":"response.output_item.added","item":{deep}}}"#),
        };
        let (_, r) = Script::new(api).raw(&deep).end().run();
        match r {
            Err(DecodeError::Protocol(_)) => {}
            Ok(c) => assert_eq!(c.message.content, "", "{api:?}"),
            other => panic!("{api:?}: {other:?}"),
        }
        // A lone surrogate escape in a text: skipped or refused, never a
        // panic, and never in the answer.
        let text = match api {
            Api::ChatCompletions => r#"{"choices":[{"index":0,"delta":{"content":"\ud800"}}]}"#,
            Api::AnthropicMessages => {
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ud800"}}"#
            }
            Api::Gemini => r#"{"candidates":[{"content":{"parts":[{"text":"\ud800"}]}}]}"#,
            _ => r#"{"type":"response.output_text.delta","item_id":"m","delta":"\ud800"}"#,
        };
        let mut s = Script::new(api);
        if api == Api::AnthropicMessages {
            s.push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}));
        }
        let (_, r) = s.raw(text).end().run();
        match r {
            Err(DecodeError::Protocol(_)) => {}
            Ok(c) => assert_eq!(c.message.content, "", "{api:?}"),
            other => panic!("{api:?}: {other:?}"),
        }
    }
}

#[test]
fn a_hundred_thousand_calls_and_pieces_of_one_call_decode_in_one_pass() {
    // ATTACKS.md, cost per event: 100,000 events under distinct ids, and
    // 100,000 under one id, on every API. No timing assertion: a search
    // over everything seen per event (10^10 steps here) never finishes.
    const N: usize = 100_000;
    for api in APIS {
        let mut s = Script::new(api);
        for i in 0..N {
            s = s.call(&format!("c{i}"), "f", "{}");
        }
        let c = s.end().run().1.unwrap();
        assert_eq!(c.message.tool_calls.len(), N, "{api:?}");
        assert_eq!(
            c.message.tool_calls[N - 1].id,
            format!("c{}", N - 1),
            "{api:?}"
        );
    }
    // One call, its arguments in 100,000 pieces (Gemini sends a call
    // whole: its id in 100,000 chunks is the repeated id the identity rule
    // refuses, found in one pass too).
    for api in APIS {
        let mut s = Script::new(api);
        let piece = match api {
            Api::ChatCompletions => {
                json!({"choices": [{"index": 0, "delta": {"tool_calls":
                    [{"index": 0, "function": {"arguments": "1"}}]}}]})
            }
            Api::AnthropicMessages => json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "1"}}),
            Api::Gemini => gemini_parts(&json!([{"functionCall":
                {"id": "one", "name": "f", "args": {}}}])),
            _ => json!({"type": "response.function_call_arguments.delta",
                "item_id": "fc_0", "output_index": 0, "delta": "1"}),
        }
        .to_string();
        match api {
            Api::ChatCompletions => s.push(json!({"choices": [{"index": 0, "delta":
                {"tool_calls": [{"index": 0, "id": "one", "type": "function",
                                 "function": {"name": "f", "arguments": "["}}]}}]})),
            Api::AnthropicMessages => {
                s.push(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": "one", "name": "f", "input": {}}}));
                s.push(json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": "["}}));
            }
            Api::Gemini => {}
            _ => {
                s.push(
                    json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "function_call", "id": "fc_0", "call_id": "one",
                         "name": "f", "arguments": ""}}),
                );
                s.push(json!({"type": "response.function_call_arguments.delta",
                    "item_id": "fc_0", "output_index": 0, "delta": "["}));
            }
        }
        for _ in 0..N {
            s.push(&piece);
        }
        if api == Api::AnthropicMessages {
            s.push(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "]"}}));
            s.push(json!({"type": "content_block_stop", "index": 0}));
        }
        let (_, r) = s.end().run();
        if api == Api::Gemini {
            assert!(protocol(api, r).contains("duplicate tool call id"));
            continue;
        }
        let c = r.unwrap_or_else(|e| panic!("{api:?}: {e}"));
        assert_eq!(c.message.tool_calls.len(), 1, "{api:?}");
        let args = &c.message.tool_calls[0].arguments;
        assert!(
            args.len() > N && args.starts_with("[1"),
            "{api:?}: {}",
            args.len()
        );
    }
}

#[test]
fn a_placeholder_key_is_no_secret_in_an_answer() {
    // `ollama`, `EMPTY`, `none`: what local servers take for a key. The
    // model's words that spell one stay in its answer (streamed and not);
    // a real key's length is redacted.
    for (key, text, want) in [
        ("none", "none of them", "none of them"),
        ("ollama", "ask ollama", "ask ollama"),
        (
            "sk-0123456789abcdef",
            "k sk-0123456789abcdef",
            "k <redacted>",
        ),
    ] {
        for api in APIS {
            let mut body = String::new();
            for d in &Script::new(api).text(text).end().data {
                body.push_str("data: ");
                body.push_str(d);
                body.push_str("\n\n");
            }
            let options = StreamOptions {
                api,
                max_line: 1 << 24,
                max_body: 1 << 32,
                split_think: false,
                secret: Some(key),
            };
            let c = read_stream(body.as_bytes(), &options, &mut Count(0)).unwrap();
            assert_eq!(c.message.content, want, "{api:?} {key}");
        }
    }
    assert_eq!(answer_secret(Some(" 0123456789ab ")), Some("0123456789ab"));
    assert_eq!(answer_secret(Some("0123456789a")), None);
}
