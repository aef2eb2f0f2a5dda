//! The live engine against stand-in bridges written in shell: whatever the process does, the case
//! ends within its bound and leaves no process and no listening port behind.

use bridge_under_test::events::kind;
use bridge_under_test::relay::client::{ClientScript, Op, Step};

use super::case::{self, Bridge};
use crate::relay::profile::Profile;
use crate::relay::{RelayScenario, Timing};
use crate::trace::Trace;

/// One ping at 100 ms; the client closes stdin at 600 ms.
fn short_scenario() -> RelayScenario {
    let timing = Timing { slowest_tool_ms: 1_000, deadline_margin_ms: 500, sse_idle_ms: 2_000, ..Timing::default() };
    let script = ClientScript { steps: vec![Step::new(100, 1, Op::Ping)], end_at_ms: 600, stamp_ids: true, answers_server: true };
    RelayScenario { bugs: Default::default(), timing, script, faults: Vec::new(), profile: Vec::new() }
}

fn bridge(command: &str) -> Bridge {
    let mut profile = Profile::unknown();
    profile.exit_within_ms = 500;
    Bridge { command: command.to_string(), profile, transport: Default::default(), speed: crate::live::speed::Speed::REAL }
}

fn field(trace: &Trace, kind: &str, name: &str) -> String {
    trace.first(kind).map(|e| e.text(name)).unwrap_or_default()
}

/// Whether any process of group `pgid` is still running (a zombie waiting for a reaper that
/// never comes, as in a container whose init does not reap, counts as gone: it runs nothing).
fn group_alive(pgid: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    entries.flatten().any(|entry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid pgrp ...`: the fields after the last ')'.
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
        fields.len() > 2 && fields[2] == pgid && fields[0] != "Z"
    })
}

fn port_of(trace: &Trace) -> u16 {
    let url = field(trace, kind::PROCESS_START, "url");
    url.trim_start_matches("http://127.0.0.1:").split('/').next().unwrap_or("").parse().unwrap_or(0)
}

fn run(command: &str) -> Trace {
    case::run(&short_scenario(), 1, 1_000, &bridge(command)).unwrap_or_else(|e| panic!("{}", e.0)).trace
}

#[test]
fn a_bridge_that_ignores_sigterm_and_forks_leaves_nothing_behind() {
    // It ignores SIGTERM, never reads stdin, and forks a child into its group.
    let trace = run("trap '' TERM; sleep 30 & sleep 30; wait");
    let pid = field(&trace, kind::PROCESS_START, "pid");
    assert!(!pid.is_empty(), "no process.start in\n{}", trace.render());
    assert_eq!(field(&trace, kind::PROCESS_EXIT, "by"), "harness", "{}", trace.render());
    assert_eq!(field(&trace, kind::PROCESS_EXIT, "signal"), "9", "it ignores SIGTERM: SIGKILL ends it");
    assert!(!group_alive(&pid), "process group {pid} outlived the case");
    let port = port_of(&trace);
    assert_ne!(port, 0);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "port {port} still listens");
    let violations = crate::relay::oracles::judge(&trace, &crate::schema::McpSchema::new());
    assert!(violations.iter().any(|v| v.invariant == "exits_after_stdin_closes"), "{violations:?}");
}

#[test]
fn a_bridge_that_exits_at_once_is_a_finding_and_one_that_does_not_start_is_bad_input() {
    let trace = run("exit 3");
    assert_eq!(field(&trace, kind::PROCESS_EXIT, "code"), "3");
    let violations = crate::relay::oracles::judge(&trace, &crate::schema::McpSchema::new());
    assert!(violations.iter().any(|v| v.invariant == "lives_until_stdin_closes"), "{violations:?}");
    let not_run = case::run(&short_scenario(), 1, 1_000, &bridge("/no/such/bridge {url}")).err().expect("bad input");
    assert!(not_run.0.contains("did not start") && not_run.0.contains("127"), "{}", not_run.0);
}

#[test]
fn a_client_that_closes_stdin_late_gives_the_bridge_its_whole_exit_bound() {
    // The client's script waits for the `initialize` answer before its next step (as an SDK
    // client does), so a bridge slow to answer delays stdin's close past the horizon (1 s here;
    // mcp-remote's start-up at --speed 10, live.v1.relay.none.c3ee3e9cfcdc2c70). This bridge
    // answers at 3 s, the client then closes stdin, and the bridge exits 0.8 s later, inside its
    // 1.5 s bound; a case cut by the horizon (1 s + 1.5 s + 1 s of grace) would kill it at 3.5 s.
    let timing = Timing { slowest_tool_ms: 1_000, deadline_margin_ms: 500, sse_idle_ms: 2_000, ..Timing::default() };
    let mut ping = Step::new(100, 2, Op::Ping);
    ping.after_answers = true;
    let script = ClientScript { steps: vec![Step::new(0, 1, Op::Initialize), ping], end_at_ms: 600, stamp_ids: true, answers_server: true };
    let scenario = RelayScenario { bugs: Default::default(), timing, script, faults: Vec::new(), profile: Vec::new() };
    let mut bridge = bridge(r#"sleep 3; printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{}}'; cat >/dev/null; sleep 0.8"#);
    bridge.profile.exit_within_ms = 1_500;
    let trace = case::run(&scenario, 1, 1_000, &bridge).unwrap_or_else(|e| panic!("{}", e.0)).trace;
    assert_eq!(field(&trace, kind::PROCESS_EXIT, "by"), "self", "{}", trace.render());
    let violations = crate::relay::oracles::judge(&trace, &crate::schema::McpSchema::new());
    assert!(!violations.iter().any(|v| v.invariant.contains("stdin_closes")), "{violations:?}");
}

// The start-up check a hunt runs first (mcp-proxy 0.11.0 with today's `mcp` package: an import
// error at start-up, and 23 of 24 cases reported it as findings): a bridge that exits before
// answering the handshake fails it; one that answers and lives, or one merely slow to start, does
// not.
#[test]
fn the_start_up_check_fails_only_a_bridge_that_exits_before_answering_the_handshake() {
    let schema = crate::schema::McpSchema::new();
    let check = |command: &str| {
        let mut bridge = bridge(command);
        bridge.profile.exit_within_ms = 1_000;
        let case = super::startup_case(7);
        assert!(case.scenario.faults.is_empty() && case.scenario.script.steps.len() == 2);
        super::failed_to_start(&super::run(&case, &bridge, &schema).unwrap_or_else(|e| panic!("{}", e.0)))
    };
    assert!(check("echo 'ImportError: cannot import name' >&2; exit 1"));
    let answers = r#"read -r line; printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}'; cat >/dev/null"#;
    assert!(!check(answers));
    assert!(!check("cat >/dev/null"), "a bridge that never answers but stays up is for the cases to judge");
}
