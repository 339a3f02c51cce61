//! `Terminal`: the human-readable rendering of the event stream.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::io::{self, IsTerminal, Write};
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use crate::listener::{Delivery, SubAgentListener};
use crate::sanitize::sanitize;
use crate::{Event, FinishReason, Listener};

/// Extra indentation per sub-agent depth.
const STEP: usize = 2;
/// Indentation of the continuation lines of a thinking block, a tool result…
const HANG: usize = 2;
/// Longest tool-argument or domain-payload rendering, in characters.
const ARGS_MAX: usize = 200;
/// Tool-result lines shown.
const RESULT_LINES: usize = 3;
/// Longest tool-result line shown, in characters.
const LINE_MAX: usize = 160;

/// Renders the event stream for a person: live answer text, dimmed
/// reasoning, one line per tool call, shortened tool results, sub-agents
/// indented under a header.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use pikuri::testing::SharedBuffer;
/// use pikuri::{Event, FinishReason, Listener};
/// use pikuri::listeners::Terminal;
///
/// let buf = SharedBuffer::new();
/// let mut term = Terminal::new(buf.clone()); // no colour by default
/// let agent: Arc<str> = "".into();
/// for event in [
///     Event::ToolCall {
///         agent: agent.clone(),
///         id: "c1".into(),
///         name: "calc".into(),
///         arguments: serde_json::json!({ "expr": "6*7" }),
///     },
///     Event::ToolResult { agent: agent.clone(), id: "c1".into(), name: "calc".into(), content: "42".into() },
///     Event::AssistantDelta { agent: agent.clone(), content: "It is \x1b[1m".into() },
///     Event::AssistantDelta { agent: agent.clone(), content: "42.".into() },
///     Event::Assistant { agent: agent.clone(), content: "It is \x1b[1m42.".into(), finish: FinishReason::Complete },
/// ] {
///     term.on_event(&event);
/// }
/// let out = buf.text();
/// assert_eq!(out, "→ calc({\"expr\":\"6*7\"})\n← 42\nIt is \\x1b[1m42.\n");
/// ```
///
/// # Format
///
/// ```text
/// thinking: The user wants the weather       ThinkingDelta / Thinking (dim)
///   and a sum.                               continuation lines hang by two
/// → weather({"city":"Paris"})                ToolCall, arguments as compact JSON
/// ← sunny                                    ToolResult right after its call
///   18°C                                     (dim; at most 3 lines of 160
///   wind 3 km/h                               characters each)
///   … (2 more lines)
/// → agent({"task":"dig"})
/// ┌ researcher 0                             a sub-agent's first output
///   → search({"q":"x"})                      its events, two spaces deeper
///   ← found it
///   The answer is 42.
/// ← agent: The answer is 42.                 a result not right after its
///                                            call names the tool
/// It is sunny; 6+7 is 13.                    AssistantDelta / Assistant
/// ```
///
/// - **Streaming.** Deltas are printed as they arrive. When the
///   [`Assistant`](Event::Assistant) (or [`Thinking`](Event::Thinking))
///   bookend follows deltas, it is not printed again, the line is only ended;
///   without deltas (a non-streaming request) the bookend is printed whole.
///   Both paths give the same output.
/// - **Other events.** [`FallbackNotice`](Event::FallbackNotice) prints
///   `step budget exhausted: <reason>; answering from the evidence so far`,
///   [`Cancelled`](Event::Cancelled) `cancelled`, an
///   [`Assistant`](Event::Assistant) answer that did not end whole a
///   yellow `[answer cut off by the token limit]` after its text (`a
///   content filter`, `the server`), a mid-loop
///   [`UserTurn`](Event::UserTurn) `(delivered: <text>)`,
///   [`Retrying`](Event::Retrying) a dim `retrying after <error> in 2s`,
///   [`Compacted`](Event::Compacted) a dim `compacted (summarize): 13
///   messages (~900 tokens) now 3 (~120 tokens)`,
///   [`ModelFallback`](Event::ModelFallback) `falling back to <transport>
///   after <error>`, [`Guard`](Event::Guard) `guard <name> at <point>:
///   stopped the run: <reason>` (`sent the answer back: <feedback>`,
///   `refused the tool call: <message>`, `answered the message: <answer>`,
///   a dim `replaced part of the text`: never the replaced text),
///   [`BudgetExceeded`](Event::BudgetExceeded) `budget exhausted: cost
///   limit reached after <spend>` (`lifetime budget exhausted: …` for a
///   [lifetime](crate::Budget::lifetime) limit), a
///   [`Domain`](Event::Domain) event `<name>: <payload>` (a string payload
///   unquoted, others as compact JSON). A *transient* domain event (a
///   progress report) rewrites the previous line of the same name in place
///   with colour on (`\r`, `ESC[K`); without colour, where rewriting is not
///   possible, only its final state is printed, as a plain line, once
///   another event arrives or the turn ends.
///   The turn-start `UserTurn` (the person typed it), `Tokens`, `ContextCap`
///   (see [`TokenLog`](super::TokenLog)), `SystemInjected`, `Reset`,
///   `HistoryLoaded`, `ModelSwitched`, `Spent` and `Stopped` print nothing.
/// - **Safety.** Everything the model or a tool wrote (text, reasoning, tool
///   names and arguments, results, payloads) goes through
///   [`sanitize`](super::sanitize()) first, so an escape sequence is shown as
///   `\x1b[2J` and never reaches the terminal. The only control sequences
///   written are this type's own colours.
/// - **Colour.** [`stdout`](Terminal::stdout) and
///   [`stderr`](Terminal::stderr) use colour when the stream is a terminal and
///   `NO_COLOR` is unset or empty; [`new`](Terminal::new) never does unless
///   asked with [`with_color`](Terminal::with_color).
/// - **Flushing.** The writer is flushed after every event that wrote
///   something (so deltas show live through a line-buffered stdout), and in
///   [`flush`](Listener::flush), which also ends an open line.
///
/// Write errors are logged once at `warn` and otherwise ignored.
///
/// # Sub-agents
///
/// [`for_sub_agent`](Listener::for_sub_agent) returns a fresh `Terminal`
/// writing to the same writer, indented two more spaces, which prints a
/// `┌ <id>` header at the parent's depth before its first line. The line
/// state (whether the cursor is at the start of a line) is kept with the
/// shared writer, so parent and child never glue output onto each other's
/// lines, and multi-line deltas stay indented.
pub struct Terminal {
    out: Arc<Mutex<Output>>,
    color: bool,
    indent: usize,
    /// The sub-agent header, until the first output.
    header: Option<String>,
    block: Block,
    streamed_thinking: bool,
    streamed_assistant: bool,
    /// The last tool call printed and the output sequence number right after.
    last_call: Option<(String, u64)>,
    /// Without colour: the latest transient domain event (name, rendered
    /// line), printed once something else happens.
    held: Option<(String, String)>,
}

/// What the current (unfinished) output of one `Terminal` is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Block {
    /// Nothing open: the last thing printed was a complete line.
    Line,
    /// Reasoning deltas.
    Thinking,
    /// Answer deltas.
    Assistant,
    /// A transient domain event of this name, rewritable in place.
    Transient(String),
}

#[derive(Clone, Copy)]
enum Style {
    Plain,
    Dim,
    Bold,
    Cyan,
    Yellow,
}

impl Style {
    fn codes(self) -> (&'static str, &'static str) {
        match self {
            Style::Plain => ("", ""),
            Style::Dim => ("\x1b[2m", "\x1b[0m"),
            Style::Bold => ("\x1b[1m", "\x1b[0m"),
            Style::Cyan => ("\x1b[36m", "\x1b[0m"),
            Style::Yellow => ("\x1b[33m", "\x1b[0m"),
        }
    }
}

/// The writer and the line state, shared by a terminal and its sub-agents'.
struct Output {
    writer: Box<dyn Write + Send>,
    at_line_start: bool,
    /// Counts rendered events across every terminal sharing the writer.
    seq: u64,
    /// Something was written since the last flush.
    dirty: bool,
    failed: bool,
}

impl Output {
    fn raw(&mut self, s: &str) {
        self.dirty = true;
        if let Err(e) = self.writer.write_all(s.as_bytes()) {
            self.fail(&e);
        }
    }

    fn newline(&mut self) {
        self.raw("\n");
        self.at_line_start = true;
    }

    fn end_line(&mut self) {
        if !self.at_line_start {
            self.newline();
        }
    }

    fn flush(&mut self) {
        self.dirty = false;
        if let Err(e) = self.writer.flush() {
            self.fail(&e);
        }
    }

    fn fail(&mut self, e: &io::Error) {
        if !self.failed {
            self.failed = true;
            log::warn!("Terminal: write failed ({e}); further errors are ignored");
        }
    }
}

impl Terminal {
    /// A terminal on standard output, coloured when stdout is a terminal and
    /// `NO_COLOR` is unset or empty.
    pub fn stdout() -> Terminal {
        let color = color_allowed(io::stdout().is_terminal());
        Terminal::from_box(Box::new(io::stdout())).with_color(color)
    }

    /// A terminal on standard error, coloured when stderr is a terminal and
    /// `NO_COLOR` is unset or empty.
    pub fn stderr() -> Terminal {
        let color = color_allowed(io::stderr().is_terminal());
        Terminal::from_box(Box::new(io::stderr())).with_color(color)
    }

    /// A terminal writing to `writer`, without colour.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Event, Listener};
    /// use pikuri::listeners::Terminal;
    ///
    /// let mut term = Terminal::new(std::io::sink());
    /// term.on_event(&Event::Cancelled { agent: "".into(), partial_answer: String::new() });
    /// assert!(!term.is_color());
    /// ```
    pub fn new(writer: impl Write + Send + 'static) -> Terminal {
        Terminal::from_box(Box::new(writer))
    }

    fn from_box(writer: Box<dyn Write + Send>) -> Terminal {
        let out = Output {
            writer,
            at_line_start: true,
            seq: 0,
            dirty: false,
            failed: false,
        };
        Terminal::fresh(Arc::new(Mutex::new(out)), false, 0, None)
    }

    fn fresh(
        out: Arc<Mutex<Output>>,
        color: bool,
        indent: usize,
        header: Option<String>,
    ) -> Terminal {
        Terminal {
            out,
            color,
            indent,
            header,
            block: Block::Line,
            streamed_thinking: false,
            streamed_assistant: false,
            last_call: None,
            held: None,
        }
    }

    /// Turn ANSI colour on or off (overriding the detection of
    /// [`stdout`](Terminal::stdout) and [`stderr`](Terminal::stderr)).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::listeners::Terminal;
    /// assert!(Terminal::new(std::io::sink()).with_color(true).is_color());
    /// assert!(!Terminal::stdout().with_color(false).is_color());
    /// ```
    #[must_use]
    pub fn with_color(mut self, color: bool) -> Terminal {
        self.color = color;
        self
    }

    /// Whether this terminal writes ANSI colour.
    pub fn is_color(&self) -> bool {
        self.color
    }

    /// Print the transient event held back without colour (its final state).
    fn release_held(&mut self, o: &mut Output) {
        if let Some((_, text)) = self.held.take() {
            self.line(o, Style::Plain, &text);
        }
    }

    fn render(&mut self, o: &mut Output, event: &Event) {
        // Anything but another transient update ends the held progress line.
        if !matches!(
            event,
            Event::Domain {
                transient: true,
                ..
            }
        ) {
            self.release_held(o);
        }
        match event {
            Event::ThinkingDelta { content, .. } => {
                self.streamed_thinking = true;
                self.thinking(o, content);
            }
            Event::Thinking { content, .. } => {
                if !std::mem::take(&mut self.streamed_thinking) {
                    self.thinking(o, content);
                }
                self.close(o, &Block::Thinking);
            }
            Event::AssistantDelta { content, .. } => {
                self.streamed_assistant = true;
                self.assistant(o, content);
            }
            Event::Assistant {
                content, finish, ..
            } => self.answer_end(o, content, *finish),
            Event::Tokens { .. } => {
                // The end of a round: deltas without a bookend end here.
                self.streamed_thinking = false;
                self.streamed_assistant = false;
                self.close(o, &Block::Thinking);
                self.close(o, &Block::Assistant);
            }
            Event::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                let args = arguments.to_string();
                let text = format!(
                    "→ {}({})",
                    sanitize(name),
                    sanitize(&truncate(&args, ARGS_MAX))
                );
                self.line(o, Style::Cyan, &text);
                self.last_call = Some((id.clone(), o.seq));
            }
            Event::ToolResult {
                id, name, content, ..
            } => {
                let right_after_call = self
                    .last_call
                    .take()
                    .is_some_and(|(call, seq)| call == *id && seq == o.seq);
                let head = if right_after_call {
                    "← ".to_string()
                } else {
                    format!("← {}: ", sanitize(name))
                };
                self.line(o, Style::Dim, &(head + &summarize(content)));
            }
            Event::UserTurn {
                content,
                mid_loop: true,
                ..
            } => {
                let text = format!("(delivered: {})", sanitize(content));
                self.line(o, Style::Plain, &text);
            }
            Event::FallbackNotice { reason, .. } => {
                let text = format!(
                    "step budget exhausted: {}; answering from the evidence so far",
                    sanitize(reason)
                );
                self.line(o, Style::Yellow, &text);
            }
            Event::Cancelled { .. } => self.line(o, Style::Yellow, "cancelled"),
            Event::Retrying { error, wait_ms, .. } => {
                let text = format!(
                    "retrying after {} in {}",
                    sanitize(&truncate(error, ARGS_MAX)),
                    seconds(*wait_ms)
                );
                self.line(o, Style::Dim, &text);
            }
            e @ (Event::Compacted { .. } | Event::ModelFallback { .. }) => self.recovery(o, e),
            e @ (Event::Guard { .. } | Event::BudgetExceeded { .. }) => self.tripped(o, e),
            Event::Domain {
                name,
                payload,
                transient,
                ..
            } => self.domain(o, name, payload, *transient),
            _ => {}
        }
    }

    /// The `Assistant` bookend: the text unless it was streamed, the end
    /// of its line, and a note when the answer was cut.
    fn answer_end(&mut self, o: &mut Output, content: &str, finish: FinishReason) {
        if !std::mem::take(&mut self.streamed_assistant) {
            self.assistant(o, content);
        }
        self.close(o, &Block::Assistant);
        // A cut answer must not read as a finished one.
        if let Some(by) = cut_by(finish) {
            self.line(o, Style::Yellow, &format!("[answer cut off by {by}]"));
        }
    }

    /// A compaction or a fallback to another transport: one line each.
    fn recovery(&mut self, o: &mut Output, event: &Event) {
        match event {
            Event::Compacted {
                strategy,
                messages_before,
                messages_after,
                tokens_before,
                tokens_after,
                ..
            } => {
                let text = format!(
                    "compacted ({}): {messages_before} messages (~{tokens_before} tokens) \
                     now {messages_after} (~{tokens_after} tokens)",
                    strategy.as_str()
                );
                self.line(o, Style::Dim, &text);
            }
            Event::ModelFallback { to, reason, .. } => {
                let text = format!(
                    "falling back to {} after {}",
                    sanitize(&to.to_string()),
                    sanitize(&truncate(reason, ARGS_MAX))
                );
                self.line(o, Style::Yellow, &text);
            }
            _ => {}
        }
    }

    /// A guard's verdict or a budget limit reached: what tripped, plainly.
    fn tripped(&mut self, o: &mut Output, event: &Event) {
        match event {
            Event::Guard {
                guard,
                point,
                action,
                detail,
                ..
            } => {
                let detail = truncate(detail, ARGS_MAX);
                let detail = sanitize(&detail);
                let (style, what) = match action.as_str() {
                    "replace" => (Style::Dim, "replaced part of the text".to_string()),
                    "block" => (Style::Yellow, format!("answered the message: {detail}")),
                    "retry" => (Style::Yellow, format!("sent the answer back: {detail}")),
                    "reject" => (Style::Yellow, format!("refused the tool call: {detail}")),
                    "stop" => (Style::Yellow, format!("stopped the run: {detail}")),
                    other => (Style::Yellow, format!("{other}: {detail}")),
                };
                let text = format!("guard {} at {}: {what}", sanitize(guard), point.as_str());
                self.line(o, style, &text);
            }
            Event::BudgetExceeded {
                limit,
                spend,
                lifetime,
                ..
            } => {
                let scope = if *lifetime { "lifetime " } else { "" };
                let text = format!("{scope}budget exhausted: {limit} limit reached after {spend}");
                self.line(o, Style::Yellow, &text);
            }
            _ => {}
        }
    }

    fn thinking(&mut self, o: &mut Output, content: &str) {
        if self.begin(o, Block::Thinking) {
            self.start_line(o);
            self.put(o, Style::Dim, "thinking: ", 0);
        }
        self.put(o, Style::Dim, &sanitize(content), HANG);
    }

    fn assistant(&mut self, o: &mut Output, content: &str) {
        self.begin(o, Block::Assistant);
        self.put(o, Style::Plain, &sanitize(content), 0);
    }

    fn domain(&mut self, o: &mut Output, name: &str, payload: &Value, transient: bool) {
        let payload = match payload {
            Value::String(s) => Cow::Borrowed(s.as_str()),
            Value::Null => Cow::Borrowed(""),
            other => Cow::Owned(other.to_string()),
        };
        let payload = if transient {
            payload.lines().next().unwrap_or("")
        } else {
            &payload
        };
        let mut text = sanitize(name).into_owned();
        if !payload.is_empty() {
            text.push_str(": ");
            text.push_str(&sanitize(&truncate(payload, ARGS_MAX)));
        }
        if transient && !self.color {
            // Without colour a line cannot be rewritten: keep only the
            // latest state, printed when something else happens.
            if self.held.as_ref().is_some_and(|(held, _)| held != name) {
                self.release_held(o);
            }
            self.held = Some((name.to_string(), text));
        } else if transient {
            let block = Block::Transient(name.to_string());
            let rewrite = self.block == block && !o.at_line_start;
            self.begin(o, block);
            if rewrite {
                o.raw("\r\x1b[K");
                o.at_line_start = true;
            }
            self.start_line(o);
            self.put(o, Style::Plain, &text, HANG);
        } else {
            self.line(o, Style::Plain, &text);
        }
    }

    /// Start rendering one event as part of `block`: print the sub-agent
    /// header if due, and start a new line unless `block` continues the open
    /// one. Returns whether a new block started.
    fn begin(&mut self, o: &mut Output, block: Block) -> bool {
        o.seq += 1;
        if let Some(id) = self.header.take() {
            o.end_line();
            o.raw(&" ".repeat(self.indent.saturating_sub(STEP)));
            let id = if id.is_empty() { "sub-agent" } else { &id };
            self.styled(o, Style::Bold, &format!("┌ {}", sanitize(id)));
            o.newline();
        }
        let continues = block != Block::Line && block == self.block;
        if !continues {
            o.end_line();
        }
        self.block = block;
        !continues
    }

    /// End the open block if it is `block`.
    fn close(&mut self, o: &mut Output, block: &Block) {
        if self.block == *block {
            o.end_line();
            self.block = Block::Line;
        }
    }

    /// Print `text` as complete line(s) of its own.
    fn line(&mut self, o: &mut Output, style: Style, text: &str) {
        self.begin(o, Block::Line);
        self.start_line(o);
        self.put(o, style, text, HANG);
        o.newline();
    }

    /// Indent the line about to start (by the depth only).
    fn start_line(&self, o: &mut Output) {
        if o.at_line_start {
            o.raw(&" ".repeat(self.indent));
            o.at_line_start = false;
        }
    }

    /// Print `text`, indenting every line that starts here by the depth
    /// indentation plus `hang` (a block's first line is started with
    /// [`start_line`](Self::start_line) instead).
    fn put(&self, o: &mut Output, style: Style, text: &str, hang: usize) {
        for (i, segment) in text.split('\n').enumerate() {
            if i > 0 {
                o.newline();
            }
            if segment.is_empty() {
                continue;
            }
            if o.at_line_start {
                o.raw(&" ".repeat(self.indent + hang));
                o.at_line_start = false;
            }
            self.styled(o, style, segment);
        }
    }

    fn styled(&self, o: &mut Output, style: Style, text: &str) {
        let (open, close) = if self.color { style.codes() } else { ("", "") };
        o.raw(open);
        o.raw(text);
        o.raw(close);
        o.at_line_start = false;
    }
}

impl Listener for Terminal {
    fn on_event(&mut self, event: &Event) {
        let out = Arc::clone(&self.out);
        let mut o = out.lock();
        self.render(&mut o, event);
        if o.dirty {
            o.flush();
        }
    }

    fn flush(&mut self) {
        let out = Arc::clone(&self.out);
        let mut o = out.lock();
        self.release_held(&mut o);
        if self.block != Block::Line {
            o.end_line();
            self.block = Block::Line;
        }
        o.flush();
    }

    fn close(&mut self) {
        Listener::flush(self);
    }

    fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
        SubAgentListener::Replace(Box::new(Terminal::fresh(
            Arc::clone(&self.out),
            self.color,
            self.indent + STEP,
            Some(id.to_string()),
        )))
    }

    fn name(&self) -> String {
        "Terminal".to_string()
    }

    /// The barrier: the answer is on screen before the host prints its
    /// prompt.
    fn delivery(&self) -> Delivery {
        Delivery::Barrier
    }
}

impl fmt::Debug for Terminal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Terminal")
            .field("color", &self.color)
            .field("indent", &self.indent)
            .finish_non_exhaustive()
    }
}

/// Colour for a stream: only on a terminal, and only when `NO_COLOR` is unset
/// or empty (<https://no-color.org>).
fn color_allowed(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// At most `max` characters of `s`, the last replaced by `…` when cut.
fn truncate(s: &str, max: usize) -> Cow<'_, str> {
    if s.char_indices().nth(max).is_none() {
        return Cow::Borrowed(s);
    }
    let cut = s.char_indices().nth(max - 1).map_or(s.len(), |(i, _)| i);
    Cow::Owned(format!("{}…", &s[..cut]))
}

/// The first lines of a tool result, sanitized, with a count of the rest.
fn summarize(content: &str) -> String {
    if content.trim().is_empty() {
        return "(empty)".to_string();
    }
    let mut lines = content.lines();
    let mut out = String::new();
    for (i, line) in lines.by_ref().take(RESULT_LINES).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&sanitize(&truncate(line, LINE_MAX)));
    }
    let rest = lines.count();
    if rest > 0 {
        let s = if rest == 1 { "" } else { "s" };
        // Writing into a String cannot fail.
        let _ = write!(out, "\n… ({rest} more line{s})");
    }
    out
}

/// `2s`, `1.5s`.
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

/// What cut an answer that ended with `finish`; `None` for a whole one.
fn cut_by(finish: FinishReason) -> Option<&'static str> {
    match finish {
        FinishReason::Complete | FinishReason::ToolCalls => None,
        FinishReason::Length => Some("the token limit"),
        FinishReason::Filtered => Some("a content filter"),
        FinishReason::ServerCut => Some("the server"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::testing::SharedBuffer as Buf;

    const A: &str = "";

    fn think_d(s: &str) -> Event {
        Event::ThinkingDelta {
            agent: A.into(),
            content: s.into(),
        }
    }
    fn think(s: &str) -> Event {
        Event::Thinking {
            agent: A.into(),
            content: s.into(),
        }
    }
    fn delta(s: &str) -> Event {
        Event::AssistantDelta {
            agent: A.into(),
            content: s.into(),
        }
    }
    fn answer(s: &str) -> Event {
        Event::Assistant {
            agent: A.into(),
            content: s.into(),
            finish: crate::FinishReason::Complete,
        }
    }
    fn call(id: &str, name: &str, args: Value) -> Event {
        Event::ToolCall {
            agent: A.into(),
            id: id.into(),
            name: name.into(),
            arguments: args,
        }
    }
    fn result(id: &str, name: &str, s: &str) -> Event {
        Event::ToolResult {
            agent: A.into(),
            id: id.into(),
            name: name.into(),
            content: s.into(),
        }
    }
    fn tokens() -> Event {
        Event::Tokens {
            agent: A.into(),
            input: Some(100),
            output: Some(20),
            cached: None,
            cache_creation: None,
            thinking: None,
            model_id: None,
            response_id: None,
        }
    }
    fn domain(name: &str, payload: Value, transient: bool) -> Event {
        Event::Domain {
            agent: A.into(),
            name: name.into(),
            payload,
            transient,
        }
    }

    fn render(term: &mut Terminal, events: &[Event]) {
        for e in events {
            term.on_event(e);
        }
    }

    fn run(events: &[Event]) -> String {
        let buf = Buf::default();
        let mut term = Terminal::new(buf.clone());
        render(&mut term, events);
        term.flush();
        buf.text()
    }

    /// Round 1: reasoning, then two tool calls (one after the other); round
    /// 2: the answer.
    fn turn(streamed: bool) -> Vec<Event> {
        let mut events = vec![Event::UserTurn {
            agent: A.into(),
            content: "weather and 2+2?".into(),
            mid_loop: false,
        }];
        if streamed {
            events.extend([think_d("Need "), think_d("tools.\n"), think_d("Both.")]);
        }
        events.extend([
            think("Need tools.\nBoth."),
            tokens(),
            call("c1", "calc", json!({"expr": "2+2"})),
            result("c1", "calc", "4"),
            call("c2", "weather", json!({"city": "Paris"})),
            result("c2", "weather", "sunny\n18°C\nwind 3\nrain 0\nuv 5\n"),
        ]);
        if streamed {
            events.extend([delta("It is "), delta("sunny; 2+2 "), delta("is 4.")]);
        }
        events.extend([
            answer("It is sunny; 2+2 is 4."),
            tokens(),
            Event::Stopped {
                agent: A.into(),
                reason: crate::StopReason::Completed,
                usage: crate::Usage::new(),
            },
        ]);
        events
    }

    const TURN: &str = "\
thinking: Need tools.
  Both.
→ calc({\"expr\":\"2+2\"})
← 4
→ weather({\"city\":\"Paris\"})
← sunny
  18°C
  wind 3
  … (2 more lines)
It is sunny; 2+2 is 4.
";

    #[test]
    fn streamed_turn() {
        assert_eq!(run(&turn(true)), TURN);
    }

    #[test]
    fn non_streamed_turn_looks_the_same() {
        assert_eq!(run(&turn(false)), TURN);
    }

    #[test]
    fn a_cut_answer_says_so_streamed_or_not() {
        let cut = |finish| Event::Assistant {
            agent: A.into(),
            content: "The causes are".into(),
            finish,
        };
        for (finish, by) in [
            (FinishReason::Length, "the token limit"),
            (FinishReason::Filtered, "a content filter"),
            (FinishReason::ServerCut, "the server"),
        ] {
            let want = format!("The causes are\n[answer cut off by {by}]\n");
            assert_eq!(run(&[cut(finish), tokens()]), want);
            assert_eq!(run(&[delta("The causes are"), cut(finish), tokens()]), want);
        }
        assert_eq!(
            run(&[cut(FinishReason::Complete), tokens()]),
            "The causes are\n"
        );
    }

    #[test]
    fn parallel_tool_results_name_their_tool() {
        let out = run(&[
            call("a", "calc", json!({})),
            call("b", "clock", json!(null)),
            result("a", "calc", "1"),
            result("b", "clock", ""),
        ]);
        assert_eq!(
            out,
            "→ calc({})\n→ clock(null)\n← calc: 1\n← clock: (empty)\n"
        );
    }

    #[test]
    fn long_arguments_and_lines_are_cut() {
        let long = "x".repeat(500);
        let out = run(&[
            call("a", "write", json!({ "text": long })),
            result("a", "write", &long),
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0].chars().count(),
            "→ write()".chars().count() + ARGS_MAX
        );
        assert!(lines[0].ends_with("xx…)"));
        assert_eq!(lines[1].chars().count(), 2 + LINE_MAX);
        assert_eq!(lines.len(), 2);
    }

    #[test]
    fn notices() {
        let out = run(&[
            Event::UserTurn {
                agent: A.into(),
                content: "also\u{202e}this".into(),
                mid_loop: true,
            },
            Event::Retrying {
                agent: A.into(),
                attempt: 1,
                error: "HTTP 503".into(),
                wait_ms: 1500,
            },
            Event::FallbackNotice {
                agent: A.into(),
                reason: "10 steps used".into(),
            },
            domain("tasks.changed", json!({"open": 2}), false),
            domain("note", json!("saved"), false),
            domain("progress", json!("50%"), true),
            Event::Cancelled {
                agent: A.into(),
                partial_answer: String::new(),
            },
        ]);
        assert_eq!(
            out,
            "(delivered: also\\u{202e}this)\n\
             retrying after HTTP 503 in 1.5s\n\
             step budget exhausted: 10 steps used; answering from the evidence so far\n\
             tasks.changed: {\"open\":2}\n\
             note: saved\n\
             progress: 50%\n\
             cancelled\n"
        );
    }

    #[test]
    fn guard_verdicts_and_budget_stops_say_what_tripped() {
        use crate::budget::{Cost, Limit};
        use crate::guard::{Action, Point};
        let guard = |name: &str, point, action, detail: &str| Event::Guard {
            agent: A.into(),
            guard: name.into(),
            point,
            action,
            detail: detail.into(),
            call_id: String::new(),
        };
        let spend = crate::Spend {
            requests: 2,
            cost: Some(Cost::from_micro_usd(3_500)),
            ..crate::Spend::default()
        };
        let out = run(&[
            guard("redact", Point::ToolOutput, Action::Replace, ""),
            guard("no-rm", Point::ToolInput, Action::Reject, "Error: refused"),
            guard("polite", Point::Output, Action::Retry, "it is rude"),
            guard("scope", Point::Input, Action::Block, "Not here."),
            guard(
                "judge",
                Point::Output,
                Action::Stop,
                "the guard \x1b[2Jpanicked",
            ),
            Event::BudgetExceeded {
                agent: A.into(),
                limit: Limit::Cost,
                spend,
                lifetime: false,
            },
            Event::BudgetExceeded {
                agent: A.into(),
                limit: Limit::Requests,
                spend,
                lifetime: true,
            },
            Event::Spent {
                agent: A.into(),
                spend,
            },
        ]);
        assert_eq!(
            out,
            "guard redact at tool_output: replaced part of the text\n\
             guard no-rm at tool_input: refused the tool call: Error: refused\n\
             guard polite at output: sent the answer back: it is rude\n\
             guard scope at input: answered the message: Not here.\n\
             guard judge at output: stopped the run: the guard \\x1b[2Jpanicked\n\
             budget exhausted: cost limit reached after 2 requests, 0 in, 0 out, 0 tool calls, $0.0035\n\
             lifetime budget exhausted: requests limit reached after 2 requests, 0 in, 0 out, 0 tool calls, $0.0035\n"
        );
    }

    #[test]
    fn transient_rewrites_in_place_with_colour() {
        let buf = Buf::default();
        let mut term = Terminal::new(buf.clone()).with_color(true);
        render(
            &mut term,
            &[
                domain("dl", json!("10%"), true),
                domain("dl", json!("90%"), true),
                domain("dl", json!("done"), true),
                delta("ok"),
                answer("ok"),
            ],
        );
        assert_eq!(buf.text(), "dl: 10%\r\x1b[Kdl: 90%\r\x1b[Kdl: done\nok\n");
    }

    #[test]
    fn transient_shows_its_final_state_without_colour() {
        let buf = Buf::default();
        let mut term = Terminal::new(buf.clone());
        render(
            &mut term,
            &[
                domain("dl", json!("10%"), true),
                domain("dl", json!("90%"), true),
                domain("dl", json!("done"), true),
                domain("idx", json!("1/2"), true),
                domain("idx", json!("2/2"), true),
                delta("ok"),
                answer("ok"),
                domain("bg", json!("still going"), true),
            ],
        );
        assert_eq!(buf.text(), "dl: done\nidx: 2/2\nok\n");
        Listener::flush(&mut term);
        assert_eq!(buf.text(), "dl: done\nidx: 2/2\nok\nbg: still going\n");
    }

    #[test]
    fn colour_codes_wrap_only_our_segments() {
        let buf = Buf::default();
        let mut term = Terminal::new(buf.clone()).with_color(true);
        render(&mut term, &[think_d("hm\x1b[31m"), delta("A"), answer("A")]);
        assert_eq!(
            buf.text(),
            "\x1b[2mthinking: \x1b[0m\x1b[2mhm\\x1b[31m\x1b[0m\nA\n"
        );
    }

    #[test]
    fn escape_in_a_delta_never_reaches_the_writer() {
        let out = run(&[
            delta("a\x1b[2J"),
            delta("\x1b]0;pwned\x07b\rc\u{200b}"),
            answer("ignored"),
            call("x", "t\x1b", json!({"k": "\u{202e}"})),
            result("x", "t", "\x1b[1mbold\x08"),
        ]);
        assert!(!out.contains('\x1b') && !out.contains('\r') && !out.contains('\x08'));
        assert_eq!(
            out,
            "a\\x1b[2J\\x1b]0;pwned\\x07b\\x0dc\\u{200b}\n\
             → t\\x1b({\"k\":\"\\u{202e}\"})\n\
             ← \\x1b[1mbold\\x08\n"
        );
    }

    #[test]
    fn sub_agent_output_is_indented_under_a_header() {
        let buf = Buf::default();
        let mut main = Terminal::new(buf.clone());
        main.on_event(&call("c1", "agent", json!({"task": "dig"})));
        let SubAgentListener::Replace(mut child) = main.for_sub_agent("researcher 0") else {
            panic!("expected Replace");
        };
        let SubAgentListener::Replace(mut grandchild) = child.for_sub_agent("fetcher 0") else {
            panic!("expected Replace");
        };
        render_dyn(
            &mut *child,
            &[
                tokens(),
                think_d("plan:\n"),
                think_d("search"),
                call("s", "search", json!({"q": "x"})),
                result("s", "search", "found\nit"),
            ],
        );
        render_dyn(&mut *grandchild, &[answer("page\ntext")]);
        render_dyn(
            &mut *child,
            &[delta("The answer\n"), delta("is 42."), answer("x")],
        );
        child.flush();
        main.on_event(&result("c1", "agent", "The answer\nis 42."));
        main.on_event(&answer("Done."));
        assert_eq!(
            buf.text(),
            "→ agent({\"task\":\"dig\"})
┌ researcher 0
  thinking: plan:
    search
  → search({\"q\":\"x\"})
  ← found
    it
  ┌ fetcher 0
    page
    text
  The answer
  is 42.
← agent: The answer
  is 42.
Done.
"
        );
    }

    fn render_dyn(l: &mut dyn Listener, events: &[Event]) {
        for e in events {
            l.on_event(e);
        }
    }

    #[test]
    fn flush_ends_an_open_line() {
        assert_eq!(run(&[delta("no bookend")]), "no bookend\n");
        assert_eq!(run(&[]), "");
    }

    #[test]
    fn helpers() {
        assert_eq!(truncate("abcdef", 3), "ab…");
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("日本語x", 3), "日本…");
        assert_eq!(seconds(2000), "2s");
        assert_eq!(seconds(250), "0.2s");
        assert_eq!(summarize("a\nb\nc\nd"), "a\nb\nc\n… (1 more line)");
        assert_eq!(summarize("a\r\nb\r\n"), "a\nb");
        assert!(!color_allowed(false));
        let t = Terminal::new(io::sink()).with_color(true);
        assert_eq!(format!("{t:?}"), "Terminal { color: true, indent: 0, .. }");
    }
}
