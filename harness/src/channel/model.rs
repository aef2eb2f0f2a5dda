//! The reference model of the channel bridge (MODEL.md §3.4), written apart from the bridge's
//! code: it takes the inputs the bridge received, in order and on the bridge's clock — the
//! agent's lines (their content from the agent's own record, their receipt from the bridge's
//! `channel.line` tap), the gateway's frames (`channel.frame`), close, and the moment each
//! waiter ended (`waiter.end`, used only for *when*, never for *what*) — and predicts every
//! line the agent must read back: every reply (each read's lists, each waiter's events), and
//! every decision. [`check`] compares the prediction with what the agent read and names the
//! first difference.
//!
//! The model's state is both pending maps, the event queue and the waiters. An entry whose
//! expiry has passed does not exist for any purpose (reads, replies, repeats, the cap): the
//! sweeper only frees memory, so nothing the agent sees depends on when it ticks.

use std::collections::{BTreeMap, VecDeque};

use bridge_under_test::events::{host, kind};
use serde_json::{json, Value};

use super::checks::Facts;
use super::rpc::Input;
use crate::trace::Violation;

/// The most events one `wait_for_event` returns (MODEL.md §3.3: poll limit ≤ 200).
const POLL_LIMIT_MAX: u64 = 200;
/// The timeout a `wait_for_event` without one asks for.
const DEFAULT_WAIT_MS: i64 = 30_000;
/// The permission id alphabet (MODEL.md §3.2): a–z without `l`.
const ALPHABET: &str = "abcdefghijkmnopqrstuvwxyz";
/// The agent's permission request notification.
const PERMISSION_REQUEST: &str = "notifications/claude/channel/permission_request";

/// MODEL.md §3.3's constants as the run's spec gives them.
#[derive(Debug, Clone)]
pub struct ModelSpec {
    pub permission_ttl_ms: u64,
    pub approval_default_ttl_ms: u64,
    pub pending_cap: u64,
    pub queue_limit: u64,
    pub wait_min_ms: u64,
    pub wait_max_ms: u64,
    pub session: String,
    pub slack_ms: u64,
}

impl ModelSpec {
    pub fn of(facts: &Facts<'_>) -> Self {
        Self {
            permission_ttl_ms: facts.permission_ttl_ms,
            approval_default_ttl_ms: facts.approval_default_ttl_ms,
            pending_cap: facts.pending_cap.max(1),
            queue_limit: facts.queue_limit.max(1),
            wait_min_ms: facts.wait_min_ms,
            wait_max_ms: facts.wait_max_ms,
            session: facts.session.clone(),
            slack_ms: facts.slack_ms,
        }
    }
}

/// What the agent must read back for a request, as the model predicts it.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Any successful result (`initialize`, `ping`, `tools/list`).
    Result,
    /// A tool result whose text is this JSON, `isError` as given.
    Tool { text: Value, is_error: bool },
    /// A JSON-RPC error with this code (and no `result`).
    Error(i64),
}

/// One line the agent must read.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// `id` `Null` means the reply must carry no `id` at all.
    Reply { id: Value, body: Body },
    Decision { request_id: String, behavior: &'static str },
}

impl std::fmt::Display for Expect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expect::Reply { id, body } => write!(f, "reply to {id}: {body:?}"),
            Expect::Decision { request_id, behavior } => {
                write!(f, "decision {behavior} for {request_id}")
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    expires_at_ms: u64,
    seq: u64,
}

#[derive(Debug, Clone)]
struct Waiter {
    id: Value,
    deadline_ms: u64,
    limit: usize,
    /// Since when it has had something to return (events or close).
    ready_since: Option<u64>,
}

/// The model's state.
#[derive(Debug)]
pub struct Model {
    spec: ModelSpec,
    closed: bool,
    permissions: BTreeMap<String, Entry>,
    approvals: BTreeMap<String, Entry>,
    seq: u64,
    queue: VecDeque<Value>,
    /// Outstanding waiters by the JSON text of their request id.
    waiters: BTreeMap<String, Waiter>,
}

/// A permission id in canonical form (MODEL.md §3.2): surrounding blanks dropped, ASCII letters
/// in any case, exactly five of the alphabet.
pub fn canonical_id(raw: &str) -> Option<String> {
    let id: String = raw.trim().chars().map(|c| c.to_ascii_lowercase()).collect();
    (id.chars().count() == 5 && id.chars().all(|c| ALPHABET.contains(c))).then_some(id)
}

/// An operator message read as a reply: exactly two words, `yes`/`no` in any case and an id.
pub fn reply_of(text: &str) -> Option<(&'static str, String)> {
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let [verb, id] = words[..] else { return None };
    let behavior = if verb.eq_ignore_ascii_case("yes") {
        "allow"
    } else if verb.eq_ignore_ascii_case("no") {
        "deny"
    } else {
        return None;
    };
    Some((behavior, canonical_id(id)?))
}

/// A gateway timestamp: an integer, or a finite number truncated; anything else is absent.
fn stamp(value: Option<&Value>) -> Option<i64> {
    let value = value?;
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let f = value.as_f64().filter(|f| f.is_finite())?;
    Some(if f >= i64::MAX as f64 { i64::MAX } else if f <= i64::MIN as f64 { i64::MIN } else { f as i64 })
}

impl Model {
    pub fn new(spec: ModelSpec) -> Self {
        Self {
            spec,
            closed: false,
            permissions: BTreeMap::new(),
            approvals: BTreeMap::new(),
            seq: 0,
            queue: VecDeque::new(),
            waiters: BTreeMap::new(),
        }
    }

    /// Forget every entry whose expiry is reached: from that instant it is gone.
    fn expire(&mut self, now_ms: u64) {
        self.permissions.retain(|_, e| now_ms < e.expires_at_ms);
        self.approvals.retain(|_, e| now_ms < e.expires_at_ms);
    }

    fn map(&mut self, permission: bool) -> &mut BTreeMap<String, Entry> {
        if permission {
            &mut self.permissions
        } else {
            &mut self.approvals
        }
    }

    /// Insert a new entry, evicting the oldest live ones to stay within the cap.
    fn insert(&mut self, permission: bool, id: &str, expires_at_ms: u64) {
        let cap = self.spec.pending_cap as usize;
        self.seq += 1;
        let seq = self.seq;
        let map = self.map(permission);
        while map.len() >= cap {
            let Some(oldest) = map.iter().min_by_key(|(_, e)| e.seq).map(|(id, _)| id.clone())
            else {
                break;
            };
            map.remove(&oldest);
        }
        map.insert(id.to_string(), Entry { expires_at_ms, seq });
    }

    fn push(&mut self, event: Value) {
        if self.queue.len() >= self.spec.queue_limit as usize {
            self.queue.pop_front();
        }
        self.queue.push_back(event);
    }

    /// Mark waiters that now have something to return.
    fn settle(&mut self, now_ms: u64) {
        let ready = !self.queue.is_empty() || self.closed;
        for waiter in self.waiters.values_mut() {
            if !ready {
                waiter.ready_since = None;
            } else if waiter.ready_since.is_none() {
                waiter.ready_since = Some(now_ms);
            }
        }
    }

    /// A waiter that should have answered by `now_ms` and has not: `(id, why)`.
    pub fn overdue(&self, now_ms: u64) -> Option<(String, String)> {
        let slack = self.spec.slack_ms;
        self.waiters.iter().find_map(|(key, w)| {
            if let Some(since) = w.ready_since.filter(|since| now_ms > since + slack) {
                return Some((key.clone(), format!("it has had events or a close to return since {since} ms")));
            }
            (now_ms > w.deadline_ms + slack)
                .then(|| (key.clone(), format!("its deadline {} ms passed", w.deadline_ms)))
        })
    }

    /// Waiters still outstanding.
    pub fn outstanding(&self) -> Vec<String> {
        self.waiters.keys().cloned().collect()
    }

    /// One line the bridge read from the agent: what it is owed follows from the line alone
    /// ([`super::rpc::classify`]), and what a request's reply holds from the model's state.
    pub fn line(&mut self, now_ms: u64, input: Input) -> Vec<Expect> {
        self.expire(now_ms);
        let out = match input {
            Input::Error { id, code } => {
                vec![Expect::Reply { id: id.unwrap_or(Value::Null), body: Body::Error(code) }]
            }
            Input::Request { id, method, params } => self.request(now_ms, id, &method, &params),
            Input::Notification { method, params } if method == PERMISSION_REQUEST => {
                self.permission_request(now_ms, &params);
                Vec::new()
            }
            Input::Notification { .. } | Input::Response => Vec::new(),
        };
        self.settle(now_ms);
        out
    }

    fn request(&mut self, now_ms: u64, id: Value, method: &str, params: &Value) -> Vec<Expect> {
        let body = match method {
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or("");
                let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
                if name == "wait_for_event" {
                    self.start_waiter(now_ms, id, &arguments);
                    return Vec::new();
                }
                // `classify` let through only the two tools.
                Body::Tool { text: self.read(), is_error: false }
            }
            _ => Body::Result,
        };
        vec![Expect::Reply { id, body }]
    }

    /// Both lists, live entries only, each in id order.
    fn read(&self) -> Value {
        let ids = |map: &BTreeMap<String, Entry>| map.keys().cloned().collect::<Vec<_>>();
        json!({"permissions": ids(&self.permissions), "approvals": ids(&self.approvals)})
    }

    fn start_waiter(&mut self, now_ms: u64, id: Value, arguments: &Value) {
        let requested = arguments.get("timeout_ms").and_then(Value::as_i64).unwrap_or(DEFAULT_WAIT_MS);
        let timeout = u64::try_from(requested.max(0))
            .unwrap_or(0)
            .max(self.spec.wait_min_ms)
            .min(self.spec.wait_max_ms);
        let limit = arguments
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(POLL_LIMIT_MAX)
            .clamp(1, POLL_LIMIT_MAX);
        let waiter = Waiter { id: id.clone(), deadline_ms: now_ms + timeout, limit: limit as usize, ready_since: None };
        self.waiters.insert(id.to_string(), waiter);
    }

    fn permission_request(&mut self, now_ms: u64, params: &Value) {
        if self.closed {
            return;
        }
        let raw = params.get("request_id").and_then(Value::as_str).unwrap_or("");
        let Some(id) = canonical_id(raw) else { return };
        if !self.permissions.contains_key(&id) {
            let expires = now_ms + self.spec.permission_ttl_ms;
            self.insert(true, &id, expires);
        }
        let tool = params.get("tool_name").cloned().unwrap_or(Value::Null);
        self.push(json!({"type": "permission_request", "request_id": id, "tool_name": tool}));
    }

    /// One gateway frame the bridge read.
    pub fn frame(&mut self, now_ms: u64, text: &str) -> Vec<Expect> {
        self.expire(now_ms);
        let frame: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let event = frame.get("event").and_then(Value::as_str).unwrap_or("").to_string();
        let payload = frame.get("payload").cloned().unwrap_or(Value::Null);
        let id = payload.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
        let mut out = Vec::new();
        if event.ends_with(".approval.requested") {
            if let Some(id) = id.filter(|_| !self.closed) {
                self.approval_requested(now_ms, &event, id, &payload);
            }
        } else if event.ends_with(".approval.resolved") {
            if let Some(id) = id.filter(|_| !self.closed) {
                if self.approvals.remove(id).is_some() {
                    self.push(json!({"type": event, "id": id}));
                }
            }
        } else if event == "session.message" {
            out = self.message(&payload);
        }
        self.settle(now_ms);
        out
    }

    fn approval_requested(&mut self, now_ms: u64, event: &str, id: &str, payload: &Value) {
        if self.approvals.contains_key(id) {
            return;
        }
        let cap = now_ms + self.spec.permission_ttl_ms;
        let expires = match stamp(payload.get("expiresAtMs")) {
            Some(at) => u64::try_from(at).unwrap_or(0).min(cap),
            None => now_ms + self.spec.approval_default_ttl_ms,
        };
        if expires <= now_ms {
            // Expired on arrival: never listable, so nothing about it reaches the agent.
            return;
        }
        self.insert(false, id, expires);
        self.push(json!({"type": event, "id": id}));
    }

    fn message(&mut self, payload: &Value) -> Vec<Expect> {
        let session = payload.get("sessionKey").and_then(Value::as_str).unwrap_or("");
        if session != self.spec.session || self.closed {
            return Vec::new();
        }
        let text = payload.get("message").and_then(Value::as_str).unwrap_or("");
        let owner = payload.get("senderIsOwner").and_then(Value::as_bool).unwrap_or(false);
        match reply_of(text).filter(|_| owner) {
            Some((behavior, id)) => match self.permissions.remove(&id) {
                Some(_) => vec![Expect::Decision { request_id: id, behavior }],
                None => Vec::new(),
            },
            None => {
                self.push(json!({"type": "message", "text": text, "owner": owner}));
                Vec::new()
            }
        }
    }

    /// `close()`: everything cleared; every waiter now has its answer.
    pub fn close(&mut self, now_ms: u64) {
        self.closed = true;
        self.permissions.clear();
        self.approvals.clear();
        self.queue.clear();
        self.settle(now_ms);
    }

    /// Waiter `key` ended at `now_ms` with `outcome` (the bridge's word for which of the
    /// allowed endings it took when several were): its reply, or why it may not end so.
    pub fn take(&mut self, now_ms: u64, key: &str, outcome: &str) -> Result<Expect, String> {
        self.expire(now_ms);
        let Some(waiter) = self.waiters.remove(key) else {
            return Err(format!("waiter {key} ended, but no wait_for_event {key} is outstanding"));
        };
        let timed_out = now_ms >= waiter.deadline_ms;
        let allowed = match outcome {
            "events" => !self.queue.is_empty(),
            "closed" => self.queue.is_empty() && self.closed,
            "timeout" => timed_out,
            _ => false,
        };
        if !allowed {
            let queued = self.queue.len();
            return Err(format!(
                "waiter {key} ended with `{outcome}` at {now_ms} ms, but the model has {queued} queued events, closed {}, deadline {} ms",
                self.closed, waiter.deadline_ms
            ));
        }
        let events: Vec<Value> = if outcome == "events" {
            let count = waiter.limit.min(self.queue.len());
            self.queue.drain(..count).collect()
        } else {
            Vec::new()
        };
        self.settle(now_ms);
        let text = json!({"outcome": outcome, "events": events});
        Ok(Expect::Reply { id: waiter.id, body: Body::Tool { text, is_error: false } })
    }
}

/// Whether `msg` (a line the agent read) is what `expect` says.
pub fn matches(expect: &Expect, msg: &Value) -> bool {
    match expect {
        Expect::Decision { request_id, behavior } => {
            msg.get("method").and_then(Value::as_str) == Some("notifications/claude/channel/permission")
                && msg.pointer("/params/request_id").and_then(Value::as_str) == Some(request_id)
                && msg.pointer("/params/behavior").and_then(Value::as_str) == Some(behavior)
        }
        Expect::Reply { id, body } => {
            let id_ok = match msg.get("id") {
                None => id.is_null(),
                Some(got) => !id.is_null() && got == id,
            };
            if msg.get("method").is_some() || !id_ok {
                return false;
            }
            let result = msg.get("result");
            let is_error = result
                .and_then(|r| r.get("isError"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let text = result
                .and_then(|r| r.pointer("/content/0/text"))
                .and_then(Value::as_str)
                .and_then(|t| serde_json::from_str::<Value>(t).ok());
            match body {
                Body::Result => result.is_some(),
                Body::Tool { text: want, is_error: flag } => {
                    result.is_some() && is_error == *flag && text.as_ref() == Some(want)
                }
                Body::Error(code) => {
                    result.is_none() && msg.pointer("/error/code").and_then(Value::as_i64) == Some(*code)
                }
            }
        }
    }
}

/// The model's verdict on a trace: the first difference between what the model predicts the
/// agent reads and what it read, or the first input the model cannot accept.
pub fn model_agrees(facts: &Facts<'_>) -> Vec<Violation> {
    let base = facts.clock_base_ms;
    let trace = facts.trace;
    let mut model = Model::new(ModelSpec::of(facts));
    let sent: Vec<&Input> = (0..trace.events.len()).filter_map(|i| facts.input(i)).collect();
    let mut received = trace
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.host == host::AGENT && e.kind == kind::MCP_RECV)
        .map(|(i, _)| (i, facts.msg(i)));
    let mut lines = 0usize;
    let mut expected: VecDeque<(usize, Expect)> = VecDeque::new();
    let fail = |index: usize, detail: String| vec![facts.violation("model_agrees", index, detail)];
    for (index, event) in trace.events.iter().enumerate() {
        let now_ms = base + event.at_ms;
        if let Some((key, why)) = model.overdue(now_ms) {
            return fail(index, format!("wait_for_event {key} is still waiting at {} ms: {why}", event.at_ms));
        }
        let out = match (event.host.as_str(), event.kind.as_str()) {
            (host::BRIDGE, kind::CHANNEL_LINE) => {
                let Some(line) = sent.get(lines) else {
                    return fail(index, format!("the bridge read line {} the agent never sent", lines + 1));
                };
                lines += 1;
                model.line(event.num("now_ms"), (*line).clone())
            }
            (host::BRIDGE, kind::CHANNEL_FRAME) => model.frame(event.num("now_ms"), &event.text("text")),
            (host::BRIDGE, kind::CHANNEL_CLOSE) => {
                model.close(now_ms);
                Vec::new()
            }
            (host::BRIDGE, kind::WAITER_END) => {
                match model.take(now_ms, &event.text("id"), &event.text("outcome")) {
                    Ok(expect) => vec![expect],
                    Err(detail) => return fail(index, detail),
                }
            }
            (host::AGENT, kind::MCP_RECV) => {
                let (at, msg) = received.next().unwrap_or((index, &Value::Null));
                let Some((cause, expect)) = expected.pop_front() else {
                    return fail(at, format!("the agent read {msg}, which the model does not predict"));
                };
                if !matches(&expect, msg) {
                    let cause_at = trace.events[cause].at_ms;
                    return fail(at, format!("the model predicts {expect} (from the input at {cause_at} ms), the agent read {msg}"));
                }
                crate::verdicts::held();
                Vec::new()
            }
            _ => Vec::new(),
        };
        expected.extend(out.into_iter().map(|e| (index, e)));
    }
    let last = trace.events.len().saturating_sub(1);
    if let Some((cause, expect)) = expected.pop_front() {
        let cause_at = trace.events[cause].at_ms;
        return fail(last, format!("the model predicts {expect} (from the input at {cause_at} ms); the agent never read it"));
    }
    if let Some(key) = model.outstanding().first() {
        return fail(last, format!("wait_for_event {key} never ended"));
    }
    if lines != sent.len() {
        return fail(last, format!("the agent sent {} lines, the bridge read {lines}", sent.len()));
    }
    Vec::new()
}
