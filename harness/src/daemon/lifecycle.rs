//! The daemon lifecycle checkers (MODEL.md §2.4 "Replacing a daemon", §4.6 and §4.8): pure
//! functions over the trace judging stops, replacements, the daemons left running and mixed
//! protocol versions. They share [`Facts`] with the family's other checkers.

use std::collections::{BTreeMap, BTreeSet};

use bridge_under_test::daemon::config::{
    DRAIN_TIMEOUT_MS, POLL_MS, PROTOCOL_VERSION, READY_WAIT_MS, STATUS_TIMEOUT_MIN_MS, STOP_WAIT_MS,
};
use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::checks::{action_of, Facts};
use super::waits::LOCK_MS;
use crate::check::{capped, message};
use crate::verdicts;
use crate::trace::{Trace, TraceEvent, Violation};

/// The bounded margin past `drain_timeout_ms` within which a replacement ends: the stop and
/// ready waits plus a few status budgets.
pub const REPLACE_MARGIN_MS: u64 = STOP_WAIT_MS + READY_WAIT_MS + 4 * STATUS_TIMEOUT_MIN_MS;

fn yes(event: &TraceEvent, name: &str) -> bool {
    event.get(name) == Some(&Value::Bool(true))
}

/// The stops daemons accepted: (trace index, event).
fn accepted_stops<'a>(facts: &'a Facts<'_>) -> impl Iterator<Item = (usize, &'a TraceEvent)> {
    facts
        .trace
        .of_kind(kind::DAEMON_STOP)
        .filter(|(_, e)| !yes(e, "refused"))
}

/// No `stop` reaches a daemon that has other requests in flight, whatever fault is active: a
/// stalled daemon cannot be drained, so a client that stops it anyway chose to (MODEL.md §2.4).
pub fn no_stop_while_busy(facts: &Facts<'_>) -> Vec<Violation> {
    let found = accepted_stops(facts)
        .filter(|(_, e)| {
            let busy = e.num("active") > 0;
            if !busy {
                verdicts::held();
            }
            busy
        })
        .map(|(index, e)| {
            let detail = format!(
                "stop {} reached pid {} with {} other requests in flight",
                e.text("id"),
                e.num("pid"),
                e.num("active")
            );
            facts.violation("no_stop_while_busy", index, detail)
        })
        .collect();
    capped(found)
}

/// No `stop` reaches a daemon other than the one its sender meant to replace.
pub fn stop_reaches_its_target(facts: &Facts<'_>) -> Vec<Violation> {
    let meant: BTreeMap<String, u64> = facts
        .trace
        .of_kind(kind::CLI_STOP)
        .map(|(_, e)| (e.text("id"), e.num("target")))
        .collect();
    let found = accepted_stops(facts)
        .filter_map(|(index, e)| {
            let target = *meant.get(&e.text("id"))?;
            if target == e.num("pid") {
                verdicts::held();
                return None;
            }
            let detail = format!(
                "stop {} meant for pid {target} stopped pid {}",
                e.text("id"),
                e.num("pid")
            );
            Some(facts.violation("stop_reaches_its_target", index, detail))
        })
        .collect();
    capped(found)
}

/// No request is killed by another client's replacement (and so none is replayed because of
/// it): every request a stopped daemon had in flight was answered before it went. In flight,
/// as the boundaries show it: the daemon read it and wrote no answer, and either its CLI still
/// waits on it or the MCP server is still working for it (work that outlived its CLI's budget
/// is work in flight). Whatever fault is active: the stop is the client's decision.
pub fn no_request_killed_by_replacement(facts: &Facts<'_>) -> Vec<Violation> {
    let mut open: BTreeMap<(u64, String), usize> = BTreeMap::new();
    let mut stopper: BTreeMap<u64, u64> = BTreeMap::new();
    // Requests whose CLI still waits, and how many messages the MCP server owes an answer for
    // each request.
    let mut waited: BTreeSet<String> = BTreeSet::new();
    let mut upstream: BTreeMap<String, u64> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        let (pid, id) = (event.num("pid"), event.text("id"));
        match event.kind.as_str() {
            kind::CLI_SEND => {
                waited.insert(id);
            }
            kind::CLI_REPLY | kind::CLI_FAIL => {
                waited.remove(&id);
            }
            kind::SERVER_RECV if message(event).get("id").is_some() => {
                *upstream.entry(event.text("request")).or_default() += 1;
            }
            kind::SERVER_SEND => {
                let owed = upstream.entry(event.text("request")).or_default();
                *owed = owed.saturating_sub(1);
            }
            kind::SERVER_GONE => {
                upstream.remove(&event.text("request"));
            }
            kind::DAEMON_REQUEST if id.starts_with('a') => {
                open.insert((pid, id), index);
            }
            kind::DAEMON_REPLY => {
                open.remove(&(pid, id));
            }
            kind::DAEMON_STOP if !yes(event, "refused") => {
                let sender = action_of_control(&id);
                stopper.insert(pid, sender.unwrap_or(0));
            }
            kind::DAEMON_EXIT if event.text("reason") == "stop" => {
                let sender = stopper.get(&pid).copied().unwrap_or(0);
                let killed: Vec<String> = open
                    .keys()
                    .filter(|(p, _)| *p == pid)
                    .map(|(_, id)| id.clone())
                    .filter(|id| action_of(id).is_some_and(|a| a != sender))
                    .filter(|id| waited.contains(id) || upstream.get(id).is_some_and(|owed| *owed > 0))
                    .collect();
                if killed.is_empty() {
                    verdicts::held();
                }
                for id in killed {
                    let detail = format!(
                        "request {id} was in flight on pid {pid} when action {sender}'s \
                         replacement stopped it"
                    );
                    found.push(facts.violation("no_request_killed_by_replacement", index, detail));
                }
                open.retain(|(p, _), _| *p != pid);
            }
            _ => {}
        }
    }
    capped(found)
}

/// The action of a control request id `c<action>.<n>-<method>`.
pub(super) fn action_of_control(id: &str) -> Option<u64> {
    id.strip_prefix('c')?.split('.').next()?.parse().ok()
}

/// At most one live daemon per config once launches settle: at the end of the run no config
/// has two daemons that have both been up past the superseded daemon's exit poll, and the
/// metadata (last written by the newest daemon) names a daemon that has not been stopped.
///
/// Excuse, by mechanism: a daemon whose run had ended, as the trace shows (it accepted a stop,
/// or a newer daemon of its config started), waits out a `process_hang` before it exits
/// (`bridge-under-test/src/daemon/process.rs`), so it is still in the process table. Only when
/// every daemon of the config but the newest is such a daemon, the hang has held without a gap
/// from a poll after its run could end (its reason or its last request, whichever is later) to
/// the end of the run, and, for a stopped one, the CLI that stopped it is still within its
/// `STOP_WAIT_MS` before it kills a daemon that will not go (`replace.rs`, `wait_gone`).
pub fn one_daemon_per_config(facts: &Facts<'_>) -> Vec<Violation> {
    let end_ms = facts.trace.events.last().map_or(0, |e| e.at_ms);
    let settle_ms = POLL_MS + facts.slack_ms;
    let mut live: BTreeMap<u64, (String, u64, usize)> = BTreeMap::new();
    let mut last_active: BTreeMap<u64, u64> = BTreeMap::new();
    let mut ended: BTreeMap<u64, RunEnded> = BTreeMap::new();
    let mut newest: Option<(u64, usize)> = None;
    let mut stopped_newest = None;
    for (index, event) in facts.trace.events.iter().enumerate() {
        let pid = event.num("pid");
        match event.kind.as_str() {
            kind::DAEMON_START => {
                let config = event.text("config");
                for (older, _) in live.iter().filter(|(_, (c, _, _))| *c == config) {
                    ended.entry(*older).or_insert(RunEnded::Superseded(event.at_ms));
                }
                live.insert(pid, (config, event.at_ms, index));
                newest = Some((pid, index));
                stopped_newest = None;
            }
            // A stop it accepted puts a CLI on the watch for it to go, whatever ended it first.
            kind::DAEMON_STOP if !yes(event, "refused") && !matches!(ended.get(&pid), Some(RunEnded::Stopped(_))) => {
                ended.insert(pid, RunEnded::Stopped(event.at_ms));
            }
            kind::DAEMON_REQUEST | kind::DAEMON_REPLY => {
                last_active.insert(pid, event.at_ms);
            }
            kind::DAEMON_EXIT => {
                live.remove(&pid);
                let stop = event.text("reason") == "stop";
                if newest.is_some_and(|(n, _)| n == pid) && stop && !live.is_empty() {
                    stopped_newest = Some((pid, index));
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    let mut by_config: BTreeMap<&str, Vec<(u64, u64, usize)>> = BTreeMap::new();
    for (pid, (config, started, index)) in &live {
        let since = (*started).max(last_active.get(pid).copied().unwrap_or(0));
        by_config
            .entry(config)
            .or_default()
            .push((*pid, since, *index));
    }
    // The daemon left in the process table by a hang: its run had ended, the hang held from a
    // poll after that to the end, and no CLI was yet due to kill it.
    let hung = |pid: u64, since: u64| {
        let Some(reason) = ended.get(&pid) else { return false };
        let from = (reason.at_ms().max(since) + POLL_MS).min(end_ms);
        let held = facts.held_by_ms(&["process_hang"], from, end_ms) >= end_ms - from;
        let kill_due = matches!(reason, RunEnded::Stopped(at) if at + STOP_WAIT_MS + settle_ms <= end_ms);
        held && !kill_due
    };
    for (config, daemons) in by_config {
        let settled = daemons
            .iter()
            .all(|(_, since, _)| since + settle_ms <= end_ms);
        let newest = daemons.iter().map(|(_, _, started)| *started).max();
        if daemons.len() <= 1 || !settled {
            verdicts::held();
        } else if daemons.iter().filter(|(_, _, started)| Some(*started) != newest).all(|(pid, since, _)| hung(*pid, *since)) {
            verdicts::excused(super::excuses::HUNG_ON_ITS_WAY_OUT);
        } else {
            let pids: Vec<String> = daemons.iter().map(|(pid, _, _)| pid.to_string()).collect();
            let detail = format!("pids {} all still run config {config}", pids.join(", "));
            found.push(facts.violation("one_daemon_per_config", daemons[1].2, detail));
        }
    }
    if let Some((pid, index)) = stopped_newest.filter(|_| !live.is_empty()) {
        let detail = format!("the metadata's daemon pid {pid} was stopped while another ran on");
        found.push(facts.violation("one_daemon_per_config", index, detail));
    }
    capped(found)
}

/// Why a daemon's run ended, as the trace shows it, and when: it accepted a stop, or a newer
/// daemon of its config started (it leaves at a poll once no connection is left).
#[derive(Debug, Clone, Copy)]
enum RunEnded {
    Stopped(u64),
    Superseded(u64),
}

impl RunEnded {
    fn at_ms(self) -> u64 {
        match self {
            Self::Stopped(at) | Self::Superseded(at) => at,
        }
    }
}

/// A daemon the CLI launched comes up (`daemon.start`, its metadata written) or is gone
/// (`daemon.exit`) within the ready wait plus a poll, as the process table shows: a launch the
/// CLI gave up on leaves no hung process behind to come up later, unsupervised, and take the
/// metadata from the daemon that replaced it.
pub fn launches_come_up_or_go(facts: &Facts<'_>) -> Vec<Violation> {
    let mut settled: BTreeMap<u64, u64> = BTreeMap::new();
    for event in &facts.trace.events {
        if event.kind == kind::DAEMON_START || event.kind == kind::DAEMON_EXIT {
            settled.entry(event.num("pid")).or_insert(event.at_ms);
        }
    }
    let end_ms = facts.trace.events.last().map_or(0, |e| e.at_ms);
    let found = facts
        .trace
        .of_kind(kind::CLI_LAUNCH)
        .filter_map(|(index, launch)| {
            let pid = launch.num("pid");
            let bound_ms = launch.at_ms + READY_WAIT_MS + POLL_MS + facts.slack_ms;
            let at_ms = settled.get(&pid).copied().unwrap_or(u64::MAX);
            if at_ms <= bound_ms {
                verdicts::held();
            }
            (at_ms > bound_ms && bound_ms < end_ms).then(|| {
                let when = if at_ms == u64::MAX {
                    "never came up and never went".to_string()
                } else {
                    format!("was neither up nor gone until {at_ms} ms")
                };
                let detail = format!(
                    "pid {pid}, launched by action {} at {} ms, {when}; the ready wait is \
                     {READY_WAIT_MS} ms",
                    launch.num("action"),
                    launch.at_ms
                );
                facts.violation("launches_come_up_or_go", index, detail)
            })
        })
        .collect();
    capped(found)
}

/// An action that stopped a daemon launches the next one only after the stopped daemon has
/// exited (`daemon.exit`, killed if it would not go): never two daemons of one action's making
/// at once, as the process table shows.
pub fn launch_after_the_old_one_went(facts: &Facts<'_>) -> Vec<Violation> {
    let mut stopped: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut exited: BTreeMap<u64, u64> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        match event.kind.as_str() {
            kind::DAEMON_STOP if !yes(event, "refused") => {
                if let Some(action) = action_of_control(&event.text("id")) {
                    stopped.entry(action).or_default().push(event.num("pid"));
                }
            }
            kind::DAEMON_EXIT => {
                exited.insert(event.num("pid"), event.at_ms);
            }
            kind::CLI_LAUNCH => {
                let action = event.num("action");
                // A launch by an action that stopped nothing is not this oracle's to judge.
                let Some(own) = stopped.get(&action) else { continue };
                let running: Vec<&u64> = own.iter().filter(|pid| !exited.contains_key(pid)).collect();
                if running.is_empty() {
                    verdicts::held();
                }
                for pid in running {
                    let detail = format!(
                        "action {action} launched pid {} at {} ms while pid {pid}, which it had \
                         stopped, still ran",
                        event.num("pid"),
                        event.at_ms
                    );
                    found.push(facts.violation("launch_after_the_old_one_went", index, detail));
                }
            }
            _ => {}
        }
    }
    capped(found)
}

/// Kills come last, as the process table shows: the CLI kills (`daemon.exit reason=kill`) only
/// a daemon it asked to stop, and only once the stop wait since that `cli.stop` is over, or one
/// it launched that the metadata does not name (it never came up, or a peer's `daemon start`
/// took the metadata over before the CLI saw it), once the ready wait is over. A daemon killed
/// sooner loses the graceful exit that removes its own metadata; one killed unasked loses its
/// users' work.
pub fn kills_come_last(facts: &Facts<'_>) -> Vec<Violation> {
    let slack = facts.slack_ms;
    let mut stopped: BTreeMap<u64, u64> = BTreeMap::new();
    let mut launched: BTreeMap<u64, u64> = BTreeMap::new();
    // The pid the metadata file names, as the filesystem recorded it.
    let mut named: Option<u64> = None;
    let mut found = Vec::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        match event.kind.as_str() {
            kind::CLI_STOP => {
                stopped.insert(event.num("target"), event.at_ms);
            }
            kind::CLI_LAUNCH => {
                launched.insert(event.num("pid"), event.at_ms);
            }
            kind::MACHINE_METADATA => named = metadata_after(named, event),
            kind::DAEMON_EXIT if event.text("reason") != "kill" => {}
            kind::DAEMON_EXIT => {
                let pid = event.num("pid");
                let (wait, since, what) = match (stopped.get(&pid), launched.get(&pid)) {
                    (Some(&at), _) => (STOP_WAIT_MS, at, "the stop sent"),
                    (None, Some(&at)) if named != Some(pid) => (READY_WAIT_MS, at, "its launch"),
                    _ => {
                        let detail = format!("pid {pid} was killed at {} ms, though no CLI had asked it to stop", event.at_ms);
                        found.push(facts.violation("kills_come_last", index, detail));
                        continue;
                    }
                };
                if event.at_ms + slack < since + wait {
                    let detail = format!(
                        "pid {pid} was killed {} ms after {what} at {since} ms; the wait before a kill is {wait} ms",
                        event.at_ms - since
                    );
                    found.push(facts.violation("kills_come_last", index, detail));
                } else {
                    verdicts::held();
                }
            }
            _ => {}
        }
    }
    capped(found)
}

/// The pid the metadata file names after a `machine.metadata` record, given the one before.
pub(super) fn metadata_after(named: Option<u64>, event: &TraceEvent) -> Option<u64> {
    let pid = event.num("pid");
    match event.text("op").as_str() {
        "write" => Some(pid),
        "remove" if named == Some(pid) => None,
        _ => named,
    }
}

/// Mixed versions keep working: a protocol-1 client never gets a reply it cannot parse, and
/// every request a CLI writes, work or control (`status`, `stop` while replacing), names the
/// protocol the CLI speaks, as the daemon received it: `protocolVersion` from protocol 2 on,
/// absent for protocol 1 (MODEL.md §2.2). A request that names the wrong one is served under
/// another protocol's rules (frames, `activeRequests`) than its CLI reads.
pub fn mixed_versions_work(facts: &Facts<'_>) -> Vec<Violation> {
    let mut found = versions_named(facts);
    let v1: BTreeMap<String, ()> = facts
        .trace
        .of_kind(kind::CLI_SEND)
        .filter(|(_, e)| !e.text("msg").contains("\"protocolVersion\""))
        .map(|(_, e)| (e.text("id"), ()))
        .collect();
    // Each reply a protocol-1 request read is one verdict; a transport failure read none.
    let ends = facts.trace.events.iter().enumerate().filter(|(_, e)| e.kind == kind::CLI_REPLY || e.kind == kind::CLI_FAIL);
    for (index, e) in ends.filter(|(_, e)| v1.contains_key(&e.text("id"))) {
        match e.kind.as_str() {
            kind::CLI_REPLY => verdicts::held(),
            kind::CLI_FAIL if e.text("reason") == "unparseable" => {
                let detail = format!(
                    "protocol-1 request {} got a reply it cannot parse",
                    e.text("id")
                );
                found.push(facts.violation("mixed_versions_work", index, detail));
            }
            _ => {}
        }
    }
    capped(found)
}

/// The requests the daemon received whose `protocolVersion` (`protocol`, 0: absent) is not
/// the one their CLI speaks (its `cli.action`'s `version`). Requests are `a<action>.<attempt>`,
/// control requests `c<action>.<seq>-<method>`.
fn versions_named(facts: &Facts<'_>) -> Vec<Violation> {
    let speaks: BTreeMap<u64, u64> = facts.trace.of_kind(kind::CLI_ACTION).map(|(_, e)| (e.num("action"), e.num("version"))).collect();
    let action = |id: &str| id.strip_prefix('a').or_else(|| id.strip_prefix('c'))?.split('.').next()?.parse::<u64>().ok();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::DAEMON_REQUEST) {
        let id = event.text("id");
        let (Some(named), Some(version)) = (event.get("protocol").and_then(Value::as_u64), action(&id).and_then(|a| speaks.get(&a))) else { continue };
        let owed = if *version >= PROTOCOL_VERSION { *version } else { 0 };
        if named == owed {
            verdicts::held();
            continue;
        }
        let named = if named == 0 { "no protocolVersion".to_string() } else { format!("protocolVersion {named}") };
        let detail = format!("{} request {id} of a protocol-{version} CLI named {named}", event.text("method"));
        found.push(facts.violation("mixed_versions_work", index, detail));
    }
    found
}

/// A replacement ends: against an idle daemon it completes; against a busy one it completes
/// after the drain, or refuses loudly (with a message) only after `drain_timeout_ms` of busy
/// polls, within `drain_timeout_ms` plus a bounded margin from its first probe.
pub fn replacement_ends(facts: &Facts<'_>) -> Vec<Violation> {
    let mut first_probe: BTreeMap<u64, u64> = BTreeMap::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.events.iter().enumerate() {
        let action = event.num("action");
        match event.kind.as_str() {
            kind::CLI_PROBE => {
                first_probe.entry(action).or_insert(event.at_ms);
            }
            kind::CLI_REPLACE => {
                let from = first_probe.remove(&action).unwrap_or(event.at_ms);
                let took = event.at_ms - from.min(event.at_ms);
                let refused = event.text("outcome") == "refused";
                let problem = if took > DRAIN_TIMEOUT_MS + REPLACE_MARGIN_MS {
                    Some(format!("took {took} ms"))
                } else if refused && event.text("message").is_empty() {
                    Some("refused without a message".to_string())
                } else if refused && took + POLL_MS < DRAIN_TIMEOUT_MS {
                    Some(format!("refused after only {took} ms of draining"))
                } else {
                    None
                };
                if let Some(problem) = verdicts::judging(problem) {
                    let detail = format!(
                        "action {action}'s replacement of pid {} {problem}",
                        event.num("pid")
                    );
                    found.push(facts.violation("replacement_ends", index, detail));
                }
            }
            _ => {}
        }
    }
    for (action, from) in first_probe {
        if from + DRAIN_TIMEOUT_MS + REPLACE_MARGIN_MS <= facts.horizon_ms {
            let detail = format!("action {action}'s replacement begun at {from} ms never ended");
            let index = facts.trace.events.len().saturating_sub(1);
            found.push(facts.violation("replacement_ends", index, detail));
        }
    }
    capped(found)
}

/// The daemons that started, by pid: (start time, protocol version, config edition), from their
/// own `daemon.start`, the pids each action launched, and the machine's config over time, from
/// the fault injector's config edits (the machine names its config `config-<edits + 1>`).
pub struct Fleet {
    started: BTreeMap<u64, (u64, u64, u64)>,
    launched_by: BTreeMap<u64, u64>,
    edits_ms: Vec<u64>,
    /// Per action (`cli.action`): when it started and the CLI's protocol version.
    pub actions: BTreeMap<u64, (u64, u64)>,
}

/// `config-N` → N.
fn edition(config: &str) -> u64 {
    config.strip_prefix("config-").and_then(|n| n.parse().ok()).unwrap_or(0)
}

impl Fleet {
    pub fn new(facts: &Facts<'_>) -> Self {
        let started = facts
            .trace
            .of_kind(kind::DAEMON_START)
            .map(|(_, e)| (e.num("pid"), (e.at_ms, e.num("protocol_version"), edition(&e.text("config")))))
            .collect();
        let launched_by = facts.trace.of_kind(kind::CLI_LAUNCH).map(|(_, e)| (e.num("pid"), e.num("action"))).collect();
        let edits_ms = facts
            .trace
            .of_kind(kind::FAULT_INJECTED)
            .filter(|(_, e)| e.text("fault") == "config_edit" && e.text("phase") == "start")
            .map(|(_, e)| e.at_ms)
            .collect();
        let actions = facts
            .trace
            .of_kind(kind::CLI_ACTION)
            .map(|(_, e)| (e.num("action"), (e.at_ms, e.num("version"))))
            .collect();
        Self { started, launched_by, edits_ms, actions }
    }

    /// The config edition a CLI starting at `at_ms` reads, if no edit lands within `slack_ms` of
    /// that moment (an edit in the same tick may or may not have been read).
    pub fn edition_at(&self, at_ms: u64, slack_ms: u64) -> Option<u64> {
        if self.edits_ms.iter().any(|edit| edit.abs_diff(at_ms) <= slack_ms) {
            return None;
        }
        Some(self.edits_ms.iter().filter(|edit| **edit < at_ms).count() as u64 + 1)
    }

    /// Whether daemon `pid` is stale for a CLI of protocol `version` that read config `edition`:
    /// an older protocol or an older config (MODEL.md §2.4; edits only move the config on).
    pub fn stale(&self, pid: u64, version: u64, edition: u64) -> Option<bool> {
        self.started.get(&pid).map(|(_, protocol, running)| *protocol < version || *running < edition)
    }

    /// Whether a daemon that action `action` did not launch started in `(from, to]`: a peer
    /// replaced the daemon meanwhile, and MODEL.md §2.4 has the CLI use the peer's daemon.
    pub fn peer_started(&self, action: u64, from: u64, to: u64) -> bool {
        self.started
            .iter()
            .any(|(pid, (at, _, _))| *at > from && *at <= to && self.launched_by.get(pid) != Some(&action))
    }
}

/// Every action is served by a current daemon: the daemon that handles an action's own request
/// runs at least the CLI's protocol and the config the CLI read when the action started, unless
/// a peer started another daemon meanwhile (the CLI then uses the peer's). A CLI that keeps
/// talking to a stale daemon (after an upgrade or a config edit) serves the user the old
/// software or the old settings. Read from the CLI's `cli.action` and `cli.launch`, the daemons'
/// `daemon.start` and `daemon.request`, and the fault injector's config edits.
pub fn served_by_a_current_daemon(facts: &Facts<'_>) -> Vec<Violation> {
    let fleet = Fleet::new(facts);
    let mut judged = std::collections::BTreeSet::new();
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::DAEMON_REQUEST) {
        // The action's own request (`a<action>.<attempt>`), not a status probe.
        let id = event.text("id");
        let Some(action) = id.starts_with('a').then(|| action_of(&id)).flatten() else { continue };
        let Some(&(start_ms, version)) = fleet.actions.get(&action) else { continue };
        let Some(edition) = fleet.edition_at(start_ms, facts.slack_ms) else { continue };
        let pid = event.num("pid");
        let peer = fleet.peer_started(action, start_ms.saturating_sub(facts.slack_ms), event.at_ms);
        let stale = fleet.stale(pid, version, edition);
        // A daemon the trace shows no start of is not judged.
        if stale == Some(false) || (stale.is_some() && peer) {
            verdicts::held();
        }
        if stale == Some(true) && !peer && judged.insert(action) {
            let (_, protocol, running) = fleet.started[&pid];
            let detail = format!(
                "action {action} (protocol {version}, config-{edition} when it started) was served by pid {pid}, which runs protocol {protocol} with config-{running}"
            );
            found.push(facts.violation("served_by_a_current_daemon", index, detail));
        }
    }
    capped(found)
}

/// The start lock as the filesystem recorded it (`machine.lock`): who held it from when, and
/// when a holder ended still holding it.
#[derive(Debug, Default)]
struct LockFile {
    /// (holder pid, taken at, ended at), in order of taking.
    spells: Vec<(u64, u64, Option<u64>)>,
    /// When each holder ended while holding it.
    orphaned: BTreeMap<u64, u64>,
}

impl LockFile {
    fn of(facts: &Facts<'_>) -> Self {
        let mut file = Self::default();
        for (_, event) in facts.trace.of_kind(kind::MACHINE_LOCK) {
            let holder = event.num("holder");
            match event.text("op").as_str() {
                "take" => file.spells.push((holder, event.at_ms, None)),
                "orphan" => {
                    file.orphaned.insert(holder, event.at_ms);
                }
                _ => {
                    if let Some(spell) = file.spells.iter_mut().rev().find(|s| s.0 == holder) {
                        spell.2.get_or_insert(event.at_ms);
                    }
                }
            }
        }
        file
    }

    /// The holder at `at_ms`, if the lock was held then.
    fn holder_at(&self, at_ms: u64) -> Option<u64> {
        let held = |s: &&(u64, u64, Option<u64>)| s.1 <= at_ms && s.2.is_none_or(|end| end >= at_ms);
        self.spells.iter().rev().find(held).map(|s| s.0)
    }
}

/// Start-lock waits are justified, as the filesystem's record shows: a CLI removes a lock file
/// only once the pid it names has ended (a CLI killed while holding it), never a running
/// holder's; and an action that gives up on the lock (refused straight after it began or
/// restarted, before any probe or launch) waited the whole lock wait first, for a holder that
/// was still running. Giving up on a dead holder's lock fails every later invocation for good.
pub fn lock_waits_justified(facts: &Facts<'_>) -> Vec<Violation> {
    let file = LockFile::of(facts);
    let mut found = Vec::new();
    for (index, event) in facts.trace.of_kind(kind::MACHINE_LOCK) {
        let holder = event.num("holder");
        let dead = file.orphaned.get(&holder).is_some_and(|at| *at <= event.at_ms);
        if event.text("op") != "break" {
            continue;
        }
        if dead {
            verdicts::held();
        } else {
            let detail = format!(
                "the start lock of pid {holder} was removed at {} ms while pid {holder} was \
                 still running",
                event.at_ms
            );
            found.push(facts.violation("lock_waits_justified", index, detail));
        }
    }
    for (index, event, from) in lock_wait_refusals(facts.trace) {
        let action = event.num("action");
        let waited = event.at_ms.saturating_sub(from);
        let holder = file.holder_at(event.at_ms);
        let died = holder.and_then(|pid| file.orphaned.get(&pid).map(|at| (pid, *at)));
        let problem = if waited + facts.slack_ms < LOCK_MS {
            Some(format!("after {waited} ms; the lock wait is {LOCK_MS} ms"))
        } else if let Some((pid, at)) =
            died.filter(|(_, at)| at + POLL_MS + facts.slack_ms < event.at_ms)
        {
            Some(format!(
                "held by pid {pid}, which had ended at {at} ms: a stale lock it should \
                 have removed"
            ))
        } else {
            None
        };
        if let Some(problem) = verdicts::judging(problem) {
            let detail = format!(
                "action {action} gave up on the start lock at {} ms {problem}",
                event.at_ms
            );
            found.push(facts.violation("lock_waits_justified", index, detail));
        }
    }
    capped(found)
}

/// The actions that gave up waiting for the start lock, from the CLI's steps: refused straight
/// after they began or restarted, before any probe, stop, launch, replacement or send. Each as
/// (trace index, its `cli.done`, when the wait began).
pub(super) fn lock_wait_refusals(trace: &Trace) -> Vec<(usize, &TraceEvent, u64)> {
    let mut waiting: BTreeMap<u64, u64> = BTreeMap::new();
    let mut refusals = Vec::new();
    for (index, event) in trace.events.iter().enumerate() {
        if event.host != host::CLI {
            continue;
        }
        let action = event.num("action");
        match event.kind.as_str() {
            kind::CLI_ACTION | kind::CLI_RESTART => {
                waiting.insert(action, event.at_ms);
            }
            kind::CLI_DONE => {
                let from = waiting.remove(&action);
                if let Some(from) = from.filter(|_| event.text("outcome") == "refused") {
                    refusals.push((index, event, from));
                }
            }
            kind::CLI_PROBE | kind::CLI_STOP | kind::CLI_LAUNCH | kind::CLI_REPLACE
            | kind::CLI_SEND => {
                waiting.remove(&action);
            }
            _ => {}
        }
    }
    refusals
}
