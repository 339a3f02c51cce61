//! Guardrails: checks on what goes in, what comes out and what runs.
//!
//! A guard is a check the loop asks at one of four points, and whose
//! verdict it acts on:
//!
//! | point | checks | verdicts |
//! |---|---|---|
//! | [`Input`] | the user's message, before it enters the history, or [beside the first request](Guards::input_beside) | allow, replace the text, block with an answer for the user, stop |
//! | [`Output`] | the final answer (a typed turn's too, before it is parsed) | allow, replace, retry with feedback (at most [`Guards::max_retries`] times), stop |
//! | [`ToolInput`] | a tool call, before the approval prompt and before the tool runs | allow, reject with a message the model sees, stop |
//! | [`ToolOutput`] | a tool's result, before it enters the history | allow, replace (redact), stop |
//!
//! Hand them to the agent in one [`Guards`] value
//! ([`Configurator::guards`](crate::Configurator::guards)). A closure is a
//! guard, and so is any type implementing the point's trait.
//!
//! # Examples
//!
//! ```
//! use pikuri::Agent;
//! use pikuri::guard::{Guards, InputVerdict, Redactor};
//! use pikuri::testing::{FakeServer, Reply};
//!
//! let server = FakeServer::start();
//! server.push(Reply::text("Write to jo@example.com"));
//! let guards = Guards::new()
//!     .input("no-homework", |text: &str| {
//!         if text.contains("homework") {
//!             InputVerdict::Block("I can't do your homework.".into())
//!         } else {
//!             InputVerdict::Allow
//!         }
//!     })
//!     .output("redact", Redactor::new());
//! let mut agent = Agent::builder(server.transport()).guards(guards).build()?;
//! let blocked = agent.run_loop("do my homework")?;
//! assert_eq!(blocked.answer.as_deref(), Some("I can't do your homework."));
//! let outcome = agent.run_loop("who do I write to?")?;
//! assert_eq!(outcome.answer.as_deref(), Some("Write to [redacted email]"));
//! assert_eq!(server.chat_requests().len(), 1); // the blocked message cost no request
//! # Ok::<(), pikuri::Error>(())
//! ```
//!
//! # Chaining
//!
//! The guards of one point run in the order they were added. A replace
//! hands the new text to the next guard (a redactor first cleans what the
//! later guards see); any other verdict but allow ends the chain.
//!
//! # Failures are stops
//!
//! Each guard runs on a thread of its own, bounded by
//! [`Guards::timeout`]. A guard that panics, returns an error or overruns
//! the bound stops the run ([`Error::Guardrail`](crate::Error::Guardrail)
//! naming it), never a silent allow. A guard that overruns is left to
//! finish on its thread; its verdict is dropped. Such a thread is busy
//! until the guard returns, so at most 64 checks of the whole process may
//! run on past their bound (or a cancel): while that many still run, a
//! new check is not started and stops its run the same way.
//!
//! The host's [`Cancellable`] ends the wait for a
//! guard at once: the run stops with
//! [`Error::Cancelled`](crate::Error::Cancelled) (no guard event: the host
//! stopped it, not the guard), and a [`Judge`]'s request in flight is cut
//! by the same token. A [`Judge`]'s requests count in the run's budget
//! ([Budgets](Judge#budgets)).
//!
//! # Events and stops
//!
//! Every verdict but allow is an [`Event::Guard`](crate::Event::Guard)
//! (a replace's event carries no text: it may be the secret). A block ends
//! the run with [`StopReason::Guardrail`](crate::StopReason::Guardrail) and
//! the block's answer as [`Outcome::answer`](crate::Outcome::answer); a
//! stop ends it with [`Error::Guardrail`](crate::Error::Guardrail), whose
//! fields name the guard and the reason, and the run's
//! [`Event::Stopped`](crate::Event::Stopped) says
//! [`StopReason::Guardrail`](crate::StopReason::Guardrail).
//!
//! # What the history holds
//!
//! After each trip the history is valid and the next
//! [`run_loop`](crate::Agent::run_loop) goes on as usual:
//!
//! | trip | the history holds |
//! |---|---|
//! | input replace | the replaced text as the user message |
//! | input block | the user message (after any replace), then the block's answer as an assistant message; no request was sent |
//! | input stop | the user message as `[withheld by guard <name>]` (so neither the history nor the journal keeps it); no request was sent |
//! | input block beside the request | the user message, then the block's answer; nothing of the request it cut |
//! | input stop beside the request | the user message as `[withheld by guard <name>]`; nothing of the request it cut |
//! | output replace | the replaced answer |
//! | output retry | the rejected answer, then the feedback as a user message, then the next answer (each retry adds one pair) |
//! | output stop | the turn up to the answer, without it (as after a cancel) |
//! | tool input reject | the call, answered with the guard's message |
//! | tool input stop | the call and every call after it in the batch answered `Error: not run: stopped by a guard` |
//! | tool output replace | the call, answered with the replaced text |
//! | tool output stop | the call answered `Error: withheld by guard <name>`; the rest of the batch answered "not run" as above |
//!
//! # Differences from the events
//!
//! The guards see whole texts, after the fact: a streamed answer's
//! [`Event::AssistantDelta`](crate::Event::AssistantDelta)s and its
//! [`Event::Assistant`](crate::Event::Assistant) show the text before
//! the output guards ran. When the answer must be guarded on screen too,
//! hold it back with [`Guards::hold_deltas`] (no text deltas; the
//! `Assistant` event after the output guards, with what they let through),
//! or render the [`Outcome`](crate::Outcome). [`Event::ToolResult`](crate::Event::ToolResult)
//! carries the guarded result.
//!
//! # Sub-agents
//!
//! Guards are the agent's own: sub-agents, the synthesizer and the
//! compactor run without them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::ToolCall;
use crate::control::{CancelHook, Cancellable};

mod bounded;
pub(crate) use bounded::hand_over;
mod judge;
mod point;
mod redact;
mod shape;

pub(crate) use bounded::{Scope, Spender};
pub use judge::Judge;
pub(crate) use point::NOT_RUN;
pub use point::{Action, Point};
pub use redact::Redactor;
pub use shape::Shape;

/// What a guard returns when it fails (any error converts with `?`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The time a guard gets when [`Guards::timeout`] sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The retries an output guard gets when [`Guards::max_retries`] sets none.
const DEFAULT_RETRIES: u32 = 2;

/// An [`Input`] guard's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputVerdict {
    /// Let the message in as it is.
    Allow,
    /// Let this text in instead.
    Replace(String),
    /// Answer the user with this text; the model is not asked.
    Block(String),
    /// Stop the run, for this reason; the message does not enter.
    Stop(String),
}

/// An [`Output`] guard's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputVerdict {
    /// Let the answer through.
    Allow,
    /// Keep this text as the answer instead.
    Replace(String),
    /// Ask the model again, with this feedback as a user message.
    Retry(String),
    /// Stop the run, for this reason; the answer does not enter.
    Stop(String),
}

/// A [`ToolInput`] guard's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolInputVerdict {
    /// Let the call go on to the approval and the tool.
    Allow,
    /// Do not run it; the model gets this message as its result.
    Reject(String),
    /// Stop the run, for this reason.
    Stop(String),
}

/// A [`ToolOutput`] guard's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolOutputVerdict {
    /// Let the result in.
    Allow,
    /// Let this text in instead (a redaction).
    Replace(String),
    /// Stop the run, for this reason; the result does not enter.
    Stop(String),
}

/// Checks the user's message. A closure `Fn(&str) -> InputVerdict` is one.
///
/// # Thread safety
///
/// Each check runs on a guard thread (that is how its time is bounded;
/// the threads are kept), unless the guard says it may run
/// [`inline`](Input::inline), hence `Send + Sync + 'static`.
pub trait Input: Send + Sync + 'static {
    /// The verdict on `text`; an error stops the run.
    ///
    /// # Errors
    ///
    /// Whatever kept the guard from deciding (a judge's failed request).
    fn check(&self, text: &str) -> Result<InputVerdict, BoxError>;

    /// Whether the check may run on the loop's own thread, unbounded in
    /// time and outside the run's budget and cancel: for a check that
    /// cannot hang and asks no model (pure and linear in its input, as
    /// [`Redactor`] and [`Shape`] are), which then costs one call and no
    /// thread hand-off. False by default (closures too): the check runs on
    /// a guard thread, bounded by [`Guards::timeout`]. A panic is a stop
    /// either way.
    fn inline(&self) -> bool {
        false
    }
}

/// Checks the final answer. A closure `Fn(&str) -> OutputVerdict` is one.
///
/// Threads as for [`Input`].
pub trait Output: Send + Sync + 'static {
    /// The verdict on `answer`; an error stops the run.
    ///
    /// # Errors
    ///
    /// Whatever kept the guard from deciding.
    fn check(&self, answer: &str) -> Result<OutputVerdict, BoxError>;

    /// Whether the check may run on the loop's own thread, unbounded in
    /// time and outside the run's budget and cancel: for a check that
    /// cannot hang and asks no model (pure and linear in its input, as
    /// [`Redactor`] and [`Shape`] are), which then costs one call and no
    /// thread hand-off. False by default (closures too): the check runs on
    /// a guard thread, bounded by [`Guards::timeout`]. A panic is a stop
    /// either way.
    fn inline(&self) -> bool {
        false
    }
}

/// Checks a tool call before the approval prompt. A closure
/// `Fn(&ToolCall) -> ToolInputVerdict` is one.
///
/// Threads as for [`Input`].
pub trait ToolInput: Send + Sync + 'static {
    /// The verdict on `call` (its arguments as the model wrote them); an
    /// error stops the run.
    ///
    /// # Errors
    ///
    /// Whatever kept the guard from deciding.
    fn check(&self, call: &ToolCall) -> Result<ToolInputVerdict, BoxError>;

    /// Whether the check may run on the loop's own thread, unbounded in
    /// time and outside the run's budget and cancel: for a check that
    /// cannot hang and asks no model (pure and linear in its input, as
    /// [`Redactor`] and [`Shape`] are), which then costs one call and no
    /// thread hand-off. False by default (closures too): the check runs on
    /// a guard thread, bounded by [`Guards::timeout`]. A panic is a stop
    /// either way.
    fn inline(&self) -> bool {
        false
    }
}

/// Checks a tool's result before it enters the history. A closure
/// `Fn(&ToolCall, &str) -> ToolOutputVerdict` is one.
///
/// Threads as for [`Input`].
pub trait ToolOutput: Send + Sync + 'static {
    /// The verdict on `output`, the result of `call`; an error stops the
    /// run.
    ///
    /// # Errors
    ///
    /// Whatever kept the guard from deciding.
    fn check(&self, call: &ToolCall, output: &str) -> Result<ToolOutputVerdict, BoxError>;

    /// Whether the check may run on the loop's own thread, unbounded in
    /// time and outside the run's budget and cancel: for a check that
    /// cannot hang and asks no model (pure and linear in its input, as
    /// [`Redactor`] and [`Shape`] are), which then costs one call and no
    /// thread hand-off. False by default (closures too): the check runs on
    /// a guard thread, bounded by [`Guards::timeout`]. A panic is a stop
    /// either way.
    fn inline(&self) -> bool {
        false
    }
}

impl<F: Fn(&str) -> InputVerdict + Send + Sync + 'static> Input for F {
    fn check(&self, text: &str) -> Result<InputVerdict, BoxError> {
        Ok(self(text))
    }
}

impl<F: Fn(&str) -> OutputVerdict + Send + Sync + 'static> Output for F {
    fn check(&self, answer: &str) -> Result<OutputVerdict, BoxError> {
        Ok(self(answer))
    }
}

impl<F: Fn(&ToolCall) -> ToolInputVerdict + Send + Sync + 'static> ToolInput for F {
    fn check(&self, call: &ToolCall) -> Result<ToolInputVerdict, BoxError> {
        Ok(self(call))
    }
}

impl<F: Fn(&ToolCall, &str) -> ToolOutputVerdict + Send + Sync + 'static> ToolOutput for F {
    fn check(&self, call: &ToolCall, output: &str) -> Result<ToolOutputVerdict, BoxError> {
        Ok(self(call, output))
    }
}

/// A guard with the name it was added under.
struct Named<G: ?Sized> {
    name: Arc<str>,
    guard: Arc<G>,
    /// The guard's [`Input::inline`] (or its point's twin).
    inline: bool,
}

impl<G: ?Sized> Clone for Named<G> {
    fn clone(&self) -> Self {
        Named {
            name: Arc::clone(&self.name),
            guard: Arc::clone(&self.guard),
            inline: self.inline,
        }
    }
}

/// The guards of one agent, per point, in order
/// ([`Configurator::guards`](crate::Configurator::guards)). See the
/// [module docs](self) for what the loop does with each verdict.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use pikuri::guard::{Guards, Shape, ToolInputVerdict};
///
/// let guards = Guards::new()
///     .tool_input("no-rm", |call: &pikuri::ToolCall| {
///         if call.arguments.contains("rm -rf") {
///             ToolInputVerdict::Reject("Error: refused by policy".into())
///         } else {
///             ToolInputVerdict::Allow
///         }
///     })
///     .output("short", Shape::new().max_chars(2000))
///     .timeout(Duration::from_secs(5));
/// assert!(!guards.is_empty());
/// ```
#[derive(Clone)]
pub struct Guards {
    input: Vec<Named<dyn Input>>,
    beside: Vec<Named<dyn Input>>,
    output: Vec<Named<dyn Output>>,
    tool_input: Vec<Named<dyn ToolInput>>,
    tool_output: Vec<Named<dyn ToolOutput>>,
    timeout: Duration,
    max_retries: u32,
    hold: bool,
}

impl Default for Guards {
    fn default() -> Self {
        Guards::new()
    }
}

impl fmt::Debug for Guards {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guards")
            .field("input", &names_of(&self.input))
            .field("beside", &names_of(&self.beside))
            .field("output", &names_of(&self.output))
            .field("tool_input", &names_of(&self.tool_input))
            .field("tool_output", &names_of(&self.tool_output))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("hold_deltas", &self.hold)
            .finish()
    }
}

fn names_of<G: ?Sized>(list: &[Named<G>]) -> Vec<&str> {
    list.iter().map(|n| &*n.name).collect()
}

impl Guards {
    /// No guards, a 60 s bound per guard, 2 retries for an output guard.
    pub fn new() -> Guards {
        Guards {
            input: Vec::new(),
            beside: Vec::new(),
            output: Vec::new(),
            tool_input: Vec::new(),
            tool_output: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            max_retries: DEFAULT_RETRIES,
            hold: false,
        }
    }

    /// Add an [`Input`] guard, after those added before.
    #[must_use]
    pub fn input(mut self, name: impl Into<String>, guard: impl Input) -> Guards {
        let inline = guard.inline();
        self.input.push(named(name, Arc::new(guard), inline));
        self
    }

    /// Add an [`Input`] guard that runs beside the turn's first request,
    /// on its own thread, after the other input guards allowed the
    /// message: a guard that allows adds no wall time. When it blocks or
    /// stops, the request in flight is cut at once, and nothing of it
    /// enters the history (its deltas may have reached the listeners);
    /// a stopped message is withheld as with the other input guards. Its
    /// verdict is awaited before the first answer is used, so no tool of
    /// that answer runs before it. A replace from it is a stop: the
    /// request has gone with the text. Guards beside the request chain in
    /// order like the others, on one thread.
    #[must_use]
    pub fn input_beside(mut self, name: impl Into<String>, guard: impl Input) -> Guards {
        let inline = guard.inline();
        self.beside.push(named(name, Arc::new(guard), inline));
        self
    }

    /// Add an [`Output`] guard, after those added before.
    #[must_use]
    pub fn output(mut self, name: impl Into<String>, guard: impl Output) -> Guards {
        let inline = guard.inline();
        self.output.push(named(name, Arc::new(guard), inline));
        self
    }

    /// Add a [`ToolInput`] guard, after those added before.
    #[must_use]
    pub fn tool_input(mut self, name: impl Into<String>, guard: impl ToolInput) -> Guards {
        let inline = guard.inline();
        self.tool_input.push(named(name, Arc::new(guard), inline));
        self
    }

    /// Add a [`ToolOutput`] guard, after those added before.
    #[must_use]
    pub fn tool_output(mut self, name: impl Into<String>, guard: impl ToolOutput) -> Guards {
        let inline = guard.inline();
        self.tool_output.push(named(name, Arc::new(guard), inline));
        self
    }

    /// The time each guard gets per check (60 s unless set); one that
    /// takes longer stops the run.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Guards {
        self.timeout = timeout;
        self
    }

    /// How often the output guards may send the model back with their
    /// feedback in one run (2 unless set); one retry more is a stop.
    #[must_use]
    pub fn max_retries(mut self, n: u32) -> Guards {
        self.max_retries = n;
        self
    }

    /// Hold the answer back from the listeners until the output guards
    /// passed it (off unless set): with output guards, a streamed answer's
    /// text deltas ([`Event::AssistantDelta`](crate::Event::AssistantDelta))
    /// are not emitted (nor a cancelled answer's text, in
    /// [`Event::Cancelled`](crate::Event::Cancelled)), and a final answer's
    /// [`Event::Assistant`](crate::Event::Assistant) comes after the
    /// output guards, with the text they let through (replaced, if they
    /// replaced it); an answer they send back or stop is never shown.
    /// Reasoning deltas and a tool-calling answer's text are shown as
    /// usual. The cost: the answer no longer appears as it streams.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, Event};
    /// use pikuri::guard::{Guards, Redactor};
    /// use pikuri::listeners::InMemoryEventList;
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::text("Write to jo@example.com").with_chunk_chars(4));
    /// let seen = InMemoryEventList::new();
    /// let guards = Guards::new().output("redact", Redactor::new()).hold_deltas(true);
    /// let mut agent = Agent::builder(server.transport())
    ///     .streaming(true)
    ///     .guards(guards)
    ///     .add_listener(seen.clone())
    ///     .build()?;
    /// agent.run_loop("who do I write to?")?;
    /// let shown: Vec<String> = seen.events().into_iter().filter_map(|e| match e {
    ///     Event::AssistantDelta { content, .. } | Event::Assistant { content, .. } => Some(content),
    ///     _ => None,
    /// }).collect();
    /// assert_eq!(shown, ["Write to [redacted email]"]);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    #[must_use]
    pub fn hold_deltas(mut self, hold: bool) -> Guards {
        self.hold = hold;
        self
    }

    /// Whether no guard was added.
    pub fn is_empty(&self) -> bool {
        self.input.is_empty()
            && self.beside.is_empty()
            && self.output.is_empty()
            && self.tool_input.is_empty()
            && self.tool_output.is_empty()
    }

    /// The retries allowed per run.
    pub(crate) fn retries(&self) -> u32 {
        self.max_retries
    }
}

fn named<G: ?Sized>(name: impl Into<String>, guard: Arc<G>, inline: bool) -> Named<G> {
    Named {
        name: name.into().into(),
        guard,
        inline,
    }
}

// ------------------------------------------------------------ the chains

/// How a chain ended, when not every guard allowed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Trip {
    /// The guard that decided.
    pub(crate) guard: Arc<str>,
    pub(crate) action: Action,
    /// The guard's text (block answer, feedback, reject message, reason).
    pub(crate) detail: String,
}

/// One verdict in the shape every chain reads.
enum Step {
    Allow,
    Replace(String),
    End(Action, String),
}

impl From<InputVerdict> for Step {
    fn from(v: InputVerdict) -> Step {
        match v {
            InputVerdict::Allow => Step::Allow,
            InputVerdict::Replace(t) => Step::Replace(t),
            InputVerdict::Block(t) => Step::End(Action::Block, t),
            InputVerdict::Stop(t) => Step::End(Action::Stop, t),
        }
    }
}

impl From<OutputVerdict> for Step {
    fn from(v: OutputVerdict) -> Step {
        match v {
            OutputVerdict::Allow => Step::Allow,
            OutputVerdict::Replace(t) => Step::Replace(t),
            OutputVerdict::Retry(t) => Step::End(Action::Retry, t),
            OutputVerdict::Stop(t) => Step::End(Action::Stop, t),
        }
    }
}

impl From<ToolInputVerdict> for Step {
    fn from(v: ToolInputVerdict) -> Step {
        match v {
            ToolInputVerdict::Allow => Step::Allow,
            ToolInputVerdict::Reject(t) => Step::End(Action::Reject, t),
            ToolInputVerdict::Stop(t) => Step::End(Action::Stop, t),
        }
    }
}

impl From<ToolOutputVerdict> for Step {
    fn from(v: ToolOutputVerdict) -> Step {
        match v {
            ToolOutputVerdict::Allow => Step::Allow,
            ToolOutputVerdict::Replace(t) => Step::Replace(t),
            ToolOutputVerdict::Stop(t) => Step::End(Action::Stop, t),
        }
    }
}

/// What a chain reports as it runs: every verdict but allow, in order
/// (`emit(guard, action, detail)`; a replace has an empty detail).
pub(crate) type Report<'a> = &'a mut dyn FnMut(&str, Action, &str);

impl Guards {
    /// Run the input chain on `text` (replaced in place).
    pub(crate) fn check_input(
        &self,
        text: &mut String,
        scope: &Scope,
        report: Report<'_>,
    ) -> Option<Trip> {
        self.chain(&self.input, text, scope, report, |g, t| {
            g.check(&t).map(Step::from)
        })
    }

    /// Run the chain beside the request on `text`: a replace is a stop.
    pub(crate) fn check_beside(
        &self,
        text: &str,
        scope: &Scope,
        report: Report<'_>,
    ) -> Option<Trip> {
        let mut text = text.to_string();
        let mut replaced = None;
        let trip = self.chain(
            &self.beside,
            &mut text,
            scope,
            &mut |g, a, d| {
                if a == Action::Replace {
                    replaced = Some(Arc::<str>::from(g));
                } else {
                    report(g, a, d);
                }
            },
            |g, t| g.check(&t).map(Step::from),
        );
        match (trip, replaced) {
            (Some(trip), _) => Some(trip),
            (None, Some(guard)) => {
                let detail = "a guard beside the request cannot replace the text".to_string();
                report(&guard, Action::Stop, &detail);
                Some(Trip {
                    guard,
                    action: Action::Stop,
                    detail,
                })
            }
            (None, None) => None,
        }
    }

    /// Whether guards run beside the first request.
    pub(crate) fn has_beside(&self) -> bool {
        !self.beside.is_empty()
    }

    /// Run the output chain on `answer` (replaced in place).
    pub(crate) fn check_output(
        &self,
        answer: &mut String,
        scope: &Scope,
        report: Report<'_>,
    ) -> Option<Trip> {
        self.chain(&self.output, answer, scope, report, |g, t| {
            g.check(&t).map(Step::from)
        })
    }

    /// Run the tool input chain on `call`.
    pub(crate) fn check_tool_input(
        &self,
        call: &ToolCall,
        scope: &Scope,
        report: Report<'_>,
    ) -> Option<Trip> {
        // The chain's text is unused: no tool input verdict replaces.
        let mut unused = String::new();
        let call = Arc::new(call.clone());
        self.chain(&self.tool_input, &mut unused, scope, report, move |g, _| {
            g.check(&call).map(Step::from)
        })
    }

    /// Run the tool output chain on `output`, the result of `call`
    /// (replaced in place).
    pub(crate) fn check_tool_output(
        &self,
        call: &ToolCall,
        output: &mut String,
        scope: &Scope,
        report: Report<'_>,
    ) -> Option<Trip> {
        let call = Arc::new(call.clone());
        self.chain(&self.tool_output, output, scope, report, move |g, t| {
            g.check(&call, &t).map(Step::from)
        })
    }

    /// Whether a point has guards (so the loop pays nothing otherwise).
    pub(crate) fn has(&self, point: Point) -> bool {
        match point {
            Point::Input => !self.input.is_empty(),
            Point::Output => !self.output.is_empty(),
            Point::ToolInput => !self.tool_input.is_empty(),
            Point::ToolOutput => !self.tool_output.is_empty(),
        }
    }

    /// The guards of one point in order: each on its own bounded thread,
    /// a replace feeding the next, any other verdict but allow ending it.
    fn chain<G: ?Sized + Send + Sync + 'static>(
        &self,
        list: &[Named<G>],
        text: &mut String,
        scope: &Scope,
        report: Report<'_>,
        check: impl Fn(&G, String) -> Result<Step, BoxError> + Clone + Send + 'static,
    ) -> Option<Trip> {
        for n in list {
            let guard = Arc::clone(&n.guard);
            let input = text.clone();
            let check = check.clone();
            let step = if n.inline {
                bounded::run_inline(move || check(&guard, input))
            } else {
                bounded::run(self.timeout, scope, move || check(&guard, input))
            };
            let (action, detail) = match step {
                Ok(Step::Allow) => continue,
                Ok(Step::Replace(t)) => {
                    report(&n.name, Action::Replace, "");
                    *text = t;
                    continue;
                }
                Ok(Step::End(action, detail)) => (action, detail),
                // The host's cancel: the loop stops with it, unreported.
                Err(bounded::NoVerdict::Cancelled) => {
                    return Some(Trip {
                        guard: Arc::clone(&n.name),
                        action: Action::Stop,
                        detail: "cancelled".into(),
                    });
                }
                // A guard that could not decide is a stop.
                Err(bounded::NoVerdict::Failed(why)) => (Action::Stop, why),
            };
            report(&n.name, action, &detail);
            return Some(Trip {
                guard: Arc::clone(&n.name),
                action,
                detail,
            });
        }
        None
    }
}

// ------------------------------------------------------------ the agent's state

/// An agent's guards and what their verdicts left for a later boundary
/// (the loop's side is `agent/guarded.rs`).
#[derive(Debug, Default)]
pub(crate) struct Guarding {
    /// None when the host set no guard: every hook returns at once.
    pub(crate) guards: Option<Arc<Guards>>,
    /// A verdict the next boundary acts on.
    pub(crate) pending: Option<Pending>,
    /// The output retries of the current run.
    pub(crate) retries: u32,
    /// The input guards running beside the turn's first request.
    pub(crate) beside: Option<Beside>,
}

/// Input guards running beside a request: their verdict to come, and the
/// token that cuts the request when they trip.
pub(crate) struct Beside {
    /// The chain's trip, and what it reported on the way.
    pub(crate) verdict: crossbeam_channel::Receiver<(Option<Trip>, Vec<Reported>)>,
    /// The request's own token: the guard thread cancels it on a trip; the
    /// host's token cancels it too, through `_hook`.
    pub(crate) cancel: Cancellable,
    pub(crate) _hook: Option<CancelHook>,
}

impl fmt::Debug for Beside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Beside").finish_non_exhaustive()
    }
}

/// One verdict a chain reported: guard, action, detail.
pub(crate) type Reported = (Arc<str>, Action, String);

/// A verdict one boundary took and a later one acts on.
#[derive(Debug)]
pub(crate) enum Pending {
    /// An input guard's answer, for the user message just appended.
    Block { guard: Arc<str>, answer: String },
    /// An output guard's feedback, for the answer just appended.
    Retry(String),
    /// A stop (an input guard's, or a tool output guard's in a batch).
    Stop(crate::Error),
}

impl Guarding {
    pub(crate) fn new(guards: Option<Arc<Guards>>) -> Guarding {
        Guarding {
            guards,
            pending: None,
            retries: 0,
            beside: None,
        }
    }

    /// Whether the answer is held back until the output guards passed it
    /// ([`Guards::hold_deltas`] with output guards).
    pub(crate) fn holds(&self) -> bool {
        self.guards
            .as_ref()
            .is_some_and(|g| g.hold && g.has(Point::Output))
    }

    /// The guards, when `point` has any.
    pub(crate) fn at(&self, point: Point) -> Option<Arc<Guards>> {
        self.guards
            .as_ref()
            .filter(|g| g.has(point))
            .map(Arc::clone)
    }

    /// A new run: nothing pending, no retry used.
    pub(crate) fn reset(&mut self) {
        self.pending = None;
        self.retries = 0;
        self.beside = None;
    }

    /// The token of a request that guards run beside, while they do.
    pub(crate) fn cancel(&self) -> Option<&Cancellable> {
        self.beside.as_ref().map(|b| &b.cancel)
    }
}

impl Trip {
    /// The run's error for this trip (a stop, or retries used up).
    pub(crate) fn stop(self) -> crate::Error {
        crate::Error::Guardrail {
            guard: self.guard.to_string(),
            reason: self.detail,
        }
    }
}

#[cfg(test)]
mod tests;
