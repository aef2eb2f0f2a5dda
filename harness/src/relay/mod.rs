//! The relay family in the harness: its scenario, how it is set up in a simulation, its spec
//! (the constants checkers judge against), faults, generators and checkers. [`RELAY`] is the
//! family as the engines see it.

pub mod admission_checks;
pub mod checks;
pub mod coverage;
pub mod faults;
pub mod handshake_checks;
pub mod oracles;
pub mod outcome_checks;
pub mod order_checks;
pub mod profile;
pub mod retry_checks;
pub mod story;
pub mod strategy;
pub mod stream_checks;
pub mod traffic_checks;
pub mod wire;

use std::sync::{Arc, Mutex};

use bridge_under_test::emit;
use bridge_under_test::events::{host, kind};
use bridge_under_test::relay::client::{self, ClientScript};
use bridge_under_test::relay::knobs::SharedKnobs;
use bridge_under_test::relay::relayer::{self, Durable};
use bridge_under_test::relay::{bridge, BridgeConfig, RelayBugs, RelayerConfig, RelayerKnobs};
use bridge_under_test::stdio;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::family::{self, Family, FamilyScenario, Scenario, Scheduled, SimParams};
use crate::seed::derive;
use faults::{RelayFault, Targets};

/// The timing constants of one relay scenario (MODEL.md §1.3 by default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Timing {
    pub sse_idle_ms: u64,
    pub first_keepalive_ms: u64,
    pub keepalive_ms: u64,
    /// `analyze`'s own deadline: the slowest tool.
    pub slowest_tool_ms: u64,
    pub remember_deadline_ms: u64,
    pub deadline_margin_ms: u64,
    /// An explicit per-call deadline for the bridge.
    pub call_timeout_ms: Option<u64>,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            sse_idle_ms: 30_000,
            first_keepalive_ms: 200,
            keepalive_ms: 3_000,
            slowest_tool_ms: 180_000,
            remember_deadline_ms: 90_000,
            deadline_margin_ms: 60_000,
            call_timeout_ms: None,
        }
    }
}

/// The spec: what MODEL.md says the deadlines are, computed here independently of the bridge (an
/// oracle must not share the code it judges).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub call_timeout_ms: u64,
    pub sweep_period_ms: u64,
    /// Scheduling slack: ticks and link latency between the client, the bridge and the relayer.
    pub slack_ms: u64,
}

impl Spec {
    pub fn new(timing: &Timing, tick_ms: u64, latency_max_ms: u64) -> Self {
        let call_timeout_ms = match timing.call_timeout_ms {
            Some(ms) if ms >= 1_000 => ms,
            _ => timing.slowest_tool_ms + timing.deadline_margin_ms,
        };
        let sweep_period_ms = (call_timeout_ms / 3).clamp(500, 5_000);
        Self { call_timeout_ms, sweep_period_ms, slack_ms: 4 * tick_ms + 2 * latency_max_ms }
    }
}

/// Everything a relay run depends on besides the simulator's own parameters.
/// In a scenario file `bugs` (all off), `timing` (MODEL.md's constants), `faults` (none) and
/// `profile` may be left out; a field this does not name is an error, not silently ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelayScenario {
    #[serde(default)]
    pub bugs: RelayBugs,
    #[serde(default)]
    pub timing: Timing,
    pub script: ClientScript,
    #[serde(default)]
    pub faults: Vec<RelayFault>,
    /// The swarm profile: which fault kinds this seed turned on.
    #[serde(default)]
    pub profile: Vec<String>,
}

/// The relay family, as the engines see it: a stdio-to-SSE bridge between a scripted MCP client
/// and a mock relayer.
pub const RELAY: Family = Family {
    name: "relay",
    switches: RelayBugs::NAMES,
    strategy: |bugs, seed| case_strategy(family::switches_on(bugs, RelayBugs::enable), seed),
    scenario_tag: "relay",
    read: family::read::<RelayScenario>,
    check: checks::check,
    coverage_tables: coverage::TABLES,
    observe: coverage::observe,
};

impl FamilyScenario for RelayScenario {
    fn family(&self) -> &'static Family {
        &RELAY
    }

    fn setup(&self, seed: u64, sim: &mut turmoil::Sim<'_>) -> Box<dyn family::Driver> {
        Box::new(Driver::setup(self, seed, sim))
    }

    fn summary(&self) -> String {
        format!("{} steps, {} faults", self.script.steps.len(), self.faults.len())
    }

    fn size(&self) -> usize {
        self.script.steps.len() + self.faults.len()
    }

    fn clear_bugs(&mut self) {
        self.bugs = RelayBugs::default();
    }

    fn enable_bugs(&mut self, bugs: &[&str]) -> Result<(), String> {
        bugs.iter().try_for_each(|bug| self.bugs.enable(bug))
    }
}

/// A relay scenario set up inside a simulation: holds what faults act on.
pub struct Driver {
    scenario: RelayScenario,
    knobs: SharedKnobs,
    close_stdin: Arc<Notify>,
}

impl Driver {
    /// Register the hosts (client, bridge, relayer) in `sim`, seeded from `seed`.
    pub fn setup(scenario: &RelayScenario, seed: u64, sim: &mut turmoil::Sim<'_>) -> Self {
        let timing = &scenario.timing;
        let knobs = RelayerKnobs::shared();
        let durable = Arc::new(Mutex::new(Durable::default()));
        let relayer_config = RelayerConfig {
            first_keepalive_ms: timing.first_keepalive_ms,
            keepalive_ms: timing.keepalive_ms,
            analyze_deadline_ms: timing.slowest_tool_ms,
            remember_deadline_ms: timing.remember_deadline_ms,
            seed: derive(seed, "relayer"),
            ..RelayerConfig::default()
        };
        let bridge_config = BridgeConfig {
            sse_idle_ms: timing.sse_idle_ms,
            slowest_tool_ms: timing.slowest_tool_ms,
            deadline_margin_ms: timing.deadline_margin_ms,
            call_timeout_ms: timing.call_timeout_ms,
            seed: derive(seed, "bridge"),
            bugs: scenario.bugs,
            ..BridgeConfig::default()
        };
        let close_stdin = Arc::new(Notify::new());
        let (client_ends, server_ends) = stdio::pipes();
        let relayer_knobs = knobs.clone();
        family::host(sim, host::RELAYER, move || {
            relayer::run(relayer_config.clone(), relayer_knobs.clone(), durable.clone())
        });
        family::client(sim, host::BRIDGE, bridge::run(bridge_config, server_ends));
        let client_seed = derive(seed, "client");
        let script = scenario.script.clone();
        family::client(sim, host::CLIENT, client::run(script, client_ends, close_stdin.clone(), client_seed));
        Self { scenario: scenario.clone(), knobs, close_stdin }
    }

}

impl family::Driver for Driver {
    fn emit_spec(&self, params: &SimParams) {
        let spec = Spec::new(&self.scenario.timing, params.tick_ms, params.latency_max_ms);
        let horizon_ms = params.horizon_ms;
        emit!(
            kind::RUN_SPEC,
            family = "relay",
            call_timeout_ms = spec.call_timeout_ms,
            sweep_period_ms = spec.sweep_period_ms,
            slack_ms = spec.slack_ms,
            horizon_ms,
            sse_idle_ms = self.scenario.timing.sse_idle_ms,
            bugs = %self.scenario.bugs.enabled().join("+"),
            profile = %self.scenario.profile.join("+")
        );
    }

    fn schedule(&self) -> Vec<Scheduled> {
        family::schedule(&self.scenario.faults, |fault| fault.window(&self.scenario.script))
    }

    fn apply(&self, scheduled: &Scheduled, sim: &mut turmoil::Sim<'_>) {
        let targets = Targets {
            knobs: &self.knobs,
            close_stdin: &self.close_stdin,
            script: &self.scenario.script,
        };
        faults::apply(&self.scenario.faults[scheduled.fault], scheduled.phase, sim, &targets);
    }

    fn heal(&self, sim: &mut turmoil::Sim<'_>) {
        faults::heal(sim, &self.knobs);
    }
}

/// The whole-scenario strategy for a relay case: the family's scenario plus the simulator
/// parameters that suit it.
pub fn case_strategy(bugs: RelayBugs, seed: u64) -> BoxedStrategy<Scenario> {
    use proptest::prelude::*;
    (strategy::scenario(bugs), 0u64..=2, any::<bool>())
        .prop_map(move |(relay, latency_ticks, random_order)| {
            let tick_ms = strategy::tick_ms(&relay.timing);
            let latency_max_ms = latency_ticks * tick_ms;
            let slack = Spec::new(&relay.timing, tick_ms, latency_max_ms).slack_ms;
            let horizon_ms = relay.script.end_at_ms + 2_000 + slack;
            let sim = SimParams { tick_ms, latency_max_ms, random_order, horizon_ms };
            Scenario { seed, sim, family: Box::new(relay) }
        })
        .boxed()
}
