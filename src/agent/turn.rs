//! One turn, in one place: the loop driver. Each boundary of the [turn
//! diagram](crate::Agent#a-turn) is one method here, in the order a turn
//! meets it:
//!
//! 1. [`turn_start`](Agent::turn_start): the user message enters the
//!    conversation;
//! 2. [`before_request`](Agent::before_request): the cancel check,
//!    injected system messages, compaction when due;
//! 3. [`request`](Agent::request): the request, with fallback transports
//!    and the retry after a context overflow ([`send`](Agent::send) is the
//!    one call on the wire);
//! 4. [`answer`](Agent::answer): the completed message and its events;
//! 5. [`tool_call`](Agent::tool_call), for each call of the answer: the
//!    per-call controls and the approval review;
//! 6. [`after_batch`](Agent::after_batch): what the
//!    [`Interloper`](crate::Interloper) holds;
//! 7. [`turn_end`](Agent::turn_end): the synthesizer on an exhausted
//!    budget, the tally, [`Event::Stopped`], the [`Outcome`].
//!
//! [`rounds`](Agent::rounds) strings 2 to 6 together. The public entry
//! points at the top only choose where a run starts (a new message, a
//! retry, a resume, a typed turn's repair). The controls are read at the
//! points tabled in the crate docs, [Controls](crate#controls), and only
//! here. What each boundary delegates is a type of its own: `Compactor`
//! (`compact.rs`), `Fallbacks` (`fallback.rs`), the approval `Gate`
//! (`approval.rs`), `TypedTurn` (`structured.rs`) and `ToolResultLimit`
//! (`tool_limit.rs`).

use std::borrow::Cow;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::Agent;
use super::approval::{self, Decisions, Gate, NOT_APPROVED, Prepared, Verdict, run_prepared};
use super::child::{self, ChildSpec, child_id};
use super::compact::{Compacted, Compactor, Conversation};
use super::outcome::Outcome;
use super::recover;
use super::structured::{Judged, StructuredOutput, Typed, TypedSpec, TypedTurn};
use crate::approval::Decision;
use crate::journal::{Cut, Record};
use crate::protocol::{Callbacks, Completion, Fragment, Request, RetryNotice, is_sendable};
use crate::tool::JsonSchema;
use crate::{
    ChatTransport, Error, Event, Image, Message, OnExhausted, Result, Role, StopReason, Tool,
    ToolCall,
};

/// Observation for calls left unanswered when the budget ran out.
const NOT_RUN_BUDGET: &str = "Error: not run: step budget exhausted";
/// Observation for calls left unanswered when the run was cancelled.
const NOT_RUN_CANCELLED: &str = "Error: not run: cancelled by the user";
/// Observation, on a journal's resume, for a call that started before the
/// crash and has no result, of a tool not declared idempotent.
const INTERRUPTED: &str = "Error: interrupted: the run stopped while this call ran, so its effect is unknown; it was not run again (the tool is not idempotent)";

/// How the rounds of a run ended (errors aside).
enum End {
    /// The model answered without calling a tool.
    Answered,
    /// An approver deferred a call: the trailing calls await the host.
    Pending,
}

/// One run's state (a turn, a retry, a resume, a typed turn's repair).
#[derive(Default)]
struct Run {
    /// Tool calls made in this run ([`Outcome::steps`]).
    steps: u32,
    /// Reviews each call; holds the host's decisions on a resume.
    gate: Gate,
}

// ------------------------------------------------------------ entry points

impl Agent {
    /// Run one user turn to completion; see the [turn diagram](crate::Agent#a-turn)
    /// for the sequence and the events.
    ///
    /// # Errors
    ///
    /// After any error the history is valid (every tool call answered) and
    /// the agent takes the next turn. What it holds, per error:
    ///
    /// | Error | The history afterwards | To go on |
    /// |---|---|---|
    /// | [`Error::InvalidInput`] (blank message) | unchanged, no event | fix the message |
    /// | [`Error::InvalidInput`] (the agent was [closed](Agent::close)) | unchanged, no event, no request | build a new agent (its listeners are stopped) |
    /// | [`Error::Http`], [`Error::Connect`], [`Error::Transport`], [`Error::Timeout`], [`Error::Protocol`], [`Error::Truncated`] | the user message, then every round completed before the failure (assistant messages, tool results, system injections); nothing of the failed request | [`retry_turn`](Agent::retry_turn): the same question, sent once |
    /// | [`Error::Cancelled`] (after [`Event::Cancelled`]) | as above, plus a "cancelled" observation for each call not run; the text of an answer the cancel cut short is not kept (it is in the event's `partial_answer`) | a new `run_loop`, or `retry_turn` to resume |
    /// | [`Error::StepLimitExceeded`] (under [`OnExhausted::Raise`]) | as above, plus a "not run" observation for each call over budget | `run_loop("continue")` or `retry_turn`: either gets a fresh budget |
    /// | any of these from the synthesizer (under [`OnExhausted::Synthesize`]) | as for the step limit: the synthesizer's own exchange is not part of it | `retry_turn` |
    ///
    /// [`retry_turn`](Agent::retry_turn), [`resume`](Agent::resume),
    /// [`run_typed`](Agent::run_typed) and [`compact`](Agent::compact) refuse
    /// a closed agent the same way.
    ///
    /// Calling `run_loop` again with the same text after a failure sends the
    /// question twice (the first copy is still in the history, unanswered);
    /// [`retry_turn`](Agent::retry_turn) is the way to retry.
    pub fn run_loop(&mut self, user_message: &str) -> Result<Outcome> {
        self.run_turn(Message::user(user_message), None)
    }

    /// Like [`run_loop`](Agent::run_loop), with a user message built by the
    /// host: one with images ([`Message::user_with_images`]). The images
    /// stay in the history; a model that takes none fails the turn with
    /// [`ErrorKind::ImageUnsupported`](crate::ErrorKind::ImageUnsupported).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when `message` is not a user message, or has
    /// neither text nor images. Otherwise as [`run_loop`](Agent::run_loop).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, Image, Message};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::text("A cat."));
    /// let mut agent = Agent::builder(server.transport()).build()?;
    /// let photo = Image::from_bytes(b"GIF89a\x01\0\x01\0\0\0\0;")?;
    /// let outcome = agent.run_loop_message(Message::user_with_images("What is it?", vec![photo]))?;
    /// assert_eq!(outcome.answer.as_deref(), Some("A cat."));
    /// let sent = &server.chat_requests()[0].messages()[0];
    /// assert_eq!(sent["content"][0], serde_json::json!({"type": "text", "text": "What is it?"}));
    /// assert!(sent["content"][1]["image_url"]["url"].as_str().unwrap().starts_with("data:image/gif;base64,"));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn run_loop_message(&mut self, message: Message) -> Result<Outcome> {
        self.run_turn(message, None)
    }

    /// [`run_loop_message`](Agent::run_loop_message) after a switch to
    /// `transport`, as [`run_loop_with`](Agent::run_loop_with) does.
    pub fn run_loop_message_with(
        &mut self,
        message: Message,
        transport: ChatTransport,
    ) -> Result<Outcome> {
        self.run_turn(message, Some(transport))
    }

    /// Like [`run_loop`](Agent::run_loop), but first switch to `transport`
    /// when it differs structurally from the current one: the history
    /// survives, [`Event::ModelSwitched`] then [`Event::ContextCap`] are
    /// emitted and the context window is detected again.
    pub fn run_loop_with(
        &mut self,
        user_message: &str,
        transport: ChatTransport,
    ) -> Result<Outcome> {
        self.run_turn(Message::user(user_message), Some(transport))
    }

    /// Run the latest turn again, from where it failed, without adding the
    /// user's message a second time: after an HTTP error, a timeout or a
    /// cancel, this is the retry that keeps the question once in the history
    /// (calling [`run_loop`](Agent::run_loop) again with the same text would
    /// send it twice).
    ///
    /// The controls are reset as at a turn start (a fresh [`StepLimit`](crate::StepLimit)
    /// budget; the [`Cancellable`](crate::Cancellable) unless this is a child
    /// agent), then the loop continues from the history as it stands: a
    /// round that completed (a tool that ran) is not repeated. No
    /// [`Event::UserTurn`] is emitted (nothing entered the conversation) and
    /// extensions' `on_user_message` hooks do not run again; the turn ends
    /// with [`Event::Stopped`] as every run does. The synthesizer, if it
    /// runs, gets the last user message as the question. The
    /// [`Outcome::steps`] count this run's tool calls only.
    ///
    /// This also resumes a loaded [`History`](crate::History) that ends with
    /// an unanswered user message.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when there is nothing to retry: the
    /// conversation is empty or ends with an assistant message (the last turn
    /// was answered). Otherwise as [`run_loop`](Agent::run_loop).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, HttpConfig};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::status(503, "loading model"));
    /// let mut agent = Agent::builder(server.transport())
    ///     .http(HttpConfig::default().with_max_retries(0))
    ///     .build()?;
    /// assert_eq!(agent.run_loop("Hello?").unwrap_err().status(), Some(503));
    ///
    /// server.push(Reply::text("Hi!"));
    /// let outcome = agent.retry_turn()?;
    /// assert_eq!(outcome.answer.as_deref(), Some("Hi!"));
    /// // The retried request carries the question once.
    /// let sent = server.chat_requests()[1].messages();
    /// assert_eq!(sent.len(), 1);
    /// assert_eq!(sent[0]["content"], "Hello?");
    /// assert!(agent.retry_turn().is_err()); // answered: nothing to retry
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn retry_turn(&mut self) -> Result<Outcome> {
        self.ensure_open()?;
        match self.messages.last() {
            None => {
                return Err(Error::invalid(
                    "nothing to retry: the conversation is empty",
                ));
            }
            Some(m) if m.role == Role::Assistant => {
                return Err(Error::invalid(
                    "nothing to retry: the conversation ends with an assistant message",
                ));
            }
            Some(_) => {}
        }
        let question = self.last_user_message();
        self.begin_run();
        let mut run = Run::default();
        let result = self.rounds(&mut run);
        self.turn_end(result, run.steps, &question)
    }

    /// Continue a turn that stopped with
    /// [`StopReason::ApprovalPending`](crate::StopReason::ApprovalPending):
    /// apply the host's `decisions` (by call id) to the
    /// [pending calls](Agent::pending_approvals), in call order, then go on
    /// like [`run_loop`](Agent::run_loop) until the model answers.
    ///
    /// A resume is a run of its own: the [`StepLimit`](crate::StepLimit) and
    /// [`Cancellable`](crate::Cancellable) are reset, each resumed call
    /// counts a step and gets its [`Event::ToolCall`] again, the run ends
    /// with [`Event::Stopped`], and the [`Outcome`] counts its own requests.
    /// A pending call without a decision is reviewed by the approver (it may
    /// defer again); [`Decision::Defer`] keeps a call pending.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, History, StopReason};
    /// use pikuri::approval::Decision;
    /// use pikuri::tool::{FnTool, Parameters};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::tool_call("send", serde_json::json!({"to": "bob"})));
    /// server.push(Reply::text("Sent."));
    /// let send = || FnTool::new("send", "Sends mail.",
    ///     Parameters::builder().required_string("to", "Recipient.").build(),
    ///     |args, _| Ok(format!("sent to {}", args["to"].as_str().unwrap()))).state_changing();
    /// let build = || Agent::builder(server.transport())
    ///     .add_tool(send())
    ///     .approver(|_: &pikuri::approval::ApprovalRequest| Decision::Defer)
    ///     .build();
    ///
    /// // A web handler: the turn stops, the history is saved.
    /// let mut agent = build()?;
    /// let outcome = agent.run_loop("mail bob")?;
    /// assert_eq!(outcome.stop_reason, StopReason::ApprovalPending);
    /// let saved = agent.export_history().to_json();
    ///
    /// // Later, maybe in another process: load and decide.
    /// let mut agent = build()?;
    /// agent.load_history(History::parse(&saved)?)?;
    /// let pending = agent.pending_approvals();
    /// assert_eq!(pending[0].tool, "send");
    /// let outcome = agent.resume([(pending[0].call_id.clone(), Decision::Approve)])?;
    /// assert_eq!(outcome.answer.as_deref(), Some("Sent."));
    /// assert_eq!(agent.messages()[2].content, "sent to bob");
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`] when no call is pending, or a decision
    ///   names a call id that is not pending (nothing happens).
    /// - The errors of [`run_loop`](Agent::run_loop).
    pub fn resume<I, S>(&mut self, decisions: I) -> Result<Outcome>
    where
        I: IntoIterator<Item = (S, Decision)>,
        S: Into<String>,
    {
        self.ensure_open()?;
        let pending: Vec<ToolCall> = approval::unanswered(&self.messages)
            .into_iter()
            .cloned()
            .collect();
        if pending.is_empty() {
            return Err(Error::invalid("no tool call awaits approval"));
        }
        let decisions: Decisions = decisions
            .into_iter()
            .map(|(id, d)| (id.into(), d))
            .collect();
        if let Some((id, _)) = decisions
            .iter()
            .find(|(id, _)| !pending.iter().any(|c| &c.id == id))
        {
            return Err(Error::invalid(format!("no pending tool call `{id}`")));
        }
        self.begin_run();
        let question = self.last_user_message();
        let mut run = Run {
            steps: 0,
            gate: Gate::with_decisions(decisions),
        };
        // The paused batch first, as if the turn had never stopped; then
        // the rounds go on from the history.
        let result = match self.tool_batch(&pending, false, &mut run) {
            Ok(End::Answered) => {
                self.after_batch();
                self.rounds(&mut run)
            }
            other => other,
        };
        self.turn_end(result, run.steps, &question)
    }

    /// Finish the run a crash cut off, on an agent built by
    /// [`Configurator::resume`](crate::Configurator::resume) from its
    /// journal (see [`journal`](crate::journal) for the guarantees):
    ///
    /// - a journaled model response is not requested again; a request
    ///   that was in flight (its partial stream dropped) is made again;
    /// - a tool call with a journaled result is not run again;
    /// - a call that started and has no result runs again only when its
    ///   tool is [`idempotent`](crate::Tool::idempotent); any other gets
    ///   the observation `Error: interrupted: ...`;
    /// - a call not started yet is reviewed as usual (a pending approval
    ///   is asked again), then the rounds go on until the model answers.
    ///
    /// A run of its own, as [`retry_turn`](Agent::retry_turn): fresh
    /// controls, [`Event::Stopped`] at the end, its own [`Outcome`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    /// use pikuri::{Agent, Error, Result};
    /// use pikuri::journal::{FileStore, JournalStore, RunLock};
    /// use pikuri::tool::{FnTool, Parameters};
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// /// A store that stops writing once `dead` is set: the journal a
    /// /// crash leaves behind.
    /// struct Dies(FileStore, Arc<AtomicBool>);
    /// impl JournalStore for Dies {
    ///     fn append(&self, run: &str, record: &str) -> Result<()> {
    ///         if self.1.load(Ordering::SeqCst) {
    ///             return Err(Error::JournalIo { run: run.into(), message: "crashed".into() });
    ///         }
    ///         self.0.append(run, record)
    ///     }
    ///     fn read(&self, run: &str) -> Result<Vec<String>> { self.0.read(run) }
    ///     fn runs(&self) -> Result<Vec<String>> { self.0.runs() }
    ///     fn lock(&self, run: &str) -> Result<RunLock> { self.0.lock(run) }
    /// }
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::tool_call("lookup", serde_json::json!({})));
    /// server.push(Reply::text("Done."));
    /// let dir = std::env::temp_dir().join(format!("pikuri-doc-resume-run-{}", std::process::id()));
    /// let store = FileStore::new(&dir)?;
    /// let (dead, runs) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU32::new(0)));
    /// let lookup = {
    ///     let (dead, runs) = (dead.clone(), runs.clone());
    ///     FnTool::new("lookup", "Looks up.", Parameters::empty(), move |_, cx| {
    ///         assert!(cx.idempotency_key().unwrap().starts_with("r/1/"));
    ///         if runs.fetch_add(1, Ordering::SeqCst) == 0 {
    ///             dead.store(true, Ordering::SeqCst); // the process dies mid-tool
    ///         }
    ///         Ok("found".into())
    ///     })
    ///     .idempotent_calls()
    /// };
    /// let build = || Agent::builder(server.transport()).add_tool(lookup.clone());
    ///
    /// let mut agent = build().journal(Dies(store.clone(), dead.clone()), "r").build()?;
    /// assert!(agent.run_loop("Find it").is_err());
    /// drop(agent);
    ///
    /// // The next process: the answer with the call is not asked for again,
    /// // the idempotent call runs again, the rounds go on.
    /// dead.store(false, Ordering::SeqCst);
    /// let mut agent = build().resume(Dies(store.clone(), dead.clone()), "r").build()?;
    /// assert!(agent.interrupted());
    /// assert_eq!(agent.resume_run()?.answer.as_deref(), Some("Done."));
    /// assert_eq!(runs.load(Ordering::SeqCst), 2);
    /// assert_eq!(server.chat_requests().len(), 2);
    /// assert_eq!(agent.messages()[2].content, "found");
    /// # drop(agent);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when nothing was cut off
    /// ([`interrupted`](Agent::interrupted) is false); otherwise as
    /// [`run_loop`](Agent::run_loop).
    pub fn resume_run(&mut self) -> Result<Outcome> {
        self.ensure_open()?;
        let Some(cut) = self.interrupted.take() else {
            return Err(Error::invalid(
                "no interrupted run to resume (the journal ends with a finished run)",
            ));
        };
        self.begin_run();
        let question = self.last_user_message();
        let mut run = Run::default();
        let result = self.resume_cut(&cut, &mut run);
        self.turn_end(result, run.steps, &question)
    }

    /// Run one user turn whose final answer must be a `T`: the answer is
    /// parsed, validated against `T`'s schema and deserialized.
    ///
    /// What is sent, with the agent's [`StructuredOutput`]:
    ///
    /// - The system prompt of every request of the turn ends with a note
    ///   holding `T`'s schema ("Your final answer must be only a JSON
    ///   object matching this JSON Schema, ...").
    /// - In [`StructuredMode::JsonSchema`](crate::structured::StructuredMode::JsonSchema), `response_format: {"type":
    ///   "json_schema", "json_schema": {"name": <T's name>, "strict": true,
    ///   "schema": <T's schema>}}` (`strict` is false when the schema breaks
    ///   strict mode, see [`Parameters::strict_violations`](crate::tool::Parameters::strict_violations)), and to a server
    ///   that looks like Ollama (port 11434 or an `/api` base) `format:
    ///   <schema>`. An agent without tools sends them on every request; an
    ///   agent with tools runs its tool rounds without them (llama.cpp would
    ///   constrain tool-call turns into the schema) unless
    ///   [`with_constrained_tool_rounds`](StructuredOutput::with_constrained_tool_rounds)
    ///   is set, and sends them on the repair requests.
    /// - A synthesized answer ([`OnExhausted::Synthesize`](crate::OnExhausted::Synthesize))
    ///   is typed too: the synthesizer's requests carry the note and the
    ///   `response_format`.
    ///
    /// An answer that does not parse, validate or deserialize goes back to
    /// the model as a user message listing every problem, and the loop runs
    /// again (a *repair*: a run of its own, with a fresh step budget and its
    /// own [`Event::Stopped`]; its message is announced as an
    /// [`Event::UserTurn`] with `mid_loop: true`), at most
    /// [`max_repairs`](StructuredOutput::max_repairs) times. A Markdown code
    /// fence around the JSON is accepted.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidAnswer`] when the last allowed answer is still
    ///   invalid: it carries every problem and the raw answer; the history
    ///   ends with that answer (valid: the next turn works).
    /// - [`Error::InvalidInput`] when `T`'s schema is not an object schema
    ///   (nothing is sent), or when an [`Approver`](crate::approval::Approver) deferred
    ///   a call (the turn paused: the history holds the pending calls as
    ///   after [`run_loop`](Agent::run_loop)).
    /// - Otherwise as [`run_loop`](Agent::run_loop).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, Error};
    /// use pikuri::testing::{FakeServer, Reply};
    /// pikuri::tool::schema_type! {
    ///     /// A sentiment verdict.
    ///     pub struct Verdict {
    ///         /// Whether the text is positive.
    ///         pub positive: bool,
    ///         /// Confidence.
    ///         pub confidence: u8,
    ///     }
    /// }
    /// let server = FakeServer::start();
    /// server.push(Reply::text(r#"{"positive": true, "confidence": 11}"#));
    /// let mut agent = Agent::builder(server.transport()).build()?;
    /// let typed = agent.run_typed::<Verdict>("Is 'I love it' positive?")?;
    /// assert!(typed.value.positive);
    /// assert_eq!(typed.value.confidence, 11);
    /// assert_eq!(typed.repairs, 0);
    /// let body = server.chat_requests()[0].body.clone().unwrap();
    /// assert_eq!(body["response_format"]["json_schema"]["name"], "Verdict");
    /// assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    ///
    /// // An answer that stays invalid: a repair, then the typed error.
    /// server.push(Reply::text("yes"));
    /// server.push(Reply::text(r#"{"positive": "yes"}"#));
    /// server.push(Reply::text(r#"{"positive": 1, "confidence": -1}"#));
    /// match agent.run_typed::<Verdict>("And 'meh'?") {
    ///     Err(Error::InvalidAnswer { problems, raw }) => {
    ///         assert_eq!(problems.len(), 2);
    ///         assert_eq!(raw, r#"{"positive": 1, "confidence": -1}"#);
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn run_typed<T: JsonSchema + DeserializeOwned>(
        &mut self,
        user_message: &str,
    ) -> Result<Typed<T>> {
        let settings = self.options.structured.clone();
        self.run_typed_with(user_message, &settings)
    }

    /// Like [`run_typed`](Agent::run_typed), with `settings` instead of the
    /// agent's for this turn.
    ///
    /// ```
    /// use pikuri::{Agent};
    /// use pikuri::structured::{StructuredMode, StructuredOutput};
    /// use pikuri::testing::{FakeServer, Reply};
    /// pikuri::tool::schema_type! {
    ///     /// A count.
    ///     pub struct Count { /// How many.
    ///         pub n: u32 }
    /// }
    /// let server = FakeServer::start();
    /// server.push(Reply::text("```json\n{\"n\": 3}\n```"));
    /// let mut agent = Agent::builder(server.transport()).build()?;
    /// let prompt = StructuredOutput::default().with_mode(StructuredMode::Prompt);
    /// let typed = agent.run_typed_with::<Count>("How many?", &prompt)?;
    /// assert_eq!(typed.value.n, 3);
    /// let body = server.chat_requests()[0].body.clone().unwrap();
    /// assert!(body.get("response_format").is_none());
    /// assert!(body["messages"][0]["content"].as_str().unwrap().contains(r#""n""#));
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`run_typed`](Agent::run_typed).
    pub fn run_typed_with<T: JsonSchema + DeserializeOwned>(
        &mut self,
        user_message: &str,
        settings: &StructuredOutput,
    ) -> Result<Typed<T>> {
        self.ensure_open()?;
        let mut turn = TypedTurn::new::<T>(settings)?;
        // llama.cpp (and other grammar-constrained servers) force every
        // message of a request with `response_format` into the schema,
        // tool calls included: an agent with tools runs its tool rounds
        // unconstrained unless the settings say the server allows both.
        let has_tools = !self.shared.state.lock().tools.is_empty();
        let constrain = !has_tools || settings.constrains_tool_rounds();
        let saved = (Arc::clone(&self.options), self.system_prompt.clone());
        turn.spec().append_note(&mut self.system_prompt);
        // Kept for the synthesizer, should the budget run out.
        Arc::make_mut(&mut self.options).typed = Some(Arc::clone(turn.spec()));
        if constrain {
            self.constrain(turn.spec());
        }
        let result = self.typed_turn::<T>(user_message, &mut turn);
        (self.options, self.system_prompt) = saved;
        result
    }

    /// Compact the conversation now, whatever the estimate: the older turns
    /// are summarized or dropped as the configured
    /// [`Compaction`](crate::compaction::Compaction) says ([`Compaction::summarize`](crate::compaction::Compaction::summarize)
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
    /// The summary request counts in [`total_usage`](Agent::total_usage)
    /// (a compaction during a turn counts in that turn's
    /// [`Outcome::usage`](crate::Outcome::usage) too).
    ///
    /// # Errors
    ///
    /// The summary request's error ([`Error::Cancelled`], HTTP, transport),
    /// or a summary the [bounds](crate::compaction::Compaction#the-summary)
    /// refuse; the history is unchanged.
    pub fn compact(&mut self) -> Result<bool> {
        self.ensure_open()?;
        let done = self.compacting(Compactor::now);
        // Outside a run nothing settles the tally the compactor's child
        // added to: settle it here, or the next run's start clears it.
        let tally = self.shared.settle_tally();
        self.total_usage += tally.usage;
        self.shared.listeners.flush();
        done
    }
}

// ------------------------------------------------------------ the boundaries

impl Agent {
    /// A run started by a user message: the boundaries in order.
    fn run_turn(&mut self, message: Message, transport: Option<ChatTransport>) -> Result<Outcome> {
        self.ensure_open()?;
        let user_message = message.content.clone();
        self.turn_start(message, transport)?;
        let mut run = Run::default();
        let result = self.rounds(&mut run);
        self.turn_end(result, run.steps, &user_message)
    }

    /// Boundary 1, turn start: the model switch, fresh controls, the user
    /// message appended and announced, the extensions' hooks.
    fn turn_start(&mut self, message: Message, transport: Option<ChatTransport>) -> Result<()> {
        if message.role != Role::User {
            return Err(Error::invalid(format!(
                "a turn starts with a user message, not a {} message",
                message.role.as_str()
            )));
        }
        // An image alone is a question ("what is this?").
        if message.content.trim().is_empty() && message.images.is_empty() {
            return Err(Error::invalid("user message must not be blank"));
        }
        let user_message = message.content.clone();
        let user_message = user_message.as_str();
        if let Some(t) = transport {
            t.check()?;
            self.apply_transport(t);
        }
        self.begin_run();
        // Calls left pending by a deferred approval get their "not run"
        // answer first: a new message is not a decision, and the request
        // must not carry unanswered calls.
        self.answer_stale_pending();
        self.journal(&Record::User {
            content: user_message.into(),
        })?;
        self.turn_start = self.messages.len();
        self.messages.push(message);
        self.emit(Event::UserTurn {
            agent: self.agent_id(),
            content: user_message.to_string(),
            mid_loop: false,
        });
        let ctx = self.ctx.clone();
        for ext in &mut self.extensions {
            ext.on_user_message(&ctx, user_message);
        }
        Ok(())
    }

    /// What every run (a turn, a retry, a resume, a repair) does first:
    /// fresh controls, a zero tally.
    fn begin_run(&mut self) {
        // The run's events wait for the agent's first wait (`listener::hub`).
        self.shared.listeners.hold();
        self.synth_answer = None;
        self.partial_answer.clear();
        if let Some(s) = &self.step_limit {
            s.reset();
        }
        // A nested agent shares its parent's token: resetting it here would
        // lose a cancel that arrived while the parent spawned it.
        if let Some(c) = self
            .shared
            .cancellable
            .as_ref()
            .filter(|_| !self.options.nested)
        {
            c.reset();
        }
        self.shared.tally.lock().clear();
    }

    /// Boundaries 2 to 6, round after round, until the model answers
    /// without calling a tool (or an approver defers a call).
    fn rounds(&mut self, run: &mut Run) -> Result<End> {
        loop {
            self.before_request()?;
            let completion = self.request()?;
            let (message, truncated) = self.answer(completion);
            // Stored before any of its tools runs: a resume never asks
            // the model for it again.
            self.journal_response(&message, truncated)?;
            if message.tool_calls.is_empty() {
                self.messages.push(message);
                // Input typed while the model answered is a new question in
                // the same turn: one more round answers it.
                if self.after_batch() {
                    continue;
                }
                return Ok(End::Answered);
            }
            let calls = message.tool_calls.clone();
            self.messages.push(message);
            if let End::Pending = self.tool_batch(&calls, truncated, run)? {
                return Ok(End::Pending);
            }
            self.journal_check()?;
            self.after_batch();
        }
    }

    /// Boundary 2, before each request: the cancel check, the system
    /// messages extensions injected since the last request, and compaction
    /// when the estimate says the request would not fit.
    fn before_request(&mut self) -> Result<()> {
        if let Some(c) = &self.shared.cancellable {
            c.check()?;
        }
        // A record an earlier boundary could not store stops the run here.
        self.journal_check()?;
        let pending = std::mem::take(&mut self.shared.state.lock().pending_system);
        for content in &pending {
            self.journal(&Record::System {
                content: content.into(),
            })?;
        }
        self.messages
            .extend(pending.into_iter().map(Message::system));
        self.compacting(Compactor::before_request)?;
        Ok(())
    }

    /// Boundary 3, the request: on a failure worth another server, the
    /// next fallback transport takes the turn over; on a rejection as too
    /// long, one compaction and one retry.
    fn request(&mut self) -> Result<Completion> {
        match self.send_with_fallback() {
            // The server, not the estimate, says the history does not fit:
            // cut it to the current turn and try once more. A second
            // rejection is the error.
            Err(e) if e.is_context_overflow() => {
                if self.compacting(Compactor::after_overflow)? {
                    self.send_with_fallback()
                } else {
                    Err(e)
                }
            }
            other => other,
        }
    }

    /// One request, moved along the fallback list while it fails in a way
    /// another server may not (see `fallback.rs`).
    fn send_with_fallback(&mut self) -> Result<Completion> {
        loop {
            let err = match self.send() {
                Err(e) => e,
                ok => return ok,
            };
            let from = self.transport();
            let Some(to) = self.fallbacks.next(&from, &err) else {
                return Err(err);
            };
            // The agent stays on the fallback for later turns: the primary
            // just failed after its retries, and `run_loop_with` goes back.
            // Not journaled: a resumed agent starts on its primary again,
            // which may be back (and a fallback is another endpoint, which
            // a model name alone would not say).
            self.shared.state.lock().transport = to.clone();
            self.emit(Event::ModelFallback {
                agent: self.agent_id(),
                from,
                to,
                reason: err.to_string(),
            });
            // The probe may wait on the network.
            self.shared.listeners.hand_over();
            self.detect_and_emit_context_cap();
        }
    }

    /// The one call on the wire; deltas become events as they arrive.
    fn send(&mut self) -> Result<Completion> {
        let (transport, tool_specs) = {
            let mut st = self.shared.state.lock();
            (st.transport.clone(), st.tool_specs())
        };
        let note = self.wind_down_note();
        let traceparent = self.options.traceparent.as_ref().and_then(|s| (s.0)());
        let shared = &self.shared;
        let req = Request {
            transport: &transport,
            system: Some(&self.system_prompt),
            messages: &self.messages,
            trailing_system: note.as_deref(),
            tools: &tool_specs,
            stream: shared.streaming,
            replay_reasoning: self.options.replay_reasoning,
            split_think: self.options.split_think,
            extra: &self.options.extra,
            cancel: shared.cancellable.as_ref(),
            traceparent: traceparent.as_deref(),
        };
        let mut buf = std::mem::take(&mut self.buf);
        let agent = &shared.id;
        // What a stream cut short leaves: its text so far (for the
        // `Cancelled` event) and the latest usage a chunk reported.
        let mut partial = String::new();
        let mut partial_usage = None;
        // What the listeners are owed goes to them before the agent waits.
        shared.listeners.hand_over();
        let result = shared.client.chat(
            &req,
            &mut buf,
            &mut Callbacks {
                on_retry: &mut |n: &RetryNotice| {
                    shared.emit(Event::Retrying {
                        agent: Arc::clone(agent),
                        attempt: n.attempt,
                        error: n.error.clone(),
                        wait_ms: u64::try_from(n.wait.as_millis()).unwrap_or(u64::MAX),
                    });
                },
                on_fragment: &mut |f: Fragment<'_>| match f {
                    Fragment::Content(s) if !s.is_empty() => {
                        shared.listeners.emit_delta(agent, false, s);
                        partial.push_str(s);
                    }
                    Fragment::Reasoning(s) if !s.is_empty() => {
                        shared.listeners.emit_delta(agent, true, s);
                    }
                    Fragment::Usage(u) => partial_usage = Some(u),
                    _ => {}
                },
                // So before each read of the stream.
                before_read: &mut || shared.listeners.hand_over(),
            },
        );
        // The agent works on the answer: its events wait for the next wait.
        shared.listeners.hold();
        self.buf = buf;
        if let Err(e) = &result {
            // A failed stream's usage still counts, when a chunk reported
            // it (most servers report it only in the last chunk); the
            // request does not count as completed.
            if let Some(u) = partial_usage {
                self.shared.tally.lock().usage += u;
            }
            // The text the listeners saw before a cancel is not kept in the
            // history (a cancel leaves no partial state there); the
            // `Cancelled` event carries it.
            if e.is_cancelled() {
                self.partial_answer = partial;
            }
        }
        result
    }

    /// When the budget is nearly used up, a note telling the model so.
    fn wind_down_note(&self) -> Option<String> {
        let last = self.options.wind_down?;
        let remaining = self.step_limit.as_ref()?.remaining();
        if remaining > last {
            return None;
        }
        Some(match remaining {
            0 => "Note: the tool-call budget for this turn is used up. Answer now from what you have, without calling tools.".to_string(),
            1 => "Note: 1 tool call remains in this turn's budget. Wrap up: use it only if essential, then answer.".to_string(),
            n => format!("Note: {n} tool calls remain in this turn's budget. Plan to wrap up and answer before they run out."),
        })
    }

    /// Boundary 4, the answer: the request counts in the run's tally; the
    /// message gets its model stamp and the tool calls recovered from its
    /// text, and is announced (`Thinking`, `Assistant`, `Tokens`). Also
    /// whether it was cut at the length limit (a call's arguments may then
    /// be cut too, which its observation says).
    fn answer(&mut self, completion: Completion) -> (Message, bool) {
        self.shared.tally.lock().count(completion.usage);
        let truncated = completion.finish() == crate::FinishReason::Length;
        let Completion {
            mut message,
            usage,
            model,
            ..
        } = completion;
        // Some servers do not name the model in the answer: the one asked
        // for is the one that wrote it.
        let model = model.or_else(|| self.transport().model().map(str::to_string));
        // Recovery only when the server parsed no call: text next to real
        // calls is prose, not a second copy of them.
        if self.options.recover_tool_calls && message.tool_calls.is_empty() {
            let tools = self.tools();
            if let Some((content, calls)) = recover::recover(&message.content, &tools) {
                message.content = content;
                message.tool_calls = calls;
            }
        }
        message.model.clone_from(&model);
        message.usage = usage;
        let agent = self.agent_id();
        if let Some(r) = message.reasoning.as_deref().filter(|r| !r.is_empty()) {
            self.emit(Event::Thinking {
                agent: Arc::clone(&agent),
                content: r.to_string(),
            });
        }
        if !message.content.is_empty() {
            self.emit(Event::Assistant {
                agent: Arc::clone(&agent),
                content: message.content.clone(),
            });
        }
        let u = usage.unwrap_or_default();
        self.emit(Event::Tokens {
            agent,
            input: u.input,
            output: u.output,
            cached: u.cached,
            cache_creation: u.cache_creation,
            thinking: u.thinking,
            model_id: model,
        });
        (message, truncated)
    }

    /// The answer's tool calls, each through [`tool_call`](Agent::tool_call).
    /// Every call gets a tool message, even when the batch stops early,
    /// except the calls left pending by a deferred approval (`End::Pending`).
    fn tool_batch(&mut self, calls: &[ToolCall], truncated: bool, run: &mut Run) -> Result<End> {
        self.tool_batch_resumed(calls, &[], truncated, run)
    }

    /// [`tool_batch`](Self::tool_batch) on a journal's resume: the calls
    /// whose ids are in `interrupted` are not run; they get the
    /// [`INTERRUPTED`] observation in their place in the batch, so the
    /// results stay in call order (parallel mode included).
    fn tool_batch_resumed(
        &mut self,
        calls: &[ToolCall],
        interrupted: &[&str],
        truncated: bool,
        run: &mut Run,
    ) -> Result<End> {
        let tools = self.tools();
        let mut gated: Vec<(&ToolCall, Prepared)> = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            // Neither announced nor ticked again: it was, before the cut.
            let verdict = if interrupted.contains(&call.id.as_str()) {
                Ok(Verdict::Go(Prepared::Done(INTERRUPTED.to_string())))
            } else {
                self.tool_call(&tools, call, truncated, run)
            };
            match verdict {
                Err(e) => {
                    self.stop_batch(gated, call, &calls[i + 1..], interrupted, &e);
                    return Err(e);
                }
                // The calls approved before it still run; it and the rest
                // stay unanswered for the host to decide.
                Ok(Verdict::Defer) => {
                    self.run_gated(gated);
                    return Ok(End::Pending);
                }
                // In parallel mode every call is reviewed first, then the
                // approved ones run together.
                Ok(Verdict::Go(prepared)) if self.options.parallel_tools => {
                    gated.push((call, prepared));
                }
                Ok(Verdict::Go(prepared)) => {
                    let (out, images) = run_prepared(&self.shared, call, prepared);
                    self.answer_call_with(call, out, images, true);
                }
            }
        }
        self.run_gated(gated);
        Ok(End::Answered)
    }

    /// Boundary 5, one tool call: announced ([`Event::ToolCall`], and the
    /// listeners shown it before anyone decides on it), then the per-call
    /// controls in the documented order (`StepLimit::tick`, then
    /// `Cancellable::check`), then the review.
    fn tool_call(
        &mut self,
        tools: &[Arc<dyn Tool>],
        call: &ToolCall,
        truncated: bool,
        run: &mut Run,
    ) -> Result<Verdict> {
        self.emit(Event::ToolCall {
            agent: self.agent_id(),
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: approval::parse_arguments(&call.arguments),
        });
        // The listeners show the call before it is reviewed or run, and
        // get what the tool or the approver emits as it comes.
        self.shared.listeners.hand_over();
        if let Some(s) = &self.step_limit {
            s.tick()?;
        }
        if let Some(c) = &self.shared.cancellable {
            c.check()?;
        }
        run.steps += 1;
        run.gate.review(&self.shared, tools, call, truncated)
    }

    /// A batch stopped at `call` by `err` (the budget or a cancel): every
    /// call not run gets its "not run" observation, so the history stays
    /// valid (a call of `rest` in `interrupted` keeps its "interrupted"
    /// one: it may have run before the cut).
    fn stop_batch(
        &mut self,
        gated: Vec<(&ToolCall, Prepared)>,
        call: &ToolCall,
        rest: &[ToolCall],
        interrupted: &[&str],
        err: &Error,
    ) {
        let note = if err.is_cancelled() {
            NOT_RUN_CANCELLED
        } else {
            NOT_RUN_BUDGET
        };
        // Calls already gated in parallel mode have not run either; a
        // denied one keeps its denial.
        for (c, p) in gated {
            let out = match p {
                Prepared::Done(observation) => observation,
                Prepared::Ready { .. } => note.to_string(),
            };
            self.answer_call(c, out, true);
        }
        self.answer_call(call, note.to_string(), true);
        // The rest were never announced: answered without a ToolResult,
        // except an interrupted one, answered as in a batch not stopped.
        for c in rest {
            if interrupted.contains(&c.id.as_str()) {
                self.answer_call(c, INTERRUPTED.to_string(), true);
            } else {
                self.answer_call(c, note.to_string(), false);
            }
        }
    }

    /// Run the calls gated in parallel mode concurrently; answer in order.
    fn run_gated(&mut self, gated: Vec<(&ToolCall, Prepared)>) {
        if gated.is_empty() {
            return;
        }
        let outputs: Vec<(&ToolCall, (String, Vec<Image>))> = std::thread::scope(|s| {
            let shared = &*self.shared;
            let handles: Vec<_> = gated
                .into_iter()
                .map(|(call, p)| (call, s.spawn(move || run_prepared(shared, call, p))))
                .collect();
            handles
                .into_iter()
                .map(|(call, h)| {
                    let out = h
                        .join()
                        .unwrap_or_else(|_| ("Error: the tool panicked".to_string(), Vec::new()));
                    (call, out)
                })
                .collect()
        });
        for (call, (out, images)) in outputs {
            self.answer_call_with(call, out, images, true);
        }
    }

    /// Append a call's tool message, cut to the [`ToolResultLimit`](crate::compaction::ToolResultLimit);
    /// `emit`: announce it as [`Event::ToolResult`].
    fn answer_call(&mut self, call: &ToolCall, content: String, emit: bool) {
        self.answer_call_with(call, content, Vec::new(), emit);
    }

    /// [`answer_call`](Self::answer_call) with the images the tool attached.
    fn answer_call_with(
        &mut self,
        call: &ToolCall,
        content: String,
        images: Vec<Image>,
        emit: bool,
    ) {
        // The call is done: the agent works again (see `begin_run`).
        self.shared.listeners.hold();
        let content = self.tool_limit.apply(content, self.context_window_cap());
        if emit {
            self.emit(Event::ToolResult {
                agent: self.agent_id(),
                id: call.id.clone(),
                name: call.name.clone(),
                content: content.clone(),
            });
        }
        // A failed write is kept by the journal and stops the run at the
        // batch's end; the history stays valid meanwhile.
        let _ = self.journal(&Record::ToolResult {
            call_id: call.id.as_str().into(),
            content: content.as_str().into(),
            images: images.as_slice().into(),
        });
        let mut answer = Message::tool(call.id.clone(), content);
        answer.images = images;
        self.messages.push(answer);
        // Answered, so the observation now tells the model what was wrong
        // with the arguments: the history keeps `{}` instead of text a
        // strict server would reject in every later request.
        if !is_sendable(&call.arguments) {
            self.repair_arguments(&call.id);
        }
    }

    /// Replace the arguments of the answered call `id` with `{}` in the
    /// assistant message that holds it (searched from the end: it is in the
    /// current round, or a resumed one).
    fn repair_arguments(&mut self, id: &str) {
        let held = self
            .messages
            .iter_mut()
            .rev()
            .flat_map(|m| m.tool_calls.iter_mut())
            .find(|c| c.id == id);
        if let Some(c) = held {
            c.arguments = "{}".to_string();
        }
    }

    /// Boundary 6, after a batch (or an answer): append what the
    /// [`Interloper`](crate::Interloper) holds, each announced as a
    /// mid-loop [`Event::UserTurn`]; true when anything was delivered.
    fn after_batch(&mut self) -> bool {
        // Only here, between whole rounds: a user message must never sit
        // between a tool call and its result.
        let Some(q) = &self.interloper else {
            return false;
        };
        let items = q.drain();
        let delivered = !items.is_empty();
        for content in items {
            // Checked at the next request.
            let _ = self.journal(&Record::User {
                content: content.as_str().into(),
            });
            self.messages.push(Message::user(content.clone()));
            self.emit(Event::UserTurn {
                agent: self.agent_id(),
                content,
                mid_loop: true,
            });
        }
        delivered
    }

    /// Boundary 7, turn end (every run's): the synthesizer on an exhausted
    /// budget, the usage tally (handed to the parent of a child),
    /// `Stopped`, the listener flush, the outcome.
    fn turn_end(&mut self, result: Result<End>, steps: u32, question: &str) -> Result<Outcome> {
        let result = match result {
            Ok(End::Answered) => Ok(StopReason::Completed),
            Ok(End::Pending) => Ok(StopReason::ApprovalPending),
            // The budget is spent but the host asked for an answer anyway:
            // a tools-free child writes it from the evidence.
            Err(Error::StepLimitExceeded { max })
                if self
                    .step_limit
                    .as_ref()
                    .is_some_and(|s| s.on_exhausted() == OnExhausted::Synthesize) =>
            {
                self.synthesize(question, max)
                    .map(|()| StopReason::Synthesized)
            }
            Err(e) => Err(e),
        };
        let ended = match &result {
            Ok(r) => format!("{r:?}"),
            Err(e) => format!("error: {e}"),
        };
        // A run that could not keep its journal fails, even when the model
        // answered: the journal no longer says where the run is.
        let result = match self.journal(&Record::TurnEnd {
            reason: ended.into(),
        }) {
            Err(e) if result.is_ok() => Err(e),
            _ => result,
        };
        let reason = match &result {
            Ok(r) => *r,
            // Announced once, here, after the "cancelled" observations, so
            // a listener sees the cancel where the turn actually ended. A
            // helper child (the synthesizer, the compactor) leaves it to its
            // parent, whose turn the same cancel ends: one `Cancelled` for
            // the one turn the host started.
            Err(Error::Cancelled) => {
                let partial_answer = std::mem::take(&mut self.partial_answer);
                if !self.options.quiet_cancel {
                    self.emit(Event::Cancelled {
                        agent: self.agent_id(),
                        partial_answer,
                    });
                }
                StopReason::Cancelled
            }
            Err(Error::StepLimitExceeded { .. }) => StopReason::StepLimit,
            Err(_) => StopReason::Error,
        };
        self.last_stop = Some(reason);
        let tally = self.shared.settle_tally();
        self.total_usage += tally.usage;
        self.emit(Event::Stopped {
            agent: self.agent_id(),
            reason,
            usage: tally.usage,
        });
        // Every event of the run is handled before the host sees its end.
        self.shared.listeners.flush();
        result.map(|stop_reason| Outcome {
            stop_reason,
            answer: self.last_assistant_content(),
            steps,
            usage: tally.usage,
            requests: tally.requests,
            pending_approvals: if stop_reason == StopReason::ApprovalPending {
                self.pending_approvals()
            } else {
                Vec::new()
            },
        })
    }
}

// ------------------------------------------------------------ what the boundaries call

impl Agent {
    /// The content of the latest user message (the question a retried or
    /// resumed run answers, and the synthesizer's question).
    fn last_user_message(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.clone())
            .unwrap_or_default()
    }

    /// Switch to `to` when it differs structurally from the current
    /// transport (a model switch: the history survives).
    fn apply_transport(&mut self, to: ChatTransport) {
        let from = self.transport();
        // The same endpoint without an explicit window is the same model
        // as far as the conversation goes: no switch, no second probe.
        if from == to || (from.same_endpoint(&to) && to.context_window().is_none()) {
            return;
        }
        self.shared.state.lock().transport = to.clone();
        let _ = self.journal(&Record::ModelSwitched {
            model: to.model().map(Into::into),
        });
        self.emit(Event::ModelSwitched {
            agent: self.agent_id(),
            from,
            to,
        });
        self.detect_and_emit_context_cap();
    }

    /// Before a new user message: answer the calls still pending, so the
    /// next request is valid. Each gets its [`Event::ToolResult`].
    fn answer_stale_pending(&mut self) {
        let stale: Vec<ToolCall> = approval::unanswered(&self.messages)
            .into_iter()
            .cloned()
            .collect();
        for call in &stale {
            self.emit(Event::ToolResult {
                agent: self.agent_id(),
                id: call.id.clone(),
                name: call.name.clone(),
                content: NOT_APPROVED.to_string(),
            });
            let _ = self.journal(&Record::ToolResult {
                call_id: call.id.as_str().into(),
                content: NOT_APPROVED.into(),
                images: Cow::Borrowed(&[]),
            });
            self.messages
                .push(Message::tool(call.id.clone(), NOT_APPROVED.to_string()));
        }
    }

    /// One step of the [`Compactor`] on this conversation; whether it
    /// compacted (then [`Event::Compacted`] says what changed).
    fn compacting(
        &mut self,
        step: impl FnOnce(&mut Compactor, &mut Conversation<'_>) -> Result<Option<Compacted>>,
    ) -> Result<bool> {
        let tools = self.tools();
        let window = self.context_window_cap();
        let shared = &self.shared;
        let mut summarize =
            |system: &str, prompt: &str| child::ask(shared, "compactor", system, prompt);
        let mut conversation = Conversation {
            messages: &mut self.messages,
            system_prompt: &self.system_prompt,
            tools: &tools,
            window,
            summarize: &mut summarize,
        };
        let Some(done) = step(&mut self.compactor, &mut conversation)? else {
            return Ok(false);
        };
        self.journal(&Record::History {
            cause: "compaction".into(),
            messages: (&self.messages[..]).into(),
        })?;
        self.turn_start = done.shift(self.turn_start);
        self.emit(done.event(self.agent_id()));
        Ok(true)
    }

    /// The step-exhaustion rescue: a tools-free child answers from the
    /// evidence; its answer, when it wrote one, is appended and becomes the
    /// turn's answer.
    fn synthesize(&mut self, question: &str, max: u32) -> Result<()> {
        // A resume after a crash from here writes the answer again, not
        // a new round with a fresh budget.
        self.journal(&Record::Synthesizing { max })?;
        let reason = format!(
            "step budget of {max} tool calls exhausted; answering from the evidence gathered"
        );
        self.emit(Event::FallbackNotice {
            agent: self.agent_id(),
            reason,
        });
        let prompt = self.synthesizer.build_prompt(&self.messages, question);
        let mut synth = child::spawn(
            &self.shared,
            ChildSpec {
                id: child_id(self.id(), "synthesizer"),
                system_prompt: self.synthesizer.system_prompt().to_string(),
                max_steps: 1,
                tools: Vec::new(),
                announces_cancel: false,
            },
        )?;
        // A typed turn's answer is typed even when the synthesizer writes it.
        if let Some(spec) = self.options.typed.clone() {
            spec.append_note(&mut synth.system_prompt);
            synth.constrain(&spec);
        }
        synth.run_loop(&prompt)?;
        let answer = synth.last_assistant_content();
        synth.close();
        // An empty answer is no answer: nothing is appended (an empty
        // assistant message is no evidence for the next turn), and
        // `last_assistant_content` says `None`, not an earlier message.
        if let Some(answer) = &answer {
            let mut m = Message::assistant(answer.clone());
            m.model = self.model();
            // Checked at the turn's end.
            let _ = self.journal_response(&m, false);
            self.messages.push(m);
        }
        self.synth_answer = Some(answer.unwrap_or_default());
        Ok(())
    }

    /// A typed turn: the first run, then a repair run per invalid answer.
    fn typed_turn<T: DeserializeOwned>(
        &mut self,
        user_message: &str,
        turn: &mut TypedTurn,
    ) -> Result<Typed<T>> {
        let mut outcome = self.run_loop(user_message)?;
        loop {
            let repair = match turn.judge::<T>(outcome)? {
                Judged::Done(typed) => return Ok(typed),
                Judged::Repair(message) => message,
            };
            // A repair asks for the answer itself: its requests carry
            // `response_format` even when the tool rounds did not.
            self.constrain(turn.spec());
            self.journal(&Record::User {
                content: repair.as_str().into(),
            })?;
            self.messages.push(Message::user(repair.clone()));
            self.emit(Event::UserTurn {
                agent: self.agent_id(),
                content: repair,
                mid_loop: true,
            });
            self.begin_run();
            let mut run = Run::default();
            let result = self.rounds(&mut run);
            outcome = self.turn_end(result, run.steps, user_message)?;
        }
    }

    /// Add the typed turn's request fields to this agent's requests.
    fn constrain(&mut self, spec: &TypedSpec) {
        let transport = self.transport();
        let api_base = transport.api_base().unwrap_or("");
        spec.constrain(&mut Arc::make_mut(&mut self.options).extra, api_base);
    }
}

// ------------------------------------------------------------ the journal

impl Agent {
    /// Journal a completed response (the next step).
    fn journal_response(&self, message: &Message, truncated: bool) -> Result<()> {
        match self.shared.journal.get() {
            Some(j) => j.response(message, truncated),
            None => Ok(()),
        }
    }

    /// The journal's first failed write, if any.
    fn journal_check(&self) -> Result<()> {
        match self.shared.journal.get() {
            Some(j) => j.check(),
            None => Ok(()),
        }
    }

    /// The resumed run, from where `cut` says the crash stopped it.
    fn resume_cut(&mut self, cut: &Cut, run: &mut Run) -> Result<End> {
        let pending: Vec<ToolCall> = approval::unanswered(&self.messages)
            .into_iter()
            .cloned()
            .collect();
        if pending.is_empty() {
            // Cut off while the synthesizer wrote the answer: it writes it
            // again (through `turn_end`, as the spent budget would).
            if let Some(max) = cut.synthesizing {
                return Err(Error::StepLimitExceeded { max });
            }
            // The answer was journaled, the turn's end was not: the turn
            // is over, nothing is asked again.
            if self
                .messages
                .last()
                .is_some_and(|m| m.role == Role::Assistant)
            {
                return Ok(End::Answered);
            }
            // A request was due or in flight (its partial stream, if any,
            // was never journaled): it is made again.
            return self.rounds(run);
        }
        let tools = self.tools();
        // Started without a result: it may have had its effect. Only a
        // tool that says a second run is harmless runs again.
        let interrupted: Vec<&str> = pending
            .iter()
            .filter(|call| {
                cut.started.contains(&call.id)
                    && !tools
                        .iter()
                        .any(|t| t.name() == call.name && t.idempotent())
            })
            .map(|call| call.id.as_str())
            .collect();
        // The calls not started (a pending approval is asked again) and
        // the idempotent ones run as the batch would have run them; the
        // interrupted ones are answered in their place (a parallel batch
        // journals its results only once every call returned, so any of
        // its calls may be cut off, the first one included).
        if let End::Pending = self.tool_batch_resumed(&pending, &interrupted, cut.truncated, run)? {
            return Ok(End::Pending);
        }
        self.journal_check()?;
        self.after_batch();
        self.rounds(run)
    }
}
