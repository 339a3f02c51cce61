//! A non-streamed chat-completions response body → one [`Completion`],
//! under the same [rules](super#rules) as the stream.

use super::shapes::{Body, Str, WireUsage};
use super::think::ThinkSplitter;
use super::{Completion, Fragment, Opaque, call_data, completion, excerpt, opaque_of};
use crate::ToolCall;
use crate::protocol::error::DecodeError;
use crate::protocol::rules;

/// Parse a non-streamed chat-completions response body.
pub(crate) fn parse_response(body: &[u8], split_think: bool) -> Result<Completion, DecodeError> {
    // Quoted in errors: the first KiB is enough to show what the server
    // sent instead (an HTML error page, a proxy's message).
    let body_text = || String::from_utf8_lossy(&body[..body.len().min(1024)]);
    let response: Body<'_> = crate::util::json_from_slice(body).map_err(|e| {
        let sent = rules::quoted_body(body);
        DecodeError::Protocol(format!("malformed response ({e}): {sent}"))
    })?;
    if let Some(error) = &response.error {
        return Err(rules::server_error("in response", Some(error)));
    }
    // Only choice 0 is read (`n > 1` is not requested); a missing index
    // means 0, as some servers omit it.
    let Some(choice) = response
        .choices
        .into_iter()
        .flatten()
        .find(|c| c.index.unwrap_or(0) == 0)
    else {
        return Err(DecodeError::Protocol(format!(
            "response has no choices: {}",
            excerpt(&body_text())
        )));
    };
    let Some(message) = choice.message.map(|m| *m) else {
        return Err(DecodeError::Protocol(format!(
            "response choice has no message: {}",
            excerpt(&body_text())
        )));
    };
    let mut content = String::new();
    let mut reasoning = String::new();
    // Provider fields, read apart when the message has any (see
    // `opaque_of`); the body parsed, so it is UTF-8.
    let extras = if message.has_opaque() {
        std::str::from_utf8(body).ok().and_then(opaque_of)
    } else {
        None
    };
    let mut opaque = Opaque::default();
    if let Some(o) = &extras {
        opaque.add(o.reasoning_details(), o.extra_content());
    }
    let reasoning_content = message.reasoning_content.map(|s| s.0);
    if let Some(r) = &reasoning_content {
        reasoning.push_str(r);
    }
    // Servers that send both fields send the same text twice: take it once.
    if let Some(r) = message.reasoning.and_then(|r| r.0)
        && reasoning_content.as_deref() != Some(&*r)
    {
        reasoning.push_str(&r);
    }
    if let Some(Str(text)) = message.content {
        if split_think {
            let mut emit = |f: Fragment<'_>| match f {
                Fragment::Content(s) => content.push_str(s),
                Fragment::Reasoning(s) => reasoning.push_str(s),
                Fragment::Usage(_) => {}
            };
            let mut splitter = ThinkSplitter::default();
            splitter.push(&text, &mut emit);
            splitter.flush(&mut emit);
        } else {
            content = text.into_owned();
        }
    }
    let calls = message
        .tool_calls
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, call)| {
            // Without an id the call could not be answered: give it one
            // from its position, as the stream does from its index.
            let id = match call.id {
                Some(Str(id)) if !id.is_empty() => id.into_owned(),
                _ => format!("call_{i}"),
            };
            let (name, arguments) = match call.function {
                Some(f) => (
                    f.name.map(|s| s.0.into_owned()).unwrap_or_default(),
                    f.arguments.map(|a| a.0.into_owned()).unwrap_or_default(),
                ),
                None => (String::new(), String::new()),
            };
            let mut tool_call = ToolCall::new(id, name, arguments);
            tool_call.provider_data = call_data(extras.as_ref().and_then(|o| o.call_extra(i)));
            tool_call
        })
        .collect();
    completion(
        content,
        reasoning,
        calls,
        opaque,
        choice.finish_reason.as_ref().map(|s| &*s.0),
        response.usage.as_deref().map(WireUsage::to_usage),
        response.model.and_then(|s| rules::model_name(&s.0)),
        response.id.and_then(|s| rules::response_id(&s.0)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, Usage};
    use serde_json::json;

    #[test]
    fn parse_response_text() {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "qwen3",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Hi \"there\"", "reasoning_content": "hmm"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3},
            "timings": {"prompt_n": 10}
        });
        let c = parse_response(body.to_string().as_bytes(), false).unwrap();
        let mut m = Message::assistant("Hi \"there\"");
        m.reasoning = Some("hmm".into());
        m.usage = Some(Usage::from_parts(Some(10), Some(3), None, None, None));
        m.model = Some("qwen3".into());
        assert_eq!(c.message, m);
        assert_eq!(c.finish(), crate::FinishReason::Complete);
        assert_eq!(c.usage, m.usage);
        assert_eq!(c.model.as_deref(), Some("qwen3"));
    }

    #[test]
    fn parse_response_tool_calls_null_content_object_arguments() {
        let body = json!({
            "choices": [{"finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null, "reasoning": "use tools",
                "tool_calls": [
                    {"id": "call_9", "type": "function",
                     "function": {"name": "add", "arguments": "{\"a\":1}"}},
                    {"type": "function", "function": {"name": "mul", "arguments": {"a": 2, "b": [3]}}},
                    {"id": "", "function": {"name": "noargs"}}
                ]}}]
        });
        let c = parse_response(body.to_string().as_bytes(), false).unwrap();
        assert_eq!(c.message.content, "");
        assert_eq!(c.message.reasoning.as_deref(), Some("use tools"));
        assert_eq!(
            c.message.tool_calls,
            [
                ToolCall::new("call_9", "add", "{\"a\":1}"),
                ToolCall::new("call_1", "mul", "{\"a\":2,\"b\":[3]}"),
                ToolCall::new("call_2", "noargs", ""),
            ]
        );
        assert_eq!(c.finish(), crate::FinishReason::ToolCalls);
        assert_eq!((c.usage, c.model), (None, None));
    }

    #[test]
    fn parse_response_split_think() {
        let body = json!({"choices": [{"message": {"content": "<think>r</think>\n\nanswer"}}]});
        let c = parse_response(body.to_string().as_bytes(), true).unwrap();
        assert_eq!(c.message.content, "answer");
        assert_eq!(c.message.reasoning.as_deref(), Some("r"));
        let c = parse_response(body.to_string().as_bytes(), false).unwrap();
        assert_eq!(c.message.content, "<think>r</think>\n\nanswer");
    }

    #[test]
    fn parse_response_errors() {
        let msg = |body: &[u8]| match parse_response(body, false) {
            Err(DecodeError::Protocol(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(msg(b"{\"choices\":").starts_with("malformed response (EOF"));
        // A page is summarized, not quoted as markup (issue 28).
        assert!(
            msg(b"<html>502 Bad Gateway</html>")
                .ends_with("): an HTML page saying \"502 Bad Gateway\" (28 bytes), not an API answer: check the base URL")
        );
        assert_eq!(msg(b"{}"), "response has no choices: {}");
        assert_eq!(
            msg(b"{\"choices\":[]}"),
            "response has no choices: {\"choices\":[]}"
        );
        assert!(
            msg(b"{\"choices\":[{\"index\":0}]}").starts_with("response choice has no message")
        );
        assert_eq!(
            msg(br#"{"error":{"message":"bad key","type":"auth"}}"#),
            "server error in response: bad key (auth)"
        );
        let long = vec![b'x'; 10_000];
        assert!(msg(&long).len() < 300);
        assert!(msg(b"\xff\xfe").contains("\u{fffd}"));
    }
}
