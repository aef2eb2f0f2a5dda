//! The mock relayer: hosts the MCP server and its tools, with an execution log keyed by
//! idempotency key and the fault knobs of [`RelayerKnobs`](super::RelayerKnobs). It speaks one
//! [`Transport`] per run:
//!
//! - `relayer`: the relay family's API, `GET /sse` (the reply stream) and
//!   `POST /messages?sessionId=..` (202 / 404 / 401 / 429 / 5xx); `relayer/legacy.rs`;
//! - `sse`: MCP 2024-11-05 HTTP+SSE on the same two routes, as strict as a real server;
//!   `relayer/legacy.rs`;
//! - `streamable_http`: MCP Streamable HTTP (2025-03-26, 2025-06-18, 2025-11-25) on `/mcp`;
//!   `relayer/streamable.rs`.
//!
//! The MCP server behind them is one: the lifecycle, the tools, the execution log and the reply
//! knobs (swallow, late, duplicate, withhold) act in `App::dispatch` and `App::send_reply`, and
//! every stream is written by `relayer/writer.rs` (seeded chunking, the wire styles, keep-alives,
//! the stall, EOF and flap knobs), whatever the transport.

mod legacy;
mod streamable;
#[cfg(test)]
mod tests;
mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::model::{ListToolsResult, Tool as McpTool};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::config::RelayerConfig;
use super::knobs::{lock, SharedKnobs};
use super::sse::Style;
use super::RELAYER_PORT;
use crate::emit;
use crate::events::kind;
use crate::net::http;
use crate::net::jsonrpc::{self, id_key, Shape};
use crate::rng::SimRng;
use crate::seam;

/// What survives a relayer bounce: its database (the execution log), its boot count, the
/// sessions it ever issued (so a POST to one it lost is told apart from one it never issued),
/// and the ids its own requests to clients were named by (so an answer POSTed after a restart
/// is logged as the answer it is).
#[derive(Debug, Default)]
pub struct Durable {
    boots: u64,
    log: BTreeMap<String, Execution>,
    issued: BTreeSet<String>,
    asked: BTreeMap<(String, String), Value>,
}

pub type SharedDurable = Arc<Mutex<Durable>>;

/// Count a new incarnation of a server over `durable` and forget executions a restart cut short;
/// returns its boot number. (The mock's own start, shared with the sdk family's rmcp server.)
pub(crate) fn begin_boot(durable: &SharedDurable) -> u64 {
    let mut durable = lock(durable);
    durable.boots += 1;
    // An execution cut short by the restart never committed: forget it.
    durable.log.retain(|_, execution| execution.done.is_some());
    durable.boots
}

/// Remember that `session` was issued (it outlives a restart, so a request naming it after one
/// is told apart from one naming a session never issued).
pub(crate) fn issue(durable: &SharedDurable, session: &str) {
    lock(durable).issued.insert(session.to_string());
}

/// Whether `session` was ever issued.
pub(crate) fn was_issued(durable: &SharedDurable, session: &str) -> bool {
    lock(durable).issued.contains(session)
}

/// Remember that the server's request `id` on `session` is named `named` in the log (the sdk
/// family's rmcp numbers its own requests; the id its `_meta` names is the mock's).
pub(crate) fn remember_asked(durable: &SharedDurable, session: &str, id: &Value, named: Value) {
    lock(durable).asked.insert((session.to_string(), id_key(id)), named);
}

/// The name [`remember_asked`] gave the server's request `id` on `session`, in any incarnation.
pub(crate) fn asked_as(durable: &SharedDurable, session: &str, id: &Value) -> Option<Value> {
    lock(durable).asked.get(&(session.to_string(), id_key(id))).cloned()
}

#[derive(Debug)]
struct Execution {
    /// The session the reply goes to: the latest one that asked.
    reply_to: String,
    /// The reply, once the tool finished.
    done: Option<Value>,
}

/// The HTTP transport the relayer speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// The relay family's own API (`GET /sse`, `POST /messages?sessionId=`): the simulation's.
    #[default]
    Relayer,
    /// MCP Streamable HTTP (protocol 2025-03-26 and later) on one path, `/mcp`.
    StreamableHttp,
    /// MCP HTTP+SSE (protocol 2024-11-05): `GET /sse`, then `POST /messages?sessionId=`.
    Sse,
}

impl Transport {
    pub const ALL: [Self; 3] = [Self::Relayer, Self::StreamableHttp, Self::Sse];

    /// Its name in configuration and traces (serde's).
    pub fn name(self) -> &'static str {
        match self {
            Self::Relayer => "relayer",
            Self::StreamableHttp => "streamable_http",
            Self::Sse => "sse",
        }
    }

    /// The path a client is given: the stream for `relayer` and `sse`, the MCP endpoint for
    /// `streamable_http`.
    pub fn path(self) -> &'static str {
        match self {
            Self::Relayer | Self::Sse => "/sse",
            Self::StreamableHttp => streamable::PATH,
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Transport {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let names = Self::ALL.map(Self::name).join(", ");
        // `streamable-http` as the MCP specification spells it, or `streamable_http`.
        let wanted = text.replace('-', "_");
        Self::ALL.into_iter().find(|t| t.name() == wanted).ok_or_else(|| format!("unknown transport `{text}` (one of {names})"))
    }
}

/// Serve until the host is crashed or bounced.
pub async fn run(
    config: RelayerConfig,
    knobs: SharedKnobs,
    durable: SharedDurable,
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = seam::TcpListener::bind(("0.0.0.0", RELAYER_PORT)).await?;
    serve(listener, config, knobs, durable).await
}

/// [`run`] on a listener bound beforehand (the live engine's, on a real port): the relayer
/// transport, bearer token required.
pub async fn serve(
    listener: seam::TcpListener,
    config: RelayerConfig,
    knobs: SharedKnobs,
    durable: SharedDurable,
) -> Result<(), Box<dyn std::error::Error>> {
    serve_transport(listener, config, knobs, durable, Transport::Relayer, true).await
}

/// Serve `transport` on a listener bound beforehand. With `auth`, every request must carry
/// `Authorization: Bearer <config.token>` (401 otherwise); without it no credentials are asked
/// for (the `relayer` transport always asks). Runs until the host is crashed or bounced (or the
/// runtime dropped): sessions and open streams are lost, the execution log is kept.
pub async fn serve_transport(
    listener: seam::TcpListener,
    config: RelayerConfig,
    knobs: SharedKnobs,
    durable: SharedDurable,
    transport: Transport,
    auth: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let boot = begin_boot(&durable);
    emit!(kind::RELAYER_START, boot);
    let live = Live { sessions: BTreeMap::new(), next_session: 0, rng: SimRng::new(config.seed ^ boot) };
    let auth = auth || transport == Transport::Relayer;
    let app = App(Arc::new(Inner { config, knobs, durable, boot, live: Mutex::new(live), transport, auth }));
    let router = match transport {
        Transport::Relayer | Transport::Sse => legacy::router(app.clone()),
        Transport::StreamableHttp => streamable::router(app.clone()),
    };
    if transport != Transport::Relayer {
        tokio::task::spawn_local(app.clone().announce_notes());
    }
    http::serve_on(listener, router).await?;
    Ok(())
}

#[derive(Clone)]
struct App(Arc<Inner>);

struct Inner {
    config: RelayerConfig,
    knobs: SharedKnobs,
    durable: SharedDurable,
    boot: u64,
    live: Mutex<Live>,
    transport: Transport,
    /// Whether requests must carry the bearer token.
    auth: bool,
}

/// One open session: where its messages go, and whether `initialize` has been received on it.
struct Session {
    sink: Sink,
    initialized: bool,
    /// The knobs' `lost_epoch` when it was opened: once the epoch moves on, the relayer no
    /// longer knows it (its streams stay up).
    epoch: u64,
    /// How many of the knobs' server notes it has been given.
    notes_seen: usize,
}

/// Where a session's messages go.
enum Sink {
    /// A `relayer` or `sse` session: its one stream's queue, the wire style the stream writes,
    /// and the `id:` of its next event (for styles that write them).
    Stream { items: mpsc::UnboundedSender<String>, style: Style, next_event: u64 },
    /// A Streamable HTTP session: its streams and pending JSON answers.
    Streamable(Box<streamable::Streams>),
}

/// Lost on a bounce: the open sessions.
struct Live {
    sessions: BTreeMap<String, Session>,
    next_session: u64,
    rng: SimRng,
}

impl Live {
    /// A new session id: boot, count and a seeded nonce (visible ASCII, as Streamable HTTP asks).
    fn new_session_id(&mut self, boot: u64) -> String {
        self.next_session += 1;
        let nonce = self.rng.hex(6);
        format!("b{boot}-s{}-{nonce}", self.next_session)
    }
}

fn authorized(config: &RelayerConfig, headers: &HeaderMap) -> bool {
    let expected = format!("Bearer {}", config.token);
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(expected.as_str())
}

/// A header's value as text (absent or not text: `None`).
fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The protocol versions the standard transports serve (and accept in `MCP-Protocol-Version`).
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The version a server answers an `initialize` with: the client's when supported (the lifecycle:
/// "If the server supports the requested protocol version, it MUST respond with the same
/// version. Otherwise, the server MUST respond with another protocol version it supports"),
/// else the latest.
fn negotiate(msg: &Value) -> &'static str {
    let asked = msg.pointer("/params/protocolVersion").and_then(Value::as_str);
    SUPPORTED_VERSIONS.into_iter().find(|v| Some(*v) == asked).unwrap_or(SUPPORTED_VERSIONS[3])
}

/// A refusal as the standard transports answer it: the status and a JSON-RPC error without an
/// id (Streamable HTTP: "The HTTP response body MAY comprise a JSON-RPC error response that has
/// no id"); 401s name the scheme (RFC 6750: `WWW-Authenticate: Bearer`).
pub(crate) fn refusal(status: StatusCode, code: i64, text: &str) -> Response {
    let body = jsonrpc::error(None, code, text).to_string();
    let mut response = (status, [("content-type", "application/json")], body).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert("www-authenticate", axum::http::HeaderValue::from_static("Bearer realm=\"mcp\""));
    }
    response
}

/// A response whose connection is reset instead of written.
pub(crate) fn reset_connection() -> Response {
    let mut response = StatusCode::BAD_GATEWAY.into_response();
    response.extensions_mut().insert(http::ResetConnection);
    response
}

impl App {
    fn dispatch(&self, session: &str, msg: Value, key: Option<String>) {
        if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            let request = msg.pointer("/params/requestId").map(id_key).unwrap_or_default();
            emit!(kind::RPC_CANCEL, request = %request, session = %session);
            return;
        }
        let Shape::Request { id, method } = jsonrpc::shape(&msg) else { return };
        let (keys, action) = (ClientKeys::of(&msg), action_of(&msg));
        let to = Recipient::new(session, &id, &keys, &action);
        // An `initialize` without the params the MCP schema requires initializes nothing.
        if method == "initialize" && !initialize_params_valid(&msg) {
            emit!(kind::RPC_REFUSED, id = %id, client_id = to.client, method = %method, action = to.action, session = %session, reason = "invalid_params");
            return self.send_reply(&to, invalid_initialize(&id));
        }
        // The MCP lifecycle, as a real server enforces it: a session answers requests other than
        // `ping` only after `initialize`.
        let initialized = {
            let mut live = lock(&self.0.live);
            let entry = live.sessions.get_mut(session);
            entry.is_some_and(|entry| {
                entry.initialized |= method == "initialize";
                entry.initialized
            })
        };
        if !initialized && method != "ping" {
            emit!(kind::RPC_REFUSED, id = %id, client_id = to.client, method = %method, action = to.action, session = %session, reason = "not_initialized");
            let text = format!("Invalid Request: session not initialized (received {method} before initialize)");
            return self.send_reply(&to, jsonrpc::error(Some(&id), NOT_INITIALIZED, &text));
        }
        let reply = match method.as_str() {
            "initialize" => {
                let params = msg.get("params").map(Value::to_string).unwrap_or_default();
                emit!(kind::RPC_INITIALIZE, session = %session, params = %params);
                jsonrpc::result(&id, self.initialize_result(&msg))
            }
            "tools/list" => jsonrpc::result(&id, tools_result()),
            "ping" => jsonrpc::result(&id, json!({})),
            "tools/call" => return self.call(session, id.clone(), &msg, key),
            _ => jsonrpc::error(Some(&id), -32601, &format!("Method not found: {method}")),
        };
        self.send_reply(&to, reply);
    }

    /// The `InitializeResult`: the standard transports negotiate the version as the lifecycle
    /// asks; the relayer transport keeps its own answer (the simulation's traces depend on it).
    fn initialize_result(&self, msg: &Value) -> Value {
        let mut result = jsonrpc::initialize_result(msg, "mock-relayer", "1.0.0");
        if self.0.transport != Transport::Relayer {
            result["protocolVersion"] = json!(negotiate(msg));
        }
        if self.0.config.announces && self.0.transport != Transport::Relayer {
            // What the server may send unasked (`RelayerKnobs::server_notes`): log messages and
            // tool list changes.
            result["capabilities"]["logging"] = json!({});
            result["capabilities"]["tools"]["listChanged"] = json!(true);
        }
        result
    }

    /// Run a tool once per idempotency key; a replay of a known key gets the logged reply.
    fn call(&self, session: &str, id: Value, msg: &Value, key: Option<String>) {
        if let Some(key) = &key {
            let mut durable = lock(&self.0.durable);
            if let Some(execution) = durable.log.get_mut(key) {
                execution.reply_to = session.to_string();
                let done = execution.done.clone();
                drop(durable);
                let (action, keys) = (action_of(msg), ClientKeys::of(msg));
                emit!(kind::TOOL_DEDUP, id = %id, key = %key, action = %action, session = %session);
                if let Some(result) = done {
                    let to = Recipient::new(session, &id, &keys, &action);
                    self.send_reply(&to, jsonrpc::result(&id, result));
                }
                return;
            }
            let execution = Execution { reply_to: session.to_string(), done: None };
            durable.log.insert(key.clone(), execution);
        }
        let tool = msg.pointer("/params/name").and_then(Value::as_str).unwrap_or("").to_string();
        let action = msg.pointer("/params/arguments/action").and_then(Value::as_str).unwrap_or("");
        let work_ms = msg.pointer("/params/arguments/work_ms").and_then(Value::as_u64).unwrap_or(50);
        emit!(
            kind::TOOL_EXEC,
            id = %id,
            tool = %tool,
            action,
            key = key.as_deref().unwrap_or(""),
            session = %session
        );
        let keys = ClientKeys::of(msg);
        let slow_ms = lock(&self.0.knobs).slow_ids.remove(&keys.knob);
        let app = self.clone();
        let session = session.to_string();
        let action = action.to_string();
        tokio::task::spawn_local(async move {
            let (elapsed_ms, result, ok) = app.work(&tool, &action, work_ms, slow_ms, &id, &keys.stamp).await;
            emit!(
                kind::TOOL_DONE,
                id = %id,
                tool = %tool,
                action = %action,
                key = key.as_deref().unwrap_or(""),
                elapsed_ms,
                ok
            );
            let reply_to = match &key {
                Some(key) => {
                    let mut durable = lock(&app.0.durable);
                    let execution = durable.log.get_mut(key);
                    execution.map(|execution| {
                        execution.done = Some(result.clone());
                        execution.reply_to.clone()
                    })
                }
                None => None,
            };
            let session = reply_to.unwrap_or(session);
            let to = Recipient::new(&session, &id, &keys, &action);
            app.send_reply(&to, jsonrpc::result(&id, result));
        });
    }

    /// Do the tool's work: it honours its own deadline unless a slow-tool fault overrides it.
    async fn work(&self, tool: &str, action: &str, work_ms: u64, slow_ms: Option<u64>, id: &Value, client: &str) -> (u64, Value, bool) {
        let deadline_ms = match tool {
            "analyze" => self.0.config.analyze_deadline_ms,
            "remember" => self.0.config.remember_deadline_ms,
            "recall" => self.0.config.remember_deadline_ms,
            _ => return (0, jsonrpc::tool_result(&format!("unknown tool `{tool}`"), true), false),
        };
        if let Some(slow_ms) = slow_ms {
            emit!(kind::FAULT_FIRED, fault = "slow_tool", id = %id, client_id = client, action, session = "");
            seam::sleep_ms(slow_ms).await;
            return (slow_ms, jsonrpc::tool_result(&format!("{tool} {action}: done"), false), true);
        }
        if work_ms > deadline_ms {
            seam::sleep_ms(deadline_ms).await;
            let text = format!("{tool} {action}: exceeded its own deadline of {deadline_ms} ms");
            return (deadline_ms, jsonrpc::tool_result(&text, true), false);
        }
        seam::sleep_ms(work_ms).await;
        (work_ms, jsonrpc::tool_result(&format!("{tool} {action}: done"), false), true)
    }

    /// Send a reply to a session, through the per-request knobs (keyed by the client's id).
    fn send_reply(&self, to: &Recipient<'_>, msg: Value) {
        let (swallow, duplicate, late) = {
            let mut knobs = lock(&self.0.knobs);
            let key = to.key;
            (knobs.swallow_ids.remove(key), knobs.duplicate_ids.remove(key), knobs.late_ids.remove(key))
        };
        let Recipient { session, id, client, action, .. } = *to;
        if swallow {
            emit!(kind::FAULT_FIRED, fault = "swallow_reply", id = %id, client_id = client, action, session = %session);
            emit!(kind::REPLY_LOST, id = %id, client_id = client, action, session = %session);
            return;
        }
        let copies = if duplicate { 2 } else { 1 };
        let Some(delay_ms) = late else { return self.deliver(to, &msg, copies) };
        emit!(kind::FAULT_FIRED, fault = "late_reply", id = %id, client_id = client, action, session = %session);
        let app = self.clone();
        let keys = ClientKeys { stamp: client.to_string(), knob: to.key.to_string() };
        let (session, id, action) = (session.to_string(), id.clone(), action.to_string());
        tokio::task::spawn_local(async move {
            seam::sleep_ms(delay_ms).await;
            let to = Recipient::new(&session, &id, &keys, &action);
            app.deliver(&to, &msg, copies);
        });
    }

    /// Write a reply on whatever carries it: a `relayer` or `sse` session's stream, or the POST
    /// response (JSON or SSE) that a Streamable HTTP request came with.
    fn deliver(&self, to: &Recipient<'_>, msg: &Value, copies: usize) {
        let Recipient { session, id, client, action, .. } = *to;
        if lock(&self.0.knobs).withhold_replies {
            emit!(kind::FAULT_FIRED, fault = "withhold_replies", id = %id, client_id = client, action, session = %session);
            emit!(kind::REPLY_LOST, id = %id, client_id = client, action, session = %session);
            return;
        }
        let mut live = lock(&self.0.live);
        let Some(entry) = live.sessions.get_mut(session) else {
            drop(live);
            emit!(kind::REPLY_LOST, id = %id, client_id = client, action, session = %session);
            return;
        };
        let text = msg.to_string();
        match &mut entry.sink {
            Sink::Stream { items, style, next_event } => {
                let frame = style.frame("message", &style.json(msg), Some(*next_event));
                *next_event += 1;
                for copy in 0..copies {
                    if items.send(frame.clone()).is_err() {
                        break;
                    }
                    if copy > 0 {
                        emit!(kind::FAULT_FIRED, fault = "duplicate_reply", id = %id, client_id = client, action, session = %session);
                    }
                }
                drop(live);
                emit!(kind::REPLY_SENT, id = %id, client_id = client, action, session = %session, msg = %text);
            }
            Sink::Streamable(streams) => {
                let carried = streams.deliver(&id_key(id), msg, copies);
                drop(live);
                let Some((stream, copies)) = carried else {
                    emit!(kind::REPLY_LOST, id = %id, client_id = client, action, session = %session);
                    return;
                };
                for _ in 1..copies {
                    emit!(kind::FAULT_FIRED, fault = "duplicate_reply", id = %id, client_id = client, action, session = %session);
                }
                emit!(kind::REPLY_SENT, id = %id, client_id = client, action, session = %session, msg = %text, stream = %stream);
            }
        }
    }

    /// Send the knobs' server notes to every session open when each was added (the standard
    /// transports only), logged as `reply.sent` with an empty `id`.
    async fn announce_notes(self) {
        let changed = lock(&self.0.knobs).changed.clone();
        loop {
            let notified = changed.notified();
            let notes = lock(&self.0.knobs).server_notes.clone();
            let mut sent = Vec::new();
            {
                let mut live = lock(&self.0.live);
                for (session, entry) in &mut live.sessions {
                    for note in notes.iter().skip(entry.notes_seen) {
                        match &mut entry.sink {
                            Sink::Stream { items, style, next_event } => {
                                let frame = style.frame("message", &style.json(note), Some(*next_event));
                                *next_event += 1;
                                let _ = items.send(frame);
                                sent.push((session.clone(), note.to_string(), None));
                            }
                            // A note waiting for a standalone stream is logged when one takes it.
                            Sink::Streamable(streams) => {
                                if let Some(stream) = streams.note(note) {
                                    sent.push((session.clone(), note.to_string(), Some(stream)));
                                }
                            }
                        }
                    }
                    entry.notes_seen = notes.len();
                }
            }
            for (session, msg, stream) in sent {
                match stream {
                    None => emit!(kind::REPLY_SENT, id = "", client_id = "", action = "", session = %session, msg = %msg),
                    Some(stream) => emit!(kind::REPLY_SENT, id = "", client_id = "", action = "", session = %session, msg = %msg, stream = %stream),
                }
            }
            notified.await;
        }
    }

    /// How many server notes a session opened now has already missed.
    fn notes_now(&self) -> usize {
        lock(&self.0.knobs).server_notes.len()
    }

    /// The epoch a session opened now belongs to (`RelayerKnobs::lost_epoch`).
    fn epoch_now(&self) -> u64 {
        lock(&self.0.knobs).lost_epoch
    }

    /// Whether the relayer knows `session`: open, and not forgotten since (a lost session's
    /// streams stay up, but a request naming it is answered 404).
    fn knows(&self, session: &str) -> bool {
        let epoch = self.epoch_now();
        lock(&self.0.live).sessions.get(session).is_some_and(|s| s.epoch >= epoch)
    }
}

/// Where a reply goes: the session, the request id it answers, the client's id it was stamped
/// with (what the log names), the key the fault knobs are keyed by, and the user action of a
/// `tools/call`.
#[derive(Clone, Copy)]
struct Recipient<'a> {
    session: &'a str,
    id: &'a Value,
    client: &'a str,
    key: &'a str,
    action: &'a str,
}

impl<'a> Recipient<'a> {
    fn new(session: &'a str, id: &'a Value, keys: &'a ClientKeys, action: &'a str) -> Self {
        Self { session, id, client: &keys.stamp, key: &keys.knob, action }
    }
}

/// The two names of a request's client: the id the client stamped (what the log names; empty
/// for a request without the stamp) and the key the fault knobs are keyed by.
pub(crate) struct ClientKeys {
    pub stamp: String,
    pub knob: String,
}

impl ClientKeys {
    pub fn of(msg: &Value) -> Self {
        let stamp = stamped_client(msg);
        let knob = knob_key(&stamp, msg.get("id"));
        Self { stamp, knob }
    }
}

/// The client's id a request stands for, as the log names it: the one the client stamped in
/// `params._meta` (the sim client stamps every request, and a bridge that forwards a request
/// keeps its `_meta` under whatever id it sends it), or empty for a request without the stamp:
/// the bridge's own (an `initialize`; mcp-proxy 0.13.0's SDK lists tools by itself after a call,
/// `mcp/client/session.py:419-421`, under an upstream id that may equal a client's, which the
/// harness took for the client's request of that id, live.v1.relay.none.f24f0a6bca9aeb6d).
pub(crate) fn stamped_client(msg: &Value) -> String {
    msg.pointer("/params/_meta/sim.relay~1clientId").map(id_key).unwrap_or_default()
}

/// What the per-request fault knobs are keyed by: the client's stamped id, else the request's
/// own id `id` (canonical JSON; empty for none), so a fault on a step reaches what goes out under
/// its id: the bridge's own `initialize` under the client's id 0 too (mcp-proxy's handshake, P6).
pub(crate) fn knob_key(stamp: &str, id: Option<&Value>) -> String {
    match stamp {
        "" => id.map(id_key).unwrap_or_default(),
        stamp => stamp.to_string(),
    }
}

/// Whether an `initialize` carries what the MCP schema requires of its params: a
/// `protocolVersion` string, a `capabilities` object and `clientInfo` with a `name` and a
/// `version`.
fn initialize_params_valid(msg: &Value) -> bool {
    let text = |pointer: &str| msg.pointer(pointer).is_some_and(Value::is_string);
    text("/params/protocolVersion")
        && msg.pointer("/params/capabilities").is_some_and(Value::is_object)
        && text("/params/clientInfo/name")
        && text("/params/clientInfo/version")
}

/// The answer to an `initialize` whose params lack what the schema requires.
fn invalid_initialize(id: &Value) -> Value {
    let text = "Invalid params: initialize needs protocolVersion, capabilities and clientInfo {name, version}";
    jsonrpc::error(Some(id), -32602, text)
}

/// The user action a `tools/call` names in its arguments (empty for other messages).
pub(crate) fn action_of(msg: &Value) -> String {
    let action = msg.pointer("/params/arguments/action").and_then(Value::as_str).unwrap_or("");
    if msg.get("method").and_then(Value::as_str) == Some("tools/call") {
        action.to_string()
    } else {
        String::new()
    }
}

/// The JSON-RPC error code a session answers with before `initialize` (as LSP's "server not
/// initialized"; MCP names no code of its own).
pub const NOT_INITIALIZED: i64 = -32002;

pub(crate) fn tools_result() -> Value {
    let schema = |props: Value| -> serde_json::Map<String, Value> {
        let schema = json!({"type": "object", "properties": props});
        schema.as_object().cloned().unwrap_or_default()
    };
    let work = json!({"action": {"type": "string"}, "work_ms": {"type": "integer"}});
    let tools = vec![
        McpTool::new("recall", "Read memories.", schema(work.clone())),
        McpTool::new("remember", "Store a memory (a write).", schema(work.clone())),
        McpTool::new("analyze", "Analyse memories (slow).", schema(work)),
    ];
    let mut result = ListToolsResult::with_all_items(tools);
    result.result_type = None;
    serde_json::to_value(result).unwrap_or(Value::Null)
}
