//! The daemon family (MODEL.md §2): CLI invocations sharing a keep-alive daemon over a local
//! socket, the daemon's warm connection to an upstream MCP server protected by OAuth, the mock
//! authorization server and the user's browser.
//!
//! Hosts: `cli` (the invocations), `daemon` (the process table's daemon processes: each launch
//! is a task with a fresh pid, its own socket port and callback port), `mcp`, `oauth`,
//! `browser`. The CLI and the daemon are on one machine; they are two turmoil hosts so that the
//! trace names which side did what and a daemon crash leaves the CLI running.

pub mod authorize;
pub mod browser;
pub mod client;
pub mod config;
pub mod knobs;
pub mod machine;
pub mod mcp;
pub mod methods;
pub mod oauth;
pub mod pkce;
pub mod process;
pub mod replace;
pub mod serve;
pub mod upstream;
pub mod wire;

pub use config::{DaemonBugs, Rules, Timing};

/// The upstream MCP server's port; it serves `POST /mcp`.
pub const MCP_PORT: u16 = 8000;
/// The authorization server's port.
pub const OAUTH_PORT: u16 = 9000;
/// The browser's port: the daemon asks it to open a URL with `POST /open`.
pub const BROWSER_PORT: u16 = 9100;
/// A daemon's socket is `SOCKET_BASE + pid`.
pub const SOCKET_BASE: u16 = 7000;
/// A daemon's OAuth redirect listener is `CALLBACK_BASE + pid`.
pub const CALLBACK_BASE: u16 = 7500;
/// The name of the upstream server in daemon requests.
pub const SERVER_NAME: &str = "mcp";

/// The port of a pid's socket or callback listener (pids stay far below 500).
pub fn port(base: u16, pid: u64) -> u16 {
    base + u16::try_from(pid % 400).unwrap_or(0)
}
