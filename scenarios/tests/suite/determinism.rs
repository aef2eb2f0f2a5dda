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

/// rmcp's session worker, idle for its `keep_alive` (5 min), quits and drops every stream of its
/// session at one instant, in the order of a `HashMap` with random hash keys
/// (src/transport/streamable_http_server/session/local.rs:369, 1124-1125). The client resumes
/// the streams in the order they end, so the token that showed it gave one of two traces per
/// process; in one process too, each run's map drawing new keys. The server's layer now closes
/// streams that end together in the order they opened: ten runs give one trace.
#[test]
fn streams_rmcp_ends_at_one_instant_close_in_one_order() {
    let token = Token::parse("v1.sdk_rmcp.none.4139c8d82737e1f6").unwrap();
    let scenario = hunt::generate(&token).current();
    let first = run(&scenario);
    let closes: Vec<u64> =
        first.trace.of_kind(bridge_under_test::events::kind::STREAM_CLOSE).map(|(_, e)| e.at_ms).collect();
    let together = closes.windows(3).any(|w| w[0] == w[1] && w[1] == w[2]);
    assert!(together, "three streams end at one instant: {closes:?}");
    let hashes: std::collections::BTreeSet<u64> = (0..10).map(|_| run(&scenario).trace.hash()).collect();
    assert_eq!(hashes.into_iter().collect::<Vec<_>>(), vec![first.trace.hash()]);
}

#[test]
fn a_token_regenerates_the_same_scenario() {
    let token = Token::parse("v1.relay.none.00000000000000aa").unwrap();
    assert_eq!(hunt::generate(&token).current(), hunt::generate(&token).current());
}
