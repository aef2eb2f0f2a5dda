//! Canonical daemon scenarios reproducing the original project's proof runs (MODEL.md §2).

use bridge_under_test::daemon::client::{Invocation, Method};
use bridge_under_test::daemon::{DaemonBugs, Timing};
use harness::daemon::faults::DaemonFault;
use harness::daemon::DaemonScenario;
use harness::family::Scenario;

/// A daemon scenario: the family's tick and horizon, the user approving after 50 ms unless a
/// fault says otherwise.
pub fn daemon(
    seed: u64,
    timing: Timing,
    pages: u32,
    invocations: Vec<Invocation>,
    faults: Vec<DaemonFault>,
) -> Scenario {
    let scenario = DaemonScenario {
        bugs: DaemonBugs::default(),
        timing,
        pages,
        approval_ms: 50,
        invocations,
        faults,
        profile: Vec::new(),
    };
    harness::daemon::scenario(seed, scenario, false)
}

pub fn invoke(at_ms: u64, method: Method, timeout_ms: Option<u64>) -> Invocation {
    Invocation {
        at_ms,
        method,
        timeout_ms,
        client: 0,
        version: bridge_under_test::daemon::config::PROTOCOL_VERSION,
    }
}

/// Seconds instead of minutes: OAuth may take 2 000 ms, the SDK default is 1 000 ms.
pub fn compressed() -> Timing {
    Timing {
        oauth_timeout_ms: 2_000,
        sdk_request_timeout_ms: 1_000,
        daemon_timeout_ms: 1_000,
    }
}

/// An OAuth wait (the user approves 150 ms after the prompt), then three pages each 300 ms
/// late, under a 400 ms deadline: the listing takes over a second and resolves with one
/// execution, no replay, no relaunch.
pub fn oauth_then_delayed_pages() -> Scenario {
    let faults = vec![
        DaemonFault::ApprovalDelay { delay_ms: 150 },
        DaemonFault::PageDelay {
            page: 1,
            delay_ms: 300,
        },
        DaemonFault::PageDelay {
            page: 2,
            delay_ms: 300,
        },
        DaemonFault::PageDelay {
            page: 3,
            delay_ms: 300,
        },
    ];
    daemon(
        11,
        Timing::default(),
        3,
        vec![invoke(0, Method::ListTools, Some(400))],
        faults,
    )
}

/// A 120 ms deadline with 360 ms of work: frames every 40 ms carry it to success.
pub fn short_deadline_long_work() -> Scenario {
    let invocation = invoke(0, Method::CallTool { work_ms: 360 }, Some(120));
    daemon(12, Timing::default(), 1, vec![invocation], Vec::new())
}

/// A 30 ms deadline: the first frame leaves at dispatch, before any 10 ms interval elapses.
pub fn tiny_deadline() -> Scenario {
    let invocation = invoke(0, Method::CallTool { work_ms: 200 }, Some(30));
    daemon(13, compressed(), 1, vec![invocation], Vec::new())
}

/// The daemon's event loop stops writing for two seconds in the middle of a listing: the
/// client gives up after its 400 ms deadline, replaces the daemon and retries.
pub fn stalled_daemon() -> Scenario {
    let faults = vec![
        DaemonFault::PageDelay {
            page: 1,
            delay_ms: 300,
        },
        DaemonFault::DaemonStall {
            at_ms: 450,
            for_ms: 2_000,
            anchor: None,
        },
    ];
    daemon(
        14,
        Timing::default(),
        2,
        vec![invoke(0, Method::ListTools, Some(400))],
        faults,
    )
}

/// As [`stalled_daemon`] without the slow first page: a 1 000 ms stall whose onset waits for
/// the moment the MCP server has answered page 1 of 3 with a next cursor, so the daemon stalls
/// between pages, a window one tick wide. The client's 400 ms idle budget runs out; it
/// replaces the daemon and retries after the stall.
pub fn stalled_between_pages() -> Scenario {
    let faults = vec![DaemonFault::DaemonStall {
        at_ms: 0,
        for_ms: 1_000,
        anchor: Some(harness::daemon::faults::Anchor::BetweenPages),
    }];
    daemon(
        14,
        Timing::default(),
        3,
        vec![invoke(0, Method::ListTools, Some(400))],
        faults,
    )
}

/// From 100 ms for 600 ms every progress frame the daemon writes carries another request's id:
/// the client's idle budget (400 ms) is re-armed by none of them while two pages take 300 ms
/// each, so it gives up, replaces the daemon and retries after the window.
pub fn crossed_frames() -> Scenario {
    let faults = vec![
        DaemonFault::PageDelay {
            page: 1,
            delay_ms: 300,
        },
        DaemonFault::PageDelay {
            page: 2,
            delay_ms: 300,
        },
        DaemonFault::CrossedFrames {
            at_ms: 100,
            for_ms: 600,
            anchor: None,
        },
    ];
    daemon(
        19,
        Timing::default(),
        2,
        vec![invoke(0, Method::ListTools, Some(400))],
        faults,
    )
}

/// Two `callTool`s 1 s apart against a daemon that keeps each connection open 5 s after its
/// response: each must settle on its response, not on the connection's end.
pub fn kept_open() -> Scenario {
    let invocations = vec![
        invoke(0, Method::CallTool { work_ms: 50 }, Some(400)),
        invoke(1_000, Method::CallTool { work_ms: 50 }, Some(400)),
    ];
    daemon(23, Timing::default(), 1, invocations, vec![DaemonFault::KeepOpen { hold_ms: 5_000 }])
}

/// Cursors `page-2, page-3, page-2`: the listing ends with a repeated-cursor error after
/// exactly three requests.
pub fn repeated_cursor() -> Scenario {
    let faults = vec![DaemonFault::RepeatedCursor { page: 3 }];
    daemon(
        15,
        Timing::default(),
        5,
        vec![invoke(0, Method::ListTools, Some(400))],
        faults,
    )
}

/// `method` (an upstream MCP method) is wedged; `invocation` calls it and must end with
/// `operation_timeout` at the ceiling (2 000 + 500 ms).
pub fn wedged(method: &str, invocation: Method) -> Scenario {
    let faults = vec![DaemonFault::WedgedMethod {
        method: method.to_string(),
    }];
    daemon(
        16,
        compressed(),
        1,
        vec![invoke(0, invocation, Some(500))],
        faults,
    )
}

/// The user approves after 1 500 ms; listTools gives no timeout, so OAuth may take 2 000 ms,
/// longer than the SDK's 1 000 ms default.
pub fn slow_approval() -> Scenario {
    let faults = vec![DaemonFault::ApprovalDelay { delay_ms: 1_500 }];
    daemon(
        17,
        compressed(),
        1,
        vec![invoke(0, Method::ListTools, None)],
        faults,
    )
}

/// The user never approves: listTools ends with `operation_timeout` at its 400 ms deadline,
/// final: one prompt, no restart.
pub fn approval_never() -> Scenario {
    let faults = vec![DaemonFault::ApprovalNever];
    daemon(
        18,
        Timing::default(),
        1,
        vec![invoke(0, Method::ListTools, Some(400))],
        faults,
    )
}
