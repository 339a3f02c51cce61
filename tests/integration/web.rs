//! The web tools against tiny HTTP servers on 127.0.0.1: fetch renderings,
//! redirects, the address policy, size/time/cancel bounds, the cache, and
//! web_search over a SearXNG-shaped server.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use pikuri::builtin::{Fetch, FetchBuilder, SearXng, WebScrape, WebSearch};
use pikuri::{Cancellable, Tool, ToolContext};
use serde_json::json;

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    target: String,
    head: String,
}

type Handler = dyn Fn(&str, &mut TcpStream) + Send + Sync;

/// A one-thread-per-connection HTTP server; `handler` gets the request
/// target and writes the whole response.
struct Server {
    root: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn start(handler: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let log = Arc::clone(&seen);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let handler = Arc::clone(&handler);
                let log = Arc::clone(&log);
                thread::spawn(move || {
                    let head = read_head(&mut stream);
                    let target = head.split(' ').nth(1).unwrap_or("").to_string();
                    log.lock().unwrap().push(Seen {
                        target: target.clone(),
                        head,
                    });
                    handler(&target, &mut stream);
                });
            }
        });
        Server { root, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.root)
    }

    fn hits(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn respond(stream: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        let _ = write!(out, "{k}: {v}\r\n");
    }
    out.push_str("\r\n");
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.write_all(body);
}

fn ok(stream: &mut TcpStream, content_type: &str, body: &[u8]) {
    respond(stream, "200 OK", &[("content-type", content_type)], body);
}

fn local() -> FetchBuilder {
    Fetch::builder().allow_private_addresses(true)
}

fn call(tool: &dyn Tool, url: &str) -> Result<String, String> {
    tool.call(&json!({ "url": url }), &ToolContext::detached())
        .map_err(|e| e.message().to_string())
}

#[test]
fn text_json_and_html_are_rendered_by_type() {
    let server = Server::start(|target, s| match target {
        "/t" => ok(
            s,
            "text/plain; charset=utf-8",
            "line one\n  line two ü".as_bytes(),
        ),
        "/j" => ok(s, "application/json", br#"{"a":[1,{"b":null}]}"#),
        "/h" => ok(
            s,
            "text/html",
            b"<html><head><title>Doc &amp; more</title></head><body><nav>menu</nav>\
              <h1>Head</h1><p>See <a href=\"sub/x.html\">x</a>.</p></body></html>",
        ),
        "/latin" => ok(s, "text/plain; charset=ISO-8859-1", b"caf\xe9 \x80"),
        "/meta" => ok(
            s,
            "text/html",
            b"<meta charset=windows-1252><p>na\xefve</p>",
        ),
        "/sjis" => ok(s, "text/plain; charset=Shift_JIS", b"\x82\xa0"),
        "/koi8" => ok(
            s,
            "text/html",
            b"<meta charset=koi8-r><p>\xf0\xd2\xc9\xd7\xc5\xd4</p>",
        ),
        "/unknown" => ok(s, "text/plain; charset=x-klingon", b"\xff\xfe\xfd"),
        "/png" => ok(s, "image/png", b"\x89PNG\r\n\x1a\n\0\0"),
        _ => respond(s, "404 Not Found", &[], b"nope"),
    });
    let fetch = local().build();
    assert_eq!(
        call(&fetch, &server.url("/t")).unwrap(),
        format!(
            "URL: {} (text/plain)\n\nline one\n  line two ü",
            server.url("/t")
        )
    );
    assert!(
        call(&fetch, &server.url("/j"))
            .unwrap()
            .ends_with("\n\n{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ]\n}")
    );
    let html = call(&fetch, &server.url("/h")).unwrap();
    assert_eq!(
        html,
        format!(
            "URL: {} (text/html)\nTitle: Doc & more\n\n# Head\n\nSee [x]({}).",
            server.url("/h"),
            server.url("/sub/x.html")
        )
    );
    let raw = fetch
        .call(
            &json!({"url": server.url("/h"), "raw": true}),
            &ToolContext::detached(),
        )
        .unwrap();
    assert!(raw.contains("<nav>menu</nav>"), "{raw}");
    let scrape = WebScrape::from(local().build());
    assert_eq!(call(&scrape, &server.url("/h")).unwrap(), html);

    assert!(
        call(&fetch, &server.url("/latin"))
            .unwrap()
            .ends_with("\n\ncafé €")
    );
    assert!(
        call(&fetch, &server.url("/meta"))
            .unwrap()
            .ends_with("\n\nnaïve")
    );
    // ureq's `charset` (the `web` feature) decodes every WHATWG charset,
    // named in the header or in a `<meta charset>`; an unknown one is refused.
    assert!(
        call(&fetch, &server.url("/sjis"))
            .unwrap()
            .ends_with("\n\nあ")
    );
    assert!(
        call(&fetch, &server.url("/koi8"))
            .unwrap()
            .ends_with("\n\nПривет")
    );
    let err = call(&fetch, &server.url("/unknown")).unwrap_err();
    assert!(err.contains("`x-klingon`"), "{err}");
    let err = call(&fetch, &server.url("/png")).unwrap_err();
    assert!(err.contains("image/png") && err.contains("binary"), "{err}");
    let err = call(&fetch, &server.url("/missing")).unwrap_err();
    assert_eq!(
        err,
        format!("HTTP 404 Not Found from {}", server.url("/missing"))
    );
}

#[test]
fn redirects_are_followed_to_a_limit() {
    let server = Server::start(|target, s| {
        let to =
            |s: &mut TcpStream, code: &str, loc: &str| respond(s, code, &[("location", loc)], b"");
        match target {
            "/a" => to(s, "302 Found", "/b?x=1"),
            "/b?x=1" => to(s, "301 Moved Permanently", "c"),
            "/c" => to(s, "307 Temporary Redirect", "./d/../final"),
            "/final" => ok(s, "text/plain", b"landed"),
            "/loop" => to(s, "302 Found", "/loop"),
            "/meta" => to(s, "302 Found", "http://169.254.169.254/latest/meta-data/"),
            "/zero" => to(s, "302 Found", "http://0.0.0.0:1/x"),
            "/ftp" => to(s, "302 Found", "ftp://example.org/"),
            _ => respond(s, "404 Not Found", &[], b""),
        }
    });
    let fetch = local().build();
    let out = call(&fetch, &server.url("/a")).unwrap();
    assert_eq!(
        out,
        format!("URL: {} (text/plain)\n\nlanded", server.url("/final"))
    );

    let before = server.hits();
    let err = call(&fetch, &server.url("/loop")).unwrap_err();
    assert!(err.contains("too many redirects (more than 5)"), "{err}");
    assert_eq!(
        server.hits() - before,
        6,
        "the first request and five redirects"
    );

    // A redirect to a forbidden address is refused at that hop, even with
    // private addresses allowed: metadata and unspecified never are.
    let err = call(&fetch, &server.url("/meta")).unwrap_err();
    assert!(
        err.contains("169.254.169.254 (a cloud metadata address)"),
        "{err}"
    );
    let err = call(&fetch, &server.url("/zero")).unwrap_err();
    assert!(err.contains("an unspecified address"), "{err}");
    let err = call(&fetch, &server.url("/ftp")).unwrap_err();
    assert!(err.contains("only http and https"), "{err}");
}

#[test]
fn default_policy_refuses_private_addresses_before_connecting() {
    let server = Server::start(|_, s| ok(s, "text/plain", b"secret"));
    let port = server.root.rsplit(':').next().unwrap().to_string();
    let fetch = pikuri::builtin::fetch();
    let started = Instant::now();
    for (url, why) in [
        (server.url("/"), "a loopback address"),
        (format!("http://localhost:{port}/"), "a loopback address"),
        (format!("http://2130706433:{port}/"), "a loopback address"),
        (format!("http://[::1]:{port}/"), "a loopback address"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/"),
            "a loopback address",
        ),
        ("http://10.0.0.1/".into(), "a private address"),
        ("http://192.168.0.1:8080/".into(), "a private address"),
        (
            "http://100.64.0.1/".into(),
            "a shared (carrier-grade NAT) address",
        ),
        (
            "http://169.254.169.254/latest/meta-data/".into(),
            "a cloud metadata address",
        ),
        ("http://[fd00:ec2::254]/".into(), "a cloud metadata address"),
        ("http://[fe80::1]/".into(), "a link-local address"),
        ("http://0.0.0.0/".into(), "an unspecified address"),
    ] {
        let err = call(&fetch, &url).unwrap_err();
        assert!(
            err.starts_with("refused to fetch") && err.contains(why),
            "{url}: {err}"
        );
    }
    assert_eq!(server.hits(), 0, "no request reached the server");
    // Nothing waited on a connect to 10.0.0.1 (the connect timeout is 10 s).
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A redirect from an allowed host is checked the same way at each hop.
    let err = call(&fetch, "http://[::1]/").unwrap_err();
    assert!(err.contains("a loopback address"), "{err}");
}

#[test]
fn oversized_and_endless_bodies_are_cut() {
    let server = Server::start(|target, s| {
        if target == "/big" {
            ok(s, "text/plain", &vec![b'a'; 4 << 20]);
            return;
        }
        // No length, never ends: a stream of lines until the client leaves.
        let _ =
            s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nconnection: close\r\n\r\n");
        let line = b"<p>all work and no play</p>\n".repeat(100);
        while s.write_all(&line).is_ok() {}
    });
    let fetch = local().max_bytes(64 * 1024).max_chars(1000).build();
    let out = call(&fetch, &server.url("/big")).unwrap();
    assert!(
        out.contains("[cut: showing the first 1000 of 65536 characters]"),
        "{}",
        &out[out.len() - 200..]
    );
    assert!(out.ends_with("[download stopped after 65536 bytes; the rest was not read]"));
    assert!(out.len() < 2000);
    let out = call(&fetch, &server.url("/endless")).unwrap();
    assert!(out.starts_with(&format!(
        "URL: {} (text/html)\n\nall work and no play\n\nall work",
        server.url("/endless")
    )));
    assert!(out.ends_with("[download stopped after 65536 bytes; the rest was not read]"));
}

#[test]
fn slow_and_silent_servers_hit_the_deadlines() {
    let server = Server::start(|target, s| {
        if target == "/silent" {
            thread::sleep(Duration::from_secs(20));
            return;
        }
        // A byte every 100 ms: never idle long enough for the read timeout.
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n");
        for _ in 0..200 {
            if s.write_all(b"x").is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
    });
    let fetch = local()
        .timeout(Duration::from_secs(1))
        .read_timeout(Duration::from_secs(5))
        .build();
    let started = Instant::now();
    let err = call(&fetch, &server.url("/slow")).unwrap_err();
    assert!(err.contains("timed out after 1.0s"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let fetch = local().read_timeout(Duration::from_millis(300)).build();
    let started = Instant::now();
    let err = call(&fetch, &server.url("/silent")).unwrap_err();
    assert!(err.contains("timed out"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn cancel_mid_download_returns_promptly() {
    let server = Server::start(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100000\r\n\r\nfirst part");
        thread::sleep(Duration::from_secs(30));
    });
    let fetch = local().build();
    let cancel = Cancellable::new();
    let cx = ToolContext::with_cancellable(cancel.clone());
    let canceller = {
        let cancel = cancel.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            cancel.cancel();
            Instant::now()
        })
    };
    let started = Instant::now();
    let err = fetch
        .call(&json!({"url": server.url("/")}), &cx)
        .unwrap_err();
    let cancelled_at = canceller.join().unwrap();
    assert!(err.message().starts_with("cancelled"), "{err}");
    // Well before the server's 30 s, and soon after the cancel.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(2),
        "{:?}",
        cancelled_at.elapsed()
    );

    // Already cancelled: no request is sent.
    let before = server.hits();
    assert!(fetch.call(&json!({"url": server.url("/")}), &cx).is_err());
    assert_eq!(server.hits(), before);
}

#[test]
fn cache_serves_repeats_and_keeps_policies_apart() {
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let server = Server::start(move |_, s| {
        let n = c.fetch_add(1, Ordering::SeqCst);
        ok(s, "text/plain", format!("response {n}").as_bytes());
    });
    let url = server.url("/cached");
    let cached = local().cache(true).build();
    assert!(call(&cached, &url).unwrap().ends_with("response 0"));
    assert!(call(&cached, &url).unwrap().ends_with("response 0"));
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Uncached tools download again.
    assert!(
        call(&local().build(), &url)
            .unwrap()
            .ends_with("response 1")
    );
    // A tool with the default policy does not see what a permissive one cached.
    let strict = Fetch::builder().cache(true).build();
    assert!(
        call(&strict, &url)
            .unwrap_err()
            .contains("a loopback address")
    );
}

#[test]
fn https_without_tls_or_with_a_bad_url_is_a_clear_error() {
    let fetch = pikuri::builtin::fetch();
    for (url, want) in [
        ("file:///etc/passwd", "only http and https"),
        ("example.org", "not an absolute URL"),
        ("http://user:pw@example.org/", "user name or password"),
        ("", "`url` is empty"),
    ] {
        let err = call(&fetch, url).unwrap_err();
        assert!(err.contains(want), "{url}: {err}");
    }
    if !cfg!(feature = "rustls") {
        let err = call(&fetch, "https://127.0.0.1/").unwrap_err();
        assert!(err.contains("`rustls` feature"), "{err}");
    }
}

#[test]
fn searxng_results_become_a_numbered_list() {
    let server = Server::start(|target, s| {
        if target.starts_with("/search?q=rust+%26+wasm&format=json") {
            let body = json!({"query": "rust", "results": [
                {"title": "Rust", "url": "https://www.rust-lang.org/", "content": "A language\nempowering everyone."},
                {"title": "No URL", "content": "skipped"},
                {"title": "WASM", "url": "https://webassembly.org/", "content": ""},
                {"title": "Third", "url": "https://example.org/3", "content": "three"},
            ]});
            ok(s, "application/json", body.to_string().as_bytes());
        } else if target.starts_with("/search?q=empty") {
            ok(s, "application/json", br#"{"results": []}"#);
        } else {
            respond(s, "403 Forbidden", &[], b"<html>json disabled</html>");
        }
    });
    let tool = WebSearch::new(SearXng::new(format!("{}/", server.root)).header("x-api-key", "k1"));
    let cx = ToolContext::detached();
    let out = tool
        .call(&json!({"query": "rust & wasm", "max_results": 2}), &cx)
        .unwrap();
    assert_eq!(
        out,
        "1. Rust\n   https://www.rust-lang.org/\n   A language empowering everyone.\n\n\
         2. WASM\n   https://webassembly.org/"
    );
    let head = &server.seen()[0].head;
    assert!(
        head.to_ascii_lowercase().contains("x-api-key: k1"),
        "{head}"
    );
    assert_eq!(
        tool.call(&json!({"query": "empty"}), &cx).unwrap(),
        "No results for \"empty\"."
    );
    let err = tool.call(&json!({"query": "other"}), &cx).unwrap_err();
    assert_eq!(
        err.message(),
        format!(
            "web search failed: HTTP 403 Forbidden from {}/search?q=other&format=json",
            server.root
        )
    );
    assert!(
        server
            .seen()
            .iter()
            .all(|s| s.target.ends_with("&format=json"))
    );
}
