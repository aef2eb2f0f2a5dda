//! The client's daemon lifecycle (MODEL.md §2.4): find the live daemon or launch one under the
//! start lock, and replace a stale or broken one under the same lock: probe the live daemon
//! without filtering by pid (a different pid means a peer already replaced it: use it), drain
//! (poll `status` until nothing else is in flight, absent counting as busy; a pid change means a
//! peer swapped it), refuse loudly after `drain_timeout_ms`, and only then `stop` addressed to
//! that pid, wait for it to go, launch the new one and wait until it is ready.

use std::cell::Cell;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::client::Cli;
use super::config::{
    DRAIN_TIMEOUT_MS, POLL_MS, PROTOCOL_VERSION, READY_WAIT_MS, STATUS_TIMEOUT_MIN_MS, STOP_WAIT_MS,
};
use super::machine::{Exit, Metadata};
use super::wire::{self, Line, Request};
use super::{port, SOCKET_BASE};
use crate::emit;
use crate::events::{host, kind};
use crate::seam::{self, TcpStream};

/// The lock file under which daemons are launched and replaced.
pub const START_LOCK: &str = "start";
/// How long a client waits for the start lock: a holder drains, stops and launches at most.
pub const LOCK_WAIT_MS: u64 = DRAIN_TIMEOUT_MS + STOP_WAIT_MS + READY_WAIT_MS + 3 * 1_000;

/// The invocation acting: its CLI, its pid, its action number and its protocol version.
pub struct Who<'a> {
    pub cli: &'a Cli,
    /// The invocation's own pid, which the lock files it takes record.
    pub pid: u64,
    pub action: usize,
    pub version: u64,
    /// Numbers this invocation's control requests.
    pub seq: Cell<u32>,
}

/// What a `status` probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub pid: u64,
    /// 1 when the reply has no `protocolVersion`.
    pub version: u64,
    pub config: String,
    /// Other requests in flight; `None` when the daemon does not say (protocol 1).
    pub active: Option<u64>,
}

/// How a replacement ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    /// A peer had already replaced it before the drain: use the peer's daemon.
    Peer,
    /// A peer swapped it during the drain: use the peer's daemon.
    PeerMidDrain,
    /// Stopped, relaunched, ready.
    Done,
    /// Still busy after the drain timeout: left alone, the invocation fails.
    Refused(String),
}

impl Decision {
    fn name(&self) -> &'static str {
        match self {
            Decision::Peer => "peer",
            Decision::PeerMidDrain => "peer_mid_drain",
            Decision::Done => "replaced",
            Decision::Refused(_) => "refused",
        }
    }
}

/// How a drain ended.
enum Drain {
    Idle,
    /// The daemon stopped answering: nothing left to wait for.
    Gone,
    Peer,
    Busy,
}

/// The live daemon's metadata: launched when there is none, replaced when it is stale (an older
/// protocol than this client's, or another config). `Err` carries a final refusal.
pub async fn ensure_daemon(who: &Who<'_>) -> Result<Metadata, String> {
    let machine = &who.cli.machine;
    match machine.metadata() {
        None => launch(who).await,
        Some(m)
            if machine.alive(m.pid) && stale(who, m.protocol_version, &m.config_fingerprint) =>
        {
            replace(who, m.pid, "stale").await?;
            machine
                .metadata()
                .ok_or_else(|| "no daemon after the replacement".to_string())
        }
        Some(m) => Ok(m),
    }
}

fn stale(who: &Who<'_>, version: u64, config: &str) -> bool {
    version < who.version || config != who.cli.machine.config()
}

/// Replace daemon `target` (stale, or broken by a transport failure) under the start lock.
/// `Err` is a loud, final refusal: the daemon is left alone.
pub async fn replace(who: &Who<'_>, target: u64, reason: &str) -> Result<(), String> {
    let machine = &who.cli.machine;
    acquire(who, false).await?;
    let outcome = guarded(who, target).await;
    machine.unlock(START_LOCK, who.pid);
    let message = match &outcome {
        Decision::Refused(message) => message.clone(),
        _ => String::new(),
    };
    emit!(
        kind::CLI_REPLACE,
        action = who.action,
        pid = target,
        reason,
        outcome = outcome.name(),
        message = %message
    );
    if message.is_empty() {
        Ok(())
    } else {
        Err(message)
    }
}

/// The guards, with the start lock held.
async fn guarded(who: &Who<'_>, meant: u64) -> Decision {
    let bugs = who.cli.rules.bugs;
    let mut target = meant;
    let first = probe(who, meant).await;
    if let Some(live) = first.as_ref().filter(|s| s.pid != meant) {
        let fresh = !stale(who, live.version, &live.config);
        if !bugs.pid_shortcut_needs_fresh_config || fresh {
            return Decision::Peer;
        }
        // The regression: a peer's daemon with old config is taken for the one to replace.
        target = live.pid;
    }
    // A daemon that did not answer the probe but still runs (stalled, or busy past the status
    // budget) may have work in flight: it is drained like one whose count is absent, never
    // stopped unasked. Only one that is gone from the process table needs no drain.
    let gone = first.is_none() && !who.cli.machine.alive(target);
    match bugs.stop_without_drain || gone {
        // The stop says `ifIdle`: a daemon that took work since the last probe refuses it, and
        // the drain goes on, all within one drain timeout.
        false => {
            // The drain timeout is time, from the first probe: counting only the polls' sleeps
            // would leave out every probe's own round trip and drain ~10 s too long.
            let (mut status, began) = (first, seam::now());
            loop {
                match drain(who, target, status, began).await {
                    Drain::Idle | Drain::Gone => {}
                    Drain::Peer => return Decision::PeerMidDrain,
                    Drain::Busy => {
                        return Decision::Refused(format!(
                            "daemon pid {target} still has requests in flight after \
                             {DRAIN_TIMEOUT_MS} ms of draining; it was left running and not \
                             replaced"
                        ))
                    }
                }
                if !stop(who, meant, target, true).await {
                    break;
                }
                seam::sleep_ms(POLL_MS).await;
                status = probe(who, target).await;
            }
        }
        true => {
            stop(who, meant, target, false).await;
        }
    }
    wait_gone(who, target).await;
    launch_locked(who).await;
    Decision::Done
}

/// Poll `status` every [`POLL_MS`] until the daemon has nothing else in flight, for at most
/// [`DRAIN_TIMEOUT_MS`] from `began` (the replacement's first probe), across its drains.
async fn drain(who: &Who<'_>, target: u64, mut status: Option<Status>, began: seam::Instant) -> Drain {
    let filtered = who.cli.rules.bugs.pid_filtered_drain_probe;
    loop {
        match &status {
            // The regression: the filtered probe sees no daemon with that pid and calls it idle.
            None if filtered => return Drain::Idle,
            // Gone from the process table: nothing left to wait for. Still running but silent:
            // busy, as an absent count is.
            None if !who.cli.machine.alive(target) => return Drain::Gone,
            None => {}
            Some(s) if s.pid != target => return Drain::Peer,
            Some(s) if s.active == Some(0) => return Drain::Idle,
            Some(_) => {}
        }
        if seam::ms_since(began) >= DRAIN_TIMEOUT_MS {
            return Drain::Busy;
        }
        seam::sleep_ms(POLL_MS).await;
        status = probe(who, target).await;
        if filtered {
            status = status.filter(|s| s.pid == target);
        }
    }
}

/// `status` from the daemon the metadata names now, whatever its pid.
async fn probe(who: &Who<'_>, target: u64) -> Option<Status> {
    let metadata = who.cli.machine.metadata()?;
    let status = status(who, metadata.socket).await;
    let (pid, active) = status.as_ref().map_or((0, None), |s| (s.pid, s.active));
    let active = active.map_or(String::new(), |a| a.to_string());
    emit!(kind::CLI_PROBE, action = who.action, target, pid, active = %active);
    status
}

/// `status` from the daemon on `socket`, parsed.
async fn status(who: &Who<'_>, socket: u16) -> Option<Status> {
    let reply = control(who, socket, "status", json!({})).await?;
    Some(Status {
        pid: reply.get("pid").and_then(Value::as_u64).unwrap_or(0),
        version: reply
            .get("protocolVersion")
            .and_then(Value::as_u64)
            .unwrap_or(1),
        config: reply
            .get("configFingerprint")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        active: reply.get("activeRequests").and_then(Value::as_u64),
    })
}

/// How long the CLI waits after its last invocation before the end-of-run report: a superseded
/// daemon's exit poll and a stopped daemon's exit fit in it.
pub const SETTLE_MS: u64 = 5 * POLL_MS;

/// The end-of-run resource report, [`SETTLE_MS`] after every invocation ended: `status` from
/// every live daemon (`cli.report`), then the metadata file, the live pids and the lock files
/// (`cli.settled`). The checkers hold it against what the run showed.
pub async fn report(cli: &Cli) {
    seam::sleep_ms(SETTLE_MS).await;
    let who = Who {
        cli,
        pid: cli.machine.begin_cli(),
        action: 0,
        version: PROTOCOL_VERSION,
        seq: Cell::new(0),
    };
    let machine = &cli.machine;
    for pid in machine.live_pids() {
        let seen = status(&who, port(SOCKET_BASE, pid)).await;
        let active = seen
            .as_ref()
            .and_then(|s| s.active)
            .map_or(String::new(), |a| a.to_string());
        let answered = seen.is_some_and(|s| s.pid == pid);
        emit!(kind::CLI_REPORT, pid, answered, active = %active);
    }
    let metadata = machine.metadata().map_or(0, |m| m.pid);
    let live: Vec<String> = machine.live_pids().iter().map(u64::to_string).collect();
    emit!(
        kind::CLI_SETTLED,
        metadata,
        live = %live.join(","),
        locks = %machine.locks().join(",")
    );
    machine.end_cli(who.pid);
}

/// `stop` addressed to `target` on its own socket (the regressed drain sends it unaddressed to
/// whatever daemon the metadata names), `ifIdle` after a drain. Whether the daemon refused it:
/// work arrived since the drain's last probe (or the pid was not its own). Without an answer the
/// daemon may be going anyway, so that is not a refusal.
async fn stop(who: &Who<'_>, meant: u64, target: u64, if_idle: bool) -> bool {
    let (socket, addressed) = if who.cli.rules.bugs.pid_filtered_drain_probe {
        let metadata = who.cli.machine.metadata();
        (metadata.map(|m| m.socket), None)
    } else {
        (Some(port(SOCKET_BASE, target)), Some(target))
    };
    let Some(socket) = socket else { return false };
    let id = next_id(who, "stop");
    emit!(
        kind::CLI_STOP,
        action = who.action,
        id = %id,
        target = meant,
        addressed = addressed.unwrap_or(0)
    );
    let mut params = addressed.map_or_else(|| json!({}), |pid| json!({ "pid": pid }));
    if if_idle {
        params["ifIdle"] = json!(true);
    }
    matches!(exchange(who, socket, &id, "stop", params).await, Some(Err(_)))
}

/// Wait for `pid` to go, killing it if it will not. A killed daemon cannot remove its own
/// metadata, so the killer does.
async fn wait_gone(who: &Who<'_>, pid: u64) {
    let machine = &who.cli.machine;
    let mut waited = 0;
    while machine.alive(pid) && waited < STOP_WAIT_MS {
        seam::sleep_ms(POLL_MS).await;
        waited += POLL_MS;
    }
    if machine.alive(pid) {
        machine.kill(pid, Exit::Kill);
        while machine.alive(pid) {
            seam::sleep_ms(POLL_MS).await;
        }
        machine.remove_metadata_of(pid);
    }
}

/// How a wait for the start lock ended.
enum Locked {
    /// This invocation holds it.
    Held,
    /// (Launching) the metadata names a daemon now: the lock's holder launched it.
    Daemon(Metadata),
}

/// Take the start lock. While a running invocation holds it, wait, and give up loudly after
/// `LOCK_WAIT_MS` (a holder drains, stops and launches within it). A lock file that names a pid
/// no longer running was left by a CLI killed while holding it: nobody will ever free it, so
/// remove it and take the lock, instead of failing every later invocation. When `launching`,
/// a daemon the holder launched ends the wait.
async fn acquire(who: &Who<'_>, launching: bool) -> Result<Locked, String> {
    let machine = &who.cli.machine;
    let mut waited = 0;
    loop {
        if machine.try_lock(START_LOCK, who.pid) {
            return Ok(Locked::Held);
        }
        if let Some(holder) = machine.lock_holder(START_LOCK) {
            if machine.break_lock(START_LOCK, holder) {
                emit!(kind::CLI_LOCK_BREAK, action = who.action, lock = START_LOCK, holder);
                continue;
            }
        }
        if let Some(metadata) = machine.metadata().filter(|_| launching) {
            return Ok(Locked::Daemon(metadata));
        }
        if waited >= LOCK_WAIT_MS {
            return Err(format!("start lock still held after {LOCK_WAIT_MS} ms"));
        }
        seam::sleep_ms(POLL_MS).await;
        waited += POLL_MS;
    }
}

/// Launch a daemon under the start lock, or use the one the lock's holder launches. When the
/// holder gives up without a daemon (the one it launched died before it was ready) and frees
/// the lock, take the lock and launch one: waiting on for a daemon nobody is starting any more
/// would fail this invocation although nothing is wrong now.
pub async fn launch(who: &Who<'_>) -> Result<Metadata, String> {
    let machine = &who.cli.machine;
    if let Locked::Daemon(metadata) = acquire(who, true).await? {
        return Ok(metadata);
    }
    // Another client may have launched one since the metadata was read.
    let live = machine.metadata().filter(|m| machine.alive(m.pid));
    let metadata = match live {
        Some(metadata) => Some(metadata),
        None => launch_locked(who).await,
    };
    machine.unlock(START_LOCK, who.pid);
    metadata.ok_or_else(|| "no daemon became ready".to_string())
}

/// Launch a daemon of this client's version and the current config; the lock is held.
async fn launch_locked(who: &Who<'_>) -> Option<Metadata> {
    let machine = &who.cli.machine;
    let config = machine.config();
    let pid = machine.request_launch_of(who.version, config.clone());
    emit!(kind::CLI_LAUNCH, action = who.action, pid, version = who.version, config = %config);
    ready(who, pid).await
}

/// Wait until the metadata names `pid`. A launch that is not ready within the ready wait is
/// killed: left hung, it would come up later, unsupervised, and take the metadata from the
/// daemon that replaced it.
async fn ready(who: &Who<'_>, pid: u64) -> Option<Metadata> {
    let machine = &who.cli.machine;
    let mut waited = 0;
    loop {
        let metadata = machine.metadata().filter(|m| m.pid == pid);
        if metadata.is_some() {
            return metadata;
        }
        if waited >= READY_WAIT_MS {
            machine.kill(pid, Exit::Kill);
            return None;
        }
        // The launched process is gone (it crashed while starting): it will never be ready,
        // and waiting on would hold the start lock from everyone for the whole ready wait.
        if !machine.alive(pid) {
            return None;
        }
        seam::sleep_ms(POLL_MS).await;
        waited += POLL_MS;
    }
}

fn next_id(who: &Who<'_>, method: &str) -> String {
    let seq = who.seq.get() + 1;
    who.seq.set(seq);
    format!("c{}.{seq}-{method}", who.action)
}

async fn control(who: &Who<'_>, socket: u16, method: &str, params: Value) -> Option<Value> {
    let id = next_id(who, method);
    exchange(who, socket, &id, method, params).await?.ok()
}

/// One control request (`status`, `stop`) with the status budget and no frames: its result or
/// its error `(code, message)`, `None` without an answer.
async fn exchange(
    who: &Who<'_>,
    socket: u16,
    id: &str,
    method: &str,
    params: Value,
) -> Option<Result<Value, (String, String)>> {
    let request = Request {
        id: id.to_string(),
        method: method.to_string(),
        params,
        protocol_version: (who.version >= PROTOCOL_VERSION).then_some(who.version),
        progress_interval_ms: None,
    };
    let exchange = async {
        let mut stream = TcpStream::connect((host::DAEMON, socket)).await.ok()?;
        let line = serde_json::to_string(&request).ok()?;
        stream
            .write_all(format!("{line}\n").as_bytes())
            .await
            .ok()?;
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(Line::Response { outcome, .. }) = wire::parse_line(&line) {
                return Some(outcome);
            }
        }
        None
    };
    tokio::time::timeout(Duration::from_millis(STATUS_TIMEOUT_MIN_MS), exchange)
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;
    use crate::daemon::client::SharedCliKnobs;
    use crate::daemon::config::{DaemonBugs, Rules, Timing};
    use crate::daemon::machine::Machine;

    /// The process table's side of a kill: the first kill asked for ends its process; when, in
    /// milliseconds from the start.
    async fn carry_out_first_kill(machine: &Machine) -> u64 {
        let start = seam::now();
        loop {
            let changed = machine.changed.notified();
            if let Some((pid, why)) = machine.take_kill() {
                machine.exited(pid, why);
                return seam::ms_since(start);
            }
            changed.await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_daemon_that_will_not_go_is_killed_when_the_stop_wait_ends_not_a_poll_later() {
        let machine = Machine::shared();
        let pid = machine.request_launch();
        let cli = Cli { rules: Rules { timing: Timing::default(), bugs: DaemonBugs::default() }, machine: Rc::clone(&machine), knobs: SharedCliKnobs::default() };
        let who = Who { cli: &cli, pid: machine.begin_cli(), action: 0, version: PROTOCOL_VERSION, seq: Cell::new(0) };
        let (killed_at_ms, ()) = tokio::join!(carry_out_first_kill(&machine), wait_gone(&who, pid));
        assert_eq!(killed_at_ms, STOP_WAIT_MS, "a stopped daemon is given STOP_WAIT_MS to go, then killed");
        assert!(!machine.alive(pid));
    }
}
