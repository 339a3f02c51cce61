//! One question to the server in `OPENAI_BASE_URL` (`OPENAI_MODEL`,
//! `OPENAI_API_KEY`), the answer printed: the same program as the pikuri
//! one, on bare ureq and typed serde.

use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: Vec<Message>,
}

#[derive(Serialize, Deserialize)]
struct Message {
    role: String,
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct Response {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let question: Vec<String> = std::env::args().skip(1).collect();
    let base = std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "http://127.0.0.1:8080/v1".into());
    let model = std::env::var("OPENAI_MODEL").unwrap_or_default();
    let request = Request {
        model: &model,
        messages: vec![Message { role: "user".into(), content: Some(question.join(" ")) }],
    };
    let mut call = ureq::post(format!("{}/chat/completions", base.trim_end_matches('/')));
    if let Ok(key) = std::env::var("OPENAI_API_KEY") {
        call = call.header("authorization", format!("Bearer {key}"));
    }
    let body = serde_json::to_string(&request)?;
    let text = call
        .header("content-type", "application/json")
        .send(body)?
        .body_mut()
        .read_to_string()?;
    let response: Response = serde_json::from_str(&text)?;
    let answer = response.choices.into_iter().next().and_then(|c| c.message.content);
    println!("{}", answer.unwrap_or_default());
    Ok(())
}
