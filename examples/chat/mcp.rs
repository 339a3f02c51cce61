//! `--mcp` and `--mcp-url`: MCP servers whose tools the agent gets.
//!
//! `--mcp '[NAME=]COMMAND ARGS'` starts a stdio server; `--mcp-url
//! '[NAME=]URL'` reaches a Streamable HTTP one. Without `NAME=` the servers
//! are called `mcp1`, `mcp2`, … in the order given; their tools are offered
//! as `<NAME>__<tool>`. The command is split at whitespace; single or double
//! quotes keep a part together (no escapes, no variables).
//!
//! A `--mcp-url` server that answers `401` gets an OAuth login: the
//! authorization URL is printed on stderr (and handed to `xdg-open` or
//! `open`), the redirect comes back to a listener on 127.0.0.1, and the
//! tokens are kept in `mcp-tokens.json` (mode 0600) under the user's config
//! directory ([`token_file`]), so the next run logs in without a browser
//! until the refresh token is refused.
//!
//! The servers' tools are deferred tools (see [`crate::tools`]): above
//! `--defer-above` of them they are sent only once the model found them;
//! `--no-tool-search` makes them ordinary tools.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use pikuri::listeners::sanitize;
use pikuri::mcp::{
    Browser, Client, FileTokenStore, InputAnswer, InputProvider, InputRequest, OAuth, Registry,
    Server, SystemBrowser,
};

use crate::Failure;

/// One `--mcp` or `--mcp-url` value, parsed.
#[derive(Debug)]
pub(crate) struct McpSpec {
    pub(crate) name: String,
    pub(crate) server: Server,
}

/// `[NAME=]COMMAND ARGS`, the `index`-th server given.
pub(crate) fn stdio(spec: &str, index: usize) -> Result<McpSpec, Failure> {
    let (name, rest) = split_name(spec, index);
    let mut words = split_words(rest)?.into_iter();
    let command = words
        .next()
        .ok_or_else(|| Failure::Usage("--mcp needs a command".to_string()))?;
    Ok(McpSpec {
        name,
        server: Server::stdio(command, words),
    })
}

/// `[NAME=]URL`, the `index`-th server given.
pub(crate) fn http(spec: &str, index: usize) -> Result<McpSpec, Failure> {
    let (name, url) = split_name(spec, index);
    let mut server = Server::http(url);
    if let Some(file) = token_file() {
        // The login runs during the handshake: give the user time at the
        // browser (the handshake's bound covers the login).
        server = server
            .with_oauth(
                OAuth::new()
                    .with_client_name("pikuri chat example")
                    .with_browser(browser)
                    .with_store(FileTokenStore::new(file))
                    .with_login_timeout(LOGIN_TIMEOUT),
            )
            .with_startup_timeout(LOGIN_TIMEOUT + Duration::from_secs(30));
    }
    // The library's own check, the one the registry applies.
    if let Err(e) = server.check() {
        return Err(Failure::Usage(format!(
            "--mcp-url needs an http:// or https:// URL, got `{url}`: {e}"
        )));
    }
    Ok(McpSpec { name, server })
}

/// The system browser when a user is at the terminal; otherwise (stderr
/// piped, as in the tests) only the URL, printed as the system browser
/// prints it.
fn browser(url: &str) -> std::io::Result<()> {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        SystemBrowser.open(url)
    } else {
        eprintln!("To authorize, open this URL in a browser:\n  {url}");
        Ok(())
    }
}

/// How long the user has to approve a login in the browser.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(180);

/// Where OAuth tokens are kept: `$PIKURI_CHAT_TOKENS` if set, else
/// `pikuri/mcp-tokens.json` in the user's config directory
/// (`$XDG_CONFIG_HOME`, `~/.config`; `%APPDATA%` on Windows,
/// `~/Library/Application Support` on macOS). `None` without a home.
pub(crate) fn token_file() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(file) = env("PIKURI_CHAT_TOKENS") {
        return Some(file);
    }
    let base = if cfg!(windows) {
        env("APPDATA")?
    } else if cfg!(target_os = "macos") {
        env("HOME")?.join("Library/Application Support")
    } else {
        env("XDG_CONFIG_HOME").or_else(|| Some(env("HOME")?.join(".config")))?
    };
    Some(base.join("pikuri").join("mcp-tokens.json"))
}

/// The registry of this run, for `/resources` and `/prompts`.
static REGISTRY: OnceLock<Registry> = OnceLock::new();

/// The registry for the servers given, or `None` without any; servers
/// that ask the user are answered by `input` (none: refused). With `defer`
/// their tools are deferred tools (`--defer-above`, `/tools`).
pub(crate) fn registry(
    specs: &[McpSpec],
    input: Option<Box<dyn InputProvider>>,
    defer: bool,
) -> Option<Registry> {
    if specs.is_empty() {
        return None;
    }
    let mut registry = specs
        .iter()
        .fold(Registry::new().defer_tools(defer), |r, s| {
            r.server(s.name.clone(), s.server.clone())
        });
    if let Some(input) = input {
        registry = registry.input_provider(Boxed(input));
    }
    let _ = REGISTRY.set(registry.clone());
    Some(registry)
}

/// A boxed provider as one.
struct Boxed(Box<dyn InputProvider>);

impl InputProvider for Boxed {
    fn ask(&self, request: &InputRequest) -> InputAnswer {
        self.0.ask(request)
    }
}

/// The connected servers, by name.
fn clients() -> Result<Vec<(String, Client)>, String> {
    let registry = REGISTRY.get().ok_or("no MCP server (see --mcp)")?;
    Ok(registry
        .names()
        .into_iter()
        .filter_map(|n| registry.client(&n).map(|c| (n, c)))
        .collect())
}

/// The connected server `name`.
fn client(name: &str) -> Result<Client, String> {
    clients()?
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, c)| c)
        .ok_or(format!("no MCP server `{name}`"))
}

/// `/resources`: every server's resources and templates; with `SERVER URI`,
/// that resource's text.
pub(crate) fn resources(arg: &str) -> Result<String, String> {
    if let Some((server, uri)) = arg.split_once(char::is_whitespace) {
        let contents = client(server)?
            .read_resource(uri.trim())
            .map_err(|e| e.to_string())?;
        let text: Vec<String> = contents
            .iter()
            .map(pikuri::mcp::ResourceContent::to_text)
            .collect();
        return Ok(sanitize(&text.join("\n")).into_owned());
    }
    let mut out = String::new();
    for (name, client) in clients()? {
        // A server without resources answers with an error: left out.
        for r in client.list_resources().unwrap_or_default() {
            let about = r.description.or(r.title).unwrap_or_default();
            let _ = writeln!(out, "{name} {}  {}", sanitize(&r.uri), sanitize(&about));
        }
        for t in client.list_resource_templates().unwrap_or_default() {
            let _ = writeln!(out, "{name} {}  (template)", sanitize(&t.uri_template));
        }
    }
    Ok(if out.is_empty() {
        "(no resources)".to_string()
    } else {
        out.trim_end().to_string()
    })
}

/// `/prompts`: every server's prompts and their arguments.
pub(crate) fn prompts() -> Result<String, String> {
    let mut out = String::new();
    for (name, client) in clients()? {
        for p in client.list_prompts().unwrap_or_default() {
            let args: Vec<String> = p
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        format!("{}=…", a.name)
                    } else {
                        format!("[{}=…]", a.name)
                    }
                })
                .collect();
            let about = p.description.unwrap_or_default();
            let _ = writeln!(
                out,
                "{name} {} {}  {}",
                sanitize(&p.name),
                sanitize(&args.join(" ")),
                sanitize(&about)
            );
        }
    }
    Ok(if out.is_empty() {
        "(no prompts)".to_string()
    } else {
        out.trim_end().to_string()
    })
}

/// `/prompts SERVER NAME [ARG=VALUE ...]`: the prompt's text, to send as
/// the next message.
pub(crate) fn prompt(arg: &str) -> Result<String, String> {
    let mut words = arg.split_whitespace();
    let (Some(server), Some(name)) = (words.next(), words.next()) else {
        return Err("usage: /prompts SERVER NAME [ARG=VALUE ...]".to_string());
    };
    let args: Vec<(String, String)> = words
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let prompt = client(server)?
        .get_prompt(name, args)
        .map_err(|e| e.to_string())?;
    Ok(prompt.text())
}

/// A leading `NAME=` (letters, digits, `_`, `-`), else `mcp<index + 1>`.
fn split_name(spec: &str, index: usize) -> (String, &str) {
    let spec = spec.trim();
    if let Some((name, rest)) = spec.split_once('=') {
        let is_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if is_name {
            return (name.to_string(), rest.trim());
        }
    }
    (format!("mcp{}", index + 1), spec)
}

fn split_words(text: &str) -> Result<Vec<String>, Failure> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            // Inside quotes, or an ordinary character outside them.
            (_, c) => word.get_or_insert_default().push(c),
        }
    }
    if quote.is_some() {
        return Err(Failure::Usage(format!("unclosed quote in --mcp `{text}`")));
    }
    words.extend(word);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_words() {
        let s = stdio("everything=npx -y '@scope/server x'", 0).unwrap();
        assert_eq!(s.name, "everything");
        assert!(format!("{:?}", s.server).contains("\"@scope/server x\""));
        assert_eq!(stdio("uvx mcp-server-time", 1).unwrap().name, "mcp2");
        assert_eq!(http("remote=http://h/mcp", 0).unwrap().name, "remote");
        assert!(http("ftp://h", 0).is_err());
        assert!(stdio("x 'open", 0).is_err());
        // An HTTP server logs in with OAuth when asked, tokens in a file.
        if token_file().is_some() {
            let debug = format!("{:?}", http("http://h/mcp", 0).unwrap().server);
            assert!(debug.contains("oauth"), "{debug}");
        }
    }
}
