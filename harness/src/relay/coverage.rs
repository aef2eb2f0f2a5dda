//! What the relay generator's cases exercised (`hunt --coverage`): the tables and the cells one
//! trace hits. Phases and endings are read at the boundaries (the client's stdio and the
//! relayer's log, as the oracles read them), not from the bridge's own events.

use std::collections::BTreeSet;

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use crate::coverage::{faults_injected, Cell, Table, FAULT_KIND};
use crate::schema::McpSchema;
use crate::trace::Trace;

use super::checks::{error_text, Facts};
use super::faults::KINDS;
use super::story::same_reply;

/// A fault against the phase of a request in flight when it struck: `queued` (the client sent it,
/// the relayer has no POST of it yet), `posted` (the relayer has it, no execution yet), `running`
/// (executing), `replying` (the tool finished, the client has not read an answer), `idle`
/// (nothing in flight).
pub const FAULT_PHASE: &str = "fault × request phase";
pub const PHASES: &[&str] = &["queued", "posted", "running", "replying", "idle"];

/// How each request ended, as the client read it: the relayer's own answer (`relayer`), a
/// rejection naming an HTTP status (`rejected`), the stdin-closed failure (`shutdown`), another
/// error the bridge made up (`close_out`: the deadline or a lost reply), a JSON-RPC error
/// (`rpc_error`), or none before the run ended (`unanswered`).
pub const ENDING: &str = "ending kind × method";
pub const ENDINGS: &[&str] = &["relayer", "rejected", "close_out", "shutdown", "rpc_error", "unanswered"];
pub const METHODS: &[&str] = &["tools/call", "tools/list", "ping"];

/// The ending of a request whose id the client used again afterwards.
pub const REUSE: &str = "id reused after ending";

/// Faults that act on one request (fired at the relayer at a phase fixed by what they do).
const PER_STEP: &[&str] = &["duplicate_reply", "late_reply", "swallow_reply", "slow_tool"];

/// The relay family's coverage tables.
pub const TABLES: &[Table] = &[
    Table { name: FAULT_KIND, rows: KINDS, cols: &["start"], unreachable: &[] },
    Table {
        name: FAULT_PHASE,
        rows: KINDS,
        cols: PHASES,
        // A per-step fault fires on its request at the phase it acts in: a reply fault when the
        // reply is written, a slow tool when it starts; never on a queued request, nor idle.
        unreachable: &[
            ("duplicate_reply", "queued"),
            ("duplicate_reply", "posted"),
            ("duplicate_reply", "running"),
            ("duplicate_reply", "idle"),
            ("late_reply", "queued"),
            ("late_reply", "posted"),
            ("late_reply", "running"),
            ("late_reply", "idle"),
            ("swallow_reply", "queued"),
            ("swallow_reply", "posted"),
            ("swallow_reply", "running"),
            ("swallow_reply", "idle"),
            ("slow_tool", "queued"),
            ("slow_tool", "posted"),
            ("slow_tool", "replying"),
            ("slow_tool", "idle"),
        ],
    },
    Table {
        name: ENDING,
        rows: METHODS,
        cols: ENDINGS,
        // `unanswered`: the client closes stdin only after every request has had a deadline and
        // two sweeps, and a bridge that leaves one unanswered is a violation, not a case to reach.
        unreachable: &[("tools/call", "unanswered"), ("tools/list", "unanswered"), ("ping", "unanswered")],
    },
    // After a `shutdown` ending the client has closed stdin: it sends nothing more.
    Table {
        name: REUSE,
        rows: ENDINGS,
        cols: &["reused"],
        unreachable: &[("shutdown", "reused"), ("unanswered", "reused")],
    },
];

/// The cells one run's trace hits (each at most once per case, but per-kind injections).
pub fn observe(trace: &Trace) -> Vec<Cell> {
    let mut cells = faults_injected(trace);
    let schema = McpSchema::new();
    let facts = Facts::new(trace, &schema);
    let mut seen = BTreeSet::new();
    let calls: Vec<usize> = (0..facts.requests.len()).filter(|n| METHODS.contains(&facts.requests[*n].method.as_str())).collect();
    for (index, event) in trace.events.iter().enumerate() {
        let (fault, at) = match (event.host.as_str(), event.kind.as_str()) {
            (host::SIM, kind::FAULT_INJECTED) if event.text("phase") == "start" => {
                let fault = event.text("fault");
                if fault == "heal" || PER_STEP.contains(&fault.as_str()) {
                    continue;
                }
                (fault, event.at_ms)
            }
            (host::RELAYER, kind::FAULT_FIRED) if PER_STEP.contains(&event.text("fault").as_str()) => {
                // The request it fired on, by its action.
                let action = event.text("action");
                let Some(n) = calls.iter().copied().find(|n| facts.stories.of[*n].action == action && !action.is_empty()) else { continue };
                if let Some(phase) = phase_of(&facts, n, event.at_ms, index) {
                    seen.insert((event.text("fault"), phase));
                }
                continue;
            }
            _ => continue,
        };
        let phases: Vec<&str> = calls.iter().filter_map(|n| phase_of(&facts, *n, at, index)).collect();
        if phases.is_empty() {
            seen.insert((fault.clone(), "idle"));
        }
        for phase in phases {
            seen.insert((fault.clone(), phase));
        }
    }
    cells.extend(seen.into_iter().map(|(fault, phase)| Cell::new(FAULT_PHASE, fault, phase)));
    let mut endings = BTreeSet::new();
    let mut reused = BTreeSet::new();
    for &n in &calls {
        let request = &facts.requests[n];
        let ending = ending_of(&facts, n);
        endings.insert((request.method.clone(), ending));
        let reuse_after = request.answered.as_ref().map_or(u64::MAX, |a| a.at_ms);
        let again = facts.requests.iter().any(|r| r.id == request.id && r.at_ms > reuse_after);
        if again {
            reused.insert(ending);
        }
    }
    cells.extend(endings.into_iter().map(|(method, ending)| Cell::new(ENDING, method, ending)));
    cells.extend(reused.into_iter().map(|ending| Cell::new(REUSE, ending, "reused")));
    cells
}

/// The phase request `n` was in at `at_ms` (event `index` is the fault's), if in flight.
fn phase_of(facts: &Facts<'_>, n: usize, at_ms: u64, index: usize) -> Option<&'static str> {
    let request = &facts.requests[n];
    let story = &facts.stories.of[n];
    if request.index > index || request.answered.as_ref().is_some_and(|a| a.index < index) {
        return None;
    }
    let posted = story.posts.iter().any(|p| p.index < index);
    let executing = story.execs.iter().any(|(i, _)| *i < index);
    let done = story.done_ms.is_some_and(|done| done <= at_ms);
    Some(match (posted, executing, done) {
        (false, false, _) => "queued",
        (_, _, true) => "replying",
        (_, true, false) => "running",
        (true, false, false) => "posted",
    })
}

fn ending_of(facts: &Facts<'_>, n: usize) -> &'static str {
    let Some(answer) = &facts.requests[n].answered else { return "unanswered" };
    if facts.stories.of[n].sent.iter().any(|sent| same_reply(&sent.msg, &answer.msg)) {
        return "relayer";
    }
    // A protocol-level refusal (an id already in flight, an invalid request) is a JSON-RPC error
    // of the -326xx range; every other ending the bridge makes names what happened.
    let code = answer.msg.pointer("/error/code").and_then(Value::as_i64);
    if code.is_some_and(|code| (-32700..=-32600).contains(&code)) {
        return "rpc_error";
    }
    let text = error_text(&answer.msg).unwrap_or_default();
    if text.contains("stdin") {
        "shutdown"
    } else if text.contains("HTTP ") {
        "rejected"
    } else {
        "close_out"
    }
}
