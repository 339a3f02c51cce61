//! Media types and character sets of downloaded bodies.
//!
//! Bodies are decoded as UTF-8 (invalid sequences become U+FFFD) unless the
//! `Content-Type` header, or for HTML a `<meta charset>` in the first 1024
//! bytes, names ISO-8859-1, US-ASCII or windows-1252. Those three decode
//! as windows-1252, as browsers do (the WHATWG Encoding standard maps all
//! three labels to it). Any other declared charset is refused: decoding it
//! as UTF-8 would hand the model mojibake that looks like content.

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
        Some(other) => Err(format!(
            "the page is encoded in `{}`, which this tool cannot decode (it reads \
             UTF-8, ISO-8859-1 and windows-1252)",
            crate::util::excerpt(other, 40)
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
        let err = decode(b"x", Some("shift_jis")).unwrap_err();
        assert!(err.contains("`shift_jis`"), "{err}");
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
