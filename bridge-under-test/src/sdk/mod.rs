//! The sdk family: a stdio ⇄ Streamable HTTP bridge built on rmcp, the official Rust SDK, as an
//! author following its documentation writes one (`bridge.rs`), on an rmcp
//! `StreamableHttpClient` over hyper and the seam's TCP (`http_client.rs`). It has no bug
//! switches: what the harness finds in it is rmcp's behaviour.

pub mod bridge;
pub mod http_client;

pub use bridge::{run, Proxy, SdkBridgeConfig};

crate::bug_switches! {
    /// The family's switches. The system under test is rmcp as released; a switch turns off a
    /// workaround the bridge carries for an rmcp defect (docs/findings.md), so the defect's
    /// token still replays it.
    SdkBugs {
        /// Forward a client notification's `_meta` from `NotificationContext::meta`, as rmcp's
        /// API offers it. rmcp 3.11.0 leaves that empty (src/service.rs:1775-1776 moves the
        /// extensions out before the meta); the bridge reads the meta from
        /// `context.extensions` instead.
        notification_context_meta,
    }
}
