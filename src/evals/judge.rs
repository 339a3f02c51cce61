//! [`Judge`]: a model grades a run against a rubric.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::capture::Run;
use super::verdict::{Evaluator, Verdict};
use crate::tool::JsonSchema;
use crate::{Agent, ChatTransport, HttpConfig};

/// The most characters of the input, the expected and the actual output
/// sent to the judge (each): a run that produced megabytes is still judged
/// in one bounded request.
const MAX_SHOWN: usize = 20_000;
/// The most characters of the judge's reason kept in its verdict: the
/// verdict goes into every report and baseline, which a judge answering
/// megabytes per run would otherwise swell past what
/// [`Report::load`](super::Report::load) reads back.
const MAX_REASON: usize = 2000;

/// The instructions every judge gets before its rubric.
const SYSTEM: &str = "You grade the output of an AI assistant against a rubric. \
Read the rubric, the user's input, the expected output if given, and the output. \
Answer with a JSON object: \"score\", a number from 0 (fails the rubric) to 1 (meets it fully), \
and \"reason\", one or two sentences on why. Judge only what the rubric asks.";

/// What the judge answers.
struct Grade {
    score: f64,
    reason: String,
}

crate::serde_macros::json_struct! { Deserialize for Grade { score, reason } }

impl JsonSchema for Grade {
    fn json_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "score": {"type": "number", "minimum": 0, "maximum": 1, "description": "0 fails the rubric, 1 meets it fully"},
                "reason": {"type": "string", "description": "Why, in one or two sentences"}
            },
            "required": ["score", "reason"],
            "additionalProperties": false
        })
    }
}

/// A model-judged evaluator: the rubric, the case's input, its expected
/// output and the run's output go to a model through any
/// [`ChatTransport`], which answers a score from 0 to 1 and a reason as
/// structured output ([`Agent::run_typed`]); the run passes at or above the
/// threshold (default 0.5).
///
/// The judge's request has no tools, and its answer is validated (a repair
/// when invalid, as `run_typed` does). A judge that fails (the server is
/// down, the answer stays invalid) gives a failing verdict labelled
/// `"judge_error"` with the error; its usage is not counted in the run's.
/// The reason kept is at most 2000 characters. The judge talks HTTP with
/// the default [`HttpConfig`] (a read timeout of 5 minutes) unless given
/// its own with [`http`](Judge::http).
///
/// # Examples
///
/// ```
/// use pikuri::evals::{Evaluator, Judge, Run};
/// use pikuri::testing::{FakeServer, Reply};
///
/// let judge_model = FakeServer::start();
/// judge_model.push(Reply::text(r#"{"score": 0.9, "reason": "Names Paris, politely."}"#));
/// let judge = Judge::new(judge_model.transport(), "The answer names the capital of France.");
/// let verdict = judge.evaluate(&Run::from_output("It is Paris."));
/// assert!(verdict.pass);
/// assert_eq!(verdict.score, 0.9);
/// assert_eq!(verdict.reason, "Names Paris, politely.");
/// let sent = judge_model.chat_requests()[0].messages()[1]["content"].as_str().unwrap().to_string();
/// assert!(sent.contains("It is Paris."));
/// ```
#[derive(Clone, Debug)]
pub struct Judge {
    transport: ChatTransport,
    rubric: String,
    threshold: f64,
    name: String,
    http: Option<HttpConfig>,
}

impl Judge {
    /// A judge asking the model behind `transport` to grade against
    /// `rubric`.
    pub fn new(transport: ChatTransport, rubric: impl Into<String>) -> Judge {
        Judge {
            transport,
            rubric: rubric.into(),
            threshold: 0.5,
            name: "judge".into(),
            http: None,
        }
    }

    /// Pass at a score of at least `threshold` (default 0.5).
    #[must_use]
    pub fn threshold(mut self, threshold: f64) -> Judge {
        self.threshold = threshold;
        self
    }

    /// Name this judge (default `"judge"`): a case with two judges needs
    /// two names.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Judge {
        self.name = name.into();
        self
    }

    /// Talk to the judge's model with `http` (timeouts, retries, limits)
    /// instead of the defaults: a judge that hangs fails its verdict once
    /// these run out (the experiment's [timeout](super::Experiment::timeout)
    /// bounds the task, not its evaluators).
    #[must_use]
    pub fn http(mut self, http: HttpConfig) -> Judge {
        self.http = Some(http);
        self
    }

    /// The user message the judge is sent for `run`.
    fn prompt(&self, run: &Run) -> String {
        let cut = |s: &str| crate::util::excerpt(s, MAX_SHOWN).into_owned();
        let mut text = format!("# Rubric\n{}\n\n# Input\n", self.rubric);
        for turn in &run.input {
            text.push_str(&cut(turn));
            text.push('\n');
        }
        if let Some(expected) = &run.expected {
            let expected = match expected {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let _ = write!(text, "\n# Expected output\n{}\n", cut(&expected));
        }
        let _ = write!(text, "\n# Output\n{}\n", cut(&run.output_text()));
        text
    }
}

impl Evaluator for Judge {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn evaluate(&self, run: &Run) -> Verdict {
        let mut agent = Agent::builder(self.transport.clone())
            .id("judge")
            .system_prompt(SYSTEM);
        if let Some(http) = &self.http {
            agent = agent.http(http.clone());
        }
        let graded = agent
            .build()
            .and_then(|mut agent| agent.run_typed::<Grade>(&self.prompt(run)));
        match graded {
            Ok(typed) => {
                let reason = crate::util::excerpt(&typed.value.reason, MAX_REASON).into_owned();
                Verdict::scored(typed.value.score, self.threshold, reason)
            }
            Err(e) => Verdict::fail(format!("the judge failed: {e}")).with_label("judge_error"),
        }
    }
}
