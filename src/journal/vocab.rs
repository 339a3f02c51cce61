//! The journal's own words: the names its records store for why a run
//! ended, why an answer ended, what an approver decided and why a history
//! was replaced.
//!
//! A journal outlives the code that wrote it, so these names are the file
//! format: each is spelled out here, once, and never derived from a public
//! enum's Rust name or `Debug` text (renaming
//! [`StopReason::Completed`](crate::StopReason::Completed) must not change
//! a file). The public enums convert to and from these by explicit
//! `match`es below, which the compiler makes complete: a new public
//! variant needs a stored name before the crate builds. The
//! `on_disk_names` test pins every name.
//!
//! Reading accepts the spellings journals of format version 1 stored
//! before these names existed (`"Completed"`, `"error: ..."`,
//! `"deny: ..."`); writing uses only the names below. A name a reader does
//! not know is a damaged record ([`Error::JournalCorrupt`](crate::Error::JournalCorrupt),
//! naming the record).

use std::fmt;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use crate::approval::Decision;
use crate::{Error, FinishReason, StopReason};

/// One stored vocabulary: the enum, its stored names, its serde form
/// (the name as a JSON string), and the word for it in an error.
macro_rules! vocabulary {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            #[cfg(test)]
            pub(crate) const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// What a name of this vocabulary names, for errors.
            pub(crate) const WHAT: &'static str = $what;

            /// The stored name.
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The variant a current name stores.
            fn current(name: &str) -> Option<$name> {
                match name {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let name = String::deserialize(d)?;
                $name::parse(&name).ok_or_else(|| de::Error::custom(Unknown($name::WHAT, &name)))
            }
        }
    };
}

/// "unknown stop reason `x`": the error of a name no version stored.
struct Unknown<'a>(&'static str, &'a str);

impl fmt::Display for Unknown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The name is quoted as JSON: a control character or a long
        // string in a damaged file stays one readable line.
        let name = crate::util::excerpt(self.1, 64);
        write!(f, "unknown {} {:?}", self.0, name)
    }
}

vocabulary! {
    /// Why a run ended (a `turn_end` record's `reason`).
    Ended, "stop reason" {
        Completed = "completed",
        Incomplete = "incomplete",
        Synthesized = "synthesized",
        ApprovalPending = "approval_pending",
        StepLimit = "step_limit",
        Budget = "budget",
        Cancelled = "cancelled",
        Error = "error",
    }
}

vocabulary! {
    /// Why a model's answer ended (a `response` record's `finish`).
    Finish, "finish reason" {
        Complete = "complete",
        ToolCalls = "tool_calls",
        Length = "length",
        Filtered = "filtered",
        ServerCut = "server_cut",
    }
}

vocabulary! {
    /// What the approver (or the host) decided (an `approval_answered`
    /// record's `decision`).
    Decided, "approval decision" {
        Approve = "approve",
        Deny = "deny",
        Edit = "edit",
        Defer = "defer",
    }
}

vocabulary! {
    /// Why the history was replaced (a `history` record's `cause`).
    HistoryCause, "history cause" {
        Compaction = "compaction",
        Loaded = "loaded",
        Cleared = "cleared",
    }
}

impl Ended {
    /// A current name, or a spelling version 1 journals stored before the
    /// names existed: the `Debug` text of the stop reasons a run returned,
    /// and `error: <message>` for every run that failed.
    fn parse(name: &str) -> Option<Ended> {
        Ended::current(name).or(match name {
            "Completed" => Some(Ended::Completed),
            "Synthesized" => Some(Ended::Synthesized),
            "ApprovalPending" => Some(Ended::ApprovalPending),
            _ if name.starts_with("error: ") => Some(Ended::Error),
            _ => None,
        })
    }

    /// How a run that returned `result` ended, and its error's message.
    pub(crate) fn of<T>(result: &Result<(StopReason, T), Error>) -> (Ended, Option<String>) {
        match result {
            Ok((reason, _)) => (Ended::from_stop(*reason), None),
            Err(Error::Cancelled) => (Ended::Cancelled, None),
            Err(Error::StepLimitExceeded { .. }) => (Ended::StepLimit, None),
            Err(Error::BudgetExceeded { .. }) => (Ended::Budget, None),
            Err(e) => (Ended::Error, Some(e.to_string())),
        }
    }

    /// The stored name of a public stop reason.
    pub(crate) fn from_stop(reason: StopReason) -> Ended {
        match reason {
            StopReason::Completed => Ended::Completed,
            StopReason::Incomplete => Ended::Incomplete,
            StopReason::Synthesized => Ended::Synthesized,
            StopReason::ApprovalPending => Ended::ApprovalPending,
            StopReason::StepLimit => Ended::StepLimit,
            StopReason::Budget => Ended::Budget,
            StopReason::Cancelled => Ended::Cancelled,
            StopReason::Error => Ended::Error,
        }
    }

    /// The public stop reason this name stores.
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "the replay reads no stop reason yet")
    )]
    pub(crate) fn stop(self) -> StopReason {
        match self {
            Ended::Completed => StopReason::Completed,
            Ended::Incomplete => StopReason::Incomplete,
            Ended::Synthesized => StopReason::Synthesized,
            Ended::ApprovalPending => StopReason::ApprovalPending,
            Ended::StepLimit => StopReason::StepLimit,
            Ended::Budget => StopReason::Budget,
            Ended::Cancelled => StopReason::Cancelled,
            Ended::Error => StopReason::Error,
        }
    }
}

impl Finish {
    /// Only current names: version 1 journals stored a `truncated` flag
    /// instead (see [`Finish::legacy`]).
    fn parse(name: &str) -> Option<Finish> {
        Finish::current(name)
    }

    /// The finish a response record of a journal without `finish` stored:
    /// its `truncated` flag, and whether the message calls tools.
    pub(crate) fn legacy(truncated: bool, calls_tools: bool) -> Finish {
        match (truncated, calls_tools) {
            (true, _) => Finish::Length,
            (false, true) => Finish::ToolCalls,
            (false, false) => Finish::Complete,
        }
    }

    /// The stored name of a public finish reason.
    pub(crate) fn from_public(finish: FinishReason) -> Finish {
        match finish {
            FinishReason::Complete => Finish::Complete,
            FinishReason::ToolCalls => Finish::ToolCalls,
            FinishReason::Length => Finish::Length,
            FinishReason::Filtered => Finish::Filtered,
            FinishReason::ServerCut => Finish::ServerCut,
        }
    }

    /// The public finish reason this name stores.
    pub(crate) fn public(self) -> FinishReason {
        match self {
            Finish::Complete => FinishReason::Complete,
            Finish::ToolCalls => FinishReason::ToolCalls,
            Finish::Length => FinishReason::Length,
            Finish::Filtered => FinishReason::Filtered,
            Finish::ServerCut => FinishReason::ServerCut,
        }
    }
}

impl Decided {
    /// A current name, or a spelling version 1 journals stored before the
    /// names existed: `deny: <reason>` and `edit: <arguments>` (the reason
    /// and arguments are not read back: the replay needs only that the
    /// call was decided).
    fn parse(name: &str) -> Option<Decided> {
        Decided::current(name).or(if name.starts_with("deny: ") {
            Some(Decided::Deny)
        } else if name.starts_with("edit: ") {
            Some(Decided::Edit)
        } else {
            None
        })
    }

    /// The stored name of a public decision.
    pub(crate) fn of(decision: &Decision) -> Decided {
        match decision {
            Decision::Approve => Decided::Approve,
            Decision::Deny { .. } => Decided::Deny,
            Decision::Edit { .. } => Decided::Edit,
            Decision::Defer => Decided::Defer,
        }
    }
}

impl HistoryCause {
    /// Only current names: these are the spellings version 1 always
    /// stored.
    fn parse(name: &str) -> Option<HistoryCause> {
        HistoryCause::current(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The golden table: every stored name. A failure here means the file
    /// format changed: old journals would no longer read, or new ones not
    /// in an older reader. Add a name; never rename one.
    #[test]
    fn on_disk_names() {
        let table: &[(&str, Vec<&str>)] = &[
            (Ended::WHAT, Ended::ALL.iter().map(|v| v.as_str()).collect()),
            (
                Finish::WHAT,
                Finish::ALL.iter().map(|v| v.as_str()).collect(),
            ),
            (
                Decided::WHAT,
                Decided::ALL.iter().map(|v| v.as_str()).collect(),
            ),
            (
                HistoryCause::WHAT,
                HistoryCause::ALL.iter().map(|v| v.as_str()).collect(),
            ),
        ];
        let golden: &[(&str, &[&str])] = &[
            (
                "stop reason",
                &[
                    "completed",
                    "incomplete",
                    "synthesized",
                    "approval_pending",
                    "step_limit",
                    "budget",
                    "cancelled",
                    "error",
                ],
            ),
            (
                "finish reason",
                &["complete", "tool_calls", "length", "filtered", "server_cut"],
            ),
            ("approval decision", &["approve", "deny", "edit", "defer"]),
            ("history cause", &["compaction", "loaded", "cleared"]),
        ];
        assert_eq!(table.len(), golden.len());
        for ((what, names), (gwhat, gnames)) in table.iter().zip(golden) {
            assert_eq!(what, gwhat);
            assert_eq!(names, gnames, "the stored names of {what}");
        }
    }

    /// Every public value maps to a stored name and back to itself, and
    /// every stored name reads back as the value that wrote it.
    #[test]
    fn conversions_round_trip() {
        for &e in Ended::ALL {
            assert_eq!(Ended::from_stop(e.stop()), e);
            assert_eq!(Ended::parse(e.as_str()), Some(e));
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(json, format!("\"{}\"", e.as_str()));
            assert_eq!(serde_json::from_str::<Ended>(&json).unwrap(), e);
        }
        for &f in Finish::ALL {
            assert_eq!(Finish::from_public(f.public()), f);
            assert_eq!(Finish::parse(f.as_str()), Some(f));
        }
        for &d in Decided::ALL {
            assert_eq!(Decided::parse(d.as_str()), Some(d));
        }
        for &c in HistoryCause::ALL {
            assert_eq!(HistoryCause::parse(c.as_str()), Some(c));
        }
        let decisions = [
            (Decision::Approve, Decided::Approve),
            (Decision::deny("no"), Decided::Deny),
            (Decision::edit(serde_json::json!({})), Decided::Edit),
            (Decision::Defer, Decided::Defer),
        ];
        for (d, stored) in decisions {
            assert_eq!(Decided::of(&d), stored);
        }
    }

    /// The decoupling: the stored names are not the public enums' `Debug`
    /// text (which is what version 1 stored, and what a rename changes).
    #[test]
    fn stored_names_are_not_debug_text() {
        for &e in Ended::ALL {
            assert_ne!(e.as_str(), format!("{:?}", e.stop()));
        }
    }

    /// What version 1 journals stored before the names existed still reads.
    #[test]
    fn old_spellings_read() {
        let old = [
            ("Completed", Ended::Completed),
            ("Synthesized", Ended::Synthesized),
            ("ApprovalPending", Ended::ApprovalPending),
            ("error: cancelled", Ended::Error),
            ("error: http status 500: boom", Ended::Error),
        ];
        for (name, e) in old {
            assert_eq!(Ended::parse(name), Some(e), "{name}");
        }
        assert_eq!(Decided::parse("deny: not today"), Some(Decided::Deny));
        assert_eq!(Decided::parse(r#"edit: {"a":1}"#), Some(Decided::Edit));
        assert_eq!(Finish::legacy(true, true), Finish::Length);
        assert_eq!(Finish::legacy(false, true), Finish::ToolCalls);
        assert_eq!(Finish::legacy(false, false), Finish::Complete);
    }

    /// Unknown names, the empty name, other spellings of a name and other
    /// JSON types are refused with an error that names the vocabulary.
    #[test]
    fn unknown_names_and_wrong_types_are_refused() {
        for bad in [
            r#""""#,
            r#""Complete""#,
            r#""COMPLETED""#,
            r#"" completed""#,
            r#""errors""#,
            r#""Incomplete""#,
            "5",
            "null",
            "true",
            r#"["completed"]"#,
            r#"{"reason":"completed"}"#,
        ] {
            let e = serde_json::from_str::<Ended>(bad).unwrap_err().to_string();
            assert!(
                e.contains("stop reason") || e.contains("invalid type"),
                "{bad}: {e}"
            );
        }
        let e = serde_json::from_str::<Finish>(r#""stop""#)
            .unwrap_err()
            .to_string();
        assert!(e.contains(r#"unknown finish reason "stop""#), "{e}");
        let e = serde_json::from_str::<Decided>(r#""deny:""#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown approval decision"), "{e}");
        let e = serde_json::from_str::<HistoryCause>(r#""""#)
            .unwrap_err()
            .to_string();
        assert!(e.contains(r#"unknown history cause """#), "{e}");
    }
}
