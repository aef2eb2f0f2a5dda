//! The mock relayer: hosts the MCP server and its tools behind `GET /sse` (the reply stream) and
//! `POST /messages?sessionId=..` (202 / 404 / 401 / 429 / 5xx), with an execution log keyed by
//! idempotency key and the fault knobs of [`RelayerKnobs`](super::RelayerKnobs).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use rmcp::model::{ListToolsResult, Tool as McpTool};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::config::RelayerConfig;
use crate::net::http::{self, ChannelBody};
use crate::net::jsonrpc::{self, id_key, Shape};
use super::knobs::{lock, SharedKnobs};
use super::sse::Style;
use super::RELAYER_PORT;
use crate::emit;
use crate::events::kind;
use crate::rng::SimRng;
use crate::seam;

/// What survives a relayer bounce: its database (the execution log), its boot count, and the
/// sessions it ever issued (so a POST to one it lost is told apart from one it never issued).
#[derive(Debug, Default)]
pub struct Durable {
    boots: u64,
    log: BTreeMap<String, Execution>,
    issued: BTreeSet<String>,
}

pub type SharedDurable = Arc<Mutex<Durable>>;

#[derive(Debug)]
struct Execution {
    /// The session the reply goes to: the latest one that asked.
    reply_to: String,
    /// The reply, once the tool finished.
    done: Option<Value>,
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

/// [`run`] on a listener bound beforehand (the live engine's, on a real port).
pub async fn serve(
    listener: seam::TcpListener,
    config: RelayerConfig,
    knobs: SharedKnobs,
    durable: SharedDurable,
) -> Result<(), Box<dyn std::error::Error>> {
    let boot = {
        let mut durable = lock(&durable);
        durable.boots += 1;
        // An execution cut short by the restart never committed: forget it.
        durable.log.retain(|_, execution| execution.done.is_some());
        durable.boots
    };
    emit!(kind::RELAYER_START, boot);
    let live = Live { sessions: BTreeMap::new(), next_session: 0, rng: SimRng::new(config.seed ^ boot) };
    let app = App(Arc::new(Inner { config, knobs, durable, boot, live: Mutex::new(live) }));
    let router = Router::new()
        .route("/sse", get(open_stream))
        .route("/messages", post(on_post))
        .with_state(app);
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
}

/// One open session: its stream's queue, the wire style its stream writes, and whether
/// `initialize` has been received on it.
struct Session {
    items: mpsc::UnboundedSender<String>,
    style: Style,
    /// The `id:` of the next event, for styles that write them.
    next_event: u64,
    initialized: bool,
}

/// Lost on a bounce: the open sessions.
struct Live {
    sessions: BTreeMap<String, Session>,
    next_session: u64,
    rng: SimRng,
}

fn authorized(config: &RelayerConfig, headers: &HeaderMap) -> bool {
    let expected = format!("Bearer {}", config.token);
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(expected.as_str())
}

async fn open_stream(State(app): State<App>, headers: HeaderMap) -> Response {
    if !authorized(&app.0.config, &headers) {
        emit!(kind::STREAM_REFUSED, status = 401, cause = "token");
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let (items_tx, items_rx) = mpsc::unbounded_channel();
    let (body_tx, body_rx) = mpsc::unbounded_channel();
    let (session, style) = {
        let mut live = lock(&app.0.live);
        live.next_session += 1;
        let nonce = live.rng.hex(6);
        let session = format!("b{}-s{}-{nonce}", app.0.boot, live.next_session);
        let style = Style::from_bits(live.rng.next_u64());
        live.sessions.insert(session.clone(), Session { items: items_tx, style, next_event: 1, initialized: false });
        (session, style)
    };
    lock(&app.0.durable).issued.insert(session.clone());
    emit!(kind::STREAM_OPEN, session = %session, style = %style.label());
    tokio::task::spawn_local(stream(app.clone(), session, style, items_rx, body_tx));
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::new(ChannelBody(body_rx)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Write one session's stream in its wire style: the endpoint event, keep-alives, and replies,
/// obeying the stall and EOF knobs. Frames are cut into chunks at seeded points so the bridge's
/// framing is tested.
async fn stream(
    app: App,
    session: String,
    style: Style,
    mut items: mpsc::UnboundedReceiver<String>,
    body: mpsc::UnboundedSender<Bytes>,
) {
    let config = &app.0.config;
    let (changed, epoch, stalls_at_open, flap) = {
        let knobs = lock(&app.0.knobs);
        (knobs.changed.clone(), knobs.eof_epoch, knobs.stalls, knobs.flap)
    };
    let mut backlog = VecDeque::from([style.opening(&config.authority, &format!("/messages?sessionId={session}"))]);
    let mut keepalive_at = seam::now() + std::time::Duration::from_millis(config.first_keepalive_ms);
    if let Some(after_endpoint) = flap {
        emit!(kind::FAULT_FIRED, fault = "stream_flap", id = "", client_id = "", action = "", session = %session);
        if after_endpoint {
            flush(&app, &mut backlog, &body);
        }
    }
    // Who ended the stream: the relayer (a fault, its session gone) or the client, which closed
    // its connection.
    let mut by = "relayer";
    while flap.is_none() {
        let notified = changed.notified();
        let (stall, eof) = {
            let knobs = lock(&app.0.knobs);
            (knobs.stalled(stalls_at_open), knobs.eof_epoch != epoch)
        };
        if eof {
            emit!(kind::FAULT_FIRED, fault = "stream_eof", id = "", client_id = "", action = "", session = %session);
            break;
        }
        if !stall && !flush(&app, &mut backlog, &body) {
            by = "client";
            break;
        }
        tokio::select! {
            item = items.recv() => match item {
                Some(frame) => backlog.push_back(frame),
                None => break,
            },
            () = tokio::time::sleep_until(keepalive_at) => {
                if !stall {
                    backlog.push_back(style.keepalive());
                }
                keepalive_at += std::time::Duration::from_millis(config.keepalive_ms);
            }
            () = notified => {}
            () = body.closed() => {
                by = "client";
                break;
            }
        }
    }
    lock(&app.0.live).sessions.remove(&session);
    emit!(kind::STREAM_CLOSE, session = %session, by);
}

/// Write the backlog as seeded chunks; `false` once the client has gone.
fn flush(app: &App, backlog: &mut VecDeque<String>, body: &mpsc::UnboundedSender<Bytes>) -> bool {
    while let Some(frame) = backlog.pop_front() {
        let bytes = frame.into_bytes();
        let cut = {
            let mut live = lock(&app.0.live);
            match live.rng.below(3) {
                0 => live.rng.below(bytes.len() as u64) as usize,
                _ => 0,
            }
        };
        let parts = if cut == 0 { vec![&bytes[..]] } else { vec![&bytes[..cut], &bytes[cut..]] };
        for part in parts {
            if body.send(Bytes::copy_from_slice(part)).is_err() {
                return false;
            }
        }
    }
    true
}

async fn on_post(
    State(app): State<App>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let session = query.get("sessionId").cloned().unwrap_or_default();
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_string);
    let msg: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let id = msg.get("id").map(Value::to_string).unwrap_or_default();
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("").to_string();
    let action = action_of(&msg);
    let client_id = client_key(&msg);
    // The step a client notification names in its `_meta` (empty for anything else).
    let note = super::client::note_step(&msg).map(Value::to_string).unwrap_or_default();
    // A reset before the POST was served is logged with status 0: nothing admitted or run.
    let reset = lock(&app.0.knobs).reset_posts;
    let admitted = (reset != Some(false)).then(|| app.admit(&session, &headers, &msg));
    let (status, cause) = admitted.map_or((None, "reset"), |(status, cause)| (Some(status), cause));
    emit!(
        kind::HTTP_POST,
        session = %session,
        id = %id,
        client_id,
        note,
        method = %method,
        action,
        key = key.as_deref().unwrap_or(""),
        status = status.map_or(0, |s| s.as_u16()),
        cause
    );
    if status == Some(StatusCode::ACCEPTED) {
        app.dispatch(&session, msg, key);
    }
    if let (None, Some(status)) = (reset, status) {
        return status.into_response();
    }
    emit!(kind::FAULT_FIRED, fault = "post_reset", id = %id, client_id = %client_id, action = %action, session = %session);
    let mut response = StatusCode::BAD_GATEWAY.into_response();
    response.extensions_mut().insert(http::ResetConnection);
    response
}

impl App {
    /// Admit a POST as a real MCP server does, checking in its order: the bearer token, then
    /// (an injected fault) a refusal of everything, the session, the content type, the body.
    /// Returns the status and its cause, which the relayer logs: `accepted`, `token`, `fault`,
    /// `gone` (a session it issued and has since closed or lost), `unknown` (one it never
    /// issued), `content_type` (not `application/json`), `malformed` (not JSON).
    fn admit(&self, session: &str, headers: &HeaderMap, msg: &Value) -> (StatusCode, &'static str) {
        if !authorized(&self.0.config, headers) {
            return (StatusCode::UNAUTHORIZED, "token");
        }
        if let Some(status) = lock(&self.0.knobs).reject_status {
            return (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), "fault");
        }
        if !lock(&self.0.live).sessions.contains_key(session) {
            let issued = lock(&self.0.durable).issued.contains(session);
            return (StatusCode::NOT_FOUND, if issued { "gone" } else { "unknown" });
        }
        let json = headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"));
        if !json {
            return (StatusCode::UNSUPPORTED_MEDIA_TYPE, "content_type");
        }
        if msg.is_null() {
            return (StatusCode::BAD_REQUEST, "malformed");
        }
        (StatusCode::ACCEPTED, "accepted")
    }

    fn dispatch(&self, session: &str, msg: Value, key: Option<String>) {
        if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            let request = msg.pointer("/params/requestId").map(id_key).unwrap_or_default();
            emit!(kind::RPC_CANCEL, request = %request, session = %session);
            return;
        }
        let Shape::Request { id, method } = jsonrpc::shape(&msg) else { return };
        let to = Recipient { session, id: &id, client: &client_key(&msg), action: &action_of(&msg) };
        // An `initialize` without the params the MCP schema requires initializes nothing.
        if method == "initialize" && !initialize_params_valid(&msg) {
            emit!(kind::RPC_REFUSED, id = %id, client_id = to.client, method = %method, action = to.action, session = %session, reason = "invalid_params");
            let text = "Invalid params: initialize needs protocolVersion, capabilities and clientInfo {name, version}";
            return self.send_reply(&to, jsonrpc::error(Some(&id), -32602, text));
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
                jsonrpc::result(&id, jsonrpc::initialize_result(&msg, "mock-relayer", "1.0.0"))
            }
            "tools/list" => jsonrpc::result(&id, tools_result()),
            "ping" => jsonrpc::result(&id, json!({})),
            "tools/call" => return self.call(session, id.clone(), &msg, key),
            _ => jsonrpc::error(Some(&id), -32601, &format!("Method not found: {method}")),
        };
        self.send_reply(&to, reply);
    }

    /// Run a tool once per idempotency key; a replay of a known key gets the logged reply.
    fn call(&self, session: &str, id: Value, msg: &Value, key: Option<String>) {
        if let Some(key) = &key {
            let mut durable = lock(&self.0.durable);
            if let Some(execution) = durable.log.get_mut(key) {
                execution.reply_to = session.to_string();
                let done = execution.done.clone();
                drop(durable);
                let (action, client) = (action_of(msg), client_key(msg));
                emit!(kind::TOOL_DEDUP, id = %id, key = %key, action = %action, session = %session);
                if let Some(result) = done {
                    let to = Recipient { session, id: &id, client: &client, action: &action };
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
        let client = client_key(msg);
        let slow_ms = lock(&self.0.knobs).slow_ids.remove(&client);
        let app = self.clone();
        let session = session.to_string();
        let action = action.to_string();
        tokio::task::spawn_local(async move {
            let (elapsed_ms, result, ok) = app.work(&tool, &action, work_ms, slow_ms, &id, &client).await;
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
            let to = Recipient { session: &session, id: &id, client: &client, action: &action };
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

    /// Send a reply on a session's stream, through the per-request knobs (keyed by the client's
    /// id).
    fn send_reply(&self, to: &Recipient<'_>, msg: Value) {
        let (swallow, duplicate, late) = {
            let mut knobs = lock(&self.0.knobs);
            let key = to.client;
            (knobs.swallow_ids.remove(key), knobs.duplicate_ids.remove(key), knobs.late_ids.remove(key))
        };
        let Recipient { session, id, client, action } = *to;
        if swallow {
            emit!(kind::FAULT_FIRED, fault = "swallow_reply", id = %id, client_id = client, action, session = %session);
            emit!(kind::REPLY_LOST, id = %id, client_id = client, action, session = %session);
            return;
        }
        let copies = if duplicate { 2 } else { 1 };
        let Some(delay_ms) = late else { return self.deliver(to, &msg, copies) };
        emit!(kind::FAULT_FIRED, fault = "late_reply", id = %id, client_id = client, action, session = %session);
        let app = self.clone();
        let (session, id, client, action) = (session.to_string(), id.clone(), client.to_string(), action.to_string());
        tokio::task::spawn_local(async move {
            seam::sleep_ms(delay_ms).await;
            let to = Recipient { session: &session, id: &id, client: &client, action: &action };
            app.deliver(&to, &msg, copies);
        });
    }

    fn deliver(&self, to: &Recipient<'_>, msg: &Value, copies: usize) {
        let Recipient { session, id, client, action } = *to;
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
        let frame = entry.style.frame("message", &entry.style.json(msg), Some(entry.next_event));
        entry.next_event += 1;
        for copy in 0..copies {
            if entry.items.send(frame.clone()).is_err() {
                break;
            }
            if copy > 0 {
                emit!(kind::FAULT_FIRED, fault = "duplicate_reply", id = %id, client_id = client, action, session = %session);
            }
        }
        drop(live);
        emit!(kind::REPLY_SENT, id = %id, client_id = client, action, session = %session, msg = %text);
    }
}

/// Where a reply goes: the session, the request id it answers, the client's id (what the fault
/// knobs are keyed by) and the user action of a `tools/call`.
#[derive(Clone, Copy)]
struct Recipient<'a> {
    session: &'a str,
    id: &'a Value,
    client: &'a str,
    action: &'a str,
}

/// The client's id a request stands for: the one a bridge put in `params._meta` when it sent
/// the request under its own id, else the request's id (canonical JSON).
fn client_key(msg: &Value) -> String {
    match msg.pointer("/params/_meta/sim.relay~1clientId") {
        Some(client) => id_key(client),
        None => msg.get("id").map(id_key).unwrap_or_default(),
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

/// The user action a `tools/call` names in its arguments (empty for other messages).
fn action_of(msg: &Value) -> String {
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

fn tools_result() -> Value {
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
