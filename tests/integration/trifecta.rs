//! The lethal-trifecta rule and the bundled personas.

use pikuri::builtin;
use pikuri::extension::{Extension, ExtensionContext};
use pikuri::listeners::InMemoryEventList;
use pikuri::subagent::{Persona, SubAgents};
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters, TrifectaPolicy};
use pikuri::{Agent, Error, Event, Tool};
use serde_json::json;

use crate::util::assert_valid_history;

fn warnings(rec: &InMemoryEventList) -> Vec<(String, serde_json::Value)> {
    rec.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Domain {
                agent,
                name,
                payload,
                ..
            } if name == "trifecta.warning" => Some((agent.to_string(), payload)),
            _ => None,
        })
        .collect()
}

#[test]
fn built_in_tools_declare_their_legs() {
    assert!(builtin::fetch().reaches_network());
    assert!(builtin::web_scrape().reaches_network());
    assert!(builtin::read_file(".").reads_private_data());
    assert!(builtin::list_dir(".").reads_private_data());
    assert!(!builtin::calculator().reaches_network());
    assert!(!builtin::calculator().reads_private_data());
    // A shared tool keeps its declaration.
    let shared: std::sync::Arc<dyn Tool> = std::sync::Arc::new(builtin::fetch());
    assert!(shared.reaches_network());
}

#[test]
fn warn_is_the_default_and_names_the_tools() {
    let server = FakeServer::start();
    let rec = InMemoryEventList::new();
    let agent = Agent::builder(server.transport())
        .add_listener(rec.clone())
        .add_tool(builtin::read_file("."))
        .add_tool(builtin::fetch())
        .add_tool(builtin::calculator())
        .build()
        .expect("warn builds");
    let w = warnings(&rec);
    assert_eq!(w.len(), 1, "{:?}", rec.kinds());
    assert_eq!(
        w[0].1,
        json!({"network": ["fetch"], "private_data": ["read_file"]})
    );
    drop(agent);
}

#[test]
fn one_leg_alone_or_allow_says_nothing() {
    let server = FakeServer::start();
    let one_leg: [std::sync::Arc<dyn Tool>; 2] = [
        std::sync::Arc::new(builtin::read_file(".")),
        std::sync::Arc::new(builtin::fetch()),
    ];
    for tool in one_leg {
        let rec = InMemoryEventList::new();
        let b = Agent::builder(server.transport())
            .add_listener(rec.clone())
            .add_tool(tool);
        let _agent = b
            .trifecta(TrifectaPolicy::Refuse)
            .build()
            .expect("one leg builds");
        assert!(warnings(&rec).is_empty());
    }
    let rec = InMemoryEventList::new();
    let _agent = Agent::builder(server.transport())
        .add_listener(rec.clone())
        .add_tool(builtin::read_file("."))
        .add_tool(builtin::fetch())
        .trifecta(TrifectaPolicy::Allow)
        .build()
        .expect("allow builds");
    assert!(warnings(&rec).is_empty());
}

#[test]
fn refuse_fails_the_build_and_the_pools_are_the_answer() {
    let server = FakeServer::start();
    let egress = FnTool::new(
        "post",
        "Posts.",
        Parameters::empty(),
        |_, _| Ok("ok".into()),
    )
    .reaching_network();
    let secrets = FnTool::new("secrets", "Reads.", Parameters::empty(), |_, _| {
        Ok("s".into())
    })
    .reading_private_data();
    let err = Agent::builder(server.transport())
        .add_tool(egress.clone())
        .add_tool(secrets.clone())
        .trifecta(TrifectaPolicy::Refuse)
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains("post") && err.to_string().contains("secrets"));

    // Network tool only in the sub-agent pool: the parent passes, and a
    // persona that names only it passes too.
    let _agent = Agent::builder(server.transport())
        .add_tool(secrets)
        .add_sub_agent_tool(egress)
        .add_extension(
            SubAgents::new(vec![
                Persona::new("web", "Posts.", "You post.", 2).with_tools(&["post"]),
            ])
            .unwrap(),
        )
        .trifecta(TrifectaPolicy::Refuse)
        .build()
        .expect("split pools build");
}

/// Issue 28 class 10: under `Refuse`, a persona holding both legs fails the
/// build, naming the persona and the tools (it built, and failed only when
/// the model delegated). Under `Warn` it builds.
#[test]
fn refuse_checks_every_persona_at_build() {
    let server = FakeServer::start();
    let build = |policy| {
        Agent::builder(server.transport())
            .add_sub_agent_tool(builtin::read_file("."))
            .add_sub_agent_tool(builtin::fetch())
            .add_extension(
                SubAgents::new(vec![
                    Persona::new("web", "Web.", "p", 2).with_tools(&["fetch"]),
                    Persona::new("both", "Both.", "p", 2).with_tools(&["read_file", "fetch"]),
                ])
                .unwrap(),
            )
            .trifecta(policy)
            .build()
    };
    let err = build(TrifectaPolicy::Refuse).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("lethal trifecta"), "{text}");
    assert!(text.contains("persona `both`"), "{text}");
    assert!(
        text.contains("fetch") && text.contains("read_file"),
        "{text}"
    );
    assert!(!text.contains("persona `web`"), "{text}");
    assert!(build(TrifectaPolicy::Warn).is_ok());
    assert!(server.chat_requests().is_empty());
}

/// An extension that keeps its context, to change the pools after build.
struct Keep(std::sync::Arc<parking_lot::Mutex<Option<ExtensionContext>>>);

impl Extension for Keep {
    fn bind(&mut self, ctx: &ExtensionContext) -> pikuri::Result<()> {
        *self.0.lock() = Some(ctx.clone());
        Ok(())
    }
}

/// A pool may change at run time (an MCP server's tool list): a child is
/// checked again, with the parent's policy, when it is spawned.
#[test]
fn a_child_holding_both_legs_is_checked_with_the_parents_policy() {
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "both", "task": "t"}),
    ));
    server.push(Reply::text("the child could not start"));
    let rec = InMemoryEventList::new();
    let notes = || {
        FnTool::new(
            "notes",
            "Notes.",
            Parameters::empty(),
            |_, _| Ok("n".into()),
        )
    };
    let slot = std::sync::Arc::new(parking_lot::Mutex::new(None));
    let mut agent = Agent::builder(server.transport())
        .add_listener(rec.clone())
        .add_sub_agent_tool(notes())
        .add_sub_agent_tool(builtin::fetch())
        .add_extension(
            SubAgents::new(vec![
                Persona::new("both", "Both.", "p", 2).with_tools(&["notes", "fetch"]),
            ])
            .unwrap(),
        )
        .add_extension(Keep(std::sync::Arc::clone(&slot)))
        .trifecta(TrifectaPolicy::Refuse)
        .build()
        .expect("no persona holds both legs yet");
    // After build, `notes` becomes a private-data tool.
    let ctx = slot.lock().clone().unwrap();
    assert!(ctx.remove_tool("notes"));
    ctx.add_sub_agent_tool(std::sync::Arc::new(notes().reading_private_data()))
        .unwrap();
    agent.run_loop("go").unwrap();
    let tool_msg = &agent.messages()[2];
    assert!(
        tool_msg.content.contains("lethal trifecta"),
        "{}",
        tool_msg.content
    );
    assert_eq!(
        server.chat_requests().len(),
        2,
        "the child never sent a request"
    );
    assert_valid_history(agent.messages());
}

#[test]
fn bundled_personas_run_as_sub_agents() {
    let dir = std::env::temp_dir().join(format!("pikuri-miner-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "the key is under the mat").unwrap();
    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "agent",
        json!({"name": "file_miner", "task": "where is the key?"}),
    ));
    server.push(Reply::tool_call("read_file", json!({"path": "notes.txt"}))); // the child
    server.push(Reply::text("notes.txt says: under the mat")); // the child's answer
    server.push(Reply::text("Under the mat."));
    let mut agent = Agent::builder(server.transport())
        .add_sub_agent_tool(builtin::read_file(&dir))
        .add_sub_agent_tool(builtin::list_dir(&dir))
        .add_sub_agent_tool(builtin::web_scrape())
        .add_sub_agent_tool(builtin::fetch())
        .add_extension(
            SubAgents::new(vec![
                Persona::researcher().with_tools(&["web_scrape", "fetch"]),
                Persona::file_miner(),
            ])
            .unwrap(),
        )
        .trifecta(TrifectaPolicy::Refuse)
        .build()
        .unwrap();
    let out = agent.run_loop("Where is the key?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("Under the mat."));
    let reqs = server.chat_requests();
    // The child's first request offers exactly the miner's tools.
    assert_eq!(reqs[1].tool_names(), ["read_file", "list_dir"]);
    // The child read the real file.
    assert!(
        reqs[2].messages().last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("under the mat")
    );
    assert_valid_history(agent.messages());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A typed tool declares its legs like a closure tool: the trifecta check
/// sees them, and so does an approver that asks about state changes only.
#[test]
fn typed_tools_declare_their_legs_too() {
    use pikuri::ToolContext;
    use pikuri::approval::{ApprovalRequest, Decision, StateChangingOnly};
    use pikuri::tool::TypedTool;
    pikuri::tool::schema_type! {
        /// A target.
        struct Target {
            path: String,
        }
    }
    let server = FakeServer::start();
    let upload = TypedTool::new("upload", "Uploads.", |t: Target, _cx: &ToolContext| {
        Ok(t.path)
    })
    .reaching_network();
    let err = Agent::builder(server.transport())
        .add_tool(builtin::read_file("."))
        .add_tool(upload)
        .trifecta(TrifectaPolicy::Refuse)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("upload"), "{err}");

    server.push(Reply::tool_call("rm", json!({"path": "a"})));
    server.push(Reply::text("not allowed"));
    let rm = TypedTool::new("rm", "Deletes.", |t: Target, _cx: &ToolContext| Ok(t.path))
        .state_changing();
    let mut agent = Agent::builder(server.transport())
        .add_tool(rm)
        .approver(StateChangingOnly::new(|_: &ApprovalRequest| {
            Decision::deny("no")
        }))
        .build()
        .unwrap();
    agent.run_loop("delete a").unwrap();
    assert!(
        agent.messages()[2].content.contains("denied: no"),
        "{}",
        agent.messages()[2].content
    );
}
