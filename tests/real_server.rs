//! The library against a real llama.cpp `llama-server` (SmolLM2-135M).
//!
//! Needs a running server whose root URL is in `PIKURI_LLAMA_URL`, and for
//! the compaction tests a second one started with `-c 1024` in
//! `PIKURI_LLAMA_SMALL_URL`; `scripts/real-server-tests.sh` starts both and
//! sets them (it builds and
//! caches llama.cpp under `~/.cache/pikuri` on first use). Without the
//! variable each test says it is skipped (on stderr) and passes, so a plain
//! `cargo test --all-features` works on any machine; with
//! `PIKURI_REQUIRE_REAL_SERVER=1` (the script sets it) a missing URL fails
//! instead, so a broken setup cannot pass as skipped. The model is
//! tiny, so these tests assert on structure (a tool was called with
//! schema-valid arguments, an answer arrived, events in order), never on
//! wording.

#[cfg(feature = "tool-search")]
#[path = "real_server/deferred.rs"]
mod deferred; // issue 40: 300 tools overflow the window, deferred they fit

use std::time::Duration;

use pikuri::builtin;
use pikuri::{
    Agent, Api, ChatTransport, Configurator, Error, ErrorKind, Event, FinishReason, History,
    HttpConfig, Message, ModelSettings, OnExhausted, Outcome, StepLimit, StopReason, ToolCall,
    ToolChoice, listeners::InMemoryEventList,
};
use serde_json::json;

/// Greedy sampling and a bound of `max` tokens per answer.
fn typed(max: u64) -> ModelSettings {
    ModelSettings::new()
        .with_temperature(0.0)
        .with_max_output_tokens(max)
}

/// The context size `scripts/llama-server.sh` starts the server with (`-c`).
const N_CTX: u64 = 4096;

/// The `/v1` base of the server whose root URL is in the variable `var`,
/// or `None` when the test is to be skipped (said on stderr); `starts`
/// says what `scripts/real-server-tests.sh` starts for it.
///
/// # Panics
///
/// If the variable is unset (or empty) and `PIKURI_REQUIRE_REAL_SERVER=1`.
fn api_base(var: &str, starts: &str) -> Option<String> {
    let root = std::env::var(var).unwrap_or_default();
    if root.trim().is_empty() {
        let required = std::env::var("PIKURI_REQUIRE_REAL_SERVER").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{var} not set but PIKURI_REQUIRE_REAL_SERVER=1: \
             run scripts/real-server-tests.sh ({starts})"
        );
        eprintln!("skipped: {var} not set (scripts/real-server-tests.sh sets it)");
        return None;
    }
    Some(format!("{}/v1", root.trim_end_matches('/')))
}

/// A transport to the server in `PIKURI_LLAMA_URL`, or `None` when the test
/// is to be skipped (see [`api_base`]).
fn transport() -> Option<ChatTransport> {
    let api_base = api_base("PIKURI_LLAMA_URL", "it starts llama-server")?;
    Some(ChatTransport::new("smollm2").with_api_base(api_base))
}

/// The agent every test starts from, or `None` to skip (see [`transport`]).
fn builder(rec: &InMemoryEventList) -> Option<Configurator> {
    builder_on(rec, Api::ChatCompletions)
}

/// [`builder`] over `api` (`max_tokens` goes as `max_output_tokens` on
/// the Responses API).
fn builder_on(rec: &InMemoryEventList, api: Api) -> Option<Configurator> {
    let c = Agent::builder(transport()?.with_api(api))
        .system_prompt("You are a helpful assistant.")
        .http(HttpConfig::default().with_read_timeout(Duration::from_secs(120)))
        .settings(typed(64))
        .add_listener(rec.clone());
    Some(c)
}

/// The turn ended with an answer: a whole one, a synthesized one, or one
/// the test's own `max_output_tokens` bound cut (SmolLM2 may ramble past
/// the small bounds these tests set to stay fast; such a run is honestly
/// `Incomplete` with `FinishReason::Length`, which is not what these
/// tests are about).
fn assert_answered(out: &Outcome) {
    let cut_at_the_bound =
        out.stop_reason == StopReason::Incomplete && out.finish == FinishReason::Length;
    assert!(
        matches!(
            out.stop_reason,
            StopReason::Completed | StopReason::Synthesized
        ) || cut_at_the_bound,
        "{:?} ({:?}): {:?}",
        out.stop_reason,
        out.finish,
        out.answer
    );
}

fn tokens(rec: &InMemoryEventList) -> Vec<(Option<u64>, Option<u64>)> {
    rec.events()
        .iter()
        .filter_map(|e| match e {
            Event::Tokens { input, output, .. } => Some((*input, *output)),
            _ => None,
        })
        .collect()
}

/// A one-word question answered in one non-streamed turn over `api`, with
/// usage reported; the agent is returned for more turns (`None`: skipped).
fn non_streamed_answer_on(api: Api, rec: &InMemoryEventList) -> Option<Agent> {
    let c = builder_on(rec, api)?;
    let mut agent = c.build().unwrap();
    let out = agent
        .run_loop("What is the capital of France? Answer in one word.")
        .unwrap();
    assert_answered(&out);
    assert!(!out.answer.unwrap_or_default().trim().is_empty());
    let t = tokens(rec);
    assert_eq!(t.len(), 1);
    assert!(
        t[0].0.is_some() && t[0].1.is_some(),
        "usage reported: {t:?}"
    );
    Some(agent)
}

/// A streamed turn over `api`: deltas before the bookend, usage on the
/// stream.
fn streamed_answer_on(api: Api) {
    let rec = InMemoryEventList::new();
    let Some(c) = builder_on(&rec, api) else {
        return;
    };
    let mut agent = c.streaming(true).build().unwrap();
    let out = agent.run_loop("Say hello.").unwrap();
    assert_answered(&out);
    let kinds = rec.kinds();
    let first_delta = kinds
        .iter()
        .position(|k| *k == "assistant_delta")
        .expect("deltas arrived");
    let bookend = kinds
        .iter()
        .position(|k| *k == "assistant")
        .expect("bookend arrived");
    assert!(first_delta < bookend);
    let t = tokens(&rec);
    assert!(
        t[0].0.is_some() && t[0].1.is_some(),
        "usage arrives on streams: {t:?}"
    );
}

#[test]
fn non_streamed_answer() {
    non_streamed_answer_on(Api::ChatCompletions, &InMemoryEventList::new());
}

#[test]
fn streamed_answer_with_usage() {
    streamed_answer_on(Api::ChatCompletions);
}

#[test]
fn context_cap_is_detected_from_props() {
    let rec = InMemoryEventList::new();
    let Some(c) = builder(&rec) else { return };
    let agent = c.build().unwrap();
    assert_eq!(agent.context_window_cap(), Some(N_CTX));
    assert!(matches!(
        rec.events().first(),
        Some(Event::ContextCap {
            cap: Some(N_CTX),
            ..
        })
    ));
}

/// SmolLM2-135M copies the final answers of one or two worked examples
/// without calling the tool (even under `tool_choice: "required"`, whose
/// grammar lets it write text first); with three in the history it calls it.
fn example_exchange() -> History {
    let mut history = Vec::new();
    for (i, (expression, result)) in [("2+3", "5"), ("12*4", "48"), ("100-7", "93")]
        .into_iter()
        .enumerate()
    {
        let id = format!("call_example_{i}");
        history.push(Message::user(format!("What is {expression}?")));
        history.push(Message::assistant_tool_calls(
            "",
            vec![ToolCall::new(
                id.as_str(),
                "calculator",
                json!({ "expression": expression }).to_string(),
            )],
        ));
        history.push(Message::tool(id.as_str(), result));
        history.push(Message::assistant(format!("{expression} is {result}.")));
    }
    History::new(history).expect("valid history")
}

/// The calculator round over `api`: after the worked examples of
/// [`example_exchange`] (sent as tool_use / tool_result blocks on
/// Anthropic's API, as function_call / function_call_output items on the
/// Responses API: the model calls the tool only if it reads them) the model
/// calls the tool with schema-valid arguments and the result goes back to
/// it (a `tokens` event follows the `tool_result`). Returns the agent and
/// the event kinds for each API's own checks (`None`: skipped).
fn tool_loop_on(api: Api, streaming: bool) -> Option<(Agent, Vec<&'static str>)> {
    let rec = InMemoryEventList::new();
    let c = builder_on(&rec, api)?;
    let mut agent = c
        .system_prompt(
            "You are a helpful assistant. Use the calculator tool for every arithmetic question.",
        )
        .streaming(streaming)
        .add_tool(builtin::calculator())
        .settings(typed(128))
        .step_limit(StepLimit::with_policy(2, OnExhausted::Synthesize))
        .build()
        .unwrap();
    agent.load_history(example_exchange()).unwrap();
    let out = agent.run_loop("What is 17*23?").unwrap();
    assert_answered(&out);
    let events = rec.events();
    let calls: Vec<&serde_json::Value> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall {
                name, arguments, ..
            } if name == "calculator" => Some(arguments),
            _ => None,
        })
        .collect();
    assert!(
        !calls.is_empty(),
        "the model called the calculator: {:?}",
        rec.kinds()
    );
    assert!(
        calls[0]["expression"].is_string(),
        "schema-valid arguments: {}",
        calls[0]
    );
    // The result went back to the model, then an answer arrived.
    let kinds = rec.kinds();
    let result = kinds.iter().position(|k| *k == "tool_result").unwrap();
    assert!(kinds[result..].contains(&"tokens"));
    Some((agent, kinds))
}

fn tool_loop(streaming: bool) {
    let Some((agent, kinds)) = tool_loop_on(Api::ChatCompletions, streaming) else {
        return;
    };
    assert!(
        agent
            .last_assistant_content()
            .is_some_and(|a| !a.trim().is_empty())
    );
    assert_eq!(kinds.last(), Some(&"stopped"));
}

#[test]
fn tool_call_is_executed_and_fed_back() {
    tool_loop(false);
}

#[test]
fn tool_call_is_executed_and_fed_back_streaming() {
    tool_loop(true);
}

#[test]
fn context_overflow_is_a_typed_http_error() {
    for streaming in [false, true] {
        let rec = InMemoryEventList::new();
        let Some(c) = builder(&rec) else { return };
        let mut agent = c.streaming(streaming).build().unwrap();
        let long = "lorem ipsum dolor sit amet ".repeat(1500);
        let err = agent.run_loop(&long).unwrap_err();
        match &err {
            Error::Http {
                status: 400,
                message,
                ..
            } => {
                assert!(
                    message.contains("context"),
                    "the server's own message: {message}"
                );
            }
            other => panic!("expected a 400, got {other:?}"),
        }
        assert_eq!(
            agent.messages().len(),
            1,
            "nothing but the user message was appended"
        );
    }
}

// ---------------------------------------------------------------------------
// Issue 17: a second server with a 1024-token context
// (`scripts/real-server-tests.sh` starts it and sets `PIKURI_LLAMA_SMALL_URL`).

/// The small server's context size.
const SMALL_CTX: u64 = 1024;

/// The agent on the small server, or `None` to skip (as [`transport`]).
fn small_builder(rec: &InMemoryEventList) -> Option<Configurator> {
    small_builder_on(rec, Api::ChatCompletions)
}

/// [`small_builder`] over `api`.
fn small_builder_on(rec: &InMemoryEventList, api: Api) -> Option<Configurator> {
    let api_base = api_base("PIKURI_LLAMA_SMALL_URL", "it starts a -c 1024 server too")?;
    let transport = ChatTransport::new("smollm2")
        .with_api_base(api_base)
        .with_api(api);
    let c = Agent::builder(transport)
        .system_prompt("You are a helpful assistant. Answer in one short sentence.")
        .http(HttpConfig::default().with_read_timeout(Duration::from_secs(120)))
        .settings(typed(48))
        .add_listener(rec.clone());
    Some(c)
}

/// Prompt tokens of each request, per agent id, in order.
fn prompt_tokens(rec: &InMemoryEventList) -> Vec<(String, u64)> {
    rec.events()
        .iter()
        .filter_map(|e| match e {
            Event::Tokens {
                agent,
                input,
                cached,
                ..
            } => Some((agent.to_string(), input.unwrap_or(0) + cached.unwrap_or(0))),
            _ => None,
        })
        .collect()
}

fn topic(i: usize) -> String {
    format!(
        "Turn {i}. Here is a note to remember: the parcel number {i} goes to warehouse {} \
         on shelf {} and must be checked by the inspector named Inspector{i}. \
         The note also says the weather was mild, the truck was blue and the driver \
         whistled an old song while unloading boxes of apples, pears and plums. \
         Please reply with a short acknowledgement of parcel {i}.",
        i * 7 % 13,
        i * 3 % 11
    )
}

#[test]
fn a_conversation_longer_than_the_window_continues_through_compaction() {
    long_conversation_through_compaction(Api::ChatCompletions);
}

/// Issue 29, item 9: the same long conversation over `/v1/messages`.
#[test]
fn anthropic_conversation_longer_than_the_window_continues_through_compaction() {
    long_conversation_through_compaction(Api::AnthropicMessages);
}

/// Issue 29, item 9: the same long conversation over `/v1/responses`.
#[test]
fn responses_conversation_longer_than_the_window_continues_through_compaction() {
    long_conversation_through_compaction(Api::OpenAiResponses);
}

/// Turns of [`topic`] on the small server over `api`, with summarizing
/// compaction: the conversation outgrows the 1024-token window, is
/// compacted at least once, every request fits, every turn succeeds.
fn long_conversation_through_compaction(api: Api) {
    let rec = InMemoryEventList::new();
    let Some(c) = small_builder_on(&rec, api) else {
        return;
    };
    let mut agent = c
        .compaction(pikuri::compaction::Compaction::summarize().with_keep_turns(1))
        .build()
        .unwrap();
    assert_eq!(agent.context_window_cap(), Some(SMALL_CTX));
    // More with PIKURI_LONG_TURNS=N (for measuring; the default keeps CI short).
    let turns = std::env::var("PIKURI_LONG_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    for i in 0..turns {
        let out = agent.run_loop(&topic(i));
        assert!(out.is_ok(), "turn {i}: {out:?}");
    }
    let compactions = rec
        .events()
        .iter()
        .filter(|e| matches!(e, Event::Compacted { .. }))
        .count();
    let per_request = prompt_tokens(&rec);
    eprintln!(
        "{api:?}: {turns} turns, {} requests ({compactions} compactions); prompt tokens per request (agent: tokens): {per_request:?}",
        per_request.len()
    );
    let sent: usize = agent.messages().iter().map(|m| m.content.len()).sum();
    eprintln!(
        "history now: {} messages, {sent} chars",
        agent.messages().len()
    );
    assert!(compactions >= 1, "the conversation outgrew 1024 tokens");
    assert!(
        per_request.iter().all(|(_, t)| *t < SMALL_CTX),
        "every request fit: {per_request:?}"
    );
}

#[test]
fn an_overflow_provoked_on_purpose_recovers_by_itself() {
    let rec = InMemoryEventList::new();
    let Some(c) = small_builder(&rec) else { return };
    // A window configured far too big: no compaction ahead of time, so the
    // server's own 400 must trigger it.
    let t = c
        .build()
        .unwrap()
        .transport()
        .with_context_window(Some(100_000));
    let mut agent = Agent::builder(t)
        .system_prompt("You are a helpful assistant. Answer in one short sentence.")
        .http(HttpConfig::default().with_read_timeout(Duration::from_secs(120)))
        .settings(typed(48))
        .add_listener(rec.clone())
        .compaction(pikuri::compaction::Compaction::summarize())
        .build()
        .unwrap();
    let mut history = Vec::new();
    for i in 0..12 {
        history.push(Message::user(topic(i)));
        history.push(Message::assistant(format!("Noted: parcel {i}.")));
    }
    agent.load_history(History::new(history).unwrap()).unwrap();
    let out = agent.run_loop("Which parcel did I mention last?").unwrap();
    assert_answered(&out);
    let compactions = rec
        .events()
        .iter()
        .filter(|e| matches!(e, Event::Compacted { .. }))
        .count();
    assert_eq!(compactions, 1);
    let per_request = prompt_tokens(&rec);
    eprintln!("overflow recovery: prompt tokens per accepted request: {per_request:?}");
    assert!(pikuri::compaction::Compaction::is_summary(
        &agent.messages()[0]
    ));
}

pikuri::tool::schema_type! {
    /// A drink size.
    enum Size {
        Small = "small",
        Large = "large",
    }
}

pikuri::tool::schema_type! {
    /// A sentiment verdict: no free-text fields, so the grammar bounds it.
    struct Verdict {
        /// Whether the text is positive.
        positive: bool,
        /// The size of the feeling.
        size: Size,
        /// Confidence from 0 to 255.
        confidence: u8,
    }
}

/// A typed [`Verdict`] turn on `c` with no repair allowed: the model's
/// first answer must parse, validate and deserialize (the server turns the
/// schema into a grammar). The agent is returned for more turns.
fn verdict_without_repair(c: Configurator) -> Agent {
    let mut agent = c
        .settings(typed(128))
        .structured_output(pikuri::structured::StructuredOutput::default().with_max_repairs(0))
        .build()
        .unwrap();
    let typed = agent
        .run_typed::<Verdict>("Is the text 'I love this coffee' positive?")
        .unwrap();
    assert_eq!(typed.repairs, 0);
    let raw = typed.outcome.answer.clone().unwrap();
    let v: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert!(
        pikuri::tool::Parameters::for_type::<Verdict>()
            .validate(&v)
            .is_ok(),
        "{raw}"
    );
    assert_eq!(v["positive"], json!(typed.value.positive));
    agent
}

#[test]
fn typed_answer_under_json_schema_is_schema_valid() {
    let rec = InMemoryEventList::new();
    let Some(c) = builder(&rec) else { return };
    // llama.cpp turns the schema into a grammar: even the 135M model's
    // first answer must parse, validate and deserialize (no repair).
    let mut agent = verdict_without_repair(c);
    // The history stays usable for a plain turn.
    assert!(agent.run_loop("Thanks.").is_ok());
}

pikuri::tool::schema_type! {
    /// One line of an order.
    struct Line {
        size: Size,
        /// How many cups.
        qty: u8,
    }
}

pikuri::tool::schema_type! {
    /// Who orders.
    struct Customer {
        /// Whether the customer has a loyalty card.
        member: bool,
    }
}

pikuri::tool::schema_type! {
    /// A coffee order.
    struct Order {
        customer: Customer,
        lines: Vec<Line>,
    }
}

#[test]
fn typed_tool_with_nested_parameters_round_trips() {
    use std::sync::{Arc, Mutex};
    let rec = InMemoryEventList::new();
    let Some(c) = builder(&rec) else { return };
    let seen: Arc<Mutex<Vec<(bool, usize)>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let tool = pikuri::tool::TypedTool::new(
        "place_order",
        "Place a coffee order.",
        move |o: Order, _ctx| {
            let sizes_ok = o
                .lines
                .iter()
                .all(|l| matches!(l.size, Size::Small | Size::Large));
            assert!(sizes_ok);
            seen2
                .lock()
                .unwrap()
                .push((o.customer.member, o.lines.len()));
            Ok::<_, pikuri::ToolError>("order placed")
        },
    );
    let mut agent = c
        .system_prompt("You take coffee orders with the place_order tool.")
        .add_tool(tool)
        // The 135M model ignores `tool_choice: "required"` here (see
        // `example_exchange`): three worked examples make it call the tool.
        .settings(typed(256).with_tool_choice(ToolChoice::Required))
        .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
        .build()
        .unwrap();
    let mut history = Vec::new();
    for (i, (member, size, qty)) in [(true, "small", 1), (false, "large", 3), (true, "large", 2)]
        .into_iter()
        .enumerate()
    {
        let id = format!("call_order_{i}");
        history.push(Message::user(format!("Order {qty} {size} coffee(s).")));
        history.push(Message::assistant_tool_calls(
            "",
            vec![ToolCall::new(
                id.as_str(),
                "place_order",
                json!({"customer": {"member": member}, "lines": [{"size": size, "qty": qty}]})
                    .to_string(),
            )],
        ));
        history.push(Message::tool(id.as_str(), "order placed"));
        history.push(Message::assistant("Your order is placed."));
    }
    agent.load_history(History::new(history).unwrap()).unwrap();
    let out = agent.run_loop("Order 2 large coffee(s).").unwrap();
    assert_answered(&out);
    let results: Vec<String> = rec
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert!(
        !seen.lock().unwrap().is_empty(),
        "the handler got a typed Order; tool results: {results:?}"
    );
}

// ---- issue 29, test kit: Anthropic Messages and Responses sessions ----

/// POST `body` to `url` over raw HTTP; the status and the body text.
fn kit_post(url: &str, body: &serde_json::Value) -> (u16, String) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .new_agent();
    let mut resp = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body.to_string())
        .expect("request sent");
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().expect("body read"))
}

/// The `event:` names of an SSE body, `ping` left out and runs of the
/// same name (the deltas) collapsed to one: the stream's structure.
fn kit_event_structure(sse: &str) -> Vec<String> {
    let mut names: Vec<String> = sse
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .filter(|n| *n != "ping")
        .map(str::to_string)
        .collect();
    names.dedup();
    names
}

/// A `Recorder` in front of the real server records Anthropic Messages and
/// Responses requests, streamed and not; `FakeServer` replays each byte for
/// byte; and a scripted text answer streams with the same event structure
/// as the real server's.
#[test]
fn kit_records_replays_and_matches_messages_and_responses() {
    use pikuri::testing::{FakeServer, Recorder, Reply};
    let Some(t) = transport() else { return };
    let recorder = Recorder::start(t.api_base().expect("base"));
    let messages = |stream: bool| {
        json!({"model": "smollm2", "max_tokens": 8, "temperature": 0, "stream": stream,
               "messages": [{"role": "user", "content": "Say hi"}]})
    };
    let responses = |stream: bool| {
        json!({"model": "smollm2", "max_output_tokens": 8, "temperature": 0, "stream": stream,
               "input": [{"role": "user", "content": "Say hi"}]})
    };
    let requests = [
        ("/messages", messages(false)),
        ("/messages", messages(true)),
        ("/responses", responses(false)),
        ("/responses", responses(true)),
    ];
    let answers: Vec<(u16, String)> = requests
        .iter()
        .map(|(path, body)| kit_post(&format!("{}{path}", recorder.base_url()), body))
        .collect();
    for (status, text) in &answers {
        assert_eq!(*status, 200, "{text}");
    }
    let message: serde_json::Value = serde_json::from_str(&answers[0].1).unwrap();
    assert_eq!(message["type"], "message");
    let response: serde_json::Value = serde_json::from_str(&answers[2].1).unwrap();
    assert_eq!(response["object"], "response");

    let cassette = recorder.cassette();
    let paths: Vec<&str> = cassette
        .interactions()
        .iter()
        .map(|i| i.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "/v1/messages",
            "/v1/messages",
            "/v1/responses",
            "/v1/responses"
        ]
    );
    let replay = FakeServer::from_cassette(cassette);
    for ((path, body), (_, text)) in requests.iter().zip(&answers) {
        let (status, again) = kit_post(&format!("{}{path}", replay.base_url()), body);
        assert_eq!(status, 200);
        assert_eq!(&again, text, "{path} replayed differently");
    }
    replay.assert_all_used();

    // The scripted server streams a text answer with the real one's
    // structure, on both APIs.
    let fake = FakeServer::start();
    fake.push(Reply::text("Hi there!"))
        .push(Reply::text("Hi there!"));
    let (_, fake_messages) = kit_post(&format!("{}/messages", fake.base_url()), &messages(true));
    let (_, fake_responses) = kit_post(&format!("{}/responses", fake.base_url()), &responses(true));
    assert_eq!(
        kit_event_structure(&fake_messages),
        kit_event_structure(&answers[1].1)
    );
    assert_eq!(
        kit_event_structure(&fake_responses),
        kit_event_structure(&answers[3].1)
    );
    fake.assert_all_used();
}

// ---- OpenAI Responses (`/v1/responses`), issue 29 ----

#[test]
fn responses_non_streamed_answer_with_usage() {
    non_streamed_answer_on(Api::OpenAiResponses, &InMemoryEventList::new());
}

#[test]
fn responses_streamed_answer_with_usage() {
    streamed_answer_on(Api::OpenAiResponses);
}

fn responses_tool_loop(streaming: bool) {
    let Some((agent, _)) = tool_loop_on(Api::OpenAiResponses, streaming) else {
        return;
    };
    assert!(
        agent
            .last_assistant_content()
            .is_some_and(|a| !a.trim().is_empty())
    );
}

#[test]
fn responses_tool_round() {
    responses_tool_loop(false);
}

#[test]
fn responses_tool_round_streaming() {
    responses_tool_loop(true);
}

/// Structured output goes as `text.format`. llama-server b11434 does not
/// turn `text.format` into a grammar (it does for `response_format`, which
/// OpenAI's Responses API rejects), so the schema reaches the model through
/// the system-prompt note and the repair turns only: the typed turn ends in
/// a value that validates, or in `InvalidAnswer` after the repairs, never
/// in a protocol error, and the conversation goes on. (llama-server's own
/// `json_schema` field does become a grammar on this API: see
/// [`responses_typed_answer_under_llama_json_schema_is_schema_valid`].)
#[test]
fn responses_typed_answer() {
    let rec = InMemoryEventList::new();
    let Some(c) = builder_on(&rec, Api::OpenAiResponses) else {
        return;
    };
    let mut agent = c
        .settings(typed(128))
        .structured_output(pikuri::structured::StructuredOutput::default().with_max_repairs(2))
        .build()
        .unwrap();
    match agent.run_typed::<Verdict>("Is the text 'I love this coffee' positive?") {
        Ok(typed) => {
            let raw = typed.outcome.answer.clone().unwrap();
            eprintln!(
                "typed answer valid after {} repair(s): {raw}",
                typed.repairs
            );
            let v: serde_json::Value = serde_json::from_str(&raw).unwrap();
            assert!(
                pikuri::tool::Parameters::for_type::<Verdict>()
                    .validate(&v)
                    .is_ok(),
                "{raw}"
            );
        }
        Err(e) => assert!(
            matches!(e, Error::InvalidAnswer { .. }),
            "an invalid answer, not a failure of the API: {e:?}"
        ),
    }
    assert!(agent.run_loop("Thanks.").is_ok());
}

/// Structured output that holds over `/v1/responses`: llama-server's own
/// top-level `json_schema` field (a request field, sent as given on this
/// API) becomes a grammar there, so the 135M model's first answer must
/// parse, validate and deserialize with no repair, as on chat completions.
/// (Without the field the schema is only advice: see
/// [`responses_typed_answer`].)
#[test]
fn responses_typed_answer_under_llama_json_schema_is_schema_valid() {
    let rec = InMemoryEventList::new();
    let Some(c) = builder_on(&rec, Api::OpenAiResponses) else {
        return;
    };
    let schema = pikuri::tool::Parameters::for_type::<Verdict>();
    verdict_without_repair(c.request_field("json_schema", schema.to_json().clone()));
    let t = tokens(&rec);
    assert!(t.iter().all(|(i, o)| i.is_some() && o.is_some()), "{t:?}");
}

/// A streaming agent over `api` that cancels itself at the first streamed
/// text of its first turn (`None`: skipped); the token is returned.
fn cancelling_agent(
    api: Api,
    rec: &InMemoryEventList,
    max_tokens: u64,
) -> Option<(Agent, pikuri::Cancellable)> {
    let c = builder_on(rec, api)?;
    let cancel = pikuri::Cancellable::new();
    let agent = c
        .streaming(true)
        .settings(typed(max_tokens))
        .cancellable(cancel.clone())
        .add_listener(CancelAtFirstDelta(Some(cancel.clone())))
        .build()
        .unwrap();
    Some((agent, cancel))
}

#[test]
fn responses_cancel_mid_stream_then_next_turn() {
    let rec = InMemoryEventList::new();
    let Some((mut agent, cancel)) = cancelling_agent(Api::OpenAiResponses, &rec, 256) else {
        return;
    };
    match agent.run_loop("Write a long story about a dragon.") {
        Err(e) => assert!(e.is_cancelled(), "{e:?}"),
        Ok(out) => assert_eq!(out.stop_reason, StopReason::Cancelled),
    }
    assert!(cancel.is_cancelled());
    // The next turn re-arms the token and completes.
    let out = agent.run_loop("Say hello.").unwrap();
    assert_answered(&out);
    assert!(!out.answer.unwrap_or_default().trim().is_empty());
}

/// Issue 29, item 6: an image sent to the CI model (SmolLM2, served
/// without a vision projector) is `ErrorKind::ImageUnsupported`, sent once
/// (llama-server answers with a 500, which is otherwise retried), and the
/// next turn without images works.
#[test]
fn chat_image_to_a_model_without_vision_is_a_typed_error() {
    let rec = InMemoryEventList::new();
    let Some(cfg) = builder(&rec) else { return };
    let mut agent = cfg.build().unwrap();
    let pixel = pikuri::Image::from_bytes(
        b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;",
    )
    .unwrap();
    let err = agent
        .run_loop_message(Message::user_with_images("What is this?", vec![pixel]))
        .unwrap_err();
    assert_eq!(err.kind(), pikuri::ErrorKind::ImageUnsupported, "{err:?}");
    let retries = rec
        .events()
        .iter()
        .filter(|e| matches!(e, Event::Retrying { .. }))
        .count();
    assert_eq!(retries, 0);
    agent.clear_conversation();
    let out = agent.run_loop("Say hello.").unwrap();
    assert!(out.answer.is_some_and(|a| !a.trim().is_empty()));
}

// ---- issue 29: the same agent over llama-server's Anthropic Messages API
// (`/v1/messages`). llama-server ignores every structured-output field
// there (`output_format`, `response_format`, `json_schema` were tried), so
// structured output is tested over chat completions only.

#[test]
fn anthropic_non_streamed_answer_with_usage() {
    let rec = InMemoryEventList::new();
    let Some(mut agent) = non_streamed_answer_on(Api::AnthropicMessages, &rec) else {
        return;
    };
    // A second turn sends the whole history back in Anthropic's shape.
    assert!(agent.run_loop("And of Italy?").is_ok());
}

#[test]
fn anthropic_streamed_answer_with_usage() {
    streamed_answer_on(Api::AnthropicMessages);
}

fn anthropic_tool_loop(streaming: bool) {
    let Some((_, kinds)) = tool_loop_on(Api::AnthropicMessages, streaming) else {
        return;
    };
    assert_eq!(kinds.last(), Some(&"stopped"));
}

#[test]
fn anthropic_tool_call_is_executed_and_fed_back() {
    anthropic_tool_loop(false);
}

#[test]
fn anthropic_tool_call_is_executed_and_fed_back_streaming() {
    anthropic_tool_loop(true);
}

/// Cancels its agent at the first streamed text, once.
struct CancelAtFirstDelta(Option<pikuri::Cancellable>);

impl pikuri::Listener for CancelAtFirstDelta {
    fn on_event(&mut self, event: &Event) {
        if matches!(event, Event::AssistantDelta { .. })
            && let Some(c) = self.0.take()
        {
            c.cancel();
        }
    }
}

#[test]
fn anthropic_cancel_mid_stream_then_the_next_turn_works() {
    let rec = InMemoryEventList::new();
    let Some((mut agent, _)) = cancelling_agent(Api::AnthropicMessages, &rec, 200) else {
        return;
    };
    let err = agent
        .run_loop("Write a long story about a lighthouse keeper.")
        .unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(rec.kinds().contains(&"cancelled"));
    // The cancel is reset at the next turn start, and the history the
    // cancel left is valid for the server.
    let out = agent.run_loop("Say hello.").unwrap();
    assert_answered(&out);
    assert!(!out.answer.unwrap_or_default().trim().is_empty());
}

/// Typed settings reach llama-server on each of its three endpoints: the
/// answer arrives and its output stays within `max_output_tokens`; a
/// setting the API has no field for fails before anything is sent.
fn typed_settings_on(api: Api) {
    let rec = InMemoryEventList::new();
    let Some(c) = builder_on(&rec, api) else {
        return;
    };
    let mut settings = typed(8).with_top_p(0.9);
    if api != Api::OpenAiResponses {
        settings = settings.with_stop(["\n\n\n"]);
    }
    if api == Api::ChatCompletions {
        settings = settings.with_seed(42);
    }
    let mut agent = c.settings(settings).build().unwrap();
    let out = agent
        .run_loop("Count from one to one hundred, in words.")
        .unwrap();
    assert!(
        out.answer.as_deref().is_some_and(|a| !a.is_empty()),
        "{api:?}"
    );
    let output = out.usage.output.expect("the server reports output tokens");
    assert!(
        output <= 8,
        "{api:?}: {output} output tokens over a bound of 8"
    );
    if api != Api::ChatCompletions {
        let mut seeded = builder_on(&rec, api)
            .unwrap()
            .settings(typed(8).with_seed(1))
            .build()
            .unwrap();
        let err = seeded.run_loop("Hi").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{api:?}: {err}");
    }
}

/// An answer cut by `max_output_tokens` ends the run `Incomplete` with
/// `FinishReason::Length`, as the server says it: `length` on chat
/// completions, `max_tokens` on Messages. (llama-server's Responses
/// endpoint reports `completed` for a cut answer: it sends no
/// `incomplete` status, so the crate can only repeat what it said.)
fn a_cut_answer_is_incomplete_on(api: Api) {
    let rec = InMemoryEventList::new();
    let Some(c) = builder_on(&rec, api) else {
        return;
    };
    let mut agent = c.settings(typed(4)).build().unwrap();
    let out = agent
        .run_loop("Write a poem of twenty lines about the sea.")
        .unwrap();
    assert_eq!(out.usage.output, Some(4), "{api:?}: {:?}", out.answer);
    assert_eq!(out.finish, FinishReason::Length, "{api:?}");
    assert_eq!(out.stop_reason, StopReason::Incomplete, "{api:?}");
    // The cut answer is kept, and the next turn goes on.
    assert!(out.answer.is_some_and(|a| !a.is_empty()), "{api:?}");
    let next = agent.run_loop("Thanks.").unwrap();
    assert!(next.requests >= 1, "{api:?}");
}

#[test]
fn a_cut_answer_is_incomplete_on_chat_completions() {
    a_cut_answer_is_incomplete_on(Api::ChatCompletions);
}

#[test]
fn a_cut_answer_is_incomplete_on_anthropic_messages() {
    a_cut_answer_is_incomplete_on(Api::AnthropicMessages);
}

#[test]
fn typed_settings_on_chat_completions() {
    typed_settings_on(Api::ChatCompletions);
}

#[test]
fn typed_settings_on_anthropic_messages() {
    typed_settings_on(Api::AnthropicMessages);
}

#[test]
fn typed_settings_on_responses() {
    typed_settings_on(Api::OpenAiResponses);
}
