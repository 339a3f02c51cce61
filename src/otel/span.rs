//! One span as OTLP/JSON: ids, attributes, events, status, and the
//! `ExportTraceServiceRequest` body a batch of them becomes.

use std::borrow::Cow;
use std::hash::{BuildHasher, RandomState};
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The schema of the semantic conventions the spans follow.
pub(super) const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";

/// Nanoseconds since the Unix epoch, now.
pub(super) fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// 64 random bits without a `rand` dependency: std's `RandomState` is keyed
/// from the OS's randomness once per thread and stepped per instance; a
/// counter and the clock are hashed in too, so two ids never repeat in a
/// process even when the keys would.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // Read once: `process::id` is a system call, and ids are made on the
    // listener thread per span.
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let pid = *PID.get_or_init(std::process::id);
    RandomState::new().hash_one((n, now_nanos(), pid))
}

/// A random, non-zero 16-byte trace id. Ids stay integers on the
/// listener thread and are hex-encoded only when a batch is written on the
/// export thread.
pub(super) fn trace_id() -> u128 {
    loop {
        let (a, b) = (random_u64(), random_u64());
        // All-zero ids are invalid in W3C Trace Context and OTLP.
        if a | b != 0 {
            return (u128::from(a) << 64) | u128::from(b);
        }
    }
}

/// A random, non-zero 8-byte span id.
pub(super) fn span_id() -> u64 {
    loop {
        let a = random_u64();
        if a != 0 {
            return a;
        }
    }
}

/// A trace id as 32 lowercase hex digits (W3C, OTLP/JSON).
pub(super) fn trace_hex(id: u128) -> String {
    format!("{id:032x}")
}

/// A span id as 16 lowercase hex digits.
#[cfg(test)]
pub(super) fn span_hex(id: u64) -> String {
    format!("{id:016x}")
}

/// An attribute value (the OTLP `AnyValue` kinds pikuri uses).
#[derive(Clone, Debug)]
pub(super) enum Attr {
    /// Shared: the conversation id and the model's names go on every span
    /// by reference count, not by copy.
    Str(Arc<str>),
    /// A literal (operation names, finish reasons): no allocation.
    Static(&'static str),
    Int(i64),
    Bool(bool),
    Double(f64),
    /// A literal array (`gen_ai.response.finish_reasons`).
    StaticArray(&'static [&'static str]),
}

impl Attr {
    /// The text of a string value, literal or shared.
    fn as_str(&self) -> Option<&str> {
        match self {
            Attr::Str(s) => Some(s),
            Attr::Static(s) => Some(s),
            _ => None,
        }
    }
}

impl PartialEq for Attr {
    /// A literal equals a shared string of the same text: how a value is
    /// held is no part of what it is.
    fn eq(&self, other: &Attr) -> bool {
        if let (Some(a), Some(b)) = (self.as_str(), other.as_str()) {
            return a == b;
        }
        match (self, other) {
            (Attr::Int(a), Attr::Int(b)) => a == b,
            (Attr::Bool(a), Attr::Bool(b)) => a == b,
            (Attr::Double(a), Attr::Double(b)) => a == b,
            (Attr::StaticArray(a), Attr::StaticArray(b)) => a == b,
            _ => false,
        }
    }
}

impl Attr {
    fn to_json(&self) -> Value {
        match self {
            Attr::Str(s) => json!({ "stringValue": &**s }),
            Attr::Static(s) => json!({ "stringValue": s }),
            // OTLP/JSON writes 64-bit integers as decimal strings.
            Attr::Int(i) => json!({ "intValue": i.to_string() }),
            Attr::Bool(b) => json!({ "boolValue": b }),
            Attr::Double(d) => json!({ "doubleValue": d }),
            Attr::StaticArray(v) => json!({
                "arrayValue": { "values": v.iter().map(|s| json!({ "stringValue": s })).collect::<Vec<_>>() }
            }),
        }
    }
}

impl Attr {
    /// The `AnyValue` object, written straight into `out` (the export path:
    /// no `Value` tree per span).
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Attr::Str(s) => {
                out.extend_from_slice(b"{\"stringValue\":");
                write_str(out, s);
                out.push(b'}');
            }
            Attr::Static(s) => {
                out.extend_from_slice(b"{\"stringValue\":");
                write_str(out, s);
                out.push(b'}');
            }
            Attr::Int(i) => {
                let _ = write!(out, "{{\"intValue\":\"{i}\"}}");
            }
            Attr::Bool(b) => {
                let _ = write!(out, "{{\"boolValue\":{b}}}");
            }
            Attr::Double(d) => {
                out.extend_from_slice(b"{\"doubleValue\":");
                let _ = serde_json::to_writer(&mut *out, d);
                out.push(b'}');
            }
            Attr::StaticArray(v) => {
                out.extend_from_slice(b"{\"arrayValue\":{\"values\":[");
                for (i, s) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"stringValue\":");
                    write_str(out, s);
                    out.push(b'}');
                }
                out.extend_from_slice(b"]}}");
            }
        }
    }
}

/// `s` as a JSON string (quoted, escaped).
fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing to a Vec cannot fail, and a &str always serializes.
    let _ = serde_json::to_writer(&mut *out, s);
}

impl From<&str> for Attr {
    fn from(s: &str) -> Attr {
        Attr::Str(s.into())
    }
}
impl From<String> for Attr {
    fn from(s: String) -> Attr {
        Attr::Str(s.into())
    }
}
impl From<&Arc<str>> for Attr {
    fn from(s: &Arc<str>) -> Attr {
        Attr::Str(Arc::clone(s))
    }
}
impl From<u64> for Attr {
    fn from(n: u64) -> Attr {
        Attr::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}
impl From<bool> for Attr {
    fn from(b: bool) -> Attr {
        Attr::Bool(b)
    }
}

/// Whether two attribute keys are equal. Each `set` scans the span's keys,
/// and most share a prefix (`gen_ai.`): the same literal (same address) or
/// a different last byte settles most pairs without a `memcmp` (profiled:
/// the scan's compares were the listener thread's largest cost).
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && (std::ptr::eq(a.as_ptr(), b.as_ptr())
            || (a.as_bytes().last() == b.as_bytes().last() && a == b))
}

/// Key-value pairs in insertion order; a key set twice keeps the last value.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Attrs(pub(super) Vec<(Cow<'static, str>, Attr)>);

impl Attrs {
    /// The run's cost, when it is known, as `pikuri.usage.cost_usd` (the
    /// GenAI semantic conventions define no cost attribute).
    pub(super) fn set_cost(&mut self, spend: &crate::Spend) {
        if let Some(cost) = spend.cost {
            self.set("pikuri.usage.cost_usd", Attr::Double(cost.usd()));
        }
    }

    /// Set `key` (a `&'static str` costs no allocation).
    pub(super) fn set(&mut self, key: impl Into<Cow<'static, str>>, value: impl Into<Attr>) {
        let (key, value) = (key.into(), value.into());
        if let Some(slot) = self.0.iter_mut().find(|(k, _)| same_key(k, &key)) {
            slot.1 = value;
        } else {
            self.0.push((key, value));
        }
    }

    /// Add `key`, known not to be set yet (a fresh span's attributes,
    /// each key once): no scan of the keys before it. Profiled: the scans'
    /// compares were a quarter of the listener thread's time.
    pub(super) fn push(&mut self, key: &'static str, value: impl Into<Attr>) {
        debug_assert!(self.get(key).is_none(), "{key} pushed twice");
        self.0.push((Cow::Borrowed(key), value.into()));
    }

    pub(super) fn get(&self, key: &str) -> Option<&Attr> {
        self.0
            .iter()
            .find(|(k, _)| same_key(k, key))
            .map(|(_, v)| v)
    }

    /// The `KeyValue` array, written into `out`.
    pub(super) fn write_json(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"key\":");
            write_str(out, k);
            out.extend_from_slice(b",\"value\":");
            v.write_json(out);
            out.push(b'}');
        }
        out.push(b']');
    }

    pub(super) fn to_json(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .map(|(k, v)| json!({ "key": &**k, "value": v.to_json() }))
                .collect(),
        )
    }
}

/// A span event: a named point in time with attributes.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SpanEvent {
    pub(super) name: &'static str,
    pub(super) time: u64,
    pub(super) attrs: Attrs,
}

/// OTLP span kinds pikuri emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Internal = 1,
    Client = 3,
}

/// A span's status: unset (the operation did what it was asked), or an
/// error with a message. pikuri never sets `Ok`: the OTel spec leaves it to
/// the application that decides a result is good.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Status {
    Unset,
    Error(String),
}

/// One span, built while its events arrive and encoded when it ends.
/// Ids are integers and the name is a literal operation and a shared
/// target: nothing here is formatted on the listener thread (the export
/// thread writes the JSON).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Span {
    pub(super) trace_id: u128,
    pub(super) id: u64,
    pub(super) parent: Option<u64>,
    /// The operation (`invoke_agent`, `chat`, `execute_tool`): the name's
    /// first word.
    pub(super) op: &'static str,
    /// What the operation is on (agent, model, tool), after a space;
    /// `None` for a bare `chat`.
    pub(super) target: Option<Arc<str>>,
    pub(super) kind: Kind,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) attrs: Attrs,
    pub(super) events: Vec<SpanEvent>,
    pub(super) status: Status,
}

impl Span {
    pub(super) fn new(
        trace_id: u128,
        span_id: u64,
        parent: Option<u64>,
        op: &'static str,
        target: Option<Arc<str>>,
        kind: Kind,
        start: u64,
    ) -> Span {
        Span {
            trace_id,
            id: span_id,
            parent,
            op,
            target,
            kind,
            start,
            end: start,
            // Room for a chat span's attributes: no regrowth while they
            // are added.
            attrs: Attrs(Vec::with_capacity(16)),
            events: Vec::new(),
            status: Status::Unset,
        }
    }

    /// The span's name: `{op} {target}`, or `{op}` alone.
    pub(super) fn name(&self) -> String {
        match &self.target {
            Some(t) => format!("{} {t}", self.op),
            None => self.op.to_string(),
        }
    }

    pub(super) fn event(&mut self, name: &'static str, time: u64, attrs: Attrs) {
        self.events.push(SpanEvent { name, time, attrs });
    }

    /// Mark the span failed, with `error.type` (the semantic conventions'
    /// low-cardinality failure class) and a status message.
    pub(super) fn fail(&mut self, error_type: &str, message: impl Into<String>) {
        self.attrs.set("error.type", error_type);
        self.status = Status::Error(message.into());
    }

    /// The OTLP/JSON `Span` object, written into `out`.
    pub(super) fn write_json(&self, out: &mut Vec<u8>) {
        // Ids are hex digits, names and keys are escaped: nothing else
        // needs escaping.
        let _ = write!(
            out,
            "{{\"traceId\":\"{:032x}\",\"spanId\":\"{:016x}\",",
            self.trace_id, self.id
        );
        if let Some(p) = self.parent {
            let _ = write!(out, "\"parentSpanId\":\"{p:016x}\",");
        }
        out.extend_from_slice(b"\"name\":");
        write_str(out, &self.name());
        let _ = write!(
            out,
            ",\"kind\":{},\"startTimeUnixNano\":\"{}\",\"endTimeUnixNano\":\"{}\",\"attributes\":",
            self.kind as u8,
            self.start,
            self.end.max(self.start)
        );
        self.attrs.write_json(out);
        out.extend_from_slice(b",\"events\":[");
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let _ = write!(out, "{{\"timeUnixNano\":\"{}\",\"name\":", e.time);
            write_str(out, e.name);
            out.extend_from_slice(b",\"attributes\":");
            e.attrs.write_json(out);
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"status\":");
        match &self.status {
            Status::Unset => out.extend_from_slice(b"{\"code\":0}"),
            Status::Error(m) => {
                out.extend_from_slice(b"{\"code\":2,\"message\":");
                write_str(out, m);
                out.push(b'}');
            }
        }
        out.push(b'}');
    }

    /// The OTLP/JSON `Span` object as a value (tests).
    #[cfg(test)]
    pub(super) fn to_json(&self) -> Value {
        let mut span = json!({
            "traceId": trace_hex(self.trace_id),
            "spanId": span_hex(self.id),
            "name": self.name(),
            "kind": self.kind as u8,
            "startTimeUnixNano": self.start.to_string(),
            "endTimeUnixNano": self.end.max(self.start).to_string(),
            "attributes": self.attrs.to_json(),
            "events": self.events.iter().map(|e| json!({
                "timeUnixNano": e.time.to_string(),
                "name": e.name,
                "attributes": e.attrs.to_json(),
            })).collect::<Vec<_>>(),
            "status": match &self.status {
                Status::Unset => json!({ "code": 0 }),
                Status::Error(m) => json!({ "code": 2, "message": m }),
            },
        });
        if let Some(p) = self.parent {
            span["parentSpanId"] = Value::String(span_hex(p));
        }
        span
    }
}

/// The body of one `POST /v1/traces`: an `ExportTraceServiceRequest` with
/// one resource and one instrumentation scope.
pub(super) fn traces_body(resource: &Attrs, spans: &[Span]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + spans.len() * 1024);
    out.extend_from_slice(b"{\"resourceSpans\":[{\"resource\":{\"attributes\":");
    resource.write_json(&mut out);
    let _ = write!(
        out,
        "}},\"scopeSpans\":[{{\"scope\":{{\"name\":\"pikuri\",\"version\":\"{}\"}},\"schemaUrl\":\"{SCHEMA_URL}\",\"spans\":[",
        env!("CARGO_PKG_VERSION")
    );
    for (i, s) in spans.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        s.write_json(&mut out);
    }
    out.extend_from_slice(b"]}]}]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_nonzero_and_distinct() {
        let (a, b) = (trace_id(), trace_id());
        assert_ne!(a, b);
        let (a, b) = (trace_hex(a), trace_hex(b));
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
        assert_eq!(trace_hex(0xab), format!("{}ab", "0".repeat(30)));
        assert_eq!(span_hex(0xab), "00000000000000ab");
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| span_hex(span_id())).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|s| s.len() == 16 && s != "0000000000000000"));
    }

    #[test]
    fn span_json_follows_otlp() {
        let mut s = Span::new(
            0xabab_abab_abab_abab_abab_abab_abab_abab,
            0xcdcd_cdcd_cdcd_cdcd,
            Some(0xefef_efef_efef_efef),
            "chat",
            Some("m".into()),
            Kind::Client,
            5,
        );
        s.end = 9;
        s.attrs.set("gen_ai.usage.input_tokens", 12u64);
        s.attrs.set(
            "gen_ai.response.finish_reasons",
            Attr::StaticArray(&["stop"]),
        );
        s.fail("timeout", "timed out");
        s.event("x", 7, Attrs::default());
        s.attrs.set("gen_ai.operation.name", Attr::Static("chat"));
        s.attrs.set("x.reasons", Attr::StaticArray(&["tool_calls"]));
        let j = s.to_json();
        assert_eq!(j["attributes"][3]["value"]["stringValue"], "chat");
        assert_eq!(
            j["attributes"][4]["value"]["arrayValue"]["values"][0]["stringValue"],
            "tool_calls"
        );
        assert_eq!(j["traceId"], "ab".repeat(16));
        assert_eq!(j["spanId"], "cd".repeat(8));
        assert_eq!(j["name"], "chat m");
        assert_eq!(j["parentSpanId"], "efefefefefefefef");
        assert_eq!(j["kind"], 3);
        assert_eq!(j["startTimeUnixNano"], "5");
        assert_eq!(j["attributes"][0]["value"]["intValue"], "12");
        assert_eq!(
            j["attributes"][1]["value"]["arrayValue"]["values"][0]["stringValue"],
            "stop"
        );
        assert_eq!(j["status"]["code"], 2);
        assert_eq!(j["events"][0]["timeUnixNano"], "7");
        // The export path writes the same object.
        let mut out = Vec::new();
        s.write_json(&mut out);
        assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), j);
        let body: Value =
            serde_json::from_slice(&traces_body(&s.attrs, &[s.clone(), s.clone()])).unwrap();
        assert_eq!(body["resourceSpans"][0]["scopeSpans"][0]["spans"][1], j);
        assert_eq!(
            body["resourceSpans"][0]["resource"]["attributes"],
            s.attrs.to_json()
        );
    }
}
