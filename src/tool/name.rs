//! Tool names every provider accepts: the check applied to every tool an
//! agent holds, and the rule that turns any text (an MCP server's tool
//! name) into such a name.
//!
//! The providers' rules, as their API references state them:
//!
//! | provider | rule |
//! |---|---|
//! | OpenAI (and the compatible servers) | `^[a-zA-Z0-9_-]{1,64}$` |
//! | Anthropic | `^[a-zA-Z0-9_-]{1,64}$` |
//! | Gemini / Vertex AI | starts with a letter or `_`; letters, digits, `_`, `-` (and `.`, `:`), at most 64 |
//!
//! Their intersection, which this crate requires, is
//! `^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`.

use std::fmt::Write as _;

/// The longest name every provider accepts.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// Whether `c` may appear in a tool name.
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether `name` matches `^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$`.
pub(crate) fn is_valid(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.len() <= MAX_NAME_LEN
        && chars.all(allowed)
}

/// `Ok` for a valid name, else the message of an
/// [`Error::InvalidInput`](crate::Error::InvalidInput): the name (quoted,
/// escaped, bounded) and the rule.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if is_valid(name) {
        return Ok(());
    }
    let mut shown = String::new();
    let _ = write!(shown, "{:?}", crate::util::excerpt(name, 80));
    Err(format!(
        "invalid tool name {shown}: a tool name is 1 to {MAX_NAME_LEN} characters from \
         [a-zA-Z0-9_-], starting with a letter or `_` (the names OpenAI, Anthropic and \
         Gemini all accept)"
    ))
}

/// `raw` with every character outside `[a-zA-Z0-9_-]` replaced by `_` (one
/// per character, so `é` or a control character is one `_`), and `_` put
/// in front when it does not start with a letter or `_`. Not yet bounded:
/// the caller cuts it (see [`hashed`]).
// Only MCP uses it (the `mcp` feature).
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
pub(crate) fn sanitize(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 1);
    if !raw.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.push('_');
    }
    out.extend(raw.chars().map(|c| if allowed(c) { c } else { '_' }));
    out
}

/// FNV-1a (64 bits) of `bytes`: stable across runs, platforms and releases,
/// unlike `std`'s `DefaultHasher`.
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `clean` (already sanitized, ASCII) cut so that `_` and the 8 hex digits
/// of `hash` fit in [`MAX_NAME_LEN`], with that suffix.
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
pub(crate) fn hashed(clean: &str, hash: u64) -> String {
    let suffix = format!("_{:08x}", hash as u32);
    let keep = clean.len().min(MAX_NAME_LEN - suffix.len());
    format!("{}{suffix}", &clean[..keep])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_the_providers_intersection() {
        for ok in ["a", "_", "read_file", "A-b_9", &"x".repeat(64)] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in [
            "",
            "9lives",
            "-x",
            "a.b",
            "a b",
            "a\u{7}",
            "<b>",
            "é",
            &"x".repeat(65),
        ] {
            assert!(!is_valid(bad), "{bad:?}");
            assert!(check_name(bad).is_err());
        }
        let msg = check_name(&format!("bad\n{}", "y".repeat(200))).unwrap_err();
        assert!(msg.starts_with("invalid tool name \"bad\\nyyy"), "{msg}");
        assert!(msg.len() < 300, "{msg}");
    }

    #[test]
    fn sanitize_and_hashed_give_valid_names() {
        assert_eq!(sanitize("my server__a.b/c"), "my_server__a_b_c");
        assert_eq!(sanitize("1st__x"), "_1st__x");
        assert_eq!(sanitize("é\u{0}<i>"), "____i_");
        let long = hashed(&sanitize(&"x".repeat(100)), fnv1a(b"x"));
        assert_eq!(long.len(), 64);
        assert!(is_valid(&long) && is_valid(&hashed("a", 1)));
        assert_eq!(hashed("a", 0xdead_beef), "a_deadbeef");
    }
}
