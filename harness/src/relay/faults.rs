//! The relay family's faults: plain data, applied between simulation steps by one function that
//! also records a `fault.injected` event. "Smaller" means milder: fewer faults, shorter windows.

use std::sync::Arc;

use bridge_under_test::emit;
use bridge_under_test::events::{host, kind};
use bridge_under_test::net::jsonrpc::id_key;
use bridge_under_test::relay::knobs::{lock, SharedKnobs};
use bridge_under_test::relay::client::ClientScript;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::family::Phase;

/// One fault. Per-call faults name a script step; windowed faults have an onset and a length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fault", rename_all = "snake_case", deny_unknown_fields)]
pub enum RelayFault {
    /// The reply to step `step` is sent twice: an at-least-once delivery layer in front of the
    /// relayer.
    DuplicateReply { step: usize },
    /// The reply to step `step` reaches the stream `delay_ms` after the tool finished: a backed-up
    /// queue between the worker and the stream.
    LateReply { step: usize, delay_ms: u64 },
    /// The relayer executes step `step` but never sends its reply: a reply lost in a proxy.
    SwallowReply { step: usize },
    /// Step `step`'s tool ignores its own deadline and runs `run_ms`: a wedged worker.
    SlowTool { step: usize, run_ms: u64 },
    /// Every POST is answered `status` for a while: 401 a revoked token, 429 rate limiting,
    /// 5xx a failing deployment.
    PostReject { at_ms: u64, for_ms: u64, status: u16 },
    /// Keep-alives keep flowing but every reply is dropped: a heartbeating-but-silent relayer.
    WithholdReplies { at_ms: u64, for_ms: u64 },
    /// The streams open at onset carry no bytes at all, not even keep-alives, until the window
    /// ends: a stalled proxy connection (new connections get through).
    StreamStall { at_ms: u64, for_ms: u64 },
    /// Every open stream ends: a load balancer cutting long-lived connections.
    StreamEof { at_ms: u64 },
    /// Every open stream ends, and for a while every new stream is dropped as soon as it is
    /// accepted, before its endpoint event or right after it: a proxy that accepts connections
    /// and cuts them, again and again.
    StreamFlap { at_ms: u64, for_ms: u64, after_endpoint: bool },
    /// The relayer restarts: its sessions are lost, POSTs to them answer 404.
    RelayerBounce { at_ms: u64 },
    /// The relayer forgets every open session while their streams stay up, keep-alives and
    /// all: a request naming one is answered 404, as by a server that expired it, or behind a
    /// load balancer that lost its sticky route. Only the bridge's reaction to a 404 (MODEL.md
    /// 1.4: a reconnect) brings it back; no stream end tells it.
    SessionLost { at_ms: u64 },
    /// The network between bridge and relayer holds every message, then delivers them: a
    /// partition that heals.
    LinkHold { at_ms: u64, for_ms: u64 },
    /// The client closes stdin mid-call: the IDE quit.
    StdinEof { at_ms: u64 },
    /// For a while every POST's connection is reset unanswered, while the streams stay up: a
    /// proxy or load balancer dropping connections, before the relayer read the POST (nothing
    /// runs) or after it admitted it (`after_admit`: it runs; only its answer is lost).
    PostReset { at_ms: u64, for_ms: u64, after_admit: bool },
    /// Not a fault but traffic a real server starts: a notification or a request to the client,
    /// sent on every open session's stream (the standard transports: a Streamable HTTP session's
    /// GET stream, an HTTP+SSE session's stream; the relay API has none). Live cases draw it.
    ServerMessage { at_ms: u64, message: ServerMessage },
}

/// What a server sends a client unasked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerMessage {
    /// `notifications/message` (the server declares `logging`).
    Log,
    /// `notifications/tools/list_changed` (the server declares `tools.listChanged`).
    ToolsListChanged,
    /// A `ping` request: the client answers it.
    Ping,
    /// A `roots/list` request (the live client declares `roots`): the client answers its roots.
    RootsList,
}

pub use bridge_under_test::relay::knobs::SERVER_ID_META;

impl ServerMessage {
    /// The JSON-RPC message sent at `at_ms` (a request's id is `srv-<at_ms>`).
    /// [`Self::message`], with an id no earlier note of `sent` carries: two requests of one
    /// millisecond would otherwise share one, which JSON-RPC forbids (sdk soak,
    /// `v1.sdk.none.89f3376db31cf524`: a `ping` and a `roots/list` both `srv-4172`, and rmcp's
    /// answer to the ping stood for the client's answer to the roots/list).
    pub fn message_among(self, at_ms: u64, sent: &[serde_json::Value]) -> serde_json::Value {
        let mut msg = self.message(at_ms);
        let Some(base) = msg.get("id").and_then(serde_json::Value::as_str).map(str::to_string) else { return msg };
        let taken = |id: &str| sent.iter().any(|note| note.get("id").and_then(serde_json::Value::as_str) == Some(id));
        let id = (2..).map(|n| format!("{base}-{n}")).find(|id| !taken(id)).filter(|_| taken(&base)).unwrap_or(base);
        msg["id"] = serde_json::json!(id);
        msg["params"]["_meta"][SERVER_ID_META] = serde_json::json!(id);
        msg
    }

    pub fn message(self, at_ms: u64) -> serde_json::Value {
        use serde_json::json;
        let id = format!("srv-{at_ms}");
        match self {
            Self::Log => json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "logger": "mock", "data": format!("note at {at_ms} ms")}}),
            Self::ToolsListChanged => json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            Self::Ping => json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": {"_meta": {SERVER_ID_META: id}}}),
            Self::RootsList => json!({"jsonrpc": "2.0", "id": id, "method": "roots/list", "params": {"_meta": {SERVER_ID_META: id}}}),
        }
    }
}

/// The kinds, for swarm profiles (which kinds a seed turns on).
pub const KINDS: &[&str] = &[
    "duplicate_reply",
    "late_reply",
    "swallow_reply",
    "slow_tool",
    "post_reject",
    "withhold_replies",
    "stream_stall",
    "stream_eof",
    "stream_flap",
    "relayer_bounce",
    "link_hold",
    "stdin_eof",
    "post_reset",
    // Last: the kinds before it are what the sdk families draw ([`STREAMABLE_KINDS`]).
    "session_lost",
];

/// The kinds a Streamable HTTP family draws: all but `session_lost` (over Streamable HTTP a 404
/// ends the session: the client "MUST start a new session", MCP 2025-11-25 transports, so a
/// server that forgot a session yet writes its answers on open streams is outside that
/// transport's contract; it is the relay API's fault, MODEL.md 1.2).
pub const STREAMABLE_KINDS: &[&str] = KINDS.split_last().unwrap().1;

impl RelayFault {
    /// The script step a per-call fault names (None for a windowed fault or an instant).
    pub fn step_mut(&mut self) -> Option<&mut usize> {
        match self {
            Self::DuplicateReply { step } | Self::LateReply { step, .. } | Self::SwallowReply { step } | Self::SlowTool { step, .. } => Some(step),
            _ => None,
        }
    }

    /// The kind's name, as in [`KINDS`].
    pub fn name(&self) -> &'static str {
        match self {
            Self::DuplicateReply { .. } => "duplicate_reply",
            Self::LateReply { .. } => "late_reply",
            Self::SwallowReply { .. } => "swallow_reply",
            Self::SlowTool { .. } => "slow_tool",
            Self::PostReject { .. } => "post_reject",
            Self::WithholdReplies { .. } => "withhold_replies",
            Self::StreamStall { .. } => "stream_stall",
            Self::StreamEof { .. } => "stream_eof",
            Self::StreamFlap { .. } => "stream_flap",
            Self::RelayerBounce { .. } => "relayer_bounce",
            Self::SessionLost { .. } => "session_lost",
            Self::LinkHold { .. } => "link_hold",
            Self::StdinEof { .. } => "stdin_eof",
            Self::PostReset { .. } => "post_reset",
            Self::ServerMessage { .. } => "server_message",
        }
    }

    /// When it starts and, for windowed faults, when it ends. Per-call faults are armed when
    /// their step is sent.
    pub fn window(&self, script: &ClientScript) -> (u64, Option<u64>) {
        let step_at = |step: &usize| script.steps.get(*step).map_or(0, |s| s.at_ms);
        match self {
            Self::DuplicateReply { step }
            | Self::LateReply { step, .. }
            | Self::SwallowReply { step }
            | Self::SlowTool { step, .. } => (step_at(step), None),
            Self::PostReject { at_ms, for_ms, .. }
            | Self::WithholdReplies { at_ms, for_ms }
            | Self::StreamStall { at_ms, for_ms }
            | Self::LinkHold { at_ms, for_ms }
            | Self::StreamFlap { at_ms, for_ms, .. }
            | Self::PostReset { at_ms, for_ms, .. } => (*at_ms, Some(at_ms + for_ms)),
            Self::StreamEof { at_ms }
            | Self::RelayerBounce { at_ms }
            | Self::SessionLost { at_ms }
            | Self::StdinEof { at_ms }
            | Self::ServerMessage { at_ms, .. } => (*at_ms, None),
        }
    }
}

/// What faults act on.
pub struct Targets<'a> {
    pub knobs: &'a SharedKnobs,
    pub close_stdin: &'a Arc<Notify>,
    pub script: &'a ClientScript,
}

/// What a fault does to the network itself, which each engine carries out its own way (turmoil's
/// bounce and hold in the simulation; a restarted server and held connections live).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkAction {
    /// The relayer restarts: its connections and sessions are lost.
    Bounce,
    /// Messages between bridge and relayer are held back, then released.
    Hold,
    Release,
}

/// Apply one phase of a fault to the simulation, recording it.
pub fn apply(fault: &RelayFault, phase: Phase, sim: &mut turmoil::Sim<'_>, targets: &Targets<'_>) {
    match act(fault, phase, targets) {
        Some(NetworkAction::Bounce) => sim.bounce(host::RELAYER),
        Some(NetworkAction::Hold) => sim.hold(host::BRIDGE, host::RELAYER),
        Some(NetworkAction::Release) => sim.release(host::BRIDGE, host::RELAYER),
        None => {}
    }
}

/// Record one phase of a fault and set the mock knobs it turns; the network action it needs, for
/// the engine to carry out.
pub fn act(fault: &RelayFault, phase: Phase, targets: &Targets<'_>) -> Option<NetworkAction> {
    let detail = serde_json::to_string(fault).unwrap_or_default();
    let phase_name = if phase == Phase::Start { "start" } else { "end" };
    emit!(kind::FAULT_INJECTED, fault = fault.name(), phase = phase_name, detail = %detail);
    let on = phase == Phase::Start;
    let wire_id = |step: &usize| {
        targets.script.steps.get(*step).map(|s| id_key(&s.wire_id())).unwrap_or_default()
    };
    let mut knobs = lock(targets.knobs);
    let mut network = None;
    match fault {
        RelayFault::DuplicateReply { step } => {
            knobs.duplicate_ids.insert(wire_id(step));
        }
        RelayFault::LateReply { step, delay_ms } => {
            knobs.late_ids.insert(wire_id(step), *delay_ms);
        }
        RelayFault::SwallowReply { step } => {
            knobs.swallow_ids.insert(wire_id(step));
        }
        RelayFault::SlowTool { step, run_ms } => {
            knobs.slow_ids.insert(wire_id(step), *run_ms);
        }
        RelayFault::PostReject { status, .. } => knobs.reject_status = on.then_some(*status),
        RelayFault::WithholdReplies { .. } => knobs.withhold_replies = on,
        RelayFault::StreamStall { at_ms, for_ms } => knobs.set_stall((*at_ms, *for_ms), on),
        RelayFault::StreamEof { .. } => knobs.eof_epoch += 1,
        RelayFault::StreamFlap { after_endpoint, .. } => {
            knobs.flap = on.then_some(*after_endpoint);
            if on {
                knobs.eof_epoch += 1;
            }
        }
        RelayFault::RelayerBounce { .. } => network = Some(NetworkAction::Bounce),
        RelayFault::SessionLost { .. } => knobs.lost_epoch += 1,
        RelayFault::LinkHold { .. } if on => network = Some(NetworkAction::Hold),
        RelayFault::LinkHold { .. } => network = Some(NetworkAction::Release),
        RelayFault::StdinEof { .. } => targets.close_stdin.notify_one(),
        RelayFault::PostReset { after_admit, .. } => knobs.reset_posts = on.then_some(*after_admit),
        RelayFault::ServerMessage { at_ms, message } => {
            let note = message.message_among(*at_ms, &knobs.server_notes);
            knobs.push_server_note(note);
        }
    }
    knobs.notify();
    network
}

/// Stop injecting and repair everything: the heal phase before liveness is judged.
pub fn heal(sim: &mut turmoil::Sim<'_>, knobs: &SharedKnobs) {
    heal_knobs(knobs);
    sim.release(host::BRIDGE, host::RELAYER);
}

/// The mock's part of [`heal`]: clear every knob a window set (the engine releases the network).
pub fn heal_knobs(knobs: &SharedKnobs) {
    let mut knobs = lock(knobs);
    knobs.reject_status = None;
    knobs.withhold_replies = false;
    knobs.flap = None;
    knobs.reset_posts = None;
    knobs.stalling.clear();
    knobs.notify();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_requests_of_one_millisecond_get_distinct_ids() {
        let ping = ServerMessage::Ping.message_among(4_172, &[]);
        assert_eq!(ping["id"], "srv-4172");
        let roots = ServerMessage::RootsList.message_among(4_172, std::slice::from_ref(&ping));
        assert_eq!(roots["id"], "srv-4172-2");
        assert_eq!(roots["params"]["_meta"][SERVER_ID_META], "srv-4172-2");
        let third = ServerMessage::Ping.message_among(4_172, &[ping.clone(), roots]);
        assert_eq!(third["id"], "srv-4172-3");
        // A notification has no id to share.
        assert!(ServerMessage::Log.message_among(4_172, &[ping]).get("id").is_none());
    }

    #[test]
    fn faults_round_trip_through_json() {
        let faults = vec![
            RelayFault::SwallowReply { step: 3 },
            RelayFault::PostReject { at_ms: 10, for_ms: 20, status: 429 },
            RelayFault::StdinEof { at_ms: 5 },
        ];
        let text = serde_json::to_string(&faults).unwrap();
        assert!(text.contains(r#"{"fault":"swallow_reply","step":3}"#));
        let back: Vec<RelayFault> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, faults);
        for fault in &faults {
            assert!(KINDS.contains(&fault.name()));
        }
    }

    #[test]
    fn windows_follow_the_script() {
        let script = ClientScript {
            steps: vec![bridge_under_test::relay::client::Step::new(700, 1, bridge_under_test::relay::client::Op::Ping)],
            end_at_ms: 0,
            ..ClientScript::default()
        };
        assert_eq!(RelayFault::SwallowReply { step: 0 }.window(&script), (700, None));
        let hold = RelayFault::LinkHold { at_ms: 100, for_ms: 50 };
        assert_eq!(hold.window(&script), (100, Some(150)));
    }
}
