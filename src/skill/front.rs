//! The front matter of a `SKILL.md`: the small part of YAML the Agent
//! Skills format uses, read here rather than with a YAML library (the crate
//! has none, and needs none for this).
//!
//! What is read, between a first line `---` and the next line `---`:
//!
//! - `key: value` at the left margin, where the value is a plain scalar
//!   (a trailing ` # comment` dropped), a `'single'` or `"double"` quoted
//!   one (with `''`, and `\"` `\\` `\n` `\t` `\uXXXX`), or a block scalar
//!   (`|` keeps the line breaks, `>` folds them into spaces; an optional
//!   `-` or `+` after either is accepted and the text is trimmed);
//! - a key with nothing after the colon, followed by more indented lines:
//!   `- item` lines (a list) or `key: value` lines (a map of strings);
//! - `[a, b]` flow lists of plain or quoted items;
//! - blank lines and `#` comment lines anywhere.
//!
//! Anything else (anchors, tags, nested maps, tabs in indentation, a key
//! twice) is an error naming the line. The reader is bounded: at most
//! [`MAX_LINES`] lines and [`MAX_BYTES`] bytes of front matter.

use std::fmt;

/// The most lines a front matter may have.
pub(crate) const MAX_LINES: usize = 500;
/// The most bytes a front matter may have.
pub(crate) const MAX_BYTES: usize = 64 * 1024;

/// A value of the front matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A scalar.
    Str(String),
    /// A list of scalars.
    List(Vec<String>),
    /// A map of scalars, in file order.
    Map(Vec<(String, String)>),
}

/// What went wrong, and on which line of the file (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrontError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl fmt::Display for FrontError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

fn err<T>(line: usize, message: impl Into<String>) -> Result<T, FrontError> {
    Err(FrontError {
        line,
        message: message.into(),
    })
}

/// The parsed front matter (keys in file order) and the body after it.
pub(crate) struct Parsed<'a> {
    pub(crate) fields: Vec<(String, Value)>,
    pub(crate) body: &'a str,
}

/// Split `text` into its front matter and body, and read the front matter.
pub(crate) fn parse(text: &str) -> Result<Parsed<'_>, FrontError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => {
            return err(
                1,
                "a SKILL.md starts with a `---` line, then its front matter",
            );
        }
    }
    let mut consumed = text.split_inclusive('\n').next().map_or(0, str::len);
    let mut front = Vec::new();
    let mut closed = false;
    for (n, line) in lines.enumerate() {
        consumed += line.len();
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        if n + 1 >= MAX_LINES || consumed > MAX_BYTES {
            return err(
                n + 2,
                format!(
                    "the front matter is longer than {MAX_LINES} lines or {} KiB",
                    MAX_BYTES / 1024
                ),
            );
        }
        front.push(line.trim_end_matches(['\n', '\r']));
    }
    if !closed {
        return err(
            front.len() + 1,
            "the front matter has no closing `---` line",
        );
    }
    let fields = read_fields(&front)?;
    Ok(Parsed {
        fields,
        body: &text[consumed..],
    })
}

/// The indentation of `line` in spaces; a tab in it is an error.
fn indent(line: &str, n: usize) -> Result<usize, FrontError> {
    let rest = line.trim_start_matches(' ');
    if rest.starts_with('\t') {
        return err(n, "a tab in the indentation (YAML indents with spaces)");
    }
    Ok(line.len() - rest.len())
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// The fields of the front matter's `lines` (line 1 of the file is the
/// opening `---`, so `lines[i]` is line `i + 2`).
fn read_fields(lines: &[&str]) -> Result<Vec<(String, Value)>, FrontError> {
    let mut fields: Vec<(String, Value)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let n = i + 2;
        let line = lines[i];
        i += 1;
        if is_blank_or_comment(line) {
            continue;
        }
        if indent(line, n)? > 0 {
            return err(n, "an indented line where a `key: value` line belongs");
        }
        let Some((key, rest)) = split_key(line) else {
            return err(
                n,
                format!("expected `key: value`, found {:?}", excerpt(line)),
            );
        };
        if fields.iter().any(|(k, _)| k == key) {
            return err(n, format!("`{key}` is given twice"));
        }
        // The lines that belong to this key: the following more indented
        // ones (and blank lines between them).
        let start = i;
        while i < lines.len() && (lines[i].trim().is_empty() || indent(lines[i], i + 2)? > 0) {
            i += 1;
        }
        let block = &lines[start..i];
        let value = match rest.trim() {
            "" => nested(block, start + 2)?,
            r if r.starts_with('|') || r.starts_with('>') => block_scalar(r, block, n)?,
            r => {
                if let Some(extra) = block.iter().position(|l| !is_blank_or_comment(l)) {
                    return err(
                        start + 2 + extra,
                        format!("`{key}` has a value on its line and more below it"),
                    );
                }
                if r.starts_with('[') {
                    Value::List(flow_list(r, n)?)
                } else {
                    Value::Str(scalar(r, n)?)
                }
            }
        };
        fields.push((key.to_string(), value));
    }
    Ok(fields)
}

/// `key: rest` of a line, when its key is a plain word.
fn split_key(line: &str) -> Option<(&str, &str)> {
    let (key, rest) = line.split_once(':')?;
    let key = key.trim_end();
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    (plain && (rest.is_empty() || rest.starts_with([' ', '\t']))).then_some((key, rest))
}

/// A key's indented lines: a list of `- item`, or a map of `key: value`.
fn nested(block: &[&str], first: usize) -> Result<Value, FrontError> {
    let mut items = Vec::new();
    let mut map: Vec<(String, String)> = Vec::new();
    for (k, line) in block.iter().enumerate() {
        let n = first + k;
        if is_blank_or_comment(line) {
            continue;
        }
        let t = line.trim();
        if let Some(item) = t.strip_prefix("- ").or_else(|| (t == "-").then_some("")) {
            if !map.is_empty() {
                return err(n, "a list item among `key: value` lines");
            }
            items.push(scalar(item.trim(), n)?);
        } else if let Some((key, rest)) = split_key(t) {
            if !items.is_empty() {
                return err(n, "a `key: value` line among list items");
            }
            if map.iter().any(|(k, _)| k == key) {
                return err(n, format!("`{key}` is given twice"));
            }
            let rest = rest.trim();
            if rest.is_empty() || rest.starts_with(['|', '>', '[']) {
                return err(n, format!("`{key}`: only a one-line value is read here"));
            }
            map.push((key.to_string(), scalar(rest, n)?));
        } else {
            return err(
                n,
                format!("expected `- item` or `key: value`, found {:?}", excerpt(t)),
            );
        }
    }
    Ok(if map.is_empty() {
        Value::List(items)
    } else {
        Value::Map(map)
    })
}

/// `|` or `>` (with an optional chomping sign) and its indented lines.
fn block_scalar(head: &str, block: &[&str], n: usize) -> Result<Value, FrontError> {
    let style = head.chars().next().unwrap_or('|');
    let sign = head[1..].trim();
    if !matches!(sign, "" | "-" | "+") {
        return err(n, format!("unsupported block scalar header {head:?}"));
    }
    let margin = block
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches(' ').len())
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = block
        .iter()
        .map(|l| if l.len() >= margin { &l[margin..] } else { "" })
        .collect();
    let text = if style == '|' {
        lines.join("\n")
    } else {
        // Folded: lines of one paragraph join with a space, a blank line
        // is a line break.
        let mut out = String::new();
        for l in lines {
            if l.trim().is_empty() {
                out.push('\n');
            } else {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push(' ');
                }
                out.push_str(l.trim_end());
            }
        }
        out
    };
    Ok(Value::Str(text.trim().to_string()))
}

/// `[a, "b", 'c']`.
fn flow_list(text: &str, n: usize) -> Result<Vec<String>, FrontError> {
    let Some(inner) = text
        .strip_prefix('[')
        .and_then(|t| t.trim_end().strip_suffix(']'))
    else {
        return err(n, "a `[` list without its closing `]` on the same line");
    };
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    // Items hold no commas inside quotes in any skill seen; a quoted comma
    // is refused rather than misread.
    inner
        .split(',')
        .map(|item| {
            let item = item.trim();
            if item.matches(['"', '\'']).count() % 2 == 1 {
                return err(n, "a comma inside a quoted list item");
            }
            scalar(item, n)
        })
        .collect()
}

/// One scalar: plain, `'single'` or `"double"` quoted.
fn scalar(text: &str, n: usize) -> Result<String, FrontError> {
    if let Some(rest) = text.strip_prefix('"') {
        return double_quoted(rest, n);
    }
    if let Some(rest) = text.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    out.push('\'');
                    continue;
                }
                return trailing(chars.collect::<String>().as_str(), n).map(|()| out);
            }
            out.push(c);
        }
        return err(n, "a single-quoted value without its closing quote");
    }
    if text.starts_with(['&', '*', '!', '{', '%', '@', '`']) {
        return err(n, format!("unsupported YAML in {:?}", excerpt(text)));
    }
    // A plain scalar ends at ` #`.
    let plain = text.find(" #").map_or(text, |at| &text[..at]);
    Ok(plain.trim().to_string())
}

/// What may follow a closing quote: spaces and a comment.
fn trailing(rest: &str, n: usize) -> Result<(), FrontError> {
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(())
    } else {
        err(
            n,
            format!("text after a closing quote: {:?}", excerpt(rest)),
        )
    }
}

fn double_quoted(rest: &str, n: usize) -> Result<String, FrontError> {
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return trailing(chars.as_str(), n).map(|()| out),
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('0') => out.push('\0'),
                Some(c @ ('"' | '\\' | '/' | ' ')) => out.push(c),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let c = u32::from_str_radix(&hex, 16)
                        .ok()
                        .filter(|_| hex.len() == 4)
                        .and_then(char::from_u32);
                    match c {
                        Some(c) => out.push(c),
                        None => return err(n, format!("a bad `\\u` escape: {hex:?}")),
                    }
                }
                other => {
                    return err(
                        n,
                        format!("an unsupported escape `\\{}`", other.unwrap_or(' ')),
                    );
                }
            },
            c => out.push(c),
        }
    }
    err(n, "a double-quoted value without its closing quote")
}

fn excerpt(text: &str) -> String {
    crate::util::excerpt(text, 60).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> Vec<(String, Value)> {
        parse(text).unwrap().fields
    }

    fn error(text: &str) -> FrontError {
        match parse(text) {
            Ok(p) => panic!("parsed: {:?}", p.fields),
            Err(e) => e,
        }
    }

    fn s(v: &str) -> Value {
        Value::Str(v.into())
    }

    #[test]
    fn scalars_of_every_form() {
        let f = fields(
            "---\nname: pdf-tools # a comment\ndescription: 'It''s: here'\nlicense: \"MIT \\u00e9\\n\"\n\
             compatibility: plain: with colon\n---\nbody\n",
        );
        assert_eq!(
            f,
            vec![
                ("name".into(), s("pdf-tools")),
                ("description".into(), s("It's: here")),
                ("license".into(), s("MIT é\n")),
                ("compatibility".into(), s("plain: with colon")),
            ]
        );
        assert_eq!(parse("---\nname: a\n---\nbody\n").unwrap().body, "body\n");
    }

    #[test]
    fn block_scalars_lists_and_maps() {
        let f = fields(
            "---\ndescription: >\n  Folded\n  lines.\n\n  Second.\nbody: |-\n  kept\n    indented\n\
             allowed-tools: [Read, \"Bash(git:*)\"]\ntags:\n  - a\n  - 'b c'\nmetadata:\n  author: me\n  version: \"1.0\"\n---\n",
        );
        assert_eq!(f[0].1, s("Folded lines.\nSecond."));
        assert_eq!(f[1].1, s("kept\n  indented"));
        assert_eq!(
            f[2].1,
            Value::List(vec!["Read".into(), "Bash(git:*)".into()])
        );
        assert_eq!(f[3].1, Value::List(vec!["a".into(), "b c".into()]));
        assert_eq!(
            f[4].1,
            Value::Map(vec![
                ("author".into(), "me".into()),
                ("version".into(), "1.0".into())
            ])
        );
    }

    #[test]
    fn crlf_bom_and_comments() {
        let f = fields("\u{feff}---\r\n# c\r\nname: x\r\n\r\n---\r\nbody");
        assert_eq!(f, vec![("name".into(), s("x"))]);
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(error("name: x\n").line, 1);
        assert!(error("---\nname: x\n").message.contains("closing `---`"));
        let e = error("---\nname: x\nname: y\n---\n");
        assert_eq!((e.line, e.message.as_str()), (3, "`name` is given twice"));
        assert_eq!(error("---\nname: x\n\tdescription: y\n---\n").line, 3);
        assert_eq!(error("---\nname: x\njust text\n---\n").line, 3);
        assert_eq!(error("---\nname: \"open\n---\n").line, 2);
        assert_eq!(error("---\nname: &anchor x\n---\n").line, 2);
        assert_eq!(error("---\nname: x\n  more: y\n---\n").line, 3);
        assert_eq!(error("---\nmeta:\n  a: b\n  - c\n---\n").line, 4);
        assert_eq!(error("---\nname: 'x' tail\n---\n").line, 2);
        assert_eq!(error("---\nname: \"\\q\"\n---\n").line, 2);
        assert_eq!(error("---\nt: [a, b\n---\n").line, 2);
    }

    #[test]
    fn bounded() {
        let long = format!("---\n{}---\n", "a: b\n".repeat(MAX_LINES + 10));
        assert!(error(&long).message.contains("longer than"));
        let wide = format!("---\na: {}\n---\n", "x".repeat(MAX_BYTES + 1));
        assert!(error(&wide).message.contains("longer than"));
        // No closing line in a huge file: the bound, not a scan to the end.
        let open = format!("---\n{}", "a: b\n".repeat(100_000));
        assert!(error(&open).message.contains("longer than"));
    }
}
