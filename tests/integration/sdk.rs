//! The official Python SDKs (`openai`, `anthropic`, `google-genai`, from
//! PyPI) parse every shape `FakeServer` serves, on all four APIs (and
//! Gemini's `cachedContents`): `scripts/sdk_check.py` validates each body
//! and SSE event against the SDKs' own types and parses it through their
//! clients and stream helpers.
//!
//! The SDKs come from `scripts/sdk-check.sh install` (a venv under
//! `~/.cache/pikuri`); `scripts/sdk-check.sh test` runs these tests with
//! `PIKURI_SDK_PYTHON` set and `PIKURI_REQUIRE_SDK=1`. Without the venv the
//! test says on stderr that it is skipped and passes, unless
//! `PIKURI_REQUIRE_SDK=1`, which turns that into a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use pikuri::Api;
use pikuri::testing::{FakeServer, Reply};
use serde_json::json;

/// The scripted reply for `case:NAME`, the same on every API.
fn reply_for(case: &str) -> Reply {
    match case {
        "text" => Reply::text("Hello from the fake!")
            .with_usage(100, 7)
            .with_cached_tokens(60)
            .with_cache_creation_tokens(30),
        // No usage set: on a Gemini request naming a context cache the
        // server reports the cache's tokens as cached.
        "plain" => Reply::text("Hello from the fake!"),
        "tools" => Reply::tool_calls(vec![
            ("get_weather", json!({"city": "Oslo"})),
            ("get_time", json!({"tz": "CET"})),
        ]),
        "think_tools" => Reply::tool_call("calculator", json!({"expression": "6*7"}))
            .with_reasoning("Six times seven."),
        "length" => Reply::text("cut").with_finish_reason("length"),
        "safety" => Reply::text("I cannot").with_finish_reason("content_filter"),
        "blocked" => Reply::text("").with_finish_reason("prompt_blocked"),
        "redacted" => Reply::text("ok")
            .with_redacted_thinking("opaque-data")
            .with_reasoning("Visible."),
        "error" => Reply::status(429, "slow down"),
        "overloaded" => Reply::status(529, "Overloaded"),
        "unavailable" => Reply::status(503, "The model is overloaded."),
        "midstream" => Reply::text("a partial answer").error_after(3, "boom"),
        other => Reply::status(400, &format!("sdk test: unknown case {other:?}")),
    }
}

/// The venv's python: `PIKURI_SDK_PYTHON`, else where
/// `scripts/sdk-check.sh python` says; `None` (after a skip notice) if it
/// is not there.
fn sdk_python() -> Option<PathBuf> {
    let required = std::env::var("PIKURI_REQUIRE_SDK").is_ok_and(|v| v == "1");
    let path = match std::env::var_os("PIKURI_SDK_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => Command::new("scripts/sdk-check.sh")
            .arg("python")
            .output()
            .ok()
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
            .unwrap_or_default(),
    };
    if path.as_os_str().is_empty() || !path.exists() {
        let why = format!("no SDK venv python at {}", path.display());
        assert!(!required, "{why}, but PIKURI_REQUIRE_SDK=1");
        eprintln!("skipped: {why} (scripts/sdk-check.sh test runs this)");
        return None;
    }
    Some(path)
}

#[test]
fn official_sdks_parse_every_shape_served() {
    let Some(python) = sdk_python() else {
        return;
    };
    let server = FakeServer::start();
    server.respond_with(|req| {
        let conv = req.conversation();
        let last = conv
            .last()
            .and_then(|m| m["content"].as_str())
            .unwrap_or("");
        reply_for(last.strip_prefix("case:").unwrap_or(last))
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/sdk_check.py");
    let out = Command::new(python)
        .arg(script)
        .arg(server.root_url())
        .output()
        .expect("run the SDK check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "sdk_check.py failed\nstdout:\n{stdout}\nstderr:\n{stderr}\nrejections: {:?}",
        server.rejections()
    );
    assert!(stdout.contains("all SDK checks passed"), "{stdout}");
    eprint!("{stdout}");
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    // Gemini's context caches were created, read, updated and deleted.
    let cache_calls: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.path.contains("cachedContents"))
        .map(|r| r.method.clone())
        .collect();
    for method in ["POST", "GET", "PATCH", "DELETE"] {
        assert!(cache_calls.iter().any(|m| m == method), "{cache_calls:?}");
    }
    // Every API was asked, streamed and not.
    let requests = server.chat_requests();
    for api in [
        Api::ChatCompletions,
        Api::AnthropicMessages,
        Api::OpenAiResponses,
        Api::Gemini,
    ] {
        let of_api: Vec<_> = requests.iter().filter(|r| r.api() == Some(api)).collect();
        assert!(of_api.iter().any(|r| r.is_stream()), "{api:?}");
        assert!(of_api.iter().any(|r| !r.is_stream()), "{api:?}");
    }
}
