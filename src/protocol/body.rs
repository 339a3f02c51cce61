//! What the body of a non-success answer says, in one bounded line for
//! [`Error::Http`](crate::Error::Http).
//!
//! A JSON error body gives its message together with its `code` and `type`
//! when those are strings the message does not already say: servers put
//! what an error *is* there (OpenAI's `context_length_exceeded`,
//! llama.cpp's `exceed_context_size_error`), and
//! [`ErrorKind`](crate::ErrorKind) is decided from that line. Any other
//! body is summarized, never quoted whole: an HTML page (a base URL that
//! points at an ordinary web server) by its `<title>`, plain text by its
//! first line.

use serde_json::Value;

use crate::util::excerpt;

/// Longest server message kept in [`Error::Http`](crate::Error::Http).
pub(crate) const MAX_MESSAGE_CHARS: usize = 500;

/// Longest `<title>` or first line quoted from a body that is not JSON.
const MAX_LINE_CHARS: usize = 200;

/// The server's message: OpenAI's `{"error":{"message":..,"code":..,
/// "type":..}}`, Ollama's `{"error":".."}`, vLLM's and a bare
/// `{"message":..}`, with the code and a specific type (not a generic
/// class such as `invalid_request_error`) in parentheses; else the
/// summary of [`summarize`].
pub(crate) fn error_message(body: &[u8]) -> String {
    crate::util::json_from_slice::<Value>(body)
        .ok()
        .and_then(|v| json_message(&v))
        .unwrap_or_else(|| summarize(body))
}

/// The message, code and type of a JSON error body; `None` when it has
/// none of them.
fn json_message(v: &Value) -> Option<String> {
    let e = v.get("error").unwrap_or(v);
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| e.as_str())
        .map(|m| excerpt(m.trim(), MAX_MESSAGE_CHARS));
    let mut labels: Vec<String> = Vec::new();
    for field in ["code", "type"] {
        // A numeric code repeats the HTTP status (llama.cpp, vLLM):
        // only a string says what the error is.
        let Some(label) = e.get(field).and_then(Value::as_str) else {
            continue;
        };
        let label = excerpt(label.trim(), 80);
        if field == "type" && is_generic_type(&label) {
            continue;
        }
        let said = message.as_deref().is_some_and(|m| m.contains(&*label));
        if !label.is_empty() && !said && !labels.iter().any(|l| *l == label) {
            labels.push(format!("{field}: {label}"));
        }
    }
    match (message, labels.is_empty()) {
        (Some(m), true) => Some(m.into_owned()),
        (Some(m), false) => Some(format!("{m} ({})", labels.join(", "))),
        (None, false) => Some(labels.join(", ")),
        (None, true) => None,
    }
}

/// Whether an error `type` only names the class the status already says
/// (OpenAI's, Anthropic's and llama.cpp's `invalid_request_error`,
/// `server_error`..., vLLM's `BadRequestError`): shown, it would repeat
/// the status; a specific type (`exceed_context_size_error`) is shown.
fn is_generic_type(label: &str) -> bool {
    const GENERIC: [&str; 13] = [
        "error",
        "apierror",
        "authenticationerror",
        "badrequesterror",
        "internalservererror",
        "invalidrequesterror",
        "notfounderror",
        "notsupportederror",
        "overloadederror",
        "permissionerror",
        "ratelimiterror",
        "servererror",
        "unavailableerror",
    ];
    let key: String = label
        .chars()
        .filter(|c| *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    GENERIC.contains(&key.as_str())
}

/// A body that is not a JSON error, in one bounded line: an HTML page as
/// `an HTML page titled "..." (N bytes) ...`, text as its first non-blank
/// line and how many lines follow.
pub(crate) fn summarize(body: &[u8]) -> String {
    if let Some(page) = html_summary(body) {
        return page;
    }
    let text = String::from_utf8_lossy(body);
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = excerpt(lines.next().unwrap_or(""), MAX_MESSAGE_CHARS).into_owned();
    match lines.count() {
        0 => first,
        1 => format!("{first} (and 1 more line)"),
        n => format!("{first} (and {n} more lines)"),
    }
}

/// `an HTML page titled "..." (N bytes) ...` when `body` is an HTML
/// page, else `None`.
pub(crate) fn html_summary(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if !looks_like_html(text) {
        return None;
    }
    let what = match title(text) {
        Some(t) => format!("an HTML page titled \"{}\"", excerpt(&t, MAX_LINE_CHARS)),
        // No title: the page's first line of text says what it is.
        None => match first_text(text) {
            Some(t) => format!("an HTML page saying \"{}\"", excerpt(&t, MAX_LINE_CHARS)),
            None => "an HTML page".to_string(),
        },
    };
    Some(format!(
        "{what} ({} bytes), not an API answer: check the base URL",
        body.len()
    ))
}

/// Whether `text` starts like an HTML document (or has an `<html>` or
/// `<title>` tag early on).
fn looks_like_html(text: &str) -> bool {
    let head: String = text
        .chars()
        .take(1024)
        .collect::<String>()
        .to_ascii_lowercase();
    head.starts_with("<!doctype html")
        || head.starts_with("<html")
        || (head.starts_with('<') && (head.contains("<html") || head.contains("<title")))
}

/// The text of the first `<title>` element, whitespace collapsed and the
/// common entities decoded; `None` when there is none or it is blank.
fn title(html: &str) -> Option<String> {
    // ASCII lowercasing keeps every byte offset, so indices found in
    // `lower` cut `html` at the same places.
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    plain(&html[start..end])
}

/// The first run of text between tags (in the first 4 KiB), as
/// [`plain`] makes it.
fn first_text(html: &str) -> Option<String> {
    let head: String = html.chars().take(4096).collect();
    let mut in_tag = false;
    let mut run = String::new();
    for c in head.chars() {
        match c {
            '<' => {
                if let Some(t) = plain(&run) {
                    return Some(t);
                }
                run.clear();
                in_tag = true;
            }
            '>' => in_tag = false,
            _ if !in_tag => run.push(c),
            _ => {}
        }
    }
    if in_tag { None } else { plain(&run) }
}

/// `text` with its whitespace collapsed and the common entities decoded;
/// `None` when blank.
fn plain(text: &str) -> Option<String> {
    let raw = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = raw
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_bodies_give_message_code_and_type() {
        assert_eq!(
            error_message(br#"{"error":{"message":"bad model","type":"x"}}"#),
            "bad model (type: x)"
        );
        assert_eq!(
            error_message(br#"{"error":"model not found"}"#),
            "model not found"
        );
        // OpenAI: a code the message does not say.
        assert_eq!(
            error_message(
                br#"{"error":{"message":"Input too long.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#
            ),
            "Input too long. (code: context_length_exceeded)"
        );
        // llama.cpp: a numeric code is the status again.
        assert_eq!(
            error_message(
                br#"{"error":{"code":400,"message":"too big","type":"exceed_context_size_error"}}"#
            ),
            "too big (type: exceed_context_size_error)"
        );
        // vLLM's top-level form; a generic class is not shown.
        assert_eq!(
            error_message(
                br#"{"object":"error","message":"x","type":"BadRequestError","code":400}"#
            ),
            "x"
        );
        // A label the message already says is not repeated.
        assert_eq!(
            error_message(
                br#"{"error":{"message":"model_not_found: m","code":"model_not_found"}}"#
            ),
            "model_not_found: m"
        );
        assert_eq!(
            error_message(br#"{"error":{"code":"context_length_exceeded"}}"#),
            "code: context_length_exceeded"
        );
        // JSON without an error shape is summarized like text.
        assert_eq!(error_message(br#"{"ok":true}"#), r#"{"ok":true}"#);
    }

    #[test]
    fn other_bodies_are_summarized() {
        assert_eq!(error_message(b"  plain text \n"), "plain text");
        assert_eq!(
            error_message(b"first\n\nsecond\nthird\n"),
            "first (and 2 more lines)"
        );
        let long = "x".repeat(2000);
        assert_eq!(
            error_message(long.as_bytes()).chars().count(),
            MAX_MESSAGE_CHARS + 1
        );
        let page = "<!DOCTYPE html>\n<html>\n<head>\n<title>404   Not Found &amp; gone</title>\n</head>\n<body>\n<h1>Not Found</h1>\n<p>The requested URL was not found on this server.</p>\n<hr>\n<address>Apache/2.4.41 (Ubuntu) Server at 127.0.0.1 Port 8080</address>\n</body>\n</html>\n";
        assert_eq!(
            error_message(page.as_bytes()),
            format!(
                "an HTML page titled \"404 Not Found & gone\" ({} bytes), not an API answer: check the base URL",
                page.len()
            )
        );
        assert_eq!(
            summarize(b"<html><body>hi</body></html>"),
            "an HTML page saying \"hi\" (28 bytes), not an API answer: check the base URL"
        );
        assert_eq!(
            summarize(b"<html><body></body></html>"),
            "an HTML page (26 bytes), not an API answer: check the base URL"
        );
        let huge_title = format!("<html><title>{}</title></html>", "t".repeat(5000));
        assert!(summarize(huge_title.as_bytes()).chars().count() < 300);
        assert_eq!(
            summarize(b"<b>bold</b> is not a page"),
            "<b>bold</b> is not a page"
        );
        assert_eq!(summarize(b""), "");
    }
}
