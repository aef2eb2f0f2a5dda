//! Unit tests for the channel checkers: each builds a small trace by hand, in the event
//! vocabulary of `bridge_under_test::events`, and runs one checker over a passing and a
//! violating version. Bridge times are `BASE + at_ms`, as in a run.

use bridge_under_test::events::{host, kind};
use serde_json::{json, Value};

use super::*;
use crate::schema::McpSchema;
use crate::trace::{Trace, TraceEvent};

const BASE: u64 = 1_000_000;
const MIN: u64 = 60_000;
const TTL: u64 = 60 * MIN;
const SWEEP: u64 = 5 * MIN;


fn spec() -> TraceEvent {
    TraceEvent::new(
        0,
        host::SIM,
        kind::RUN_SPEC,
        &[
            ("family", json!("channel")),
            ("permission_ttl_ms", json!(TTL)),
            ("approval_default_ttl_ms", json!(30 * MIN)),
            ("sweep_interval_ms", json!(SWEEP)),
            ("wait_min_ms", json!(1)),
            ("wait_max_ms", json!(300_000)),
            ("pending_cap", json!(2)),
            ("queue_limit", json!(2)),
            ("slack_ms", json!(4_000)),
            ("clock_base_ms", json!(BASE)),
            ("session", json!("main")),
        ],
    )
}

fn bridge(at_ms: u64, kind: &str, fields: &[(&str, Value)]) -> TraceEvent {
    TraceEvent::new(at_ms, host::BRIDGE, kind, fields)
}

/// `pending.add` of a new entry; `raw` is the gateway's `expiresAtMs` ("" when absent).
fn add(
    at_ms: u64,
    map: &str,
    id: &str,
    expires_at_ms: u64,
    raw: &str,
    sizes: (u64, u64),
) -> TraceEvent {
    bridge(
        at_ms,
        kind::PENDING_ADD,
        &[
            ("map", json!(map)),
            ("id", json!(id)),
            ("now_ms", json!(BASE + at_ms)),
            ("expires_at_ms", json!(expires_at_ms)),
            ("created_at_ms", json!("")),
            ("raw_expires_at_ms", json!(raw)),
            ("repeat", json!(false)),
            ("permissions", json!(sizes.0)),
            ("approvals", json!(sizes.1)),
        ],
    )
}

fn remove(at_ms: u64, map: &str, id: &str, reason: &str, sizes: (u64, u64)) -> TraceEvent {
    bridge(
        at_ms,
        kind::PENDING_REMOVE,
        &[
            ("map", json!(map)),
            ("id", json!(id)),
            ("reason", json!(reason)),
            ("now_ms", json!(BASE + at_ms)),
            ("permissions", json!(sizes.0)),
            ("approvals", json!(sizes.1)),
        ],
    )
}

fn sweeper(at_ms: u64, kind: &str, reason: &str) -> TraceEvent {
    bridge(
        at_ms,
        kind,
        &[("now_ms", json!(BASE + at_ms)), ("reason", json!(reason))],
    )
}

fn close(at_ms: u64, sizes: [u64; 3], timer: bool) -> TraceEvent {
    bridge(
        at_ms,
        kind::CHANNEL_CLOSE,
        &[
            ("first", json!(true)),
            ("permissions", json!(sizes[0])),
            ("approvals", json!(sizes[1])),
            ("queue", json!(sizes[2])),
            ("timer", json!(timer)),
        ],
    )
}

fn agent(at_ms: u64, kind: &str, msg: &Value) -> TraceEvent {
    TraceEvent::new(at_ms, host::AGENT, kind, &[("msg", json!(msg.to_string()))])
}

fn run(checker: Checker, events: Vec<TraceEvent>) -> Vec<String> {
    let mut all = vec![spec()];
    all.extend(events);
    let trace = Trace { events: all };
    let schema = McpSchema::new();
    let facts = Facts::new(&trace, &schema);
    checker(&facts).into_iter().map(|v| v.detail).collect()
}

#[test]
fn pending_leaves_by_expiry_allows_one_sweep_and_flags_a_leak() {
    let tracked = add(MIN, "permission", "abcde", BASE + MIN + TTL, "", (1, 0));
    let on_time = vec![
        tracked.clone(),
        remove(MIN + TTL + SWEEP, "permission", "abcde", "expired", (0, 0)),
    ];
    assert_eq!(run(pending_leaves_by_expiry, on_time), Vec::<String>::new());
    let leak = vec![
        tracked,
        bridge(
            MIN + TTL + 2 * SWEEP,
            kind::CHANNEL_EXIT,
            &[("timer", json!(false))],
        ),
    ];
    let found = run(pending_leaves_by_expiry, leak);
    assert!(found[0].contains("was still pending"), "{found:?}");
}

#[test]
fn an_entry_that_arrives_expired_is_judged_from_its_tracking() {
    let past = add(MIN, "approval", "a", 0, "0", (0, 1));
    let swept = vec![
        past.clone(),
        remove(MIN + SWEEP, "approval", "a", "expired", (0, 0)),
    ];
    assert_eq!(run(pending_leaves_by_expiry, swept), Vec::<String>::new());
    let late = vec![
        past,
        remove(MIN + 2 * SWEEP, "approval", "a", "expired", (0, 0)),
    ];
    assert_eq!(run(pending_leaves_by_expiry, late).len(), 1);
}

#[test]
fn expiry_anchored_flags_a_wrong_stamp_and_a_moved_one() {
    let raw = (BASE + 11 * MIN).to_string();
    let good = add(MIN, "approval", "a", BASE + 11 * MIN, &raw, (0, 1));
    assert_eq!(
        run(expiry_anchored, vec![good.clone()]),
        Vec::<String>::new()
    );
    let clamped = add(
        MIN,
        "approval",
        "a",
        BASE + 3 * MIN,
        &u64::MAX.to_string(),
        (0, 1),
    );
    assert_eq!(
        run(expiry_anchored, vec![clamped]).len(),
        1,
        "a far-future expiry is clamped to the TTL"
    );
    let moved = bridge(
        6 * MIN,
        kind::PENDING_EXPIRY,
        &[
            ("map", json!("approval")),
            ("id", json!("a")),
            ("now_ms", json!(BASE + 6 * MIN)),
            ("expires_at_ms", json!(BASE + 36 * MIN)),
        ],
    );
    let found = run(expiry_anchored, vec![good, moved]);
    assert!(found[0].contains("moved"), "{found:?}");
}

#[test]
fn bounded_sizes_flags_a_map_or_queue_over_its_bound() {
    let within = vec![add(MIN, "permission", "a", BASE + TTL, "", (2, 0))];
    assert_eq!(run(bounded_sizes, within), Vec::<String>::new());
    let over = vec![
        add(MIN, "permission", "a", BASE + TTL, "", (3, 0)),
        bridge(
            MIN,
            kind::QUEUE_PUSH,
            &[
                ("event", json!("message")),
                ("size", json!(3)),
                ("dropped", json!(false)),
            ],
        ),
    ];
    assert_eq!(run(bounded_sizes, over).len(), 2);
}

#[test]
fn close_clears_flags_leftovers_and_later_insertions() {
    assert_eq!(
        run(close_clears, vec![close(MIN, [0, 0, 0], false)]),
        Vec::<String>::new()
    );
    let leftovers = run(close_clears, vec![close(MIN, [1, 0, 2], true)]);
    assert!(leftovers[0].contains("timer alive true"), "{leftovers:?}");
    let later = vec![
        close(MIN, [0, 0, 0], false),
        add(2 * MIN, "permission", "abcde", BASE + TTL, "", (1, 0)),
        sweeper(2 * MIN, kind::SWEEPER_START, "insert"),
    ];
    assert_eq!(run(close_clears, later).len(), 2);
}

#[test]
fn no_idle_sweeper_allows_the_tick_that_notices_and_flags_an_eager_timer() {
    let lazy = vec![
        add(MIN, "permission", "a", BASE + TTL, "", (1, 0)),
        sweeper(MIN, kind::SWEEPER_START, "insert"),
        remove(2 * MIN, "permission", "a", "reply", (0, 0)),
        sweeper(6 * MIN, kind::SWEEPER_STOP, "empty"),
        bridge(60 * MIN, kind::CHANNEL_EXIT, &[("timer", json!(false))]),
    ];
    assert_eq!(run(no_idle_sweeper, lazy), Vec::<String>::new());
    let eager = vec![
        sweeper(0, kind::SWEEPER_START, "construct"),
        add(20 * MIN, "permission", "a", BASE + TTL, "", (1, 0)),
    ];
    let found = run(no_idle_sweeper, eager);
    assert!(found[0].contains("both maps empty"), "{found:?}");
}

fn read(at_ms: u64, ids: &str) -> TraceEvent {
    bridge(
        at_ms,
        kind::READ_RESULT,
        &[
            ("map", json!("approval")),
            ("now_ms", json!(BASE + at_ms)),
            ("ids", json!(ids)),
        ],
    )
}

#[test]
fn reads_filter_expired_flags_a_stale_entry() {
    let raw = (BASE + 8 * MIN).to_string();
    let tracked = add(MIN, "approval", "a", BASE + 8 * MIN, &raw, (0, 1));
    assert_eq!(
        run(
            reads_filter_expired,
            vec![tracked.clone(), read(7 * MIN, "a"), read(9 * MIN, "")]
        ),
        Vec::<String>::new()
    );
    let found = run(reads_filter_expired, vec![tracked, read(9 * MIN, "a")]);
    assert!(found[0].contains("expired 60000 ms earlier"), "{found:?}");
}

fn say(at_ms: u64, text: &str, owner: bool) -> TraceEvent {
    TraceEvent::new(
        at_ms,
        host::GATEWAY,
        kind::GATEWAY_SAY,
        &[
            ("session", json!("main")),
            ("owner", json!(owner)),
            ("text", json!(text)),
            ("delivered", json!(true)),
        ],
    )
}

fn request(at_ms: u64, id: &str) -> TraceEvent {
    let params =
        json!({"request_id": id, "tool_name": "Bash", "description": "d", "input_preview": ""});
    let method = "notifications/claude/channel/permission_request";
    let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
    agent(at_ms, kind::MCP_SEND, &msg)
}

fn decision(at_ms: u64, id: &str, behavior: &str) -> TraceEvent {
    let params = json!({"request_id": id, "behavior": behavior});
    let msg = json!({"jsonrpc": "2.0", "method": PERMISSION, "params": params});
    agent(at_ms, kind::MCP_RECV, &msg)
}

#[test]
fn one_owner_decision_flags_a_non_owner_and_a_second_decision() {
    let owner = vec![
        request(0, "abcde"),
        say(MIN, "YES abcde", true),
        decision(MIN, "abcde", "allow"),
    ];
    assert_eq!(run(one_owner_decision, owner.clone()), Vec::<String>::new());
    let stranger = vec![
        request(0, "abcde"),
        say(MIN, "yes abcde", false),
        decision(MIN, "abcde", "allow"),
    ];
    assert!(run(one_owner_decision, stranger)[0].contains("without the owner's reply"));
    let mut twice = owner;
    twice.extend([
        say(2 * MIN, "no abcde", true),
        decision(2 * MIN, "abcde", "deny"),
    ]);
    assert!(run(one_owner_decision, twice)[0].contains("second decision"));
}

fn wait(at_ms: u64, id: u64, timeout_ms: i64) -> TraceEvent {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "wait_for_event", "arguments": {"timeout_ms": timeout_ms, "limit": 5}}});
    agent(at_ms, kind::MCP_SEND, &msg)
}

fn answer(at_ms: u64, id: u64) -> TraceEvent {
    let result = json!({"content": [{"type": "text", "text": "{}"}]});
    let msg = json!({"jsonrpc": "2.0", "id": id, "result": result});
    agent(at_ms, kind::MCP_RECV, &msg)
}

#[test]
fn bounded_waits_uses_the_clamped_timeout() {
    let clamped = vec![wait(0, 1, 10_000_000), answer(301_000, 1)];
    assert_eq!(run(bounded_waits, clamped), Vec::<String>::new());
    let late = vec![
        wait(0, 1, 10_000_000),
        answer(310_000, 1),
        answer(311_000, 1),
    ];
    let found = run(bounded_waits, late);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("the bound is 304000 ms"));
    let unanswered = vec![
        wait(0, 2, 0),
        TraceEvent::new(
            MIN,
            host::AGENT,
            kind::CLIENT_EOF,
            &[("reason", json!("end"))],
        ),
    ];
    assert!(run(bounded_waits, unanswered)[0].contains("never answered"));
}

// Issue #28: the channel oracles count their verdicts as the other families' do. A reply
// within its bound held; a wait the agent left before its bound was due is excused by that; a
// late reply failed.
#[test]
fn bounded_waits_counts_held_excused_and_failed() {
    let events = vec![
        spec(),
        wait(0, 1, 1_000),
        answer(1_000, 1),
        wait(2_000, 2, 1_000),
        answer(9_000, 2),
        wait(10_000, 3, 60_000),
        TraceEvent::new(20_000, host::AGENT, kind::CLIENT_EOF, &[("reason", json!("end"))]),
    ];
    let trace = Trace { events };
    let schema = McpSchema::new();
    let facts = Facts::new(&trace, &schema);
    let (found, columns) = crate::verdicts::judged("bounded_waits", bounded_waits, &facts);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(columns, ["failed", "held", "excused: the agent closed stdin before its reply was due"]);
}

#[test]
fn schema_valid_checks_custom_notifications_and_results() {
    let good = vec![
        request(0, "abcde"),
        wait(0, 1, 5),
        answer(5, 1),
        decision(MIN, "abcde", "allow"),
    ];
    assert_eq!(run(schema_valid, good), Vec::<String>::new());
    let bad = agent(
        0,
        kind::MCP_RECV,
        &json!({"jsonrpc": "2.0", "method": PERMISSION, "params": "allow"}),
    );
    let broken_result = agent(
        5,
        kind::MCP_RECV,
        &json!({"jsonrpc": "2.0", "id": 1, "result": {"content": "x"}}),
    );
    let found = run(schema_valid, vec![wait(0, 1, 5), bad, broken_result]);
    assert_eq!(found.len(), 2, "{found:?}");
}

fn line(at_ms: u64) -> TraceEvent {
    bridge(at_ms, kind::CHANNEL_LINE, &[("now_ms", json!(BASE + at_ms))])
}

fn frame(at_ms: u64, text: &str) -> TraceEvent {
    bridge(at_ms, kind::CHANNEL_FRAME, &[("now_ms", json!(BASE + at_ms)), ("text", json!(text))])
}

fn list(at_ms: u64, id: u64) -> TraceEvent {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "list_pending", "arguments": {}}});
    agent(at_ms, kind::MCP_SEND, &msg)
}

fn listed(at_ms: u64, id: u64, permissions: &[&str], approvals: &[&str]) -> TraceEvent {
    let text = json!({"permissions": permissions, "approvals": approvals}).to_string();
    let result = json!({"content": [{"type": "text", "text": text}], "isError": false});
    agent(at_ms, kind::MCP_RECV, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn approval_frame(id: &str, expires: u64) -> String {
    json!({"event": "exec.approval.requested", "payload": {"id": id, "expiresAtMs": expires}})
        .to_string()
}

#[test]
fn model_agrees_predicts_reads_and_names_the_first_difference() {
    // A permission in a padded upper-case form, an approval expiring at 10 min; reads at 5 and
    // 11 min: the model lists both, then only the permission.
    let inputs = |second: &[&str]| {
        vec![
            request(0, " ABCDE "),
            line(1_000),
            frame(2_000, &approval_frame("a", BASE + 10 * MIN)),
            list(5 * MIN, 1),
            line(5 * MIN),
            listed(5 * MIN, 1, &["abcde"], &["a"]),
            list(11 * MIN, 2),
            line(11 * MIN),
            listed(11 * MIN, 2, &["abcde"], second),
        ]
    };
    assert_eq!(run(super::super::model::model_agrees, inputs(&[])), Vec::<String>::new());
    let stale = run(super::super::model::model_agrees, inputs(&["a"]));
    assert!(stale[0].contains("the model predicts reply to 2"), "{stale:?}");
}

#[test]
fn model_agrees_counts_only_live_entries_under_the_cap() {
    // Cap 2: a expires at 3 min, b lives; c at 4 min must evict nothing live.
    let events = |listed_ids: &[&str]| {
        vec![
            frame(MIN, &approval_frame("a", BASE + 3 * MIN)),
            frame(2 * MIN, &approval_frame("b", BASE + 50 * MIN)),
            frame(4 * MIN, &approval_frame("c", BASE + 50 * MIN)),
            list(5 * MIN, 1),
            line(5 * MIN),
            listed(5 * MIN, 1, &[], listed_ids),
        ]
    };
    assert_eq!(run(super::super::model::model_agrees, events(&["b", "c"])), Vec::<String>::new());
    assert_eq!(run(super::super::model::model_agrees, events(&["c"])).len(), 1);
}

#[test]
fn decision_answers_reply_pairs_each_decision_with_one_owner_reply() {
    let once = vec![
        request(0, "ABCDE"),
        say(MIN, "yes abcde", true),
        decision(MIN, "abcde", "allow"),
    ];
    assert_eq!(run(decision_answers_reply, once.clone()), Vec::<String>::new());
    // The agent asks again; one reply must not answer two decisions.
    let mut shared = once;
    shared.extend([request(2 * MIN, "abcde"), decision(3 * MIN, "abcde", "allow")]);
    assert!(run(decision_answers_reply, shared)[0].contains("answers no owner reply"));
    let expired = vec![
        request(0, "abcde"),
        say(TTL + MIN, "yes abcde", true),
        decision(TTL + MIN, "abcde", "allow"),
    ];
    assert_eq!(run(decision_answers_reply, expired).len(), 1, "a reply after the TTL");
}

// Hunt seed 2026, case 321: the owner's "no" left the gateway 1 s before the agent asked again,
// and reached the bridge after the ask (same tick): it answers the new ask. One made long before
// the ask answers nothing.
#[test]
fn decision_answers_reply_takes_a_reply_that_crossed_the_ask_within_the_slack() {
    let crossed = |said_at: u64| {
        vec![
            request(0, "abcde"),
            say(MIN, "yes abcde", true),
            decision(MIN, "abcde", "allow"),
            say(said_at, "no abcde", true),
            request(2 * MIN, " abcde\t"),
            decision(2 * MIN + 1_000, "abcde", "deny"),
        ]
    };
    assert_eq!(run(decision_answers_reply, crossed(2 * MIN - 1_000)), Vec::<String>::new());
    assert!(run(decision_answers_reply, crossed(2 * MIN - 5_000))[0].contains("answers no owner reply"));
}

fn eof(at_ms: u64) -> TraceEvent {
    TraceEvent::new(at_ms, host::AGENT, kind::CLIENT_EOF, &[("reason", json!("end"))])
}

#[test]
fn every_waiter_answered_at_eof_and_once() {
    let answered = vec![wait(0, 1, 300_000), eof(MIN), answer(MIN + 1_000, 1)];
    assert_eq!(run(every_waiter_answered, answered), Vec::<String>::new());
    let dropped = run(every_waiter_answered, vec![wait(0, 1, 300_000), eof(MIN)]);
    assert!(dropped[0].contains("never answered"), "{dropped:?}");
    let late = vec![wait(0, 1, 300_000), eof(MIN), answer(2 * MIN, 1)];
    assert!(run(every_waiter_answered, late)[0].contains("after stdin EOF"));
    let twice = vec![wait(0, 1, 5), answer(5, 1), answer(6, 1)];
    assert!(run(every_waiter_answered, twice)[0].contains("second reply"));
}

fn report(at_ms: u64, socket: bool, waiters: u64) -> TraceEvent {
    bridge(
        at_ms,
        kind::CHANNEL_REPORT,
        &[
            ("closed", json!(true)),
            ("timer", json!(false)),
            ("socket", json!(socket)),
            ("waiters", json!(waiters)),
            ("permissions", json!(0)),
            ("approvals", json!(0)),
            ("queue", json!(0)),
        ],
    )
}

fn gateway(at_ms: u64, kind: &str, conn: u64) -> TraceEvent {
    TraceEvent::new(at_ms, host::GATEWAY, kind, &[("conn", json!(conn)), ("reason", json!("peer"))])
}

#[test]
fn nothing_after_close_holds_the_report_against_the_gateway() {
    let clean = vec![
        gateway(0, kind::GATEWAY_CONN, 1),
        close(MIN, [0, 0, 0], false),
        gateway(MIN + 1_000, kind::GATEWAY_END, 1),
        report(2 * MIN, false, 0),
    ];
    assert_eq!(run(nothing_after_close, clean), Vec::<String>::new());
    let held = vec![
        gateway(0, kind::GATEWAY_CONN, 1),
        close(MIN, [0, 0, 0], false),
        report(2 * MIN, true, 1),
    ];
    let found = run(nothing_after_close, held);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("connection 1 is still open"), "{found:?}");
    assert!(found[1].contains("socket, waiters 1"), "{found:?}");
}

#[test]
fn nothing_after_close_owes_a_report_once_the_agent_closed_stdin() {
    let reported = vec![eof(MIN), close(MIN, [0, 0, 0], false), report(MIN + 10, false, 0)];
    assert_eq!(run(nothing_after_close, reported), Vec::<String>::new());
    // A bridge that never reaches its exit says nothing about itself: the agent's EOF is enough.
    let silent = run(nothing_after_close, vec![eof(MIN), close(MIN, [0, 0, 0], false)]);
    assert_eq!(silent.len(), 1, "{silent:?}");
    assert!(silent[0].contains("never gave its end-of-run resource report"), "{silent:?}");
}

fn sent(at_ms: u64, id: &str, expires: &str) -> TraceEvent {
    TraceEvent::new(
        at_ms,
        host::GATEWAY,
        kind::GATEWAY_SEND,
        &[
            ("event", json!("exec.approval.requested")),
            ("id", json!(id)),
            ("created_at_ms", json!("")),
            ("expires_at_ms", json!(expires)),
            ("delivered", json!(true)),
        ],
    )
}

fn offset(at_ms: u64, offset_ms: i64) -> TraceEvent {
    let detail = json!({"fault": "clock_offset", "at_ms": at_ms, "offset_ms": offset_ms});
    TraceEvent::new(
        at_ms,
        host::SIM,
        kind::FAULT_INJECTED,
        &[("fault", json!("clock_offset")), ("phase", json!("start")), ("detail", json!(detail.to_string()))],
    )
}

#[test]
fn clock_domains_judges_the_gateway_stamp_ahead_and_behind() {
    let ahead = (BASE + 3 * TTL).to_string();
    let clamped = vec![
        offset(0, 2 * TTL as i64),
        sent(MIN, "a", &ahead),
        add(MIN, "approval", "a", BASE + MIN + TTL, &ahead, (0, 1)),
    ];
    assert_eq!(run(clock_domains, clamped), Vec::<String>::new());
    let unclamped = vec![
        offset(0, 2 * TTL as i64),
        sent(MIN, "a", &ahead),
        add(MIN, "approval", "a", BASE + 3 * TTL, &ahead, (0, 1)),
    ];
    assert!(run(clock_domains, unclamped)[0].contains("ahead"));
    let past = (BASE + MIN - 10).to_string();
    let behind = vec![
        offset(0, -(TTL as i64)),
        sent(MIN, "b", &past),
        add(MIN, "approval", "b", BASE + MIN - 10, &past, (0, 1)),
    ];
    assert!(run(clock_domains, behind)[0].contains("had passed"));
}

// Two requests for one id sent within a tick: the second send is recorded before the bridge
// reads the first frame (soak token v1.channel.none.b026f46afb398f24). The tracking is judged
// by the stamp of the frame the bridge read, paired in order, not by the gateway's last one.
#[test]
fn clock_domains_pairs_a_repeated_request_with_the_frame_read() {
    let first = (BASE + 20 * MIN).to_string();
    let second = (BASE + 20 * MIN + 1_800).to_string();
    let read = |stamp: &str| frame(MIN, &json!({"event": "exec.approval.requested", "payload": {"id": "a", "expiresAtMs": stamp.parse::<u64>().unwrap()}}).to_string());
    let tracked = |stored| vec![sent(MIN - 900, "a", &first), sent(MIN - 100, "a", &second), read(&first), add(MIN, "approval", "a", stored, &first, (0, 1))];
    assert_eq!(run(clock_domains, tracked(BASE + 20 * MIN)), Vec::<String>::new());
    // Storing the later stamp for the first frame is still wrong.
    let found = run(clock_domains, tracked(BASE + 20 * MIN + 1_800));
    assert!(found.len() == 1 && found[0].contains("stored expiry"), "{found:?}");
}

// A request the gateway sent as its connection ended never reached the bridge (soak tokens
// v1.channel.none.0ecf10637cf8ee43, v1.channel.none.198c80eea7e18477): the bridge read EOF, the
// gateway sent the id again on the next connection, and the bridge tracked that frame. The
// first stamp judges nothing the bridge read.
#[test]
fn clock_domains_forgets_requests_a_closed_connection_never_delivered() {
    let lost = (BASE + 20 * MIN).to_string();
    let again = (BASE + 50 * MIN).to_string();
    let closed = TraceEvent::new(MIN - 50, host::BRIDGE, kind::GATEWAY_CLOSED, &[("reason", json!("eof"))]);
    let read = frame(2 * MIN, &json!({"event": "exec.approval.requested", "payload": {"id": "a", "expiresAtMs": again.parse::<u64>().unwrap()}}).to_string());
    let conn = TraceEvent::new(MIN, host::GATEWAY, kind::GATEWAY_CONN, &[("conn", json!(2))]);
    let tracked = |stored| vec![sent(MIN - 100, "a", &lost), closed.clone(), conn.clone(), sent(2 * MIN - 10, "a", &again), read.clone(), add(2 * MIN, "approval", "a", stored, &again, (0, 1))];
    assert_eq!(run(clock_domains, tracked(BASE + 50 * MIN)), Vec::<String>::new());
    let found = run(clock_domains, tracked(BASE + 20 * MIN));
    assert!(found.len() == 1 && found[0].contains("stored expiry"), "{found:?}");
    // The lost send recorded after the bridge's EOF, before the gateway took the next
    // connection (soak token v1.channel.none.31b648191af9b314).
    let late = vec![closed.clone(), sent(MIN - 40, "a", &lost), conn, sent(2 * MIN - 10, "a", &again), read.clone(), add(2 * MIN, "approval", "a", BASE + 50 * MIN, &again, (0, 1))];
    assert_eq!(run(clock_domains, late), Vec::<String>::new());
}

fn handed(at_ms: u64, id: u64, events: Value) -> TraceEvent {
    let text = json!({"outcome": "events", "events": events}).to_string();
    let result = json!({"content": [{"type": "text", "text": text}]});
    agent(at_ms, kind::MCP_RECV, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// The bridge read the gateway's request for approval `id`, stamped `expires`, at `at_ms`.
fn read_request(at_ms: u64, id: &str, expires: &str) -> TraceEvent {
    let payload = json!({"id": id, "expiresAtMs": expires.parse::<u64>().unwrap()});
    frame(at_ms, &json!({"event": "exec.approval.requested", "payload": payload}).to_string())
}

#[test]
fn one_event_per_gateway_event_flags_duplicates_and_unlistable_entries() {
    let future = (BASE + 30 * MIN).to_string();
    let requested = json!([{"type": "exec.approval.requested", "id": "a"}]);
    let once = vec![sent(MIN, "a", &future), read_request(MIN, "a", &future), handed(2 * MIN, 1, requested.clone())];
    assert_eq!(run(one_event_per_gateway_event, once.clone()), Vec::<String>::new());
    let mut twice = once;
    twice.push(handed(3 * MIN, 2, requested.clone()));
    assert!(run(one_event_per_gateway_event, twice)[0].contains("more often"));
    let past = (BASE + MIN - 1).to_string();
    let stale = vec![sent(MIN, "a", &past), read_request(MIN, "a", &past), handed(2 * MIN, 1, requested.clone())];
    assert!(run(one_event_per_gateway_event, stale)[0].contains("never listable"));
    // A request the bridge never read was never listable either.
    let unread = vec![sent(MIN, "a", &future), handed(2 * MIN, 1, requested)];
    assert!(run(one_event_per_gateway_event, unread)[0].contains("never listable"));
}

// Soak token v1.channel.none.41bea1bc849f708c: the gateway's host clock read up to a tick ahead
// of the bridge's. The gateway stamped appr-1 to expire 113 ms after the bridge's clock read it,
// which was 228 ms before the gateway's own send time; the bridge tracked it, as MODEL.md §3.4
// says (it judges a stamp on its own clock), and handed its event to the agent. Listable is
// judged on the bridge's clock at the read: the stamp of the gateway's send time judges
// nothing the bridge could see.
#[test]
fn one_event_per_gateway_event_judges_a_stamp_on_the_bridges_clock() {
    let requested = json!([{"type": "exec.approval.requested", "id": "a"}]);
    let stamp = (BASE + MIN + 113).to_string();
    let ahead = vec![sent(MIN + 341, "a", &stamp), read_request(MIN, "a", &stamp), handed(2 * MIN, 1, requested.clone())];
    assert_eq!(run(one_event_per_gateway_event, ahead), Vec::<String>::new());
    // Read after its stamp passed on the bridge's clock: never listable.
    let late = vec![sent(MIN + 341, "a", &stamp), read_request(MIN + 1_000, "a", &stamp), handed(2 * MIN, 1, requested)];
    assert!(run(one_event_per_gateway_event, late)[0].contains("never listable"));
}

fn raw(at_ms: u64, line: &str) -> TraceEvent {
    TraceEvent::new(at_ms, host::AGENT, kind::MCP_SEND, &[("msg", json!(line))])
}

fn got(at_ms: u64, msg: Value) -> TraceEvent {
    agent(at_ms, kind::MCP_RECV, &msg)
}

#[test]
fn replies_follow_jsonrpc_predicts_each_error_from_its_line() {
    let batch = r#"[{"jsonrpc":"2.0","id":9,"method":"ping"}]"#;
    let bad_id = r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#;
    let tool = r#"{"jsonrpc":"2.0","id":"t","method":"tools/call","params":{"name":"nope"}}"#;
    let note = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
    let err = |id: Option<Value>, code: i64| {
        let mut m = json!({"jsonrpc": "2.0", "error": {"code": code, "message": "x"}});
        if let Some(id) = id {
            m["id"] = id;
        }
        m
    };
    let good = vec![
        raw(1_000, "{\"jsonrpc\":"),
        got(1_000, err(None, -32700)),
        raw(2_000, batch),
        got(2_000, err(None, -32600)),
        raw(3_000, bad_id),
        got(3_000, err(None, -32600)),
        raw(4_000, tool),
        got(4_000, err(Some(json!("t")), -32602)),
        raw(5_000, note),
        raw(6_000, r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#),
        got(6_000, json!({"jsonrpc": "2.0", "id": 5, "result": {}})),
    ];
    assert_eq!(run(replies_follow_jsonrpc, good), Vec::<String>::new());
    // A flipped code, an echoed invalid id, a reply to a notification, a silent batch.
    let bad = vec![
        raw(1_000, "{\"jsonrpc\":"),
        got(1_000, err(None, 32700)),
        raw(3_000, bad_id),
        got(3_000, err(Some(json!(true)), -32600)),
        raw(5_000, note),
        got(5_000, err(Some(json!(1)), -32601)),
    ];
    let found = run(replies_follow_jsonrpc, bad);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].contains("error 32700") && found[0].contains("calls for error -32700"), "{found:?}");
    assert!(found[1].contains("no RequestId"), "{found:?}");
    assert!(found[2].contains("no line the agent wrote is owed one"), "{found:?}");
    let found = run(replies_follow_jsonrpc, vec![raw(6_000, batch)]);
    assert!(found.len() == 1 && found[0].contains("never wrote it"), "{found:?}");
    // An error for a well-formed request, and a late one.
    let wrong = vec![
        raw(6_000, r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#),
        got(6_000, err(Some(json!(5)), -32601)),
        raw(7_000, tool),
        got(70_000, err(Some(json!("t")), -32602)),
    ];
    let found = run(replies_follow_jsonrpc, wrong);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("calls for a result") && found[1].contains("at once"), "{found:?}");
}

#[test]
fn model_agrees_predicts_the_bridge_s_own_errors() {
    let line_at = |at_ms| bridge(at_ms, kind::CHANNEL_LINE, &[("now_ms", json!(BASE + at_ms))]);
    let unknown = r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#;
    let good = vec![
        raw(1_000, unknown),
        line_at(1_000),
        got(1_000, json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "x"}})),
    ];
    assert_eq!(run(crate::channel::model::model_agrees, good), Vec::<String>::new());
    let bad = vec![
        raw(1_000, unknown),
        line_at(1_000),
        got(1_000, json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32600, "message": "x"}})),
    ];
    let found = run(crate::channel::model::model_agrees, bad);
    assert!(found.len() == 1 && found[0].contains("Error(-32601)"), "{found:?}");
}

/// Channel oracles the channel family's generator gives nothing to judge, with the reason: none.
/// Each one records verdicts within a hundred cases; one that stops doing so is a blind spot to
/// fix in the generator, or to list here with its reason.
const NEVER_JUDGED_BY_DEFAULT: &[(&str, &str)] = &[];

/// Every channel oracle judges something in a hundred and fifty generated cases (ORACLES.md §8):
/// one that records no verdict is a blind spot of the generator, or an oracle that counts nothing.
#[test]
fn every_oracle_records_verdicts_on_generated_cases() {
    crate::verdicts::assert_every_oracle_judged(&crate::channel::CHANNEL, CHECKERS, NEVER_JUDGED_BY_DEFAULT, 150, 2026);
}
