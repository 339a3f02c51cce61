//! The `calculator` tool: arithmetic without `eval`.

use crate::ToolError;
use crate::tool::{FnTool, Parameters};

// ---------------------------------------------------------------------------
// calculator

/// The longest expression the calculator accepts, in characters.
const MAX_EXPRESSION_CHARS: usize = 1000;
/// How deeply parentheses, signs and powers may nest.
const MAX_DEPTH: usize = 64;
/// Integers up to this magnitude are exact in an `f64` and printed in full.
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53

/// The `calculator` tool: evaluates an arithmetic expression.
///
/// It takes `expression` and knows `+ - * / % ^` (`**` is accepted for `^`)
/// with the usual precedence, `^` binding tighter than a sign and grouping to
/// the right (`-2^2` is -4, `2^3^2` is 512), parentheses, decimals and `1e3`
/// notation. `%` is the remainder with the sign of the dividend.
///
/// The result is computed in `f64`. Integers up to 2^53 are printed exactly
/// and without a fraction (`"4"`); other results are rounded to 15
/// significant digits (`0.1 + 0.2` gives `"0.3"`), and very large or small
/// magnitudes use exponent notation (`"1e300"`).
///
/// Division or remainder by zero, a syntax error, a result that overflows or
/// is not a real number, an expression over 1000 characters or nested more
/// than 64 levels deep are [`ToolError`]s that say what is wrong.
///
/// # Examples
///
/// ```
/// use pikuri::builtin::calculator;
/// use pikuri::{Tool, ToolContext};
/// use serde_json::json;
///
/// let calc = calculator();
/// let cx = ToolContext::detached();
/// assert_eq!(calc.call(&json!({"expression": "2 + 3 * 4"}), &cx)?, "14");
/// assert_eq!(calc.call(&json!({"expression": "2^-1"}), &cx)?, "0.5");
/// assert_eq!(calc.call(&json!({"expression": "-(1.5 + 1.25)"}), &cx)?, "-2.75");
/// let err = calc.call(&json!({"expression": "1/0"}), &cx).unwrap_err();
/// assert_eq!(err.message(), "division by zero");
/// # Ok::<(), pikuri::ToolError>(())
/// ```
pub fn calculator() -> FnTool {
    FnTool::new(
        "calculator",
        "Evaluates an arithmetic expression and returns the number. Supports + - * / \
         % (remainder) ^ (power), parentheses, decimals and 1e3 notation, e.g. \
         `(2 + 3) * 4^2 / 7`.",
        Parameters::builder()
            .required_string("expression", "The expression, e.g. `(2 + 3) * 4`.")
            .build(),
        |args, _cx| {
            let expression = args["expression"].as_str().unwrap_or_default();
            evaluate(expression)
                .map(format_number)
                .map_err(ToolError::new)
        },
    )
    // A pure function of its arguments: a resumed run computes it again.
    .idempotent_calls()
}

/// Evaluate an expression; the error is the message for the model.
fn evaluate(expression: &str) -> Result<f64, String> {
    let chars = expression.chars().count();
    if chars > MAX_EXPRESSION_CHARS {
        return Err(format!(
            "the expression is too long ({chars} characters; the limit is \
             {MAX_EXPRESSION_CHARS})"
        ));
    }
    if expression.trim().is_empty() {
        return Err("the expression is empty".to_string());
    }
    let mut parser = Parser {
        text: expression,
        pos: 0,
        depth: 0,
    };
    let value = parser.expr()?;
    parser.skip_whitespace();
    if parser.pos < expression.len() {
        return Err(parser.unexpected());
    }
    Ok(value)
}

/// A recursive-descent parser that evaluates as it goes.
///
/// ```text
/// expr    = term (("+" | "-") term)*
/// term    = unary (("*" | "/" | "%") unary)*
/// unary   = ("-" | "+") unary | power
/// power   = primary (("^" | "**") unary)?
/// primary = number | "(" expr ")"
/// ```
///
/// Every nesting goes through `unary`, which counts the depth.
struct Parser<'a> {
    text: &'a str,
    /// Byte offset of the next character.
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn expr(&mut self) -> Result<f64, String> {
        let mut value = self.term()?;
        loop {
            self.skip_whitespace();
            let op = match self.peek() {
                Some(b'+') => '+',
                Some(b'-') => '-',
                _ => return Ok(value),
            };
            self.pos += 1;
            let rhs = self.term()?;
            value = finite(if op == '+' { value + rhs } else { value - rhs })?;
        }
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        loop {
            self.skip_whitespace();
            let op = match self.peek() {
                Some(b'*') => '*',
                Some(b'/') => '/',
                Some(b'%') => '%',
                _ => return Ok(value),
            };
            self.pos += 1;
            let rhs = self.unary()?;
            value = match op {
                '*' => finite(value * rhs)?,
                _ if rhs == 0.0 => {
                    return Err(if op == '/' {
                        "division by zero".to_string()
                    } else {
                        "remainder (%) by zero".to_string()
                    });
                }
                '/' => finite(value / rhs)?,
                _ => finite(value % rhs)?,
            };
        }
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "the expression is nested too deeply (more than {MAX_DEPTH} levels of \
                 parentheses, signs or powers)"
            ));
        }
        self.skip_whitespace();
        let value = match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                -self.unary()?
            }
            Some(b'+') => {
                self.pos += 1;
                self.unary()?
            }
            _ => self.power()?,
        };
        self.depth -= 1;
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.primary()?;
        self.skip_whitespace();
        if self.peek() == Some(b'^') {
            self.pos += 1;
        } else if self.text[self.pos..].starts_with("**") {
            self.pos += 2;
        } else {
            return Ok(base);
        }
        let exponent = self.unary()?;
        if base < 0.0 && exponent.fract() != 0.0 {
            return Err(
                "a negative number raised to a fractional power is not a real number".to_string(),
            );
        }
        if base == 0.0 && exponent < 0.0 {
            return Err("division by zero (0 raised to a negative power)".to_string());
        }
        finite(base.powf(exponent))
    }

    fn primary(&mut self) -> Result<f64, String> {
        self.skip_whitespace();
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                let value = self.expr()?;
                self.skip_whitespace();
                if self.peek() == Some(b')') {
                    self.pos += 1;
                    Ok(value)
                } else if self.peek().is_none() {
                    Err("missing `)` at the end of the expression".to_string())
                } else {
                    Err(self.unexpected())
                }
            }
            Some(b'0'..=b'9' | b'.') => self.number(),
            None => Err("the expression ends early: expected a number or `(`".to_string()),
            Some(_) => Err(self.unexpected()),
        }
    }

    fn number(&mut self) -> Result<f64, String> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.pos += 1;
            }
            p.pos - from
        };
        let mut mantissa_digits = digits(self);
        if self.peek() == Some(b'.') {
            self.pos += 1;
            mantissa_digits += digits(self);
        }
        let mut well_formed = mantissa_digits > 0;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            well_formed &= digits(self) > 0;
        }
        let literal = &self.text[start..self.pos];
        if !well_formed {
            return Err(format!("malformed number `{literal}`"));
        }
        match literal.parse::<f64>() {
            Ok(value) if value.is_finite() => Ok(value),
            _ => Err(format!("the number `{literal}` is too large")),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// The error for the character at `pos` (which exists).
    fn unexpected(&self) -> String {
        let c = self.text[self.pos..].chars().next().unwrap_or(' ');
        let column = self.text[..self.pos].chars().count() + 1;
        format!("unexpected `{c}` at character {column}")
    }
}

fn finite(value: f64) -> Result<f64, String> {
    if value.is_finite() {
        Ok(value)
    } else if value.is_nan() {
        Err("the result is not a number".to_string())
    } else {
        Err("the result is too large (overflow)".to_string())
    }
}

/// `4` not `4.0`; integers to 2^53 exact; otherwise 15 significant digits.
pub(super) fn format_number(value: f64) -> String {
    if value == 0.0 {
        return "0".to_string(); // also -0
    }
    if value.fract() == 0.0 && value.abs() <= EXACT_INTEGER_LIMIT {
        return format!("{}", value as i64);
    }
    // Round to 15 significant digits, which hides binary noise such as
    // 0.1 + 0.2 = 0.30000000000000004, then print the shortest form.
    let rounded: f64 = format!("{value:.14e}").parse().unwrap_or(value);
    let magnitude = rounded.abs();
    if (1e-6..1e16).contains(&magnitude) {
        format!("{rounded}")
    } else {
        format!("{rounded:e}")
    }
}
