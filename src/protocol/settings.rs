//! Typed model settings ([`ModelSettings`]): temperature, token limit, stop
//! sequences, tool choice, reasoning, ... in one API-neutral value. Each
//! API's encoder maps them to its own fields; the table of which field each
//! setting becomes, and of each API's defaults, is in the
//! [guide](crate::guide#model-settings).

use std::hash::{Hash, Hasher};

use serde::de::{Deserializer, EnumAccess, VariantAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::Api;
use crate::serde_macros::{json_enum, json_struct};

/// No setting set (requests built by tests and fuzz hooks).
#[cfg(any(test, fuzzing))]
pub(crate) static NONE: ModelSettings = ModelSettings {
    temperature: None,
    top_p: None,
    max_output_tokens: None,
    stop: None,
    seed: None,
    tool_choice: None,
    parallel_tool_calls: None,
    reasoning_effort: None,
    thinking_budget: None,
};

/// How the model may use the tools of a request.
///
/// # Examples
///
/// ```
/// use pikuri::{ModelSettings, ToolChoice};
/// let s = ModelSettings::new().with_tool_choice(ToolChoice::Tool("search".into()));
/// assert_eq!(s.tool_choice(), Some(&ToolChoice::Tool("search".into())));
/// ```
///
/// In JSON, `"auto"`, `"none"`, `"required"` or `{"tool": "name"}` (serde's
/// externally tagged form).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides whether to call a tool (every API's default).
    Auto,
    /// The model must not call a tool.
    None,
    /// The model must call at least one tool.
    Required,
    /// The model must call the tool of this name.
    Tool(String),
}

// By hand (the macros have no variant with data), as serde's derive writes
// an externally tagged enum: the same calls, so the same JSON both ways.
impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => serializer.serialize_unit_variant("ToolChoice", 0, "auto"),
            ToolChoice::None => serializer.serialize_unit_variant("ToolChoice", 1, "none"),
            ToolChoice::Required => serializer.serialize_unit_variant("ToolChoice", 2, "required"),
            ToolChoice::Tool(name) => {
                serializer.serialize_newtype_variant("ToolChoice", 3, "tool", name)
            }
        }
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ToolChoice, D::Error> {
        /// The variant's name.
        #[derive(Clone, Copy)]
        enum Kind {
            Auto,
            None,
            Required,
            Tool,
        }
        json_enum! {
            Deserialize for Kind { Auto = "auto", None = "none", Required = "required", Tool = "tool" }
        }

        struct Choice;
        impl<'de> Visitor<'de> for Choice {
            type Value = ToolChoice;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("enum ToolChoice")
            }
            fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<ToolChoice, A::Error> {
                let (kind, value) = data.variant::<Kind>()?;
                match kind {
                    Kind::Auto => value.unit_variant().map(|()| ToolChoice::Auto),
                    Kind::None => value.unit_variant().map(|()| ToolChoice::None),
                    Kind::Required => value.unit_variant().map(|()| ToolChoice::Required),
                    Kind::Tool => value.newtype_variant().map(ToolChoice::Tool),
                }
            }
        }
        const VARIANTS: &[&str] = &["auto", "none", "required", "tool"];
        deserializer.deserialize_enum("ToolChoice", VARIANTS, Choice)
    }
}

/// How much the model reasons before it answers.
///
/// # Examples
///
/// ```
/// use pikuri::{ModelSettings, ReasoningEffort};
/// let s = ModelSettings::new().with_reasoning_effort(ReasoningEffort::Low);
/// assert_eq!(s.reasoning_effort(), Some(ReasoningEffort::Low));
/// assert_eq!(ReasoningEffort::Low.as_str(), "low");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReasoningEffort {
    /// As little as the model allows (`minimal`; `low` on Anthropic, which
    /// has no `minimal`).
    Minimal,
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
}

json_enum! {
    Serialize, Deserialize for ReasoningEffort {
        Minimal = "minimal",
        Low = "low",
        Medium = "medium",
        High = "high",
    }

    /// The name OpenAI's APIs use (`minimal`, `low`, `medium`, `high`).
    pub fn as_str;
}

/// Typed settings of a model request, each optional: unset, the request
/// leaves the API's field out and the server's default applies.
///
/// Set them on a transport ([`ChatTransport::with_settings`](crate::ChatTransport::with_settings))
/// and per agent ([`Configurator::settings`](crate::Configurator::settings)):
/// the agent's settings override the transport's field by field, so a
/// fallback or a [`run_loop_with`](crate::Agent::run_loop_with) transport
/// keeps its own values for what the agent leaves unset. A raw
/// [`request_field`](crate::Configurator::request_field) of the same name
/// overrides both.
///
/// Each API's encoder writes each setting as its own field (the table is
/// in the [guide](crate::guide#model-settings)). A setting an API has no
/// field for (`seed` on Anthropic and Responses, `stop` on Responses,
/// `thinking_budget` on chat completions and Responses,
/// `parallel_tool_calls(false)` on Gemini) fails the request
/// before it is sent, with [`Error::InvalidInput`](crate::Error::InvalidInput)
/// naming the setting and the API: it is never dropped silently. So does a
/// temperature or `top_p` that is not finite (NaN, infinity).
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, ModelSettings};
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.push(Reply::text("Hi."));
/// let transport = server
///     .transport()
///     .with_settings(ModelSettings::new().with_temperature(0.2).with_seed(7));
/// let mut agent = Agent::builder(transport)
///     .settings(ModelSettings::new().with_temperature(0.0).with_max_output_tokens(64))
///     .build()?;
/// agent.run_loop("Hello")?;
/// let body = server.chat_requests()[0].body.clone().unwrap();
/// assert_eq!(body["temperature"], 0.0); // the agent's wins
/// assert_eq!(body["seed"], 7); // the transport's, unset on the agent
/// assert_eq!(body["max_tokens"], 64);
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # Equality
///
/// Floats compare by their bits, so `Eq` and `Hash` hold (a NaN equals
/// itself; `0.0` and `-0.0` differ).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ModelSettings {
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_output_tokens: Option<u64>,
    stop: Option<Vec<String>>,
    seed: Option<i64>,
    tool_choice: Option<ToolChoice>,
    parallel_tool_calls: Option<bool>,
    reasoning_effort: Option<ReasoningEffort>,
    thinking_budget: Option<u64>,
}

json_struct! {
    Serialize, Deserialize for ModelSettings {
        temperature [opt],
        top_p [opt],
        max_output_tokens [opt],
        stop [opt],
        seed [opt],
        tool_choice [opt],
        parallel_tool_calls [opt],
        reasoning_effort [opt],
        thinking_budget [opt],
    }
}

impl PartialEq for ModelSettings {
    fn eq(&self, other: &ModelSettings) -> bool {
        let bits = |f: Option<f64>| f.map(f64::to_bits);
        bits(self.temperature) == bits(other.temperature)
            && bits(self.top_p) == bits(other.top_p)
            && self.max_output_tokens == other.max_output_tokens
            && self.stop == other.stop
            && self.seed == other.seed
            && self.tool_choice == other.tool_choice
            && self.parallel_tool_calls == other.parallel_tool_calls
            && self.reasoning_effort == other.reasoning_effort
            && self.thinking_budget == other.thinking_budget
    }
}

impl Eq for ModelSettings {}

impl Hash for ModelSettings {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.temperature.map(f64::to_bits).hash(state);
        self.top_p.map(f64::to_bits).hash(state);
        self.max_output_tokens.hash(state);
        self.stop.hash(state);
        self.seed.hash(state);
        self.tool_choice.hash(state);
        self.parallel_tool_calls.hash(state);
        self.reasoning_effort.hash(state);
        self.thinking_budget.hash(state);
    }
}

impl ModelSettings {
    /// No setting set: every API's defaults.
    pub fn new() -> ModelSettings {
        ModelSettings::default()
    }

    /// A copy with a sampling temperature (`temperature` on every API).
    #[must_use]
    pub fn with_temperature(mut self, temperature: f64) -> ModelSettings {
        self.temperature = Some(temperature);
        self
    }
    /// A copy with nucleus sampling (`top_p` on every API).
    #[must_use]
    pub fn with_top_p(mut self, top_p: f64) -> ModelSettings {
        self.top_p = Some(top_p);
        self
    }
    /// A copy with a bound on the tokens of one answer, reasoning included
    /// where the API counts it (`max_tokens`, `max_completion_tokens` on
    /// OpenAI's own chat API, `max_output_tokens` on Responses).
    #[must_use]
    pub fn with_max_output_tokens(mut self, n: u64) -> ModelSettings {
        self.max_output_tokens = Some(n);
        self
    }
    /// A copy with sequences that end the answer (`stop`,
    /// `stop_sequences` on Anthropic; Responses has none).
    #[must_use]
    pub fn with_stop<S: Into<String>>(
        mut self,
        sequences: impl IntoIterator<Item = S>,
    ) -> ModelSettings {
        self.stop = Some(sequences.into_iter().map(Into::into).collect());
        self
    }
    /// A copy with a sampling seed (`seed`; chat completions only).
    #[must_use]
    pub fn with_seed(mut self, seed: i64) -> ModelSettings {
        self.seed = Some(seed);
        self
    }
    /// A copy with a tool choice.
    #[must_use]
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> ModelSettings {
        self.tool_choice = Some(choice);
        self
    }
    /// A copy allowing (or not) several tool calls in one answer.
    #[must_use]
    pub fn with_parallel_tool_calls(mut self, on: bool) -> ModelSettings {
        self.parallel_tool_calls = Some(on);
        self
    }
    /// A copy with a reasoning effort.
    #[must_use]
    pub fn with_reasoning_effort(mut self, effort: ReasoningEffort) -> ModelSettings {
        self.reasoning_effort = Some(effort);
        self
    }
    /// A copy with extended thinking on, with this budget of tokens
    /// (Anthropic's `thinking: {"type": "enabled", "budget_tokens": n}`).
    #[must_use]
    pub fn with_thinking_budget(mut self, tokens: u64) -> ModelSettings {
        self.thinking_budget = Some(tokens);
        self
    }

    /// The temperature, if set.
    pub fn temperature(&self) -> Option<f64> {
        self.temperature
    }
    /// The `top_p`, if set.
    pub fn top_p(&self) -> Option<f64> {
        self.top_p
    }
    /// The bound on an answer's tokens, if set.
    pub fn max_output_tokens(&self) -> Option<u64> {
        self.max_output_tokens
    }
    /// The stop sequences, if set.
    pub fn stop(&self) -> Option<&[String]> {
        self.stop.as_deref()
    }
    /// The seed, if set.
    pub fn seed(&self) -> Option<i64> {
        self.seed
    }
    /// The tool choice, if set.
    pub fn tool_choice(&self) -> Option<&ToolChoice> {
        self.tool_choice.as_ref()
    }
    /// Whether parallel tool calls are allowed, if set.
    pub fn parallel_tool_calls(&self) -> Option<bool> {
        self.parallel_tool_calls
    }
    /// The reasoning effort, if set.
    pub fn reasoning_effort(&self) -> Option<ReasoningEffort> {
        self.reasoning_effort
    }
    /// The thinking budget, if set.
    pub fn thinking_budget(&self) -> Option<u64> {
        self.thinking_budget
    }
    /// Whether no setting is set.
    ///
    /// ```
    /// use pikuri::ModelSettings;
    /// assert!(ModelSettings::new().is_empty());
    /// assert!(!ModelSettings::new().with_seed(1).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        *self == ModelSettings::default()
    }

    /// These settings over `base`: each field set here wins, each unset
    /// one is `base`'s.
    ///
    /// ```
    /// use pikuri::ModelSettings;
    /// let base = ModelSettings::new().with_temperature(1.0).with_seed(3);
    /// let run = ModelSettings::new().with_temperature(0.0);
    /// let both = run.over(&base);
    /// assert_eq!((both.temperature(), both.seed()), (Some(0.0), Some(3)));
    /// ```
    #[must_use]
    pub fn over(&self, base: &ModelSettings) -> ModelSettings {
        ModelSettings {
            temperature: self.temperature.or(base.temperature),
            top_p: self.top_p.or(base.top_p),
            max_output_tokens: self.max_output_tokens.or(base.max_output_tokens),
            stop: self.stop.clone().or_else(|| base.stop.clone()),
            seed: self.seed.or(base.seed),
            tool_choice: self
                .tool_choice
                .clone()
                .or_else(|| base.tool_choice.clone()),
            parallel_tool_calls: self.parallel_tool_calls.or(base.parallel_tool_calls),
            reasoning_effort: self.reasoning_effort.or(base.reasoning_effort),
            thinking_budget: self.thinking_budget.or(base.thinking_budget),
        }
    }

    /// Why a request of `api` cannot carry these settings, as an error
    /// message: a temperature or `top_p` that is not a finite number (JSON
    /// has no NaN), or the first setting `api` has no field for.
    pub(crate) fn problem(&self, api: Api) -> Option<String> {
        for (name, value) in [("temperature", self.temperature), ("top_p", self.top_p)] {
            if let Some(v) = value.filter(|v| !v.is_finite()) {
                return Some(format!(
                    "the model setting `{name}` is {v}: it must be a finite number"
                ));
            }
        }
        let (name, what) = match api {
            Api::ChatCompletions => (
                self.thinking_budget.map(|_| "thinking_budget"),
                "OpenAI chat completions",
            ),
            Api::AnthropicMessages => (self.seed.map(|_| "seed"), "Anthropic Messages"),
            Api::OpenAiResponses => (
                self.seed
                    .map(|_| "seed")
                    .or(self.stop.as_ref().map(|_| "stop"))
                    .or(self.thinking_budget.map(|_| "thinking_budget")),
                "OpenAI Responses",
            ),
            // Gemini calls tools in parallel as it sees fit: no switch.
            Api::Gemini => (
                self.parallel_tool_calls
                    .filter(|p| !p)
                    .map(|_| "parallel_tool_calls"),
                "Gemini",
            ),
        };
        name.map(|n| {
            format!(
                "the model setting `{n}` has no field in the {what} API: unset it for this \
                 transport, or send the API's own field with `request_field`"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_names_are_pinned() {
        let s = ModelSettings::new()
            .with_temperature(0.5)
            .with_top_p(0.9)
            .with_max_output_tokens(10)
            .with_stop(["END"])
            .with_seed(1)
            .with_tool_choice(ToolChoice::Tool("f".into()))
            .with_parallel_tool_calls(false)
            .with_reasoning_effort(ReasoningEffort::Minimal)
            .with_thinking_budget(2048);
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "temperature": 0.5, "top_p": 0.9, "max_output_tokens": 10,
                "stop": ["END"], "seed": 1, "tool_choice": {"tool": "f"},
                "parallel_tool_calls": false, "reasoning_effort": "minimal",
                "thinking_budget": 2048,
            })
        );
        assert_eq!(serde_json::from_value::<ModelSettings>(v).unwrap(), s);
        assert_eq!(
            serde_json::to_value(ToolChoice::Required).unwrap(),
            "required"
        );
        assert_eq!(serde_json::to_string(&ModelSettings::new()).unwrap(), "{}");
    }

    #[test]
    fn unsupported_settings_name_the_setting_and_the_api() {
        let seed = ModelSettings::new().with_seed(1);
        assert_eq!(seed.problem(Api::ChatCompletions), None);
        let e = seed.problem(Api::AnthropicMessages).unwrap();
        assert!(e.contains("`seed`") && e.contains("Anthropic"), "{e}");
        let stop = ModelSettings::new().with_stop(["x"]);
        assert_eq!(stop.problem(Api::AnthropicMessages), None);
        assert!(
            stop.problem(Api::OpenAiResponses)
                .unwrap()
                .contains("`stop`")
        );
        let think = ModelSettings::new().with_thinking_budget(1024);
        assert_eq!(think.problem(Api::AnthropicMessages), None);
        assert!(
            think
                .problem(Api::ChatCompletions)
                .unwrap()
                .contains("thinking_budget")
        );
    }

    #[test]
    fn a_tool_choice_reads_as_the_derive_read_it() {
        let choices = [
            ToolChoice::Auto,
            ToolChoice::None,
            ToolChoice::Required,
            ToolChoice::Tool("f".into()),
        ];
        let written: Vec<String> = choices
            .iter()
            .map(|c| serde_json::to_string(c).unwrap())
            .collect();
        assert_eq!(
            written,
            [r#""auto""#, r#""none""#, r#""required""#, r#"{"tool":"f"}"#]
        );
        for (form, choice) in written.iter().zip(&choices) {
            assert_eq!(&serde_json::from_str::<ToolChoice>(form).unwrap(), choice);
            let value: serde_json::Value = serde_json::from_str(form).unwrap();
            assert_eq!(
                &serde_json::from_value::<ToolChoice>(value).unwrap(),
                choice
            );
        }
        // A unit variant also reads in the map form, its value null.
        assert_eq!(
            serde_json::from_str::<ToolChoice>(r#"{"auto":null}"#).unwrap(),
            ToolChoice::Auto
        );
        let inputs = [
            r#""tool""#,
            r#""any""#,
            r#"{"tool":1}"#,
            r#"{"tool":"a","auto":null}"#,
            r"{}",
            r"7",
            r#"{"temperature":"hot"}"#,
            r#"{"reasoning_effort":"max"}"#,
        ];
        let errors: Vec<String> = inputs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if i < 6 {
                    serde_json::from_str::<ToolChoice>(s)
                        .unwrap_err()
                        .to_string()
                } else {
                    serde_json::from_str::<ModelSettings>(s)
                        .unwrap_err()
                        .to_string()
                }
            })
            .collect();
        let expected: &[&str] = &[
            r"invalid type: unit variant, expected newtype variant",
            r"unknown variant `any`, expected one of `auto`, `none`, `required`, `tool` at line 1 column 5",
            r"invalid type: integer `1`, expected a string at line 1 column 9",
            r"expected value at line 1 column 11",
            r"expected value at line 1 column 2",
            r"expected value at line 1 column 1",
            r#"invalid type: string "hot", expected f64 at line 1 column 20"#,
            r"unknown variant `max`, expected one of `minimal`, `low`, `medium`, `high` at line 1 column 25",
        ];
        assert_eq!(errors, expected, "errors:\n{}", errors.join("\n"));
        let efforts = [
            ReasoningEffort::Minimal,
            ReasoningEffort::Low,
            ReasoningEffort::Medium,
            ReasoningEffort::High,
        ];
        for e in efforts {
            let form = serde_json::to_string(&e).unwrap();
            assert_eq!(form, format!("\"{}\"", e.as_str()));
            assert_eq!(serde_json::from_str::<ReasoningEffort>(&form).unwrap(), e);
        }
    }
}
