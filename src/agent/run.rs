//! The public entry points of a run: each chooses where a run starts (a
//! new message, a retry, a resume, a typed turn and its repairs), then
//! hands over to the loop in `turn.rs`, whose boundaries it calls.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::approval::{self, Decisions, Gate};
use super::child;
use super::compact::Step;
use super::outcome::Outcome;
use super::structured::{Judged, StructuredOutput, Typed, TypedSpec, TypedTurn};
use super::turn::{End, Run, Switch};
use super::{Agent, TypedRequest};
#[cfg(feature = "journal")]
use crate::FinishReason;
use crate::approval::Decision;
#[cfg(feature = "journal")]
use crate::journal::Cut;
use crate::journal::Record;
use crate::tool::JsonSchema;
use crate::{ChatTransport, Error, Event, Message, Result, Role, ToolCall};

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
    /// | [`Error::Cancelled`] (after [`Event::Cancelled`]) | as above, plus a "cancelled" observation for each call not run, then what the [`Interloper`](crate::Interloper) held when a cancel stopped a tool batch; the text of an answer the cancel cut short is not kept (it is in the event's `partial_answer`) | a new `run_loop`, or `retry_turn` to resume |
    /// | [`Error::StepLimitExceeded`] (under [`OnExhausted::Raise`](crate::OnExhausted::Raise)) | as above, plus a "not run" observation for each call over budget, then what the `Interloper` held | `run_loop("continue")` or `retry_turn`: either gets a fresh budget |
    /// | [`Error::BudgetExceeded`] (under [`OnExhausted::Raise`](crate::OnExhausted::Raise), after [`Event::BudgetExceeded`]) | as for the step limit (a "not run" observation for each call the budget stopped); nothing of the request refused before it was sent | `run_loop` or `retry_turn`: either gets a fresh budget |
    /// | any of these from the synthesizer (under [`OnExhausted::Synthesize`](crate::OnExhausted::Synthesize)) | as for the step limit: the synthesizer's own exchange is not part of it | `retry_turn` |
    /// | [`Error::Guardrail`] (a [guard](crate::guard) stopped the run) | per point, as tabled in [What the history holds](crate::guard#what-the-history-holds): a withheld message, an answer left out, calls answered "not run" or "withheld" | a new `run_loop` (a `retry_turn` asks the model about the same history again) |
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
        self.run_turn(message, Some(Switch::to(transport)))
    }

    /// Like [`run_loop`](Agent::run_loop), but first switch to `transport`
    /// when it differs structurally from the current one: the history
    /// survives, [`Event::ModelSwitched`] then [`Event::ContextCap`] are
    /// emitted and the context window is detected again. Another model or
    /// endpoint is always a switch, and so is another explicit
    /// [context window](ChatTransport::with_context_window), or none where
    /// the current transport has one (the window is detected again). The
    /// same endpoint and model with other [model settings](crate::ModelSettings),
    /// neither transport with an explicit window, is no switch: the
    /// detected cap stays and only its settings apply from this turn on.
    pub fn run_loop_with(
        &mut self,
        user_message: &str,
        transport: ChatTransport,
    ) -> Result<Outcome> {
        self.run_turn(Message::user(user_message), Some(Switch::to(transport)))
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
            Ok(End::Answered(_)) => {
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
    /// # What listeners see
    ///
    /// The first process may have died before its listeners got the last
    /// events (a result is stored right after its [`Event::ToolResult`] is
    /// emitted, and delivered later), and this process's listeners saw none
    /// of the turn. So the run starts with [`Event::Resumed`], then replays
    /// the cut-off turn as the journal stored it: its user messages, its
    /// answers, each stored result preceded by its call's
    /// [`Event::ToolCall`] (and the `ToolCall` of an interrupted call). Then
    /// the run goes on as usual: a call run or reviewed again gets its
    /// `ToolCall` then, an interrupted one its `ToolResult`. A listener of
    /// this process alone thus sees every call of the turn with its result;
    /// one that outlived the first process may skip the replayed events
    /// (their count is on `Resumed`). Usage ([`Event::Tokens`]) is not
    /// replayed: it was counted in the first process.
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
    #[cfg(feature = "journal")]
    pub fn resume_run(&mut self) -> Result<Outcome> {
        self.ensure_open()?;
        let Some(cut) = self.interrupted.take() else {
            return Err(Error::invalid(
                "no interrupted run to resume (the journal ends with a finished run)",
            ));
        };
        self.begin_run();
        self.budget_resume(cut.spent);
        self.replay_cut(&cut);
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
        let settings = self.shared.options.structured.clone();
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
        // The turn's additions live until it ends, however it ends: the
        // scope clears them on an unwind too.
        let mut agent = TypedScope::begin(self, turn.spec());
        if constrain {
            agent.constrain();
        }
        agent.typed_turn::<T>(user_message, &mut turn)
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
    ///     .compaction(Compaction::drop_oldest().with_keep_turns(1))
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
        self.compactor.arm(child::COMPACTION);
        let done = self.compacting(Step::Now);
        // Outside a run nothing settles the tally the compactor's child
        // added to: settle it here, or the next run's start clears it.
        let tally = self.shared.settle_tally();
        self.total_usage += tally.usage;
        self.shared.listeners.flush();
        done
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
            self.constrain();
            self.journal(|| Record::User {
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

    /// The content of the latest user message (the question a retried or
    /// resumed run answers, and the synthesizer's question).
    pub(super) fn last_user_message(&self) -> String {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.clone())
            .unwrap_or_default()
    }

    /// The ids of the `pending` calls a resume answers "interrupted"
    /// instead of running them: started without a result, they may have
    /// had their effect. Only a tool that says a second run is harmless
    /// runs again.
    #[cfg(feature = "journal")]
    fn interrupted_calls(&self, cut: &Cut, pending: &[ToolCall]) -> Vec<String> {
        let tools = self.callable_tools();
        pending
            .iter()
            .filter(|call| {
                cut.started.contains(&call.id)
                    && !tools
                        .iter()
                        .any(|t| t.name() == call.name && t.idempotent())
            })
            .map(|call| call.id.clone())
            .collect()
    }

    /// Announce the cut-off turn as the journal stored it, after an
    /// [`Event::Resumed`] that counts the replayed events (what is and is
    /// not replayed is on that event). The first process may have died
    /// before its listeners got these events, a stored tool result's
    /// included; this process's listeners never got them.
    #[cfg(feature = "journal")]
    fn replay_cut(&mut self, cut: &Cut) {
        let pending: Vec<ToolCall> = approval::unanswered(&self.messages)
            .into_iter()
            .cloned()
            .collect();
        let interrupted = self.interrupted_calls(cut, &pending);
        // A pending call gets its `ToolCall` when the resumed batch
        // reviews or runs it, except an interrupted one, which is answered
        // with a `ToolResult` alone.
        let announced_later =
            |id: &str| pending.iter().any(|c| c.id == id) && !interrupted.iter().any(|i| i == id);
        let agent = self.agent_id();
        let turn = &self.messages[self.turn_start.min(self.messages.len())..];
        let last_answer = turn.iter().rposition(|m| m.role == Role::Assistant);
        // The calls of the latest answer not yet announced: each goes out
        // just before its stored result, as a batch run in order shows it.
        let mut calls: Vec<&ToolCall> = Vec::new();
        let mut events = Vec::new();
        let call_event = |c: &ToolCall| Event::ToolCall {
            agent: Arc::clone(&agent),
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: approval::parse_arguments(&c.arguments),
        };
        for (i, m) in turn.iter().enumerate() {
            let agent = Arc::clone(&agent);
            match m.role {
                Role::User => events.push(Event::UserTurn {
                    agent,
                    content: m.content.clone(),
                    mid_loop: i > 0,
                }),
                Role::System => events.push(Event::SystemInjected {
                    agent,
                    content: m.content.clone(),
                }),
                Role::Assistant => {
                    if let Some(r) = m.reasoning.as_deref().filter(|r| !r.is_empty()) {
                        events.push(Event::Thinking {
                            agent: Arc::clone(&agent),
                            content: r.to_string(),
                        });
                    }
                    if !m.content.is_empty() {
                        // The journal keeps the last answer's finish; an
                        // earlier answer of the turn was followed by more
                        // rounds.
                        let finish = if last_answer == Some(i) {
                            cut.finish
                        } else if m.tool_calls.is_empty() {
                            FinishReason::Complete
                        } else {
                            FinishReason::ToolCalls
                        };
                        events.push(Event::Assistant {
                            agent,
                            content: m.content.clone(),
                            finish,
                        });
                    }
                    calls = m.tool_calls.iter().collect();
                }
                Role::Tool => {
                    let id = m.tool_call_id.clone().unwrap_or_default();
                    let mut name = String::new();
                    if let Some(at) = calls.iter().position(|c| c.id == id) {
                        let c = calls.remove(at);
                        name.clone_from(&c.name);
                        events.push(call_event(c));
                    }
                    events.push(Event::ToolResult {
                        agent,
                        id,
                        name,
                        content: m.content.clone(),
                    });
                }
            }
        }
        // Left: the pending calls. An interrupted one is answered without
        // a `ToolCall` of its own: it is announced here.
        events.extend(
            calls
                .into_iter()
                .filter(|c| !announced_later(&c.id))
                .map(call_event),
        );
        self.emit(Event::Resumed {
            agent,
            replayed: events.len(),
        });
        for e in events {
            self.emit(e);
        }
    }

    /// An input guard's answer (or a journal's record of one) appended:
    /// the run ends without a request (or with the one the guard cut).
    #[cfg(any(feature = "guard", feature = "journal"))]
    pub(super) fn block(&mut self, answer: String) -> Result<End> {
        let message = Message::assistant(answer);
        self.journal_response(&message, crate::FinishReason::Complete)?;
        self.messages.push(message);
        Ok(End::Blocked)
    }

    /// A run a crash cut off after a guard ended it (in a build with or
    /// without guards): ended the same way, no guard and no model asked (the
    /// calls a stop left open are answered "not run").
    #[cfg(feature = "journal")]
    fn resume_guarded(&mut self, g: &crate::journal::Guarded) -> Result<End> {
        if g.block {
            return self.block(g.reason.clone());
        }
        let open: Vec<ToolCall> = approval::unanswered(&self.messages)
            .into_iter()
            .cloned()
            .collect();
        for call in &open {
            self.answer_call(call, crate::guard::NOT_RUN.to_string(), true);
        }
        Err(Error::Guardrail {
            guard: g.guard.clone(),
            reason: g.reason.clone(),
        })
    }

    /// The resumed run, from where `cut` says the crash stopped it.
    #[cfg(feature = "journal")]
    pub(super) fn resume_cut(&mut self, cut: &Cut, run: &mut Run) -> Result<End> {
        if let Some(g) = &cut.guarded {
            return self.resume_guarded(g);
        }
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
                return Ok(End::Answered(cut.finish));
            }
            // A request was due or in flight (its partial stream, if any,
            // was never journaled): it is made again.
            return self.rounds(run);
        }
        let interrupted = self.interrupted_calls(cut, &pending);
        let interrupted: Vec<&str> = interrupted.iter().map(String::as_str).collect();
        // The calls not started (a pending approval is asked again) and
        // the idempotent ones run as the batch would have run them; the
        // interrupted ones are answered in their place (a parallel batch
        // journals its results only once every call returned, so any of
        // its calls may be cut off, the first one included).
        if let End::Pending =
            self.tool_batch_resumed(&pending, &interrupted, cut.truncated(), run)?
        {
            return Ok(End::Pending);
        }
        self.journal_check()?;
        self.after_batch();
        self.rounds(run)
    }
}

impl Agent {
    /// Start sending a typed turn's note (its fields wait for
    /// [`constrain`](Agent::constrain)).
    pub(super) fn begin_typed(&mut self, spec: &Arc<TypedSpec>) {
        let mut system_prompt = self.system_prompt.clone();
        spec.append_note(&mut system_prompt);
        self.typed = Some(TypedRequest {
            spec: Arc::clone(spec),
            system_prompt,
            schema: None,
        });
    }

    /// Ask for the typed turn's schema on this agent's requests, until the
    /// typed turn ends.
    pub(super) fn constrain(&mut self) {
        if let Some(t) = &mut self.typed {
            t.schema = t.spec.request_schema();
        }
    }
}

/// The agent during a typed turn: its [`TypedRequest`] is set, and cleared
/// when the scope ends, by an unwind too (a panicking extension hook that
/// the host catches leaves an untyped agent).
struct TypedScope<'a>(&'a mut Agent);

impl<'a> TypedScope<'a> {
    fn begin(agent: &'a mut Agent, spec: &Arc<TypedSpec>) -> TypedScope<'a> {
        agent.begin_typed(spec);
        TypedScope(agent)
    }
}

impl Deref for TypedScope<'_> {
    type Target = Agent;

    fn deref(&self) -> &Agent {
        self.0
    }
}

impl DerefMut for TypedScope<'_> {
    fn deref_mut(&mut self) -> &mut Agent {
        self.0
    }
}

impl Drop for TypedScope<'_> {
    fn drop(&mut self) {
        self.0.typed = None;
    }
}
