//! The non-streamed and streamed turn shared by the `turn` bench and the
//! async-openai comparison (`benches/compare/async-openai`): the bare
//! ureq 3 + typed serde client, the conversation it keeps, and the
//! measurement of a run of turns (wall time, CPU time of this process's
//! threads, context switches). `PIKURI_BENCH_THREADS=1` prints each run's
//! CPU per turn of the calling thread and of the others on stderr, in the
//! order the runs ran (`BENCHMARKS.md`, issue 42, session 15).

use std::io::BufReader;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{
    Handoff, WireUsage, client_threads, process_cpu, sse_text_each, thread_cpu, thread_ctx_switches,
};

/// Turns between two conversation resets (outside the timed span).
pub(crate) const BLOCK: usize = 10;

/// The non-streamed answer every turn gets (a JSON body).
pub(crate) const ANSWER: &str = r#"{"id":"chatcmpl-42","object":"chat.completion","created":1741569952,"model":"qwen3","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today? Ask me anything about the code base."},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":17,"total_tokens":38}}"#;

/// The text of [`ANSWER`].
pub(crate) const ANSWER_TEXT: &str =
    "Hello! How can I help you today? Ask me anything about the code base.";

/// The user's question of every turn.
pub(crate) const QUESTION: &str = "What does the listener hub do?";

/// The model name every client sends.
pub(crate) const MODEL: &str = "qwen3-8b";

#[derive(Serialize, Deserialize, Clone)]
pub(crate) struct WireMessage {
    pub(crate) role: String,
    pub(crate) content: String,
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: &'a [WireMessage],
    stream: bool,
}

#[derive(Deserialize)]
struct Response {
    choices: Vec<ResponseChoice>,
    #[allow(dead_code, reason = "parsed like a real client would")]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct ResponseChoice {
    message: ResponseMessage,
    #[allow(dead_code, reason = "parsed like a real client would")]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    #[serde(default)]
    content: Option<String>,
}

/// The bare client: one ureq agent, a conversation, nothing else (or, for
/// the hand-off baselines, plus one [`Handoff`] or more).
pub(crate) struct Bare {
    pub(crate) agent: ureq::Agent,
    pub(crate) url: String,
    messages: Vec<WireMessage>,
    stream: bool,
    body: Vec<u8>,
    /// The hand-off baselines' consumers: each gets every text, and a
    /// turn ends once each acknowledged its flush (asked of all first,
    /// then awaited, as pikuri's flush does).
    pub(crate) handoff: Vec<Handoff>,
}

/// A ureq agent configured as the bare clients use it.
pub(crate) fn ureq_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
}

impl Bare {
    pub(crate) fn new(base: &str, stream: bool) -> Bare {
        Bare {
            agent: ureq_agent(),
            url: format!("{base}/chat/completions"),
            messages: Vec::new(),
            stream,
            body: Vec::new(),
            handoff: Vec::new(),
        }
    }

    /// One turn: returns the answer's length in bytes.
    pub(crate) fn turn(&mut self) -> usize {
        self.messages.push(WireMessage {
            role: "user".into(),
            content: QUESTION.into(),
        });
        self.body.clear();
        serde_json::to_writer(
            &mut self.body,
            &WireRequest {
                model: MODEL,
                messages: &self.messages,
                stream: self.stream,
            },
        )
        .expect("request serializes");
        let resp = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .send(&self.body[..])
            .expect("bare request");
        let answer = if self.stream {
            let mut reader = BufReader::new(resp.into_body().into_reader());
            let handoff = &self.handoff;
            let text = sse_text_each(&mut reader, |t| {
                for h in handoff {
                    h.text(t);
                }
            });
            // Drain to the end so the connection is reused.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
            text
        } else {
            let bytes = resp.into_body().read_to_vec().expect("answer read");
            let r: Response = serde_json::from_slice(&bytes).expect("answer parses");
            r.choices
                .into_iter()
                .next()
                .and_then(|c| c.message.content)
                .unwrap_or_default()
        };
        for h in &self.handoff {
            if !self.stream {
                h.text(&answer);
            }
            h.ask_flush();
        }
        for h in &self.handoff {
            h.wait_flushed();
        }
        let n = answer.len();
        self.messages.push(WireMessage {
            role: "assistant".into(),
            content: answer,
        });
        n
    }

    pub(crate) fn reset(&mut self) {
        self.messages.clear();
    }
}

/// What one run of turns measured, per turn.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct PerTurn {
    /// Wall time of the turns (resets left out), µs.
    pub(crate) us: f64,
    /// On-CPU time of this process's threads over the whole run
    /// (`/proc/self/task/*/schedstat`, ns resolution; a thread that exits
    /// during the run is missed, none of the subjects' threads do), µs.
    pub(crate) cpu_us: f64,
    /// `utime + stime` of `/proc/self/stat` over the whole run (every
    /// thread, exited ones too, at 10 ms ticks), µs.
    pub(crate) stat_cpu_us: f64,
    /// Context switches of this process's threads.
    pub(crate) ctx: f64,
    /// Context switches of the calling thread.
    pub(crate) own_ctx: f64,
    /// On-CPU time of the calling thread alone, µs (the rest of `cpu_us`
    /// is the other threads': a listener's, the hand-off consumer's).
    pub(crate) own_cpu_us: f64,
}

/// `turns` calls of `one`, each asserted to return `expect`, in blocks of
/// [`BLOCK`] with `reset` between blocks. Wall time counts the blocks
/// alone; CPU time and context switches are read once before the first
/// block and once after the last (reading `/proc` costs some 10 us per
/// thread and file, which per block would weigh on subjects with more
/// threads), so they include the resets, which clear a `Vec`.
pub(crate) fn measure(
    turns: usize,
    expect: usize,
    one: &mut dyn FnMut() -> usize,
    reset: &mut dyn FnMut(),
) -> PerTurn {
    let mut time = Duration::ZERO;
    let ((c0, cpu0), o0, stat0) = (client_threads(), thread_ctx_switches(), process_cpu());
    let own_cpu0 = thread_cpu();
    let mut done = 0;
    while done < turns {
        let n = BLOCK.min(turns - done);
        let t = Instant::now();
        for _ in 0..n {
            assert_eq!(one(), expect);
        }
        time += t.elapsed();
        reset();
        done += n;
    }
    let own_cpu = thread_cpu().saturating_sub(own_cpu0);
    let stat = process_cpu().saturating_sub(stat0);
    let own = thread_ctx_switches() - o0;
    let (c1, cpu1) = client_threads();
    let per = |x: f64| x / turns as f64;
    let p = PerTurn {
        us: per(time.as_secs_f64() * 1e6),
        cpu_us: per(cpu1.saturating_sub(cpu0) as f64 / 1e3),
        stat_cpu_us: per(stat.as_secs_f64() * 1e6),
        ctx: per(c1.saturating_sub(c0) as f64),
        own_ctx: per(own as f64),
        own_cpu_us: per(own_cpu.as_secs_f64() * 1e6),
    };
    // PIKURI_BENCH_THREADS=1: where a run's CPU went, on stderr.
    if std::env::var_os("PIKURI_BENCH_THREADS").is_some() {
        eprintln!(
            "# threads: calling {:.1} us/turn, others {:.1} us/turn, calling ctx {:.2}",
            p.own_cpu_us,
            p.cpu_us - p.own_cpu_us,
            p.own_ctx
        );
    }
    p
}
