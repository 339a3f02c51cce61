//! Extension hooks, sub-agents, history.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pikuri::extension::{Extension, ExtensionContext};
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Cancellable, Configurator, Error, Event, History, Result, Role};
use serde_json::json;

use crate::util::{agent_with, assert_valid_history, fast_http};

type Log = Arc<Mutex<Vec<String>>>;

struct Recorder {
    log: Log,
    name: &'static str,
}

impl Extension for Recorder {
    fn configure(&mut self, c: &Configurator) -> Result<()> {
        self.log
            .lock()
            .push(format!("{} configure tools={}", self.name, c.tools().len()));
        Ok(())
    }
    fn bind(&mut self, ctx: &ExtensionContext) -> Result<()> {
        self.log
            .lock()
            .push(format!("{} bind id={:?}", self.name, ctx.agent_id()));
        Ok(())
    }
    fn on_user_message(&mut self, ctx: &ExtensionContext, message: &str) {
        self.log
            .lock()
            .push(format!("{} user {message}", self.name));
        ctx.emit_event("recorder.saw", json!({"message": message}), false);
        if self.name == "a" {
            ctx.inject_system_message("<memory-context>likes tea</memory-context>")
                .unwrap();
        }
    }
    fn on_conversation_reset(&mut self, _ctx: &ExtensionContext) {
        self.log.lock().push(format!("{} reset", self.name));
    }
    fn system_prompt_snippets(&self) -> Vec<String> {
        vec![format!("<{}/>", self.name)]
    }
}

#[test]
fn hooks_run_in_order_with_their_arguments() {
    let server = FakeServer::start();
    server.push(Reply::text("ok"));
    let log: Log = Arc::default();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(FnTool::new("t", "t", Parameters::empty(), |_, _| {
            Ok(String::new())
        }))
        .add_extension(Recorder {
            log: log.clone(),
            name: "a",
        })
        .add_extension(Recorder {
            log: log.clone(),
            name: "b",
        })
    });
    assert_eq!(
        agent.system_prompt(),
        "You are a test agent.\n\n<a/>\n\n<b/>"
    );
    agent.run_loop("hello").unwrap();
    agent.clear_conversation();
    assert_eq!(
        *log.lock(),
        vec![
            "a configure tools=1",
            "b configure tools=1",
            "a bind id=\"\"",
            "b bind id=\"\"",
            "a user hello",
            "b user hello",
            "a reset",
            "b reset"
        ]
    );
    // Domain events reach listeners; the system injection lands after the user message.
    assert_eq!(rec.kinds().iter().filter(|k| **k == "domain").count(), 2);
    assert!(rec.kinds().contains(&"system_injected"));
    let msgs = server.chat_requests()[0].messages();
    assert_eq!(msgs[1]["role"], "user");
    assert_eq!(
        msgs[2],
        json!({"role": "system", "content": "<memory-context>likes tea</memory-context>"})
    );
    // Reset is emitted once, before the extensions' reset hooks.
    assert_eq!(rec.kinds().iter().filter(|k| **k == "reset").count(), 1);
    assert!(agent.messages().is_empty());
}

fn lookup(name: &'static str) -> FnTool {
    FnTool::new(
        name,
        "Looks something up.",
        Parameters::builder().required_string("q", "query").build(),
        move |a, _| Ok(format!("{name}: {}", a["q"].as_str().unwrap_or_default())),
    )
}

#[test]
fn sub_agents_get_their_own_tools_ids_and_answers() {
    let server = FakeServer::start();
    // Parent delegates twice in one batch; each child calls `web` then answers.
    server.push(Reply::tool_calls(vec![
        ("agent", json!({"name": "researcher", "task": "find A"})),
        ("agent", json!({"name": "researcher", "task": "find B"})),
    ]));
    server.push(Reply::tool_call("web", json!({"q": "A"})));
    server.push(Reply::text("A is 1"));
    server.push(Reply::tool_call("web", json!({"q": "B"})));
    server.push(Reply::text("B is 2"));
    server.push(Reply::text("A=1, B=2"));
    let (mut agent, rec) = agent_with(&server, |c| {
        c.add_tool(lookup("local"))
            .add_sub_agent_tool(lookup("web"))
            .add_extension(
                SubAgents::new(vec![
                    Persona::new("researcher", "Searches the web.", "You research.", 5)
                        .with_tools(&["web"]),
                ])
                .unwrap(),
            )
    });
    let out = agent.run_loop("find A and B").unwrap();
    assert_eq!(out.answer.as_deref(), Some("A=1, B=2"));
    let reqs = server.chat_requests();
    let mut parent_tools = reqs[0].tool_names();
    parent_tools.sort();
    assert_eq!(
        parent_tools,
        vec!["agent", "local"],
        "sub-agent-only tools never reach the parent"
    );
    assert_eq!(reqs[1].tool_names(), vec!["web"]);
    assert_eq!(reqs[1].messages()[0]["content"], "You research.");
    assert_eq!(reqs[1].messages()[1]["content"], "find A");
    let tool_msgs: Vec<&str> = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(tool_msgs, vec!["A is 1", "B is 2"]);
    let ids: std::collections::BTreeSet<String> =
        rec.events().iter().map(|e| e.agent().to_string()).collect();
    assert!(
        ids.contains("researcher 0") && ids.contains("researcher 1"),
        "{ids:?}"
    );
    assert!(
        rec.events()
            .iter()
            .any(|e| e.agent() == "researcher 1" && e.kind() == "stopped")
    );
}

#[test]
fn a_child_out_of_budget_reports_an_error_observation() {
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "miner", "task": "dig"}),
    ));
    server.push(Reply::tool_call("web", json!({"q": "1"})));
    server.push(Reply::tool_call("web", json!({"q": "2"})));
    server.push(Reply::text("parent answers anyway"));
    let (mut agent, _) = agent_with(&server, |c| {
        c.add_sub_agent_tool(lookup("web")).add_extension(
            SubAgents::new(vec![
                Persona::new("miner", "Digs.", "Dig.", 1).with_tools(&["web"]),
            ])
            .unwrap(),
        )
    });
    agent.run_loop("go").unwrap();
    let obs = agent
        .messages()
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert!(
        obs.content
            .starts_with("Error: sub-agent miner 0 stopped: step limit of 1"),
        "{}",
        obs.content
    );
}

#[test]
fn cancel_during_a_childs_stream_stops_the_tree() {
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "slow", "task": "wait"}),
    ));
    server.push(Reply::text("never completes").hang_after(1));
    let cancel = Cancellable::new();
    let (mut agent, rec) = agent_with(&server, |c| {
        c.streaming(true).cancellable(cancel.clone()).add_extension(
            SubAgents::new(vec![Persona::new("slow", "Slow.", "Be slow.", 3)]).unwrap(),
        )
    });
    let c2 = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c2.cancel();
    });
    assert!(agent.run_loop("go").unwrap_err().is_cancelled());
    t.join().unwrap();
    assert!(
        rec.events()
            .iter()
            .any(|e| e.agent() == "slow 0" && e.kind() == "cancelled")
    );
    assert!(
        rec.events()
            .iter()
            .any(|e| e.agent().is_empty() && e.kind() == "cancelled")
    );
    assert_valid_history(agent.messages());
}

#[test]
fn persona_validation_fails_the_build() {
    let server = FakeServer::start();
    let err = Agent::builder(server.transport())
        .add_extension(
            SubAgents::new(vec![
                Persona::new("p", "d", "s", 2).with_tools(&["missing"]),
            ])
            .unwrap(),
        )
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("unknown tool `missing`"), "{err}");
    let dup = SubAgents::new(vec![
        Persona::new("p", "d", "s", 2),
        Persona::new("p", "d", "s", 2),
    ]);
    assert!(matches!(dup, Err(Error::InvalidInput(_))));
}

#[test]
fn history_round_trip_gives_an_identical_next_request() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("local", json!({"q": "x"})).with_usage(100, 7));
    server.push(Reply::text("answer").with_usage(120, 9));
    server.push(Reply::text("follow-up"));
    server.push(Reply::text("follow-up"));
    let (mut a, _) = agent_with(&server, |c| c.add_tool(lookup("local")));
    a.run_loop("question").unwrap();
    let json = a.export_history().to_json();
    let parsed = History::parse(&json).unwrap();
    assert_eq!(parsed, a.export_history());

    let (mut b, rec) = agent_with(&server, |c| c.add_tool(lookup("local")));
    b.load_history(parsed).unwrap();
    let kinds = rec.kinds();
    let reset = kinds.iter().position(|k| *k == "reset").unwrap();
    assert_eq!(kinds[reset + 1], "history_loaded");
    assert!(rec.events().iter().any(|e| matches!(e, Event::HistoryLoaded { messages: 4, tokens: Some(t), .. } if t.output == Some(9))));
    a.run_loop("more").unwrap();
    b.run_loop("more").unwrap();
    let reqs = server.chat_requests();
    assert_eq!(reqs[2].body, reqs[3].body);
}

#[test]
fn corrupt_history_is_a_typed_error() {
    for bad in [
        "",
        "{",
        "[]",
        r#"{"version":3,"messages":[]}"#,
        r#"{"version":1,"messages":[{"role":"tool","content":"x","tool_call_id":"nope"}]}"#,
        r#"{"version":1,"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"a","name":"t","arguments":"{}"}]},{"role":"user","content":"hi"}]}"#,
    ] {
        assert!(
            matches!(History::parse(bad), Err(Error::History(_))),
            "accepted {bad:?}"
        );
    }
    let _ = fast_http();
}
