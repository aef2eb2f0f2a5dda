//! What every family's checkers share: the cap on reported violations and reading a recorded
//! message.

use serde_json::Value;

use crate::trace::{TraceEvent, Violation};

/// At most this many violations are reported per checker: the first ones tell the story.
pub const MAX_PER_CHECKER: usize = 3;

/// Keep the first [`MAX_PER_CHECKER`] violations.
pub fn capped(mut violations: Vec<Violation>) -> Vec<Violation> {
    violations.truncate(MAX_PER_CHECKER);
    violations
}

/// The JSON message an event's `msg` field carries (`Null` when it is not JSON).
pub fn message(event: &TraceEvent) -> Value {
    serde_json::from_str(&event.text("msg")).unwrap_or(Value::Null)
}
