//! Conversations longer than the context window: [`Compaction`] (summarize
//! or drop the older turns) and the recovery from a request the server
//! rejected as too long. One oversized tool result: `tool_limit`.
//!
//! The rules are documented once, on [`Compaction`]. `Compactor` is the
//! per-agent state the turn calls at its boundaries: before a request,
//! after a request rejected as too long, and on demand
//! ([`Agent::compact`](crate::Agent::compact)). It runs no child itself:
//! the agent hands it a `summarize` function that does.
//!
//! The machinery (the cut, the summary, the estimate's use, and the step
//! at a boundary of the turn: the conversation it reads, the journal record
//! and the event of a compaction) is reached only through an [`Engine`],
//! function pointers stored by
//! [`Configurator::compaction`](crate::Configurator::compaction) and by
//! `Agent::compact`: a program that calls neither does not link it (the
//! small CLI of issue 36, BENCHMARKS.md; `scripts/small-cli-symbols.sh`
//! checks it).

use std::fmt::Write as _;
use std::sync::Arc;

use super::shared::Shared;
use super::synthesizer;
use crate::event::CompactionStrategy;
use crate::journal::{HistoryCause, Record};
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
///     .compaction(Compaction::summarize().with_threshold(0.8).with_keep_turns(1))
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
/// | [`Agent::compact`](crate::Agent::compact) | compact now, whatever the estimate |
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
/// bigger than the window cannot be cut; [`ToolResultLimit`](crate::compaction::ToolResultLimit) keeps single
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
/// compactor's request as too long.
///
/// The summary is bounded: at most 2,000 tokens by chars/4 (a quarter of
/// the window when that is smaller), and fewer tokens than the messages
/// it replaces. A summary over either bound is refused as an
/// [`Error::Protocol`]: compaction must never grow the history. A failed
/// summary (a failed request other than a cancel, an empty or refused
/// summary) leaves the history unchanged: before a request, the request
/// goes ahead as it is; after an overflow, the rejection stands;
/// [`Agent::compact`](crate::Agent::compact) returns the error.
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
    /// let c = Compaction::drop_oldest().with_keep_turns(3);
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
    pub fn with_threshold(mut self, fraction: f64) -> Compaction {
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
    pub fn with_keep_turns(mut self, turns: usize) -> Compaction {
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
    /// use pikuri::{Message};
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

/// What compaction works on: the history and what a request carries
/// besides it, and the way to run the compactor child.
pub(crate) struct Conversation<'a> {
    pub(crate) messages: &'a mut Vec<Message>,
    pub(crate) system_prompt: &'a str,
    pub(crate) tools: &'a [Arc<dyn Tool>],
    /// The resolved context window.
    pub(crate) window: Option<u64>,
    /// Runs a tools-free child with this system prompt on this user
    /// message; its answer (the agent owns the children).
    pub(crate) summarize: &'a mut dyn FnMut(&str, &str) -> Result<String>,
}

/// What a boundary of the turn hands compaction: the agent's parts it reads
/// and changes.
pub(crate) struct Boundary<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) messages: &'a mut Vec<Message>,
    /// What the requests send (a typed turn's, with its note).
    pub(crate) system_prompt: &'a str,
    /// Index of the latest turn's user message, moved by a cut.
    pub(crate) turn_start: &'a mut usize,
}

/// What one compaction changed.
#[derive(Debug)]
pub(crate) struct Compacted {
    strategy: CompactionStrategy,
    /// Where the old history was cut, and whether a summary went before it.
    cut: usize,
    added: usize,
    messages_before: usize,
    messages_after: usize,
    tokens_before: u64,
    tokens_after: u64,
}

impl Compacted {
    /// Where the message at index `i` before the compaction sits after it
    /// (0 for a message that was cut).
    pub(crate) fn shift(&self, i: usize) -> usize {
        (i + self.added).saturating_sub(self.cut)
    }

    /// The [`Event::Compacted`] that reports it.
    pub(crate) fn event(&self, agent: Arc<str>) -> Event {
        Event::Compacted {
            agent,
            strategy: self.strategy,
            messages_before: self.messages_before,
            messages_after: self.messages_after,
            tokens_before: self.tokens_before,
            tokens_after: self.tokens_after,
        }
    }
}

/// The compaction machinery as function pointers (see the module doc):
/// named only where compaction is asked for, so the linker drops it from a
/// program that never asks.
#[derive(Clone, Copy)]
pub(crate) struct Engine {
    /// A step at a boundary of the turn ([`Compactor::at`]).
    at: fn(&mut Compactor, Boundary<'_>, Step) -> Result<bool>,
    step: fn(&mut Compactor, &mut Conversation<'_>, &Compaction, Step) -> Result<Option<Compacted>>,
    /// The summary request: a tools-free child of the agent.
    ask: fn(&Shared, &str, &str) -> Result<String>,
}

impl Engine {
    /// The engine with `ask` for its summary requests (the one value is
    /// `child::COMPACTION`: this file is below the children's).
    pub(crate) const fn new(ask: fn(&Shared, &str, &str) -> Result<String>) -> Engine {
        Engine {
            at: Compactor::at_boundary,
            step: Compactor::step,
            ask,
        }
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Engine")
    }
}

/// Which boundary a step of the [`Engine`] runs at.
#[derive(Clone, Copy)]
pub(crate) enum Step {
    Now,
    BeforeRequest,
    AfterOverflow,
}

/// The stand-in for [`Engine::ask`] before an engine is stored: never
/// called, since no step runs without one.
fn unarmed(_: &Shared, _: &str, _: &str) -> Result<String> {
    Err(Error::protocol("compaction is not configured"))
}

/// The per-agent compaction state: the configuration and which usage
/// figures still describe the history.
#[derive(Debug, Default)]
pub(crate) struct Compactor {
    config: Option<Compaction>,
    /// Set with `config`, or by [`arm`](Compactor::arm).
    engine: Option<Engine>,
    /// Usage figures of messages before this index predate the last
    /// compaction and describe requests that no longer exist.
    fresh_from: usize,
}

impl Compactor {
    pub(crate) fn new(config: Option<(Compaction, Engine)>) -> Compactor {
        let (config, engine) = config.unzip();
        Compactor {
            config,
            engine,
            fresh_from: 0,
        }
    }

    /// Store `engine` if none is: before [`now`](Compactor::now), which
    /// runs without a configuration too.
    pub(crate) fn arm(&mut self, engine: Engine) {
        self.engine.get_or_insert(engine);
    }

    /// The summary request to hand a [`Conversation`] (a stand-in that is
    /// never called when no engine is stored).
    pub(crate) fn ask(&self) -> fn(&Shared, &str, &str) -> Result<String> {
        self.engine.map_or(unarmed, |e| e.ask)
    }

    /// One step at a boundary of the turn, on the agent's parts; whether
    /// it compacted (then the history's record is journaled and
    /// [`Event::Compacted`] says what changed). False without an engine:
    /// no compaction configured and [`Agent::compact`](crate::Agent::compact)
    /// never called.
    pub(crate) fn at(&mut self, turn: Boundary<'_>, step: Step) -> Result<bool> {
        match self.engine {
            Some(engine) => (engine.at)(self, turn, step),
            None => Ok(false),
        }
    }

    /// [`Engine::at`]: the conversation the step reads, the step, and what
    /// a compaction leaves to record and announce.
    fn at_boundary(&mut self, turn: Boundary<'_>, step: Step) -> Result<bool> {
        let Boundary {
            shared,
            messages,
            system_prompt,
            turn_start,
        } = turn;
        let (tools, window) = {
            let mut st = shared.state.lock();
            (st.callable(), st.context_cap)
        };
        let ask = self.ask();
        let mut summarize = |system: &str, prompt: &str| ask(shared, system, prompt);
        let mut c = Conversation {
            messages,
            system_prompt,
            tools: &tools,
            window,
            summarize: &mut summarize,
        };
        let done = match step {
            Step::Now => self.now(&mut c)?,
            Step::BeforeRequest => self.before_request(&mut c)?,
            Step::AfterOverflow => self.after_overflow(&mut c)?,
        };
        let Some(done) = done else {
            return Ok(false);
        };
        shared.journal(|| Record::History {
            cause: HistoryCause::Compaction,
            messages: (&c.messages[..]).into(),
        })?;
        *turn_start = done.shift(*turn_start);
        shared.emit(done.event(Arc::clone(&shared.id)));
        Ok(true)
    }

    /// Run `step` of the stored engine; `None` without a configuration.
    fn run(&mut self, c: &mut Conversation<'_>, step: Step) -> Result<Option<Compacted>> {
        let (Some(config), Some(engine)) = (self.config.clone(), self.engine) else {
            return Ok(None);
        };
        (engine.step)(self, c, &config, step)
    }

    /// [`Engine::step`]: the body of each boundary.
    fn step(
        &mut self,
        c: &mut Conversation<'_>,
        config: &Compaction,
        step: Step,
    ) -> Result<Option<Compacted>> {
        match step {
            Step::Now => self.compact(c, config, config.keep_turns),
            Step::BeforeRequest => self.when_due(c, config),
            Step::AfterOverflow => self.once_more(c, config),
        }
    }

    /// The conversation was cleared: every usage figure is fresh again.
    pub(crate) fn reset(&mut self) {
        self.fresh_from = 0;
    }

    /// Compact now, whatever the estimate, as the configuration says
    /// ([`Compaction::summarize`] when none is set); `None` when nothing
    /// precedes the kept turns.
    pub(crate) fn now(&mut self, c: &mut Conversation<'_>) -> Result<Option<Compacted>> {
        let config = self.config.clone().unwrap_or_default();
        let Some(engine) = self.engine else {
            return Ok(None);
        };
        (engine.step)(self, c, &config, Step::Now)
    }

    /// Before a request: compact when the estimate passes the threshold.
    /// Errors only with [`Error::Cancelled`]: a failed summary leaves the
    /// history as it is and the request goes ahead.
    pub(crate) fn before_request(&mut self, c: &mut Conversation<'_>) -> Result<Option<Compacted>> {
        self.run(c, Step::BeforeRequest)
    }

    /// [`before_request`](Compactor::before_request) with a configuration.
    fn when_due(
        &mut self,
        c: &mut Conversation<'_>,
        config: &Compaction,
    ) -> Result<Option<Compacted>> {
        let Some(cap) = c.window else {
            return Ok(None);
        };
        #[allow(
            clippy::cast_precision_loss,
            reason = "token counts are far below 2^52"
        )]
        if (self.estimate(c) as f64) <= config.threshold * cap as f64 {
            return Ok(None);
        }
        // The kept turns alone may be what is too big: keep only the
        // current one rather than send a request the server will refuse.
        let done = match self.compact(c, config, config.keep_turns) {
            Ok(None) if config.keep_turns > 1 => self.compact(c, config, 1),
            other => other,
        };
        match done {
            Err(e) if e.is_cancelled() => Err(e),
            Err(e) => {
                log::warn!("compaction failed, sending the request as it is: {e}");
                Ok(None)
            }
            Ok(done) => Ok(done),
        }
    }

    /// After the server rejected a request as too long: compact once,
    /// keeping only the current turn. `None` (the rejection stands) without
    /// a configuration, with nothing to cut, or when the summary failed;
    /// errors only with [`Error::Cancelled`].
    pub(crate) fn after_overflow(&mut self, c: &mut Conversation<'_>) -> Result<Option<Compacted>> {
        self.run(c, Step::AfterOverflow)
    }

    /// [`after_overflow`](Compactor::after_overflow) with a configuration.
    fn once_more(
        &mut self,
        c: &mut Conversation<'_>,
        config: &Compaction,
    ) -> Result<Option<Compacted>> {
        match self.compact(c, config, 1) {
            Err(e) if e.is_cancelled() => Err(e),
            Err(e) => {
                log::warn!("compaction after an overflow failed: {e}");
                Ok(None)
            }
            Ok(done) => Ok(done),
        }
    }

    /// The tokens the next request would carry (see
    /// [The estimate](Compaction#the-estimate)).
    pub(crate) fn estimate(&self, c: &Conversation<'_>) -> u64 {
        self.estimate_of(c, &c.messages[..])
    }

    /// The estimate of a request that would carry `messages` (a prefix of
    /// the history) with the conversation's system prompt and tools.
    fn estimate_of(&self, c: &Conversation<'_>, messages: &[Message]) -> u64 {
        let from = self.fresh_from.min(messages.len());
        let latest = messages[from..]
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
                + estimate_messages(&messages[i + 1..]);
        }
        overhead(c) + estimate_messages(messages)
    }

    /// The tokens `messages[..cut]` take in a request: by the server's
    /// usage figures when a fresh one covers them, else by chars/4 (the
    /// larger of the two, so a summary is measured against the most the
    /// server counted).
    fn replaced_tokens(&self, c: &Conversation<'_>, cut: usize) -> u64 {
        let older = &c.messages[..cut];
        let by_usage = self.estimate_of(c, older).saturating_sub(overhead(c));
        by_usage.max(estimate_messages(older))
    }

    /// Remove what precedes the last `keep` user turns; `None` when
    /// nothing precedes them.
    fn compact(
        &mut self,
        c: &mut Conversation<'_>,
        config: &Compaction,
        keep: usize,
    ) -> Result<Option<Compacted>> {
        let Some(cut) = cut_point(c.messages, keep) else {
            return Ok(None);
        };
        let tokens_before = self.estimate(c);
        let messages_before = c.messages.len();
        let summary = match config.strategy {
            CompactionStrategy::Summarize => {
                let summary = summarize(c, config, cut)?;
                check_summary(&summary, self.replaced_tokens(c, cut), c.window)?;
                Some(summary)
            }
            CompactionStrategy::DropOldest => None,
        };
        let added = usize::from(summary.is_some());
        let tail = c.messages.split_off(cut);
        *c.messages = summary.into_iter().map(Message::user).collect();
        c.messages.extend(tail);
        self.fresh_from = c.messages.len();
        Ok(Some(Compacted {
            strategy: config.strategy,
            cut,
            added,
            messages_before,
            messages_after: c.messages.len(),
            tokens_before,
            tokens_after: self.estimate(c),
        }))
    }
}

/// What a request carries besides the history: the system prompt and the
/// tool schemas.
fn overhead(c: &Conversation<'_>) -> u64 {
    let tools: u64 = c
        .tools
        .iter()
        .map(|t| {
            estimate_tokens(t.name())
                + estimate_tokens(t.description())
                + estimate_tokens(&t.parameters().to_json().to_string())
        })
        .sum();
    estimate_tokens(c.system_prompt) + 4 + tools
}

/// Chars/4, rounded up.
pub(super) fn estimate_tokens(text: &str) -> u64 {
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
    let out = synthesizer::transcript(messages, true);
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

/// The most tokens (by chars/4) a summary may take: 2,000, and at most a
/// quarter of a known window.
fn max_summary_tokens(window: Option<u64>) -> u64 {
    window.map_or(MAX_SUMMARY_TOKENS, |cap| {
        (cap / 4).clamp(1, MAX_SUMMARY_TOKENS)
    })
}

/// The bound of [`max_summary_tokens`] when the window is unknown or large.
const MAX_SUMMARY_TOKENS: u64 = 2_000;

/// A summary must be bounded and smaller than what it replaces: a
/// compactor that rambles (or a server that streams megabytes) would
/// otherwise grow the history it was asked to shrink, past the window for
/// good. The history is untouched when this fails.
fn check_summary(summary: &str, replaced: u64, window: Option<u64>) -> Result<()> {
    // Counted as the message it becomes (4 tokens of framing).
    let tokens = estimate_tokens(summary) + 4;
    let max = max_summary_tokens(window);
    if tokens > max {
        return Err(Error::protocol(format!(
            "the compactor's summary (~{tokens} tokens) is over the bound of {max} tokens; \
             the history is unchanged"
        )));
    }
    if tokens >= replaced {
        return Err(Error::protocol(format!(
            "the compactor's summary (~{tokens} tokens) is not smaller than the {replaced} \
             tokens it would replace; the history is unchanged"
        )));
    }
    Ok(())
}

/// The summary message's content for `messages[..cut]`.
fn summarize(c: &mut Conversation<'_>, config: &Compaction, cut: usize) -> Result<String> {
    // The transcript must fit the compactor's own request: half the
    // window, or 32k characters when the window is unknown; when the
    // server still finds it too long (a wrong window), half as much,
    // down to 2,000 characters.
    let mut max_chars = c.window.map_or(32_000, |cap| {
        usize::try_from(cap.saturating_mul(2)).unwrap_or(usize::MAX)
    });
    loop {
        let text = transcript(&c.messages[..cut], max_chars);
        let len = text.chars().count();
        let prompt = format!("Summarize this earlier part of the conversation:\n\n{text}");
        match (c.summarize)(&config.system_prompt, &prompt) {
            Err(e) if e.is_context_overflow() && len > 2_000 => {
                max_chars = (len / 2).max(2_000);
            }
            Err(e) => return Err(e),
            Ok(answer) if answer.trim().is_empty() => {
                return Err(Error::protocol("the compactor wrote an empty summary"));
            }
            Ok(answer) => return Ok(format!("{}\n{}", Compaction::SUMMARY_MARKER, answer.trim())),
        }
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

    /// Two old turns and a current one, about 50 tokens each by chars/4.
    fn long_history() -> Vec<Message> {
        let words = "w".repeat(200);
        vec![
            Message::user(format!("one {words}")),
            Message::assistant(format!("1 {words}")),
            Message::user(format!("two {words}")),
            Message::assistant(format!("2 {words}")),
            Message::user("three"),
        ]
    }

    fn conversation<'a>(
        messages: &'a mut Vec<Message>,
        window: Option<u64>,
        summarize: &'a mut dyn FnMut(&str, &str) -> Result<String>,
    ) -> Conversation<'a> {
        Conversation {
            messages,
            system_prompt: "",
            tools: &[],
            window,
            summarize,
        }
    }

    #[test]
    fn before_request_compacts_only_past_the_threshold() {
        let mut asked = Vec::new();
        let mut summarize = |_: &str, prompt: &str| {
            asked.push(prompt.to_string());
            Ok("the gist".to_string())
        };
        let mut k = Compactor::new(Some((
            Compaction::summarize().with_keep_turns(1),
            crate::agent::child::COMPACTION,
        )));
        let mut h = long_history();
        // About 210 tokens against a window of 1,000: nothing to do.
        let mut c = conversation(&mut h, Some(1000), &mut summarize);
        assert!(k.before_request(&mut c).unwrap().is_none());
        // Against a window of 200, past 80%: the two old turns go.
        let mut c = conversation(&mut h, Some(200), &mut summarize);
        let done = k.before_request(&mut c).unwrap().expect("compacted");
        assert_eq!(h.len(), 2);
        assert!(Compaction::is_summary(&h[0]));
        assert!(h[0].content.ends_with("the gist"));
        assert_eq!(h[1].content, "three");
        // The current turn started at 4; it now follows the summary.
        assert_eq!(done.shift(4), 1);
        assert_eq!(asked.len(), 1);
        assert!(asked[0].contains("[user] one"), "{}", asked[0]);
    }

    #[test]
    fn a_failed_summary_leaves_the_history_but_a_cancel_stops() {
        let mut k = Compactor::new(Some((
            Compaction::summarize().with_keep_turns(1),
            crate::agent::child::COMPACTION,
        )));
        let mut h = long_history();
        let mut failing = |_: &str, _: &str| Err(Error::protocol("down"));
        let mut c = conversation(&mut h, Some(200), &mut failing);
        assert!(k.before_request(&mut c).unwrap().is_none());
        assert_eq!(h.len(), 5);
        let mut cancelled = |_: &str, _: &str| Err(Error::Cancelled);
        let mut c = conversation(&mut h, Some(200), &mut cancelled);
        assert!(k.before_request(&mut c).unwrap_err().is_cancelled());
        let mut c = conversation(&mut h, Some(200), &mut cancelled);
        assert!(k.after_overflow(&mut c).unwrap_err().is_cancelled());
        assert_eq!(h.len(), 5);
    }

    #[test]
    fn a_summary_that_does_not_shrink_is_refused_and_the_history_kept() {
        let mut k = Compactor::new(Some((
            Compaction::summarize().with_keep_turns(1),
            crate::agent::child::COMPACTION,
        )));
        let before = long_history();
        // Over the bound: 2 MB for ~100 tokens of turns.
        let mut h = before.clone();
        let mut huge = |_: &str, _: &str| Ok("y".repeat(2_000_000));
        let mut c = conversation(&mut h, None, &mut huge);
        let err = k.now(&mut c).unwrap_err();
        assert!(err.to_string().contains("over the bound"), "{err}");
        assert_eq!(h, before);
        // Under the bound but bigger than the two turns it would replace.
        let mut long = |_: &str, _: &str| Ok("z".repeat(1_000));
        let mut c = conversation(&mut h, None, &mut long);
        let err = k.now(&mut c).unwrap_err();
        assert!(err.to_string().contains("not smaller"), "{err}");
        assert_eq!(h, before);
        // Before a request the failure is logged and the request goes ahead.
        let mut c = conversation(&mut h, Some(200), &mut long);
        assert!(k.before_request(&mut c).unwrap().is_none());
        assert_eq!(h, before);
        // A quarter of the window bounds the summary too.
        assert_eq!(max_summary_tokens(Some(1_000)), 250);
        assert_eq!(max_summary_tokens(Some(1_000_000)), MAX_SUMMARY_TOKENS);
        assert_eq!(max_summary_tokens(None), MAX_SUMMARY_TOKENS);
    }

    #[test]
    fn after_overflow_needs_a_configuration_and_halves_a_rejected_transcript() {
        let mut h = long_history();
        let mut never =
            |_: &str, _: &str| -> Result<String> { panic!("no summary without a configuration") };
        let mut c = conversation(&mut h, None, &mut never);
        assert!(
            Compactor::default()
                .after_overflow(&mut c)
                .unwrap()
                .is_none()
        );

        let mut h: Vec<Message> = (0..40)
            .flat_map(|i| {
                [
                    Message::user(format!("q{i} {}", "x".repeat(100))),
                    Message::assistant("a"),
                ]
            })
            .collect();
        h.push(Message::user("now"));
        let mut lengths = Vec::new();
        let mut picky = |_: &str, prompt: &str| {
            lengths.push(prompt.chars().count());
            if lengths.len() == 1 {
                Err(Error::Http {
                    status: 400,
                    message: "the request exceeds the available context size".into(),
                    url: "http://h/v1/chat/completions".into(),
                })
            } else {
                Ok("short".to_string())
            }
        };
        let mut k = Compactor::new(Some((
            Compaction::summarize(),
            crate::agent::child::COMPACTION,
        )));
        let mut c = conversation(&mut h, None, &mut picky);
        assert!(k.after_overflow(&mut c).unwrap().is_some());
        assert_eq!(h.len(), 2, "keeps only the current turn");
        assert_eq!(lengths.len(), 2);
        assert!(lengths[1] < lengths[0], "{lengths:?}");
    }
}
