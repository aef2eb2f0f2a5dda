//! proptest strategies for daemon scenarios. Swarm testing: each case first draws which fault
//! kinds are on, then a timing profile and a workload of 1–4 invocations, then a plan of 0–5
//! faults of those kinds. Shrinking removes invocations and faults and makes delays shorter.

use bridge_under_test::daemon::client::{Invocation, Method};
use bridge_under_test::daemon::config::{
    fixed_phase, DRAIN_TIMEOUT_MS, MAX_PAGES, POLL_MS, PROTOCOL_VERSION, READY_WAIT_MS,
    STATUS_TIMEOUT_MIN_MS, STOP_WAIT_MS,
};
use bridge_under_test::daemon::oauth;
use bridge_under_test::daemon::replace::LOCK_WAIT_MS;
use bridge_under_test::daemon::{DaemonBugs, Timing};
use proptest::prelude::*;

use super::faults::{Anchor, DaemonFault, KINDS, LIFECYCLE};
use super::lifecycle::REPLACE_MARGIN_MS;
use super::DaemonScenario;

/// The coarsest tick that keeps the timers meaningful: a tenth of the smallest caller deadline
/// `d`, at most 10 ms. Every message between hosts costs up to a tick, so a request reaches the
/// daemon and its first frame comes back within two ticks and later frames arrive at most a
/// tick off their `d/3` cadence: a healthy daemon's frames land well inside `d`, while a first
/// frame one default interval (250 ms) late, or a 250 ms gap, overshoots any `d` below 250 ms by
/// more than that jitter. The 10 ms cap keeps the OAuth discovery, registration and code
/// exchange (a dozen HTTP exchanges) to about a hundred milliseconds, as on a real network, so
/// a 400 ms deadline can cover an OAuth wait. A 30 ms deadline runs at a 3 ms tick.
pub fn tick_ms(scenario: &DaemonScenario) -> u64 {
    let smallest = scenario
        .deadlines()
        .into_iter()
        .map(|d| d.unwrap_or(scenario.timing.daemon_timeout_ms))
        .min()
        .unwrap_or(scenario.timing.daemon_timeout_ms);
    (smallest / 10).clamp(1, 10)
}

/// How long the run may last: every invocation's worst correct duration, one after another
/// (two attempts, a restart and a launch each), plus room to judge. (An anchored onset waits
/// at most until the last invocation ends: its window then fits in the faults' share.) A correct run ends far
/// sooner: the run stops when the CLI exits.
pub fn horizon_ms(scenario: &DaemonScenario, tick_ms: u64) -> u64 {
    let timing = &scenario.timing;
    let delays: u64 = scenario
        .faults
        .iter()
        .map(|fault| match (fault, fault.window()) {
            (DaemonFault::PageDelay { delay_ms, .. }, _) => *delay_ms,
            (_, (start, end)) => end.map_or(0, |end| end - start),
        })
        .sum();
    let restart_ms = STATUS_TIMEOUT_MIN_MS + STOP_WAIT_MS + READY_WAIT_MS + 2 * POLL_MS;
    let per_action: u64 = scenario
        .invocations
        .iter()
        .zip(scenario.deadlines())
        .map(|(invocation, deadline)| {
            let attempt_ms = if fixed_phase(invocation.method.name()) {
                timing.oauth_timeout_ms + deadline.unwrap_or(timing.sdk_request_timeout_ms)
            } else {
                let page_ms = deadline.unwrap_or(timing.sdk_request_timeout_ms);
                deadline.unwrap_or(timing.oauth_timeout_ms)
                    + 3 * page_ms
                    + u64::from(MAX_PAGES) * 20 * tick_ms
            };
            // A protocol-1 CLI waits out its whole fixed budget when it hears nothing.
            let call_ms = deadline.unwrap_or(timing.sdk_request_timeout_ms);
            let v1_ms = timing.oauth_timeout_ms + (u64::from(MAX_PAGES) + 1) * call_ms;
            let attempt_ms = if invocation.version < PROTOCOL_VERSION {
                attempt_ms.max(v1_ms)
            } else {
                attempt_ms
            };
            2 * attempt_ms + restart_ms + READY_WAIT_MS
        })
        .sum();
    let last_ms = scenario
        .invocations
        .iter()
        .map(|i| i.at_ms)
        .max()
        .unwrap_or(0);
    last_ms + per_action + delays + lifecycle_ms(scenario) + 2_000
}

/// With several clients or lifecycle operations, an invocation may wait for the start lock and
/// then drain, once for a stale daemon and once after a transport failure.
fn lifecycle_ms(scenario: &DaemonScenario) -> u64 {
    let lifecycle = scenario.invocations.iter().any(|i| i.client != 0)
        || scenario
            .faults
            .iter()
            .any(|f| LIFECYCLE.contains(&f.name()));
    let per_replace = LOCK_WAIT_MS + DRAIN_TIMEOUT_MS + REPLACE_MARGIN_MS;
    let actions = scenario.invocations.len() as u64;
    if lifecycle {
        2 * actions * per_replace
    } else {
        0
    }
}

/// MODEL.md's constants, or a compressed profile whose OAuth wait is seconds, not minutes.
fn timing() -> impl Strategy<Value = Timing> {
    let compressed =
        (1_500u64..=6_000, 15u64..=40, 300u64..=3_000).prop_map(|(oauth, sdk_pct, idle)| Timing {
            oauth_timeout_ms: oauth,
            sdk_request_timeout_ms: oauth * sdk_pct / 100,
            daemon_timeout_ms: idle,
        });
    prop_oneof![4 => compressed, 1 => Just(Timing::default())]
}

/// Which fault kinds are on for this case.
fn profile() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(any::<bool>(), KINDS.len()).prop_map(|on| {
        KINDS
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(kind, _)| *kind)
            .collect()
    })
}

/// A large caller deadline for a timing profile.
fn large_deadline(timing: &Timing) -> std::ops::RangeInclusive<u64> {
    if *timing == Timing::default() {
        1_000..=20_000
    } else {
        250..=8_000
    }
}

/// A small caller deadline: with compressed timing, shorter than the default frame interval
/// (250 ms), so the first frame and the cadence are what keep the call alive; with MODEL.md's
/// timing 1–2 s, since a fine tick over its minutes is too slow.
fn small_deadline(timing: &Timing) -> std::ops::RangeInclusive<u64> {
    if *timing == Timing::default() {
        1_000..=2_000
    } else {
        10..=240
    }
}

/// A caller deadline at either scale, small one time in four.
fn deadline(timing: &Timing) -> impl Strategy<Value = u64> {
    prop_oneof![3 => large_deadline(timing), 1 => small_deadline(timing)]
}

fn invocation(timing: Timing) -> impl Strategy<Value = Invocation> {
    let method = prop_oneof![
        4 => Just(Method::ListTools),
        3 => (5u64..=1_500).prop_map(|work_ms| Method::CallTool { work_ms }),
        1 => Just(Method::ListResources),
        1 => Just(Method::ReadResource),
        1 => Just(Method::CloseServer),
        1 => Just(Method::ListPrompts),
    ];
    let timeout = prop::option::weighted(0.6, deadline(&timing));
    (0u64..=1_500, method, timeout).prop_map(|(at_ms, method, timeout_ms)| Invocation {
        at_ms,
        method,
        timeout_ms,
        client: 0,
        version: PROTOCOL_VERSION,
    })
}

/// 1–4 invocations at increasing nominal times. After the first (which launches a current
/// daemon), one in six is an old protocol-1 CLI: it gets no frames and waits on a fixed budget,
/// so a stall that outlasts that budget on its retry is reached too.
fn workload(timing: Timing) -> impl Strategy<Value = Vec<Invocation>> {
    let version = prop_oneof![1 => Just(1u64), 5 => Just(PROTOCOL_VERSION)];
    prop::collection::vec((invocation(timing), version), 1..=4).prop_map(|drawn| {
        let mut at_ms = 0;
        let mut invocations = Vec::new();
        for (n, (mut invocation, version)) in drawn.into_iter().enumerate() {
            at_ms += invocation.at_ms;
            invocation.at_ms = at_ms;
            if n > 0 {
                invocation.version = version;
            }
            invocations.push(invocation);
        }
        invocations
    })
}

/// A fault whose onset (if it has one) is, one time in `1 + plain`, anchored to a moment of
/// the workload: just after a CLI writes a request, just after a page with a next cursor, or
/// just after an action begins restarting. Those phases last a tick or two, or come only after
/// another fault, so onsets drawn in time alone hardly ever meet them. Shrinks to no anchor.
pub(super) fn anchored_onset(fault: BoxedStrategy<DaemonFault>, plain: u32) -> BoxedStrategy<DaemonFault> {
    let anchor = prop_oneof![
        plain => Just(None),
        1 => prop_oneof![
            1 => Just(Some(Anchor::BeforeDispatch)),
            2 => Just(Some(Anchor::BetweenPages)),
            2 => Just(Some(Anchor::Recovery)),
        ],
    ];
    (fault, anchor)
        .prop_map(|(mut fault, to)| {
            if let Some(anchor) = fault.anchor_mut() {
                *anchor = to;
            }
            fault
        })
        .boxed()
}

/// An onset up to 200 ms before one of the invocations' starts.
pub(super) fn just_before(anchors: &[u64]) -> BoxedStrategy<u64> {
    (prop::sample::select(anchors.to_vec()), 0..=200u64)
        .prop_map(|(start, ahead)| start.saturating_sub(ahead))
        .boxed()
}

/// A stall from just before a protocol-1 CLI starts until both its attempts have waited out
/// its fixed budget, the restart between them included: the one way an action ends `budget`.
/// `None` without such a CLI, or with MODEL.md's timing (budgets of many minutes).
pub(super) fn budget_stall(timing: &Timing, invocations: &[Invocation]) -> Option<BoxedStrategy<DaemonFault>> {
    if *timing == Timing::default() {
        return None;
    }
    let old: Vec<(u64, u64)> = invocations
        .iter()
        .filter(|i| i.version < PROTOCOL_VERSION)
        .map(|i| {
            let call_ms = i.timeout_ms.unwrap_or(timing.sdk_request_timeout_ms);
            let budget_ms = timing.oauth_timeout_ms + (u64::from(MAX_PAGES) + 1) * call_ms;
            let restart_ms = STATUS_TIMEOUT_MIN_MS + STOP_WAIT_MS + READY_WAIT_MS + 2 * POLL_MS;
            (i.at_ms, 2 * budget_ms + restart_ms)
        })
        .collect();
    if old.is_empty() {
        return None;
    }
    let stall = (prop::sample::select(old), 0..=200u64, 0..=5_000u64).prop_map(
        |((start, covers_ms), ahead, extra)| DaemonFault::DaemonStall {
            at_ms: start.saturating_sub(ahead),
            for_ms: ahead + covers_ms + extra,
            anchor: None,
        },
    );
    Some(stall.boxed())
}

fn fault(
    kind: &'static str,
    timing: &Timing,
    invocations: &[Invocation],
    (span_ms, pages): (u64, u32),
) -> BoxedStrategy<DaemonFault> {
    let starts: Vec<u64> = invocations.iter().map(|i| i.at_ms).collect();
    let actions = starts.len();
    let big = *large_deadline(timing).end();
    let oauth = timing.oauth_timeout_ms;
    // Half the onsets land anywhere in the run; half just after an invocation starts, so a
    // fault meets a request before dispatch, during OAuth or between pages, not only mid-call.
    let anchors = if starts.is_empty() { vec![0] } else { starts.to_vec() };
    let early = (prop::sample::select(anchors.clone()), 0..=oauth.min(600))
        .prop_map(|(start, offset)| start + offset);
    let at = prop_oneof![1 => (0..=span_ms).boxed(), 1 => early.boxed()];
    match kind {
        "approval_delay" => (20..=oauth * 13 / 10)
            .prop_map(|delay_ms| DaemonFault::ApprovalDelay { delay_ms })
            .boxed(),
        "approval_never" => Just(DaemonFault::ApprovalNever).boxed(),
        // Pages the listing has: a fault on a page past the last never fires.
        "page_delay" => (1..=pages.max(1), 20..=big)
            .prop_map(|(page, delay_ms)| DaemonFault::PageDelay { page, delay_ms })
            .boxed(),
        "repeated_cursor" => (2..=pages.max(2))
            .prop_map(|page| DaemonFault::RepeatedCursor { page })
            .boxed(),
        "endless_cursors" => Just(DaemonFault::EndlessCursors).boxed(),
        // An upstream method the workload calls (any, if it calls none): a wedge nobody
        // calls never fires.
        "wedged_method" => prop::sample::select(wedgeable(invocations))
        .prop_map(|method| DaemonFault::WedgedMethod {
            method: method.to_string(),
        })
        .boxed(),
        "slow_tool" => (100..=oauth + big)
            .prop_map(|run_ms| DaemonFault::SlowTool { run_ms })
            .boxed(),
        // Now and then a stall that outlasts a protocol-1 CLI's fixed budget on both attempts.
        "daemon_stall" => {
            let stall = (at.clone(), prop_oneof![3 => 50..=3 * big, 1 => 3 * big..=120_000])
                .prop_map(|(at_ms, for_ms)| DaemonFault::DaemonStall { at_ms, for_ms, anchor: None })
                .boxed();
            match budget_stall(timing, invocations) {
                Some(budget) => prop_oneof![3 => stall, 1 => budget].boxed(),
                None => stall,
            }
        }
        "keep_open" => (1..=2 * big)
            .prop_map(|hold_ms| DaemonFault::KeepOpen { hold_ms })
            .boxed(),
        "crossed_frames" => (at.clone(), 50..=2 * big)
            .prop_map(|(at_ms, for_ms)| DaemonFault::CrossedFrames { at_ms, for_ms, anchor: None })
            .boxed(),
        "daemon_crash" => at
            .clone()
            .prop_map(|at_ms| DaemonFault::DaemonCrash { at_ms, anchor: None })
            .boxed(),
        // Shorter than the stop wait (the stopped daemon goes late), longer than it (it is
        // killed), and longer than the ready wait (a launch that never becomes ready). Half
        // the onsets come just before an invocation, so its launch meets the hang.
        "process_hang" => {
            let for_ms = prop_oneof![
                1 => 50..=STOP_WAIT_MS,
                1 => STOP_WAIT_MS..=READY_WAIT_MS,
                1 => READY_WAIT_MS..=30_000,
            ];
            (prop_oneof![at.clone(), just_before(&anchors)], for_ms)
                .prop_map(|(at_ms, for_ms)| DaemonFault::ProcessHang { at_ms, for_ms, anchor: None })
                .boxed()
        }
        "socket_reset" => at
            .prop_map(|at_ms| DaemonFault::SocketReset { at_ms, anchor: None })
            .boxed(),
        // From a few round trips (never shorter than the exchange that uses it) to a few
        // actions long.
        "token_expiry" => (500..=2 * big)
            .prop_map(|lifetime_ms| DaemonFault::TokenExpiry { lifetime_ms })
            .boxed(),
        _ => {
            let deadline = prop_oneof![3 => small_deadline(timing), 1 => large_deadline(timing)];
            (1..=actions.max(1), deadline)
                .prop_map(|(action, timeout_ms)| DaemonFault::CallerDeadline { action, timeout_ms })
                .boxed()
        }
    }
}

/// What a wedge may name: the upstream MCP methods the invocations call, in workload order
/// without repeats (every one when they call none), then the handshake every session sends
/// (`initialize`) and the authorization server's endpoints every flow calls: the daemon's own
/// requests wedge as well as the ones the workload names.
fn wedgeable(invocations: &[Invocation]) -> Vec<&'static str> {
    let mut methods: Vec<&'static str> = Vec::new();
    for invocation in invocations {
        let upstream = match invocation.method {
            Method::ListTools => "tools/list",
            Method::CallTool { .. } => "tools/call",
            Method::ListResources => "resources/list",
            Method::ReadResource => "resources/read",
            Method::CloseServer | Method::ListPrompts => continue,
        };
        if !methods.contains(&upstream) {
            methods.push(upstream);
        }
    }
    if methods.is_empty() {
        methods = vec!["tools/call", "resources/list", "resources/read", "tools/list"];
    }
    methods.push("initialize");
    methods.extend(oauth::ENDPOINTS);
    methods
}

/// A whole daemon scenario with the given bug switches.
pub fn scenario(bugs: DaemonBugs) -> impl Strategy<Value = DaemonScenario> {
    (profile(), timing())
        .prop_flat_map(|(kinds, timing)| {
            (
                Just(kinds),
                Just(timing),
                workload(timing),
                1u32..=4,
                10u64..=200,
            )
        })
        .prop_flat_map(|(kinds, timing, invocations, pages, approval_ms)| {
            let span_ms =
                invocations.last().map_or(0, |i| i.at_ms) + 2 * *large_deadline(&timing).end();
            let choices: Vec<BoxedStrategy<DaemonFault>> = kinds
                .iter()
                .map(|kind| anchored_onset(fault(kind, &timing, &invocations, (span_ms, pages)), 3))
                .collect();
            let faults = crate::swarm::plan(choices, 0..=5);
            let profile: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
            (
                Just(timing),
                Just(invocations),
                Just(pages),
                Just(approval_ms),
                faults,
                Just(profile),
            )
        })
        .prop_map(move |parts| assemble(bugs, parts))
}

/// What a daemon strategy draws, in the order [`assemble`] takes it.
pub(super) type Parts = (Timing, Vec<Invocation>, u32, u64, Vec<DaemonFault>, Vec<String>);

/// The scenario of drawn parts: timing, invocations, pages, approval delay, faults, profile.
pub(super) fn assemble(bugs: DaemonBugs, parts: Parts) -> DaemonScenario {
    let (timing, invocations, pages, approval_ms, faults, profile) = parts;
    DaemonScenario { bugs, timing, pages, approval_ms, invocations, faults, profile }
}
