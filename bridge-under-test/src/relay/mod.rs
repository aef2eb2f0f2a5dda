//! The relay family (MODEL.md §1): an MCP client on stdio, the stdio-to-SSE bridge, and a mock
//! relayer hosting the tools, joined over HTTP with Server-Sent Events.

pub mod bridge;
pub mod client;
pub mod config;
pub mod http;
pub mod jsonrpc;
pub mod knobs;
pub mod relayer;
pub mod sse;
mod state;

pub use config::{BridgeConfig, RelayBugs, RelayerConfig};
pub use knobs::RelayerKnobs;

/// TCP port the relayer listens on.
pub const RELAYER_PORT: u16 = 8080;
