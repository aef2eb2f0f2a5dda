//! The daemon's warm connection to the upstream MCP server: JSON-RPC over HTTP POST with the
//! bearer token, `initialize` once per process, and the OAuth flow when the server answers 401.

use std::rc::Rc;
use std::time::Duration;

use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion};
use serde_json::{json, Value};

use super::mcp::REQUEST_META;
use super::process::Ctx;
use super::{authorize, MCP_PORT};
use crate::events::host;
use crate::net::http;

/// Why an upstream step failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamError {
    /// A deadline of the operation expired (OAuth wait, a page, the ceiling).
    Timeout(String),
    Failed(String),
}

/// What the daemon keeps of its upstream connection.
#[derive(Debug, Default)]
pub struct Session {
    pub token: Option<String>,
    /// The refresh token of the last grant: renews an expired access token without the user.
    pub refresh_token: Option<String>,
    pub initialized: bool,
    /// The client id from dynamic registration, reused by later flows.
    pub client_id: Option<String>,
    next_id: u64,
}

/// `closeServer`: drop the warm connection, its open HTTP connections with it (the token stays).
pub fn close(ctx: &Ctx) {
    ctx.state.borrow_mut().upstream.initialized = false;
    ctx.http.close((host::MCP, MCP_PORT));
}

/// What an HTTP exchange with the server gave.
enum Exchange {
    Result(Value),
    Unauthorized,
}

/// Make sure the session is initialized, authorizing first if the server asks for it; the
/// OAuth wait is bounded by `oauth_bound_ms`, and each handshake (`initialize` and its
/// `notifications/initialized`) by `request_bound_ms` when the caller has no bound of its own
/// around the whole connect: an SDK's per-request timeout covers `initialize` as it covers any
/// request, so a server that accepts the handshake and never answers it cannot hold a listing
/// open behind heartbeats (`action_within_its_path`, race `daemon_listing_behind_an_unanswered_initialize`).
pub async fn connect(
    ctx: &Rc<Ctx>,
    request_id: &str,
    oauth_bound_ms: u64,
    request_bound_ms: Option<u64>,
) -> Result<(), UpstreamError> {
    if ctx.state.borrow().upstream.initialized {
        return Ok(());
    }
    let mut refreshed = false;
    for _ in 0..3 {
        let used = ctx.state.borrow().upstream.token.clone();
        let handshake = async {
            let exchange = exchange(ctx, request_id, "initialize", initialize_params(), true).await?;
            if let Exchange::Result(_) = exchange {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                post(ctx, note).await?;
            }
            Ok(exchange)
        };
        let handshake = match request_bound_ms {
            Some(ms) => tokio::time::timeout(Duration::from_millis(ms), handshake)
                .await
                .unwrap_or_else(|_| {
                    Err(UpstreamError::Timeout(format!("initialize timed out after {ms} ms")))
                }),
            None => handshake.await,
        };
        match handshake? {
            Exchange::Result(_) => {
                ctx.state.borrow_mut().upstream.initialized = true;
                return Ok(());
            }
            // Another request renewed the token meanwhile: try the new one.
            Exchange::Unauthorized if ctx.state.borrow().upstream.token != used => {}
            Exchange::Unauthorized => {
                // An expired token is renewed once with the refresh token; without one, or if
                // the renewal fails, the user authorizes again.
                let refresh = if refreshed {
                    None
                } else {
                    ctx.state.borrow_mut().upstream.refresh_token.take()
                };
                refreshed = true;
                let renewed = match refresh {
                    Some(refresh) => authorize::refresh(ctx, &refresh).await.ok(),
                    None => None,
                };
                let tokens = match renewed {
                    Some(tokens) => tokens,
                    None => authorize::run(ctx, request_id, oauth_bound_ms).await?,
                };
                let mut state = ctx.state.borrow_mut();
                state.upstream.token = Some(tokens.access);
                state.upstream.refresh_token = tokens.refresh;
            }
        }
    }
    Err(UpstreamError::Failed(
        "the MCP server refused the new token".into(),
    ))
}

fn initialize_params() -> Value {
    let params = InitializeRequestParams::new(
        ClientCapabilities::default(),
        Implementation::new("sim-daemon", "2.0.0"),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25);
    serde_json::to_value(params).unwrap_or(Value::Null)
}

/// One JSON-RPC request on the session; its result. A token that expired under a warm session
/// (the server answers 401) is renewed, the session initialized again, and the request sent once
/// more: the OAuth wait that may take is bounded by `oauth_bound_ms`.
pub async fn rpc(
    ctx: &Rc<Ctx>,
    request_id: &str,
    method: &str,
    params: Value,
    oauth_bound_ms: u64,
) -> Result<Value, UpstreamError> {
    let used = ctx.state.borrow().upstream.token.clone();
    match exchange(ctx, request_id, method, params.clone(), true).await? {
        Exchange::Result(result) => return Ok(result),
        Exchange::Unauthorized => {}
    }
    if ctx.state.borrow().upstream.token == used {
        ctx.state.borrow_mut().upstream.initialized = false;
    }
    connect(ctx, request_id, oauth_bound_ms, None).await?;
    match exchange(ctx, request_id, method, params, false).await? {
        Exchange::Result(result) => Ok(result),
        Exchange::Unauthorized => Err(UpstreamError::Failed(format!("{method}: unauthorized"))),
    }
}

async fn exchange(
    ctx: &Rc<Ctx>,
    request_id: &str,
    method: &str,
    mut params: Value,
    allow_401: bool,
) -> Result<Exchange, UpstreamError> {
    let id = {
        let mut state = ctx.state.borrow_mut();
        state.upstream.next_id += 1;
        state.upstream.next_id
    };
    params["_meta"] = json!({ REQUEST_META: request_id });
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let reply = post(ctx, msg).await?;
    if reply.status == 401 && allow_401 {
        return Ok(Exchange::Unauthorized);
    }
    if reply.status != 200 {
        return Err(UpstreamError::Failed(format!(
            "{method}: HTTP {}",
            reply.status
        )));
    }
    let body: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
    if let Some(message) = body.pointer("/error/message").and_then(Value::as_str) {
        return Err(UpstreamError::Failed(format!("{method}: {message}")));
    }
    body.get("result")
        .cloned()
        .map(Exchange::Result)
        .ok_or_else(|| UpstreamError::Failed(format!("{method}: not a JSON-RPC response")))
}

async fn post(ctx: &Ctx, msg: Value) -> Result<http::Reply, UpstreamError> {
    let mut headers = vec![("content-type", "application/json".to_string())];
    if let Some(token) = ctx.state.borrow().upstream.token.clone() {
        headers.push(("authorization", format!("Bearer {token}")));
    }
    ctx.http
        .fetch((host::MCP, MCP_PORT), "POST", "/mcp", &headers, msg.to_string())
        .await
        .map_err(|e| UpstreamError::Failed(format!("MCP server unreachable: {e}")))
}
