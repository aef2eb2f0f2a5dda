//! The daemon family's excuses (ORACLES.md §8): an outcome is excused only by the observed
//! effect of an injected fault on the very request or daemon it concerns — *this* daemon
//! crashed while *this* request was open, a reset tore *this* connection down, a stall silenced
//! *this* daemon through the gap that expired *this* budget — never because some fault window
//! overlapped the action. A decision the system took on the way (a stop, a replacement, a retry
//! after a transport failure nobody caused) is judged, not excused.

use std::collections::BTreeMap;

use bridge_under_test::events::kind;

use super::checks::{Attempt, Facts};

/// The daemon that took a request crashed while the request was open.
pub const CRASH: &str = "a crash killed the daemon serving it";
/// A socket reset tore the request's open connection down.
pub const RESET: &str = "a reset tore its connection down";
/// The daemon's event loop was stalled through the silence that expired the request's budget.
pub const STALL: &str = "a stall silenced its daemon";
/// Frames for the request went out under another request's id, so its budget was not re-armed.
pub const CROSSED: &str = "crossed frames carried its heartbeats away";
/// A stall froze the request's work past one of its bounds, which fired as the stall ended.
pub const THAWED: &str = "a stall froze its work past the bound that fired as the stall ended";
/// A daemon whose run ended (it accepted a stop, or a newer daemon of its config started)
/// waits out a `process_hang` before it exits (`daemon/process.rs`), so it is still in the
/// process table at the end of the run.
pub const HUNG_ON_ITS_WAY_OUT: &str = "its run had ended and a hang held it from exiting until the end of the run";

/// The longest a daemon leaves a client that asked for frames without one: `min(requested,
/// 250)` ms (MODEL.md §2.4).
const FRAME_GAP_MS: u64 = 250;

/// An injected disruptive fault, as the trace shows it: its kind and the span it held (an
/// instant fault's span is one moment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub fault: String,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// What the excuses read from a trace, besides the attempts: which daemon took each request and
/// when each daemon crashed.
#[derive(Debug, Clone, Default)]
pub struct Effects {
    /// Request id → the pid of the daemon that read it (`daemon.request`).
    pub taken_by: BTreeMap<String, u64>,
    /// `(pid, at_ms)` of each crash (`daemon.exit reason=crash`).
    pub crashes: Vec<(u64, u64)>,
    /// Authorization flow `state` → the daemon that started it and the request it was for
    /// (`daemon.oauth phase=start`).
    pub flows: BTreeMap<String, (u64, String)>,
}

impl Effects {
    pub fn new(trace: &crate::trace::Trace) -> Self {
        let mut effects = Effects::default();
        for event in &trace.events {
            match event.kind.as_str() {
                kind::DAEMON_REQUEST => {
                    effects.taken_by.entry(event.text("id")).or_insert(event.num("pid"));
                }
                kind::DAEMON_EXIT if event.text("reason") == "crash" => effects.crashes.push((event.num("pid"), event.at_ms)),
                kind::DAEMON_OAUTH if event.text("phase") == "start" => {
                    effects.flows.insert(event.text("state"), (event.num("pid"), event.text("id")));
                }
                _ => {}
            }
        }
        effects
    }
}

impl Facts<'_> {
    /// Whether a fault of kind `fault` held at some moment of `[from, to]`.
    pub fn held_during(&self, fault: &str, from: u64, to: u64) -> bool {
        self.spans.iter().any(|s| s.fault == fault && s.start_ms <= to && s.end_ms >= from)
    }

    /// The mechanism by which an injected fault's own effect ended `attempt` without its answer,
    /// if one did: the daemon that took it crashed while it was open; a reset fired while it was
    /// open and the CLI saw the reset; or its budget expired in a silence that a stall of the
    /// daemon (or crossed frames) spanned: with frames, from the first frame owed to the expiry.
    /// `None` for an attempt that was answered, or that failed for a reason of the system's own
    /// (a budget too short, a daemon stopped under it).
    pub fn cut(&self, attempt: &Attempt) -> Option<&'static str> {
        let end = attempt.end.as_ref().filter(|end| end.transport)?;
        let (from, to) = (attempt.at_ms, end.at_ms);
        let pid = self.effects.taken_by.get(&attempt.id).copied().unwrap_or(attempt.pid);
        if self.effects.crashes.iter().any(|(p, at)| *p == pid && (from..=to).contains(at)) {
            return Some(CRASH);
        }
        if end.code == "reset" && self.held_during("socket_reset", from, to) {
            return Some(RESET);
        }
        if end.expired() {
            let heard = attempt.activity_ms.last().copied().unwrap_or(from);
            // An idle budget that frames re-arm expires only if every frame the daemon owed
            // from `heard` on was kept from re-arming it: stalls (held) and crossed frames
            // (carried away) together must hold from the first frame owed until the last one
            // that could still have arrived, a frame period before the expiry (a stall that
            // ended sooner lets the late frames out in time). A fixed budget, or a request
            // without frames, waits for the answer alone, which a fault anywhere in the
            // silence delays.
            let framed = attempt.modern && attempt.asks_frames && end.code == "idle";
            let (owed, last_owed) = (heard + FRAME_GAP_MS + self.slack_ms, to.saturating_sub(FRAME_GAP_MS + self.slack_ms));
            if framed && owed <= last_owed {
                if self.spanned(&["daemon_stall", "crossed_frames"], owed, last_owed) {
                    return Some(if self.held_during("daemon_stall", owed, last_owed) { STALL } else { CROSSED });
                }
            } else if self.held_during("daemon_stall", heard, to) {
                return Some(STALL);
            } else if self.held_during("crossed_frames", heard, to) {
                return Some(CROSSED);
            }
        }
        None
    }

    /// Whether faults of the kinds `faults` held through all of `[from, to]` (spans that meet
    /// or overlap, within a slack, count as one).
    pub fn spanned(&self, faults: &[&str], from: u64, to: u64) -> bool {
        let mut spans: Vec<(u64, u64)> = self.spans.iter().filter(|s| faults.contains(&s.fault.as_str())).map(|s| (s.start_ms, s.end_ms)).collect();
        spans.sort_unstable();
        let mut covered: Option<(u64, u64)> = None;
        for (start, end) in spans {
            covered = match covered {
                Some((a, b)) if start <= b + self.slack_ms => Some((a, b.max(end))),
                Some((a, b)) if a <= from && b >= to => return true,
                _ => Some((start, end)),
            };
        }
        covered.is_some_and(|(a, b)| a <= from && b >= to)
    }

    /// The mechanism that cut an attempt of `action` that ended before `before_ms`, if any did:
    /// the transport failure a restart-and-retry (and so a second launch, prompt or execution)
    /// answers.
    pub fn cut_before(&self, action: u64, before_ms: u64) -> Option<&'static str> {
        self.attempts
            .iter()
            .filter(|a| a.action == action && a.end.as_ref().is_some_and(|e| e.at_ms <= before_ms))
            .find_map(|a| self.cut(a))
    }

    /// Whether a timeout at `at_ms` is a bound that ran out while a stall froze the work: a
    /// stall ended within a slack before it. A stall holds a request's first progress frame, and
    /// the frame's write holds the work, whose timers then fire as the stall ends, before the
    /// work could even start (daemon soak, `v1.daemon.none.5a2fd67ee550982f`: a listing timed out
    /// at its handshake's bound, 1 033 ms after it came, as a 1.1 s stall ended, without having
    /// sent the handshake). A timeout that comes later is the daemon's own.
    pub fn thawed(&self, at_ms: u64) -> bool {
        self.spans.iter().any(|s| s.fault == "daemon_stall" && s.end_ms <= at_ms && s.end_ms + self.slack_ms >= at_ms)
    }

    /// The attempt with request id `id`.
    pub fn attempt(&self, id: &str) -> Option<&Attempt> {
        self.attempts.iter().find(|a| a.id == id)
    }
}
