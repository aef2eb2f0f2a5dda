//! Configuration of the bridge and the mock relayer, with MODEL.md §1.3's constants as defaults
//! and the family's bug switches.

use serde::{Deserialize, Serialize};

crate::bug_switches! {
    /// The relay regressions of MODEL.md §1.5. Each field puts one regression back.
    RelayBugs {
        /// No per-call deadline and no sweeper: an unanswered call hangs forever.
        no_call_deadline,
        /// A replay restamps `started_at`, pushing the deadline out on every flap.
        refresh_deadline_on_replay,
        /// Replies for ids no longer in flight are forwarded: a late reply is a second response.
        no_closed_out_filter,
        /// Sweep period `max(500, timeout/3)` without the 5 000 ms cap: close-out up to a third late.
        uncapped_sweep_period,
        /// A replay re-POSTs without the idempotency key: the relayer may execute a write twice.
        no_idempotency_key,
        /// Close-out says "relayer unavailable, retry", inviting duplicate writes.
        relayer_unavailable_wording,
        /// The default call deadline sits below the slowest tool's own deadline.
        deadline_below_tool,
    }
}

/// The bridge's configuration. Every duration is in virtual milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BridgeConfig {
    /// Host name (or address) of the relayer.
    pub relayer: String,
    /// The relayer's port.
    pub relayer_port: u16,
    /// The path of the relayer's stream (`GET`): the endpoint event names where to POST.
    pub sse_path: String,
    /// Bearer token sent with every request.
    pub token: String,
    /// Watchdog: stream silence longer than this aborts it.
    pub sse_idle_ms: u64,
    /// The slowest relayer tool's own deadline (`analyze`).
    pub slowest_tool_ms: u64,
    /// Headroom the default call deadline leaves above the slowest tool.
    pub deadline_margin_ms: u64,
    /// Explicit per-call deadline; values below 1 000 are ignored.
    pub call_timeout_ms: Option<u64>,
    /// How many closed-out ids are remembered at most.
    pub closed_out_cap: usize,
    /// How long a closed-out id is remembered.
    pub closed_out_retention_ms: u64,
    /// Retries of a POST answered 429 or 5xx before the call fails.
    pub post_retries: u32,
    /// Seed of the bridge's randomness (idempotency keys).
    pub seed: u64,
    pub bugs: RelayBugs,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self {
            relayer: crate::events::host::RELAYER.to_string(),
            relayer_port: super::RELAYER_PORT,
            sse_path: "/sse".to_string(),
            token: "token-0".to_string(),
            sse_idle_ms: 30_000,
            slowest_tool_ms: 180_000,
            deadline_margin_ms: 60_000,
            call_timeout_ms: None,
            closed_out_cap: 1_024,
            closed_out_retention_ms: 600_000,
            post_retries: 2,
            seed: 0,
            bugs: RelayBugs::default(),
        }
    }
}

impl BridgeConfig {
    /// The per-call deadline: an explicit value of at least 1 000 ms, or the slowest tool plus
    /// the margin.
    pub fn call_timeout_ms(&self) -> u64 {
        match self.call_timeout_ms {
            Some(ms) if ms >= 1_000 => ms,
            _ if self.bugs.deadline_below_tool => self.slowest_tool_ms * 2 / 3,
            _ => self.slowest_tool_ms + self.deadline_margin_ms,
        }
    }

    /// The orphan sweeper's period: `min(5 000, max(500, timeout / 3))`.
    pub fn sweep_period_ms(&self) -> u64 {
        let uncapped = (self.call_timeout_ms() / 3).max(500);
        if self.bugs.uncapped_sweep_period {
            uncapped
        } else {
            uncapped.min(5_000)
        }
    }

    /// How often the watchdog looks at the stream: `max(500, idle / 3)`.
    pub fn watchdog_period_ms(&self) -> u64 {
        (self.sse_idle_ms / 3).max(500)
    }

    /// Delay before reconnect attempt `attempt` (0-based): `min(15 000, 500 * 2^attempt)`.
    pub fn backoff_ms(attempt: u32) -> u64 {
        500u64.saturating_mul(1u64 << attempt.min(20)).min(15_000)
    }
}

/// The mock relayer's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RelayerConfig {
    /// The bearer token it accepts.
    pub token: String,
    /// Delay of the first keep-alive comment on a new stream.
    pub first_keepalive_ms: u64,
    /// Period of the keep-alive comments after the first.
    pub keepalive_ms: u64,
    /// `analyze`'s own deadline: the slowest tool.
    pub analyze_deadline_ms: u64,
    /// `remember`'s own deadline.
    pub remember_deadline_ms: u64,
    /// Seed of the relayer's randomness (session ids, frame splitting).
    pub seed: u64,
    /// `host:port` as clients reach it, for endpoint events that name an absolute URL.
    pub authority: String,
    /// It sends log messages and tool-list changes of its own (the live engine's server
    /// traffic), and so declares the `logging` and `tools.listChanged` capabilities; a server
    /// declares only what it uses, and a client may act on a declaration (rmcp's does).
    pub announces: bool,
}

impl Default for RelayerConfig {
    fn default() -> Self {
        Self {
            token: "token-0".to_string(),
            first_keepalive_ms: 200,
            keepalive_ms: 3_000,
            analyze_deadline_ms: 180_000,
            remember_deadline_ms: 90_000,
            seed: 0,
            authority: format!("{}:{}", crate::events::host::RELAYER, super::RELAYER_PORT),
            announces: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_model() {
        let config = BridgeConfig::default();
        assert_eq!(config.call_timeout_ms(), 240_000);
        assert_eq!(config.sweep_period_ms(), 5_000);
        assert_eq!(config.watchdog_period_ms(), 10_000);
        assert_eq!(BridgeConfig::backoff_ms(0), 500);
        assert_eq!(BridgeConfig::backoff_ms(3), 4_000);
        assert_eq!(BridgeConfig::backoff_ms(9), 15_000);
    }

    #[test]
    fn small_explicit_timeouts_are_ignored() {
        let config = BridgeConfig { call_timeout_ms: Some(999), ..BridgeConfig::default() };
        assert_eq!(config.call_timeout_ms(), 240_000);
        let config = BridgeConfig { call_timeout_ms: Some(2_000), ..BridgeConfig::default() };
        assert_eq!(config.call_timeout_ms(), 2_000);
        assert_eq!(config.sweep_period_ms(), 666);
    }

    #[test]
    fn the_switches_put_the_regressions_back() {
        let mut bugs = RelayBugs::default();
        bugs.enable("uncapped_sweep_period").unwrap();
        bugs.enable("deadline_below_tool").unwrap();
        let config = BridgeConfig { bugs, ..BridgeConfig::default() };
        assert_eq!(config.call_timeout_ms(), 120_000);
        assert_eq!(config.sweep_period_ms(), 40_000);
        assert_eq!(bugs.enabled(), ["uncapped_sweep_period", "deadline_below_tool"]);
        assert!(RelayBugs::default().enable("nope").unwrap_err().contains("no_call_deadline"));
    }
}
