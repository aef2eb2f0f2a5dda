//! Network pieces shared by the families: HTTP/1.1 over the seam's simulated TCP, JSON-RPC
//! message shapes and envelopes, and URL / form encoding.

pub mod http;
pub mod jsonrpc;
pub mod url;
