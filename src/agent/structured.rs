//! Structured output: a turn whose final answer must be a `T`
//! ([`Agent::run_typed`](crate::Agent::run_typed)), configured by
//! [`StructuredOutput`]. `TypedTurn` holds one such turn's state and
//! judges each answer; the agent runs the loop around it.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::outcome::Outcome;
use crate::protocol::ResponseSchema;
use crate::tool::{JsonSchema, Parameters};
use crate::{Error, Result, StopReason};

/// How a typed turn tells the server the answer's shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StructuredMode {
    /// The schema goes in the request, in the API's own field (chat
    /// completions' `response_format`, plus `format` to a server that looks
    /// like Ollama; Anthropic's `output_config.format`; Responses'
    /// `text.format`): OpenAI, llama.cpp (which turns the schema into a
    /// grammar) and vLLM constrain the answer to it. The schema is also in
    /// the system prompt. The default.
    #[default]
    JsonSchema,
    /// No request field: the schema goes in the system prompt only, and the
    /// answer is validated. For servers that reject or ignore the schema
    /// field.
    Prompt,
}

/// The settings of typed turns ([`Agent::run_typed`](crate::Agent::run_typed)): the
/// [`StructuredMode`], how many repairs an invalid answer gets, and whether
/// tool rounds are constrained too. Set the agent's with
/// [`Configurator::structured_output`](crate::Configurator::structured_output); override them per call with
/// [`Agent::run_typed_with`](crate::Agent::run_typed_with).
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

    /// A copy that, in [`StructuredMode::JsonSchema`], sends the schema
    /// on every request of a turn even when the agent has tools. Off by default: llama.cpp (and other grammar-constrained
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

    /// Whether tool rounds carry the schema too.
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
    /// The schema the request asks for (each API's encoder writes it).
    schema: Arc<ResponseSchema>,
    /// The system-prompt note.
    note: String,
    mode: StructuredMode,
}

/// The note appended to the system prompt of a typed turn.
const NOTE_HEAD: &str =
    "Your final answer must be only a JSON object matching this JSON Schema, with no other text:";

impl TypedSpec {
    /// End a system prompt with the note that asks for the schema.
    pub(crate) fn append_note(&self, prompt: &mut String) {
        if !prompt.is_empty() {
            prompt.push_str("\n\n");
        }
        prompt.push_str(&self.note);
    }

    /// The schema requests carry, in [`StructuredMode::JsonSchema`].
    pub(crate) fn request_schema(&self) -> Option<Arc<ResponseSchema>> {
        (self.mode == StructuredMode::JsonSchema).then(|| Arc::clone(&self.schema))
    }

    fn new(name: &str, schema: Value, strict: bool, mode: StructuredMode) -> TypedSpec {
        TypedSpec {
            note: format!("{NOTE_HEAD}\n{schema}"),
            schema: Arc::new(ResponseSchema {
                name: name.to_string(),
                schema,
                strict,
            }),
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
fn repair_message(problems: &[String]) -> String {
    let mut s = String::from("Your answer does not match the required JSON schema:\n");
    for p in problems {
        s.push_str("- ");
        s.push_str(p);
        s.push('\n');
    }
    s.push_str("Answer again with only the corrected JSON object, no other text.");
    s
}

/// One typed turn's state: what it sends, how its answers are judged, and
/// the outcome summed over its runs (the first and each repair).
pub(crate) struct TypedTurn {
    spec: Arc<TypedSpec>,
    params: Parameters,
    max_repairs: u32,
    repairs: u32,
    total: Option<Outcome>,
}

/// What a typed turn does after a run.
pub(crate) enum Judged<T> {
    /// The answer is valid: the turn is over.
    Done(Typed<T>),
    /// Send this user message (the problems) and run again.
    Repair(String),
}

impl TypedTurn {
    /// A turn answering a `T`, under `settings`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when `T`'s schema is not an object schema.
    pub(crate) fn new<T: JsonSchema>(settings: &StructuredOutput) -> Result<TypedTurn> {
        let schema = T::json_schema();
        let params = Parameters::from_json_schema(schema.clone()).map_err(|e| {
            Error::invalid(format!(
                "a typed answer needs an object schema: {}",
                e.problems().join("; ")
            ))
        })?;
        let strict = params.strict_violations().is_empty();
        let name = schema_name(std::any::type_name::<T>());
        Ok(TypedTurn {
            spec: Arc::new(TypedSpec::new(&name, schema, strict, settings.mode)),
            params,
            max_repairs: settings.max_repairs,
            repairs: 0,
            total: None,
        })
    }

    /// What the turn sends.
    pub(crate) fn spec(&self) -> &Arc<TypedSpec> {
        &self.spec
    }

    /// Judge the answer of the run that ended with `outcome`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidAnswer`] when the repairs are used up,
    /// [`Error::InvalidInput`] when the run paused for approval.
    pub(crate) fn judge<T: DeserializeOwned>(&mut self, outcome: Outcome) -> Result<Judged<T>> {
        let total = match self.total.take() {
            None => outcome,
            Some(total) => Outcome {
                stop_reason: outcome.stop_reason,
                finish: outcome.finish,
                answer: outcome.answer,
                steps: total.steps + outcome.steps,
                usage: {
                    let mut u = total.usage;
                    u += outcome.usage;
                    u
                },
                requests: total.requests + outcome.requests,
                #[cfg(feature = "budgets")]
                spend: Box::new(total.spend.merged(&outcome.spend)),
                pending_approvals: outcome.pending_approvals,
            },
        };
        // A paused turn has no answer to judge, and a typed turn cannot
        // hand the host a half-typed result to resume later.
        if total.stop_reason == StopReason::ApprovalPending {
            return Err(Error::invalid(
                "a typed turn cannot pause for approval: an approver deferred a call",
            ));
        }
        let raw = total.answer.clone().unwrap_or_default();
        let problems = match check::<T>(&raw, &self.params) {
            Ok(value) => {
                return Ok(Judged::Done(Typed {
                    value,
                    outcome: total,
                    repairs: self.repairs,
                }));
            }
            Err(problems) => problems,
        };
        if self.repairs >= self.max_repairs {
            return Err(Error::InvalidAnswer { problems, raw });
        }
        self.repairs += 1;
        self.total = Some(total);
        Ok(Judged::Repair(repair_message(&problems)))
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

    crate::tool::schema_type! {
        /// A count.
        struct Count {
            /// How many.
            n: u32,
        }
    }

    fn outcome(answer: &str, steps: u32) -> Outcome {
        Outcome {
            stop_reason: StopReason::Completed,
            finish: crate::FinishReason::Complete,
            answer: Some(answer.to_string()),
            steps,
            usage: crate::Usage::new().with_input(10),
            requests: 1,
            #[cfg(feature = "budgets")]
            spend: Box::default(),
            pending_approvals: Vec::new(),
        }
    }

    #[test]
    fn judge_repairs_then_sums_the_runs() {
        let settings = StructuredOutput::default().with_max_repairs(1);
        let mut turn = TypedTurn::new::<Count>(&settings).unwrap();
        match turn.judge::<Count>(outcome("many", 2)).unwrap() {
            Judged::Repair(m) => assert!(m.contains("not valid JSON"), "{m}"),
            Judged::Done(_) => panic!("an invalid answer passed"),
        }
        let Judged::Done(typed) = turn.judge::<Count>(outcome(r#"{"n": 3}"#, 1)).unwrap() else {
            panic!("a valid answer was sent back");
        };
        assert_eq!(typed.value.n, 3);
        assert_eq!(typed.repairs, 1);
        assert_eq!((typed.outcome.steps, typed.outcome.requests), (3, 2));
        assert_eq!(typed.outcome.usage.input, Some(20));
    }

    #[test]
    fn judge_stops_when_the_repairs_are_used_up_or_the_run_paused() {
        let settings = StructuredOutput::default().with_max_repairs(0);
        let mut turn = TypedTurn::new::<Count>(&settings).unwrap();
        assert!(matches!(
            turn.judge::<Count>(outcome("{}", 0)),
            Err(Error::InvalidAnswer { .. })
        ));
        let mut turn = TypedTurn::new::<Count>(&settings).unwrap();
        let mut paused = outcome("", 0);
        paused.stop_reason = StopReason::ApprovalPending;
        assert!(matches!(
            turn.judge::<Count>(paused),
            Err(Error::InvalidInput(_))
        ));
    }
}
