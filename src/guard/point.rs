//! The values an [`Event::Guard`](crate::Event::Guard) names: where a
//! guard ran and what it decided. Plain values, in every build (the
//! `guard` feature off too, as `Event::Guard` is), so a listener or a
//! journal reader names them whatever the features; and the observation
//! of a call a guard's stop left unanswered (a journal written with guards
//! may be resumed by a build without them).

/// The observation of a call a guard's stop left unanswered.
pub(crate) const NOT_RUN: &str = "Error: not run: stopped by a guard";

/// Where a guard runs (in [`Event::Guard`](crate::Event::Guard)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Point {
    /// The user's message ([`Input`](super::Input)).
    Input,
    /// The final answer ([`Output`](super::Output)).
    Output,
    /// A tool call ([`ToolInput`](super::ToolInput)).
    ToolInput,
    /// A tool's result ([`ToolOutput`](super::ToolOutput)).
    ToolOutput,
}

crate::serde_macros::json_enum! {
    Serialize, Deserialize for Point {
        Input = "input",
        Output = "output",
        ToolInput = "tool_input",
        ToolOutput = "tool_output",
    }

    /// The snake_case name, as in JSON.
    pub fn as_str;
}

/// What a guard decided, when it did not allow (in
/// [`Event::Guard`](crate::Event::Guard)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// The text was replaced.
    Replace,
    /// The user's message was answered by the guard.
    Block,
    /// The model was asked again.
    Retry,
    /// The tool call was refused.
    Reject,
    /// The run stopped (a guard's verdict, or a guard that failed).
    Stop,
}

crate::serde_macros::json_enum! {
    Serialize, Deserialize for Action {
        Replace = "replace",
        Block = "block",
        Retry = "retry",
        Reject = "reject",
        Stop = "stop",
    }

    /// The snake_case name, as in JSON.
    pub fn as_str;
}

#[cfg(test)]
mod tests {
    use super::{Action, Point};

    #[test]
    fn points_and_actions_are_stored_as_their_names() {
        for p in [
            Point::Input,
            Point::Output,
            Point::ToolInput,
            Point::ToolOutput,
        ] {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.as_str()));
            assert_eq!(serde_json::from_str::<Point>(&json).unwrap(), p);
        }
        for a in [
            Action::Replace,
            Action::Block,
            Action::Retry,
            Action::Reject,
            Action::Stop,
        ] {
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.as_str()));
            assert_eq!(serde_json::from_str::<Action>(&json).unwrap(), a);
        }
        let e = serde_json::from_str::<Point>(r#""ToolInput""#).unwrap_err();
        assert!(
            e.to_string().starts_with("unknown variant `ToolInput`"),
            "{e}"
        );
    }
}
