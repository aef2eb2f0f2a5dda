//! The channel family in the harness: its scenario, how it is set up in a simulation, its spec
//! (the constants checkers judge against), faults, generators and checkers. [`CHANNEL`] is the
//! family as the engines see it.

pub mod checks;
pub mod coverage;
pub mod faults;
pub mod model;
pub mod rpc;
pub mod strategy;

use std::rc::Rc;

use bridge_under_test::channel::agent::{self, AgentKnobs, AgentScript};
use bridge_under_test::channel::gateway::{self, GatewayKnobs, GatewayStep};
use bridge_under_test::channel::{bridge, ChannelBugs, ChannelConfig, CLOCK_BASE_MS};
use bridge_under_test::emit;
use bridge_under_test::events::{host, kind};
use bridge_under_test::stdio;
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::family::{self, Family, FamilyScenario, Scenario, Scheduled, SimParams};
use crate::seed::derive;
use faults::{ChannelFault, Targets};

/// The chat session the bridge serves.
pub const SESSION: &str = "main";

/// The per-map cap and the queue limit: MODEL.md §3.3's 1 000 each, or a compressed profile,
/// so a burst can cross them without thousands of messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub pending_cap: usize,
    pub queue_limit: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            pending_cap: 1_000,
            queue_limit: 1_000,
        }
    }
}

/// The spec: MODEL.md §3.3's constants, written here independently of the bridge (an oracle
/// must not share the code it judges).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub permission_ttl_ms: u64,
    pub approval_default_ttl_ms: u64,
    pub sweep_interval_ms: u64,
    pub wait_min_ms: u64,
    pub wait_max_ms: u64,
    pub limits: Limits,
    /// Scheduling slack: ticks and link latency between the agent, the bridge and the gateway.
    pub slack_ms: u64,
}

impl Spec {
    pub fn new(limits: Limits, tick_ms: u64, latency_max_ms: u64) -> Self {
        Self {
            permission_ttl_ms: 3_600_000,
            approval_default_ttl_ms: 1_800_000,
            sweep_interval_ms: 300_000,
            wait_min_ms: 1,
            wait_max_ms: 300_000,
            limits,
            slack_ms: 4 * tick_ms + 2 * latency_max_ms,
        }
    }
}

/// Everything a channel run depends on besides the simulator's own parameters. In a scenario
/// file `bugs` (all off), `limits` (MODEL.md's), `gateway`, `faults` (none) and `profile` may be
/// left out; a field this does not name is an error, not silently ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelScenario {
    #[serde(default)]
    pub bugs: ChannelBugs,
    #[serde(default)]
    pub limits: Limits,
    pub agent: AgentScript,
    /// The gateway's events, in time order.
    #[serde(default)]
    pub gateway: Vec<GatewayStep>,
    #[serde(default)]
    pub faults: Vec<ChannelFault>,
    /// The swarm profile: which fault kinds this seed turned on.
    #[serde(default)]
    pub profile: Vec<String>,
}

/// The channel family, as the engines see it: an MCP agent on stdio, the channel bridge holding
/// pending permission requests and approvals, and a chat gateway over a WebSocket.
pub const CHANNEL: Family = Family {
    name: "channel",
    switches: ChannelBugs::NAMES,
    strategy: |bugs, seed| case_strategy(family::switches_on(bugs, ChannelBugs::enable), seed),
    scenario_tag: "channel",
    read: family::read::<ChannelScenario>,
    check: checks::check,
    coverage_tables: coverage::TABLES,
    observe: coverage::observe,
};

impl FamilyScenario for ChannelScenario {
    fn family(&self) -> &'static Family {
        &CHANNEL
    }

    fn setup(&self, seed: u64, sim: &mut turmoil::Sim<'_>) -> Box<dyn family::Driver> {
        Box::new(Driver::setup(self, seed, sim))
    }

    fn summary(&self) -> String {
        format!(
            "{} agent steps, {} gateway steps, {} faults",
            self.agent.steps.len(),
            self.gateway.len(),
            self.faults.len()
        )
    }

    fn size(&self) -> usize {
        self.agent.steps.len() + self.gateway.len() + self.faults.len()
    }

    fn clear_bugs(&mut self) {
        self.bugs = ChannelBugs::default();
    }

    fn enable_bugs(&mut self, bugs: &[&str]) -> Result<(), String> {
        bugs.iter().try_for_each(|bug| self.bugs.enable(bug))
    }
}

/// A channel scenario set up inside a simulation: holds what faults act on.
pub struct Driver {
    scenario: ChannelScenario,
    gateway: Rc<GatewayKnobs>,
    agent: Rc<AgentKnobs>,
    close: Rc<Notify>,
}

impl Driver {
    /// Register the hosts (gateway, bridge, agent) in `sim`, seeded from `seed`.
    pub fn setup(scenario: &ChannelScenario, seed: u64, sim: &mut turmoil::Sim<'_>) -> Self {
        let config = ChannelConfig {
            session_key: SESSION.to_string(),
            pending_cap: scenario.limits.pending_cap,
            queue_limit: scenario.limits.queue_limit,
            seed: derive(seed, "bridge"),
            bugs: scenario.bugs,
            ..ChannelConfig::default()
        };
        let gateway_knobs = Rc::new(GatewayKnobs::default());
        let agent_knobs = Rc::new(AgentKnobs::default());
        let close = Rc::new(Notify::new());
        let (agent_ends, bridge_ends) = stdio::pipes();
        let (steps, knobs) = (scenario.gateway.clone(), gateway_knobs.clone());
        family::host(sim, host::GATEWAY, move || {
            gateway::run(steps.clone(), knobs.clone(), CLOCK_BASE_MS)
        });
        family::client(
            sim,
            host::BRIDGE,
            bridge::run(config, bridge_ends, close.clone()),
        );
        family::client(
            sim,
            host::AGENT,
            agent::run(scenario.agent.clone(), agent_ends, agent_knobs.clone()),
        );
        Self {
            scenario: scenario.clone(),
            gateway: gateway_knobs,
            agent: agent_knobs,
            close,
        }
    }
}

impl family::Driver for Driver {
    fn emit_spec(&self, params: &SimParams) {
        let spec = Spec::new(self.scenario.limits, params.tick_ms, params.latency_max_ms);
        emit!(
            kind::RUN_SPEC,
            family = "channel",
            permission_ttl_ms = spec.permission_ttl_ms,
            approval_default_ttl_ms = spec.approval_default_ttl_ms,
            sweep_interval_ms = spec.sweep_interval_ms,
            wait_min_ms = spec.wait_min_ms,
            wait_max_ms = spec.wait_max_ms,
            pending_cap = spec.limits.pending_cap,
            queue_limit = spec.limits.queue_limit,
            slack_ms = spec.slack_ms,
            clock_base_ms = CLOCK_BASE_MS,
            session = SESSION,
            horizon_ms = params.horizon_ms,
            bugs = %self.scenario.bugs.enabled().join("+"),
            profile = %self.scenario.profile.join("+")
        );
    }

    fn schedule(&self) -> Vec<Scheduled> {
        family::schedule(&self.scenario.faults, |fault| fault.window(&self.scenario.gateway))
    }

    fn apply(&self, scheduled: &Scheduled, _sim: &mut turmoil::Sim<'_>) {
        let targets = Targets {
            gateway: &self.gateway,
            agent: &self.agent,
            close: &self.close,
            steps: &self.scenario.gateway,
            index: scheduled.fault,
        };
        faults::apply(
            &self.scenario.faults[scheduled.fault],
            scheduled.phase,
            &targets,
        );
    }

    fn heal(&self, _sim: &mut turmoil::Sim<'_>) {
        faults::heal(&self.gateway);
    }
}

/// The whole-scenario strategy for a channel case: the family's scenario plus the simulator
/// parameters that suit it.
pub fn case_strategy(
    bugs: ChannelBugs,
    seed: u64,
) -> BoxedStrategy<Scenario> {
    use proptest::prelude::*;
    (strategy::scenario(bugs), 0u64..=1, any::<bool>())
        .prop_map(move |(channel, latency_ticks, random_order)| {
            let tick_ms = strategy::TICK_MS;
            let sim = SimParams {
                tick_ms,
                latency_max_ms: latency_ticks * tick_ms,
                random_order,
                horizon_ms: strategy::horizon_ms(&channel.agent),
            };
            Scenario { seed, sim, family: Box::new(channel) }
        })
        .boxed()
}
