//! The test suite, one integration binary: scripted scenarios with trace snapshots, generated
//! runs, the regression suite (every bug switch is found), determinism, committed regressions.

mod channel;
mod committed;
mod daemon;
mod daemon_lifecycle;
mod determinism;
mod examples;
mod generated;
mod regressions;
mod scripted;
mod sdk;

/// The messages the client wrote (`mcp.send`) or read (`mcp.recv`), in order.
pub fn client_lines(outcome: &harness::trace::Outcome, which: &str) -> Vec<serde_json::Value> {
    outcome.trace.of_kind(which).filter_map(|(_, e)| serde_json::from_str(&e.text("msg")).ok()).collect()
}

/// Cases for generated runs: `PROPTEST_CASES` raises them.
pub fn cases(default: u64) -> u64 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Hunt `cases` generated cases of `family` with every switch off: a false alarm fails the test
/// at once with its token and scenario, unshrunk (`just replay <token>` shrinks it). The mutation
/// gates run this: shrinking a failure there cost more than cargo-mutants' timeout, so a mutant
/// the hunt caught was reported as a timeout (daemon `methods.rs:65`, `&&` to `||` in `stop`:
/// `replacement_ends` fails its first case in 6 s of release time, and 100 shrink runs of it
/// in the test profile ran past 400 s).
pub fn assert_clean(family: &'static harness::family::Family, cases: u64, base_seed: u64) {
    let mut config = harness::hunt::HuntConfig::new(family, &[], cases, base_seed);
    config.shrink_budget = 0;
    let report = harness::hunt::hunt(&config, &mut harness::hunt::Quiet).unwrap();
    assert_eq!(report.cases, cases);
    if let Some(finding) = report.findings.first() {
        panic!(
            "false alarm with every switch off: {:?}\ntoken: {} (`just replay <token>` shrinks it)\n{}",
            finding.original.violations,
            finding.token,
            finding.shrunk.scenario.to_json()
        );
    }
}

/// Hunt `budget` cases of `family` with each of `switches` on alone (no shrinking), printing how
/// many cases each took: the switches not found.
pub fn missed_switches(
    family: &'static harness::family::Family,
    switches: &[&'static str],
    budget: u64,
    base_seed: u64,
) -> Vec<&'static str> {
    let mut missed = Vec::new();
    for bug in switches {
        let mut config = harness::hunt::HuntConfig::new(family, &[bug.to_string()], budget, base_seed);
        config.shrink_budget = 0;
        match harness::hunt::hunt(&config, &mut harness::hunt::Quiet).unwrap().findings.first() {
            Some(finding) => println!("{bug}: found after {} cases", finding.index + 1),
            None => missed.push(*bug),
        }
    }
    missed
}

/// Run `scenario` with `bug` switched on: a checker must report `invariant`.
pub fn assert_broken(scenario: harness::family::Scenario, bug: &str, invariant: &str) {
    let outcome = harness::runner::run(&scenarios::with_bugs(scenario, &[bug]));
    let found: Vec<&str> = outcome.violations.iter().map(|v| v.invariant.as_str()).collect();
    assert!(found.contains(&invariant), "{bug}: expected {invariant}, found {found:?}");
}

/// The races kept under `scenarios/races/` whose file names start with `prefix` (`relay_`,
/// `sdk_`), by their names without it, sorted: a new race joins its family's tests as it lands.
pub fn race_names(prefix: &str) -> Vec<String> {
    let dir = format!("{}/races", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|file| Some(file.strip_prefix(prefix)?.strip_suffix(".json")?.to_string()))
        .collect();
    names.sort();
    names
}
