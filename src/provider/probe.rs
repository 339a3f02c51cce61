//! The context-window probe behind [`ContextWindowDetector`].

use std::fmt::Write as _;

use serde_json::Value;

use super::{ChatTransport, Client, HttpConfig};

/// Finds a model's context window.
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
/// use pikuri::{ChatTransport, ContextWindowDetector};
/// use pikuri::testing::FakeServer;
/// let server = FakeServer::start();
/// server.set_context_size(Some(8192));
/// assert_eq!(ContextWindowDetector::detect(&server.transport()), Some(8192));
/// // An explicit window wins without asking the server.
/// let t = server.transport().with_context_window(Some(1000));
/// assert_eq!(ContextWindowDetector::detect(&t), Some(1000));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ContextWindowDetector;

impl ContextWindowDetector {
    /// Detect with default HTTP settings.
    pub fn detect(transport: &ChatTransport) -> Option<u64> {
        ContextWindowDetector::detect_with(transport, &HttpConfig::default())
    }

    /// Detect with the given HTTP settings.
    pub fn detect_with(transport: &ChatTransport, config: &HttpConfig) -> Option<u64> {
        detect_context_window(&Client::new(config.clone()), transport)
    }
}

pub(crate) fn detect_context_window(client: &Client, transport: &ChatTransport) -> Option<u64> {
    if let Some(n) = transport.context_window() {
        return Some(n);
    }
    let base = transport.api_base()?;
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
        .or_else(|| llama_props(get(&format!("{base}/props")).as_ref()).filter(|_| base != root))
        .or_else(|| {
            let m = model?;
            let ps = get(&format!("{root}/api/ps"));
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
