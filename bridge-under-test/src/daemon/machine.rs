//! The user's machine as the CLI and the daemon share it: the daemon metadata file, lock files,
//! the config file (its fingerprint; an edit makes the metadata stale) and the process table
//! (launch with a protocol version, kill, liveness by pid) and the CLI invocations running now
//! (each has a pid of its own, which its lock files record). It is plain in-sim state outside
//! any host's software, so it survives a daemon crash like a real filesystem does. Every change
//! of a lock file is a `machine.lock` event: the filesystem's own record, not the CLI's.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::emit;
use crate::events::kind;

/// The first pid a CLI invocation gets: CLI pids count up from here, apart from daemon pids.
pub const FIRST_CLI_PID: u64 = 1_001;

/// The daemon metadata file (MODEL.md §2.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub pid: u64,
    pub protocol_version: u64,
    /// The daemon's local socket: a TCP port on the daemon host.
    pub socket: u16,
    pub config_fingerprint: String,
    pub started_at: u64,
}

/// Why a daemon process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It answered `stop` and shut down.
    Stop,
    /// It died on its own (a fault).
    Crash,
    /// A client killed it by pid.
    Kill,
    /// The metadata names another daemon and this one had nothing left in flight.
    Superseded,
}

impl Exit {
    pub fn name(self) -> &'static str {
        match self {
            Exit::Stop => "stop",
            Exit::Crash => "crash",
            Exit::Kill => "kill",
            Exit::Superseded => "superseded",
        }
    }
}

#[derive(Debug, Default)]
struct State {
    metadata: Option<Metadata>,
    last_pid: u64,
    launches: VecDeque<u64>,
    /// The protocol version and config fingerprint each launched pid starts with.
    versions: BTreeMap<u64, (u64, String)>,
    /// Edits of the config file so far: the fingerprint is `config-<edits + 1>`.
    config_edits: u64,
    kills: VecDeque<(u64, Exit)>,
    alive: BTreeSet<u64>,
    /// Each held lock file and the pid written into it.
    locks: BTreeMap<String, u64>,
    /// The CLI invocations running now, by pid.
    clis: BTreeSet<u64>,
    last_cli: u64,
    exits: BTreeMap<u64, Exit>,
}

/// The shared machine. Wakes `changed` on every process-table change.
#[derive(Debug, Default)]
pub struct Machine {
    state: RefCell<State>,
    pub changed: Notify,
}

impl Machine {
    pub fn shared() -> Rc<Machine> {
        Rc::new(Machine::default())
    }

    pub fn metadata(&self) -> Option<Metadata> {
        self.state.borrow().metadata.clone()
    }

    pub fn write_metadata(&self, metadata: Metadata) {
        let pid = metadata.pid;
        self.state.borrow_mut().metadata = Some(metadata);
        emit!(kind::MACHINE_METADATA, pid, op = "write");
    }

    /// Remove the metadata only if it names `pid`: a daemon never deletes another's file.
    pub fn remove_metadata_of(&self, pid: u64) -> bool {
        let mut state = self.state.borrow_mut();
        let own = state.metadata.as_ref().is_some_and(|m| m.pid == pid);
        if own {
            state.metadata = None;
            drop(state);
            emit!(kind::MACHINE_METADATA, pid, op = "remove");
        }
        own
    }

    /// The config file's fingerprint as a daemon or a client reads it now.
    pub fn config(&self) -> String {
        format!("config-{}", self.state.borrow().config_edits + 1)
    }

    /// The user edits the config file: a new fingerprint.
    pub fn edit_config(&self) -> String {
        self.state.borrow_mut().config_edits += 1;
        self.config()
    }

    /// The fingerprint the config file had before its last edit (the current one if never
    /// edited): what a peer that read the config before the edit still uses.
    pub fn previous_config(&self) -> String {
        format!("config-{}", self.state.borrow().config_edits.max(1))
    }

    /// Ask for a daemon process of the current protocol version and config.
    pub fn request_launch(&self) -> u64 {
        self.request_launch_of(super::config::PROTOCOL_VERSION, self.config())
    }

    /// The protocol version and config fingerprint `pid` was launched with.
    pub fn launched_with(&self, pid: u64) -> (u64, String) {
        let state = self.state.borrow();
        let current = || (super::config::PROTOCOL_VERSION, "config-1".to_string());
        state.versions.get(&pid).cloned().unwrap_or_else(current)
    }

    /// Ask for a daemon process speaking `version` with `config`; returns the pid it will have
    /// (pids are never reused).
    pub fn request_launch_of(&self, version: u64, config: String) -> u64 {
        let pid = {
            let mut state = self.state.borrow_mut();
            state.last_pid += 1;
            let pid = state.last_pid;
            state.launches.push_back(pid);
            state.versions.insert(pid, (version, config));
            state.alive.insert(pid);
            pid
        };
        self.changed.notify_waiters();
        pid
    }

    pub fn take_launch(&self) -> Option<u64> {
        self.state.borrow_mut().launches.pop_front()
    }

    /// Ask for `pid` to be killed; `Crash` when a fault does it.
    pub fn kill(&self, pid: u64, why: Exit) {
        if self.alive(pid) {
            self.state.borrow_mut().kills.push_back((pid, why));
            self.changed.notify_waiters();
        }
    }

    pub fn take_kill(&self) -> Option<(u64, Exit)> {
        self.state.borrow_mut().kills.pop_front()
    }

    /// Record that `pid` has ended.
    pub fn exited(&self, pid: u64, why: Exit) {
        let mut state = self.state.borrow_mut();
        state.alive.remove(&pid);
        state.exits.insert(pid, why);
        drop(state);
        self.changed.notify_waiters();
    }

    /// `kill -0 pid`.
    pub fn alive(&self, pid: u64) -> bool {
        self.state.borrow().alive.contains(&pid)
    }

    /// The live pids, oldest first.
    pub fn live_pids(&self) -> Vec<u64> {
        self.state.borrow().alive.iter().copied().collect()
    }

    /// A CLI invocation begins: its pid.
    pub fn begin_cli(&self) -> u64 {
        let mut state = self.state.borrow_mut();
        let pid = FIRST_CLI_PID + state.last_cli;
        state.last_cli += 1;
        state.clis.insert(pid);
        pid
    }

    /// CLI `pid` ends, normally or killed: a lock file it still holds stays on disk, naming a
    /// dead pid (`op=orphan`).
    pub fn end_cli(&self, pid: u64) {
        let mut state = self.state.borrow_mut();
        state.clis.remove(&pid);
        let orphans: Vec<String> = state
            .locks
            .iter()
            .filter(|(_, holder)| **holder == pid)
            .map(|(name, _)| name.clone())
            .collect();
        drop(state);
        for name in orphans {
            emit!(kind::MACHINE_LOCK, lock = %name, holder = pid, op = "orphan");
        }
    }

    /// Create lock file `name` holding `holder`'s pid (`O_EXCL`); `false` if it exists.
    pub fn try_lock(&self, name: &str, holder: u64) -> bool {
        let mut state = self.state.borrow_mut();
        if state.locks.contains_key(name) {
            return false;
        }
        state.locks.insert(name.to_string(), holder);
        drop(state);
        emit!(kind::MACHINE_LOCK, lock = name, holder, op = "take");
        true
    }

    /// The pid lock file `name` names, if it exists.
    pub fn lock_holder(&self, name: &str) -> Option<u64> {
        self.state.borrow().locks.get(name).copied()
    }

    /// Remove lock file `name` if it still names `holder` and `holder` is not running: a stale
    /// lock left by a killed CLI. `false` if it names another pid now or its holder lives.
    pub fn break_lock(&self, name: &str, holder: u64) -> bool {
        let mut state = self.state.borrow_mut();
        let stale = state.locks.get(name) == Some(&holder) && !state.clis.contains(&holder);
        if stale {
            state.locks.remove(name);
            drop(state);
            emit!(kind::MACHINE_LOCK, lock = name, holder, op = "break");
        }
        stale
    }

    /// The lock files held now, as `name@pid`.
    pub fn locks(&self) -> Vec<String> {
        let state = self.state.borrow();
        state.locks.iter().map(|(name, pid)| format!("{name}@{pid}")).collect()
    }

    /// Remove lock file `name`, which `holder` holds.
    pub fn unlock(&self, name: &str, holder: u64) {
        let mut state = self.state.borrow_mut();
        if state.locks.get(name) == Some(&holder) {
            state.locks.remove(name);
            drop(state);
            emit!(kind::MACHINE_LOCK, lock = name, holder, op = "free");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_are_fresh_and_metadata_is_removed_only_by_its_owner() {
        let machine = Machine::default();
        let (a, b) = (machine.request_launch(), machine.request_launch());
        assert_eq!((a, b), (1, 2));
        assert_eq!(machine.take_launch(), Some(1));
        let metadata = Metadata {
            pid: 2,
            protocol_version: 2,
            socket: 7002,
            config_fingerprint: "f".into(),
            started_at: 0,
        };
        machine.write_metadata(metadata);
        assert!(!machine.remove_metadata_of(1));
        assert!(machine.remove_metadata_of(2));
        machine.kill(1, Exit::Kill);
        assert_eq!(machine.take_kill(), Some((1, Exit::Kill)));
        machine.exited(1, Exit::Kill);
        assert!(!machine.alive(1) && machine.alive(2));
        let (cli, other) = (machine.begin_cli(), machine.begin_cli());
        assert_eq!((cli, other), (FIRST_CLI_PID, FIRST_CLI_PID + 1));
        assert!(machine.try_lock("start", cli) && !machine.try_lock("start", other));
        assert!(!machine.break_lock("start", cli), "its holder is running");
        machine.unlock("start", other);
        assert_eq!(machine.lock_holder("start"), Some(cli), "only its holder frees it");
        machine.end_cli(cli);
        assert_eq!(machine.locks(), ["start@1001"], "a killed holder leaves its lock file");
        assert!(!machine.break_lock("start", other), "it names another pid");
        assert!(machine.break_lock("start", cli) && machine.try_lock("start", other));
    }
}
