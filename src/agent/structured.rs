//! Structured output: a turn whose final answer must be a `T`
//! ([`Agent::run_typed`]), configured by [`StructuredOutput`].

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Agent, Configurator, Outcome};
use crate::tool::{JsonSchema, Parameters};
use crate::{Error, Event, Message, Result, StopReason};

/// How a typed turn tells the server the answer's shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StructuredMode {
    /// `response_format: {"type": "json_schema", ...}` on the request (OpenAI,
    /// llama.cpp, which turns the schema into a grammar, vLLM); to a server
    /// that looks like Ollama, its `format: <schema>` as well. The schema
    /// is also in the system prompt. The default.
    #[default]
    JsonSchema,
    /// No request field: the schema goes in the system prompt only, and the
    /// answer is validated. For servers that reject or ignore
    /// `response_format`.
    Prompt,
}

/// The settings of typed turns ([`Agent::run_typed`]): the
/// [`StructuredMode`], how many repairs an invalid answer gets, and whether
/// tool rounds are constrained too. Set the agent's with
/// [`Configurator::structured_output`]; override them per call with
/// [`Agent::run_typed_with`].
///
/// # Examples
///
/// ```
/// use pikuri::structured::{StructuredMode, StructuredOutput};
/// let s = StructuredOutput::default();
/// assert_eq!(s.mode(), StructuredMode::JsonSchema);
/// assert_eq!(s.max_repairs(), 2);
/// assert!(!s.constrains_tool_rounds());
/// let s = s.with_mode(StructuredMode::Prompt).with_max_repairs(0);
/// assert_eq!((s.mode(), s.max_repairs()), (StructuredMode::Prompt, 0));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StructuredOutput {
    mode: StructuredMode,
    max_repairs: u32,
    constrain_tool_rounds: bool,
}

impl Default for StructuredOutput {
    fn default() -> StructuredOutput {
        StructuredOutput {
            mode: StructuredMode::JsonSchema,
            max_repairs: 2,
            constrain_tool_rounds: false,
        }
    }
}

impl StructuredOutput {
    /// A copy with another mode.
    #[must_use]
    pub fn with_mode(mut self, mode: StructuredMode) -> StructuredOutput {
        self.mode = mode;
        self
    }

    /// A copy where an invalid answer is sent back for repair at most `n`
    /// times per turn (default 2; 0: never).
    #[must_use]
    pub fn with_max_repairs(mut self, n: u32) -> StructuredOutput {
        self.max_repairs = n;
        self
    }

    /// A copy that, in [`StructuredMode::JsonSchema`], sends
    /// `response_format` on every request of a turn even when the agent
    /// has tools. Off by default: llama.cpp (and other grammar-constrained
    /// servers) then force *every* assistant message into the schema, so
    /// the model could never call a tool. Turn it on for servers that let
    /// the model call tools under a `response_format` (OpenAI).
    #[must_use]
    pub fn with_constrained_tool_rounds(mut self, on: bool) -> StructuredOutput {
        self.constrain_tool_rounds = on;
        self
    }

    /// The mode.
    pub fn mode(&self) -> StructuredMode {
        self.mode
    }

    /// The repair bound.
    pub fn max_repairs(&self) -> u32 {
        self.max_repairs
    }

    /// Whether tool rounds carry `response_format` too.
    pub fn constrains_tool_rounds(&self) -> bool {
        self.constrain_tool_rounds
    }
}

/// The answer of a typed turn: the value, the turn's [`Outcome`] and how
/// many repairs it took.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Typed<T> {
    /// The final answer, parsed and validated.
    pub value: T,
    /// The turn's outcome, summed over its repair runs: `answer` is the raw
    /// JSON text of the accepted answer; `steps`, `usage` and `requests`
    /// count every run of the turn.
    pub outcome: Outcome,
    /// How many times an invalid answer was sent back (0: the first answer
    /// was valid).
    pub repairs: u32,
}

/// What a typed turn sends: built once per turn from `T`.
#[derive(Debug)]
pub(crate) struct TypedSpec {
    /// The `response_format` value.
    response_format: Value,
    /// The schema itself (Ollama's `format`).
    schema: Value,
    /// The system-prompt note.
    note: String,
    mode: StructuredMode,
}

/// The note appended to the system prompt of a typed turn.
const NOTE_HEAD: &str =
    "Your final answer must be only a JSON object matching this JSON Schema, with no other text:";

impl TypedSpec {
    fn new(name: &str, schema: Value, strict: bool, mode: StructuredMode) -> TypedSpec {
        TypedSpec {
            response_format: json!({
                "type": "json_schema",
                "json_schema": {"name": name, "strict": strict, "schema": schema},
            }),
            note: format!("{NOTE_HEAD}\n{schema}"),
            schema,
            mode,
        }
    }
}

/// A schema name as OpenAI accepts it (`[A-Za-z0-9_-]{1,64}`), from the type's
/// name without its path: `app::Verdict` is `Verdict`, `Vec<app::Row>` is
/// `Vec_Row_`.
fn schema_name(type_name: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    for c in type_name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else if c == ':' {
            word.clear();
        } else {
            out.push_str(&word);
            word.clear();
            if c != ' ' {
                out.push('_');
            }
        }
    }
    out.push_str(&word);
    out.truncate(64);
    if out.is_empty() {
        out.push_str("answer");
    }
    out
}

/// The answer text as JSON: trimmed, a Markdown code fence removed.
fn strip_fence(raw: &str) -> &str {
    let t = raw.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let body = rest.split_once('\n').map_or("", |(_, b)| b);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// Parse, validate, deserialize: the value, or every problem found.
fn check<T: DeserializeOwned>(raw: &str, params: &Parameters) -> Result<T, Vec<String>> {
    let text = strip_fence(raw);
    if text.is_empty() {
        return Err(vec![
            "the answer is empty: expected a JSON object".to_string(),
        ]);
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| vec![format!("the answer is not valid JSON: {e}")])?;
    params.validate(&value).map_err(|e| e.problems().to_vec())?;
    serde_json::from_value(params.normalize(value))
        .map_err(|e| vec![format!("the answer does not fit the expected type: {e}")])
}

/// The user message that sends an invalid answer back.
pub(crate) fn repair_message(problems: &[String]) -> String {
    let mut s = String::from("Your answer does not match the required JSON schema:\n");
    for p in problems {
        s.push_str("- ");
        s.push_str(p);
        s.push('\n');
    }
    s.push_str("Answer again with only the corrected JSON object, no other text.");
    s
}

impl Configurator {
    /// The settings of typed turns ([`Agent::run_typed`]); default
    /// [`StructuredOutput::default`].
    ///
    /// ```
    /// use pikuri::Agent;
    /// use pikuri::structured::{StructuredMode, StructuredOutput};
    /// use pikuri::testing::FakeServer;
    /// let server = FakeServer::start();
    /// let agent = Agent::builder(server.transport())
    ///     .structured_output(StructuredOutput::default().with_mode(StructuredMode::Prompt))
    ///     .build()?;
    /// assert_eq!(agent.structured_output().mode(), StructuredMode::Prompt);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn structured_output(mut self, settings: StructuredOutput) -> Configurator {
        self.options.structured = settings;
        self
    }
}

/// What a typed turn changed, put back when it ends.
struct Saved {
    options: Arc<super::LoopOptions>,
    system_prompt: String,
}

impl Agent {
    /// The settings of typed turns ([`Configurator::structured_output`]).
    pub fn structured_output(&self) -> &StructuredOutput {
        &self.options.structured
    }

    /// Run one user turn whose final answer must be a `T`: the answer is
    /// parsed, validated against `T`'s schema and deserialized.
    ///
    /// What is sent, with the agent's [`StructuredOutput`]:
    ///
    /// - The system prompt of every request of the turn ends with a note
    ///   holding `T`'s schema ("Your final answer must be only a JSON
    ///   object matching this JSON Schema, ...").
    /// - In [`StructuredMode::JsonSchema`], `response_format: {"type":
    ///   "json_schema", "json_schema": {"name": <T's name>, "strict": true,
    ///   "schema": <T's schema>}}` (`strict` is false when the schema breaks
    ///   strict mode, see [`Parameters::strict_violations`]), and to a server
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
    /// use pikuri::Agent;
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
        let schema = T::json_schema();
        let params = Parameters::from_json_schema(schema.clone()).map_err(|e| {
            Error::invalid(format!(
                "a typed answer needs an object schema: {}",
                e.problems().join("; ")
            ))
        })?;
        let strict = params.strict_violations().is_empty();
        let name = schema_name(std::any::type_name::<T>());
        let spec = Arc::new(TypedSpec::new(&name, schema, strict, settings.mode));
        let has_tools = !self.shared.state.lock().tools.is_empty();
        let constrain = !has_tools || settings.constrain_tool_rounds;
        let saved = self.install(&spec, constrain);
        let result = self.typed_turn::<T>(user_message, &params, settings.max_repairs);
        self.options = saved.options;
        self.system_prompt = saved.system_prompt;
        result
    }

    /// Put the turn's spec, note and (when `constrain`) request fields in
    /// place; returns what to restore.
    fn install(&mut self, spec: &Arc<TypedSpec>, constrain: bool) -> Saved {
        let saved = Saved {
            options: Arc::clone(&self.options),
            system_prompt: self.system_prompt.clone(),
        };
        if !self.system_prompt.is_empty() {
            self.system_prompt.push_str("\n\n");
        }
        self.system_prompt.push_str(&spec.note);
        Arc::make_mut(&mut self.options).typed = Some(Arc::clone(spec));
        if constrain {
            self.constrain(spec);
        }
        saved
    }

    /// Add `response_format` (and Ollama's `format`) to this agent's requests,
    /// in [`StructuredMode::JsonSchema`].
    fn constrain(&mut self, spec: &TypedSpec) {
        if spec.mode != StructuredMode::JsonSchema {
            return;
        }
        let ollama =
            crate::protocol::looks_like_ollama(self.transport().api_base().unwrap_or(""), None);
        let extra = &mut Arc::make_mut(&mut self.options).extra;
        extra.insert("response_format".into(), spec.response_format.clone());
        if ollama {
            extra.insert("format".into(), spec.schema.clone());
        }
    }

    fn typed_turn<T: DeserializeOwned>(
        &mut self,
        user_message: &str,
        params: &Parameters,
        max_repairs: u32,
    ) -> Result<Typed<T>> {
        let mut total = self.run_loop(user_message)?;
        let mut repairs = 0;
        loop {
            if total.stop_reason == StopReason::ApprovalPending {
                return Err(Error::invalid(
                    "a typed turn cannot pause for approval: an approver deferred a call",
                ));
            }
            let raw = total.answer.clone().unwrap_or_default();
            let problems = match check::<T>(&raw, params) {
                Ok(value) => {
                    return Ok(Typed {
                        value,
                        outcome: total,
                        repairs,
                    });
                }
                Err(problems) => problems,
            };
            if repairs >= max_repairs {
                return Err(Error::InvalidAnswer { problems, raw });
            }
            repairs += 1;
            if let Some(spec) = self.options.typed.clone() {
                self.constrain(&spec);
            }
            let repair = repair_message(&problems);
            self.messages.push(Message::user(repair.clone()));
            self.emit(Event::UserTurn {
                agent: self.agent_id(),
                content: repair,
                mid_loop: true,
            });
            self.begin_run();
            let mut steps = 0u32;
            let result = self.rounds(&mut steps);
            let next = self.finish_run(result, steps, user_message)?;
            total = Outcome {
                stop_reason: next.stop_reason,
                answer: next.answer,
                steps: total.steps + next.steps,
                usage: {
                    let mut u = total.usage;
                    u += next.usage;
                    u
                },
                requests: total.requests + next.requests,
                pending_approvals: next.pending_approvals,
            };
        }
    }

    /// A typed turn's synthesizer answers typed too: the note on its system
    /// prompt, the request fields on its requests.
    pub(super) fn type_synthesizer(&self, synth: &mut Agent) {
        let Some(spec) = self.options.typed.clone() else {
            return;
        };
        if !synth.system_prompt.is_empty() {
            synth.system_prompt.push_str("\n\n");
        }
        synth.system_prompt.push_str(&spec.note);
        synth.constrain(&spec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names() {
        assert_eq!(schema_name("app::model::Verdict"), "Verdict");
        assert_eq!(schema_name("alloc::vec::Vec<app::Row>"), "Vec_Row_");
        assert_eq!(
            schema_name("std::collections::BTreeMap<alloc::string::String, u8>"),
            "BTreeMap_String_u8_"
        );
        assert_eq!(schema_name(""), "answer");
        assert_eq!(schema_name(&"x".repeat(100)).len(), 64);
    }

    #[test]
    fn fences() {
        assert_eq!(strip_fence(" {\"a\":1} "), "{\"a\":1}");
        assert_eq!(strip_fence("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(strip_fence("```\n{}\n```\n"), "{}");
        assert_eq!(strip_fence("```"), "");
    }

    #[test]
    fn repair_lists_every_problem() {
        let m = repair_message(&["a".into(), "b".into()]);
        assert!(m.contains("- a\n- b\n"), "{m}");
    }
}
