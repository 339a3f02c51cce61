//! Context-window detection: [`ChatTransport::detect_context_window`] and
//! the probes behind it.

use std::io::Read;
use std::time::Duration;

use serde_json::Value;

use super::{ChatTransport, Client, HttpConfig};
use crate::codec::percent::{self, Keep, Space};

impl ChatTransport {
    /// This transport's context window: the explicit one, else what the
    /// server reports; with default HTTP settings.
    ///
    /// # Precedence
    ///
    /// 1. An explicit (or inherited) [`ChatTransport::context_window`] wins:
    ///    operator or parent truth.
    /// 2. The server's *runtime* window (what it accepts now, which can be
    ///    far below what the model was trained for), asked in this order;
    ///    the first answer wins and ends the probing:
    ///    1. llama.cpp `GET /props` → `default_generation_settings.n_ctx`
    ///       (the launched `-c`). A router answers `n_ctx: 0` (or `role:
    ///       "router"`); then `GET /props?model=<id>` asks the model's own
    ///       instance. When `/props` does not answer JSON and the base ends
    ///       in `/v1`: `GET /v1/props` (same shape, newer builds).
    ///    2. `GET <base>/models` → for the model's entry (else the first):
    ///       `meta.n_ctx` (llama.cpp), `max_model_len` (vLLM),
    ///       `context_length` / `context_window` (other OpenAI-compatible
    ///       servers).
    ///    3. Only when the server looks like Ollama (port 11434, a base
    ///       under `/api`, or a model list whose entries are `owned_by:
    ///       "library"`): `GET /api/ps` → `context_length` of the loaded
    ///       model, then `POST /api/show` → the `num_ctx` parameter.
    /// 3. Otherwise `None`: an honest "don't know".
    ///
    /// Training-window figures are never reported: llama.cpp's
    /// `meta.n_ctx_train`, Ollama's `model_info.<arch>.context_length` and
    /// LM Studio's `max_context_length` say what the model could take, not
    /// what the server accepts.
    ///
    /// # Probe count
    ///
    /// No probe runs when the transport has no `api_base` (OpenAI's API) or
    /// its host is a hosted API that reports no runtime window, whatever
    /// the [`Api`](crate::Api) (`api.openai.com`, `api.anthropic.com`, `openrouter.ai`, `api.groq.com`, `api.mistral.ai`,
    /// `api.deepseek.com`, `api.together.xyz`, `api.fireworks.ai`,
    /// `api.x.ai`, `generativelanguage.googleapis.com`). A llama.cpp server
    /// costs one request (two in router mode); a server that answers none
    /// of them at most three (`/props`, `/v1/props`, `/v1/models`), five if
    /// it looks like Ollama. Each probe has a short timeout
    /// ([`HttpConfig::with_probe_timeout`]) and fails silently (logged at
    /// `debug`).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::testing::FakeServer;
    /// let server = FakeServer::start();
    /// server.set_context_size(Some(8192));
    /// assert_eq!(server.transport().detect_context_window(), Some(8192));
    /// // An explicit window wins without asking the server.
    /// let t = server.transport().with_context_window(Some(1000));
    /// assert_eq!(t.detect_context_window(), Some(1000));
    /// ```
    pub fn detect_context_window(&self) -> Option<u64> {
        self.detect_context_window_with(&HttpConfig::default())
    }

    /// Like [`detect_context_window`](ChatTransport::detect_context_window),
    /// with the given HTTP settings (timeouts, probe timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use pikuri::HttpConfig;
    /// use pikuri::testing::FakeServer;
    /// let server = FakeServer::start();
    /// server.set_context_size(Some(4096));
    /// let cfg = HttpConfig::default().with_probe_timeout(Duration::from_millis(500));
    /// assert_eq!(server.transport().detect_context_window_with(&cfg), Some(4096));
    /// ```
    pub fn detect_context_window_with(&self, config: &HttpConfig) -> Option<u64> {
        Client::new(config.clone()).detect_context_window(self)
    }
}

impl Client {
    /// [`ChatTransport::detect_context_window`] through this client (its
    /// agent, its probe timeout).
    pub(crate) fn detect_context_window(&self, transport: &ChatTransport) -> Option<u64> {
        detect(self, transport)
    }

    /// GET `url` and parse JSON, within `timeout`; `None` on any failure.
    pub(crate) fn get_json(
        &self,
        url: &str,
        api_key: Option<&str>,
        timeout: Duration,
    ) -> Option<Value> {
        let mut req = self
            .agent()
            .get(url)
            .config()
            .timeout_global(crate::util::limit(timeout))
            .build();
        if let Some(key) = api_key {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        finish_probe(url, req.call())
    }

    /// POST JSON to `url` and parse JSON, within `timeout`; `None` on any failure.
    pub(crate) fn post_json(&self, url: &str, body: &Value, timeout: Duration) -> Option<Value> {
        let req = self
            .agent()
            .post(url)
            .config()
            .timeout_global(crate::util::limit(timeout))
            .build();
        let body = serde_json::to_vec(body).ok()?;
        finish_probe(
            url,
            req.header("Content-Type", "application/json")
                .send(&body[..]),
        )
    }
}

fn finish_probe(
    url: &str,
    result: std::result::Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Option<Value> {
    // Logged as errors show it: a key in the base's query stays out of logs.
    let raw = url;
    let url = crate::util::redact_url(raw);
    match result {
        Ok(resp) if resp.status().is_success() => {
            let mut body = Vec::new();
            resp.into_body()
                .into_reader()
                .take(4 * 1024 * 1024)
                .read_to_end(&mut body)
                .ok()?;
            let v = crate::util::json_from_slice(&body).ok();
            log::debug!(
                "probe {url}: {}",
                if v.is_some() { "ok" } else { "not json" }
            );
            v
        }
        Ok(resp) => {
            log::debug!("probe {url}: status {}", resp.status().as_u16());
            None
        }
        Err(e) => {
            log::debug!(
                "probe {url}: {}",
                crate::util::redact_url_in(&e.to_string(), raw)
            );
            None
        }
    }
}

fn detect(client: &Client, transport: &ChatTransport) -> Option<u64> {
    let key = transport.api_key();
    let timeout = client.config().probe_timeout;
    probe(
        transport,
        |url| client.get_json(url, key, timeout),
        |url, body| client.post_json(url, body, timeout),
    )
}

/// The probing order of [`ChatTransport::detect_context_window`], over any
/// `GET` and `POST` (the seam the tests count requests through).
fn probe(
    transport: &ChatTransport,
    get: impl Fn(&str) -> Option<Value>,
    post: impl Fn(&str, &Value) -> Option<Value>,
) -> Option<u64> {
    if let Some(n) = transport.context_window() {
        return Some(n);
    }
    // OpenAI's own API (the default base) and the other hosted APIs have
    // no such endpoint: probing them would only cost requests.
    let base = transport.api_base()?;
    if is_hosted(base) {
        log::debug!("context window for {transport}: a hosted API, not probed");
        return None;
    }
    // The native endpoints (`/props`, `/api/*`) sit beside `/v1`.
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let model = transport.model();

    let found = (|| {
        let props = get(&format!("{root}/props"));
        if let Some(n) = llama_props(props.as_ref()) {
            return Some(n);
        }
        if props.is_some() {
            // JSON without a window: a llama.cpp router; ask the model's
            // own instance.
            let m = model?;
            return llama_props(
                get(&format!(
                    "{root}/props?model={}",
                    percent::encode(m, Keep::Unreserved, Space::Escaped)
                ))
                .as_ref(),
            );
        }
        // Only when the base has a `/v1` to add: otherwise this is the
        // first probe again.
        if base != root
            && let Some(n) = llama_props(get(&format!("{base}/props")).as_ref())
        {
            return Some(n);
        }
        let models = get(&format!("{base}/models"));
        if let Some(n) = models_list(models.as_ref(), model) {
            return Some(n);
        }
        if !looks_like_ollama(base, models.as_ref()) {
            return None;
        }
        let m = model?;
        // `/api/ps` first: the loaded model's runtime window beats the
        // configured one from `/api/show`.
        ollama_ps(get(&format!("{root}/api/ps")).as_ref(), m).or_else(|| {
            let show = post(
                &format!("{root}/api/show"),
                &serde_json::json!({ "model": m }),
            );
            ollama_show(show.as_ref())
        })
    })();
    log::debug!("context window for {transport}: {found:?}");
    found
}

/// Hosts of hosted APIs that report no runtime window: probing them would
/// only cost requests (and 404s in their logs).
const HOSTED: [&str; 10] = [
    "api.openai.com",
    "api.anthropic.com",
    "openrouter.ai",
    "api.groq.com",
    "api.mistral.ai",
    "api.deepseek.com",
    "api.together.xyz",
    "api.fireworks.ai",
    "api.x.ai",
    "generativelanguage.googleapis.com",
];

/// The host of `base` (`scheme://host[:port]/...`), lowercase, without port.
fn host(base: &str) -> String {
    let rest = base.split_once("://").map_or(base, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let host = if authority.starts_with('[') {
        authority.split_inclusive(']').next().unwrap_or(authority)
    } else {
        authority.split(':').next().unwrap_or(authority)
    };
    host.to_ascii_lowercase()
}

/// Whether `base` is a hosted API in [`HOSTED`] (or a subdomain of one).
pub(super) fn is_hosted(base: &str) -> bool {
    let h = host(base);
    HOSTED
        .iter()
        .any(|known| h == *known || h.ends_with(&format!(".{known}")))
}

/// Whether the server looks like Ollama: its port, an `/api` base, or a
/// model list in Ollama's shape (`owned_by: "library"`).
pub(crate) fn looks_like_ollama(base: &str, models: Option<&Value>) -> bool {
    super::transport::ollama_base(base)
        || models
            .and_then(|v| v.get("data")?.as_array())
            .is_some_and(|data| {
                data.iter()
                    .any(|m| m.get("owned_by").and_then(Value::as_str) == Some("library"))
            })
}

/// A window of 0 means "unknown" (a llama.cpp router), not "none".
fn positive(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64).filter(|n| *n > 0)
}

fn llama_props(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    // `get` twice, not `pointer`: the parser of JSON pointers would be the
    // only one in a small program.
    positive(
        v.get("default_generation_settings")
            .and_then(|s| s.get("n_ctx")),
    )
    .or_else(|| positive(v.get("n_ctx")))
}

fn ollama_ps(v: Option<&Value>, model: &str) -> Option<u64> {
    let models = v?.get("models")?.as_array()?;
    models
        .iter()
        .filter(|m| {
            [m.get("name"), m.get("model")]
                .into_iter()
                .flatten()
                .any(|n| {
                    n.as_str()
                        .is_some_and(|n| n == model || n.strip_suffix(":latest") == Some(model))
                })
        })
        .find_map(|m| positive(m.get("context_length")))
}

fn ollama_show(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    let runtime = v
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(|params| {
            params.lines().find_map(|line| {
                let mut parts = line.split_whitespace();
                (parts.next() == Some("num_ctx")).then(|| parts.next()?.parse::<u64>().ok())?
            })
        });
    // Not `model_info.<arch>.context_length`: the training window.
    runtime.filter(|n| *n > 0)
}

fn models_list(v: Option<&Value>, model: Option<&str>) -> Option<u64> {
    let data = v?.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|m| model.is_some() && m.get("id").and_then(Value::as_str) == model)
        .or_else(|| data.first())?;
    // Not `meta.n_ctx_train` (llama.cpp) nor `max_context_length` (LM
    // Studio): training windows, above what the server accepts.
    positive(entry.get("meta").and_then(|m| m.get("n_ctx")))
        .or_else(|| positive(entry.get("max_model_len")))
        .or_else(|| positive(entry.get("context_length")))
        .or_else(|| positive(entry.get("context_window")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes() {
        assert_eq!(
            llama_props(Some(
                &json!({"default_generation_settings": {"n_ctx": 4096}})
            )),
            Some(4096)
        );
        assert_eq!(
            llama_props(Some(&json!({"role": "router", "n_ctx": 0}))),
            None
        );
        assert_eq!(
            ollama_show(Some(
                &json!({"parameters": "stop \"<|im_end|>\"\nnum_ctx 16384", "model_info": {"qwen2.context_length": 32768}})
            )),
            Some(16384)
        );
        // The training window is not the runtime window.
        assert_eq!(
            ollama_show(Some(
                &json!({"model_info": {"llama.context_length": 131_072}})
            )),
            None
        );
        assert_eq!(
            ollama_ps(
                Some(&json!({"models": [{"name": "qwen3:latest", "context_length": 8192}]})),
                "qwen3"
            ),
            Some(8192)
        );
        assert_eq!(
            models_list(
                Some(
                    &json!({"data": [{"id": "a", "max_model_len": 2048}, {"id": "b", "meta": {"n_ctx": 999, "n_ctx_train": 4096}}]})
                ),
                Some("b")
            ),
            Some(999)
        );
        assert_eq!(
            models_list(
                Some(&json!({"data": [{"id": "b", "meta": {"n_ctx_train": 4096}}]})),
                Some("b")
            ),
            None
        );
        assert_eq!(
            models_list(
                Some(&json!({"data": [{"id": "a", "max_model_len": 2048}]})),
                Some("zz")
            ),
            Some(2048)
        );
    }

    /// The URLs `probe` asks for `transport`, every server answering
    /// nothing.
    fn probes_sent(transport: &ChatTransport) -> Vec<String> {
        let sent = std::cell::RefCell::new(Vec::new());
        let found = probe(
            transport,
            |url| {
                sent.borrow_mut().push(url.to_string());
                None
            },
            |url, _| {
                sent.borrow_mut().push(url.to_string());
                None
            },
        );
        assert_eq!(found, None);
        sent.into_inner()
    }

    /// Issue 38, item 24: an explicit base of a hosted API sends no probe,
    /// on every API (Anthropic's got three 404s).
    #[test]
    fn hosted_bases_are_never_probed_on_any_api() {
        use crate::Api;
        for base in [
            "https://api.anthropic.com",
            "https://api.anthropic.com/v1",
            "https://api.openai.com/v1",
        ] {
            for api in [
                Api::AnthropicMessages,
                Api::ChatCompletions,
                Api::OpenAiResponses,
            ] {
                let t = ChatTransport::new("m").with_api(api).with_api_base(base);
                assert_eq!(probes_sent(&t), Vec::<String>::new(), "{base} {api:?}");
            }
        }
        // A local server that answers nothing gets the three probes.
        let local = ChatTransport::new("m").with_api_base("http://127.0.0.1:8080/v1");
        assert_eq!(
            probes_sent(&local),
            [
                "http://127.0.0.1:8080/props",
                "http://127.0.0.1:8080/v1/props",
                "http://127.0.0.1:8080/v1/models"
            ]
        );
    }

    #[test]
    fn hosted_apis_and_ollama_bases() {
        assert!(is_hosted("https://api.openai.com/v1"));
        assert!(is_hosted("https://OpenRouter.ai/api/v1"));
        assert!(is_hosted("https://eu.api.openai.com/v1"));
        assert!(!is_hosted("http://127.0.0.1:8080/v1"));
        assert!(!is_hosted("https://notapi.openai.com.evil.example/v1"));
        assert!(!is_hosted("http://openrouter.ai.local:8080/v1"));
        assert!(looks_like_ollama("http://127.0.0.1:11434/v1", None));
        assert!(looks_like_ollama("http://gpu.lan/ollama/api", None));
        assert!(!looks_like_ollama("http://127.0.0.1:8080/v1", None));
        assert!(looks_like_ollama(
            "http://127.0.0.1:8080/v1",
            Some(&json!({"data": [{"id": "qwen3:latest", "owned_by": "library"}]}))
        ));
    }
}
