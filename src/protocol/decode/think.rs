//! `<think>...</think>` split out of content, also across chunks; see the
//! [decode docs](super#think-tags) for the contract.

use super::Fragment;

/// Splits `<think>...</think>` out of streamed content (see the
/// [decode docs](super#think-tags)).
#[derive(Debug, Default)]
pub(crate) struct ThinkSplitter {
    /// Between `<think>` and `</think>`.
    inside: bool,
    /// A tail that may be the start of the next tag.
    held: String,
    /// Drop leading whitespace from the content (just after `</think>`).
    trim: bool,
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

impl ThinkSplitter {
    /// Scan `text`, emitting what is certainly content or reasoning and
    /// holding back a tail that could still become a tag.
    pub(crate) fn push(&mut self, text: &str, emit: &mut dyn FnMut(Fragment<'_>)) {
        if self.held.is_empty() {
            // The common case: nothing held, scan the chunk in place
            // without copying it.
            self.scan(text, emit);
        } else {
            // A tag may straddle the chunks: scan the held tail and the new
            // text as one string.
            let mut joined = std::mem::take(&mut self.held);
            joined.push_str(text);
            self.scan(&joined, emit);
        }
    }

    fn scan(&mut self, mut text: &str, emit: &mut dyn FnMut(Fragment<'_>)) {
        loop {
            // Only the tag that would change the state is looked for: a
            // stray `</think>` outside a block is content, a nested
            // `<think>` inside one is reasoning.
            let tag = if self.inside { CLOSE } else { OPEN };
            if let Some(at) = text.find(tag) {
                self.out(&text[..at], emit);
                self.inside = !self.inside;
                // Leaving a block: the blank lines models put after
                // `</think>` are not part of the answer.
                self.trim |= !self.inside;
                text = &text[at + tag.len()..];
            } else {
                let keep = partial_tag_len(text, tag);
                let (out, held) = text.split_at(text.len() - keep);
                self.out(out, emit);
                self.held.push_str(held);
                return;
            }
        }
    }

    /// Emit what was held back as plain text: no tag followed.
    pub(crate) fn flush(&mut self, emit: &mut dyn FnMut(Fragment<'_>)) {
        let held = std::mem::take(&mut self.held);
        self.out(&held, emit);
    }

    fn out(&mut self, mut text: &str, emit: &mut dyn FnMut(Fragment<'_>)) {
        if self.inside {
            if !text.is_empty() {
                emit(Fragment::Reasoning(text));
            }
            return;
        }
        if self.trim {
            text = text.trim_start();
            // All whitespace so far: keep trimming in the next chunk, the
            // answer has not started yet.
            if text.is_empty() {
                return;
            }
            self.trim = false;
        }
        if !text.is_empty() {
            emit(Fragment::Content(text));
        }
    }
}

/// Length of the longest proper prefix of `tag` that `text` ends with.
fn partial_tag_len(text: &str, tag: &str) -> usize {
    // Longest first, so that `<thi` is held whole rather than just `<`.
    // Tags are ASCII: a prefix match always ends on a char boundary.
    (1..tag.len())
        .rev()
        .find(|&k| text.ends_with(&tag[..k]))
        .unwrap_or(0)
}
