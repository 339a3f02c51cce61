//! Issue 40 against the real server's 4,096-token window: 300 tools with
//! long descriptions overflow it when every schema is sent (the server's
//! own context error, a typed `Error::Http`), and fit once they are
//! deferred behind `search_tools`.

use std::sync::Arc;

use pikuri::tool::{FnTool, Parameters};
use pikuri::tool_search::{Threshold, ToolSearch};
use pikuri::{Error, OnExhausted, StepLimit, Tool, listeners::InMemoryEventList};

use super::{N_CTX, assert_answered, builder};

/// How many synthetic tools: their schemas are far above [`N_CTX`].
const TOOLS: usize = 300;

/// Tool `i` of a synthetic catalog: about 80 tokens of description and one
/// parameter each (some 24,000 tokens for [`TOOLS`]).
fn synthetic(i: usize) -> Arc<dyn Tool> {
    const AREAS: [&str; 6] = [
        "invoices",
        "shipments",
        "support tickets",
        "payroll",
        "inventory",
        "contracts",
    ];
    let area = AREAS[i % AREAS.len()];
    let description = format!(
        "Look up one record of the {area} archive, number {i}, and return its fields \
         as JSON: the identifier, the owner, the dates it was opened, updated and \
         closed, its status, the amounts involved and every note attached to it. \
         Use this only when the user names a record of the {area} archive; it never \
         changes the archive and it fails when the record does not exist."
    );
    Arc::new(FnTool::new(
        format!("lookup_{i:03}"),
        description,
        Parameters::builder()
            .required_string("record_id", "The record's identifier, as the user gave it.")
            .build(),
        |_, _| Ok("{}".to_string()),
    ))
}

/// Every schema sent: the request does not fit the window, and the
/// server says so (HTTP 400 about the context), a typed error.
#[test]
fn three_hundred_tools_overflow_the_window_when_every_schema_is_sent() {
    let rec = InMemoryEventList::new();
    let Some(mut c) = builder(&rec) else { return };
    // Deferred, but never held back: sent like any other tool.
    c = c.tool_search(ToolSearch::new().threshold(Threshold::Count(usize::MAX)));
    for i in 0..TOOLS {
        c = c.add_deferred_tool(synthetic(i));
    }
    let mut agent = c.build().unwrap();
    let err = agent.run_loop("Say hello.").unwrap_err();
    match &err {
        Error::Http {
            status: 400,
            message,
            ..
        } => {
            eprintln!("every schema sent: {message}");
            assert!(
                message.contains("context"),
                "the server's own message about its {N_CTX}-token window: {message}"
            );
        }
        other => panic!("expected the server's context error, got {other:?}"),
    }
}

/// Deferred above the default threshold: the first request carries
/// `search_tools` instead of 300 schemas, and the turn succeeds.
#[test]
fn three_hundred_deferred_tools_fit_the_window() {
    let rec = InMemoryEventList::new();
    let Some(mut c) = builder(&rec) else { return };
    c = c
        .tool_search(ToolSearch::new())
        .step_limit(StepLimit::with_policy(2, OnExhausted::Synthesize));
    for i in 0..TOOLS {
        c = c.add_deferred_tool(synthetic(i));
    }
    let mut agent = c.build().unwrap();
    assert_eq!(agent.deferred_tools().len(), TOOLS);
    let out = agent.run_loop("Say hello.").unwrap();
    assert_answered(&out);
    // Every request fit: the prompt (new and cached tokens) stayed under
    // the window.
    let prompts: Vec<u64> = rec
        .events()
        .iter()
        .filter_map(|e| match e {
            pikuri::Event::Tokens { input, cached, .. } => {
                Some(input.unwrap_or(0) + cached.unwrap_or(0))
            }
            _ => None,
        })
        .collect();
    eprintln!("deferred: prompt tokens per request {prompts:?}");
    assert!(!prompts.is_empty());
    assert!(prompts.iter().all(|p| *p < N_CTX), "{prompts:?}");
}
