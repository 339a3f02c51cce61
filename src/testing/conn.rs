//! One connection: read requests (keep-alive), record each, decide the
//! answer under the state lock, then write it without the lock, applying the
//! reply's timing and faults.

use std::io::{BufReader, Read};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::cassette::{Answer, request_value};
use super::http::{self, ReadError};
use super::recorder::{self, Forward};
use super::render::{self, Frame, Meta, StreamOptions};
use super::reply::{Delivery, Kind, Reply};
use super::request::RecordedRequest;
use super::server::{Shared, State};
use super::strict;

/// Whether the connection can carry another request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    KeepAlive,
    Close,
}

/// What to answer, decided under the lock.
enum Action {
    Json {
        status: u16,
        body: Value,
    },
    /// A recorded response, verbatim.
    Raw {
        status: u16,
        content_type: String,
        body: String,
    },
    Serve(Box<Serve>),
    /// Recorder mode: ask the upstream, without the lock.
    Forward(Box<Forward>),
}

/// A scripted reply with everything needed to write it.
struct Serve {
    reply: Reply,
    meta: Meta,
    stream: bool,
    include_usage: bool,
}

/// How the current response is framed.
#[derive(Clone, Copy)]
struct Framing {
    keep_alive: bool,
    /// Chunked transfer encoding allowed (HTTP/1.1).
    chunked: bool,
}

/// Serve requests on `stream` until it closes or the server shuts down.
pub(super) fn serve(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while !shared.is_shutdown() {
        let req = match http::read_request(&mut reader, &mut writer) {
            Ok(req) => req,
            Err(ReadError::Closed) => break,
            Err(ReadError::Io(e)) => {
                log::debug!("FakeServer: connection ended: {e}");
                break;
            }
            Err(ReadError::Bad(msg)) => {
                log::warn!("FakeServer: unreadable request: {msg}");
                let body = render::error_json(400, &format!("FakeServer: {msg}"));
                let framing = Framing {
                    keep_alive: false,
                    chunked: false,
                };
                let _ = write_json(&mut writer, 400, &body, framing, &[]);
                break;
            }
        };
        let framing = Framing {
            keep_alive: req.keep_alive(),
            chunked: req.accepts_chunked(),
        };
        let raw_body = String::from_utf8_lossy(&req.body).into_owned();
        let recorded = RecordedRequest {
            body: serde_json::from_slice(&req.body).ok(),
            raw_body,
            method: req.method,
            path: req.target,
            headers: req.headers,
        };
        log::debug!("FakeServer: {} {}", recorded.method, recorded.path);
        let action = decide(shared, recorded);
        let flow = match action {
            Action::Json { status, body } => write_json(&mut writer, status, &body, framing, &[])
                .map_or(Flow::Close, |()| Flow::KeepAlive),
            Action::Raw {
                status,
                content_type,
                body,
            } => write_body(
                &mut writer,
                status,
                &content_type,
                body.as_bytes(),
                framing,
                &[],
            )
            .map_or(Flow::Close, |()| Flow::KeepAlive),
            Action::Serve(s) => serve_reply(&s, shared, &mut reader, &mut writer, framing),
            Action::Forward(f) => {
                let (status, content_type, body) = recorder::forward(shared, &f, &req.body);
                write_body(&mut writer, status, &content_type, &body, framing, &[])
                    .map_or(Flow::Close, |()| Flow::KeepAlive)
            }
        };
        if flow == Flow::Close || !framing.keep_alive {
            break;
        }
    }
    let _ = writer.shutdown(Shutdown::Both);
}

/// Record `req` and decide the answer, atomically.
fn decide(shared: &Shared, req: RecordedRequest) -> Action {
    let mut st = shared.state.lock();
    let action = route(&mut st, &req);
    st.requests.push(req);
    action
}

fn route(st: &mut State, req: &RecordedRequest) -> Action {
    if let Some(upstream) = &st.upstream {
        return Action::Forward(Box::new(Forward {
            upstream: Arc::clone(upstream),
            method: req.method.clone(),
            path: req.path.clone(),
            headers: req.headers.clone(),
            request: request_value(req),
        }));
    }
    let path = req.route();
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
        return Action::Json {
            status: *status,
            body: body.clone(),
        };
    }
    if let Some(action) = replay(st, req) {
        return action;
    }
    if req.is_chat() {
        return chat(st, req);
    }
    let json = |status, body| Action::Json { status, body };
    match (req.method.as_str(), path) {
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
        (method, _) => {
            let msg = format!("FakeServer: no route for {method} {}", req.path);
            json(404, render::error_json(404, &msg))
        }
    }
}

/// Answer from the cassette, if one is loaded and knows the route.
fn replay(st: &mut State, req: &RecordedRequest) -> Option<Action> {
    let label = if req.is_chat() {
        format!("chat request #{}", st.chat_count + 1)
    } else {
        format!("request #{}", st.requests.len() + 1)
    };
    let answer = st.replay.as_mut()?.answer(req, &label);
    if req.is_chat() && !matches!(answer, Answer::Pass) {
        st.chat_count += 1;
    }
    match answer {
        Answer::Pass => None,
        Answer::Serve {
            status,
            content_type,
            body,
        } => Some(Action::Raw {
            status,
            content_type,
            body,
        }),
        Answer::Mismatch(msg) => {
            log::error!("{msg}");
            Some(Action::Json {
                status: 500,
                body: render::error_json(500, &msg),
            })
        }
    }
}

fn chat(st: &mut State, req: &RecordedRequest) -> Action {
    st.chat_count += 1;
    let n = st.chat_count;
    if st.strict
        && let Err(why) = strict::validate(req.body.as_ref())
    {
        let msg = format!("FakeServer (strict mode) rejected request #{n}: {why}");
        log::warn!("{msg}");
        st.rejections.push(msg.clone());
        return Action::Json {
            status: 400,
            body: render::error_json(400, &msg),
        };
    }
    let Some(reply) = st.replies.pop_front() else {
        st.unexpected += 1;
        let msg = format!("FakeServer: no scripted reply left for request #{n}");
        log::error!("{msg}");
        return Action::Json {
            status: 500,
            body: render::error_json(500, &msg),
        };
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
    let meta = Meta {
        id: format!("chatcmpl-fake-{n}"),
        created: now(),
        model: model.unwrap_or_else(|| st.model_id.clone()),
        call_ids,
    };
    Action::Serve(Box::new(Serve {
        reply,
        meta,
        stream: req.is_stream(),
        include_usage: req.includes_usage(),
    }))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Sleep for `d` in short steps; `false` if the server shut down meanwhile.
fn pause(shared: &Shared, d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if shared.is_shutdown() {
            return false;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        thread::sleep(left.min(Duration::from_millis(10)));
    }
}

/// Answer nothing: wait until the client closes or the server shuts the
/// socket down.
fn hang(reader: &mut BufReader<TcpStream>) -> Flow {
    let mut buf = [0u8; 4096];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return Flow::Close,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Flow::Close,
        }
    }
}

fn base_headers(framing: Framing) -> Vec<(String, String)> {
    let conn = if framing.keep_alive {
        "keep-alive"
    } else {
        "close"
    };
    vec![
        ("Server".to_string(), "pikuri-fake".to_string()),
        ("Connection".to_string(), conn.to_string()),
    ]
}

fn extra_headers(d: &Delivery) -> Vec<(String, String)> {
    let mut h = d.headers.clone();
    if let Some(secs) = d.retry_after {
        h.push(("Retry-After".to_string(), secs.to_string()));
    }
    h
}

fn write_body(
    w: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
    framing: Framing,
    extra: &[(String, String)],
) -> std::io::Result<()> {
    let mut headers = base_headers(framing);
    if !content_type.is_empty() {
        headers.push(("Content-Type".to_string(), content_type.to_string()));
    }
    headers.push(("Content-Length".to_string(), body.len().to_string()));
    headers.extend_from_slice(extra);
    let mut head = Vec::new();
    http::write_head(&mut head, status, &headers)?;
    head.extend_from_slice(body);
    std::io::Write::write_all(w, &head)?;
    std::io::Write::flush(w)
}

fn write_json(
    w: &mut TcpStream,
    status: u16,
    body: &Value,
    framing: Framing,
    extra: &[(String, String)],
) -> std::io::Result<()> {
    write_body(
        w,
        status,
        "application/json",
        body.to_string().as_bytes(),
        framing,
        extra,
    )
}

fn serve_reply(
    s: &Serve,
    shared: &Shared,
    reader: &mut BufReader<TcpStream>,
    w: &mut TcpStream,
    framing: Framing,
) -> Flow {
    let d = &s.reply.delivery;
    if !pause(shared, d.delay) {
        return Flow::Close;
    }
    let extra = extra_headers(d);
    let written = match &s.reply.kind {
        Kind::Hang => return hang(reader),
        Kind::Status { code, message } => write_json(
            w,
            *code,
            &render::error_json(*code, message),
            framing,
            &extra,
        ),
        Kind::RawBody {
            status,
            content_type,
            body,
        } => write_body(w, *status, content_type, body.as_bytes(), framing, &extra),
        Kind::Completion(c) if !s.stream => write_json(
            w,
            200,
            &render::completion_json(c, &s.meta),
            framing,
            &extra,
        ),
        Kind::Completion(c) => {
            let opts = StreamOptions {
                chunk_chars: d.chunk_chars,
                include_usage: s.include_usage,
                garbage: d.garbage,
            };
            let frames = render::stream_frames(c, &s.meta, opts);
            return write_stream(&frames, d, shared, reader, w, framing);
        }
        Kind::RawSse(body) => {
            let frames: Vec<Frame> = if d.chunk_delay.is_zero() {
                vec![Frame::Chunk(body.clone())]
            } else {
                body.split_inclusive("\n\n")
                    .map(|e| Frame::Chunk(e.to_string()))
                    .collect()
            };
            let raw = Delivery {
                chunk_delay: d.chunk_delay,
                headers: d.headers.clone(),
                retry_after: d.retry_after,
                ..Delivery::default()
            };
            return write_stream(&frames, &raw, shared, reader, w, framing);
        }
    };
    written.map_or(Flow::Close, |()| Flow::KeepAlive)
}

/// Write an SSE response frame by frame, applying `d`'s faults:
/// before the data chunk with index `i` (or before `[DONE]` when `i` is past
/// the last chunk) a malformed event, a cut or a hang.
fn write_stream(
    frames: &[Frame],
    d: &Delivery,
    shared: &Shared,
    reader: &mut BufReader<TcpStream>,
    w: &mut TcpStream,
    framing: Framing,
) -> Flow {
    let chunked = framing.chunked;
    let framing = Framing {
        keep_alive: framing.keep_alive && chunked,
        chunked,
    };
    let mut headers = base_headers(framing);
    headers.push(("Content-Type".to_string(), "text/event-stream".to_string()));
    headers.push(("Cache-Control".to_string(), "no-cache".to_string()));
    if chunked {
        headers.push(("Transfer-Encoding".to_string(), "chunked".to_string()));
    }
    headers.extend(extra_headers(d));
    if http::write_head(w, 200, &headers).is_err() {
        return Flow::Close;
    }

    let mut sent = 0usize;
    let mut malformed_sent = false;
    for frame in frames {
        let text: &str = match frame {
            Frame::Noise(s) => s,
            Frame::Chunk(s) => s,
            Frame::Done => "data: [DONE]\n\n",
        };
        if !matches!(frame, Frame::Noise(_)) {
            // `at(n)`: this is the point "after n chunks" (for `[DONE]`, any
            // n not yet reached also lands here).
            let done = matches!(frame, Frame::Done);
            let at = |n: Option<usize>| n.is_some_and(|n| n == sent || (done && n > sent));
            if !malformed_sent && at(d.malformed_after) {
                malformed_sent = true;
                if http::write_piece(w, b"data: {not json\n\n", chunked).is_err() {
                    return Flow::Close;
                }
            }
            if at(d.cut_after) {
                return Flow::Close;
            }
            if at(d.hang_after) {
                return hang(reader);
            }
        }
        if http::write_piece(w, text.as_bytes(), chunked).is_err() {
            return Flow::Close;
        }
        if let Frame::Chunk(_) = frame {
            sent += 1;
            if !pause(shared, d.chunk_delay) {
                return Flow::Close;
            }
        }
    }
    if !chunked {
        return Flow::Close;
    }
    match http::write_last_chunk(w) {
        Ok(()) => Flow::KeepAlive,
        Err(_) => Flow::Close,
    }
}
