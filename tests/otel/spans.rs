//! The spans of one turn with a tool and a sub-agent, read back from the
//! fake collector: names, nesting, GenAI attributes, usage counted once,
//! headers sent, content only on opt-in.

use pikuri::Listener;
use pikuri::otel::{OtlpConfig, OtlpExporter};
use pikuri::testing::FakeServer;
use serde_json::Value;

use crate::collector::{Answer, Collector, attr, named, run_turn, run_turn_with};

fn by_id<'a>(spans: &'a [Value], id: &Value) -> &'a Value {
    spans
        .iter()
        .find(|s| &s["spanId"] == id)
        .expect("parent span exported")
}

#[test]
fn a_turn_becomes_nested_genai_spans() {
    let collector = Collector::start(Answer::Ok);
    let server = FakeServer::start();
    let model = server.transport().model().unwrap().to_string();
    let config = OtlpConfig::new(collector.url())
        .with_header("x-api-key", "s3cr3t")
        .with_service_name("otel-test")
        .with_resource_attribute("deployment.environment.name", "ci");
    let exporter = OtlpExporter::new(config).with_transport(&server.transport());
    let handle = exporter.handle();
    let outcome = run_turn(&server, exporter);

    let spans = collector.spans();
    assert_eq!(spans.len(), 8, "{spans:#?}");
    assert_eq!(handle.exported_spans(), 8);
    assert_eq!(handle.dropped_spans(), 0);

    // Resource and headers.
    let first = collector.received.lock()[0].clone();
    let resource = &first.body["resourceSpans"][0]["resource"];
    let res = |k: &str| attr(resource, k);
    assert_eq!(res("service.name").as_deref(), Some("otel-test"));
    assert_eq!(res("deployment.environment.name").as_deref(), Some("ci"));
    assert_eq!(res("telemetry.sdk.language").as_deref(), Some("rust"));
    assert!(
        first
            .headers
            .contains(&("x-api-key".into(), "s3cr3t".into()))
    );
    assert!(
        first
            .headers
            .contains(&("content-type".into(), "application/json".into()))
    );

    // The tree: main → execute_tool agent → invoke_agent clerk 0 → execute_tool add.
    let main = named(&spans, "invoke_agent agent");
    assert_eq!(main.len(), 1);
    let main = main[0];
    assert!(main.get("parentSpanId").is_none());
    assert_eq!(
        attr(main, "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(
        attr(main, "pikuri.stop_reason").as_deref(),
        Some("completed")
    );
    assert_eq!(main["status"]["code"], 0);
    let delegate = named(&spans, "execute_tool agent")[0];
    assert_eq!(delegate["parentSpanId"], main["spanId"]);
    assert_eq!(
        attr(delegate, "gen_ai.tool.type").as_deref(),
        Some("function")
    );
    assert!(attr(delegate, "gen_ai.tool.call.id").is_some());
    // Content is opt-in.
    assert_eq!(attr(delegate, "gen_ai.tool.call.arguments"), None);
    assert_eq!(attr(delegate, "gen_ai.tool.call.result"), None);
    let clerk = named(&spans, "invoke_agent clerk 0")[0];
    assert_eq!(clerk["parentSpanId"], delegate["spanId"]);
    assert_eq!(attr(clerk, "gen_ai.agent.name").as_deref(), Some("clerk 0"));
    let add = named(&spans, "execute_tool add")[0];
    assert_eq!(add["parentSpanId"], clerk["spanId"]);
    for s in &spans {
        assert_eq!(s["traceId"], main["traceId"], "one trace");
        assert_eq!(
            attr(s, "gen_ai.conversation.id"),
            attr(main, "gen_ai.conversation.id")
        );
    }

    check_chats(&spans, main, clerk, &model);

    // No double counting: usage only on chat spans, and their sum is the
    // run's total (cached tokens are part of the input, as the conventions
    // count them).
    let sum = |key: &str| -> u64 {
        spans
            .iter()
            .filter_map(|s| attr(s, key))
            .map(|v| v.parse::<u64>().unwrap())
            .sum()
    };
    for s in &spans {
        if !s["name"].as_str().unwrap().starts_with("chat") {
            assert_eq!(attr(s, "gen_ai.usage.input_tokens"), None, "{}", s["name"]);
        }
    }
    let u = outcome.usage;
    assert_eq!(
        sum("gen_ai.usage.input_tokens"),
        u.input.unwrap_or(0) + u.cached.unwrap_or(0) + u.cache_creation.unwrap_or(0)
    );
    assert_eq!(sum("gen_ai.usage.input_tokens"), 330);
    assert_eq!(sum("gen_ai.usage.output_tokens"), u.output.unwrap());

    check_metrics(&collector, u.output.unwrap());
}

/// The metrics of the scripted turn's requests: one body, the token sums
/// those of the chat spans (counted once too).
fn check_metrics(collector: &Collector, output: u64) {
    assert_eq!(collector.requests("/v1/metrics"), 1);
    let m = collector
        .received
        .lock()
        .iter()
        .find(|r| r.path == "/v1/metrics")
        .unwrap()
        .body
        .clone();
    let metrics = &m["resourceMetrics"][0]["scopeMetrics"][0]["metrics"];
    let metric = |name: &str| {
        metrics
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {m}"))
            .clone()
    };
    let duration = metric("gen_ai.client.operation.duration");
    assert_eq!(duration["unit"], "s");
    assert_eq!(duration["histogram"]["dataPoints"][0]["count"], "4");
    let tokens = metric("gen_ai.client.token.usage");
    let points = tokens["histogram"]["dataPoints"].as_array().unwrap();
    let total = |kind: &str| -> f64 {
        points
            .iter()
            .filter(|p| attr(p, "gen_ai.token.type").as_deref() == Some(kind))
            .map(|p| p["sum"].as_f64().unwrap())
            .sum()
    };
    assert!((total("input") - 330.0).abs() < 0.5);
    assert!((total("output") - output as f64).abs() < 0.5);
}

/// The four chat spans of the scripted turn: two under the main agent, two
/// under the clerk, each with the request and response attributes.
fn check_chats(spans: &[Value], main: &Value, clerk: &Value, model: &str) {
    let chats = named(spans, &format!("chat {model}"));
    assert_eq!(chats.len(), 4);
    let under = |p: &Value| {
        chats
            .iter()
            .filter(|c| c["parentSpanId"] == p["spanId"])
            .count()
    };
    assert_eq!((under(main), under(clerk)), (2, 2));
    let finish: Vec<_> = chats
        .iter()
        .map(|c| attr(c, "gen_ai.response.finish_reasons").unwrap())
        .collect();
    assert_eq!(finish.iter().filter(|f| *f == "tool_calls").count(), 2);
    assert_eq!(finish.iter().filter(|f| *f == "stop").count(), 2);
    for c in &chats {
        assert_eq!(c["kind"], 3, "CLIENT");
        assert_eq!(attr(c, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(attr(c, "gen_ai.request.model").as_deref(), Some(model));
        assert_eq!(attr(c, "gen_ai.provider.name").as_deref(), Some("openai"));
        assert_eq!(attr(c, "server.address").as_deref(), Some("127.0.0.1"));
        assert!(attr(c, "server.port").is_some());
        assert!(attr(c, "gen_ai.response.model").is_some());
        let id = attr(c, "gen_ai.response.id").expect("gen_ai.response.id");
        assert!(id.starts_with("chatcmpl-fake-"), "{id}");
        assert!(
            c["startTimeUnixNano"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
                > 0
        );
        let parent = by_id(spans, &c["parentSpanId"]);
        assert!(parent["name"].as_str().unwrap().starts_with("invoke_agent"));
    }
    let cached: Vec<_> = chats
        .iter()
        .filter_map(|c| attr(c, "gen_ai.usage.cache_read.input_tokens"))
        .collect();
    assert_eq!(cached, ["20"]);
}

#[test]
fn content_is_recorded_on_opt_in() {
    let collector = Collector::start(Answer::Ok);
    let server = FakeServer::start();
    let config = OtlpConfig::new(collector.url()).with_capture_content(true);
    run_turn(&server, OtlpExporter::new(config));
    let spans = collector.spans();
    let add = named(&spans, "execute_tool add")[0];
    assert_eq!(
        attr(add, "gen_ai.tool.call.arguments").as_deref(),
        Some(r#"{"a":2,"b":3}"#)
    );
    assert_eq!(attr(add, "gen_ai.tool.call.result").as_deref(), Some("5"));
}

#[test]
fn a_host_parent_is_continued() {
    let collector = Collector::start(Answer::Ok);
    let server = FakeServer::start();
    let exporter = OtlpExporter::new(OtlpConfig::new(collector.url()));
    let handle = exporter.handle();
    assert!(handle.set_parent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
    // A header sent before the turn's first event names the span the turn gets.
    let before = handle.traceparent();
    run_turn(&server, exporter);
    let spans = collector.spans();
    let main = named(&spans, "invoke_agent agent")[0];
    assert_eq!(main["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(main["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(
        before,
        format!(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01",
            main["spanId"].as_str().unwrap()
        )
    );
    assert!(spans.iter().all(|s| s["traceId"] == main["traceId"]));
}

#[test]
fn status_is_honest_for_a_failed_run() {
    use pikuri::testing::Reply;
    let collector = Collector::start(Answer::Ok);
    let server = FakeServer::start();
    server.push(Reply::status(400, "bad request"));
    let mut exporter = OtlpExporter::new(OtlpConfig::new(collector.url()));
    // Record a failing turn's events, then feed them to the exporter.
    let events = pikuri::listeners::InMemoryEventList::new();
    let mut agent = pikuri::Agent::builder(server.transport())
        .add_listener(events.clone())
        .build()
        .unwrap();
    assert!(agent.run_loop("hi").is_err());
    agent.close();
    for e in events.events() {
        exporter.on_event(&e);
    }
    exporter.close();
    let spans = collector.spans();
    let main = named(&spans, "invoke_agent agent")[0];
    assert_eq!(main["status"]["code"], 2);
    assert_eq!(attr(main, "error.type").as_deref(), Some("error"));
    let chat = spans
        .iter()
        .find(|s| s["name"].as_str().unwrap().starts_with("chat"))
        .unwrap();
    assert_eq!(chat["status"]["code"], 2);
    assert!(attr(chat, "error.type").is_some());
}

#[test]
fn model_requests_carry_the_turns_traceparent_on_opt_in() {
    let collector = Collector::start(Answer::Ok);
    let server = FakeServer::start();
    let exporter = OtlpExporter::new(OtlpConfig::new(collector.url()));
    let handle = exporter.handle();
    run_turn_with(&server, exporter, move |c| {
        c.traceparent(move || Some(handle.traceparent()))
    });
    let spans = collector.spans();
    let main = named(&spans, "invoke_agent agent")[0];
    let want = format!(
        "00-{}-{}-01",
        main["traceId"].as_str().unwrap(),
        main["spanId"].as_str().unwrap()
    );
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 4);
    // The sub-agent's requests too: the source is inherited.
    for r in &requests {
        assert_eq!(r.header("traceparent"), Some(want.as_str()));
    }

    // Without the switch, no header.
    let server = FakeServer::start();
    run_turn(&server, OtlpExporter::new(OtlpConfig::new(collector.url())));
    assert!(
        server
            .chat_requests()
            .iter()
            .all(|r| r.header("traceparent").is_none())
    );
}

#[test]
fn a_streamed_request_records_its_time_to_first_chunk() {
    use pikuri::testing::Reply;
    let collector = Collector::start(Answer::Ok);
    let server = FakeServer::start();
    server.push(Reply::text("a streamed answer").with_usage(5, 3));
    let exporter = OtlpExporter::new(OtlpConfig::new(collector.url()));
    let mut agent = pikuri::Agent::builder(server.transport())
        .streaming(true)
        .add_listener(exporter)
        .build()
        .unwrap();
    agent.run_loop("hi").unwrap();
    agent.close();
    let spans = collector.spans();
    let chat = spans
        .iter()
        .find(|s| s["name"].as_str().unwrap().starts_with("chat"))
        .unwrap();
    assert_eq!(attr(chat, "gen_ai.request.stream").as_deref(), Some("true"));
    let ttfc = chat["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == "gen_ai.response.time_to_first_chunk")
        .expect("time to first chunk");
    assert!(ttfc["value"]["doubleValue"].as_f64().unwrap() >= 0.0);
}

/// The chat spans a run with `configure` and `reply` exports, its
/// `run_loop` failing (no retries).
fn failed_run_chats(
    reply: pikuri::testing::Reply,
    configure: impl FnOnce(pikuri::Configurator) -> pikuri::Configurator,
    during: impl FnOnce(&FakeServer) + Send + 'static,
) -> (pikuri::Error, Vec<Value>) {
    let collector = Collector::start(Answer::Ok);
    let server = std::sync::Arc::new(FakeServer::start());
    server.push(reply);
    let exporter = OtlpExporter::new(OtlpConfig::new(collector.url()));
    let builder = pikuri::Agent::builder(server.transport())
        .http(pikuri::HttpConfig::default().with_max_retries(0))
        .add_listener(exporter);
    let mut agent = configure(builder).build().unwrap();
    let s = std::sync::Arc::clone(&server);
    let helper = std::thread::spawn(move || during(&s));
    let err = agent.run_loop("hi").unwrap_err();
    helper.join().unwrap();
    agent.close();
    let chats = collector
        .spans()
        .into_iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("chat"))
        .collect();
    (err, chats)
}

#[test]
fn a_request_failed_without_retry_names_its_status_or_kind() {
    use pikuri::testing::Reply;
    let cases = [
        (Reply::status(400, "bad request"), "400"),
        (Reply::status(401, "invalid api key"), "401"),
        (Reply::status(404, "page not found"), "404"),
        (Reply::status(500, "boom"), "500"),
        (
            Reply::raw_body(200, "application/json", "{not json"),
            "protocol",
        ),
    ];
    for (reply, want) in cases {
        let (err, chats) = failed_run_chats(reply, |c| c, |_| {});
        assert_eq!(chats.len(), 1, "{err}: {chats:#?}");
        assert_eq!(chats[0]["status"]["code"], 2, "{err}");
        assert_eq!(
            attr(&chats[0], "error.type").as_deref(),
            Some(want),
            "{err}"
        );
    }
}

#[test]
fn a_request_cancelled_in_flight_is_one_chat_span_streamed_or_not() {
    use pikuri::testing::Reply;
    for streaming in [false, true] {
        let cancel = pikuri::Cancellable::new();
        let c2 = cancel.clone();
        let (err, chats) = failed_run_chats(
            Reply::hang(),
            |c| c.cancellable(cancel).streaming(streaming),
            move |server| {
                // Cancel once the request is with the server.
                let mut waited = 0;
                while server.chat_requests().is_empty() {
                    assert!(waited < 3000, "the request never went out");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    waited += 1;
                }
                c2.cancel();
            },
        );
        assert!(err.is_cancelled(), "{err}");
        assert_eq!(chats.len(), 1, "streaming {streaming}: {chats:#?}");
        assert_eq!(
            attr(&chats[0], "error.type").as_deref(),
            Some("cancelled"),
            "streaming {streaming}"
        );
    }
}

#[cfg(feature = "guard")]
#[test]
fn a_guard_verdict_is_an_event_on_the_turn_span() {
    use pikuri::guard::{Guards, InputVerdict};
    let collector = Collector::start(Answer::Ok);
    let server = FakeServer::start();
    let events = pikuri::listeners::InMemoryEventList::new();
    let guards = Guards::new().input("scope", |_: &str| InputVerdict::Stop("off topic".into()));
    let mut agent = pikuri::Agent::builder(server.transport())
        .add_listener(events.clone())
        .guards(guards)
        .build()
        .unwrap();
    assert!(agent.run_loop("hi").is_err());
    agent.close();
    let mut exporter = OtlpExporter::new(OtlpConfig::new(collector.url()));
    for e in events.events() {
        exporter.on_event(&e);
    }
    exporter.close();
    let spans = collector.spans();
    let main = named(&spans, "invoke_agent agent")[0];
    assert_eq!(attr(main, "error.type").as_deref(), Some("guardrail"));
    assert_eq!(
        attr(main, "pikuri.stop_reason").as_deref(),
        Some("guardrail")
    );
    let event = main["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "pikuri.guard")
        .expect("a pikuri.guard event");
    let value = |key: &str| {
        event["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"]["stringValue"].clone())
    };
    assert_eq!(value("pikuri.guard.name"), Some("scope".into()));
    assert_eq!(value("pikuri.guard.point"), Some("input".into()));
    assert_eq!(value("pikuri.guard.action"), Some("stop".into()));
    // No content without the opt-in.
    assert_eq!(value("pikuri.guard.detail"), None);
}

/// Issue 42: the exporter hands off (a turn does not wait for it), and
/// `close_all`, a host's exit path where the agent's `Drop` never runs,
/// still gets the whole trace out: it closes every open agent's
/// listeners after they took every event.
#[test]
fn close_all_exports_the_whole_trace_of_a_hand_off_exporter() {
    let exporter = OtlpExporter::new(OtlpConfig::new("http://127.0.0.1:9"));
    assert_eq!(exporter.delivery(), pikuri::listeners::Delivery::HandOff);
    // `close_all` reaches every agent of the process: in one of its own.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "spans::close_all_in_own_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PIKURI_OWN_PROCESS", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "run in its own process by close_all_exports_the_whole_trace_of_a_hand_off_exporter"]
fn close_all_in_own_process() {
    use pikuri::testing::Reply;
    if std::env::var_os("PIKURI_OWN_PROCESS").is_none() {
        return; // `--ignored` in a shared process: close_all would reach other tests' agents
    }
    let collector = Collector::start(Answer::Ok);
    let server = FakeServer::start();
    let exporter = OtlpExporter::new(OtlpConfig::new(collector.url()));
    let handle = exporter.handle();
    let mut agent = pikuri::Agent::builder(server.transport())
        .add_listener(exporter)
        .build()
        .unwrap();
    for i in 0..3 {
        server.push(Reply::text(format!("answer {i}")).with_usage(10, 2));
        agent.run_loop("hi").unwrap();
    }
    std::mem::forget(agent); // the exit path: `Drop` never runs
    pikuri::close_all();
    // A turn is an `invoke_agent` and a `chat` span: all six are out.
    let spans = collector.spans();
    assert_eq!(named(&spans, "invoke_agent agent").len(), 3, "{spans:#?}");
    assert_eq!(spans.len(), 6, "{spans:#?}");
    assert_eq!(handle.exported_spans(), 6);
}
