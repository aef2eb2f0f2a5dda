//! Canonical scenarios and test helpers shared by the suites in `tests/`: hand-written relay
//! scenarios reproducing the original projects' own tests, and a compact trace rendering for
//! snapshots.

pub mod channel;
pub mod daemon;
pub mod daemon_lifecycle;
pub mod sdk;

use bridge_under_test::relay::client::{ClientScript, Note, Op, Step, Tool};
use bridge_under_test::relay::RelayBugs;
use harness::relay::faults::RelayFault;
use harness::relay::{strategy, RelayScenario, Spec, Timing};
use harness::family::{Scenario, SimParams};
use harness::trace::Trace;

/// A relay scenario with the family's tick and a horizon that judges every request.
pub fn relay(seed: u64, timing: Timing, steps: Vec<Step>, faults: Vec<RelayFault>) -> Scenario {
    let end_at_ms = strategy::end_at_ms(&timing, &steps, &faults);
    let tick_ms = strategy::tick_ms(&timing);
    let slack = Spec::new(&timing, tick_ms, 0).slack_ms;
    let sim = SimParams { tick_ms, latency_max_ms: 0, random_order: false, horizon_ms: end_at_ms + 2_000 + slack };
    let relay = RelayScenario {
        bugs: RelayBugs::default(),
        timing,
        script: ClientScript { steps, end_at_ms, ..ClientScript::default() },
        faults,
        profile: Vec::new(),
    };
    Scenario { seed, sim, family: Box::new(relay) }
}

/// Turn on bug switches in a scenario.
pub fn with_bugs(mut scenario: Scenario, bugs: &[&str]) -> Scenario {
    scenario.family.enable_bugs(bugs).expect("switches of the scenario's family");
    scenario
}

pub fn step(at_ms: u64, id: u64, op: Op) -> Step {
    Step::new(at_ms, id, op)
}

pub fn call(at_ms: u64, id: u64, tool: Tool, work_ms: u64) -> Step {
    step(at_ms, id, Op::Call { tool, work_ms })
}

/// The handshake: `initialize` (answered locally) and `notifications/initialized`.
pub fn handshake() -> Vec<Step> {
    vec![step(0, 0, Op::Initialize), step(0, 0, Op::Initialized)]
}

/// Compressed timing: keep-alives every 200 ms, the given idle budget and call timeout.
pub fn fast_timing(sse_idle_ms: u64, call_timeout_ms: u64) -> Timing {
    Timing {
        sse_idle_ms,
        first_keepalive_ms: 200,
        keepalive_ms: 200,
        slowest_tool_ms: 1_500,
        remember_deadline_ms: 1_500,
        deadline_margin_ms: 500,
        call_timeout_ms: Some(call_timeout_ms),
    }
}

/// The orphaned call (memwal-mcp's own test): keep-alives every 200 ms, `initialize` answered,
/// the `remember` reply held back past the 2 000 ms call timeout. The bridge closes the call out
/// with a truthful `isError` result on one healthy stream, then drops the late genuine reply.
pub fn orphaned_call() -> Scenario {
    let mut steps = handshake();
    steps.push(call(300, 1, Tool::Remember, 100));
    relay(1, fast_timing(30_000, 2_000), steps, vec![RelayFault::LateReply { step: 2, delay_ms: 4_000 }])
}

/// A closed-out id outlives its retention: the orphaned call, and the client stays for a last
/// call 612 s on. The bridge must have forgotten the closed-out id by then (MODEL.md §1.4: a
/// bounded retention window, 600 s), so its end-of-run report keeps none older than the window
/// (`quiescence`). No generated case runs that long past a close-out (relay mutation shard
/// 20/96's survivor: `ClosedOut::expire` made a no-op).
pub fn closed_out_past_its_retention() -> Scenario {
    let mut steps = handshake();
    steps.push(call(300, 1, Tool::Remember, 100));
    steps.push(call(612_000, 2, Tool::Recall, 50));
    let timing = Timing { keepalive_ms: 3_000, ..fast_timing(30_000, 2_000) };
    relay(1, timing, steps, vec![RelayFault::LateReply { step: 2, delay_ms: 4_000 }])
}

/// A deadline that falls on a sweep: twenty calls, admitted 50 ms apart (one tick of this
/// timing) while every reply is withheld, so one of them is admitted in step with the sweeper
/// (3 000 ms deadline, 1 000 ms sweep period) and its deadline ends exactly on a sweep. The
/// bridge closes a call out only once it is older than its deadline (MODEL.md §1: inside
/// `(deadline, deadline + sweep_period]`): that one at the next sweep, never at the deadline.
pub fn deadline_on_a_sweep() -> Scenario {
    let mut steps = handshake();
    steps.extend((0..20).map(|k| call(300 + 50 * k, 1 + k, Tool::Recall, 50)));
    relay(14, fast_timing(30_000, 3_000), steps, vec![RelayFault::WithholdReplies { at_ms: 250, for_ms: 8_000 }])
}

/// The silent-stream watchdog: the first session sends its endpoint and then nothing; after the
/// 1 500 ms idle budget the bridge reconnects and the second session answers.
pub fn silent_stream() -> Scenario {
    let mut steps = handshake();
    steps.push(call(300, 1, Tool::Recall, 50));
    let faults = vec![RelayFault::StreamStall { at_ms: 150, for_ms: 6_000 }];
    relay(2, fast_timing(1_500, 8_000), steps, faults)
}

/// The replay double-write: the relayer executes a `remember`, the stream drops before the
/// reply, the bridge reconnects and replays with the same idempotency key: executed once.
pub fn replay_double_write() -> Scenario {
    let mut steps = handshake();
    steps.push(call(300, 1, Tool::Remember, 1_000));
    relay(3, fast_timing(30_000, 8_000), steps, vec![RelayFault::StreamEof { at_ms: 800 }])
}

/// A rate-limited handshake: every POST is answered 429 for the first 1.5 s, so the first
/// session's `initialize` is refused through both retries while a call waits on it. The bridge
/// answers that call at once with the refusal (the status and the three attempts), and the next
/// call initializes the session again and succeeds. Then a failing deployment answers 503 for
/// 1.5 s, through a third call's POST and both its retries: it fails with that status and its
/// three attempts.
pub fn rate_limited_initialize() -> Scenario {
    let mut steps = handshake();
    steps.push(call(0, 1, Tool::Recall, 50));
    steps.push(call(3_000, 2, Tool::Recall, 50));
    steps.push(call(5_100, 3, Tool::Recall, 50));
    let faults = vec![
        RelayFault::PostReject { at_ms: 0, for_ms: 1_500, status: 429 },
        RelayFault::PostReject { at_ms: 5_000, for_ms: 1_500, status: 503 },
    ];
    relay(5, fast_timing(30_000, 8_000), steps, faults)
}

/// An initialize nobody answered: a proxy resets every POST's connection for the first 1.2 s,
/// before the relayer reads it, so the session's `initialize` and both its retries go unanswered.
/// No answer is no refusal: the bridge carries on and sends the waiting call, which the relayer
/// refuses as not initialized (MCP lifecycle); the bridge initializes the session and sends the
/// call again, and the call succeeds.
pub fn unanswered_initialize() -> Scenario {
    let steps = vec![call(0, 1, Tool::Recall, 50)];
    let faults = vec![RelayFault::PostReset { at_ms: 0, for_ms: 1_200, after_admit: false }];
    relay(8, fast_timing(30_000, 8_000), steps, faults)
}

/// `unanswered_initialize`, and then the token is revoked (401 from 1.3 s) just as the bridge
/// initializes the session again for the refused call. Nothing ran for that call: it is among
/// the requests the refused `initialize` answers at once, never one whose work "may have
/// completed".
pub fn unanswered_initialize_then_revoked() -> Scenario {
    let mut scenario = unanswered_initialize();
    if let Some(relay) = scenario.family.downcast_mut::<RelayScenario>() {
        relay.faults.push(RelayFault::PostReject { at_ms: 1_300, for_ms: 2_000, status: 401 });
    }
    scenario
}

/// The token is revoked (401 from 250 ms for 1 s) just after the relayer accepted the session's
/// `initialize`, so it refuses the bridge's `notifications/initialized` for good. A refusal for
/// good is not retried on the retry schedule (MODEL.md §1.4): the bridge sends the note again
/// only when the client's call needs the session (or after the reconnect backoff's cap), and
/// the call is answered.
pub fn revoked_initialized() -> Scenario {
    let mut steps = handshake();
    steps.push(call(3_000, 1, Tool::Recall, 50));
    let faults = vec![RelayFault::PostReject { at_ms: 250, for_ms: 1_000, status: 401 }];
    relay(10, fast_timing(30_000, 40_000), steps, faults)
}

/// The relayer refuses the bridge's `notifications/initialized` with 503 from 250 ms for 5 s, past
/// every retry, and the client, its handshake done, writes nothing more for 40 s. Nothing else
/// is owed (no call in flight, no notification queued), yet the handshake the client completed
/// is: the bridge tries it again after the refusal backoff, and the session hears it without
/// waiting for the client's next message (MODEL.md §4.10: a client's notification reaches the
/// server unless the client left first).
pub fn refused_initialized_then_quiet() -> Scenario {
    let faults = vec![RelayFault::PostReject { at_ms: 250, for_ms: 5_000, status: 503 }];
    let mut scenario = relay(12, fast_timing(6_000, 10_000), handshake(), faults);
    if let Some(relay) = scenario.family.downcast_mut::<RelayScenario>() {
        relay.script.end_at_ms = 40_000;
        scenario.sim.horizon_ms = 42_000;
    }
    scenario
}

/// A call the relayer accepted whose replay meets resets: the call's tool is slow (5 s), its
/// stream ends at 1 s, and on the new session every POST's connection is reset after the relayer
/// admitted it, from 1 850 ms for 1.2 s, so the replay and both its retries get no HTTP answer.
/// The relayer had accepted the call (the bridge read its 202): a network error says nothing
/// about that work, so the call stays owed, and the tool's answer, sent on the new session's
/// stream when it finishes, answers it (MODEL.md §1.4: replay, at most one execution).
pub fn accepted_call_replayed_into_resets() -> Scenario {
    let mut steps = handshake();
    steps.push(call(300, 1, Tool::Recall, 3_000));
    let faults = vec![
        RelayFault::StreamEof { at_ms: 1_000 },
        RelayFault::PostReset { at_ms: 1_850, for_ms: 1_200, after_admit: true },
        RelayFault::SlowTool { step: 2, run_ms: 5_000 },
    ];
    let mut timing = fast_timing(30_000, 10_000);
    timing.slowest_tool_ms = 4_000;
    relay(11, timing, steps, faults)
}

/// A late handshake: the IDE sends `initialize` at 300 ms, once the bridge has its session, and
/// `notifications/initialized` 300 ms later, with a call right behind it. The bridge initializes
/// the session with the client's params, sends its own note once the client's comes, and then
/// the call.
pub fn late_handshake() -> Scenario {
    let steps = vec![step(300, 0, Op::Initialize), step(600, 0, Op::Initialized), call(620, 1, Tool::Recall, 50)];
    relay(9, fast_timing(30_000, 8_000), steps, vec![])
}

/// A session the relayer forgets while its stream stays up (`session_lost`, keep-alives and
/// all), between the bridge's own `initialize` and the client's late handshake: the bridge's
/// `notifications/initialized` and the client's notification after it are answered 404, and only
/// the reconnect a 404 calls for (MODEL.md 1.4) gets them to the relayer. No stream end tells
/// the bridge. The call after them is answered on the new session: a bridge that only retried
/// its `notifications/initialized` on the lost session would hold it, and everything behind it,
/// until the client gave up.
pub fn lost_session() -> Scenario {
    let steps = vec![
        step(300, 0, Op::Initialize),
        step(600, 0, Op::Initialized),
        step(650, 1, Op::Notify { note: Note::RootsListChanged }),
        step(2_000, 2, Op::Notify { note: Note::Progress }),
        call(2_100, 3, Tool::Recall, 50),
    ];
    relay(9, fast_timing(30_000, 8_000), steps, vec![RelayFault::SessionLost { at_ms: 550 }])
}

/// A quiet but healthy stream: keep-alives every 200 ms are all the relayer writes for 4 s, more
/// than twice the 1 500 ms idle budget, between two calls. Keep-alives are stream activity: the
/// bridge keeps its one stream.
pub fn quiet_stream() -> Scenario {
    let mut steps = handshake();
    steps.push(call(300, 1, Tool::Recall, 50));
    steps.push(call(4_500, 2, Tool::Recall, 50));
    relay(7, fast_timing(1_500, 8_000), steps, vec![])
}

/// A flapping relayer: the first stream ends after 3 s, and for the next 4 s every new stream is
/// dropped before its endpoint event. The bridge backs off more after each dropped stream, and
/// the call sent meanwhile is answered by the first stream that stays.
pub fn flapping_relayer() -> Scenario {
    let mut steps = handshake();
    steps.push(call(3_500, 1, Tool::Recall, 50));
    let faults = vec![RelayFault::StreamFlap { at_ms: 3_000, for_ms: 4_000, after_endpoint: false }];
    relay(6, fast_timing(30_000, 12_000), steps, faults)
}

/// Fields that are deterministic but noisy (random keys and session nonces) are left out of
/// snapshots, so a snapshot changes only when behaviour does.
const NOISY_FIELDS: &[&str] = &["key", "session", "detail"];

/// One line per event, virtual time first, stable fields only.
pub fn snapshot(trace: &Trace) -> String {
    let mut out = String::new();
    for event in &trace.events {
        let mut event = event.clone();
        event.fields.retain(|(name, _)| !NOISY_FIELDS.contains(&name.as_str()));
        out.push_str(event.line().trim_start());
        out.push('\n');
    }
    out
}
