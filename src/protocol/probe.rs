//! Context-window detection: [`ChatTransport::detect_context_window`] and
//! the probes behind it.

use std::fmt::Write as _;
use std::io::Read;
use std::time::Duration;

use serde_json::Value;

use super::{ChatTransport, Client, HttpConfig};

impl ChatTransport {
    /// This transport's context window: the explicit one, else what the
    /// server reports; with default HTTP settings.
    ///
    /// # Precedence
    ///
    /// 1. An explicit (or inherited) [`ChatTransport::context_window`] wins:
    ///    operator or parent truth.
    /// 2. The server, asked in this order, first answer wins:
    ///    - llama.cpp `GET /props` → `default_generation_settings.n_ctx` (the
    ///      launched `-c`, which can be smaller than the model's maximum). A
    ///      router answers `n_ctx: 0` (or `role: "router"`); then
    ///      `GET /props?model=<id>` asks the model's own instance.
    ///    - llama.cpp `GET /v1/props` (same shape, newer builds).
    ///    - Ollama `POST /api/show` → the runtime `num_ctx` parameter when set,
    ///      else `model_info["<arch>.context_length"]`; and `GET /api/ps` →
    ///      `context_length` of the loaded model (the runtime truth, preferred).
    ///    - `GET /v1/models` → for the model's entry (else the first):
    ///      `meta.n_ctx`, `meta.n_ctx_train` (llama.cpp), `max_model_len`
    ///      (vLLM), `context_length` / `context_window` (OpenRouter, LM Studio).
    /// 3. Otherwise `None`: an honest "don't know".
    ///
    /// Each probe has a short timeout ([`HttpConfig::with_probe_timeout`]) and
    /// fails silently (logged at `debug`). No probe runs when the transport has no
    /// `api_base` (OpenAI's API reports no context window).
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
    match result {
        Ok(resp) if resp.status().is_success() => {
            let mut body = Vec::new();
            resp.into_body()
                .into_reader()
                .take(4 * 1024 * 1024)
                .read_to_end(&mut body)
                .ok()?;
            let v = serde_json::from_slice(&body).ok();
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
            log::debug!("probe {url}: {e}");
            None
        }
    }
}

fn detect(client: &Client, transport: &ChatTransport) -> Option<u64> {
    if let Some(n) = transport.context_window() {
        return Some(n);
    }
    // OpenAI's own API (the default base) has no such endpoint: probing it
    // would only cost timeouts.
    let base = transport.api_base()?;
    // The native endpoints (`/props`, `/api/*`) sit beside `/v1`.
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let key = transport.api_key();
    let timeout = client.config().probe_timeout;
    let model = transport.model();
    let get = |url: &str| client.get_json(url, key, timeout);

    let found = llama_props(get(&format!("{root}/props")).as_ref())
        .or_else(|| {
            let m = model?;
            llama_props(get(&format!("{root}/props?model={}", encode(m))).as_ref())
        })
        // Only when the base has a `/v1` to add: otherwise this is the
        // first probe again.
        .or_else(|| llama_props(get(&format!("{base}/props")).as_ref()).filter(|_| base != root))
        .or_else(|| {
            let m = model?;
            let ps = get(&format!("{root}/api/ps"));
            // `/api/ps` first: the loaded model's runtime window beats the
            // configured one from `/api/show`.
            ollama_ps(ps.as_ref(), m).or_else(|| {
                let show = client.post_json(
                    &format!("{root}/api/show"),
                    &serde_json::json!({ "model": m }),
                    timeout,
                );
                ollama_show(show.as_ref())
            })
        })
        .or_else(|| models_list(get(&format!("{base}/models")).as_ref(), model));
    log::debug!("context window for {transport}: {found:?}");
    found
}

/// A window of 0 means "unknown" (a llama.cpp router), not "none".
fn positive(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64).filter(|n| *n > 0)
}

fn llama_props(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    positive(v.pointer("/default_generation_settings/n_ctx")).or_else(|| positive(v.get("n_ctx")))
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
    runtime.filter(|n| *n > 0).or_else(|| {
        let info = v.get("model_info")?.as_object()?;
        info.iter()
            .find(|(k, _)| k.ends_with(".context_length"))
            .and_then(|(_, n)| positive(Some(n)))
    })
}

fn models_list(v: Option<&Value>, model: Option<&str>) -> Option<u64> {
    let data = v?.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|m| model.is_some() && m.get("id").and_then(Value::as_str) == model)
        .or_else(|| data.first())?;
    positive(entry.pointer("/meta/n_ctx"))
        .or_else(|| positive(entry.pointer("/meta/n_ctx_train")))
        .or_else(|| positive(entry.get("max_model_len")))
        .or_else(|| positive(entry.get("context_length")))
        .or_else(|| positive(entry.get("context_window")))
        .or_else(|| positive(entry.get("max_context_length")))
}

/// Percent-encode a model id for a query string.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
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
        assert_eq!(
            ollama_show(Some(
                &json!({"model_info": {"llama.context_length": 131_072}})
            )),
            Some(131_072)
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
                    &json!({"data": [{"id": "a", "max_model_len": 2048}, {"id": "b", "meta": {"n_ctx_train": 999}}]})
                ),
                Some("b")
            ),
            Some(999)
        );
        assert_eq!(
            models_list(
                Some(&json!({"data": [{"id": "a", "max_model_len": 2048}]})),
                Some("zz")
            ),
            Some(2048)
        );
        assert_eq!(encode("org/model:7b"), "org%2Fmodel%3A7b");
    }
}
