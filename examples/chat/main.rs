//! A terminal chat with a tool-calling agent: a REPL, or one question with `-p`.
//!
//! ```text
//! cargo run --example chat                                  # REPL, built-in demo model
//! cargo run --example chat -- -p "What is 17*23?"           # one turn, answer on stdout
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 cargo run --example chat   # llama.cpp, Ollama…
//! scripts/chat-local.sh                                     # llama.cpp + SmolLM2, built here
//! ANTHROPIC_API_KEY=... ANTHROPIC_MODEL=claude-sonnet-4-5 cargo run --example chat
//! cargo run --example chat -- --image photo.png -p "What is in this picture?"
//! cargo run --example chat -- --help                        # every option, exit codes
//! ```
//!
//! Without `--base-url` (or `OPENAI_BASE_URL`) the agent talks to a built-in
//! demo model ([`demo`]: a [`FakeServer`](pikuri::testing::FakeServer) that
//! answers arithmetic, time and file questions with the matching tool), so
//! the example runs on a machine with no model server. Without `--model` (or
//! `OPENAI_MODEL`) the first model the server lists is used
//! ([`ChatTransport::list_models`]). The environment is read as
//! [`ChatTransport::from_env`] reads it: the `ANTHROPIC_*` variables alone
//! mean Anthropic's Messages API ([`args`]).
//!
//! `--session FILE` keeps the conversation in a journal; a start that finds
//! its last turn cut off finishes that turn first, as a turn like any other
//! (in the REPL after the banner, its approval prompts answerable; with
//! `-p` and the same question, that turn is the answer).
//!
//! # Files
//!
//! - `main.rs`: the outcome of a run, the backend, the agent, `-p`.
//! - [`args`]: the command line.
//! - [`approve`]: who approves state-changing tools (`write_file`), `--yes`.
//! - [`delegate`]: `--subagents` (researcher, file_miner).
//! - [`demo`]: the demo model.
//! - [`mcp`]: `--mcp` and `--mcp-url` (MCP servers' tools).
//! - [`skills`]: `--skills` (Agent Skills read on demand) and `/skills`.
//! - [`tools`]: `--defer-above`, `--no-tool-search` (MCP tools deferred)
//!   and `/tools`.
//! - [`guards`]: `--no-redact`, `--block-input`, `--deny-tool`,
//!   `--max-answer-chars`, `--judge` (a guard of each kind), `--hold-deltas`.
//! - [`console`]: the listeners (REPL console, `-p` answer printer).
//! - [`repl`]: the interactive chat.
//!
//! # How the REPL is wired
//!
//! - stdin is read on its own thread, and the `ctrlc` handler turns Ctrl+C
//!   into a message; both feed one channel that the main thread reads.
//!   SIGTERM and SIGHUP end the chat from a thread of their own, after
//!   [`pikuri::close_all`] (exit 143 and 129).
//! - A turn runs on a worker thread that owns the [`Agent`] for the turn and
//!   sends it back with the result. While a turn runs, a typed line goes to
//!   the [`Interloper`] (`(queued: …)` on stderr; the terminal listener
//!   prints `(delivered: …)` when the agent takes it), Ctrl+C calls
//!   [`Cancellable::cancel`], and a `/command` (with any line after it) waits
//!   for the turn to end. A line that arrived after the agent's last look at
//!   the Interloper becomes the next turn (or is dropped after a cancel).
//! - `run_loop` returns only after every listener has handled every event, so
//!   the `> ` prompt never lands in the middle of an answer. The Terminal and
//!   the TokenLog share one listener thread ([`console::Console`]) so that
//!   the token line (one per turn) never lands in the middle of one either.
//! - `--api` (or `PIKURI_API`) picks the wire format, applied with
//!   [`ChatTransport::with_api`]; `/api NAME` switches it from the next turn
//!   on, like `/model`. `--image` and `/image` load the file at once (so a
//!   file too large or not an image is reported before anything is sent)
//!   and send it with the next message ([`Agent::run_loop_message_with`]).
//! - `/model NAME` keeps the new transport pending and hands it to
//!   [`Agent::run_loop_with`] on the next turn (the history survives).
//!   After a turn, the pending transport is the agent's own, so a turn that
//!   fell back to a `--fallback` server stays there.
//! - With `OTEL_EXPORTER_OTLP_ENDPOINT` set (and the `otel` feature), each
//!   turn is exported to that collector as OpenTelemetry GenAI spans
//!   ([`pikuri::otel`]; the other `OTEL_*` variables apply too).
//! - Compaction ([`Compaction::summarize`]) is on unless `--no-compact`:
//!   a chat is expected to outlive the context window; `/compact` runs it
//!   at once.

mod approve;
mod args;
mod console;
mod delegate;
mod demo;
mod files;
mod guards;
mod mcp;
mod repl;
mod skills;
mod tools;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use pikuri::budget::{Cost, Price, PriceTable};
use pikuri::builtin;
use pikuri::compaction::Compaction;
use pikuri::journal::{FileStore, JournalStore};
use pikuri::listeners::{Delivery, JsonLines, sanitize};
use pikuri::testing::FakeServer;
use pikuri::{
    Agent, Api, Budget, Cancellable, ChatTransport, ErrorKind, FinishReason, Image, Interloper,
    Message, Role, StepLimit, StopReason, Tool,
};

use crate::args::{HELP, Options};
use crate::console::{AnswerOut, Console, Printed};
use crate::repl::Repl;

// ---------------------------------------------------------------------------
// Failures and exit codes

/// Why the program stops with a non-zero status.
#[derive(Debug)]
enum Failure {
    /// A bad option or value (exit 2).
    Usage(String),
    /// The step budget, `--max-tokens` or `--max-cost` ran out under
    /// `--on-exhausted raise`, or `--lifetime-tokens` or `--lifetime-cost`
    /// ran out (exit 3).
    StepLimit(String),
    /// Ctrl+C (exit 130).
    Cancelled,
    /// Anything else (exit 1).
    Other(String),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Failure::Other(_) => 1,
            Failure::Usage(_) => 2,
            Failure::StepLimit(_) => 3,
            Failure::Cancelled => 130,
        }
    }

    fn message(&self) -> String {
        match self {
            Failure::Usage(m) => format!("{m} (see --help)"),
            Failure::StepLimit(m) | Failure::Other(m) => m.clone(),
            Failure::Cancelled => "cancelled".to_string(),
        }
    }
}

impl From<pikuri::Error> for Failure {
    fn from(e: pikuri::Error) -> Failure {
        if e.is_cancelled() {
            Failure::Cancelled
        } else if e.is_step_limit() || e.kind() == ErrorKind::Budget {
            Failure::StepLimit(e.to_string())
        } else {
            Failure::Other(e.to_string())
        }
    }
}

/// Set when SIGTERM or SIGHUP arrived: the signal's thread closes the agents
/// and exits the process, so `main` must not return first.
static TERMINATING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn main() -> ExitCode {
    let result = run();
    while TERMINATING.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::park();
    }
    // The exit path: returning from `main` ends the process without dropping
    // an agent still running a turn on the worker thread (a second Ctrl+C
    // exits mid-turn), so its close handlers would never run. `close_all`
    // runs them for every agent still open; an agent already closed is
    // skipped.
    pikuri::close_all();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("error: {}", sanitize(&failure.message()));
            ExitCode::from(failure.code())
        }
    }
}

fn run() -> Result<u8, Failure> {
    let Some(opts) = Options::parse(std::env::args().skip(1))? else {
        print!("{HELP}");
        return Ok(0);
    };
    let backend = Backend::connect(&opts)?;
    let cancellable = Cancellable::new();
    exit_on_termination()?;
    if let Some(prompt) = &opts.prompt {
        let c = cancellable.clone();
        ctrlc::set_handler(move || c.cancel()).map_err(|e| Failure::Other(e.to_string()))?;
        let (out, printed) = AnswerOut::new();
        let agent = configure(&opts, backend.transport.clone(), &cancellable)?;
        let mut agent = build(&opts, agent.add_listener(out))?;
        let message = Message::user_with_images(prompt.clone(), load_images(&opts.images)?);
        if let Some(question) = cut_off_question(&agent) {
            // The same `-p` run again after a crash: finishing the cut-off
            // turn answers it; asking again would pay for it twice.
            let same = question.trim() == prompt.trim();
            let again = if same {
                "; it is this question, so it is not asked again"
            } else {
                ""
            };
            eprintln!("{}{again}", resume_notice(&question));
            one_shot(&mut agent, Agent::resume_run, &printed)?;
            if same {
                return Ok(0);
            }
        }
        return one_shot(&mut agent, |a| a.run_loop_message(message), &printed).map(|()| 0);
    }
    let interloper = Interloper::new();
    let cfg = configure(&opts, backend.transport.clone(), &cancellable)?
        .interloper(interloper.clone())
        // The conversation on stdout, the token readout on stderr.
        .add_listener(Console::new());
    let agent = build(&opts, cfg)?;
    let images = load_images(&opts.images)?;
    Repl::run(
        agent,
        backend.transport.clone(),
        cancellable,
        interloper,
        images,
    )
}

/// SIGTERM or SIGHUP (a service manager, a closed terminal) ends the chat
/// at once, from a thread of its own: run every open agent's close handlers
/// (`close_all`: MCP server processes, files), then exit with 128 + the
/// signal's number, a turn in flight included. Without this the default
/// action would end the process with no `Drop` and no close handler run.
/// Closing the agent ends its turn, and `main` then waits for this thread
/// to exit (see [`TERMINATING`]).
fn exit_on_termination() -> Result<(), Failure> {
    use signal_hook::consts::{SIGHUP, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP])
        .map_err(|e| Failure::Other(e.to_string()))?;
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            TERMINATING.store(true, std::sync::atomic::Ordering::SeqCst);
            pikuri::close_all();
            std::process::exit(128 + signal);
        }
    });
    Ok(())
}

// ---------------------------------------------------------------------------
// Where the chat goes

/// The transport, and the demo server behind it when there is no real one
/// (kept alive as long as the backend).
struct Backend {
    transport: ChatTransport,
    _demo: Option<FakeServer>,
}

impl Backend {
    fn connect(opts: &Options) -> Result<Backend, Failure> {
        let Some(base) = opts.base_url.as_deref() else {
            eprintln!("no --base-url or OPENAI_BASE_URL: using the built-in demo model");
            let server = demo::start(opts.model.as_deref())
                .map_err(|e| Failure::Other(format!("cannot start the demo model: {e}")))?;
            let transport = server
                .transport()
                .with_api(opts.api)
                .with_context_window(opts.context_window);
            return Ok(Backend {
                transport,
                _demo: Some(server),
            });
        };
        let mut transport = ChatTransport::new(opts.model.clone().unwrap_or_default())
            .with_provider(provider(opts.api))
            .with_api(opts.api)
            .with_api_base(base.trim_end_matches('/'))
            .with_context_window(opts.context_window);
        if let Some(key) = &opts.api_key {
            transport = transport.with_api_key(key.clone());
        }
        if opts.model.is_none() {
            let cannot = |why: String| {
                Failure::Other(format!("cannot list the models at {base}/models: {why}"))
            };
            let models = transport.list_models().map_err(|e| cannot(e.to_string()))?;
            let first = models.into_iter().next();
            let model = first.ok_or_else(|| cannot("the list is empty; pass --model".into()))?;
            transport = transport.with_model(model);
        }
        Ok(Backend {
            transport,
            _demo: None,
        })
    }
}

// ---------------------------------------------------------------------------
// The agent

/// The demo model's made-up price, dollars per million input and output
/// tokens (so `--max-cost` works without a real model).
const DEMO_PRICE: (f64, f64) = (1.0, 2.0);

/// The per-turn budget of `--max-tokens`, `--max-cost` and `--price`; a
/// limit trips as `--on-exhausted` says. `--lifetime-tokens` and
/// `--lifetime-cost` go beside it, over every turn.
fn budget(opts: &Options, model: Option<&str>) -> Budget {
    let mut budget = Budget::new().on_exhausted(opts.on_exhausted);
    let limited = opts.max_tokens.is_some()
        || opts.max_cost.is_some()
        || opts.lifetime_tokens.is_some()
        || opts.lifetime_cost.is_some();
    let demo = opts.base_url.is_none() && limited;
    let price = opts.price.or_else(|| demo.then_some(DEMO_PRICE));
    if let (Some((input, output)), Some(model)) = (price, model) {
        let table = PriceTable::new().with(model, Price::per_million_usd(input, output));
        budget = budget.prices(table);
    }
    if let Some(n) = opts.max_tokens {
        budget = budget.max_total_tokens(n);
    }
    if let Some(usd) = opts.max_cost {
        budget = budget.max_cost(Cost::from_usd(usd));
    }
    let mut lifetime = Budget::new();
    if let Some(n) = opts.lifetime_tokens {
        lifetime = lifetime.max_total_tokens(n);
    }
    if let Some(usd) = opts.lifetime_cost {
        lifetime = lifetime.max_cost(Cost::from_usd(usd));
    }
    if opts.lifetime_tokens.is_some() || opts.lifetime_cost.is_some() {
        budget = budget.lifetime(lifetime);
    }
    budget
}

/// The agent's configuration, common to both modes.
fn configure(
    opts: &Options,
    transport: ChatTransport,
    cancellable: &Cancellable,
) -> Result<pikuri::Configurator, Failure> {
    let limit = StepLimit::with_policy(opts.max_steps, opts.on_exhausted);
    let fallbacks = opts
        .fallbacks
        .iter()
        .map(|(url, model)| {
            let model = model
                .clone()
                .or_else(|| transport.model().map(str::to_string));
            let mut t = ChatTransport::new(model.unwrap_or_default())
                .with_provider(provider(opts.api))
                .with_api(opts.api)
                .with_api_base(url.clone());
            if let Some(key) = &opts.api_key {
                t = t.with_api_key(key.clone());
            }
            t
        })
        .collect();
    // OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    // set: every turn goes to that collector as OpenTelemetry spans.
    #[cfg(feature = "otel")]
    let exporter = pikuri::otel::OtlpExporter::from_env().map(|e| e.with_transport(&transport));
    let budget = budget(opts, transport.model());
    let guards = guards::guards(opts, &transport);
    let mut cfg = Agent::builder(transport)
        .budget(budget)
        .fallback(fallbacks)
        .system_prompt(opts.system.clone())
        .step_limit(limit)
        .cancellable(cancellable.clone())
        .approver(approve::approver(opts))
        .streaming(opts.stream);
    if opts.compact {
        // A chat is expected to go on past the context window.
        cfg = cfg.compaction(Compaction::summarize());
    }
    let root = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    for tool in chosen_tools(&opts.tools, &root) {
        cfg = cfg.add_tool(tool);
    }
    cfg = delegate::wire(cfg, opts, &root)?;
    // Started at build; dropping or closing the agent shuts them down.
    let defer = opts.defer_above.is_some();
    if let Some(registry) = mcp::registry(&opts.mcp, approve::input_provider(opts), defer) {
        cfg = cfg.add_extension(registry);
    }
    cfg = tools::search(cfg, opts);
    if let Some(skills) = skills::extension(&opts.skills)? {
        cfg = cfg.add_extension(skills);
    }
    if let Some(g) = guards {
        cfg = cfg.guards(g).on_event(|e| {
            if let Some(line) = guards::tripped(e) {
                eprintln!("{line}");
            }
        });
    }
    if let Some(path) = &opts.session {
        cfg = session(cfg, path)?;
    }
    if let Some(path) = &opts.events {
        // Why before the open: it truncates, and blocks on a FIFO.
        files::check_writable(
            path,
            "an events file",
            files::EVENTS_SNIFF_BYTES,
            files::is_events,
        )
        .map_err(|e| Failure::Usage(format!("--events: {e}")))?;
        let log = JsonLines::create(path).map_err(|e| {
            Failure::Usage(format!("--events: cannot create {}: {e}", path.display()))
        })?;
        // Why the barrier for a file that would hand off: the file is whole
        // at every prompt (`close_all`, on SIGTERM, closes every listener).
        cfg = cfg.add_listener(log.with_delivery(Delivery::Barrier));
    }
    #[cfg(feature = "otel")]
    if let Some(exporter) = exporter {
        cfg = cfg.add_listener(exporter);
    }
    Ok(cfg)
}

/// `--session FILE`: the journal `<dir>/<name>.journal` (the path
/// [`args`] checked: a valid name in a folder that exists), the run
/// `<name>`; a new run when the file holds nothing yet, else the run
/// resumed.
fn session(cfg: pikuri::Configurator, path: &Path) -> Result<pikuri::Configurator, Failure> {
    let run = path
        .file_stem()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // The option's file is bad (a folder, a FIFO, not a journal): a usage
    // error naming it, as `--help` says.
    let store = FileStore::new(dir).map_err(|e| session_file(path, &e))?;
    let records = store.read(&run).map_err(|e| session_file(path, &e))?;
    Ok(if records.is_empty() {
        cfg.journal(store, run)
    } else {
        cfg.resume(store, run)
    })
}

/// `--session`'s journal cannot be used: exit 2, naming the option.
fn session_file(path: &Path, e: &pikuri::Error) -> Failure {
    Failure::Usage(format!(
        "--session {}: {e}",
        bounded(&path.display().to_string(), 200)
    ))
}

/// The agent; a session another chat holds is said in the user's terms,
/// one whose journal is damaged or another configuration's is a usage
/// error naming `--session`.
fn build(opts: &Options, cfg: pikuri::Configurator) -> Result<Agent, Failure> {
    cfg.build().map_err(|e| match &opts.session {
        Some(path)
            if matches!(
                e.kind(),
                ErrorKind::JournalCorrupt | ErrorKind::JournalMismatch | ErrorKind::JournalIo
            ) =>
        {
            session_file(path, &e)
        }
        Some(path) if e.kind() == ErrorKind::RunLocked => Failure::Other(format!(
            "--session {} is in use by another chat (it holds the lock file {} beside it); \
             try again when that chat has ended",
            bounded(&path.display().to_string(), 200),
            bounded(&path.with_extension("lock").display().to_string(), 200),
        )),
        _ => e.into(),
    })
}

/// The question of the turn a crash (or a second Ctrl+C) cut off, when
/// this session's journal ends with one: that turn is finished first, from
/// where its journal stops ([`Agent::resume_run`]).
pub(crate) fn cut_off_question(agent: &Agent) -> Option<String> {
    agent.interrupted().then(|| {
        agent
            .messages()
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.content.clone())
            .unwrap_or_default()
    })
}

/// What stderr says before the cut-off turn is finished: which question.
pub(crate) fn resume_notice(question: &str) -> String {
    format!(
        "the last turn of this session was cut off: finishing it (\"{}\")",
        bounded(question, 80)
    )
}

/// `text` on one line for a notice: sanitized, its whitespace runs one
/// space, at most `max` characters (`…` marks a cut).
pub(crate) fn bounded(text: &str, max: usize) -> String {
    let clean = sanitize(text);
    let line = clean.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The provider hint for an API.
fn provider(api: Api) -> &'static str {
    match api {
        Api::AnthropicMessages => "anthropic",
        Api::Gemini => "gemini",
        _ => "openai",
    }
}

/// The images of `paths`, or why one cannot be sent.
pub(crate) fn load_images(paths: &[PathBuf]) -> Result<Vec<Image>, Failure> {
    paths
        .iter()
        .map(|p| Image::from_file(p).map_err(|e| Failure::Usage(format!("--image: {e}"))))
        .collect()
}

fn chosen_tools(names: &[String], root: &Path) -> Vec<Arc<dyn Tool>> {
    let write: Arc<dyn Tool> = Arc::new(approve::write_file(root.to_path_buf()));
    builtin::all(root)
        .into_iter()
        .chain([write])
        .filter(|t| names.iter().any(|n| n == t.name()))
        .collect()
}

/// `-p`: one turn (`turn`: a new message, or the cut-off turn finished),
/// the answer alone on stdout. [`AnswerOut`] streamed it already; this ends
/// its line, or prints it when nothing was streamed.
fn one_shot(
    agent: &mut Agent,
    turn: impl FnOnce(&mut Agent) -> pikuri::Result<pikuri::Outcome>,
    printed: &Mutex<Printed>,
) -> Result<(), Failure> {
    let result = turn(agent);
    // `run_loop` returned: every listener has handled every event.
    let mut printed = printed.lock().unwrap_or_else(PoisonError::into_inner);
    // The next turn (after a finished cut-off one) starts on a clean line.
    let printed = &std::mem::take(&mut *printed);
    let mut out = io::stdout().lock();
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => {
            if printed.open {
                let _ = writeln!(out);
            }
            return Err(e.into());
        }
    };
    // The answer goes to stdout as it came; that it is cut, to stderr after it.
    let cut = (outcome.stop_reason == StopReason::Incomplete).then_some(match outcome.finish {
        FinishReason::Length => "cut off by the token limit",
        FinishReason::Filtered => "withheld by a content filter",
        _ => "cut off by the server",
    });
    let answer = outcome
        .answer
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| Failure::Other("the model gave an empty answer".to_string()))?;
    let written = if answer == printed.last || answer == printed.current {
        writeln!(out)
    } else {
        let text = if io::IsTerminal::is_terminal(&io::stdout()) {
            sanitize(&answer).into_owned()
        } else {
            answer
        };
        let gap = if printed.open { "\n" } else { "" };
        writeln!(out, "{gap}{text}")
    };
    written
        .and_then(|()| out.flush())
        .map_err(|e| Failure::Other(format!("cannot write the answer: {e}")))?;
    if let Some(cut) = cut {
        eprintln!("warning: the answer was {cut}; it is incomplete");
    }
    Ok(())
}
