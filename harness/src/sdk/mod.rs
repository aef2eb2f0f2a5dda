//! The sdk family in the harness: rmcp's stdio ⇄ Streamable HTTP bridge
//! (`bridge_under_test::sdk`) between the relay family's scripted client and the relay
//! family's mock server speaking MCP Streamable HTTP. Everything but the bridge is the relay
//! family's: the scenario and its generator, the fault plan and how each fault acts, and the
//! checkers that rest on boundaries (the client's stdio, the server's HTTP log), chosen as the
//! live engine chooses them for a bridge it did not write (`relay::oracles::judge`), with rmcp's
//! profile (`harness/profiles/rmcp-sdk.json`) saying what rmcp does by design. [`SDK`] and
//! [`SDK_RMCP`] are the two families as the engines see them: the same scenario, generator and
//! checkers, against the mock server or against rmcp's own.

pub mod checks;

use std::sync::{Arc, Mutex};

use bridge_under_test::emit;
use bridge_under_test::events::{host, kind};
use bridge_under_test::relay::client::{self, ClientScript};
use bridge_under_test::relay::knobs::SharedKnobs;
use bridge_under_test::relay::relayer::{self, Durable, Transport};
use bridge_under_test::relay::{RelayerConfig, RelayerKnobs, RELAYER_PORT};
use bridge_under_test::sdk::{self, SdkBridgeConfig, SdkBugs};
use bridge_under_test::{seam, stdio};
use proptest::strategy::BoxedStrategy;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::coverage::Table;
use crate::family::{self, Family, FamilyScenario, Scenario, Scheduled, SimParams};
use crate::relay::faults::{self, RelayFault, Targets};
use crate::relay::profile::{Deadline, Profile};
use crate::relay::{coverage, strategy, RelayScenario, Spec, Timing};
use crate::seed::derive;

/// rmcp's profile: its deadline (none) and its design, each with the rmcp source line.
pub const PROFILE_JSON: &str = include_str!("../../profiles/rmcp-sdk.json");

/// The profile, parsed (it is part of the build: a bad one fails the tests).
pub fn profile() -> Profile {
    serde_json::from_str(PROFILE_JSON).expect("profiles/rmcp-sdk.json is a valid profile")
}

/// The remote server an sdk case runs against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SdkServer {
    /// The relay family's mock relayer in its Streamable HTTP transport (family `sdk`).
    #[default]
    Mock,
    /// rmcp's own `StreamableHttpService` with the relayer's tools, behind a fault layer
    /// (`bridge_under_test::sdk::server`; family `sdk_rmcp`).
    Rmcp,
}

impl SdkServer {
    fn is_mock(&self) -> bool {
        *self == SdkServer::Mock
    }
}

/// Everything an sdk run depends on besides the simulator's own parameters: the relay
/// family's workload, timing and fault plan, and the family's own switches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SdkScenario {
    #[serde(default)]
    pub bugs: SdkBugs,
    /// Absent in the JSON of a mock case, so the scenarios written before it read the same.
    #[serde(default, skip_serializing_if = "SdkServer::is_mock")]
    pub server: SdkServer,
    #[serde(default)]
    pub timing: Timing,
    pub script: ClientScript,
    #[serde(default)]
    pub faults: Vec<RelayFault>,
    /// The swarm profile: which fault kinds this seed turned on.
    #[serde(default)]
    pub profile: Vec<String>,
}

impl SdkScenario {
    pub fn new(relay: RelayScenario, bugs: SdkBugs) -> Self {
        Self { bugs, server: SdkServer::Mock, timing: relay.timing, script: relay.script, faults: relay.faults, profile: relay.profile }
    }
}

/// Family `sdk`, as the engines see it: rmcp's bridge against the mock relayer. Its scenarios are
/// tagged `sdk` in a file, as are `sdk_rmcp`'s: their `server` tells them apart.
pub const SDK: Family = Family {
    name: "sdk",
    switches: SdkBugs::NAMES,
    strategy: |bugs, seed| strategy_on(SdkServer::Mock, bugs, seed),
    scenario_tag: "sdk",
    read: family::read::<SdkScenario>,
    check: checks::check,
    coverage_tables: COVERAGE_TABLES,
    observe: coverage::observe,
};

/// The relay family's coverage tables, with the fault kinds these families draw
/// (`faults::STREAMABLE_KINDS`), and but for a cell rmcp's bridge cannot reach by design: rmcp
/// ignores a line that is not JSON and answers nothing ("replying to invalid data can trigger an
/// error storm", rmcp 3.11.0 `src/transport/async_rw.rs:315-323`, rust-sdk issue 938), so no
/// parse error is answered.
const COVERAGE_TABLES: &[Table] = {
    const RELAY: &[Table] = coverage::TABLES;
    assert!(RELAY.len() == 7, "the fault tables are the relay's first two, the local-error table its last");
    let kinds = faults::STREAMABLE_KINDS;
    &[
        Table { rows: kinds, ..RELAY[0] },
        Table { rows: kinds, ..RELAY[1] },
        RELAY[2],
        RELAY[3],
        RELAY[4],
        RELAY[5],
        coverage::local_errors(&[("parse_error", "answered")]),
    ]
};

/// Family `sdk_rmcp`: the same against rmcp's own server.
pub const SDK_RMCP: Family = Family {
    name: "sdk_rmcp",
    strategy: |bugs, seed| strategy_on(SdkServer::Rmcp, bugs, seed),
    ..SDK
};

impl FamilyScenario for SdkScenario {
    /// Its server decides.
    fn family(&self) -> &'static Family {
        match self.server {
            SdkServer::Mock => &SDK,
            SdkServer::Rmcp => &SDK_RMCP,
        }
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
        self.bugs = SdkBugs::default();
    }

    fn enable_bugs(&mut self, bugs: &[&str]) -> Result<(), String> {
        bugs.iter().try_for_each(|bug| self.bugs.enable(bug))
    }
}

/// An sdk scenario set up inside a simulation.
pub struct Driver {
    scenario: SdkScenario,
    knobs: SharedKnobs,
    close_stdin: Arc<Notify>,
}

impl Driver {
    /// Register the hosts (client, bridge, relayer) in `sim`, seeded from `seed`.
    pub fn setup(scenario: &SdkScenario, seed: u64, sim: &mut turmoil::Sim<'_>) -> Self {
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
        let bridge_config = SdkBridgeConfig {
            host: host::RELAYER.to_string(),
            port: RELAYER_PORT,
            url: format!("http://{}:{RELAYER_PORT}{}", host::RELAYER, Transport::StreamableHttp.path()),
            token: Some(relayer_config.token.clone()),
            bugs: scenario.bugs,
        };
        let close_stdin = Arc::new(Notify::new());
        let (client_ends, server_ends) = stdio::pipes();
        let relayer_knobs = knobs.clone();
        let server = scenario.server;
        family::host(sim, host::RELAYER, move || {
            let (config, knobs, durable) = (relayer_config.clone(), relayer_knobs.clone(), durable.clone());
            async move {
                let listener = seam::TcpListener::bind(("0.0.0.0", RELAYER_PORT)).await?;
                match server {
                    SdkServer::Mock => relayer::serve_transport(listener, config, knobs, durable, Transport::StreamableHttp, true).await,
                    SdkServer::Rmcp => sdk::server::serve(listener, config, knobs, durable).await,
                }
            }
        });
        family::client(sim, host::BRIDGE, sdk::run(bridge_config, server_ends));
        let client_seed = derive(seed, "client");
        let script = scenario.script.clone();
        family::client(sim, host::CLIENT, client::run(script, client_ends, close_stdin.clone(), client_seed));
        Self { scenario: scenario.clone(), knobs, close_stdin }
    }
}

impl family::Driver for Driver {
    fn emit_spec(&self, params: &SimParams) {
        let profile = profile();
        let horizon_ms = params.horizon_ms;
        let call_timeout_ms = match profile.deadline {
            Deadline::Ms(ms) => ms,
            Deadline::Scenario => Spec::new(&self.scenario.timing, params.tick_ms, params.latency_max_ms).call_timeout_ms,
            // No deadline by design: nothing is late before the client leaves.
            Deadline::None => horizon_ms,
        };
        let slack_ms = Spec::new(&self.scenario.timing, params.tick_ms, params.latency_max_ms).slack_ms;
        let family = self.scenario.family().name;
        emit!(
            kind::RUN_SPEC,
            family,
            engine = "sim",
            bridge = %profile.name,
            transport = "streamable_http",
            call_timeout_ms,
            sweep_period_ms = (call_timeout_ms / 3).clamp(500, 5_000),
            slack_ms,
            horizon_ms,
            sse_idle_ms = self.scenario.timing.sse_idle_ms,
            bugs = %self.scenario.bugs.enabled().join("+"),
            profile = %self.scenario.profile.join("+"),
            promises = %crate::relay::oracles::promises_field(&profile)
        );
    }

    fn schedule(&self) -> Vec<Scheduled> {
        family::schedule(&self.scenario.faults, |fault| fault.window(&self.scenario.script))
    }

    fn apply(&self, scheduled: &Scheduled, sim: &mut turmoil::Sim<'_>) {
        let targets = Targets { knobs: &self.knobs, close_stdin: &self.close_stdin, script: &self.scenario.script };
        faults::apply(&self.scenario.faults[scheduled.fault], scheduled.phase, sim, &targets);
    }

    fn heal(&self, sim: &mut turmoil::Sim<'_>) {
        faults::heal(sim, &self.knobs);
    }
}

/// The whole-scenario strategy for an sdk case against `server`, every Streamable HTTP fault
/// kind drawn (`faults::STREAMABLE_KINDS`; rmcp's own server, `sdk_rmcp`, has no knob for a
/// lost session either).
fn strategy_on(server: SdkServer, bugs: &[String], seed: u64) -> BoxedStrategy<Scenario> {
    strategy_of(server, family::switches_on(bugs, SdkBugs::enable), seed, faults::STREAMABLE_KINDS)
}

/// The whole-scenario strategy for an sdk case: the relay family's generator with a client that
/// completes its handshake first and names its ids in `_meta` (rmcp's server ends a session
/// whose first message is not `initialize`, and its client numbers requests afresh), drawing
/// only the given fault kinds (the clean generated run leaves out the kinds whose rmcp findings
/// are still open, docs/findings.md), and the relay family's simulator parameters.
pub fn case_strategy_of(bugs: SdkBugs, seed: u64, kinds: &'static [&'static str]) -> BoxedStrategy<Scenario> {
    strategy_of(SdkServer::Mock, bugs, seed, kinds)
}

fn strategy_of(server: SdkServer, bugs: SdkBugs, seed: u64, kinds: &'static [&'static str]) -> BoxedStrategy<Scenario> {
    use proptest::prelude::*;
    (strategy::sdk_scenario_of(kinds), 0u64..=2, any::<bool>())
        .prop_map(move |(relay, latency_ticks, random_order)| {
            let tick_ms = strategy::tick_ms(&relay.timing);
            let latency_max_ms = latency_ticks * tick_ms;
            let slack = Spec::new(&relay.timing, tick_ms, latency_max_ms).slack_ms;
            let horizon_ms = relay.script.end_at_ms + 2_000 + slack;
            let sim = SimParams { tick_ms, latency_max_ms, random_order, horizon_ms };
            let sdk = SdkScenario { server, ..SdkScenario::new(relay, bugs) };
            Scenario { seed, sim, family: Box::new(sdk) }
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_coverage_tables_are_the_relays_but_for_a_lost_session_and_the_parse_error_rmcp_never_answers() {
        let (sdk, relay) = (super::COVERAGE_TABLES, crate::relay::coverage::TABLES);
        let names = |tables: &[crate::coverage::Table]| tables.iter().map(|t| t.name).collect::<Vec<_>>();
        assert_eq!(names(sdk), names(relay));
        for (ours, theirs) in sdk.iter().zip(relay) {
            let rows: Vec<_> = theirs.rows.iter().filter(|row| **row != "session_lost").collect();
            assert_eq!((ours.rows.iter().collect::<Vec<_>>(), ours.cols), (rows, theirs.cols), "{}", ours.name);
            let extra: Vec<_> = ours.unreachable.iter().filter(|cell| !theirs.unreachable.contains(cell)).collect();
            let expected: &[(&str, &str)] = if ours.name == crate::relay::coverage::LOCAL_ERROR { &[("parse_error", "answered")] } else { &[] };
            assert_eq!(extra, expected.iter().collect::<Vec<_>>(), "{}", ours.name);
        }
    }

    #[test]
    fn the_profile_parses_and_promises_only_policy() {
        let profile = super::profile();
        assert_eq!(profile.deadline, crate::relay::profile::Deadline::None);
        assert!(profile.deadline_source.contains("src/service.rs:"));
        assert!(profile.design.iter().all(|d| d.source.starts_with("rmcp 3.11.0 src/")));
    }
}
