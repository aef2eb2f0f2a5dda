//! The daemon's side of OAuth: discovery (protected-resource and authorization-server
//! metadata), dynamic client registration, an authorization request with PKCE S256 handed to the
//! browser, the redirect listener that receives the code, and the code exchange. The whole flow
//! is bounded by the caller's OAuth bound.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::knobs::lock;
use super::process::Ctx;
use super::upstream::UpstreamError;
use super::{pkce, port, BROWSER_PORT, CALLBACK_BASE, MCP_PORT};
use crate::emit;
use crate::events::{host, kind};
use crate::net::url;

/// Codes that arrived at the redirect listener, by OAuth `state`.
#[derive(Debug, Default)]
pub struct Callbacks {
    /// States of flows in progress: a redirect for any other state is refused.
    pending: BTreeSet<String>,
    codes: BTreeMap<String, String>,
    changed: Arc<Notify>,
}

pub type SharedCallbacks = Arc<Mutex<Callbacks>>;

pub fn callbacks() -> SharedCallbacks {
    Arc::new(Mutex::new(Callbacks::default()))
}

/// `GET /callback?code=..&state=..`: the browser coming back after the user approved.
pub fn callback_router(callbacks: SharedCallbacks) -> Router {
    Router::new()
        .route("/callback", get(callback))
        .with_state(callbacks)
}

async fn callback(
    State(callbacks): State<SharedCallbacks>,
    Query(query): Query<BTreeMap<String, String>>,
) -> StatusCode {
    let (Some(code), Some(state)) = (query.get("code"), query.get("state")) else {
        return StatusCode::BAD_REQUEST;
    };
    let mut callbacks = lock(&callbacks);
    if !callbacks.pending.contains(state) {
        return StatusCode::BAD_REQUEST;
    }
    callbacks.codes.insert(state.clone(), code.clone());
    callbacks.changed.notify_waiters();
    StatusCode::OK
}

fn failed(what: &str) -> impl Fn(String) -> UpstreamError + '_ {
    move |why| UpstreamError::Failed(format!("OAuth {what}: {why}"))
}

/// What a token endpoint gave: the access token and, when the server rotates them, the refresh
/// token for the next renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens {
    pub access: String,
    pub refresh: Option<String>,
}

fn tokens(reply: &Value) -> Result<Tokens, UpstreamError> {
    let access = reply
        .get("access_token")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| failed("token")(format!("no access_token in {reply}")))?;
    let refresh = reply
        .get("refresh_token")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(Tokens { access, refresh })
}

/// Renew an expired access token with the refresh token (RFC 6749 §6), without the user.
pub async fn refresh(ctx: &Rc<Ctx>, refresh_token: &str) -> Result<Tokens, UpstreamError> {
    let client_id = ctx.state.borrow().upstream.client_id.clone();
    let client_id = client_id.ok_or_else(|| failed("refresh")("no registered client".into()))?;
    let endpoints = discover(ctx).await?;
    let body = url::form(&[
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
        ("client_id", &client_id),
    ]);
    let reply = get_json(ctx, &endpoints.token, "POST", body).await?;
    tokens(&reply)
}

/// Run one authorization flow for request `request_id`; the tokens it obtained.
pub async fn run(ctx: &Rc<Ctx>, request_id: &str, bound_ms: u64) -> Result<Tokens, UpstreamError> {
    let (verifier, state) = {
        let mut process = ctx.state.borrow_mut();
        (process.rng.hex(64), process.rng.hex(16))
    };
    let pending = Pending::new(&ctx.callbacks, &state);
    emit!(kind::DAEMON_OAUTH, pid = ctx.pid, id = %request_id, phase = "start", state = %state);
    let flow = flow(ctx, &verifier, &state);
    let outcome = tokio::time::timeout(Duration::from_millis(bound_ms), flow).await;
    drop(pending);
    let (phase, result) = match outcome {
        Ok(Ok(token)) => ("token", Ok(token)),
        Ok(Err(error)) => ("error", Err(error)),
        Err(_) => {
            let text = format!("OAuth authorization timed out after {bound_ms} ms");
            ("timeout", Err(UpstreamError::Timeout(text)))
        }
    };
    emit!(kind::DAEMON_OAUTH, pid = ctx.pid, id = %request_id, phase, state = %state);
    result
}

/// A flow's `state` in progress at the redirect listener, for as long as the flow runs: dropped
/// when the flow ends, however it ends. A flow whose request is dropped mid-wait (the daemon
/// drops work nobody waits for: its client's connection went) is over too, and its redirect is
/// refused; a state left pending had the listener accept the user's approval and the code
/// thrown away (`approvals_are_used`, daemon hunt seed 2026, `v1.daemon.none.7f4742491c3a899f`).
struct Pending {
    callbacks: SharedCallbacks,
    state: String,
}

impl Pending {
    fn new(callbacks: &SharedCallbacks, state: &str) -> Self {
        lock(callbacks).pending.insert(state.to_string());
        Self { callbacks: callbacks.clone(), state: state.to_string() }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut callbacks = lock(&self.callbacks);
        callbacks.pending.remove(&self.state);
        callbacks.codes.remove(&self.state);
    }
}

/// The authorization server's endpoints.
struct Endpoints {
    authorize: String,
    token: String,
    register: String,
}

async fn flow(ctx: &Rc<Ctx>, verifier: &str, state: &str) -> Result<Tokens, UpstreamError> {
    let endpoints = discover(ctx).await?;
    let redirect_uri = format!(
        "http://{}:{}/callback",
        host::DAEMON,
        port(CALLBACK_BASE, ctx.pid)
    );
    let client_id = register(ctx, &endpoints, &redirect_uri).await?;
    let challenge = pkce::challenge(verifier);
    let query = url::form(&[
        ("response_type", "code"),
        ("client_id", &client_id),
        ("redirect_uri", &redirect_uri),
        ("code_challenge", &challenge),
        ("code_challenge_method", "S256"),
        ("state", state),
    ]);
    let authorize_url = format!("{}?{query}", endpoints.authorize);
    let opened = ctx
        .http
        .fetch((host::BROWSER, BROWSER_PORT), "POST", "/open", &[], authorize_url)
        .await;
    opened.map_err(|e| failed("browser")(e.to_string()))?;
    let code = wait_for_code(ctx, state).await;
    let body = url::form(&[
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("redirect_uri", &redirect_uri),
        ("client_id", &client_id),
        ("code_verifier", verifier),
    ]);
    let reply = get_json(ctx, &endpoints.token, "POST", body).await?;
    tokens(&reply)
}

async fn wait_for_code(ctx: &Ctx, state: &str) -> String {
    loop {
        let changed = lock(&ctx.callbacks).changed.clone();
        let notified = changed.notified();
        if let Some(code) = lock(&ctx.callbacks).codes.get(state) {
            return code.clone();
        }
        notified.await;
    }
}

/// RFC 9728 then RFC 8414: from the MCP server to its authorization server's endpoints.
async fn discover(ctx: &Ctx) -> Result<Endpoints, UpstreamError> {
    let resource_url = format!(
        "http://{}:{MCP_PORT}/.well-known/oauth-protected-resource",
        host::MCP
    );
    let resource = get_json(ctx, &resource_url, "GET", String::new()).await?;
    let issuer = resource
        .pointer("/authorization_servers/0")
        .and_then(Value::as_str);
    let issuer = issuer.ok_or_else(|| failed("discovery")("no authorization server".into()))?;
    let metadata = get_json(
        ctx,
        &format!("{issuer}/.well-known/oauth-authorization-server"),
        "GET",
        String::new(),
    )
    .await?;
    let endpoint = |name: &str| {
        metadata
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Ok(Endpoints {
        authorize: endpoint("authorization_endpoint"),
        token: endpoint("token_endpoint"),
        register: endpoint("registration_endpoint"),
    })
}

/// Dynamic client registration, once per process.
async fn register(
    ctx: &Ctx,
    endpoints: &Endpoints,
    redirect_uri: &str,
) -> Result<String, UpstreamError> {
    if let Some(client_id) = ctx.state.borrow().upstream.client_id.clone() {
        return Ok(client_id);
    }
    let body = json!({
        "client_name": "sim-daemon",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none"
    });
    let reply = get_json(ctx, &endpoints.register, "POST", body.to_string()).await?;
    let client_id = reply.get("client_id").and_then(Value::as_str);
    let client_id = client_id
        .ok_or_else(|| failed("registration")(reply.to_string()))?
        .to_string();
    ctx.state.borrow_mut().upstream.client_id = Some(client_id.clone());
    Ok(client_id)
}

/// A request to an absolute URL whose answer is a JSON object; an OAuth error body fails.
async fn get_json(
    ctx: &Ctx,
    target_url: &str,
    method: &str,
    body: String,
) -> Result<Value, UpstreamError> {
    let target = url::parse(target_url).ok_or_else(|| failed("url")(target_url.to_string()))?;
    let content_type = if body.starts_with('{') {
        "application/json"
    } else {
        "application/x-www-form-urlencoded"
    };
    let headers = [("content-type", content_type.to_string())];
    let reply = ctx
        .http
        .fetch((&target.host, target.port), method, &target.target, &headers, body)
        .await;
    let reply = reply.map_err(|e| failed("request")(e.to_string()))?;
    let value: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
    if !(200..300).contains(&reply.status) {
        return Err(failed("request")(format!("HTTP {} {value}", reply.status)));
    }
    Ok(value)
}
