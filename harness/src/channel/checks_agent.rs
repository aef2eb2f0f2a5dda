//! The channel checkers that judge the agent's stdio boundary: waiter latency and schema
//! validity. Split from `checks.rs` to keep each file about one boundary.

use std::collections::BTreeMap;

use bridge_under_test::events::kind;
use serde_json::Value;

use super::super::rpc::Input;
use super::Facts;
use crate::check::capped;
use crate::trace::Violation;
use crate::verdicts;

/// The timeout a `wait_for_event` without one asks for (the bridge's documented default).
const DEFAULT_WAIT_MS: i64 = 30_000;

/// Every agent request is answered exactly once: a `wait_for_event` within its timeout clamped
/// to [1, 300 000] ms, anything else at once (plus scheduling slack).
pub fn bounded_waits(facts: &Facts<'_>) -> Vec<Violation> {
    let eof_ms = facts
        .trace
        .first(kind::CLIENT_EOF)
        .map_or(u64::MAX, |e| e.at_ms);
    let mut open: BTreeMap<String, (usize, u64, u64)> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.agent_events() {
        let msg = facts.msg(index);
        if let Some(input) = facts.input(index) {
            // Only a line owed a reply with an id opens one (a malformed id gets none back).
            if let Some(id) = input.reply_id() {
                let served = matches!(input, Input::Request { .. });
                let bound = if served { wait_bound(facts, msg) } else { 0 } + facts.slack_ms;
                open.insert(id.to_string(), (index, event.at_ms, bound));
            }
            continue;
        }
        let Some(id) = msg
            .get("id")
            .filter(|id| !id.is_null())
            .map(Value::to_string)
        else {
            continue;
        };
        if event.kind == kind::MCP_RECV && msg.get("method").is_none() {
            let detail = match open.remove(&id) {
                None => Some(format!("a reply for id {id}, which is not outstanding")),
                Some((_, sent_ms, bound)) if event.at_ms - sent_ms.min(event.at_ms) > bound => {
                    Some(format!(
                        "id {id} answered after {} ms; the bound is {bound} ms",
                        event.at_ms - sent_ms
                    ))
                }
                Some(_) => None,
            };
            if let Some(detail) = verdicts::judging(detail) {
                found.push(facts.violation("bounded_waits", index, detail));
            }
        }
    }
    for (id, (index, sent_ms, bound)) in open {
        if sent_ms + bound >= eof_ms {
            verdicts::excused("the agent closed stdin before its reply was due");
        } else {
            let detail = format!("id {id} sent at {sent_ms} ms never answered (bound {bound} ms)");
            found.push(facts.violation("bounded_waits", index, detail));
        }
    }
    capped(found)
}

/// How long the bridge may take to answer `msg`: the clamped wait for `wait_for_event`.
fn wait_bound(facts: &Facts<'_>, msg: &Value) -> u64 {
    let waiting = msg.pointer("/params/name").and_then(Value::as_str) == Some("wait_for_event");
    if !waiting {
        return 0;
    }
    let requested = msg
        .pointer("/params/arguments/timeout_ms")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_WAIT_MS);
    u64::try_from(requested.max(0))
        .unwrap_or(0)
        .clamp(facts.wait_min_ms, facts.wait_max_ms)
}

/// Every message crossing the agent's stdio validates against the MCP 2025-11-25 schema (a
/// custom-method notification against the JSON-RPC notification envelope), a result against
/// its request's method.
pub fn schema_valid(facts: &Facts<'_>) -> Vec<Violation> {
    let mut methods: BTreeMap<String, String> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.agent_events() {
        let msg = facts.msg(index);
        let id = msg
            .get("id")
            .filter(|id| !id.is_null())
            .map(Value::to_string);
        let result = match event.kind.as_str() {
            kind::MCP_SEND => {
                if let (Some(id), Some(method)) = (&id, msg.get("method").and_then(Value::as_str)) {
                    methods.insert(id.clone(), method.to_string());
                }
                // A line the agent writes malformed on purpose (a bad envelope, an unknown
                // tool) is an input to judge the bridge by, not a message of a conforming peer.
                // So is a request's method sent as a notification (a `ping` without an id).
                match facts.input(index) {
                    Some(Input::Request { .. }) => facts.schema.validate_client_message(msg),
                    Some(Input::Notification { method, .. }) if method.starts_with("notifications/") => {
                        facts.schema.validate_client_message(msg)
                    }
                    _ => continue,
                }
            }
            kind::MCP_RECV => {
                let answering = id.and_then(|id| methods.get(&id).cloned());
                facts
                    .schema
                    .validate_server_message(msg, answering.as_deref())
            }
            // Not a line at all (the agent's stdin closing): no message to judge.
            _ => continue,
        };
        if let Some(error) = verdicts::judging(result.err()) {
            let detail = format!("{} {}: {error}", event.kind, event.text("msg"));
            found.push(facts.violation("schema_valid", index, detail));
        }
    }
    capped(found)
}
