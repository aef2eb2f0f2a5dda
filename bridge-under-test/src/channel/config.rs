//! Configuration of the channel bridge and its mock gateway, with MODEL.md §3.3's constants as
//! defaults and the family's bug switches.

use serde::{Deserialize, Serialize};

crate::bug_switches! {
    /// The channel regressions of MODEL.md §3.5. Each field puts one regression back.
    ChannelBugs {
        /// Maps only shrink on a matching reply or resolved frame: no sweeper, no expiry.
        no_ttl,
        /// Expiry recomputed as `(createdAtMs or now) + 30 min` on every sweep tick.
        reanchor_fallback_ttl,
        /// `close()` leaves both maps, the queue and the sweeper in place.
        no_close_clear,
        /// Handlers still run after `close()`: entries inserted, the sweeper restarted.
        no_closed_guard,
        /// The sweeper starts at construction and never stops itself.
        eager_sweeper,
        /// Reads return expired entries until the next sweep tick removes them.
        no_read_filter,
        /// Anyone's `yes <id>` resolves a permission, not only the owner's.
        no_owner_check,
        /// No per-map cap: a burst grows the maps without bound until the TTL.
        no_pending_cap,
    }
}

/// The wall-clock reading of both peers at the start of a run (2026-01-01T00:00:00Z, in ms):
/// the gateway stamps `createdAtMs`/`expiresAtMs` on this scale, offset by its own skew.
pub const CLOCK_BASE_MS: u64 = 1_767_225_600_000;

/// The bridge's configuration. Durations are virtual milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChannelConfig {
    /// Host name of the gateway.
    pub gateway: String,
    /// The chat session the bridge serves; messages of other sessions are not for it.
    pub session_key: String,
    /// Event queue bound; the oldest event is dropped beyond it.
    pub queue_limit: usize,
    /// Permission lifetime, anchored at local receipt (also the cap on an approval's expiry).
    pub permission_ttl_ms: u64,
    /// Approval lifetime when `expiresAtMs` is absent, anchored at local tracking time.
    pub approval_default_ttl_ms: u64,
    pub sweep_interval_ms: u64,
    /// Entries per map; the oldest is evicted beyond it.
    pub pending_cap: usize,
    /// `waitForEvent` timeout clamp.
    pub wait_min_ms: u64,
    pub wait_max_ms: u64,
    /// Most events one `waitForEvent` returns.
    pub poll_limit_max: u64,
    /// The bridge's wall clock at its start.
    pub clock_base_ms: u64,
    /// Longest delay between gateway reconnect attempts.
    pub reconnect_max_ms: u64,
    /// Seed of the bridge's randomness (the WebSocket handshake key).
    pub seed: u64,
    pub bugs: ChannelBugs,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            gateway: crate::events::host::GATEWAY.to_string(),
            session_key: "main".to_string(),
            queue_limit: 1_000,
            permission_ttl_ms: 3_600_000,
            approval_default_ttl_ms: 1_800_000,
            sweep_interval_ms: 300_000,
            pending_cap: 1_000,
            wait_min_ms: 1,
            wait_max_ms: 300_000,
            poll_limit_max: 200,
            clock_base_ms: CLOCK_BASE_MS,
            reconnect_max_ms: 30_000,
            seed: 0,
            bugs: ChannelBugs::default(),
        }
    }
}

impl ChannelConfig {
    /// A `waitForEvent` timeout clamped to `[wait_min_ms, wait_max_ms]`.
    pub fn clamp_wait_ms(&self, requested: i64) -> u64 {
        u64::try_from(requested.max(0))
            .unwrap_or(0)
            .clamp(self.wait_min_ms, self.wait_max_ms)
    }

    /// Delay before reconnect attempt `attempt` (0-based): `min(max, 1 000 * 2^attempt)`.
    pub fn reconnect_ms(&self, attempt: u32) -> u64 {
        1_000u64
            .saturating_mul(1u64 << attempt.min(20))
            .min(self.reconnect_max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_model() {
        let config = ChannelConfig::default();
        assert_eq!(config.permission_ttl_ms, 3_600_000);
        assert_eq!(config.approval_default_ttl_ms, 1_800_000);
        assert_eq!(config.sweep_interval_ms, 300_000);
        assert_eq!((config.pending_cap, config.queue_limit), (1_000, 1_000));
        assert_eq!(config.clamp_wait_ms(0), 1);
        assert_eq!(config.clamp_wait_ms(-5), 1);
        assert_eq!(config.clamp_wait_ms(9_000_000), 300_000);
        assert_eq!(config.reconnect_ms(0), 1_000);
        assert_eq!(config.reconnect_ms(9), 30_000);
    }

    #[test]
    fn the_switch_names_are_the_model_s() {
        assert_eq!(ChannelBugs::NAMES.len(), 8);
        let mut bugs = ChannelBugs::default();
        bugs.enable("no_owner_check").unwrap();
        assert_eq!(bugs.enabled(), ["no_owner_check"]);
        assert!(bugs.enable("nope").unwrap_err().contains("no_ttl"));
    }
}
