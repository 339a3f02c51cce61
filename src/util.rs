//! Small text helpers shared across modules.

use std::any::Any;
use std::borrow::Cow;

/// `text` cut to at most `max_chars` characters, with `…` appended when cut.
pub(crate) fn excerpt(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
    }
}

/// The message of a caught panic (`panic!` payloads are `&str` or `String`).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.as_str()
    } else {
        "(a panic payload that is not a string)"
    }
}
