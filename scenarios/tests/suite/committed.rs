//! Committed regressions: shrunk failures kept as scenario JSON in `scenarios/regressions/`. Each
//! must still fail with its switches on and pass with them off.

use harness::runner::run;
use harness::family::Scenario;

#[test]
fn committed_regressions_fail_with_their_bugs_and_pass_without() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(!files.is_empty(), "no committed regressions in {}", dir.display());
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let scenario = Scenario::from_json(&text, harness::families::FAMILIES).unwrap();
        let outcome = run(&scenario);
        assert!(outcome.failed(), "{} no longer fails", path.display());
        let mut fixed = scenario.clone();
        fixed.family.clear_bugs();
        let outcome = run(&fixed);
        assert_eq!(outcome.violations, vec![], "{} fails with every switch off", path.display());
    }
}
