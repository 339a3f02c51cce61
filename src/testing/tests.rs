//! End-to-end tests of the fake server over real loopback sockets, with a
//! tiny raw HTTP/1.1 client.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{FakeServer, Reply};

/// A response as the test client read it.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
    /// The body ended properly (last chunk, full length, or EOF when
    /// close-delimited).
    complete: bool,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("response body is JSON")
    }

    /// The payloads of the `data:` lines, in order.
    fn data(&self) -> Vec<String> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }

    /// The `data:` payloads that parse as JSON.
    fn chunks(&self) -> Vec<Value> {
        self.data()
            .iter()
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect()
    }
}

/// One keep-alive connection to the server.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn connect(server: &FakeServer) -> Client {
        let stream = TcpStream::connect(server.local_addr()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            writer: stream.try_clone().unwrap(),
            reader: BufReader::new(stream),
        }
    }

    fn send(&mut self, method: &str, path: &str, body: &str, extra: &[(&str, &str)]) {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        for (n, v) in extra {
            req.push_str(n);
            req.push_str(": ");
            req.push_str(v);
            req.push_str("\r\n");
        }
        if !body.is_empty() {
            req.push_str("Content-Type: application/json\r\n");
            req.push_str("Content-Length: ");
            req.push_str(&body.len().to_string());
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.writer.write_all(req.as_bytes()).unwrap();
    }

    fn get(&mut self, path: &str) -> Response {
        self.send("GET", path, "", &[]);
        self.read().unwrap()
    }

    fn chat(&mut self, body: &Value) -> Response {
        self.send("POST", "/v1/chat/completions", &body.to_string(), &[]);
        self.read().unwrap()
    }

    fn line(&mut self) -> io::Result<Option<String>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        Ok(Some(line.trim_end_matches(['\r', '\n']).to_string()))
    }

    fn read(&mut self) -> io::Result<Response> {
        let (status, headers) = loop {
            let status_line = self.line()?.ok_or(io::ErrorKind::UnexpectedEof)?;
            let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
            let mut headers = Vec::new();
            while let Some(l) = self.line()? {
                if l.is_empty() {
                    break;
                }
                let (n, v) = l.split_once(':').unwrap();
                headers.push((n.to_ascii_lowercase(), v.trim().to_string()));
            }
            if status != 100 {
                break (status, headers);
            }
        };
        let mut resp = Response {
            status,
            headers,
            body: String::new(),
            complete: false,
        };
        if resp.header("transfer-encoding") == Some("chunked") {
            let mut body = Vec::new();
            while let Some(size) = self.line()? {
                let size = usize::from_str_radix(&size, 16).unwrap();
                if size == 0 {
                    self.line()?;
                    resp.complete = true;
                    break;
                }
                let mut buf = vec![0; size + 2];
                self.reader.read_exact(&mut buf)?;
                body.extend_from_slice(&buf[..size]);
            }
            resp.body = String::from_utf8(body).unwrap();
        } else if let Some(len) = resp.header("content-length") {
            let mut buf = vec![0; len.parse().unwrap()];
            self.reader.read_exact(&mut buf)?;
            resp.body = String::from_utf8(buf).unwrap();
            resp.complete = true;
        } else {
            self.reader.read_to_string(&mut resp.body)?;
            resp.complete = true;
        }
        Ok(resp)
    }

    /// Whether the server closed the connection (EOF on the next read).
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.reader.read(&mut b), Ok(0) | Err(_))
    }
}

fn user_chat(stream: bool, include_usage: bool) -> Value {
    let mut body = json!({
        "model": "fake-model",
        "messages": [{ "role": "user", "content": "hi" }],
    });
    if stream {
        body["stream"] = json!(true);
    }
    if include_usage {
        body["stream_options"] = json!({ "include_usage": true });
    }
    body
}

#[test]
fn json_reply_shape() {
    let server = FakeServer::start();
    server.push(
        Reply::text("Hello there")
            .with_reasoning("thinking")
            .with_usage(100, 7)
            .with_cached_tokens(40),
    );
    server.push(Reply::tool_call("read", json!({ "path": "a" })).with_model("other"));
    let mut c = Client::connect(&server);

    let r = c.chat(&user_chat(false, false));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["id"], "chatcmpl-fake-1");
    assert_eq!(v["model"], "fake-model");
    assert!(v["created"].as_u64().unwrap() > 0);
    let choice = &v["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "Hello there");
    assert_eq!(choice["message"]["reasoning_content"], "thinking");
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(
        v["usage"],
        json!({
            "prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
            "prompt_tokens_details": { "cached_tokens": 40 },
        })
    );

    let v = c.chat(&user_chat(false, false)).json();
    assert_eq!(v["model"], "other");
    let msg = &v["choices"][0]["message"];
    assert_eq!(msg["content"], Value::Null);
    assert_eq!(msg["tool_calls"][0]["id"], "call_1");
    assert_eq!(msg["tool_calls"][0]["type"], "function");
    assert_eq!(msg["tool_calls"][0]["function"]["name"], "read");
    assert_eq!(
        msg["tool_calls"][0]["function"]["arguments"],
        r#"{"path":"a"}"#
    );
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    // Default usage: 10 prompt tokens, no content → 1 completion token.
    assert_eq!(v["usage"]["completion_tokens"], 1);
    server.assert_all_used();
}

#[test]
fn streamed_text_sequence() {
    let server = FakeServer::start();
    server.push(Reply::text("Hello, world").with_reasoning("hm").repeat(2));
    let mut c = Client::connect(&server);

    let r = c.chat(&user_chat(true, false));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(r.complete);
    let data = r.data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks = r.chunks();
    let deltas: Vec<&Value> = chunks.iter().map(|c| &c["choices"][0]["delta"]).collect();
    assert_eq!(deltas[0], &json!({ "role": "assistant", "content": "" }));
    assert_eq!(deltas[1], &json!({ "reasoning_content": "hm" }));
    assert_eq!(deltas[2], &json!({ "content": "Hell" }));
    assert_eq!(deltas[3], &json!({ "content": "o, w" }));
    assert_eq!(deltas[4], &json!({ "content": "orld" }));
    assert_eq!(deltas[5], &json!({}));
    assert_eq!(chunks[5]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks.len(), 6, "no usage chunk unless include_usage");
    for ch in &chunks {
        assert_eq!(ch["object"], "chat.completion.chunk");
        assert_eq!(ch["id"], "chatcmpl-fake-1");
        assert_eq!(ch["model"], "fake-model");
        assert!(ch["created"].is_u64());
        assert!(ch.get("usage").is_none());
    }

    // Same connection, now with include_usage.
    let r = c.chat(&user_chat(true, true));
    let chunks = r.chunks();
    assert_eq!(chunks.len(), 7);
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    // "Hello, world" is 12 chars: 12 / 4 + 1.
    assert_eq!(
        usage["usage"],
        json!({ "prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14 })
    );
    assert!(chunks[..6].iter().all(|c| c["usage"].is_null()));
    assert_eq!(r.data().last().map(String::as_str), Some("[DONE]"));
    assert_eq!(server.remaining(), 0);
}

#[test]
fn streamed_tool_calls() {
    let server = FakeServer::start();
    server.push(
        Reply::tool_calls(vec![
            ("search", json!({ "query": "rust sse" })),
            ("read", json!({ "path": "src/lib.rs" })),
        ])
        .with_text("Checking.")
        .with_id("call_search")
        .with_chunk_chars(5),
    );
    let r = Client::connect(&server).chat(&user_chat(true, false));
    let chunks = r.chunks();
    let mut content = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for ch in &chunks {
        let delta = &ch["choices"][0]["delta"];
        if let Some(s) = delta["content"].as_str() {
            content.push_str(s);
        }
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            let i = tc["index"].as_u64().unwrap() as usize;
            if let Some(id) = tc["id"].as_str() {
                assert_eq!(i, calls.len(), "ids arrive in index order");
                assert_eq!(tc["type"], "function");
                assert_eq!(tc["function"]["arguments"], "");
                let name = tc["function"]["name"].as_str().unwrap();
                calls.push((id.into(), name.into(), String::new()));
            } else {
                assert!(tc.get("id").is_none() && tc["function"].get("name").is_none());
                calls[i]
                    .2
                    .push_str(tc["function"]["arguments"].as_str().unwrap());
                assert!(
                    tc["function"]["arguments"]
                        .as_str()
                        .unwrap()
                        .chars()
                        .count()
                        <= 5
                );
            }
        }
    }
    assert_eq!(content, "Checking.");
    assert_eq!(calls[0].0, "call_search");
    assert_eq!(calls[1].0, "call_1");
    assert_eq!(calls[0].1, "search");
    assert_eq!(calls[1].1, "read");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].2).unwrap(),
        json!({ "query": "rust sse" })
    );
    assert_eq!(calls[1].2, r#"{"path":"src/lib.rs"}"#);
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
}

#[test]
fn status_reply_with_retry_after_keeps_connection() {
    let server = FakeServer::start();
    server.push(Reply::status(429, "slow down").with_retry_after(3));
    server.push(Reply::text("ok").with_header("X-Request-Id", "abc"));
    let mut c = Client::connect(&server);
    let r = c.chat(&user_chat(true, true));
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("3"));
    let v = r.json();
    assert_eq!(v["error"]["message"], "slow down");
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert_eq!(v["error"]["code"], 429);

    let r = c.chat(&user_chat(false, false));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-request-id"), Some("abc"));
    assert_eq!(server.chat_requests().len(), 2);
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection() {
    let server = FakeServer::start();
    server.push(Reply::text("one")).push(Reply::text("two"));
    let mut c = Client::connect(&server);
    let a = c.chat(&user_chat(false, false));
    assert_eq!(a.header("connection"), Some("keep-alive"));
    let b = c.chat(&user_chat(true, false));
    assert_eq!(a.json()["choices"][0]["message"]["content"], "one");
    assert!(b.body.contains(r#""content":"two""#));
    assert_eq!(c.get("/health").json(), json!({ "status": "ok" }));
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn connection_close_is_honoured() {
    let server = FakeServer::start();
    server.push(Reply::text("bye"));
    let mut c = Client::connect(&server);
    let body = user_chat(false, false).to_string();
    c.send(
        "POST",
        "/v1/chat/completions",
        &body,
        &[("Connection", "close")],
    );
    let r = c.read().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed());
}

#[test]
fn cut_after_closes_mid_stream() {
    let server = FakeServer::start();
    server.push(Reply::text("abcdefghijkl").cut_after(2));
    let mut c = Client::connect(&server);
    let r = c.chat(&user_chat(true, true));
    assert!(!r.complete, "the chunked body must not end properly");
    let data = r.data();
    assert_eq!(data.len(), 2);
    assert!(!data.contains(&"[DONE]".to_string()));
    assert!(
        r.chunks()
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null())
    );
    assert!(c.closed());
}

#[test]
fn cut_after_past_the_end_drops_only_done() {
    let server = FakeServer::start();
    server.push(Reply::text("ab").cut_after(100));
    let r = Client::connect(&server).chat(&user_chat(true, false));
    assert!(!r.complete);
    assert_eq!(r.chunks().len(), 3); // role, content, finish
    assert!(!r.data().contains(&"[DONE]".to_string()));
}

#[test]
fn malformed_after_then_continues() {
    let server = FakeServer::start();
    server.push(Reply::text("abcdefgh").malformed_after(1));
    let r = Client::connect(&server).chat(&user_chat(true, false));
    assert!(r.complete);
    let data = r.data();
    assert_eq!(data[1], "{not json");
    assert_eq!(data.len(), 6); // role, bad, 2 content, finish, [DONE]
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
}

#[test]
fn garbage_is_interleaved_but_content_survives() {
    let server = FakeServer::start();
    server.push(Reply::text("The quick brown fox").with_garbage());
    let r = Client::connect(&server).chat(&user_chat(true, true));
    assert!(r.complete);
    for needle in [
        "\n: ",
        "event: ping\n",
        "id: 7\n",
        "retry: 10\n",
        "\n\n\n",
        "x_fake_extra",
        "system_fingerprint",
    ] {
        assert!(r.body.contains(needle), "missing {needle:?} in {}", r.body);
    }
    let chunks = r.chunks();
    assert!(chunks.iter().any(|c| c.get("choices").is_none()));
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "The quick brown fox");
    assert!(chunks.iter().any(|c| c["usage"]["prompt_tokens"] == 10));
    assert_eq!(r.data().last().map(String::as_str), Some("[DONE]"));
}

#[test]
fn hang_times_out_and_drop_unblocks() {
    let server = FakeServer::start();
    server.push(Reply::hang());
    let mut c = Client::connect(&server);
    c.send(
        "POST",
        "/v1/chat/completions",
        &user_chat(false, false).to_string(),
        &[],
    );
    c.writer
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let err = c.read().unwrap_err();
    assert!(
        matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ),
        "{err:?}"
    );
    assert_eq!(server.chat_requests().len(), 1, "the request was recorded");

    c.writer
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let reader = thread::spawn(move || {
        let start = Instant::now();
        let closed = c.closed();
        (closed, start.elapsed())
    });
    thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    drop(server);
    assert!(start.elapsed() < Duration::from_secs(3), "drop was slow");
    let (closed, waited) = reader.join().unwrap();
    assert!(closed);
    assert!(waited < Duration::from_secs(5));
}

#[test]
fn hang_after_sends_some_chunks_then_goes_silent() {
    let server = FakeServer::start();
    server.push(Reply::text("abcdefgh").hang_after(2));
    let mut c = Client::connect(&server);
    c.send(
        "POST",
        "/v1/chat/completions",
        &user_chat(true, false).to_string(),
        &[],
    );
    c.writer
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.reader.read(&mut buf) {
            Ok(0) => panic!("connection closed; expected a hang"),
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(e) => {
                assert!(matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ));
                break;
            }
        }
    }
    assert_eq!(seen.matches("data: ").count(), 2, "{seen}");
}

#[test]
fn delays_are_applied() {
    let server = FakeServer::start();
    server.push(Reply::text("abcdefgh").with_delay(Duration::from_millis(100)));
    server.push(Reply::text("abcdefgh").with_chunk_delay(Duration::from_millis(30)));
    let mut c = Client::connect(&server);
    let start = Instant::now();
    c.chat(&user_chat(false, false));
    assert!(start.elapsed() >= Duration::from_millis(100));
    let start = Instant::now();
    let r = c.chat(&user_chat(true, false));
    assert!(r.complete);
    // role, 2 content, finish: 4 delays.
    assert!(start.elapsed() >= Duration::from_millis(120));
}

#[test]
fn strict_mode_rejects_unanswered_tool_call_without_consuming() {
    let server = FakeServer::start();
    server.push(Reply::text("fine"));
    let bad = json!({
        "model": "fake-model",
        "messages": [
            { "role": "user", "content": "hi" },
            { "role": "assistant", "content": null, "tool_calls": [
                { "id": "call_1", "type": "function", "function": { "name": "f", "arguments": "{}" } },
            ]},
            { "role": "user", "content": "and?" },
        ],
    });
    let mut c = Client::connect(&server);
    let r = c.chat(&bad);
    assert_eq!(r.status, 400);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains("strict mode"), "{msg}");
    assert!(msg.contains("request #1"), "{msg}");
    assert!(msg.contains("call_1 (f)"), "{msg}");
    assert_eq!(
        server.remaining(),
        1,
        "a rejection does not consume the reply"
    );
    assert_eq!(server.rejections(), vec![msg]);

    // Not JSON at all.
    c.send("POST", "/v1/chat/completions", "{nope", &[]);
    let r = c.read().unwrap();
    assert_eq!(r.status, 400);
    assert!(r.body.contains("not valid JSON"));

    // Lenient mode lets the same history through.
    server.set_strict(false);
    let r = c.chat(&bad);
    assert_eq!(r.status, 200);
    assert_eq!(server.remaining(), 0);
    assert_eq!(server.chat_requests().len(), 3);
}

#[test]
fn too_many_requests_get_500() {
    let server = FakeServer::start();
    server.push(Reply::text("only one"));
    let mut c = Client::connect(&server);
    assert_eq!(c.chat(&user_chat(false, false)).status, 200);
    let r = c.chat(&user_chat(false, false));
    assert_eq!(r.status, 500);
    assert_eq!(
        r.json()["error"]["message"],
        "FakeServer: no scripted reply left for request #2"
    );
    assert_eq!(server.unexpected_requests(), 1);
    server.assert_all_used();
}

#[test]
fn props_models_and_unknown_paths() {
    let server = FakeServer::start();
    let mut c = Client::connect(&server);
    let props = c.get("/props?model=fake-model").json();
    assert_eq!(props["default_generation_settings"]["n_ctx"], 4096);
    assert_eq!(props["total_slots"], 1);
    assert_eq!(props["model_alias"], "fake-model");

    server.set_context_size(Some(32768));
    server.set_model_id("qwen3-8b");
    assert_eq!(server.transport().model(), Some("qwen3-8b"));
    assert_eq!(
        server.transport().api_base(),
        Some(server.base_url().as_str())
    );
    let models = c.get("/v1/models").json();
    assert_eq!(models["object"], "list");
    let m = &models["data"][0];
    assert_eq!(m["id"], "qwen3-8b");
    assert_eq!(m["object"], "model");
    assert_eq!(m["owned_by"], "fake");
    assert_eq!(m["meta"]["n_ctx_train"], 32768);
    assert_eq!(m["meta"]["n_ctx"], 32768);
    assert_eq!(
        c.get("/props").json()["default_generation_settings"]["n_ctx"],
        32768
    );

    server.set_context_size(None);
    assert_eq!(c.get("/props").status, 404);
    assert!(c.get("/v1/models").json()["data"][0].get("meta").is_none());
    let r = c.get("/nope");
    assert_eq!(r.status, 404);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/nope")
    );

    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/props?model=fake-model",
            "/v1/models",
            "/props",
            "/props",
            "/v1/models",
            "/nope"
        ]
    );
    assert!(server.chat_requests().is_empty());
}

#[test]
fn chunked_request_body_with_expect_continue() {
    let server = FakeServer::start();
    server.push(Reply::text("got it"));
    let mut c = Client::connect(&server);
    let body = user_chat(false, false).to_string();
    let (a, b) = body.split_at(10);
    write!(
        c.writer,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer sk-test\r\n\
         Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    )
    .unwrap();
    assert_eq!(c.line().unwrap().unwrap(), "HTTP/1.1 100 Continue");
    assert_eq!(c.line().unwrap().unwrap(), "");
    write!(
        c.writer,
        "{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    )
    .unwrap();
    let r = c.read().unwrap();
    assert_eq!(r.status, 200);
    let req = &server.chat_requests()[0];
    assert_eq!(req.raw_body, body);
    assert_eq!(req.messages()[0]["content"], "hi");
    assert_eq!(req.header("authorization"), Some("Bearer sk-test"));
    assert!(!req.is_stream());
}

#[test]
fn recorded_request_helpers() {
    let server = FakeServer::start();
    server.push(Reply::text("x"));
    let body = json!({
        "model": "fake-model",
        "stream": true,
        "messages": [{ "role": "system", "content": "s" }, { "role": "user", "content": "u" }],
        "tools": [
            { "type": "function", "function": { "name": "read_file", "parameters": {} } },
            { "type": "function", "function": { "name": "grep", "parameters": {} } },
        ],
    });
    Client::connect(&server).chat(&body);
    let req = &server.chat_requests()[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/chat/completions");
    assert!(req.is_stream());
    assert_eq!(req.tool_names(), ["read_file", "grep"]);
    assert_eq!(req.messages().len(), 2);
    assert_eq!(req.header("Content-Type"), Some("application/json"));
    assert_eq!(req.body.as_ref(), Some(&body));
}

#[test]
fn raw_replies_are_verbatim() {
    let server = FakeServer::start();
    let sse = "data: {\"choices\":[]}\n\nevent: x\ndata: [DONE]\n\n";
    server.push(Reply::raw_sse(sse));
    server.push(Reply::raw_sse(sse).with_chunk_delay(Duration::from_millis(1)));
    server.push(Reply::raw_body(502, "text/html", "<h1>Bad Gateway</h1>"));
    let mut c = Client::connect(&server);
    for _ in 0..2 {
        let r = c.chat(&user_chat(true, false));
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        assert_eq!(r.body, sse);
    }
    let r = c.chat(&user_chat(false, false));
    assert_eq!(r.status, 502);
    assert_eq!(r.header("content-type"), Some("text/html"));
    assert_eq!(r.body, "<h1>Bad Gateway</h1>");
}

#[test]
fn auto_call_ids_count_across_replies() {
    let server = FakeServer::start();
    server.push(Reply::tool_call("f", json!({})).repeat(2));
    let mut c = Client::connect(&server);
    let ids: Vec<Value> = (0..2)
        .map(|_| {
            c.chat(&user_chat(false, false)).json()["choices"][0]["message"]["tool_calls"][0]["id"]
                .clone()
        })
        .collect();
    assert_eq!(ids, [json!("call_1"), json!("call_2")]);
}

#[test]
fn raw_tool_call_arguments_are_verbatim() {
    let server = FakeServer::start();
    server.push(Reply::raw_tool_call("f", "{\"a\": 1,"));
    let v = Client::connect(&server)
        .chat(&user_chat(false, false))
        .json();
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"a\": 1,"
    );
}

#[test]
fn reasoning_field_can_be_renamed() {
    let server = FakeServer::start();
    server.push(
        Reply::text("a")
            .with_reasoning("r")
            .with_reasoning_field("reasoning")
            .with_finish_reason("length"),
    );
    let r = Client::connect(&server).chat(&user_chat(true, false));
    assert!(r.body.contains(r#""reasoning":"r""#));
    assert!(!r.body.contains("reasoning_content"));
    assert!(r.body.contains(r#""finish_reason":"length""#));
}

#[test]
#[should_panic(expected = "2 scripted reply(ies) never used")]
fn assert_all_used_lists_unused() {
    let server = FakeServer::start();
    server
        .push(Reply::text("unused"))
        .push(Reply::tool_call("grep", json!({})));
    server.assert_all_used();
}

#[test]
fn debug_and_thread_safety() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<FakeServer>();
    assert_send_sync::<Reply>();
    assert_send_sync::<super::Recorder>();
    assert_send_sync::<super::Cassette>();
    let server = FakeServer::start();
    let dbg = format!("{server:?}");
    assert!(dbg.starts_with("FakeServer {"), "{dbg}");
    assert!(dbg.contains("strict: true"), "{dbg}");
}

#[test]
fn bad_http_gets_400_and_close() {
    let server = FakeServer::start();
    let mut c = Client::connect(&server);
    c.writer.write_all(b"NOT HTTP\r\n\r\n").unwrap();
    let r = c.read().unwrap();
    assert_eq!(r.status, 400);
    assert!(c.closed());
}

#[test]
fn connections_are_served_concurrently_and_drop_is_prompt() {
    let server = FakeServer::start();
    server.push(Reply::hang());
    server.push(Reply::text("second"));
    server.push(Reply::text("slow").with_chunk_delay(Duration::from_secs(60)));
    let mut hung = Client::connect(&server);
    hung.send(
        "POST",
        "/v1/chat/completions",
        &user_chat(false, false).to_string(),
        &[],
    );
    // Wait until the hung request has taken its reply.
    let start = Instant::now();
    while server.remaining() == 3 {
        assert!(start.elapsed() < Duration::from_secs(5));
        thread::sleep(Duration::from_millis(5));
    }
    let r = Client::connect(&server).chat(&user_chat(false, false));
    assert_eq!(r.json()["choices"][0]["message"]["content"], "second");

    // A stream sleeping between chunks does not hold up drop.
    let mut slow = Client::connect(&server);
    slow.send(
        "POST",
        "/v1/chat/completions",
        &user_chat(true, false).to_string(),
        &[],
    );
    while server.remaining() == 1 {
        assert!(start.elapsed() < Duration::from_secs(5));
        thread::sleep(Duration::from_millis(5));
    }
    let start = Instant::now();
    drop(server);
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(hung.closed());
    let r = slow.read().unwrap();
    assert!(!r.complete);
}

/// The crate's own HTTP client (ureq) against the server: streamed and plain
/// replies on one pooled connection, then a scripted error status.
#[test]
fn works_with_ureq() {
    let server = FakeServer::start();
    server.push(Reply::text("streamed answer").with_garbage());
    server.push(Reply::text("plain answer"));
    server.push(Reply::status(503, "busy"));
    let agent = ureq::Agent::new_with_defaults();
    let url = format!("{}/chat/completions", server.base_url());

    let mut resp = agent
        .post(&url)
        .header("Content-Type", "application/json")
        .send(user_chat(true, true).to_string())
        .unwrap();
    let body = resp.body_mut().read_to_string().unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");

    let mut resp = agent
        .post(&url)
        .header("Content-Type", "application/json")
        .send(user_chat(false, false).to_string())
        .unwrap();
    let v: Value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "plain answer");

    let err = agent
        .post(&url)
        .header("Content-Type", "application/json")
        .send(user_chat(false, false).to_string())
        .unwrap_err();
    assert!(matches!(err, ureq::Error::StatusCode(503)), "{err:?}");

    let props: Value = serde_json::from_str(
        &agent
            .get(&format!("{}/props", server.root_url()))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(props["default_generation_settings"]["n_ctx"], 4096);
    server.assert_all_used();
}

#[test]
fn respond_with_answers_after_the_script_and_survives_a_panic() {
    use crate::{Agent, HttpConfig};
    let server = FakeServer::start();
    server.push(Reply::text("scripted"));
    server.respond_with(|req| {
        let last = req.messages().last().cloned().unwrap_or_default();
        assert_ne!(last["content"], "boom", "the host's function fails");
        Reply::text(format!(
            "computed for {}",
            last["content"].as_str().unwrap_or("")
        ))
    });
    let mut agent = Agent::builder(server.transport())
        .http(HttpConfig::default().with_max_retries(0))
        .build()
        .unwrap();
    assert_eq!(
        agent.run_loop("a").unwrap().answer.as_deref(),
        Some("scripted")
    );
    assert_eq!(
        agent.run_loop("b").unwrap().answer.as_deref(),
        Some("computed for b")
    );
    let err = agent.run_loop("boom").unwrap_err();
    assert_eq!(err.status(), Some(500));
    assert!(
        err.to_string()
            .contains("respond_with function panicked on request #3"),
        "{err}"
    );
    // The server still answers, and dropping it does not report a panicked thread.
    assert_eq!(
        agent.run_loop("c").unwrap().answer.as_deref(),
        Some("computed for c")
    );
    assert_eq!(server.unexpected_requests(), 0);
    server.assert_all_used();
}

/// Issue 38, item 21: a cassette recorded with a real model replays
/// through `FakeServer::transport()` with no step of the test's own: the
/// transport names the recorded model, not `fake-model`.
#[test]
fn a_cassette_replays_through_the_servers_own_transport() {
    use super::{Cassette, Recorder};
    use crate::Agent;
    let upstream = FakeServer::start();
    upstream.push(Reply::text("Recorded answer."));
    let recorder = Recorder::start(&upstream.base_url());
    let out = Agent::builder(recorder.transport_for("qwen3-8b"))
        .build()
        .unwrap()
        .run_loop("Hi")
        .unwrap();
    assert_eq!(out.answer.as_deref(), Some("Recorded answer."));
    let cassette = Cassette::parse(&recorder.cassette().to_json()).unwrap();
    assert_eq!(cassette.recorded_model(), Some("qwen3-8b"));

    let replay = FakeServer::from_cassette(cassette);
    assert_eq!(replay.transport().model(), Some("qwen3-8b"));
    let out = Agent::builder(replay.transport())
        .build()
        .unwrap()
        .run_loop("Hi")
        .unwrap();
    assert_eq!(out.answer.as_deref(), Some("Recorded answer."));
    assert!(replay.mismatches().is_empty());
    replay.assert_all_used();
    // A cassette without a model request leaves the model id alone.
    let empty = FakeServer::from_cassette(Cassette::new());
    assert_eq!(empty.transport().model(), Some("fake-model"));
}
