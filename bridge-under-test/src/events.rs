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
//! | `bridge.report` | bridge | the end-of-run resource report, at stdin EOF before anything is failed: `inflight`, `notes`, `suppressed`, `closed_out` (entry counts), `suppressed_age_ms`, `closed_out_age_ms` (the oldest entry's age, 0 when empty), `session` (a live session), `tasks` (the live tasks, `+`-joined: `connect`, `stream`, `pump`, `sweeper`, `watchdog`) |
//! | `session.init` | bridge | `gen`, `id` (the bridge's own `initialize` id for that session) |
//! | `call.admit` | bridge | `id`, `method`, `key` (idempotency key) |
//! | `call.reply` | bridge | `id`, `source` (`upstream`, `local`, `close_out`, `rejected`, `shutdown`) |
//! | `call.closed_out` | bridge | `id`, `method`, `age_ms`, `stream` (`up` or `down`), `remembered` (closed-out ids kept) |
//! | `reply.dropped` | bridge | `id`, `reason` (`closed_out`, `unknown`, `suppressed`) |
//! | `post.send` | bridge | `id` (or empty), `method`, `key`, `gen`, `replay`, `tracked` (an owed request, not a note), `attempt` |
//! | `post.status` | bridge | `id`, `status` (HTTP status, 0 for a network error), `attempt` |
//! | `sse.connect` | bridge | `gen`, `attempt` |
//! | `sse.endpoint` | bridge | `gen`, `session` |
//! | `sse.closed` | bridge | `gen`, `reason` (`eof`, `idle`, `error`, `orphans`, `expired`, `reinitialize`: the client's `initialize` came after the bridge initialized the session with made-up params) |
//! | `relayer.start` | relayer | `boot` |
//! | `stream.open` / `stream.close` | relayer | `session`; `style` (open: the wire form the stream writes, e.g. `crlf+nospace+multiline`); `by` (close: `client`, the bridge closed its connection, or `relayer`: a fault, or its session ended). Streamable HTTP only: `stream` (`post-N`, `get-N`, `json-N`: a session has several), `last_event_id` (open: set when a GET resumed a stream) |
//! | `http.post` | relayer | `session`, `id`, `method`, `action` (a `tools/call`'s `arguments.action`, else empty), `key`, `status` |
//! | `rpc.cancel` | relayer | `request` (the `requestId` a `notifications/cancelled` names, as JSON text), `session` |
//! | `rpc.refused` | relayer | `id`, `method`, `action`, `session`, `reason` (`not_initialized`): answered with a JSON-RPC error, not served |
//! | `rpc.initialize` | relayer | `session`, `params` (the `initialize` params it served on that session, as JSON text) |
//! | `tool.exec` | relayer | `id`, `tool`, `action`, `key`, `session` (a real execution) |
//! | `tool.dedup` | relayer | `id`, `key`, `action`, `session` (a replay answered from the execution log) |
//! | `tool.done` | relayer | `id`, `tool`, `action`, `key`, `elapsed_ms`, `ok` (a committed effect when true) |
//! | `reply.sent` | relayer | `id`, `action`, `session`, `msg` (the JSON-RPC reply written to that session's stream) |
//! | `reply.lost` | relayer | `id`, `action`, `session` |
//! | `fault.injected` | sim | `fault` (variant name, or `heal` when injection stops and everything is repaired), `phase` (`start`/`end`), `detail` (the fault as JSON) |
//! | `fault.fired` | relayer | `fault`, `id`, `action`: a mock knob took effect |
//! | `run.spec` | sim | the constants checkers judge against (see the harness) |
//!
//! Live runs (the harness's live engine: a real bridge process on loopback) record the relay
//! vocabulary above at the boundaries they can see (the client's stdio, the server's HTTP), and
//! the bridge process itself:
//!
//! | kind | host | fields |
//! |---|---|---|
//! | `process.start` | bridge | `command` (as run by `sh -c`), `pid`, `transport` (the server's profile), `url` |
//! | `process.exit` | bridge | `code` (empty when killed by a signal), `signal` (empty when it exited), `by` (`self`: it exited on its own; `harness`: the case ended and its process group was killed) |
//!
//! The channel family (MODEL.md §3). Times named `*_at_ms`/`now_ms` are the bridge's wall clock
//! (ms since the Unix epoch), except the gateway's own stamps, which are on the gateway's clock.
//! Optional numbers are empty when absent.
//!
//! | kind | host | fields |
//! |---|---|---|
//! | `mcp.send` / `mcp.recv` | agent | `msg` (the exact line written to / read from the bridge) |
//! | `client.eof` | agent | `reason` (`end`): the agent closed stdin |
//! | `channel.start` | bridge | `permission_ttl_ms`, `approval_default_ttl_ms`, `sweep_interval_ms`, `pending_cap`, `queue_limit`, `clock_base_ms`, `session` |
//! | `channel.close` | bridge | `first`, `permissions`, `approvals`, `queue` (sizes after close), `timer` (sweeper alive after close) |
//! | `channel.exit` | bridge | `timer` (sweeper alive when the process ended) |
//! | `channel.line` | bridge | `now_ms`: the bridge read its next stdin line (the content is the agent's `mcp.send`, in order) |
//! | `channel.frame` | bridge | `now_ms`, `text` (the exact text frame read from the gateway) |
//! | `channel.report` | bridge | end-of-run resource report, taken at exit before the process drops anything: `closed`, `timer` (sweeper alive), `socket` (gateway task alive), `waiters` (waiter tasks alive), `permissions`, `approvals`, `queue` |
//! | `pending.add` | bridge | `map` (`permission`/`approval`), `id`, `now_ms`, `expires_at_ms` (the stored expiry), `created_at_ms`, `raw_expires_at_ms` (the gateway's, as received), `repeat` (a known id: entry kept), `permissions`, `approvals` (sizes after) |
//! | `pending.remove` | bridge | `map`, `id`, `reason` (`expired`, `resolved`, `reply`, `evicted`), `now_ms`, `permissions`, `approvals` |
//! | `pending.expiry` | bridge | `map`, `id`, `now_ms`, `expires_at_ms`: a stored expiry was recomputed |
//! | `pending.ignored` | bridge | `map`, `id`, `reason` (`closed`, `invalid`): a request not tracked |
//! | `sweeper.start` | bridge | `now_ms`, `reason` (`insert`, `construct`): the sweep timer now exists |
//! | `sweeper.tick` | bridge | `now_ms`, `removed`, `permissions`, `approvals` |
//! | `sweeper.stop` | bridge | `now_ms`, `reason` (`empty`, `close`): the sweep timer no longer exists |
//! | `queue.push` | bridge | `event`, `size` (after), `dropped` (the oldest was dropped) |
//! | `read.result` | bridge | `map`, `now_ms`, `ids` (comma-separated, as returned) |
//! | `waiter.start` | bridge | `id` (JSON-RPC id), `timeout_ms` (clamped), `limit` |
//! | `waiter.end` | bridge | `id`, `outcome` (`events`, `timeout`, `closed`), `count` |
//! | `operator.message` | bridge | `session`, `owner`, `outcome` (`decision`, `unknown`, `ordinary`, `other_session`, `closed`) |
//! | `decision.sent` | bridge | `id`, `behavior`, `owner` (as the gateway frame said) |
//! | `gateway.connect` | bridge | `attempt` |
//! | `gateway.open` | bridge | |
//! | `gateway.closed` | bridge | `reason` (`eof`, `error`) |
//! | `gateway.accept` | gateway | `accepted` (false while the gateway is down) |
//! | `gateway.send` | gateway | `event`, `id`, `created_at_ms`, `expires_at_ms` (gateway clock), `delivered` (false: lost, no connection) |
//! | `gateway.say` | gateway | `session`, `owner`, `text`, `delivered` |
//! | `gateway.cut` | gateway | `connected`: the gateway dropped its connection |
//! | `gateway.conn` | gateway | `conn`: a WebSocket connection is established (numbered from 1) |
//! | `gateway.end` | gateway | `conn` (connection number), `reason` (`cut`: the gateway dropped it; `peer`: the bridge left): a connection ended |
//! | `gateway.control` | gateway | `conn`, `frame` (`ping`, `close`), `delivered`: a control frame sent |
//!
//! The daemon family (MODEL.md §2). `id` is a daemon request id (`a<action>.<attempt>`, or
//! `c<action>.<n>-<method>` for the client's own control requests); `action` numbers the user's
//! invocations.
//!
//! | kind | host | fields |
//! |---|---|---|
//! | `cli.action` | cli | `action`, `method`, `timeout_ms` (0 when the call gives none), `client` (its lane), `version` (protocol): a user invocation starts |
//! | `cli.send` | cli | `action`, `attempt`, `id`, `pid` (the daemon the metadata named, whose socket it is sent to), `msg` (the exact request line) |
//! | `cli.frame` | cli | `id` (the frame's), `on` (the request whose connection read it), `matched` (it re-armed the idle budget) |
//! | `cli.reply` | cli | `id`, `ok`, `code` (empty on success) |
//! | `cli.fail` | cli | `id`, `reason` (`idle`, `budget`, `reset`, `refused`, `unparseable`): a transport failure |
//! | `cli.restart` | cli | `action`, `pid` (the daemon being replaced, 0 if none) |
//! | `cli.replace` | cli | `action`, `client`, `pid` (the daemon meant to be replaced), `reason` (`stale`, `transport`), `outcome` (`peer` before the drain, `peer_mid_drain`, `refused`, `replaced`, `started`): emitted when the decision ends |
//! | `cli.probe` | cli | `action`, `target` (the pid meant), `pid` (the live one, 0 if none), `active` (absent as empty): one drain poll |
//! | `cli.stop` | cli | `action`, `id`, `target` (the pid meant to be stopped), `addressed` (the pid in the request, 0 if none) |
//! | `cli.launch` | cli | `action`, `pid`, `version`, `config`: a launch under the start lock |
//! | `cli.done` | cli | `action`, `outcome` (`ok`, a daemon error code, or a transport reason), `attempts` |
//! | `cli.report` | cli | `pid`, `answered`, `active` (the `activeRequests` it read, empty if none): the end-of-run `status` of each live daemon, after the last invocation and a settle |
//! | `cli.settled` | cli | `metadata` (the pid the metadata file names, 0 if none), `live` (live pids, comma-separated), `locks` (lock files held, as `name@pid`): the end-of-run resource report |
//! | `cli.lock_break` | cli | `action`, `lock`, `holder` (the dead pid the lock file named): the CLI removed a stale lock |
//! | `machine.lock` | the caller's | `lock`, `holder` (the pid the file names), `op` (`take`, `free`, `break`, `orphan`: its holder ended holding it): the filesystem's record of a lock file |
//! | `machine.metadata` | the caller's | `pid` (the daemon the file names), `op` (`write`, `remove`): the filesystem's record of the daemon metadata file |
//! | `daemon.launch` | daemon | `pid`, `protocol_version` (the version of the binary launched): a daemon process starts (counted at the process table) |
//! | `daemon.start` | daemon | `pid`, `socket`, `protocol_version`, `config` (fingerprint): listening, metadata written |
//! | `daemon.exit` | daemon | `pid`, `reason` (`stop`, `crash`, `kill`, `superseded`: the metadata names another daemon and nothing was in flight) |
//! | `daemon.request` | daemon | `pid`, `id`, `method`, `interval_ms` (0: no frames), `first_ms` |
//! | `daemon.stop` | daemon | `pid`, `id`, `addressed` (0 if none), `active` (other requests in flight), `refused` |
//! | `daemon.reply` | daemon | `pid`, `id`, `ok`, `code` |
//! | `daemon.oauth` | daemon | `pid`, `id`, `phase` (`start`, `token`, `timeout`, `error`), `state` |
//! | `server.recv` | mcp | `msg` (the JSON-RPC message as received), `request` (the daemon request id from `_meta`), `auth` |
//! | `server.send` | mcp | `msg` (the JSON-RPC response), `status` (HTTP), `request` (the daemon request id of the message it answers) |
//! | `server.gone` | mcp | `request`: a received message's handler was dropped unanswered (the daemon closed its connection) |
//! | `server.exec` | mcp | `request`, `method`: a logical execution (`tools/call`, `resources/*`, the first page of `tools/list`) |
//! | `oauth.register` | oauth | `client_id` |
//! | `oauth.authorize` | oauth | `client_id`, `state`, `ok`: the user approved; a code was issued when ok |
//! | `oauth.token` | oauth | `client_id`, `grant` (`authorization_code` or `refresh_token`), `state` (of the authorization the code was issued for: the flow it resolves; empty for a refresh or an unknown code), `ok`, `error` (the OAuth error code, empty when ok), `lifetime_ms` (of the tokens it issues) |
//! | `browser.prompt` | browser | `flow` (count so far), `state`: an authorization flow started |
//! | `browser.approve` | browser | `flow`, `state`, `status` (of the redirect back to the daemon) |
//! | `fault.fired` | mcp, daemon | `fault`, `id`: a knob took effect |

/// The `tracing` target of every trace event; everything else is ignored by the recorder.
pub const TARGET: &str = "mcp_sim";

pub mod host {
    //! Host names: the turmoil host each component runs on.
    pub const CLIENT: &str = "client";
    pub const BRIDGE: &str = "bridge";
    pub const RELAYER: &str = "relayer";
    /// The channel family's MCP client (Claude Code).
    pub const AGENT: &str = "agent";
    /// The channel family's chat gateway.
    pub const GATEWAY: &str = "gateway";
    /// The daemon family: CLI invocations, daemon processes, the upstream MCP server, the OAuth
    /// authorization server and the user's browser.
    pub const CLI: &str = "cli";
    pub const DAEMON: &str = "daemon";
    pub const MCP: &str = "mcp";
    pub const OAUTH: &str = "oauth";
    pub const BROWSER: &str = "browser";
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
    pub const BRIDGE_REPORT: &str = "bridge.report";
    pub const SESSION_INIT: &str = "session.init";
    pub const RPC_REFUSED: &str = "rpc.refused";
    pub const RPC_INITIALIZE: &str = "rpc.initialize";
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
    pub const RPC_CANCEL: &str = "rpc.cancel";
    pub const STREAM_CLOSE: &str = "stream.close";
    pub const STREAM_REFUSED: &str = "stream.refused";
    pub const HTTP_POST: &str = "http.post";
    pub const TOOL_EXEC: &str = "tool.exec";
    pub const TOOL_DEDUP: &str = "tool.dedup";
    pub const TOOL_DONE: &str = "tool.done";
    pub const REPLY_SENT: &str = "reply.sent";
    pub const REPLY_LOST: &str = "reply.lost";
    pub const FAULT_INJECTED: &str = "fault.injected";
    pub const FAULT_FIRED: &str = "fault.fired";
    pub const RUN_SPEC: &str = "run.spec";
    pub const PROCESS_START: &str = "process.start";
    pub const PROCESS_EXIT: &str = "process.exit";
    // The channel family.
    pub const CHANNEL_START: &str = "channel.start";
    pub const CHANNEL_CLOSE: &str = "channel.close";
    pub const CHANNEL_EXIT: &str = "channel.exit";
    pub const CHANNEL_LINE: &str = "channel.line";
    pub const CHANNEL_FRAME: &str = "channel.frame";
    pub const CHANNEL_REPORT: &str = "channel.report";
    pub const PENDING_ADD: &str = "pending.add";
    pub const PENDING_REMOVE: &str = "pending.remove";
    pub const PENDING_EXPIRY: &str = "pending.expiry";
    pub const PENDING_IGNORED: &str = "pending.ignored";
    pub const SWEEPER_START: &str = "sweeper.start";
    pub const SWEEPER_TICK: &str = "sweeper.tick";
    pub const SWEEPER_STOP: &str = "sweeper.stop";
    pub const QUEUE_PUSH: &str = "queue.push";
    pub const READ_RESULT: &str = "read.result";
    pub const WAITER_START: &str = "waiter.start";
    pub const WAITER_END: &str = "waiter.end";
    pub const OPERATOR_MESSAGE: &str = "operator.message";
    pub const DECISION_SENT: &str = "decision.sent";
    pub const GATEWAY_CONNECT: &str = "gateway.connect";
    pub const GATEWAY_OPEN: &str = "gateway.open";
    pub const GATEWAY_CLOSED: &str = "gateway.closed";
    pub const GATEWAY_ACCEPT: &str = "gateway.accept";
    pub const GATEWAY_SEND: &str = "gateway.send";
    pub const GATEWAY_SAY: &str = "gateway.say";
    pub const GATEWAY_CUT: &str = "gateway.cut";
    pub const GATEWAY_END: &str = "gateway.end";
    pub const GATEWAY_CONN: &str = "gateway.conn";
    pub const GATEWAY_CONTROL: &str = "gateway.control";
    // The daemon family.
    pub const CLI_ACTION: &str = "cli.action";
    pub const CLI_SEND: &str = "cli.send";
    pub const CLI_FRAME: &str = "cli.frame";
    pub const CLI_REPLY: &str = "cli.reply";
    pub const CLI_FAIL: &str = "cli.fail";
    pub const CLI_RESTART: &str = "cli.restart";
    pub const CLI_DONE: &str = "cli.done";
    pub const CLI_REPORT: &str = "cli.report";
    pub const CLI_SETTLED: &str = "cli.settled";
    pub const MACHINE_LOCK: &str = "machine.lock";
    pub const MACHINE_METADATA: &str = "machine.metadata";
    pub const CLI_LOCK_BREAK: &str = "cli.lock_break";
    pub const DAEMON_LAUNCH: &str = "daemon.launch";
    pub const DAEMON_START: &str = "daemon.start";
    pub const DAEMON_EXIT: &str = "daemon.exit";
    pub const DAEMON_REQUEST: &str = "daemon.request";
    pub const DAEMON_STOP: &str = "daemon.stop";
    pub const CLI_REPLACE: &str = "cli.replace";
    pub const CLI_PROBE: &str = "cli.probe";
    pub const CLI_STOP: &str = "cli.stop";
    pub const CLI_LAUNCH: &str = "cli.launch";
    pub const DAEMON_REPLY: &str = "daemon.reply";
    pub const DAEMON_OAUTH: &str = "daemon.oauth";
    pub const SERVER_RECV: &str = "server.recv";
    pub const SERVER_SEND: &str = "server.send";
    pub const SERVER_EXEC: &str = "server.exec";
    pub const SERVER_GONE: &str = "server.gone";
    pub const OAUTH_REGISTER: &str = "oauth.register";
    pub const OAUTH_AUTHORIZE: &str = "oauth.authorize";
    pub const OAUTH_TOKEN: &str = "oauth.token";
    pub const BROWSER_PROMPT: &str = "browser.prompt";
    pub const BROWSER_APPROVE: &str = "browser.approve";
}

/// Emit a trace event: `emit!(kind::SSE_ENDPOINT, gen = 3, session = %id)`.
#[macro_export]
macro_rules! emit {
    ($kind:expr $(, $($fields:tt)*)?) => {
        ::tracing::info!(target: $crate::events::TARGET, kind = $kind $(, $($fields)*)?)
    };
}
