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
