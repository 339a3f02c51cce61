//! The end of the 2025 handshake over Streamable HTTP (issue 38, item 16):
//! the first request after `initialize` reaches a server that already has
//! `notifications/initialized`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use pikuri::mcp::{Client, Server};
use serde_json::{Value, json};

/// A 2025 server that takes its time over `notifications/initialized`
/// (as the SDK's does on a busy machine: the 202 follows the handling)
/// and, as the SDK's does, answers -32602 to a request that comes before
/// it has handled the notification. Returns its URL.
fn strict_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let initialized = Arc::new(AtomicBool::new(false));
    thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let initialized = Arc::clone(&initialized);
            thread::spawn(move || serve(conn, &initialized));
        }
    });
    url
}

fn serve(conn: TcpStream, initialized: &AtomicBool) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut out = conn;
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            head.push(line.trim_end().to_string());
        }
        let len: usize = head
            .iter()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let verb = head[0].split(' ').next().unwrap_or("");
        let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (status, text) = answer(verb, &msg, initialized);
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if out.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn answer(verb: &str, msg: &Value, initialized: &AtomicBool) -> (u16, String) {
    if verb == "DELETE" {
        return (200, String::new());
    }
    let id = msg["id"].clone();
    let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    match msg["method"].as_str().unwrap_or("") {
        // No session yet: what a 2025 server says to the modern probe.
        "server/discover" => (400, r#"{"error": "no session"}"#.into()),
        "initialize" => (
            200,
            reply(json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "strict", "version": "1"},
            })),
        ),
        "notifications/initialized" => {
            // Handled before it is answered, slowly: a client that does
            // not wait for this 202 sends its first request meanwhile.
            thread::sleep(Duration::from_millis(300));
            initialized.store(true, Ordering::SeqCst);
            (202, String::new())
        }
        _ if !initialized.load(Ordering::SeqCst) => (
            200,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602,
                "message": "Invalid request parameters: received request before initialization was complete"}})
            .to_string(),
        ),
        "tools/list" => (
            200,
            reply(json!({"tools": [{"name": "ok", "inputSchema": {"type": "object"}}]})),
        ),
        _ if msg.get("id").is_none() => (202, String::new()),
        _ => (200, reply(json!({}))),
    }
}

#[test]
fn the_first_request_reaches_a_server_that_has_the_initialized_notification() {
    let client = Client::connect("strict", &Server::http(strict_server())).unwrap();
    let tools = client.list_tools().unwrap();
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0].name, "ok");
    client.close();
}
