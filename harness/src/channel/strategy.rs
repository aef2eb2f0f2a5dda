//! proptest strategies for channel scenarios. Swarm testing: each case first draws which fault
//! kinds are on and the limits (production or compressed), then a workload (the agent's
//! permission requests with an operator each, the gateway's approvals, waits, reads, chatter)
//! and a plan of 0–6 faults of those kinds. Shrinking removes requests and faults and makes
//! windows shorter and bursts smaller.

use bridge_under_test::channel::agent::{AgentOp, AgentScript, AgentStep};
use bridge_under_test::channel::gateway::{ControlFrame, GatewayEvent, GatewayStep};
use bridge_under_test::channel::grammar::{ID_ALPHABET, ID_LEN};
use bridge_under_test::channel::ChannelBugs;
use proptest::prelude::*;

use super::faults::{Absurd, ChannelFault, KINDS};
use super::{ChannelScenario, Limits, Spec, SESSION};

/// The channel family's tick: 1 s. Its timers are minutes and hours (a 5 min sweep, a 30 min
/// and a 1 h TTL), so a second is 1/300 of the shortest one; the only sub-second timer, a
/// clamped 1 ms wait, fires at its exact instant inside the bridge (tokio timers are not
/// quantised), and only delivery between hosts waits for a tick boundary. Measured in release
/// on three generated cases replayed at both ticks: 0.29 s at 1 s against 0.77 s at 250 ms
/// (process start included), with the same verdicts; the 2 000-case hunt runs at about
/// 170 000x virtual:wall on two cores.
pub const TICK_MS: u64 = 1_000;

/// Requests arrive within the first half hour of a run.
const SPAN_MS: u64 = 30 * 60_000;

/// How the operator answers one permission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `yes <id>` or `no <id>`, in upper case when `shout` (the grammar is case-insensitive).
    Correct { allow: bool, shout: bool },
    /// A near miss: a wrong id, a misspelt verb, or extra words (0, 1, 2).
    Typo(u8),
    /// The right reply in another chat session.
    OtherChannel,
    /// No reply at all: the entry must expire.
    Never,
    /// `yes <id>`, then `no <id>` `gap_ms` later: at most one decision.
    Twice { gap_ms: u64 },
    /// Someone other than the owner says `yes <id>`.
    NonOwner,
}

fn operator() -> impl Strategy<Value = Operator> {
    prop_oneof![
        3 => (any::<bool>(), any::<bool>())
            .prop_map(|(allow, shout)| Operator::Correct { allow, shout }),
        1 => (0u8..3).prop_map(Operator::Typo),
        1 => Just(Operator::OtherChannel),
        2 => Just(Operator::Never),
        1 => (0u64..=60_000).prop_map(|gap_ms| Operator::Twice { gap_ms }),
        2 => Just(Operator::NonOwner),
    ]
}

/// One permission request and its operator: `(at_ms, operator, reply_after_ms, form)`, `form`
/// the shape the agent sends the id in ([`id_form`]).
type PermissionPlan = (u64, Operator, u64, u8);

/// Permission id `id` as a peer may send it: canonical, upper case, padded with blanks, mixed
/// case (all the same id once normalised), or not an id at all (an `l`, a short one).
pub fn id_form(id: &str, form: u8) -> String {
    match form {
        1 => id.to_uppercase(),
        2 => format!(" {id}\t"),
        3 => id
            .chars()
            .enumerate()
            .map(|(n, c)| if n % 2 == 0 { c.to_ascii_uppercase() } else { c })
            .collect(),
        4 => format!("{}l", &id[..4]),
        5 => id[..4].to_string(),
        _ => id.to_string(),
    }
}
/// The forms of a line a peer other than a conforming MCP client may write ([`raw_line`]).
pub const LINE_FORMS: usize = 16;

/// The `n`-th permission id of a deterministic sequence (base 25 over the bridge's
/// [`ID_ALPHABET`]): the ids the gateway's requests carry.
pub fn id_from_index(mut n: u64) -> String {
    let mut id = vec![b'a'; ID_LEN];
    for slot in id.iter_mut().rev() {
        *slot = ID_ALPHABET[(n % ID_ALPHABET.len() as u64) as usize];
        n /= ID_ALPHABET.len() as u64;
    }
    String::from_utf8(id).unwrap_or_default()
}

/// Line form `form` (`0..LINE_FORMS`), its id made unique by `n`: a truncated message, a
/// batch, a bare value, a bad version, a method that is no string, ids that are no
/// `RequestId`, no method, an unsolicited response, unknown methods and tools, params and
/// arguments that are no object, notifications (one of a request's method), a well-formed
/// `tools/list`, and well-formed pings with ids at the edges of the forms (negative, empty
/// string).
pub fn raw_line(form: usize, n: u64) -> String {
    let id = 900_000 + n;
    let sid = format!("\"raw-{n}\"");
    match form {
        0 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"par"),
        1 => format!("[{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}]"),
        2 => ["[]", "42", "\"ping\"", "null"][n as usize % 4].to_string(),
        3 => format!("{{\"jsonrpc\":\"1.0\",\"id\":{sid},\"method\":\"ping\"}}"),
        4 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":7}}"),
        5 => {
            let bad = ["true", "null", "1.5", "{}"][n as usize % 4];
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{bad},\"method\":\"ping\"}}")
        }
        6 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id}}}"),
        7 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}"),
        8 => format!("{{\"jsonrpc\":\"2.0\",\"id\":{sid},\"method\":\"resources/list\"}}"),
        9 => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"list_pendings\",\"arguments\":{{}}}}}}"
        ),
        10 => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{sid},\"method\":\"tools/call\",\"params\":{{\"arguments\":{{}}}}}}"
        ),
        11 => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"list_pending\",\"arguments\":[]}}}}"
        ),
        // A `tools/list`, with params that are no object on every other line.
        12 => {
            let params = if n.is_multiple_of(2) { "{}" } else { "\"all\"" };
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/list\",\"params\":{params}}}")
        }
        13 => "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}".to_string(),
        14 => "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}".to_string(),
        _ => {
            let edge = match n % 3 {
                0 => format!("-{id}"),
                1 => "\"\"".to_string(),
                _ => sid,
            };
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{edge},\"method\":\"ping\"}}")
        }
    }
}

/// One approval: `(at_ms, plugin, created, expires_in_ms, resolve_after_ms, again_after_ms)`,
/// the last a repeat of the requested frame (a gateway re-announcing it, its first entry
/// pending, resolved, expired or evicted by then).
type ApprovalPlan = (u64, bool, bool, Option<i64>, Option<u64>, Option<u64>);

fn permission_plan() -> impl Strategy<Value = PermissionPlan> {
    // Replies mostly well inside the 1 h TTL, sometimes just past it.
    let reply = prop_oneof![4 => 1_000u64..=20 * 60_000, 1 => 55 * 60_000u64..=65 * 60_000];
    let form = prop_oneof![6 => Just(0u8), 4 => 1u8..=3, 1 => 4u8..=5];
    (0..=SPAN_MS, operator(), reply, form)
}

fn approval_plan() -> impl Strategy<Value = ApprovalPlan> {
    let expires = prop::option::weighted(0.6, 60_000i64..=2 * 3_600_000);
    let resolve = prop::option::weighted(0.5, 10_000u64..=90 * 60_000);
    let again = prop::option::weighted(0.25, 1_000u64..=70 * 60_000);
    (0..=SPAN_MS, any::<bool>(), any::<bool>(), expires, resolve, again)
}

fn wait_step() -> impl Strategy<Value = AgentStep> {
    let timeout = prop::sample::select(vec![-5i64, 0, 1, 500, 30_000, 300_000, 10_000_000]);
    (0..=SPAN_MS, timeout, 0u64..=300).prop_map(|(at_ms, timeout_ms, limit)| AgentStep {
        at_ms,
        op: AgentOp::WaitForEvent { timeout_ms, limit },
    })
}

fn say(at_ms: u64, text: String, owner: bool) -> GatewayStep {
    GatewayStep {
        at_ms,
        event: GatewayEvent::Message {
            session: SESSION.into(),
            text,
            owner,
        },
    }
}

/// The operator's messages for permission `n`.
fn replies(n: usize, (at_ms, operator, after_ms, form): PermissionPlan) -> Vec<GatewayStep> {
    // The operator copies the id in the form the agent showed, blanks aside.
    let id = id_form(&id_from_index(100 + n as u64), form).trim().to_string();
    let at = at_ms + after_ms;
    match operator {
        Operator::Correct { allow, shout } => {
            let text = format!("{} {id}", if allow { "yes" } else { "no" });
            vec![say(
                at,
                if shout { text.to_uppercase() } else { text },
                true,
            )]
        }
        Operator::Typo(0) => vec![say(
            at,
            format!("yes {}", id_from_index(500_000 + n as u64)),
            true,
        )],
        Operator::Typo(1) => vec![say(at, format!("yse {id}"), true)],
        Operator::Typo(_) => vec![say(at, format!("yes {id} please"), true)],
        Operator::OtherChannel => {
            let event = GatewayEvent::Message {
                session: "other".into(),
                text: format!("yes {id}"),
                owner: true,
            };
            vec![GatewayStep { at_ms: at, event }]
        }
        Operator::Never => Vec::new(),
        Operator::Twice { gap_ms } => vec![
            say(at, format!("yes {id}"), true),
            say(at + gap_ms, format!("no {id}"), true),
        ],
        Operator::NonOwner => vec![say(at, format!("yes {id}"), false)],
    }
}

/// The approval events of approval `n`.
fn approval_steps(
    n: usize,
    (at_ms, plugin, created, expires_in_ms, resolve, again): ApprovalPlan,
) -> Vec<GatewayStep> {
    let id = format!("appr-{n}");
    let requested = GatewayEvent::ApprovalRequested {
        id: id.clone(),
        plugin,
        created,
        expires_in_ms,
    };
    let mut steps = vec![GatewayStep { at_ms, event: requested.clone() }];
    if let Some(after) = again {
        steps.push(GatewayStep { at_ms: at_ms + after, event: requested });
    }
    if let Some(after) = resolve {
        steps.push(GatewayStep {
            at_ms: at_ms + after,
            event: GatewayEvent::ApprovalResolved { id, plugin },
        });
    }
    steps
}

/// The workload as the agent's and the gateway's scripts (end time filled in later).
fn workload() -> impl Strategy<Value = (AgentScript, Vec<GatewayStep>)> {
    let permissions = prop::collection::vec(permission_plan(), 0..=8);
    let approvals = prop::collection::vec(approval_plan(), 0..=8);
    let waits = prop::collection::vec(wait_step(), 0..=3);
    let reads = prop::collection::vec(0..=SPAN_MS, 0..=3);
    let read_every = prop::option::weighted(0.85, 30_000u64..=600_000);
    let chatter = prop::collection::vec(
        (
            0..=SPAN_MS,
            prop::sample::select(vec!["hello", "yes", "ok"]),
        ),
        0..=2,
    );
    let control = prop::collection::vec(
        (0..=SPAN_MS + 20 * 60_000, prop::sample::select(vec![ControlFrame::Ping, ControlFrame::Close])),
        0..=3,
    );
    let strangers = prop::collection::vec((0..=SPAN_MS, 0u64..12, any::<bool>()), 0..=2);
    let lines = prop::collection::vec((0..=SPAN_MS, 0..LINE_FORMS), 0..=3);
    // The agent asks again for permission `n` (modulo the count) `after_ms` after its first
    // ask, in id form `form`: while it is pending, after its decision, its expiry or its
    // eviction.
    let again = prop::collection::vec((0usize..8, 1_000u64..=70 * 60_000, 0u8..=3), 0..=2);
    (
        (permissions, approvals, waits, reads, read_every, chatter),
        (control, strangers, lines, again),
    )
        .prop_map(
        |((permissions, approvals, waits, reads, read_every_ms, chatter), (control, strangers, lines, again))| {
            let mut agent: Vec<AgentStep> = waits;
            let asks: Vec<u64> = permissions.iter().map(|plan| plan.0).collect();
            for (n, after_ms, form) in again.into_iter().filter(|_| !asks.is_empty()) {
                let n = n % asks.len();
                let op = AgentOp::PermissionRequest {
                    request_id: id_form(&id_from_index(100 + n as u64), form),
                    tool_name: "Bash".into(),
                };
                agent.push(AgentStep { at_ms: asks[n] + after_ms, op });
            }
            // `n` makes each line's id its own (an agent keeps its outstanding ids distinct).
            agent.extend(lines.into_iter().enumerate().map(|(n, (at_ms, form))| AgentStep {
                at_ms,
                op: AgentOp::Line { line: raw_line(form, n as u64) },
            }));
            let mut gateway = Vec::new();
            for (n, plan) in permissions.into_iter().enumerate() {
                let op = AgentOp::PermissionRequest {
                    request_id: id_form(&id_from_index(100 + n as u64), plan.3),
                    tool_name: "Bash".into(),
                };
                agent.push(AgentStep { at_ms: plan.0, op });
                gateway.extend(replies(n, plan));
            }
            for (n, plan) in approvals.into_iter().enumerate() {
                gateway.extend(approval_steps(n, plan));
            }
            agent.extend(reads.into_iter().map(|at_ms| AgentStep {
                at_ms,
                op: AgentOp::ListPending,
            }));
            gateway.extend(
                chatter
                    .into_iter()
                    .map(|(at_ms, text)| say(at_ms, text.to_string(), true)),
            );
            gateway.extend(control.into_iter().map(|(at_ms, frame)| GatewayStep {
                at_ms,
                event: GatewayEvent::Control { frame },
            }));
            // Replies by someone other than the owner, for known and unknown ids.
            gateway.extend(strangers.into_iter().map(|(at_ms, n, allow)| {
                let verb = if allow { "yes" } else { "no" };
                say(at_ms, format!("{verb} {}", id_from_index(100 + n)), false)
            }));
            agent.sort_by_key(|s| s.at_ms);
            gateway.sort_by_key(|s| s.at_ms);
            (
                AgentScript {
                    steps: agent,
                    read_every_ms,
                    end_at_ms: 0,
                },
                gateway,
            )
        },
    )
}

/// Production limits, or a compressed profile a burst can cross cheaply.
fn limits() -> impl Strategy<Value = Limits> {
    let compressed = (2usize..=16, 3usize..=24).prop_map(|(pending_cap, queue_limit)| Limits {
        pending_cap,
        queue_limit,
    });
    prop_oneof![2 => compressed, 1 => Just(Limits::default())]
}

fn fault(kind: &'static str, limits: Limits, steps: usize) -> BoxedStrategy<ChannelFault> {
    let step = 0..steps.max(1);
    let at = 0..=SPAN_MS + 10 * 60_000;
    match kind {
        "gateway_down" => (at, 5_000u64..=20 * 60_000)
            .prop_map(|(at_ms, for_ms)| ChannelFault::GatewayDown { at_ms, for_ms })
            .boxed(),
        "rebroadcast" => (step, 1_000u64..=40 * 60_000)
            .prop_map(|(step, delay_ms)| ChannelFault::Rebroadcast { step, delay_ms })
            .boxed(),
        "burst" => (
            at,
            1..=limits.pending_cap + limits.pending_cap / 4 + 2,
            any::<bool>(),
        )
            .prop_map(|(at_ms, count, approvals)| ChannelFault::Burst {
                at_ms,
                count,
                approvals,
            })
            .boxed(),
        "close" => (0..=SPAN_MS + 30 * 60_000)
            .prop_map(|at_ms| ChannelFault::Close { at_ms })
            .boxed(),
        "clock_offset" => (at, -3 * 3_600_000i64..=3 * 3_600_000)
            .prop_map(|(at_ms, offset_ms)| ChannelFault::ClockOffset { at_ms, offset_ms })
            .boxed(),
        _ => (step, absurd())
            .prop_map(|(step, value)| ChannelFault::AbsurdExpiry { step, value })
            .boxed(),
    }
}

fn absurd() -> impl Strategy<Value = Absurd> {
    prop::sample::select(vec![
        Absurd::Absent,
        Absurd::Zero,
        Absurd::Negative,
        Absurd::FarFuture,
        Absurd::LongPast,
        Absurd::NotANumber,
    ])
}

/// A whole channel scenario with the given bug switches.
pub fn scenario(bugs: ChannelBugs) -> impl Strategy<Value = ChannelScenario> {
    (crate::swarm::profile(KINDS), limits(), workload())
        .prop_flat_map(|(kinds, limits, (agent, gateway))| {
            let choices: Vec<BoxedStrategy<ChannelFault>> = kinds
                .iter()
                .map(|kind| fault(kind, limits, gateway.len()))
                .collect();
            let faults = crate::swarm::plan(choices, 0..=6);
            let profile: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
            (
                Just(limits),
                Just(agent),
                Just(gateway),
                faults,
                Just(profile),
            )
        })
        .prop_flat_map(|(limits, agent, gateway, faults, profile)| {
            // Waits that are outstanding when a close or stdin EOF comes: (ms before, timeout).
            let around = prop::option::weighted(0.5, (0u64..=120_000, 60_000i64..=300_000));
            // Sometimes the agent closes stdin soon after the last input, entries still
            // pending (or expired and not yet swept), instead of after a full TTL.
            let early = prop::option::weighted(0.15, 1_000u64..=20 * 60_000);
            let closes = faults.iter().filter(|f| matches!(f, ChannelFault::Close { .. })).count();
            let at_close = prop::collection::vec(around.clone(), closes..=closes);
            (Just(limits), Just(agent), Just(gateway), Just(faults), Just(profile), (around, early), at_close)
        })
        .prop_map(move |(limits, mut agent, gateway, faults, profile, (at_eof, early), at_close)| {
            agent.end_at_ms = match early {
                Some(after_ms) => last_input_ms(&agent.steps, &gateway, &faults) + after_ms,
                None => end_at_ms(&agent.steps, &gateway, &faults),
            };
            let close_times = faults.iter().filter_map(|f| match f {
                ChannelFault::Close { at_ms } => Some(*at_ms),
                _ => None,
            });
            let mut extra: Vec<AgentStep> = close_times
                .zip(at_close)
                .filter_map(|(at_ms, wait)| wait.map(|w| (at_ms, w)))
                .chain(at_eof.map(|w| (agent.end_at_ms, w)))
                .map(|(at_ms, (before, timeout_ms))| AgentStep {
                    at_ms: at_ms.saturating_sub(before),
                    op: AgentOp::WaitForEvent { timeout_ms, limit: 50 },
                })
                .collect();
            agent.steps.append(&mut extra);
            agent.steps.sort_by_key(|s| s.at_ms);
            ChannelScenario {
                bugs,
                limits,
                agent,
                gateway,
                faults,
                profile,
            }
        })
}

/// When the agent closes stdin: after every step and fault has played out, plus a full
/// permission TTL (the longest expiry: approvals are clamped to it) and three sweeps, so every
/// entry's removal and the sweeper's stop are judged.
pub fn end_at_ms(agent: &[AgentStep], gateway: &[GatewayStep], faults: &[ChannelFault]) -> u64 {
    let spec = Spec::new(Limits::default(), TICK_MS, 0);
    last_input_ms(agent, gateway, faults) + spec.permission_ttl_ms + 3 * spec.sweep_interval_ms + 60_000
}

/// When the last step or fault plays out.
pub fn last_input_ms(agent: &[AgentStep], gateway: &[GatewayStep], faults: &[ChannelFault]) -> u64 {
    let last_fault = faults.iter().map(|f| {
        let (start, end) = f.window(gateway);
        end.unwrap_or(start)
    });
    let last = agent
        .iter()
        .map(|s| s.at_ms)
        .chain(gateway.iter().map(|s| s.at_ms))
        .chain(last_fault)
        .max();
    last.unwrap_or(0)
}

/// The run's horizon: the agent's end plus time for the bridge to close and exit.
pub fn horizon_ms(agent: &AgentScript) -> u64 {
    agent.end_at_ms + 10 * TICK_MS
}

#[cfg(test)]
mod tests {
    use bridge_under_test::channel::grammar::normalize_id;

    use super::id_from_index;

    #[test]
    fn generated_ids_are_distinct_and_in_the_alphabet() {
        assert_eq!(id_from_index(0), "aaaaa");
        assert_eq!(id_from_index(1), "aaaab");
        assert_eq!(id_from_index(25), "aaaba");
        for n in [0, 7, 25, 999, 9_765_624] {
            assert_eq!(normalize_id(&id_from_index(n)), Some(id_from_index(n)));
        }
        assert_ne!(id_from_index(3), id_from_index(4));
    }
}
