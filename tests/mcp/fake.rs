//! The fault matrix against tests/fixtures/mcp_fake.py.

use std::time::{Duration, Instant};

use pikuri::listeners::InMemoryEventList;
use pikuri::mcp::{Client, Registry, Server};
use pikuri::testing::{FakeServer, Reply};
use pikuri::{Agent, Cancellable, Event, ToolContext};
use serde_json::json;

use super::{Log, assert_history_valid, eventually, http, processes_tagged, python, unique_tag};

/// The file the fake server logs what it receives to; removed when the
/// test is done with it.
/// The fake server with `args`, logging what it receives to a fresh file.
fn fake(args: &[&str]) -> Option<(Server, Log, String)> {
    let (py, script) = python()?;
    let tag = unique_tag("fake");
    let log = Log::new(&tag);
    let mut command_line = vec![script, "--log".to_string(), log.0.display().to_string()];
    command_line.extend(args.iter().map(|s| (*s).to_string()));
    let server = Server::stdio(py, command_line).with_env("PIKURI_MCP_TAG", &tag);
    Some((server, log, tag))
}

fn received(log: &Log) -> String {
    log.text()
}

fn cx() -> ToolContext {
    ToolContext::detached()
}

#[test]
fn paginated_tools_are_offered_and_called_through_an_agent() {
    let Some((server, _log, tag)) = fake(&["--page", "2"]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__echo", json!({"text": "hi"})));
    model.push(Reply::text("done"));
    let mcp = Registry::new().server("fake", server);
    let mut agent = Agent::builder(model.transport())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    // 13 tools in pages of 2; the one with a bad schema is left out.
    let names = mcp.tool_names("fake");
    assert_eq!(names.len(), 12, "{names:?}");
    assert!(names.contains(&"fake__echo".to_string()));
    assert!(!names.iter().any(|n| n.contains("bad")), "{names:?}");
    let prompt = agent.system_prompt();
    assert!(
        prompt.contains("<available_mcps>")
            && prompt.contains("- fake: Fake Server: A server that misbehaves on command."),
        "{prompt}"
    );
    agent.run_loop("echo hi").unwrap();
    let second = &model.chat_requests()[1];
    assert_eq!(second.messages().last().unwrap()["content"], "echo: hi");
    assert!(
        model.chat_requests()[0]
            .tool_names()
            .contains(&"fake__echo".to_string())
    );
    agent.close();
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 0));
}

#[test]
fn cancel_mid_call_returns_fast_and_tells_the_server() {
    let Some((server, log, _)) = fake(&[]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__hang", json!({})));
    let cancel = Cancellable::new();
    let mut agent = Agent::builder(model.transport())
        .cancellable(cancel.clone())
        .add_extension(Registry::new().server("fake", server))
        .build()
        .unwrap();
    let log = std::sync::Arc::new(log);
    let watcher = std::thread::spawn({
        let log = std::sync::Arc::clone(&log);
        move || {
            assert!(eventually(Duration::from_secs(10), || received(&log)
                .contains("\"hang\"")));
            let at = Instant::now();
            cancel.cancel();
            at
        }
    });
    let err = agent.run_loop("hang").unwrap_err();
    let returned = Instant::now();
    let cancelled_at = watcher.join().unwrap();
    let latency = returned.duration_since(cancelled_at);
    eprintln!("cancel latency: {latency:?}");
    assert!(err.is_cancelled(), "{err}");
    // A liveness bound, not a speed target: the tool never answers and
    // the call's own timeout is a minute, so a cancel that only took
    // effect at that timeout fails here, however loaded the machine.
    assert!(latency < Duration::from_secs(20), "{latency:?}");
    assert_history_valid(agent.messages());
    assert!(eventually(Duration::from_secs(5), || {
        let text = received(&log);
        text.contains("notifications/cancelled") && text.contains("\"requestId\"")
    }));
    agent.close();
}

#[test]
fn a_hanging_server_hits_the_timeout_as_an_observation() {
    let Some((server, log, _)) = fake(&[]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__hang", json!({})));
    model.push(Reply::text("gave up"));
    let mut agent = Agent::builder(model.transport())
        .add_extension(Registry::new().server(
            "fake",
            server.with_request_timeout(Duration::from_millis(300)),
        ))
        .build()
        .unwrap();
    let started = Instant::now();
    agent.run_loop("hang").unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let obs = model.chat_requests()[1].messages().last().unwrap()["content"].clone();
    assert_eq!(
        obs,
        "Error: MCP server `fake` did not answer within 0.3 s; the call was cancelled"
    );
    assert_history_valid(agent.messages());
    assert!(eventually(Duration::from_secs(5), || received(&log)
        .contains("notifications/cancelled")));
    agent.close();
}

#[test]
fn a_crash_is_an_observation_then_one_restart_then_down() {
    let Some((server, _log, tag)) = fake(&[]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__crash", json!({})));
    model.push(Reply::text("it crashed"));
    let mcp = Registry::new().server("fake", server);
    let mut agent = Agent::builder(model.transport())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    agent.run_loop("crash").unwrap();
    let obs = model.chat_requests()[1].messages().last().unwrap()["content"].clone();
    let obs = obs.as_str().unwrap();
    assert!(
        obs.starts_with("Error: MCP server `fake` stopped during the call"),
        "{obs}"
    );
    assert!(
        obs.ends_with("it will be restarted on the next call"),
        "{obs}"
    );
    assert_history_valid(agent.messages());
    // The next call restarts it; a second crash uses up the budget.
    let client = mcp.client("fake").unwrap();
    assert_eq!(
        client
            .call_tool("echo", &json!({"text": "back"}), &cx())
            .unwrap(),
        "echo: back"
    );
    let err = client.call_tool("crash", &json!({}), &cx()).unwrap_err();
    assert!(err.message().ends_with("it will not be restarted"), "{err}");
    let err = client
        .call_tool("echo", &json!({"text": "x"}), &cx())
        .unwrap_err();
    assert!(
        err.message().starts_with("MCP server `fake` is down"),
        "{err}"
    );
    agent.close();
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 0));
}

#[test]
fn garbage_oversized_lines_and_unknown_notifications_are_skipped() {
    let Some((server, _log, _)) = fake(&["--banner"]) else {
        return;
    };
    let client = Client::connect("fake", &server).unwrap();
    let started = Instant::now();
    let out = client.call_tool("garbage", &json!({}), &cx()).unwrap();
    assert_eq!(out, "after the garbage");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        client
            .call_tool("echo", &json!({"text": "still"}), &cx())
            .unwrap(),
        "echo: still"
    );
    client.close();
}

#[test]
fn server_requests_are_refused_or_answered() {
    let Some((server, log, _)) = fake(&[]) else {
        return;
    };
    let client = Client::connect("fake", &server).unwrap();
    let out = client.call_tool("sample", &json!({}), &cx()).unwrap();
    assert_eq!(out, "sampling answered with code -32601");
    // `progress` also sends a ping; the answer is read by the next call.
    client.call_tool("progress", &json!({}), &cx()).unwrap();
    client
        .call_tool("echo", &json!({"text": "x"}), &cx())
        .unwrap();
    let text = received(&log);
    assert!(
        text.lines()
            .any(|l| l.contains("\"p1\"") && l.contains("\"result\"")),
        "{text}"
    );
    client.ping().unwrap();
    client.close();
}

#[test]
fn progress_and_log_messages_become_domain_events() {
    let Some((server, _log, _)) = fake(&[]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__progress", json!({})));
    model.push(Reply::text("ok"));
    let events = InMemoryEventList::new();
    let mut agent = Agent::builder(model.transport())
        .add_listener(events.clone())
        .add_extension(Registry::new().server("fake", server))
        .build()
        .unwrap();
    agent.run_loop("progress").unwrap();
    agent.close();
    let domain: Vec<(String, serde_json::Value, bool)> = events
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Domain {
                name,
                payload,
                transient,
                ..
            } => Some((name.clone(), payload.clone(), *transient)),
            _ => None,
        })
        .collect();
    let progress: Vec<_> = domain.iter().filter(|d| d.0 == "mcp.progress").collect();
    assert_eq!(progress.len(), 2, "{domain:?}");
    assert_eq!(
        progress[1].1,
        json!({"server": "fake", "tool": "progress", "progress": 2.0, "total": 2.0, "message": "step 2"})
    );
    assert!(progress.iter().all(|p| p.2));
    let log = domain
        .iter()
        .find(|d| d.0 == "mcp.log")
        .expect("an mcp.log event");
    assert_eq!(log.1["data"], "working");
    assert!(!log.2);
}

#[test]
fn list_changed_refreshes_the_tools_before_the_next_request() {
    let Some((server, _log, _)) = fake(&[]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__change", json!({})));
    model.push(Reply::tool_call("fake__extra", json!({})));
    model.push(Reply::text("ok"));
    let mut agent = Agent::builder(model.transport())
        .add_extension(Registry::new().server("fake", server))
        .build()
        .unwrap();
    assert!(!agent.tools().iter().any(|t| t.name() == "fake__extra"));
    agent.run_loop("change").unwrap();
    let reqs = model.chat_requests();
    assert!(!reqs[0].tool_names().contains(&"fake__extra".to_string()));
    assert!(reqs[1].tool_names().contains(&"fake__extra".to_string()));
    // The new tool was callable (the fake answers unknown names with an error).
    let obs = reqs[2].messages().last().unwrap()["content"].clone();
    assert_eq!(
        obs,
        "Error: MCP server `fake`: unknown tool extra (code -32602)"
    );
    agent.close();
}

#[test]
fn content_types_and_is_error() {
    let Some((server, _log, _)) = fake(&[]) else {
        return;
    };
    let client = Client::connect("fake", &server).unwrap();
    assert_eq!(
        client.call_tool("image", &json!({}), &cx()).unwrap(),
        "{\"ok\":true}\n[image: image/png, 8 bytes]"
    );
    let err = client.call_tool("fail", &json!({}), &cx()).unwrap_err();
    assert_eq!(err.to_string(), "the input was wrong");
    client.close();
}

#[test]
fn protocol_versions_are_negotiated() {
    let Some((server, _log, _)) = fake(&["--version", "2025-03-26"]) else {
        return;
    };
    let client = Client::connect("old", &server).unwrap();
    assert_eq!(client.protocol_version(), "2025-03-26");
    client.close();
    let Some((server, _log, tag)) = fake(&["--version", "1999-01-01"]) else {
        return;
    };
    let err = Client::connect("ancient", &server).unwrap_err();
    assert!(
        err.to_string().contains("protocol version \"1999-01-01\""),
        "{err}"
    );
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 0));
}

#[test]
fn close_kills_the_process_group_even_a_stubborn_one() {
    let Some((server, _log, tag)) = fake(&["--child"]) else {
        return;
    };
    let client = Client::connect("fake", &server).unwrap();
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 2));
    client.close();
    assert_eq!(processes_tagged(&tag), 0);

    // Ignores stdin EOF and SIGTERM: only SIGKILL ends it.
    let Some((server, _log, tag)) = fake(&["--child", "--stubborn"]) else {
        return;
    };
    let client = Client::connect(
        "fake",
        &server.with_shutdown_grace(Duration::from_millis(100)),
    )
    .unwrap();
    assert!(eventually(Duration::from_secs(5), || processes_tagged(
        &tag
    ) == 2));
    let started = Instant::now();
    client.close();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(processes_tagged(&tag), 0);
}

#[test]
fn sub_agent_only_tools_stay_off_the_parent() {
    let Some((server, _log, _)) = fake(&[]) else {
        return;
    };
    let model = FakeServer::start();
    let agent = Agent::builder(model.transport())
        .add_extension(Registry::new().server("fake", server.with_sub_agent_only(true)))
        .add_extension(
            pikuri::subagent::SubAgents::new(vec![
                pikuri::subagent::Persona::new("helper", "Echoes.", "You echo.", 3)
                    .with_tools(&["fake__echo"]),
            ])
            .unwrap(),
        )
        .build()
        .unwrap();
    assert!(
        agent
            .sub_agent_tools()
            .iter()
            .any(|t| t.name() == "fake__echo")
    );
    assert!(!agent.tools().iter().any(|t| t.name().starts_with("fake__")));
}

#[test]
fn http_json_and_sse_answers_headers_expiry_and_delete() {
    let Some(fake) = http(&[]) else { return };
    let model = FakeServer::start();
    model.push(Reply::tool_call("web__echo", json!({"text": "over http"})));
    model.push(Reply::text("done"));
    let events = InMemoryEventList::new();
    let mcp = Registry::new().server("web", Server::http(&fake.url).with_bearer_token("t0ken"));
    let mut agent = Agent::builder(model.transport())
        .add_listener(events.clone())
        .add_extension(mcp.clone())
        .build()
        .unwrap();
    agent.run_loop("echo").unwrap();
    // tools/call was answered over SSE, a progress notification first.
    assert_eq!(
        model.chat_requests()[1].messages().last().unwrap()["content"],
        "echo: over http"
    );
    assert!(
        events
            .events()
            .iter()
            .any(|e| matches!(e, Event::Domain { name, .. } if name == "mcp.progress"))
    );
    let log = received(&fake.log);
    let after_init: Vec<&str> = log.lines().filter(|l| l.contains("tools/call")).collect();
    assert!(
        after_init[0].contains("version=2025-06-18 auth=Bearer t0ken session="),
        "{log}"
    );
    assert!(!after_init[0].contains("session=None"), "{log}");

    // The server forgets the session: the next request gets 404, the client
    // initializes again once and retries.
    let client = mcp.client("web").unwrap();
    assert_eq!(
        client.call_tool("expire", &json!({}), &cx()).unwrap(),
        "expired"
    );
    assert_eq!(
        client
            .call_tool("echo", &json!({"text": "again"}), &cx())
            .unwrap(),
        "echo: again"
    );
    assert_eq!(received(&fake.log).matches("\"initialize\"").count(), 2);
    agent.close();
    assert!(
        received(&fake.log)
            .lines()
            .any(|l| l.starts_with("DELETE ") && !l.ends_with("None"))
    );
}

/// With the host's trace source set, a tool call reaches the MCP server
/// with the run's trace context in `_meta.traceparent`: the host's trace id
/// and the turn's span, the value the model request's `traceparent` header
/// carried; without it, no `traceparent` is sent.
#[cfg(feature = "otel")]
#[test]
fn tool_calls_carry_the_run_traceparent_in_meta() {
    use pikuri::otel::{OtlpConfig, OtlpExporter};

    // The `_meta` of the first `tools/call` the fake logged.
    fn call_meta(log: &Log) -> serde_json::Value {
        let text = received(log);
        let line = text
            .lines()
            .find(|l| l.contains("\"tools/call\""))
            .unwrap_or_else(|| panic!("no tools/call in {text}"));
        let call: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        call["params"]["_meta"].clone()
    }

    let Some((server, log, _)) = fake(&[]) else {
        return;
    };
    let model = FakeServer::start();
    model.push(Reply::tool_call("fake__echo", json!({"text": "hi"})));
    model.push(Reply::text("done"));
    // Nothing listens on port 9: export fails quietly.
    let exporter = OtlpExporter::new(OtlpConfig::new("http://127.0.0.1:9").with_max_retries(0))
        .with_transport(&model.transport());
    let otel = exporter.handle();
    let host_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    assert!(otel.set_parent(&format!("00-{host_trace}-00f067aa0ba902b7-01")));
    let handle = otel.clone();
    let mut agent = Agent::builder(model.transport())
        .add_extension(Registry::new().server("fake", server))
        .add_listener(exporter)
        .traceparent(move || Some(handle.traceparent()))
        .build()
        .unwrap();
    agent.run_loop("echo hi").unwrap();
    agent.close();
    let header = model.chat_requests()[0]
        .header("traceparent")
        .expect("the model request's traceparent")
        .to_string();
    let meta = call_meta(&log);
    let tp = meta["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("no _meta.traceparent in {meta}"));
    assert!(tp.starts_with(&format!("00-{host_trace}-")), "{tp}");
    assert_eq!(
        tp, header,
        "the turn's invoke_agent span, as on the model request"
    );
    // The progress token sent beside it is kept.
    assert!(meta.get("progressToken").is_some(), "{meta}");

    // No trace source: no traceparent.
    let Some((server, log, _)) = fake(&[]) else {
        return;
    };
    model.push(Reply::tool_call("fake__echo", json!({"text": "hi"})));
    model.push(Reply::text("done"));
    let mut agent = Agent::builder(model.transport())
        .add_extension(Registry::new().server("fake", server))
        .build()
        .unwrap();
    agent.run_loop("echo hi").unwrap();
    agent.close();
    let meta = call_meta(&log);
    assert!(meta.get("traceparent").is_none(), "{meta}");
}
