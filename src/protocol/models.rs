//! [`ChatTransport::list_models`]: the model ids a server offers.
//!
//! (Lives beside the transport's own module for now; it only needs the
//! transport's fields and `ureq`.)

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

use super::connect::small_answer;
use crate::net::AgentSetup;
use crate::util::{redact_in, redact_url};
use crate::{ChatTransport, Error, Result};

/// The largest `/models` body read; a longer one is a protocol error.
const MAX_BODY: u64 = 4 << 20;
/// The most ids returned (OpenRouter lists a few hundred).
const MAX_MODELS: usize = 10_000;
/// The time allowed for the whole request, connection included.
const TIMEOUT: Duration = Duration::from_secs(15);

impl ChatTransport {
    /// The model ids the server lists at `<api base>/models`, in its order
    /// (llama.cpp, Ollama, vLLM, LM Studio, OpenRouter and OpenAI all serve
    /// it). A host uses it to pick a model when none is configured, or to
    /// offer a choice.
    ///
    /// # Bounds
    ///
    /// One `GET`, at most 15 s in all, a body of at most 4 MiB, at most
    /// 10 000 ids. Redirects are not followed, so the API key (sent as a
    /// bearer token, when set) never reaches another host: a redirect is an
    /// [`Error::Http`] with the 3xx status.
    ///
    /// # Errors
    ///
    /// [`Error::Http`] for a non-success status, [`Error::Connect`],
    /// [`Error::Transport`] or [`Error::Timeout`] when the server cannot be
    /// reached in time, [`Error::Protocol`] for a body that is not
    /// `{"data":[{"id":..},..]}` or too large. Each names the URL.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::testing::FakeServer;
    ///
    /// let server = FakeServer::start();
    /// server.set_model_id("qwen3");
    /// assert_eq!(server.transport().list_models()?, ["qwen3"]);
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn list_models(&self) -> Result<Vec<String>> {
        let url = format!("{}/models", self.base_or_default().trim_end_matches('/'));
        let mut shown = redact_url(&url);
        redact_in(&mut shown, self.api_key());
        let agent = AgentSetup::new().with_total_timeout(TIMEOUT).agent();
        let mut req = agent.get(&url).header("Accept", "application/json");
        if let Some(key) = self.api_key() {
            req = req.header("Authorization", format!("Bearer {key}"));
        }
        let body = small_answer(
            req.call(),
            (&url, &shown),
            (TIMEOUT, MAX_BODY),
            self.api_key(),
            |_, _| None,
            "the model list is",
        )?;
        parse(&body).ok_or_else(|| Error::Protocol {
            message: "not a model list (`{\"data\":[{\"id\":..}]}`)".to_string(),
            url: Some(shown),
        })
    }
}

/// Most ids named in the error of [`ChatTransport::resolve_model`].
const MAX_NAMED: usize = 20;

impl ChatTransport {
    /// This transport with a model: itself when it names one, else the
    /// server's only model (logged at `info`). See [`Configurator::build`].
    ///
    /// [`Configurator::build`]: crate::Configurator::build
    pub(crate) fn resolve_model(self) -> Result<ChatTransport> {
        if self.model().is_some_and(|m| !m.trim().is_empty()) {
            return Ok(self);
        }
        let base = self.base_or_default().to_string();
        let ids = self.list_models().map_err(|e| {
            Error::invalid(format!(
                "no model set, and the model list at {base}/models could not be read ({e}); \
                 set one with ChatTransport::with_model"
            ))
        })?;
        match ids.as_slice() {
            [only] => {
                log::info!("no model set: using {only}, the only model {base} lists");
                let only = only.clone();
                Ok(self.with_model(only))
            }
            [] => Err(Error::invalid(format!(
                "no model set, and {base}/models lists none; set one with ChatTransport::with_model"
            ))),
            many => {
                let mut named = many
                    .iter()
                    .take(MAX_NAMED)
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ");
                if many.len() > MAX_NAMED {
                    let _ = write!(named, ", … ({} in all)", many.len());
                }
                Err(Error::invalid(format!(
                    "no model set, and {base}/models lists several: {named}; \
                     pick one with ChatTransport::with_model"
                )))
            }
        }
    }
}

/// The ids of an OpenAI-style model list.
fn parse(body: &[u8]) -> Option<Vec<String>> {
    let v: Value = crate::util::json_from_slice(body).ok()?;
    let data = v.get("data")?.as_array()?;
    Some(
        data.iter()
            .filter_map(|m| m.get("id")?.as_str())
            .take(MAX_MODELS)
            .map(str::to_string)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeServer;

    #[test]
    fn parses_the_ids_in_order_and_skips_entries_without_one() {
        let body = br#"{"object":"list","data":[{"id":"a"},{"name":"x"},{"id":"b"}]}"#;
        assert_eq!(parse(body), Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(parse(b"[]"), None);
        assert_eq!(parse(b"not json"), None);
    }

    #[test]
    fn errors_carry_the_status_and_the_servers_message() {
        let server = FakeServer::start();
        server.set_route(
            "GET",
            "/v1/models",
            401,
            serde_json::json!({"error": {"message": "bad key"}}),
        );
        let err = server.transport().list_models().unwrap_err();
        assert_eq!(err.status(), Some(401));
        assert_eq!(
            err.to_string(),
            format!("http status 401 from {}/models: bad key", server.base_url())
        );
    }

    #[test]
    fn a_redirect_is_not_followed() {
        let server = FakeServer::start();
        server.set_route("GET", "/v1/models", 302, serde_json::json!({}));
        let t = server.transport().with_api_key("sk-secret");
        assert_eq!(t.list_models().unwrap_err().status(), Some(302));
        let sent = server.requests();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].header("authorization"), Some("Bearer sk-secret"));
    }
}
