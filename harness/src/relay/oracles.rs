//! Which oracles judge a bridge we did not write: a live run, or rmcp's bridge in the sdk
//! families. A live trace holds only boundary events (the client's stdio,
//! the mock server's log, the process table), so the relay checkers that read the bridge's own
//! events cannot judge it; of the rest, some hold every bridge to what it owes its user and
//! some judge the relay design, for bridges whose profile promises it. Four more are live
//! only: stdout carries only JSON-RPC, the process lives until its stdin closes, it exits
//! within its bound after that, and every `initialize` the client wrote is answered.

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use super::profile::Profile;
use crate::relay::checks::{Facts, Request, CHECKERS};
use crate::verdicts;
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
    INITIALIZE_ANSWERED,
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
    "fails_owed_at_eof",
    "notifications_keep_meta",
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
const INITIALIZE_ANSWERED: &str = "initialize_answered";

/// Judge a live trace: the universal oracles, and the policy oracles its bridge's profile
/// promised, as its `run.spec` records them (so `harness check` judges a saved live trace alike).
pub fn judge(trace: &Trace, schema: &McpSchema) -> Vec<Violation> {
    let exit_within_ms = trace.first(kind::RUN_SPEC).map_or(0, |e| e.num("exit_within_ms"));
    let facts = Facts::new(trace, schema);
    let mut judged: Vec<_> = CHECKERS.iter().copied().filter(|(name, _)| UNIVERSAL.contains(name) || promised(trace, name)).collect();
    judged.push((INITIALIZE_ANSWERED, initialize_answered));
    let mut found = crate::verdicts::run(&judged, &facts);
    found.extend(stdout_only_jsonrpc(trace));
    found.extend(process_lifetime(trace, exit_within_ms));
    found
}

/// Whether the bridge's profile, as the trace's `run.spec` records it, promises what `oracle`
/// judges.
pub fn promised(trace: &Trace, oracle: &str) -> bool {
    trace.first(kind::RUN_SPEC).is_some_and(|e| e.text("promises").split('+').any(|promise| promise == oracle))
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

/// Every `initialize` the client wrote is answered, with a result or an error, before the client
/// leaves. `user_outcomes` leaves `initialize` out (a bridge answers it itself, with what it
/// likes), and a fault may make the handshake fail, but only with an error: a bridge that never
/// answers leaves the server "starting" in the IDE for good (mcp-proxy waits for its own
/// `initialize` upstream before it reads stdin, live.v1.relay.none.3ee4d3cfde965c52). Excused
/// only when the client itself left (closed stdin) before the bridge's call deadline had run
/// out from the write, as `user_outcomes` excuses any other request. A bridge whose profile
/// declares a deadline of its own for the `initialize` (from when it sends it to the server) is
/// not judged when the harness ended the case before that deadline had run out: it would have
/// answered with an error (mcp-remote's 30 s, live.v1.relay.none.0f86e980ca4897cc: the case
/// ended at 27 s, the timer was due at 30.8 s).
fn initialize_answered(facts: &Facts<'_>) -> Vec<Violation> {
    let eof = facts.trace.events.iter().find(|e| e.host == host::CLIENT && e.kind == kind::CLIENT_EOF).map(|e| e.at_ms);
    let end = facts.trace.events.iter().find(|e| e.kind == kind::PROCESS_EXIT);
    let own_deadline = facts.trace.first(kind::RUN_SPEC).map_or(0, |spec| spec.num("initialize_deadline_ms"));
    let sent_on = |request: &Request| {
        // The POST that carried the client's own `initialize` (not a probe of the bridge's).
        let client_id = request.id.as_deref().unwrap_or("");
        let posted = facts.trace.events.iter().find(|e| e.host == host::RELAYER && e.kind == kind::HTTP_POST && e.text("method") == "initialize" && e.text("client_id") == client_id && e.at_ms >= request.at_ms);
        posted.map(|post| post.at_ms)
    };
    let cut_short = |request: &&Request| {
        let killed = end.filter(|exit| exit.text("by") == "harness").map(|exit| exit.at_ms);
        // Never sent on, it has no timer running: the bridge holds it (M1).
        let due = sent_on(request).map(|at| at + own_deadline + facts.slack_ms);
        let cut = own_deadline > 0 && eof.is_none() && killed.zip(due).is_some_and(|(at, due)| at < due);
        if cut {
            verdicts::excused("the case ended before the bridge's own initialize deadline ran out");
        }
        !cut
    };
    let initializes = || facts.requests.iter().filter(|r| r.method == "initialize" && r.id.is_some() && !r.dup);
    verdicts::held_n(initializes().filter(|r| r.answered.is_some()).count());
    let owed = initializes().filter(|r| r.answered.is_none());
    let unexcused = owed.filter(|r| eof.is_none_or(|eof| eof >= r.at_ms + facts.call_timeout_ms + facts.slack_ms)).filter(cut_short);
    unexcused
        .take(3)
        .map(|request| {
            let id = request.id.as_deref().unwrap_or("");
            let left = match (eof, end) {
                (Some(eof), _) => format!("the client closed stdin at {eof} ms"),
                (None, Some(exit)) if exit.text("by") == "self" => format!("the process exited at {} ms", exit.at_ms),
                (None, Some(exit)) => format!("the client was still waiting when the harness ended the case at {} ms", exit.at_ms),
                (None, None) => "the run ended".to_string(),
            };
            let detail = format!("initialize id {id} written at {} ms was never answered, neither a result nor an error; {left}", request.at_ms);
            facts.trace.violation(INITIALIZE_ANSWERED, request.index, detail)
        })
        .collect()
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
    fn every_initialize_the_client_wrote_is_answered_before_it_leaves() {
        let spec = TraceEvent::new(0, host::SIM, kind::RUN_SPEC, &[("engine", Value::from("live")), ("call_timeout_ms", Value::from(60_000)), ("slack_ms", Value::from(10))]);
        let init = r#"{"id":0,"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sim-client","version":"1"}}}"#;
        let send = TraceEvent::new(5, host::CLIENT, kind::MCP_SEND, &[("msg", Value::from(init)), ("malformed", Value::from(false))]);
        let found = |events: Vec<TraceEvent>| -> Vec<String> {
            let trace = Trace { events: [vec![spec.clone(), send.clone()], events].concat() };
            initialize_answered(&Facts::new(&trace, &McpSchema::new())).into_iter().map(|v| v.detail).collect()
        };
        // mcp-proxy over HTTP+SSE, live.v1.relay.none.3ee4d3cfde965c52: no answer, the client
        // waits until the harness kills the bridge at 71.8 s.
        let hung = found(vec![exit(71_767, "harness")]);
        assert_eq!(hung.len(), 1, "{hung:?}");
        assert!(hung[0].contains("initialize id 0 written at 5 ms was never answered"), "{}", hung[0]);
        let trace = Trace { events: vec![spec.clone(), send.clone(), exit(71_767, "harness")] };
        let judged: Vec<String> = judge(&trace, &McpSchema::new()).into_iter().map(|v| v.invariant).collect();
        assert!(judged.contains(&INITIALIZE_ANSWERED.to_string()), "a live trace is judged by it: {judged:?}");
        // Answered with a result, or with an error: the client knows where it stands.
        assert!(found(vec![recv(900, r#"{"jsonrpc":"2.0","id":0,"result":{}}"#), exit(9_000, "harness")]).is_empty());
        assert!(found(vec![recv(900, r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"down"}}"#), eof(5_000), exit(5_100, "self")]).is_empty());
        // The bridge exits with it unanswered (supergateway at 61 s, live.v1.relay.none.df25e19bd599b92b).
        assert_eq!(found(vec![exit(61_007, "self")]).len(), 1);
        // The client left (an IDE closed) 1 s after its initialize, inside the bridge's 60 s
        // deadline: nothing is known against the bridge. Left after the deadline: it hung.
        assert!(found(vec![eof(1_005), exit(1_200, "self")]).is_empty());
        assert_eq!(found(vec![eof(61_000), exit(61_200, "self")]).len(), 1);
        // A bridge with a 30 s deadline of its own for the initialize (mcp-remote), which it sent
        // on at 812 ms: killed at 27.3 s, before the deadline ran out, it is not judged
        // (live.v1.relay.none.0f86e980ca4897cc); killed at 31.5 s, it was.
        let own = TraceEvent::new(0, host::SIM, kind::RUN_SPEC, &[("engine", Value::from("live")), ("call_timeout_ms", Value::from(21_297)), ("slack_ms", Value::from(500)), ("initialize_deadline_ms", Value::from(30_000))]);
        let posted = TraceEvent::new(812, host::RELAYER, kind::HTTP_POST, &[("method", Value::from("initialize")), ("client_id", Value::from("0")), ("status", Value::from(202))]);
        // A probe's initialize (mcp-remote's own session, M1) starts no timer for the client's.
        let probe = TraceEvent::new(700, host::RELAYER, kind::HTTP_POST, &[("method", Value::from("initialize")), ("client_id", Value::from("")), ("status", Value::from(200))]);
        let trace = Trace { events: vec![own.clone(), send.clone(), probe, exit(27_314, "harness")] };
        assert_eq!(initialize_answered(&Facts::new(&trace, &McpSchema::new())).len(), 1, "never sent on, the client's initialize has no timer running");
        let with_own = |killed: u64| {
            let trace = Trace { events: vec![own.clone(), send.clone(), posted.clone(), exit(killed, "harness")] };
            initialize_answered(&Facts::new(&trace, &McpSchema::new())).len()
        };
        assert_eq!(with_own(27_314), 0);
        assert_eq!(with_own(31_500), 1);
        // The excuse is counted under this oracle's own name, not the last one `judge` ran.
        let trace = Trace { events: vec![own.clone(), send.clone(), posted.clone(), exit(27_314, "harness")] };
        let (_, cells) = crate::verdicts::counting(|| judge(&trace, &McpSchema::new()));
        let excused: Vec<&str> = cells.iter().filter(|c| c.col.starts_with("excused")).map(|c| c.row.as_str()).collect();
        assert_eq!(excused, [INITIALIZE_ANSWERED], "{cells:?}");
        // Without such a deadline the same case is judged as any other.
        assert_eq!(found(vec![posted.clone(), exit(27_314, "harness")]).len(), 1);
    }

    #[test]
    fn stdout_carries_only_jsonrpc() {
        let ok = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        let trace = Trace { events: vec![recv(1, ok), recv(2, "Connecting to server..."), recv(3, r#"{"id":2}"#)] };
        let found: Vec<usize> = stdout_only_jsonrpc(&trace).into_iter().map(|v| v.event_index).collect();
        assert_eq!(found, [1, 2]);
    }
}
