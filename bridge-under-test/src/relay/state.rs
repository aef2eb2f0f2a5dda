//! The bridge's bookkeeping as plain data, apart from any I/O: the in-flight map, the bounded
//! closed-out set and the outbox of messages waiting for a session.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use crate::seam::Instant;

/// One id-bearing client request the bridge owes a reply.
#[derive(Debug, Clone)]
pub struct InFlight {
    /// Admission order, for replay in order.
    pub seq: u64,
    /// Stamped once, at admission (unless `refresh_deadline_on_replay`).
    pub started_at: Instant,
    pub id: Value,
    /// The id it carries upstream: the bridge's own, unique per admission, so a reply is never
    /// taken for the answer to a later request that reuses the client's id.
    pub upstream: Value,
    pub method: String,
    /// The message as sent upstream (under the upstream id).
    pub msg: Value,
    /// Idempotency key, drawn at admission and reused by every replay.
    pub key: String,
    /// The stream generation it was last POSTed to, if any.
    pub posted_gen: Option<u64>,
    /// Whether it was ever POSTed, to any session (what an error text may say of it).
    pub sent: bool,
    /// The relayer accepted a POST of it (2xx): from then on the work may have completed.
    pub accepted: bool,
}

/// Upstream ids closed out by the sweeper (with the client's id they stood for), remembered so a
/// late genuine reply is dropped. Bounded both in count (oldest evicted first) and in time.
#[derive(Debug)]
pub struct ClosedOut {
    cap: usize,
    retention_ms: u64,
    order: VecDeque<(String, Instant, Value)>,
}

impl ClosedOut {
    pub fn new(cap: usize, retention_ms: u64) -> Self {
        Self { cap: cap.max(1), retention_ms, order: VecDeque::new() }
    }

    /// Remember `key`, closed out at `at`, for the client's id `client`.
    pub fn insert_for(&mut self, key: String, at: Instant, client: Value) {
        self.forget(&key);
        if self.order.len() >= self.cap {
            self.order.pop_front();
        }
        self.order.push_back((key, at, client));
    }

    #[cfg(test)]
    pub fn contains(&self, key: &str) -> bool {
        self.order.iter().any(|(k, _, _)| k == key)
    }

    /// The client's id a closed-out upstream id stood for.
    pub fn client_id(&self, key: &str) -> Option<&Value> {
        self.order.iter().find(|(k, _, _)| k == key).map(|(_, _, client)| client)
    }

    pub fn forget(&mut self, key: &str) {
        self.order.retain(|(k, _, _)| k != key);
    }

    /// Drop entries older than the retention window.
    pub fn expire(&mut self, now: Instant) {
        let retention = std::time::Duration::from_millis(self.retention_ms);
        while let Some((_, at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) <= retention {
                break;
            }
            self.order.pop_front();
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// When the oldest remembered id was closed out.
    pub fn oldest(&self) -> Option<Instant> {
        self.order.iter().map(|(_, at, _)| *at).min()
    }
}

/// Everything the bridge tracks, owned by one `RefCell` and never borrowed across an `await`.
#[derive(Debug)]
pub struct State {
    pub inflight: BTreeMap<String, InFlight>,
    pub closed_out: ClosedOut,
    /// Upstream ids of the bridge's own `initialize` requests (one per session), whose replies
    /// are dropped.
    pub suppressed: BTreeMap<String, Instant>,
    /// The params of the client's `initialize`, which the bridge's own carry upstream.
    pub init_params: Option<Value>,
    /// The generation whose session the bridge has initialized.
    pub initialized_gen: Option<u64>,
    /// The generation whose session the bridge initialized with made-up params, because it had
    /// to send something before the client's `initialize` came.
    pub made_up_gen: Option<u64>,
    /// The client has sent `notifications/initialized`: every session gets one too, the
    /// bridge's own (the client's is not forwarded: the handshake upstream is the bridge's).
    pub client_initialized: bool,
    /// The generation whose session the bridge has sent its `notifications/initialized`.
    pub noted_gen: Option<u64>,
    /// When the current stream opened (connected), for the reconnect backoff.
    pub opened_at: Instant,
    /// Messages without a tracked reply (notifications, the forwarded `initialize`), by seq.
    pub notes: BTreeMap<u64, Value>,
    pub next_seq: u64,
    /// Current stream generation; bumped by every connect attempt.
    pub gen: u64,
    /// The POST path of the live session, when the stream is up.
    pub session: Option<String>,
    /// A connect loop is running (single flight).
    pub connecting: bool,
    /// Consecutive failed connects since the last success.
    pub attempt: u32,
    /// A stream is open (connected, maybe before its endpoint event).
    pub stream_open: bool,
    /// Last byte seen on the stream.
    pub last_activity: Instant,
    /// Consecutive orphaned calls on the current session.
    pub orphan_streak: u32,
    /// When the current session's endpoint arrived: only a call admitted since then, whose whole
    /// deadline ran on this session, is evidence that the session is broken.
    pub session_since: Instant,
    /// stdin reached EOF: nothing new is admitted.
    pub closing: bool,
}

impl State {
    pub fn new(closed_out: ClosedOut, now: Instant) -> Self {
        Self {
            inflight: BTreeMap::new(),
            closed_out,
            suppressed: BTreeMap::new(),
            init_params: None,
            initialized_gen: None,
            made_up_gen: None,
            client_initialized: false,
            noted_gen: None,
            opened_at: now,
            notes: BTreeMap::new(),
            next_seq: 0,
            gen: 0,
            session: None,
            connecting: false,
            stream_open: false,
            attempt: 0,
            last_activity: now,
            orphan_streak: 0,
            session_since: now,
            closing: false,
        }
    }

    pub fn take_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// The next message to POST on generation `gen`, in admission order: an in-flight request
    /// not yet posted to this generation, or a waiting note.
    pub fn next_outgoing(&self, gen: u64) -> Option<Outgoing> {
        let request = self
            .inflight
            .values()
            .filter(|entry| entry.posted_gen != Some(gen))
            .min_by_key(|entry| entry.seq);
        let note = self.notes.iter().next();
        match (request, note) {
            (Some(entry), Some((seq, _))) if *seq < entry.seq => Some(Outgoing::Note(*seq)),
            (Some(entry), _) => Some(Outgoing::Request(crate::net::jsonrpc::id_key(&entry.id))),
            (None, Some((seq, _))) => Some(Outgoing::Note(*seq)),
            (None, None) => None,
        }
    }
}

/// What [`State::next_outgoing`] picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outgoing {
    Request(String),
    Note(u64),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn closed_out_is_bounded_in_count_and_time() {
        let start = crate::seam::now();
        let mut closed = ClosedOut::new(2, 1_000);
        closed.insert_for("1".into(), start, Value::Null);
        closed.insert_for("2".into(), start, Value::Null);
        closed.insert_for("3".into(), start + Duration::from_millis(600), serde_json::json!(3));
        assert_eq!(closed.client_id("3"), Some(&serde_json::json!(3)));
        assert!(!closed.contains("1"), "oldest evicted at the cap");
        assert_eq!(closed.len(), 2);
        closed.expire(start + Duration::from_millis(1_001));
        assert!(!closed.contains("2") && closed.contains("3"), "expired by age");
        closed.forget("3");
        assert_eq!(closed.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn outgoing_follows_admission_order() {
        let now = crate::seam::now();
        let mut state = State::new(ClosedOut::new(4, 10), now);
        let entry = |seq: u64, id: u64, posted_gen| InFlight {
            seq,
            started_at: now,
            id: serde_json::json!(id),
            upstream: serde_json::json!(format!("relay-{seq}")),
            method: "tools/call".into(),
            msg: Value::Null,
            key: String::new(),
            posted_gen,
            sent: posted_gen.is_some(),
            accepted: false,
        };
        state.inflight.insert("5".into(), entry(3, 5, None));
        state.inflight.insert("9".into(), entry(1, 9, Some(1)));
        state.notes.insert(2, Value::Null);
        assert_eq!(state.next_outgoing(1), Some(Outgoing::Note(2)));
        assert_eq!(state.next_outgoing(2), Some(Outgoing::Request("9".into())));
        state.notes.clear();
        assert_eq!(state.next_outgoing(1), Some(Outgoing::Request("5".into())));
    }
}
