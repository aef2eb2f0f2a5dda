//! The sdk family: rmcp's own stdio ⇄ Streamable HTTP bridge in the simulation. Scripted
//! scenarios with snapshots, each switch (an rmcp defect the bridge works around) found by
//! generation, and a clean generated run over the fault kinds whose rmcp findings are closed.

use bridge_under_test::events::kind;
use bridge_under_test::sdk::SdkBugs;
use harness::runner::run;
use harness::scenario::Family;
use harness::trace::Outcome;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

fn snapshot(name: &str, outcome: &Outcome) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, scenarios::snapshot(&outcome.trace)));
}

/// The ids (as JSON) of the answers the client read.
fn answered(outcome: &Outcome) -> Vec<String> {
    outcome
        .trace
        .of_kind(kind::MCP_RECV)
        .filter_map(|(_, e)| serde_json::from_str::<serde_json::Value>(&e.text("msg")).ok())
        .filter_map(|msg| msg.get("id").map(|id| id.to_string()))
        .collect()
}

// Goal: rmcp's bridge forwards calls, a listing and a ping, each answered with the server's own
// reply. Method: no fault; the oracles judge the boundaries.
#[test]
fn rmcp_forwards_every_request() {
    let outcome = run(&scenarios::sdk::forwards_calls());
    assert_eq!(outcome.violations, vec![]);
    let mut ids = answered(&outcome);
    ids.sort();
    assert_eq!(ids, ["0", "1", "2", "3", "4", "5"]);
    assert_eq!(outcome.trace.of_kind(kind::TOOL_EXEC).count(), 3);
    snapshot("sdk_forwards_calls", &outcome);
}

// Goal: a cut response stream is resumed and the call's reply arrives. Method: every stream
// ends while a `remember` runs; rmcp GETs with `Last-Event-ID`.
#[test]
fn rmcp_resumes_a_cut_stream() {
    let outcome = run(&scenarios::sdk::resumes_a_cut_stream());
    assert_eq!(outcome.violations, vec![]);
    assert!(outcome.trace.of_kind(kind::FAULT_FIRED).any(|(_, e)| e.text("fault") == "stream_eof"));
    let resumed = outcome.trace.of_kind(kind::STREAM_OPEN).any(|(_, e)| !e.text("last_event_id").is_empty());
    assert!(resumed, "rmcp resumed the stream with Last-Event-ID");
    assert_eq!(answered(&outcome), ["0", "1"]);
    snapshot("sdk_resumes_a_cut_stream", &outcome);
}

#[test]
fn every_sdk_switch_is_found_within_the_budget() {
    let missed = crate::missed_switches(Family::Sdk, SdkBugs::NAMES, 256, 0x0BAD_0031);
    assert_eq!(missed, Vec::<&str>::new());
}

/// Fault kinds the clean run draws: all but those whose rmcp findings are open (a restart, a
/// swallowed reply, a reset POST, a refused POST: docs/findings.md, "rmcp 3.11.0").
const CLOSED_KINDS: &[&str] =
    &["duplicate_reply", "late_reply", "slow_tool", "withhold_replies", "stream_stall", "stream_eof", "stream_flap", "link_hold", "stdin_eof"];

#[test]
fn generated_sdk_runs_are_clean_over_the_closed_fault_kinds() {
    let strategy = harness::sdk::case_strategy_of(SdkBugs::default(), 0, CLOSED_KINDS);
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[31; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    for case in 0..crate::cases(48) {
        let mut scenario = strategy.new_tree(&mut runner).expect("a scenario").current();
        scenario.seed = harness::hunt::case_seed(0xC1EA_0031, case);
        let outcome = run(&scenario);
        assert_eq!(outcome.violations, vec![], "case {case}:\n{}", scenario.to_json());
    }
}
