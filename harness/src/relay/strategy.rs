//! proptest strategies for relay scenarios. Swarm testing: each case first draws a timing
//! profile and which fault kinds are on, then a workload of 1–20 calls and a plan of 0–6 faults
//! of those kinds. Shrinking removes steps and faults and makes windows shorter.

use bridge_under_test::relay::client::{ClientScript, IdForm, InvalidForm, Note, Op, Step, Tool};
use bridge_under_test::relay::RelayBugs;
use proptest::prelude::*;
use proptest::sample::Index;

use super::faults::{RelayFault, ServerMessage, KINDS};
use super::{RelayScenario, Spec, Timing};

/// Simulator parameters the relay family uses with a timing: the coarsest tick that keeps every
/// timer meaningful (the shortest relay timer, the first keep-alive, spans at least 4 ticks).
pub fn tick_ms(timing: &Timing) -> u64 {
    (timing.first_keepalive_ms.min(timing.keepalive_ms) / 4).clamp(1, 50)
}

/// Production constants, or a compressed profile whose deadlines are seconds, not minutes.
fn timing() -> impl Strategy<Value = Timing> {
    prop_oneof![compressed(), Just(Timing::default())]
}

/// A compressed profile: deadlines of seconds, not minutes.
fn compressed() -> impl Strategy<Value = Timing> {
    (200u64..=1_000, 3u64..=8, 1_000u64..=10_000, 500u64..=5_000, prop::option::weighted(0.25, 1_000u64..=20_000))
        .prop_map(|(keepalive_ms, idle_factor, slowest_tool_ms, deadline_margin_ms, call_timeout_ms)| Timing {
            sse_idle_ms: keepalive_ms * idle_factor,
            first_keepalive_ms: 200,
            keepalive_ms,
            slowest_tool_ms,
            remember_deadline_ms: slowest_tool_ms / 2,
            deadline_margin_ms,
            call_timeout_ms,
        })
}

fn op(timing: &Timing) -> impl Strategy<Value = Op> {
    let (remember_max, analyze_max) = (timing.remember_deadline_ms, timing.slowest_tool_ms * 11 / 10);
    prop_oneof![
        6 => (prop_oneof![2 => Just(Tool::Recall), 3 => Just(Tool::Remember), 1 => Just(Tool::Analyze)], any::<Index>())
            .prop_map(move |(tool, work)| {
                let max = match tool {
                    Tool::Recall => 300,
                    Tool::Remember => remember_max,
                    Tool::Analyze => analyze_max,
                };
                Op::Call { tool, work_ms: 5 + work.index(max as usize) as u64 }
            }),
        1 => Just(Op::ListTools),
        1 => Just(Op::Ping),
        1 => Just(Op::Malformed),
        1 => prop::sample::select(InvalidForm::ALL).prop_map(|form| Op::Invalid { form }),
        2 => prop::sample::select(Note::ALL).prop_map(|note| Op::Notify { note }),
    ]
}

/// Ids in every JSON-RPC form, mostly plain integers.
fn id_form() -> impl Strategy<Value = IdForm> {
    prop_oneof![
        8 => Just(IdForm::Int),
        2 => Just(IdForm::Str),
        1 => Just(IdForm::NumericStr),
        1 => Just(IdForm::Large),
        1 => Just(IdForm::Negative),
        1 => Just(IdForm::Zero),
    ]
}

/// When the client's handshake comes, if at all: `(initialize at, notifications/initialized
/// that much later)`. Mostly at once, before any session; now and then late, once the bridge has
/// a session (an IDE that starts the bridge before it is ready to talk), with the note a while
/// after the `initialize`.
fn handshake() -> impl Strategy<Value = Option<(u64, u64)>> {
    prop_oneof![
        4 => Just(None),
        3 => Just(Some((0, 0))),
        1 => (1u64..=3_000, prop_oneof![Just(0u64), 1u64..=1_500]).prop_map(Some),
    ]
}

/// The client's script: an optional handshake (and a notification before any session), then
/// 1–20 operations at increasing times, after the handshake. Ids count up, in every JSON-RPC
/// form; now and then one is reused, and now and then a step sends the previous step's id at
/// once, while it may still be owed.
/// `live`: the client is an IDE that completes its handshake first (a real bridge owes nothing
/// to a client that breaks the MCP lifecycle), so it initializes at once and sends nothing
/// before.
fn script(timing: &Timing, live: bool) -> impl Strategy<Value = Vec<Step>> {
    let spec = Spec::new(timing, 1, 0);
    let gap_max = (spec.call_timeout_ms / 8).clamp(500, 10_000);
    // Now and then a step waits out a whole deadline and two sweeps first, so a reused id meets
    // an earlier request that has ended every way (answered, closed out, rejected).
    let ended_ms = spec.call_timeout_ms + 2 * spec.sweep_period_ms + 100;
    let step = (0..=gap_max, op(timing), prop::option::weighted(0.1, any::<Index>()), id_form(), prop::bool::weighted(0.06), prop::bool::weighted(0.05));
    let (handshake, early_note) = if live {
        (Just(Some((0, 0))).boxed(), Just(None).boxed())
    } else {
        (handshake().boxed(), prop::option::weighted(0.2, prop::sample::select(Note::ALL)).boxed())
    };
    (handshake, early_note, prop::collection::vec(step, 1..=20)).prop_map(move |(handshake, early_note, ops)| {
        let mut steps = Vec::new();
        if let Some(note) = early_note {
            steps.push(Step::new(0, 0, Op::Notify { note }));
        }
        let mut at_ms = 0;
        if let Some((init_ms, note_after_ms)) = handshake {
            steps.push(Step::new(init_ms, 0, Op::Initialize));
            let mut note = Step::new(init_ms + note_after_ms, 0, Op::Initialized);
            // A real client reads the `initialize` result before it says it is initialized.
            note.after_answers = live;
            steps.push(note);
            at_ms = init_ms + note_after_ms;
        }
        let mut previous: Option<(u64, IdForm)> = None;
        for (n, (gap, op, reuse, id_form, after_ending, eager)) in ops.into_iter().enumerate() {
            let mut step = Step::new(0, reuse.map_or(n as u64 + 1, |i| i.index(n + 1) as u64), op);
            step.id_form = id_form;
            match previous {
                Some((id, form)) if eager => {
                    at_ms += gap % 300;
                    (step.id, step.id_form, step.eager) = (id, form, true);
                }
                _ => at_ms += gap + if after_ending { ended_ms } else { 0 },
            }
            step.at_ms = at_ms;
            if step.op.expects_reply() {
                previous = Some((step.id, step.id_form));
            }
            steps.push(step);
        }
        steps
    })
}

fn fault(kind: &'static str, timing: &Timing, writes: &[u64], span_ms: u64) -> BoxedStrategy<RelayFault> {
    let spec = Spec::new(timing, 1, 0);
    let (deadline, sweep, idle) = (spec.call_timeout_ms, spec.sweep_period_ms, timing.sse_idle_ms);
    let steps = writes.len();
    let step = (0..steps.max(1)).boxed();
    // Just before the client writes a step: its POST meets what the fault left (a session the
    // restarted relayer no longer knows, before the bridge has noticed its stream is gone).
    let anchors = if writes.is_empty() { vec![0] } else { writes.to_vec() };
    let before_a_write = (prop::sample::select(anchors), 0..=100u64).prop_map(|(at, ahead)| at.saturating_sub(ahead));
    let at = 0..=span_ms;
    let window = 100..=(3 * idle).max(200);
    match kind {
        "duplicate_reply" => step.prop_map(|step| RelayFault::DuplicateReply { step }).boxed(),
        "late_reply" => (step, deadline / 2..=deadline + 3 * sweep)
            .prop_map(|(step, delay_ms)| RelayFault::LateReply { step, delay_ms })
            .boxed(),
        "swallow_reply" => step.prop_map(|step| RelayFault::SwallowReply { step }).boxed(),
        "slow_tool" => (step, deadline / 2..=2 * deadline)
            .prop_map(|(step, run_ms)| RelayFault::SlowTool { step, run_ms })
            .boxed(),
        "post_reject" => (at, 100u64..=5_000, prop::sample::select(vec![401u16, 401, 429, 500, 503]))
            .prop_map(|(at_ms, for_ms, status)| RelayFault::PostReject { at_ms, for_ms, status })
            .boxed(),
        "withhold_replies" => (at, window)
            .prop_map(|(at_ms, for_ms)| RelayFault::WithholdReplies { at_ms, for_ms })
            .boxed(),
        "stream_stall" => (at, window)
            .prop_map(|(at_ms, for_ms)| RelayFault::StreamStall { at_ms, for_ms })
            .boxed(),
        "stream_eof" => at.prop_map(|at_ms| RelayFault::StreamEof { at_ms }).boxed(),
        "stream_flap" => (at, window, any::<bool>())
            .prop_map(|(at_ms, for_ms, after_endpoint)| RelayFault::StreamFlap { at_ms, for_ms, after_endpoint })
            .boxed(),
        "relayer_bounce" => prop_oneof![at.boxed(), before_a_write.boxed()]
            .prop_map(|at_ms| RelayFault::RelayerBounce { at_ms })
            .boxed(),
        "session_lost" => at.prop_map(|at_ms| RelayFault::SessionLost { at_ms }).boxed(),
        "link_hold" => (at, window).prop_map(|(at_ms, for_ms)| RelayFault::LinkHold { at_ms, for_ms }).boxed(),
        "post_reset" => (at, 100u64..=3_000, any::<bool>())
            .prop_map(|(at_ms, for_ms, after_admit)| RelayFault::PostReset { at_ms, for_ms, after_admit })
            .boxed(),
        _ => at.prop_map(|at_ms| RelayFault::StdinEof { at_ms }).boxed(),
    }
}

/// A whole relay scenario with the given bug switches.
pub fn scenario(bugs: RelayBugs) -> impl Strategy<Value = RelayScenario> {
    scenario_of(bugs, timing().boxed(), KINDS, false)
}

/// Fault kinds added after live tokens were first drawn, left out of the swarm so that a token
/// names the case it named when a finding was filed: a held link is drawn after the rest
/// (`live_scenario`, which changed the tokens that drew one); a lost session is not drawn live
/// (drawing it would change about one token in seven of `docs/findings.md`), until a new live
/// token version.
const LIVE_LATER: &[&str] = &["link_hold", "session_lost"];

/// Fault kinds a live case draws with the simulation's swarm: all but [`LIVE_LATER`].
static LIVE_KINDS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| KINDS.iter().copied().filter(|kind| !LIVE_LATER.contains(kind)).collect());

/// A relay scenario for a live case: compressed timing only (production deadlines are minutes
/// of real time), the fault kinds the live engine carries out, and a client that completes its
/// handshake first.
///
/// The traffic a real server starts (`RelayFault::ServerMessage`: notifications and requests to
/// the client, while the client's steps run) is drawn after the rest, so a live token names the
/// same workload and faults it named before the traffic was added.
/// A held link (the live engine puts a proxy between bridge and server for it) is drawn after
/// the traffic, for the same reason.
pub fn live_scenario() -> impl Strategy<Value = RelayScenario> {
    let hold = prop::option::weighted(0.25, (1..=1_000u64, 0..=1_000u64));
    let core = with_traffic(scenario_of(RelayBugs::default(), compressed().boxed(), &LIVE_KINDS, true));
    (core, hold).prop_map(|(mut scenario, hold)| {
        let span_ms = scenario.script.steps.last().map_or(0, |s| s.at_ms);
        if let Some((at, length)) = hold {
            // As the simulation draws its windows: 100 ms up to three idle timeouts.
            let longest = (3 * scenario.timing.sse_idle_ms).max(200) - 100;
            scenario.faults.push(RelayFault::LinkHold { at_ms: span_ms * at / 1_000, for_ms: 100 + longest * length / 1_000 });
            scenario.script.end_at_ms = end_at_ms(&scenario.timing, &scenario.script.steps, &scenario.faults);
        }
        scenario
    })
}

/// Up to four messages the server starts (`RelayFault::ServerMessage`) at points of the client's
/// steps, drawn after the rest of `core`, so a token names the workload and faults it named
/// before the traffic was added.
fn with_traffic(core: impl Strategy<Value = RelayScenario>) -> impl Strategy<Value = RelayScenario> {
    let message = prop::sample::select(vec![ServerMessage::Log, ServerMessage::ToolsListChanged, ServerMessage::Ping, ServerMessage::RootsList]);
    let traffic = prop::collection::vec((1..=1_000u64, message), 0..=4);
    (core, traffic).prop_map(|(mut scenario, traffic)| {
        let span_ms = scenario.script.steps.last().map_or(0, |s| s.at_ms);
        for (permille, message) in traffic {
            scenario.faults.push(RelayFault::ServerMessage { at_ms: span_ms * permille / 1_000, message });
        }
        scenario
    })
}

/// A relay scenario for the sdk family (rmcp's bridge in the simulation): every timing and
/// fault kind, a client that completes its handshake first and names its ids in `_meta`, as for
/// a live bridge, and the traffic a server starts.
pub fn sdk_scenario() -> impl Strategy<Value = RelayScenario> {
    sdk_scenario_of(KINDS)
}

/// [`sdk_scenario`] drawing only the given fault kinds.
pub fn sdk_scenario_of(kinds: &'static [&'static str]) -> impl Strategy<Value = RelayScenario> {
    with_traffic(scenario_of(RelayBugs::default(), timing().boxed(), kinds, true))
}

fn scenario_of(bugs: RelayBugs, timing: BoxedStrategy<Timing>, kinds: &'static [&'static str], live: bool) -> impl Strategy<Value = RelayScenario> {
    (timing, crate::swarm::profile(kinds)).prop_flat_map(move |(timing, kinds)| {
        script(&timing, live).prop_flat_map(move |steps| {
            let spec = Spec::new(&timing, 1, 0);
            let span_ms = steps.last().map_or(0, |s| s.at_ms) + spec.call_timeout_ms;
            let writes: Vec<u64> = steps.iter().map(|s| s.at_ms).collect();
            let choices: Vec<BoxedStrategy<RelayFault>> =
                kinds.iter().map(|kind| fault(kind, &timing, &writes, span_ms)).collect();
            let faults = crate::swarm::plan(choices, 0..=6);
            let profile: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
            (Just(timing.clone()), Just(steps), faults, Just(profile))
        })
    })
    .prop_map(move |(timing, steps, faults, profile)| {
        let end_at_ms = end_at_ms(&timing, &steps, &faults);
        RelayScenario { bugs, timing, script: ClientScript { steps, end_at_ms, stamp_ids: live, answers_server: live }, faults, profile }
    })
}

/// When the client closes stdin: after every step, fault and late reply has had time to play
/// out, plus a full deadline and two sweeps, so every request is judged.
pub fn end_at_ms(timing: &Timing, steps: &[Step], faults: &[RelayFault]) -> u64 {
    let spec = Spec::new(timing, 1, 0);
    let script = ClientScript { steps: steps.to_vec(), end_at_ms: 0, ..ClientScript::default() };
    let latest_fault = faults
        .iter()
        .map(|fault| {
            let (start, end) = fault.window(&script);
            let work_ms = |step: &usize| match steps.get(*step).map(|s| &s.op) {
                Some(Op::Call { work_ms, .. }) => *work_ms,
                _ => 0,
            };
            let extra = match fault {
                RelayFault::LateReply { step, delay_ms } => delay_ms + work_ms(step),
                RelayFault::SlowTool { run_ms, .. } => *run_ms,
                _ => 0,
            };
            end.unwrap_or(start) + extra
        })
        .max()
        .unwrap_or(0);
    let last_step = steps.last().map_or(0, |s| s.at_ms);
    last_step.max(latest_fault) + spec.call_timeout_ms + 2 * spec.sweep_period_ms + 2_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hunt::tree_of;

    #[test]
    fn server_traffic_is_drawn_after_the_rest_so_live_tokens_keep_their_workload() {
        let mut with_traffic = 0;
        for seed in 0..64 {
            let core = tree_of(seed, scenario_of(RelayBugs::default(), compressed().boxed(), &LIVE_KINDS, true).boxed()).current();
            let mut live = tree_of(seed, live_scenario().boxed()).current();
            let before = live.faults.len();
            live.faults.retain(|f| !matches!(f, RelayFault::ServerMessage { .. } | RelayFault::LinkHold { .. }));
            live.script.end_at_ms = core.script.end_at_ms;
            with_traffic += usize::from(before > live.faults.len());
            assert_eq!(live, core, "seed {seed}: the workload or faults changed");
        }
        assert!(with_traffic > 32, "only {with_traffic} of 64 cases carry server traffic");
    }
}
