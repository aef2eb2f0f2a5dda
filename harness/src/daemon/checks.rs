//! The daemon family's checkers: pure functions over a recorded trace. Each opens with the
//! property it checks. They read the bounds from the trace's `run.spec` event and the caller's
//! deadline from each request line, so a saved trace can be checked offline.

use std::collections::{BTreeMap, BTreeSet};

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::excuses::{Effects, Span};
use super::faults::{DISRUPTIVE, WINDOWED};
use super::{honesty, lifecycle, waits};
use crate::verdicts;
use crate::check::{capped, message};
use crate::schema::McpSchema;
use crate::trace::{Trace, TraceEvent, Violation};

pub type Checker = fn(&Facts<'_>) -> Vec<Violation>;

/// The checkers, by name.
pub const CHECKERS: &[(&str, Checker)] = &[
    ("no_early_timeout", no_early_timeout),
    ("one_oauth_flow_per_action", one_oauth_flow_per_action),
    ("approvals_are_used", approvals_are_used),
    ("executes_once", executes_once),
    ("no_needless_launch", no_needless_launch),
    ("bounded_latency", bounded_latency),
    ("silent_daemon_detected", silent_daemon_detected),
    ("frames_only_when_asked", frames_only_when_asked),
    ("listing_ends", listing_ends),
    ("schema_valid", schema_valid),
    ("no_stop_while_busy", lifecycle::no_stop_while_busy),
    (
        "stop_reaches_its_target",
        lifecycle::stop_reaches_its_target,
    ),
    (
        "no_request_killed_by_replacement",
        lifecycle::no_request_killed_by_replacement,
    ),
    ("one_daemon_per_config", lifecycle::one_daemon_per_config),
    ("launches_come_up_or_go", lifecycle::launches_come_up_or_go),
    ("kills_come_last", lifecycle::kills_come_last),
    ("lock_waits_justified", lifecycle::lock_waits_justified),
    (
        "launch_after_the_old_one_went",
        lifecycle::launch_after_the_old_one_went,
    ),
    ("mixed_versions_work", lifecycle::mixed_versions_work),
    ("replacement_ends", lifecycle::replacement_ends),
    ("served_by_a_current_daemon", lifecycle::served_by_a_current_daemon),
    ("honest_status", honesty::honest_status),
    ("justified_refusal", honesty::justified_refusal),
    ("quiescence", honesty::quiescence),
    ("after_heal_succeeds", honesty::after_heal_succeeds),
    ("no_orphaned_work", honesty::no_orphaned_work),
    ("bounded_waits", waits::bounded_waits),
    ("action_within_its_path", waits::action_within_its_path),
    ("one_retry", waits::one_retry),
    ("workload_happened", waits::workload_happened),
    ("errors_have_causes", honesty::errors_have_causes),
    ("successes_come_from_the_server", honesty::successes_come_from_the_server),
    ("unknown_methods_refused", honesty::unknown_methods_refused),
];

/// Run every checker.
pub fn check(trace: &Trace, schema: &McpSchema) -> Vec<Violation> {
    crate::verdicts::run(CHECKERS, &Facts::new(trace, schema))
}

/// How an attempt ended at the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    pub index: usize,
    pub at_ms: u64,
    pub ok: bool,
    /// The daemon's error code, or the transport reason.
    pub code: String,
    pub transport: bool,
}

impl End {
    /// The CLI gave up on its socket budget (`idle` re-armed by frames, or a fixed `budget`).
    pub fn expired(&self) -> bool {
        self.transport && matches!(self.code.as_str(), "idle" | "budget")
    }
}

/// One request the CLI sent (one connection).
#[derive(Debug, Clone)]
pub struct Attempt {
    pub index: usize,
    pub at_ms: u64,
    pub id: String,
    pub action: u64,
    /// The daemon the metadata named when it was sent (whose socket it went to); 0 if unknown.
    pub pid: u64,
    pub method: String,
    pub timeout_ms: Option<u64>,
    /// The send, then every frame whose id matched: when the CLI last heard from the daemon.
    pub activity_ms: Vec<u64>,
    pub end: Option<End>,
    /// A protocol-2 request (it names its `protocolVersion`) served by a protocol-2 daemon: only
    /// those get frames.
    pub modern: bool,
    /// The request asked for frames (`progressIntervalMs`).
    pub asks_frames: bool,
}

/// One user invocation.
#[derive(Debug, Clone)]
pub struct Action {
    pub action: u64,
    pub start_ms: u64,
    pub end_ms: Option<u64>,
}

/// Facts derived once from a trace and shared by the checkers.
pub struct Facts<'a> {
    pub trace: &'a Trace,
    pub schema: &'a McpSchema,
    pub oauth_timeout_ms: u64,
    pub sdk_request_timeout_ms: u64,
    pub daemon_timeout_ms: u64,
    pub max_pages: u64,
    pub slack_ms: u64,
    pub horizon_ms: u64,
    pub actions: Vec<Action>,
    pub attempts: Vec<Attempt>,
    /// The disruptive faults (stall, crash, reset, …) by kind and span: what the excuses name.
    pub spans: Vec<Span>,
    /// Which daemon took each request, and the crashes.
    pub effects: Effects,
}

impl<'a> Facts<'a> {
    pub fn new(trace: &'a Trace, schema: &'a McpSchema) -> Self {
        let spec = trace.first(kind::RUN_SPEC);
        let num = |name: &str| spec.map_or(0, |e| e.num(name));
        let mut facts = Facts {
            trace,
            schema,
            oauth_timeout_ms: num("oauth_timeout_ms"),
            sdk_request_timeout_ms: num("sdk_request_timeout_ms"),
            daemon_timeout_ms: num("daemon_timeout_ms"),
            max_pages: num("max_pages"),
            slack_ms: num("slack_ms"),
            horizon_ms: num("horizon_ms"),
            actions: Vec::new(),
            attempts: Vec::new(),
            spans: Vec::new(),
            effects: Effects::new(trace),
        };
        facts.collect_cli();
        facts.collect_versions();
        facts.collect_disruptions();
        facts
    }

    fn collect_cli(&mut self) {
        let mut by_id: BTreeMap<String, usize> = BTreeMap::new();
        for (index, event) in self
            .trace
            .events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.host == host::CLI)
        {
            let id = event.text("id");
            match event.kind.as_str() {
                kind::CLI_ACTION => {
                    let action = Action {
                        action: event.num("action"),
                        start_ms: event.at_ms,
                        end_ms: None,
                    };
                    self.actions.push(action);
                }
                kind::CLI_DONE => {
                    let action = event.num("action");
                    if let Some(entry) = self.actions.iter_mut().rev().find(|a| a.action == action)
                    {
                        entry.end_ms = Some(event.at_ms);
                    }
                }
                kind::CLI_SEND => {
                    by_id.insert(id.clone(), self.attempts.len());
                    self.attempts.push(attempt(index, event));
                }
                kind::CLI_FRAME if event.get("matched") == Some(&Value::Bool(true)) => {
                    if let Some(attempt) = by_id.get(&id).map(|&i| &mut self.attempts[i]) {
                        attempt.activity_ms.push(event.at_ms);
                    }
                }
                kind::CLI_REPLY | kind::CLI_FAIL => {
                    let transport = event.kind == kind::CLI_FAIL;
                    let code = if transport {
                        event.text("reason")
                    } else {
                        event.text("code")
                    };
                    let ok = event.get("ok") == Some(&Value::Bool(true));
                    let end = End {
                        index,
                        at_ms: event.at_ms,
                        ok,
                        code,
                        transport,
                    };
                    if let Some(attempt) = by_id.get(&id).map(|&i| &mut self.attempts[i]) {
                        attempt.end = Some(end);
                    }
                }
                _ => {}
            }
        }
    }

    /// A request served by a protocol-1 daemon gets no frames whatever its client speaks. The
    /// version is the process table's (the binary launched); the daemon is the one whose socket
    /// the metadata named at the send, or the one that took the request.
    fn collect_versions(&mut self) {
        let mut versions: BTreeMap<u64, u64> = BTreeMap::new();
        let mut old: Vec<String> = Vec::new();
        for event in &self.trace.events {
            match event.kind.as_str() {
                kind::DAEMON_LAUNCH => {
                    versions.insert(event.num("pid"), event.num("protocol_version"));
                }
                kind::DAEMON_REQUEST if versions.get(&event.num("pid")) == Some(&1) => {
                    old.push(event.text("id"));
                }
                _ => {}
            }
        }
        for attempt in &mut self.attempts {
            let at_v1 = versions.get(&attempt.pid) == Some(&1);
            attempt.modern &= !at_v1 && !old.contains(&attempt.id);
        }
    }

    fn collect_disruptions(&mut self) {
        // Open windows by their detail (two faults of one kind may overlap): (kind, start).
        let mut open: BTreeMap<String, (String, u64)> = BTreeMap::new();
        for (_, event) in self.trace.of_kind(kind::FAULT_INJECTED) {
            let fault = event.text("fault");
            if fault == "heal" {
                for (_, (fault, start)) in std::mem::take(&mut open) {
                    self.spans.push(Span { fault, start_ms: start, end_ms: event.at_ms });
                }
            } else if DISRUPTIVE.contains(&fault.as_str()) {
                let windowed = WINDOWED.contains(&fault.as_str());
                match event.text("phase").as_str() {
                    "start" if windowed => {
                        open.insert(event.text("detail"), (fault, event.at_ms));
                    }
                    _ if windowed => {
                        let start = open.remove(&event.text("detail")).map_or(event.at_ms, |(_, start)| start);
                        self.spans.push(Span { fault, start_ms: start, end_ms: event.at_ms });
                    }
                    _ => self.spans.push(Span { fault, start_ms: event.at_ms, end_ms: event.at_ms }),
                }
            }
        }
        let horizon_ms = self.horizon_ms;
        self.spans.extend(open.into_values().map(|(fault, start)| Span { fault, start_ms: start, end_ms: horizon_ms }));
    }

    /// The windows in which a disruptive fault was in effect: `(start, end)`, whatever its kind.
    pub fn disruptions(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.spans.iter().map(|s| (s.start_ms, s.end_ms))
    }

    /// How long in `[from, to]` the daemon process was stalled (`daemon_stall`, overlapping
    /// windows counted once).
    pub fn stalled_ms(&self, from: u64, to: u64) -> u64 {
        self.held_by_ms(&["daemon_stall"], from, to)
    }

    /// How long in `[from, to]` a fault of one of `kinds` was in effect (overlapping windows
    /// counted once).
    pub fn held_by_ms(&self, kinds: &[&str], from: u64, to: u64) -> u64 {
        covered_ms(self.spans.iter().filter(|s| kinds.contains(&s.fault.as_str())).map(|s| (s.start_ms, s.end_ms)), from, to)
    }

    /// The action in progress at `at_ms`.
    pub fn action_at(&self, at_ms: u64) -> Option<u64> {
        let within = |a: &&Action| a.start_ms <= at_ms && a.end_ms.is_none_or(|end| at_ms <= end);
        self.actions.iter().rev().find(within).map(|a| a.action)
    }

    /// The caller's deadline `d` of an attempt.
    pub fn deadline_ms(&self, attempt: &Attempt) -> u64 {
        attempt.timeout_ms.unwrap_or(self.daemon_timeout_ms)
    }

    /// The operation ceiling of a fixed-phase attempt.
    pub fn ceiling_ms(&self, attempt: &Attempt) -> u64 {
        self.oauth_timeout_ms + attempt.timeout_ms.unwrap_or(self.sdk_request_timeout_ms)
    }

    /// Whether an authorization flow of the daemon that took `attempt`, open in `[from, to]`,
    /// was still open at `to`: a prompt shown then without a token for the authorization of its
    /// `state` (a token issued within the slack before `to` does not count: the daemon's OAuth
    /// bound may fire in the same tick as the exchange completes), or a request of the flow
    /// (discovery, registration, the code exchange) held unanswered there by a wedged
    /// authorization server. Another daemon's flow cannot hold this one's request (race
    /// `daemon_listing_timed_out_beside_another_daemons_flow`); a held discovery or registration
    /// names no flow, so it counts for every daemon.
    pub fn flow_pending(&self, attempt: &Attempt, from: u64, to: u64) -> bool {
        let daemon = self.effects.taken_by.get(&attempt.id).copied().unwrap_or(attempt.pid);
        let ours = |state: &str| self.effects.flows.get(state).is_none_or(|(pid, _)| *pid == daemon);
        let held = self.trace.events.iter().any(|e| {
            held_by_authorization_server(e) && e.at_ms >= from && e.at_ms <= to && ours(&e.text("state"))
        });
        if held {
            return true;
        }
        let resolved_by = to.saturating_sub(self.slack_ms);
        let resolved: BTreeSet<String> = self
            .trace
            .of_kind(kind::OAUTH_TOKEN)
            .filter(|(_, token)| token.get("ok") == Some(&Value::Bool(true)) && token.at_ms <= resolved_by)
            .map(|(_, token)| token.text("state"))
            .collect();
        self.trace
            .of_kind(kind::BROWSER_PROMPT)
            .filter(|(_, e)| e.at_ms >= from && e.at_ms <= to)
            .map(|(_, prompt)| prompt.text("state"))
            .any(|state| !resolved.contains(&state) && ours(&state))
    }

    pub fn violation(&self, invariant: &str, index: usize, detail: String) -> Violation {
        self.trace.violation(invariant, index, detail)
    }
}

/// A request a wedged authorization server read and never answered (its `fault.fired`).
fn held_by_authorization_server(event: &TraceEvent) -> bool {
    event.kind == kind::FAULT_FIRED && event.host == host::OAUTH && event.text("fault") == "wedged_method"
}

fn attempt(index: usize, event: &TraceEvent) -> Attempt {
    let msg: Value = message(event);
    Attempt {
        index,
        at_ms: event.at_ms,
        id: event.text("id"),
        action: event.num("action"),
        pid: event.num("pid"),
        method: msg
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        timeout_ms: msg.pointer("/params/timeoutMs").and_then(Value::as_u64),
        activity_ms: vec![event.at_ms],
        end: None,
        modern: msg.get("protocolVersion").is_some(),
        asks_frames: msg.get("progressIntervalMs").is_some(),
    }
}

/// The action a daemon request id (`a<action>.<attempt>`) belongs to.
pub fn action_of(request: &str) -> Option<u64> {
    request.strip_prefix('a')?.split('.').next()?.parse().ok()
}

fn fixed_phase(method: &str) -> bool {
    matches!(
        method,
        "callTool" | "listResources" | "readResource" | "closeServer"
    )
}

/// No request fails before its caller's deadline while its peers are healthy: no transport
/// timeout on an undisturbed daemon, and no `operation_timeout` before the bound of the phase it
/// was in (the OAuth wait, a page, the ceiling). Excused only by the fault's effect on that
/// request: a transport expiry a fault cut (`Facts::cut`), or an `operation_timeout` that fired
/// as a stall that froze its work ended (`Facts::thawed`).
pub fn no_early_timeout(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for attempt in &facts.attempts {
        let Some(end) = &attempt.end else { continue };
        let elapsed = end.at_ms - attempt.at_ms.min(end.at_ms);
        if end.expired() {
            if let Some(mechanism) = facts.cut(attempt) {
                verdicts::excused(mechanism);
                continue;
            }
            let detail = format!(
                "{} {} failed with a transport {} after {elapsed} ms while the daemon was healthy",
                attempt.method, attempt.id, end.code
            );
            found.push(facts.violation("no_early_timeout", end.index, detail));
        } else if end.code == "operation_timeout" {
            let pending = facts.flow_pending(attempt, attempt.at_ms, end.at_ms);
            let floor = match (attempt.method == "listTools", pending) {
                (true, true) => attempt.timeout_ms.unwrap_or(facts.oauth_timeout_ms),
                (true, false) => attempt.timeout_ms.unwrap_or(facts.sdk_request_timeout_ms),
                (false, true) => facts.oauth_timeout_ms,
                (false, false) => facts.ceiling_ms(attempt),
            };
            if elapsed + facts.slack_ms < floor && facts.thawed(end.at_ms) {
                verdicts::excused(super::excuses::THAWED);
            } else if elapsed + facts.slack_ms < floor {
                let phase = if pending {
                    "the OAuth wait"
                } else {
                    "its deadline"
                };
                let detail = format!(
                    "{} {} timed out after {elapsed} ms, before {phase} of {floor} ms",
                    attempt.method, attempt.id
                );
                found.push(facts.violation("no_early_timeout", end.index, detail));
            } else {
                verdicts::held();
            }
        } else {
            verdicts::held();
        }
    }
    capped(found)
}

/// At most one OAuth authorization flow (a browser prompt) per user action. A prompt belongs to
/// the request whose daemon started the flow with that `state` (concurrent clients each have
/// their own), else to the action in progress.
pub fn one_oauth_flow_per_action(facts: &Facts<'_>) -> Vec<Violation> {
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::BROWSER_PROMPT) {
        let owner = facts.effects.flows.get(&event.text("state")).and_then(|(_, id)| action_of(id));
        let Some(action) = owner.or_else(|| facts.action_at(event.at_ms)) else {
            continue;
        };
        let count = seen.entry(action).or_default();
        *count += 1;
        if *count == 1 {
            verdicts::held();
        } else if let Some(mechanism) = facts.cut_before(action, event.at_ms) {
            // The daemon that held the first flow's state lost it, or its answer, to a fault.
            verdicts::excused(mechanism);
        } else {
            let detail =
                format!("action {action} prompted the user {count} times for authorization");
            found.push(facts.violation("one_oauth_flow_per_action", index, detail));
        }
    }
    capped(found)
}

/// An approval the daemon's redirect listener accepted (the browser read 200 at the end of its
/// redirect) is used: the daemon exchanges that flow's code at the token endpoint (an
/// `oauth.token` for the flow's `state`), at any time after. A listener that accepts the
/// redirect of a flow the daemon no longer runs (its request was dropped mid-wait, its `state`
/// left pending) shows the user "approved" and throws the code away: the next request prompts
/// again. Excused only when the daemon that ran the flow crashed after the approval, a stall froze
/// it as the redirect came, a fault cut the flow's request at the CLI within a slack of the
/// redirect, or the redirect met the flow's OAuth bound or its request's operation ceiling within
/// a slack; not judged when the run
/// ends within a slack of it.
pub fn approvals_are_used(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    // When each flow's OAuth bound ended it (`phase=timeout`).
    let timeouts: BTreeMap<String, u64> = facts
        .trace
        .of_kind(kind::DAEMON_OAUTH)
        .filter(|(_, e)| e.text("phase") == "timeout")
        .map(|(_, e)| (e.text("state"), e.at_ms))
        .collect();
    for (index, approval) in facts.trace.of_kind(kind::BROWSER_APPROVE) {
        if approval.num("status") != 200 {
            continue;
        }
        let state = approval.text("state");
        // The token endpoint answered the exchange, or a wedge held it there: either way the
        // daemon used the code.
        let exchanged = facts.trace.events.iter().any(|e| {
            let exchange = match e.kind.as_str() {
                kind::OAUTH_TOKEN => e.text("grant") != "refresh_token",
                kind::FAULT_FIRED => held_by_authorization_server(e),
                _ => false,
            };
            exchange && e.text("state") == state && e.at_ms + facts.slack_ms >= approval.at_ms
        });
        let (pid, request) = facts.effects.flows.get(&state).map_or((None, None), |(pid, id)| (Some(*pid), facts.attempt(id)));
        let crashed = facts.effects.crashes.iter().any(|(p, at)| Some(*p) == pid && *at + facts.slack_ms >= approval.at_ms);
        // A fault cut the flow's request at the CLI as the redirect came: the daemon dropped
        // the work nobody waited for any more, in the same tick as it accepted the redirect.
        let near = |at: u64| at + facts.slack_ms >= approval.at_ms && at <= approval.at_ms + facts.slack_ms;
        let cut = request.filter(|a| a.end.as_ref().is_some_and(|e| near(e.at_ms))).and_then(|a| facts.cut(a));
        // A stall froze the daemon as the redirect came: its OAuth bound ran out before it
        // could exchange the code (the listener's socket still completed the redirect).
        let stalled = facts.held_during("daemon_stall", approval.at_ms.saturating_sub(facts.slack_ms), approval.at_ms + facts.slack_ms);
        // The redirect came within a slack of the flow's OAuth bound, or of its request's
        // operation ceiling, which ended it before the exchange could (a tick's race at the
        // deadline, not a code thrown away later; race `daemon_approval_as_its_request_met_its_ceiling`).
        // Whether the deadline itself came on time is `no_early_timeout`'s to judge.
        let ceiling = request.and_then(|a| a.end.as_ref()).is_some_and(|e| e.code == "operation_timeout" && near(e.at_ms));
        let at_deadline = ceiling || timeouts.get(&state).is_some_and(|end| near(*end));
        if exchanged {
            verdicts::held();
        } else if crashed {
            verdicts::excused(super::excuses::CRASH);
        } else if stalled {
            verdicts::excused(super::excuses::STALL);
        } else if let Some(mechanism) = cut {
            verdicts::excused(mechanism);
        } else if at_deadline {
            verdicts::excused(AT_DEADLINE);
        } else if approval.at_ms + facts.slack_ms < facts.horizon_ms {
            let detail = format!(
                "the daemon accepted the browser's redirect for flow {state:?} at {} ms and never exchanged its code",
                approval.at_ms
            );
            found.push(facts.violation("approvals_are_used", index, detail));
        }
    }
    capped(found)
}

/// An approval that reached the daemon within a slack of its flow's OAuth bound or its request's
/// operation ceiling.
const AT_DEADLINE: &str = "the approval met its flow's deadline";

/// The daemon executes each logical request once upstream. A second execution is excused only
/// when the first one's result could not reach the user because of an injected fault's own
/// effect on the request that ran it (its daemon crashed, its connection was reset, a stall
/// silenced its daemon until its budget expired), not by a stop, restart or early timeout the
/// system chose.
pub fn executes_once(facts: &Facts<'_>) -> Vec<Violation> {
    // Per action: how many executions, and the request of the latest.
    let mut seen: BTreeMap<u64, (usize, String)> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::SERVER_EXEC) {
        let request = event.text("request");
        let Some(action) = action_of(&request) else {
            continue;
        };
        let (count, previous) = seen.entry(action).or_default();
        *count += 1;
        let previous = std::mem::replace(previous, request.clone());
        let count = *count;
        if count == 1 {
            verdicts::held();
            continue;
        }
        let cut = facts.attempt(&previous).filter(|_| previous != request).and_then(|a| facts.cut(a));
        if let Some(mechanism) = cut {
            verdicts::excused(mechanism);
        } else {
            let detail = format!(
                "action {action}'s {} executed {count} times upstream",
                event.text("method")
            );
            found.push(facts.violation("executes_once", index, detail));
        }
    }
    capped(found)
}

/// No daemon launch the user did not need: the CLI never replaces a healthy, fresh daemon (a
/// launch that replaced a stale one, or a peer's `daemon start`, is needed). The daemons a
/// launch replaced are the ones its own action stopped (its `cli.stop` targets, and the pids
/// that accepted a stop under its control id `c<action>.…`) and that exited, stopped or killed,
/// after that stop: a stop another client sent to its own stale daemon meanwhile neither excuses
/// this action's replacement nor is one, and a daemon another client's stop had already ended
/// was not replaced by this action's late stop to it (race
/// `daemon_launch_after_another_client_stopped_the_daemon`).
pub fn no_needless_launch(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut exits: Vec<(u64, String, u64)> = Vec::new();
    // Per action, the pids it sent a stop to or that accepted one of its stops, and when first.
    let mut stopped_by: BTreeMap<u64, BTreeMap<u64, u64>> = BTreeMap::new();
    let launched_by: BTreeMap<u64, u64> = facts
        .trace
        .of_kind(kind::CLI_LAUNCH)
        .map(|(_, e)| (e.num("pid"), e.num("action")))
        .collect();
    // Whether the daemon a launch replaced was stale for the CLI that launched (from what the
    // daemon started with and the config edits, not from the CLI's own reason).
    let fleet = lifecycle::Fleet::new(facts);
    for (index, event) in facts.trace.events.iter().enumerate() {
        match event.kind.as_str() {
            kind::CLI_STOP => {
                let action = event.num("action");
                stopped_by.entry(action).or_default().entry(event.num("target")).or_insert(event.at_ms);
            }
            kind::DAEMON_STOP if event.get("refused") != Some(&Value::Bool(true)) => {
                if let Some(action) = lifecycle::action_of_control(&event.text("id")) {
                    stopped_by.entry(action).or_default().entry(event.num("pid")).or_insert(event.at_ms);
                }
            }
            _ if event.host != host::DAEMON => {}
            kind::DAEMON_EXIT => exits.push((event.at_ms, event.text("reason"), event.num("pid"))),
            kind::DAEMON_LAUNCH => {
                let Some(&action) = launched_by.get(&event.num("pid")) else {
                    continue;
                };
                let Some(start) = facts
                    .actions
                    .iter()
                    .find(|a| a.action == action)
                    .map(|a| a.start_ms)
                else {
                    continue;
                };
                let version = fleet.actions.get(&action).map_or(0, |(_, version)| *version);
                // The config the CLI read: at its start, or again when a restart went through
                // `ensure_daemon` after an edit (soak token v1.daemon.none.f3e84fe19935db61: an
                // edit during action 2's restart made the daemon it had just launched stale).
                let editions = [fleet.edition_at(start, facts.slack_ms), fleet.edition_at(event.at_ms, facts.slack_ms)];
                let own = stopped_by.get(&action);
                let replaced: Vec<u64> = exits
                    .iter()
                    .filter(|(at, reason, _)| *at >= start && matches!(reason.as_str(), "stop" | "kill"))
                    .filter(|(at, _, pid)| own.and_then(|pids| pids.get(pid)).is_some_and(|stop| at >= stop))
                    .map(|(_, _, pid)| *pid)
                    .collect();
                let stale = |pid: &u64| editions.iter().any(|edition| edition.is_none_or(|edition| fleet.stale(*pid, version, edition) != Some(false)));
                if replaced.is_empty() || replaced.iter().any(stale) {
                    verdicts::held();
                } else if let Some(mechanism) = facts.cut_before(action, event.at_ms) {
                    // The restart-and-retry after a transport failure a fault caused.
                    verdicts::excused(mechanism);
                } else {
                    let detail = format!(
                        "pid {} launched to replace a healthy daemon during action {action}",
                        event.num("pid")
                    );
                    found.push(facts.violation("no_needless_launch", index, detail));
                }
            }
            _ => {}
        }
    }
    capped(found)
}

/// Every fixed-phase request ends within its operation ceiling: heartbeats never keep it open.
/// (A stalled daemon cannot write its ceiling answer; the idle budget bounds that case, which
/// `silent_daemon_detected` judges.)
pub fn bounded_latency(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for attempt in facts.attempts.iter().filter(|a| fixed_phase(&a.method)) {
        let ceiling_at = attempt.at_ms + facts.ceiling_ms(attempt);
        let due = ceiling_at + facts.slack_ms;
        let (late, index) = match &attempt.end {
            Some(end) => (end.at_ms > due, end.index),
            None => (due <= facts.horizon_ms, attempt.index),
        };
        if !late {
            verdicts::held();
        } else if facts.held_during("daemon_stall", ceiling_at, ceiling_at) {
            // A stalled daemon cannot write its ceiling answer when the ceiling fires.
            verdicts::excused(super::excuses::STALL);
        } else {
            let detail = format!(
                "{} {} sent at {} ms still open past its ceiling of {} ms",
                attempt.method,
                attempt.id,
                attempt.at_ms,
                facts.ceiling_ms(attempt)
            );
            found.push(facts.violation("bounded_latency", index, detail));
        }
    }
    capped(found)
}

/// A silent daemon is detected within the caller's deadline: no request stays open longer than
/// its idle budget after the last frame it received (protocol-1 requests get no frames).
pub fn silent_daemon_detected(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    for attempt in facts.attempts.iter().filter(|a| a.modern) {
        let deadline = facts.deadline_ms(attempt);
        let end_ms = attempt
            .end
            .as_ref()
            .map_or(facts.horizon_ms, |end| end.at_ms);
        let mut heard = attempt.activity_ms.clone();
        heard.push(end_ms);
        let silence = heard
            .windows(2)
            .map(|w| (w[0], w[1]))
            .find(|(from, to)| to - from.min(to) > deadline + facts.slack_ms);
        if let Some((from, to)) = verdicts::judging(silence) {
            let index = attempt.end.as_ref().map_or(attempt.index, |end| end.index);
            let detail = format!(
                "{} {} heard nothing from {from} to {to} ms yet stayed open past its {deadline} ms \
                 deadline",
                attempt.method, attempt.id
            );
            found.push(facts.violation("silent_daemon_detected", index, detail));
        }
    }
    capped(found)
}

/// Progress frames go only to requests that asked for them, and never from a protocol-1 daemon
/// (MODEL §2.4): judged from each frame the CLI read, the request it had sent on that connection
/// and the version the process table launched.
pub fn frames_only_when_asked(facts: &Facts<'_>) -> Vec<Violation> {
    let by_id: BTreeMap<&str, &Attempt> =
        facts.attempts.iter().map(|a| (a.id.as_str(), a)).collect();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::CLI_FRAME) {
        let on = event.text("on");
        let reader = if on.is_empty() { event.text("id") } else { on };
        let Some(attempt) = by_id.get(reader.as_str()) else {
            continue;
        };
        let why = if !attempt.asks_frames {
            "although it asked for none"
        } else if !attempt.modern {
            "from a protocol-1 daemon, which writes none"
        } else {
            verdicts::held();
            continue;
        };
        let detail = format!(
            "{} {} read a progress frame {why} (daemon pid {})",
            attempt.method, attempt.id, attempt.pid
        );
        found.push(facts.violation("frames_only_when_asked", index, detail));
    }
    capped(found)
}

/// A listing ends: it never fetches a cursor twice and never more than `max_pages` pages (a
/// fetch the server refused as unauthorized serves nothing and does not count).
pub fn listing_ends(facts: &Facts<'_>) -> Vec<Violation> {
    let mut cursors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::SERVER_RECV) {
        let msg: Value = message(event);
        // A page the server refused with a 401 (an expired token) was not served: the daemon
        // asks for it again once it has renewed the token.
        if msg.get("method").and_then(Value::as_str) != Some("tools/list")
            || event.get("auth") == Some(&Value::Bool(false))
        {
            continue;
        }
        let cursor = msg
            .pointer("/params/cursor")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let seen = cursors.entry(event.text("request")).or_default();
        let repeated = seen.contains(&cursor);
        seen.push(cursor.clone());
        if repeated || seen.len() as u64 > facts.max_pages {
            let detail = format!(
                "listing for {} fetched page {} (cursor {cursor:?}){}",
                event.text("request"),
                seen.len(),
                if repeated {
                    ", a cursor it had already fetched"
                } else {
                    ", past the page cap"
                }
            );
            found.push(facts.violation("listing_ends", index, detail));
        } else {
            verdicts::held();
        }
    }
    capped(found)
}

/// Every upstream MCP message validates against the MCP 2025-11-25 schema; a result against the
/// result type of its request's method.
pub fn schema_valid(facts: &Facts<'_>) -> Vec<Violation> {
    // Concurrent sessions reuse JSON-RPC ids: a response may answer any pending request of its id.
    let mut methods: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts
        .trace
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.host == host::MCP)
    {
        let text = event.text("msg");
        let Ok(msg) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let result = match event.kind.as_str() {
            kind::SERVER_RECV => {
                if let (Some(id), Some(method)) =
                    (msg.get("id"), msg.get("method").and_then(Value::as_str))
                {
                    let pending = methods.entry(id.to_string()).or_default();
                    pending.push(method.to_string());
                }
                facts.schema.validate_client_message(&msg)
            }
            kind::SERVER_SEND => {
                let id = msg.get("id").map(|id| id.to_string()).unwrap_or_default();
                let pending = methods.remove(&id).unwrap_or_default();
                validate_response(facts, &msg, pending, &mut methods, id)
            }
            _ => continue,
        };
        if let Some(error) = verdicts::judging(result.err()) {
            let detail = format!("{} {text}: {error}", event.kind);
            found.push(facts.violation("schema_valid", index, detail));
        }
    }
    capped(found)
}

/// Validate a response against the first pending method of its id that it fits (or without a
/// method when none is pending); the others stay pending.
fn validate_response(
    facts: &Facts<'_>,
    msg: &Value,
    mut pending: Vec<String>,
    methods: &mut BTreeMap<String, Vec<String>>,
    id: String,
) -> Result<(), String> {
    let fits = |m: &String| facts.schema.validate_server_message(msg, Some(m)).is_ok();
    let result = match pending.iter().position(fits) {
        Some(at) => {
            pending.remove(at);
            Ok(())
        }
        None => facts
            .schema
            .validate_server_message(msg, pending.first().map(String::as_str)),
    };
    if !pending.is_empty() {
        methods.insert(id, pending);
    }
    result
}

/// How much of `[from, to]` the `windows` cover, overlapping windows counted once.
fn covered_ms(windows: impl Iterator<Item = (u64, u64)>, from: u64, to: u64) -> u64 {
    let mut windows: Vec<(u64, u64)> = windows.map(|(s, e)| (s.max(from), e.min(to))).filter(|(s, e)| s < e).collect();
    windows.sort_unstable();
    let (mut total, mut reached) = (0, from);
    for (start, end) in windows {
        total += end.saturating_sub(start.max(reached));
        reached = reached.max(end);
    }
    total
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
