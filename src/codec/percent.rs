//! Percent-encoding (RFC 3986 section 2.1) and its HTML form variant
//! (`application/x-www-form-urlencoded`), which differs in one character:
//! a space is `+`, and a `+` read back is a space.

use std::fmt::Write;

/// Which bytes the encoder writes as they are; every other byte becomes
/// `%XX` (upper-case hex, as RFC 3986 section 2.1 recommends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Only RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`): for
    /// a value inside a query or a form, where `&`, `=` and `/` mean
    /// something.
    Unreserved,
    /// Every printable ASCII byte but the ones a request line may not
    /// carry raw (space, `" < > \ ^ `` ` `` { | }`): for a whole path and
    /// query, whose `/ ? & = %` must stay as written.
    #[cfg_attr(not(feature = "web"), allow(dead_code))]
    RequestTarget,
}

impl Keep {
    fn keeps(self, b: u8) -> bool {
        match self {
            Keep::Unreserved => b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'),
            Keep::RequestTarget => {
                b.is_ascii_graphic()
                    && !matches!(
                        b,
                        b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
                    )
            }
        }
    }
}

/// How the encoder writes a space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    /// `%20` (RFC 3986).
    Escaped,
    /// `+` (HTML forms).
    #[cfg_attr(not(feature = "web"), allow(dead_code))]
    Plus,
}

/// How the decoder reads a `+`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(any(feature = "mcp", feature = "otel")), allow(dead_code))]
pub(crate) enum Plus {
    /// As a space (HTML forms, query strings).
    Space,
    /// As a `+` (RFC 3986: only `%XX` is an escape).
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    Kept,
}

/// `text` percent-encoded: the bytes `keep` names as they are, a space as
/// `space` says, everything else (non-ASCII as its UTF-8 bytes) `%XX`.
pub(crate) fn encode(text: &str, keep: Keep, space: Space) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if keep.keeps(b) {
            out.push(char::from(b));
        } else if b == b' ' && space == Space::Plus {
            out.push('+');
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// `text` with its `%XX` escapes decoded and `+` read as `plus` says. A
/// malformed escape is kept as written; bytes that do not form UTF-8
/// become U+FFFD.
#[cfg_attr(not(any(feature = "mcp", feature = "otel")), allow(dead_code))]
pub(crate) fn decode(text: &str, plus: Plus) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' && plus == Plus::Space {
            b' '
        } else {
            b[i]
        });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// `k=v&k=v`, each name and value encoded (unreserved kept, a space as
/// `space` says).
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
pub(crate) fn form(pairs: &[(&str, &str)], space: Space) -> String {
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(&encode(k, Keep::Unreserved, space));
        out.push('=');
        out.push_str(&encode(v, Keep::Unreserved, space));
    }
    out
}

/// A query string or form body split into decoded pairs (`+` is a
/// space); an empty piece is skipped and a piece without `=` has an empty
/// value.
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
pub(crate) fn parse_form(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k, Plus::Space), decode(v, Plus::Space))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreserved_characters_are_kept_and_the_rest_escaped() {
        // RFC 3986 section 2.3: unreserved characters are never escaped.
        let unreserved = "ABCXYZabcxyz0189-._~";
        assert_eq!(
            encode(unreserved, Keep::Unreserved, Space::Escaped),
            unreserved
        );
        // Section 2.2's reserved characters are, in a value.
        assert_eq!(
            encode(":/?#[]@!$&'()*+,;=", Keep::Unreserved, Space::Escaped),
            "%3A%2F%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D"
        );
        // Section 2.5: non-ASCII text is its UTF-8 bytes, escaped.
        assert_eq!(
            encode("é€", Keep::Unreserved, Space::Escaped),
            "%C3%A9%E2%82%AC"
        );
        assert_eq!(encode("%", Keep::Unreserved, Space::Escaped), "%25");
    }

    #[test]
    fn a_space_is_escaped_or_a_plus() {
        assert_eq!(encode("a b", Keep::Unreserved, Space::Escaped), "a%20b");
        assert_eq!(encode("a b", Keep::Unreserved, Space::Plus), "a+b");
        assert_eq!(encode("a+b", Keep::Unreserved, Space::Plus), "a%2Bb");
        assert_eq!(
            encode("a b&c=d/é", Keep::Unreserved, Space::Plus),
            "a+b%26c%3Dd%2F%C3%A9"
        );
        assert_eq!(
            encode("org/model:7b", Keep::Unreserved, Space::Escaped),
            "org%2Fmodel%3A7b"
        );
    }

    #[test]
    fn a_request_target_keeps_its_delimiters() {
        assert_eq!(
            encode("/a b/?q=1&r=%41#x", Keep::RequestTarget, Space::Escaped),
            "/a%20b/?q=1&r=%41#x"
        );
        assert_eq!(
            encode("/\"<>\\^`{|}é", Keep::RequestTarget, Space::Escaped),
            "/%22%3C%3E%5C%5E%60%7B%7C%7D%C3%A9"
        );
    }

    #[test]
    fn decoding_reads_escapes_and_a_plus_as_told() {
        assert_eq!(decode("Bearer%20a%2Cb", Plus::Kept), "Bearer a,b");
        assert_eq!(decode("%41%c3%a9", Plus::Kept), "Aé");
        assert_eq!(decode("a+b", Plus::Kept), "a+b");
        assert_eq!(decode("a+b%2B", Plus::Space), "a b+");
        // Malformed escapes are kept; broken UTF-8 becomes U+FFFD.
        assert_eq!(decode("100%", Plus::Kept), "100%");
        assert_eq!(decode("%zz%4", Plus::Kept), "%zz%4");
        assert_eq!(decode("%FF", Plus::Kept), "\u{FFFD}");
        for text in ["a b+c/é?&=%", "", "~"] {
            for space in [Space::Escaped, Space::Plus] {
                let encoded = encode(text, Keep::Unreserved, space);
                assert_eq!(decode(&encoded, Plus::Space), text);
            }
        }
    }

    #[test]
    fn forms_encode_and_parse() {
        let pairs = [("a b", "c&d=é"), ("grant_type", "code")];
        assert_eq!(
            form(&pairs, Space::Escaped),
            "a%20b=c%26d%3D%C3%A9&grant_type=code"
        );
        assert_eq!(
            form(&pairs, Space::Plus),
            "a+b=c%26d%3D%C3%A9&grant_type=code"
        );
        // OAuth's forms (RFC 6749 appendix B): a `+` in a value is escaped.
        assert_eq!(
            form(
                &[("redirect_uri", "http://127.0.0.1:1/cb"), ("s", "a b+c")],
                Space::Escaped
            ),
            "redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcb&s=a%20b%2Bc"
        );
        assert_eq!(
            parse_form("code=x%2By&state=a+b&bad=%zz&end=%4"),
            [
                ("code".to_string(), "x+y".to_string()),
                ("state".into(), "a b".into()),
                ("bad".into(), "%zz".into()),
                ("end".into(), "%4".into())
            ]
        );
        assert_eq!(
            parse_form("a+b=c%26d%3D%C3%A9&&grant_type=code&flag"),
            [
                ("a b".to_string(), "c&d=é".to_string()),
                ("grant_type".to_string(), "code".to_string()),
                ("flag".to_string(), String::new()),
            ]
        );
    }
}
