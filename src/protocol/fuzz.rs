//! Fuzzing hooks for `fuzz/` (cargo-fuzz builds with `--cfg fuzzing`, and
//! only then are they re-exported at the crate root). Not part of the API;
//! the unit tests run them too.

#[cfg(feature = "anthropic")]
use super::anthropic;
#[cfg(feature = "responses")]
use super::decode::Fragment;
use super::decode::{Accumulator, StreamDecoder, parse_response};
use super::sse::{Flow, SseParser, read_sse};

/// Feeds `data` through the SSE parser whole and in pieces, and through
/// `read_sse`, and checks that all three agree. Panics only on a bug.
pub fn __fuzz_sse(data: &[u8]) {
    fn run(input: &[u8], step: usize, max_line: usize) -> (Vec<String>, Option<String>) {
        let mut parser = SseParser::new(max_line);
        let mut events = Vec::new();
        let mut on = |d: &str| {
            events.push(d.to_owned());
            Ok(())
        };
        for piece in input.chunks(step) {
            if let Err(e) = parser.feed(piece, &mut on) {
                return (events, Some(e.to_string()));
            }
        }
        let err = parser.finish(&mut on).err().map(|e| e.to_string());
        (events, err)
    }

    let (max_line, step, input) = match data {
        [a, b, rest @ ..] => {
            let max_line = if *a == 255 { 1 << 20 } else { usize::from(*a) };
            (max_line, usize::from(*b).max(1), rest)
        }
        _ => (64, 1, data),
    };
    let whole = run(input, input.len().max(1), max_line);
    assert_eq!(
        run(input, step, max_line),
        whole,
        "split at every {step} bytes"
    );
    let mut events = Vec::new();
    let reader = std::io::BufReader::with_capacity(step, input);
    let result = read_sse(
        reader,
        max_line,
        &mut |d| {
            events.push(d.to_owned());
            Ok(Flow::Continue)
        },
        &mut || {},
    );
    assert_eq!(
        (events, result.err().map(|e| e.to_string())),
        whole,
        "read_sse"
    );
}

/// Feeds each line of `data` (after a first byte choosing `split_think`) to
/// an `Accumulator`, then the whole of it to `parse_response`. Errors are
/// expected; a panic (or a failing `finish` after `[DONE]`) is a bug.
pub fn __fuzz_accumulate(data: &[u8]) {
    let Some((&first, data)) = data.split_first() else {
        return;
    };
    let split_think = first & 1 == 1;
    let mut acc = Accumulator::new(split_think);
    for line in data.split(|&b| b == b'\n') {
        if let Ok(line) = std::str::from_utf8(line) {
            let _ = acc.push_data(line, &mut |_| {});
        }
    }
    let done = acc.is_done();
    let result = acc.finish();
    assert!(!done || result.is_ok(), "finish after [DONE] failed");
    let _ = parse_response(data, split_think);
}

/// Feeds each line of `data` (after a first byte choosing `split_think`) to
/// the Responses stream decoder, then the whole of it to its body parser.
/// Errors are expected; a panic is a bug, and so is a finished message
/// whose text or reasoning differs from the fragments reported for it, or
/// a `finish` that fails after the end event.
#[cfg(feature = "responses")]
pub fn __fuzz_responses(data: &[u8]) {
    let Some((&first, data)) = data.split_first() else {
        return;
    };
    let split_think = first & 1 == 1;
    let mut decoder = super::responses::Decoder::new(split_think, None);
    let (mut content, mut reasoning) = (String::new(), String::new());
    let mut failed = false;
    for line in data.split(|&b| b == b'\n') {
        if let Ok(line) = std::str::from_utf8(line) {
            let pushed = decoder.push_data(line, &mut |f| match f {
                Fragment::Content(s) => content.push_str(s),
                Fragment::Reasoning(s) => reasoning.push_str(s),
                Fragment::Usage(_) => {}
            });
            // The stream reader stops at the first error.
            if pushed.is_err() {
                failed = true;
                break;
            }
        }
    }
    let done = decoder.is_done();
    let result = decoder.finish();
    assert!(
        failed || !done || result.is_ok(),
        "finish after the end event failed"
    );
    if let (false, Ok(c)) = (failed, &result) {
        assert_eq!(c.message.content, content, "content = its fragments");
        assert_eq!(
            c.message.reasoning.as_deref().unwrap_or(""),
            reasoning,
            "reasoning = its fragments"
        );
    }
    let _ = super::responses::parse_response(data, split_think);
}

/// Feeds each line of `data` (after a first byte choosing `split_think`)
/// to the Anthropic stream decoder, then the whole of it to its
/// non-streamed parser; each decoded message is encoded again as the
/// history of a Messages request, which must be valid JSON. Errors are
/// expected; a panic, a failing `finish` after `message_stop` or an
/// invalid request body is a bug.
#[cfg(feature = "anthropic")]
pub fn __fuzz_anthropic(data: &[u8]) {
    let Some((&first, data)) = data.split_first() else {
        return;
    };
    let split_think = first & 1 == 1;
    let mut decoder = anthropic::Decoder::new(split_think, None);
    for line in data.split(|&b| b == b'\n') {
        if let Ok(line) = std::str::from_utf8(line) {
            let _ = decoder.push_data(line, &mut |_| {});
        }
    }
    let done = decoder.is_done();
    let result = decoder.finish();
    assert!(!done || result.is_ok(), "finish after message_stop failed");
    let parsed = anthropic::parse_response(data, split_think);
    let transport = crate::ChatTransport::new("m").with_api(crate::Api::AnthropicMessages);
    let tools = super::ToolSpecs::default();
    let extra = serde_json::Map::new();
    let mut buf = Vec::new();
    for completion in [result, parsed].into_iter().flatten() {
        let mut message = completion.message;
        // As `wire::stamp_origin` does after a real request: the thinking goes
        // back.
        if let Some(pd) = &mut message.provider_data {
            pd.endpoint = transport.base_or_default().to_string();
            pd.model = "m".to_string();
        }
        let messages = [crate::Message::user("q"), message];
        let req = super::Request {
            transport: &transport,
            system: Some("s"),
            messages: &messages,
            trailing_system: None,
            tools: &tools,
            settings: &crate::protocol::settings::NONE,
            response_schema: None,
            stream: true,
            replay_reasoning: true,
            prompt_caching: true,
            split_think,
            extra: &extra,
            cancel: None,
            traceparent: None,
        };
        anthropic::write_body(&req, &mut buf);
        assert!(
            serde_json::from_slice::<serde_json::Value>(&buf).is_ok(),
            "invalid request body"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::Rng;

    #[test]
    fn fuzz_hooks_smoke() {
        let mut rng = Rng(7);
        for _ in 0..500 {
            let len = rng.below(300);
            let data: Vec<u8> = (0..len)
                .map(|_| match rng.below(6) {
                    0 => b'\n',
                    1 => b'\r',
                    2 => b':',
                    3 => b'd',
                    _ => rng.next() as u8,
                })
                .collect();
            __fuzz_sse(&data);
            __fuzz_accumulate(&data);
            #[cfg(feature = "responses")]
            __fuzz_responses(&data);
            #[cfg(feature = "anthropic")]
            __fuzz_anthropic(&data);
        }
        #[cfg(feature = "anthropic")]
        __fuzz_anthropic(b"");
        #[cfg(feature = "anthropic")]
        __fuzz_anthropic(
            b"\x00{\"type\":\"message_start\",\"message\":{}}\n\
              {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"signature\":\"s\"}}\n\
              {\"type\":\"message_stop\"}",
        );
        __fuzz_sse(b"");
        __fuzz_sse(b"\x10\x03data: a\r\n\r\ndata: b");
        __fuzz_accumulate(b"");
        #[cfg(feature = "responses")]
        __fuzz_responses(b"");
        #[cfg(feature = "responses")]
        __fuzz_responses(
            b"\x01{\"type\":\"response.output_text.delta\",\"delta\":\"<think>a\"}\n\
              {\"type\":\"response.completed\"}",
        );
    }
}
