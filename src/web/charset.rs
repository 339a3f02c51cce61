//! Media types and character sets of downloaded bodies.
//!
//! Bodies are decoded as UTF-8 (invalid sequences become U+FFFD) unless the
//! `Content-Type` header, or for HTML a `<meta charset>` in the first 1024
//! bytes, names another charset. ISO-8859-1, US-ASCII and windows-1252
//! decode here as windows-1252, as browsers do (the WHATWG Encoding
//! standard maps all three labels to it). Every other WHATWG label
//! (Shift_JIS, GBK, KOI8-R, ISO-8859-2, ...) decodes through ureq's
//! `charset` feature, which the `web` feature turns on: for a `text/*` body
//! whose header names the charset, ureq's body reader has already done it
//! ([`Response::utf8`](super::http::Response::utf8)); otherwise [`decode`]
//! runs the bytes through the same decoder. A label the decoder does not
//! know is refused: decoding it as UTF-8 would hand the model mojibake that
//! looks like content.

/// What kind of body a response carries, decided from its media type and,
/// when that is missing or generic, from the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Html,
    Json,
    Text,
    Binary,
}

/// The media type (lowercase, without parameters) and the `charset`
/// parameter of a `Content-Type` value.
/// (Through the crate's one media-type parser; a value without a valid
/// `type/subtype` gives an empty media type, which is sniffed.)
pub(crate) fn parse_content_type(value: &str) -> (String, Option<String>) {
    match crate::media_type::MediaType::parse(value) {
        Some(m) => (
            m.essence().to_string(),
            m.param("charset")
                .map(|c| c.trim_matches(['"', '\'']).to_ascii_lowercase()),
        ),
        None => (String::new(), None),
    }
}

/// Classify a body from its media type, sniffing the first bytes when the
/// type is missing or `application/octet-stream`.
pub(crate) fn kind(media: &str, body: &[u8]) -> Kind {
    let (top, sub) = media.split_once('/').unwrap_or((media, ""));
    match (top, sub) {
        ("text", "html") | ("application", "xhtml+xml") => Kind::Html,
        ("application", "json") => Kind::Json,
        (_, s) if s.ends_with("+json") => Kind::Json,
        ("text", _) => Kind::Text,
        ("application", s)
            if s.ends_with("+xml")
                || matches!(
                    s,
                    "xml"
                        | "javascript"
                        | "ecmascript"
                        | "x-javascript"
                        | "toml"
                        | "yaml"
                        | "x-yaml"
                        | "x-sh"
                        | "sql"
                        | "graphql"
                        | "csv"
                        | "x-ndjson"
                        | "ld+json"
                        | "rtf"
                        | "x-httpd-php"
                ) =>
        {
            Kind::Text
        }
        ("", _) | ("application", "octet-stream" | "unknown") => sniff(body),
        _ => Kind::Binary,
    }
}

/// HTML if it starts like HTML, text if the start is NUL-free UTF-8.
fn sniff(body: &[u8]) -> Kind {
    let head = &body[..body.len().min(1024)];
    let text = String::from_utf8_lossy(head);
    let start = text
        .trim_start_matches('\u{feff}')
        .trim_start()
        .to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        return Kind::Html;
    }
    let valid = match std::str::from_utf8(head) {
        Ok(_) => true,
        // A multi-byte character cut at the 1024-byte boundary is fine.
        Err(e) => e.error_len().is_none(),
    };
    if valid && !head.contains(&0) {
        Kind::Text
    } else {
        Kind::Binary
    }
}

/// The charset a `<meta charset=..>` or `<meta http-equiv content="..;
/// charset=..">` in the first 1024 bytes declares.
pub(crate) fn meta_charset(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(1024)]).to_ascii_lowercase();
    let at = head.find("charset=")?;
    let rest = head[at + "charset=".len()..].trim_start_matches(['"', '\'', ' ']);
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')))
        .unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_string())
}

/// Decode `body` in `charset` (`None`: UTF-8). `Err` names a charset that
/// is not supported.
pub(crate) fn decode(body: &[u8], charset: Option<&str>) -> Result<String, String> {
    match charset.map(str::trim) {
        None | Some("utf-8" | "utf8" | "unicode-1-1-utf-8" | "x-unicode20utf8") => {
            let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
            Ok(String::from_utf8_lossy(body).into_owned())
        }
        Some(
            "iso-8859-1" | "iso8859-1" | "iso_8859-1" | "latin1" | "l1" | "iso-ir-100" | "cp819"
            | "ibm819" | "us-ascii" | "ascii" | "ansi_x3.4-1968" | "windows-1252" | "cp1252"
            | "x-cp1252",
        ) => Ok(body.iter().map(|&b| windows_1252(b)).collect()),
        Some(other) => {
            // ureq decodes only response bodies, so hand it these bytes as
            // one: a `text/*` body in `other`, read back as UTF-8.
            let mut decoded = ureq::Body::builder()
                .mime_type("text/plain")
                .charset(other)
                .data(body.to_vec());
            let bytes = decoded.with_config().read_to_vec().map_err(|e| {
                format!("decoding `{}` failed: {e}", crate::util::excerpt(other, 40))
            })?;
            decoded_utf8(&bytes, other)
        }
    }
}

/// A body ureq's decoder has produced for `label`: UTF-8, or, when the
/// decoder did not know the label and passed the bytes through, refused.
/// (The decoder's output is always valid UTF-8, its replacement character
/// included, so invalid UTF-8 means it was not decoded; a multi-byte
/// character cut where the download was truncated is not counted.)
pub(crate) fn decoded_utf8(body: &[u8], label: &str) -> Result<String, String> {
    match std::str::from_utf8(body) {
        Ok(s) => Ok(s.strip_prefix('\u{feff}').unwrap_or(s).to_string()),
        Err(e) if e.error_len().is_none() => {
            Ok(String::from_utf8_lossy(&body[..e.valid_up_to()]).into_owned())
        }
        Err(_) => Err(format!(
            "the page is encoded in `{}`, which this tool cannot decode (it reads \
             the WHATWG Encoding standard's charsets)",
            crate::util::excerpt(label, 40)
        )),
    }
}

/// One windows-1252 byte as a character (bytes 0x81, 0x8D, 0x8F, 0x90 and
/// 0x9D, unassigned, map to the C1 controls of the same value).
pub(crate) fn windows_1252(b: u8) -> char {
    const HIGH: [char; 32] = [
        '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8D}', 'Ž',
        '\u{8F}', '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9D}',
        'ž', 'Ÿ',
    ];
    match b {
        0x80..=0x9F => HIGH[usize::from(b - 0x80)],
        _ => char::from(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_type_parameters() {
        assert_eq!(
            parse_content_type("Text/HTML; Charset=\"ISO-8859-1\""),
            ("text/html".to_string(), Some("iso-8859-1".to_string()))
        );
        assert_eq!(
            parse_content_type("application/json"),
            ("application/json".into(), None)
        );
    }

    #[test]
    fn kinds() {
        assert_eq!(kind("text/html", b""), Kind::Html);
        assert_eq!(kind("application/vnd.api+json", b""), Kind::Json);
        assert_eq!(kind("text/markdown", b""), Kind::Text);
        assert_eq!(kind("image/png", b"\x89PNG"), Kind::Binary);
        assert_eq!(kind("", b"  <!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(kind("application/octet-stream", b"plain words"), Kind::Text);
        assert_eq!(
            kind("application/octet-stream", b"\0\x01\x02"),
            Kind::Binary
        );
    }

    #[test]
    fn charsets() {
        assert_eq!(
            decode(b"caf\xE9 \x80", Some("iso-8859-1")).unwrap(),
            "café €"
        );
        assert_eq!(decode(b"\xEF\xBB\xBFcaf\xC3\xA9", None).unwrap(), "café");
        assert_eq!(decode(b"a\xFFb", Some("utf-8")).unwrap(), "a\u{FFFD}b");
        assert_eq!(decode(b"\x82\xa0", Some("shift_jis")).unwrap(), "あ");
        assert_eq!(decode(b"\xb1\xb6", Some("iso-8859-2")).unwrap(), "ąś");
        let err = decode(b"\xff", Some("x-klingon")).unwrap_err();
        assert!(err.contains("`x-klingon`"), "{err}");
        // An unknown label over plain ASCII is still readable.
        assert_eq!(decode(b"plain", Some("x-klingon")).unwrap(), "plain");
        // A character cut by truncation is dropped, not a refusal.
        assert_eq!(
            decoded_utf8("café".as_bytes()[..4].as_ref(), "x").unwrap(),
            "caf"
        );
        assert_eq!(
            meta_charset(b"<meta charset=\"windows-1252\">"),
            Some("windows-1252".into())
        );
        assert_eq!(
            meta_charset(b"<meta http-equiv=Content-Type content='text/html; charset=Shift_JIS'>"),
            Some("shift_jis".into())
        );
        assert_eq!(meta_charset(b"<p>no declaration</p>"), None);
    }
}
