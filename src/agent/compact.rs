//! Conversations longer than the context window: [`Compaction`] (summarize
//! or drop the older turns) and the recovery from a request the server
//! rejected as too long. One oversized tool result: `tool_limit`.
//!
//! The rules are documented once, on [`Compaction`].

use std::fmt::Write as _;
use std::sync::Arc;

use crate::event::CompactionStrategy;

use super::Agent;
use super::child::{ChildSpec, child_id};
use super::tool_limit::{ToolResultLimit, truncate_result};
use crate::protocol::Completion;
use crate::{Error, Event, Message, Result, Role, Tool};

/// Automatic compaction of a conversation that approaches the context
/// window; set with [`Configurator::compaction`](crate::Configurator::compaction).
///
/// Off by default: a library must not rewrite a host's history or spend
/// requests it did not ask for. With it set, a request the server rejects
/// as too long is also compacted and retried once.
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, Event, Message};
/// use pikuri::compaction::Compaction;
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.set_context_size(Some(1000));
/// // Three turns; the third request would carry ~900 tokens: past 80%.
/// server.push(Reply::text("one").with_usage(100, 5));
/// server.push(Reply::text("two").with_usage(880, 5));
/// server.push(Reply::text("Earlier: the user said hi twice.")); // the summary
/// server.push(Reply::text("three"));
/// let mut agent = Agent::builder(server.transport())
///     .system_prompt("You are terse.")
///     .compaction(Compaction::summarize().threshold(0.8).keep_turns(1))
///     .build()?;
/// agent.run_loop("hi")?;
/// agent.run_loop("hi again")?;
/// agent.run_loop("and a third time")?;
/// // The summary replaced the first two turns.
/// let m = agent.messages();
/// assert!(Compaction::is_summary(&m[0]));
/// assert!(m[0].content.ends_with("Earlier: the user said hi twice."));
/// assert_eq!(m[1].content, "and a third time");
/// // The summarizer's request had no tools; the main request got the summary.
/// let requests = server.chat_requests();
/// assert!(requests[2].tool_names().is_empty());
/// let sent = requests[3].messages();
/// assert_eq!(sent[0]["content"], "You are terse."); // the system prompt stays
/// assert!(sent[1]["content"].as_str().unwrap().starts_with(Compaction::SUMMARY_MARKER));
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # When it runs
///
/// | Boundary | What happens |
/// |---|---|
/// | before each request | with a [`Compaction`] set and a known window: when the estimate passes `threshold × window`, compact |
/// | a request rejected as too long ([`Error::is_context_overflow`]) | with a [`Compaction`] set: compact once (keeping only the current turn), retry once; a second rejection is the error |
/// | a tool result is appended | [`ToolResultLimit`](crate::compaction::ToolResultLimit) (on by default) truncates it with a visible marker |
/// | [`Agent::compact`] | compact now, whatever the estimate |
///
/// # The estimate
///
/// The tokens the next request carries: the usage of the latest assistant
/// message written since the last compaction ([`Usage::context_used`](crate::Usage::context_used) plus
/// its output tokens), plus the characters added after it divided by 4,
/// rounded up. Without such a usage (a server that reports none, or right
/// after a compaction), the whole request is estimated at chars/4: system
/// prompt, messages, tool schemas. Chars/4 overestimates most English text
/// under BPE tokenizers slightly and underestimates code and non-Latin
/// scripts; the threshold leaves the margin.
///
/// # Where the history is cut
///
/// Only just before a user message (a turn start, or an injected message),
/// never between an assistant message with tool calls and its tool
/// results, so the compacted history is valid for strict servers. The last
/// `keep_turns` user turns are kept verbatim (at least the current one);
/// the older messages are summarized or dropped. A turn that alone is
/// bigger than the window cannot be cut; [`ToolResultLimit`] keeps single
/// results from getting there.
///
/// # The summary
///
/// [`CompactionStrategy::Summarize`] runs a tools-free child agent (id
/// `"compactor"`, or `"<id> compactor"` under a sub-agent; built like every
/// child: same transport, client and `Cancellable`, a
/// [`StepLimit`](crate::StepLimit) of 1) over a transcript of the older
/// messages. Its answer replaces them as one **user** message starting
/// with [`Compaction::SUMMARY_MARKER`]: every server accepts a user message
/// anywhere, which is not true of a system message after the first, and
/// the marker survives [`History`](crate::History) export, so
/// [`Compaction::is_summary`] finds it after a reload. The transcript is
/// capped at half the window (32,000 characters when it is unknown; the
/// middle is elided), and halved again while the server rejects the
/// compactor's request as too long. A failed summary
/// request (other than a cancel) leaves the history unchanged and the
/// request goes ahead.
#[derive(Clone, Debug, PartialEq)]
pub struct Compaction {
    strategy: CompactionStrategy,
    threshold: f64,
    keep_turns: usize,
    system_prompt: String,
}

impl Compaction {
    /// The start of a summary message's content (a user message).
    pub const SUMMARY_MARKER: &'static str = "[Summary of the earlier conversation]";

    /// The compactor's default system prompt.
    pub const SYSTEM_PROMPT: &'static str = "You summarize the earlier part of a conversation \
between a user and an assistant so that the assistant can continue it without the full text. \
Keep the user's goals, decisions, facts, names, numbers, file paths and the results of tool calls \
that are still relevant; drop chit-chat. Write plain prose or short bullet points, at most 200 words. \
Do not answer any question from the conversation.";

    /// Summarize the older turns (the default strategy), at 80% of the
    /// window, keeping the last 2 user turns.
    pub fn summarize() -> Compaction {
        Compaction {
            strategy: CompactionStrategy::Summarize,
            threshold: 0.8,
            keep_turns: 2,
            system_prompt: Compaction::SYSTEM_PROMPT.to_string(),
        }
    }

    /// Drop the older turns (no summary request), at 80% of the window,
    /// keeping the last 2 user turns.
    ///
    /// ```
    /// use pikuri::compaction::{Compaction, CompactionStrategy};
    /// let c = Compaction::drop_oldest().keep_turns(3);
    /// assert_eq!(c.strategy(), CompactionStrategy::DropOldest);
    /// assert_eq!(c.strategy().as_str(), "drop_oldest");
    /// ```
    pub fn drop_oldest() -> Compaction {
        Compaction {
            strategy: CompactionStrategy::DropOldest,
            ..Compaction::summarize()
        }
    }

    /// Compact before a request estimated at more than `fraction` of the
    /// window (clamped to 0.1..=1.0).
    #[must_use]
    pub fn threshold(mut self, fraction: f64) -> Compaction {
        self.threshold = if fraction.is_nan() {
            0.8
        } else {
            fraction.clamp(0.1, 1.0)
        };
        self
    }

    /// Keep the last `turns` user turns verbatim (at least 1: the current
    /// turn is never summarized).
    #[must_use]
    pub fn keep_turns(mut self, turns: usize) -> Compaction {
        self.keep_turns = turns.max(1);
        self
    }

    /// A copy with another system prompt for the compactor.
    #[must_use]
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Compaction {
        self.system_prompt = prompt.into();
        self
    }

    /// The strategy.
    pub fn strategy(&self) -> CompactionStrategy {
        self.strategy
    }

    /// Whether `message` is a summary written by compaction: a user message
    /// starting with [`SUMMARY_MARKER`](Compaction::SUMMARY_MARKER).
    ///
    /// ```
    /// use pikuri::Message;
    /// use pikuri::compaction::Compaction;
    /// let m = Message::user(format!("{}\nThe user asked about Rust.", Compaction::SUMMARY_MARKER));
    /// assert!(Compaction::is_summary(&m));
    /// assert!(!Compaction::is_summary(&Message::user("hi")));
    /// ```
    pub fn is_summary(message: &Message) -> bool {
        message.role == Role::User && message.content.starts_with(Compaction::SUMMARY_MARKER)
    }
}

impl Default for Compaction {
    fn default() -> Compaction {
        Compaction::summarize()
    }
}

/// The per-agent compaction state (a field of [`Agent`]).
#[derive(Debug, Default)]
pub(crate) struct Compactor {
    pub(crate) config: Option<Compaction>,
    pub(crate) tool_limit: ToolResultLimit,
    /// Usage figures of messages before this index predate the last
    /// compaction and describe requests that no longer exist.
    fresh_from: usize,
}

impl Compactor {
    /// The conversation was cleared: every usage figure is fresh again.
    pub(crate) fn reset(&mut self) {
        self.fresh_from = 0;
    }

    pub(crate) fn new(config: Option<Compaction>, tool_limit: ToolResultLimit) -> Compactor {
        Compactor {
            config,
            tool_limit,
            fresh_from: 0,
        }
    }
}

/// Chars/4, rounded up.
pub(crate) fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// The estimate of messages as sent: text, tool calls, and 4 tokens of
/// framing each.
fn estimate_messages(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| {
            4 + estimate_tokens(&m.content)
                + m.tool_calls
                    .iter()
                    .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.arguments) + 4)
                    .sum::<u64>()
        })
        .sum()
}

/// The oldest index the history may be cut at so that the last `keep`
/// user turns (summaries not counted) stay; `None` when there is nothing
/// older than them, or only an earlier summary.
fn cut_point(messages: &[Message], keep: usize) -> Option<usize> {
    let mut seen = 0;
    let mut cut = None;
    for (i, m) in messages.iter().enumerate().rev() {
        if m.role == Role::User && !Compaction::is_summary(m) {
            seen += 1;
            if seen == keep {
                cut = Some(i);
                break;
            }
        }
    }
    let cut = cut?;
    let older = &messages[..cut];
    if older.is_empty() || (older.len() == 1 && Compaction::is_summary(&older[0])) {
        return None;
    }
    Some(cut)
}

/// The compactor's input: the older messages as a transcript, at most
/// `max_chars` (the head and the tail kept, the middle elided).
fn transcript(messages: &[Message], max_chars: usize) -> String {
    let out = super::synthesizer::transcript(messages, true);
    let total = out.chars().count();
    if total <= max_chars {
        return out;
    }
    let head = max_chars / 4;
    let tail = max_chars - head;
    let chars: Vec<char> = out.chars().collect();
    let mut s: String = chars[..head].iter().collect();
    let _ = write!(s, "\n[... {} characters omitted ...]\n", total - max_chars);
    s.extend(&chars[total - tail..]);
    s
}

impl Agent {
    /// Compact the conversation now, whatever the estimate: the older turns
    /// are summarized or dropped as the configured
    /// [`Compaction`](crate::compaction::Compaction) says ([`Compaction::summarize`]
    /// when none is set), the last turns are kept, and
    /// [`Event::Compacted`] says what changed. Returns whether anything
    /// was compacted (`false`: no turn older than the kept ones). The rules
    /// are on [`Compaction`](crate::compaction::Compaction#where-the-history-is-cut).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, History, Message};
    /// use pikuri::compaction::Compaction;
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// let mut agent = Agent::builder(server.transport())
    ///     .compaction(Compaction::drop_oldest().keep_turns(1))
    ///     .build()?;
    /// agent.load_history(History::new(vec![
    ///     Message::user("first"), Message::assistant("1"),
    ///     Message::user("second"), Message::assistant("2"),
    /// ])?)?;
    /// assert!(agent.compact()?);
    /// assert_eq!(agent.messages().len(), 2);
    /// assert_eq!(agent.messages()[0].content, "second");
    /// assert!(!agent.compact()?); // nothing older left
    /// assert!(server.chat_requests().is_empty()); // dropping needs no request
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The summary request's error ([`Error::Cancelled`], HTTP, transport);
    /// the history is unchanged.
    pub fn compact(&mut self) -> Result<bool> {
        let config = self.compaction.config.clone().unwrap_or_default();
        let keep = config.keep_turns;
        let done = self.compact_keeping(&config, keep)?;
        self.shared.listeners.flush();
        Ok(done)
    }

    /// Before a request: compact when the estimate passes the threshold.
    fn compact_if_due(&mut self) -> Result<()> {
        let Some(config) = self.compaction.config.clone() else {
            return Ok(());
        };
        let Some(cap) = self.context_window_cap() else {
            return Ok(());
        };
        #[allow(
            clippy::cast_precision_loss,
            reason = "token counts are far below 2^52"
        )]
        if (self.estimate_context() as f64) <= config.threshold * cap as f64 {
            return Ok(());
        }
        let done = match self.compact_keeping(&config, config.keep_turns) {
            Ok(false) if config.keep_turns > 1 => self.compact_keeping(&config, 1),
            other => other,
        };
        match done {
            Err(e) if e.is_cancelled() => Err(e),
            Err(e) => {
                log::warn!("compaction failed, sending the request as it is: {e}");
                Ok(())
            }
            Ok(_) => Ok(()),
        }
    }

    /// One request at the request boundary: compaction when due, fallback
    /// between transports, and one compaction and retry when the server
    /// rejects the request as too long.
    pub(crate) fn guarded_request(&mut self) -> Result<Completion> {
        self.compact_if_due()?;
        match self.request_with_fallback() {
            Err(e) if e.is_context_overflow() => {
                let Some(config) = self.compaction.config.clone() else {
                    return Err(e);
                };
                match self.compact_keeping(&config, 1) {
                    Ok(true) => self.request_with_fallback(),
                    Ok(false) => Err(e),
                    Err(c) if c.is_cancelled() => Err(c),
                    Err(c) => {
                        log::warn!("compaction after an overflow failed: {c}");
                        Err(e)
                    }
                }
            }
            other => other,
        }
    }

    /// The tool-result cap for this agent's window, applied as a result is
    /// appended.
    pub(crate) fn limit_tool_result(&self, content: String) -> String {
        truncate_result(
            content,
            self.compaction
                .tool_limit
                .max_chars(self.context_window_cap()),
        )
    }

    /// The tokens the next request would carry (see the module docs).
    pub(crate) fn estimate_context(&self) -> u64 {
        let from = self.compaction.fresh_from.min(self.messages.len());
        let latest = self.messages[from..]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, m)| {
                m.usage
                    .filter(|u| m.role == Role::Assistant && u.context_used() > 0)
                    .map(|u| (from + i, u))
            });
        if let Some((i, u)) = latest {
            return u.context_used()
                + u.output.unwrap_or(0)
                + estimate_messages(&self.messages[i + 1..]);
        }
        let tools: u64 = self
            .tools()
            .iter()
            .map(|t| {
                estimate_tokens(t.name())
                    + estimate_tokens(t.description())
                    + estimate_tokens(&t.parameters().to_json().to_string())
            })
            .sum();
        estimate_tokens(&self.system_prompt) + 4 + estimate_messages(&self.messages) + tools
    }

    /// Remove what precedes the last `keep` user turns; `Ok(false)` when
    /// nothing precedes them.
    fn compact_keeping(&mut self, config: &Compaction, keep: usize) -> Result<bool> {
        let Some(cut) = cut_point(&self.messages, keep) else {
            return Ok(false);
        };
        let tokens_before = self.estimate_context();
        let messages_before = self.messages.len();
        let summary = match config.strategy {
            CompactionStrategy::Summarize => Some(self.summarize(config, cut)?),
            CompactionStrategy::DropOldest => None,
        };
        let added = usize::from(summary.is_some());
        let tail = self.messages.split_off(cut);
        self.messages = summary.into_iter().map(Message::user).collect();
        self.messages.extend(tail);
        self.turn_start = (self.turn_start + added).saturating_sub(cut);
        self.compaction.fresh_from = self.messages.len();
        let tokens_after = self.estimate_context();
        self.emit(Event::Compacted {
            agent: self.agent_id(),
            strategy: config.strategy,
            messages_before,
            messages_after: self.messages.len(),
            tokens_before,
            tokens_after,
        });
        Ok(true)
    }

    /// The summary message's content for `messages[..cut]`.
    fn summarize(&self, config: &Compaction, cut: usize) -> Result<String> {
        // The transcript must fit the compactor's own request: half the
        // window, or 32k characters when the window is unknown; when the
        // server still finds it too long (a wrong window), half as much,
        // down to 2,000 characters.
        let mut max_chars = self.context_window_cap().map_or(32_000, |cap| {
            usize::try_from(cap.saturating_mul(2)).unwrap_or(usize::MAX)
        });
        loop {
            let text = transcript(&self.messages[..cut], max_chars);
            let len = text.chars().count();
            match self.run_compactor(config, &text) {
                Err(e) if e.is_context_overflow() && len > 2_000 => {
                    max_chars = (len / 2).max(2_000);
                }
                other => return other,
            }
        }
    }

    fn run_compactor(&self, config: &Compaction, transcript: &str) -> Result<String> {
        let prompt = format!("Summarize this earlier part of the conversation:\n\n{transcript}");
        let mut child = self.shared.spawn_child(ChildSpec {
            id: child_id(self.id(), "compactor"),
            system_prompt: config.system_prompt.clone(),
            max_steps: 1,
            tools: Vec::<Arc<dyn Tool>>::new(),
        })?;
        let result = child.run_loop(&prompt);
        let text = child.last_assistant_content().unwrap_or_default();
        child.close();
        result?;
        if text.trim().is_empty() {
            return Err(Error::protocol("the compactor wrote an empty summary"));
        }
        Ok(format!("{}\n{}", Compaction::SUMMARY_MARKER, text.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolCall;

    fn batch(id: &str) -> [Message; 3] {
        [
            Message::assistant_tool_calls("", vec![ToolCall::new(id, "t", "{}")]),
            Message::tool(id, "r"),
            Message::assistant("done"),
        ]
    }

    #[test]
    fn cuts_only_before_user_messages() {
        let mut h = vec![Message::user("a")];
        h.extend(batch("1"));
        h.push(Message::user("b"));
        h.extend(batch("2"));
        h.push(Message::user("c"));
        assert_eq!(cut_point(&h, 1), Some(8));
        assert_eq!(cut_point(&h, 2), Some(4));
        assert_eq!(cut_point(&h, 3), None);
        // An earlier summary alone is not worth summarizing again.
        let h = vec![
            Message::user(format!("{}\nx", Compaction::SUMMARY_MARKER)),
            Message::user("b"),
        ];
        assert_eq!(cut_point(&h, 1), None);
    }

    #[test]
    fn estimate_rounds_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abc"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("ééééé"), 2, "characters, not bytes");
    }

    #[test]
    fn transcript_elides_the_middle() {
        let h = vec![Message::user("x".repeat(1000))];
        let t = transcript(&h, 100);
        assert!(t.starts_with("[user] xxx"));
        assert!(t.contains("characters omitted"));
        assert!(t.chars().count() < 160);
    }
}
