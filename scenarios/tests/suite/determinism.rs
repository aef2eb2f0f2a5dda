//! Determinism is the product: the same scenario gives byte-identical traces, run after run.

use harness::hunt;
use harness::runner::run;
use harness::scenario::Family;
use harness::token::Token;

#[test]
fn fifty_generated_scenarios_run_twice_give_identical_traces() {
    let mut distinct = std::collections::BTreeSet::new();
    for index in 0..50 {
        let token = Token::new(Family::Relay, &[], hunt::case_seed(0xD37E, index)).unwrap();
        let scenario = hunt::generate(&token).current();
        let first = run(&scenario);
        let second = run(&scenario);
        assert!(first.trace.events.len() > 5, "{token}: a trace worth comparing");
        assert_eq!(first.trace.hash(), second.trace.hash(), "{token} diverged");
        assert_eq!(first.violations, second.violations);
        distinct.insert(first.trace.hash());
    }
    assert_eq!(distinct.len(), 50, "different seeds give different runs");
}

#[test]
fn a_token_regenerates_the_same_scenario() {
    let token = Token::parse("v1.relay.none.00000000000000aa").unwrap();
    assert_eq!(hunt::generate(&token).current(), hunt::generate(&token).current());
}

#[test]
fn twenty_channel_scenarios_run_twice_give_identical_traces() {
    let mut distinct = std::collections::BTreeSet::new();
    for index in 0..20 {
        let token = Token::new(Family::Channel, &[], hunt::case_seed(0xD37E_0005, index)).unwrap();
        let scenario = hunt::generate(&token).current();
        let (first, second) = (run(&scenario), run(&scenario));
        assert!(first.trace.events.len() > 5, "{token}: a trace worth comparing");
        assert_eq!(first.trace.hash(), second.trace.hash(), "{token} diverged");
        assert_eq!(first.violations, second.violations);
        distinct.insert(first.trace.hash());
    }
    assert_eq!(distinct.len(), 20, "different seeds give different runs");
}

#[test]
fn twenty_daemon_scenarios_run_twice_give_identical_traces() {
    let mut distinct = std::collections::BTreeSet::new();
    for index in 0..20 {
        let token = Token::new(Family::Daemon, &[], hunt::case_seed(0xD37E_0003, index)).unwrap();
        let scenario = hunt::generate(&token).current();
        let (first, second) = (run(&scenario), run(&scenario));
        assert!(first.trace.events.len() > 5, "{token}: a trace worth comparing");
        assert_eq!(first.trace.hash(), second.trace.hash(), "{token} diverged");
        assert_eq!(first.violations, second.violations);
        distinct.insert(first.trace.hash());
    }
    assert_eq!(distinct.len(), 20, "different seeds give different runs");
}
