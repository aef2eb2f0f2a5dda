//! The hand-written example scenarios of `docs/scenarios.md` (`docs/examples/*.json`): each runs
//! clean with every switch off, and the scenario format rejects what a hand-written file may get
//! wrong instead of ignoring it.

use harness::runner::run;
use harness::family::Scenario;

fn example(family: &str) -> String {
    let path = format!("{}/../docs/examples/{family}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_example_runs_clean_and_does_what_its_doc_says() {
    for family in ["relay", "channel", "daemon"] {
        let scenario = Scenario::from_json(&example(family), harness::families::FAMILIES).unwrap_or_else(|e| panic!("{family}: {e}"));
        assert_eq!(scenario.family().name, family);
        let outcome = run(&scenario);
        assert_eq!(outcome.violations, vec![], "{family}");
        assert!(outcome.trace.events.len() > 20, "{family}: the example did almost nothing");
    }
}

// docs/scenarios.md: the relay example's swallowed reply, with `no_call_deadline` on, is never
// answered: the walkthrough's violation.
#[test]
fn the_relay_example_with_a_switch_on_fails_as_the_doc_says() {
    let text = example("relay").replacen("\"family\": \"relay\",", "\"family\": \"relay\", \"bugs\": { \"no_call_deadline\": true },", 1);
    let outcome = run(&Scenario::from_json(&text, harness::families::FAMILIES).unwrap());
    assert!(outcome.violations.iter().any(|v| v.invariant == "bounded_latency"), "{:?}", outcome.violations);
}

#[test]
fn a_misspelt_or_unknown_field_is_an_error_that_names_it() {
    for (family, good, bad, name) in [
        ("relay", "\"faults\"", "\"fautls\"", "fautls"),
        ("relay", "\"sse_idle_ms\"", "\"sse_idle\"", "sse_idle"),
        ("relay", "\"tick_ms\"", "\"tick\"", "tick"),
        ("relay", "\"string_id\"", "\"strng_id\"", "strng_id"),
        ("relay", "\"step\": 3", "\"step\": 3, \"delay\": 5", "delay"),
        ("channel", "\"read_every_ms\"", "\"read_every\"", "read_every"),
        ("daemon", "\"client\": 1", "\"clinet\": 1", "clinet"),
        ("daemon", "\"at_ms\": 1000 }", "\"at_ms\": 1000, \"pid\": 2 }", "pid"),
        ("channel", "\"gateway\"", "\"gateways\"", "gateways"),
        ("daemon", "\"approval_ms\": 300,", "\"approval_ms\": 300, \"aproval_ms\": 1,", "aproval_ms"),
    ] {
        let text = example(family).replacen(good, bad, 1);
        assert_ne!(text, example(family));
        let error = Scenario::from_json(&text, harness::families::FAMILIES).expect_err(bad);
        assert!(error.contains(&format!("unknown field `{name}`")), "{family} {bad}: {error}");
    }
}
