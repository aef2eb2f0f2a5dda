//! What the relay generator's cases exercised (`hunt --coverage`): the tables and the cells one
//! trace hits. Phases and endings are read at the boundaries (the client's stdio and the
//! relayer's log, as the oracles read them), not from the bridge's own events.

use std::collections::BTreeSet;

use bridge_under_test::events::{host, kind};
use serde_json::Value;

use crate::coverage::{faults_injected, Cell, Table, FAULT_KIND};
use crate::schema::McpSchema;
use crate::trace::Trace;

use super::checks::Facts;
use super::faults::KINDS;
use super::story::same_reply;
use super::wire::PARSE_ERROR;
use bridge_under_test::relay::client::IdForm;

/// A fault against the phase of a request in flight when it struck: `queued` (the client sent it,
/// the relayer has no POST of it yet), `posted` (the relayer has it, no execution yet), `running`
/// (executing), `replying` (the tool finished, the client has not read an answer), `idle`
/// (nothing in flight).
pub const FAULT_PHASE: &str = "fault × request phase";
pub const PHASES: &[&str] = &["queued", "posted", "running", "replying", "idle"];

/// How each request ended, as the client read it: the relayer's own answer (`relayer`), an error
/// after the relayer refused its POST (`rejected`), an error after stdin closed (`shutdown`),
/// another error the bridge made up (`close_out`: the deadline or a lost reply), the protocol
/// refusal its line calls for (`rpc_error`), or none before the run ended (`unanswered`); see
/// `ending_of`.
pub const ENDING: &str = "ending kind × method";
pub const ENDINGS: &[&str] = &["relayer", "rejected", "close_out", "shutdown", "rpc_error", "unanswered"];
pub const METHODS: &[&str] = &["tools/call", "tools/list", "ping"];

/// The ending of a request whose id the client used again afterwards.
pub const REUSE: &str = "id reused after ending";

/// How each request ended, by the JSON-RPC form of its id.
pub const ID_FORM: &str = "id form × ending";
pub const ID_FORMS: &[&str] = &["int", "str", "numeric_str", "large", "negative", "zero"];

/// When the client sent a notification: before the relayer served any stream (`no_session`),
/// while a request was in each phase, with nothing in flight (`idle`), inside a fault's window
/// (`fault`, give or take half a second), or within a second of closing stdin (`before_eof`).
pub const NOTE_MOMENT: &str = "notification × moment";
pub const NOTES: &[&str] = &["notifications/cancelled", "notifications/progress", "notifications/roots/list_changed"];
pub const MOMENTS: &[&str] = &["no_session", "queued", "posted", "running", "replying", "idle", "fault", "before_eof"];

/// Lines that call for a local JSON-RPC error, by form (read from the line, `wire::predict`).
pub const LOCAL_ERROR: &str = "local error × reply";
pub const LOCAL_FORMS: &[&str] = &["parse_error", "invalid_with_id", "invalid_without_id", "id_in_flight"];

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
    Table {
        name: ID_FORM,
        rows: ID_FORMS,
        cols: ENDINGS,
        // As in the ending table: a request left unanswered is a violation, not a case.
        unreachable: &[
            ("int", "unanswered"),
            ("str", "unanswered"),
            ("numeric_str", "unanswered"),
            ("large", "unanswered"),
            ("negative", "unanswered"),
            ("zero", "unanswered"),
        ],
    },
    Table { name: NOTE_MOMENT, rows: NOTES, cols: MOMENTS, unreachable: &[] },
    local_errors(&[]),
];

/// The local-error table (the last of [`TABLES`]), with the cells a family's bridge cannot reach
/// by its design.
pub const fn local_errors(unreachable: &'static [(&'static str, &'static str)]) -> Table {
    Table { name: LOCAL_ERROR, rows: LOCAL_FORMS, cols: &["answered"], unreachable }
}

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
    let mut forms = BTreeSet::new();
    for n in 0..facts.requests.len() {
        let request = &facts.requests[n];
        if request.method.is_empty() || request.method == "initialize" {
            continue;
        }
        let id: Value = request.id.as_deref().and_then(|id| serde_json::from_str(id).ok()).unwrap_or(Value::Null);
        if let Some(form) = IdForm::of(&id) {
            forms.insert((form.name(), ending_of(&facts, n)));
        }
    }
    cells.extend(forms.into_iter().map(|(form, ending)| Cell::new(ID_FORM, form, ending)));
    let mut locals = BTreeSet::new();
    for request in facts.requests.iter().filter(|r| r.local.is_some() && r.answered.is_some()) {
        let form = match (request.local, &request.id) {
            _ if request.dup => "id_in_flight",
            (Some(PARSE_ERROR), _) => "parse_error",
            (_, Some(_)) => "invalid_with_id",
            (_, None) => "invalid_without_id",
        };
        locals.insert(form);
    }
    cells.extend(locals.into_iter().map(|form| Cell::new(LOCAL_ERROR, form, "answered")));
    let mut moments = BTreeSet::new();
    let eof = facts.stories.client_eof.as_ref().map(|(_, at, _)| *at);
    for (index, event) in trace.events.iter().enumerate().filter(|(_, e)| e.host == host::CLIENT && e.kind == kind::MCP_SEND) {
        let method = crate::check::message(event).get("method").and_then(Value::as_str).unwrap_or("").to_string();
        if !NOTES.contains(&method.as_str()) {
            continue;
        }
        let at = event.at_ms;
        if !facts.stories.streams.iter().any(|s| s.opened_ms <= at) {
            moments.insert((method.clone(), "no_session"));
        }
        let phases: Vec<&str> = calls.iter().filter_map(|n| phase_of(&facts, *n, at, index)).collect();
        if phases.is_empty() {
            moments.insert((method.clone(), "idle"));
        }
        for phase in phases {
            moments.insert((method.clone(), phase));
        }
        // Around a fault: inside its window, or within half a second of an instant one.
        if facts.stories.global_faults.iter().any(|(_, start, end)| *start <= at + 500 && at <= *end + 500) {
            moments.insert((method.clone(), "fault"));
        }
        if eof.is_some_and(|eof| eof >= at && eof <= at + 1_000) {
            moments.insert((method.clone(), "before_eof"));
        }
    }
    cells.extend(moments.into_iter().map(|(method, moment)| Cell::new(NOTE_MOMENT, method, moment)));
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

/// How request `n` ended, read at the boundaries, never from the wording of a bridge's error
/// (each bridge words its own: rmcp's bridge says everything as an internal error, -32603, so
/// until this reading every ending of the `sdk` family but the relayer's fell in `rpc_error`):
/// - `relayer`: the answer is one the relayer wrote for it (a reply, or its refusal of an
///   uninitialized session, forwarded);
/// - `rpc_error`: the protocol refusal its line calls for (`wire::predict`, or an id in flight);
/// - `shutdown`: an error the bridge made up after the client closed stdin;
/// - `rejected`: an error after the relayer refused its last POST, or a reset cut it;
/// - `close_out`: any other error the bridge made up (its deadline, a lost reply).
fn ending_of(facts: &Facts<'_>, n: usize) -> &'static str {
    let (request, story) = (&facts.requests[n], &facts.stories.of[n]);
    let Some(answer) = &request.answered else { return "unanswered" };
    if story.sent.iter().chain(&story.refusals).any(|sent| same_reply(&sent.msg, &answer.msg)) {
        return "relayer";
    }
    if request.local.is_some() || request.dup {
        return "rpc_error";
    }
    if facts.stories.client_eof.as_ref().is_some_and(|(_, eof, _)| *eof <= answer.at_ms) {
        return "shutdown";
    }
    if story.posts.last().is_some_and(|post| post.reset || post.status >= 400) {
        return "rejected";
    }
    "close_out"
}
