//! The relay checkers about the bridge's stream lifecycle: how it reconnects, replays and shuts
//! down. They hold for every correct bridge under any fault, so they catch regressions nobody
//! has named yet (a hot reconnect loop, two streams at once, a reordered replay, a hang on EOF).

use std::collections::BTreeMap;

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::checks::Facts;
use crate::check::capped;
use crate::trace::Violation;

/// `min(15 000, 500 * 2^attempt)`, MODEL.md §1.3, computed here independently of the bridge.
fn backoff_ms(attempt: u64) -> u64 {
    500u64.saturating_mul(1 << attempt.min(20)).min(15_000)
}

/// At most one stream attempt at a time: a new connect only after the previous generation has
/// closed (single-flight reconnect).
pub fn single_flight_reconnect(facts: &Facts<'_>) -> Vec<Violation> {
    let mut open: Option<u64> = None;
    let mut found = Vec::new();
    for (index, event) in facts.bridge_events() {
        match event.kind.as_str() {
            kind::SSE_CONNECT => {
                if let Some(gen) = open {
                    let detail = format!("stream {} started while stream {gen} was still open", event.num("gen"));
                    found.push(facts.violation("single_flight_reconnect", index, detail));
                }
                open = Some(event.num("gen"));
            }
            kind::SSE_CLOSED if open == Some(event.num("gen")) => open = None,
            _ => {}
        }
    }
    capped(found)
}

/// Failed connects back off: attempt `k` starts at least `backoff(k-1)` after the failure
/// before it, so a dead relayer is not hammered.
pub fn reconnect_backoff(facts: &Facts<'_>) -> Vec<Violation> {
    let mut last_failure: Option<u64> = None;
    let mut found = Vec::new();
    for (index, event) in facts.bridge_events() {
        match event.kind.as_str() {
            kind::SSE_CLOSED if event.text("reason") == "error" => last_failure = Some(event.at_ms),
            kind::SSE_CONNECT => {
                let attempt = event.num("attempt");
                if let (Some(failed_at), true) = (last_failure, attempt > 0) {
                    let wait = backoff_ms(attempt - 1);
                    let waited = event.at_ms.saturating_sub(failed_at);
                    if waited + facts.slack_ms < wait {
                        let detail = format!("connect attempt {attempt} {waited} ms after a failure; backoff is {wait} ms");
                        found.push(facts.violation("reconnect_backoff", index, detail));
                    }
                }
            }
            kind::SSE_ENDPOINT => last_failure = None,
            _ => {}
        }
    }
    capped(found)
}

/// Two consecutive calls orphaned on one healthy-looking session mean the session is broken:
/// the bridge abandons it within one sweep period.
pub fn orphans_reconnect(facts: &Facts<'_>) -> Vec<Violation> {
    let mut streak: Option<(usize, u64, u64)> = None; // (event index, time, count) on this session
    let mut found = Vec::new();
    let due = facts.sweep_period_ms + facts.slack_ms;
    for (index, event) in facts.bridge_events() {
        if let Some((at_index, at_ms, 2..)) = streak {
            if event.at_ms > at_ms + due {
                let detail = "two calls orphaned on one healthy session, and the bridge kept it".to_string();
                found.push(facts.violation("orphans_reconnect", at_index, detail));
                streak = None;
            }
        }
        match event.kind.as_str() {
            kind::CALL_CLOSED_OUT if event.text("stream") == "up" => {
                let count = streak.map_or(0, |(_, _, count)| count) + 1;
                streak = Some((index, event.at_ms, count));
            }
            kind::CALL_REPLY if event.text("source") == "upstream" => streak = None,
            kind::SSE_CLOSED | kind::SSE_ENDPOINT | kind::BRIDGE_EXIT => streak = None,
            _ => {}
        }
    }
    capped(found)
}

/// After a reconnect the bridge replays what it owes in admission order, so the relayer sees a
/// client's requests in the order the client sent them.
pub fn replay_in_order(facts: &Facts<'_>) -> Vec<Violation> {
    let mut admitted: BTreeMap<String, usize> = BTreeMap::new();
    let mut last_in_gen: BTreeMap<u64, (usize, String)> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.bridge_events() {
        match event.kind.as_str() {
            kind::CALL_ADMIT => {
                admitted.insert(event.text("id"), index);
            }
            kind::POST_SEND if event.get("tracked") == Some(&Value::Bool(true)) && event.num("attempt") == 0 => {
                let id = event.text("id");
                let Some(&order) = admitted.get(&id) else { continue };
                let gen = event.num("gen");
                if let Some((previous, previous_id)) = last_in_gen.get(&gen) {
                    if *previous > order {
                        let detail = format!("stream {gen} got id {id} after id {previous_id}, which was admitted later");
                        found.push(facts.violation("replay_in_order", index, detail));
                    }
                }
                last_in_gen.insert(gen, (order, id));
            }
            _ => {}
        }
    }
    capped(found)
}

/// On stdin EOF the bridge fails what it owes and exits promptly, rather than hanging on.
pub fn clean_shutdown(facts: &Facts<'_>) -> Vec<Violation> {
    let Some((index, eof)) = facts.trace.events.iter().enumerate().find(|(_, e)| e.kind == kind::CLIENT_EOF) else {
        return Vec::new();
    };
    let exited = facts.trace.events.iter().find(|e| e.host == host::BRIDGE && e.kind == kind::BRIDGE_EXIT);
    let bound = eof.at_ms + 2 * facts.slack_ms + 1_000;
    let detail = match exited {
        Some(exit) if exit.at_ms <= bound => return Vec::new(),
        Some(exit) => format!("the bridge exited {} ms after stdin closed", exit.at_ms - eof.at_ms),
        None if facts.horizon_ms < bound => return Vec::new(),
        None => "stdin closed and the bridge never exited".to_string(),
    };
    vec![facts.violation("clean_shutdown", index, detail)]
}
