//! Delta accumulator (stub; being written).

use crate::{Message, Result, Usage};

/// A fragment reported while streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment<'a> {
    /// Assistant text.
    Content(&'a str),
    /// Reasoning text.
    Reasoning(&'a str),
}

/// A complete assistant message and its metadata.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Completion {
    pub(crate) message: Message,
    pub(crate) finish_reason: Option<String>,
    pub(crate) usage: Option<Usage>,
    pub(crate) model: Option<String>,
}

/// Turns chunks into one assistant message.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    done: bool,
}

impl Accumulator {
    pub(crate) fn new(split_think: bool) -> Accumulator {
        let _ = split_think;
        Accumulator::default()
    }

    /// Feed one event's data (a JSON chunk or `[DONE]`).
    pub(crate) fn push_data(
        &mut self,
        data: &str,
        on_fragment: &mut dyn FnMut(Fragment<'_>),
    ) -> Result<()> {
        let _ = (data, on_fragment);
        self.done = true;
        Ok(())
    }

    /// Whether `[DONE]` arrived.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// The message so far; `Err(Truncated)` when neither `[DONE]` nor a finish reason arrived.
    pub(crate) fn finish(self) -> Result<Completion> {
        Ok(Completion {
            message: Message::assistant(""),
            finish_reason: None,
            usage: None,
            model: None,
        })
    }
}

/// Parse a non-streamed chat-completions response body.
pub(crate) fn parse_response(body: &[u8], split_think: bool) -> Result<Completion> {
    let _ = (body, split_think);
    Ok(Completion {
        message: Message::assistant(""),
        finish_reason: None,
        usage: None,
        model: None,
    })
}
