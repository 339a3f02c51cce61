//! Spending limits: [`Budget`], its [`PriceTable`], and the `Meter` that
//! counts a run's [`Spend`] for the whole tree of agents.
//!
//! The rules are written once, on [`Budget`]; the loop calls the hooks in
//! `metering.rs` at its boundaries (`turn.rs`, `batch.rs`: the run's start, before
//! each request, each answered request, each tool call, the run's end).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::spend::{Cost, Limit, micros};
use crate::{OnExhausted, Spend, Usage};

/// What a model costs: microdollars per million tokens, for fresh input,
/// cached input, cache writes and output.
///
/// A price is whole microdollars per million tokens, so one token costs a
/// whole number of picodollars and a [`Cost`] is exact (see [`Cost`]).
///
/// # Examples
///
/// ```
/// use pikuri::Usage;
/// use pikuri::budget::{Cost, Price};
/// let p = Price::per_million_usd(3.0, 15.0).cached_input_usd(0.30).cache_write_usd(3.75);
/// let u = Usage::new().with_input(1_000).with_cached(10_000).with_cache_creation(2_000).with_output(500);
/// // 3000 + 3000 + 7500 + 7500 microdollars
/// assert_eq!(p.cost(&u), Cost::from_micro_usd(21_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Price {
    input: u64,
    cached_input: u64,
    cache_write: u64,
    output: u64,
}

impl Price {
    /// Dollars per million input and output tokens, each rounded to the
    /// nearest microdollar. Cached input and cache writes cost as much as
    /// input until set (the safe side: never under the real bill).
    pub fn per_million_usd(input: f64, output: f64) -> Price {
        Price::per_million_micro_usd(micros(input), micros(output))
    }

    /// Microdollars per million input and output tokens (exact).
    pub const fn per_million_micro_usd(input: u64, output: u64) -> Price {
        Price {
            input,
            cached_input: input,
            cache_write: input,
            output,
        }
    }

    /// A copy with the price of cached input tokens, dollars per million.
    #[must_use]
    pub fn cached_input_usd(mut self, usd: f64) -> Price {
        self.cached_input = micros(usd);
        self
    }

    /// A copy with the price of tokens written to a cache, dollars per
    /// million.
    #[must_use]
    pub fn cache_write_usd(mut self, usd: f64) -> Price {
        self.cache_write = micros(usd);
        self
    }

    /// What `usage` costs at this price: fresh input, cached, cache-written
    /// and output tokens each at theirs (reasoning tokens are inside
    /// output); saturating.
    pub fn cost(&self, usage: &Usage) -> Cost {
        let part =
            |tokens: Option<u64>, price: u64| u128::from(tokens.unwrap_or(0)) * u128::from(price);
        let pico = part(usage.input, self.input)
            .saturating_add(part(usage.cached, self.cached_input))
            .saturating_add(part(usage.cache_creation, self.cache_write))
            .saturating_add(part(usage.output, self.output));
        Cost::from_pico_usd(u64::try_from(pico).unwrap_or(u64::MAX))
    }

    /// What `tokens` of fresh input cost (the estimate before a request).
    fn input_cost(&self, tokens: u64) -> Cost {
        self.cost(&Usage::new().with_input(tokens))
    }
}

/// Prices by model name, as the transport names the model
/// ([`ChatTransport::model`](crate::ChatTransport::model)).
///
/// # Examples
///
/// ```
/// use pikuri::budget::{Price, PriceTable};
/// let table = PriceTable::new().with("gpt-4o-mini", Price::per_million_usd(0.15, 0.60));
/// assert!(table.get("gpt-4o-mini").is_some());
/// assert!(table.get("gpt-4o").is_none());
/// ```
#[derive(Clone, Debug, Default)]
pub struct PriceTable {
    prices: HashMap<String, Price>,
}

impl PriceTable {
    /// An empty table.
    pub fn new() -> PriceTable {
        PriceTable::default()
    }

    /// A copy with `model` priced at `price` (replacing its price).
    #[must_use]
    pub fn with(mut self, model: impl Into<String>, price: Price) -> PriceTable {
        self.prices.insert(model.into(), price);
        self
    }

    /// The price of `model`.
    pub fn get(&self, model: &str) -> Option<Price> {
        self.prices.get(model).copied()
    }
}

/// Limits on what a run may spend: requests, tokens, tool calls, wall time
/// and money.
///
/// Set with [`Configurator::budget`](crate::Configurator::budget). Every
/// limit is off until set; a limit of zero allows nothing of its kind (a
/// `max_requests(0)` run sends no request), `u64::MAX` is no limit.
///
/// # Examples
///
/// ```
/// use pikuri::{Agent, Budget, Error, StopReason};
/// use pikuri::budget::Limit;
/// use pikuri::testing::{FakeServer, Reply};
///
/// let server = FakeServer::start();
/// server.push(Reply::tool_call("clock", serde_json::json!({})).with_usage(100, 10));
/// let mut agent = Agent::builder(server.transport())
///     .budget(Budget::new().max_requests(1))
///     .build()?;
/// let err = agent.run_loop("what time is it?").unwrap_err();
/// let Error::BudgetExceeded { limit, spend, .. } = &err else { panic!("{err}") };
/// assert_eq!(*limit, Limit::Requests);
/// assert_eq!(spend.requests, 1);
/// assert_eq!(server.chat_requests().len(), 1, "the second request was never sent");
/// assert_eq!(agent.last_stop_reason(), Some(StopReason::Budget));
/// # Ok::<(), pikuri::Error>(())
/// ```
///
/// # What counts
///
/// One count per run of the agent the host called, shared live by its
/// whole tree: the [sub-agents](crate::subagent::SubAgents), the
/// [synthesizer](crate::subagent::Synthesizer) and the
/// [compactor](crate::compaction::Compaction) count into it and are
/// stopped by it. Input tokens are [`Usage::context_used`] (fresh, cached
/// and cache-written); total tokens are [`Usage::total`]. The count starts
/// afresh with each run ([`run_loop`](crate::Agent::run_loop),
/// [`retry_turn`](crate::Agent::retry_turn),
/// [`resume`](crate::Agent::resume)): a budget is per run, like the
/// [`StepLimit`](crate::StepLimit); limits over the agent's lifetime go
/// beside it ([`Budget::lifetime`]). A run resumed from a journal
/// ([`resume_run`](crate::Agent::resume_run)) continues the count its
/// journal recorded: a crash does not refill the budget. A
/// [`Judge`](crate::guard::Judge) guard's requests count too, and are
/// refused as the loop's own ([Budgets](crate::guard::Judge#budgets)).
///
/// # When it is checked
///
/// - **Before each request**: a request is not sent when the run already
///   reached a limit, when it would be one request too many, when the
///   wall time is up, or when its input alone, estimated as compaction
///   estimates it ([The estimate](crate::compaction::Compaction#the-estimate)),
///   would pass the input, total or cost limit. An output limit already
///   reached refuses the request too.
/// - **After each response**: its usage is counted; a tool call of that
///   response is not run once a limit is passed (its call is answered
///   `"Error: not run: budget exhausted"`), nor one past
///   [`max_tool_calls`](Budget::max_tool_calls). A final answer that passes
///   a limit is still the answer: it was paid for. One response may pass
///   the output limit by at most its own length.
///
/// # When it trips
///
/// [`Event::BudgetExceeded`](crate::Event::BudgetExceeded) names the limit and what was spent, then, as
/// the step limit does, the [policy](Budget::on_exhausted) decides:
/// [`OnExhausted::Raise`] ends the run with [`Error::BudgetExceeded`](crate::Error::BudgetExceeded)
/// ([`StopReason::Budget`](crate::StopReason::Budget) on
/// [`Event::Stopped`](crate::Event::Stopped)); [`OnExhausted::Synthesize`] lets the synthesizer
/// answer from what was gathered, with **one** more request past the
/// limit (counted in the spend) and the outcome's stop reason
/// [`Synthesized`](crate::StopReason::Synthesized). The history is valid
/// either way, and the next turn gets a fresh budget.
///
/// # Cost
///
/// With a [`max_cost`](Budget::max_cost), the price table must price the
/// agent's model ([`Configurator::build`](crate::Configurator::build)
/// fails with [`Error::InvalidInput`](crate::Error::InvalidInput) otherwise). A request to a model the
/// table does not price (a fallback, a switched model) is then not sent:
/// the run stops on [`Limit::Cost`], as the cost could not be bounded.
/// Without a cost limit such a request is sent and
/// [`Spend::cost`](crate::Spend::cost) becomes `None` (unknown, not zero).
#[derive(Clone, Debug, Default)]
pub struct Budget {
    requests: Option<u64>,
    input: Option<u64>,
    output: Option<u64>,
    total: Option<u64>,
    tool_calls: Option<u64>,
    wall: Option<Duration>,
    cost: Option<Cost>,
    prices: Option<Arc<PriceTable>>,
    on_exhausted: OnExhausted,
    /// The limits over the agent's lifetime, beside the run's.
    lifetime: Option<Box<Budget>>,
}

/// Which limit refused a request or stopped a tool call: a run's, or the
/// agent's lifetime's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) limit: Limit,
    pub(crate) lifetime: bool,
}

impl Budget {
    /// No limit and no prices: it counts (see [`Spend`]) and never stops.
    pub fn new() -> Budget {
        Budget::default()
    }

    /// At most `n` requests answered in a run.
    #[must_use]
    pub fn max_requests(mut self, n: u64) -> Budget {
        self.requests = Some(n);
        self
    }

    /// At most `n` input tokens in a run ([`Spend::input_tokens`]).
    #[must_use]
    pub fn max_input_tokens(mut self, n: u64) -> Budget {
        self.input = Some(n);
        self
    }

    /// At most `n` output tokens in a run.
    #[must_use]
    pub fn max_output_tokens(mut self, n: u64) -> Budget {
        self.output = Some(n);
        self
    }

    /// At most `n` tokens, input and output, in a run.
    #[must_use]
    pub fn max_total_tokens(mut self, n: u64) -> Budget {
        self.total = Some(n);
        self
    }

    /// At most `n` tool calls in a run, the sub-agents' included (the
    /// [`StepLimit`](crate::StepLimit) counts one agent's).
    #[must_use]
    pub fn max_tool_calls(mut self, n: u64) -> Budget {
        self.tool_calls = Some(n);
        self
    }

    /// At most `d` of wall time, checked before each request and each tool
    /// call (a request or tool in progress is not cut: cancel with a
    /// [`Cancellable`](crate::Cancellable) for that).
    #[must_use]
    pub fn max_wall_time(mut self, d: Duration) -> Budget {
        self.wall = Some(d);
        self
    }

    /// At most `cost` in a run, priced by the [`prices`](Budget::prices)
    /// (which it requires).
    #[must_use]
    pub fn max_cost(mut self, cost: Cost) -> Budget {
        self.cost = Some(cost);
        self
    }

    /// The price table the cost is figured from.
    #[must_use]
    pub fn prices(mut self, table: PriceTable) -> Budget {
        self.prices = Some(Arc::new(table));
        self
    }

    /// Limits on what the agent spends over its lifetime, all its runs
    /// together, beside this budget's per-run ones: `limits`' request,
    /// token, tool call, wall time (the runs' own, summed) and cost limits
    /// (priced by this budget's [`prices`](Budget::prices); `limits`' own
    /// prices, policy and lifetime are ignored).
    ///
    /// A lifetime limit always ends the run with
    /// [`Error::BudgetExceeded`](crate::Error::BudgetExceeded) whose
    /// `lifetime` is true and whose spend is the lifetime's (no synthesis:
    /// that would spend past it), and every later run is refused before
    /// its first request the same way. The lifetime count survives a
    /// [journal](crate::Configurator::journal) resume: each response's
    /// record keeps what the earlier runs spent.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Agent, Budget, Error};
    /// use pikuri::budget::Limit;
    /// use pikuri::testing::{FakeServer, Reply};
    ///
    /// let server = FakeServer::start();
    /// server.push(Reply::text("one").with_usage(100, 10));
    /// server.push(Reply::text("two").with_usage(100, 10));
    /// let budget = Budget::new()
    ///     .max_requests(10) // per run
    ///     .lifetime(Budget::new().max_requests(2)); // all runs
    /// let mut agent = Agent::builder(server.transport()).budget(budget).build()?;
    /// agent.run_loop("first")?;
    /// agent.run_loop("second")?; // two requests in all: the lifetime is spent
    /// let err = agent.run_loop("third").unwrap_err();
    /// let Error::BudgetExceeded { limit, spend, lifetime } = &err else { panic!("{err}") };
    /// assert_eq!((*limit, *lifetime), (Limit::Requests, true));
    /// assert_eq!((spend.requests, spend.total_tokens()), (2, 220));
    /// assert_eq!(server.chat_requests().len(), 2, "the third run sent nothing");
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    #[must_use]
    pub fn lifetime(mut self, mut limits: Budget) -> Budget {
        limits.prices = None;
        limits.on_exhausted = OnExhausted::Raise;
        limits.lifetime = None;
        self.lifetime = Some(Box::new(limits));
        self
    }

    /// What a tripped limit does (default [`OnExhausted::Raise`]).
    #[must_use]
    pub fn on_exhausted(mut self, policy: OnExhausted) -> Budget {
        self.on_exhausted = policy;
        self
    }

    /// The policy.
    pub fn policy(&self) -> OnExhausted {
        self.on_exhausted
    }

    /// Nothing spent, the cost zero when prices are set.
    fn zero(&self) -> Spend {
        Spend {
            cost: self.prices.is_some().then_some(Cost::ZERO),
            ..Spend::default()
        }
    }

    /// The configuration check: a cost limit needs a price for `model`.
    pub(crate) fn misconfigured(&self, model: Option<&str>) -> Option<String> {
        let cost = self.cost.is_some() || self.lifetime.as_ref().is_some_and(|l| l.cost.is_some());
        (cost && self.price(model).is_none()).then(|| {
            format!(
                "a cost limit needs the price of model `{}` in the budget's price table",
                model.unwrap_or("")
            )
        })
    }

    fn price(&self, model: Option<&str>) -> Option<Price> {
        self.prices.as_ref()?.get(model?)
    }

    /// Whether anything is limited or priced.
    pub(super) fn is_set(&self) -> bool {
        self.prices.is_some() || self.lifetime.is_some() || self.limits()
    }

    /// Whether a limit is set, on the run or over the lifetime: without
    /// one no check can refuse (prices alone only count), so the loop skips
    /// them (`Meter::limits`).
    fn limits(&self) -> bool {
        self.requests.is_some()
            || self.input.is_some()
            || self.output.is_some()
            || self.total.is_some()
            || self.tool_calls.is_some()
            || self.wall.is_some()
            || self.cost.is_some()
            || self.lifetime.as_ref().is_some_and(|l| l.limits())
    }

    /// Whether a price table is set: without one a request's model does
    /// not change what it counts.
    pub(super) fn is_priced(&self) -> bool {
        self.prices.is_some()
    }

    /// Whether a check needs the request's input estimate.
    fn needs_estimate(&self) -> bool {
        self.input.is_some()
            || self.total.is_some()
            || self.cost.is_some()
            || self.lifetime.as_ref().is_some_and(|l| l.needs_estimate())
    }

    /// Whether limits over the agent's lifetime are set.
    pub(super) fn has_lifetime(&self) -> bool {
        self.lifetime.is_some()
    }

    /// The first limit `spend` has passed.
    fn passed(&self, s: &Spend) -> Option<Limit> {
        let over = |limit: Option<u64>, v: u64| limit.is_some_and(|m| v > m);
        [
            (over(self.requests, s.requests), Limit::Requests),
            (over(self.input, s.input_tokens()), Limit::InputTokens),
            (over(self.output, s.output_tokens()), Limit::OutputTokens),
            (over(self.total, s.total_tokens()), Limit::TotalTokens),
            (over(self.tool_calls, s.tool_calls), Limit::ToolCalls),
            (
                self.cost.is_some_and(|m| s.cost.is_none_or(|c| c > m)),
                Limit::Cost,
            ),
            (
                self.wall
                    .is_some_and(|w| u128::from(s.elapsed_ms) > w.as_millis()),
                Limit::WallTime,
            ),
        ]
        .into_iter()
        .find_map(|(hit, limit)| hit.then_some(limit))
    }

    /// Why a request to `model` carrying about `input` tokens must not be
    /// sent after `s`.
    fn refuses(&self, s: &Spend, model: Option<&str>, input: u64) -> Option<Limit> {
        // `u64::MAX` is no limit, even for counts saturated at it.
        let at = |limit: Option<u64>, v: u64| limit.is_some_and(|m| m < u64::MAX && v >= m);
        let past = |limit: Option<u64>, v: u64| limit.is_some_and(|m| v.saturating_add(input) > m);
        if let Some(limit) = self.passed(s) {
            return Some(limit);
        }
        if at(self.requests, s.requests) {
            return Some(Limit::Requests);
        }
        if self
            .wall
            .is_some_and(|w| u128::from(s.elapsed_ms) >= w.as_millis())
        {
            return Some(Limit::WallTime);
        }
        if past(self.input, s.input_tokens()) {
            return Some(Limit::InputTokens);
        }
        if at(self.output, s.output_tokens()) {
            return Some(Limit::OutputTokens);
        }
        if past(self.total, s.total_tokens()) {
            return Some(Limit::TotalTokens);
        }
        if let Some(max) = self.cost {
            let Some(price) = self.price(model) else {
                return Some(Limit::Cost);
            };
            let spent = s.cost.unwrap_or_default();
            if spent.saturating_add(price.input_cost(input)) > max {
                return Some(Limit::Cost);
            }
        }
        None
    }
}

/// The live count of one run, shared by the agent the host called and its
/// children (`child.rs` hands the parent's to each).
#[derive(Debug)]
pub(crate) struct Meter {
    budget: Budget,
    /// `budget.limits()`, read before each request and tool call.
    limited: bool,
    state: Mutex<MeterState>,
}

#[derive(Debug)]
struct MeterState {
    spend: Spend,
    start: Instant,
    /// The wall time a resumed run had spent before `start` (its journal's
    /// figure, kept as a number: on some platforms, Windows among them, an
    /// `Instant` cannot go back past the machine's boot, and back-dating
    /// `start` forgot the time of a run longer than the uptime).
    before_ms: u64,
    /// One request allowed past a tripped limit: the synthesizer's.
    grace: bool,
    /// The limit that refused a guard's request, for the loop to report.
    refused: Option<Refusal>,
    /// What the agent's earlier runs spent (their wall time summed).
    earlier: Spend,
    /// `earlier` before the last run joined it: a resumed run continues
    /// that one (`restore`), so it leaves the earlier runs again.
    prior: Spend,
    /// Which run this is (one more at each `reset`): what a guard's check
    /// spends after its run ended goes to the earlier runs, not this one.
    run: u64,
}

impl Meter {
    pub(crate) fn new(mut budget: Budget) -> Meter {
        // The lifetime's cost is priced by the run's table.
        let prices = budget.prices.clone();
        if let Some(l) = &mut budget.lifetime {
            l.prices = prices;
        }
        let zero = budget.zero();
        Meter {
            limited: budget.limits(),
            budget,
            state: Mutex::new(MeterState {
                spend: zero,
                start: Instant::now(),
                before_ms: 0,
                grace: false,
                refused: None,
                earlier: zero,
                prior: zero,
                run: 0,
            }),
        }
    }

    pub(crate) fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Whether any limit is set: without one no check can refuse, and the
    /// loop makes none (no lock, no clock read, no copy of the spend; with
    /// no budget set these were 1,300 instructions of a quick turn,
    /// BENCHMARKS.md, issue 42, session 16).
    pub(crate) fn limits(&self) -> bool {
        self.limited
    }

    /// A new run: nothing spent (what the last run spent joins the
    /// lifetime's count, which only lifetime limits read). One clock read
    /// ends the last run and starts this one.
    pub(crate) fn reset(&self) {
        let now = Instant::now();
        let mut st = self.state.lock();
        if self.budget.has_lifetime() {
            let mut last = st.spend;
            last.elapsed_ms = st
                .before_ms
                .saturating_add(crate::util::millis(now.saturating_duration_since(st.start)));
            st.prior = st.earlier;
            st.earlier = st.earlier.merged(&last);
        }
        st.spend = self.budget.zero();
        st.start = now;
        st.before_ms = 0;
        st.grace = false;
        st.refused = None;
        st.run = st.run.wrapping_add(1);
    }

    /// A resumed run: what its journal recorded was spent, the wall time
    /// included.
    #[cfg(feature = "journal")]
    pub(crate) fn restore(&self, spent: Spend) {
        let mut st = self.state.lock();
        // The run resumed is the last one, not an earlier one.
        st.earlier = st.prior;
        st.spend = spent;
        st.start = Instant::now();
        st.before_ms = spent.elapsed_ms;
    }

    /// A journal's lifetime count, on opening it: what the runs before
    /// its last one spent, and what that one spent (a new run adds it to
    /// the earlier; a resumed one goes on from it).
    #[cfg(feature = "journal")]
    pub(crate) fn restore_lifetime(&self, earlier: Spend, last: Spend) {
        {
            let mut st = self.state.lock();
            st.earlier = earlier;
            st.prior = earlier;
        }
        self.restore(last);
    }

    /// What the agent's earlier runs spent (for the journal).
    pub(crate) fn earlier(&self) -> Spend {
        self.state.lock().earlier
    }

    /// What the agent spent over its lifetime, this run included.
    pub(crate) fn lifetime_spend(&self) -> Spend {
        let run = self.spend();
        self.state.lock().earlier.merged(&run)
    }

    /// What the run spent so far.
    pub(crate) fn spend(&self) -> Spend {
        let st = self.state.lock();
        let mut s = st.spend;
        let now = crate::util::millis(st.start.elapsed());
        s.elapsed_ms = st.before_ms.saturating_add(now);
        s
    }

    /// One request answered by `model` (`completed`), or the usage a
    /// failed stream reported. Every model call of the tree comes here,
    /// the seam a model-backed guard counts through too (`Spender`).
    pub(crate) fn count(&self, model: Option<&str>, usage: Option<Usage>, completed: bool) {
        self.count_in(None, model, usage, completed);
    }

    /// [`count`](Self::count) for run `run` (`None`: the run going on):
    /// into that run's spend while it goes on, else into the earlier runs'
    /// (the lifetime's count), never into a later run's.
    fn count_in(
        &self,
        run: Option<u64>,
        model: Option<&str>,
        usage: Option<Usage>,
        completed: bool,
    ) {
        let price = self.budget.price(model);
        let mut st = self.state.lock();
        let st = &mut *st;
        let s = if run.is_none_or(|r| r == st.run) {
            &mut st.spend
        } else {
            &mut st.earlier
        };
        if completed {
            s.requests = s.requests.saturating_add(1);
        }
        let usage = usage.unwrap_or_default();
        s.usage += usage;
        s.cost = match (s.cost, price) {
            (Some(c), Some(p)) => Some(c.saturating_add(p.cost(&usage))),
            _ => None,
        };
    }

    /// Allow the synthesizer's one request past a tripped limit.
    pub(crate) fn grant_one(&self) {
        self.state.lock().grace = true;
    }

    /// Before a request: the limit that refuses it.
    pub(super) fn before_request(
        &self,
        model: Option<&str>,
        estimate: impl FnOnce() -> u64,
    ) -> Option<Refusal> {
        if !self.limited || std::mem::take(&mut self.state.lock().grace) {
            return None;
        }
        let input = if self.budget.needs_estimate() {
            estimate()
        } else {
            0
        };
        self.refuses(model, input)
    }

    /// The run's limit, then the lifetime's, that refuses a request to
    /// `model` of about `input` tokens.
    fn refuses(&self, model: Option<&str>, input: u64) -> Option<Refusal> {
        self.check(|b, s| b.refuses(s, model, input))
    }

    /// `test` on the run's budget and spend, then on the lifetime's.
    fn check(&self, test: impl Fn(&Budget, &Spend) -> Option<Limit>) -> Option<Refusal> {
        let run = test(&self.budget, &self.spend()).map(|limit| Refusal {
            limit,
            lifetime: false,
        });
        run.or_else(|| {
            let l = self.budget.lifetime.as_deref()?;
            let limit = test(l, &self.lifetime_spend())?;
            Some(Refusal {
                limit,
                lifetime: true,
            })
        })
    }

    /// The limit that refused a guard's request in this run, once.
    #[cfg(feature = "guard")]
    pub(super) fn take_refused(&self) -> Option<Refusal> {
        self.state.lock().refused.take()
    }

    /// Before a tool call: count it; the limit that stops it.
    pub(super) fn tool_call(&self) -> Option<Refusal> {
        {
            let mut st = self.state.lock();
            st.spend.tool_calls = st.spend.tool_calls.saturating_add(1);
        }
        if !self.limited {
            return None;
        }
        self.check(Budget::passed)
    }
}

/// One run's meter as lent to its guards' checks: a model-backed guard's
/// requests ([`Judge`](crate::guard::Judge)) are checked and counted as the
/// loop's own (no synthesizer's grace). A check that overran its bound is
/// not waited for, but its request still completes and was paid for: what
/// it spends counts in its run while that run goes on, and in the earlier
/// runs' (the lifetime's) count once it has ended, never in a later run.
#[cfg(feature = "guard")]
struct Lent {
    meter: Arc<Meter>,
    run: u64,
}

#[cfg(feature = "guard")]
impl Meter {
    /// The meter as the run going on lends it to a guard's check.
    pub(crate) fn lend(self: &Arc<Meter>) -> Arc<dyn crate::guard::Spender> {
        let run = self.state.lock().run;
        Arc::new(Lent {
            meter: Arc::clone(self),
            run,
        })
    }
}

#[cfg(feature = "guard")]
impl crate::guard::Spender for Lent {
    fn refuses(&self, model: Option<&str>, input: u64) -> Option<Limit> {
        let refusal = self.meter.refuses(model, input)?;
        let mut st = self.meter.state.lock();
        // Only the run that lent it reports the refusal as its stop.
        if st.run == self.run {
            st.refused = Some(refusal);
        }
        Some(refusal.limit)
    }

    fn count(&self, model: Option<&str>, usage: Option<Usage>) {
        self.meter.count_in(Some(self.run), model, usage, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spend(requests: u64, input: u64, output: u64) -> Spend {
        Spend {
            requests,
            usage: Usage::new().with_input(input).with_output(output),
            ..Spend::default()
        }
    }

    #[test]
    fn zero_limits_refuse_the_first_request() {
        let none = Spend::default();
        let b = |b: Budget| b.refuses(&none, None, 10);
        assert_eq!(b(Budget::new().max_requests(0)), Some(Limit::Requests));
        assert_eq!(
            b(Budget::new().max_input_tokens(0)),
            Some(Limit::InputTokens)
        );
        assert_eq!(
            b(Budget::new().max_output_tokens(0)),
            Some(Limit::OutputTokens)
        );
        assert_eq!(
            b(Budget::new().max_total_tokens(0)),
            Some(Limit::TotalTokens)
        );
        assert_eq!(
            b(Budget::new().max_wall_time(Duration::ZERO)),
            Some(Limit::WallTime)
        );
        assert_eq!(b(Budget::new()), None);
    }

    /// The loop's fast path (`Meter::limits` false: no check made) gives
    /// the checks' own answer: a budget without a limit refuses nothing
    /// whatever was spent, and every limit, of the run or the lifetime,
    /// turns the checks on.
    #[test]
    fn only_a_budget_with_a_limit_is_checked() {
        let prices = || PriceTable::new().with("m", Price::per_million_usd(1.0, 1.0));
        for unlimited in [
            Budget::new(),
            Budget::new().prices(prices()),
            Budget::new().on_exhausted(OnExhausted::Synthesize),
            Budget::new().lifetime(Budget::new()),
            Budget::new().prices(prices()).lifetime(Budget::new()),
            // A lifetime's own lifetime is dropped (`Budget::lifetime`).
            Budget::new().lifetime(Budget::new().lifetime(Budget::new().max_requests(0))),
        ] {
            let m = Meter::new(unlimited.clone());
            assert!(!m.limits(), "{unlimited:?}");
            let absurd = Usage::new().with_input(u64::MAX).with_output(u64::MAX);
            m.count(Some("m"), Some(absurd), true);
            m.count(Some("m"), Some(absurd), true);
            for _ in 0..3 {
                assert_eq!(m.tool_call(), None);
            }
            // The checks the fast path skips.
            assert_eq!(m.refuses(Some("m"), u64::MAX), None, "{unlimited:?}");
            assert_eq!(m.refuses(Some("unpriced"), u64::MAX), None);
            assert_eq!(m.check(Budget::passed), None);
        }
        let each =
            |b: fn(Budget) -> Budget| [b(Budget::new()), Budget::new().lifetime(b(Budget::new()))];
        let limits: [fn(Budget) -> Budget; 7] = [
            |b| b.max_requests(0),
            |b| b.max_input_tokens(0),
            |b| b.max_output_tokens(0),
            |b| b.max_total_tokens(0),
            |b| b.max_tool_calls(0),
            |b| b.max_wall_time(Duration::ZERO),
            |b| {
                b.max_cost(Cost::ZERO)
                    .prices(PriceTable::new().with("m", Price::per_million_usd(1.0, 1.0)))
            },
        ];
        for limited in limits.into_iter().flat_map(each) {
            let m = Meter::new(limited.clone());
            assert!(m.limits(), "{limited:?}");
            let refused = m
                .before_request(Some("m"), || 1_000_000)
                .or_else(|| m.tool_call());
            assert!(refused.is_some(), "{limited:?}");
        }
    }

    #[test]
    fn max_values_and_absurd_usage_do_not_overflow() {
        let m = Meter::new(
            Budget::new()
                .max_requests(u64::MAX)
                .max_total_tokens(u64::MAX)
                .prices(
                    PriceTable::new().with("m", Price::per_million_micro_usd(u64::MAX, u64::MAX)),
                ),
        );
        let absurd = Usage::new()
            .with_input(u64::MAX)
            .with_cached(u64::MAX)
            .with_cache_creation(u64::MAX)
            .with_output(u64::MAX);
        m.count(Some("m"), Some(absurd), true);
        m.count(Some("m"), Some(absurd), true);
        let s = m.spend();
        assert_eq!(s.total_tokens(), u64::MAX);
        assert_eq!(s.cost, Some(Cost::from_pico_usd(u64::MAX)));
        // u64::MAX is no limit: the saturated counts never pass it, nor
        // reach it.
        assert_eq!(m.budget.passed(&s), None);
        assert_eq!(m.budget.refuses(&s, Some("m"), u64::MAX), None);
        let at_max = Budget::new()
            .max_requests(u64::MAX)
            .max_output_tokens(u64::MAX);
        assert_eq!(at_max.refuses(&s, Some("m"), 0), None);
        let tight = Budget::new().max_total_tokens(u64::MAX - 1);
        assert_eq!(tight.refuses(&s, Some("m"), 1), Some(Limit::TotalTokens));
    }

    #[test]
    fn input_estimate_refuses_before_sending() {
        let b = Budget::new().max_input_tokens(100);
        assert_eq!(b.refuses(&spend(1, 60, 5), None, 40), None);
        assert_eq!(
            b.refuses(&spend(1, 60, 5), None, 41),
            Some(Limit::InputTokens)
        );
    }

    #[test]
    fn an_unpriced_model_is_refused_only_with_a_cost_limit() {
        let table = PriceTable::new().with("a", Price::per_million_usd(1.0, 2.0));
        let b = Budget::new()
            .prices(table.clone())
            .max_cost(Cost::from_usd(1.0));
        assert_eq!(b.misconfigured(Some("a")), None);
        assert!(b.misconfigured(Some("b")).unwrap().contains("`b`"));
        assert_eq!(
            b.refuses(&Spend::default(), Some("b"), 1),
            Some(Limit::Cost)
        );
        let m = Meter::new(Budget::new().prices(table));
        m.count(Some("a"), Some(Usage::new().with_input(1)), true);
        assert_eq!(m.spend().cost, Some(Cost::from_pico_usd(1_000_000)));
        m.count(Some("b"), Some(Usage::new().with_input(1)), true);
        assert_eq!(m.spend().cost, None, "unknown, not zero");
    }

    #[test]
    fn grace_lets_one_request_through() {
        let m = Meter::new(Budget::new().max_requests(0));
        m.grant_one();
        assert_eq!(m.before_request(None, || 0), None);
        let refused = m.before_request(None, || 0).map(|r| r.limit);
        assert_eq!(refused, Some(Limit::Requests));
    }

    /// A judge's check that overran its bound finishes after its run: its
    /// request was paid for, so it counts, in the lifetime's count and not
    /// in the run going on then; a refusal it meets is not that run's stop.
    #[cfg(feature = "guard")]
    #[test]
    fn a_guards_spend_after_its_run_counts_in_the_lifetime_not_the_next_run() {
        let priced = PriceTable::new().with("judge", Price::per_million_usd(1.0, 0.0));
        let meter = Arc::new(Meter::new(
            Budget::new()
                .prices(priced)
                .max_requests(1)
                .lifetime(Budget::new().max_requests(100)),
        ));
        let in_time = meter.lend();
        in_time.count(Some("judge"), Some(Usage::new().with_input(7)));
        assert_eq!(meter.spend().requests, 1);
        let late = meter.lend();
        meter.reset();
        late.count(Some("judge"), Some(Usage::new().with_input(5)));
        let run = meter.spend();
        assert_eq!((run.requests, run.input_tokens()), (0, 0));
        let all = meter.lifetime_spend();
        assert_eq!((all.requests, all.input_tokens()), (2, 12));
        assert_eq!(all.cost, Some(Cost::from_micro_usd(12)));
        // The late check's refusal (the run's one request is spent) is not
        // the next run's stop; the next run's own check's is.
        let now = meter.lend();
        now.count(Some("judge"), None);
        assert_eq!(late.refuses(Some("judge"), 1), Some(Limit::Requests));
        assert_eq!(meter.take_refused(), None);
        assert_eq!(now.refuses(Some("judge"), 1), Some(Limit::Requests));
        assert_eq!(meter.take_refused().map(|r| r.limit), Some(Limit::Requests));
    }
}
