//! `Content-Type` values as RFC 9110 (section 8.3.1) defines them: one small
//! parser for every place the crate reads a media type (the chat client,
//! the web tools, the MCP HTTP transport).
//!
//! ```text
//! media-type = type "/" subtype parameters
//! parameters = *( OWS ";" OWS [ parameter ] )
//! parameter  = name "=" ( token / quoted-string )
//! ```
//!
//! Type, subtype and parameter names compare case-insensitively; parameter
//! values keep their case (the caller lowercases where the parameter is
//! case-insensitive, like `charset`). A quoted value may contain `;` and
//! backslash escapes. Surrounding whitespace is allowed everywhere.

// The core (the chat client) asks only `has_essence`; the parser is the web
// tools' and MCP's, each using part of it.
#![cfg_attr(
    not(all(feature = "web", feature = "mcp")),
    allow(dead_code, reason = "the parser is the web tools' and MCP's")
)]

/// A parsed media type: `type/subtype` in lowercase, and the parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MediaType {
    essence: String,
    params: Vec<(String, String)>,
}

impl MediaType {
    /// Parse a `Content-Type` value; `None` when it has no `type/subtype`
    /// made of token characters. Malformed parameters are skipped.
    pub(crate) fn parse(value: &str) -> Option<MediaType> {
        let (head, mut rest) = match value.find(';') {
            Some(i) => (&value[..i], &value[i..]),
            None => (value, ""),
        };
        let (ty, sub) = head.trim().split_once('/')?;
        if !is_token(ty) || !is_token(sub) {
            return None;
        }
        let essence = format!("{ty}/{sub}").to_ascii_lowercase();
        let mut params = Vec::new();
        while let Some(after) = rest.strip_prefix(';') {
            let after = after.trim_start();
            let name_end = after.find(['=', ';']).unwrap_or(after.len());
            let name = after[..name_end].trim();
            rest = &after[name_end..];
            let Some(v) = rest.strip_prefix('=') else {
                continue; // a bare name or an empty parameter
            };
            let v = v.trim_start();
            let (value, tail) = if let Some(quoted) = v.strip_prefix('"') {
                quoted_string(quoted)
            } else {
                let end = v.find(';').unwrap_or(v.len());
                (v[..end].trim_end().to_string(), &v[end..])
            };
            // Skip what follows a quoted string up to the next `;`.
            rest = tail.find(';').map_or("", |i| &tail[i..]);
            if is_token(name) {
                params.push((name.to_ascii_lowercase(), value));
            }
        }
        Some(MediaType { essence, params })
    }

    /// Whether the `Content-Type` value `value` is `essence` (compared
    /// case-insensitively): what [`parse`](MediaType::parse) then
    /// [`is`](MediaType::is) say, without reading (or allocating) the
    /// parameters. The chat client's check for a stream needs no more, so
    /// a program without the web tools or MCP does not link the parser
    /// (BENCHMARKS.md, issue 36, session 14).
    ///
    /// The comparison comes first: a value of another length or another
    /// name (the chat client's `application/json` against
    /// `text/event-stream`) is told apart without checking its characters,
    /// which only an equal value needs (BENCHMARKS.md, issue 42, session
    /// 16).
    pub(crate) fn has_essence(value: &str, essence: &str) -> bool {
        let head = match value.as_bytes().iter().position(|&b| b == b';') {
            Some(i) => &value[..i],
            None => value,
        }
        .trim();
        head.eq_ignore_ascii_case(essence)
            && head
                .split_once('/')
                .is_some_and(|(ty, sub)| is_token(ty) && is_token(sub))
    }

    /// `type/subtype`, lowercase.
    #[cfg(any(test, feature = "web"))]
    pub(crate) fn essence(&self) -> &str {
        &self.essence
    }

    /// Whether this is `essence` (compared case-insensitively).
    pub(crate) fn is(&self, essence: &str) -> bool {
        self.essence.eq_ignore_ascii_case(essence)
    }

    /// The value of parameter `name` (case-insensitive name), the first if
    /// repeated.
    #[cfg(any(test, feature = "web"))]
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A quoted string after its opening quote: the unescaped value and the
/// rest after the closing quote (an unterminated one runs to the end).
fn quoted_string(s: &str) -> (String, &str) {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, &s[i + 1..]),
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    out.push(escaped);
                }
            }
            c => out.push(c),
        }
    }
    (out, "")
}

/// RFC 9110 `token`: one or more `tchar`.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn essence(v: &str) -> Option<String> {
        MediaType::parse(v).map(|m| m.essence().to_string())
    }

    #[test]
    fn case_whitespace_and_parameters() {
        for v in [
            "text/event-stream",
            "Text/Event-Stream",
            "  TEXT/EVENT-STREAM  ",
            "text/event-stream;charset=utf-8",
            "text/event-stream ; charset = \"utf-8\" ; x=y",
        ] {
            assert_eq!(essence(v).as_deref(), Some("text/event-stream"), "{v:?}");
        }
        assert_eq!(
            essence("text/event-streamy").as_deref(),
            Some("text/event-streamy")
        );
        assert_eq!(essence(""), None);
        assert_eq!(essence("text"), None);
        assert_eq!(essence("text /html"), None);
        assert_eq!(essence("/html"), None);
    }

    /// `has_essence` says what `parse` then `is` say, on valid, malformed
    /// and parameterized values alike.
    #[test]
    fn has_essence_agrees_with_the_parser() {
        let values = [
            "text/event-stream",
            "Text/Event-Stream",
            "  TEXT/EVENT-STREAM  ",
            "text/event-stream;charset=utf-8",
            "text/event-stream ; charset = \"utf-8\" ; x=y",
            "text/event-stream\t;q=\"a;b\"",
            "text/event-streamy",
            "text/event-stream/x",
            "text /event-stream",
            "text/ event-stream",
            "/event-stream",
            "text/",
            ";text/event-stream",
            "",
            "text",
            "application/json",
            "application/json; charset=utf-8",
            // Same length as the essence, or equal but for case or
            // whitespace, around the early answer of a different length.
            "text/event-streaM",
            "text/event-strea ",
            "text/event-strea;",
            "text/event-strea",
            "text\u{a0}/event-stream",
            "\u{a0}text/event-stream\u{2003};x",
            "text/event-stream\u{a0}",
            "tëxt/event-stream",
            "text/event stream",
            "text/event-stream;;",
            "text/evént-stream",
        ];
        // The essences asked for, the last ones not media types at all
        // (then nothing has them).
        let essences = [
            "text/event-stream",
            "application/json",
            "TEXT/EVENT-STREAM",
            "text/event stream",
            "text",
            "",
        ];
        for v in values {
            for e in essences {
                let parsed = MediaType::parse(v).is_some_and(|m| m.is(e));
                assert_eq!(MediaType::has_essence(v, e), parsed, "{v:?} is {e}");
            }
        }
        assert!(MediaType::has_essence(
            "Text/Event-Stream; x=1",
            "text/event-stream"
        ));
        assert!(!MediaType::has_essence(
            "text/event-stream/x",
            "text/event-stream"
        ));
    }

    #[test]
    fn parameter_values() {
        let m = MediaType::parse(r#"text/html; Charset="ISO-8859-1"; q="a;b\"c"; bare; =x; n=v "#)
            .unwrap();
        assert_eq!(m.param("charset"), Some("ISO-8859-1"));
        assert_eq!(m.param("Q"), Some("a;b\"c"));
        assert_eq!(m.param("n"), Some("v"));
        assert_eq!(m.param("bare"), None);
        assert!(m.is("TEXT/HTML"));
        let m = MediaType::parse("a/b; x=\"unterminated").unwrap();
        assert_eq!(m.param("x"), Some("unterminated"));
    }
}
