//! The Markdown writer under the renderer: collapses whitespace, keeps
//! line prefixes (`> ` for quotes, indentation for lists), and never writes
//! more than one blank line in a row.

/// A line-prefix piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Quote,
    Indent,
}

/// At most this many prefix pieces are written, so deeply nested lists
/// cannot multiply the output size.
const MAX_PREFIX_PARTS: usize = 8;

#[derive(Debug, Default)]
pub(super) struct Out {
    pub(super) buf: String,
    pub(super) prefix: Vec<Part>,
    /// Nothing but (unwritten) prefix is on the current line.
    line_start: bool,
    /// A collapsed space is owed before the next word.
    space: bool,
    /// How many `\n` end `buf` (0, 1 or 2).
    newlines: u8,
    /// Inside a heading or table cell: line breaks become spaces.
    pub(super) inline: usize,
    /// Inside `<pre>`: text is kept verbatim.
    pub(super) pre: usize,
    /// The first newline after `<pre>` is not content.
    skip_newline: bool,
}

impl Out {
    pub(super) fn new() -> Out {
        Out {
            line_start: true,
            ..Out::default()
        }
    }

    fn push_prefix(&mut self, parts: usize) {
        for part in self.prefix.iter().take(parts.min(MAX_PREFIX_PARTS)) {
            self.buf.push_str(match part {
                Part::Quote => "> ",
                Part::Indent => "  ",
            });
        }
    }

    fn begin(&mut self) {
        if self.line_start {
            self.push_prefix(self.prefix.len());
            self.line_start = false;
        } else if self.space && !self.buf.ends_with([' ', '\n']) {
            self.buf.push(' ');
        }
        self.space = false;
        self.newlines = 0;
    }

    /// Append markup (`[`, `**`) as part of the current word run.
    pub(super) fn word(&mut self, s: &str) {
        self.begin();
        self.buf.push_str(s);
    }

    /// Append markup right after the previous word, before any owed space.
    pub(super) fn glue(&mut self, s: &str) {
        if self.line_start {
            self.begin();
        }
        self.newlines = 0;
        self.buf.push_str(s);
    }

    /// Start a list item: the prefix without its own list's indent, then `marker`.
    pub(super) fn item(&mut self, marker: &str) {
        self.block(false);
        let parts = self.prefix.len().saturating_sub(1);
        self.push_prefix(parts);
        self.buf.push_str(marker);
        self.line_start = false;
        self.space = false;
        self.newlines = 0;
    }

    /// Append text, collapsing whitespace (or verbatim inside `<pre>`).
    pub(super) fn text(&mut self, s: &str) {
        if self.pre > 0 {
            return self.pre_text(s);
        }
        for (i, word) in s.split(is_space).enumerate() {
            if i > 0 && !self.line_start {
                self.space = true;
            }
            if !word.is_empty() {
                self.begin();
                if self.inline > 0 && word.contains('|') {
                    self.buf.push_str(&word.replace('|', "\\|"));
                } else {
                    self.buf.push_str(word);
                }
            }
        }
    }

    fn pre_text(&mut self, s: &str) {
        let mut s = s;
        if self.skip_newline {
            s = s.strip_prefix('\n').unwrap_or(s);
            self.skip_newline = s.is_empty();
        }
        for (i, line) in s.split('\n').enumerate() {
            if i > 0 {
                self.buf.push('\n');
                self.line_start = true;
            }
            if !line.is_empty() {
                self.begin();
                self.buf.push_str(line);
            }
        }
    }

    /// `<br>`: a new line (a space inside headings and cells).
    pub(super) fn line_break(&mut self) {
        if self.inline > 0 {
            self.space = true;
        } else if !self.buf.is_empty() && self.newlines < 2 {
            self.buf.push('\n');
            self.newlines += 1;
            self.line_start = true;
            self.space = false;
        }
    }

    /// End the current block: one newline, or a blank line if `blank`.
    pub(super) fn block(&mut self, blank: bool) {
        if self.inline > 0 {
            self.space = true;
            return;
        }
        self.space = false;
        if self.buf.is_empty() {
            return;
        }
        let want = if blank { 2 } else { 1 };
        while self.newlines < want {
            self.buf.push('\n');
            self.newlines += 1;
        }
        self.line_start = true;
    }

    pub(super) fn start_pre(&mut self) {
        self.block(true);
        self.word("```");
        self.buf.push('\n');
        self.line_start = true;
        self.pre += 1;
        self.skip_newline = true;
    }

    pub(super) fn end_pre(&mut self) {
        self.pre -= 1;
        self.skip_newline = false;
        if !self.line_start {
            self.buf.push('\n');
            self.line_start = true;
        }
        self.word("```");
        self.block(true);
    }

    /// Drop what was written since `mark` if it is only whitespace (and
    /// `drop_from` onwards, the markup that opened it).
    pub(super) fn retract_if_empty(&mut self, drop_from: usize, mark: usize) -> bool {
        if self
            .buf
            .get(mark..)
            .is_none_or(|s| !s.chars().all(char::is_whitespace))
        {
            return false;
        }
        self.buf.truncate(drop_from);
        self.newlines = self
            .buf
            .bytes()
            .rev()
            .take(2)
            .take_while(|&b| b == b'\n')
            .count() as u8;
        self.line_start = self.buf.is_empty() || self.newlines > 0;
        true
    }

    /// The text, with trailing spaces cut from every line.
    pub(super) fn finish(self) -> String {
        let mut text = String::with_capacity(self.buf.len());
        for line in self.buf.trim().lines() {
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text.truncate(text.trim_end().len());
        text
    }
}

/// HTML whitespace, plus the no-break space (rendered as a plain space).
fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0C' | '\u{A0}')
}
