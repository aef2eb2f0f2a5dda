//! The channel family's checkers: pure functions over a recorded trace. Each opens with the
//! property it checks. They read the spec from the trace's `run.spec` event, and compute every
//! expiry themselves from the data the bridge captured at tracking time.

use std::collections::BTreeMap;

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use crate::check::capped;
use crate::schema::McpSchema;
use super::rpc::{classify_value, Input};
use crate::trace::{Trace, TraceEvent, Violation};
use crate::verdicts;

/// The method of the bridge's decision notification.
const PERMISSION: &str = "notifications/claude/channel/permission";

/// The checkers, by name: `(name, function)`.
pub const CHECKERS: &[(&str, Checker)] = &[
    ("pending_leaves_by_expiry", pending_leaves_by_expiry),
    ("expiry_anchored", expiry_anchored),
    ("bounded_sizes", bounded_sizes),
    ("close_clears", close_clears),
    ("no_idle_sweeper", no_idle_sweeper),
    ("reads_filter_expired", reads_filter_expired),
    ("one_owner_decision", one_owner_decision),
    ("bounded_waits", bounded_waits),
    ("schema_valid", schema_valid),
    ("model_agrees", super::model::model_agrees),
    ("decision_answers_reply", decision_answers_reply),
    ("every_waiter_answered", every_waiter_answered),
    ("nothing_after_close", nothing_after_close),
    ("clock_domains", clock_domains),
    ("one_event_per_gateway_event", one_event_per_gateway_event),
    ("replies_follow_jsonrpc", replies_follow_jsonrpc),
];

pub type Checker = fn(&Facts<'_>) -> Vec<Violation>;

/// Run every checker.
pub fn check(trace: &Trace, schema: &McpSchema) -> Vec<Violation> {
    crate::verdicts::run(CHECKERS, &Facts::new(trace, schema))
}

/// One tracked entry (a first `pending.add`), with the oracle's expiry and how it left.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub index: usize,
    pub map: String,
    pub id: String,
    pub tracked_at_ms: u64,
    /// The expiry MODEL.md §3.4 gives, computed from the data captured at tracking.
    pub expiry_ms: u64,
    /// The expiry the bridge stored.
    pub stamp_ms: u64,
    /// `(event index, bridge clock)` of its removal (a `pending.remove` or a clearing close).
    pub removed: Option<(usize, u64)>,
}

/// Facts derived once from a trace and shared by the checkers.
pub struct Facts<'a> {
    pub trace: &'a Trace,
    pub schema: &'a McpSchema,
    pub permission_ttl_ms: u64,
    pub approval_default_ttl_ms: u64,
    pub sweep_interval_ms: u64,
    pub wait_min_ms: u64,
    pub wait_max_ms: u64,
    pub pending_cap: u64,
    pub queue_limit: u64,
    pub slack_ms: u64,
    pub clock_base_ms: u64,
    pub session: String,
    pub tracked: Vec<Tracked>,
    /// Indices into `tracked` by `(map, id)`, in tracking order: reads name many ids, and a
    /// scan of every tracked entry per id made this checker quadratic.
    by_key: BTreeMap<(String, String), Vec<usize>>,
    /// The bridge clock when the trace ends (or the bridge exited).
    pub end_ms: u64,
    /// Each agent line, parsed once (by event index; `None` for other events): most checkers
    /// read the agent's lines, and parsing them again per checker was a third of their cost.
    lines: Vec<Option<AgentLine>>,
}

/// One line crossing the agent's stdio, parsed.
struct AgentLine {
    /// The JSON message (`None` when the line is not JSON).
    msg: Option<Value>,
    /// For a line the agent wrote, what it is owed ([`classify`]).
    input: Option<Input>,
}

/// What [`Facts::msg`] gives for an event that is not an agent line.
static NO_MESSAGE: Value = Value::Null;

impl<'a> Facts<'a> {
    pub fn new(trace: &'a Trace, schema: &'a McpSchema) -> Self {
        let spec = trace.first(kind::RUN_SPEC);
        let num = |name: &str| spec.map_or(0, |e| e.num(name));
        let clock_base_ms = num("clock_base_ms");
        let exit = trace.first(kind::CHANNEL_EXIT).or(trace.events.last());
        let mut facts = Facts {
            trace,
            schema,
            permission_ttl_ms: num("permission_ttl_ms"),
            approval_default_ttl_ms: num("approval_default_ttl_ms"),
            sweep_interval_ms: num("sweep_interval_ms"),
            wait_min_ms: num("wait_min_ms"),
            wait_max_ms: num("wait_max_ms"),
            pending_cap: num("pending_cap"),
            queue_limit: num("queue_limit"),
            slack_ms: num("slack_ms"),
            clock_base_ms,
            session: spec.map(|e| e.text("session")).unwrap_or_default(),
            tracked: Vec::new(),
            by_key: BTreeMap::new(),
            end_ms: clock_base_ms + exit.map_or(0, |e| e.at_ms),
            lines: trace.events.iter().map(AgentLine::of).collect(),
        };
        facts.track_entries();
        facts
    }

    /// The oracle's expiry of an entry tracked at `tracked_at_ms` (MODEL.md §3.4).
    pub fn expiry(&self, map: &str, tracked_at_ms: u64, raw_expires_at: Option<i64>) -> u64 {
        let cap = tracked_at_ms + self.permission_ttl_ms;
        match (map, raw_expires_at) {
            ("permission", _) => cap,
            (_, Some(at)) => u64::try_from(at).unwrap_or(0).min(cap),
            (_, None) => tracked_at_ms + self.approval_default_ttl_ms,
        }
    }

    /// Follow every entry from its first `pending.add` to its removal.
    fn track_entries(&mut self) {
        let mut live: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (index, event) in self.bridge_events() {
            let key = (event.text("map"), event.text("id"));
            match event.kind.as_str() {
                kind::PENDING_ADD if !live.contains_key(&key) => {
                    let tracked_at_ms = event.num("now_ms");
                    let raw = int(event, "raw_expires_at_ms");
                    live.insert(key.clone(), self.tracked.len());
                    self.by_key.entry(key.clone()).or_default().push(self.tracked.len());
                    self.tracked.push(Tracked {
                        index,
                        expiry_ms: self.expiry(&key.0, tracked_at_ms, raw),
                        map: key.0,
                        id: key.1,
                        tracked_at_ms,
                        stamp_ms: event.num("expires_at_ms"),
                        removed: None,
                    });
                }
                kind::PENDING_REMOVE => {
                    if let Some(entry) = live.remove(&key) {
                        self.tracked[entry].removed = Some((index, event.num("now_ms")));
                    }
                }
                kind::CHANNEL_CLOSE if event.num("permissions") + event.num("approvals") == 0 => {
                    let now_ms = self.clock_base_ms + event.at_ms;
                    for (_, entry) in std::mem::take(&mut live) {
                        self.tracked[entry].removed = Some((index, now_ms));
                    }
                }
                _ => {}
            }
        }
    }

    /// The entry of `(map, id)` live at event `index`, if any.
    fn live_at(&self, map: &str, id: &str, index: usize) -> Option<&Tracked> {
        let key = (map.to_string(), id.to_string());
        let entries = self.by_key.get(&key)?;
        entries.iter().rev().map(|&entry| &self.tracked[entry]).find(|t| {
            t.index < index && t.removed.is_none_or(|(at, _)| at > index)
        })
    }

    pub(crate) fn violation(&self, invariant: &str, index: usize, detail: String) -> Violation {
        self.trace.violation(invariant, index, detail)
    }

    fn bridge_events(&self) -> impl Iterator<Item = (usize, &'a TraceEvent)> {
        self.trace
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.host == host::BRIDGE)
    }

    fn agent_events(&self) -> impl Iterator<Item = (usize, &'a TraceEvent)> {
        self.trace
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.host == host::AGENT)
    }

    /// The JSON message of the agent line at event `index` (`Null` when it is not JSON or not
    /// an agent line).
    pub(crate) fn msg(&self, index: usize) -> &Value {
        self.json(index).unwrap_or(&NO_MESSAGE)
    }

    /// The JSON message of the agent line at event `index`; `None` when it is not JSON.
    pub(crate) fn json(&self, index: usize) -> Option<&Value> {
        self.line(index)?.msg.as_ref()
    }

    /// What the line the agent wrote at event `index` is owed; `None` for any other event.
    pub(crate) fn input(&self, index: usize) -> Option<&Input> {
        self.line(index)?.input.as_ref()
    }

    fn line(&self, index: usize) -> Option<&AgentLine> {
        self.lines.get(index)?.as_ref()
    }
}

impl AgentLine {
    /// The parsed line an agent event carries, if it is one.
    fn of(event: &TraceEvent) -> Option<Self> {
        let sent = match (event.host.as_str(), event.kind.as_str()) {
            (host::AGENT, kind::MCP_SEND) => true,
            (host::AGENT, kind::MCP_RECV) => false,
            _ => return None,
        };
        let parsed = match event.get("msg") {
            Some(Value::String(text)) => serde_json::from_str::<Value>(text).ok(),
            Some(other) => Some(other.clone()),
            None => None,
        };
        let input = sent.then(|| match &parsed {
            Some(msg) => classify_value(msg.clone()),
            None => Input::Error { id: None, code: -32700 },
        });
        Some(Self { msg: parsed, input })
    }
}

/// An integer field that may be empty (absent) or a string holding a number.
fn int(event: &TraceEvent, name: &str) -> Option<i64> {
    match event.get(name)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Every pending entry leaves within its expiry (or its tracking, if it arrived expired) plus
/// one sweep interval; an entry still pending when the run ends past that is a leak.
pub fn pending_leaves_by_expiry(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for entry in &facts.tracked {
        let due =
            entry.expiry_ms.max(entry.tracked_at_ms) + facts.sweep_interval_ms + facts.slack_ms;
        let (index, at_ms, state) = match entry.removed {
            Some((index, at_ms)) => (index, at_ms, "left"),
            None => (entry.index, facts.end_ms, "was still pending"),
        };
        if at_ms > due {
            let late = at_ms - entry.expiry_ms.max(entry.tracked_at_ms);
            let detail = format!(
                "{} {} {state} {late} ms after its expiry; the bound is one sweep interval ({} ms)",
                entry.map, entry.id, facts.sweep_interval_ms
            );
            found.push(facts.violation("pending_leaves_by_expiry", index, detail));
        } else {
            verdicts::held();
        }
    }
    capped(found)
}

/// An entry's expiry is fixed when it is tracked, from the data it arrived with: the stored
/// stamp equals MODEL.md's expiry and never moves afterwards.
pub fn expiry_anchored(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for entry in &facts.tracked {
        if entry.stamp_ms == entry.expiry_ms {
            verdicts::held();
            continue;
        }
        let detail = format!(
            "{} {} stored expiry {} but the data at tracking gives {}",
            entry.map, entry.id, entry.stamp_ms, entry.expiry_ms
        );
        found.push(facts.violation("expiry_anchored", entry.index, detail));
    }
    for (index, event) in facts.bridge_events() {
        let moved = match event.kind.as_str() {
            kind::PENDING_EXPIRY => true,
            kind::PENDING_ADD => event.get("repeat") == Some(&Value::Bool(true)),
            _ => false,
        };
        let Some(entry) = facts
            .live_at(&event.text("map"), &event.text("id"), index)
            .filter(|_| moved)
        else {
            continue;
        };
        if event.num("expires_at_ms") != entry.stamp_ms {
            let detail = format!(
                "{} {} expiry moved from {} to {} ({})",
                entry.map,
                entry.id,
                entry.stamp_ms,
                event.num("expires_at_ms"),
                event.kind
            );
            found.push(facts.violation("expiry_anchored", index, detail));
        } else {
            verdicts::held();
        }
    }
    capped(found)
}

/// Map sizes never exceed the per-map cap, and the event queue never exceeds its limit.
pub fn bounded_sizes(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (index, event) in facts.bridge_events() {
        let over = match event.kind.as_str() {
            kind::PENDING_ADD => ["permissions", "approvals"]
                .into_iter()
                .find(|map| event.num(map) > facts.pending_cap)
                .map(|map| format!("{map} map holds {} entries; the cap is {}", event.num(map), facts.pending_cap)),
            kind::QUEUE_PUSH => (event.num("size") > facts.queue_limit)
                .then(|| format!("event queue holds {}; the limit is {}", event.num("size"), facts.queue_limit)),
            _ => continue,
        };
        if let Some(detail) = verdicts::judging(over) {
            found.push(facts.violation("bounded_sizes", index, detail));
        }
    }
    capped(found)
}

/// After close: both maps and the queue are empty, no sweeper timer is alive, and nothing is
/// inserted or started later.
pub fn close_clears(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut closed = false;
    for (index, event) in facts.bridge_events() {
        let detail = match event.kind.as_str() {
            kind::CHANNEL_CLOSE => {
                closed = true;
                let left = ["permissions", "approvals", "queue"].map(|name| event.num(name));
                let timer = event.get("timer") == Some(&Value::Bool(true));
                verdicts::judging((left != [0, 0, 0] || timer).then(|| {
                    format!(
                        "after close: permissions {}, approvals {}, queue {}, timer alive {timer}",
                        left[0], left[1], left[2]
                    )
                }))
            }
            kind::PENDING_ADD if closed => Some(format!(
                "{} {} inserted after close",
                event.text("map"),
                event.text("id")
            )),
            kind::SWEEPER_START if closed => Some("the sweeper started after close".to_string()),
            kind::QUEUE_PUSH if closed => Some(format!(
                "a {} event queued after close",
                event.text("event")
            )),
            _ => None,
        };
        if let Some(detail) = detail {
            found.push(facts.violation("close_clears", index, detail));
        }
    }
    capped(found)
}

/// No sweeper timer exists while both maps are empty, beyond the one tick that notices it.
pub fn no_idle_sweeper(facts: &Facts<'_>) -> Vec<Violation> {
    let bound = facts.sweep_interval_ms + facts.slack_ms;
    let (mut alive, mut sizes, mut idle_since) = (false, 0u64, None::<u64>);
    let mut found = Vec::new();
    let mut report = |index: usize, at_ms: u64, idle_since: &mut Option<u64>| {
        if let Some(since) = idle_since.filter(|since| at_ms > since + bound) {
            let detail = format!(
                "the sweep timer has been alive with both maps empty for {} ms (since {since} ms)",
                at_ms - since
            );
            found.push(facts.violation("no_idle_sweeper", index, detail));
            *idle_since = None;
        }
    };
    for (index, event) in facts.bridge_events() {
        report(index, event.at_ms, &mut idle_since);
        match event.kind.as_str() {
            kind::SWEEPER_START => alive = true,
            kind::SWEEPER_STOP => alive = false,
            kind::CHANNEL_EXIT => break,
            kind::PENDING_ADD | kind::PENDING_REMOVE | kind::SWEEPER_TICK | kind::CHANNEL_CLOSE => {
                sizes = event.num("permissions") + event.num("approvals");
            }
            _ => continue,
        }
        let idle = alive && sizes == 0;
        if !idle {
            if idle_since.take().is_some() {
                verdicts::held();
            }
        } else if idle_since.is_none() {
            idle_since = Some(event.at_ms);
        }
    }
    let end = facts
        .trace
        .first(kind::CHANNEL_EXIT)
        .or(facts.trace.events.last());
    if let Some(end) = end {
        report(
            facts.trace.events.len().saturating_sub(1),
            end.at_ms,
            &mut idle_since,
        );
    }
    capped(found)
}

/// Reads never return an entry whose expiry has passed, even between sweeps.
pub fn reads_filter_expired(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::READ_RESULT) {
        let (map, now_ms) = (event.text("map"), event.num("now_ms"));
        for id in event.text("ids").split(',').filter(|id| !id.is_empty()) {
            let Some(entry) = facts.live_at(&map, id, index) else {
                continue;
            };
            if now_ms >= entry.expiry_ms {
                let detail = format!(
                    "a read returned {map} {id}, expired {} ms earlier",
                    now_ms - entry.expiry_ms
                );
                found.push(facts.violation("reads_filter_expired", index, detail));
            } else {
                verdicts::held();
            }
        }
    }
    capped(found)
}

/// The owner's reply as the grammar reads it: `Some((behavior, id))` for a whole-message
/// `yes <id>` / `no <id>` in any case (an independent reading of MODEL.md §3.2).
fn owner_reply(text: &str) -> Option<(&'static str, String)> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [verb, id] = words[..] else { return None };
    let behavior = match verb.to_lowercase().as_str() {
        "yes" => "allow",
        "no" => "deny",
        _ => return None,
    };
    Some((behavior, id.to_lowercase()))
}

/// At most one decision reaches the agent per permission request, each for a request the
/// agent made and answering an owner's reply in the bridge's session.
pub fn one_owner_decision(facts: &Facts<'_>) -> Vec<Violation> {
    let mut requested: BTreeMap<String, usize> = BTreeMap::new();
    let mut owner_said: Vec<(String, String)> = Vec::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        if event.kind == kind::GATEWAY_SAY {
            let owned = event.get("owner") == Some(&Value::Bool(true))
                && event.text("session") == facts.session;
            if let Some((behavior, id)) = owner_reply(&event.text("text")).filter(|_| owned) {
                owner_said.push((behavior.to_string(), id));
            }
            continue;
        }
        if event.host != host::AGENT {
            continue;
        }
        // Ids in any form a peer sends, normalised as MODEL.md §3.2 says (the model's reading).
        let canonical = |raw: &str| super::model::canonical_id(raw).unwrap_or_else(|| raw.to_lowercase());
        if event.kind == kind::MCP_SEND {
            if let Some(raw) = permission_request_id(facts.input(index)) {
                requested.insert(canonical(&raw), 0);
            }
            continue;
        }
        let msg = facts.msg(index);
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let id = canonical(params.get("request_id").and_then(Value::as_str).unwrap_or(""));
        if event.kind == kind::MCP_RECV
            && msg.get("method").and_then(Value::as_str) == Some(PERMISSION)
        {
            let behavior = params.get("behavior").and_then(Value::as_str).unwrap_or("");
            let detail = match requested.get_mut(&id) {
                None => Some(format!(
                    "a decision for {id}, which the agent never requested"
                )),
                Some(count) if *count > 0 => {
                    Some(format!("a second decision ({behavior}) for {id}"))
                }
                Some(count) => {
                    *count += 1;
                    let said = owner_said.iter().any(|(b, i)| b == behavior && *i == id);
                    verdicts::judging((!said).then(|| {
                        format!(
                            "{behavior} for {id} without the owner's reply in session {}",
                            facts.session
                        )
                    }))
                }
            };
            if let Some(detail) = detail {
                found.push(facts.violation("one_owner_decision", index, detail));
            }
        }
    }
    capped(found)
}

#[path = "checks_agent.rs"]
mod checks_agent;
pub use checks_agent::{bounded_waits, schema_valid};

#[path = "checks_oracles.rs"]
mod checks_oracles;
pub use checks_oracles::{
    clock_domains, decision_answers_reply, every_waiter_answered, nothing_after_close,
    one_event_per_gateway_event,
};

#[path = "checks_rpc.rs"]
mod checks_rpc;
pub use checks_rpc::replies_follow_jsonrpc;

/// Whether an agent line is a well-formed permission request notification; its raw id.
fn permission_request_id(input: Option<&Input>) -> Option<String> {
    match input? {
        Input::Notification { method, params } if method.ends_with("permission_request") => {
            Some(params.get("request_id").and_then(Value::as_str).unwrap_or("").to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
