//! The `pikuri.guard` span event: a guard's verdict on the turn's
//! `invoke_agent` span.
//!
//! The GenAI conventions (1.41.0) define no guardrail span or event yet:
//! the proposals (`apply_guardrail`, then `gen_ai.run_guardrail.*` with
//! `gen_ai.security.*` attributes, semantic-conventions-genai #427) are
//! still open. Until one lands, a verdict is an event of pikuri's own
//! namespace, carrying no content unless the host opts in.

use super::span::Attrs;
use crate::Event;

/// The attributes of [`Event::Guard`]'s span event: `pikuri.guard.name`,
/// `pikuri.guard.point` (`input`, `output`, `tool_input`, `tool_output`),
/// `pikuri.guard.action` (`replace`, `block`, `retry`, `reject`, `stop`),
/// `gen_ai.tool.call.id` at the tool points, and with content capture
/// `pikuri.guard.detail` (the guard's answer, feedback, message or reason).
pub(super) fn guard_attrs(event: &Event, capture: bool) -> Attrs {
    let mut a = Attrs::default();
    if let Event::Guard {
        guard,
        point,
        action,
        detail,
        call_id,
        ..
    } = event
    {
        a.set("pikuri.guard.name", guard.as_str());
        a.set("pikuri.guard.point", point.as_str());
        a.set("pikuri.guard.action", action.as_str());
        if !call_id.is_empty() {
            a.set("gen_ai.tool.call.id", call_id.as_str());
        }
        if capture && !detail.is_empty() {
            a.set("pikuri.guard.detail", detail.as_str());
        }
    }
    a
}
