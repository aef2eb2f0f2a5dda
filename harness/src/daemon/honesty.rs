//! The daemon's self-reports held against the boundaries (MODEL.md §4.11, §4.12, ORACLES.md §1,
//! §3, §4): what `status` says, why a replacement was refused, what is left when the run settles,
//! and what the user gets once faults have healed. Every verdict rests on what the CLIs sent and
//! read (`cli.send` with the pid it went to, `cli.reply`, `cli.fail`, `cli.probe`, the end-of-run
//! `cli.report` and `cli.settled`) and on what the MCP server received and answered
//! (`server.recv`, `server.send`, `server.gone`, each naming the daemon request); the daemon's own
//! events only explain.

use std::collections::{BTreeMap, BTreeSet};

use bridge_under_test::daemon::config::{POLL_MS, STATUS_TIMEOUT_MIN_MS};
use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::checks::{Attempt, Facts};
use crate::check::capped;
use crate::trace::{TraceEvent, Violation};
use crate::verdicts;

/// A time that never comes: the request may still be in flight at the end of the run.
const NEVER: u64 = u64::MAX;

/// The fault kinds after which, once healed, a correct daemon serves every later action: they
/// disturb the daemon process, not the peers' answers or the caller's deadline.
/// A short-lived token is one: a correct daemon refreshes it without the user.
const HEALABLE: &[&str] = &[
    "daemon_stall",
    "daemon_crash",
    "process_hang",
    "stale_lock",
    "socket_reset",
    "config_edit",
    "token_expiry",
    "keep_open",
    "crossed_frames",
    "heal",
];

/// Per daemon request, what the MCP server shows of its upstream work: messages received and
/// not yet answered (or dropped), and when the last one was answered or dropped.
fn upstream(facts: &Facts<'_>) -> BTreeMap<String, (i64, u64)> {
    let mut work: BTreeMap<String, (i64, u64)> = BTreeMap::new();
    for event in facts.trace.events.iter().filter(|e| e.host == host::MCP) {
        let request = event.text("request");
        if request.is_empty() {
            continue;
        }
        let entry = work.entry(request).or_default();
        match event.kind.as_str() {
            kind::SERVER_RECV => entry.0 += 1,
            kind::SERVER_SEND | kind::SERVER_GONE => {
                entry.0 -= 1;
                entry.1 = entry.1.max(event.at_ms);
            }
            _ => {}
        }
    }
    work
}

/// The observations a status is judged against.
struct Story<'f, 'a> {
    facts: &'f Facts<'a>,
    upstream: BTreeMap<String, (i64, u64)>,
}

impl<'f, 'a> Story<'f, 'a> {
    fn new(facts: &'f Facts<'a>) -> Self {
        Self {
            facts,
            upstream: upstream(facts),
        }
    }

    /// When the upstream work the MCP server saw for `id` had all ended (0 when there was none).
    fn upstream_end(&self, id: &str) -> u64 {
        match self.upstream.get(id) {
            Some((open, _)) if *open > 0 => NEVER,
            Some((_, last)) => *last,
            None => 0,
        }
    }

    /// The longest a correct daemon may keep working for a request whose client went away
    /// without closing it at the daemon: the OAuth wait and every page (or the ceiling's call),
    /// plus `held_ms`, the time faults held that work still.
    fn work_bound_ms(&self, attempt: &Attempt, held_ms: u64) -> u64 {
        let facts = self.facts;
        let call = facts.deadline_ms(attempt).max(facts.sdk_request_timeout_ms);
        facts.oauth_timeout_ms + (facts.max_pages + 1) * call + held_ms + facts.slack_ms
    }

    /// The latest time the daemon may still count `attempt` as in flight: its answer (the daemon
    /// stops counting before it writes it); for a connection the daemon dropped (`reset`), once
    /// its upstream work has ended; for one the client gave up on, once the work could have ended.
    fn closed_ms(&self, attempt: &Attempt) -> u64 {
        let Some(end) = &attempt.end else {
            return NEVER;
        };
        if !end.transport || end.code == "refused" {
            return end.at_ms;
        }
        let upstream = self.upstream_end(&attempt.id).max(end.at_ms);
        if end.code == "reset" {
            upstream
        } else {
            // A stall of the daemon while the work could still run held it that much longer;
            // one after the work could have ended held nothing (the bound grows with each stall
            // inside it, until no further stall falls within).
            let mut stalled = 0;
            loop {
                let until = attempt.at_ms.saturating_add(self.work_bound_ms(attempt, stalled));
                let held = self.facts.stalled_ms(attempt.at_ms, until);
                if held == stalled {
                    break upstream.max(until);
                }
                stalled = held;
            }
        }
    }

    /// The user requests at `pid` that may have been in flight at some moment in `[from, to]`.
    fn possible(&self, pid: u64, from: u64, to: u64) -> Vec<&'f Attempt> {
        let slack = self.facts.slack_ms;
        self.facts
            .attempts
            .iter()
            .filter(|a| a.pid == pid && a.at_ms <= to)
            .filter(|a| self.closed_ms(a).saturating_add(slack) >= from)
            .collect()
    }

    /// The user requests at `pid` certainly in flight throughout `[from, to]`: read by then,
    /// answered (not dropped) well after, with no fault that could have delayed the answer's
    /// delivery after the daemon stopped counting it: a stall (the daemon's writes wait it out)
    /// or crossed frames. A crash or a reset ends the answer instead (a transport end, not
    /// counted here), and a hang or a stale lock holds no written answer. (Until issue #28's
    /// last round, any disruption did.)
    fn certain(&self, pid: u64, from: u64, to: u64) -> usize {
        let facts = self.facts;
        let slack = facts.slack_ms;
        let undisturbed = |until: u64| facts.held_by_ms(&["daemon_stall", "crossed_frames"], from.saturating_sub(slack), until) == 0;
        facts
            .attempts
            .iter()
            .filter(|a| a.pid == pid && a.at_ms + slack <= from)
            .filter(|a| {
                a.end
                    .as_ref()
                    .is_some_and(|e| !e.transport && e.at_ms > to + slack && undisturbed(e.at_ms))
            })
            .count()
    }

    /// Other clients' control requests (`status`, `stop`) that may have overlapped `[from, to]`:
    /// the daemon counts them too while it serves them.
    fn controls(&self, asker: u64, from: u64, to: u64) -> usize {
        let window = STATUS_TIMEOUT_MIN_MS;
        self.facts
            .trace
            .events
            .iter()
            .filter(|e| e.host == host::CLI && e.num("action") != asker)
            .filter(|e| match e.kind.as_str() {
                kind::CLI_PROBE => e.at_ms >= from && e.at_ms <= to + window,
                kind::CLI_STOP => e.at_ms + window >= from && e.at_ms <= to,
                _ => false,
            })
            .count()
    }
}

/// A status reply the CLI read: (trace index, event, pid, the `activeRequests` it said, asker).
fn statuses<'a>(facts: &'a Facts<'_>) -> Vec<(usize, &'a TraceEvent, u64, u64, u64)> {
    facts
        .trace
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.host == host::CLI)
        .filter(|(_, e)| match e.kind.as_str() {
            kind::CLI_PROBE => true,
            kind::CLI_REPORT => e.get("answered") == Some(&Value::Bool(true)),
            _ => false,
        })
        .filter_map(|(index, e)| {
            let active = e.text("active").parse::<u64>().ok()?;
            let pid = e.num("pid");
            (pid != 0).then_some((index, e, pid, active, e.num("action")))
        })
        .collect()
}

/// Honest status: every `activeRequests` a CLI read equals the number of other requests that
/// daemon really had in flight as the CLI saw them (sent to its socket and not yet answered, or
/// dropped with upstream work still running at the MCP server, or abandoned by their client
/// while the work could still run), plus other clients' control requests at that moment.
/// The status was computed at some moment within the status budget before the CLI read it.
pub fn honest_status(facts: &Facts<'_>) -> Vec<Violation> {
    let story = Story::new(facts);
    let mut found = Vec::new();
    for (index, event, pid, active, asker) in statuses(facts) {
        let to = event.at_ms;
        let from = to.saturating_sub(STATUS_TIMEOUT_MIN_MS);
        let possible = story.possible(pid, from, to);
        let upper = possible.len() + story.controls(asker, from, to);
        let lower = story.certain(pid, from, to);
        let detail = if active > upper as u64 {
            let ids: Vec<&str> = possible.iter().map(|a| a.id.as_str()).collect();
            format!(
                "pid {pid}'s status read at {to} ms said {active} other requests were in flight; \
                 at most {upper} could be (requests [{}])",
                ids.join(", ")
            )
        } else if active < lower as u64 {
            format!(
                "pid {pid}'s status read at {to} ms said {active} other requests were in flight; \
                 at least {lower} were"
            )
        } else {
            verdicts::held();
            continue;
        };
        found.push(facts.violation("honest_status", index, detail));
    }
    capped(found)
}

/// Justified refusals: a replacement refused because the daemon stayed busy had a user request
/// really in flight at that daemon when the drain's last probe read it busy (an absent
/// `activeRequests`, protocol 1, counts as busy by the spec), and the refusal is final: the
/// action sends nothing more and ends `daemon_busy`.
pub fn justified_refusal(facts: &Facts<'_>) -> Vec<Violation> {
    let story = Story::new(facts);
    let mut found = Vec::new();
    let events = &facts.trace.events;
    for (index, event) in facts.trace.of_kind(kind::CLI_REPLACE) {
        if event.text("outcome") != "refused" || !event.text("message").contains("in flight") {
            continue;
        }
        let action = event.num("action");
        let last_probe = events[..index]
            .iter()
            .rev()
            .find(|e| e.kind == kind::CLI_PROBE && e.num("action") == action);
        let mut problems = Vec::new();
        if let Some(probe) = last_probe {
            let (pid, to) = (probe.num("pid"), probe.at_ms);
            let from = to.saturating_sub(STATUS_TIMEOUT_MIN_MS);
            let said = probe.text("active");
            if !said.is_empty() && pid != 0 && story.possible(pid, from, to).is_empty() {
                problems.push(format!(
                    "its last probe at {to} ms read pid {pid} busy ({said}) with no user request \
                     in flight there"
                ));
            }
        }
        let later = &events[index + 1..];
        let resent = later
            .iter()
            .any(|e| e.kind == kind::CLI_SEND && e.num("action") == action);
        if resent {
            problems.push("the action sent another request after it".to_string());
        }
        let done = later
            .iter()
            .find(|e| e.kind == kind::CLI_DONE && e.num("action") == action);
        if let Some(done) = done.filter(|d| d.text("outcome") != "daemon_busy") {
            problems.push(format!("the action ended {:?}", done.text("outcome")));
        }
        if problems.is_empty() {
            verdicts::held();
        } else {
            let detail = format!(
                "action {action}'s refusal to replace pid {}: {}",
                event.num("pid"),
                problems.join("; ")
            );
            found.push(facts.violation("justified_refusal", index, detail));
        }
    }
    capped(found)
}

/// The end-of-run report shows what settled only if it began a superseded daemon's exit poll
/// ([`POLL_MS`]) or more after both the heal and the CLIs' last act: an earlier one reads a
/// daemon on its way out as live, and a leftover as "still settling", so every verdict drawn from
/// it would be void. Its first record (`cli.report`, or `cli.settled` when no daemon was live)
/// is read, not the CLI's own claim of having waited.
fn report_too_early(facts: &Facts<'_>, heal_ms: u64) -> Option<Violation> {
    let events = &facts.trace.events;
    let began = events.iter().position(|e| e.kind == kind::CLI_REPORT || e.kind == kind::CLI_SETTLED)?;
    let last_act = events[..began].iter().filter(|e| e.host == host::CLI).map(|e| e.at_ms).max();
    let (since, what) = match last_act {
        Some(act) if act > heal_ms => (act, "the CLIs' last act"),
        _ => (heal_ms, "the heal"),
    };
    let at = events[began].at_ms;
    (at < since + POLL_MS).then(|| {
        let detail = format!(
            "the end-of-run report began at {at} ms, {} ms after {what} at {since} ms: before a superseded daemon's exit poll ({POLL_MS} ms) could run, it cannot show what settled",
            at - since
        );
        facts.violation("quiescence", began, detail)
    })
}

/// Quiescence: in the end-of-run report, after heal and settle, every live daemon answers
/// `status` and is idle unless a user request may still be in flight there, the metadata file
/// names a live daemon (or one that crashed and could not clean up), and no lock file is held.
pub fn quiescence(facts: &Facts<'_>) -> Vec<Violation> {
    let Some((settled_index, settled)) = facts.trace.of_kind(kind::CLI_SETTLED).last() else {
        return Vec::new();
    };
    let heal_ms = facts.trace.events[..settled_index]
        .iter()
        .filter(|e| e.kind == kind::FAULT_INJECTED && e.text("fault") == "heal")
        .map(|e| e.at_ms)
        .max();
    let Some(heal_ms) = heal_ms else {
        return Vec::new();
    };
    let story = Story::new(facts);
    let mut found: Vec<Violation> = verdicts::judging(report_too_early(facts, heal_ms)).into_iter().collect();
    let still_live: Vec<u64> = settled
        .text("live")
        .split(',')
        .filter_map(|p| p.parse().ok())
        .collect();
    for (index, event) in facts.trace.of_kind(kind::CLI_REPORT) {
        let pid = event.num("pid");
        let to = event.at_ms;
        let detail = if event.get("answered") != Some(&Value::Bool(true)) {
            // A daemon that exited while the report asked it (a superseded one) owes no answer.
            if !still_live.contains(&pid) {
                continue;
            }
            format!("live pid {pid} did not answer status after the run settled")
        } else {
            let active = event.text("active").parse::<u64>().unwrap_or(0);
            let from = to.saturating_sub(STATUS_TIMEOUT_MIN_MS);
            if active == 0 || !story.possible(pid, from, to).is_empty() {
                verdicts::held();
                continue;
            }
            format!("pid {pid} reported {active} requests in flight after the run settled")
        };
        found.push(facts.violation("quiescence", index, detail));
    }
    // The settled machine (its metadata file and lock files) is one more verdict.
    let reported = found.len();
    // The report's metadata, held against the filesystem's record of the file.
    let metadata = settled.num("metadata");
    let recorded = facts.trace.events[..settled_index]
        .iter()
        .filter(|e| e.kind == kind::MACHINE_METADATA)
        .fold(None, super::lifecycle::metadata_after)
        .unwrap_or(0);
    if recorded != metadata {
        let detail = format!(
            "the end-of-run report says the metadata file names pid {metadata}; the filesystem's record says {recorded}"
        );
        found.push(facts.violation("quiescence", settled_index, detail));
    }
    let live = settled.text("live");
    let alive = live.split(',').any(|p| p == metadata.to_string());
    let crashed = facts
        .trace
        .of_kind(kind::DAEMON_EXIT)
        .any(|(_, e)| e.num("pid") == metadata && e.text("reason") == "crash");
    if metadata != 0 && !alive && !crashed {
        let detail = format!("the metadata file names pid {metadata}, which is not running");
        found.push(facts.violation("quiescence", settled_index, detail));
    }
    // A lock file the `stale_lock` fault's killed CLI left stays until someone needs the lock
    // (`lock_waits_justified` judges that wait); one the run's own CLIs left is a leak.
    let strays: Vec<String> = facts
        .trace
        .of_kind(kind::MACHINE_LOCK)
        .filter(|(_, e)| e.host == host::SIM && e.text("op") == "take")
        .map(|(_, e)| e.num("holder").to_string())
        .collect();
    let locks = settled.text("locks");
    let leaked: Vec<&str> = locks
        .split(',')
        .filter(|l| !l.is_empty())
        .filter(|l| !l.rsplit_once('@').is_some_and(|(_, pid)| strays.iter().any(|s| s == pid)))
        .collect();
    if !leaked.is_empty() {
        let detail = format!("lock files still held after the run settled: {}", leaked.join(","));
        found.push(facts.violation("quiescence", settled_index, detail));
    }
    if found.len() == reported {
        verdicts::held();
    }
    capped(found)
}

/// User-level outcome after heal: when every fault of the run disturbed only the daemon
/// process (a stall, a crash, a reset, a config edit), every action that starts once they have
/// all happened and healed succeeds: no transport failure, no refusal — only an
/// `operation_timeout` (work longer than its ceiling), a refusal after a drain that met real work
/// (or a protocol-1 daemon, which cannot say it is idle), or a lock wait that such a drain ran
/// out, are outcomes a correct daemon gives there.
///
/// A fault of the peers (a wedged upstream, endless cursors, an approval never given) lasts past
/// the heal: after one, an action may fail through its upstream work, and that failure is
/// excused by the effect the servers' logs show on this action's own requests
/// ([`lasting_effect`]; 4.1 % of the actions on seed 2026 × 1 000, every one a listing whose
/// pages never ended; they are still judged by `executes_once`, `bounded_latency`,
/// `no_early_timeout` and `action_within_its_path`). A success is judged all the same, and a
/// failed connection to the daemon is no effect such a fault has.
pub fn after_heal_succeeds(facts: &Facts<'_>) -> Vec<Violation> {
    let injected: Vec<&TraceEvent> = facts
        .trace
        .of_kind(kind::FAULT_INJECTED)
        .map(|(_, e)| e)
        .collect();
    // A fault no heal undoes may fail an action after heal through its upstream work (below).
    let lasting = injected
        .iter()
        .any(|e| !HEALABLE.contains(&e.text("fault").as_str()));
    let last_fault = injected.iter().map(|e| e.at_ms).max().unwrap_or(0);
    let last_disruption = facts.disruptions().map(|(_, end)| end).max();
    let calm_from = last_fault.max(last_disruption.unwrap_or(0)) + facts.slack_ms;
    let story = Story::new(facts);
    let unknown = unknown_actions(facts);
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::CLI_DONE) {
        let action = event.num("action");
        let Some(start) = facts.actions.iter().find(|a| a.action == action) else {
            continue;
        };
        let outcome = event.text("outcome");
        // A method the daemon does not have succeeds nowhere (`unknown_methods_refused`); an
        // action that began before every fault had healed is not judged here.
        if unknown.contains_key(&action) || start.start_ms < calm_from {
            continue;
        }
        // The work itself may outlast its ceiling; `no_early_timeout` judges when it fired.
        let timed = outcome == "operation_timeout";
        // A drain that met real work (or a protocol-1 daemon, which cannot say it is idle) is
        // refused by design, and the start lock stays held through it, so others may time out
        // waiting for it.
        let unsaid = match outcome.as_str() {
            "daemon_busy" => drain_met_work(&story, action, index),
            "refused" => {
                let refusals = facts.trace.of_kind(kind::CLI_REPLACE);
                refusals
                    .filter(|(i, e)| *i < index && e.text("outcome") == "refused")
                    .any(|(i, e)| drain_met_work(&story, e.num("action"), i))
            }
            _ => false,
        };
        if outcome == "ok" || timed || unsaid {
            verdicts::held();
            continue;
        }
        // A lasting fault of the peers or the deadline fails an action through its upstream
        // work (a time-out, an error the server or the authorization flow gave), never by
        // tearing down the CLI's connection to a daemon that heal left healthy.
        if let Some(effect) = lasting_effect(facts, action).filter(|_| lasting && outcome != TRANSPORT) {
            verdicts::excused(effect);
            continue;
        }
        let detail = format!(
            "action {action} began at {} ms, after every fault had healed, and ended {:?}",
            start.start_ms,
            outcome
        );
        found.push(facts.violation("after_heal_succeeds", index, detail));
    }
    capped(found)
}

/// How a fault of the peers, which no heal undoes, failed `action`'s upstream work, as the
/// servers' logs show it for the action's daemon requests (`a<action>.<attempt>`): its listing
/// never ended (the last page the MCP server sent it still had a `nextCursor`: endless or
/// repeated cursors), an upstream message of it was never answered (a wedged method), or its
/// authorization flow began and was never granted a token (an approval delayed or never given).
/// `None` when the logs show none of these: the failure is the daemon's own.
fn lasting_effect(facts: &Facts<'_>, action: u64) -> Option<&'static str> {
    let prefix = format!("a{action}.");
    let mine = |e: &&TraceEvent| e.text("request").starts_with(&prefix) || e.text("id").starts_with(&prefix);
    let mcp = || facts.trace.events.iter().filter(|e| e.host == host::MCP).filter(mine);
    let sent: Vec<Value> = mcp().filter(|e| e.kind == kind::SERVER_SEND).filter_map(|e| serde_json::from_str(&e.text("msg")).ok()).collect();
    if sent.last().is_some_and(|last| last.pointer("/result/nextCursor").is_some()) {
        return Some(CURSORS_NEVER_ENDED);
    }
    let answered: BTreeSet<String> = sent.iter().filter_map(|msg| msg.get("id").map(Value::to_string)).collect();
    let unanswered = mcp().filter(|e| e.kind == kind::SERVER_RECV).filter_map(|e| serde_json::from_str::<Value>(&e.text("msg")).ok()).any(|msg| msg.get("method").is_some() && msg.get("id").is_some_and(|id| !answered.contains(&id.to_string())));
    if unanswered {
        return Some(WEDGED);
    }
    let oauth = facts.trace.events.iter().filter(|e| e.kind == kind::DAEMON_OAUTH).filter(mine);
    let (begun, granted): (Vec<_>, Vec<_>) = oauth.map(|e| (e.text("phase"), e.text("state"))).partition(|(phase, _)| phase == "start");
    if begun.iter().any(|(_, state)| !granted.iter().any(|(phase, granted)| phase == "token" && granted == state)) {
        return Some(NEVER_AUTHORIZED);
    }
    None
}

/// The MCP server's pages for the action never ended (`endless_cursors`, `repeated_cursor`).
const CURSORS_NEVER_ENDED: &str = "a cursor fault kept its listing from ending";
/// The MCP server never answered an upstream message of the action (`wedged_method`).
const WEDGED: &str = "the server never answered an upstream message of it (a wedged method)";
/// The action's authorization flow never got its token (`approval_delay`, `approval_never`).
const NEVER_AUTHORIZED: &str = "its authorization was never granted (an approval delayed or never given)";

/// The outcome of an action whose connection to its daemon failed.
const TRANSPORT: &str = "transport";

/// Whether `action`'s last drain probe before trace index `before` read a daemon that does not
/// report `activeRequests` (protocol 1), or one with a user request possibly in flight.
fn drain_met_work(story: &Story<'_, '_>, action: u64, before: usize) -> bool {
    let probe = story.facts.trace.events[..before]
        .iter()
        .rev()
        .find(|e| e.kind == kind::CLI_PROBE && e.num("action") == action);
    probe.is_some_and(|probe| {
        let (pid, to) = (probe.num("pid"), probe.at_ms);
        let from = to.saturating_sub(STATUS_TIMEOUT_MIN_MS);
        pid != 0 && (probe.text("active").is_empty() || !story.possible(pid, from, to).is_empty())
    })
}

/// No orphaned work: the MCP server receives nothing for a user request once the CLI has read
/// the daemon's answer to it, nor later than a correct daemon could still be working on it (the
/// OAuth wait and every page, or the ceiling's call, plus the time the daemon was stalled
/// between the send and the message, from the send): work for a request that has ended must end
/// with it. Only a stall holds the daemon's upstream work (its event loop, machine-wide knob);
/// a crash ends that work, a reset or crossed frames act on the CLI's connection, a hang on a
/// daemon whose run has ended, a stale lock on launches. (Until issue #28's last round, the time
/// any of those was in effect extended the bound.)
pub fn no_orphaned_work(facts: &Facts<'_>) -> Vec<Violation> {
    let story = Story::new(facts);
    let by_id: BTreeMap<&str, &Attempt> = facts.attempts.iter().map(|a| (a.id.as_str(), a)).collect();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::SERVER_RECV) {
        let request = event.text("request");
        let Some(attempt) = by_id.get(request.as_str()) else {
            continue;
        };
        let at = event.at_ms;
        let answered = attempt
            .end
            .as_ref()
            .filter(|e| !e.transport)
            .map(|e| e.at_ms);
        let bound = attempt
            .at_ms
            .saturating_add(story.work_bound_ms(attempt, facts.stalled_ms(attempt.at_ms, at)));
        let detail = match answered {
            Some(end) if at > end + facts.slack_ms => format!(
                "the MCP server received a message for {request} at {at} ms, after the CLI read \
                 its answer at {end} ms"
            ),
            _ if at > bound => format!(
                "the MCP server received a message for {request} at {at} ms, later than any \
                 correct work for it sent at {} ms could run (until {bound} ms)",
                attempt.at_ms
            ),
            _ => {
                verdicts::held();
                continue;
            }
        };
        found.push(facts.violation("no_orphaned_work", index, detail));
    }
    capped(found)
}

/// What the MCP server did for one request that a correct daemon must give up on: a listing
/// whose server repeated a cursor or reached the page cap with a next cursor, or a JSON-RPC error
/// it answered.
fn upstream_refusals(facts: &Facts<'_>) -> BTreeMap<String, String> {
    let mut cursors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut causes: BTreeMap<String, String> = BTreeMap::new();
    for (_, event) in facts.trace.of_kind(kind::SERVER_SEND) {
        let request = event.text("request");
        let Ok(msg) = serde_json::from_str::<Value>(&event.text("msg")) else {
            continue;
        };
        if msg.get("error").is_some() {
            causes.entry(request.clone()).or_insert_with(|| "a JSON-RPC error".into());
        }
        if let Some(next) = msg.pointer("/result/nextCursor").and_then(Value::as_str) {
            let seen = cursors.entry(request.clone()).or_default();
            if seen.iter().any(|c| c == next) {
                causes.entry(request.clone()).or_insert_with(|| "a repeated cursor".into());
            }
            seen.push(next.to_string());
            if seen.len() as u64 >= facts.max_pages {
                causes.entry(request).or_insert_with(|| "the page cap".into());
            }
        }
    }
    causes
}

/// Errors have causes (ORACLES.md §2, MODEL.md §4.10): every daemon error a CLI reads for a user
/// request, besides `operation_timeout` (whose timing `no_early_timeout` judges), names something
/// that really happened to that request at the MCP server and that no correct daemon gets past:
/// a repeated cursor, the page cap, or an error the server answered. A 401 is not one (the
/// daemon refreshes or re-authorizes: OAuth is bounded, and its expiry is `operation_timeout`),
/// nor is an OAuth server's refusal (a correct daemon presents each code once, with its
/// verifier), nor an unparseable request (the CLI sends none). A method the protocol does not
/// have is its own cause (`unknown_methods_refused` judges those).
pub fn errors_have_causes(facts: &Facts<'_>) -> Vec<Violation> {
    let causes = upstream_refusals(facts);
    let mut found = Vec::new();
    for attempt in &facts.attempts {
        let Some(end) = attempt.end.as_ref().filter(|e| !e.ok && !e.transport) else {
            continue;
        };
        let unknown = !PROTOCOL_METHODS.contains(&attempt.method.as_str());
        if end.code == "operation_timeout" || unknown {
            continue;
        }
        if causes.contains_key(&attempt.id) {
            verdicts::held();
            continue;
        }
        let unauthorized = facts
            .trace
            .of_kind(kind::SERVER_SEND)
            .any(|(_, e)| e.text("request") == attempt.id && e.num("status") == 401);
        let hint = if unauthorized {
            " (the server had asked it to authorize)"
        } else {
            ""
        };
        let detail = format!(
            "{} {} ended {:?}, yet the MCP server refused nothing a correct daemon cannot get \
             past{hint}",
            attempt.method, attempt.id, end.code
        );
        found.push(facts.violation("errors_have_causes", end.index, detail));
    }
    capped(found)
}

/// The daemon protocol's methods (MODEL.md §2.2): any other is answered `unknown_method`.
const PROTOCOL_METHODS: &[&str] = &[
    "listTools",
    "callTool",
    "listResources",
    "readResource",
    "closeServer",
    "status",
    "stop",
];

/// Each action's method, as the CLI's `cli.action` names it.
fn action_methods(facts: &Facts<'_>) -> BTreeMap<u64, String> {
    facts
        .trace
        .of_kind(kind::CLI_ACTION)
        .map(|(_, e)| (e.num("action"), e.text("method")))
        .collect()
}

/// The actions whose method the daemon protocol does not have, with that method.
fn unknown_actions(facts: &Facts<'_>) -> BTreeMap<u64, String> {
    let mut methods = action_methods(facts);
    methods.retain(|_, method| !PROTOCOL_METHODS.contains(&method.as_str()));
    methods
}

/// Unknown methods are refused by the daemon itself: an action whose method the daemon protocol
/// does not have (a newer CLI's) never succeeds, causes no upstream work at the MCP server, and,
/// unless a disruption cut its attempts, ends `unknown_method`. An action the lifecycle guards
/// refused before any daemon heard it (it sent nothing, or only to a socket that refused the
/// connection or to a daemon that went before reading it) never asked a daemon: the lifecycle
/// checkers judge it.
/// Read from `cli.action`, `cli.send`, `cli.fail`, `cli.done` and the MCP server's `server.recv`.
pub fn unknown_methods_refused(facts: &Facts<'_>) -> Vec<Violation> {
    let unknown = unknown_actions(facts);
    // Asked: a daemon read one of its attempts (`daemon.request`). One sent to a socket that
    // refused it, or to a daemon that exited before reading it (stopped by another client's
    // replacement: daemon soak, `v1.daemon.none.90f1c584e71057af`), asked nobody.
    let asked: BTreeSet<u64> = facts
        .attempts
        .iter()
        .filter(|attempt| facts.effects.taken_by.contains_key(&attempt.id))
        .map(|attempt| attempt.action)
        .collect();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::SERVER_RECV) {
        let request = event.text("request");
        let action = request.starts_with('a').then(|| super::checks::action_of(&request)).flatten();
        if let Some(method) = action.and_then(|a| unknown.get(&a)) {
            let detail = format!("the MCP server received work for {method} {request}, a method the daemon does not have");
            found.push(facts.violation("unknown_methods_refused", index, detail));
        }
    }
    for (index, event) in facts.trace.of_kind(kind::CLI_DONE) {
        let action = event.num("action");
        let Some(method) = unknown.get(&action) else { continue };
        let outcome = event.text("outcome");
        let guarded = matches!(outcome.as_str(), "daemon_busy" | "refused") && !asked.contains(&action);
        if outcome == "unknown_method" || guarded {
            crate::verdicts::held();
        } else if let Some(mechanism) = (outcome != "ok").then(|| facts.cut_before(action, event.at_ms)).flatten() {
            crate::verdicts::excused(mechanism);
        } else {
            let detail = format!("action {action} ({method}, a method the daemon does not have) ended {outcome:?}");
            found.push(facts.violation("unknown_methods_refused", index, detail));
        }
    }
    capped(found)
}

/// The upstream MCP method a CLI method's success rests on (`closeServer`, `status` and `stop`
/// are answered by the daemon itself).
fn upstream_method(method: &str) -> Option<&'static str> {
    match method {
        "callTool" => Some("tools/call"),
        "readResource" => Some("resources/read"),
        "listResources" => Some("resources/list"),
        "listTools" => Some("tools/list"),
        _ => None,
    }
}

/// A success the user reads comes from the MCP server: every request the CLI reads `ok` for,
/// of a method that needs the server (`callTool`, `readResource`, `listResources`,
/// `listTools`), was sent to the server as that method under its request id, and the server
/// answered it with a result (HTTP 200, a JSON-RPC result with the id it was asked under). A
/// daemon that answers from nothing, or calls the wrong method, gives the user a result the
/// server never produced. Read from the CLI's `cli.action` and `cli.reply` and the MCP server's
/// `server.recv` and `server.send`.
pub fn successes_come_from_the_server(facts: &Facts<'_>) -> Vec<Violation> {
    let methods = action_methods(facts);
    // Per daemon request id: the JSON-RPC ids the server was asked each method under, and the
    // ids it answered with a result.
    let mut asked: BTreeMap<String, Vec<(String, Value)>> = BTreeMap::new();
    let mut answered: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for event in facts.trace.events.iter().filter(|e| e.host == host::MCP) {
        let msg = crate::check::message(event);
        let request = event.text("request");
        match event.kind.as_str() {
            kind::SERVER_RECV => {
                if let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id")) {
                    asked.entry(request).or_default().push((method.to_string(), id.clone()));
                }
            }
            kind::SERVER_SEND if event.num("status") == 200 && msg.get("result").is_some() => {
                if let Some(id) = msg.get("id") {
                    answered.entry(request).or_default().push(id.clone());
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::CLI_REPLY) {
        if event.get("ok") != Some(&Value::Bool(true)) {
            continue;
        }
        let id = event.text("id");
        let Some(action) = id.starts_with('a').then(|| super::checks::action_of(&id)).flatten() else { continue };
        let Some(method) = methods.get(&action) else { continue };
        let Some(upstream) = upstream_method(method) else { continue };
        let served = asked.get(&id).is_some_and(|calls| {
            calls.iter().any(|(m, rpc)| m == upstream && answered.get(&id).is_some_and(|ids| ids.contains(rpc)))
        });
        if served {
            verdicts::held();
        } else {
            let detail = format!("the CLI read success for {method} {id}, but the MCP server never answered a {upstream} for it");
            found.push(facts.violation("successes_come_from_the_server", index, detail));
        }
    }
    capped(found)
}
