//! Canonical channel scenarios, reproducing the original project's own tests: TTL boundaries
//! for permissions and approvals, close(), the lazy sweeper, reads between expiry and the next
//! sweep, owner-only replies and the per-map cap. Times are virtual; one minute is 60 000 ms.

use bridge_under_test::channel::agent::{AgentOp, AgentScript, AgentStep};
use bridge_under_test::channel::gateway::{GatewayEvent, GatewayStep};
use bridge_under_test::channel::ChannelBugs;
use harness::channel::faults::ChannelFault;
use harness::channel::{strategy, ChannelScenario, Limits, SESSION};
use harness::family::{Scenario, SimParams};

/// One minute of virtual time.
pub const MIN: u64 = 60_000;

/// A channel scenario with the family's tick, no latency and a horizon past every expiry.
pub fn channel(
    seed: u64,
    agent: Vec<AgentStep>,
    gateway: Vec<GatewayStep>,
    faults: Vec<ChannelFault>,
) -> Scenario {
    let end_at_ms = strategy::end_at_ms(&agent, &gateway, &faults);
    let agent = AgentScript {
        steps: agent,
        read_every_ms: None,
        end_at_ms,
    };
    let sim = SimParams {
        tick_ms: strategy::TICK_MS,
        latency_max_ms: 0,
        random_order: false,
        horizon_ms: strategy::horizon_ms(&agent),
    };
    let channel = ChannelScenario {
        bugs: ChannelBugs::default(),
        limits: Limits::default(),
        agent,
        gateway,
        faults,
        profile: Vec::new(),
    };
    Scenario {
        seed,
        sim,
        family: Box::new(channel),
    }
}

/// The agent asks permission for `request_id`.
pub fn request(at_ms: u64, request_id: &str) -> AgentStep {
    let op = AgentOp::PermissionRequest {
        request_id: request_id.into(),
        tool_name: "Bash".into(),
    };
    AgentStep { at_ms, op }
}

/// The agent reads both pending lists.
pub fn read(at_ms: u64) -> AgentStep {
    AgentStep {
        at_ms,
        op: AgentOp::ListPending,
    }
}

/// The gateway asks for an approval.
pub fn approval(at_ms: u64, id: &str, created: bool, expires_in_ms: Option<i64>) -> GatewayStep {
    let event = GatewayEvent::ApprovalRequested {
        id: id.into(),
        plugin: false,
        created,
        expires_in_ms,
    };
    GatewayStep { at_ms, event }
}

/// Operator chat in the bridge's session.
pub fn say(at_ms: u64, text: &str, owner: bool) -> GatewayStep {
    let event = GatewayEvent::Message {
        session: SESSION.into(),
        text: text.into(),
        owner,
    };
    GatewayStep { at_ms, event }
}

/// A permission nobody answers: present after 5 min, gone 60 min later (its 1 h TTL).
pub fn permission_ttl_boundary() -> Scenario {
    channel(
        11,
        vec![request(10_000, "abcde"), read(5 * MIN), read(65 * MIN)],
        vec![],
        vec![],
    )
}

/// An approval with `expiresAtMs` 10 min ahead: present at 5 min, gone at 11.
pub fn approval_expires_at() -> Scenario {
    let gateway = vec![approval(10_000, "appr-1", true, Some(10 * MIN as i64))];
    channel(12, vec![read(5 * MIN), read(11 * MIN)], gateway, vec![])
}

/// Approvals with only `createdAtMs` and with neither: the 30 min default, anchored at
/// tracking; present at 29 min, gone by 35.
pub fn approval_fallback_ttl() -> Scenario {
    let gateway = vec![
        approval(10_000, "appr-created", true, None),
        approval(10_000, "appr-bare", false, None),
    ];
    channel(13, vec![read(29 * MIN), read(35 * MIN)], gateway, vec![])
}

/// `close()` with entries in both maps clears them and leaves no timer; a second close is a
/// no-op.
pub fn close_clears() -> Scenario {
    let gateway = vec![approval(20_000, "appr-1", true, None)];
    let faults = vec![
        ChannelFault::Close { at_ms: 10 * MIN },
        ChannelFault::Close { at_ms: 12 * MIN },
    ];
    channel(
        14,
        vec![request(10_000, "abcde"), read(11 * MIN)],
        gateway,
        faults,
    )
}

/// A permission request (and an approval) after close is ignored: nothing inserted, no timer.
pub fn request_after_close() -> Scenario {
    let faults = vec![ChannelFault::Close { at_ms: MIN }];
    channel(
        15,
        vec![request(2 * MIN, "abcde")],
        vec![approval(3 * MIN, "appr-1", true, None)],
        faults,
    )
}

/// An idle bridge has no sweeper, even after 20 min; the first entry starts it.
pub fn no_sweeper_before_first_entry() -> Scenario {
    channel(16, vec![request(20 * MIN, "abcde")], vec![], vec![])
}

/// An approval sent at 10 s expiring 7.5 min later, between the sweeps at about 5 and 10 min
/// after its tracking: a read at 8 min does not list it although the sweeper has not removed it
/// yet. (The gateway's events before the bridge connects, at about 2 s, are lost by design.)
pub fn read_between_expiry_and_tick() -> Scenario {
    let gateway = vec![approval(
        10_000,
        "appr-1",
        true,
        Some(7 * MIN as i64 + 30_000),
    )];
    channel(17, vec![read(7 * MIN), read(8 * MIN)], gateway, vec![])
}

/// The sweeper stops when both maps drain (an owner reply) and restarts on the next entry.
pub fn sweeper_restarts() -> Scenario {
    let agent = vec![request(10_000, "abcde"), request(20 * MIN, "fghij")];
    let gateway = vec![say(MIN, "yes abcde", true), say(21 * MIN, "NO FGHIJ", true)];
    channel(18, agent, gateway, vec![])
}

/// A non-owner says `yes`, then the owner says `no`: one decision, the owner's deny.
pub fn owner_only_decision() -> Scenario {
    let gateway = vec![
        say(MIN, "yes abcde", false),
        say(2 * MIN, "no abcde", true),
        say(3 * MIN, "yes abcde", true),
    ];
    channel(19, vec![request(10_000, "abcde")], gateway, vec![])
}

/// A burst of 10 approvals into a map capped at 4: the oldest are evicted first.
pub fn burst_over_cap() -> Scenario {
    let faults = vec![ChannelFault::Burst {
        at_ms: MIN,
        count: 10,
        approvals: true,
    }];
    let mut scenario = channel(20, vec![read(2 * MIN)], vec![], faults);
    if let Some(channel) = scenario.family.downcast_mut::<ChannelScenario>() {
        channel.limits = Limits {
            pending_cap: 4,
            queue_limit: 6,
        };
    }
    scenario
}

/// Every line form a non-conforming peer may write ([`strategy::raw_line`]), three of each
/// (each form's variants), between a permission request and reads: each is owed the JSON-RPC
/// 2.0 error it calls for, or silence, and none disturbs the pending maps.
pub fn every_line_form() -> Scenario {
    let mut agent = vec![request(0, "abcde")];
    let mut n = 0;
    for form in 0..strategy::LINE_FORMS {
        for _ in 0..3 {
            let line = strategy::raw_line(form, n);
            agent.push(AgentStep { at_ms: 1_000 + n * 1_000, op: AgentOp::Line { line } });
            n += 1;
        }
    }
    agent.push(read(1_000 + n * 1_000));
    channel(13, agent, vec![say(120_000, "yes abcde", true)], Vec::new())
}
