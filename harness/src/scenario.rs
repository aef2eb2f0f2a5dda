//! `Scenario`: everything a run depends on. Its JSON is the long form of a replay token.

use serde::{Deserialize, Serialize};

use proptest::strategy::BoxedStrategy;

use crate::channel::{self, ChannelScenario};
use crate::daemon::{self, DaemonScenario};
use crate::family::Driver;
use crate::relay::{self, RelayScenario};
use crate::schema::McpSchema;
use crate::trace::{Trace, Violation};

/// The families of systems under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Relay,
    Channel,
    Daemon,
    /// rmcp's own stdio ⇄ Streamable HTTP bridge (`sdk/`).
    Sdk,
    /// The same bridge against rmcp's own `StreamableHttpService` instead of the mock relayer
    /// (`sdk::SdkServer::Rmcp`).
    SdkRmcp,
}

impl Family {
    pub const ALL: &'static [Family] = &[Family::Relay, Family::Channel, Family::Daemon, Family::Sdk, Family::SdkRmcp];

    pub fn name(self) -> &'static str {
        match self {
            Family::Relay => "relay",
            Family::Channel => "channel",
            Family::Daemon => "daemon",
            Family::Sdk => "sdk",
            Family::SdkRmcp => "sdk_rmcp",
        }
    }

    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL.iter().copied().find(|f| f.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
            format!("unknown family `{name}`; valid: {}", names.join(" "))
        })
    }

    /// The family's generator coverage tables (`hunt --coverage`).
    pub fn coverage_tables(self) -> &'static [crate::coverage::Table] {
        match self {
            Family::Relay => relay::coverage::TABLES,
            Family::Channel => channel::coverage::TABLES,
            Family::Daemon => daemon::coverage::TABLES,
            Family::Sdk | Family::SdkRmcp => relay::coverage::TABLES,
        }
    }

    /// Run the family's checkers over a trace: a trace recorded anywhere, not only one this
    /// harness simulated (the checkers read their constants from its `run.spec` event).
    pub fn check(self, trace: &Trace, schema: &McpSchema) -> Vec<Violation> {
        match self {
            Family::Relay => relay::checks::check(trace, schema),
            Family::Channel => channel::checks::check(trace, schema),
            Family::Daemon => daemon::checks::check(trace, schema),
            Family::Sdk | Family::SdkRmcp => crate::sdk::checks::check(trace, schema),
        }
    }

    /// The family a trace names in the `family` field of its `run.spec` event.
    pub fn of_trace(trace: &Trace) -> Result<Self, String> {
        let spec = trace
            .first(bridge_under_test::events::kind::RUN_SPEC)
            .ok_or("the trace has no run.spec event (pass --family to name the family)")?;
        let name = spec.text("family");
        if name.is_empty() {
            return Err("the run.spec event has no family field (pass --family)".to_string());
        }
        Self::parse(&name)
    }

    /// The family's bug switch names, as MODEL.md spells them.
    pub fn switches(self) -> &'static [&'static str] {
        match self {
            Family::Relay => bridge_under_test::relay::RelayBugs::NAMES,
            Family::Channel => bridge_under_test::channel::ChannelBugs::NAMES,
            Family::Daemon => bridge_under_test::daemon::DaemonBugs::NAMES,
            Family::Sdk | Family::SdkRmcp => bridge_under_test::sdk::SdkBugs::NAMES,
        }
    }
}

/// The simulator's own parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimParams {
    pub tick_ms: u64,
    /// Link latency is drawn by turmoil in `0..=latency_max_ms`.
    pub latency_max_ms: u64,
    /// Poll hosts in a seeded random order each step.
    pub random_order: bool,
    /// The run stops here at the latest.
    pub horizon_ms: u64,
}

/// One family's scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum FamilyScenario {
    Relay(RelayScenario),
    Channel(ChannelScenario),
    Daemon(DaemonScenario),
    /// A relay scenario run against rmcp's bridge (its `bugs` stay off).
    Sdk(crate::sdk::SdkScenario),
}

impl FamilyScenario {
    /// The strategy for one case of `family` with the named switches on.
    pub fn strategy(family: Family, bugs: &[String], seed: u64) -> BoxedStrategy<Scenario> {
        match family {
            Family::Relay => relay::case_strategy(enable(bugs), seed),
            Family::Channel => channel::case_strategy(enable(bugs), seed),
            Family::Daemon => daemon::case_strategy(enable(bugs), seed),
            Family::Sdk => crate::sdk::case_strategy(enable(bugs), seed),
            Family::SdkRmcp => crate::sdk::case_strategy_on(crate::sdk::SdkServer::Rmcp, enable(bugs), seed),
        }
    }

    /// Register the family's hosts in `sim`; the driver applies its faults.
    pub fn setup(&self, seed: u64, sim: &mut turmoil::Sim<'_>) -> Box<dyn Driver> {
        match self {
            Self::Relay(relay) => Box::new(relay::Driver::setup(relay, seed, sim)),
            Self::Channel(channel) => Box::new(channel::Driver::setup(channel, seed, sim)),
            Self::Daemon(d) => Box::new(daemon::Driver::setup(d, seed, sim)),
            Self::Sdk(sdk) => Box::new(crate::sdk::Driver::setup(sdk, seed, sim)),
        }
    }

    /// Run the family's checkers over a trace.
    pub fn check(&self, trace: &Trace, schema: &McpSchema) -> Vec<Violation> {
        self.family().check(trace, schema)
    }

    pub fn family(&self) -> Family {
        match self {
            Self::Relay(_) => Family::Relay,
            Self::Channel(_) => Family::Channel,
            Self::Daemon(_) => Family::Daemon,
            Self::Sdk(sdk) => sdk.family(),
        }
    }

    /// The coverage cells a trace of this family hits.
    pub fn coverage(&self, trace: &Trace) -> Vec<crate::coverage::Cell> {
        match self {
            Self::Relay(_) => relay::coverage::observe(trace),
            Self::Channel(_) => channel::coverage::observe(trace),
            Self::Daemon(_) => daemon::coverage::observe(trace),
            Self::Sdk(_) => relay::coverage::observe(trace),
        }
    }

    /// A one-line description of the scenario's size.
    pub fn summary(&self) -> String {
        match self {
            Self::Relay(relay) => format!("{} steps, {} faults", relay.script.steps.len(), relay.faults.len()),
            Self::Sdk(sdk) => format!("{} steps, {} faults", sdk.script.steps.len(), sdk.faults.len()),
            Self::Channel(channel) => format!(
                "{} agent steps, {} gateway steps, {} faults",
                channel.agent.steps.len(),
                channel.gateway.len(),
                channel.faults.len()
            ),
            Self::Daemon(d) => format!("{} invocations, {} faults", d.invocations.len(), d.faults.len()),
        }
    }

    /// A size for comparing shrunk scenarios: operations plus faults.
    pub fn size(&self) -> usize {
        match self {
            Self::Relay(relay) => relay.script.steps.len() + relay.faults.len(),
            Self::Sdk(sdk) => sdk.script.steps.len() + sdk.faults.len(),
            Self::Channel(channel) => channel.agent.steps.len() + channel.gateway.len() + channel.faults.len(),
            Self::Daemon(d) => d.invocations.len() + d.faults.len(),
        }
    }

    /// Turn every bug switch off (to check that a failure is the bug's).
    pub fn clear_bugs(&mut self) {
        match self {
            Self::Relay(relay) => relay.bugs = Default::default(),
            Self::Sdk(sdk) => sdk.bugs = Default::default(),
            Self::Channel(channel) => channel.bugs = Default::default(),
            Self::Daemon(d) => d.bugs = Default::default(),
        }
    }

    /// Turn on the named switches; `Err` for a name the family does not have.
    pub fn enable_bugs(&mut self, bugs: &[&str]) -> Result<(), String> {
        match self {
            Self::Relay(relay) => bugs.iter().try_for_each(|bug| relay.bugs.enable(bug)),
            Self::Channel(channel) => bugs.iter().try_for_each(|bug| channel.bugs.enable(bug)),
            Self::Daemon(d) => bugs.iter().try_for_each(|bug| d.bugs.enable(bug)),
            Self::Sdk(sdk) => bugs.iter().try_for_each(|bug| sdk.bugs.enable(bug)),
        }
    }
}

/// A family's switch set with the named switches on (names validated by the token).
fn enable<B: BugSet>(bugs: &[String]) -> B {
    let mut set = B::default();
    for bug in bugs {
        set.enable(bug).expect("token switches are validated");
    }
    set
}

/// What the `bug_switches!` structs have in common.
pub trait BugSet: Default {
    fn enable(&mut self, name: &str) -> Result<(), String>;
}

impl BugSet for bridge_under_test::relay::RelayBugs {
    fn enable(&mut self, name: &str) -> Result<(), String> {
        bridge_under_test::relay::RelayBugs::enable(self, name)
    }
}

impl BugSet for bridge_under_test::channel::ChannelBugs {
    fn enable(&mut self, name: &str) -> Result<(), String> {
        bridge_under_test::channel::ChannelBugs::enable(self, name)
    }
}

impl BugSet for bridge_under_test::sdk::SdkBugs {
    fn enable(&mut self, name: &str) -> Result<(), String> {
        bridge_under_test::sdk::SdkBugs::enable(self, name)
    }
}

impl BugSet for bridge_under_test::daemon::DaemonBugs {
    fn enable(&mut self, name: &str) -> Result<(), String> {
        bridge_under_test::daemon::DaemonBugs::enable(self, name)
    }
}

/// Everything a run depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The seed every sub-seed (turmoil, mocks, the bridge) is derived from.
    pub seed: u64,
    pub sim: SimParams,
    pub family: FamilyScenario,
}

impl Scenario {
    pub fn family(&self) -> Family {
        match &self.family {
            FamilyScenario::Relay(_) => Family::Relay,
            FamilyScenario::Channel(_) => Family::Channel,
            FamilyScenario::Daemon(_) => Family::Daemon,
            FamilyScenario::Sdk(sdk) => sdk.family(),
        }
    }

    /// Pretty JSON (the long form of a token).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("not a scenario: {e}"))
    }
}
