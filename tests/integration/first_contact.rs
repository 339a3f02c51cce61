//! Issue 28, classes 7 to 9: compaction that would grow the history, errors
//! read from structured fields and non-JSON bodies, and what a new user
//! meets first (a URL without a scheme, `https://` without TLS, an empty
//! environment, raw identifiers in `schema_type!`, a cancelled stream).

use pikuri::compaction::Compaction;
use pikuri::testing::{FakeServer, Reply};
use pikuri::{ErrorKind, Event, History, Message};

use crate::util::{agent_with, assert_valid_history};

/// Eight turns of about 2 KB each: 16 KB of history before the current turn.
fn sixteen_kb_of_turns() -> Vec<Message> {
    let mut h = Vec::new();
    for i in 0..8 {
        h.push(Message::user(format!("question {i}: {}", "q".repeat(1000))));
        h.push(Message::assistant(format!("answer {i}: {}", "a".repeat(1000))));
    }
    h
}

#[test]
fn a_summary_larger_than_what_it_replaces_leaves_the_history_untouched() {
    let server = FakeServer::start();
    // The compactor answers with 2 MB for 16 KB of turns.
    server.push(Reply::text("s".repeat(2_000_000)));
    let (mut agent, rec) =
        agent_with(&server, |c| c.compaction(Compaction::summarize().keep_turns(1)));
    let mut h = sixteen_kb_of_turns();
    h.push(Message::user("now"));
    h.push(Message::assistant("ok"));
    agent.load_history(History::new(h.clone()).unwrap()).unwrap();
    let err = agent.compact().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Protocol, "{err}");
    assert!(err.to_string().contains("history is unchanged"), "{err}");
    assert_eq!(agent.messages(), &h[..], "the history is untouched");
    assert!(
        !rec.events()
            .iter()
            .any(|e| matches!(e, Event::Compacted { .. })),
        "no Compacted event for a refused summary"
    );
    assert_eq!(server.chat_requests().len(), 1, "one summary request");
}

#[test]
fn a_refused_summary_before_a_request_lets_the_request_go_ahead_unchanged() {
    let server = FakeServer::start();
    server.set_context_size(Some(8_000));
    // 16 KB of turns is ~4,000 tokens: past 40% of 8,000, so compaction runs.
    server.push(Reply::text("s".repeat(2_000_000)));
    server.push(Reply::text("the answer"));
    let (mut agent, _rec) = agent_with(&server, |c| {
        c.compaction(Compaction::summarize().keep_turns(1).threshold(0.4))
    });
    let h = sixteen_kb_of_turns();
    agent.load_history(History::new(h.clone()).unwrap()).unwrap();
    let outcome = agent.run_loop("now").unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("the answer"));
    let m = agent.messages();
    assert_valid_history(m);
    assert_eq!(&m[..h.len()], &h[..], "the older turns are untouched");
    assert_eq!(m.len(), h.len() + 2);
    let requests = server.chat_requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].tool_names().is_empty(), "the summary request");
    let sent = requests[1].messages();
    assert!(
        !sent.iter().any(|m| m["content"]
            .as_str()
            .is_some_and(|c| c.starts_with(Compaction::SUMMARY_MARKER))),
        "no summary was sent"
    );
}
