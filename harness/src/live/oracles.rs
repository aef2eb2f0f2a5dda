//! Which oracles judge a live run. A live trace holds only boundary events (the client's stdio,
//! the mock server's log, the process table), so the relay checkers that read the bridge's own
//! events cannot judge it; of the rest, some hold every bridge to what it owes its user and
//! some judge the relay design, for bridges whose profile promises it. Three more are live
//! only: stdout carries only JSON-RPC, the process lives until its stdin closes, and it exits
//! within its bound after that.

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::profile::Profile;
use crate::relay::checks::{Facts, CHECKERS};
use crate::schema::McpSchema;
use crate::trace::{Trace, Violation};

/// What every bridge owes its user, judged whatever its profile says.
pub const UNIVERSAL: &[&str] = &[
    "one_reply_per_id",
    "reply_answers_outstanding",
    "reply_accounting",
    "notifications_delivered",
    "at_most_once_execution",
    "sessions_initialized",
    "schema_valid",
    "user_outcomes",
    "server_messages_delivered",
    STDOUT_ONLY_JSONRPC,
    LIVES_UNTIL_STDIN_CLOSES,
    EXITS_AFTER_STDIN_CLOSES,
];

/// The relay design's promises, judged when a bridge's profile makes them.
pub const POLICY: &[&str] = &[
    // Our bridge never asks for what the server would refuse; a third-party bridge may probe
    // (mcp-remote GETs the endpoint before it has a session, and a real server answers 400, as
    // the mock does). What such a refusal costs the user, the universal oracles judge.
    "requests_admissible",
    "bounded_latency",
    "wire_conformance",
    "handshake_carried",
    "truthful_endings",
    "prompt_rejection",
    "no_work_after_ending",
    "cancellations_name_their_request",
    "reconnect_discipline",
    "post_retries",
    "refused_requests_resent",
    "client_order_kept",
    "requests_posted_promptly",
    "healthy_streams_kept",
    "silent_streams_abandoned",
];

/// Relay checkers that rest on the bridge's own events: never judged live.
pub const NEEDS_BRIDGE_EVENTS: &[&str] = &[
    "close_out_window",
    "truthful_errors",
    "no_stale_post",
    "single_flight_reconnect",
    "reconnect_backoff",
    "orphans_reconnect",
    "replay_in_order",
    "clean_shutdown",
    "quiescence",
];

const STDOUT_ONLY_JSONRPC: &str = "stdout_only_jsonrpc";
const LIVES_UNTIL_STDIN_CLOSES: &str = "lives_until_stdin_closes";
const EXITS_AFTER_STDIN_CLOSES: &str = "exits_after_stdin_closes";

/// Judge a live trace: the universal oracles, and the policy oracles its bridge's profile
/// promised, as its `run.spec` records them (so `harness check` judges a saved live trace alike).
pub fn judge(trace: &Trace, schema: &McpSchema) -> Vec<Violation> {
    let spec = trace.first(kind::RUN_SPEC);
    let promises = spec.map(|e| e.text("promises")).unwrap_or_default();
    let promised: Vec<&str> = promises.split('+').collect();
    let exit_within_ms = spec.map_or(0, |e| e.num("exit_within_ms"));
    let facts = Facts::new(trace, schema);
    let judged: Vec<_> = CHECKERS.iter().copied().filter(|(name, _)| UNIVERSAL.contains(name) || promised.contains(name)).collect();
    let mut found = crate::verdicts::run(&judged, &facts);
    found.extend(stdout_only_jsonrpc(trace));
    found.extend(process_lifetime(trace, exit_within_ms));
    found
}

/// Whether a trace was recorded by the live engine.
pub fn is_live(trace: &Trace) -> bool {
    trace.first(kind::RUN_SPEC).is_some_and(|e| e.text("engine") == "live")
}

/// The `promises` field a profile's `run.spec` carries.
pub fn promises_field(profile: &Profile) -> String {
    let names: Vec<&str> = profile.promises.iter().map(|p| p.oracle.as_str()).collect();
    names.join("+")
}

/// Every line the bridge writes on stdout is a JSON-RPC 2.0 message: stdout is the protocol
/// channel, and a client drops (or dies on) anything else.
fn stdout_only_jsonrpc(trace: &Trace) -> Vec<Violation> {
    let lines = trace.events.iter().enumerate().filter(|(_, e)| e.host == host::CLIENT && e.kind == kind::MCP_RECV);
    lines
        .filter(|(_, e)| {
            let msg = serde_json::from_str::<Value>(&e.text("msg")).unwrap_or(Value::Null);
            msg.get("jsonrpc") != Some(&Value::from("2.0"))
        })
        .take(3)
        .map(|(index, e)| {
            let line: String = e.text("msg").chars().take(120).collect();
            trace.violation(STDOUT_ONLY_JSONRPC, index, format!("the bridge wrote a line on stdout that is not JSON-RPC 2.0: {line:?}"))
        })
        .collect()
}

/// The process survives until its stdin closes (whatever faults the server showed it), and
/// exits on its own within `exit_within_ms` after that.
fn process_lifetime(trace: &Trace, exit_within_ms: u64) -> Vec<Violation> {
    let eof = trace.events.iter().position(|e| e.host == host::CLIENT && e.kind == kind::CLIENT_EOF);
    let Some((index, exit)) = trace.events.iter().enumerate().find(|(_, e)| e.kind == kind::PROCESS_EXIT) else {
        return Vec::new();
    };
    let status = format!("code {}, signal {}", exit.text("code"), exit.text("signal"));
    match eof.map(|i| &trace.events[i]) {
        Some(eof) if eof_before(trace, index) => {
            // The bound runs from stdin's close, or from the bridge's first sign of life if that
            // came later: a process still starting (importing, connecting) reads no stdin yet.
            // mcp-proxy takes seconds to start on a busy machine, and under --speed K its
            // start-up CPU looks K times longer.
            let from = eof.at_ms.max(first_sign_of_life(trace).unwrap_or(0));
            let waited = exit.at_ms.saturating_sub(from);
            // The harness ended the case before the bridge's exit bound had run out (its stdin
            // closed late, after a slow start): nothing is known against the bridge.
            if exit.text("by") != "self" && waited < exit_within_ms {
                return Vec::new();
            }
            if exit.text("by") != "self" || waited > exit_within_ms {
                let how = if exit.text("by") == "self" { "exited" } else { "was killed by the harness" };
                let since = if from > eof.at_ms { format!(", its first request to the server at {from} ms") } else { String::new() };
                let detail = format!(
                    "stdin closed at {} ms{since}; the process had not exited {exit_within_ms} ms later ({how} at {} ms, {status})",
                    eof.at_ms, exit.at_ms
                );
                return vec![trace.violation(EXITS_AFTER_STDIN_CLOSES, index, detail)];
            }
            Vec::new()
        }
        _ if exit.text("by") == "self" => {
            let detail = format!("the process exited ({status}) while its stdin was still open");
            vec![trace.violation(LIVES_UNTIL_STDIN_CLOSES, index, detail)]
        }
        _ => Vec::new(),
    }
}

/// When the bridge first showed it was running: its first request to the server, or the first
/// line it wrote on stdout.
fn first_sign_of_life(trace: &Trace) -> Option<u64> {
    let alive = |e: &&crate::trace::TraceEvent| (e.host == host::RELAYER && e.kind == kind::HTTP_POST) || (e.host == host::CLIENT && e.kind == kind::MCP_RECV);
    trace.events.iter().find(alive).map(|e| e.at_ms)
}

fn eof_before(trace: &Trace, index: usize) -> bool {
    trace.events[..index].iter().any(|e| e.host == host::CLIENT && e.kind == kind::CLIENT_EOF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceEvent;

    fn exit(at_ms: u64, by: &str) -> TraceEvent {
        TraceEvent::new(at_ms, host::BRIDGE, kind::PROCESS_EXIT, &[("code", Value::from("0")), ("signal", Value::from("")), ("by", Value::from(by))])
    }

    fn eof(at_ms: u64) -> TraceEvent {
        TraceEvent::new(at_ms, host::CLIENT, kind::CLIENT_EOF, &[("reason", Value::from("end"))])
    }

    fn recv(at_ms: u64, line: &str) -> TraceEvent {
        TraceEvent::new(at_ms, host::CLIENT, kind::MCP_RECV, &[("msg", Value::from(line))])
    }

    #[test]
    fn every_oracle_is_in_exactly_one_list() {
        for (name, _) in CHECKERS {
            let lists = [UNIVERSAL, POLICY, NEEDS_BRIDGE_EVENTS].iter().filter(|l| l.contains(name)).count();
            assert_eq!(lists, 1, "relay checker {name} is in {lists} of the live lists");
        }
    }

    #[test]
    fn the_process_lives_until_stdin_closes_then_exits_in_time() {
        let names = |events: Vec<TraceEvent>| -> Vec<String> {
            process_lifetime(&Trace { events }, 5_000).into_iter().map(|v| v.invariant).collect()
        };
        assert!(names(vec![eof(1_000), exit(1_200, "self")]).is_empty());
        assert_eq!(names(vec![exit(900, "self"), eof(1_000)]), [LIVES_UNTIL_STDIN_CLOSES]);
        assert_eq!(names(vec![eof(1_000), exit(6_500, "self")]), [EXITS_AFTER_STDIN_CLOSES]);
        assert_eq!(names(vec![eof(1_000), exit(6_000, "harness")]), [EXITS_AFTER_STDIN_CLOSES]);
        // Killed when the case ended, 2 s into its 5 s bound: the bridge was not given its time
        // (mcp-remote at --speed 10, live.v1.relay.none.c3ee3e9cfcdc2c70: its start-up delayed
        // the client's script, and so its stdin's close, past the case's horizon).
        assert!(names(vec![eof(1_000), exit(3_000, "harness")]).is_empty());
        // Stdin closed while the bridge was starting: its bound runs from its first request to
        // the server (mcp-proxy, live.v1.relay.none.76edd2cc4e72200f: stdin closed at 3 074 ms,
        // first POST and exit at 9 s).
        let post = TraceEvent::new(8_900, host::RELAYER, kind::HTTP_POST, &[("status", Value::from(200))]);
        assert!(names(vec![eof(3_074), post.clone(), exit(9_047, "self")]).is_empty());
        assert_eq!(names(vec![eof(3_074), post, exit(14_000, "self")]), [EXITS_AFTER_STDIN_CLOSES]);
    }

    #[test]
    fn stdout_carries_only_jsonrpc() {
        let ok = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        let trace = Trace { events: vec![recv(1, ok), recv(2, "Connecting to server..."), recv(3, r#"{"id":2}"#)] };
        let found: Vec<usize> = stdout_only_jsonrpc(&trace).into_iter().map(|v| v.event_index).collect();
        assert_eq!(found, [1, 2]);
    }
}
