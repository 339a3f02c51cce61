//! The async-openai side of `scripts/bench-compare.sh`: the `turn`
//! bench's non-streamed shape (2,000 sequential turns on one kept-alive
//! connection, the conversation cleared every 10 turns outside the timed
//! span) through async-openai 0.43 on tokio's multi-threaded runtime (what
//! `#[tokio::main]` builds), beside the same bare ureq 3 + typed serde
//! client the `turn` bench uses, run by run in alternating order, both
//! against the same out-of-process replay server.
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
    let (mut bare, mut aoai): (Vec<PerTurn>, Vec<PerTurn>) = (Vec::new(), Vec::new());
    let (mut wall_r, mut cpu_r) = (Vec::new(), Vec::new());
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
        // Alternate the order run by run so drift hits both alike.
        let (b, a) = if r % 2 == 0 {
            let b = run_bare();
            (b, run_aoai())
        } else {
            let a = run_aoai();
            (run_bare(), a)
        };
        wall_r.push(a.us / b.us);
        cpu_r.push(a.cpu_us / b.cpu_us);
        bare.push(b);
        aoai.push(a);
    }
    let col =
        |v: &[PerTurn], f: fn(&PerTurn) -> f64| median(&mut v.iter().map(f).collect::<Vec<_>>());
    println!(
        "| shape | client | us/turn | wall ratio to bare | CPU us/turn (client threads) | CPU ratio to bare | CPU us/turn (/proc/self/stat, whole run) | ctx switches/turn (client threads) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (name, v, wall, cpu) in [
        (
            "bare ureq + serde",
            &bare,
            "1.00x".to_string(),
            "1.00x".to_string(),
        ),
        (
            &*format!("async-openai 0.43, {runtime}"),
            &aoai,
            format!("{:.2}x", median(&mut wall_r)),
            format!("{:.2}x", median(&mut cpu_r)),
        ),
    ] {
        println!(
            "| non-streamed | {name} | {:.1} | {wall} | {:.1} | {cpu} | {:.1} | {:.2} |",
            col(v, |p| p.us),
            col(v, |p| p.cpu_us),
            col(v, |p| p.stat_cpu_us),
            col(v, |p| p.ctx),
        );
    }
}
