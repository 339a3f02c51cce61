//! The command line: `--help` text, options, and the `OPENAI_*` fallbacks.

use std::path::PathBuf;

use pikuri::{Api, ChatTransport, OnExhausted};

use crate::Failure;
use crate::mcp::{self, McpSpec};

pub(crate) const HELP: &str = "\
chat: talk to a tool-calling agent (a pikuri example)

Usage: chat [OPTIONS]              interactive chat
       chat [OPTIONS] -p TEXT      one turn: the answer alone on stdout

Options:
      --base-url URL        the API base, e.g. http://127.0.0.1:8080/v1
                            [env: OPENAI_BASE_URL, or for anthropic
                            ANTHROPIC_BASE_URL, the server's root: /v1 is added
                            unless it ends with it; for gemini
                            GOOGLE_GEMINI_BASE_URL, the root: /v1beta is added
                            unless it ends with a version]; without one, a built-in
                            demo model answers (it calls the tools for arithmetic,
                            time and file questions; scripts/chat-local.sh runs
                            a real local model instead)
      --model NAME          model id [env: OPENAI_MODEL, or ANTHROPIC_MODEL for
                            anthropic, GEMINI_MODEL for gemini]; default: the
                            first id listed at
                            <base-url>/models
      --api-key KEY         sent as a bearer token (x-api-key for anthropic,
                            x-goog-api-key for gemini) [env: OPENAI_API_KEY, or
                            ANTHROPIC_API_KEY for anthropic, GOOGLE_API_KEY or
                            GEMINI_API_KEY for gemini; that key alone means the
                            provider's own API]
      --api API             the wire format: chat (chat completions), anthropic
                            (Anthropic Messages), responses (OpenAI Responses)
                            or gemini (Google Gemini) [env: PIKURI_API]
                            [default: anthropic when an ANTHROPIC_API_KEY or
                            ANTHROPIC_BASE_URL is set and no OPENAI_BASE_URL or
                            OPENAI_API_KEY, gemini when a GEMINI_API_KEY or
                            GOOGLE_GEMINI_BASE_URL is set and none of those,
                            else chat:
                            the environment is read as ChatTransport::from_env
                            reads it]
      --image FILE          attach a PNG, JPEG, GIF or WebP image (at most 20 MiB)
                            to the first message (-p or the first line);
                            repeatable
      --system TEXT         system prompt
      --no-stream           wait for whole responses instead of streaming them
      --max-steps N         tool calls allowed per turn [default: 20]
      --on-exhausted WHAT   when those run out: raise (stop with an error) or
                            synthesize (answer from what was found) [default: synthesize]
      --max-tokens N        tokens (input and output, sub-agents' included)
                            allowed per turn; a request whose input alone
                            would pass it is not sent
      --max-cost USD        money allowed per turn, e.g. 0.05; needs the
                            model's price (--price), built in for the demo
                            model only ($1 in, $2 out per million tokens)
      --price IN,OUT        the model's price in USD per million input and
                            output tokens, e.g. 2.5,10; the cost of each turn
                            is then counted (what tripped a limit is printed;
                            --on-exhausted says what follows)
      --lifetime-tokens N   tokens allowed over the whole chat: every turn, and
                            with --session the earlier runs' too; once spent,
                            each later turn is refused before any request
                            (never synthesized past, whatever --on-exhausted)
      --lifetime-cost USD   money allowed over the whole chat, counted as
                            --lifetime-tokens is; needs the model's price as
                            --max-cost does
      --no-redact           let secrets and personal data in tool results reach
                            the model (by default keys, bearer tokens, emails
                            and card numbers are redacted first)
      --block-input WORD    answer a message that contains WORD with a notice,
                            without asking the model; repeatable
      --deny-tool NAME      refuse calls of tool NAME (before any approval
                            prompt; the model is told why); repeatable
      --max-answer-chars N  send an answer longer than N characters back to
                            the model with the limit (at most twice)
      --judge RUBRIC        have the model check each answer against RUBRIC
                            and send it back with its reason when it fails
                            (what a guard did is printed on stderr)
      --hold-deltas         with --max-answer-chars or --judge, print an answer
                            only once those guards passed it: an answer they
                            send back is never shown, not even streamed
      --context-window N    context window in tokens [default: ask the server]
      --no-compact          do not summarize older turns when the context window
                            fills up (on by default: at 80% of the window, the
                            turns before the last 2 become one summary)
      --fallback URL[,MODEL]
                            another API base to move the turn to when the server
                            fails after its retries (5xx, timeout, connection
                            refused); repeatable, tried in order; MODEL defaults
                            to --model [env: OPENAI_FALLBACK_URLS, entries
                            separated by spaces or `;`]
      --events FILE         write every event to FILE, one JSON object per line
                            (an events file there is replaced, any other file
                            is refused)
      --session FILE        keep the conversation in a crash-safe journal at
                            FILE (`.journal` is added when missing) and go on
                            with it at the next start; start it again with the
                            same flags (model, tools, --system). The name is 1
                            to 128 letters, digits, `.`, `_` or `-`, not
                            starting with a dot, in a folder that exists (none
                            is created); a lock file NAME.lock beside it keeps
                            a second chat off the session while one runs (it
                            stays, empty, after the chat ends). A turn that a
                            crash or a second Ctrl+C cut off is finished first,
                            its question named on stderr: with -p and that same
                            question, it is answered once and not asked again;
                            an approval it was waiting for is asked again
      --tools LIST          comma-separated built-in tools, or `none` [default:
                            calculator,current_time,read_file,list_dir,write_file]
                            the file tools see the current directory only
  -y, --yes                 run state-changing tools (write_file) without asking;
                            otherwise each call waits for y/n on stderr/stdin,
                            and with -p and stdin not a terminal it is denied
      --subagents           offer two sub-agents through the `agent` tool:
                            researcher (fetch, web_scrape, and web_search with
                            --searxng; the network tools are the sub-agent's
                            alone) and file_miner (read_file, list_dir)
      --searxng URL         SearXNG instance for the researcher's web_search
                            [env: SEARXNG_URL]
      --mcp '[NAME=]COMMAND ARGS'
                            start an MCP server (stdio) and give the agent its
                            tools, named NAME__TOOL (NAME defaults to mcp1,
                            mcp2, ...); repeatable
      --mcp-url [NAME=]URL  the same for a Streamable HTTP MCP server; one that
                            asks for OAuth gets a login in the browser, tokens
                            kept in ~/.config/pikuri/mcp-tokens.json
                            [env: PIKURI_CHAT_TOKENS overrides the file]
      --defer-above N       MCP tools are deferred: while there are more than N
                            of them, they are not sent until the model finds
                            them with a search; N or fewer are sent as they are
                            [default: 30]
      --no-tool-search      send every MCP tool with every request (no
                            deferral, no search)
      --skills DIR          Agent Skills: a folder of skill folders (each with a
                            SKILL.md), or one skill's folder; the model sees
                            their names and descriptions and reads a skill
                            with the `skill` tool when a task needs it;
                            repeatable
  -p, --prompt TEXT         run one turn, stream the answer to stdout, exit
  -h, --help                print this help

Interactive chat:
  Lines typed while the agent works are handed to it at its next step.
  Ctrl+C cancels the running turn. Pressed a second time with nothing typed
  in between (after a cancel, or twice at the prompt), it exits.
  /model NAME   use model NAME from the next turn on (the conversation stays)
  /api API      speak chat, anthropic, responses or gemini from the next turn on
  /image FILE   attach an image to the next message
  /reset        clear the conversation
  /compact      summarize the older turns now
  /usage        tokens of the last turn and of the whole conversation
  /resources [SERVER URI]   list the MCP resources, or read one
  /prompts [SERVER NAME [ARG=VALUE ...]]  list the MCP prompts, or send one
  /skills       list the skills (--skills) the model can read
  /tools        list the tools sent, the deferred ones and those found
  /save FILE    save the conversation as JSON (replaces a saved one only)
  /load FILE    replace the conversation with a saved one
  /help         list these commands
  /quit         exit (so does end of input)

Exit status:
  0     success; /quit or end of input
  1     error: HTTP, connection, protocol, file, or an empty answer
  2     usage error: unknown option or bad value (an option's file
        too: --session, --image, --events), naming the option
  3     step limit exceeded (with --on-exhausted raise)
  130   cancelled with Ctrl+C
  129, 143  ended by SIGHUP or SIGTERM (open agents closed first)
";

pub(crate) const COMMANDS: &str = "\
/model NAME   use model NAME from the next turn on
/api API      speak chat, anthropic, responses or gemini from the next turn on
/image FILE   attach an image to the next message
/reset        clear the conversation
/compact      summarize the older turns now
/usage        tokens of the last turn and of the whole conversation
/resources [SERVER URI]  list the MCP servers' resources, or read one
/prompts [SERVER NAME [ARG=VALUE ...]]  list the MCP prompts, or send one
              as the next message
/skills       list the skills (--skills) the model can read
/tools        list the tools sent, the deferred ones and those found
/save FILE    save the conversation as JSON (replaces a saved one only)
/load FILE    replace the conversation with a saved one
/quit         exit";

const DEFAULT_SYSTEM: &str = "You are a helpful assistant. Use the tools when they help, \
and answer concisely.";
/// `--defer-above`'s default: `ToolSearch`'s own.
const DEFER_ABOVE: usize = 30;

pub(crate) const TOOL_NAMES: [&str; 5] = [
    "calculator",
    "current_time",
    "read_file",
    "list_dir",
    "write_file",
];

/// The command line, with the `OPENAI_*` fallbacks applied.
#[derive(Debug)]
#[allow(clippy::struct_excessive_bools)] // one field per on/off flag of the command line
pub(crate) struct Options {
    pub(crate) base_url: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) api_key: Option<String>,
    pub(crate) system: String,
    pub(crate) stream: bool,
    pub(crate) max_steps: u32,
    pub(crate) on_exhausted: OnExhausted,
    /// `--max-tokens`: total tokens per turn.
    pub(crate) max_tokens: Option<u64>,
    /// `--max-cost`: dollars per turn.
    pub(crate) max_cost: Option<f64>,
    /// `--price`: dollars per million input and output tokens.
    pub(crate) price: Option<(f64, f64)>,
    /// `--lifetime-tokens`: total tokens over the whole chat.
    pub(crate) lifetime_tokens: Option<u64>,
    /// `--lifetime-cost`: dollars over the whole chat.
    pub(crate) lifetime_cost: Option<f64>,
    pub(crate) context_window: Option<u64>,
    pub(crate) events: Option<PathBuf>,
    pub(crate) session: Option<PathBuf>,
    pub(crate) tools: Vec<String>,
    pub(crate) mcp: Vec<McpSpec>,
    /// `--defer-above`: the deferred MCP tools are held back above this
    /// many; `None` with `--no-tool-search` (MCP tools are ordinary).
    pub(crate) defer_above: Option<usize>,
    pub(crate) prompt: Option<String>,
    pub(crate) compact: bool,
    /// `--yes`: approve every tool call.
    pub(crate) yes: bool,
    /// `--subagents`: the researcher and file_miner personas.
    pub(crate) subagents: bool,
    /// SearXNG base URL for the researcher's `web_search`.
    pub(crate) searxng: Option<String>,
    /// `(api base, model)` of each fallback, in order.
    pub(crate) fallbacks: Vec<(String, Option<String>)>,
    /// `--api` or `PIKURI_API`.
    pub(crate) api: Api,
    /// `--image`: files attached to the first message.
    pub(crate) images: Vec<PathBuf>,
    /// `--skills`: folders of Agent Skills.
    pub(crate) skills: Vec<PathBuf>,
    /// `--no-redact`: tool results reach the model unredacted.
    pub(crate) no_redact: bool,
    /// `--block-input`: words whose messages the input guard answers.
    pub(crate) block_input: Vec<String>,
    /// `--deny-tool`: tools the tool-input guard refuses.
    pub(crate) deny_tools: Vec<String>,
    /// `--max-answer-chars`: the output shape guard's bound.
    pub(crate) max_answer_chars: Option<usize>,
    /// `--judge`: the output judge's rubric.
    pub(crate) judge: Option<String>,
    /// `--hold-deltas`: no streamed text before the output guards passed it.
    pub(crate) hold_deltas: bool,
}

impl Options {
    /// Parse the arguments; `None` means `--help`.
    #[allow(clippy::too_many_lines, reason = "one match arm per flag reads best")]
    pub(crate) fn parse(
        args: impl IntoIterator<Item = String>,
    ) -> Result<Option<Options>, Failure> {
        let mut o = Options {
            base_url: None,
            model: None,
            api_key: None,
            system: DEFAULT_SYSTEM.to_string(),
            stream: true,
            max_steps: 20,
            on_exhausted: OnExhausted::Synthesize,
            max_tokens: None,
            max_cost: None,
            price: None,
            lifetime_tokens: None,
            lifetime_cost: None,
            context_window: None,
            events: None,
            session: None,
            tools: TOOL_NAMES.iter().map(ToString::to_string).collect(),
            mcp: Vec::new(),
            defer_above: Some(DEFER_ABOVE),
            prompt: None,
            compact: true,
            yes: false,
            subagents: false,
            searxng: None,
            fallbacks: Vec::new(),
            api: Api::ChatCompletions,
            images: Vec::new(),
            skills: Vec::new(),
            no_redact: false,
            block_input: Vec::new(),
            deny_tools: Vec::new(),
            max_answer_chars: None,
            judge: None,
            hold_deltas: false,
        };
        let mut api = None;
        // `--defer-above` and `--no-tool-search` both given: a usage error.
        let (mut defer_given, mut no_search) = (false, false);
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg, None),
            };
            let mut value = || match inline.clone() {
                Some(v) => Ok(v),
                None => match args.next() {
                    // Why refuse: `--model -p hi` would take `-p` as the
                    // model and then blame `hi`; a value that begins like
                    // an option is given inline (`--system=-x`).
                    Some(next) if looks_like_option(&next) => Err(usage(format!(
                        "{flag} needs a value, got the option `{}` (write {}=VALUE for a value \
                         that begins with `-`)",
                        crate::bounded(&next, 64),
                        long_name(&flag)
                    ))),
                    Some(next) => Ok(next),
                    None => Err(usage(format!("{flag} needs a value"))),
                },
            };
            match flag.as_str() {
                "-h" | "--help" => return Ok(None),
                "--no-stream" => o.stream = false,
                "--no-compact" => o.compact = false,
                "-y" | "--yes" => o.yes = true,
                "--subagents" => o.subagents = true,
                "--searxng" => o.searxng = Some(http_url(&flag, &value()?)?),
                "--fallback" => o.fallbacks.push(fallback(&flag, &value()?)?),
                "--base-url" => o.base_url = Some(http_url(&flag, &value()?)?),
                "--model" => o.model = Some(non_blank(&flag, value()?)?),
                "--api-key" => o.api_key = Some(non_blank(&flag, value()?)?),
                "--api" => api = Some(parse_api(&flag, &value()?)?),
                "--image" => o.images.push(PathBuf::from(non_blank(&flag, value()?)?)),
                "--system" => o.system = value()?,
                "--max-steps" => o.max_steps = positive(&flag, &value()?)?,
                "--on-exhausted" => o.on_exhausted = policy(&value()?)?,
                "--context-window" => o.context_window = Some(positive(&flag, &value()?)?),
                "--max-tokens" => o.max_tokens = Some(positive(&flag, &value()?)?),
                "--max-cost" => o.max_cost = Some(dollars(&flag, &value()?)?),
                "--price" => o.price = Some(price(&flag, &value()?)?),
                "--lifetime-tokens" => o.lifetime_tokens = Some(positive(&flag, &value()?)?),
                "--lifetime-cost" => o.lifetime_cost = Some(dollars(&flag, &value()?)?),
                "--hold-deltas" => o.hold_deltas = true,
                "--events" => o.events = Some(PathBuf::from(non_blank(&flag, value()?)?)),
                "--session" => o.session = Some(session(&value()?)?),
                "--tools" => o.tools = tool_list(&value()?)?,
                "--mcp" => o.mcp.push(mcp::stdio(&value()?, o.mcp.len())?),
                "--mcp-url" => o.mcp.push(mcp::http(&value()?, o.mcp.len())?),
                "--defer-above" => {
                    let n = value()?;
                    defer_given = true;
                    o.defer_above = Some(n.trim().parse().map_err(|_| {
                        usage(format!("--defer-above needs a whole number, got `{n}`"))
                    })?);
                }
                "--no-tool-search" => {
                    no_search = true;
                }
                "--skills" => o.skills.push(PathBuf::from(non_blank(&flag, value()?)?)),
                "--no-redact" => o.no_redact = true,
                "--block-input" => o.block_input.push(non_blank(&flag, value()?)?),
                "--deny-tool" => o.deny_tools.push(non_blank(&flag, value()?)?),
                "--max-answer-chars" => {
                    o.max_answer_chars = Some(positive::<usize>(&flag, &value()?)?);
                }
                "--judge" => o.judge = Some(non_blank(&flag, value()?)?),
                "-p" | "--prompt" => o.prompt = Some(value()?),
                other if other.starts_with('-') => {
                    return Err(usage(format!("unknown option `{other}`")));
                }
                other => return Err(usage(format!("unexpected argument `{other}`"))),
            }
        }
        if no_search {
            o.defer_above = None;
        }
        if no_search && defer_given {
            return Err(usage(
                "--defer-above and --no-tool-search contradict each other".to_string(),
            ));
        }
        if o.prompt.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(usage("-p needs a non-blank message".to_string()));
        }
        o.api = match api {
            Some(api) => api,
            None => match env("PIKURI_API") {
                Some(v) => parse_api("PIKURI_API", &v)?,
                None => api_from_env(),
            },
        };
        o.read_env()?;
        if o.searxng.is_none()
            && let Some(url) = env("SEARXNG_URL")
        {
            o.searxng = Some(http_url("SEARXNG_URL", &url)?);
        }
        if o.fallbacks.is_empty()
            && let Some(list) = env("OPENAI_FALLBACK_URLS")
        {
            for entry in list
                .split([' ', ';', '\n'])
                .filter(|e| !e.trim().is_empty())
            {
                o.fallbacks.push(fallback("OPENAI_FALLBACK_URLS", entry)?);
            }
        }
        Ok(Some(o))
    }
}

impl Options {
    /// The provider's variables for what the flags left unset, as
    /// [`ChatTransport::from_env`] reads them: Anthropic's SDK variables
    /// (`ANTHROPIC_BASE_URL` the server's root, `/v1` added unless it ends
    /// with it; its key alone means Anthropic's own API) when speaking its
    /// API, the `OPENAI_*` ones otherwise.
    fn read_env(&mut self) -> Result<(), Failure> {
        let (base, model, key) = match self.api {
            Api::AnthropicMessages => {
                ("ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "ANTHROPIC_API_KEY")
            }
            Api::Gemini => ("GOOGLE_GEMINI_BASE_URL", "GEMINI_MODEL", "GOOGLE_API_KEY"),
            _ => ("OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY"),
        };
        self.model = self.model.take().or_else(|| env(model));
        self.api_key = self.api_key.take().or_else(|| env(key));
        if self.api == Api::Gemini {
            // The google-genai SDK's order: GOOGLE_API_KEY, then GEMINI_API_KEY.
            self.api_key = self.api_key.take().or_else(|| env("GEMINI_API_KEY"));
        }
        if self.base_url.is_none()
            && let Some(url) = env(base)
        {
            let url = http_url(base, &url)?;
            let url = url.trim_end_matches('/').to_string();
            let versioned = url.rsplit('/').next().is_some_and(|s| {
                s.starts_with('v') && s[1..].starts_with(|c: char| c.is_ascii_digit())
            });
            self.base_url = Some(match base {
                "ANTHROPIC_BASE_URL" if !url.ends_with("/v1") => format!("{url}/v1"),
                "GOOGLE_GEMINI_BASE_URL" if !versioned => format!("{url}/v1beta"),
                _ => url,
            });
        }
        if self.base_url.is_none() && self.api_key.is_some() {
            match self.api {
                Api::AnthropicMessages => {
                    self.base_url = Some("https://api.anthropic.com/v1".to_string());
                }
                Api::Gemini => {
                    self.base_url =
                        Some("https://generativelanguage.googleapis.com/v1beta".to_string());
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The API when neither `--api` nor `PIKURI_API` names one, as
/// [`ChatTransport::from_env`] picks it: Anthropic Messages when an
/// `ANTHROPIC_API_KEY` or `ANTHROPIC_BASE_URL` is set and neither
/// `OPENAI_BASE_URL` nor `OPENAI_API_KEY` is.
fn api_from_env() -> Api {
    let set = |names: [&str; 2]| names.iter().any(|n| env(n).is_some());
    let openai = set(["OPENAI_BASE_URL", "OPENAI_API_KEY"]);
    let anthropic = set(["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"]);
    if anthropic && !openai {
        Api::AnthropicMessages
    } else if set(["GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"]) && !openai && !anthropic {
        Api::Gemini
    } else {
        Api::ChatCompletions
    }
}

/// `text`, unless it is blank.
fn non_blank(flag: &str, text: String) -> Result<String, Failure> {
    if text.trim().is_empty() {
        Err(usage(format!("{flag} needs a non-blank value")))
    } else {
        Ok(text)
    }
}

/// Whether `arg` is an option rather than a value: `-p`, `--model`, but
/// not `-1` or `-`.
fn looks_like_option(arg: &str) -> bool {
    let rest = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'));
    rest.is_some_and(|r| r.starts_with(|c: char| c.is_ascii_alphabetic()))
}

/// The long form of `flag`, which takes a value inline.
fn long_name(flag: &str) -> &str {
    if flag == "-p" { "--prompt" } else { flag }
}

/// The longest `--session` name, as a journal's run id allows it.
const MAX_SESSION_NAME: usize = 128;

/// `--session FILE`: the journal's path, `.journal` added when missing.
///
/// The file name (without `.journal`) is the journal's run id, so it is 1
/// to 128 letters, digits, `.`, `_` or `-`, not starting with a dot; the
/// lock file `NAME.lock` goes beside it. The folder must exist: a folder
/// the user did not make is never created.
fn session(text: &str) -> Result<PathBuf, Failure> {
    let path = PathBuf::from(text);
    let bad = |why: &str| {
        usage(format!(
            "--session `{}` {why}",
            crate::bounded(text, MAX_SESSION_NAME + 32)
        ))
    };
    let Some(name) = path.file_name() else {
        return Err(bad("names no file"));
    };
    if path.is_dir() {
        return Err(bad("is a folder: name a file in it, e.g. `FOLDER/talk`"));
    }
    let name = name.to_str().unwrap_or("\u{fffd}");
    let run = name.strip_suffix(".journal").unwrap_or(name);
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if run.is_empty()
        || run.len() > MAX_SESSION_NAME
        || run.starts_with('.')
        || !run.chars().all(allowed)
    {
        return Err(bad(
            "is not a session name: use 1 to 128 letters, digits, `.`, `_` or `-`, not \
             starting with a dot (e.g. `my-chat`)",
        ));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(bad(&format!(
            "is in a folder that does not exist ({}); it is not created: make it first",
            crate::bounded(&dir.display().to_string(), 200)
        )));
    }
    Ok(path.with_file_name(format!("{run}.journal")))
}

/// `chat`, `anthropic`, `responses` or `gemini` (the long names too).
pub(crate) fn parse_api(what: &str, text: &str) -> Result<Api, Failure> {
    match text.trim() {
        "chat" | "chat_completions" => Ok(Api::ChatCompletions),
        "anthropic" | "anthropic_messages" => Ok(Api::AnthropicMessages),
        "responses" | "openai_responses" => Ok(Api::OpenAiResponses),
        "gemini" => Ok(Api::Gemini),
        _ => Err(usage(format!(
            "{what} is chat, anthropic, responses or gemini, got `{text}`"
        ))),
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

/// A positive amount of dollars (`0.05`).
fn dollars(flag: &str, text: &str) -> Result<f64, Failure> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n),
        _ => Err(usage(format!(
            "{flag} needs a positive amount of dollars, got `{text}`"
        ))),
    }
}

/// `IN,OUT`: dollars per million input and output tokens.
fn price(flag: &str, text: &str) -> Result<(f64, f64), Failure> {
    let parse = |t: &str| match t.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Some(n),
        _ => None,
    };
    match text.split_once(',').map(|(i, o)| (parse(i), parse(o))) {
        Some((Some(i), Some(o))) => Ok((i, o)),
        _ => Err(usage(format!(
            "{flag} needs IN,OUT dollars per million tokens, got `{text}`"
        ))),
    }
}

/// `URL[,MODEL]`.
fn fallback(what: &str, text: &str) -> Result<(String, Option<String>), Failure> {
    let (url, model) = match text.split_once(',') {
        Some((u, m)) => (
            u.trim(),
            Some(m.trim().to_string()).filter(|m| !m.is_empty()),
        ),
        None => (text.trim(), None),
    };
    // The library's own check, the one `build` applies.
    if let Err(e) = ChatTransport::default().with_api_base(url).check() {
        return Err(usage(format!(
            "{what} needs URL[,MODEL] with an http(s) URL, got `{text}`: {e}"
        )));
    }
    Ok((url.trim_end_matches('/').to_string(), model))
}

/// An `http(s)://` URL, without a trailing slash.
fn http_url(what: &str, text: &str) -> Result<String, Failure> {
    let url = text.trim();
    if let Err(e) = ChatTransport::default().with_api_base(url).check() {
        return Err(usage(format!(
            "{what} needs an http(s) URL, got `{text}`: {e}"
        )));
    }
    Ok(url.trim_end_matches('/').to_string())
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
                "--tools: unknown tool `{name}` (known: {known}, or none)"
            )));
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    Ok(names)
}
