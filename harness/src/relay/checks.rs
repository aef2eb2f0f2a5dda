//! The relay family's checkers: pure functions over a recorded trace. Each opens with the
//! property it checks. They read the spec from the trace's `run.spec` event, so a saved trace can
//! be checked offline.

use std::collections::{BTreeMap, BTreeSet};

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use crate::check::{capped, message};
use crate::schema::McpSchema;
use crate::trace::{Trace, TraceEvent, Violation};
use crate::verdicts;

use super::{admission_checks, handshake_checks, outcome_checks};
use super::{order_checks, retry_checks};
use super::story::Stories;
use super::stream_checks;
use super::traffic_checks;
use super::wire;

/// The checkers, by name: `(name, function)`.
pub const CHECKERS: &[(&str, Checker)] = &[
    ("one_reply_per_id", one_reply_per_id),
    ("reply_answers_outstanding", reply_answers_outstanding),
    ("bounded_latency", bounded_latency),
    ("close_out_window", close_out_window),
    ("at_most_once_execution", at_most_once_execution),
    ("truthful_errors", truthful_errors),
    ("no_stale_post", no_stale_post),
    ("schema_valid", schema_valid),
    ("single_flight_reconnect", stream_checks::single_flight_reconnect),
    ("reconnect_backoff", stream_checks::reconnect_backoff),
    ("orphans_reconnect", stream_checks::orphans_reconnect),
    ("replay_in_order", stream_checks::replay_in_order),
    ("clean_shutdown", stream_checks::clean_shutdown),
    ("fails_owed_at_eof", stream_checks::fails_owed_at_eof),
    ("healthy_streams_kept", stream_checks::healthy_streams_kept),
    ("silent_streams_abandoned", stream_checks::silent_streams_abandoned),
    ("user_outcomes", outcome_checks::user_outcomes),
    ("reply_accounting", outcome_checks::reply_accounting),
    ("truthful_endings", outcome_checks::truthful_endings),
    ("prompt_rejection", outcome_checks::prompt_rejection),
    ("no_work_after_ending", outcome_checks::no_work_after_ending),
    ("notifications_delivered", outcome_checks::notifications_delivered),
    ("notifications_keep_meta", outcome_checks::notifications_keep_meta),
    ("cancellations_name_their_request", outcome_checks::cancellations_name_their_request),
    ("sessions_initialized", handshake_checks::sessions_initialized),
    ("handshake_carried", handshake_checks::handshake_carried),
    ("reconnect_discipline", outcome_checks::reconnect_discipline),
    ("quiescence", outcome_checks::quiescence),
    ("wire_conformance", wire::wire_conformance),
    ("post_retries", retry_checks::post_retries),
    ("refused_requests_resent", retry_checks::refused_requests_resent),
    ("client_order_kept", order_checks::client_order_kept),
    ("requests_posted_promptly", order_checks::requests_posted_promptly),
    ("requests_admissible", admission_checks::requests_admissible),
    ("server_messages_delivered", traffic_checks::server_messages_delivered),
];

pub type Checker = fn(&Facts<'_>) -> Vec<Violation>;

/// Run every checker.
pub fn check(trace: &Trace, schema: &McpSchema) -> Vec<Violation> {
    crate::verdicts::run(CHECKERS, &Facts::new(trace, schema))
}

/// One client request as seen at the stdio boundary, and how it ended.
#[derive(Debug, Clone)]
pub struct Request {
    pub index: usize,
    pub at_ms: u64,
    /// Canonical id; `None` for a line whose error reply carries no id.
    pub id: Option<String>,
    /// Empty for a line that is not a valid request (answered with `local`).
    pub method: String,
    pub answered: Option<Answer>,
    /// The JSON-RPC error the line calls for, predicted from the line alone (`wire::predict`).
    pub local: Option<i64>,
    /// Sent while an earlier request of its id was still owed: JSON-RPC forbids reusing an id
    /// in flight, so it calls for an invalid-request error (`wire_conformance` judges it).
    pub dup: bool,
}

impl Request {
    /// A request the relayer is to answer: a valid, non-duplicate request other than
    /// `initialize` (which the bridge answers itself).
    pub fn judged(&self) -> bool {
        self.id.is_some() && !self.method.is_empty() && self.method != "initialize" && !self.dup
    }
}

#[derive(Debug, Clone)]
pub struct Answer {
    pub index: usize,
    pub at_ms: u64,
    pub msg: Value,
}

/// Facts derived once from a trace and shared by the checkers.
pub struct Facts<'a> {
    pub trace: &'a Trace,
    pub schema: &'a McpSchema,
    pub call_timeout_ms: u64,
    pub sweep_period_ms: u64,
    pub slack_ms: u64,
    pub horizon_ms: u64,
    pub sse_idle_ms: u64,
    pub requests: Vec<Request>,
    /// What the relayer did for each request, parallel to `requests`, and its streams.
    pub stories: Stories,
    /// Replies that matched no outstanding request: `(event index, id, ever requested)`.
    pub unmatched: Vec<(usize, String, bool)>,
    /// The request each client cancellation named, by the cancellation's event index: the
    /// oldest request of its id still owed and not cancelled already (`match_replies`).
    pub cancelled: BTreeMap<usize, usize>,
    /// Whether the bridge posts in the client's order, one message at a time (MODEL.md §1.4's
    /// pump): the relay family's own bridge, or a bridge whose profile promises
    /// `client_order_kept`. Only then does a refusal of a request written before another hold
    /// that one back.
    pub serial_pump: bool,
}

impl<'a> Facts<'a> {
    pub fn new(trace: &'a Trace, schema: &'a McpSchema) -> Self {
        let spec = trace.first(kind::RUN_SPEC);
        let num = |name: &str| spec.map_or(0, |e| e.num(name));
        let mut facts = Facts {
            trace,
            schema,
            call_timeout_ms: num("call_timeout_ms"),
            sweep_period_ms: num("sweep_period_ms"),
            slack_ms: num("slack_ms"),
            horizon_ms: num("horizon_ms"),
            sse_idle_ms: num("sse_idle_ms"),
            requests: Vec::new(),
            stories: Stories::default(),
            unmatched: Vec::new(),
            cancelled: BTreeMap::new(),
            serial_pump: {
                let own = spec.is_some_and(|e| e.text("family") == "relay") && !super::oracles::is_live(trace);
                own || super::oracles::promised(trace, "client_order_kept")
            },
        };
        facts.match_replies();
        facts.stories = Stories::new(&facts);
        if facts.uncross_answers() {
            facts.stories = Stories::new(&facts);
        }
        facts
    }

    /// Requests of one id outstanding together at the client (an id reused as its answer
    /// arrives, then again while the bridge still works on it) are told apart by what answered
    /// them, not by their order: the client's order alone cannot say which of them the bridge
    /// read as the duplicate. Where request `n` read the relayer's reply to request `m` of the
    /// same id, and `m` did not, the two swap answers and, with them, which was the duplicate.
    /// Whether any answers were swapped (the stories are then drawn again).
    fn uncross_answers(&mut self) -> bool {
        let mut swapped = false;
        for n in 0..self.requests.len() {
            let Some(answer) = self.requests[n].answered.clone() else { continue };
            if Self::relayer_sent(&self.stories.of[n], &answer.msg).is_some() {
                continue;
            }
            let id = &self.requests[n].id;
            // Outstanding together: the later of the two was written before the earlier one's
            // answer was read.
            let together = |m: usize| {
                let (first, second) = (&self.requests[n.min(m)], &self.requests[n.max(m)]);
                first.answered.as_ref().is_none_or(|a| second.index < a.index)
            };
            let other = (0..self.requests.len()).find(|&m| {
                let request = &self.requests[m];
                m != n
                    && request.id == *id
                    && together(m)
                    && Self::relayer_sent(&self.stories.of[m], &answer.msg).is_some()
                    && request.answered.as_ref().is_none_or(|own| Self::relayer_sent(&self.stories.of[m], &own.msg).is_none())
            });
            if let Some(m) = other {
                let (first, second) = (n.min(m), n.max(m));
                let (head, tail) = self.requests.split_at_mut(second);
                let (a, b) = (&mut head[first], &mut tail[0]);
                std::mem::swap(&mut a.answered, &mut b.answered);
                std::mem::swap(&mut a.dup, &mut b.dup);
                std::mem::swap(&mut a.local, &mut b.local);
                swapped = true;
            }
        }
        swapped
    }

    /// Pair each reply the client read with the oldest outstanding request of its id. A request
    /// the client cancelled is owed nothing: a later request of its id is served by a bridge that
    /// freed the id with the cancellation (the sdk bridge's shim does) or refused as a reuse in
    /// flight by one that still waits for the cancelled request's answer (the relay bridge
    /// does). Either is right, so the reply tells which: an invalid-request error is the refusal;
    /// anything else answers the oldest request not cancelled first (sdk_rmcp soak,
    /// `v1.sdk_rmcp.none.a510f759992bcb79`: a ping that reused a cancelled call's id 8 s later was
    /// read as a reuse in flight, its answer given to the cancelled call).
    fn match_replies(&mut self) {
        let mut outstanding: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
        // Requests a cancellation named, and requests sent while only those held their id.
        let (mut cancelled, mut behind_cancelled) = (BTreeSet::new(), BTreeSet::new());
        for (index, event) in self.trace.events.iter().enumerate() {
            if event.host != host::CLIENT {
                continue;
            }
            let msg = message(event);
            if event.kind == kind::MCP_SEND {
                let (id, method, local) = match wire::predict(&event.text("msg")) {
                    wire::Expect::Silent => {
                        if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
                            let named = msg.pointer("/params/requestId").map(Value::to_string);
                            let queue = outstanding.get(&named).map(Vec::as_slice).unwrap_or_default();
                            let owed = queue.iter().find(|r| self.requests[**r].local.is_none() && !cancelled.contains(*r));
                            cancelled.extend(owed.copied());
                            self.cancelled.extend(owed.map(|r| (index, *r)));
                        }
                        continue;
                    }
                    wire::Expect::Request { id, method } => (Some(id), method, None),
                    wire::Expect::Error { code, id } => (id, String::new(), Some(code)),
                };
                let queue = outstanding.entry(id.clone()).or_default();
                let requests = &self.requests;
                let owed = |r: &&usize| requests[**r].local.is_none();
                let dup = id.is_some() && queue.iter().filter(owed).any(|r| !cancelled.contains(r));
                if id.is_some() && !dup && queue.iter().any(|r| owed(&r)) {
                    behind_cancelled.insert(self.requests.len());
                }
                queue.push(self.requests.len());
                let local = if dup { Some(wire::INVALID_REQUEST) } else { local };
                self.requests.push(Request { index, at_ms: event.at_ms, id, method, answered: None, local, dup });
            } else if event.kind == kind::MCP_RECV && is_response(&msg) {
                let id = msg.get("id").filter(|id| !id.is_null()).map(Value::to_string);
                let queue = outstanding.entry(id.clone()).or_default();
                if queue.is_empty() {
                    let known = self.requests.iter().any(|r| r.id == id);
                    self.unmatched.push((index, id.unwrap_or_default(), known));
                } else {
                    // A local error answers the oldest line that called for one (an invalid line,
                    // an id sent twice: the bridge refuses those at once), not a request still in
                    // flight under the same id.
                    let code = msg.pointer("/error/code").and_then(Value::as_i64);
                    let requests = &self.requests;
                    let refusal = |r: usize| code == Some(wire::INVALID_REQUEST) && behind_cancelled.contains(&r);
                    let local = queue.iter().position(|r| code.is_some() && (requests[*r].local == code || refusal(*r)));
                    let not_cancelled = queue.iter().position(|r| !cancelled.contains(r));
                    let request = queue.remove(local.or(not_cancelled).unwrap_or(0));
                    if local.is_some() && refusal(request) {
                        self.requests[request].local = code;
                        self.requests[request].dup = true;
                    }
                    self.requests[request].answered = Some(Answer { index, at_ms: event.at_ms, msg });
                }
            }
        }
    }

    pub(super) fn violation(&self, invariant: &str, index: usize, detail: String) -> Violation {
        self.trace.violation(invariant, index, detail)
    }

    /// The bridge's events, with indices.
    pub(super) fn bridge_events(&self) -> impl Iterator<Item = (usize, &TraceEvent)> {
        self.trace.events.iter().enumerate().filter(|(_, e)| e.host == host::BRIDGE)
    }

    /// Whether the bridge had a live session at event `index` (endpoint seen, not yet closed).
    fn stream_up_at(&self, index: usize) -> bool {
        let mut up = false;
        for event in self.trace.events[..index].iter().filter(|e| e.host == host::BRIDGE) {
            match event.kind.as_str() {
                kind::SSE_ENDPOINT => up = true,
                kind::SSE_CLOSED => up = false,
                _ => {}
            }
        }
        up
    }

    /// How many replies the client read were paired with a request of their id: each one a reply
    /// judged by `one_reply_per_id` and `reply_answers_outstanding`, which find only the others.
    fn paired_replies(&self) -> usize {
        self.requests.iter().filter(|r| r.answered.is_some()).count()
    }

    /// The first reply the client read for `id` at or after event `index`.
    fn client_reply_after(&self, index: usize, id: &str) -> Option<&Answer> {
        self.requests
            .iter()
            .filter_map(|r| r.answered.as_ref().filter(|_| r.id.as_deref() == Some(id)))
            .find(|answer| answer.index >= index)
    }
}

fn is_response(msg: &Value) -> bool {
    msg.get("method").is_none() && (msg.get("result").is_some() || msg.get("error").is_some())
}

/// The human-readable text of an error reply: a tool result's text or the error message.
pub fn error_text(msg: &Value) -> Option<String> {
    if let Some(message) = msg.pointer("/error/message").and_then(Value::as_str) {
        return Some(message.to_string());
    }
    if msg.pointer("/result/isError") == Some(&Value::Bool(true)) {
        let text = msg.pointer("/result/content/0/text").and_then(Value::as_str);
        return Some(text.unwrap_or("").to_string());
    }
    None
}

/// Every request id gets at most one reply at the client boundary.
pub fn one_reply_per_id(facts: &Facts<'_>) -> Vec<Violation> {
    verdicts::held_n(facts.paired_replies());
    let found = facts.unmatched.iter().filter(|(_, _, known)| *known).map(|(index, id, _)| {
        let detail = format!("a second reply for id {id}: every request with this id was already answered");
        facts.violation("one_reply_per_id", *index, detail)
    });
    capped(found.collect())
}

/// Every reply answers a request that is outstanding (never an id the client did not send).
pub fn reply_answers_outstanding(facts: &Facts<'_>) -> Vec<Violation> {
    verdicts::held_n(facts.paired_replies());
    let found = facts.unmatched.iter().filter(|(_, _, known)| !*known).map(|(index, id, _)| {
        let detail = format!("a reply for id {id:?}, which the client never sent");
        facts.violation("reply_answers_outstanding", *index, detail)
    });
    capped(found.collect())
}

/// Every request ends, with a result or a definite error, within deadline + sweep period, for
/// as long as the client waits: a request whose bound falls after the client closed stdin has
/// nobody waiting at its bound (supergateway exits at EOF with a 60 s deadline still to run,
/// harness error H2 of docs/findings.md, which `exits_after_stdin_closes` asks of it). What a
/// bridge owes at EOF is its own promise, `stream_checks::fails_owed_at_eof`.
pub fn bounded_latency(facts: &Facts<'_>) -> Vec<Violation> {
    let bound = facts.call_timeout_ms + facts.sweep_period_ms + facts.slack_ms;
    let left = facts.stories.client_eof.as_ref().map_or(u64::MAX, |(_, at, _)| *at);
    let mut found = Vec::new();
    for request in facts.requests.iter().filter(|r| r.at_ms + bound < left) {
        let due = request.at_ms + bound;
        let id = request.id.as_deref().unwrap_or("(malformed line)");
        match &request.answered {
            Some(answer) if answer.at_ms > due => found.push(facts.violation(
                "bounded_latency",
                answer.index,
                format!("{} id {id} answered after {} ms; the bound is {bound} ms", request.method, answer.at_ms - request.at_ms),
            )),
            None if due <= facts.horizon_ms => found.push(facts.violation(
                "bounded_latency",
                request.index,
                format!("{} id {id} sent at {} ms never answered (bound {bound} ms, run ended at {} ms)", request.method, request.at_ms, facts.horizon_ms),
            )),
            Some(_) => verdicts::held(),
            // The run ended before its bound: not judged.
            None => {}
        }
    }
    capped(found)
}

/// The sweeper closes a call out inside (deadline, deadline + sweep period] of its admission.
pub fn close_out_window(facts: &Facts<'_>) -> Vec<Violation> {
    let mut admitted: BTreeMap<String, u64> = BTreeMap::new();
    let mut found = Vec::new();
    let (deadline, sweep) = (facts.call_timeout_ms, facts.sweep_period_ms);
    for (index, event) in facts.bridge_events() {
        match event.kind.as_str() {
            kind::CALL_ADMIT => {
                admitted.insert(event.text("id"), event.at_ms);
            }
            kind::CALL_CLOSED_OUT => {
                let Some(at) = admitted.get(&event.text("id")) else { continue };
                let age = event.at_ms.saturating_sub(*at);
                // The simulation's clock moves in whole ticks of whole milliseconds, and both
                // stamps are the bridge's own events, so an age equal to the deadline is a
                // close-out at the deadline, not past it (this checker needs the bridge's events:
                // it never judges a live run, whose stamps are truncated).
                let late = deadline + sweep + 2 * facts.slack_ms;
                if age <= deadline || age > late {
                    let detail = format!(
                        "{} id {} closed out {age} ms after admission; the window is ({deadline}, {}]",
                        event.text("method"), event.text("id"), deadline + sweep
                    );
                    found.push(facts.violation("close_out_window", index, detail));
                } else {
                    verdicts::held();
                }
            }
            _ => {}
        }
    }
    capped(found)
}

/// A tool's effect happens at most once per user action and per idempotency key.
pub fn at_most_once_execution(facts: &Facts<'_>) -> Vec<Violation> {
    let mut by_action: BTreeMap<String, usize> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::TOOL_DONE) {
        if event.get("ok") != Some(&Value::Bool(true)) {
            continue;
        }
        let action = event.text("action");
        let action = if action.is_empty() { format!("key {}", event.text("key")) } else { action };
        let count = by_action.entry(action.clone()).or_default();
        *count += 1;
        if *count > 1 {
            let detail = format!("{} for action {action} executed {} times", event.text("tool"), count);
            found.push(facts.violation("at_most_once_execution", index, detail));
        } else {
            verdicts::held();
        }
    }
    capped(found)
}

/// What an ending says when the session's `initialize` was refused for good and took the requests
/// waiting on it along.
pub const INIT_FAILED: &str = "the session's initialize failed";
/// How every close-out the bridge writes begins its error text (MODEL.md §1.4).
pub const CLOSE_OUT: &str = "no reply within";

/// Errors the bridge writes say what happened: a close-out never blames a healthy relayer, never
/// invites a blind retry, and warns the work may have run (or says it was never sent); a
/// rejection names the HTTP status (the `initialize`'s, when that refusal ended it).
pub fn truthful_errors(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut last_status: BTreeMap<String, u64> = BTreeMap::new();
    let mut last_init_status = 0;
    for (index, event) in facts.bridge_events() {
        let id = event.text("id");
        match event.kind.as_str() {
            kind::POST_STATUS => {
                if id.contains("relay-init-") {
                    last_init_status = event.num("status");
                }
                last_status.insert(id, event.num("status"));
            }
            kind::CALL_CLOSED_OUT => {
                let Some(text) = facts.client_reply_after(index, &id).and_then(|a| error_text(&a.msg)) else { continue };
                let healthy = facts.stream_up_at(index);
                let blames_stream = text.contains("unavailable") || text.contains("was down");
                let claims_healthy = text.contains("healthy");
                let wrong_claim = if healthy { blames_stream } else { claims_healthy };
                // A close-out either says the work may have run or that it was never sent; it
                // never invites a blind retry.
                let warns = text.contains("may") || text.contains("never sent");
                let invites_retry = text.contains("retry") && !text.contains("check its effect");
                if !warns || wrong_claim || invites_retry {
                    let state = if healthy { "healthy" } else { "down" };
                    let detail = format!("close-out of id {id} (stream {state}) says {text:?}");
                    found.push(facts.violation("truthful_errors", index, detail));
                } else {
                    verdicts::held();
                }
            }
            kind::CALL_REPLY if event.text("source") == "rejected" => {
                let Some(text) = facts.client_reply_after(index, &id).and_then(|a| error_text(&a.msg)) else { continue };
                // Refused with the session's `initialize`: its status is the one to name.
                let status = if text.contains(INIT_FAILED) { last_init_status } else { last_status.get(&id).copied().unwrap_or(0) };
                let named = if status == 0 { text.contains("network") } else { text.contains(&format!("HTTP {status}")) };
                if !named {
                    let detail = format!("rejection of id {id} after HTTP {status} says {text:?}");
                    found.push(facts.violation("truthful_errors", index, detail));
                } else {
                    verdicts::held();
                }
            }
            _ => {}
        }
    }
    capped(found)
}

/// The bridge POSTs a request only while it still owes its reply (the check just before each
/// POST is not made stale by an await).
pub fn no_stale_post(facts: &Facts<'_>) -> Vec<Violation> {
    let mut owed: BTreeMap<String, bool> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.bridge_events() {
        let id = event.text("id");
        match event.kind.as_str() {
            kind::CALL_ADMIT => {
                owed.insert(id, true);
            }
            // Replies to requests that were never admitted (an `initialize` answered locally, a
            // rejected duplicate id) do not settle an admitted one.
            kind::CALL_REPLY if !matches!(event.text("source").as_str(), "local" | "invalid") => {
                owed.insert(id, false);
            }
            kind::POST_SEND if event.get("tracked") == Some(&Value::Bool(true)) => {
                if owed.get(&id) != Some(&true) {
                    let detail = format!("POST of id {id} after its reply was already written");
                    found.push(facts.violation("no_stale_post", index, detail));
                } else {
                    verdicts::held();
                }
            }
            _ => {}
        }
    }
    capped(found)
}

/// Every message crossing the stdio boundary validates against the MCP 2025-11-25 schema; a
/// result against the result type of its request's method. (When the client reused an id, a late
/// reply to an earlier request of that id is indistinguishable: any of the id's methods fits.)
pub fn schema_valid(facts: &Facts<'_>) -> Vec<Violation> {
    // An answer may be any request's of its id the client had sent by then, the latest first:
    // a request that reused an id still in flight (JSON-RPC forbids it, and a bridge that
    // forwards it untouched gets two answers for one id) is answered in whichever order the
    // server finishes, and the first answer is paired with the first request.
    let mut methods_of: BTreeMap<&str, Vec<(usize, &str)>> = BTreeMap::new();
    for request in facts.requests.iter().filter(|r| !r.method.is_empty()) {
        methods_of.entry(request.id.as_deref().unwrap_or("")).or_default().push((request.index, request.method.as_str()));
    }
    let mut answering: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for request in facts.requests.iter().filter(|r| !r.method.is_empty()) {
        if let Some(answer) = &request.answered {
            let sent = &methods_of[request.id.as_deref().unwrap_or("")];
            let methods: Vec<&str> = sent.iter().rev().filter(|(index, _)| *index < answer.index).map(|(_, method)| *method).collect();
            answering.insert(answer.index, methods);
        }
    }
    let mut found = Vec::new();
    for (index, event) in facts.trace.events.iter().enumerate().filter(|(_, e)| e.host == host::CLIENT) {
        // Each message crossing the boundary is one verdict; a line the client wrote malformed on
        // purpose is no message to judge.
        let result = match event.kind.as_str() {
            kind::MCP_SEND if event.get("malformed") != Some(&Value::Bool(true)) => {
                facts.schema.validate_client_message(&message(event))
            }
            kind::MCP_RECV => match answering.get(&index) {
                Some(methods) => methods
                    .iter()
                    .map(|method| facts.schema.validate_server_message(&message(event), Some(method)))
                    .find(Result::is_ok)
                    .unwrap_or_else(|| facts.schema.validate_server_message(&message(event), Some(methods[0]))),
                None => facts.schema.validate_server_message(&message(event), None),
            },
            _ => continue,
        };
        if let Some(error) = verdicts::judging(result.err()) {
            let detail = format!("{} {}: {error}", event.kind, event.text("msg"));
            found.push(facts.violation("schema_valid", index, detail));
        }
    }
    capped(found)
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
