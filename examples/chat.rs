//! A terminal chat with a tool-calling agent: a REPL, or one question with `-p`.
//!
//! ```text
//! cargo run --example chat                                  # REPL, scripted demo model
//! cargo run --example chat -- -p "What is 6*7?"             # one turn, answer on stdout
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 cargo run --example chat   # llama.cpp, Ollama…
//! cargo run --example chat -- --help                        # every option, exit codes
//! ```
//!
//! Without `--base-url` (or `OPENAI_BASE_URL`) the agent talks to a built-in
//! scripted model ([`pikuri::testing::FakeServer`]), so the example runs on a
//! machine with no model server. Without `--model` (or `OPENAI_MODEL`) the
//! first model the server lists at `/v1/models` is used; that look-up is a
//! tiny hand-written HTTP GET, so it works for `http://` servers only.
//!
//! # How the REPL is wired
//!
//! - stdin is read on its own thread, and the `ctrlc` handler turns Ctrl+C
//!   into a message; both feed one channel that the main thread reads.
//! - A turn runs on a worker thread that owns the [`Agent`] for the turn and
//!   sends it back with the result. While a turn runs, a typed line goes to
//!   the [`Interloper`] (`(queued: …)` on stderr; the terminal listener
//!   prints `(delivered: …)` when the agent takes it), Ctrl+C calls
//!   [`Cancellable::cancel`], and a `/command` (with any line after it) waits
//!   for the turn to end. A line that arrived after the agent's last look at
//!   the Interloper becomes the next turn (or is dropped after a cancel).
//! - `run_loop` returns only after every listener has handled every event, so
//!   the `> ` prompt never lands in the middle of an answer. The Terminal and
//!   the TokenLog share one listener thread (`Console`) so that a token
//!   line never lands in the middle of one either.
//! - `/model NAME` keeps the new transport pending and hands it to
//!   [`Agent::run_loop_with`] on the next turn (the history survives).

use std::collections::VecDeque;
use std::io::{self, BufRead, IsTerminal, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread;
use std::time::Duration;

use pikuri::builtin;
use pikuri::listeners::{JsonLines, Terminal, TokenLog, sanitize};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{
    Agent, Cancellable, ChatTransport, Event, History, Interloper, Listener, OnExhausted, Outcome,
    StepLimit, SubAgentListener, Tool,
};

const HELP: &str = "\
chat: talk to a tool-calling agent (a pikuri example)

Usage: chat [OPTIONS]              interactive chat
       chat [OPTIONS] -p TEXT      one turn: the answer alone on stdout

Options:
      --base-url URL        OpenAI-compatible API base, e.g. http://127.0.0.1:8080/v1
                            [env: OPENAI_BASE_URL]; without one, a built-in
                            scripted demo model answers
      --model NAME          model id [env: OPENAI_MODEL]; default: the first id
                            listed at <base-url>/models (http:// servers only)
      --api-key KEY         sent as a bearer token [env: OPENAI_API_KEY]
      --system TEXT         system prompt
      --no-stream           wait for whole responses instead of streaming them
      --max-steps N         tool calls allowed per turn [default: 20]
      --on-exhausted WHAT   when those run out: raise (stop with an error) or
                            synthesize (answer from what was found) [default: synthesize]
      --context-window N    context window in tokens [default: ask the server]
      --events FILE         write every event to FILE, one JSON object per line
      --tools LIST          comma-separated built-in tools, or `none`
                            [default: calculator,current_time,read_file,list_dir]
                            read_file and list_dir see the current directory only
  -p, --prompt TEXT         run one turn, print the answer, exit
  -h, --help                print this help

Interactive chat:
  Lines typed while the agent works are handed to it at its next step.
  Ctrl+C cancels the running turn. Pressed a second time with nothing typed
  in between (after a cancel, or twice at the prompt), it exits.
  /model NAME   use model NAME from the next turn on (the conversation stays)
  /reset        clear the conversation
  /save FILE    save the conversation as JSON
  /load FILE    replace the conversation with a saved one
  /help         list these commands
  /quit         exit (so does end of input)

Exit status:
  0     success; /quit or end of input
  1     error: HTTP, connection, protocol, file, or an empty answer
  2     usage error: unknown option or bad value
  3     step limit exceeded (with --on-exhausted raise)
  130   cancelled with Ctrl+C
";

const COMMANDS: &str = "\
/model NAME   use model NAME from the next turn on
/reset        clear the conversation
/save FILE    save the conversation as JSON
/load FILE    replace the conversation with a saved one
/quit         exit";

const DEFAULT_SYSTEM: &str = "You are a helpful assistant. Use the tools when they help, \
and answer concisely.";
const TOOL_NAMES: [&str; 4] = ["calculator", "current_time", "read_file", "list_dir"];

/// The built-in demo model's answer to every turn, after its calculator call.
const DEMO_ANSWER: &str = "The calculator says 6*7 = 42. (I am the built-in demo model: \
I always ask for 6*7. Pass --base-url to talk to a real model.)";
/// Scripted turns queued for the demo: plenty for a long session.
const DEMO_TURNS: usize = 1000;

// ---------------------------------------------------------------------------
// Failures and exit codes

/// Why the program stops with a non-zero status.
#[derive(Debug)]
enum Failure {
    /// A bad option or value (exit 2).
    Usage(String),
    /// The step budget ran out under `--on-exhausted raise` (exit 3).
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
        } else if e.is_step_limit() {
            Failure::StepLimit(e.to_string())
        } else {
            Failure::Other(e.to_string())
        }
    }
}

fn main() -> ExitCode {
    match run() {
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
    if let Some(prompt) = &opts.prompt {
        let c = cancellable.clone();
        ctrlc::set_handler(move || c.cancel()).map_err(|e| Failure::Other(e.to_string()))?;
        let mut agent = build_agent(&opts, backend.transport.clone(), &cancellable, None)?;
        return one_shot(&mut agent, prompt).map(|()| 0);
    }
    let interloper = Interloper::new();
    let agent = build_agent(
        &opts,
        backend.transport.clone(),
        &cancellable,
        Some(&interloper),
    )?;
    Repl::run(agent, backend.transport.clone(), cancellable, interloper)
}

// ---------------------------------------------------------------------------
// Options

/// The command line, with the `OPENAI_*` fallbacks applied.
#[derive(Debug)]
struct Options {
    base_url: Option<String>,
    model: Option<String>,
    api_key: Option<String>,
    system: String,
    stream: bool,
    max_steps: u32,
    on_exhausted: OnExhausted,
    context_window: Option<u64>,
    events: Option<PathBuf>,
    tools: Vec<String>,
    prompt: Option<String>,
}

impl Options {
    /// Parse the arguments; `None` means `--help`.
    fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Options>, Failure> {
        let mut o = Options {
            base_url: None,
            model: None,
            api_key: None,
            system: DEFAULT_SYSTEM.to_string(),
            stream: true,
            max_steps: 20,
            on_exhausted: OnExhausted::Synthesize,
            context_window: None,
            events: None,
            tools: TOOL_NAMES.iter().map(ToString::to_string).collect(),
            prompt: None,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg, None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| usage(format!("{flag} needs a value")))
            };
            match flag.as_str() {
                "-h" | "--help" => return Ok(None),
                "--no-stream" => o.stream = false,
                "--base-url" => o.base_url = Some(value()?),
                "--model" => o.model = Some(value()?),
                "--api-key" => o.api_key = Some(value()?),
                "--system" => o.system = value()?,
                "--max-steps" => o.max_steps = positive(&flag, &value()?)?,
                "--on-exhausted" => o.on_exhausted = policy(&value()?)?,
                "--context-window" => o.context_window = Some(positive(&flag, &value()?)?),
                "--events" => o.events = Some(PathBuf::from(value()?)),
                "--tools" => o.tools = tool_list(&value()?)?,
                "-p" | "--prompt" => o.prompt = Some(value()?),
                other if other.starts_with('-') => {
                    return Err(usage(format!("unknown option `{other}`")));
                }
                other => return Err(usage(format!("unexpected argument `{other}`"))),
            }
        }
        if o.prompt.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(usage("-p needs a non-blank message".to_string()));
        }
        o.base_url = o.base_url.or_else(|| env("OPENAI_BASE_URL"));
        o.model = o.model.or_else(|| env("OPENAI_MODEL"));
        o.api_key = o.api_key.or_else(|| env("OPENAI_API_KEY"));
        Ok(Some(o))
    }
}

fn usage(message: String) -> Failure {
    Failure::Usage(message)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn positive<N: std::str::FromStr + PartialOrd + Default>(
    flag: &str,
    text: &str,
) -> Result<N, Failure> {
    match text.trim().parse::<N>() {
        Ok(n) if n > N::default() => Ok(n),
        _ => Err(usage(format!(
            "{flag} needs a positive whole number, got `{text}`"
        ))),
    }
}

fn policy(text: &str) -> Result<OnExhausted, Failure> {
    match text {
        "raise" => Ok(OnExhausted::Raise),
        "synthesize" => Ok(OnExhausted::Synthesize),
        _ => Err(usage(format!(
            "--on-exhausted is raise or synthesize, got `{text}`"
        ))),
    }
}

fn tool_list(text: &str) -> Result<Vec<String>, Failure> {
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    let mut names: Vec<String> = Vec::new();
    for name in text.split(',').map(str::trim) {
        if !TOOL_NAMES.contains(&name) {
            let known = TOOL_NAMES.join(", ");
            return Err(usage(format!(
                "unknown tool `{name}` (known: {known}, or none)"
            )));
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    Ok(names)
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
            eprintln!("no --base-url or OPENAI_BASE_URL: using the built-in scripted demo model");
            return Backend::demo(opts);
        };
        let base = base.trim_end_matches('/');
        let model = match &opts.model {
            Some(m) => m.clone(),
            None => first_model(base, opts.api_key.as_deref())?,
        };
        let mut transport = ChatTransport::new(model)
            .with_provider("openai")
            .with_api_base(base)
            .with_context_window(opts.context_window);
        if let Some(key) = &opts.api_key {
            transport = transport.with_api_key(key.clone());
        }
        Ok(Backend {
            transport,
            _demo: None,
        })
    }

    /// A scripted model: each turn, a calculator call, then an answer quoting it.
    fn demo(opts: &Options) -> Result<Backend, Failure> {
        let server = FakeServer::try_start()
            .map_err(|e| Failure::Other(format!("cannot start the demo model: {e}")))?;
        if let Some(model) = &opts.model {
            server.set_model_id(model);
        }
        let calculator = opts.tools.iter().any(|t| t == "calculator");
        for _ in 0..DEMO_TURNS {
            if calculator {
                let args = serde_json::json!({ "expression": "6*7" });
                server.push(Reply::tool_call("calculator", args));
            }
            server.push(Reply::text(DEMO_ANSWER));
        }
        let transport = server.transport().with_context_window(opts.context_window);
        Ok(Backend {
            transport,
            _demo: Some(server),
        })
    }
}

/// The first model id listed at `<base>/models`.
fn first_model(base: &str, api_key: Option<&str>) -> Result<String, Failure> {
    let Some(rest) = base.strip_prefix("http://") else {
        return Err(usage(format!(
            "--model (or OPENAI_MODEL) is needed for {base}: the model list is fetched over plain http only"
        )));
    };
    let cannot =
        |why: String| Failure::Other(format!("cannot list the models at {base}/models: {why}"));
    let body = http_get(rest, "/models", api_key).map_err(|e| cannot(e.to_string()))?;
    let json: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| cannot(format!("bad JSON ({e})")))?;
    json["data"][0]["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| cannot("the list is empty; pass --model".to_string()))
}

/// A minimal HTTP/1.1 GET of `http://<authority_and_path><suffix>`: the body
/// of a 200 response.
fn http_get(authority_and_path: &str, suffix: &str, api_key: Option<&str>) -> io::Result<String> {
    const MAX_BODY: u64 = 4 << 20;
    let (authority, path) = match authority_and_path.find('/') {
        Some(i) => authority_and_path.split_at(i),
        None => (authority_and_path, ""),
    };
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| !p.contains(']'))
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other(format!("no address for {authority}")))?;
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    conn.set_read_timeout(Some(Duration::from_secs(15)))?;
    let auth = api_key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    write!(
        conn,
        "GET {path}{suffix} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    conn.take(MAX_BODY).read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| io::Error::other("no HTTP response"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("?");
    if status != "200" {
        return Err(io::Error::other(format!("HTTP status {status}")));
    }
    let chunked = head
        .lines()
        .any(|l| l.to_ascii_lowercase().replace(' ', "") == "transfer-encoding:chunked");
    Ok(if chunked {
        dechunk(body)
    } else {
        body.to_string()
    })
}

/// The payload of a chunked transfer-encoded body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = size.split(';').next().unwrap_or("").trim();
        let Ok(n) = usize::from_str_radix(size, 16) else {
            break;
        };
        if n == 0 || rest.len() < n || !rest.is_char_boundary(n) {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

// ---------------------------------------------------------------------------
// The agent

fn build_agent(
    opts: &Options,
    transport: ChatTransport,
    cancellable: &Cancellable,
    interloper: Option<&Interloper>,
) -> Result<Agent, Failure> {
    let limit = StepLimit::with_policy(opts.max_steps, opts.on_exhausted);
    let mut cfg = Agent::builder(transport);
    cfg = cfg
        .system_prompt(opts.system.clone())
        .step_limit(limit)
        .cancellable(cancellable.clone())
        .streaming(opts.stream);
    for tool in chosen_tools(&opts.tools) {
        cfg = cfg.add_tool(tool);
    }
    if let Some(interloper) = interloper {
        // Interactive: the conversation on stdout, token readouts on stderr.
        let console = Console(vec![
            Box::new(Terminal::stdout()),
            Box::new(TokenLog::stderr()),
        ]);
        cfg = cfg.interloper(interloper.clone()).add_listener(console);
    }
    if let Some(path) = &opts.events {
        let log = JsonLines::create(path)
            .map_err(|e| Failure::Other(format!("cannot create {}: {e}", path.display())))?;
        cfg = cfg.add_listener(log);
    }
    Ok(cfg.build()?)
}

/// Listeners that share one thread, called in order. Two listeners each
/// writing from its own thread could put a token line in the middle of the
/// answer it counts; here the line comes after it.
struct Console(Vec<Box<dyn Listener>>);

impl Listener for Console {
    fn on_event(&mut self, event: &Event) {
        self.0.iter_mut().for_each(|l| l.on_event(event));
    }

    fn flush(&mut self) {
        self.0.iter_mut().for_each(Listener::flush);
    }

    fn close(&mut self) {
        self.0.iter_mut().for_each(Listener::close);
    }

    /// For the synthesizer (or a sub-agent): the parts' fresh variants (an
    /// indented Terminal, a zeroed TokenLog), again on one thread.
    fn for_sub_agent(&mut self, id: &str) -> SubAgentListener {
        let parts = self.0.iter_mut().filter_map(|l| match l.for_sub_agent(id) {
            SubAgentListener::Replace(child) => Some(child),
            _ => None,
        });
        SubAgentListener::Replace(Box::new(Console(parts.collect())))
    }
}

fn chosen_tools(names: &[String]) -> Vec<Arc<dyn Tool>> {
    let root = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    builtin::all(root)
        .into_iter()
        .filter(|t| names.iter().any(|n| n == t.name()))
        .collect()
}

/// `-p`: one turn, the answer alone on stdout.
fn one_shot(agent: &mut Agent, prompt: &str) -> Result<(), Failure> {
    let outcome: Outcome = agent.run_loop(prompt)?;
    let answer = outcome
        .answer
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| Failure::Other("the model gave an empty answer".to_string()))?;
    // Raw text for pipes and files; escape sequences are neutralized on a terminal.
    let text = if io::stdout().is_terminal() {
        sanitize(&answer).into_owned()
    } else {
        answer
    };
    let mut out = io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure::Other(format!("cannot write the answer: {e}")))
}

// ---------------------------------------------------------------------------
// The REPL

/// What the main thread of the REPL reacts to.
enum Input {
    /// A line from stdin, without its line ending.
    Line(String),
    /// End of stdin.
    Eof,
    /// Ctrl+C.
    Interrupt,
    /// The worker finished a turn and hands the agent back.
    TurnDone(Box<Agent>, pikuri::Result<Outcome>),
}

struct Repl {
    /// `None` while a turn runs: the worker thread has it.
    agent: Option<Agent>,
    /// The transport for the next turn (`/model` changes it).
    transport: ChatTransport,
    cancellable: Cancellable,
    interloper: Interloper,
    tx: Sender<Input>,
    /// Input that waits for the running turn to end, in arrival order.
    held: VecDeque<Input>,
    /// Ctrl+C was pressed and nothing was typed since: the next one exits.
    interrupted: bool,
    /// The `> ` prompt is on screen, waiting for input.
    prompted: bool,
}

impl Repl {
    fn run(
        agent: Agent,
        transport: ChatTransport,
        cancellable: Cancellable,
        interloper: Interloper,
    ) -> Result<u8, Failure> {
        let (tx, rx) = mpsc::channel();
        let interrupts = tx.clone();
        ctrlc::set_handler(move || {
            let _ = interrupts.send(Input::Interrupt);
        })
        .map_err(|e| Failure::Other(e.to_string()))?;
        spawn_stdin_reader(tx.clone());
        eprintln!(
            "chatting with {} ({} tools). /help lists commands; Ctrl+C cancels a turn.",
            agent.transport(),
            agent.tools().len()
        );
        let mut repl = Repl {
            agent: Some(agent),
            transport,
            cancellable,
            interloper,
            tx,
            held: VecDeque::new(),
            interrupted: false,
            prompted: false,
        };
        loop {
            repl.show_prompt();
            // `repl.tx` keeps the channel open, so `recv` cannot fail.
            let input = rx.recv().unwrap_or(Input::Eof);
            if let Some(code) = repl.handle(input) {
                return Ok(code);
            }
        }
    }

    fn busy(&self) -> bool {
        self.agent.is_none()
    }

    /// React to one input; `Some(code)` ends the program.
    fn handle(&mut self, input: Input) -> Option<u8> {
        match input {
            Input::Interrupt => self.interrupt(),
            Input::TurnDone(agent, result) => {
                self.finish_turn(*agent, &result);
                self.run_held()
            }
            other if self.busy() => {
                self.hold(other);
                None
            }
            other => self.dispatch(other),
        }
    }

    fn interrupt(&mut self) -> Option<u8> {
        if self.interrupted {
            eprintln!();
            return Some(130);
        }
        self.interrupted = true;
        if self.busy() {
            self.cancellable.cancel();
        } else {
            eprintln!("\n(press Ctrl+C again to exit, or type /quit)");
            self.prompted = false;
        }
        None
    }

    /// Input while a turn runs: a message goes to the agent through the
    /// Interloper, unless a command is waiting ahead of it.
    fn hold(&mut self, input: Input) {
        match input {
            Input::Line(line) if line.trim().is_empty() => {}
            Input::Line(line) if self.held.is_empty() && !line.trim_start().starts_with('/') => {
                self.interrupted = false;
                match self.interloper.inject_user_message(line.trim()) {
                    Ok(()) => eprintln!("(queued: {})", sanitize(line.trim())),
                    Err(e) => eprintln!("error: {e}"),
                }
            }
            other => {
                if let Input::Line(line) = &other {
                    self.interrupted = false;
                    eprintln!("(after this turn: {})", sanitize(line.trim()));
                }
                self.held.push_back(other);
            }
        }
    }

    /// Input at the prompt.
    fn dispatch(&mut self, input: Input) -> Option<u8> {
        let prompted = std::mem::take(&mut self.prompted);
        let Input::Line(line) = input else {
            if prompted {
                println!(); // end the prompt's line
            }
            return matches!(input, Input::Eof).then_some(0);
        };
        self.interrupted = false;
        let line = line.trim();
        if let Some(command) = line.strip_prefix('/') {
            return self.command(command);
        }
        if !line.is_empty() {
            self.start_turn(line.to_string());
        }
        None
    }

    /// Run held input until a turn starts or none is left.
    fn run_held(&mut self) -> Option<u8> {
        while !self.busy() {
            let input = self.held.pop_front()?;
            if let Some(code) = self.dispatch(input) {
                return Some(code);
            }
        }
        None
    }

    fn start_turn(&mut self, message: String) {
        let Some(mut agent) = self.agent.take() else {
            return;
        };
        let transport = self.transport.clone();
        let tx = self.tx.clone();
        thread::spawn(move || {
            let result = agent.run_loop_with(&message, transport);
            let _ = tx.send(Input::TurnDone(Box::new(agent), result));
        });
    }

    fn finish_turn(&mut self, agent: Agent, result: &pikuri::Result<Outcome>) {
        let cancelled = matches!(result, Err(e) if e.is_cancelled());
        match result {
            Err(e) if e.is_step_limit() => {
                eprintln!("error: {e}; say \"continue\" to let the agent go on");
            }
            // The terminal listener already printed "cancelled".
            Err(e) if !e.is_cancelled() => eprintln!("error: {}", sanitize(&e.to_string())),
            _ => {}
        }
        // Lines injected after the agent's last look at the Interloper.
        for line in self.interloper.drain().into_iter().rev() {
            if cancelled {
                eprintln!("(not delivered: {})", sanitize(&line));
            } else {
                self.held.push_front(Input::Line(line));
            }
        }
        self.agent = Some(agent);
        self.prompted = false;
    }

    fn show_prompt(&mut self) {
        if self.busy() || self.prompted {
            return;
        }
        let mut out = io::stdout().lock();
        let _ = out.write_all(b"> ").and_then(|()| out.flush());
        self.prompted = true;
    }

    /// A `/command` (without the slash), at the prompt.
    fn command(&mut self, command: &str) -> Option<u8> {
        let (name, arg) = command
            .split_once(char::is_whitespace)
            .map_or((command, ""), |(n, a)| (n, a.trim()));
        let result = match (name, self.agent.as_mut()) {
            ("quit" | "exit", _) => return Some(0),
            ("help", _) => Ok(COMMANDS.to_string()),
            ("model", _) => Ok(self.switch_model(arg)),
            ("reset", Some(agent)) => {
                agent.clear_conversation();
                Ok("(conversation cleared)".to_string())
            }
            ("save", Some(agent)) => save(agent, arg),
            ("load", Some(agent)) => load(agent, arg),
            _ => Err(format!("unknown command /{name} (try /help)")),
        };
        match result {
            Ok(note) => eprintln!("{note}"),
            Err(e) => eprintln!("error: {}", sanitize(&e)),
        }
        None
    }

    fn switch_model(&mut self, model: &str) -> String {
        if model.is_empty() {
            return format!("(model: {})", self.transport);
        }
        self.transport = self.transport.clone().with_model(model);
        format!("(model {model} from the next turn on)")
    }
}

fn save(agent: &Agent, path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("usage: /save FILE".to_string());
    }
    let history = agent.export_history();
    std::fs::write(path, history.to_json()).map_err(|e| format!("cannot write {path}: {e}"))?;
    Ok(format!(
        "(saved {} messages to {path})",
        history.messages().len()
    ))
}

fn load(agent: &mut Agent, path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("usage: /load FILE".to_string());
    }
    let json = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let history = History::parse(&json).map_err(|e| format!("{path}: {e}"))?;
    let count = history.messages().len();
    agent.load_history(history);
    Ok(format!("(loaded {count} messages from {path})"))
}

/// Read stdin line by line on a thread of its own, until end of input.
fn spawn_stdin_reader(tx: Sender<Input>) {
    thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match stdin.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf);
                    let line = line.trim_end_matches(['\n', '\r']).to_string();
                    if tx.send(Input::Line(line)).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Input::Eof);
    });
}
