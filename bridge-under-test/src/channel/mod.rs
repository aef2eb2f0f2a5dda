//! The channel family (MODEL.md §3): an MCP agent on stdio, the channel bridge holding pending
//! permission requests and approvals, and a chat gateway over a real WebSocket.

pub mod agent;
pub mod bridge;
mod bridge_socket;
mod bridge_state;
pub mod config;
pub mod gateway;
pub mod grammar;
pub mod pending;
pub mod queue;
mod waiter;
pub mod wire;

pub use config::{ChannelBugs, ChannelConfig, CLOCK_BASE_MS};

/// TCP port the gateway's WebSocket listens on.
pub const GATEWAY_PORT: u16 = 18_789;

/// Format an optional number for a trace field: the number, or empty when absent.
pub fn opt(value: Option<i64>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

/// A task tied to its handle: dropping the handle aborts it.
pub struct Owned(tokio::task::JoinHandle<()>);

impl Drop for Owned {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Spawn `future` on this host, owned by the returned handle.
pub fn spawn_owned(future: impl std::future::Future<Output = ()> + 'static) -> Owned {
    Owned(tokio::task::spawn_local(future))
}
