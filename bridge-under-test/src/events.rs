//! The trace schema: host names, event kinds and the fields each kind carries. This is a stable,
//! documented contract between the components (which emit) and the checkers (which read).
//!
//! Every event is a `tracing` event with target [`TARGET`] and a `kind` field holding one of the
//! constants below; the other fields are plain values. Emit with [`emit!`](crate::emit).
//!
//! | kind | host | fields |
//! |---|---|---|
//! | `mcp.send` | client | `msg` (the exact line written to stdin), `malformed` |
//! | `mcp.recv` | client | `msg` (the exact line read from stdout) |
//! | `client.eof` | client | `reason` (`fault` or `end`): the client closed stdin |
//! | `bridge.start` | bridge | `call_timeout_ms`, `sweep_period_ms`, `sse_idle_ms` (as the bridge computed them) |
//! | `bridge.exit` | bridge | `failed` (requests failed at shutdown) |
//! | `call.admit` | bridge | `id`, `method`, `key` (idempotency key) |
//! | `call.reply` | bridge | `id`, `source` (`upstream`, `local`, `close_out`, `rejected`, `shutdown`) |
//! | `call.closed_out` | bridge | `id`, `method`, `age_ms`, `stream` (`up` or `down`), `remembered` (closed-out ids kept) |
//! | `reply.dropped` | bridge | `id`, `reason` (`closed_out`, `unknown`, `suppressed`) |
//! | `post.send` | bridge | `id` (or empty), `method`, `key`, `gen`, `replay`, `tracked` (an owed request, not a note), `attempt` |
//! | `post.status` | bridge | `id`, `status` (HTTP status, 0 for a network error), `attempt` |
//! | `sse.connect` | bridge | `gen`, `attempt` |
//! | `sse.endpoint` | bridge | `gen`, `session` |
//! | `sse.closed` | bridge | `gen`, `reason` (`eof`, `idle`, `error`, `orphans`, `expired`) |
//! | `relayer.start` | relayer | `boot` |
//! | `stream.open` / `stream.close` | relayer | `session` |
//! | `http.post` | relayer | `session`, `id`, `method`, `key`, `status` |
//! | `tool.exec` | relayer | `id`, `tool`, `action`, `key`, `session` (a real execution) |
//! | `tool.dedup` | relayer | `id`, `key`, `session` (a replay answered from the execution log) |
//! | `tool.done` | relayer | `id`, `tool`, `action`, `key`, `elapsed_ms`, `ok` (a committed effect when true) |
//! | `reply.sent` / `reply.lost` | relayer | `id`, `session` |
//! | `fault.injected` | sim | `fault` (variant name) and the fault's own fields |
//! | `fault.fired` | relayer | `fault`, `id`: a mock knob took effect |
//! | `run.spec` | sim | the constants checkers judge against (see the harness) |

/// The `tracing` target of every trace event; everything else is ignored by the recorder.
pub const TARGET: &str = "mcp_sim";

pub mod host {
    //! Host names: the turmoil host each component runs on.
    pub const CLIENT: &str = "client";
    pub const BRIDGE: &str = "bridge";
    pub const RELAYER: &str = "relayer";
    /// Events the harness's step loop emits (faults, the spec), outside any host.
    pub const SIM: &str = "sim";
}

pub mod kind {
    //! Event kinds. See the module table above for the fields of each.
    pub const MCP_SEND: &str = "mcp.send";
    pub const MCP_RECV: &str = "mcp.recv";
    pub const CLIENT_EOF: &str = "client.eof";
    pub const BRIDGE_START: &str = "bridge.start";
    pub const BRIDGE_EXIT: &str = "bridge.exit";
    pub const CALL_ADMIT: &str = "call.admit";
    pub const CALL_REPLY: &str = "call.reply";
    pub const CALL_CLOSED_OUT: &str = "call.closed_out";
    pub const REPLY_DROPPED: &str = "reply.dropped";
    pub const POST_SEND: &str = "post.send";
    pub const POST_STATUS: &str = "post.status";
    pub const SSE_CONNECT: &str = "sse.connect";
    pub const SSE_ENDPOINT: &str = "sse.endpoint";
    pub const SSE_CLOSED: &str = "sse.closed";
    pub const RELAYER_START: &str = "relayer.start";
    pub const STREAM_OPEN: &str = "stream.open";
    pub const STREAM_CLOSE: &str = "stream.close";
    pub const HTTP_POST: &str = "http.post";
    pub const TOOL_EXEC: &str = "tool.exec";
    pub const TOOL_DEDUP: &str = "tool.dedup";
    pub const TOOL_DONE: &str = "tool.done";
    pub const REPLY_SENT: &str = "reply.sent";
    pub const REPLY_LOST: &str = "reply.lost";
    pub const FAULT_INJECTED: &str = "fault.injected";
    pub const FAULT_FIRED: &str = "fault.fired";
    pub const RUN_SPEC: &str = "run.spec";
}

/// Emit a trace event: `emit!(kind::SSE_ENDPOINT, gen = 3, session = %id)`.
#[macro_export]
macro_rules! emit {
    ($kind:expr $(, $($fields:tt)*)?) => {
        ::tracing::info!(target: $crate::events::TARGET, kind = $kind $(, $($fields)*)?)
    };
}
