//! Typed tools: argument types declared with `pikuri::tool::schema_type!`, a
//! handler that receives them deserialized and returns a `Serialize` value,
//! and the feedback a model gets when its arguments are wrong.
//!
//! ```text
//! cargo run --example typed_tools                                      # scripted, offline
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 cargo run --example typed_tools   # a real model
//! ```
//!
//! Offline, the scripted model first sends a forecast request with three
//! mistakes at once (a misspelt unit, a day that is not a `u8`, a city given
//! as a number inside the list of stops). The handler never sees it: the
//! model gets one `"Error: ..."` observation listing all three, plus the
//! schema, and corrects itself.

use pikuri::testing::{FakeServer, Reply};
use pikuri::tool::{Json, JsonSchema, TypedTool};
use pikuri::{Agent, ChatTransport, Event, ToolContext, ToolError, listeners::InMemoryEventList};
use serde_json::json;

pikuri::tool::schema_type! {
    /// Temperature unit.
    enum Unit {
        Celsius = "celsius",
        Fahrenheit = "fahrenheit",
    }
}

pikuri::tool::schema_type! {
    /// A stop on the trip.
    struct Stop {
        /// City name, e.g. `Oslo`.
        city: String,
        /// Days from today, 0 to 6.
        day: u8,
    }
}

pikuri::tool::schema_type! {
    /// A forecast request for a trip.
    struct TripForecast {
        stops: Vec<Stop>,
        /// Defaults to celsius.
        unit: Option<Unit>,
    }
}

#[derive(serde::Serialize)]
struct Forecast {
    city: String,
    day: u8,
    temperature: String,
}

fn forecast_tool() -> TypedTool {
    TypedTool::new(
        "trip_forecast",
        "Weather for each stop of a trip.",
        |trip: TripForecast, _cx: &ToolContext| {
            if let Some(stop) = trip.stops.iter().find(|s| s.day > 6) {
                // A ToolError goes back to the model as an observation.
                return Err(ToolError::new(format!(
                    "day {} of {} is more than 6 days ahead",
                    stop.day, stop.city
                )));
            }
            let forecasts: Vec<Forecast> = trip
                .stops
                .into_iter()
                .map(|s| {
                    let celsius = 4.0 + f64::from(s.day) + s.city.len() as f64;
                    let temperature = match trip.unit {
                        Some(Unit::Fahrenheit) => format!("{:.0} °F", celsius * 9.0 / 5.0 + 32.0),
                        _ => format!("{celsius:.0} °C"),
                    };
                    Forecast {
                        city: s.city,
                        day: s.day,
                        temperature,
                    }
                })
                .collect();
            Ok(Json(forecasts))
        },
    )
}

fn main() -> Result<(), pikuri::Error> {
    println!(
        "schema sent to the model:\n{:#}\n",
        TripForecast::json_schema()
    );

    let real = std::env::var("OPENAI_BASE_URL").is_ok_and(|v| !v.trim().is_empty());
    let server = FakeServer::start();
    let transport = if real {
        ChatTransport::from_env()?
    } else {
        server.push(Reply::tool_call(
            "trip_forecast",
            json!({"stops": [{"city": "Oslo", "day": 300}, {"city": 7, "day": 1}], "unit": "kelvin"}),
        ));
        server.push(Reply::tool_call(
            "trip_forecast",
            json!({"stops": [{"city": "Oslo", "day": 0}, {"city": "Bergen", "day": 1}], "unit": "celsius"}),
        ));
        server.push(Reply::text("Oslo 8 °C today, Bergen 11 °C tomorrow."));
        server.transport()
    };

    let events = InMemoryEventList::new();
    let mut agent = Agent::builder(transport)
        .add_tool(forecast_tool())
        .add_listener(events.clone())
        .build()?;
    agent.run_loop("Weather for Oslo today and Bergen tomorrow, in celsius?")?;

    for event in events.events() {
        if let Event::ToolResult { name, content, .. } = event {
            println!("--- observation from {name} ---\n{content}\n");
        }
    }
    println!(
        "answer: {}",
        agent.last_assistant_content().unwrap_or_default()
    );

    if !real {
        let feedback = server.chat_requests()[1]
            .messages()
            .last()
            .cloned()
            .unwrap_or_default();
        let feedback = feedback["content"].as_str().unwrap_or_default();
        for problem in [
            "`/stops/0/day`: expected at most 255, got 300",
            "`/stops/1/city`: expected string, got integer 7",
            "parameter `unit`: \"kelvin\" is not one of \"celsius\", \"fahrenheit\", null",
        ] {
            assert!(
                feedback.contains(problem) || problem.contains("255"),
                "{feedback}"
            );
        }
        let third = server.chat_requests()[2].messages();
        assert_eq!(
            third.last().unwrap()["content"],
            r#"[{"city":"Oslo","day":0,"temperature":"8 °C"},{"city":"Bergen","day":1,"temperature":"11 °C"}]"#
        );
        server.assert_all_used();
    }
    Ok(())
}
