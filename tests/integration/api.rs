//! The shape of the public API: thread-safety bounds and pinned `Debug` /
//! `Display` output.

use std::time::Duration;

use pikuri::listeners::ListenerList;
use pikuri::testing::FakeServer;
use pikuri::{
    Agent, Cancellable, ChatTransport, Error, Event, Interloper, OnExhausted, StepLimit, StopReason,
};

fn send<T: Send>() {}
fn send_sync<T: Send + Sync>() {}

#[test]
fn thread_safety_bounds() {
    send::<Agent>();
    send_sync::<Cancellable>();
    send_sync::<Interloper>();
    send_sync::<StepLimit>();
    send_sync::<Event>();
    send_sync::<Error>();
    send_sync::<ChatTransport>();
    send_sync::<ListenerList>();
    send_sync::<FakeServer>();
    send_sync::<pikuri::extension::ExtensionContext>();
    send_sync::<pikuri::approval::Decision>();
    send_sync::<pikuri::approval::ApprovalRequest>();
    send_sync::<pikuri::approval::PendingApproval>();
    send_sync::<pikuri::approval::TerminalApprover>();
    send_sync::<pikuri::listeners::Subscription>();
    send::<pikuri::listeners::ChannelListener>();
}

#[test]
fn control_display_matches_pikuri() {
    assert_eq!(StepLimit::new(5).to_string(), "StepLimit(max=5)");
    assert_eq!(
        StepLimit::with_policy(5, OnExhausted::Synthesize).to_string(),
        "StepLimit(max=5, on_exhausted=synthesize)"
    );
    let c = Cancellable::new();
    assert_eq!(c.to_string(), "Cancellable(armed)");
    c.cancel();
    assert_eq!(c.to_string(), "Cancellable(cancelled)");
    let q = Interloper::new();
    assert_eq!(q.to_string(), "Interloper");
    q.inject_user_message("a").unwrap();
    q.inject_user_message("b").unwrap();
    q.inject_user_message("c").unwrap();
    assert_eq!(q.to_string(), "Interloper(3 pending)");
}

#[test]
fn error_display_is_short_and_lowercase() {
    let cases = [
        (
            Error::Http {
                status: 429,
                message: "slow down".into(),
                url: "http://h/v1/chat/completions".into(),
            },
            "http status 429 from http://h/v1/chat/completions: slow down",
        ),
        (
            Error::Http {
                status: 500,
                message: String::new(),
                url: "http://h/v1/chat/completions".into(),
            },
            "http status 500 from http://h/v1/chat/completions",
        ),
        (
            Error::Connect {
                url: "http://h/v1/chat/completions".into(),
                source: "Connection refused (os error 111)".into(),
            },
            "cannot connect to http://h/v1/chat/completions: connection refused (os error 111)",
        ),
        (
            Error::Transport {
                url: Some("http://h/v1/chat/completions".into()),
                source: "Connection reset by peer (os error 104)".into(),
            },
            "connection to http://h/v1/chat/completions failed: connection reset by peer (os error 104)",
        ),
        (
            Error::Transport {
                url: None,
                source: "MCP server `fs`: connection closed: exited".into(),
            },
            "transport error: MCP server `fs`: connection closed: exited",
        ),
        (
            Error::Timeout {
                after: Duration::from_millis(1500),
                url: None,
            },
            "timed out after 1500 ms",
        ),
        (
            Error::Timeout {
                after: Duration::from_millis(1500),
                url: Some("http://h/v1/chat/completions".into()),
            },
            "timed out after 1500 ms waiting for http://h/v1/chat/completions",
        ),
        (
            Error::Protocol {
                message: "bad chunk".into(),
                url: None,
            },
            "protocol error: bad chunk",
        ),
        (
            Error::Protocol {
                message: "bad chunk".into(),
                url: Some("http://h/v1/chat/completions".into()),
            },
            "protocol error from http://h/v1/chat/completions: bad chunk",
        ),
        (
            Error::Truncated,
            "stream truncated before the end of the answer",
        ),
        (Error::Cancelled, "cancelled"),
        (
            Error::StepLimitExceeded { max: 3 },
            "step limit of 3 exceeded",
        ),
        (Error::InvalidInput("blank".into()), "invalid input: blank"),
        (Error::History("bad".into()), "invalid history: bad"),
    ];
    for (e, shown) in cases {
        assert_eq!(e.to_string(), shown);
        assert!(!shown.ends_with('.'));
        // No cause beyond what the line says: `Debug` is the same sentence.
        assert_eq!(format!("{e:?}"), shown);
    }
}

#[test]
fn transport_debug_redacts_the_key() {
    let t = ChatTransport::new("m")
        .with_api_base("http://h/v1/")
        .with_api_key("k3y");
    assert_eq!(
        format!("{t:?}"),
        r#"ChatTransport { api: ChatCompletions, model: Some("m"), provider: None, api_base: Some("http://h/v1"), api_key: Some("<redacted>"), context_window: None }"#
    );
    assert_eq!(t.to_string(), "m@http://h/v1");
}

#[test]
fn stop_reasons_are_snake_case() {
    let all = [
        (StopReason::Completed, "completed"),
        (StopReason::Synthesized, "synthesized"),
        (StopReason::StepLimit, "step_limit"),
        (StopReason::Cancelled, "cancelled"),
        (StopReason::Error, "error"),
        (StopReason::ApprovalPending, "approval_pending"),
    ];
    for (r, s) in all {
        assert_eq!(r.to_string(), s);
        assert_eq!(serde_json::to_value(r).unwrap(), s);
    }
}

/// Pins what the mutation pass found unpinned (MUTANTS.md): `Debug` of the
/// controls, `Cancellable::same_as`, `Interloper::peek`.
#[test]
fn control_debug_same_as_and_peek_are_pinned() {
    let c = Cancellable::new();
    assert_eq!(format!("{c:?}"), "Cancellable { cancelled: false }");
    assert!(c.same_as(&c.clone()));
    assert!(!c.same_as(&Cancellable::new()));
    let q = Interloper::new();
    assert_eq!(format!("{q:?}"), "Interloper { pending: 0 }");
    assert!(q.peek().is_empty());
    assert!(!q.is_pending());
    q.inject_user_message("a").unwrap();
    assert!(q.is_pending());
    q.inject_user_message("b").unwrap();
    assert_eq!(q.peek(), ["a", "b"]);
    assert_eq!(q.peek(), ["a", "b"], "peek does not take");
    assert_eq!(format!("{q:?}"), "Interloper { pending: 2 }");
    let limit = StepLimit::new(7);
    assert_eq!(limit.max(), 7);
    assert_eq!(limit.fresh().max(), 7);
    limit.tick().unwrap();
    assert_eq!(
        format!("{limit:?}"),
        "StepLimit { max: 7, on_exhausted: Raise, step: 1 }"
    );
}

/// Every public item, named by its one documented path (issue 27: core types
/// at the root, the rest in namespaces). A move breaks this at compile time;
/// the `compile_fail` doctests in `src/lib.rs` check the old root paths are
/// gone.
#[test]
fn every_item_has_its_documented_path() {
    fn named<T: ?Sized>() -> &'static str {
        std::any::type_name::<T>()
    }
    let root = [
        named::<pikuri::Agent>(),
        named::<pikuri::Configurator>(),
        named::<pikuri::Outcome>(),
        named::<pikuri::History>(),
        named::<pikuri::ChatTransport>(),
        named::<pikuri::HttpConfig>(),
        named::<pikuri::Message>(),
        named::<pikuri::Role>(),
        named::<pikuri::ToolCall>(),
        named::<pikuri::Usage>(),
        named::<pikuri::Event>(),
        named::<pikuri::StopReason>(),
        named::<dyn pikuri::Listener>(),
        named::<dyn pikuri::Tool>(),
        named::<pikuri::ToolContext>(),
        named::<pikuri::ToolError>(),
        named::<pikuri::Cancellable>(),
        named::<pikuri::Interloper>(),
        named::<pikuri::StepLimit>(),
        named::<pikuri::OnExhausted>(),
        named::<pikuri::Error>(),
        named::<pikuri::Result<()>>(),
    ];
    let close_all: fn() -> usize = pikuri::close_all;
    let registration = named::<pikuri::CloseRegistration>();
    let namespaced = [
        named::<pikuri::tool::FnTool>(),
        named::<pikuri::tool::TypedTool>(),
        named::<pikuri::tool::Json<u8>>(),
        named::<dyn pikuri::tool::IntoObservation>(),
        named::<pikuri::tool::Parameters>(),
        named::<pikuri::tool::ParametersBuilder>(),
        named::<pikuri::tool::ItemType>(),
        named::<pikuri::tool::SchemaError>(),
        named::<pikuri::tool::ValidationError>(),
        named::<pikuri::tool::TrifectaPolicy>(),
        named::<dyn pikuri::approval::Approver>(),
        named::<pikuri::approval::ApprovalRequest>(),
        named::<pikuri::approval::Decision>(),
        named::<pikuri::approval::PendingApproval>(),
        named::<pikuri::approval::AutoApprove>(),
        named::<pikuri::approval::StateChangingOnly<pikuri::approval::AutoApprove>>(),
        named::<pikuri::approval::TerminalApprover>(),
        named::<pikuri::compaction::Compaction>(),
        named::<pikuri::compaction::CompactionStrategy>(),
        named::<pikuri::compaction::ToolResultLimit>(),
        named::<pikuri::structured::StructuredOutput>(),
        named::<pikuri::structured::StructuredMode>(),
        named::<pikuri::structured::Typed<u8>>(),
        named::<pikuri::subagent::SubAgents>(),
        named::<pikuri::subagent::Persona>(),
        named::<pikuri::subagent::Synthesizer>(),
        named::<pikuri::subagent::SubAgentListener>(),
        named::<dyn pikuri::extension::Extension>(),
        named::<pikuri::extension::ExtensionContext>(),
        named::<pikuri::listeners::ListenerList>(),
    ];
    pikuri::tool::schema_type! {
        struct Point { x: i64 }
    }
    fn schema<T: pikuri::tool::JsonSchema>(_: &T) {}
    schema(&Point { x: 1 });
    assert!(root.iter().chain(&namespaced).all(|n| !n.is_empty()));
    assert_eq!(root.len() + namespaced.len(), 52);
    assert!(!registration.is_empty());
    let _ = close_all;
    let _: fn(Box<dyn FnOnce() + Send>) -> pikuri::CloseRegistration = pikuri::register_close;
}
