//! Issue 37: Gemini's explicit context caching (`cachedContents`) through
//! the public API on the strict FakeServer: create, use (the request names
//! the cache instead of sending what it holds; the cached tokens in the
//! usage), update the ttl, expire and delete (a clear error naming the
//! cache), and the refusals on other APIs.

use std::sync::Arc;
use std::time::Duration;

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{
    Agent, Api, CachedContent, ChatTransport, ContextCache, Error, ErrorKind, Message, Tool,
};
use serde_json::json;

use super::util::fast_http;

fn gemini(server: &FakeServer) -> ChatTransport {
    server.transport().with_api(Api::Gemini)
}

fn clock() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "clock",
        "The time.",
        Parameters::builder().build(),
        |_args, _ctx| Ok("noon".to_string()),
    ))
}

/// A cache of a system instruction, a tool and a document, created on
/// `server`.
fn create(server: &FakeServer) -> CachedContent {
    gemini(server)
        .create_cache(
            &ContextCache::new(Duration::from_secs(600))
                .with_display_name("handbook")
                .with_system("Answer from the handbook.")
                .with_tool(clock())
                .with_message(Message::user("The handbook: ".repeat(50))),
        )
        .unwrap()
}

fn agent_on(transport: ChatTransport) -> Agent {
    Agent::builder(transport)
        .system_prompt("Answer from the handbook.")
        .http(fast_http().with_max_retries(0))
        .add_tool(clock())
        .build()
        .unwrap()
}

#[test]
fn a_cache_is_created_with_the_prefix_in_geminis_shapes() {
    let server = FakeServer::start();
    let cache = create(&server);
    assert!(cache.name().starts_with("cachedContents/"), "{cache:?}");
    assert_eq!(cache.model(), "models/fake-model");
    assert_eq!(cache.display_name(), Some("handbook"));
    assert!(
        cache.expire_time().is_some_and(|t| t.ends_with('Z')),
        "{cache:?}"
    );
    assert!(cache.token_count().is_some_and(|n| n > 100), "{cache:?}");
    let reqs = server.requests();
    let req = reqs.last().unwrap();
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/v1/cachedContents")
    );
    let body = req.body.as_ref().unwrap();
    assert_eq!(body["model"], "models/fake-model");
    assert_eq!(body["ttl"], "600s");
    assert_eq!(body["displayName"], "handbook");
    assert_eq!(
        body["systemInstruction"]["parts"][0]["text"],
        "Answer from the handbook."
    );
    assert_eq!(body["contents"][0]["role"], "user");
    assert!(
        body["contents"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("The handbook: ")
    );
    assert_eq!(body["tools"][0]["functionDeclarations"][0]["name"], "clock");
    // The key goes as Gemini's header.
    let keyed = FakeServer::start();
    gemini(&keyed)
        .with_api_key("g-key")
        .create_cache(&ContextCache::new(Duration::from_secs(60)).with_system("s"))
        .unwrap();
    assert_eq!(keyed.requests()[0].header("x-goog-api-key"), Some("g-key"));
}

#[test]
fn a_turn_on_a_cache_names_it_and_reports_its_tokens_as_cached() {
    let server = FakeServer::start();
    let cache = create(&server);
    server.push(Reply::text("From the handbook: noon.").with_usage(10, 4));
    let transport = gemini(&server).with_cached_content(Some(cache.name()));
    assert_eq!(transport.cached_content(), Some(cache.name()));
    let mut agent = agent_on(transport);
    let out = agent.run_loop("When is lunch?").unwrap();
    assert_eq!(out.answer.as_deref(), Some("From the handbook: noon."));
    // The strict server refuses a request that repeats what the cache
    // holds: none came.
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    let chat = server.chat_requests();
    let body = chat[0].body.as_ref().unwrap();
    assert_eq!(body["cachedContent"], cache.name());
    for held in ["systemInstruction", "tools", "toolConfig"] {
        assert!(
            body.get(held).is_none(),
            "{held} sent beside the cache: {body}"
        );
    }
    assert_eq!(body["contents"][0]["parts"][0]["text"], "When is lunch?");
    assert_eq!(out.usage.cached, cache.token_count());
}

#[test]
fn an_expired_cache_fails_the_turn_naming_it() {
    let server = FakeServer::start();
    let cache = create(&server);
    server.push(Reply::text("unused"));
    server.expire_caches();
    let mut agent = agent_on(gemini(&server).with_cached_content(Some(cache.name())));
    let err = agent.run_loop("When is lunch?").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CacheExpired, "{err}");
    let Error::Http {
        status, message, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*status, 403);
    assert!(message.contains("CachedContent not found"), "{message}");
    assert!(
        message.contains(&format!("`{}`", cache.name())),
        "{message}"
    );
    assert!(message.contains("create_cache"), "{message}");
    // A 403 is not retried: one request.
    assert_eq!(server.chat_requests().len(), 1);
}

#[test]
fn a_cache_lives_longer_when_asked_and_is_gone_once_deleted() {
    let server = FakeServer::start();
    let cache = create(&server);
    let transport = gemini(&server);
    let later = transport
        .update_cache_ttl(cache.name(), Duration::from_secs(7200))
        .unwrap();
    assert_eq!(later.name(), cache.name());
    assert!(
        later.expire_time() > cache.expire_time(),
        "{later:?} {cache:?}"
    );
    let patch = server.requests().pop().unwrap();
    assert_eq!(patch.method, "PATCH");
    assert_eq!(patch.path, format!("/v1/{}?updateMask=ttl", cache.name()));
    assert_eq!(patch.body.unwrap(), json!({"ttl": "7200s"}));
    transport.delete_cache(cache.name()).unwrap();
    let err = transport.delete_cache(cache.name()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CacheExpired, "{err}");
    // A turn on it fails the same way.
    let mut agent = agent_on(transport.with_cached_content(Some(cache.name())));
    let err = agent.run_loop("Hi").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CacheExpired, "{err}");
}

#[test]
fn caches_are_geminis_only() {
    let server = FakeServer::start();
    let cache = ContextCache::new(Duration::from_secs(60)).with_system("s");
    for api in [
        Api::ChatCompletions,
        Api::AnthropicMessages,
        Api::OpenAiResponses,
    ] {
        let err = server
            .transport()
            .with_api(api)
            .create_cache(&cache)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("Gemini"), "{err}");
        // A turn on another API naming a cache fails before it is sent.
        let t = server
            .transport()
            .with_api(api)
            .with_cached_content(Some("cachedContents/x"));
        let err = agent_on(t).run_loop("Hi").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
        assert!(err.to_string().contains("cache"), "{err}");
    }
    // (Building an agent probes the context window: only model requests
    // and cache requests count.)
    let sent = |server: &FakeServer| {
        server
            .requests()
            .iter()
            .filter(|r| r.api().is_some() || r.path.contains("cachedContents"))
            .count()
    };
    assert_eq!(sent(&server), 0);
    // A name that is not a cache's is refused before anything is sent.
    let err = gemini(&server).delete_cache("../models/x").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert_eq!(sent(&server), 0);
}

#[test]
fn a_hostile_cache_server_gets_bounded_clear_errors_and_never_the_key() {
    let spec = ContextCache::new(Duration::from_secs(60)).with_system("s");
    // Refused: nothing listens.
    let port = super::util::closed_port();
    let err = ChatTransport::new("m")
        .with_api(Api::Gemini)
        .with_api_base(format!("http://127.0.0.1:{port}/v1beta"))
        .create_cache(&spec)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connect, "{err}");
    let server = FakeServer::start();
    let keyed = gemini(&server).with_api_key("g-secret-key");
    let create = |status, body| {
        server.set_route("POST", "/v1/cachedContents", status, body);
        keyed.create_cache(&spec).unwrap_err()
    };
    // An answer that is not a CachedContent, or over a MiB.
    let err = create(200, json!({"data": []}));
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
    let err = create(200, json!("<html>cached</html>"));
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
    let err = create(200, json!({"name": "x".repeat(2 << 20)}));
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
    assert!(err.to_string().contains("over"), "{err}");
    // A name that is not a cache's (a way out of the collection, none, a
    // bare id, a wrong type, half a megabyte) is refused where it arrives:
    // it would go into every request and into an update's path.
    for name in [
        json!("cachedContents/../../models/x"),
        json!("cachedContents/"),
        json!("abc123"),
        json!(42),
        json!(format!("cachedContents/{}", "a".repeat(500_000))),
    ] {
        let err = create(200, json!({"name": name, "model": "models/fake-model"}));
        assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
        assert!(
            err.to_string().len() < 500,
            "{} bytes",
            err.to_string().len()
        );
    }
    // The other strings a server sends are cut.
    server.set_route(
        "POST",
        "/v1/cachedContents",
        200,
        json!({"name": "cachedContents/ok-1", "displayName": "d".repeat(100_000),
               "model": "m".repeat(100_000), "usageMetadata": {"totalTokenCount": -1}}),
    );
    let cache = keyed.create_cache(&spec).unwrap();
    assert_eq!(cache.name(), "cachedContents/ok-1");
    assert!(cache.display_name().unwrap().chars().count() <= 513);
    assert!(cache.model().chars().count() <= 513);
    assert_eq!(cache.token_count(), None);
    // A redirect is not followed (the key would go along): the 3xx is the
    // error.
    let err = create(302, json!({}));
    let Error::Http { status: 302, .. } = &err else {
        panic!("{err:?}")
    };
    // A refusal that echoes the key does not show it.
    let err = create(
        400,
        json!({"error": {"code": 400, "message": "bad key g-secret-key", "status": "INVALID_ARGUMENT"}}),
    );
    assert_eq!(err.kind(), ErrorKind::Rejected, "{err}");
    assert!(
        !format!("{err} {err:?}").contains("g-secret-key"),
        "{err:?}"
    );
    assert!(!format!("{keyed:?}").contains("g-secret-key"));
}

/// ATTACKS.md: a cache that expires in the middle of a run (between the
/// round that asked for a tool and the round that reads its result)
/// fails the turn as `CacheExpired` naming it, with the tool's result
/// answered in the history; the next turn, on the transport without the
/// cache, sends the whole prefix and works.
#[test]
fn a_cache_that_expires_mid_run_fails_the_round_and_the_next_turn_works() {
    let server = Arc::new(FakeServer::start());
    let cache = create(&server);
    server.push(Reply::tool_call("expire", json!({})));
    server.push(Reply::text("Lunch is at noon."));
    let expirer = Arc::clone(&server);
    let expire = FnTool::new(
        "expire",
        "Lets time pass.",
        Parameters::builder().build(),
        move |_args, _ctx| {
            expirer.expire_caches();
            Ok("an hour later".to_string())
        },
    );
    let transport = gemini(&server).with_cached_content(Some(cache.name()));
    let mut agent = Agent::builder(transport)
        .system_prompt("Answer from the handbook.")
        .http(fast_http().with_max_retries(0))
        .add_tool(clock())
        .add_tool(expire)
        .build()
        .unwrap();
    let err = agent.run_loop("When is lunch?").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CacheExpired, "{err}");
    assert!(err.to_string().contains(cache.name()), "{err}");
    let roles: Vec<_> = agent.messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            pikuri::Role::User,
            pikuri::Role::Assistant,
            pikuri::Role::Tool
        ]
    );
    super::util::assert_valid_history(agent.messages());
    // The host drops the cache; the turn goes on from where it stopped.
    let out = agent
        .run_loop_with("And dinner?", gemini(&server).with_cached_content(None))
        .unwrap();
    assert_eq!(out.answer.as_deref(), Some("Lunch is at noon."));
    let last = server.chat_requests().pop().unwrap();
    let body = last.body.unwrap();
    assert!(body.get("cachedContent").is_none(), "{body}");
    assert_eq!(
        body["systemInstruction"]["parts"][0]["text"],
        "Answer from the handbook."
    );
    assert!(server.rejections().is_empty(), "{:?}", server.rejections());
    server.assert_all_used();
}
