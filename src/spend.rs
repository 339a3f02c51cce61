//! What a run spent, and what it may spend: [`Spend`], [`Cost`] and the
//! [`Limit`] a [`Budget`](crate::Budget) stop names.
//!
//! Plain values, below the error and the events that carry them. The
//! counting and the checks are the agent's (`agent/budget.rs`), where the
//! rules are written once: [`Budget`](crate::Budget).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Usage;
use crate::serde_macros::{json_enum, json_struct};

/// Picodollars (10⁻¹² USD) in one microdollar.
const PICO_PER_MICRO: u64 = 1_000_000;
/// Picodollars in one dollar.
const PICO_PER_USD: u64 = 1_000_000_000_000;

/// An amount of money, exact: a whole number of picodollars (10⁻¹² USD).
///
/// A price is a whole number of microdollars per million tokens
/// ([`Price`](crate::budget::Price)), so a token costs a whole number of
/// picodollars and every sum of them is exact, with no rounding at any
/// step. The sum saturates at `u64::MAX` picodollars (about 18.4 million
/// dollars): a server that reports absurd usage makes an absurd but
/// bounded cost, never an overflow. "USD" names the unit; a host whose
/// price table is in another currency reads the figures in that one.
///
/// # Examples
///
/// ```
/// use pikuri::budget::Cost;
/// let c = Cost::from_micro_usd(1_250);
/// assert_eq!(c.to_string(), "$0.00125");
/// assert_eq!(c.pico_usd(), 1_250_000_000);
/// assert_eq!(Cost::from_usd(0.5), Cost::from_micro_usd(500_000));
/// assert_eq!(Cost::from_pico_usd(u64::MAX).checked_add(Cost::from_pico_usd(1)), None);
/// ```
///
/// In JSON, the bare number of picodollars.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost(u64);

// By hand, as serde's `transparent` writes it: the number alone.
impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Cost, D::Error> {
        u64::deserialize(deserializer).map(Cost)
    }
}

impl Cost {
    /// Nothing.
    pub const ZERO: Cost = Cost(0);

    /// `pico` picodollars.
    pub const fn from_pico_usd(pico: u64) -> Cost {
        Cost(pico)
    }

    /// `micro` microdollars (saturating).
    pub const fn from_micro_usd(micro: u64) -> Cost {
        Cost(micro.saturating_mul(PICO_PER_MICRO))
    }

    /// `usd` dollars, rounded to the nearest microdollar (a flag's
    /// `--max-cost 0.50`); a negative or NaN amount is zero, an enormous
    /// one saturates.
    pub fn from_usd(usd: f64) -> Cost {
        Cost::from_micro_usd(micros(usd))
    }

    /// The amount in picodollars.
    pub const fn pico_usd(self) -> u64 {
        self.0
    }

    /// The amount in dollars, as the nearest `f64` (for display and for
    /// OpenTelemetry; compare [`Cost`]s, not these).
    #[allow(clippy::cast_precision_loss, reason = "display only")]
    pub fn usd(self) -> f64 {
        self.0 as f64 / PICO_PER_USD as f64
    }

    /// The sum, or `None` past `u64::MAX` picodollars.
    #[must_use]
    pub const fn checked_add(self, other: Cost) -> Option<Cost> {
        match self.0.checked_add(other.0) {
            Some(v) => Some(Cost(v)),
            None => None,
        }
    }

    /// The sum, saturating.
    #[must_use]
    pub const fn saturating_add(self, other: Cost) -> Cost {
        Cost(self.0.saturating_add(other.0))
    }
}

/// Dollars as whole microdollars, rounded; negative or NaN is zero.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "clamped to the u64 range first"
)]
pub(crate) fn micros(usd: f64) -> u64 {
    let m = (usd * 1e6).round();
    if m.is_nan() || m <= 0.0 {
        0
    } else if m >= u64::MAX as f64 {
        u64::MAX
    } else {
        m as u64
    }
}

/// `$1.5`, `$0.00125`: the exact amount, trailing zeros dropped (at least
/// two decimals).
impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / PICO_PER_USD;
        let frac = format!("{:012}", self.0 % PICO_PER_USD);
        let frac = frac.trim_end_matches('0');
        write!(f, "${whole}.{frac:0<2}")
    }
}

/// Which limit of a [`Budget`](crate::Budget) stopped a run
/// ([`Error::BudgetExceeded`](crate::Error::BudgetExceeded),
/// [`Event::BudgetExceeded`](crate::Event::BudgetExceeded)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`Budget::max_requests`](crate::Budget::max_requests).
    Requests,
    /// [`Budget::max_input_tokens`](crate::Budget::max_input_tokens).
    InputTokens,
    /// [`Budget::max_output_tokens`](crate::Budget::max_output_tokens).
    OutputTokens,
    /// [`Budget::max_total_tokens`](crate::Budget::max_total_tokens).
    TotalTokens,
    /// [`Budget::max_tool_calls`](crate::Budget::max_tool_calls).
    ToolCalls,
    /// [`Budget::max_wall_time`](crate::Budget::max_wall_time).
    WallTime,
    /// [`Budget::max_cost`](crate::Budget::max_cost), or a request to a
    /// model the price table does not price while a cost limit is set.
    Cost,
}

json_enum! {
    Serialize, Deserialize for Limit {
        Requests = "requests",
        InputTokens = "input_tokens",
        OutputTokens = "output_tokens",
        TotalTokens = "total_tokens",
        ToolCalls = "tool_calls",
        WallTime = "wall_time",
        Cost = "cost",
    }

    /// The snake_case name, as in JSON.
    pub fn as_str;
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a run spent: requests, tokens, tool calls, time and money, its
/// sub-agents', synthesizer's and compactor's included
/// ([`Outcome::spend`](crate::Outcome::spend)).
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, Budget};
/// use pikuri::budget::{Cost, Price, PriceTable};
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.push(Reply::text("hi").with_usage(1_000, 100));
/// let prices = PriceTable::new().with("fake-model", Price::per_million_usd(2.5, 10.0));
/// let mut agent = Agent::builder(server.transport()).budget(Budget::new().prices(prices)).build()?;
/// let spend = agent.run_loop("hello")?.spend;
/// assert_eq!((spend.requests, spend.input_tokens(), spend.output_tokens()), (1, 1_000, 100));
/// // 1,000 × $2.50/M + 100 × $10/M
/// assert_eq!(spend.cost, Some(Cost::from_micro_usd(3_500)));
/// # Ok::<(), pikuri::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Spend {
    /// Requests answered (a failed request whose stream reported usage
    /// adds its tokens, not a request).
    pub requests: u64,
    /// The tokens, summed field by field.
    pub usage: Usage,
    /// Tool calls made (counted before each runs).
    pub tool_calls: u64,
    /// The money, from the [`PriceTable`](crate::budget::PriceTable):
    /// `None` when the agent has none, or when a request went to a model
    /// the table does not price (the cost is then unknown, not zero).
    pub cost: Option<Cost>,
    /// Wall time since the run began, in milliseconds.
    pub elapsed_ms: u64,
}

json_struct! { Serialize, Deserialize for Spend { requests, usage, tool_calls, cost, elapsed_ms } }

impl Spend {
    /// Input tokens: [`Usage::context_used`] (fresh, cached and
    /// cache-written prompt tokens), what the input limit counts.
    pub fn input_tokens(&self) -> u64 {
        self.usage.context_used()
    }

    /// Output tokens (reasoning included, as servers count it).
    pub fn output_tokens(&self) -> u64 {
        self.usage.output.unwrap_or(0)
    }

    /// Every token: [`Usage::total`].
    pub fn total_tokens(&self) -> u64 {
        self.usage.total()
    }

    /// Two runs' spend together (a typed turn's repairs); the cost is
    /// unknown when either is.
    #[cfg(feature = "budgets")]
    pub(crate) fn merged(&self, other: &Spend) -> Spend {
        Spend {
            requests: self.requests.saturating_add(other.requests),
            usage: self.usage + other.usage,
            tool_calls: self.tool_calls.saturating_add(other.tool_calls),
            cost: self.cost.zip(other.cost).map(|(a, b)| a.saturating_add(b)),
            elapsed_ms: self.elapsed_ms.saturating_add(other.elapsed_ms),
        }
    }
}

impl fmt::Display for Spend {
    /// `3 requests, 1200 in, 80 out, 1 tool call, $0.0035`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |n: u64| if n == 1 { "" } else { "s" };
        write!(
            f,
            "{} request{}, {} in, {} out, {} tool call{}",
            self.requests,
            s(self.requests),
            self.input_tokens(),
            self.output_tokens(),
            self.tool_calls,
            s(self.tool_calls)
        )?;
        match self.cost {
            Some(c) => write!(f, ", {c}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_display_is_exact() {
        assert_eq!(Cost::ZERO.to_string(), "$0.00");
        assert_eq!(Cost::from_usd(1.5).to_string(), "$1.50");
        assert_eq!(Cost::from_pico_usd(1).to_string(), "$0.000000000001");
        assert_eq!(
            Cost::from_pico_usd(u64::MAX).to_string(),
            "$18446744.073709551615"
        );
    }

    #[test]
    fn spend_and_its_error_display() {
        let spend = Spend {
            requests: 1,
            usage: Usage::new().with_input(1_000).with_output(100),
            tool_calls: 1,
            cost: Some(Cost::from_micro_usd(3_500)),
            elapsed_ms: 7,
        };
        let err = crate::Error::BudgetExceeded {
            limit: Limit::Cost,
            spend: Box::new(spend),
            lifetime: false,
        };
        assert_eq!(
            err.to_string(),
            "budget exceeded: cost limit reached after 1 request, 1000 in, 100 out, 1 tool call, $0.0035"
        );
        assert_eq!(err.kind(), crate::ErrorKind::Budget);
        let none = Spend::default();
        assert_eq!(none.to_string(), "0 requests, 0 in, 0 out, 0 tool calls");
    }

    #[test]
    fn usd_rounds_and_clamps() {
        assert_eq!(micros(0.075), 75_000);
        assert_eq!(micros(-1.0), 0);
        assert_eq!(micros(f64::NAN), 0);
        assert_eq!(micros(f64::INFINITY), u64::MAX);
        assert_eq!(Cost::from_micro_usd(u64::MAX).pico_usd(), u64::MAX);
    }

    #[test]
    fn spend_writes_and_reads_its_pinned_json() {
        let spend = Spend {
            requests: 2,
            usage: Usage::new().with_input(3),
            tool_calls: 1,
            cost: Some(Cost::from_pico_usd(u64::MAX)),
            elapsed_ms: 9,
        };
        let values = [spend, Spend::default()];
        let written: Vec<String> = values
            .iter()
            .map(|s| serde_json::to_string(s).unwrap())
            .collect();
        assert_eq!(
            written,
            [
                r#"{"requests":2,"usage":{"input":3},"tool_calls":1,"cost":18446744073709551615,"elapsed_ms":9}"#,
                r#"{"requests":0,"usage":{},"tool_calls":0,"cost":null,"elapsed_ms":0}"#,
            ]
        );
        for (form, s) in written.iter().zip(values) {
            assert_eq!(serde_json::from_str::<Spend>(form).unwrap(), s);
        }
        // An absent `cost` reads as unknown.
        let read: Spend =
            serde_json::from_str(r#"{"requests":0,"usage":{},"tool_calls":0,"elapsed_ms":0}"#)
                .unwrap();
        assert_eq!(read, Spend::default());
        assert_eq!(serde_json::to_string(&Cost::from_pico_usd(7)).unwrap(), "7");
        assert_eq!(
            serde_json::from_str::<Cost>("7").unwrap(),
            Cost::from_pico_usd(7)
        );
        let limits = [
            Limit::Requests,
            Limit::InputTokens,
            Limit::OutputTokens,
            Limit::TotalTokens,
            Limit::ToolCalls,
            Limit::WallTime,
            Limit::Cost,
        ];
        for l in limits {
            let form = serde_json::to_string(&l).unwrap();
            assert_eq!(form, format!("\"{}\"", l.as_str()));
            assert_eq!(serde_json::from_str::<Limit>(&form).unwrap(), l);
        }
        let errors = [
            serde_json::from_str::<Cost>("-1").unwrap_err().to_string(),
            serde_json::from_str::<Cost>("\"1\"")
                .unwrap_err()
                .to_string(),
            serde_json::from_str::<Limit>("\"money\"")
                .unwrap_err()
                .to_string(),
            serde_json::from_str::<Spend>(r#"{"requests":1}"#)
                .unwrap_err()
                .to_string(),
            serde_json::from_str::<Spend>(
                r#"{"requests":1,"usage":{},"tool_calls":0,"cost":1.5,"elapsed_ms":0}"#,
            )
            .unwrap_err()
            .to_string(),
        ];
        let expected: &[&str] = &[
            r"invalid value: integer `-1`, expected u64 at line 1 column 2",
            r#"invalid type: string "1", expected u64 at line 1 column 3"#,
            r"unknown variant `money`, expected one of `requests`, `input_tokens`, `output_tokens`, `total_tokens`, `tool_calls`, `wall_time`, `cost` at line 1 column 7",
            r"missing field `usage` at line 1 column 14",
            r"invalid type: floating point `1.5`, expected u64 at line 1 column 50",
        ];
        assert_eq!(errors, expected, "errors:\n{}", errors.join("\n"));
    }
}
