//! The daemon family's constants (MODEL.md §2.3), its timing, and its bug switches. The
//! deadline arithmetic that a switch changes lives here, in one place per rule.

use serde::{Deserialize, Serialize};

crate::bug_switches! {
    /// The daemon regressions of MODEL.md §2.5. Each field puts one regression back.
    DaemonBugs {
        /// listTools forwards no timeout: the OAuth wait and every page use the SDK's default.
        sdk_default_timeout,
        /// An OAuth or ceiling timeout is reported as `runtime_error`, which the client retries.
        operation_timeout_retryable,
        /// The client gives listTools a fixed socket budget of `2·T + 5 000`, never re-armed.
        fixed_phase_socket_budget,
        /// The daemon never writes progress frames.
        no_progress_frames,
        /// Fixed-phase methods have heartbeats but no absolute operation ceiling.
        no_operation_ceiling,
        /// No repeated-cursor check while paging.
        no_cursor_guard,
        /// The first frame waits one default interval (250 ms) instead of going out at dispatch.
        late_first_frame,
        /// The cadence is floored at 250 ms whatever the caller's deadline.
        cadence_floor,
        /// A stale daemon is stopped at once, without waiting for its requests to drain.
        stop_without_drain,
        /// The drain polls with a pid-filtered probe: a swapped daemon reads as drained, and the
        /// `stop` goes to whatever daemon the metadata names, unaddressed.
        pid_filtered_drain_probe,
        /// The pid-mismatch short-circuit applies only when the live daemon's config is fresh:
        /// a peer's daemon with old config is drained and stopped as if it were the target.
        pid_shortcut_needs_fresh_config,
        /// Progress frames go to every client, whatever its protocol version.
        frames_to_v1_clients,
    }
}

/// The daemon protocol version this build speaks.
pub const PROTOCOL_VERSION: u64 = 2;
/// `progress_interval_ms`: the default cadence and the cap on a requested one.
pub const PROGRESS_INTERVAL_MS: u64 = 250;
/// `max_pages`: the hard cap on pages in one listing.
pub const MAX_PAGES: u32 = 100;
/// The constant in the regressed fixed-phase socket budget `2·T + 5 000`.
pub const FIXED_BUDGET_EXTRA_MS: u64 = 5_000;
/// How long a client waits for a stopped daemon to go, polling every [`POLL_MS`].
pub const STOP_WAIT_MS: u64 = 5_000;
/// How long a client waits for a launched daemon to be ready, polling every [`POLL_MS`].
pub const READY_WAIT_MS: u64 = 10_000;
pub const POLL_MS: u64 = 100;
/// `drain_timeout_ms`: how long a client waits for a busy daemon to go idle before refusing to
/// replace it, polling `status` every [`POLL_MS`].
pub const DRAIN_TIMEOUT_MS: u64 = 60_000;
/// `status_timeout_min_ms`: the budget of a control request (`status`, `stop`).
pub const STATUS_TIMEOUT_MIN_MS: u64 = 1_000;

/// The timeouts a scenario may compress (MODEL.md §2.3 by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// How long the authorization code wait may take.
    pub oauth_timeout_ms: u64,
    /// An MCP SDK's default per-request timeout.
    pub sdk_request_timeout_ms: u64,
    /// The default per-connection idle budget when a call gives no `timeoutMs`.
    pub daemon_timeout_ms: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            oauth_timeout_ms: 300_000,
            sdk_request_timeout_ms: 60_000,
            daemon_timeout_ms: 30_000,
        }
    }
}

/// The deadlines both sides derive from a call's `timeoutMs` and the switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    pub timing: Timing,
    pub bugs: DaemonBugs,
}

/// How the client bounds a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketBudget {
    /// Idle budget: expires this long after the last matching frame.
    Idle(u64),
    /// Absolute budget from the request, never re-armed.
    Fixed(u64),
}

impl Rules {
    /// The caller's deadline `d`: the call's `timeoutMs`, else `daemon_timeout_ms`.
    pub fn caller_deadline_ms(&self, timeout_ms: Option<u64>) -> u64 {
        timeout_ms.unwrap_or(self.timing.daemon_timeout_ms)
    }

    /// The cadence a client asks for: `min(250, max(1, d/3))`.
    pub fn requested_interval_ms(&self, timeout_ms: Option<u64>) -> u64 {
        (self.caller_deadline_ms(timeout_ms) / 3).clamp(1, PROGRESS_INTERVAL_MS)
    }

    /// The client's socket budget for `method`.
    pub fn socket_budget(&self, method: &str, timeout_ms: Option<u64>) -> SocketBudget {
        let deadline = self.caller_deadline_ms(timeout_ms);
        if self.bugs.fixed_phase_socket_budget && method == "listTools" {
            SocketBudget::Fixed(2 * deadline + FIXED_BUDGET_EXTRA_MS)
        } else {
            SocketBudget::Idle(deadline)
        }
    }

    /// The daemon's frame cadence for a requested interval: `min(requested, 250)`.
    pub fn frame_interval_ms(&self, requested_ms: u64) -> u64 {
        let interval = requested_ms.clamp(1, PROGRESS_INTERVAL_MS);
        if self.bugs.cadence_floor {
            interval.max(PROGRESS_INTERVAL_MS)
        } else {
            interval
        }
    }

    /// When the first frame goes out after dispatch.
    pub fn first_frame_ms(&self) -> u64 {
        if self.bugs.late_first_frame {
            PROGRESS_INTERVAL_MS
        } else {
            0
        }
    }

    /// listTools's bound on the OAuth wait: `timeoutMs`, else `oauth_timeout_ms`.
    pub fn list_oauth_bound_ms(&self, timeout_ms: Option<u64>) -> u64 {
        if self.bugs.sdk_default_timeout {
            self.timing.sdk_request_timeout_ms
        } else {
            timeout_ms.unwrap_or(self.timing.oauth_timeout_ms)
        }
    }

    /// listTools's per-page deadline: `timeoutMs`, else the SDK default.
    pub fn page_bound_ms(&self, timeout_ms: Option<u64>) -> u64 {
        if self.bugs.sdk_default_timeout {
            self.timing.sdk_request_timeout_ms
        } else {
            timeout_ms.unwrap_or(self.timing.sdk_request_timeout_ms)
        }
    }

    /// The absolute ceiling of a fixed-phase method: `oauth_timeout + (timeoutMs or 60 000)`.
    pub fn ceiling_ms(&self, timeout_ms: Option<u64>) -> Option<u64> {
        let ceiling =
            self.timing.oauth_timeout_ms + timeout_ms.unwrap_or(self.timing.sdk_request_timeout_ms);
        (!self.bugs.no_operation_ceiling).then_some(ceiling)
    }
}

/// Whether a method races the operation ceiling.
pub fn fixed_phase(method: &str) -> bool {
    matches!(
        method,
        "callTool" | "listResources" | "readResource" | "closeServer"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_model() {
        let rules = Rules {
            timing: Timing::default(),
            bugs: DaemonBugs::default(),
        };
        assert_eq!(rules.requested_interval_ms(Some(30)), 10);
        assert_eq!(rules.requested_interval_ms(Some(2)), 1);
        assert_eq!(rules.requested_interval_ms(None), 250);
        assert_eq!(rules.frame_interval_ms(400), 250);
        assert_eq!(rules.first_frame_ms(), 0);
        assert_eq!(
            rules.socket_budget("listTools", Some(400)),
            SocketBudget::Idle(400)
        );
        assert_eq!(rules.list_oauth_bound_ms(None), 300_000);
        assert_eq!(rules.page_bound_ms(None), 60_000);
        assert_eq!(rules.ceiling_ms(None), Some(360_000));
    }

    #[test]
    fn the_switches_put_the_regressions_back() {
        let mut bugs = DaemonBugs::default();
        for name in DaemonBugs::NAMES {
            bugs.enable(name).unwrap();
        }
        let rules = Rules {
            timing: Timing::default(),
            bugs,
        };
        assert_eq!(rules.frame_interval_ms(10), 250);
        assert_eq!(rules.first_frame_ms(), 250);
        assert_eq!(
            rules.socket_budget("listTools", Some(400)),
            SocketBudget::Fixed(5_800)
        );
        assert_eq!(
            rules.socket_budget("callTool", Some(400)),
            SocketBudget::Idle(400)
        );
        assert_eq!(rules.list_oauth_bound_ms(None), 60_000);
        assert_eq!(rules.ceiling_ms(Some(5)), None);
    }
}
