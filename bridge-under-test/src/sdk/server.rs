//! The sdk family's remote server as rmcp's own: `StreamableHttpService` (feature
//! `transport-streamable-http-server`) serving the mock relayer's tools, on hyper over the seam's
//! TCP (`net::http::serve_on`). What the relay oracles read from the server side, and the faults,
//! live outside rmcp:
//!
//! - [`fault_layer`], a layer around the service: the bearer token, refused and reset POSTs, the
//!   server's HTTP log (`http.post`, `rpc.initialize`, `rpc.cancel`, `stream.open`,
//!   `stream.refused`, `stream.close`), and every SSE body rmcp writes passed through
//!   [`relay_stream`], which logs each reply (`reply.sent`) and applies the reply and stream knobs
//!   (swallowed, late, duplicated and withheld replies; stalls, EOFs and flaps), writes the
//!   keep-alives and cuts frames into chunks at seeded points, as the mock's writer does;
//! - [`Tools`], the `ServerHandler`: the relayer's three tools with their own deadlines and the
//!   slow-tool knob (`tool.exec`, `tool.done`).
//!
//! Determinism: rmcp draws session ids from `uuid::Uuid::new_v4` (src/transport/common/
//! server_side_http.rs:16-18, called by `LocalSessionManager::create_session`,
//! src/transport/streamable_http_server/session/local.rs:79); [`SeededSessions`] is rmcp's
//! `LocalSessionManager` with seeded ids. The other draws do not reach behaviour: the
//! request-wise stream id (local.rs:507) and the stateless stream id (tower.rs:1583) are used
//! only with an event store, which this server has none of (event ids are `index/request`,
//! local.rs:189-197). Two wall clocks are closed off: sse-stream 0.2.6 resets its keep-alive
//! timer to `std::time::Instant::now() + interval` (body.rs:184-188), which under turmoil's
//! virtual clock fires at once and forever, so rmcp's keep-alive is off and the layer writes
//! keep-alives on the seam's clock; and the completed-channel cache is evicted by
//! `std::time::Instant::elapsed` (local.rs:443, 488-491), so its TTL is set beyond any run.
//! rmcp's hash maps (`resource_router`, the session map) are only looked up, removed from or
//! retained by a predicate with no effect but removal. One order does reach the wire: when a
//! session's worker quits (idle for `keep_alive`, local.rs:1124-1125, or closed), dropping it
//! drops `tx_router` (a `HashMap` with the process's random hash keys, local.rs:369), which
//! ends every stream of the session at one instant in that map's order; the client sees the
//! EOFs, and resumes the streams, in that order. [`close_in_order`] closes the streams that end
//! at one instant in the order they opened.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::BodyExt;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, ToolsCapability};
use rmcp::model::{RequestMetaObject, ServerNotification, ServerRequest};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext};
use rmcp::transport::streamable_http_server::session::local::{create_local_session, LocalSessionManager};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId, SessionManager};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::transport::WorkerTransport;
use rmcp::{Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::emit;
use crate::events::kind;
use crate::net::http;
use crate::net::jsonrpc::{self, id_key};
use crate::relay::config::RelayerConfig;
use crate::relay::knobs::{lock, SharedKnobs, SERVER_ID_META};
use crate::relay::relayer::{self, SharedDurable};
use crate::rng::SimRng;
use crate::seam;

/// The MCP endpoint's path, as the mock's Streamable HTTP transport serves it.
pub const PATH: &str = "/mcp";

/// What one incarnation of the server shares between the layer, its streams and its tools.
struct Server {
    config: RelayerConfig,
    knobs: SharedKnobs,
    durable: SharedDurable,
    sessions: Arc<SeededSessions>,
    live: Mutex<Live>,
}

/// Lost on a restart.
struct Live {
    /// The client's stamped id (what `reply.sent` names), the reply knobs' key and the user
    /// action of each request a session was sent, by (session, request id as canonical JSON).
    requests: BTreeMap<(String, String), (String, String, String)>,
    /// Streams opened so far (their labels: `post-N`, `get-N`).
    streams: u64,
    /// Streams that ended at this instant and wait to be closed, by their number.
    closing: BTreeMap<u64, Closing>,
    /// Frame cuts.
    rng: SimRng,
    /// Each initialized session's peer, and how many of the knobs' server notes it was sent
    /// (a session opened later misses the earlier ones, as on the mock).
    peers: BTreeMap<String, (Peer<RoleServer>, usize)>,
}

type Service = StreamableHttpService<Tools, SeededSessions>;
type RmcpBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;
type RmcpResponse = axum::http::Response<RmcpBody>;

/// Serve until the host is crashed or bounced: sessions and open streams are lost, the
/// execution log and the issued session ids are kept.
pub async fn serve(
    listener: seam::TcpListener,
    config: RelayerConfig,
    knobs: SharedKnobs,
    durable: SharedDurable,
) -> Result<(), Box<dyn std::error::Error>> {
    let boot = relayer::begin_boot(&durable);
    emit!(kind::RELAYER_START, boot);
    let sessions = Arc::new(SeededSessions::new(boot, config.seed));
    let live = Live { requests: BTreeMap::new(), streams: 0, closing: BTreeMap::new(), rng: SimRng::new(config.seed ^ boot ^ 0x5eed), peers: BTreeMap::new() };
    let server = Arc::new(Server { config, knobs, durable, sessions: sessions.clone(), live: Mutex::new(live) });
    let mut service_config = StreamableHttpServerConfig::default();
    // Off: sse-stream's keep-alive reads the wall clock (module docs); the layer writes them.
    service_config.sse_keep_alive = None;
    service_config.allowed_hosts = vec![crate::events::host::RELAYER.to_string(), server.config.authority.clone()];
    let tools = Tools(server.clone());
    let service: Service = StreamableHttpService::new(move || Ok(tools.clone()), sessions, service_config);
    tokio::spawn(announce(server.clone()));
    let router = axum::Router::new().fallback(fault_layer).with_state((server, service));
    http::serve_on(listener, router).await?;
    Ok(())
}

/// rmcp's `LocalSessionManager` with session ids drawn from the seed (`b<boot>-s<n>-<nonce>`,
/// as the mock names them) instead of `uuid::Uuid::new_v4`. Everything else is the local
/// manager's own code.
pub struct SeededSessions {
    inner: LocalSessionManager,
    boot: u64,
    ids: Mutex<(u64, SimRng)>,
}

impl SeededSessions {
    pub fn new(boot: u64, seed: u64) -> Self {
        let mut inner = LocalSessionManager::default();
        // Evicted by `std::time::Instant::elapsed` (wall time): never, within a run.
        inner.session_config.completed_cache_ttl = Duration::from_secs(365 * 24 * 3600);
        Self { inner, boot, ids: Mutex::new((0, SimRng::new(seed ^ boot))) }
    }

    fn next_id(&self) -> SessionId {
        let mut ids = lock(&self.ids);
        ids.0 += 1;
        let nonce = ids.1.hex(6);
        format!("b{}-s{}-{nonce}", self.boot, ids.0).into()
    }
}

impl SessionManager for SeededSessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // LocalSessionManager::create_session (local.rs:75-83) with a seeded id.
        let id = self.next_id();
        let (handle, worker) = create_local_session(id.clone(), self.inner.session_config.clone());
        self.inner.sessions.write().await.insert(id.clone(), handle);
        Ok((id, WorkerTransport::spawn(worker)))
    }

    async fn initialize_session(&self, id: &SessionId, message: rmcp::model::ClientJsonRpcMessage) -> Result<rmcp::model::ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: rmcp::model::ClientJsonRpcMessage,
    ) -> Result<impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(&self, id: &SessionId, message: rmcp::model::ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
}

/// The relayer's tools as an rmcp `ServerHandler`.
#[derive(Clone)]
pub struct Tools(Arc<Server>);

impl ServerHandler for Tools {
    /// The tools, and what the server sends unasked (`RelayerKnobs::server_notes`): log
    /// messages and tool list changes, as the mock declares them.
    #[allow(deprecated)] // logging: SEP-2577 deprecates it after the 2025-11-25 protocol
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        capabilities.logging = Some(serde_json::Map::new());
        ServerConfig::new(capabilities)
    }

    /// The session's peer, for the messages the server starts ([`announce`]).
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let session = context.extensions.get::<axum::http::request::Parts>().and_then(|parts| header(&parts.headers, "mcp-session-id")).unwrap_or("").to_string();
        let seen = lock(&self.0.knobs).server_notes.len();
        lock(&self.0.live).peers.insert(session, (context.peer, seen));
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        serde_json::from_value(relayer::tools_result()).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        let server = &self.0;
        let id = serde_json::to_value(&context.id).unwrap_or(Value::Null);
        let session = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| header(&parts.headers, "mcp-session-id"))
            .unwrap_or("")
            .to_string();
        let client = context.meta.get(crate::relay::client::CLIENT_ID_META).map(id_key).unwrap_or_default();
        let key = relayer::knob_key(&client, Some(&id));
        let arguments = request.arguments.clone().unwrap_or_default();
        let tool = request.name.to_string();
        let action = arguments.get("action").and_then(Value::as_str).unwrap_or("").to_string();
        let work_ms = arguments.get("work_ms").and_then(Value::as_u64).unwrap_or(50);
        emit!(kind::TOOL_EXEC, id = %id, tool = %tool, action = %action, key = "", session = %session);
        let slow_ms = lock(&server.knobs).slow_ids.remove(&key);
        let deadline_ms = match tool.as_str() {
            "analyze" => Some(server.config.analyze_deadline_ms),
            "remember" | "recall" => Some(server.config.remember_deadline_ms),
            _ => None,
        };
        let (elapsed_ms, result, ok) = match (deadline_ms, slow_ms) {
            (None, _) => (0, jsonrpc::tool_result(&format!("unknown tool `{tool}`"), true), false),
            (Some(_), Some(slow_ms)) => {
                emit!(kind::FAULT_FIRED, fault = "slow_tool", id = %id, client_id = %client, action = %action, session = "");
                seam::sleep_ms(slow_ms).await;
                (slow_ms, jsonrpc::tool_result(&format!("{tool} {action}: done"), false), true)
            }
            (Some(deadline_ms), None) if work_ms > deadline_ms => {
                seam::sleep_ms(deadline_ms).await;
                let text = format!("{tool} {action}: exceeded its own deadline of {deadline_ms} ms");
                (deadline_ms, jsonrpc::tool_result(&text, true), false)
            }
            (Some(_), None) => {
                seam::sleep_ms(work_ms).await;
                (work_ms, jsonrpc::tool_result(&format!("{tool} {action}: done"), false), true)
            }
        };
        emit!(kind::TOOL_DONE, id = %id, tool = %tool, action = %action, key = "", elapsed_ms, ok);
        let result: CallToolResult = serde_json::from_value(result).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(CallToolResponse::Complete(result))
    }
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn authorized(config: &RelayerConfig, headers: &HeaderMap) -> bool {
    header(headers, "authorization") == Some(format!("Bearer {}", config.token).as_str())
}

/// Log one message of a POST, as the mock's Streamable HTTP transport does.
fn log_post(session: &str, msg: &Value, status: u16, cause: &str) {
    let id = msg.get("id").map(Value::to_string).unwrap_or_default();
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let note = crate::relay::client::note_step(msg).map(Value::to_string).unwrap_or_default();
    emit!(
        kind::HTTP_POST,
        session = %session,
        id = %id,
        client_id = %relayer::stamped_client(msg),
        note,
        method,
        action = %relayer::action_of(msg),
        key = "",
        status,
        cause
    );
}

fn log_reset(session: &str, msg: &Value) {
    let id = msg.get("id").map(Value::to_string).unwrap_or_default();
    let (client_id, action) = (relayer::stamped_client(msg), relayer::action_of(msg));
    emit!(kind::FAULT_FIRED, fault = "post_reset", id = %id, client_id = %client_id, action = %action, session = %session);
}

/// Why a session-naming request was refused 404: a session this server issued before a restart
/// (`gone`), or one it never issued (`unknown`).
fn lost_cause(server: &Server, session: &str) -> &'static str {
    if relayer::was_issued(&server.durable, session) {
        "gone"
    } else {
        "unknown"
    }
}

/// The layer around rmcp's service: refusals and resets the knobs ask for, the HTTP log, and
/// every SSE body through [`relay_stream`].
async fn fault_layer(AxumState((server, service)): AxumState<(Arc<Server>, Service)>, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let named = header(&parts.headers, "mcp-session-id").unwrap_or("").to_string();
    let auth = authorized(&server.config, &parts.headers);
    match parts.method {
        Method::POST => {
            let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
            let messages = match &parsed {
                Some(Value::Array(items)) => items.clone(),
                Some(msg) => vec![msg.clone()],
                None => vec![Value::Null],
            };
            let logged = as_logged(&server, &named, &messages);
            let (reset, reject) = {
                let knobs = lock(&server.knobs);
                (knobs.reset_posts, knobs.reject_status)
            };
            if reset == Some(false) {
                for msg in &logged {
                    log_post(&named, msg, 0, "reset");
                    log_reset(&named, msg);
                }
                return relayer::reset_connection();
            }
            if !auth {
                logged.iter().for_each(|msg| log_post(&named, msg, 401, "token"));
                return relayer::refusal(StatusCode::UNAUTHORIZED, -32000, "Unauthorized: missing or wrong bearer token");
            }
            if let Some(status) = reject {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                logged.iter().for_each(|msg| log_post(&named, msg, status.as_u16(), "fault"));
                return relayer::refusal(status, -32000, &format!("Refused: HTTP {}", status.as_u16()));
            }
            let initialize = messages.iter().any(|m| m.get("method").and_then(Value::as_str) == Some("initialize"));
            let requests = messages.iter().any(|m| m.get("method").is_some() && m.get("id").is_some());
            // Logged before rmcp serves it (a tool's `tool.exec` follows its POST), with the
            // status rmcp will answer: a live session's messages are accepted (200 with requests,
            // 202 without), a lost one's refused 404. An `initialize` is logged once answered,
            // under the session rmcp opened for it.
            let live_session = !named.is_empty() && server.sessions.inner.has_session(&named.clone().into()).await.unwrap_or(false);
            let predicted = match () {
                () if initialize => None,
                () if live_session => Some((if requests { 200 } else { 202 }, "accepted")),
                () if named.is_empty() => None,
                () => Some((404, lost_cause(&server, &named))),
            };
            if let Some((status, cause)) = predicted {
                for msg in &logged {
                    log_post(&named, msg, status, cause);
                }
                if status < 300 {
                    admitted(&server, &named, &messages);
                }
            }
            let response = service.handle(Request::from_parts(parts, Body::from(bytes))).await;
            let status = response.status().as_u16();
            let session = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).unwrap_or(&named).to_string();
            match predicted {
                Some((expected, _)) => {
                    // The prediction is this layer's reading of rmcp; a wrong one is a harness
                    // error, so it fails the run loudly rather than logging a false status.
                    assert_eq!(status, expected, "rmcp answered a POST on {named:?} with {status}, the layer logged {expected}");
                }
                None => {
                    let cause = if status < 300 { "accepted" } else { "refused" };
                    for msg in &logged {
                        log_post(&session, msg, status, cause);
                    }
                    if status < 300 {
                        if initialize {
                            relayer::issue(&server.durable, &session);
                        }
                        admitted(&server, &session, &messages);
                    }
                }
            }
            if reset.is_some() {
                logged.iter().for_each(|msg| log_reset(&session, msg));
                return relayer::reset_connection();
            }
            if is_event_stream(response.headers()) {
                let label = next_label(&server, "post");
                let ids: Vec<&serde_json::Value> = logged.iter().filter(|msg| msg.get("method").is_some()).filter_map(|msg| msg.get("id")).collect();
                emit!(kind::STREAM_OPEN, session = %session, stream = %label.1, style = "rmcp", last_event_id = "", ids = %serde_json::Value::from_iter(ids.into_iter().cloned()));
                return relay(server, session, label, response);
            }
            response.map(Body::new)
        }
        Method::GET => {
            let last = header(&parts.headers, "last-event-id").unwrap_or("").to_string();
            if !auth {
                emit!(kind::STREAM_REFUSED, status = 401u16, cause = "token");
                return relayer::refusal(StatusCode::UNAUTHORIZED, -32000, "Unauthorized: missing or wrong bearer token");
            }
            let response = service.handle(Request::from_parts(parts, body)).await;
            let status = response.status().as_u16();
            if status >= 300 || !is_event_stream(response.headers()) {
                let cause = if status == 404 { lost_cause(&server, &named) } else { "refused" };
                emit!(kind::STREAM_REFUSED, status, cause);
                return response.map(Body::new);
            }
            let label = next_label(&server, "get");
            emit!(kind::STREAM_OPEN, session = %named, stream = %label.1, style = "rmcp", last_event_id = %last, ids = "");
            relay(server, named, label, response)
        }
        Method::DELETE => {
            if !auth {
                emit!(kind::HTTP_POST, session = %named, id = "", client_id = "", note = "", method = "DELETE", action = "", key = "", status = 401u16, cause = "token");
                return relayer::refusal(StatusCode::UNAUTHORIZED, -32000, "Unauthorized: missing or wrong bearer token");
            }
            let response = service.handle(Request::from_parts(parts, body)).await;
            let status = response.status().as_u16();
            let cause = match status {
                200..=299 => "accepted",
                404 => lost_cause(&server, &named),
                _ => "refused",
            };
            emit!(kind::HTTP_POST, session = %named, id = "", client_id = "", note = "", method = "DELETE", action = "", key = "", status, cause);
            response.map(Body::new)
        }
        _ => service.handle(Request::from_parts(parts, body)).await.map(Body::new),
    }
}

/// What a session was sent, once accepted: the requests' client ids and actions (for the reply
/// log and knobs), its `initialize` params, and the cancellations it received.
fn admitted(server: &Server, session: &str, messages: &[Value]) {
    for msg in messages {
        match msg.get("method").and_then(Value::as_str) {
            Some("initialize") => {
                let params = msg.get("params").map(Value::to_string).unwrap_or_default();
                emit!(kind::RPC_INITIALIZE, session = %session, params = %params);
            }
            Some("notifications/cancelled") => {
                let request = msg.pointer("/params/requestId").map(id_key).unwrap_or_default();
                emit!(kind::RPC_CANCEL, request = %request, session = %session);
            }
            _ => {}
        }
        if let (Some(id), Some(_)) = (msg.get("id"), msg.get("method")) {
            let relayer::ClientKeys { stamp, knob } = relayer::ClientKeys::of(msg);
            let entry = (stamp, knob, relayer::action_of(msg));
            lock(&server.live).requests.insert((session.to_string(), id_key(id)), entry);
        }
    }
}

/// Send the knobs' server notes (`RelayFault::ServerMessage`) through rmcp to every session
/// initialized when each was added: a notification as it is, a request (`ping`, `roots/list`)
/// under rmcp's own id with the `_meta` that names it. rmcp writes them on the session's
/// standalone stream, and the layer logs them there (`reply.sent` with an empty `id`).
async fn announce(server: Arc<Server>) {
    let changed = lock(&server.knobs).changed.clone();
    loop {
        let notified = changed.notified();
        let notes = lock(&server.knobs).server_notes.clone();
        let due: Vec<(Peer<RoleServer>, Value)> = lock(&server.live)
            .peers
            .values_mut()
            .flat_map(|(peer, seen)| {
                let unseen: Vec<_> = notes.iter().skip(*seen).map(|note| (peer.clone(), note.clone())).collect();
                *seen = notes.len();
                unseen
            })
            .collect();
        for (peer, note) in due {
            tokio::spawn(send_note(peer, note));
        }
        notified.await;
    }
}

async fn send_note(peer: Peer<RoleServer>, note: Value) {
    let mut bare = note.clone();
    let Some(object) = bare.as_object_mut() else { return };
    if object.remove("id").is_none() {
        if let Ok(notification) = serde_json::from_value::<ServerNotification>(note) {
            let _ = peer.send_notification(notification).await;
        }
        return;
    }
    let meta = object.get_mut("params").and_then(Value::as_object_mut).and_then(|params| params.remove("_meta"));
    let meta: RequestMetaObject = meta.and_then(|meta| serde_json::from_value(meta).ok()).unwrap_or_default();
    if object.get("params").and_then(Value::as_object).is_some_and(serde_json::Map::is_empty) {
        object.remove("params");
    }
    let Ok(request) = serde_json::from_value::<ServerRequest>(bare) else { return };
    if let Ok(handle) = peer.send_request_with_option(request, PeerRequestOptions::no_options().with_meta(meta)).await {
        let _ = handle.await_response().await;
    }
}

/// The messages of a POST as the log names them: a client's answer to a server request under
/// the id the request's `_meta` named (the mock's id; rmcp numbers its own), even when the
/// request went out before a restart (v1.sdk_rmcp.none.92ecc825eb6119de).
fn as_logged(server: &Server, session: &str, messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|msg| {
            let named = msg.get("id").filter(|_| msg.get("method").is_none()).and_then(|id| relayer::asked_as(&server.durable, session, id));
            let mut logged = msg.clone();
            if let Some(named) = named {
                logged["id"] = named;
            }
            logged
        })
        .collect()
}

fn is_event_stream(headers: &HeaderMap) -> bool {
    header(headers, "content-type").is_some_and(|v| v.starts_with("text/event-stream"))
}

/// A stream's number and label (`post-N`, `get-N`).
fn next_label(server: &Server, kind: &str) -> (u64, String) {
    let mut live = lock(&server.live);
    live.streams += 1;
    (live.streams, format!("{kind}-{}", live.streams))
}

/// A stream that has ended, waiting for [`close_in_order`] to close it.
struct Closing {
    session: String,
    label: String,
    by: &'static str,
    out: mpsc::UnboundedSender<Bytes>,
}

/// Close the streams that ended at this instant in the order they opened. Streams end together
/// when rmcp drops a session's worker (see the module docs), in its hash map's order, which
/// differs from process to process: each ended stream registers, yields once (so every task the
/// same drop woke has registered), and the first to resume closes the whole batch by number,
/// dropping each body's sender (hyper then ends each response in that order) and logging it.
async fn close_in_order(server: &Server, number: u64, stream: Closing) {
    lock(&server.live).closing.insert(number, stream);
    tokio::task::yield_now().await;
    let batch = std::mem::take(&mut lock(&server.live).closing);
    for stream in batch.into_values() {
        drop(stream.out);
        emit!(kind::STREAM_CLOSE, session = %stream.session, stream = %stream.label, by = stream.by);
    }
}

/// The response with its SSE body passed through [`relay_stream`].
fn relay(server: Arc<Server>, session: String, (number, label): (u64, String), response: RmcpResponse) -> Response {
    let (parts, inner) = response.into_parts();
    let (out, out_rx) = mpsc::unbounded_channel::<Bytes>();
    tokio::task::spawn_local(async move {
        let by = relay_stream(&server, &session, &label, inner, &out).await;
        close_in_order(&server, number, Closing { session, label, by, out }).await;
    });
    let stream = futures_util::stream::unfold(out_rx, |mut rx| async move { rx.recv().await.map(|b| (Ok::<_, std::convert::Infallible>(b), rx)) });
    let mut response = Response::from_parts(parts, Body::from_stream(stream));
    response.headers_mut().remove("content-length");
    response.into_response()
}

/// Pass rmcp's SSE body to the client: log each reply and apply the reply knobs as it comes,
/// then write it (with keep-alives, in seeded chunks) unless a stall holds the stream, until
/// rmcp ends it (`relayer`), a fault ends it (`relayer`) or the client goes (`client`). The
/// knobs as they are at opening decide its fate, as in the mock's writer
/// (`relay/relayer/writer.rs`).
async fn relay_stream(server: &Server, session: &str, label: &str, inner: RmcpBody, out: &mpsc::UnboundedSender<Bytes>) -> &'static str {
    let config = &server.config;
    let (changed, epoch, stalls_at_open, flap) = {
        let knobs = lock(&server.knobs);
        (knobs.changed.clone(), knobs.eof_epoch, knobs.stalls, knobs.flap)
    };
    if flap.is_some() {
        emit!(kind::FAULT_FIRED, fault = "stream_flap", id = "", client_id = "", action = "", session = %session, opening = false);
        return "relayer";
    }
    let mut inner = std::pin::pin!(inner);
    let mut keepalive_at = seam::now() + Duration::from_millis(config.first_keepalive_ms);
    let mut backlog: VecDeque<String> = VecDeque::new();
    let mut pending = String::new();
    // Late replies, each held to its time while the stream goes on (the mock delays one on a
    // task of its own): a delay slept here held the stream's faults up with it (sdk_rmcp seed 7,
    // v1.sdk_rmcp.none.f4ec341c3dc455ee: a flap's cut, due at 92 600 ms, came at 214 400 ms).
    let mut late: Vec<(tokio::time::Instant, Held)> = Vec::new();
    let mut closing = false;
    loop {
        let notified = changed.notified();
        let (stall, eof) = {
            let knobs = lock(&server.knobs);
            (knobs.stalled(stalls_at_open), knobs.eof_epoch != epoch)
        };
        if eof {
            emit!(kind::FAULT_FIRED, fault = "stream_eof", id = "", client_id = "", action = "", session = %session);
            return "relayer";
        }
        if !stall && !flush(server, &mut backlog, out) {
            return "client";
        }
        if closing && backlog.is_empty() && late.is_empty() {
            return "relayer";
        }
        let next_late = late.iter().map(|(due, _)| *due).min();
        tokio::select! {
            frame = inner.frame(), if !closing => match frame {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        pending.push_str(&String::from_utf8_lossy(&data));
                        while let Some(end) = pending.find("\n\n") {
                            let event: String = pending.drain(..end + 2).collect();
                            match reply_knobs(server, session, label, event) {
                                Knobbed::Now(frames) => backlog.extend(frames),
                                Knobbed::Late(due, held) => late.push((due, held)),
                            }
                        }
                    }
                }
                _ => closing = true,
            },
            () = tokio::time::sleep_until(next_late.unwrap_or(keepalive_at)), if next_late.is_some() => {
                let now = seam::now();
                let (due, waiting): (Vec<_>, Vec<_>) = late.drain(..).partition(|(at, _)| *at <= now);
                late = waiting;
                for (_, held) in due {
                    backlog.extend(release(server, session, label, held));
                }
            }
            () = tokio::time::sleep_until(keepalive_at) => {
                if !stall {
                    backlog.push_back(":\n\n".to_string());
                }
                keepalive_at += Duration::from_millis(config.keepalive_ms);
            }
            () = notified => {}
            () = out.closed() => return "client",
        }
    }
}

/// What the reply knobs make of one SSE event: frames to write now, or a late reply and its time.
enum Knobbed {
    Now(Vec<String>),
    Late(tokio::time::Instant, Held),
}

/// A reply the knobs have not swallowed, not yet written: its event, ids, whether it is doubled,
/// and whether replies were withheld as it came.
struct Held {
    event: String,
    text: String,
    id: Value,
    client: String,
    action: String,
    duplicate: bool,
    withheld: bool,
}

/// One SSE event rmcp wrote, through the reply knobs: the frames to write (none when the reply
/// is swallowed or withheld, two when duplicated; a late one at its time), each reply logged as
/// it is written.
fn reply_knobs(server: &Server, session: &str, label: &str, event: String) -> Knobbed {
    let data: String = event
        .split('\n')
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect::<Vec<_>>()
        .join("\n");
    let Ok(msg) = serde_json::from_str::<Value>(&data) else { return Knobbed::Now(vec![event]) };
    let text = msg.to_string();
    let Some(id) = msg.get("id").filter(|_| msg.get("method").is_none()) else {
        if let (Some(id), Some(named)) = (msg.get("id"), msg.get("params").and_then(|params| params.get("_meta")).and_then(|meta| meta.get(SERVER_ID_META))) {
            relayer::remember_asked(&server.durable, session, id, named.clone());
        }
        emit!(kind::REPLY_SENT, id = "", client_id = "", action = "", session = %session, msg = %text, stream = %label);
        return Knobbed::Now(vec![event]);
    };
    let entry = lock(&server.live).requests.get(&(session.to_string(), id_key(id))).cloned();
    let (client, key, action) = entry.unwrap_or_else(|| (String::new(), id_key(id), String::new()));
    let (withhold, swallow, duplicate, late) = {
        let mut knobs = lock(&server.knobs);
        let withhold = knobs.withhold_replies;
        (withhold, knobs.swallow_ids.remove(&key), knobs.duplicate_ids.remove(&key), knobs.late_ids.remove(&key))
    };
    let id = id.clone();
    if swallow {
        emit!(kind::FAULT_FIRED, fault = "swallow_reply", id = %id, client_id = %client, action = %action, session = %session);
        emit!(kind::REPLY_LOST, id = %id, client_id = %client, action = %action, session = %session);
        return Knobbed::Now(Vec::new());
    }
    let held = Held { event, text, id, client, action, duplicate, withheld: withhold };
    match late {
        Some(delay_ms) => {
            emit!(kind::FAULT_FIRED, fault = "late_reply", id = %held.id, client_id = %held.client, action = %held.action, session = %session);
            Knobbed::Late(seam::now() + Duration::from_millis(delay_ms), held)
        }
        None => Knobbed::Now(release(server, session, label, held)),
    }
}

/// Write a reply the knobs let through, unless replies were withheld as it came or are by now:
/// its frames, logged.
fn release(server: &Server, session: &str, label: &str, held: Held) -> Vec<String> {
    let Held { event, text, id, client, action, duplicate, withheld } = held;
    if withheld || lock(&server.knobs).withhold_replies {
        emit!(kind::FAULT_FIRED, fault = "withhold_replies", id = %id, client_id = %client, action = %action, session = %session);
        emit!(kind::REPLY_LOST, id = %id, client_id = %client, action = %action, session = %session);
        return Vec::new();
    }
    let mut frames = vec![event.clone()];
    if duplicate {
        frames.push(event);
        emit!(kind::FAULT_FIRED, fault = "duplicate_reply", id = %id, client_id = %client, action = %action, session = %session);
    }
    emit!(kind::REPLY_SENT, id = %id, client_id = %client, action = %action, session = %session, msg = %text, stream = %label);
    frames
}

/// Write the backlog as seeded chunks; `false` once the client has gone.
fn flush(server: &Server, backlog: &mut VecDeque<String>, out: &mpsc::UnboundedSender<Bytes>) -> bool {
    while let Some(frame) = backlog.pop_front() {
        let bytes = frame.into_bytes();
        let cut = {
            let mut live = lock(&server.live);
            match live.rng.below(3) {
                0 => live.rng.below(bytes.len() as u64) as usize,
                _ => 0,
            }
        };
        let parts = if cut == 0 { vec![&bytes[..]] } else { vec![&bytes[..cut], &bytes[cut..]] };
        for part in parts {
            if out.send(Bytes::copy_from_slice(part)).is_err() {
                return false;
            }
        }
    }
    true
}
