//! `TokenLog`: a one-line token and context readout per assistant message.

use std::fmt::{self, Write as _};
use std::io::{self, Write};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::listener::SubAgentListener;
use crate::{Event, Listener};

/// Writes one line of token usage and context fill after every assistant
/// message, and warns when the context nears its cap.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use pikuri::testing::SharedBuffer;
/// use pikuri::{Event, Listener};
/// use pikuri::listeners::TokenLog;
///
///
/// let buf = SharedBuffer::new();
/// let mut log = TokenLog::new(buf.clone());
/// log.on_event(&Event::ContextCap { agent: "".into(), cap: Some(32_000) });
/// log.on_event(&Event::Tokens {
///     agent: "".into(),
///     input: Some(950),
///     output: Some(120),
///     cached: Some(11_260),
///     cache_creation: None,
///     thinking: None,
///     model_id: None,
///     response_id: None,
/// });
/// assert_eq!(log.ctx_used(), 12_210);
/// let out = buf.text();
/// assert_eq!(out, "[main] ctx=12.2k/32.0k in=950 out=120 cached=11.3k\n");
/// ```
///
/// # Format
///
/// ```text
/// [main] ctx=12.2k/32.0k in=950 out=120 cached=11.3k
/// [researcher 0] ctx=3.1k in=3.1k out=88 cached=0 cache_write=1.0k thinking=40
/// [main] warning: context 82% full (26.2k/32.0k)
/// [main] ctx=26.2k/32.0k restored 14 messages
/// ```
///
/// - The tag is the agent id, `main` for the main agent.
/// - `ctx` is the context in use for the last request, `input + cached +
///   cache_creation` (as [`Usage::context_used`](crate::Usage::context_used)),
///   over the cap of the latest [`ContextCap`](Event::ContextCap); without a
///   known cap it reads `ctx=12.2k`.
/// - `in`, `out` and `cached` are the message's figures, `-` when the server
///   did not report one; `cache_write` and `thinking` are added when
///   reported and non-zero.
/// - Figures read `950`, `12.2k`, `1.5M`.
/// - When `ctx` reaches the warning ratio of the cap (80% unless set with
///   [`with_warn_ratio`](TokenLog::with_warn_ratio)), a warning line follows,
///   once per crossing: it comes back only after the context dropped below
///   the ratio (a [`Reset`](Event::Reset), a smaller history) and rose again.
/// - [`Reset`](Event::Reset) zeroes the readout, and
///   [`HistoryLoaded`](Event::HistoryLoaded) reseeds it from the last
///   restored message's usage and prints the `restored` line, so the readout
///   resumes at the real fill rather than zero. A model switch does not
///   re-baseline it (the next `Tokens` does).
///
/// Lines are flushed as written. Write errors are logged once at `warn` and
/// otherwise ignored.
///
/// # Sub-agents
///
/// [`for_sub_agent`](Listener::for_sub_agent) returns a fresh `TokenLog`
/// tagged with the child's id, at zero (the child has its own context),
/// keeping the cap and warning ratio, and writing to the same writer.
pub struct TokenLog {
    out: Arc<Mutex<Output>>,
    tag: String,
    cap: Option<u64>,
    used: u64,
    warn_ratio: f64,
    /// Whether `used` is at or above the warning threshold (and was warned).
    warned: bool,
}

struct Output {
    writer: Box<dyn Write + Send>,
    failed: bool,
}

impl Output {
    fn line(&mut self, line: &str) {
        let result = self
            .writer
            .write_all(line.as_bytes())
            .and_then(|()| self.writer.write_all(b"\n"))
            .and_then(|()| self.writer.flush());
        if let Err(e) = result
            && !self.failed
        {
            self.failed = true;
            log::warn!("TokenLog: write failed ({e}); further errors are ignored");
        }
    }
}

impl TokenLog {
    /// A log on standard error.
    pub fn stderr() -> TokenLog {
        TokenLog::new(io::stderr())
    }

    /// A log writing to `writer`.
    pub fn new(writer: impl Write + Send + 'static) -> TokenLog {
        let out = Output {
            writer: Box::new(writer),
            failed: false,
        };
        TokenLog {
            out: Arc::new(Mutex::new(out)),
            tag: "main".to_string(),
            cap: None,
            used: 0,
            warn_ratio: 0.8,
            warned: false,
        }
    }

    /// Warn when the context in use reaches `ratio` of the cap (default
    /// `0.8`). A ratio above `1.0` (or NaN) never warns.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Event, Listener, Usage};
    /// use pikuri::listeners::TokenLog;
    ///
    /// let mut log = TokenLog::new(std::io::sink()).with_warn_ratio(0.5);
    /// log.on_event(&Event::ContextCap { agent: "".into(), cap: Some(1000) });
    /// log.on_event(&Event::HistoryLoaded {
    ///     agent: "".into(),
    ///     messages: 4,
    ///     tokens: Some(Usage::new().with_input(600)),
    /// });
    /// assert_eq!((log.ctx_used(), log.cap()), (600, Some(1000)));
    /// ```
    #[must_use]
    pub fn with_warn_ratio(mut self, ratio: f64) -> TokenLog {
        self.warn_ratio = ratio;
        self
    }

    /// The context in use, as of the last `Tokens` (or `HistoryLoaded`).
    pub fn ctx_used(&self) -> u64 {
        self.used
    }

    /// The context cap, as of the last `ContextCap`; `None` when unknown.
    pub fn cap(&self) -> Option<u64> {
        self.cap
    }

    fn ctx(&self) -> String {
        match self.cap {
            Some(cap) => format!("ctx={}/{}", figure(self.used), figure(cap)),
            None => format!("ctx={}", figure(self.used)),
        }
    }

    /// Print the warning if `used` just crossed the threshold.
    fn check_threshold(&mut self, out: &mut Output) {
        let Some(cap) = self.cap.filter(|&c| c > 0) else {
            return;
        };
        let above = self.used as f64 >= self.warn_ratio * cap as f64;
        if above && !self.warned {
            out.line(&format!(
                "[{}] warning: context {}% full ({}/{})",
                self.tag,
                self.used.saturating_mul(100) / cap,
                figure(self.used),
                figure(cap)
            ));
        }
        self.warned = above;
    }
}

impl Listener for TokenLog {
    fn on_event(&mut self, event: &Event) {
        match event {
            Event::ContextCap { cap, .. } => self.cap = *cap,
            Event::Reset { .. } => {
                self.used = 0;
                self.warned = false;
            }
            Event::HistoryLoaded {
                messages, tokens, ..
            } => {
                self.used = tokens.map_or(0, |u| u.context_used());
                let out = Arc::clone(&self.out);
                let mut out = out.lock();
                out.line(&format!(
                    "[{}] {} restored {messages} message{}",
                    self.tag,
                    self.ctx(),
                    if *messages == 1 { "" } else { "s" }
                ));
                self.check_threshold(&mut out);
            }
            Event::Tokens {
                input,
                output,
                cached,
                cache_creation,
                thinking,
                ..
            } => {
                self.used = input
                    .unwrap_or(0)
                    .saturating_add(cached.unwrap_or(0))
                    .saturating_add(cache_creation.unwrap_or(0));
                let mut line = format!(
                    "[{}] {} in={} out={} cached={}",
                    self.tag,
                    self.ctx(),
                    maybe(*input),
                    maybe(*output),
                    maybe(*cached)
                );
                for (label, value) in [("cache_write", cache_creation), ("thinking", thinking)] {
                    if let Some(v) = value.filter(|&v| v > 0) {
                        // Writing into a String cannot fail.
                        let _ = write!(line, " {label}={}", figure(v));
                    }
                }
                let out = Arc::clone(&self.out);
                let mut out = out.lock();
                out.line(&line);
                self.check_threshold(&mut out);
            }
            _ => {}
        }
    }

    fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
        SubAgentListener::Replace(Box::new(TokenLog {
            out: Arc::clone(&self.out),
            tag: if id.is_empty() { "main" } else { id }.to_string(),
            cap: self.cap,
            used: 0,
            warn_ratio: self.warn_ratio,
            warned: false,
        }))
    }

    fn name(&self) -> String {
        "TokenLog".to_string()
    }
}

impl fmt::Debug for TokenLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenLog")
            .field("tag", &self.tag)
            .field("cap", &self.cap)
            .field("used", &self.used)
            .field("warn_ratio", &self.warn_ratio)
            .finish_non_exhaustive()
    }
}

/// `950`, `12.2k`, `1.5M`.
fn figure(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else if n < 999_950 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        format!("{:.1}M", n as f64 / 1e6)
    }
}

fn maybe(n: Option<u64>) -> String {
    n.map_or_else(|| "-".to_string(), figure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Usage;

    use crate::testing::SharedBuffer as Buf;

    fn tokens(agent: &str, input: u64, cached: Option<u64>) -> Event {
        Event::Tokens {
            agent: agent.into(),
            input: Some(input),
            output: Some(120),
            cached,
            cache_creation: None,
            thinking: None,
            model_id: Some("m".into()),
            response_id: None,
        }
    }

    fn cap(cap: Option<u64>) -> Event {
        Event::ContextCap {
            agent: "".into(),
            cap,
        }
    }

    #[test]
    fn figures() {
        assert_eq!(figure(0), "0");
        assert_eq!(figure(950), "950");
        assert_eq!(figure(1000), "1.0k");
        assert_eq!(figure(12_200), "12.2k");
        assert_eq!(figure(999_949), "999.9k");
        assert_eq!(figure(999_950), "1.0M");
        assert_eq!(figure(1_500_000), "1.5M");
    }

    #[test]
    fn lines_without_and_with_cap() {
        let buf = Buf::default();
        let mut log = TokenLog::new(buf.clone());
        log.on_event(&tokens("", 12_200, None));
        assert_eq!(buf.take(), "[main] ctx=12.2k in=12.2k out=120 cached=-\n");
        log.on_event(&cap(Some(32_000)));
        assert_eq!(buf.take(), "");
        log.on_event(&Event::Tokens {
            agent: "".into(),
            input: Some(950),
            output: None,
            cached: Some(11_000),
            cache_creation: Some(1000),
            thinking: Some(40),
            model_id: None,
            response_id: None,
        });
        assert_eq!(
            buf.take(),
            "[main] ctx=12.9k/32.0k in=950 out=- cached=11.0k cache_write=1.0k thinking=40\n"
        );
        assert_eq!((log.ctx_used(), log.cap()), (12_950, Some(32_000)));
        log.on_event(&cap(None));
        assert_eq!(log.cap(), None);
    }

    #[test]
    fn history_reseeds_and_reset_zeroes() {
        let buf = Buf::default();
        let mut log = TokenLog::new(buf.clone());
        log.on_event(&cap(Some(40_000)));
        log.on_event(&tokens("", 5000, None));
        buf.take();
        log.on_event(&Event::Reset { agent: "".into() });
        assert_eq!(log.ctx_used(), 0);
        log.on_event(&Event::HistoryLoaded {
            agent: "".into(),
            messages: 14,
            tokens: Some(Usage::from_parts(
                Some(2000),
                Some(50),
                Some(10_000),
                None,
                None,
            )),
        });
        assert_eq!(log.ctx_used(), 12_000);
        assert_eq!(buf.take(), "[main] ctx=12.0k/40.0k restored 14 messages\n");
        log.on_event(&Event::HistoryLoaded {
            agent: "".into(),
            messages: 1,
            tokens: None,
        });
        assert_eq!(log.ctx_used(), 0);
        assert_eq!(buf.take(), "[main] ctx=0/40.0k restored 1 message\n");
    }

    #[test]
    fn sub_agent_is_zeroed_and_tagged() {
        let buf = Buf::default();
        let mut log = TokenLog::new(buf.clone());
        log.on_event(&cap(Some(32_000)));
        log.on_event(&tokens("", 20_000, None));
        let SubAgentListener::Replace(mut child) = log.for_sub_agent("researcher 0") else {
            panic!("expected Replace");
        };
        child.on_event(&tokens("researcher 0", 1500, Some(500)));
        log.on_event(&tokens("", 21_000, None));
        assert_eq!(
            buf.take(),
            "[main] ctx=20.0k/32.0k in=20.0k out=120 cached=-\n\
             [researcher 0] ctx=2.0k/32.0k in=1.5k out=120 cached=500\n\
             [main] ctx=21.0k/32.0k in=21.0k out=120 cached=-\n"
        );
        assert_eq!(log.ctx_used(), 21_000);
        assert_eq!(child.name(), "TokenLog");
    }

    #[test]
    fn warns_once_per_crossing() {
        let buf = Buf::default();
        let mut log = TokenLog::new(buf.clone());
        log.on_event(&cap(Some(32_000)));
        log.on_event(&tokens("", 25_000, None)); // 78%
        log.on_event(&tokens("", 26_240, None)); // 82%
        log.on_event(&tokens("", 28_000, None)); // still above: no repeat
        log.on_event(&Event::Reset { agent: "".into() });
        log.on_event(&tokens("", 1000, None));
        log.on_event(&tokens("", 30_000, None)); // crossing again
        let out = buf.take();
        let warnings: Vec<&str> = out.lines().filter(|l| l.contains("warning")).collect();
        assert_eq!(
            warnings,
            [
                "[main] warning: context 82% full (26.2k/32.0k)",
                "[main] warning: context 93% full (30.0k/32.0k)"
            ]
        );
        assert!(out.contains("ctx=26.2k/32.0k in=26.2k out=120 cached=-\n[main] warning"));
    }

    #[test]
    fn warn_ratio_and_unknown_cap() {
        let buf = Buf::default();
        let mut log = TokenLog::new(buf.clone()).with_warn_ratio(0.5);
        log.on_event(&tokens("", 900_000, None));
        assert!(!buf.take().contains("warning"));
        log.on_event(&cap(Some(1000)));
        log.on_event(&tokens("", 500, None));
        assert!(
            buf.take()
                .contains("[main] warning: context 50% full (500/1.0k)")
        );
        assert_eq!(
            format!("{log:?}"),
            "TokenLog { tag: \"main\", cap: Some(1000), used: 500, warn_ratio: 0.5, .. }"
        );
    }
}
