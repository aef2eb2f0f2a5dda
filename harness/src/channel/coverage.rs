//! What the channel generator's cases exercised (`hunt --coverage`): the tables and the cells one
//! trace hits, each counted once per case.
//!
//! - `fault kind`: the fault kinds injected.
//! - `input × map state`: every input the bridge took (the agent's lines through the bridge's
//!   `channel.line` tap, the gateway's frames through `channel.frame`, control frames as the
//!   gateway delivered them, a host close, stdin EOF) against the state the maps were in when it
//!   arrived. For an input about one id (a permission request, an approval requested or
//!   resolved, a reply): that id's state — `unknown` (never tracked), `pending`, `expired`
//!   (tracked, past its expiry), `resolved` (decided or resolved), `evicted` (pushed out by the
//!   cap) — plus `empty` when both maps are empty, `at_cap` when its map is full and
//!   `after_close`. For the others: `empty`, `pending` (some entry live), `expired` (some expired
//!   entry not yet swept), `at_cap`, `after_close`.
//! - `outcome`: each ending the oracles tell apart — how each waiter ended, each decision, what
//!   became of each operator message, each error code the bridge wrote, each way an entry
//!   left or was refused.

use std::collections::BTreeMap;

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::faults::KINDS;
use super::model::{canonical_id, reply_of};
use super::rpc::{classify, Input};
use crate::coverage::{faults_injected, Cell, Table, FAULT_KIND};
use crate::trace::Trace;

pub const INPUT_STATE: &str = "input × map state";
pub const OUTCOME: &str = "outcome";

const INPUTS: &[&str] = &[
    "permission_request",
    "approval_requested",
    "approval_resolved",
    "owner_reply",
    "other_reply",
    "chat_message",
    "read",
    "wait",
    "malformed_line",
    "silent_line",
    "control_ping",
    "control_close",
    "close",
    "eof",
];

const STATES: &[&str] = &["empty", "unknown", "pending", "expired", "resolved", "evicted", "at_cap", "after_close"];

/// Cells no case can reach, by construction:
/// - an input about no id has no id state (`unknown`, `resolved`, `evicted`);
/// - nothing from the gateway reaches a closed bridge: `close()` ends the gateway connection
///   and no new one opens (`nothing_after_close` holds the bridge to it), so no frame, reply
///   or control frame meets `after_close`.
const UNREACHABLE: &[(&str, &str)] = &[
    ("chat_message", "unknown"),
    ("chat_message", "resolved"),
    ("chat_message", "evicted"),
    ("read", "unknown"),
    ("read", "resolved"),
    ("read", "evicted"),
    ("wait", "unknown"),
    ("wait", "resolved"),
    ("wait", "evicted"),
    ("malformed_line", "unknown"),
    ("malformed_line", "resolved"),
    ("malformed_line", "evicted"),
    ("silent_line", "unknown"),
    ("silent_line", "resolved"),
    ("silent_line", "evicted"),
    ("control_ping", "unknown"),
    ("control_ping", "resolved"),
    ("control_ping", "evicted"),
    ("control_close", "unknown"),
    ("control_close", "resolved"),
    ("control_close", "evicted"),
    ("close", "unknown"),
    ("close", "resolved"),
    ("close", "evicted"),
    ("eof", "unknown"),
    ("eof", "resolved"),
    ("eof", "evicted"),
    ("approval_requested", "after_close"),
    ("approval_resolved", "after_close"),
    ("owner_reply", "after_close"),
    ("other_reply", "after_close"),
    ("chat_message", "after_close"),
    ("control_ping", "after_close"),
    ("control_close", "after_close"),
];

const OUTCOMES: &[&str] = &[
    "waiter.events",
    "waiter.timeout",
    "waiter.closed",
    "decision.allow",
    "decision.deny",
    "message.decision",
    "message.unknown",
    "message.ordinary",
    "message.other_session",
    "message.closed",
    "error.-32700",
    "error.-32600",
    "error.-32601",
    "error.-32602",
    "removed.expired",
    "removed.evicted",
    "removed.reply",
    "removed.resolved",
    "ignored.invalid",
    "ignored.closed",
    "ignored.expired",
];

/// The channel family's coverage tables.
pub const TABLES: &[Table] = &[
    Table { name: FAULT_KIND, rows: KINDS, cols: &["start"], unreachable: &[] },
    Table { name: INPUT_STATE, rows: INPUTS, cols: STATES, unreachable: UNREACHABLE },
    // An operator message after close: the gateway connection ended with the close.
    Table { name: OUTCOME, rows: OUTCOMES, cols: &["seen"], unreachable: &[("message.closed", "seen")] },
];

/// The maps as the bridge's own `pending.*` events show them (coverage only: no verdict rests
/// on it).
#[derive(Default)]
struct Maps {
    /// Live entries by `(map, id)`: their expiry.
    live: BTreeMap<(String, String), u64>,
    /// How each id last left, by `(map, id)`.
    gone: BTreeMap<(String, String), String>,
    closed: bool,
    cap: u64,
}

impl Maps {
    fn size(&self, map: &str) -> u64 {
        self.live.keys().filter(|(m, _)| m == map).count() as u64
    }

    /// The map-wide state columns at `now_ms`.
    fn wide(&self, now_ms: u64) -> Vec<&'static str> {
        if self.closed {
            return vec!["after_close"];
        }
        let mut cols = Vec::new();
        if self.live.is_empty() {
            cols.push("empty");
        }
        if self.live.values().any(|&at| now_ms < at) {
            cols.push("pending");
        }
        if self.live.values().any(|&at| now_ms >= at) {
            cols.push("expired");
        }
        if self.size("permission") >= self.cap || self.size("approval") >= self.cap {
            cols.push("at_cap");
        }
        cols
    }

    /// The state columns of `id` in `map` at `now_ms`.
    fn of(&self, map: &str, id: &str, now_ms: u64) -> Vec<&'static str> {
        if self.closed {
            return vec!["after_close"];
        }
        let key = (map.to_string(), id.to_string());
        let state = match (self.live.get(&key), self.gone.get(&key).map(String::as_str)) {
            (Some(&at), _) if now_ms < at => "pending",
            (Some(_), _) | (None, Some("expired")) => "expired",
            (None, Some("evicted")) => "evicted",
            (None, Some(_)) => "resolved",
            (None, None) => "unknown",
        };
        let mut cols = vec![state];
        if self.live.is_empty() {
            cols.push("empty");
        }
        if self.size(map) >= self.cap {
            cols.push("at_cap");
        }
        cols
    }
}

/// The cells one run's trace hits, each once.
pub fn observe(trace: &Trace) -> Vec<Cell> {
    let mut cells = faults_injected(trace);
    let base = trace.first(kind::RUN_SPEC).map_or(0, |e| e.num("clock_base_ms"));
    let mut maps = Maps { cap: trace.first(kind::RUN_SPEC).map_or(1, |e| e.num("pending_cap")), ..Maps::default() };
    let mut sent = trace
        .events
        .iter()
        .filter(|e| e.host == host::AGENT && e.kind == kind::MCP_SEND);
    let mut hit = |row: &str, cols: Vec<&'static str>| {
        for col in cols {
            cells.push(Cell::new(INPUT_STATE, row, col));
        }
    };
    let mut outcomes: Vec<String> = Vec::new();
    for event in &trace.events {
        let now_ms = base + event.at_ms;
        match (event.host.as_str(), event.kind.as_str()) {
            (host::BRIDGE, kind::CHANNEL_LINE) => {
                let Some(line) = sent.next() else { continue };
                match classify(&line.text("msg")) {
                    Input::Notification { method, params } if method.ends_with("permission_request") => {
                        let raw = params.get("request_id").and_then(Value::as_str).unwrap_or("");
                        let id = canonical_id(raw).unwrap_or_default();
                        hit("permission_request", maps.of("permission", &id, now_ms));
                    }
                    Input::Request { method, params, .. } if method == "tools/call" => {
                        let wait = params.get("name").and_then(Value::as_str) == Some("wait_for_event");
                        hit(if wait { "wait" } else { "read" }, maps.wide(now_ms));
                    }
                    Input::Error { code, .. } => {
                        outcomes.push(format!("error.{code}"));
                        hit("malformed_line", maps.wide(now_ms));
                    }
                    Input::Notification { .. } | Input::Response => hit("silent_line", maps.wide(now_ms)),
                    Input::Request { .. } => {}
                }
            }
            (host::BRIDGE, kind::CHANNEL_FRAME) => {
                let frame: Value = serde_json::from_str(&event.text("text")).unwrap_or(Value::Null);
                let name = frame.get("event").and_then(Value::as_str).unwrap_or("");
                let payload = frame.get("payload").unwrap_or(&Value::Null);
                let id = payload.get("id").and_then(Value::as_str).unwrap_or("");
                if name.ends_with(".approval.requested") {
                    hit("approval_requested", maps.of("approval", id, now_ms));
                } else if name.ends_with(".approval.resolved") {
                    hit("approval_resolved", maps.of("approval", id, now_ms));
                } else if name == "session.message" {
                    let text = payload.get("message").and_then(Value::as_str).unwrap_or("");
                    let owner = payload.get("senderIsOwner").and_then(Value::as_bool) == Some(true);
                    let ours = payload.get("sessionKey").and_then(Value::as_str) == trace.first(kind::RUN_SPEC).map(|e| e.text("session")).as_deref();
                    match reply_of(text) {
                        Some((_, id)) if owner && ours => hit("owner_reply", maps.of("permission", &id, now_ms)),
                        Some((_, id)) => hit("other_reply", maps.of("permission", &id, now_ms)),
                        None => hit("chat_message", maps.wide(now_ms)),
                    }
                }
            }
            (host::GATEWAY, kind::GATEWAY_CONTROL) if event.get("delivered") == Some(&Value::Bool(true)) => {
                let row = if event.text("frame") == "ping" { "control_ping" } else { "control_close" };
                hit(row, maps.wide(now_ms));
            }
            (host::SIM, kind::FAULT_INJECTED) if event.text("fault") == "close" && event.text("phase") == "start" => {
                hit("close", maps.wide(now_ms));
            }
            (host::AGENT, kind::CLIENT_EOF) => hit("eof", maps.wide(now_ms)),
            (host::BRIDGE, kind::PENDING_ADD) => {
                let key = (event.text("map"), event.text("id"));
                maps.live.entry(key).or_insert(event.num("expires_at_ms"));
            }
            (host::BRIDGE, kind::PENDING_REMOVE) => {
                let key = (event.text("map"), event.text("id"));
                maps.live.remove(&key);
                outcomes.push(format!("removed.{}", event.text("reason")));
                maps.gone.insert(key, event.text("reason"));
            }
            (host::BRIDGE, kind::PENDING_IGNORED) => outcomes.push(format!("ignored.{}", event.text("reason"))),
            (host::BRIDGE, kind::CHANNEL_CLOSE) => {
                maps.closed = true;
                maps.live.clear();
            }
            (host::BRIDGE, kind::WAITER_END) => outcomes.push(format!("waiter.{}", event.text("outcome"))),
            (host::BRIDGE, kind::DECISION_SENT) => outcomes.push(format!("decision.{}", event.text("behavior"))),
            (host::BRIDGE, kind::OPERATOR_MESSAGE) => outcomes.push(format!("message.{}", event.text("outcome"))),
            _ => {}
        }
    }
    cells.extend(outcomes.into_iter().map(|row| Cell::new(OUTCOME, row, "seen")));
    cells.sort();
    cells.dedup();
    cells
}
