//! Hooks for the crate's own benchmarks (`benches/`). **Not part of the API**:
//! compiled only with the internal `_bench` feature, hidden from the docs,
//! exempt from semver, and may change or vanish in any release. Each item is
//! a thin wrapper over a `pub(crate)` path, so the benches measure the code
//! the agent runs.

use std::io::BufRead;

use crate::listener::ListenerList;
use crate::protocol::{Fragment, Fragments, StreamOptions, decode_error, read_stream};
use crate::{Event, HttpConfig, Message, Result};

/// Decode a streamed chat-completions body exactly as the client does after
/// the socket (SSE parser, then the delta accumulator), passing the text
/// and reasoning to `on_fragment` as the client does (joined per read).
/// Returns the assembled message.
pub fn decode_stream<R: BufRead>(reader: R, on_fragment: &mut dyn FnMut(&str)) -> Result<Message> {
    decode_stream_of(crate::Api::ChatCompletions, reader, on_fragment)
}

/// [`decode_stream`] for a stream of `api`'s wire format.
pub fn decode_stream_of<R: BufRead>(
    api: crate::Api,
    reader: R,
    on_fragment: &mut dyn FnMut(&str),
) -> Result<Message> {
    let cfg = HttpConfig::default();
    let mut on = |f: Fragment<'_>| match f {
        Fragment::Content(s) | Fragment::Reasoning(s) => on_fragment(s),
        Fragment::Usage(_) => {}
    };
    let options = StreamOptions {
        api,
        max_line: cfg.max_line_bytes,
        max_body: cfg.max_body_bytes,
        split_think: false,
        secret: None,
    };
    read_stream(reader, &options, &mut Fragments(&mut on))
        .map(|c| c.message)
        .map_err(|e| decode_error(e, &cfg, None, None))
}

/// [`ListenerList`]'s crate-private `emit`: deliver `event` to every listener.
pub fn emit(list: &ListenerList, event: Event) {
    list.emit(event);
}

/// Wait until every listener handled every event emitted so far.
pub fn flush(list: &ListenerList) {
    list.flush_all();
}
