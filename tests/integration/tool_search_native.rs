//! Issue 40, the native forms: on Anthropic Messages and OpenAI Responses
//! the deferred tools go with `defer_loading: true` beside the API's own
//! search tool, the server searches (`Reply::with_tool_search`), the model
//! calls what it found, and the next request sends the search back, all
//! on the strict `FakeServer`, plain and streamed; then the attacks on
//! the search blocks (ATTACKS.md: unknown names, a huge list, a cut
//! stream, an error after the search), in bodies and in streams (blocks
//! broken across events, repeated ids and indices, endless searches).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::tool_search::{Threshold, ToolSearch};
use pikuri::{Agent, Api, ErrorKind, HttpConfig, Role};
use serde_json::{Value, json};

use crate::util::{assert_valid_history, fast_http};

const APIS: [Api; 2] = [Api::AnthropicMessages, Api::OpenAiResponses];

/// An agent on `server` speaking `api`: `clock` loaded, three tools
/// deferred (past a threshold of one), the native search on; `calls`
/// counts the runs of `get_weather`.
fn agent(server: &FakeServer, api: Api, stream: bool, calls: &Arc<AtomicUsize>) -> Agent {
    agent_searching(server, api, stream, calls, ToolSearch::new())
}

/// [`agent`] with `search`'s settings (its threshold set to one).
fn agent_searching(
    server: &FakeServer,
    api: Api,
    stream: bool,
    calls: &Arc<AtomicUsize>,
    search: ToolSearch,
) -> Agent {
    agent_on(server, api, stream, calls, search, fast_http())
}

/// [`agent_searching`] with `http` (never retrying).
fn agent_on(
    server: &FakeServer,
    api: Api,
    stream: bool,
    calls: &Arc<AtomicUsize>,
    search: ToolSearch,
    http: HttpConfig,
) -> Agent {
    let counter = Arc::clone(calls);
    let mut c = Agent::builder(server.transport().with_api(api))
        .http(http.with_max_retries(0))
        .streaming(stream)
        .add_tool(FnTool::new(
            "clock",
            "The current time.",
            Parameters::empty(),
            |_, _| Ok("noon".into()),
        ))
        .tool_search(search.threshold(Threshold::Count(1)))
        .add_deferred_tool(FnTool::new(
            "get_weather",
            "The weather in a city.",
            Parameters::builder()
                .required_string("city", "The city.")
                .build(),
            move |_, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok("sunny".into())
            },
        ));
    for name in ["send_mail", "list_files"] {
        c = c.add_deferred_tool(FnTool::new(
            name,
            "Another deferred tool.",
            Parameters::empty(),
            |_, _| Ok("done".into()),
        ));
    }
    c.build().unwrap()
}

/// The tools of a request body, `(name or type, defer_loading)`.
fn sent_tools(body: &Value) -> Vec<(String, bool)> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let name = t["name"].as_str().or(t["type"].as_str()).unwrap();
            (name.to_string(), t["defer_loading"] == true)
        })
        .collect()
}

/// The types of the search blocks (Anthropic) or items (Responses) a
/// request body sends back.
fn sent_searches(api: Api, body: &Value) -> Vec<Value> {
    let all: Vec<&Value> = match api {
        Api::AnthropicMessages => body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .collect(),
        _ => body["input"].as_array().unwrap().iter().collect(),
    };
    all.into_iter()
        .filter(|b| {
            let t = b["type"].as_str().unwrap_or("");
            t == "server_tool_use" || t.starts_with("tool_search")
        })
        .cloned()
        .collect()
}

/// Every request so far accepted by the strict server (as the API would).
fn assert_accepted(server: &FakeServer, case: &str) {
    assert!(
        server.rejections().is_empty(),
        "{case}: {:?}",
        server.rejections()
    );
}

fn search_tool(api: Api) -> &'static str {
    match api {
        Api::AnthropicMessages => "tool_search_tool_bm25",
        _ => "tool_search",
    }
}

#[test]
fn the_api_searches_the_model_calls_what_it_found_and_the_search_goes_back() {
    for api in APIS {
        for stream in [false, true] {
            let server = FakeServer::start();
            server
                .push(
                    Reply::tool_call("get_weather", json!({"city": "Oslo"}))
                        .with_tool_search("weather", &["get_weather"])
                        .with_text("Found it."),
                )
                .push(Reply::text("Sunny in Oslo."));
            let calls = Arc::new(AtomicUsize::new(0));
            let mut agent = agent(&server, api, stream, &calls);
            let out = agent.run_loop("Weather in Oslo?").unwrap();
            let case = format!("{api:?} stream={stream}");
            assert_eq!(out.answer.as_deref(), Some("Sunny in Oslo."), "{case}");
            assert_eq!(calls.load(Ordering::SeqCst), 1, "{case}");
            assert_accepted(&server, &case);
            let sent = server.chat_requests();
            assert_eq!(sent.len(), 2, "{case}");
            let first = sent[0].body.as_ref().unwrap();
            let s = |n: &str, d: bool| (n.to_string(), d);
            assert_eq!(
                sent_tools(first),
                [
                    s("clock", false),
                    s("get_weather", true),
                    s("send_mail", true),
                    s("list_files", true),
                    s(search_tool(api), false),
                ],
                "{case}"
            );
            assert!(sent_searches(api, first).is_empty(), "{case}");
            // The search goes back, whole, with the call it led to.
            let second = sent[1].body.as_ref().unwrap();
            let back = sent_searches(api, second);
            assert_eq!(back.len(), 2, "{case}: {second}");
            let found = match api {
                Api::AnthropicMessages => &back[1]["content"]["tool_references"][0]["tool_name"],
                _ => &back[1]["tools"][0]["name"],
            };
            assert_eq!(found, "get_weather", "{case}");
            // The history: the search is neither text nor a call.
            let answer = agent
                .messages()
                .iter()
                .find(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
                .unwrap();
            assert_eq!(answer.content, "Found it.", "{case}");
            assert_eq!(answer.tool_calls.len(), 1, "{case}");
            let pd = answer.provider_data.as_ref().unwrap();
            assert_eq!(pd.api, api, "{case}");
            assert_eq!(pd.items, back, "{case}");
            assert_valid_history(agent.messages());
            // Found by the API's search, and so after a reload too.
            assert_eq!(agent.found_tools(), ["get_weather"], "{case}");
            let kept = pikuri::History::new(agent.messages().to_vec()).unwrap();
            let mut reloaded = self::agent(&server, api, stream, &calls);
            reloaded.load_history(kept).unwrap();
            assert_eq!(reloaded.found_tools(), ["get_weather"], "{case}");
            server.assert_all_used();
        }
    }
}

#[test]
fn a_search_naming_an_unknown_tool_or_a_huge_list_is_kept_and_the_next_turn_works() {
    for api in APIS {
        for stream in [false, true] {
            let case = format!("{api:?} stream={stream}");
            let many: Vec<String> = (0..3000).map(|i| format!("tool_{i}")).collect();
            let many: Vec<&str> = many.iter().map(String::as_str).collect();
            let server = FakeServer::start();
            server
                // The server names a tool nobody has, and the model calls it.
                .push(Reply::tool_call("ghost", json!({})).with_tool_search("anything", &["ghost"]))
                .push(Reply::text("No such tool."))
                // A search that names thousands of tools.
                .push(Reply::text("Too many.").with_tool_search("all", &many))
                .push(
                    Reply::tool_call("get_weather", json!({"city": "Oslo"}))
                        .with_tool_search("weather", &["get_weather"]),
                )
                .push(Reply::text("Sunny."));
            let calls = Arc::new(AtomicUsize::new(0));
            let mut agent = agent(&server, api, stream, &calls);
            agent.run_loop("Use ghost.").unwrap();
            let observation = agent
                .messages()
                .iter()
                .find(|m| m.role == Role::Tool)
                .unwrap()
                .content
                .clone();
            assert!(observation.contains("ghost"), "{case}: {observation}");
            assert!(
                !agent.found_tools().contains(&"ghost".to_string()),
                "{case}"
            );
            let out = agent.run_loop("List everything.").unwrap();
            assert_eq!(out.answer.as_deref(), Some("Too many."), "{case}");
            let out = agent.run_loop("Weather?").unwrap();
            assert_eq!(out.answer.as_deref(), Some("Sunny."), "{case}");
            assert_eq!(calls.load(Ordering::SeqCst), 1, "{case}");
            assert_accepted(&server, &case);
            // Every search went back in the last request, well-formed.
            let last = server.chat_requests().pop().unwrap();
            assert_eq!(
                sent_searches(api, last.body.as_ref().unwrap()).len(),
                6,
                "{case}"
            );
            assert_valid_history(agent.messages());
        }
    }
}

#[test]
fn a_stream_cut_inside_a_search_or_failing_after_one_leaves_the_history_intact() {
    for api in APIS {
        // Events before the fault: Anthropic's `message_start`, `ping` and
        // the search's start and input; Responses' lifecycle events and
        // the search call added and done.
        let (cut, after) = match api {
            Api::AnthropicMessages => (4, 7),
            _ => (4, 6),
        };
        let search = || {
            Reply::tool_call("get_weather", json!({"city": "Oslo"}))
                .with_tool_search("weather", &["get_weather"])
                .with_chunk_chars(1000)
        };
        let server = FakeServer::start();
        server
            .push(search().cut_after(cut))
            .push(search().error_after(after, "boom"))
            .push(search())
            .push(Reply::text("Sunny."));
        let calls = Arc::new(AtomicUsize::new(0));
        let mut agent = agent(&server, api, true, &calls);
        let e = agent.run_loop("Weather?").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Truncated, "{api:?}: {e}");
        assert_eq!(agent.messages().len(), 1, "{api:?}: only the question");
        let e = agent.retry_turn().unwrap_err();
        assert!(e.to_string().contains("boom"), "{api:?}: {e}");
        assert_eq!(agent.messages().len(), 1, "{api:?}");
        retried_goes_on(&format!("{api:?}"), &server, &mut agent, &calls);
        server.assert_all_used();
    }
}

/// After a failed turn (nothing of it kept): the turn retried runs the
/// call once and answers "Sunny.", every request accepted, the history
/// valid.
fn retried_goes_on(case: &str, server: &FakeServer, agent: &mut Agent, calls: &AtomicUsize) {
    let out = agent.retry_turn().unwrap();
    assert_eq!(out.answer.as_deref(), Some("Sunny."), "{case}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "{case}");
    assert_accepted(server, case);
    assert_valid_history(agent.messages());
}

/// A Messages body whose server searched with the tool search called
/// `search` and found `get_weather`, which the model then calls.
fn searched_with(search: &str, model: &str) -> Reply {
    let body = json!({
        "id": "msg_r", "type": "message", "role": "assistant", "model": model,
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_r", "name": search,
             "input": {"pattern": "(?i)weather"}},
            {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_r",
             "content": {"type": "tool_search_tool_search_result",
                         "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}]}},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5}
    });
    Reply::raw_body(200, "application/json", body.to_string())
}

/// `ToolSearch::regex`: Anthropic's regex search is offered in place of
/// the BM25 one, its search is kept and sent back to the strict server,
/// and a conversation that moves to an agent searching with BM25 sends
/// both search tools (the history's search names the regex one, which
/// the API requires in `tools`; only BM25 went before).
#[test]
fn the_regex_search_is_offered_sent_back_and_kept_after_a_switch() {
    let server = FakeServer::start();
    let model = server.transport().model().unwrap().to_string();
    let calls = Arc::new(AtomicUsize::new(0));
    let api = Api::AnthropicMessages;
    let mut agent = agent_searching(&server, api, false, &calls, ToolSearch::new().regex(true));
    server
        .push(searched_with("tool_search_tool_regex", &model))
        .push(Reply::text("Sunny."));
    agent.run_loop("weather in Oslo?").unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(agent.found_tools(), ["get_weather"]);
    let sent = server.chat_requests();
    let tools = sent_tools(sent[0].body.as_ref().unwrap());
    assert!(
        tools.contains(&("tool_search_tool_regex".to_string(), false)),
        "{tools:?}"
    );
    assert!(
        !tools.iter().any(|(n, _)| n == "tool_search_tool_bm25"),
        "{tools:?}"
    );
    assert_eq!(sent_searches(api, sent[1].body.as_ref().unwrap()).len(), 2);
    assert_accepted(&server, "");

    let mut bm25 = agent_searching(&server, api, false, &calls, ToolSearch::new());
    bm25.load_history(agent.export_history()).unwrap();
    assert_eq!(bm25.found_tools(), ["get_weather"]);
    server.push(Reply::text("Still sunny."));
    bm25.run_loop("and now?").unwrap();
    let last = server.chat_requests().pop().unwrap();
    let tools = sent_tools(last.body.as_ref().unwrap());
    for name in ["tool_search_tool_bm25", "tool_search_tool_regex"] {
        assert!(
            tools.contains(&(name.to_string(), false)),
            "{name}: {tools:?}"
        );
    }
    assert_accepted(&server, "");
    assert_valid_history(bm25.messages());
}

/// A Messages body with `blocks`, then a call of `get_weather`.
fn answer_with(model: &str, mut blocks: Vec<Value>) -> Reply {
    blocks.push(
        json!({"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                       "input": {"city": "Oslo"}}),
    );
    let body = json!({
        "id": "msg_b", "type": "message", "role": "assistant", "model": model,
        "content": blocks, "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 5}
    });
    Reply::raw_body(200, "application/json", body.to_string())
}

/// Search blocks a server breaks (garbage or missing content, an empty,
/// repeated or unknown id, a search never answered, an input that is no
/// object): once kept, each was sent back with every later request, which
/// the strict server (as the API) refuses, so the conversation could not
/// go on. Now they are dropped; the call beside them runs, the next
/// request is accepted, and the history reloads and goes on.
#[test]
fn broken_search_blocks_are_dropped_and_the_conversation_goes_on() {
    let search = |id: &str| {
        json!({"type": "server_tool_use", "id": id, "name": "tool_search_tool_bm25",
               "input": {"query": "weather"}})
    };
    let found = |id: &str, content: Value| json!({"type": "tool_search_tool_result", "tool_use_id": id, "content": content});
    let refs = json!({"type": "tool_search_tool_search_result",
                      "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}]});
    let mut no_input = search("s1");
    no_input["input"] = json!("weather");
    let cases: Vec<(&str, Vec<Value>)> = vec![
        (
            "garbage content",
            vec![search("s1"), found("s1", json!("garbage"))],
        ),
        (
            "no content",
            vec![
                search("s1"),
                json!({"type": "tool_search_tool_result", "tool_use_id": "s1"}),
            ],
        ),
        (
            "bad references",
            vec![
                search("s1"),
                found(
                    "s1",
                    json!({"type": "tool_search_tool_search_result", "tool_references": [{"tool_name": 7}]}),
                ),
            ],
        ),
        ("empty id", vec![search(""), found("", refs.clone())]),
        (
            "repeated id",
            vec![
                search("s1"),
                found("s1", refs.clone()),
                search("s1"),
                found("s1", refs.clone()),
            ],
        ),
        ("unknown id", vec![found("s9", refs.clone())]),
        ("never answered", vec![search("s1")]),
        ("input no object", vec![no_input, found("s1", refs.clone())]),
    ];
    for (what, blocks) in cases {
        let answer = |model: &str| answer_with(model, blocks);
        goes_on(what, Api::AnthropicMessages, false, answer, true);
    }
}

/// What a broken search answer leaves, on a fresh `server` for `api`
/// (strict, as the API) that answers `answer(model)`, then "Sunny.": the
/// call beside the search runs once, every request is accepted, the
/// history is valid, and the conversation goes on in the same agent, or
/// (`reload`) in a fresh one that loads its history. The server, for the
/// requests it received.
fn goes_on(
    what: &str,
    api: Api,
    stream: bool,
    answer: impl FnOnce(&str) -> Reply,
    reload: bool,
) -> FakeServer {
    let server = FakeServer::start();
    let model = server.transport().model().unwrap().to_string();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut agent = agent(&server, api, stream, &calls);
    server.push(answer(&model)).push(Reply::text("Sunny."));
    let out = agent.run_loop("weather in Oslo?");
    assert_accepted(&server, what);
    assert_eq!(out.unwrap().answer.as_deref(), Some("Sunny."), "{what}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "{what}");
    assert_valid_history(agent.messages());
    if reload {
        let mut again = agent_searching(&server, api, stream, &calls, ToolSearch::new());
        again.load_history(agent.export_history()).unwrap();
        agent = again;
    }
    server.push(Reply::text("Still sunny."));
    agent
        .run_loop("and now?")
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_accepted(&server, what);
    server
}

/// The same for Responses search items: a call without arguments, an
/// output with garbage `tools` or of no search.
#[test]
fn broken_responses_search_items_are_dropped_and_the_conversation_goes_on() {
    let call = || {
        json!({"type": "tool_search_call", "id": "tsc_1", "execution": "server",
               "status": "completed", "arguments": {"query": "weather"}})
    };
    let output = |tools: Value| {
        json!({"type": "tool_search_output", "id": "tso_1", "execution": "server",
               "status": "completed", "tools": tools})
    };
    let good = json!([{"type": "function", "name": "get_weather"}]);
    let mut no_arguments = call();
    no_arguments.as_object_mut().unwrap().remove("arguments");
    let cases: Vec<(&str, Vec<Value>)> = vec![
        ("garbage tools", vec![call(), output(json!("garbage"))]),
        (
            "nameless tool",
            vec![call(), output(json!([{"type": "function"}]))],
        ),
        ("output of no search", vec![output(good.clone())]),
        (
            "call without arguments",
            vec![no_arguments, output(good.clone())],
        ),
    ];
    for (what, mut items) in cases {
        items.push(
            json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
                          "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}",
                          "status": "completed"}),
        );
        let answer = |model: &str| {
            let body = json!({"id": "resp_1", "object": "response", "status": "completed",
                              "model": model, "output": items,
                              "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}});
            Reply::raw_body(200, "application/json", body.to_string())
        };
        goes_on(what, Api::OpenAiResponses, false, answer, false);
    }
}

// ------------------------------------------------------------ the same attacks in streams

/// One named SSE event.
fn sse(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A streamed Messages answer: `message_start`, then each block of
/// `blocks` at the next index (its start, one `input_json_delta` per
/// piece, its stop), a call of `get_weather` split the same way, and the
/// end.
fn anthropic_stream(model: &str, blocks: Vec<Block>) -> String {
    let start = json!({"type": "message_start", "message": {
        "id": "msg_s", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 0}}});
    let mut out = sse("message_start", &start);
    let call = json!({"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}});
    let all = blocks
        .into_iter()
        .chain([(call, vec!["{\"city\":", "\"Oslo\"}"])]);
    for (index, (head, pieces)) in all.enumerate() {
        out += &anthropic_block(index, &head, &pieces);
    }
    out += &sse(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                "usage": {"output_tokens": 5}}),
    );
    out + &sse("message_stop", &json!({"type": "message_stop"}))
}

/// One block of a Messages stream at `index`: its start, one
/// `input_json_delta` per piece, its stop.
fn anthropic_block(index: usize, head: &Value, pieces: &[&str]) -> String {
    let mut out = sse(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": head}),
    );
    for p in pieces {
        out += &sse(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": p}}),
        );
    }
    out + &sse(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    )
}

/// A BM25 search's `server_tool_use` as a stream starts it (`input: {}`).
fn search_start(id: &str) -> Value {
    json!({"type": "server_tool_use", "id": id, "name": "tool_search_tool_bm25", "input": {}})
}

/// A `tool_search_tool_result` for `id` with `content`.
fn search_result(id: &str, content: &Value) -> Value {
    json!({"type": "tool_search_tool_result", "tool_use_id": id, "content": content})
}

/// A search result's content naming `get_weather`.
fn found_weather() -> Value {
    json!({"type": "tool_search_tool_search_result",
           "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}]})
}

/// A block of a streamed answer: its start, its input's pieces.
type Block = (Value, Vec<&'static str>);

/// The broken streams: what, the blocks, how many search blocks the
/// history keeps, the input it keeps for the first.
fn broken_streams() -> Vec<(&'static str, Vec<Block>, usize, Value)> {
    let query = vec!["{\"query\":", "\"wea", "ther\"}"];
    vec![
        (
            "input split across events",
            vec![
                (search_start("s1"), query.clone()),
                (search_result("s1", &found_weather()), vec![]),
            ],
            2,
            json!({"query": "weather"}),
        ),
        (
            "input deltas making a string",
            vec![
                (search_start("s1"), vec!["\"wea", "ther\""]),
                (search_result("s1", &found_weather()), vec![]),
            ],
            2,
            json!({}),
        ),
        (
            "input deltas stopping mid-object",
            vec![
                (search_start("s1"), vec!["{\"query\":", "\"wea"]),
                (search_result("s1", &found_weather()), vec![]),
            ],
            2,
            json!({}),
        ),
        (
            "an id repeated in a later block",
            vec![
                (search_start("s1"), query.clone()),
                (search_result("s1", &found_weather()), vec![]),
                (search_start("s1"), query.clone()),
                (search_result("s1", &found_weather()), vec![]),
            ],
            2,
            json!({"query": "weather"}),
        ),
        (
            "a garbage result",
            vec![
                (search_start("s1"), query.clone()),
                (search_result("s1", &json!("garbage")), vec![]),
            ],
            0,
            Value::Null,
        ),
        (
            "the result before its search",
            vec![
                (search_result("s1", &found_weather()), vec![]),
                (search_start("s1"), query.clone()),
            ],
            0,
            Value::Null,
        ),
        (
            "a result of no search",
            vec![(search_result("s9", &found_weather()), vec![])],
            0,
            Value::Null,
        ),
        (
            "a search never answered",
            vec![(search_start("s1"), query.clone())],
            0,
            Value::Null,
        ),
    ]
}

/// Search blocks broken across the events of a stream (an input whose
/// deltas make a string or stop mid-object, an id repeated in a later
/// block, a result that is garbage, comes first, or answers nothing, a
/// search never answered): the history keeps only whole searches, each
/// once, with the input the deltas made when they made an object, so the
/// strict server (as the API) accepts every later request; the call
/// beside them runs and the conversation goes on after a reload.
#[test]
fn broken_search_blocks_in_a_stream_are_dropped_and_the_conversation_goes_on() {
    let api = Api::AnthropicMessages;
    for (what, blocks, kept, input) in broken_streams() {
        let answer = |model: &str| Reply::raw_sse(anthropic_stream(model, blocks));
        let server = goes_on(what, api, true, answer, true);
        // The request after the broken answer: what its history kept.
        let second = &server.chat_requests()[1];
        let back = sent_searches(api, second.body.as_ref().unwrap());
        assert_eq!(back.len(), kept, "{what}: {back:?}");
        if kept > 0 {
            assert_eq!(back[0]["input"], input, "{what}");
        }
    }
}

/// Two search blocks started at one index (ids and indices repeated
/// within one answer): the stream is a protocol error, nothing of it stays
/// in the history, and the turn retried goes on.
#[test]
fn a_search_block_started_twice_at_one_index_is_refused_whole() {
    let api = Api::AnthropicMessages;
    let server = FakeServer::start();
    let model = server.transport().model().unwrap().to_string();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut agent = agent(&server, api, true, &calls);
    // The search at index 0, the call at 1, then a result at 0 again.
    let twice = anthropic_stream(&model, vec![(search_start("s1"), vec!["{}"])]).replacen(
        "event: message_delta",
        &format!(
            "{}event: message_delta",
            anthropic_block(0, &search_result("s1", &found_weather()), &[])
        ),
        1,
    );
    server
        .push(Reply::raw_sse(twice))
        .push(search())
        .push(Reply::text("Sunny."));
    let e = agent.run_loop("weather in Oslo?").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");
    assert!(e.to_string().contains("started twice"), "{e}");
    assert_eq!(agent.messages().len(), 1, "only the question");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    retried_goes_on("started twice", &server, &mut agent, &calls);
}

/// A search answer that finds `get_weather`, which the model calls.
fn search() -> Reply {
    Reply::tool_call("get_weather", json!({"city": "Oslo"}))
        .with_tool_search("weather", &["get_weather"])
}

/// A server that streams tool searches without end (each a search and its
/// result, every one well-formed and progress): the answer is bounded by
/// `max_body_bytes`, a protocol error on both APIs; nothing of it stays in
/// the history, and the turn retried goes on. (The stream does end, past
/// the bound, so that without the bound the run would complete.)
#[test]
fn endless_search_events_end_at_the_body_bound() {
    const BOUND: u64 = 256 * 1024;
    for api in APIS {
        let endless = (0..2_000).fold(
            Reply::tool_call("get_weather", json!({"city": "Oslo"})),
            |r, i| r.with_tool_search(&format!("weather {i}"), &["get_weather"]),
        );
        let server = FakeServer::start();
        server
            .push(endless)
            .push(search())
            .push(Reply::text("Sunny."));
        let calls = Arc::new(AtomicUsize::new(0));
        let http = fast_http().with_max_body_bytes(BOUND);
        let mut agent = agent_on(&server, api, true, &calls, ToolSearch::new(), http);
        let e = agent.run_loop("weather in Oslo?").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{api:?}: {e}");
        assert!(
            e.to_string().contains(&format!("exceeds {BOUND} bytes")),
            "{api:?}: {e}"
        );
        assert_eq!(agent.messages().len(), 1, "{api:?}: only the question");
        assert_eq!(calls.load(Ordering::SeqCst), 0, "{api:?}");
        retried_goes_on(&format!("{api:?}"), &server, &mut agent, &calls);
    }
}

/// A streamed Responses answer: `response.created`, each `(phase, output
/// index, item)` as a `response.output_item.{phase}` event, a call of
/// `get_weather`, and `response.completed` (whose `output` a decoder that
/// streamed items does not read).
fn responses_stream(model: &str, events: Vec<(&str, usize, Value)>) -> String {
    let response = |status: &str| {
        json!({"id": "resp_s", "object": "response", "status": status, "model": model,
               "output": [], "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}})
    };
    let mut out = sse(
        "response.created",
        &json!({"type": "response.created", "response": response("in_progress")}),
    );
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
                      "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}",
                      "status": "completed"});
    let next = events.iter().map(|e| e.1 + 1).max().unwrap_or(0);
    let all = events
        .into_iter()
        .chain([("added", next, call.clone()), ("done", next, call)]);
    for (phase, index, item) in all {
        let kind = format!("response.output_item.{phase}");
        out += &sse(
            &kind,
            &json!({"type": kind, "output_index": index, "item": item}),
        );
    }
    out + &sse(
        "response.completed",
        &json!({"type": "response.completed", "response": response("completed")}),
    )
}

/// Responses search items broken across the events of a stream (a call
/// announced without its arguments, done with them or without, or never
/// done): the history keeps whole searches only, so the strict server
/// accepts every later request, and the conversation goes on.
#[test]
fn broken_responses_search_items_in_a_stream_are_dropped_and_the_conversation_goes_on() {
    let call = |arguments: bool| {
        let mut c = json!({"type": "tool_search_call", "id": "tsc_1", "execution": "server",
                           "status": "completed", "arguments": {"query": "weather"}});
        if !arguments {
            c.as_object_mut().unwrap().remove("arguments");
        }
        c
    };
    let output = json!({"type": "tool_search_output", "id": "tso_1", "execution": "server",
                        "status": "completed", "tools": [{"type": "function", "name": "get_weather"}]});
    let answered = |events: Vec<(&'static str, usize, Value)>| {
        let mut events = events;
        events.extend([("added", 1, output.clone()), ("done", 1, output.clone())]);
        events
    };
    let cases = [
        (
            "a call announced without arguments, done with them",
            answered(vec![("added", 0, call(false)), ("done", 0, call(true))]),
            2,
        ),
        (
            "a call done without arguments",
            answered(vec![("added", 0, call(false)), ("done", 0, call(false))]),
            0,
        ),
        (
            "a call announced, never done",
            answered(vec![("added", 0, call(false))]),
            0,
        ),
    ];
    let api = Api::OpenAiResponses;
    for (what, events, kept) in cases {
        let answer = |model: &str| Reply::raw_sse(responses_stream(model, events));
        let server = goes_on(what, api, true, answer, true);
        let second = &server.chat_requests()[1];
        let back = sent_searches(api, second.body.as_ref().unwrap());
        assert_eq!(back.len(), kept, "{what}: {back:?}");
    }
}
