//! The interactive chat: stdin on its own thread, Ctrl+C as a message, a
//! turn on a worker thread (see the crate doc of the example for the wiring).

use std::collections::VecDeque;
use std::io::{self, BufRead, Write};
use std::path::Path;
use std::sync::mpsc::{self, Sender};
use std::thread;

use pikuri::listeners::sanitize;
use pikuri::{
    Agent, Cancellable, ChatTransport, History, Image, Interloper, Message, Outcome, Usage,
};

use crate::Failure;
use crate::approve::Answers;
use crate::args::COMMANDS;
use crate::files;

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

pub(crate) struct Repl {
    /// `None` while a turn runs: the worker thread has it.
    agent: Option<Agent>,
    /// The transport for the next turn (`/model` changes it).
    transport: ChatTransport,
    cancellable: Cancellable,
    interloper: Interloper,
    /// The approval prompt's line feed: while it waits, a line answers it.
    answers: Answers,
    /// The last completed turn's usage and request count (`/usage`).
    last_turn: Option<(Usage, u32)>,
    /// Requests answered in this conversation's completed turns.
    requests: u32,
    tx: Sender<Input>,
    /// Input that waits for the running turn to end, in arrival order.
    held: VecDeque<Input>,
    /// Ctrl+C was pressed and nothing was typed since: the next one exits.
    interrupted: bool,
    /// The `> ` prompt is on screen, waiting for input.
    prompted: bool,
    /// Images for the next message (`--image`, `/image`).
    images: Vec<Image>,
}

impl Repl {
    pub(crate) fn run(
        agent: Agent,
        transport: ChatTransport,
        cancellable: Cancellable,
        interloper: Interloper,
        images: Vec<Image>,
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
        let cut_off = crate::cut_off_question(&agent);
        let mut repl = Repl {
            agent: Some(agent),
            transport,
            cancellable,
            interloper,
            answers: Answers::stdin().clone(),
            last_turn: None,
            requests: 0,
            tx,
            held: VecDeque::new(),
            interrupted: false,
            prompted: false,
            images,
        };
        if let Some(question) = cut_off {
            // A turn like any other: its approval prompts read the lines
            // typed, Ctrl+C cancels it, lines typed meanwhile are queued.
            eprintln!("{}", crate::resume_notice(&question));
            repl.start_resume();
        }
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
            // `main` calls `pikuri::close_all()` on the way out: the agent may
            // still be mid-turn on the worker thread, where `Drop` never runs.
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
            Input::Line(line) if self.answers.waiting() => {
                self.interrupted = false;
                self.answers.answer(line);
            }
            // No answer will come: a prompt now or later denies.
            Input::Eof => {
                self.answers.close();
                self.held.push_back(Input::Eof);
            }
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
        self.answers.set_turn(true);
        let message = Message::user_with_images(message, std::mem::take(&mut self.images));
        thread::spawn(move || {
            let result = agent.run_loop_message_with(message, transport);
            let _ = tx.send(Input::TurnDone(Box::new(agent), result));
        });
    }

    /// Finish the turn a crash cut off ([`Agent::resume_run`]) on the
    /// worker thread, as [`start_turn`](Repl::start_turn) runs a new one.
    fn start_resume(&mut self) {
        let Some(mut agent) = self.agent.take() else {
            return;
        };
        let tx = self.tx.clone();
        self.answers.set_turn(true);
        thread::spawn(move || {
            let result = agent.resume_run();
            let _ = tx.send(Input::TurnDone(Box::new(agent), result));
        });
    }

    fn finish_turn(&mut self, agent: Agent, result: &pikuri::Result<Outcome>) {
        // A prompt still waiting (Ctrl+C during it) gives up.
        self.answers.set_turn(false);
        if let Ok(outcome) = result {
            self.last_turn = Some((outcome.usage, outcome.requests));
            self.requests = self.requests.saturating_add(outcome.requests);
        }
        let cancelled = matches!(result, Err(e) if e.is_cancelled());
        match result {
            Err(e) if e.is_step_limit() || e.kind() == pikuri::ErrorKind::Budget => {
                eprintln!("error: {e}; say \"continue\" to let the agent go on");
            }
            // The terminal listener already printed "cancelled".
            Err(e) if !e.is_cancelled() => eprintln!("error: {}", sanitize(&e.to_string())),
            _ => {}
        }
        // A fallback moved the agent to another transport: stay there
        // (`/model` goes on from it) instead of retrying the failed one.
        self.transport = agent.transport();
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
            ("api", _) => self.switch_api(arg),
            ("image", _) => self.attach(arg),
            ("reset", Some(agent)) => {
                agent.clear_conversation();
                self.last_turn = None;
                self.requests = 0;
                Ok("(conversation cleared)".to_string())
            }
            ("usage", Some(agent)) => Ok(usage_report(
                self.last_turn,
                agent.total_usage(),
                self.requests,
            )),
            ("compact", Some(agent)) => compact(agent),
            ("resources", _) => crate::mcp::resources(arg),
            ("skills", _) => Ok(crate::skills::list()),
            ("tools", Some(agent)) => Ok(crate::tools::list(agent)),
            ("prompts", _) if arg.is_empty() => crate::mcp::prompts(),
            // The prompt's text is the next message.
            ("prompts", Some(_)) => match crate::mcp::prompt(arg) {
                Ok(text) => {
                    eprintln!("(sending the prompt)");
                    self.start_turn(text);
                    return None;
                }
                Err(e) => Err(e),
            },
            ("save", Some(agent)) => save(agent, arg),
            ("load", Some(agent)) => {
                let loaded = load(agent, arg);
                if loaded.is_ok() {
                    self.last_turn = None;
                    self.requests = 0;
                }
                loaded
            }
            _ => Err(format!("unknown command /{name} (try /help)")),
        };
        match result {
            Ok(note) => eprintln!("{note}"),
            Err(e) => eprintln!("error: {}", sanitize(&e)),
        }
        None
    }

    fn switch_api(&mut self, name: &str) -> Result<String, String> {
        if name.is_empty() {
            return Ok(format!("(api: {})", self.transport.api()));
        }
        let api = crate::args::parse_api("/api", name).map_err(|e| e.message())?;
        self.transport = self.transport.clone().with_api(api);
        Ok(format!("({api} from the next turn on)"))
    }

    /// `/image FILE`: checked now (format, size), sent with the next line.
    fn attach(&mut self, path: &str) -> Result<String, String> {
        if path.is_empty() {
            return Err("/image needs a file".to_string());
        }
        let image = Image::from_file(path).map_err(|e| e.to_string())?;
        self.images.push(image);
        Ok(format!(
            "({} image(s) attached to the next message)",
            self.images.len()
        ))
    }

    fn switch_model(&mut self, model: &str) -> String {
        if model.is_empty() {
            return format!("(model: {})", self.transport);
        }
        self.transport = self.transport.clone().with_model(model);
        format!("(model {model} from the next turn on)")
    }
}

/// `/usage`: the last turn's tokens, then the conversation's.
fn usage_report(last: Option<(Usage, u32)>, total: Usage, requests: u32) -> String {
    let line = |label: &str, u: &Usage, requests: u32| {
        let n = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        format!(
            "{label}: input {}, output {}, cached {}, reasoning {}, cache creation {}, \
             total {}, requests {requests}",
            n(u.input),
            n(u.output),
            n(u.cached),
            n(u.thinking),
            n(u.cache_creation),
            u.total()
        )
    };
    let last = match last {
        Some((usage, requests)) => line("last turn", &usage, requests),
        None => "last turn: none yet".to_string(),
    };
    format!("{last}\n{}", line("conversation", &total, requests))
}

fn compact(agent: &mut Agent) -> Result<String, String> {
    let before = agent.messages().len();
    match agent.compact() {
        Ok(true) => Ok(format!(
            "(compacted {before} messages to {})",
            agent.messages().len()
        )),
        Ok(false) => Ok("(nothing to compact: only the latest turns so far)".to_string()),
        Err(e) => Err(format!("cannot compact: {e}")),
    }
}

fn save(agent: &Agent, path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("usage: /save FILE".to_string());
    }
    let history = agent.export_history();
    // A history saved before is replaced; a file the user wrote is not.
    files::check_writable(
        Path::new(path),
        "a saved history",
        files::MAX_HISTORY_BYTES,
        |text| History::parse(text).is_ok(),
    )
    .map_err(|e| format!("cannot save: {e}"))?;
    files::write_whole(Path::new(path), history.to_json().as_bytes())?;
    Ok(format!(
        "(saved {} messages to {path})",
        history.messages().len()
    ))
}

fn load(agent: &mut Agent, path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("usage: /load FILE".to_string());
    }
    let json = files::read_bounded(Path::new(path), files::MAX_HISTORY_BYTES)?;
    let history = History::parse(&json).map_err(|e| format!("{path}: {e}"))?;
    let count = history.messages().len();
    agent
        .load_history(history)
        .map_err(|e| format!("{path}: {e}"))?;
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
