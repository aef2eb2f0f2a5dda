//! The relay family (MODEL.md §1): an MCP client on stdio, the stdio-to-SSE bridge, and a mock
//! relayer hosting the tools, joined over HTTP with Server-Sent Events.

pub mod bridge;
pub mod client;
pub mod config;
pub mod knobs;
pub mod relayer;
pub mod sse;
mod state;

/// The shared HTTP and JSON-RPC helpers, at their former paths.
pub use crate::net::{http, jsonrpc};

pub use config::{BridgeConfig, RelayBugs, RelayerConfig};
pub use knobs::RelayerKnobs;

/// TCP port the relayer listens on.
pub const RELAYER_PORT: u16 = 8080;
