//! One agent, one question to the server in `OPENAI_BASE_URL`
//! (`OPENAI_MODEL`, `OPENAI_API_KEY`), the answer printed.

use pikuri::{Agent, ChatTransport};

fn main() -> Result<(), pikuri::Error> {
    let question: Vec<String> = std::env::args().skip(1).collect();
    let mut agent = Agent::builder(ChatTransport::from_env()?).build()?;
    let outcome = agent.run_loop(&question.join(" "))?;
    println!("{}", outcome.answer.unwrap_or_default());
    Ok(())
}
