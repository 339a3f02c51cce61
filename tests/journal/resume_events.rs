//! Issue 38 item 5: what listeners see on a resume. A journal cut after
//! each record of a turn (a crash there), resumed by a new agent whose
//! listener saw nothing of the first process: its events alone render
//! the whole turn (every `ToolCall` with its `ToolResult`, the question,
//! the answer), the replayed part announced by `Event::Resumed`.

use std::collections::HashSet;

use pikuri::journal::FileStore;
use pikuri::listeners::InMemoryEventList;
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Configurator, Event, Role};
use serde_json::json;

use super::{no_spawn, temp_dir};

const QUESTION: &str = "look up k and send it to bob";

fn agent(server: &FakeServer) -> Configurator {
    let lookup = FnTool::new("lookup", "Looks up.", Parameters::empty(), |_, _| {
        Ok("value of k".into())
    })
    .idempotent_calls();
    let send = FnTool::new("send", "Sends.", Parameters::empty(), |_, _| {
        Ok("sent to bob".into())
    })
    .state_changing();
    Agent::builder(server.transport())
        .system_prompt("You look things up and send them.")
        .add_tool(lookup)
        .add_tool(send)
}

/// The model's script: one answer with both calls (some text beside
/// them), then the final answer.
fn script(server: &FakeServer) {
    server.push(
        Reply::tool_calls(vec![("lookup", json!({})), ("send", json!({}))])
            .with_text("Looking it up."),
    );
    server.push(Reply::text("Done: sent."));
}

/// Keep the journal's lines up to the `nth` (0-based) record of type
/// `kind`: the file a crash right after storing it leaves behind.
fn cut_after(store: &FileStore, run: &str, kind: &str, nth: usize) {
    let path = store.path(run);
    let text = std::fs::read_to_string(&path).unwrap();
    let tag = format!("\"type\":\"{kind}\"");
    let mut seen = 0;
    let mut kept = String::new();
    for line in text.split_inclusive('\n') {
        kept.push_str(line);
        if line.contains(&tag) {
            if seen == nth {
                std::fs::write(&path, kept).unwrap();
                return;
            }
            seen += 1;
        }
    }
    panic!("no {kind} #{nth} in:\n{text}");
}

/// The main agent's events, without the window probe's.
fn main_events(rec: &InMemoryEventList) -> Vec<Event> {
    rec.events()
        .into_iter()
        .filter(|e| e.agent().is_empty() && !matches!(e, Event::ContextCap { .. }))
        .collect()
}

/// What a renderer that saw only these events needs: the question, each
/// call once and answered after it, each tool message of the history
/// announced with its content, the answer, one `Stopped`.
fn assert_renderable(events: &[Event], history: &[pikuri::Message], at: &str) {
    let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
    assert!(
        events.iter().any(|e| matches!(e,
            Event::UserTurn { content, mid_loop: false, .. } if content == QUESTION)),
        "{at}: no question in {kinds:?}"
    );
    let mut called: HashSet<&str> = HashSet::new();
    let mut answered: HashSet<&str> = HashSet::new();
    for e in events {
        match e {
            Event::ToolCall { id, .. } => {
                assert!(
                    called.insert(id),
                    "{at}: call {id} announced twice: {kinds:?}"
                );
            }
            Event::ToolResult { id, .. } => {
                assert!(
                    called.contains(id.as_str()),
                    "{at}: result {id} before its call: {kinds:?}"
                );
                assert!(
                    answered.insert(id),
                    "{at}: call {id} answered twice: {kinds:?}"
                );
            }
            _ => {}
        }
    }
    assert_eq!(called, answered, "{at}: a call stays pending: {kinds:?}");
    for m in history.iter().filter(|m| m.role == Role::Tool) {
        let id = m.tool_call_id.as_deref().unwrap();
        assert!(
            events.iter().any(|e| matches!(e,
                Event::ToolResult { id: i, content, .. } if i == id && *content == m.content)),
            "{at}: the result of {id} ({}) was never announced: {kinds:?}",
            m.content
        );
    }
    assert_eq!(called.len(), 2, "{at}: {kinds:?}");
    assert!(
        events.iter().any(|e| matches!(e,
            Event::Assistant { content, .. } if content == "Done: sent.")),
        "{at}: {kinds:?}"
    );
    assert_eq!(kinds.iter().filter(|k| **k == "stopped").count(), 1, "{at}");
    assert_eq!(kinds.last(), Some(&"stopped"), "{at}");
}

#[test]
fn a_resumed_turn_renders_from_the_new_process_events_alone() {
    // (the record the crash follows, which one, the replayed kinds)
    let cases: [(&str, usize, &[&str]); 6] = [
        // Nothing of the turn but the question: the answer is asked for.
        ("user", 0, &["user_turn"]),
        // The calls journaled, none started: both are run (and announced) anew.
        ("response", 0, &["user_turn", "assistant"]),
        // The first result stored just before the kill: never announced
        // by the first process's listeners, replayed here.
        (
            "tool_result",
            0,
            &["user_turn", "assistant", "tool_call", "tool_result"],
        ),
        // `send` started without a result: interrupted, its call replayed.
        (
            "tool_start",
            1,
            &[
                "user_turn",
                "assistant",
                "tool_call",
                "tool_result",
                "tool_call",
            ],
        ),
        (
            "tool_result",
            1,
            &[
                "user_turn",
                "assistant",
                "tool_call",
                "tool_result",
                "tool_call",
                "tool_result",
            ],
        ),
        // The answer stored, the turn's end not: nothing is asked again.
        (
            "response",
            1,
            &[
                "user_turn",
                "assistant",
                "tool_call",
                "tool_result",
                "tool_call",
                "tool_result",
                "assistant",
            ],
        ),
    ];
    let _serial = no_spawn();
    for (kind, nth, replayed) in cases {
        let at = format!("cut after {kind} #{nth}");
        let server = FakeServer::start();
        let store = FileStore::new(temp_dir("resume-events")).unwrap();
        script(&server);
        let mut first = agent(&server).journal(store.clone(), "r").build().unwrap();
        first.run_loop(QUESTION).unwrap();
        drop(first);
        cut_after(&store, "r", kind, nth);

        // The new process: the model answers what is asked anew (only
        // the question's answer is asked again when nothing else was
        // stored).
        if kind == "user" {
            script(&server);
        } else {
            server.push(Reply::text("Done: sent."));
        }
        let rec = InMemoryEventList::new();
        let mut agent = agent(&server)
            .add_listener(rec.clone())
            .resume(store.clone(), "r")
            .build()
            .unwrap();
        assert!(agent.interrupted(), "{at}");
        let out = agent.resume_run().unwrap();
        assert_eq!(out.answer.as_deref(), Some("Done: sent."), "{at}");
        let events = main_events(&rec);
        assert_renderable(&events, agent.messages(), &at);
        let kinds: Vec<&str> = events.iter().map(Event::kind).collect();
        // The marker first, counting the replayed events that follow it.
        let Event::Resumed { replayed: n, .. } = &events[0] else {
            panic!("{at}: {kinds:?}");
        };
        assert_eq!(&kinds[1..=*n], replayed, "{at}: {kinds:?}");
        drop(agent);
        let _ = std::fs::remove_dir_all(store.path("r").parent().unwrap());
    }
}

#[test]
fn the_replay_starts_at_the_question_not_at_a_message_injected_mid_turn() {
    let _serial = no_spawn();
    let server = FakeServer::start();
    let store = FileStore::new(temp_dir("resume-injected")).unwrap();
    let q = pikuri::Interloper::new();
    let injecting = {
        let q = q.clone();
        FnTool::new("lookup", "Looks up.", Parameters::empty(), move |_, _| {
            q.inject_user_message("and cc alice").unwrap();
            Ok("value of k".into())
        })
    };
    let build = |lookup: FnTool| {
        let send = FnTool::new("send", "Sends.", Parameters::empty(), |_, _| {
            Ok("sent to bob".into())
        })
        .state_changing();
        Agent::builder(server.transport())
            .system_prompt("You look things up and send them.")
            .add_tool(lookup.idempotent_calls())
            .add_tool(send)
            .interloper(q.clone())
    };
    // Two rounds, the injection delivered between them.
    server.push(Reply::tool_call("lookup", json!({})));
    server.push(Reply::tool_call("send", json!({})));
    server.push(Reply::text("Done: sent."));
    let mut first = build(injecting.clone())
        .journal(store.clone(), "r")
        .build()
        .unwrap();
    first.run_loop(QUESTION).unwrap();
    drop(first);
    cut_after(&store, "r", "tool_result", 1);

    server.push(Reply::text("Done: sent."));
    let rec = InMemoryEventList::new();
    let mut agent = build(injecting)
        .add_listener(rec.clone())
        .resume(store.clone(), "r")
        .build()
        .unwrap();
    agent.resume_run().unwrap();
    let events = main_events(&rec);
    assert_renderable(&events, agent.messages(), "injected");
    assert!(events.iter().any(|e| matches!(e,
        Event::UserTurn { content, mid_loop: true, .. } if content == "and cc alice")));
    drop(agent);
    let _ = std::fs::remove_dir_all(store.path("r").parent().unwrap());
}
