//! The channel bridge's bookkeeping: tracking with the per-map cap, removal, the event queue,
//! reads, the lazy self-stopping sweeper, `close()` and exit. Every method takes and releases
//! the state borrow without awaiting.

use std::rc::Rc;

use serde_json::{json, Value};

use super::bridge::Bridge;
use super::pending::{reanchored_expiry, Entry, Map};
use super::{opt, spawn_owned};
use crate::emit;
use crate::events::kind;
use crate::seam;

impl Bridge {
    /// Track `id` in `map` unless known (a repeat keeps the first entry), evicting the oldest
    /// entries first to stay within the cap, and make sure the sweeper runs. Whether it is new.
    pub(super) fn track(
        self: &Rc<Self>,
        map: Map,
        id: &str,
        entry: Entry,
        raw: Option<i64>,
    ) -> bool {
        let now_ms = entry.tracked_at_ms;
        self.purge_expired(map, now_ms);
        let mut state = self.state.borrow_mut();
        let known = state.pending.map(map).contains_key(id);
        while !known
            && !self.config.bugs.no_pending_cap
            && state.pending.map(map).len() >= self.config.pending_cap
        {
            let Some(oldest) = state.pending.oldest(map) else {
                break;
            };
            state.pending.remove(map, &oldest);
            let (permissions, approvals) = state.pending.sizes();
            let (name, reason) = (map.name(), "evicted");
            let id = oldest.as_str();
            emit!(
                kind::PENDING_REMOVE,
                map = name,
                id,
                reason,
                now_ms,
                permissions,
                approvals
            );
        }
        let (kept, new) = state.pending.track(map, id, entry);
        let (permissions, approvals) = state.pending.sizes();
        drop(state);
        emit!(
            kind::PENDING_ADD,
            map = map.name(),
            id,
            now_ms,
            expires_at_ms = kept.expires_at_ms,
            created_at_ms = %opt(kept.created_at_ms),
            raw_expires_at_ms = %opt(raw),
            repeat = !new,
            permissions,
            approvals
        );
        if new {
            self.ensure_sweeper("insert");
        }
        new
    }

    /// Drop the expired entries of `map` before it is looked at for an insertion: an expired
    /// entry is gone for every purpose, so it neither holds a slot under the cap (evicting a
    /// live entry in its place) nor makes a new request for its id a "repeat". What the agent
    /// sees must not depend on when the sweeper last ticked.
    fn purge_expired(&self, map: Map, now_ms: u64) {
        if self.config.bugs.no_ttl {
            return;
        }
        let expired: Vec<String> = {
            let state = self.state.borrow();
            let entries = state.pending.map(map).iter();
            entries.filter(|(_, e)| e.expired(now_ms)).map(|(id, _)| id.clone()).collect()
        };
        for id in &expired {
            self.remove(map, id, "expired");
        }
    }

    /// Remove `id` from `map`; whether it was there.
    pub(super) fn remove(&self, map: Map, id: &str, reason: &str) -> bool {
        let mut state = self.state.borrow_mut();
        if state.pending.remove(map, id).is_none() {
            return false;
        }
        let (permissions, approvals) = state.pending.sizes();
        drop(state);
        let now_ms = self.now_ms();
        emit!(
            kind::PENDING_REMOVE,
            map = map.name(),
            id,
            reason,
            now_ms,
            permissions,
            approvals
        );
        true
    }

    /// Append an event for the agent's waiters (the oldest is dropped at the limit).
    pub(super) fn enqueue(&self, event: Value) {
        let name = event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let (size, dropped) = {
            let mut state = self.state.borrow_mut();
            let dropped = state.queue.push(event);
            (state.queue.len(), dropped)
        };
        emit!(kind::QUEUE_PUSH, event = %name, size, dropped);
        self.changed.notify_waiters();
    }

    /// A read of both maps: only unexpired entries, even between sweeps.
    pub(super) fn read_pending(&self) -> Value {
        let now_ms = self.now_ms();
        let filter = !(self.config.bugs.no_read_filter || self.config.bugs.no_ttl);
        let state = self.state.borrow();
        let mut out = json!({});
        for map in [Map::Permissions, Map::Approvals] {
            let ids = state.pending.ids(map, now_ms, filter);
            emit!(kind::READ_RESULT, map = map.name(), now_ms, ids = %ids.join(","));
            out[format!("{}s", map.name())] = json!(ids);
        }
        out
    }

    /// Start the sweep timer unless it runs (or, with `no_ttl`, there is no TTL to enforce).
    pub(super) fn ensure_sweeper(self: &Rc<Self>, reason: &str) {
        if self.config.bugs.no_ttl || self.state.borrow().sweeper.is_some() {
            return;
        }
        let task = spawn_owned(sweep(self.clone()));
        self.state.borrow_mut().sweeper = Some(task);
        emit!(kind::SWEEPER_START, now_ms = self.now_ms(), reason);
    }

    /// One sweep: drop expired entries; stop the timer when both maps are empty. Whether the
    /// timer goes on.
    fn sweep_tick(&self) -> bool {
        let now_ms = self.now_ms();
        if self.config.bugs.reanchor_fallback_ttl {
            self.reanchor(now_ms);
        }
        let expired = self.state.borrow().pending.expired(now_ms);
        for (map, id) in &expired {
            self.remove(*map, id, "expired");
        }
        let (permissions, approvals) = self.state.borrow().pending.sizes();
        emit!(
            kind::SWEEPER_TICK,
            now_ms,
            removed = expired.len(),
            permissions,
            approvals
        );
        if permissions + approvals > 0 || self.config.bugs.eager_sweeper {
            return true;
        }
        // Dropping our own handle only marks this task aborted; it ends as it returns.
        let own = self.state.borrow_mut().sweeper.take();
        emit!(kind::SWEEPER_STOP, now_ms, reason = "empty");
        drop(own);
        false
    }

    /// The regression: approvals without `expiresAtMs` get `(createdAtMs or now) + 30 min`.
    fn reanchor(&self, now_ms: u64) {
        let ttl_ms = self.config.approval_default_ttl_ms;
        let mut moved = Vec::new();
        let mut state = self.state.borrow_mut();
        for (id, entry) in state
            .pending
            .map_mut(Map::Approvals)
            .iter_mut()
            .filter(|(_, e)| !e.has_expiry)
        {
            let expires_at_ms = reanchored_expiry(now_ms, entry.created_at_ms, ttl_ms);
            if expires_at_ms != entry.expires_at_ms {
                entry.expires_at_ms = expires_at_ms;
                moved.push((id.clone(), expires_at_ms));
            }
        }
        drop(state);
        for (id, expires_at_ms) in moved {
            emit!(kind::PENDING_EXPIRY, map = "approval", id = %id, now_ms, expires_at_ms);
        }
    }

    /// `close()`: idempotent; clears both maps and the queue, stops the sweeper, wakes every
    /// waiter. Afterwards handlers insert nothing.
    pub(super) fn close(&self) {
        let clear = !self.config.bugs.no_close_clear;
        let (first, stopped) = {
            let mut state = self.state.borrow_mut();
            let first = !state.closed;
            state.closed = true;
            if clear {
                state.pending.clear();
                state.queue.clear();
            }
            (first, if clear { state.sweeper.take() } else { None })
        };
        if stopped.is_some() {
            emit!(kind::SWEEPER_STOP, now_ms = self.now_ms(), reason = "close");
        }
        drop(stopped);
        // After close nothing talks to the gateway: its connection (and reconnect loop) ends.
        let socket = self.socket.borrow_mut().take();
        drop(socket);
        let state = self.state.borrow();
        let (permissions, approvals) = state.pending.sizes();
        let (queue, timer) = (state.queue.len(), state.sweeper.is_some());
        emit!(
            kind::CHANNEL_CLOSE,
            first,
            permissions,
            approvals,
            queue,
            timer
        );
        drop(state);
        self.changed.notify_waiters();
    }

    /// The process ends: whatever timer is left dies with it (it never kept the process up).
    pub(super) fn exit(&self) {
        self.report();
        let timer = self.state.borrow_mut().sweeper.take();
        emit!(kind::CHANNEL_EXIT, timer = timer.is_some());
        self.out.borrow_mut().take();
    }
}

impl Bridge {
    /// The end-of-run resource report: what is still held, before the process drops anything.
    fn report(&self) {
        let waiters = self.waiters.borrow().iter().filter(|w| !w.is_finished()).count();
        let socket = self.socket.borrow().is_some();
        let state = self.state.borrow();
        let (permissions, approvals) = state.pending.sizes();
        emit!(
            kind::CHANNEL_REPORT,
            closed = state.closed,
            timer = state.sweeper.is_some(),
            socket,
            waiters,
            permissions,
            approvals,
            queue = state.queue.len()
        );
    }
}

async fn sweep(bridge: Rc<Bridge>) {
    loop {
        seam::sleep_ms(bridge.config.sweep_interval_ms).await;
        if !bridge.sweep_tick() {
            return;
        }
    }
}
