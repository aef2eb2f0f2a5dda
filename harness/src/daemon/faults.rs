//! The daemon family's faults: plain data, applied between simulation steps by one function that
//! also records a `fault.injected` event. "Smaller" means milder: fewer faults, shorter windows.
//! Mock-level faults (approval, pages, cursors, a wedged method, a slow tool, a caller's
//! deadline, token lifetime) take effect at time 0; the daemon's own faults at their onset.

use bridge_under_test::daemon::client::SharedCliKnobs;
use bridge_under_test::daemon::knobs::{
    lock, Approval, SharedBrowserKnobs, SharedDaemonKnobs, SharedMcpKnobs,
};
use std::cell::RefCell;

use bridge_under_test::daemon::machine::{Exit, Machine};
use bridge_under_test::daemon::replace::START_LOCK;
use bridge_under_test::daemon::oauth::SharedIssued;
use bridge_under_test::emit;
use bridge_under_test::events::kind;
use serde::{Deserialize, Serialize};

use crate::family::Phase;

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case", deny_unknown_fields)]
pub enum DaemonFault {
    /// The user approves the authorization prompt only after `delay_ms`: a user who is away.
    ApprovalDelay { delay_ms: u64 },
    /// The user never approves: the prompt sits in a background tab.
    ApprovalNever,
    /// Page `page` of every listing is answered `delay_ms` late: a slow backend query.
    PageDelay { page: u32, delay_ms: u64 },
    /// Page `page` (≥ 2) answers with a cursor it already gave: a server whose pagination loops.
    RepeatedCursor { page: u32 },
    /// Every page has a fresh next cursor: a server that never runs out of pages.
    EndlessCursors,
    /// `method` is accepted and never answered: a wedged server. An MCP method (`initialize`,
    /// `tools/call`, …) wedges the MCP server; a path (`/token`, `/register`,
    /// `/.well-known/oauth-authorization-server`) wedges that endpoint of the authorization
    /// server.
    WedgedMethod { method: String },
    /// `tools/call` runs `run_ms` whatever it was asked: a slow tool.
    SlowTool { run_ms: u64 },
    /// The daemon's event loop writes nothing from `at_ms` for `for_ms`: a blocked event loop.
    DaemonStall {
        at_ms: u64,
        for_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
    /// The daemon process dies: an OOM kill or a crash.
    DaemonCrash {
        at_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
    /// From `at_ms` for `for_ms`, a daemon process that starts hangs before it listens or
    /// writes its metadata, and one that stops hangs before it exits: a process blocked on a
    /// slow disk or a stuck lock. The CLI must give up on a launch that never becomes ready
    /// (and not leave it behind) and kill a stopped daemon that will not go.
    ProcessHang {
        at_ms: u64,
        for_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
    /// At `at_ms` another CLI invocation takes the start lock and hangs holding it for `for_ms`
    /// (suspended with ^Z, or blocked on a slow disk), then is killed: its lock file names a
    /// dead pid from then on. While it lives, others wait for it and give up only after the
    /// lock wait; once it is gone, the first that needs the lock must break it.
    StaleLock {
        at_ms: u64,
        for_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
    /// The daemon keeps each connection open `hold_ms` after writing its response: a daemon
    /// (or a socket proxy) that ends connections lazily.
    KeepOpen { hold_ms: u64 },
    /// From `at_ms` for `for_ms`, every progress frame the daemon writes carries another
    /// request's id: a daemon that mixes up its connections' heartbeats.
    CrossedFrames {
        at_ms: u64,
        for_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
    /// The daemon's open client connections are reset: a socket torn down under it.
    SocketReset {
        at_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
    /// Access tokens live `lifetime_ms`: an authorization server with short-lived tokens, so
    /// the daemon's warm session outlives its token and must refresh it.
    TokenExpiry { lifetime_ms: u64 },
    /// Invocation `action` (1-based) runs with caller deadline `timeout_ms`: a user or a script
    /// passing a small (< 250 ms) or a large `timeoutMs`.
    CallerDeadline { action: usize, timeout_ms: u64 },
    /// The user edits the config file at `at_ms`: the running daemon's metadata goes stale.
    ConfigEdit {
        at_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
    /// A peer runs `daemon start` at `at_ms`, bypassing the start lock: a daemon of `version`
    /// takes over the metadata (with the config from before the last edit when `old_config`:
    /// a peer that read it earlier). The only way a daemon is swapped during a drain.
    PeerStart {
        at_ms: u64,
        version: u64,
        #[serde(default)]
        old_config: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
}

/// A moment of the workload a timed fault's onset may wait for (a windowed fault's end keeps
/// its distance from the start). It aims a fault at a phase that lasts a tick or two (the
/// daemon asks for the next page at once) or comes only after another fault (a restart), which
/// an onset drawn in time hardly ever meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Anchor {
    /// A CLI has just written a request: nothing has reached the daemon yet.
    BeforeDispatch,
    /// The MCP server has just answered a page with a next cursor.
    BetweenPages,
    /// An action has just begun restarting its daemon after a transport failure. Restarts are
    /// rare and may come early: the fault starts at the first one before its `at_ms`, else at
    /// its `at_ms`. (The others wait from `at_ms` for their moment, or for the CLI to have run
    /// every invocation.)
    Recovery,
}


/// The kinds, for swarm profiles.
pub const KINDS: &[&str] = &[
    "approval_delay",
    "approval_never",
    "page_delay",
    "repeated_cursor",
    "endless_cursors",
    "wedged_method",
    "slow_tool",
    "daemon_stall",
    "daemon_crash",
    "socket_reset",
    "caller_deadline",
    "token_expiry",
    "keep_open",
    "crossed_frames",
    "process_hang",
];

/// The lifecycle operations a scenario places in time besides its invocations (a daemon crash
/// is `daemon_crash`), drawn by the lifecycle generator: the lifecycle guards must hold through
/// them. A config edit and a peer start are no disruptions; another CLI hung holding the start
/// lock (`stale_lock`) is one while it lives.
pub const LIFECYCLE: &[&str] = &["config_edit", "peer_start", "stale_lock"];

/// The kinds that disturb the daemon or its socket: a request they touch may legitimately fail,
/// be retried, relaunch the daemon and run twice.
pub const DISRUPTIVE: &[&str] = &[
    "daemon_stall",
    "daemon_crash",
    "socket_reset",
    "crossed_frames",
    "process_hang",
    "stale_lock",
];

/// The kinds that hold for a window: `fault.injected` has a start and an end phase.
pub const WINDOWED: &[&str] = &["daemon_stall", "crossed_frames", "process_hang", "stale_lock"];

impl DaemonFault {
    /// The kind's name, as in [`KINDS`].
    pub fn name(&self) -> &'static str {
        match self {
            Self::ApprovalDelay { .. } => "approval_delay",
            Self::ApprovalNever => "approval_never",
            Self::PageDelay { .. } => "page_delay",
            Self::RepeatedCursor { .. } => "repeated_cursor",
            Self::EndlessCursors => "endless_cursors",
            Self::WedgedMethod { .. } => "wedged_method",
            Self::SlowTool { .. } => "slow_tool",
            Self::DaemonStall { .. } => "daemon_stall",
            Self::DaemonCrash { .. } => "daemon_crash",
            Self::ProcessHang { .. } => "process_hang",
            Self::StaleLock { .. } => "stale_lock",
            Self::SocketReset { .. } => "socket_reset",
            Self::CallerDeadline { .. } => "caller_deadline",
            Self::TokenExpiry { .. } => "token_expiry",
            Self::KeepOpen { .. } => "keep_open",
            Self::CrossedFrames { .. } => "crossed_frames",
            Self::ConfigEdit { .. } => "config_edit",
            Self::PeerStart { .. } => "peer_start",
        }
    }

    /// When it starts and, for windowed faults, when it ends (an anchored start may come later
    /// and take its end with it).
    pub fn window(&self) -> (u64, Option<u64>) {
        match self {
            Self::DaemonStall { at_ms, for_ms, .. }
            | Self::CrossedFrames { at_ms, for_ms, .. }
            | Self::ProcessHang { at_ms, for_ms, .. }
            | Self::StaleLock { at_ms, for_ms, .. } => (*at_ms, Some(at_ms + for_ms)),
            Self::DaemonCrash { at_ms, .. }
            | Self::SocketReset { at_ms, .. }
            | Self::ConfigEdit { at_ms, .. }
            | Self::PeerStart { at_ms, .. } => (*at_ms, None),
            _ => (0, None),
        }
    }

    /// The moment a timed fault's onset waits for, if any.
    pub fn anchor(&self) -> Option<Anchor> {
        self.clone().anchor_mut().and_then(|anchor| *anchor)
    }

    /// A timed fault's anchor, to set (`None` for a fault placed at time 0, which has no onset
    /// to anchor).
    pub fn anchor_mut(&mut self) -> Option<&mut Option<Anchor>> {
        match self {
            Self::DaemonStall { anchor, .. }
            | Self::CrossedFrames { anchor, .. }
            | Self::ProcessHang { anchor, .. }
            | Self::StaleLock { anchor, .. }
            | Self::DaemonCrash { anchor, .. }
            | Self::SocketReset { anchor, .. }
            | Self::ConfigEdit { anchor, .. }
            | Self::PeerStart { anchor, .. } => Some(anchor),
            _ => None,
        }
    }
}

/// What faults act on.
pub struct Targets<'a> {
    pub mcp: &'a SharedMcpKnobs,
    pub browser: &'a SharedBrowserKnobs,
    pub daemon: &'a SharedDaemonKnobs,
    pub cli: &'a SharedCliKnobs,
    pub machine: &'a Machine,
    pub tokens: &'a SharedIssued,
    /// The pids of the hung CLIs `stale_lock` started and has not killed yet.
    pub strays: &'a RefCell<Vec<u64>>,
}

/// Apply one phase of a fault, recording it.
pub fn apply(fault: &DaemonFault, phase: Phase, targets: &Targets<'_>) {
    let detail = serde_json::to_string(fault).unwrap_or_default();
    let phase_name = if phase == Phase::Start {
        "start"
    } else {
        "end"
    };
    emit!(kind::FAULT_INJECTED, fault = fault.name(), phase = phase_name, detail = %detail);
    let on = phase == Phase::Start;
    let mut mcp = lock(targets.mcp);
    match fault {
        DaemonFault::ApprovalDelay { delay_ms } => {
            lock(targets.browser).approval = Approval::After(*delay_ms);
        }
        DaemonFault::ApprovalNever => lock(targets.browser).approval = Approval::Never,
        DaemonFault::PageDelay { page, delay_ms } => {
            mcp.page_delays.insert(*page, *delay_ms);
        }
        DaemonFault::RepeatedCursor { page } => mcp.repeat_at_page = Some(*page),
        DaemonFault::EndlessCursors => mcp.endless = true,
        // An authorization server's endpoint is named by its path, an MCP method by its name.
        DaemonFault::WedgedMethod { method } if method.starts_with('/') => {
            lock(targets.tokens).wedged.insert(method.clone());
        }
        DaemonFault::WedgedMethod { method } => {
            mcp.wedged.insert(method.clone());
        }
        DaemonFault::SlowTool { run_ms } => mcp.slow_tool_ms = Some(*run_ms),
        DaemonFault::DaemonStall { .. } => {
            let mut daemon = lock(targets.daemon);
            daemon.stall = on;
            daemon.notify();
        }
        DaemonFault::ProcessHang { .. } => {
            let mut daemon = lock(targets.daemon);
            daemon.hang = on;
            daemon.notify();
        }
        DaemonFault::StaleLock { .. } if on => {
            let pid = targets.machine.begin_cli();
            // It takes the lock if nobody holds it; otherwise it hangs waiting and holds nothing.
            targets.machine.try_lock(START_LOCK, pid);
            targets.strays.borrow_mut().push(pid);
        }
        DaemonFault::StaleLock { .. } => end_strays(targets.machine, targets.strays),
        DaemonFault::KeepOpen { hold_ms } => lock(targets.daemon).hold_open_ms = *hold_ms,
        DaemonFault::CrossedFrames { .. } => lock(targets.daemon).crossed_frames = on,
        DaemonFault::DaemonCrash { .. } => {
            for pid in targets.machine.live_pids() {
                targets.machine.kill(pid, Exit::Crash);
            }
        }
        DaemonFault::SocketReset { .. } => {
            let mut daemon = lock(targets.daemon);
            daemon.reset_epoch += 1;
            daemon.notify();
        }
        DaemonFault::TokenExpiry { lifetime_ms } => lock(targets.tokens).lifetime_ms = *lifetime_ms,
        DaemonFault::CallerDeadline { action, timeout_ms } => {
            lock(targets.cli).deadlines.insert(*action, *timeout_ms);
        }
        DaemonFault::ConfigEdit { .. } => {
            targets.machine.edit_config();
        }
        DaemonFault::PeerStart {
            version,
            old_config,
            ..
        } => {
            let machine = targets.machine;
            let config = if *old_config {
                machine.previous_config()
            } else {
                machine.config()
            };
            machine.request_launch_of(*version, config);
        }
    }
}

/// Kill the hung CLIs: the lock files they hold stay, naming dead pids.
fn end_strays(machine: &Machine, strays: &RefCell<Vec<u64>>) {
    for pid in strays.borrow_mut().drain(..) {
        machine.end_cli(pid);
    }
}

/// Stop injecting: end a stall, a hang, crossed frames and a hung CLI (its stale lock stays).
/// Mock faults (and a lazily closing socket) stay: liveness must hold against a wedged server.
pub fn heal(daemon: &SharedDaemonKnobs, machine: &Machine, strays: &RefCell<Vec<u64>>) {
    end_strays(machine, strays);
    let mut daemon = lock(daemon);
    daemon.stall = false;
    daemon.hang = false;
    daemon.crossed_frames = false;
    daemon.notify();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_round_trip_through_json() {
        let faults = vec![
            DaemonFault::ApprovalNever,
            DaemonFault::DaemonStall {
                at_ms: 10,
                for_ms: 20,
                anchor: Some(Anchor::BetweenPages),
            },
            DaemonFault::WedgedMethod {
                method: "tools/call".into(),
            },
            DaemonFault::CallerDeadline {
                action: 1,
                timeout_ms: 30,
            },
        ];
        let text = serde_json::to_string(&faults).unwrap();
        assert!(text.contains(r#"{"fault":"approval_never"}"#), "{text}");
        assert!(text.contains(r#""anchor":"between_pages""#), "{text}");
        let plain = DaemonFault::DaemonCrash { at_ms: 5, anchor: None };
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"fault":"daemon_crash","at_ms":5}"#);
        let back: Vec<DaemonFault> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, faults);
        for fault in &faults {
            assert!(KINDS.contains(&fault.name()));
        }
        assert_eq!(faults[1].window(), (10, Some(30)));
        assert_eq!(faults[3].window(), (0, None));
    }
}
