//! [`Cassette`]: recorded HTTP interactions, and the replay state a
//! [`FakeServer`](super::FakeServer) answers from. The workflow is in the
//! [module docs](super#record-and-replay).

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use serde_json::{Map, Value};

use super::diff::{common_lines, line_diff};
use super::request::RecordedRequest;

/// A cassette file that cannot be read or written, as the crate's error
/// (as [`Image::from_file`](crate::Image::from_file) reports its file).
fn file_error(path: &Path, e: &io::Error) -> crate::Error {
    crate::Error::InvalidInput(format!("cassette {}: {e}", path.display()))
}

/// The format version written by [`Cassette::to_json`].
const VERSION: u32 = 1;
/// Unchanged lines shown around each changed one in a mismatch diff.
const DIFF_CONTEXT: usize = 2;

/// A recorded session: every request a [`Recorder`](super::Recorder) passed
/// to the real server, with the response it got, in order.
///
/// Save it next to the test ([`save`](Cassette::save), pretty JSON that
/// diffs well in review), and replay it with
/// [`FakeServer::from_cassette`](super::FakeServer::from_cassette). See the
/// [module docs](super#record-and-replay) for the whole workflow and the
/// matching rules.
///
/// # Examples
///
/// ```
/// use pikuri::testing::{Cassette, Interaction};
/// use serde_json::json;
///
/// let mut cassette = Cassette::new();
/// cassette.push(Interaction {
///     method: "POST".into(),
///     path: "/v1/chat/completions".into(),
///     request: json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
///     status: 200,
///     content_type: "application/json".into(),
///     body: r#"{"choices":[{"message":{"role":"assistant","content":"hello"}}]}"#.into(),
/// });
/// let cassette = cassette.ignore_field("temperature");
///
/// let dir = std::env::temp_dir().join(format!("pikuri-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("hi.cassette.json");
/// cassette.save(&path)?;
/// assert_eq!(Cassette::load(&path)?, cassette);
/// assert_eq!(cassette.interactions()[0].status, 200);
/// assert_eq!(cassette.ignored_fields(), ["temperature"]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Cassette {
    version: u32,
    ignore_fields: Vec<String>,
    interactions: Vec<Interaction>,
}

crate::serde_macros::json_struct! {
    Serialize, Deserialize for Cassette {
        version,
        ignore_fields [default, skip_if = Vec::is_empty],
        interactions,
    }
}

/// One request and the response it got.
///
/// No request header is kept: `Authorization` (and with it the API key)
/// never reaches a cassette.
///
/// # Examples
///
/// ```
/// use pikuri::testing::Interaction;
/// let probe = Interaction {
///     method: "GET".into(),
///     path: "/props".into(),
///     request: serde_json::Value::Null,
///     status: 200,
///     content_type: "application/json".into(),
///     body: r#"{"default_generation_settings":{"n_ctx":4096}}"#.into(),
/// };
/// assert!(format!("{probe:?}").contains("/props"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Interaction {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target as the client sent it: path and query, e.g.
    /// `/v1/chat/completions` or `/props?model=m`.
    pub path: String,
    /// The request body parsed as JSON; `Null` when empty; the raw text as a
    /// JSON string when it is not JSON.
    pub request: Value,
    /// The response status.
    pub status: u16,
    /// The response `Content-Type` (empty if the server sent none).
    pub content_type: String,
    /// The whole response body as text (invalid UTF-8 replaced): the JSON
    /// document, or for a stream every SSE event up to `data: [DONE]`.
    pub body: String,
}

crate::serde_macros::json_struct! {
    Serialize, Deserialize for Interaction {
        method,
        path,
        request [default],
        status,
        content_type [default],
        body [default],
    }
}

impl Default for Cassette {
    fn default() -> Cassette {
        Cassette::new()
    }
}

impl Cassette {
    /// An empty cassette.
    pub fn new() -> Cassette {
        Cassette {
            version: VERSION,
            ignore_fields: Vec::new(),
            interactions: Vec::new(),
        }
    }

    /// Append an interaction.
    pub fn push(&mut self, interaction: Interaction) {
        self.interactions.push(interaction);
    }

    /// The interactions, in recording order.
    pub fn interactions(&self) -> &[Interaction] {
        &self.interactions
    }

    /// Drop the top-level request field `name` (e.g. `"temperature"`,
    /// `"seed"`) from both sides before requests are compared, for fields
    /// that legitimately differ between the recording and the test. Saved
    /// with the cassette. None by default.
    #[must_use]
    pub fn ignore_field(mut self, name: &str) -> Cassette {
        if !self.ignore_fields.iter().any(|f| f == name) {
            self.ignore_fields.push(name.to_string());
        }
        self
    }

    /// The fields [`ignore_field`](Cassette::ignore_field) added.
    pub fn ignored_fields(&self) -> &[String] {
        &self.ignore_fields
    }

    /// The cassette as pretty JSON.
    ///
    /// # Panics
    ///
    /// Never: a cassette is plain data.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("cassette serialization cannot fail")
    }

    /// Read a cassette from [`to_json`](Cassette::to_json) output.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) if `json` is not
    /// a cassette, or one of a format version this pikuri does not read.
    pub fn parse(json: &str) -> crate::Result<Cassette> {
        let cassette: Cassette = serde_json::from_str(json)
            .map_err(|e| crate::Error::InvalidInput(format!("cassette: {e}")))?;
        if cassette.version != VERSION {
            return Err(crate::Error::InvalidInput(format!(
                "cassette: format version {} is not supported (this pikuri reads {VERSION})",
                cassette.version
            )));
        }
        Ok(cassette)
    }

    /// Read the cassette file at `path`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) naming the file,
    /// when it cannot be read (with the I/O error) or, as for
    /// [`parse`](Cassette::parse), is not a cassette.
    pub fn load(path: impl AsRef<Path>) -> crate::Result<Cassette> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| file_error(path, &e))?;
        Cassette::parse(&text).map_err(|e| match e {
            crate::Error::InvalidInput(m) => {
                crate::Error::InvalidInput(format!("{}: {m}", path.display()))
            }
            other => other,
        })
    }

    /// Write the cassette to `path` as pretty JSON, replacing the file.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) naming the file
    /// and the I/O error when it cannot be written.
    pub fn save(&self, path: impl AsRef<Path>) -> crate::Result<()> {
        let path = path.as_ref();
        let mut text = self.to_json();
        text.push('\n');
        std::fs::write(path, text).map_err(|e| file_error(path, &e))
    }

    /// The model the recording's first model request named (a `POST` to
    /// `…/chat/completions`, `…/messages` or `…/responses` with a `model`
    /// string, or to Gemini's `…/models/{model}:generateContent` or
    /// `:streamGenerateContent`, whose body names none): what a replaying
    /// server's transport names.
    pub(super) fn recorded_model(&self) -> Option<&str> {
        self.interactions
            .iter()
            .filter(|i| i.method.eq_ignore_ascii_case("POST"))
            .find_map(|i| {
                let path = i.path.split('?').next().unwrap_or("");
                if ["/chat/completions", "/messages", "/responses"]
                    .iter()
                    .any(|p| path.ends_with(p))
                {
                    return i.request.get("model")?.as_str();
                }
                // Gemini names the model in the path only.
                let (_, tail) = path.rsplit_once("/models/")?;
                let (model, method) = tail.split_once(':')?;
                matches!(method, "generateContent" | "streamGenerateContent")
                    .then_some(model)
                    .filter(|m| !m.is_empty())
            })
    }

    /// `request` as compared: ignored fields dropped, object keys sorted at
    /// every level, pretty-printed so a diff reads line by line.
    fn canonical(&self, request: &Value) -> String {
        let mut v = sorted(request);
        if let Value::Object(map) = &mut v {
            for name in &self.ignore_fields {
                map.remove(name);
            }
        }
        serde_json::to_string_pretty(&v).expect("JSON values always serialize")
    }
}

/// `v` with the keys of every object in sorted order (whatever map
/// implementation serde_json was built with).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sorted(&map[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The body of `req` as an [`Interaction::request`].
pub(super) fn request_value(req: &RecordedRequest) -> Value {
    match &req.body {
        Some(v) => v.clone(),
        None if req.raw_body.is_empty() => Value::Null,
        None => Value::String(req.raw_body.clone()),
    }
}

/// A cassette being replayed: which interactions were served, and the
/// requests that matched none.
#[derive(Debug)]
pub(super) struct Replay {
    cassette: Cassette,
    /// Canonical request of each interaction.
    canonical: Vec<String>,
    used: Vec<bool>,
    pub(super) mismatches: Vec<String>,
}

/// How the replay answers one request.
#[derive(Debug)]
pub(super) enum Answer {
    /// The recorded response.
    Serve {
        status: u16,
        content_type: String,
        body: String,
    },
    /// No match: answer 500 with this message (also kept in `mismatches`).
    Mismatch(String),
    /// The cassette never saw this method and path: route it as usual.
    Pass,
}

impl Replay {
    pub(super) fn new(cassette: Cassette) -> Replay {
        let canonical = cassette
            .interactions
            .iter()
            .map(|i| cassette.canonical(&i.request))
            .collect();
        let used = vec![false; cassette.interactions.len()];
        Replay {
            cassette,
            canonical,
            used,
            mismatches: Vec::new(),
        }
    }

    /// Answer `req` (called `label` in messages, e.g. `chat request #2`).
    ///
    /// The first unused interaction with the same method, path and
    /// canonical body is served and marked used. A request that is not a
    /// chat completion may also reuse a used one (probes repeat). A request
    /// whose method and path the cassette has, but matching nothing, is a
    /// mismatch; the message diffs it against the closest unused
    /// interaction.
    pub(super) fn answer(&mut self, req: &RecordedRequest, label: &str) -> Answer {
        let wanted = self.cassette.canonical(&request_value(req));
        let same_route: Vec<usize> = (0..self.cassette.interactions.len())
            .filter(|&i| {
                let it = &self.cassette.interactions[i];
                it.method == req.method && it.path == req.path
            })
            .collect();
        if same_route.is_empty() {
            return Answer::Pass;
        }
        let exact = |i: &&usize| self.canonical[**i] == wanted;
        let hit = same_route
            .iter()
            .filter(exact)
            .find(|&&i| !self.used[i])
            .or_else(|| {
                if req.is_chat() {
                    None
                } else {
                    same_route.iter().find(exact)
                }
            })
            .copied();
        if let Some(i) = hit {
            self.used[i] = true;
            let it = &self.cassette.interactions[i];
            return Answer::Serve {
                status: it.status,
                content_type: it.content_type.clone(),
                body: it.body.clone(),
            };
        }
        let msg = self.mismatch_message(req, label, &same_route, &wanted);
        self.mismatches.push(msg.clone());
        Answer::Mismatch(msg)
    }

    fn mismatch_message(
        &self,
        req: &RecordedRequest,
        label: &str,
        same_route: &[usize],
        wanted: &str,
    ) -> String {
        let mut msg = format!(
            "FakeServer (replay): {label} {} {} matches no unused cassette interaction",
            req.method, req.path
        );
        let closest = same_route
            .iter()
            .filter(|&&i| !self.used[i])
            .max_by_key(|&&i| {
                // Most common lines; on a tie, the earliest interaction.
                (common_lines(&self.canonical[i], wanted), usize::MAX - i)
            });
        match closest {
            Some(&i) => {
                let _ = write!(
                    msg,
                    "; diff against the closest, interaction #{} (- recorded, + sent):\n{}",
                    i + 1,
                    line_diff(&self.canonical[i], wanted, DIFF_CONTEXT)
                );
            }
            None => {
                let _ = write!(
                    msg,
                    "; all {} recorded for this route are used",
                    same_route.len()
                );
            }
        }
        msg
    }

    /// One line per interaction never served.
    pub(super) fn unused(&self) -> Vec<String> {
        self.cassette
            .interactions
            .iter()
            .zip(&self.used)
            .enumerate()
            .filter(|(_, (_, used))| !**used)
            .map(|(i, (it, _))| {
                format!(
                    "  #{} {} {} -> {} {} ({} bytes)",
                    i + 1,
                    it.method,
                    it.path,
                    it.status,
                    it.content_type,
                    it.body.len()
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cassette_is_stored_with_its_fields_in_order() {
        let text = r#"{"version":1,"ignore_fields":["seed"],"interactions":[{"method":"POST","path":"/v1","request":{"a":1},"status":200,"content_type":"text/plain","body":"b"}]}"#;
        let c: Cassette = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&c).unwrap(), text);
        // The optional members may be absent; an empty list is not written.
        let bare = r#"{"version":1,"interactions":[{"method":"GET","path":"/p","status":204}]}"#;
        let c: Cassette = serde_json::from_str(bare).unwrap();
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"version":1,"interactions":[{"method":"GET","path":"/p","request":null,"status":204,"content_type":"","body":""}]}"#
        );
    }

    fn interaction(method: &str, path: &str, request: Value, body: &str) -> Interaction {
        Interaction {
            method: method.into(),
            path: path.into(),
            request,
            status: 200,
            content_type: "application/json".into(),
            body: body.into(),
        }
    }

    fn request(method: &str, path: &str, body: &Value) -> RecordedRequest {
        let raw_body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        RecordedRequest {
            method: method.into(),
            path: path.into(),
            headers: Vec::new(),
            body: (!body.is_null()).then(|| body.clone()),
            raw_body,
        }
    }

    fn served(a: Answer) -> String {
        match a {
            Answer::Serve { body, .. } => body,
            other => panic!("not served: {other:?}"),
        }
    }

    const CHAT: &str = "/v1/chat/completions";

    #[test]
    fn canonical_form_ignores_key_order_and_ignored_fields() {
        let c = Cassette::new().ignore_field("seed");
        let a = c.canonical(&json!({"b": 1, "a": {"y": 2, "x": [ {"q": 1, "p": 2} ]}, "seed": 7}));
        let b = c.canonical(&json!({"a": {"x": [ {"p": 2, "q": 1} ], "y": 2}, "b": 1, "seed": 9}));
        assert_eq!(a, b);
        assert!(a.find("\"a\"").unwrap() < a.find("\"b\"").unwrap());
        assert!(!a.contains("seed"));
    }

    #[test]
    fn interactions_are_used_once_in_order() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let mut c = Cassette::new();
        c.push(interaction("POST", CHAT, body.clone(), "first"));
        c.push(interaction("POST", CHAT, body.clone(), "second"));
        let mut r = Replay::new(c);
        let req = request("POST", CHAT, &body);
        assert_eq!(served(r.answer(&req, "#1")), "first");
        assert_eq!(served(r.answer(&req, "#2")), "second");
        assert!(r.unused().is_empty());
        let Answer::Mismatch(msg) = r.answer(&req, "chat request #3") else {
            panic!("expected a mismatch")
        };
        assert!(msg.contains("chat request #3"), "{msg}");
        assert!(
            msg.contains("all 2 recorded for this route are used"),
            "{msg}"
        );
        assert_eq!(r.mismatches, [msg]);
    }

    #[test]
    fn probes_repeat_and_unknown_routes_pass() {
        let mut c = Cassette::new();
        c.push(interaction("GET", "/props", Value::Null, "{\"n_ctx\":1}"));
        let mut r = Replay::new(c);
        let probe = request("GET", "/props", &Value::Null);
        assert_eq!(served(r.answer(&probe, "#1")), "{\"n_ctx\":1}");
        assert_eq!(served(r.answer(&probe, "#2")), "{\"n_ctx\":1}");
        assert!(matches!(
            r.answer(&request("GET", "/v1/models", &Value::Null), "#3"),
            Answer::Pass
        ));
        assert!(r.mismatches.is_empty());
    }

    #[test]
    fn mismatch_diffs_against_the_closest_unused() {
        let msg = |content: &str| json!({"model": "m", "messages": [{"role": "user", "content": content}]});
        let mut c = Cassette::new();
        c.push(interaction("POST", CHAT, json!({"model": "other"}), "a"));
        c.push(interaction("POST", CHAT, msg("What is 2+3?"), "b"));
        let mut r = Replay::new(c);
        let Answer::Mismatch(text) = r.answer(
            &request("POST", CHAT, &msg("What is 2+4?")),
            "chat request #1",
        ) else {
            panic!("expected a mismatch")
        };
        assert!(text.contains("interaction #2"), "{text}");
        assert!(
            text.contains("-       \"content\": \"What is 2+3?\""),
            "{text}"
        );
        assert!(
            text.contains("+       \"content\": \"What is 2+4?\""),
            "{text}"
        );
        assert_eq!(r.unused().len(), 2);
    }

    #[test]
    fn non_json_bodies_are_kept_as_text() {
        let mut req = request("POST", "/x", &Value::Null);
        req.raw_body = "plain".into();
        assert_eq!(request_value(&req), json!("plain"));
        assert_eq!(
            request_value(&request("GET", "/", &Value::Null)),
            Value::Null
        );
    }

    #[test]
    fn parse_rejects_garbage_and_other_versions() {
        let e = Cassette::parse("{").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        let e = Cassette::parse(r#"{"version": 2, "interactions": []}"#).unwrap_err();
        assert!(e.to_string().contains("version 2"), "{e}");
        let c = Cassette::parse(r#"{"version": 1, "interactions": []}"#).unwrap();
        assert_eq!(c, Cassette::new());
        assert_eq!(Cassette::parse(&c.to_json()).unwrap(), c);
    }

    /// Issue 38, item 21: `save` and `load` answer `pikuri::Result`, so
    /// `?` works in a test returning it; a file error names the file.
    #[test]
    fn save_and_load_answer_the_crates_result() -> crate::Result<()> {
        let dir = std::env::temp_dir().join(format!("pikuri-cassette-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.json");
        let c = Cassette::new().ignore_field("seed");
        c.save(&path)?;
        assert_eq!(Cassette::load(&path)?, c);
        let missing = dir.join("missing.json");
        let e = Cassette::load(&missing).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("missing.json"), "{e}");
        std::fs::write(&path, "{").unwrap();
        let e = Cassette::load(&path).unwrap_err();
        assert!(e.to_string().contains("c.json: cassette:"), "{e}");
        let e = c.save(dir.join("no-such-dir").join("c.json")).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        std::fs::remove_dir_all(&dir).unwrap();
        Ok(())
    }
}
