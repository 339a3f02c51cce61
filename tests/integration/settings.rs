//! Issue 36: typed model settings. Every setting on every API against a
//! strict `FakeServer`, asserting the API's own field in the recorded body;
//! the agent's settings over the transport's; a raw request field over a
//! typed setting; a setting an API has no field for fails before sending.

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Api, ChatTransport, ErrorKind, ModelSettings, ReasoningEffort, ToolChoice};
use serde_json::{Value, json};

use crate::util::{fast_http, strict_server};

fn echo() -> FnTool {
    FnTool::new(
        "echo",
        "Echoes its text.",
        Parameters::builder()
            .required_string("text", "what to echo")
            .build(),
        |args, _| Ok(args["text"].as_str().unwrap_or("").to_string()),
    )
}

/// The body of the one model request an agent on `transport` (with
/// `agent_settings` and the `echo` tool) sends for one turn; the strict
/// server must accept it.
fn sent(
    server: &FakeServer,
    transport: ChatTransport,
    agent_settings: ModelSettings,
    fields: &[(&str, Value)],
) -> Value {
    server.push(Reply::text("ok"));
    let mut cfg = Agent::builder(transport)
        .http(fast_http().with_max_retries(0))
        .settings(agent_settings)
        .add_tool(echo());
    for (k, v) in fields {
        cfg = cfg.request_field(*k, v.clone());
    }
    let mut agent = cfg.build().expect("agent builds");
    let outcome = agent.run_loop("hi");
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    assert_eq!(outcome.expect("turn").answer.as_deref(), Some("ok"));
    server.chat_requests().last().unwrap().body.clone().unwrap()
}

fn all_but_unsupported(choice: ToolChoice) -> ModelSettings {
    ModelSettings::new()
        .with_temperature(0.25)
        .with_top_p(0.5)
        .with_max_output_tokens(77)
        .with_tool_choice(choice)
        .with_parallel_tool_calls(false)
        .with_reasoning_effort(ReasoningEffort::Low)
}

#[test]
fn every_setting_on_chat_completions() {
    let server = strict_server();
    let s = all_but_unsupported(ToolChoice::Required)
        .with_stop(["END", "STOP"])
        .with_seed(42);
    let b = sent(&server, server.transport(), s, &[]);
    assert_eq!(b["temperature"], 0.25);
    assert_eq!(b["top_p"], 0.5);
    // Not OpenAI's own API base: `max_tokens`, which local servers read.
    assert_eq!(b["max_tokens"], 77);
    assert!(b.get("max_completion_tokens").is_none(), "{b}");
    assert_eq!(b["stop"], json!(["END", "STOP"]));
    assert_eq!(b["seed"], 42);
    assert_eq!(b["tool_choice"], "required");
    assert_eq!(b["parallel_tool_calls"], false);
    assert_eq!(b["reasoning_effort"], "low");
    // A named tool.
    let named = ModelSettings::new().with_tool_choice(ToolChoice::Tool("echo".into()));
    let b = sent(&server, server.transport(), named, &[]);
    assert_eq!(
        b["tool_choice"],
        json!({"type": "function", "function": {"name": "echo"}})
    );
}

#[test]
fn every_setting_on_anthropic() {
    let server = strict_server();
    let t = server.transport().with_api(Api::AnthropicMessages);
    let s = all_but_unsupported(ToolChoice::Required).with_stop(["END"]);
    let b = sent(&server, t.clone(), s, &[]);
    assert_eq!(b["temperature"], 0.25);
    assert_eq!(b["top_p"], 0.5);
    assert_eq!(b["max_tokens"], 77);
    assert_eq!(b["stop_sequences"], json!(["END"]));
    assert_eq!(
        b["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    assert_eq!(b["output_config"], json!({"effort": "low"}));
    // Thinking, with what Anthropic allows beside it (no forced tool, a
    // temperature of 1).
    let s = ModelSettings::new()
        .with_thinking_budget(2048)
        .with_max_output_tokens(4000)
        .with_temperature(1.0);
    let b = sent(&server, t.clone(), s, &[]);
    assert_eq!(b["max_tokens"], 4000);
    assert_eq!(
        b["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    // A thinking budget alone raises the default `max_tokens` above it.
    let b = sent(
        &server,
        t.clone(),
        ModelSettings::new().with_thinking_budget(8000),
        &[],
    );
    assert_eq!(b["max_tokens"], 8000 + 4096);
    // No setting: the default 4096, no tool choice.
    let b = sent(&server, t.clone(), ModelSettings::new(), &[]);
    assert_eq!(b["max_tokens"], 4096);
    assert!(b.get("tool_choice").is_none(), "{b}");
    // Each choice in Anthropic's words; parallel calls off alone is `auto`
    // with the flag.
    for (choice, want) in [
        (ToolChoice::Auto, json!({"type": "auto"})),
        (ToolChoice::None, json!({"type": "none"})),
        (
            ToolChoice::Tool("echo".into()),
            json!({"type": "tool", "name": "echo"}),
        ),
    ] {
        let b = sent(
            &server,
            t.clone(),
            ModelSettings::new().with_tool_choice(choice),
            &[],
        );
        assert_eq!(b["tool_choice"], want);
    }
    let b = sent(
        &server,
        t,
        ModelSettings::new().with_parallel_tool_calls(false),
        &[],
    );
    assert_eq!(
        b["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
}

#[test]
fn every_setting_on_responses() {
    let server = strict_server();
    let t = server.transport().with_api(Api::OpenAiResponses);
    let s = all_but_unsupported(ToolChoice::Tool("echo".into()));
    let b = sent(&server, t.clone(), s, &[]);
    assert_eq!(b["temperature"], 0.25);
    assert_eq!(b["top_p"], 0.5);
    assert_eq!(b["max_output_tokens"], 77);
    assert_eq!(
        b["tool_choice"],
        json!({"type": "function", "name": "echo"})
    );
    assert_eq!(b["parallel_tool_calls"], false);
    assert_eq!(b["reasoning"], json!({"effort": "low"}));
    let b = sent(
        &server,
        t,
        ModelSettings::new().with_tool_choice(ToolChoice::None),
        &[],
    );
    assert_eq!(b["tool_choice"], "none");
}

#[test]
fn a_setting_the_api_has_no_field_for_fails_before_sending() {
    let server = strict_server();
    for (api, settings, name) in [
        (
            Api::OpenAiResponses,
            ModelSettings::new().with_seed(1),
            "seed",
        ),
        (
            Api::OpenAiResponses,
            ModelSettings::new().with_stop(["x"]),
            "stop",
        ),
        (
            Api::AnthropicMessages,
            ModelSettings::new().with_seed(1),
            "seed",
        ),
        (
            Api::ChatCompletions,
            ModelSettings::new().with_thinking_budget(2048),
            "thinking_budget",
        ),
        // JSON has no NaN: not sent as `null`.
        (
            Api::ChatCompletions,
            ModelSettings::new().with_temperature(f64::NAN),
            "temperature",
        ),
        (
            Api::OpenAiResponses,
            ModelSettings::new().with_top_p(f64::NEG_INFINITY),
            "top_p",
        ),
    ] {
        let mut agent = Agent::builder(server.transport().with_api(api))
            .settings(settings)
            .build()
            .unwrap();
        let err = agent.run_loop("hi").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{api:?}: {err}");
        assert!(err.to_string().contains(&format!("`{name}`")), "{err}");
    }
    assert!(server.chat_requests().is_empty(), "nothing was sent");
}

#[test]
fn the_agents_settings_override_the_transports_field_by_field() {
    let server = strict_server();
    let t = server.transport().with_settings(
        ModelSettings::new()
            .with_temperature(0.9)
            .with_seed(5)
            .with_max_output_tokens(10),
    );
    let b = sent(
        &server,
        t.clone(),
        ModelSettings::new()
            .with_temperature(0.0)
            .with_max_output_tokens(20),
        &[],
    );
    assert_eq!(b["temperature"], 0.0);
    assert_eq!(b["max_tokens"], 20);
    assert_eq!(b["seed"], 5);
    // A switch to another transport brings that transport's settings; the
    // agent's still win.
    server.push(Reply::text("one"));
    server.push(Reply::text("two"));
    let mut agent = Agent::builder(t)
        .settings(ModelSettings::new().with_temperature(0.0))
        .build()
        .unwrap();
    agent.run_loop("a").unwrap();
    let other = server
        .transport()
        .with_settings(ModelSettings::new().with_temperature(1.5).with_seed(9));
    agent.run_loop_with("b", other).unwrap();
    let bodies: Vec<Value> = server
        .chat_requests()
        .iter()
        .rev()
        .take(2)
        .map(|r| r.body.clone().unwrap())
        .collect();
    assert_eq!(bodies[0]["seed"], 9);
    assert_eq!(bodies[0]["temperature"], 0.0);
    assert!(bodies[0].get("max_tokens").is_none(), "{}", bodies[0]);
    assert_eq!(bodies[1]["seed"], 5);
}

#[test]
fn a_request_field_overrides_a_typed_setting_on_every_api() {
    for (api, field) in [
        (Api::ChatCompletions, "max_tokens"),
        (Api::AnthropicMessages, "max_tokens"),
        (Api::OpenAiResponses, "max_output_tokens"),
    ] {
        let server = strict_server();
        let b = sent(
            &server,
            server.transport().with_api(api),
            ModelSettings::new()
                .with_max_output_tokens(50)
                .with_temperature(0.5),
            &[(field, json!(99)), ("temperature", json!(0.1))],
        );
        assert_eq!(b[field], 99, "{api:?}");
        assert_eq!(b["temperature"], 0.1, "{api:?}");
        let raw = server.chat_requests()[0].raw_body.clone();
        assert_eq!(raw.matches(&format!("\"{field}\"")).count(), 1, "{raw}");
    }
}

#[test]
fn request_fields_are_the_apis_own_and_never_translated() {
    // Before issue 36 the Responses encoder turned chat completions'
    // `max_tokens` into `max_output_tokens`; now a raw field goes as
    // given, so strict Responses rejects the chat name.
    let server = strict_server();
    server.push(Reply::text("ok"));
    let mut agent = Agent::builder(server.transport().with_api(Api::OpenAiResponses))
        .http(fast_http().with_max_retries(0))
        .request_field("max_tokens", json!(64))
        .build()
        .unwrap();
    assert!(agent.run_loop("hi").is_err());
    let b = server.chat_requests()[0].body.clone().unwrap();
    assert_eq!(b["max_tokens"], 64);
    assert!(b.get("max_output_tokens").is_none(), "{b}");
}

#[test]
fn tool_steering_is_left_out_without_tools() {
    for api in [
        Api::ChatCompletions,
        Api::AnthropicMessages,
        Api::OpenAiResponses,
    ] {
        let server = strict_server();
        server.push(Reply::text("ok"));
        let mut agent = Agent::builder(server.transport().with_api(api))
            .settings(
                ModelSettings::new()
                    .with_tool_choice(ToolChoice::Required)
                    .with_parallel_tool_calls(false),
            )
            // A raw field of that name too (a helper child inherits it).
            .request_field("tool_choice", json!("auto"))
            .build()
            .unwrap();
        agent.run_loop("hi").unwrap();
        let b = server.chat_requests()[0].body.clone().unwrap();
        assert!(b.get("tool_choice").is_none(), "{api:?}: {b}");
        assert!(b.get("parallel_tool_calls").is_none(), "{api:?}: {b}");
    }
}

#[test]
fn a_tool_less_helper_inherits_the_settings_but_not_the_tool_steering() {
    use pikuri::{OnExhausted, StepLimit, StopReason};
    for api in [
        Api::ChatCompletions,
        Api::AnthropicMessages,
        Api::OpenAiResponses,
    ] {
        let server = strict_server();
        server.push(Reply::tool_call("echo", json!({"text": "a"})));
        server.push(Reply::tool_call("echo", json!({"text": "b"})));
        server.push(Reply::text("Synthesized."));
        let mut agent = Agent::builder(server.transport().with_api(api))
            .http(fast_http().with_max_retries(0))
            .add_tool(echo())
            .step_limit(StepLimit::with_policy(1, OnExhausted::Synthesize))
            .settings(
                ModelSettings::new()
                    .with_tool_choice(ToolChoice::Required)
                    .with_temperature(0.5),
            )
            .build()
            .unwrap();
        let out = agent.run_loop("go").unwrap();
        assert_eq!(out.stop_reason, StopReason::Synthesized, "{api:?}");
        assert!(server.rejections().is_empty(), "{:?}", server.rejections());
        let requests = server.chat_requests();
        let first = requests[0].body.clone().unwrap();
        assert!(first.get("tool_choice").is_some(), "{api:?}: {first}");
        let synth = requests[2].body.clone().unwrap();
        assert!(synth.get("tool_choice").is_none(), "{api:?}: {synth}");
        assert_eq!(synth["temperature"], 0.5, "{api:?}");
    }
}
