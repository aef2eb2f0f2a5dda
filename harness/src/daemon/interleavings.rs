//! How often a trace shows the races the daemon replacement rules guard against, for judging
//! the generator: a switch found by luck is not enough. Counted from the client's drain probes
//! (`cli.probe`, recorded before any filtering) and replacement decisions.

use std::collections::BTreeMap;

use bridge_under_test::events::kind;

use super::lifecycle::lock_wait_refusals;
use crate::trace::Trace;

/// The lifecycle interleavings one trace exhibits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interleavings {
    /// A client replaced (or tried to) a daemon that was serving another client's request.
    pub mid_request_upgrade: bool,
    /// A replacement's first probe found a daemon other than the one it meant: a peer had
    /// already replaced it.
    pub swap_before_drain: bool,
    /// A later drain probe found another daemon: a peer swapped it during the drain.
    pub swap_mid_drain: bool,
    /// A CLI broke a start lock that a killed CLI had left.
    pub stale_lock_broken: bool,
    /// An action gave up waiting for the start lock: refused before any probe or launch.
    pub lock_wait_refused: bool,
}

impl Interleavings {
    /// Read them from a trace.
    pub fn of(trace: &Trace) -> Self {
        let mut found = Self::default();
        let mut polls: BTreeMap<u64, u64> = BTreeMap::new();
        found.lock_wait_refused = !lock_wait_refusals(trace).is_empty();
        for event in &trace.events {
            let action = event.num("action");
            match event.kind.as_str() {
                kind::CLI_LOCK_BREAK => found.stale_lock_broken = true,
                kind::CLI_PROBE => {
                    let n = polls.entry(action).or_default();
                    *n += 1;
                    let (pid, target) = (event.num("pid"), event.num("target"));
                    let swapped = pid != 0 && pid != target;
                    found.swap_before_drain |= swapped && *n == 1;
                    found.swap_mid_drain |= swapped && *n > 1;
                    let busy = !matches!(event.text("active").as_str(), "" | "0");
                    found.mid_request_upgrade |= pid != 0 && pid == target && busy;
                }
                kind::CLI_REPLACE => {
                    polls.remove(&action);
                }
                _ => {}
            }
        }
        found
    }
}

/// Per-kind counts over many traces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub scenarios: u64,
    pub mid_request_upgrade: u64,
    pub swap_before_drain: u64,
    pub swap_mid_drain: u64,
}

impl Tally {
    pub fn add(&mut self, trace: &Trace) {
        let seen = Interleavings::of(trace);
        self.scenarios += 1;
        self.mid_request_upgrade += u64::from(seen.mid_request_upgrade);
        self.swap_before_drain += u64::from(seen.swap_before_drain);
        self.swap_mid_drain += u64::from(seen.swap_mid_drain);
    }

    /// `count` scaled to per 1 000 scenarios.
    pub fn per_mille(&self, count: u64) -> u64 {
        count * 1_000 / self.scenarios.max(1)
    }
}
