//! Generated runs with every switch off: the correct components never violate an invariant.

use harness::hunt::{hunt, HuntConfig, Quiet};
use harness::scenario::Family;

#[test]
fn all_switches_off_find_nothing() {
    let cases = crate::cases(96);
    let mut config = HuntConfig::new(Family::Relay, &[], cases, 0xC1EA_0001);
    config.shrink_budget = 200;
    let report = hunt(&config, &mut Quiet).unwrap();
    assert_eq!(report.cases, cases);
    if let Some(finding) = report.findings.first() {
        panic!(
            "false alarm with every switch off: {:?}\ntoken: {}\n{}",
            finding.shrunk.outcome.violations,
            finding.token,
            finding.shrunk.scenario.to_json()
        );
    }
}
