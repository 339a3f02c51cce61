//! `JsonLines`: the event stream as JSON Lines, for logs and other processes.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use crate::listener::Delivery;
use crate::{Event, Listener};

/// Writes every event as one JSON object per line (the [event JSON
/// format](crate::Event#json)), flushed per event.
///
/// Text is written as the model produced it, not sanitized (JSON escapes the
/// control characters); sanitize when displaying it.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use pikuri::testing::SharedBuffer;
/// use pikuri::{Event, Listener};
/// use pikuri::listeners::JsonLines;
///
///
/// let buf = SharedBuffer::new();
/// let mut log = JsonLines::new(buf.clone());
/// log.on_event(&Event::Cancelled { agent: "".into(), partial_answer: String::new() });
/// log.on_event(&Event::Reset { agent: "researcher 0".into() });
/// let out = buf.text();
/// assert_eq!(
///     out,
///     "{\"type\":\"cancelled\",\"agent\":\"\"}\n{\"type\":\"reset\",\"agent\":\"researcher 0\"}\n"
/// );
/// let first: Event = serde_json::from_str(out.lines().next().unwrap()).unwrap();
/// assert_eq!(first, Event::Cancelled { agent: "".into(), partial_answer: String::new() });
/// ```
///
/// # Errors
///
/// A failed write (or a full disk) is logged once at `warn`; later events
/// are still attempted, and their failures are not logged. Each line is
/// written with a single `write_all`, so a failure never leaves half an
/// object followed by the next one on the same line from this listener.
///
/// # Delivery
///
/// A log file ([`create`](JsonLines::create)) hands off
/// ([`Delivery::HandOff`]): a turn does not wait for its writes, and the
/// file is whole after [`Agent::flush_listeners`](crate::Agent::flush_listeners)
/// or [`Agent::close`](crate::Agent::close). Standard error and any other
/// writer ([`stderr`](JsonLines::stderr), [`new`](JsonLines::new)) keep
/// the barrier ([`Delivery::Barrier`]): they may share a screen with the
/// host's prompt, or be read right after the turn. Change it with
/// [`with_delivery`](JsonLines::with_delivery).
///
/// # Sub-agents
///
/// Shared (the default): sub-agents' events go to the same writer, and each
/// line's `"agent"` field tells them apart.
pub struct JsonLines {
    writer: Box<dyn Write + Send>,
    line: Vec<u8>,
    failed: bool,
    delivery: Delivery,
}

impl JsonLines {
    /// Write to `writer`.
    pub fn new(writer: impl Write + Send + 'static) -> JsonLines {
        JsonLines {
            writer: Box::new(writer),
            line: Vec::new(),
            failed: false,
            delivery: Delivery::Barrier,
        }
    }

    /// Whether a turn waits for this log (see *Delivery* above).
    ///
    /// ```
    /// use pikuri::Listener;
    /// use pikuri::listeners::{Delivery, JsonLines};
    ///
    /// let log = JsonLines::new(std::io::sink()).with_delivery(Delivery::HandOff);
    /// assert_eq!(log.delivery(), Delivery::HandOff);
    /// assert_eq!(JsonLines::stderr().delivery(), Delivery::Barrier);
    /// ```
    #[must_use]
    pub fn with_delivery(mut self, delivery: Delivery) -> JsonLines {
        self.delivery = delivery;
        self
    }

    /// Write to a new file at `path` (truncating an existing one), handing
    /// off ([`Delivery::HandOff`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Event, Listener};
    /// use pikuri::listeners::JsonLines;
    ///
    /// let path = std::env::temp_dir().join(format!("pikuri-doc-{}.jsonl", std::process::id()));
    /// let mut log = JsonLines::create(&path)?;
    /// log.on_event(&Event::Reset { agent: "".into() });
    /// let text = std::fs::read_to_string(&path)?;
    /// assert_eq!(text, "{\"type\":\"reset\",\"agent\":\"\"}\n");
    /// assert_eq!(log.delivery(), pikuri::listeners::Delivery::HandOff);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn create(path: impl AsRef<Path>) -> io::Result<JsonLines> {
        Ok(JsonLines::new(File::create(path)?).with_delivery(Delivery::HandOff))
    }

    /// Write to standard error.
    pub fn stderr() -> JsonLines {
        JsonLines::new(io::stderr())
    }

    fn write(&mut self, event: &Event) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, event)?;
        self.line.push(b'\n');
        self.writer.write_all(&self.line)?;
        self.writer.flush()
    }

    fn fail(&mut self, e: &io::Error) {
        if !self.failed {
            self.failed = true;
            log::warn!("JsonLines: write failed ({e}); further errors are ignored");
        }
    }
}

impl Listener for JsonLines {
    fn on_event(&mut self, event: &Event) {
        if let Err(e) = self.write(event) {
            self.fail(&e);
        }
    }

    fn flush(&mut self) {
        if let Err(e) = self.writer.flush() {
            self.fail(&e);
        }
    }

    fn close(&mut self) {
        Listener::flush(self);
    }

    fn delivery(&self) -> Delivery {
        self.delivery
    }

    fn name(&self) -> String {
        "JsonLines".to_string()
    }
}

impl fmt::Debug for JsonLines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonLines")
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::listener::SubAgentListener;
    use crate::{StopReason, Usage};

    use crate::testing::SharedBuffer as Buf;

    fn events() -> Vec<Event> {
        vec![
            Event::UserTurn {
                agent: "".into(),
                content: "hi\nthere".into(),
                mid_loop: false,
            },
            Event::ThinkingDelta {
                agent: "".into(),
                content: "\x1b[2J".into(),
            },
            Event::ToolCall {
                agent: "researcher 0".into(),
                id: "c1".into(),
                name: "search".into(),
                arguments: json!({"q": "rust", "n": 3, "deep": [true, null]}),
            },
            Event::ToolResult {
                agent: "researcher 0".into(),
                id: "c1".into(),
                name: "search".into(),
                content: "Error: \u{202e}nope".into(),
            },
            Event::Tokens {
                agent: "".into(),
                input: Some(1),
                output: None,
                cached: Some(3),
                cache_creation: None,
                thinking: Some(0),
                model_id: Some("qwen".into()),
                response_id: Some("chatcmpl-1".into()),
            },
            Event::ContextCap {
                agent: "".into(),
                cap: None,
            },
            Event::HistoryLoaded {
                agent: "".into(),
                messages: 3,
                tokens: Some(Usage::from_parts(Some(5), None, None, None, None)),
            },
            Event::Domain {
                agent: "".into(),
                name: "tasks.list_changed".into(),
                payload: json!({"open": 2}),
                transient: true,
            },
            Event::Retrying {
                agent: "".into(),
                attempt: 2,
                error: "HTTP 503".into(),
                wait_ms: 1500,
            },
            Event::Compacted {
                agent: "".into(),
                strategy: crate::event::CompactionStrategy::Summarize,
                messages_before: 13,
                messages_after: 3,
                tokens_before: 900,
                tokens_after: 120,
            },
            Event::ModelFallback {
                agent: "".into(),
                from: Box::new(
                    crate::ChatTransport::new("a").with_api_base("http://127.0.0.1:1/v1"),
                ),
                to: Box::new(crate::ChatTransport::new("b").with_api_base("http://127.0.0.1:2/v1")),
                reason: "http status 503: overloaded".into(),
            },
            Event::Stopped {
                agent: "".into(),
                reason: StopReason::Completed,
                usage: Usage::new().with_input(10).with_output(3),
            },
        ]
    }

    #[test]
    fn round_trip() {
        let buf = Buf::default();
        let mut log = JsonLines::new(buf.clone());
        for e in events() {
            log.on_event(&e);
        }
        log.close();
        let text = buf.text();
        let back: Vec<Event> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back, events());
        assert!(text.ends_with('\n') && !text.contains('\x1b'));
    }

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("disk full"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_errors_are_ignored() {
        let mut log = JsonLines::new(Broken);
        log.on_event(&Event::Reset { agent: "".into() });
        log.on_event(&Event::Reset { agent: "".into() });
        assert_eq!(format!("{log:?}"), "JsonLines { failed: true, .. }");
        assert!(matches!(log.for_sub_agent("x"), SubAgentListener::Share));
    }
}
