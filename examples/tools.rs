//! Defining tools: a [`Tool`] implementation with a [`Parameters`] schema,
//! and a closure [`FnTool`]; and what the model sees when it gets the
//! arguments wrong.
//!
//! ```text
//! cargo run --example tools
//! ```
//!
//! The scripted model first calls `weather` with a misspelt argument. The
//! call never reaches `Weather::call`: the arguments fail validation, and the
//! model gets an `"Error: ..."` observation that lists every problem and
//! reprints the schema, so it can correct itself, which it does.

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{FnTool, Parameters};
use pikuri::{Agent, Event, Tool, ToolContext, ToolError, listeners::InMemoryEventList};
use serde_json::{Value, json};

/// A tool with state of its own (here, a fixed table).
struct Weather {
    params: Parameters,
}

impl Weather {
    fn new() -> Weather {
        let params = Parameters::builder()
            .required_string("city", "The city, e.g. `Oslo`.")
            .optional_enum("unit", "Temperature unit.", &["celsius", "fahrenheit"])
            .build();
        Weather { params }
    }
}

impl Tool for Weather {
    fn name(&self) -> &'static str {
        "weather"
    }
    fn description(&self) -> &'static str {
        "Current weather in a city."
    }
    fn parameters(&self) -> &Parameters {
        &self.params
    }
    /// Gets arguments that passed validation: `city` is a string.
    fn call(&self, args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
        let celsius = match args["city"].as_str() {
            Some("Oslo") => 4.0,
            Some("Lisbon") => 19.0,
            // A ToolError also goes back to the model, as "Error: unknown city …".
            other => return Err(format!("unknown city {other:?}; try Oslo or Lisbon").into()),
        };
        Ok(match args["unit"].as_str() {
            Some("fahrenheit") => format!("{:.0} °F, cloudy", celsius * 9.0 / 5.0 + 32.0),
            _ => format!("{celsius:.0} °C, cloudy"),
        })
    }
}

fn main() -> Result<(), pikuri::Error> {
    let add = FnTool::new(
        "add",
        "Adds two integers.",
        Parameters::builder()
            .required_integer("a", "First addend.")
            .required_integer("b", "Second addend.")
            .build(),
        // Validated: both are JSON integers here.
        |args, _cx| {
            Ok((args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string())
        },
    );

    let server = FakeServer::start();
    server.push(Reply::tool_call(
        "weather",
        json!({"town": "Oslo", "unit": "kelvin"}),
    ));
    server.push(Reply::tool_calls(vec![
        ("weather", json!({"city": "Oslo", "unit": "fahrenheit"})),
        ("add", json!({"a": 2, "b": 3})),
    ]));
    server.push(Reply::text("Oslo is 39 °F and cloudy; 2 + 3 = 5."));

    let events = InMemoryEventList::new();
    let mut agent = Agent::builder(server.transport())
        .add_tool(Weather::new())
        .add_tool(add)
        .add_listener(events.clone())
        .build()?;
    agent.run_loop("Weather in Oslo in fahrenheit, and what is 2 + 3?")?;

    for event in events.events() {
        if let Event::ToolResult { name, content, .. } = event {
            println!("--- observation from {name} ---\n{content}\n");
        }
    }
    println!(
        "answer: {}",
        agent.last_assistant_content().unwrap_or_default()
    );

    // What the model received after its bad call:
    let second = &server.chat_requests()[1];
    let feedback = second
        .messages()
        .last()
        .map(|m| m["content"].clone())
        .unwrap_or_default();
    let feedback = feedback.as_str().unwrap_or_default();
    assert!(feedback.starts_with("Error:"), "{feedback}");
    assert!(
        feedback.contains("city") && feedback.contains("kelvin"),
        "{feedback}"
    );
    // And after the corrected calls, both results, in call order:
    let third = server.chat_requests()[2].messages();
    assert_eq!(third[third.len() - 2]["content"], "39 °F, cloudy");
    assert_eq!(third[third.len() - 1]["content"], "5");
    server.assert_all_used();
    Ok(())
}
