//! Session 16's outside pass over the OTLP exporter (ATTACKS.md, "Other
//! servers"): the collector cells the fault files did not cover. The
//! collector is a `FakeServer` whose chat path is the traces endpoint, so
//! each answer is scripted with `Reply`.

use std::time::Duration;

use pikuri::otel::{OtlpConfig, OtlpExporter, OtlpHandle};
use pikuri::testing::{FakeServer, Reply};

use crate::collector::run_turn;

const SPANS: u64 = 8;

/// A collector on a `FakeServer`, answering each export with `answer`,
/// and a config that exports only traces to it (no retries, unless the
/// test asks).
fn collector(answer: impl Fn() -> Reply + Send + Sync + 'static) -> (FakeServer, OtlpConfig) {
    let c = FakeServer::start();
    c.set_strict(false);
    c.respond_with(move |_| answer());
    let config = OtlpConfig::new("http://127.0.0.1:9")
        .with_traces_endpoint(format!("{}/chat/completions", c.base_url()))
        .with_metrics_endpoint(None)
        .with_max_retries(0)
        .with_close_timeout(Duration::from_secs(20));
    (c, config)
}

/// The scripted turn (four model requests) exporting with `config`, the
/// close included, under a watchdog: a hang fails instead of stalling.
fn turn(config: OtlpConfig) -> OtlpHandle {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let server = FakeServer::start();
        let exporter = OtlpExporter::new(config);
        let handle = exporter.handle();
        run_turn(&server, exporter);
        let _ = tx.send(handle);
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the turn and its close are bounded")
}

/// A 2xx whose `partialSuccess` rejects spans (the count as a string, as
/// OTLP/JSON encodes an int64): those are counted dropped, the rest
/// exported, and nothing is retried.
#[test]
fn a_partial_success_counts_the_rejected_spans_as_dropped() {
    let (c, config) = collector(|| {
        Reply::raw_body(
            200,
            "application/json",
            r#"{"partialSuccess":{"rejectedSpans":"3","errorMessage":"too old"}}"#,
        )
    });
    let h = turn(config.with_max_retries(3));
    assert_eq!(c.requests().len(), 1, "one batch, not retried");
    assert_eq!((h.exported_spans(), h.dropped_spans()), (SPANS - 3, 3));
    assert_eq!(h.failed_exports(), 0);
}

/// A 400 with a partial-success-shaped body is a refusal of the whole
/// batch: OTLP says never retry it; every span is dropped, once.
#[test]
fn a_400_with_a_partial_success_body_drops_the_batch_unretried() {
    let (c, config) = collector(|| {
        Reply::raw_body(
            400,
            "application/json",
            r#"{"partialSuccess":{"rejectedSpans":"1"},"message":"bad"}"#,
        )
    });
    let h = turn(
        config
            .with_max_retries(3)
            .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(5)),
    );
    assert_eq!(c.requests().len(), 1, "400 is final");
    assert_eq!((h.exported_spans(), h.dropped_spans()), (0, SPANS));
    assert_eq!(h.failed_exports(), 1);
}

/// `Retry-After: 100000` on a 503: the retry waits the backoff's cap, not
/// 28 hours, and the batch gets through.
#[test]
fn retry_after_100000_waits_the_cap() {
    let c = FakeServer::start();
    c.set_strict(false);
    c.push(Reply::raw_body(503, "text/plain", "busy").with_header("Retry-After", "100000"));
    c.respond_with(|_| Reply::raw_body(200, "application/json", "{}"));
    let config = OtlpConfig::new("http://127.0.0.1:9")
        .with_traces_endpoint(format!("{}/chat/completions", c.base_url()))
        .with_metrics_endpoint(None)
        .with_max_retries(2)
        .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(10))
        .with_close_timeout(Duration::from_secs(20));
    let h = turn(config);
    assert_eq!(c.requests().len(), 2);
    assert_eq!((h.exported_spans(), h.dropped_spans()), (SPANS, 0));
}

/// A collector that answers 200 and then trickles its body (an event every
/// 100 ms for 100 s): the request's timeout (1 s) ends the read, so the
/// close returns long before the trickle would; the 200 counts the batch
/// exported.
#[test]
fn a_trickling_answer_ends_at_the_request_timeout() {
    let (c, config) = collector(|| {
        Reply::raw_sse(": tick\n\n".repeat(1000)).with_chunk_delay(Duration::from_millis(100))
    });
    let h = turn(config.with_timeout(Duration::from_secs(1)));
    assert_eq!(c.requests().len(), 1);
    assert_eq!((h.exported_spans(), h.dropped_spans()), (SPANS, 0));
}

/// `Debug` of the config and the exporter shows no header value and no
/// query secret of either endpoint.
#[test]
fn debug_shows_no_credential() {
    let config = OtlpConfig::new("https://u:pw-d3bug@collector.example/otlp?key=q-d3bug")
        .with_metrics_endpoint(Some("https://collector.example/m?key=m-d3bug".into()))
        .with_header("x-api-key", "h-d3bug")
        .with_header("authorization", "Bearer a-d3bug");
    let shown = format!("{config:?} {:?}", OtlpExporter::new(config.clone()));
    for secret in ["pw-d3bug", "q-d3bug", "m-d3bug", "h-d3bug", "a-d3bug"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("x-api-key"), "{shown}");
}

/// An agent dropped without `close`: its exporter still sends the turn's
/// spans before the drop returns (dropping the exporter closes it).
#[test]
fn a_dropped_agent_still_exports() {
    let (c, config) = collector(|| Reply::raw_body(200, "application/json", "{}"));
    let model = FakeServer::start();
    model.push(Reply::text("hi"));
    let exporter = OtlpExporter::new(config);
    let handle = exporter.handle();
    let mut agent = pikuri::Agent::builder(model.transport())
        .add_listener(exporter)
        .build()
        .unwrap();
    agent.run_loop("hello").unwrap();
    drop(agent);
    // invoke_agent and chat.
    assert_eq!((handle.exported_spans(), handle.dropped_spans()), (2, 0));
    assert_eq!(c.requests().len(), 1);
}

/// `Duration::MAX` as the request timeout and the close timeout means "no
/// limit", not a panic of the export thread: the batch goes out and the
/// close returns.
#[test]
fn duration_max_timeouts_are_no_limit() {
    let (c, config) = collector(|| Reply::raw_body(200, "application/json", "{}"));
    let h = turn(
        config
            .with_timeout(Duration::MAX)
            .with_close_timeout(Duration::MAX)
            .with_export_interval(Duration::MAX),
    );
    assert_eq!(c.requests().len(), 1);
    assert_eq!((h.exported_spans(), h.dropped_spans()), (SPANS, 0));
}
