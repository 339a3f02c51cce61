//! OAuth 2.1 against a real MCP server and authorization server built from
//! the official Python SDK (tests/fixtures/mcp_oauth_server.py, installed
//! by scripts/mcp-oauth.sh, found through `PIKURI_MCP_OAUTH`), and the bad
//! inputs against a scripted fake (tests/fixtures/oauth_fake.py, python3
//! only). The browser step is this file's `TestBrowser`, which follows the
//! authorization URL with an HTTP client as a browser would.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pikuri::mcp::{Client, FileTokenStore, MemoryTokenStore, OAuth, Server, TokenStore, Tokens};
use pikuri::{ErrorKind, ToolContext};
use serde_json::{Value, json};

use super::chat::{chat, chat_bin, model};
use super::{python, required, skip};

/// A server process killed on drop, and its port.
struct Proc {
    child: Child,
    port: u16,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Run `python script args`, wait for its `PORT <n>` line.
    fn start(python: &str, script: &str, args: &[&str], env: &[(&str, &str)]) -> Proc {
        let mut child = Command::new(python)
            .arg(script)
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no PORT line from {script}: {line:?}"));
        Proc { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// The browser of these tests: records each URL, then follows it on a
/// thread (so `open` returns, as a real browser's launcher does): GET the
/// authorization URL, take its redirect, GET that.
#[derive(Clone, Default)]
struct TestBrowser {
    opened: Arc<Mutex<Vec<String>>>,
}

impl TestBrowser {
    fn oauth(&self) -> OAuth {
        let me = self.clone();
        OAuth::new()
            .with_browser(move |url: &str| {
                me.opened.lock().unwrap().push(url.to_string());
                let url = url.to_string();
                std::thread::spawn(move || follow(&url));
                Ok(())
            })
            .with_login_timeout(Duration::from_secs(20))
            .with_request_timeout(Duration::from_secs(10))
    }

    fn opened(&self) -> Vec<String> {
        self.opened.lock().unwrap().clone()
    }
}

/// GET `url`; on a redirect, GET the `Location` (as a browser would,
/// wherever it points).
fn follow(url: &str) {
    let agent = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .new_agent();
    let Ok(resp) = agent.get(url).call() else {
        return;
    };
    if let Some(to) = resp.headers().get("location").and_then(|v| v.to_str().ok()) {
        let _ = agent.get(to).call();
    }
}

/// The SDK's venv python and the server script, or `None` after a skip.
fn sdk() -> Option<(String, String)> {
    let dir = std::env::var("PIKURI_MCP_OAUTH").unwrap_or_default();
    let python = PathBuf::from(&dir).join("venv/bin/python");
    if dir.trim().is_empty() || !python.is_file() {
        skip("PIKURI_MCP_OAUTH not set to an install of scripts/mcp-oauth.sh");
        return None;
    }
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_oauth_server.py");
    Some((python.display().to_string(), script.display().to_string()))
}

fn temp_store(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pikuri-oauth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("tokens.json")
}

/// A query parameter of `url`, decoded.
fn param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name).then(|| {
            let mut out = Vec::new();
            let b = v.as_bytes();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'%' && i + 2 < b.len() {
                    out.push(u8::from_str_radix(&v[i + 1..i + 3], 16).unwrap());
                    i += 3;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            String::from_utf8(out).unwrap()
        })
    })
}

#[test]
fn oauth_login_against_the_python_sdk_then_the_stored_token_and_a_refresh() {
    let Some((python, script)) = sdk() else {
        return;
    };
    let server = Proc::start(&python, &script, &[], &[]);
    let url = server.url();
    let store_path = temp_store("real");
    let browser = TestBrowser::default();
    let declared = Server::http(&url).with_oauth(
        browser
            .oauth()
            .with_store(FileTokenStore::new(&store_path))
            .with_client_name("pikuri-test"),
    );
    let client = Client::connect("secure", &declared).unwrap();
    // One login, through the browser, with PKCE S256 and the resource.
    let opened = browser.opened();
    assert_eq!(opened.len(), 1, "{opened:?}");
    assert_eq!(
        param(&opened[0], "code_challenge_method").as_deref(),
        Some("S256")
    );
    assert_eq!(
        param(&opened[0], "code_challenge").map(|c| c.len()),
        Some(43)
    );
    assert_eq!(param(&opened[0], "resource").as_deref(), Some(url.as_str()));
    assert!(param(&opened[0], "state").is_some_and(|s| s.len() >= 32));
    let names: Vec<String> = client
        .list_tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"add".to_string()), "{names:?}");
    let out = client
        .call_tool("add", &json!({"a": 2, "b": 40}), &ToolContext::detached())
        .unwrap();
    assert!(out.contains("42"), "{out}");
    client.close();

    // The file store holds the tokens, owner-only; Debug never shows them.
    let store = FileTokenStore::new(&store_path);
    let tokens = store.load(&url).unwrap().expect("tokens were saved");
    assert!(tokens.access_token().starts_with("at-") && tokens.has_refresh_token());
    assert_eq!(tokens.resource(), url);
    assert!(!format!("{tokens:?}").contains(tokens.access_token()));
    assert!(!format!("{declared:?}").contains(tokens.access_token()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&store_path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // A second connect uses the stored token: no browser.
    let again = TestBrowser::default();
    let client = Client::connect(
        "secure",
        &Server::http(&url).with_oauth(again.oauth().with_store(FileTokenStore::new(&store_path))),
    )
    .unwrap();
    assert!(client.list_tools().is_ok());
    client.close();
    assert!(again.opened().is_empty());

    // A stale access token with a good refresh token: refreshed, no browser.
    let mut record: Value = serde_json::from_str(&tokens.to_json()).unwrap();
    record["access_token"] = json!("stale-token-000000");
    let stale = Tokens::from_json(&record.to_string()).unwrap();
    let memory = MemoryTokenStore::new();
    memory.save(&url, &stale).unwrap();
    let third = TestBrowser::default();
    let memory = Arc::new(memory);
    let client = Client::connect(
        "secure",
        &Server::http(&url).with_oauth(third.oauth().with_store(SharedStore(Arc::clone(&memory)))),
    )
    .unwrap();
    assert!(client.list_tools().is_ok());
    client.close();
    assert!(third.opened().is_empty(), "a refresh needs no browser");
    let refreshed = memory.load(&url).unwrap().unwrap();
    assert_ne!(refreshed.access_token(), "stale-token-000000");
    assert!(refreshed.access_token().starts_with("at-"));

    // A refused refresh token: a new login through the browser.
    record["refresh_token"] = json!("rt-unknown-0000000000");
    let memory = Arc::new(MemoryTokenStore::new());
    memory
        .save(&url, &Tokens::from_json(&record.to_string()).unwrap())
        .unwrap();
    let fourth = TestBrowser::default();
    let client = Client::connect(
        "secure",
        &Server::http(&url).with_oauth(fourth.oauth().with_store(SharedStore(Arc::clone(&memory)))),
    )
    .unwrap();
    assert!(client.list_tools().is_ok());
    client.close();
    assert_eq!(fourth.opened().len(), 1);
    let relogged = memory.load(&url).unwrap().unwrap();
    assert!(relogged.access_token().starts_with("at-") && relogged.has_refresh_token());
    let _ = std::fs::remove_dir_all(store_path.parent().unwrap());
}

/// A store shared with the test, to look into after the client used it.
struct SharedStore(Arc<MemoryTokenStore>);

impl TokenStore for SharedStore {
    fn load(&self, key: &str) -> std::io::Result<Option<Tokens>> {
        self.0.load(key)
    }
    fn save(&self, key: &str, tokens: &Tokens) -> std::io::Result<()> {
        self.0.save(key, tokens)
    }
    fn remove(&self, key: &str) -> std::io::Result<()> {
        self.0.remove(key)
    }
}

/// Connect to the fake in `mode`; the error, with the browser's record.
fn fake_fails(mode: &str) -> Option<(pikuri::Error, Vec<String>)> {
    let (python, _) = python()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_fake.py");
    let fake = Proc::start(&python, &script.display().to_string(), &[mode], &[]);
    let browser = TestBrowser::default();
    let oauth = browser
        .oauth()
        .with_login_timeout(Duration::from_secs(2))
        .with_request_timeout(Duration::from_secs(2));
    let server = Server::http(fake.url())
        .with_oauth(oauth)
        .with_startup_timeout(Duration::from_secs(30));
    let err = match Client::connect("fake", &server) {
        Ok(c) => {
            c.close();
            panic!("mode {mode}: connected");
        }
        Err(e) => e,
    };
    Some((err, browser.opened()))
}

/// The fake's error in `mode` is an auth error whose text has `needle`,
/// with no token in it.
fn assert_refused(mode: &str, needle: &str) {
    let Some((err, _)) = fake_fails(mode) else {
        return;
    };
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Auth, "mode {mode}: {text}");
    assert!(text.contains("OAuth: "), "mode {mode}: {text}");
    assert!(text.contains(needle), "mode {mode}: {text}");
    assert!(!text.contains("good-token"), "mode {mode}: {text}");
}

#[test]
fn oauth_fake_good_flow_connects() {
    let Some((python, _)) = python() else {
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_fake.py");
    let fake = Proc::start(&python, &script.display().to_string(), &["good"], &[]);
    let browser = TestBrowser::default();
    let client = Client::connect(
        "fake",
        &Server::http(fake.url()).with_oauth(browser.oauth()),
    )
    .unwrap();
    assert_eq!(client.list_tools().unwrap()[0].name, "ping");
    // A server that echoes the token it got: redacted before the caller.
    let out = client
        .call_tool("ping", &json!({}), &ToolContext::detached())
        .unwrap();
    assert_eq!(out, "you sent Bearer <redacted>");
    client.close();
    assert_eq!(browser.opened().len(), 1);
}

/// Requests that meet a 401 at the same time run one login between them.
#[test]
fn concurrent_401s_share_one_login() {
    let Some((python, _)) = python() else {
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_fake.py");
    let fake = Proc::start(&python, &script.display().to_string(), &["rotate"], &[]);
    let browser = TestBrowser::default();
    let client = Client::connect(
        "fake",
        &Server::http(fake.url()).with_oauth(browser.oauth()),
    )
    .unwrap();
    assert_eq!(browser.opened().len(), 1);
    for round in 0..3 {
        // Revoke the token (the call itself is answered), then 4 calls at once.
        client
            .call_tool("expire", &json!({}), &ToolContext::detached())
            .unwrap();
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let c = client.clone();
                std::thread::spawn(move || {
                    c.call_tool("ping", &json!({}), &ToolContext::detached())
                })
            })
            .collect();
        for call in calls {
            let out = call.join().unwrap().unwrap();
            assert!(out.starts_with("you sent Bearer <redacted>"), "{out}");
        }
        assert_eq!(
            browser.opened().len(),
            round + 2,
            "one login per revocation"
        );
    }
    client.close();
}

#[test]
fn oauth_refuses_an_answer_from_another_issuer() {
    // The error the answer carries is not shown: it came from elsewhere.
    let Some((err, _)) = fake_fails("wrong-iss") else {
        return;
    };
    let text = err.to_string();
    assert!(
        text.contains("(RFC 9207)") && !text.contains("evil_error_text"),
        "{text}"
    );
}

#[test]
fn oauth_refuses_a_token_for_another_audience() {
    assert_refused("wrong-aud", "the access token is for another audience");
}

#[test]
fn oauth_stops_when_the_server_refuses_the_new_token() {
    assert_refused("reject-token", "refused the token it was just issued");
}

#[test]
fn oauth_login_ends_when_the_browser_is_sent_elsewhere() {
    assert_refused("redirect-elsewhere", "no authorization answer within 2 s");
}

#[test]
fn oauth_does_not_follow_a_redirecting_metadata_url() {
    assert_refused("metadata-redirect", "redirects are not followed");
}

#[test]
fn oauth_gives_up_on_a_token_endpoint_that_never_answers() {
    assert_refused("hang", "did not answer within 2 s");
}

#[test]
fn oauth_refuses_garbage_metadata() {
    assert_refused("garbage", "no protected resource metadata");
}

#[test]
fn oauth_refuses_metadata_naming_another_issuer() {
    assert_refused("issuer-mismatch", "names the issuer `http://127.0.0.1:1`");
}

#[test]
fn oauth_refuses_metadata_for_another_resource() {
    let Some((_, opened)) = fake_fails("other-resource") else {
        return;
    };
    // Refused before any browser was opened.
    assert!(opened.is_empty());
    assert_refused("other-resource", "is for another resource");
}

#[test]
fn oauth_tests_can_require_the_sdk() {
    // Under PIKURI_REQUIRE_MCP=1 the SDK must be there.
    if required() {
        assert!(sdk().is_some());
    }
}

/// The chat example's `--mcp-url` logs in when the server asks: it prints
/// the URL on stderr (this test follows it as the user's browser would),
/// keeps the tokens in `$PIKURI_CHAT_TOKENS` (mode 0600), and a second run
/// needs no login.
#[test]
fn chat_example_logs_in_with_oauth_for_mcp_url() {
    let Some((python, script)) = sdk() else {
        return;
    };
    let Some(bin) = chat_bin() else { return };
    let server = Proc::start(&python, &script, &[], &[]);
    let store = temp_store("chat");
    let run = |follow_url: bool| {
        let model = model("secure__whoami");
        let mut child = chat(&bin, &model)
            .env("PIKURI_CHAT_TOKENS", &store)
            .args(["--mcp-url", &format!("secure={}", server.url())])
            .args(["--tools", "none", "-p", "Who am I?"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let url = line.trim();
                if follow_url && url.starts_with("http://127.0.0.1") && url.contains("/authorize?")
                {
                    let url = url.to_string();
                    std::thread::spawn(move || follow(&url));
                }
                seen.push(line);
            }
            seen
        });
        let out = child.wait_with_output().unwrap();
        (out, reader.join().unwrap().join("\n"))
    };
    let (out, stderr) = run(true);
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(stderr.contains("To authorize, open this URL"), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "The tool said: an authorized client"
    );
    assert!(store.is_file());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&store).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // The tokens never reach the terminal.
    let saved = FileTokenStore::new(&store)
        .load(&server.url())
        .unwrap()
        .unwrap();
    assert!(!stderr.contains(saved.access_token()));
    // The second run uses the kept token: no URL to open.
    let (out, stderr) = run(false);
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(!stderr.contains("To authorize"), "{stderr}");
    let _ = std::fs::remove_dir_all(store.parent().unwrap());
}

/// A token endpoint that refuses the code exchange quoting the form it
/// got (decoded in `error_description`, and as sent): neither the code,
/// the PKCE verifier nor the client secret reaches the error (its text or
/// `Debug`) or a log line.
#[test]
fn a_token_endpoint_that_echoes_the_form_leaks_no_secret() {
    let Some((python, _)) = python() else {
        return;
    };
    super::hostile::capture_logs();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_echo.py");
    let log = super::Log::new(&super::unique_tag("oauth-echo"));
    let fake = Proc::start(
        &python,
        &script.display().to_string(),
        &[&log.0.display().to_string()],
        &[],
    );
    let browser = TestBrowser::default();
    let oauth = browser
        .oauth()
        .with_client_id("client-1")
        .with_client_secret("client-s3cret-2");
    let server = Server::http(fake.url())
        .with_oauth(oauth)
        .with_startup_timeout(Duration::from_secs(60));
    let err = match Client::connect("echo", &server) {
        Ok(c) => {
            c.close();
            panic!("connected");
        }
        Err(e) => e,
    };
    let text = format!("{err} | {err:?}");
    assert_eq!(err.kind(), ErrorKind::Auth, "{text}");
    assert!(text.contains("invalid_grant"), "{text}");
    let sent = log.text();
    let form: Vec<(&str, &str)> = sent
        .lines()
        .next()
        .unwrap_or_else(|| panic!("the token endpoint got nothing: {text}"))
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let secrets: Vec<&str> = form
        .iter()
        .filter(|(k, _)| matches!(*k, "code" | "code_verifier" | "client_secret"))
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(secrets.len(), 3, "{form:?}");
    for secret in &secrets {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let lines = super::hostile::LINES.lock().unwrap().clone();
    for line in &lines {
        assert!(
            !line.contains("code-s3cret-1") && !line.contains("client-s3cret-2"),
            "{line}"
        );
    }
}

/// The echo fixture in `mode` with a 1 s request bound; the connect's
/// error.
fn echo_fails(mode: &str) -> Option<pikuri::Error> {
    echo_fails_opening(mode).map(|(err, _)| err)
}

/// [`echo_fails`], with what the browser was asked to open.
fn echo_fails_opening(mode: &str) -> Option<(pikuri::Error, Vec<String>)> {
    let (python, _) = python()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_echo.py");
    let log = super::Log::new(&super::unique_tag("oauth-echo"));
    let fake = Proc::start(
        &python,
        &script.display().to_string(),
        &[&log.0.display().to_string(), mode],
        &[],
    );
    let browser = TestBrowser::default();
    let oauth = browser
        .oauth()
        .with_client_id("client-1")
        .with_request_timeout(Duration::from_secs(1));
    let server = Server::http(fake.url())
        .with_oauth(oauth)
        .with_startup_timeout(Duration::from_secs(60));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Client::connect("echo", &server).err());
    });
    let err = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the connect is bounded");
    Some((err.expect("connected"), browser.opened()))
}

/// Metadata whose authorization endpoint is not http(s) (`smb://`): the
/// login is refused before the browser is asked to open anything.
#[test]
fn an_authorization_endpoint_that_is_not_http_is_never_opened() {
    let Some((err, opened)) = echo_fails_opening("smb") else {
        return;
    };
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(
        err.to_string()
            .contains("has no valid `authorization_endpoint`"),
        "{err}"
    );
    assert!(opened.is_empty(), "{opened:?}");
}

/// Metadata whose token endpoint is plain http on a host that is not a
/// loopback one: the MCP authorization spec asks HTTPS of every
/// authorization server endpoint, so the login is refused before the
/// browser opens anything (a code would go to it in the clear).
#[test]
fn an_authorization_server_endpoint_over_plain_http_is_refused() {
    let Some((err, opened)) = echo_fails_opening("plain-http") else {
        return;
    };
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(
        err.to_string().contains("has no valid `token_endpoint`"),
        "{err}"
    );
    assert!(err.to_string().contains("HTTPS"), "{err}");
    assert!(opened.is_empty(), "{opened:?}");
}

/// A token endpoint that trickles its answer is a timeout of the request
/// bound, told as one; one that answers 50 MB is refused at the body
/// limit, told as such (not as "no JSON body"); an authorization server
/// that refuses connections is named as unreachable.
#[test]
fn a_trickling_huge_or_refusing_authorization_side_is_a_typed_auth_error() {
    let Some(err) = echo_fails("trickle") else {
        return;
    };
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(
        err.to_string().contains("did not answer within 1 s"),
        "{err}"
    );
    let Some(err) = echo_fails("huge") else {
        return;
    };
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(err.to_string().contains("262144 bytes"), "{err}");
    let Some(err) = echo_fails("as-down") else {
        return;
    };
    assert_eq!(err.kind(), ErrorKind::Auth, "{err}");
    assert!(
        err.to_string()
            .contains("cannot reach http://127.0.0.1:1/.well-known/"),
        "{err}"
    );
}

/// A local peer that connects to the login's loopback listener first and
/// trickles a request a byte every 200 ms (a stuck prefetch, a hostile
/// process): the listener gives it up within its bound and takes the
/// browser's callback, so the login completes.
#[test]
fn a_trickling_connection_to_the_loopback_does_not_hold_the_login() {
    let Some((python, _)) = python() else {
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_fake.py");
    let fake = Proc::start(&python, &script.display().to_string(), &["good"], &[]);
    let oauth = OAuth::new()
        .with_browser(|url: &str| {
            let url = url.to_string();
            let redirect = param(&url, "redirect_uri").unwrap();
            let addr = redirect
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap()
                .to_string();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut s = std::net::TcpStream::connect(&addr).unwrap();
                for b in b"GET /callback?state=x HTTP/1.1\r\n"
                    .iter()
                    .cycle()
                    .take(600)
                {
                    if s.write_all(&[*b]).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            });
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                follow(&url);
            });
            Ok(())
        })
        .with_login_timeout(Duration::from_secs(30))
        .with_request_timeout(Duration::from_secs(10));
    let server = Server::http(fake.url())
        .with_oauth(oauth)
        .with_startup_timeout(Duration::from_secs(60));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Client::connect("fake", &server).map(|c| c.close()));
    });
    rx.recv_timeout(Duration::from_secs(90))
        .expect("the connect is bounded")
        .unwrap();
}

/// A close while a call waits for a login (the token was revoked; the
/// user has not come back from the browser): the call ends at once with
/// an error, instead of at the login timeout.
#[test]
fn a_close_ends_a_call_waiting_for_the_login() {
    let Some((python, _)) = python() else {
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_fake.py");
    let fake = Proc::start(&python, &script.display().to_string(), &["rotate"], &[]);
    let opened = Arc::new(Mutex::new(0));
    let oauth = {
        let opened = Arc::clone(&opened);
        OAuth::new()
            .with_browser(move |url: &str| {
                let mut n = opened.lock().unwrap();
                *n += 1;
                // The first login completes; the user never finishes the
                // second.
                if *n == 1 {
                    let url = url.to_string();
                    std::thread::spawn(move || follow(&url));
                }
                Ok(())
            })
            .with_login_timeout(Duration::from_secs(300))
    };
    let server = Server::http(fake.url())
        .with_oauth(oauth)
        .with_request_timeout(Duration::from_secs(300))
        .with_startup_timeout(Duration::from_secs(60));
    let client = Client::connect("fake", &server).unwrap();
    client
        .call_tool("expire", &json!({}), &ToolContext::detached())
        .unwrap();
    let call = {
        let client = client.clone();
        std::thread::spawn(move || client.call_tool("ping", &json!({}), &ToolContext::detached()))
    };
    assert!(super::eventually(Duration::from_secs(30), || *opened
        .lock()
        .unwrap()
        == 2));
    client.close();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(call.join().unwrap());
    });
    let out = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the call ends with the close, not at the login timeout");
    assert!(out.is_err(), "{out:?}");
}

/// `Duration::MAX` given as "no limit" for the login and each request to
/// the authorization side: the login completes, no panic.
#[test]
fn duration_max_login_bounds_are_no_limit() {
    let Some((python, _)) = python() else {
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oauth_fake.py");
    let fake = Proc::start(&python, &script.display().to_string(), &["good"], &[]);
    let oauth = TestBrowser::default()
        .oauth()
        .with_login_timeout(Duration::MAX)
        .with_request_timeout(Duration::MAX);
    let server = Server::http(fake.url())
        .with_oauth(oauth)
        .with_startup_timeout(Duration::from_secs(60));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Client::connect("fake", &server).map(|c| c.close()));
    });
    rx.recv_timeout(Duration::from_secs(90))
        .expect("the connect is bounded")
        .unwrap();
}
