//! Small text helpers shared across modules.

use std::any::Any;
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// `text` cut to at most `max_chars` characters, with `…` appended when cut.
pub(crate) fn excerpt(text: &str, max_chars: usize) -> Cow<'_, str> {
    // No more bytes than the bound: no more characters either (a response's
    // model name and id, each turn), without counting them.
    if text.len() <= max_chars {
        return Cow::Borrowed(text);
    }
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

/// `d` in whole milliseconds, saturating at `u64::MAX`: what events,
/// records and messages show of a duration (a `u128` would link its own
/// formatting code into every program that prints one).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The instant `d` from now, saturating at a far future (never panics).
#[cfg(any(
    test,
    feature = "web",
    feature = "testing",
    feature = "mcp",
    feature = "otel"
))]
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
/// back, which may echo the API key. The one-secret form of
/// [`Secrets::redact`], which does the work.
pub(crate) fn redact<'a>(text: &'a str, secret: Option<&str>) -> Cow<'a, str> {
    redact_each(text, secret.into_iter())
}

/// [`redact`] in place: `text` is replaced only when it held the secret.
/// One out-of-line copy for every owned text the client redacts (error
/// messages, the answer's fields, a stream's joined text), instead of a
/// `Cow` match and a copy at each.
#[inline(never)]
pub(crate) fn redact_in(text: &mut String, secret: Option<&str>) {
    if let Cow::Owned(clean) = redact(text, secret) {
        *text = clean;
    }
}

/// The one redaction path: `text` with every occurrence of each secret
/// replaced by `<redacted>`, longest secret first (so a key that contains
/// another is hidden whole). Blank secrets are skipped; the text is
/// borrowed when it holds none.
fn redact_each<'a, 's>(text: &'a str, secrets: impl Iterator<Item = &'s str>) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(text);
    for s in secrets.map(str::trim).filter(|s| !s.is_empty()) {
        if out.contains(s) {
            out = Cow::Owned(out.replace(s, "<redacted>"));
        }
    }
    out
}

/// Every credential one connection or agent holds (chat API keys, MCP
/// bearer tokens, secret-looking environment values of MCP servers), to
/// be redacted from every text a server supplies before it reaches a
/// model, an event, a log line or an error. Cheap to clone.
///
/// What is caught: the secret verbatim. A server that echoes it encoded
/// (base64, URL-escaped, split) is not.
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
#[derive(Clone, Default)]
pub(crate) struct Secrets(std::sync::Arc<[String]>);

#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
impl Secrets {
    /// The non-blank, trimmed, distinct `secrets`, longest first.
    pub(crate) fn new<I, S>(secrets: I) -> Secrets
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut all: Vec<String> = secrets
            .into_iter()
            .map(|s| s.as_ref().trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        Secrets(all.into())
    }

    /// These secrets and `more`.
    pub(crate) fn with<I, S>(&self, more: I) -> Secrets
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let more: Vec<String> = more.into_iter().map(|s| s.as_ref().to_string()).collect();
        Secrets::new(
            self.0
                .iter()
                .map(String::as_str)
                .chain(more.iter().map(String::as_str)),
        )
    }

    /// Whether there is nothing to redact.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` without any of the secrets.
    pub(crate) fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        redact_each(text, self.0.iter().map(String::as_str))
    }

    /// `value` without any of the secrets in any string (object keys
    /// included).
    pub(crate) fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.is_empty() {
            return;
        }
        // An explicit stack: a server's JSON may nest deeper than the
        // thread's stack would allow recursion.
        let mut stack = vec![value];
        while let Some(v) = stack.pop() {
            match v {
                Value::String(s) => {
                    if let Cow::Owned(clean) = self.redact(s) {
                        *s = clean;
                    }
                }
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::Object(map) => {
                    if map.keys().any(|k| matches!(self.redact(k), Cow::Owned(_))) {
                        let old = std::mem::take(map);
                        for (k, v) in old {
                            map.insert(self.redact(&k).into_owned(), v);
                        }
                    }
                    stack.extend(map.values_mut());
                }
                _ => {}
            }
        }
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} redacted)", self.0.len())
    }
}

/// `url` fit to show: its user info and every query value replaced by
/// `<redacted>`, its fragment dropped. The rest (scheme, host, port, path)
/// names the endpoint and is kept; what a key in the query is called stays
/// visible (`?key=<redacted>`), so the reader still sees where it went.
pub(crate) fn redact_url(url: &str) -> String {
    let url = url.split('#').next().unwrap_or("");
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let auth_end = before_query.find('/').unwrap_or(before_query.len());
    let (authority, path) = before_query.split_at(auth_end);
    let mut out = String::with_capacity(url.len() + 16);
    if let Some(scheme) = scheme {
        out.push_str(scheme);
        out.push_str("://");
    }
    // The last `@` ends the user info: a password may hold an `@` of its own.
    match authority.rsplit_once('@') {
        Some((_, host)) => {
            out.push_str("<redacted>@");
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    out.push_str(path);
    if let Some(query) = query {
        out.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((name, value)) if !value.is_empty() => {
                    out.push_str(name);
                    out.push_str("=<redacted>");
                }
                Some((name, _)) => {
                    out.push_str(name);
                    out.push('=');
                }
                // A bare value (`?sk-abc`) may be the key itself.
                None if !pair.is_empty() => out.push_str("<redacted>"),
                None => {}
            }
        }
    }
    out
}

/// `text` with what [`redact_url`] hides of `url` hidden here too: the
/// whole raw URL becomes its redacted form, then any remaining copy of its
/// user info or query. For messages of other libraries that quote the URL.
pub(crate) fn redact_url_in<'a>(text: &'a str, url: &str) -> Cow<'a, str> {
    let url = url.split('#').next().unwrap_or("");
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let authority = before_query.split('/').next().unwrap_or("");
    let userinfo = authority.rsplit_once('@').map(|(u, _)| u);
    let secrets = [userinfo, query];
    let has_url = !url.is_empty() && text.contains(url);
    if !has_url
        && !secrets
            .iter()
            .flatten()
            .any(|s| !s.is_empty() && text.contains(s))
    {
        return Cow::Borrowed(text);
    }
    let mut out = if has_url {
        text.replace(url, &redact_url(url))
    } else {
        text.to_string()
    };
    for s in secrets.into_iter().flatten().filter(|s| !s.is_empty()) {
        out = out.replace(s, "<redacted>");
    }
    Cow::Owned(out)
}

/// `ModelNotFound` as `model_not_found` (an [`ErrorKind`](crate::ErrorKind)
/// name in [`Event::RequestFailed`]).
pub(crate) fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In place: the text is replaced when it held the key (every
    /// occurrence), kept (its buffer too) when it did not or no key is set.
    #[test]
    fn redact_in_replaces_only_a_text_that_held_the_key() {
        let mut text = String::from("key sk-123 and sk-123 again");
        redact_in(&mut text, Some(" sk-123 "));
        assert_eq!(text, "key <redacted> and <redacted> again");
        let mut clean = String::with_capacity(64);
        clean.push_str("nothing here");
        let at = clean.as_ptr();
        redact_in(&mut clean, Some("sk-123"));
        assert_eq!((clean.as_str(), clean.as_ptr()), ("nothing here", at));
        redact_in(&mut clean, Some("  "));
        redact_in(&mut clean, None);
        assert_eq!(clean, "nothing here");
    }

    /// The byte-length fast path gives what counting the characters gives.
    #[test]
    fn excerpt_cuts_at_characters_whatever_the_path() {
        for text in ["", "ab", "abc", "äb", "äbc", "ääää", "a€", "€€", "日本語の"] {
            for max in 0..10 {
                let slow = match text.char_indices().nth(max) {
                    None => text.to_string(),
                    Some((end, _)) => format!("{}…", &text[..end]),
                };
                assert_eq!(excerpt(text, max), slow, "{text:?} {max}");
            }
        }
    }

    #[test]
    fn urls_lose_their_secrets_and_keep_their_endpoint() {
        let cases = [
            (
                "http://127.0.0.1:8080/v1/chat/completions",
                "http://127.0.0.1:8080/v1/chat/completions",
            ),
            (
                "https://user:p@ss@host:9/v1/models?key=sk-1&api-version=2&flag&=x#frag",
                "https://<redacted>@host:9/v1/models?key=<redacted>&api-version=<redacted>&<redacted>&=<redacted>",
            ),
            ("https://h/v1?sk-secret", "https://h/v1?<redacted>"),
            ("https://h/v1?empty=", "https://h/v1?empty="),
            ("localhost:8080/v1", "localhost:8080/v1"),
            ("", ""),
        ];
        for (raw, shown) in cases {
            assert_eq!(redact_url(raw), shown, "{raw}");
        }
    }

    #[test]
    fn secrets_are_redacted_longest_first_in_text_and_json() {
        let s = Secrets::new(["abc", " ", "abcdef", "abc"]);
        assert_eq!(s.redact("x abcdef y abc"), "x <redacted> y <redacted>");
        assert!(matches!(s.redact("nothing"), Cow::Borrowed(_)));
        let mut v = serde_json::json!({"k abc": ["abcdef", {"n": 1, "t": "zabc"}]});
        s.redact_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"k <redacted>": ["<redacted>", {"n": 1, "t": "z<redacted>"}]})
        );
        assert!(Secrets::new([""; 0]).is_empty());
        assert_eq!(s.with(["zz"]).redact("zz abc"), "<redacted> <redacted>");
    }

    #[test]
    fn texts_quoting_a_url_lose_its_secrets() {
        let url = "http://me:hunter2@h/v1?key=sk-1";
        assert_eq!(
            redact_url_in(&format!("bad uri: {url}"), url),
            "bad uri: http://<redacted>@h/v1?key=<redacted>"
        );
        assert_eq!(redact_url_in("user me:hunter2", url), "user <redacted>");
        assert!(matches!(redact_url_in("refused", url), Cow::Borrowed(_)));
        assert!(matches!(redact_url_in("refused", ""), Cow::Borrowed(_)));
    }
}
