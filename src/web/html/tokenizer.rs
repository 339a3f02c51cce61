//! A forgiving HTML tokenizer: one pass, no backtracking, never fails.
//!
//! It follows the shape of the HTML standard's tokenizer closely enough for
//! text extraction: start and end tags with attributes (quoted, unquoted or
//! bare), comments, `<!DOCTYPE>` and `<?..>` skipped, CDATA as text, and
//! the raw-text elements (`script`, `style`, `textarea`, `title`, ...)
//! whose content runs to the matching end tag. A `<` that starts no tag is
//! text. A tag cut off by the end of the input is dropped.
//!
//! Each byte is looked at a bounded number of times, so the work is linear
//! in the input; the one search that could rescan (for a raw-text element's
//! end tag) moves forward only.

/// One token. Slices borrow from the input; character references are not
/// yet decoded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Token<'a> {
    /// Ordinary text.
    Text(&'a str),
    /// The content of a raw-text element (`script`, `title`...); the element
    /// is the last [`Token::Start`].
    RawText(&'a str),
    /// The content of `<![CDATA[...]]>`: text whose `&` is literal.
    Cdata(&'a str),
    Start(Tag<'a>),
    /// An end tag's name as written.
    End(&'a str),
}

/// A start tag: its name and attributes as written (values unquoted).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Tag<'a> {
    pub(crate) name: &'a str,
    pub(crate) attrs: Vec<(&'a str, &'a str)>,
}

impl Tag<'_> {
    /// The raw value of attribute `name` (ASCII case-insensitive), first wins.
    pub(crate) fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, v)| v)
    }
}

/// Elements whose content is not markup.
const RAW_TEXT: [&str; 10] = [
    "script",
    "style",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "textarea",
    "title",
    "plaintext",
];

/// Iterator over the tokens of an HTML document.
#[derive(Debug)]
pub(crate) struct Tokenizer<'a> {
    src: &'a str,
    pos: usize,
    /// Set after a raw-text start tag: its content comes next.
    raw: Option<&'a str>,
}

impl<'a> Tokenizer<'a> {
    pub(crate) fn new(src: &'a str) -> Tokenizer<'a> {
        Tokenizer {
            src,
            pos: 0,
            raw: None,
        }
    }

    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    /// Index of the first byte at or after `from` that satisfies `f`, or
    /// the input length.
    fn seek(&self, from: usize, f: impl Fn(u8) -> bool) -> usize {
        self.bytes()[from.min(self.src.len())..]
            .iter()
            .position(|&b| f(b))
            .map_or(self.src.len(), |i| from + i)
    }

    /// Index just past the first `pat` at or after `from`, or the input length.
    fn skip_past(&self, from: usize, pat: &str) -> usize {
        self.src
            .get(from..)
            .and_then(|rest| rest.find(pat))
            .map_or(self.src.len(), |i| from + i + pat.len())
    }

    /// Content of the raw-text element `name`, ending before its end tag
    /// (or at the end of the input).
    fn raw_text(&mut self, name: &str) -> &'a str {
        let start = self.pos;
        let b = self.bytes();
        let mut at = start;
        let end = loop {
            let Some(i) = self.src[at..].find("</") else {
                break self.src.len();
            };
            let lt = at + i;
            let after = lt + 2;
            let name_end = after + name.len();
            if !name.eq_ignore_ascii_case("plaintext")
                && self
                    .src
                    .get(after..name_end)
                    .is_some_and(|n| n.eq_ignore_ascii_case(name))
                && b.get(name_end)
                    .is_none_or(|&c| c.is_ascii_whitespace() || c == b'/' || c == b'>')
            {
                break lt;
            }
            at = after;
        };
        self.pos = end;
        &self.src[start..end]
    }

    /// A start tag at `self.pos` (just past `<`, on a letter).
    fn start_tag(&mut self) -> Option<Tag<'a>> {
        let b = self.bytes();
        let name_end = self.seek(self.pos, |c| {
            c.is_ascii_whitespace() || c == b'/' || c == b'>'
        });
        let name = &self.src[self.pos..name_end];
        let mut attrs = Vec::new();
        let mut i = name_end;
        loop {
            i = self.seek(i, |c| !(c.is_ascii_whitespace() || c == b'/'));
            match b.get(i) {
                None => {
                    self.pos = i;
                    return None;
                }
                Some(b'>') => {
                    self.pos = i + 1;
                    return Some(Tag { name, attrs });
                }
                Some(_) => {}
            }
            // The first character may be `=`; the name runs to a delimiter.
            let attr_end = self.seek(i + 1, |c| {
                c.is_ascii_whitespace() || c == b'/' || c == b'>' || c == b'='
            });
            let attr = &self.src[i..attr_end];
            i = self.seek(attr_end, |c| !c.is_ascii_whitespace());
            let mut value = "";
            if b.get(i) == Some(&b'=') {
                i = self.seek(i + 1, |c| !c.is_ascii_whitespace());
                match b.get(i) {
                    Some(&q @ (b'"' | b'\'')) => {
                        let close = self.seek(i + 1, |c| c == q);
                        if close == self.src.len() {
                            self.pos = close;
                            return None;
                        }
                        value = &self.src[i + 1..close];
                        i = close + 1;
                    }
                    Some(_) => {
                        let end = self.seek(i, |c| c.is_ascii_whitespace() || c == b'>');
                        value = &self.src[i..end];
                        i = end;
                    }
                    None => {}
                }
            }
            attrs.push((attr, value));
        }
    }
}

impl<'a> Iterator for Tokenizer<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        if let Some(name) = self.raw.take() {
            let text = self.raw_text(name);
            if !text.is_empty() {
                return Some(Token::RawText(text));
            }
        }
        let b = self.bytes();
        while self.pos < b.len() {
            let start = self.pos;
            if b[start] != b'<' {
                let end = self.seek(start, |c| c == b'<');
                self.pos = end;
                return Some(Token::Text(&self.src[start..end]));
            }
            let next = b.get(start + 1).copied();
            match next {
                Some(c) if c.is_ascii_alphabetic() => {
                    self.pos = start + 1;
                    let tag = self.start_tag()?;
                    if let Some(raw) = RAW_TEXT.iter().find(|r| tag.name.eq_ignore_ascii_case(r)) {
                        self.raw = Some(raw);
                    }
                    return Some(Token::Start(tag));
                }
                Some(b'/') => {
                    let after = start + 2;
                    if b.get(after).is_some_and(u8::is_ascii_alphabetic) {
                        let name_end =
                            self.seek(after, |c| c.is_ascii_whitespace() || c == b'/' || c == b'>');
                        let close = self.seek(name_end, |c| c == b'>');
                        if close == b.len() {
                            self.pos = close;
                            return None;
                        }
                        self.pos = close + 1;
                        return Some(Token::End(&self.src[after..name_end]));
                    }
                    // `</>` and `</3` (a bogus comment) are skipped.
                    self.pos = self.skip_past(after, ">");
                }
                Some(b'!') => {
                    let rest = &self.src[start..];
                    if rest.starts_with("<!--") {
                        // `<!-->` and `<!--->` are complete, empty comments.
                        self.pos = if rest.starts_with("<!-->") {
                            start + 5
                        } else if rest.starts_with("<!--->") {
                            start + 6
                        } else {
                            self.skip_past(start + 4, "-->")
                        };
                    } else if rest.starts_with("<![CDATA[") {
                        let from = start + 9;
                        let end = self.src[from..].find("]]>").map_or(b.len(), |i| from + i);
                        self.pos = (end + 3).min(b.len());
                        return Some(Token::Cdata(&self.src[from..end]));
                    } else {
                        self.pos = self.skip_past(start + 2, ">");
                    }
                }
                Some(b'?') => self.pos = self.skip_past(start + 2, ">"),
                _ => {
                    // A lone `<` is text.
                    self.pos = start + 1;
                    return Some(Token::Text(&self.src[start..=start]));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(s: &str) -> Vec<Token<'_>> {
        Tokenizer::new(s).collect()
    }

    fn start<'a>(name: &'a str, attrs: &[(&'a str, &'a str)]) -> Token<'a> {
        Token::Start(Tag {
            name,
            attrs: attrs.to_vec(),
        })
    }

    #[test]
    fn tags_attributes_and_text() {
        assert_eq!(
            tokens("<A HREF='x' b=1 c disabled/>t</a >"),
            [
                start(
                    "A",
                    &[("HREF", "x"), ("b", "1"), ("c", ""), ("disabled", "")]
                ),
                Token::Text("t"),
                Token::End("a"),
            ]
        );
        assert_eq!(
            tokens("<p data-x = \"a>b\">"),
            [start("p", &[("data-x", "a>b")])]
        );
    }

    #[test]
    fn comments_doctype_cdata_and_stray_lt() {
        assert_eq!(
            tokens("<!DOCTYPE html>a<!-- <p> -->b<!-->c<?xml x?>d<![CDATA[<&>]]>1 < 2 <3</>"),
            [
                Token::Text("a"),
                Token::Text("b"),
                Token::Text("c"),
                Token::Text("d"),
                Token::Cdata("<&>"),
                Token::Text("1 "),
                Token::Text("<"),
                Token::Text(" 2 "),
                Token::Text("<"),
                Token::Text("3"),
            ]
        );
    }

    #[test]
    fn raw_text_runs_to_its_end_tag() {
        assert_eq!(
            tokens("<script>if (a</b) x = '</scripts>';</SCRIPT>t"),
            [
                start("script", &[]),
                Token::RawText("if (a</b) x = '</scripts>';"),
                Token::End("SCRIPT"),
                Token::Text("t"),
            ]
        );
        assert_eq!(
            tokens("<style>never closed <p>"),
            [start("style", &[]), Token::RawText("never closed <p>")]
        );
    }

    #[test]
    fn truncated_input_drops_the_partial_tag() {
        assert_eq!(tokens("a<div class=\"x"), [Token::Text("a")]);
        assert_eq!(tokens("a<div"), [Token::Text("a")]);
        assert_eq!(tokens("a</div"), [Token::Text("a")]);
        assert_eq!(tokens("a<!-- x"), [Token::Text("a")]);
        assert_eq!(tokens("<"), [Token::Text("<")]);
        assert_eq!(
            tokens("é<é"),
            [Token::Text("é"), Token::Text("<"), Token::Text("é")]
        );
    }
}
