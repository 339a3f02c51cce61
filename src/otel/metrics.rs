//! The GenAI client metrics of the chat requests a turn made, as one OTLP
//! `ExportMetricsServiceRequest` (JSON): `gen_ai.client.token.usage` and
//! `gen_ai.client.operation.duration`, explicit-bucket histograms with
//! delta temporality (each export covers the requests since the last).

use serde_json::{Value, json};

use super::span::{Attr, Attrs};
use super::tracer::ChatRecord;

/// The bucket boundaries the semantic conventions advise.
const TOKEN_BOUNDS: [f64; 14] = [
    1.0,
    4.0,
    16.0,
    64.0,
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];
const DURATION_BOUNDS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// One histogram data point being filled.
struct Point {
    attrs: Attrs,
    counts: Vec<u64>,
    sum: f64,
    min: f64,
    max: f64,
}

impl Point {
    fn add(&mut self, bounds: &[f64], v: f64) {
        // A value equal to a bound falls in the bucket that bound closes.
        let i = bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len());
        self.counts[i] += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    fn to_json(&self, bounds: &[f64], start: u64, end: u64) -> Value {
        json!({
            "attributes": self.attrs.to_json(),
            "startTimeUnixNano": start.to_string(),
            "timeUnixNano": end.to_string(),
            "count": self.counts.iter().sum::<u64>().to_string(),
            "sum": self.sum,
            "min": self.min,
            "max": self.max,
            "bucketCounts": self.counts.iter().map(u64::to_string).collect::<Vec<_>>(),
            "explicitBounds": bounds,
        })
    }
}

/// Values grouped by attribute set, one point each.
fn aggregate(values: impl Iterator<Item = (Attrs, f64)>, bounds: &[f64]) -> Vec<Point> {
    let mut points: Vec<Point> = Vec::new();
    for (attrs, v) in values {
        let i = if let Some(i) = points.iter().position(|p| p.attrs == attrs) {
            i
        } else {
            points.push(Point {
                attrs,
                counts: vec![0; bounds.len() + 1],
                sum: 0.0,
                min: f64::INFINITY,
                max: f64::NEG_INFINITY,
            });
            points.len() - 1
        };
        points[i].add(bounds, v);
    }
    points
}

fn with_token_type(a: &Attrs, kind: &str) -> Attrs {
    let mut a = a.clone();
    a.set("gen_ai.token.type", Attr::from(kind));
    a
}

/// The metrics body for `chats`, covering `start..end`; `None` when there
/// were no requests.
pub(super) fn body(
    resource: &Attrs,
    chats: &[ChatRecord],
    start: u64,
    end: u64,
) -> Option<Vec<u8>> {
    if chats.is_empty() {
        return None;
    }
    let tokens = chats.iter().flat_map(|c| {
        let input = c
            .input
            .map(|n| (with_token_type(&c.attrs, "input"), n as f64));
        let output = c
            .output
            .map(|n| (with_token_type(&c.attrs, "output"), n as f64));
        input.into_iter().chain(output)
    });
    let tokens = aggregate(tokens, &TOKEN_BOUNDS);
    let durations = aggregate(
        chats.iter().map(|c| (c.attrs.clone(), c.seconds)),
        &DURATION_BOUNDS,
    );
    let histogram = |name: &str,
                     unit: &str,
                     description: &str,
                     points: &[Point],
                     bounds: &[f64]| {
        json!({
            "name": name,
            "unit": unit,
            "description": description,
            "histogram": {
                // 1 = delta: each export holds the requests since the last.
                "aggregationTemporality": 1,
                "dataPoints": points.iter().map(|p| p.to_json(bounds, start, end)).collect::<Vec<_>>(),
            },
        })
    };
    let mut metrics = vec![histogram(
        "gen_ai.client.operation.duration",
        "s",
        "GenAI operation duration.",
        &durations,
        &DURATION_BOUNDS,
    )];
    if !tokens.is_empty() {
        metrics.push(histogram(
            "gen_ai.client.token.usage",
            "{token}",
            "Number of input and output tokens used.",
            &tokens,
            &TOKEN_BOUNDS,
        ));
    }
    let body = json!({
        "resourceMetrics": [{
            "resource": { "attributes": resource.to_json() },
            "scopeMetrics": [{
                "scope": { "name": "pikuri", "version": env!("CARGO_PKG_VERSION") },
                "schemaUrl": super::span::SCHEMA_URL,
                "metrics": metrics,
            }],
        }],
    });
    serde_json::to_vec(&body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_group_by_attributes() {
        let mut a = Attrs::default();
        a.set("gen_ai.request.model", "m");
        let rec = |input, secs| ChatRecord {
            attrs: a.clone(),
            seconds: secs,
            input: Some(input),
            output: Some(2),
        };
        let body = body(&Attrs::default(), &[rec(100, 0.5), rec(4, 0.01)], 1, 2).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        let metrics = &v["resourceMetrics"][0]["scopeMetrics"][0]["metrics"];
        let duration = &metrics[0]["histogram"]["dataPoints"];
        assert_eq!(duration.as_array().unwrap().len(), 1);
        assert_eq!(duration[0]["count"], "2");
        assert_eq!(
            duration[0]["bucketCounts"][0], "1",
            "0.01 is in the first bucket"
        );
        let tokens = metrics[1]["histogram"]["dataPoints"].as_array().unwrap();
        assert_eq!(tokens.len(), 2, "input and output");
        assert_eq!(tokens[0]["sum"], 104.0);
        assert_eq!(tokens[1]["sum"], 4.0);
        assert!(body_is_none_without_requests());
    }

    fn body_is_none_without_requests() -> bool {
        body(&Attrs::default(), &[], 1, 2).is_none()
    }
}
