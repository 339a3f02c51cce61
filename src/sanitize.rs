//! The Sanitizer: [`sanitize`] and [`sanitize_report`].

use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// Why a text was unsafe to print raw; see [`sanitize`] for the characters
/// behind each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Hazard {
    /// An ESC: the start of a terminal control sequence (CSI, OSC…).
    Escape,
    /// A carriage return that can overwrite the current line.
    CarriageReturn,
    /// A backspace, which can overwrite the previous character.
    Backspace,
    /// Another C0 or C1 control character, or DEL.
    Control,
    /// A bidirectional-text control that reorders what is displayed.
    Bidi,
    /// A zero-width or otherwise invisible character.
    ZeroWidth,
}

const ALL: [Hazard; 6] = [
    Hazard::Escape,
    Hazard::CarriageReturn,
    Hazard::Backspace,
    Hazard::Control,
    Hazard::Bidi,
    Hazard::ZeroWidth,
];

impl Hazard {
    /// A short human-readable name: `"ESC"`, `"CR overwrite"`, `"backspace"`,
    /// `"control character"`, `"bidi override"`, `"zero-width"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Hazard::Escape => "ESC",
            Hazard::CarriageReturn => "CR overwrite",
            Hazard::Backspace => "backspace",
            Hazard::Control => "control character",
            Hazard::Bidi => "bidi override",
            Hazard::ZeroWidth => "zero-width",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Hazard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of [`sanitize_report`]: the safe text and why it had to change.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sanitized<'a> {
    /// The text with every dangerous character escaped (borrowed when nothing
    /// needed escaping).
    pub text: Cow<'a, str>,
    /// Each hazard found, once, in the order of the [`Hazard`] variants.
    /// Empty when the text was safe (a tab alone is not a hazard).
    pub hazards: Vec<Hazard>,
}

/// Escape control, bidi and zero-width characters so `text` can be printed
/// on a terminal as it is (pikuri's Sanitizer).
///
/// Text a model composed (answers, reasoning, tool arguments, tool results it
/// pulled from the web) can carry bytes a terminal *executes*: `ESC [2J`
/// clears the screen, `ESC ] 0;… BEL` retitles the window, a bare CR or a
/// backspace overwrites what was already printed, and bidi overrides or
/// zero-width characters make the text read differently from what it is.
/// Every renderer, and every confirmation prompt, shows such text only
/// through this function. Returns the input borrowed when nothing needed
/// escaping.
///
/// # Examples
///
/// ```
/// use std::borrow::Cow;
/// use pikuri::listeners::sanitize;
///
/// assert_eq!(sanitize("\x1b[2Jgone?"), r"\x1b[2Jgone?");
/// assert_eq!(sanitize("a\tb\u{202e}c"), r"a\tb\u{202e}c");
/// assert!(matches!(sanitize("plain\ntext"), Cow::Borrowed("plain\ntext")));
/// ```
///
/// # What is escaped
///
/// The output is **faithful, not beautified**: each dangerous character is
/// replaced by a visible escape, everything else (including `\n` and plain
/// Unicode) is left alone, so a person sees exactly which bytes were there.
///
/// | Input | Shown as | [`Hazard`] |
/// |---|---|---|
/// | ESC (U+001B) | `\x1b` | [`Escape`](Hazard::Escape) |
/// | CR (U+000D) not followed by `\n` | `\x0d` | [`CarriageReturn`](Hazard::CarriageReturn) |
/// | backspace (U+0008) | `\x08` | [`Backspace`](Hazard::Backspace) |
/// | other C0 controls, DEL, C1 controls (U+0080–U+009F) | `\xNN` | [`Control`](Hazard::Control) |
/// | tab | `\t` | none (harmless, but it hides alignment tricks) |
/// | bidi controls: U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C | `\u{NNNN}` | [`Bidi`](Hazard::Bidi) |
/// | zero-width and invisible: U+200B–U+200D, U+2060–U+2064, U+FEFF, U+00AD, U+180E, tags U+E0000–U+E007F | `\u{NNNN}` | [`ZeroWidth`](Hazard::ZeroWidth) |
///
/// # Differences from pikuri's `Sanitizer`
///
/// - A CR directly followed by `\n` (a Windows line ending, common in fetched
///   pages) is kept: it moves the cursor to a column that the newline leaves
///   at once, so it cannot overwrite anything.
/// - The invisible math operators (U+2061–U+2064) and the Unicode tag block
///   (U+E0000–U+E007F, used to smuggle invisible ASCII) are escaped too.
/// - Homoglyphs are not detected.
/// - A backslash is not escaped, so the output is for display and cannot be
///   decoded back unambiguously.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    scan(text).0
}

/// Like [`sanitize`], and also reports why the text was unsafe (for a
/// confirmation prompt that warns "this command contains a bidi override").
///
/// # Examples
///
/// ```
/// use pikuri::listeners::{sanitize_report, Hazard};
///
/// let report = sanitize_report("ok\rrm -rf ~\x1b]0;pwned\x07");
/// assert_eq!(report.text, r"ok\x0drm -rf ~\x1b]0;pwned\x07");
/// assert_eq!(
///     report.hazards,
///     [Hazard::Escape, Hazard::CarriageReturn, Hazard::Control]
/// );
/// assert_eq!(report.hazards[1].to_string(), "CR overwrite");
/// assert!(sanitize_report("fine").hazards.is_empty());
/// ```
pub fn sanitize_report(text: &str) -> Sanitized<'_> {
    let (text, mask) = scan(text);
    let hazards = ALL.into_iter().filter(|h| mask & h.bit() != 0).collect();
    Sanitized { text, hazards }
}

/// How one character is shown.
enum Shown {
    /// `\xNN`.
    Hex,
    /// `\t`.
    Tab,
    /// `\u{NNNN}`.
    Unicode,
}

/// `None` when `c` is printed as is; `next` is the character after it.
fn classify(c: char, next: Option<char>) -> Option<(Shown, Option<Hazard>)> {
    let hazard = match c {
        '\n' => return None,
        '\t' => return Some((Shown::Tab, None)),
        '\r' if next == Some('\n') => return None,
        '\r' => Hazard::CarriageReturn,
        '\x1b' => Hazard::Escape,
        '\x08' => Hazard::Backspace,
        '\0'..='\x1f' | '\x7f'..='\u{9f}' => Hazard::Control,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}' => {
            return Some((Shown::Unicode, Some(Hazard::Bidi)));
        }
        '\u{200b}'..='\u{200d}'
        | '\u{2060}'..='\u{2064}'
        | '\u{feff}'
        | '\u{ad}'
        | '\u{180e}'
        | '\u{e0000}'..='\u{e007f}' => return Some((Shown::Unicode, Some(Hazard::ZeroWidth))),
        _ => return None,
    };
    Some((Shown::Hex, Some(hazard)))
}

/// The escaped text and a bit set of the hazards found.
fn scan(text: &str) -> (Cow<'_, str>, u8) {
    // Fast path: printable ASCII and newlines only.
    if text
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) || b == b'\n')
    {
        return (Cow::Borrowed(text), 0);
    }
    let mut out: Option<String> = None;
    let mut mask = 0u8;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let Some((shown, hazard)) = classify(c, next) else {
            if let Some(out) = &mut out {
                out.push(c);
            }
            continue;
        };
        let out = out.get_or_insert_with(|| {
            let mut s = String::with_capacity(text.len() + 16);
            s.push_str(&text[..i]);
            s
        });
        // Writing into a String cannot fail.
        let _ = match shown {
            Shown::Hex => write!(out, "\\x{:02x}", u32::from(c)),
            Shown::Tab => out.write_str("\\t"),
            Shown::Unicode => write!(out, "\\u{{{:04x}}}", u32::from(c)),
        };
        if let Some(h) = hazard {
            mask |= h.bit();
        }
    }
    (out.map_or(Cow::Borrowed(text), Cow::Owned), mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hazards(s: &str) -> Vec<Hazard> {
        sanitize_report(s).hazards
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        for s in [
            "",
            "hello",
            "two\nlines\n",
            "héllo wörld ✓ 日本語",
            "a\r\nb",
        ] {
            assert!(matches!(sanitize(s), Cow::Borrowed(b) if b == s), "{s:?}");
            assert!(hazards(s).is_empty());
        }
    }

    #[test]
    fn csi_clear_screen() {
        assert_eq!(sanitize("\x1b[2J\x1b[H"), r"\x1b[2J\x1b[H");
        assert_eq!(hazards("\x1b[2J"), [Hazard::Escape]);
    }

    #[test]
    fn osc_title_set() {
        assert_eq!(sanitize("\x1b]0;pwned\x07"), r"\x1b]0;pwned\x07");
        assert_eq!(
            hazards("\x1b]0;pwned\x07"),
            [Hazard::Escape, Hazard::Control]
        );
    }

    #[test]
    fn carriage_return_and_backspace() {
        assert_eq!(sanitize("safe\rEVIL"), r"safe\x0dEVIL");
        assert_eq!(sanitize("trailing\r"), r"trailing\x0d");
        assert_eq!(sanitize("ab\x08c"), r"ab\x08c");
        assert_eq!(
            hazards("a\rb\x08"),
            [Hazard::CarriageReturn, Hazard::Backspace]
        );
        // CRLF cannot overwrite anything: kept.
        assert_eq!(sanitize("a\r\nb\r\r\n"), "a\r\nb\\x0d\r\n");
    }

    #[test]
    fn other_controls() {
        assert_eq!(sanitize("\0\x7f\u{85}\u{9b}"), r"\x00\x7f\x85\x9b");
        assert_eq!(sanitize("a\tb"), r"a\tb");
        assert!(hazards("a\tb").is_empty());
    }

    #[test]
    fn bidi_override() {
        // "Trojan Source": the override makes `admin"` read reversed.
        let s = "if role != \"user\u{202e} \u{2066}// admin\u{2069} \u{2066}\"";
        assert_eq!(
            sanitize(s),
            r#"if role != "user\u{202e} \u{2066}// admin\u{2069} \u{2066}""#
        );
        assert_eq!(hazards(s), [Hazard::Bidi]);
        assert_eq!(
            sanitize("\u{200e}\u{200f}\u{61c}"),
            r"\u{200e}\u{200f}\u{061c}"
        );
    }

    #[test]
    fn zero_width_and_invisible() {
        assert_eq!(
            sanitize("pa\u{200b}y\u{200d}pal\u{feff}\u{ad}\u{180e}\u{2060}"),
            r"pa\u{200b}y\u{200d}pal\u{feff}\u{00ad}\u{180e}\u{2060}"
        );
        // Tag characters spell invisible ASCII ("hi").
        assert_eq!(sanitize("x\u{e0068}\u{e0069}"), r"x\u{e0068}\u{e0069}");
        assert_eq!(hazards("a\u{200b}"), [Hazard::ZeroWidth]);
    }

    #[test]
    fn prefix_before_first_escape_is_kept() {
        assert_eq!(sanitize("日本\x1bx"), r"日本\x1bx");
        assert_eq!(
            hazards("\u{202e}\x1b\u{200b}\r"),
            [
                Hazard::Escape,
                Hazard::CarriageReturn,
                Hazard::Bidi,
                Hazard::ZeroWidth
            ]
        );
    }
}
