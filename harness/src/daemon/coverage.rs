//! What the daemon generator's cases exercised (`hunt --coverage`): the tables and the cells one
//! trace hits. Every cell is read from the boundary observations (what the CLIs sent and read,
//! what the MCP server received and answered) at the moment a fault took effect, so a phase the
//! generator never reaches shows as a zero.

use std::collections::{BTreeMap, BTreeSet};

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use crate::coverage::{faults_injected, Cell, Table, FAULT_KIND};
use crate::trace::Trace;

use super::faults::KINDS;
use super::interleavings::Interleavings;

/// Table: which request phase each fault (and lifecycle operation) met when it took effect.
pub const FAULT_PHASE: &str = "fault kind × phase";
/// Table: how each user action ended, on its first attempt or after a restart.
pub const OUTCOMES: &str = "action outcome";
/// Table: the lifecycle interleavings of `interleavings.rs`, per case.
pub const INTERLEAVINGS: &str = "lifecycle interleaving";
/// Table: which request a wedge held unanswered, at the MCP server or the authorization server.
pub const WEDGED: &str = "wedged request";

/// Rows of [`WEDGED`]: every request the daemon sends upstream, its own handshake and OAuth calls
/// as well as the workload's.
const WEDGED_ROWS: &[&str] = &[
    "initialize",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "/.well-known/oauth-authorization-server",
    "/register",
    "/token",
];

/// The faults and lifecycle operations, as rows of [`FAULT_PHASE`].
const FAULT_ROWS: &[&str] = &[
    "approval_delay",
    "approval_never",
    "page_delay",
    "repeated_cursor",
    "endless_cursors",
    "wedged_method",
    "slow_tool",
    "caller_deadline",
    "token_expiry",
    "keep_open",
    "crossed_frames",
    "daemon_stall",
    "daemon_crash",
    "process_hang",
    "stale_lock",
    "socket_reset",
    "config_edit",
    "peer_start",
];

/// The kinds placed in time; the others are mock settings that take effect at time 0.
const TIMED: &[&str] = &[
    "daemon_stall",
    "crossed_frames",
    "daemon_crash",
    "process_hang",
    "stale_lock",
    "socket_reset",
    "config_edit",
    "peer_start",
];

/// Phases, as columns of [`FAULT_PHASE`]: `at_start` for the mock settings; for a timed fault,
/// the phase of each user request in flight (`before_dispatch`: sent, nothing reached the MCP
/// server yet; `oauth`: the authorization flow is open; `upstream`: messages at the MCP server;
/// `between_pages`: a page answered with a next cursor not yet asked for), `recovery` (an action
/// restarting after a transport failure), or with nothing in flight `idle` (no reply read yet)
/// or `after_response` (a reply read: the daemon may still hold the connection).
const PHASES: &[&str] = &[
    "at_start",
    "idle",
    "before_dispatch",
    "oauth",
    "upstream",
    "between_pages",
    "after_response",
    "recovery",
];

const UNREACHABLE: &[(&str, &str)] = &[
    ("approval_delay", "idle"),
    ("approval_delay", "before_dispatch"),
    ("approval_delay", "oauth"),
    ("approval_delay", "upstream"),
    ("approval_delay", "between_pages"),
    ("approval_delay", "after_response"),
    ("approval_delay", "recovery"),
    ("approval_never", "idle"),
    ("approval_never", "before_dispatch"),
    ("approval_never", "oauth"),
    ("approval_never", "upstream"),
    ("approval_never", "between_pages"),
    ("approval_never", "after_response"),
    ("approval_never", "recovery"),
    ("page_delay", "idle"),
    ("page_delay", "before_dispatch"),
    ("page_delay", "oauth"),
    ("page_delay", "upstream"),
    ("page_delay", "between_pages"),
    ("page_delay", "after_response"),
    ("page_delay", "recovery"),
    ("repeated_cursor", "idle"),
    ("repeated_cursor", "before_dispatch"),
    ("repeated_cursor", "oauth"),
    ("repeated_cursor", "upstream"),
    ("repeated_cursor", "between_pages"),
    ("repeated_cursor", "after_response"),
    ("repeated_cursor", "recovery"),
    ("endless_cursors", "idle"),
    ("endless_cursors", "before_dispatch"),
    ("endless_cursors", "oauth"),
    ("endless_cursors", "upstream"),
    ("endless_cursors", "between_pages"),
    ("endless_cursors", "after_response"),
    ("endless_cursors", "recovery"),
    ("wedged_method", "idle"),
    ("wedged_method", "before_dispatch"),
    ("wedged_method", "oauth"),
    ("wedged_method", "upstream"),
    ("wedged_method", "between_pages"),
    ("wedged_method", "after_response"),
    ("wedged_method", "recovery"),
    ("slow_tool", "idle"),
    ("slow_tool", "before_dispatch"),
    ("slow_tool", "oauth"),
    ("slow_tool", "upstream"),
    ("slow_tool", "between_pages"),
    ("slow_tool", "after_response"),
    ("slow_tool", "recovery"),
    ("caller_deadline", "idle"),
    ("caller_deadline", "before_dispatch"),
    ("caller_deadline", "oauth"),
    ("caller_deadline", "upstream"),
    ("caller_deadline", "between_pages"),
    ("caller_deadline", "after_response"),
    ("caller_deadline", "recovery"),
    ("token_expiry", "idle"),
    ("token_expiry", "before_dispatch"),
    ("token_expiry", "oauth"),
    ("token_expiry", "upstream"),
    ("token_expiry", "between_pages"),
    ("token_expiry", "after_response"),
    ("token_expiry", "recovery"),
    ("keep_open", "idle"),
    ("keep_open", "before_dispatch"),
    ("keep_open", "oauth"),
    ("keep_open", "upstream"),
    ("keep_open", "between_pages"),
    ("keep_open", "after_response"),
    ("keep_open", "recovery"),
    ("crossed_frames", "at_start"),
    ("daemon_stall", "at_start"),
    ("daemon_crash", "at_start"),
    ("process_hang", "at_start"),
    ("stale_lock", "at_start"),
    ("socket_reset", "at_start"),
    ("config_edit", "at_start"),
    ("peer_start", "at_start"),
];

/// Rows of [`OUTCOMES`]: `ok`, the daemon's final error codes, the guards' refusals and the
/// transport reasons a CLI gives up with.
const OUTCOME_ROWS: &[&str] = &[
    "ok",
    "operation_timeout",
    "runtime_error",
    "unknown_method",
    "daemon_busy",
    "refused",
    "idle",
    "budget",
    "reset",
];

const OUTCOME_COLS: &[&str] = &["first_attempt", "after_restart"];

/// A transport failure on the first attempt is always retried once, so it ends an action only
/// after a restart.
const OUTCOME_UNREACHABLE: &[(&str, &str)] = &[
    ("idle", "first_attempt"),
    ("budget", "first_attempt"),
    ("reset", "first_attempt"),
];

const INTERLEAVING_ROWS: &[&str] = &[
    "mid_request_upgrade",
    "swap_before_drain",
    "swap_mid_drain",
    "stale_lock_broken",
    "lock_wait_refused",
];

/// The daemon family's coverage tables.
pub const TABLES: &[Table] = &[
    Table { name: FAULT_KIND, rows: KINDS, cols: &["start"], unreachable: &[] },
    Table { name: FAULT_PHASE, rows: FAULT_ROWS, cols: PHASES, unreachable: UNREACHABLE },
    Table { name: OUTCOMES, rows: OUTCOME_ROWS, cols: OUTCOME_COLS, unreachable: OUTCOME_UNREACHABLE },
    Table { name: INTERLEAVINGS, rows: INTERLEAVING_ROWS, cols: &["seen"], unreachable: &[] },
    Table { name: WEDGED, rows: WEDGED_ROWS, cols: &["fired"], unreachable: &[] },
];

/// The cells one run's trace hits.
pub fn observe(trace: &Trace) -> Vec<Cell> {
    let mut cells = faults_injected(trace);
    cells.extend(fault_phases(trace));
    cells.extend(outcomes(trace));
    cells.extend(
        trace
            .of_kind(kind::FAULT_FIRED)
            .filter(|(_, e)| e.text("fault") == "wedged_method")
            .map(|(_, e)| Cell::new(WEDGED, e.text("method"), "fired")),
    );
    let seen = Interleavings::of(trace);
    let flags = [
        ("mid_request_upgrade", seen.mid_request_upgrade),
        ("swap_before_drain", seen.swap_before_drain),
        ("swap_mid_drain", seen.swap_mid_drain),
        ("stale_lock_broken", seen.stale_lock_broken),
        ("lock_wait_refused", seen.lock_wait_refused),
    ];
    cells.extend(
        flags
            .iter()
            .filter(|(_, on)| *on)
            .map(|(row, _)| Cell::new(INTERLEAVINGS, *row, "seen")),
    );
    cells
}

/// Where one user request stands, from the boundaries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    BeforeDispatch,
    Oauth,
    Upstream,
    BetweenPages,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Self::BeforeDispatch => "before_dispatch",
            Self::Oauth => "oauth",
            Self::Upstream => "upstream",
            Self::BetweenPages => "between_pages",
        }
    }
}

/// One cell per distinct phase each fault's onset met.
fn fault_phases(trace: &Trace) -> Vec<Cell> {
    let mut open: BTreeMap<String, Stage> = BTreeMap::new();
    let mut recovering: BTreeSet<u64> = BTreeSet::new();
    let mut replied = false;
    let mut cells = Vec::new();
    for event in &trace.events {
        let id = event.text("id");
        match (event.host.as_str(), event.kind.as_str()) {
            (host::CLI, kind::CLI_SEND) => {
                recovering.remove(&event.num("action"));
                open.insert(id, Stage::BeforeDispatch);
            }
            (host::CLI, kind::CLI_REPLY) => {
                replied = true;
                open.remove(&id);
            }
            (host::CLI, kind::CLI_FAIL) => {
                open.remove(&id);
            }
            (host::CLI, kind::CLI_RESTART) => {
                recovering.insert(event.num("action"));
            }
            (host::CLI, kind::CLI_DONE) => {
                recovering.remove(&event.num("action"));
            }
            (_, kind::DAEMON_OAUTH) => {
                if let Some(stage) = open.get_mut(&id) {
                    *stage = if event.text("phase") == "start" {
                        Stage::Oauth
                    } else {
                        Stage::Upstream
                    };
                }
            }
            (host::MCP, kind::SERVER_RECV) => {
                if let Some(stage) = open.get_mut(&event.text("request")) {
                    if *stage != Stage::Oauth {
                        *stage = Stage::Upstream;
                    }
                }
            }
            (host::MCP, kind::SERVER_SEND) => {
                let next = serde_json::from_str::<Value>(&event.text("msg"))
                    .ok()
                    .and_then(|m| m.pointer("/result/nextCursor").cloned())
                    .is_some_and(|c| !c.is_null());
                if let Some(stage) = open.get_mut(&event.text("request")) {
                    if next && *stage == Stage::Upstream {
                        *stage = Stage::BetweenPages;
                    }
                }
            }
            (_, kind::FAULT_INJECTED) if event.text("phase") == "start" => {
                let fault = event.text("fault");
                if fault == "heal" {
                    continue;
                }
                let mut phases: BTreeSet<&'static str> = BTreeSet::new();
                if !TIMED.contains(&fault.as_str()) {
                    phases.insert("at_start");
                } else {
                    phases.extend(open.values().map(|s| s.name()));
                    if !recovering.is_empty() {
                        phases.insert("recovery");
                    }
                    if phases.is_empty() {
                        phases.insert(if replied { "after_response" } else { "idle" });
                    }
                }
                cells.extend(phases.into_iter().map(|p| Cell::new(FAULT_PHASE, fault.clone(), p)));
            }
            _ => {}
        }
    }
    cells
}

/// One cell per finished action: its outcome, and whether it came after a restart.
fn outcomes(trace: &Trace) -> Vec<Cell> {
    trace
        .of_kind(kind::CLI_DONE)
        .map(|(_, e)| {
            let col = if e.num("attempts") > 1 { "after_restart" } else { "first_attempt" };
            Cell::new(OUTCOMES, e.text("outcome"), col)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// The fault-phase rows restate `faults::KINDS` and `faults::LIFECYCLE` in the table's
    /// display order: a kind added there must get its row here.
    #[test]
    fn fault_rows_are_every_fault_kind_and_lifecycle_operation() {
        let rows: BTreeSet<&str> = super::FAULT_ROWS.iter().copied().collect();
        let kinds: BTreeSet<&str> = super::super::faults::KINDS.iter().chain(super::super::faults::LIFECYCLE).copied().collect();
        assert_eq!(rows, kinds);
    }
}
