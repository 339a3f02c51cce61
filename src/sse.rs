//! Sans-IO server-sent-events parser (stub; being written).

use crate::{Error, Result};

/// Parses SSE bytes into event data payloads.
pub(crate) struct SseParser {
    max_line: usize,
}

impl SseParser {
    /// A parser refusing lines or events longer than `max_line` bytes.
    pub(crate) fn new(max_line: usize) -> SseParser {
        SseParser { max_line }
    }

    /// Feed bytes; `on_data` gets the data of each complete event.
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        on_data: &mut dyn FnMut(&str) -> Result<()>,
    ) -> Result<()> {
        let _ = (bytes, on_data, self.max_line);
        Err(Error::protocol("unimplemented"))
    }

    /// End of input: dispatch a pending event that had no trailing blank line.
    pub(crate) fn finish(&mut self, on_data: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
        let _ = on_data;
        Ok(())
    }
}

/// Whether the reader should go on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Read on.
    Continue,
    /// Stop reading (after `[DONE]`).
    Stop,
}

/// Read SSE events from `reader` until EOF or `Flow::Stop`.
pub(crate) fn read_sse<R: std::io::BufRead>(
    reader: R,
    max_line: usize,
    on_data: &mut dyn FnMut(&str) -> Result<Flow>,
) -> Result<()> {
    let _ = (reader, max_line, on_data);
    Ok(())
}
