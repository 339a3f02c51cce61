//! What a [`FakeServer`](super::FakeServer) answers: its [`Responder`].
//!
//! In order: routes set with `set_route`, then a loaded cassette, then for
//! chat completions the scripted replies (after strict validation) and, once
//! they run out, the `respond_with` function, then the built-in
//! llama.cpp/OpenAI routes. The [module docs](super#what-it-serves)
//! describe the result; this file is the one place that decides it.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::caches::{self, Caches};
use super::cassette::{self, Replay};
use super::conn::{Answer, Scripted};
use super::render::{self, Meta};
use super::render_any;
use super::reply::{Kind, Reply};
use super::request::RecordedRequest;
use super::server::{Reaction, Responder};
use super::strict;
use crate::Api;

/// The script, the cassette and the settings of a `FakeServer`.
#[derive(Debug)]
pub(super) struct Script {
    pub(super) state: Mutex<State>,
}

/// Everything a `FakeServer`'s answers depend on.
#[derive(Debug)]
pub(super) struct State {
    pub(super) replies: VecDeque<Reply>,
    /// Chat requests seen so far, rejected ones included.
    pub(super) chat_count: usize,
    pub(super) unexpected: usize,
    pub(super) rejections: Vec<String>,
    pub(super) n_ctx: Option<u64>,
    pub(super) model_id: String,
    pub(super) strict: bool,
    /// Auto-named tool calls served so far (`call_<n>`).
    pub(super) auto_calls: u64,
    /// Fixed answers set with `FakeServer::set_route`, checked first.
    pub(super) routes: Vec<(String, String, u16, Value)>,
    /// The cassette being replayed, if any.
    pub(super) replay: Option<Replay>,
    /// Answers chat requests once `replies` is empty (`respond_with`).
    pub(super) fallback: Option<Fallback>,
    /// Gemini's `cachedContents`.
    pub(super) caches: Caches,
    /// The simulated prompt cache (`FakeServer::set_prefix_cache`): the
    /// previous chat request's body, once on.
    pub(super) prefix_cache: Option<String>,
}

/// A function computing a chat reply from the request, set with
/// `FakeServer::respond_with`.
#[derive(Clone)]
pub(super) struct Fallback(pub(super) Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>);

impl fmt::Debug for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Fallback(..)")
    }
}

/// What [`route`] decided: an answer, or a call of the fallback function,
/// which runs with the state unlocked.
enum Routed {
    Answer(Answer),
    /// The function to call for chat request number `.1`.
    Fallback(Fallback, usize),
}

impl Script {
    pub(super) fn new() -> Script {
        Script {
            state: Mutex::new(State {
                replies: VecDeque::new(),
                chat_count: 0,
                unexpected: 0,
                rejections: Vec::new(),
                n_ctx: Some(4096),
                model_id: "fake-model".to_string(),
                strict: true,
                auto_calls: 0,
                routes: Vec::new(),
                replay: None,
                fallback: None,
                caches: Caches::default(),
                prefix_cache: None,
            }),
        }
    }
}

impl Responder for Script {
    fn respond(&self, req: &RecordedRequest, _body: &[u8], number: usize) -> Reaction {
        let routed = route(&mut self.state.lock(), req, number);
        match routed {
            Routed::Answer(answer) => Reaction::Now(answer),
            // Unlocked while the host's function runs: it may take its time
            // (other connections are served meanwhile) or call the server.
            Routed::Fallback(Fallback(respond), n) => {
                let reply = panic::catch_unwind(AssertUnwindSafe(|| respond(req)));
                let mut st = self.state.lock();
                // A panic is the host's function failing, not the server:
                // answer 500 and keep the connection thread alive.
                Reaction::Now(if let Ok(reply) = reply {
                    serve(&mut st, req, reply, n)
                } else {
                    let msg =
                        format!("FakeServer: the respond_with function panicked on request #{n}");
                    log::error!("{msg}");
                    Answer::Json {
                        status: 500,
                        body: render_any::error_body(
                            req.api().unwrap_or(Api::ChatCompletions),
                            500,
                            &msg,
                        ),
                    }
                })
            }
        }
    }
}

/// The answer to `req`, the `number`th request: see the module doc for the
/// order.
fn route(st: &mut State, req: &RecordedRequest, number: usize) -> Routed {
    let path = req.route();
    // An exact match (query included) beats a match on the path alone.
    let fixed = st
        .routes
        .iter()
        .find(|(m, p, _, _)| *m == req.method && *p == req.path)
        .or_else(|| {
            st.routes
                .iter()
                .find(|(m, p, _, _)| *m == req.method && p == path)
        });
    if let Some((_, _, status, body)) = fixed {
        return Routed::Answer(Answer::Json {
            status: *status,
            body: body.clone(),
        });
    }
    if let Some(answer) = replay(st, req, number) {
        return Routed::Answer(answer);
    }
    if let Some(answer) = st.caches.route(req) {
        return Routed::Answer(answer);
    }
    if req.is_chat() {
        return chat(st, req);
    }
    let json = |status, body| Answer::Json { status, body };
    Routed::Answer(match (req.method.as_str(), path) {
        ("GET", "/props" | "/v1/props") => match st.n_ctx {
            Some(n_ctx) => json(
                200,
                json!({
                    "default_generation_settings": {
                        "n_ctx": n_ctx,
                        "model": st.model_id,
                        "params": { "temperature": 0.8, "n_predict": -1 },
                    },
                    "total_slots": 1,
                    "model_alias": st.model_id,
                    "model_path": format!("/models/{}.gguf", st.model_id),
                    "build_info": "fake",
                }),
            ),
            None => json(404, render::error_json(404, "File Not Found")),
        },
        ("GET", "/v1/models" | "/models") => {
            let mut model = json!({
                "id": st.model_id,
                "object": "model",
                "created": now(),
                "owned_by": "fake",
            });
            if let Some(n) = st.n_ctx {
                model["meta"] = json!({ "n_ctx_train": n, "n_ctx": n });
            }
            json(200, json!({ "object": "list", "data": [model] }))
        }
        ("GET", "/health" | "/v1/health") => json(200, json!({ "status": "ok" })),
        // Anthropic's token counter: a rough count (4 chars a token) of the
        // request body, enough for a client that probes before sending.
        ("POST", p) if p.ends_with("/messages/count_tokens") => json(
            200,
            json!({ "input_tokens": req.raw_body.chars().count() as u64 / 4 + 1 }),
        ),
        (method, _) => {
            let msg = format!("FakeServer: no route for {method} {}", req.path);
            json(404, render::error_json(404, &msg))
        }
    })
}

/// Answer from the cassette, if one is loaded and knows the route.
fn replay(st: &mut State, req: &RecordedRequest, number: usize) -> Option<Answer> {
    let label = if req.is_chat() {
        format!("chat request #{}", st.chat_count + 1)
    } else {
        format!("request #{number}")
    };
    let answer = st.replay.as_mut()?.answer(req, &label);
    // A chat request the cassette answered (or rejected) used up a number;
    // one it passed on is counted by `chat`.
    if req.is_chat() && !matches!(answer, cassette::Answer::Pass) {
        st.chat_count += 1;
    }
    match answer {
        cassette::Answer::Pass => None,
        cassette::Answer::Serve {
            status,
            content_type,
            body,
        } => Some(Answer::Raw {
            status,
            content_type,
            body: body.into_bytes(),
        }),
        cassette::Answer::Mismatch(msg) => {
            log::error!("{msg}");
            Some(Answer::Json {
                status: 500,
                body: render_any::error_body(req.api().unwrap_or(Api::ChatCompletions), 500, &msg),
            })
        }
    }
}

/// The next scripted reply for a chat request, after strict validation; or
/// the fallback function when the script is empty.
fn chat(st: &mut State, req: &RecordedRequest) -> Routed {
    // Counted before validation: rejected requests keep their number, so
    // `#N` in a message is always `chat_requests()[N - 1]`.
    st.chat_count += 1;
    let n = st.chat_count;
    let api = req.api().unwrap_or(Api::ChatCompletions);
    if st.strict
        && let Err(why) = strict::validate(api, req.body.as_ref())
    {
        let msg = format!("FakeServer (strict mode) rejected request #{n}: {why}");
        log::warn!("{msg}");
        st.rejections.push(msg.clone());
        return Routed::Answer(Answer::Json {
            status: 400,
            body: render_any::error_body(api, 400, &msg),
        });
    }
    if api == Api::Gemini
        && let Err(answer) = st.caches.check(req.body.as_ref())
    {
        return Routed::Answer(answer);
    }
    if let Some(reply) = st.replies.pop_front() {
        return Routed::Answer(serve(st, req, reply, n));
    }
    if let Some(fallback) = &st.fallback {
        return Routed::Fallback(fallback.clone(), n);
    }
    st.unexpected += 1;
    let msg = format!("FakeServer: no scripted reply left for request #{n}");
    log::error!("{msg}");
    Routed::Answer(Answer::Json {
        status: 500,
        body: render_any::error_body(api, 500, &msg),
    })
}

/// `reply`, ready to be written as the answer to `req`, chat request number
/// `n`: call ids assigned, metadata filled in.
fn serve(st: &mut State, req: &RecordedRequest, reply: Reply, n: usize) -> Answer {
    let reply = match st.caches.check(req.body.as_ref()) {
        Ok(Some(tokens)) if req.api() == Some(Api::Gemini) => {
            caches::with_cached_tokens(reply, tokens)
        }
        _ => reply,
    };
    // The simulated prompt cache: the bytes of the prompt shared from the
    // start with the previous request's, at four bytes a token.
    let reply = match &mut st.prefix_cache {
        Some(previous) => {
            let prompt = cached_prompt(req.body.as_ref());
            let common = previous
                .bytes()
                .zip(prompt.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            *previous = prompt;
            caches::with_cached_tokens(reply, common as u64 / 4)
        }
        None => reply,
    };
    let mut call_ids = Vec::new();
    let mut model = None;
    if let Kind::Completion(c) = &reply.kind {
        for call in &c.calls {
            let id = call.id.clone().unwrap_or_else(|| {
                st.auto_calls += 1;
                format!("call_{}", st.auto_calls)
            });
            call_ids.push(id);
        }
        model.clone_from(&c.model);
    }
    let api = req.api().unwrap_or(Api::ChatCompletions);
    let id = match api {
        Api::AnthropicMessages => format!("msg_fake_{n}"),
        Api::OpenAiResponses => format!("resp_fake_{n}"),
        Api::Gemini => format!("gemini_fake_{n}"),
        _ => format!("chatcmpl-fake-{n}"),
    };
    let meta = Meta {
        id,
        created: now(),
        model: model.unwrap_or_else(|| st.model_id.clone()),
        call_ids,
    };
    Answer::Scripted(Box::new(Scripted {
        reply,
        api,
        meta,
        stream: req.is_stream(),
        include_usage: req.includes_usage(),
    }))
}

/// A request's prompt in the order providers cache it: the tools, then
/// the system prompt, then the conversation (each API's field names), as
/// compact JSON.
fn cached_prompt(body: Option<&Value>) -> String {
    const ORDER: [&str; 7] = [
        "tools",
        "system",
        "instructions",
        "systemInstruction",
        "messages",
        "input",
        "contents",
    ];
    let mut out = String::new();
    for v in ORDER.iter().filter_map(|k| body?.get(*k)) {
        out.push_str(&v.to_string());
    }
    out
}

/// Seconds since the epoch, for `created` fields.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
