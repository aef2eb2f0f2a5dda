//! The harness's proof of power: with each relay bug switch on, generation finds a
//! counterexample within a fixed case budget (and prints how many cases it took); shrinking
//! keeps the failure while making the scenario smaller.

use bridge_under_test::relay::RelayBugs;
use harness::hunt;
use harness::token::Token;

const BUDGET: u64 = 256;

#[test]
fn every_relay_switch_is_found_within_the_budget() {
    let missed = crate::missed_switches(&harness::relay::RELAY, RelayBugs::NAMES, BUDGET, 0x0BAD_0001);
    assert_eq!(missed, Vec::<&str>::new(), "switches not found within {BUDGET} cases");
}

#[test]
fn shrinking_keeps_the_failure_and_makes_it_smaller() {
    let bug = "no_closed_out_filter".to_string();
    let (token, outcome) = (0..BUDGET)
        .map(|i| Token::new(&harness::relay::RELAY, std::slice::from_ref(&bug), hunt::case_seed(0x5412, i)).unwrap())
        .map(|token| {
            let outcome = harness::runner::run(&hunt::generate(&token).current());
            (token, outcome)
        })
        .find(|(_, outcome)| outcome.failed())
        .expect("no_closed_out_filter is found");
    let original = hunt::generate(&token).current();
    let shrunk = hunt::shrink(hunt::generate(&token), outcome.clone(), 300, |_, _| {});
    let invariant = &outcome.violations[0].invariant;
    assert!(shrunk.outcome.violations.iter().any(|v| &v.invariant == invariant));
    let size = |s: &harness::family::Scenario| (s.family.size(), s.sim.horizon_ms);
    assert!(size(&shrunk.scenario) < size(&original), "{:?} !< {:?}", size(&shrunk.scenario), size(&original));
    // Shrinking is deterministic: the same token shrinks to the same scenario.
    let again = hunt::shrink(hunt::generate(&token), outcome, 300, |_, _| {});
    assert_eq!(again.scenario, shrunk.scenario);
}
