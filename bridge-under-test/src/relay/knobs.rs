//! The mock relayer's fault knobs: state the harness sets between simulation steps and the
//! relayer consults as it serves. Knobs live outside the relayer's software, so they survive a
//! bounce; a `Notify` tells waiting streams that something changed. (`Arc<Mutex>` only because
//! axum requires `Send` state: everything runs on one thread.)

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

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
    /// Streams write nothing at all; what they would have written waits.
    pub stall: bool,
    /// Bumped to end every open stream (EOF).
    pub eof_epoch: u64,
    /// Every POST is answered with this status instead of being served.
    pub reject_status: Option<u16>,
    /// Woken whenever a knob changes, so idle streams re-read them.
    pub changed: Arc<Notify>,
}

impl RelayerKnobs {
    pub fn shared() -> SharedKnobs {
        Arc::new(Mutex::new(Self::default()))
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
