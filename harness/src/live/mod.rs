//! The live engine: a family's generated scenarios (workload and fault plan) run in real time
//! against a real bridge process on loopback, judged by the same oracles over a trace in the
//! same vocabulary. The scenario is still a pure function of the token; only the bridge is free,
//! so a finding is reported with how often it reproduces, and shrinking re-runs candidates.
//!
//! - `case.rs`: one case (server, process, client, faults by the wall clock);
//! - `server.rs`: the mock server on 127.0.0.1, restartable;
//! - `process.rs`: the bridge process and its process group;
//! - `proxy.rs`: the TCP proxy that holds the link (fault `link_hold`);
//! - `speed.rs`: time compression (the bridge under libfaketime, the harness's side scaled);
//! - `shrink.rs`: shrinking a failure by re-running smaller candidates;
//! - `package.rs`: which release a bridge command runs, read from its install.
//!
//! The relay family says what judges a live trace (`relay/oracles.rs`) and what a bridge does by
//! design (`relay/profile.rs`).

pub mod case;
pub mod package;
pub mod process;
pub mod proxy;
pub mod server;
pub mod shrink;
pub mod speed;

use proptest::strategy::{Strategy, ValueTree};

use crate::hunt::{case_seed, tree_of};
use crate::relay::oracles;
use crate::relay::strategy::live_scenario;
use crate::relay::{RelayScenario, Spec, RELAY};
use crate::schema::McpSchema;
use crate::token::{Token, LIVE_PREFIX};
use crate::trace::{Trace, Violation};
pub use case::{Bridge, NotRun};

/// A live case: its seed and scenario.
#[derive(Debug, Clone)]
pub struct Case {
    pub seed: u64,
    pub scenario: RelayScenario,
}

impl Case {
    /// The token that regenerates it: `live.v1.relay.none.<seed>`.
    pub fn token(&self) -> String {
        live_token(self.seed)
    }

    /// The case as a file `harness live --replay FILE` runs again: its token (the seed of the mock
    /// server's choices) and its scenario, which may no longer be the one the token generates.
    pub fn to_json(&self) -> String {
        #[derive(serde::Serialize)]
        struct File<'a> {
            token: String,
            scenario: &'a RelayScenario,
        }
        serde_json::to_string_pretty(&File { token: self.token(), scenario: &self.scenario }).unwrap_or_default() + "\n"
    }

    /// Read a case file as [`Case::to_json`] writes it.
    pub fn from_json(text: &str) -> Result<Case, String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            token: String,
            scenario: RelayScenario,
        }
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if value.get("sim").is_some() && value.get("family").is_some() {
            return Err("a simulation scenario, not a live case: run it with `harness replay FILE`".to_string());
        }
        if value.get("script").is_some() {
            return Err("a bare scenario without its token: a live case file is {\"token\": \"live.v1.relay.none.<seed>\", \"scenario\": {...}}, as `harness live --save` writes it".to_string());
        }
        let file: File = serde_json::from_value(value).map_err(|e| format!("not a live case: {e}"))?;
        let seed = parse_token(&file.token)?;
        if file.scenario.script.steps.is_empty() {
            return Err("not a live case: its script has no steps".to_string());
        }
        Ok(Case { seed, scenario: file.scenario })
    }

    /// When the case ends at the latest: the client closes stdin at the script's end.
    pub fn horizon_ms(&self) -> u64 {
        let spec = Spec::new(&self.scenario.timing, 1, 0);
        self.scenario.script.end_at_ms + spec.sweep_period_ms
    }
}

pub fn live_token(seed: u64) -> String {
    let token = Token { family: &RELAY, bugs: Vec::new(), seed };
    format!("{LIVE_PREFIX}{token}")
}

/// The seed a live token names (with or without its `live.` prefix).
pub fn parse_token(text: &str) -> Result<u64, String> {
    let inner = text.trim().strip_prefix(LIVE_PREFIX).unwrap_or(text.trim());
    let token = Token::parse(inner)?;
    if *token.family != RELAY || !token.bugs.is_empty() {
        return Err(format!("`{text}` is not a live token (live.v1.relay.none.<seed>)"));
    }
    Ok(token.seed)
}

/// The value tree of the live case of `seed`.
pub fn generate(seed: u64) -> Box<dyn ValueTree<Value = RelayScenario>> {
    tree_of(seed, live_scenario().boxed())
}

/// The case of index `index` under `base`.
pub fn case(base: u64, index: u64) -> Case {
    let seed = case_seed(base, index);
    Case { seed, scenario: generate(seed).current() }
}

/// How long the start-up check's client stays after its handshake's last step: a bridge that
/// starts slower (an `npx` download) is not judged by it, only one that exits first.
const STARTUP_STAY_MS: u64 = 5_000;

/// The start-up check a hunt runs before its cases: case 0's handshake alone, with no faults,
/// the client closing stdin a few seconds after it. A bridge that exits before answering it
/// does not run here (a bad command line, a broken install), and no case would judge it.
pub fn startup_case(base: u64) -> Case {
    let mut case = case(base, 0);
    case.scenario.faults.clear();
    case.scenario.script.steps.truncate(2);
    case.scenario.script.end_at_ms = case.scenario.script.steps.iter().map(|s| s.at_ms).max().unwrap_or(0) + STARTUP_STAY_MS;
    case
}

/// Whether a run of [`startup_case`] shows a bridge that did not start: it exited by itself,
/// its stdin still open, and the client's `initialize` was never answered.
pub fn failed_to_start(judged: &Judged) -> bool {
    let broke = |name: &str| judged.violations.iter().any(|v| v.invariant == name);
    broke("initialize_answered") && broke("lives_until_stdin_closes")
}

/// A judged live run.
pub struct Judged {
    pub trace: Trace,
    pub violations: Vec<Violation>,
    pub stderr: Vec<u8>,
    pub wall_ms: u64,
}

/// Run `case` once against `bridge` and judge it.
pub fn run(case: &Case, bridge: &Bridge, schema: &McpSchema) -> Result<Judged, NotRun> {
    let ran = case::run(&case.scenario, case.seed, case.horizon_ms(), bridge)?;
    let violations = oracles::judge(&ran.trace, schema);
    Ok(Judged { trace: ran.trace, violations, stderr: ran.stderr, wall_ms: ran.wall_ms })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bridge_under_test::relay::client::Op;

    /// A token names the case it named when a finding was filed (`docs/findings.md`): fault kinds
    /// added later are drawn after the rest. M5's token, as `--save` wrote it on 10aa19e, before
    /// `session_lost` existed.
    #[test]
    fn a_findings_token_names_the_case_it_named_before_later_fault_kinds() {
        let scenario = generate(parse_token("live.v1.relay.none.3ee4d3cfde965c52").unwrap()).current();
        let faults = serde_json::to_value(&scenario.faults).unwrap();
        let saved = serde_json::json!([
            {"fault": "relayer_bounce", "at_ms": 695}, {"fault": "post_reject", "at_ms": 1755, "for_ms": 4801, "status": 401},
            {"fault": "slow_tool", "step": 8, "run_ms": 14718}, {"fault": "relayer_bounce", "at_ms": 21178},
            {"fault": "late_reply", "step": 11, "delay_ms": 17718}, {"fault": "server_message", "at_ms": 12241, "message": "tools_list_changed"},
            {"fault": "server_message", "at_ms": 9149, "message": "log"}, {"fault": "server_message", "at_ms": 4177, "message": "tools_list_changed"}
        ]);
        assert_eq!(faults, saved);
        assert_eq!((scenario.script.steps.len(), scenario.script.end_at_ms), (20, 62_473));
    }

    #[test]
    fn live_tokens_round_trip_and_are_refused_by_the_simulation() {
        let token = live_token(0xabc);
        assert_eq!(token, "live.v1.relay.none.0000000000000abc");
        assert_eq!(parse_token(&token), Ok(0xabc));
        let refused = Token::parse(&token).unwrap_err();
        assert!(refused.contains("harness live"), "{refused}");
        assert!(parse_token("live.v1.daemon.none.0000000000000abc").is_err());
    }

    #[test]
    fn a_case_file_round_trips_and_bad_files_are_refused_with_their_reason() {
        let mut shrunk = case(7, 3);
        shrunk.scenario.faults.clear();
        let again = Case::from_json(&shrunk.to_json()).unwrap();
        assert_eq!((again.seed, &again.scenario), (shrunk.seed, &shrunk.scenario));

        let refused = |text: &str| Case::from_json(text).unwrap_err();
        assert!(refused("{").contains("not JSON"));
        let bare = serde_json::to_string(&shrunk.scenario).unwrap();
        assert!(refused(&bare).contains("without its token"), "{}", refused(&bare));
        assert!(refused(r#"{"seed": 1, "sim": {}, "family": {}}"#).contains("harness replay"));
        let sim_token = format!(r#"{{"token": "v1.relay.none.0000000000000007", "scenario": {bare}}}"#);
        assert!(Case::from_json(&sim_token).is_ok(), "the live. prefix may be left out");
        let daemon = format!(r#"{{"token": "live.v1.daemon.none.0000000000000007", "scenario": {bare}}}"#);
        assert!(refused(&daemon).contains("not a live token"), "{}", refused(&daemon));
        let extra = format!(r#"{{"token": "{}", "scenario": {bare}, "note": 1}}"#, shrunk.token());
        assert!(refused(&extra).contains("unknown field"), "{}", refused(&extra));
    }

    #[test]
    fn the_shrunk_cases_of_the_findings_page_are_runnable_case_files() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/findings");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path).unwrap();
                Case::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                read += 1;
            }
        }
        assert!(read >= 6, "{read} case files in {}", dir.display());
    }

    #[test]
    fn live_cases_draw_compressed_timing_and_a_handshake_first() {
        for index in 0..64 {
            let case = case(7, index);
            assert!(case.scenario.timing.slowest_tool_ms <= 10_000, "case {index}: production timing");

            let ops: Vec<&Op> = case.scenario.script.steps.iter().take(2).map(|s| &s.op).collect();
            assert_eq!(ops, [&Op::Initialize, &Op::Initialized], "case {index}: no handshake first");
            assert!(case.scenario.script.steps[1].after_answers, "case {index}: initialized sent before the result");
            assert!(case.scenario.script.stamp_ids, "case {index}: requests not stamped with their ids");
            assert_eq!(case.scenario.faults, super::case(7, index).scenario.faults, "not a function of the seed");
        }
    }
}

#[cfg(test)]
mod process_tests;
