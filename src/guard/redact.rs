//! The secrets and personal-data redactor: API keys of common shapes,
//! bearer tokens, email addresses, card numbers that pass the Luhn check.

use super::{BoxError, Input, InputVerdict, Output, OutputVerdict, ToolOutput, ToolOutputVerdict};
use crate::ToolCall;

/// Prefixes of API keys and tokens, with the shortest body after them.
const KEY_PREFIXES: &[(&str, usize)] = &[
    ("sk-", 20),  // OpenAI, Anthropic (sk-ant-), DeepSeek...
    ("ghp_", 20), // GitHub tokens
    ("gho_", 20),
    ("ghs_", 20),
    ("ghu_", 20),
    ("github_pat_", 20),
    ("glpat-", 20), // GitLab
    ("xoxb-", 10),  // Slack
    ("xoxp-", 10),
    ("AKIA", 16), // AWS access key ids
    ("AIza", 30), // Google API keys
    ("hf_", 20),  // Hugging Face
];

/// Replaces secrets and personal data in a text with `[redacted key]`,
/// `[redacted token]`, `[redacted email]` or `[redacted card]`.
///
/// A guard at every point that has text: as a [`ToolOutput`] or
/// [`Output`] guard it replaces what it finds (and allows a clean text);
/// as an [`Input`] guard it replaces the user's message.
///
/// What it finds: keys that start with a known prefix (`sk-`, `ghp_`,
/// `github_pat_`, `glpat-`, `xoxb-`, `AKIA`, `AIza`, `hf_`...) and go on
/// for at least 10 to 30 key characters; the token after `Bearer `; email
/// addresses; 13 to 19 digits (spaces or dashes between them allowed)
/// that pass the Luhn check. It is a pattern matcher, not a proof: a key
/// of an unknown shape passes.
///
/// # Examples
///
/// ```
/// use pikuri::guard::Redactor;
///
/// let r = Redactor::new();
/// let text = "key sk-abcdefghijklmnopqrstuvwx, card 4111 1111 1111 1111, mail a.b@example.org";
/// assert_eq!(
///     r.redact(text).as_deref(),
///     Some("key [redacted key], card [redacted card], mail [redacted email]")
/// );
/// assert_eq!(r.redact("order 4111 1111 1111 1112 shipped"), None); // fails Luhn
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Redactor {
    _private: (),
}

impl Redactor {
    /// A redactor of every kind above.
    pub fn new() -> Redactor {
        Redactor { _private: () }
    }

    /// `text` with what it found replaced, or `None` when it found nothing.
    pub fn redact(&self, text: &str) -> Option<String> {
        let mut spans = Vec::new();
        keys(text, &mut spans);
        bearer(text, &mut spans);
        emails(text, &mut spans);
        cards(text, &mut spans);
        if spans.is_empty() {
            return None;
        }
        spans.sort_by_key(|s| s.0);
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end, label) in spans {
            // Overlapping finds: the first one covers it.
            if start < at {
                continue;
            }
            out.push_str(&text[at..start]);
            out.push_str(label);
            at = end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }
}

impl Input for Redactor {
    fn check(&self, text: &str) -> Result<InputVerdict, BoxError> {
        Ok(self
            .redact(text)
            .map_or(InputVerdict::Allow, InputVerdict::Replace))
    }

    /// Pure and linear in the text: on the loop's thread, no hand-off.
    fn inline(&self) -> bool {
        true
    }
}

impl Output for Redactor {
    fn check(&self, answer: &str) -> Result<OutputVerdict, BoxError> {
        Ok(self
            .redact(answer)
            .map_or(OutputVerdict::Allow, OutputVerdict::Replace))
    }

    /// Pure and linear in the text: on the loop's thread, no hand-off.
    fn inline(&self) -> bool {
        true
    }
}

impl ToolOutput for Redactor {
    fn check(&self, _call: &ToolCall, output: &str) -> Result<ToolOutputVerdict, BoxError> {
        Ok(self
            .redact(output)
            .map_or(ToolOutputVerdict::Allow, ToolOutputVerdict::Replace))
    }

    /// Pure and linear in the text: on the loop's thread, no hand-off.
    fn inline(&self) -> bool {
        true
    }
}

/// A found span: byte start, byte end, replacement.
type Span = (usize, usize, &'static str);

fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether the byte before `i` ends a word (so `task-` is not `sk-`).
fn word_start(bytes: &[u8], i: usize) -> bool {
    i == 0 || !bytes[i - 1].is_ascii_alphanumeric()
}

fn keys(text: &str, spans: &mut Vec<Span>) {
    let bytes = text.as_bytes();
    for &(prefix, min) in KEY_PREFIXES {
        let mut from = 0;
        while let Some(pos) = text[from..].find(prefix) {
            let start = from + pos;
            let mut end = start + prefix.len();
            while end < bytes.len() && is_key_char(bytes[end]) {
                end += 1;
            }
            if word_start(bytes, start) && end - start - prefix.len() >= min {
                spans.push((start, end, "[redacted key]"));
            }
            from = end.max(start + 1);
        }
    }
}

fn bearer(text: &str, spans: &mut Vec<Span>) {
    let bytes = text.as_bytes();
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find("bearer ") {
        let start = from + pos + "bearer ".len();
        let mut end = start;
        while end < bytes.len()
            && (is_key_char(bytes[end]) || matches!(bytes[end], b'.' | b'~' | b'+' | b'/' | b'='))
        {
            end += 1;
        }
        if end - start >= 16 {
            spans.push((start, end, "[redacted token]"));
        }
        from = end.max(start);
    }
}

fn emails(text: &str, spans: &mut Vec<Span>) {
    let bytes = text.as_bytes();
    let local = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-');
    let domain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-');
    for (at, _) in text.match_indices('@') {
        let mut start = at;
        while start > 0 && local(bytes[start - 1]) {
            start -= 1;
        }
        let mut end = at + 1;
        while end < bytes.len() && domain(bytes[end]) {
            end += 1;
        }
        // A trailing dot ends the sentence, not the address.
        while end > at + 1 && bytes[end - 1] == b'.' {
            end -= 1;
        }
        let host = &text[at + 1..end];
        let tld_ok = host.rsplit_once('.').is_some_and(|(name, tld)| {
            !name.is_empty() && tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic())
        });
        if start < at && tld_ok {
            spans.push((start, end, "[redacted email]"));
        }
    }
}

fn cards(text: &str, spans: &mut Vec<Span>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() || !word_start(bytes, i) {
            i += 1;
            continue;
        }
        // A run of digits, single spaces or dashes between them.
        let start = i;
        let mut end = i;
        let mut digits = Vec::new();
        let mut j = i;
        while j < bytes.len() {
            if bytes[j].is_ascii_digit() {
                digits.push(bytes[j] - b'0');
                j += 1;
                end = j;
            } else if matches!(bytes[j], b' ' | b'-')
                && bytes.get(j + 1).is_some_and(u8::is_ascii_digit)
            {
                j += 1;
            } else {
                break;
            }
        }
        let whole = end >= bytes.len() || !bytes[end].is_ascii_alphanumeric();
        if whole && (13..=19).contains(&digits.len()) && luhn(&digits) {
            spans.push((start, end, "[redacted card]"));
        }
        i = end.max(i + 1);
    }
}

/// The Luhn checksum: every second digit from the right doubled.
fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d);
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 { x - 9 } else { x }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_kind_and_leaves_the_rest() {
        let r = Redactor::new();
        assert_eq!(
            r.redact("Authorization: Bearer abc.def-ghi_jkl~mno123")
                .as_deref(),
            Some("Authorization: Bearer [redacted token]")
        );
        assert_eq!(
            r.redact("AKIAIOSFODNN7EXAMPLE and ghp_0123456789abcdefghijXYZ")
                .as_deref(),
            Some("[redacted key] and [redacted key]")
        );
        assert_eq!(
            r.redact("write to jo.doe+x@mail.example.com.").as_deref(),
            Some("write to [redacted email].")
        );
        assert_eq!(
            r.redact("5500-0000-0000-0004").as_deref(),
            Some("[redacted card]")
        );
        // Short prefixes in words, short numbers, a lone @, a bad checksum.
        for clean in [
            "the task-sk-1 ran",
            "sk-short",
            "call 555 1234",
            "@home",
            "x@y",
            "4111111111111112",
            "id 12345678901234567890123",
        ] {
            assert_eq!(r.redact(clean), None, "{clean}");
        }
    }

    #[test]
    fn luhn_matches_published_numbers() {
        let d = |s: &str| s.bytes().map(|b| b - b'0').collect::<Vec<_>>();
        assert!(luhn(&d("79927398713")));
        assert!(!luhn(&d("79927398710")));
        assert!(luhn(&d("4012888888881881")));
    }

    #[test]
    fn verdicts_allow_clean_text_and_replace_the_rest() {
        let r = Redactor::new();
        assert_eq!(Output::check(&r, "hi").unwrap(), OutputVerdict::Allow);
        assert_eq!(
            Input::check(&r, "me@example.com").unwrap(),
            InputVerdict::Replace("[redacted email]".into())
        );
        let call = ToolCall::new("1", "t", "{}");
        assert_eq!(
            ToolOutput::check(&r, &call, "me@example.com").unwrap(),
            ToolOutputVerdict::Replace("[redacted email]".into())
        );
    }
}
