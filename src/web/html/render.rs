//! Tokens to Markdown: an explicit element stack (no recursion), capped in
//! depth, drives the [`Out`] writer.

use std::collections::HashMap;

use super::entities;
use super::out::{Out, Part};
use super::tokenizer::{Tag, Token, Tokenizer};
use crate::web::url;

/// Deepest element stack kept. Deeper elements still show their text, but
/// their markup (and a `hidden` on them) is ignored.
pub(super) const MAX_DEPTH: usize = 512;
/// How far down the stack a start tag looks for an element it closes
/// implicitly (the previous `<li>`, cell or row).
const IMPLICIT_SCOPE: usize = 64;

/// Elements dropped with everything inside them.
const DROPPED: [&str; 20] = [
    "script", "style", "noscript", "template", "svg", "math", "nav", "aside", "form", "button",
    "select", "textarea", "iframe", "object", "canvas", "audio", "video", "map", "dialog", "head",
];
/// Elements that never have content.
const VOID: [&str; 15] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param",
    "source", "track", "wbr",
];
/// Elements that may appear inside `<head>`; anything else ends an unclosed head.
const HEAD_CONTENT: [&str; 8] = [
    "title", "meta", "link", "style", "script", "base", "noscript", "template",
];
/// Blocks separated from their neighbours by a blank line.
const PARAGRAPHS: [&str; 8] = [
    "p", "figure", "dl", "details", "address", "fieldset", "hgroup", "center",
];
/// Blocks on lines of their own.
const LINES: [&str; 14] = [
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "dt",
    "dd",
    "figcaption",
    "summary",
    "caption",
    "legend",
    "body",
    "html",
];

/// What closing an element has to write.
#[derive(Debug)]
enum Close {
    Nothing,
    /// A dropped subtree.
    Skip,
    Block(bool),
    /// Where the heading starts and where its text starts.
    Heading(usize, usize),
    List,
    Item,
    Quote,
    Pre,
    Code,
    /// A link: where its text starts, where its `[` is, and the target.
    Link(usize, usize, String),
    Table,
    Row,
    Cell,
}

#[derive(Debug)]
struct Elem {
    name: String,
    close: Close,
}

#[derive(Debug)]
struct List {
    ordered: bool,
    next: i64,
}

#[derive(Debug, Default)]
struct Table {
    rows: usize,
    cells: usize,
}

pub(super) struct Renderer<'b> {
    out: Out,
    stack: Vec<Elem>,
    /// How many elements of each name are on the stack, so an end tag with
    /// no open element is dismissed without a search.
    open: HashMap<String, usize>,
    /// Stack height of the outermost dropped element being skipped.
    skip: Option<usize>,
    lists: Vec<List>,
    tables: Vec<Table>,
    links: usize,
    base: Option<&'b str>,
    pub(super) title: Option<String>,
}

/// Lowercase tag name, capped so that a huge name costs one copy.
fn lower(name: &str) -> String {
    let mut end = name.len().min(64);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_ascii_lowercase()
}

fn is_hidden(tag: &Tag<'_>) -> bool {
    if tag.attr("hidden").is_some()
        || tag
            .attr("aria-hidden")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || tag
            .attr("role")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("navigation"))
    {
        return true;
    }
    tag.attr("style").is_some_and(|style| {
        let style: String = style
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .map(|c| c.to_ascii_lowercase())
            .collect();
        style.contains("display:none") || style.contains("visibility:hidden")
    })
}

impl<'b> Renderer<'b> {
    pub(super) fn new(base: Option<&'b str>) -> Renderer<'b> {
        Renderer {
            out: Out::new(),
            stack: Vec::new(),
            open: HashMap::new(),
            skip: None,
            lists: Vec::new(),
            tables: Vec::new(),
            links: 0,
            base,
            title: None,
        }
    }

    pub(super) fn run(mut self, html: &str) -> (String, Option<String>) {
        for token in Tokenizer::new(html) {
            match token {
                Token::Text(t) if self.skip.is_none() => {
                    self.out.text(&entities::decode(t, false));
                }
                Token::Cdata(t) if self.skip.is_none() => self.out.text(t),
                Token::RawText(t) => self.raw_text(t),
                Token::Start(tag) => self.start(&tag),
                Token::End(name) => self.end(&lower(name)),
                Token::Text(_) | Token::Cdata(_) => {}
            }
        }
        while !self.stack.is_empty() {
            self.pop();
        }
        (self.out.finish(), self.title)
    }

    fn raw_text(&mut self, t: &str) {
        if self.stack.last().is_some_and(|e| e.name == "title") && self.title.is_none() {
            let title = entities::decode(t, false);
            let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
            if !title.is_empty() {
                self.title = Some(crate::util::excerpt(&title, 300).into_owned());
            }
        }
    }

    fn push(&mut self, name: String, close: Close) {
        *self.open.entry(name.clone()).or_insert(0) += 1;
        self.stack.push(Elem { name, close });
    }

    fn is_open(&self, name: &str) -> bool {
        self.open.get(name).is_some_and(|&n| n > 0)
    }

    fn start(&mut self, tag: &Tag<'_>) {
        let name = lower(tag.name);
        let n = name.as_str();
        // An unclosed <head> ends where body content starts.
        if self.stack.last().is_some_and(|e| e.name == "head") && !HEAD_CONTENT.contains(&n) {
            self.pop();
        }
        if VOID.contains(&n) {
            if self.skip.is_none() {
                self.void(n, tag);
            }
            return;
        }
        if self.stack.len() >= MAX_DEPTH {
            return;
        }
        if self.skip.is_some() {
            return self.push(name, Close::Nothing);
        }
        if n == "title" {
            return self.push(name, Close::Nothing);
        }
        self.implicit_close(n);
        let chrome =
            matches!(n, "header" | "footer") && !self.is_open("article") && !self.is_open("main");
        if DROPPED.contains(&n) || chrome || is_hidden(tag) {
            self.skip = Some(self.stack.len());
            return self.push(name, Close::Skip);
        }
        let close = self.open(n, tag);
        self.push(name, close);
    }

    /// Close what a start tag `n` ends implicitly (an open `<p>`, the
    /// previous `<li>`, cell or row).
    fn implicit_close(&mut self, n: &str) {
        let block = PARAGRAPHS.contains(&n)
            || LINES.contains(&n)
            || matches!(
                n,
                "ul" | "ol"
                    | "table"
                    | "pre"
                    | "blockquote"
                    | "h1"
                    | "h2"
                    | "h3"
                    | "h4"
                    | "h5"
                    | "h6"
            );
        if block && self.stack.last().is_some_and(|e| e.name == "p") {
            self.pop();
        }
        let (targets, scope): (&[&str], &[&str]) = match n {
            "li" => (&["li"], &["ul", "ol"]),
            "dt" | "dd" => (&["dt", "dd"], &["dl"]),
            "tr" => (&["tr"], &["table"]),
            "td" | "th" => (&["td", "th"], &["tr", "table"]),
            "option" => (&["option"], &["select"]),
            _ => return,
        };
        let found = self
            .stack
            .iter()
            .rev()
            .take(IMPLICIT_SCOPE)
            .position(|e| targets.contains(&e.name.as_str()) || scope.contains(&e.name.as_str()))
            .map(|back| self.stack.len() - 1 - back);
        if let Some(i) = found
            && targets.contains(&self.stack[i].name.as_str())
        {
            while self.stack.len() > i {
                self.pop();
            }
        }
    }

    fn void(&mut self, n: &str, tag: &Tag<'_>) {
        match n {
            "br" => self.out.line_break(),
            "hr" => {
                self.out.block(true);
                self.out.word("---");
                self.out.block(true);
            }
            "img" if !is_hidden(tag) => {
                let alt = entities::decode(tag.attr("alt").unwrap_or(""), true);
                let alt = alt.split_whitespace().collect::<Vec<_>>().join(" ");
                if alt.is_empty() {
                    return;
                }
                match tag.attr("src").and_then(|s| self.target(s)) {
                    Some(src) => self.out.word(&format!("![{alt}]({src})")),
                    None => self.out.word(&alt),
                }
            }
            _ => {}
        }
    }

    /// An absolute http(s) URL for a link or image target, if it is one.
    fn target(&self, raw: &str) -> Option<String> {
        let raw = entities::decode(raw.trim(), true);
        if raw.is_empty() || raw.starts_with('#') {
            return None;
        }
        let abs = match self.base {
            Some(base) => url::resolve(base, &raw),
            None => raw,
        };
        let lower = abs.get(..8).unwrap_or(&abs).to_ascii_lowercase();
        let keep = lower.starts_with("http://")
            || lower.starts_with("https://")
            || lower.starts_with("mailto:")
            || (self.base.is_none() && !lower.contains(':'));
        keep.then(|| abs.replace(' ', "%20").replace(')', "%29"))
    }

    /// Write what a start tag opens; return what its end must write.
    fn open(&mut self, n: &str, tag: &Tag<'_>) -> Close {
        let out = &mut self.out;
        match n {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                out.block(true);
                let start = out.buf.len();
                let level = usize::from(n.as_bytes()[1] - b'0');
                out.word(&"#".repeat(level));
                out.glue(" ");
                out.inline += 1;
                Close::Heading(start, out.buf.len())
            }
            "ul" | "ol" | "menu" => {
                out.block(self.lists.is_empty());
                let start = tag.attr("start").and_then(|s| s.trim().parse().ok());
                self.lists.push(List {
                    ordered: n == "ol",
                    next: start.unwrap_or(1),
                });
                out.prefix.push(Part::Indent);
                Close::List
            }
            "li" => {
                let marker = match self.lists.last_mut() {
                    Some(l) if l.ordered => {
                        let n = l.next;
                        l.next = n.saturating_add(1);
                        format!("{n}. ")
                    }
                    _ => "- ".to_string(),
                };
                out.item(&marker);
                Close::Item
            }
            "blockquote" => {
                out.block(true);
                out.prefix.push(Part::Quote);
                Close::Quote
            }
            "pre" | "listing" => {
                out.start_pre();
                Close::Pre
            }
            "code" | "kbd" | "samp" | "tt" if out.pre == 0 => {
                out.word("`");
                Close::Code
            }
            "a" if self.links == 0 && out.pre == 0 => {
                match tag.attr("href").and_then(|h| self.target(h)) {
                    Some(href) => {
                        let out = &mut self.out;
                        out.word("[");
                        self.links += 1;
                        Close::Link(out.buf.len(), out.buf.len() - 1, href)
                    }
                    None => Close::Nothing,
                }
            }
            "table" => {
                out.block(true);
                self.tables.push(Table::default());
                Close::Table
            }
            "tr" => {
                if let Some(t) = self.tables.last_mut() {
                    t.cells = 0;
                }
                Close::Row
            }
            "td" | "th" => {
                match self.tables.last_mut() {
                    Some(t) => {
                        if t.cells == 0 {
                            out.block(false);
                            out.word("|");
                        }
                        t.cells += 1;
                        out.glue(" ");
                    }
                    None => out.word(" "),
                }
                out.inline += 1;
                Close::Cell
            }
            _ if PARAGRAPHS.contains(&n) => {
                out.block(true);
                Close::Block(true)
            }
            _ if LINES.contains(&n) => {
                out.block(false);
                Close::Block(false)
            }
            _ => Close::Nothing,
        }
    }

    fn end(&mut self, name: &str) {
        // Searching is paid for by the pops that follow it.
        let found = if self.is_open(name) {
            self.stack.iter().rposition(|e| e.name == name)
        } else {
            None
        };
        match found {
            Some(i) => {
                while self.stack.len() > i {
                    self.pop();
                }
            }
            None if self.skip.is_some() => {}
            None if name == "br" => self.out.line_break(),
            None if name == "p" => self.out.block(true),
            None => {}
        }
    }

    fn pop(&mut self) {
        let Some(elem) = self.stack.pop() else { return };
        if let Some(n) = self.open.get_mut(&elem.name) {
            *n -= 1;
        }
        if self.skip.is_some_and(|s| self.stack.len() <= s) {
            self.skip = None;
        }
        let out = &mut self.out;
        match elem.close {
            Close::Nothing | Close::Skip => {}
            Close::Block(blank) => out.block(blank),
            Close::Heading(start, mark) => {
                out.inline -= 1;
                out.retract_if_empty(start, mark);
                out.block(true);
            }
            Close::List => {
                out.prefix.pop();
                self.lists.pop();
                out.block(self.lists.is_empty());
            }
            Close::Item => out.block(false),
            Close::Quote => {
                out.prefix.pop();
                out.block(true);
            }
            Close::Pre => out.end_pre(),
            Close::Code => out.glue("`"),
            Close::Link(mark, bracket, href) => {
                self.links -= 1;
                if !out.retract_if_empty(bracket, mark) {
                    out.glue("](");
                    out.glue(&href);
                    out.glue(")");
                }
            }
            Close::Table => {
                self.tables.pop();
                out.block(true);
            }
            Close::Row => {
                if let Some(t) = self.tables.last_mut()
                    && t.cells > 0
                {
                    if t.rows == 0 {
                        out.block(false);
                        out.word(&format!("|{}", " --- |".repeat(t.cells)));
                    }
                    t.rows += 1;
                    t.cells = 0;
                    out.block(false);
                }
            }
            Close::Cell => {
                out.inline -= 1;
                out.glue(" |");
            }
        }
    }
}
