//! One streaming client, as `benches/turn.rs`'s bare client in its `rss`
//! child: five turns of the streamed answer at `PIKURI_TURN_BASE`, each
//! `data:` line parsed into typed serde structs, the text gathered. Prints
//! `VmHWM` at the start and the end and `RssFile` at the end, KiB.

#[path = "../../child.rs"]
mod child;

use std::io::{BufRead, BufReader};

use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct Message {
    role: String,
    content: String,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: &'a [Message],
    stream: bool,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Delta,
}

#[derive(Deserialize, Default)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
}

fn main() {
    let child = child::Child::start();
    let (base, expect) = (child.base.as_str(), child.expect);
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let url = format!("{base}/chat/completions");
    for _ in 0..5 {
        let messages = [Message {
            role: "user".into(),
            content: "What does the listener hub do?".into(),
        }];
        let body = serde_json::to_vec(&Request {
            model: "qwen3-8b",
            messages: &messages,
            stream: true,
        })
        .expect("request serializes");
        let resp = agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(&body[..])
            .expect("request");
        let mut reader = BufReader::new(resp.into_body().into_reader());
        let mut text = String::new();
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).expect("read") == 0 {
                break;
            }
            let Some(data) = line.strip_prefix(b"data:") else {
                continue;
            };
            let data = data.trim_ascii();
            if data == b"[DONE]" {
                break;
            }
            let chunk: Chunk = serde_json::from_slice(data).expect("chunk");
            for c in chunk.choices {
                if let Some(t) = c.delta.content {
                    text.push_str(&t);
                }
            }
        }
        // Drain to the end so the connection is reused.
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
        assert_eq!(text.len(), expect, "every delta");
    }
    child.report();
}
