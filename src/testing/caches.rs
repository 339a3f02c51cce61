//! Gemini's `cachedContents` on a `FakeServer`: create (`POST
//! …/cachedContents`), get, update the `ttl` (`PATCH`) and delete, and a
//! `generateContent` request naming a cache (`cachedContent`) checked the
//! way Gemini checks it and answered with the cache's tokens as
//! `cachedContentTokenCount`.
//!
//! Time does not pass here: a cache expires when the test says so
//! ([`FakeServer::expire_caches`](super::FakeServer::expire_caches)) or
//! when it is deleted; its `expireTime` is still the creation time plus
//! its `ttl`, as Gemini writes it.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::conn::Answer;
use super::render;
use super::reply::{Kind, Reply};
use super::request::RecordedRequest;

/// The fields a `CachedContent` may be created with (Gemini answers an
/// unknown one with 400 `Unknown name`).
const FIELDS: [&str; 8] = [
    "model",
    "contents",
    "systemInstruction",
    "tools",
    "toolConfig",
    "ttl",
    "expireTime",
    "displayName",
];

/// The caches a `FakeServer` holds.
#[derive(Debug, Default)]
pub(super) struct Caches {
    entries: Vec<Entry>,
    /// Caches created so far: the next id is `fake-cache-<created + 1>`.
    created: u64,
}

#[derive(Debug)]
struct Entry {
    id: String,
    model: String,
    display_name: Option<String>,
    tokens: u64,
    create_time: u64,
    update_time: u64,
    expire_time: u64,
    /// Expired (by the test) or deleted: answered like an unknown one.
    gone: bool,
}

impl Caches {
    /// Mark every cache expired.
    pub(super) fn expire_all(&mut self) {
        for e in &mut self.entries {
            e.gone = true;
        }
    }

    /// The answer to a `cachedContents` request, or `None` for another path.
    pub(super) fn route(&mut self, req: &RecordedRequest) -> Option<Answer> {
        let path = req.route();
        let (_, rest) = path.split_once("/cachedContents")?;
        Some(match (req.method.as_str(), rest) {
            ("POST", "") => self.create(req.body.as_ref()),
            (method, id) if id.starts_with('/') => {
                let id = &id[1..];
                let Some(entry) = self.entries.iter_mut().find(|e| e.id == id && !e.gone) else {
                    return Some(not_found());
                };
                match method {
                    "GET" => ok(entry.to_json()),
                    "DELETE" => {
                        entry.gone = true;
                        ok(json!({}))
                    }
                    "PATCH" => match req.body.as_ref().map(ttl_of) {
                        Some(Ok(secs)) => {
                            entry.update_time = now();
                            entry.expire_time = entry.update_time + secs;
                            ok(entry.to_json())
                        }
                        Some(Err(why)) => invalid(&why),
                        None => invalid("the body is not JSON"),
                    },
                    _ => invalid(&format!("{method} is no cachedContents method")),
                }
            }
            (method, _) => invalid(&format!("{method} {path} is no cachedContents method")),
        })
    }

    /// Create a cache from `body`.
    fn create(&mut self, body: Option<&Value>) -> Answer {
        let Some(Value::Object(body)) = body else {
            return invalid("the body is not a JSON object");
        };
        if let Some(unknown) = body.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return invalid(&format!(
                "Invalid JSON payload received. Unknown name \"{unknown}\" at 'cached_content': \
                 Cannot find field."
            ));
        }
        let Some(model) = body.get("model").and_then(Value::as_str) else {
            return invalid("cached_content.model is required");
        };
        if !model.starts_with("models/") {
            return invalid(&format!("model `{model}` is not `models/{{model}}`"));
        }
        let secs = if body.contains_key("expireTime") {
            3600
        } else {
            match ttl_of(&Value::Object(body.clone())) {
                Ok(secs) => secs,
                Err(why) => return invalid(&why),
            }
        };
        // Roughly 4 characters a token, as the server's other counters.
        let cached: usize = ["contents", "systemInstruction", "tools"]
            .iter()
            .filter_map(|k| body.get(*k))
            .map(|v| v.to_string().chars().count())
            .sum();
        self.created += 1;
        let t = now();
        let entry = Entry {
            id: format!("fake-cache-{}", self.created),
            model: model.to_string(),
            display_name: body
                .get("displayName")
                .and_then(Value::as_str)
                .map(str::to_string),
            tokens: cached as u64 / 4 + 1,
            create_time: t,
            update_time: t,
            expire_time: t + secs,
            gone: false,
        };
        let answer = ok(entry.to_json());
        self.entries.push(entry);
        answer
    }

    /// For a model request naming a cache (`cachedContent`): `Err` with
    /// Gemini's answer when the cache is unknown, expired or deleted, or
    /// when the request repeats what the cache holds; else the cache's
    /// tokens. `Ok(None)` for a request naming none.
    pub(super) fn check(&self, body: Option<&Value>) -> Result<Option<u64>, Answer> {
        let Some(name) = body.and_then(|b| b.get("cachedContent")) else {
            return Ok(None);
        };
        let id = name
            .as_str()
            .and_then(|n| n.strip_prefix("cachedContents/"))
            .unwrap_or("");
        let Some(entry) = self.entries.iter().find(|e| e.id == id && !e.gone) else {
            return Err(not_found());
        };
        let repeated = ["systemInstruction", "tools", "toolConfig"]
            .iter()
            .any(|k| body.is_some_and(|b| b.get(*k).is_some()));
        if repeated {
            return Err(invalid(
                "CachedContent can not be used with GenerateContent request setting \
                 system_instruction, tools or tool_config.\n\nProposed fix: move those values \
                 to CachedContent from GenerateContent request.",
            ));
        }
        Ok(Some(entry.tokens))
    }
}

/// `reply` reporting `tokens` read from a cache, unless it sets its own:
/// `cachedContentTokenCount`, and the prompt tokens (which include them).
pub(super) fn with_cached_tokens(mut reply: Reply, tokens: u64) -> Reply {
    if let Kind::Completion(c) = &mut reply.kind
        && c.cached.is_none()
    {
        let (prompt, completion) = render::usage_counts(c);
        c.usage = Some((prompt + tokens, completion));
        c.cached = Some(tokens);
    }
    reply
}

impl Entry {
    fn to_json(&self) -> Value {
        let mut v = json!({
            "name": format!("cachedContents/{}", self.id),
            "model": self.model,
            "createTime": rfc3339(self.create_time),
            "updateTime": rfc3339(self.update_time),
            "expireTime": rfc3339(self.expire_time),
            "usageMetadata": { "totalTokenCount": self.tokens },
        });
        if let Some(name) = &self.display_name {
            v["displayName"] = json!(name);
        }
        v
    }
}

/// The seconds of a body's `ttl` (`"600s"`, `"1.5s"` rounds down).
fn ttl_of(body: &Value) -> Result<u64, String> {
    let Some(ttl) = body.get("ttl").and_then(Value::as_str) else {
        return Err("ttl (a duration such as \"600s\") is required".to_string());
    };
    ttl.strip_suffix('s')
        .and_then(|n| n.split('.').next())
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| {
            format!("Invalid value at 'cached_content.ttl' (google.protobuf.Duration), \"{ttl}\"")
        })
}

fn ok(body: Value) -> Answer {
    Answer::Json { status: 200, body }
}

/// Gemini's error body.
fn error(code: u16, status: &str, message: &str) -> Answer {
    Answer::Json {
        status: code,
        body: json!({ "error": { "code": code, "message": message, "status": status } }),
    }
}

fn invalid(message: &str) -> Answer {
    error(400, "INVALID_ARGUMENT", message)
}

/// What Gemini answers for a cache that expired, was deleted or never was.
fn not_found() -> Answer {
    error(
        403,
        "PERMISSION_DENIED",
        "CachedContent not found (or permission denied)",
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `secs` since the epoch as RFC 3339 UTC (`2026-01-02T03:04:05Z`).
fn rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (>= 0).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_798_761_599), "2026-12-31T23:59:59Z");
    }
}
