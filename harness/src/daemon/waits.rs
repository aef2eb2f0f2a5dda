//! Bounded waits and path-additive time bounds (MODEL.md §2.3, §2.4, §4.2, §4.3; ORACLES.md §4):
//! how long each user action may wait, in each state the CLI can be in and along the whole path it
//! took. Every verdict rests on what the CLI sent and read and when (`cli.*`), on what the MCP
//! server received and answered for each request (`server.recv`, `server.send`) and on when the
//! daemon's response was on the wire (`daemon.reply`, written to the socket). The bounds are
//! MODEL.md §2.3's constants, restated here, never read from the CLI's own helpers.

use std::collections::BTreeMap;

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::checks::{action_of, Attempt, Facts};
use crate::check::{capped, message};
use crate::trace::{TraceEvent, Violation};
use crate::verdicts;

/// MODEL.md §2.3: `drain_timeout_ms`.
const DRAIN_MS: u64 = 60_000;
/// MODEL.md §2.3: the poll of every wait.
const POLL: u64 = 100;
/// MODEL.md §2.3: the budget of a control request (`status`, `stop`).
const STATUS_MS: u64 = 1_000;
/// MODEL.md §2.3: the wait after a stop.
const STOP_MS: u64 = 5_000;
/// MODEL.md §2.3: the wait after a launch.
const READY_MS: u64 = 10_000;
/// How long a client may wait for the start lock: its holder drains, stops and launches.
pub(super) const LOCK_MS: u64 = DRAIN_MS + STOP_MS + READY_MS + 3 * STATUS_MS;

/// The budget of one attempt's socket as the CLI must keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Budget {
    /// Re-armed by every frame that carries the attempt's own id.
    Idle(u64),
    /// From the send, never re-armed: a protocol-1 exchange, which gets no frames.
    Fixed(u64),
}

fn budget(facts: &Facts<'_>, attempt: &Attempt) -> Budget {
    if attempt.modern {
        Budget::Idle(facts.deadline_ms(attempt))
    } else {
        let call = attempt.timeout_ms.unwrap_or(facts.sdk_request_timeout_ms);
        Budget::Fixed(facts.oauth_timeout_ms + (facts.max_pages + 1) * call)
    }
}

/// Per attempt: the times the CLI heard its own request's frames on its own connection, judged
/// here from the frame's id and the connection that read it (not from the CLI's `matched`).
fn own_frames(facts: &Facts<'_>) -> BTreeMap<String, Vec<u64>> {
    let mut heard: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (_, event) in facts.trace.of_kind(kind::CLI_FRAME) {
        let frame = event.text("id");
        let on = event.text("on");
        let reader = if on.is_empty() { frame.clone() } else { on };
        if frame == reader {
            heard.entry(reader).or_default().push(event.at_ms);
        }
    }
    heard
}

/// When the daemon had written each request's response onto its socket.
fn responses(facts: &Facts<'_>) -> BTreeMap<String, u64> {
    let mut written = BTreeMap::new();
    for (_, event) in facts.trace.of_kind(kind::DAEMON_REPLY) {
        written.entry(event.text("id")).or_insert(event.at_ms);
    }
    written
}

/// The CLI events of one user action (frames aside), in order: the states it passed through.
fn steps<'a>(facts: &Facts<'a>) -> BTreeMap<u64, Vec<(usize, &'a TraceEvent)>> {
    let mut by_action: BTreeMap<u64, Vec<(usize, &TraceEvent)>> = BTreeMap::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        if event.host != host::CLI {
            continue;
        }
        let action = match event.kind.as_str() {
            kind::CLI_REPLY | kind::CLI_FAIL => action_of(&event.text("id")),
            kind::CLI_ACTION
            | kind::CLI_SEND
            | kind::CLI_RESTART
            | kind::CLI_DONE
            | kind::CLI_PROBE
            | kind::CLI_STOP
            | kind::CLI_LAUNCH
            | kind::CLI_REPLACE => Some(event.num("action")),
            _ => None,
        };
        if let Some(action) = action.filter(|a| *a != 0) {
            by_action.entry(action).or_default().push((index, event));
        }
    }
    by_action
}

/// How long the CLI may stay in the state an event put it in before its next step, or `None`
/// for an open request (judged by its socket budget) and the action's end.
fn state_bound_ms(kind: &str) -> Option<(u64, &'static str)> {
    let bound = match kind {
        // Find the daemon: launch under the lock or replace under it (lock wait, first probe),
        // or send at once.
        kind::CLI_ACTION | kind::CLI_REPLACE => (LOCK_MS + STATUS_MS + POLL, "finding a daemon"),
        // The answer settles the attempt: the action ends or restarts at once.
        kind::CLI_REPLY | kind::CLI_FAIL => (0, "after its attempt ended"),
        // The lock, then the first probe, or (no daemon to probe) the stop wait and a launch.
        kind::CLI_RESTART => (
            LOCK_MS + STATUS_MS + STOP_MS + 2 * POLL,
            "restarting the daemon",
        ),
        // The next poll and its status budget, or the stop right after an idle probe.
        kind::CLI_PROBE => (POLL + STATUS_MS, "draining"),
        // The stop's budget, then a poll and a probe (refused) or the wait for the daemon to go.
        kind::CLI_STOP => (STATUS_MS + STOP_MS + 2 * POLL, "after a stop"),
        // The ready wait.
        kind::CLI_LAUNCH => (READY_MS + POLL, "waiting for a launched daemon"),
        _ => return None,
    };
    Some(bound)
}

/// Bounded waits in every state: the CLI never waits past the bound of the state it is in, as
/// its own observations show —
/// - an open request ends within its socket budget after the last frame that carried its own id
///   on its own connection (frames for other requests re-arm nothing), or within the fixed
///   budget from the send for a protocol-1 exchange; and a budget that expires (`idle`,
///   `budget`) was waited in full: a CLI that gives up sooner fails a request its daemon may
///   still have answered;
/// - once the daemon's response is on the wire, the request ends at once, even on a connection
///   the daemon keeps open after it;
/// - after an attempt ends, a stop, a launch, a probe, a restart or a replacement, the action
///   takes its next step within that state's documented wait (lock, drain poll, stop wait,
///   ready wait), and an action that never takes it is stuck;
/// - a drain refused as busy ends within one drain timeout of its first probe, plus the last
///   poll's budget and the refused stops'.
pub fn bounded_waits(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let slack = facts.slack_ms;
    let frames = own_frames(facts);
    let written = responses(facts);
    for attempt in &facts.attempts {
        let end = attempt.end.as_ref();
        let end_ms = end.map_or(facts.horizon_ms, |e| e.at_ms);
        let index = end.map_or(attempt.index, |e| e.index);
        let heard = frames.get(&attempt.id).map_or(&[][..], Vec::as_slice);
        let late = match budget(facts, attempt) {
            Budget::Idle(ms) => {
                let mut times: Vec<u64> = std::iter::once(attempt.at_ms)
                    .chain(heard.iter().copied().filter(|at| *at <= end_ms))
                    .collect();
                times.push(end_ms);
                let gap = times.windows(2).map(|w| w[1].saturating_sub(w[0])).max();
                gap.filter(|g| *g > ms + slack)
                    .map(|g| format!("heard nothing of its own for {g} ms, past its {ms} ms idle budget"))
            }
            Budget::Fixed(ms) => {
                let took = end_ms.saturating_sub(attempt.at_ms);
                (took > ms + slack).then(|| {
                    format!("stayed open {took} ms, past its fixed {ms} ms budget")
                })
            }
        };
        let early = end.filter(|e| e.expired()).and_then(|e| {
            let (from, ms, kind) = match budget(facts, attempt) {
                Budget::Idle(ms) => {
                    let last = heard.iter().copied().filter(|at| *at <= e.at_ms);
                    (last.fold(attempt.at_ms, u64::max), ms, "idle")
                }
                Budget::Fixed(ms) => (attempt.at_ms, ms, "fixed"),
            };
            let waited = e.at_ms.saturating_sub(from);
            (waited + slack < ms).then(|| format!("gave up after {waited} ms of its {ms} ms {kind} budget"))
        });
        if let Some(problem) = late.or(early) {
            let detail = format!("{} {} {problem}", attempt.method, attempt.id);
            found.push(facts.violation("bounded_waits", index, detail));
            continue;
        }
        let lingered = written.get(&attempt.id).filter(|&&on_wire| on_wire >= attempt.at_ms && end_ms > on_wire + slack);
        if let Some(on_wire) = verdicts::judging(lingered) {
            let detail = format!(
                "{} {}'s response was on the wire at {on_wire} ms, yet the request stayed \
                 open until {end_ms} ms",
                attempt.method, attempt.id
            );
            found.push(facts.violation("bounded_waits", index, detail));
        }
    }
    for (action, steps) in steps(facts) {
        for (n, (index, event)) in steps.iter().enumerate() {
            let Some((bound, state)) = state_bound_ms(&event.kind) else {
                continue;
            };
            let next = steps.get(n + 1);
            let next_ms = next.map_or(facts.horizon_ms, |(_, e)| e.at_ms);
            let waited = next_ms.saturating_sub(event.at_ms);
            if waited <= bound + slack {
                verdicts::held();
            } else {
                let what = next.map_or_else(
                    || "and never took its next step".to_string(),
                    |(_, e)| format!("before its next step ({})", e.kind),
                );
                let detail = format!(
                    "action {action} waited {waited} ms {state} (from {} at {} ms) {what}; the \
                     bound is {bound} ms",
                    event.kind, event.at_ms
                );
                let at = next.map_or(*index, |(i, _)| *i);
                found.push(facts.violation("bounded_waits", at, detail));
                break;
            }
        }
        found.extend(drain_bounds(facts, action, &steps));
    }
    capped(found)
}

/// A refusal after a drain comes within one drain timeout of the replacement's first probe,
/// plus the poll and budget of the probe that found the time up, plus each refused stop's.
fn drain_bounds(facts: &Facts<'_>, action: u64, steps: &[(usize, &TraceEvent)]) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut first_probe: Option<u64> = None;
    let mut stops = 0u64;
    for (index, event) in steps {
        match event.kind.as_str() {
            kind::CLI_PROBE => {
                first_probe.get_or_insert(event.at_ms);
            }
            kind::CLI_STOP => stops += 1,
            kind::CLI_REPLACE => {
                let busy = event.text("outcome") == "refused"
                    && event.text("message").contains("in flight");
                if let (true, Some(from)) = (busy, first_probe) {
                    let bound = DRAIN_MS + POLL + STATUS_MS + stops * (STATUS_MS + POLL);
                    let took = event.at_ms.saturating_sub(from);
                    if took <= bound + facts.slack_ms {
                        verdicts::held();
                    } else {
                        let detail = format!(
                            "action {action} drained pid {} for {took} ms before refusing; a \
                             drain lasts at most {DRAIN_MS} ms (bound {bound} ms with its polls)",
                            event.num("pid")
                        );
                        found.push(facts.violation("bounded_waits", *index, detail));
                    }
                }
                first_probe = None;
                stops = 0;
            }
            kind::CLI_RESTART | kind::CLI_ACTION => {
                first_probe = None;
                stops = 0;
            }
            _ => {}
        }
    }
    found
}

/// What the MCP server shows of one request's path: whether it asked for authorization (a 401),
/// and how many listing pages and handshakes (`initialize`) it was asked for: an SDK's
/// per-request timeout bounds each.
#[derive(Debug, Default, Clone, Copy)]
struct Upstream {
    unauthorized: bool,
    pages: u64,
    handshakes: u64,
}

fn upstream_paths(facts: &Facts<'_>) -> BTreeMap<String, Upstream> {
    let mut paths: BTreeMap<String, Upstream> = BTreeMap::new();
    for event in facts.trace.events.iter().filter(|e| e.host == host::MCP) {
        let request = event.text("request");
        if request.is_empty() {
            continue;
        }
        let path = paths.entry(request).or_default();
        match event.kind.as_str() {
            kind::SERVER_RECV => {
                let msg: Value = message(event);
                match msg.get("method").and_then(Value::as_str) {
                    Some("tools/list") => path.pages += 1,
                    Some("initialize") => path.handshakes += 1,
                    _ => {}
                }
            }
            kind::SERVER_SEND if event.num("status") == 401 => path.unauthorized = true,
            _ => {}
        }
    }
    paths
}

/// The longest one attempt may take along the path the boundaries show: for `listTools`, the
/// OAuth wait if the server asked for authorization, each page and handshake it was asked for
/// (an unanswered `initialize` ends at the per-request timeout as a page does), then one idle
/// budget; for a fixed-phase method, its ceiling and one idle budget (a ceiling answer a stalled
/// daemon cannot write); for a protocol-1 exchange, its fixed budget.
fn attempt_bound_ms(facts: &Facts<'_>, attempt: &Attempt, path: Upstream) -> u64 {
    let slack = facts.slack_ms;
    let idle = match budget(facts, attempt) {
        Budget::Fixed(ms) => return ms + slack,
        Budget::Idle(ms) => ms,
    };
    match attempt.method.as_str() {
        "listTools" => {
            let oauth = if path.unauthorized {
                attempt.timeout_ms.unwrap_or(facts.oauth_timeout_ms)
            } else {
                0
            };
            let page = attempt.timeout_ms.unwrap_or(facts.sdk_request_timeout_ms);
            oauth + (path.pages + path.handshakes) * (page + slack) + idle + 2 * slack
        }
        "callTool" | "listResources" | "readResource" | "closeServer" => {
            facts.ceiling_ms(attempt) + idle + 2 * slack
        }
        _ => idle + slack,
    }
}

/// The faults that hold a path's step past its own bound while they last: a stall holds the
/// daemon's answers, a hang the old daemon's exit a replacement waits on, a stale lock the lock
/// wait. A crash, a reset or crossed frames act through a step the path already counts (the
/// attempt they end, within its idle budget, and the retry after it). (Until issue #28's last
/// round, the time any disruption was in effect extended the bound.)
const PATH_HOLDERS: &[&str] = &["daemon_stall", "process_hang", "stale_lock"];

/// User-level outcome, path-additive: every action ends within the sum of the bounds of the path
/// it took — each attempt's (OAuth wait, pages, ceiling, idle budget), each replacement's (lock
/// wait, drain, stop wait, launch, ready wait), each plain launch's (lock wait, ready wait) — plus
/// the time a fault of `PATH_HOLDERS` was in effect while the action was open, read from what
/// the CLI did and what the MCP server was asked, not from the daemon's events.
pub fn action_within_its_path(facts: &Facts<'_>) -> Vec<Violation> {
    let paths = upstream_paths(facts);
    let mut found = Vec::new();
    for (action, steps) in steps(facts) {
        let Some(start) = facts.actions.iter().find(|a| a.action == action) else {
            continue;
        };
        let end = start.end_ms.unwrap_or(facts.horizon_ms);
        let mut bound = facts.held_by_ms(PATH_HOLDERS, start.start_ms, end) + facts.slack_ms;
        for (n, (_, event)) in steps.iter().enumerate() {
            // A state's wait counts as far as the next step came, up to its own bound (a longer
            // one is `bounded_waits`'s to name): the lock and ready waits are only as long as
            // the path made them.
            let gap = steps
                .get(n + 1)
                .map_or(u64::MAX, |(_, next)| next.at_ms.saturating_sub(event.at_ms));
            bound += match event.kind.as_str() {
                kind::CLI_SEND => {
                    let id = event.text("id");
                    let path = paths.get(&id).copied().unwrap_or_default();
                    facts
                        .attempts
                        .iter()
                        .find(|a| a.id == id)
                        .map_or(0, |a| attempt_bound_ms(facts, a, path))
                }
                other => state_bound_ms(other)
                    .map_or(facts.slack_ms, |(ms, _)| gap.min(ms + facts.slack_ms)),
            };
        }
        let took = end.saturating_sub(start.start_ms);
        if took <= bound {
            verdicts::held();
        } else {
            let index = steps.last().map_or(0, |(i, _)| *i);
            let ended = if start.end_ms.is_some() { "took" } else { "was still open after" };
            let detail = format!(
                "action {action} {ended} {took} ms; the path it took ({} steps) allows {bound} ms",
                steps.len()
            );
            found.push(facts.violation("action_within_its_path", index, detail));
        }
    }
    capped(found)
}

/// One restart-and-retry (MODEL.md §2.4): an action sends at most two requests; the second only
/// after the first ended in a transport failure (or a runtime error that reads like a timeout,
/// which a wrapper cannot tell from one), never after `operation_timeout`, a success or another
/// daemon error; and a first transport failure is retried unless the restart was refused.
pub fn one_retry(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut by_action: BTreeMap<u64, Vec<&Attempt>> = BTreeMap::new();
    for attempt in &facts.attempts {
        by_action.entry(attempt.action).or_default().push(attempt);
    }
    for (action, attempts) in &by_action {
        let flagged = found.len();
        if let Some(third) = attempts.get(2) {
            let detail = format!("action {action} sent {} requests (one retry at most)", attempts.len());
            found.push(facts.violation("one_retry", third.index, detail));
            continue;
        }
        let (first, second) = (attempts[0], attempts.get(1));
        let first_end = first.end.as_ref();
        if let (Some(second), Some(end)) = (second, first_end) {
            let retryable = end.transport || end.code == "runtime_error";
            if !retryable {
                let detail = format!(
                    "action {action} retried after {} ended {:?}, which is final",
                    first.id,
                    if end.ok { "ok" } else { end.code.as_str() }
                );
                found.push(facts.violation("one_retry", second.index, detail));
            }
        }
        if let (None, Some(end)) = (second, first_end.filter(|e| e.transport)) {
            let done = facts
                .trace
                .of_kind(kind::CLI_DONE)
                .find(|(_, e)| e.num("action") == *action);
            if let Some((index, done)) = done {
                let outcome = done.text("outcome");
                if outcome != "refused" && outcome != "daemon_busy" {
                    let detail = format!(
                        "action {action} gave up after one transport failure ({}) with {outcome:?} \
                         without the restart-and-retry",
                        end.code
                    );
                    found.push(facts.violation("one_retry", index, detail));
                }
            }
        }
        if found.len() == flagged {
            verdicts::held();
        }
    }
    capped(found)
}

/// The workload happened (ORACLES.md §4): every invocation the scenario scheduled (`run.spec`'s
/// `invocations`) shows up as a `cli.action` and ends with a `cli.done`, and the end-of-run
/// report was taken. A run in which the CLI did less than it was asked is a violation, never a
/// pass.
pub fn workload_happened(facts: &Facts<'_>) -> Vec<Violation> {
    let Some(spec) = facts.trace.first(kind::RUN_SPEC) else {
        return Vec::new();
    };
    let Some(scheduled) = spec.get("invocations").and_then(Value::as_u64) else {
        return Vec::new();
    };
    let last = facts.trace.events.len().saturating_sub(1);
    let started = facts.actions.len() as u64;
    let ended = facts.actions.iter().filter(|a| a.end_ms.is_some()).count() as u64;
    let mut found = Vec::new();
    if started != scheduled || ended != scheduled {
        let detail = format!(
            "the scenario scheduled {scheduled} invocations; the CLI started {started} and ended \
             {ended}"
        );
        found.push(facts.violation("workload_happened", last, detail));
    }
    if scheduled > 0 && facts.trace.first(kind::CLI_SETTLED).is_none() && ended == scheduled {
        let detail = "every invocation ended, but the CLI took no end-of-run report".to_string();
        found.push(facts.violation("workload_happened", last, detail));
    }
    if found.is_empty() {
        verdicts::held();
    }
    found
}
