//! The size and shape guard: a length bound, JSON validity, a JSON schema.

use serde_json::Value;

use super::{BoxError, Input, InputVerdict, Output, OutputVerdict, ToolOutput, ToolOutputVerdict};
use crate::ToolCall;
use crate::tool::Parameters;

/// Checks a text's length (in characters) and, when asked, that it is JSON
/// and matches a schema (the crate's tool-argument validator, so an
/// object schema).
///
/// - As an [`Output`] guard it sends the model back with every problem
///   ([`OutputVerdict::Retry`]);
/// - as an [`Input`] guard it answers the user with them
///   ([`InputVerdict::Block`]);
/// - as a [`ToolOutput`] guard it replaces the result with an error
///   observation naming them ([`ToolOutputVerdict::Replace`]).
///
/// # Examples
///
/// ```
/// use pikuri::guard::Shape;
/// use pikuri::tool::Parameters;
///
/// let shape = Shape::new()
///     .max_chars(100)
///     .schema(Parameters::builder().required_string("city", "City.").build());
/// assert!(shape.problems(r#"{"city": "Oslo"}"#).is_empty());
/// assert_eq!(shape.problems("Oslo"), ["the text is not JSON: expected value at line 1 column 1"]);
/// assert_eq!(
///     Shape::new().max_chars(3).problems("four"),
///     ["the text is 4 characters long, over the limit of 3"]
/// );
/// ```
#[derive(Clone, Debug, Default)]
pub struct Shape {
    max_chars: Option<usize>,
    json: bool,
    schema: Option<Parameters>,
}

impl Shape {
    /// No bound: every text passes until one is set.
    pub fn new() -> Shape {
        Shape::default()
    }

    /// At most `n` characters.
    #[must_use]
    pub fn max_chars(mut self, n: usize) -> Shape {
        self.max_chars = Some(n);
        self
    }

    /// The text must be one JSON value.
    #[must_use]
    pub fn json(mut self) -> Shape {
        self.json = true;
        self
    }

    /// The text must be JSON that `schema` accepts (implies [`json`](Self::json)).
    #[must_use]
    pub fn schema(mut self, schema: Parameters) -> Shape {
        self.json = true;
        self.schema = Some(schema);
        self
    }

    /// Every problem of `text`, one sentence each; empty when it passes.
    pub fn problems(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(max) = self.max_chars {
            let n = text.chars().count();
            if n > max {
                out.push(format!(
                    "the text is {n} characters long, over the limit of {max}"
                ));
            }
        }
        if self.json {
            match serde_json::from_str::<Value>(text) {
                Err(e) => out.push(format!("the text is not JSON: {e}")),
                Ok(v) => {
                    if let Some(Err(e)) = self.schema.as_ref().map(|s| s.validate(&v)) {
                        out.extend(e.problems().iter().cloned());
                    }
                }
            }
        }
        out
    }
}

impl Output for Shape {
    fn check(&self, answer: &str) -> Result<OutputVerdict, BoxError> {
        let p = self.problems(answer);
        Ok(if p.is_empty() {
            OutputVerdict::Allow
        } else {
            OutputVerdict::Retry(format!(
                "Your answer was not accepted: {}. Answer again.",
                p.join("; ")
            ))
        })
    }

    /// Pure and linear in the text: on the loop's thread, no hand-off.
    fn inline(&self) -> bool {
        true
    }
}

impl Input for Shape {
    fn check(&self, text: &str) -> Result<InputVerdict, BoxError> {
        let p = self.problems(text);
        Ok(if p.is_empty() {
            InputVerdict::Allow
        } else {
            InputVerdict::Block(format!("Your message was not accepted: {}.", p.join("; ")))
        })
    }

    /// Pure and linear in the text: on the loop's thread, no hand-off.
    fn inline(&self) -> bool {
        true
    }
}

impl ToolOutput for Shape {
    fn check(&self, _call: &ToolCall, output: &str) -> Result<ToolOutputVerdict, BoxError> {
        let p = self.problems(output);
        Ok(if p.is_empty() {
            ToolOutputVerdict::Allow
        } else {
            ToolOutputVerdict::Replace(format!("Error: the result was withheld: {}", p.join("; ")))
        })
    }

    /// Pure and linear in the text: on the loop's thread, no hand-off.
    fn inline(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_point_acts_on_problems_and_allows_a_good_text() {
        let s = Shape::new().json().max_chars(10);
        assert_eq!(Output::check(&s, "[1]").unwrap(), OutputVerdict::Allow);
        let OutputVerdict::Retry(f) = Output::check(&s, "not json at all").unwrap() else {
            panic!("a retry")
        };
        assert!(
            f.contains("over the limit of 10") && f.contains("not JSON"),
            "{f}"
        );
        assert!(matches!(
            Input::check(&s, "x").unwrap(),
            InputVerdict::Block(_)
        ));
        let call = ToolCall::new("1", "t", "{}");
        assert_eq!(
            ToolOutput::check(&s, &call, "{}").unwrap(),
            ToolOutputVerdict::Allow
        );
    }

    #[test]
    fn schema_problems_are_the_validators() {
        let s = Shape::new().schema(Parameters::builder().required_integer("n", "N.").build());
        let p = s.problems(r#"{"n": "three"}"#);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains('n'), "{p:?}");
    }
}
