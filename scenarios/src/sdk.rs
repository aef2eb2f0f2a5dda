//! Canonical sdk scenarios: rmcp's bridge (bridge-under-test/src/sdk) under relay faults, with
//! a client that completes its handshake first and names its ids in `_meta`, as the family's
//! generator draws it.

use bridge_under_test::relay::client::{ClientScript, Op, Step, Tool};
use bridge_under_test::sdk::SdkBugs;
use harness::relay::faults::RelayFault;
use harness::relay::{strategy, Spec, Timing};
use harness::family::{Scenario, SimParams};
use harness::sdk::{SdkScenario, SdkServer};

use crate::{call, fast_timing, step};

/// An sdk scenario with the relay family's tick and horizon.
pub fn sdk(seed: u64, timing: Timing, mut steps: Vec<Step>, faults: Vec<RelayFault>) -> Scenario {
    let mut handshake = vec![step(0, 0, Op::Initialize), step(0, 0, Op::Initialized)];
    handshake[1].after_answers = true;
    handshake.append(&mut steps);
    let end_at_ms = strategy::end_at_ms(&timing, &handshake, &faults);
    let tick_ms = strategy::tick_ms(&timing);
    let slack = Spec::new(&timing, tick_ms, 0).slack_ms;
    let sim = SimParams { tick_ms, latency_max_ms: 0, random_order: false, horizon_ms: end_at_ms + 2_000 + slack };
    let script = ClientScript { steps: handshake, end_at_ms, stamp_ids: true, answers_server: false };
    let sdk = SdkScenario { bugs: SdkBugs::default(), server: SdkServer::Mock, timing, script, faults, profile: Vec::new() };
    Scenario { seed, sim, family: Box::new(sdk) }
}

/// Three calls, a listing and a ping, no fault: rmcp initializes its session on the first
/// request and forwards everything.
pub fn forwards_calls() -> Scenario {
    let steps = vec![
        call(300, 1, Tool::Remember, 400),
        call(350, 2, Tool::Recall, 50),
        step(900, 3, Op::ListTools),
        step(1_000, 4, Op::Ping),
        call(1_200, 5, Tool::Analyze, 700),
    ];
    sdk(31, fast_timing(30_000, 8_000), steps, Vec::new())
}

/// Every open stream ends while a call runs: rmcp resumes the call's stream with a GET that
/// names the last event id, and the reply arrives on it.
pub fn resumes_a_cut_stream() -> Scenario {
    let steps = vec![call(300, 1, Tool::Remember, 1_500)];
    sdk(32, fast_timing(30_000, 8_000), steps, vec![RelayFault::StreamEof { at_ms: 900 }])
}

/// `scenario` against rmcp's own `StreamableHttpService` (family `sdk_rmcp`) instead of the mock.
pub fn on_rmcp_server(mut scenario: Scenario) -> Scenario {
    if let Some(sdk) = scenario.family.downcast_mut::<SdkScenario>() {
        sdk.server = SdkServer::Rmcp;
    }
    scenario
}
