//! Sans-IO server-sent-events parser.
//!
//! [`SseParser`] takes bytes in whatever pieces the network delivers them and
//! hands out the `data` of each complete event as a `&str`. It knows nothing
//! of sockets, HTTP, JSON or the chat-completions `[DONE]` marker; those live
//! in the client and in [`decode`](super::decode). [`read_sse`] is the thin
//! adapter that drives it from any [`BufRead`].
//!
//! # Semantics
//!
//! The parser follows the WHATWG EventSource "interpreting an event stream"
//! algorithm, restricted to what a chat-completions client needs:
//!
//! - Lines end in LF, CRLF or a lone CR. A CR that ends one `feed` and an LF
//!   that starts the next are one line ending.
//! - `data:value` and `data: value` both give `value` (one leading space is
//!   dropped). Several `data` lines in one event are joined with `"\n"`.
//! - A line starting with `:` is a comment. `event`, `id`, `retry` and
//!   unknown fields are ignored. A line without a colon is a field name with
//!   an empty value, so a bare `data` line contributes an empty data line.
//! - A blank line dispatches the event if it had at least one `data` line;
//!   an event without data dispatches nothing.
//! - A UTF-8 byte order mark at the very start of the stream is skipped.
//!
//! # Differences from the EventSource spec
//!
//! - At end of input ([`SseParser::finish_flow`]) an unterminated last line is
//!   still interpreted, and a pending event that has data is dispatched. The
//!   spec discards it, but servers routinely end with `data: [DONE]\n` and no
//!   blank line.
//! - The spec decodes the stream as UTF-8 with replacement characters. Here
//!   invalid UTF-8 in a `data` value is a [`DecodeError::Protocol`] naming the
//!   (1-based) line, because silently altered JSON is worse than an error.
//!   Invalid UTF-8 in comments and ignored fields is not an error.
//! - A line, or the joined data of one event, longer than `max_line` bytes
//!   is a [`DecodeError::Protocol`]. The parser never buffers more than about
//!   `max_line` bytes of a line or event, so a server that streams forever
//!   without a newline cannot exhaust memory.
//!
//! # Errors
//!
//! After `feed` or `finish` returned an error (its own or the callback's),
//! the stream is broken: drop the parser. Calling it again does not panic,
//! but the events it yields are unspecified.
//!
//! # Performance
//!
//! The common shape, `data: {...}\n\n` with both lines inside the current
//! buffer, is dispatched as a slice of the input: no copy and no allocation.
//! Only lines split across two feeds and multi-line events go through the
//! parser's own buffers, which keep their capacity between events.

use std::io::{self, BufRead};

use super::error::DecodeError;

type Result<T> = std::result::Result<T, DecodeError>;

/// What the caller of [`read_sse`] wants after one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Keep reading.
    Continue,
    /// Stop now without reading further (e.g. after `[DONE]`).
    Stop,
}

/// Parses SSE bytes into event data payloads. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct SseParser {
    /// Largest accepted line, and largest accepted event data, in bytes.
    max_line: usize,
    /// The start of a line whose end has not arrived yet.
    line: Vec<u8>,
    /// Data of the pending event, when it could not stay borrowed from the
    /// input (split line, several data lines, or carried across feeds).
    data: String,
    /// Whether the pending event had at least one `data` line.
    has_data: bool,
    /// The last feed ended in CR: an LF starting the next feed belongs to it.
    skip_lf: bool,
    /// Number of complete lines seen so far (for error messages).
    line_no: u64,
}

/// One interpreted line.
enum Line<'a> {
    /// An empty line: dispatch.
    Blank,
    /// A `data` field with this value (leading space already dropped).
    Data(&'a [u8]),
    /// A comment, an ignored field.
    Other,
}

impl SseParser {
    /// A parser refusing lines or events longer than `max_line` bytes.
    pub(crate) fn new(max_line: usize) -> SseParser {
        SseParser {
            max_line,
            line: Vec::new(),
            data: String::new(),
            has_data: false,
            skip_lf: false,
            line_no: 0,
        }
    }

    /// [`feed_flow`](Self::feed_flow) for a callback that never stops (tests
    /// and fuzzing; the client uses the `_flow` variants).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        on_data: &mut dyn FnMut(&str) -> Result<()>,
    ) -> Result<()> {
        self.feed_flow(bytes, &mut |d| on_data(d).map(|()| Flow::Continue))
            .map(|_| ())
    }

    /// [`finish_flow`](Self::finish_flow) for a callback that never stops.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn finish(&mut self, on_data: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
        self.finish_flow(&mut |d| on_data(d).map(|()| Flow::Continue))
            .map(|_| ())
    }

    /// Feed bytes; `on_data` gets the data of each complete event and may
    /// ask to stop. Returns `Flow::Stop` as soon as it did, without looking
    /// at the rest of `bytes`. An error from `on_data` stops parsing and is
    /// returned as is.
    pub(crate) fn feed_flow<F>(&mut self, bytes: &[u8], on_data: &mut F) -> Result<Flow>
    where
        F: FnMut(&str) -> Result<Flow> + ?Sized,
    {
        let mut pos = 0;
        // The last feed ended in CR: an LF here completes that CRLF, it is
        // not a blank line (which would dispatch early).
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                pos = 1;
            }
        }
        // Data of the pending event while it is a single line inside `bytes`
        // (the fast path); moved into `self.data` if the event continues.
        let mut borrowed: Option<&str> = None;
        let flow = loop {
            let rest = &bytes[pos..];
            let Some(i) = find_eol(rest) else {
                // No line end in this feed: keep the start of the line for
                // the next one, within the limit (a server that never sends
                // a newline must not grow this buffer without end).
                if self.line.len() + rest.len() > self.max_line {
                    return Err(self.too_long("line"));
                }
                self.line.extend_from_slice(rest);
                break Flow::Continue;
            };
            let end = pos + i;
            let mut next = end + 1;
            if bytes[end] == b'\r' {
                // CR may be followed by LF now, or at the start of the next
                // feed; both are one line ending.
                match bytes.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            // Fast path: the whole line is inside `bytes`, interpret it in
            // place. Otherwise it completes a line begun in an earlier feed.
            let flow = if self.line.is_empty() {
                let line = &bytes[pos..end];
                if line.len() > self.max_line {
                    return Err(self.too_long("line"));
                }
                self.line_no += 1;
                match self.interpret(line) {
                    Line::Blank => self.dispatch(&mut borrowed, on_data)?,
                    Line::Data(value) => {
                        let value = self.utf8(value)?;
                        self.push_borrowed(value, &mut borrowed)?;
                        Flow::Continue
                    }
                    Line::Other => Flow::Continue,
                }
            } else {
                if self.line.len() + (end - pos) > self.max_line {
                    return Err(self.too_long("line"));
                }
                self.line.extend_from_slice(&bytes[pos..end]);
                self.line_no += 1;
                self.owned_line(&mut borrowed, on_data)?
            };
            pos = next;
            if flow == Flow::Stop {
                break Flow::Stop;
            }
        };
        // An event still open at the end of the feed cannot keep borrowing
        // from `bytes`: copy it, the next feed may complete it.
        if let Some(value) = borrowed {
            self.data.push_str(value);
        }
        Ok(flow)
    }

    /// End of input: interpret an unterminated last line and dispatch a
    /// pending event that had data but no trailing blank line; `on_data`
    /// may ask to stop. The parser is empty afterwards and could start a
    /// new stream.
    pub(crate) fn finish_flow<F>(&mut self, on_data: &mut F) -> Result<Flow>
    where
        F: FnMut(&str) -> Result<Flow> + ?Sized,
    {
        self.skip_lf = false;
        let mut borrowed = None;
        let mut flow = Flow::Continue;
        if !self.line.is_empty() {
            self.line_no += 1;
            flow = self.owned_line(&mut borrowed, on_data)?;
        }
        if flow == Flow::Continue {
            flow = self.dispatch(&mut borrowed, on_data)?;
        }
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        self.line_no = 0;
        Ok(flow)
    }

    /// Interpret the line held in `self.line`, then clear it.
    fn owned_line<F>(&mut self, borrowed: &mut Option<&str>, on_data: &mut F) -> Result<Flow>
    where
        F: FnMut(&str) -> Result<Flow> + ?Sized,
    {
        // Taken out so that its contents can be read while `self` changes;
        // put back afterwards to keep the capacity.
        let line = std::mem::take(&mut self.line);
        let result = match self.interpret(&line) {
            Line::Blank => self.dispatch(borrowed, on_data),
            Line::Data(value) => match std::str::from_utf8(value) {
                Ok(value) => self.push_owned(value, borrowed).map(|()| Flow::Continue),
                Err(_) => Err(self.bad_utf8()),
            },
            Line::Other => Ok(Flow::Continue),
        };
        self.line = line;
        self.line.clear();
        result
    }

    /// Classify one complete line (without its line ending).
    fn interpret<'a>(&self, mut line: &'a [u8]) -> Line<'a> {
        if self.line_no == 1 {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            return Line::Blank;
        }
        // Fast path: almost every line of a chat stream is `data: ...`.
        if let Some(value) = line.strip_prefix(b"data:") {
            return Line::Data(value.strip_prefix(b" ").unwrap_or(value));
        }
        // A comment, another field, or a field name without a colon: only
        // a bare `data` matters (a data line with an empty value).
        if line == b"data" {
            Line::Data(b"")
        } else {
            Line::Other
        }
    }

    /// Add a data line whose value lives in the input being fed.
    fn push_borrowed<'a>(&mut self, value: &'a str, borrowed: &mut Option<&'a str>) -> Result<()> {
        if !self.has_data && self.data.is_empty() {
            if value.len() > self.max_line {
                return Err(self.too_long("event"));
            }
            self.has_data = true;
            *borrowed = Some(value);
            Ok(())
        } else {
            self.push_owned(value, borrowed)
        }
    }

    /// Add a data line by copying it into `self.data`.
    fn push_owned(&mut self, value: &str, borrowed: &mut Option<&str>) -> Result<()> {
        if let Some(first) = borrowed.take() {
            self.data.push_str(first);
        }
        let sep = usize::from(self.has_data);
        if self.data.len() + sep + value.len() > self.max_line {
            return Err(self.too_long("event"));
        }
        if self.has_data {
            self.data.push('\n');
        }
        self.data.push_str(value);
        self.has_data = true;
        Ok(())
    }

    /// Blank line (or end of input): hand out the pending event, if any.
    fn dispatch<F>(&mut self, borrowed: &mut Option<&str>, on_data: &mut F) -> Result<Flow>
    where
        F: FnMut(&str) -> Result<Flow> + ?Sized,
    {
        // Per the spec an event without data (only comments, `event:` or
        // `id:` lines) dispatches nothing.
        if !self.has_data {
            return Ok(Flow::Continue);
        }
        self.has_data = false;
        let flow = match borrowed.take() {
            Some(data) => on_data(data),
            None => on_data(&self.data),
        };
        self.data.clear();
        flow
    }

    fn utf8<'a>(&self, value: &'a [u8]) -> Result<&'a str> {
        std::str::from_utf8(value).map_err(|_| self.bad_utf8())
    }

    fn bad_utf8(&self) -> DecodeError {
        DecodeError::Protocol(format!(
            "invalid utf-8 in sse data on line {}",
            self.line_no
        ))
    }

    fn too_long(&self, what: &str) -> DecodeError {
        DecodeError::Protocol(format!("sse {what} exceeds {} bytes", self.max_line))
    }
}

/// Index of the first CR or LF in `bytes`.
///
/// Scans eight bytes at a time (SWAR): lines of a chat stream are one JSON
/// chunk each, a few hundred bytes, and the byte-by-byte loop would be the
/// parser's main cost.
fn find_eol(bytes: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const LF: u64 = LO * b'\n' as u64;
    const CR: u64 = LO * b'\r' as u64;
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let (lf, cr) = (word ^ LF, word ^ CR);
        // A byte of `x` is zero iff its high bit is set here; bits above
        // the lowest true zero may be false positives, never below it.
        let zero = (lf.wrapping_sub(LO) & !lf | cr.wrapping_sub(LO) & !cr) & HI;
        if zero != 0 {
            return Some(offset + (zero.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|i| offset + i)
}

/// Read an SSE stream from `reader` until end of input or until `on_data`
/// returns [`Flow::Stop`] (after which nothing more is read). `on_refill`
/// runs each time what was read is used up, before the next read, which
/// may wait for the network.
///
/// Works on the reader's own buffer (`fill_buf`/`consume`): events wholly
/// inside it are handed out without copying. A body that ends mid-frame
/// (`UnexpectedEof`: the server closed a chunked body early) is
/// [`DecodeError::Truncated`]; other I/O errors are classified by
/// [`DecodeError::from_io`].
pub(crate) fn read_sse<R: BufRead>(
    mut reader: R,
    max_line: usize,
    on_data: &mut dyn FnMut(&str) -> Result<Flow>,
    on_refill: &mut dyn FnMut(),
) -> Result<()> {
    let mut parser = SseParser::new(max_line);
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            // A signal interrupted the read: nothing was lost, read again.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // The stream was cut, like one that ended without `[DONE]`: the
            // same error, so callers need not tell the two apart.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(DecodeError::Truncated);
            }
            Err(e) => return Err(DecodeError::from_io(e)),
        };
        if buf.is_empty() {
            parser.finish_flow(on_data)?;
            return Ok(());
        }
        let n = buf.len();
        // On `Stop` the rest of the buffer is left unconsumed: nothing after
        // the last event is wanted, and reading on could block.
        if parser.feed_flow(buf, on_data)? == Flow::Stop {
            return Ok(());
        }
        reader.consume(n);
        on_refill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufReader, Read};

    /// Every event of `input` fed in one piece, as `Ok(events)` or the
    /// error's `Display` after the events before it.
    fn parse_pieces(
        input: &[u8],
        cuts: &[usize],
        max_line: usize,
    ) -> (Vec<String>, Option<String>) {
        let mut parser = SseParser::new(max_line);
        let mut events = Vec::new();
        let mut on = |d: &str| {
            events.push(d.to_owned());
            Ok(())
        };
        let mut start = 0;
        for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
            if let Err(e) = parser.feed(&input[start..cut], &mut on) {
                return (events, Some(shown(e)));
            }
            start = cut;
        }
        let err = parser.finish(&mut on).err().map(shown);
        (events, err)
    }

    /// An error as the user sees it once the client mapped it (a protocol
    /// error gets this prefix); other kinds by their `Debug`.
    fn shown(e: DecodeError) -> String {
        match e {
            DecodeError::Protocol(m) => format!("protocol error: {m}"),
            other => format!("{other:?}"),
        }
    }

    /// Parse `input` whole, split at every offset, split at every pair of
    /// offsets (for short inputs) and byte by byte: all must agree.
    fn parse_all_ways(input: &[u8], max_line: usize) -> (Vec<String>, Option<String>) {
        let whole = parse_pieces(input, &[], max_line);
        for cut in 0..=input.len() {
            assert_eq!(parse_pieces(input, &[cut], max_line), whole, "cut at {cut}");
        }
        if input.len() <= 64 {
            for a in 0..=input.len() {
                for b in a..=input.len() {
                    assert_eq!(
                        parse_pieces(input, &[a, b], max_line),
                        whole,
                        "cuts {a},{b}"
                    );
                }
            }
        }
        let singles: Vec<usize> = (1..input.len()).collect();
        assert_eq!(
            parse_pieces(input, &singles, max_line),
            whole,
            "single bytes"
        );
        whole
    }

    fn events(input: &str) -> Vec<String> {
        let (events, err) = parse_all_ways(input.as_bytes(), 1 << 20);
        assert_eq!(err, None);
        events
    }

    #[test]
    fn single_events() {
        assert_eq!(
            events("data: {\"a\":1}\n\ndata: [DONE]\n\n"),
            ["{\"a\":1}", "[DONE]"]
        );
    }

    #[test]
    fn data_with_or_without_space() {
        assert_eq!(
            events("data:x\n\ndata: y\n\ndata:  z\n\n"),
            ["x", "y", " z"]
        );
    }

    #[test]
    fn line_endings_lf_crlf_cr_mixed() {
        let expected = ["a", "b\nc", "d"];
        assert_eq!(
            events("data: a\n\ndata: b\ndata: c\n\ndata: d\n\n"),
            expected
        );
        assert_eq!(
            events("data: a\r\n\r\ndata: b\r\ndata: c\r\n\r\ndata: d\r\n\r\n"),
            expected
        );
        assert_eq!(
            events("data: a\r\rdata: b\rdata: c\r\rdata: d\r\r"),
            expected
        );
        assert_eq!(
            events("data: a\r\n\rdata: b\ndata: c\r\r\ndata: d\n\r\n"),
            expected
        );
    }

    #[test]
    fn cr_at_end_of_feed_then_lf() {
        // CR | LF across feeds is one line ending, not a blank line.
        let (ev, err) = parse_pieces(b"data: a\r\ndata: b\r\n\r\n", &[8], 100);
        assert_eq!((ev, err), (vec!["a\nb".to_owned()], None));
        // CR | CR is two line endings: dispatch.
        let (ev, err) = parse_pieces(b"data: a\r\rdata: b\r\r", &[8], 100);
        assert_eq!((ev, err), (vec!["a".to_owned(), "b".to_owned()], None));
    }

    #[test]
    fn comments_and_ignored_fields() {
        assert_eq!(
            events(
                ": keep-alive\n\nevent: message\nid: 7\nretry: 100\nfoo: bar\ndata: x\n: mid\n\n"
            ),
            ["x"]
        );
        // Nothing but comments and fields: no event.
        assert!(events(":c\nevent: e\nid: 1\n\n\n\n").is_empty());
    }

    #[test]
    fn multi_line_data() {
        assert_eq!(events("data: a\ndata:\ndata: b\n\n"), ["a\n\nb"]);
        assert_eq!(events("data\ndata\n\n"), ["\n"]);
    }

    #[test]
    fn field_without_colon() {
        assert_eq!(events("data\n\n"), [""]);
        assert_eq!(events("data: a\ndata\n\n"), ["a\n"]);
        // `dat` and `datax` are other fields.
        assert!(events("dat\ndatax\n\n").is_empty());
        assert_eq!(events("dat: x\ndata: y\n\n"), ["y"]);
    }

    #[test]
    fn no_trailing_blank_line() {
        assert_eq!(events("data: a\n\ndata: [DONE]\n"), ["a", "[DONE]"]);
        assert_eq!(events("data: a\n\ndata: [DONE]"), ["a", "[DONE]"]);
        assert_eq!(events("data: a\r\ndata: b\r"), ["a\nb"]);
        assert!(events("event: x\n").is_empty());
    }

    #[test]
    fn byte_order_mark_skipped_at_start_only() {
        assert_eq!(events("\u{FEFF}data: a\n\n"), ["a"]);
        // Later, a BOM makes an unknown field name.
        assert_eq!(events("data: a\n\n\u{FEFF}data: b\n\n"), ["a"]);
    }

    #[test]
    fn json_with_unicode_and_escapes() {
        let s = "data: {\"content\":\"h\u{e9}llo \u{1F600} \\n\\\"\"}\n\n";
        assert_eq!(events(s), [&s[6..s.len() - 2]]);
    }

    #[test]
    fn invalid_utf8_names_line() {
        let input = b"data: a\n\n: comment \xff ok\ndata: b\xffc\n\n";
        let (ev, err) = parse_all_ways(input, 100);
        assert_eq!(ev, ["a"]);
        assert_eq!(
            err.as_deref(),
            Some("protocol error: invalid utf-8 in sse data on line 4")
        );
        // Invalid UTF-8 in an ignored field is fine.
        let (ev, err) = parse_all_ways(b"id: \xfe\ndata: x\n\n", 100);
        assert_eq!((ev, err), (vec!["x".to_owned()], None));
        // Truncated multi-byte sequence at end of input.
        let (ev, err) = parse_all_ways(b"data: \xe2\x82", 100);
        assert!(ev.is_empty());
        assert_eq!(
            err.as_deref(),
            Some("protocol error: invalid utf-8 in sse data on line 1")
        );
    }

    #[test]
    fn oversized_line_rejected() {
        let (ev, err) = parse_all_ways(b"data: 12345\n\ndata: 123456789\n\n", 12);
        assert_eq!(ev, ["12345"]);
        assert_eq!(
            err.as_deref(),
            Some("protocol error: sse line exceeds 12 bytes")
        );
        // Exactly max_line is fine.
        let (ev, err) = parse_all_ways(b"data: 123456\n\n", 12);
        assert_eq!((ev, err), (vec!["123456".to_owned()], None));
        // A comment line counts too.
        let (_, err) = parse_all_ways(b": 1234567890123\n", 12);
        assert_eq!(
            err.as_deref(),
            Some("protocol error: sse line exceeds 12 bytes")
        );
    }

    #[test]
    fn oversized_event_rejected() {
        let (ev, err) = parse_all_ways(b"data: 123456\ndata: 789012\n\n", 12);
        assert!(ev.is_empty());
        assert_eq!(
            err.as_deref(),
            Some("protocol error: sse event exceeds 12 bytes")
        );
        // 6 + 1 + 5 = 12 is fine.
        let (ev, err) = parse_all_ways(b"data: 123456\ndata: 78901\n\n", 12);
        assert_eq!((ev, err), (vec!["123456\n78901".to_owned()], None));
    }

    #[test]
    fn endless_line_has_bounded_memory() {
        let mut parser = SseParser::new(1000);
        let block = [b'x'; 64];
        let mut fed = 0;
        let err = loop {
            match parser.feed(&block, &mut |_| Ok(())) {
                Ok(()) => fed += block.len(),
                Err(e) => break e,
            }
            assert!(fed < 10_000, "never rejected");
        };
        assert!(matches!(err, DecodeError::Protocol(ref m) if m == "sse line exceeds 1000 bytes"));
        assert!(parser.line.capacity() <= 2048, "{}", parser.line.capacity());
    }

    #[test]
    fn callback_error_propagates() {
        let mut parser = SseParser::new(100);
        let err = parser
            .feed(b"data: a\n\ndata: b\n\n", &mut |_| {
                Err(DecodeError::Protocol("from the callback".into()))
            })
            .unwrap_err();
        assert!(matches!(err, DecodeError::Protocol(ref m) if m == "from the callback"));
    }

    #[test]
    fn parser_reusable_after_finish() {
        let mut parser = SseParser::new(100);
        let mut got = Vec::new();
        let mut on = |d: &str| {
            got.push(d.to_owned());
            Ok(())
        };
        parser.feed(b"data: a", &mut on).unwrap();
        parser.finish(&mut on).unwrap();
        parser.feed(b"data: b\n\n", &mut on).unwrap();
        assert_eq!(got, ["a", "b"]);
    }

    #[test]
    fn find_eol_matches_naive() {
        let mut bytes = vec![b'a'; 40];
        assert_eq!(find_eol(&bytes), None);
        for i in 0..40 {
            for eol in [b'\n', b'\r'] {
                bytes[i] = eol;
                assert_eq!(find_eol(&bytes), Some(i));
                assert_eq!(find_eol(&bytes[..i]), None);
                // Bytes that differ from CR/LF by one bit or borrow.
                bytes[i] = eol + 1;
                assert_eq!(find_eol(&bytes), None);
                bytes[i] = eol - 1;
                assert_eq!(find_eol(&bytes), None);
                bytes[i] = eol | 0x80;
                assert_eq!(find_eol(&bytes), None);
                bytes[i] = b'a';
            }
        }
        // A zero byte before a match (borrow propagation).
        assert_eq!(find_eol(b"\x00\x0b\x0a\x0d\x00\x00\x00\x00"), Some(2));
        assert_eq!(find_eol(b"\x0b\x01\x0e\x0c\x00\x0a"), Some(5));
    }

    /// A reader handing out at most `step` bytes per `fill_buf`, and failing
    /// with `fail` once its data is used up (instead of reporting EOF).
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        step: usize,
        fail: Option<io::ErrorKind>,
    }

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            out[..n].copy_from_slice(&buf[..n]);
            self.consume(n);
            Ok(n)
        }
    }

    impl BufRead for Trickle {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            if self.pos == self.data.len()
                && let Some(kind) = self.fail
            {
                return Err(io::Error::new(kind, "boom"));
            }
            let end = (self.pos + self.step).min(self.data.len());
            Ok(&self.data[self.pos..end])
        }

        fn consume(&mut self, n: usize) {
            self.pos += n;
        }
    }

    fn trickle(data: &[u8], step: usize, fail: Option<io::ErrorKind>) -> Trickle {
        Trickle {
            data: data.to_vec(),
            pos: 0,
            step,
            fail,
        }
    }

    #[test]
    fn read_sse_from_reader() {
        let input = b"data: a\r\n\r\n: c\ndata: b\ndata: c\n\ndata: [DONE]\n";
        for step in 1..=input.len() {
            let mut got = Vec::new();
            read_sse(
                trickle(input, step, None),
                64,
                &mut |d| {
                    got.push(d.to_owned());
                    Ok(Flow::Continue)
                },
                &mut || {},
            )
            .unwrap();
            assert_eq!(got, ["a", "b\nc", "[DONE]"], "step {step}");
        }
    }

    #[test]
    fn read_sse_stops_without_reading_on() {
        let input = b"data: a\n\ndata: [DONE]\n\ndata: after\n\n";
        let mut reader = trickle(input, 9, Some(io::ErrorKind::ConnectionReset));
        let mut got = Vec::new();
        read_sse(
            &mut reader,
            64,
            &mut |d| {
                got.push(d.to_owned());
                Ok(if d == "[DONE]" {
                    Flow::Stop
                } else {
                    Flow::Continue
                })
            },
            &mut || {},
        )
        .unwrap();
        assert_eq!(got, ["a", "[DONE]"]);
        assert!(reader.pos < input.len());
    }

    #[test]
    fn read_sse_maps_io_errors() {
        let run = |kind| {
            let r = trickle(b"data: a\n\n", 4, Some(kind));
            read_sse(r, 64, &mut |_| Ok(Flow::Continue), &mut || {}).unwrap_err()
        };
        assert!(matches!(
            run(io::ErrorKind::TimedOut),
            DecodeError::TimedOut
        ));
        assert!(matches!(
            run(io::ErrorKind::WouldBlock),
            DecodeError::TimedOut
        ));
        assert!(matches!(
            run(io::ErrorKind::UnexpectedEof),
            DecodeError::Truncated
        ));
        let e = run(io::ErrorKind::ConnectionReset);
        assert!(
            matches!(e, DecodeError::Io(ref io) if io.kind() == io::ErrorKind::ConnectionReset)
        );
    }

    #[test]
    fn read_sse_with_bufreader() {
        let mut input = Vec::new();
        for i in 0..1000 {
            input.extend_from_slice(format!("data: {{\"n\":{i}}}\r\n\r\n").as_bytes());
        }
        let mut n = 0;
        read_sse(
            BufReader::with_capacity(100, &input[..]),
            64,
            &mut |d| {
                assert_eq!(d, format!("{{\"n\":{n}}}"));
                n += 1;
                Ok(Flow::Continue)
            },
            &mut || {},
        )
        .unwrap();
        assert_eq!(n, 1000);
    }

    use crate::test_util::Rng;

    #[test]
    fn property_random_splits_and_garbage() {
        const ALPHABET: &[&[u8]] = &[
            b"data:",
            b"data: ",
            b"data",
            b"\n",
            b"\r",
            b"\r\n",
            b":",
            b" ",
            b"x",
            b"{}",
            b"event: e",
            b"id",
            b"\xff",
            b"\xe2\x82\xac",
            b"\xe2",
            b"\xEF\xBB\xBF",
            b"[DONE]",
        ];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..3000 {
            let mut input = Vec::new();
            for _ in 0..rng.below(40) {
                if rng.below(4) == 0 {
                    input.push(rng.next() as u8);
                } else {
                    input.extend_from_slice(ALPHABET[rng.below(ALPHABET.len())]);
                }
            }
            let max_line = 1 + rng.below(40);
            let whole = parse_pieces(&input, &[], max_line);
            let mut cuts: Vec<usize> = (0..rng.below(6))
                .map(|_| rng.below(input.len() + 1))
                .collect();
            cuts.sort_unstable();
            assert_eq!(
                parse_pieces(&input, &cuts, max_line),
                whole,
                "{input:?} {cuts:?}"
            );
            if let Some(e) = whole.1 {
                assert!(e.starts_with("protocol error: "), "{e}");
            }
        }
    }
}
