//! The daemon family's fault knobs: state the harness sets between simulation steps and the
//! components consult. Like the relay's, they live outside the software they affect, so they
//! survive a crash. (`Arc<Mutex>` only where axum requires `Send`: everything runs on one thread.)
//! A few counters go the other way: the components bump them at the moments a fault plan may
//! anchor an onset to, and the harness reads them between steps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

pub use crate::relay::knobs::lock;

/// How the user answers an authorization prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Approves this long after the prompt appears.
    After(u64),
    /// Never looks at the browser.
    Never,
}

/// The browser's knob.
#[derive(Debug)]
pub struct BrowserKnobs {
    pub approval: Approval,
}

pub type SharedBrowserKnobs = Arc<Mutex<BrowserKnobs>>;

/// The upstream MCP server's knobs.
#[derive(Debug, Default)]
pub struct McpKnobs {
    /// Pages in a `tools/list` listing (at least one).
    pub pages: u32,
    /// Extra delay before answering page `k` (1-based) of any listing.
    pub page_delays: BTreeMap<u32, u64>,
    /// Page `k` (≥ 2) answers with the cursor of the page before it: a repeated cursor.
    pub repeat_at_page: Option<u32>,
    /// Every page has a fresh next cursor: the listing never runs out.
    pub endless: bool,
    /// Methods that are accepted and never answered.
    pub wedged: BTreeSet<String>,
    /// `tools/call` runs this long whatever it was asked.
    pub slow_tool_ms: Option<u64>,
    /// Counter: pages answered with a next cursor (a listing is between pages).
    pub cursor_pages: u64,
}

pub type SharedMcpKnobs = Arc<Mutex<McpKnobs>>;

/// Faults inside the daemon process itself.
#[derive(Debug, Default)]
pub struct DaemonKnobs {
    /// The event loop writes nothing to any client while set.
    pub stall: bool,
    /// While set, a process hangs where a real one blocks on a slow disk or a stuck lock: one
    /// starting does not listen or write its metadata, one stopping does not exit.
    pub hang: bool,
    /// Bumped to reset every open client connection.
    pub reset_epoch: u64,
    /// After writing a response, the connection stays open this long before the daemon ends it.
    pub hold_open_ms: u64,
    /// While set, every progress frame carries another request's id.
    pub crossed_frames: bool,
    /// Woken whenever a knob changes.
    pub changed: Arc<Notify>,
}

pub type SharedDaemonKnobs = Arc<Mutex<DaemonKnobs>>;

impl DaemonKnobs {
    pub fn shared() -> SharedDaemonKnobs {
        Arc::new(Mutex::new(Self::default()))
    }

    pub fn notify(&self) {
        self.changed.notify_waiters();
    }
}

/// Wait while `held` says the daemon knobs hold the caller (a stall, a hang), waking on every
/// knob change.
pub async fn wait_while(knobs: &SharedDaemonKnobs, held: impl Fn(&DaemonKnobs) -> bool) {
    loop {
        let changed = lock(knobs).changed.clone();
        let notified = changed.notified();
        if !held(&lock(knobs)) {
            return;
        }
        notified.await;
    }
}
