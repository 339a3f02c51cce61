//! Streamed chunks → one assistant message: text and reasoning as they
//! arrive, tool calls assembled by index. The [rules](super#rules) are in
//! the decode docs.

use std::collections::HashMap;

use super::shapes::OpaqueDelta;
use super::shapes::{Args, Body, CallDelta, Delta, MaybeStr, Str};
use super::think::ThinkSplitter;
use super::{
    Completion, Fragment, Opaque, StreamDecoder, StreamState, call_data, completion, excerpt,
    opaque_of,
};
use crate::protocol::error::DecodeError;
use crate::protocol::rules;
use crate::{ToolCall, Usage};

/// Turns streamed chunks into one assistant message. See the
/// [decode docs](super#rules) for the rules.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    /// `Some` when `<think>` tags are split out of the content.
    think: Option<ThinkSplitter>,
    content: String,
    reasoning: String,
    /// Provider fields of the message.
    opaque: Opaque,
    /// In order of first appearance; sorted by index in `finish`.
    calls: Vec<PartialCall>,
    /// Position in `calls` of each index (a server may send thousands of
    /// calls: no linear search per delta).
    slots: HashMap<u64, usize>,
    /// The highest index seen.
    max_index: Option<u64>,
    /// Index of the last tool-call delta, for deltas without one.
    last_index: Option<u64>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    /// The answer's id: the first chunk that names one.
    id: Option<String>,
    /// Progress, `[DONE]`, the secret redacted from quoted chunks.
    stream: StreamState,
}

/// Whether a delta carries any part of the answer.
fn carries_something(delta: &Delta<'_>) -> bool {
    let text = |s: Option<&str>| s.is_some_and(|s| !s.is_empty());
    text(delta.content.as_ref().map(|s| &*s.0))
        || text(delta.reasoning_content.as_ref().map(|s| &*s.0))
        || matches!(&delta.reasoning, Some(MaybeStr(Some(r))) if !r.is_empty())
        || delta.tool_calls.iter().flatten().any(|c| {
            c.id.as_ref().is_some_and(|s| !s.0.is_empty())
                || c.function.as_ref().is_some_and(|f| {
                    f.name.as_ref().is_some_and(|n| !n.0.is_empty())
                        || f.arguments.as_ref().is_some_and(|a| !a.0.is_empty())
                })
        })
}

/// A tool call being assembled.
#[derive(Debug)]
struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
    /// The call's provider fields (first wins).
    data: Option<serde_json::Value>,
}

impl Accumulator {
    /// An empty accumulator; `split_think` moves `<think>` blocks in the
    /// content to the reasoning.
    pub(crate) fn new(split_think: bool) -> Accumulator {
        Accumulator {
            think: split_think.then(ThinkSplitter::default),
            ..Accumulator::default()
        }
    }

    /// A copy that redacts `secret` from the chunks it quotes in log lines.
    pub(crate) fn redacting(mut self, secret: Option<&str>) -> Accumulator {
        self.stream = StreamState::new(secret);
        self
    }
}

/// Progress counts chunks with text, reasoning, a tool-call piece, a
/// finish reason, new usage figures, or `[DONE]`, the end event.
impl StreamDecoder for Accumulator {
    fn state(&self) -> &StreamState {
        &self.stream
    }

    /// One event's data: a JSON chunk or `[DONE]`.
    fn event(
        &mut self,
        data: &str,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<(), DecodeError> {
        if data.trim_ascii() == "[DONE]" {
            self.stream.end();
            self.release_held(on_fragment);
            return Ok(());
        }
        let chunk: Body<'_> = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            // Valid JSON of another shape (a keep-alive object, a member of
            // an unexpected type): servers add such chunks, and failing the
            // run over one would be worse than skipping it.
            Err(e) if e.is_data() => {
                log::warn!(
                    "skipping stream chunk of unexpected shape ({e}): {}",
                    crate::util::redact(&excerpt(data), self.stream.secret())
                );
                return Ok(());
            }
            // Not JSON at all: the stream is broken, not merely unusual.
            Err(e) => {
                return Err(DecodeError::Protocol(format!(
                    "malformed stream chunk ({e}): {}",
                    excerpt(data)
                )));
            }
        };
        // Servers report a failure after the 200 status as an `error`
        // chunk (OpenAI, vLLM, OpenRouter): the answer will not come.
        if let Some(error) = &chunk.error {
            return Err(rules::server_error("in stream", Some(error)));
        }
        // The first model named wins: routers may name a different backend
        // in later chunks, and the request went to the first.
        if self.model.is_none()
            && let Some(Str(model)) = &chunk.model
        {
            self.model = rules::model_name(model);
        }
        if self.id.is_none()
            && let Some(Str(id)) = &chunk.id
        {
            self.id = rules::response_id(id);
        }
        if let Some(usage) = &chunk.usage {
            let usage = usage.to_usage();
            if self.stream.progress.usage(usage) {
                self.usage = Some(usage);
                on_fragment(Fragment::Usage(usage));
            }
        }
        // By reference: the choice structs are large, moving them costs.
        for choice in chunk.choices.iter().flatten() {
            // Only choice 0 is ours (`n > 1` is never requested); a missing
            // index means 0.
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = &choice.delta {
                // Provider fields, read apart (rarely there).
                let opaque = if delta.has_opaque() {
                    opaque_of(data)
                } else {
                    None
                };
                let details = opaque.as_ref().is_some_and(|o| {
                    matches!(o.reasoning_details(), Some(serde_json::Value::Array(a)) if !a.is_empty())
                });
                if details || carries_something(delta) {
                    self.stream.progress.made();
                }
                self.apply_delta(delta, opaque.as_ref(), on_fragment);
            }
            if let Some(Str(reason)) = &choice.finish_reason
                && !reason.is_empty()
            {
                // The same reason again is not news (a server repeating
                // it would otherwise hold the run past the idle bound).
                // Some servers send `""` mid-stream; only a real reason
                // ends the content, and releases text held for a tag.
                let reason = rules::bounded(reason, rules::MAX_LABEL);
                if self.finish_reason.as_deref() != Some(&*reason) {
                    self.stream.progress.made();
                    self.finish_reason = Some(reason.into_owned());
                }
                self.release_held(on_fragment);
            }
        }
        Ok(())
    }

    /// The complete message; `Err(Truncated)` when neither `[DONE]` nor a
    /// finish reason arrived.
    fn finish(mut self) -> Result<Completion, DecodeError> {
        // A `finish_reason` without `[DONE]` is complete (some servers omit
        // `[DONE]`); neither means the connection was cut.
        if !self.stream.is_done() && self.finish_reason.is_none() {
            return Err(DecodeError::Truncated);
        }
        self.release_held(&mut |_| {});
        // Unstable is enough: each index has one slot.
        self.calls.sort_unstable_by_key(|c| c.index);
        let calls = self
            .calls
            .into_iter()
            // A slot opened by a delta that carried nothing (an empty
            // `tool_calls` entry) is not a call.
            .filter(|c| {
                !(c.id.is_empty()
                    && c.name.is_empty()
                    && c.arguments.is_empty()
                    && c.data.is_none())
            })
            .map(|c| {
                let id = if c.id.is_empty() {
                    format!("call_{}", c.index)
                } else {
                    c.id
                };
                let mut call = ToolCall::new(id, c.name, c.arguments);
                call.provider_data = c.data;
                call
            })
            .collect();
        completion(
            self.content,
            self.reasoning,
            calls,
            self.opaque,
            self.finish_reason.as_deref(),
            self.usage,
            self.model,
            self.id,
        )
    }
}

impl Accumulator {
    fn apply_delta(
        &mut self,
        delta: &Delta<'_>,
        opaque: Option<&OpaqueDelta>,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) {
        let Accumulator {
            think,
            content,
            reasoning,
            ..
        } = self;
        let mut emit = |f: Fragment<'_>| {
            match f {
                Fragment::Content(s) => content.push_str(s),
                Fragment::Reasoning(s) => reasoning.push_str(s),
                Fragment::Usage(_) => {}
            }
            on_fragment(f);
        };
        let reasoning_content = delta.reasoning_content.as_ref().map(|s| &*s.0);
        if let Some(r) = reasoning_content.filter(|r| !r.is_empty()) {
            emit(Fragment::Reasoning(r));
        }
        // `reasoning` (OpenRouter) after `reasoning_content`: servers that
        // fill both send the same text, which is taken once.
        if let Some(MaybeStr(Some(r))) = &delta.reasoning
            && !r.is_empty()
            && reasoning_content != Some(&**r)
        {
            emit(Fragment::Reasoning(r));
        }
        if let Some(Str(text)) = &delta.content
            && !text.is_empty()
        {
            match think {
                Some(splitter) => splitter.push(text, &mut emit),
                None => emit(Fragment::Content(text)),
            }
        }
        if let Some(o) = opaque {
            self.opaque.add(o.reasoning_details(), o.extra_content());
        }
        for (i, call) in delta.tool_calls.iter().flatten().enumerate() {
            self.apply_call(call, opaque.and_then(|o| o.call_extra(i)));
        }
    }

    /// `extra`: the call's `extra_content`, if the delta carried one.
    fn apply_call(&mut self, call: &CallDelta<'_>, extra: Option<&serde_json::Value>) {
        let id = call.id.as_ref().map(|s| &*s.0).filter(|id| !id.is_empty());
        // Servers that omit `index` (some Ollama and proxy versions) send
        // the fragments of one call in a row: continue the last call unless
        // a new id says a new one began.
        let index = match (call.index, self.last_index) {
            (Some(index), _) => index,
            (None, None) => 0,
            (None, Some(last)) => {
                let last_id = self.slots.get(&last).map(|&at| &*self.calls[at].id);
                match (id, last_id) {
                    // After the highest index: an index of `u64::MAX` has
                    // no successor, and the new call continues that one
                    // (a hostile server gets a garbled call, not a panic).
                    (Some(id), Some(last_id)) if !last_id.is_empty() && last_id != id => {
                        self.max_index.unwrap_or(0).saturating_add(1)
                    }
                    _ => last,
                }
            }
        };
        self.last_index = Some(index);
        self.max_index = self.max_index.max(Some(index));
        let at = *self.slots.entry(index).or_insert_with(|| {
            self.calls.push(PartialCall {
                index,
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
                data: None,
            });
            self.calls.len() - 1
        });
        let slot = &mut self.calls[at];
        // Servers repeat the id in every delta of a call: the first wins.
        if let Some(id) = id
            && slot.id.is_empty()
        {
            id.clone_into(&mut slot.id);
        }
        // Gemini sends the signature once, in one delta of the call.
        if extra.is_some() && slot.data.is_none() {
            slot.data = call_data(extra);
        }
        let Some(function) = &call.function else {
            return;
        };
        // A repeated name is ignored; a different one is the next piece of
        // a name sent in fragments.
        if let Some(Str(name)) = &function.name
            && !name.is_empty()
            && slot.name != *name
        {
            slot.name.push_str(name);
        }
        if let Some(Args(arguments)) = &function.arguments {
            slot.arguments.push_str(arguments);
        }
    }

    /// Release text held back by the think splitter (end of content).
    fn release_held(&mut self, on_fragment: &mut dyn FnMut(Fragment<'_>)) {
        let Accumulator {
            think: Some(think),
            content,
            reasoning,
            ..
        } = self
        else {
            return;
        };
        think.flush(&mut |f| {
            match f {
                Fragment::Content(s) => content.push_str(s),
                Fragment::Reasoning(s) => reasoning.push_str(s),
                Fragment::Usage(_) => {}
            }
            on_fragment(f);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;
    use crate::protocol::decode::parse_response;
    use crate::test_util::Rng;
    use serde_json::json;

    /// Run `chunks` through an accumulator: the fragments seen and the result.
    fn run(
        split_think: bool,
        chunks: &[String],
    ) -> (Vec<(bool, String)>, Result<Completion, DecodeError>) {
        let mut acc = Accumulator::new(split_think);
        let mut frags = Vec::new();
        for chunk in chunks {
            let pushed = acc.push_data(chunk, &mut |f| match f {
                Fragment::Content(s) => frags.push((false, s.to_owned())),
                Fragment::Reasoning(s) => frags.push((true, s.to_owned())),
                Fragment::Usage(_) => {}
            });
            if let Err(e) = pushed {
                return (frags, Err(e));
            }
        }
        (frags, acc.finish())
    }

    /// The message of a protocol error (the client prefixes it with
    /// "protocol error: " when it maps it to `Error::Protocol`).
    fn protocol_message(e: DecodeError) -> String {
        match e {
            DecodeError::Protocol(m) => m,
            other => panic!("not a protocol error: {other:?}"),
        }
    }

    fn ok(split_think: bool, chunks: &[String]) -> (Vec<(bool, String)>, Completion) {
        let (frags, result) = run(split_think, chunks);
        (frags, result.unwrap())
    }

    fn delta(delta: &serde_json::Value) -> String {
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        .to_string()
    }

    fn text(t: &str) -> String {
        delta(&json!({"content": t}))
    }

    fn finish(reason: &str) -> String {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
    }

    fn done() -> String {
        "[DONE]".to_owned()
    }

    fn concat(frags: &[(bool, String)], reasoning: bool) -> String {
        frags
            .iter()
            .filter(|f| f.0 == reasoning)
            .map(|f| &*f.1)
            .collect()
    }

    #[test]
    fn provider_fields_odd_shapes() {
        // `null` members are absent; a lone object where a list belongs is
        // one item; a call's signature in a later delta without an index
        // lands on the call it continues; an unparsable second reading
        // (here impossible: same text) would simply yield none.
        let (_, c) = ok(
            false,
            &[
                delta(&json!({"content": "a", "reasoning_details": null, "extra_content": null})),
                finish("stop"),
            ],
        );
        assert_eq!(c.message.provider_data, None);
        let (_, c) = ok(
            false,
            &[
                delta(&json!({"reasoning_details": {"type": "reasoning.text", "text": "x"}})),
                delta(
                    &json!({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]}),
                ),
                delta(
                    &json!({"tool_calls": [{"extra_content": {"google": {"thought_signature": "s"}}}]}),
                ),
                delta(
                    &json!({"tool_calls": [{"extra_content": {"google": {"thought_signature": "later"}}}]}),
                ),
                finish("tool_calls"),
            ],
        );
        let data = c.message.provider_data.expect("provider data");
        assert_eq!(
            data.items,
            [json!({"reasoning_details": [{"type": "reasoning.text", "text": "x"}]})]
        );
        assert_eq!((data.endpoint.as_str(), data.model.as_str()), ("", ""));
        assert_eq!(
            c.message.tool_calls[0].provider_data,
            Some(json!({"extra_content": {"google": {"thought_signature": "s"}}}))
        );
    }

    #[test]
    fn content_stream() {
        let (frags, c) = ok(
            false,
            &[
                delta(&json!({"role": "assistant", "content": ""})),
                text("Hel"),
                text("lo \"w\u{f6}rld\"\n"),
                finish("stop"),
                done(),
            ],
        );
        assert_eq!(
            frags,
            [(false, "Hel".into()), (false, "lo \"wörld\"\n".into())]
        );
        assert_eq!(c.message, {
            let mut m = Message::assistant("Hello \"wörld\"\n");
            m.model = Some("m".into());
            m
        });
        assert_eq!(c.finish(), crate::FinishReason::Complete);
        assert_eq!(c.model.as_deref(), Some("m"));
        assert_eq!(c.usage, None);
    }

    #[test]
    fn interleaved_tool_calls() {
        let call = |index: u64, f: serde_json::Value| {
            delta(&json!({"tool_calls": [{"index": index, "function": f}]}))
        };
        let chunks = [
            delta(
                &json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                         "function": {"name": "search", "arguments": ""}}]}),
            ),
            delta(
                &json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                         "function": {"name": "read", "arguments": "{\"pa"}}]}),
            ),
            call(0, json!({"arguments": "{\"q\":"})),
            call(1, json!({"arguments": "th\":"})),
            call(0, json!({"arguments": "\"rust\"}"})),
            call(1, json!({"arguments": "\"a.txt\"}"})),
            finish("tool_calls"),
            done(),
        ];
        let (frags, c) = ok(false, &chunks);
        assert!(frags.is_empty());
        assert_eq!(
            c.message.tool_calls,
            [
                ToolCall::new("call_a", "search", "{\"q\":\"rust\"}"),
                ToolCall::new("call_b", "read", "{\"path\":\"a.txt\"}"),
            ]
        );
        assert_eq!(c.message.content, "");
        assert_eq!(c.finish(), crate::FinishReason::ToolCalls);
    }

    #[test]
    fn tool_calls_ordered_by_index_with_late_and_repeated_ids() {
        let chunks = [
            // Index 1 first, id and name arriving late and repeated.
            delta(&json!({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]})),
            delta(
                &json!({"tool_calls": [{"index": 0, "function": {"name": "a", "arguments": "["}}]}),
            ),
            delta(&json!({"tool_calls": [{"index": 1, "id": "x", "function": {"name": "b"}}]})),
            delta(
                &json!({"tool_calls": [{"index": 1, "id": "x", "function": {"name": "b", "arguments": null}}]}),
            ),
            delta(
                &json!({"tool_calls": [{"index": 0, "id": null, "function": {"arguments": "]"}}]}),
            ),
            finish("tool_calls"),
        ];
        let (_, c) = ok(false, &chunks);
        assert_eq!(
            c.message.tool_calls,
            [
                ToolCall::new("call_0", "a", "[]"),
                ToolCall::new("x", "b", "{}")
            ]
        );
    }

    #[test]
    fn tool_calls_without_index() {
        let chunks = [
            delta(
                &json!({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{\"x\""}}]}),
            ),
            delta(&json!({"tool_calls": [{"function": {"arguments": ":1}"}}]})),
            // A new id without an index starts a new call.
            delta(
                &json!({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
            ),
            // Name sent in pieces.
            delta(&json!({"tool_calls": [{"index": 5, "function": {"name": "get_"}}]})),
            delta(&json!({"tool_calls": [{"index": 5, "function": {"name": "weather"}}]})),
            done(),
        ];
        let (_, c) = ok(false, &chunks);
        assert_eq!(
            c.message.tool_calls,
            [
                ToolCall::new("a", "f", "{\"x\":1}"),
                ToolCall::new("b", "g", "{}"),
                ToolCall::new("call_5", "get_weather", ""),
            ]
        );
    }

    #[test]
    fn reasoning_in_both_field_names() {
        let chunks = [
            delta(&json!({"reasoning_content": "Let me ", "content": null})),
            delta(&json!({"reasoning": "think. "})),
            // Some servers send both with the same text: taken once.
            delta(&json!({"reasoning": "Done.", "reasoning_content": "Done."})),
            // `reasoning` of another shape is ignored.
            delta(&json!({"reasoning": {"effort": "high"}, "content": "42"})),
            finish("stop"),
        ];
        let (frags, c) = ok(false, &chunks);
        assert_eq!(
            frags,
            [
                (true, "Let me ".into()),
                (true, "think. ".into()),
                (true, "Done.".into()),
                (false, "42".into())
            ]
        );
        assert_eq!(c.message.reasoning.as_deref(), Some("Let me think. Done."));
        assert_eq!(c.message.content, "42");
    }

    #[test]
    fn usage_only_final_chunk() {
        let usage = json!({"id": "c1", "model": "gpt-x", "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                      "prompt_tokens_details": {"cached_tokens": 60, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 7}}});
        let (_, c) = ok(
            false,
            &[text("hi"), finish("stop"), usage.to_string(), done()],
        );
        let expected = Usage::from_parts(Some(40), Some(20), Some(60), None, Some(7));
        assert_eq!(c.usage, Some(expected));
        assert_eq!(c.message.usage, Some(expected));
        assert_eq!(expected.context_used(), 100);
        // The first model named wins.
        assert_eq!(c.model.as_deref(), Some("m"));
    }

    #[test]
    fn usage_variants() {
        let parse = |u: serde_json::Value| {
            let chunk = json!({"choices": [], "usage": u}).to_string();
            ok(false, &[chunk, done()]).1.usage.unwrap()
        };
        // Cache reads larger than the prompt (a server bug) saturate.
        assert_eq!(
            parse(json!({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}})),
            Usage::from_parts(Some(0), None, Some(9), None, None)
        );
        for details in [
            json!({"cached_tokens": 10, "cache_creation_tokens": 30}),
            json!({"cached_tokens": 10, "cache_creation_input_tokens": 30}),
            json!({"cached_tokens": 10, "cache_write_tokens": 30}),
        ] {
            let u = parse(json!({"prompt_tokens": 100, "completion_tokens": 1,
                                 "prompt_tokens_details": details}));
            assert_eq!(
                u,
                Usage::from_parts(Some(60), Some(1), Some(10), Some(30), None)
            );
            assert_eq!(u.context_used(), 100);
        }
        assert_eq!(parse(json!({})), Usage::default());
        // null usage in ordinary chunks is not usage.
        let chunk = json!({"choices": [], "usage": null}).to_string();
        assert_eq!(ok(false, &[chunk, done()]).1.usage, None);
    }

    #[test]
    fn unknown_fields_and_shapes_are_ignored() {
        let chunks = [
            json!({"object": "chat.completion.chunk", "system_fingerprint": "fp",
                   "choices": [{"index": 0, "logprobs": null,
                                "delta": {"content": "a", "refusal": null, "extra": [1, {"x": 2}]}}],
                   "x_groq": {"id": "q"}})
            .to_string(),
            // Another choice (n > 1) is not mixed in.
            json!({"choices": [{"index": 1, "delta": {"content": "OTHER"}}]}).to_string(),
            json!({}).to_string(),
            json!({"choices": null}).to_string(),
            json!({"choices": []}).to_string(),
            "\"keep-alive\"".to_owned(),
            "42".to_owned(),
            json!([1, 2]).to_string(),
            json!({"choices": [{"delta": {"content": 5}}]}).to_string(),
            json!({"choices": [{"delta": {"content": "b"}, "finish_reason": "eos_custom"}],
                   "timings": {"predicted_per_second": 50.1}})
            .to_string(),
            json!({"error": null, "choices": [{"delta": {}}]}).to_string(),
        ];
        let (frags, c) = ok(false, &chunks);
        assert_eq!(concat(&frags, false), "ab");
        assert_eq!(c.message.content, "ab");
        assert_eq!(c.finish(), crate::FinishReason::ServerCut);
    }

    #[test]
    fn only_the_choices_of_index_0_of_one_chunk_are_read_in_order() {
        let chunks = [json!({"choices": [
            {"index": 1, "delta": {"content": "X"}},
            {"index": 0, "delta": {"content": "a"}},
            {"index": 2, "delta": {"content": "Y"}},
            {"delta": {"content": "b"}, "finish_reason": "stop"},
        ]})
        .to_string()];
        let (frags, c) = ok(false, &chunks);
        assert_eq!(concat(&frags, false), "ab");
        assert_eq!(c.message.content, "ab");
        let body = json!({"choices": [
            {"index": 1, "message": {"role": "assistant", "content": "X"}},
            {"index": 0, "message": {"role": "assistant", "content": "a"}, "finish_reason": "stop"},
        ]})
        .to_string();
        let c = parse_response(body.as_bytes(), false).unwrap();
        assert_eq!(c.message.content, "a");
    }

    #[test]
    fn truncated_stream() {
        let (frags, result) = run(false, &[text("Hel"), text("lo")]);
        assert_eq!(frags.len(), 2);
        assert!(matches!(result, Err(DecodeError::Truncated)));
        assert!(matches!(run(false, &[]).1, Err(DecodeError::Truncated)));
        // An empty finish_reason (some servers send it mid-stream) is none.
        assert!(matches!(
            run(false, &[text("a"), finish("")]).1,
            Err(DecodeError::Truncated)
        ));
    }

    #[test]
    fn finish_reason_without_done_and_done_without_finish_reason() {
        let (_, c) = ok(false, &[text("x"), finish("length")]);
        assert_eq!(
            (c.message.content.as_str(), c.finish()),
            ("x", crate::FinishReason::Length)
        );
        let (_, c) = ok(false, &[text("x"), done()]);
        assert_eq!(
            (c.message.content.as_str(), c.finish()),
            ("x", crate::FinishReason::Complete)
        );
    }

    #[test]
    fn data_after_done_is_ignored() {
        let mut acc = Accumulator::new(false);
        acc.push_data(&text("a"), &mut |_| {}).unwrap();
        assert!(!acc.is_done());
        acc.push_data(" [DONE] ", &mut |_| {}).unwrap();
        assert!(acc.is_done());
        acc.push_data(&text("b"), &mut |_| panic!("after done"))
            .unwrap();
        acc.push_data("{not json", &mut |_| {}).unwrap();
        assert_eq!(acc.finish().unwrap().message.content, "a");
    }

    #[test]
    fn error_chunk() {
        let err = run(
            false,
            &[
                text("a"),
                json!({"error": {"message": "overloaded", "code": 529}}).to_string(),
            ],
        )
        .1
        .unwrap_err();
        // A status-like code is that status (the shared rule).
        assert!(
            matches!(&err, DecodeError::Status { status: 529, message }
                if message == "server error in stream: overloaded (529)"),
            "{err:?}"
        );
        let err = run(false, &[json!({"error": "boom"}).to_string()])
            .1
            .unwrap_err();
        assert_eq!(protocol_message(err), "server error in stream: boom");
        let err = run(false, &[json!({"error": {"code": 1}}).to_string()])
            .1
            .unwrap_err();
        assert_eq!(
            protocol_message(err),
            "server error in stream: {\"code\":1} (1)"
        );
    }

    #[test]
    fn malformed_chunk() {
        let err = run(false, &["{\"choices\": [".to_owned()]).1.unwrap_err();
        let DecodeError::Protocol(msg) = &err else {
            panic!("{err:?}")
        };
        assert!(
            msg.starts_with("malformed stream chunk (EOF while parsing"),
            "{msg}"
        );
        assert!(msg.ends_with("): {\"choices\": ["), "{msg}");

        let long = format!("{{\"content\": \"{}", "é".repeat(500));
        let DecodeError::Protocol(msg) = run(false, &[long]).1.unwrap_err() else {
            panic!()
        };
        let quoted = msg.split_once("): ").unwrap().1;
        assert_eq!(quoted.chars().count(), 203, "{quoted}");
        assert!(quoted.ends_with("é..."));
    }

    /// `<think>` splitting: content chunked at every char boundary (once and
    /// twice) gives the same fragments, and no partial tag leaks.
    #[test]
    fn think_tags_split_at_every_offset() {
        let sample = "<think>\nLet me think: a<b, </thi</think>\n\n The answer: <b>42</b> \u{e9}<";
        let reasoning = "\nLet me think: a<b, </thi";
        let content = "The answer: <b>42</b> \u{e9}<";
        let check = |pieces: &[&str]| {
            let mut chunks: Vec<String> = pieces.iter().map(|p| text(p)).collect();
            chunks.push(finish("stop"));
            let (frags, c) = ok(true, &chunks);
            assert_eq!(concat(&frags, false), content, "{pieces:?}");
            assert_eq!(concat(&frags, true), reasoning, "{pieces:?}");
            assert_eq!(c.message.content, content);
            assert_eq!(c.message.reasoning.as_deref(), Some(reasoning));
            for (_, f) in &frags {
                assert!(!f.is_empty());
                assert!(!f.contains("think>"), "{f:?}");
            }
            let first_content = frags.iter().find(|f| !f.0).unwrap();
            assert!(
                !first_content.1.starts_with(char::is_whitespace),
                "{frags:?}"
            );
        };
        let bounds: Vec<usize> = (0..=sample.len())
            .filter(|&i| sample.is_char_boundary(i))
            .collect();
        for &a in &bounds {
            check(&[&sample[..a], &sample[a..]]);
            for &b in bounds.iter().filter(|&&b| b >= a) {
                check(&[&sample[..a], &sample[a..b], &sample[b..]]);
            }
        }
        let chars: Vec<String> = sample.chars().map(String::from).collect();
        check(&chars.iter().map(String::as_str).collect::<Vec<_>>());
    }

    #[test]
    fn think_tags_edge_cases() {
        let split = |pieces: &[&str]| {
            let mut chunks: Vec<String> = pieces.iter().map(|p| text(p)).collect();
            chunks.push(done());
            let (frags, c) = ok(true, &chunks);
            assert_eq!(concat(&frags, false), c.message.content);
            (c.message.content, c.message.reasoning.unwrap_or_default())
        };
        assert_eq!(split(&["plain"]), ("plain".into(), String::new()));
        assert_eq!(
            split(&["<think></think>", "\n\n", "  ", "x"]),
            ("x".into(), String::new())
        );
        // Unterminated think: everything is reasoning.
        assert_eq!(
            split(&["<think>abc", "</th"]),
            (String::new(), "abc</th".into())
        );
        // Text before the block stays content; whitespace inside stays.
        assert_eq!(
            split(&["Hi <thi", "nk> r </think> there"]),
            ("Hi there".into(), " r ".into())
        );
        // Held text that never became a tag is released at [DONE].
        assert_eq!(split(&["a <", "b <th"]), ("a <b <th".into(), String::new()));
        // Reasoning from the field and from tags both land in reasoning.
        let chunks = [
            delta(&json!({"reasoning_content": "R1 "})),
            text("<think>R2</think>C"),
            finish("stop"),
        ];
        let (_, c) = ok(true, &chunks);
        assert_eq!(
            (c.message.content.as_str(), c.message.reasoning.as_deref()),
            ("C", Some("R1 R2"))
        );
        // Without split_think tags are content.
        let (_, c) = ok(false, &[text("<think>r</think>c"), done()]);
        assert_eq!(c.message.content, "<think>r</think>c");
        assert_eq!(c.message.reasoning, None);
    }

    #[test]
    fn property_random_chunk_sequences() {
        const WORDS: &[&str] = &[
            "<think>", "</think>", "<", "</", "<th", "ink>", "\n", " ", "a", "é", "\"", "{",
        ];
        let mut rng = Rng(0x1234_5678_9ABC_DEF1);
        let word = |rng: &mut Rng| -> String {
            (0..rng.below(4))
                .map(|_| WORDS[rng.below(WORDS.len())])
                .collect()
        };
        for round in 0..2000 {
            let mut chunks = Vec::new();
            for _ in 0..rng.below(12) {
                let w = word(&mut rng);
                let index = rng.below(3);
                chunks.push(match rng.below(12) {
                    0..=3 => text(&w),
                    4 => delta(&json!({"reasoning_content": w})),
                    5 => delta(&json!({"reasoning": w})),
                    6 => delta(
                        &json!({"tool_calls": [{"index": index, "id": format!("id{index}"),
                                                     "function": {"name": "f", "arguments": w}}]}),
                    ),
                    7 => delta(&json!({"tool_calls": [{"function": {"arguments": w}}]})),
                    8 => json!({"choices": [], "usage": {"prompt_tokens": index}}).to_string(),
                    9 => finish("stop"),
                    10 => {
                        // Random bytes, or a valid chunk cut short.
                        let c = text(&w);
                        let cut = rng.below(c.len() + 1);
                        if rng.below(2) == 0 {
                            c[..cut].to_owned()
                        } else {
                            (0..rng.below(20))
                                .map(|_| char::from(rng.below(128) as u8))
                                .collect()
                        }
                    }
                    _ => done(),
                });
            }
            let split_think = round % 2 == 0;
            let ends_done = chunks.last().is_some_and(|c| c == "[DONE]");
            let (frags, result) = run(split_think, &chunks);
            match result {
                Ok(c) => {
                    if ends_done {
                        assert_eq!(concat(&frags, false), c.message.content, "{chunks:?}");
                        assert_eq!(
                            concat(&frags, true),
                            c.message.reasoning.unwrap_or_default()
                        );
                    }
                    let mut ids: Vec<_> =
                        c.message.tool_calls.iter().map(|t| t.id.clone()).collect();
                    ids.dedup();
                    assert_eq!(ids.len(), c.message.tool_calls.len());
                }
                Err(DecodeError::Protocol(m)) => assert!(m.len() < 400, "{m}"),
                Err(DecodeError::Truncated) => {}
                Err(e) => panic!("unexpected error {e:?}"),
            }
            let body: String = chunks.concat();
            let _ = parse_response(body.as_bytes(), split_think);
            crate::protocol::fuzz::__fuzz_accumulate(body.as_bytes());
        }
    }

    /// `n` text-delta events as a typical server sends them, then `[DONE]`.
    fn bench_input(n: usize) -> Vec<u8> {
        let mut input = Vec::new();
        for i in 0..n {
            let chunk = json!({"id": "chatcmpl-8f3a2b", "object": "chat.completion.chunk",
                "created": 1_700_000_000, "model": "qwen3-30b",
                "choices": [{"index": 0, "delta": {"content": format!(" tok{}", i % 100)},
                             "finish_reason": null}]});
            input.extend_from_slice(format!("data: {chunk}\n\n").as_bytes());
        }
        input.extend_from_slice(b"data: [DONE]\n\n");
        input
    }

    /// The baseline of [`throughput`]: owned, minimal typed structs.
    struct BChunk {
        #[allow(dead_code, reason = "parsed like a real client would")]
        model: Option<String>,
        choices: Vec<BChoice>,
    }
    crate::serde_macros::json_struct! { Deserialize for BChunk { model, choices } }
    struct BChoice {
        delta: BDelta,
        finish_reason: Option<String>,
    }
    crate::serde_macros::json_struct! { Deserialize for BChoice { delta, finish_reason } }
    struct BDelta {
        content: Option<String>,
    }
    crate::serde_macros::json_struct! { Deserialize for BDelta { content } }

    /// Chunks/s through `read_sse` + `Accumulator`, against a baseline that
    /// splits lines and parses each `data:` line into owned typed structs.
    /// Run with `cargo test --release --lib -- --ignored --nocapture throughput`.
    #[test]
    #[ignore = "timing; run in release mode"]
    fn throughput() {
        use crate::protocol::sse::{Flow, read_sse};
        use std::time::Instant;

        const N: usize = 200_000;
        let input = bench_input(N);
        println!("average event size {} bytes", input.len() / N);

        let mut best = (f64::MAX, f64::MAX);
        for _ in 0..5 {
            let start = Instant::now();
            let mut acc = Accumulator::new(false);
            let mut n = 0usize;
            read_sse(
                std::io::BufReader::new(&input[..]),
                1 << 20,
                &mut |d| {
                    acc.push_data(d, &mut |_| n += 1)?;
                    Ok(if acc.is_done() {
                        Flow::Stop
                    } else {
                        Flow::Continue
                    })
                },
                &mut || {},
            )
            .unwrap();
            let c = acc.finish().unwrap();
            let ours = start.elapsed().as_secs_f64();
            assert_eq!(n, N);
            assert!(c.message.content.len() > N);

            let start = Instant::now();
            let mut content = String::new();
            for line in std::io::BufRead::lines(std::io::BufReader::new(&input[..])) {
                let line = line.unwrap();
                let Some(data) = line.strip_prefix("data: ") else {
                    continue;
                };
                if data == "[DONE]" {
                    break;
                }
                let chunk: BChunk = serde_json::from_str(data).unwrap();
                for choice in chunk.choices {
                    if let Some(t) = choice.delta.content {
                        content.push_str(&t);
                    }
                    let _ = choice.finish_reason;
                }
            }
            let base = start.elapsed().as_secs_f64();
            assert_eq!(content, c.message.content);
            best = (best.0.min(ours), best.1.min(base));
        }
        // Breakdown: the SSE parser alone, the accumulator alone.
        let datas: Vec<&str> = input
            .split(|&b| b == b'\n')
            .filter_map(|l| l.strip_prefix(b"data: "))
            .map(|d| std::str::from_utf8(d).unwrap())
            .collect();
        let (mut sse_only, mut acc_only) = (f64::MAX, f64::MAX);
        for _ in 0..5 {
            let start = Instant::now();
            let mut n = 0usize;
            read_sse(
                std::io::BufReader::new(&input[..]),
                1 << 20,
                &mut |d| {
                    n += d.len();
                    Ok(Flow::Continue)
                },
                &mut || {},
            )
            .unwrap();
            sse_only = sse_only.min(start.elapsed().as_secs_f64());
            assert!(n > 0);
            let start = Instant::now();
            let mut acc = Accumulator::new(false);
            for d in &datas {
                acc.push_data(d, &mut |_| {}).unwrap();
            }
            acc.finish().unwrap();
            acc_only = acc_only.min(start.elapsed().as_secs_f64());
        }
        println!(
            "sse alone: {:.0} events/s; accumulator alone: {:.0} chunks/s",
            N as f64 / sse_only,
            N as f64 / acc_only
        );
        let (ours, base) = (N as f64 / best.0, N as f64 / best.1);
        println!(
            "parser+accumulator: {ours:.0} chunks/s; baseline: {base:.0} chunks/s; ratio {:.2}",
            ours / base
        );
    }
}
