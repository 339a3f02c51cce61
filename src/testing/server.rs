//! The server under [`FakeServer`](super::FakeServer) and
//! [`Recorder`](super::Recorder): the listener, its threads, the request
//! log, and the [`Responder`] seam through which something above decides
//! every answer.
//!
//! Threads: one accept thread, plus one thread per connection (`conn.rs`).
//! Everything they share sits in [`Shared`]. Locks are never held across
//! socket I/O; the one nesting is the request log, then the responder's own
//! state, in that order only.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::conn::{self, Answer, Host};
use super::request::RecordedRequest;

/// How long stopping waits for the server's threads before detaching them.
const JOIN_TIMEOUT: Duration = Duration::from_secs(5);

/// What decides the answers: the script and cassette of a `FakeServer`
/// (`script.rs`), or the recorder's proxy (`recorder.rs`).
pub(super) trait Responder: Send + Sync {
    /// Decide how to answer `req`, the `number`th request this server
    /// received (from 1); `body` is its body as received.
    ///
    /// Called with the request log locked, so that request numbers, the log's
    /// order and the responder's own order (FIFO replies) agree even when
    /// connections race. So it must not block: work that does I/O goes in
    /// [`Reaction::Later`].
    fn respond(&self, req: &RecordedRequest, body: &[u8], number: usize) -> Reaction;
}

/// A [`Responder`]'s decision.
pub(super) enum Reaction {
    /// Write this answer.
    Now(Answer),
    /// Compute the answer after the request log is unlocked (the recorder
    /// asks its upstream here, which may take minutes).
    Later(Box<dyn FnOnce() -> Answer + Send>),
}

/// A listening server: accepts connections on `127.0.0.1` and a free port
/// and serves each on its own thread, answering through a [`Responder`].
pub(super) struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// Everything the server's threads share.
struct Shared {
    responder: Arc<dyn Responder>,
    /// Every request received, any path, in arrival order.
    log: Mutex<Vec<RecordedRequest>>,
    shutdown: AtomicBool,
    /// A clone of every open connection, so `stop` can shut them down.
    conns: Mutex<HashMap<u64, TcpStream>>,
    /// Connections accepted so far.
    accepted: AtomicU64,
    handlers: Mutex<Vec<JoinHandle<()>>>,
    panics: Mutex<Vec<String>>,
}

impl Host for Shared {
    fn is_shutdown(&self) -> bool {
        // Acquire pairs with the Release in `stop`: a thread that sees the
        // wake-up connection or a shut-down socket also sees the flag.
        self.shutdown.load(Ordering::Acquire)
    }

    fn answer(&self, req: RecordedRequest, body: &[u8]) -> Answer {
        let reaction = {
            let mut log = self.log.lock();
            let reaction = self.responder.respond(&req, body, log.len() + 1);
            log.push(req);
            reaction
        };
        match reaction {
            Reaction::Now(answer) => answer,
            Reaction::Later(answer) => answer(),
        }
    }
}

impl Shared {
    /// Join the handler threads that are done, keeping their panics.
    fn reap(&self) {
        let mut handlers = self.handlers.lock();
        let (done, running): (Vec<_>, Vec<_>) =
            handlers.drain(..).partition(JoinHandle::is_finished);
        *handlers = running;
        drop(handlers);
        for h in done {
            self.join(h, Instant::now());
        }
    }

    /// Join `h`, waiting until `deadline` at most; record a panic.
    fn join(&self, h: JoinHandle<()>, deadline: Instant) {
        while !h.is_finished() {
            if Instant::now() >= deadline {
                log::warn!("FakeServer: a server thread did not stop in time; detaching it");
                return;
            }
            thread::sleep(Duration::from_millis(1));
        }
        if let Err(payload) = h.join() {
            let msg = crate::util::panic_message(&*payload).to_string();
            log::error!("FakeServer: a server thread panicked: {msg}");
            self.panics.lock().push(msg);
        }
    }
}

/// Removes a connection from [`Shared::conns`] when its thread ends, even by
/// panic, so the socket is really closed.
struct Registration<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.shared.conns.lock().remove(&self.id);
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        // `stop` wakes this thread with a connection of its own; drop it.
        if shared.is_shutdown() {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // Transient (EMFILE, ECONNABORTED): back off, keep serving.
                log::warn!("FakeServer: accept failed: {e}");
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // The count so far numbers the connections too.
        let id = shared.accepted.fetch_add(1, Ordering::Relaxed) + 1;
        match stream.try_clone() {
            Ok(clone) => {
                shared.conns.lock().insert(id, clone);
            }
            Err(e) => {
                // An untracked connection could outlive `stop`; refuse it.
                log::warn!("FakeServer: cannot track connection: {e}");
                continue;
            }
        }
        let sh = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name(format!("fake-server-conn-{id}"))
            .spawn(move || {
                let _registration = Registration { shared: &sh, id };
                conn::serve(stream, &*sh);
            });
        match spawned {
            Ok(handle) => shared.handlers.lock().push(handle),
            Err(e) => {
                log::error!("FakeServer: cannot spawn a connection thread: {e}");
                shared.conns.lock().remove(&id);
            }
        }
        shared.reap();
    }
}

impl Server {
    /// Bind `127.0.0.1:0` and start accepting on a background thread.
    pub(super) fn start(responder: Arc<dyn Responder>) -> io::Result<Server> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            responder,
            log: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            accepted: AtomicU64::new(0),
            handlers: Mutex::new(Vec::new()),
            panics: Mutex::new(Vec::new()),
        });
        let sh = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("fake-server-accept".to_string())
            .spawn(move || accept_loop(&listener, &sh))?;
        log::debug!("FakeServer: listening on {addr}");
        Ok(Server {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// The socket address the server listens on.
    pub(super) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub(super) fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far.
    pub(super) fn connections(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// Every request received, in arrival order.
    pub(super) fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log.lock().clone()
    }

    /// How many requests were received.
    pub(super) fn request_count(&self) -> usize {
        self.shared.log.lock().len()
    }

    /// Stop accepting, shut down every open connection (so a client blocked
    /// on a hanging reply sees the connection end) and join the threads,
    /// giving up after 5 s. Idempotent; `drop` calls it too.
    pub(super) fn stop(&mut self) {
        let shared = &self.shared;
        shared.shutdown.store(true, Ordering::Release);
        let deadline = Instant::now() + JOIN_TIMEOUT;
        if let Some(accept) = self.accept.take() {
            // Wake the accept thread, blocked in `accept`.
            let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
            shared.join(accept, deadline);
        }
        for stream in shared.conns.lock().values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let handlers = std::mem::take(&mut *shared.handlers.lock());
        for h in handlers {
            shared.join(h, deadline);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        let panics = std::mem::take(&mut *self.shared.panics.lock());
        assert!(
            panics.is_empty() || thread::panicking(),
            "FakeServer: server thread panicked: {}",
            panics.join("; ")
        );
    }
}
