//! The daemon family in the harness: its scenario, how it is set up in a simulation, its spec
//! (the constants checkers judge against), faults, generators and checkers. [`DAEMON`] is the
//! family as the engines see it.

pub mod checks;
pub mod coverage;
pub mod excuses;
pub mod faults;
pub mod honesty;
pub mod interleavings;
pub mod lifecycle;
pub mod lifecycle_strategy;
pub mod strategy;
pub mod waits;

use std::rc::Rc;
use std::sync::{Arc, Mutex};

use bridge_under_test::daemon::client::{self, Cli, CliKnobs, Invocation, SharedCliKnobs};
use bridge_under_test::daemon::knobs::{
    lock, Approval, BrowserKnobs, DaemonKnobs, McpKnobs, SharedBrowserKnobs, SharedDaemonKnobs,
    SharedMcpKnobs,
};
use bridge_under_test::daemon::machine::Machine;
use bridge_under_test::daemon::process::{self, DaemonConfig};
use bridge_under_test::daemon::{browser, mcp, oauth, DaemonBugs, Rules, Timing};
use bridge_under_test::emit;
use bridge_under_test::events::{host, kind};
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};

use crate::family::{self, Family, FamilyScenario, Scenario, Scheduled, SimParams};
use crate::seed::derive;
use faults::{Anchor, DaemonFault, Targets};

/// Everything a daemon run depends on besides the simulator's own parameters. In a scenario
/// file `bugs` (all off), `timing` (MODEL.md's), `faults` (none) and `profile` may be left out; a
/// field this does not name is an error, not silently ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonScenario {
    #[serde(default)]
    pub bugs: DaemonBugs,
    #[serde(default)]
    pub timing: Timing,
    /// Pages in a `tools/list` listing.
    pub pages: u32,
    /// How long the user takes to approve a prompt when no fault says otherwise.
    pub approval_ms: u64,
    pub invocations: Vec<Invocation>,
    #[serde(default)]
    pub faults: Vec<DaemonFault>,
    /// The swarm profile: which fault kinds this seed turned on.
    #[serde(default)]
    pub profile: Vec<String>,
}

impl DaemonScenario {
    /// The caller deadline of each invocation (1-based action order), after deadline faults.
    pub fn deadlines(&self) -> Vec<Option<u64>> {
        let mut deadlines: Vec<Option<u64>> =
            self.invocations.iter().map(|i| i.timeout_ms).collect();
        for fault in &self.faults {
            if let DaemonFault::CallerDeadline { action, timeout_ms } = fault {
                if let Some(slot) = action.checked_sub(1).and_then(|i| deadlines.get_mut(i)) {
                    *slot = Some(*timeout_ms);
                }
            }
        }
        deadlines
    }
}

/// The daemon family, as the engines see it: CLI invocations sharing a keep-alive daemon, its
/// warm connection to an MCP server behind OAuth, the authorization server and the browser.
pub const DAEMON: Family = Family {
    name: "daemon",
    switches: DaemonBugs::NAMES,
    strategy: |bugs, seed| case_strategy(family::switches_on(bugs, DaemonBugs::enable), seed),
    scenario_tag: "daemon",
    read: family::read::<DaemonScenario>,
    check: checks::check,
    coverage_tables: coverage::TABLES,
    observe: coverage::observe,
};

impl FamilyScenario for DaemonScenario {
    fn family(&self) -> &'static Family {
        &DAEMON
    }

    fn setup(&self, seed: u64, sim: &mut turmoil::Sim<'_>) -> Box<dyn family::Driver> {
        Box::new(Driver::setup(self, seed, sim))
    }

    fn summary(&self) -> String {
        format!("{} invocations, {} faults", self.invocations.len(), self.faults.len())
    }

    fn size(&self) -> usize {
        self.invocations.len() + self.faults.len()
    }

    fn clear_bugs(&mut self) {
        self.bugs = DaemonBugs::default();
    }

    fn enable_bugs(&mut self, bugs: &[&str]) -> Result<(), String> {
        bugs.iter().try_for_each(|bug| self.bugs.enable(bug))
    }
}

/// The spec: MODEL.md §2.3's bounds as the checkers read them from `run.spec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub timing: Timing,
    /// Scheduling slack: ticks between the CLI, the daemon and the servers.
    pub slack_ms: u64,
}

impl Spec {
    pub fn new(timing: Timing, tick_ms: u64) -> Self {
        Self {
            timing,
            slack_ms: 8 * tick_ms,
        }
    }
}

/// A daemon scenario set up inside a simulation: holds what faults act on.
pub struct Driver {
    scenario: DaemonScenario,
    mcp: SharedMcpKnobs,
    browser: SharedBrowserKnobs,
    daemon: SharedDaemonKnobs,
    cli: SharedCliKnobs,
    machine: Rc<Machine>,
    tokens: oauth::SharedIssued,
    strays: std::cell::RefCell<Vec<u64>>,
    /// Each fault's anchor, read once: the step loop asks about it while the fault waits.
    anchors: Vec<Option<Anchor>>,
    /// Per anchored fault waiting for its moment: its anchor's counter when it fell due.
    baselines: std::cell::RefCell<std::collections::BTreeMap<usize, u64>>,
}

impl Driver {
    /// Register the hosts (cli, daemon, mcp, oauth, browser) in `sim`, seeded from `seed`.
    pub fn setup(scenario: &DaemonScenario, seed: u64, sim: &mut turmoil::Sim<'_>) -> Self {
        let rules = Rules {
            timing: scenario.timing,
            bugs: scenario.bugs,
        };
        let machine = Machine::shared();
        let issued: oauth::SharedIssued = Arc::new(Mutex::new(oauth::Issued::default()));
        let mcp_knobs = Arc::new(Mutex::new(McpKnobs {
            pages: scenario.pages,
            ..McpKnobs::default()
        }));
        let approval = Approval::After(scenario.approval_ms);
        let browser_knobs = Arc::new(Mutex::new(BrowserKnobs { approval }));
        let daemon_knobs = DaemonKnobs::shared();
        let cli_knobs = Arc::new(Mutex::new(CliKnobs::default()));
        let (knobs, tokens) = (mcp_knobs.clone(), issued.clone());
        family::host(sim, host::MCP, move || mcp::run(knobs.clone(), tokens.clone()));
        let oauth_seed = derive(seed, "oauth");
        let tokens = issued.clone();
        family::host(sim, host::OAUTH, move || oauth::run(oauth_seed, issued.clone()));
        let knobs = browser_knobs.clone();
        family::host(sim, host::BROWSER, move || browser::run(knobs.clone()));
        let config = DaemonConfig {
            rules,
            seed: derive(seed, "daemon"),
        };
        let (knobs, table) = (daemon_knobs.clone(), machine.clone());
        family::host(sim, host::DAEMON, move || {
            process::supervise(table.clone(), config.clone(), knobs.clone())
        });
        let cli = Cli {
            rules,
            machine: machine.clone(),
            knobs: cli_knobs.clone(),
        };
        // The last fault phase is where the runner heals: the report comes after it.
        let heal_at_ms = family::schedule(&scenario.faults, DaemonFault::window).last().map(|s| s.at_ms);
        let report_after_ms = heal_at_ms.map_or(0, |at| at + strategy::tick_ms(scenario));
        family::client(sim, host::CLI, client::run(cli, scenario.invocations.clone(), report_after_ms));
        Self {
            scenario: scenario.clone(),
            mcp: mcp_knobs,
            browser: browser_knobs,
            daemon: daemon_knobs,
            cli: cli_knobs,
            machine,
            tokens,
            strays: Default::default(),
            anchors: scenario.faults.iter().map(DaemonFault::anchor).collect(),
            baselines: Default::default(),
        }
    }

    /// How often the moment `anchor` names has happened so far.
    fn moments(&self, anchor: Anchor) -> u64 {
        match anchor {
            Anchor::BeforeDispatch => lock(&self.cli).sends,
            Anchor::BetweenPages => lock(&self.mcp).cursor_pages,
            Anchor::Recovery => lock(&self.cli).restarts,
        }
    }
}

/// The fault plan's phases. A start anchored to a request's phase waits from its `at_ms` for
/// the next such moment, as long as the CLI runs; one anchored to a restart starts at the first
/// restart before its `at_ms`, or at its `at_ms` (restarts are rare: it stays a timed fault).
fn schedule(faults: &[DaemonFault]) -> Vec<Scheduled> {
    let mut schedule = family::schedule(faults, DaemonFault::window);
    for phase in &mut schedule {
        if phase.phase != family::Phase::Start {
            continue;
        }
        phase.watch = match faults[phase.fault].anchor() {
            None => None,
            Some(Anchor::Recovery) => Some((0, phase.at_ms)),
            Some(_) => Some((phase.at_ms, u64::MAX)),
        };
    }
    schedule
}

impl family::Driver for Driver {
    fn emit_spec(&self, params: &SimParams) {
        let spec = Spec::new(self.scenario.timing, params.tick_ms);
        emit!(
            kind::RUN_SPEC,
            family = "daemon",
            oauth_timeout_ms = spec.timing.oauth_timeout_ms,
            sdk_request_timeout_ms = spec.timing.sdk_request_timeout_ms,
            daemon_timeout_ms = spec.timing.daemon_timeout_ms,
            max_pages = u64::from(bridge_under_test::daemon::config::MAX_PAGES),
            slack_ms = spec.slack_ms,
            horizon_ms = params.horizon_ms,
            invocations = self.scenario.invocations.len() as u64,
            bugs = %self.scenario.bugs.enabled().join("+"),
            profile = %self.scenario.profile.join("+")
        );
    }

    fn schedule(&self) -> Vec<Scheduled> {
        schedule(&self.scenario.faults)
    }

    fn anchor_met(&self, scheduled: &Scheduled) -> bool {
        let Some(anchor) = self.anchors[scheduled.fault] else {
            return true;
        };
        let now = self.moments(anchor);
        let since = *self.baselines.borrow_mut().entry(scheduled.fault).or_insert(now);
        since < now || (anchor != Anchor::Recovery && lock(&self.cli).finished)
    }

    fn apply(&self, scheduled: &Scheduled, _sim: &mut turmoil::Sim<'_>) {
        let targets = Targets {
            mcp: &self.mcp,
            browser: &self.browser,
            daemon: &self.daemon,
            cli: &self.cli,
            machine: &self.machine,
            tokens: &self.tokens,
            strays: &self.strays,
        };
        faults::apply(
            &self.scenario.faults[scheduled.fault],
            scheduled.phase,
            &targets,
        );
    }

    fn heal(&self, _sim: &mut turmoil::Sim<'_>) {
        faults::heal(&self.daemon, &self.machine, &self.strays);
        let mut cli = lock(&self.cli);
        cli.healed = true;
        cli.heal.notify_waiters();
    }
}

/// The whole-scenario strategy for a daemon case: the family's scenario plus the simulator
/// parameters that suit it (see [`strategy::tick_ms`] for the tick).
pub fn case_strategy(bugs: DaemonBugs, seed: u64) -> BoxedStrategy<Scenario> {
    use proptest::prelude::*;
    let daemon = prop_oneof![
        1 => strategy::scenario(bugs).boxed(),
        1 => lifecycle_strategy::scenario(bugs).boxed(),
    ];
    (daemon, any::<bool>())
        .prop_map(move |(daemon, random_order)| scenario(seed, daemon, random_order))
        .boxed()
}

/// A scenario with the family's tick and a horizon that lets every invocation end.
pub fn scenario(seed: u64, daemon: DaemonScenario, random_order: bool) -> Scenario {
    let tick_ms = strategy::tick_ms(&daemon);
    let horizon_ms = strategy::horizon_ms(&daemon, tick_ms);
    let sim = SimParams {
        tick_ms,
        latency_max_ms: 0,
        random_order,
        horizon_ms,
    };
    Scenario {
        seed,
        sim,
        family: Box::new(daemon),
    }
}
