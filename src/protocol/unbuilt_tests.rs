//! The wire formats behind Cargo features (`anthropic`, `responses`,
//! `gemini`): a
//! build without one refuses a request on its API at once, with a typed
//! error naming the feature, and still reads histories that name it.
//! The `cfg(not(feature))` tests run in `.ci/run`'s "each feature alone"
//! loop, where the feature is off.

use crate::testing::{FakeServer, Reply};
use crate::{Agent, Api, History, Message, ProviderData};

/// A turn on `api` against a server that would answer it: the error, and
/// how many requests reached the server.
#[cfg(not(all(feature = "anthropic", feature = "responses", feature = "gemini")))]
fn refused(api: Api) -> (crate::Error, usize) {
    let server = FakeServer::start();
    server.push(Reply::text("hello"));
    let mut agent = Agent::builder(server.transport().with_api(api))
        .build()
        .unwrap();
    let err = agent.run_loop("hi").unwrap_err();
    // The history holds no half turn: the next turn starts clean.
    assert!(agent.messages().iter().all(|m| m.content != "hello"));
    (err, server.chat_requests().len())
}

#[cfg(not(feature = "anthropic"))]
#[test]
fn an_anthropic_request_without_the_feature_fails_at_once_naming_it() {
    let (err, sent) = refused(Api::AnthropicMessages);
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
    assert_eq!(
        err.to_string(),
        "invalid input: the transport speaks anthropic_messages, which this build of pikuri \
         leaves out: enable the Cargo feature `anthropic`"
    );
    assert_eq!(sent, 0, "nothing is sent");
}

#[cfg(not(feature = "responses"))]
#[test]
fn a_responses_request_without_the_feature_fails_at_once_naming_it() {
    let (err, sent) = refused(Api::OpenAiResponses);
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
    assert!(
        err.to_string()
            .ends_with("openai_responses, which this build of pikuri leaves out: enable the Cargo feature `responses`"),
        "{err}"
    );
    assert_eq!(sent, 0, "nothing is sent");
}

#[cfg(not(feature = "gemini"))]
#[test]
fn a_gemini_request_without_the_feature_fails_at_once_naming_it() {
    let (err, sent) = refused(Api::Gemini);
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
    assert!(
        err.to_string().ends_with(
            "gemini, which this build of pikuri leaves out: enable the Cargo feature `gemini`"
        ),
        "{err}"
    );
    assert_eq!(sent, 0, "nothing is sent");
}

/// Every build checks the API first: chat completions always passes, and
/// an API passes exactly when its feature is on.
#[test]
fn check_built_follows_the_features() {
    let built = |api| super::wire::check_built(api).is_ok();
    assert!(built(Api::ChatCompletions));
    assert_eq!(built(Api::AnthropicMessages), cfg!(feature = "anthropic"));
    assert_eq!(built(Api::OpenAiResponses), cfg!(feature = "responses"));
    assert_eq!(built(Api::Gemini), cfg!(feature = "gemini"));
}

/// `Api` is data: a history written by a full build (naming every API in
/// its provider data) loads in any build, and a chat-completions agent
/// goes on from it.
#[test]
fn a_history_naming_every_api_loads_in_any_build() {
    let mut messages = vec![Message::user("q")];
    for api in [Api::AnthropicMessages, Api::OpenAiResponses, Api::Gemini] {
        let mut answer = Message::assistant("a");
        answer.provider_data = Some(ProviderData::new(api, "http://x/v1", "m", vec![]));
        messages.extend([answer, Message::user("q")]);
    }
    messages.pop();
    let json = History::new(messages).unwrap().to_json();
    // (The history spells Responses `open_ai_responses`, serde's snake
    // case, not `Api::as_str`'s `openai_responses`.)
    assert!(
        json.contains(r#""api": "anthropic_messages""#)
            && json.contains(r#""api": "open_ai_responses""#)
            && json.contains(r#""api": "gemini""#),
        "{json}"
    );
    let history = History::parse(&json).unwrap();

    let server = FakeServer::start();
    server.push(Reply::text("on chat completions"));
    let mut agent = Agent::builder(server.transport()).build().unwrap();
    agent.load_history(history).unwrap();
    let outcome = agent.run_loop("go on").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("on chat completions"));
}
