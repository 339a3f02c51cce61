//! Property-style tests: random fault scripts against randomly configured
//! agents, with a tiny xorshift PRNG (no `rand`) and fixed seeds.
//!
//! Every case draws a script of 1 to 6 replies from every kind the
//! [`Reply`] builder offers (text, tool calls, broken tool arguments, HTTP
//! statuses, cut, malformed, garbage-laden and silent streams, raw bodies) and
//! an agent with random streaming / parallel / step-limit / retry settings.
//! Whatever the script, the run must return within a bound with `Ok` or a
//! typed [`Error`], leave a valid history that the strict server accepts, end
//! with exactly one `stopped` event, and the next turn (on a fresh server with
//! one text reply) must succeed.
//!
//! A failure names the seed and case; `PIKURI_PROP_SEED=<seed>` (hex with
//! `0x`, or decimal) and `PIKURI_PROP_CASES=<n>` rerun one seed.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{
    Agent, Error, Event, HttpConfig, OnExhausted, Role, StepLimit, StopReason,
    listeners::InMemoryEventList,
};
use serde_json::json;

use crate::util::assert_valid_history;

/// A xorshift64 generator, seeded through splitmix64 so that any seed
/// (0 included) gives a well-mixed, nonzero state.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-enough in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `below` for indices and counts.
    pub(crate) fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// True with probability `1 / n`.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    pub(crate) fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }
}

/// A seed from the environment variable `name` (hex with `0x`, or decimal).
pub(crate) fn env_seed(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The fixed seeds of the suite; each runs `CASES_PER_SEED` cases.
const SEEDS: [u64; 3] = [0x5EED_0001, 0xC0FF_EE42, 0xDEAD_BEEF_F00D];
const CASES_PER_SEED: usize = 70;

/// The longest a case may take; far above the normal few milliseconds, it
/// only catches a hang.
const CASE_BOUND: Duration = Duration::from_secs(30);

const TEXTS: [&str; 6] = [
    "plain answer",
    "ünïcödé ✓ 日本語 🦀",
    "<think>hidden</think>visible",
    "line one\nline two\r\n\tindented",
    "{\"name\": \"echo\", \"arguments\": {\"text\": \"leak\"}}",
    "x",
];

const BROKEN_ARGS: [&str; 5] = [
    r#"{"text": "cut he"#,
    "not json at all",
    "[1, 2, 3]",
    r#"{"text": 42}"#,
    r#"{"wrong": "field"}"#,
];

/// One random reply of any kind the builder offers.
fn random_reply(rng: &mut Rng) -> Reply {
    let text = *rng.pick(&TEXTS);
    let chunks = rng.index(6);
    match rng.below(17) {
        0 | 1 => Reply::text(text).with_chunk_chars(rng.index(5)),
        2 | 3 => Reply::tool_call("echo", json!({"text": text})),
        4 => {
            let calls = (0..2 + rng.index(3))
                .map(|i| {
                    let name = if i == 1 && rng.coin() { "nope" } else { "echo" };
                    (name, json!({"text": format!("call {i}")}))
                })
                .collect();
            Reply::tool_calls(calls)
        }
        5 => {
            let args = *rng.pick(&BROKEN_ARGS);
            let r = Reply::raw_tool_call("echo", args);
            if rng.coin() {
                r.with_finish_reason("length")
            } else {
                r
            }
        }
        6 => {
            let code = *rng.pick(&[400u16, 401, 403, 404, 413, 422, 429, 500, 502, 503, 504]);
            let r = Reply::status(code, "scripted failure");
            if code == 429 && rng.coin() {
                // Capped by `retry_cap` below.
                r.with_retry_after(1)
            } else {
                r
            }
        }
        7 => Reply::text(text).cut_after(chunks),
        8 => Reply::tool_call("echo", json!({"text": text})).cut_after(chunks),
        9 => Reply::text(text).malformed_after(chunks),
        10 => Reply::tool_call("echo", json!({"text": text}))
            .with_garbage()
            .with_reasoning("thinking hard"),
        11 => Reply::text(text).with_garbage(),
        12 => {
            let body = *rng.pick(&[
                "{not json",
                "",
                "[]",
                "{\"choices\": []}",
                "{\"choices\": [{\"message\": 5}]}",
                "null",
            ]);
            Reply::raw_body(200, "application/json", body)
        }
        13 => {
            let body = *rng.pick(&[
                "data: {not json\n\n",
                "data: [DONE]\n\n",
                "event: ping\n\n: comment\n\n",
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
                "garbage without newline",
            ]);
            Reply::raw_sse(body)
        }
        14 => {
            let finish = *rng.pick(&["length", "stop", "content_filter", ""]);
            Reply::text(text)
                .with_reasoning("because")
                .with_finish_reason(finish)
        }
        15 => {
            // Silence is rare: each costs one read timeout.
            match rng.below(12) {
                0 => Reply::hang(),
                1 => Reply::text(text).hang_after(chunks),
                _ => Reply::text(text).with_delay(Duration::from_millis(rng.below(20))),
            }
        }
        _ => Reply::text("").with_usage(rng.below(100_000), rng.below(1000)),
    }
}

/// The agent's random settings.
#[derive(Clone, Debug)]
#[allow(clippy::struct_excessive_bools, reason = "independent random switches")]
struct Settings {
    streaming: bool,
    parallel: bool,
    split_think: bool,
    recover: bool,
    step_limit: Option<(u32, OnExhausted)>,
    retries: u32,
}

fn random_settings(rng: &mut Rng) -> Settings {
    Settings {
        streaming: rng.coin(),
        parallel: rng.coin(),
        split_think: rng.one_in(3),
        recover: rng.one_in(3),
        step_limit: if rng.coin() {
            let policy = if rng.coin() {
                OnExhausted::Raise
            } else {
                OnExhausted::Synthesize
            };
            Some((1 + rng.below(3) as u32, policy))
        } else {
            None
        },
        retries: rng.below(3) as u32,
    }
}

fn http(retries: u32) -> HttpConfig {
    HttpConfig::default()
        .with_max_retries(retries)
        .with_retry_base(Duration::from_millis(1))
        .with_retry_cap(Duration::from_millis(5))
        .with_read_timeout(Duration::from_millis(300))
        .with_max_line_bytes(64 * 1024)
}

fn echo_tool() -> FnTool {
    FnTool::new(
        "echo",
        "Echoes its text.",
        Parameters::builder().required_string("text", "t").build(),
        |args, _| Ok(format!("echo: {}", args["text"].as_str().unwrap_or(""))),
    )
}

/// Whether `e` is one of the errors a faulty server may cause (as opposed to
/// a configuration error, which no script should produce).
fn is_run_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Http { .. }
            | Error::Transport { .. }
            | Error::Connect { .. }
            | Error::Timeout { .. }
            | Error::Protocol { .. }
            | Error::Truncated
            | Error::StepLimitExceeded { .. }
    )
}

fn count(rec: &InMemoryEventList, agent: &str, kind: &str) -> usize {
    rec.events()
        .iter()
        .filter(|e| e.agent() == agent && e.kind() == kind)
        .count()
}

/// `assert_valid_history` as a bool, so that the caller can add the seed.
fn history_is_valid(agent: &Agent) -> bool {
    std::panic::catch_unwind(AssertUnwindSafe(|| assert_valid_history(agent.messages()))).is_ok()
}

/// One case: the faulty turn, the checks, the follow-up turn.
fn run_case(seed: u64, case: usize) -> Result<String, String> {
    let mut rng = Rng::new(seed ^ (case as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let settings = random_settings(&mut rng);
    let script: Vec<Reply> = (0..=rng.index(6)).map(|_| random_reply(&mut rng)).collect();
    let label = format!("seed {seed:#x} case {case}: {settings:?}\nscript: {script:#?}");

    let server = FakeServer::start();
    for r in &script {
        server.push(r.clone());
    }
    let rec = InMemoryEventList::new();
    let mut cfg = Agent::builder(server.transport().with_context_window(Some(4096)));
    cfg = cfg
        .system_prompt("You are a property-test agent.")
        .http(http(settings.retries))
        .add_listener(rec.clone())
        .add_tool(echo_tool())
        .streaming(settings.streaming)
        .parallel_tool_calls(settings.parallel)
        .split_think_tags(settings.split_think)
        .recover_text_tool_calls(settings.recover);
    if let Some((max, policy)) = settings.step_limit {
        cfg = cfg.step_limit(StepLimit::with_policy(max, policy));
    }
    let mut agent = cfg.build().map_err(|e| format!("{label}\nbuild: {e}"))?;

    let result = agent.run_loop("please go");
    let summary = match &result {
        Ok(out) => format!("ok({})", out.stop_reason),
        Err(e) => format!("err({e})"),
    };
    let fail = |what: String| format!("{label}\nresult: {result:?}\n{what}");
    check_first_turn(&agent, &rec, &result).map_err(fail)?;
    if !server.rejections().is_empty() {
        return Err(fail(format!(
            "strict server rejected: {:?}",
            server.rejections()
        )));
    }
    follow_up(&mut agent, &rec).map_err(fail)?;
    agent.close();
    Ok(summary)
}

/// The faulty turn ended in `Ok` or a typed run error, agreeing with the
/// stop reason; the history is valid; the events are complete.
fn check_first_turn(
    agent: &Agent,
    rec: &InMemoryEventList,
    result: &pikuri::Result<pikuri::Outcome>,
) -> Result<(), String> {
    let expected_reason = match result {
        Ok(out) => {
            // A scripted cut (`finish_reason: length`) ends `Incomplete`,
            // and only a cut does.
            let whole = out.finish.is_complete();
            if !matches!(
                (out.stop_reason, whole),
                (StopReason::Completed | StopReason::Synthesized, true)
                    | (StopReason::Incomplete, false)
            ) {
                return Err("unexpected stop reason".into());
            }
            out.stop_reason
        }
        Err(e) if !is_run_error(e) => return Err("not a run error".into()),
        Err(Error::StepLimitExceeded { .. }) => StopReason::StepLimit,
        Err(_) => StopReason::Error,
    };
    if agent.last_stop_reason() != Some(expected_reason) {
        return Err(format!(
            "last_stop_reason {:?} != {expected_reason:?}",
            agent.last_stop_reason()
        ));
    }
    if let Err(e) = result {
        // Display is a short phrase; Debug never panics.
        if e.to_string().is_empty() || format!("{e:?}").is_empty() {
            return Err("empty error text".into());
        }
    }
    // The history is valid, and a failed round left no half message.
    if !history_is_valid(agent) {
        return Err("invalid history".into());
    }
    let last_role = agent.messages().last().map(|m| m.role);
    if result.is_err() && !matches!(last_role, Some(Role::User | Role::Tool)) {
        return Err(format!(
            "a failed round left a half message behind: {:#?}",
            agent.messages()
        ));
    }
    // Events: one stopped per run of the main agent, last; calls answered.
    if count(rec, "", "stopped") != 1 {
        return Err(format!("stopped events: {:?}", rec.kinds()));
    }
    let main_last = rec
        .events()
        .iter()
        .rev()
        .find(|e| e.agent().is_empty())
        .map(Event::kind);
    if main_last != Some("stopped") {
        return Err(format!("last main event {main_last:?}"));
    }
    for agent_id in ["", "synthesizer"] {
        let calls = count(rec, agent_id, "tool_call");
        let results = count(rec, agent_id, "tool_result");
        if calls != results {
            return Err(format!(
                "agent {agent_id:?}: {calls} tool_call vs {results} tool_result"
            ));
        }
    }
    Ok(())
}

/// The next turn on the same agent succeeds (fresh server, one answer).
fn follow_up(agent: &mut Agent, rec: &InMemoryEventList) -> Result<(), String> {
    let fresh = FakeServer::start();
    fresh.push(Reply::text("recovered"));
    let next = agent.run_loop_with(
        "and now?",
        fresh.transport().with_context_window(Some(4096)),
    );
    match next {
        Ok(out) if out.answer.as_deref() == Some("recovered") => {}
        other => return Err(format!("follow-up turn: {other:?}")),
    }
    if !fresh.rejections().is_empty() {
        return Err(format!(
            "strict server rejected the follow-up: {:?}",
            fresh.rejections()
        ));
    }
    if !history_is_valid(agent) {
        return Err("invalid history after the follow-up".into());
    }
    if count(rec, "", "stopped") != 2 {
        return Err(format!("stopped events: {:?}", rec.kinds()));
    }
    Ok(())
}

/// Run one case on its own thread so that a hang fails the test instead of
/// blocking it.
fn bounded_case(seed: u64, case: usize) -> String {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("prop-{seed:x}-{case}"))
        .spawn(move || {
            let _ = tx.send(run_case(seed, case));
        })
        .expect("spawn a case thread");
    match rx.recv_timeout(CASE_BOUND) {
        Ok(Ok(summary)) => {
            handle.join().expect("case thread");
            summary
        }
        Ok(Err(msg)) => panic!("property violated: {msg}"),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("seed {seed:#x} case {case}: no result within {CASE_BOUND:?} (hang?)")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let payload = handle.join().expect_err("the case thread panicked");
            std::panic::resume_unwind(payload)
        }
    }
}

#[test]
fn random_fault_scripts_never_break_the_agent() {
    let (seeds, cases) = match env_seed("PIKURI_PROP_SEED") {
        Some(seed) => {
            let cases = std::env::var("PIKURI_PROP_CASES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(CASES_PER_SEED);
            (vec![seed], cases)
        }
        None => (SEEDS.to_vec(), CASES_PER_SEED),
    };
    let started = Instant::now();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for &seed in &seeds {
        eprintln!("[properties] seed {seed:#x}, {cases} cases");
        for case in 0..cases {
            let summary = bounded_case(seed, case);
            // Group "err(http status 500: ...)" and friends by their first words.
            let key = summary
                .split([':', ' ', '(', ')'])
                .take(2)
                .collect::<Vec<_>>()
                .join(" ");
            *outcomes.entry(key).or_default() += 1;
        }
    }
    eprintln!(
        "[properties] {} cases in {:?}: {outcomes:?}",
        seeds.len() * cases,
        started.elapsed()
    );
    // The scripts must actually exercise both sides.
    assert!(outcomes.keys().any(|k| k.starts_with("ok")), "{outcomes:?}");
    assert!(
        outcomes.keys().any(|k| k.starts_with("err")),
        "{outcomes:?}"
    );
}
