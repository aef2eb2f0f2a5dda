//! The channel checkers besides the reference model that judge accounting across hops
//! (ORACLES.md §2–3): decisions against owner replies, waiters at close and EOF, the end-of-run
//! resource report against the gateway's view, clock domains, and one agent-visible event per
//! gateway event.

use std::collections::{BTreeMap, VecDeque};

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::{owner_reply, Facts, PERMISSION};
use crate::check::capped;
use crate::trace::{TraceEvent, Violation};
use crate::verdicts;

/// Every decision the agent receives answers exactly one owner reply (in the bridge's session,
/// delivered by the gateway, naming that behaviour and id) made while a permission of that id,
/// requested by the agent, was pending: not yet decided, not past its TTL. Two decisions never
/// share one reply, even when the agent asks again for the same id.
pub fn decision_answers_reply(facts: &Facts<'_>) -> Vec<Violation> {
    // Per canonical id: when the agent last asked (agent clock), whether that ask is decided.
    let mut asked: BTreeMap<String, (u64, bool)> = BTreeMap::new();
    // Owner replies not yet answered: (behavior, id, at_ms, asked_at_ms).
    let mut replies: Vec<(&'static str, String, u64, u64)> = Vec::new();
    // Owner replies that met no pending ask: (behavior, id, at_ms).
    let mut early: Vec<(&'static str, String, u64)> = Vec::new();
    let ttl = facts.permission_ttl_ms;
    let mut found = Vec::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        match (event.host.as_str(), event.kind.as_str()) {
            (host::GATEWAY, kind::GATEWAY_SAY) => {
                let owned = event.get("owner") == Some(&Value::Bool(true))
                    && event.get("delivered") == Some(&Value::Bool(true))
                    && event.text("session") == facts.session;
                let Some((behavior, id)) = owner_reply(&event.text("text")).filter(|_| owned)
                else {
                    continue;
                };
                let pending = asked
                    .get(&id)
                    .filter(|(at, decided)| !decided && event.at_ms < at + ttl + facts.slack_ms);
                if let Some((at, _)) = pending {
                    replies.push((behavior, id, event.at_ms, *at));
                } else {
                    early.push((behavior, id, event.at_ms));
                }
            }
            (host::AGENT, kind::MCP_SEND) => {
                let raw = super::permission_request_id(facts.input(index));
                if let Some(id) = raw.as_deref().and_then(crate::channel::model::canonical_id) {
                    // The window runs from the latest ask: a repeat while the first is pending
                    // keeps the first entry, but the first may have left unseen from here (the
                    // cap evicted it) and the repeat tracked anew. The model holds the exact
                    // expiry; this oracle only needs a window some ask opened.
                    // A reply the owner made up to the scheduling slack before this ask may
                    // reach the bridge after it (same tick, link latency): it may answer it.
                    early.retain(|(behavior, i, at)| {
                        let recent = at + facts.slack_ms >= event.at_ms;
                        if recent && *i == id {
                            replies.push((*behavior, id.clone(), *at, event.at_ms));
                        }
                        recent && *i != id
                    });
                    asked.insert(id, (event.at_ms, false));
                }
            }
            (host::AGENT, kind::MCP_RECV) => {
                let msg = facts.msg(index);
                if msg.get("method").and_then(Value::as_str) != Some(PERMISSION) {
                    continue;
                }
                let id = msg.pointer("/params/request_id").and_then(Value::as_str).unwrap_or("");
                let behavior = msg.pointer("/params/behavior").and_then(Value::as_str).unwrap_or("");
                let matched = replies.iter().position(|(b, i, _, _)| *b == behavior && i == id);
                match matched {
                    Some(n) => {
                        verdicts::held();
                        replies.remove(n);
                        replies.retain(|(_, i, _, _)| i != id);
                        if let Some(entry) = asked.get_mut(id) {
                            entry.1 = true;
                        }
                    }
                    None => {
                        let detail = format!(
                            "{behavior} for {id} answers no owner reply made while a permission {id} was pending"
                        );
                        found.push(facts.violation("decision_answers_reply", index, detail));
                    }
                }
            }
            _ => {}
        }
    }
    capped(found)
}

/// Every request the agent sends is answered exactly once before the bridge closes stdout, at
/// a close and at stdin EOF too: a `wait_for_event` outstanding when the host closes the
/// channel or the agent closes stdin is answered within the scheduling slack.
pub fn every_waiter_answered(facts: &Facts<'_>) -> Vec<Violation> {
    // Outstanding requests: id → (event index, sent at, whether it waits).
    let mut open: BTreeMap<String, (usize, u64, bool)> = BTreeMap::new();
    // Owed by a close or EOF: id → (why, by when).
    let mut owed: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let mut found = Vec::new();
    let slack = facts.slack_ms;
    for (index, event) in facts.trace.events.iter().enumerate() {
        let overdue: Vec<String> = owed
            .iter()
            .filter(|(_, (_, by))| event.at_ms > *by)
            .map(|(id, _)| id.clone())
            .collect();
        for id in overdue {
            if let Some((why, _)) = owed.remove(&id) {
                let detail = format!("wait_for_event {id} still unanswered {slack} ms after {why}");
                found.push(facts.violation("every_waiter_answered", index, detail));
            }
        }
        let closing = match (event.host.as_str(), event.kind.as_str()) {
            (host::SIM, kind::FAULT_INJECTED) if event.text("fault") == "close" => Some("a close"),
            (host::AGENT, kind::CLIENT_EOF) => Some("stdin EOF"),
            _ => None,
        };
        if let Some(why) = closing {
            for (id, (_, _, waits)) in &open {
                if *waits && !owed.contains_key(id) {
                    owed.insert(id.clone(), (format!("{why} at {} ms", event.at_ms), event.at_ms + slack));
                }
            }
            continue;
        }
        if event.host != host::AGENT {
            continue;
        }
        if event.kind == kind::MCP_SEND {
            // What the line is owed follows from the line (a malformed one's error may have no id).
            let Some(input) = facts.input(index) else { continue };
            let waits = matches!(input, crate::channel::rpc::Input::Request { params, .. }
                if params.get("name").and_then(Value::as_str) == Some("wait_for_event"));
            if let Some(id) = input.reply_id() {
                open.insert(id.to_string(), (index, event.at_ms, waits));
            }
            continue;
        }
        let msg = facts.msg(index);
        let Some(id) = msg.get("id").filter(|id| !id.is_null()).map(Value::to_string) else {
            continue;
        };
        if event.kind == kind::MCP_RECV && msg.get("method").is_none() {
            owed.remove(&id);
            if open.remove(&id).is_none() {
                let detail = format!("a second reply (or one nobody asked for) to id {id}");
                found.push(facts.violation("every_waiter_answered", index, detail));
            } else {
                verdicts::held();
            }
        }
    }
    for (id, (index, sent_ms, _)) in open {
        let detail = format!("id {id} sent at {sent_ms} ms was never answered before stdout closed");
        found.push(facts.violation("every_waiter_answered", index, detail));
    }
    capped(found)
}

/// After close nothing remains: the bridge's end-of-run resource report (taken at exit, before
/// the process drops anything; owed once the agent has closed stdin) shows no timer, no gateway task, no waiter task, no entry and no
/// queued event; and the gateway's own view agrees: every connection open at the first close
/// ends within the slack, and none opens afterwards.
pub fn nothing_after_close(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let slack = facts.slack_ms;
    let mut open: BTreeMap<u64, usize> = BTreeMap::new();
    let mut closed_at: Option<u64> = None;
    let mut report_seen = false;
    for (index, event) in facts.trace.events.iter().enumerate() {
        if let Some(at) = closed_at {
            if let Some((conn, _)) = open.iter().next().filter(|_| event.at_ms > at + slack) {
                let detail = format!(
                    "the gateway's connection {conn} is still open {slack} ms after the close at {at} ms"
                );
                found.push(facts.violation("nothing_after_close", index, detail));
                open.clear();
            }
        }
        match (event.host.as_str(), event.kind.as_str()) {
            (host::GATEWAY, kind::GATEWAY_CONN) => {
                let conn = event.num("conn");
                if let Some(at) = closed_at.filter(|at| event.at_ms > at + slack) {
                    let detail = format!("the gateway accepted connection {conn} after the close at {at} ms");
                    found.push(facts.violation("nothing_after_close", index, detail));
                }
                open.insert(conn, index);
            }
            (host::GATEWAY, kind::GATEWAY_END) => {
                open.remove(&event.num("conn"));
            }
            (host::BRIDGE, kind::CHANNEL_CLOSE) if closed_at.is_none() => {
                closed_at = Some(event.at_ms);
            }
            (host::BRIDGE, kind::CHANNEL_REPORT) => {
                report_seen = true;
                let held: Vec<String> = ["timer", "socket"]
                    .into_iter()
                    .filter(|f| event.get(f) != Some(&Value::Bool(false)))
                    .map(str::to_string)
                    .chain(
                        ["waiters", "permissions", "approvals", "queue"]
                            .into_iter()
                            .filter(|f| event.num(f) > 0)
                            .map(|f| format!("{f} {}", event.num(f))),
                    )
                    .collect();
                if event.get("closed") != Some(&Value::Bool(true)) || !held.is_empty() {
                    let detail = format!(
                        "at exit (closed {}) the bridge still holds: {}",
                        event.text("closed"),
                        held.join(", ")
                    );
                    found.push(facts.violation("nothing_after_close", index, detail));
                } else {
                    verdicts::held();
                }
            }
            _ => {}
        }
    }
    // The agent closing stdin is what ends the bridge, as the agent saw it: a bridge that never
    // reaches its exit gives no report either, so its own `channel.exit` cannot be the trigger.
    let eof = facts.trace.first(kind::CLIENT_EOF).is_some();
    let exited = facts.trace.first(kind::CHANNEL_EXIT).is_some();
    if (eof || exited) && !report_seen {
        let last = facts.trace.events.len().saturating_sub(1);
        let detail = "the agent closed stdin, yet the bridge never gave its end-of-run resource report";
        found.push(facts.violation("nothing_after_close", last, detail.into()));
    }
    capped(found)
}

/// The gateway's approval requests as the bridge read them: each delivered request's stamp
/// (`expiresAtMs`, if a number) and the clock offset in force, queued per id until the bridge
/// reads a request frame of that id. Two requests for one id can be sent within a tick, the
/// second recorded before the bridge reads the first (soak tokens
/// v1.channel.none.b026f46afb398f24, v1.channel.none.5fbc15e7cda0babf): frames pair with sends
/// in order. What the gateway sent on a connection whose end the bridge read, and what it sent
/// between that end and its next connection, never arrives (soak tokens
/// v1.channel.none.0ecf10637cf8ee43, v1.channel.none.198c80eea7e18477, and
/// v1.channel.none.31b648191af9b314, the send recorded after the bridge's EOF).
#[derive(Default)]
struct RequestFrames {
    sent: BTreeMap<String, VecDeque<(Option<i64>, i64)>>,
    offset: i64,
    between: bool,
}

impl RequestFrames {
    /// Take in one event; when it is the bridge reading a request frame that a delivered send
    /// explains, that send: `(id, (stamp, offset))`.
    fn step(&mut self, event: &TraceEvent) -> Option<(String, (Option<i64>, i64))> {
        match (event.host.as_str(), event.kind.as_str()) {
            (host::SIM, kind::FAULT_INJECTED) if event.text("fault") == "clock_offset" => {
                let detail: Value = serde_json::from_str(&event.text("detail")).unwrap_or(Value::Null);
                self.offset = detail.get("offset_ms").and_then(Value::as_i64).unwrap_or(0);
            }
            (host::GATEWAY, kind::GATEWAY_CONN) => self.between = false,
            (host::GATEWAY, kind::GATEWAY_SEND)
                if !self.between
                    && event.text("event").ends_with(".requested")
                    && event.get("delivered") == Some(&Value::Bool(true)) =>
            {
                let stamp = event.text("expires_at_ms").parse::<i64>().ok();
                self.sent.entry(event.text("id")).or_default().push_back((stamp, self.offset));
            }
            (host::BRIDGE, kind::GATEWAY_CLOSED) => {
                self.sent.clear();
                self.between = true;
            }
            (host::BRIDGE, kind::CHANNEL_FRAME) => {
                let frame: Value = serde_json::from_str(&event.text("text")).unwrap_or(Value::Null);
                let requested = frame.get("event").and_then(Value::as_str).is_some_and(|e| e.ends_with(".requested"));
                let id = frame.pointer("/payload/id").and_then(Value::as_str).filter(|_| requested)?;
                let stamp = self.sent.get_mut(id).and_then(VecDeque::pop_front)?;
                return Some((id.to_string(), stamp));
            }
            _ => {}
        }
        None
    }

    /// The oldest send of `id` the bridge has not read.
    fn unread(&self, id: &str) -> Option<&(Option<i64>, i64)> {
        self.sent.get(id).and_then(VecDeque::front)
    }
}

/// Clock domains: an approval's `expiresAtMs` is on the gateway's clock, and the bridge judges
/// it on its own, as MODEL.md §3.4 says, whatever the offset between the clocks (ahead or
/// behind): the expiry it stores is the stamp the gateway sent (its own record), clamped to the
/// permission TTL from tracking, or the 30 min default when the stamp is absent or not a number;
/// and an approval whose stamp had passed on the bridge's clock when it arrived is not tracked.
pub fn clock_domains(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut frames = RequestFrames::default();
    // The stamp of the request frame the bridge read last, per id: it judges the tracking.
    let mut read: BTreeMap<String, (Option<i64>, i64)> = BTreeMap::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        if let Some((id, stamp)) = frames.step(event) {
            read.insert(id, stamp);
            continue;
        }
        match (event.host.as_str(), event.kind.as_str()) {
            (host::BRIDGE, kind::PENDING_ADD)
                if event.text("map") == "approval" && event.get("repeat") != Some(&Value::Bool(true)) =>
            {
                let id = event.text("id");
                let Some((stamp, offset)) = read.get(&id).or_else(|| frames.unread(&id)) else { continue };
                let tracked = event.num("now_ms");
                let cap = tracked + facts.permission_ttl_ms;
                let want = match stamp {
                    Some(at) => u64::try_from(*at).unwrap_or(0).min(cap),
                    None => tracked + facts.approval_default_ttl_ms,
                };
                let side = if *offset >= 0 { "ahead" } else { "behind" };
                let stored = event.num("expires_at_ms");
                let detail = if want <= tracked {
                    Some(format!(
                        "approval {id} tracked though its stamp {stamp:?} had passed on the bridge's clock ({tracked}); gateway clock {offset} ms {side}"
                    ))
                } else if stored != want {
                    Some(format!(
                        "approval {id} stored expiry {stored}, but the gateway's stamp {stamp:?} gives {want} (gateway clock {offset} ms {side})"
                    ))
                } else {
                    None
                };
                if let Some(detail) = verdicts::judging(detail) {
                    found.push(facts.violation("clock_domains", index, detail));
                }
            }
            _ => {}
        }
    }
    capped(found)
}

/// Each gateway event yields at most one agent-visible event, and none about an approval that
/// was never listable: every approval event a waiter hands the agent has a delivered gateway
/// event of that name and id not yet accounted for, and follows a request of that id whose
/// stamp had not passed on the bridge's clock when the bridge read it (the bridge judges a
/// stamp on its own clock, MODEL.md §3.4; the gateway's host may read up to a tick ahead of it:
/// soak token v1.channel.none.41bea1bc849f708c, a stamp 228 ms past at the gateway's send and
/// 113 ms ahead at the bridge's read).
pub fn one_event_per_gateway_event(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    // Delivered gateway events not yet seen by the agent: (event name, id) → count.
    let mut unseen: BTreeMap<(String, String), u64> = BTreeMap::new();
    // Approval ids once listable: a request the bridge read whose stamp was in its future.
    let mut listable: BTreeMap<String, bool> = BTreeMap::new();
    let mut frames = RequestFrames::default();
    for (index, event) in facts.trace.events.iter().enumerate() {
        if let Some((id, (stamp, _))) = frames.step(event) {
            let now = i64::try_from(event.num("now_ms")).unwrap_or(i64::MAX);
            *listable.entry(id).or_insert(false) |= stamp.is_none_or(|at| at > now);
        }
        match (event.host.as_str(), event.kind.as_str()) {
            (host::GATEWAY, kind::GATEWAY_SEND) if event.get("delivered") == Some(&Value::Bool(true)) => {
                *unseen.entry((event.text("event"), event.text("id"))).or_default() += 1;
            }
            (host::AGENT, kind::MCP_RECV) => {
                let msg = facts.msg(index);
                let text = msg.pointer("/result/content/0/text").and_then(Value::as_str).unwrap_or("");
                let Ok(body) = serde_json::from_str::<Value>(text) else { continue };
                let Some(events) = body.get("events").and_then(Value::as_array) else { continue };
                for item in events {
                    let name = item.get("type").and_then(Value::as_str).unwrap_or("");
                    if !name.contains(".approval.") {
                        continue;
                    }
                    let id = item.get("id").and_then(Value::as_str).unwrap_or("").to_string();
                    let key = (name.to_string(), id.clone());
                    let count = unseen.entry(key).or_default();
                    let detail = if *count == 0 {
                        Some(format!("the agent got {name} {id} more often than the gateway sent it"))
                    } else if !listable.get(&id).copied().unwrap_or(false) {
                        Some(format!("the agent got {name} {id}, an approval that was never listable"))
                    } else {
                        None
                    };
                    *count = count.saturating_sub(1);
                    if let Some(detail) = verdicts::judging(detail) {
                        found.push(facts.violation("one_event_per_gateway_event", index, detail));
                    }
                }
            }
            _ => {}
        }
    }
    capped(found)
}
