//! What the export writes to the `log` facade, the HTTP library's lines
//! included (ureq logs each request at debug level): no credential of the
//! collector's URL or headers reaches a log line.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use pikuri::otel::{OtlpConfig, OtlpExporter};
use pikuri::testing::{FakeServer, Reply};

use crate::collector::{Answer, Collector};

/// Every line logged in this test binary, from any thread.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        let line = format!("{} {}: {}", record.level(), record.target(), record.args());
        self.0.lock().unwrap().push(line);
    }
    fn flush(&self) {}
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let c: &'static Capture = Box::leak(Box::new(Capture(Mutex::new(Vec::new()))));
        log::set_logger(c).expect("the only logger of this binary");
        log::set_max_level(log::LevelFilter::Debug);
        c
    })
}

#[test]
fn no_credential_reaches_a_log_line() {
    let logs = capture();
    let c = Collector::start(Answer::Ok);
    // Once with a collector that accepts, once with one that refuses (the
    // failure is logged at warn).
    for answer in [Answer::Ok, Answer::Status(400)] {
        c.push(answer.clone());
        c.push(answer);
        let server = FakeServer::start();
        server.push(Reply::text("hi"));
        let config = OtlpConfig::new(format!("{}/otlp?key=q-s3cret", c.url()))
            .with_header("authorization", "Bearer h-s3cret")
            .with_max_retries(0)
            .with_close_timeout(Duration::from_secs(20));
        let mut agent = pikuri::Agent::builder(server.transport())
            .add_listener(OtlpExporter::new(config))
            .build()
            .unwrap();
        agent.run_loop("hello").unwrap();
        agent.close();
    }
    let received = c.received.lock().clone();
    let paths: Vec<_> = received.iter().map(|r| r.path.as_str()).collect();
    // The signal's path goes before the query.
    assert!(paths.contains(&"/otlp/v1/traces?key=q-s3cret"), "{paths:?}");
    assert!(
        paths.contains(&"/otlp/v1/metrics?key=q-s3cret"),
        "{paths:?}"
    );
    let lines = logs.0.lock().unwrap().clone();
    // The HTTP library logged the requests (the check below reads them).
    assert!(
        lines
            .iter()
            .any(|l| l.contains("ureq") && l.contains("127.0.0.1")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("otlp: export")),
        "{lines:#?}"
    );
    for l in &lines {
        assert!(!l.contains("s3cret"), "{l}");
    }
}

/// A collector that refuses the export quoting what it was sent (the
/// headers, the query, the start of the body) in a 400's body: no header
/// value or query secret reaches the warning that reports the failure, nor
/// any other log line. (Markers other than the test above's: the two
/// share the binary's logger.)
#[test]
fn a_collector_that_echoes_the_request_leaks_no_credential_into_the_log() {
    let logs = capture();
    let collector = FakeServer::start();
    collector.set_strict(false);
    collector.respond_with(|req| {
        let headers: Vec<String> = req
            .headers
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        Reply::raw_body(
            400,
            "text/plain",
            format!("refused {} {}", req.path, headers.join(" ")),
        )
    });
    let endpoint = format!("{}/chat/completions?key=query-zq7", collector.base_url());
    let config = OtlpConfig::new("http://127.0.0.1:9")
        .with_traces_endpoint(endpoint)
        .with_metrics_endpoint(None)
        .with_header("x-api-key", "header-zq7")
        .with_header("authorization", "Bearer auth-zq7")
        .with_max_retries(0);
    let model = FakeServer::start();
    model.push(Reply::text("hi"));
    let exporter = OtlpExporter::new(config);
    let handle = exporter.handle();
    let mut agent = pikuri::Agent::builder(model.transport())
        .add_listener(exporter)
        .build()
        .unwrap();
    agent.run_loop("hello").unwrap();
    agent.close();
    // The collector got the export (with the credentials) and refused it.
    let got = collector.requests();
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].header("x-api-key"), Some("header-zq7"));
    assert_eq!(handle.failed_exports(), 1);
    let lines = logs.0.lock().unwrap().clone();
    assert!(
        lines.iter().any(|l| l.contains("http status 400: refused")),
        "{lines:#?}"
    );
    // The scripted collector's own lines (`pikuri::testing`) are the
    // peer's, not the exporter's.
    for l in lines.iter().filter(|l| !l.contains(" pikuri::testing")) {
        assert!(!l.contains("header-zq7"), "{l}");
        assert!(!l.contains("auth-zq7"), "{l}");
        assert!(!l.contains("query-zq7"), "{l}");
    }
}
