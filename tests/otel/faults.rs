//! Collector faults: down, slow, 500, 503, 429 with `Retry-After`, a
//! collector that accepts and never answers. In each the turn answers as
//! without an exporter, spans that could not go out are counted as
//! dropped, and closing the agent returns (bounded by the close timeout).

use std::time::Duration;

use pikuri::otel::{OtlpConfig, OtlpExporter, OtlpHandle};
use pikuri::testing::FakeServer;

use crate::collector::{Answer, Collector, run_turn};

const SPANS: u64 = 8;

/// Run the scripted turn exporting with `config`; the turn's own asserts
/// check it answered as usual.
fn turn(config: OtlpConfig) -> OtlpHandle {
    let server = FakeServer::start();
    let exporter = OtlpExporter::new(config);
    let handle = exporter.handle();
    run_turn(&server, exporter);
    // The model saw the same four requests it sees without an exporter.
    assert_eq!(server.chat_requests().len(), 4);
    handle
}

#[test]
fn collector_down() {
    // A port nothing listens on: bind, read the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h = turn(
        OtlpConfig::new(format!("http://127.0.0.1:{port}"))
            .with_max_retries(2)
            .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(5)),
    );
    assert_eq!(h.exported_spans(), 0);
    assert_eq!(h.dropped_spans(), SPANS);
    // The spans' request and the metrics' request.
    assert_eq!(h.failed_exports(), 2);
}

#[test]
fn server_errors_are_not_retried_and_unavailable_is() {
    let c = Collector::start(Answer::Status(500));
    let h = turn(OtlpConfig::new(c.url()).with_max_retries(3));
    assert_eq!(c.requests("/v1/traces"), 1, "500 is final in OTLP");
    assert_eq!((h.exported_spans(), h.dropped_spans()), (0, SPANS));

    let c = Collector::start(Answer::Status(503));
    let h = turn(
        OtlpConfig::new(c.url())
            .with_max_retries(3)
            .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(5)),
    );
    assert_eq!(c.requests("/v1/traces"), 4, "one try and three retries");
    assert_eq!((h.exported_spans(), h.dropped_spans()), (0, SPANS));
}

#[test]
fn only_the_statuses_otlp_names_are_retried() {
    // OTLP/HTTP: 429, 502, 503 and 504 may be retried; 408 may not.
    let c = Collector::start(Answer::Status(408));
    let h = turn(
        OtlpConfig::new(c.url())
            .with_max_retries(3)
            .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(5)),
    );
    assert_eq!(c.requests("/v1/traces"), 1, "408 is final in OTLP");
    assert_eq!((h.exported_spans(), h.dropped_spans()), (0, SPANS));
    for status in [429, 502, 504] {
        let c = Collector::start(Answer::Status(status));
        turn(
            OtlpConfig::new(c.url())
                .with_max_retries(1)
                .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(5)),
        );
        assert_eq!(c.requests("/v1/traces"), 2, "{status} is retried");
    }
}

#[test]
fn retry_after_is_honoured() {
    // The backoff alone would wait at least 30 s, past the close timeout:
    // only the collector's `Retry-After: 0` lets the retry go out in time.
    let c = Collector::start(Answer::Ok);
    c.push(Answer::RetryAfter(429, 0));
    let h = turn(
        OtlpConfig::new(c.url())
            .with_retry_backoff(Duration::from_secs(60), Duration::from_secs(60))
            .with_close_timeout(Duration::from_secs(20)),
    );
    assert_eq!(c.requests("/v1/traces"), 2);
    assert_eq!((h.exported_spans(), h.dropped_spans()), (SPANS, 0));
}

#[test]
fn retry_after_is_capped() {
    // An hour's `Retry-After` waits the cap (10 ms) instead.
    let c = Collector::start(Answer::Ok);
    c.push(Answer::RetryAfter(503, 3600));
    let h = turn(
        OtlpConfig::new(c.url())
            .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(10))
            .with_close_timeout(Duration::from_secs(20)),
    );
    assert_eq!((h.exported_spans(), h.dropped_spans()), (SPANS, 0));
}

#[test]
fn a_slow_collector_gets_everything() {
    let c = Collector::start(Answer::Slow(Duration::from_millis(300)));
    let h = turn(OtlpConfig::new(c.url()).with_close_timeout(Duration::from_secs(20)));
    assert_eq!((h.exported_spans(), h.dropped_spans()), (SPANS, 0));
}

#[test]
fn a_silent_collector_costs_the_close_timeout_at_most() {
    let c = Collector::start(Answer::Silent);
    let h = turn(
        OtlpConfig::new(c.url())
            .with_timeout(Duration::from_millis(200))
            .with_max_retries(1)
            .with_retry_backoff(Duration::from_millis(1), Duration::from_millis(5))
            .with_close_timeout(Duration::from_secs(1)),
    );
    assert_eq!(h.exported_spans(), 0);
    assert_eq!(h.dropped_spans(), SPANS);
    assert!(c.requests("/v1/traces") >= 1);
}

#[test]
fn a_full_queue_drops_and_counts() {
    let c = Collector::start(Answer::Ok);
    let h = turn(OtlpConfig::new(c.url()).with_max_queued_spans(3));
    // The spans are queued at the end of the turn, all at once: three fit.
    assert_eq!(h.dropped_spans(), SPANS - 3);
    assert_eq!(h.exported_spans(), 3);
    assert_eq!(c.spans().len(), 3);
}

#[test]
fn a_batch_in_flight_when_the_close_times_out_is_counted_as_dropped() {
    // The collector takes the request and never answers; the request's own
    // timeout (10 minutes) is far past the close timeout.
    let c = Collector::start(Answer::Silent);
    let server = FakeServer::start();
    server.push(pikuri::testing::Reply::text("hi"));
    let exporter = OtlpExporter::new(
        OtlpConfig::new(c.url())
            .with_timeout(Duration::from_secs(600))
            .with_export_interval(Duration::from_millis(10))
            .with_close_timeout(Duration::from_millis(300)),
    );
    let handle = exporter.handle();
    let mut agent = pikuri::Agent::builder(server.transport())
        .add_listener(exporter)
        .build()
        .unwrap();
    agent.run_loop("hello").unwrap();
    // Wait until the turn's batch is in the collector's hands.
    let mut waited = 0;
    while c.requests("/v1/traces") == 0 {
        assert!(waited < 3000, "the batch never went out");
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
    }
    agent.close();
    // invoke_agent and chat: counted as the close returns, not when the
    // stuck request ends.
    assert_eq!((handle.exported_spans(), handle.dropped_spans()), (0, 2));
}

#[test]
fn a_redirect_is_not_followed_with_the_headers() {
    // The collector sends the export to another origin: the credential
    // header must not follow (ureq strips only `Authorization`).
    let elsewhere = Collector::start(Answer::Ok);
    let c = Collector::start(Answer::Redirect(format!("{}/v1/traces", elsewhere.url())));
    let h = turn(
        OtlpConfig::new(c.url())
            .with_header("x-api-key", "s3cret")
            .with_max_retries(0),
    );
    assert!(c.requests("/v1/traces") >= 1);
    assert_eq!(elsewhere.received.lock().len(), 0, "followed the redirect");
    assert_eq!((h.exported_spans(), h.dropped_spans()), (0, SPANS));
}
