//! One oversized tool result: [`ToolResultLimit`].

use std::fmt::Write as _;

/// The cap on one tool result, applied as it is appended to the history;
/// set with [`Configurator::tool_result_limit`](crate::Configurator::tool_result_limit).
///
/// On by default: a result over `share` of the context window (estimated
/// at 4 characters a token), or over `chars_without_cap` characters when
/// the window is unknown, would break every later request. It is cut to
/// the limit and ends with `[... truncated: N of M characters shown]`, so
/// the model knows. The [`Event::ToolResult`](crate::Event::ToolResult) carries the truncated text,
/// as sent.
///
/// # Examples
///
/// ```
/// use pikuri::compaction::ToolResultLimit;
/// let limit = ToolResultLimit::default();
/// assert_eq!(limit.max_chars(Some(8192)), Some(8192)); // 25% of 8192 tokens × 4
/// assert_eq!(limit.max_chars(None), Some(ToolResultLimit::CHARS_WITHOUT_CAP));
/// assert_eq!(ToolResultLimit::off().max_chars(Some(8192)), None);
/// let tight = ToolResultLimit::default().share(0.5).chars_without_cap(1000);
/// assert_eq!(tight.max_chars(Some(1000)), Some(2000));
/// assert_eq!(tight.max_chars(None), Some(1000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ToolResultLimit {
    share: f64,
    chars_without_cap: usize,
    on: bool,
}

impl Default for ToolResultLimit {
    fn default() -> ToolResultLimit {
        ToolResultLimit {
            share: 0.25,
            chars_without_cap: ToolResultLimit::CHARS_WITHOUT_CAP,
            on: true,
        }
    }
}

impl ToolResultLimit {
    /// The limit when the context window is unknown: 100,000 characters
    /// (about 25,000 tokens, a quarter of a 100k window).
    pub const CHARS_WITHOUT_CAP: usize = 100_000;

    /// No limit: results go to the model whole.
    pub fn off() -> ToolResultLimit {
        ToolResultLimit {
            on: false,
            ..ToolResultLimit::default()
        }
    }

    /// The share of the window one result may take (clamped to
    /// 0.01..=1.0; default 0.25).
    #[must_use]
    pub fn share(mut self, share: f64) -> ToolResultLimit {
        self.share = if share.is_nan() {
            0.25
        } else {
            share.clamp(0.01, 1.0)
        };
        self.on = true;
        self
    }

    /// The limit in characters when the window is unknown.
    #[must_use]
    pub fn chars_without_cap(mut self, chars: usize) -> ToolResultLimit {
        self.chars_without_cap = chars.max(1);
        self.on = true;
        self
    }

    /// The most characters a result may have under a window of `cap`
    /// tokens; `None` when there is no limit.
    pub fn max_chars(&self, cap: Option<u64>) -> Option<usize> {
        if !self.on {
            return None;
        }
        Some(match cap {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss,
                reason = "a window fits in f64 and the product in usize"
            )]
            Some(cap) => ((cap as f64 * self.share) as usize)
                .saturating_mul(4)
                .max(1),
            None => self.chars_without_cap,
        })
    }
}

impl ToolResultLimit {
    /// A tool result as it is appended, under a window of `cap` tokens.
    pub(crate) fn apply(&self, content: String, cap: Option<u64>) -> String {
        truncate_result(content, self.max_chars(cap))
    }
}

/// `content` cut to `max` characters plus the marker, when longer.
fn truncate_result(content: String, max: Option<usize>) -> String {
    let Some(max) = max else { return content };
    let total = content.chars().count();
    if total <= max {
        return content;
    }
    let end = content
        .char_indices()
        .nth(max)
        .map_or(content.len(), |(i, _)| i);
    let mut out = content[..end].to_string();
    let _ = write!(out, "\n[... truncated: {max} of {total} characters shown]");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate_result("short".into(), Some(10)), "short");
        assert_eq!(truncate_result("x".repeat(20), None), "x".repeat(20));
        assert_eq!(
            truncate_result("ü".repeat(20), Some(5)),
            format!(
                "{}\n[... truncated: 5 of 20 characters shown]",
                "ü".repeat(5)
            )
        );
    }
}
