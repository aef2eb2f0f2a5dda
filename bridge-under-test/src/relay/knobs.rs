//! The mock relayer's fault knobs: state the harness sets between simulation steps and the
//! relayer consults as it serves. Knobs live outside the relayer's software, so they survive a
//! bounce; a `Notify` tells waiting streams that something changed. (`Arc<Mutex>` only because
//! axum requires `Send` state: everything runs on one thread.)

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::sse::Style;

/// The key in a server request's `params._meta` that names it (`srv-<at>`), so its answer is
/// matched at the server however a bridge, or rmcp, renumbers it on the way to the client and
/// back.
pub const SERVER_ID_META: &str = "sim.relay/serverId";

/// Shared handle to the knobs.
pub type SharedKnobs = Arc<Mutex<RelayerKnobs>>;

#[derive(Debug, Default)]
pub struct RelayerKnobs {
    /// Request ids (canonical JSON) whose next reply is never sent.
    pub swallow_ids: BTreeSet<String>,
    /// Request ids whose next reply is sent twice.
    pub duplicate_ids: BTreeSet<String>,
    /// Request ids whose next reply is held back this many ms after the tool finishes.
    pub late_ids: BTreeMap<String, u64>,
    /// Request ids whose next execution ignores the tool's own deadline and runs this long.
    pub slow_ids: BTreeMap<String, u64>,
    /// Keep-alives flow but every reply is dropped (a heartbeating-but-silent relayer).
    pub withhold_replies: bool,
    /// The stalls under way, by the window that set each (its start and length), with the
    /// count of stalls begun when it began: a stream opened before a stall began writes nothing
    /// at all (what it would have written waits) until that stall ends; streams opened later are
    /// unaffected, like fresh connections past a stalled proxy. Stalls may overlap: each holds
    /// its streams until its own end.
    pub stalling: BTreeMap<(u64, u64), u64>,
    /// How many stalls have begun.
    pub stalls: u64,
    /// Bumped to end every open stream (EOF).
    pub eof_epoch: u64,
    /// Bumped to forget every session open now while its streams stay up, keep-alives and all:
    /// a POST to one is answered 404 (`gone`), as by a relayer that expired it, or behind a load
    /// balancer that lost its sticky route to the instance holding it.
    pub lost_epoch: u64,
    /// While set, every stream opened is dropped at once: before its endpoint event (`false`)
    /// or right after it (`true`): a proxy that accepts connections and cuts them.
    pub flap: Option<bool>,
    /// Every POST is answered with this status instead of being served.
    pub reject_status: Option<u16>,
    /// While set, every POST's connection is reset unanswered: before the relayer reads it
    /// (`false`: nothing runs) or after it admitted it (`true`: it runs; its answer is lost).
    pub reset_posts: Option<bool>,
    /// Server-initiated notifications (JSON-RPC notifications, whole): each is sent once to every
    /// session open when it was added, with [`RelayerKnobs::push_server_note`]. Only the
    /// standard transports (`sse`, `streamable_http`) send them: on a session's stream, and on a
    /// Streamable HTTP session's standalone (GET) stream, where they wait for one to connect.
    pub server_notes: Vec<serde_json::Value>,
    /// Streamable HTTP: answer every request in this form; unset, the relayer draws one per POST.
    pub response_form: Option<ResponseForm>,
    /// Every stream opened from now on writes in this wire style instead of the one drawn for it
    /// (the draw still happens, so the run's other randomness is unchanged). Streamable HTTP
    /// streams still write every event's `id:`. For peers whose SSE parsers are known to miss a
    /// form the specification allows (the TypeScript SDK's `eventsource-parser` 3.1.1 drops an
    /// event ended by lone CRs when the stream ends right after it).
    pub stream_style: Option<Style>,
    /// Woken whenever a knob changes, so idle streams re-read them.
    pub changed: Arc<Notify>,
}

/// How a Streamable HTTP server answers a POST that carries requests: with one JSON body, or with
/// an SSE stream that carries the responses (the specification lets the server choose, and a
/// client must take both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseForm {
    Json,
    Sse,
}

impl RelayerKnobs {
    pub fn shared() -> SharedKnobs {
        Arc::new(Mutex::new(Self::default()))
    }

    /// Begin (`on`) or end the stall of window `window` (its start and length), which holds the
    /// streams open when it began.
    pub fn set_stall(&mut self, window: (u64, u64), on: bool) {
        if on {
            self.stalls += 1;
            self.stalling.insert(window, self.stalls);
        } else {
            self.stalling.remove(&window);
        }
    }

    /// Whether a stream opened when `stalls_at_open` stalls had begun is stalled now.
    pub fn stalled(&self, stalls_at_open: u64) -> bool {
        self.stalling.values().any(|began| *began > stalls_at_open)
    }

    /// Send `note` (a JSON-RPC notification) to every open session, and tell the relayer.
    pub fn push_server_note(&mut self, note: serde_json::Value) {
        self.server_notes.push(note);
        self.notify();
    }

    /// Call after changing a knob that open streams must notice.
    pub fn notify(&self) {
        self.changed.notify_waiters();
    }
}

/// Lock a mutex, ignoring poisoning: a panic elsewhere is already a finding of its own.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
