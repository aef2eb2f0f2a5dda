//! The daemon lifecycle (MODEL.md §2.4 "Replacing a daemon"): scripted upgrades, drains and peer
//! swaps (each with a trace snapshot, assertions on the effect, and a failure with its bug on),
//! generated runs with every switch off, each lifecycle switch found within 512 cases, and how
//! often the generator produces each interleaving.

use bridge_under_test::daemon::config::DRAIN_TIMEOUT_MS;
use bridge_under_test::events::kind;
use harness::daemon::interleavings::Tally;
use harness::daemon::lifecycle::REPLACE_MARGIN_MS;
use harness::runner::run;
use harness::family::Scenario;
use harness::trace::{Outcome, TraceEvent};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use scenarios::daemon_lifecycle as lifecycle;

fn snapshot(name: &str, outcome: &Outcome) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, scenarios::snapshot(&outcome.trace)));
}

/// The events of `kind` that action `action` recorded.
fn of_action<'a>(outcome: &'a Outcome, kind: &'a str, action: u64) -> Vec<&'a TraceEvent> {
    outcome
        .trace
        .of_kind(kind)
        .map(|(_, e)| e)
        .filter(|e| e.num("action") == action)
        .collect()
}

fn count(outcome: &Outcome, kind: &str) -> usize {
    outcome.trace.of_kind(kind).count()
}

/// Action `action`'s `cli.done` outcome.
fn done(outcome: &Outcome, action: u64) -> String {
    let done = of_action(outcome, kind::CLI_DONE, action);
    assert_eq!(done.len(), 1, "action {action} ended once");
    done[0].text("outcome")
}

/// The single replacement decision of `action`.
fn replace_of(outcome: &Outcome, action: u64) -> &TraceEvent {
    let replaced = of_action(outcome, kind::CLI_REPLACE, action);
    assert_eq!(replaced.len(), 1, "action {action} decided once");
    replaced[0]
}


// Goal: a busy shared daemon is drained before it is stopped. Method: A's 1 500 ms call is in
// flight when a config edit makes the daemon stale and B needs it; B polls status until A's
// call is answered, then stops the daemon (addressed to its pid) and launches one.
#[test]
fn busy_daemon_drains_before_stop() {
    let outcome = run(&lifecycle::busy_daemon_drains());
    assert_eq!(outcome.violations, vec![]);
    let stops = of_action(&outcome, kind::CLI_STOP, 2);
    assert_eq!(stops.len(), 1, "one stop");
    let polls_before = of_action(&outcome, kind::CLI_PROBE, 2)
        .iter()
        .filter(|p| p.at_ms <= stops[0].at_ms)
        .count();
    assert!(
        polls_before >= 2,
        "{polls_before} status polls before the stop"
    );
    assert_eq!(
        of_action(&outcome, kind::CLI_LAUNCH, 2).len(),
        1,
        "one launch"
    );
    assert_eq!(stops[0].num("addressed"), 1);
    assert_eq!(
        (done(&outcome, 1), done(&outcome, 2)),
        ("ok".into(), "ok".into())
    );
    assert_eq!(replace_of(&outcome, 2).text("outcome"), "replaced");
    snapshot("daemon_busy_daemon_drains", &outcome);
}

// Goal: a stop never lands on work the daemon admitted after the drain's last probe (MODEL.md
// §4 invariants 6 and 9). Method: replay the race a clean hunt found (seed 1, case 1256, kept in
// `scenarios/races/`): action 7's drain probe sees pid 5 idle, and action 5's request reaches
// pid 5 before action 7's stop does. The stop says `ifIdle`, so the daemon refuses it; action 7
// drains again and stops pid 5 once it is idle. Before the guard this trace stopped pid 5 with
// a5.1 in flight (no_stop_while_busy, no_request_killed_by_replacement).
#[test]
fn stop_that_meets_new_work_is_refused_and_the_drain_goes_on() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/races/daemon_stop_meets_new_work.json");
    let scenario = Scenario::from_json(&std::fs::read_to_string(path).unwrap(), harness::families::FAMILIES).unwrap();
    let outcome = run(&scenario);
    assert_eq!(outcome.violations, vec![]);
    let refused = |e: &&TraceEvent| e.get("refused") == Some(&serde_json::Value::Bool(true));
    let stops: Vec<&TraceEvent> = outcome.trace.of_kind(kind::DAEMON_STOP).map(|(_, e)| e).collect();
    assert!(
        stops.iter().any(|s| refused(s) && s.num("active") > 0),
        "no stop met new work: the race this scenario keeps was not exercised"
    );
    assert!(
        stops.iter().filter(|s| !refused(s)).all(|s| s.num("active") == 0),
        "a stop went through with work in flight"
    );
    assert_eq!(replace_of(&outcome, 7).text("outcome"), "replaced");
}

// Goal: a daemon a peer already replaced is left alone. Method: C waits for the start lock
// while B drains; a peer swaps the daemon; when C gets the lock its first probe finds the
// peer's daemon (with the old config): C neither stops nor launches, and is served.
#[test]
fn peer_replaced_before_drain_is_left_alone() {
    let outcome = run(&lifecycle::peer_replaced_before_drain());
    assert_eq!(outcome.violations, vec![]);
    assert_eq!(replace_of(&outcome, 3).text("outcome"), "peer");
    let first = of_action(&outcome, kind::CLI_PROBE, 3);
    assert_eq!((first[0].num("target"), first[0].num("pid")), (1, 2));
    assert_eq!(count(&outcome, kind::CLI_STOP), 0, "no stop");
    assert_eq!(
        count(&outcome, kind::CLI_LAUNCH),
        1,
        "only the first launch"
    );
    assert_eq!(done(&outcome, 3), "ok");
    snapshot("daemon_peer_replaced_before_drain", &outcome);
}

// Goal: a peer swapping the daemon during a drain is noticed. Method: a peer's `daemon start`
// lands while B polls A's busy daemon; B's next poll sees another pid and uses it.
#[test]
fn peer_swap_mid_drain_is_left_alone() {
    let outcome = run(&lifecycle::peer_swaps_mid_drain());
    assert_eq!(outcome.violations, vec![]);
    assert_eq!(replace_of(&outcome, 2).text("outcome"), "peer_mid_drain");
    assert_eq!(count(&outcome, kind::CLI_STOP), 0, "no stop");
    assert_eq!(
        count(&outcome, kind::CLI_LAUNCH),
        1,
        "only the first launch"
    );
    assert_eq!(
        (done(&outcome, 1), done(&outcome, 2)),
        ("ok".into(), "ok".into())
    );
    snapshot("daemon_peer_swaps_mid_drain", &outcome);
}

// Goal: a daemon that never drains is left running and the client fails loudly. Method: A's
// call runs 90 s; B polls for the whole 60 s drain timeout, then refuses with a message.
#[test]
fn never_draining_daemon_is_left_running() {
    let outcome = run(&lifecycle::never_draining_daemon());
    assert_eq!(outcome.violations, vec![]);
    let replaced = replace_of(&outcome, 2);
    assert_eq!(replaced.text("outcome"), "refused");
    assert!(
        replaced
            .text("message")
            .contains("still has requests in flight"),
        "{}",
        replaced.text("message")
    );
    let first = of_action(&outcome, kind::CLI_PROBE, 2)[0].at_ms;
    let took = replaced.at_ms - first;
    assert!(
        (DRAIN_TIMEOUT_MS..=DRAIN_TIMEOUT_MS + REPLACE_MARGIN_MS).contains(&took),
        "refused after {took} ms"
    );
    assert_eq!(count(&outcome, kind::CLI_STOP), 0, "no stop");
    assert_eq!(
        (done(&outcome, 1), done(&outcome, 2)),
        ("ok".into(), "daemon_busy".into())
    );
    snapshot("daemon_never_draining_daemon", &outcome);
}

// Goal: a protocol-1 client keeps working against a protocol-2 daemon. Method: it asks for no
// frames and must get a single reply it can parse.
#[test]
fn v1_client_gets_a_plain_reply() {
    let outcome = run(&lifecycle::v1_client_on_v2_daemon());
    assert_eq!(outcome.violations, vec![]);
    assert_eq!(done(&outcome, 2), "ok");
    assert_eq!(count(&outcome, kind::CLI_REPLACE), 0, "no replacement");
    snapshot("daemon_v1_client_on_v2_daemon", &outcome);
}

#[test]
fn generated_runs_with_every_lifecycle_switch_off_find_nothing() {
    crate::assert_clean(&harness::daemon::DAEMON, crate::cases(96), 0xC1EA_0004);
}

const LIFECYCLE_SWITCHES: &[&str] = &[
    "stop_without_drain",
    "pid_filtered_drain_probe",
    "pid_shortcut_needs_fresh_config",
    "frames_to_v1_clients",
];

#[test]
fn every_lifecycle_switch_is_found_within_512_cases() {
    let missed = crate::missed_switches(&harness::daemon::DAEMON, LIFECYCLE_SWITCHES, 512, 0x0BAD_0004);
    assert_eq!(
        missed,
        Vec::<&str>::new(),
        "switches not found within 512 cases"
    );
}

// Goal: the generator produces the races on purpose, not by luck. Method: generate lifecycle
// scenarios from a fixed seed, run them with every switch off, and count in each trace a
// mid-request upgrade, a swap before the drain and a swap mid-drain (`PROPTEST_CASES=1000` for
// the per-1 000 figures).
#[test]
fn generator_produces_each_interleaving() {
    let scenarios = crate::cases(200);
    let strategy = harness::daemon::lifecycle_strategy::scenario(Default::default());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[4u8; 32]),
    );
    let mut tally = Tally::default();
    for seed in 0..scenarios {
        let daemon = strategy.new_tree(&mut runner).unwrap().current();
        let outcome = run(&harness::daemon::scenario(seed, daemon, false));
        tally.add(&outcome.trace);
    }
    println!(
        "per 1 000 of {} scenarios: mid-request upgrade {}, swap before drain {}, \
         swap mid-drain {}",
        tally.scenarios,
        tally.per_mille(tally.mid_request_upgrade),
        tally.per_mille(tally.swap_before_drain),
        tally.per_mille(tally.swap_mid_drain)
    );
    assert!(tally.mid_request_upgrade > 0, "{tally:?}");
    assert!(tally.swap_before_drain > 0, "{tally:?}");
    assert!(tally.swap_mid_drain > 0, "{tally:?}");
}
