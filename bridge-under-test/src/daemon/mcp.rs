//! The upstream MCP server: JSON-RPC over HTTP POST (`/mcp`) with `rmcp::model` results for
//! `initialize`, `tools/list` (paged by `cursor` / `nextCursor`), `tools/call`,
//! `resources/list` and `resources/read`. Without a valid bearer token it answers 401 pointing at
//! its protected-resource metadata, which names the authorization server. Fault knobs:
//! [`McpKnobs`](super::knobs::McpKnobs).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, InitializeResult, ListResourcesResult,
    ListToolsResult, ProtocolVersion, ReadResourceResult, Resource, ResourceContents,
    ResourcesCapability, ServerCapabilities, Tool, ToolsCapability,
};
use serde_json::{json, Value};

use super::knobs::{lock, SharedMcpKnobs};
use super::oauth::{self, SharedIssued};
use super::MCP_PORT;
use crate::emit;
use crate::events::{host, kind};
use crate::net::http;
use crate::net::jsonrpc::{self, Shape};
use crate::seam;

/// The `_meta` key under which the daemon names the request it is serving.
pub const REQUEST_META: &str = "daemonRequest";

/// The resource this server offers.
pub const RESOURCE_URI: &str = "file:///notes.txt";

#[derive(Clone)]
struct App {
    knobs: SharedMcpKnobs,
    issued: SharedIssued,
    /// The bearer tokens that have sent `initialize`: as a real server, this one answers requests
    /// other than `initialize` and `ping` only in an initialized session.
    sessions: Arc<Mutex<BTreeSet<String>>>,
}

/// Serve until the simulation ends.
pub async fn run(
    knobs: SharedMcpKnobs,
    issued: SharedIssued,
) -> Result<(), Box<dyn std::error::Error>> {
    let router = Router::new()
        .route("/mcp", post(on_post))
        .route(
            "/.well-known/oauth-protected-resource",
            get(resource_metadata),
        )
        .with_state(App {
            knobs,
            issued,
            sessions: Arc::default(),
        });
    http::serve(MCP_PORT, router).await?;
    Ok(())
}

fn base() -> String {
    format!("http://{}:{MCP_PORT}", host::MCP)
}

/// RFC 9728 protected-resource metadata: which authorization server protects this server.
async fn resource_metadata() -> Json<Value> {
    Json(json!({"resource": format!("{}/mcp", base()), "authorization_servers": [oauth::issuer()]}))
}

fn bearer(headers: &HeaderMap) -> &str {
    let token = headers.get("authorization").and_then(|v| v.to_str().ok());
    token.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("")
}

fn authorized(app: &App, headers: &HeaderMap) -> bool {
    lock(&app.issued).valid(bearer(headers))
}

async fn on_post(State(app): State<App>, headers: HeaderMap, body: String) -> Response {
    let msg: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let request = msg
        .pointer(&format!("/params/_meta/{REQUEST_META}"))
        .and_then(Value::as_str);
    let request = request.unwrap_or("").to_string();
    let auth = authorized(&app, &headers);
    emit!(kind::SERVER_RECV, msg = %body, request = %request, auth);
    let mut owed = Owed(Some(request.clone()));
    if !auth {
        owed.answered();
        emit!(kind::SERVER_SEND, msg = "", status = 401u16, request = %request);
        let challenge = format!(
            "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource\"",
            base()
        );
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)]).into_response();
    }
    let Shape::Request { id, method } = jsonrpc::shape(&msg) else {
        owed.answered();
        emit!(kind::SERVER_SEND, msg = "", status = 202u16, request = %request);
        return StatusCode::ACCEPTED.into_response();
    };
    if lock(&app.knobs).wedged.contains(&method) {
        emit!(kind::FAULT_FIRED, fault = "wedged_method", id = %request, method = %method);
        std::future::pending::<()>().await;
    }
    let session = bearer(&headers).to_string();
    let initialized = if method == "initialize" {
        lock(&app.sessions).insert(session);
        true
    } else {
        method == "ping" || lock(&app.sessions).contains(&session)
    };
    let answered = if initialized {
        answer(&app, &msg, &method, &request).await
    } else {
        Err((-32600, format!("Bad Request: {method} before initialize")))
    };
    let reply = match answered {
        Ok(result) => jsonrpc::result(&id, result),
        Err((code, text)) => jsonrpc::error(Some(&id), code, &text),
    };
    owed.answered();
    emit!(kind::SERVER_SEND, msg = %reply, status = 200u16, request = %request);
    Json(reply).into_response()
}

/// A received message not yet answered: dropped unanswered (the daemon closed the connection and
/// the handler went with it), it records `server.gone` — while the simulation runs, not when the
/// run's hosts are torn down.
struct Owed(Option<String>);

impl Owed {
    fn answered(&mut self) {
        self.0 = None;
    }
}

impl Drop for Owed {
    fn drop(&mut self) {
        if let Some(request) = self.0.take().filter(|_| turmoil::sim_elapsed().is_some()) {
            emit!(kind::SERVER_GONE, request = %request);
        }
    }
}

type Answer = Result<Value, (i64, String)>;

async fn answer(app: &App, msg: &Value, method: &str, request: &str) -> Answer {
    match method {
        "initialize" => Ok(initialize_result()),
        "ping" => Ok(json!({})),
        "tools/list" => list_page(app, msg, request).await,
        "tools/call" => call(app, msg, request).await,
        "resources/list" => {
            emit!(kind::SERVER_EXEC, request = %request, method);
            let resources = vec![Resource::new(RESOURCE_URI, "notes")];
            let mut result = ListResourcesResult::with_all_items(resources);
            result.result_type = None;
            Ok(serde_json::to_value(result).unwrap_or(Value::Null))
        }
        "resources/read" => {
            emit!(kind::SERVER_EXEC, request = %request, method);
            let uri = msg
                .pointer("/params/uri")
                .and_then(Value::as_str)
                .unwrap_or(RESOURCE_URI);
            let mut result =
                ReadResourceResult::new(vec![ResourceContents::text("remember the milk", uri)]);
            result.result_type = None;
            Ok(serde_json::to_value(result).unwrap_or(Value::Null))
        }
        _ => Err((-32601, format!("Method not found: {method}"))),
    }
}

fn initialize_result() -> Value {
    let mut capabilities = ServerCapabilities::default();
    capabilities.tools = Some(ToolsCapability::default());
    capabilities.resources = Some(ResourcesCapability::default());
    let result = InitializeResult::new(capabilities)
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
        .with_server_info(Implementation::new("mock-mcp", "1.0.0"));
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// The page a cursor names: no cursor is page 1, `page-N` is page N.
fn page_of(cursor: Option<&str>) -> Option<u32> {
    match cursor {
        None => Some(1),
        Some(cursor) => cursor
            .strip_prefix("page-")?
            .parse()
            .ok()
            .filter(|n| *n >= 2),
    }
}

async fn list_page(app: &App, msg: &Value, request: &str) -> Answer {
    let cursor = msg.pointer("/params/cursor").and_then(Value::as_str);
    let Some(page) = page_of(cursor) else {
        return Err((-32602, format!("Invalid cursor: {cursor:?}")));
    };
    if page == 1 {
        emit!(kind::SERVER_EXEC, request = %request, method = "tools/list");
    }
    let (delay_ms, next) = {
        let knobs = lock(&app.knobs);
        let next = if knobs.endless {
            Some(page + 1)
        } else if knobs.repeat_at_page == Some(page) && page >= 2 {
            Some((page - 1).max(2))
        } else {
            (page < knobs.pages.max(1)).then_some(page + 1)
        };
        (knobs.page_delays.get(&page).copied(), next)
    };
    if let Some(delay_ms) = delay_ms {
        emit!(kind::FAULT_FIRED, fault = "page_delay", id = %request);
        seam::sleep_ms(delay_ms).await;
    }
    if next.is_some() {
        lock(&app.knobs).cursor_pages += 1;
    }
    let tools = ["a", "b"]
        .iter()
        .map(|suffix| {
            let schema = json!({"type": "object", "properties": {}});
            Tool::new(
                format!("tool-{page}{suffix}"),
                "A listed tool.",
                schema.as_object().cloned().unwrap_or_default(),
            )
        })
        .collect();
    let mut result = ListToolsResult::with_all_items(tools);
    result.next_cursor = next.map(|n| format!("page-{n}"));
    result.result_type = None;
    Ok(serde_json::to_value(result).unwrap_or(Value::Null))
}

async fn call(app: &App, msg: &Value, request: &str) -> Answer {
    emit!(kind::SERVER_EXEC, request = %request, method = "tools/call");
    let asked_ms = msg
        .pointer("/params/arguments/work_ms")
        .and_then(Value::as_u64)
        .unwrap_or(10);
    let slow_ms = lock(&app.knobs).slow_tool_ms;
    if slow_ms.is_some() {
        emit!(kind::FAULT_FIRED, fault = "slow_tool", id = %request);
    }
    seam::sleep_ms(slow_ms.unwrap_or(asked_ms)).await;
    let mut result = CallToolResult::success(vec![ContentBlock::text("built")]);
    result.result_type = None;
    Ok(serde_json::to_value(result).unwrap_or(Value::Null))
}
