//! Network pieces shared by the families: HTTP/1.1 over the seam's simulated TCP, and JSON-RPC
//! message shapes and envelopes.

pub mod http;
pub mod jsonrpc;
