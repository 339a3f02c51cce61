//! `OtlpConfig`: where spans go and what they say about the service, set in
//! code or read from the standard `OTEL_*` variables.

use std::fmt;
use std::time::Duration;

use super::span::{Attr, Attrs};
use crate::codec::percent::{self, Plus};

/// Where and how an [`OtlpExporter`](crate::otel::OtlpExporter) exports.
///
/// Set in code, or read from the environment with
/// [`from_env`](OtlpConfig::from_env), following the OpenTelemetry
/// exporter specification:
///
/// | variable | use |
/// |---|---|
/// | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | the traces URL, used as is |
/// | `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` | the metrics URL, used as is (it alone does not turn export on) |
/// | `OTEL_EXPORTER_OTLP_ENDPOINT` | a base URL: `/v1/traces` is added to its path, before any query (`/v1/metrics` for metrics) |
/// | `OTEL_EXPORTER_OTLP_HEADERS` | `key=value` pairs separated by commas, each percent-decoded |
/// | `OTEL_SERVICE_NAME` | `service.name` (wins over the one in the next variable) |
/// | `OTEL_RESOURCE_ATTRIBUTES` | `key=value` pairs separated by commas, each percent-decoded |
///
/// Header values may hold credentials: they are sent, never shown (`Debug`
/// prints the header names only, and no log line, error or event carries
/// them).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use pikuri::otel::OtlpConfig;
///
/// let config = OtlpConfig::new("http://127.0.0.1:4318/")
///     .with_header("x-api-key", "secret")
///     .with_service_name("support-bot")
///     .with_timeout(Duration::from_secs(2));
/// assert_eq!(config.traces_endpoint(), "http://127.0.0.1:4318/v1/traces");
/// assert!(!format!("{config:?}").contains("secret"));
/// ```
#[derive(Clone)]
pub struct OtlpConfig {
    pub(super) traces_endpoint: String,
    pub(super) metrics_endpoint: Option<String>,
    pub(super) headers: Vec<(String, String)>,
    pub(super) service_name: Option<String>,
    pub(super) resource: Vec<(String, String)>,
    pub(super) capture_content: bool,
    pub(super) timeout: Duration,
    pub(super) max_queued_spans: usize,
    pub(super) max_batch: usize,
    pub(super) max_retries: u32,
    pub(super) retry_base: Duration,
    pub(super) retry_cap: Duration,
    pub(super) close_timeout: Duration,
    pub(super) export_interval: Duration,
    pub(super) agent_name: String,
}

impl OtlpConfig {
    /// Export to the collector at `endpoint`, a base URL (such as
    /// `http://localhost:4318`): spans go to `{endpoint}/v1/traces`, as
    /// with `OTEL_EXPORTER_OTLP_ENDPOINT`. The path goes before a query
    /// (`http://c:4318/otlp?tenant=a` posts to
    /// `http://c:4318/otlp/v1/traces?tenant=a`).
    ///
    /// ```
    /// use pikuri::otel::OtlpConfig;
    ///
    /// let config = OtlpConfig::new("http://c:4318/otlp/?key=s3cret");
    /// assert_eq!(config.traces_endpoint(), "http://c:4318/otlp/v1/traces?key=s3cret");
    /// assert_eq!(config.metrics_endpoint(), Some("http://c:4318/otlp/v1/metrics?key=s3cret"));
    /// ```
    pub fn new(endpoint: impl AsRef<str>) -> OtlpConfig {
        let base = endpoint.as_ref();
        OtlpConfig {
            traces_endpoint: signal_url(base, "/v1/traces"),
            metrics_endpoint: Some(signal_url(base, "/v1/metrics")),
            headers: Vec::new(),
            service_name: None,
            resource: Vec::new(),
            capture_content: false,
            timeout: Duration::from_secs(10),
            max_queued_spans: 2048,
            max_batch: 512,
            max_retries: 3,
            retry_base: Duration::from_millis(200),
            retry_cap: Duration::from_secs(5),
            close_timeout: Duration::from_secs(5),
            export_interval: Duration::from_secs(1),
            agent_name: "agent".to_string(),
        }
    }

    /// The configuration the `OTEL_*` variables give (see the table above),
    /// or `None` when neither endpoint variable is set (export is off).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::otel::OtlpConfig;
    ///
    /// let env = |k: &str| match k {
    ///     "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://collector:4318".to_string()),
    ///     "OTEL_EXPORTER_OTLP_HEADERS" => Some("authorization=Bearer%20abc, x-team = core".to_string()),
    ///     "OTEL_RESOURCE_ATTRIBUTES" => Some("deployment.environment=prod,service.name=ignored".to_string()),
    ///     "OTEL_SERVICE_NAME" => Some("bot".to_string()),
    ///     _ => None,
    /// };
    /// let config = OtlpConfig::from_env_with(env).unwrap();
    /// assert_eq!(config.traces_endpoint(), "http://collector:4318/v1/traces");
    /// assert_eq!(config.header_names(), ["authorization", "x-team"]);
    /// assert_eq!(config.service_name(), "bot");
    /// assert!(OtlpConfig::from_env_with(|_| None).is_none());
    /// ```
    pub fn from_env() -> Option<OtlpConfig> {
        OtlpConfig::from_env_with(|k| std::env::var(k).ok())
    }

    /// [`from_env`](OtlpConfig::from_env) over any source of variables
    /// (tests, a config file).
    pub fn from_env_with(var: impl Fn(&str) -> Option<String>) -> Option<OtlpConfig> {
        let get = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let base = get("OTEL_EXPORTER_OTLP_ENDPOINT");
        let traces = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        let mut config = match (&base, &traces) {
            (Some(b), _) => OtlpConfig::new(b.trim()),
            // A traces endpoint alone: metrics have no endpoint to go to.
            (None, Some(t)) => {
                let mut c = OtlpConfig::new(t.trim());
                c.metrics_endpoint = None;
                c
            }
            (None, None) => return None,
        };
        if let Some(t) = traces {
            // The signal-specific variable is used as is: no path appended.
            config.traces_endpoint = t.trim().to_string();
        }
        if let Some(m) = get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
            config.metrics_endpoint = Some(m.trim().to_string());
        }
        if let Some(h) = get("OTEL_EXPORTER_OTLP_HEADERS") {
            config
                .headers
                .extend(parse_pairs(&h, "OTEL_EXPORTER_OTLP_HEADERS"));
        }
        if let Some(r) = get("OTEL_RESOURCE_ATTRIBUTES") {
            config
                .resource
                .extend(parse_pairs(&r, "OTEL_RESOURCE_ATTRIBUTES"));
        }
        config.service_name = get("OTEL_SERVICE_NAME").map(|s| s.trim().to_string());
        Some(config)
    }

    /// Send spans to this URL as is (no path appended), as with
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
    #[must_use]
    pub fn with_traces_endpoint(mut self, url: impl Into<String>) -> OtlpConfig {
        self.traces_endpoint = url.into();
        self
    }

    /// Send metrics to this URL as is; `None` turns metrics off (the
    /// default with [`new`](OtlpConfig::new): `{endpoint}/v1/metrics`).
    #[must_use]
    pub fn with_metrics_endpoint(mut self, url: Option<String>) -> OtlpConfig {
        self.metrics_endpoint = url;
        self
    }

    /// Add a header to every export request (an API key, a tenant).
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> OtlpConfig {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The resource's `service.name` (default: `OTEL_SERVICE_NAME` under
    /// [`from_env`](OtlpConfig::from_env), else a `service.name` resource
    /// attribute, else `unknown_service:<executable name>`).
    #[must_use]
    pub fn with_service_name(mut self, name: impl Into<String>) -> OtlpConfig {
        self.service_name = Some(name.into());
        self
    }

    /// Add a resource attribute (`deployment.environment.name`,
    /// `service.version`, ...).
    #[must_use]
    pub fn with_resource_attribute(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> OtlpConfig {
        self.resource.push((key.into(), value.into()));
        self
    }

    /// Record tool arguments and results on `execute_tool` spans
    /// (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) and the
    /// reason of a denial. Off by default: they can hold private data.
    #[must_use]
    pub fn with_capture_content(mut self, on: bool) -> OtlpConfig {
        self.capture_content = on;
        self
    }

    /// Bound on one export request, connect to last byte (default 10 s;
    /// `Duration::MAX`: no bound, as for each duration here).
    #[must_use]
    pub fn with_timeout(mut self, d: Duration) -> OtlpConfig {
        self.timeout = d;
        self
    }

    /// Spans waiting for export at most (default 2048); past it, new spans
    /// are dropped and counted ([`OtlpHandle::dropped_spans`](crate::otel::OtlpHandle::dropped_spans)).
    #[must_use]
    pub fn with_max_queued_spans(mut self, n: usize) -> OtlpConfig {
        self.max_queued_spans = n.max(1);
        self
    }

    /// Retries of a failed export (default 3): after a transport error,
    /// 429, 502, 503 or 504 (the statuses OTLP lets a client retry),
    /// waiting `Retry-After` when the collector
    /// sends one (capped by [`with_retry_backoff`](OtlpConfig::with_retry_backoff)'s
    /// cap), else an exponential backoff with jitter.
    #[must_use]
    pub fn with_max_retries(mut self, n: u32) -> OtlpConfig {
        self.max_retries = n;
        self
    }

    /// The first backoff and the cap of every wait between retries
    /// (default 200 ms and 5 s).
    #[must_use]
    pub fn with_retry_backoff(mut self, base: Duration, cap: Duration) -> OtlpConfig {
        self.retry_base = base;
        self.retry_cap = cap;
        self
    }

    /// How long closing the exporter may take to send what waits (default
    /// 5 s); what is not sent by then is dropped and counted before the
    /// close returns, a batch still in a request included (its late
    /// answer changes no counter).
    #[must_use]
    pub fn with_close_timeout(mut self, d: Duration) -> OtlpConfig {
        self.close_timeout = d;
        self
    }

    /// How often the export thread sends what waits (default 1 s, as
    /// OpenTelemetry's batch span processor schedules): turns finished in
    /// the meantime go in one request. A full batch (512 spans) goes at
    /// once, and closing sends the rest.
    #[must_use]
    pub fn with_export_interval(mut self, d: Duration) -> OtlpConfig {
        self.export_interval = d;
        self
    }

    /// The main agent's `gen_ai.agent.name` (default `"agent"`); a
    /// sub-agent's is its id (`"researcher 0"`).
    #[must_use]
    pub fn with_agent_name(mut self, name: impl Into<String>) -> OtlpConfig {
        self.agent_name = name.into();
        self
    }

    /// The URL spans are posted to.
    pub fn traces_endpoint(&self) -> &str {
        &self.traces_endpoint
    }

    /// The URL metrics are posted to, if any.
    pub fn metrics_endpoint(&self) -> Option<&str> {
        self.metrics_endpoint.as_deref()
    }

    /// The names of the headers sent (their values are never shown).
    pub fn header_names(&self) -> Vec<&str> {
        self.headers.iter().map(|(k, _)| k.as_str()).collect()
    }

    /// The resource's `service.name`.
    pub fn service_name(&self) -> String {
        if let Some(s) = &self.service_name {
            return s.clone();
        }
        if let Some((_, v)) = self
            .resource
            .iter()
            .rev()
            .find(|(k, _)| k == "service.name")
        {
            return v.clone();
        }
        let exe = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        format!("unknown_service:{exe}")
    }

    /// The resource attributes: the host's, then `service.name` and the
    /// `telemetry.sdk.*` trio (these win).
    pub(super) fn resource(&self) -> Attrs {
        let mut attrs = Attrs::default();
        for (k, v) in &self.resource {
            attrs.set(k.clone(), v.as_str());
        }
        attrs.set("service.name", self.service_name());
        attrs.set("telemetry.sdk.name", "pikuri");
        attrs.set("telemetry.sdk.language", "rust");
        attrs.set(
            "telemetry.sdk.version",
            Attr::from(env!("CARGO_PKG_VERSION")),
        );
        attrs
    }
}

impl fmt::Debug for OtlpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values may be credentials: names only.
        f.debug_struct("OtlpConfig")
            .field(
                "traces_endpoint",
                &crate::util::redact_url(&self.traces_endpoint),
            )
            .field("headers", &self.header_names())
            .field("service_name", &self.service_name())
            .field("capture_content", &self.capture_content)
            .field("timeout", &self.timeout)
            .field("max_queued_spans", &self.max_queued_spans)
            .finish_non_exhaustive()
    }
}

/// The URL of a signal (`/v1/traces`) under the base URL `base`: the path
/// is added to the base's path, before its query; a fragment is dropped
/// (it is never sent).
fn signal_url(base: &str, path: &str) -> String {
    let base = base.split('#').next().unwrap_or("");
    let (before, query) = match base.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (base, None),
    };
    let mut out = format!("{}{path}", before.trim_end_matches('/'));
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// `k1=v1,k2=v2` with each key and value trimmed and percent-decoded (the
/// W3C Baggage form the OTel spec uses for these variables). A pair
/// without `=` or with an empty key is skipped, with a warning that names
/// the variable only (a value may be a credential).
fn parse_pairs(text: &str, var: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for item in text.split(',') {
        if item.trim().is_empty() {
            continue;
        }
        match item.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                out.push((
                    percent::decode(k.trim(), Plus::Kept),
                    percent::decode(v.trim(), Plus::Kept),
                ));
            }
            _ => log::warn!("{var}: skipped an entry that is not key=value"),
        }
    }
    out
}

/// Host and port of a URL (the port defaulted from the scheme).
pub(super) fn host_port(url: &str) -> (Option<String>, Option<u16>) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // User info is a credential: never part of an attribute.
    let hostport = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6.split_once(']').unwrap_or((v6, ""));
        (h, after.strip_prefix(':'))
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let port = port.and_then(|p| p.parse().ok()).or(match scheme {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    });
    ((!host.is_empty()).then(|| host.to_string()), port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_endpoint_is_used_as_is_and_wins() {
        let env = |k: &str| match k {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://a:4318/".to_string()),
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some("http://b:9/custom".to_string()),
            _ => None,
        };
        let c = OtlpConfig::from_env_with(env).unwrap();
        assert_eq!(c.traces_endpoint(), "http://b:9/custom");
        assert_eq!(c.metrics_endpoint(), Some("http://a:4318/v1/metrics"));
        let only = |k: &str| {
            (k == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").then(|| "http://b:9/t".to_string())
        };
        let c = OtlpConfig::from_env_with(only).unwrap();
        assert_eq!(c.traces_endpoint(), "http://b:9/t");
        assert_eq!(c.metrics_endpoint(), None);
    }

    #[test]
    fn the_signal_path_goes_before_the_query() {
        let c = OtlpConfig::new("https://c.example:4318/otlp/?key=s3cret&x=1#frag");
        assert_eq!(
            c.traces_endpoint(),
            "https://c.example:4318/otlp/v1/traces?key=s3cret&x=1"
        );
        assert_eq!(
            c.metrics_endpoint(),
            Some("https://c.example:4318/otlp/v1/metrics?key=s3cret&x=1")
        );
        assert_eq!(
            OtlpConfig::new("http://c:4318").traces_endpoint(),
            "http://c:4318/v1/traces"
        );
    }

    #[test]
    fn the_metrics_endpoint_variable_is_used_as_is() {
        let env = |k: &str| match k {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://a:4318".to_string()),
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" => Some(" http://m:9/my/metrics ".to_string()),
            _ => None,
        };
        let c = OtlpConfig::from_env_with(env).unwrap();
        assert_eq!(c.traces_endpoint(), "http://a:4318/v1/traces");
        assert_eq!(c.metrics_endpoint(), Some("http://m:9/my/metrics"));
        // With a traces endpoint alone, metrics go where it says too.
        let env = |k: &str| match k {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some("http://t:1/t".to_string()),
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" => Some("http://m:9/m".to_string()),
            _ => None,
        };
        let c = OtlpConfig::from_env_with(env).unwrap();
        assert_eq!(c.metrics_endpoint(), Some("http://m:9/m"));
        // It alone does not turn export on.
        let env = |k: &str| {
            (k == "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").then(|| "http://m:9/m".to_string())
        };
        assert!(OtlpConfig::from_env_with(env).is_none());
    }

    #[test]
    fn resource_from_env() {
        let env = |k: &str| match k {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://a:4318".to_string()),
            "OTEL_RESOURCE_ATTRIBUTES" => {
                Some("service.name=svc, team=a%3Db,broken,=x".to_string())
            }
            "OTEL_EXPORTER_OTLP_HEADERS" => Some("k=v=w".to_string()),
            _ => None,
        };
        let c = OtlpConfig::from_env_with(env).unwrap();
        let r = c.resource();
        assert_eq!(r.get("service.name"), Some(&Attr::from("svc")));
        assert_eq!(r.get("team"), Some(&Attr::from("a=b")));
        assert_eq!(r.get("telemetry.sdk.language"), Some(&Attr::from("rust")));
        assert_eq!(c.headers, vec![("k".to_string(), "v=w".to_string())]);
        assert!(c.service_name.is_none());
        assert!(
            OtlpConfig::new("http://x")
                .service_name()
                .starts_with("unknown_service:")
        );
    }
}
