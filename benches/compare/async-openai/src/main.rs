//! The async-openai side of `scripts/bench-compare.sh`: the `turn`
//! bench's non-streamed shape (2,000 sequential turns on one kept-alive
//! connection, the conversation cleared every 10 turns outside the timed
//! span) through async-openai 0.43 on tokio's multi-threaded runtime (what
//! `#[tokio::main]` builds), beside the same bare ureq 3 + typed serde
//! client the `turn` bench uses, and pikuri (its core, no feature) with one
//! no-op listener that keeps the end-of-turn barrier and with one that
//! hands off, run by run in rotating order, all against the same
//! out-of-process replay server: every ratio is a same-run ratio.
//!
//! A dev tool, never a dependency of pikuri: this package has its own
//! `[workspace]`, and the crate's build never sees it. Environment:
//! `PIKURI_BENCH_RUNS` (default 7), `PIKURI_BENCH_QUICK=1` (200 turns),
//! `PIKURI_COMPARE_RUNTIME=current` (tokio's current-thread runtime).

#[allow(dead_code, reason = "shared with the crate's bench binaries")]
#[path = "../../../common/mod.rs"]
mod common;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestUserMessage, CreateChatCompletionRequestArgs,
};

use common::turns::{ANSWER, ANSWER_TEXT, Bare, MODEL, PerTurn, QUESTION, measure};
use common::{Script, Server, header, json_response, median, quick, runs};

/// A pikuri agent as the `turn` bench builds it, with one no-op listener:
/// a closure (`Delivery::Barrier`), or one that hands off.
fn pikuri_agent(base: &str, hand_off: bool) -> pikuri::Agent {
    struct HandOff;
    impl pikuri::Listener for HandOff {
        fn on_event(&mut self, event: &pikuri::Event) {
            std::hint::black_box(event);
        }
        fn delivery(&self) -> pikuri::listeners::Delivery {
            pikuri::listeners::Delivery::HandOff
        }
    }
    let transport = pikuri::ChatTransport::new(MODEL)
        .with_api_base(base)
        .with_context_window(Some(32_768));
    let cfg = pikuri::Agent::builder(transport)
        .streaming(false)
        .http(pikuri::HttpConfig::default().with_max_retries(0));
    let cfg = if hand_off {
        cfg.add_listener(HandOff)
    } else {
        cfg.add_listener(|e: &pikuri::Event| {
            std::hint::black_box(e);
        })
    };
    cfg.build().expect("agent builds")
}

/// The async-openai client and its conversation.
struct Openai {
    client: Client<OpenAIConfig>,
    messages: Vec<ChatCompletionRequestMessage>,
}

impl Openai {
    fn new(base: &str) -> Openai {
        let config = OpenAIConfig::new().with_api_base(base).with_api_key("none");
        Openai {
            client: Client::with_config(config),
            messages: Vec::new(),
        }
    }

    /// One turn: returns the answer's length in bytes.
    async fn turn(&mut self) -> usize {
        self.messages
            .push(ChatCompletionRequestUserMessage::from(QUESTION).into());
        let request = CreateChatCompletionRequestArgs::default()
            .model(MODEL)
            .messages(self.messages.clone())
            .build()
            .expect("request builds");
        let response = self
            .client
            .chat()
            .create(request)
            .await
            .expect("async-openai request");
        let answer = response
            .choices
            .into_iter()
            .next()
            .and_then(|c| c.message.content)
            .unwrap_or_default();
        let n = answer.len();
        self.messages
            .push(ChatCompletionRequestAssistantMessage::from(answer).into());
        n
    }
}

fn main() {
    common::serve_if_child();
    header("async-openai 0.43 vs bare ureq, non-streamed turns (loopback, keep-alive)");
    println!("# {}", common::server_placement());
    let current = std::env::var("PIKURI_COMPARE_RUNTIME").is_ok_and(|v| v == "current");
    let rt = if current {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
    .enable_all()
    .build()
    .expect("tokio runtime");
    let runtime = if current {
        "tokio current-thread"
    } else {
        "tokio multi-thread"
    };
    let turns = if quick() { 200 } else { 2_000 };
    let expect = ANSWER_TEXT.len();
    let server = Server::start(Script::Fixed(json_response(ANSWER)), false);
    let base = server.base_url();
    // Subjects: bare, async-openai, pikuri with a barrier listener, pikuri
    // with a hand-off listener.
    const NAMES: usize = 4;
    let mut all: Vec<Vec<PerTurn>> = vec![Vec::new(); NAMES];
    let mut wall_r: Vec<Vec<f64>> = vec![Vec::new(); NAMES];
    let mut cpu_r: Vec<Vec<f64>> = vec![Vec::new(); NAMES];
    for r in 0..runs() {
        let run_bare = || {
            let client = std::cell::RefCell::new(Bare::new(&base, false));
            measure(
                turns,
                expect,
                &mut || client.borrow_mut().turn(),
                &mut || {
                    client.borrow_mut().reset();
                },
            )
        };
        let run_aoai = || {
            let client = std::cell::RefCell::new(Openai::new(&base));
            measure(
                turns,
                expect,
                // One `block_on` per turn: `#[tokio::main]` too runs the
                // caller's future on the calling thread.
                &mut || rt.block_on(client.borrow_mut().turn()),
                &mut || client.borrow_mut().messages.clear(),
            )
        };
        let run_pikuri = |hand_off: bool| {
            let agent = std::cell::RefCell::new(pikuri_agent(&base, hand_off));
            let per = measure(
                turns,
                expect,
                &mut || {
                    let out = agent.borrow_mut().run_loop(QUESTION).expect("turn");
                    out.answer.map_or(0, |a| a.len())
                },
                &mut || agent.borrow_mut().clear_conversation(),
            );
            agent.borrow_mut().close();
            per
        };
        // Rotate the order run by run so drift hits every subject alike.
        let mut this = [PerTurn::default(); NAMES];
        for k in 0..NAMES {
            let i = (k + r) % NAMES;
            this[i] = match i {
                0 => run_bare(),
                1 => run_aoai(),
                2 => run_pikuri(false),
                _ => run_pikuri(true),
            };
        }
        for i in 0..NAMES {
            wall_r[i].push(this[i].us / this[0].us);
            cpu_r[i].push(this[i].cpu_us / this[0].cpu_us);
            all[i].push(this[i]);
        }
    }
    let col =
        |v: &[PerTurn], f: fn(&PerTurn) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
    println!(
        "| shape | client | us/turn | wall ratio to bare | CPU us/turn (client threads) | CPU ratio to bare | CPU us/turn (/proc/self/stat, whole run) | ctx switches/turn (client threads) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let names = [
        "bare ureq + serde".to_string(),
        format!("async-openai 0.43, {runtime}"),
        "pikuri, 1 listener (barrier)".to_string(),
        "pikuri, 1 hand-off listener".to_string(),
    ];
    for (i, name) in names.iter().enumerate() {
        let v = &all[i];
        println!(
            "| non-streamed | {name} | {:.1} | {:.2}x | {:.1} | {:.2}x | {:.1} | {:.2} |",
            col(v, |p| p.us),
            median(&mut wall_r[i]),
            col(v, |p| p.cpu_us),
            median(&mut cpu_r[i]),
            col(v, |p| p.stat_cpu_us),
            col(v, |p| p.ctx),
        );
    }
}
