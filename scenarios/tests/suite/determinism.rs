//! Determinism is the product: the same scenario gives byte-identical traces, run after run.

use harness::hunt;
use harness::runner::run;
use harness::token::Token;

/// Run `count` generated scenarios of `family` twice each: identical traces and violations, and
/// different seeds give different runs (the comparison is not vacuous).
fn assert_deterministic(family: &'static harness::family::Family, base_seed: u64, count: u64) {
    let mut distinct = std::collections::BTreeSet::new();
    for index in 0..count {
        let token = Token::new(family, &[], hunt::case_seed(base_seed, index)).unwrap();
        let scenario = hunt::generate(&token).current();
        let (first, second) = (run(&scenario), run(&scenario));
        assert!(first.trace.events.len() > 5, "{token}: a trace worth comparing");
        assert_eq!(first.trace.hash(), second.trace.hash(), "{token} diverged");
        assert_eq!(first.violations, second.violations);
        distinct.insert(first.trace.hash());
    }
    assert_eq!(distinct.len() as u64, count, "different seeds give different runs");
}

#[test]
fn fifty_relay_scenarios_run_twice_give_identical_traces() {
    assert_deterministic(&harness::relay::RELAY, 0xD37E, 50);
}

#[test]
fn twenty_channel_scenarios_run_twice_give_identical_traces() {
    assert_deterministic(&harness::channel::CHANNEL, 0xD37E_0005, 20);
}

#[test]
fn twenty_daemon_scenarios_run_twice_give_identical_traces() {
    assert_deterministic(&harness::daemon::DAEMON, 0xD37E_0003, 20);
}

#[test]
fn twenty_sdk_scenarios_run_twice_give_identical_traces() {
    assert_deterministic(&harness::sdk::SDK, 0xD37E_0031, 20);
}

/// rmcp's own server: its session ids are seeded, its wall-clock keep-alive is off and its
/// hash maps are only looked up (bridge-under-test/src/sdk/server.rs).
#[test]
fn twenty_sdk_rmcp_scenarios_run_twice_give_identical_traces() {
    assert_deterministic(&harness::sdk::SDK_RMCP, 0xD37E_0032, 20);
}

#[test]
fn a_token_regenerates_the_same_scenario() {
    let token = Token::parse("v1.relay.none.00000000000000aa").unwrap();
    assert_eq!(hunt::generate(&token).current(), hunt::generate(&token).current());
}
