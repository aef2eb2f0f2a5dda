//! Canonical daemon lifecycle scenarios (MODEL.md §2.4 "Replacing a daemon"): several clients
//! share one daemon while a config edit makes it stale, a peer swaps it, or a protocol-1 client
//! talks to a protocol-2 daemon.

use bridge_under_test::daemon::client::{Invocation, Method};
use bridge_under_test::daemon::config::PROTOCOL_VERSION;
use bridge_under_test::daemon::Timing;
use harness::daemon::faults::DaemonFault;
use harness::family::Scenario;

use crate::daemon::{compressed, daemon};

/// Invocation in lane `client` of protocol `version`.
pub fn invoke_as(client: u32, version: u64, at_ms: u64, method: Method) -> Invocation {
    Invocation {
        at_ms,
        method,
        timeout_ms: None,
        client,
        version,
    }
}

fn call(work_ms: u64) -> Method {
    Method::CallTool { work_ms }
}

/// Client A runs a 1 500 ms tool on the daemon; the user edits the config at 500 ms; client B
/// then needs the daemon at 600 ms: it drains (A's call is in flight), then stops and replaces
/// it once A's call is answered.
pub fn busy_daemon_drains() -> Scenario {
    let invocations = vec![
        invoke_as(0, PROTOCOL_VERSION, 0, call(1_500)),
        invoke_as(1, PROTOCOL_VERSION, 600, call(100)),
    ];
    let faults = vec![DaemonFault::ConfigEdit { at_ms: 500, anchor: None }];
    daemon(41, compressed(), 1, invocations, faults)
}

/// As [`busy_daemon_drains`], with a third client C that needs the daemon at 650 ms and waits
/// for the start lock B holds while draining; at 1 000 ms a peer that read the config before
/// the edit runs `daemon start`. B sees the swap mid-drain and uses the peer's daemon; C, when
/// it gets the lock, finds the peer's daemon before any drain: neither stops nor launches.
pub fn peer_replaced_before_drain() -> Scenario {
    let invocations = vec![
        invoke_as(0, PROTOCOL_VERSION, 0, call(1_500)),
        invoke_as(1, PROTOCOL_VERSION, 600, call(100)),
        invoke_as(2, PROTOCOL_VERSION, 650, call(100)),
    ];
    let faults = vec![
        DaemonFault::ConfigEdit { at_ms: 500, anchor: None },
        DaemonFault::PeerStart {
            at_ms: 1_000,
            version: PROTOCOL_VERSION,
            old_config: true,
            anchor: None,
        },
    ];
    daemon(42, compressed(), 1, invocations, faults)
}

/// As [`busy_daemon_drains`], with a peer's `daemon start` (current config) at 1 000 ms, in
/// the middle of B's drain: B must use the peer's daemon, not stop it.
pub fn peer_swaps_mid_drain() -> Scenario {
    let invocations = vec![
        invoke_as(0, PROTOCOL_VERSION, 0, call(1_500)),
        invoke_as(1, PROTOCOL_VERSION, 600, call(100)),
    ];
    let faults = vec![
        DaemonFault::ConfigEdit { at_ms: 500, anchor: None },
        DaemonFault::PeerStart {
            at_ms: 1_000,
            version: PROTOCOL_VERSION,
            old_config: false,
            anchor: None,
        },
    ];
    daemon(43, compressed(), 1, invocations, faults)
}

/// Client A's tool runs 90 s (MODEL.md timing: the ceiling is 360 s); the config is edited at
/// 1 000 ms and client B needs the daemon at 2 000 ms. The daemon stays busy past the 60 s
/// drain timeout: B refuses loudly and leaves it running; A's call completes.
pub fn never_draining_daemon() -> Scenario {
    let invocations = vec![
        invoke_as(0, PROTOCOL_VERSION, 0, call(90_000)),
        invoke_as(1, PROTOCOL_VERSION, 2_000, call(100)),
    ];
    let faults = vec![DaemonFault::ConfigEdit { at_ms: 1_000, anchor: None }];
    daemon(44, Timing::default(), 1, invocations, faults)
}

/// A protocol-2 client launches the daemon; a protocol-1 client then runs a 400 ms tool on it:
/// it asked for no frames and gets one plain reply.
pub fn v1_client_on_v2_daemon() -> Scenario {
    let invocations = vec![
        invoke_as(0, PROTOCOL_VERSION, 0, Method::ListTools),
        invoke_as(1, 1, 500, call(400)),
    ];
    daemon(45, compressed(), 1, invocations, Vec::new())
}
