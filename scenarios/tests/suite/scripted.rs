//! Scripted scenarios: fixed seed, explicit fault plan, a trace snapshot, and assertions that
//! the fault fired and the recovery happened.

use bridge_under_test::events::kind;
use harness::relay::checks::error_text;
use harness::runner::run;
use harness::trace::{Outcome, TraceEvent};
use serde_json::Value;

fn snapshot(name: &str, outcome: &Outcome) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(name, scenarios::snapshot(&outcome.trace)));
}

fn count(outcome: &Outcome, kind: &str) -> usize {
    outcome.trace.of_kind(kind).count()
}

fn events<'a>(outcome: &'a Outcome, kind: &'a str) -> Vec<&'a TraceEvent> {
    outcome.trace.of_kind(kind).map(|(_, e)| e).collect()
}

/// The replies the client read for a numeric id.
fn replies(outcome: &Outcome, id: u64) -> Vec<Value> {
    events(outcome, kind::MCP_RECV)
        .into_iter()
        .map(|e| serde_json::from_str::<Value>(&e.text("msg")).unwrap())
        .filter(|msg| msg.get("id") == Some(&Value::from(id)))
        .collect()
}

// Goal: an orphaned call ends at its deadline with a truthful error, and the late genuine reply
// does not become a second response. Method: the relayer holds the `remember` reply 4 s past a
// 2 s call timeout while keep-alives flow every 200 ms.
#[test]
fn orphaned_call_is_closed_out_truthfully_and_the_late_reply_dropped() {
    let outcome = run(&scenarios::orphaned_call());
    assert_eq!(outcome.violations, vec![]);
    let replies = replies(&outcome, 1);
    assert_eq!(replies.len(), 1, "exactly one reply for the call: {replies:?}");
    assert_eq!(replies[0].pointer("/result/isError"), Some(&Value::Bool(true)));
    let text = error_text(&replies[0]).unwrap();
    assert!(text.contains("healthy") && text.contains("may have completed"), "{text}");
    let closed = events(&outcome, kind::CALL_CLOSED_OUT);
    assert_eq!(closed.len(), 1);
    let age = closed[0].num("age_ms");
    assert!(age > 2_000 && age <= 2_000 + 666, "closed out {age} ms after admission");
    assert_eq!(count(&outcome, kind::STREAM_OPEN), 1, "one SSE GET: a healthy stream is kept");
    let dropped = events(&outcome, kind::REPLY_DROPPED);
    assert!(dropped.iter().any(|e| e.text("reason") == "closed_out"), "the late reply arrived and was dropped");
    let init = replies_for_initialize(&outcome);
    assert_eq!(init, 1, "initialize answered once, locally");
    snapshot("relay_orphaned_call", &outcome);
}

// Goal: a call is closed out after its deadline, never at it (relay mutant bridge.rs:740
// `>` -> `>=` in sweep_once survived the gate: a deadline rarely falls exactly on a sweep).
// Method: calls admitted a tick apart while replies are withheld, so one deadline falls on a
// sweep; close_out_window judges the edge exactly in the simulation.
#[test]
fn a_call_whose_deadline_falls_on_a_sweep_is_closed_out_at_the_next() {
    let outcome = run(&scenarios::deadline_on_a_sweep());
    assert_eq!(outcome.violations, vec![]);
    let ages: Vec<u64> = events(&outcome, kind::CALL_CLOSED_OUT).iter().map(|e| e.num("age_ms")).collect();
    assert_eq!(ages.len(), 20, "every call closed out: {ages:?}");
    assert!(ages.iter().all(|age| *age > 3_000 && *age <= 4_000), "{ages:?}");
    assert!(ages.contains(&4_000), "one deadline fell on a sweep, closed out a whole period later: {ages:?}");
}

fn replies_for_initialize(outcome: &Outcome) -> usize {
    replies(outcome, 0).iter().filter(|m| m.pointer("/result/protocolVersion").is_some()).count()
}

// Goal: a stream that goes silent is detected by the watchdog. Method: the first session sends
// its endpoint and then stalls; idle budget 1.5 s.
#[test]
fn silent_stream_is_abandoned_and_the_second_session_answers() {
    let outcome = run(&scenarios::silent_stream());
    assert_eq!(outcome.violations, vec![]);
    let closed = events(&outcome, kind::SSE_CLOSED);
    assert!(closed.iter().any(|e| e.text("reason") == "idle"), "the watchdog fired");
    assert!(count(&outcome, kind::STREAM_OPEN) >= 2, "at least two SSE GETs");
    let replies = replies(&outcome, 1);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].pointer("/result/isError"), Some(&Value::Bool(false)), "answered by the second session");
    snapshot("relay_silent_stream", &outcome);
}

// Goal: a replay after a dropped stream never executes a write twice. Method: the stream ends
// while `remember` runs; the bridge reconnects and replays with the same idempotency key.
#[test]
fn replayed_write_executes_once() {
    let outcome = run(&scenarios::replay_double_write());
    assert_eq!(outcome.violations, vec![]);
    assert!(events(&outcome, kind::FAULT_FIRED).iter().any(|e| e.text("fault") == "stream_eof"));
    let replayed = events(&outcome, kind::POST_SEND);
    assert!(replayed.iter().any(|e| e.get("replay") == Some(&Value::Bool(true))), "the call was replayed");
    assert_eq!(count(&outcome, kind::TOOL_EXEC), 1, "executed once");
    assert!(count(&outcome, kind::TOOL_DEDUP) >= 1, "the replay was answered from the log");
    let replies = replies(&outcome, 1);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].pointer("/result/isError"), Some(&Value::Bool(false)));
    snapshot("relay_replay_double_write", &outcome);
}

// Goal: an `initialize` refused for good answers the requests waiting on it at once, with the
// truth (the status, how often it was tried, never sent), and the next request starts over; a
// call refused through its retries says so too. Method: every POST is answered 429 for 1.5 s
// while the first session initializes with call 1 waiting; call 2 comes after the window; every
// POST is answered 503 for 1.5 s around call 3.
#[test]
fn a_rate_limited_initialize_answers_the_waiting_call_at_once() {
    let outcome = run(&scenarios::rate_limited_initialize());
    assert_eq!(outcome.violations, vec![]);
    let inits: Vec<_> = events(&outcome, kind::HTTP_POST).into_iter().filter(|e| e.text("method") == "initialize").collect();
    let refused: Vec<u64> = inits.iter().filter(|e| e.num("status") == 429).map(|e| e.at_ms).collect();
    assert_eq!(refused.len(), 3, "one initialize and its two retries refused: {inits:?}");
    assert!(refused[1] >= refused[0] + 250 && refused[2] >= refused[1] + 500, "retried after the backoffs: {refused:?}");
    let answer = events(&outcome, kind::MCP_RECV).into_iter().find(|e| e.text("msg").contains("\"id\":1")).expect("call 1 is answered");
    assert!(answer.at_ms <= refused[2] + 200, "answered {} ms after the last refusal", answer.at_ms - refused[2]);
    let text = error_text(&replies(&outcome, 1)[0]).expect("an error");
    assert!(text.contains("HTTP 429") && text.contains("after 3 attempts") && text.contains("never sent"), "{text}");
    assert_eq!(replies(&outcome, 2)[0].pointer("/result/isError"), Some(&Value::Bool(false)), "call 2 succeeds");
    assert!(inits.last().is_some_and(|e| e.num("status") == 202), "the session was initialized again");
    let failed: Vec<_> = events(&outcome, kind::HTTP_POST).into_iter().filter(|e| e.text("client_id") == "3").collect();
    assert!(failed.len() == 3 && failed.iter().all(|e| e.num("status") == 503), "call 3 tried three times: {failed:?}");
    let text = error_text(&replies(&outcome, 3)[0]).expect("an error");
    assert!(text.contains("HTTP 503") && text.contains("after 3 attempts"), "{text}");
    snapshot("relay_rate_limited_initialize", &outcome);
}

// Goal: a call that waits for a session whose `initialize` went unanswered is sent once the
// initialize is, not left to its deadline, and never to the session before it. Method: every
// POST's connection is reset for 1.2 s, before the relayer reads it, so the session's
// `initialize` goes unanswered three times. (The bridge once sent the call anyway; the relayer
// refused it as uninitialized, and a call behind it could overtake it:
// `a_session_whose_initialize_went_unanswered_gets_no_request`.)
#[test]
fn a_call_waits_for_an_initialize_that_went_unanswered() {
    let outcome = run(&scenarios::unanswered_initialize());
    assert_eq!(outcome.violations, vec![]);
    assert_eq!(count(&outcome, kind::RPC_REFUSED), 0, "the call never meets an uninitialized session");
    let posts: Vec<String> = events(&outcome, kind::HTTP_POST).iter().map(|e| format!("{}:{}", e.text("method"), e.num("status"))).collect();
    assert_eq!(posts, ["initialize:0", "initialize:0", "initialize:0", "initialize:202", "tools/call:202"], "{posts:?}");
    assert_eq!(replies(&outcome, 1)[0].pointer("/result/isError"), Some(&Value::Bool(false)));
    snapshot("relay_unanswered_initialize", &outcome);
}

// Goal: a request that never ran is not one whose work "may have completed": when the session's
// next `initialize` is refused for good, it is answered at once with that refusal. Method:
// `unanswered_initialize`, with the token revoked (401) as the bridge initializes again. A bridge
// that sent the call to the uninitialized session, and counted the refused call as accepted,
// closed it out at its deadline saying the work may have completed (`truthful_endings`).
#[test]
fn a_call_waiting_on_an_initialize_is_answered_with_its_refusal() {
    let outcome = run(&scenarios::unanswered_initialize_then_revoked());
    assert_eq!(outcome.violations, vec![]);
    let refused: Vec<u64> = events(&outcome, kind::HTTP_POST).iter().filter(|e| e.num("status") == 401).map(|e| e.at_ms).collect();
    assert!(!refused.is_empty(), "the initialize after the resets is refused for good");
    let text = error_text(&replies(&outcome, 1)[0]).expect("an error");
    assert!(text.contains("initialize failed") && text.contains("HTTP 401") && !text.contains("may have completed"), "{text}");
}

// Goal: a client that talks late is served as itself, and its first call goes right after the
// handshake. Method: `initialize` at 300 ms (the session is up since 100 ms), the note at 600 ms
// and a call 20 ms later, while the bridge's own note is in flight.
#[test]
fn a_late_handshake_initializes_the_session_with_the_clients_params() {
    let outcome = run(&scenarios::late_handshake());
    assert_eq!(outcome.violations, vec![]);
    let served: Vec<String> = events(&outcome, kind::RPC_INITIALIZE).iter().map(|e| e.text("params")).collect();
    assert!(served.len() == 1 && served[0].contains("sim-client"), "one initialize, the client's: {served:?}");
    let answer = events(&outcome, kind::MCP_RECV).into_iter().find(|e| e.text("msg").contains("recall a2: done"));
    assert!(answer.is_some_and(|e| e.at_ms < 1_500), "the call is answered at once: {answer:?}");
}

// Goal: keep-alives count as stream activity, so a quiet stream is never mistaken for a dead
// one. Method: only keep-alives (every 200 ms) cross the stream for 4 s between two calls, with
// a 1 500 ms idle budget. A watchdog that only data events reset closes the healthy stream
// (`healthy_streams_kept`, from the relayer's `stream.close by=client`).
#[test]
fn a_quiet_stream_with_keepalives_is_kept() {
    let outcome = run(&scenarios::quiet_stream());
    assert_eq!(outcome.violations, vec![]);
    assert_eq!(count(&outcome, kind::STREAM_OPEN), 1, "one stream all along");
    assert_eq!(replies(&outcome, 2)[0].pointer("/result/isError"), Some(&Value::Bool(false)));
    snapshot("relay_quiet_stream", &outcome);
}

// Goal: a relayer that keeps accepting streams and dropping them before their endpoint event sees
// the bridge back off more each time, and never a stream left unreplaced. Method: the first
// stream ends at 3 s and every new one is dropped at once for 4 s; a call is sent at 3.5 s.
#[test]
fn a_flapping_relayer_sees_growing_backoff() {
    let outcome = run(&scenarios::flapping_relayer());
    assert_eq!(outcome.violations, vec![]);
    assert!(fired(&outcome, "stream_flap"), "the flap dropped a stream");
    let opens: Vec<u64> = events(&outcome, kind::STREAM_OPEN).iter().map(|e| e.at_ms).collect();
    assert!(opens.len() >= 4, "the bridge kept reconnecting: {opens:?}");
    let gaps: Vec<u64> = opens[1..].windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.windows(2).all(|w| w[1] > w[0]), "the waits between dropped streams grow: {gaps:?}");
    assert_eq!(replies(&outcome, 1)[0].pointer("/result/isError"), Some(&Value::Bool(false)), "answered once a stream stays");
    snapshot("relay_flapping_relayer", &outcome);
}

/// The scripted scenarios that are regression tests: (scenario, switch, the checker that fails
/// with the switch on).
fn switch_cases() -> Vec<(harness::family::Scenario, &'static str, &'static str)> {
    vec![
        (scenarios::orphaned_call(), "no_closed_out_filter", "one_reply_per_id"),
        (scenarios::orphaned_call(), "no_call_deadline", "bounded_latency"),
        (scenarios::orphaned_call(), "relayer_unavailable_wording", "truthful_errors"),
        (scenarios::replay_double_write(), "no_idempotency_key", "at_most_once_execution"),
    ]
}

// Each scripted scenario is also a regression test: with its bug switched on, the checkers fail.
#[test]
fn scripted_scenarios_fail_with_their_bugs_on() {
    for (scenario, bug, invariant) in switch_cases() {
        crate::assert_broken(scenario, bug, invariant);
    }
}

// A malformed client line gets a parse error and everything else keeps working.
#[test]
fn malformed_line_gets_a_parse_error_and_the_session_goes_on() {
    let mut steps = scenarios::handshake();
    steps.push(scenarios::step(200, 1, bridge_under_test::relay::client::Op::Malformed));
    steps.push(scenarios::call(400, 2, bridge_under_test::relay::client::Tool::Recall, 20));
    let outcome = run(&scenarios::relay(4, scenarios::fast_timing(30_000, 2_000), steps, vec![]));
    assert_eq!(outcome.violations, vec![]);
    let parse_error = events(&outcome, kind::MCP_RECV)
        .into_iter()
        .map(|e| serde_json::from_str::<Value>(&e.text("msg")).unwrap())
        .find(|m| m.pointer("/error/code") == Some(&Value::from(-32700)));
    assert!(parse_error.is_some_and(|m| m.get("id").is_none()), "-32700 without an id");
    assert_eq!(replies(&outcome, 2).len(), 1, "the next call is answered");
}

/// A race a clean hunt found in the default bridge, kept in `scenarios/races/`.
fn race(name: &str) -> Outcome {
    race_edited(name, |_| {})
}

/// Replay race `<name>.json` after `edit` changed its JSON (steps left out, say).
fn race_edited(name: &str, edit: impl FnOnce(&mut Value)) -> Outcome {
    let path = format!("{}/races/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let mut scenario: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut scenario);
    run(&harness::family::Scenario::from_json(&scenario.to_string(), harness::families::FAMILIES).unwrap())
}

fn fired(outcome: &Outcome, fault: &str) -> bool {
    events(outcome, kind::FAULT_FIRED).iter().any(|e| e.text("fault") == fault)
}

// Goal: a reply the relayer sent is never swallowed by a suppression meant for another message.
// Method: replay the race the boundary oracles found (seed 2, case 125): the upstream reply to
// the forwarded `initialize` (id 0) is lost, and the client later reuses id 0 for a `recall`.
// Before the fix the bridge suppressed "the reply to id 0" until it came, so it swallowed the
// call's genuine reply and closed the call out with "the reply was lost" although the relayer had
// run it and answered on the live stream (user_outcomes, reply_accounting). Now the bridge's own
// `initialize` carries the bridge's own id, and so does every request: the suppression can never
// meet a client's reply.
#[test]
fn a_lost_initialize_reply_never_swallows_a_later_reply() {
    let outcome = race("relay_suppressed_init_id_swallows_reply");
    assert_eq!(outcome.violations, vec![]);
    assert!(fired(&outcome, "swallow_reply"), "the fault this race keeps did not fire");
    let inits = events(&outcome, kind::SESSION_INIT);
    assert!(inits.iter().all(|e| e.text("id").starts_with("\"relay-init-")), "{inits:?}");
}

// Goal: a network error on a POST the relayer already accepted never becomes a false failure.
// Method: replay the race (seed 4, case 321): the relayer accepts the call, withholds its reply,
// then bounces twice; the replay's POST gets no HTTP answer. Before the fix the bridge told the
// client "the relayer could not be reached" although the relayer had run the call
// (truthful_endings); now the call stays owed and ends truthfully. (Since network errors are
// also retried, this case no longer reaches the old code path: it guards the outcome only.)
#[test]
fn a_network_error_after_acceptance_keeps_the_call_owed() {
    let outcome = race("relay_network_error_after_accept");
    assert_eq!(outcome.violations, vec![]);
    assert!(events(&outcome, kind::POST_STATUS).iter().any(|e| e.num("status") == 0), "no network error happened");
    for reply in replies(&outcome, 2) {
        let text = error_text(&reply).unwrap_or_default();
        assert!(!text.contains("could not be reached"), "{text}");
    }
}

// Goal: a late reply to a closed-out request never answers a later request that reused its id.
// Method: replay the race (seed 3, case 254): `analyze` id 7 is closed out after replays across
// a relayer bounce, the client reuses id 7, and the first call's reply comes late. Before the fix
// the bridge forwarded it as the answer to the second call and dropped the second call's own
// reply (reply_accounting); now every request goes upstream under the bridge's own id.
#[test]
fn a_late_reply_never_answers_a_reused_id() {
    let outcome = race("relay_reused_id_gets_old_reply");
    assert_eq!(outcome.violations, vec![]);
    let answers: Vec<String> = replies(&outcome, 7).iter().filter_map(|r| r.pointer("/result/content/0/text").and_then(Value::as_str).map(str::to_string)).collect();
    assert!(answers.iter().any(|t| t.contains("a10")), "the second call got its own answer: {answers:?}");
    assert!(events(&outcome, kind::REPLY_DROPPED).iter().any(|e| e.text("reason") == "closed_out"), "the late reply arrived and was dropped");
}

// Goal: the bridge reads every line form the SSE specification allows a server: LF, CRLF and a
// lone CR, unnamed message events, `id:` and `retry:` lines, comments between fields, and data
// over several lines. Method: replay the race (seed 1, case 1) a clean hunt found once the
// relayer drew a wire style per stream: this stream ends its lines with a lone CR. The bridge's
// parser split lines at LF only, so it never saw the endpoint event: every request was closed out
// with "the relayer stream was down" while the relayer's stream was open all along
// (user_outcomes, truthful_endings). Now a CR, an LF and a CRLF (even one split across chunks)
// each end a line.
#[test]
fn a_stream_with_lone_cr_line_ends_is_read() {
    let outcome = race("relay_sse_lone_cr_line_ends");
    assert_eq!(outcome.violations, vec![]);
    let opens = events(&outcome, kind::STREAM_OPEN);
    assert!(opens.iter().any(|e| e.text("style").starts_with("cr+")), "no stream wrote lone CRs: {opens:?}");
    assert!(!events(&outcome, kind::SSE_ENDPOINT).is_empty(), "the bridge never read the endpoint");
}

// Goal: a line that is not a JSON-RPC 2.0 message is refused, never forwarded as a request.
// Method: replay the race the wire-conformance oracle found in the default bridge (seed 1, case
// 0): a `ping` without `"jsonrpc": "2.0"`. The bridge classified lines by `method` and `id`
// alone, so it forwarded the ping and the client read the relayer's result where JSON-RPC
// prescribes an invalid-request error (-32600 under the line's id). Now the bridge checks the
// envelope (`"jsonrpc": "2.0"`, an id that is a string or an integer) before anything else.
#[test]
fn a_line_without_the_jsonrpc_version_is_refused() {
    let outcome = race("relay_request_without_jsonrpc_version");
    assert_eq!(outcome.violations, vec![]);
    let refusal = replies(&outcome, 1).into_iter().find(|m| m.pointer("/error/code") == Some(&Value::from(-32600)));
    assert!(refusal.is_some(), "the line without a version got no invalid-request error");
}

// Goal: a client's cancellation reaches the relayer naming the request it cancels. Method: replay
// the race the `cancellations_name_their_request` oracle found in the default bridge (seed 1,
// case 46): the client cancels its `tools/call` "1" while awaiting it. The bridge sends every
// request upstream under its own id (`relay-1`) but passed the cancellation on with the client's
// id, so it named nothing the relayer ran. Now a cancellation of an owed request names its
// upstream id.
#[test]
fn a_cancellation_names_the_request_as_the_relayer_knows_it() {
    let outcome = race("relay_cancel_names_the_client_id");
    assert_eq!(outcome.violations, vec![]);
    let cancels = events(&outcome, kind::RPC_CANCEL);
    assert!(cancels.iter().any(|e| e.text("request").starts_with("\"relay-")), "{cancels:?}");
}

// Goal: a transient refusal of the bridge's own `notifications/initialized` is retried after the
// backoff, as every other POST is. Method: replay the race the `post_retries` oracle found in the
// default bridge (2 000-case hunts with seeds 2026 and 5 both found it): a 150 ms window of 429s
// catches the note the bridge sends after its own `initialize`. It sent that note once and moved
// on, so a session opened after a reconnect (where no client note follows) would never hear it;
// here the relayer saw the client's copy 100 ms later, faster than any backoff. Now the note
// goes through the retry policy (`retries_left`, `backoff`) that `initialize`, notifications and
// calls share.
#[test]
fn the_bridges_initialized_note_is_retried_after_a_refusal() {
    let outcome = race("relay_initialized_note_never_retried");
    assert_eq!(outcome.violations, vec![]);
    let notes: Vec<_> = events(&outcome, kind::HTTP_POST).into_iter().filter(|e| e.text("method") == "notifications/initialized").collect();
    let refused = notes.iter().position(|e| e.num("status") == 429).expect("the window refuses a note");
    let retry = notes.get(refused + 1).expect("a note after the refusal");
    assert!(retry.at_ms >= notes[refused].at_ms + 250, "retried {} ms after the refusal", retry.at_ms - notes[refused].at_ms);
}

// Goal: when the bridge's `initialize` goes unanswered (every attempt's connection reset), the
// lifecycle still goes on in order: `notifications/initialized` before any request. Method:
// replay the race `sessions_initialized` found in the default bridge once the relayer could
// reset POST connections (fault `post_reset`, seed 99 of a 2 000-case hunt): a proxy resets
// each POST after the relayer admitted it, so the relayer initialized the session three times
// while the bridge read three network errors. The bridge treated that like a refusal and went
// straight to replaying its owed call: the relayer ran a request on a session that never heard
// `notifications/initialized`. Now an unanswered `initialize` is followed by the note.
#[test]
fn an_unanswered_initialize_is_still_followed_by_the_initialized_note() {
    let outcome = race("relay_unanswered_initialize_skips_the_note");
    assert_eq!(outcome.violations, vec![]);
    let resets = events(&outcome, kind::FAULT_FIRED).into_iter().filter(|e| e.text("fault") == "post_reset").count();
    assert!(resets >= 3, "the race resets every initialize: {resets} resets");
}

// Goal: each session hears `notifications/initialized` once (MCP lifecycle: the handshake is
// one `initialize` and one `initialized`). Method: replay the case `sessions_initialized` found
// in the default bridge once it counted notes per session (seed 2026, case 0, token
// v1.relay.none.350ec618f45c0240): a client that sends `initialize` and `notifications/initialized`
// before any session. The bridge initialized the first session itself, sent its own note, and then
// also forwarded the client's from its outbox: two handshakes' worth. Now the client's note only
// tells the bridge that the client is initialized, and the pump sends the bridge's own note to
// each session once.
#[test]
fn each_session_hears_initialized_once() {
    let outcome = race("relay_client_initialized_forwarded_twice");
    assert_eq!(outcome.violations, vec![]);
    let notes: Vec<_> = events(&outcome, kind::HTTP_POST).into_iter().filter(|e| e.text("method") == "notifications/initialized" && e.num("status") == 202).collect();
    let mut sessions: Vec<String> = notes.iter().map(|e| e.text("session")).collect();
    let count = sessions.len();
    sessions.dedup();
    assert!(count >= 1 && sessions.len() == count, "one accepted note per session: {notes:?}");
}

// Goal: nothing goes to a session the bridge could not initialize (MCP lifecycle), so a refused
// `initialize` cannot reorder the client's requests (ORACLES.md §1: the relayer's order is the
// client's). Method: replay the case `client_order_kept` and `replay_in_order` found in the
// default bridge (seed 7, case 276, token v1.relay.none.799cda77ad99e1f4, shrunk): the relayer
// answers 429 through three `initialize` attempts, and the bridge went on to POST the owed call
// anyway. The 429s ended during its retries, so the call reached an uninitialized session, came
// back "not initialized" late (a stalled stream), and was sent again after a later call the
// re-initialized session had already accepted. Now an `initialize` refused for good answers the
// requests waiting on it with that refusal (a later request asks again), and the relayer never
// sees a request before `initialize` on that session.
#[test]
fn a_refused_initialize_sends_nothing_to_its_session() {
    let outcome = race("relay_request_sent_to_an_uninitialized_session");
    assert_eq!(outcome.violations, vec![]);
    assert_eq!(count(&outcome, kind::RPC_REFUSED), 0, "no request reached an uninitialized session");
    let told: Vec<String> = events(&outcome, kind::MCP_RECV)
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(&e.text("msg")).ok())
        .filter_map(|msg| error_text(&msg))
        .filter(|text| text.contains("initialize failed"))
        .collect();
    assert!(!told.is_empty() && told.iter().all(|t| t.contains("HTTP 429")), "the refusal names the initialize's status: {told:?}");
}

// Goal: a POST retry sends the request it retries, never a later one that reused its id.
// Method: replay the case `client_order_kept` found in the default bridge (seed 7, case 993,
// token v1.relay.none.283a11b2a5510cd3, shrunk): a connection reset after the relayer admitted
// call id 0; its reply came during the retry's backoff, and the client at once sent a new call
// with id 0. The retry looked the request up by the client's id and POSTed the new call ahead of
// two calls the client had written before it. Now a send keeps to its own request (its admission
// number): the retry of an answered request ends.
#[test]
fn a_retry_never_sends_the_next_request_under_a_reused_id() {
    let outcome = race("relay_retry_sends_the_next_request_under_a_reused_id");
    assert_eq!(outcome.violations, vec![]);
    let upstream: Vec<String> = events(&outcome, kind::HTTP_POST).iter().filter(|e| e.text("method") == "tools/call").map(|e| e.text("client_id")).collect();
    assert!(upstream.iter().filter(|id| id.as_str() == "0").count() >= 2, "the race reuses id 0: {upstream:?}");
}

// Goal: the relayer serves the client that is really there: a session that runs the client's
// requests was initialized with the client's own `initialize` params. Method: replay the case
// `handshake_carried` found in the default bridge once the generator drew late handshakes (seed
// 0x6A7E0001, case 6, token v1.relay.none.1dbb497750626331, shrunk): the client writes a
// notification at once and its `initialize` 219 ms later. The bridge initialized the first
// session as "relay-bridge" with no capabilities to POST that notification, and every later
// call ran on it. Now a session the bridge had to initialize with made-up params is replaced
// once the client's `initialize` comes (`sse.closed reason=reinitialize`), and a session with
// nothing to send waits for the client's `initialize` before initializing.
#[test]
fn a_session_is_initialized_as_the_client_that_is_there() {
    let outcome = race("relay_session_initialized_before_the_client");
    assert_eq!(outcome.violations, vec![]);
    let closed = events(&outcome, kind::SSE_CLOSED);
    assert!(closed.iter().any(|e| e.text("reason") == "reinitialize"), "the made-up session was replaced: {closed:?}");
    let served: Vec<String> = events(&outcome, kind::RPC_INITIALIZE).iter().map(|e| e.text("params")).collect();
    assert!(served.last().is_some_and(|p| p.contains("sim-client")), "the last session knows the client: {served:?}");
    let calls = events(&outcome, kind::TOOL_EXEC).len();
    assert!(calls >= 2, "the race runs the client's calls: {calls}");
}

// Goal: a notification whose POST meets a session the relayer already ended (404) goes to the
// next session, before what the client wrote after it (the outbox keeps the client's order).
// Method: replay the case the relay hunt found (seed 2026, case 64, token
// v1.relay.none.84204798c27a03e0, shrunk) with cargo-mutants' survivor `post_note` without its
// 404 arm applied: the relayer ends the stream just as the client's cancellation is POSTed; the
// POST is answered 404 and the bridge hears of the end in the same tick. The mutant dropped the
// notification and sent the call written after it (`notifications_delivered`). This guards the
// path in the mutation gate: the generated part of the gate does not reach it.
#[test]
fn a_notification_answered_404_goes_to_the_next_session() {
    let outcome = race("relay_note_answered_404_goes_to_the_next_session");
    assert_eq!(outcome.violations, vec![]);
    let posts = events(&outcome, kind::HTTP_POST);
    let note = |status: u64| posts.iter().filter(|e| e.text("note") == "0" && e.num("status") == status).count();
    assert_eq!((note(404), note(202)), (1, 1), "the notification met the ended session, then reached the next one");
}

// Goal: notifications the client sent while its session's `initialize` was refused for good
// reach the relayer once the refusal ends, even if the client asks nothing more. Method: replay
// the case `notifications_delivered` and `quiescence` found in the default bridge (seed 13, case
// 1693, token v1.relay.none.39dda867b6877970, shrunk): a 401 window from 18.3 s to 21.9 s meets
// the `initialize` the client's two notifications need; the client then stays idle until 42 s.
// The bridge kept them in its outbox for "a later request", which never came: the relayer never
// saw them and the end-of-run report still held them. Now the pump tries again after the
// reconnect backoff's cap (15 s) when notifications are left waiting.
#[test]
fn notifications_left_by_a_refused_initialize_are_sent_later() {
    let outcome = race("relay_notes_stranded_by_a_refused_initialize");
    assert_eq!(outcome.violations, vec![]);
    let delivered = events(&outcome, kind::HTTP_POST).iter().filter(|e| e.text("method") == "notifications/roots/list_changed" && e.num("status") == 202).count();
    assert_eq!(delivered, 2, "both notifications reached the relayer");
}

// Goal: a session whose `initialize` was refused for good still hears the client's completed
// handshake once the refusal ends, even if the client asks nothing more. Method: replay the case
// `notifications_delivered` found in the default bridge (seed 29, case 324, token
// v1.relay.none.88ccb6f6bf9bc6c2, shrunk): a 401 window (0.2–1.7 s) refuses the new session's
// `initialize` just before the client's `notifications/initialized`; the client then stays idle
// until 23 s. The bridge waited for a later request, so the relayer never heard `initialize` or
// `notifications/initialized` again. Now the pump tries again after the reconnect backoff's cap.
#[test]
fn a_handshake_left_by_a_refused_initialize_is_completed_later() {
    let outcome = race("relay_handshake_left_after_a_refused_initialize");
    assert_eq!(outcome.violations, vec![]);
    let accepted = |method: &str| events(&outcome, kind::HTTP_POST).iter().any(|e| e.text("method") == method && e.num("status") == 202 && e.at_ms > 1_700);
    assert!(accepted("initialize") && accepted("notifications/initialized"), "the handshake reached the relayer after the refusal");
}

// Goal: requests the relayer accepted are replayed once a refusal of the new session ends, not a
// backoff cap later. Method: replay the race `user_outcomes` found on the default bridge (hunt
// seed 0x64c14a7, case 1869, v1.relay.none.cef2e51424f96120, shrunk): a ping and a call accepted
// on a stalled stream, which the watchdog closed with their replies in it; the new session's
// `initialize` refused 401 until 7.4 s; the pump waited the cap and both were closed out at
// 11.4 s "the reply was lost", never replayed. Now a refusal for good with replays owed is tried
// again at the retry backoff's next step.
#[test]
fn replays_owed_are_sent_once_a_refusal_of_the_new_session_ends() {
    let outcome = race("relay_replays_held_past_a_refusal_that_ended");
    assert_eq!(outcome.violations, vec![]);
    let replayed = |id: u64| events(&outcome, kind::POST_SEND).iter().any(|e| e.num("id") == id && e.text("replay") == "true" && e.at_ms > 7_400);
    assert!(replayed(0) && replayed(3), "the ping and the call were replayed after the refusal ended");
}

// Goal: the same, for a client that has not completed a handshake (half the generated clients
// never send one): with no notification waiting and no `notifications/initialized` owed, the
// replays alone call for the retry. Method: the race above without the client's handshake and
// its two notifications; the bridge initializes with made-up params. Relay mutation shard 5/48's
// survivor (`retry_after`'s `!state.inflight.is_empty()` negated) left the replays to the next
// write of the client, 12 s later, and they were closed out unreplayed.
#[test]
fn replays_owed_are_sent_once_a_refusal_ends_for_a_client_without_a_handshake() {
    let outcome = race_edited("relay_replays_held_past_a_refusal_that_ended", |scenario| {
        let steps = scenario.pointer_mut("/family/script/steps").and_then(Value::as_array_mut).unwrap();
        steps.retain(|step| !matches!(step["op"].as_str(), Some("initialize" | "initialized")) && step["op"].get("notify").is_none());
    });
    assert_eq!(outcome.violations, vec![]);
    let replayed = |id: u64| events(&outcome, kind::POST_SEND).iter().any(|e| e.num("id") == id && e.text("replay") == "true" && e.at_ms > 7_400 && e.at_ms < 19_000);
    assert!(replayed(0) && replayed(3), "the ping and the call were replayed after the refusal ended");
}

// Goal: a request queued behind a notification a refusal for good stopped goes once the
// refusal ends, within its deadline: the bridge tries the notification again after the retry
// backoff's next step while requests wait on it, not the 15 s cap. Method: replay the case (relay
// hunt seed 0x64c14a7, token v1.relay.none.dd2b59cf609397da, shrunk): a 401 window from 301 to
// 3 651 ms refused the client's first notification; a call written at 2 240 ms waited behind it
// in the client's order and was closed out unsent at 10 930 ms. `user_outcomes` failed it once
// its excuse, the refusal ahead of it, had to have stood until too late.
#[test]
fn a_call_behind_a_refused_notification_goes_once_the_refusal_ends() {
    let outcome = race("relay_call_behind_a_refused_note_waited_for_the_cap");
    assert_eq!(outcome.violations, vec![]);
    let accepted = events(&outcome, kind::HTTP_POST).iter().find(|e| e.text("method") == "tools/call" && e.num("status") == 202).map(|e| e.at_ms);
    assert!(accepted.is_some_and(|at| at > 3_651 && at < 2_240 + 6_558), "the call was accepted after the refusal, before its deadline: {accepted:?}");
    let answered = events(&outcome, kind::MCP_RECV).iter().any(|e| e.text("msg").contains("analyze a4: done"));
    assert!(answered, "the client read the call's result");
}

// Goal: the same behind the bridge's `notifications/initialized`, which goes before any request
// (relay hunt seed 0x20261207, token v1.relay.none.39fb4f64cb71878c): a 401 window from 1 518 to
// 3 783 ms refused it on a new session; call -2, written at 1 383 ms, waited behind it for the
// cap's retry and was closed out unsent at 17 300 ms. The race is the generated case less its
// faults after 4 s (a second 401 window that refused the call itself, and a withhold), as the
// shrunk case (which the shrinker cut to its `post_retries` edge) would not serve. Now the
// handshake goes again a second after each refusal, and the call runs once the window ends.
#[test]
fn a_call_behind_a_refused_initialized_goes_once_the_refusal_ends() {
    let outcome = race("relay_call_behind_a_refused_initialized_waited_for_the_cap");
    assert_eq!(outcome.violations, vec![]);
    let answered = events(&outcome, kind::MCP_RECV).iter().find(|e| e.text("msg").contains("remember a2: done")).map(|e| e.at_ms);
    assert!(answered.is_some_and(|at| at < 1_383 + 12_978), "call -2 was served before its deadline: {answered:?}");
}

// Goal: `post_retries` names a notification by the step the client stamped in its `_meta`, not
// by its method: a POST of the next notification of that method is no retry of one refused for
// good. Method: replay the case a clean hunt reported (seed 0x40bb7d4e7d6bc04a, case 486, token
// v1.relay.none.c6a6ed2e187c08c0, shrunk; issue #32). The checker paired two cancellations by
// method and reported a retry of a refusal for good. Since then the bridge keeps a refused
// notification and sends it again once the faults let it (issue #28), so the case now shows the
// stronger property: the 401 window refuses the cancellation of step 4, twice (the second after
// the client wrote again), and steps 4, 8 and 9 each reach the relayer once, in the client's
// order, after the window; the pairing itself is pinned by the checker test
// `post_retries_tells_two_notifications_of_one_method_apart_by_the_clients_step`.
#[test]
fn the_next_notification_of_a_method_is_no_retry_of_one_refused_for_good() {
    let outcome = race("relay_post_retries_false_alarm");
    assert_eq!(outcome.violations, vec![]);
    let posts = events(&outcome, kind::HTTP_POST);
    let cancels: Vec<(u64, String, u64)> = posts.iter().filter(|e| e.text("method") == "notifications/cancelled").map(|e| (e.at_ms, e.text("note").to_string(), e.num("status"))).collect();
    let refused: Vec<&(u64, String, u64)> = cancels.iter().filter(|(_, _, status)| *status == 401).collect();
    assert!(!refused.is_empty() && refused.iter().all(|(_, note, _)| note == "4"), "the refusals for good this case keeps did not happen: {cancels:?}");
    let accepted: Vec<(u64, &str)> = cancels.iter().filter(|(_, _, status)| *status == 202).map(|(at, note, _)| (*at, note.as_str())).collect();
    assert_eq!(accepted.iter().map(|(_, note)| *note).collect::<Vec<_>>(), vec!["4", "8", "9"], "each cancellation accepted once, in order: {cancels:?}");
    assert!(accepted[0].0 > refused.last().unwrap().0, "step 4 was accepted after its refusals: {cancels:?}");
}

// Goal: a request the bridge replays to a new session under its upstream id stays that
// request's (a harness error the soak found, c3548db). Method: replay the case (relay soak seed
// 0xad96e17998c384b1, token v1.relay.none.f84dcdacc0666a52, shrunk): ping -3 went as "relay-2"
// on the first session and was replayed as "relay-2" on the second, where a reset after
// admission cut its POST while its reply went out on the stream. c3548db keyed upstream ids by
// session (rmcp numbers each session anew) and lost the replay's owner: `post_retries` read a
// reset with retries left and no answer. An id a session has not carried is an earlier
// session's when the client id and method agree.
#[test]
fn a_request_replayed_to_a_new_session_keeps_its_story() {
    let outcome = race("relay_request_replayed_under_its_upstream_id_on_a_new_session");
    assert_eq!(outcome.violations, vec![]);
    let posts = events(&outcome, kind::HTTP_POST);
    let sessions: std::collections::BTreeSet<String> = posts.iter().filter(|e| e.text("id") == "\"relay-2\"").map(|e| e.text("session")).collect();
    assert!(sessions.len() >= 2, "the ping is POSTed on two sessions under one upstream id: {sessions:?}");
    assert!(fired(&outcome, "post_reset"), "a reset after admission cuts a POST");
}

// Goal: what a POST's status says is recorded for the request that POST carried, never for the
// next request of its id. Method: replay the case the 20-seed soak reported (relay seed
// 0xd86e1b75d0b0570e, token v1.relay.none.bd50eed5fc16b1eb, shrunk): call 2 (a1) is replayed
// after a bounce, the relayer answers it from its log at 2700 ms, the client reads the answer
// and sends a new call 2 (a4) at 2750 ms, and only then does the replay POST's 202 reach the
// bridge. The bridge marked a4 accepted, and a4, never sent while the stream flapped, was closed
// out with "the reply was lost. The work may have completed" (truthful_endings).
#[test]
fn a_post_status_belongs_to_the_request_it_carried() {
    let outcome = race("relay_post_status_given_to_the_next_request_of_its_id");
    assert_eq!(outcome.violations, vec![]);
    let answers = replies(&outcome, 2);
    let text = |msg: &Value| msg.pointer("/result/content/0/text").and_then(Value::as_str).unwrap_or("").to_string();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(text(&answers[0]), "recall a1: done", "the race this case keeps did not happen: {answers:?}");
    let posts = events(&outcome, kind::HTTP_POST);
    assert!(!posts.iter().any(|e| e.text("action") == "a4"), "a4 was never sent in this case");
    assert!(text(&answers[1]).contains("never sent to the relayer"), "a4's ending: {:?}", answers[1]);
}

// Goal: requests of one id outstanding together at the client are told apart by what answered
// them. Method: replay the case the 20-seed soak reported (relay seed 0x4b1b42cdeeb97268, case
// 133, token v1.relay.none.422a2bc06fcf6136, shrunk): the client reuses id "r7" for a recall
// (a7) in the very millisecond it reads the answer to its `tools/list` r7, and again for an
// analyze (a8) while a7 is in flight. The bridge had written the list's answer before it read
// a7, so it took a7 as new and refused a8 as the duplicate: right. The checker paired by order,
// gave the refusal to a7 and a7's reply to a8, and reported a reply delivered to another request.
#[test]
fn an_id_reused_as_its_answer_arrives_is_told_apart_by_its_answer() {
    let outcome = race("relay_id_reused_as_its_answer_arrives");
    assert_eq!(outcome.violations, vec![]);
    let received = events(&outcome, kind::MCP_RECV);
    let r7: Vec<String> = received.iter().filter(|e| e.text("msg").contains(r#""id":"r7""#)).map(|e| e.text("msg")).collect();
    assert_eq!(r7.len(), 3, "the list's answer, the refusal of the duplicate and the recall's answer: {r7:#?}");
    assert!(r7[1].contains("still in flight") && r7[2].contains("recall a7"), "the race this case keeps did not happen: {r7:#?}");
}

// Goal: a stream the bridge closes itself, after its endpoint arrived, is no failed connect:
// the reconnect backoff starts over (MODEL.md §1: the attempt resets on success). Method: two
// calls admitted on a working session have their replies held past the 1 000 ms deadline, so
// the bridge closes the session for orphans about 1.5 s after it opened (under the 2 s a stream
// must live to count as stable by itself); the next connect must not back off. (The soak once found this as a close 1.7 s into a session after a flap, token
// v1.relay.none.6f80b9befa6fb257; since calls that waited out an outage are no orphans of the
// session they reach, that race no longer closes anything: see the next test.)
#[test]
fn a_stream_the_bridge_closes_itself_does_not_raise_the_backoff() {
    use bridge_under_test::relay::client::Tool;
    let mut steps = scenarios::handshake();
    steps.push(scenarios::call(300, 1, Tool::Remember, 100));
    steps.push(scenarios::call(400, 2, Tool::Remember, 100));
    steps.push(scenarios::call(4_000, 3, Tool::Recall, 50));
    let late = |step| harness::relay::faults::RelayFault::LateReply { step, delay_ms: 4_000 };
    let outcome = run(&scenarios::relay(6, scenarios::fast_timing(30_000, 1_000), steps, vec![late(2), late(3)]));
    assert_eq!(outcome.violations, vec![]);
    let closed = events(&outcome, kind::SSE_CLOSED);
    let orphans = closed.iter().find(|e| e.text("reason") == "orphans").expect("no close for orphans");
    let next = events(&outcome, kind::SSE_CONNECT).into_iter().find(|e| e.at_ms >= orphans.at_ms).expect("no connect after the close for orphans");
    assert_eq!(next.num("attempt"), 0, "the connect after a chosen close backs off as after a failure");
    assert_eq!(replies(&outcome, 3).len(), 1, "the next session answers call 3");
}

// Goal: calls that waited out an outage are no orphans of the session they finally reach, and
// the session is kept for the calls and notes still waiting behind them. Method: replay the case
// the 20-seed soak of aa20432 reported (relay seed 0x8fa317d6430b95b5, case 1787, token
// v1.relay.none.edb32a14ee4e18eb, shrunk): a 16 s flap; the stream back at 74.3 s; two calls
// admitted at 59.2 and 59.4 s reach it just before their 14.1 s deadline and are closed out, and
// the bridge counted them as two orphans and closed the working session. The backoff stood at
// 15 s, so the cancellation written at 60.7 s and calls 12 and 0, queued behind them, never
// reached the relayer before the client left at 88.6 s ("never sent to the relayer"). Now only a
// call admitted while the session was up counts (MODEL.md §1.4: orphans on one healthy session).
#[test]
fn calls_that_waited_out_an_outage_do_not_close_the_session_they_reach() {
    let outcome = race("relay_session_closed_for_calls_that_waited_out_an_outage");
    assert_eq!(outcome.violations, vec![]);
    assert!(fired(&outcome, "stream_flap"), "the race this case keeps did not happen: no flap");
    let closed = events(&outcome, kind::SSE_CLOSED);
    assert!(closed.iter().all(|e| e.text("reason") != "orphans"), "the session was closed for orphans");
    let posts = events(&outcome, kind::HTTP_POST);
    let accepted = |field: &str, value: &str| posts.iter().any(|e| e.text(field) == value && e.num("status") == 202);
    assert!(accepted("note", "12"), "the cancellation reaches the relayer");
    assert!(accepted("client_id", "12") && accepted("client_id", "0"), "calls 12 and 0 reach the relayer");
    assert_eq!(replies(&outcome, 12).len(), 1);
    assert!(error_text(&replies(&outcome, 12)[0]).is_none(), "call 12 is answered by its tool: {:?}", replies(&outcome, 12));
}

// Goal: a notification the relayer refused past the bridge's retries is not dropped: nobody can
// be told it was lost (MODEL.md §4.10, ORACLES.md §8: a policy is no excuse). Method: replay the
// case seed 2026's hunt found once `notifications_delivered` stopped excusing spent retries
// (token v1.relay.none.0fa78ab98df581d4, shrunk): a post_reset window resets the three POSTs of
// the client's notifications/cancelled (note 3); the bridge gave up on it, and the relayer
// accepted the client's later calls but never the cancellation. Now it stays first in the
// outbox and goes, still before them, once the client writes again.
#[test]
fn a_notification_refused_past_its_retries_is_sent_again() {
    let outcome = race("relay_note_dropped_after_its_retries");
    assert_eq!(outcome.violations, vec![]);
    let posts = events(&outcome, kind::HTTP_POST);
    let cancel: Vec<_> = posts.iter().filter(|e| e.text("method") == "notifications/cancelled").collect();
    assert!(cancel.len() > 3 && cancel[..3].iter().all(|e| e.num("status") == 0), "the race this case keeps did not happen: {cancel:#?}");
    assert_eq!(cancel.last().map(|e| e.num("status")), Some(202), "the cancellation never reached the relayer");
}

// Goal: the bridge's own notifications/initialized is not given up after its retries, and no
// request goes to the session before it (the MCP lifecycle; a strict server refuses requests
// until it). Method: replay the case seed 2026's hunt found next (token
// v1.relay.none.4d70f30cbc7842b6, shrunk): a post_reset window resets its three POSTs; the bridge
// went on with the client's calls and the session never heard the handshake end.
#[test]
fn the_handshake_note_refused_past_its_retries_is_sent_before_any_request() {
    let outcome = race("relay_initialized_note_given_up");
    assert_eq!(outcome.violations, vec![]);
    let posts = events(&outcome, kind::HTTP_POST);
    let note = posts.iter().position(|e| e.text("method") == "notifications/initialized" && e.num("status") == 202);
    let request = posts.iter().position(|e| e.text("method") == "tools/call");
    assert!(posts.iter().filter(|e| e.text("method") == "notifications/initialized").take(3).all(|e| e.num("status") == 0), "the race this case keeps did not happen");
    assert!(note.is_some() && note < request, "a call reached the session before its notifications/initialized: {note:?} {request:?}");
}

// The mutation gate (`just mutants relay`): what cargo-mutants runs against each mutant of the
// bridge's core. With every switch off, a generated hunt, the scripted scenarios and the races
// the oracles found must all be clean; a mutant that changes what a client or the relayer
// observes makes one of the boundary oracles fire.
#[test]
fn mutants_gate_relay() {
    crate::assert_clean(&harness::relay::RELAY, crate::cases(800), 0x6A7E_0001);
    let scripted = [
        scenarios::orphaned_call(),
        scenarios::deadline_on_a_sweep(),
        scenarios::silent_stream(),
        scenarios::replay_double_write(),
        scenarios::rate_limited_initialize(),
        scenarios::flapping_relayer(),
        scenarios::quiet_stream(),
        scenarios::unanswered_initialize(),
        scenarios::unanswered_initialize_then_revoked(),
        scenarios::late_handshake(),
        scenarios::lost_session(),
        scenarios::revoked_initialized(),
        scenarios::refused_initialized_then_quiet(),
        scenarios::accepted_call_replayed_into_resets(),
        scenarios::closed_out_past_its_retention(),
    ];
    for scenario in scripted {
        assert_eq!(run(&scenario).violations, vec![]);
    }
    // Every relay race kept under `scenarios/races/`, each a case the default bridge once
    // failed: a new race joins the gate as it lands.
    let names = crate::race_names("relay_");
    assert!(names.len() >= 28, "the relay races: {names:?}");
    for name in names {
        let name = format!("relay_{name}");
        assert_eq!(race(&name).violations, vec![], "{name}");
    }
    // A mutant that disarms a switch (its plumbing in the bridge) is caught by the switch's
    // own regression scenario.
    for (scenario, bug, invariant) in switch_cases() {
        crate::assert_broken(scenario, bug, invariant);
    }
    // Replays owed to a client without a handshake are tried again once a refusal ends (relay
    // mutation shard 5/48's survivor). No race holds that case, so the gate runs its test; with
    // the mutant, `user_outcomes` fails it since the refusal-ahead excuse was narrowed.
    replays_owed_are_sent_once_a_refusal_ends_for_a_client_without_a_handshake();
}

// Goal: a closed-out id is forgotten once its retention window has passed (MODEL.md §1.4), and
// `quiescence` fails a bridge that keeps it. Method: the orphaned call, then a last call 612 s
// on; the bridge's end-of-run report must hold no closed-out id. Relay mutation shard 20/96's
// survivor (`ClosedOut::expire` made a no-op) passed the gate, whose cases never run that long
// past a close-out; the gate now runs this scenario, and with that mutant `quiescence` fails it
// ("keeps a closed-out id … ms old", shown when it landed).
#[test]
fn a_closed_out_id_is_forgotten_after_its_retention() {
    let outcome = run(&scenarios::closed_out_past_its_retention());
    assert_eq!(outcome.violations, vec![]);
    let closed_out = events(&outcome, kind::MCP_RECV).iter().filter(|e| e.text("msg").contains("no reply within")).count();
    assert_eq!(closed_out, 1, "call 1 is closed out");
    let report = events(&outcome, kind::BRIDGE_REPORT);
    assert_eq!(report.len(), 1, "the bridge reports once, at the end");
    assert_eq!(report[0].num("closed_out"), 0, "the closed-out id was forgotten");
}

// Goal: a POST in flight when its request is closed out is that request's, though the client has
// written a new request of its id before the POST reaches the relayer (client_order_kept, and
// every oracle that reads a request's POSTs). Method: replay the two cases the 20-seed soak
// reported (v1.relay.none.36f61a81eb719fec and v1.relay.none.66ff32dfc3eb8592, shrunk): after a
// long flap the bridge POSTs a queued list, the sweep closes it out while that POST is in flight,
// the client sends the list again under the same id, and the relayer reads the old POST, then
// the new one under another upstream id. The story gave the first POST to the new request (the
// one still waiting), the second to the old one, and client_order_kept called the bridge's
// correct order reversed.
#[test]
fn a_post_in_flight_at_its_close_out_stays_with_the_closed_out_request() {
    for (name, id) in [("relay_closed_out_post_in_flight_before_the_same_id_again", "4"), ("relay_closed_out_list_in_flight_before_the_same_id_again", "9")] {
        let outcome = race(name);
        assert_eq!(outcome.violations, vec![], "{name}");
        let sends: Vec<u64> = events(&outcome, kind::MCP_SEND)
            .iter()
            .filter(|e| serde_json::from_str::<Value>(&e.text("msg")).ok().and_then(|m| m.get("id").map(Value::to_string)).as_deref() == Some(id))
            .map(|e| e.at_ms)
            .collect();
        let posts: Vec<(u64, String)> =
            events(&outcome, kind::HTTP_POST).iter().filter(|e| e.text("client_id") == id).map(|e| (e.at_ms, e.text("id"))).collect();
        assert_eq!(sends.len(), 2, "{name}: the client sends the list twice under id {id}: {sends:?}");
        assert_eq!(posts.len(), 2, "{name}: two POSTs carry client id {id}: {posts:?}");
        assert!(posts[0].0 >= sends[1], "{name}: the old POST reaches the relayer after the new request was written: {posts:?} {sends:?}");
        assert_ne!(posts[0].1, posts[1].1, "{name}: the two POSTs carry different upstream ids");
    }
}

// Goal: the client's order holds across a session whose initialize never got an answer (MODEL.md
// §1.4: a network error after the retries is definitive; client_order_kept). Method: replay the
// case the 20-seed soak reported (v1.relay.none.ea8736bbeaf3a30c, shrunk): four calls accepted,
// a stall ends the stream, and a reset window cuts every POST of the new session's initialize.
// The bridge went on as if the session were initialized, replayed a0 alone, initialized again
// before a1 and sent it; the relayer's "not initialized" refusal of a0 arrived after that, and a0
// was sent again behind a1. Now nothing goes to a session not known to be initialized: the
// bridge tries the initialize again after the next step of the retry backoff.
#[test]
fn a_session_whose_initialize_went_unanswered_gets_no_request() {
    let outcome = race("relay_request_resent_behind_a_later_one");
    assert_eq!(outcome.violations, vec![]);
    assert!(fired(&outcome, "post_reset"), "the reset window cuts the initialize");
    let refused = events(&outcome, kind::RPC_REFUSED);
    assert!(refused.is_empty(), "no request reaches a session before its initialize: {refused:?}");
    let second = events(&outcome, kind::STREAM_OPEN)[1].text("session");
    let posts: Vec<(String, String)> =
        events(&outcome, kind::HTTP_POST).iter().filter(|e| e.text("session") == second).map(|e| (e.text("method"), e.text("status"))).collect();
    let initialized = posts.iter().position(|(method, status)| method == "initialize" && status == "202").expect("the session is initialized once the resets end");
    assert!(initialized >= 3, "three POSTs of the initialize are reset first: {posts:?}");
    assert!(posts[..initialized].iter().all(|(method, _)| method == "initialize"), "nothing else goes before: {posts:?}");
}

// Relay soak on 3f7deff (a false alarm of prompt_rejection, fixed in the checker): a request's
// last try was refused for good (a third 429; a third reset) as a link hold began, so the
// refusal stayed in the network; the hold silenced the session's stream, whose idle bound closed
// it as the hold ended, and the bridge sent the request on the next session, where it was
// answered. The checker measured "the stream ended as the answer came" from the refusal, not
// from when the hold let the answer come. Tokens v1.relay.none.ddcb45352bac5f40 and
// v1.relay.none.98df9093dec5ae96.
#[test]
fn a_refusal_held_while_its_stream_went_idle_goes_with_the_stream() {
    for name in ["relay_rate_limit_held_as_its_stream_went_idle", "relay_reset_held_as_its_stream_went_idle"] {
        let outcome = race(name);
        assert_eq!(outcome.violations, vec![], "{name}");
        let held = outcome.trace.of_kind(kind::FAULT_INJECTED).any(|(_, e)| e.text("fault") == "link_hold");
        assert!(held, "{name}: a link hold");
        let idle = outcome.trace.of_kind(kind::SSE_CLOSED).any(|(_, e)| e.text("reason") == "idle");
        assert!(idle, "{name}: the silenced stream closed at its idle bound");
        let sessions = outcome.trace.of_kind(kind::STREAM_OPEN).count();
        assert!(sessions >= 2, "{name}: the request went on to a new session");
    }
}

// Relay soak on a8554b1 (a false alarm of user_outcomes, fixed in the checker): a
// bounce left nine requests buffered until the bridge's stream came back; the bridge flushed them
// in order, one POST at a time (MODEL.md §1.4), and tools/list "r11", written as the stream came
// back, was POSTed only after its 1 316 ms deadline: the close-out it read is the deadline's, met
// in the queue the outage left. Token v1.relay.none.dba7d79bebb7a81d.
#[test]
fn a_request_behind_an_outages_backlog_meets_its_deadline_in_the_queue() {
    let outcome = race("relay_request_behind_an_outages_backlog");
    assert_eq!(outcome.violations, vec![]);
    let bounced = outcome.trace.of_kind(kind::FAULT_INJECTED).any(|(_, e)| e.text("fault") == "relayer_bounce");
    assert!(bounced, "a bounce makes the outage");
    let r11 = |e: &TraceEvent| e.text("client_id") == "\"r11\"";
    let written = outcome.trace.of_kind(kind::MCP_SEND).find(|(_, e)| e.text("msg").contains("\"r11\"")).map(|(_, e)| e.at_ms).unwrap();
    let posted = outcome.trace.of_kind(kind::HTTP_POST).find(|(_, e)| r11(e)).map(|(_, e)| e.at_ms).unwrap();
    assert!(posted > written + 1_316, "r11 is POSTed past its deadline: written {written}, POSTed {posted}");
}

/// Each POST of `notifications/initialized` the relayer received: when, and its status.
fn handshake_notes(outcome: &harness::trace::Outcome) -> Vec<(u64, String)> {
    outcome
        .trace
        .of_kind(kind::HTTP_POST)
        .filter(|(_, e)| e.text("method") == "notifications/initialized")
        .map(|(_, e)| (e.at_ms, e.text("status")))
        .collect()
}

// The relayer refuses the bridge's `notifications/initialized` past its retries (503) and the
// client, its handshake done, stays quiet: the note is owed though nothing else is, and goes on
// the refusal backoff, not on the client's next message, which never comes. (Closes relay
// mutation survivor bridge.rs:346 `||`→`&&` in `retry_after`: with it, a handshake note alone
// was not owed, and the session never heard it.)
#[test]
fn a_handshake_note_refused_past_its_retries_goes_while_the_client_is_quiet() {
    let outcome = run(&scenarios::refused_initialized_then_quiet());
    assert_eq!(outcome.violations, vec![]);
    let notes = handshake_notes(&outcome);
    let refused = notes.iter().take_while(|(_, status)| status == "503").count();
    assert!(refused >= 3, "the note is refused past its retries: {notes:?}");
    assert_eq!(notes.last().map(|n| n.1.as_str()), Some("202"), "the session never heard the handshake end: {notes:?}");
    let last_write = crate::client_lines(&outcome, kind::MCP_SEND).len();
    assert_eq!(last_write, 2, "the client wrote only its handshake");
}

// The relayer refuses the bridge's `notifications/initialized` for good (401): the note is not
// retried on the retry schedule (only once the client writes again, or after the backoff's
// cap), and the call written after the window is answered. (Closes relay mutation survivor `send_initialized`'s retry guard replaced
// with `true`: a note refused for good was retried 250 ms later, and nothing in the gate
// refused that note for good.)
#[test]
fn a_note_refused_for_good_waits_for_the_backoff_cap() {
    let outcome = run(&scenarios::revoked_initialized());
    assert_eq!(outcome.violations, vec![]);
    let notes = handshake_notes(&outcome);
    assert_eq!(notes.first().map(|n| n.1.as_str()), Some("401"), "the note is refused for good: {notes:?}");
    // Sent again only once the client wrote its call (3 000 ms), which needs the session.
    assert!(notes.get(1).is_none_or(|again| again.0 >= 3_000), "no retry on the retry schedule: {notes:?}");
    let answered = crate::client_lines(&outcome, kind::MCP_RECV).iter().any(|msg| msg.get("id") == Some(&serde_json::json!(1)) && msg.pointer("/result/isError") == Some(&Value::Bool(false)));
    assert!(answered, "the call is answered");
}

// A replay of a call the relayer had accepted meets three reset connections: the call stays owed
// and the slow tool's answer, sent on the new session's stream, answers it. (Closes relay
// mutation survivor `post_request`'s `self.accepted(key)` replaced with `false`: the bridge
// failed the call with a network error 2.6 s before its answer came, and `user_outcomes` excused
// that as "post_reset cut a POST of it".)
#[test]
fn an_accepted_call_whose_replay_is_reset_is_answered() {
    let outcome = run(&scenarios::accepted_call_replayed_into_resets());
    assert_eq!(outcome.violations, vec![]);
    let resets = outcome.trace.of_kind(kind::POST_STATUS).filter(|(_, e)| e.text("id") == "1" && e.num("status") == 0).count();
    assert_eq!(resets, 3, "the replay and both its retries were reset");
    let answered = crate::client_lines(&outcome, kind::MCP_RECV).iter().any(|msg| msg.get("id") == Some(&serde_json::json!(1)) && msg.pointer("/result/content/0/text") == Some(&Value::from("recall a2: done")));
    assert!(answered, "the call is answered with the tool's result");
}
