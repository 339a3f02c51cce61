//! The example's listeners: [`Console`] for the REPL (the conversation, then
//! one token line per turn) and [`AnswerOut`] for `-p` (the answer streamed
//! to stdout as it arrives).

use std::io::{self, IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};

use pikuri::listeners::{Terminal, TokenLog, sanitize};
use pikuri::subagent::SubAgentListener;
use pikuri::{Event, Listener};

/// The Terminal and the TokenLog on one thread, called in order. Two
/// listeners each writing from its own thread could put a token line in the
/// middle of the answer it counts; here the line comes after it.
///
/// The TokenLog gets one `Tokens` event per turn instead of one per model
/// message: in, cached and the context fill of the turn's last request, out
/// summed over the turn.
pub(crate) struct Console {
    terminal: Box<dyn Listener>,
    tokens: Box<dyn Listener>,
    /// The turn's usage so far, sent to `tokens` when the turn stops.
    pending: Option<Event>,
}

impl Console {
    pub(crate) fn new() -> Console {
        Console::of(Box::new(Terminal::stdout()), Box::new(TokenLog::stderr()))
    }

    fn of(terminal: Box<dyn Listener>, tokens: Box<dyn Listener>) -> Console {
        Console {
            terminal,
            tokens,
            pending: None,
        }
    }

    fn report(&mut self) {
        if let Some(usage) = self.pending.take() {
            self.tokens.on_event(&usage);
        }
    }
}

impl Listener for Console {
    fn on_event(&mut self, event: &Event) {
        self.terminal.on_event(event);
        match event {
            Event::Tokens { .. } => self.pending = Some(add(self.pending.take(), event)),
            Event::Stopped { .. } => {
                self.report();
                self.tokens.on_event(event);
            }
            other => self.tokens.on_event(other),
        }
    }

    fn flush(&mut self) {
        self.report();
        self.terminal.flush();
        self.tokens.flush();
    }

    fn close(&mut self) {
        self.terminal.close();
        self.tokens.close();
    }

    /// For the synthesizer (or a sub-agent): the parts' fresh variants (an
    /// indented Terminal, a zeroed TokenLog), again on one thread.
    fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
        let fresh = |l: &mut Box<dyn Listener>| match l.for_sub_agent(id) {
            SubAgentListener::Replace(child) => child,
            _ => Box::new(|_: &Event| {}),
        };
        let console = Console::of(fresh(&mut self.terminal), fresh(&mut self.tokens));
        SubAgentListener::Replace(Box::new(console))
    }
}

/// `earlier` (the turn's usage so far) with the message usage `latest` added.
fn add(earlier: Option<Event>, latest: &Event) -> Event {
    let mut sum = latest.clone();
    if let (
        Some(Event::Tokens {
            output: before,
            thinking: thought,
            ..
        }),
        Event::Tokens {
            output, thinking, ..
        },
    ) = (earlier, &mut sum)
    {
        let plus = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        *output = plus(before, *output);
        *thinking = plus(thought, *thinking);
    }
    sum
}

/// `-p`: writes the main agent's text to stdout as it streams in. What it
/// printed is shared with [`one_shot`](crate::one_shot), which completes
/// the line (or prints the answer when nothing streamed: `--no-stream`, a
/// synthesized answer).
pub(crate) struct AnswerOut {
    printed: Arc<Mutex<Printed>>,
    sanitize: bool,
}

/// What [`AnswerOut`] wrote.
#[derive(Debug, Default)]
pub(crate) struct Printed {
    /// The text of the main agent's message being streamed.
    pub(crate) current: String,
    /// The text of its last complete message.
    pub(crate) last: String,
    /// Output ends in the middle of a line.
    pub(crate) open: bool,
}

impl AnswerOut {
    pub(crate) fn new() -> (AnswerOut, Arc<Mutex<Printed>>) {
        let printed = Arc::new(Mutex::new(Printed::default()));
        let out = AnswerOut {
            printed: Arc::clone(&printed),
            // Raw text for pipes and files; escape sequences are neutralized on a terminal.
            sanitize: io::stdout().is_terminal(),
        };
        (out, printed)
    }
}

impl Listener for AnswerOut {
    fn on_event(&mut self, event: &Event) {
        if !event.agent().is_empty() {
            return; // a sub-agent or the synthesizer
        }
        let mut printed = self.printed.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            Event::AssistantDelta { content, .. } => {
                let text = if self.sanitize {
                    sanitize(content)
                } else {
                    content.into()
                };
                let mut out = io::stdout().lock();
                // A failed write shows up when `one_shot` writes the end.
                let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
                printed.current.push_str(content);
                printed.open = !content.ends_with('\n');
            }
            Event::Assistant { .. } => printed.last = std::mem::take(&mut printed.current),
            // Text before a tool call is done: the answer follows on a new line.
            Event::ToolCall { .. } if printed.open => {
                println!();
                printed.open = false;
            }
            _ => {}
        }
    }
}
