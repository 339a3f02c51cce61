//! Both protocol generations (2026-07-28 through `server/discover`, 2025
//! through `initialize`) over stdio and Streamable HTTP, resources,
//! prompts, input requests, and the bad input of issue 32, against
//! tests/fixtures/mcp_fake.py (`--modern` for the 2026 generation).

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use pikuri::listeners::InMemoryEventList;
use pikuri::mcp::{
    Client, InputAnswer, InputProvider, InputRequest, Registry, Server, TerminalInput,
};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Cancellable, Event, ToolContext};
use serde_json::{Value, json};

use super::{Log, assert_history_valid, http, python, unique_tag};

const WATCHDOG: Duration = Duration::from_secs(120);

/// Run `f` on a thread of its own, failing the test if it has not finished
/// after `limit` (a hang, not slowness).
fn bounded<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => panic!("still running after {limit:?} ({e}): it hangs"),
    }
}

/// The fake's log file, removed on drop.
/// The fake over stdio with `args`, logging to a fresh file.
fn stdio(args: &[&str]) -> Option<(Server, Log)> {
    let (py, script) = python()?;
    let log = Log::new(&unique_tag("modern"));
    let mut line = vec![script, "--log".into(), log.0.display().to_string()];
    line.extend(args.iter().map(|s| (*s).to_string()));
    Some((Server::stdio(py, line), log))
}

fn cx() -> ToolContext {
    ToolContext::detached()
}

/// Answers every request with `content`, counting the asks and keeping
/// the problems it was told about.
#[derive(Clone)]
struct Answer {
    content: Value,
    asked: Arc<Mutex<Vec<Option<String>>>>,
}

impl Answer {
    fn new(content: Value) -> Answer {
        Answer {
            content,
            asked: Arc::default(),
        }
    }
}

impl InputProvider for Answer {
    fn ask(&self, request: &InputRequest) -> InputAnswer {
        self.asked
            .lock()
            .unwrap()
            .push(request.problem().map(String::from));
        InputAnswer::Accept(self.content.clone())
    }
}

/// Every API of a connected client, the same on each generation.
fn exercise(client: &Client, generation: &str) {
    assert_eq!(client.protocol_version(), generation);
    let tools = client.list_tools().unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    assert_eq!(
        client
            .call_tool("echo", &json!({"text": "hi"}), &cx())
            .unwrap(),
        "echo: hi"
    );
    // Six resources in pages of two.
    let resources = client.list_resources().unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "mem://r0",
            "mem://r1",
            "mem://r2",
            "mem://r3",
            "mem://r4",
            "mem://big"
        ]
    );
    assert_eq!(resources[1].description.as_deref(), Some("Resource 1"));
    let templates = client.list_resource_templates().unwrap();
    assert_eq!(templates[0].uri_template, "mem://item/{n}");
    let read = client.read_resource("mem://r1").unwrap();
    assert_eq!(read[0].text.as_deref(), Some("content of mem://r1"));
    assert_eq!(
        client.read_resource("mem://item/7").unwrap()[0].to_text(),
        "item 7"
    );
    let prompts = client.list_prompts().unwrap();
    assert_eq!(prompts[0].name, "greet");
    assert!(prompts[0].arguments[0].required);
    let prompt = client.get_prompt("greet", [("who", "Ada")]).unwrap();
    assert_eq!(prompt.text(), "Say hello to Ada.");
    assert_eq!(prompt.messages[0].0, "user");
    let err = client
        .get_prompt("greet", Vec::<(String, String)>::new())
        .unwrap_err();
    assert!(err.to_string().contains("greet needs `who`"), "{err}");
    client.ping().ok();
}

#[test]
fn both_generations_over_stdio_and_http_give_the_same_api() {
    for (args, generation) in [(&[][..], "2025-06-18"), (&["--modern"][..], "2026-07-28")] {
        let Some((server, log)) = stdio(args) else {
            return;
        };
        let started = std::time::Instant::now();
        let client = Client::connect("fake", &server).unwrap();
        eprintln!(
            "{generation} over stdio: connected in {:?}",
            started.elapsed()
        );
        exercise(&client, generation);
        client.close();
        let text = log.text();
        if generation == "2026-07-28" {
            // No handshake; every request carries the version in _meta.
            assert!(!text.contains("\"initialize\""), "{text}");
            let calls: Vec<&str> = text.lines().filter(|l| l.contains("tools/call")).collect();
            assert!(!calls.is_empty());
            assert!(
                calls.iter().all(
                    |l| l.contains(r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#)
                ),
                "{text}"
            );
            // The progress token and the protocol fields share _meta.
            assert!(calls[0].contains("progressToken"), "{text}");
        } else {
            assert!(text.contains("server/discover"), "{text}");
            assert!(text.contains("\"initialize\""), "{text}");
        }

        let Some(fake) = http(args) else { return };
        let client = Client::connect("web", &Server::http(&fake.url)).unwrap();
        exercise(&client, generation);
        client.close();
        if generation == "2026-07-28" {
            // The fake answers 400 to any request whose Mcp-Method or
            // Mcp-Name header does not match the body, so the calls above
            // prove the headers; no session was ever used.
            let text = fake.log.text();
            assert!(!text.contains("\"initialize\""), "{text}");
            assert!(
                text.lines()
                    .filter(|l| l.starts_with("POST"))
                    .all(|l| l.ends_with("session=None")),
                "{text}"
            );
        }
    }
}

#[test]
fn a_modern_server_through_an_agent_with_the_resource_tool_and_a_listen_stream() {
    let Some((server, log)) = stdio(&["--modern"]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call(
        "fake__read_resource",
        json!({"uri": "mem://r2"}),
    ));
    model.push(Reply::tool_call("fake__change", json!({})));
    model.push(Reply::text("done"));
    let events = InMemoryEventList::new();
    let mcp = Registry::new().server("fake", server.with_resource_tool(true));
    let mut agent = Agent::builder(model.transport())
        .add_listener(events.clone())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    let names = mcp.tool_names("fake");
    assert!(
        names.contains(&"fake__read_resource".to_string()),
        "{names:?}"
    );
    assert!(!names.contains(&"fake__extra".to_string()));
    agent.run_loop("read and change").unwrap();
    assert_eq!(
        model.chat_requests()[1].messages().last().unwrap()["content"],
        "content of mem://r2"
    );
    // The change came on the subscriptions/listen stream: the list was
    // refreshed right after the call, before the next request.
    assert!(
        model.chat_requests()[2]
            .tool_names()
            .contains(&"fake__extra".to_string()),
        "{}",
        log.text()
    );
    assert!(log.text().contains("subscriptions/listen"));
    assert!(
        events
            .events()
            .iter()
            .any(|e| matches!(e, Event::Domain { name, .. } if name == "mcp.tools_refreshed"))
    );
    agent.close();
}

#[test]
fn list_results_are_kept_for_their_ttl() {
    let Some((server, log)) = stdio(&["--modern"]) else {
        return;
    };
    let client = Client::connect("fake", &server).unwrap();
    let first = client.list_resources().unwrap();
    let second = client.list_resources().unwrap();
    assert_eq!(first, second);
    // Three pages, listed once: ttlMs is 60 s.
    assert_eq!(log.text().matches("\"resources/list\"").count(), 3);
    client.close();
    // A 2025 server gives no ttlMs: listed each time.
    let Some((server, log)) = stdio(&[]) else {
        return;
    };
    let client = Client::connect("fake", &server).unwrap();
    client.list_resources().unwrap();
    client.list_resources().unwrap();
    assert_eq!(log.text().matches("\"resources/list\"").count(), 6);
    client.close();
}

#[test]
fn input_requests_reach_the_provider_on_both_generations_and_are_refused_without_one() {
    let provider = Answer::new(json!({"name": "octocat"}));
    for args in [&["--modern"][..], &["--asks"][..]] {
        let Some((server, _log)) = stdio(args) else {
            return;
        };
        let client = Client::connect(
            "fake",
            &server.clone().with_input_provider(provider.clone()),
        )
        .unwrap();
        assert_eq!(
            client.call_tool("ask", &json!({}), &cx()).unwrap(),
            "hello octocat"
        );
        client.close();
        // No provider: refused (2026: declined; 2025: -32601).
        let client = Client::connect("fake", &server).unwrap();
        let out = client.call_tool("ask", &json!({}), &cx()).unwrap();
        assert!(
            out == "input decline" || out == "elicitation refused with code -32601",
            "{out}"
        );
        client.close();
    }
    let Some(fake) = http(&["--modern"]) else {
        return;
    };
    let client = Client::connect(
        "web",
        &Server::http(&fake.url).with_input_provider(provider.clone()),
    )
    .unwrap();
    assert_eq!(
        client.call_tool("ask", &json!({}), &cx()).unwrap(),
        "hello octocat"
    );
    client.close();
    assert_eq!(provider.asked.lock().unwrap().len(), 3);
}

#[test]
fn an_answer_the_schema_rejects_is_asked_again_then_cancelled() {
    let Some((server, _log)) = stdio(&["--modern"]) else {
        return;
    };
    let provider = Answer::new(json!({"name": 5}));
    let client = Client::connect("fake", &server.with_input_provider(provider.clone())).unwrap();
    assert_eq!(
        client.call_tool("ask", &json!({}), &cx()).unwrap(),
        "input cancel"
    );
    let asked = provider.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert!(asked[0].is_none());
    assert!(
        asked[1].as_deref().unwrap_or_default().contains("name"),
        "{asked:?}"
    );
    client.close();
}

/// Blocks until the test lets it go; says when it started waiting.
struct Blocked {
    started: crossbeam_channel::Sender<()>,
    release: crossbeam_channel::Receiver<()>,
}

impl InputProvider for Blocked {
    fn ask(&self, _: &InputRequest) -> InputAnswer {
        let _ = self.started.send(());
        let _ = self.release.recv();
        InputAnswer::Decline
    }
}

#[test]
fn a_cancel_ends_the_wait_for_the_user_and_the_next_turn_works() {
    for args in [&["--modern"][..], &["--asks"][..]] {
        let Some((server, _log)) = stdio(args) else {
            return;
        };
        let (started_tx, started) = crossbeam_channel::bounded(4);
        let (release_tx, release) = crossbeam_channel::bounded::<()>(4);
        let model = FakeServer::start();
        model.push(Reply::tool_call("fake__ask", json!({})));
        model.push(Reply::tool_call("fake__echo", json!({"text": "next"})));
        model.push(Reply::text("done"));
        let cancel = Cancellable::new();
        let mcp = Registry::new()
            .server("fake", server)
            .input_provider(Blocked {
                started: started_tx,
                release,
            });
        let mut agent = Agent::builder(model.transport())
            .cancellable(cancel.clone())
            .add_extension(mcp)
            .build()
            .unwrap();
        let canceller = thread::spawn(move || {
            started.recv_timeout(WATCHDOG).unwrap();
            cancel.cancel();
            std::time::Instant::now()
        });
        let (agent_back, err, returned) = bounded(WATCHDOG, move || {
            let err = agent.run_loop("ask me").unwrap_err();
            (agent, err, std::time::Instant::now())
        });
        let mut agent = agent_back;
        let cancelled_at = canceller.join().unwrap();
        // Measured, not asserted (machines are noisy).
        eprintln!(
            "{args:?}: cancel during the input wait returned after {:?}",
            returned.saturating_duration_since(cancelled_at)
        );
        assert!(err.is_cancelled(), "{err}");
        assert_history_valid(agent.messages());
        drop(release_tx);
        let out = agent.run_loop("go on").unwrap();
        assert_eq!(
            model
                .chat_requests()
                .last()
                .unwrap()
                .messages()
                .last()
                .unwrap()["content"],
            "echo: next",
            "{out:?}"
        );
        agent.close();
    }
}

#[test]
fn a_garbage_discover_answer_and_an_unknown_version_are_clear_errors() {
    let Some((server, _log)) = stdio(&["--modern", "--discover-garbage"]) else {
        return;
    };
    let err = bounded(WATCHDOG, move || Client::connect("g", &server).unwrap_err());
    assert!(err.to_string().contains("not a discover result"), "{err}");
    let Some((server, _log)) = stdio(&["--modern", "--discover-versions", "2099-01-01"]) else {
        return;
    };
    let err = bounded(WATCHDOG, move || Client::connect("v", &server).unwrap_err());
    let text = err.to_string();
    assert!(
        text.contains("2099-01-01") && text.contains("2026-07-28"),
        "{text}"
    );
    // A dual-era server offering only a 2025 version is spoken to as one.
    let Some((server, _log)) = stdio(&["--discover-versions", "2025-06-18"]) else {
        return;
    };
    let client = Client::connect("d", &server).unwrap();
    assert_eq!(client.protocol_version(), "2025-06-18");
    client.close();
}

#[test]
fn a_looping_or_hostile_input_request_and_a_10_mb_resource_are_clear_errors() {
    let Some((server, _log)) = stdio(&["--modern"]) else {
        return;
    };
    let provider = Answer::new(json!({"name": "octocat"}));
    let client = Client::connect("fake", &server.with_input_provider(provider.clone())).unwrap();
    let c = client.clone();
    let err = bounded(WATCHDOG, move || {
        c.call_tool("loop_ask", &json!({}), &cx()).unwrap_err()
    });
    assert!(err.to_string().contains("after 8 rounds"), "{err}");
    // A nested schema is not put to the user: declined unasked.
    let before = provider.asked.lock().unwrap().len();
    assert_eq!(
        client.call_tool("evil_ask", &json!({}), &cx()).unwrap(),
        "input decline"
    );
    assert_eq!(provider.asked.lock().unwrap().len(), before);
    // 10 MB over a 4 MiB bound: an error naming the bound, at once (the
    // request timeout is 60 s; the watchdog would catch a wait for it).
    let c = client.clone();
    let err = bounded(Duration::from_secs(30), move || {
        c.read_resource("mem://big").unwrap_err()
    });
    assert!(err.to_string().contains("over 4194304 bytes"), "{err}");
    // The connection still works.
    assert_eq!(
        client.read_resource("mem://r0").unwrap()[0].to_text(),
        "content of mem://r0"
    );
    client.close();
    let Some(fake) = http(&["--modern"]) else {
        return;
    };
    let client = Client::connect("web", &Server::http(&fake.url)).unwrap();
    let err = bounded(Duration::from_secs(30), move || {
        client.read_resource("mem://big").unwrap_err()
    });
    assert!(err.to_string().contains("4194304"), "{err}");
}

/// A writer into a shared buffer.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn escape_sequences_in_a_question_never_reach_the_terminal() {
    let Some((server, _log)) = stdio(&["--modern"]) else {
        return;
    };
    let screen = Shared::default();
    let terminal = TerminalInput::new(std::io::Cursor::new(b"y\nada\n".to_vec()), screen.clone());
    let client = Client::connect("fake", &server.with_input_provider(terminal)).unwrap();
    assert_eq!(
        client.call_tool("evil_text", &json!({}), &cx()).unwrap(),
        "hello ada"
    );
    let shown = String::from_utf8(screen.0.lock().unwrap().clone()).unwrap();
    assert!(shown.contains("MCP server fake asks: Login?"), "{shown}");
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "{shown:?}"
    );
    client.close();
}

#[test]
fn a_tool_list_change_on_the_http_listen_stream_refreshes_the_next_turn() {
    let Some(fake) = http(&["--modern"]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call("web__change", json!({})));
    model.push(Reply::text("changed"));
    model.push(Reply::text("again"));
    let events = InMemoryEventList::new();
    let mcp = Registry::new().server("web", Server::http(&fake.url));
    let mut agent = Agent::builder(model.transport())
        .add_listener(events.clone())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    agent.run_loop("change").unwrap();
    // The notice comes on the long-lived listen response, not on the
    // call's: it arrives on its own time.
    assert!(
        super::eventually(Duration::from_secs(30), || events.events().iter().any(
            |e| matches!(e, Event::Domain { name, .. } if name == "mcp.tools_changed")
        )),
        "{}",
        fake.log.text()
    );
    agent.run_loop("again").unwrap();
    assert!(
        model
            .chat_requests()
            .last()
            .unwrap()
            .tool_names()
            .contains(&"web__extra".to_string())
    );
    assert!(fake.log.text().contains("subscriptions/listen"));
    agent.close();
}

/// A form's fields are asked in the order the server's schema lists them
/// (zip, name, age), not sorted, on both generations.
#[test]
fn a_form_asks_its_fields_in_the_servers_order() {
    for args in [["--asks", "--survey"], ["--modern", "--survey"]] {
        let Some((server, _log)) = stdio(&args) else {
            return;
        };
        let screen = Shared::default();
        let typed = b"y\n12345\nada\n36\n".to_vec();
        let terminal = TerminalInput::new(std::io::Cursor::new(typed), screen.clone());
        let client = Client::connect("fake", &server.with_input_provider(terminal)).unwrap();
        assert_eq!(
            client.call_tool("ask", &json!({}), &cx()).unwrap(),
            "hello ada",
            "{args:?}"
        );
        let shown = String::from_utf8(screen.0.lock().unwrap().clone()).unwrap();
        let at = |label: &str| {
            shown
                .find(label)
                .unwrap_or_else(|| panic!("{label} not asked: {shown}"))
        };
        assert!(
            at("Zip code") < at("Login") && at("Login") < at("Age"),
            "{args:?}: {shown}"
        );
        client.close();
    }
}
