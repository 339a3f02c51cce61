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
