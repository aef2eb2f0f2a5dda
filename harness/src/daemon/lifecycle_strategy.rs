//! proptest strategies for daemon lifecycle scenarios: 2–4 concurrent clients (lanes) of mixed
//! protocol versions sharing one daemon, with config edits, peer `daemon start`s and now and
//! then a crash at drawn times. Swarm style: each case first draws which lifecycle operations
//! are on. Times cluster around the invocations so that the races the replacement rules guard
//! against (an upgrade while another client is mid-request, a peer swapping the daemon before or
//! during a drain) happen often rather than by luck; [`super::interleavings`] counts them.

use bridge_under_test::daemon::client::{Invocation, Method};
use bridge_under_test::daemon::config::{PROTOCOL_VERSION, READY_WAIT_MS, STOP_WAIT_MS};
use bridge_under_test::daemon::replace::LOCK_WAIT_MS;
use bridge_under_test::daemon::{DaemonBugs, Timing};
use proptest::prelude::*;

use super::faults::{Anchor, DaemonFault};
use super::strategy::{anchored_onset, assemble, budget_stall, just_before};
use super::DaemonScenario;

/// Compressed timing: OAuth waits of seconds, so slow approvals keep a request in flight.
fn timing() -> impl Strategy<Value = Timing> {
    (1_500u64..=4_000, 500u64..=3_000).prop_map(|(oauth, idle)| Timing {
        oauth_timeout_ms: oauth,
        sdk_request_timeout_ms: oauth / 2,
        daemon_timeout_ms: idle,
    })
}

fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        4 => (200u64..=3_500).prop_map(|work_ms| Method::CallTool { work_ms }),
        3 => Just(Method::ListTools),
        1 => Just(Method::ListResources),
        1 => Just(Method::ReadResource),
        // A newer CLI's method the daemon does not have: refused at once, even mid-restart.
        1 => Just(Method::ListPrompts),
    ]
}

/// One invocation at an offset (relative to the cluster it belongs to) of a drawn version.
fn invocation() -> impl Strategy<Value = (u64, Method, u64)> {
    let version = prop_oneof![1 => Just(1u64), 3 => Just(PROTOCOL_VERSION)];
    (0u64..=400, method(), version)
}

/// 2–4 lanes of 1–2 invocations each. Lane 0's first invocation opens at 0 with the current
/// version (it launches the shared daemon); the others cluster after `gap_ms`.
fn workload() -> impl Strategy<Value = Vec<Invocation>> {
    let lane = prop::collection::vec(invocation(), 1..=2);
    (prop::collection::vec(lane, 2..=4), 100u64..=1_200).prop_map(|(lanes, gap_ms)| {
        let mut invocations = Vec::new();
        for (client, lane) in lanes.into_iter().enumerate() {
            let mut at_ms = if client == 0 { 0 } else { gap_ms };
            for (n, (offset, method, version)) in lane.into_iter().enumerate() {
                let first = client == 0 && n == 0;
                at_ms += if first { 0 } else { offset };
                invocations.push(Invocation {
                    at_ms,
                    method,
                    timeout_ms: None,
                    client: u32::try_from(client).unwrap_or(0),
                    version: if first { PROTOCOL_VERSION } else { version },
                });
                at_ms += 600;
            }
        }
        invocations.sort_by_key(|i| i.at_ms);
        invocations
    })
}

/// When an operation happens: anywhere in the span, or within a few ticks after an invocation
/// starts, while that client is between reading the metadata and acting on it (the window a
/// peer's swap must hit to race a replacement).
fn moment(span_ms: u64, starts: Vec<u64>) -> BoxedStrategy<u64> {
    if starts.is_empty() {
        return (0..=span_ms).boxed();
    }
    prop_oneof![
        1 => 0..=span_ms,
        1 => (prop::sample::select(starts), 0u64..=80).prop_map(|(start, after)| start + after),
    ]
    .boxed()
}

/// The starts of the invocations after the first (one of which a lifecycle workload, with its
/// two lanes or more, always has).
fn later_starts(invocations: &[Invocation]) -> Vec<u64> {
    let later: Vec<u64> = invocations.iter().skip(1).map(|i| i.at_ms).collect();
    if later.is_empty() {
        vec![0]
    } else {
        later
    }
}

/// A config edit just before a later client starts, and a peer that read the config before the
/// edit starting its daemon just after, while that client is between reading the metadata and
/// probing: the daemon it meant to replace is gone, and the peer's daemon is stale too.
fn stale_peer(invocations: &[Invocation]) -> BoxedStrategy<Vec<DaemonFault>> {
    (prop::sample::select(later_starts(invocations)), 0u64..=200, 0u64..=80)
        .prop_map(|(start, ahead, after)| {
            vec![
                DaemonFault::ConfigEdit { at_ms: start.saturating_sub(ahead), anchor: None },
                DaemonFault::PeerStart {
                    at_ms: start + after,
                    version: PROTOCOL_VERSION,
                    old_config: true,
                    anchor: None,
                },
            ]
        })
        .boxed()
}

/// A lifecycle operation near the clustered invocations.
fn operation(kind: &'static str, span_ms: u64, timing: &Timing, invocations: &[Invocation]) -> BoxedStrategy<DaemonFault> {
    let at = moment(span_ms, invocations.iter().map(|i| i.at_ms).collect());
    match kind {
        // Now and then just before a later client starts, so that it finds the daemon stale
        // while the clients before it are still mid-request: the upgrade a drain guards.
        "config_edit" => prop_oneof![1 => at, 1 => just_before(&later_starts(invocations))]
            .prop_map(|at_ms| DaemonFault::ConfigEdit { at_ms, anchor: None })
            .boxed(),
        "peer_start" => {
            let version = prop_oneof![1 => Just(1u64), 4 => Just(PROTOCOL_VERSION)];
            (at, version, any::<bool>())
                .prop_map(|(at_ms, version, old_config)| DaemonFault::PeerStart {
                    at_ms,
                    version,
                    old_config,
                    anchor: None,
                })
                .boxed()
        }
        "daemon_crash" => at
            .prop_map(|at_ms| DaemonFault::DaemonCrash { at_ms, anchor: None })
            .boxed(),
        "socket_reset" => at
            .prop_map(|at_ms| DaemonFault::SocketReset { at_ms, anchor: None })
            .boxed(),
        "daemon_stall" => {
            let stall = (at, 50u64..=4_000)
                .prop_map(|(at_ms, for_ms)| DaemonFault::DaemonStall { at_ms, for_ms, anchor: None })
                .boxed();
            match budget_stall(timing, invocations) {
                Some(budget) => prop_oneof![3 => stall, 1 => budget].boxed(),
                None => stall,
            }
        }
        // Heartbeats for one client's request written to another's connection: with several
        // clients in flight, the ids they carry are real ones.
        "crossed_frames" => (at, 50u64..=4_000)
            .prop_map(|(at_ms, for_ms)| DaemonFault::CrossedFrames { at_ms, for_ms, anchor: None })
            .boxed(),
        "process_hang" => (at, prop_oneof![2 => 50u64..=STOP_WAIT_MS, 1 => STOP_WAIT_MS..=15_000])
            .prop_map(|(at_ms, for_ms)| DaemonFault::ProcessHang { at_ms, for_ms, anchor: None })
            .boxed(),
        // A CLI killed at once holding the start lock (a plain stale lock), one hung past a
        // launch's ready wait, and one hung past the lock wait, so others give up on it.
        "stale_lock" => (at, prop_oneof![2 => 1u64..=2_000, 1 => READY_WAIT_MS..=30_000, 1 => LOCK_WAIT_MS + 1_000..=LOCK_WAIT_MS + 10_000])
            .prop_map(|(at_ms, for_ms)| DaemonFault::StaleLock { at_ms, for_ms, anchor: None })
            .boxed(),
        // Up to the whole OAuth wait: past the SDK's default timeout half the time.
        _ => (200u64..=timing.oauth_timeout_ms)
            .prop_map(|delay_ms| DaemonFault::ApprovalDelay { delay_ms })
            .boxed(),
    }
}

/// A stale lock anchored to a restart comes with a crash at its drawn onset to cause one, and
/// waits for the restart until the span's end: restarts are otherwise rare here.
fn meeting_a_restart(lock: DaemonFault, span_ms: u64) -> Vec<DaemonFault> {
    match lock {
        DaemonFault::StaleLock { at_ms, for_ms, anchor: Some(Anchor::Recovery) } => vec![
            DaemonFault::DaemonCrash { at_ms, anchor: None },
            DaemonFault::StaleLock { at_ms: at_ms.max(span_ms), for_ms, anchor: Some(Anchor::Recovery) },
        ],
        lock => vec![lock],
    }
}

/// Which operations are on: config edits and peer starts usually; crashes, resets, stalls
/// (transport failures whose restarts meet other clients mid-request and the lifecycle
/// operations placed after them), hung daemons and CLIs (a stale start lock), slow approvals and
/// a stale peer (an edit, then a peer's start with the config it read before) now and then.
fn profile() -> impl Strategy<Value = Vec<&'static str>> {
    (
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.7),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.4),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.35),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.25),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(edit, peer, crash, approval, reset, stall, hang, stale, crossed, stale_peer)| {
            let kinds = [
                ("config_edit", edit),
                ("peer_start", peer),
                ("daemon_crash", crash),
                ("approval_delay", approval),
                ("socket_reset", reset),
                ("daemon_stall", stall),
                ("process_hang", hang),
                ("stale_lock", stale),
                ("crossed_frames", crossed),
                ("stale_peer", stale_peer),
            ];
            kinds
                .into_iter()
                .filter(|(_, on)| *on)
                .map(|(kind, _)| kind)
                .collect()
        })
}

/// How often an operation is drawn, against one for a kind that only perturbs: the config edits
/// and peer starts that make the replacement races come first; slow approvals, which keep a
/// request in flight across them; stale locks, which need a second operation to meet.
fn weight(kind: &str) -> u32 {
    match kind {
        "config_edit" | "peer_start" => 3,
        "approval_delay" | "stale_lock" => 2,
        _ => 1,
    }
}

/// The faults one drawn operation of `kind` injects.
fn operations(kind: &'static str, span_ms: u64, timing: &Timing, invocations: &[Invocation]) -> BoxedStrategy<Vec<DaemonFault>> {
    match kind {
        "stale_peer" => stale_peer(invocations),
        // A stale lock matters where a CLI takes the lock: launches and restarts.
        "stale_lock" => anchored_onset(operation(kind, span_ms, timing, invocations), 1)
            .prop_map(move |lock| meeting_a_restart(lock, span_ms))
            .boxed(),
        // Anchored less often than single-client faults: the races here need operations at the
        // times drawn around the clustered invocations.
        _ => anchored_onset(operation(kind, span_ms, timing, invocations), 4)
            .prop_map(|operation| vec![operation])
            .boxed(),
    }
}

/// A whole lifecycle scenario with the given bug switches.
pub fn scenario(bugs: DaemonBugs) -> impl Strategy<Value = DaemonScenario> {
    (profile(), timing(), workload(), 1u32..=3, 10u64..=200)
        .prop_flat_map(|(kinds, timing, invocations, pages, approval_ms)| {
            let span_ms = invocations.last().map_or(0, |i| i.at_ms) + 1_500;
            let choices: Vec<(u32, BoxedStrategy<Vec<DaemonFault>>)> = kinds
                .iter()
                .map(|kind| (weight(kind), operations(kind, span_ms, &timing, &invocations)))
                .collect();
            let faults = crate::swarm::weighted_plan(choices, 1..=4)
                .prop_map(|plan| plan.into_iter().flatten().collect::<Vec<_>>());
            let mut profile: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
            profile.insert(0, "lifecycle".to_string());
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
