//! `waitForEvent` (the `wait_for_event` tool): hand the agent queued events, or wait for some
//! up to a timeout clamped to `[1, 300 000]` ms. `close()` resolves every waiter.

use std::rc::Rc;

use serde_json::{json, Value};

use super::bridge::Bridge;
use crate::emit;
use crate::events::kind;
use crate::relay::jsonrpc;
use crate::seam;

/// The timeout a call without one asks for.
const DEFAULT_WAIT_MS: i64 = 30_000;

impl Bridge {
    /// Start a waiter for request `id`; it answers on its own task.
    pub(super) fn start_waiter(self: &Rc<Self>, id: Value, arguments: &Value) {
        let requested = arguments
            .get("timeout_ms")
            .and_then(Value::as_i64)
            .unwrap_or(DEFAULT_WAIT_MS);
        let timeout_ms = self.config.clamp_wait_ms(requested);
        let max = self.config.poll_limit_max;
        let limit = arguments
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(max)
            .clamp(1, max);
        emit!(kind::WAITER_START, id = %id, timeout_ms, limit);
        let task = tokio::task::spawn_local(self.clone().wait(id, timeout_ms, limit));
        let mut waiters = self.waiters.borrow_mut();
        waiters.retain(|w| !w.is_finished());
        waiters.push(task);
    }

    async fn wait(self: Rc<Self>, id: Value, timeout_ms: u64, limit: u64) {
        let deadline = seam::now() + std::time::Duration::from_millis(timeout_ms);
        let (outcome, events) = loop {
            // Registered before the check: a wake-up between check and await is not lost.
            let changed = self.changed.notified();
            {
                let mut state = self.state.borrow_mut();
                if !state.queue.is_empty() {
                    break (
                        "events",
                        state.queue.take(usize::try_from(limit).unwrap_or(1)),
                    );
                }
                if state.closed {
                    break ("closed", Vec::new());
                }
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(deadline) => break ("timeout", Vec::new()),
            }
        };
        emit!(kind::WAITER_END, id = %id, outcome, count = events.len());
        let text = json!({"outcome": outcome, "events": events}).to_string();
        self.write(&jsonrpc::result(&id, jsonrpc::tool_result(&text, false)));
    }
}
