//! The sdk family's checkers: the relay checkers that rest on boundaries, chosen as for a live
//! bridge (what every bridge owes its user, plus the policy rmcp's profile promises, read from
//! the trace's `run.spec`), since the bridge's own events are rmcp's internals, which the relay
//! checkers do not read.

use crate::schema::McpSchema;
use crate::trace::{Trace, Violation};

/// Judge an sdk trace.
pub fn check(trace: &Trace, schema: &McpSchema) -> Vec<Violation> {
    crate::relay::oracles::judge(trace, schema)
}
