//! Context-window detection against each server shape.

use pikuri::ChatTransport;
use pikuri::testing::FakeServer;
use serde_json::json;

/// A server whose built-in `/props` and `/v1/models` say nothing.
fn silent() -> FakeServer {
    let s = FakeServer::start();
    s.set_context_size(None);
    s
}

/// A silent server whose `/v1/models` has Ollama's shape (`owned_by:
/// "library"`): the Ollama probes run only against a server that looks
/// like Ollama.
fn ollama() -> FakeServer {
    let s = silent();
    s.set_route(
        "GET",
        "/v1/models",
        200,
        json!({"object": "list", "data": [{"id": "fake-model:latest", "object": "model", "owned_by": "library"}]}),
    );
    s
}

fn detect(s: &FakeServer) -> Option<u64> {
    s.transport().detect_context_window()
}

#[test]
fn llama_cpp_props() {
    let s = FakeServer::start();
    s.set_context_size(Some(4096));
    assert_eq!(detect(&s), Some(4096));
    assert!(
        s.requests()[0].path == "/props",
        "probes the root, not /v1: {:?}",
        s.requests()[0].path
    );
}

#[test]
fn llama_cpp_router_mode_asks_the_models_instance() {
    let s = silent();
    s.set_route("GET", "/props", 200, json!({"role": "router", "n_ctx": 0}));
    s.set_route(
        "GET",
        "/props?model=fake-model",
        200,
        json!({"default_generation_settings": {"n_ctx": 12345}}),
    );
    assert_eq!(detect(&s), Some(12345));
}

#[test]
fn llama_cpp_v1_props() {
    let s = silent();
    s.set_route(
        "GET",
        "/v1/props",
        200,
        json!({"default_generation_settings": {"n_ctx": 2048}}),
    );
    assert_eq!(detect(&s), Some(2048));
}

#[test]
fn ollama_runtime_num_ctx_not_the_training_window() {
    let s = ollama();
    s.set_route(
        "POST",
        "/api/show",
        200,
        json!({"parameters": "temperature 0.7\nnum_ctx 16384", "model_info": {"qwen3.context_length": 40960}}),
    );
    assert_eq!(detect(&s), Some(16384));
    // `model_info.<arch>.context_length` is the training window, not what
    // the server accepts: not reported (issue 13, class 9).
    let s = ollama();
    s.set_route(
        "POST",
        "/api/show",
        200,
        json!({"model_info": {"llama.context_length": 131_072}}),
    );
    assert_eq!(detect(&s), None);
}

#[test]
fn ollama_loaded_model_wins() {
    let s = ollama();
    s.set_route(
        "GET",
        "/api/ps",
        200,
        json!({"models": [{"name": "fake-model:latest", "context_length": 8192}]}),
    );
    s.set_route(
        "POST",
        "/api/show",
        200,
        json!({"parameters": "num_ctx 4096"}),
    );
    assert_eq!(detect(&s), Some(8192));
}

#[test]
fn vllm_max_model_len() {
    let s = silent();
    s.set_route(
        "GET",
        "/v1/models",
        200,
        json!({"data": [{"id": "fake-model", "max_model_len": 32768}]}),
    );
    assert_eq!(detect(&s), Some(32768));
}

#[test]
fn nothing_known_is_none_and_never_an_error() {
    let s = silent();
    assert_eq!(detect(&s), None);
    // A closed port: every probe fails quickly and silently.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t = ChatTransport::new("m").with_api_base(format!("http://127.0.0.1:{port}/v1"));
    assert_eq!(t.detect_context_window(), None);
    // No api_base: OpenAI's API reports nothing, so nothing is probed.
    assert_eq!(ChatTransport::new("gpt").detect_context_window(), None);
}
