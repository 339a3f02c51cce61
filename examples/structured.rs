//! Structured output: a turn whose final answer must be a `Triage`, sent as
//! `response_format: json_schema` (llama.cpp turns it into a grammar), with
//! the repair loop for an answer that does not match.
//!
//! ```text
//! cargo run --example structured                                      # scripted, offline
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 cargo run --example structured   # a real model
//! ```
//!
//! Offline, the scripted model first answers in prose; pikuri sends it back
//! with the problem listed, and the second answer parses into `Triage`.
//!
//! The program names neither `serde` nor `serde_json`: `schema_type!`
//! writes `Triage`'s serde impls, so a crate like this one needs only
//! `pikuri` in its `[dependencies]`.

use pikuri::structured::StructuredOutput;
use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::JsonSchema;
use pikuri::{Agent, ChatTransport, Error, ModelSettings};

pikuri::tool::schema_type! {
    /// How urgent a ticket is.
    enum Priority {
        Low = "low",
        High = "high",
    }
}

pikuri::tool::schema_type! {
    /// The triage of a support ticket.
    struct Triage {
        priority: Priority,
        /// Whether a human must answer.
        needs_human: bool,
        /// Product area, e.g. `billing`.
        area: String,
    }
}

fn main() -> Result<(), Error> {
    println!("schema: {}\n", Triage::json_schema());
    let real = std::env::var("OPENAI_BASE_URL").is_ok_and(|v| !v.trim().is_empty());
    let server = FakeServer::start();
    let transport = if real {
        ChatTransport::from_env()?
    } else {
        server.push(Reply::text("This is an urgent billing problem."));
        server.push(Reply::text(
            r#"{"priority": "high", "needs_human": true, "area": "billing"}"#,
        ));
        server.transport()
    };
    let mut agent = Agent::builder(transport)
        .system_prompt("You triage support tickets.")
        .settings(ModelSettings::new().with_max_output_tokens(200))
        .structured_output(StructuredOutput::default().with_max_repairs(2))
        .build()?;
    match agent.run_typed::<Triage>("Ticket: 'I was charged twice this month!'") {
        Ok(typed) => {
            println!("triage: {:?}", typed.value);
            println!("repairs: {}", typed.repairs);
            if !real {
                assert!(matches!(typed.value.priority, Priority::High));
                assert_eq!(typed.repairs, 1);
                let repair = server.chat_requests()[1].messages();
                println!(
                    "\nthe repair message:\n{}",
                    repair.last().unwrap()["content"].as_str().unwrap()
                );
            }
        }
        Err(Error::InvalidAnswer { problems, raw }) => {
            println!("no valid answer; last one: {raw}\nproblems: {problems:#?}");
        }
        Err(e) => return Err(e),
    }
    Ok(())
}
