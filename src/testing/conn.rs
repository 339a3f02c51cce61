//! One connection: read requests (keep-alive), turn each into a
//! [`RecordedRequest`], ask the [`Host`] for the [`Answer`], and write it,
//! applying a scripted reply's timing and faults.
//!
//! This layer knows HTTP framing (`http.rs`) and how replies render
//! (`render.rs`), but not who decides the answer: that is the server's
//! business (`server.rs`), reached only through [`Host`].

use std::io::{BufReader, Read};
use std::net::{Shutdown, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::http::{self, ReadError};
use super::render::{self, Frame, Meta, StreamOptions};
use super::render_any;
use super::reply::{Delivery, Kind, Reply};
use super::request::RecordedRequest;
use crate::Api;

/// What a connection needs from the server that accepted it.
pub(super) trait Host {
    /// Whether the server is shutting down; checked between requests and
    /// during every pause, so `FakeServer::drop` is not kept waiting.
    fn is_shutdown(&self) -> bool;

    /// Record `req` and decide its answer. `body` is the request body as
    /// received (the recorder passes it on byte for byte).
    fn answer(&self, req: RecordedRequest, body: &[u8]) -> Answer;
}

/// What to write back for one request.
#[derive(Debug)]
pub(super) enum Answer {
    /// A JSON body with this status.
    Json { status: u16, body: Value },
    /// A response as recorded or relayed, verbatim (empty `content_type`:
    /// no `Content-Type` header).
    Raw {
        status: u16,
        content_type: String,
        body: Vec<u8>,
    },
    /// A scripted reply, rendered and delivered here.
    Scripted(Box<Scripted>),
}

/// A scripted reply with everything needed to write it.
#[derive(Debug)]
pub(super) struct Scripted {
    pub(super) reply: Reply,
    /// The wire format the request came on, which the reply is rendered in.
    pub(super) api: Api,
    pub(super) meta: Meta,
    /// The request asked for SSE (`"stream": true`).
    pub(super) stream: bool,
    /// The request asked for a usage chunk (`stream_options.include_usage`).
    pub(super) include_usage: bool,
}

/// Whether the connection can carry another request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    KeepAlive,
    Close,
}

/// How the current response is framed.
#[derive(Clone, Copy)]
struct Framing {
    keep_alive: bool,
    /// Chunked transfer encoding allowed (HTTP/1.1).
    chunked: bool,
}

/// Serve requests on `stream` until it closes or the server shuts down.
pub(super) fn serve(stream: TcpStream, host: &dyn Host) {
    // Streamed replies are many small writes; without this, Nagle's
    // algorithm would hold each SSE event back and skew chunk delays.
    let _ = stream.set_nodelay(true);
    // Reading and writing need separate handles: the reader is buffered, and
    // a hanging reply keeps reading while nothing is written.
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while !host.is_shutdown() {
        let req = match http::read_request(&mut reader, &mut writer) {
            Ok(req) => req,
            // The client is done with this connection: the normal way out.
            Err(ReadError::Closed) => break,
            // Includes the shutdown `FakeServer::drop` applies to the socket;
            // nobody is left to answer, so only `debug`.
            Err(ReadError::Io(e)) => {
                log::debug!("FakeServer: connection ended: {e}");
                break;
            }
            // Answer 400 so the client sees why, then close: after a bad
            // request line or body the byte stream cannot be resynchronized.
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
        // A body that is not JSON is still recorded, as text, so a test can
        // see what a broken client sent.
        let raw_body = String::from_utf8_lossy(&req.body).into_owned();
        let recorded = RecordedRequest {
            body: crate::util::json_from_slice(&req.body).ok(),
            raw_body,
            method: req.method,
            path: req.target,
            headers: req.headers,
        };
        log::debug!("FakeServer: {} {}", recorded.method, recorded.path);
        let flow = match host.answer(recorded, &req.body) {
            Answer::Json { status, body } => write_json(&mut writer, status, &body, framing, &[])
                .map_or(Flow::Close, |()| Flow::KeepAlive),
            Answer::Raw {
                status,
                content_type,
                body,
            } => write_body(&mut writer, status, &content_type, &body, framing, &[])
                .map_or(Flow::Close, |()| Flow::KeepAlive),
            Answer::Scripted(s) => serve_reply(&s, host, &mut reader, &mut writer, framing),
        };
        // A write error, a cut or hung stream, or a close-delimited body all
        // leave the connection unusable; so does the client's own
        // `Connection: close`.
        if flow == Flow::Close || !framing.keep_alive {
            break;
        }
    }
    let _ = writer.shutdown(Shutdown::Both);
}

/// Sleep for `d` in short steps; `false` if the server shut down meanwhile.
fn pause(host: &dyn Host, d: Duration) -> bool {
    let end = crate::util::instant_after(d);
    loop {
        // Checked every step so a long `with_delay` never holds up a drop.
        if host.is_shutdown() {
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
        // Reading (and discarding) rather than sleeping: it is how we learn
        // that the client gave up (EOF) or that `stop` shut the socket down.
        match reader.read(&mut buf) {
            Ok(0) => return Flow::Close,
            Ok(_) => {}
            // A signal, not an end: keep hanging.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Flow::Close,
        }
    }
}

/// `Server` and `Connection`, sent on every response.
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

/// The headers a reply adds (`with_header`, `with_retry_after`).
fn extra_headers(d: &Delivery) -> Vec<(String, String)> {
    let mut h = d.headers.clone();
    if let Some(secs) = d.retry_after {
        h.push(("Retry-After".to_string(), secs.to_string()));
    }
    h
}

/// Write a whole response framed with `Content-Length`.
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
    // One buffer, one write: head and body in the same segment, so a
    // client never sees a head whose body is late.
    let mut head = Vec::new();
    http::write_head(&mut head, status, &headers)?;
    head.extend_from_slice(body);
    std::io::Write::write_all(w, &head)?;
    std::io::Write::flush(w)
}

/// Write `body` as an `application/json` response.
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

/// Deliver a scripted reply: its delay, then its kind, as JSON or SSE.
fn serve_reply(
    s: &Scripted,
    host: &dyn Host,
    reader: &mut BufReader<TcpStream>,
    w: &mut TcpStream,
    framing: Framing,
) -> Flow {
    let d = &s.reply.delivery;
    // Shut down during the delay: nobody is waiting for an answer any more.
    if !pause(host, d.delay) {
        return Flow::Close;
    }
    let extra = extra_headers(d);
    let written = match &s.reply.kind {
        // No response at all; the connection cannot carry another request.
        Kind::Hang => return hang(reader),
        Kind::Status { code, message } => write_json(
            w,
            *code,
            &render_any::error_body(s.api, *code, message),
            framing,
            &extra,
        ),
        Kind::RawBody {
            status,
            content_type,
            body,
        } => write_body(w, *status, content_type, body.as_bytes(), framing, &extra),
        // One completion, two shapes per API: the request's `"stream"`
        // picks, its path the API.
        Kind::Completion(c) if !s.stream => write_json(
            w,
            200,
            &render_any::body(s.api, c, &s.meta),
            framing,
            &extra,
        ),
        Kind::Completion(c) => {
            let opts = StreamOptions {
                chunk_chars: d.chunk_chars,
                include_usage: s.include_usage,
                garbage: d.garbage,
            };
            let error = d.error_after.as_ref().map(|(n, m)| (*n, m.as_str()));
            let (frames, error) = render_any::stream(s.api, c, &s.meta, opts, error);
            return write_stream(&frames, d, error.as_deref(), host, reader, w, framing);
        }
        Kind::RawSse(body) => {
            // Verbatim bytes go out in one piece; only a chunk delay needs
            // them split per event (on `\n\n`), to have something to pause
            // between.
            let frames: Vec<Frame> = if d.chunk_delay.is_zero() {
                vec![Frame::Chunk(body.clone())]
            } else {
                body.split_inclusive("\n\n")
                    .map(|e| Frame::Chunk(e.to_string()))
                    .collect()
            };
            // The fault modifiers count rendered chunks, which raw SSE does
            // not have: keep only timing and headers.
            let raw = Delivery {
                chunk_delay: d.chunk_delay,
                headers: d.headers.clone(),
                retry_after: d.retry_after,
                ..Delivery::default()
            };
            return write_stream(&frames, &raw, None, host, reader, w, framing);
        }
    };
    written.map_or(Flow::Close, |()| Flow::KeepAlive)
}

/// Write an SSE response frame by frame, applying `d`'s faults:
/// before the data chunk with index `i` (or before `[DONE]` or the final
/// event when `i` is past the last chunk) a malformed event, the API's
/// `error` event (then the end of the body), a cut or a hang.
fn write_stream(
    frames: &[Frame],
    d: &Delivery,
    error: Option<&str>,
    host: &dyn Host,
    reader: &mut BufReader<TcpStream>,
    w: &mut TcpStream,
    framing: Framing,
) -> Flow {
    let chunked = framing.chunked;
    // An HTTP/1.0 client gets no chunked encoding, so the body can only end
    // by closing the connection.
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
            Frame::Chunk(s) | Frame::Final(s) => s,
            Frame::Done => "data: [DONE]\n\n",
        };
        // Garbage is not a chunk: faults are placed between data chunks, so
        // noise neither counts nor triggers them.
        if !matches!(frame, Frame::Noise(_)) {
            // `at(n)`: this is the point "after n chunks" (for `[DONE]`, any
            // n not yet reached also lands here).
            let done = matches!(frame, Frame::Done | Frame::Final(_));
            let at = |n: Option<usize>| n.is_some_and(|n| n == sent || (done && n > sent));
            // One malformed event per response, however the points fall.
            if !malformed_sent && at(d.malformed_after) {
                malformed_sent = true;
                if http::write_piece(w, b"data: {not json\n\n", chunked).is_err() {
                    return Flow::Close;
                }
            }
            // The server's own mid-stream error: the stream then ends
            // properly, as a real server's does.
            if let Some(error) = error
                && at(d.error_after.as_ref().map(|(n, _)| *n))
            {
                if http::write_piece(w, error.as_bytes(), chunked).is_err() {
                    return Flow::Close;
                }
                break;
            }
            // A cut: the body just stops, without the last chunk, so the
            // client sees an incomplete response.
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
        // Pause after data chunks only, so `with_chunk_delay` spaces the
        // events the client parses.
        if let Frame::Chunk(_) = frame {
            sent += 1;
            if !pause(host, d.chunk_delay) {
                return Flow::Close;
            }
        }
    }
    // Without chunked encoding the close itself ends the body.
    if !chunked {
        return Flow::Close;
    }
    match http::write_last_chunk(w) {
        Ok(()) => Flow::KeepAlive,
        Err(_) => Flow::Close,
    }
}
