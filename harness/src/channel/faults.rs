//! The channel family's faults: plain data, applied between simulation steps by one function
//! that also records a `fault.injected` event. "Smaller" means milder: fewer faults, shorter
//! windows, smaller bursts, later onset.

use std::rc::Rc;

use bridge_under_test::channel::agent::AgentKnobs;
use bridge_under_test::channel::gateway::{
    ExpiryOverride, GatewayEvent, GatewayKnobs, GatewayStep,
};
use super::strategy::id_from_index;
use bridge_under_test::emit;
use bridge_under_test::events::kind;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::family::Phase;

/// An absent or absurd `expiresAtMs`, as gateways have been seen to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Absurd {
    /// The field is missing: the bridge's default TTL applies.
    Absent,
    /// `0`: the epoch, long past.
    Zero,
    /// A negative number.
    Negative,
    /// The year 9999: must be clamped to the permission TTL.
    FarFuture,
    /// A day ago on the gateway's clock.
    LongPast,
    /// Not a number (`"soon"`): treated as absent.
    NotANumber,
}

impl Absurd {
    fn into_override(self) -> ExpiryOverride {
        match self {
            Absurd::Absent => ExpiryOverride::Absent,
            Absurd::Zero => ExpiryOverride::Absolute(0),
            Absurd::Negative => ExpiryOverride::Absolute(-86_400_000),
            Absurd::FarFuture => ExpiryOverride::Absolute(253_402_300_799_000),
            Absurd::LongPast => ExpiryOverride::Relative(-86_400_000),
            Absurd::NotANumber => ExpiryOverride::Text,
        }
    }
}

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case", deny_unknown_fields)]
pub enum ChannelFault {
    /// The gateway drops its connection and refuses new ones for a window; whatever it sends
    /// meanwhile (resolved frames, operator replies) is lost: a gateway restart or network blip.
    GatewayDown { at_ms: u64, for_ms: u64 },
    /// Gateway step `step` is sent again `delay_ms` later, re-stamped: an at-least-once event
    /// bus, or a gateway replaying recent events after a reconnect.
    Rebroadcast { step: usize, delay_ms: u64 },
    /// `count` requests arrive at once, approvals from the gateway or permission requests from
    /// the agent: a runaway agent loop or a flood of exec approvals inside one sweep window.
    Burst {
        at_ms: u64,
        count: usize,
        approvals: bool,
    },
    /// The host calls `close()` while the agent and the gateway keep sending: a channel shut
    /// down under load.
    Close { at_ms: u64 },
    /// The gateway's clock steps by `offset_ms` from `at_ms` on: skew or an NTP step between
    /// machines.
    ClockOffset { at_ms: u64, offset_ms: i64 },
    /// Gateway step `step`'s `expiresAtMs` is absent or absurd: a gateway bug or an old
    /// gateway version.
    AbsurdExpiry { step: usize, value: Absurd },
}

/// The kinds, for swarm profiles.
pub const KINDS: &[&str] = &[
    "gateway_down",
    "rebroadcast",
    "burst",
    "close",
    "clock_offset",
    "absurd_expiry",
];

impl ChannelFault {
    /// The kind's name, as in [`KINDS`].
    pub fn name(&self) -> &'static str {
        match self {
            Self::GatewayDown { .. } => "gateway_down",
            Self::Rebroadcast { .. } => "rebroadcast",
            Self::Burst { .. } => "burst",
            Self::Close { .. } => "close",
            Self::ClockOffset { .. } => "clock_offset",
            Self::AbsurdExpiry { .. } => "absurd_expiry",
        }
    }

    /// When it starts and, for windowed faults, when it ends. An expiry override is armed at
    /// the start, before its step can be sent.
    pub fn window(&self, gateway: &[GatewayStep]) -> (u64, Option<u64>) {
        let step_at = |step: &usize| gateway.get(*step).map_or(0, |s| s.at_ms);
        match self {
            Self::GatewayDown { at_ms, for_ms } => (*at_ms, Some(at_ms + for_ms)),
            Self::Rebroadcast { step, delay_ms } => (step_at(step) + delay_ms, None),
            Self::Burst { at_ms, .. } | Self::Close { at_ms } | Self::ClockOffset { at_ms, .. } => {
                (*at_ms, None)
            }
            Self::AbsurdExpiry { .. } => (0, None),
        }
    }
}

/// What faults act on.
pub struct Targets<'a> {
    pub gateway: &'a Rc<GatewayKnobs>,
    pub agent: &'a Rc<AgentKnobs>,
    pub close: &'a Rc<Notify>,
    pub steps: &'a [GatewayStep],
    /// The fault's index in the plan (burst ids are unique per fault).
    pub index: usize,
}

/// The permission ids of burst `index`: far from the workload's own ids.
pub fn burst_ids(index: usize, count: usize) -> Vec<String> {
    (0..count)
        .map(|n| id_from_index(1_000_000 + 100_000 * index as u64 + n as u64))
        .collect()
}

/// Apply one phase of a fault to the simulation, recording it.
pub fn apply(fault: &ChannelFault, phase: Phase, targets: &Targets<'_>) {
    let detail = serde_json::to_string(fault).unwrap_or_default();
    let phase_name = if phase == Phase::Start {
        "start"
    } else {
        "end"
    };
    emit!(kind::FAULT_INJECTED, fault = fault.name(), phase = phase_name, detail = %detail);
    let gateway = targets.gateway;
    match fault {
        ChannelFault::GatewayDown { .. } => gateway.down.set(phase == Phase::Start),
        ChannelFault::Rebroadcast { step, .. } => {
            if let Some(step) = targets.steps.get(*step) {
                gateway.inject.borrow_mut().push_back(step.event.clone());
            }
        }
        ChannelFault::Burst {
            count,
            approvals: true,
            ..
        } => {
            let mut inject = gateway.inject.borrow_mut();
            for n in 0..*count {
                let id = format!("burst-{}-{n}", targets.index);
                let event = GatewayEvent::ApprovalRequested {
                    id,
                    plugin: false,
                    created: true,
                    expires_in_ms: None,
                };
                inject.push_back(event);
            }
        }
        ChannelFault::Burst {
            count,
            approvals: false,
            ..
        } => {
            targets
                .agent
                .bursts
                .borrow_mut()
                .push_back(burst_ids(targets.index, *count));
            targets.agent.changed.notify_waiters();
        }
        ChannelFault::Close { .. } => targets.close.notify_one(),
        ChannelFault::ClockOffset { offset_ms, .. } => gateway.offset_ms.set(*offset_ms),
        ChannelFault::AbsurdExpiry { step, value } => {
            gateway
                .overrides
                .borrow_mut()
                .insert(*step, value.into_override());
        }
    }
    gateway.changed.notify_waiters();
}

/// Stop injecting and repair everything: the gateway comes back up.
pub fn heal(gateway: &GatewayKnobs) {
    gateway.down.set(false);
    gateway.changed.notify_waiters();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_round_trip_through_json() {
        let faults = vec![
            ChannelFault::GatewayDown {
                at_ms: 10,
                for_ms: 20,
            },
            ChannelFault::AbsurdExpiry {
                step: 2,
                value: Absurd::FarFuture,
            },
            ChannelFault::ClockOffset {
                at_ms: 5,
                offset_ms: -7_200_000,
            },
        ];
        let text = serde_json::to_string(&faults).unwrap();
        assert!(
            text.contains(r#"{"fault":"gateway_down","at_ms":10,"for_ms":20}"#),
            "{text}"
        );
        let back: Vec<ChannelFault> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, faults);
        for fault in &faults {
            assert!(KINDS.contains(&fault.name()));
        }
    }

    #[test]
    fn windows_and_burst_ids() {
        let steps = vec![GatewayStep {
            at_ms: 700,
            event: GatewayEvent::ApprovalResolved {
                id: "a".into(),
                plugin: false,
            },
        }];
        assert_eq!(
            ChannelFault::Rebroadcast {
                step: 0,
                delay_ms: 50
            }
            .window(&steps),
            (750, None)
        );
        assert_eq!(
            ChannelFault::GatewayDown {
                at_ms: 1,
                for_ms: 2
            }
            .window(&steps),
            (1, Some(3))
        );
        let ids = burst_ids(1, 3);
        assert_eq!(ids.len(), 3);
        assert_ne!(ids[0], burst_ids(2, 1)[0]);
    }
}
