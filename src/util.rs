//! Small text helpers shared across modules.

use std::any::Any;
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// `text` cut to at most `max_chars` characters, with `…` appended when cut.
pub(crate) fn excerpt(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
    }
}

/// `serde_json::from_slice`, through `from_str`: the crate parses JSON from
/// `&str` everywhere else, and each reader type serde_json is used with
/// compiles every `Deserialize` impl once more (about 55 KB of a small
/// program's binary, and its share of the build, for the second one).
/// Invalid UTF-8 is an error, as it is for `from_slice`.
pub(crate) fn json_from_slice<'a, T: serde::Deserialize<'a>>(
    bytes: &'a [u8],
) -> serde_json::Result<T> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(e) => Err(<serde_json::Error as serde::de::Error>::custom(
            format_args!("invalid UTF-8 at byte {}", e.valid_up_to()),
        )),
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

/// Durations at or above this (about 30 years) mean "no limit": ureq and
/// `Instant` arithmetic panic on durations near `Duration::MAX`, and no
/// host means a finite wait that long.
pub(crate) const NO_LIMIT: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// `d` as a timeout for ureq: `None` (no limit) from [`NO_LIMIT`] up.
pub(crate) fn limit(d: Duration) -> Option<Duration> {
    (d < NO_LIMIT).then_some(d)
}

/// The instant `d` from now, or `None` when `d` means no limit.
pub(crate) fn deadline_after(d: Duration) -> Option<Instant> {
    limit(d).and_then(|d| Instant::now().checked_add(d))
}

/// The instant `d` from now, saturating at a far future (never panics).
#[cfg(any(test, feature = "web", feature = "testing"))]
pub(crate) fn instant_after(d: Duration) -> Instant {
    let now = Instant::now();
    let mut d = d.min(NO_LIMIT);
    loop {
        if let Some(t) = now.checked_add(d) {
            return t;
        }
        d /= 2;
    }
}

/// `text` with every occurrence of `secret` replaced by `<redacted>`
/// (nothing to do for an empty or blank secret). For text a server sends
/// back, which may echo the API key.
pub(crate) fn redact<'a>(text: &'a str, secret: Option<&str>) -> Cow<'a, str> {
    match secret.map(str::trim) {
        Some(s) if !s.is_empty() && text.contains(s) => Cow::Owned(text.replace(s, "<redacted>")),
        _ => Cow::Borrowed(text),
    }
}
