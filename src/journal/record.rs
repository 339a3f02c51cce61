//! The records of a run journal (format version 1) and the replay that
//! rebuilds a conversation from them, refusing any sequence no run writes.

use std::borrow::Cow;

use serde_json::Value;

use super::vocab::{Decided, Ended, Finish, HistoryCause};
use crate::approval::Decision;
use crate::{Error, FinishReason, Image, Message, Result, Role, Spend, StopReason};

/// The format version this crate writes. A reader reads every version up
/// to its own (versions only ever add record types and optional fields;
/// a record type a reader does not know means a newer version, refused).
pub(crate) const VERSION: u32 = 1;

/// One record. Written borrowed, read owned.
// Records live one at a time (written, or read and replayed), so the size
// of the owned `Message` variant costs no memory worth a box per record.
#[allow(
    clippy::large_enum_variant,
    reason = "one record at a time; boxing would allocate per record"
)]
#[derive(Debug)]
pub(crate) enum Record<'a> {
    /// The first record: the format version and what wrote the run (its
    /// [`Fingerprint`]'s fields, flat, as [`Record::header`] writes them).
    Header {
        version: u32,
        run: Cow<'a, str>,
        model: Option<Cow<'a, str>>,
        tools: Cow<'a, [String]>,
        digest: Cow<'a, str>,
    },
    /// A user message entered the conversation (a turn's, an injected
    /// one, a typed turn's repair).
    User { content: Cow<'a, str> },
    /// A system message an extension injected before a request.
    System { content: Cow<'a, str> },
    /// A completed model response (or the synthesizer's answer), before
    /// any of its tools runs. `step` counts the run's responses from 1.
    Response {
        step: u64,
        message: Cow<'a, Message>,
        /// Why the answer ended (always written; absent in journals
        /// written before it, which stored `truncated`).
        finish: Option<Finish>,
        /// Read only: version 1's flag for a response cut at the length
        /// limit, before `finish` said so.
        truncated: bool,
        /// What the run had spent with this response counted, when the
        /// agent has a [`Budget`](crate::Budget) (a resumed run goes on
        /// from it); an optional field, as version 1 allows.
        spent: Option<Spend>,
        /// What the agent's earlier runs had spent, when its budget has
        /// lifetime limits (an optional field, as `spent`).
        earlier: Option<Spend>,
    },
    /// A tool call is about to run (approved, validated).
    ToolStart { step: u64, call_id: Cow<'a, str> },
    /// A call's observation, as appended to the history, with the images
    /// the tool attached (an optional field: version 1 readers of journals
    /// without images see the same record).
    ToolResult {
        call_id: Cow<'a, str>,
        content: Cow<'a, str>,
        images: Cow<'a, [Image]>,
    },
    /// The approver was asked about a call.
    ApprovalAsked { call_id: Cow<'a, str> },
    /// The approver (or the host) decided: with a denial, why; with an
    /// edit, the arguments.
    ApprovalAnswered {
        call_id: Cow<'a, str>,
        decision: Decided,
        reason: Option<Cow<'a, str>>,
        arguments: Option<Cow<'a, Value>>,
    },
    /// The history was replaced as a whole: a compaction, a loaded
    /// history, a cleared conversation.
    History {
        cause: HistoryCause,
        messages: Cow<'a, [Message]>,
    },
    /// The step budget ran out under `OnExhausted::Synthesize`: the
    /// synthesizer writes the answer next.
    Synthesizing { max: u32 },
    /// The agent switched models (a `run_loop_with`).
    ModelSwitched { model: Option<Cow<'a, str>> },
    /// A [guard](crate::guard) ended the run, stored before the loop acts:
    /// a stop (the reason; the run's error follows), or with `block` an
    /// input block (the reason is the guard's answer, stored next as a
    /// response).
    Guard {
        guard: Cow<'a, str>,
        reason: Cow<'a, str>,
        block: bool,
    },
    /// A run (a turn, a retry, a resume) ended: why, the error's message
    /// when it failed, and why its final answer ended when it has one.
    TurnEnd {
        reason: Ended,
        error: Option<Cow<'a, str>>,
        finish: Option<Finish>,
    },
}

crate::serde_macros::json_tagged! {
    Serialize, Deserialize for Record<'a>, tag = "type" {
        Header = "header" { version, run, model, tools, digest },
        User = "user" { content },
        System = "system" { content },
        Response = "response" {
            step,
            message,
            finish [opt],
            truncated [skip_ser],
            spent [opt],
            earlier [opt],
        },
        ToolStart = "tool_start" { step, call_id },
        ToolResult = "tool_result" {
            call_id,
            content,
            images [default, skip_if = <[Image]>::is_empty],
        },
        ApprovalAsked = "approval_asked" { call_id },
        ApprovalAnswered = "approval_answered" {
            call_id,
            decision,
            reason [opt],
            arguments [opt],
        },
        History = "history" { cause, messages },
        Synthesizing = "synthesizing" { max },
        ModelSwitched = "model_switched" { model },
        Guard = "guard" {
            guard,
            reason,
            block [default, skip_if = std::ops::Not::not],
        },
        TurnEnd = "turn_end" { reason, error [opt], finish [opt] },
    }
}

impl<'a> Record<'a> {
    /// The header of run `run`, written by what `fingerprint` names.
    pub(crate) fn header(run: &'a str, fingerprint: &'a Fingerprint) -> Record<'a> {
        Record::Header {
            version: VERSION,
            run: Cow::Borrowed(run),
            model: fingerprint.model.as_deref().map(Cow::Borrowed),
            tools: Cow::Borrowed(&fingerprint.tools),
            digest: Cow::Borrowed(&fingerprint.digest),
        }
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a record always serializes")
    }

    /// The `turn_end` of a run that returned `result` (its stop reason and
    /// final answer's finish, or its error).
    pub(crate) fn turn_end(result: &Result<(StopReason, FinishReason)>) -> Record<'static> {
        let (reason, error) = Ended::of(result);
        Record::TurnEnd {
            reason,
            error: error.map(Cow::Owned),
            finish: result
                .as_ref()
                .ok()
                .map(|(_, finish)| Finish::from_public(*finish)),
        }
    }

    /// The `approval_answered` of `decision` on `call_id`.
    pub(crate) fn approval_answered(call_id: &'a str, decision: &'a Decision) -> Record<'a> {
        let (reason, arguments) = match decision {
            Decision::Deny { reason } => (Some(Cow::Borrowed(reason.as_str())), None),
            Decision::Edit { arguments } => (None, Some(Cow::Borrowed(arguments))),
            Decision::Approve | Decision::Defer => (None, None),
        };
        Record::ApprovalAnswered {
            call_id: Cow::Borrowed(call_id),
            decision: Decided::of(decision),
            reason,
            arguments,
        }
    }
}

/// What wrote a run: the model, the tool names, and a digest of the system
/// prompt and every tool's name, description and schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) model: Option<String>,
    pub(crate) tools: Vec<String>,
    pub(crate) digest: String,
}

impl Fingerprint {
    /// What differs from `other` (this one is the journal's), in words.
    fn differences(&self, other: &Fingerprint) -> String {
        if self.model != other.model {
            return format!(
                "the journal was written with model {:?}, this agent uses {:?}",
                self.model.as_deref().unwrap_or(""),
                other.model.as_deref().unwrap_or("")
            );
        }
        if self.tools != other.tools {
            return format!(
                "the journal was written with tools [{}], this agent has [{}]",
                self.tools.join(", "),
                other.tools.join(", ")
            );
        }
        format!(
            "the system prompt or a tool's description or schema differs (fingerprint {} in the journal, {} here)",
            self.digest, other.digest
        )
    }
}

/// FNV-1a, 64 bits: the digest of a fingerprint (not a security measure:
/// it tells configurations apart, it does not authenticate a journal).
pub(crate) fn fnv1a(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.as_bytes().iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// A run rebuilt from its journal.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    pub(crate) messages: Vec<Message>,
    /// Responses journaled so far (the next one is `step + 1`).
    pub(crate) step: u64,
    /// The model of the latest switch to a named model, if any.
    pub(crate) model: Option<String>,
    /// Where the last run's turn starts in `messages`: its user message
    /// (not one the [`Interloper`](crate::Interloper) added mid-run), or,
    /// after a replaced history, its last user message.
    pub(crate) turn_start: Option<usize>,
    /// `None` when the last run ended (a `TurnEnd`, or nothing after the
    /// header); otherwise where it was cut off.
    pub(crate) cut: Option<Cut>,
    /// The lifetime count of the last response that recorded one: what
    /// the earlier runs had spent, and its own run.
    pub(crate) lifetime: Option<(Spend, Spend)>,
}

/// Where a crash cut a run off.
#[derive(Debug, Clone)]
pub(crate) struct Cut {
    /// The calls of the last response that started and have no result.
    pub(crate) started: Vec<String>,
    /// Why the last response ended ([`FinishReason::Complete`] when there
    /// is none).
    pub(crate) finish: FinishReason,
    /// The run was cut off while the synthesizer wrote the answer (the
    /// budget it exhausted).
    pub(crate) synthesizing: Option<u32>,
    /// What the run had spent at its last journaled response.
    pub(crate) spent: Option<Spend>,
    /// The run was cut off after a guard ended it, before the end was
    /// stored: the resume ends it the same way, asking no one again.
    pub(crate) guarded: Option<Guarded>,
}

/// A guard's end a cut-off run had reached ([`Record::Guard`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Guarded {
    pub(crate) guard: String,
    /// The stop's reason, or the block's answer.
    pub(crate) reason: String,
    pub(crate) block: bool,
}

impl Cut {
    /// The last response was cut at the length limit (its calls'
    /// arguments may be cut too).
    pub(crate) fn truncated(&self) -> bool {
        self.finish == FinishReason::Length
    }
}

/// Rebuild the run from `records` (JSON, as the store returned them),
/// checking the header against `expected`. Every record is checked before
/// anything is returned: a journal loads whole or not at all.
#[allow(
    clippy::too_many_lines,
    reason = "one match over the record types, each arm its rule"
)]
pub(crate) fn replay(run: &str, records: &[String], expected: &Fingerprint) -> Result<Replayed> {
    let corrupt = |i: usize, what: String| Error::JournalCorrupt {
        run: run.to_string(),
        message: format!("record {}: {what}", i + 1),
    };
    let mut out = Replayed::default();
    // The calls of the last response not yet answered, and those started.
    let mut open: Vec<String> = Vec::new();
    let mut started: Vec<String> = Vec::new();
    let mut finish = FinishReason::Complete;
    let mut synthesizing = None;
    let mut spent = None;
    let mut guarded = None;
    let mut ended = true;
    for (i, json) in records.iter().enumerate() {
        let record: Record<'_> = serde_json::from_str(json).map_err(|e| {
            corrupt(
                i,
                format!("not a record of format version {VERSION} or earlier: {e}"),
            )
        })?;
        if i == 0 {
            let Record::Header {
                version,
                run: r,
                model,
                tools,
                digest,
            } = record
            else {
                return Err(corrupt(
                    i,
                    "the journal does not start with its header".into(),
                ));
            };
            if version > VERSION {
                return Err(corrupt(
                    i,
                    format!("format version {version} is newer than this reader's ({VERSION})"),
                ));
            }
            if r != run {
                return Err(corrupt(i, format!("the header names run `{r}`")));
            }
            let fingerprint = Fingerprint {
                model: model.map(Cow::into_owned),
                tools: tools.into_owned(),
                digest: digest.into_owned(),
            };
            if fingerprint != *expected {
                return Err(Error::JournalMismatch {
                    run: run.to_string(),
                    message: fingerprint.differences(expected),
                });
            }
            continue;
        }
        // A record that needs every call answered first (a request is
        // only made from a valid history).
        let closed = |what: &str| {
            if open.is_empty() {
                Ok(())
            } else {
                Err(corrupt(
                    i,
                    format!("{what} while tool call `{}` is unanswered", open[0]),
                ))
            }
        };
        // Any later record means the synthesis is over (its answer, the
        // run's end).
        if !matches!(record, Record::Synthesizing { .. }) {
            synthesizing = None;
        }
        // A guard's end holds until the run's end, a new message or an
        // answer (a block's); the "not run" results of a stopped batch
        // come after it.
        if matches!(
            record,
            Record::User { .. } | Record::Response { .. } | Record::TurnEnd { .. }
        ) {
            guarded = None;
        }
        match record {
            Record::Header { .. } => return Err(corrupt(i, "a second header".into())),
            Record::Synthesizing { max } => {
                closed("a synthesis")?;
                synthesizing = Some(max);
                ended = false;
            }
            Record::User { content } => {
                closed("a user message")?;
                // After a run's end, a user message starts a turn; during a
                // run, it is an injection.
                if ended {
                    out.turn_start = Some(out.messages.len());
                }
                out.messages.push(Message::user(content));
                ended = false;
            }
            Record::System { content } => {
                closed("a system message")?;
                out.messages.push(Message::system(content));
                ended = false;
            }
            Record::Response {
                step,
                message,
                finish: stored,
                truncated,
                spent: stored_spent,
                earlier,
            } => {
                closed("a response")?;
                if step != out.step + 1 {
                    return Err(corrupt(
                        i,
                        format!("response step {step} follows step {}", out.step),
                    ));
                }
                let message = message.into_owned();
                if message.role != Role::Assistant {
                    return Err(corrupt(
                        i,
                        "a response that is not an assistant message".into(),
                    ));
                }
                out.step = step;
                open = message.tool_calls.iter().map(|c| c.id.clone()).collect();
                started.clear();
                finish = stored
                    .unwrap_or_else(|| Finish::legacy(truncated, !message.tool_calls.is_empty()))
                    .public();
                out.messages.push(message);
                spent = stored_spent.or(spent);
                if let (Some(e), Some(s)) = (earlier, stored_spent) {
                    out.lifetime = Some((e, s));
                }
                ended = false;
            }
            Record::ToolStart { step, call_id } => {
                if step != out.step || !open.iter().any(|c| *c == call_id) {
                    return Err(corrupt(
                        i,
                        format!("tool call `{call_id}` started but is not open in step {step}"),
                    ));
                }
                started.push(call_id.into_owned());
                ended = false;
            }
            Record::ToolResult {
                call_id,
                content,
                images,
            } => {
                let Some(at) = open.iter().position(|c| *c == call_id) else {
                    return Err(corrupt(
                        i,
                        format!("a result for tool call `{call_id}`, which is not open"),
                    ));
                };
                super::order::in_call_order(&open, at).map_err(|m| corrupt(i, m))?;
                open.remove(at);
                started.retain(|c| *c != call_id);
                let mut result = Message::tool(call_id.into_owned(), content.into_owned());
                result.images = images.into_owned();
                out.messages.push(result);
                ended = false;
            }
            Record::ApprovalAsked { call_id } | Record::ApprovalAnswered { call_id, .. } => {
                if !open.iter().any(|c| *c == call_id) {
                    return Err(corrupt(
                        i,
                        format!("an approval for tool call `{call_id}`, which is not open"),
                    ));
                }
                ended = false;
            }
            Record::History { messages, .. } => {
                closed("a replaced history")?;
                open = super::order::open_after(&messages);
                out.messages = messages.into_owned();
                out.turn_start = out.messages.iter().rposition(|m| m.role == Role::User);
            }
            Record::Guard {
                guard,
                reason,
                block,
            } => {
                guarded = Some(Guarded {
                    guard: guard.into_owned(),
                    reason: reason.into_owned(),
                    block,
                });
                ended = false;
            }
            Record::ModelSwitched { model } => {
                if let Some(model) = model {
                    out.model = Some(model.into_owned());
                }
            }
            Record::TurnEnd { reason, .. } => {
                // A run that completed ends on its answer: one that ends on
                // anything else had its records moved (its answer after
                // its end would read as a retry, or as a run cut off).
                let answered = out
                    .messages
                    .last()
                    .is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty());
                if reason == Ended::Completed && !answered {
                    return Err(corrupt(
                        i,
                        "a run that completed, but the conversation does not end with its answer"
                            .into(),
                    ));
                }
                // A turn paused for approval ends with its calls open.
                ended = true;
                spent = None;
            }
        }
    }
    if !ended {
        out.cut = Some(Cut {
            started,
            finish,
            synthesizing,
            spent,
            guarded,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::{Fingerprint, Record, replay};
    use crate::Message;

    fn fingerprint(model: Option<&str>) -> Fingerprint {
        Fingerprint {
            model: model.map(str::to_string),
            tools: vec!["a".into(), "b".into()],
            digest: "00ff".into(),
        }
    }

    #[test]
    fn the_header_holds_the_fingerprints_fields_flat() {
        let f = fingerprint(Some("m"));
        let header = Record::header("r", &f).to_json();
        assert_eq!(
            header,
            r#"{"type":"header","version":1,"run":"r","model":"m","tools":["a","b"],"digest":"00ff"}"#
        );
        assert!(replay("r", &[header], &f).is_ok());
        let none = fingerprint(None);
        let header = Record::header("r", &none).to_json();
        assert!(header.contains(r#""model":null"#), "{header}");
        // Read back: the model may be absent, keys come in any order, an
        // unknown one is skipped; the tools are required.
        let read = r#"{"digest":"00ff","tools":["a","b"],"later":1,"run":"r","type":"header","version":1}"#;
        assert!(replay("r", &[read.to_string()], &none).is_ok());
        let e = replay("r", &[read.to_string()], &f)
            .unwrap_err()
            .to_string();
        assert!(e.contains("model"), "{e}");
        let e = replay(
            "r",
            &[r#"{"type":"header","version":1,"run":"r","digest":"00ff"}"#.to_string()],
            &none,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("missing field `tools`"), "{e}");
        // A field twice is corrupt, a flat fingerprint field too (as serde's
        // flatten refused it).
        let twice = r#"{"type":"header","version":1,"run":"r","model":"a","model":"b","tools":[],"digest":""}"#;
        let e = replay("r", &[twice.to_string()], &none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("duplicate field `model`"), "{e}");
    }

    #[test]
    fn optional_fields_are_left_out_and_the_read_only_flag_is_read() {
        let response = Record::Response {
            step: 1,
            message: Cow::Owned(Message::assistant("hi")),
            finish: None,
            truncated: true,
            spent: None,
            earlier: None,
        };
        let json = response.to_json();
        assert!(
            json.starts_with(r#"{"type":"response","step":1,"message":{"#) && json.ends_with("}}"),
            "{json}"
        );
        assert!(!json.contains("truncated"), "{json}");
        let stored = json.replace(r#""step":1,"#, r#""step":1,"truncated":true,"#);
        let Ok(Record::Response { truncated, .. }) = serde_json::from_str::<Record<'_>>(&stored)
        else {
            panic!("{stored}")
        };
        assert!(truncated);
        let records = [
            (
                Record::ToolResult {
                    call_id: "c".into(),
                    content: "x".into(),
                    images: Cow::Borrowed(&[]),
                },
                r#"{"type":"tool_result","call_id":"c","content":"x"}"#,
            ),
            (
                Record::Guard {
                    guard: "g".into(),
                    reason: "r".into(),
                    block: false,
                },
                r#"{"type":"guard","guard":"g","reason":"r"}"#,
            ),
            (
                Record::Guard {
                    guard: "g".into(),
                    reason: "r".into(),
                    block: true,
                },
                r#"{"type":"guard","guard":"g","reason":"r","block":true}"#,
            ),
            (
                Record::ModelSwitched { model: None },
                r#"{"type":"model_switched","model":null}"#,
            ),
            (
                Record::Synthesizing { max: 3 },
                r#"{"type":"synthesizing","max":3}"#,
            ),
        ];
        for (record, json) in records {
            assert_eq!(record.to_json(), json);
            let back = serde_json::from_str::<Record<'_>>(json).unwrap();
            assert_eq!(back.to_json(), json);
        }
        let e = serde_json::from_str::<Record<'_>>(r#"{"type":"tool_begin"}"#).unwrap_err();
        assert!(
            e.to_string().starts_with("unknown variant `tool_begin`"),
            "{e}"
        );
    }
}
