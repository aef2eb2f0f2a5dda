//! The two transports of one stream per session: `GET /sse` opens the stream, whose first event
//! (`endpoint`) names where to POST (`/messages?sessionId=<id>`); replies come back on the
//! stream as `message` events. The relay family's API (`relayer`) and MCP 2024-11-05 HTTP+SSE
//! (`sse`) differ only in what the specification asks of a server the relay API leaves open:
//!
//! - `sse` asks for the bearer token only when serving with `auth`;
//! - `sse` refuses a POST without `sessionId` (400, as the SDKs' servers do), a body that is not
//!   one JSON-RPC 2.0 message (400: a batch, or no `"jsonrpc": "2.0"` envelope; 2024-11-05 has
//!   no batches), an `MCP-Protocol-Version` it does not support (400: a client that negotiated
//!   2025-06-18 or later sends one on every POST), and an `Origin` that is not this server's
//!   (403);
//! - `sse` answers a POST `202 Accepted` with that text as its body (the TypeScript SDK's server
//!   does), and names the endpoint after the `Host` the client used;
//! - `sse` negotiates the protocol version in `initialize` (`negotiate` in relayer.rs).
//!
//! Both keep the strict lifecycle: on a session, a request other than `ping` before
//! `initialize` is answered on the stream with a JSON-RPC error (-32002), not served: the session
//! exists (the stream made it) but is not initialized, so the refusal is the MCP lifecycle's,
//! not HTTP's.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{authorized, header, refusal, reset_connection, writer, App, Session, Sink, Transport};
use crate::emit;
use crate::events::kind;
use crate::net::http::ChannelBody;
use crate::relay::knobs::lock;
use crate::relay::sse::Style;

pub(super) fn router(app: App) -> Router {
    Router::new().route("/sse", get(open_stream)).route("/messages", post(on_post)).with_state(app)
}

/// Whether this is the standard HTTP+SSE transport (not the relay family's API).
fn standard(app: &App) -> bool {
    app.0.transport == Transport::Sse
}

async fn open_stream(State(app): State<App>, headers: HeaderMap) -> Response {
    if app.0.auth && !authorized(&app.0.config, &headers) {
        emit!(kind::STREAM_REFUSED, status = 401, cause = "token");
        if standard(&app) {
            return refusal(StatusCode::UNAUTHORIZED, -32000, "Unauthorized: missing or wrong bearer token");
        }
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if standard(&app) && !origin_allowed(&app, &headers) {
        emit!(kind::STREAM_REFUSED, status = 403, cause = "origin");
        return refusal(StatusCode::FORBIDDEN, -32000, "Forbidden: Origin not allowed");
    }
    let authority = match header(&headers, "host") {
        Some(host) if standard(&app) => host.to_string(),
        _ => app.0.config.authority.clone(),
    };
    let (notes_seen, epoch) = (app.notes_now(), app.epoch_now());
    let pinned = lock(&app.0.knobs).stream_style;
    let (items_tx, items_rx) = mpsc::unbounded_channel();
    let (body_tx, body_rx) = mpsc::unbounded_channel();
    let (session, style) = {
        let mut live = lock(&app.0.live);
        let session = live.new_session_id(app.0.boot);
        let style = Style::from_bits(live.rng.next_u64());
        let style = pinned.unwrap_or(style);
        let sink = Sink::Stream { items: items_tx, style, next_event: 1 };
        live.sessions.insert(session.clone(), Session { sink, initialized: false, notes_seen, epoch });
        (session, style)
    };
    lock(&app.0.durable).issued.insert(session.clone());
    emit!(kind::STREAM_OPEN, session = %session, style = %style.label());
    tokio::task::spawn_local(stream(app.clone(), session, style, authority, items_rx, body_tx));
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::new(ChannelBody(body_rx)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Write one session's stream: the endpoint event, then replies; its end ends the session.
async fn stream(
    app: App,
    session: String,
    style: Style,
    authority: String,
    items: mpsc::UnboundedReceiver<String>,
    body: mpsc::UnboundedSender<bytes::Bytes>,
) {
    let opening = style.opening(&authority, &format!("/messages?sessionId={session}"));
    let by = writer::write(&app, &session, style, [opening].into(), items, &body).await;
    lock(&app.0.live).sessions.remove(&session);
    emit!(kind::STREAM_CLOSE, session = %session, by);
}

async fn on_post(
    State(app): State<App>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let session = query.get("sessionId").cloned();
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_string);
    let parsed: Option<Value> = serde_json::from_str(&body).ok();
    let msg = parsed.clone().unwrap_or(Value::Null);
    let id = msg.get("id").map(Value::to_string).unwrap_or_default();
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("").to_string();
    let action = super::action_of(&msg);
    let client_id = super::stamped_client(&msg);
    // The step a client notification names in its `_meta` (empty for anything else).
    let note = crate::relay::client::note_step(&msg).map(Value::to_string).unwrap_or_default();
    let session = if standard(&app) { session } else { Some(session.unwrap_or_default()) };
    // A reset before the POST was served is logged with status 0: nothing admitted or run.
    let reset = lock(&app.0.knobs).reset_posts;
    let admitted = (reset != Some(false)).then(|| app.admit(session.as_deref(), &headers, parsed.as_ref()));
    let (status, cause) = admitted.map_or((None, "reset"), |(status, cause)| (Some(status), cause));
    let session = session.unwrap_or_default();
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
    match (reset, status) {
        (None, Some(StatusCode::ACCEPTED)) if standard(&app) => (StatusCode::ACCEPTED, "Accepted").into_response(),
        (None, Some(status)) if standard(&app) => refusal(status, -32000, &format!("Refused: {cause}")),
        (None, Some(status)) => status.into_response(),
        _ => {
            emit!(kind::FAULT_FIRED, fault = "post_reset", id = %id, client_id = %client_id, action = %action, session = %session);
            reset_connection()
        }
    }
}

impl App {
    /// Admit a POST as a real MCP server does, checking in its order: the bearer token, then
    /// (an injected fault) a refusal of everything, the session, the content type, the body.
    /// Returns the status and its cause, which the relayer logs: `accepted`, `token`, `fault`,
    /// `gone` (a session it issued and has since closed or lost), `unknown` (one it never
    /// issued), `content_type` (not `application/json`), `malformed` (not JSON); and for `sse`
    /// also `origin` (403), `no_session` (no `sessionId`: 400), `batch` (a JSON array: 400) and
    /// `invalid` (not a JSON-RPC 2.0 message: 400), `protocol_version` (an `MCP-Protocol-Version`
    /// it does not support, which a client that negotiated 2025-06-18 or later sends: 400).
    fn admit(&self, session: Option<&str>, headers: &HeaderMap, msg: Option<&Value>) -> (StatusCode, &'static str) {
        let standard = standard(self);
        if self.0.auth && !authorized(&self.0.config, headers) {
            return (StatusCode::UNAUTHORIZED, "token");
        }
        if let Some(status) = lock(&self.0.knobs).reject_status {
            return (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), "fault");
        }
        if standard && !origin_allowed(self, headers) {
            return (StatusCode::FORBIDDEN, "origin");
        }
        let Some(session) = session else { return (StatusCode::BAD_REQUEST, "no_session") };
        if !self.knows(session) {
            let issued = lock(&self.0.durable).issued.contains(session);
            return (StatusCode::NOT_FOUND, if issued { "gone" } else { "unknown" });
        }
        let version = header(headers, "mcp-protocol-version");
        if standard && version.is_some_and(|v| !super::SUPPORTED_VERSIONS.contains(&v)) {
            return (StatusCode::BAD_REQUEST, "protocol_version");
        }
        let json = headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("application/json"));
        if !json {
            return (StatusCode::UNSUPPORTED_MEDIA_TYPE, "content_type");
        }
        let Some(msg) = msg.filter(|msg| !msg.is_null()) else { return (StatusCode::BAD_REQUEST, "malformed") };
        if standard && msg.is_array() {
            return (StatusCode::BAD_REQUEST, "batch");
        }
        if standard && !super::streamable::is_message(msg) {
            return (StatusCode::BAD_REQUEST, "invalid");
        }
        (StatusCode::ACCEPTED, "accepted")
    }
}

/// Whether a request's `Origin`, when it has one, is this server's (the transports' security
/// warning: "Servers MUST validate the Origin header on all incoming connections to prevent DNS
/// rebinding attacks"): a loopback origin or the configured authority. Clients that are not
/// browsers send none.
pub(super) fn origin_allowed(app: &App, headers: &HeaderMap) -> bool {
    let Some(origin) = header(headers, "origin") else { return true };
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else { return false };
    let host = rest.rsplit_once(':').map_or(rest, |(host, _)| host);
    matches!(host, "127.0.0.1" | "localhost" | "[::1]") || rest == app.0.config.authority
}
